"""How a record was measured and checked: the timing summary with its samples and telemetry, the points of a fit, the
input rotation, and the correctness check.

:class:`MeasurementSummary` is what :meth:`truepeak.bench.measurement.Measurement.to_dict` stores (seconds per call,
the samples themselves, NVML telemetry in Hz, W and °C), plus the per-rank fields of a collective
(:mod:`truepeak.bench.comm.worker`: every rank times the op, the slowest rank's median is the time).

Standard library only.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import ClassVar

from truepeak.records._fields import NONNEGATIVE, Part, RecordError


@dataclass(frozen=True, kw_only=True)
class TelemetrySummary(Part):
    """NVML samples taken while timing (:class:`truepeak.bench.telemetry.Telemetry`): SM and memory clocks (Hz), power
    (W), the highest temperature (°C), and each throttle reason's fraction of the polls (``{"power cap": 0.36}``)."""

    DESCRIPTION: ClassVar[str] = "telemetry"

    n_samples: int | None = field(default=None, metadata=NONNEGATIVE)
    duration_s: float | None = field(default=None, metadata=NONNEGATIVE)
    sm_clock_median_hz: float | None = None
    sm_clock_min_hz: float | None = None
    sm_clock_max_hz: float | None = None
    sm_clock_limit_hz: float | None = None
    mem_clock_median_hz: float | None = None
    power_median_w: float | None = None
    power_max_w: float | None = None
    power_limit_w: float | None = None
    temperature_max_c: float | None = None
    reasons: Mapping[str, float] = field(default_factory=dict)
    device_name: str | None = None


@dataclass(frozen=True, kw_only=True)
class MeasurementSummary(Part):
    """The timing of one case: the ``mode`` (``"sustained"``, ``"burst"``, ``"cpu"``; ``"eager"`` or ``"graph"`` for
    collectives), the per-call statistics in seconds (``steady_median_s``: the median after a leading warm-up outlier
    is dropped, what results use), the spread (``iqr_s``, ``rel_iqr`` = IQR / median), the samples themselves
    (``samples_s``, each the mean of ``calls_per_sample`` calls), how it was timed (warm-up seconds, CUDA graph, input
    sets rotated, the burst gap, the inputs' kind), the warnings in words with their codes, and the telemetry. A
    collective adds each rank's median (``per_rank_median_s``; the time is the largest), their mean, and nccl-tests'
    ``iters`` and ``warmup`` counts.

    Raises:
        RecordError: neither ``steady_median_s`` nor ``median_s`` is given.
    """

    DESCRIPTION: ClassVar[str] = "a measurement"

    mode: str
    n_samples: int | None = field(default=None, metadata=NONNEGATIVE)
    calls_per_sample: int | None = field(default=None, metadata={"min": 1})
    warmup_s: float | None = field(default=None, metadata=NONNEGATIVE)
    input_kind: str | None = None
    graph: bool | None = None
    n_sets: int | None = field(default=None, metadata={"min": 1})
    burst_gap_s: float | None = field(default=None, metadata=NONNEGATIVE)
    steady_median_s: float | None = field(default=None, metadata=NONNEGATIVE)
    median_s: float | None = field(default=None, metadata=NONNEGATIVE)
    mean_s: float | None = None
    min_s: float | None = None
    max_s: float | None = None
    q1_s: float | None = None
    q3_s: float | None = None
    iqr_s: float | None = field(default=None, metadata=NONNEGATIVE)
    rel_iqr: float | None = field(default=None, metadata=NONNEGATIVE)
    steady_rel_iqr: float | None = field(default=None, metadata=NONNEGATIVE)
    leading_outlier: bool | None = None
    warnings: tuple[str, ...] = ()
    warning_codes: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()
    telemetry: TelemetrySummary | None = None
    samples_s: tuple[float, ...] | None = None
    per_rank_median_s: tuple[float, ...] | None = None
    mean_over_ranks_s: float | None = None
    iters: int | None = field(default=None, metadata=NONNEGATIVE)
    warmup: int | None = field(default=None, metadata=NONNEGATIVE)

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.steady_median_s is None and self.median_s is None:
            raise RecordError("median_s", "is missing (a measurement needs steady_median_s or median_s)")

    @property
    def time_s(self) -> float:
        """Seconds per call: the steady median, else the median."""
        return self.steady_median_s if self.steady_median_s is not None else self.median_s

    @property
    def noise(self) -> float | None:
        """IQR / median of the samples: ``steady_rel_iqr``, else ``rel_iqr``, else ``iqr_s`` / the time; None when
        the measurement holds no spread (computing it from ``samples_s`` is the reader's choice)."""
        for v in (self.steady_rel_iqr, self.rel_iqr):
            if v is not None:
                return v
        if self.iqr_s is not None and self.time_s:
            return self.iqr_s / self.time_s
        return None

    @property
    def sample_count(self) -> int:
        """``n_samples``, else the number of stored samples (0 without either)."""
        if self.n_samples is not None:
            return self.n_samples
        return len(self.samples_s) if self.samples_s else 0


