"""NVML, initialised once per process, and the static facts of each GPU, read once per device.

A `truepeak run` times ~120 cases, each with its own :class:`~truepeak.bench.telemetry.NvmlSampler`; detection and the
record environment want the same facts. Initialising NVML and re-reading the power limit and maximum clock for every
case costs time and says nothing new, so:

- :func:`session` calls ``nvmlInit`` once per process (``nvmlShutdown`` runs at interpreter exit) and remembers why NVML
  is unusable when it is (no ``nvidia-ml-py``, no driver): telemetry never stops a measurement;
- :func:`device_info` reads the name, maximum SM clock, enforced power limit and the clock-event-reasons call once per
  NVML device index (``functools.lru_cache``);
- :func:`driver_version` reads the driver version once.

Units: Hz and W (NVML reports MHz and mW). ``pynvml`` is imported only inside these functions. Tests that swap the
``pynvml`` module call :func:`clear_cache`.
"""

from __future__ import annotations

import atexit
import functools
from dataclasses import dataclass
from typing import Any

INSTALL = "pip install nvidia-ml-py"

#: NVML calls that return the current clock-event ("throttle") reasons, newest name first.
REASONS_CALLS = ("nvmlDeviceGetCurrentClocksEventReasons", "nvmlDeviceGetCurrentClocksThrottleReasons")


@dataclass(frozen=True)
class NvmlDevice:
    """Static facts of one GPU as NVML reports them; None where NVML could not read one.

    Attributes:
        index: the NVML device index (under ``CUDA_VISIBLE_DEVICES`` it differs from torch's index).
        name: the name NVML reports (``"NVIDIA H200"``).
        max_sm_clock_hz: ``nvmlDeviceGetMaxClockInfo(NVML_CLOCK_SM)``, Hz.
        power_limit_w: ``nvmlDeviceGetEnforcedPowerLimit``, W.
        reasons_call: the name of the pynvml function that reads clock-event reasons on this driver, or None.
    """

    index: int
    name: str | None
    max_sm_clock_hz: float | None
    power_limit_w: float | None
    reasons_call: str | None


@functools.lru_cache(maxsize=1)
def session() -> tuple[Any, str | None]:
    """``(pynvml, None)`` once NVML is initialised (once per process), or ``(None, why not)``. Never raises."""
    try:
        import pynvml  # nvidia-ml-py
    except ImportError as exc:
        return None, f"pynvml is not installed ({exc}); install it with: {INSTALL}"
    try:
        pynvml.nvmlInit()
    except Exception as exc:  # NVMLError_LibraryNotFound, DriverNotLoaded, ...
        return None, f"NVML is unavailable ({type(exc).__name__}: {exc})"
    atexit.register(_shutdown, pynvml)
    return pynvml, None


def handle(index: int) -> tuple[Any, str | None]:
    """``(handle, None)`` for NVML device ``index``, or ``(None, why not)``. Never raises."""
    nv, why = session()
    if nv is None:
        return None, why
    try:
        return nv.nvmlDeviceGetHandleByIndex(int(index)), None
    except Exception as exc:
        return None, f"NVML has no device {index} ({type(exc).__name__}: {exc})"


@functools.lru_cache(maxsize=None)
def device_info(index: int) -> NvmlDevice | None:
    """The static facts of NVML device ``index``, read once per process; None without NVML or without that device."""
    h, _ = handle(index)
    if h is None:
        return None
    nv, _ = session()
    clock = _try(lambda: nv.nvmlDeviceGetMaxClockInfo(h, nv.NVML_CLOCK_SM))
    power = _try(lambda: nv.nvmlDeviceGetEnforcedPowerLimit(h))
    name = _try(lambda: nv.nvmlDeviceGetName(h))
    return NvmlDevice(
        index=int(index),
        name=name.decode() if isinstance(name, bytes) else name,
        max_sm_clock_hz=None if clock is None else float(clock) * 1e6,
        power_limit_w=None if power is None else power / 1000.0,
        reasons_call=_reasons_call(nv, h),
    )


def index_of_pci_bus_id(bus_id: str) -> int | None:
    """The NVML index of the device at PCI bus id ``bus_id`` (``"00000000:19:00.0"``), or None. CUDA and NVML can
    number devices differently; the bus id is the same in both."""
    nv, _ = session()
    if nv is None:
        return None
    h = _try(lambda: nv.nvmlDeviceGetHandleByPciBusId(bus_id))
    index = None if h is None else _try(lambda: nv.nvmlDeviceGetIndex(h))
    return None if index is None else int(index)


@functools.lru_cache(maxsize=1)
def driver_version() -> str | None:
    """The driver version NVML reports (``"580.95.05"``), read once; None without NVML."""
    nv, _ = session()
    version = None if nv is None else _try(nv.nvmlSystemGetDriverVersion)
    return version.decode() if isinstance(version, bytes) else version


def clear_cache() -> None:
    """Forget the session and every cached fact (for tests that install another ``pynvml``)."""
    for cached in (session, device_info, driver_version):
        cached.cache_clear()


def _reasons_call(nv: Any, h: Any) -> str | None:
    for name in REASONS_CALLS:
        fn = getattr(nv, name, None)
        if fn is not None and _try(lambda: fn(h)) is not None:  # older drivers lack the newer symbol
            return name
    return None


def _try(get: Any) -> Any:
    try:
        return get()
    except Exception:
        return None


def _shutdown(nv: Any) -> None:
    _try(nv.nvmlShutdown)
