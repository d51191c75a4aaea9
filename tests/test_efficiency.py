"""truepeak.efficiency: the S1 workflow, C01, C08 through analyze, and derived_metrics. Values computed by hand."""

from __future__ import annotations

import json
import math

import pytest

from truepeak.efficiency import analyze, derived_metrics
from truepeak.records import CopyMetrics, GemmMetrics
from truepeak.errors import MeasurementError, TruepeakError, UnknownNameError, UnsupportedError
from truepeak.hardware.catalog import Accelerator, Architecture, Peak, Sourced, load_catalog
from truepeak.roofline import Copy, Gemm
from truepeak.units import fmt_pct


def catalog_acc(key: str) -> Accelerator:
    """A catalog entry by key; skip while the catalog (completed in parallel) lacks it."""
    try:
        return load_catalog().by_key(key)
    except KeyError:
        pytest.skip(f"catalog has no {key!r} entry yet")


def make_acc(key="test", name="Test GPU", peaks=(), bandwidth=None, sm_count=None, per_clk=None, l2=None):
    """A hand-built Accelerator (SI units) so a test does not depend on catalog values being filled in."""
    src = "test"
    return Accelerator(
        key=key, name=name, vendor="nvidia",
        architecture=Architecture("arch", "arch", dict(per_clk or {}), src),
        compute_capability=None, device_names=(), aliases=(), peaks=tuple(peaks),
        memory_bytes=None, memory_bandwidth=None if bandwidth is None else Sourced(bandwidth, src),
        sm_count=None if sm_count is None else Sourced(sm_count, src), boost_clock_hz=None, max_clock_hz=None,
        l2_bytes=None if l2 is None else Sourced(l2, src), smem_per_block_bytes=None, tdp_w=None, interconnect=None,
    )


@pytest.fixture
def ws():
    return load_catalog().by_key("rtx-pro-6000-ws")


@pytest.fixture
def h200():
    return load_catalog().by_key("h200-sxm")


# ---------------------------------------------------------------------------------------------------------------------
# S1 — GLM-5 NVFP4 on RTX PRO 6000 Blackwell Workstation Edition


def test_S1_large_gemm_against_dense_not_sparse(ws):
    e = analyze(ws, "nvfp4", tflops=1300)
    assert e.dense_flops == 2015.2e12          # 188 SMs x 2.617 GHz x 4096 FLOP/clk/SM
    assert e.pct_dense == pytest.approx(1300 / 2015.2)
    assert fmt_pct(e.pct_dense) == "64.5 %"   # not 32.5 % of "4000"
    # the sparse-headline trap: computed, labelled wrong, never the efficiency
    assert e.sparse_flops == 4030.4e12
    assert fmt_pct(e.pct_sparse) == "32.3 %"
    assert e.sparse_trap == ("against the 4030.4 TFLOPS sparse figure this would read 32.3 % — wrong: "
                             "2:4 sparsity doubles the datasheet rate; dense GEMMs never reach it")


def test_S1_moe_aggregate(ws):
    assert fmt_pct(analyze(ws, "nvfp4", tflops=437).pct_dense) == "21.7 %"  # 437 / 2015.2 = 0.2169


def test_S1_per_expert_gemm_counts():
    g = Gemm(16, 6144, 4096, "nvfp4")       # M=16 tokens, N=6144 (gate+up), K=4096
    assert g.flop == 2 * 16 * 6144 * 4096 == 805_306_368   # 0.805 GFLOP
    # weight B: 6144 * 4096 values * 0.5625 B = 14,155,776 B (>= 14.2 MB)
    assert g.b_bytes == 14_155_776
    # activations A: 16 * 4096 * 0.5625 = 36,864 B; output C in bf16: 16 * 6144 * 2 = 196,608 B
    assert g.a_bytes == 36_864 and g.c_bytes == 196_608
    assert g.min_bytes == 14_155_776 + 36_864 + 196_608 == 14_389_248
    # weights-only intensity = 2 * M / 0.5625 = 512 / 9 = 56.89 FLOP/B; with A and C counted it is 55.97
    assert g.flop / g.b_bytes == pytest.approx(512 / 9)
    assert g.intensity == pytest.approx(805_306_368 / 14_389_248)
    assert g.intensity == pytest.approx(55.966, abs=1e-3)


