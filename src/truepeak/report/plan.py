"""`truepeak moe plan` rendered: the text a user reads and the ``--json`` document, from the planner's objects.

The planner (:mod:`truepeak.moe.plan`) returns plans, what-if cells and findings in SI units; this module turns them
into lines and JSON, and is the only place their numbers become text (through :mod:`truepeak.units`):

- times in sentences: milliseconds / microseconds, three significant digits (``4.04 ms``, ``25.5 µs``); the step and
  the time-by lines four (``6.745 ms``); table cells in the unit of their header (:func:`truepeak.units.fmt_time_in`);
- shares of the step in sentences: one decimal from 10 % up, two significant digits below (``59.9 %``, ``3.2 %``);
  in the time-by lines and the padding figures one decimal (``0.0 %``);
- bytes in GB, four significant digits (``53.98 GB``); tokens/s whole from 100 up (:func:`~truepeak.units.fmt_tokens_per_s`);
  counts and FLOP per byte as plain numbers (:func:`~truepeak.units.fmt_number`); peaks in TFLOPS
  (:func:`~truepeak.units.fmt_rate`), bandwidths in GB/s (:func:`~truepeak.units.fmt_bandwidth`).
"""

from __future__ import annotations

import json

from truepeak.units import (fmt_bandwidth, fmt_bytes, fmt_number, fmt_pct, fmt_rate, fmt_time, fmt_time_in,
                            fmt_tokens_per_s)

#: The footer under the plan text.
FOOTER = ("Roofline time per op = max(FLOP / dense peak, bytes / memory bandwidth); collectives α + S·factor / busbw "
          "(nccl-tests); no compute/communication overlap. GB = 1e9 B, GB/s = 1e9 B/s, TFLOPS = 1e12 FLOP/s "
          "(decimal); peaks are DENSE.")


def table(headers: list[str], rows: list[list[str]], right: set[int] | None = None, *, width: int | None = None,
          wrap: set[int] | None = None, drop: dict[int, int] | None = None, indent: str = "") -> list[str]:
    """Plain aligned text table (a header, a row of dashes, the rows; columns two spaces apart), fitted into ``width``
    terminal columns by :func:`truepeak.report.fit.fit_lines` (None: not a terminal, the natural width). Columns in
    ``right`` are right-aligned numbers, never wrapped; columns in ``wrap`` wrap at spaces; ``drop`` maps the columns
    a narrow terminal may leave out to their priority (lowest first)."""
    from truepeak.report.fit import Column, fit_lines

    right, wrap, drop = right or set(), wrap or set(), drop or {}
    cols = [Column(h, numeric=i in right, wrap=i in wrap, drop=i in drop, priority=drop.get(i, 0))
            for i, h in enumerate(headers)]
    return fit_lines(cols, [[str(c) for c in r] for r in rows], width, indent=indent)


def _ms(seconds: float) -> str:
    """A time of the step and time-by lines: milliseconds, four significant digits."""
    return fmt_time(seconds, "ms")


def _share(fraction: float) -> str:
    """A share of the time-by lines and the padding figures: one decimal."""
    return fmt_pct(fraction, decimals=1)


def _gb(nbytes: float | None) -> str:
    return fmt_bytes(nbytes, "GB")


