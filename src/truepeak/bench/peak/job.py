"""The search on a device, :func:`run_peak`: for each (format, mode), settle, search (:func:`~truepeak.bench.peak.
search.search_shapes`) with every shape measured as one ``truepeak run`` GEMM case into a record, and write
``peak.json``; Ctrl-C keeps what was written and raises :class:`~truepeak.bench.peak.results.PeakInterrupted`."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from truepeak.bench import gemm as G
from truepeak.bench.environment import environment
from truepeak.bench.outdir import prepare_out_dir
from truepeak.bench.peak import plan as plans
from truepeak.bench.peak.config import PeakConfig, peak_formats
from truepeak.bench.peak.plan import DEFAULT_BUDGET_S, CPU_NOTE, PeakBudgets, SearchPlan, Shape, budgets_for, \
    search_config
from truepeak.bench.peak.resume import attempts, check_resume_settings, peak_from_records, previous_searches, \
    search_finished, trials_of
from truepeak.bench.peak.results import FormatPeak, PeakInterrupted, PeakRun, interrupted_peak
from truepeak.bench.peak.search import SearchResult, Trial, best_so_far, search_shapes
from truepeak.bench.run import runners
from truepeak.bench.run.cases import Case, case_key
from truepeak.bench.run.config import Budgets, expand_modes
from truepeak.bench.run.job import default_warn
from truepeak.bench.run.settle import settle_gpu
from truepeak.errors import require
from truepeak.hardware.detect import DeviceInfo, detect
from truepeak.records import PeakSearchWorkload, Record, RecordWriter, SearchStep, make_record, read_records
from truepeak.units import fmt_rate


class _SearchStopped(KeyboardInterrupt):
    """Ctrl-C inside one (format, mode) search: which one, and the seconds it had run."""

    def __init__(self, fmt: str, mode: str, elapsed_s: float):
        super().__init__(f"{fmt} {mode} search interrupted")
        self.key = (fmt, mode)
        self.elapsed_s = elapsed_s


def run_peak(out_dir: str | Path | None = None, *, device: str | Any = "auto",
             formats: Sequence[str] | None = None, modes: Sequence[str] | None = None,
             budget_s: float | dict | None = None, argv: Sequence[str] | None = None,
             plan: SearchPlan | None = None, budgets: dict[str, PeakBudgets] | None = None,
             progress: Callable[[str], None] | None = None, resume: bool = False,
             warn: Callable[[str], None] | None = None, config: PeakConfig | None = None) -> PeakRun:
    """Search the maximum achievable matmul throughput for each format and mode; write every trial as a record.

    Ctrl-C stops the search in progress: the records stay in ``results.jsonl``, ``peak.json`` is written with the
    searches finished, the interrupted one's best so far (status ``interrupted``) and the ones not started
    (``not_searched``), and :class:`~truepeak.bench.peak.results.PeakInterrupted` is raised. ``resume=True`` continues
    such a folder: a search whose records end with its last re-measurement (``search.final``; or a ``skipped`` search)
    is taken from the records, the others are searched again from the start (their earlier records stay; a search's
    records are those after its last first trial, ``search.eval == 0``).

    The settings (``out_dir``, ``device``, ``formats``, ``modes``, ``budget_s``, ``resume``, ``plan``, ``budgets``)
    are checked first, as a :class:`~truepeak.bench.peak.config.PeakConfig`, before torch is imported; ``config``
    passes them already built (the other settings are then ignored).

    Args:
        out_dir: output folder (created); ``results.jsonl`` (every shape tried) and ``peak.json`` (the answers) go
            there. Default ``./truepeak-peak-YYYYmmdd-HHMMSS``.
        device: ``"auto"``, ``"cpu"``, ``"cuda"``, ``"cuda:N"`` or a DeviceInfo.
        formats: format names (a list, aliases allowed: ``["bf16", "fp8"]``); default bf16 and fp8_e4m3 on a GPU,
            fp32 on a CPU.
        modes: names from ``"burst"``, ``"sustained"``, ``"both"`` (a list; default both on a GPU; a CPU has only
            ``"cpu"``).
        budget_s: wall seconds per (format, mode), re-measurements included (default 60 on a GPU, 15 on a CPU); or a
            dict keyed by ``(format, mode)`` or format (canonical names), the default for what it does not name.
        argv: command line recorded in each record.
        plan: override the search plan (default :func:`~truepeak.bench.peak.plan.gpu_plan` /
            :func:`~truepeak.bench.peak.plan.cpu_plan`).
        budgets: override the per-mode :class:`~truepeak.bench.peak.plan.PeakBudgets` (``{"burst": ...,
            "sustained": ..., "cpu": ...}``).
        progress: called with one line per trial (the CLI prints it on stderr).
        resume: continue ``results.jsonl`` in ``out_dir`` (which must exist), taking finished searches from it.
        warn: called with one line per unusable line of a resumed ``results.jsonl`` (default: ``warning: ...`` on
            stderr).
        config: the settings as one :class:`~truepeak.bench.peak.config.PeakConfig`.

    Raises:
        ConfigError: a bad setting (an unknown format or mode, a budget that is not > 0, a bad device string or
            output folder), before torch is needed.
        MissingDependencyError: torch is not installed.
        TruepeakError: ``results.jsonl`` already in the output folder without ``resume``, or missing with it;
            ``resume`` into records of another schema version, or whose finished search was made with other settings
            (device, budget, plan, budgets, scaling).
        PeakInterrupted: Ctrl-C; carries the :class:`~truepeak.bench.peak.results.PeakRun` so far.
    """
    if config is None:
        config = PeakConfig(out=out_dir, device=device, formats=formats, modes=modes, budget_s=budget_s,
                            resume=resume, plan=plan, budgets=budgets)
    torch = require("torch", "truepeak peak")
    t0 = time.perf_counter()
    budget_map = config.budget_map()
    budget_s, modes, resume, budgets = config.budget_default(), config.modes, config.resume, config.budgets
    device = config.device
    dev = device if isinstance(device, DeviceInfo) else detect(device)
    fmts = peak_formats(config.formats, dev)
    notes: list[str] = []
    if dev.kind == "cuda":
        mode_list = expand_modes(modes if modes is not None else ["both"])
    else:
        mode_list = ["cpu"]
        notes.append(CPU_NOTE)
        if modes is not None:
            notes.append(f"--mode {','.join(modes)} has no meaning on a CPU: measured with the host timer (mode cpu)")
    budget = float(budget_s) if budget_s is not None else DEFAULT_BUDGET_S["cuda" if dev.kind == "cuda" else "cpu"]
    out = prepare_out_dir(config.out, resume, command="peak")
    path = out / "results.jsonl"
    base_plan = config.plan or (plans.gpu_plan() if dev.kind == "cuda" else plans.cpu_plan())
    order = [(fmt, mode) for mode in mode_list for fmt in fmts]
    settings = {}
    for fmt, mode in order:
        b = float(budget_map.get((fmt, mode), budget_map.get(fmt, budget)))
        mb = (budgets or {}).get(mode, budgets_for(mode))
        settings[(fmt, mode)] = (b, mb, search_config(dev, fmt, mode, mb, base_plan, b, G.default_scaling(fmt)))
    finished = {}
    if resume:
        previous = previous_searches(path, warn or default_warn)
        for key in order:
            recs = previous.get(key, [])
            if search_finished(recs):
                check_resume_settings(recs[0], settings[key][2], path)
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
                    peak = _search_one(dev, fmt, mode, b, base_plan, mb, env, writer, run, progress, torch)
                run.peaks.append(peak)
    except KeyboardInterrupt as stop:
        # the file is the truth: a record written just before Ctrl-C counts even if the search never saw its value
        run.records = list(read_records(path, strict=False))[before:] if path.exists() else []
        if isinstance(stop, _SearchStopped):
            trials = trials_of(attempts(run.records).get(stop.key, []))
            result = SearchResult(best_so_far(trials), trials, "interrupted", stop.elapsed_s)
            run.peaks.append(interrupted_peak(*stop.key, result, stop.elapsed_s))
        started = {(p.format, p.mode) for p in run.peaks}
        run.interrupted = True
        run.not_searched = [key for key in order if key not in started]
        run.elapsed_s = time.perf_counter() - t0
        _write_summary(run)
        raise PeakInterrupted(run) from None
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


def _search_one(dev, fmt, mode, budget, plan, budgets, env, writer, run, progress, torch) -> FormatPeak:
    """Search one (format, mode): settle, coarse, refine, remeasure; every trial a record."""
    t0 = time.perf_counter()
    scaling = G.default_scaling(fmt)
    ok, reason = G.supported(fmt, dev, scaling=scaling)
    if not ok:
        rec = make_record(workload=PeakSearchWorkload(format=fmt, scaling=scaling), backend=None, format=fmt,
                          measurement=None, status="skipped", reason=reason, env=env, mode=mode,
                          run_config=search_config(dev, fmt, mode, budgets, plan, budget, scaling),
                          search=SearchStep(phase="skipped"))
        writer.write(rec)
        run.records.append(rec)
        if progress:
            progress(f"{fmt} {mode}: skipped: {reason}")
        return FormatPeak(fmt, mode, "skipped", reason, elapsed_s=time.perf_counter() - t0)
    config = search_config(dev, fmt, mode, budgets, plan, budget, scaling)
    sweep = runners.Sweep(dev, Budgets(0.0, budgets.warmup_s, budgets.budget_s, budgets.warmup_s, budgets.budget_s,
                                    0.0, 0.0, 256 if dev.kind == "cuda" else 64),
                     False, env, config, acc=dev.accelerator, settled=True)
    case_mode = mode if dev.kind == "cuda" else ""
    by_id: dict[int, Record] = {}

    def measure(shape: Shape, trial: Trial, final: bool = False) -> float | None:
        m, n, k = shape
        case = Case("gemm", fmt, m, n, k, large=True, origin=f"peak search ({trial.phase})", mode=case_mode,
                      scaling=scaling, warmup_s=budgets.final_warmup_s if final else budgets.warmup_s,
                      budget_s=budgets.final_budget_s if final else budgets.budget_s)
        key = case_key(case, dev) + f"|search:{trial.phase}:{trial.index}"
        rec = runners.run_gemm(case, key, sweep).replace(search=trial.search_info)
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
            settle_gpu(torch, dev, budgets.settle_s)
        reserve = min(budgets.reserve_s(plan.top_k), 0.5 * budget)  # a small budget still measures some shapes
        result = search_shapes(measure, plan, budget_s=budget, remeasure_reserve_s=reserve,
                               clock=time.perf_counter, remeasure=lambda s, t: measure(s, t, final=True))
    except KeyboardInterrupt:  # SearchInterrupted, or Ctrl-C while settling: run_peak reads what was written
        raise _SearchStopped(fmt, mode, time.perf_counter() - t0) from None
    finally:
        sweep.weights.clear()
        runners.free_device(dev)
    if result.best is None:
        reasons = sorted({t.record.reason for t in result.trials if t.record is not None})
        return FormatPeak(fmt, mode, "failed", "; ".join(r for r in reasons if r)[:500] or "no shape ran",
                          result=result, elapsed_s=time.perf_counter() - t0)
    return FormatPeak(fmt, mode, "ok", best_record=result.best.record, result=result,
                      elapsed_s=time.perf_counter() - t0)


__all__ = ["run_peak"]
