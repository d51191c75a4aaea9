"""`truepeak moe bench`: time one MoE layer's routed-expert forward at decode per backend, against the read roofline.

Thin adapter: parse → :class:`truepeak.bench.moe.MoeBenchConfig` (validates; a refused field's message names its
flag, :data:`FLAG_FOR`) → :func:`truepeak.bench.moe.run_bench` (measures, appends JSON Lines records to
results.jsonl in the --out folder, ./truepeak-moe-bench-YYYYmmdd-HHMMSS by default, as ``truepeak run`` does) → a
table (or ``--json``) and an optional plot beside the records, both drawn by :mod:`truepeak.report.moe`. Registered on
the ``truepeak moe`` sub-app (:mod:`truepeak.cli.moe_app`).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Optional

import typer

from truepeak.cli.app import fail
from truepeak.cli.moe_app import moe_app
from truepeak.cli.options import FLAG_FOR, comma_items, flag_message, help_text, number_list
from truepeak.errors import TruepeakError
from truepeak.records import Record
from truepeak.report.moe import COLUMNS, plot_records, progress_line, render, row_cells

HELP = help_text([
    "Time one MoE layer's routed experts at decode: hidden states [T, H] and the router's top-k ids and weights → "
    "Σ weight · down(silu(gate x) · up x), the whole unit replayed from a CUDA graph, for each backend: per_expert "
    "(two matmuls per active expert), bmm (padded batched matmul), grouped_mm (torch._grouped_mm; fp8: "
    "torch._scaled_grouped_mm, w8a8) and triton (truepeak's fused kernel: fp8 weights run w8a8 with per-row e4m3 "
    "activations like the torch fp8 backend; on Hopper nvfp4 weights run w4a16 (e2m1 decoded and block-scaled in "
    "fp16 registers) and mxfp4 weights w4a8 (decoded to e4m3, one fp8 MMA per scale block): --fp4-activations "
    "picks either for both; on Blackwell, sm_100 / sm_103 / sm_120, fp4 weights run the block-scaled kernel instead "
    "(tl.dot_scaled: the tensor cores read e2m1 and its scales; the activations are quantised per row to nvfp4 or "
    "mxfp4 (W4A4, native on all three) or, mxfp4's default on sm_100 / sm_103, mxfp8 (W4A8); compiled for those "
    "devices but never run on one: --fp4-kernel block-scaled runs it on Hopper (sm_90) through Triton's bf16 "
    "emulation, mxfp4 only, and refuses other GPUs). The error column is against a float32 reference of unrounded "
    "activations, so W4A4 shows its format's error; each line names the activations that ran.",
    "At decode each expert sees a handful of tokens (tokens per expert = T·k/E: 16 at batch 512 for E=256, k=8), so "
    "the unit is bound by streaming the active experts' weights: the figure reported is the fraction of the read "
    "bandwidth measured in the same run (a 4 GiB Triton read-only reduction), next to TFLOPS and % of the roofline "
    "max(bytes / read bandwidth, FLOP / dense bf16 peak). Routing metadata (sorting tokens by expert, padding) is "
    "computed once outside the timed region, for every backend alike.",
    "Layouts: --tp N divides each expert's width I by N; --ep N keeps E/N contiguous experts and the tokens routed to "
    "them. Routing: uniform, powerlaw:ALPHA (expert popularity ∝ rank^-ALPHA, ranks placed on experts at random; "
    "docs/results/h200/moe uses 1.2), or a file of top-k ids (one token per line).",
    "Examples:",
    "  truepeak moe bench --model deepseek-v3 --weights bf16,fp8 --out moe-dsv3 --plot moe.png    (writes "
    "moe-dsv3/results.jsonl and moe-dsv3/moe.png)",
    "  truepeak moe bench --model glm-5 --ep 8 --routing powerlaw:1.2 --weights nvfp4 --backends triton",
    "Units: µs; TB/s = 1e12 B/s; TFLOPS = 1e12 FLOP/s (decimal). Needs a CUDA GPU, torch and triton.",
])


def _names(text: str, what: str, example: str) -> list[str]:
    """The lower-case names of a comma list option (:func:`truepeak.cli.options.comma_items`: no empty items)."""
    return [p.lower() for p in comma_items(text, what, example)]


def bench(
    model: str = typer.Option(..., "--model", help="Model name or config.json (deepseek-v3, glm-5, qwen3-235b-a22b, "
                              "gpt-oss-120b, ...)."),
    tp: int = typer.Option(1, "--tp", help="Tensor parallel: each expert's width I / N."),
    ep: int = typer.Option(1, "--ep", help="Expert parallel: E/N local experts; only tokens routed to them."),
    tokens_per_expert: str = typer.Option("1,2,4,8,16,32,64,128,256", "--tokens-per-expert",
                                          help="Mean tokens per expert (T = tpe·E/k), comma list."),
    routing: str = typer.Option("uniform", "--routing", help="uniform | powerlaw:ALPHA | FILE of top-k ids."),
    weights: str = typer.Option("bf16", "--weights", help="Comma list of bf16, fp8 (per-channel scales), fp8_block "
                                "(128x128 scales), nvfp4, mxfp4."),
    backends: str = typer.Option("per_expert,bmm,grouped_mm,triton", "--backends", help="Comma list of backends."),
    fp8_activations: str = typer.Option("fp8", "--fp8-activations", help="Our kernel with fp8 weights: fp8 (w8a8, "
                                        "activations quantised per row to e4m3, as grouped_mm does) or fp16 "
                                        "(w8a16: weights converted in registers)."),
    fp4_activations: str = typer.Option("auto", "--fp4-activations", help="Our kernel with nvfp4/mxfp4 weights: "
                                        "auto (fp16 for nvfp4, fp8 for mxfp4: the faster on the H200), fp8 (w4a8: "
                                        "activations quantised per row to e4m3, e2m1 decoded to e4m3, one fp8 MMA "
                                        "per scale block) or fp16 (w4a16: e2m1 decoded to fp16 and multiplied by "
                                        "its block scale, fp16 MMAs); block-scaled kernel: auto (fp4 for nvfp4; "
                                        "for mxfp4 fp4 on sm_120, fp8 elsewhere), fp4 (W4A4) or fp8 (mxfp8 "
                                        "activations, mxfp4 weights)."),
    fp4_kernel: str = typer.Option("auto", "--fp4-kernel", help="Our kernel with nvfp4/mxfp4 weights: auto "
                                   "(block-scaled on sm_100 / sm_103 / sm_120, dequant elsewhere), dequant (e2m1 "
                                   "decoded in registers: the Hopper kernels) or block-scaled (tl.dot_scaled; on "
                                   "Hopper Triton emulates it in bf16, mxfp4 only; other GPUs refused)."),
    out: Optional[str] = typer.Option(None, "--out", metavar="DIR", help="Folder for results.jsonl (appended to) and "
                                      "the plot (default: a new folder ./truepeak-moe-bench-<time>, the time as YYYYmmdd-HHMMSS)."),
    plot: Optional[Path] = typer.Option(None, "--plot", help="PNG: % read bandwidth vs tokens per expert "
                                        "(needs matplotlib); a relative path is taken inside the --out folder."),
    no_split_busy: bool = typer.Option(False, "--no-split-busy", help="Our kernel under a skewed routing: every "
                                       "expert in one launch, instead of the busy experts (more than 2x the mean "
                                       "tokens per active expert) in a launch of their own on a second CUDA stream."),
    budget: float = typer.Option(0.2, "--budget", help="Timed seconds per point."),
    as_json: bool = typer.Option(False, "--json", help="Print the records as JSON Lines."),
) -> None:
    from truepeak.bench import moe
    from truepeak.bench.outdir import check_out_arg, default_out_dir

    try:
        check_out_arg(out, "moe bench")  # a folder: `--out moe.jsonl` is refused, saying what --out is
        out_dir = Path(out) if out is not None else default_out_dir(command="moe-bench")
        records_path = out_dir / "results.jsonl"  # created with the first record, once the inputs are valid
        plot_path = None if plot is None else plot if plot.is_absolute() else out_dir / plot
        tpes = number_list(tokens_per_expert, "tokens per expert", float, "1,2,4,8,16,32")
        fmts = _names(weights, "--weights", "bf16,fp8")
        bks = _names(backends, "--backends", "per_expert,triton")
        config = moe.MoeBenchConfig(model, tp=tp, ep=ep, tokens_per_expert=tpes, routing=routing, weights=fmts,
                                    backends=bks, budget_s=budget, fp8_activations=fp8_activations,
                                    fp4_activations=fp4_activations, fp4_kernel=fp4_kernel,
                                    split_busy=not no_split_busy)

        def progress(rec: Record) -> None:
            if not as_json:
                typer.echo(progress_line(rec), err=True)

        records = moe.run_bench(config, out_path=str(records_path), progress=progress)
        if plot_path is not None:
            plot_records(records, str(plot_path))
    except TruepeakError as exc:
        raise fail(flag_message(exc)) from None
    if as_json:
        for r in records:
            typer.echo(json.dumps(r.to_dict()))
    else:
        from truepeak.report.fit import stdout_width

        typer.echo("\n".join(render(records, stdout_width())))
    typer.echo(f"records: {records_path}", err=True)
    if plot_path is not None:
        typer.echo(f"plot: {plot_path}", err=True)


moe_app.command("bench", help=HELP)(bench)    # on the `truepeak moe` sub-app (cli/moe_app.py)

__all__ = ["bench", "render", "row_cells", "progress_line", "COLUMNS", "HELP", "FLAG_FOR", "flag_message"]
