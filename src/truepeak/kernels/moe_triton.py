"""truepeak's fused-MoE Triton kernels for decode: stream each active expert's weights once.

Measured on an H200 (docs/results/h200/moe/README.md): bf16 weights reach 95-100 % of the measured read bandwidth at
<= 8 tokens per expert (all 256 experts on one GPU); fp8 (w8a16) 50-62 % and nvfp4/mxfp4 (w4a16) 11-18 %, bound by
the in-register dequantisation, not by memory.

The unit of work (issue #5): hidden states ``x [T, H]`` and router output (``topk_ids``, ``topk_weights`` ``[T, k]``)
→ ``out [T, H] = Σ_j w[t, j] · down_e(act(gate_up_e(x[t])))`` with ``e = topk_ids[t, j]`` and the SiLU-gated
activation ``act(g, u) = silu(g) · u`` (DeepSeek-V3, GLM-5, Qwen3; gpt-oss's clamped SwiGLU with alpha = 1.702 and
limit 7 is *not* implemented: its cost is the same elementwise work, the benchmark runs SiLU-gated for every model).

Design (why it reaches the weight-streaming roofline at a few tokens per expert):

- Routing metadata is computed once per routing, on the host side of the timed region, by :func:`align_routing`:
  the (token, slot) pairs sorted by expert and padded to ``block_m`` rows per block, one expert per block
  (vLLM's ``moe_align_block_size`` layout). ``block_m`` is chosen from the *tokens per expert* (case C17), not the
  batch, so that at ≤ 32 tokens per expert almost every active expert is one block: its weights are read once.
- Each program computes a ``block_n x block_m`` tile of one expert's output with the **weights as the MMA's A
  operand** ("swap AB"): the weight tile ``[block_n, block_k]`` is the big operand, the few tokens are the MMA's N
  (16..128), so no MMA rows are wasted on padding tokens and the weights can be dequantised in registers.
- Programs are ordered M-block-fastest: the M blocks of one expert that has more tokens than ``block_m`` run next to
  each other and share its weight tile through L2.
- Kernel 1 computes gate and up tiles together (two accumulators) and writes ``silu(g) · u`` per (token, slot) row;
  kernel 2 is the down projection, scaled by the routing weight, written per (token, slot) row; the ``k`` rows of a
  token are summed by one ``sum`` (the combine).
- Weight formats (``wfmt``): ``bf16``; ``fp8`` (e4m3, per-channel fp32 scales, applied to the accumulator once);
  ``fp8_block`` (128 x 128 fp32 block scales, applied per K step); ``nvfp4`` (e2m1 packed two per byte, e4m3 scale per
  16 and a per-expert fp32 scale) and ``mxfp4`` (e2m1, e8m0 scale per 32). FP4 values are decoded in registers with
  integer bit operations into fp16 (``(c & 7) << 9 | (c & 8) << 12`` is an fp16 whose value is the e2m1 value times
  2^-14; the 2^14 is folded into the block scale), multiplied by the block scale in fp16 and fed to an fp16 MMA with
  the activations cast to fp16. Even and odd K elements (low and high nibbles) are two MMAs against the even and odd
  activation columns, so the nibbles never need interleaving. This is weight-only quantisation (W4A16 / W8A16): the
  Hopper path. Blackwell's native block-scaled fp4 MMA (sm_100+) is not used here (it would be gated on compute
  capability >= 10.0 and was not run: the device is an H200, sm_90).
- ``KernelConfig.prefetch``: the next K step's weights are loaded into registers before the current step is converted
  and multiplied (register double buffering), used for fp4 at <= 32-row blocks where it beat Triton's pipelining.

Layouts: ``w1 [E, 2I, H]`` (gate rows 0..I-1, up rows I..2I-1; K = H contiguous), ``w2 [E, H, I]``; fp4 weights as
packed uint8 ``[E, N, K//2]`` with the scales of :mod:`truepeak.kernels.quant` (``[E, N, K//16]`` e4m3 for nvfp4 plus
a float32 ``[E]`` global scale; ``[E, N, K//32]`` uint8 e8m0 for mxfp4).

torch and triton are imported lazily inside functions; the ``@triton.jit`` kernels are built on first use.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass
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
    into registers before converting the current one (for dequantised formats).
    """

    block_m: int
    block_n: int
    block_k: int
    num_warps: int = 4
    num_stages: int = 4
    prefetch: bool = False

    def smem_bytes(self, wfmt: str, gated: bool) -> int:
        """Shared memory one program needs for its software pipeline: ``num_stages`` x (weight tile(s) + activation
        tile) bytes. Weight tile bytes per element: 2 (bf16), 1 (fp8), 0.5 (fp4) plus scales; the activation tile is
        bf16. An upper estimate of what Triton allocates (it may keep register-fed operands out of shared memory)."""
        wbytes = {"bf16": 2.0, "fp8": 1.0, "fp8_block": 1.0, "nvfp4": 0.5 + 1 / 16, "mxfp4": 0.5 + 1 / 32}[wfmt]
        tiles = 2 if gated else 1
        per_stage = tiles * self.block_n * self.block_k * wbytes + self.block_m * self.block_k * 2
        return int(math.ceil(self.num_stages * per_stage))


