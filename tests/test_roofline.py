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
    """A catalog entry by key; skip while the catalog (completed in parallel) lacks it."""
    try:
        return load_catalog().by_key(key)
    except KeyError:
        pytest.skip(f"catalog has no {key!r} entry yet")


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
    with pytest.raises(TruepeakError):
        Copy(0)


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
    code = ("import sys, truepeak.roofline, truepeak.efficiency; "
            "bad = [m for m in ('torch', 'triton') if m in sys.modules]; assert not bad, bad")
    subprocess.run([sys.executable, "-c", code], check=True)
