"""The block-scaled MoE kernels (the native fp4 path for Blackwell) without a Blackwell GPU: which path each device
gets, what Triton compiles them into for sm_100 / sm_120 / sm_90 (Triton's own ptxas, no GPU needed), the
shared-memory fit against sm_120's 101,376 B, and correctness in Triton's CPU interpreter (activation
quantisers bit-exact against truepeak.kernels.quant; the forward against a float32 reference with the same activation
rounding, over routings with empty experts, one expert holding every token and slots of another EP rank)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

from truepeak.errors import TruepeakError, UnsupportedError  # noqa: E402
from truepeak.kernels import moe_blockscaled as bs  # noqa: E402
from truepeak.kernels import moe_triton as mt  # noqa: E402

# bytes of shared memory per block with opt-in on sm_120 (CUDA C++ Programming Guide, compute capability 12.0)
SM120_SMEM = 101_376


def test_path_per_device_and_format():
    assert bs.blockscaled_path("nvfp4", None, (10, 0)) == (
        "native tcgen05.mma block_scale kind::mxf4nvf4 (sm_100)", True)
    assert bs.blockscaled_path("mxfp4", "fp8", (10, 3))[1] is True
    assert bs.blockscaled_path("mxfp4", "FP4", (10, 0))[0].endswith("kind::mxf4 (sm_100)")
    assert bs.blockscaled_path("nvfp4", "fp4", (12, 0))[1] is True
    assert bs.blockscaled_path("mxfp4", "fp4", (12, 0))[1] is True
    path, native = bs.blockscaled_path("mxfp4", "fp8", (12, 0))
    assert not native and "emulated" in path
    # sm_120: mxfp4's default is the native W4A4 (its W4A8 is emulated); elsewhere W4A8
    assert bs.blockscaled_path("mxfp4", None, (12, 0)) == (
        "native mma.sync block_scale kind::mxf4nvf4, ue8m0 scales (sm_120)", True)
    assert bs.default_blockscaled_activations("mxfp4", (12, 0)) == "fp4"
    assert bs.default_blockscaled_activations("mxfp4", (10, 3)) == "fp8"
    # sm_121: Triton 3.6 emulates mxfp4 and fails on nvfp4 there, so neither is claimed
    for w in ("nvfp4", "mxfp4"):
        with pytest.raises(UnsupportedError, match="on sm_121: compiled for sm_90, sm_100, sm_103 and sm_120 only"):
            bs.blockscaled_path(w, "fp4", (12, 1))
    with pytest.raises(TruepeakError, match=r"capability must be \(major, minor\), e.g. \(10, 0\) for sm_100, got \(10,\)"):
        bs.blockscaled_path("mxfp4", "fp4", (10,))
    path, native = bs.blockscaled_path("mxfp4", None, (9, 0))
    assert not native and "upcast to bf16" in path
    with pytest.raises(UnsupportedError, match="nvfp4 weights with fp4 activations on sm_90: Triton 3.6 does not "
                                               "lower .*; use FusedMoE"):
        bs.blockscaled_path("nvfp4", None, (9, 0))
    with pytest.raises(UnsupportedError, match="sm_80: compiled for sm_90, sm_100, sm_103 and sm_120 only"):
        bs.blockscaled_path("mxfp4", "fp4", (8, 0))
    with pytest.raises(TruepeakError, match="nvfp4 weights with activations 'fp4', got 'fp8'"):
        bs.blockscaled_path("nvfp4", "fp8", (10, 0))
    with pytest.raises(UnsupportedError, match="take nvfp4 or mxfp4 weights, not 'bf16'"):
        bs.default_blockscaled_activations("bf16")
    assert bs.default_blockscaled_activations("nvfp4") == "fp4"
    assert bs.default_blockscaled_activations("mxfp4") == "fp8"


def test_config_follows_tokens_per_expert_and_k():
    # the token block follows tokens per expert, not the batch; gate/up tiles are 64 + 64 rows
    assert [bs.choose_blockscaled_config(t, 7168).block_m for t in (1, 16, 17, 32, 64, 256)] == [16, 16, 32, 32, 64,
                                                                                                  128]
    assert bs.choose_blockscaled_config(8, 7168, gated=True).block_n == 64
    assert bs.choose_blockscaled_config(8, 2048).block_n == 128
    # sm_120 keeps the accumulator in registers: 128-token blocks spill there (compiled), so 64 at most
    assert bs.choose_blockscaled_config(256, 7168, capability=(12, 0)).block_m == 64
    assert bs.choose_blockscaled_config(256, 7168, capability=(10, 0)).block_m == 128
    assert [bs.blockscaled_block_k(k) for k in (7168, 2048, 2880, 1440 * 2)] == [256, 256, 64, 64]
    with pytest.raises(UnsupportedError, match="K=1440 is not a multiple of 64"):
        bs.blockscaled_block_k(1440)
    for bad in (0, -64, "128", 64.0, True):
        with pytest.raises(TruepeakError, match="must be a positive integer"):
            bs.blockscaled_block_k(bad)
    with pytest.raises(TruepeakError, match="finite number > 0, got 0"):
        bs.choose_blockscaled_config(0, 7168)


def test_refuses_what_it_cannot_run():
    w1 = mt.quantize_experts(torch.randn(2, 128, 64), "bf16")
    w2 = mt.quantize_experts(torch.randn(2, 64, 64), "bf16")
    ids = torch.zeros(3, 1, dtype=torch.long)
    with pytest.raises(UnsupportedError, match="take nvfp4 or mxfp4 weights, got 'bf16'"):
        bs.BlockScaledMoE(torch.randn(3, 64), w1, w2, ids, torch.ones(3, 1))
    w1 = mt.quantize_experts(torch.randn(2, 128, 64), "nvfp4")
    w2 = mt.quantize_experts(torch.randn(2, 64, 64), "nvfp4")
    with pytest.raises(TruepeakError, match="activations 'fp4', got 'fp16'"):
        bs.BlockScaledMoE(torch.randn(3, 64), w1, w2, ids, torch.ones(3, 1), activations="fp16")
    with pytest.raises(TruepeakError, match="must hold integer expert ids"):
        bs.BlockScaledMoE(torch.randn(3, 64), w1, w2, ids.float(), torch.ones(3, 1))
    if os.environ.get("TRITON_INTERPRET") != "1":
        with pytest.raises(UnsupportedError, match="run on a CUDA GPU"):
            bs.BlockScaledMoE(torch.randn(3, 64), w1, w2, ids, torch.ones(3, 1))


# -- compiled for Blackwell and Hopper with Triton's ptxas (no GPU) ---------------------------------------------------
@pytest.mark.parametrize("wfmt,acts,cap,mma", [
    ("nvfp4", "fp4", 100, "tcgen05.mma.cta_group::1.kind::mxf4nvf4.block_scale.scale_vec::4X"),
    ("mxfp4", "fp4", 100, "tcgen05.mma.cta_group::1.kind::mxf4.block_scale.scale_vec::2X"),
    ("mxfp4", "fp8", 100, "tcgen05.mma.cta_group::1.kind::mxf8f6f4.block_scale.scale_vec::1X"),
    ("nvfp4", "fp4", 120, "mma.sync.aligned.m16n8k64.row.col.kind::mxf4nvf4.block_scale.scale_vec::4X.f32.e2m1.e2m1"
                          ".f32.ue4m3"),
    ("mxfp4", "fp4", 120, "mma.sync.aligned.m16n8k64.row.col.kind::mxf4nvf4.block_scale.scale_vec::2X.f32.e2m1.e2m1"
                          ".f32.ue8m0"),
    ("mxfp4", "fp8", 120, "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32"),
    ("nvfp4", "fp4", 103, "tcgen05.mma.cta_group::1.kind::mxf4nvf4.block_scale.scale_vec::4X"),
    ("mxfp4", "fp8", 103, "tcgen05.mma.cta_group::1.kind::mxf8f6f4.block_scale.scale_vec::1X"),
    ("mxfp4", "fp4", 121, "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32"),
    ("mxfp4", "fp8", 90, "wgmma.mma_async.sync.aligned.m64n16k16.f32.bf16.bf16"),
])
def test_compiles_to_the_block_scaled_mma(wfmt, acts, cap, mma):
    pytest.importorskip("triton")
    from truepeak.kernels.moe_inspect import compile_blockscaled, mma_instructions

    cfg = bs.choose_blockscaled_config(1, 7168, gated=True)
    k = compile_blockscaled(cfg, wfmt, acts, cap)
    assert mma_instructions(k) == [mma]
    # the table in the module docstring and blockscaled_path say the same (sm_121: refused, as it emulates)
    if cap == 121:
        with pytest.raises(UnsupportedError):
            bs.blockscaled_path(wfmt, acts, (12, 1))
    else:
        assert bs.blockscaled_path(wfmt, acts, (cap // 10, cap % 10))[1] == (".block_scale" in mma)
    if cap == 120:  # sm_120's 101,376 B per block, at 1 token per expert with 3 stages
        assert int(k.metadata.shared) <= SM120_SMEM


def test_nvfp4_does_not_compile_for_sm90_and_bad_compile_arguments():
    pytest.importorskip("triton")
    from truepeak.kernels.moe_inspect import compile_blockscaled

    cfg = bs.choose_blockscaled_config(1, 7168, gated=True)
    with pytest.raises(RuntimeError):
        compile_blockscaled(cfg, "nvfp4", "fp4", 90)
    with pytest.raises(UnsupportedError, match="take nvfp4 or mxfp4 weights, not 'bf16'"):
        compile_blockscaled(cfg, "bf16", "fp4", 100)
    with pytest.raises(TruepeakError, match="nvfp4 weights with activations 'fp4', got 'fp8'"):
        compile_blockscaled(cfg, "nvfp4", "fp8", 100)
    with pytest.raises(TruepeakError, match="capability must be an integer such as 90, 100 or 120, got '100'"):
        compile_blockscaled(cfg, "mxfp4", "fp4", "100")


def test_fake_quantize_rows_empty_and_unknown():
    assert tuple(bs.fake_quantize_rows(torch.zeros(0, 256), "nvfp4").shape) == (0, 256)
    with pytest.raises(TruepeakError, match="unknown activation format 'int4'"):
        bs.fake_quantize_rows(torch.zeros(2, 32), "int4")


def test_c14_stages_drop_until_the_tile_fits_sm120():
    """mxfp4 x mxfp8 at 256 tokens per expert (128-token blocks, 256-element steps): 3 stages need more than sm_120's
    101,376 B per block, so fit_shared_memory drops to 2; with sm_100's 232,448 B nothing changes."""
    pytest.importorskip("triton")
    from truepeak.kernels.moe_inspect import compile_blockscaled

    def launch(which, cfg, warmup=True):
        assert warmup
        return compile_blockscaled(cfg, "mxfp4", "fp8", 120)

    cfg = bs.choose_blockscaled_config(256, 7168, gated=True)
    assert (cfg.block_m, cfg.block_k, cfg.num_stages) == (128, 256, 3)
    assert int(launch(1, cfg).metadata.shared) > SM120_SMEM
    c1, c2 = mt.fit_shared_memory(launch, cfg, cfg, SM120_SMEM)
    assert c1.num_stages == c2.num_stages == 2
    assert int(launch(1, c1).metadata.shared) <= SM120_SMEM
    assert mt.fit_shared_memory(launch, cfg, cfg, 232_448) == (cfg, cfg)
    with pytest.raises(UnsupportedError, match="1 stage. needs .* B of shared memory; this device allows 1,000 B"):
        mt.fit_shared_memory(launch, cfg, cfg, 1000)


