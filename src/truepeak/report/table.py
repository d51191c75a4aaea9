"""The results table of ``truepeak run``, rendered from records (never measures).

One row per record: shape (M x N x K, or the copy size), format (with the fp8/int8 scale layout of
``workload.scaling`` beside it: ``fp8_e4m3 (per-row)``), mode (only when the records hold more than one: a
``--mode both`` run), time, TFLOPS, GB/s, % of dense peak, % of roofline,
bound, % of the peak at the measured SM clock (GPU runs), status and a note (the reason of a skipped or failed case,
or the measurement's warning codes, and the record's own warnings in full, such as a result above its roofline). The
time column uses ONE unit chosen from the data (µs, ms or s, from the smallest time, as
torch.utils.benchmark ``select_unit``), printed in the header. Every number is formatted by
:mod:`truepeak.units` from the SI values the records hold; the footer states the units
(:data:`truepeak.units.UNITS_FOOTER`) and the mode.

:func:`table_rows` formats the cells once; :mod:`truepeak.report.markdown` renders the same rows as Markdown, so the
terminal table and summary.md cannot disagree. On a terminal the table is fitted to its width by the rule of
:mod:`truepeak.report.fit` (no number is ever cut; the note wraps, then is left out and named; at the narrowest a
stacked layout); piped, it is printed at its natural width.
"""

from __future__ import annotations

import io
import math
from collections.abc import Iterable, Sequence
from typing import Any

from truepeak.records import CopyMetrics, GemmMetrics, GemmWorkload, PeakSearchWorkload, Record
from truepeak.units import DASH, UNITS_FOOTER, fmt_bandwidth, fmt_pct, fmt_rate, fmt_time_in

#: Column id -> header text (the time header gets its unit appended).
COLUMNS: tuple[tuple[str, str], ...] = (
    ("shape", "shape (MxNxK)"),
    ("format", "format"),
    ("mode", "mode"),
    ("time", "time"),
    ("rate", "TFLOPS"),
    ("bandwidth", "GB/s"),
    ("pct_dense", "% dense peak"),
    ("pct_roofline", "% roofline"),
    ("bound", "bound"),
    ("pct_at_clock", "% peak @ clock"),
    ("status", "status"),
    ("note", "note"),
)
NUMERIC = frozenset({"time", "rate", "bandwidth", "pct_dense", "pct_roofline", "pct_at_clock"})


def interrupted_line(done: int, total: int, command: str) -> str:
    """The line an interrupted run's summary.md starts with and its table's footer ends with:
    ``"Interrupted after 2 of 4 cases; continue with: truepeak run --resume ..."``."""
    return f"Interrupted after {done} of {total} cases; continue with: {command}"


def time_unit(times_s: Iterable[float | None]) -> tuple[str, float]:
    """One unit for a column of times (seconds), from the smallest: ``("us", 1e-6)`` below 1 ms, ``("ms", 1e-3)``
    below 1 s, else ``("s", 1.0)``. Returns ``("us", 1e-6)`` for an empty column."""
    values = [t for t in times_s if t is not None and math.isfinite(t) and t > 0]
    if not values:
        return "us", 1e-6
    smallest = min(values)
    if smallest < 1e-3:
        return "us", 1e-6
    if smallest < 1.0:
        return "ms", 1e-3
    return "s", 1.0


#: ``workload.scaling`` -> how the format cell names it (bench/gemm/support.py FP8_SCALINGS: one fp32 scale per
#: tensor, one per row of A and per column of B (torch._scaled_mm rowwise), or DeepSeek-V3's 1 x 128 activation /
#: 128 x 128 weight blocks).
SCALING_LABELS: dict[str, str] = {"tensor": "per-tensor", "row": "per-row", "block128": "block128"}


def scaling_of(rec: Record) -> str | None:
    """The record's fp8/int8 scale layout (``workload.scaling``: ``"tensor"``, ``"row"``, ``"block128"``), or None."""
    w = rec.workload
    return w.scaling if isinstance(w, (GemmWorkload, PeakSearchWorkload)) and w.scaling else None


