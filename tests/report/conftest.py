"""Hand-made records of a small H200 run (SI values; the renderers only format them), as schema-3 JSON objects
(:func:`record`) and as the :class:`truepeak.records.Record` objects the renderers take (the fixtures).

- copy 2 GiB in 1 ms: 2 x 2**31 B / 1e-3 s = 4.295e12 B/s = 89.5 % of 4.8e12 B/s.
- bf16 16x4096x7168 in 40 us: 939,524,096 FLOP -> 23.49 TFLOPS = 2.37 % of 989.4; 59,080,704 B -> 1477 GB/s =
  30.8 % of 4800 (memory-bound, so % of roofline = % of bandwidth); at 1755 MHz the peak is 4096 x 132 x 1.755e9 =
  948.9 TFLOPS, 2.48 % of it. Timed as CUDA-graph replays (under 50 us).
- nvfp4 probe: skipped on sm_90.
- bf16 4096^3 in 1.5 ms (only in ``four``): 137,438,953,472 FLOP -> 91.63 TFLOPS = 9.26 % of 989.4; compute-bound.
"""

from __future__ import annotations

import copy as _copy
from typing import Any

import pytest

from truepeak.records import Record

H200_ENV = {
    "truepeak_version": "0.1.0", "python": "3.11.7", "torch": "2.5.1", "cuda": "12.4",
    "gpu": {"name": "NVIDIA H200", "compute_capability": "9.0", "sm_count": 132, "l2_bytes": 62914560,
            "memory_bytes": 150_000_000_000, "max_sm_clock_hz": 1.98e9, "power_limit_w": 700.0, "driver": "560.35"},
    "command_line": "truepeak run --out h200",
    "device": {"kind": "cuda", "name": "NVIDIA H200", "compute_capability": "9.0", "sm_count": 132,
               "l2_bytes": 62914560, "memory_bytes": 150_000_000_000, "max_sm_clock_hz": 1.98e9,
               "matched_catalog": True, "accelerator": "h200-sxm", "accelerator_name": "NVIDIA H200 SXM"},
}
RUN_CONFIG = {
    "quick": False, "device": "cuda:0", "device_name": "NVIDIA H200", "budgets": "gpu",
    "budget_settings": {"settle_s": 3.0, "warmup_s": 0.1, "budget_s": 0.3, "large_warmup_s": 1.5,
                        "large_budget_s": 1.0, "copy_warmup_s": 0.3, "copy_budget_s": 0.5, "check_rows": 256},
    "settle": {"format": "bf16", "shape": "8192x8192x8192", "seconds": 3.0},
    "graph_threshold_s": 50e-6,
}
COPY_CHECK = {"passed": True, "reference": "destination equals source after timing"}


def record(kind, label, fmt, status="ok", *, time_s=None, derived=None, reason="", workload=None, graph=False,
           n_sets=None, tolerance=None, stamp="2026-11-30T01:00:00.000Z") -> dict[str, Any]:
    """A schema-3 record as a records file holds it."""
    w = {"label": label, **(workload or {})}
    measurement = None
    if status == "ok":
        measurement = {"mode": "sustained", "steady_median_s": time_s, "n_samples": 50, "graph": graph,
                       "input_kind": "random", "n_sets": n_sets, "warning_codes": [], "warnings": []}
    correctness = None
    if tolerance is not None:
        correctness = {"rel_error": 0.003, "tolerance": tolerance, "passed": True}
    elif status == "ok":
        correctness = COPY_CHECK
    return {
        "schema_version": 3, "methodology_version": 1, "truepeak_version": "0.1.0",
        "key": f"{kind}|{label}|torch|{fmt or '-'}|sustained", "kind": kind, "status": status, "reason": reason,
        "workload": w, "backend": "torch", "format": fmt, "mode": "sustained", "time_s": time_s,
        "measurement": measurement, "warnings": [], "correctness": correctness, "derived": derived,
        "env": H200_ENV, "run_config": RUN_CONFIG,
        "rotation": None if n_sets is None else {"n_sets": n_sets, "wanted_sets": n_sets, "capped": False, "note": "",
                                                 "l2_bytes": 62914560},
        "timestamp": stamp,
    }


