"""The closed forms of uniform routing (truepeak.moe.routing.exact) by hand, and exact small cases by
enumeration."""

from __future__ import annotations

import itertools
import math

import pytest

from truepeak.errors import TruepeakError
from truepeak.moe.routing import (
    expected_active_experts,
    expected_max_load,
    expert_load_pmf,
    gpu_pairs_pmf,
    padding_waste,
    routing_stats,
    tokens_sent_fraction,
)


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
