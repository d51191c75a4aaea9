"""Charts of the HTML report, drawn by matplotlib as inline SVG text (no files, no JavaScript, no network).

Every function takes plain numbers in SI units (FLOP/s, B/s, bytes, fractions) and returns one ``<svg>`` element as a
string, ready to be pasted into an HTML page. matplotlib is imported lazily, inside :func:`_pyplot`, with the
non-interactive ``Agg`` backend (it never opens a window and works on a machine with no display); the SVG keeps text
as text (``svg.fonttype = none``: smaller, searchable, and rendered in the page's font) and carries no date and a fixed
id salt, so the same records give the same bytes.

Charts:

- :func:`peaks_chart`: per format, the 2:4-sparse spec peak (hatched, labelled "sparse": display only), the dense spec
  peak, the dense peak at the measured SM clock, and the best measured rate.
- :func:`roofline_chart`: log-log roofline of one device, arithmetic intensity (FLOP/B) against TFLOPS: the memory
  ceiling ``bandwidth x intensity`` and one compute ceiling per format (its dense peak), with the measured points of
  each format (Williams, Waterman & Patterson, "Roofline", CACM 2009).
- :func:`decode_chart`: efficiency against M in the decode regime: % of dense peak and % of roofline, one line per
  format and (N, K).
- :func:`moe_chart`: MoE expert layer, % of read bandwidth against tokens per expert, one line per backend (and format).
- :func:`collective_chart`: time per call, algbw and busbw against message size, one line per op (and mode).
- :func:`serving_chart`: a serving run's tokens/s and TPOT against concurrency.

Units on the axes: TFLOPS = 1e12 FLOP/s, GB/s = 1e9 B/s (decimal).
"""

from __future__ import annotations

import io
import math
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

#: Colours per format (and a cycle for anything else), so one format has one colour in every chart of a report.
FORMAT_COLOURS: dict[str, str] = {
    "fp32": "#7f7f7f", "tf32": "#8c564b", "bf16": "#1f77b4", "fp16": "#17becf", "fp8_e4m3": "#d62728",
    "fp8_e5m2": "#ff7f0e", "int8": "#2ca02c", "mxfp8": "#e377c2", "nvfp4": "#9467bd", "mxfp4": "#bcbd22",
    "mxfp6": "#aec7e8",
}
_CYCLE = ("#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b", "#e377c2", "#17becf", "#bcbd22",
          "#7f7f7f")
_MODE_MARKERS = {"sustained": "o", "burst": "^", "cpu": "s", "eager": "o", "graph": "D"}


def colour(name: str | None, index: int = 0) -> str:
    """The colour of a format (or, for other series, of the ``index``-th series)."""
    if name in FORMAT_COLOURS:
        return FORMAT_COLOURS[name]
    return _CYCLE[index % len(_CYCLE)]


def base_format(name: str) -> str:
    """The format of a series label: ``"fp8_e4m3 (per-row)"`` -> ``"fp8_e4m3"`` (a label without a scale layout is
    its own format)."""
    return name.split(" (", 1)[0]


def series_colours(names: Sequence[str]) -> dict[str, str]:
    """One distinct colour per series label, in order: a format's own colour (:data:`FORMAT_COLOURS`) for the first
    series of that format (``"fp8_e4m3 (per-tensor)"`` gets fp8_e4m3's red), and the next colour of the cycle that no
    other series or format of the chart uses for a second scale layout of the same format (``"fp8_e4m3 (per-row)"``,
    ``"fp8_e4m3 (block128)"``), so the scale layouts are told apart."""
    bases = {base_format(n) for n in names}
    taken = {FORMAT_COLOURS[b] for b in bases if b in FORMAT_COLOURS}
    out: dict[str, str] = {}
    seen: set[str] = set()
    spare = [c for c in _CYCLE + ("#393b79", "#637939", "#8c6d31", "#843c39", "#7b4173") if c not in taken]
    for i, n in enumerate(names):
        b = base_format(n)
        if b not in seen and b in FORMAT_COLOURS:
            out[n] = FORMAT_COLOURS[b]
        elif spare:
            out[n] = spare.pop(0)
        else:
            out[n] = colour(n, i)
        seen.add(b)
    return out


def _pyplot() -> Any:
    """matplotlib.pyplot on the Agg backend, with the report's style; raises MissingDependencyError with the install
    command when matplotlib is missing."""
    try:
        import matplotlib
    except ImportError as exc:  # pragma: no cover - matplotlib is a base dependency
        from truepeak.errors import MissingDependencyError

        raise MissingDependencyError("the HTML report's charts need matplotlib: pip install matplotlib") from exc
    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt

    matplotlib.rcParams.update({
        "svg.fonttype": "none", "svg.hashsalt": "truepeak", "font.size": 9, "axes.titlesize": 10,
        "axes.labelsize": 9, "legend.fontsize": 8, "axes.grid": True, "grid.alpha": 0.3,
        "font.family": "sans-serif", "axes.spines.top": False, "axes.spines.right": False,
    })
    return plt


