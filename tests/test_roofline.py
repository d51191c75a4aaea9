"""truepeak.roofline: FLOP and byte counts, shapes, the roofline, plausibility (cases C07, C08). Values by hand."""

from __future__ import annotations

import math
import subprocess
import sys

import pytest

from truepeak.errors import MeasurementError, TruepeakError, UnsupportedError
from truepeak.hardware.catalog import load_catalog
from truepeak.roofline import Copy, Gemm, Roofline, check_plausible, check_time, parse_shape, roofline_for


def catalog_acc(key: str):
    """A catalog entry by key. The catalog is complete: a missing entry fails (UnknownNameError), never skips."""
    return load_catalog().by_key(key)


# ---------------------------------------------------------------------------------------------------------------------
# C07 — FLOP count


def test_C07_flop_and_floor():
    g = Gemm(8192, 8192, 8192, "bf16")
    assert g.flop == 2 * 8192**3 == 1_099_511_627_776  # 1.0995e12, no "/2 for MACs"
    assert g.flop == pytest.approx(1.0995e12, rel=1e-4)
    # bf16: A, B, C each 8192 * 8192 * 2 B = 134,217,728 B
    assert g.min_bytes == 3 * 134_217_728
    roof = Roofline(989.4e12, 3.35e12)  # H100 SXM: dense bf16 989.4 TFLOPS, 3.35 TB/s
    assert roof.bound(g.intensity) == "compute"
    floor = roof.time_floor(g.flop, g.min_bytes)
    assert floor == pytest.approx(1.111e-3, rel=1e-3)  # 1.0995e12 / 989.4e12 = 1.1113 ms


def test_C07_half_flop_on_sparse_peak_is_impossible():
    g = Gemm(8192, 8192, 8192, "bf16")
    # "/2 for MACs" with the 1979 sparse peak: 0.5 * 1.0995e12 / 1979e12 = 0.278 ms; the real work in that time
    # would be 3957 TFLOPS, four times the dense peak.
    t = 0.5 * g.flop / 1979e12
    assert t == pytest.approx(0.278e-3, rel=1e-3)
    with pytest.raises(MeasurementError, match="cannot be a real measurement"):
        check_plausible(g.flop / t, 989.4e12, "dense bf16 peak of NVIDIA H100 SXM")


def test_C07_h100_catalog():
    acc = catalog_acc("h100-sxm")
    roof = roofline_for(acc, "bf16")
    g = Gemm(8192, 8192, 8192, "bf16")
    assert roof.peak_flops == pytest.approx(989.4e12, rel=2e-3)
    assert roof.time_floor(g.flop, g.min_bytes) == pytest.approx(1.111e-3, rel=2e-3)


# ---------------------------------------------------------------------------------------------------------------------
# C08 — impossible timings

FP32_4090 = 82.6e12
WHAT_4090 = "dense fp32 peak of NVIDIA GeForce RTX 4090"


def test_C08_floor():
    g = Gemm(4096, 4096, 4096, "fp32")
    assert g.flop == 137_438_953_472
    assert Roofline(FP32_4090, 1.008e12).time_floor(g.flop, g.min_bytes) == pytest.approx(1.664e-3, rel=1e-3)


def test_C08_impossible_time_rejected():
    g = Gemm(4096, 4096, 4096, "fp32")
    achieved = g.flop / 0.275e-3  # 499.8 TFLOPS = 605 % of 82.6
    with pytest.raises(MeasurementError) as err:
        check_plausible(achieved, FP32_4090, WHAT_4090)
    msg = str(err.value)
    assert "605 %" in msg and "499.8 TFLOPS" in msg and "82.6 TFLOPS" in msg
    assert "measurement" in msg and "timing error" in msg
    assert "\n" not in msg


def test_C08_plausible_time_accepted():
    g = Gemm(4096, 4096, 4096, "fp32")
    fraction = check_plausible(g.flop / 2.75e-3, FP32_4090, WHAT_4090)
    assert fraction == pytest.approx(0.605, abs=5e-4)  # 49.98 / 82.6


def test_C08_exactly_peak_is_allowed():
    assert check_plausible(FP32_4090, FP32_4090, WHAT_4090) == 1.0


@pytest.mark.parametrize("bad", [0.0, -1.0, math.nan, math.inf, -math.inf])
def test_C08_non_positive_or_non_finite_throughput(bad):
    with pytest.raises(MeasurementError):
        check_plausible(bad, FP32_4090, WHAT_4090)


