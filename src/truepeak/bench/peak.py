"""``truepeak peak``: the maximum achievable matmul FLOPS (MAMF) per format, found by a search over GEMM shapes.

mamf-finder brute-forces a cartesian grid (its "medium" 1024..16384 step 1024 cube is 4096 shapes, 15-30 min; the
exhaustive one takes hours to days; stas00/ml-engineering ``compute/accelerator/benchmarks/README.md``). The throughput
landscape over (M, N, K) is smooth at the scale of a few hundred elements except for tile-quantisation ripples, so a
coarse look plus local refinement finds its top in a few dozen evaluations:

1. **coarse**: a grid of large and aspect-varied shapes (:data:`GPU_COARSE`: M, N, K in {2048, 4096, 8192, 16384}
   with M <= N, 40 shapes; the best published MAMF shapes are of both kinds: 2048 x 2048 x 13312 on an H100, 1024 x
   15360 x 4096 on a GH200, 12288 x 8192 x 8192 on an MI355X);
2. **refine**: coordinate descent from the best coarse shape, in steps of :data:`GPU_STEPS` (2048, 1024, 512, 256):
   try +-step in each of M, N, K, move to the best neighbour while it beats the current shape by more than the noise
   tolerance (0.3 %), halve the step when no neighbour does; every shape stays a multiple of the finest step. Then
   the same from the second-best coarse shape (``starts``), so one lucky coarse measurement cannot hold the search;
3. **remeasure**: the best few distinct shapes (``top_k``, default 3) are measured again with longer warm-up and timed
   budgets, and the best *re-measured* median wins. A shape that won its first measurement by luck (noise; the
   "winner's curse" of picking a maximum over many noisy values) loses here.

Every evaluation is one :func:`truepeak.bench.run` GEMM case (random inputs rotated over >= 2x L2, checked against a
float64 reference before timing, CUDA events, NVML telemetry) and becomes a ``gemm`` record with a ``search`` step
(:class:`truepeak.records.SearchStep`: ``phase``, ``round``, ``step``, ``eval``), written the moment it finishes. An
out-of-memory shape becomes a ``failed: out of memory`` record and the search goes on around it. A format the device
cannot run becomes one ``skipped`` record of kind ``peak_search`` (:class:`truepeak.records.PeakSearchWorkload`).

Modes (always labelled): **burst** puts a 1.5 ms idle gap before each timed GEMM, as mamf-finder's per-iteration
cache flush does, so clocks recover: the figure comparable with mamf-finder's; **sustained** launches back to back
after a 3 s settle, the power-capped figure a serving GPU gets. They differ by ~18-20 % on a 700 W H200
(docs/method.md, 'H200 reference measurements'). A search in burst mode favours shorter kernels, which let clocks
recover between launches, so each mode is searched on its own.

On a CPU the search runs a small fp32 (and, if asked, bf16) search over shapes up to 2048 with the host timer: it
finds the best BLAS shape for this CPU, but there are no GPU clocks, no telemetry and no burst/sustained distinction
(mode ``cpu``).

The search itself (:func:`search_shapes`) is pure: it takes an ``evaluate(shape, info) -> FLOP/s or None`` and a clock,
so it is tested with synthetic throughput landscapes.
"""

from __future__ import annotations

import dataclasses
import itertools
import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from truepeak.errors import TruepeakError, require
from truepeak.records import Record, SearchStep
from truepeak.units import fmt_rate

Shape = tuple[int, int, int]

#: Coarse grid edges (GPU): M, N, K in these values with M <= N (a GEMM and its transpose run alike): 40 shapes.
GPU_COARSE_DIMS: tuple[int, ...] = (2048, 4096, 8192, 16384)
CPU_COARSE_DIMS: tuple[int, ...] = (256, 512, 1024)
#: Refinement steps, largest first; every searched dimension is a multiple of the last (finest) one.
GPU_STEPS: tuple[int, ...] = (2048, 1024, 512, 256)
CPU_STEPS: tuple[int, ...] = (256, 128)
GPU_MAX_DIM = 20480
CPU_MAX_DIM = 2048
#: A neighbour must beat the current shape by more than this fraction to be moved to (timing noise of one short
#: measurement is ~0.3-1 %).
MOVE_TOLERANCE = 0.003
#: Distinct shapes re-measured at the end.
TOP_K = 3

PHASES = ("coarse", "refine", "remeasure")


def coarse_grid(dims: Sequence[int]) -> list[Shape]:
    """M, N, K over ``dims`` with M <= N, largest FLOP count first (a search stopped early has seen the big ones)."""
    shapes = [(m, n, k) for m, n, k in itertools.product(dims, dims, dims) if m <= n]
    return sorted(shapes, key=lambda s: (-s[0] * s[1] * s[2], s))


