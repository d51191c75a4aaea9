"""What `truepeak moe bench` shows (truepeak.report.moe): one record's cells and progress line, and the plot's lines of
% of read bandwidth against tokens per expert. Table widths: tests/report/test_table_widths.py."""

from __future__ import annotations

import pytest

from truepeak.records import Record
from truepeak.report import moe


def _record(fmt, tpe, backend, time_s=41.5e-6, status="ok", reason=""):
    rec = {"schema_version": 3, "kind": "moe_experts", "status": status, "reason": reason, "backend": backend, "format": fmt,
           "workload": {"model": "deepseek-v3", "layout": "ep8", "routing": "uniform", "tokens_per_expert": tpe,
                        "E_local": 32, "H": 7168, "I": 2048, "top_k": 8, "T": 512, "weights_format": fmt,
                        "activations": "fp8 e4m3, per-row scale"}}
    if status == "ok":
        # 162.3 MB of active experts read in time_s against a 4.288 TB/s read; 51.2 GFLOP
        rec["measurement"] = {"mode": "sustained", "steady_median_s": time_s}
        rec["derived"] = {"time_s": time_s, "bytes_per_s": 162.3e6 / time_s, "flop_per_s": 51.2e6 / time_s,
                          "read_bandwidth_fraction": 162.3e6 / time_s / 4.288e12, "read_bandwidth_bytes_per_s": 4.288e12}
        rec["correctness"] = {"max_rel_error": 2.1e-3, "passed": True}
    return Record.from_dict(rec)


def test_cells_of_an_ok_and_a_skipped_record():
    # 41.5 us; 162.3e6 B / 41.5e-6 s = 3.911 TB/s = 91.2 % of 4.288 TB/s; 51.2e6 FLOP / 41.5e-6 s = 1.2 TFLOPS
    assert moe.row_cells(_record("fp8", 16, "triton")) == [
        "fp8", "16", "triton", "41.5", "3.911", "91.2", "1.2", "2.1e-03  (fp8 e4m3, per-row scale)"]
    skipped = _record("nvfp4", 0.5, "bmm", status="skipped", reason="backend bmm has no nvfp4 path")
    assert moe.row_cells(skipped) == ["nvfp4", "0.5", "bmm", "-", "-", "-", "-",
                                      "skipped: backend bmm has no nvfp4 path"]
    assert moe.progress_line(skipped) == "nvfp4  0.5  bmm  -  -  -  -  skipped: backend bmm has no nvfp4 path"


def test_plot_lines_are_percent_of_read_bandwidth_sorted_by_tokens_per_expert(tmp_path):
    # 162.3e6 B in 41.5 us: 3.9108 TB/s = 91.204 % of 4.288 TB/s; in 83 us: 45.602 %; skipped records draw nothing
    recs = [_record("fp8", 32, "triton", time_s=83e-6), _record("fp8", 16, "triton"), _record("bf16", 16, "bmm"),
            _record("nvfp4", 16, "bmm", status="skipped", reason="no nvfp4 path")]
    series = moe.read_bandwidth_series(recs)
    assert list(series) == ["triton fp8", "bmm bf16"]
    assert [t for t, _ in series["triton fp8"]] == [16, 32]
    assert [p for _, p in series["triton fp8"]] == pytest.approx([91.204, 45.602], abs=1e-3)
    pytest.importorskip("matplotlib")
    path = tmp_path / "moe.png"
    assert moe.plot_records(recs, str(path)) == str(path)
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
