"""The HTML report: one self-contained file that opens with no network.

Rendered from records alone (:mod:`truepeak.report.load`), never measuring. Inline CSS, charts as inline SVG drawn by
matplotlib (:mod:`truepeak.report.plots`, imported lazily), no JavaScript, no fonts or images fetched; every piece of
text from the records goes through :func:`html.escape`. Sections, each present only when the records have something
for it:

1. Warnings (first, so nobody reads a number without them): unusable lines and files (with the schema versions
   understood), several devices, throttling, noise, cache-resident working sets, non-random inputs, failed and skipped
   cases with their reasons (:func:`truepeak.report.export.report_warnings`).
2. Per device: the device and its environment; spec against measured peaks per format (dense and 2:4-sparse
   labelled, the peak at the measured SM clock; :func:`truepeak.report.export.peak_rows`) as a table and a chart; the
   roofline with the measured points of each format (ceilings from the catalog, or from the records where the device
   is not in the catalog, e.g. a CPU whose memory ceiling is its measured copy; one series per format and fp8/int8
   scale layout: ``fp8_e4m3 (per-tensor)``, ``fp8_e4m3 (per-row)``); memory bandwidth; efficiency against M in the
   decode regime.
3. MoE expert layer (``moe_experts`` records): % of read bandwidth against tokens per expert, one line per backend.
4. Collectives (``collective`` records): algbw and busbw against message size; the fitted latency-bandwidth model
   (``collective_fit`` records).
5. Serving (``serving`` records, :mod:`truepeak.report.serve`): per server and request shape, the levels' table and
   tokens/s and TPOT against concurrency.
6. Every record, one table per kind (:func:`truepeak.report.export.kind_table`); a kind this truepeak does not know
   gets a plain table of its fields, so a new kind never breaks the report.

Tables state their own units below them (:func:`truepeak.report.export.units_footer`: TFLOPS and the DENSE peak for
GEMMs and copies, nccl-tests' algbw/busbw, S and µs for collectives). A format cell (class ``fmt``) never wraps: CSS
``white-space: nowrap`` keeps ``fp8_e4m3 (per-tensor)`` on one line.

Entry points: :func:`html_report` (records -> HTML text), :func:`write_html` (to a file) and
:func:`write_html_report` (``results.jsonl`` or a run folder -> ``report.html`` beside it; what ``truepeak run``
calls).
"""

from __future__ import annotations

import datetime as _dt
import os
from collections.abc import Iterable, Sequence
from html import escape
from pathlib import Path
from typing import Any

import truepeak
from truepeak.records import (CollectiveWorkload, CopyMetrics, Environment, GemmMetrics, GemmWorkload, GpuInfo,
                              MoeExpertsWorkload, Record)
from truepeak.report.export import RUN_KINDS, catalog_accelerator, kind_table, peak_rows, report_warnings
from truepeak.report.load import Results, accelerator_key, load_results, record_groups
from truepeak.report.table import format_label
from truepeak.units import DASH, UNITS_FOOTER, fmt_bandwidth, fmt_pct, fmt_rate, fmt_size

#: Kinds with a section of their own (the rest appear in "All records" only).
SECTION_KINDS = ("gemm", "membw", "moe_experts", "collective", "collective_fit", "serving")
#: Largest M counted as the decode regime (tokens per expert at decode).
DECODE_MAX_M = 256

