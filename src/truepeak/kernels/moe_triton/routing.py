"""Routing metadata of the MoE kernels: the (token, slot) pairs sorted by expert and padded to whole token blocks
(:func:`align_routing`), and the mean tokens per expert that keys the configuration. torch is imported inside the
functions."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from truepeak.errors import TruepeakError, require


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


def expert_counts(topk_ids: Any, num_experts: int) -> list[int]:
    """Tokens routed to each of the ``num_experts`` local experts (ids outside ``[0, num_experts)`` are another
    rank's and are not counted), as ints. Reads back to the host (call it outside any CUDA graph)."""
    torch = require("torch", "counting tokens per expert")
    valid = (topk_ids >= 0) & (topk_ids < num_experts)
    return torch.bincount(topk_ids[valid].reshape(-1).long(), minlength=num_experts).tolist()


def mean_of_counts(counts: list[int]) -> float:
    """Routed slots per expert that received any, and 1 when none did: the mean of :func:`expert_counts`."""
    active = [c for c in counts if c > 0]
    return max(1.0, sum(active) / max(1, len(active)))


def mean_tokens_per_expert(topk_ids: Any, num_experts: int) -> float:
    """The configuration key (docs/method.md, 'Padding per expert') when none is given: routed slots per local expert
    that received any (ids outside ``[0, num_experts)`` are another rank's), and 1 when no expert is local (T = 0 too).
    Reads back to the host (call it outside any CUDA graph)."""
    return mean_of_counts(expert_counts(topk_ids, num_experts))


#: An expert is busy when it received more than this many times the mean tokens per active expert
#: (:func:`busy_experts`). Under power-law 1.2 routing (DeepSeek-V3, bf16 and fp8, 8-32 tokens per expert, the busy
#: experts on a second stream with their default rules or 64- or 128-row tiles) 2 and 4 were within 3 points of the
#: read bandwidth of each other, neither ahead at every point: docs/results/h200/moe-routing/README.md, 'Busy experts
#: in a launch of their own'.
BUSY_FACTOR = 2.0


def busy_experts(counts: Any, light_block_m: int | None = None) -> list[bool] | None:
    """The experts a skewed routing should run in a launch of their own: those with more than :data:`BUSY_FACTOR`
    times the mean tokens per active expert (:func:`mean_of_counts`), as one bool per local expert; None when no
    expert is busy or (with ``light_block_m``, the token block of the other experts' configuration) when no busy
    expert has more than ``light_block_m`` tokens, so that the light configuration would run each of them in one
    token block anyway. Fewer than half the active experts can be busy (the mean is over them).

    ``counts``: tokens per local expert, a sequence of integers >= 0 (ints, numpy integers, a 1-D integer tensor or
    array).

    Example: counts ``[1, 0, 20, 3]`` (mean 8): expert 2 is busy (20 > 16): ``[False, False, True, False]``; with
    ``light_block_m=32`` None (20 tokens fit one 32-token block).

    Raises:
        TruepeakError: counts not a sequence of integers >= 0, or ``light_block_m`` not a positive integer."""
    import operator

    def integer(v: Any) -> int | None:
        if type(v).__name__ in ("bool", "bool_") or isinstance(v, float):
            return None
        try:
            return operator.index(v)
        except TypeError:
            return None

    if (isinstance(counts, (str, bytes, dict, set)) or not hasattr(counts, "__len__")
            or getattr(counts, "ndim", 1) != 1):
        raise TruepeakError(f"counts must be a 1-D sequence of integers >= 0 (tokens per local expert), got "
                            f"{type(counts).__name__} {counts!r:.80}")
    values = [integer(c) for c in counts]
    if any(v is None or v < 0 for v in values):
        shown = [c for c, v in zip(counts, values) if v is None or v < 0][:4]
        raise TruepeakError(f"counts must be integers >= 0 (tokens per local expert), got {shown!r:.120}")
    block = None if light_block_m is None else integer(light_block_m)
    if light_block_m is not None and (block is None or block <= 0):
        raise TruepeakError(f"light_block_m must be a positive integer (a token block), got {light_block_m!r}")
    limit = BUSY_FACTOR * mean_of_counts(values)
    busy = [c > limit for c in values]
    if not any(busy):
        return None
    if block is not None and max(c for c, b in zip(values, busy) if b) <= block:
        return None
    return busy
