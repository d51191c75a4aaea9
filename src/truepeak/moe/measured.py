"""Measured times that replace the roofline in a plan: GEMMs, MoE expert blocks and collectives from records files.

Pure Python. Reads the records ``truepeak run`` / ``truepeak comm`` / ``truepeak moe bench`` write
(:func:`truepeak.records.read_records`, tolerant: status ``ok`` only; torn lines, other schema versions and records of
other kinds are counted as skipped). What is used:

- kind ``gemm``: ``workload.m, .n, .k``, ``format``, the time per call. Serves the single-GEMM ops (attention
  projections, shared experts, dense MLP, router, lm_head) with the same N, K and format; the time is interpolated
  linearly in M between measured M (:func:`interpolate`); below the smallest measured M the smallest M's time is used
  (decode GEMMs are weight-streaming bound there: time is flat in M: alibaba/InferSim
  ``bench_data/grouped_gemm/decode/h800/data.csv``); above the largest M there is no measurement (the roofline is used).
- kind ``moe_experts`` (grouped GEMM of one MoE layer's routed experts): ``workload.tokens_per_expert`` and the time;
  the curve is matched on the experts on the GPU (``E_local``), hidden (``H``), expert width per GPU (``I``) and the
  weights' format; ``workload.gemm`` (``"gate_up"`` or ``"down"``) says the time is one GEMM's, otherwise it covers
  the whole expert block (gate+up, activation, down), as ``truepeak moe bench`` (truepeak.bench.moe) records it.
  ``workload.routing`` (``"uniform"``, ``"powerlaw:1.2"``) must equal the plan's routing label: skewed routing
  activates fewer experts at the same mean tokens per expert, so its curve is faster and must not time a uniform plan
  (or the reverse). Interpolated in tokens per expert as GEMMs are in M, except below the smallest measured tokens per
  expert: there the block streams the weights of FEWER experts (at batch 1, DeepSeek-V3 EP8 activates ~2.5 of 32
  local experts; at the smallest measured point, 1 token per expert, ~20), so its time is not flat: the smallest
  point's time is scaled by active experts (the plan's / the point's ``workload.active_experts``) when both are known,
  else no measurement is used (the roofline is).
- Several backends (``backend``) of the same workload make separate curves; a lookup takes the FASTEST matching
  curve at that point (what a serving stack would pick) and names its backend. ``mode`` ``burst`` records are used
  only where no other mode exists for that curve.
- kind ``collective``: ``workload.op``, ``workload.bytes`` (nccl-tests total size S), ``workload.n_ranks``,
  ``mode``, the time; interpolated linearly in S (an α–β curve is linear, so piecewise-linear is exact between
  points); below the smallest S the smallest's time (the latency floor); above the largest, the line through the last
  two points (the bandwidth regime). Modes make separate curves and a lookup takes the CUDA-graph curve first (decode
  runs under CUDA graphs; ``truepeak comm`` measures both, and on 2x H200 a 16 KiB all-reduce takes 9.8 µs replayed
  from a graph against 24.6 µs eager: docs/results/h200x2/results.jsonl), then eager, then unlabelled.
- kind ``collective_fit``: ``workload.op``, ``workload.n_ranks``, ``mode``, ``derived.alpha_s`` and
  ``derived.busbw_bytes_per_s`` (:func:`truepeak.comm.model.models_from_records`); used where no ``collective``
  points exist. CUDA-graph fits first (decode runs under CUDA graphs), then eager.

Anything missing falls back to the roofline (computation) or the literature α–β defaults (collectives); the plan says
which ops used measurements.
"""

from __future__ import annotations

import bisect
import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from truepeak.errors import TruepeakError
from truepeak.records import RESULTS_FILE, Record, read_records, results_file


def interpolate(points: list[tuple[float, float]], x: float, *, below: str = "clamp", above: str = "none"
                ) -> tuple[float, str] | None:
    """Piecewise-linear interpolation of sorted ``(x, y)`` points at ``x``; returns ``(y, how)`` or None.

    ``how`` is ``"exact"``, ``"interpolated"``, ``"clamped"`` (below the smallest x, its y) or ``"extrapolated"``.
    ``below``: ``"clamp"`` or ``"none"``; ``above``: ``"none"`` or ``"linear"`` (line through the last two points).
    """
    if not points:
        return None
    xs = [p[0] for p in points]
    i = bisect.bisect_left(xs, x)
    if i < len(xs) and xs[i] == x:
        return points[i][1], "exact"
    if i == 0:
        return (points[0][1], "clamped") if below == "clamp" else None
    if i == len(xs):
        if above == "linear" and len(points) >= 2:
            (x0, y0), (x1, y1) = points[-2], points[-1]
            return y1 + (y1 - y0) * (x - x1) / (x1 - x0), "extrapolated"
        return None
    (x0, y0), (x1, y1) = points[i - 1], points[i]
    return y0 + (y1 - y0) * (x - x0) / (x1 - x0), "interpolated"


