"""What ``truepeak peak`` shows: the answers (``peak.json``'s content) as a table or JSON on stdout, and the lines on
stderr (how many shapes were measured and where the records and answers are; after Ctrl-C, how far it got and how to
continue).

The CLI (:mod:`truepeak.cli.peak`) calls these and echoes the stderr lines they return; the answers are read from
:meth:`truepeak.bench.peak.PeakRun.summary` (a dict) and a run by its attributes, so report never imports bench.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence
from typing import IO, Any

from truepeak.records import Record


def shapes_measured(records: Sequence[Record]) -> int:
    """How many shapes ``records`` measured (a skipped search's one record measured none)."""
    return sum(1 for r in records if r.search is None or r.search.phase != "skipped")


def print_peak_answers(summary: dict, as_json: bool, notice: str | None = None, file: IO[str] | None = None) -> None:
    """stdout (or ``file``): peak.json's content (``as_json``) or the table (:func:`render_peaks`), with ``notice``
    (an interrupted search's line) below."""
    if as_json:
        print(json.dumps(summary, indent=1, ensure_ascii=False), file=file or sys.stdout)
    else:
        render_peaks(summary, file=file, notice=notice)


def peak_interrupted_notice(run: Any, command: str) -> str:
    """The line below an interrupted search's table: ``"Interrupted after 1 of 4 searches; continue with: ..."``
    (the searches finished, of those finished, interrupted and never started)."""
    done = sum(1 for p in run.peaks if p.status != "interrupted")
    return f"Interrupted after {done} of {len(run.peaks) + len(run.not_searched)} searches; continue with: {command}"


def peak_interrupted_line(run: Any, command: str) -> str:
    """The stderr line after Ctrl-C: the shapes measured, where the records and the best so far are, the command
    that continues."""
    n = shapes_measured(run.records)
    return (f"interrupted after {n} shape{'s' if n != 1 else ''}; they are in {run.records_path}; best so far "
            f"in {run.out_dir / 'peak.json'}; continue with: {command}")


def peak_finished_lines(run: Any) -> list[str]:
    """The stderr lines after a finished search: the device's and the run's notes, then the shapes measured, the
    time, the searches taken from an earlier run's records, and where the records and the answers are."""
    lines = [f"note: {note}" for note in [*getattr(run.device, "notes", []), *run.notes]]
    resumed = sum(1 for p in run.peaks if p.resumed)
    lines.append(f"{shapes_measured(run.records)} shapes measured in {run.elapsed_s:.1f} s"
                 + (f" ({resumed} finished search{'es' if resumed != 1 else ''} taken from the records)"
                    if resumed else "")
                 + f"; records: {run.records_path}; answers: {run.out_dir / 'peak.json'}")
    return lines


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


def render_peaks(summary: dict, file=None, console=None, notice: str | None = None) -> None:
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


__all__ = ["shapes_measured", "print_peak_answers", "peak_interrupted_notice", "peak_interrupted_line",
           "peak_finished_lines", "render_peaks", "PEAK_FOOTERS", "MODE_FOOTERS"]