def to_svg(fig: Any) -> str:
    """The figure as one ``<svg>`` element (no XML prolog or DOCTYPE, no date); closes the figure."""
    plt = _pyplot()
    buf = io.StringIO()
    try:
        fig.savefig(buf, format="svg", bbox_inches="tight", metadata={"Date": None})
    finally:
        plt.close(fig)
    text = buf.getvalue()
    start = text.find("<svg")
    return text[start:] if start >= 0 else text


def _tflops(x: float | None) -> float | None:
    return None if x is None else x / 1e12


def peaks_chart(rows: Sequence[Mapping[str, Any]], title: str = "") -> str:
    """Grouped horizontal bars per format.

    Args:
        rows: dicts with ``format`` (or ``label``, shown in its place), ``mode`` (appended to the label when the rows
            hold more than one) and, in FLOP/s (None where unknown): ``sparse`` (2:4-sparse spec), ``dense``
            (dense spec), ``at_clock`` (dense peak at the measured SM clock), ``measured`` (best measured).
        title: the chart's title.
    """
    plt = _pyplot()
    n = len(rows)
    fig, ax = plt.subplots(figsize=(7.5, 0.9 + 0.62 * max(n, 1)))
    series = (("sparse", "spec 2:4 sparse (marketing, display only)", dict(fill=False, hatch="///",
                                                                            edgecolor="#999999")),
              ("dense", "spec dense (the efficiency denominator)", dict(color="#c7c7c7")),
              ("at_clock", "dense peak at the measured SM clock", dict(color="#9ecae1")),
              ("measured", "best measured", dict(color="#08519c")))
    h = 0.2
    for j, (key, name, style) in enumerate(series):
        ys = [i + (1.5 - j) * h for i in range(n)]
        vals = [(_tflops(r.get(key)) or 0.0) for r in rows]
        if any(vals):
            ax.barh(ys, vals, height=h, label=name, **style)
    for i, r in enumerate(rows):
        m = _tflops(r.get("measured"))
        if m:
            ax.text(m, i - 1.5 * h, f" {m:.4g}", va="center", fontsize=7, color="#08519c")
    ax.set_yticks(range(n))
    several_modes = len({r.get("mode") for r in rows if r.get("mode")}) > 1
    ax.set_yticklabels([str(r.get("label") or r.get("format")) + (f" {r['mode']}" if several_modes and r.get("mode")
                                                                  else "") for r in rows])
    ax.invert_yaxis()
    ax.set_xlabel("TFLOPS (TOPS for int8), 1e12 per s")
    ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.5 / max(n, 1) - 0.12), ncol=2, frameon=False)
    if title:
        ax.set_title(title)
    return to_svg(fig)


