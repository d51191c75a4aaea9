"""Shared test set-up.

- Tests marked ``@pytest.mark.gpu`` (the marker is declared in pyproject.toml) are skipped unless torch sees a CUDA GPU
  (the reason is reported), so ``python -m pytest`` stays green on a laptop and runs everything on a GPU box.
- ``fake_pynvml``: a stand-in NVML module (an H200 at 1455 of 1980 MHz, 690.5 W of 700 W, power-capped, no temperature
  sensor) installed as ``pynvml`` for the test, to exercise telemetry without a GPU.
- Every test starts and ends with an empty NVML cache (:func:`truepeak.hardware.nvml.clear_cache`): the process-wide
  NVML session must not carry one test's ``pynvml`` into the next.
- ``stub_timing``: ``stub_timing(mp, gemm_s=..., copy_s=...)`` makes every CPU GEMM timing and every copy "take" the
  given seconds, so the run tests (tests/bench/test_run.py, tests/cli/test_run.py) compute derived values by hand.
- ``interrupt_gemm``: ``interrupt_gemm(mp, n)`` presses Ctrl-C at the n-th GEMM case of a run (the same run tests).
- ``without_torch``: ``import torch`` and ``import triton`` (and their submodules) fail for the test, as on a machine
  without them, so a check that must come before torch is needed is tested where torch is installed.
"""

from __future__ import annotations

import builtins
import functools
import sys
import types

import pytest

from truepeak.hardware import nvml


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


@pytest.fixture(autouse=True)
def _default_cuda_generator_still_usable(request: pytest.FixtureRequest):
    """After a GPU test, the default CUDA generator must still work: an aborted CUDA-graph capture can leave it
    "capturing", and every later ``torch.rand(..., device="cuda")`` then fails with "Offset increment outside graph
    capture". This names the test that did it instead of failing an innocent later one."""
    if request.node.get_closest_marker("gpu") is None or _cuda_unavailable_reason() is not None:
        yield
        return
    import torch

    def usable() -> str | None:
        try:
            torch.rand(1, device="cuda")
        except RuntimeError as exc:
            return str(exc)
        return None

    before = usable()
    yield
    after = usable()
    if before is None and after is not None:
        pytest.fail(f"this test left the default CUDA generator unusable: {after}")


@pytest.fixture(autouse=True)
def _fresh_nvml_cache():
    nvml.clear_cache()
    yield
    nvml.clear_cache()


class _NotSupported(Exception):
    pass


@pytest.fixture
def fake_pynvml(monkeypatch: pytest.MonkeyPatch) -> types.ModuleType:
    """Install a fake ``pynvml``; ``fake_pynvml.calls`` counts nvmlInit, nvmlShutdown and the static reads
    (``max_clock``, ``power_limit``, ``name``)."""
    calls: dict[str, int] = {}

    def count(key: str, value=None):
        calls[key] = calls.get(key, 0) + 1
        return value

    nv = types.ModuleType("pynvml")
    nv.calls = calls
    nv.NVML_CLOCK_SM, nv.NVML_CLOCK_MEM, nv.NVML_TEMPERATURE_GPU = 1, 2, 0
    nv.nvmlClocksEventReasonSwPowerCap = 0x4
    nv.nvmlInit = lambda: count("init")
    nv.nvmlShutdown = lambda: count("shutdown")
    nv.nvmlDeviceGetHandleByIndex = lambda i: ("handle", i)
    nv.nvmlDeviceGetHandleByPciBusId = lambda bus: ("handle", 3)
    nv.nvmlDeviceGetIndex = lambda h: h[1]
    nv.nvmlDeviceGetMaxClockInfo = lambda h, clk: count("max_clock", 1980)
    nv.nvmlDeviceGetEnforcedPowerLimit = lambda h: count("power_limit", 700_000)
    nv.nvmlDeviceGetName = lambda h: count("name", b"NVIDIA H200")
    nv.nvmlSystemGetDriverVersion = lambda: b"580.95.05"
    nv.nvmlDeviceGetClockInfo = lambda h, clk: 1455 if clk == 1 else 3201
    nv.nvmlDeviceGetPowerUsage = lambda h: 690_500

    def temperature(h, sensor):
        raise _NotSupported("temperature not supported")

    nv.nvmlDeviceGetTemperature = temperature
    nv.nvmlDeviceGetCurrentClocksEventReasons = lambda h: 0x4
    monkeypatch.setitem(sys.modules, "pynvml", nv)
    return nv