def _canon_format(name) -> str | None:
    if not name:
        return None
    from truepeak.formats import get_format

    try:
        return get_format(str(name)).name
    except Exception:
        return str(name).lower()


def _canon_routing(label) -> str | None:
    """A routing label in one spelling (:func:`truepeak.moe.routing.routing_label`: ``"PowerLaw:1.20"`` and
    ``"powerlaw:1.2:random"`` → ``"powerlaw:1.2"``), so that a record's and a plan's compare equal; None stays None."""
    if label is None:
        return None
    from truepeak.moe.routing import routing_label

    try:
        return routing_label(str(label))
    except TruepeakError:
        return str(label).strip().lower()


#: Workload fields that are a curve's x value or follow from it, not what identifies the curve.
_X_FIELDS = ("m", "label", "flop", "min_bytes", "intensity", "tokens_per_expert", "T", "active_experts",
             "max_tokens_per_expert", "bytes", "count")


def _curve_id(r: Record) -> str:
    """What identifies one measured curve apart from its x value (mode excluded)."""
    w = {k: v for k, v in r.workload.to_dict().items() if k not in _X_FIELDS}
    return json.dumps([w, r.backend, r.format], sort_keys=True, default=str)


def _sorted_unique(points: list[tuple[float, float]]) -> list[tuple[float, float]]:
    """Sort by x; a repeated x keeps the median of its y values."""
    by_x: dict[float, list[float]] = {}
    for x, y in points:
        by_x.setdefault(float(x), []).append(float(y))
    out = []
    for x in sorted(by_x):
        ys = sorted(by_x[x])
        out.append((x, ys[len(ys) // 2]))
    return out


@dataclass
class MeasuredTables:
    """Measured times by workload, from one or more JSON Lines files (module docstring).

    Attributes:
        gemm: ``(n, k, format, backend) -> [(m, seconds), ...]`` sorted by m.
        moe_experts: list of ``(match_keys, [(tokens_per_expert, seconds), ...], {tokens_per_expert:
            active_experts})``; match_keys a dict of the optional workload keys (experts, hidden, width, format, gemm,
            backend); the last dict holds the points' ``workload.active_experts`` where recorded.
        collectives: ``(op, n_ranks, mode) -> [(bytes, seconds), ...]`` sorted by bytes (mode ``"graph"``,
            ``"eager"`` or None when the record has none).
        fits: ``(op, n_ranks, mode) -> CollectiveModel``.
        sources: the files read.
        skipped: lines not used (not JSON, status not ok, missing fields), counted.
        other_devices: device name -> records left out because they were measured on another device than the
            plan's (:func:`load_measured` with ``accelerator``).
    """

    gemm: dict = field(default_factory=dict)
    moe_experts: list = field(default_factory=list)
    collectives: dict = field(default_factory=dict)
    fits: dict = field(default_factory=dict)
    sources: list = field(default_factory=list)
    skipped: int = 0
    other_devices: dict = field(default_factory=dict)

    @property
    def empty(self) -> bool:
        return not (self.gemm or self.moe_experts or self.collectives or self.fits)

    def _same_device(self, rec: Record, accelerator) -> bool:
        """Whether ``rec`` may stand for ``accelerator``: measured on it, or naming no device; the others are
        counted in :attr:`other_devices`. A gloo collective without a device is a CPU's."""
        from truepeak.hardware.lookup import environment_device

        key, name = environment_device(rec.env)
        if key is None and name is None and rec.kind in ("collective", "collective_fit") and rec.backend == "gloo":
            key, name = "cpu", "the CPU (gloo)"
        if key is None or key == accelerator.key:
            return True
        self.other_devices[name] = self.other_devices.get(name, 0) + 1
        return False

    def summary(self) -> str:
        """``"12 GEMM shapes, 1 MoE expert curve, 4 collective curves, 2 collective fits from a.jsonl"``."""
        parts = [f"{len(self.gemm)} GEMM (N, K, format) curves", f"{len(self.moe_experts)} MoE expert curves",
                 f"{len(self.collectives)} collective curves", f"{len(self.fits)} collective fits"]
        return ", ".join(parts) + f" from {', '.join(self.sources)}"

    # -- lookups -------------------------------------------------------------------------------------------------------
    def gemm_time(self, m: float, n: int, k: int, fmt: str) -> tuple[float, str] | None:
        """Seconds of one GEMM (M, N, K, format) from the fastest measured curve of that (N, K, format), or None."""
        f = _canon_format(fmt)
        best = None
        for (cn, ck, cf, backend), pts in self.gemm.items():
            if (cn, ck, cf) != (int(n), int(k), f):
                continue
            hit = interpolate(pts, float(m))
            if hit is not None and (best is None or hit[0] < best[0]):
                best = (hit[0], f"measured: gemm {n}x{k} {f} at M={m:g} ({hit[1]}, {len(pts)} points, {backend})")
        return best

    def moe_time(self, tokens_per_expert: float, *, experts: int, hidden: int, width: int, fmt: str,
                 gemm: str | None = None, active_experts: float | None = None, routing: str | None = None
                 ) -> tuple[float, str] | None:
        """Seconds of the routed-expert block (``gemm`` None) or of one of its GEMMs (``"gate_up"``/``"down"``) at
        ``tokens_per_expert``, from the fastest curve whose present keys all match (``routing``: the plan's routing
        label, ``"uniform"`` / ``"powerlaw:1.2"``; a curve measured under other routing activates other numbers of
        experts at the same tokens per expert and is not used); or None.

        Below a curve's smallest tokens per expert the time is the smallest point's x ``active_experts`` / that
        point's recorded active experts (weight streaming scales with the experts that receive tokens); without
        both numbers that curve gives nothing there."""
        want = {"experts": experts, "hidden": hidden, "width": width, "format": _canon_format(fmt), "gemm": gemm,
                "routing": _canon_routing(routing)}
        best = None
        for keys, pts, actives in self.moe_experts:
            if (keys.get("gemm") or None) != gemm:
                continue
            if any(v is not None and want.get(k) is not None and v != want[k] for k, v in keys.items()
                   if k not in ("gemm", "backend")):
                continue
            hit = interpolate(pts, float(tokens_per_expert), below="none")
            if hit is None and pts and tokens_per_expert < pts[0][0]:
                x0, t0 = pts[0]
                a0 = actives.get(x0)
                if active_experts is not None and a0:
                    hit = (t0 * float(active_experts) / a0,
                           f"below the smallest measured {x0:g} tokens/expert: scaled by active experts "
                           f"{float(active_experts):.3g} / {a0:.4g}")
            if hit is not None and (best is None or hit[0] < best[0]):
                t, how = hit
                what = f"moe_experts{'' if gemm is None else ' ' + gemm}"
                best = (t, f"measured: {what} at {tokens_per_expert:.3g} tokens/expert ({how}, {len(pts)} points, "
                           f"{keys.get('backend') or 'backend unnamed'})")
        return best

    def collective_time(self, op: str, n: int, nbytes: float) -> tuple[float, str] | None:
        """Seconds of one collective of nccl-tests size ``nbytes`` on ``n`` ranks from measured points, else from a
        measured α–β fit (graph before eager); None when neither exists."""
        from truepeak.comm.model import canonical_op

        op = canonical_op(op)
        modes = ("graph", "eager", None)
        for mode in modes + tuple(sorted({k[2] for k in self.collectives if k[:2] == (op, int(n))} - set(modes))):
            pts = self.collectives.get((op, int(n), mode))
            hit = interpolate(pts or [], float(nbytes), above="linear")
            if hit is not None:
                t, how = hit
                return t, f"measured: {op} on {n} GPUs, {mode or 'unlabelled'} ({how} over {len(pts)} sizes)"
        for mode in modes:
            fit = self.fits.get((op, int(n), mode))
            if fit is not None:
                return fit.time(nbytes), f"measured fit ({mode or 'unlabelled'}): {op} on {n} GPUs α " \
                                         f"{fit.alpha_s * 1e6:.3g} µs, busbw {fit.busbw_B_per_s / 1e9:.3g} GB/s"
        return None

    # -- loading -------------------------------------------------------------------------------------------------------
    def add_records(self, records: Iterable[Record], source: str = "", accelerator=None) -> None:
        """Add records (module docstring for the kinds used); the others are counted in ``skipped``. With
        ``accelerator`` (a catalog :class:`~truepeak.hardware.catalog.Accelerator`), records measured on another
        device are left out and counted in ``other_devices``: a time measured on a CPU or another GPU is no time of
        this one. Records that name no device are kept."""
        from truepeak.comm.model import canonical_op, models_from_records

        if accelerator is not None:
            records = [r for r in records if self._same_device(r, accelerator)]
            if not records:
                return  # nothing of this file is used: it is not a source

        gemm: dict = {}
        moe: dict = {}
        moe_active: dict = {}
        coll: dict = {}
        fit_records = []
        records = list(records)
        # burst-mode records only where the same curve has no other mode (serving runs back-to-back: sustained)
        non_burst = {(r.kind, _curve_id(r)) for r in records if r.mode != "burst"}
        for r in records:
            if not r.ok:
                self.skipped += 1
                continue
            kind, w, t = r.kind, r.workload, r.time_s
            if r.mode == "burst" and (kind, _curve_id(r)) in non_burst:
                continue
            if kind == "collective_fit":
                fit_records.append(r)
                continue
            try:
                if t is None or not t > 0:
                    raise ValueError
                if kind == "gemm":
                    gemm.setdefault((w.n, w.k, _canon_format(r.format), r.backend or ""), []).append((float(w.m), t))
                elif kind == "moe_experts":
                    keys = {"experts": w.E_local, "hidden": w.H, "width": w.I,
                            "format": _canon_format(r.format or w.weights_format), "gemm": w.gemm,
                            "backend": r.backend, "routing": _canon_routing(w.routing)}
                    frozen = tuple(sorted(keys.items(), key=lambda kv: kv[0]))
                    moe.setdefault(frozen, []).append((float(w.tokens_per_expert), t))
                    if w.active_experts is not None:
                        moe_active.setdefault(frozen, []).append((float(w.tokens_per_expert),
                                                                  float(w.active_experts)))
                elif kind == "collective":
                    coll.setdefault((canonical_op(w.op), w.n_ranks, r.mode), []).append((float(w.bytes), t))
                else:
                    self.skipped += 1
            except (TypeError, ValueError, TruepeakError):
                self.skipped += 1
        for key, pts in gemm.items():
            self.gemm[key] = _sorted_unique(self.gemm.get(key, []) + pts)
        for frozen, pts in moe.items():
            actives = dict(_sorted_unique(moe_active.get(frozen, [])))
            self.moe_experts.append((dict(frozen), _sorted_unique(pts), actives))
        for key, pts in coll.items():
            self.collectives[key] = _sorted_unique(self.collectives.get(key, []) + pts)
        self.fits.update(models_from_records(fit_records))
        if source:
            self.sources.append(source)


def load_measured(paths, accelerator=None) -> MeasuredTables:
    """Read one path or a list of paths of records files (:func:`truepeak.records.read_records`, plain or gzip; a
    folder truepeak wrote stands for its ``results.jsonl``: :func:`truepeak.records.results_file`) into
    :class:`MeasuredTables`; with ``accelerator``, only the records measured on it or naming no device
    (:meth:`MeasuredTables.add_records`).

    Raises:
        TruepeakError: a file that cannot be read, or files holding no usable record (the message names the kinds
            looked for, and the devices whose records were left out).
    """
    if isinstance(paths, (str, Path)):
        paths = [paths]
    tables = MeasuredTables()
    for p in paths:
        path = results_file(p)  # a folder truepeak wrote stands for its records, as in `truepeak report`
        if not path.is_file():
            raise TruepeakError(f"cannot read measured results {str(p)!r}: no such file"
                                + (f" (a folder without {RESULTS_FILE})" if path.is_dir() else ""))
        records = read_records(path, strict=False)
        tables.skipped += len(records.problems)
        tables.add_records(records, source=path.name, accelerator=accelerator)
    if tables.empty:
        other = (f"; left out, measured on another device than the {accelerator.name}: "
                 f"{other_devices_text(tables.other_devices)}" if tables.other_devices else "")
        raise TruepeakError(f"{', '.join(str(p) for p in paths)} holds no usable measurement (looked for records of "
                            f"kind gemm, moe_experts, collective or collective_fit with status ok){other}")
    return tables


def other_devices_text(counts: dict) -> str:
    """``"80 records of AMD EPYC, 3 of NVIDIA A100"``: :attr:`MeasuredTables.other_devices` in words."""
    parts = [f"{n} {'record' if n == 1 else 'records'} of {name}" if i == 0 else f"{n} of {name}"
             for i, (name, n) in enumerate(sorted(counts.items(), key=lambda kv: -kv[1]))]
    return ", ".join(parts)


__all__ = ["interpolate", "MeasuredTables", "load_measured", "other_devices_text"]
