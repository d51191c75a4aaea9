"""`truepeak run`: measure this device (copy bandwidth, GEMM TFLOPS per format) and place every result on its roofline.

Thin adapter: parse and validate the options (:class:`truepeak.bench.run.RunConfig`, before torch is needed) →
:func:`truepeak.bench.run.run_main_job` (measures, writes results.jsonl, returns the records) → render through
:mod:`truepeak.report.run`: summary.md and report.html, both also after Ctrl-C from the records finished so far, and
the table (or the records as JSON) on stdout; the paths, progress and notes go to stderr. Bad input (unknown
format or device, an empty --out, --resume with no results.jsonl to continue, missing torch) prints ``error: <one
line>`` and exits with status 2. After Ctrl-C it still renders what finished: summary.md starts with, report.html
shows under its title, and the table's footer ends with, "Interrupted after N of M cases; continue with: <command>"
(:func:`resume_command`: --resume with the same --out, --device, --formats and --quick); --json prints the partial
records as the same JSON list a finished run prints. The command is repeated on stderr; the exit status is 130.
"""

from __future__ import annotations

import shlex
from pathlib import Path
from typing import Optional

import typer

from truepeak.cli.app import app, invoked_argv
from truepeak.cli.options import help_text, parse_formats, parse_modes
from truepeak.errors import TruepeakError
from truepeak.formats import FORMAT_NAMES

HELP = help_text([
    "Measure this device: copy bandwidth, then GEMM throughput per number format at decode shapes "
    "(M = 1..256 at DeepSeek-V3 expert N, K) and large squares, each checked for correctness and placed on the "
    "roofline (% of DENSE peak, % of roofline, bound).",
    "Writes results.jsonl (one record per case, written as it finishes; --resume continues it), summary.md and "
    "report.html (charts, opens with no network; `truepeak report` renders it again) under --out, prints the table "
    "on stdout.",
    "Examples:",
    "  truepeak run    (the default sweep: ~2.5 min on an H200, ~1 min on a 2-core CPU)",
    "  truepeak run --formats bf16,fp8 --out h200-run",
    "  truepeak run --quick --device cpu    (a few small cases, seconds)",
    "  truepeak run --formats bf16,fp8 --mode both    (every GEMM sustained, then burst)",
    "Modes, always labelled: sustained (back-to-back launches with rotated inputs, as a serving GPU runs; "
    "power-limited), burst (an idle gap before each iteration, so clocks recover; ~20 % higher on a 700 W H200). "
    "Units: TFLOPS = 1e12 FLOP/s, GB/s = 1e9 B/s (decimal).",
])


def _formats(text: Optional[str]) -> Optional[list[str]]:
    """``--formats``: canonical names (:func:`truepeak.cli.options.parse_formats`); an empty list is an error here."""
    names = parse_formats(text)  # UnknownNameError lists the known names
    if text is not None and names is None:
        raise TruepeakError(f"--formats is empty; give comma-separated names from: {', '.join(FORMAT_NAMES)}")
    return names


def _argv(out, device, formats, quick, resume, as_json, no_progress, mode=None) -> list[str]:
    """The command line rebuilt from the parsed options: recorded only when the command was not started through
    :func:`truepeak.cli.app.main` (which passes the command line as typed)."""
    argv = ["truepeak", "run"]
    if out is not None:
        argv += ["--out", out]
    if device != "auto":
        argv += ["--device", device]
    if formats is not None:
        argv += ["--formats", formats]
    if mode is not None:
        argv += ["--mode", mode]
    argv += [flag for flag, on in (("--quick", quick), ("--resume", resume), ("--json", as_json),
                                   ("--no-progress", no_progress)) if on]
    return argv


