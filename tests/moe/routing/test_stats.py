"""Routing statistics (truepeak.moe.routing.stats): case C17 exactly, every row of the routing table in
../shared/data/moe_models.md §5.2 against the table and against a Monte-Carlo simulation (within 2 %), skewed routing
against Monte-Carlo, and bad input."""

from __future__ import annotations

import math

import pytest

from truepeak.errors import TruepeakError
from truepeak.moe.routing import Routing, monte_carlo, routing_stats


# -- C17 --------------------------------------------------------------------------------------------------------------


def test_c17_rows_per_expert_and_padding():
    """../shared/cases.md C17: E = 512, top_k = 10, M ∈ {96, 512, 768}: rows per expert 1.875 / 10 / 15; padded share
    with a 64-row tile 97.1 / 84.4 / 76.6 %, with a 16-row tile 88.3 / 37.5 / 6.3 %. The definition that gives these
    is mean-based: 1 − r / (ceil(r/B)·B) (1 − 1.875/64 = 0.9707, 1 − 15/16 = 0.0625)."""
    expected = {96: (1.875, 1 - 1.875 / 64, 1 - 1.875 / 16), 512: (10.0, 1 - 10 / 64, 1 - 10 / 16),
                768: (15.0, 1 - 15 / 64, 1 - 15 / 16)}
    for m, (rows, w64, w16) in expected.items():
        s = routing_stats(m, 10, 512)
        assert s.mean_tokens_per_expert == rows
        assert s.padding_waste(64) == pytest.approx(w64, abs=1e-15)
        assert s.padding_waste(16) == pytest.approx(w16, abs=1e-15)
    pct = [round(100 * routing_stats(m, 10, 512).padding_waste(b), 1) for b in (64, 16) for m in (96, 512, 768)]
    assert pct[:5] == [97.1, 84.4, 76.6, 88.3, 37.5]
    assert routing_stats(768, 10, 512).padding_waste(16) == 0.0625  # "6.3 %"