@dataclass(frozen=True)
class SearchPlan:
    """How a search walks the shape space.

    Attributes:
        coarse: shapes measured first.
        steps: refinement steps, largest first; shapes are kept multiples of ``steps[-1]``.
        min_dim, max_dim: bounds on M, N and K.
        top_k: distinct best shapes re-measured at the end.
        starts: refinement starts from the best this many coarse shapes (one after another, sharing what was
            measured), so one lucky or misleading coarse winner cannot keep the search away from the real top.
        tolerance: relative improvement below which a neighbour is not moved to.
        max_evals: evaluations at most (coarse + refine; None: only the time budget limits).
    """

    coarse: tuple[Shape, ...]
    steps: tuple[int, ...] = GPU_STEPS
    min_dim: int = 256
    max_dim: int = GPU_MAX_DIM
    top_k: int = TOP_K
    tolerance: float = MOVE_TOLERANCE
    max_evals: int | None = None
    starts: int = 2

    def __post_init__(self) -> None:
        if not self.coarse:
            raise TruepeakError("a search needs at least one coarse shape")
        if not self.steps or any(s <= 0 for s in self.steps):
            raise TruepeakError(f"refinement steps must be positive, got {self.steps}")
        if self.top_k < 1:
            raise TruepeakError(f"top_k must be >= 1, got {self.top_k}")

    @property
    def align(self) -> int:
        return self.steps[-1]


def gpu_plan(max_evals: int | None = None) -> SearchPlan:
    return SearchPlan(tuple(coarse_grid(GPU_COARSE_DIMS)), GPU_STEPS, 256, GPU_MAX_DIM, TOP_K, MOVE_TOLERANCE,
                      max_evals, starts=2)


def cpu_plan(max_evals: int | None = None) -> SearchPlan:
    return SearchPlan(tuple(coarse_grid(CPU_COARSE_DIMS)), CPU_STEPS, 128, CPU_MAX_DIM, 2, 0.01, max_evals, starts=1)


@dataclass
class Trial:
    """One evaluation: shape, where in the search it happened, and its throughput (FLOP/s; None when it failed).

    ``stopped`` is set on the search's last trial only (the last re-measurement): why the coarse and refine phases
    ended (:attr:`SearchResult.stopped`). A search whose records hold that trial finished; ``truepeak peak --resume``
    takes its answer from the records instead of searching again."""

    shape: Shape
    phase: str
    round: int
    step: int | None
    index: int
    value: float | None
    record: Record | None = None
    stopped: str | None = None

    @property
    def search_info(self) -> SearchStep:
        """The record's ``search`` step: ``phase``, ``round``, ``step``, ``eval`` (the trial's index, 0 first), and on
        the last trial ``final=True`` with ``stopped``."""
        last = self.stopped is not None
        return SearchStep(phase=self.phase, round=self.round, step=self.step, eval=self.index,
                          final=True if last else None, stopped=self.stopped)


@dataclass
class SearchResult:
    """What :func:`search_shapes` found.

    Attributes:
        best: the winning trial (a re-measurement when there was one), or None when nothing ran. After an
            interruption (:class:`SearchInterrupted`): the best so far, re-measured if any re-measurement finished,
            else the best first-pass trial.
        trials: every evaluation, in order (coarse, refine, remeasure).
        stopped: why the coarse/refine phases ended: ``"converged"`` (no neighbour better at the finest step),
            ``"budget"`` (time), ``"max_evals"``; ``"interrupted"`` (Ctrl-C) in a :class:`SearchInterrupted`.
        elapsed_s: time the search took by its clock.
    """

    best: Trial | None
    trials: list[Trial]
    stopped: str
    elapsed_s: float

    @property
    def evaluations(self) -> int:
        return len(self.trials)

    @property
    def remeasured(self) -> bool:
        """Whether ``best`` is a re-measurement (the answer of a finished search; after an interruption before the
        re-measurements, ``best`` is a first-pass trial)."""
        return self.best is not None and self.best.phase == "remeasure"

    def first_pass_best(self) -> Trial | None:
        """The best coarse/refine trial (before re-measurement)."""
        ok = [t for t in self.trials if t.phase != "remeasure" and t.value is not None]
        return max(ok, key=lambda t: t.value) if ok else None


class SearchInterrupted(KeyboardInterrupt):
    """:func:`search_shapes` was interrupted (Ctrl-C inside an evaluation): ``result`` holds the trials finished before
    it and the best so far (``stopped == "interrupted"``). The evaluation in progress is not among the trials."""

    def __init__(self, result: SearchResult):
        super().__init__(f"search interrupted after {result.evaluations} evaluations")
        self.result = result


def best_so_far(trials: Sequence[Trial]) -> Trial | None:
    """The answer an interrupted search can give: the best re-measured trial if any re-measurement finished, else the
    best first-pass (coarse or refine) trial; None when no trial has a value."""
    for phases in (("remeasure",), ("coarse", "refine")):
        ok = [t for t in trials if t.phase in phases and t.value is not None]
        if ok:
            return max(ok, key=lambda t: t.value)
    return None


def _align(x: int, step: int, lo: int, hi: int) -> int:
    return int(min(max(round(x / step) * step, lo), hi))


def neighbours(shape: Shape, step: int, plan: SearchPlan) -> list[Shape]:
    """Shapes one ``step`` away in one of M, N, K, inside the plan's bounds, multiples of its finest step."""
    out: list[Shape] = []
    lo = max(plan.min_dim, plan.align)
    hi = plan.max_dim - plan.max_dim % plan.align
    for axis in range(3):
        for sign in (1, -1):
            s = list(shape)
            s[axis] = s[axis] + sign * step
            if s[axis] < lo or s[axis] > hi:
                continue
            cand = (s[0], s[1], s[2])
            if cand != shape and cand not in out:
                out.append(cand)
    return out


