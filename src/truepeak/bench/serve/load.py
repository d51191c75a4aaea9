"""Driving load: the prompt sized to the wanted token count (:func:`calibrate`), and one concurrency level
(:func:`run_level`): a warm-up, then ``concurrency`` workers that each send the next request as soon as their last
one ended, until the level's request count is sent or its duration has passed. Every loop is bounded: by the request
count (at most :data:`truepeak.bench.serve.config.MAX_LEVEL_REQUESTS`), and each request by its timeout.

httpx is imported inside the functions.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import dataclass

from truepeak.bench.serve.client import ServerError, httpx_module, prompt_text, request_body, stream_request
from truepeak.bench.serve.config import ServeConfig
from truepeak.bench.serve.stats import RequestResult

#: Requests :func:`calibrate` may send to size the prompt.
CALIBRATION_TRIES = 4


@dataclass(frozen=True)
class Calibration:
    """The prompt size found: ``words`` words gave ``prompt_tokens`` tokens by the server's usage (``exact``: equal
    to the ``input_len`` asked)."""

    words: int
    prompt_tokens: int
    exact: bool


def client_for(cfg: ServeConfig, concurrency: int):
    """An ``httpx.AsyncClient`` with a connection per request in flight and the request timeout."""
    httpx = httpx_module()
    return httpx.AsyncClient(timeout=cfg.request_timeout_s,
                             limits=httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency))


async def _one(client, cfg: ServeConfig, model: str, words: int, index: int, max_tokens: int) -> RequestResult:
    body = request_body(cfg.endpoint, model, prompt_text(words, index), max_tokens, cfg.ignore_eos)
    return await stream_request(client, cfg.url, cfg.path, body, cfg.request_timeout_s)


async def _calibrate(cfg: ServeConfig, model: str) -> Calibration:
    words, best = cfg.input_len, None
    async with client_for(cfg, 1) as client:
        for _ in range(CALIBRATION_TRIES):
            r = await _one(client, cfg, model, words, 0, 2)
            if not r.ok:
                raise ServerError(f"the server refused a request of {words} prompt words and 2 output tokens "
                                  f"({cfg.endpoint}, model {model!r}): {r.error}")
            if r.prompt_tokens is None:
                return Calibration(words, cfg.input_len, False)
            if best is None or abs(r.prompt_tokens - cfg.input_len) < abs(best.prompt_tokens - cfg.input_len):
                best = Calibration(words, r.prompt_tokens, r.prompt_tokens == cfg.input_len)
            if best.exact:
                break
            # tokens grow about linearly with words; step by the gap, scaled by the tokens per word seen
            per_word = max(r.prompt_tokens / words, 1e-9)
            step = round((cfg.input_len - r.prompt_tokens) / per_word) or (1 if r.prompt_tokens < cfg.input_len
                                                                            else -1)
            words = max(1, words + step)
    return best


def calibrate(cfg: ServeConfig, model: str) -> Calibration:
    """Find the number of prompt words whose prompt the server counts as ``cfg.input_len`` tokens (chat templates
    and tokenizers add or merge tokens), with up to :data:`CALIBRATION_TRIES` short requests; the closest found
    when none is exact.

    Raises:
        ServerError: the server refused the request (an error status, a stream that stops): one line with its
            words, before any level runs (a prompt beyond the model's context fails here).
    """
    return asyncio.run(_calibrate(cfg, model))


@dataclass(frozen=True)
class LevelRun:
    """What one level sent: its timed requests' results in the order they ended, the wall time from the first sent
    to the last ended, and the warm-up's failures."""

    concurrency: int
    results: tuple[RequestResult, ...]
    elapsed_s: float
    warmup_sent: int
    warmup_failed: int


async def _level(cfg: ServeConfig, model: str, words: int, concurrency: int,
                 on_request: Callable[[int, int], None] | None) -> LevelRun:
    async with client_for(cfg, concurrency) as client:
        n_warm = cfg.warmup_for(concurrency)
        warm = await asyncio.gather(*(_one(client, cfg, model, words, 1000 + i, cfg.output_len)
                                      for i in range(n_warm)))
        total = cfg.requests_for(concurrency)
        results: list[RequestResult] = []
        next_index = 0
        t0 = time.perf_counter()
        deadline = None if cfg.duration_s is None else t0 + cfg.duration_s

        async def worker() -> None:
            nonlocal next_index
            while next_index < total and (deadline is None or time.perf_counter() < deadline):
                i = next_index
                next_index += 1
                results.append(await _one(client, cfg, model, words, i, cfg.output_len))
                if on_request is not None:
                    on_request(len(results), total)

        await asyncio.gather(*(worker() for _ in range(concurrency)))
        elapsed = time.perf_counter() - t0
    return LevelRun(concurrency, tuple(results), elapsed, n_warm, sum(1 for r in warm if not r.ok))


def run_level(cfg: ServeConfig, model: str, words: int, concurrency: int,
              on_request: Callable[[int, int], None] | None = None) -> LevelRun:
    """Run one level: ``cfg.warmup_for(concurrency)`` untimed requests at once, then ``concurrency`` workers sending
    ``cfg.requests_for(concurrency)`` requests (or until ``cfg.duration_s`` has passed) of ``words`` prompt words and
    ``cfg.output_len`` tokens. A failed request is counted in the results and the level goes on.

    Args:
        on_request: called after each timed request with the number done and the level's total.
    """
    return asyncio.run(_level(cfg, model, words, concurrency, on_request))


__all__ = ["Calibration", "calibrate", "LevelRun", "run_level", "CALIBRATION_TRIES", "client_for"]
