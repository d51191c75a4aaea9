"""truepeak's fused-MoE Triton kernels for decode: stream each active expert's weights once.

Measured on an H200 (docs/results/h200/moe/README.md, stop 14; % of the read bandwidth measured in the same run, all
256 experts on one GPU, uniform and power-law routing): bf16 93-100 % at <= 8 tokens per expert, 79-93 % at 16-32;
fp8 weights with fp8 activations (w8a8) 94-99 % at <= 4, 90-95 % at 8, 76-87 % at 16-32; mxfp4 with fp8 activations
(w4a8) 81-90 % at <= 8 with uniform routing (66-83 % power law); nvfp4 with fp16 activations (the tiled w4a16)
57-63 % (45-59 %). The fastest of the benchmark's backends at every point up to 32 tokens per expert for bf16 and fp8
(torch has no fp4 path on Hopper).

The unit of work (issue #5): hidden states ``x [T, H]`` and router output (``topk_ids``, ``topk_weights`` ``[T, k]``)
→ ``out [T, H] = Σ_j w[t, j] · down_e(act(gate_up_e(x[t])))`` with ``e = topk_ids[t, j]`` and the SiLU-gated
activation ``act(g, u) = silu(g) · u`` (DeepSeek-V3, GLM-5, Qwen3; gpt-oss's clamped SwiGLU with alpha = 1.702 and
limit 7 is *not* implemented: its cost is the same elementwise work, the benchmark runs SiLU-gated for every model).

Design (why it reaches the weight-streaming roofline at a few tokens per expert):

- Routing metadata is computed once per routing, on the host side of the timed region, by :func:`align_routing`:
  the (token, slot) pairs sorted by expert and padded to ``block_m`` rows per block, one expert per block (vLLM's
  ``moe_align_block_size`` layout). ``block_m`` is chosen from the *tokens per expert* (docs/method.md, 'Padding per
  expert'), not the batch, so that at ≤ 32 tokens per expert almost every active expert is one block: its weights are
  read once.
- Each program computes a ``block_n x block_m`` tile of one expert's output with the **weights as the MMA's A
  operand** ("swap AB"): the weight tile ``[block_n, block_k]`` is the big operand, the few tokens are the MMA's N
  (16..128), so no MMA rows are wasted on padding tokens and the weights can be dequantised in registers.
- Programs are ordered M-block-fastest: the M blocks of one expert that has more tokens than ``block_m`` run next to
  each other and share its weight tile through L2.
- Kernel 1 computes gate and up tiles in one K loop (two accumulators; each activation tile is loaded once for both)
  and writes ``silu(g) · u`` per (token, slot) row; kernel 2 is the down projection, scaled by the routing weight,
  written per (token, slot) row; the ``k`` rows of a token are summed by one ``sum`` (the combine).
- Weight formats (``wfmt``): ``bf16``; ``fp8`` (e4m3, per-channel fp32 scales, applied to the accumulator once);
  ``fp8_block`` (128 x 128 fp32 block scales, applied per K step of at most 128); ``nvfp4`` (e2m1 packed two per byte,
  e4m3 scale per 16 and a per-expert fp32 scale) and ``mxfp4`` (e2m1, e8m0 scale per 32).
- fp8 weights run **w8a8** by default: x and the intermediate are quantised per row to e4m3 (scale max|row| / 448)
  by :func:`truepeak.kernels._moe_jit.quant_rows_kernel` inside the call, the MMA is fp8 x fp8 fed from shared
  memory like bf16, with the tensor core's partial sums added into fp32 every 128 products (Hopper's fp8 MMA
  accumulates with limited precision: DeepSeek-V3 report §3.3.2). ``activations="fp16"`` gives w8a16 (e4m3 → fp16
  in registers, one cvt per 2 values).
- FP4 weights are repacked once (:func:`to_w4a8_layout`: 64-element nibble chunks, a bit permutation that makes
  e2m1 → e4m3 5 integer instructions per 8 values, and 64-row x 64-element tiles of 2 KB stored contiguously; the
  block scales as one int32 word per row and 64- or 128-element step, :meth:`ExpertWeights.w4a8_scale_words`). The
  2 KB tiles matter most: with rows 3.5 KB apart the kernels stayed near 50 % (docs/results/h200/moe/README.md).
  Two kernels read them; :func:`default_activations` picks the faster one measured per format:
- **w4a8** (``activations="fp8"``, mxfp4's default): the activations quantised per row as for fp8, e2m1 decoded to
  e4m3, the step's scale blocks each one fp8 MMA of K = 32 whose fp32 result is multiplied by the block scale
  (nvfp4's 16-element blocks through two activation planes, even and odd blocks, the other zeroed).
- **the tiled w4a16** (``activations="fp16"``, nvfp4's default): the same e4m3 decode converted to fp16 (one cvt per 2
  values), multiplied by the block scale in fp16 (exact: at most 6 significant bits and 42 (nvfp4) or 48 (mxfp4,
  rebased per expert) in magnitude) and fed to fp16 MMAs with the activations scaled per row by a power of two into
  fp16: one multiply per weight value whatever the token count (w4a8's FFMAs grow with the token block), and fp16
  instead of e4m3 activations.
- With ``untiled_w4a16=True`` (kept for comparison) fp16 activations run the untiled w4a16 kernel:
  nibbles decoded into fp16 by inline PTX (with the nibble at the top of a 16-bit lane, the sign stays and the exponent/mantissa bits move right by 3: the e2m1 value times
  2^-14), bytes repacked into the kernel's nibble order (:func:`to_kernel_nibble_order`). All are the Hopper path;
  Blackwell's native block-scaled fp4 MMA is :mod:`truepeak.kernels.moe_blockscaled` (compiled for sm_100 / sm_120,
  not run on such a device).
- ``KernelConfig.hoist`` (fp4): decode in the MMA operand's register layout straight from shared memory (2 bytes per
  PTX call) rather than in the loaded layout plus a shared-memory round trip; ``prefetch``: register double
  buffering of the next K step (kept for experiments; slower in every measured fp4 configuration after the rewrite).
- Shared memory (docs/method.md, 'Shared memory per block'): :func:`choose_config` estimates it (exact for bf16 and
  w8a8, an upper bound otherwise, checked against Triton's allocation for sm_90 in the tests) and :class:`FusedMoE`
  compiles each kernel and drops stages until the compiler's own figure fits the device's per-block limit.

Layouts: ``w1 [E, 2I, H]`` (gate rows 0..I-1, up rows I..2I-1; K = H contiguous), ``w2 [E, H, I]``; fp4 weights as
packed uint8 ``[E, N, K//2]`` with the scales of :mod:`truepeak.kernels.quant` (``[E, N, K//16]`` e4m3 for nvfp4 plus
a float32 ``[E]`` global scale; ``[E, N, K//32]`` uint8 e8m0 for mxfp4).

torch and triton are imported lazily inside functions; the ``@triton.jit`` kernels are built on first use.
"""

from __future__ import annotations

import functools
import math
import os
from dataclasses import dataclass, field
from typing import Any

from truepeak.errors import TruepeakError, UnknownNameError, UnsupportedError, require

#: Weight formats the kernels take.
WEIGHT_FORMATS = ("bf16", "fp8", "fp8_block", "nvfp4", "mxfp4")
_WFMT_ID = {"bf16": 0, "fp8": 1, "fp8_block": 2, "nvfp4": 3, "mxfp4": 4}


