"""The ``@triton.jit`` sources of the Hopper fused-MoE kernels (truepeak.kernels._moe_jit): the inline-PTX decodes on
the device, the fp8 MMA's fp32 promotion in the compiled kernel, and the exactness the tiled w4a16's fp16 scale
multiply relies on."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from truepeak.kernels import moe_triton as mt  # noqa: E402


def test_w8a8_fp8_dots_promote_to_fp32_every_128_products():
    """Hopper's fp8 MMA accumulates with limited precision; without promotion one H200 row came out 10 % off
    (docs/results/h200/moe/w8a8_check.log). Triton's sm_90 default never promotes (2^30): every fp8 dot of the
    compiled w8a8 kernel must carry maxNumImpreciseAcc = 128, for 256- and 128-element K steps alike."""
    pytest.importorskip("triton")
    import re

    from truepeak.kernels.moe_inspect import compile_gate_up

    for tpe in (1, 32):  # block_k 256 and 128
        cfg = mt.choose_config(tpe, "fp8", True, smem_limit=232_448, k_dim=7168, w8a8=True)
        ttgir = compile_gate_up(cfg, "fp8", w8a8=True).asm["ttgir"]
        dots = re.findall(r"warp_group_dot .*", ttgir)
        assert len(dots) == 2 and all("maxNumImpreciseAcc = 128" in d for d in dots), (cfg, dots)


@pytest.mark.gpu
@pytest.mark.parametrize("variant", ["_fp4_pair_asm", "_fp4_pair_asm2"])
def test_gpu_fp4_decode_asm_is_exact_for_every_byte(variant):
    """The inline-PTX e2m1 decodes (4 and 2 bytes per invocation) against the e2m1 table for all 256 bytes: low
    nibble -> lo, high nibble -> hi, times 2^-14."""
    import triton
    import triton.language as tl

    from truepeak.kernels import quant
    from truepeak.kernels._moe_jit import _fp4_pair_asm, _fp4_pair_asm2

    @triton.jit
    def decode(b_ptr, lo_ptr, hi_ptr, N: tl.constexpr, TWO: tl.constexpr):
        offs = tl.arange(0, N)
        if TWO:
            lo, hi = _fp4_pair_asm2(tl.load(b_ptr + offs))
        else:
            lo, hi = _fp4_pair_asm(tl.load(b_ptr + offs))
        tl.store(lo_ptr + offs, lo)
        tl.store(hi_ptr + offs, hi)

    b = torch.arange(256, dtype=torch.uint8, device="cuda")
    lo = torch.empty(256, dtype=torch.float16, device="cuda")
    hi = torch.empty_like(lo)
    decode[(1,)](b, lo, hi, N=256, TWO=variant.endswith("2"), num_warps=1)
    want_lo = quant.e2m1_decode(b.cpu() & 15) * 2.0 ** -14
    want_hi = quant.e2m1_decode(b.cpu() >> 4) * 2.0 ** -14
    assert torch.equal(lo.cpu().float(), want_lo) and torch.equal(hi.cpu().float(), want_hi)


@pytest.mark.gpu
def test_gpu_fp4_e4m3_decode_asm_is_exact_for_every_byte():
    """The w4a8 inline-PTX decode (4 bytes per invocation) against the e2m1 table for all 256 values of a byte in
    the e4m3 bit layout: low value -> lo, high value -> hi, both e4m3 equal to the e2m1 value times 2^-6."""
    import triton
    import triton.language as tl

    from truepeak.kernels import quant
    from truepeak.kernels._moe_jit import _fp4_e4m3_pair

    @triton.jit
    def decode(b_ptr, lo_ptr, hi_ptr, N: tl.constexpr):
        offs = tl.arange(0, N)
        lo, hi = _fp4_e4m3_pair(tl.load(b_ptr + offs), False)
        tl.store(lo_ptr + offs, lo)
        tl.store(hi_ptr + offs, hi)

    std = torch.arange(256, dtype=torch.uint8)
    b = mt.to_e4m3_bit_layout(std).cuda()
    lo = torch.empty(256, dtype=torch.float8_e4m3fn, device="cuda")
    hi = torch.empty_like(lo)
    decode[(1,)](b, lo, hi, N=256, num_warps=1)
    assert torch.equal(lo.cpu().float(), quant.e2m1_decode(std & 15) * 2.0 ** -6)
    assert torch.equal(hi.cpu().float(), quant.e2m1_decode(std >> 4) * 2.0 ** -6)


def test_tiled_w4a16_scale_multiply_is_exact_in_fp16():
    # the tiled w4a16 multiplies each decoded e2m1 value (times 2^-6) by its block scale in fp16 (_moe_jit's
    # _chunk_f16_dot); every product must equal the exact one: e2m1 has <= 2 significant bits, e4m3 <= 4, so <= 6
    e2m1 = torch.tensor([0, 0.5, 1, 1.5, 2, 3, 4, 6], dtype=torch.float64)
    e2m1 = torch.cat([e2m1, -e2m1]) * 2.0 ** -6
    codes = torch.arange(256, dtype=torch.uint8)
    e4m3 = codes.view(torch.float8_e4m3fn).double()
    e4m3 = e4m3[torch.isfinite(e4m3)]                                   # nvfp4 block scales (all finite e4m3)
    mx = 2.0 ** torch.arange(-17, 10, dtype=torch.float64)              # mxfp4 scales rebased to at most 2^9
    for scales, largest in ((e4m3, 6 * 448 * 2.0 ** -6), (mx, 6 * 2.0 ** 9 * 2.0 ** -6)):
        exact = e2m1[:, None] * scales[None, :]
        in_fp16 = (e2m1.half()[:, None] * scales.half()[None, :]).double()
        assert torch.equal(in_fp16, exact)
        assert float(exact.abs().max()) == largest                      # 42 for nvfp4, 48 for mxfp4: finite in fp16


def _mma_case():
    """Every e2m1 code in every position: 128 rows x 64 elements (one chunk), codes (row + element) mod 16, the
    standard bytes, the MMA layout's bytes, and the expected [128, 64] decode (MMA K order, x 2^-14, scale 1)."""
    from truepeak.kernels import quant

    codes = ((torch.arange(128)[:, None] + torch.arange(64)[None, :]) % 16).to(torch.uint8)
    std = quant.pack_nibbles(codes)[None]
    order = torch.tensor(mt.mma_logical_order(64))
    return mt.to_mma_layout(std), quant.e2m1_decode(codes)[:, order] * 2.0 ** -14


