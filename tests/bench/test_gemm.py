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


# -- fp8 scale layouts, e5m2, Blackwell gating -------------------------------------------------------------------------


def test_fp8_variants_on_sm90():
    h200 = _gpu()
    assert G.supported("fp8_e4m3", h200, scaling="row") == (True, "")
    assert G.supported("fp8_e5m2", h200, (256, 4096, 7168)) == (True, "")  # run as e4m3 x e5m2
    assert "e4m3 (A) x e5m2 (B; cuBLASLt has no e5m2 x e5m2)" in G.backend_name("fp8_e5m2", "cuda")
    assert "scale_a [M,1], scale_b [1,N]" in G.backend_name("fp8_e4m3", "cuda", "row")
    ok, reason = G.supported("fp8_e5m2", h200, scaling="block128")
    assert not ok and "fp8_e4m3 only" in reason
    ok, reason = G.supported("fp8_e4m3", h200, (16, 4096, 7168 + 16), scaling="block128")
    assert not ok and "multiples of 128" in reason
    b200 = _gpu("10.0", "NVIDIA B200")
    ok, reason = G.supported("fp8_e4m3", b200, scaling="block128")
    assert not ok and reason.endswith("this device is sm_100")


def test_fp8_workloads_count_their_scales():
    assert G.gemm_workload("fp8_e4m3", 128, 256, 512).scaling == "tensor"
    row = G.gemm_workload("fp8_e4m3", 128, 256, 512, "row")
    assert row.a_bytes == 128 * 512 + 4 * 128 and row.b_bytes == 256 * 512 + 4 * 256
    blk = G.gemm_workload("fp8_e4m3", 128, 256, 512, "block128")
    assert blk.a_bytes == 128 * 512 + 4 * 128 * 4 and blk.b_bytes == 256 * 512 + 4 * 2 * 4


@pytest.mark.parametrize("scaling", ["tensor", "row", "block128"])
def test_fp8_operands_and_reference_on_the_cpu(scaling):
    """The scales have the shapes and strides torch's scaled_mm asks on sm_90, and the reference applies them."""
    a = G.make_operand("fp8_e4m3", 256, 512, "cpu", 1, scaling=scaling)
    b = G.make_operand("fp8_e5m2", 384, 512, "cpu", 2, scaling=scaling, weight=True) if scaling != "block128" else \
        G.make_operand("fp8_e4m3", 384, 512, "cpu", 2, scaling=scaling, weight=True)
    if scaling == "tensor":
        assert a.scale.shape == () and float(a.scale) == 1.0
    elif scaling == "row":
        assert tuple(a.scale.shape) == (256, 1) and tuple(b.scale.shape) == (1, 384)
        assert b.data.dtype == torch.float8_e5m2 and a.data.dtype == torch.float8_e4m3fn
    else:
        assert tuple(a.scale.shape) == (256, 4) and a.scale.stride() == (1, 256)  # outer-dim-major
        assert tuple(b.scale.shape) == (4, 3) and b.scale.stride() == (1, 4)  # [L4, N/128]
    assert 0.25 <= float(a.scale.min()) and float(a.scale.max()) <= 1.0
    ref = a.dequant(8)
    assert ref.dtype == torch.float64 and tuple(ref.shape) == (8, 512)
    if scaling == "block128":  # element (3, 130) is in block (3, 1) of the activation scales
        assert float(ref[3, 130]) == pytest.approx(float(a.data[3, 130].double()) * float(a.scale[3, 1]))
        wb = b.dequant(None)
        assert float(wb[200, 300]) == pytest.approx(float(b.data[200, 300].double()) * float(b.scale[2, 1]))


@pytest.mark.parametrize("m", [1, 2, 3, 8, 16])
def test_block128_activation_scales_outer_dim_major_at_small_m(m):
    """At M = 1 the scales must have strides (1, 1), at M = 3 (1, 3): what scaled_mm checks on sm_90. Transposing a
    [1, 56] tensor and calling .contiguous() makes no copy, so the old layout kept strides (56, 1) -> (1, 56) and the
    default run's 1x4096x7168 / 1x7168x2048 fp8 block128 cases failed."""
    a = G.make_operand("fp8_e4m3", m, 7168, "cpu", 1, scaling="block128")
    assert tuple(a.scale.shape) == (m, 56) and a.scale.stride() == (1, m)
    ref = a.dequant(None)  # element (m-1, 7167) is in the last 128-block of the last row
    assert float(ref[m - 1, 7167]) == pytest.approx(float(a.data[m - 1, 7167].double()) * float(a.scale[m - 1, 55]))