def test_S1_per_expert_gemm_roofline(ws):
    e = analyze(ws, "nvfp4", shape="16x6144x4096", tflops=0.8)
    assert e.ridge == pytest.approx(2015.2 / 1.792)           # 1124.55 FLOP/B
    assert e.ridge == pytest.approx(1125, abs=1)
    assert e.bound == "memory"                                 # 56 << 1125
    # ceiling = 1.792e12 B/s x 805,306,368 / 14,389,248 FLOP/B = 100.29 TFLOPS (A, B and C bytes counted);
    # the case's "~102 TFLOPS" is the weights-only count, 1.792e12 x 512/9 = 101.94 TFLOPS.
    assert e.attainable_flop_per_s == pytest.approx(1.792e12 * 805_306_368 / 14_389_248)
    assert e.attainable_flop_per_s / 1e12 == pytest.approx(100.29, abs=0.01)
    assert 1.792e12 * e.flop / e.b_bytes / 1e12 == pytest.approx(101.94, abs=0.01)
    # time = 0.805e9 FLOP / 0.8e12 FLOP/s = 1.0066 ms; bytes / time = 14.29 GB/s = 0.80 % of 1792 GB/s
    assert e.time_s == pytest.approx(805_306_368 / 0.8e12)
    assert e.achieved_bandwidth == pytest.approx(14_389_248 / e.time_s)
    assert e.pct_bandwidth == pytest.approx(0.8e12 / e.attainable_flop_per_s)   # memory-bound: bandwidth % = roofline %
    assert e.pct_roofline == pytest.approx(e.pct_bandwidth)
    assert e.time_floor_s == pytest.approx(14_389_248 / 1.792e12)          # 8.03 us
    assert e.notes == ()


def test_S1_server_edition():
    acc = catalog_acc("rtx-pro-6000-server")
    pct = analyze(acc, "nvfp4", tflops=1300).pct_dense
    assert 0.68 <= pct <= 0.71  # ~1872 dense (derived): 69-70 %


# ---------------------------------------------------------------------------------------------------------------------
# C01 — efficiency against a sparse peak


def test_C01_h200(h200):
    e = analyze(h200, "bf16", tflops=420)
    assert fmt_pct(e.pct_dense) == "42.4 %"
    assert fmt_pct(e.pct_sparse) == "21.2 %"
    assert "wrong" in e.sparse_trap  # 21.2 % appears only as the labelled trap


def test_C01_h100():
    acc = catalog_acc("h100-sxm")
    assert fmt_pct(analyze(acc, "bf16", tflops=480).pct_dense) == "48.5 %"


def test_C01_h100_by_hand():
    acc = make_acc(name="NVIDIA H100 SXM", peaks=[Peak("bf16", "fp32", 989.4e12, 1979e12, "test")])
    assert analyze(acc, "bf16", tflops=480).pct_dense == pytest.approx(480 / 989.4)  # 48.5 %


# ---------------------------------------------------------------------------------------------------------------------
# C07 / C08 through analyze


def rtx4090():
    return make_acc(key="rtx-4090", name="NVIDIA GeForce RTX 4090", bandwidth=1.008e12, sm_count=128,
                    per_clk={"fp32": 256, "bf16": 512}, l2=72 * 2**20,
                    peaks=[Peak("fp32", "fp32", 82.6e12, None, "test"),
                           Peak("bf16", "fp32", 165.2e12, 330.4e12, "test")])


