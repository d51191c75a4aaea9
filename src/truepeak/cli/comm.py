"""`truepeak comm`: nccl-tests-grade collective benchmarks (all_reduce, all_gather, reduce_scatter, all_to_all) with
algbw/busbw, a correctness count per case, a CUDA-graph mode, and a fitted α–β model per op.

Thin adapter: parse → :class:`truepeak.bench.comm.config.CommConfig` (checks itself before torch is imported) →
:func:`truepeak.bench.comm.launch.run_comm` (torchrun workers; rank 0 writes results.jsonl) → render
(:mod:`truepeak.report.comm`: tables on stdout, summary.md beside the records, the warning and interruption lines).
Without --out the records go to a new folder ./truepeak-comm-YYYYmmdd-HHMMSS (on node 0; other nodes write none). Bad input and an unusable machine print
``error: <one line>`` (status 2). After Ctrl-C the finished cases are still rendered: the tables (or --json records)
and summary.md end with "Interrupted after N of M cases; run again with: <command>" (:func:`rerun_command`, which
continues with --resume), and one
line on stderr, after torchrun's own warning, says where the records are; the exit status is 130.
"""

from __future__ import annotations

import json
import shlex
from pathlib import Path
from typing import Optional

import typer

from truepeak.cli.app import app, invoked_argv
from truepeak.cli.options import help_text
from truepeak.report.comm import (
    failed_cases_warning, interrupted_line, interrupted_notice, render_tables, summary_markdown,
)

HELP = help_text([
    "Measure collectives the way nccl-tests does: per op and message size S, the time per call (median of --iters "
    "after --warmup; max over ranks), algbw = S / t, busbw = algbw × factor (all_reduce 2(n−1)/n; all_gather, "
    "reduce_scatter, all_to_all (n−1)/n) and #wrong (output elements that differ from the exact result).",
    "S is nccl-tests' total size: the all_reduce buffer, the all_gather output, the reduce_scatter input, one rank's "
    "all_to_all send buffer. busbw compares with the per-link bandwidth; under NVLink SHARP (NVLS) it is no longer link "
    "traffic. The CUDA-graph mode shows the per-call latency a decode step under CUDA graphs sees.",
    "Fits t(S) = α + S·factor/busbw per op and mode (the α–β model the MoE planner uses: truepeak moe plan --measured "
    "DIR/results.jsonl).",
    "Workers start through torchrun (one per GPU); for several nodes pass --nnodes, --node-rank and --rdzv-endpoint.",
    "Examples:",
    "  truepeak comm --nproc-per-node 2 --out comm-h200x2",
    "  truepeak comm --nproc-per-node 8 --ops all_reduce --sizes 4K:1M    (decode-size allreduce on 8 GPUs)",
    "  truepeak comm --nproc-per-node 2 --backend gloo --sizes 1K:64K    (CPU, no GPU needed)",
])