def format_label(rec: Record) -> str:
    """The format as a table shows it: ``"bf16"``; with a scale layout ``"fp8_e4m3 (per-row)"``; a copy ``"copy"``."""
    fmt = rec.format or ("copy" if rec.kind == "membw" else DASH)
    s = scaling_of(rec)
    return f"{fmt} ({SCALING_LABELS.get(s, s)})" if s else str(fmt)


def _shape(rec: Record) -> str:
    w = rec.workload
    if isinstance(w, GemmWorkload):
        return f"{w.m}x{w.n}x{w.k}"
    return w.name


def note(rec: Record) -> str:
    """A record's note: the reason of a skipped or failed one; else its reason, the measurement's warning codes (or
    its first warning) and the record's own warnings in full (a result above its roofline, ...)."""
    if not rec.ok:
        return rec.reason
    parts = []
    if rec.reason:
        parts.append(rec.reason)
    warnings = rec.warnings
    measurement = rec.measurement
    codes = getattr(measurement, "warning_codes", ()) or ()
    own = set(getattr(measurement, "warnings", ()) or ())
    extra = [w for w in warnings if w not in own]  # the record's own (a result above its roofline, ...), in full
    timing = [w for w in warnings if w in own]
    if codes:
        parts.append(", ".join(codes))
    elif timing:
        parts.append(timing[0])
    parts += extra
    return "; ".join(parts)


def _cells(rec: Record, scale: float) -> dict[str, str]:
    """The numeric cells of an ok record (a copy's % of roofline is its % of the memory ceiling, and it is bound by
    memory by definition)."""
    d = rec.derived
    cells = dict.fromkeys(NUMERIC | {"bound"}, DASH)
    cells["time"] = fmt_time_in(rec.time_s, scale)
    if isinstance(d, CopyMetrics):
        cells.update(bandwidth=fmt_bandwidth(d.bytes_per_s), pct_roofline=fmt_pct(d.bandwidth_fraction, sign=False),
                     bound="memory")
    elif isinstance(d, GemmMetrics):
        cells.update(rate=fmt_rate(d.flop_per_s), bandwidth=fmt_bandwidth(d.bytes_per_s),
                     pct_dense=fmt_pct(d.dense_fraction, sign=False),
                     pct_roofline=fmt_pct(d.roofline_fraction, sign=False), bound=d.bound or DASH,
                     pct_at_clock=fmt_pct(d.at_clock_fraction, sign=False))
    elif rec.kind == "membw":
        cells["bound"] = "memory"
    return cells


def table_rows(records: Sequence[Record]) -> tuple[list[dict[str, str]], dict[str, Any]]:
    """Format every record (of kind ``gemm``, ``membw`` or ``peak_search``) as a row of strings.

    Returns:
        ``(rows, meta)``: ``rows`` are dicts keyed by the ids in :data:`COLUMNS`; ``meta`` holds ``time_unit``
        ("us"/"ms"/"s"), ``modes`` (sorted set of record modes), ``has_clock`` (any % at clock), and ``footer``.
    """
    unit, scale = time_unit(r.time_s for r in records if r.ok)
    rows = []
    for rec in records:
        row = {"shape": _shape(rec), "format": format_label(rec), "mode": rec.mode or DASH}
        row.update(_cells(rec, scale) if rec.ok else dict.fromkeys(NUMERIC | {"bound"}, DASH))
        row.update(status=str(rec.status), note=note(rec))
        rows.append(row)
    modes = sorted({r.mode for r in records if r.mode})
    has_clock = any(isinstance(r.derived, GemmMetrics) and r.derived.at_clock_fraction is not None for r in records)
    footer = f"{UNITS_FOOTER}; mode: {', '.join(modes) if modes else 'sustained'}"
    return rows, {"time_unit": unit, "modes": modes, "has_clock": has_clock, "footer": footer}