def test_C08_analyze_rejects_impossible_time():
    with pytest.raises(MeasurementError) as err:
        analyze(rtx4090(), "fp32", shape="4096x4096x4096", time_s=0.275e-3)
    msg = str(err.value)
    assert msg.startswith("499.8 TFLOPS is 605 % of the 82.6 TFLOPS dense fp32 peak of NVIDIA GeForce RTX 4090: "
                          "this cannot be a real measurement")


def test_C08_analyze_accepts_plausible_time():
    e = analyze(rtx4090(), "fp32", shape="4096x4096x4096", time_s=2.75e-3)
    assert fmt_pct(e.pct_dense) == "60.5 %"
    assert e.time_floor_s == pytest.approx(1.664e-3, rel=1e-3)
    assert e.bound == "compute"


def test_C08_catalog_rtx4090():
    acc = catalog_acc("rtx-4090")
    with pytest.raises(MeasurementError, match="measurement"):
        analyze(acc, "fp32", shape="4096x4096x4096", time_s=0.275e-3)
    assert analyze(acc, "fp32", shape="4096x4096x4096", time_s=2.75e-3).pct_dense == pytest.approx(0.605, abs=2e-3)


def test_C07_analyze_h200_time_floor(h200):
    e = analyze(h200, "bf16", shape="8192x8192x8192", time_s=1.5e-3)
    assert e.flop == 1_099_511_627_776
    assert e.time_floor_s == pytest.approx(1.0995116e12 / 989.4e12)  # 1.111 ms
    assert e.achieved_flops == pytest.approx(1.0995116e12 / 1.5e-3)   # 733.0 TFLOPS
    assert e.bound == "compute" and e.pct_roofline == pytest.approx(e.pct_dense)
    assert e.pct_bandwidth is None  # only for memory-bound shapes


# ---------------------------------------------------------------------------------------------------------------------
# any two of (tflops, shape, time); errors


def test_two_of_three(h200):
    by_time = analyze(h200, "bf16", shape="8192x8192x8192", time_s=1.5e-3)
    by_tflops = analyze(h200, "bf16", shape="8192x8192x8192", tflops=by_time.achieved_flops / 1e12)
    assert by_tflops.time_s == pytest.approx(1.5e-3)
    both = analyze(h200, "bf16", shape=(8192, 8192, 8192), time_s=1.5e-3, tflops=733)  # 733.0 within 1 %
    assert both.achieved_flops == pytest.approx(by_time.achieved_flops)


def test_inconsistent_triple(h200):
    with pytest.raises(TruepeakError, match="inconsistent"):
        analyze(h200, "bf16", shape="8192x8192x8192", time_s=1.5e-3, tflops=700)


def test_missing_measurement(h200):
    with pytest.raises(TruepeakError):
        analyze(h200, "bf16")
    with pytest.raises(TruepeakError, match="shape"):
        analyze(h200, "bf16", time_s=1e-3)


@pytest.mark.parametrize("kw", [dict(tflops=0), dict(tflops=-5), dict(tflops=math.nan), dict(tflops=math.inf),
                                dict(shape="8x8x8", time_s=0), dict(shape="8x8x8", time_s=-1.0),
                                dict(tflops=100, clock_hz=0)])
def test_bad_numbers(h200, kw):
    with pytest.raises(MeasurementError):
        analyze(h200, "bf16", **kw)


def test_above_dense_peak(h200):
    with pytest.raises(MeasurementError, match=r"5000.0 TFLOPS is 505 % of the 989.4 TFLOPS dense bf16 peak"):
        analyze(h200, "bf16", tflops=5000)


def test_unsupported_format(h200):
    with pytest.raises(UnsupportedError):
        analyze(h200, "nvfp4", tflops=100)


def test_measured_clock(h200):
    # 4096 FLOP/clk/SM x 132 SMs x 1.5 GHz = 811.008 TFLOPS
    e = analyze(h200, "bf16", tflops=700, clock_hz=1.5e9)
    assert e.peak_at_clock_flops == pytest.approx(811.008e12)
    assert e.pct_at_clock == pytest.approx(700 / 811.008)
    # above the spec-clock dense peak but below the peak at a measured 1980 MHz (1070.5 TFLOPS): physically possible
    assert analyze(h200, "bf16", tflops=1000, clock_hz=1.98e9).pct_dense == pytest.approx(1000 / 989.4)
    with pytest.raises(MeasurementError, match="at the measured 1980 MHz clock"):
        analyze(h200, "bf16", tflops=1100, clock_hz=1.98e9)