@pytest.mark.parametrize("bad", [0, 0.0, -1e-3, math.nan, math.inf])
def test_C08_bad_times(bad):
    with pytest.raises(MeasurementError):
        check_time(bad)


def test_C08_bad_peak():
    with pytest.raises(TruepeakError):
        check_plausible(1e12, 0.0, "peak")


# ---------------------------------------------------------------------------------------------------------------------
# parse_shape


@pytest.mark.parametrize(
    ("text", "shape"),
    [
        ("8192x8192x8192", (8192, 8192, 8192)),
        ("8192X8192X8192", (8192, 8192, 8192)),
        ("16x6144x4096", (16, 6144, 4096)),
        (" 16 x 6144 x 4096 ", (16, 6144, 4096)),
        ("16×6144×4096", (16, 6144, 4096)),
        ("M=16,N=6144,K=4096", (16, 6144, 4096)),
        ("k=4096 m=16 n=6144", (16, 6144, 4096)),
    ],
)
def test_parse_shape_accepts(text, shape):
    assert parse_shape(text) == shape


@pytest.mark.parametrize(
    ("text", "names"),
    [
        ("8192x", "8192x"),
        ("0x4x4", "M=0"),
        ("-1x2x3", "M=-1"),
        ("4x0x4", "N=0"),
        ("16x6144x4096.5", "4096.5"),
        ("16x6144xabc", "abc"),
        ("1x2x3x4", "4 dimensions"),
        ("", "''"),
        ("M=16,N=6144", "K missing"),
        ("M=16,N=6144,K=4096,M=3", "M given twice"),
    ],
)
def test_parse_shape_rejects(text, names):
    with pytest.raises(TruepeakError) as err:
        parse_shape(text)
    msg = str(err.value)
    assert names in msg
    assert "MxNxK, e.g. 16x6144x4096" in msg
    assert "\n" not in msg


# ---------------------------------------------------------------------------------------------------------------------
# Gemm and Copy


def test_gemm_counts_and_label():
    g = Gemm(16, 6144, 4096, "bf16")
    assert g.label == "16x6144x4096"
    assert parse_shape(g.label) == (16, 6144, 4096)
    assert g.a_bytes == 16 * 4096 * 2
    assert g.b_bytes == 6144 * 4096 * 2
    assert g.c_bytes == 16 * 6144 * 2
    assert g.intensity == pytest.approx(g.flop / g.min_bytes)


def test_gemm_output_formats():
    assert Gemm(16, 16, 16, "int8").c_bytes == 16 * 16 * 4       # int8 GEMMs write int32
    assert Gemm(16, 16, 16, "fp8").c_bytes == 16 * 16 * 2        # fp8 GEMMs write bf16
    assert Gemm(16, 16, 16, "fp8", out_format="fp32").c_bytes == 16 * 16 * 4
    assert Gemm(16, 16, 16, "tf32").c_bytes == 16 * 16 * 4


@pytest.mark.parametrize("dims", [(0, 1, 1), (1, -1, 1), (1, 1, 1.5), (True, 1, 1)])
def test_gemm_rejects_bad_dims(dims):
    with pytest.raises(TruepeakError):
        Gemm(*dims, "bf16")


def test_gemm_rejects_scaling_on_wide_formats_and_unknown_scaling():
    with pytest.raises(TruepeakError, match="fp8 and int8"):
        Gemm(16, 16, 16, "bf16", scaling="tensor")
    with pytest.raises(TruepeakError, match="block128"):
        Gemm(16, 16, 16, "fp8", scaling="blockwise")


def test_copy():
    c = Copy(2**30)
    assert c.min_bytes == 2 * 2**30  # read + write
    assert c.flop == 0 and c.intensity == 0.0
    assert c.label == "copy 1073741824 B"
    with pytest.raises(TruepeakError):
        Copy(0)


def test_bad_dimensions_are_truepeak_errors_not_unknown_names():
    from truepeak.errors import UnknownNameError

    for make in (lambda: Gemm(0, 1, 1, "bf16"), lambda: Copy(-1)):
        with pytest.raises(TruepeakError, match="not a positive whole number") as err:
            make()
        assert not isinstance(err.value, UnknownNameError)


def test_roofline_for_an_accelerator_without_bandwidth():
    import dataclasses

    acc = dataclasses.replace(load_catalog().by_key("h200-sxm"), memory_bandwidth=None)
    assert acc.bandwidth_bytes_per_s is None
    with pytest.raises(UnsupportedError, match="no memory bandwidth"):
        roofline_for(acc, "bf16")