CSS = """
:root { --fg:#1b1f24; --muted:#57606a; --line:#d0d7de; --bg:#ffffff; --warn:#9a6700; --warnbg:#fff8c5;
  --bad:#cf222e; --badbg:#ffebe9; --accent:#0969da; }
* { box-sizing: border-box; }
body { font: 14px/1.45 -apple-system, "Segoe UI", Helvetica, Arial, sans-serif; color: var(--fg); background: var(--bg);
  margin: 0 auto; max-width: 1180px; padding: 24px 28px 60px; }
h1 { font-size: 24px; margin: 0 0 4px; } h2 { font-size: 19px; margin: 32px 0 8px; border-bottom: 1px solid var(--line);
  padding-bottom: 4px; } h3 { font-size: 15px; margin: 22px 0 6px; }
.muted, .footer { color: var(--muted); } .footer { font-size: 12px; margin-top: 6px; }
table { border-collapse: collapse; margin: 8px 0; font-size: 12.5px; }
th, td { border: 1px solid var(--line); padding: 3px 7px; vertical-align: top; }
th { background: #f6f8fa; text-align: left; } td.num { text-align: right; font-variant-numeric: tabular-nums; }
td.fmt { white-space: nowrap; }
tr.skipped td { color: var(--muted); } tr.failed td { color: var(--bad); }
.scroll { overflow-x: auto; }
figure.chart { margin: 10px 0 18px; } figure.chart svg { max-width: 100%; height: auto; display: block; }
figcaption { color: var(--muted); font-size: 12px; margin-top: 4px; }
.warnings { border: 1px solid #d4a72c; background: var(--warnbg); border-radius: 6px; padding: 6px 14px; }
.warnings li { margin: 4px 0; } .warnings .cat { font-weight: 600; color: var(--warn); text-transform: uppercase;
  font-size: 11px; margin-right: 6px; } .warnings li.bad .cat { color: var(--bad); }
details > summary { cursor: pointer; color: var(--accent); } details ul { font-size: 12.5px; }
dl.kv { display: grid; grid-template-columns: max-content 1fr; gap: 2px 14px; margin: 6px 0; }
dl.kv dt { color: var(--muted); } dl.kv dd { margin: 0; }
.tag { display: inline-block; border-radius: 4px; padding: 0 5px; font-size: 11px; background: #ddf4ff; }
.tag.sparse { background: #eeeeee; color: var(--muted); }
"""


# -- small HTML helpers ------------------------------------------------------------------------------------------------
def _e(text: Any) -> str:
    return escape("" if text is None else str(text), quote=True)


#: Headers of the columns whose cells stay on one line (class ``fmt``, CSS ``white-space: nowrap``): a format label
#: such as ``fp8_e4m3 (per-tensor)`` must not wrap at its hyphen or space.
NOWRAP_HEADERS = frozenset({"format"})


def _table(headers: Sequence[str], rows: Iterable[Sequence[str]], numeric: Sequence[bool] | None = None,
           row_classes: Sequence[str] | None = None) -> str:
    numeric = list(numeric) if numeric is not None else [False] * len(headers)
    classes = ['num' if numeric[j] else 'fmt' if h in NOWRAP_HEADERS else '' for j, h in enumerate(headers)]
    out = ['<div class="scroll"><table><thead><tr>', *(f"<th>{_e(h)}</th>" for h in headers), "</tr></thead><tbody>"]
    for i, row in enumerate(rows):
        cls = f' class="{_e(row_classes[i])}"' if row_classes and row_classes[i] else ""
        out.append(f"<tr{cls}>" + "".join(
            f'<td class="{classes[j]}">{_e(c)}</td>' if classes[j] else f"<td>{_e(c)}</td>"
            for j, c in enumerate(row)) + "</tr>")
    out.append("</tbody></table></div>")
    return "".join(out)


def _figure(svg: str, name: str, caption: str) -> str:
    """An inline SVG chart (``svg`` is matplotlib's own markup, not user text; every label in it was escaped by
    matplotlib's SVG writer)."""
    return f'<figure class="chart" data-chart="{_e(name)}">{svg}<figcaption>{_e(caption)}</figcaption></figure>'


def _kv(pairs: Iterable[tuple[str, Any]]) -> str:
    items = [(k, v) for k, v in pairs if v not in (None, "", [], {})]
    if not items:
        return ""
    return '<dl class="kv">' + "".join(f"<dt>{_e(k)}</dt><dd>{_e(v)}</dd>" for k, v in items) + "</dl>"


def _ghz(hz: Any) -> str | None:
    return f"{hz / 1e9:.3f} GHz" if isinstance(hz, (int, float)) and hz else None