@dataclass(frozen=True, kw_only=True)
class FitPoints(Part):
    """The measured points a fit was made from: ``(S in bytes, seconds per call)`` of each collective record whose
    output was right, in the ``mode`` they were timed in."""

    DESCRIPTION: ClassVar[str] = "fit points"

    mode: str
    points: tuple[tuple[float, float], ...]

    @property
    def time_s(self) -> None:
        """A fit has no one time per call."""
        return None


@dataclass(frozen=True, kw_only=True)
class Rotation(Part):
    """How the input sets were rotated so they are not cache-resident (:class:`truepeak.bench.cuda_timer.RotationPlan`):
    ``n_sets`` sets (``wanted_sets`` wanted: at least 2x the ``l2_bytes`` cache) of ``bytes_per_set`` each, whether
    memory ``capped`` them (``note`` says how), their ``total_bytes`` and whether they cover 2x the cache (``cold``)."""

    DESCRIPTION: ClassVar[str] = "a rotation"

    n_sets: int = field(metadata={"min": 1})
    wanted_sets: int | None = field(default=None, metadata=NONNEGATIVE)
    bytes_per_set: int | None = field(default=None, metadata=NONNEGATIVE)
    l2_bytes: int | None = field(default=None, metadata=NONNEGATIVE)
    capped: bool = False
    note: str = ""
    total_bytes: int | None = field(default=None, metadata=NONNEGATIVE)
    cold: bool | None = None


@dataclass(frozen=True, kw_only=True)
class Correctness(Part):
    """The check of a case's output, made before it is timed. ``passed`` is the verdict and ``reference`` says what
    the output was compared with, in words. The error measures of each kind:

    - a GEMM: ``rel_error`` = ||out - ref||_F / ||ref||_F against a float64 matmul of the same quantised inputs over
      ``rows_checked`` rows (None when the output held NaN or Inf), and the format's ``tolerance``;
    - MoE experts: ``max_rel_error`` = max |out - ref| / max |ref| over the first tokens against float32; a
      block-scaled kernel is judged against the same activation rounding (``max_rel_error_same_rounding``,
      ``checked_against``), older files have ``max_rel_error_unrounded``;
    - a collective: ``wrong`` of ``checked`` output elements differ from the expected values;
    - a peak search: ``checked`` trials were each checked as a GEMM, ``wrong`` of them failed;
    - a copy: the destination equals the source after timing (``reference`` says so).
    """

    DESCRIPTION: ClassVar[str] = "a correctness check"

    passed: bool
    reference: str | None = None
    rel_error: float | None = field(default=None, metadata=NONNEGATIVE)
    tolerance: float | None = field(default=None, metadata=NONNEGATIVE)
    rows_checked: int | None = field(default=None, metadata=NONNEGATIVE)
    max_rel_error: float | None = field(default=None, metadata=NONNEGATIVE)
    max_rel_error_same_rounding: float | None = field(default=None, metadata=NONNEGATIVE)
    max_rel_error_unrounded: float | None = field(default=None, metadata=NONNEGATIVE)
    checked_against: str | None = None
    wrong: int | None = field(default=None, metadata=NONNEGATIVE)
    checked: int | None = field(default=None, metadata=NONNEGATIVE)


__all__ = ["TelemetrySummary", "MeasurementSummary", "FitPoints", "Rotation", "Correctness"]