def test_above_memory_roof_is_flagged(h200):
    # 16x4096x4096 bf16 in 10 us: 33.8 MB / 10 us = 3382 GB/s (< 4800): fine; in 5 us = 6763 GB/s: from L2
    assert analyze(h200, "bf16", shape="16x4096x4096", time_s=10e-6).notes == ()
    e = analyze(h200, "bf16", shape="16x4096x4096", time_s=5e-6)
    assert e.pct_roofline > 1 and e.pct_bandwidth > 1
    assert len(e.notes) == 1 and "L2" in e.notes[0]


def test_fp16_accumulate_peak():
    acc = make_acc(peaks=[Peak("fp16", "fp32", 165.2e12, None, "t"), Peak("fp16", "fp16", 330.3e12, None, "t")])
    assert analyze(acc, "fp16", tflops=200, accumulate="fp16").pct_dense == pytest.approx(200 / 330.3)
    with pytest.raises(MeasurementError, match="165.2 TFLOPS"):
        analyze(acc, "fp16", tflops=200)


def test_to_dict_is_json(ws):
    d = analyze(ws, "nvfp4", shape="16x6144x4096", tflops=0.8).to_dict()
    back = json.loads(json.dumps(d))
    assert back["bound"] == "memory" and back["gemm"]["label"] == "16x6144x4096"
    assert back["pct_dense"] == pytest.approx(0.8 / 2015.2)
    # the GEMM's counts are written as keys of their own (S1: see test_S1_per_expert_gemm_counts)
    assert back["shape"] == [16, 6144, 4096] and back["flop"] == 805_306_368 and back["min_bytes"] == 14_389_248
    assert (back["a_bytes"], back["b_bytes"], back["c_bytes"]) == (36_864, 14_155_776, 196_608)
    assert back["intensity"] == pytest.approx(55.966, abs=1e-3)


def test_counts_come_from_the_gemm(ws):
    e = analyze(ws, "nvfp4", shape="16x6144x4096", tflops=0.8)
    assert e.shape == (16, 6144, 4096) and e.flop == e.gemm.flop and e.b_bytes == 14_155_776
    bare = analyze(ws, "nvfp4", tflops=1300)
    assert bare.gemm is None and bare.shape is None and bare.flop is None and bare.intensity is None
    assert bare.to_dict()["min_bytes"] is None


def test_no_bandwidth_no_roofline():
    acc = make_acc(peaks=[Peak("bf16", "fp32", 100e12, None, "t")])
    e = analyze(acc, "bf16", shape="64x64x64", tflops=1)
    assert e.bound is None and e.attainable_flop_per_s is None and e.flop == 2 * 64**3
    assert "no memory bandwidth" in e.notes[0]


# ---------------------------------------------------------------------------------------------------------------------
# derived_metrics (used by `truepeak run` for every record): SI values, fractions

def _set(m) -> set[str]:
    """The metrics that hold a value."""
    return set(m.to_dict())