def choose_config(tokens_per_expert: float, wfmt: str, gated: bool, smem_limit: Any = None,
                  k_dim: int | None = None) -> KernelConfig:
    """Pick the tile configuration from the mean tokens per expert (case C17: a decode batch is many small GEMMs of
    ~tokens-per-expert rows each, so the batch size says nothing about the tile), then check its shared memory.

    ``block_m`` covers the busiest expert of a uniform routing at that mean (E[max] ≈ 1.8x the mean at 16 tokens per
    expert for E = 256, k = 8: ../shared/data/moe_models.md §5.2), so weights are streamed once up to ~32 tokens per
    expert. Stages are dropped until the config fits ``smem_limit`` (anything
    :func:`truepeak.hardware.limits.check_shared_memory` takes: an Accelerator, DeviceInfo, name or bytes; None skips).
    ``k_dim`` (the GEMM's K) shrinks ``block_k`` to a divisor of K.

    Raises:
        UnknownNameError: an unknown ``wfmt``.
        UnsupportedError: no stage count fits the limit, or K has no usable step.
    """
    check_wfmt(wfmt)
    t = max(float(tokens_per_expert), 1.0)
    if t <= 4:
        bm = 16
    elif t <= 10:
        bm = 32
    elif t <= 20:
        bm = 64
    else:
        bm = 128 if t > 40 else 64
    fp4 = wfmt in ("nvfp4", "mxfp4")
    bn = 64 if gated else 128
    bk = 256 if fp4 else 128
    warps = 8 if (bm > 64 or fp4) else 4
    stages = 4 if bm <= 64 else 3
    prefetch = False
    if fp4 and bm <= 32:
        # measured on the H200 (docs/results/h200/moe/README.md): for fp4 with 16/32-row blocks, prefetching the next
        # K step into registers with 2 stages and 4 warps beat Triton's own pipelining (18.0 vs 14.6 % of the read
        # bandwidth at 1 token per expert, 14.4 vs 12.4 % at 8); at 64 rows it was a little slower, at 128 rows 2x.
        warps, stages, prefetch = 4, 2, True
    if k_dim is not None:  # the largest power-of-two step <= bk that divides K (the kernels do not mask K)
        while bk > (32 if fp4 else 16) and k_dim % bk:
            bk //= 2
        if k_dim % bk:
            raise UnsupportedError(f"K={k_dim} is not a multiple of {bk}: the MoE kernel needs K in whole steps of "
                                   f"{'32 (fp4: 16 bytes)' if fp4 else '16'} elements")
    cfg = KernelConfig(bm, bn, bk, warps, stages, prefetch)
    if smem_limit is None:
        return cfg
    from truepeak.hardware.limits import check_shared_memory

    while True:
        try:
            check_shared_memory(smem_limit, cfg.smem_bytes(wfmt, gated),
                                f"MoE kernel tile {cfg.block_n}x{cfg.block_m}x{cfg.block_k}, {cfg.num_stages} stages")
            return cfg
        except UnsupportedError:
            if cfg.num_stages <= 1:
                raise
            cfg = KernelConfig(cfg.block_m, cfg.block_n, cfg.block_k, cfg.num_warps, cfg.num_stages - 1,
                               cfg.prefetch)


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
    import os

    return os.environ.get("TRITON_INTERPRET", "0") == "1"


