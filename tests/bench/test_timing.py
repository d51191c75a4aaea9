"""time_cpu: exact counts on a simulated clock (``timer=``), and loose bands only on the real one (CI is a loaded
2-core machine: a real-clock test must pass whatever the scheduler does)."""

from __future__ import annotations

import time

import numpy as np
import pytest

from truepeak.bench.timing import MIN_SAMPLE_S, time_cpu
from truepeak.errors import TruepeakError


class SimClock:
    """A clock that moves only when the timed function says it took time."""

    def __init__(self) -> None:
        self.t = 0.0

    def __call__(self) -> float:
        return self.t

    def work(self, seconds: float):
        def fn() -> None:
            self.t += seconds
        return fn


def test_simulated_5ms_call_exact():
    clock = SimClock()
    m = time_cpu(clock.work(5e-3), warmup_s=0.02, budget_s=0.1, min_samples=5, timer=clock)
    assert m.mode == "cpu" and m.calls_per_sample == 1  # a 5 ms call already exceeds the 1 ms sample floor
    assert m.n_samples == 20  # 0.1 s budget / 5 ms
    assert all(s == pytest.approx(5e-3) for s in m.samples_s)
    assert m.warmup_s == pytest.approx(0.025)  # 4 warm-up calls to reach 20 ms, then one 5 ms sizing block
    assert m.telemetry is None and m.graph is False


def test_simulated_fast_call_is_batched_to_1ms_per_sample():
    clock = SimClock()
    call = 2.0**-16  # 15.26 us, exact in binary so sums of calls are exact
    m = time_cpu(clock.work(call), warmup_s=0.02, budget_s=0.05, timer=clock)
    assert m.calls_per_sample == 66  # ceil(1 ms / 15.26 us)
    assert m.median_s == call  # per call, not per sample
    assert m.n_samples == 50  # ceil(50 ms / (66 x 15.26 us = 1.007 ms))


def test_sleep_5ms_median_in_loose_band():
    m = time_cpu(lambda: time.sleep(5e-3), warmup_s=0.02, budget_s=0.1, min_samples=5)
    assert m.mode == "cpu"
    assert m.calls_per_sample == 1  # a sleep never returns early, so a call is >= 5 ms > the 1 ms sample floor
    assert m.n_samples >= 5
    assert 4.5e-3 <= m.steady_median_s <= 0.1  # the upper bound is loose: a loaded host oversleeps
    assert m.warmup_s >= 0.02


def test_fast_call_is_batched():
    a = np.random.default_rng(0).uniform(-1, 1, 1000)
    m = time_cpu(lambda: a.sum(), warmup_s=0.02, budget_s=0.05)
    assert m.calls_per_sample > 1
    assert m.median_s * m.calls_per_sample >= 0.1 * MIN_SAMPLE_S  # ~1 ms per sample unless a stall fooled the sizing
    assert m.median_s < 1e-3  # per call, not per sample


def test_min_samples_wins_over_budget_and_max_samples_caps():
    m = time_cpu(lambda: time.sleep(2e-3), warmup_s=0, budget_s=1e-6, min_samples=7)
    assert m.n_samples == 7
    m = time_cpu(lambda: None, warmup_s=0, budget_s=10.0, min_samples=1, max_samples=3)
    assert m.n_samples == 3


def test_warmup_runs_at_least_once_and_exceptions_propagate():
    calls = []

    def fn():
        calls.append(1)
        raise KeyError("boom")

    with pytest.raises(KeyError):
        time_cpu(fn, warmup_s=0)
    assert calls == [1]


def test_input_kind_is_recorded():
    m = time_cpu(lambda: None, warmup_s=0, budget_s=0.01, input_kind="zeros")
    assert "inputs_not_random" in m.warning_codes


@pytest.mark.parametrize(
    "kwargs",
    [{"warmup_s": -1}, {"budget_s": 0}, {"min_samples": 0}, {"min_samples": 5, "max_samples": 4}],
)
def test_bad_arguments(kwargs):
    with pytest.raises(TruepeakError):
        time_cpu(lambda: None, **kwargs)
    with pytest.raises(TruepeakError, match="callable"):
        time_cpu(42)
