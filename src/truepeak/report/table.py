"""The results table of ``truepeak run``, rendered from records (never measures).

One row per record: shape (M x N x K, or the copy size), format, time, TFLOPS, GB/s, % of dense peak, % of roofline,
bound, % of the peak at the measured SM clock (GPU runs), status and a note (the reason of a skipped or failed case,
or a measurement warning). Each time column uses ONE unit chosen from the data (us or ms, from the smallest time;
STYLE.md point 4: torch.utils.benchmark ``select_unit``), printed in the header. The footer states the units:
"TFLOPS = 1e12 FLOP/s; GB/s = 1e9 B/s; % of dense peak (never sparse); mode: sustained".

:func:`table_rows` formats the cells once; :mod:`truepeak.report.markdown` renders the same rows as Markdown, so the
terminal table and summary.md cannot disagree.
"""

from __future__ import annotations

import io
import math
from collections.abc import Iterable, Sequence
from typing import Any

#: Column id -> header text (the time header gets its unit appended).
COLUMNS: tuple[tuple[str, str], ...] = (
    ("shape", "shape (MxNxK)"),
    ("format", "format"),
    ("time", "time"),
    ("tflops", "TFLOPS"),
    ("gbps", "GB/s"),
    ("pct_dense", "% dense peak"),
    ("pct_roofline", "% roofline"),
    ("bound", "bound"),
    ("pct_at_clock", "% peak @ clock"),
    ("status", "status"),
    ("note", "note"),
)
NUMERIC = frozenset({"time", "tflops", "gbps", "pct_dense", "pct_roofline", "pct_at_clock"})
DASH = "-"


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


def fmt_time(t: float | None, scale: float) -> str:
    """``t`` seconds in the column's unit: 4 significant digits, at least one decimal (``12.3``, ``20340.5``)."""
    if t is None or not math.isfinite(t):
        return DASH
    v = t / scale
    if v >= 1000:
        return f"{v:.1f}"
    return f"{v:.4g}" if v < 10 else f"{v:.1f}"


def fmt_tflops(v: float | None) -> str:
    """TFLOPS: one decimal from 10 up (``677.4``), three significant digits below (``0.812``, ``4.12``)."""
    if v is None or not math.isfinite(v):
        return DASH
    return f"{v:.1f}" if abs(v) >= 10 else f"{v:.3g}"


def fmt_gbps(v: float | None) -> str:
    """GB/s: whole numbers from 100 up (``4243``), three significant digits below."""
    if v is None or not math.isfinite(v):
        return DASH
    return f"{v:.0f}" if abs(v) >= 100 else f"{v:.3g}"


def fmt_pct(fraction: float | None) -> str:
    """A fraction as a percentage number without the sign: ``0.684`` -> ``68.4``; below 10 %, three digits (``2.31``)."""
    if fraction is None or not math.isfinite(fraction):
        return DASH
    p = 100 * fraction
    return f"{p:.1f}" if abs(p) >= 10 else f"{p:.3g}"


def _shape(rec: dict) -> str:
    w = rec.get("workload")
    if isinstance(w, dict):
        if rec.get("kind") == "gemm" and all(k in w for k in ("m", "n", "k")):
            return f"{w['m']}x{w['n']}x{w['k']}"
        return str(w.get("label", DASH))
    return str(w) if w is not None else DASH


def _note(rec: dict) -> str:
    status = rec.get("status")
    if status in ("skipped", "failed"):
        return rec.get("reason") or ""
    parts = []
    if rec.get("reason"):
        parts.append(rec["reason"])
    warnings = rec.get("warnings") or []
    codes = (rec.get("measurement") or {}).get("warning_codes") or []
    if codes:
        parts.append(", ".join(codes))
    elif warnings:
        parts.append(warnings[0])
    return "; ".join(parts)


