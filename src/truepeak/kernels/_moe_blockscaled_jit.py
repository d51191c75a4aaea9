"""The ``@triton.jit`` kernels of :mod:`truepeak.kernels.moe_blockscaled` (imported lazily by it: importing this
module needs triton): the activation quantiser to MX / NVFP4 blocks and the two expert GEMMs on ``tl.dot_scaled``.
Documentation of the design, formats and what each device runs: :mod:`truepeak.kernels.moe_blockscaled`."""

import triton
import triton.language as tl

from truepeak.kernels._moe_jit_common import block_of_one_expert, e4m3_round_interp, e8m0_f32, row_amax

# Activation formats (the XFMT constexpr): e4m3 values with e8m0 scales per 32 (MXFP8), e2m1 with e8m0 per 32 (MXFP4),
# e2m1 with e4m3 per 16 and an fp32 scale per row (NVFP4).
MXFP8 = tl.constexpr(0)
MXFP4 = tl.constexpr(1)
NVFP4 = tl.constexpr(2)
# tl.dot_scaled's operand formats (constexpr globals: the interpreter passes literals through as plain strings)
E2M1 = tl.constexpr("e2m1")
E4M3 = tl.constexpr("e4m3")


@triton.jit
def _e2m1_codes(q):
    """float32 values already divided by their block scale -> e2m1 nibbles (int32 0..15): nearest, ties to even,
    saturating at 6 (the midpoints and tie directions of truepeak.kernels.quant.e2m1_encode)."""
    a = tl.abs(q)
    code = (a > 0.25).to(tl.int32) + (a >= 0.75).to(tl.int32) + (a > 1.25).to(tl.int32)
    code += (a >= 1.75).to(tl.int32) + (a > 2.5).to(tl.int32) + (a >= 3.5).to(tl.int32) + (a > 5.0).to(tl.int32)
    return code | tl.where(q < 0, 8, 0)