def _stub_timing(mp: pytest.MonkeyPatch, *, gemm_s: float, copy_s: float) -> None:
    """Through ``mp``: ``timing.time_cpu`` runs the GEMM once and returns 5 samples of ``gemm_s``; ``membw.measure_copy``
    returns 5 samples of ``copy_s`` for its copy, with the derived values of that time."""
    from truepeak.bench import membw, timing  # imported here: the run tests skip without torch before they get here
    from truepeak.bench.measurement import Measurement
    from truepeak.efficiency import derived_metrics
    from truepeak.roofline import Copy

    def time_cpu(fn, **kw):
        fn()  # the GEMM runs once; its time is fixed
        return Measurement(samples_s=(gemm_s,) * 5, mode="cpu", input_kind="random")

    def measure_copy(device, *, nbytes=None, quick=False, warmup_s=0.0, budget_s=0.0):
        nbytes = nbytes or membw.copy_bytes(device, quick)
        derived = derived_metrics(device.accelerator, Copy(nbytes), copy_s)
        return membw.CopyResult(nbytes, Measurement(samples_s=(copy_s,) * 5, mode="cpu"), derived)

    mp.setattr(timing, "time_cpu", time_cpu)
    mp.setattr(membw, "measure_copy", measure_copy)


@pytest.fixture(scope="session")
def stub_timing():
    """The timing stub, ``stub_timing(mp, gemm_s=..., copy_s=...)``; session-scoped so that module-scoped fixtures can
    apply it inside a ``pytest.MonkeyPatch.context()``."""
    return _stub_timing


def _interrupt_gemm(mp: pytest.MonkeyPatch, n: int) -> None:
    """Through ``mp``: Ctrl-C (``KeyboardInterrupt``) at the n-th GEMM case of a run; the other cases run for real."""
    from truepeak.bench import run as R  # imported here, like the timing stub

    real = R.runners.run_gemm
    calls = {"n": 0}

    def interrupted(*a, **k):
        calls["n"] += 1
        if calls["n"] == n:
            raise KeyboardInterrupt
        return real(*a, **k)

    mp.setattr(R.runners, "run_gemm", interrupted)


@pytest.fixture(scope="session")
def interrupt_gemm():
    """The Ctrl-C stand-in, ``interrupt_gemm(mp, n)``."""
    return _interrupt_gemm


@pytest.fixture
def without_torch(monkeypatch: pytest.MonkeyPatch) -> None:
    """``import torch`` / ``import triton`` (and ``torch.x``, ``from torch import x``) raise ImportError, as on a
    machine without them; every other import goes through. ``importlib.import_module`` is patched the same way: it is
    what :func:`truepeak.errors.require` calls, and it does not go through ``builtins.__import__`` (it would hand back
    the torch already in ``sys.modules``)."""
    import importlib

    real_import, real_import_module = builtins.__import__, importlib.import_module

    def hidden(name: str) -> bool:
        return name.split(".")[0] in ("torch", "triton")

    def fake_import(name, globals=None, locals=None, fromlist=(), level=0):
        if level == 0 and hidden(name):
            raise ImportError(f"No module named {name!r}")
        return real_import(name, globals, locals, fromlist, level)

    def fake_import_module(name, package=None):
        if hidden(name):
            raise ImportError(f"No module named {name!r}")
        return real_import_module(name, package)

    monkeypatch.setattr(builtins, "__import__", fake_import)
    monkeypatch.setattr(importlib, "import_module", fake_import_module)
