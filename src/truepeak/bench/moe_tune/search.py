"""The search of ``truepeak moe tune``: for each (weight format, activations, tokens-per-expert bucket) of one GPU and
expert shape, time :class:`~truepeak.kernels.moe_triton.KernelConfig` pairs of the MoE kernels and keep the fastest
in a tuned table (:mod:`truepeak.kernels.moe_triton.tuned`). torch and triton are imported inside
:func:`run_tune`.

Method, per point (the weights built once per format, the routing, inputs and float32 reference once per point, as
``truepeak moe bench`` builds them):

1. the first candidate is :func:`~truepeak.kernels.moe_triton.choose_config`'s pair (the default), then the start
   table's entry for the point (by default the tuned table :class:`FusedMoE` would load for this GPU and shape, so
   that a re-tune after a kernel change starts from the last choice; for a shape with no table, the shipped table of
   the nearest shape of this GPU), then the previous bucket's choice;
2. a coordinate descent from the fastest of those
   (:func:`~truepeak.kernels.moe_triton.search_space.descend`): field by field, every value tried on the best pair
   so far and a faster one adopted at once, so that the gate/up and the down kernel's changes combine within one
   sweep. Each candidate is fitted to the device's shared memory
   (:func:`~truepeak.kernels.moe_triton.search_space.fit_pair`: stages dropped until it fits, dropped if it does not
   fit with one), built (:class:`FusedMoE` checks the compiler's own shared-memory figure), checked against the
   float32 reference (the tolerances of ``moe bench``) and timed as ``moe bench`` times (the whole unit replayed
   from a CUDA graph, the steady median) with a short budget; sweeps repeat until one changes nothing or the
   point's share of the budget is spent (the time left divided by the points left);
3. the chosen and the default pairs are timed again with the final budget and the faster of the two is the entry.

The budget is the search's: once it is spent no search step starts, but every point left still times its default
(once in the search, once with the final budget), so each entry has the default's figure beside it.

Every candidate is a ``moe_experts`` record (backend ``triton``, the pair in ``workload.triton_tune``, its
``phase``: ``search`` or ``final``) appended to ``results.jsonl`` as it finishes; ``--resume`` reuses the records of
a previous run (by key) instead of measuring them again, so the search replays to where it stopped. The table is
rewritten after every point.
"""

from __future__ import annotations

import dataclasses
import datetime as _dt
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import truepeak
from truepeak.bench.moe_tune.config import TuneConfig
from truepeak.errors import TruepeakError, UnsupportedError, require
from truepeak.kernels.moe_triton import search_space as space_mod
from truepeak.kernels.moe_triton.config import choose_config, default_fp4_layout
from truepeak.kernels.moe_triton.tuned import (TunedEntry, TunedTable, bucket_of, find_table, nearest_table,
                                               write_table)
from truepeak.records import Correctness, MoeExpertsMetrics, MoeExpertsWorkload, RecordWriter, make_record
from truepeak.records.record import record_key

KIND = "moe_experts"
Pair = space_mod.Pair


@dataclass(frozen=True)
class TuneProgress:
    """One finished point (or candidate): ``done`` of ``total`` points, the point's label, the candidates timed so
    far at it and the best fraction of the read bandwidth so far (None before the first)."""

    done: int
    total: int
    label: str
    candidates: int
    best_fraction: float | None


@dataclass
class TuneResult:
    """What a run made: the table (and where it was written), the records file, the read bandwidth measured, the
    points not reached within the budget, and how many candidates were dropped before timing because they do not
    fit the device's shared memory or K."""

    table: TunedTable
    table_path: Path
    records_path: Path
    read_bandwidth_bytes_per_s: float
    not_run: list[str] = field(default_factory=list)
    dropped: int = 0
    timed: int = 0


def git_commit(folder: Path | None = None) -> str | None:
    """The commit of the truepeak checkout (``git rev-parse HEAD`` beside the package), or None outside one."""
    here = folder or Path(truepeak.__file__).resolve().parent
    try:
        out = subprocess.run(["git", "-C", str(here), "rev-parse", "HEAD"], capture_output=True, text=True,
                             timeout=10, check=True)
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip() or None


