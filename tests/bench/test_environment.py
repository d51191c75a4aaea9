"""The environment a record stores (truepeak.bench.environment): never fails, typed, no secrets, NVML shared."""

from __future__ import annotations

import json
import sys

import pytest

import truepeak
from truepeak.bench.environment import _nvml_info, _typed, environment
from truepeak.records import Environment


def test_environment_never_fails_and_records_command_line():
    env = environment(["truepeak", "run", "--shape", "8192x8192x8192", "my file"], device=None)
    assert isinstance(env, Environment)
    assert env.truepeak_version == truepeak.__version__
    assert env.python and env.command_line == "truepeak run --shape 8192x8192x8192 'my file'"
    assert env.argv == ("truepeak", "run", "--shape", "8192x8192x8192", "my file")
    assert env.gpu is None
    json.dumps(env.to_dict())
    full = environment([])  # with whatever torch/GPU this machine has
    assert Environment.from_dict(full.to_dict()) == full
    json.dumps(full.to_dict())


def test_a_value_of_an_unexpected_type_becomes_none():
    """A library reporting its version as a number (or a GPU field of another type) costs that field, not the run."""
    env = _typed({"truepeak_version": "0.1.0", "cudnn": "9.1", "gpu": {"name": "NVIDIA H200", "sm_count": "132"}})
    assert env.truepeak_version == "0.1.0" and env.cudnn is None
    assert env.gpu.name == "NVIDIA H200" and env.gpu.sm_count is None


def test_environment_hides_secret_looking_variables(monkeypatch):
    monkeypatch.setenv("NCCL_DEBUG", "INFO")
    monkeypatch.setenv("NCCL_API_TOKEN", "do-not-record")
    env = environment([], device=None)
    assert env.env_vars["NCCL_DEBUG"] == "INFO" and "NCCL_API_TOKEN" not in env.env_vars


def test_the_detected_device_is_added_by_the_caller():
    from truepeak.hardware.detect import detect_cpu

    dev = detect_cpu()
    env = environment([], device=None).replace(device=dev.to_dict())
    assert env.device.kind == "cpu" and env.device_name == dev.name and env.sm_count == dev.sm_count


@pytest.mark.gpu
def test_environment_on_a_gpu():
    env = environment(["truepeak", "run"])
    gpu = env.gpu
    assert gpu.name and gpu.compute_capability.count(".") == 1 and gpu.sm_count > 0
    assert gpu.l2_bytes > 0 and gpu.memory_bytes > 0
    assert env.cuda and env.torch
    assert gpu.driver is None or isinstance(gpu.driver, str)
    json.dumps(env.to_dict())


def test_environment_reads_nvml_through_the_shared_session(monkeypatch):
    """The driver, power limit and max SM clock come from truepeak.hardware.nvml (one nvmlInit per process, facts
    read once per device), never from an nvmlInit/nvmlShutdown pair of its own, which would tear down the session the
    telemetry samplers share."""
    import types

    from truepeak.hardware import nvml

    calls = {"init": 0, "shutdown": 0, "power": 0}

    def init():
        calls["init"] += 1

    def shutdown():
        calls["shutdown"] += 1

    def power(h):
        calls["power"] += 1
        return 700_000

    fake = types.SimpleNamespace(
        nvmlInit=init, nvmlShutdown=shutdown, NVML_CLOCK_SM=1,
        nvmlSystemGetDriverVersion=lambda: b"580.95.05",
        nvmlDeviceGetHandleByIndex=lambda i: ("handle", i),
        nvmlDeviceGetEnforcedPowerLimit=power,
        nvmlDeviceGetMaxClockInfo=lambda h, kind: 1980,
        nvmlDeviceGetName=lambda h: b"NVIDIA H200",
    )
    monkeypatch.setitem(sys.modules, "pynvml", fake)
    nvml.clear_cache()
    try:
        for _ in range(3):
            assert _nvml_info(0) == {"driver": "580.95.05", "power_limit_w": 700.0, "max_sm_clock_hz": 1980e6}
        assert calls == {"init": 1, "shutdown": 0, "power": 1}
    finally:
        nvml.clear_cache()
