"""Telemetry: reason-bit decoding, summarising synthetic NVML samples, and the sampler with a fake or absent NVML."""

from __future__ import annotations

import sys
import time
import types

import pytest

from truepeak.bench.telemetry import (
    NvmlSampler,
    Telemetry,
    TelemetrySample,
    decode_reasons,
    reason_bits,
    summarize,
)


def test_decode_reason_bits():
    assert decode_reasons(0) == ()
    assert decode_reasons(0x1) == ("idle",)
    assert decode_reasons(0x4) == ("power cap",)
    assert decode_reasons(0x4 | 0x20 | 0x40) == ("power cap", "sw thermal", "hw thermal")
    assert decode_reasons(0x8 | 0x80) == ("hw slowdown", "hw power brake")
    assert decode_reasons(0x2 | 0x10 | 0x100) == ("app clocks setting", "sync boost", "display clock setting")
    assert decode_reasons(0x4 | 0x800) == ("power cap", "unknown 0x800")
    with pytest.raises(ValueError):
        decode_reasons(-1)


def test_reason_bits_prefer_pynvml_constants():
    fake = types.SimpleNamespace(nvmlClocksEventReasonSwPowerCap=0x4000, nvmlClocksThrottleReasonGpuIdle=0x1)
    bits = reason_bits(fake)
    assert bits[0x4000] == "power cap" and 0x4 not in bits
    assert bits[0x1] == "idle" and bits[0x40] == "hw thermal"
    assert decode_reasons(0x4000, bits) == ("power cap",)


def test_reason_bits_match_installed_pynvml_when_present():
    pynvml = pytest.importorskip("pynvml")
    bits = reason_bits(pynvml)
    assert bits[pynvml.nvmlClocksThrottleReasonSwPowerCap] == "power cap"
    assert bits[pynvml.nvmlClocksThrottleReasonHwThermalSlowdown] == "hw thermal"


def _samples() -> list[TelemetrySample]:
    # a B200-like sustained run (cases.md C11): 1965 MHz at the start, then power-capped near 1580 MHz
    return [
        TelemetrySample(0.000, 1965e6, 3996e6, 700.0, 55.0, 0x0),
        TelemetrySample(0.005, 1580e6, 3996e6, 999.0, 66.0, 0x4),
        TelemetrySample(0.010, 1575e6, 3996e6, 1001.0, 70.0, 0x4 | 0x20),
        TelemetrySample(0.015, 1590e6, None, 998.0, 71.0, 0x4),
        TelemetrySample(0.020, None, 3996e6, None, None, None),
    ]


def test_summarize_synthetic_samples():
    t = summarize(_samples(), sm_clock_limit_hz=1965e6, power_limit_w=1000.0, device_name="NVIDIA B200")
    assert t.n_samples == 5
    assert t.duration_s == pytest.approx(0.020)
    assert t.sm_clock_median_hz == pytest.approx(1585e6)  # median of 4 readings
    assert (t.sm_clock_min_hz, t.sm_clock_max_hz) == (1575e6, 1965e6)
    assert t.mem_clock_median_hz == 3996e6
    assert t.power_median_w == pytest.approx(998.5) and t.power_max_w == 1001.0
    assert t.temperature_max_c == 71.0
    assert t.reasons == {"power cap": 0.75, "sw thermal": 0.25}  # fractions of the 4 polls with a mask
    assert t.clock_fraction == pytest.approx(1585 / 1965)
    assert t.throttle_reasons() == [("power cap", 0.75), ("sw thermal", 0.25)]
    assert t.device_name == "NVIDIA B200"


def test_summarize_empty_and_missing_fields():
    assert summarize([]) is None
    t = summarize([TelemetrySample(1.0), TelemetrySample(2.0)])
    assert t.n_samples == 2 and t.sm_clock_median_hz is None and t.reasons == {} and t.clock_fraction is None


def test_idle_is_not_a_throttle_reason():
    t = Telemetry(n_samples=2, reasons={"idle": 1.0})
    assert t.throttle_reasons() == []


def test_telemetry_dict_round_trip():
    t = summarize(_samples(), sm_clock_limit_hz=1965e6, power_limit_w=1000.0)
    d = t.to_dict()
    assert Telemetry.from_dict(d) == t
    assert Telemetry.from_dict({**d, "from_a_newer_version": 1}) == t