# -- sections ----------------------------------------------------------------------------------------------------------
def _warnings_section(records: Sequence[Record], problems: Sequence[Any]) -> str:
    warns = report_warnings(records, problems)
    if not warns:
        return '<h2 id="warnings">Warnings</h2><p class="muted">None: no throttling, noise, cache-resident working ' \
               "sets, failed or skipped cases in these records.</p>"
    items = []
    for w in warns:
        bad = w.category in ("input", "failed")
        detail = ""
        if w.items:
            shown = w.items[:200]
            more = f"<li>... and {len(w.items) - 200} more</li>" if len(w.items) > 200 else ""
            detail = ("<details><summary>show " + str(len(w.items)) + "</summary><ul>"
                      + "".join(f"<li>{_e(i)}</li>" for i in shown) + more + "</ul></details>")
        items.append(f'<li class="{"bad" if bad else ""}"><span class="cat">{_e(w.category)}</span>{_e(w.text)}'
                     f"{detail}</li>")
    return f'<h2 id="warnings">Warnings</h2><div class="warnings"><ul>{"".join(items)}</ul></div>'


def _device_section(name: str, records: Sequence[Record], acc: Any) -> str:
    env = (records[0].env if records else None) or Environment()
    gpu = env.gpu or GpuInfo()
    catalog = (f"{acc.name} ({acc.key}); efficiency is against its DENSE peaks" if acc is not None else
               "not in the truepeak catalog: peaks are estimates or absent")
    commands = list(dict.fromkeys(r.env.command_line for r in records if r.env is not None and r.env.command_line))
    stamps = sorted(r.timestamp for r in records if r.timestamp)
    versions = sorted({f"schema {r.source_schema}, method {r.methodology_version}" for r in records})
    cpu = env.device is not None and env.device.kind == "cpu"
    return "".join([
        "<h3>Device and environment</h3>",
        _kv([
            ("device", name), ("catalog entry", catalog),
            ("compute capability", env.compute_capability), ("SMs (cores on a CPU)", env.sm_count),
            ("memory", fmt_size(env.memory_bytes) if env.memory_bytes else None),
            ("L2 / last-level cache", fmt_size(env.l2_bytes) if env.l2_bytes else None),
            ("CPU clock" if cpu else "max SM clock", _ghz(env.max_sm_clock_hz)),
            ("power limit", f"{gpu.power_limit_w:.0f} W" if gpu.power_limit_w is not None else None),
            ("driver", gpu.driver), ("GPUs visible", gpu.count),
            ("torch", env.torch), ("CUDA (torch build)", env.cuda), ("NCCL", env.nccl),
            ("triton", env.triton), ("Python", env.python), ("platform", env.platform),
            ("CPU", env.cpu), ("truepeak", env.truepeak_version),
            ("records", f"{len(records)} ({', '.join(f'{k}: {n}' for k, n in _counts(records).items())})"),
            ("record versions", "; ".join(versions)),
            ("environment variables", ", ".join(f"{k}={v}" for k, v in env.env_vars.items())),
            ("command", " | ".join(commands)),
            ("measured (UTC)", f"{stamps[0]} to {stamps[-1]}" if stamps else None),
        ]),
    ])


def _counts(records: Sequence[Record]) -> dict[str, int]:
    out: dict[str, int] = {}
    for r in records:
        out[r.kind] = out.get(r.kind, 0) + 1
    return out


