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
