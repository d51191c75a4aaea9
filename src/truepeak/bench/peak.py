"""``truepeak peak``: the maximum achievable matmul FLOPS (MAMF) per format, found by a search over GEMM shapes.

mamf-finder brute-forces a cartesian grid (its "medium" 1024..16384 step 1024 cube is 4096 shapes, 15-30 min; the
exhaustive one takes hours to days; measurement_methodology.md section 4.1). The throughput landscape over (M, N, K)
is smooth at the scale of a few hundred elements except for tile-quantisation ripples, so a coarse look plus local
refinement finds its top in a few dozen evaluations:

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
float64 reference before timing, CUDA events, NVML telemetry) and becomes a ``gemm`` record with a ``search`` field
(``phase``, ``round``, ``step``, ``eval``), written the moment it finishes. An out-of-memory shape becomes a
``failed: out of memory`` record and the search goes on around it.

Modes (always labelled): **burst** puts a 1.5 ms idle gap before each timed GEMM, as mamf-finder's per-iteration
cache flush does, so clocks recover: the figure comparable with mamf-finder's; **sustained** launches back to back
after a 3 s settle, the power-capped figure a serving GPU gets. They differ by ~18-20 % on a 700 W H200
(methodology section 6). A search in burst mode favours shorter kernels, which let clocks recover between launches
(section 4.1), so each mode is searched on its own.

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
    """One evaluation: shape, where in the search it happened, and its throughput (FLOP/s; None when it failed)."""

    shape: Shape
    phase: str
    round: int
    step: int | None
    index: int
    value: float | None
    record: dict[str, Any] | None = None

    @property
    def search_info(self) -> dict[str, Any]:
        """The record's ``search`` field."""
        return {"phase": self.phase, "round": self.round, "step": self.step, "eval": self.index}


@dataclass
class SearchResult:
    """What :func:`search_shapes` found.

    Attributes:
        best: the winning trial (a re-measurement when there was one), or None when nothing ran.
        trials: every evaluation, in order (coarse, refine, remeasure).
        stopped: why the coarse/refine phases ended: ``"converged"`` (no neighbour better at the finest step),
            ``"budget"`` (time), ``"max_evals"``.
        elapsed_s: time the search took by its clock.
    """

    best: Trial | None
    trials: list[Trial]
    stopped: str
    elapsed_s: float

    @property
    def evaluations(self) -> int:
        return len(self.trials)

    def first_pass_best(self) -> Trial | None:
        """The best coarse/refine trial (before re-measurement)."""
        ok = [t for t in self.trials if t.phase != "remeasure" and t.value is not None]
        return max(ok, key=lambda t: t.value) if ok else None


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
        first-pass one).
    """
    start = clock()
    trials: list[Trial] = []
    seen: dict[Shape, Trial] = {}
    stopped = "converged"

    def out_of_time() -> bool:
        return budget_s is not None and clock() - start >= budget_s - remeasure_reserve_s

    def run(shape: Shape, phase: str, rnd: int, step: int | None, fn=evaluate) -> Trial:
        t = Trial(shape, phase, rnd, step, len(trials), None)
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
    finals = [run(t.shape, "remeasure", rnd + 1, None, remeasure or evaluate) for t in ranked[: plan.top_k]]
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
        status: ``"ok"``, ``"skipped"`` (the device cannot run the format; ``reason`` says why) or ``"failed"``.
        best_record: the winning re-measured record (None unless ok).
        result: the :class:`SearchResult`.
        elapsed_s: wall seconds spent on this format and mode (settle included).
    """

    format: str
    mode: str
    status: str
    reason: str = ""
    best_record: dict[str, Any] | None = None
    result: SearchResult | None = None
    elapsed_s: float = 0.0

    def summary(self) -> dict[str, Any]:
        """A JSON-ready summary: best shape, median FLOP/s, % of dense spec, % of peak at measured clock, clock and
        power (SI units, fractions), evaluations and time."""
        out: dict[str, Any] = {"format": self.format, "mode": self.mode, "status": self.status, "reason": self.reason,
                               "elapsed_s": self.elapsed_s}
        if self.result is not None:
            out.update(evaluations=self.result.evaluations, stopped=self.result.stopped)
            first = self.result.first_pass_best()
            out["first_pass_best"] = None if first is None else {"shape": list(first.shape), "flop_per_s": first.value}
        rec = self.best_record
        if rec is None:
            return out
        d = rec.get("derived") or {}
        w = rec.get("workload") or {}
        tel = ((rec.get("measurement") or {}).get("telemetry")) or {}
        out.update(
            shape=[w.get("m"), w.get("n"), w.get("k")], backend=rec.get("backend"),
            flop_per_s=d.get("flop_per_s"), time_s=rec.get("time_s"),
            rel_iqr=(rec.get("measurement") or {}).get("steady_rel_iqr"),
            dense_peak_flop_per_s=d.get("dense_peak_flop_per_s"), pct_dense=d.get("pct_dense"),
            peak_at_clock_flop_per_s=d.get("peak_at_clock_flop_per_s"), pct_at_clock=d.get("pct_at_clock"),
            sm_clock_median_hz=tel.get("sm_clock_median_hz"), power_median_w=tel.get("power_median_w"),
            temperature_max_c=tel.get("temperature_max_c"), throttle_reasons=tel.get("reasons"),
            warnings=rec.get("warnings"),
        )
        return out


