"""Routing statistics of one MoE layer for a decode batch: :func:`routing_stats` and :class:`RoutingStats`.

What is computed (``RoutingStats.method`` says which path was taken): uniform routing by the closed forms of
:mod:`truepeak.moe.routing.exact` (``method='exact'``); any other routing as below.

**Skewed routing** — ``method='approximation'``. Expert e is picked by a token with probability p_e (Σ p_e = k,
each ≤ 1); every token still picks exactly k distinct experts (:func:`truepeak.moe.routing.sampling.monte_carlo`
draws them by systematic sampling over a random order, which has exactly these inclusion probabilities). The
statistics treat experts as independent: n_e ~ Binomial(T, p_e) independently, so E[max] = Σ_m [1 − Π_e F_e(m)],
active experts Σ_e [1 − (1 − p_e)^T], the load of GPU g the convolution of its experts' binomials; tokens sent to g ~
Binomial(T, π_g) with π_g = 1 − Π_{e∈g} (1 − p_e) corrected for the k-distinct exclusivity (:func:`_hit_probability`;
exact when uniform). Measured against Monte-Carlo: within 3 % for the busiest expert and GPU, active experts and
tokens sent (E = 8 … 256, α = 0.6 … 1.2, T = 32 … 512; tests/moe/routing/test_stats.py). GPU-level values depend on
the placement drawn from ``seed`` (busiest GPU ±20 % between seeds at α ≈ 1, EP8).

**Padding** (docs/method.md, 'Padding per expert'): a grouped GEMM that pads each expert's rows to a tile of BLOCK_M
rows (Triton fused_moe ``moe_align_block_size``; DeepGEMM contiguous layout) computes ceil(n_e/B)·B rows for n_e real
ones. :meth:`RoutingStats.padding_waste` is the *mean-based* share 1 − r/(ceil(r/B)·B), r = T·k/E (E=512, k=10, T=96:
r = 1.875, B = 64 → 97.1 %). :meth:`RoutingStats.expected_padding_waste` is the expected padded share over the load
distribution, 1 − T·k / (B·Σ_e E[ceil(n_e/B)]) (idle experts pad nothing).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

from truepeak.moe.routing.checks import _check_int, _check_tke
from truepeak.moe.routing.exact import (EXACT_MAX_PAIRS, _binom_window, _cells_expected_max, _hypergeom_window,
                                        _max_independent, _max_independent_mixed, _poisson_binomial,
                                        _sum_of_binomials, expected_max_load, padding_waste, tokens_sent_fraction)
from truepeak.moe.routing.grammar import Routing, parse_routing


@dataclass(frozen=True)
class RoutingStats:
    """Routing statistics of one MoE layer for a decode batch (per layer; counts of tokens or (token, expert) pairs).

    Fields:
        tokens, top_k, num_experts, ep: T, k, E, EP degree (G).
        routing: label of the routing distribution ('uniform', 'powerlaw:1.2', 'histogram', 'dump:<file>').
        method: 'exact' (uniform closed forms, :mod:`truepeak.moe.routing.exact`), 'approximation' (skewed,
            independent experts), 'monte-carlo', 'empirical' (one observed batch).
        mean_tokens_per_expert: T·k/E (rows per expert GEMM on average).
        busiest_expert_tokens: E[max_e n_e].
        hottest_expert_mean: T·max_e p_e, the mean load of the most popular expert (= the mean when uniform).
        active_experts: E[#experts with n_e > 0] (expert weight matrices streamed in the step).
        experts_per_gpu: E/G.
        mean_gpu_pairs: T·k/G, (token, expert) pairs per GPU on average.
        busiest_gpu_pairs: E[max_g pairs on GPU g] (sets the EP step time).
        active_experts_per_gpu: mean active experts on one GPU.
        busiest_gpu_active_experts: E[max_g active experts on g].
        tokens_sent_per_gpu: mean over GPUs of E[distinct tokens with ≥ 1 expert on g] (all-to-all dispatch rows per
            GPU; T when G = 1).
        busiest_gpu_tokens_sent: E[max_g tokens sent to g].
        expert_probs: per-expert inclusion probability p_e (Σ = k), for padding and custom use.
    """

    tokens: int
    top_k: int
    num_experts: int
    ep: int
    routing: str
    method: str
    mean_tokens_per_expert: float
    busiest_expert_tokens: float
    hottest_expert_mean: float
    active_experts: float
    experts_per_gpu: int
    mean_gpu_pairs: float
    busiest_gpu_pairs: float
    active_experts_per_gpu: float
    busiest_gpu_active_experts: float
    tokens_sent_per_gpu: float
    busiest_gpu_tokens_sent: float
    expert_probs: tuple[float, ...] = field(default=(), repr=False, compare=False)
    expert_counts: tuple[int, ...] | None = field(default=None, repr=False, compare=False)

    @property
    def imbalance(self) -> float:
        """busiest_expert_tokens / mean_tokens_per_expert (GenZ's load-imbalance factor; 1 = perfect)."""
        return self.busiest_expert_tokens / self.mean_tokens_per_expert

    @property
    def gpu_imbalance(self) -> float:
        """busiest_gpu_pairs / mean_gpu_pairs (the "EP max/mean per GPU" of the table in
        tests/moe/routing/test_stats.py)."""
        return self.busiest_gpu_pairs / self.mean_gpu_pairs

    def padding_waste(self, block_m: int) -> float:
        """Mean-based padded share (docs/method.md, 'Padding per expert'): 1 − r/(ceil(r/B)·B), r = mean tokens per
        expert (:func:`padding_waste`)."""
        return padding_waste(self.mean_tokens_per_expert, block_m)

    def expected_tiles(self, block_m: int) -> float:
        """Σ_e E[ceil(n_e / B)]: M-tiles a per-expert-padded grouped GEMM computes (idle experts: none)."""
        b = _check_int("block_m", block_m)
        if self.expert_counts is not None:
            return float(sum(-(-n // b) for n in self.expert_counts))
        total = 0.0
        cache: dict[float, float] = {}
        for p in self.expert_probs:
            if p not in cache:
                lo, pmf = _binom_window(self.tokens, p)
                cache[p] = sum(v * -(-(lo + j) // b) for j, v in enumerate(pmf))
            total += cache[p]
        return total

    def expected_padding_waste(self, block_m: int) -> float:
        """Expected padded share over the load distribution: 1 − T·k / (B · :meth:`expected_tiles`)."""
        b = _check_int("block_m", block_m)
        return 1.0 - self.tokens * self.top_k / (b * self.expected_tiles(b))

    def as_dict(self) -> dict:
        """The fields and derived ratios as a JSON-ready dict (expert_probs left out)."""
        d = {k: getattr(self, k) for k in ("tokens", "top_k", "num_experts", "ep", "routing", "method",
                                           "mean_tokens_per_expert", "busiest_expert_tokens", "hottest_expert_mean",
                                           "active_experts", "experts_per_gpu", "mean_gpu_pairs", "busiest_gpu_pairs",
                                           "active_experts_per_gpu", "busiest_gpu_active_experts",
                                           "tokens_sent_per_gpu", "busiest_gpu_tokens_sent")}
        d["imbalance"] = self.imbalance
        d["gpu_imbalance"] = self.gpu_imbalance
        return d


def routing_stats(tokens: int, top_k: int, num_experts: int, *, routing="uniform", ep: int = 1,
                  seed: int = 0) -> RoutingStats:
    """Routing statistics of one MoE layer for T tokens (the formulas and approximations: this module's and
    :mod:`truepeak.moe.routing.exact`'s docstrings).

    Args:
        tokens: T, tokens entering the layer in one decode step (global batch at EP; ≥ 1).
        top_k: k distinct experts per token.
        num_experts: E routed experts (shared experts are not routed and not counted).
        routing: 'uniform', 'powerlaw:<alpha>', a histogram of E counts, topk_ids rows, a dump file path or a
            :class:`Routing` (:func:`parse_routing`).
        ep: expert-parallel degree G; must divide E (contiguous placement, E/G experts per GPU).
        seed: seeds the power-law rank → expert-id permutation (deterministic for a given seed).

    Raises:
        TruepeakError: T < 1, k > E, ep not dividing E, a bad routing spec.
    """
    t, k, e, g = _check_tke(tokens, top_k, num_experts, ep)
    r = parse_routing(routing, e, k, seed=seed, ep=g)
    s = e // g
    if r.probs is None:
        return _uniform_stats(t, k, e, g, s)
    return _skewed_stats(t, k, e, g, s, r)


def _uniform_stats(t: int, k: int, e: int, g: int, s: int) -> RoutingStats:
    pairs = t * k
    active_frac = -math.expm1(t * math.log1p(-k / e)) if k < e else 1.0
    if g == 1:
        busiest_pairs, busiest_active, pi = float(pairs), e * active_frac, 1.0
        busiest_sent = float(t)
    else:
        if pairs <= EXACT_MAX_PAIRS:
            busiest_pairs = _cells_expected_max(g, t, k, e, upper=t * min(k, s))
        else:
            busiest_pairs = _max_independent([_hypergeom_window(t * e, t * s, pairs)], count=g)
        busiest_active = _max_independent([_binom_window(s, active_frac)], count=g)
        pi = tokens_sent_fraction(k, e, g)
        if s == 1:  # one expert per GPU: the tokens sent to a GPU are its expert's tokens
            busiest_sent = expected_max_load(t, k, e)
        else:
            busiest_sent = _max_independent([_binom_window(t, pi)], count=g)
    return RoutingStats(
        tokens=t, top_k=k, num_experts=e, ep=g, routing="uniform", method="exact",
        mean_tokens_per_expert=pairs / e, busiest_expert_tokens=expected_max_load(t, k, e),
        hottest_expert_mean=pairs / e, active_experts=e * active_frac, experts_per_gpu=s, mean_gpu_pairs=pairs / g,
        busiest_gpu_pairs=busiest_pairs, active_experts_per_gpu=s * active_frac,
        busiest_gpu_active_experts=busiest_active, tokens_sent_per_gpu=t * pi, busiest_gpu_tokens_sent=busiest_sent,
        expert_probs=tuple([k / e] * e))


def _skewed_stats(t: int, k: int, e: int, g: int, s: int, r: Routing) -> RoutingStats:
    p = list(r.probs)
    pairs = t * k
    groups = [p[i * s:(i + 1) * s] for i in range(g)]
    # busiest expert: independent binomials, grouped by equal p for speed
    uniq: dict[float, int] = {}
    for v in p:
        uniq[v] = uniq.get(v, 0) + 1
    busiest = _max_independent_mixed([(_binom_window(t, v), n) for v, n in uniq.items()])
    active = [-math.expm1(t * math.log1p(-v)) if v < 1 else 1.0 for v in p]
    if g == 1:
        busiest_pairs, busiest_active, sent, busiest_sent = float(pairs), sum(active), float(t), float(t)
    else:
        busiest_pairs = _max_independent_mixed([(_sum_of_binomials(t, grp), 1) for grp in groups])
        busiest_active = _max_independent_mixed([(_poisson_binomial(active[i * s:(i + 1) * s]), 1)
                                                 for i in range(g)])
        pis = [_hit_probability(grp, k, e) for grp in groups]
        sent = t * sum(pis) / g
        busiest_sent = busiest if s == 1 else _max_independent_mixed([(_binom_window(t, pi), 1) for pi in pis])
    return RoutingStats(
        tokens=t, top_k=k, num_experts=e, ep=g, routing=r.label, method="approximation",
        mean_tokens_per_expert=pairs / e, busiest_expert_tokens=busiest, hottest_expert_mean=t * max(p),
        active_experts=sum(active), experts_per_gpu=s, mean_gpu_pairs=pairs / g, busiest_gpu_pairs=busiest_pairs,
        active_experts_per_gpu=sum(active) / g, busiest_gpu_active_experts=busiest_active, tokens_sent_per_gpu=sent,
        busiest_gpu_tokens_sent=busiest_sent, expert_probs=tuple(p))


def _hit_probability(ps: Sequence[float], k: int, e: int) -> float:
    """P(a token picks at least one expert of a group with inclusion probabilities ``ps``): the independent-experts
    value 1 − Π(1 − p) times the exclusivity correction of a uniform group with the same mean μ = Σ p (its exact
    hypergeometric P(none) = Π_{i<k} (E − s' − i)/(E − i), s' = μ·E/k, over its binomial one (1 − k/E)^{s'}).
    Exact for uniform routing; within a few % of Monte-Carlo for power-law routing (tests/moe/routing/test_stats.py)."""
    if len(ps) == 1 or any(v >= 1.0 for v in ps):
        return min(1.0, max(ps))
    log_none = sum(math.log1p(-v) for v in ps)
    s_eq = sum(ps) * e / k
    if k < e and s_eq + k - 1 < e:
        hyper = sum(math.log((e - s_eq - i) / (e - i)) for i in range(k))
        log_none += hyper - s_eq * math.log1p(-k / e)
    return -math.expm1(min(log_none, 0.0))
