"""The HTML report: sections present for every kind, self-contained (no network, no script), text escaped, bad input
rendered with the bad lines named; ``truepeak report`` and the report.html of ``truepeak run``."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

import truepeak.cli  # noqa: F401  (registers every command)
from truepeak.cli.app import main
from truepeak.errors import TruepeakError
from truepeak.records import Record, RecordError
from truepeak.report import html as H
from truepeak.report.load import load_results

GOLDEN = Path(__file__).parent / "golden"
MIXED = GOLDEN / "mixed.jsonl"


def call(capsys, *args: str) -> tuple[int, str, str]:
    with pytest.raises(SystemExit) as info:
        main(list(args))
    captured = capsys.readouterr()
    return info.value.code, captured.out, captured.err


def lines(path: Path) -> list[dict]:
    return [json.loads(x) for x in path.read_text().splitlines() if x.strip()]


def write(path: Path, records: list, extra: str = "") -> Path:
    """Write records (or JSON objects) as JSON Lines, then ``extra``."""
    path.write_text("".join(json.dumps(r.to_dict() if isinstance(r, Record) else r) + "\n" for r in records) + extra)
    return path


@pytest.fixture(scope="module")
def mixed_html() -> str:
    return H.html_report(load_results([MIXED]))


def test_every_section_and_chart(mixed_html):
    for heading in ('<h2 id="warnings">Warnings</h2>', "<h2>NVIDIA H200</h2>", "<h3>Device and environment</h3>",
                    "<h3>Spec against measured peaks per format</h3>", "<h3>Roofline</h3>", "<h3>Memory bandwidth</h3>",
                    '<h2 id="moe">MoE expert layer at decode</h2>', '<h2 id="collectives">Collectives</h2>',
                    "Latency-bandwidth fit", '<h2 id="records">All records</h2>'):
        assert heading in mixed_html
    charts = re.findall(r'<figure class="chart" data-chart="(\w+)"><svg', mixed_html)
    # one decode point only: no decode chart; one of each other chart
    assert charts == ["peaks", "roofline", "moe", "collective"]
    # the catalog's ceilings: H200 HBM 4800 GB/s and bf16 dense 989.4 TFLOPS; sparse labelled display only
    assert "memory ceiling: 4800 GB/s (catalog)" in mixed_html and "bf16 dense 989.4" in mixed_html
    assert "spec 2:4 sparse TFLOPS (display only)" in mixed_html
    assert "<td>attention_decode" not in mixed_html and "attention_decode: 1 record(s)" in mixed_html
    assert "a record kind this truepeak has no section for" in mixed_html


def test_self_contained(mixed_html):
    assert mixed_html.startswith("<!DOCTYPE html>")
    assert "<script" not in mixed_html.lower()
    assert not re.search(r"""\b(src|href)\s*=\s*["'](?!data:|#)""", mixed_html)  # nothing to fetch
    assert not re.search(r"url\((?!#)", mixed_html) and "@import" not in mixed_html  # only in-page url(#id)


def test_text_is_escaped(three, edit):
    evil = edit(three[2], reason="<script>alert(1)</script> & more", backend='"><img src=x>')
    page = H.html_report([three[0], evil])
    assert "<script>alert(1)</script>" not in page and "<img src=x>" not in page
    assert "&lt;script&gt;alert(1)&lt;/script&gt; &amp; more" in page


def test_decode_chart_with_several_m(three, edit):
    recs = [edit(three[1], key=f"gemm|{m}", **{"workload.m": m, "workload.label": f"{m}x4096x7168"})
            for m in (1, 2, 4, 8)]
    page = H.html_report(recs)
    assert 'data-chart="decode"' in page and "bf16 N=4096 K=7168" in page


def test_bad_lines_are_named_and_the_rest_rendered(tmp_path, three):
    old = {**three[1].to_dict(), "schema_version": 1, "key": "old"}
    path = write(tmp_path / "r.jsonl", [three[0], old, three[1]], extra='{"kind": "gemm", "stat')
    data = load_results([path])
    assert len(data.records) == 2
    assert [str(p) for p in data.problems] == [
        f"{path}, line 2: a record of schema version 1; truepeak 0.1.0 reads schema versions 2 and 3",
        f"{path}, line 4: not valid JSON: Unterminated string starting at (column 18)"]
    page = H.html_report(data)
    assert "2 line(s) or file(s) could not be used" in page
    assert "this truepeak understands record schema versions 2 and 3" in page
    assert "line 4: not valid JSON" in page and "16x4096x7168" in page


