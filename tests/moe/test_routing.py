"""Routing statistics (truepeak.moe.routing): case C17 exactly, the closed forms by hand, exact small cases by
enumeration, every row of the routing table in ../shared/data/moe_models.md §5.2 against the table and against a
Monte-Carlo simulation (within 2 %), skewed routing against Monte-Carlo, dump files, and bad input."""

from __future__ import annotations

import itertools
import json
import math

import pytest

from truepeak.errors import TruepeakError
from truepeak.moe.routing import (
    Routing,
    empirical_stats,
    expected_active_experts,
    expected_max_load,
    expert_load_pmf,
    gpu_pairs_pmf,
    monte_carlo,
    padding_waste,
    parse_routing,
    powerlaw_probs,
    routing_stats,
    tokens_sent_fraction,
)

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


def test_padding_waste_function():
    assert padding_waste(16, 16) == 0.0
    assert padding_waste(17, 16) == pytest.approx(1 - 17 / 32)
    with pytest.raises(TruepeakError):
        padding_waste(0, 16)
    with pytest.raises(TruepeakError, match="block_m"):
        padding_waste(4, 0)


# -- closed forms by hand ---------------------------------------------------------------------------------------------

def test_expert_load_pmf_is_binomial():
    pmf = expert_load_pmf(32, 8, 256)
    assert len(pmf) == 33
    for n in (0, 1, 5):
        assert pmf[n] == pytest.approx(math.comb(32, n) * (1 / 32) ** n * (31 / 32) ** (32 - n), rel=1e-12)
    assert sum(pmf) == pytest.approx(1.0, abs=1e-12)


def test_expert_load_pmf_large_batch_is_stable():
    pmf = expert_load_pmf(100_000, 8, 256)
    assert sum(pmf) == pytest.approx(1.0, abs=1e-9)
    assert sum(n * p for n, p in enumerate(pmf)) == pytest.approx(100_000 * 8 / 256, rel=1e-9)
    assert all(math.isfinite(p) for p in pmf)


def test_expected_active_experts_by_hand():
    """E·[1 − (1 − k/E)^T]; moe_models.md §3: 8, 163, 252, 256 active of 256 at T = 1, 32, 128, 512."""
    assert expected_active_experts(32, 8, 256) == pytest.approx(256 * (1 - (1 - 8 / 256) ** 32), rel=1e-12)
    assert [round(expected_active_experts(t, 8, 256)) for t in (1, 32, 128, 512)] == [8, 163, 252, 256]
    assert expected_active_experts(5, 8, 8) == 8


def test_gpu_pairs_pmf_and_tokens_sent_by_hand():
    """Hypergeometric(256, 32, 8) per token per GPU at EP8; a token is sent to a GPU unless none of its 8 experts is
    there: 1 − C(224, 8)/C(256, 8)."""
    pmf = gpu_pairs_pmf(8, 256, 8)
    assert pmf[0] == pytest.approx(math.comb(224, 8) / math.comb(256, 8), rel=1e-12)
    assert pmf[2] == pytest.approx(math.comb(32, 2) * math.comb(224, 6) / math.comb(256, 8), rel=1e-12)
    assert sum(j * p for j, p in enumerate(pmf)) == pytest.approx(1.0)
    assert tokens_sent_fraction(8, 256, 8) == pytest.approx(1 - math.comb(224, 8) / math.comb(256, 8), rel=1e-12)
    s = routing_stats(100, 8, 256, ep=8)
    assert s.tokens_sent_per_gpu == pytest.approx(100 * (1 - math.comb(224, 8) / math.comb(256, 8)), rel=1e-12)
    assert (s.experts_per_gpu, s.mean_gpu_pairs) == (32, 100.0)
    assert s.active_experts_per_gpu == pytest.approx(32 * (1 - (1 - 8 / 256) ** 100), rel=1e-12)
    assert routing_stats(100, 8, 256).tokens_sent_per_gpu == 100  # EP1: every token stays


# -- exact small cases ------------------------------------------------------------------------------------------------

def _exact_gpu_max_one_token(k: int, e: int, g: int) -> float:
    """E[max over GPUs of one token's experts per GPU]: the multivariate hypergeometric, by polynomial coefficients:
    P(max ≤ m) = [x^k] (Σ_{j≤m} C(s, j) x^j)^g / C(E, k)."""
    s = e // g
    total = 0.0
    for m in range(k):
        poly = [1]
        for _ in range(g):
            nxt = [0] * (len(poly) + m)
            for i, a in enumerate(poly):
                for j in range(m + 1):
                    nxt[i + j] += a * math.comb(s, j)
            poly = nxt
        total += 1 - (poly[k] if k < len(poly) else 0) / math.comb(e, k)
    return total


@pytest.mark.parametrize("k,e,g", [(8, 256, 8), (2, 8, 4), (4, 32, 8), (10, 512, 16)])
def test_one_token_gpu_max_is_exact(k, e, g):
    """At T = 1 the balls-in-cells model is the exact law of one token's k distinct experts over GPUs."""
    s = routing_stats(1, k, e, ep=g)
    assert s.busiest_gpu_pairs == pytest.approx(_exact_gpu_max_one_token(k, e, g), rel=1e-9)
    assert s.busiest_expert_tokens == pytest.approx(1.0, abs=1e-12)
    assert s.active_experts == pytest.approx(k, rel=1e-12)


def test_top1_is_the_exact_multinomial():
    """k = 1: T tokens each pick one of E experts; E[max] by enumeration of all E^T assignments."""
    for t, e in ((3, 3), (4, 3), (5, 2)):
        exact = sum(max(a.count(x) for x in range(e)) for a in itertools.product(range(e), repeat=t)) / e ** t
        assert expected_max_load(t, 1, e) == pytest.approx(exact, rel=1e-9)