def search_shapes(
    evaluate: Callable[[Shape, Trial], float | None],
    plan: SearchPlan,
    *,
    budget_s: float | None = None,
    remeasure_reserve_s: float = 0.0,
    clock: Callable[[], float] = time.monotonic,
    remeasure: Callable[[Shape, Trial], float | None] | None = None,
    on_trial: Callable[[Trial], None] | None = None,
) -> SearchResult:
    """Find the shape with the highest throughput: coarse grid, coordinate descent, re-measurement of the top few.

    Args:
        evaluate: ``evaluate(shape, trial) -> FLOP/s`` (higher is better), or None when the shape failed (out of
            memory, unsupported): it is then never the answer and the search goes on. ``trial`` says where in the
            search it is (its ``value`` is filled in afterwards).
        plan: the :class:`SearchPlan`.
        budget_s: wall budget of the whole search by ``clock`` (None: no time limit). The coarse and refine phases
            stop when ``budget_s - remeasure_reserve_s`` has passed; re-measurement then runs regardless (it is
            what the answer rests on).
        remeasure_reserve_s: time kept for the re-measurements.
        clock: seconds (a fake one in tests).
        remeasure: the longer measurement for the final phase (default ``evaluate``).
        on_trial: called after each trial (progress, records).

    Returns:
        :class:`SearchResult`; ``best`` is the best re-measured trial (or, if every re-measurement failed, the best
        first-pass one). The last re-measurement's trial carries ``stopped`` (its record's ``search.final``).

    Raises:
        SearchInterrupted: a KeyboardInterrupt (Ctrl-C) inside ``evaluate`` or ``remeasure``; it carries the trials
            finished before and the best so far (:func:`best_so_far`).
    """
    start = clock()
    trials: list[Trial] = []
    try:
        return _search(evaluate, plan, budget_s, remeasure_reserve_s, clock, remeasure, on_trial, start, trials)
    except KeyboardInterrupt:
        raise SearchInterrupted(SearchResult(best_so_far(trials), list(trials), "interrupted",
                                             clock() - start)) from None


def _search(evaluate, plan, budget_s, remeasure_reserve_s, clock, remeasure, on_trial, start,
            trials: list[Trial]) -> SearchResult:
    """:func:`search_shapes`' three phases; ``trials`` is filled as they run (so an interruption keeps them)."""
    seen: dict[Shape, Trial] = {}
    stopped = "converged"

    def out_of_time() -> bool:
        return budget_s is not None and clock() - start >= budget_s - remeasure_reserve_s

    def run(shape: Shape, phase: str, rnd: int, step: int | None, fn=evaluate, last: str | None = None) -> Trial:
        t = Trial(shape, phase, rnd, step, len(trials), None, stopped=last)
        t.value = fn(shape, t)
        if t.value is not None and not (math.isfinite(t.value) and t.value > 0):
            t.value = None
        trials.append(t)
        if phase != "remeasure":
            seen[shape] = t
        if on_trial is not None:
            on_trial(t)
        return t

    def limited() -> str | None:
        if plan.max_evals is not None and len(trials) >= plan.max_evals:
            return "max_evals"
        if out_of_time():
            return "budget"
        return None

    # 1. coarse
    for shape in plan.coarse:
        why = limited()
        if why:
            stopped = why
            break
        if shape not in seen:
            run(shape, "coarse", 0, None)

    # 2. refine: coordinate descent, step by step, from each of the best few coarse shapes
    coarse_ok = sorted((t for t in seen.values() if t.value is not None), key=lambda t: (-t.value, t.index))
    rnd = 0
    for cur in coarse_ok[: plan.starts]:
        if stopped != "converged":
            break
        for step in plan.steps:
            if stopped != "converged":
                break
            while True:
                rnd += 1
                cands: list[Trial] = []
                for shape in neighbours(cur.shape, step, plan):
                    if shape in seen:
                        cands.append(seen[shape])
                        continue
                    why = limited()
                    if why:
                        stopped = why
                        break
                    cands.append(run(shape, "refine", rnd, step))
                better = [t for t in cands if t.value is not None and t.value > cur.value * (1 + plan.tolerance)]
                if better:
                    cur = max(better, key=lambda t: t.value)
                if stopped != "converged" or not better:
                    break
    # 3. remeasure the top few distinct shapes
    ranked = sorted((t for t in seen.values() if t.value is not None), key=lambda t: -t.value)
    top = ranked[: plan.top_k]
    finals = [run(t.shape, "remeasure", rnd + 1, None, remeasure or evaluate, stopped if i == len(top) - 1 else None)
              for i, t in enumerate(top)]
    ok = [t for t in finals if t.value is not None]
    best = max(ok, key=lambda t: t.value) if ok else (ranked[0] if ranked else None)
    return SearchResult(best, trials, stopped, clock() - start)


# ----------------------------------------------------------------------------------------------------------------------
# Measuring: the search on a device, one record per shape tried


@dataclass(frozen=True)
class PeakBudgets:
    """Per-evaluation time budgets (seconds) of one mode.

    Attributes:
        warmup_s, budget_s: warm-up and timed budget of a search evaluation.
        final_warmup_s, final_budget_s: the same for the re-measurements.
        settle_s: back-to-back GEMMs before the search starts (sustained: clocks and power settle, ~3 s).
    """

    warmup_s: float
    budget_s: float
    final_warmup_s: float
    final_budget_s: float
    settle_s: float = 0.0

    def reserve_s(self, top_k: int) -> float:
        """Time to keep for the re-measurements (plus ~0.3 s set-up each)."""
        return top_k * (self.final_warmup_s + self.final_budget_s + 0.3)