# ---------------------------------------------------------------------------------------------------------------------
# Roofline


def test_roofline_shape():
    r = Roofline(1000e12, 2e12)
    assert r.ridge == 500.0
    assert r.attainable(100) == 200e12                 # memory roof: 2e12 B/s x 100 FLOP/B
    assert r.attainable(1000) == 1000e12               # compute roof
    assert r.bound(499.9) == "memory" and r.bound(500) == "compute"
    assert r.time_floor(1e9, 1e9) == pytest.approx(0.5e-3)   # bytes dominate: 1e9 / 2e12
    assert r.time_floor(1e15, 1.0) == pytest.approx(1.0)     # FLOP dominate


@pytest.mark.parametrize("args", [(0, 1e12), (1e12, 0), (-1, 1), (math.inf, 1), (math.nan, 1)])
def test_roofline_rejects_bad_ceilings(args):
    with pytest.raises(TruepeakError):
        Roofline(*args)


def test_roofline_for_h200():
    acc = load_catalog().by_key("h200-sxm")
    r = roofline_for(acc, "bf16")
    assert r.peak_flops == 989.4e12 and r.bandwidth == 4.8e12
    assert r.ridge == pytest.approx(206.125)  # 989.4 / 4.8
    with pytest.raises(UnsupportedError):
        roofline_for(acc, "nvfp4")  # no fp4 on sm_90


def test_core_modules_import_without_torch():
    # DESIGN.md: the core is pure Python; the MoE planner and the collective model are core too (numpy is not
    # imported either: the planner must start fast).
    code = ("import sys, truepeak.roofline, truepeak.efficiency, truepeak.formats, truepeak.units, truepeak.hardware, "
            "truepeak.moe.config, truepeak.moe.routing, truepeak.moe.plan, truepeak.comm.model; "
            "bad = [m for m in ('torch', 'triton', 'numpy', 'matplotlib') if m in sys.modules]; assert not bad, bad")
    subprocess.run([sys.executable, "-c", code], check=True)


# ---------------------------------------------------------------------------------------------------------------------
# The plausibility ceiling: the dense peak at the highest clock the part can run (one rule, plausibility_limit)


def test_plausibility_limit_uses_the_catalog_max_clock():
    from truepeak.roofline import plausibility_limit

    lim = plausibility_limit(catalog_acc("h100-sxm"), "bf16")
    assert lim.spec_peak == pytest.approx(989.4e12)
    assert lim.ceiling == pytest.approx(4096 * 132 * 1.98e9)          # 1070.5 TFLOPS at the 1980 MHz maximum
    assert "1980 MHz maximum clock" in lim.basis
    assert lim.spec_clock_hz == pytest.approx(1830e6)


def test_plausibility_limit_without_max_clock_allows_20_percent():
    from truepeak.roofline import CLOCK_HEADROOM, plausibility_limit

    assert CLOCK_HEADROOM == 1.20  # RTX 5090: 2.8 GHz against 2407 MHz spec = 1.16x, plus factory overclocks
    lim = plausibility_limit(catalog_acc("rtx-5090"), "bf16")
    assert lim.ceiling == pytest.approx(1.20 * 209.5e12)               # 251.4: the measured 239-241 fit
    assert "20 %" in lim.basis
    assert check_plausible(239e12, lim) == pytest.approx(239 / 209.5)  # returns the fraction of the SPEC peak
    assert check_plausible(241e12, lim) == pytest.approx(241 / 209.5)  # adversarial test 3: was rejected at 1.15
    assert check_plausible(178e12, plausibility_limit(catalog_acc("rtx-4090"), "bf16")) > 1


def test_plausibility_limit_at_a_measured_clock():
    from truepeak.roofline import plausibility_limit

    lim = plausibility_limit(catalog_acc("rtx-5090"), "bf16", clock_hz=2.9e9)
    assert lim.ceiling == pytest.approx(512 * 170 * 2.9e9)             # 252.4 > 1.20 x 209.5
    assert "measured 2900 MHz" in lim.basis and lim.clock_hz == 2.9e9


