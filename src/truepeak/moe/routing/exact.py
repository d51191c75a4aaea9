"""Closed forms of decode routing under uniform routing, and the numerical helpers the statistics share.

**Uniform routing** (every k-subset of experts equally likely, tokens independent) — ``method='exact'`` in
:func:`truepeak.moe.routing.stats.routing_stats`, with two approximations that are named here and validated against
:func:`truepeak.moe.routing.sampling.monte_carlo` (tests/moe/routing/test_stats.py; within 2 % on every row of the
routing table there):

- One expert's load n_e ~ Binomial(T, k/E), exact pmf from log-gamma (:func:`expert_load_pmf`); mean T·k/E.
  (docs/method.md, 'Tokens per expert'.)
- Expected active experts E·[1 − (1 − k/E)^T], exact.
- Expected busiest expert E[max_e n_e] and busiest GPU E[max_g L_g] (L_g = pairs on GPU g): the counts are
  negatively correlated (they sum to T·k), so the product of marginal cdfs is **not** exact (it is 6 % low for the
  busiest GPU at T = 1, EP8, and 10 % low for the busiest expert of Mixtral at T = 1). When T·k ≤
  :data:`EXACT_MAX_PAIRS` we use a *balls-in-cells* model: the T·k pairs are S = T·k balls drawn without replacement
  from N groups (experts: N = E; GPUs: N = G) of M' cells each, P(max ≤ m) = [x^S] (Σ_{j≤m} C(M', j) x^j)^N /
  C(N·M', S), with M' = [T·k·(E − 1) − (E − k)] / (N·(k − 1)) chosen so one group's variance equals the true one
  (:func:`_cells_expected_max`). It is exact for T = 1 (M' = 1 for experts, E/G for GPUs: the multivariate
  hypergeometric) and for k = 1 (the multinomial limit), and within 0.1 % of a Monte-Carlo of ≥ 3·10^4 batches on
  every row of that table it covers. Above that size the counts are nearly independent and we use
  E[max] = Σ_m [1 − F(m)^N] with F the exact Binomial(T, k/E) cdf (experts) or the Hypergeometric(T·E, T·E/G, T·k)
  cdf (GPUs); error < 0.5 % at T·k ≥ 2048 (measured against Monte-Carlo).
- Per-token pairs on one GPU: Hypergeometric(E, E/G, k) (:func:`gpu_pairs_pmf`); mean pairs per GPU T·k/G.
- Tokens sent to one GPU (all-to-all dispatch volume, distinct tokens with ≥ 1 of their k experts on it):
  T·π, π = 1 − C(E − E/G, k)/C(E, k) (:func:`tokens_sent_fraction`), exact; its maximum over GPUs treats GPUs as
  independent Binomial(T, π) (approximation).
- Active experts on one GPU: mean (E/G)·[1 − (1 − k/E)^T] exact; the busiest GPU's count treats experts as
  independent (Binomial(E/G, a)) and GPUs as independent (approximation).

Padding: :func:`padding_waste` is the share of a per-expert-padded grouped GEMM that pads (docs/method.md, 'Padding
per expert'); :mod:`truepeak.moe.routing.stats` takes its expectation over the load distribution.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from truepeak.errors import TruepeakError
from truepeak.moe.routing.checks import _check_int, _check_tke

#: Largest T·k for which the busiest expert / GPU is computed with the balls-in-cells polynomial (module docstring);
#: larger batches use the independence form, whose error there is < 0.5 %.
EXACT_MAX_PAIRS = 2048

_TAIL = 1e-13  # probability mass below which a tail is dropped


def _log_comb(n: int, r: int) -> float:
    return math.lgamma(n + 1) - math.lgamma(r + 1) - math.lgamma(n - r + 1)


def _binom_window(n: int, p: float) -> tuple[int, list[float]]:
    """(lo, pmf[lo..hi]) of Binomial(n, p) on the window mean ± (10 sd + 10) (the mass outside is < 1e-20);
    log-gamma form, so n can be 1e6."""
    if p <= 0.0:
        return 0, [1.0]
    if p >= 1.0:
        return n, [1.0]
    mean, sd = n * p, math.sqrt(n * p * (1 - p))
    lo, hi = max(0, int(mean - 10 * sd - 10)), min(n, int(mean + 10 * sd + 10))
    lp, lq = math.log(p), math.log1p(-p)
    base = math.lgamma(n + 1)
    pmf = [math.exp(base - math.lgamma(j + 1) - math.lgamma(n - j + 1) + j * lp + (n - j) * lq)
           for j in range(lo, hi + 1)]
    return lo, pmf


def expert_load_pmf(tokens: int, top_k: int, num_experts: int) -> list[float]:
    """Exact pmf of one expert's load under uniform routing: n_e ~ Binomial(T, k/E); list index j = P(n_e = j),
    length T + 1 (log-gamma form, robust for T up to 1e5 and beyond; entries under 1e-300 are 0)."""
    t, k, e, _ = _check_tke(tokens, top_k, num_experts)
    lo, w = _binom_window(t, k / e)
    out = [0.0] * (t + 1)
    out[lo:lo + len(w)] = w
    return out


def expected_active_experts(tokens: int, top_k: int, num_experts: int) -> float:
    """E·[1 − (1 − k/E)^T]: expected experts with at least one token (uniform routing; exact)."""
    t, k, e, _ = _check_tke(tokens, top_k, num_experts)
    return e * -math.expm1(t * math.log1p(-k / e)) if k < e else float(e)


def padding_waste(rows_per_expert: float, block_m: int) -> float:
    """Padded share of a grouped GEMM whose expert gets ``rows_per_expert`` rows padded to a BLOCK_M tile:
    1 − r / (ceil(r/B)·B) (docs/method.md, 'Padding per expert': r = 1.875, B = 64 → 0.9707; r = 15, B = 16 →
    0.0625)."""
    b = _check_int("block_m", block_m)
    if isinstance(rows_per_expert, bool) or not isinstance(rows_per_expert, (int, float)) \
            or not math.isfinite(rows_per_expert) or rows_per_expert <= 0:
        raise TruepeakError(f"rows per expert {rows_per_expert!r} must be a number > 0")
    return 1.0 - rows_per_expert / (math.ceil(rows_per_expert / b) * b)


def gpu_pairs_pmf(top_k: int, num_experts: int, ep: int) -> list[float]:
    """Pmf of how many of one token's k experts sit on a given GPU under EP with contiguous placement:
    Hypergeometric(E, E/ep, k); index j = P(j of the k on this GPU), length k + 1. Mean k/ep."""
    _, k, e, g = _check_tke(1, top_k, num_experts, ep)
    s = e // g
    den = math.comb(e, k)
    return [math.comb(s, j) * math.comb(e - s, k - j) / den for j in range(k + 1)]


def tokens_sent_fraction(top_k: int, num_experts: int, ep: int) -> float:
    """π = 1 − C(E − E/ep, k) / C(E, k): probability that a token has at least one of its k experts on a given GPU,
    i.e. must be dispatched to it (all-to-all). Exact under uniform routing."""
    _, k, e, g = _check_tke(1, top_k, num_experts, ep)
    return 1.0 - math.comb(e - e // g, k) / math.comb(e, k)


def _max_independent(cdfs: Sequence[tuple[int, list[float]]], count: int = 1) -> float:
    """E[max] of independent integer variables given as (lo, pmf) windows, ``count`` copies of each:
    Σ_m [1 − Π F(m)]."""
    return _max_independent_mixed([(c, count) for c in cdfs])


def _cells_expected_max(groups: int, tokens: int, top_k: int, num_experts: int, upper: int) -> float:
    """E[max group count] of the T·k (token, expert) pairs over ``groups`` equal groups of experts (module docstring):
    the pairs are S = T·k balls drawn without replacement from N groups of M' cells,
    M' = [T·k·(E − 1) − (E − k)] / (N·(k − 1)), chosen so one group's variance equals the true one (T·k/N·(1 − 1/N)·
    (E − k)/(E − 1)); M' = T·(k/(k−1))(1 − 1/E) ≈ T for experts, exactly 1 at T = 1; k = 1 is the multinomial limit.
    P(max ≤ m) = [x^S] (Σ_{j≤m} C(M', j) x^j)^N / C(N·M', S), evaluated with an exponentially tilted (so the
    coefficient at S sits near the centre), max-normalised repeated-squaring power; E[max] = Σ_m P(max > m)."""
    import numpy as np

    n, s = groups, tokens * top_k
    if top_k == 1:  # multinomial: C(M', j) / M'^j -> 1/j!
        def lw_of(j: int) -> float:
            return -math.lgamma(j + 1)
    else:
        cells = (s * (num_experts - 1) - (num_experts - top_k)) / (n * (top_k - 1))

        def lw_of(j: int) -> float:
            return math.lgamma(cells + 1) - math.lgamma(j + 1) - math.lgamma(cells - j + 1)
    # Exponential tilt x^j -> (r x)^j, r = e^tilt, puts the mean of one untruncated factor at S/N (binomial(M', r/(1+r))
    # or Poisson(r) when k = 1) so the coefficient at S is near the centre of the power; any tilt is exact in theory.
    mu = s / n
    tilt = math.log(mu) if top_k == 1 else math.log(mu / max(cells - mu, 1e-9))
    m0 = -(-s // n)  # max >= ceil(S/N)
    top = min(upper, s)
    lw_all = [lw_of(j) for j in range(top + 1)]

    def log_coef(m: int) -> float:
        """log [x^S] (Σ_{j≤m} w_j x^j)^N."""
        j = np.arange(m + 1, dtype=float)
        lw = np.array(lw_all[:m + 1]) + tilt * j
        shift = lw.max()
        base, lbase = np.exp(lw - shift), shift
        res, lres = np.ones(1), 0.0
        e = n
        while e:
            if e & 1:
                res = _conv(res, base)[:s + 1]
                lres += lbase
                c = res.max()
                res /= c
                lres += math.log(c)
            e >>= 1
            if e:
                base = _conv(base, base)[:s + 1]
                lbase *= 2
                c = base.max()
                base /= c
                lbase += math.log(c)
        coef = res[s] if len(res) > s else 0.0
        return math.log(coef) + lres - tilt * s if coef > 0 else -math.inf

    # Beyond mean + 15 sd + 15 of one group's count the tail is far below 1e-12; the denominator is computed the same
    # way as the numerators (with that cap) so their rounding cancels and P(max <= m) reaches 1.
    top = min(top, int(s / n + 15 * math.sqrt(s / n) + 15))
    log_den = log_coef(top)
    total = float(m0)
    for m in range(m0, top):
        p = math.exp(min(0.0, log_coef(m) - log_den))
        total += 1.0 - p
        if 1.0 - p < 1e-10:  # the rest of the tail adds < 1e-8
            break
    return total


def _conv(a, b):
    import numpy as np

    if min(len(a), len(b)) < 64:
        return np.convolve(a, b)
    n = len(a) + len(b) - 1
    size = 1 << (n - 1).bit_length()
    out = np.fft.irfft(np.fft.rfft(a, size) * np.fft.rfft(b, size), size)[:n]
    return np.maximum(out, 0.0)


def expected_max_load(tokens: int, top_k: int, num_experts: int) -> float:
    """E[max_e n_e], the expected load of the busiest expert under uniform routing (module docstring: balls-in-cells
    model for T·k ≤ :data:`EXACT_MAX_PAIRS`, else independent binomials). T = 1 gives exactly 1."""
    t, k, e, _ = _check_tke(tokens, top_k, num_experts)
    if t * k <= EXACT_MAX_PAIRS:
        return _cells_expected_max(e, t, k, e, upper=t)
    return _max_independent([_binom_window(t, k / e)], count=e)


def _hypergeom_window(pop: int, succ: int, draws: int) -> tuple[int, list[float]]:
    lo, hi = max(0, draws - (pop - succ)), min(succ, draws)
    mean = draws * succ / pop
    sd = math.sqrt(max(draws * succ / pop * (1 - succ / pop) * (pop - draws) / max(pop - 1, 1), 1e-12))
    lo, hi = max(lo, int(mean - 12 * sd - 10)), min(hi, int(mean + 12 * sd + 10))
    den = _log_comb(pop, draws)
    return lo, [math.exp(_log_comb(succ, j) + _log_comb(pop - succ, draws - j) - den) for j in range(lo, hi + 1)]


def _poisson_binomial(ps: Sequence[float]) -> tuple[int, list[float]]:
    pmf = [1.0]
    for p in ps:
        nxt = [0.0] * (len(pmf) + 1)
        for j, v in enumerate(pmf):
            nxt[j] += v * (1 - p)
            nxt[j + 1] += v * p
        pmf = nxt
    return 0, pmf


def _sum_of_binomials(t: int, ps: Sequence[float]) -> tuple[int, list[float]]:
    """(lo, pmf) of Σ_e Binomial(t, p_e), independent (numpy convolution of truncated windows)."""
    import numpy as np

    lo, acc = 0, np.ones(1)
    for p in ps:
        l2, w = _binom_window(t, p)
        acc = _conv(acc, np.asarray(w))
        lo += l2
        keep = np.nonzero(acc > _TAIL * acc.max())[0]
        lo += int(keep[0])
        acc = acc[keep[0]:keep[-1] + 1]
    acc = acc / acc.sum()
    return lo, acc.tolist()


def _max_independent_mixed(items: Sequence[tuple[tuple[int, list[float]], int]]) -> float:
    """E[max] over independent variables: items of ((lo, pmf), multiplicity)."""
    cum, top = [], 0
    for (lo, pmf), n in items:
        c, acc = [], 0.0
        for v in pmf:
            acc += v
            c.append(min(acc, 1.0))
        cum.append((lo, c, n))
        top = max(top, lo + len(pmf) - 1)
    total = 0.0
    for m in range(top):
        lg, zero = 0.0, False
        for lo, c, n in cum:
            if m < lo:
                zero = True
                break
            f = c[m - lo] if m - lo < len(c) else 1.0
            if f <= 0.0:
                zero = True
                break
            lg += n * math.log(f)
        total += 1.0 if zero else -math.expm1(lg)
    return total