# -- Triton's interpreter --------------------------------------------------------------------------------------------
_CHILD = """
import json, math, torch
from truepeak.kernels import quant, moe_triton as mt, moe_blockscaled as bs
from truepeak.kernels import _moe_blockscaled_jit as J
out = {}
torch.manual_seed(0)
# rows: normal, large, tiny, zero, mixed magnitudes (one 32-block 1e4 times the others), with H = 320 (a partial
# last BLOCK of 256 columns)
x = torch.randn(5, 320) * torch.tensor([1.0, 300.0, 1e-4, 0.0, 1.0])[:, None]
x[4, :32] *= 1e4
for name, fmt in (("mxfp8", J.MXFP8.value), ("mxfp4", J.MXFP4.value), ("nvfp4", J.NVFP4.value)):
    G = 16 if name == "nvfp4" else 32
    q = (torch.empty(5, 320, dtype=torch.float8_e4m3fn) if name == "mxfp8" else torch.empty(5, 160, dtype=torch.uint8))
    s = torch.empty(5, 320 // G, dtype=torch.float8_e4m3fn if G == 16 else torch.uint8)
    g = torch.empty(5)
    J.quant_rows_blockscaled_kernel[(5,)](x, q, s, g, x.stride(0), q.stride(0), s.stride(0), n_cols=320, BLOCK=256,
                                          XFMT=fmt, INTERP=True)
    if name == "mxfp8":
        rq, rs = quant.quantize_mxfp8(x)
        deq, ref = quant.dequantize_mxfp8(q, s), quant.dequantize_mxfp8(rq, rs)
        same_q = bool(torch.equal(q.float(), rq.float()))
    elif name == "mxfp4":
        rq, rs = quant.quantize_mxfp4(x)
        deq, ref = quant.dequantize_mxfp4(q, s), quant.dequantize_mxfp4(rq, rs)
        same_q = bool(torch.equal(q, rq))
    else:
        amax = x.abs().amax(1, keepdim=True)
        rg = torch.where(amax > 0, amax / 2688.0, torch.ones_like(amax))
        rq, rs, _ = quant.quantize_nvfp4(x, global_scale=rg)
        deq, ref = quant.dequantize_nvfp4(q, s, g[:, None]), quant.dequantize_nvfp4(rq, rs, rg)
        same_q = bool(torch.equal(q, rq)) and bool(torch.equal(g, rg[:, 0]))
    out["quant/" + name] = {"values": same_q, "scales": bool(torch.equal(s.view(torch.uint8), rs.view(torch.uint8))),
                            "dequantised": bool(torch.equal(deq, ref)),
                            "fake_quant": bool(torch.equal(bs.fake_quantize_rows(x, name), ref))}
# a NaN in a row: its block's e8m0 scale is 255 (NaN); nvfp4: the row's scale is NaN
xn = torch.randn(2, 64)
xn[1, 40] = float("nan")
for name, fmt in (("mxfp4", J.MXFP4.value), ("nvfp4", J.NVFP4.value)):
    G = 16 if name == "nvfp4" else 32
    q = torch.empty(2, 32, dtype=torch.uint8)
    s = torch.empty(2, 64 // G, dtype=torch.float8_e4m3fn if G == 16 else torch.uint8)
    g = torch.empty(2)
    J.quant_rows_blockscaled_kernel[(2,)](xn, q, s, g, 64, 32, s.stride(0), n_cols=64, BLOCK=64, XFMT=fmt, INTERP=True)
    out["nan/" + name] = {"scales": s.view(torch.uint8).tolist(), "g_nan": [math.isnan(v) for v in g.tolist()]}
# the forward: three activation formats x routings, against the float32 reference with the same activation rounding
routings = json.loads(sys.argv[1])
for routing, rows in routings.items():
    ids = torch.tensor(rows)
    T, k = ids.shape
    for wfmt, acts in (("nvfp4", "fp4"), ("mxfp4", "fp4"), ("mxfp4", "fp8")):
        torch.manual_seed(1)
        E, H, I = 4, 256, 128
        w1 = mt.quantize_experts(torch.randn(E, 2 * I, H) * 0.1, wfmt)
        w2 = mt.quantize_experts(torch.randn(E, H, I) * 0.1, wfmt)
        xs = (torch.rand(T, H) * 2 - 1).bfloat16()
        tw = torch.rand(T, k)
        m = bs.BlockScaledMoE(xs, w1, w2, ids, tw, activations=acts, config=mt.KernelConfig(16, 64, 128, 4, 1))
        yo = m()
        y = yo.float()
        ref_q = mt.moe_reference(xs, w1.dequantize(), w2.dequantize(), ids, tw,
                                 act_quant=lambda a: bs.fake_quantize_rows(a, m.act_format))
        ref = mt.moe_reference(xs, w1.dequantize(), w2.dequantize(), ids, tw)
        den = max(float(ref.abs().max()), 1e-30)
        out[routing + "/" + wfmt + "/" + acts] = {
            "err_same_rounding": float((y - ref_q).abs().max()) / den, "err": float((y - ref).abs().max()) / den,
            "shape": list(y.shape), "dtype": str(yo.dtype), "path": m.path, "act_format": m.act_format}
# weights in FusedMoE's tiled layout are read back in the standard one
w1 = mt.quantize_experts(torch.randn(4, 256, 128) * 0.1, "mxfp4")
w2 = mt.quantize_experts(torch.randn(4, 128, 128) * 0.1, "mxfp4")
ids = torch.tensor(routings["mixed"])
xs = (torch.rand(ids.shape[0], 128) * 2 - 1).bfloat16()
tw = torch.rand(ids.shape)
a = bs.BlockScaledMoE(xs, w1, w2, ids, tw)()
b = bs.BlockScaledMoE(xs, w1.in_kernel_order(w4a8=True), w2.in_kernel_order(w4a8=True), ids, tw)()
out["tiled_input"] = float((a.float() - b.float()).abs().max())
# an EP rank with no local slot, and an empty batch
for name, ids_n in (("nowhere", torch.full((3, 2), -1)), ("empty", torch.zeros(0, 2, dtype=torch.long))):
    y = bs.BlockScaledMoE(torch.rand(ids_n.shape[0], 128).bfloat16(), w1, w2, ids_n, torch.rand(ids_n.shape))()
    out[name] = {"shape": list(y.shape), "zero": bool((y == 0).all())}
print("RESULT " + json.dumps(out))
"""

