"""The main job, :func:`run_main_job`: validate the settings (:class:`~truepeak.bench.run.config.RunConfig`), detect
the device, prepare the output folder, plan the cases, measure each one into a record written the moment it finishes,
and return them (:class:`RunResult`); Ctrl-C raises :class:`RunInterrupted` carrying the records so far."""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from truepeak.bench.environment import environment
from truepeak.bench.outdir import prepare_out_dir, read_previous
from truepeak.bench.run import runners, settle
from truepeak.bench.run.cases import case_key, default_formats, plan_cases
from truepeak.bench.run.config import Budgets, RunConfig, default_budgets, run_config
from truepeak.bench.run.progress import Progress
from truepeak.bench.run.resume import check_resume_config, recorded_formats
from truepeak.errors import require
from truepeak.hardware.detect import DeviceInfo, detect
from truepeak.records import DONE_STATUSES, Record, RecordWriter, latest


@dataclass
class RunResult:
    """What :func:`run_main_job` returns (and :class:`RunInterrupted` carries).

    Attributes:
        out_dir: the output folder.
        records_path: ``results.jsonl`` in it.
        records: the records of this run, in sweep order (for resumed cases, the records already in the file).
        device: the detected device.
        elapsed_s: wall time of the run.
        notes: caveats in words (a roofline left without a memory ceiling, ...).
        resumed_keys: keys of the records taken over from ``results.jsonl`` by ``resume`` (not measured again).
        interrupted: the run was stopped by Ctrl-C; ``records`` are those finished before.
        n_cases: how many cases the sweep planned (0 when stopped before planning them): an interrupted run
            finished ``len(records)`` of ``n_cases``.
    """

    out_dir: Path
    records_path: Path
    records: list[Record]
    device: DeviceInfo
    elapsed_s: float = 0.0
    notes: list[str] = field(default_factory=list)
    resumed_keys: frozenset[str] = frozenset()
    interrupted: bool = False
    n_cases: int = 0


class RunInterrupted(KeyboardInterrupt):
    """:func:`run_main_job` was interrupted (Ctrl-C). The records finished so far are in ``records_path`` and in
    ``result.records`` (a :class:`RunResult` with ``interrupted=True``), for the caller to render.

    Attributes:
        result: the partial :class:`RunResult`.
        n_records, out_dir, records_path: shortcuts into it.
    """

    def __init__(self, result: RunResult):
        super().__init__(f"interrupted after {len(result.records)} records; they are in {result.records_path}")
        self.result = result

    @property
    def n_records(self) -> int:
        return len(self.result.records)

    @property
    def out_dir(self) -> Path:
        return self.result.out_dir

    @property
    def records_path(self) -> Path:
        return self.result.records_path


def default_warn(message: str) -> None:
    """The default ``warn`` of :func:`run_main_job`: ``warning: <message>`` on stderr."""
    print(f"warning: {message}", file=sys.stderr)