def roofline_chart(points: Mapping[str, Sequence[tuple[float, float, str]]], ceilings: Mapping[str, float],
                   bandwidth: float | None, title: str = "", bandwidth_label: str = "memory") -> str:
    """A log-log roofline.

    Args:
        points: per series, measured ``(intensity FLOP/B, FLOP/s, mode)``; a series is a format with its scale
            layout where records have one (``"fp8_e4m3 (per-tensor)"``, ``"fp8_e4m3 (per-row)"``: one legend entry and
            colour each, :func:`series_colours`), else the format (``"bf16"``).
        ceilings: per format, the dense peak in FLOP/s (a horizontal compute ceiling each; the scale layouts of a
            format share it).
        bandwidth: the memory ceiling in B/s (the slanted line), or None.
        title: chart title.
        bandwidth_label: what the memory ceiling is (``"HBM 4800 GB/s (catalog)"``).
    """
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(6.5, 4.6))
    # log axes: only positive finite values place the limits (an absurd value must not make them infinite)
    xs = [p[0] for pts in points.values() for p in pts if p[0] and 0 < p[0] < 1e100]
    ys = [p[1] for pts in points.values() for p in pts if p[1] and 0 < p[1] < 1e100]
    peaks = [v for v in ceilings.values() if v and 0 < v < 1e100]
    lo_x = min(xs + [1.0]) / 2
    hi_x = max(xs + [1.0]) * 2
    if bandwidth and peaks:
        hi_x = max(hi_x, 4 * max(peaks) / bandwidth)
    if bandwidth:
        ax.plot([lo_x, hi_x], [bandwidth * lo_x / 1e12, bandwidth * hi_x / 1e12], color="black", lw=1.2,
                label=f"memory ceiling: {bandwidth_label}")
    shared: dict[float, list[str]] = {}  # formats with the same peak share one ceiling line and label
    for fmt, peak in ceilings.items():
        if peak:
            shared.setdefault(peak, []).append(fmt)
    for i, (peak, fmts) in enumerate(shared.items()):
        ridge = peak / bandwidth if bandwidth else lo_x
        c = colour(fmts[0], i)
        ax.plot([max(ridge, lo_x), hi_x], [peak / 1e12] * 2, color=c, lw=1.2, ls="--")
        ax.text(hi_x, peak / 1e12, f" {', '.join(fmts)} dense {peak / 1e12:.4g}", va="center", fontsize=7, color=c)
    point_colours = series_colours(list(points))
    for fmt, pts in points.items():
        by_mode: dict[str, list[tuple[float, float]]] = {}
        for x, y, mode in pts:
            if x and y and x > 0 and y > 0:
                by_mode.setdefault(mode or "", []).append((x, y / 1e12))
        for mode, xy in by_mode.items():
            ax.scatter([p[0] for p in xy], [p[1] for p in xy], s=18, color=point_colours[fmt],
                       marker=_MODE_MARKERS.get(mode, "o"), zorder=3,
                       label=f"{fmt} measured" + (f" ({mode})" if len(by_mode) > 1 or mode not in ("sustained", "")
                                                  else ""))
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlim(lo_x, hi_x)
    top = max([p / 1e12 for p in peaks] + [y / 1e12 for y in ys] + [1e-6])
    bottom = min([y / 1e12 for y in ys] + [top / 1e3])
    ax.set_ylim(bottom / 2, top * 3)
    ax.set_xlabel("arithmetic intensity (FLOP per byte of minimum traffic)")
    ax.set_ylabel("TFLOPS (1e12 FLOP/s)")
    ax.legend(loc="upper left", bbox_to_anchor=(1.22, 1.0), frameon=False)
    if title:
        ax.set_title(title)
    return to_svg(fig)


def _pct_top(values: Iterable[float], floor: float = 105) -> float:
    """The top of a percentage axis: ``floor`` (a little above 100 %), or 5 % above the largest value, so a point
    above 100 % (flagged by its record: a noisy ceiling, operands served from cache) is drawn, never cut off."""
    top = max((v for v in values if math.isfinite(v)), default=0.0)
    return max(floor, 1.05 * top)