def test_C08_rejected_through_the_limit_and_the_message_points_to_clock_mhz():
    from truepeak.roofline import plausibility_limit

    g = Gemm(4096, 4096, 4096, "fp32")
    with pytest.raises(MeasurementError) as err:
        check_plausible(g.flop / 0.275e-3, plausibility_limit(catalog_acc("rtx-4090"), "fp32"))
    msg = str(err.value)
    assert msg.startswith("499.8 TFLOPS is 605 % of the 82.6 TFLOPS dense fp32 peak of NVIDIA GeForce RTX 4090: "
                          "this cannot be a real measurement")
    assert "--clock-mhz compares against the peak at the clock the GPU ran" in msg
    assert "99.12 TFLOPS ceiling" in msg and "\n" not in msg  # 1.20 x 82.6


def test_check_clock():
    from truepeak.roofline import check_clock

    h100 = catalog_acc("h100-sxm")
    assert check_clock(h100, 1.98e9) == 1.98e9
    assert check_clock(h100, 1.02 * 1.98e9) == pytest.approx(2019.6e6)  # the limit itself (max + 2 %) is allowed
    for bad in (0, -1e9, math.nan, math.inf, 2.03e9, 3.0e9):
        with pytest.raises(MeasurementError):
            check_clock(h100, bad)
    with pytest.raises(MeasurementError, match=r"--clock-mhz 5000 is above the 1980 MHz maximum clock of NVIDIA H100"):
        check_clock(h100, 5e9, "--clock-mhz")
    assert check_clock(catalog_acc("rtx-5090"), 1.5 * 2.407e9) == pytest.approx(3.6105e9)  # no max: 1.5 x spec
    with pytest.raises(MeasurementError, match="2407 MHz spec clock"):  # no maximum in the catalog: the spec clock
        check_clock(catalog_acc("rtx-5090"), 4e9)


def test_rate_text_is_one_formatter_for_peaks_and_ceilings():
    from truepeak.roofline import rate_text, rate_unit
    from truepeak.units import fmt_rate

    assert rate_text is fmt_rate  # kept importable; truepeak.units is the one formatter
    assert rate_text(1978.9e12) == "1978.9" and rate_text(1979e12) == "1979.0"
    assert rate_text(100.29e12) == "100.3" and rate_text(0.8e12) == "0.8" and rate_text(82.6e12) == "82.6"
    assert rate_unit("int8") == "TOPS" and rate_unit("nvfp4") == "TFLOPS"


def test_clock_given_in_ghz_is_rejected_as_a_unit_mistake():
    from truepeak.errors import MeasurementError
    from truepeak.hardware.catalog import load_catalog
    from truepeak.roofline import check_clock

    h200 = load_catalog().by_key("h200-sxm")
    with pytest.raises(MeasurementError, match="GHz"):
        check_clock(h200, 1.98e6, label="--clock-mhz")  # the user typed 1.98 meaning GHz
    assert check_clock(h200, 1410e6) == 1410e6


# ---------------------------------------------------------------------------------------------------------------------
# Memory-side plausibility (C08 on the memory side): bytes that cannot all sit in cache must come from DRAM, and DRAM
# cannot beat its spec bandwidth. Numbers by hand; H200 SXM: 4.8 TB/s, L2 62,914,560 B (device-reported 60 MiB).

from truepeak.roofline import check_memory_plausible  # noqa: E402


def test_memory_1x16384x16384_bf16_in_10_us_is_rejected():
    h200 = catalog_acc("h200-sxm")
    g = Gemm(1, 16384, 16384, "bf16")
    # A 1 x 16384 x 2 B + B 16384 x 16384 x 2 B + C 1 x 16384 x 2 B
    assert (g.a_bytes, g.b_bytes, g.c_bytes) == (32_768, 536_870_912, 32_768)
    assert g.min_bytes == 536_936_448
    # 536,936,448 B / 10 µs = 53,693.6 GB/s = 1118.6 % of 4800 GB/s. Even with the whole 62,914,560 B L2 holding
    # operands, 474,021,888 B must come from HBM: 474,021,888 / 4.8e12 = 98.75 µs.
    with pytest.raises(MeasurementError) as err:
        check_memory_plausible(h200, g, 10e-6)
    msg = str(err.value)
    for text in ("10 µs for 1x16384x16384 bf16", "moves 536.9 MB at 53694 GB/s = 1118.6 % of the 4800 GB/s memory "
                 "bandwidth of NVIDIA H200 SXM", "the working set (536.9 MB) is larger than its 62.91 MB L2",
                 "474 MB", "98.75 µs", "cannot be a real measurement", "timing error"):
        assert text in msg, (text, msg)
    assert "\n" not in msg