def test_derived_metrics_gemm(h200):
    g = Gemm(8192, 8192, 8192, "bf16")
    m = derived_metrics(h200, g, 1.5e-3, clock_hz=1.5e9)
    assert isinstance(m, GemmMetrics) and m.memory_note is None
    assert m.flop_per_s == pytest.approx(1_099_511_627_776 / 1.5e-3)             # 733.0 TFLOPS
    assert m.bytes_per_s == pytest.approx(3 * 134_217_728 / 1.5e-3)              # 268.4 GB/s
    assert m.dense_fraction == pytest.approx(0.740861, abs=1e-6)                      # 733.007 / 989.4
    assert m.bound == "compute" and m.attainable_flop_per_s == pytest.approx(989.4e12)
    assert m.roofline_fraction == pytest.approx(0.740861, abs=1e-6)
    assert m.at_clock_fraction == pytest.approx(0.903823, abs=1e-6)                   # 733.007 / 811.008 at 1.5 GHz
    assert m.bandwidth_fraction == pytest.approx(0.0559241, abs=1e-7)                 # 268.4 / 4800
    # what the percentages are against, so a record explains itself
    assert m.sm_clock_hz == 1.5e9 and m.dense_peak_flop_per_s == 989.4e12 and m.peak_estimated is False
    assert m.bandwidth_bytes_per_s == 4.8e12 and m.peak_source and m.bandwidth_source


def test_derived_metrics_copy(h200):
    m = derived_metrics(h200, Copy(2**30), 0.5e-3)
    assert isinstance(m, CopyMetrics)
    assert m.bytes_per_s == pytest.approx(2 * 2**30 / 0.5e-3)     # 4295 GB/s, read + write
    assert m.bandwidth_fraction == pytest.approx(0.894785, abs=1e-6)   # 4295 / 4800 = 89.5 %
    assert m.bandwidth_bytes_per_s == 4.8e12
    assert _set(m) == {"bytes_per_s", "bandwidth_fraction", "bandwidth_bytes_per_s", "bandwidth_source"}


def test_derived_metrics_cpu_accelerator():
    cpu = make_acc(key="cpu", name="CPU")
    m = derived_metrics(cpu, Gemm(256, 256, 256, "fp32"), 1e-3, clock_hz=3e9)
    assert m.flop_per_s == pytest.approx(2 * 256**3 / 1e-3)       # 33.55 GFLOP/s
    assert m.sm_clock_hz == 3e9
    assert _set(m) == {"flop_per_s", "bytes_per_s", "sm_clock_hz"}
    c = derived_metrics(cpu, Copy(1000), 1e-6)
    assert c.bytes_per_s == pytest.approx(2e9) and c.bandwidth_fraction is None


def test_derived_metrics_rejects(h200):
    g = Gemm(8192, 8192, 8192, "bf16")
    with pytest.raises(MeasurementError):
        derived_metrics(h200, g, 0.0)
    with pytest.raises(MeasurementError, match="cannot be a real measurement"):
        derived_metrics(h200, g, 0.278e-3)  # C07: 3955 TFLOPS
    # a measured clock above the spec basis raises the applicable limit: 1000 TFLOPS at 1.98 GHz is possible
    m = derived_metrics(h200, g, g.flop / 1000e12, clock_hz=1.98e9)
    assert m.dense_fraction > 1 and m.at_clock_fraction < 1


def test_derived_metrics_ignores_unusable_clock(h200):
    m = derived_metrics(h200, Gemm(1024, 1024, 1024, "bf16"), 1e-3, clock_hz=math.nan)
    assert m.at_clock_fraction is None and m.sm_clock_hz is None and m.dense_fraction is not None


# ---------------------------------------------------------------------------------------------------------------------
# Above the spec-clock peak but below the peak at the highest clock: accepted, with a note

ABOVE_SPEC = ("above the spec-clock dense peak: the GPU ran above its 1830 MHz spec clock; pass --clock-mhz (or use "
              "truepeak run, which samples it) to compare against the peak at the clock it ran")


def test_h100_990_is_accepted_above_100_percent_with_a_note():
    e = analyze(catalog_acc("h100-sxm"), "bf16", tflops=990)  # 132 x 4096 x 1.98 GHz = 1070.5 allows it
    assert e.pct_dense == pytest.approx(990 / 989.4) and e.pct_dense > 1
    assert ABOVE_SPEC in e.notes
    assert e.ceiling_flops == pytest.approx(1070.5e12, rel=1e-4)
    with pytest.raises(MeasurementError, match="1070.5 TFLOPS ceiling"):
        analyze(catalog_acc("h100-sxm"), "bf16", tflops=1071)


