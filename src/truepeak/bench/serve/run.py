"""``truepeak serve`` as one call (:func:`run_serve`): launch or attach, check the server, size the prompt, run each
concurrency level, hold it against the planner, and append one ``serving`` record per level to ``results.jsonl`` the
moment the level ends (a later failure or Ctrl-C never costs a finished level).

Order of checks, each failing with one line before any load is sent: the settings (:class:`ServeConfig`), the
planner's ``--model`` / ``--gpu`` / ``--layout`` when given, the results folder, the launch
(:class:`~truepeak.bench.serve.launch.LaunchedServer`), the server (:func:`~truepeak.bench.serve.client.check_server`),
the request shape (:func:`~truepeak.bench.serve.load.calibrate`: a prompt beyond the model's context is refused
there).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from truepeak.bench.outdir import prepare_out_dir
from truepeak.bench.serve.client import ServerError, ServerInfo, check_server
from truepeak.bench.serve.compare import (PlannerFigures, PlannerTarget, model_from_name, planner_figures,
                                          planner_target)
from truepeak.bench.serve.config import ServeConfig
from truepeak.bench.serve.launch import LaunchedServer
from truepeak.bench.serve.load import Calibration, LevelRun, calibrate, run_level
from truepeak.bench.serve.stats import level_stats, percentile
from truepeak.errors import TruepeakError
from truepeak.records import (Correctness, MeasurementSummary, Record, RecordWriter, ServingMetrics, ServingWorkload,
                              make_record)


@dataclass
class ServeResult:
    """What a run did: its records (one per finished level), the folder and file they are in, the served model,
    the prompt calibration, the server's log (a launched server's), where the planner's inputs came from, and notes
    for the user in words."""

    out_dir: Path
    results_path: Path
    records: list[Record] = field(default_factory=list)
    served_model: str | None = None
    calibration: Calibration | None = None
    server_log: Path | None = None
    ready_after_s: float | None = None
    planner: str = ""
    notes: list[str] = field(default_factory=list)


class ServeInterrupted(TruepeakError):
    """Ctrl-C during a run: ``result`` holds the levels that finished (already in ``results.jsonl``), ``levels``
    how many were asked."""

    def __init__(self, result: ServeResult, levels: int):
        super().__init__(f"interrupted after {len(result.records)} of {levels} levels")
        self.result = result
        self.levels = levels


def _failure_line(stats, warmup_failed: int, warmup_sent: int) -> list[str]:
    out = []
    if stats.failed:
        reasons = "; ".join(f"{why} (x{n})" for why, n in stats.failures[:3])
        out.append(f"{stats.failed} of {stats.sent} requests failed: {reasons}")
    if warmup_failed:
        out.append(f"{warmup_failed} of {warmup_sent} warm-up requests failed")
    return out


def level_record(cfg: ServeConfig, run: LevelRun, model: str, figures: PlannerFigures | None,
                 run_config: dict) -> Record:
    """The ``serving`` record of one level (:class:`truepeak.records.ServingMetrics` for the definitions): ok when
    at least one request completed, failed (with the most frequent failure as the reason) when none did."""
    st = level_stats(run.results, run.concurrency, run.elapsed_s, cfg.output_len)
    w = ServingWorkload(model=model, concurrency=run.concurrency, input_tokens_per_request=cfg.input_len,
                        output_tokens_per_request=cfg.output_len, requests=max(1, st.sent), endpoint=cfg.endpoint,
                        warmup_requests=run.warmup_sent, duration_limit_s=cfg.duration_s)
    warnings = [*st.warnings, *_failure_line(st, run.warmup_failed, run.warmup_sent)]
    backend = f"server at {cfg.url}"
    if not st.completed:
        why = st.failures[0][0] if st.failures else "no request was sent"
        return make_record(workload=w, backend=backend, format=None, measurement=None, status="failed",
                           reason=f"no request completed: {why}", mode="streaming", run_config=run_config,
                           warnings=warnings, correctness=Correctness(passed=False, wrong=st.failed, checked=st.sent,
                                                                      reference=_REFERENCE))
    lat = st.latencies_s
    meas = MeasurementSummary(mode="streaming", n_samples=len(lat), median_s=percentile(lat, 50),
                              mean_s=sum(lat) / len(lat), min_s=min(lat), max_s=max(lat), q1_s=percentile(lat, 25),
                              q3_s=percentile(lat, 75), samples_s=lat)
    d = st.decode_tokens_per_s
    ceiling = figures.ceiling_tokens_per_s if figures else None
    expected = figures.expected_tokens_per_s if figures else None
    metrics = ServingMetrics(
        output_tokens_per_s=st.output_tokens_per_s, requests_per_s=st.requests_per_s,
        ttft_median_s=st.ttft[0], ttft_p90_s=st.ttft[1], ttft_p99_s=st.ttft[2],
        tpot_median_s=st.tpot[0], tpot_p90_s=st.tpot[1], tpot_p99_s=st.tpot[2],
        itl_median_s=st.itl[0], itl_p90_s=st.itl[1], itl_p99_s=st.itl[2],
        decode_tokens_per_s=d, elapsed_s=st.elapsed_s, mean_prompt_tokens=st.mean_prompt_tokens,
        mean_output_tokens=st.mean_output_tokens, ceiling_tokens_per_s=ceiling,
        ceiling_fraction=d / ceiling if d is not None and ceiling else None,
        expected_tokens_per_s=expected, expected_fraction=d / expected if d is not None and expected else None,
        largest_lever=figures.largest_lever if figures else None)
    return make_record(workload=w, backend=backend, format=None, measurement=meas, status="ok",
                       correctness=Correctness(passed=True, wrong=st.failed, checked=st.sent, reference=_REFERENCE),
                       derived=metrics, run_config=run_config, warnings=warnings)


_REFERENCE = ("each request must end with a finish reason and the server's usage; the failed ones are counted in "
              "wrong and left out of the statistics")


def _check_lengths(cfg: ServeConfig, info: ServerInfo, target: PlannerTarget | None, served: str) -> None:
    """Refuse lengths beyond the context the server states (vLLM's ``max_model_len``) or the model's config declares
    (``max_position_embeddings`` of the planner's model, else of the served model's local config): some servers
    generate past it without an error (``transformers serve`` does), which would measure nonsense."""
    limits = []
    if info.max_model_len:
        limits.append((info.max_model_len, "the server's max_model_len"))
    mdl = target.model if target is not None else model_from_name(served)
    mp = getattr(mdl, "max_position_embeddings", None)
    if isinstance(mp, int) and mp > 0:
        limits.append((mp, "the model config's max_position_embeddings"))
    for limit, what in limits:
        if cfg.input_len + cfg.output_len > limit:
            raise ServerError(f"--input-len {cfg.input_len} + --output-len {cfg.output_len} = "
                              f"{cfg.input_len + cfg.output_len} tokens is beyond {what} of {limit}; give lengths "
                              f"that add up to at most {limit}")


def run_serve(cfg: ServeConfig, *, on_status: Callable[[str], None] | None = None,
              on_wait: Callable[[float, float, str], None] | None = None,
              on_request: Callable[[int, int, int], None] | None = None,
              on_level: Callable[[Record], None] | None = None, environment: object = None) -> ServeResult:
    """Run ``truepeak serve`` (module docstring).

    Args:
        cfg: the settings.
        on_status: one line per step (launching, ready, calibrated, each level starting).
        on_wait: while a launched server starts: seconds waited, the timeout, the log's last line.
        on_request: after each timed request: the level's concurrency, requests done, the level's total.
        on_level: each level's record, as soon as it is written.
        environment: the :class:`truepeak.records.Environment` to store (None: none).

    Returns:
        :class:`ServeResult`.

    Raises:
        TruepeakError: the results folder is refused; ConfigError / UnknownNameError / LayoutError for the planner's
            inputs; :class:`~truepeak.bench.serve.launch.LaunchError` for a failed launch;
            :class:`~truepeak.bench.serve.client.ServerError` for a server that cannot be driven.
        ServeInterrupted: Ctrl-C; the finished levels are in ``results.jsonl`` and in the exception's result.
    """
    say = on_status or (lambda _line: None)
    target, planner = (planner_target(cfg.model, cfg.gpu, cfg.gpus, cfg.layout, detect=cfg.launch is not None)
                       if cfg.model is not None else (None, ""))
    out = prepare_out_dir(cfg.out_dir, command="serve")
    result = ServeResult(out_dir=out, results_path=out / "results.jsonl", planner=planner)
    server = LaunchedServer(cfg.launch_argv, cfg.url, out / "server.log") if cfg.launch is not None else None
    try:
        if server is not None:
            say(f"launching: {cfg.launch} (log: {server.log_path})")
            result.server_log = server.log_path
            server.start()
            result.ready_after_s = server.wait_ready(
                cfg.ready_timeout_s, None if on_wait is None else (lambda s, line: on_wait(s, cfg.ready_timeout_s,
                                                                                           line)))
            say(f"ready after {result.ready_after_s:.1f} s at {cfg.url}")
        info = check_server(cfg.url)
        model = cfg.served_model or info.models[0]
        result.served_model = model
        if cfg.served_model is not None and cfg.served_model not in info.models:
            result.notes.append(f"--served-model {cfg.served_model} is not among the models the server lists "
                                f"({', '.join(info.models[:4])}); sent as given")
        if target is None:
            target, result.planner = planner_target(None, cfg.gpu, cfg.gpus, cfg.layout, served_model=model,
                                                    detect=cfg.launch is not None or cfg.gpu is not None)
        if target is None:
            result.notes.append(f"planner columns n/a: {result.planner}")
        _check_lengths(cfg, info, target, model)
        cal = calibrate(cfg, model)
        result.calibration = cal
        say(f"prompt: {cal.words} words = {cal.prompt_tokens} tokens by the server's usage"
            + ("" if cal.exact else f" (closest to the {cfg.input_len} asked)"))
        if not cal.exact:
            result.notes.append(f"the prompt is {cal.prompt_tokens} tokens, not the {cfg.input_len} asked: the "
                                "closest the server's tokenizer gave")
        run_config = {**cfg.to_dict(), "served_model": model, "prompt_words": cal.words,
                      "prompt_tokens": cal.prompt_tokens, "server_ready_s": result.ready_after_s,
                      "planner": result.planner or None, "planner_context": cfg.planner_context,
                      "device_name": _device_name(target, cfg)}
        with RecordWriter(result.results_path) as writer:
            for c in cfg.concurrency:
                say(f"concurrency {c}: {cfg.warmup_for(c)} warm-up, then "
                    + (f"{cfg.requests_for(c)} requests" if cfg.duration_s is None else
                       f"{cfg.duration_s:g} s" + (f" (at most {cfg.requests} requests)" if cfg.requests else "")))
                if server is not None and server.exited() is not None:
                    raise ServerError(f"the launched server exited with status {server.exited()} before "
                                      f"concurrency {c} (log: {server.log_path})")
                run = run_level(cfg, model, cal.words, c,
                                None if on_request is None else (lambda done, total, c=c: on_request(c, done, total)))
                figures = planner_figures(target, c, cfg.planner_context) if target is not None else None
                rec = level_record(cfg, run, model, figures, run_config)
                if environment is not None:
                    rec = rec.replace(env=environment)
                writer.write(rec)
                result.records.append(rec)
                if on_level is not None:
                    on_level(rec)
    except KeyboardInterrupt:
        raise ServeInterrupted(result, len(cfg.concurrency)) from None
    finally:
        if server is not None:
            server.stop()
    return result


def _device_name(target: PlannerTarget | None, cfg: ServeConfig) -> str | None:
    """The GPU the levels ran on, for the report's grouping: the planner's accelerator when it was detected or
    given, else None (an attached server's device is not known here)."""
    acc = getattr(target, "accelerator", None)
    return getattr(acc, "name", None) if acc is not None and (cfg.launch is not None or cfg.gpu) else None


__all__ = ["run_serve", "ServeResult", "ServeInterrupted", "level_record"]
