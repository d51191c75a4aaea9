"""The result of timing one thing: raw samples (seconds per call), robust summary statistics, telemetry and warnings.

Modelled on ``torch.utils.benchmark.utils.common.Measurement``: raw times are kept, statistics are computed lazily,
and noise is reported as data (warnings on the object), never raised. Thresholds follow torch.utils.benchmark
(``_IQR_WARN_THRESHOLD = 0.1``, ``_IQR_GROSS_WARN_THRESHOLD = 0.25``). Quartiles are numpy's linear-interpolation
percentiles (numpy's default, the same as ``torch.quantile``).

Which number results use: **``steady_median_s``** -- the median of the samples after dropping a leading outlier (a
first sample more than 2x the median of the rest, i.e. compilation, autotuning or lazy initialisation that fell
inside the timed window; docs/method.md, 'Warm-up outliers'). With no such outlier it equals ``median_s``. Never use
``mean_s`` for results: one slow first sample of three moves the mean by 64 % ([581.81, 202.42, 196.46] ms -> mean
326.9, steady median 199.4). Noise warnings are computed on the same steady samples.

Imports without torch (numpy only).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

import numpy as np

from truepeak.bench.telemetry import Telemetry
from truepeak.errors import MeasurementError, TruepeakError
from truepeak.units import fmt_time

#: IQR / median at or above which a measurement is "noisy" (torch.utils.benchmark ``_IQR_WARN_THRESHOLD``).
NOISY_REL_IQR = 0.10
#: IQR / median at or above which it is "very noisy" (torch.utils.benchmark ``_IQR_GROSS_WARN_THRESHOLD``).
VERY_NOISY_REL_IQR = 0.25
#: A first sample more than this many times the median of the others is a warm-up/compile outlier (docs/method.md,
#: 'Warm-up outliers').
LEADING_OUTLIER_FACTOR = 2.0
#: A median SM clock below this fraction of the NVML maximum during timing is reported (docs/method.md, 'Throttling,
#: sustained and burst').
LOW_CLOCK_FRACTION = 0.90

MODES = ("sustained", "burst", "cpu")


@dataclass(frozen=True)
class Measurement:
    """Timing samples of one workload, with lazily computed statistics.

    All times are seconds **per call**: when one sample timed ``calls_per_sample`` back-to-back calls (or one CUDA-graph
    replay of that many launches), the sample is the window divided by ``calls_per_sample``.

    Attributes:
        samples_s: per-call time of each sample, in the order taken (seconds, each > 0 and finite).
        calls_per_sample: calls inside one timed window (>= 1).
        mode: ``"sustained"`` (back-to-back on the GPU, power-limited), ``"burst"`` (an idle gap before each sample,
            clocks recover) or ``"cpu"`` (host timer). Always labelled, never mixed (docs/method.md, 'Throttling,
            sustained and burst').
        warmup_s: seconds spent warming up before the first sample.
        telemetry: NVML summary during the timed region, or ``None``.
        input_kind: ``"random"`` (uniform [-1, 1], the CUTLASS guideline) or what else the inputs were (``"zeros"``,
            ``"constant"``, ``"integer"``, ...). Anything but random is flagged: it is not a peak (docs/method.md,
            'Random inputs').
        graph: whether samples were CUDA-graph replays.
        n_sets: input rotation sets cycled through (None when not applicable).
        burst_gap_s: the idle gap before each sample in burst mode (None otherwise).
        notes: facts about how it was measured that a reader should see (graph fallback, no telemetry, ...).

    Raises:
        MeasurementError: no samples, or a sample that is not a positive finite time.
        TruepeakError: an unknown mode or ``calls_per_sample < 1``.
    """

    samples_s: tuple[float, ...]
    calls_per_sample: int = 1
    mode: str = "sustained"
    warmup_s: float = 0.0
    telemetry: Telemetry | None = None
    input_kind: str = "random"
    graph: bool = False
    n_sets: int | None = None
    burst_gap_s: float | None = None
    notes: tuple[str, ...] = field(default=())

    def __post_init__(self) -> None:
        samples = tuple(float(s) for s in self.samples_s)
        if not samples:
            raise MeasurementError("a measurement needs at least one timing sample, got none")
        bad = [s for s in samples if not (math.isfinite(s) and s > 0)]
        if bad:
            raise MeasurementError(
                f"timing samples must be positive finite seconds; got {bad[0]!r} "
                f"({len(bad)} of {len(samples)} samples bad): the timer or the kernel launch is broken"
            )
        if self.mode not in MODES:
            raise TruepeakError(f"unknown measurement mode {self.mode!r}; expected one of {', '.join(MODES)}")
        if int(self.calls_per_sample) != self.calls_per_sample or self.calls_per_sample < 1:
            raise TruepeakError(f"calls_per_sample must be an integer >= 1, got {self.calls_per_sample!r}")
        if not isinstance(self.input_kind, str) or not self.input_kind:
            raise TruepeakError(f"input_kind must be a non-empty string such as 'random', got {self.input_kind!r}")
        object.__setattr__(self, "samples_s", samples)
        object.__setattr__(self, "calls_per_sample", int(self.calls_per_sample))
        object.__setattr__(self, "notes", tuple(self.notes))
        if isinstance(self.telemetry, Mapping):
            object.__setattr__(self, "telemetry", Telemetry.from_dict(self.telemetry))

    # -- statistics over all samples (numpy linear percentiles) --------------------------------------------------------
    @cached_property
    def _array(self) -> np.ndarray:
        return np.asarray(self.samples_s, dtype=np.float64)

    @property
    def n_samples(self) -> int:
        """Number of samples."""
        return len(self.samples_s)

    @property
    def n_calls(self) -> int:
        """Total timed calls: ``n_samples * calls_per_sample``."""
        return self.n_samples * self.calls_per_sample

    @cached_property
    def median_s(self) -> float:
        """Median of all samples (seconds per call). Results use :attr:`steady_median_s` instead."""
        return float(np.median(self._array))

    @cached_property
    def mean_s(self) -> float:
        """Mean of all samples. Not robust: a compile inside the window inflates it (docs/method.md, 'Warm-up
        outliers'); do not report it."""
        return float(np.mean(self._array))

    @cached_property
    def min_s(self) -> float:
        """Fastest sample (seconds per call): a best case, not a typical one."""
        return float(np.min(self._array))

    @cached_property
    def max_s(self) -> float:
        """Slowest sample (seconds per call)."""
        return float(np.max(self._array))

    @cached_property
    def q1_s(self) -> float:
        """25th percentile of all samples (linear interpolation)."""
        return float(np.percentile(self._array, 25))

    @cached_property
    def q3_s(self) -> float:
        """75th percentile of all samples (linear interpolation)."""
        return float(np.percentile(self._array, 75))

    @cached_property
    def iqr_s(self) -> float:
        """Interquartile range ``q3_s - q1_s`` of all samples."""
        return self.q3_s - self.q1_s

    @cached_property
    def rel_iqr(self) -> float:
        """``iqr_s / median_s`` over all samples (a fraction)."""
        return self.iqr_s / self.median_s

    # -- robust statistics: a leading warm-up outlier excluded ---------------------------------------------------------
    @cached_property
    def leading_outlier(self) -> bool:
        """True when the first sample is more than 2x the median of the others (compile/warm-up in the window,
        docs/method.md 'Warm-up outliers').

        Needs at least two samples.
        """
        if self.n_samples < 2:
            return False
        rest = float(np.median(self._array[1:]))
        return self.samples_s[0] > LEADING_OUTLIER_FACTOR * rest

    @cached_property
    def steady_samples_s(self) -> tuple[float, ...]:
        """The samples without a leading outlier (all samples when there is none)."""
        return self.samples_s[1:] if self.leading_outlier else self.samples_s

    @cached_property
    def steady_median_s(self) -> float:
        """**The time results use**: median of :attr:`steady_samples_s` (seconds per call). [581.81, 202.42, 196.46] ms
        -> 199.44 ms."""
        return float(np.median(np.asarray(self.steady_samples_s)))

    @cached_property
    def steady_iqr_s(self) -> float:
        """Interquartile range of :attr:`steady_samples_s`."""
        a = np.asarray(self.steady_samples_s)
        return float(np.percentile(a, 75) - np.percentile(a, 25))

    @cached_property
    def steady_rel_iqr(self) -> float:
        """``steady_iqr_s / steady_median_s``: the spread the noise warnings use."""
        return self.steady_iqr_s / self.steady_median_s

    # -- warnings -----------------------------------------------------------------------------------------------------
    @cached_property
    def _checks(self) -> tuple[tuple[str, str], ...]:
        out: list[tuple[str, str]] = []
        if self.leading_outlier:
            rest = float(np.median(self._array[1:]))
            out.append((
                "warmup_in_window",
                f"first sample {fmt_time(self.samples_s[0])} is {self.samples_s[0] / rest:.1f}x the median of the others "
                f"({fmt_time(rest)}): compilation or warm-up fell inside the timed window; it is excluded from the "
                f"steady median (the mean {fmt_time(self.mean_s)} is wrong); warm up longer",
            ))
        r = self.steady_rel_iqr
        if r >= VERY_NOISY_REL_IQR:
            out.append(("very_noisy", f"very noisy: IQR is {100 * r:.1f} % of the median (>= 25 %): significant "
                                      "environmental influence (other work on the device, throttling, a short budget)"))
        elif r >= NOISY_REL_IQR:
            out.append(("noisy", f"noisy: IQR is {100 * r:.1f} % of the median (>= 10 %): system fluctuation; "
                                 "raise the time budget or check for other work on the machine"))
        if self.input_kind != "random":
            out.append(("inputs_not_random", f"inputs are {self.input_kind}, not random: zeros and low-entropy data "
                                             "run 7-20 % faster at lower power; this number is not a peak"))
        tel = self.telemetry
        if tel is not None and tel.clock_fraction is not None and tel.clock_fraction < LOW_CLOCK_FRACTION:
            reasons = tel.throttle_reasons()
            why = ", ".join(f"{n} {100 * f:.0f} %" for n, f in reasons) if reasons else "no throttle reason reported"
            out.append(("low_clock", f"SM clock median {tel.sm_clock_median_hz / 1e6:.0f} MHz is "
                                     f"{100 * tel.clock_fraction:.0f} % of the {tel.sm_clock_limit_hz / 1e6:.0f} MHz "
                                     f"maximum during timing (throttle reasons: {why}); the result holds at that "
                                     "clock"))
        return tuple(out)

    @property
    def warnings(self) -> list[str]:
        """Human-readable warnings (noise, warm-up outlier, non-random inputs, low clock); empty when clean."""
        return [msg for _, msg in self._checks]

    @property
    def warning_codes(self) -> list[str]:
        """Stable codes of :attr:`warnings`, in the same order: ``warmup_in_window``, ``noisy``, ``very_noisy``,
        ``inputs_not_random``, ``low_clock``."""
        return [code for code, _ in self._checks]

    # -- replicates ---------------------------------------------------------------------------------------------------
    #: Fields that say how a case was measured; replicates must agree on all of them to be pooled.
    METHOD_FIELDS = ("mode", "calls_per_sample", "input_kind", "graph", "n_sets", "burst_gap_s")

    def merge(self, other: Measurement) -> Measurement:
        """Pool the samples of two replicates of the same case (torch.utils.benchmark ``Measurement.merge``).

        The pooled samples are this replicate's, then ``other``'s steady samples: ``other``'s own leading warm-up
        outlier (docs/method.md, 'Warm-up outliers') would sit mid-pool where :attr:`leading_outlier` cannot see it, so
        it is dropped and a note says so. Statistics are recomputed over the pool. ``warmup_s`` is the shorter warm-up
        of the two; ``telemetry`` is this replicate's (else ``other``'s): NVML summaries keep no raw polls, so they
        cannot be pooled, and a note says whose it is when both had one. Notes are combined without repeats.

        Raises:
            TruepeakError: ``other`` is no Measurement, or it was measured another way (a different value of any of
                :attr:`METHOD_FIELDS`): such samples are not replicates.
        """
        if not isinstance(other, Measurement):
            raise TruepeakError(f"can only merge a Measurement with another Measurement, not {type(other).__name__}")
        differ = [f"{name} {getattr(self, name)!r} vs {getattr(other, name)!r}" for name in self.METHOD_FIELDS
                  if getattr(self, name) != getattr(other, name)]
        if differ:
            raise TruepeakError(f"cannot merge measurements taken differently ({'; '.join(differ)}): they are not "
                                "replicates of one case")
        notes = list(dict.fromkeys((*self.notes, *other.notes)))
        if other.leading_outlier:
            notes.append(f"merge: the second replicate's first sample ({fmt_time(other.samples_s[0])}, warm-up in "
                         "its window) was left out of the pool")
        if self.telemetry is not None and other.telemetry is not None:
            notes.append("merge: telemetry is the first replicate's (NVML summaries cannot be pooled)")
        return Measurement(
            samples_s=self.samples_s + other.steady_samples_s,
            calls_per_sample=self.calls_per_sample,
            mode=self.mode,
            warmup_s=min(self.warmup_s, other.warmup_s),
            telemetry=self.telemetry if self.telemetry is not None else other.telemetry,
            input_kind=self.input_kind,
            graph=self.graph,
            n_sets=self.n_sets,
            burst_gap_s=self.burst_gap_s,
            notes=tuple(notes),
        )

    # -- serialisation ------------------------------------------------------------------------------------------------
    def to_dict(self, include_samples: bool = True) -> dict[str, Any]:
        """A JSON-ready dict: the inputs plus the summary statistics and warnings (SI units).

        Args:
            include_samples: keep the raw ``samples_s`` (needed by :meth:`from_dict`).
        """
        d: dict[str, Any] = {
            "mode": self.mode,
            "n_samples": self.n_samples,
            "calls_per_sample": self.calls_per_sample,
            "warmup_s": self.warmup_s,
            "input_kind": self.input_kind,
            "graph": self.graph,
            "n_sets": self.n_sets,
            "burst_gap_s": self.burst_gap_s,
            "steady_median_s": self.steady_median_s,
            "median_s": self.median_s,
            "mean_s": self.mean_s,
            "min_s": self.min_s,
            "max_s": self.max_s,
            "q1_s": self.q1_s,
            "q3_s": self.q3_s,
            "iqr_s": self.iqr_s,
            "rel_iqr": self.rel_iqr,
            "steady_rel_iqr": self.steady_rel_iqr,
            "leading_outlier": self.leading_outlier,
            "warnings": self.warnings,
            "warning_codes": self.warning_codes,
            "notes": list(self.notes),
            "telemetry": None if self.telemetry is None else self.telemetry.to_dict(),
        }
        if include_samples:
            d["samples_s"] = list(self.samples_s)
        return d

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Measurement:
        """Rebuild from :meth:`to_dict` output (statistics are recomputed from the samples).

        Raises:
            MeasurementError: the dict has no ``samples_s`` (it was written with ``include_samples=False``).
        """
        if not d.get("samples_s"):
            raise MeasurementError("this measurement was stored without raw samples (samples_s); it cannot be rebuilt")
        tel = d.get("telemetry")
        return cls(
            samples_s=tuple(d["samples_s"]),
            calls_per_sample=d.get("calls_per_sample", 1),
            mode=d.get("mode", "sustained"),
            warmup_s=d.get("warmup_s", 0.0),
            telemetry=None if tel is None else Telemetry.from_dict(tel),
            input_kind=d.get("input_kind", "random"),
            graph=bool(d.get("graph", False)),
            n_sets=d.get("n_sets"),
            burst_gap_s=d.get("burst_gap_s"),
            notes=tuple(d.get("notes", ())),
        )

    def __repr__(self) -> str:
        head = (f"Measurement({self.mode}: {fmt_time(self.steady_median_s)} steady median, "
                f"IQR {100 * self.steady_rel_iqr:.1f} %, {self.n_samples} samples x {self.calls_per_sample} calls")
        if self.graph:
            head += ", CUDA graph"
        head += ")"
        return "\n  ".join([head, *(f"WARNING: {w}" for w in self.warnings)])

