"""Decode routing statistics of one MoE layer: tokens per expert, active experts, the busiest expert and GPU, padding.

A decode step sends T tokens through a MoE layer with E routed experts; each token picks ``top_k`` = k **distinct**
experts. Under expert parallelism EP = G the experts are placed contiguously, E/G per GPU (GPU g holds experts
[g·E/G, (g+1)·E/G)). Everything here is per layer and counts tokens or (token, expert) pairs; no times, no bytes.

Public API:

- :func:`routing_stats` ``(tokens, top_k, num_experts, *, routing='uniform', ep=1, seed=0) -> RoutingStats``
- :class:`RoutingStats` (fields below), :func:`parse_routing` -> :class:`Routing`
- closed forms: :func:`expert_load_pmf`, :func:`expected_active_experts`, :func:`expected_max_load`,
  :func:`padding_waste`, :func:`gpu_pairs_pmf`, :func:`tokens_sent_fraction`
- :func:`monte_carlo` (numpy) and :func:`empirical_stats` (from a real ``topk_ids`` dump), same RoutingStats.

What is computed (``RoutingStats.method`` says which path was taken):

**Uniform routing** (every k-subset of experts equally likely, tokens independent) — ``method='exact'``, with
two approximations that are named here and validated against :func:`monte_carlo` (tests/moe/test_routing.py; within
2 % on every row of the routing table there):

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

**Skewed routing** — ``method='approximation'``. Expert e is picked by a token with probability p_e (Σ p_e = k,
each ≤ 1); every token still picks exactly k distinct experts (:func:`monte_carlo` draws them by systematic sampling
over a random order, which has exactly these inclusion probabilities). The statistics treat experts as independent:
n_e ~ Binomial(T, p_e) independently, so E[max] = Σ_m [1 − Π_e F_e(m)], active experts Σ_e [1 − (1 − p_e)^T], the
load of GPU g the convolution of its experts' binomials; tokens sent to g ~ Binomial(T, π_g) with π_g = 1 − Π_{e∈g}
(1 − p_e) corrected for the k-distinct exclusivity (:func:`_hit_probability`; exact when uniform). Measured against
:func:`monte_carlo`: within 3 % for the busiest expert and GPU, active experts and tokens sent (E = 8 … 256,
α = 0.6 … 1.2, T = 32 … 512; tests/moe/test_routing.py). GPU-level values depend on the placement drawn from ``seed``
(busiest GPU ±20 % between seeds at α ≈ 1, EP8).

- ``powerlaw:α`` (Zipf popularity): expert of popularity rank r = 0 … E−1 has weight w_r = (r + 1)^−α; p = min(1, c·w)
  with c chosen so that Σ p = k (water-filling: an expert cannot be picked twice by one token). α = 0 is uniform.
  Ranks are assigned to expert ids by a random permutation drawn from ``seed`` (hot experts land on random GPUs, as
  without EPLB); ``powerlaw:α:sorted`` puts the hottest experts together on GPU 0 (worst case) and
  ``powerlaw:α:balanced`` packs them greedily, hottest first, onto the least-loaded GPU (popularity-aware placement
  without replicas). This law is steep: at α ≈ 1 the hottest expert saturates (p = 1, every token picks it; E = 256,
  k = 8, α = 1.01: 1 saturated expert, the top 20 % of experts carry 73 % of the pairs; α = 0.5: none, 42 %).
  aiconfigurator uses α = 1.01 (DeepSeek-V3) and α = 1.2 (Qwen3-235B), ai-dynamo/aiconfigurator
  ``docs/POWER_LAW_DISTRIBUTION.md``; note its α is an exponent of a distribution of token counts, not of a
  rank-popularity law, so the same α does not mean the same skew.
- a histogram: E non-negative per-expert counts (or weights) → p_e = k · count_e / Σ counts (water-filled if any
  exceeds 1). Expert ids are kept (the histogram's placement is real).
- a ``topk_ids`` dump file (.npy / .json / .txt, shape [T', k], integer expert ids) → its per-expert counts as the
  histogram. :func:`empirical_stats` gives the observed values of the dump itself (``method='empirical'``).

**Padding** (docs/method.md, 'Padding per expert'): a grouped GEMM that pads each expert's rows to a tile of BLOCK_M
rows (Triton fused_moe ``moe_align_block_size``; DeepGEMM contiguous layout) computes ceil(n_e/B)·B rows for n_e real
ones. :meth:`RoutingStats.padding_waste` is the *mean-based* share 1 − r/(ceil(r/B)·B), r = T·k/E (E=512, k=10, T=96:
r = 1.875, B = 64 → 97.1 %). :meth:`RoutingStats.expected_padding_waste` is the expected padded share over the load
distribution, 1 − T·k / (B·Σ_e E[ceil(n_e/B)]) (idle experts pad nothing).

numpy is imported lazily (cells-model polynomials, skewed GPU loads, Monte-Carlo, dump files); importing this module
needs only the standard library.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from truepeak.errors import TruepeakError

#: Largest T·k for which the busiest expert / GPU is computed with the balls-in-cells polynomial (module docstring);
#: larger batches use the independence form, whose error there is < 0.5 %.
EXACT_MAX_PAIRS = 2048

#: Routing specs accepted in strings, for error messages.
ROUTING_FORMS = ("'uniform'", "'powerlaw:<alpha>[:random|sorted|balanced]' (alpha >= 0, e.g. powerlaw:1.2)",
                 "a list of E per-expert counts", "a topk_ids file (.npy/.json/.txt, shape [T, k])")

_TAIL = 1e-13  # probability mass below which a tail is dropped


# ----------------------------------------------------------------------------------------------------------------------
# Input checks
# ----------------------------------------------------------------------------------------------------------------------

def _check_int(name: str, value: object, minimum: int = 1) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        try:
            import numbers
            if isinstance(value, numbers.Integral) and not isinstance(value, bool):
                value = int(value)
            else:
                raise TypeError
        except TypeError:
            raise TruepeakError(f"{name} {value!r} must be an integer >= {minimum}") from None
    if value < minimum:
        hint = "; a decode step routes at least one token" if name.startswith("tokens") else ""
        raise TruepeakError(f"{name} {value!r} must be an integer >= {minimum}{hint}")
    return value


def _check_tke(tokens: int, top_k: int, num_experts: int, ep: int = 1) -> tuple[int, int, int, int]:
    t = _check_int("tokens T", tokens)
    e = _check_int("num_experts E", num_experts)
    k = _check_int("top_k", top_k)
    if k > e:
        raise TruepeakError(f"top_k {k} exceeds the {e} experts: each token picks top_k distinct experts")
    g = _check_int("ep", ep)
    if e % g:
        divisors = [d for d in range(1, e + 1) if e % d == 0]
        raise TruepeakError(f"ep {g} does not divide the {e} experts (contiguous placement needs E/ep experts per "
                            f"GPU); use one of {', '.join(map(str, divisors))}")
    return t, k, e, g


# ----------------------------------------------------------------------------------------------------------------------
# Closed forms
# ----------------------------------------------------------------------------------------------------------------------

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


# ----------------------------------------------------------------------------------------------------------------------
# Routing specs
# ----------------------------------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Routing:
    """A parsed routing distribution: ``kind`` ('uniform'|'powerlaw'|'histogram'|'dump'), ``label`` (for reports),
    ``alpha`` (powerlaw), ``probs`` (per-expert inclusion probabilities p_e, Σ = k; None for uniform)."""

    kind: str
    label: str
    alpha: float | None = None
    probs: tuple[float, ...] | None = field(default=None, repr=False)


def _water_fill(weights: Sequence[float], k: int) -> list[float]:
    """p = min(1, c·w) with Σ p = k (c by bisection on the capped sum). Raises if fewer than k experts have weight."""
    if sum(1 for w in weights if w > 0) < k:
        raise TruepeakError(f"routing gives weight to only {sum(1 for w in weights if w > 0)} experts, fewer than "
                            f"top_k = {k}: each token picks {k} distinct experts")
    total = sum(weights)
    c = k / total
    if max(weights) * c <= 1.0:
        return [w * c for w in weights]
    lo, hi = c, 1.0 / min(w for w in weights if w > 0)
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        if sum(min(1.0, mid * w) for w in weights) < k:
            lo = mid
        else:
            hi = mid
    p = [min(1.0, hi * w) for w in weights]
    scale_free = [i for i, v in enumerate(p) if v < 1.0]
    excess = sum(p) - k  # put the bisection residue on the uncapped experts
    if scale_free and abs(excess) > 0:
        rest = sum(p[i] for i in scale_free)
        for i in scale_free:
            p[i] -= excess * p[i] / rest
    return p


#: Placements of power-law popularity ranks onto expert ids (``powerlaw:<alpha>[:<placement>]``).
PLACEMENTS = ("random", "sorted", "balanced")


def powerlaw_probs(alpha: float, top_k: int, num_experts: int, seed: int = 0, placement: str = "random",
                   ep: int = 1) -> list[float]:
    """Per-expert inclusion probabilities of ``powerlaw:alpha`` (module docstring): Zipf weights (r + 1)^−α by rank,
    water-filled to Σ = k, ranks assigned to expert ids by ``placement``: 'random' (``random.Random(seed).shuffle``;
    hot experts on random GPUs, as without EPLB), 'sorted' (rank r → expert r: the hottest experts together on GPU 0,
    the worst case under EP) or 'balanced' (greedy longest-processing-time: each expert, hottest first, goes to the
    GPU with the least load that still has a free slot — what a popularity-aware placement without replicas, like
    EPLB's packing step, achieves)."""
    import random

    _, k, e, g = _check_tke(1, top_k, num_experts, ep)
    if isinstance(alpha, bool) or not isinstance(alpha, (int, float)) or not math.isfinite(alpha) or alpha < 0:
        raise TruepeakError(f"power-law exponent alpha {alpha!r} must be a number >= 0 (0 = uniform)")
    if placement not in PLACEMENTS:
        raise TruepeakError(f"power-law placement {placement!r} is unknown; use one of {', '.join(PLACEMENTS)}")
    by_rank = _water_fill([(r + 1.0) ** -alpha for r in range(e)], k)
    if placement == "random":
        ids = list(range(e))
        random.Random(seed).shuffle(ids)
    elif placement == "sorted":
        ids = list(range(e))
    else:
        s = e // g
        load, used, ids = [0.0] * g, [0] * g, []
        for r in range(e):  # by_rank is non-increasing
            gpu = min((i for i in range(g) if used[i] < s), key=lambda i: (load[i], i))
            ids.append(gpu * s + used[gpu])
            load[gpu] += by_rank[r]
            used[gpu] += 1
    p = [0.0] * e
    for rank, expert in enumerate(ids):
        p[expert] = by_rank[rank]
    return p


def load_topk_ids(path: str | os.PathLike) -> list[list[int]]:
    """Read a ``topk_ids`` dump, shape [T, k] of integer expert ids: ``.npy`` (numpy), ``.json`` (a list of rows, or
    an object with a ``topk_ids`` list), or text (one token per line, ids separated by spaces or commas). A 1-D file
    is returned as a single row (callers treat it as a histogram when its length is E)."""
    p = Path(path)
    if not p.is_file():
        what = "is a folder, not a file" if p.is_dir() else "does not exist"
        raise TruepeakError(f"routing file {str(p)!r} {what}; accepted routing: {', '.join(ROUTING_FORMS)}")
    suffix = p.suffix.lower()
    try:
        if suffix == ".npy":
            import numpy as np

            arr = np.load(p, allow_pickle=False)
            rows = arr.tolist()
        elif suffix == ".json":
            data = json.loads(p.read_text())
            rows = data.get("topk_ids") if isinstance(data, dict) else data
        else:
            rows = [[float(x) for x in line.replace(",", " ").split()] for line in p.read_text().splitlines()
                    if line.strip() and not line.lstrip().startswith("#")]
    except (OSError, ValueError) as exc:
        raise TruepeakError(f"cannot read routing file {str(p)!r}: {exc}") from None
    if not isinstance(rows, list) or not rows:
        raise TruepeakError(f"routing file {str(p)!r} holds no rows; expected topk_ids of shape [T, k]")
    if not isinstance(rows[0], list):
        rows = [rows]
    return rows


def _as_int_rows(rows: list, e: int, k: int, where: str) -> list[list[int]]:
    out = []
    for i, row in enumerate(rows):
        if not isinstance(row, list) or len(row) != k:
            n = len(row) if isinstance(row, list) else 1
            raise TruepeakError(f"{where}: row {i} has {n} ids, expected top_k = {k} (topk_ids shape [T, {k}])")
        ids = []
        for v in row:
            if isinstance(v, bool) or not isinstance(v, (int, float)) or v != int(v) or not 0 <= v < e:
                raise TruepeakError(f"{where}: row {i} has expert id {v!r}, expected integers in [0, {e})")
            ids.append(int(v))
        if len(set(ids)) != k:
            raise TruepeakError(f"{where}: row {i} repeats an expert ({ids}); a token's top_k experts are distinct")
        out.append(ids)
    return out


def _histogram_probs(counts: Sequence, k: int, e: int, where: str) -> list[float]:
    if len(counts) != e:
        raise TruepeakError(f"{where} has {len(counts)} entries; a histogram needs one count per expert (E = {e})")
    vals = []
    for i, c in enumerate(counts):
        if isinstance(c, bool) or not isinstance(c, (int, float)) or not math.isfinite(c) or c < 0:
            raise TruepeakError(f"{where}: entry {i} = {c!r} must be a count >= 0")
        vals.append(float(c))
    if sum(vals) <= 0:
        raise TruepeakError(f"{where} is all zero")
    return _water_fill(vals, k)


def _powerlaw_parts(spec: str) -> tuple[float, str] | None:
    """``(alpha, placement)`` of a ``powerlaw:<alpha>[:placement]`` text (also ``power-law:``, ``zipf:``; placement
    ``random`` when absent), or None for other text. Raises TruepeakError when alpha is not a number."""
    s = str(spec).strip().lower()
    for prefix in ("powerlaw:", "power-law:", "zipf:"):
        if s.startswith(prefix):
            value, _, placement = s[len(prefix):].partition(":")
            try:
                alpha = float(value)
            except ValueError:
                raise TruepeakError(f"routing {spec!r}: alpha {value!r} is not a number; "
                                    f"e.g. powerlaw:1.2 or powerlaw:1.2:balanced") from None
            return alpha, placement or "random"
    return None


def routing_label(spec: str) -> str:
    """The label :func:`parse_routing` gives a text spec, without computing anything: ``"PowerLaw:1.20"`` →
    ``"powerlaw:1.2"``, ``"powerlaw:1.2:random"`` → ``"powerlaw:1.2"`` (random placement is the default),
    ``"zipf:0"`` → ``"uniform"``; other text lower-cased and stripped (so two spellings of one routing compare equal,
    e.g. a measured record's and a plan's). Raises TruepeakError when a power-law alpha is not a number."""
    parts = _powerlaw_parts(spec)
    if parts is None:
        return str(spec).strip().lower()
    alpha, placement = parts
    if alpha == 0:
        return "uniform"
    return f"powerlaw:{alpha:g}" + ("" if placement == "random" else f":{placement}")


def parse_routing(spec, num_experts: int, top_k: int, seed: int = 0, ep: int = 1) -> Routing:
    """Turn a routing spec into a :class:`Routing` (module docstring for the models).

    Accepted: a :class:`Routing`; ``'uniform'``; ``'powerlaw:<alpha>[:random|sorted|balanced]'`` (also ``'zipf:'``;
    the placement of popularity ranks on GPUs, :func:`powerlaw_probs`; ``ep`` is used by 'balanced'); a sequence of E
    per-expert counts/weights (histogram); a sequence of [k] id rows (topk_ids); a path (str or PathLike) to a
    topk_ids file (:func:`load_topk_ids`) or to a 1-D file of E counts.

    Raises:
        TruepeakError: anything else, naming the accepted forms; bad alpha; a histogram of the wrong length or with
            negative entries; ids out of [0, E), rows of the wrong width or with repeated ids.
    """
    _, k, e, ep = _check_tke(1, top_k, num_experts, ep)
    if isinstance(spec, Routing):
        return spec
    if isinstance(spec, os.PathLike) or (isinstance(spec, str) and (Path(spec).suffix.lower() in (".npy", ".json",
                                                                                                   ".txt", ".csv")
                                                                    or os.sep in spec)):
        rows = load_topk_ids(spec)
        where = f"routing file {str(spec)!r}"
        if len(rows) == 1 and len(rows[0]) == e and e != k:
            return Routing("histogram", f"histogram:{Path(spec).name}", probs=tuple(_histogram_probs(rows[0], k, e,
                                                                                                     where)))
        ids = _as_int_rows(rows, e, k, where)
        return _dump_routing(ids, e, k, f"dump:{Path(spec).name}")
    if isinstance(spec, str):
        s = spec.strip().lower()
        if s == "uniform":
            return Routing("uniform", "uniform")
        parts = _powerlaw_parts(spec)
        if parts is not None:
            alpha, placement = parts
            if alpha == 0:
                return Routing("uniform", "uniform")
            return Routing("powerlaw", routing_label(spec), alpha=alpha,
                           probs=tuple(powerlaw_probs(alpha, k, e, seed, placement=placement, ep=ep)))
        raise TruepeakError(f"unknown routing {spec!r}; accepted: {', '.join(ROUTING_FORMS)}")
    if isinstance(spec, Sequence) or hasattr(spec, "tolist"):
        seq = spec.tolist() if hasattr(spec, "tolist") else list(spec)
        if seq and isinstance(seq[0], (list, tuple)):
            ids = _as_int_rows([list(r) for r in seq], e, k, "topk_ids")
            return _dump_routing(ids, e, k, f"topk_ids[{len(ids)}]")
        return Routing("histogram", "histogram", probs=tuple(_histogram_probs(seq, k, e, "routing histogram")))
    raise TruepeakError(f"routing {spec!r} has an unsupported type {type(spec).__name__}; accepted: "
                        f"{', '.join(ROUTING_FORMS)}")


def _dump_routing(ids: list[list[int]], e: int, k: int, label: str) -> Routing:
    counts = [0] * e
    for row in ids:
        for i in row:
            counts[i] += 1
    return Routing("dump", label, probs=tuple(_histogram_probs(counts, k, e, label)))


# ----------------------------------------------------------------------------------------------------------------------
# Statistics
# ----------------------------------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class RoutingStats:
    """Routing statistics of one MoE layer for a decode batch (per layer; counts of tokens or (token, expert) pairs).

    Fields:
        tokens, top_k, num_experts, ep: T, k, E, EP degree (G).
        routing: label of the routing distribution ('uniform', 'powerlaw:1.2', 'histogram', 'dump:<file>').
        method: 'exact' (uniform closed forms, module docstring), 'approximation' (skewed, independent experts),
            'monte-carlo', 'empirical' (one observed batch).
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
        """busiest_gpu_pairs / mean_gpu_pairs (the "EP max/mean per GPU" of the table in tests/moe/test_routing.py)."""
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
    """Routing statistics of one MoE layer for T tokens (module docstring for every formula and approximation).

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
    Exact for uniform routing; within a few % of Monte-Carlo for power-law routing (tests/moe/test_routing.py)."""
    if len(ps) == 1 or any(v >= 1.0 for v in ps):
        return min(1.0, max(ps))
    log_none = sum(math.log1p(-v) for v in ps)
    s_eq = sum(ps) * e / k
    if k < e and s_eq + k - 1 < e:
        hyper = sum(math.log((e - s_eq - i) / (e - i)) for i in range(k))
        log_none += hyper - s_eq * math.log1p(-k / e)
    return -math.expm1(min(log_none, 0.0))


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


# ----------------------------------------------------------------------------------------------------------------------
# Monte-Carlo and empirical statistics
# ----------------------------------------------------------------------------------------------------------------------

def sample_topk(tokens: int, top_k: int, num_experts: int, probs: Sequence[float] | None = None, rng=None):
    """Draw topk_ids, an int array [T, k] of distinct expert ids per token (numpy).

    Uniform (``probs`` None): a uniform k-subset per token (rows with a repeated id are redrawn; for k > E/2 the k
    smallest of E uniform keys). Otherwise systematic sampling over a per-token random order: expert e is included
    with probability exactly p_e (Σ p = k, each ≤ 1), and each token gets exactly k distinct experts.
    """
    import numpy as np

    rng = rng if rng is not None else np.random.default_rng(0)
    t, k, e = tokens, top_k, num_experts
    if probs is None:
        if 2 * k > e:
            return np.argpartition(rng.random((t, e)), k - 1, axis=1)[:, :k]
        ids = rng.integers(0, e, size=(t, k))
        while True:
            srt = np.sort(ids, axis=1)
            bad = np.nonzero((srt[:, 1:] == srt[:, :-1]).any(axis=1))[0] if k > 1 else np.zeros(0, dtype=int)
            if bad.size == 0:
                return ids
            ids[bad] = rng.integers(0, e, size=(bad.size, k))
    p = np.asarray(probs, dtype=float)
    order = np.argsort(rng.random((t, e)), axis=1)
    cum = np.cumsum(p[order], axis=1)
    marks = rng.random((t, 1)) + np.arange(k)[None, :]  # u, u+1, ..., u+k-1 with u ~ U(0, 1)
    pos = np.minimum((cum[:, :, None] <= marks[:, None, :]).sum(axis=1), e - 1)  # first index with cum > mark
    return np.take_along_axis(order, pos, axis=1)


def _stats_from_ids(ids, e: int, g: int):
    """Observed statistics of a stack of batches ``ids`` [n, T, k]: per batch (max expert load, active experts, max GPU
    pairs, max active experts on a GPU, mean and max tokens sent per GPU) as an [n, 6] array, and the expert counts
    [n, E]."""
    import numpy as np

    n, t, _ = ids.shape
    s = e // g
    counts = np.bincount((ids + (np.arange(n) * e)[:, None, None]).ravel(), minlength=n * e).reshape(n, e)
    by_gpu = counts.reshape(n, g, s)
    owner = ids // s
    hit = np.zeros((n, t, g), dtype=bool)
    hit[np.arange(n)[:, None, None], np.arange(t)[None, :, None], owner] = True
    sent = hit.sum(axis=1)
    out = np.stack([counts.max(axis=1), (counts > 0).sum(axis=1), by_gpu.sum(axis=2).max(axis=1),
                    (by_gpu > 0).sum(axis=2).max(axis=1), sent.mean(axis=1), sent.max(axis=1)], axis=1)
    return out.astype(float), counts


def monte_carlo(tokens: int, top_k: int, num_experts: int, *, routing="uniform", ep: int = 1, trials: int = 200,
                seed: int = 0) -> RoutingStats:
    """Monte-Carlo estimate of :class:`RoutingStats` (``method='monte-carlo'``): ``trials`` batches drawn with
    :func:`sample_topk` (numpy ``default_rng(seed)``), averages of the observed values. Used to validate the closed
    forms; cost O(trials · T · k) uniform, O(trials · T · E log E) skewed (vectorised in chunks of batches)."""
    import numpy as np

    t, k, e, g = _check_tke(tokens, top_k, num_experts, ep)
    _check_int("trials", trials)
    r = parse_routing(routing, e, k, seed=seed, ep=g)
    rng = np.random.default_rng(seed)
    width = max(k, g) if r.probs is None and 2 * k <= e else e
    chunk = max(1, min(trials, 4_000_000 // (t * width)))
    acc, done = np.zeros(6), 0
    while done < trials:
        n = min(chunk, trials - done)
        ids = sample_topk(n * t, k, e, r.probs, rng).reshape(n, t, k)
        acc += _stats_from_ids(ids, e, g)[0].sum(axis=0)
        done += n
    acc /= trials
    p = r.probs or tuple([k / e] * e)
    return RoutingStats(
        tokens=t, top_k=k, num_experts=e, ep=g, routing=r.label, method="monte-carlo",
        mean_tokens_per_expert=t * k / e, busiest_expert_tokens=float(acc[0]), hottest_expert_mean=t * max(p),
        active_experts=float(acc[1]), experts_per_gpu=e // g, mean_gpu_pairs=t * k / g,
        busiest_gpu_pairs=float(acc[2]), active_experts_per_gpu=float(acc[1]) / g,
        busiest_gpu_active_experts=float(acc[3]), tokens_sent_per_gpu=float(acc[4]),
        busiest_gpu_tokens_sent=float(acc[5]), expert_probs=tuple(p))


def empirical_stats(topk_ids, num_experts: int, *, ep: int = 1) -> RoutingStats:
    """The observed statistics of one real batch (``method='empirical'``): ``topk_ids`` rows of k distinct expert ids
    (a list, an array, or a dump file path). T = number of rows; every "expected" field is the observed value."""
    import numpy as np

    rows = load_topk_ids(topk_ids) if isinstance(topk_ids, (str, os.PathLike)) else (
        topk_ids.tolist() if hasattr(topk_ids, "tolist") else [list(r) for r in topk_ids])
    if not rows or not isinstance(rows[0], list):
        raise TruepeakError("topk_ids must have shape [T, k] with T >= 1")
    k = len(rows[0])
    t, k, e, g = _check_tke(len(rows), k, num_experts, ep)
    ids = np.asarray(_as_int_rows(rows, e, k, "topk_ids"), dtype=np.int64)
    obs, counts = _stats_from_ids(ids[None], e, g)
    mx, act, gmx, gact, sent_mean, sent_max = obs[0].tolist()
    counts = counts[0]
    return RoutingStats(
        tokens=t, top_k=k, num_experts=e, ep=g, routing=f"topk_ids[{t}]", method="empirical",
        mean_tokens_per_expert=t * k / e, busiest_expert_tokens=mx, hottest_expert_mean=mx,
        active_experts=act, experts_per_gpu=e // g, mean_gpu_pairs=t * k / g, busiest_gpu_pairs=gmx,
        active_experts_per_gpu=act / g, busiest_gpu_active_experts=gact,
        tokens_sent_per_gpu=sent_mean, busiest_gpu_tokens_sent=sent_max,
        expert_probs=tuple(float(c) / t for c in counts), expert_counts=tuple(int(c) for c in counts))