def table_rows(records: Sequence[dict]) -> tuple[list[dict[str, str]], dict[str, Any]]:
    """Format every record as a row of strings.

    Returns:
        ``(rows, meta)``: ``rows`` are dicts keyed by the ids in :data:`COLUMNS`; ``meta`` holds ``time_unit``
        ("us"/"ms"/"s"), ``modes`` (sorted set of record modes), ``has_clock`` (any % at clock), and ``footer``.
    """
    unit, scale = time_unit(r.get("time_s") for r in records if r.get("status") == "ok")
    rows = []
    has_clock = False
    for rec in records:
        d = rec.get("derived") or {}
        ok = rec.get("status") == "ok"
        kind = rec.get("kind")
        pct_roof = d.get("pct_roofline")
        bound = d.get("bound")
        if kind == "membw":  # a copy's roofline is the memory ceiling itself
            pct_roof = d.get("pct_bandwidth")
            bound = "memory" if ok else None
        if d.get("pct_at_clock") is not None:
            has_clock = True
        rows.append({
            "shape": _shape(rec),
            "format": rec.get("format") or ("copy" if kind == "membw" else DASH),
            "time": fmt_time(rec.get("time_s"), scale) if ok else DASH,
            "tflops": fmt_tflops(d.get("tflops")) if ok else DASH,
            "gbps": fmt_gbps(d.get("gbps")) if ok else DASH,
            "pct_dense": fmt_pct(d.get("pct_dense")) if ok else DASH,
            "pct_roofline": fmt_pct(pct_roof) if ok else DASH,
            "bound": (bound or DASH) if ok else DASH,
            "pct_at_clock": fmt_pct(d.get("pct_at_clock")) if ok else DASH,
            "status": rec.get("status") or DASH,
            "note": _note(rec),
        })
    modes = sorted({r.get("mode") for r in records if r.get("mode")})
    footer = ("TFLOPS = 1e12 FLOP/s; GB/s = 1e9 B/s; % of dense peak (never sparse); mode: "
              + (", ".join(modes) if modes else "sustained"))
    return rows, {"time_unit": unit, "modes": modes, "has_clock": has_clock, "footer": footer}


def columns(meta: dict[str, Any]) -> list[tuple[str, str]]:
    """The columns to show: the % at clock column only when some record has it; the time header carries its unit."""
    out = []
    for cid, header in COLUMNS:
        if cid == "pct_at_clock" and not meta.get("has_clock"):
            continue
        if cid == "time":
            header = f"time ({'µs' if meta['time_unit'] == 'us' else meta['time_unit']})"
        out.append((cid, header))
    return out


def build_table(records: Sequence[dict], title: str | None = None):
    """A ``rich.table.Table`` of the records (footer line as its caption)."""
    from rich.table import Table

    rows, meta = table_rows(records)
    table = Table(title=title, caption=meta["footer"], caption_justify="left", header_style="bold")
    styles = {"ok": "green", "skipped": "yellow", "failed": "red"}
    for cid, header in columns(meta):
        table.add_column(header, justify="right" if cid in NUMERIC else "left",
                         overflow="fold", no_wrap=cid not in ("note",))
    for row in rows:
        cells = []
        for cid, _ in columns(meta):
            text = row[cid]
            if cid == "status" and text in styles:
                text = f"[{styles[text]}]{text}[/{styles[text]}]"
            cells.append(text)
        table.add_row(*cells)
    return table


def render_table(records: Sequence[dict], *, title: str | None = None, file=None, width: int | None = None) -> None:
    """Print the table (to ``file``, default stdout). ``width`` defaults to the terminal's, or 200 when not a terminal
    (so piped output is not wrapped to 80 columns)."""
    from rich.console import Console

    console = Console(file=file, width=width, highlight=False, soft_wrap=False)
    if width is None and not console.is_terminal:
        console = Console(file=file, width=200, highlight=False, soft_wrap=False)
    console.print(build_table(records, title=title))


def table_text(records: Sequence[dict], *, title: str | None = None, width: int = 200) -> str:
    """The table as plain text (no colour codes): for tests and logs."""
    buf = io.StringIO()
    from rich.console import Console

    Console(file=buf, width=width, color_system=None, highlight=False, force_terminal=False).print(
        build_table(records, title=title))
    return buf.getvalue()


__all__ = ["COLUMNS", "table_rows", "columns", "build_table", "render_table", "table_text", "time_unit", "fmt_time",
           "fmt_tflops", "fmt_gbps", "fmt_pct"]