def run_tune(config: TuneConfig, out_dir: str | Path, *, resume: bool = False,
             progress: Callable[[TuneProgress], None] | None = None, shape: Any = None, read_bw: float | None = None,
             commit: str | None = None, env: Any = None, warn: Callable[[str], None] | None = None,
             start_table: Any = None) -> TuneResult:
    """Tune the MoE kernels for ``config`` on this GPU and write ``out_dir/results.jsonl`` (the candidates'
    records) and ``out_dir/<table file name>`` (the tuned table, :func:`truepeak.kernels.moe_triton.tuned.
    table_file_name`).

    Args:
        config: the run's settings (:class:`TuneConfig`, checked when it was built).
        out_dir: the results folder (created; with ``resume`` its ``results.jsonl`` is continued).
        progress: called after every candidate with a :class:`TuneProgress`.
        shape: an :class:`~truepeak.bench.moe.ExpertShape` instead of the model's (benchmarks' quick CPU mode).
        read_bw: the read bandwidth to divide by (bytes/s); default measured here
            (:func:`truepeak.bench.moe.measure_read_bandwidth`).
        commit: the truepeak commit recorded in the table (default :func:`git_commit`).
        env: the :class:`~truepeak.records.Environment` of the records (default measured here).
        warn: called with one line per unreadable line of a resumed records file.
        start_table: a :class:`~truepeak.kernels.moe_triton.tuned.TunedTable` whose entries are tried right after
            the default (default: :func:`~truepeak.kernels.moe_triton.tuned.find_table`'s shipped table for this
            GPU and shape, else :func:`~truepeak.kernels.moe_triton.tuned.nearest_table`'s of the nearest shape).

    Off a CUDA GPU the kernels run only in Triton's interpreter (``TRITON_INTERPRET=1`` set before triton is
    imported): then the weights live on the CPU and candidates are timed on the host (tiny shapes only, to check the
    tuner itself; the figures mean nothing).

    Raises (before anything is measured):
        UnsupportedError: no CUDA GPU (and not interpreting); a format, activations or shape this device cannot run
            (:func:`~truepeak.kernels.moe_triton.search_space.refusal`: the reason).
        TruepeakError: a bad model, layout or routing; tokens per expert under one token in the layer; ``resume``
            without, or a new run with, a records file.
    """
    torch = require("torch", "truepeak moe tune")
    from truepeak.bench import moe
    from truepeak.bench.outdir import prepare_out_dir, read_previous
    from truepeak.kernels.moe_triton import FusedMoE, device_smem_limit, interpreting
    from truepeak.moe.routing import parse_routing

    shape = shape if shape is not None else moe.expert_shape(config.model, config.tp, config.ep)
    parse_routing(config.routing, shape.E, shape.top_k)
    for tpe in config.tokens_per_expert:
        moe.tokens_for(tpe, shape)  # at least one token in the layer
    cuda = torch.cuda.is_available() and not interpreting()
    if not cuda and not interpreting():
        raise UnsupportedError("truepeak moe tune needs a CUDA GPU (torch sees none)")
    device = "cuda" if cuda else "cpu"
    cc = tuple(torch.cuda.get_device_capability()) if cuda else None
    device_name = torch.cuda.get_device_name() if cuda else "cpu"
    for wfmt, acts in config.weights:
        why = space_mod.refusal(wfmt, acts, shape.H, shape.I, cc)
        if why:
            raise UnsupportedError(f"cannot tune {wfmt} weights with {acts} activations on {device_name} for "
                                   f"{shape.model} (H={shape.H}, I={shape.I}): {why}")
    out = prepare_out_dir(out_dir, resume=resume, command="moe-tune")
    path = out / "results.jsonl"
    previous = read_previous(path, warn or (lambda _line: None)) if resume else {}
    smem = device_smem_limit(0) if cuda else 0
    if env is None:
        from truepeak.bench.environment import environment

        env = environment(device=0 if cuda else None)
    read_bw = read_bw if read_bw is not None else moe.measure_read_bandwidth()
    t_start = time.monotonic()
    deadline = t_start + config.budget_s
    table = TunedTable(device_name=device_name, E=shape.E_local, N=shape.I, H=shape.H, entries={},
                       model=shape.model, layout=config.layout, routing=config.routing,
                       date=_dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds").replace("+00:00", "Z"),
                       truepeak_commit=commit if commit is not None else git_commit(),
                       truepeak_version=truepeak.__version__, read_bandwidth_bytes_per_s=read_bw)
    if start_table is None and cuda:  # the shipped table of this shape, else of the nearest shape of this GPU
        start_table = (find_table(device_name, shape.E_local, shape.I, shape.H)[0]
                       or nearest_table(device_name, shape.E_local, shape.I, shape.H))
    points = [(w, a, t) for w, a in config.weights for t in config.tokens_per_expert]
    result = TuneResult(table, out / table.file_name, path, read_bw)
    entries: dict[tuple[str, str, int], TunedEntry] = {}
    done = 0

    def time_it(fn: Callable[[], Any], budget: float) -> Any:
        if cuda:
            from truepeak.bench.cuda_timer import time_cuda

            return time_cuda(lambda _i: fn(), n_sets=1, warmup_s=config.warmup_s, budget_s=budget, graph=True,
                             min_samples=5, telemetry=False)
        from truepeak.bench.timing import time_cpu

        return time_cpu(fn, warmup_s=0.0, budget_s=budget, min_samples=3)

    with RecordWriter(path) as writer:
        for wfmt, acts in config.weights:
            fp4 = wfmt in ("nvfp4", "mxfp4")
            w1, w2 = moe.make_weights(shape, wfmt, device, config.seed, w4a8=fp4)
            prev_best: Pair | None = None
            for tpe in config.tokens_per_expert:
                point = _Point(config, shape, wfmt, acts, tpe, w1, w2, device, read_bw, smem, env, writer, previous,
                               time_it, FusedMoE, moe, torch)
                left = len(points) - done
                point_end = time.monotonic() + max(0.0, deadline - time.monotonic()) / max(left, 1)

                def report(p: _Point = point) -> None:
                    if progress:
                        progress(TuneProgress(done, len(points), p.label, p.timed, p.best_fraction()))

                seed = start_table.lookup(wfmt, acts, tpe) if start_table is not None else None
                if seed is not None and seed.fp4_layout != point.fp4_layout:
                    seed = None  # tuned for another fp4 layout
                entry = point.search(prev_best, point_end, report, None if seed is None else (seed.gate_up, seed.down))
                result.dropped += point.dropped
                result.timed += point.timed
                done += 1
                if entry is not None:
                    entries[(wfmt, acts, bucket_of(tpe))] = entry
                    prev_best = (entry.gate_up, entry.down)
                    result.table = dataclasses.replace(table, entries=dict(entries))
                    write_table(result.table, out)
                report(point)
            del w1, w2
            if cuda:
                torch.cuda.empty_cache()
    result.not_run = [f"{w} {a} activations, {t:g} tokens per expert" for w, a, t in points
                      if (w, a, bucket_of(t)) not in entries]
    if not entries:
        write_table(result.table, out)
    return result