@pytest.mark.parametrize(("m", "rows"), [(1, 4), (2, 4), (3, 4), (4, 4), (5, 8), (16, 16)])
def test_block128_pads_m_to_a_multiple_of_4(m, rows):
    """cuBLASLt refuses 1x128-scaled fp8 at M = 1 and 2 (the scale columns are M fp32 values, which must be 16-byte
    aligned): A gets M rounded up to 4; the note says so, and only per-tensor / per-row keep M as it is."""
    assert G.run_rows("fp8_e4m3", m, "block128") == rows
    assert G.run_rows("fp8_e4m3", m, "row") == m and G.run_rows("bf16", m) == m
    g = G.TorchGemm("fp8_e4m3", m, 256, 512, "cpu", n_sets=1, scaling="block128")
    assert tuple(g.a[0].shape) == (rows, 512) and g._a[0].scale.stride() == (1, rows)
    if rows == m:
        assert g.note == ""
    else:
        assert g.note == (f"M={m} run as {rows} rows: cuBLASLt's 1x128-scaled fp8 GEMM needs M a multiple of 4 "
                          f"(16-byte-aligned scale columns); FLOP and bytes count the {m} real rows")
    assert G.TorchGemm("fp8_e4m3", 1, 256, 512, "cpu", n_sets=1, scaling="row").note == ""


@pytest.mark.gpu
@pytest.mark.parametrize("m", [1, 2, 3, 4, 8, 16])
@pytest.mark.parametrize(("n", "k"), [(4096, 7168), (7168, 2048)])
def test_gpu_fp8_block128_at_decode_m(m, n, k):
    """DeepSeek-V3-style 1 x 128 / 128 x 128 fp8 GEMMs at decode M run and pass their check (the shapes of the default
    run; M = 1 and 2 padded to 4 rows)."""
    from truepeak.hardware.detect import detect

    dev = detect("cuda")
    ok, reason = G.supported("fp8_e4m3", dev, (m, n, k), scaling="block128")
    if not ok:
        pytest.skip(reason)
    g = G.TorchGemm("fp8_e4m3", m, n, k, dev.torch_device, n_sets=2, scaling="block128")
    with g.mode():
        assert G.check_passes("fp8_e4m3", g.check())


def test_library_refusal_becomes_backend_unsupported(monkeypatch):
    g = G.TorchGemm("fp8_e4m3", 32, 64, 128, "cpu", n_sets=1, scaling="row")

    def refuse(j):
        raise RuntimeError("CUBLAS_STATUS_NOT_SUPPORTED when calling cublasLtMatmul")

    g._launch = refuse
    with pytest.raises(G.BackendUnsupported, match="fp8_e4m3 \\(row scales\\) GEMM rejected by torch"):
        g.check()


def test_C09_zero_inputs_only_when_asked_and_labelled():
    g = G.TorchGemm("bf16", 32, 64, 128, "cpu", n_sets=2)
    assert g.input_kind == "random" and float((g.a[0] == 0).float().mean()) < 1e-2
    z = G.TorchGemm("bf16", 32, 64, 128, "cpu", n_sets=2, inputs="zeros")
    assert z.input_kind == "zeros" and not bool(z.a[0].any()) and not bool(z.b[1].any())
    assert z.check() == 0.0
    with pytest.raises(Exception, match="unknown inputs 'ones'"):
        G.TorchGemm("bf16", 32, 64, 128, "cpu", n_sets=1, inputs="ones")


# -- cuBLAS block-scale layout (swizzled 128 x 4 tiles) ----------------------------------------------------------------


def test_swizzled_index_by_hand():
    # inside the first 128 x 4 tile: row 32 i + j, column c -> 16 j + 4 i + c
    assert G.swizzled_scale_index(0, 0, 4) == 0
    assert G.swizzled_scale_index(0, 3, 4) == 3
    assert G.swizzled_scale_index(32, 0, 4) == 4
    assert G.swizzled_scale_index(1, 0, 4) == 16
    assert G.swizzled_scale_index(33, 1, 4) == 16 + 4 + 1
    assert G.swizzled_scale_index(127, 3, 4) == 31 * 16 + 3 * 4 + 3 == 511
    # tiles follow row of tiles by row of tiles: K/32 = 8 columns -> 2 tiles per row of tiles
    assert G.swizzled_scale_index(0, 4, 8) == 512
    assert G.swizzled_scale_index(128, 0, 8) == 2 * 512


