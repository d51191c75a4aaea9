"""Measured times in a plan (truepeak.moe.measured): regression tests, each naming the wrong behaviour it guards.

Every expected value is computed by hand in the test from the numbers in its records (the 2x H200 values are those of
docs/results/h200x2/results.jsonl and docs/results/h200/moe/moe_experts.jsonl, rounded)."""

from __future__ import annotations

import json

import pytest

from truepeak.hardware.lookup import get_accelerator
from truepeak.moe.config import checkpoint_format, load_model
from truepeak.moe.measured import load_measured
from truepeak.moe.plan import plan


def _jsonl(path, records):
    path.write_text("\n".join(json.dumps(r) for r in records) + "\n")
    return str(path)


def _coll(mode, nbytes, t, op="all_reduce", n=2):
    """A collective record (schema 3) of ``nbytes`` in ``t`` seconds."""
    return {"schema_version": 3, "kind": "collective", "status": "ok", "mode": mode, "backend": "nccl",
            "format": "bf16", "workload": {"op": op, "bytes": nbytes, "count": nbytes // 2, "dtype": "bf16",
                                           "n_ranks": n},
            "measurement": {"mode": mode, "median_s": t},
            "correctness": {"wrong": 0, "checked": nbytes // 2, "passed": True},
            "derived": {"algbw_bytes_per_s": nbytes / t, "busbw_bytes_per_s": nbytes / t}}


# 2x H200 all_reduce (docs/results/h200x2/results.jsonl): eager ~24.5 µs, CUDA graph ~9.8 µs at 8-16 KiB.
AR_2XH200 = [_coll("eager", 8192, 24.47e-6), _coll("eager", 16384, 24.60e-6),
             _coll("graph", 8192, 9.726e-6), _coll("graph", 16384, 9.836e-6)]


def test_measured_collectives_use_the_cuda_graph_curve(tmp_path):
    # Bug: eager and graph points were merged into one curve and the median of two values is the larger (eager), so
    # a decode plan got 24.6 µs per all-reduce instead of the 9.8 µs a CUDA-graph decode step sees.
    t = load_measured(_jsonl(tmp_path / "c.jsonl", AR_2XH200))
    # 14336 B (one DeepSeek-V3 token: 7168 x 2 B) between 8192 and 16384: 9.726 + (9.836 - 9.726) * 6144 / 8192
    s, src = t.collective_time("all_reduce", 2, 14336)
    assert s == pytest.approx(9.8085e-6, rel=1e-4)
    assert "graph" in src
    # eager points alone are still used (then eager is all there is)
    e = load_measured(_jsonl(tmp_path / "e.jsonl", AR_2XH200[:2]))
    assert e.collective_time("all_reduce", 2, 14336)[0] == pytest.approx(24.47e-6 + 0.13e-6 * 0.75, rel=1e-4)


def test_measured_collectives_in_a_plan_are_graph_times(tmp_path):
    dsv3, h200 = load_model("deepseek-v3"), get_accelerator("h200")
    p = plan(dsv3, h200, "tp2", 1, weights="fp8", measured=load_measured(_jsonl(tmp_path / "c.jsonl", AR_2XH200)))
    ar = next(op for op in p.ops if op.name == "TP all-reduce after attention")
    assert ar.bytes == 7168 * 2 and ar.measured
    assert ar.time_s == pytest.approx(9.8085e-6, rel=1e-4)


def _moe(tpe, t, active=None, routing="uniform", e_local=32):
    """A moe_experts record (schema 3) of DeepSeek-V3's experts, ``tpe`` tokens per expert in ``t`` seconds."""
    w = {"model": "deepseek-v3", "layout": "ep8", "routing": routing, "tokens_per_expert": tpe, "E_local": e_local,
         "H": 7168, "I": 2048, "top_k": 8, "T": max(1, round(tpe * 256 / 8)), "weights_format": "bf16"}
    if active is not None:
        w["active_experts"] = active
    return {"schema_version": 3, "kind": "moe_experts", "status": "ok", "format": "bf16", "backend": "triton",
            "mode": "sustained", "workload": w, "measurement": {"mode": "sustained", "steady_median_s": t},
            "correctness": {"max_rel_error": 0.004, "passed": True},
            "derived": {"flop_per_s": 1e12, "bytes_per_s": 1e12}}


def test_moe_below_the_smallest_point_scales_by_active_experts(tmp_path):
    # Bug: below the smallest measured tokens per expert the smallest point's time was used as is. A grouped expert
    # GEMM streams the weights of the experts that receive tokens only: DeepSeek-V3 EP8 at batch 1 activates ~2.5 of
    # its 32 local experts, the 1-token-per-expert point 18, so the clamped time was ~7x too slow.
    t = load_measured(_jsonl(tmp_path / "m.jsonl", [_moe(1, 387e-6, 18), _moe(2, 420e-6, 27)]))
    kw = dict(experts=32, hidden=7168, width=2048, fmt="bf16", routing="uniform")
    s, src = t.moe_time(0.08, active_experts=2.5, **kw)
    assert s == pytest.approx(387e-6 * 2.5 / 18)                 # 53.75 µs
    assert "scaled by active experts" in src
    assert t.moe_time(1.5, active_experts=22, **kw)[0] == pytest.approx((387e-6 + 420e-6) / 2)   # interpolated
    # without the active count of the point (or of the plan) nothing is claimed below the curve: roofline
    u = load_measured(_jsonl(tmp_path / "n.jsonl", [_moe(1, 387e-6), _moe(2, 420e-6)]))
    assert u.moe_time(0.08, active_experts=2.5, **kw) is None
    assert t.moe_time(0.08, **kw) is None


def test_moe_curve_of_other_routing_is_not_used(tmp_path):
    # Bug: routing was not part of the match, so a uniform plan took the (faster: fewer active experts) powerlaw curve.
    t = load_measured(_jsonl(tmp_path / "m.jsonl", [_moe(16, 500e-6), _moe(16, 300e-6, routing="powerlaw:1.2")]))
    kw = dict(experts=32, hidden=7168, width=2048, fmt="bf16")
    assert t.moe_time(16, routing="uniform", **kw)[0] == pytest.approx(500e-6)
    assert t.moe_time(16, routing="powerlaw:1.2", **kw)[0] == pytest.approx(300e-6)
    assert t.moe_time(16, routing="dump:topk.npy", **kw) is None


def test_moe_plan_at_batch_one_is_not_clamped(tmp_path):
    dsv3, h200 = load_model("deepseek-v3"), get_accelerator("h200")
    meas = load_measured(_jsonl(tmp_path / "m.jsonl", [_moe(1, 387e-6, 18), _moe(2, 420e-6, 27)]))
    p = plan(dsv3, h200, "ep8", 1, weights="bf16", measured=meas)
    gu, dn = p.expert_op("gate+up"), p.expert_op("down")
    assert gu.measured and dn.measured
    active = p.routing.gpu_active_experts              # 1 token x top-8: at most 8 experts on the busiest GPU
    assert 1 <= active <= 8
    assert gu.time_s + dn.time_s == pytest.approx(387e-6 * active / 18)
    assert gu.time_s + dn.time_s < 387e-6 * 8 / 18


@pytest.mark.parametrize("q, fmt", [
    ({"quant_method": "fp8", "weight_block_size": [128, 128]}, "fp8"),     # DeepSeek-V3 / R1
    ({"quant_method": "mxfp4", "modules_to_not_convert": ["lm_head"]}, "mxfp4"),   # gpt-oss
    ({"quant_method": "modelopt", "quant_algo": "NVFP4"}, "nvfp4"),        # ModelOpt NVFP4 export (moe_models.md §2)
    ({"quant_method": "awq", "bits": 4}, None),
    (None, None),
])
def test_checkpoint_format_from_quantization_config(q, fmt):
    assert checkpoint_format(q) == fmt


def test_gpt_oss_config_with_mxfp4_defaults_to_mxfp4(tmp_path, capsys):
    # Bug: only quant_method fp8 was read, so a gpt-oss config.json (MXFP4 experts) was planned in bf16: 233.8 GB of
    # weights on one H200, "does not fit". In MXFP4 the routed experts of gpt-oss-120b take
    # 36 layers x 128 experts x (3 x 2880 x 2880 + biases) x 0.53125 B; the plan's memory must be far below 141 GB.
    from importlib import resources

    from truepeak.cli.app import main

    cfg = json.loads((resources.files("truepeak.moe") / "presets" / "gpt-oss-120b.json").read_text())
    cfg["quantization_config"] = {"quant_method": "mxfp4"}
    (tmp_path / "config.json").write_text(json.dumps(cfg))
    assert load_model(str(tmp_path)).checkpoint_format == "mxfp4"
    with pytest.raises(SystemExit) as e:
        main(["moe", "plan", "--model", str(tmp_path), "--gpu", "h200", "--json"])
    assert e.value.code in (0, None)
    doc = json.loads(capsys.readouterr().out)
    p = doc["plans"][0]
    assert p["formats"]["weights"] == "mxfp4"
    routed = p["memory"]["weight_parts_bytes"]["routed_experts"]
    # per expert 3 x 2880 x 2880 = 24,883,200 weights in mxfp4 + 2 x 2880 gate/up and 2880 down biases = 8640 in bf16
    # (the checkpoint stores gate_up_proj_bias / down_proj_bias in bf16 next to the mxfp4 blocks and scales)
    assert routed == pytest.approx(36 * 128 * (24_883_200 * 0.53125 + 8640 * 2))   # 60.99 GB (bf16: 229.4 GB)
    assert p["memory"]["fits"] is True


def test_dump_of_the_planned_batch_gives_observed_routing(tmp_path):
    # Bug: a topk_ids dump was always read as per-expert probabilities, and the expected busiest expert was computed
    # from them, counting the dump's sampling noise twice (a uniform 512-token dump with an observed busiest expert of
    # 29 was planned at 35.2). At the dump's own T the plan now uses what was observed.
    # 4 tokens, top-8: expert 0 in every row, the others distinct, all ids < 32 -> all on EP8 GPU 0.
    rows = [[0, *range(1 + 7 * i, 8 + 7 * i)] for i in range(4)]
    f = tmp_path / "topk.txt"
    f.write_text("\n".join(" ".join(map(str, r)) for r in rows) + "\n")
    dsv3, h200 = load_model("deepseek-v3"), get_accelerator("h200")
    r = plan(dsv3, h200, "ep8", 4, weights="fp8", routing=str(f)).routing
    assert r.method == "empirical" and r.routing == "dump:topk.txt, observed"
    assert r.busiest_expert_tokens == 4          # expert 0: one per token
    assert r.active_experts == 1 + 4 * 7          # 29 distinct ids
    assert r.busiest_gpu_pairs == 32              # all 4 x 8 pairs land on GPU 0 (experts 0..31)
    assert r.gpu_active_experts == 29
    # another batch size: the dump is a histogram of probabilities again (expert 0 picked with probability 1)
    r8 = plan(dsv3, h200, "ep8", 8, weights="fp8", routing=str(f)).routing
    assert r8.method == "approximation" and r8.busiest_expert_tokens == pytest.approx(8)


def test_routing_labels_match_in_any_spelling(tmp_path):
    t = load_measured(_jsonl(tmp_path / "m.jsonl", [_moe(16, 300e-6, routing="PowerLaw:1.20")]))
    kw = dict(experts=32, hidden=7168, width=2048, fmt="bf16")
    assert t.moe_time(16, routing="powerlaw:1.2", **kw)[0] == pytest.approx(300e-6)
    assert t.moe_time(16, routing="powerlaw:1.2:random", **kw)[0] == pytest.approx(300e-6)
    assert t.moe_time(16, routing="powerlaw:1.2:sorted", **kw) is None
