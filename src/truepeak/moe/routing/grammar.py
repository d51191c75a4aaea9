"""The routing grammar: one parser for every routing spec, for ``moe plan`` and ``moe bench`` alike.

A spec names per-expert inclusion probabilities p_e (Σ p_e = k, each ≤ 1: a token picks k distinct experts; uniform
routing has p_e = k/E and no list):

- ``uniform``.
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
  histogram. :func:`truepeak.moe.routing.sampling.empirical_stats` gives the observed values of the dump itself
  (``method='empirical'``).

:func:`parse_routing` turns a spec into a :class:`Routing`; :func:`routing_label` gives a spec's label without
computing anything.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from truepeak.errors import TruepeakError
from truepeak.moe.routing.checks import _check_tke

#: Routing specs accepted in strings, for error messages.
ROUTING_FORMS = ("'uniform'", "'powerlaw:<alpha>[:random|sorted|balanced]' (alpha >= 0, e.g. powerlaw:1.2)",
                 "a file of E per-expert counts (one row)", "a topk_ids file (.npy/.json/.txt, shape [T, k])")


@dataclass(frozen=True)
class Routing:
    """A parsed routing distribution: ``kind`` ('uniform'|'powerlaw'|'histogram'|'dump'), ``label`` (for reports),
    ``alpha`` (powerlaw), ``probs`` (per-expert inclusion probabilities p_e, Σ = k; None for uniform), ``ids`` (a
    dump's own top-k id rows, [T', k]; None for every other kind)."""

    kind: str
    label: str
    alpha: float | None = None
    probs: tuple[float, ...] | None = field(default=None, repr=False)
    ids: tuple[tuple[int, ...], ...] | None = field(default=None, repr=False, compare=False)


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
    topk_ids file (:func:`load_topk_ids`) or to a 1-D file of E counts (:func:`routing_file` says which text is a
    path).

    Raises:
        TruepeakError: anything else, naming the accepted forms; bad alpha; a histogram of the wrong length or with
            negative entries; ids out of [0, E), rows of the wrong width or with repeated ids.
    """
    _, k, e, ep = _check_tke(1, top_k, num_experts, ep)
    if isinstance(spec, Routing):
        return spec
    path = routing_file(spec)
    if path is not None:
        rows = load_topk_ids(path)
        where = f"routing file {str(spec)!r}"
        if len(rows) == 1 and len(rows[0]) == e and e != k:
            return Routing("histogram", f"histogram:{path.name}", probs=tuple(_histogram_probs(rows[0], k, e, where)))
        ids = _as_int_rows(rows, e, k, where)
        return _dump_routing(ids, e, k, f"dump:{path.name}")
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
    return Routing("dump", label, probs=tuple(_histogram_probs(counts, k, e, label)),
                   ids=tuple(tuple(row) for row in ids))


#: File suffixes that make a routing text a path whether or not the file exists (so a missing one is named as such).
FILE_SUFFIXES = (".npy", ".json", ".txt", ".csv")


def routing_file(spec) -> Path | None:
    """The file a routing spec names, or None when it names none: a PathLike; text with a suffix of
    :data:`FILE_SUFFIXES` or a path separator (the file need not exist: :func:`load_topk_ids` then says so); any other
    text that is not a routing keyword (``uniform``, ``powerlaw:...``) but names an existing file (``ids``, a dump
    without a suffix)."""
    if isinstance(spec, os.PathLike):
        return Path(spec)
    if not isinstance(spec, str):
        return None
    if Path(spec).suffix.lower() in FILE_SUFFIXES or os.sep in spec:
        return Path(spec)
    s = spec.strip().lower()
    if s == "uniform" or _powerlaw_parts(s) is not None:
        return None
    try:
        return Path(spec) if Path(spec).is_file() else None
    except OSError:  # text too long for a file name (a list of counts, say): no file
        return None
