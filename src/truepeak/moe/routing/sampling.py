"""Sampling routing: top-k ids drawn from a routing distribution, Monte-Carlo statistics, and the observed
statistics of a real ``topk_ids`` dump (numpy, imported inside the functions)."""

from __future__ import annotations

import os
from collections.abc import Sequence

from truepeak.errors import TruepeakError
from truepeak.moe.routing.checks import _check_int, _check_tke
from truepeak.moe.routing.grammar import _as_int_rows, load_topk_ids, parse_routing
from truepeak.moe.routing.stats import RoutingStats


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


def sample_routing_ids(spec, tokens: int, top_k: int, num_experts: int, *, seed: int = 0, ep: int = 1):
    """Top-k expert ids of ``tokens`` tokens from a routing spec of the grammar (:func:`parse_routing`: uniform,
    power law with its placement, histogram, topk_ids dump), as ``moe bench`` routes its tokens: an int64 numpy
    array [T, k] of distinct expert ids per row.

    A dump replays its own rows, repeated and cut to T (the routing that was observed, not a resample of it); every
    other spec draws T tokens with :func:`sample_topk` from its inclusion probabilities (exactly p_e per expert, k
    distinct per token), numpy ``default_rng(seed)``; ``seed`` also places the power law's ranks on expert ids and
    ``ep`` is the EP degree a ``balanced`` placement packs for (:func:`powerlaw_probs`).

    Raises:
        TruepeakError: T < 1, k > E, or a spec :func:`parse_routing` refuses.
    """
    import numpy as np

    t, k, e, g = _check_tke(tokens, top_k, num_experts, ep)
    r = parse_routing(spec, e, k, seed=seed, ep=g)
    if r.ids is not None:
        rows = np.asarray(r.ids, dtype=np.int64)
        return np.ascontiguousarray(np.tile(rows, (-(-t // len(rows)), 1))[:t])
    ids = sample_topk(t, k, e, r.probs, np.random.default_rng(seed))
    return np.ascontiguousarray(ids, dtype=np.int64)


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
