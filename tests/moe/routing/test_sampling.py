"""Sampling and observed routing (truepeak.moe.routing.sampling): the statistics of a real topk_ids dump."""

from __future__ import annotations

import pytest

from truepeak.errors import TruepeakError
from truepeak.moe.routing import empirical_stats, sample_routing_ids


IDS = [[0, 1], [0, 2], [0, 3]]


def test_empirical_stats_by_hand():
    """E = 4, k = 2, EP2 (GPU 0: experts 0, 1; GPU 1: 2, 3): counts [3, 1, 1, 1]; GPU pairs 4 and 2; tokens sent:
    GPU 0 all 3, GPU 1 two; tiles of 2 rows: 2 + 1 + 1 + 1."""
    s = empirical_stats(IDS, 4, ep=2)
    assert (s.tokens, s.top_k, s.method) == (3, 2, "empirical")
    assert (s.busiest_expert_tokens, s.active_experts, s.busiest_gpu_pairs) == (3, 4, 4)
    assert (s.tokens_sent_per_gpu, s.busiest_gpu_tokens_sent, s.busiest_gpu_active_experts) == (2.5, 3, 2)
    assert s.expected_tiles(2) == 5 and s.expected_padding_waste(2) == pytest.approx(1 - 6 / 10)


def test_sample_routing_ids_replays_a_dump_and_samples_every_other_spec(tmp_path):
    import numpy as np

    f = tmp_path / "topk.txt"
    f.write_text("0 1\n2 3\n1 2\n")
    ids = sample_routing_ids(str(f), 7, 2, 4)
    assert ids.dtype == np.int64 and ids.tolist() == [[0, 1], [2, 3], [1, 2]] * 2 + [[0, 1]]
    # a histogram with weight on experts 0 and 1 only, top-2: both are picked by every token (p = 1 each)
    h = sample_routing_ids([5, 5, 0, 0], 50, 2, 4)
    assert sorted(map(sorted, h.tolist())) == [[0, 1]] * 50
    # uniform: distinct ids in [0, E), the same draw for the same seed, another for another seed
    u = sample_routing_ids("uniform", 200, 8, 256, seed=3)
    assert u.shape == (200, 8) and all(len(set(r)) == 8 for r in u.tolist()) and 0 <= u.min() and u.max() < 256
    assert np.array_equal(u, sample_routing_ids("uniform", 200, 8, 256, seed=3))
    assert not np.array_equal(u, sample_routing_ids("uniform", 200, 8, 256, seed=4))
    # powerlaw:1.2:sorted, E = 64, k = 4: rank 0 (expert 0) saturates at p = 1 (4 / sum (r + 1)^-1.2 = 1.54 > 1)
    p = sample_routing_ids("powerlaw:1.2:sorted", 300, 4, 64)
    assert all(0 in row for row in p.tolist())
    with pytest.raises(TruepeakError, match="tokens T 0 must be an integer >= 1"):
        sample_routing_ids("uniform", 0, 2, 4)