def run_main_job(out_dir: str | os.PathLike | None = None, *, device: str | DeviceInfo = "auto",
                 formats: Sequence[str] | None = None, quick: bool = False, resume: bool = False,
                 progress: bool | None = None, argv: Sequence[str] | None = None,
                 budgets: Budgets | None = None, warn: Callable[[str], None] | None = None,
                 modes: Sequence[str] | None = None, config: RunConfig | None = None) -> RunResult:
    """Run the main job and write ``results.jsonl`` under ``out_dir`` (rendering is the caller's:
    :mod:`truepeak.report`).

    The settings (``out_dir``, ``device``, ``formats``, ``quick``, ``resume``, ``budgets``, ``modes``) are checked
    first, as a :class:`~truepeak.bench.run.config.RunConfig`, before torch is imported: a bad one is named even where
    torch is missing. ``config`` passes them already built (the other settings are then ignored).

    Args:
        out_dir: output folder (created); default :func:`~truepeak.bench.outdir.default_out_dir`.
        device: ``"auto"``, ``"cpu"``, ``"cuda"``, ``"cuda:N"`` or a :class:`DeviceInfo`.
        formats: format names (a list, aliases allowed: ``["bf16", "fp8"]``); None for
            :func:`~truepeak.bench.run.cases.default_formats`, or with ``resume`` the formats recorded in the
            ``run_config`` of the records being continued. They are stored in every record's ``run_config``; resuming
            with other formats is refused.
        quick: a few small cases with tiny budgets (tests and smoke runs; < 15 s on a CPU).
        resume: continue an existing ``results.jsonl``, skipping cases already ``ok`` or ``skipped``.
        progress: a transient progress bar on stderr; None shows it only when stderr is a terminal.
        argv: command line recorded in each record's environment (default ``sys.argv``).
        budgets: override the time budgets (default :func:`~truepeak.bench.run.config.default_budgets`).
        warn: called with one line per problem found in a resumed ``results.jsonl`` (a torn or malformed line, which
            is ignored); default prints ``warning: ...`` on stderr.
        modes: ``["sustained"]`` (default), ``["burst"]``, ``["both"]`` or both names
            (:func:`~truepeak.bench.run.config.expand_modes`): every GEMM case is timed once per mode, each record
            labelled with its mode. A CPU has one mode, ``"cpu"``.
        config: the settings as one :class:`~truepeak.bench.run.config.RunConfig`.

    Returns:
        :class:`RunResult`.

    Raises:
        ConfigError: a bad setting (unknown format or mode, a bad device string or ``--out``), before torch is needed.
        MissingDependencyError: torch is not installed (message carries the install command).
        TruepeakError: ``out_dir`` cannot be created or written; ``results.jsonl`` already exists in ``out_dir``
            without ``resume``, or does not exist with it; ``resume`` into records of another schema
            (:func:`~truepeak.bench.outdir.read_previous`) or made with other settings
            (:func:`~truepeak.bench.run.resume.check_resume_config`); results cannot be written.
        UnsupportedError: ``cuda`` asked for but not available.
        RunInterrupted: Ctrl-C; the records so far are kept in the file and carried by the exception.
    """
    if config is None:
        config = RunConfig(out=out_dir, device=device, formats=formats, modes=modes, quick=quick, resume=resume,
                           budgets=budgets)
    torch = require("torch", "truepeak run")
    warn = warn or default_warn
    t_start = time.perf_counter()
    quick, resume = config.quick, config.resume
    fmts = list(config.formats) if config.formats is not None else None
    mode_list = list(config.modes)
    dev = config.device if isinstance(config.device, DeviceInfo) else detect(config.device)
    out = prepare_out_dir(config.out, resume)  # before anything is measured
    path = out / "results.jsonl"
    budgets = config.budgets or default_budgets(dev, quick)
    previous = read_previous(path, warn) if resume and path.exists() else {}
    given = fmts is not None
    recorded = recorded_formats(previous.values()) if fmts is None else None
    if recorded is not None:  # --resume without --formats: the formats of the run being continued
        fmts, given = recorded
    sweep_formats = fmts or default_formats(dev, quick)
    record_config = run_config(dev, quick, budgets, sweep_formats, given, mode_list)
    check_resume_config(previous.values(), record_config, path)
    done = {key for key, rec in previous.items() if rec.status in DONE_STATUSES}

    result = RunResult(out, path, [], dev)
    if dev.kind != "cuda" and mode_list != ["sustained"]:  # as truepeak peak says it (bench/peak/job.py)
        result.notes.append(f"--mode {'/'.join(mode_list)}: burst and sustained have no meaning on a CPU; measured "
                            "with the host timer (mode cpu)")
    resumed: set[str] = set()
    sweep = None
    try:
        if dev.kind == "cuda":
            torch.cuda.set_device(dev.index or 0)
        cases = plan_cases(dev, sweep_formats, quick, _format_skips(torch, dev, fmts if given else None, quick),
                           modes=mode_list)
        result.n_cases = len(cases)
        env = environment(argv, device=dev.index if dev.kind == "cuda" else None).replace(device=dev.to_dict())
        sweep = runners.Sweep(dev, budgets, quick, env, record_config, acc=dev.accelerator,
                              settled=dev.kind != "cuda" or budgets.settle_s <= 0)
        with RecordWriter(path) as writer, Progress(len(cases), progress) as bar:
            for case in cases:
                bar.update(case.progress_label)
                key = case_key(case, dev)
                if key in done:
                    rec = previous[key]
                    resumed.add(key)
                else:
                    rec = runners.run_case(case, key, sweep, torch)
                    writer.write(rec)
                if case.kind == "membw":
                    runners.use_copy(sweep, rec, result.notes)
                result.records.append(rec)
                bar.advance()
    except KeyboardInterrupt:
        result.interrupted = True
        raise RunInterrupted(_finish(result, resumed, t_start)) from None
    finally:
        if sweep is not None:
            sweep.weights.clear()
        runners.free_device(dev)
    return _finish(result, resumed, t_start)


def _finish(result: RunResult, resumed: set[str], t_start: float) -> RunResult:
    result.resumed_keys = frozenset(resumed)
    result.elapsed_s = time.perf_counter() - t_start
    return result


def _format_skips(torch: Any, dev: DeviceInfo, asked: list[str] | None, quick: bool) -> dict[str, str]:
    """``{format: reason}`` of default formats to skip: CPU bf16 when this CPU runs it far slower than fp32 (never
    when asked for by name)."""
    if asked is not None or dev.kind != "cpu" or "bf16" not in default_formats(dev, quick):
        return {}
    ok, why = settle.cpu_bf16_fast_enough(torch)
    return {} if ok else {"bf16": why}


#: One record per key, the last one written, in first-seen order (a resumed file holds retried cases twice).
latest_records = latest


__all__ = ["RunResult", "RunInterrupted", "default_warn", "run_main_job", "latest_records"]