def test_all_experts_picked():
    s = routing_stats(3, 8, 8, ep=2)
    assert (s.busiest_expert_tokens, s.active_experts, s.busiest_gpu_pairs) == (pytest.approx(3.0), 8.0,
                                                                                 pytest.approx(12.0))


# -- the routing table of moe_models.md §5.2 ---------------------------------------------------------------------------

# (E, k, T, mean per expert, E[max] per expert, active experts, EP8 max/mean per GPU) as printed in the table.
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
    """Issue #4 requirement: within 2 % of a Monte-Carlo simulation on every row (busiest expert, active experts,
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

def test_powerlaw_definition():
    """Zipf by rank, (r + 1)^−α, water-filled to Σ p = k with p ≤ 1, ranks → ids by a seeded permutation."""
    p = powerlaw_probs(0.5, 8, 256, seed=3)
    assert sum(p) == pytest.approx(8.0) and max(p) < 1
    w = sorted(((r + 1) ** -0.5 for r in range(256)), reverse=True)
    assert sorted(p, reverse=True) == pytest.approx([8 * x / sum(w) for x in w], rel=1e-12)
    assert powerlaw_probs(0.5, 8, 256, seed=3) == p and powerlaw_probs(0.5, 8, 256, seed=4) != p
    steep = sorted(powerlaw_probs(1.2, 8, 128), reverse=True)
    assert steep[:2] == [1.0, 1.0] and sum(steep) == pytest.approx(8.0) and steep[2] < 1
    assert routing_stats(64, 8, 256, routing="powerlaw:0").method == "exact"


def test_powerlaw_placements():
    """'sorted': rank r is expert r (hottest on GPU 0); 'balanced': greedy hottest-first onto the least-loaded GPU with
    a free slot (GPU sums of p differ by at most the largest p); all three agree with Monte-Carlo on the busiest GPU."""
    p = powerlaw_probs(0.8, 8, 64, placement="sorted")
    assert p == sorted(p, reverse=True)
    b = powerlaw_probs(0.8, 8, 64, placement="balanced", ep=8)
    per_gpu = [sum(b[g * 8:(g + 1) * 8]) for g in range(8)]
    assert sorted(b) == pytest.approx(sorted(p)) and max(per_gpu) - min(per_gpu) <= max(p)  # greedy bound
    assert max(per_gpu) < sum(p[:8])  # GPU 0 of 'sorted' holds the 8 hottest
    loads = {}
    for pl in ("sorted", "", "balanced"):
        rt = "powerlaw:1.01" + (f":{pl}" if pl else "")
        s = routing_stats(512, 8, 256, routing=rt, ep=8)
        mc = monte_carlo(512, 8, 256, routing=rt, ep=8, trials=20)
        assert s.busiest_gpu_pairs == pytest.approx(mc.busiest_gpu_pairs, rel=0.02)
        assert s.routing == rt
        loads[pl] = s.gpu_imbalance
    assert loads["sorted"] > loads[""] > loads["balanced"] > 1
    with pytest.raises(TruepeakError, match="placement 'hot' is unknown"):
        routing_stats(8, 8, 256, routing="powerlaw:1:hot")


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


# -- dumps and empirical statistics -----------------------------------------------------------------------------------

IDS = [[0, 1], [0, 2], [0, 3]]


def test_empirical_stats_by_hand():
    """E = 4, k = 2, EP2 (GPU 0: experts 0, 1; GPU 1: 2, 3): counts [3, 1, 1, 1]; GPU pairs 4 and 2; tokens sent:
    GPU 0 all 3, GPU 1 two; tiles of 2 rows: 2 + 1 + 1 + 1."""
    s = empirical_stats(IDS, 4, ep=2)
    assert (s.tokens, s.top_k, s.method) == (3, 2, "empirical")
    assert (s.busiest_expert_tokens, s.active_experts, s.busiest_gpu_pairs) == (3, 4, 4)
    assert (s.tokens_sent_per_gpu, s.busiest_gpu_tokens_sent, s.busiest_gpu_active_experts) == (2.5, 3, 2)
    assert s.expected_tiles(2) == 5 and s.expected_padding_waste(2) == pytest.approx(1 - 6 / 10)


@pytest.mark.parametrize("suffix", [".json", ".txt", ".npy"])
def test_dump_files(tmp_path, suffix):
    path = tmp_path / f"topk_ids{suffix}"
    if suffix == ".json":
        path.write_text(json.dumps({"topk_ids": IDS}))
    elif suffix == ".txt":
        path.write_text("# token ids\n0 1\n0,2\n0 3\n")
    else:
        import numpy as np

        np.save(path, np.array(IDS, dtype=np.int32))
    assert empirical_stats(str(path), 4, ep=2).busiest_gpu_pairs == 4
    r = parse_routing(str(path), 4, 2)
    assert r.kind == "dump" and r.probs == pytest.approx((1.0, 1 / 3, 1 / 3, 1 / 3))
    s = routing_stats(30, 2, 4, routing=path, ep=2)
    assert s.hottest_expert_mean == pytest.approx(30.0) and s.routing == f"dump:{path.name}"


def test_numpy_inputs():
    import numpy as np

    hist = np.full(256, 3.0)
    assert routing_stats(64, 8, 256, routing=hist).routing == "histogram"
    assert parse_routing(np.array(IDS), 4, 2).kind == "dump"
    assert routing_stats(np.int64(64), 8, 256).tokens == 64


def test_histogram_file(tmp_path):
    path = tmp_path / "counts.json"
    path.write_text(json.dumps([3, 1, 1, 1]))
    assert parse_routing(str(path), 4, 2).kind == "histogram"


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