def render_plan(p, width: int | None = None) -> list[str]:
    """The lines of one plan (one batch size); the ops table fitted into ``width`` terminal columns (None: the
    natural width; :mod:`truepeak.report.fit`): where it must, it leaves out where each time came from, the op group
    and the shape, in that order."""
    from truepeak.moe.ops import GROUP_WORDS

    lines = [f"batch {p.batch}, context {p.context} (layout {p.layout.name}: {p.layout.describe()})"]
    row = "  {:<16}{}".format
    lines.append(row("step", f"{_ms(p.step_s)} → {fmt_tokens_per_s(p.tokens_per_s)} tokens/s total, "
                             f"{fmt_tokens_per_s(p.tokens_per_s_per_gpu)} tokens/s per GPU, "
                             f"{fmt_tokens_per_s(p.tokens_per_s_per_user)} tokens/s per sequence"))
    b = p.time_by_bound()
    parts = [f"{k} {_ms(v)} ({_share(v / p.step_s)})" for k, v in b.items() if v > 0 or k != "pipeline_bubble"]
    lines.append(row("time by bound", " · ".join(parts)))
    g = p.time_by_group()
    lines.append(row("time by op", " · ".join(f"{GROUP_WORDS[k]} {_ms(v)} ({_share(v / p.step_s)})"
                                             for k, v in sorted(g.items(), key=lambda kv: -kv[1]))))
    lines.append(row("bottleneck", p.bottleneck()))
    m = p.memory
    cap = f" of {_gb(m.capacity)}" if m.capacity else ""
    verdict = "fits" if m.fits else f"DOES NOT FIT: {_gb(m.over)} over"
    lines.append(row("memory per GPU", f"{_gb(m.total)}{cap} (weights {_gb(m.weights)} + KV cache "
                                       f"{_gb(m.kv_cache)} at {p.batch} x {p.context} tokens) — {verdict}"))
    if p.routing:
        r = p.routing
        ep = (f"; busiest GPU (EP{r['ep']}) {fmt_number(r['busiest_gpu_pairs'])} token-expert pairs vs "
              f"{fmt_number(r['mean_gpu_pairs'])} mean, {fmt_number(r['gpu_active_experts'])} of "
              f"{r['experts_per_gpu']} local experts active" if r["ep"] > 1 else "")
        lines.append(row("tokens/expert", f"mean {fmt_number(r['mean_tokens_per_expert'])} (T·k/E = "
                                          f"{r['tokens']}·{r['top_k']}/{r['num_experts']}), busiest expert "
                                          f"{fmt_number(r['busiest_expert_tokens'], 3)}, "
                                          f"{fmt_number(r['active_experts'])} of {r['num_experts']} experts active; "
                                          f"padded rows {_share(r['expected_padding_16'])} at BLOCK_M 16, "
                                          f"{_share(r['expected_padding_64'])} at 64 (mean-based: "
                                          f"{_share(r['padding_16'])} / {_share(r['padding_64'])}; docs/method.md, "
                                          f"'Padding per expert'){ep} ({r['routing']} routing)"))
    lines.append("  conclusions:")
    for c in p.conclusions():
        lines.append(f"    - {c}")
    lines.append("  ops on one GPU of the slowest stage, per step:")
    rows = []
    for op in p.ops:
        rows.append([op.name, op.group, str(op.calls), fmt_time_in(op.time_s, 1e-6), fmt_time_in(op.total_s, 1e-3),
                     op.bound, fmt_number(op.intensity, 3), op.shape, "measured" if op.measured else
                     ("α–β" if op.group == "communication" else "roofline")])
    lines += table(["op", "group", "calls", "µs/call", "ms/step", "bound", "FLOP/B", "shape", "time from"], rows,
                   right={2, 3, 4, 6}, wrap={0, 7}, drop={8: 0, 1: 1, 7: 2}, width=width, indent="    ")
    if p.bubble_s > 0:
        lines.append(f"    pipeline bubble: {_ms(p.bubble_s)} (fewer micro-batches than stages)")
    return lines


#: How a Formats scaling reads in the header.
SCALING_WORDS = {"block128": "fp32 scale per 128x128 block", "row": "fp32 scale per output row",
                 "tensor": "fp32 scale per tensor"}
#: The same for activations (block128 = 1 x 128 groups; row = per token).
ACT_SCALING_WORDS = {"block128": "fp32 scale per 1x128 group", "row": "fp32 scale per token",
                     "tensor": "fp32 scale per tensor"}


def _scaled(scaling: str | None, pre: str = " + ", post: str = "", words: dict = SCALING_WORDS) -> str:
    return f"{pre}{words[scaling]}{post}" if scaling else ""


