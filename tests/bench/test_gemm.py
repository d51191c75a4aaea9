"""GEMM backends: what each device can run (skips with reasons, never crashes), random inputs, the correctness check."""

from __future__ import annotations

import math

import pytest

torch = pytest.importorskip("torch")

from truepeak.bench import gemm as G  # noqa: E402
from truepeak.hardware.detect import cuda_device_info, detect_cpu  # noqa: E402


def _gpu(cc: str = "9.0", name: str = "NVIDIA H200"):
    return cuda_device_info(name, cc, sm_count=132, l2_bytes=62914560, smem_per_block_bytes=232448,
                            max_sm_clock_hz=1980e6, memory_bytes=150 * 10**9, index=0)


@pytest.fixture(scope="module")
def cpu():
    return detect_cpu()


# -- what runs where ---------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("fmt", ["nvfp4", "mxfp4", "mxfp8"])
def test_block_scaled_formats_skip_on_sm90_with_the_reason(fmt):
    ok, reason = G.supported(fmt, _gpu())
    assert not ok
    assert reason == f"{fmt} GEMM needs sm_100 or sm_120; this device is sm_90"


@pytest.mark.parametrize("fmt", ["fp32", "tf32", "bf16", "fp16", "fp8_e4m3", "int8"])
def test_h200_runs_the_default_formats(fmt):
    assert G.supported(fmt, _gpu()) == (True, "")


@pytest.mark.parametrize("shape,ok", [((16, 4096, 7168), False), ((17, 4096, 7168), True), ((32, 4100, 7168), False),
                                      ((32, 4096, 7170), False), ((256, 7168, 2048), True)])
def test_int8_shape_rules(shape, ok):
    got, reason = G.supported("int8", _gpu(), shape)
    assert got is ok
    if not ok:
        assert "torch._int_mm needs M > 16 and K, N multiples of 8" in reason


def test_fp8_needs_sm89_and_multiples_of_16():
    assert G.supported("fp8", _gpu("8.0", "NVIDIA A100-SXM4-80GB")) == (
        False, "fp8 GEMM needs sm_89 or newer; this device is sm_80")
    ok, reason = G.supported("fp8_e4m3", _gpu(), (1, 4100, 7168))
    assert not ok and "multiples of 16" in reason
    assert G.supported("fp8_e4m3", _gpu(), (1, 4096, 7168)) == (True, "")


def test_cpu_runs_fp32_and_bf16_only(cpu):
    assert G.supported("fp32", cpu) == (True, "")
    assert G.supported("bf16", cpu) == (True, "")
    for fmt in ("tf32", "fp16", "fp8_e4m3", "int8", "nvfp4"):
        ok, reason = G.supported(fmt, cpu)
        assert not ok and reason


def test_backend_names_record_the_code_path():
    assert "allow_tf32=False" in G.backend_name("fp32", "cuda")
    assert "allow_tf32=True" in G.backend_name("tf32", "cuda")
    assert "_scaled_mm" in G.backend_name("fp8_e4m3", "cuda") and "per-tensor" in G.backend_name("fp8", "cuda")
    assert "_int_mm" in G.backend_name("int8", "cuda")


def test_gemm_workload_scales_fp8_per_tensor_only():
    assert G.gemm_workload("fp8_e4m3", 16, 64, 32).scaling == "tensor"  # torch._scaled_mm with fp32 scales
    assert G.gemm_workload("fp8", 16, 64, 32).scaling == "tensor"
    for fmt in ("fp32", "bf16", "int8"):
        assert G.gemm_workload(fmt, 16, 64, 32).scaling is None


def test_bytes_per_set_counts_a_b_c():
    # bf16 1 x 4096 x 7168: A 14336 B + B 58720256 B + C 8192 B
    assert G.bytes_per_set("bf16", 1, 4096, 7168) == 2 * (7168 + 4096 * 7168 + 4096)
    # fp8: 1-byte A and B, bf16 C, plus two fp32 per-tensor scales
    assert G.bytes_per_set("fp8_e4m3", 16, 64, 32) == 16 * 32 + 64 * 32 + 2 * 16 * 64 + 8