# -- the sampler -------------------------------------------------------------------------------------------------------
def test_sampler_without_nvml_library_is_a_noop(monkeypatch):
    fake = types.ModuleType("pynvml")

    def init():
        raise RuntimeError("NVML Shared Library Not Found")

    fake.nvmlInit = init
    monkeypatch.setitem(sys.modules, "pynvml", fake)
    with NvmlSampler(0, interval_s=0.001) as s:
        time.sleep(0.005)
    assert s.summary() is None
    assert "NVML is unavailable" in s.reason and "Not Found" in s.reason


def test_sampler_without_pynvml_package_is_a_noop(monkeypatch):
    monkeypatch.setitem(sys.modules, "pynvml", None)  # makes `import pynvml` raise ImportError
    s = NvmlSampler()
    with s:
        pass
    assert s.summary() is None
    assert "pip install nvidia-ml-py" in s.reason


def test_sampler_on_this_machine_never_raises():
    with NvmlSampler(0, interval_s=0.001) as s:
        time.sleep(0.003)
    summary = s.summary()
    assert summary is None and s.reason or isinstance(summary, Telemetry)


def test_sampler_with_fake_nvml(fake_pynvml):
    calls = fake_pynvml.calls
    s = NvmlSampler(device_index=3, interval_s=0.001)
    assert s.open() and s.open()  # idempotent
    with s:
        time.sleep(0.03)
    t = s.summary()
    assert s.reason is None
    assert t.n_samples >= 2
    assert t.sm_clock_median_hz == 1455e6 and t.sm_clock_limit_hz == 1980e6
    assert t.mem_clock_median_hz == 3201e6
    assert t.power_median_w == pytest.approx(690.5) and t.power_limit_w == 700.0
    assert t.temperature_max_c is None  # NotSupported: left out, not fatal
    assert t.reasons == {"power cap": 1.0}
    assert t.device_name == "NVIDIA H200"
    assert calls == {"init": 1, "max_clock": 1, "power_limit": 1, "name": 1}  # NVML stays up for the next sampler
    s.close()  # idempotent
    assert "shutdown" not in calls


def test_nvml_is_initialised_once_and_static_facts_read_once_per_device(fake_pynvml):
    """~120 cases per run open ~120 samplers: one nvmlInit and one read of each static fact per device, not 120."""
    from truepeak.hardware import nvml

    for _ in range(5):
        with NvmlSampler(device_index=0, interval_s=0.001):
            pass
    with NvmlSampler(device_index=1, interval_s=0.001) as other:
        pass
    calls = fake_pynvml.calls
    assert calls["init"] == 1
    assert calls["max_clock"] == calls["power_limit"] == calls["name"] == 2  # devices 0 and 1
    assert other.summary().power_limit_w == 700.0
    info = nvml.device_info(0)
    assert (info.name, info.max_sm_clock_hz, info.power_limit_w) == ("NVIDIA H200", 1980e6, 700.0)
    assert info.reasons_call == "nvmlDeviceGetCurrentClocksEventReasons"
    assert nvml.index_of_pci_bus_id("00000000:19:00.0") == 3 and nvml.driver_version() == "580.95.05"
    assert calls["init"] == 1


def test_sampler_without_the_device(fake_pynvml):
    def no_device(i):
        raise RuntimeError("Invalid Argument")

    fake_pynvml.nvmlDeviceGetHandleByIndex = no_device
    with NvmlSampler(device_index=7) as s:
        pass
    assert s.summary() is None and "NVML has no device 7" in s.reason


def test_sampler_survives_nvml_failing_mid_run(fake_pynvml):
    fake_pynvml.nvmlDeviceGetClockInfo = lambda h, clk: (_ for _ in ()).throw(RuntimeError("GPU is lost"))
    with NvmlSampler(interval_s=0.001) as s:
        time.sleep(0.01)
    t = s.summary()
    assert t is not None and t.sm_clock_median_hz is None and t.power_median_w == pytest.approx(690.5)


def test_sampler_rejects_bad_interval():
    with pytest.raises(ValueError):
        NvmlSampler(interval_s=0)


@pytest.mark.gpu
def test_sampler_on_a_real_gpu():
    with NvmlSampler(0, interval_s=0.002) as s:
        time.sleep(0.05)
    t = s.summary()
    assert t is not None, s.reason
    assert t.n_samples >= 5
    assert 100e6 < t.sm_clock_median_hz <= 4000e6
    assert t.sm_clock_limit_hz and t.sm_clock_limit_hz >= t.sm_clock_min_hz
    assert t.power_limit_w and t.power_limit_w > 50
    assert t.device_name