ROUTINGS = {
    # experts 1 and 3 get no token; slots of another EP rank (-1) dropped
    "mixed": [[0, 2], [2, -1], [0, 2], [2, 0], [-1, 2], [0, 0]],
    # one expert holds every token (more tokens than one 16-token block)
    "all_in_one": [[3, 3]] * 20,
}


@pytest.fixture(scope="module")
def interpreted():
    pytest.importorskip("triton")
    src = str(Path(bs.__file__).resolve().parents[2])
    env = {**os.environ, "TRITON_INTERPRET": "1", "PYTHONPATH": src + os.pathsep + os.environ.get("PYTHONPATH", "")}
    proc = subprocess.run([sys.executable, "-c", "import sys\n" + _CHILD, json.dumps(ROUTINGS)], env=env,
                          capture_output=True, text=True, timeout=600)
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT ")]
    assert proc.returncode == 0 and lines, proc.stderr[-3000:]
    return json.loads(lines[-1][len("RESULT "):])


@pytest.mark.parametrize("fmt", ["mxfp8", "mxfp4", "nvfp4"])
def test_activation_quantiser_matches_quant_module_in_interpreter(interpreted, fmt):
    """Bit-exact against truepeak.kernels.quant (values, scales, the nvfp4 row scale), rows of 1, 300, 1e-4, 0 and a
    block 1e4 times its row, over a partial last column block."""
    assert interpreted["quant/" + fmt] == {"values": True, "scales": True, "dequantised": True, "fake_quant": True}


