"""The ``@triton.jit`` kernels of :mod:`truepeak.kernels.moe_triton` (imported lazily by it: importing this module
needs triton). Triton resolves a jitted function's callees through its module globals, so they live at module level
here. Documentation of the design, layouts and formats: :mod:`truepeak.kernels.moe_triton`."""

import triton
import triton.language as tl


@triton.jit
def _fp4_to_f16(c):
    # e2m1 nibble (sign bit 3, exponent bits 2..1, mantissa bit 0) -> fp16 bits with the same exponent/mantissa
    # placed at fp16's exponent lsbs / mantissa msb: value * 2^-14 (subnormal fp16 for code 1 = 0.5 * 2^-14).
    c16 = c.to(tl.int16)
    bits = ((c16 & 7) << 9) | ((c16 & 8) << 12)
    return bits.to(tl.float16, bitcast=True)

@triton.jit
def _load_raw(w_ptr, ws_ptr, e, offs_n, k0, N: tl.constexpr, K: tl.constexpr, stride_we, stride_wn,
              WFMT: tl.constexpr, BLOCK_K: tl.constexpr):
    """The stored weight tile of K step ``k0``: (packed bytes [BN, BK/2], scales [BN, BK/16 or BK/32]) for fp4,
    (values [BN, BK], values) otherwise. Only loads: the caller may issue it one step ahead (register prefetch)."""
    if WFMT >= 3:
        offs_b = k0 // 2 + tl.arange(0, BLOCK_K // 2)
        b = tl.load(w_ptr + e * stride_we + offs_n[:, None] * stride_wn + offs_b[None, :],
                    mask=offs_n[:, None] < N, other=0)
        if WFMT == 3:
            offs_s = k0 // 16 + tl.arange(0, BLOCK_K // 16)
            s8 = tl.load(ws_ptr + (e * N + offs_n[:, None]) * (K // 16) + offs_s[None, :],
                         mask=offs_n[:, None] < N, other=0.0)
        else:
            offs_s = k0 // 32 + tl.arange(0, BLOCK_K // 32)
            s8 = tl.load(ws_ptr + (e * N + offs_n[:, None]) * (K // 32) + offs_s[None, :],
                         mask=offs_n[:, None] < N, other=127)
        return b, s8
    else:
        offs_k = k0 + tl.arange(0, BLOCK_K)
        w = tl.load(w_ptr + e * stride_we + offs_n[:, None] * stride_wn + offs_k[None, :],
                    mask=offs_n[:, None] < N, other=0.0)
        return w, w


@triton.jit
def _fp4_values(b, s8, gscale, WFMT: tl.constexpr, BLOCK_K: tl.constexpr):
    """(lo, hi) fp16 [BN, BK/2]: even / odd K elements times their block scale."""
    if WFMT == 3:
        # one e4m3 scale per 16 values = per 8 packed bytes, broadcast over the 8 bytes
        s = (s8.to(tl.float32) * (gscale * 16384.0)).to(tl.float16)
        GROUP: tl.constexpr = 8
    else:
        s = tl.exp2(s8.to(tl.float32) - 113.0).to(tl.float16)  # 2^(s - 127) * 2^14
        GROUP: tl.constexpr = 16
    BN: tl.constexpr = b.shape[0]
    lo = tl.reshape(tl.reshape(_fp4_to_f16(b & 15), (BN, BLOCK_K // 2 // GROUP, GROUP)) * s[:, :, None],
                    (BN, BLOCK_K // 2))
    hi = tl.reshape(tl.reshape(_fp4_to_f16(b >> 4), (BN, BLOCK_K // 2 // GROUP, GROUP)) * s[:, :, None],
                    (BN, BLOCK_K // 2))
    return lo, hi


@triton.jit
def _dot(a, b, acc, INTERP: tl.constexpr):
    # Triton 3.6's CPU interpreter computes bf16 dots wrongly (garbage); it gets fp32 operands there.
    if INTERP:
        return tl.dot(a.to(tl.float32), b.to(tl.float32), acc)
    else:
        return tl.dot(a, b, acc)


@triton.jit
def _step(acc, raw0, raw1, k0, gscale, ws_ptr, e, offs_n, x_ptr, rows, row_ok, stride_x, N: tl.constexpr,
          K: tl.constexpr, WFMT: tl.constexpr, BLOCK_K: tl.constexpr, INTERP: tl.constexpr):
    """acc += W tile (raw0, raw1 of K step k0) @ X[rows, k0:k0+BK]^T."""
    if WFMT >= 3:
        w_lo, w_hi = _fp4_values(raw0, raw1, gscale, WFMT, BLOCK_K)
        offs_e = k0 + 2 * tl.arange(0, BLOCK_K // 2)
        xe = tl.load(x_ptr + rows[None, :] * stride_x + offs_e[:, None], mask=row_ok[None, :], other=0.0)
        xo = tl.load(x_ptr + rows[None, :] * stride_x + offs_e[:, None] + 1, mask=row_ok[None, :], other=0.0)
        acc = _dot(w_lo, xe.to(tl.float16), acc, INTERP)
        acc = _dot(w_hi, xo.to(tl.float16), acc, INTERP)
    else:
        w = raw0.to(tl.bfloat16)
        offs_k = k0 + tl.arange(0, BLOCK_K)
        x = tl.load(x_ptr + rows[None, :] * stride_x + offs_k[:, None], mask=row_ok[None, :], other=0.0)
        if WFMT == 2:
            # 128 x 128 block scales: one fp32 scale per (row block, K block) of this K step
            s = tl.load(ws_ptr + (e * (N // 128) + offs_n // 128) * (K // 128) + k0 // 128)
            acc += _dot(w, x.to(tl.bfloat16), tl.zeros_like(acc), INTERP) * s[:, None]
        else:
            acc = _dot(w, x.to(tl.bfloat16), acc, INTERP)
    return acc


@triton.jit
def _acc_tile(acc, w_ptr, ws_ptr, wgs_ptr, e, offs_n, x_ptr, rows, row_ok, stride_x, N: tl.constexpr,
              K: tl.constexpr, stride_we, stride_wn, WFMT: tl.constexpr, BLOCK_M: tl.constexpr,
              BLOCK_K: tl.constexpr, INTERP: tl.constexpr, PREFETCH: tl.constexpr):
    """acc[BLOCK_N, BLOCK_M] += W_e[offs_n, :] @ X[rows, :]^T over all of K.

    PREFETCH: issue the next K step's weight loads before converting and multiplying the current one (register
    double buffering), for formats whose loads Triton's pipeliner does not overlap (dequantised in registers)."""
    gscale = 1.0
    if WFMT == 3:
        gscale = tl.load(wgs_ptr + e)
    if PREFETCH:
        r0, r1 = _load_raw(w_ptr, ws_ptr, e, offs_n, 0, N, K, stride_we, stride_wn, WFMT, BLOCK_K)
        for k0 in range(0, K, BLOCK_K):
            k_next = tl.minimum(k0 + BLOCK_K, K - BLOCK_K)
            n0, n1 = _load_raw(w_ptr, ws_ptr, e, offs_n, k_next, N, K, stride_we, stride_wn, WFMT, BLOCK_K)
            acc = _step(acc, r0, r1, k0, gscale, ws_ptr, e, offs_n, x_ptr, rows, row_ok, stride_x, N, K, WFMT,
                        BLOCK_K, INTERP)
            r0 = n0
            r1 = n1
    else:
        for k0 in range(0, K, BLOCK_K):
            r0, r1 = _load_raw(w_ptr, ws_ptr, e, offs_n, k0, N, K, stride_we, stride_wn, WFMT, BLOCK_K)
            acc = _step(acc, r0, r1, k0, gscale, ws_ptr, e, offs_n, x_ptr, rows, row_ok, stride_x, N, K, WFMT,
                        BLOCK_K, INTERP)
    if WFMT == 1:
        s = tl.load(ws_ptr + e * N + offs_n, mask=offs_n < N, other=0.0)
        acc = acc * s[:, None]
    return acc


@triton.jit
def _block_of_one_expert(sorted_ptr, bexp_ptr, num_blocks, num_slots, ROW_DIV, BLOCK_M: tl.constexpr,
                         BLOCK_N: tl.constexpr):
    """This program's tile: the expert of its BLOCK_M-slot block, the slots (padded ones masked), the input row of
    each slot (slot // ROW_DIV: ROW_DIV = top_k reads token rows, 1 reads slot rows) and the BLOCK_N output columns."""
    pid = tl.program_id(0)
    pid_m = pid % num_blocks
    pid_n = pid // num_blocks
    e = tl.load(bexp_ptr + pid_m).to(tl.int64)
    slots = tl.load(sorted_ptr + pid_m * BLOCK_M + tl.arange(0, BLOCK_M))
    row_ok = slots < num_slots
    rows = tl.where(row_ok, slots // ROW_DIV, 0).to(tl.int64)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    return e, slots, row_ok, rows, offs_n


@triton.jit
def gate_up_kernel(x_ptr, w_ptr, ws_ptr, wgs_ptr, out_ptr, sorted_ptr, bexp_ptr,
                   num_blocks, num_slots, top_k, I: tl.constexpr, H: tl.constexpr, stride_x, stride_out, stride_we,
                   stride_wn,
                   WFMT: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
                  INTERP: tl.constexpr,
                  PREFETCH: tl.constexpr):
    e, slots, row_ok, rows, offs_n = _block_of_one_expert(sorted_ptr, bexp_ptr, num_blocks, num_slots, top_k,
                                                          BLOCK_M, BLOCK_N)
    g = tl.zeros((BLOCK_N, BLOCK_M), dtype=tl.float32)
    u = tl.zeros((BLOCK_N, BLOCK_M), dtype=tl.float32)
    g = _acc_tile(g, w_ptr, ws_ptr, wgs_ptr, e, offs_n, x_ptr, rows, row_ok, stride_x, 2 * I, H,
                  stride_we, stride_wn, WFMT, BLOCK_M, BLOCK_K, INTERP, PREFETCH)
    u = _acc_tile(u, w_ptr, ws_ptr, wgs_ptr, e, offs_n + I, x_ptr, rows, row_ok, stride_x, 2 * I, H,
                  stride_we, stride_wn, WFMT, BLOCK_M, BLOCK_K, INTERP, PREFETCH)
    h = g / (1.0 + tl.exp(-g)) * u
    optr = out_ptr + slots[None, :].to(tl.int64) * stride_out + offs_n[:, None]
    tl.store(optr, h.to(out_ptr.dtype.element_ty), mask=row_ok[None, :] & (offs_n[:, None] < I))

@triton.jit
def down_kernel(a_ptr, w_ptr, ws_ptr, wgs_ptr, out_ptr, sorted_ptr, bexp_ptr, topw_ptr,
                num_blocks, num_slots, H: tl.constexpr, I: tl.constexpr, stride_a, stride_out, stride_we, stride_wn,
                WFMT: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
                  INTERP: tl.constexpr,
                  PREFETCH: tl.constexpr):
    e, slots, row_ok, rows, offs_n = _block_of_one_expert(sorted_ptr, bexp_ptr, num_blocks, num_slots, 1,
                                                          BLOCK_M, BLOCK_N)
    acc = tl.zeros((BLOCK_N, BLOCK_M), dtype=tl.float32)
    acc = _acc_tile(acc, w_ptr, ws_ptr, wgs_ptr, e, offs_n, a_ptr, rows, row_ok, stride_a, H, I,
                    stride_we, stride_wn, WFMT, BLOCK_M, BLOCK_K, INTERP, PREFETCH)
    wt = tl.load(topw_ptr + rows, mask=row_ok, other=0.0)
    acc = acc * wt[None, :]
    optr = out_ptr + rows[None, :] * stride_out + offs_n[:, None]
    tl.store(optr, acc.to(out_ptr.dtype.element_ty), mask=row_ok[None, :] & (offs_n[:, None] < H))


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
