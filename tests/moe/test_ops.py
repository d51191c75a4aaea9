"""The formats of a plan (truepeak.moe.ops.resolve_formats): which peak governs the GEMMs, dequantised weights,
activations a device lacks."""

from __future__ import annotations

import pytest

from truepeak.moe.findings import ActivationsFallback, WeightsDequantised
from truepeak.moe.ops import resolve_formats
from truepeak.report.plan import finding_text, peak_text


def test_nvfp4_on_hopper_is_dequantised(h200):
    f = resolve_formats(h200, "nvfp4")
    assert f.dequantised and f.activations.name == "bf16" and f.gemm_compute.name == "bf16"
    assert f.gemm_peak == h200.dense_flops("bf16")
    assert f.weights.bytes_per_value == 0.5625
    # H200 (sm_90) has no fp4 tensor cores: W4A16, at the dense bf16 peak of 989.4 TFLOPS
    assert f.notes == (WeightsDequantised("NVIDIA H200 SXM", "sm_90", "no_fp4", "fp4", "nvfp4", 4, "bf16", 16,
                                          989.4e12, 0.5625),)
    assert peak_text(f) == finding_text(f.notes[0]) == (
        "NVIDIA H200 SXM (sm_90) has no fp4 tensor cores: nvfp4 weights are dequantised inside the GEMM (Marlin-style "
        "W4A16) and compute at the dense bf16 peak of 989.4 TFLOPS; weight bytes stay 0.5625 B per value")


def test_activations_the_device_lacks_fall_back_to_bf16(h200):
    f = resolve_formats(h200, "fp8", "nvfp4")
    assert f.notes == (ActivationsFallback("NVIDIA H200 SXM", "nvfp4", "bf16"),) and f.activations.name == "bf16"
    assert finding_text(f.notes[0]) == "NVIDIA H200 SXM has no nvfp4 tensor-core path: activations run as bf16"
    # fp8 weights x bf16 activations: the native fp8 weights compute at the wider bf16 peak (989.4 TFLOPS)
    assert f.mixed and peak_text(f) == ("fp8_e4m3 weights x bf16 activations compute at the dense bf16 peak of "
                                        "989.4 TFLOPS")
    assert peak_text(resolve_formats(h200, "fp8")) == "GEMMs compute at the dense fp8_e4m3 peak of 1978.9 TFLOPS"


def test_nvfp4_on_blackwell_workstation_runs_fp4(ws):
    f = resolve_formats(ws, "nvfp4")
    assert not f.dequantised and f.activations.name == "nvfp4"
    assert f.gemm_peak == pytest.approx(2015.2e12)
    w4a16 = resolve_formats(ws, "nvfp4", "bf16")
    assert w4a16.gemm_compute.name == "bf16" and w4a16.gemm_peak == pytest.approx(503.8e12)
