"""The w4a8 fp4 MoE kernels written in Gluon (Triton's lower-level language: explicit layouts, shared memory, async
copies and warpgroup MMAs), imported lazily by :mod:`truepeak.kernels.moe_triton` (needs triton >= 3.6 with
``triton.experimental.gluon``; Hopper, sm_90).

Why a second implementation of the same unit: in the ``tl.dot`` kernel (:mod:`truepeak.kernels._moe_jit`) each of a
step's per-scale-block fp8 MMAs is followed by a wait for its result, and the MMA's A operand (the decoded weights)
comes from registers; measured on the H200 that loop stays near 55 % of the read bandwidth even with the block
scales left out (``TRUEPEAK_MOE_EXPERIMENT_NOSCALE``), with 0.35-0.5 instructions issued per scheduler and cycle
(ncu). Here a step issues all its MMAs (2 tiles x 4 scale blocks) asynchronously and waits once, and the loads run
``STAGES - 1`` steps ahead through ``cp.async``, so the decode of one tile overlaps the MMAs of the other.

Layouts and formats are those of the ``tl.dot`` w4a8 path: weights ``[E, N, K/2]`` uint8 in 64-element nibble
chunks and the e4m3 bit layout (:func:`truepeak.kernels.moe_triton.to_e4m3_bit_layout`), block scales as step-major
int32 words ``[E, K/BK, N]`` (:meth:`~truepeak.kernels.moe_triton.ExpertWeights.w4a8_scale_words`), activations e4m3
per row (nvfp4: two planes, even / odd 16-element blocks). One program = ``BN`` weight rows (both the gate and the up
rows in the gate/up kernel) x ``BM`` (token, slot) rows of one expert.
"""

from triton.experimental import gluon
from triton.experimental.gluon import language as gl
from triton.experimental.gluon.language.nvidia.ampere import async_copy as cp
from triton.experimental.gluon.language.nvidia.hopper import fence_async_shared, warpgroup_mma, warpgroup_mma_wait

# the same bit moves as truepeak.kernels._moe_jit._ASM_E4M3 (4 bytes -> 4 + 4 e4m3 values, e2m1 x 2^-6)
_ASM_E4M3 = gl.constexpr(
    "{ .reg .b32 t, u; and.b32 $0, $2, 0x9C9C9C9C; shl.b32 t, $2, 2; shr.b32 u, $2, 2; "
    "and.b32 t, t, 0x8C8C8C8C; and.b32 u, u, 0x10101010; or.b32 $1, t, u; }")


@gluon.jit
def _decode(b):
    lo, hi = gl.inline_asm_elementwise(_ASM_E4M3, "=r,=r,r", [b], dtype=(gl.uint8, gl.uint8), is_pure=True, pack=4)
    return lo.to(gl.float8e4nv, bitcast=True), hi.to(gl.float8e4nv, bitcast=True)


@gluon.jit
def _scale(words, j: gl.constexpr, WFMT: gl.constexpr):
    """Byte j of each int32 scale word as an fp32 block scale: e4m3 (nvfp4) or 2^(e8m0 - 127) (mxfp4)."""
    s8 = (words >> (8 * j)) & 0xFF
    if WFMT == 3:
        return s8.to(gl.uint8).to(gl.float8e4nv, bitcast=True).to(gl.float32)
    else:
        return (s8 << 23).to(gl.float32, bitcast=True)