def test_c17_expected_padding_over_the_load_distribution():
    """The distribution-based share is larger than the mean-based one at r = 10, B = 16 (loads spread over
    ceil(n/16) ∈ {1, 2}): by hand 1 − 10 / (16 · Σ_n P(n)·ceil(n/16)) with n ~ Binomial(512, 10/512)."""
    pmf = [math.comb(512, n) * (10 / 512) ** n * (1 - 10 / 512) ** (512 - n) for n in range(513)]
    tiles = sum(p * -(-n // 16) for n, p in enumerate(pmf))
    s = routing_stats(512, 10, 512)
    assert s.expected_tiles(16) == pytest.approx(512 * tiles, rel=1e-9)
    assert s.expected_padding_waste(16) == pytest.approx(1 - 10 / (16 * tiles), rel=1e-9)
    assert s.expected_padding_waste(16) > s.padding_waste(16)


# -- the routing table of moe_models.md §5.2 ---------------------------------------------------------------------------


TABLE_5_2 = [
    (256, 8, 1, 0.03, 1, 8, 2.6),
    (256, 8, 32, 1, 4.7, 163, 1.25),
    (256, 8, 128, 4, 10.6, 252, 1.12),
    (256, 8, 512, 16, 28.2, 256, 1.07),
    (256, 8, 2048, 64, 88, 256, 1.03),
    (384, 8, 512, 10.7, 21.4, 384, 1.06),
    (512, 10, 512, 10, 20.8, 512, 1.06),
    (128, 8, 512, 32, 47, 128, 1.06),
    (160, 8, 512, 25.6, 39.7, 160, 1.06),
    (8, 2, 64, 16, 21.4, 8, 1.34),
]


@pytest.mark.parametrize("e,k,t,mean,emax,active,gpu", TABLE_5_2)
def test_routing_table_rows_against_monte_carlo(e, k, t, mean, emax, active, gpu):
    """Within 2 % of a Monte-Carlo simulation on every row (busiest expert, active experts,
    EP8 busiest GPU). The MC (seeded numpy, ~0.5 % standard error) draws uniform k-subsets per token."""
    s = routing_stats(t, k, e, ep=8)
    mc = monte_carlo(t, k, e, ep=8, trials=min(4000, max(100, 800_000 // (t * k))), seed=1)
    assert s.method == "exact" and mc.method == "monte-carlo"
    assert s.busiest_expert_tokens == pytest.approx(mc.busiest_expert_tokens, rel=0.02)
    assert s.active_experts == pytest.approx(mc.active_experts, rel=0.02)
    assert s.busiest_gpu_pairs == pytest.approx(mc.busiest_gpu_pairs, rel=0.02)
    assert s.tokens_sent_per_gpu == pytest.approx(mc.tokens_sent_per_gpu, rel=0.02)
    assert s.busiest_gpu_tokens_sent == pytest.approx(mc.busiest_gpu_tokens_sent, rel=0.02)
    assert s.busiest_gpu_active_experts == pytest.approx(mc.busiest_gpu_active_experts, rel=0.02)


@pytest.mark.parametrize("e,k,t,mean,emax,active,gpu", TABLE_5_2)
def test_routing_table_rows_as_printed(e, k, t, mean, emax, active, gpu):
    """The printed (rounded) values of moe_models.md §5.2, to their last digit and within 2 % for the maxima."""
    s = routing_stats(t, k, e, ep=8)
    assert round(s.mean_tokens_per_expert, 2) == pytest.approx(mean, abs=0.051)
    assert round(s.active_experts) == active
    assert s.busiest_expert_tokens == pytest.approx(emax, rel=0.02)
    assert s.gpu_imbalance == pytest.approx(gpu, rel=0.02)


def test_imbalance_ratios():
    s = routing_stats(512, 8, 256, ep=8)
    assert s.imbalance == pytest.approx(s.busiest_expert_tokens / 16)
    assert s.gpu_imbalance == pytest.approx(s.busiest_gpu_pairs / 512)
    d = s.as_dict()
    assert d["imbalance"] == s.imbalance and d["method"] == "exact" and "expert_probs" not in d


# -- skewed routing ---------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("e,k,t,alpha", [(256, 8, 32, 1.01), (128, 8, 512, 1.2), (256, 8, 128, 0.6), (8, 2, 64, 1.2)])
def test_powerlaw_against_monte_carlo(e, k, t, alpha):
    """Skewed routing uses independent experts (module docstring); within 3 % of Monte-Carlo sampling exactly k
    distinct experts per token with the same inclusion probabilities."""
    rt = f"powerlaw:{alpha}"
    s = routing_stats(t, k, e, routing=rt, ep=8)
    mc = monte_carlo(t, k, e, routing=rt, ep=8, trials=min(400, max(20, 1_000_000 // (t * e))), seed=0)
    assert s.method == "approximation" and s.routing == f"powerlaw:{alpha:g}"
    for field in ("busiest_expert_tokens", "active_experts", "busiest_gpu_pairs", "tokens_sent_per_gpu",
                  "busiest_gpu_tokens_sent", "busiest_gpu_active_experts"):
        assert getattr(s, field) == pytest.approx(getattr(mc, field), rel=0.03), field
    assert s.busiest_gpu_pairs > routing_stats(t, k, e, ep=8).busiest_gpu_pairs  # skew loads one GPU more


def test_uniform_histogram_matches_uniform():
    s = routing_stats(512, 8, 256, routing=[5] * 256, ep=8)
    u = routing_stats(512, 8, 256, ep=8)
    assert s.method == "approximation" and s.routing == "histogram"
    assert s.active_experts == pytest.approx(u.active_experts, rel=1e-9)
    assert s.busiest_expert_tokens == pytest.approx(u.busiest_expert_tokens, rel=0.01)
    assert s.tokens_sent_per_gpu == pytest.approx(u.tokens_sent_per_gpu, rel=1e-9)


def test_histogram_keeps_expert_ids():
    """A histogram with all load on GPU 0's experts (ids 0..31 at EP8) puts every pair there."""
    hist = [1] * 32 + [0] * 224
    s = routing_stats(64, 8, 256, routing=hist, ep=8)
    assert s.expert_probs[:32] == pytest.approx([0.25] * 32) and s.busiest_gpu_pairs == pytest.approx(512)


def test_routing_object_passes_through():
    r = Routing("histogram", "mine", probs=(0.5, 0.5, 0.5, 0.5))
    assert routing_stats(10, 2, 4, routing=r).routing == "mine"


# -- bad input --------------------------------------------------------------------------------------------------------


def test_zero_tokens_is_an_error():
    with pytest.raises(TruepeakError, match="tokens T 0 must be an integer >= 1"):
        routing_stats(0, 8, 256)


@pytest.mark.parametrize("args,kw,match", [
    ((8, 9, 8), {}, "top_k 9 exceeds the 8 experts"),
    ((8, 8, 256), {"ep": 3}, "ep 3 does not divide the 256 experts.*1, 2, 4, 8"),
    ((8, 8, 256), {"routing": "zipfian"}, "unknown routing 'zipfian'.*powerlaw"),
    ((8, 8, 256), {"routing": "powerlaw:abc"}, "alpha 'abc' is not a number"),
    ((8, 8, 256), {"routing": "powerlaw:-1"}, "alpha -1.0 must be a number >= 0"),
    ((8, 8, 256), {"routing": [1] * 10}, "10 entries.*E = 256"),
    ((8, 2, 4), {"routing": [1, -1, 1, 1]}, "entry 1 = -1"),
    ((8, 2, 4), {"routing": [1, 0, 0, 0]}, "only 1 experts, fewer than top_k = 2"),
    ((8, 2, 4), {"routing": [[0, 0]]}, "repeats an expert"),
    ((8, 2, 4), {"routing": [[0, 4]]}, r"expert id 4, expected integers in \[0, 4\)"),
    ((8, 2, 4), {"routing": [[0, 1, 2]]}, "row 0 has 3 ids, expected top_k = 2"),
    ((8, 2, 4), {"routing": "missing/ids.npy"}, "does not exist"),
    ((8.5, 2, 4), {}, "tokens T 8.5 must be an integer"),
])
def test_bad_input(args, kw, match):
    with pytest.raises(TruepeakError, match=match):
        routing_stats(*args, **kw)
