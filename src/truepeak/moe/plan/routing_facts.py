"""Routing facts of one MoE layer for a plan: the routing statistics (:mod:`truepeak.moe.routing`) at the tokens of
one micro-batch, memoised, and what the plan's busiest GPU computes."""

from __future__ import annotations

from dataclasses import dataclass, fields

from truepeak.moe.layout import Layout

_STATS_CACHE: dict = {}


def _stats(tokens: int, top_k: int, num_experts: int, routing, ep: int):
    """:func:`truepeak.moe.routing.routing_stats`, memoised for hashable routing specs (a what-if table asks for the
    same (T, k, E, routing, ep) from several layouts); :func:`_observed` for a dump of exactly ``tokens`` rows."""
    from truepeak.moe.routing import routing_stats

    def compute():
        return _observed(tokens, top_k, num_experts, routing, ep) or routing_stats(tokens, top_k, num_experts,
                                                                                   routing=routing, ep=ep)

    try:
        key = (tokens, top_k, num_experts, routing, ep)
        hash(key)
    except TypeError:
        return compute()
    if key not in _STATS_CACHE:
        if len(_STATS_CACHE) > 4096:
            _STATS_CACHE.clear()
        _STATS_CACHE[key] = compute()
    return _STATS_CACHE[key]


def _observed(tokens: int, top_k: int, num_experts: int, routing, ep: int):
    """The OBSERVED statistics (:func:`truepeak.moe.routing.empirical_stats`) when ``routing`` is a topk_ids dump file
    of exactly ``tokens`` rows (the batch the plan is for), else None.

    A dump is otherwise read as per-expert probabilities and the expected busiest expert is computed from them, which
    counts the dump's own sampling noise twice: for a uniform 512-token DeepSeek-V3 dump whose busiest expert got 29
    tokens (and busiest EP8 GPU 536 pairs), the model says 35.2 (553.9). At the dump's own T the observed values are
    the answer; at other T the probabilities are all there is.
    """
    from dataclasses import replace

    from truepeak.moe.routing import empirical_stats, load_topk_ids, routing_file

    p = routing_file(routing)
    if p is None:
        return None
    rows = load_topk_ids(p)
    if len(rows) != tokens or not isinstance(rows[0], list) or len(rows[0]) != top_k or top_k == num_experts:
        return None                      # another T, a histogram, or a malformed file (routing_stats says what)
    st = empirical_stats(rows, num_experts, ep=ep)
    return replace(st, routing=f"dump:{p.name}, observed")


@dataclass(frozen=True)
class RoutingFacts:
    """Routing facts of one MoE layer for the tokens of one micro-batch (counts of tokens or (token, expert) pairs).

    Attributes:
        routing, method: the routing's label and how its statistics were computed
            (:class:`truepeak.moe.routing.RoutingStats`).
        mean_tokens_per_expert, busiest_expert_tokens, active_experts, experts_per_gpu, mean_gpu_pairs,
        busiest_gpu_pairs, busiest_gpu_active_experts, busiest_gpu_tokens_sent: as
            :class:`~truepeak.moe.routing.RoutingStats`.
        padding_16, padding_64: the mean-based padded share of a grouped GEMM with BLOCK_M 16 / 64 rows
            (:meth:`~truepeak.moe.routing.RoutingStats.padding_waste`); expected_padding_16, expected_padding_64:
            the expected share over the load distribution (``expected_padding_waste``).
        tokens, top_k, num_experts, ep: T, k, E and the EP degree.
        gpu_pairs, gpu_active_experts, gpu_tokens_received: what the plan's busiest GPU computes and receives: the
            busiest GPU's pairs, active experts and dispatched tokens under EP; all T·k pairs, every active expert
            and all T tokens without.
    """

    routing: str
    method: str
    mean_tokens_per_expert: float
    busiest_expert_tokens: float
    active_experts: float
    experts_per_gpu: int
    mean_gpu_pairs: float
    busiest_gpu_pairs: float
    busiest_gpu_active_experts: float
    busiest_gpu_tokens_sent: float
    padding_16: float
    padding_64: float
    expected_padding_16: float
    expected_padding_64: float
    tokens: int
    top_k: int
    num_experts: int
    ep: int
    gpu_pairs: float
    gpu_active_experts: float
    gpu_tokens_received: float

    def to_dict(self) -> dict:
        """The facts by name, in field order (JSON-ready)."""
        return {f.name: getattr(self, f.name) for f in fields(self)}


def _routing_facts(tokens: int, model, layout: Layout, routing) -> RoutingFacts:
    """Routing facts of one MoE layer for ``tokens`` tokens, from :func:`truepeak.moe.routing.routing_stats`."""
    e = model.experts
    rs = _stats(tokens, e.top_k, e.num_experts, routing, layout.ep)
    if layout.ep > 1:
        pairs, active, sent = rs.busiest_gpu_pairs, rs.busiest_gpu_active_experts, rs.busiest_gpu_tokens_sent
    else:
        pairs, active, sent = float(tokens * e.top_k), rs.active_experts, float(tokens)
    return RoutingFacts(
        rs.routing, rs.method, rs.mean_tokens_per_expert, rs.busiest_expert_tokens, rs.active_experts,
        rs.experts_per_gpu, rs.mean_gpu_pairs, rs.busiest_gpu_pairs, rs.busiest_gpu_active_experts,
        rs.busiest_gpu_tokens_sent, rs.padding_waste(16), rs.padding_waste(64), rs.expected_padding_waste(16),
        rs.expected_padding_waste(64), tokens, e.top_k, e.num_experts, layout.ep, pairs, active, sent)


def clear_routing_cache() -> None:
    """Forget the memoised routing statistics (a fresh command starts without them; a benchmark of the planner's
    speed clears them between runs)."""
    _STATS_CACHE.clear()