def _peaks_section(records: Sequence[Record], acc: Any) -> str:
    rows = peak_rows(records, acc)
    if not rows:
        return ""
    cells, classes = [], []
    for r in rows:
        sparse = DASH
        if r["sparse"]:
            sparse = fmt_rate(r["sparse"]) + ("" if r["sparse_published"] else " (2x dense)")
        clock = f"{r['clock_hz'] / 1e6:.0f}" if r["clock_hz"] else DASH
        dense = fmt_rate(r["dense"]) + (" (estimated)" if r["estimated"] else "") if r["dense"] else DASH
        cells.append([r.get("label") or r["format"], r["mode"] or DASH, dense, sparse, fmt_rate(r["measured"]),
                      fmt_pct(r["dense_fraction"], sign=False), clock, fmt_rate(r["at_clock"]),
                      fmt_pct(r["at_clock_fraction"], sign=False), r["shape"] or (r["reason"] or DASH)])
        classes.append("" if r["measured"] else "skipped")
    table = _table(["format", "mode", "spec dense TFLOPS", "spec 2:4 sparse TFLOPS (display only)", "best measured",
                    "% of dense", "SM clock (MHz)", "dense peak at that clock", "% of it", "shape (MxNxK) / reason"],
                   cells, [False, False, True, True, True, True, True, True, True, False], classes)
    chart_rows = [r for r in rows if r["measured"] or r["dense"]]
    chart = ""
    if any(r["measured"] for r in chart_rows):
        from truepeak.report import plots

        chart = _figure(plots.peaks_chart(chart_rows), "peaks",
                        "Per format: the 2:4-sparse datasheet rate (hatched; marketing, never an efficiency "
                        "denominator), the dense spec peak, the dense peak at the SM clock the best record ran at, and "
                        "the best measured rate.")
    return ("<h3>Spec against measured peaks per format</h3>" + table
            + f'<p class="footer">{_e(UNITS_FOOTER)}. The peak at the measured clock is FLOP/clk/SM x SMs x the '
              "median SM clock sampled while timing."
            + (" Best measured of a truepeak peak search: the best of its re-measured shapes (longer budgets), not "
               "the maximum over every first-pass trial, which noise biases upward." if any(r.get("remeasured")
                                                                                          for r in rows) else "")
            + "</p>" + chart)


def _intensity(rec: Record) -> float | None:
    """A GEMM record's arithmetic intensity (FLOP/B): its workload's ``intensity``, else ``flop / min_bytes``, else
    computed from M, N, K and the format (:class:`truepeak.roofline.Gemm`); None for other kinds."""
    w = rec.workload
    if not isinstance(w, GemmWorkload):
        return None
    if w.intensity is not None:
        return w.intensity
    if w.flop and w.min_bytes:
        return w.flop / w.min_bytes
    if not rec.format:
        return None
    try:
        from truepeak.roofline import Gemm

        return Gemm(w.m, w.n, w.k, rec.format, w.out_format, w.scaling).intensity
    except Exception:
        return None


def _gemm_metrics(rec: Record) -> GemmMetrics | None:
    return rec.derived if isinstance(rec.derived, GemmMetrics) else None


def _roofline_section(name: str, records: Sequence[Record], acc: Any) -> str:
    gemms = [r for r in records if r.kind == "gemm" and r.ok and _gemm_metrics(r) and r.derived.flop_per_s
             and _intensity(r)]
    if not gemms:
        return ""
    points: dict[str, list[tuple[float, float, str]]] = {}
    ceilings: dict[str, float] = {}
    for r in gemms:
        fmt = str(r.format)
        # one series per format AND scale layout (fp8_e4m3 (per-tensor) / (per-row) / (block128)): they differ
        points.setdefault(format_label(r), []).append((_intensity(r), r.derived.flop_per_s, r.mode or ""))
        peak = None
        if acc is not None:
            try:
                peak = acc.dense_flops(fmt)
            except Exception:
                peak = None
        ceilings.setdefault(fmt, peak or r.derived.dense_peak_flop_per_s)
    bw = acc.bandwidth_bytes_per_s if acc is not None else None
    source = "catalog"
    if not bw:
        bw = next((r.derived.bandwidth_bytes_per_s for r in gemms if r.derived.bandwidth_bytes_per_s), None)
        source = "measured copy" if bw else ""
    bw_label = f"{fmt_bandwidth(bw)} GB/s ({source})" if bw else ""
    from truepeak.report import plots

    svg = plots.roofline_chart(points, {k: v for k, v in ceilings.items() if v}, bw, title=f"Roofline: {name}",
                               bandwidth_label=bw_label)
    return "<h3>Roofline</h3>" + _figure(
        svg, "roofline",
        "Log-log roofline: each point is a measured GEMM at its arithmetic intensity (FLOP per byte of the minimum "
        "traffic: A, B read once, C written once, in its format); the slanted line is the memory ceiling "
        f"({bw_label or 'unknown'}), the dashed lines the dense compute ceiling of each format. A point's % of "
        "roofline is its distance below the lower of the two.")