@pytest.mark.parametrize(("key", "tflops", "spec_mhz"), [("rtx-5090", 239, 2407), ("rtx-4090", 178, 2520)])
def test_geforce_measurements_above_the_spec_sheet_are_accepted(key, tflops, spec_mhz):
    e = analyze(catalog_acc(key), "bf16", tflops=tflops)
    assert e.pct_dense > 1
    assert any(f"above its {spec_mhz} MHz spec clock" in n for n in e.notes)


def test_clock_above_the_measured_value_is_noted(h200):
    e = analyze(h200, "bf16", tflops=1000, clock_hz=1.5e9)  # accepted (below 1070.5 at max) but above 811 at 1.5 GHz
    assert e.pct_at_clock > 1
    assert any("above the peak at the given 1500 MHz clock" in n for n in e.notes)


def test_clock_far_above_the_maximum_is_rejected(h200):
    with pytest.raises(MeasurementError, match="above the 1980 MHz maximum clock"):
        analyze(h200, "bf16", tflops=100, clock_hz=3e9)


def test_clock_above_the_catalog_maximum_cannot_lift_the_ceiling(h200):
    """Adversarial test 2: --clock-mhz 2900 on an H200 (NVML max 1980) lifted the ceiling to 146.6 %."""
    with pytest.raises(MeasurementError, match=r"SM clock 2900 MHz is above the 1980 MHz maximum clock of NVIDIA H200"):
        analyze(h200, "bf16", tflops=1450, clock_hz=2.9e9)
    assert analyze(h200, "bf16", tflops=900, clock_hz=1.98e9 * 1.02).clock_hz == pytest.approx(2019.6e6)  # 2 % slack


def test_derived_metrics_ignores_a_clock_far_above_the_maximum(h200):
    m = derived_metrics(h200, Gemm(1024, 1024, 1024, "bf16"), 1e-3, clock_hz=5e9)
    assert m.at_clock_fraction is None and m.dense_fraction is not None


# ---------------------------------------------------------------------------------------------------------------------
# Instruction kind: block-scaled MXFP8 on the RTX 5090


def test_5090_mxfp8_660_at_2750_mhz_is_accepted():
    acc = catalog_acc("rtx-5090")
    e = analyze(acc, "mxfp8", tflops=660, clock_hz=2.75e9)
    assert e.dense_flops == pytest.approx(838e12) and e.peak_derived
    assert e.pct_dense == pytest.approx(660 / 838)
    assert e.peak_at_clock_flops == pytest.approx(2048 * 170 * 2.75e9)   # 957.4 TFLOPS
    assert e.pct_at_clock == pytest.approx(660e12 / (2048 * 170 * 2.75e9))
    assert "unverified" in e.peak_note


@pytest.mark.parametrize("clock_hz", [None, 2.75e9])
def test_5090_fp8_e4m3_660_is_rejected(clock_hz):
    # 660 / 419 = 157 %: above 1.15 x 419 = 481.9 and above 1024 x 170 x 2.75 GHz = 478.7
    with pytest.raises(MeasurementError, match="158 % of the 419.0 TFLOPS dense fp8 peak"):
        analyze(catalog_acc("rtx-5090"), "fp8_e4m3", tflops=660, clock_hz=clock_hz)


# ---------------------------------------------------------------------------------------------------------------------
# Shape alone, scaling validation, units


def test_S1_shape_alone_gives_the_bounds(ws):
    e = analyze(ws, "nvfp4", shape="16x6144x4096")
    assert e.achieved_flops is None and e.pct_dense is None and e.pct_roofline is None and e.time_s is None
    assert e.bound == "memory" and e.ridge == pytest.approx(2015.2 / 1.792)
    assert e.attainable_flop_per_s / 1e12 == pytest.approx(100.29, abs=0.01)
    assert e.time_floor_s == pytest.approx(14_389_248 / 1.792e12)
    assert e.flop == 805_306_368 and e.min_bytes == 14_389_248


