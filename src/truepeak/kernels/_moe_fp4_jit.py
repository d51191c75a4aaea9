"""``@triton.jit`` helpers of the fp4 MoE kernels' MMA layout (:func:`truepeak.kernels.moe_triton.to_mma_layout`):
the e2m1 decode of one 64-element chunk straight into the Hopper MMA's A-operand registers, its block scales, and
the chunk's MMA. Inlined by :mod:`truepeak.kernels._moe_jit`'s kernels (Triton resolves callees through the
calling function's globals); importing this module needs triton."""

import triton
import triton.language as tl

# 8 e2m1 values (one 32-bit word in the MMA layout, $4) -> 4 fp16x2 registers $0..$3 (value x 2^-14 x scale): the
# bit moves of moe_triton.layouts._MMA_BITS (4 rotations, 6 masks that ptxas fuses into LOP3), then one HMUL2 each
# by the thread's block scale ($5 = {s, s}, fp16; exact: see mma_scales).
_ASM_MMA_DECODE = tl.constexpr(
    "{ .reg .b32 t, u, v; and.b32 $0, $4, 0x8E008E00; shf.l.wrap.b32 t, $4, $4, 3; and.b32 $1, t, 0x8E008E00; "
    "shf.l.wrap.b32 t, $4, $4, 7; shf.l.wrap.b32 u, $4, $4, 10; and.b32 v, t, 0x02000200; "
    "and.b32 u, u, 0x8C008C00; or.b32 $2, u, v; shf.l.wrap.b32 u, $4, $4, 12; and.b32 v, t, 0x08000800; "
    "and.b32 u, u, 0x86008600; or.b32 $3, u, v; mul.rn.f16x2 $0, $0, $5; mul.rn.f16x2 $1, $1, $5; "
    "mul.rn.f16x2 $2, $2, $5; mul.rn.f16x2 $3, $3, $5; }")

# Two rows' block scales: byte $3 of word $1 and byte $4 of word $2 (prmt) -> fp16x2 $0 (one cvt for both)
_ASM_SCALE_E4M3 = tl.constexpr(
    "{ .reg .b32 t, s; .reg .b16 l, h; shl.b32 s, $4, 4; add.s32 s, s, $3; add.s32 s, s, 0x40; "
    "prmt.b32 t, $1, $2, s; mov.b32 {l, h}, t; cvt.rn.f16x2.e4m3x2 $0, l; }")
_ASM_SCALE_E5M2 = tl.constexpr(
    "{ .reg .b32 t, s; .reg .b16 l, h; shl.b32 s, $4, 4; add.s32 s, s, $3; add.s32 s, s, 0x40; "
    "prmt.b32 t, $1, $2, s; mov.b32 {l, h}, t; cvt.rn.f16x2.e5m2x2 $0, l; }")


@triton.jit
def _rotl(x, s: tl.constexpr):
    return (x << s) | (x >> (32 - s))


@triton.jit
def _lanes(r):
    """uint32 fp16x2 bits [P, W] -> (low lane, high lane) fp16 [P, W] (the interpreter path)."""
    lo = (r & 0xFFFF).to(tl.uint16).to(tl.float16, bitcast=True)
    hi = (r >> 16).to(tl.uint16).to(tl.float16, bitcast=True)
    return lo, hi


@triton.jit
def _decode_interp(raw, sb):
    """The PTX decode with tensor ops (Triton's interpreter runs no PTX): the same rotations and masks."""
    P: tl.constexpr = raw.shape[0]
    W: tl.constexpr = raw.shape[1] // 4
    sh = (8 * tl.arange(0, 4)).to(tl.uint32)
    w = tl.sum(tl.reshape(raw, (P, W, 4)).to(tl.uint32) << sh[None, None, :], axis=2)  # [P, W] words
    m = 0x8E008E00
    t = _rotl(w, 7)
    r0l, r0h = _lanes(w & m)
    r1l, r1h = _lanes(_rotl(w, 3) & m)
    r2l, r2h = _lanes((_rotl(w, 10) & 0x8C008C00) | (t & 0x02000200))
    r3l, r3h = _lanes((_rotl(w, 12) & 0x86008600) | (t & 0x08000800))
    a = tl.reshape(tl.join(tl.join(r0l, r1l), tl.join(r0h, r1h)), (P, 4 * W))  # word w: R0.lo, R0.hi, R1.lo, R1.hi
    b = tl.reshape(tl.join(tl.join(r2l, r3l), tl.join(r2h, r3h)), (P, 4 * W))
    return a * sb, b * sb


