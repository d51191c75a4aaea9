"""`truepeak moe tune`: search the MoE kernels' configurations on this GPU and write a tuned table.

Thin adapter: parse → :class:`truepeak.bench.moe_tune.TuneConfig` (checks every flag before torch is imported) →
:func:`truepeak.bench.moe_tune.run_tune` (refuses what the device cannot run, measures, appends the candidates'
records to results.jsonl and writes the table in the --out folder, ./truepeak-moe-tune-YYYYmmdd-HHMMSS by default) →
:func:`truepeak.report.tune.render_table` (or ``--json``: the table). Registered on the ``truepeak moe`` sub-app.
"""

from __future__ import annotations

import json
from typing import Optional

import typer

from truepeak.cli.app import fail
from truepeak.cli.moe_app import moe_app
from truepeak.cli.options import comma_items, flag_message, help_text, number_list
from truepeak.errors import TruepeakError

HELP = help_text([
    "Search truepeak's MoE kernel configurations on this GPU (token block, weight rows, K step, warps, stages, "
    "tile order, persistent launch, register cap, prefetch; gate/up and down each their own, the token block "
    "shared) for each weight format, "
    "activations and tokens-per-expert bucket of one model's expert shape, and write the fastest as a tuned table: "
    "E=..,N=..,H=..,device_name=...json, which the kernels load when they are built (copy it into "
    "truepeak/kernels/moe_triton/tuned/ or pass its folder as FusedMoE(tuned_table=...)). A table is tuned for "
    "one routing (--routing; the shipped tables: uniform) and, for fp4, the weight layout it ran; under a skewed "
    "routing the kernels take a larger bucket's entry where its token block re-reads the busiest experts' weights "
    "fewer times, and run the busy experts (more than 2x the mean tokens per active expert) in a launch of their "
    "own, each group with the entry of its own counts; the search times every candidate in one launch for the "
    "whole routing.",
    "Each candidate is fitted to the device's shared memory (dropped if it cannot fit), checked against a float32 "
    "reference, and timed as `truepeak moe bench` times (the whole unit from a CUDA graph, the median; in one "
    "launch, as with --no-split-busy); the search "
    "times the default rules and the shipped table's entry first (for a shape with no table, the nearest shape's on "
    "this GPU), then goes field by field, adopting a faster value at once so that the two kernels' changes combine, "
    "until a sweep changes nothing or the point's share of --budget-s is spent. The chosen and the default "
    "configuration are timed again, and both figures (% of the read bandwidth measured in the same run) go into the "
    "table. Records are appended as they finish; --resume continues "
    "an interrupted run in the same --out folder.",
    "Examples:",
    "  truepeak moe tune --model deepseek-v3 --weights bf16,fp8 --tokens-per-expert 1,2,4,8,16,32,64 --budget-s 600",
    "  truepeak moe tune --model deepseek-v3 --ep 8 --weights fp8,fp8:fp16 --tokens-per-expert 1,8 --out t",
    "  (the same with --resume continues it after an interrupt)",
    "--weights: FMT or FMT:ACTS (bf16, fp8, fp8_block, nvfp4, mxfp4; ACTS fp8 or fp16; default each format's). "
    "nvfp4 and mxfp4 tune the kernels that decode e2m1 in registers (each format's default layout), on any GPU; "
    "the block-scaled kernel that moe bench runs for fp4 on Blackwell (W4A4, fp4 activations) is not tuned. "
    "Units: % of the read bandwidth; µs. Needs a CUDA GPU, torch and triton.",
])


def tune(
    model: str = typer.Option(..., "--model", help="Model name or config.json (deepseek-v3, glm-5, ...)."),
    tp: int = typer.Option(1, "--tp", help="Tensor parallel: each expert's width I / N "
                           "(one table per split: not with --ep)."),
    ep: int = typer.Option(1, "--ep", help="Expert parallel: E/N local experts; only tokens "
                           "routed to them (not with --tp)."),
    weights: str = typer.Option(..., "--weights", help="Comma list of FMT or FMT:ACTS (bf16, fp8, fp8:fp16, "
                                "fp8_block, nvfp4, mxfp4)."),
    tokens_per_expert: str = typer.Option(..., "--tokens-per-expert", help="Mean tokens per expert, one per "
                                          "bucket (e.g. 1,2,4,8,16,32,64): a table entry serves the power of two "
                                          "nearest on a log scale, 1 to 1024 (3 is timed at 3 and serves 4)."),
    routing: str = typer.Option("uniform", "--routing", help="uniform | powerlaw:ALPHA | FILE of top-k ids."),
    budget_s: float = typer.Option(600.0, "--budget-s", help="Seconds for the whole search: no search step "
                                   "starts after it, but every point left still times its default once."),
    out: Optional[str] = typer.Option(None, "--out", metavar="DIR", help="Folder for results.jsonl and the table "
                                      "(default ./truepeak-moe-tune-YYYYmmdd-HHMMSS)."),
    resume: bool = typer.Option(False, "--resume", help="Continue the run in --out (its records are reused)."),
    as_json: bool = typer.Option(False, "--json", help="Print the tuned table as JSON."),
) -> None:
    try:
        from truepeak.bench.moe_tune import TuneConfig

        tpes = number_list(tokens_per_expert, "--tokens-per-expert", float, "1,2,4,8,16,32,64")
        fmts = comma_items(weights, "--weights", "bf16,fp8")
        config = TuneConfig(model=model, tp=tp, ep=ep, weights=tuple(fmts), tokens_per_expert=tuple(tpes),
                            routing=routing, budget_s=budget_s)
        from truepeak.bench.moe_tune import run_tune
        from truepeak.bench.outdir import check_out_arg, default_out_dir
        from truepeak.report.tune import ProgressBar

        check_out_arg(out, "moe tune")
        if resume and out is None:
            raise TruepeakError("--resume needs --out DIR naming the tuning run to continue")
        out_dir = out if out is not None else str(default_out_dir(command="moe-tune"))
        with ProgressBar(enabled=not as_json) as bar:
            result = run_tune(config, out_dir, resume=resume, progress=bar.update,
                              warn=lambda line: typer.echo(f"warning: {line}", err=True))
    except TruepeakError as exc:
        raise fail(flag_message(exc, {"budget_s": "--budget-s"})) from None
    table = result.table.to_dict()
    if as_json:
        typer.echo(json.dumps(table, indent=1))
    else:
        from truepeak.report.fit import stdout_width
        from truepeak.report.tune import render_table

        typer.echo("\n".join(render_table(table, stdout_width(), result.not_run, result.dropped,
                                          str(result.table_path))))
    typer.echo(f"records: {result.records_path}", err=True)


moe_app.command("tune", help=HELP)(tune)    # on the `truepeak moe` sub-app (cli/moe_app.py)

__all__ = ["HELP", "tune"]
