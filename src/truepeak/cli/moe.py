"""`truepeak moe ...`: the MoE sub-app (``moe_app``), with ``truepeak moe plan`` (the decode planner).

Thin adapter: parse options → :func:`truepeak.moe.plan.plan` / :func:`truepeak.moe.plan.compare` (which validate) →
render text or JSON. Other MoE commands (``bench``) register on :data:`moe_app` too.

Warnings (``warning: ...`` on stderr, one line each; also the ``"warnings"`` list of ``--json``) are for input that is
planned anyway but may not be what the user meant:

- ``--context`` above the model's ``max_position_embeddings`` (:func:`truepeak.moe.plan.context_warning`).
- a ``--compare`` layout whose GPU count differs from the plan's (``--gpus`` / ``--layout``): one line per such
  layout. Decision: warn, do not refuse. ``--layout`` vs ``--gpus`` is refused because the one detailed plan must
  have one GPU count; a what-if row on another GPU count is a legitimate question (is tp4 on 4 GPUs better per GPU
  than tp8 on 8?), each row is planned on its own layout's GPUs, and the warning says that its tokens/s total is for
  that many GPUs, so the rows are compared per GPU.
"""

from __future__ import annotations

from typing import Optional

import typer

from truepeak.cli.app import app, fail
from truepeak.errors import TruepeakError
from truepeak.report.plan import (finding_text, render_compare, render_header, render_json, render_plan, render_text,
                                  render_tuned, table)

moe_app = typer.Typer(name="moe", no_args_is_help=True, add_completion=False, rich_markup_mode="rich",
                      help="MoE decode: predict a step per layout and batch from a Hugging Face config (truepeak moe "
                           "plan, no GPU needed); time one layer's routed experts on this GPU (truepeak moe bench).")
app.add_typer(moe_app, name="moe")

PLAN_HELP = "\n\n".join([
    "Predict one MoE decode step: per-op time, communication, tokens/s, the bottleneck, memory per GPU and a what-if "
    "table over layouts (TP/EP/PP, DP attention) and batch sizes.",
    "Every op (attention projections, MLA/GQA attention over the KV cache, router, routed experts at the busiest "
    "GPU's tokens per expert, shared experts, dense MLPs, lm_head) gets FLOP and bytes in the chosen formats (block "
    "scales included) and a roofline time max(FLOP / dense peak, bytes / memory bandwidth) from the accelerator "
    "catalog; each TP all-reduce / EP all-to-all / PP send costs latency + size / bandwidth (α–β, nccl-tests busbw), "
    "with defaults per interconnect (PCIe: ~25 µs and ~24 GB/s busbw on 8 GPUs) that --measured overrides.",
    "Layouts: tpN (attention and experts tensor-parallel), epN (experts split over N GPUs, attention TP), dpNepN "
    "(data-parallel attention + EP), ppN (pipeline stages), combined: tp4pp2, tp2ep4 (attention TP8, experts EP4 x "
    "TP2). GPUs = product (dp and ep given together count once).",
    "Example (GLM-5 NVFP4 on 8 RTX PRO 6000; docs/method.md, 'Worked example: GLM-5 on RTX PRO 6000'):",
    "  truepeak moe plan --model glm-5 --gpu \"NVIDIA RTX PRO 6000 Blackwell Workstation Edition\" --gpus 8 "
    "--weights nvfp4 --batch 1,512",
    "  → batch 512: 16 tokens per expert on average; the expert GEMMs run at ~55 FLOP/B against a 1125 FLOP/B ridge: "
    "memory-bound. Batch 1: 157 all-reduces at ~25 µs over PCIe are ~60 % of the step.",
    "  truepeak moe plan --model deepseek-v3 --gpu h200 --gpus 8 --compare   (6 layouts x 8 batch sizes)",
    "Units: SI inside; times in µs/ms as labelled, GB = 1e9 B, TFLOPS = 1e12 FLOP/s, GB/s = 1e9 B/s (decimal).",
])


def comma_items(text: str, what: str, example: str) -> list[str]:
    """The items of a comma list (``" tp8, ep8"`` → ``["tp8", "ep8"]``), stripped. The one list reader of ``moe plan``
    and ``moe bench`` (``--batch``, ``--tokens-per-expert``, ``--weights``, ``--backends``; ``--compare`` layouts go
    through :func:`truepeak.moe.layout.parse_layouts`, which applies the same rule).

    Raises:
        TruepeakError: no item at all (``"no --batch in ','; give e.g. 1,8,64,512"``), or an empty item between,
            before or after the others (``"--batch '1,,2' has an empty item; give e.g. 1,8,64,512"``: a doubled or
            stray comma is a typo, not a list of two); ``what`` names the option, ``example`` shows a good value.
    """
    parts = [p.strip() for p in str(text).split(",")]
    if not any(parts):
        raise TruepeakError(f"no {what} in {text!r}; give e.g. {example}")
    if not all(parts):
        raise TruepeakError(f"{what} {text!r} has an empty item; give e.g. {example}")
    return parts


