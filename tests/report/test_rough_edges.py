"""Regressions of the report's rough edges: format labels that wrapped at their hyphen in the HTML, the GEMM units line
under collective tables, fp8 scale layouts merged into one roofline series, and `truepeak compare` of a `truepeak peak`
file against a `truepeak run` file matching nothing. Values by hand from the records built here (conftest.py)."""

from __future__ import annotations

import re

import pytest

from truepeak.records import Record
from truepeak.report import html as H
from truepeak.report.compare import compare, compare_text, match_key
from truepeak.report.export import kind_table, units_footer
from truepeak.report.load import Results
from truepeak.report.markdown import report_markdown
from truepeak.report.plots import FORMAT_COLOURS, roofline_chart, series_colours
from truepeak.units import UNITS_FOOTER


def _copy(rec: Record) -> dict:
    return rec.to_dict()


def fp8(three, scaling: str, m: int, time_s: float) -> Record:
    """An fp8_e4m3 m x 4096 x 4096 GEMM with the given scale layout: 2 m 4096^2 FLOP in ``time_s``; minimum traffic
    m x 4096 + 4096^2 (fp8, 1 B) + m x 4096 x 2 (bf16 out) bytes."""
    r = _copy(three[1])
    flop = 2 * m * 4096 * 4096
    nbytes = m * 4096 + 4096 * 4096 + 2 * m * 4096
    r.update(format="fp8_e4m3", key=f"fp8|{scaling}|{m}")
    r["measurement"]["steady_median_s"] = time_s
    r["workload"] = {"label": f"{m}x4096x4096", "m": m, "n": 4096, "k": 4096, "scaling": scaling,
                     "flop": flop, "min_bytes": nbytes, "intensity": flop / nbytes}
    r["derived"].update(flop_per_s=flop / time_s, dense_peak_flop_per_s=1978.9e12,
                        dense_fraction=flop / time_s / 1978.9e12)
    return Record.from_dict(r)


# -- 1. a format label stays on one line in the HTML ------------------------------------------------------------------
def test_format_cells_never_wrap(three):
    page = H.html_report([three[1], fp8(three, "tensor", 4096, 200e-6), fp8(three, "row", 4096, 210e-6)])
    assert "td.fmt { white-space: nowrap; }" in page
    # peaks table and the all-records table: every format cell carries the class
    assert page.count('<td class="fmt">fp8_e4m3 (per-tensor)</td>') == 2
    assert page.count('<td class="fmt">fp8_e4m3 (per-row)</td>') == 2
    assert '<td class="fmt">bf16</td>' in page
    assert not re.search(r"<td>fp8_e4m3 \(", page)


# -- 2. each table kind states the units that apply to it -------------------------------------------------------------
def _fit(three) -> Record:
    r = _copy(three[1])
    r.update(kind="collective_fit", backend="nccl", format="bf16", mode="eager", time_s=None, key="fit",
             correctness=None, rotation=None)
    r["workload"] = {"op": "all_reduce", "n_ranks": 2, "dtype": "bf16", "min_bytes": 1024, "max_bytes": 2**30}
    r["measurement"] = {"mode": "eager", "points": []}
    r["derived"] = {"alpha_s": 16.6e-6, "busbw_bytes_per_s": 325.2e9, "points": 21, "max_rel_residual": 0.042}
    return Record.from_dict(r)


def _coll(three) -> Record:
    r = _copy(three[1])
    r.update(kind="collective", backend="nccl", format="bf16", mode="eager", key="coll", rotation=None,
             correctness={"wrong": 0, "checked": 2**19, "passed": True})
    r["measurement"].update(mode="eager", steady_median_s=24.6e-6)
    r["workload"] = {"op": "all_reduce", "bytes": 2**20, "count": 2**19, "dtype": "bf16", "n_ranks": 2}
    r["derived"] = {"algbw_bytes_per_s": 2**20 / 24.6e-6, "busbw_bytes_per_s": 2**20 / 24.6e-6, "bus_factor": 1.0}
    return Record.from_dict(r)


def test_collective_fit_footer_is_nccl_units_not_dense_peak(three):
    t = kind_table("collective_fit", [_fit(three)])
    assert t.rows[0][4:7] == ["16.6", "325", "1 KiB to 1 GiB"]  # α 16.6 µs, busbw 325.2e9 B/s
    assert "DENSE" not in t.footer and "TFLOPS" not in t.footer
    assert t.footer.startswith("α (latency) in µs = 1e-6 s; busbw in GB/s = 1e9 B/s (decimal); sizes = S, "
                               "nccl-tests' total size")
    assert t.footer.endswith("; mode: eager")