#: burst: the clock recovers in the 1.5 ms gap before each sample, so a short warm-up suffices.
BURST_BUDGETS = PeakBudgets(warmup_s=0.05, budget_s=0.15, final_warmup_s=0.5, final_budget_s=1.5)
#: sustained: longer warm-ups, a 3 s settle first and 3 s before each re-measurement (CUTLASS guideline: clocks
#: oscillate for ~3 s on a power-capped part).
SUSTAINED_BUDGETS = PeakBudgets(warmup_s=0.3, budget_s=0.15, final_warmup_s=3.0, final_budget_s=2.0, settle_s=3.0)
CPU_PEAK_BUDGETS = PeakBudgets(warmup_s=0.02, budget_s=0.06, final_warmup_s=0.05, final_budget_s=0.3)
#: Default ``--budget`` per (format, mode), seconds.
DEFAULT_BUDGET_S = {"cuda": 60.0, "cpu": 15.0}
#: Formats ``truepeak peak`` searches when none are given.
DEFAULT_GPU_FORMATS: tuple[str, ...] = ("bf16", "fp8_e4m3")
DEFAULT_CPU_FORMATS: tuple[str, ...] = ("fp32",)

CPU_NOTE = ("on a CPU truepeak peak runs a small search (M, N, K up to 2048) with the host timer: it finds the best "
            "BLAS shape for this CPU; there are no GPU clocks or NVML telemetry and no burst/sustained distinction "
            "(records are labelled mode cpu); tensor-core formats (tf32, fp16, fp8, int8, block-scaled) need a GPU")


def budgets_for(mode: str) -> PeakBudgets:
    return {"burst": BURST_BUDGETS, "sustained": SUSTAINED_BUDGETS}.get(mode, CPU_PEAK_BUDGETS)


@dataclass
class FormatPeak:
    """The answer for one (format, mode).

    Attributes:
        format, mode: what was searched (mode ``cpu`` on a CPU).
        status: ``"ok"``, ``"skipped"`` (the device cannot run the format; ``reason`` says why), ``"failed"`` or
            ``"interrupted"`` (Ctrl-C during this search: ``best_record`` is the best so far, or None).
        best_record: the winning re-measured record (None unless ok or interrupted).
        result: the :class:`SearchResult`.
        elapsed_s: wall seconds spent on this format and mode (settle included); for a resumed search the span of
            its records' timestamps.
        resumed: taken from the records of an earlier run by ``resume`` (not searched again).
    """

    format: str
    mode: str
    status: str
    reason: str = ""
    best_record: Record | None = None
    result: SearchResult | None = None
    elapsed_s: float = 0.0
    resumed: bool = False

    def summary(self) -> dict[str, Any]:
        """A JSON-ready summary: best shape, median FLOP/s, % of dense spec, % of peak at measured clock, clock and
        power (SI units, fractions), evaluations and time; ``remeasured`` says whether the best is a re-measurement
        (False for an interrupted search's best so far from the first pass), ``resumed`` whether it came from an
        earlier run's records."""
        out: dict[str, Any] = {"format": self.format, "mode": self.mode, "status": self.status, "reason": self.reason,
                               "elapsed_s": self.elapsed_s, "resumed": self.resumed}
        if self.result is not None:
            out.update(evaluations=self.result.evaluations, stopped=self.result.stopped)
            first = self.result.first_pass_best()
            out["first_pass_best"] = None if first is None else {"shape": list(first.shape), "flop_per_s": first.value}
        rec = self.best_record
        if rec is None:
            return out
        d, w, m = rec.derived, rec.workload, rec.measurement
        tel = m.telemetry if m is not None else None
        out.update(
            shape=[w.m, w.n, w.k], backend=rec.backend,
            remeasured=rec.search is not None and rec.search.phase == "remeasure",
            flop_per_s=d.flop_per_s if d else None, time_s=rec.time_s,
            rel_iqr=m.steady_rel_iqr if m else None,
            dense_peak_flop_per_s=d.dense_peak_flop_per_s if d else None,
            pct_dense=d.dense_fraction if d else None,
            peak_at_clock_flop_per_s=d.peak_at_clock_flop_per_s if d else None,
            pct_at_clock=d.at_clock_fraction if d else None,
            sm_clock_median_hz=tel.sm_clock_median_hz if tel else None,
            power_median_w=tel.power_median_w if tel else None,
            temperature_max_c=tel.temperature_max_c if tel else None,
            throttle_reasons=dict(tel.reasons) if tel else None,
            warnings=list(rec.warnings),
        )
        return out