def test_empty_and_unknown_schema_only_files_are_errors(tmp_path, three):
    empty = tmp_path / "empty.jsonl"
    empty.write_text("")
    with pytest.raises(TruepeakError, match=r"^no records: .*empty.jsonl is empty \(a run stopped before its first "
                                            r"case finished writes none\)$"):
        H.write_html_report(empty)
    future = write(tmp_path / "future.jsonl", [{**three[0].to_dict(), "schema_version": 9}])
    with pytest.raises(TruepeakError, match="line 1: a record of schema version 9; truepeak 0.1.0 reads schema "
                                            "versions 2 and 3"):
        load_results([future]).require_records()


def test_different_devices_warn_at_the_top(three, edit):
    cpu = edit(three[1], env={"cpu": "AMD EPYC", "device": {"kind": "cpu", "name": "AMD EPYC"}}, key="cpu")
    page = H.html_report([three[1], cpu])
    warn = page.index("records of 2 different devices")
    assert warn < page.index("<h2>NVIDIA H200</h2>") < page.index("<h2>AMD EPYC</h2>")


def test_write_html_report_from_a_run_folder(tmp_path, three):
    write(tmp_path / "results.jsonl", three)
    path = H.write_html_report(tmp_path)
    assert path == tmp_path / "report.html" and path.read_text().endswith("</html>\n")


def test_write_run_report_never_raises(tmp_path, monkeypatch, three):
    write(tmp_path / "results.jsonl", three)

    def broken(*a, **k):
        raise RuntimeError("boom")

    monkeypatch.setattr(H, "html_report", broken)
    said = []
    assert H.write_run_report(tmp_path, warn=said.append) is None
    assert said[0].startswith("could not write report.html (RuntimeError: boom); the records are safe")
    assert H.write_run_report(tmp_path / "missing") is None  # no warn given: silent


def test_cli_report_writes_every_format(tmp_path, capsys):
    html, md, csv = tmp_path / "r.html", tmp_path / "r.md", tmp_path / "r.csv"
    code, out, err = call(capsys, "report", str(MIXED), "--html", str(html), "--md", str(md), "--csv", str(csv))
    assert code == 0, err
    assert f"html report: {html}" in err and f"markdown report: {md}" in err and f"csv: {csv}" in err
    assert html.read_text().startswith("<!DOCTYPE html>") and md.read_text().startswith("# truepeak report")
    assert csv.read_text().startswith("source,kind,status")


def test_cli_report_default_is_html_beside_the_file_and_md_to_stdout(tmp_path, capsys, three):
    path = write(tmp_path / "results.jsonl", three, extra="{torn")
    code, out, err = call(capsys, "report", str(path))
    assert code == 0 and (tmp_path / "report.html").exists()
    assert f"warning: {path}, line 4: not valid JSON" in err
    code, out, err = call(capsys, "report", str(path), "--md", "-")
    assert code == 0 and out.startswith("# truepeak report: NVIDIA H200\n") and not (tmp_path / "-").exists()


def test_cli_report_bad_input_is_one_line_exit_2(tmp_path, capsys):
    empty = tmp_path / "empty.jsonl"
    empty.write_text("\n")
    code, out, err = call(capsys, "report", str(empty))
    assert code == 2 and err.splitlines() == [f"error: no records: {empty} is empty (a run stopped before its first "
                                              "case finished writes none)"]
    code, out, err = call(capsys, "report", str(tmp_path / "nope.jsonl"))
    assert code == 2 and "cannot read records file" in err and "nope.jsonl" in err
    code, out, err = call(capsys, "report", str(tmp_path))
    assert code == 2 and "is a folder without results.jsonl" in err


def test_cli_report_of_a_folder_reads_its_results_jsonl(tmp_path, capsys, three):
    """A run's --out folder stands for the results.jsonl in it; report.html lands beside that file."""
    write(tmp_path / "results.jsonl", three)
    code, out, err = call(capsys, "report", str(tmp_path), "--md", "-")
    assert code == 0, err
    assert out.startswith("# truepeak report: NVIDIA H200\n")
    code, out, err = call(capsys, "report", str(tmp_path))
    assert code == 0, err
    assert (tmp_path / "report.html").exists() and not (tmp_path.parent / "report.html").exists()


def test_cli_report_never_writes_over_its_input(tmp_path, capsys, three):
    """Regression: `truepeak report results.jsonl --md results.jsonl` replaced the records with the report."""
    path = write(tmp_path / "results.jsonl", three)
    before = path.read_text()
    for option in ("--md", "--csv", "--html"):
        code, out, err = call(capsys, "report", str(path), option, str(tmp_path / "." / "results.jsonl"))
        assert code == 2 and err.count("\n") == 1
        assert err.startswith(f"error: {option} {tmp_path / '.' / 'results.jsonl'} is the results file being read")
    assert path.read_text() == before
    code, out, err = call(capsys, "report", str(path), "--md", str(tmp_path / "r.txt"), "--csv", str(tmp_path / "r.txt"))
    assert code == 2 and err.startswith(f"error: --md and --csv both write to {tmp_path / 'r.txt'}")
    assert not (tmp_path / "r.txt").exists()  # refused before anything was written
    code, out, err = call(capsys, "report", str(path), "--md", "-", "--csv", "-")
    assert code == 2 and err.startswith("error: --md and --csv both write to -") and out == ""