@triton.jit
def mma_scales(words, h: tl.constexpr, WFMT: tl.constexpr, INTERP: tl.constexpr):
    """[BN, 4] fp16: column c = the block scale of the values that MMA-fragment column c holds in 64-element chunk
    ``h`` of the step (nvfp4: byte c of the row's scale word of chunk h, e4m3, ``words`` int32 for 64-element steps,
    int64 for 128 (chunk 1 in the high half); mxfp4: byte 2h + c // 2, e5m2 as ExpertWeights.mma_scale_words stores
    them). Both convert exactly to fp16."""
    BN: tl.constexpr = words.shape[0]
    cc = tl.arange(0, 4)[None, :]
    if WFMT == 3:
        if h == 1:  # a 128-element step: the second chunk's word is the high half of the int64 (_scale_words)
            words = words >> 32
        words = words.to(tl.int32)
        byte = cc + 0 * h
    else:
        byte = 2 * h + cc // 2
    wb = tl.broadcast_to(words[:, None], (BN, 4))
    sel = tl.broadcast_to(byte, (BN, 4))
    if INTERP:
        s8 = ((wb >> (8 * sel)) & 0xFF).to(tl.uint8)
        if WFMT == 3:
            return s8.to(tl.float8e4nv, bitcast=True).to(tl.float16)
        else:
            return s8.to(tl.float8e5, bitcast=True).to(tl.float16)
    elif WFMT == 3:
        return tl.inline_asm_elementwise(asm=_ASM_SCALE_E4M3, constraints="=r,r,r,r,r", args=[wb, sel],
                                         dtype=tl.float16, is_pure=True, pack=2)
    else:
        return tl.inline_asm_elementwise(asm=_ASM_SCALE_E5M2, constraints="=r,r,r,r,r", args=[wb, sel],
                                         dtype=tl.float16, is_pure=True, pack=2)


@triton.jit
def mma_decode(raw, s, INTERP: tl.constexpr):
    """[BN, 64] fp16 weights x 2^-14 of one 64-element chunk of BN rows in the MMA layout, in the MMA's K order
    (moe_triton.mma_logical_order): raw [BN/2, 64] bytes (line 8a + g = rows 16a + g and 16a + 8 + g,
    moe_triton.layouts._mma_tile_perm), s [BN, 4] fp16 block scales (mma_scales). The decoded values come out of
    the PTX in byte order (word m = bytes 4m..4m+3 of a line -> 8 values) and are reshaped and permuted into the
    MMA's K order: the permutation only renames registers, as each thread loaded exactly the bytes of its MMA
    fragment (no shuffles or shared memory in the compiled K loop: benchmarks/moe_kernel_sass.py)."""
    P: tl.constexpr = raw.shape[0]
    BN: tl.constexpr = 2 * P
    sp = tl.permute(tl.reshape(s, (BN // 16, 2, 8, 4)), (0, 2, 3, 1))  # a, g, c, h
    sb = tl.reshape(tl.broadcast_to(tl.reshape(sp, (P, 4, 2, 1)), (P, 4, 2, 8)), (P, 64))
    if INTERP:
        r0, r1 = _decode_interp(raw, sb)
    else:
        r0, r1 = tl.inline_asm_elementwise(asm=_ASM_MMA_DECODE, constraints="=r,=r,=r,=r,r,r,r", args=[raw, sb],
                                           dtype=(tl.float16, tl.float16), is_pure=True, pack=4)
    d = tl.reshape(tl.join(r0, r1), (BN // 16, 8, 2, 2, 2, 2, 2, 2, 2))  # a, g, c1, c0, h, tau, i1, i0, q
    # row 16a + 8h + g; K position 16 (2 tau + q) + 8 i1 + 2 c + i0
    return tl.reshape(tl.permute(d, (0, 4, 1, 5, 8, 6, 2, 3, 7)), (BN, 64))


@triton.jit
def mma_chunk_dot(raw, s, x, acc, INTERP: tl.constexpr):
    """acc + W @ x for one 64-element chunk in the MMA layout (mma_decode), x [64, BM] fp16 activations in the
    layout's K order: fp16 MMAs with fp32 accumulation."""
    d = mma_decode(raw, s, INTERP)
    if INTERP:
        return tl.dot(d.to(tl.float32), x.to(tl.float32), acc, input_precision="ieee")
    else:
        return tl.dot(d, x, acc)