def _decode_section(records: Sequence[Record]) -> str:
    series: dict[str, list[tuple[float, float | None, float | None]]] = {}
    formats: dict[str, str] = {}
    modes = {r.mode for r in records if r.kind == "gemm" and r.ok}
    for r in records:
        w, d = r.workload, _gemm_metrics(r)
        if (not isinstance(w, GemmWorkload) or not r.ok or d is None or w.m > DECODE_MAX_M
                or w.origin in ("square", "format probe") or (w.origin or "").startswith("peak")):
            continue
        key = f"{format_label(r)} N={w.n} K={w.k}" + (f" {r.mode}" if len(modes) > 1 else "")
        formats[key] = str(r.format)
        series.setdefault(key, []).append((float(w.m), d.dense_fraction, d.roofline_fraction))
    series = {k: v for k, v in series.items() if len(v) >= 2}
    if not series:
        return ""
    from truepeak.report import plots

    return "<h3>Decode regime: efficiency against M</h3>" + _figure(
        plots.decode_chart(series, formats), "decode",
        f"GEMMs with M <= {DECODE_MAX_M} (tokens per expert at decode) at model (N, K): against the dense peak they "
        "look hopeless; against the roofline (memory-bound here: the weights must be streamed) they show how close "
        "to the bandwidth they run.")


def _bandwidth_section(records: Sequence[Record]) -> str:
    copies = [r for r in records if r.kind == "membw"]
    if not copies:
        return ""
    items = []
    for r in copies:
        d = r.derived
        if not r.ok or not isinstance(d, CopyMetrics):
            items.append(f"<li>{_e(r.workload.name)}: {_e(r.status)}: {_e(r.reason)}</li>")
            continue
        spec = d.bandwidth_bytes_per_s
        tail = (f" = {fmt_pct(d.bandwidth_fraction)} of the catalog's {fmt_bandwidth(spec)} GB/s" if spec
                else " (no catalog bandwidth: this measured copy is the roofline's memory ceiling)")
        items.append(f"<li>{_e(r.workload.name)} ({_e(r.mode)}): <b>{_e(fmt_bandwidth(d.bytes_per_s))} "
                     f"GB/s</b> counting read + write{_e(tail)}</li>")
    return "<h3>Memory bandwidth</h3><ul>" + "".join(items) + "</ul>"


def _group(records: Sequence[Record], key: Any) -> dict[tuple, list[Record]]:
    """``records`` grouped by ``key(record)`` (a tuple of strings), in first-seen order."""
    out: dict[tuple, list[Record]] = {}
    for r in records:
        out.setdefault(key(r), []).append(r)
    return out


def _moe_section(records: Sequence[Record]) -> str:
    moe = [r for r in records if isinstance(r.workload, MoeExpertsWorkload)]
    if not moe:
        return ""
    parts = ['<h2 id="moe">MoE expert layer at decode</h2>']
    for key, recs in _group(moe, lambda r: (r.workload.model, r.workload.layout, r.workload.routing)).items():
        dev = recs[0].device_name
        title = " ".join(k for k in key if k) or "MoE experts"
        series: dict[str, list[tuple[float, float]]] = {}
        multi_mode = len({r.mode for r in recs}) > 1
        for r in recs:
            x = r.workload.tokens_per_expert
            y = r.derived.read_bandwidth_fraction if r.derived is not None else None
            if not r.ok or y is None:
                continue
            name = " ".join(str(p) for p in (r.backend, r.format, r.mode if multi_mode else None) if p)
            series.setdefault(name, []).append((x, y))
        parts.append(f"<h3>{_e(title)} on {_e(dev)}</h3>")
        if series:
            from truepeak.report import plots

            parts.append(_figure(plots.moe_chart(series, title=f"{title}: % of read bandwidth"), "moe",
                                 "The fraction of the read bandwidth measured in the same run that each backend "
                                 "reaches while streaming the weights of the experts that received tokens (packed "
                                 "values + scales); 100 % is the memory roofline."))
        else:
            parts.append('<p class="muted">No ok records with tokens per expert and % of read bandwidth.</p>')
    return "".join(parts)


