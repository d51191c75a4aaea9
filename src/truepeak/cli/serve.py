"""`truepeak serve`: launch or attach to an OpenAI-compatible inference server, prove it is up, measure streaming decode
at rising concurrency, and hold each level against the MoE planner.

Thin: parse the options, build :class:`truepeak.bench.serve.ServeConfig` (which checks them), call
:func:`truepeak.bench.serve.run_serve`, render through :mod:`truepeak.report.serve`. Bad input, a failed launch and a
server that cannot be driven print ``error: <one line>`` (status 2). After Ctrl-C the finished levels are rendered,
their records are already in results.jsonl, and the status is 130.
"""

from __future__ import annotations

import json
import shlex
from typing import Optional

import typer

from truepeak.cli.app import app, invoked_argv
from truepeak.cli.options import help_text

HELP = help_text([
    "Measure an inference server the way it is used: streaming requests at rising concurrency, with TTFT, TPOT and "
    "inter-token latency (median, p90, p99), output tokens/s, requests/s and errors per level, and each level held "
    "against the MoE planner's ceiling at batch = concurrency (% of ceiling; expected figure and largest lever where "
    "the planner gives them, else n/a).",
    "--launch \"CMD\" starts the server itself, in its own process group with its log in OUT/server.log, and says at "
    "once when the launch failed: the command or script does not exist, the port is already taken, the process "
    "exited (with its last log lines), or neither /health nor /v1/models answered within --ready-timeout. It stops "
    "what it started on exit, on error, on Ctrl-C and on SIGTERM. --url http://HOST:PORT alone attaches to a running server "
    "(vLLM, SGLang, TensorRT-LLM, transformers serve).",
    "Each request asks for --output-len tokens after a prompt sized to --input-len tokens by the server's own usage "
    "counts. Per level: --warmup untimed requests, then --requests (default 4 x concurrency, at least 8) or "
    "--duration seconds. A failed request is counted and the run goes on; each level's record is appended to "
    "OUT/results.jsonl as it finishes, and OUT/report.html has the table and the charts.",
    "Examples:",
    "  truepeak serve --launch \"vllm serve Qwen/Qwen3-30B-A3B --port 8000\" --concurrency 1,8,64 --model "
    "qwen3-30b-a3b --gpu h200 --ignore-eos",
    "  truepeak serve --url http://127.0.0.1:8000 --concurrency 1,4,16 --input-len 512 --output-len 128",
    "  truepeak serve --launch \"transformers serve ./tiny-moe --port 8000\" --concurrency 1,4 --requests 8",
    "Units: times in ms as labelled; tokens/s are output tokens of the whole server.",
])