@pytest.mark.parametrize("rows,cols", [(128, 4), (200, 9), (256, 16), (1, 1)])
def test_swizzle_block_scales_follows_the_index_and_pads_with_zeros(rows, cols):
    s = torch.randint(1, 255, (rows, cols), dtype=torch.uint8)
    out = G.swizzle_block_scales(s)
    rt, ct = -(-rows // 128), -(-cols // 4)
    assert out.shape == (rt * 128 * ct * 4,) and out.dtype == torch.uint8
    expect = torch.zeros(rt * 128 * ct * 4, dtype=torch.uint8)
    for r in range(rows):
        for c in range(cols):
            expect[G.swizzled_scale_index(r, c, cols)] = s[r, c]
    assert torch.equal(out, expect)


def test_swizzle_matches_pytorchs_to_blocked():
    # In a child process: importing torch.testing._internal changes process-wide torch state (with expecttest
    # installed, 30 later tests of this suite failed after it ran in-process).
    import importlib.util
    import subprocess
    import sys

    if importlib.util.find_spec("expecttest") is None:
        pytest.skip("torch.testing._internal needs the expecttest module")
    code = ("import torch\n"
            "from torch.testing._internal.common_quantized import to_blocked\n"
            "from truepeak.bench import gemm as G\n"
            "s = torch.randint(0, 255, (300, 12), dtype=torch.uint8).view(torch.float8_e4m3fn)\n"
            "print(torch.equal(G.swizzle_block_scales(s).view(torch.uint8), to_blocked(s).reshape(-1).view(torch.uint8)))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert out.stdout.strip().splitlines()[-1:] == ["True"], out.stderr[-2000:]


def test_block_scaled_formats_need_blackwell_and_say_what_else_is_missing():
    b200 = _gpu("10.0", "NVIDIA B200")
    ok, reason = G.supported("nvfp4", b200, (128, 4096, 4096 + 16))
    assert not ok
    try:
        import truepeak.kernels.quant  # noqa: F401
    except ImportError:
        assert "truepeak.kernels.quant" in reason
    else:
        assert "K a multiple of 32" in reason
    ok, reason = G.supported("mxfp6", b200)
    assert not ok and "mxfp6" in reason


def test_blackwell_operands_from_the_quantiser_on_the_cpu():
    quant = pytest.importorskip("truepeak.kernels.quant")  # owned by another module
    for fmt, data_dtype, scale_dtype in (("mxfp8", torch.float8_e4m3fn, torch.float8_e8m0fnu),
                                         ("mxfp4", torch.float4_e2m1fn_x2, torch.float8_e8m0fnu),
                                         ("nvfp4", torch.float4_e2m1fn_x2, torch.float8_e4m3fn)):
        op = G.make_operand(fmt, 256, 512, "cpu", 3)
        assert op.data.dtype == data_dtype and op.scale.dtype == scale_dtype
        per = 16 if fmt == "nvfp4" else 32
        assert op.scale.numel() == 256 * (512 // per)  # 256 rows and 16 or 32 columns: whole 128 x 4 tiles
        deq = op.dequant(None)  # what the GEMM's reference multiplies: scales (and nvfp4's global scale) applied
        if fmt == "nvfp4":  # the library multiplies e2m1 x e4m3 scales; the global scale is applied to its output
            assert op.factor == pytest.approx(float(quant.nvfp4_global_scale(G.operands._uniform(
                torch, (256, 512), G.get_format("fp32"), "cpu", 3))), rel=1e-6)
        else:
            assert op.factor == 1.0
        x = G.operands._uniform(torch, (256, 512), G.get_format("fp32"), "cpu", 3).double()
        rel = float(torch.linalg.vector_norm(deq - x) / torch.linalg.vector_norm(x))
        assert rel < (0.08 if fmt == "mxfp8" else 0.25), (fmt, rel)


@pytest.mark.gpu
@pytest.mark.parametrize("fmt,scaling", [("fp8_e4m3", "row"), ("fp8_e4m3", "block128"), ("fp8_e5m2", "tensor"),
                                         ("fp8_e5m2", "row")])
def test_gpu_fp8_variants_pass_their_check_or_say_why_not(fmt, scaling):
    from truepeak.hardware.detect import detect

    dev = detect("cuda")
    ok, reason = G.supported(fmt, dev, (256, 512, 1024), scaling)
    if not ok:
        pytest.skip(reason)
    g = G.TorchGemm(fmt, 256, 512, 1024, dev.torch_device, n_sets=2, scaling=scaling)
    try:
        err = g.check()
    except G.BackendUnsupported as exc:
        pytest.skip(str(exc))
    assert G.check_passes(fmt, err), err
    out = g(1)
    assert tuple(out.shape) == (256, 512)
