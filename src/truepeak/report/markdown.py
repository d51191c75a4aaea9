"""``summary.md`` of a ``truepeak run``: device, environment, method, bandwidth, best TFLOPS per format, full table
(an interrupted run's: its "Interrupted after N of M cases; continue with: ..." line first, under the title).

Rendered from records alone (and the detected device when at hand); never measures. The method section states what
the records say: the budgets and settling GEMMs of their ``run_config``, the CUDA-graph threshold and how many cases
used graphs, the rotation sets, the input kind and the correctness tolerances each record was checked against. The
table cells come from :func:`truepeak.report.table.table_rows`, so summary.md and the terminal table agree. Numbers are
formatted by :mod:`truepeak.units`.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from truepeak.records import (CopyMetrics, DeviceSummary, Environment, GemmMetrics, GemmWorkload, MeasurementSummary,
                              Record)
from truepeak.report.table import NUMERIC, columns, format_label, scaling_of, table_rows
from truepeak.units import DASH, fmt_bandwidth, fmt_pct, fmt_rate, fmt_size, fmt_time


def _cell(text: str) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def markdown_table(records: Sequence[Record]) -> str:
    """The full results table as GitHub Markdown, with the units footer below it."""
    rows, meta = table_rows(records)
    cols = columns(meta)
    lines = ["| " + " | ".join(h for _, h in cols) + " |",
             "| " + " | ".join("---:" if cid in NUMERIC else "---" for cid, _ in cols) + " |"]
    for row in rows:
        lines.append("| " + " | ".join(_cell(row[cid]) for cid, _ in cols) + " |")
    lines.append("")
    lines.append(meta["footer"] + ".")
    return "\n".join(lines)


def best_per_format(records: Sequence[Record]) -> list[Record]:
    """For each GEMM (format, scale layout, mode) with an ok record: the record with the highest FLOP/s, in first-seen
    order. Re-measured records of a ``truepeak peak`` search (``search.phase == "remeasure"``), when present, are the
    only candidates of their group (the maximum over first-pass trials is biased upward: the winner's curse)."""
    from truepeak.report.export import better_peak

    best: dict[tuple[Any, str, str], Record] = {}
    for rec in records:
        if rec.kind != "gemm" or not rec.ok or not isinstance(rec.derived, GemmMetrics):
            continue
        key = (rec.format, scaling_of(rec) or "", rec.mode or "")
        if key not in best or better_peak(best[key], rec):
            best[key] = rec
    return list(best.values())


def _size(n: Any) -> str:
    return fmt_size(n) if isinstance(n, (int, float)) and n else "unknown"


def _ghz(hz: Any) -> str:
    return f"{hz / 1e9:.3f} GHz" if isinstance(hz, (int, float)) and hz else "unknown"


def _run_config(records: Sequence[Record]) -> dict[str, Any]:
    """The run's settings: the ``run_config`` of its first record that has one (all records of a run share it)."""
    return next((dict(r.run_config) for r in records if r.run_config), {})


def _measured(records: Sequence[Record], kind: str = "gemm") -> list[MeasurementSummary]:
    """The measurements of the ``kind`` records that were timed."""
    return [r.measurement for r in records if r.kind == kind and isinstance(r.measurement, MeasurementSummary)]


def summary_markdown(records: Sequence[Record], device: Any = None, notice: str | None = None) -> str:
    """Build summary.md's text from the records.

    Args:
        records: the run's records (one per case; see :func:`truepeak.records.latest`).
        device: the :class:`~truepeak.hardware.detect.DeviceInfo`, or None (then read from the records'
            ``env.device``).
        notice: a line shown in bold under the title, before anything else: an interrupted run's
            :func:`~truepeak.report.table.interrupted_line`, so a partial summary never reads like a finished one.
    """
    env = records[0].env if records and records[0].env is not None else Environment()
    if device is not None and hasattr(device, "to_dict"):
        env = env.replace(device=DeviceSummary.from_dict(device.to_dict(), "device"))
    dev = env.device or DeviceSummary()
    name = env.device_name or "unknown device"
    quick = bool(_run_config(records).get("quick"))
    sections = [
        [f"# truepeak run: {name}" + (" (quick)" if quick else "")],
        [f"**{notice}**"] if notice else [],
        _device_section(name, env),
        _environment_section(env, records),
        _method_section(records, dev),
        _bandwidth_section(records),
        _best_section(records, dev),
        _results_section(records),
    ]
    return "\n".join(line for section in sections if section for line in [*section, ""]).rstrip("\n") + "\n"


def _device_section(name: str, env: Environment) -> list[str]:
    out = ["## Device", ""]
    dev, gpu = env.device or DeviceSummary(), env.gpu
    if dev.kind == "cuda" or gpu:
        out.append(f"- GPU: {name}, compute capability {env.compute_capability}, {env.sm_count} SMs, "
                   f"L2 {_size(env.l2_bytes)}, memory {_size(env.memory_bytes)}, "
                   f"max SM clock {_ghz(env.max_sm_clock_hz)}")
        if gpu is not None and gpu.power_limit_w:
            out.append(f"- Power limit: {gpu.power_limit_w:.0f} W; driver {gpu.driver}")
    else:
        out.append(f"- CPU: {name}, {dev.sm_count} cores, last-level cache {_size(dev.l2_bytes)}, "
                   f"memory {_size(dev.memory_bytes)}, clock {_ghz(dev.max_sm_clock_hz)}")
    if dev.matched_catalog:
        out.append(f"- Catalog entry: {dev.accelerator_name} (`{dev.accelerator}`); efficiency is against "
                   "its DENSE peaks")
    elif dev.kind == "cuda":
        out.append("- Not in the truepeak catalog: measured, but no peaks, so no efficiency figures")
    out += [f"- Note: {note}" for note in dev.notes]
    return out


def _environment_section(env: Environment, records: Sequence[Record]) -> list[str]:
    out = ["## Environment", ""]
    for label, value in (("truepeak", env.truepeak_version), ("Python", env.python), ("torch", env.torch),
                         ("CUDA (torch build)", env.cuda), ("cuDNN", env.cudnn), ("triton", env.triton),
                         ("Platform", env.platform)):
        if value:
            out.append(f"- {label}: {value}")
    if env.env_vars:
        out.append("- Environment variables: " + ", ".join(f"`{k}={v}`" for k, v in env.env_vars.items()))
    commands = list(dict.fromkeys(r.env.command_line for r in records if r.env is not None and r.env.command_line))
    if len(commands) > 1:  # a resumed run: each command that wrote some of these records, in order
        out.append("- Commands, in order: " + "; then ".join(f"`{c}`" for c in commands))
    elif commands or env.command_line:
        out.append(f"- Command: `{commands[0] if commands else env.command_line}`")
    stamps = sorted(r.timestamp for r in records if r.timestamp)
    if stamps:
        out.append(f"- Measured: {stamps[0]} to {stamps[-1]} (UTC)")
    return out


def _method_section(records: Sequence[Record], dev: DeviceSummary) -> list[str]:
    config = _run_config(records)
    modes = sorted({r.mode for r in records if r.mode})
    out = ["## Method", ""]
    if "sustained" in modes:
        out.append("- Mode: **sustained**: back-to-back launches, timed with one CUDA event pair per sample"
                   f"{_graph_text(records, config)}, NVML clock/power sampled while timing")
    if "burst" in modes:
        gaps = sorted({r.measurement.burst_gap_s for r in records if r.mode == "burst"
                       and isinstance(r.measurement, MeasurementSummary) and r.measurement.burst_gap_s is not None})
        gap = f"a {fmt_time(gaps[0])} " if len(gaps) == 1 else "an "
        out.append(f"- Mode: **burst**: {gap}idle gap (`torch.cuda._sleep`, outside the event pair) before each timed "
                   "sample, so clocks recover between launches (mamf-finder's setting); higher than sustained on a "
                   "power-capped GPU")
    if "cpu" in modes:
        out.append("- Mode: **cpu**: host timer (`time.perf_counter`) around back-to-back calls")
    out += _warmup_lines(config)
    out += _rotation_lines(records, dev)
    out += _input_lines(records)
    out += _correctness_lines(records)
    out.append("- Statistic: median per call after dropping a leading warm-up outlier (\"steady median\")")
    return out


def _graph_text(records: Sequence[Record], config: dict) -> str:
    """`` (CUDA-graph replays for kernels under 50 µs: 41 of 120 cases)`` from the run's threshold and the records."""
    threshold = config.get("graph_threshold_s")
    timed = _measured(records)
    if not threshold or not timed:
        return ""
    graphs = sum(1 for m in timed if m.graph)
    return f" (CUDA-graph replays for kernels under {fmt_time(threshold)}: {graphs} of {len(timed)} GEMM cases)"


def _warmup_lines(config: dict) -> list[str]:
    b = config.get("budget_settings")
    if not isinstance(b, dict):
        return []
    per_case = (f"{b['warmup_s']:g} s warm-up + {b['budget_s']:g} s timed (decode shapes), "
                f"{b['large_warmup_s']:g} s + {b['large_budget_s']:g} s (large squares), "
                f"{b['copy_warmup_s']:g} s + {b['copy_budget_s']:g} s (copy)")
    settle = config.get("settle")
    if isinstance(settle, dict):
        return [f"- Warm-up: {settle['seconds']:g} s of back-to-back {settle['format']} {settle['shape']} GEMMs once at "
                f"the start (clock and power settle), then per case {per_case}"]
    return [f"- Warm-up per case: {per_case}"]


def _rotation_lines(records: Sequence[Record], dev: DeviceSummary) -> list[str]:
    plans = [r.rotation for r in records if r.rotation is not None]
    if not plans:
        return []
    sets = sorted({p.n_sets for p in plans})
    count = f"{sets[0]}" if len(sets) == 1 else f"{sets[0]} to {sets[-1]}"
    l2 = dev.l2_bytes or plans[0].l2_bytes
    out = [f"- Rotation: {count} input sets (A, B, C) per GEMM, so that they total at least 2x the {_size(l2)} cache "
           "the device reports; call i uses set i mod n"]
    capped = [p for p in plans if p.capped]
    if capped:
        out.append(f"- Rotation capped by memory in {len(capped)} case(s) (the note column says which): "
                   f"{capped[0].note}")
    return out


def _input_lines(records: Sequence[Record]) -> list[str]:
    kinds = sorted({m.input_kind for m in _measured(records) if m.input_kind})
    if not kinds:
        return []
    if kinds == ["random"]:
        return ["- Inputs: uniform random in [-1, 1] (int8: integers in [-128, 127]), seeded; never zeros"]
    return [f"- Inputs: {', '.join(kinds)} (anything but random data is not a peak; see "
            "docs/method.md, 'Random inputs')"]


def _correctness_lines(records: Sequence[Record]) -> list[str]:
    tolerances: dict[str, float] = {}
    checked = passed = 0
    for rec in records:
        c = rec.correctness
        if rec.kind != "gemm" or c is None or c.tolerance is None:
            continue
        tolerances.setdefault(rec.format, c.tolerance)
        checked += 1
        passed += bool(c.passed)
    if not checked:
        return []
    tols = ", ".join(f"{fmt} {'exact' if tol == 0 else f'{tol:g}'}" for fmt, tol in tolerances.items())
    return [f"- Correctness: every GEMM's output checked against a float64 reference of the same inputs before timing "
            f"(relative Frobenius error; tolerances {tols}); {passed} of {checked} passed"]


def _bandwidth_section(records: Sequence[Record]) -> list[str]:
    out = ["## Memory bandwidth", ""]
    copies = [r for r in records if r.kind == "membw"]
    for rec in copies:
        d = rec.derived
        label = rec.workload.label
        if not rec.ok or not isinstance(d, CopyMetrics):
            out.append(f"- {label}: {rec.status}: {rec.reason}")
            continue
        spec = d.bandwidth_bytes_per_s
        tail = (f" = {fmt_pct(d.bandwidth_fraction)} of the catalog's {fmt_bandwidth(spec)} GB/s" if spec else
                " (no catalog bandwidth for this device: this measured value is the roofline's memory ceiling)")
        out.append(f"- {label}: **{fmt_bandwidth(d.bytes_per_s)} GB/s** counting read + write{tail}")
    if not copies:
        out.append("- not measured")
    return out


def _on_cpu(records: Sequence[Record], dev: DeviceSummary) -> bool:
    """Whether the run measured a CPU: the device says so, or (no device) every timed record is in ``cpu`` mode."""
    if dev.kind:
        return dev.kind == "cpu"
    modes = {r.mode for r in records if r.mode}
    return modes == {"cpu"}


def _best_section(records: Sequence[Record], dev: DeviceSummary | None = None) -> list[str]:
    clock = "clock (MHz)" if _on_cpu(records, dev or DeviceSummary()) else "SM clock (MHz)"  # a CPU has cores
    bests = best_per_format(records)
    several = len({r.mode for r in bests if r.mode}) > 1  # --mode both: one row per format and mode
    out = ["## Best measured TFLOPS per format", "",
           f"| format |{' mode |' if several else ''} best TFLOPS | % of dense peak | dense peak (TFLOPS) | "
           f"shape (MxNxK) | {clock} | % of peak at that clock |",
           f"| --- |{' --- |' if several else ''} ---: | ---: | ---: | --- | ---: | ---: |"]
    for rec in bests:
        d = rec.derived
        peak = d.dense_peak_flop_per_s
        clk = d.sm_clock_hz
        est = " (estimated)" if d.peak_estimated else ""
        mode = f" {rec.mode or DASH} |" if several else ""
        out.append(f"| {format_label(rec)} |{mode} {fmt_rate(d.flop_per_s)} | "
                   f"{fmt_pct(d.dense_fraction, sign=False)} | "
                   f"{fmt_rate(peak) + est if peak else DASH} | {rec.workload.label or DASH} | "
                   f"{f'{clk / 1e6:.0f}' if clk else DASH} | {fmt_pct(d.at_clock_fraction, sign=False)} |")
    probes = [r for r in records if r.kind == "gemm" and r.status == "skipped"
              and isinstance(r.workload, GemmWorkload) and r.workload.origin == "format probe"]
    if probes:
        out.append("")
        out += [f"- {r.format}: skipped: {r.reason}" for r in sorted(probes, key=lambda r: r.format or "")]
    return out


def _results_section(records: Sequence[Record]) -> list[str]:
    out = ["## All results", "", markdown_table(records)]
    failed = sum(1 for r in records if r.status == "failed")
    if failed:
        out += ["", f"{failed} case(s) failed; the reasons are in the note column and in results.jsonl."]
    return out


def write_summary(records: Sequence[Record], path: str | os.PathLike, device: Any = None,
                  notice: str | None = None) -> Path:
    """Write :func:`summary_markdown` (with ``notice`` under the title) to ``path`` (UTF-8) and return the path.

    Raises:
        OSError: the file cannot be written.
    """
    p = Path(path)
    p.write_text(summary_markdown(records, device, notice), encoding="utf-8")
    return p


__all__ = ["summary_markdown", "write_summary", "markdown_table", "best_per_format"]


# -- `truepeak report --md`: every kind of record ----------------------------------------------------------------------
#: Items listed under one warning in Markdown before "... and N more".
MD_WARNING_ITEMS = 20


def _md_table(headers: Sequence[str], rows: Sequence[Sequence[str]], numeric: Sequence[bool]) -> list[str]:
    out = ["| " + " | ".join(_cell(h) for h in headers) + " |",
           "| " + " | ".join("---:" if n else "---" for n in numeric) + " |"]
    out += ["| " + " | ".join(_cell(c) for c in row) + " |" for row in rows]
    return out


def report_markdown(data: Any) -> str:
    """The Markdown report of ``truepeak report --md``: every kind of record, from one or more results files.

    Sections: title and files; warnings (:func:`truepeak.report.export.report_warnings`: unusable lines with the
    schema versions understood, several devices, throttling, noise, cache-resident working sets, failed and skipped
    cases); per device with GEMM or copy records, spec against measured peaks per format
    (:func:`truepeak.report.export.peak_rows`; the 2:4-sparse rate labelled display only) and memory bandwidth; then
    one table per record kind (:func:`truepeak.report.export.kind_table`, the same cells as the HTML report). A kind
    this truepeak does not know gets a plain table of its fields.

    Args:
        data: a :class:`truepeak.report.load.Results` or a list of :class:`~truepeak.records.Record`.
    """
    from truepeak.report.export import RUN_KINDS, catalog_accelerator, kind_table, peak_rows, report_warnings
    from truepeak.report.load import Results, accelerator_key, record_groups

    if isinstance(data, Results):
        records, problems, files = data.records, data.problems, data.files
    else:
        records, problems, files = list(data), [], []
    devices = list(dict.fromkeys(r.device_name for r in records))
    out = [f"# truepeak report: {', '.join(devices) if devices else 'no records'}", ""]
    out += [f"{len(records)} record(s)" + (f" from {', '.join(f'`{f}`' for f in files)}" if files else "") + ".", ""]
    warns = report_warnings(records, problems)
    out += ["## Warnings", ""]
    if not warns:
        out.append("None: no throttling, noise, cache-resident working sets, failed or skipped cases.")
    for w in warns:
        out.append(f"- **{w.category}**: {w.text}")
        out += [f"  - {_cell(i)}" for i in w.items[:MD_WARNING_ITEMS]]
        if len(w.items) > MD_WARNING_ITEMS:
            out.append(f"  - ... and {len(w.items) - MD_WARNING_ITEMS} more")
    out.append("")
    for name in devices:
        recs = [r for r in records if r.device_name == name and r.kind in RUN_KINDS]
        if not recs:
            continue
        acc = catalog_accelerator(accelerator_key(recs[0]))
        out += [f"## {name}", ""]
        if acc is not None:
            out += [f"Catalog entry: {acc.name} (`{acc.key}`); efficiency is against its DENSE peaks.", ""]
        rows = peak_rows(recs, acc)
        if rows:
            cells = []
            for r in rows:
                sparse = DASH if not r["sparse"] else fmt_rate(r["sparse"]) + ("" if r["sparse_published"]
                                                                               else " (2x dense)")
                dense = fmt_rate(r["dense"]) + (" (estimated)" if r["estimated"] else "") if r["dense"] else DASH
                cells.append([r.get("label") or r["format"], r["mode"] or DASH, dense, sparse, fmt_rate(r["measured"]),
                              fmt_pct(r["dense_fraction"], sign=False),
                              f"{r['clock_hz'] / 1e6:.0f}" if r["clock_hz"] else DASH, fmt_rate(r["at_clock"]),
                              fmt_pct(r["at_clock_fraction"], sign=False), r["shape"] or r["reason"] or DASH])
            out += ["### Spec against measured peaks per format", ""]
            out += _md_table(["format", "mode", "spec dense TFLOPS", "spec 2:4 sparse TFLOPS (display only)",
                              "best measured", "% of dense", "SM clock (MHz)", "dense peak at that clock", "% of it",
                              "shape (MxNxK) / reason"], cells,
                             [False, False, True, True, True, True, True, True, True, False])
            out.append("")
        bw = _bandwidth_section(recs)
        if len(bw) > 2 and bw[2] != "- not measured":
            out += ["### " + bw[0][3:], *bw[1:], ""]
    for kind, device, recs in record_groups(records):
        t = kind_table(kind, recs)
        out += [f"## Records: {kind}{f' on {device}' if device else ''} ({len(recs)})", ""]
        out += _md_table(t.headers, t.rows, t.numeric)
        out += ["", t.footer + ".", ""]
    return "\n".join(out).rstrip("\n") + "\n"


__all__ += ["report_markdown"]
