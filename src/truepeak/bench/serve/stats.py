"""The statistics of one concurrency level, from the requests it sent: TTFT, TPOT and inter-token latency with their
median, 90th and 99th percentiles, output tokens and requests per second, the decode rate, and the failures counted.

Definitions as vLLM's serving benchmark has them (vllm-project/vllm, ``vllm/benchmarks/serve.py``): TTFT = first
generated token's arrival - request sent; TPOT = (last token's arrival - first token's) / (output tokens - 1), one
value per request with at least two tokens; ITL = the gaps between successive streamed chunks, pooled over the level's
requests; percentiles by linear interpolation between the closest ranks (``numpy.percentile``'s default). Output
tokens are the server's usage counts, not the chunks counted.

Standard library only.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from truepeak.errors import TruepeakError


@dataclass(frozen=True)
class RequestResult:
    """One request as the client saw it. Times in seconds after the request was sent.

    Attributes:
        error: why it failed, in words (None: it completed: a finish reason and the usage arrived).
        ttft_s: the first chunk that carried text; latency_s: the end of the stream (None when it never ended).
        chunk_times_s: the arrival of each chunk that carried text, in order.
        prompt_tokens, output_tokens: the server's usage counts (None without a usage chunk).
        finish_reason: ``"length"`` (stopped at max_tokens), ``"stop"`` (an end-of-sequence token), ...
    """

    error: str | None = None
    ttft_s: float | None = None
    latency_s: float | None = None
    chunk_times_s: tuple[float, ...] = ()
    prompt_tokens: int | None = None
    output_tokens: int | None = None
    finish_reason: str | None = None

    @property
    def ok(self) -> bool:
        return self.error is None

    @property
    def tpot_s(self) -> float | None:
        """(latency - TTFT) / (output tokens - 1); None with fewer than two output tokens."""
        if not self.ok or self.ttft_s is None or self.latency_s is None or not self.output_tokens \
                or self.output_tokens < 2:
            return None
        return (self.latency_s - self.ttft_s) / (self.output_tokens - 1)

    @property
    def itls_s(self) -> tuple[float, ...]:
        """The gaps between successive text chunks."""
        t = self.chunk_times_s
        return tuple(b - a for a, b in zip(t, t[1:]))


def percentile(values: Sequence[float], q: float) -> float | None:
    """The ``q``-th percentile (0..100) of ``values`` by linear interpolation between closest ranks, as
    ``numpy.percentile(values, q)`` with its default method; None for no values.

    Raises:
        TruepeakError: ``q`` outside 0..100.
    """
    if not 0 <= q <= 100:
        raise TruepeakError(f"percentile {q!r} must be in 0..100")
    xs = sorted(values)
    if not xs:
        return None
    pos = (len(xs) - 1) * q / 100.0
    lo = math.floor(pos)
    hi = min(lo + 1, len(xs) - 1)
    return xs[lo] + (xs[hi] - xs[lo]) * (pos - lo)


@dataclass(frozen=True)
class LevelStats:
    """One level's figures (module docstring); times in seconds, rates per second. ``failures``: the distinct
    reasons of the failed requests with their counts, most frequent first; ``warnings``: what the level's numbers
    should be read with (early stops, usage that disagrees with the stream)."""

    concurrency: int
    sent: int
    completed: int
    elapsed_s: float
    output_tokens_per_s: float | None
    requests_per_s: float | None
    ttft: tuple[float | None, float | None, float | None]
    tpot: tuple[float | None, float | None, float | None]
    itl: tuple[float | None, float | None, float | None]
    decode_tokens_per_s: float | None
    mean_prompt_tokens: float | None
    mean_output_tokens: float | None
    failures: tuple[tuple[str, int], ...]
    warnings: tuple[str, ...]
    latencies_s: tuple[float, ...]

    @property
    def failed(self) -> int:
        return self.sent - self.completed


#: TPOT p90 above this multiple of the median marks a level noisy. A decode step at a fixed concurrency changes
#: little from token to token, so a slow tail means warm-up in the window or other load on the server.
SPREAD_LIMIT = 2.0


def _three(values: Sequence[float]) -> tuple[float | None, float | None, float | None]:
    return percentile(values, 50), percentile(values, 90), percentile(values, 99)


def level_stats(results: Sequence[RequestResult], concurrency: int, elapsed_s: float, output_len: int) -> LevelStats:
    """The figures of a level whose ``results`` took ``elapsed_s`` of wall time (first request sent to last one
    ended), the requests having asked for ``output_len`` tokens each.

    ``decode_tokens_per_s`` = concurrency / median TPOT: ``concurrency`` sequences each advancing one token per TPOT,
    what a decode-step model predicts for a batch of that size.

    Raises:
        TruepeakError: ``elapsed_s`` not > 0 while requests completed, or ``concurrency`` < 1.
    """
    if concurrency < 1:
        raise TruepeakError(f"concurrency {concurrency!r} must be >= 1")
    done = [r for r in results if r.ok]
    if done and not elapsed_s > 0:
        raise TruepeakError(f"elapsed time {elapsed_s!r} must be > 0 s when requests completed")
    out_tokens = sum(r.output_tokens or 0 for r in done)
    tpots = [t for t in (r.tpot_s for r in done) if t is not None]
    ttfts = [r.ttft_s for r in done if r.ttft_s is not None]
    itls = [g for r in done for g in r.itls_s]
    tpot = _three(tpots)
    counts: dict[str, int] = {}
    for r in results:
        if not r.ok:
            counts[str(r.error)] = counts.get(str(r.error), 0) + 1
    warnings: list[str] = []
    short = [r for r in done if (r.output_tokens or 0) < output_len]
    if short:
        warnings.append(f"{len(short)} of {len(done)} completed requests generated fewer than the {output_len} tokens "
                        f"asked (finish reason {short[0].finish_reason or 'none'}: an end-of-sequence token); "
                        "--ignore-eos asks servers that accept it (vLLM, SGLang) to go on")
    more = [r for r in done if len(r.chunk_times_s) > (r.output_tokens or 0) + 1]
    if more:
        r = more[0]
        warnings.append(f"{len(more)} request(s) streamed more text chunks than the usage's output tokens "
                        f"({len(r.chunk_times_s)} chunks, {r.output_tokens} tokens): the server's usage undercounts "
                        "or a chunk repeats the prompt; ITL is per chunk, TPOT per usage token")
    if tpot[0] and tpot[1] and tpot[1] > SPREAD_LIMIT * tpot[0]:
        warnings.append(f"noisy: TPOT p90 {tpot[1] * 1e3:.4g} ms is {tpot[1] / tpot[0]:.1f}x the median "
                        f"{tpot[0] * 1e3:.4g} ms: warm-up (compilation, CUDA-graph capture) inside the timed requests "
                        "or other work on the server; raise --warmup or --requests")
    prompts = [r.prompt_tokens for r in done if r.prompt_tokens is not None]
    outs = [r.output_tokens for r in done if r.output_tokens is not None]
    return LevelStats(
        concurrency=concurrency, sent=len(results), completed=len(done), elapsed_s=elapsed_s,
        output_tokens_per_s=out_tokens / elapsed_s if done else None,
        requests_per_s=len(done) / elapsed_s if done else None,
        ttft=_three(ttfts), tpot=tpot, itl=_three(itls),
        decode_tokens_per_s=concurrency / tpot[0] if tpot[0] else None,
        mean_prompt_tokens=sum(prompts) / len(prompts) if prompts else None,
        mean_output_tokens=sum(outs) / len(outs) if outs else None,
        failures=tuple(sorted(counts.items(), key=lambda kv: -kv[1])), warnings=tuple(warnings),
        latencies_s=tuple(r.latency_s for r in done if r.latency_s is not None))


__all__ = ["RequestResult", "LevelStats", "level_stats", "percentile", "SPREAD_LIMIT"]