# -- weights -----------------------------------------------------------------------------------------------------------
@dataclass
class ExpertWeights:
    """One projection's expert weights in a kernel format: ``data`` ``[E, N, K]`` (``[E, N, K//2]`` uint8 for fp4),
    ``scale`` (None for bf16; fp32 ``[E, N]`` for fp8; fp32 ``[E, N//128, K//128]`` for fp8_block; e4m3
    ``[E, N, K//16]`` for nvfp4; uint8 ``[E, N, K//32]`` for mxfp4), ``global_scale`` (fp32 ``[E]``, nvfp4 only)."""

    wfmt: str
    data: Any
    scale: Any = None
    global_scale: Any = None

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
            return quant.dequantize_nvfp4(self.data, self.scale, self.global_scale[:, None, None])
        return quant.dequantize_mxfp4(self.data, self.scale)


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
def _check_shapes(x: Any, w1: ExpertWeights, w2: ExpertWeights) -> tuple[int, int, int]:
    e1, n1, k1 = w1.shape
    e2, n2, k2 = w2.shape
    h = int(x.shape[-1])
    if not (e1 == e2 and k1 == h and n2 == h and n1 == 2 * k2):
        raise TruepeakError(f"expert weight shapes do not fit: x [T, {h}], w1 {list(w1.shape)} (want [E, 2I, H]), "
                            f"w2 {list(w2.shape)} (want [E, H, I])")
    if w1.wfmt != w2.wfmt:
        raise TruepeakError(f"w1 and w2 must share one format, got {w1.wfmt} and {w2.wfmt}")
    return e1, k2, h