def test_truepeak_run_writes_report_html(tmp_path, capsys, monkeypatch, stub_timing):
    pytest.importorskip("torch")
    stub_timing(monkeypatch, gemm_s=1e-3, copy_s=1e-2)
    out = tmp_path / "run"
    code, _, err = call(capsys, "run", "--quick", "--device", "cpu", "--out", str(out), "--no-progress")
    assert code == 0, err
    assert f"report: {out / 'report.html'}" in err
    page = (out / "report.html").read_text()
    assert 'data-chart="roofline"' in page and "memory ceiling" in page and "(measured copy)" in page


def _moe(three, backend, tpe, pct):
    r = three[1].to_dict()
    r.update(kind="moe_experts", backend=backend, key=f"moe|{backend}|{tpe}")
    r["workload"] = {"model": "deepseek-v3", "E_local": 32, "H": 7168, "I": 2048, "top_k": 8,
                     "tokens_per_expert": float(tpe), "T": 64, "routing": "uniform", "weights_format": "bf16",
                     "layout": "ep8"}
    r["derived"] = {"bytes": 10**9, "bytes_per_s": pct * 4.54e12, "read_bandwidth_bytes_per_s": 4.54e12,
                    "read_bandwidth_fraction": pct, "flop_per_s": 1e12}
    r["correctness"] = {"max_rel_error": 0.004, "passed": True}
    return Record.from_dict(r)