@dataclass
class PeakRun:
    """What :func:`run_peak` returns (and :class:`PeakInterrupted` carries): one :class:`FormatPeak` per (format,
    mode) searched, where the records are, and notes.

    Attributes:
        records: the records this run wrote (not those a resumed search took from the file).
        interrupted: stopped by Ctrl-C; ``peaks`` ends with the interrupted search (status ``interrupted``) and
            ``not_searched`` lists the (format, mode) pairs that never started.
    """

    out_dir: Path
    records_path: Path
    peaks: list[FormatPeak]
    device: Any
    notes: list[str] = field(default_factory=list)
    elapsed_s: float = 0.0
    records: list[Record] = field(default_factory=list)
    interrupted: bool = False
    not_searched: list[tuple[str, str]] = field(default_factory=list)

    def summary(self) -> dict[str, Any]:
        """peak.json: device, records path, time, notes, units and one :meth:`FormatPeak.summary` per search;
        ``interrupted`` (a partial answer: the interrupted search's best so far) and ``not_searched``."""
        return {"device": getattr(self.device, "name", None), "device_kind": getattr(self.device, "kind", None),
                "records": str(self.records_path), "elapsed_s": self.elapsed_s, "notes": list(self.notes),
                "units": "SI: FLOP/s, s, Hz, W; pct_* are fractions of the DENSE peak",
                "interrupted": self.interrupted,
                "not_searched": [{"format": f, "mode": m} for f, m in self.not_searched],
                "peaks": [p.summary() for p in self.peaks]}


class PeakInterrupted(KeyboardInterrupt):
    """:func:`run_peak` was interrupted (Ctrl-C). The records are kept in ``run.records_path`` and ``peak.json`` holds
    the partial answer (``interrupted: true``; the interrupted search's best so far); ``run`` is the :class:`PeakRun`
    with ``interrupted=True``, for the caller to render."""

    def __init__(self, run: PeakRun):
        super().__init__(f"interrupted after {len(run.records)} records; they are in {run.records_path}")
        self.run = run


class _SearchStopped(KeyboardInterrupt):
    """Ctrl-C inside one (format, mode) search: which one, and the seconds it had run."""

    def __init__(self, fmt: str, mode: str, elapsed_s: float):
        super().__init__(f"{fmt} {mode} search interrupted")
        self.key = (fmt, mode)
        self.elapsed_s = elapsed_s


def parse_peak_formats(text: str | Sequence[str] | None, device: Any) -> list[str]:
    """``--format``: canonical names; default bf16 and fp8_e4m3 on a GPU, fp32 on a CPU.

    Raises:
        UnknownNameError: an unknown format (the message lists the accepted names).
    """
    from truepeak.bench.run import parse_formats

    names = parse_formats(text)
    if names is None:
        return list(DEFAULT_GPU_FORMATS if device.kind == "cuda" else DEFAULT_CPU_FORMATS)
    return names


def _peak_config(dev: Any, fmt: str, mode: str, budgets: PeakBudgets, plan: SearchPlan, budget_s: float,
                 scaling: str | None) -> dict[str, Any]:
    return {"command": "peak", "device": dev.torch_device, "device_name": dev.name, "format": fmt, "mode": mode,
            "scaling": scaling, "budget_s": budget_s, "budgets": dataclasses.asdict(budgets),
            "plan": {"coarse": len(plan.coarse), "steps": list(plan.steps), "min_dim": plan.min_dim,
                     "max_dim": plan.max_dim, "top_k": plan.top_k, "tolerance": plan.tolerance,
                     "max_evals": plan.max_evals}}