class FusedMoE:
    """A prepared launch of the two kernels for one routing: ``FusedMoE(x, w1, w2, topk_ids, topk_weights,
    tokens_per_expert)()`` returns ``out [T, H]`` (x's dtype). Buffers and routing metadata are made once in
    ``__init__`` (outside any timed region); ``__call__`` only launches kernels and is CUDA-graph capturable.

    Args:
        x: ``[T, H]`` bf16 hidden states. w1 / w2: :class:`ExpertWeights` ``[E, 2I, H]`` / ``[E, H, I]``.
        topk_ids: ``[T, k]`` int (local expert ids; others are dropped). topk_weights: ``[T, k]`` float.
        tokens_per_expert: the configuration key (C17); default the mean over experts with tokens.
        config: override both kernels' configuration (tests).
        smem_limit: device or bytes for :func:`choose_config`'s shared-memory check (C14).
        tune: KernelConfig field overrides applied to both kernels (e.g. ``{"prefetch": True, "num_stages": 1}``).
    """

    def __init__(self, x: Any, w1: ExpertWeights, w2: ExpertWeights, topk_ids: Any, topk_weights: Any,
                 tokens_per_expert: float | None = None, config: KernelConfig | None = None, smem_limit: Any = None,
                 tune: dict | None = None):
        torch = require("torch", "running the MoE kernel")
        self.E, self.I, self.H = _check_shapes(x, w1, w2)
        self.T, self.k = int(topk_ids.shape[0]), int(topk_ids.shape[1])
        if tokens_per_expert is None:
            valid = (topk_ids >= 0) & (topk_ids < self.E)
            tokens_per_expert = float(valid.sum().item()) / max(1, int(torch.unique(topk_ids[valid]).numel()))
        self.cfg1 = config or choose_config(tokens_per_expert, w1.wfmt, True, smem_limit, self.H)
        self.cfg2 = config or choose_config(tokens_per_expert, w2.wfmt, False, smem_limit, self.I)
        if tune:  # overrides of KernelConfig fields for both kernels (benchmark-side tuning)
            import dataclasses

            self.cfg1 = dataclasses.replace(self.cfg1, **tune)
            self.cfg2 = dataclasses.replace(self.cfg2, **tune)
        for cfg, kd in ((self.cfg1, self.H), (self.cfg2, self.I)):
            if kd % cfg.block_k:
                raise UnsupportedError(f"K={kd} is not a multiple of block_k={cfg.block_k}")
        if self.cfg1.block_m != self.cfg2.block_m:
            raise TruepeakError("both kernels must share block_m")
        self.x, self.w1, self.w2 = x, w1, w2
        self.align = align_routing(topk_ids, self.E, self.cfg1.block_m)
        self.topw = topk_weights.reshape(-1).float().contiguous()
        dev = x.device
        self.inter = torch.empty(self.T * self.k, self.I, dtype=x.dtype, device=dev)
        self.partial = torch.zeros(self.T * self.k, self.H, dtype=x.dtype, device=dev)
        self.out = torch.empty(self.T, self.H, dtype=x.dtype, device=dev)
        self.wfmt = _WFMT_ID[w1.wfmt]
        self._dummy = torch.zeros(1, dtype=torch.float32, device=dev)

    def _args(self, w: ExpertWeights) -> tuple[Any, Any, Any]:
        return w.data, (w.scale if w.scale is not None else self._dummy), (
            w.global_scale if w.global_scale is not None else self._dummy)

    def __call__(self) -> Any:
        gate_up, down = _kernels()
        a = self.align
        if a.num_blocks == 0:
            self.out.zero_()
            return self.out
        c1, c2 = self.cfg1, self.cfg2
        d, s, g = self._args(self.w1)
        grid1 = (a.num_blocks * (self.I // c1.block_n + (self.I % c1.block_n > 0)),)
        gate_up[grid1](self.x, d, s, g, self.inter, a.sorted_slots, a.block_expert,
                       a.num_blocks, a.num_slots, self.k, self.I, self.H, self.x.stride(0), self.inter.stride(0),
                       d.stride(0), d.stride(1), WFMT=self.wfmt, BLOCK_M=c1.block_m, BLOCK_N=c1.block_n,
                       BLOCK_K=c1.block_k, INTERP=_interpreting(), PREFETCH=c1.prefetch, num_warps=c1.num_warps,
                       num_stages=c1.num_stages)
        d, s, g = self._args(self.w2)
        grid2 = (a.num_blocks * (self.H // c2.block_n + (self.H % c2.block_n > 0)),)
        down[grid2](self.inter, d, s, g, self.partial, a.sorted_slots, a.block_expert, self.topw,
                    a.num_blocks, a.num_slots, self.H, self.I, self.inter.stride(0), self.partial.stride(0),
                    d.stride(0), d.stride(1), WFMT=self.wfmt, BLOCK_M=c2.block_m, BLOCK_N=c2.block_n,
                    BLOCK_K=c2.block_k, INTERP=_interpreting(), PREFETCH=c2.prefetch, num_warps=c2.num_warps,
                    num_stages=c2.num_stages)
        # combine: the k rows of each token (rows of slots routed elsewhere stay zero from construction)
        require("torch", "running the MoE kernel").sum(self.partial.view(self.T, self.k, self.H), dim=1,
                                                         out=self.out)
        return self.out


def moe_reference(x: Any, w1: Any, w2: Any, topk_ids: Any, topk_weights: Any) -> Any:
    """float32 reference of the unit: ``Σ_j w[t, j] · W2_e (silu(g) · u)`` with ``[g; u] = W1_e x[t]``.

    Args:
        x: ``[T, H]``; w1: float ``[E, 2I, H]``; w2: float ``[E, H, I]``; topk_ids / topk_weights ``[T, k]`` (ids
            outside ``[0, E)`` are skipped, as an EP rank skips experts it does not hold).

    Returns:
        float32 ``[T, H]``.
    """
    torch = require("torch", "the MoE reference")
    E, I2, H = w1.shape
    i = I2 // 2
    xf = x.float()
    out = torch.zeros(x.shape[0], H, dtype=torch.float32, device=x.device)
    for e in torch.unique(topk_ids).tolist():
        if e < 0 or e >= E:
            continue
        t, j = torch.nonzero(topk_ids == e, as_tuple=True)
        h = xf[t] @ w1[e].float().T
        a = torch.nn.functional.silu(h[:, :i]) * h[:, i:]
        out.index_add_(0, t, (a @ w2[e].float().T) * topk_weights[t, j].float()[:, None])
    return out
