"""The settings of one `truepeak peak` (truepeak/bench/peak/config.py): PeakConfig checks its fields when built, before
torch is needed, and names the bad one."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from truepeak.bench import peak as P
from truepeak.errors import ConfigError


def test_peak_config_keeps_modes_as_given_and_canonicalises_formats():
    cfg = P.PeakConfig(formats=["fp8", "BF16", "fp8_e4m3"], modes=["both"], budget_s=30)
    assert cfg.formats == ("fp8_e4m3", "bf16") and cfg.modes == ("both",)  # "both": a CPU's note names it
    assert cfg.budget_default() == 30 and cfg.budget_map() == {}
    per = P.PeakConfig(budget_s={"bf16": 10.0, ("fp8_e4m3", "burst"): 5.0})
    assert per.budget_default() is None and per.budget_map() == {"bf16": 10.0, ("fp8_e4m3", "burst"): 5.0}


@pytest.mark.parametrize(("fields", "field", "message"), [
    ({"formats": ["fp9"]}, "formats", "unknown number format 'fp9'"),
    ({"modes": ["turbo"]}, "modes", "unknown mode 'turbo'; accepted: sustained"),
    ({"budget_s": 0}, "budget_s", "--budget must be > 0 seconds, got 0"),
    ({"budget_s": {"bf16": -1.0}}, "budget_s", "--budget must be > 0 seconds, got -1.0"),
    ({"device": "tpu"}, "device", "unknown device 'tpu'"),
    ({"out": ""}, "out", "--out is empty"),
    ({"resume": True}, "resume", "--resume needs --out DIR naming the peak search to continue"),
    ({"plan": "gpu"}, "plan", "plan must be a SearchPlan, got str"),
])
def test_peak_config_names_the_bad_field(fields, field, message):
    with pytest.raises(ConfigError, match=message) as info:
        P.PeakConfig(**fields)
    assert info.value.field == field


def test_default_formats_per_device():
    assert P.peak_formats(None, SimpleNamespace(kind="cuda")) == ["bf16", "fp8_e4m3"]
    assert P.peak_formats(None, SimpleNamespace(kind="cpu")) == ["fp32"]
    assert P.peak_formats(("fp16",), SimpleNamespace(kind="cuda")) == ["fp16"]