def _collective_section(records: Sequence[Record]) -> str:
    coll = [r for r in records if isinstance(r.workload, CollectiveWorkload)]
    fits = [r for r in records if r.kind == "collective_fit"]
    if not coll and not fits:
        return ""
    parts = ['<h2 id="collectives">Collectives</h2>']
    for key, recs in _group(coll, lambda r: (str(r.workload.n_ranks), r.workload.dtype)).items():
        series: dict[str, list[tuple[float, float | None, float | None, float | None]]] = {}
        for r in recs:
            d = r.derived
            if not r.ok or d is None:
                continue
            name = " ".join(str(p) for p in (r.workload.op, r.mode) if p)
            series.setdefault(name, []).append((float(r.workload.bytes), r.time_s, d.algbw_bytes_per_s,
                                                d.busbw_bytes_per_s))
        ranks, dtype = key
        title = f"{recs[0].device_name}" + (f", {ranks} ranks" if ranks else "") + (f", {dtype}" if dtype else "")
        parts.append(f"<h3>{_e(title)}</h3>")
        if series:
            from truepeak.report import plots

            parts.append(_figure(plots.collective_chart(series, title=title), "collective",
                                 "Time per call (the latency that decode's small messages see), algbw = message bytes / time, and "
                                 "busbw = algbw x the op's bus factor (all_reduce "
                                 "2(n-1)/n, all_gather and reduce_scatter (n-1)/n, all_to_all (n-1)/n), nccl-tests' "
                                 "definitions, so busbw is comparable with link bandwidth. Dashed: CUDA-graph mode."))
    if fits:
        t = kind_table("collective_fit", fits)
        parts.append("<h3>Latency-bandwidth fit: time = α + bytes x bus factor / busbw</h3>"
                     + _table(t.headers, t.rows, t.numeric) + f'<p class="footer">{_e(t.footer)}</p>')
    return "".join(parts)


def _all_records_section(records: Sequence[Record]) -> str:
    parts = ['<h2 id="records">All records</h2>']
    for kind, device, recs in record_groups(records):
        t = kind_table(kind, recs)
        known = "" if kind in SECTION_KINDS else " (a record kind this truepeak has no section for: its fields)"
        on = f" on {device}" if device else ""
        parts.append(f"<details{' open' if len(recs) <= 12 else ''}><summary>{_e(kind)}{_e(on)}: {len(recs)} record(s)"
                     f"{_e(known)}</summary>"
                     + _table(t.headers, t.rows, t.numeric, [str(r.status) for r in recs])
                     + f'<p class="footer">{_e(t.footer)}</p></details>')
    return "".join(parts)


def _device_groups(records: Sequence[Record]) -> dict[str, list[Record]]:
    out: dict[str, list[Record]] = {}
    for r in records:
        out.setdefault(r.device_name, []).append(r)
    return out


