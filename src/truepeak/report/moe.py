"""What ``truepeak moe bench`` shows: its table of ``moe_experts`` records, the progress line of each record and the
plot of % of read bandwidth against tokens per expert.

Cells are the records' SI values in the table's units: µs, TB/s = 1e12 B/s and TFLOPS = 1e12 FLOP/s (decimal); the
read-bandwidth fraction and the error against the float32 reference as the records hold them
(:class:`truepeak.records.MoeExpertsMetrics`, :class:`truepeak.records.Correctness`).
"""

from __future__ import annotations

import textwrap
from typing import Iterable

from truepeak.errors import require
from truepeak.records import Record

#: The table's columns: headers, and which are numbers (right-aligned, never wrapped).
COLUMNS = (("weights", False), ("tok/exp", True), ("backend", False), ("time µs", True), ("TB/s", True),
           ("% read bw", True), ("TFLOPS", True), ("error / status", False))


def row_cells(r: Record) -> list[str]:
    """One record's cells: format, tokens per expert, backend, µs, TB/s, % read bandwidth, TFLOPS, then the error
    against the reference (with the activations that ran) or the status and its reason."""
    w = r.workload
    head = [w.weights_format, f"{w.tokens_per_expert:g}", str(r.backend)]
    if not r.ok:
        return head + ["-"] * 4 + [f"{r.status}: {r.reason}"]
    d = r.derived
    acts = f"  ({w.activations})" if w.activations and w.weights_format != "bf16" else ""
    return head + [f"{r.time_s * 1e6:.1f}", f"{d.bytes_per_s / 1e12:.3f}", f"{100 * d.read_bandwidth_fraction:.1f}",
                   f"{d.flop_per_s / 1e12:.1f}", f"{r.correctness.max_rel_error:.1e}{acts}"]


def progress_line(r: Record) -> str:
    """One record as a progress line on stderr (the cells two spaces apart)."""
    return "  ".join(row_cells(r))


def render(records: list[Record], width: int | None = None) -> list[str]:
    """The table, one row per record (:func:`row_cells`), fitted into ``width`` terminal columns (None: not a
    terminal, the natural width; :mod:`truepeak.report.fit`; the error / status text wraps at spaces), then the read
    bandwidth the run measured."""
    from truepeak.report.fit import Column, fit_lines

    cols = [Column(h, numeric=num, wrap=h == "error / status") for h, num in COLUMNS]
    lines = fit_lines(cols, [row_cells(r) for r in records], width)
    read_bw = next((r.derived.read_bandwidth_bytes_per_s for r in records if r.derived is not None), None)
    if read_bw:
        footer = (f"read bandwidth measured in this run: {read_bw / 1e12:.3f} "
                  "TB/s; TB/s = 1e12 B/s of the weights of experts that received tokens (values + scales)")
        lines += [footer] if width is None else textwrap.wrap(footer, width, break_long_words=False,
                                                              break_on_hyphens=False)
    return lines


def read_bandwidth_series(records: Iterable[Record]) -> dict[str, list[tuple[float, float]]]:
    """The plot's lines: ``"backend format"`` → (tokens per expert, % of read bandwidth) points sorted by tokens per
    expert, from the ok records that have a read-bandwidth fraction."""
    series: dict[str, list[tuple[float, float]]] = {}
    for r in records:
        if not r.ok or r.derived.read_bandwidth_fraction is None:
            continue
        key = f"{r.backend} {r.format}"
        point = (r.workload.tokens_per_expert, 100 * r.derived.read_bandwidth_fraction)
        series.setdefault(key, []).append(point)
    return {key: sorted(pts) for key, pts in series.items()}


def plot_records(records: Iterable[Record], path: str) -> str:
    """Plot % of read bandwidth vs tokens per expert (:func:`read_bandwidth_series`, one line per backend and format,
    log2 x axis, a grey line at 95 %) into the PNG ``path``; returns ``path``. matplotlib is imported here.

    Raises:
        MissingDependencyError: matplotlib is not installed.
    """
    plt = require("matplotlib.pyplot", "plotting", "pip install matplotlib")
    fig, ax = plt.subplots(figsize=(7, 4.5))
    for key, pts in sorted(read_bandwidth_series(records).items()):
        ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", label=key)
    ax.set_xscale("log", base=2)
    ax.set_xlabel("tokens per expert (mean)")
    ax.set_ylabel("% of measured read bandwidth")
    ax.axhline(95, color="grey", lw=0.5, ls="--")
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


__all__ = ["COLUMNS", "row_cells", "progress_line", "render", "read_bandwidth_series", "plot_records"]
