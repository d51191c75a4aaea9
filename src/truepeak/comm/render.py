"""Rendering ``truepeak comm`` results: rich tables (stdout) and summary.md, from the records alone.

Layout after nccl-tests' output (one row per size; time in µs, algbw and busbw in GB/s = 1e9 B/s, ``#wrong``), with
the eager and CUDA-graph columns side by side where nccl-tests puts out-of-place and in-place (one unit per
column, printed in the header).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from truepeak.units import GIGA, fmt_size, fmt_time_in

_US = 1e-6


def _gb(x: float | None) -> str:
    """GB/s with 2 decimals (nccl-tests style), or 3 significant digits below 0.1 GB/s (CPU / gloo small messages
    would all print 0.00)."""
    if x is None:
        return "-"
    g = x / GIGA
    return f"{g:.2f}" if g >= 0.1 or g == 0 else f"{g:.3g}"


def case_rows(records: list[dict], algos: Mapping[str, Mapping[str, Any]] | None = None) -> dict[str, list[dict]]:
    """Per op, one row per size: ``{"bytes", "count", "eager": rec|None, "graph": rec|None, "algo": str|None}``."""
    by_op: dict[str, dict[int, dict]] = {}
    for r in records:
        if r.get("kind") != "collective":
            continue
        w = r.get("workload") or {}
        row = by_op.setdefault(w.get("op"), {}).setdefault(w.get("bytes"), {"bytes": w.get("bytes"),
                                                                           "count": w.get("count"),
                                                                           "eager": None, "graph": None})
        row[r.get("mode") or "eager"] = r
    out = {}
    for op, rows in by_op.items():
        lst = [rows[b] for b in sorted(rows)]
        for row in lst:
            a = (algos or {}).get(f"{op}|{row['bytes']}")
            row["algo"] = f"{a['algo']}/{a['proto']}" if a else None
        out[op] = lst
    return out


def _cells(rec: dict | None) -> list[str]:
    if rec is None:
        return ["-", "-", "-", "-"]
    if rec.get("status") == "failed" and rec.get("time_s") is None:
        return ["failed", "-", "-", "-"]
    d = rec.get("derived") or {}
    wrong = (rec.get("correctness") or {}).get("wrong")
    return [fmt_time_in(rec.get("time_s"), _US), _gb(d.get("algbw_B_per_s")), _gb(d.get("busbw_B_per_s")),
            "-" if wrong is None else str(wrong)]


def fit_rows(records: list[dict]) -> list[dict]:
    """``{"op", "mode", "n", "alpha_s", "busbw", "points", "resid", "range", "status", "reason"}`` per fit record."""
    rows = []
    for r in records:
        if r.get("kind") != "collective_fit":
            continue
        w, d = r.get("workload") or {}, r.get("derived") or {}
        rows.append({"op": w.get("op"), "mode": r.get("mode"), "n": w.get("n_ranks"), "alpha_s": d.get("alpha_s"),
                     "busbw": d.get("busbw_B_per_s"), "points": d.get("points"), "resid": d.get("max_rel_residual"),
                     "range": f"{fmt_size(w.get('min_bytes'))}–{fmt_size(w.get('max_bytes'))}",
                     "status": r.get("status"), "reason": r.get("reason")})
    return rows


def header_line(records: list[dict]) -> str:
    """``2 ranks, nccl (NCCL 2.28.9), bf16, 20 iters after 5 warm-up; NVIDIA H200``."""
    r = next((x for x in records if x.get("kind") == "collective"), None) or (records[0] if records else {})
    rc, env = r.get("run_config") or {}, r.get("env") or {}
    gpu = (env.get("gpu") or {}).get("name") or env.get("cpu") or "?"
    nccl = f" (NCCL {rc['nccl_version']})" if rc.get("nccl_version") else ""
    return (f"{rc.get('n_ranks', '?')} ranks, {rc.get('backend', '?')}{nccl}, {r.get('format', '?')}, "
            f"{rc.get('iters', '?')} iters after {rc.get('warmup', '?')} warm-up; {gpu}")


def _modes(records: list[dict]) -> list[str]:
    present = {r.get("mode") for r in records if r.get("kind") == "collective"}
    return [m for m in ("eager", "graph") if m in present] or ["eager"]


def render_tables(records: list[dict], algos: Mapping[str, Mapping[str, Any]] | None = None,
                  console: Any = None) -> None:
    """Print one table per op and the α–β fits (rich, on ``console`` or stdout), each fitted to the terminal by
    :mod:`truepeak.report.fit` (the natural width when the output is not a terminal: a log keeps every digit). The
    NCCL algo/proto column and the fit's size range are the columns left out first on a narrow terminal."""
    from rich.console import Console

    from truepeak.report.fit import Column, print_line, print_table

    console = console or Console(highlight=False, soft_wrap=False)
    print_line(console, f"truepeak comm: {header_line(records)}")
    show_algo = bool(algos)
    modes = _modes(records)
    rows_by_op = case_rows(records, algos)
    if rows_by_op:   # the units once, as a line: a table title wraps to the table's width
        print_line(console, "time per call in µs; algbw, busbw in GB/s = 1e9 B/s; S = nccl-tests total size")
    for op, rows in rows_by_op.items():
        cols = [Column("S", numeric=True), Column("count", numeric=True)]
        for m in modes:
            cols += [Column(h, numeric=True) for h in (f"{m} µs", "algbw", "busbw", "#wrong")]
        if show_algo:
            cols.append(Column("NCCL algo/proto", drop=True))
        cells = []
        for row in rows:
            line = [fmt_size(row["bytes"]), str(row["count"])]
            for m in modes:
                line += _cells(row[m])
            if show_algo:
                line.append(row["algo"] or "-")
            cells.append(line)
        print_table(console, cols, cells, title=op, title_justify="left")
    fits = fit_rows(records)
    if fits:
        print_line(console, "α–β fit: t(S) = α + S·factor/busbw (least squares on relative error)")
        cols = [Column("op"), Column("mode")] + [Column(h, numeric=True) for h in ("α µs", "busbw GB/s", "points",
                                                                                     "max resid.")]
        cols.append(Column("sizes", numeric=True, drop=True))
        skipped, cells = [], []
        for f in fits:
            if f["status"] != "ok":
                cells.append([f["op"], f["mode"], "-", "-", "-", "-", "skipped"])
                skipped.append(f"{f['op']} {f['mode']}: {f['reason']}")
                continue
            cells.append([f["op"], f["mode"], fmt_time_in(f["alpha_s"], _US), _gb(f["busbw"]), str(f["points"]),
                          f"{100 * f['resid']:.0f} %", f["range"]])
        print_table(console, cols, cells)
        for line in skipped:
            print_line(console, f"  fit skipped: {line}")


