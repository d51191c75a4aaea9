"""Decode routing of one MoE layer: the routing grammar, the exact statistics, and sampling.

A decode step sends T tokens through a MoE layer with E routed experts; each token picks ``top_k`` = k **distinct**
experts. Under expert parallelism EP = G the experts are placed contiguously, E/G per GPU (GPU g holds experts
[g·E/G, (g+1)·E/G)). Everything here is per layer and counts tokens or (token, expert) pairs; no times, no bytes.

- :mod:`~truepeak.moe.routing.grammar`: the one routing grammar of ``moe plan`` and ``moe bench``:
  :func:`parse_routing` turns ``'uniform'``, ``'powerlaw:<alpha>[:random|sorted|balanced]'``, a per-expert histogram
  or a ``topk_ids`` dump into a :class:`Routing` (per-expert inclusion probabilities); :func:`routing_label`,
  :func:`routing_file`, :func:`powerlaw_probs`, :func:`load_topk_ids`.
- :mod:`~truepeak.moe.routing.exact`: closed forms under uniform routing: :func:`expert_load_pmf`,
  :func:`expected_active_experts`, :func:`expected_max_load`, :func:`padding_waste`, :func:`gpu_pairs_pmf`,
  :func:`tokens_sent_fraction`.
- :mod:`~truepeak.moe.routing.stats`: :func:`routing_stats` ``(tokens, top_k, num_experts, *, routing='uniform',
  ep=1, seed=0) -> RoutingStats`` for any routing, and :class:`RoutingStats`.
- :mod:`~truepeak.moe.routing.sampling`: :func:`sample_topk`, :func:`sample_routing_ids` (the top-k ids of T tokens
  from any spec, as ``moe bench`` routes its tokens), :func:`monte_carlo` (numpy) and :func:`empirical_stats` (from a
  real ``topk_ids`` dump), same RoutingStats.

numpy is imported lazily (cells-model polynomials, skewed GPU loads, Monte-Carlo, dump files); importing this package
needs only the standard library.
"""

from truepeak.moe.routing.exact import (EXACT_MAX_PAIRS, expected_active_experts, expected_max_load, expert_load_pmf,
                                        gpu_pairs_pmf, padding_waste, tokens_sent_fraction)
from truepeak.moe.routing.grammar import (FILE_SUFFIXES, PLACEMENTS, ROUTING_FORMS, Routing, load_topk_ids,
                                          parse_routing, powerlaw_probs, routing_file, routing_label)
from truepeak.moe.routing.sampling import empirical_stats, monte_carlo, sample_routing_ids, sample_topk
from truepeak.moe.routing.stats import RoutingStats, routing_stats

__all__ = ["EXACT_MAX_PAIRS", "FILE_SUFFIXES", "PLACEMENTS", "ROUTING_FORMS", "Routing", "RoutingStats",
           "empirical_stats", "expected_active_experts", "expected_max_load", "expert_load_pmf", "gpu_pairs_pmf",
           "load_topk_ids", "monte_carlo", "padding_waste", "parse_routing", "powerlaw_probs", "routing_file",
           "routing_label", "routing_stats", "sample_routing_ids", "sample_topk", "tokens_sent_fraction"]