COPY = record("membw", "copy 2 GiB", None, time_s=1e-3, workload={"nbytes": 2**31},
              derived={"bytes_per_s": 2 * 2**31 / 1e-3, "bandwidth_fraction": 2 * 2**31 / 1e-3 / 4.8e12,
                       "bandwidth_bytes_per_s": 4.8e12, "bandwidth_source": "catalog"})
DECODE = record("gemm", "16x4096x7168", "bf16", time_s=40e-6, graph=True, n_sets=3, tolerance=2e-2,
                workload={"m": 16, "n": 4096, "k": 7168, "origin": "DeepSeek-V3 expert gate+up"},
                stamp="2026-11-30T01:00:01.000Z",
                derived={"flop_per_s": 939_524_096 / 40e-6, "bytes_per_s": 59_080_704 / 40e-6,
                         "dense_fraction": 939_524_096 / 40e-6 / 989.4e12,
                         "roofline_fraction": 59_080_704 / 40e-6 / 4.8e12,
                         "bound": "memory", "at_clock_fraction": 939_524_096 / 40e-6 / (4096 * 132 * 1.755e9),
                         "sm_clock_hz": 1.755e9, "dense_peak_flop_per_s": 989.4e12,
                         "bandwidth_fraction": 59_080_704 / 40e-6 / 4.8e12, "bandwidth_bytes_per_s": 4.8e12})
PROBE = record("gemm", "8192x8192x8192", "nvfp4", "skipped",
               reason="nvfp4 GEMM needs sm_100 or sm_120; this device is sm_90",
               workload={"m": 8192, "n": 8192, "k": 8192, "origin": "format probe"})
SQUARE = record("gemm", "4096x4096x4096", "bf16", time_s=1.5e-3, n_sets=2, tolerance=2e-2,
                workload={"m": 4096, "n": 4096, "k": 4096, "origin": "square"}, stamp="2026-11-30T01:00:02.000Z",
                derived={"flop_per_s": 2 * 4096**3 / 1.5e-3, "bytes_per_s": 3 * 2 * 4096**2 / 1.5e-3,
                         "dense_fraction": 2 * 4096**3 / 1.5e-3 / 989.4e12,
                         "roofline_fraction": 2 * 4096**3 / 1.5e-3 / 989.4e12,
                         "bound": "compute", "dense_peak_flop_per_s": 989.4e12})


def typed(*records: dict[str, Any]) -> list[Record]:
    """The JSON objects as records (:meth:`Record.from_dict`)."""
    return [Record.from_dict(r) for r in records]


def edit(rec: Record | dict[str, Any], **changes: Any) -> Record:
    """A copy of a record with ``changes`` to its JSON object: a key is a field (``mode``) or a dotted path into a
    part (``measurement.warning_codes``); ``time`` sets the measurement's steady median (the time per call)."""
    d = _copy.deepcopy(rec.to_dict() if isinstance(rec, Record) else rec)
    for path, value in changes.items():
        if path == "time":
            d["measurement"]["steady_median_s"] = d["time_s"] = value
            continue
        *parents, name = path.split(".")
        holder = d
        for p in parents:
            holder = holder[p]
        holder[name] = value
    return Record.from_dict(d)


@pytest.fixture
def three():
    """copy, a bf16 decode GEMM, a skipped nvfp4 probe."""
    return typed(COPY, DECODE, PROBE)


@pytest.fixture
def four():
    """``three`` plus a faster bf16 square."""
    return typed(COPY, DECODE, PROBE, SQUARE)


@pytest.fixture(name="typed")
def typed_fixture():
    """:func:`typed`, for the tests (the test modules cannot import this one)."""
    return typed


@pytest.fixture(name="edit")
def edit_fixture():
    """:func:`edit`, for the tests."""
    return edit


@pytest.fixture(name="record")
def record_fixture():
    """:func:`record`, for the tests."""
    return record
