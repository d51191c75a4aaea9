"""`truepeak peak`: the maximum achievable matmul FLOPS (MAMF) per format, by a search over GEMM shapes.

Thin adapter: parse and validate → :func:`truepeak.bench.peak.run_peak` (measures, writes results.jsonl with every
shape tried and peak.json with the answers) → render the answers as a table (or JSON) on stdout; progress and notes go
to stderr. Bad input (unknown format or mode, a non-positive budget, an empty --out, missing torch) prints
``error: <one line>`` and exits with status 2. After Ctrl-C it renders what it has: the finished searches and the
interrupted one's best so far (peak.json marked ``interrupted``), the table (or JSON) followed by "Interrupted after N
of M searches; continue with: <command>" (:func:`resume_command`: --resume with the same --out, --device, --format,
--mode and --budget), and one line on stderr saying where the records are; the exit status is 130.
"""

from __future__ import annotations

import json
import shlex
from pathlib import Path
from typing import Optional

import typer

from truepeak.cli.app import app, invoked_argv
from truepeak.errors import TruepeakError, require

HELP = "\n\n".join([
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
    require("torch", "truepeak peak")
    from truepeak.bench.peak import PeakInterrupted, run_peak
    from truepeak.bench.outdir import check_out_arg
    from truepeak.bench.run import parse_formats, parse_modes
    from truepeak.formats import FORMAT_NAMES
    from truepeak.hardware.detect import parse_device

    parse_device(device)
    fmts = parse_formats(format)
    if format is not None and fmts is None:
        raise TruepeakError(f"--format is empty; give comma-separated names from: {', '.join(FORMAT_NAMES)}")
    modes = parse_modes(mode) if mode is not None else None
    if budget is not None and not budget > 0:
        raise TruepeakError(f"--budget must be > 0 seconds, got {budget:g}")
    if resume and out is None:
        raise TruepeakError("--resume needs --out DIR naming the peak search to continue")
    check_out_arg(out, "peak")
    argv = invoked_argv(ctx) or ["truepeak", "peak"]
    progress = None if quiet else (lambda line: typer.echo(line, err=True))
    warn = lambda message: typer.echo(f"warning: {message}", err=True)  # noqa: E731
    try:
        result = run_peak(out, device=device, formats=format, modes=mode, budget_s=budget, argv=argv,
                          progress=progress, resume=resume, warn=warn)
    except PeakInterrupted as stop:
        run = stop.run
        command = resume_command(run.out_dir, device, fmts, modes, budget, resume=run.records_path.exists())
        done = sum(1 for p in run.peaks if p.status != "interrupted")
        notice = f"Interrupted after {done} of {len(run.peaks) + len(run.not_searched)} searches; continue with: " \
                 f"{command}"
        _print_answers(run.summary(), as_json, notice)
        n = _shapes(run.records)
        typer.echo(f"interrupted after {n} shape{'s' if n != 1 else ''}; they are in {run.records_path}; best so far "
                   f"in {run.out_dir / 'peak.json'}; continue with: {command}", err=True)
        raise typer.Exit(130) from None
    _print_answers(result.summary(), as_json)
    for note in [*getattr(result.device, "notes", []), *result.notes]:
        typer.echo(f"note: {note}", err=True)
    resumed = sum(1 for p in result.peaks if p.resumed)
    typer.echo(f"{_shapes(result.records)} shapes measured in {result.elapsed_s:.1f} s"
               + (f" ({resumed} finished search{'es' if resumed != 1 else ''} taken from the records)"
                  if resumed else "")
               + f"; records: {result.records_path}; answers: {result.out_dir / 'peak.json'}", err=True)


def _shapes(records: list) -> int:
    """How many shapes ``records`` measured (a skipped search's one record measured none)."""
    return sum(1 for r in records if r.search is None or r.search.phase != "skipped")


def _print_answers(summary: dict, as_json: bool, notice: Optional[str] = None) -> None:
    """stdout: peak.json's content (``--json``) or the table, with ``notice`` (an interrupted search's line) below."""
    if as_json:
        typer.echo(json.dumps(summary, indent=1, ensure_ascii=False))
    else:
        render_peaks(summary, notice=notice)


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


#: The footer's sentence per column it explains: a sentence is printed only when its column is shown.
PEAK_FOOTERS = {
    "% dense": "% dense = of the DENSE spec peak",
    "peak @ clock": "peak @ clock = FLOP/clk/SM x SMs x median sampled SM clock",
}
#: The footer's sentence per mode, printed only when a row was measured in that mode.
MODE_FOOTERS = {
    "burst": "burst = an idle gap before each GEMM (comparable with mamf-finder)",
    "sustained": "sustained = back to back (a serving GPU)",
    "cpu": "cpu = the host timer around back-to-back calls (a CPU has no burst or sustained mode)",
}


def render_peaks(summary: dict, file=None, console=None, notice: Optional[str] = None) -> None:
    """The answers as a table: format, mode, best shape, median TFLOPS, % of dense, peak at clock and %, clock, power,
    evaluations; skipped/failed rows say why; an interrupted search's row shows its best so far (its shape marked
    "best so far", and "not re-measured" when it is a first-pass value) or why it has none. A column with no value in any row (SM MHz and W on a CPU, which has no
    NVML clock or power reading; the peak at clock where no clock was sampled) is left out, not printed empty, and the
    footer explains only the columns and modes shown. Printed on ``console`` (default: a console on ``file``, default
    stdout), fitted to its width when it is a terminal, at the natural width otherwise (:mod:`truepeak.report.fit`).
    ``notice`` (an interrupted run's line) is printed below the footer."""
    from rich.console import Console

    from truepeak.report.fit import Column, print_line, print_table
    from truepeak.units import DASH, fmt_pct, fmt_rate

    console = console or Console(file=file, highlight=False, soft_wrap=False)
    headers = ("format", "mode", "best shape MxNxK", "TFLOPS", "% dense", "peak @ clock", "% @ clock", "SM MHz", "W",
               "shapes", "s")
    rows: list[list[str]] = []
    for p in summary.get("peaks", []):
        if p.get("status") != "ok" and not (p.get("status") == "interrupted" and p.get("shape")):
            rows.append([p["format"], p["mode"], f"{p['status']}: {p.get('reason', '')}", *["-"] * 8])
            continue
        shape = "x".join(str(x) for x in p.get("shape") or [])
        if p.get("status") == "interrupted":
            shape += " (best so far" + ("" if p.get("remeasured") else ", not re-measured") + ")"
        clk = p.get("sm_clock_median_hz")
        pw = p.get("power_median_w")
        rows.append([p["format"], p["mode"], shape, fmt_rate(p.get("flop_per_s")), fmt_pct(p.get("pct_dense"), False),
                     fmt_rate(p.get("peak_at_clock_flop_per_s")), fmt_pct(p.get("pct_at_clock"), False),
                     "-" if clk is None else f"{clk / 1e6:.0f}", "-" if pw is None else f"{pw:.0f}",
                     str(p.get("evaluations", "-")), f"{p.get('elapsed_s', 0):.0f}"])
    empty = {"", "-", DASH}
    text_columns = ("format", "mode", "best shape MxNxK")
    keep = [j for j, h in enumerate(headers) if h in text_columns or any(r[j] not in empty for r in rows)]
    # the best shape column holds a skipped row's reason: it may wrap (a shape has no space, so it never does)
    # the shapes tried and the seconds spent are bookkeeping: left out first when a terminal is too narrow
    bookkeeping = {"s": 0, "shapes": 1}
    cols = [Column(headers[j], numeric=headers[j] not in text_columns, wrap=headers[j] == "best shape MxNxK",
                   drop=headers[j] in bookkeeping, priority=bookkeeping.get(headers[j], 0)) for j in keep]
    print_table(console, cols, [[r[j] for j in keep] for r in rows],
                title=f"truepeak peak: {summary.get('device')} ({summary.get('device_kind')})")
    shown = {headers[j] for j in keep}
    modes = {p.get("mode") for p in summary.get("peaks", [])
             if p.get("status") == "ok" or (p.get("status") == "interrupted" and p.get("shape"))}
    columns_said = ["TFLOPS = 1e12 FLOP/s (TOPS for int8), median of the re-measured best shape"]
    columns_said += [text for col, text in PEAK_FOOTERS.items() if col in shown]
    modes_said = [text for mode, text in MODE_FOOTERS.items() if mode in modes]
    print_line(console, ". ".join(x for x in ("; ".join(columns_said), "; ".join(modes_said)) if x) + ".")
    if notice:
        print_line(console, notice)
