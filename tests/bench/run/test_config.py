"""The run's settings (truepeak/bench/run/config.py): the built-in budgets, the run_config stored in every record,
and RunConfig / Budgets refusing bad fields (no torch needed)."""

from __future__ import annotations

import dataclasses

import pytest

from truepeak.bench import run as R
from truepeak.errors import ConfigError
from truepeak.hardware.detect import cuda_device_info


def _h200():
    return cuda_device_info("NVIDIA H200", "9.0", sm_count=132, l2_bytes=62914560, smem_per_block_bytes=232448,
                            max_sm_clock_hz=1980e6, memory_bytes=150 * 10**9, index=0)


def test_default_budgets():
    assert R.default_budgets(_h200()) is R.GPU_BUDGETS and R.default_budgets(_h200(), quick=True) is R.QUICK_GPU_BUDGETS
    cpu = dataclasses.replace(_h200(), kind="cpu")
    assert R.default_budgets(cpu) is R.CPU_BUDGETS and R.default_budgets(cpu, quick=True) is R.QUICK_BUDGETS


def test_run_config_states_the_method():
    cfg = R.run_config(_h200(), False, R.GPU_BUDGETS)
    assert cfg["settle"] == {"format": "bf16", "shape": "8192x8192x8192", "seconds": 3.0}
    assert cfg["graph_threshold_s"] == 50e-6
    assert cfg["budget_settings"]["large_budget_s"] == 1.0 and cfg["budgets"] == "gpu"
    volta = cuda_device_info("Tesla V100-SXM2-32GB", "7.0", sm_count=80, l2_bytes=6 * 2**20,
                             smem_per_block_bytes=None, max_sm_clock_hz=None, memory_bytes=None)
    assert R.run_config(volta, False, R.GPU_BUDGETS)["settle"]["format"] == "fp16"  # no bf16 before sm_80


def test_run_config_canonicalises_its_fields():
    cfg = R.RunConfig(formats=["BF16", " fp8", "bf16", ""], modes=["both", "burst"], quick=1)
    assert cfg.formats == ("bf16", "fp8_e4m3") and cfg.modes == ("sustained", "burst") and cfg.quick is True
    assert R.RunConfig().formats is None and R.RunConfig().modes == ("sustained",)
    assert R.RunConfig(formats=[]).formats is None  # nothing asked: the device's defaults


@pytest.mark.parametrize(("fields", "field", "message"), [
    ({"formats": ["fp9"]}, "formats", "unknown number format 'fp9'"),
    ({"formats": "bf16,fp8"}, "formats", "formats takes a list of names, got the string 'bf16,fp8'"),
    ({"modes": ["turbo"]}, "modes", "unknown mode 'turbo'; accepted: sustained .*, burst .*, both"),
    ({"modes": "burst"}, "modes", "modes takes a list of names"),
    ({"device": "tpu"}, "device", "unknown device 'tpu'"),
    ({"out": " "}, "out", "--out is empty"),
    ({"resume": True}, "resume", "--resume needs --out DIR"),
    ({"budgets": {"settle_s": 1}}, "budgets", "budgets must be a Budgets, got dict"),
])
def test_run_config_names_the_bad_field(fields, field, message):
    with pytest.raises(ConfigError, match=message) as info:
        R.RunConfig(**fields)
    assert info.value.field == field


def test_budgets_refuse_negative_seconds_and_no_rows():
    with pytest.raises(ConfigError, match="budgets warmup_s must be a number of seconds >= 0, got -0.1") as info:
        dataclasses.replace(R.GPU_BUDGETS, warmup_s=-0.1)
    assert info.value.field == "warmup_s"
    with pytest.raises(ConfigError, match="check_rows must be a whole number >= 1, got 0"):
        dataclasses.replace(R.GPU_BUDGETS, check_rows=0)
    assert dataclasses.replace(R.GPU_BUDGETS, settle_s=0).settle_s == 0  # zero seconds: no settle, allowed