def summary_markdown(records: list[dict], algos: Mapping[str, Mapping[str, Any]] | None = None,
                     command: str | None = None, notice: str | None = None) -> str:
    """summary.md: the same tables in Markdown; ``notice`` (an interrupted run's line) in bold under the title."""
    lines = ["# truepeak comm", "", *([f"**{notice}**", ""] if notice else []), header_line(records), ""]
    if command:
        lines += [f"Command: `{command}`", ""]
    lines += ["Time per call in µs (eager: median over samples, each a window of back-to-back calls timed by CUDA "
              "events (perf_counter on CPU), divided by its calls; max over ranks; graph: per call inside a replayed "
              "CUDA graph). algbw = S / t, busbw = algbw × factor (nccl-tests), in GB/s "
              "(1e9 B/s). #wrong: output elements differing from the exact result, summed over ranks.", ""]
    show_algo = bool(algos)
    for op, rows in case_rows(records, algos).items():
        head = ["size S", "count"]
        for m in _modes(records):
            head += [f"{m} µs", "algbw", "busbw", "#wrong"]
        if show_algo:
            head.append("NCCL algo/proto")
        lines += [f"## {op}", "", "| " + " | ".join(head) + " |", "|" + "---:|" * len(head)]
        for row in rows:
            cells = [fmt_size(row["bytes"]), str(row["count"])]
            for m in _modes(records):
                cells += _cells(row[m])
            if show_algo:
                cells.append(row["algo"] or "-")
            lines.append("| " + " | ".join(cells) + " |")
        lines.append("")
    fits = fit_rows(records)
    if fits:
        lines += ["## α–β fits", "", "t(S) = α + S·factor/busbw, least squares on relative error (1/t² weights).", "",
                  "| op | mode | α (µs) | busbw (GB/s) | points | max rel. residual | sizes |",
                  "|---|---|---:|---:|---:|---:|---|"]
        for f in fits:
            if f["status"] != "ok":
                lines.append(f"| {f['op']} | {f['mode']} | - | - | - | - | skipped: {f['reason']} |")
            else:
                lines.append(f"| {f['op']} | {f['mode']} | {fmt_time_in(f['alpha_s'], _US)} | {_gb(f['busbw'])} | "
                             f"{f['points']} | {100 * f['resid']:.0f} % | {f['range']} |")
        lines.append("")
    return "\n".join(lines)
