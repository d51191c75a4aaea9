"""truepeak comm's text output (truepeak.report.comm): regressions from the new-user review, and the warning and
interruption lines."""

from __future__ import annotations

import io

from truepeak.report.comm import _gb, failed_cases_warning, interrupted_line, interrupted_notice, render_tables


def test_small_bandwidths_are_not_all_zero():
    # gloo on a CPU moves a 1 KiB all_reduce in ~0.7 ms: 1024 B / 0.7e-3 s = 1.46e6 B/s = 0.00146 GB/s, printed as
    # "0.00" before; nccl-tests-style 2 decimals stay for >= 0.1 GB/s (2x H200 all_reduce busbw 325.2 GB/s).
    assert _gb(1024 / 0.7e-3) == "0.00146"
    assert _gb(325.2e9) == "325.20"
    assert _gb(0.1e9) == "0.10"
    assert _gb(None) == "-" and _gb(0.0) == "0.00"


def test_units_line_is_not_a_wrapped_table_title():
    # The units were the title of each table and wrapped into two broken lines at the table's width.
    from rich.console import Console

    from truepeak.records import Record

    rec = Record.from_dict({
        "schema_version": 3, "kind": "collective", "status": "ok", "mode": "eager", "backend": "gloo",
        "format": "bf16", "measurement": {"mode": "eager", "median_s": 7e-4},
        "workload": {"op": "all_reduce", "bytes": 1024, "count": 512, "dtype": "bf16", "n_ranks": 2},
        "derived": {"algbw_bytes_per_s": 1024 / 7e-4, "busbw_bytes_per_s": 1024 / 7e-4},
        "correctness": {"wrong": 0, "checked": 512, "passed": True}, "run_config": {"iters": 2, "warmup": 0}})
    buf = io.StringIO()
    render_tables([rec], console=Console(file=buf, width=60))
    lines = buf.getvalue().splitlines()
    assert "time per call in µs; algbw, busbw in GB/s = 1e9 B/s; S = nccl-tests total size" in lines
    assert any(line.strip() == "all_reduce" for line in lines)


def _case(op: str, nbytes: int, mode: str, status: str, reason: str = ""):
    from truepeak.records import Record

    return Record.from_dict({
        "schema_version": 3, "kind": "collective", "status": status, "reason": reason, "mode": mode,
        "backend": "nccl", "format": "bf16", "measurement": None,
        "workload": {"op": op, "bytes": nbytes, "count": nbytes // 2, "dtype": "bf16", "n_ranks": 2}})


def test_failed_cases_warning_names_the_first_three():
    ok = _ok_records()
    assert failed_cases_warning(ok) is None
    bad = [_case("all_reduce", 1024 * 2**k, "graph", "failed", f"RuntimeError: capture {k}") for k in range(4)]
    assert failed_cases_warning(ok + bad) == (
        "warning: 4 case(s) failed or had wrong elements: all_reduce 1024 B graph: RuntimeError: capture 0; "
        "all_reduce 2048 B graph: RuntimeError: capture 1; all_reduce 4096 B graph: RuntimeError: capture 2")


def test_interrupted_lines():
    assert interrupted_notice(2, 6, "truepeak comm --out c") == (
        "Interrupted after 2 of 6 cases; run again with: truepeak comm --out c")
    assert interrupted_line(2, 6, "c/results.jsonl", "truepeak comm --out c") == (
        "interrupted after 2 of 6 cases; the finished records are in c/results.jsonl; run again with: truepeak comm "
        "--out c")
    assert interrupted_line(0, 12, None, None) == "interrupted after 0 of 12 cases; results are written on node 0"


def _ok_records():
    from truepeak.records import Record

    return [Record.from_dict({
        "schema_version": 3, "kind": "collective", "status": "ok", "mode": "eager", "backend": "gloo",
        "format": "bf16", "measurement": {"mode": "eager", "median_s": 7e-4},
        "workload": {"op": "all_reduce", "bytes": 1024, "count": 512, "dtype": "bf16", "n_ranks": 2},
        "derived": {"algbw_bytes_per_s": 1024 / 7e-4, "busbw_bytes_per_s": 1024 / 7e-4},
        "correctness": {"wrong": 0, "checked": 512, "passed": True}, "run_config": {"iters": 2, "warmup": 0}})]