# -- inputs and the check ----------------------------------------------------------------------------------------------


def test_inputs_are_uniform_minus_one_to_one_never_zeros():
    g = G.TorchGemm("fp32", 64, 128, 256, "cpu", n_sets=2)
    for t in (*g.a, *g.b):
        assert float(t.min()) >= -1.0 and float(t.max()) <= 1.0
        assert float(t.abs().mean()) == pytest.approx(0.5, abs=0.05)  # E|U(-1, 1)| = 0.5
        assert float((t == 0).float().mean()) < 1e-3
    assert not torch.equal(g.a[0], g.a[1]) and not torch.equal(g.b[0], g.b[1])  # sets differ


def test_inputs_are_seeded_and_weights_shared_across_m():
    cache = G.WeightCache()
    g1 = G.TorchGemm("bf16", 1, 64, 128, "cpu", n_sets=2, weights=cache)
    g2 = G.TorchGemm("bf16", 8, 64, 128, "cpu", n_sets=3, weights=cache)
    assert g2.b[0] is g1.b[0] and len(g2.b) == 3  # drawn once, extended on demand
    fresh = G.TorchGemm("bf16", 8, 64, 128, "cpu", n_sets=3)
    assert torch.equal(fresh.b[2], g2.b[2])  # the same seed whatever the sweep order
    assert torch.equal(fresh.a[0], g2.a[0])


@pytest.mark.parametrize("fmt", ["fp32", "bf16"])
def test_cpu_gemm_passes_its_check(fmt):
    g = G.TorchGemm(fmt, 8, 256, 512, "cpu", n_sets=2)
    err = g.check()
    assert 0 <= err <= G.TOLERANCES[fmt]
    assert G.check_passes(fmt, err)
    out = g(1)
    assert out.shape == (8, 256)


def test_int8_is_exact_against_the_int32_reference():
    g = G.TorchGemm("int8", 32, 64, 128, "cpu", n_sets=1)
    assert g.check() == 0.0
    assert G.check_passes("int8", 0.0) and not G.check_passes("int8", 1e-9)


def test_check_catches_a_wrong_or_unwritten_result(monkeypatch):
    g = G.TorchGemm("fp32", 8, 64, 128, "cpu", n_sets=1)
    monkeypatch.setattr(G.TorchGemm, "__call__", lambda self, i=0: torch.zeros(8, 64))
    assert g.check() == pytest.approx(1.0)
    assert not G.check_passes("fp32", g.check())
    monkeypatch.setattr(G.TorchGemm, "__call__", lambda self, i=0: self.c[0])  # never written: poisoned with NaN
    assert math.isnan(g.check())
    assert not G.check_passes("fp32", math.nan)


def test_check_on_a_row_slice():
    g = G.TorchGemm("fp32", 64, 64, 64, "cpu", n_sets=1)
    assert g.check(rows=4) <= 1e-5


def test_tf32_mode_sets_and_restores_the_flag():
    before = torch.backends.cuda.matmul.allow_tf32
    with G.tf32_mode(True):
        assert torch.backends.cuda.matmul.allow_tf32 is True
    assert torch.backends.cuda.matmul.allow_tf32 == before
    with G.tf32_mode(False):
        assert torch.backends.cuda.matmul.allow_tf32 is False
    assert torch.backends.cuda.matmul.allow_tf32 == before


@pytest.mark.gpu
@pytest.mark.parametrize("fmt", ["fp32", "tf32", "bf16", "fp16", "fp8_e4m3", "int8"])
def test_gpu_formats_pass_their_check(fmt):
    from truepeak.hardware.detect import detect

    dev = detect("cuda")
    ok, reason = G.supported(fmt, dev, (32, 256, 512))
    if not ok:
        pytest.skip(reason)
    g = G.TorchGemm(fmt, 32, 256, 512, dev.torch_device, n_sets=2)
    with g.mode():
        assert G.check_passes(fmt, g.check())
