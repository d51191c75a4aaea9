"""The serve table and the HTML report's serving section, from records (truepeak.report.serve)."""

from __future__ import annotations

import io

from truepeak.records import Correctness, MeasurementSummary, ServingMetrics, ServingWorkload, make_record
from truepeak.report.html import html_report
from truepeak.report.serve import COLUMNS, level_cells, render_serving


def _level(c: int, tpot: float, ceiling: float | None) -> object:
    decode = c / tpot
    d = ServingMetrics(output_tokens_per_s=0.9 * decode, requests_per_s=1.5, ttft_median_s=0.01171,
                       ttft_p90_s=0.01601, ttft_p99_s=0.01828, tpot_median_s=tpot, tpot_p90_s=tpot, tpot_p99_s=tpot,
                       itl_median_s=tpot, itl_p90_s=tpot, itl_p99_s=tpot, decode_tokens_per_s=decode,
                       ceiling_tokens_per_s=ceiling, ceiling_fraction=decode / ceiling if ceiling else None)
    w = ServingWorkload(model="tiny", concurrency=c, input_tokens_per_request=128, output_tokens_per_request=64,
                        requests=16, endpoint="completions")
    return make_record(workload=w, backend="server at http://127.0.0.1:8000", format=None, status="ok",
                       measurement=MeasurementSummary(mode="streaming", median_s=0.6),
                       correctness=Correctness(passed=True, wrong=1, checked=16), derived=d)


def test_a_level_row_with_the_planner_ceiling_and_na_for_what_it_lacks():
    """concurrency 4 at TPOT 9.089 ms: decode = 4 / 0.009089 = 440.09 tok/s; ceiling 15186 -> 2.898 %."""
    cells = dict(zip([c.header for c in COLUMNS], level_cells(_level(4, 0.009089, 15186.0))))
    assert cells["completed / sent"] == "15 / 16"
    assert cells["TTFT ms p50 / p90 / p99"] == "11.71 / 16.01 / 18.28"
    assert cells["decode tok/s"] == "440" and cells["planner ceiling tok/s"] == "15186"
    assert cells["% of ceiling"] == "2.9"
    assert cells["planner expected tok/s"] == cells["% of expected"] == cells["largest lever"] == "n/a"
    no_plan = dict(zip([c.header for c in COLUMNS], level_cells(_level(1, 0.01, None))))
    assert no_plan["planner ceiling tok/s"] == no_plan["% of ceiling"] == "n/a"


def test_table_and_report_section():
    recs = [_level(16, 0.01644, 23283.0), _level(1, 0.009112, 10403.0)]
    buf = io.StringIO()
    render_serving(recs, file=buf)
    text = buf.getvalue()
    assert text.index("│           1 │") < text.index("│          16 │")  # sorted by concurrency
    page = html_report(recs)
    assert '<h2 id="serving">Serving</h2>' in page and page.count("<svg") == 1 and "n/a" in page


def test_a_status_line_ends_the_waiting_bar():
    """Regression: in a terminal the "waiting for the server" bar went on redrawing after the "ready" line."""
    import io

    from rich.console import Console

    from truepeak.report.serve import Progress

    p = Progress(enabled=False)
    p.console, p.enabled = Console(file=io.StringIO(), force_terminal=True, width=80), True
    with p:
        p.wait(3.0, 600.0, "loading weights")
        assert [t.description for t in p._bar.tasks][0].startswith("waiting")
        p.line("server ready after 3.0 s")
        assert p._bar.tasks == []
        p.request(1, 2, 8)
        assert [t.description for t in p._bar.tasks] == ["concurrency 1: 2 requests done"]
