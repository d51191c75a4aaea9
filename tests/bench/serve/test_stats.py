"""Level statistics against hand-computed values (truepeak.bench.serve.stats)."""

from __future__ import annotations

import pytest

from truepeak.bench.serve.stats import RequestResult, level_stats, percentile


def test_percentile_interpolates_as_numpy_does():
    """numpy.percentile([1, 2, 3, 4], q) with linear interpolation: rank (n - 1) q / 100 = 1.5, 2.7, 2.97."""
    xs = [4.0, 1.0, 3.0, 2.0]
    assert percentile(xs, 50) == pytest.approx(2.5)
    assert percentile(xs, 90) == pytest.approx(3.7)
    assert percentile(xs, 99) == pytest.approx(3.97)
    assert percentile([], 50) is None


def test_level_figures_by_hand():
    """Two requests of 5 output tokens: TTFT 0.1 and 0.3 s, ends at 0.5 and 1.1 s -> TPOT (0.5 - 0.1) / 4 = 0.1 and
    (1.1 - 0.3) / 4 = 0.2; one failure. Over 2 s: 10 tokens -> 5 tok/s, 1 req/s; decode = 2 / median TPOT 0.15."""
    a = RequestResult(ttft_s=0.1, latency_s=0.5, chunk_times_s=(0.1, 0.2, 0.3, 0.4, 0.5), prompt_tokens=8,
                      output_tokens=5, finish_reason="length")
    b = RequestResult(ttft_s=0.3, latency_s=1.1, chunk_times_s=(0.3, 0.5, 0.7, 0.9, 1.1), prompt_tokens=8,
                      output_tokens=5, finish_reason="length")
    bad = RequestResult(error="HTTP 500: out of KV cache blocks")
    st = level_stats([a, bad, b], concurrency=2, elapsed_s=2.0, output_len=5)
    assert (st.sent, st.completed, st.failed) == (3, 2, 1)
    assert st.output_tokens_per_s == pytest.approx(5.0) and st.requests_per_s == pytest.approx(1.0)
    assert st.tpot[0] == pytest.approx(0.15) and st.ttft[0] == pytest.approx(0.2)
    assert st.decode_tokens_per_s == pytest.approx(2 / 0.15)
    assert st.itl[0] == pytest.approx(0.15)  # gaps: four of 0.1, four of 0.2
    assert st.failures == (("HTTP 500: out of KV cache blocks", 1),) and st.warnings == ()


def test_early_stops_are_said():
    r = RequestResult(ttft_s=0.1, latency_s=0.2, chunk_times_s=(0.1, 0.2), output_tokens=2, finish_reason="stop")
    st = level_stats([r], concurrency=1, elapsed_s=0.2, output_len=8)
    assert "1 of 1 completed requests generated fewer than the 8 tokens" in st.warnings[0]
    assert st.tpot[0] == pytest.approx(0.1)


def _steady(tpot: float) -> RequestResult:
    """A request of 5 output tokens, TTFT 0.05 s, then one token every ``tpot`` seconds."""
    times = tuple(0.05 + i * tpot for i in range(5))
    return RequestResult(ttft_s=0.05, latency_s=times[-1], chunk_times_s=times, prompt_tokens=8, output_tokens=5,
                         finish_reason="length")


def test_a_slow_tail_is_said():
    """Regression: the first timed requests at 10x the median went by without a word. Eight requests at 10 ms per
    token and two at 100 ms: p50 10 ms, p90 100 ms (numpy's linear percentile: index 8.1 of 0..9, both 100 ms) ->
    10.0x, above the 2x limit. Nine at 10 ms and one at 19 ms: p90 = 10 + 0.1 x 9 = 10.9 ms, 1.1x: quiet."""
    st = level_stats([_steady(0.01)] * 8 + [_steady(0.1)] * 2, concurrency=1, elapsed_s=2.0, output_len=5)
    assert st.tpot[0] == pytest.approx(0.01) and st.tpot[1] == pytest.approx(0.1)
    assert st.warnings == ("noisy: TPOT p90 100 ms is 10.0x the median 10 ms: warm-up (compilation, CUDA-graph "
                           "capture) inside the timed requests or other work on the server; raise --warmup or "
                           "--requests",)
    quiet = level_stats([_steady(0.01)] * 9 + [_steady(0.019)], concurrency=1, elapsed_s=2.0, output_len=5)
    assert quiet.tpot[1] == pytest.approx(0.0109) and quiet.warnings == ()
