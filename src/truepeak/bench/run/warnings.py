"""A GEMM record's warnings in words: above its roofline (:func:`roofline_warnings`), or timed at an SM clock above
the catalog maximum or below 90 % of it (:func:`clock_warnings`; docs/method.md, 'Throttling, sustained and burst')."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from truepeak.records import GemmMetrics
from truepeak.units import fmt_bandwidth, fmt_pct, fmt_rate, rate_unit


def roofline_warnings(derived: GemmMetrics, ceiling_from_copy: bool = False, fmt: str | None = None) -> list[str]:
    """A record's warning when a GEMM reads above 100 % of its roofline (``roofline_fraction > 1``), in words.

    Memory-bound: its minimum traffic moved faster than the memory ceiling, so the ceiling is too low for it: a noisy
    copy measurement (``ceiling_from_copy``: the ceiling is this run's measured copy) or operands reused from cache
    (against a spec bandwidth, ``derived.memory_note`` says how much of the working set the cache holds).
    Compute-bound: it ran above the dense peak (a clock above the one the peak assumes, or an estimated peak that is
    low). Empty when at or under the roofline."""
    pct = derived.roofline_fraction
    if pct is None or pct <= 1:
        return []
    if derived.bound != "memory":
        unit = rate_unit(fmt) if fmt else "TFLOPS"
        return [f"{fmt_pct(pct)} of the roofline: above the {fmt_rate(derived.dense_peak_flop_per_s)} {unit} "
                "dense peak (a clock above the one the peak assumes, or an estimated peak that is too low)"]
    if derived.memory_note and not ceiling_from_copy:  # against a spec bandwidth: the cache, in numbers
        return [f"{fmt_pct(pct)} of the roofline: {derived.memory_note}"]
    bw = derived.bandwidth_bytes_per_s
    where = f" ({derived.bandwidth_source})" if derived.bandwidth_source else ""
    why = ("the measured memory ceiling is too low (a noisy copy measurement) or the GEMM reused operands from cache"
           if ceiling_from_copy else "the operands were served from cache, not memory")
    return [f"{fmt_pct(pct)} of the roofline: this GEMM moved its minimum bytes at "
            f"{fmt_bandwidth(derived.bytes_per_s)} GB/s, above the {fmt_bandwidth(bw)} GB/s memory "
            f"ceiling{where}: {why}"]


#: The sampled SM clock may exceed the catalog maximum by this fraction (reading granularity) before it is flagged;
#: the same rule as :data:`truepeak.roofline.MAX_CLOCK_TOLERANCE`.
CLOCK_ABOVE_MAX_TOLERANCE = 0.02
#: A median SM clock below this fraction of the maximum while timing is a throttled run (docs/method.md, 'Throttling,
#: sustained and burst').
LOW_CLOCK_FRACTION = 0.90


def clock_warnings(acc: Any, tel: Any, existing_codes: Sequence[str] = ()) -> list[str]:
    """Record warnings about the SM clock sampled while timing (NVML :class:`~truepeak.bench.telemetry.Telemetry`):

    - above the catalog maximum clock by more than 2 %: :func:`~truepeak.efficiency.derived_metrics` then leaves
      ``at_clock_fraction`` out (such a clock cannot be used for "peak at measured clock"); this says so instead of
      dropping it silently;
    - below 90 % of the maximum (NVML's, else the catalog's) with the throttle reasons NVML gave (power cap, thermal),
      unless the measurement already carries its ``low_clock`` warning.

    Empty without telemetry or a median clock.
    """
    if tel is None or tel.sm_clock_median_hz is None:
        return []
    out: list[str] = []
    clk = float(tel.sm_clock_median_hz)
    top = getattr(getattr(acc, "max_clock_hz", None), "value", None)
    if top and clk > float(top) * (1 + CLOCK_ABOVE_MAX_TOLERANCE):
        out.append(f"sampled SM clock median {clk / 1e6:.0f} MHz is above the {float(top) / 1e6:.0f} MHz catalog "
                   f"maximum of {acc.name} (+{100 * CLOCK_ABOVE_MAX_TOLERANCE:g} % allowed): % of peak at measured "
                   "clock is left out; the catalog's maximum clock or the NVML reading is wrong for this device")
    limit = tel.sm_clock_limit_hz or (float(top) if top else None)
    if "low_clock" not in existing_codes and limit and clk < LOW_CLOCK_FRACTION * limit:
        reasons = tel.throttle_reasons()
        why = ", ".join(f"{n} {100 * f:.0f} %" for n, f in reasons) if reasons else "no throttle reason reported"
        out.append(f"SM clock median {clk / 1e6:.0f} MHz is {100 * clk / limit:.0f} % of the {limit / 1e6:.0f} MHz "
                   f"maximum during timing (throttle reasons: {why})")
    return out


__all__ = ["roofline_warnings", "clock_warnings", "CLOCK_ABOVE_MAX_TOLERANCE", "LOW_CLOCK_FRACTION"]