def run_peak(out_dir: str | Path | None = None, *, device: str | Any = "auto",
             formats: str | Sequence[str] | None = None, modes: str | Sequence[str] | None = None,
             budget_s: float | dict | None = None, argv: Sequence[str] | None = None,
             plan: SearchPlan | None = None, budgets: dict[str, PeakBudgets] | None = None,
             progress: Callable[[str], None] | None = None, resume: bool = False,
             warn: Callable[[str], None] | None = None) -> PeakRun:
    """Search the maximum achievable matmul throughput for each format and mode; write every trial as a record.

    Ctrl-C stops the search in progress: the records stay in ``results.jsonl``, ``peak.json`` is written with the
    searches finished, the interrupted one's best so far (status ``interrupted``) and the ones not started
    (``not_searched``), and :class:`PeakInterrupted` is raised. ``resume=True`` continues such a folder: a search whose
    records end with its last re-measurement (``search.final``; or a ``skipped`` search) is taken from the records,
    the others are searched again from the start (their earlier records stay; a search's records are those after
    its last first trial, ``search.eval == 0``).

    Args:
        out_dir: output folder (created); ``results.jsonl`` (every shape tried) and ``peak.json`` (the answers) go
            there. Default ``./truepeak-peak-YYYYmmdd-HHMMSS``.
        device: ``"auto"``, ``"cpu"``, ``"cuda"``, ``"cuda:N"`` or a DeviceInfo.
        formats: format names (``"bf16,fp8"``); default bf16 and fp8_e4m3 on a GPU, fp32 on a CPU.
        modes: ``"burst"``, ``"sustained"`` or ``"both"`` (default both on a GPU; a CPU has only ``"cpu"``).
        budget_s: wall seconds per (format, mode), re-measurements included (default 60 on a GPU, 15 on a CPU); or a
            dict keyed by ``(format, mode)`` or format (canonical names), the default for what it does not name.
        argv: command line recorded in each record.
        plan: override the search plan (default :func:`gpu_plan` / :func:`cpu_plan`).
        budgets: override the per-mode :class:`PeakBudgets` (``{"burst": ..., "sustained": ..., "cpu": ...}``).
        progress: called with one line per trial (the CLI prints it on stderr).
        resume: continue ``results.jsonl`` in ``out_dir`` (which must exist), taking finished searches from it.
        warn: called with one line per unusable line of a resumed ``results.jsonl`` (default: ``warning: ...`` on
            stderr).

    Raises:
        MissingDependencyError: torch is not installed. UnknownNameError: an unknown format.
        TruepeakError: a bad device, mode, budget or output folder (``results.jsonl`` already there without
            ``resume``, or missing with it); ``resume`` into records of another schema version, or whose finished
            search was made with other settings (device, budget, plan, budgets, scaling).
        PeakInterrupted: Ctrl-C; carries the :class:`PeakRun` so far.
    """
    torch = require("torch", "truepeak peak")
    from truepeak.bench import gemm as G
    from truepeak.bench import run as R
    from truepeak.bench.outdir import prepare_out_dir
    from truepeak.bench.environment import environment
    from truepeak.hardware.detect import DeviceInfo, detect
    from truepeak.records import RecordWriter, make_record, read_records, record_key

    t0 = time.perf_counter()
    budget_map = dict(budget_s) if isinstance(budget_s, dict) else {}
    if isinstance(budget_s, dict):
        budget_s = None
    for b in [budget_s, *budget_map.values()]:
        if b is not None and not b > 0:
            raise TruepeakError(f"--budget must be > 0 seconds, got {b}")
    dev = device if isinstance(device, DeviceInfo) else detect(device)
    fmts = parse_peak_formats(formats, dev)
    notes: list[str] = []
    if dev.kind == "cuda":
        mode_list = R.parse_modes(modes if modes is not None else "both")
    else:
        R.parse_modes(modes)  # reject nonsense even where modes do not apply
        mode_list = ["cpu"]
        notes.append(CPU_NOTE)
        if modes is not None:
            notes.append(f"--mode {modes if isinstance(modes, str) else ','.join(modes)} has no meaning on a CPU: "
                         "measured with the host timer (mode cpu)")
    budget = float(budget_s) if budget_s is not None else DEFAULT_BUDGET_S["cuda" if dev.kind == "cuda" else "cpu"]
    out = prepare_out_dir(out_dir, resume, command="peak")
    path = out / "results.jsonl"
    base_plan = plan or (gpu_plan() if dev.kind == "cuda" else cpu_plan())
    order = [(fmt, mode) for mode in mode_list for fmt in fmts]
    settings = {}
    for fmt, mode in order:
        b = float(budget_map.get((fmt, mode), budget_map.get(fmt, budget)))
        mb = (budgets or {}).get(mode, budgets_for(mode))
        settings[(fmt, mode)] = (b, mb, _peak_config(dev, fmt, mode, mb, base_plan, b, G.default_scaling(fmt)))
    finished = {}
    if resume:
        previous = _previous_searches(path, warn or R._default_warn)
        for key in order:
            recs = previous.get(key, [])
            if _search_finished(recs):
                _check_resume_settings(recs[0], settings[key][2], path)
                finished[key] = recs
    run = PeakRun(out, path, [], dev, notes)
    before = len(read_records(path, strict=False)) if path.exists() else 0  # records of earlier runs (resume)
    try:
        if dev.kind == "cuda":
            torch.cuda.set_device(dev.index or 0)
            if not _nvml_ok(dev):
                notes.append("NVML is not available: measured anyway, without telemetry (no clock, power or "
                             "throttle reasons; no % of peak at measured clock)")
        env = environment(argv, device=dev.index if dev.kind == "cuda" else None).replace(device=dev.to_dict())
        with RecordWriter(path) as writer:
            for fmt, mode in order:
                if (fmt, mode) in finished:
                    peak = peak_from_records(fmt, mode, finished[(fmt, mode)])
                    if progress:
                        progress(f"{fmt} {mode}: finished in {path}; its answer is taken from the records")
                else:
                    b, mb, _ = settings[(fmt, mode)]
                    peak = _search_one(dev, fmt, mode, b, base_plan, mb, env, writer, run, progress, torch, G, R,
                                       make_record, record_key)
                run.peaks.append(peak)
    except KeyboardInterrupt as stop:
        # the file is the truth: a record written just before Ctrl-C counts even if the search never saw its value
        run.records = list(read_records(path, strict=False))[before:] if path.exists() else []
        if isinstance(stop, _SearchStopped):
            trials = _trials(_attempts(run.records).get(stop.key, []))
            result = SearchResult(best_so_far(trials), trials, "interrupted", stop.elapsed_s)
            run.peaks.append(_interrupted_peak(*stop.key, result, stop.elapsed_s))
        started = {(p.format, p.mode) for p in run.peaks}
        run.interrupted = True
        run.not_searched = [key for key in order if key not in started]
        run.elapsed_s = time.perf_counter() - t0
        _write_summary(run)
        raise PeakInterrupted(run) from None
    run.elapsed_s = time.perf_counter() - t0
    _write_summary(run)
    return run


#: ``run_config`` fields a finished search must share with the settings asked now for ``resume`` to reuse it.
PEAK_RESUME_MUST_MATCH = ("device", "device_name", "scaling", "budget_s", "budgets", "plan")


