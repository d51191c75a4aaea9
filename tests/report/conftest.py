"""Hand-made schema-2 records of a small H200 run (SI values; the renderers only format them).

- copy 2 GiB in 1 ms: 2 x 2**31 B / 1e-3 s = 4.295e12 B/s = 89.5 % of 4.8e12 B/s.
- bf16 16x4096x7168 in 40 us: 939,524,096 FLOP -> 23.49 TFLOPS = 2.37 % of 989.4; 59,080,704 B -> 1477 GB/s =
  30.8 % of 4800 (memory-bound, so % of roofline = % of bandwidth); at 1755 MHz the peak is 4096 x 132 x 1.755e9 =
  948.9 TFLOPS, 2.48 % of it. Timed as CUDA-graph replays (under 50 us).
- nvfp4 probe: skipped on sm_90.
- bf16 4096^3 in 1.5 ms (only in ``four``): 137,438,953,472 FLOP -> 91.63 TFLOPS = 9.26 % of 989.4; compute-bound.
"""

from __future__ import annotations

import pytest

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
NONE_DERIVED = dict.fromkeys(("flop_per_s", "bytes_per_s", "pct_dense", "pct_roofline", "bound",
                              "attainable_flop_per_s", "pct_at_clock", "pct_bandwidth", "sm_clock_hz",
                              "dense_peak_flop_per_s", "peak_source", "peak_estimated", "bandwidth_bytes_per_s",
                              "bandwidth_source"))


def record(kind, label, fmt, status="ok", *, time_s=None, derived=None, reason="", workload=None, graph=False,
           n_sets=None, tolerance=None, stamp="2026-11-30T01:00:00.000Z"):
    w = {"label": label, **(workload or {})}
    measurement = None
    if status == "ok":
        measurement = {"mode": "sustained", "steady_median_s": time_s, "n_samples": 50, "graph": graph,
                       "input_kind": "random", "n_sets": n_sets, "warning_codes": [], "warnings": []}
    return {
        "schema_version": 2, "methodology_version": 1, "truepeak_version": "0.1.0",
        "key": f"{kind}|{label}|torch|{fmt or '-'}|sustained", "kind": kind, "status": status, "reason": reason,
        "workload": w, "backend": "torch", "format": fmt, "mode": "sustained", "time_s": time_s,
        "measurement": measurement, "warnings": [],
        "correctness": None if tolerance is None else {"rel_error": 0.003, "tolerance": tolerance, "passed": True},
        "derived": None if derived is None else {**NONE_DERIVED, **derived},
        "env": H200_ENV, "run_config": RUN_CONFIG,
        "rotation": None if n_sets is None else {"n_sets": n_sets, "wanted_sets": n_sets, "capped": False, "note": "",
                                                 "l2_bytes": 62914560},
        "timestamp": stamp,
    }


COPY = record("membw", "copy 2 GiB", None, time_s=1e-3, workload={"nbytes": 2**31},
              derived={"bytes_per_s": 2 * 2**31 / 1e-3, "pct_bandwidth": 2 * 2**31 / 1e-3 / 4.8e12,
                       "bandwidth_bytes_per_s": 4.8e12, "bandwidth_source": "catalog"})
DECODE = record("gemm", "16x4096x7168", "bf16", time_s=40e-6, graph=True, n_sets=3, tolerance=2e-2,
                workload={"m": 16, "n": 4096, "k": 7168, "origin": "DeepSeek-V3 expert gate+up"},
                stamp="2026-11-30T01:00:01.000Z",
                derived={"flop_per_s": 939_524_096 / 40e-6, "bytes_per_s": 59_080_704 / 40e-6,
                         "pct_dense": 939_524_096 / 40e-6 / 989.4e12, "pct_roofline": 59_080_704 / 40e-6 / 4.8e12,
                         "bound": "memory", "pct_at_clock": 939_524_096 / 40e-6 / (4096 * 132 * 1.755e9),
                         "sm_clock_hz": 1.755e9, "dense_peak_flop_per_s": 989.4e12,
                         "pct_bandwidth": 59_080_704 / 40e-6 / 4.8e12, "bandwidth_bytes_per_s": 4.8e12})
PROBE = record("gemm", "8192x8192x8192", "nvfp4", "skipped",
               reason="nvfp4 GEMM needs sm_100 or sm_120; this device is sm_90",
               workload={"m": 8192, "n": 8192, "k": 8192, "origin": "format probe"})
SQUARE = record("gemm", "4096x4096x4096", "bf16", time_s=1.5e-3, n_sets=2, tolerance=2e-2,
                workload={"m": 4096, "n": 4096, "k": 4096, "origin": "square"}, stamp="2026-11-30T01:00:02.000Z",
                derived={"flop_per_s": 2 * 4096**3 / 1.5e-3, "bytes_per_s": 3 * 2 * 4096**2 / 1.5e-3,
                         "pct_dense": 2 * 4096**3 / 1.5e-3 / 989.4e12, "pct_roofline": 2 * 4096**3 / 1.5e-3 / 989.4e12,
                         "bound": "compute", "dense_peak_flop_per_s": 989.4e12})


@pytest.fixture
def three():
    """copy, a bf16 decode GEMM, a skipped nvfp4 probe."""
    return [COPY, DECODE, PROBE]


@pytest.fixture
def four():
    """``three`` plus a faster bf16 square."""
    return [COPY, DECODE, PROBE, SQUARE]
