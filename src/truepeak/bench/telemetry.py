"""GPU telemetry while timing: SM clock, memory clock, power, temperature and clock-event (throttle) reasons via NVML.

:class:`NvmlSampler` runs a daemon thread that polls NVML every ``interval_s`` during the timed region; its
:meth:`~NvmlSampler.summary` condenses the samples into a :class:`Telemetry` that travels with the
:class:`~truepeak.bench.measurement.Measurement`. Without NVML (no driver, no ``nvidia-ml-py``, a CPU machine) the
sampler does nothing, ``summary()`` returns ``None`` and ``sampler.reason`` says why: telemetry never stops a
measurement.

Why: a GEMM's TFLOPS on a power-capped part depends on the clock it ran at (H200 sustained 1.41-1.49 GHz at ~690 W vs
~1.74 GHz in burst mode; B200 1965 -> 1580 MHz back-to-back, flashinfer-ai/flashinfer PR #2899). The CUTLASS GEMM
measurement guideline asks to log GPC clock, power and temperature and to compare against speed-of-light at the settled
clock; cudnn-frontend samples the NVML clock at ~1 kHz (docs/method.md, 'Peak at the measured clock' and 'Throttling,
sustained and burst').

Units: Hz, W, degrees Celsius, seconds. NVML reports MHz and mW; they are converted here.
``nvmlDeviceGetPowerUsage`` is the board power NVML reports (on recent GPUs an average over a short window), not an
instantaneous reading.

NVML is initialised once per process and each device's static facts (name, maximum SM clock, power limit) are read
once (:mod:`truepeak.hardware.nvml`), so opening a sampler per case costs one handle lookup, not an ``nvmlInit``.

Pure Python at import; ``pynvml`` is imported only when a sampler opens.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, fields
from typing import Any, NamedTuple

import numpy as np

from truepeak.hardware import nvml
from truepeak.records import TelemetrySummary

# Clock-event ("throttle") reason bits, as in nvml.h ``nvmlClocksEventReason*`` (formerly
# ``nvmlClocksThrottleReason*``).
# Each row: fallback bit, short name, pynvml constant names to prefer when present.
_REASON_TABLE: tuple[tuple[int, str, tuple[str, ...]], ...] = (
    (0x1, "idle", ("nvmlClocksEventReasonGpuIdle", "nvmlClocksThrottleReasonGpuIdle")),
    (0x2, "app clocks setting", ("nvmlClocksEventReasonApplicationsClocksSetting",
                                 "nvmlClocksThrottleReasonApplicationsClocksSetting")),
    (0x4, "power cap", ("nvmlClocksEventReasonSwPowerCap", "nvmlClocksThrottleReasonSwPowerCap")),
    (0x8, "hw slowdown", ("nvmlClocksEventReasonHwSlowdown", "nvmlClocksThrottleReasonHwSlowdown")),
    (0x10, "sync boost", ("nvmlClocksEventReasonSyncBoost", "nvmlClocksThrottleReasonSyncBoost")),
    (0x20, "sw thermal", ("nvmlClocksEventReasonSwThermalSlowdown", "nvmlClocksThrottleReasonSwThermalSlowdown")),
    (0x40, "hw thermal", ("nvmlClocksEventReasonHwThermalSlowdown", "nvmlClocksThrottleReasonHwThermalSlowdown")),
    (0x80, "hw power brake", ("nvmlClocksEventReasonHwPowerBrakeSlowdown",
                              "nvmlClocksThrottleReasonHwPowerBrakeSlowdown")),
    (0x100, "display clock setting", ("nvmlClocksEventReasonDisplayClockSetting",
                                      "nvmlClocksThrottleReasonDisplayClockSetting")),
    (0x200, "board limit", ("nvmlClocksThrottleReasonBoardLimit",)),
    (0x400, "reliability", ("nvmlClocksThrottleReasonReliability",)),
)

#: Reasons that are not a slowdown (the GPU had nothing to do); left out of throttle warnings.
BENIGN_REASONS = frozenset({"idle"})


def reason_bits(nvml: Any = None) -> dict[int, str]:
    """Map each clock-event reason bit to its short name.

    Args:
        nvml: the ``pynvml`` module, whose constants win where present; ``None`` uses the nvml.h values.

    Returns:
        ``{bit: name}``, e.g. ``{0x4: "power cap", 0x40: "hw thermal", ...}``.
    """
    table: dict[int, str] = {}
    for fallback, name, attrs in _REASON_TABLE:
        bit = fallback
        if nvml is not None:
            for attr in attrs:
                value = getattr(nvml, attr, None)
                if isinstance(value, int) and value > 0:
                    bit = value
                    break
        table[bit] = name
    return table


def decode_reasons(mask: int, bits: Mapping[int, str] | None = None) -> tuple[str, ...]:
    """Decode an NVML clock-event reason bitmask into names, lowest bit first.

    ``0`` (``nvmlClocksEventReasonNone``) gives ``()``. Bits truepeak does not know come back as ``"unknown 0x800"``.

    Args:
        mask: the value of ``nvmlDeviceGetCurrentClocksEventReasons``.
        bits: ``{bit: name}`` as from :func:`reason_bits`; default the nvml.h table.
    """
    if mask < 0:
        raise ValueError(f"clock-event reason mask must be >= 0, got {mask}")
    bits = reason_bits() if bits is None else bits
    names = []
    rest = int(mask)
    for bit in sorted(bits):
        if rest & bit:
            names.append(bits[bit])
            rest &= ~bit
    b = 1
    while rest:
        if rest & b:
            names.append(f"unknown 0x{b:x}")
            rest &= ~b
        b <<= 1
    return tuple(names)


class TelemetrySample(NamedTuple):
    """One NVML poll. Any field NVML could not read is ``None``.

    Attributes:
        t_s: ``time.perf_counter()`` at the poll (seconds).
        sm_clock_hz: current SM clock (Hz).
        mem_clock_hz: current memory clock (Hz).
        power_w: board power (W).
        temperature_c: GPU temperature (degrees Celsius).
        reasons: clock-event reason bitmask (decode with :func:`decode_reasons`).
    """

    t_s: float
    sm_clock_hz: float | None = None
    mem_clock_hz: float | None = None
    power_w: float | None = None
    temperature_c: float | None = None
    reasons: int | None = None


@dataclass(frozen=True, kw_only=True)
class Telemetry(TelemetrySummary):
    """Summary of the machine state while timing (what a record stores; raw NVML samples are not kept): the fields of
    :class:`truepeak.records.TelemetrySummary`, one definition for the measurement and its record.

    Attributes:
        n_samples: NVML polls taken.
        duration_s: time between the first and last poll.
        sm_clock_median_hz, sm_clock_min_hz, sm_clock_max_hz: SM clock seen (Hz). The median is the clock for
            "peak at measured clock".
        sm_clock_limit_hz: the maximum SM clock NVML reports for the device (``nvmlDeviceGetMaxClockInfo``), Hz.
        mem_clock_median_hz: memory clock (Hz).
        power_median_w, power_max_w: board power (W).
        power_limit_w: enforced power limit (W).
        temperature_max_c: hottest GPU temperature seen (degrees Celsius).
        reasons: clock-event reason name -> fraction of polls in which it was active (only reasons seen).
        device_name: the name NVML reports.
    """

    @property
    def clock_fraction(self) -> float | None:
        """Median SM clock / NVML maximum SM clock, or ``None`` when either is unknown."""
        if self.sm_clock_median_hz is None or not self.sm_clock_limit_hz:
            return None
        return self.sm_clock_median_hz / self.sm_clock_limit_hz

    def throttle_reasons(self) -> list[tuple[str, float]]:
        """Reasons other than idle that were active, with their fraction of polls, most frequent first."""
        items = [(n, f) for n, f in self.reasons.items() if n not in BENIGN_REASONS and f > 0]
        return sorted(items, key=lambda nf: (-nf[1], nf[0]))

    @classmethod
    def from_dict(cls, d: Mapping[str, Any], where: str = "") -> Telemetry:
        """Inverse of :meth:`to_dict`; unknown keys are ignored (records from newer versions still load)."""
        names = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in d.items() if k in names})


def _median(values: Sequence[float]) -> float | None:
    return float(np.median(values)) if values else None


def summarize(
    samples: Iterable[TelemetrySample],
    *,
    sm_clock_limit_hz: float | None = None,
    power_limit_w: float | None = None,
    device_name: str | None = None,
    bits: Mapping[int, str] | None = None,
) -> Telemetry | None:
    """Condense NVML polls into a :class:`Telemetry` (pure; no NVML needed).

    Fields NVML never reported stay ``None``; reason fractions are over the polls that read the reason mask.

    Args:
        samples: the polls, in time order.
        sm_clock_limit_hz: NVML's maximum SM clock (Hz), recorded as is.
        power_limit_w: the enforced power limit (W).
        device_name: the GPU name NVML reports.
        bits: reason bit table (:func:`reason_bits`).

    Returns:
        The summary, or ``None`` for no samples.
    """
    samples = list(samples)
    if not samples:
        return None

    def col(name: str) -> list[float]:
        return [float(getattr(s, name)) for s in samples if getattr(s, name) is not None]

    sm, mem, power, temp = col("sm_clock_hz"), col("mem_clock_hz"), col("power_w"), col("temperature_c")
    masks = [int(s.reasons) for s in samples if s.reasons is not None]
    counts: dict[str, int] = {}
    for mask in masks:
        for name in decode_reasons(mask, bits):
            counts[name] = counts.get(name, 0) + 1
    reasons = {name: c / len(masks) for name, c in sorted(counts.items())}
    times = [s.t_s for s in samples]
    return Telemetry(
        n_samples=len(samples),
        duration_s=float(max(times) - min(times)),
        sm_clock_median_hz=_median(sm),
        sm_clock_min_hz=min(sm) if sm else None,
        sm_clock_max_hz=max(sm) if sm else None,
        sm_clock_limit_hz=sm_clock_limit_hz,
        mem_clock_median_hz=_median(mem),
        power_median_w=_median(power),
        power_max_w=max(power) if power else None,
        power_limit_w=power_limit_w,
        temperature_max_c=max(temp) if temp else None,
        reasons=reasons,
        device_name=device_name,
    )


class NvmlSampler:
    """Poll NVML on a daemon thread while a block runs; never raises because of NVML.

    Usage::

        sampler = NvmlSampler(device_index=0)
        sampler.open()            # optional: pay NVML's start-up cost before the timed region
        with sampler:             # polls every interval_s until the block ends
            ...timed work...
        telemetry = sampler.summary()   # Telemetry, or None (then sampler.reason says why)

    Args:
        device_index: the **NVML** device index. Under ``CUDA_VISIBLE_DEVICES`` it differs from torch's index; map it
            with ``torch.cuda._get_nvml_device_index`` (``time_cuda`` does).
        interval_s: time between polls (default 5 ms; each poll is a handful of NVML calls, ~tens of microseconds).
        max_samples: polls kept at most (older polls are kept; later ones dropped) to bound memory on long runs.

    Attributes:
        reason: why no telemetry is available (``None`` while all is well).
        samples: the raw :class:`TelemetrySample` list.
    """

    def __init__(self, device_index: int = 0, interval_s: float = 0.005, *, max_samples: int = 1_000_000):
        if interval_s <= 0:
            raise ValueError(f"interval_s must be > 0 seconds, got {interval_s}")
        self.device_index = int(device_index)
        self.interval_s = float(interval_s)
        self.max_samples = int(max_samples)
        self.reason: str | None = None
        self.samples: list[TelemetrySample] = []
        self._nvml: Any = None
        self._handle: Any = None
        self._bits: dict[int, str] = reason_bits()
        self._sm_clock_limit_hz: float | None = None
        self._power_limit_w: float | None = None
        self._device_name: str | None = None
        self._unsupported: set[str] = set()
        self._reasons_fn: Any = None
        self._thread: threading.Thread | None = None
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._opened = False

    # -- NVML set-up -------------------------------------------------------------------------------------------------
    def open(self) -> bool:
        """Get the device's NVML handle and its static facts (idempotent; NVML itself is initialised once per process
        and each device's facts are read once, :mod:`truepeak.hardware.nvml`). Returns whether sampling is possible."""
        if self._opened:
            return self._nvml is not None
        self._opened = True
        h, why = nvml.handle(self.device_index)
        info = nvml.device_info(self.device_index) if h is not None else None
        if info is None:
            self.reason = why or f"NVML has no device {self.device_index}"
            return False
        self._nvml, self._handle = nvml.session()[0], h
        self._bits = reason_bits(self._nvml)
        self._sm_clock_limit_hz = info.max_sm_clock_hz
        self._power_limit_w = info.power_limit_w
        self._device_name = info.name
        self._reasons_fn = None if info.reasons_call is None else getattr(self._nvml, info.reasons_call)
        return True

    # -- sampling ----------------------------------------------------------------------------------------------------
    def _read(self, name: str, get: Any) -> Any:
        if name in self._unsupported:
            return None
        try:
            return get()
        except Exception:
            self._unsupported.add(name)  # NotSupported on this device: stop asking
            return None

    def poll(self) -> TelemetrySample | None:
        """Take one sample now (also used by the thread). ``None`` when NVML is not open."""
        nv, h = self._nvml, self._handle
        if nv is None:
            return None
        sm = self._read("sm", lambda: nv.nvmlDeviceGetClockInfo(h, nv.NVML_CLOCK_SM))
        mem = self._read("mem", lambda: nv.nvmlDeviceGetClockInfo(h, nv.NVML_CLOCK_MEM))
        power = self._read("power", lambda: nv.nvmlDeviceGetPowerUsage(h))
        temp = self._read("temp", lambda: nv.nvmlDeviceGetTemperature(h, nv.NVML_TEMPERATURE_GPU))
        reasons = self._read("reasons", lambda: self._reasons_fn(h)) if self._reasons_fn is not None else None
        return TelemetrySample(
            t_s=time.perf_counter(),
            sm_clock_hz=None if sm is None else sm * 1e6,
            mem_clock_hz=None if mem is None else mem * 1e6,
            power_w=None if power is None else power / 1000.0,
            temperature_c=None if temp is None else float(temp),
            reasons=None if reasons is None else int(reasons),
        )

    def _run(self) -> None:
        try:
            while True:
                sample = self.poll()
                if sample is not None:
                    with self._lock:
                        if len(self.samples) < self.max_samples:
                            self.samples.append(sample)
                if self._stop.wait(self.interval_s):
                    break
        except Exception as exc:  # never let the sampler take the measurement down
            self.reason = f"NVML sampling stopped ({type(exc).__name__}: {exc})"

    def __enter__(self) -> NvmlSampler:
        if self.open():
            self._stop.clear()
            self._thread = threading.Thread(target=self._run, name="truepeak-nvml", daemon=True)
            self._thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.stop()
        self.close()

    def stop(self) -> None:
        """Stop the polling thread (idempotent) after one last poll, so the end of the region is covered."""
        if self._thread is not None:
            self._stop.set()
            self._thread.join(timeout=max(1.0, 10 * self.interval_s))
            self._thread = None
            last = self.poll() if self._nvml is not None else None
            if last is not None:
                with self._lock:
                    if len(self.samples) < self.max_samples:
                        self.samples.append(last)

    def close(self) -> None:
        """Stop polling and drop the device handle (idempotent); NVML stays initialised for the next sampler of this
        process. Static limits and samples stay readable."""
        self.stop()
        self._nvml = None
        self._handle = None

    # -- result ------------------------------------------------------------------------------------------------------
    def summary(self) -> Telemetry | None:
        """The :class:`Telemetry` of the polls so far, or ``None`` (then :attr:`reason` says why)."""
        with self._lock:
            samples = list(self.samples)
        if not samples:
            if self.reason is None:
                self.reason = "NVML took no samples (was the sampler used as a context manager?)"
            return None
        return summarize(
            samples,
            sm_clock_limit_hz=self._sm_clock_limit_hz,
            power_limit_w=self._power_limit_w,
            device_name=self._device_name,
            bits=self._bits,
        )