def test_nan_rows_get_nan_scales_in_interpreter(interpreted):
    # row 1's NaN is at column 40: the second 32-block (mxfp4) or the third 16-block (nvfp4)
    assert interpreted["nan/mxfp4"]["scales"][1][1] == 255 and 255 not in interpreted["nan/mxfp4"]["scales"][0]
    assert interpreted["nan/nvfp4"]["g_nan"] == [False, True]


@pytest.mark.parametrize("case", ["nvfp4/fp4", "mxfp4/fp4", "mxfp4/fp8"])
@pytest.mark.parametrize("routing", list(ROUTINGS))
def test_forward_matches_reference_in_interpreter(interpreted, case, routing):
    r = interpreted[f"{routing}/{case}"]
    assert r["shape"] == [len(ROUTINGS[routing]), 256] and r["dtype"] == "torch.bfloat16"
    assert r["path"] == "Triton interpreter (CPU)"
    # with the kernel's own activation rounding the only differences are bf16 outputs (2^-8) and float32 order
    assert r["err_same_rounding"] < 2e-2, r
    # against the unquantised activations: W4A4 rounds each activation to 3 bits of magnitude (e2m1), W4A8 to e4m3
    assert r["err"] < (0.5 if case.endswith("fp4") else 0.15), r
    assert r["err"] > r["err_same_rounding"]