def test_collective_footer_names_algbw_busbw_size_and_time_unit(three):
    t = kind_table("collective", [_coll(three)])
    assert t.headers[5] == "time (µs)" and t.rows[0][5] == "24.6"
    assert t.rows[0][6:8] == ["42.6", "42.6"]  # 1,048,576 B / 24.6 µs = 42.63e9 B/s
    assert "DENSE" not in t.footer
    assert "algbw and busbw in GB/s = 1e9 B/s" in t.footer and "time per call in µs (1e-6 s)" in t.footer
    assert "size = S, nccl-tests' total size in bytes" in t.footer


def test_gemm_tables_keep_the_dense_peak_line(three):
    assert units_footer("gemm") == units_footer("membw") == UNITS_FOOTER
    assert kind_table("gemm", [three[1]]).footer == f"{UNITS_FOOTER}; mode: sustained"
    assert "ms (1e-3 s)" in units_footer("attention_decode", "ms")


def test_markdown_and_html_carry_the_collective_footers(three):
    recs = [_coll(three), _fit(three)]
    md = report_markdown(recs)
    assert "efficiency is against the DENSE peak" not in md
    assert md.count("algbw and busbw in GB/s = 1e9 B/s") == 1 and md.count("α (latency) in µs = 1e-6 s") == 1
    page = H.html_report(recs)
    assert UNITS_FOOTER not in page  # a collectives-only page: no GEMM units line anywhere, the top line included
    assert "GB/s = 1e9 B/s, TFLOPS = 1e12 FLOP/s (decimal); each table states its units below it" in page
    assert page.count("α (latency) in µs = 1e-6 s") == 2  # the fit section and the all-records table


# -- 4. the roofline labels points by format and scale layout ---------------------------------------------------------
def test_series_colours_tell_scale_layouts_apart():
    got = series_colours(["bf16", "fp8_e4m3 (per-tensor)", "fp8_e4m3 (per-row)", "fp8_e4m3 (block128)"])
    assert got == {"bf16": FORMAT_COLOURS["bf16"], "fp8_e4m3 (per-tensor)": FORMAT_COLOURS["fp8_e4m3"],
                   "fp8_e4m3 (per-row)": "#2ca02c", "fp8_e4m3 (block128)": "#9467bd"}
    assert series_colours(["fp8_e4m3"]) == {"fp8_e4m3": "#d62728"}


def test_roofline_legend_has_one_entry_per_scale_layout(three):
    recs = [three[1], fp8(three, "tensor", 4096, 200e-6), fp8(three, "row", 4096, 210e-6),
            fp8(three, "block128", 4096, 260e-6)]
    page = H.html_report(recs)
    svg = re.search(r'data-chart="roofline">(.*?)</figure>', page, re.S).group(1)
    for name in ("bf16 measured", "fp8_e4m3 (per-tensor) measured", "fp8_e4m3 (per-row) measured",
                 "fp8_e4m3 (block128) measured"):
        assert name in svg, name
    assert "fp8_e4m3 measured" not in svg
    # one dense ceiling for fp8_e4m3 (1978.9 TFLOPS), shared by its layouts
    assert svg.count("fp8_e4m3 dense 1979") == 1
    # the three layouts are drawn in three colours
    for c in ("#d62728", "#2ca02c", "#9467bd"):
        assert f"fill: {c}" in svg, c


def test_roofline_chart_accepts_labelled_series():
    svg = roofline_chart({"fp8_e4m3 (per-row)": [(100.0, 1e15, "sustained")]}, {"fp8_e4m3": 1978.9e12}, 4.8e12)
    assert "fp8_e4m3 (per-row) measured" in svg


