"""Host-side timing of a Python callable with a time budget (for CPU work and for tests of the timing core).

The shape follows ``torch.utils.benchmark.Timer.blocked_autorange`` and ``triton.testing.do_bench``: budgets are
times, not counts; the per-call cost is estimated first, and enough calls go into one sample that the timer's own
resolution and overhead stay negligible (here: a sample lasts at least ~1 ms of ``time.perf_counter``). GPU work is
timed with CUDA events instead: :func:`truepeak.bench.cuda_timer.time_cuda`.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from typing import Any

from truepeak.bench.measurement import Measurement
from truepeak.errors import TruepeakError

#: Shortest sample (seconds) ``time_cpu`` aims for; well above ``perf_counter`` resolution and call overhead.
MIN_SAMPLE_S = 1e-3


def check_timing_args(fn: object, needs: str, *, warmup_s: float, budget_s: float, min_samples: int,
                      max_samples: int) -> None:
    """The argument rules every timer shares (:func:`time_cpu`, :func:`truepeak.bench.cuda_timer.time_cuda`).

    Args:
        fn: must be callable; ``needs`` completes the message (``"time_cpu needs a callable"``).
        warmup_s: >= 0 seconds. budget_s: > 0 seconds. min_samples, max_samples: ``1 <= min_samples <= max_samples``.

    Raises:
        TruepeakError: the first rule broken, in one line.
    """
    if not callable(fn):
        raise TruepeakError(f"{needs}, got {type(fn).__name__}")
    if not warmup_s >= 0:
        raise TruepeakError(f"warmup_s must be >= 0 seconds, got {warmup_s}")
    if not budget_s > 0:
        raise TruepeakError(f"budget_s must be > 0 seconds, got {budget_s}")
    if min_samples < 1 or max_samples < min_samples:
        raise TruepeakError(f"need 1 <= min_samples <= max_samples, got min_samples={min_samples}, "
                            f"max_samples={max_samples}")


def time_cpu(
    fn: Callable[[], Any],
    *,
    warmup_s: float = 0.2,
    budget_s: float = 1.0,
    min_samples: int = 5,
    max_samples: int = 100_000,
    input_kind: str = "random",
    timer: Callable[[], float] = time.perf_counter,
) -> Measurement:
    """Time ``fn()`` on the host: warm up by time, then take samples until the budget is spent.

    Method: call ``fn`` repeatedly for ``warmup_s`` (at least once); grow a block of calls, starting from the
    warm-up's per-call estimate, until one block lasts >= 1 ms (that block size is ``calls_per_sample``); then take
    samples until ``budget_s`` has elapsed and at least ``min_samples`` were taken (so the budget can be exceeded to
    reach ``min_samples``), stopping at ``max_samples``. Each sample is the window divided by ``calls_per_sample``.
    ``warmup_s`` on the result is the time spent before the first sample (warm-up plus block sizing).

    Args:
        fn: a callable without arguments.
        warmup_s: warm-up time (seconds, >= 0).
        budget_s: timing budget (seconds, > 0).
        min_samples: fewest samples (>= 1).
        max_samples: most samples (>= min_samples).
        input_kind: what the inputs were, recorded on the Measurement (``"random"`` unless told otherwise).
        timer: the clock, in seconds (like ``torch.utils.benchmark.Timer(timer=...)``); tests pass a simulated one.

    Returns:
        A :class:`Measurement` with ``mode="cpu"`` and samples in seconds per call.

    Raises:
        TruepeakError: a bad argument. Exceptions from ``fn`` propagate unchanged.
    """
    check_timing_args(fn, "time_cpu needs a callable", warmup_s=warmup_s, budget_s=budget_s, min_samples=min_samples,
                      max_samples=max_samples)
    clock = timer
    # Warm-up by time (at least one call, which also absorbs first-call costs).
    calls = 0
    start = clock()
    while True:
        fn()
        calls += 1
        elapsed = clock() - start
        if elapsed >= warmup_s:
            break
    # Calls per sample: grow a block until it lasts >= MIN_SAMPLE_S (blocked_autorange-style), starting from the
    # warm-up's estimate.
    calls_per_sample = max(1, math.ceil(MIN_SAMPLE_S / max(elapsed / calls, 1e-9)))
    while True:
        t0 = clock()
        for _ in range(calls_per_sample):
            fn()
        block = clock() - t0
        if block >= MIN_SAMPLE_S:
            break
        grown = math.ceil(calls_per_sample * 1.2 * MIN_SAMPLE_S / max(block, 1e-9))
        calls_per_sample = max(calls_per_sample + 1, grown)
    elapsed = clock() - start

    windows: list[float] = []
    deadline = clock() + budget_s
    while len(windows) < max_samples:
        t0 = clock()
        for _ in range(calls_per_sample):
            fn()
        windows.append(clock() - t0)
        if len(windows) >= min_samples and clock() >= deadline:
            break
    return Measurement(
        samples_s=tuple(w / calls_per_sample for w in windows),
        calls_per_sample=calls_per_sample,
        mode="cpu",
        warmup_s=elapsed,
        input_kind=input_kind,
    )