@pytest.mark.parametrize(("fmt", "scaling", "needle"), [("bf16", "bogus", "tensor, row, block128"),
                                                        ("fp8", "bogus", "tensor, row, block128"),
                                                        ("bf16", "row", "fp8 and int8"),
                                                        ("nvfp4", "tensor", "own block scales")])
def test_scaling_is_validated_without_a_shape(h200, ws, fmt, scaling, needle):
    acc = ws if fmt == "nvfp4" else h200
    with pytest.raises(TruepeakError, match=needle):
        analyze(acc, fmt, tflops=10, scaling=scaling)


def test_int8_is_in_tops(h200):
    e = analyze(h200, "int8", tflops=1000)
    assert e.unit == "TOPS"
    assert "3958.0 TOPS sparse figure" in e.sparse_trap
    with pytest.raises(MeasurementError, match=r"^5000.0 TOPS is 253 % of the 1978.9 TOPS dense int8 peak"):
        analyze(h200, "int8", tflops=5000)


def test_amd_fp8_peak_note_says_fnuz():
    assert "e4m3fnuz" in analyze(catalog_acc("mi300x"), "fp8_e4m3", tflops=1000).peak_note
    assert "e4m3fnuz" in analyze(catalog_acc("mi325x"), "fp8_e4m3", tflops=1000).peak_note


def test_b300_above_spec_note_and_sparse_trap_do_not_assume_what_the_catalog_lacks():
    e = analyze(catalog_acc("b300"), "nvfp4", tflops=16000)  # no max clock, no FLOP/clk/SM: 15 % headroom
    assert e.pct_dense > 1
    assert any("cannot be computed" in n for n in e.notes)
    assert "doubles" not in e.sparse_trap and "not 2 x dense" in e.sparse_trap


def test_accelerator_by_name(h200):
    """analyze and derived_metrics take a name as well as an Accelerator (resolved by get_accelerator)."""
    by_name = analyze("h200", "bf16", tflops=500)
    assert by_name == analyze(h200, "bf16", tflops=500)
    assert by_name.accelerator_key == "h200-sxm" and by_name.pct_dense == pytest.approx(500e12 / by_name.dense_flops)
    assert analyze("NVIDIA H200", "bf16", shape="1x4096x7168", time_s=30e-6).bound == "memory"
    work = Gemm(256, 4096, 7168, "bf16")
    assert derived_metrics("h200", work, 1e-4) == derived_metrics(h200, work, 1e-4)
    with pytest.raises(UnknownNameError, match="unknown accelerator 'h2000'"):
        analyze("h2000", "bf16", tflops=500)
    with pytest.raises(TruepeakError, match="a name such as 'h200' or an Accelerator, not int"):
        derived_metrics(7, work, 1e-4)


# ---------------------------------------------------------------------------------------------------------------------
# The memory side of plausibility (truepeak.roofline.check_memory_plausible), wired into analyze and derived_metrics


def test_memory_side_impossible_time_is_rejected(h200):
    """1x16384x16384 bf16 moves 536,936,448 B; in 10 µs that is 53,694 GB/s = 1118.6 % of 4800 GB/s, and at least
    474 MB cannot sit in the 62.9 MB L2: >= 98.75 µs. Compute-side it is only 53.7 TFLOPS, so only this check sees
    it."""
    with pytest.raises(MeasurementError, match=r"10 µs for 1x16384x16384 bf16 moves 536\.9 MB .*98\.75 µs: this "
                                               r"cannot be a real measurement"):
        analyze("h200", "bf16", shape="1x16384x16384", time_s=1e-5)
    with pytest.raises(MeasurementError, match="cannot be a real measurement"):
        analyze(h200, "bf16", shape="1x16384x16384", tflops=2 * 16384 * 16384 / 1e-5 / 1e12)  # the same, as TFLOPS
    with pytest.raises(MeasurementError, match="98.75 µs"):
        derived_metrics(h200, Gemm(1, 16384, 16384, "bf16"), 1e-5)
    with pytest.raises(MeasurementError, match=r"for copy 1073741824 B moves 2\.147 GB"):
        derived_metrics(h200, Copy(2**30), 400e-6)


