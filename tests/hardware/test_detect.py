"""Device detection: device strings, CUDA catalog matching (by name; NVML facts read once), the CPU as a device."""

from __future__ import annotations

import pytest

from truepeak.errors import TruepeakError
from truepeak.hardware import detect as det


def test_detect_cpu_on_this_machine():
    info = det.detect("cpu")
    assert info.kind == "cpu" and info.torch_device == "cpu"
    assert info.sm_count >= 1 and info.l2_bytes > 0
    assert info.matched_catalog is False
    assert any("estimated" in n for n in info.notes)
    # the bf16 rows' dashes are explained where the table is printed
    assert any(n.startswith("only the fp32 peak is estimated for a CPU") for n in info.notes)


@pytest.mark.parametrize("text,expected", [("auto", ("auto", None)), ("CPU", ("cpu", None)), ("cuda", ("cuda", None)),
                                           ("cuda:3", ("cuda", 3))])
def test_parse_device(text, expected):
    assert det.parse_device(text) == expected


@pytest.mark.parametrize("text", ["gpu", "cuda:x", "cuda:-1", "tpu:0", ""])
def test_parse_device_rejects(text):
    with pytest.raises(TruepeakError, match="auto, cpu, cuda or cuda:N"):
        det.parse_device(text)


def test_cuda_device_info_matches_the_catalog():
    info = det.cuda_device_info("NVIDIA H200", "9.0", sm_count=132, l2_bytes=62914560, smem_per_block_bytes=232448,
                                max_sm_clock_hz=1980e6, memory_bytes=150_000_000_000, index=0)
    assert info.matched_catalog
    assert info.accelerator.key == "h200-sxm"
    assert info.accelerator.dense_flops("bf16") == pytest.approx(989.4e12)
    assert info.sm_arch == 90 and info.torch_device == "cuda:0"
    assert info.notes == ()


def test_unknown_gpu_is_measured_without_any_peak():
    info = det.cuda_device_info("NVIDIA Imaginary X1", "9.0", sm_count=100, l2_bytes=50 * 2**20,
                                smem_per_block_bytes=None, max_sm_clock_hz=None, memory_bytes=2**34, index=1)
    assert not info.matched_catalog
    assert info.accelerator.peaks == ()
    assert info.accelerator.memory_bandwidth is None
    assert not info.accelerator.has_rate("bf16")  # never a default peak
    assert any("not in the truepeak catalog" in n for n in info.notes)
    assert info.torch_device == "cuda:1"


def test_max_sm_clock_comes_from_nvml_once_and_is_shared_with_telemetry(fake_pynvml):
    """detect and every case's sampler read NVML's static facts from one per-process cache."""
    import types

    from truepeak.bench.telemetry import NvmlSampler

    props = types.SimpleNamespace(pci_bus_id=0x19, pci_domain_id=0, pci_device_id=0)  # NVML numbers it 3
    assert det._nvml_max_sm_clock_hz(0, props) == 1980e6
    assert det._nvml_max_sm_clock_hz(0, props) == 1980e6
    with NvmlSampler(device_index=3, interval_s=0.001) as s:
        pass
    assert s.summary().sm_clock_limit_hz == 1980e6
    assert fake_pynvml.calls["init"] == 1 and fake_pynvml.calls["max_clock"] == 1


def test_max_sm_clock_without_nvml_is_none(monkeypatch):
    import sys
    import types

    monkeypatch.setitem(sys.modules, "pynvml", None)
    assert det._nvml_max_sm_clock_hz(0, types.SimpleNamespace()) is None
