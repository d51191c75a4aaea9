"""``truepeak serve``: launch or attach to an OpenAI-compatible inference server, prove it is up, measure streaming
decode at rising concurrency, and hold each level against the MoE planner.

Modules, one concept each:

- :mod:`~truepeak.bench.serve.config`: the settings, checked when built (:class:`ServeConfig`);
- :mod:`~truepeak.bench.serve.launch`: starting a server in its own process group, its log, its readiness, stopping it;
- :mod:`~truepeak.bench.serve.client`: the server check and one timed streaming request (httpx);
- :mod:`~truepeak.bench.serve.load`: the prompt's size and one concurrency level;
- :mod:`~truepeak.bench.serve.stats`: TTFT, TPOT, inter-token latency, rates;
- :mod:`~truepeak.bench.serve.compare`: the planner's figures at a level's batch;
- :mod:`~truepeak.bench.serve.run`: the whole run, one record per level (:func:`run_serve`).

Importing this package imports neither httpx nor torch.
"""

from truepeak.bench.serve.client import ServerError, ServerInfo, check_server
from truepeak.bench.serve.compare import PlannerFigures, PlannerTarget, planner_figures, planner_target
from truepeak.bench.serve.config import ENDPOINTS, ServeConfig, parse_concurrency
from truepeak.bench.serve.launch import LaunchedServer, LaunchError
from truepeak.bench.serve.run import ServeInterrupted, ServeResult, level_record, run_serve
from truepeak.bench.serve.stats import LevelStats, RequestResult, level_stats, percentile

__all__ = ["ServeConfig", "ENDPOINTS", "parse_concurrency", "LaunchedServer", "LaunchError", "ServerError",
           "ServerInfo", "check_server", "PlannerFigures", "PlannerTarget", "planner_figures", "planner_target",
           "run_serve", "ServeResult", "ServeInterrupted", "level_record", "RequestResult", "LevelStats",
           "level_stats", "percentile"]