def _previous_searches(path: Path, warn: Callable[[str], None]) -> dict[tuple[str, str], list[Record]]:
    """The records of each (format, mode) search in a results file being resumed, in file order, from the last
    attempt only: a search's first trial (``search.eval == 0``) starts a new attempt. Lines that are not valid
    records are reported through ``warn`` (capped: :func:`~truepeak.records.problem_warnings`) and ignored.

    Raises:
        TruepeakError: a record of another schema version (appending this schema's records to it would mix two).
    """
    from truepeak.bench.outdir import refuse_other_schemas
    from truepeak.records import problem_warnings, read_records

    recs = read_records(path, strict=False)
    refuse_other_schemas(recs, path)
    for line in problem_warnings(path, recs.problems, "{path} line {line} is not a valid record and is ignored: {why}"):
        warn(line)  # capped per kind of problem
    return _attempts(recs)


def _attempts(records: Sequence[Record]) -> dict[tuple[str, str], list[Record]]:
    """Per (format, mode), the peak-search records of its last attempt, in order (``search.eval == 0`` starts one)."""
    out: dict[tuple[str, str], list[Record]] = {}
    for rec in records:
        config, search = rec.run_config, rec.search
        if not isinstance(config, dict) or config.get("command") != "peak" or search is None:
            continue
        key = (str(config.get("format")), str(config.get("mode")))
        if search.eval == 0:
            out[key] = []
        out.setdefault(key, []).append(rec)
    return out


def _search_finished(records: Sequence[Record]) -> bool:
    """Whether one search's records (its last attempt) are complete: a ``skipped`` search, or a last record that is
    the search's last re-measurement (``search.final``). A search with no shape that ran never has one: it is
    searched again, as ``truepeak run --resume`` runs failed cases again."""
    if not records:
        return False
    last = records[-1].search
    return last is not None and (bool(last.final) or (len(records) == 1 and last.phase == "skipped"
                                                      and records[0].status == "skipped"))


def _check_resume_settings(record: Record, config: dict[str, Any], path: Path) -> None:
    """Refuse to reuse a finished search made with other settings (:data:`PEAK_RESUME_MUST_MATCH`).

    Raises:
        TruepeakError: one line naming the search and each setting that differs, e.g. ``budget_s (there: 15.0,
            now: 30.0)``.
    """
    there = record.run_config or {}
    diff = [f"{k} (there: {there.get(k)}, now: {config.get(k)})" for k in PEAK_RESUME_MUST_MATCH
            if there.get(k) != config.get(k)]
    if diff:
        raise TruepeakError(f"cannot --resume {path}: its {config['format']} {config['mode']} search was made with "
                            f"different settings: {'; '.join(diff)}; rerun with the same --budget and --device, or "
                            "choose another --out")


def peak_from_records(fmt: str, mode: str, records: Sequence[Record]) -> FormatPeak:
    """The answer of a finished search rebuilt from its records (``resume``): the best re-measured record (else the
    best first-pass one, as :func:`search_shapes` picks it), every record a :class:`Trial`, ``stopped`` from the
    final record, and the time as the span of the records' timestamps. A skipped search gives a ``skipped`` answer
    with its reason."""
    first = records[0] if records else None
    if first is not None and first.status == "skipped" and first.search is not None \
            and first.search.phase == "skipped":
        return FormatPeak(fmt, mode, "skipped", first.reason, resumed=True)
    trials = _trials(records)
    best = best_so_far(trials)
    last = records[-1].search if records else None
    stopped = str((last.stopped if last is not None else None) or "converged")
    span = _timestamp_span(records)
    result = SearchResult(best, trials, stopped, span)
    if best is None:
        return FormatPeak(fmt, mode, "failed", "no shape ran", result=result, elapsed_s=span, resumed=True)
    return FormatPeak(fmt, mode, "ok", best_record=best.record, result=result, elapsed_s=span, resumed=True)


def _trials(records: Sequence[Record]) -> list[Trial]:
    """One search's records as :class:`Trial` objects (the value is the record's FLOP/s when it is ``ok``)."""
    trials = []
    for rec in records:
        w, info = rec.workload, rec.search
        if info is None or info.phase == "skipped" or rec.kind != "gemm":
            continue
        value = rec.derived.flop_per_s if rec.ok and rec.derived is not None else None
        trials.append(Trial((w.m, w.n, w.k), info.phase, info.round, info.step, info.eval, value, rec, info.stopped))
    return trials


def _timestamp_span(records: Sequence[Record]) -> float:
    """Seconds from the first to the last record's ``timestamp`` (ISO 8601, UTC); 0 when they cannot be read."""
    import datetime as _dt

    stamps = []
    for rec in records:
        try:
            stamps.append(_dt.datetime.fromisoformat(rec.timestamp.replace("Z", "+00:00")))
        except ValueError:
            continue
    return (max(stamps) - min(stamps)).total_seconds() if len(stamps) > 1 else 0.0


def _nvml_ok(dev: Any) -> bool:
    try:
        from truepeak.hardware import nvml

        h, _ = nvml.handle(dev.index or 0)
        return h is not None
    except Exception:  # noqa: BLE001
        return False


def _write_summary(run: PeakRun) -> None:
    import json

    try:
        (run.out_dir / "peak.json").write_text(json.dumps(run.summary(), indent=1, ensure_ascii=False) + "\n")
    except OSError as exc:
        run.notes.append(f"could not write {run.out_dir / 'peak.json'}: {exc.strerror or exc}")


