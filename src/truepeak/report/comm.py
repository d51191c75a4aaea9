"""Rendering ``truepeak comm`` results: rich tables (stdout), summary.md and the lines after a run (failed cases, an
interruption), from the records alone.

Layout after nccl-tests' output (one row per size; time in µs, algbw and busbw in GB/s = 1e9 B/s, ``#wrong``), with
the eager and CUDA-graph columns side by side where nccl-tests puts out-of-place and in-place (one unit per
column, printed in the header).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from truepeak.records import Record
from truepeak.units import GIGA, fmt_size, fmt_time_in

_US = 1e-6


def _gb(x: float | None) -> str:
    """GB/s with 2 decimals (nccl-tests style), or 3 significant digits below 0.1 GB/s (CPU / gloo small messages
    would all print 0.00)."""
    if x is None:
        return "-"
    g = x / GIGA
    return f"{g:.2f}" if g >= 0.1 or g == 0 else f"{g:.3g}"


def case_rows(records: list[Record], algos: Mapping[str, Mapping[str, Any]] | None = None) -> dict[str, list[dict]]:
    """Per op, one row per size: ``{"bytes", "count", "eager": rec|None, "graph": rec|None, "algo": str|None}``."""
    by_op: dict[str, dict[int, dict]] = {}
    for r in records:
        if r.kind != "collective":
            continue
        w = r.workload
        row = by_op.setdefault(w.op, {}).setdefault(w.bytes, {"bytes": w.bytes, "count": w.count,
                                                              "eager": None, "graph": None})
        row[r.mode or "eager"] = r
    out = {}
    for op, rows in by_op.items():
        lst = [rows[b] for b in sorted(rows)]
        for row in lst:
            a = (algos or {}).get(f"{op}|{row['bytes']}")
            row["algo"] = f"{a['algo']}/{a['proto']}" if a else None
        out[op] = lst
    return out


def _cells(rec: Record | None) -> list[str]:
    if rec is None:
        return ["-", "-", "-", "-"]
    if rec.status == "failed" and rec.time_s is None:
        return ["failed", "-", "-", "-"]
    d = rec.derived
    wrong = rec.correctness.wrong if rec.correctness is not None else None
    return [fmt_time_in(rec.time_s, _US), _gb(d.algbw_bytes_per_s if d else None),
            _gb(d.busbw_bytes_per_s if d else None), "-" if wrong is None else str(wrong)]


def fit_rows(records: list[Record]) -> list[dict]:
    """``{"op", "mode", "n", "alpha_s", "busbw", "points", "resid", "range", "status", "reason"}`` per fit record."""
    rows = []
    for r in records:
        if r.kind != "collective_fit":
            continue
        w, d = r.workload, r.derived
        rows.append({"op": w.op, "mode": r.mode, "n": w.n_ranks, "alpha_s": d.alpha_s if d else None,
                     "busbw": d.busbw_bytes_per_s if d else None, "points": d.points if d else None,
                     "resid": d.max_rel_residual if d else None,
                     "range": f"{fmt_size(w.min_bytes)}–{fmt_size(w.max_bytes)}",
                     "status": str(r.status), "reason": r.reason})
    return rows


def header_line(records: list[Record]) -> str:
    """``2 ranks, nccl (NCCL 2.28.9), bf16, 20 iters after 5 warm-up; NVIDIA H200``."""
    r = next((x for x in records if x.kind == "collective"), None) or (records[0] if records else None)
    rc = (r.run_config if r is not None else None) or {}
    env = r.env if r is not None else None
    gpu = (env.gpu.name if env is not None and env.gpu is not None else None) or (env.cpu if env else None) or "?"
    nccl = f" (NCCL {rc['nccl_version']})" if rc.get("nccl_version") else ""
    fmt = r.format if r is not None else "?"
    return (f"{rc.get('n_ranks', '?')} ranks, {rc.get('backend', '?')}{nccl}, {fmt}, "
            f"{rc.get('iters', '?')} iters after {rc.get('warmup', '?')} warm-up; {gpu}")


def _modes(records: list[Record]) -> list[str]:
    present = {r.mode for r in records if r.kind == "collective"}
    return [m for m in ("eager", "graph") if m in present] or ["eager"]


def render_tables(records: list[Record], algos: Mapping[str, Mapping[str, Any]] | None = None,
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


def summary_markdown(records: list[Record], algos: Mapping[str, Mapping[str, Any]] | None = None,
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


def failed_cases_warning(records: list[Record], shown: int = 3) -> str | None:
    """The warning after a run whose collective records are not all ok: ``warning: 2 case(s) failed or had wrong
    elements: all_reduce 1024 B eager: <reason>; ...`` (the first ``shown`` named); None when every case is ok."""
    bad = [r for r in records if r.kind == "collective" and not r.ok]
    if not bad:
        return None
    return (f"warning: {len(bad)} case(s) failed or had wrong elements: "
            + "; ".join(f"{r.workload.op} {r.workload.bytes} B {r.mode}: {r.reason}" for r in bad[:shown]))


def interrupted_notice(done: int, n_cases: int, command: str) -> str:
    """The line under an interrupted run's tables and summary.md title: ``Interrupted after 2 of 6 cases; run again
    with: <command>``."""
    return f"Interrupted after {done} of {n_cases} cases; run again with: {command}"


def interrupted_line(done: int, n_cases: int, results_path: str | None, command: str | None) -> str:
    """The last line on stderr after an interruption: where the finished records are and the command that runs the
    sweep again; without a results path (a node other than 0) that node 0 holds them."""
    if results_path is None or command is None:
        return f"interrupted after {done} of {n_cases} cases; results are written on node 0"
    return (f"interrupted after {done} of {n_cases} cases; the finished records are in {results_path}; run again "
            f"with: {command}")