# -- 5. compare a `truepeak peak` file against a `truepeak run` file ------------------------------------------------
def peak_rec(three, phase: str, time_s: float, n_samples: int, m: int = 4096, scaling: str | None = None,
             fmt: str = "bf16", i: int = 0) -> Record:
    """A `truepeak peak` record of the m x 4096 x 4096 GEMM: keyed by search phase and evaluation, origin
    "peak search (<phase>)", a 'search' field, IQR/median 0.5 %."""
    r = _copy(three[3] if len(three) > 3 else three[1])
    r.update(format=fmt, key=f"gemm|...|{fmt}|sustained|search:{phase}:{i}",
             search={"phase": phase, "round": 0, "eval": i})
    r["workload"] = {"label": f"{m}x4096x4096", "m": m, "n": 4096, "k": 4096, "scaling": scaling,
                     "origin": f"peak search ({phase})", "flop": 2 * m * 4096 * 4096}
    r["measurement"] = {**r["measurement"], "steady_median_s": time_s, "n_samples": n_samples,
                        "steady_rel_iqr": 0.005}
    return Record.from_dict(r)


def run_rec(three, time_s: float, m: int = 4096, scaling: str | None = None, fmt: str = "bf16") -> Record:
    r = _copy(three[3] if len(three) > 3 else three[1])
    r.update(format=fmt, key=f"gemm|run|{m}|{scaling}")
    r["workload"] = {"label": f"{m}x4096x4096", "m": m, "n": 4096, "k": 4096, "scaling": scaling,
                     "origin": "square", "flop": 2 * m * 4096 * 4096, "min_bytes": 3 * 2 * 4096 * m,
                     "intensity": 1.0}
    r["measurement"] = {**r["measurement"], "steady_median_s": time_s, "n_samples": 50, "steady_rel_iqr": 0.005}
    return Record.from_dict(r)


def res(records, name):
    return Results(records=list(records), sources=[name] * len(records), files=[name])


def test_peak_file_matches_run_file_on_the_measured_workload(four):
    run = res([run_rec(four, 1.5e-3), run_rec(four, 0.4e-3, m=1024)], "run.jsonl")
    peak = res([peak_rec(four, "coarse", 1.40e-3, 13, i=0), peak_rec(four, "refine", 1.38e-3, 40, i=5),
                peak_rec(four, "remeasure", 1.35e-3, 20, i=9), peak_rec(four, "coarse", 2.0e-3, 13, m=8192, i=1)],
               "peak.jsonl")
    assert match_key(run.records[0]) == match_key(peak.records[2])
    c = compare(run, peak)
    (row,) = [r for r in c.rows if r.time_a_s and r.time_b_s]
    # the re-measured record represents B's 4096^3 case: 1.5 ms / 1.35 ms = 1.1111, -10 % beyond the 1 % floor
    assert row.time_b_s == 1.35e-3 and row.ratio == pytest.approx(1.5 / 1.35) and row.verdict == "faster"
    assert c.matching == {"matched": 1, "only_in_a": 1, "only_in_b": 1, "records_a": 2, "records_b": 4,
                          "set_aside_a": 0, "set_aside_b": 2}
    text = compare_text(c)
    assert "matched 1 case(s); unmatched: 1 only in A, 1 only in B" in text
    assert "B: 4 records, 2 set aside as repeats of a case" in text


def test_without_remeasure_the_record_with_most_samples_represents_the_case(four):
    run = res([run_rec(four, 1.5e-3)], "run.jsonl")
    peak = res([peak_rec(four, "coarse", 1.40e-3, 13, i=0), peak_rec(four, "refine", 1.38e-3, 40, i=5),
                peak_rec(four, "refine", 1.30e-3, 30, i=6)], "peak.jsonl")
    (row,) = compare(run, peak).rows
    assert row.time_b_s == 1.38e-3 and row.ratio == pytest.approx(1.5 / 1.38)


def test_scale_layouts_are_different_cases(four):
    run = res([run_rec(four, 0.8e-3, scaling="tensor", fmt="fp8_e4m3")], "run.jsonl")
    peak = res([peak_rec(four, "remeasure", 0.7e-3, 20, scaling="row", fmt="fp8_e4m3"),
                peak_rec(four, "remeasure", 0.75e-3, 20, scaling="tensor", fmt="fp8_e4m3", i=1)], "peak.jsonl")
    c = compare(run, peak)
    matched = [r for r in c.rows if r.time_a_s and r.time_b_s]
    assert len(matched) == 1 and matched[0].time_b_s == 0.75e-3 and matched[0].scaling == "tensor"
    assert c.matching["matched"] == 1 and c.matching["only_in_b"] == 1
    assert "fp8_e4m3 (per-row)" in compare_text(c) and "fp8_e4m3 (per-tensor)" in compare_text(c)
