"""Planning one step (truepeak.moe.plan.planner): bad input, the tuned-config file names, the pure-Python import."""

from __future__ import annotations

import json
from importlib import resources

import pytest

from truepeak.errors import TruepeakError, UnknownNameError
from truepeak.moe.config import load_model
from truepeak.moe.plan import plan


def _preset(name: str) -> dict:
    return json.loads((resources.files("truepeak.moe") / "presets" / f"{name}.json").read_text())


def test_batch_zero_is_refused(glm5, ws):
    with pytest.raises(TruepeakError, match="batch 0 must be a whole number >= 1"):
        plan(glm5, ws, "tp8", 0)


def test_unsupported_family_names_the_supported_ones(tmp_path):
    p = tmp_path / "config.json"
    p.write_text(json.dumps({"model_type": "llama", "hidden_size": 4096}))
    with pytest.raises(TruepeakError) as e:
        load_model(str(p))
    assert "deepseek_v3" in str(e.value) and "qwen3_moe" in str(e.value)


def test_missing_keys_are_named(tmp_path):
    cfg = _preset("glm-5")
    del cfg["n_routed_experts"], cfg["moe_intermediate_size"]
    p = tmp_path / "config.json"
    p.write_text(json.dumps(cfg))
    with pytest.raises(TruepeakError) as e:
        load_model(str(p))
    assert "n_routed_experts" in str(e.value) and "moe_intermediate_size" in str(e.value)


def test_unknown_format(glm5, ws):
    with pytest.raises(UnknownNameError):
        plan(glm5, ws, "tp8", 1, weights="fp5")


# -- tuned-config file names (vLLM get_config_file_name, SGLang's; moe_models.md §3) -----------------------------------


def test_tuned_config_names_deepseek_fp8_block(dsv3, h200):
    t = plan(dsv3, h200, "tp8", 1, weights="fp8").tuned_configs
    assert t.vllm == "E=256,N=256,device_name=NVIDIA_H200,dtype=fp8_w8a8,block_shape=[128,128].json"
    assert t.sglang == "E=257,N=256,device_name=NVIDIA_H200,dtype=fp8_w8a8,block_shape=[128, 128].json"


def test_tuned_config_names_ep8(glm5, ws):
    t = plan(glm5, ws, "ep8", 1, weights="bf16").tuned_configs     # moe_models.md §3: EP8 -> E=32, N=2048
    assert t.vllm.startswith("E=32,N=2048,device_name=NVIDIA_RTX_PRO_6000_Blackwell_Workstation_Edition")
    assert (t.experts_per_rank, t.n_per_rank) == (32, 2048)


def test_planner_imports_without_torch_or_numpy():
    import subprocess
    import sys

    code = ("import sys, truepeak.moe.plan, truepeak.moe.measured, truepeak.cli.moe; "
            "print('torch' in sys.modules, 'numpy' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
    assert out == ["False", "False"]                               # DESIGN.md: the moe core is pure Python
