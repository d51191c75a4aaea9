"""A GEMM record's warnings in words (truepeak/bench/run/warnings.py): above the roofline, and the sampled SM
clock above the catalog maximum or throttled."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from truepeak.bench import gemm as G  # noqa: E402
from truepeak.bench import run as R  # noqa: E402
from truepeak.efficiency import derived_metrics  # noqa: E402
from truepeak.hardware.detect import cuda_device_info  # noqa: E402


def _h200():
    return cuda_device_info("NVIDIA H200", "9.0", sm_count=132, l2_bytes=62914560, smem_per_block_bytes=232448,
                            max_sm_clock_hz=1980e6, memory_bytes=150 * 10**9, index=0)


def _metrics(**values):
    from truepeak.records import GemmMetrics

    return GemmMetrics(**{"flop_per_s": 1e12, "bytes_per_s": 1e9, **values})


def _tel(median_mhz, limit_mhz=1980.0, reasons=None):
    from truepeak.bench.telemetry import Telemetry

    return Telemetry(n_samples=100, sm_clock_median_hz=median_mhz * 1e6, sm_clock_limit_hz=limit_mhz * 1e6,
                     power_median_w=690.0, reasons=reasons or {})


def test_roofline_warnings_by_hand():
    under = _metrics(roofline_fraction=0.98, bound="memory")
    assert R.roofline_warnings(under) == [] and R.roofline_warnings(_metrics(roofline_fraction=None)) == []
    gpu = _metrics(roofline_fraction=1.2, bound="memory", bytes_per_s=5.76e12, bandwidth_bytes_per_s=4.8e12,
                   bandwidth_source="NVIDIA H200 datasheet")
    assert R.roofline_warnings(gpu) == [
        "120.0 % of the roofline: this GEMM moved its minimum bytes at 5760 GB/s, above the 4800 GB/s memory ceiling "
        "(NVIDIA H200 datasheet): the operands were served from cache, not memory"]
    compute = _metrics(roofline_fraction=1.02, bound="compute", dense_peak_flop_per_s=989.4e12)
    assert R.roofline_warnings(compute) == [
        "102.0 % of the roofline: above the 989.4 TFLOPS dense peak (a clock above the one the peak assumes, or an "
        "estimated peak that is too low)"]


def test_roofline_warning_names_tops_for_int8():
    [warning] = R.roofline_warnings(_metrics(roofline_fraction=1.05, bound="compute", dense_peak_flop_per_s=1979e12),
                                    fmt="int8")
    assert "above the 1979.0 TOPS dense peak" in warning


def test_a_clock_above_the_catalog_maximum_is_a_visible_warning():
    """The known gap: derived_metrics drops a sampled clock > 2 % above the catalog maximum (no at_clock_fraction); the
    record must say so instead of leaving it out silently."""
    acc = _h200().accelerator
    top = acc.max_clock_hz.value / 1e6
    assert R.clock_warnings(acc, _tel(top * 1.01)) == []  # within the 2 % reading granularity
    (w,) = R.clock_warnings(acc, _tel(top * 1.05, limit_mhz=top * 1.05))
    assert "above the" in w and "catalog maximum" in w and "% of peak at measured clock is left out" in w
    d = derived_metrics(acc, G.gemm_workload("bf16", 8192, 8192, 8192), 1.6e-3, clock_hz=top * 1.05e6)
    assert d.at_clock_fraction is None and d.sm_clock_hz is None  # what the warning explains


def test_C11_a_throttled_clock_is_named_with_its_reason_and_recorded():
    acc = _h200().accelerator
    # B200-like: 1580 of 1965 MHz = 80 %, power-capped in 97 % of the polls
    (w,) = R.clock_warnings(acc, _tel(1580, limit_mhz=1965, reasons={"power cap": 0.97, "idle": 0.5}))
    assert "80 % of the 1965 MHz maximum" in w and "power cap 97 %" in w and "idle" not in w
    # already flagged by the measurement: not twice
    assert R.clock_warnings(acc, _tel(1580, limit_mhz=1965), ["low_clock"]) == []
    assert R.clock_warnings(acc, _tel(1800, limit_mhz=1980)) == []  # 91 %: not throttled
    assert R.clock_warnings(acc, None) == []
    # thermal: named as such
    (w,) = R.clock_warnings(acc, _tel(1200, reasons={"sw thermal": 1.0}))
    assert "sw thermal 100 %" in w