@app.command("serve", help=HELP)
def serve(
    ctx: typer.Context,
    url: Optional[str] = typer.Option(None, "--url", metavar="URL", help="The server's base address, "
                                      "http://HOST:PORT (default with --launch: 127.0.0.1 at the command's --port, else 8000)."),
    launch: Optional[str] = typer.Option(None, "--launch", metavar="CMD", help="The command that starts the "
                                         "server, quoted (no pipes or &&: put them in a script)."),
    concurrency: str = typer.Option("1,8,64", "--concurrency", "-c", help="Requests in flight at once, one level "
                                    "each: a comma list, e.g. 1,8,64."),
    input_len: int = typer.Option(128, "--input-len", help="Prompt tokens per request."),
    output_len: int = typer.Option(128, "--output-len", help="Generated tokens per request (>= 2)."),
    requests: Optional[int] = typer.Option(None, "--requests", help="Timed requests per level (default 4 x "
                                           "concurrency, at least 8; with --duration: at most this many)."),
    duration: Optional[float] = typer.Option(None, "--duration", metavar="SECONDS", help="Seconds per level after "
                                             "which no new request starts."),
    warmup: Optional[int] = typer.Option(None, "--warmup", help="Untimed requests per level (default: one per "
                                         "slot, = concurrency)."),
    endpoint: str = typer.Option("completions", "--endpoint", help="completions (/v1/completions) or chat "
                                 "(/v1/chat/completions)."),
    served_model: Optional[str] = typer.Option(None, "--served-model", help="Model name sent with each request "
                                               "(default: the first the server lists at /v1/models)."),
    ignore_eos: bool = typer.Option(False, "--ignore-eos", help="Ask the server to generate --output-len tokens "
                                    "even past an end-of-sequence token (vLLM, SGLang; transformers serve refuses "
                                    "it)."),
    ready_timeout: float = typer.Option(600.0, "--ready-timeout", metavar="SECONDS", help="How long a launched "
                                        "server has to answer /health or /v1/models."),
    request_timeout: float = typer.Option(300.0, "--request-timeout", metavar="SECONDS", help="How long a request "
                                          "may wait for its next byte before it counts as failed."),
    model: Optional[str] = typer.Option(None, "--model", "-m", help="What the planner plans: a preset "
                                        "(qwen3-30b-a3b, deepseek-v3, ...) or config.json; default: the served "
                                        "model when it is a preset or a local folder."),
    gpu: Optional[str] = typer.Option(None, "--gpu", "-g", help="GPU type for the planner (catalog name); default "
                                      "with --launch: the GPU detected here."),
    gpus: Optional[int] = typer.Option(None, "--gpus", "-n", help="GPUs the server runs on (planner; default: the "
                                       "--layout's count, else 1)."),
    layout: Optional[str] = typer.Option(None, "--layout", help="The server's parallel layout for the planner "
                                         "(tp8, ep8, dp8ep8, ...)."),
    out: Optional[str] = typer.Option(None, "--out", metavar="DIR", help="Folder for results.jsonl, report.html "
                                      "and server.log (default ./truepeak-serve-YYYYmmdd-HHMMSS)."),
    as_json: bool = typer.Option(False, "--json", help="Print this run's records as JSON on stdout."),
    no_progress: bool = typer.Option(False, "--no-progress", help="No progress bar on stderr."),
) -> None:
    from truepeak.bench.outdir import check_out_arg
    from truepeak.bench.serve import ServeConfig, ServeInterrupted, parse_concurrency, run_serve
    from truepeak.report.serve import Progress

    check_out_arg(out, "serve")
    argv = invoked_argv(ctx) or ["truepeak", "serve"]
    cfg = ServeConfig(url=url, launch=launch, concurrency=parse_concurrency(concurrency), input_len=input_len,
                      output_len=output_len, requests=requests, duration_s=duration, warmup=warmup,
                      endpoint=endpoint.strip().lower(), served_model=served_model, ignore_eos=ignore_eos,
                      ready_timeout_s=ready_timeout, request_timeout_s=request_timeout, model=model, gpu=gpu,
                      gpus=gpus, layout=layout, out_dir=out, argv=tuple(argv))
    from truepeak.bench.environment import environment

    env = environment(argv, device=None)
    with Progress(enabled=not no_progress and not as_json) as bar:
        try:
            result = run_serve(cfg, on_status=bar.line, on_wait=bar.wait, on_request=bar.request, environment=env)
        except ServeInterrupted as stop:
            result = stop.result
            done = len(result.records)
            rest = rest_command(argv, cfg.concurrency[done:], f"{result.out_dir}-rest")
            where = f"the finished ones are in {result.results_path}" if done else "no level finished"
            notice = f"Interrupted after {done} of {stop.levels} levels; {where}; the rest: {rest}"
            _finish(result, as_json, notice)
            raise typer.Exit(130) from None
    _finish(result, as_json, None)


def rest_command(argv: list[str], levels, out_dir: str) -> str:
    """The command that measures the ``levels`` an interrupted run did not reach, into a new folder ``out_dir``
    (a serve folder is never appended to): the command line as typed with its ``--concurrency`` / ``-c`` and
    ``--out`` replaced."""
    keep: list[str] = []
    skip = False
    for arg in argv:
        if skip:
            skip = False
            continue
        name = arg.split("=", 1)[0]
        if name in ("--concurrency", "-c", "--out"):
            skip = "=" not in arg
            continue
        keep.append(arg)
    return shlex.join([*keep, "--concurrency", ",".join(str(c) for c in levels), "--out", out_dir])


def _finish(result, as_json: bool, notice: Optional[str]) -> None:
    """Render the finished levels (table or JSON), write report.html, and say where everything is on stderr."""
    from truepeak.report.html import write_run_report
    from truepeak.report.serve import render_serving

    for note in result.notes:
        typer.echo(f"note: {note}", err=True)
    # report.html before stdout: a reader that closes the pipe early (`| head`) ends the command at the first print
    page = (write_run_report(result.out_dir, warn=lambda line: typer.echo(f"warning: {line}", err=True),
                             notice=notice) if result.records else None)
    if as_json:
        typer.echo(json.dumps([r.to_dict() for r in result.records], indent=1, ensure_ascii=False))
    elif result.records:
        render_serving(result.records, notice=notice)
    elif notice:
        typer.echo(notice)
    if result.records:
        typer.echo(f"records: {result.results_path}", err=True)
        if page is not None:
            typer.echo(f"report: {page}", err=True)
    if result.server_log is not None:
        typer.echo(f"server log: {result.server_log}", err=True)
    failed = [r for r in result.records if not r.ok]
    if failed:
        typer.echo(f"warning: {len(failed)} level(s) had no completed request: "
                   + "; ".join(f"concurrency {r.workload.concurrency}: {r.reason}" for r in failed[:3]), err=True)