def test_memory_1x16384x16384_bf16_floor_is_the_bytes_no_cache_can_hold():
    h200 = catalog_acc("h200-sxm")
    g = Gemm(1, 16384, 16384, "bf16")
    with pytest.raises(MeasurementError):
        check_memory_plausible(h200, g, 98.7e-6)  # below the 98.75 µs floor
    note = check_memory_plausible(h200, g, 99e-6)  # 5424 GB/s: above HBM only if the L2 held up to 62.9 MB of it
    assert note is not None and "5424 GB/s" in note and "62.91 MB L2" in note
    assert check_memory_plausible(h200, g, 120e-6) is None  # 4474.5 GB/s = 93.2 %: an ordinary measurement


def test_memory_1x4096x7168_bf16_in_30_us_is_accepted():
    h200 = catalog_acc("h200-sxm")
    g = Gemm(1, 4096, 7168, "bf16")
    # A 1 x 7168 x 2 = 14,336 B; B 4096 x 7168 x 2 = 58,720,256 B; C 1 x 4096 x 2 = 8,192 B
    assert g.min_bytes == 14_336 + 58_720_256 + 8_192 == 58_742_784
    # 58,742,784 B / 30 µs = 1958.1 GB/s = 40.8 % of 4800 GB/s
    assert check_memory_plausible(h200, g, 30e-6) is None


def test_memory_working_set_that_fits_in_l2_keeps_the_cache_note():
    """1x4096x7168 bf16 (58,742,784 B) fits the H200's 62,914,560 B L2: 5 µs (11,749 GB/s, 245 %) is no HBM
    measurement, but below the loose 10 x cache ceiling it is not provably impossible, so it gets the cache note."""
    h200 = catalog_acc("h200-sxm")
    note = check_memory_plausible(h200, Gemm(1, 4096, 7168, "bf16"), 5e-6)
    assert note is not None
    assert "11749 GB/s" in note and "above the 4800 GB/s memory bandwidth" in note
    assert "the 58.74 MB working set fits in the 62.91 MB L2" in note and "rotate buffers" in note


def test_memory_cache_resident_above_the_cache_ceiling_is_rejected():
    """Adversarial test 1a: a working set that fits in L2 was accepted at any speed (0.1 µs = 587,428 GB/s, 12238 %
    of HBM). No on-chip cache serves more than CACHE_BANDWIDTH_FACTOR (10) x the DRAM bandwidth."""
    from truepeak.roofline import CACHE_BANDWIDTH_FACTOR

    assert CACHE_BANDWIDTH_FACTOR == 10
    h200 = catalog_acc("h200-sxm")
    g = Gemm(1, 4096, 7168, "bf16")
    with pytest.raises(MeasurementError) as err:
        check_memory_plausible(h200, g, 1e-7)
    msg = str(err.value)
    assert "587428 GB/s" in msg and "fits in its 62.91 MB L2" in msg and "10 x the memory bandwidth" in msg
    assert "this cannot be a real measurement" in msg and "\n" not in msg
    t = g.min_bytes / (10 * 4.8e12)
    assert check_memory_plausible(h200, g, t) is not None  # exactly 10 x: the note
    with pytest.raises(MeasurementError):
        check_memory_plausible(h200, g, t * 0.999)
    with pytest.raises(MeasurementError, match="fits in its 62.91 MB L2"):
        analyze_("h200", "bf16", shape="1x4096x7168", time_s=1e-7)


def test_memory_exactly_at_the_bandwidth_is_accepted_no_headroom_above_it():
    h200 = catalog_acc("h200-sxm")
    g = Gemm(1, 16384, 16384, "bf16")
    t = g.min_bytes / 4.8e12  # 111.86 µs: exactly 100 % of 4800 GB/s
    assert check_memory_plausible(h200, g, t) is None
    assert check_memory_plausible(h200, g, t * 0.999) is not None  # 100.1 %: possible only with L2 help -> a note


def test_memory_copy_of_1_gib():
    h200 = catalog_acc("h200-sxm")
    c = Copy(2**30)  # read + write = 2,147,483,648 B; beyond the L2: 2,084,569,088 B / 4.8e12 = 434.3 µs
    with pytest.raises(MeasurementError, match=r"400 µs for copy 1073741824 B moves 2\.147 GB"):
        check_memory_plausible(h200, c, 400e-6)
    assert check_memory_plausible(h200, c, 0.5e-3) is None  # 4295 GB/s = 89.5 %