class _Point:
    """One (format, activations, tokens per expert) point: its routing, inputs, reference and candidates."""

    def __init__(self, config: TuneConfig, shape: Any, wfmt: str, acts: str, tpe: float, w1: Any, w2: Any,
                 device: str, read_bw: float, smem: int, env: Any, writer: Any, previous: dict, time_it: Any,
                 fused: Any, moe: Any, torch: Any):
        self.c, self.shape, self.wfmt, self.acts, self.tpe = config, shape, wfmt, acts, tpe
        self.w1, self.w2, self.read_bw, self.smem, self.env = w1, w2, read_bw, smem, env
        self.writer, self.previous, self.time_it, self.fused, self.torch = writer, previous, time_it, fused, torch
        self.w8a8 = acts == "fp8"
        # fp4: the layout FusedMoE runs by default; the entry records it, and serves only that layout
        self.fp4_layout = default_fp4_layout(wfmt) if wfmt in ("nvfp4", "mxfp4") else None
        self.mode = "sustained" if device == "cuda" else "cpu"
        self.label = f"{wfmt} ({acts} activations), {tpe:g} tokens per expert"
        T = moe.tokens_for(tpe, shape)
        self.x, self.ids, self.topw = moe.decode_inputs(shape, tpe, config.routing, config.seed, device)
        counts = torch.bincount(self.ids[self.ids >= 0], minlength=shape.E_local).tolist()
        self.nbytes = moe.active_bytes(w1, w2, counts)
        self.flop = moe.unit_flop(shape, sum(counts))
        self.ref = moe.reference_rows(self.x, w1, w2, self.ids, self.topw)
        self.workload = dict(model=shape.model, layout=config.layout, routing=config.routing,
                             tokens_per_expert=float(tpe), E_local=shape.E_local, H=shape.H, I=shape.I,
                             top_k=shape.top_k, T=T, weights_format=wfmt, active_experts=sum(1 for n in counts if n),
                             max_tokens_per_expert=max(counts) if counts else 0)
        if self.fp4_layout:
            self.workload["fp4_layout"] = self.fp4_layout
        self.times: dict[Pair, float | None] = {}
        self.timed = 0
        self.dropped = 0

    def best_fraction(self) -> float | None:
        ok = [t for t in self.times.values() if t]
        return self.nbytes / min(ok) / self.read_bw if ok else None

    def fitted(self, pair: Pair) -> Pair | None:
        got = space_mod.fit_pair(pair, self.wfmt, self.w8a8, self.shape.H, self.shape.I, self.smem)
        if got is None:
            self.dropped += 1
        return got

    def search(self, prev_best: Pair | None, point_end: float, report: Callable[[], None],
               seed: Pair | None = None) -> TunedEntry | None:
        s = self.shape
        mma = self.fp4_layout == "mma"
        default = self.fitted((choose_config(self.tpe, self.wfmt, True, None, s.H, self.w8a8, mma=mma),
                               choose_config(self.tpe, self.wfmt, False, None, s.I, self.w8a8, mma=mma)))
        if default is None:
            return None
        self.evaluate(default, "search", self.c.search_budget_s)
        report()
        space = space_mod.search_space(self.wfmt, self.w8a8, bucket_of(self.tpe), self.fp4_layout)
        for first in (seed, prev_best):
            if first is None or first[0].block_m not in space["block_m"]:
                continue
            start = self.fitted(first)
            if start is not None and start not in self.times and time.monotonic() < point_end:
                self.evaluate(start, "search", self.c.search_budget_s)
                report()
        best = self.best()
        if best is not None:
            def time_of(cand: Pair) -> tuple[Pair, float] | None:
                got = self.fitted(cand)
                if got is None:
                    return None
                if got not in self.times:
                    self.evaluate(got, "search", self.c.search_budget_s)
                    report()
                t = self.times[got]
                return None if t is None else (got, t)

            space_mod.descend(best, space, time_of, lambda: time.monotonic() >= point_end)
            best = self.best()
        if best is None:
            return None
        t_best = self.evaluate(best, "final", self.c.final_budget_s)
        t_def = t_best if best == default else self.evaluate(default, "final", self.c.final_budget_s)
        if t_def is not None and (t_best is None or t_def <= t_best):
            best, t_best = default, t_def
        if t_best is None:
            return None
        frac = self.nbytes / t_best / self.read_bw
        return TunedEntry(best[0], best[1], float(self.tpe), t_best, frac,
                          None if t_def is None else self.nbytes / t_def / self.read_bw, t_def, self.timed,
                          self.fp4_layout)

    def best(self) -> Pair | None:
        ok = [(t, i, p) for i, (p, t) in enumerate(self.times.items()) if t]
        return min(ok)[2] if ok else None

    def evaluate(self, pair: Pair, phase: str, budget: float) -> float | None:
        """Check and time ``pair``; record it; return its time (None when it failed or was skipped)."""
        torch = self.torch
        tune = {"gate_up": dataclasses.asdict(pair[0]), "down": dataclasses.asdict(pair[1]), "phase": phase}
        wl = {**self.workload, "triton_tune": tune}
        key = record_key(KIND, MoeExpertsWorkload(**wl), "triton", self.wfmt, self.mode)
        if key in self.previous:
            rec = self.previous[key]
            t = rec.time_s if rec.ok else None
        else:
            t = self._measure(pair, wl, key, budget)
        if phase == "search":
            self.times[pair] = t
            self.timed += 1
        return t

    def _measure(self, pair: Pair, wl: dict, key: str, budget: float) -> float | None:
        torch = self.torch
        kw = dict(kind=KIND, backend="triton", format=self.wfmt, env=self.env, mode=self.mode, key=key)
        fn = None
        try:
            acts = None if self.wfmt == "bf16" else self.acts
            fn = self.fused(self.x, self.w1, self.w2, self.ids, self.topw, tokens_per_expert=self.tpe, config=pair,
                            activations=acts, fp4_layout=self.fp4_layout)
            if (fn.cfg1, fn.cfg2) != pair:  # the compiler's figure dropped stages: record what ran
                wl = {**wl, "triton_tune": {**wl["triton_tune"], "fitted_gate_up": dataclasses.asdict(fn.cfg1),
                                            "fitted_down": dataclasses.asdict(fn.cfg2)}}
            wl["activations"] = fn.activations
            out = fn()
            ref = self.ref
            err = float((out[:ref.shape[0]].float() - ref).abs().max() / ref.abs().max().clamp(min=1e-12))
            # moe bench's tolerances (truepeak.bench.moe.run_bench): bf16 2e-2, e4m3 activations 1e-1, others 8e-2
            tol = 2e-2 if self.wfmt == "bf16" else 1e-1 if self.w8a8 else 8e-2
            correct = Correctness(max_rel_error=err, passed=err <= tol, reference="float32, first 16 tokens")
            if not err <= tol:
                self.writer.write(make_record(workload=MoeExpertsWorkload(**wl), **kw, status="failed",
                                              measurement=None, correctness=correct,
                                              reason=f"output differs from the float32 reference: max error "
                                                     f"{err:.3g} of max |ref| (tolerance {tol})"))
                return None
            m = self.time_it(fn, budget)
            ts = m.steady_median_s
            derived = MoeExpertsMetrics(time_s=ts, flop=self.flop, flop_per_s=self.flop / ts, bytes=self.nbytes,
                                        bytes_per_s=self.nbytes / ts, read_bandwidth_bytes_per_s=self.read_bw,
                                        read_bandwidth_fraction=self.nbytes / ts / self.read_bw)
            self.writer.write(make_record(workload=MoeExpertsWorkload(**wl), **kw, measurement=m, status="ok",
                                          correctness=correct, derived=derived))
            return ts
        except UnsupportedError as exc:
            self.writer.write(make_record(workload=MoeExpertsWorkload(**wl), **kw, status="skipped",
                                          measurement=None, reason=str(exc).splitlines()[0][:300]))
        except Exception as exc:  # noqa: BLE001 - a candidate that fails to compile or run is data
            if "out of memory" in str(exc).lower() and torch.cuda.is_available():
                torch.cuda.empty_cache()
            first = (str(exc).splitlines() or [""])[0][:300]
            self.writer.write(make_record(workload=MoeExpertsWorkload(**wl), **kw, status="failed",
                                          measurement=None, reason=f"{type(exc).__name__}: {first}"))
        finally:
            fn = None  # noqa: F841 - free the unit's buffers before the next candidate
        return None


__all__ = ["TuneProgress", "TuneResult", "git_commit", "run_tune"]