def test_tiled_layout_input_and_empty_routings_in_interpreter(interpreted):
    assert interpreted["tiled_input"] == 0.0
    assert interpreted["nowhere"] == {"shape": [3, 128], "zero": True}
    assert interpreted["empty"] == {"shape": [0, 128], "zero": True}


@pytest.mark.gpu
@pytest.mark.parametrize("acts", ["fp4", "fp8"])
def test_gpu_mxfp4_blockscaled_matches_reference(acts):
    """On the device at hand (the H200: Triton's bf16 emulation of tl.dot_scaled; a Blackwell GPU: the native MMA)
    against the float32 reference with the same activation rounding, random routing with empty experts and one
    expert holding every token."""
    cap = torch.cuda.get_device_capability()
    try:
        bs.blockscaled_path("mxfp4", acts, cap)
    except UnsupportedError as exc:
        pytest.skip(str(exc))
    g = torch.Generator(device="cuda").manual_seed(0)
    E, H, I = 8, 512, 256
    w1 = mt.quantize_experts(torch.randn(E, 2 * I, H, device="cuda", generator=g) * 0.05, "mxfp4")
    w2 = mt.quantize_experts(torch.randn(E, H, I, device="cuda", generator=g) * 0.05, "mxfp4")
    for ids in (torch.randint(0, E, (24, 2), device="cuda", generator=g), torch.full((40, 2), 5, device="cuda")):
        ids[ids == 2] = -1  # an expert of another rank
        tw = torch.rand(ids.shape, device="cuda", generator=g)
        x = (torch.rand(ids.shape[0], H, device="cuda", generator=g) * 2 - 1).bfloat16()
        m = bs.BlockScaledMoE(x, w1, w2, ids, tw, activations=acts)
        ref = mt.moe_reference(x, w1.dequantize(), w2.dequantize(), ids, tw,
                               act_quant=lambda a: bs.fake_quantize_rows(a, m.act_format))
        err = float((m().float() - ref).abs().max() / ref.abs().max())
        assert err < 2e-2, (acts, err, m.path)


@pytest.mark.gpu
def test_gpu_nvfp4_blockscaled_needs_blackwell():
    cap = torch.cuda.get_device_capability()
    if cap[0] in (10, 12):
        pytest.skip(f"sm_{cap[0]}{cap[1]} runs nvfp4 natively")
    w = mt.quantize_experts(torch.randn(2, 128, 128, device="cuda"), "nvfp4")
    w2 = mt.quantize_experts(torch.randn(2, 128, 64, device="cuda"), "nvfp4")
    with pytest.raises(UnsupportedError, match="nvfp4 weights with fp4 activations on sm_"):
        bs.BlockScaledMoE(torch.randn(4, 128, device="cuda"), w, w2, torch.zeros(4, 1, dtype=torch.long,
                                                                                 device="cuda"),
                          torch.ones(4, 1, device="cuda"))