@dataclass(frozen=True)
class KernelConfig:
    """One launch configuration: tile sizes, warps and pipeline stages.

    ``block_m`` tokens (the MMA's N), ``block_n`` weight rows (output features), ``block_k`` reduction elements per
    step (for fp4: unpacked elements, so ``block_k // 2`` bytes per row). ``prefetch``: load the next K step's weights
    into registers before converting the current one (for dequantised formats). ``hoist`` (fp4): let Triton decode in
    the MMA operand's register layout, straight from shared memory, instead of decoding in the loaded layout and
    moving the fp16 tile to the MMA through shared memory (more instructions, less shared memory and no barrier;
    the untiled w4a16 kernel only). ``maxnreg``: a cap on registers per thread (ptxas ``.maxnreg``; None = the
    compiler's choice): more programs per SM, or spills; measured no faster at stop 13.

    Raises:
        TruepeakError: a field of the wrong type or out of range (tiles powers of two >= 16, ``num_stages`` >= 1,
            ``num_warps`` 1..16 and a power of two, ``maxnreg`` None or 24..255).
    """

    block_m: int
    block_n: int
    block_k: int
    num_warps: int = 4
    num_stages: int = 4
    prefetch: bool = False
    hoist: bool = False
    maxnreg: int | None = None

    def __post_init__(self) -> None:
        import operator

        bad = []
        for name in ("block_m", "block_n", "block_k", "num_warps", "num_stages", "maxnreg"):
            v = getattr(self, name)
            if v is None and name == "maxnreg":
                continue
            try:
                i = -1 if isinstance(v, bool) else operator.index(v)
            except TypeError:
                i = -1
            ok = {"num_warps": i in (1, 2, 4, 8, 16), "num_stages": i >= 1,
                  "maxnreg": 24 <= i <= 255}.get(name, i >= 16 and i & (i - 1) == 0)
            if not ok:
                bad.append(f"{name}={v!r}")
            elif type(v) is not int:  # numpy / 0-d torch integers: plain ints (Triton's JIT takes no others)
                object.__setattr__(self, name, int(i))
        if bad:
            raise TruepeakError(f"MoE kernel configuration out of range: block_m, block_n and block_k must be >= 16 "
                                f"and powers of two, num_stages >= 1, num_warps a power of two up to 16 and maxnreg None "
                                f"or 24..255 registers (ptxas' .maxnreg); got {', '.join(bad)}")

    def smem_bytes(self, wfmt: str, gated: bool, w8a8: bool = False) -> int:
        """Shared memory one program needs, estimated: ``num_stages`` x (weight tile(s) + activation tile) bytes,
        plus, for fp4 decoded in the loaded layout (``hoist`` off), one fp16 weight tile on its way to the MMA.
        Weight bytes per element: 2 (bf16), 1 (fp8), 0.5 (fp4) plus scales; activations 2 (1 with ``w8a8``: fp8 or
        fp4 weights with fp8 activations; nvfp4 w4a8 reads two activation planes). The gate/up kernel
        streams two weight tiles per step. Equal to what Triton 3.6 allocates for bf16 and an upper bound for the
        others in the configurations compiled for sm_90 (tests/kernels/test_moe_triton.py); :class:`FusedMoE` checks
        the compiler's own figure before launching."""
        wbytes = {"bf16": 2.0, "fp8": 1.0, "fp8_block": 1.0, "nvfp4": 0.5 + 1 / 16, "mxfp4": 0.5 + 1 / 32}[wfmt]
        tiles = 2 if gated else 1
        planes = 2 if w8a8 and wfmt == "nvfp4" else 1  # nvfp4 w4a8 reads two activation planes
        per_stage = (tiles * self.block_n * self.block_k * wbytes
                     + planes * self.block_m * self.block_k * (1 if w8a8 else 2))
        staging = self.block_n * self.block_k * 2 if wfmt in ("nvfp4", "mxfp4") and not (self.hoist or w8a8) else 0
        return int(math.ceil(self.num_stages * per_stage + staging))


def check_tokens_per_expert(tokens_per_expert: Any) -> float:
    """``tokens_per_expert`` as a float, the key of the configuration choice (docs/method.md, 'Padding per expert').

    Raises:
        TruepeakError: not a finite number > 0."""
    try:
        t = float(tokens_per_expert)
    except (TypeError, ValueError):
        t = math.nan
    if not (math.isfinite(t) and t > 0):
        raise TruepeakError(f"tokens per expert must be a finite number > 0, got {tokens_per_expert!r}")
    return t


def choose_config(tokens_per_expert: float, wfmt: str, gated: bool, smem_limit: Any = None,
                  k_dim: int | None = None, w8a8: bool = False, untiled: bool = False) -> KernelConfig:
    """Pick the tile configuration from the mean tokens per expert (docs/method.md, 'Tokens per expert': a decode batch
    is many small GEMMs of ~tokens-per-expert rows each, so the batch size says nothing about the tile), then check its
    shared memory.

    ``block_m`` covers the busiest expert of a uniform routing at that mean (E[max] ≈ 1.8x the mean at 16 tokens per
    expert for E = 256, k = 8: docs/method.md, 'Tokens per expert'), so weights are streamed once up to ~32 tokens per
    expert. Stages are dropped until the config fits ``smem_limit`` (anything
    :func:`truepeak.hardware.limits.check_shared_memory` takes: an Accelerator, DeviceInfo, name or bytes; None skips).
    ``k_dim`` (the GEMM's K) shrinks ``block_k`` to a divisor of K. ``w8a8``: fp8 activations: for fp8 weights an
    fp8 MMA fed straight from shared memory, tiled like bf16, rather than w8a16 (weights converted in registers); for
    fp4 weights w4a8 (e2m1 decoded to e4m3 in registers, one fp8 MMA per scale block, 64- or 128-element K steps) rather
    than w4a16. ``untiled`` (fp4 without ``w8a8``): the untiled w4a16 kernel's configurations instead of the tiled
    w4a16's (see :class:`FusedMoE`).

    Raises:
        UnknownNameError: an unknown ``wfmt``.
        UnsupportedError: no stage count fits the limit, or K has no usable step.
    """
    check_wfmt(wfmt)
    t = check_tokens_per_expert(tokens_per_expert)
    if k_dim is not None:
        import operator

        given = k_dim
        try:
            k_dim = 0 if isinstance(k_dim, bool) else operator.index(k_dim)
        except TypeError:
            k_dim = 0
        if k_dim <= 0:
            raise TruepeakError(f"k_dim (the GEMM's K) must be a positive integer, got {given!r}")
    t = max(t, 1.0)
    fp4 = wfmt in ("nvfp4", "mxfp4")
    fp8 = wfmt in ("fp8", "fp8_block")
    # Every choice below was measured on the H200 (benchmarks/moe_tune_h200.py, DeepSeek-V3 E = 256 uniform;
    # docs/results/h200/moe/README.md); a device with a different balance may prefer others.
    bm = 16 if t <= 4 else 32 if t <= 10 else 64 if t <= 40 else 128
    bn = 64 if gated else 128
    bk, warps, stages, prefetch, hoist, maxnreg = 128, 4, 4 if bm <= 64 else 3, False, False, None
    if bm == 128:  # 256 tokens per expert: 17.0-17.3 ms with 8 warps (38.0 ms with 4), 18.4 ms with 64 x 128 tiles
        bn, bk, warps = 128, 64, 8
    if 10 < t <= 20 and wfmt in ("bf16", "fp8"):  # 32-token blocks at 16 tokens per expert (half the activation
        # traffic through L2; stop 13, two H200s: bf16 with 128 weight rows 92.4 vs 90.1-90.3 %, fp8 w8a8 88.1 vs 86.7 / 87.2 vs 85.4;
        # power law 1.2 unchanged: 88.5 / 85.9 both ways)
        bm, bn = 32, 128 if gated and wfmt == "bf16" else bn
    if fp8 and w8a8:  # fp8 MMA from shared memory, partial sums promoted to fp32 every 128 products
        stages = 3
        if t <= 10 and wfmt == "fp8":  # fp8_block: one 128 x 128 scale per K step, so 128 at most
            # 16-token blocks and 256-element steps up to 10 tokens per expert (stop 14 call 4, at 8: 95.7 vs 92.8 %
            # with uniform routing, 92.3 vs 91.9 power law; 32-token blocks with 256-element steps: 82.1, stop 13)
            bm, bk = 16, 256
        if bm == 128:  # 128 x 128 tiles, 128-element steps (the promoted accumulators spill a little, still faster)
            bk = 128
    if fp8 and not w8a8:  # w8a16: smaller token blocks and fewer stages keep more programs per SM (84 vs 71 % at 8 tok/expert)
        bm = 16 if t <= 10 else 32 if t <= 20 else bm
        stages = 2 if bm == 32 else 3
        warps = 8 if bm == 128 else 4
    if fp4 and w8a8:  # w4a8: one fp8 MMA of K = 32 per scale block, 4 blocks per step (see w4a8_block_k)
        # 16-token blocks up to 10 tokens per expert (tiled layout, 8 per expert: mxfp4 83.8 vs 70.1 %, nvfp4 62.5 vs
        # 47.2 with 32); 128 weight rows up to 10 (mxfp4 at 1: 90.5 vs 85.7 % with 64), 64 from 64-token blocks
        # 32 at 16 (mxfp4 62.9 vs 48.8 %, nvfp4 41.8 vs 29.3 with 64); 3 stages (91.0 vs 90.3 % with 4 at 1)
        bm = 16 if t <= 10 else 32 if t <= 20 else bm
        bk, bn, stages, warps = w4a8_block_k(wfmt, k_dim), 128 if bm <= 32 else 64, 3, 4
    elif fp4 and not untiled:  # tiled w4a16: the w4a8 layout and step, fp16 MMAs after an fp16 scale multiply
        # 16-token blocks up to 10 tokens per expert (nvfp4 at 8: 59.0 vs 52.7 % with 32), 32 up to 20 (at 16: 50.8 vs
        # 41.7 with 64), 64 up to 40 (at 32: 37.6 vs 34.7 with 32); 8 warps on 128-token blocks (at 256: 7.7 vs 4.7)
        bm = 16 if t <= 10 else 32 if t <= 20 else 64 if t <= 40 else 128
        bk, bn, stages, warps = w4a8_block_k(wfmt, k_dim), 128, 3, 4 if bm <= 64 else 8
        if wfmt == "nvfp4" and bm == 128 and (k_dim is None or k_dim % 128 == 0):
            bk = 128  # two chunks and two scale words per step: at 64 tokens per expert 23.2 vs 20.7 %
        if wfmt == "nvfp4" and bm <= 32:
            # 128 registers (141 uncapped: 3 programs of 128 threads per SM, 4 capped), stop 14: +0.1 to +0.8 points
            # at 1-16 tokens per expert in call 1, +1.2 to +1.8 at 1-8 in call 4
            maxnreg = 128
    elif fp4:  # untiled w4a16: 128-element K steps (120 registers, 4 programs per SM: 37-41 % vs 30-33 % with 256)
        bk, stages = 128, 3
        if bm <= 32:
            hoist = True  # decode in the MMA layout: 40.6 vs 34.7 % at 1 tok/expert (nvfp4)
        else:  # 64-row blocks for every larger count (128 spills registers), 8 warps on 128 weight rows
            bm, bn, warps = 64, 128, 8
    if k_dim is not None and fp4 and untiled and not w8a8:  # (tiled: w4a8_block_k above checked K)
        bk = fp4_block_k(k_dim)  # also the weights' nibble-order chunk (see to_kernel_nibble_order)
    elif k_dim is not None and not fp4:  # the largest power-of-two step <= bk that divides K (kernels do not mask K)
        while bk > 16 and k_dim % bk:
            bk //= 2
        if k_dim % bk:
            raise UnsupportedError(f"K={k_dim} is not a multiple of {bk}: the MoE kernel needs K in whole steps of "
                                   f"16 elements")
    cfg = KernelConfig(bm, bn, bk, warps, stages, prefetch, hoist, maxnreg)
    if smem_limit is None:
        return cfg
    from truepeak.hardware.limits import check_shared_memory

    while True:
        try:
            check_shared_memory(smem_limit, cfg.smem_bytes(wfmt, gated, w8a8),
                                f"MoE kernel tile {cfg.block_n}x{cfg.block_m}x{cfg.block_k}, {cfg.num_stages} stages")
            return cfg
        except UnsupportedError:
            if cfg.num_stages <= 1:
                raise
            import dataclasses

            cfg = dataclasses.replace(cfg, num_stages=cfg.num_stages - 1)


