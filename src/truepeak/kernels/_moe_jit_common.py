"""``@triton.jit`` helpers that both MoE kernel families inline: :mod:`truepeak.kernels._moe_jit` (the Hopper
fused-MoE kernels of :mod:`truepeak.kernels.moe_triton`) and :mod:`truepeak.kernels._moe_blockscaled_jit` (the
block-scaled kernels of :mod:`truepeak.kernels.moe_blockscaled`). Importing this module needs triton; the kernel
modules import it, and they are imported lazily."""

import triton
import triton.language as tl


@triton.jit
def block_of_one_expert(sorted_ptr, bexp_ptr, num_blocks, num_slots, ROW_DIV, BLOCK_M: tl.constexpr,
                        BLOCK_N: tl.constexpr, tile=None, num_n=1, GROUP_M: tl.constexpr = 0):
    """Tile ``tile`` (default: this program's id): the expert of its BLOCK_M-slot block, the slots (padded ones
    masked), the input row of each slot (slot // ROW_DIV: ROW_DIV = top_k reads token rows, 1 reads slot rows) and
    the BLOCK_N output columns. GROUP_M = 0: tiles run token block fastest, so the blocks of one expert are
    neighbours and read its weight tile from L2 together. GROUP_M = g > 0: groups of g token blocks, each group's
    ``g x num_n`` tiles (``num_n`` weight tiles per block) neighbours, token block fastest within the group (the
    grouped order of vLLM's ``fused_moe_kernel``); g = 1 runs one block's weight tiles back to back, so they share
    its activation tile in L2."""
    pid = tl.program_id(0) if tile is None else tile
    if GROUP_M == 0:
        pid_m = pid % num_blocks
        pid_n = pid // num_blocks
    else:
        per_group = GROUP_M * num_n
        first_m = (pid // per_group) * GROUP_M
        size_m = tl.minimum(num_blocks - first_m, GROUP_M)
        pid_m = first_m + (pid % per_group) % size_m
        pid_n = (pid % per_group) // size_m
    e = tl.load(bexp_ptr + pid_m).to(tl.int64)
    slots = tl.load(sorted_ptr + pid_m * BLOCK_M + tl.arange(0, BLOCK_M))
    row_ok = slots < num_slots
    rows = tl.where(row_ok, slots // ROW_DIV, 0).to(tl.int64)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    return e, slots, row_ok, rows, offs_n


@triton.jit
def row_amax(x_ptr, r, stride_x, n_cols: tl.constexpr, BLOCK: tl.constexpr):
    """Row r of x: (max |x|, whether it holds a NaN), read in BLOCK-column chunks (float32)."""
    amax = tl.zeros((BLOCK,), dtype=tl.float32)
    nans = tl.zeros((BLOCK,), dtype=tl.float32)
    for c0 in range(0, n_cols, BLOCK):
        offs = c0 + tl.arange(0, BLOCK)
        v = tl.load(x_ptr + r * stride_x + offs, mask=offs < n_cols, other=0.0).to(tl.float32)
        amax = tl.maximum(amax, tl.abs(v))
        nans = tl.maximum(nans, (v != v).to(tl.float32))
    return tl.max(amax), tl.max(nans) > 0


@triton.jit
def e8m0_f32(s8):
    """e8m0 bytes -> fp32 2^(s - 127): the byte as fp32's exponent field (0 gives 0); 255, e8m0's NaN, a quiet NaN
    (the exponent field alone would make it inf)."""
    s = s8.to(tl.int32)
    return ((s << 23) | ((s == 255).to(tl.int32) << 22)).to(tl.float32, bitcast=True)


@triton.jit
def e4m3_round_interp(v):
    """float32 values within e4m3's range rounded to e4m3's grid (nearest, ties to even, as the hardware's cvt.rn),
    still float32: Triton 3.6's interpreter rounds to e4m3 wrongly at binade edges (126.6 -> 64), so the kernels
    round with this before converting when they run there."""
    a = tl.abs(v)
    step = tl.exp2(tl.maximum(tl.floor(tl.log2(tl.maximum(a, 1e-30))), -6.0) - 3.0)  # e4m3: 3 mantissa bits
    t = a / step
    rn = tl.floor(t + 0.5)
    rn = tl.where((rn - t == 0.5) & (rn % 2 == 1), rn - 1.0, rn)
    return tl.where(v < 0, -1.0, 1.0) * rn * step
