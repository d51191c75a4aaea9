"""Sampling and observed routing (truepeak.moe.routing.sampling): the statistics of a real topk_ids dump."""

from __future__ import annotations

import pytest

from truepeak.moe.routing import empirical_stats


IDS = [[0, 1], [0, 2], [0, 3]]


def test_empirical_stats_by_hand():
    """E = 4, k = 2, EP2 (GPU 0: experts 0, 1; GPU 1: 2, 3): counts [3, 1, 1, 1]; GPU pairs 4 and 2; tokens sent:
    GPU 0 all 3, GPU 1 two; tiles of 2 rows: 2 + 1 + 1 + 1."""
    s = empirical_stats(IDS, 4, ep=2)
    assert (s.tokens, s.top_k, s.method) == (3, 2, "empirical")
    assert (s.busiest_expert_tokens, s.active_experts, s.busiest_gpu_pairs) == (3, 4, 4)
    assert (s.tokens_sent_per_gpu, s.busiest_gpu_tokens_sent, s.busiest_gpu_active_experts) == (2.5, 3, 2)
    assert s.expected_tiles(2) == 5 and s.expected_padding_waste(2) == pytest.approx(1 - 6 / 10)