def default_activations(wfmt: str) -> str | None:
    """The activations :class:`FusedMoE` runs a weight format with when none is asked for: ``"fp8"`` for fp8 weights
    (w8a8) and mxfp4 (w4a8), ``"fp16"`` for nvfp4 (the tiled w4a16), None for bf16. Measured on the H200
    (docs/results/h200/moe/README.md): mxfp4 w4a8 was faster than the tiled w4a16 at every tokens per expert
    (DeepSeek-V3, E = 256, uniform; 91 vs 60 % of the read bandwidth at 1; stop 13 call 1); in stop 13's results call,
    over DeepSeek-V3 and GLM-5, E = 256 and EP8, uniform and power-law routing, nvfp4's w4a16 was 5-12 % slower than
    its w4a8 up to 8 tokens per expert, 1.06-1.38x faster at 16-32 and 2.0-2.6x at 64-256, and 9-17x closer to the
    float32 reference (fp16 instead of e4m3 activations: 2.4-5.1e-3 vs 4.1-5.2e-2 of max |output|), so nvfp4's
    default does not depend on the batch; in stop 14's (w4a16 capped at 128 registers) 2-8 % slower up to 8 tokens
    per expert, 1.04-1.38x faster at 16-32, 2.0-2.6x at 64-256.

    Raises:
        UnknownNameError: an unknown format."""
    check_wfmt(wfmt)
    return {"bf16": None, "nvfp4": "fp16"}.get(wfmt, "fp8")


def check_wfmt(wfmt: str) -> str:
    """Return ``wfmt`` or raise UnknownNameError naming the accepted formats."""
    if wfmt not in _WFMT_ID:
        raise UnknownNameError(f"unknown MoE kernel weight format {wfmt!r}; expected one of "
                               f"{', '.join(WEIGHT_FORMATS)}")
    return wfmt


# -- routing metadata --------------------------------------------------------------------------------------------------
@dataclass
class Alignment:
    """Routing metadata of :func:`align_routing` (torch tensors on the routing's device).

    Attributes:
        sorted_slots: int32 ``[num_blocks * block_m]``: slot ids ``t * k + j`` grouped by expert, each expert's run
            padded to a multiple of ``block_m`` with the sentinel ``T * k``.
        block_expert: int32 ``[num_blocks]``: the (local) expert of each block.
        num_blocks: number of ``block_m``-row blocks (only experts with tokens get blocks).
        block_m: rows per block.
        counts: int64 ``[E]`` tokens routed to each expert.
        num_slots: ``T * k`` (the sentinel value).
    """

    sorted_slots: Any
    block_expert: Any
    num_blocks: int
    block_m: int
    counts: Any
    num_slots: int


def align_routing(topk_ids: Any, num_experts: int, block_m: int) -> Alignment:
    """Sort (token, slot) pairs by expert and pad each expert's run to a multiple of ``block_m``.

    Slots whose id is outside ``[0, num_experts)`` (e.g. -1, or an expert of another EP rank) are dropped. Runs on the
    ids' device; reads the block count back to the host (call it outside any CUDA graph).

    Example: ids ``[[0, 2], [2, 1]]`` (T = 2, k = 2), E = 3, block_m = 2 → counts ``[1, 1, 2]``; sorted slots
    ``[0, 4, 3, 4, 1, 2]`` (expert 0: slot 0 + pad; expert 1: slot 3 + pad; expert 2: slots 1, 2), block_expert
    ``[0, 1, 2]``.

    Raises:
        TruepeakError: ``block_m`` or ``num_experts`` not positive, or ids not 2-D.
    """
    torch = require("torch", "aligning MoE routing")
    if topk_ids.dim() != 2:
        raise TruepeakError(f"topk_ids must be [T, top_k], got shape {tuple(topk_ids.shape)}")
    if block_m <= 0 or num_experts <= 0:
        raise TruepeakError(f"block_m and num_experts must be positive, got {block_m} and {num_experts}")
    dev = topk_ids.device
    flat = topk_ids.reshape(-1).to(torch.int64)
    n_slots = flat.numel()
    valid = (flat >= 0) & (flat < num_experts)
    slots = torch.arange(n_slots, device=dev)[valid]
    experts = flat[valid]
    order = torch.argsort(experts, stable=True)
    slots, experts = slots[order], experts[order]
    counts = torch.bincount(experts, minlength=num_experts)
    blocks = (counts + block_m - 1) // block_m
    num_blocks = int(blocks.sum().item())
    padded_start = torch.cumsum(blocks * block_m, 0) - blocks * block_m
    start = torch.cumsum(counts, 0) - counts
    rank = torch.arange(slots.numel(), device=dev) - start[experts]
    sorted_slots = torch.full((num_blocks * block_m,), n_slots, dtype=torch.int32, device=dev)
    sorted_slots[padded_start[experts] + rank] = slots.to(torch.int32)
    block_expert = torch.repeat_interleave(torch.arange(num_experts, device=dev, dtype=torch.int32), blocks)
    return Alignment(sorted_slots, block_expert, num_blocks, block_m, counts, n_slots)


# -- the kernels -------------------------------------------------------------------------------------------------------
@functools.lru_cache(maxsize=None)
def _kernels() -> tuple[Any, Any]:
    require("triton", "truepeak's MoE Triton kernel", "pip install triton")
    from truepeak.kernels import _moe_jit

    return _moe_jit.gate_up_kernel, _moe_jit.down_kernel


def _interpreting() -> bool:
    return os.environ.get("TRITON_INTERPRET", "0") == "1"


# -- weights -----------------------------------------------------------------------------------------------------------
def fp4_block_k(k_dim: int) -> int:
    """The K step of the fp4 kernels for a GEMM of reduction size ``k_dim`` (elements): 128 or 64, whichever divides
    K, preferring 128 (measured faster than 256 on the H200: fewer registers, more programs per SM).
    It is also the chunk of :func:`to_kernel_nibble_order`, so it depends on K only (not on tokens per expert):
    weights are repacked once, at load time.

    Raises:
        UnsupportedError: K is not a multiple of 64 (a 64-element step holds one mxfp4 scale block per half).
    """
    for bk in (128, 64):
        if k_dim % bk == 0:
            return bk
    raise UnsupportedError(f"K={k_dim} is not a multiple of 64: the fp4 MoE kernel needs K in whole steps of 64 "
                           f"elements (32 bytes)")


def w4a8_block_k(wfmt: str, k_dim: int | None = None) -> int:
    """The K step of the w4a8 kernel: 4 scale blocks, so that each row's scale bytes of a step are one int32 word:
    64 for nvfp4 (16-element blocks), 128 for mxfp4 (32), or 64 for mxfp4 when K is not a multiple of 128 (2 blocks
    per step, the word's high bytes unused: gpt-oss's K = 2880). The weights' nibble chunk is 64 for every step (a
    128 step holds two chunks).

    Raises:
        UnknownNameError: not an fp4 format. UnsupportedError: K not a multiple of 64."""
    if wfmt not in ("nvfp4", "mxfp4"):
        raise UnknownNameError(f"the w4a8 kernel takes nvfp4 or mxfp4 weights, not {wfmt!r}")
    if k_dim is not None and (k_dim <= 0 or k_dim % 64):
        raise UnsupportedError(f"K={k_dim} is not a multiple of 64: the w4a8 {wfmt} MoE kernel needs K in whole "
                               f"steps of 64 elements")
    return 64 if wfmt == "nvfp4" or (k_dim is not None and k_dim % 128) else 128