@triton.jit
def _pack_pairs(codes, N: tl.constexpr):
    """e2m1 codes [N] (int32) -> bytes [N // 2]: element 2i in the low nibble, 2i + 1 in the high one (the order
    truepeak.kernels.quant.pack_nibbles and tl.dot_scaled use)."""
    lo, hi = tl.split(tl.reshape(codes, (N // 2, 2)))
    return (lo | (hi << 4)).to(tl.uint8)


@triton.jit
def quant_rows_blockscaled_kernel(x_ptr, q_ptr, s_ptr, g_ptr, stride_x, stride_q, stride_s, n_cols: tl.constexpr,
                                  BLOCK: tl.constexpr, XFMT: tl.constexpr, INTERP: tl.constexpr = False):
    """Quantise row r = program r of ``x [R, n_cols]`` for ``tl.dot_scaled`` (n_cols a multiple of the block):

    - MXFP8 / MXFP4 (OCP MX v1.0 §6.3): per 32 values ``shared_exp = floor(log2(amax)) - emax`` (emax 8 for e4m3,
      2 for e2m1; clamped to [-127, 127]; an all-zero block -127), stored as the e8m0 byte ``shared_exp + 127`` in
      ``s [R, n_cols / 32]``; values ``x / 2^shared_exp`` rounded to e4m3 (saturating at 448) or e2m1 (at 6, packed
      two per byte) in ``q``. ``g[r] = 1``.
    - NVFP4 (NVIDIA's recipe with the per-tensor scale taken per row): ``g[r] = amax(row) / (448 * 6)`` (1 for a zero
      row), per 16 values the e4m3 scale ``s = e4m3(min(amax_block / 6 / g[r], 448))``, values
      ``e2m1(x / (s * g[r]))`` packed two per byte.

    The same values as :func:`truepeak.kernels.quant.quantize_mxfp8` / ``quantize_mxfp4`` / ``quantize_nvfp4`` (with
    ``global_scale`` = the row's ``g``); a block holding a NaN gets a NaN scale (e8m0 255; nvfp4: NaN ``g``). inf is
    not supported: its row comes out NaN from the GEMMs (the quant module, which does not support it either, saturates
    it instead)."""
    r = tl.program_id(0).to(tl.int64)
    G: tl.constexpr = 16 if XFMT == NVFP4 else 32
    NB: tl.constexpr = BLOCK // G
    g = 1.0
    if XFMT == NVFP4:  # the row's decode scale first
        m, has_nan = row_amax(x_ptr, r, stride_x, n_cols, BLOCK)
        g = tl.where(m > 0, m / 2688.0, 1.0)  # 2688 = 448 (e4m3's largest) * 6 (e2m1's)
        g = tl.where(has_nan, float("nan"), g)
    for c0 in range(0, n_cols, BLOCK):
        offs = c0 + tl.arange(0, BLOCK)
        v = tl.load(x_ptr + r * stride_x + offs, mask=offs < n_cols, other=0.0).to(tl.float32)
        b = tl.reshape(v, (NB, G))
        bamax = tl.max(tl.abs(b), axis=1)
        bnan = tl.max((b != b).to(tl.int32), axis=1) > 0
        if XFMT == NVFP4:
            sc = tl.minimum(bamax / 6.0 / g, 448.0)
            if INTERP:
                sc = e4m3_round_interp(sc)
            sc8 = sc.to(tl.float8e4nv)
            denom = sc8.to(tl.float32) * g
            q = tl.where(denom[:, None] > 0, b / tl.maximum(denom[:, None], 1.1754943508222875e-38), 0.0)
            q = tl.where(bnan[:, None], float("nan"), q)
            s_offs = c0 // G + tl.arange(0, NB)
            tl.store(s_ptr + r * stride_s + s_offs, sc8, mask=s_offs < n_cols // G)
        else:
            EMAX: tl.constexpr = 8 if XFMT == MXFP8 else 2
            # floor(log2(amax)) exactly from the float32 exponent field (0 for zero and subnormal amax: clamped to -127)
            fexp = ((bamax.to(tl.int32, bitcast=True) >> 23) & 0xFF) - 127
            sexp = tl.minimum(tl.maximum(fexp - EMAX, -127), 127)
            # 2^-shared_exp from its float32 bits: shared_exp <= 126 for any float32 amax, so 2^-shared_exp is normal
            inv = ((127 - sexp) << 23).to(tl.float32, bitcast=True)
            q = b * inv[:, None]
            s8 = tl.where(bnan, 255, sexp + 127).to(tl.uint8)
            s_offs = c0 // G + tl.arange(0, NB)
            tl.store(s_ptr + r * stride_s + s_offs, s8, mask=s_offs < n_cols // G)
        q = tl.reshape(q, (BLOCK,))
        if XFMT == MXFP8:
            q = tl.minimum(tl.maximum(q, -448.0, propagate_nan=tl.PropagateNan.ALL), 448.0,
                           propagate_nan=tl.PropagateNan.ALL)
            if INTERP:
                q = e4m3_round_interp(q)
            tl.store(q_ptr + r * stride_q + offs, q.to(tl.float8e4nv), mask=offs < n_cols)
        else:
            b_offs = c0 // 2 + tl.arange(0, BLOCK // 2)
            tl.store(q_ptr + r * stride_q + b_offs, _pack_pairs(_e2m1_codes(q), BLOCK), mask=b_offs < n_cols // 2)
    tl.store(g_ptr + r, g)


@triton.jit
def _e2m1_f32(c):
    """e2m1 nibbles (int32 0..15: sign bit 3, exponent bits 2..1, mantissa bit 0) -> float32 values."""
    m = c & 7
    ex = m >> 1
    mag = tl.where(ex == 0, 0.5 * (m & 1), tl.exp2((ex - 1).to(tl.float32)) * (1.0 + 0.5 * (m & 1)))
    return tl.where((c & 8) != 0, -mag, mag)


@triton.jit
def _fp4_rows_f32(packed, s, G: tl.constexpr, R: tl.constexpr, C: tl.constexpr):
    """Packed e2m1 rows ``[R, C/2]`` (element 2i in the low nibble) and their scales ``[R, C/G]`` (e4m3 for G = 16,
    e8m0 bytes for 32) -> float32 ``[R, C]``."""
    b = packed.to(tl.int32)
    v = tl.reshape(tl.join(_e2m1_f32(b & 15), _e2m1_f32(b >> 4)), (R, C // G, G))
    if G == 16:
        sf = s.to(tl.float16).to(tl.float32)  # through fp16: the interpreter's direct e4m3 -> fp32 cast is off
    else:
        sf = e8m0_f32(s)
    return tl.reshape(v * sf[:, :, None], (R, C))


@triton.jit
def _dot_scaled_interp(w, ws, x, xs, acc, WG: tl.constexpr, XFMT: tl.constexpr, BN: tl.constexpr,
                       BM: tl.constexpr, BK: tl.constexpr):
    """tl.dot_scaled(w, ws, "e2m1", x, xs, e2m1 or e4m3, acc) in float32 arithmetic, for Triton 3.6's interpreter
    (which has no dot_scaled): the operands dequantised, then an IEEE float32 dot."""
    wf = _fp4_rows_f32(w, ws, WG, BN, BK)
    XG: tl.constexpr = 16 if XFMT == NVFP4 else 32
    if XFMT == MXFP8:
        xf = tl.reshape(tl.trans(x).to(tl.float16).to(tl.float32), (BM, BK // XG, XG))
        xf = tl.reshape(xf * e8m0_f32(xs)[:, :, None], (BM, BK))
    else:
        xf = _fp4_rows_f32(tl.trans(x), xs, XG, BM, BK)
    return tl.dot(wf, tl.trans(xf), acc, input_precision="ieee")


@triton.jit
def _scaled_acc(acc, w_ptr, ws_ptr, e, offs, x_ptr, xs_ptr, rows, N, K: tl.constexpr, stride_we, stride_wn,
                stride_se, stride_sn, stride_x, stride_xs, WG: tl.constexpr, XFMT: tl.constexpr,
                BLOCK_M: tl.constexpr, R: tl.constexpr, BLOCK_K: tl.constexpr, INTERP: tl.constexpr):
    """acc += W_e[offs, :] @ X[rows, :]^T over K with ``tl.dot_scaled``: the weight tile ``[R, BK/2]`` e2m1 bytes
    with its scales ``[R, BK/WG]`` (e4m3 per 16 for nvfp4, e8m0 per 32 for mxfp4) is the left operand (swap AB: the
    tokens are the MMA's N), the activations ``[BK/2, BM]`` e2m1 or ``[BK, BM]`` e4m3 with scales ``[BM, BK/XG]`` the
    right one. One accumulator per program (Triton 3.6's sm_100 pipeline asserts on a loop with two tcgen05
    accumulators), so gate and up rows come as one tile."""
    XG: tl.constexpr = 16 if XFMT == NVFP4 else 32
    ok = offs < N
    w_rows = w_ptr + e * stride_we + offs[:, None].to(tl.int64) * stride_wn
    s_rows = ws_ptr + e * stride_se + offs[:, None].to(tl.int64) * stride_sn
    for k0 in range(0, K, BLOCK_K):
        kb = k0 // 2 + tl.arange(0, BLOCK_K // 2)
        ks = k0 // WG + tl.arange(0, BLOCK_K // WG)
        if XFMT == MXFP8:
            xk = k0 + tl.arange(0, BLOCK_K)
        else:
            xk = k0 // 2 + tl.arange(0, BLOCK_K // 2)
        xv = tl.load(x_ptr + rows[None, :] * stride_x + xk[:, None])
        xs = tl.load(xs_ptr + rows[:, None] * stride_xs + (k0 // XG + tl.arange(0, BLOCK_K // XG))[None, :])
        w = tl.load(w_rows + kb[None, :], mask=ok[:, None], other=0)
        s = tl.load(s_rows + ks[None, :], mask=ok[:, None], other=0.0)
        if INTERP:
            acc = _dot_scaled_interp(w, s, xv, xs, acc, WG, XFMT, R, BLOCK_M, BLOCK_K)
        elif XFMT == MXFP8:
            acc = tl.dot_scaled(w, s, E2M1, xv, xs, E4M3, acc)
        else:
            acc = tl.dot_scaled(w, s, E2M1, xv, xs, E2M1, acc)
    return acc


@triton.jit
def scaled_gate_up_kernel(x_ptr, xs_ptr, xg_ptr, w_ptr, ws_ptr, wgs_ptr, out_ptr, sorted_ptr, bexp_ptr,
                          num_blocks, num_slots, top_k, I: tl.constexpr, H: tl.constexpr, stride_x, stride_xs,
                          stride_out, stride_we, stride_wn, stride_se, stride_sn,
                          WG: tl.constexpr, XFMT: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                          BLOCK_K: tl.constexpr, INTERP: tl.constexpr = False):
    """out[slot, n] = silu(g) * u for the BLOCK_N gate rows n (and up rows n + I: one 2 * BLOCK_N-row tile) of one
    expert and the slots of one BLOCK_M block; g and u scaled by the expert's fp32 scale and the token row's
    activation scale."""
    e, slots, row_ok, rows, offs_n = block_of_one_expert(sorted_ptr, bexp_ptr, num_blocks, num_slots, top_k,
                                                         BLOCK_M, BLOCK_N)
    j = tl.arange(0, 2 * BLOCK_N)
    gate_row0 = tl.program_id(0) // num_blocks * BLOCK_N
    offs = tl.where(j < BLOCK_N, gate_row0 + j, I + gate_row0 + j - BLOCK_N)
    acc = tl.zeros((2 * BLOCK_N, BLOCK_M), dtype=tl.float32)
    acc = _scaled_acc(acc, w_ptr, ws_ptr, e, offs, x_ptr, xs_ptr, rows, 2 * I, H, stride_we, stride_wn, stride_se,
                      stride_sn, stride_x, stride_xs, WG, XFMT, BLOCK_M, 2 * BLOCK_N, BLOCK_K, INTERP)
    acc = acc * (tl.load(wgs_ptr + e) * tl.load(xg_ptr + rows))[None, :]
    g, u = tl.split(tl.permute(tl.reshape(acc, (2, BLOCK_N, BLOCK_M)), (1, 2, 0)))
    h = g / (1.0 + tl.exp(-g)) * u
    optr = out_ptr + slots[None, :].to(tl.int64) * stride_out + offs_n[:, None]
    tl.store(optr, h.to(out_ptr.dtype.element_ty), mask=row_ok[None, :] & (offs_n[:, None] < I))


@triton.jit
def scaled_down_kernel(a_ptr, as_ptr, ag_ptr, w_ptr, ws_ptr, wgs_ptr, out_ptr, sorted_ptr, bexp_ptr, topw_ptr,
                       num_blocks, num_slots, H: tl.constexpr, I: tl.constexpr, stride_a, stride_as, stride_out,
                       stride_we, stride_wn, stride_se, stride_sn,
                       WG: tl.constexpr, XFMT: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                       BLOCK_K: tl.constexpr, INTERP: tl.constexpr = False):
    """out[slot, n] = routing weight of the slot * (W2_e[n, :] @ intermediate[slot, :]) for BLOCK_N rows n of one
    expert and the slots of one BLOCK_M block."""
    e, slots, row_ok, rows, offs_n = block_of_one_expert(sorted_ptr, bexp_ptr, num_blocks, num_slots, 1,
                                                         BLOCK_M, BLOCK_N)
    acc = tl.zeros((BLOCK_N, BLOCK_M), dtype=tl.float32)
    acc = _scaled_acc(acc, w_ptr, ws_ptr, e, offs_n, a_ptr, as_ptr, rows, H, I, stride_we, stride_wn, stride_se,
                      stride_sn, stride_a, stride_as, WG, XFMT, BLOCK_M, BLOCK_N, BLOCK_K, INTERP)
    wt = tl.load(topw_ptr + rows, mask=row_ok, other=0.0) * tl.load(ag_ptr + rows)
    acc = acc * (tl.load(wgs_ptr + e) * wt)[None, :]
    optr = out_ptr + rows[None, :] * stride_out + offs_n[:, None]
    tl.store(optr, acc.to(out_ptr.dtype.element_ty), mask=row_ok[None, :] & (offs_n[:, None] < H))