def decode_chart(series: Mapping[str, Sequence[tuple[float, float | None, float | None]]],
                 formats: Mapping[str, str] | None = None, title: str = "") -> str:
    """Efficiency against M at decode shapes: two panels, % of dense peak (log) and % of roofline.

    Args:
        series: per line label (``"bf16 N=4096 K=7168"``), ``(M, fraction of dense peak, fraction of roofline)``.
        formats: per line label, its format (for the colour).
        title: chart title.
    """
    plt = _pyplot()
    fig, (a1, a2) = plt.subplots(1, 2, figsize=(9.5, 3.8))
    styles = ["-", "--", ":", "-."]
    shapes: dict[str, int] = {}
    fmts = formats or {}
    for i, (name, pts) in enumerate(series.items()):
        shape = name.split(" ", 1)[1] if " " in name else ""
        ls = styles[shapes.setdefault(shape, len(shapes)) % len(styles)]
        c = colour(fmts.get(name), i)
        pts = sorted(pts)
        for ax, j in ((a1, 1), (a2, 2)):
            xy = [(p[0], 100 * p[j]) for p in pts if p[j] is not None]
            if xy:
                ax.plot([p[0] for p in xy], [p[1] for p in xy], ls=ls, marker="o", ms=3, color=c, label=name)
    for ax, what in ((a1, "% of dense peak"), (a2, "% of roofline (= % of bandwidth when memory-bound)")):
        ax.set_xscale("log", base=2)
        ax.set_xlabel("M (rows = tokens per expert at decode)")
        ax.set_ylabel(what)
    a1.set_yscale("log")
    a2.set_ylim(0, _pct_top(100 * p[2] for pts in series.values() for p in pts if p[2] is not None))
    handles, labels = a2.get_legend_handles_labels()
    if not handles:
        handles, labels = a1.get_legend_handles_labels()
    fig.legend(handles, labels, loc="lower center", ncol=min(4, max(1, len(labels))), frameon=False,
               bbox_to_anchor=(0.5, -0.02 - 0.045 * ((len(labels) - 1) // 4)))
    fig.tight_layout(rect=(0, 0.06 + 0.05 * ((len(labels) - 1) // 4), 1, 0.95 if title else 1))
    if title:
        fig.suptitle(title, fontsize=10)
    return to_svg(fig)


def moe_chart(series: Mapping[str, Sequence[tuple[float, float]]], title: str = "") -> str:
    """MoE expert layer: % of read bandwidth against tokens per expert (log2 x), one line per backend.

    Args:
        series: per line label (``"triton nvfp4"``), ``(tokens per expert, fraction of read bandwidth)``.
        title: chart title.
    """
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(7.5, 4.2))
    for i, (name, pts) in enumerate(series.items()):
        pts = sorted(p for p in pts if p[1] is not None)
        ax.plot([p[0] for p in pts], [100 * p[1] for p in pts], marker="o", ms=3.5, color=colour(None, i),
                label=name)
    ax.axhline(100, color="black", lw=0.8, ls=":")
    ax.set_xscale("log", base=2)
    ax.set_ylim(0, _pct_top((100 * p[1] for pts in series.values() for p in pts if p[1] is not None), 110))
    ax.set_xlabel("tokens per expert")
    ax.set_ylabel("% of measured read bandwidth")
    ax.legend(loc="lower left", frameon=False, ncol=2)
    if title:
        ax.set_title(title)
    return to_svg(fig)


def collective_chart(series: Mapping[str, Sequence[tuple[float, float | None, float | None, float | None]]],
                     title: str = "") -> str:
    """Collectives against message size (bytes, log2), one line per op and mode (CUDA-graph dashed): time per call
    (µs; the latency regime decode lives in), algbw and busbw (GB/s), all on log axes as nccl-tests' tables span
    1 KiB to 1 GiB.

    Args:
        series: per line label (``"all_reduce eager"``), ``(bytes, seconds per call, algbw B/s, busbw B/s)``.
        title: chart title.
    """
    plt = _pyplot()
    fig, axes = plt.subplots(1, 3, figsize=(11, 3.8))
    scale = (1e-6, 1e9, 1e9)
    for i, (name, pts) in enumerate(series.items()):
        pts = sorted(pts)
        ls = "--" if name.endswith("graph") else "-"
        for j, ax in enumerate(axes, start=1):
            xy = [(p[0], p[j] / scale[j - 1]) for p in pts if p[j] is not None and p[j] > 0]
            if xy:
                ax.plot([p[0] for p in xy], [p[1] for p in xy], marker="o", ms=3, ls=ls, color=colour(None, i),
                        label=name)
    for ax, what, unit in zip(axes, ("time per call", "algbw = bytes / time", "busbw = algbw x bus factor"),
                              ("µs", "GB/s (1e9 B/s)", "GB/s (1e9 B/s)")):
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xlabel("message size (bytes)")
        ax.set_ylabel(unit)
        ax.set_title(what, fontsize=9)
    axes[0].legend(loc="upper left", frameon=False)
    if title:
        fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    return to_svg(fig)


def serving_chart(rates: Mapping[str, Sequence[tuple[float, float | None]]],
                  tpot: Mapping[str, Sequence[tuple[float, float | None]]], title: str = "") -> str:
    """A serving run against concurrency (log2 x): tokens per second (log y), one line per series, and the time per
    output token in ms, one line per percentile. Series with no value are left out; the planner's figures dashed.

    Args:
        rates: per line label (``"output tok/s"``, ``"planner ceiling tok/s"``), ``(concurrency, tokens per s)``.
        tpot: per percentile label (``"median"``), ``(concurrency, seconds per output token)``.
        title: chart title.
    """
    plt = _pyplot()
    fig, (a1, a2) = plt.subplots(1, 2, figsize=(10, 3.8))
    for i, (name, pts) in enumerate(rates.items()):
        xy = sorted((x, y) for x, y in pts if y is not None and y > 0)
        if xy:
            a1.plot([p[0] for p in xy], [p[1] for p in xy], marker="o", ms=3.5, color=colour(None, i),
                    ls="--" if name.startswith("planner") else "-", label=name)
    for i, (name, pts) in enumerate(tpot.items()):
        xy = sorted((x, 1e3 * y) for x, y in pts if y is not None)
        if xy:
            a2.plot([p[0] for p in xy], [p[1] for p in xy], marker="o", ms=3.5, color=colour(None, i), label=name)
    for ax in (a1, a2):
        ax.set_xscale("log", base=2)
        ax.set_xlabel("concurrency (requests in flight)")
    a1.set_yscale("log")
    a1.set_ylabel("tokens per second")
    a2.set_ylabel("TPOT (ms per output token)")
    a2.set_ylim(bottom=0)
    for ax in (a1, a2):
        if ax.get_legend_handles_labels()[0]:
            ax.legend(loc="best", frameon=False)
    if title:
        fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    return to_svg(fig)


__all__ = ["FORMAT_COLOURS", "colour", "base_format", "series_colours", "to_svg", "peaks_chart", "roofline_chart",
           "decode_chart", "moe_chart", "collective_chart", "serving_chart"]