@app.command("comm", help=HELP)
def comm(
    ctx: typer.Context,
    nproc_per_node: Optional[int] = typer.Option(None, "--nproc-per-node", help="Processes (GPUs) on this node; "
                                                 "default: every visible GPU (nccl) or 2 (gloo)."),
    ops: Optional[str] = typer.Option(None, "--ops", help="Comma list: all_reduce, all_gather, reduce_scatter, "
                                      "all_to_all (aliases allreduce, ag, rs, a2a...). Default: all four."),
    sizes: str = typer.Option("1K:1G", "--sizes", help="Message sizes S: START:END[:FACTOR] (K = 1024 B; FACTOR "
                              "2 when left out, as nccl-tests -f 2), or a list like 12K,96K,768K."),
    dtype: str = typer.Option("bf16", "--dtype",
                              help="Element type: bf16, fp16, fp32, fp64, int8, uint8, int32, int64."),
    iters: int = typer.Option(20, "--iters", help="Timed calls per case (nccl-tests -n)."),
    warmup: int = typer.Option(5, "--warmup", help="Untimed calls first (nccl-tests -w)."),
    graph: bool = typer.Option(True, "--graph/--no-graph", help="Also time calls replayed from a CUDA graph (NCCL)."),
    backend: str = typer.Option("nccl", "--backend", help="nccl (GPUs) or gloo (CPU tensors; no GPU needed)."),
    api: Optional[str] = typer.Option(None, "--api", help="nccl: call libnccl directly, out of place, as nccl-tests "
                                      "(default with nccl); torch: through torch.distributed, what a PyTorch program "
                                      "sees (c10d's per-call overhead included; the only one with gloo)."),
    out: Optional[str] = typer.Option(None, "--out", metavar="DIR",
                                      help="Folder for results.jsonl (appended to) and summary.md (default "
                                           "./truepeak-comm-YYYYmmdd-HHMMSS)."),
    as_json: bool = typer.Option(False, "--json", help="Print this run's records as JSON on stdout."),
    nnodes: int = typer.Option(1, "--nnodes", help="Nodes (torchrun --nnodes)."),
    node_rank: int = typer.Option(0, "--node-rank", help="This node's rank (torchrun --node-rank)."),
    rdzv_endpoint: Optional[str] = typer.Option(None, "--rdzv-endpoint", help="HOST:PORT of node 0 (torchrun)."),
    rdzv_backend: str = typer.Option("c10d", "--rdzv-backend", help="torchrun rendezvous backend."),
    rdzv_id: Optional[str] = typer.Option(None, "--rdzv-id", help="torchrun rendezvous id (same on every node)."),
    master_addr: Optional[str] = typer.Option(None, "--master-addr", help="Static rendezvous address (torchrun)."),
    master_port: Optional[int] = typer.Option(None, "--master-port", help="Static rendezvous port (torchrun)."),
    rdzv_timeout: float = typer.Option(60.0, "--rdzv-timeout", help="Seconds to wait for the rendezvous."),
    nccl_debug_log: bool = typer.Option(False, "--nccl-debug-log", help="Log NCCL's algorithm/protocol per size "
                                        "(NCCL_DEBUG_SUBSYS=TUNING); timings then include logging: use a separate run."),
    fit: bool = typer.Option(True, "--fit/--no-fit", help="Fit α and β per op and mode."),
    nccl_library: Optional[str] = typer.Option(None, "--nccl-library", metavar="PATH",
                                               help="The NCCL shared library --api nccl loads (default: the one "
                                                    "torch loaded, libnccl.so.2 of the nvidia-nccl wheel)."),
    debug: bool = typer.Option(False, "--debug", help="A failing worker also prints its Python traceback."),
    resume: bool = typer.Option(False, "--resume", help="Continue the sweep in --out: cases its results.jsonl holds "
                                "as ok are not measured again (the same ranks, dtype, --iters, --warmup, backend and "
                                "API are required)."),
    no_progress: bool = typer.Option(False, "--no-progress", help="No progress bar."),
) -> None:
    from truepeak.bench.comm.config import CommConfig
    from truepeak.bench.comm.launch import CommInterrupted, run_comm
    from truepeak.bench.outdir import check_out_arg, default_out_dir
    from truepeak.comm.model import canonical_dtype
    from truepeak.comm.sweep import parse_ops, parse_sizes

    check_out_arg(out, "comm")
    if resume and out is None and node_rank == 0:
        from truepeak.errors import TruepeakError

        raise TruepeakError("--resume needs --out DIR naming the sweep to continue")
    op_list = parse_ops(ops)
    size_list = parse_sizes(sizes)
    dtype = canonical_dtype(dtype)
    backend = backend.strip().lower()
    argv = invoked_argv(ctx) or ["truepeak", "comm"]
    # node 0 keeps its records; the other nodes write none (a temporary folder holds their worker files)
    out_dir = out if out is not None or node_rank > 0 else str(default_out_dir(command="comm"))
    cfg = CommConfig(nproc_per_node=nproc_per_node, ops=op_list, sizes=size_list, dtype=dtype,
                     iters=iters, warmup=warmup, graph=graph, backend=backend,
                     api=None if api is None else api.strip().lower(),
                     out_dir=out_dir, nnodes=nnodes, node_rank=node_rank,
                     rdzv_endpoint=rdzv_endpoint, rdzv_backend=rdzv_backend, rdzv_id=rdzv_id, master_addr=master_addr,
                     master_port=master_port, rdzv_timeout_s=rdzv_timeout, nccl_debug_log=nccl_debug_log, fit=fit,
                     nccl_library=nccl_library, debug=debug, progress=not no_progress and not as_json, argv=argv,
                     resume=resume)
    try:
        result = run_comm(cfg)
    except CommInterrupted as stop:
        _report_interrupted(stop, argv, out, as_json, node_rank)
        raise typer.Exit(130) from None
    for note in result.notes:
        typer.echo(f"note: {note}", err=True)
    if node_rank > 0:
        typer.echo(f"node {node_rank} done; results are written on node 0", err=True)
        return
    summary = _write_summary(result, argv)  # before stdout: a closed pipe (`| head`) must not cost the file
    if as_json:
        typer.echo(json.dumps([r.to_dict() for r in result.records], indent=1, ensure_ascii=False))
    else:
        render_tables(result.records, result.algos)
    typer.echo(f"records: {result.results_path}", err=True)
    if summary is not None:
        typer.echo(f"summary: {summary}", err=True)
    warning = failed_cases_warning(result.records)
    if warning is not None:
        typer.echo(warning, err=True)