@dataclass
class PeakRun:
    """What :func:`run_peak` returns: one :class:`FormatPeak` per (format, mode), where the records are, and notes."""

    out_dir: Path
    records_path: Path
    peaks: list[FormatPeak]
    device: Any
    notes: list[str] = field(default_factory=list)
    elapsed_s: float = 0.0
    records: list[dict[str, Any]] = field(default_factory=list)

    def summary(self) -> dict[str, Any]:
        return {"device": getattr(self.device, "name", None), "device_kind": getattr(self.device, "kind", None),
                "records": str(self.records_path), "elapsed_s": self.elapsed_s, "notes": list(self.notes),
                "units": "SI: FLOP/s, s, Hz, W; pct_* are fractions of the DENSE peak",
                "peaks": [p.summary() for p in self.peaks]}


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
             progress: Callable[[str], None] | None = None) -> PeakRun:
    """Search the maximum achievable matmul throughput for each format and mode; write every trial as a record.

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

    Raises:
        MissingDependencyError: torch is not installed. UnknownNameError: an unknown format.
        TruepeakError: a bad device, mode, budget or output folder (``results.jsonl`` already there).
    """
    torch = require("torch", "truepeak peak")
    from truepeak.bench import gemm as G
    from truepeak.bench import run as R
    from truepeak.bench.records import RecordWriter, environment, make_record, record_key
    from truepeak.hardware.detect import DeviceInfo, detect

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
    old = Path(out_dir) / "results.jsonl" if out_dir is not None and str(out_dir).strip() else None
    if old is not None and old.is_file() and old.stat().st_size:
        raise TruepeakError(f"{old} already holds results; choose another --out")
    out = R.prepare_out_dir(out_dir, command="peak")
    path = out / "results.jsonl"
    if dev.kind == "cuda":
        torch.cuda.set_device(dev.index or 0)
        if not _nvml_ok(dev):
            notes.append("NVML is not available: measured anyway, without telemetry (no clock, power or throttle "
                         "reasons; no % of peak at measured clock)")
    env = environment(argv, device=dev.index if dev.kind == "cuda" else None)
    env["device"] = dev.to_dict()
    base_plan = plan or (gpu_plan() if dev.kind == "cuda" else cpu_plan())
    run = PeakRun(out, path, [], dev, notes)
    with RecordWriter(path) as writer:
        for mode in mode_list:
            for fmt in fmts:
                b = float(budget_map.get((fmt, mode), budget_map.get(fmt, budget)))
                peak = _search_one(dev, fmt, mode, b, base_plan, (budgets or {}).get(mode, budgets_for(mode)),
                                   env, writer, run, progress, torch, G, R, make_record, record_key)
                run.peaks.append(peak)
    run.elapsed_s = time.perf_counter() - t0
    _write_summary(run)
    return run


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
        rec = make_record(kind="gemm", workload={"label": "peak search", "format": fmt}, backend=None, format=fmt,
                          measurement=None, status="skipped", reason=reason, env=env, mode=mode,
                          run_config=_peak_config(dev, fmt, mode, budgets, plan, budget, scaling))
        rec["search"] = {"phase": "skipped", "round": 0, "step": None, "eval": 0}
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
    if dev.kind == "cuda" and budgets.settle_s > 0:
        R.settle_gpu(torch, dev, budgets.settle_s)
    by_id: dict[int, dict] = {}

    def measure(shape: Shape, trial: Trial, final: bool = False) -> float | None:
        m, n, k = shape
        case = R.Case("gemm", fmt, m, n, k, large=True, origin=f"peak search ({trial.phase})", mode=case_mode,
                      scaling=scaling, warmup_s=budgets.final_warmup_s if final else budgets.warmup_s,
                      budget_s=budgets.final_budget_s if final else budgets.budget_s)
        key = R.case_key(case, dev) + f"|search:{trial.phase}:{trial.index}"
        rec = R._run_gemm(case, key, sweep)
        rec["search"] = trial.search_info
        writer.write(rec)
        run.records.append(rec)
        by_id[trial.index] = rec
        trial.record = rec
        if rec["status"] != "ok":
            if progress:
                progress(f"{fmt} {mode} {trial.phase} {m}x{n}x{k}: {rec['status']}: {rec['reason']}")
            return None
        value = (rec.get("derived") or {}).get("flop_per_s")
        if progress:
            progress(f"{fmt} {mode} {trial.phase} {m}x{n}x{k}: {fmt_rate(value)} TFLOPS")  # 0.0156, not 0.0
        return value

    try:
        reserve = min(budgets.reserve_s(plan.top_k), 0.5 * budget)  # a small budget still measures some shapes
        result = search_shapes(measure, plan, budget_s=budget, remeasure_reserve_s=reserve,
                               clock=time.perf_counter, remeasure=lambda s, t: measure(s, t, final=True))
    finally:
        sweep.weights.clear()
        R._free(dev)
    if result.best is None:
        reasons = sorted({(t.record or {}).get("reason", "") for t in result.trials if t.record})
        return FormatPeak(fmt, mode, "failed", "; ".join(r for r in reasons if r)[:500] or "no shape ran",
                          result=result, elapsed_s=time.perf_counter() - t0)
    return FormatPeak(fmt, mode, "ok", best_record=result.best.record, result=result,
                      elapsed_s=time.perf_counter() - t0)


__all__ = ["Shape", "SearchPlan", "Trial", "SearchResult", "search_shapes", "neighbours", "coarse_grid", "gpu_plan",
           "cpu_plan", "PeakBudgets", "BURST_BUDGETS", "SUSTAINED_BUDGETS", "CPU_PEAK_BUDGETS", "FormatPeak",
           "PeakRun", "run_peak", "parse_peak_formats", "budgets_for", "CPU_NOTE", "DEFAULT_BUDGET_S",
           "GPU_COARSE_DIMS", "GPU_STEPS", "PHASES"]
