"""`truepeak moe plan`: the decode planner's command, registered on the ``truepeak moe`` sub-app
(:data:`truepeak.cli.moe_app.moe_app`).

Thin: parse the options (:mod:`truepeak.cli.options`), check what only the command line can get wrong (flag values,
``--layout`` against ``--gpus``, stray arguments), call :func:`truepeak.moe.plan.plan_set`, render through
:mod:`truepeak.report.plan`. Warnings (input planned anyway: :mod:`truepeak.moe.plan.plan_set`) go to stderr as
``warning: ...``, one line each, and into the ``"warnings"`` list of ``--json``.
"""

from __future__ import annotations

from typing import Optional

import typer

from truepeak.cli.app import fail
from truepeak.cli.moe_app import moe_app
from truepeak.cli.options import comma_items, help_text, number_list
from truepeak.errors import TruepeakError
from truepeak.report.plan import render_compare, render_header, render_plan, render_tuned, table

PLAN_HELP = help_text([
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



def _detect_gpu() -> str | None:
    """The name NVML reports for GPU 0, or None (no NVML / no GPU)."""
    try:
        from truepeak.hardware import nvml

        info = nvml.device_info(0)
        return info.name if info is not None else None
    except Exception:
        return None


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
    routing: str = typer.Option("uniform", "--routing", help="Expert routing: uniform; powerlaw:ALPHA, optionally with a placement, :random, :sorted or :balanced (Zipf by popularity rank, water-filled; steep: at ALPHA≈1 the hottest expert gets every token; aiconfigurator's 1.01 / 1.2 are exponents of another law and do not carry over); or a file: a per-expert histogram, or a topk_ids dump [T, k] (a dump of exactly --batch rows gives the observed values)."),
    compare: bool = typer.Option(False, "--compare", metavar="[LAYOUTS]", help="What-if table over layouts x batch sizes. Takes an optional comma list of layouts after a space: --compare tp8,tp4pp2,ep8; --compare alone for 6 default layouts. Batches from --batch when given, else 1,2,8,16,32,64,128,512. A layout on another GPU count than --gpus is planned on its own GPUs, with a one-line warning."),
    measured: Optional[list[str]] = typer.Option(None, "--measured", help="JSON Lines results (truepeak run / comm / moe bench) whose gemm, moe_experts and collective times replace the roofline; repeatable. Records measured on another device than --gpu are left out, with a warning."),
    interconnect: Optional[str] = typer.Option(None, "--interconnect", help="Override the interconnect: nvlink or pcie (default from the catalog)."),
    calibration: Optional[str] = typer.Option(None, "--calibration", help="Calibration JSON of the expected step (the repository's build_calibration.py benchmark writes one); default: the shipped H200 calibration, carried over to other GPUs by a stated rule."),
    eager: bool = typer.Option(False, "--eager", help="Expected step without CUDA graphs (every kernel launched from the host)."),
    mtp: Optional[int] = typer.Option(None, "--mtp", help="MTP draft tokens per step (N >= 1), for a checkpoint with MTP layers."),
    mtp_acceptance: Optional[float] = typer.Option(None, "--mtp-acceptance", help="Probability each MTP draft token is accepted, in (0, 1]; default 0.85 (DeepSeek-V3 technical report: 85-90 % for the second token)."),
    nodes: Optional[int] = typer.Option(None, "--nodes", help="Nodes the layout's GPUs are split over (must divide them); collectives spanning nodes cross the network."),
    network_bandwidth: float = typer.Option(50.0, "--network-bandwidth", help="Network bandwidth per GPU between nodes, GB/s (default 50: ConnectX-7 400 Gb/s, deepseek-ai/DeepEP README)."),
    network_latency: Optional[float] = typer.Option(None, "--network-latency", help="Fixed cost of a collective between nodes, µs (default: as inside a node)."),
    no_levers: bool = typer.Option(False, "--no-levers", help="Leave out the ranked levers (each re-plans once per change)."),
    as_json: bool = typer.Option(False, "--json", help="Print JSON (SI units) instead of text."),
) -> None:
    try:
        from truepeak.report.fit import stdout_width

        lines, warnings = _plan(ctx, model, gpu, gpus, layout, batch, context, weights, activations, kv_cache, routing,
                                compare, measured, interconnect, as_json, width=stdout_width(),
                                calibration=calibration, eager=eager, mtp=mtp, mtp_acceptance=mtp_acceptance,
                                levers=not no_levers, nodes=nodes, network_bandwidth=network_bandwidth,
                                network_latency=network_latency)
    except TruepeakError as exc:
        raise fail(str(exc), exc.exit_code) from None
    for w in warnings:
        typer.echo(f"warning: {w}", err=True)
    for line in lines:
        typer.echo(line)


def _plan(ctx, model, gpu, gpus, layout, batch, context, weights, activations, kv_cache, routing, compare, measured,
          interconnect, as_json, width: int | None = None, calibration=None, eager=False, mtp=None,
          mtp_acceptance=None, levers=True, nodes=None, network_bandwidth=50.0,
          network_latency=None) -> tuple[list[str], list[str]]:
    """Parse and check the options, plan (:func:`truepeak.moe.plan.plan_set`), render: the lines to print and the
    warnings; tables fitted into ``width`` terminal columns (None: not a terminal)."""
    from truepeak.moe.layout import parse_layout, parse_layouts
    from truepeak.moe.plan import plan_set
    from truepeak.report.plan import finding_text, render_json, render_text

    extra = list(ctx.args)
    if extra and (not compare or len(extra) > 1 or extra[0].startswith("-")):
        raise TruepeakError(f"unexpected argument(s) {' '.join(extra)!r}; layouts for the what-if table follow "
                            "--compare, e.g. --compare tp8,ep8")
    batches = number_list(batch, "--batch") if batch is not None else [1]
    for b in batches:
        if b < 1:
            raise TruepeakError(f"--batch {b} must be at least 1 (sequences decoding together; a batch of 0 has no "
                                "step to plan)")
    if context < 1:
        raise TruepeakError(f"--context {context} must be at least 1 token")
    lay = parse_layout(layout) if layout else None
    if lay is not None and gpus is not None and gpus != lay.gpus:
        raise TruepeakError(f"--layout {lay.name} uses {lay.gpus} GPUs but --gpus is {gpus}")
    if lay is None and gpus is not None and gpus < 1:
        raise TruepeakError(f"--gpus {gpus} must be at least 1")
    compare_layouts = parse_layouts(",".join(comma_items(extra[0], "--compare", "tp8,tp4pp2,ep8"))) if extra else None
    name = gpu or _detect_gpu()
    if not name:
        raise TruepeakError("no GPU detected; give --gpu NAME (e.g. --gpu h200, --gpu \"rtx pro 6000\"; "
                            "`truepeak specs` lists them)")
    from truepeak.moe.plan.mtp import MtpSetting

    if mtp_acceptance is not None and mtp is None:
        raise TruepeakError(f"--mtp-acceptance {mtp_acceptance} needs --mtp N (the draft tokens per step)")
    mtp_setting = MtpSetting(mtp, 0.85 if mtp_acceptance is None else mtp_acceptance) if mtp is not None else None
    from truepeak.moe.plan.network import Network

    net = (Network(nodes, network_bandwidth * 1e9, None if network_latency is None else network_latency * 1e-6)
           if nodes is not None else None)
    result = plan_set(model, name, gpus=gpus, layout=lay, batches=batches, context=context, weights=weights,
                      activations=activations, kv_cache=kv_cache, routing=routing, compare=compare,
                      compare_layouts=compare_layouts, compare_batches=batches if batch is not None else None,
                      measured=measured or None, interconnect=interconnect, calibration=calibration, eager=eager,
                      mtp=mtp_setting, with_levers=levers, network=net)
    warnings = [finding_text(w) for w in result.warnings]
    if as_json:
        return [render_json(result)], warnings
    return render_text(result, width), warnings


#: Names kept importable from here for callers of the command's former helpers (their home is given).
__all__ = ["moe_app", "plan_cmd", "comma_items", "number_list", "render_plan", "render_compare", "render_tuned",
           "render_header", "table"]