@app.command("run", help=HELP)
def run_command(
    ctx: typer.Context,
    out: Optional[str] = typer.Option(None, "--out", "-o", metavar="DIR",
                                      help="Output folder (default ./truepeak-run-YYYYmmdd-HHMMSS)."),
    device: str = typer.Option("auto", "--device", "-d", help="auto, cpu, cuda or cuda:N."),
    formats: Optional[str] = typer.Option(None, "--formats", "-f", metavar="LIST",
                                          help="Comma-separated formats, e.g. bf16,fp8 (default: all this device runs)."),
    quick: bool = typer.Option(False, "--quick", help="A handful of small cases with tiny budgets (tests, smoke runs)."),
    resume: bool = typer.Option(False, "--resume", help="Continue results.jsonl in --out, skipping finished cases."),
    as_json: bool = typer.Option(False, "--json", help="Print the records as JSON on stdout instead of the table."),
    no_progress: bool = typer.Option(False, "--no-progress", help="No progress bar on stderr."),
    mode: Optional[str] = typer.Option(None, "--mode", "-m",
                                       help="sustained (default), burst or both: how each GEMM is timed."),
) -> None:
    from truepeak.bench.run import RunConfig, RunInterrupted, latest_records, run_main_job
    from truepeak.hardware.detect import parse_device
    from truepeak.report.fit import stderr_width, wrap_lines
    from truepeak.report.run import (print_run_records, report_line, run_finished_lines, run_interrupted_lines,
                                     write_run_html, write_run_summary)

    parse_device(device)  # validate before any work
    fmts = _formats(formats)
    modes = parse_modes(mode)  # ConfigError lists the accepted modes
    # every option checked here, before torch is needed: a bad flag is named on a machine without torch
    config = RunConfig(out=out, device=device, formats=fmts, modes=modes, quick=quick, resume=resume)

    def warn(message: str) -> None:
        typer.echo(f"warning: {message}", err=True)

    argv = invoked_argv(ctx) or _argv(out, device, formats, quick, resume, as_json, no_progress, mode)
    try:
        result = run_main_job(config=config, progress=False if no_progress else None, argv=argv, warn=warn)
    except RunInterrupted as stop:
        from truepeak.report.table import interrupted_line

        command = resume_command(stop.out_dir, device, _asked_formats(fmts, stop.result.records), quick,
                                 resume=stop.records_path.exists(), mode=mode)
        records = latest_records(stop.result.records)
        notice = interrupted_line(len(records), max(stop.result.n_cases, len(records)), command)
        summary = write_run_summary(stop.result, notice)
        report = write_run_html(stop.out_dir, warn, notice) if records else None  # files first: see below
        print_run_records(records, stop.result.device, as_json, notice)  # the partial results, marked as such
        for line in [*run_interrupted_lines(stop.n_records, stop.records_path, command, summary),
                     *report_line(report, interrupted=True)]:
            typer.echo(line, err=True)
        raise typer.Exit(130) from None

    # the files before stdout: a reader that closes the pipe early (`| head`) ends the command at the first print
    summary = write_run_summary(result)
    report = write_run_html(result.out_dir, warn)
    records = latest_records(result.records)
    print_run_records(records, result.device, as_json)
    for line in wrap_lines(run_finished_lines(result, records, summary), stderr_width()):
        typer.echo(line, err=True)
    for line in report_line(report):
        typer.echo(line, err=True)


def _asked_formats(fmts: Optional[list[str]], records: list) -> Optional[list[str]]:
    """The formats asked for by name: ``--formats``, or (a --resume without it) those the records say were asked."""
    if fmts is not None:
        return fmts
    from truepeak.bench.run import recorded_formats

    recorded = recorded_formats(records)
    return recorded[0] if recorded is not None and recorded[1] else None


def resume_command(out_dir: str | Path, device: str = "auto", formats: Optional[list[str]] = None,
                   quick: bool = False, resume: bool = True, mode: Optional[str] = None) -> str:
    """The command that continues an interrupted run: ``truepeak run --resume --out DIR`` with the options that decide
    what is measured repeated (``--device`` unless auto, ``--formats`` as canonical names, ``--quick``), so that
    following it never measures other cases. ``resume=False`` (stopped before results.jsonl was created, so there is
    nothing to resume) leaves ``--resume`` out."""
    argv = ["truepeak", "run", *(["--resume"] if resume else []), "--out", str(out_dir)]
    if device != "auto":
        argv += ["--device", device]
    if formats:
        argv += ["--formats", ",".join(formats)]
    if quick:
        argv.append("--quick")
    if mode is not None:
        argv += ["--mode", mode]
    return shlex.join(argv)