def _coll(three, op, mode, nbytes, t):
    r = three[1].to_dict()
    r.update(kind="collective", backend="nccl", format="bf16", mode=mode, key=f"c|{op}|{mode}|{nbytes}")
    r["measurement"].update(mode=mode, steady_median_s=t)
    r["workload"] = {"op": op, "bytes": nbytes, "count": nbytes // 2, "dtype": "bf16", "n_ranks": 2}
    r["derived"] = {"algbw_bytes_per_s": nbytes / t, "busbw_bytes_per_s": nbytes / t, "bus_factor": 1.0}
    r["correctness"] = {"wrong": 0, "checked": nbytes // 2, "passed": True}
    r["rotation"] = None
    return Record.from_dict(r)


def test_moe_collective_and_peak_search_records(three, edit):
    moe = [_moe(three, b, t, p) for b, base in (("triton", 0.95), ("grouped_mm", 0.6))
           for t, p in ((0.5, base), (8, base - 0.05), (64, base - 0.3))]
    coll = [_coll(three, op, mode, n, 2e-5 + n / 3e11) for op in ("all_reduce", "all_gather")
            for mode in ("eager", "graph") for n in (1024, 2**20, 2**30)]
    burst = edit(three[1], mode="burst", key="burst", search={"phase": "refine", "round": 2},
                 **{"measurement.mode": "burst", "workload.origin": "peak search (refine)"})
    page = H.html_report([three[1], burst, *moe, *coll])
    assert re.findall(r'data-chart="(\w+)"', page) == ["peaks", "roofline", "moe", "collective"]
    assert "deepseek-v3 ep8 uniform on NVIDIA H200" in page
    assert "triton bf16" in page and "grouped_mm bf16" in page and "all_reduce graph" in page
    assert '<td class="fmt">bf16</td><td>burst</td>' in page and '<td class="fmt">bf16</td><td>sustained</td>' in page
    assert '<td class="num">0.5</td>' in page  # fractional tokens per expert are kept


def test_percentage_axes_keep_points_above_100():
    """Regression: the decode chart's % of roofline axis stopped at 105 % (the MoE chart's at 110 %), so a CPU run's
    M = 1 point at 157.6 % of its roofline (flagged in its record) was drawn off the chart."""
    from truepeak.report.plots import _pct_top

    assert _pct_top([157.6, 50.0]) == pytest.approx(1.05 * 157.6)
    assert _pct_top([99.0, float("nan")]) == 105 and _pct_top([], 110) == 110


def test_collective_records_find_their_gpu_in_the_catalog(three):
    """Regression: `truepeak report` of the 2x H200 collective results said "not in the truepeak catalog" for an
    NVIDIA H200: comm records carry env.gpu (the name torch reports) but no env.device."""
    from truepeak.report.load import accelerator_key

    coll = Record.from_dict({"schema_version": 3, "kind": "collective", "status": "skipped", "reason": "r",
                             "workload": {"op": "all_reduce", "bytes": 1024, "count": 512, "dtype": "bf16",
                                          "n_ranks": 2},
                             "env": {"gpu": {"name": "NVIDIA H200", "sm_count": 132}}})
    assert accelerator_key(coll) == "h200-sxm"
    assert accelerator_key(coll.replace(env={"gpu": {"name": "NVIDIA Nonesuch 9000"}})) is None
    assert accelerator_key(three[1]) == "h200-sxm"  # env.device says so itself
    cpu = three[1].replace(env={"device": {"kind": "cpu", "name": "AMD EPYC", "matched_catalog": False}})
    assert accelerator_key(cpu) is None
    page = H.html_report([coll])
    assert "NVIDIA H200 SXM (h200-sxm); efficiency is against its DENSE peaks" in page


def test_a_cpu_report_names_its_clock_without_sms(three):
    """A CPU has cores and a clock, not SMs and a max SM clock."""
    cpu = three[1].replace(env={"device": {"kind": "cpu", "name": "AMD EPYC", "matched_catalog": False,
                                           "max_sm_clock_hz": 2.596e9}})
    page = H.html_report([cpu])
    assert "CPU clock" in page and "2.596 GHz" in page and "max SM clock" not in page


def _why(d: dict) -> str | None:
    """Why :meth:`Record.from_dict` refuses ``d``, or None."""
    try:
        Record.from_dict(d)
    except RecordError as exc:
        return str(exc)
    return None


def test_malformed_records_are_named_and_left_out(tmp_path, capsys, three):
    """Regression: a record with a field of the wrong JSON type (an edited file, another writer) crashed `truepeak
    report` and `truepeak compare` with a traceback (AttributeError, TypeError, rich NotRenderableError)."""
    copy, decode, probe = (r.to_dict() for r in three)
    bad = [
        {**decode, "time_s": "fast"},
        {**decode, "derived": 7},
        {**decode, "derived": {**decode["derived"], "flop_per_s": "x"}},
        {**decode, "warnings": "above roofline"},
        {**decode, "measurement": {**decode["measurement"], "warning_codes": [1]}},
        {**decode, "format": ["bf16"]},
        {**decode, "workload": {**decode["workload"], "m": -16}},
        {**decode, "env": {**decode["env"], "env_vars": True}},
    ]
    assert [_why(r) for r in bad] == [
        "field 'time_s' is a string, not a number",
        "field 'derived' is a number, not an object",
        "field 'derived.flop_per_s' is a string, not a number",
        "field 'warnings' is a string, not a list",
        "field 'measurement.warning_codes' is a list, not a list of strings",
        "field 'format' is a list, not a string or null",
        "field 'workload.m' is negative (-16)",
        "field 'env.env_vars' is a boolean, not an object",
    ]
    assert [_why(r) for r in (copy, decode, probe)] == [None, None, None]
    path = write(tmp_path / "results.jsonl", [copy, *bad, probe])
    code, out, err = call(capsys, "report", str(path), "--md", "-", "--csv", str(tmp_path / "r.csv"))
    assert code == 0 and "Traceback" not in err
    assert f"warning: {path}, line 2: field 'time_s' is a string, not a number (left out)" in err
    assert f"warning: {path}, line 9: field 'env.env_vars' is a boolean, not an object (left out)" in err
    assert out.startswith("# truepeak report: NVIDIA H200") and "2 record(s)" in out
    code, out, err = call(capsys, "compare", str(path), str(path))
    assert code == 0 and "Traceback" not in err and "1 unknown, 1 not ok" in out and "A: 8 line(s) not used" in out


def test_report_of_a_binary_file_caps_its_warnings(capsys, tmp_path):
    """Regression: `truepeak report` of a 10 MB binary file printed a warning per line (38,786 of them). A file of
    2,000 lines that are not UTF-8 and one valid record: 5 warnings, one line counting the other 1,995, a report."""
    good = lines(MIXED)[0]
    path = tmp_path / "blob.jsonl"
    path.write_bytes(b"\x80 binary\n" * 2000 + json.dumps(good).encode() + b"\n")
    code, _, err = call(capsys, "report", str(path), "--md", str(tmp_path / "r.md"))
    assert code == 0
    assert err.splitlines() == [
        *(f"warning: {path}, line {n}: not UTF-8 (invalid start byte) (left out)" for n in range(1, 6)),
        f"warning: ... and 1,995 more like this ({path}: not UTF-8)",
        f"markdown report: {tmp_path / 'r.md'}"]