def render_header(p, measured) -> list[str]:
    """The lines above the plans: model, GPUs and interconnect; formats and peaks; where the weight format came from
    (:attr:`truepeak.moe.plan.Plan.weights_origin`) and what one format does to weights the checkpoint keeps in bf16;
    the formats' notes; the measured data used."""
    f = p.formats
    lines = [f"{p.model} on {p.layout.gpus} x {p.accelerator}; interconnect {p.interconnect} "
             f"({p.interconnect_why})",
             f"formats: weights {f.weights.name} ({fmt_number(f.weights.bytes_per_value, 6)} B/value"
             f"{_scaled(f.weight_scaling)}), activations {f.activations.name}"
             f"{_scaled(f.activation_scaling, ' (', ')', ACT_SCALING_WORDS)}, KV cache {f.kv_cache.name}; "
             f"GEMM peak {fmt_rate(f.gemm_peak)} TFLOPS dense {f.gemm_compute.name}, memory "
             f"{fmt_bandwidth(p.bandwidth)} GB/s → ridge {fmt_number(p.ridge, decimals=0)} FLOP/B"]
    if p.weights_origin is not None:
        lines.append(f"  weights: {p.weights_origin.describe()}")
    if p.weights_note:
        lines.append(f"  {p.weights_note}")
    for n in (f.peak_note, *[x for x in f.notes if x != f.peak_note], f.scaling_note):
        if not n:
            continue
        lines.append(f"  {n}")
    if measured is not None:
        used = sorted({n for n in p.measured_ops})
        lines.append(f"measured: {measured.summary()}; ops timed from measurements: "
                     f"{', '.join(used) if used else 'none matched (roofline / defaults used)'}")
        lines += [f"  {w}" for w in _unmatched(p, measured)]
    return lines


