"""Shared test set-up.

- Tests marked ``@pytest.mark.gpu`` are skipped unless torch sees a CUDA GPU (the reason is reported), so
  ``python -m pytest`` stays green on a laptop and runs everything on a GPU box.
- ``fake_pynvml``: a stand-in NVML module (an H200 at 1455 of 1980 MHz, 690.5 W of 700 W, power-capped, no temperature
  sensor) installed as ``pynvml`` for the test, to exercise telemetry without a GPU.
"""

from __future__ import annotations

import functools
import sys
import types

import pytest


@functools.lru_cache(maxsize=1)
def _cuda_unavailable_reason() -> str | None:
    """None when a CUDA GPU is usable, else why not (torch is imported only when a gpu test is collected)."""
    try:
        import torch
    except ImportError:
        return "needs torch with CUDA (torch is not installed)"
    try:
        if torch.cuda.is_available():
            return None
    except Exception as exc:  # broken driver installs raise here
        return f"needs a CUDA GPU (torch.cuda.is_available() failed: {exc})"
    return f"needs a CUDA GPU (torch {torch.__version__} sees none)"


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "gpu: needs a CUDA GPU (skipped without one)")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    gpu_items = [item for item in items if item.get_closest_marker("gpu") is not None]
    if not gpu_items:
        return
    reason = _cuda_unavailable_reason()
    if reason is None:
        return
    skip = pytest.mark.skip(reason=reason)
    for item in gpu_items:
        item.add_marker(skip)


class _NotSupported(Exception):
    pass


@pytest.fixture
def fake_pynvml(monkeypatch: pytest.MonkeyPatch) -> types.ModuleType:
    """Install a fake ``pynvml``; ``fake_pynvml.calls`` counts nvmlInit / nvmlShutdown."""
    calls: dict[str, int] = {}
    nv = types.ModuleType("pynvml")
    nv.calls = calls
    nv.NVML_CLOCK_SM, nv.NVML_CLOCK_MEM, nv.NVML_TEMPERATURE_GPU = 1, 2, 0
    nv.nvmlClocksEventReasonSwPowerCap = 0x4
    nv.nvmlInit = lambda: calls.__setitem__("init", calls.get("init", 0) + 1)
    nv.nvmlShutdown = lambda: calls.__setitem__("shutdown", calls.get("shutdown", 0) + 1)
    nv.nvmlDeviceGetHandleByIndex = lambda i: ("handle", i)
    nv.nvmlDeviceGetMaxClockInfo = lambda h, clk: 1980
    nv.nvmlDeviceGetEnforcedPowerLimit = lambda h: 700_000
    nv.nvmlDeviceGetName = lambda h: b"NVIDIA H200"
    nv.nvmlDeviceGetClockInfo = lambda h, clk: 1455 if clk == 1 else 3201
    nv.nvmlDeviceGetPowerUsage = lambda h: 690_500

    def temperature(h, sensor):
        raise _NotSupported("temperature not supported")

    nv.nvmlDeviceGetTemperature = temperature
    nv.nvmlDeviceGetCurrentClocksEventReasons = lambda h: 0x4
    monkeypatch.setitem(sys.modules, "pynvml", nv)
    return nv