def number_list(text: str, what: str, convert=int, example: str = "1,8,64,512") -> list:
    """The comma-separated numbers of ``text`` (``"1, 8,64"`` → ``[1, 8, 64]``), each read by ``convert`` (``int``
    or ``float``). Shared by ``moe plan --batch`` and ``moe bench --tokens-per-expert``.

    Raises:
        TruepeakError: an item ``convert`` cannot read (``"--batch '1.5' is not a whole number; give e.g. ..."``), an
            empty item or no item at all (:func:`comma_items`); ``what`` names the option, ``example`` shows a good
            value.
    """
    kind = "a whole number" if convert is int else "a number"
    out = []
    for part in comma_items(text, what, example):
        try:
            out.append(convert(part))
        except ValueError:
            raise TruepeakError(f"{what} {part!r} is not {kind}; give e.g. {example}") from None
    return out


def _default_layout(mdl, n: int, compare: bool):
    """``tp<n>`` when the model divides by it; otherwise, with ``--compare``, the first default layout of ``n`` GPUs
    that fits (the table is what was asked for), and without it an error naming the layouts that fit."""
    from truepeak.moe.layout import LayoutError, check_layout, default_layouts, parse_layout

    lay = parse_layout(f"tp{n}")
    try:
        check_layout(mdl, lay)
        return lay
    except LayoutError as exc:
        fits = []
        for cand in default_layouts(n, mdl):
            try:
                check_layout(mdl, cand)
                fits.append(cand)
            except LayoutError:
                pass
        if not fits:
            raise
        if compare:
            return fits[0]
        raise TruepeakError(f"{exc}; layouts of {n} GPUs that fit: {', '.join(l.name for l in fits)} (pass one with "
                            "--layout, or --compare for all of them)") from None


def _detect_gpu() -> str | None:
    """The name NVML reports for GPU 0, or None (no NVML / no GPU)."""
    try:
        from truepeak.hardware import nvml

        info = nvml.device_info(0)
        return info.name if info is not None else None
    except Exception:
        return None


# ----------------------------------------------------------------------------------------------------------------------
# Command
# ----------------------------------------------------------------------------------------------------------------------

@moe_app.command("plan", help=PLAN_HELP, context_settings={"allow_extra_args": True})
def plan_cmd(
    ctx: typer.Context,
    model: str = typer.Option(..., "--model", "-m", help="config.json path, folder, preset (glm-5, deepseek-v3, kimi-k2, qwen3-235b-a22b, ...) or Hugging Face id org/name."),
    gpu: Optional[str] = typer.Option(None, "--gpu", "-g", help="GPU (catalog name, device string or alias); default: the detected GPU."),
    gpus: Optional[int] = typer.Option(None, "--gpus", "-n", help="Number of GPUs; default: the --layout's product, else 1."),
    layout: Optional[str] = typer.Option(None, "--layout", "-l", help="Parallel layout, e.g. tp8, tp4pp2, ep8, tp2ep4, dp8ep8; default tp<gpus>."),
    batch: Optional[str] = typer.Option(None, "--batch", "-b", help="Decode batch (sequences decoding together), or a list: 1,8,64,512; default 1."),
    context: int = typer.Option(4096, "--context", "-c", help="Tokens in each sequence's KV cache (a one-line warning when above the config's max_position_embeddings; still planned)."),
    weights: Optional[str] = typer.Option(None, "--weights", "-w", help="Weight format: nvfp4, mxfp4, fp8, bf16 (any truepeak format); default: the checkpoint's, from its quantization_config (fp8 for DeepSeek-V3 and Kimi-K2, mxfp4 for gpt-oss, nvfp4 for a ModelOpt NVFP4 export), else bf16. The output says which, and where the checkpoint keeps weights in bf16 that the one format covers."),
    activations: Optional[str] = typer.Option(None, "--activations", help="GEMM activation format; default: the weight format where the GPU computes in it natively (<= 8 bit), else bf16."),
    kv_cache: Optional[str] = typer.Option(None, "--kv-cache", help="KV-cache format (bf16 default, fp8)."),
    routing: str = typer.Option("uniform", "--routing", help="Expert routing: uniform; powerlaw:ALPHA[:random|sorted|balanced] (Zipf by popularity rank, water-filled; steep: at ALPHA≈1 the hottest expert gets every token; aiconfigurator's 1.01 / 1.2 are exponents of another law and do not carry over); or a file: a per-expert histogram, or a topk_ids dump [T, k] (a dump of exactly --batch rows gives the observed values)."),
    compare: bool = typer.Option(False, "--compare", metavar="[LAYOUTS]", help="What-if table over layouts x batch sizes. Takes an optional comma list of layouts after a space: --compare tp8,tp4pp2,ep8; --compare alone for 6 default layouts. Batches from --batch when given, else 1,2,8,16,32,64,128,512. A layout on another GPU count than --gpus is planned on its own GPUs, with a one-line warning."),
    measured: Optional[list[str]] = typer.Option(None, "--measured", help="JSON Lines results (truepeak run / comm / moe bench) whose gemm, moe_experts and collective times replace the roofline; repeatable."),
    interconnect: Optional[str] = typer.Option(None, "--interconnect", help="Override the interconnect: nvlink or pcie (default from the catalog)."),
    as_json: bool = typer.Option(False, "--json", help="Print JSON (SI units) instead of text."),
) -> None:
    try:
        from truepeak.report.fit import stdout_width

        lines, warnings = _plan(ctx, model, gpu, gpus, layout, batch, context, weights, activations, kv_cache, routing,
                                compare, measured, interconnect, as_json, width=stdout_width())
    except TruepeakError as exc:
        raise fail(str(exc), exc.exit_code) from None
    for w in warnings:
        typer.echo(f"warning: {w}", err=True)
    for line in lines:
        typer.echo(line)


