"""What `truepeak moe plan` computes in one call (truepeak.moe.plan.plan_set): the layout chosen, the plans per batch,
the what-if table, the warnings, and the input it refuses."""

from __future__ import annotations

import json

import pytest

from truepeak.errors import TruepeakError
from truepeak.moe.findings import CompareOtherGpus, ContextAboveLimit, MtpNotModelled
from truepeak.moe.layout import LayoutError
from truepeak.moe.plan import DEFAULT_COMPARE_BATCHES, default_layout, plan, plan_set


def test_plans_per_batch_on_the_default_layout(glm5, ws):
    r = plan_set("glm-5", "NVIDIA RTX PRO 6000 Blackwell Workstation Edition", gpus=8, batches=[1, 512],
                 weights="nvfp4")
    assert r.layout.name == "tp8" and [p.batch for p in r.plans] == [1, 512]
    # glm-5 has an MTP layer and no mtp was given: the one warning
    assert r.cells is None and r.warnings == (MtpNotModelled("glm-5", 1),) and r.measured is None
    # the same plans as plan() gives (formats resolved once for both)
    assert r.plans[1].step_s == plan(glm5, ws, "tp8", 512, weights="nvfp4").step_s
    # the device string names the tuned-config files
    assert r.plans[0].tuned_configs.vllm.startswith("E=256,N=256,device_name=NVIDIA_RTX_PRO_6000_Blackwell")


def test_what_if_table_and_its_warnings(dsv3, h200):
    r = plan_set(dsv3, h200, gpus=8, compare=True, context=200_000)
    assert [lay.name for lay in r.layouts] == ["tp8", "ep8", "dp8ep8", "tp4pp2", "tp2pp4", "tp2ep4"]
    assert r.batches == DEFAULT_COMPARE_BATCHES and len(r.cells) == 6 * 8
    assert r.warnings == (ContextAboveLimit(200_000, "deepseek-v3", 163840), MtpNotModelled("deepseek-v3", 1))
    r = plan_set(dsv3, h200, gpus=8, compare=True, compare_layouts=["tp8", "tp4"], compare_batches=[1])
    assert r.warnings == (MtpNotModelled("deepseek-v3", 1), CompareOtherGpus("tp4", 4, 8, True)) and len(r.cells) == 2
    assert plan_set(dsv3, h200, layout="tp8", compare=True, compare_layouts="tp4",
                    compare_batches=[1]).warnings[1:] == (CompareOtherGpus("tp4", 4, 8, False),)


def test_six_gpus_default_to_a_layout_that_fits():
    # Qwen3-235B-A22B: 64 heads and 128 experts do not divide by 6; tp2pp3, dp6 and pp6 do
    from truepeak.moe.config import load_model

    q = load_model("qwen3-235b-a22b")
    assert default_layout(q, 6, for_compare=True).name == "tp2pp3"
    with pytest.raises(LayoutError, match="layouts of 6 GPUs that fit: tp2pp3, dp6, pp6"):
        default_layout(q, 6)
    assert default_layout(q, 8).name == "tp8"


def test_measured_paths_are_loaded(tmp_path, dsv3, h200):
    f = tmp_path / "c.jsonl"
    f.write_text(json.dumps({"schema_version": 3, "kind": "collective", "status": "ok", "mode": "graph",
                             "workload": {"op": "all_reduce", "bytes": 14336, "count": 7168, "dtype": "bf16",
                                          "n_ranks": 8},
                             "measurement": {"mode": "graph", "median_s": 20e-6},
                             "correctness": {"wrong": 0, "checked": 7168, "passed": True}}) + "\n")
    r = plan_set(dsv3, h200, gpus=8, weights="fp8", measured=[str(f)])
    assert r.measured is not None and r.measured.sources == ["c.jsonl"]
    ar = next(op for op in r.plans[0].ops if op.name == "TP all-reduce after attention")
    assert ar.measured and ar.time_s == pytest.approx(20e-6)               # 1 token x 7168 x 2 B = 14336 B


def test_refused_input(dsv3, h200):
    with pytest.raises(TruepeakError, match="layout tp4 uses 4 GPUs, not the 8 given"):
        plan_set(dsv3, h200, gpus=8, layout="tp4")
    with pytest.raises(TruepeakError, match="GPU count 0 must be a whole number >= 1"):
        plan_set(dsv3, h200, gpus=0)
    with pytest.raises(TruepeakError, match="batch 0 must be a whole number >= 1"):
        plan_set(dsv3, h200, gpus=8, batches=[0])
