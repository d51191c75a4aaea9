"""The ``@triton.jit`` activation quantiser of :mod:`truepeak.kernels.moe_triton`: per-row e4m3 (w8a8, w4a8) or
power-of-two fp16 (w8a16, w4a16) scales, computed inside the fused-MoE call before the gate/up GEMM. Imported lazily
(importing this module needs triton)."""

import triton
import triton.language as tl

from truepeak.kernels._moe_jit_common import e4m3_round_interp, row_amax


@triton.jit
def quant_rows_kernel(x_ptr, q_ptr, s_ptr, stride_x, stride_q, q_plane, n_cols: tl.constexpr, BLOCK: tl.constexpr,
                      INTERP: tl.constexpr = False, SPLIT16: tl.constexpr = False, F16: tl.constexpr = False,
                      PERM: tl.constexpr = False, rows_ptr=None, ROWS: tl.constexpr = False):
    """Dynamic per-row e4m3 quantisation (program r = row r): s[r] = max(max|x[r, :]|, 1e-12) / 448 (fp32) and
    q[r, :] = x[r, :] / s[r] rounded to e4m3 (448 = e4m3's largest finite value: OCP OFP8 spec). The same scales as
    the bench's torch w8a8 backend. SPLIT16 (the nvfp4 w4a8 kernel's activations): two planes ``q_plane`` elements
    apart, plane 0 with the odd 16-element blocks of each row zeroed and plane 1 with the even ones. F16 (the w8a16 /
    w4a16 kernels' activations): fp16 with s[r] = 2^(ceil(log2 max|x[r, :]|) - 14), a power of two (exact), so the
    row's largest magnitude lands in (2^13, 2^14]: no fp16 overflow (65,504) and fp16's normal range below it.
    PERM (the fp4 MMA layout's kernel): each 64-element chunk stored in moe_triton.mma_logical_order's K order
    (element 16c + 4s + 2i1 + i0 at position i0 + 2c + 8i1 + 16s). ROWS: program p quantises row ``rows[p]`` (int32)
    instead of row p (the rows of one launch's slots)."""
    r = tl.program_id(0).to(tl.int64)
    if ROWS:
        r = tl.load(rows_ptr + r).to(tl.int64)
    amax, has_nan = row_amax(x_ptr, r, stride_x, n_cols, BLOCK)
    # a row holding a NaN gets a NaN scale and NaN values (max and clamps would otherwise drop the NaN, and the row
    # would come out finite and wrong)
    if F16:
        scale = tl.exp2(tl.ceil(tl.log2(tl.maximum(amax, 1e-30))) - 14.0)
    else:
        scale = tl.maximum(amax, 1e-12) / 448.0
    scale = tl.where(has_nan, float("nan"), scale)
    for c0 in range(0, n_cols, BLOCK):
        offs = c0 + tl.arange(0, BLOCK)
        v = tl.load(x_ptr + r * stride_x + offs, mask=offs < n_cols, other=0.0).to(tl.float32)
        if F16:  # a power of two: exact, and the row's largest magnitude is at most 2^14
            qv = v / scale
        else:  # clamped: v / scale can round just above 448 for the row's largest element
            qv = tl.minimum(tl.maximum(v / scale, -448.0, propagate_nan=tl.PropagateNan.ALL), 448.0,
                            propagate_nan=tl.PropagateNan.ALL)
        if INTERP and not F16:
            qv = e4m3_round_interp(qv)
        if SPLIT16:
            odd = (offs // 16) % 2 == 1
            tl.store(q_ptr + r * stride_q + offs, tl.where(odd, 0.0, qv).to(q_ptr.dtype.element_ty),
                     mask=offs < n_cols)
            tl.store(q_ptr + q_plane + r * stride_q + offs, tl.where(odd, qv, 0.0).to(q_ptr.dtype.element_ty),
                     mask=offs < n_cols)
        elif PERM:
            j = offs % 64
            dst = offs - j + (j & 1) + ((j >> 4) << 1) + (((j >> 1) & 1) << 3) + (((j >> 2) & 3) << 4)
            tl.store(q_ptr + r * stride_q + dst, qv.to(q_ptr.dtype.element_ty), mask=offs < n_cols)
        else:
            tl.store(q_ptr + r * stride_q + offs, qv.to(q_ptr.dtype.element_ty), mask=offs < n_cols)
    tl.store(s_ptr + r, scale)