def _plan(ctx, model, gpu, gpus, layout, batch, context, weights, activations, kv_cache, routing, compare, measured,
          interconnect, as_json, width: int | None = None) -> tuple[list[str], list[str]]:
    """Validate, plan, render: the lines to print and the warnings (module docstring); tables fitted into ``width``
    terminal columns (None: not a terminal)."""
    from truepeak.hardware.lookup import get_accelerator
    from truepeak.moe.config import load_model
    from truepeak.moe.findings import CompareOtherGpus
    from truepeak.moe.layout import parse_layout, parse_layouts
    from truepeak.moe.measured import load_measured
    from truepeak.moe.ops import resolve_formats
    from truepeak.moe.plan import (DEFAULT_COMPARE_BATCHES, checkpoint_block_size, choose_weights,
                                   compare as compare_fn, context_warning, default_compare_layouts, plan)

    extra = list(ctx.args)
    compare_list = None
    if extra:
        if not compare or len(extra) > 1 or extra[0].startswith("-"):
            raise TruepeakError(f"unexpected argument(s) {' '.join(extra)!r}; layouts for the what-if table follow "
                                "--compare, e.g. --compare tp8,ep8")
        compare_list = extra[0]
    batch_given = batch is not None
    batches = number_list(batch, "--batch") if batch_given else [1]
    for b in batches:
        if b < 1:
            raise TruepeakError(f"--batch {b} must be at least 1 (sequences decoding together; a batch of 0 has no "
                                "step to plan)")
    if context < 1:
        raise TruepeakError(f"--context {context} must be at least 1 token")
    name = gpu or _detect_gpu()
    if not name:
        raise TruepeakError("no GPU detected; give --gpu NAME (e.g. --gpu h200, --gpu \"rtx pro 6000\"; "
                            "`truepeak specs` lists them)")
    acc = get_accelerator(name)
    mdl = load_model(model)
    if layout:
        lay = parse_layout(layout)
        if gpus is not None and gpus != lay.gpus:
            raise TruepeakError(f"--layout {lay.name} uses {lay.gpus} GPUs but --gpus is {gpus}")
    else:
        if gpus is not None and gpus < 1:
            raise TruepeakError(f"--gpus {gpus} must be at least 1")
        lay = _default_layout(mdl, gpus or 1, compare)
    w = choose_weights(mdl, weights).format
    fmts = resolve_formats(acc, w, activations, kv_cache, weight_block_size=checkpoint_block_size(mdl, w))
    warnings = []
    ctx_warn = context_warning(mdl, context)
    if ctx_warn:
        warnings.append(ctx_warn)
    tables = load_measured(measured) if measured else None
    kw = dict(context=context, routing=routing, measured=tables, interconnect=interconnect, weights=weights,
              formats=fmts, device_name=name if name in acc.device_names else None)
    plans = [plan(mdl, acc, lay, b, **kw) for b in batches]
    cells = layouts = cmp_batches = None
    if compare:
        layouts = (parse_layouts(",".join(comma_items(compare_list, "--compare", "tp8,tp4pp2,ep8")))
                   if compare_list else default_compare_layouts(mdl, lay.gpus))
        cmp_batches = batches if batch_given else list(DEFAULT_COMPARE_BATCHES)
        warnings += [CompareOtherGpus(l.name, l.gpus, lay.gpus, gpus is not None) for l in layouts
                     if l.gpus != lay.gpus]
        cells = compare_fn(mdl, acc, layouts, cmp_batches, **kw)
    texts = [finding_text(w) for w in warnings]
    if as_json:
        return [render_json(mdl, acc.name, plans, warnings, tables, cells, layouts, cmp_batches)], texts
    return render_text(mdl, plans, tables, cells, layouts, cmp_batches, width), texts


__all__ = ["moe_app", "plan_cmd", "comma_items", "number_list", "render_plan", "render_compare", "render_tuned", "render_header",
           "table"]