def test_memory_side_plausible_time_is_fine(h200):
    """1x4096x7168 bf16: 58,742,784 B in 30 µs = 1958 GB/s = 40.8 % of 4800 GB/s."""
    e = analyze("h200", "bf16", shape="1x4096x7168", time_s=30e-6)
    assert e.notes == () and e.pct_bandwidth == pytest.approx(58_742_784 / 30e-6 / 4.8e12)
    d = derived_metrics(h200, Gemm(1, 4096, 7168, "bf16"), 30e-6)
    assert d.memory_note is None and d.bandwidth_fraction == pytest.approx(0.40794, rel=1e-4)
    assert derived_metrics(h200, Copy(2**30), 0.5e-3).memory_note is None
    assert analyze(h200, "bf16", shape="1x16384x16384").time_floor_s > 0  # a shape alone: bounds, nothing to check


def test_memory_side_note_when_the_cache_can_explain_it(h200):
    """16x4096x4096 bf16 (33.8 MB) in 5 µs: 6763 GB/s, above HBM but the working set fits the L2: a note, no error."""
    e = analyze(h200, "bf16", shape="16x4096x4096", time_s=5e-6)
    assert len(e.notes) == 1 and "fits in the 62.91 MB L2" in e.notes[0] and "6763 GB/s" in e.notes[0]
    d = derived_metrics(h200, Gemm(16, 4096, 4096, "bf16"), 5e-6)
    assert d.memory_note == e.notes[0]


def test_memory_side_is_not_checked_against_a_measured_bandwidth():
    """A CPU's roofline ceiling is its measured copy (``derived``): a noisy copy reads low, so a GEMM above it is a
    warning in truepeak run, never a timing error."""
    from dataclasses import replace

    acc = make_acc(peaks=[Peak("fp32", "fp32", 100e9, None, "test")], l2=1 << 20)
    measured = replace(acc, memory_bandwidth=Sourced(1e9, "measured: copy", derived=True))
    d = derived_metrics(measured, Gemm(1, 4096, 7168, "fp32"), 1e-3)  # 117 MB in 1 ms = 117 GB/s vs 1 GB/s
    assert d.roofline_fraction > 100 and d.memory_note is None
    spec = replace(acc, memory_bandwidth=Sourced(1e9, "datasheet"))
    with pytest.raises(MeasurementError, match="cannot be a real measurement"):
        derived_metrics(spec, Gemm(1, 4096, 7168, "fp32"), 1e-3)


def test_compute_bound_above_the_dense_peak_is_not_called_a_memory_excess():
    """8192^3 bf16 at 990 TFLOPS on an H100 (above the 989.4 dense peak, allowed by the 1980 MHz maximum clock) moves
    402.7 MB in 1.11 ms = 362 GB/s: the note is the above-spec-clock one, not "above the memory bandwidth"."""
    e = analyze(catalog_acc("h100-sxm"), "bf16", shape="8192x8192x8192", tflops=990)
    assert e.bound == "compute" and e.pct_roofline > 1
    assert ABOVE_SPEC in e.notes and not any("memory bandwidth" in n for n in e.notes)


def test_throughput_whose_flop_per_s_overflow_is_above_the_peak_not_inf():
    # 1e300 TFLOPS x 1e12 = inf in a float; the error keeps the value as given: 1e300 / 989.4 x 100 % = 1.01e299 %
    with pytest.raises(MeasurementError, match=r"^1e\+300 TFLOPS is 1\.01e\+299 % of the 989\.4 TFLOPS dense bf16 "
                                               r"peak of NVIDIA H100 SXM: this cannot be a real measurement"):
        analyze("h100-sxm", "bf16", tflops=1e300)
