"""``summary.md`` of a ``truepeak run``: device, environment, method, bandwidth, best TFLOPS per format, full table.

Rendered from records (and the detected device when at hand); never measures. The table cells come from
:func:`truepeak.report.table.table_rows`, so summary.md and the terminal table agree.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from truepeak.report.table import columns, fmt_gbps, fmt_pct, fmt_tflops, table_rows


def _cell(text: str) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def markdown_table(records: Sequence[dict]) -> str:
    """The full results table as GitHub Markdown, with the units footer below it."""
    rows, meta = table_rows(records)
    cols = columns(meta)
    lines = ["| " + " | ".join(h for _, h in cols) + " |",
             "| " + " | ".join("---:" if cid in ("time", "tflops", "gbps", "pct_dense", "pct_roofline", "pct_at_clock")
                               else "---" for cid, _ in cols) + " |"]
    for row in rows:
        lines.append("| " + " | ".join(_cell(row[cid]) for cid, _ in cols) + " |")
    lines.append("")
    lines.append(meta["footer"] + ".")
    return "\n".join(lines)


def best_per_format(records: Sequence[dict]) -> list[dict[str, Any]]:
    """For each GEMM format with an ok record: the record with the highest TFLOPS, in first-seen format order."""
    best: dict[str, dict] = {}
    for rec in records:
        if rec.get("kind") != "gemm" or rec.get("status") != "ok":
            continue
        t = (rec.get("derived") or {}).get("tflops")
        if t is None:
            continue
        fmt = rec.get("format")
        if fmt not in best or t > best[fmt]["derived"]["tflops"]:
            best[fmt] = rec
    return list(best.values())


def _mib(n: Any) -> str:
    return f"{n / 2**20:.0f} MiB" if isinstance(n, (int, float)) and n else "unknown"


def _ghz(hz: Any) -> str:
    return f"{hz / 1e9:.3f} GHz" if isinstance(hz, (int, float)) and hz else "unknown"


def summary_markdown(records: Sequence[dict], device: Any = None, *, env: Mapping[str, Any] | None = None,
                     budgets: Any = None, quick: bool = False) -> str:
    """Build summary.md's text.

    Args:
        records: the run's records (one per case; see :func:`truepeak.bench.run.latest_records`).
        device: the :class:`~truepeak.hardware.detect.DeviceInfo`, or None (then read from ``env["device"]``).
        env: the environment dict stored in the records (default: the first record's).
        budgets: the :class:`~truepeak.bench.run.Budgets` used, for the method section.
        quick: whether this was a quick run (said in the title).
    """
    env = dict(env or (records[0].get("env") if records else {}) or {})
    dev = device.to_dict() if device is not None and hasattr(device, "to_dict") else dict(env.get("device") or {})
    gpu = env.get("gpu") or {}
    name = dev.get("name") or gpu.get("name") or env.get("cpu") or "unknown device"
    out: list[str] = [f"# truepeak run: {name}" + (" (quick)" if quick else ""), ""]

    # -- device
    out += ["## Device", ""]
    if dev.get("kind") == "cuda" or gpu:
        out.append(f"- GPU: {name}, compute capability {dev.get('compute_capability') or gpu.get('compute_capability')}, "
                   f"{dev.get('sm_count') or gpu.get('sm_count')} SMs, L2 {_mib(dev.get('l2_bytes') or gpu.get('l2_bytes'))}, "
                   f"memory {_mib(dev.get('memory_bytes') or gpu.get('memory_bytes'))}, "
                   f"max SM clock {_ghz(dev.get('max_sm_clock_hz') or gpu.get('max_sm_clock_hz'))}")
        if gpu.get("power_limit_w"):
            out.append(f"- Power limit: {gpu['power_limit_w']:.0f} W; driver {gpu.get('driver')}")
    else:
        out.append(f"- CPU: {name}, {dev.get('sm_count')} cores, last-level cache {_mib(dev.get('l2_bytes'))}, "
                   f"memory {_mib(dev.get('memory_bytes'))}, clock {_ghz(dev.get('max_sm_clock_hz'))}")
    if dev.get("matched_catalog"):
        out.append(f"- Catalog entry: {dev.get('accelerator_name')} (`{dev.get('accelerator')}`); efficiency is against "
                   "its DENSE peaks")
    elif dev.get("kind") == "cuda":
        out.append("- Not in the truepeak catalog: measured, but no peaks, so no efficiency figures")
    for note in dev.get("notes") or []:
        out.append(f"- Note: {note}")
    out.append("")

    # -- environment
    out += ["## Environment", ""]
    for label, key in (("truepeak", "truepeak_version"), ("Python", "python"), ("torch", "torch"),
                       ("CUDA (torch build)", "cuda"), ("cuDNN", "cudnn"), ("triton", "triton"),
                       ("Platform", "platform")):
        if env.get(key):
            out.append(f"- {label}: {env[key]}")
    if env.get("env_vars"):
        out.append("- Environment variables: " + ", ".join(f"`{k}={v}`" for k, v in env["env_vars"].items()))
    if env.get("command_line"):
        out.append(f"- Command: `{env['command_line']}`")
    stamps = sorted(r.get("timestamp") for r in records if r.get("timestamp"))
    if stamps:
        out.append(f"- Measured: {stamps[0]} to {stamps[-1]} (UTC)")
    out.append("")

    # -- method
    modes = sorted({r.get("mode") for r in records if r.get("mode")})
    out += ["## Method", ""]
    if "sustained" in modes:
        out.append("- Mode: **sustained**: back-to-back launches, timed with one CUDA event pair per sample "
                   "(CUDA-graph replays for kernels under 50 µs), NVML clock/power sampled while timing")
    if "cpu" in modes:
        out.append("- Mode: **cpu**: host timer (`time.perf_counter`) around back-to-back calls")
    if budgets is not None:
        if getattr(budgets, "settle_s", 0):
            out.append(f"- Warm-up: {budgets.settle_s:g} s of back-to-back bf16 8192³ GEMMs once at the start "
                       "(clock and power settle), then per case "
                       f"{budgets.warmup_s:g} s warm-up + {budgets.budget_s:g} s timed (decode shapes), "
                       f"{budgets.large_warmup_s:g} s + {budgets.large_budget_s:g} s (large squares)")
        else:
            out.append(f"- Warm-up per case: {budgets.warmup_s:g} s + {budgets.budget_s:g} s timed "
                       f"({budgets.large_warmup_s:g} s + {budgets.large_budget_s:g} s for large squares)")
    l2 = dev.get("l2_bytes")
    out.append(f"- Rotation: enough input sets (A, B, C) that they total at least 2x the cache the device reports "
               f"({_mib(l2)}), at least 2; call i uses set i mod n")
    out.append("- Inputs: uniform random in [-1, 1] (int8: integers in [-128, 127]), seeded; never zeros")
    out.append("- Correctness: every GEMM's output checked against a float64 reference of the same inputs before timing "
               "(relative Frobenius error; tolerances fp32 1e-5, tf32 5e-3, bf16/fp16 2e-2, fp8 0.1, int8 exact)")
    out.append("- Statistic: median per call after dropping a leading warm-up outlier (\"steady median\")")
    out.append("")

    # -- bandwidth
    out += ["## Memory bandwidth", ""]
    copies = [r for r in records if r.get("kind") == "membw"]
    for rec in copies:
        d = rec.get("derived") or {}
        label = (rec.get("workload") or {}).get("label", "copy")
        if rec.get("status") == "ok":
            pct = d.get("pct_bandwidth")
            tail = (f" = {fmt_pct(pct)} % of the catalog's {fmt_gbps(d['gbps'] / pct)} GB/s" if pct else
                    " (no catalog bandwidth for this device: this measured value is the roofline's memory ceiling)")
            out.append(f"- {label}: **{fmt_gbps(d.get('gbps'))} GB/s** counting read + write{tail}")
        else:
            out.append(f"- {label}: {rec.get('status')}: {rec.get('reason')}")
    if not copies:
        out.append("- not measured")
    out.append("")

    # -- best per format
    out += ["## Best measured TFLOPS per format", "",
            "| format | best TFLOPS | % of dense peak | dense peak (TFLOPS) | shape (MxNxK) | SM clock (MHz) "
            "| % of peak at that clock |",
            "| --- | ---: | ---: | ---: | --- | ---: | ---: |"]
    for rec in best_per_format(records):
        d = rec["derived"]
        w = rec.get("workload") or {}
        peak = d.get("dense_peak_tflops")
        clk = d.get("sm_clock_hz")
        est = " (estimated)" if d.get("peak_estimated") else ""
        out.append(f"| {rec['format']} | {fmt_tflops(d.get('tflops'))} | {fmt_pct(d.get('pct_dense'))} | "
                   f"{fmt_tflops(peak) + est if peak else '-'} | {w.get('label', '-')} | "
                   f"{f'{clk / 1e6:.0f}' if clk else '-'} | {fmt_pct(d.get('pct_at_clock'))} |")
    skipped_formats = sorted({r.get("format") for r in records
                              if r.get("kind") == "gemm" and r.get("status") == "skipped"
                              and (r.get("workload") or {}).get("origin") == "format probe"})
    out.append("")
    for fmt in skipped_formats:
        reason = next(r.get("reason") for r in records if r.get("format") == fmt and r.get("status") == "skipped")
        out.append(f"- {fmt}: skipped: {reason}")
    if skipped_formats:
        out.append("")

    # -- full table
    out += ["## All results", "", markdown_table(records), ""]
    failed = [r for r in records if r.get("status") == "failed"]
    if failed:
        out += [f"{len(failed)} case(s) failed; the reasons are in the note column and in results.jsonl.", ""]
    return "\n".join(out)


def write_summary(records: Sequence[dict], device: Any, path: str | os.PathLike, **kw: Any) -> Path:
    """Write :func:`summary_markdown` to ``path`` (UTF-8) and return the path."""
    p = Path(path)
    p.write_text(summary_markdown(records, device, **kw) + "\n", encoding="utf-8")
    return p


__all__ = ["summary_markdown", "write_summary", "markdown_table", "best_per_format"]
