"""`truepeak peak`: the maximum achievable matmul FLOPS (MAMF) per format, by a search over GEMM shapes.

Thin adapter: parse and validate (:class:`truepeak.bench.peak.PeakConfig`, before torch is needed) →
:func:`truepeak.bench.peak.run_peak` (measures, writes results.jsonl with every shape tried and peak.json with the
answers) → render the answers as a table (or JSON) on stdout through :mod:`truepeak.report.peak`; progress and notes
go to stderr. Bad input (unknown format or mode, a non-positive budget, an empty --out, missing torch) prints
``error: <one line>`` and exits with status 2. After Ctrl-C it renders what it has: the finished searches and the
interrupted one's best so far (peak.json marked ``interrupted``), the table (or JSON) followed by "Interrupted after N
of M searches; continue with: <command>" (:func:`resume_command`: --resume with the same --out, --device, --format,
--mode and --budget), and one line on stderr saying where the records are; the exit status is 130.
"""

from __future__ import annotations

import shlex
from pathlib import Path
from typing import Optional

import typer

from truepeak.cli.app import app, invoked_argv
from truepeak.cli.options import help_text, mode_names, parse_formats, parse_modes
from truepeak.errors import TruepeakError

HELP = help_text([
    "Find the maximum achievable matmul throughput (MAMF) per number format by a search over GEMM shapes M, N, K: "
    "a coarse grid of large and aspect-varied shapes, coordinate-descent refinement around the best in steps of "
    "2048 down to 256, then the best 3 measured again with longer budgets (so a lucky first measurement cannot win).",
    "Every shape tried is checked against a float64 reference, timed with CUDA events over inputs rotated through "
    ">= 2x L2, and written to results.jsonl (kind gemm, with a 'search' field); peak.json holds the answers. After "
    "Ctrl-C, peak.json holds the finished searches and the interrupted one's best so far; --resume continues: "
    "finished searches are taken from results.jsonl, the interrupted one starts again.",
    "Modes, always labelled: burst (an idle gap before each GEMM, so clocks recover: comparable with mamf-finder) "
    "and sustained (back to back after a 3 s settle: the power-capped figure a serving GPU gets; ~20 % lower on a "
    "700 W H200). Reported: best shape, median TFLOPS, % of the DENSE spec peak, % of the peak at the measured SM "
    "clock (FLOP/clk/SM x SMs x median clock), clock and power.",
    "Examples:",
    "  truepeak peak    (bf16 and fp8, both modes, 60 s each: ~4 min on an H200)",
    "  truepeak peak --format bf16 --mode burst --budget 100 --out h200-peak",
    "  truepeak peak --device cpu    (a small fp32 search; a CPU has no burst/sustained modes)",
    "Units: TFLOPS = 1e12 FLOP/s (TOPS for int8), decimal.",
])


@app.command("peak", help=HELP)
def peak_command(
    ctx: typer.Context,
    format: Optional[str] = typer.Option(None, "--format", "--formats", "-f", metavar="LIST",
                                         help="Comma-separated formats, e.g. bf16,fp8 (default: bf16,fp8_e4m3 on a "
                                              "GPU, fp32 on a CPU)."),
    mode: Optional[str] = typer.Option(None, "--mode", "-m",
                                       help="sustained, burst or both (default both on a GPU)."),
    budget: Optional[float] = typer.Option(None, "--budget", "-b", metavar="SECONDS",
                                           help="Wall seconds per format and mode, re-measurement included "
                                                "(default 60 on a GPU, 15 on a CPU)."),
    out: Optional[str] = typer.Option(None, "--out", "-o", metavar="DIR",
                                      help="Output folder (default ./truepeak-peak-YYYYmmdd-HHMMSS)."),
    device: str = typer.Option("auto", "--device", "-d", help="auto, cpu, cuda or cuda:N."),
    as_json: bool = typer.Option(False, "--json", help="Print peak.json's content on stdout instead of the table."),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="No per-shape progress lines on stderr."),
    resume: bool = typer.Option(False, "--resume", help="Continue results.jsonl in --out: searches that finished "
                                "there are taken from it, the others are searched (again)."),
) -> None:
    from truepeak.bench.peak import PeakConfig, PeakInterrupted, run_peak
    from truepeak.formats import FORMAT_NAMES
    from truepeak.hardware.detect import parse_device
    from truepeak.report.peak import (peak_finished_lines, peak_interrupted_line, peak_interrupted_notice,
                                      print_peak_answers)

    parse_device(device)
    fmts = parse_formats(format)
    if format is not None and fmts is None:
        raise TruepeakError(f"--format is empty; give comma-separated names from: {', '.join(FORMAT_NAMES)}")
    names = mode_names(mode)  # as given ("both"): a CPU's note names it
    modes = parse_modes(mode) if mode is not None else None
    if budget is not None and not budget > 0:
        raise TruepeakError(f"--budget must be > 0 seconds, got {budget:g}")
    # every option checked here, before torch is needed: a bad flag is named on a machine without torch
    config = PeakConfig(out=out, device=device, formats=fmts, modes=names, budget_s=budget, resume=resume)
    argv = invoked_argv(ctx) or ["truepeak", "peak"]
    progress = None if quiet else (lambda line: typer.echo(line, err=True))
    warn = lambda message: typer.echo(f"warning: {message}", err=True)  # noqa: E731
    try:
        result = run_peak(config=config, argv=argv, progress=progress, warn=warn)
    except PeakInterrupted as stop:
        run = stop.run
        command = resume_command(run.out_dir, device, fmts, modes, budget, resume=run.records_path.exists())
        print_peak_answers(run.summary(), as_json, peak_interrupted_notice(run, command))
        typer.echo(peak_interrupted_line(run, command), err=True)
        raise typer.Exit(130) from None
    print_peak_answers(result.summary(), as_json)
    for line in peak_finished_lines(result):
        typer.echo(line, err=True)


def resume_command(out_dir: str | Path, device: str = "auto", formats: Optional[list[str]] = None,
                   modes: Optional[list[str]] = None, budget: Optional[float] = None, resume: bool = True) -> str:
    """The command that continues an interrupted ``truepeak peak``: ``truepeak peak --resume --out DIR`` with the
    options that decide what is searched repeated (``--device`` unless auto, ``--format`` as canonical names,
    ``--mode``, ``--budget``), so that following it searches the same things. ``resume=False`` (stopped before
    results.jsonl was created) leaves ``--resume`` out."""
    argv = ["truepeak", "peak", *(["--resume"] if resume else []), "--out", str(out_dir)]
    if device != "auto":
        argv += ["--device", device]
    if formats:
        argv += ["--format", ",".join(formats)]
    if modes:
        argv += ["--mode", ",".join(modes)]
    if budget is not None:
        argv += ["--budget", f"{budget:g}"]
    return shlex.join(argv)