def rerun_command(argv: list[str], out: Optional[str], out_dir: Optional[str]) -> str:
    """The command that continues an interrupted ``truepeak comm`` in the same folder: the command line as typed,
    with ``--resume`` and, when the folder was the default one (``out`` None), ``--out DIR`` added. The finished
    cases are not measured again; the new records are appended to results.jsonl there."""
    extra = [*([] if "--resume" in argv else ["--resume"]), *(["--out", out_dir] if out is None and out_dir else [])]
    return shlex.join([*argv, *extra])


def _report_interrupted(stop, argv: list[str], out: Optional[str], as_json: bool, node_rank: int) -> None:
    """After Ctrl-C: the finished cases on stdout (tables or JSON, as a finished run prints them) followed by the
    "Interrupted after N of M cases" line, summary.md with the same line, and on stderr one line saying where the
    records are and the command that runs the sweep again. It comes after torchrun's own warning, so it is the last
    word."""
    result = stop.result
    done = len(result.collectives())
    if node_rank > 0 or result.results_path is None:
        typer.echo(interrupted_line(done, stop.n_cases, None, None), err=True)
        return
    command = rerun_command(argv, out, result.out_dir)
    notice = interrupted_notice(done, stop.n_cases, command)
    if as_json:
        typer.echo(json.dumps([r.to_dict() for r in result.records], indent=1, ensure_ascii=False))
    else:
        if result.records:
            render_tables(result.records, result.algos)
        typer.echo(notice)
    summary = _write_summary(result, argv, notice)
    typer.echo(interrupted_line(done, stop.n_cases, result.results_path, command), err=True)
    if summary is not None:
        typer.echo(f"summary so far: {summary}", err=True)


def _write_summary(result, argv: list[str], notice: Optional[str] = None) -> Optional[Path]:
    """summary.md beside the records (``notice`` under the title: an interrupted run's line); on an OS error a
    warning on stderr and None (the records are safe in results.jsonl)."""
    path = Path(result.out_dir) / "summary.md"
    try:
        path.write_text(summary_markdown(result.records, result.algos, shlex.join(argv), notice), encoding="utf-8")
    except OSError as exc:
        typer.echo(f"warning: could not write {path}: {exc.strerror or exc}", err=True)
        return None
    return path

