"""What `truepeak peak` shows (truepeak/report/peak.py): the answers table, its columns and footer, and the stderr
lines; no torch needed (the answers are peak.json dicts and plain objects)."""

from __future__ import annotations

import io
from pathlib import Path
from types import SimpleNamespace

from truepeak.report.peak import (peak_finished_lines, peak_interrupted_line, peak_interrupted_notice,
                                  print_peak_answers, shapes_measured)


def _table_header(text: str) -> list[str]:
    """The column names of a rendered rich table (the line under its top border)."""
    lines = text.splitlines()
    top = next(i for i, line in enumerate(lines) if line.startswith("┏"))
    return [c.strip() for c in lines[top + 1].strip("┃").split("┃")]


def test_gpu_table_keeps_clock_and_power():
    """An H200 bf16 burst answer (docs/results/h200/peak: 839.0 TFLOPS at 1980 MHz): 839.0 / 989.4 = 84.8 % of dense;
    at 1980 MHz the dense peak is 4096 FLOP/clk/SM x 132 SMs x 1.98e9 = 1070.5 TFLOPS, 839.0 / 1070.5 = 78.4 %."""
    import io

    from truepeak.report.peak import render_peaks

    at_clock = 4096 * 132 * 1.98e9
    summary = {"device": "NVIDIA H200", "device_kind": "cuda", "peaks": [
        {"format": "bf16", "mode": "burst", "status": "ok", "shape": [4096, 4096, 18432], "flop_per_s": 839.0e12,
         "pct_dense": 839.0e12 / 989.4e12, "peak_at_clock_flop_per_s": at_clock, "pct_at_clock": 839.0e12 / at_clock,
         "sm_clock_median_hz": 1.98e9, "power_median_w": 699.6, "evaluations": 86, "elapsed_s": 60.2},
        {"format": "int8", "mode": "burst", "status": "skipped", "reason": "no int8 kernel"}]}
    buf = io.StringIO()
    render_peaks(summary, file=buf)
    text = buf.getvalue()
    assert _table_header(text) == ["format", "mode", "best shape MxNxK", "TFLOPS", "% dense", "peak @ clock",
                                   "% @ clock", "SM MHz", "W", "shapes", "s"]
    row = next(line for line in text.splitlines() if "4096x4096x18432" in line)
    assert [c.strip() for c in row.strip("│").split("│")] == ["bf16", "burst", "4096x4096x18432", "839.0", "84.8",
                                                             "1070.5", "78.4", "1980", "700", "86", "60"]
    assert "skipped: no int8 kernel" in text




def _rec(phase):
    return SimpleNamespace(search=None if phase is None else SimpleNamespace(phase=phase))


def test_shapes_measured_leaves_a_skipped_search_out():
    # two measured trials, one trial-less record (no search step) and one skipped search: 3 shapes
    assert shapes_measured([_rec("coarse"), _rec("remeasure"), _rec(None), _rec("skipped")]) == 3


def test_stderr_lines_of_a_finished_and_an_interrupted_search():
    out = Path("/tmp/pk")
    peaks = [SimpleNamespace(status="ok", resumed=True), SimpleNamespace(status="ok", resumed=False)]
    run = SimpleNamespace(device=SimpleNamespace(notes=["d"]), notes=["n"], peaks=peaks,
                          records=[_rec("coarse")] * 5, elapsed_s=12.34, records_path=out / "results.jsonl",
                          out_dir=out, not_searched=[])
    assert peak_finished_lines(run) == [
        "note: d", "note: n",
        "5 shapes measured in 12.3 s (1 finished search taken from the records); records: /tmp/pk/results.jsonl; "
        "answers: /tmp/pk/peak.json"]
    stopped = SimpleNamespace(peaks=[SimpleNamespace(status="ok"), SimpleNamespace(status="interrupted")],
                              not_searched=[("fp8_e4m3", "burst"), ("fp8_e4m3", "sustained")],
                              records=[_rec("coarse")], records_path=out / "results.jsonl", out_dir=out)
    # 1 finished of 2 started + 2 never started = 4
    assert peak_interrupted_notice(stopped, "CMD") == "Interrupted after 1 of 4 searches; continue with: CMD"
    assert peak_interrupted_line(stopped, "CMD") == ("interrupted after 1 shape; they are in /tmp/pk/results.jsonl; "
                                                     "best so far in /tmp/pk/peak.json; continue with: CMD")


def test_json_answers_are_the_summary_itself():
    buf = io.StringIO()
    print_peak_answers({"device": "x", "peaks": []}, as_json=True, file=buf)
    assert buf.getvalue() == '{\n "device": "x",\n "peaks": []\n}\n'