def html_report(data: Results | Sequence[Record], *, title: str | None = None, notice: str | None = None) -> str:
    """Render records as one self-contained HTML page (see the module docstring for the sections).

    Args:
        data: a :class:`~truepeak.report.load.Results` (its problems become warnings) or a list of records.
        title: the page title (default ``"truepeak report: <devices>"``).
        notice: a line shown in a warning box under the title (an interrupted run's "Interrupted after N of M
            cases; continue with: ...").

    Returns:
        The page as text (UTF-8 when written).
    """
    if isinstance(data, Results):
        records, problems, files = data.records, data.problems, data.files
    else:
        records, problems, files = list(data), [], []
    groups = _device_groups(records)
    title = title or "truepeak report: " + (", ".join(groups) if groups else "no records")
    body = [f"<h1>{_e(title)}</h1>",
            f'<div class="warnings" id="notice"><p><strong>{_e(notice)}</strong></p></div>' if notice else "",
            f'<p class="muted">{len(records)} record(s)'
            + (f" from {_e(', '.join(files))}" if files else "")
            + f"; rendered by truepeak {_e(truepeak.__version__)} at "
            + _e(_dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")) + ". "
            + _e(UNITS_FOOTER if any(r.kind in RUN_KINDS for r in records) else
                 "GB/s = 1e9 B/s, TFLOPS = 1e12 FLOP/s (decimal); each table states its units below it") + ".</p>",
            _warnings_section(records, problems)]
    for name, recs in groups.items():
        run = [r for r in recs if r.kind in RUN_KINDS]
        if not run:
            continue
        acc = catalog_accelerator(accelerator_key(recs[0]))
        body.append(f"<h2>{_e(name)}</h2>")
        body.append(_device_section(name, recs, acc))
        body.append(_peaks_section(run, acc))
        body.append(_roofline_section(name, run, acc))
        body.append(_bandwidth_section(run))
        body.append(_decode_section(run))
    body.append(_moe_section(records))
    body.append(_collective_section(records))
    from truepeak.report.serve import serving_section

    body.append(serving_section(records))
    for name, recs in groups.items():  # devices with no GEMM or copy records still get their environment
        if not any(r.kind in RUN_KINDS for r in recs):
            body.append(f"<h2>{_e(name)}</h2>" + _device_section(name, recs, catalog_accelerator(
                accelerator_key(recs[0]))))
    body.append(_all_records_section(records))
    return ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            '<meta name="viewport" content="width=device-width, initial-scale=1">'
            '<link rel="icon" href="data:,">'
            f"<title>{_e(title)}</title><style>{CSS}</style></head><body>\n"
            + "\n".join(b for b in body if b) + "\n</body></html>\n")


def write_html(data: Results | Sequence[Record], path: str | os.PathLike[str], *, title: str | None = None,
               notice: str | None = None) -> Path:
    """Write :func:`html_report` to ``path`` (UTF-8) and return the path.

    Raises:
        OSError: the file cannot be written.
    """
    p = Path(path)
    p.write_text(html_report(data, title=title, notice=notice), encoding="utf-8")
    return p


def write_html_report(source: str | os.PathLike[str], html_path: str | os.PathLike[str] | None = None, *,
                      notice: str | None = None) -> Path:
    """Render a results file, or a run folder holding ``results.jsonl``, to ``report.html`` beside it (or
    ``html_path``) and return its path. What ``truepeak run`` calls after measuring (``notice``: an interrupted
    run's line, shown under the title).

    Raises:
        TruepeakError: the results file cannot be read, or holds no valid record.
        OSError: the report cannot be written.
    """
    src = Path(source)
    jsonl = src / "results.jsonl" if src.is_dir() else src
    data = load_results([jsonl])
    data.require_records()
    return write_html(data, Path(html_path) if html_path is not None else jsonl.parent / "report.html", notice=notice)


def write_run_report(out_dir: str | os.PathLike[str], warn: Any = None, notice: str | None = None) -> Path | None:
    """:func:`write_html_report` for a run folder that never raises: a report must never cost a run its results.
    On any failure (matplotlib missing, a disk error, a bug) ``warn`` (default: nothing) gets one line saying so and
    None is returned; the records stay in ``results.jsonl`` for ``truepeak report`` to render later. ``notice``: an
    interrupted run's line, shown under the title (the report then holds what finished)."""
    try:
        return write_html_report(out_dir, notice=notice)
    except Exception as exc:  # noqa: BLE001 - by design: the records are safe, the report is a convenience
        if warn is not None:
            warn(f"could not write report.html ({type(exc).__name__}: {exc}); the records are safe: render them later "
                 f"with `truepeak report {Path(out_dir) / 'results.jsonl'}`")
        return None


__all__ = ["NOWRAP_HEADERS", "html_report", "write_html", "write_html_report", "write_run_report", "CSS", "SECTION_KINDS", "DECODE_MAX_M"]
