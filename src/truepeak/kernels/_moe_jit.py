"""The ``@triton.jit`` kernels of :mod:`truepeak.kernels.moe_triton` (imported lazily by it: importing this module
needs triton). Triton resolves a jitted function's callees through its module globals, so they live at module level
here. Documentation of the design, layouts and formats: :mod:`truepeak.kernels.moe_triton`."""

import triton
import triton.language as tl

from truepeak.kernels._moe_fp4_jit import mma_chunk_dot, mma_scales
from truepeak.kernels._moe_jit_common import block_of_one_expert, e8m0_f32


@triton.jit
def _fp4_to_f16(c):
    # e2m1 nibble (sign bit 3, exponent bits 2..1, mantissa bit 0) -> fp16 bits with the same exponent/mantissa
    # placed at fp16's exponent lsbs / mantissa msb: value * 2^-14 (subnormal fp16 for code 1 = 0.5 * 2^-14).
    c16 = c.to(tl.int16)
    bits = ((c16 & 7) << 9) | ((c16 & 8) << 12)
    return bits.to(tl.float16, bitcast=True)

@triton.jit
def _load_raw(w_ptr, ws_ptr, e, offs_n, k0, N: tl.constexpr, K: tl.constexpr, stride_we, stride_wn,
              WFMT: tl.constexpr, BLOCK_K: tl.constexpr, TILED: tl.constexpr = False, MMAL: tl.constexpr = False):
    """The stored weight tile of K step ``k0``: (packed bytes [BN, BK/2], scales of the low nibbles, scales of the
    high nibbles [BN, BK/2/G]) for fp4 in the kernel's nibble order (low nibbles = the step's first BK/2 elements,
    high = its last BK/2; G = 16 for nvfp4, 32 for mxfp4), (values [BN, BK], values, values) otherwise; fp4 in the
    TILED layout (moe_triton.to_w4a8_layout: w4a8 and the tiled w4a16): (bytes of the step's first 64-element chunk
    [BN, 32], of its second chunk (mxfp4 with BK = 128;
    otherwise the first again), the step's block scales of each row as one int32 word [BN]: ``ws_ptr`` is then
    :meth:`ExpertWeights.w4a8_scale_words`; _acc_tiles loads the words one step ahead itself, as Triton's pipeliner
    does not prefetch loads that do not feed a dot). Only loads: the caller may issue it one step ahead (register
    prefetch). fp4 in the MMA layout (MMAL, moe_triton.to_mma_layout): the chunks as [BN/2, 64] bytes (64-byte
    lines, each two rows of a thread's MMA fragment), and the scale words as for TILED."""
    if WFMT >= 3 and MMAL:
        BN: tl.constexpr = offs_n.shape[0]
        ev, _odd = tl.split(tl.reshape(offs_n, (BN // 2, 2)))
        offs_p = ev // 2  # 64-byte line: 32 per 64-row tile
        p_b = (w_ptr + e * stride_we + (offs_p // 32)[:, None] * ((K // 64) * 2048) + (k0 // 64) * 2048
               + (offs_p % 32)[:, None] * 64 + tl.arange(0, 64)[None, :])
        b_a = tl.load(p_b, mask=offs_p[:, None] < N // 2, other=0)
        b_b = b_a
        if BLOCK_K == 128:
            b_b = tl.load(p_b + 2048, mask=offs_p[:, None] < N // 2, other=0)
        return b_a, b_b, _scale_words(ws_ptr, e, offs_n, k0, N, K, BLOCK_K, WFMT)
    elif WFMT >= 3 and TILED:
        # the w4a8 layout (moe_triton.to_w4a8_layout): 64-row x 64-element tiles of 2 KB, tile (n // 64, chunk)
        # at ((n // 64) * K/64 + chunk) * 2048, rows 32 bytes apart; an mxfp4 step's second chunk is the next tile
        p_b = (w_ptr + e * stride_we + (offs_n // 64)[:, None] * ((K // 64) * 2048) + (k0 // 64) * 2048
               + (offs_n % 64)[:, None] * 32 + tl.arange(0, 32)[None, :])
        b_a = tl.load(p_b, mask=offs_n[:, None] < N, other=0)
        b_b = b_a
        if BLOCK_K == 128:  # mxfp4, and nvfp4 with fp16 activations: two chunks per step
            b_b = tl.load(p_b + 2048, mask=offs_n[:, None] < N, other=0)
        return b_a, b_b, _scale_words(ws_ptr, e, offs_n, k0, N, K, BLOCK_K, WFMT)
    elif WFMT >= 3:
        offs_b = k0 // 2 + tl.arange(0, BLOCK_K // 2)
        b = tl.load(w_ptr + e * stride_we + offs_n[:, None] * stride_wn + offs_b[None, :],
                    mask=offs_n[:, None] < N, other=0)
        G: tl.constexpr = 16 if WFMT == 3 else 32
        offs_s = k0 // G + tl.arange(0, BLOCK_K // 2 // G)
        s_row = ws_ptr + (e * N + offs_n[:, None]) * (K // G)
        if WFMT == 3:
            s_lo = tl.load(s_row + offs_s[None, :], mask=offs_n[:, None] < N, other=0.0)
            s_hi = tl.load(s_row + BLOCK_K // 2 // G + offs_s[None, :], mask=offs_n[:, None] < N, other=0.0)
        else:
            # both halves' e8m0 scales in one load (2 x BK/64 bytes per row: 4 at BK = 128), split in registers: two
            # 2-byte loads per row at BK = 128 gave intermittent NaN outputs on the H200 (not understood)
            HALF: tl.constexpr = BLOCK_K // 2 // G
            offs_2 = k0 // G + tl.arange(0, 2 * HALF)
            s2 = tl.load(s_row + offs_2[None, :], mask=offs_n[:, None] < N, other=127)
            s_lo, s_hi = tl.split(tl.permute(tl.reshape(s2, (s2.shape[0], 2, HALF)), (0, 2, 1)))
        return b, s_lo, s_hi
    else:
        offs_k = k0 + tl.arange(0, BLOCK_K)
        w = tl.load(w_ptr + e * stride_we + offs_n[:, None] * stride_wn + offs_k[None, :],
                    mask=offs_n[:, None] < N, other=0.0)
        return w, w, w


@triton.jit
def _scale_words(ws_ptr, e, offs_n, k0, N: tl.constexpr, K: tl.constexpr, BLOCK_K: tl.constexpr,
                 WFMT: tl.constexpr = 4):
    """w4a8: the 4 block scales of K step k0 of rows offs_n, one int32 word per row [BN], from the step-major word
    array [E, K/BK, N] (ExpertWeights.w4a8_scale_words): one step's words of consecutive rows are contiguous, so
    a tile's scales are a few coalesced sectors (row-major, each row's word would be its own 32-byte sector, and the
    L2 rather than DRAM the bound)."""
    if WFMT == 3 and BLOCK_K == 128:  # nvfp4 in 128-element steps: the two 64-element steps' words as one int64
        p = ws_ptr + (e * (K // 64) + k0 // 64) * N + offs_n
        w0 = tl.load(p, mask=offs_n < N, other=0).to(tl.uint32).to(tl.int64)
        w1 = tl.load(p + N, mask=offs_n < N, other=0).to(tl.uint32).to(tl.int64)
        words = w0 | (w1 << 32)
    else:
        words = tl.load(ws_ptr + (e * (K // BLOCK_K) + k0 // BLOCK_K) * N + offs_n, mask=offs_n < N, other=0)
    return words


def _lane_decode(dst: str, src: str, tmp: str) -> str:
    """PTX: the e2m1 nibbles at bits 12-15 of both 16-bit lanes of ``src`` -> fp16x2 in ``dst`` (value x 2^-14): the
    sign bit stays, the exponent/mantissa bits move right by 3 (the Marlin / vLLM e2m1 -> fp16 trick)."""
    return (f"and.b32 {dst}, {src}, 0x80008000; shr.b32 {tmp}, {src}, 3; "
            f"and.b32 {tmp}, {tmp}, 0x0E000E00; or.b32 {dst}, {dst}, {tmp};")


# 4 bytes (one 32-bit register $4) -> lo = $0, $1 and hi = $2, $3 (fp16x2 each): prmt puts byte i at bits 8-15 of a
# lane, so the high nibble sits at bits 12-15 and the low nibble, after a shift left by 4, too.
_ASM_4BYTES = tl.constexpr(
    "{ .reg .b32 t0, t1, u0, u1, v; prmt.b32 t0, $4, 0, 0x1404; prmt.b32 t1, $4, 0, 0x3424; "
    "shl.b32 u0, t0, 4; shl.b32 u1, t1, 4; "
    + _lane_decode("$0", "u0", "v") + _lane_decode("$1", "u1", "v")
    + _lane_decode("$2", "t0", "v") + _lane_decode("$3", "t1", "v") + " }")
# 2 bytes (one 16-bit register $2) -> lo = $0, hi = $1
_ASM_2BYTES = tl.constexpr(
    "{ .reg .b32 t, u, v; cvt.u32.u16 t, $2; prmt.b32 t, t, 0, 0x1404; shl.b32 u, t, 4; "
    + _lane_decode("$0", "u", "v") + _lane_decode("$1", "t", "v") + " }")


# w4a8: 4 bytes in the e4m3 bit layout of to_e4m3_bit_layout -> 4 + 4 e4m3 bytes equal to the e2m1 values x 2^-6
# (the e2m1 exponent and mantissa bits sit at e4m3's exponent lsbs and mantissa msb: exact, subnormal 0.5 included).
# Low values: their bits are already in place (one AND); high values: bits 0, 1, 5 move up by 2, bit 6 down by 2.
_ASM_E4M3 = tl.constexpr(
    "{ .reg .b32 t, u; and.b32 $0, $2, 0x9C9C9C9C; shl.b32 t, $2, 2; shr.b32 u, $2, 2; "
    "and.b32 t, t, 0x8C8C8C8C; and.b32 u, u, 0x10101010; or.b32 $1, t, u; }")


# The tiled w4a16's decode, 2 bytes (one 16-bit register $2, two consecutive K positions in the MMA operand's
# register layout) -> lo = $0, hi = $1 as fp16x2: the _ASM_E4M3 bit moves, then the hardware's e4m3x2 -> f16x2 cvt.
_ASM_F16_2BYTES = tl.constexpr(
    "{ .reg .b32 t, u, v, l, h; .reg .b16 l16, h16; cvt.u32.u16 t, $2; and.b32 l, t, 0x9C9C; shl.b32 u, t, 2; "
    "shr.b32 v, t, 2; and.b32 u, u, 0x8C8C; and.b32 v, v, 0x1010; or.b32 h, u, v; cvt.u16.u32 l16, l; "
    "cvt.u16.u32 h16, h; cvt.rn.f16x2.e4m3x2 $0, l16; cvt.rn.f16x2.e4m3x2 $1, h16; }")


@triton.jit
def _fp4_f16_pair(b, INTERP: tl.constexpr):
    """(lo, hi) fp16 tensors of b's shape (uint8 in the e4m3 bit layout): the e2m1 values x 2^-6, two bytes per
    PTX call (the MMA operand's layout holds K pairs)."""
    if INTERP:
        lo, hi = _fp4_e4m3_pair(b, INTERP)
        return lo.to(tl.float16), hi.to(tl.float16)
    else:
        return tl.inline_asm_elementwise(asm=_ASM_F16_2BYTES, constraints="=r,=r,h", args=[b],
                                         dtype=(tl.float16, tl.float16), is_pure=True, pack=2)


@triton.jit
def _fp4_e4m3_pair(b, INTERP: tl.constexpr):
    """(lo, hi) e4m3 tensors of b's shape (b: uint8 in the e4m3 bit layout): the e2m1 values of each byte's low /
    high value times 2^-6, decoded four bytes per 32-bit register (5 integer instructions per 8 values)."""
    if INTERP:  # the interpreter cannot run PTX: the same bit moves with tensor ops
        lo = b & 0x9C
        hi = ((b << 2) & 0x8C) | ((b >> 2) & 0x10)
    else:
        lo, hi = tl.inline_asm_elementwise(asm=_ASM_E4M3, constraints="=r,=r,r", args=[b],
                                           dtype=(tl.uint8, tl.uint8), is_pure=True, pack=4)
    return lo.to(tl.float8e4nv, bitcast=True), hi.to(tl.float8e4nv, bitcast=True)


@triton.jit
def _fp4_scale_f32(words, j: tl.constexpr, WFMT: tl.constexpr):
    """Byte ``j`` of each int32 scale word as an fp32 block scale (exact): e4m3 (nvfp4) or 2^(e8m0 - 127) (mxfp4;
    0 gives 0, and 255, e8m0's NaN, a quiet NaN: the exponent field alone would make it inf)."""
    s8 = (words >> (8 * j)) & 0xFF
    if WFMT == 3:
        return s8.to(tl.uint8).to(tl.float8e4nv, bitcast=True).to(tl.float32)
    else:
        return e8m0_f32(s8)


@triton.jit
def _fp4_scale_f16(words, j: tl.constexpr, WFMT: tl.constexpr):
    """Byte ``j`` of each int32 scale word as an fp16 block scale for the tiled w4a16: e4m3 (nvfp4; exact in fp16)
    or 2^(e8m0 - 127) (mxfp4, rebased per expert so the largest is 2^9: ExpertWeights.in_kernel_order; scales
    below 2^-24 flush to 0, 255 (NaN) stays NaN). Times a decoded e2m1 value x 2^-6 (0.5..6 x 2^-6) the product is
    at most 6 x 448 x 2^-6 = 42 (nvfp4) or 6 x 2^3 = 48 (mxfp4): finite in fp16."""
    s8 = (words >> (8 * j)) & 0xFF
    if WFMT == 3:
        return s8.to(tl.uint8).to(tl.float8e4nv, bitcast=True).to(tl.float16)
    else:
        return e8m0_f32(s8).to(tl.float16)


@triton.jit
def _fp4_pair_asm(b):
    """(lo, hi) fp16 tensors of b's shape: the e2m1 values of the low / high nibble of each byte times 2^-14, decoded
    four bytes per 32-bit register (see _lane_decode)."""
    return tl.inline_asm_elementwise(asm=_ASM_4BYTES, constraints="=r,=r,=r,=r,r", args=[b],
                                     dtype=(tl.float16, tl.float16), is_pure=True, pack=4)


@triton.jit
def _fp4_pair_asm2(b):
    """As _fp4_pair_asm, two bytes per invocation (a 16-bit register): in the MMA operand's register layout each
    thread holds K pairs, so two bytes need no gathering."""
    return tl.inline_asm_elementwise(asm=_ASM_2BYTES, constraints="=r,=r,h", args=[b],
                                     dtype=(tl.float16, tl.float16), is_pure=True, pack=2)


@triton.jit
def _fp4_scale(s8, unit, WFMT: tl.constexpr):
    """fp16 block scales times ``unit`` (= 2^6): e4m3 (nvfp4) or 2^(e8m0 - 127) (mxfp4, rebased per expert by
    :meth:`truepeak.kernels.moe_triton.ExpertWeights.in_kernel_order` so the largest is 2^9). With the decode's
    2^-14 the product is 2^-8 too small; the accumulator is multiplied by 2^8 and the per-expert scale once after the
    K loop, so the fp16 values do not depend on the weights' magnitude. The split keeps the fp16 scale finite (448 *
    64 < 65504; 2^9 * 64 = 32768). ``unit`` is a runtime value equal to 64 on purpose: with it Triton decodes in the
    loaded layout and moves the fp16 tile to the MMA through shared memory (the non-HOIST configurations)."""
    if WFMT == 3:
        return (s8.to(tl.float32) * unit).to(tl.float16)
    else:
        # e8m0 s -> 2^(s - 127): s is the exponent field of an fp32 (s = 0, 2^-127, becomes 0; 255, NaN, becomes
        # inf: non-finite outputs all the same; e8m0_f32's 2 more operations per scale stay out of this loop)
        return ((s8.to(tl.int32) << 23).to(tl.float32, bitcast=True) * unit).to(tl.float16)


@triton.jit
def _fp4_scale_const(s8, WFMT: tl.constexpr):
    """As _fp4_scale with ``unit`` a constant 2^6: with no runtime scalar in the chain Triton decodes in the MMA
    operand's register layout (HOIST)."""
    if WFMT == 3:
        return (s8.to(tl.float32) * 64.0).to(tl.float16)
    else:
        return ((s8.to(tl.int32) << 23).to(tl.float32, bitcast=True) * 64.0).to(tl.float16)


@triton.jit
def _fp4_values(b, s_lo, s_hi, unit, WFMT: tl.constexpr, BLOCK_K: tl.constexpr, INTERP: tl.constexpr,
                HOIST: tl.constexpr):
    """(lo, hi) fp16 [BN, BK/2]: the step's first / last BK/2 elements (low / high nibbles) times their block scale,
    one scale per G consecutive bytes (G = 16 nvfp4, 32 mxfp4)."""
    G: tl.constexpr = 16 if WFMT == 3 else 32
    BN: tl.constexpr = b.shape[0]
    if INTERP:  # the CPU interpreter cannot run PTX: the same decode with tensor ops
        lo = _fp4_to_f16(b & 15)
        hi = _fp4_to_f16(b >> 4)
    elif HOIST:
        lo, hi = _fp4_pair_asm2(b)
    else:
        lo, hi = _fp4_pair_asm(b)
    if HOIST:
        sl = _fp4_scale_const(s_lo, WFMT)
        sh = _fp4_scale_const(s_hi, WFMT)
    else:
        sl = _fp4_scale(s_lo, unit, WFMT)
        sh = _fp4_scale(s_hi, unit, WFMT)
    lo = tl.reshape(tl.reshape(lo, (BN, BLOCK_K // 2 // G, G)) * sl[:, :, None], (BN, BLOCK_K // 2))
    hi = tl.reshape(tl.reshape(hi, (BN, BLOCK_K // 2 // G, G)) * sh[:, :, None], (BN, BLOCK_K // 2))
    return lo, hi


@triton.jit
def _dot(a, b, acc, INTERP: tl.constexpr):
    # Triton 3.6's CPU interpreter computes bf16 dots wrongly (garbage); it gets fp32 operands there (fp8 through
    # fp16: the interpreter's direct fp8 -> fp32 cast was seen to differ from torch's on e4m3 values).
    if INTERP:
        if a.dtype.is_fp8():
            a = a.to(tl.float16)
        if b.dtype.is_fp8():
            b = b.to(tl.float16)
        return tl.dot(a.to(tl.float32), b.to(tl.float32), acc, input_precision="ieee")
    else:
        return tl.dot(a, b, acc)


@triton.jit
def _dot_fp8(a, b, acc, BLOCK_K: tl.constexpr, INTERP: tl.constexpr):
    """acc + a @ b for e4m3 a, b with the tensor-core partial sums added into the fp32 accumulator every 128
    products (``max_num_imprecise_acc``): Hopper's fp8 MMA accumulates with limited precision (DeepSeek-V3 technical
    report, arXiv:2412.19437 §3.3.2, which promotes every 128 elements; Triton's default on sm_90 never promotes).
    Without it one (token, expert) row came out 10 % off on the H200 at K = 7168
    (benchmarks/moe_w8a8_vs_emulation.py shows the per-row error)."""
    if INTERP:
        return _dot(a, b, acc, INTERP)
    else:
        IMP: tl.constexpr = 128 if BLOCK_K >= 128 else BLOCK_K
        return tl.dot(a, b, acc, max_num_imprecise_acc=IMP)


@triton.jit
def _x_tiles(x_ptr, rows, row_ok, stride_x, k0, x_plane, WFMT: tl.constexpr, BLOCK_K: tl.constexpr,
             ACT8: tl.constexpr, TILED: tl.constexpr, MMAL: tl.constexpr = False):
    """The activations of K step k0 as MMA B operands: (X[rows, k0:k0+BK]^T, same, same, same) [BK, BM] for bf16/fp8
    weights, (first half, second half, same, same) [BK/2, BM] for fp4 (matching the low / high nibbles of the
    kernel's nibble order). fp4 with ACT8 (w4a8): four [32, BM] tiles, one per scale block of the step: mxfp4
    (BK = 128) the step's four 32-element quarters; nvfp4 (BK = 64) its first half from activation plane 0 and plane
    1 (``x_plane`` elements further), then its second half from both (plane 0 keeps the even 16-element blocks of
    each row, plane 1 the odd ones, the rest zero), so that each fp8 MMA of K = 32 sums one nvfp4 block. fp4 TILED
    with fp16 activations: the step's 32-element quarters (x0, x1, and for BK = 128 x2, x3; else x0, x1 again). fp4
    in the MMA layout (MMAL): the step's 64-element chunks as fp16 [64, BM] (x0, and x1 for BK = 128), stored in the
    layout's K order by quant_rows_kernel (PERM); e4m3 activations convert exactly."""
    if WFMT >= 3 and MMAL:
        p_x = x_ptr + rows[None, :] * stride_x + (k0 + tl.arange(0, 64))[:, None]
        x0 = tl.load(p_x, mask=row_ok[None, :], other=0.0).to(tl.float16)
        x1 = x0
        if BLOCK_K == 128:
            x1 = tl.load(p_x + 64, mask=row_ok[None, :], other=0.0).to(tl.float16)
        return x0, x1, x0, x1
    elif WFMT >= 3 and TILED:
        p_x = x_ptr + rows[None, :] * stride_x + (k0 + tl.arange(0, 32))[:, None]
        if WFMT == 3 and ACT8:
            return (tl.load(p_x, mask=row_ok[None, :], other=0.0),
                    tl.load(p_x + x_plane, mask=row_ok[None, :], other=0.0),
                    tl.load(p_x + 32, mask=row_ok[None, :], other=0.0),
                    tl.load(p_x + x_plane + 32, mask=row_ok[None, :], other=0.0))
        elif BLOCK_K == 64:  # mxfp4 in 64-element steps (two blocks), nvfp4 with fp16 activations
            x0 = tl.load(p_x, mask=row_ok[None, :], other=0.0)
            x1 = tl.load(p_x + 32, mask=row_ok[None, :], other=0.0)
            return x0, x1, x0, x1
        else:
            return (tl.load(p_x, mask=row_ok[None, :], other=0.0), tl.load(p_x + 32, mask=row_ok[None, :], other=0.0),
                    tl.load(p_x + 64, mask=row_ok[None, :], other=0.0),
                    tl.load(p_x + 96, mask=row_ok[None, :], other=0.0))
    elif WFMT >= 3:
        offs_h = k0 + tl.arange(0, BLOCK_K // 2)
        p_lo = x_ptr + rows[None, :] * stride_x + offs_h[:, None]
        x_lo = tl.load(p_lo, mask=row_ok[None, :], other=0.0)
        x_hi = tl.load(p_lo + BLOCK_K // 2, mask=row_ok[None, :], other=0.0)
        return x_lo, x_hi, x_lo, x_hi
    else:
        offs_k = k0 + tl.arange(0, BLOCK_K)
        x = tl.load(x_ptr + rows[None, :] * stride_x + offs_k[:, None], mask=row_ok[None, :], other=0.0)
        return x, x, x, x


@triton.jit
def _chunk_f16_dot(raw, words, j0: tl.constexpr, x_lo, x_hi, acc, WFMT: tl.constexpr, INTERP: tl.constexpr):
    """The tiled w4a16's step on one 64-element chunk: acc + (lo x scales) @ x_lo + (hi x scales) @ x_hi, with lo / hi
    the chunk's first / last 32 elements decoded to fp16 ([BN, 32]) and multiplied by their block scales, bytes
    ``j0``... of ``words`` (nvfp4: 2 blocks of 16 per half, mxfp4: 1 block of 32)."""
    lo, hi = _fp4_f16_pair(raw, INTERP)
    if WFMT == 3:
        BN: tl.constexpr = lo.shape[0]
        s_lo = tl.join(_fp4_scale_f16(words, j0, WFMT), _fp4_scale_f16(words, j0 + 1, WFMT))
        s_hi = tl.join(_fp4_scale_f16(words, j0 + 2, WFMT), _fp4_scale_f16(words, j0 + 3, WFMT))
        lo = tl.reshape(tl.reshape(lo, (BN, 2, 16)) * s_lo[:, :, None], (BN, 32))
        hi = tl.reshape(tl.reshape(hi, (BN, 2, 16)) * s_hi[:, :, None], (BN, 32))
    else:
        lo = lo * _fp4_scale_f16(words, j0, WFMT)[:, None]
        hi = hi * _fp4_scale_f16(words, j0 + 1, WFMT)[:, None]
    acc = _dot(lo, x_lo, acc, INTERP)
    return _dot(hi, x_hi, acc, INTERP)


@triton.jit
def _scaled_dot(w, x, s, acc, INTERP: tl.constexpr):
    """acc + (w @ x) * s[:, None]: one block-scaled fp8 MMA (K = 32, one scale block), its fp32 result scaled per
    weight row."""
    return acc + _dot(w, x, tl.zeros_like(acc), INTERP) * s[:, None]


@triton.jit
def _mma(acc, raw0, raw1, raw2, x0, x1, x2, x3, k0, unit, ws_ptr, e, offs_n, N: tl.constexpr, K: tl.constexpr,
         WFMT: tl.constexpr, BLOCK_K: tl.constexpr, INTERP: tl.constexpr, HOIST: tl.constexpr, ACT8: tl.constexpr,
         TILED: tl.constexpr, MMAL: tl.constexpr = False):
    """acc += W tile (raw0..raw2 of K step k0, from _load_raw) @ X tile (x0..x3 from _x_tiles). X is bf16 for bf16
    weights, e4m3 for fp8 weights with ACT8 (w8a8: an fp8 x fp8 MMA, no conversion), fp16 otherwise (dequantised
    weights are fp16). fp4 with ACT8 (w4a8; BLOCK_K = 64 nvfp4, 128 or 64 mxfp4: 4 or 2 scale blocks per step): e2m1 -> e4m3
    in registers (exact), one fp8 MMA of K = 32 per scale block, each fp32 result multiplied by its block scale and
    added (the scales never touch the fp8 values, so they stay exact). fp4 TILED with fp16 activations (the tiled
    w4a16): the same e4m3 decode, converted to fp16 (one cvt per 2 values) and multiplied by the block scale in fp16
    (exact: e2m1 x 2^-6 times an e4m3 or rebased e8m0 scale has at most 6 significant bits and stays within fp16's
    range, see _fp4_scale_f16), then fp16 MMAs: the scale costs one multiply per weight value whatever the token
    block (w4a8's per-block FFMAs grow with it). fp4 in the MMA layout (MMAL; fp16 or e4m3 activations): each
    64-element chunk decoded word by word into the MMA's registers and multiplied by its block scale in fp16
    (_moe_fp4_jit.mma_chunk_dot), fp16 MMAs."""
    if WFMT >= 3 and MMAL:
        acc = mma_chunk_dot(raw0, mma_scales(raw2, 0, WFMT, INTERP), x0, acc, INTERP)
        if BLOCK_K == 128:
            acc = mma_chunk_dot(raw1, mma_scales(raw2, 1, WFMT, INTERP), x1, acc, INTERP)
    elif WFMT >= 3 and TILED and not ACT8:
        # a 64-element chunk per call: nvfp4 4 blocks (scale bytes 0..3, then 4..7 for a 128-element step's second
        # chunk), mxfp4 2 blocks (bytes 0, 1, then 2, 3)
        acc = _chunk_f16_dot(raw0, raw2, 0, x0, x1, acc, WFMT, INTERP)
        if BLOCK_K == 128:
            acc = _chunk_f16_dot(raw1, raw2, 4 if WFMT == 3 else 2, x2, x3, acc, WFMT, INTERP)
    elif WFMT >= 3 and ACT8:
        # raw0 / raw1: the step's 64-element chunks (one for nvfp4), raw2: its 4 block scales per row (int32 word)
        lo_a, hi_a = _fp4_e4m3_pair(raw0, INTERP)
        if WFMT == 3:  # blocks 0, 1 = the low half against planes 0, 1; blocks 2, 3 = the high half
            w0, w1, w2, w3 = lo_a, lo_a, hi_a, hi_a
        elif BLOCK_K == 64:  # mxfp4 in 64-element steps: blocks 0, 1 = the low / high half
            w0, w1, w2, w3 = lo_a, hi_a, lo_a, hi_a
        else:  # blocks 0..3 = chunk a's low / high half, chunk b's low / high half
            lo_b, hi_b = _fp4_e4m3_pair(raw1, INTERP)
            w0, w1, w2, w3 = lo_a, hi_a, lo_b, hi_b
        FOUR: tl.constexpr = WFMT == 3 or BLOCK_K == 128  # 4 scale blocks per step (mxfp4 in 64-element steps: 2)
        if (ACT8 & 2) != 0:  # FusedMoE(drop_block_scales=True): block scales left out (timing only: the output is wrong)
            acc = _dot(w0, x0, acc, INTERP)
            acc = _dot(w1, x1, acc, INTERP)
            if FOUR:
                acc = _dot(w2, x2, acc, INTERP)
                acc = _dot(w3, x3, acc, INTERP)
        else:
            acc = _scaled_dot(w0, x0, _fp4_scale_f32(raw2, 0, WFMT), acc, INTERP)
            acc = _scaled_dot(w1, x1, _fp4_scale_f32(raw2, 1, WFMT), acc, INTERP)
            if FOUR:
                acc = _scaled_dot(w2, x2, _fp4_scale_f32(raw2, 2, WFMT), acc, INTERP)
                acc = _scaled_dot(w3, x3, _fp4_scale_f32(raw2, 3, WFMT), acc, INTERP)
    elif WFMT >= 3:
        w_lo, w_hi = _fp4_values(raw0, raw1, raw2, unit, WFMT, BLOCK_K, INTERP, HOIST)
        acc = _dot(w_lo, x0.to(tl.float16), acc, INTERP)
        acc = _dot(w_hi, x1.to(tl.float16), acc, INTERP)
    else:
        if WFMT == 0 or ACT8:
            w = raw0
        else:
            w = raw0.to(tl.float16)  # e4m3 -> fp16 is one cvt per 2 values on sm_90 (-> bf16 goes through fp32)
        if WFMT == 2:
            # 128 x 128 block scales: one fp32 scale per (row block, K block) of this K step
            s = tl.load(ws_ptr + (e * (N // 128) + offs_n // 128) * (K // 128) + k0 // 128)
            acc += _dot(w, x0.to(w.dtype), tl.zeros_like(acc), INTERP) * s[:, None]
        elif ACT8:
            acc = _dot_fp8(w, x0, acc, BLOCK_K, INTERP)
        else:
            acc = _dot(w, x0.to(w.dtype), acc, INTERP)
    return acc


@triton.jit
def _epilogue(acc, gscale, ws_ptr, e, offs_n, N: tl.constexpr, WFMT: tl.constexpr, ACT8: tl.constexpr, xs_ptr,
              rows, row_ok, TILED: tl.constexpr, XSCALE: tl.constexpr, MMAL: tl.constexpr = False):
    """Scales applied once after the K loop: fp8 per-channel scales; with ACT8 the per-row activation scales; fp4's
    2^8 (w4a16, see _fp4_scale) or 2^6 (w4a8, see _fp4_e4m3_pair) times the per-expert scale ``gscale`` (nvfp4's
    global scale; mxfp4's rebasing power of 2)."""
    if ACT8 or XSCALE:  # the activations' per-row scales (e4m3, or fp16 with a power of two)
        sx = tl.load(xs_ptr + rows, mask=row_ok, other=0.0)
        acc = acc * sx[None, :]
    if WFMT == 1:
        s = tl.load(ws_ptr + e * N + offs_n, mask=offs_n < N, other=0.0)
        acc = acc * s[:, None]
    if WFMT >= 3:
        # the MMA layout's decode gives value x 2^-14; the e4m3 decode's 2^-6 (w4a8, tiled w4a16); the untiled
        # w4a16: see _fp4_scale
        acc = acc * (gscale * (16384.0 if MMAL else 64.0 if ACT8 or TILED else 256.0))
    return acc


@triton.jit
def _acc_tiles(acc_a, acc_b, w_ptr, ws_ptr, wgs_ptr, e, offs_a, offs_b, x_ptr, rows, row_ok, stride_x, x_plane,
               N: tl.constexpr, K: tl.constexpr, stride_we, stride_wn, WFMT: tl.constexpr, BLOCK_K: tl.constexpr,
               INTERP: tl.constexpr, PREFETCH: tl.constexpr, TWO: tl.constexpr, HOIST: tl.constexpr,
               ACT8: tl.constexpr, xs_ptr, TILED: tl.constexpr = False, XSCALE: tl.constexpr = False,
               MMAL: tl.constexpr = False):
    """acc_a[BN, BM] += W_e[offs_a, :] @ X[rows, :]^T over all of K and, if TWO, acc_b likewise with rows offs_b of
    W_e (the up projection's rows beside the gate's): one K loop, so each activation tile is loaded once for both.

    PREFETCH: issue the next K step's weight loads before converting and multiplying the current one (register
    double buffering) instead of Triton's shared-memory pipelining."""
    gscale = 1.0
    unit = 64.0
    if WFMT >= 3:
        gscale = tl.load(wgs_ptr + e)  # the per-expert scale (epilogue)
        unit = gscale * 0.0 + 64.0  # 64, but a runtime value (see _fp4_scale)
    if PREFETCH:
        a0, a1, a2 = _load_raw(w_ptr, ws_ptr, e, offs_a, 0, N, K, stride_we, stride_wn, WFMT, BLOCK_K, TILED, MMAL)
        b0, b1, b2 = a0, a1, a2
        if TWO:
            b0, b1, b2 = _load_raw(w_ptr, ws_ptr, e, offs_b, 0, N, K, stride_we, stride_wn, WFMT, BLOCK_K, TILED, MMAL)
        for k0 in range(0, K, BLOCK_K):
            k_next = tl.minimum(k0 + BLOCK_K, K - BLOCK_K)
            na0, na1, na2 = _load_raw(w_ptr, ws_ptr, e, offs_a, k_next, N, K, stride_we, stride_wn, WFMT, BLOCK_K, TILED, MMAL)
            nb0, nb1, nb2 = na0, na1, na2
            if TWO:
                nb0, nb1, nb2 = _load_raw(w_ptr, ws_ptr, e, offs_b, k_next, N, K, stride_we, stride_wn, WFMT,
                                          BLOCK_K, TILED, MMAL)
            x0, x1, x2, x3 = _x_tiles(x_ptr, rows, row_ok, stride_x, k0, x_plane, WFMT, BLOCK_K, ACT8, TILED, MMAL)
            acc_a = _mma(acc_a, a0, a1, a2, x0, x1, x2, x3, k0, unit, ws_ptr, e, offs_a, N, K, WFMT, BLOCK_K, INTERP,
                             HOIST, ACT8, TILED, MMAL)
            if TWO:
                acc_b = _mma(acc_b, b0, b1, b2, x0, x1, x2, x3, k0, unit, ws_ptr, e, offs_b, N, K, WFMT, BLOCK_K, INTERP,
                             HOIST, ACT8, TILED, MMAL)
            a0, a1, a2 = na0, na1, na2
            b0, b1, b2 = nb0, nb1, nb2
    else:
        # w4a8: the scale words are loaded one step ahead in registers (Triton's pipeliner only prefetches loads that
        # feed a dot, and these feed the FFMAs after it: loaded in-step they stalled every step, seen in the SASS)
        SPRE: tl.constexpr = WFMT >= 3 and TILED
        sa = tl.zeros_like(offs_a)
        sb = sa
        if SPRE:
            sa = _scale_words(ws_ptr, e, offs_a, 0, N, K, BLOCK_K, WFMT)
            if TWO:
                sb = _scale_words(ws_ptr, e, offs_b, 0, N, K, BLOCK_K, WFMT)
        for k0 in range(0, K, BLOCK_K):
            a0, a1, a2 = _load_raw(w_ptr, ws_ptr, e, offs_a, k0, N, K, stride_we, stride_wn, WFMT, BLOCK_K, TILED, MMAL)
            if SPRE:
                k_next = tl.minimum(k0 + BLOCK_K, K - BLOCK_K)
                a2 = sa
                sa = _scale_words(ws_ptr, e, offs_a, k_next, N, K, BLOCK_K, WFMT)
            x0, x1, x2, x3 = _x_tiles(x_ptr, rows, row_ok, stride_x, k0, x_plane, WFMT, BLOCK_K, ACT8, TILED, MMAL)
            acc_a = _mma(acc_a, a0, a1, a2, x0, x1, x2, x3, k0, unit, ws_ptr, e, offs_a, N, K, WFMT, BLOCK_K, INTERP,
                         HOIST, ACT8, TILED, MMAL)
            if TWO:
                b0, b1, b2 = _load_raw(w_ptr, ws_ptr, e, offs_b, k0, N, K, stride_we, stride_wn, WFMT, BLOCK_K, TILED, MMAL)
                if SPRE:
                    b2 = sb
                    sb = _scale_words(ws_ptr, e, offs_b, tl.minimum(k0 + BLOCK_K, K - BLOCK_K), N, K, BLOCK_K,
                                      WFMT)
                acc_b = _mma(acc_b, b0, b1, b2, x0, x1, x2, x3, k0, unit, ws_ptr, e, offs_b, N, K, WFMT, BLOCK_K,
                             INTERP, HOIST, ACT8, TILED, MMAL)
    acc_a = _epilogue(acc_a, gscale, ws_ptr, e, offs_a, N, WFMT, ACT8, xs_ptr, rows, row_ok, TILED, XSCALE, MMAL)
    if TWO:
        acc_b = _epilogue(acc_b, gscale, ws_ptr, e, offs_b, N, WFMT, ACT8, xs_ptr, rows, row_ok, TILED, XSCALE, MMAL)
    return acc_a, acc_b


@triton.jit
def _gate_up_tile(tile, x_ptr, xs_ptr, w_ptr, ws_ptr, wgs_ptr, out_ptr, sorted_ptr, bexp_ptr, num_blocks, num_slots,
                  top_k, I: tl.constexpr, H: tl.constexpr, stride_x, stride_out, stride_we, stride_wn, x_plane,
                  WFMT: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
                  INTERP: tl.constexpr, PREFETCH: tl.constexpr, HOIST: tl.constexpr, ACT8: tl.constexpr,
                  TILED: tl.constexpr, XSCALE: tl.constexpr, MMAL: tl.constexpr, GROUP_M: tl.constexpr):
    e, slots, row_ok, rows, offs_n = block_of_one_expert(sorted_ptr, bexp_ptr, num_blocks, num_slots, top_k,
                                                         BLOCK_M, BLOCK_N, tile, tl.cdiv(I, BLOCK_N), GROUP_M)
    g = tl.zeros((BLOCK_N, BLOCK_M), dtype=tl.float32)
    u = tl.zeros((BLOCK_N, BLOCK_M), dtype=tl.float32)
    g, u = _acc_tiles(g, u, w_ptr, ws_ptr, wgs_ptr, e, offs_n, offs_n + I, x_ptr, rows, row_ok, stride_x, x_plane,
                      2 * I, H, stride_we, stride_wn, WFMT, BLOCK_K, INTERP, PREFETCH, True, HOIST,
                      ACT8, xs_ptr, TILED, XSCALE, MMAL)
    h = g / (1.0 + tl.exp(-g)) * u
    optr = out_ptr + slots[None, :].to(tl.int64) * stride_out + offs_n[:, None]
    tl.store(optr, h.to(out_ptr.dtype.element_ty), mask=row_ok[None, :] & (offs_n[:, None] < I))


@triton.jit
def gate_up_kernel(x_ptr, xs_ptr, w_ptr, ws_ptr, wgs_ptr, out_ptr, sorted_ptr, bexp_ptr,
                   num_blocks, num_slots, top_k, I: tl.constexpr, H: tl.constexpr, stride_x, stride_out, stride_we,
                   stride_wn, x_plane, num_programs,
                   WFMT: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
                   INTERP: tl.constexpr,
                   PREFETCH: tl.constexpr, HOIST: tl.constexpr = False, ACT8: tl.constexpr = False,
                   TILED: tl.constexpr = False, XSCALE: tl.constexpr = False, MMAL: tl.constexpr = False,
                   PERSIST: tl.constexpr = False, GROUP_M: tl.constexpr = 0):
    """out[slot, :I] = silu(x[row] @ W_gate^T) * (x[row] @ W_up^T) for every routed slot, one (token block, weight
    tile) per program, or, with PERSIST, ``num_programs`` programs each looping over tiles ``pid, pid +
    num_programs, ...`` as one flattened loop (Triton's ``tl.range(flatten=True)``), so the next tile's loads are
    issued while the current one's last K steps run. GROUP_M: the order of the tiles
    (:func:`~truepeak.kernels._moe_jit_common.block_of_one_expert`)."""
    if PERSIST:
        num_tiles = num_blocks * tl.cdiv(I, BLOCK_N)
        if INTERP:  # Triton 3.6's interpreter cannot take a program id as tl.range's start: the same tiles
            tile = tl.program_id(0)
            while tile < num_tiles:
                _gate_up_tile(tile, x_ptr, xs_ptr, w_ptr, ws_ptr, wgs_ptr, out_ptr, sorted_ptr, bexp_ptr,
                              num_blocks, num_slots, top_k, I, H, stride_x, stride_out, stride_we, stride_wn,
                              x_plane, WFMT, BLOCK_M, BLOCK_N, BLOCK_K, INTERP, PREFETCH, HOIST, ACT8, TILED,
                              XSCALE, MMAL, GROUP_M)
                tile += num_programs
        else:
            for tile in tl.range(tl.program_id(0), num_tiles, num_programs, flatten=True):
                _gate_up_tile(tile, x_ptr, xs_ptr, w_ptr, ws_ptr, wgs_ptr, out_ptr, sorted_ptr, bexp_ptr,
                              num_blocks, num_slots, top_k, I, H, stride_x, stride_out, stride_we, stride_wn,
                              x_plane, WFMT, BLOCK_M, BLOCK_N, BLOCK_K, INTERP, PREFETCH, HOIST, ACT8, TILED,
                              XSCALE, MMAL, GROUP_M)
    else:
        _gate_up_tile(tl.program_id(0), x_ptr, xs_ptr, w_ptr, ws_ptr, wgs_ptr, out_ptr, sorted_ptr, bexp_ptr,
                      num_blocks, num_slots, top_k, I, H, stride_x, stride_out, stride_we, stride_wn, x_plane, WFMT,
                      BLOCK_M, BLOCK_N, BLOCK_K, INTERP, PREFETCH, HOIST, ACT8, TILED, XSCALE, MMAL, GROUP_M)


@triton.jit
def _down_tile(tile, a_ptr, xs_ptr, w_ptr, ws_ptr, wgs_ptr, out_ptr, sorted_ptr, bexp_ptr, topw_ptr, num_blocks,
               num_slots, H: tl.constexpr, I: tl.constexpr, stride_a, stride_out, stride_we, stride_wn, x_plane,
               WFMT: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
               INTERP: tl.constexpr, PREFETCH: tl.constexpr, HOIST: tl.constexpr, ACT8: tl.constexpr,
               TILED: tl.constexpr, XSCALE: tl.constexpr, MMAL: tl.constexpr, GROUP_M: tl.constexpr):
    e, slots, row_ok, rows, offs_n = block_of_one_expert(sorted_ptr, bexp_ptr, num_blocks, num_slots, 1,
                                                         BLOCK_M, BLOCK_N, tile, tl.cdiv(H, BLOCK_N), GROUP_M)
    acc = tl.zeros((BLOCK_N, BLOCK_M), dtype=tl.float32)
    acc, _unused = _acc_tiles(acc, acc, w_ptr, ws_ptr, wgs_ptr, e, offs_n, offs_n, a_ptr, rows, row_ok, stride_a,
                              x_plane, H, I, stride_we, stride_wn, WFMT, BLOCK_K, INTERP, PREFETCH, False,
                              HOIST, ACT8, xs_ptr, TILED, XSCALE, MMAL)
    wt = tl.load(topw_ptr + rows, mask=row_ok, other=0.0)
    acc = acc * wt[None, :]
    optr = out_ptr + rows[None, :] * stride_out + offs_n[:, None]
    tl.store(optr, acc.to(out_ptr.dtype.element_ty), mask=row_ok[None, :] & (offs_n[:, None] < H))


@triton.jit
def down_kernel(a_ptr, xs_ptr, w_ptr, ws_ptr, wgs_ptr, out_ptr, sorted_ptr, bexp_ptr, topw_ptr,
                num_blocks, num_slots, H: tl.constexpr, I: tl.constexpr, stride_a, stride_out, stride_we, stride_wn,
                x_plane, num_programs,
                WFMT: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
                INTERP: tl.constexpr,
                PREFETCH: tl.constexpr, HOIST: tl.constexpr = False, ACT8: tl.constexpr = False,
                TILED: tl.constexpr = False, XSCALE: tl.constexpr = False, MMAL: tl.constexpr = False,
                PERSIST: tl.constexpr = False, GROUP_M: tl.constexpr = 0):
    """partial[slot, :] = topw[slot] * (inter[slot] @ W_down^T) for every routed slot; tiles and PERSIST as in
    :func:`gate_up_kernel`."""
    if PERSIST:
        num_tiles = num_blocks * tl.cdiv(H, BLOCK_N)
        if INTERP:  # Triton 3.6's interpreter cannot take a program id as tl.range's start: the same tiles
            tile = tl.program_id(0)
            while tile < num_tiles:
                _down_tile(tile, a_ptr, xs_ptr, w_ptr, ws_ptr, wgs_ptr, out_ptr, sorted_ptr, bexp_ptr, topw_ptr,
                           num_blocks, num_slots, H, I, stride_a, stride_out, stride_we, stride_wn, x_plane, WFMT,
                           BLOCK_M, BLOCK_N, BLOCK_K, INTERP, PREFETCH, HOIST, ACT8, TILED, XSCALE, MMAL, GROUP_M)
                tile += num_programs
        else:
            for tile in tl.range(tl.program_id(0), num_tiles, num_programs, flatten=True):
                _down_tile(tile, a_ptr, xs_ptr, w_ptr, ws_ptr, wgs_ptr, out_ptr, sorted_ptr, bexp_ptr, topw_ptr,
                           num_blocks, num_slots, H, I, stride_a, stride_out, stride_we, stride_wn, x_plane, WFMT,
                           BLOCK_M, BLOCK_N, BLOCK_K, INTERP, PREFETCH, HOIST, ACT8, TILED, XSCALE, MMAL, GROUP_M)
    else:
        _down_tile(tl.program_id(0), a_ptr, xs_ptr, w_ptr, ws_ptr, wgs_ptr, out_ptr, sorted_ptr, bexp_ptr, topw_ptr,
                   num_blocks, num_slots, H, I, stride_a, stride_out, stride_we, stride_wn, x_plane, WFMT, BLOCK_M,
                   BLOCK_N, BLOCK_K, INTERP, PREFETCH, HOIST, ACT8, TILED, XSCALE, MMAL, GROUP_M)


@triton.jit
def read_sum_kernel(x_ptr, out_ptr, n, per_program, BLOCK: tl.constexpr):
    """Read-only stream: program p sums x[p*per_program : (p+1)*per_program] (fp32) into out[p]."""
    pid = tl.program_id(0)
    start = pid.to(tl.int64) * per_program
    acc = tl.zeros((BLOCK,), dtype=tl.float32)
    for off in range(0, per_program, BLOCK):
        idx = start + off + tl.arange(0, BLOCK)
        acc += tl.load(x_ptr + idx, mask=idx < n, other=0.0)
    tl.store(out_ptr + pid, tl.sum(acc))