def to_kernel_nibble_order(packed: Any, chunk: int) -> Any:
    """Repack fp4 bytes ``[..., K//2]`` from the standard order (element 2i in the low nibble of byte i, 2i+1 in the
    high: :func:`truepeak.kernels.quant.pack_nibbles`) to the kernel's order: within each chunk of ``chunk``
    consecutive elements, byte j holds element j in its low nibble and element ``chunk/2 + j`` in its high nibble.

    Why: the kernel decodes the low and high nibbles of a [BN, chunk/2] byte tile into two fp16 tiles that are two
    MMAs against two *contiguous* halves of the activations, so no interleave and no strided activation load is
    needed (serving kernels such as Marlin repack weights offline for the same reason). The block scales keep their
    standard layout (a half chunk is a whole number of 16/32-element blocks). Example: chunk 4, elements
    ``[a, b, c, d]`` → bytes ``[a | c<<4, b | d<<4]`` (standard: ``[a | b<<4, c | d<<4]``).

    Raises:
        TruepeakError: K not a multiple of ``chunk`` or ``chunk`` odd.
    """
    from truepeak.kernels import quant

    codes = quant.unpack_nibbles(packed)
    k = codes.shape[-1]
    if chunk <= 0 or chunk % 2 or k % chunk:
        raise TruepeakError(f"cannot repack K={k} in chunks of {chunk} elements (need an even chunk dividing K)")
    c = codes.reshape(*codes.shape[:-1], k // chunk, 2, chunk // 2)
    return (c[..., 0, :] | (c[..., 1, :] << 4)).reshape(packed.shape).contiguous()


def from_kernel_nibble_order(packed: Any, chunk: int) -> Any:
    """Inverse of :func:`to_kernel_nibble_order`: kernel-order bytes back to the standard order."""
    torch = require("torch", "repacking fp4 weights")
    from truepeak.kernels import quant

    n = packed.shape[-1] * 2
    if chunk <= 0 or chunk % 2 or n % chunk:
        raise TruepeakError(f"cannot repack K={n} in chunks of {chunk} elements (need an even chunk dividing K)")
    b = packed.reshape(*packed.shape[:-1], n // chunk, chunk // 2)
    codes = torch.stack((b & 0xF, b >> 4), dim=-2).reshape(*packed.shape[:-1], n)
    return quant.pack_nibbles(codes)


def to_e4m3_bit_layout(packed: Any) -> Any:
    """Permute the bits of each kernel-order fp4 byte (low value ``L`` = s e1 e0 m in bits 3..0, high value ``H`` in
    bits 7..4) into the w4a8 kernel's layout, bits 7..0 = ``L.s H.e1 H.s L.e1 L.e0 L.m H.e0 H.m``.

    Why: the low value's bits then sit where an e4m3 byte has its sign, exponent lsbs and mantissa msb (one AND
    with 0x9C gives an e4m3 equal to the e2m1 value x 2^-6, exactly), and the high value's after shifts by 2 and one
    more AND/OR: 5 integer instructions decode 8 values on Hopper, against ~17 for the untiled w4a16 kernel's e2m1
    -> fp16 (stop 11; the tiled w4a16 decodes this layout too, then converts e4m3 -> fp16). Example: L = 0b0011 (1.5), H = 0b1110 (-4), byte 0xE3 → 0b01101110. Inverse: :func:`from_e4m3_bit_layout`."""
    lo, hi = packed & 15, packed >> 4

    def bit(v: Any, i: int) -> Any:
        return (v >> i) & 1

    return ((bit(lo, 3) << 7) | (bit(hi, 2) << 6) | (bit(hi, 3) << 5) | (bit(lo, 2) << 4) | (bit(lo, 1) << 3)
            | (bit(lo, 0) << 2) | (bit(hi, 1) << 1) | bit(hi, 0))


def from_e4m3_bit_layout(packed: Any) -> Any:
    """Inverse of :func:`to_e4m3_bit_layout`: kernel-order fp4 bytes with the low value in bits 3..0."""

    def bit(v: Any, i: int) -> Any:
        return (v >> i) & 1

    lo = (bit(packed, 7) << 3) | (bit(packed, 4) << 2) | (bit(packed, 3) << 1) | bit(packed, 2)
    hi = (bit(packed, 5) << 3) | (bit(packed, 6) << 2) | (bit(packed, 1) << 1) | bit(packed, 0)
    return lo | (hi << 4)


#: Rows and K elements of one contiguous tile of the w4a8 layout (64 x 64 elements = 64 x 32 bytes = 2 KB).
W4A8_TILE = 64


def to_w4a8_layout(packed: Any) -> Any:
    """Standard-order fp4 bytes ``[E, N, K/2]`` → the w4a8 kernel's layout, same shape: the kernel nibble order with
    64-element chunks (:func:`to_kernel_nibble_order`), the e4m3 bit layout (:func:`to_e4m3_bit_layout`), and the
    64-row x 64-element tiles (64 rows x 32 bytes) each stored contiguously, tile (n, c) at byte
    ``(n * K/64 + c) * 2048`` of the expert (rows of a tile 32 bytes apart).

    Why the tiles: a K step of the kernel reads 32 or 64 bytes of each of its rows; with rows K/2 bytes apart
    (3,584 B for K = 7168) those small strided pieces kept the w4a8 kernel at ~50 % of the H200's read bandwidth
    whatever its MMA scheduling (docs/results/h200/moe/README.md); read as 2 KB tiles the same kernel streamed
    mxfp4 at 85-91 % at <= 8 tokens per expert (stop 12) (Marlin and other serving kernels pre-tile weights for the same
    reason).

    Raises:
        TruepeakError: not uint8, not 3-D, or N or K not multiples of 64."""
    _check_w4a8_bytes(packed)
    e, n, kb = (int(d) for d in packed.shape)
    t = W4A8_TILE
    b = to_e4m3_bit_layout(to_kernel_nibble_order(packed, t))
    return b.reshape(e, n // t, t, kb // (t // 2), t // 2).permute(0, 1, 3, 2, 4).contiguous().reshape(e, n, kb)


def _check_w4a8_bytes(packed: Any) -> None:
    dtype = str(getattr(packed, "dtype", type(packed).__name__))
    if dtype != "torch.uint8":
        raise TruepeakError(f"fp4 weights must be uint8 bytes (two e2m1 values per byte), got {dtype}")
    if packed.dim() != 3:
        raise TruepeakError(f"fp4 weights must be [E, N, K/2] bytes, got shape {list(packed.shape)}")
    n, kb = int(packed.shape[1]), int(packed.shape[2])
    if n % W4A8_TILE or (2 * kb) % W4A8_TILE:
        raise TruepeakError(f"the w4a8 layout needs N and K multiples of {W4A8_TILE}, got N={n}, K={2 * kb}")


def from_w4a8_layout(packed: Any) -> Any:
    """Inverse of :func:`to_w4a8_layout`: bytes ``[E, N, K/2]`` in the w4a8 layout → the standard order, same shape.

    Raises:
        TruepeakError: not uint8, not 3-D, or N or K not multiples of 64."""
    _check_w4a8_bytes(packed)
    e, n, kb = (int(d) for d in packed.shape)
    t = W4A8_TILE
    b = packed.reshape(e, n // t, kb // (t // 2), t, t // 2).permute(0, 1, 3, 2, 4).reshape(e, n, kb)
    return from_kernel_nibble_order(from_e4m3_bit_layout(b), t)


@dataclass
class ExpertWeights:
    """One projection's expert weights in a kernel format: ``data`` ``[E, N, K]`` (``[E, N, K//2]`` uint8 for fp4),
    ``scale`` (None for bf16; fp32 ``[E, N]`` for fp8; fp32 ``[E, N//128, K//128]`` for fp8_block; e4m3
    ``[E, N, K//16]`` for nvfp4; uint8 ``[E, N, K//32]`` for mxfp4), ``global_scale`` (fp32 ``[E]``: nvfp4's
    per-tensor scale; for mxfp4 None, or the power of two its scales were rebased by in :meth:`in_kernel_order`),
    ``nibble_chunk`` (fp4 only: 0 = the standard nibble order, c > 0 = :func:`to_kernel_nibble_order` with chunk c;
    the kernels need c = the kernel's ``block_k`` and repack otherwise), ``w4a8_layout`` (fp4 only: the bytes are in
    the w4a8 kernel's layout, :func:`to_w4a8_layout`: 64-element nibble chunks, the e4m3 bit layout and 64-row x
    64-element tiles stored contiguously)."""

    wfmt: str
    data: Any
    scale: Any = None
    global_scale: Any = None
    nibble_chunk: int = 0
    w4a8_layout: bool = False
    _words: Any = field(default=None, init=False, repr=False, compare=False)  # w4a8_scale_words' cache

    def w4a8_scale_words(self, block_k: int | None = None) -> Any:
        """The block scales as the w4a8 kernel reads them: int32 ``[E, K/BK, N]`` (BK = ``block_k``, default
        :func:`w4a8_block_k` of K), word ``[e, s, n]`` = the scale bytes of row n's K step s (little-endian: the
        step's first block in the low byte; 4 blocks per word, or 2 and two zero bytes for mxfp4 with 64-element
        steps), step-major so one step's words of consecutive rows are contiguous (coalesced loads). Made once per
        weights object and step (a copy of the scales: 1/16 (nvfp4) or 1/32 (mxfp4; 1/16 with 64-element steps) byte
        per weight).

        Raises:
            TruepeakError: not fp4, or a step that is not 4 (or, mxfp4, 2) scale blocks dividing K."""
        if self.wfmt not in ("nvfp4", "mxfp4"):
            raise TruepeakError(f"{self.wfmt} weights have no fp4 block scales")
        e, n, k = self.shape
        bk = block_k or w4a8_block_k(self.wfmt, k)
        g = 16 if self.wfmt == "nvfp4" else 32
        if bk not in ((64,) if g == 16 else (64, 128)) or k % bk:
            raise TruepeakError(f"no w4a8 scale words for {self.wfmt} with K={k} in steps of {bk} (steps of "
                                f"{'64' if g == 16 else '64 or 128'} elements dividing K)")
        # cached per step and per state of the scale tensor (its identity and in-place version counter), so scales
        # replaced or loaded in place are repacked again
        key = (bk, id(self.scale), getattr(self.scale, "_version", None))
        words = self._words if isinstance(self._words, dict) else {}
        if key not in words:
            torch = require("torch", "repacking fp4 scales")
            b = self.scale.contiguous().view(torch.uint8).reshape(e, n, k // bk, bk // g)
            if bk // g < 4:  # mxfp4 in 64-element steps: 2 scale bytes, zero-padded to a word
                b = torch.cat([b, torch.zeros_like(b)], dim=-1)
            w = b.contiguous().view(torch.int32).reshape(e, n, k // bk).transpose(1, 2)
            words = {key: w.contiguous().clone()}  # a copy even where the transpose is a view (one step)
            self._words = words
        return words[key]

    def in_kernel_order(self, chunk: int | None = None, w4a8: bool = False) -> "ExpertWeights":
        """These weights as the fp4 kernels read them (self when already so, or when not fp4; otherwise a copy):
        bytes in the kernel's nibble order with ``chunk`` (default :func:`fp4_block_k` of K; the kernel's
        ``block_k``) or, with ``w4a8``, in the w4a8 kernel's layout (:func:`to_w4a8_layout`; ``chunk`` None or
        64), and for mxfp4 the e8m0 scales rebased per expert so that the largest is 136 (2^9), with the
        rebasing power of two folded into the per-expert ``global_scale`` that the kernel applies after the K loop:
        the fp16 block scales then do not depend on the weights' magnitude. Dequantised values are unchanged except
        for blocks more than 2^136 below their expert's largest (they become 2^-127 x value); NaN scales (255) stay
        255 (the tiled kernels decode them as NaN, the untiled w4a16 kernel as inf). The rebasing is per expert, not per
        row: a row 10^8 times larger than the rest of its expert leaves the others in fp16's subnormal range (seen
        in Triton's interpreter)."""
        if self.wfmt not in ("nvfp4", "mxfp4"):
            return self
        torch = require("torch", "repacking fp4 weights")
        if w4a8 and chunk not in (None, 64):
            raise TruepeakError(f"the w4a8 layout has 64-element nibble chunks, not {chunk}")
        chunk = 64 if w4a8 else chunk or fp4_block_k(self.shape[2])
        w = self
        if w.nibble_chunk != chunk or w.w4a8_layout != w4a8:
            std = w.standard_bytes()
            data = to_w4a8_layout(std) if w4a8 else to_kernel_nibble_order(std, chunk)
            w = ExpertWeights(w.wfmt, data, w.scale, w.global_scale, chunk, w4a8)
        if w.wfmt == "mxfp4":
            s = w.scale.to(torch.int32)
            finite = torch.where(s == 255, torch.zeros_like(s), s)  # 255 is e8m0's NaN
            off = finite.flatten(1).amax(dim=1) - 136  # per expert: the largest scale becomes 2^(136 - 127) = 2^9
            if bool((off != 0).any()):
                rebased = torch.where(s == 255, s, (s - off[:, None, None]).clamp(0, 254)).to(torch.uint8)
                g = torch.pow(2.0, off.to(torch.float32))
                if w.global_scale is not None:
                    g = g * w.global_scale.float()
                w = ExpertWeights(w.wfmt, w.data, rebased, g, w.nibble_chunk, w.w4a8_layout)
        return w

    def standard_bytes(self) -> Any:
        """fp4 bytes in the standard nibble order (the stored bytes when ``nibble_chunk`` is 0)."""
        if self.w4a8_layout:
            return from_w4a8_layout(self.data)
        return self.data if not self.nibble_chunk else from_kernel_nibble_order(self.data, self.nibble_chunk)

    @property
    def shape(self) -> tuple[int, int, int]:
        """(E, N, K) in elements."""
        e, n, k = self.data.shape
        return int(e), int(n), int(k * 2 if self.wfmt in ("nvfp4", "mxfp4") else k)

    def nbytes_per_expert(self) -> int:
        """Bytes one expert's values and scales take (the nvfp4 per-expert 4-byte global scale included)."""
        e = self.shape[0]
        total = self.data.numel() * self.data.element_size()
        for t in (self.scale, self.global_scale):
            if t is not None:
                total += t.numel() * t.element_size()
        return total // e

    def dequantize(self) -> Any:
        """float32 ``[E, N, K]`` (for references)."""
        from truepeak.kernels import quant

        if self.wfmt == "bf16":
            return self.data.float()
        if self.wfmt == "fp8":
            return quant.dequantize_fp8(self.data, self.scale, "channel")
        if self.wfmt == "fp8_block":
            return quant.dequantize_fp8(self.data, self.scale, "block128")
        if self.wfmt == "nvfp4":
            if self.global_scale is None:
                raise TruepeakError("nvfp4 weights need their per-expert global_scale (fp32 [E]) to be dequantised")
            return quant.dequantize_nvfp4(self.standard_bytes(), self.scale, self.global_scale[:, None, None])
        w = quant.dequantize_mxfp4(self.standard_bytes(), self.scale)
        return w if self.global_scale is None else w * self.global_scale[:, None, None]


def quantize_experts(w: Any, wfmt: str) -> ExpertWeights:
    """Quantise float expert weights ``[E, N, K]`` to a kernel format with :mod:`truepeak.kernels.quant`
    (nvfp4: one global scale per expert, as each expert is its own tensor).

    Raises:
        UnknownNameError: unknown format. TruepeakError: K (or N for fp8_block) not a multiple of the format's block.
    """
    torch = require("torch", "quantising expert weights")
    from truepeak.kernels import quant

    check_wfmt(wfmt)
    if wfmt == "bf16":
        return ExpertWeights(wfmt, w.to(torch.bfloat16).contiguous())
    if wfmt == "fp8":
        v, s = quant.quantize_fp8(w, "channel")
        return ExpertWeights(wfmt, v.contiguous(), s.contiguous())
    if wfmt == "fp8_block":
        v, s = quant.quantize_fp8(w, "block128")
        return ExpertWeights(wfmt, v.contiguous(), s.contiguous())
    if wfmt == "nvfp4":
        gs = torch.stack([quant.nvfp4_global_scale(w[i]) for i in range(w.shape[0])])
        packed, scales, _ = quant.quantize_nvfp4(w, global_scale=gs[:, None, None])
        return ExpertWeights(wfmt, packed.contiguous(), scales.contiguous(), gs.contiguous())
    packed, scales = quant.quantize_mxfp4(w)
    return ExpertWeights(wfmt, packed.contiguous(), scales.contiguous())


# -- the forward -------------------------------------------------------------------------------------------------------
def _check_weights(name: str, w: ExpertWeights) -> None:
    """The kernels index values with the tensors' strides but assume K contiguous (stride 1) and scales stored
    densely in the documented shapes: anything else would be read wrongly without an error."""
    torch = require("torch", "running the MoE kernel")
    e, n, k = w.shape
    fp4 = w.wfmt in ("nvfp4", "mxfp4")
    data_dt = {"bf16": torch.bfloat16, "fp8": torch.float8_e4m3fn, "fp8_block": torch.float8_e4m3fn,
               "nvfp4": torch.uint8, "mxfp4": torch.uint8}[w.wfmt]
    scale_dt = {"fp8": torch.float32, "fp8_block": torch.float32, "nvfp4": torch.float8_e4m3fn,
                "mxfp4": torch.uint8}.get(w.wfmt)
    if w.data.dtype != data_dt:
        shape = "packed [E, N, K/2]" if fp4 else "[E, N, K]"
        raise TruepeakError(f"{name}: {w.wfmt} values must be {data_dt} ({shape}), got {w.data.dtype}")
    if w.data.stride(-1) != 1:
        raise TruepeakError(f"{name}.data must be contiguous along K (stride 1), got strides "
                            f"{tuple(w.data.stride())}: pass a .contiguous() copy")
    if fp4 and not w.data.is_contiguous():
        raise TruepeakError(f"{name}.data: fp4 bytes must be one dense [E, N, K/2] tensor (the kernels address its "
                            f"tiles from the shape), got strides {tuple(w.data.stride())}: pass a .contiguous() copy")
    if scale_dt is not None and w.scale is not None and w.scale.dtype != scale_dt:
        hint = " (e8m0 bytes: scale.view(torch.uint8))" if w.wfmt == "mxfp4" else ""
        raise TruepeakError(f"{name}: {w.wfmt} scales must be {scale_dt}{hint}, got {w.scale.dtype}")
    want = {"fp8": (e, n), "fp8_block": (e, n // 128, k // 128), "nvfp4": (e, n, k // 16),
            "mxfp4": (e, n, k // 32)}.get(w.wfmt)
    if want is not None:
        if w.scale is None or tuple(w.scale.shape) != want:
            got = None if w.scale is None else list(w.scale.shape)
            raise TruepeakError(f"{name}: {w.wfmt} scales must be {list(want)} for values {list(w.shape)}, got {got}")
        if not w.scale.is_contiguous():
            raise TruepeakError(f"{name}.scale must be contiguous: pass a .contiguous() copy")
    g = w.global_scale
    if g is not None and (g.dtype != torch.float32 or tuple(g.shape) != (e,) or not g.is_contiguous()):
        raise TruepeakError(f"{name}.global_scale must be a contiguous float32 [E] = [{e}], got {g.dtype} "
                            f"{list(g.shape)}")


def _check_shapes(x: Any, w1: ExpertWeights, w2: ExpertWeights) -> tuple[int, int, int]:
    for w in (w1, w2):
        check_wfmt(w.wfmt)
    e1, n1, k1 = w1.shape
    e2, n2, k2 = w2.shape
    h = int(x.shape[-1])
    if not (e1 == e2 and k1 == h and n2 == h and n1 == 2 * k2):
        raise TruepeakError(f"expert weight shapes do not fit: x [T, {h}], w1 {list(w1.shape)} (want [E, 2I, H]), "
                            f"w2 {list(w2.shape)} (want [E, H, I])")
    if w1.wfmt != w2.wfmt:
        raise TruepeakError(f"w1 and w2 must share one format, got {w1.wfmt} and {w2.wfmt}")
    for name, w in (("w1", w1), ("w2", w2)):
        _check_weights(name, w)
    return e1, k2, h


def mean_tokens_per_expert(topk_ids: Any, num_experts: int) -> float:
    """The configuration key (docs/method.md, 'Padding per expert') when none is given: routed slots per local expert
    that received any (ids outside ``[0, num_experts)`` are another rank's), and 1 when no expert is local (T = 0 too).
    Reads back to the host (call it outside any CUDA graph)."""
    torch = require("torch", "counting tokens per expert")
    valid = (topk_ids >= 0) & (topk_ids < num_experts)
    return max(1.0, float(valid.sum().item()) / max(1, int(torch.unique(topk_ids[valid]).numel())))


def check_inputs(x: Any, w1: ExpertWeights, w2: ExpertWeights, topk_ids: Any, topk_weights: Any
                 ) -> tuple[int, int, int, int, int]:
    """The checks every MoE kernel makes of its inputs before building anything: weight shapes and formats
    (:func:`_check_shapes`), nvfp4's global scale, x ``[T, H]`` bf16/fp16/fp32 contiguous along H, integer
    ``topk_ids [T, k]`` and ``topk_weights`` of the same shape.

    Returns:
        ``(E, I, H, T, k)``.

    Raises:
        TruepeakError / UnknownNameError: the first input that does not fit, named with what would.
    """
    torch = require("torch", "running the MoE kernel")
    E, I, H = _check_shapes(x, w1, w2)  # noqa: E741 - the field's name for the expert width
    for w in (w1, w2):
        if w.wfmt == "nvfp4" and w.global_scale is None:
            raise TruepeakError("nvfp4 weights need their per-expert global_scale (fp32 [E]): without it every "
                                "value would be off by that factor")
    if topk_ids.dim() != 2 or x.dim() != 2 or int(x.shape[0]) != int(topk_ids.shape[0]):
        raise TruepeakError(f"x must be [T, H] and topk_ids [T, top_k] with the same T, got x "
                            f"{list(x.shape)} and topk_ids {list(topk_ids.shape)}")
    if x.dtype not in (torch.bfloat16, torch.float16, torch.float32):
        raise TruepeakError(f"x must be bf16, fp16 or fp32 hidden states, got {x.dtype}")
    if topk_ids.dtype.is_floating_point or topk_ids.dtype.is_complex or topk_ids.dtype == torch.bool:
        raise TruepeakError(f"topk_ids must hold integer expert ids, got {topk_ids.dtype}")
    if tuple(topk_weights.shape) != tuple(topk_ids.shape):
        raise TruepeakError(f"topk_weights must have topk_ids' shape {list(topk_ids.shape)}, got "
                            f"{list(topk_weights.shape)}")
    if x.shape[0] and x.stride(-1) != 1:
        raise TruepeakError(f"x must be contiguous along H (stride 1), got strides {tuple(x.stride())}: pass "
                            "x.contiguous() (the kernels address rows by x.stride(0) and read each row in place)")
    return E, I, H, int(topk_ids.shape[0]), int(topk_ids.shape[1])


def device_smem_limit(device: Any) -> int:
    """The device's shared memory per block with opt-in (``sharedMemPerBlockOptin``: 232,448 B on sm_90, 101,376 B on
    sm_120; 0 where torch does not report it)."""
    torch = require("torch", "running the MoE kernel")
    return int(getattr(torch.cuda.get_device_properties(device), "shared_memory_per_block_optin", 0))


def fit_shared_memory(launch: Any, cfg1: KernelConfig, cfg2: KernelConfig, limit: int
                      ) -> tuple[KernelConfig, KernelConfig]:
    """The shared-memory check (docs/method.md, 'Shared memory per block') with the compiler's own figure: compile each
    of the two MoE kernels (``launch(which, cfg, warmup=True)`` returns Triton's compiled kernel for kernel 1 (gate/up)
    or 2 (down)) and drop pipeline stages until the shared memory Triton allocates fits ``limit`` bytes per block
    (:func:`device_smem_limit`; 0 = no check). :func:`choose_config`'s estimate is a first guess; this is the check.

    Returns:
        The two configurations, each with the most stages (at most its own) that fit.

    Raises:
        UnsupportedError: a kernel does not fit with one stage, or does not compile under its ``maxnreg``.
    """
    import dataclasses

    if not limit:
        return cfg1, cfg2
    out = []
    for which, cfg in ((1, cfg1), (2, cfg2)):
        while True:
            try:
                need = int(launch(which, cfg, warmup=True).metadata.shared)
            except Exception as exc:  # noqa: BLE001 - a register cap ptxas cannot meet: say so, not 1000s of lines
                if not cfg.maxnreg:
                    raise
                why = next((ln.strip() for ln in str(exc).splitlines() if "register" in ln.lower()),
                           type(exc).__name__)
                raise UnsupportedError(f"MoE kernel {which} does not compile with maxnreg={cfg.maxnreg}: {why}; "
                                       "raise maxnreg or leave it None") from None
            if need <= limit:
                break
            if cfg.num_stages <= 1:
                raise UnsupportedError(f"MoE kernel {which} ({cfg.block_n}x{cfg.block_m}x{cfg.block_k}, 1 stage) "
                                       f"needs {need:,} B of shared memory; this device allows {limit:,} B")
            cfg = dataclasses.replace(cfg, num_stages=cfg.num_stages - 1)
        out.append(cfg)
    return out[0], out[1]


class FusedMoE:
    """A prepared launch of the two kernels for one routing: ``FusedMoE(x, w1, w2, topk_ids, topk_weights,
    tokens_per_expert)()`` returns ``out [T, H]`` (x's dtype). Buffers and routing metadata are made once in
    ``__init__`` (outside any timed region); ``__call__`` only launches kernels and is CUDA-graph capturable.

    Args:
        x: ``[T, H]`` bf16 hidden states. w1 / w2: :class:`ExpertWeights` ``[E, 2I, H]`` / ``[E, H, I]``.
        topk_ids: ``[T, k]`` int (local expert ids; others are dropped). topk_weights: ``[T, k]`` float.
        tokens_per_expert: the configuration key (docs/method.md, 'Padding per expert'); default the mean over experts
            with tokens.
        config: override both kernels' configuration (tests).
        smem_limit: device or bytes for :func:`choose_config`'s shared-memory check (docs/method.md, 'Shared memory per
            block').
        tune: KernelConfig field overrides applied to both kernels (e.g. ``{"prefetch": True, "num_stages": 1}``).
        activations: for fp8 weights, ``"fp8"`` (default: w8a8, activations quantised per row to e4m3 with scale
            max|row| / 448 by :func:`quant_rows_kernel` inside the call, then fp8 x fp8 MMAs) or ``"fp16"`` (w8a16:
            weights converted to fp16 in registers); for fp4 weights, ``"fp8"`` (w4a8, mxfp4's default: the same
            activations, e2m1 decoded to e4m3 in registers, one fp8 MMA per scale block) or ``"fp16"`` (w4a16,
            nvfp4's default: e2m1 decoded to fp16 and multiplied by its block scale, fp16 MMAs); both read
            :func:`to_w4a8_layout` (the w4a16 its untiled layout with ``untiled_w4a16``). None:
            :func:`default_activations`. bf16 takes only None.
        untiled_w4a16: fp4 weights with ``activations="fp16"`` only: run the untiled w4a16 kernel (bytes in
            :func:`to_kernel_nibble_order`, e2m1 decoded to fp16 by inline PTX) instead of the tiled one, to compare
            the two (benchmarks/moe_kernel_tuning.py). Keyword only; default False.
        drop_block_scales: a timing experiment for w4a8 (fp4 weights, fp8 activations) only: the K loop leaves the
            block scales out, so **the output is wrong**; it shows what the scales cost. Refused unless
            ``output_unchecked`` is True as well. Keyword only; default False.
        output_unchecked: the caller's statement that it will neither use nor check the output (required by
            ``drop_block_scales``). Keyword only; default False.

    Attributes:
        output_valid: False when ``drop_block_scales`` is set (the output is not the unit's result), else True.

    Range: activations of quantised weights are scaled per row (x and the intermediate ``silu(g) · u``): fp8 by the
    row's largest magnitude / 448, floored at 1e-12 (rows below that quantise to zero); fp16 by a power of two that
    puts the row's largest magnitude in (2^13, 2^14] (exact; elements more than ~2^38 below their row's largest
    become 0). The intermediate is stored in bf16 (fp8 activations with bf16 x) or float32 before that scaling. The
    weights' own magnitude does not matter: block scales are applied relative to a per-expert scale. bf16 weights
    keep bf16 activations unscaled.

    Raises:
        TruepeakError: shapes that do not fit, formats that differ, ``activations`` not allowed for the format,
            ``untiled_w4a16`` / ``drop_block_scales`` / ``output_unchecked`` not a bool or set where they do not apply
            (``drop_block_scales`` without ``output_unchecked`` included),
            weight values not contiguous along K, scales not in the documented shapes or not contiguous,
            non-integer ``topk_ids``, ``tune`` not a dict of valid :class:`KernelConfig` fields.
        UnknownNameError: a weight format truepeak does not know.
        UnsupportedError: K not a multiple of the K step; a configuration that cannot fit the device's shared memory.
    """

    def __init__(self, x: Any, w1: ExpertWeights, w2: ExpertWeights, topk_ids: Any, topk_weights: Any,
                 tokens_per_expert: float | None = None, config: KernelConfig | None = None, smem_limit: Any = None,
                 tune: dict | None = None, activations: str | None = None, *, untiled_w4a16: bool = False,
                 drop_block_scales: bool = False, output_unchecked: bool = False):
        flags = {"untiled_w4a16": untiled_w4a16, "drop_block_scales": drop_block_scales,
                 "output_unchecked": output_unchecked}
        for name, value in flags.items():
            if not isinstance(value, bool):
                raise TruepeakError(f"{name} must be True or False, got {value!r}")
        if drop_block_scales and not output_unchecked:
            raise TruepeakError("drop_block_scales=True leaves the block scales out of the K loop, so the output is "
                                "wrong (a timing experiment); pass output_unchecked=True as well to say the output "
                                "will be neither used nor checked")
        torch = require("torch", "running the MoE kernel")
        self.E, self.I, self.H, self.T, self.k = check_inputs(x, w1, w2, topk_ids, topk_weights)
        fp8 = w1.wfmt in ("fp8", "fp8_block")
        fp4 = w1.wfmt in ("nvfp4", "mxfp4")
        if isinstance(activations, str):
            activations = activations.lower()
        if activations is not None and not ((fp8 or fp4) and activations in ("fp8", "fp16")):
            raise TruepeakError(f"activations={activations!r} is not available for {w1.wfmt} weights; fp8 and fp4 "
                                "weights take 'fp8' (w8a8 / w4a8) or 'fp16' (w8a16 / w4a16), bf16 only the default")
        if activations is None:
            activations = default_activations(w1.wfmt)
        if tokens_per_expert is None:
            tokens_per_expert = mean_tokens_per_expert(topk_ids, self.E)
        w8a8 = (fp8 or fp4) and activations != "fp16"
        if untiled_w4a16 and not (fp4 and not w8a8):
            raise TruepeakError(f"untiled_w4a16=True applies to fp4 weights with activations='fp16' only, got "
                                f"{w1.wfmt} weights with activations {activations!r}")
        if drop_block_scales and not (fp4 and w8a8):
            raise TruepeakError(f"drop_block_scales=True applies to fp4 weights with activations='fp8' (w4a8) only, "
                                f"got {w1.wfmt} weights with activations {activations!r}")
        self.drop_block_scales = drop_block_scales
        self.output_valid = not drop_block_scales
        # fp4 weights are read in the tiled layout (to_w4a8_layout) by both the w4a8 and the w4a16 kernel; the
        # untiled w4a16 kernel stays for comparison, behind untiled_w4a16 (both need H and I in whole 64-element
        # steps, so the tiles always fit where either kernel runs)
        self.tiled = fp4 and not untiled_w4a16
        untiled = fp4 and not self.tiled
        self.cfg1 = config or choose_config(tokens_per_expert, w1.wfmt, True, smem_limit, self.H, w8a8, untiled)
        self.cfg2 = config or choose_config(tokens_per_expert, w2.wfmt, False, smem_limit, self.I, w8a8, untiled)
        if tune is not None and not isinstance(tune, dict):
            raise TruepeakError(f"tune must be a dict of KernelConfig fields (e.g. {{'num_stages': 3}}), got "
                                f"{type(tune).__name__} {tune!r}")
        if tune:  # overrides of KernelConfig fields for both kernels (benchmark-side tuning)
            import dataclasses

            fields = [f.name for f in dataclasses.fields(KernelConfig)]
            bad = sorted(set(tune) - set(fields))
            if bad:
                raise TruepeakError(f"unknown KernelConfig field(s) {', '.join(bad)} in tune; expected "
                                    f"{', '.join(fields)}")
            self.cfg1 = dataclasses.replace(self.cfg1, **tune)
            self.cfg2 = dataclasses.replace(self.cfg2, **tune)
        for cfg, kd in ((self.cfg1, self.H), (self.cfg2, self.I)):
            if kd % cfg.block_k:
                raise UnsupportedError(f"K={kd} is not a multiple of block_k={cfg.block_k}")
        if self.cfg1.block_m != self.cfg2.block_m:
            raise TruepeakError("both kernels must share block_m")
        if w1.wfmt == "fp8_block" and (128 % self.cfg1.block_k or 128 % self.cfg2.block_k):
            raise UnsupportedError(f"fp8_block weights need block_k dividing 128 (one 128 x 128 scale per K step), got "
                                   f"{self.cfg1.block_k} and {self.cfg2.block_k}")
        for cfg, kd in ((self.cfg1, self.H), (self.cfg2, self.I)):
            ok = (64,) if w1.wfmt == "nvfp4" and w8a8 else (64, 128)
            if self.tiled and cfg.block_k not in ok:
                raise UnsupportedError(f"{w1.wfmt} weights in the tiled layout need block_k in {ok} (4 scale blocks "
                                       f"per step; mxfp4 also 2), got {cfg.block_k} for K={kd}")
        if fp4 and (self.cfg1.block_k < 64 or self.cfg2.block_k < 64):
            raise UnsupportedError(f"fp4 weights need block_k >= 64 (one mxfp4 scale block per half step), got "
                                   f"{self.cfg1.block_k} and {self.cfg2.block_k}")
        if x.device.type != "cuda" and not _interpreting():
            raise UnsupportedError(f"the MoE kernels run on a CUDA GPU (x is on {x.device}); on a CPU set "
                                   "TRITON_INTERPRET=1 before importing triton to run them in Triton's interpreter")
        if w8a8 and x.device.type == "cuda" and not _interpreting():
            cc = torch.cuda.get_device_capability(x.device)
            if cc < (8, 9):  # fp8 tensor-core MMAs: Ada (sm_89) and Hopper (sm_90) onward (PTX ISA, mma / wgmma)
                raise UnsupportedError(f"{w1.wfmt} weights with fp8 activations need fp8 MMAs (compute capability "
                                       f">= 8.9); this GPU is sm_{cc[0]}{cc[1]}: pass activations='fp16'")
        # fp4 bytes in the kernel's nibble order for each kernel's K step (a copy only if they are not already)
        self.x = x
        tiled = self.tiled  # 64-element nibble chunks in the e4m3 bit layout, 2 KB tiles
        self.w1 = w1.in_kernel_order(None if tiled else self.cfg1.block_k, w4a8=tiled)
        self.w2 = w2.in_kernel_order(None if tiled else self.cfg2.block_k, w4a8=tiled)
        self.align = align_routing(topk_ids, self.E, self.cfg1.block_m)
        self.topw = topk_weights.reshape(-1).float().contiguous()
        dev = x.device
        # Quantised weights multiply activations in fp8 (w8a8, w4a8: e4m3, scale max|row| / 448) or fp16 (w8a16, w4a16:
        # dequantised weights are fp16 in registers, e4m3 and e2m1 convert to fp16 in one step, to bf16 not); either
        # way each row of x and of the intermediate is scaled by its own factor (fp16: a power of two putting the row's
        # largest magnitude in (2^13, 2^14], exact, so no row overflows fp16's 65,504 or sinks into its subnormals),
        # applied back after the K loop. bf16 weights keep bf16 activations, unscaled.
        self.act8 = w8a8
        self.rowscale = w1.wfmt != "bf16"
        self.activations = ("fp8 e4m3, per-row scale" if self.act8 else "bf16" if w1.wfmt == "bf16" else
                            "fp16, per-row power-of-two scale")
        # nvfp4 w4a8: the quantised activations in two planes (even / odd 16-element blocks; see quant_rows_kernel)
        self.planes = 2 if self.act8 and w1.wfmt == "nvfp4" else 1
        n_slots = self.T * self.k
        # the intermediate silu(g) * u is written unscaled, then scaled per row: in bf16 for fp8 activations with bf16
        # x (its e4m3 rounding dominates; fp16 would overflow at 65,504, so float32 for other x), in float32 for fp16
        # activations (bf16 would lose 3 of fp16's mantissa bits: 1.3e-2 vs 5.5e-3 of max |output| for nvfp4 in
        # Triton's interpreter); zeros: rows of slots routed to another rank are never written, every row is scaled
        bf16_inter = not self.rowscale or (self.act8 and x.dtype == torch.bfloat16)
        inter_dt = torch.bfloat16 if bf16_inter else torch.float32
        self.inter = torch.zeros(n_slots, self.I, dtype=inter_dt, device=dev)
        # bf16 weights: x as bf16 (a copy, made per call, when it is not)
        self.xin = x if self.rowscale or x.dtype == torch.bfloat16 else torch.empty(x.shape, dtype=torch.bfloat16,
                                                                                       device=dev)
        if self.rowscale:
            qdt = torch.float8_e4m3fn if self.act8 else torch.float16
            self.xq = torch.empty(self.planes, self.T, self.H, dtype=qdt, device=dev)
            self.xs = torch.empty(self.T, dtype=torch.float32, device=dev)
            self.interq = torch.empty(self.planes, n_slots, self.I, dtype=qdt, device=dev)
            self.inters = torch.empty(n_slots, dtype=torch.float32, device=dev)
        self.partial = torch.zeros(self.T * self.k, self.H, dtype=x.dtype, device=dev)
        self.out = torch.empty(self.T, self.H, dtype=x.dtype, device=dev)
        self.wfmt = _WFMT_ID[w1.wfmt]
        self._dummy = torch.zeros(1, dtype=torch.float32, device=dev)
        self._ones = torch.ones(self.E, dtype=torch.float32, device=dev)  # per-expert scale of formats without one
        if dev.type == "cuda" and not _interpreting() and self.align.num_blocks:
            self._fit_shared_memory()

    def _args(self, w: ExpertWeights, block_k: int) -> tuple[Any, Any, Any]:
        scale = w.scale if w.scale is not None else self._dummy
        if self.tiled:  # one int32 word = a row's block scales of a step (nvfp4: of 64 elements)
            scale = w.w4a8_scale_words(64 if w.wfmt == "nvfp4" else block_k)
        return w.data, scale, (w.global_scale if w.global_scale is not None else self._ones)

    def _launch(self, which: int, cfg: KernelConfig, warmup: bool = False) -> Any:
        """Launch kernel 1 (gate/up) or 2 (down) with ``cfg``; with ``warmup`` only compile it (Triton's
        ``JITFunction.warmup``) and return the compiled kernel, whose ``metadata.shared`` is the shared memory it
        needs."""
        gate_up, down = _kernels()
        a = self.align
        kw = dict(WFMT=self.wfmt, BLOCK_M=cfg.block_m, BLOCK_N=cfg.block_n, BLOCK_K=cfg.block_k,
                  INTERP=_interpreting(), PREFETCH=cfg.prefetch, HOIST=cfg.hoist, ACT8=self._act8_flag(),
                  TILED=self.tiled, XSCALE=self.rowscale,
                  num_warps=cfg.num_warps, num_stages=cfg.num_stages)
        if cfg.maxnreg:
            kw["maxnreg"] = cfg.maxnreg
        if which == 1:
            d, s, g = self._args(self.w1, cfg.block_k)
            xa, xs = (self.xq, self.xs) if self.rowscale else (self.xin, self._dummy)
            plane = self.T * self.H if self.act8 else 0
            grid = (a.num_blocks * (self.I // cfg.block_n + (self.I % cfg.block_n > 0)),)
            args = (xa, xs, d, s, g, self.inter, a.sorted_slots, a.block_expert, a.num_blocks, a.num_slots, self.k,
                    self.I, self.H, xa.stride(-2), self.inter.stride(0), d.stride(0), d.stride(1), plane)
            kernel = gate_up
        else:
            d, s, g = self._args(self.w2, cfg.block_k)
            xa, xs = (self.interq, self.inters) if self.rowscale else (self.inter, self._dummy)
            plane = self.T * self.k * self.I if self.act8 else 0
            grid = (a.num_blocks * (self.H // cfg.block_n + (self.H % cfg.block_n > 0)),)
            args = (xa, xs, d, s, g, self.partial, a.sorted_slots, a.block_expert, self.topw, a.num_blocks,
                    a.num_slots, self.H, self.I, xa.stride(-2), self.partial.stride(0), d.stride(0), d.stride(1),
                    plane)
            kernel = down
        if warmup:
            return kernel.warmup(*args, grid=grid, **kw)
        return kernel[grid](*args, **kw)

    def _act8_flag(self) -> Any:
        """The kernels' ACT8 value: 1 with fp8 activations, 0 without; plus 2 with ``drop_block_scales`` (w4a8 only:
        the block scales left out, so the output is wrong)."""
        return int(self.act8) | (2 if self.drop_block_scales else 0)

    @staticmethod
    def _quant_rows(src: Any, q: Any, scales: Any) -> None:
        """Per-row quantisation of ``src [R, C]`` into ``q [P, R, C]`` and ``scales [R]`` (one program per row): e4m3
        (q's dtype float8_e4m3fn; P = 2 planes: even / odd 16-element blocks, for nvfp4 w4a8) or fp16 with a
        power-of-two scale (q float16)."""
        from truepeak.kernels._moe_jit import quant_rows_kernel

        rows, cols = src.shape
        block = min(8192, 1 << max(4, (cols - 1).bit_length()))
        quant_rows_kernel[(rows,)](src, q, scales, src.stride(0), q.stride(1), q.stride(0), n_cols=cols,
                                   BLOCK=block, INTERP=_interpreting(), SPLIT16=q.shape[0] == 2,
                                   F16=q.element_size() == 2, num_warps=4)  # e4m3 1 byte, fp16 2

    def _fit_shared_memory(self) -> None:
        """The shared-memory check with the compiler's own figure (see :func:`fit_shared_memory`)."""
        self.cfg1, self.cfg2 = fit_shared_memory(self._launch, self.cfg1, self.cfg2, device_smem_limit(self.x.device))

    def __call__(self) -> Any:
        a = self.align
        if a.num_blocks == 0:
            self.out.zero_()
            return self.out
        if self.rowscale:
            self._quant_rows(self.x, self.xq, self.xs)
        elif self.xin is not self.x:
            self.xin.copy_(self.x)
        self._launch(1, self.cfg1)
        if self.rowscale:
            self._quant_rows(self.inter, self.interq, self.inters)
        self._launch(2, self.cfg2)
        # combine: the k rows of each token (rows of slots routed elsewhere stay zero from construction)
        require("torch", "running the MoE kernel").sum(self.partial.view(self.T, self.k, self.H), dim=1,
                                                         out=self.out)
        return self.out


def moe_reference(x: Any, w1: Any, w2: Any, topk_ids: Any, topk_weights: Any, act_quant: Any = None) -> Any:
    """float32 reference of the unit: ``Σ_j w[t, j] · W2_e (silu(g) · u)`` with ``[g; u] = W1_e x[t]``.

    Args:
        x: ``[T, H]``; w1: float ``[E, 2I, H]``; w2: float ``[E, H, I]``; topk_ids / topk_weights ``[T, k]`` (ids
            outside ``[0, E)`` are skipped, as an EP rank skips experts it does not hold).
        act_quant: a function applied to x and to each expert's intermediate rows before their GEMM (float32
            ``[R, C]`` → float32 ``[R, C]``; e.g. a quantise-dequantise of the activations, to check a kernel that
            quantises them against the same rounding); None: none.

    Returns:
        float32 ``[T, H]``.
    """
    torch = require("torch", "the MoE reference")
    E, I2, H = w1.shape
    i = I2 // 2
    q = act_quant or (lambda a: a)
    xf = q(x.float())
    out = torch.zeros(x.shape[0], H, dtype=torch.float32, device=x.device)
    for e in torch.unique(topk_ids).tolist():
        if e < 0 or e >= E:
            continue
        t, j = torch.nonzero(topk_ids == e, as_tuple=True)
        h = xf[t] @ w1[e].float().T
        a = q(torch.nn.functional.silu(h[:, :i]) * h[:, i:])
        out.index_add_(0, t, (a @ w2[e].float().T) * topk_weights[t, j].float()[:, None])
    return out