def _search_one(dev, fmt, mode, budget, plan, budgets, env, writer, run, progress, torch, G, R, make_record,
                record_key) -> FormatPeak:
    """Search one (format, mode): settle, coarse, refine, remeasure; every trial a record."""
    t0 = time.perf_counter()
    scaling = G.default_scaling(fmt)
    ok, reason = G.supported(fmt, dev, scaling=scaling)
    if not ok:
        from truepeak.records import PeakSearchWorkload

        rec = make_record(workload=PeakSearchWorkload(format=fmt, scaling=scaling), backend=None, format=fmt,
                          measurement=None, status="skipped", reason=reason, env=env, mode=mode,
                          run_config=_peak_config(dev, fmt, mode, budgets, plan, budget, scaling),
                          search=SearchStep(phase="skipped"))
        writer.write(rec)
        run.records.append(rec)
        if progress:
            progress(f"{fmt} {mode}: skipped: {reason}")
        return FormatPeak(fmt, mode, "skipped", reason, elapsed_s=time.perf_counter() - t0)
    config = _peak_config(dev, fmt, mode, budgets, plan, budget, scaling)
    sweep = R._Sweep(dev, R.Budgets(0.0, budgets.warmup_s, budgets.budget_s, budgets.warmup_s, budgets.budget_s,
                                    0.0, 0.0, 256 if dev.kind == "cuda" else 64),
                     False, env, config, acc=dev.accelerator, settled=True)
    case_mode = mode if dev.kind == "cuda" else ""
    by_id: dict[int, Record] = {}

    def measure(shape: Shape, trial: Trial, final: bool = False) -> float | None:
        m, n, k = shape
        case = R.Case("gemm", fmt, m, n, k, large=True, origin=f"peak search ({trial.phase})", mode=case_mode,
                      scaling=scaling, warmup_s=budgets.final_warmup_s if final else budgets.warmup_s,
                      budget_s=budgets.final_budget_s if final else budgets.budget_s)
        key = R.case_key(case, dev) + f"|search:{trial.phase}:{trial.index}"
        rec = R._run_gemm(case, key, sweep).replace(search=trial.search_info)
        writer.write(rec)
        run.records.append(rec)
        by_id[trial.index] = rec
        trial.record = rec
        if not rec.ok:
            if progress:
                progress(f"{fmt} {mode} {trial.phase} {m}x{n}x{k}: {rec.status}: {rec.reason}")
            return None
        value = rec.derived.flop_per_s
        if progress:
            progress(f"{fmt} {mode} {trial.phase} {m}x{n}x{k}: {fmt_rate(value)} TFLOPS")  # 0.0156, not 0.0
        return value

    try:
        if dev.kind == "cuda" and budgets.settle_s > 0:
            R.settle_gpu(torch, dev, budgets.settle_s)
        reserve = min(budgets.reserve_s(plan.top_k), 0.5 * budget)  # a small budget still measures some shapes
        result = search_shapes(measure, plan, budget_s=budget, remeasure_reserve_s=reserve,
                               clock=time.perf_counter, remeasure=lambda s, t: measure(s, t, final=True))
    except KeyboardInterrupt:  # SearchInterrupted, or Ctrl-C while settling: run_peak reads what was written
        raise _SearchStopped(fmt, mode, time.perf_counter() - t0) from None
    finally:
        sweep.weights.clear()
        R._free(dev)
    if result.best is None:
        reasons = sorted({t.record.reason for t in result.trials if t.record is not None})
        return FormatPeak(fmt, mode, "failed", "; ".join(r for r in reasons if r)[:500] or "no shape ran",
                          result=result, elapsed_s=time.perf_counter() - t0)
    return FormatPeak(fmt, mode, "ok", best_record=result.best.record, result=result,
                      elapsed_s=time.perf_counter() - t0)


def _interrupted_peak(fmt: str, mode: str, result: SearchResult, elapsed_s: float) -> FormatPeak:
    """The answer of a search stopped by Ctrl-C: status ``interrupted``, its best so far (:func:`best_so_far`), and a
    reason saying how far it got and whether that best was re-measured."""
    best = result.best
    n = result.evaluations
    if best is None:
        why = f"interrupted after {n} shape{'s' if n != 1 else ''}, none of which ran" if n else \
            "interrupted before any shape finished"
    else:
        why = (f"interrupted after {n} shape{'s' if n != 1 else ''}; best so far, "
               + ("re-measured" if result.remeasured else "not re-measured"))
    return FormatPeak(fmt, mode, "interrupted", why, best_record=best.record if best else None, result=result,
                      elapsed_s=elapsed_s)


__all__ = ["Shape", "SearchPlan", "Trial", "SearchResult", "SearchInterrupted", "best_so_far", "PeakInterrupted",
           "peak_from_records", "PEAK_RESUME_MUST_MATCH", "search_shapes", "neighbours", "coarse_grid", "gpu_plan",
           "cpu_plan", "PeakBudgets", "BURST_BUDGETS", "SUSTAINED_BUDGETS", "CPU_PEAK_BUDGETS", "FormatPeak",
           "PeakRun", "run_peak", "parse_peak_formats", "budgets_for", "CPU_NOTE", "DEFAULT_BUDGET_S",
           "GPU_COARSE_DIMS", "GPU_STEPS", "PHASES"]