@gluon.jit
def _copy_x(x_smem, stage, b: gl.constexpr, k0, ok, x_ptr, xrows, xrow_ok, xcols, stride_x, x_plane,
            WFMT: gl.constexpr):
    if WFMT == 3:  # nvfp4: blocks 0, 1 = the first 32 elements in planes 0, 1; blocks 2, 3 the next 32
        off = (b % 2) * x_plane + (b // 2) * 32
    else:  # mxfp4: block b = elements 32b .. 32b + 31 of the step
        off = b * 32
    ptr = x_ptr + xrows[:, None] * stride_x + (k0 + off + xcols)[None, :]
    cp.async_copy_global_to_shared(x_smem.index(stage), ptr, mask=xrow_ok[:, None] & ok)


@gluon.jit
def _issue(wg_smem, wu_smem, x0_smem, x1_smem, x2_smem, x3_smem, stage, step, KS: gl.constexpr, w_base, wrow_a,
           wrow_b, wrow_ok,
           wcols, x_ptr, xrows, xrow_ok, xcols, stride_x, stride_wn, x_plane, WFMT: gl.constexpr, NT: gl.constexpr,
           NCH: gl.constexpr, BK: gl.constexpr):
    """cp.async the weight byte tiles and the 4 activation tiles of K step ``step`` into buffer ``stage`` (all
    masked off past the last step, so the prologue and the tail need no branches), as one commit group. Each tile
    kind has its own allocation (copies into slices of one allocation were separated by barriers)."""
    ok = step < KS
    k0 = step * BK
    TPR: gl.constexpr = (KS * BK // 64) * 2048  # bytes of one 64-row group
    for c in gl.static_range(NCH):  # the w4a8 layout: 2 KB tiles of 64 rows x 32 bytes (moe_triton.to_w4a8_layout)
        tile = (k0 // 64 + c) * 2048
        ptr = w_base + ((wrow_a // 64) * TPR + tile + (wrow_a % 64) * 32)[:, None] + wcols[None, :]
        cp.async_copy_global_to_shared(wg_smem.index(stage * NCH + c), ptr, mask=wrow_ok[:, None] & ok)
        if NT == 2:
            ptr = w_base + ((wrow_b // 64) * TPR + tile + (wrow_b % 64) * 32)[:, None] + wcols[None, :]
            cp.async_copy_global_to_shared(wu_smem.index(stage * NCH + c), ptr, mask=wrow_ok[:, None] & ok)
    _copy_x(x0_smem, stage, 0, k0, ok, x_ptr, xrows, xrow_ok, xcols, stride_x, x_plane, WFMT)
    _copy_x(x1_smem, stage, 1, k0, ok, x_ptr, xrows, xrow_ok, xcols, stride_x, x_plane, WFMT)
    _copy_x(x2_smem, stage, 2, k0, ok, x_ptr, xrows, xrow_ok, xcols, stride_x, x_plane, WFMT)
    _copy_x(x3_smem, stage, 3, k0, ok, x_ptr, xrows, xrow_ok, xcols, stride_x, x_plane, WFMT)
    cp.commit_group()


@gluon.jit
def _tile_mmas(w_smem, x0_smem, x1_smem, x2_smem, x3_smem, a_smem, t: gl.constexpr, stage, zero,
               a_layout: gl.constexpr, NCH: gl.constexpr, A_SMEM: gl.constexpr):
    """Decode one weight tile of the step (e2m1 -> e4m3 in the MMA operand's registers) and issue its 4 block MMAs
    asynchronously (fresh accumulators): returns the 4 pending results. A_SMEM: store the decoded tiles to shared
    memory (``a_smem`` [2 tiles x 4, BN, 32]) and let the MMAs read A from there."""
    lo_a, hi_a = _decode(w_smem.index(stage * NCH).load(a_layout))
    if NCH == 2:
        lo_b, hi_b = _decode(w_smem.index(stage * NCH + 1).load(a_layout))
        w0, w1, w2, w3 = lo_a, hi_a, lo_b, hi_b
    else:
        w0, w1, w2, w3 = lo_a, lo_a, hi_a, hi_a
    if A_SMEM:
        a_smem.index(4 * t + 0).store(w0)
        a_smem.index(4 * t + 1).store(w1)
        a_smem.index(4 * t + 2).store(w2)
        a_smem.index(4 * t + 3).store(w3)
        fence_async_shared()
        gl.thread_barrier()
        w0 = a_smem.index(4 * t + 0)
        w1 = a_smem.index(4 * t + 1)
        w2 = a_smem.index(4 * t + 2)
        w3 = a_smem.index(4 * t + 3)
    p0 = warpgroup_mma(w0, x0_smem.index(stage).permute((1, 0)), zero, use_acc=False, is_async=True)
    p1 = warpgroup_mma(w1, x1_smem.index(stage).permute((1, 0)), zero, use_acc=False, is_async=True)
    p2 = warpgroup_mma(w2, x2_smem.index(stage).permute((1, 0)), zero, use_acc=False, is_async=True)
    p3 = warpgroup_mma(w3, x3_smem.index(stage).permute((1, 0)), zero, use_acc=False, is_async=True)
    return p0, p1, p2, p3


@gluon.jit
def _accumulate(acc, p0, p1, p2, p3, words, WFMT: gl.constexpr):
    acc += p0 * _scale(words, 0, WFMT)[:, None]
    acc += p1 * _scale(words, 1, WFMT)[:, None]
    acc += p2 * _scale(words, 2, WFMT)[:, None]
    acc += p3 * _scale(words, 3, WFMT)[:, None]
    return acc


@gluon.jit
def w4a8_kernel(x_ptr, xs_ptr, w_ptr, ws_ptr, wgs_ptr, out_ptr, sorted_ptr, bexp_ptr, topw_ptr,
                num_blocks, num_slots, row_div, stride_x, stride_out, stride_we, stride_wn, x_plane,
                N_OUT: gl.constexpr, N_W: gl.constexpr, K: gl.constexpr, WFMT: gl.constexpr, GATED: gl.constexpr,
                BM: gl.constexpr, BN: gl.constexpr, BK: gl.constexpr, STAGES: gl.constexpr,
                num_warps: gl.constexpr, A_SMEM: gl.constexpr = False):
    """GATED: the gate/up kernel (weights [E, 2I, H]: gate rows n and up rows n + I, output silu(g) * u per (token,
    slot) row into ``out [T*k, I]``); otherwise the down kernel (weights [E, H, I], output times the routing weight
    per slot row into ``out [T*k, H]``). N_OUT: output columns (I or H), N_W: weight rows (2I or H), K: reduction
    length (H or I). ``row_div``: the activation row of a slot is slot // row_div (top_k: token rows; 1: slot rows).
    """
    NT: gl.constexpr = 2 if GATED else 1
    NCH: gl.constexpr = 2 if WFMT == 4 else 1  # 64-element nibble chunks per step
    KS: gl.constexpr = K // BK
    mma: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[num_warps, 1],
                                                  instr_shape=[16, BM, 32])
    a_layout: gl.constexpr = gl.DotOperandLayout(operand_index=0, parent=mma, k_width=4)
    ld: gl.constexpr = gl.BlockedLayout(size_per_thread=[1, 16], threads_per_warp=[16, 2],
                                        warps_per_cta=[num_warps, 1], order=[1, 0])  # weight bytes [BN, 32]
    ldx: gl.constexpr = gl.BlockedLayout(size_per_thread=[1, 4], threads_per_warp=[4, 8],
                                         warps_per_cta=[num_warps, 1], order=[1, 0])  # activations [BM, 32]
    sl: gl.constexpr = gl.NVMMASharedLayout(swizzle_byte_width=32, element_bitwidth=8, rank=2)
    rows_l: gl.constexpr = gl.SliceLayout(1, mma)
    cols_l: gl.constexpr = gl.SliceLayout(0, mma)

    pid = gl.program_id(0)
    pid_m = pid % num_blocks
    pid_n = pid // num_blocks
    e = gl.load(bexp_ptr + pid_m).to(gl.int64)
    # the block's slots, in the copy layout (activation rows) and in the accumulator's column layout (epilogue)
    xslots = gl.load(sorted_ptr + pid_m * BM + gl.arange(0, BM, layout=gl.SliceLayout(1, ldx)))
    xrow_ok = xslots < num_slots
    xrows = gl.where(xrow_ok, xslots // row_div, 0).to(gl.int64)
    xcols = gl.arange(0, 32, layout=gl.SliceLayout(0, ldx))
    wcols = gl.arange(0, 32, layout=gl.SliceLayout(0, ld))
    wr = pid_n * BN + gl.arange(0, BN, layout=gl.SliceLayout(1, ld))
    wrow_ok = wr < N_OUT
    w_base = w_ptr + e * stride_we

    wg_smem = gl.allocate_shared_memory(gl.uint8, [STAGES * NCH, BN, 32], sl)
    wu_smem = wg_smem
    if GATED:
        wu_smem = gl.allocate_shared_memory(gl.uint8, [STAGES * NCH, BN, 32], sl)
    x0_smem = gl.allocate_shared_memory(gl.float8e4nv, [STAGES, BM, 32], sl)
    x1_smem = gl.allocate_shared_memory(gl.float8e4nv, [STAGES, BM, 32], sl)
    x2_smem = gl.allocate_shared_memory(gl.float8e4nv, [STAGES, BM, 32], sl)
    x3_smem = gl.allocate_shared_memory(gl.float8e4nv, [STAGES, BM, 32], sl)
    a_smem = x3_smem
    if A_SMEM:
        a_smem = gl.allocate_shared_memory(gl.float8e4nv, [NT * 4, BN, 32], sl)

    offs_n = pid_n * BN + gl.arange(0, BN, layout=rows_l)
    n_ok = offs_n < N_OUT
    ws_base = ws_ptr + e * KS * N_W
    zero = gl.zeros([BN, BM], gl.float32, layout=mma)
    acc_g = gl.zeros([BN, BM], gl.float32, layout=mma)
    acc_u = gl.zeros([BN, BM], gl.float32, layout=mma)

    for s in gl.static_range(STAGES - 1):  # prologue: steps 0 .. STAGES-2 in flight
        _issue(wg_smem, wu_smem, x0_smem, x1_smem, x2_smem, x3_smem, s, s, KS, w_base, wr, wr + N_OUT, wrow_ok,
               wcols, x_ptr, xrows, xrow_ok, xcols, stride_x, stride_wn, x_plane, WFMT, NT, NCH, BK)
    words_g = gl.load(ws_base + offs_n, mask=n_ok, other=0)
    words_u = words_g
    if GATED:
        words_u = gl.load(ws_base + offs_n + N_OUT, mask=n_ok, other=0)
    for s in range(KS):
        stage = s % STAGES
        cp.wait_group(STAGES - 2)  # step s has landed (this thread's copies) ...
        fence_async_shared()  # ... and is visible to the MMAs' async proxy
        gl.thread_barrier()  # every thread's copies; and nobody still reads the buffer refilled next
        nxt = s + STAGES - 1
        _issue(wg_smem, wu_smem, x0_smem, x1_smem, x2_smem, x3_smem, nxt % STAGES, nxt, KS, w_base, wr,
               wr + N_OUT, wrow_ok, wcols, x_ptr, xrows, xrow_ok, xcols, stride_x, stride_wn, x_plane, WFMT, NT, NCH,
               BK)
        # the next step's scale words (registers, one step ahead)
        s_next = gl.minimum(s + 1, KS - 1)
        nwords_g = gl.load(ws_base + s_next * N_W + offs_n, mask=n_ok, other=0)
        nwords_u = nwords_g
        if GATED:
            nwords_u = gl.load(ws_base + s_next * N_W + offs_n + N_OUT, mask=n_ok, other=0)
        g0, g1, g2, g3 = _tile_mmas(wg_smem, x0_smem, x1_smem, x2_smem, x3_smem, a_smem, 0, stage, zero, a_layout,
                                    NCH, A_SMEM)
        if GATED:
            u0, u1, u2, u3 = _tile_mmas(wu_smem, x0_smem, x1_smem, x2_smem, x3_smem, a_smem, 1, stage, zero,
                                        a_layout, NCH, A_SMEM)
            g0, g1, g2, g3, u0, u1, u2, u3 = warpgroup_mma_wait(0, deps=(g0, g1, g2, g3, u0, u1, u2, u3))
            acc_u = _accumulate(acc_u, u0, u1, u2, u3, words_u, WFMT)
        else:
            g0, g1, g2, g3 = warpgroup_mma_wait(0, deps=(g0, g1, g2, g3))
        acc_g = _accumulate(acc_g, g0, g1, g2, g3, words_g, WFMT)
        words_g = nwords_g
        words_u = nwords_u
    cp.wait_group(0)

    # epilogue: activation row scales, the decode's 2^6 and the per-expert scale
    slots = gl.load(sorted_ptr + pid_m * BM + gl.arange(0, BM, layout=cols_l))
    row_ok = slots < num_slots
    rows = gl.where(row_ok, slots // row_div, 0).to(gl.int64)
    f = gl.load(xs_ptr + rows, mask=row_ok, other=0.0) * (gl.load(wgs_ptr + e) * 64.0)
    acc_g = acc_g * f[None, :]
    if GATED:
        acc_u = acc_u * f[None, :]
        h = acc_g / (1.0 + gl.exp(-acc_g)) * acc_u
        optr = out_ptr + slots[None, :].to(gl.int64) * stride_out + offs_n[:, None]
    else:
        h = acc_g * gl.load(topw_ptr + rows, mask=row_ok, other=0.0)[None, :]
        optr = out_ptr + rows[None, :] * stride_out + offs_n[:, None]
    gl.store(optr, h.to(out_ptr.dtype.element_ty), mask=row_ok[None, :] & n_ok[:, None])