def test_memory_compute_floor_is_checked_too():
    """8192^3 bf16 (1.0995e12 FLOP) on an H200 in 0.5 ms is 2199 TFLOPS: above the dense peak at the 1980 MHz maximum
    clock (1070.5 TFLOPS), so it is the C08 error although its 402.7 MB move in 0.5 ms (805 GB/s) is fine."""
    h200 = catalog_acc("h200-sxm")
    with pytest.raises(MeasurementError, match="cannot be a real measurement"):
        check_memory_plausible(h200, Gemm(8192, 8192, 8192, "bf16"), 0.5e-3)
    assert check_memory_plausible(h200, Gemm(8192, 8192, 8192, "bf16"), 1.2e-3) is None


def test_memory_amd_infinity_cache_counts_as_cache():
    """MI300X: 32 MiB L2 + 256 MiB Infinity Cache = 301,989,888 B of cache in front of 5.3 TB/s HBM."""
    mi300x = catalog_acc("mi300x")
    assert mi300x.cache_bytes == 33_554_432 + 268_435_456 == 301_989_888
    g = Gemm(1, 8192, 16384, "bf16")  # 32,768 + 268,435,456 + 16,384 = 268,484,608 B: fits the Infinity Cache
    assert g.min_bytes == 268_484_608
    note = check_memory_plausible(mi300x, g, 20e-6)  # 13,424 GB/s
    assert note is not None and "Infinity Cache" in note
    big = Gemm(1, 16384, 16384, "bf16")  # 536,936,448 - 301,989,888 = 234,946,560 B from HBM >= 44.33 µs
    with pytest.raises(MeasurementError, match=r"33\.55 MB L2 \+ 268\.4 MB Infinity Cache.*44\.33 µs"):
        check_memory_plausible(mi300x, big, 10e-6)


def test_memory_unknown_l2_gives_a_note_not_a_check():
    nvl = catalog_acc("h100-nvl")
    assert nvl.l2_bytes is None
    note = check_memory_plausible(nvl, Gemm(1, 16384, 16384, "bf16"), 20e-6)  # 26847 GB/s = 6.9 x 3900
    assert note is not None and "no L2 size" in note and "not checked" in note
    assert check_memory_plausible(nvl, Gemm(1, 16384, 16384, "bf16"), 1e-3) is None


def test_memory_unknown_l2_is_still_bounded_by_the_cache_ceiling():
    """Adversarial test 1a: L40S (no L2 in the catalog), 1x16384x16384 bf16 in 10 µs = 6214 % was accepted."""
    with pytest.raises(MeasurementError, match=r"6214\.5 % .*cache size is not in the catalog.*cannot be a real"):
        check_memory_plausible(catalog_acc("l40s"), Gemm(1, 16384, 16384, "bf16"), 10e-6)
    with pytest.raises(MeasurementError, match="13.8 x|1376.8 %"):  # H100 NVL, 10 µs: 13.8 x 3900 GB/s
        check_memory_plausible(catalog_acc("h100-nvl"), Gemm(1, 16384, 16384, "bf16"), 10e-6)


def test_time_below_100_ns_is_rejected():
    """Adversarial test 1b: 1x1x1 in 1e-12 s ('0.001 ns per GEMM') was accepted."""
    from truepeak.roofline import MIN_TIME_S, check_time

    assert MIN_TIME_S == 100e-9 and check_time(100e-9) == 100e-9
    with pytest.raises(MeasurementError, match=r"time 1e-12 s \(0.001 ns\) per call is below 100 ns"):
        check_time(1e-12)
    with pytest.raises(MeasurementError, match="below 100 ns"):
        analyze_("h200", "bf16", shape="1x1x1", time_s=1e-12)
    with pytest.raises(MeasurementError, match="means 0.002 ns per GEMM, below 100 ns"):
        analyze_("h200", "bf16", shape="1x1x1", tflops=1)


def test_memory_without_bandwidth_checks_nothing():
    import dataclasses

    h200 = dataclasses.replace(catalog_acc("h200-sxm"), memory_bandwidth=None)
    assert check_memory_plausible(h200, Gemm(1, 16384, 16384, "bf16"), 10e-6) is None


@pytest.mark.parametrize("bad", [0, -1e-6, math.nan, math.inf])
def test_memory_bad_times(bad):
    with pytest.raises(MeasurementError):
        check_memory_plausible(catalog_acc("h200-sxm"), Copy(2**20), bad)


def analyze_(*args, **kw):
    from truepeak.efficiency import analyze

    return analyze(*args, **kw)