def _mma_decode_kernel():
    import triton
    import triton.language as tl

    from truepeak.kernels._moe_fp4_jit import mma_decode

    @triton.jit
    def decode(w_ptr, o_ptr, INTERP: tl.constexpr):
        raw = tl.load(w_ptr + tl.arange(0, 64)[:, None] * 64 + tl.arange(0, 64)[None, :])
        d = mma_decode(raw, tl.full((128, 4), 1.0, tl.float16), INTERP)
        tl.store(o_ptr + tl.arange(0, 128)[:, None] * 64 + tl.arange(0, 64)[None, :], d.to(tl.float32))

    return decode


@pytest.mark.gpu
def test_gpu_mma_layout_decode_asm_is_exact():
    """The MMA layout's inline-PTX decode (4 rotations, 6 masks per 32-bit word) and the permutation into the MMA's
    K order, on the device, against the e2m1 table: every code at every position of a 128 x 64 chunk."""
    raw, want = _mma_case()
    out = torch.empty(128, 64, device="cuda")
    _mma_decode_kernel()[(1,)](raw.cuda().reshape(-1), out, INTERP=False, num_warps=4)
    assert torch.equal(out.cpu(), want)


def test_mma_layout_scale_multiply_is_exact_in_fp16():
    # the MMA-layout kernel multiplies each decoded e2m1 value (x 2^-14) by its block scale in fp16: every product
    # must equal the exact one. nvfp4: every finite e4m3 scale (the smallest product 0.5 x 2^-14 x 2^-9 = 2^-24 is
    # fp16's smallest subnormal); mxfp4: e5m2 powers of two 2^-9..2^9 (scales rebased to at most 2^9)
    e2m1 = torch.tensor([0, 0.5, 1, 1.5, 2, 3, 4, 6], dtype=torch.float64)
    e2m1 = torch.cat([e2m1, -e2m1]) * 2.0 ** -14
    e4m3 = torch.arange(256, dtype=torch.uint8).view(torch.float8_e4m3fn).double()
    e4m3 = e4m3[torch.isfinite(e4m3)]
    for scales in (e4m3, 2.0 ** torch.arange(-9, 10, dtype=torch.float64)):
        exact = e2m1[:, None] * scales[None, :]
        assert torch.equal((e2m1.half()[:, None] * scales.half()[None, :]).double(), exact)