def columns(meta: dict[str, Any]) -> list[tuple[str, str]]:
    """The columns to show: the mode column only when the records hold more than one mode (else the footer names it),
    the % at clock column only when some record has it; the time header carries its unit."""
    out = []
    for cid, header in COLUMNS:
        if cid == "pct_at_clock" and not meta.get("has_clock"):
            continue
        if cid == "mode" and len(meta.get("modes") or ()) < 2:
            continue
        if cid == "time":
            header = f"time ({'µs' if meta['time_unit'] == 'us' else meta['time_unit']})"
        out.append((cid, header))
    return out


def fit_columns(meta: dict[str, Any]) -> list[tuple[str, Any]]:
    """The shown columns as ``(id, fit.Column)``: numbers right-aligned and never wrapped; the format (``fp8_e4m3
    (per-row)``) may wrap at its space; the note wraps and is the one column left out when the table cannot fit a
    terminal otherwise (:mod:`truepeak.report.fit`)."""
    from truepeak.report.fit import Column

    return [(cid, Column(header, numeric=cid in NUMERIC, wrap=cid in ("format", "note"), drop=cid == "note"))
            for cid, header in columns(meta)]


_STATUS_STYLES = {"ok": "green", "skipped": "yellow", "failed": "red"}


def _fit_rows(rows: list[dict[str, str]], cols: list[tuple[str, Any]]) -> list[list[Any]]:
    from rich.text import Text

    return [[Text(row[cid], style=_STATUS_STYLES.get(row[cid], "")) if cid == "status" else row[cid]
             for cid, _ in cols] for row in rows]


def build_table(records: Sequence[Record], title: str | None = None, width: int | None = None):
    """The records' table fitted into ``width`` terminal columns (None: the natural width, for output that is not a
    terminal), as a :class:`truepeak.report.fit.Fitted` (a rich renderable and the line naming a column left out);
    without the units footer (:func:`render_table` prints it below)."""
    from truepeak.report.fit import fit_table

    rows, meta = table_rows(records)
    cols = fit_columns(meta)
    return fit_table([c for _, c in cols], _fit_rows(rows, cols), width, title=title)


def render_table(records: Sequence[Record], *, title: str | None = None, file=None, width: int | None = None,
                 notice: str | None = None) -> None:
    """Print the table (to ``file``, default stdout) by the one rule of :mod:`truepeak.report.fit`: fitted to the
    terminal's width (or ``width``), at its natural width when the output is not a terminal (never cut, never
    wrapped). ``notice`` (e.g. :func:`interrupted_line`) is printed on its own line below the units footer."""
    from rich.console import Console

    console = Console(file=file, width=width, highlight=False, soft_wrap=False,
                      force_terminal=True if width is not None else None)
    _print(console, records, title, notice)


def table_text(records: Sequence[Record], *, title: str | None = None, width: int | None = None,
               notice: str | None = None) -> str:
    """The table as plain text (no colour codes): at its natural width with every footer on one line (``width``
    None: as when piped, for logs), or as a terminal of ``width`` columns shows it."""
    from rich.console import Console

    buf = io.StringIO()
    _print(Console(file=buf, width=width or 80, color_system=None, highlight=False, force_terminal=width is not None),
           records, title, notice)
    return buf.getvalue()


def _print(console: Any, records: Sequence[Record], title: str | None, notice: str | None = None) -> None:
    """The table, then the units footer (and the notice) on lines of their own (wrapped at spaces to a terminal's
    width, one line each when not a terminal)."""
    from truepeak.report.fit import print_line, print_table

    rows, meta = table_rows(records)
    cols = fit_columns(meta)
    print_table(console, [c for _, c in cols], _fit_rows(rows, cols), title=title)
    print_line(console, meta["footer"])
    if notice:
        print_line(console, notice)


__all__ = ["COLUMNS", "NUMERIC", "SCALING_LABELS", "scaling_of", "format_label", "note", "interrupted_line",
           "table_rows", "columns", "fit_columns", "build_table", "render_table", "table_text",
           "time_unit"]