def _unmatched(p, measured) -> list[str]:
    """Why measured collectives / expert curves were not used by plan ``p`` (GPU count, experts, width)."""
    out = []
    comm = [op for op in p.ops if op.group == "communication"]
    if comm and not any(op.measured for op in comm) and (measured.collectives or measured.fits):
        have = sorted({k[1] for k in (*measured.collectives, *measured.fits)})
        need = sorted({op.detail.get("ranks") for op in comm if op.detail.get("ranks")})
        out.append(f"collectives were measured on {', '.join(map(str, have))} GPUs; this plan's run on "
                   f"{', '.join(map(str, need))}: literature defaults used (measure with truepeak comm "
                   f"--nproc-per-node {need[-1] if need else p.layout.gpus})")
    experts = [op for op in p.ops if op.group == "routed_experts"]
    if experts and not any(op.measured for op in experts) and measured.moe_experts:
        have = sorted({(k.get("experts"), k.get("width"), k.get("format"), k.get("routing"))
                       for k, *_ in measured.moe_experts}, key=str)
        r = p.routing or {}
        e_local = r.get("num_experts", 0) // max(1, p.layout.ep)
        width = (experts[0].detail.get("k") if "down" in experts[0].name else
                 (experts[0].detail.get("n") or 0) // 2)
        shown = "; ".join(f"E={e} N={n} {f} {rt}" for e, n, f, rt in have[:4]) + (" ..." if len(have) > 4 else "")
        out.append(f"expert curves measured for {shown}; this plan needs E={e_local} N={width} "
                   f"{p.formats.weights.name} {r.get('routing')} (or above the largest measured tokens per "
                   "expert): roofline used")
    return out


def render_tuned(p) -> list[str]:
    """The vLLM and SGLang fused-MoE tuned-config file names of plan ``p``'s layout."""
    t = p.tuned_configs
    lines = [f"fused-MoE tuned-config files for this layout (E={t.experts_per_rank} experts per GPU, "
             f"N={t.n_per_rank} = I_e / expert TP):",
             f"  vLLM:   {t.vllm}   (vllm/model_executor/layers/fused_moe/configs/)",
             f"  SGLang: {t.sglang}   (python/sglang/srt/layers/moe/fused_moe_triton/configs/triton_<version>/)"]
    if t.note:
        lines.append(f"  note: {t.note}")
    return lines


def render_compare(cells, layouts, batches, width: int | None = None) -> list[str]:
    """The what-if table: one row per layout, one column per batch; cells tokens/s total; fitted into ``width``
    terminal columns (None: the natural width; :mod:`truepeak.report.fit`)."""
    by = {(c.layout, c.batch): c for c in cells}
    rows = []
    errors = []
    for lay in layouts:
        row = [lay.name, lay.describe()]
        for b in batches:
            c = by.get((lay.name, b))
            if c is None or c.plan is None:
                row.append("n/a")
                if c is not None and c.error and c.error not in errors:
                    errors.append(c.error)
                continue
            p = c.plan
            mark = "" if p.memory.fits else "*"
            comm = p.time_by_bound()["communication"] / p.step_s
            mark += "!" if comm >= 0.5 else ""
            row.append(f"{fmt_tokens_per_s(p.tokens_per_s)}{mark}")
        rows.append(row)
    lines = ["what-if: output tokens/s (all GPUs), layout x batch"]
    lines += table(["layout", "parallelism", *[f"b={b}" for b in batches]], rows,
                   right=set(range(2, 2 + len(batches))), wrap={1}, width=width, indent="  ")
    legend = ["* does not fit in GPU memory at that batch and context", "! communication is over half the step"]
    one_line = "  " + "   ".join(legend)
    lines += [one_line] if width is None or len(one_line) <= width else ["  " + x for x in legend]
    for e in errors:
        lines.append(f"  n/a: {e}")
    return lines


def compare_gpus_warning(layout, n_gpus: int, gpus_given: bool) -> str:
    """The one-line warning for a ``--compare`` layout on another GPU count than the plan's (``truepeak moe plan``
    warns and plans the row on its own GPUs: its tokens/s total is for that many GPUs)."""
    src = "--gpus" if gpus_given else "the plan above"
    return (f"--compare layout {layout.name} uses {layout.gpus} GPUs, not the {n_gpus} of {src}: its row is planned "
            f"on {layout.gpus} GPUs (tokens/s total for {layout.gpus} GPUs; compare rows per GPU)")


def render_text(model, plans, measured=None, cells=None, layouts=None, batches=None,
                width: int | None = None) -> list[str]:
    """The lines of ``truepeak moe plan``: the model, the header of the first plan, each plan, the tuned-config file
    names, the what-if table when ``cells`` are given, the footer. ``model``: the
    :class:`truepeak.moe.config.MoEModel`; ``measured``: the :class:`truepeak.moe.measured.MeasuredTables` used, or
    None; tables fitted into ``width`` terminal columns (None: not a terminal)."""
    lines = [model.summary()] + render_header(plans[0], measured) + [""]
    for p in plans:
        lines += render_plan(p, width) + [""]
    lines += render_tuned(plans[0])
    if cells is not None:
        lines += [""] + render_compare(cells, layouts, batches, width)
    lines.append("")
    lines.append(FOOTER)
    return lines


def render_json(model, accelerator, plans, warnings, measured=None, cells=None, layouts=None, batches=None) -> str:
    """The ``--json`` document of ``truepeak moe plan`` (SI units): the model and accelerator, the warnings, every
    plan (:meth:`truepeak.moe.plan.Plan.to_dict`), the what-if table and the measured data used, when given."""
    doc = {"model": model.name, "family": model.family, "model_summary": model.summary(), "accelerator": accelerator,
           "warnings": list(warnings), "plans": [p.to_dict() for p in plans]}
    if cells is not None:
        doc["compare"] = {"layouts": [lay.to_dict() for lay in layouts], "batches": list(batches),
                          "cells": [c.to_dict() for c in cells]}
    if measured is not None:
        doc["measured"] = {"sources": measured.sources, "summary": measured.summary()}
    return json.dumps(doc, indent=2)


__all__ = ["FOOTER", "table", "render_plan", "render_header", "render_tuned", "render_compare", "compare_gpus_warning",
           "render_text", "render_json"]
