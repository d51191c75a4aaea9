"""The decode step (truepeak.moe.plan.step): collectives (C19, C20), routing facts per GPU (C17), measured
times, attention kinds and the pipeline. Expected values are computed by hand in each test from the case or data file
named."""

from __future__ import annotations

import json
from importlib import resources

import pytest

from truepeak.errors import TruepeakError
from truepeak.hardware.lookup import get_accelerator
from truepeak.moe.config import load_model
from truepeak.moe.findings import PcieCommunicationBound
from truepeak.moe.measured import interpolate, load_measured
from truepeak.moe.plan import plan
from truepeak.report.plan import finding_text


def _preset(name: str) -> dict:
    return json.loads((resources.files("truepeak.moe") / "presets" / f"{name}.json").read_text())


def _jsonl(path, records):
    path.write_text("\n".join(json.dumps(r) for r in records) + "\n")
    return str(path)


def _fit(n, busbw, op="all_reduce"):
    """A collective_fit record (schema 3): alpha 0, ``busbw`` B/s on ``n`` GPUs, CUDA-graph mode."""
    return {"schema_version": 3, "kind": "collective_fit", "status": "ok", "mode": "graph",
            "workload": {"op": op, "n_ranks": n, "dtype": "bf16", "min_bytes": 1024, "max_bytes": 2**30},
            "measurement": {"mode": "graph", "points": [[1024, 1e-5], [2**30, 1e-2]]},
            "derived": {"alpha_s": 0.0, "busbw_bytes_per_s": busbw}}


def _timed(kind, workload, t, **fields):
    """An ok record (schema 3) of ``kind`` taking ``t`` seconds; ``fields``: format, backend, ..."""
    return {"schema_version": 3, "kind": kind, "status": "ok", "mode": "sustained", "workload": workload,
            "measurement": {"mode": "sustained", "steady_median_s": t}, "correctness": {"passed": True}, **fields}


# -- communication -----------------------------------------------------------------------------------------------------


def test_c19_collective_time_uses_algbw(tmp_path):
    # C19: 8 GPUs on PCIe, ring all-reduce busbw 28 GB/s -> algbw = 28 * 8 / (2 * 7) = 16.0 GB/s: 1 GB in 62.5 ms;
    # 4 GPUs at busbw 35 -> algbw 23.3 GB/s: 1 GB in 42.9 ms. Bandwidth does not scale with the GPU count.
    fits = [_fit(n, bw) for n, bw in ((8, 28e9), (4, 35e9))]
    t = load_measured(_jsonl(tmp_path / "fit.jsonl", fits))
    t8, src = t.collective_time("allreduce", 8, 1e9)
    assert t8 == pytest.approx(62.5e-3) and "measured fit (graph)" in src
    assert 1e9 / t8 == pytest.approx(16.0e9)
    t4, _ = t.collective_time("all_reduce", 4, 1e9)
    assert t4 == pytest.approx(1e9 / (35e9 * 4 / 6)) == pytest.approx(42.857e-3, rel=1e-4)


def test_c19_plan_allreduce_from_measured_fit(tmp_path, glm5, ws):
    fit = _fit(8, 28e9)
    p = plan(glm5, ws, "tp8", 512, weights="nvfp4", measured=load_measured(_jsonl(tmp_path / "f.jsonl", [fit])))
    ar = next(op for op in p.ops if op.name == "TP all-reduce after attention")
    assert ar.bytes == 512 * 6144 * 2
    assert ar.time_s == pytest.approx(512 * 6144 * 2 / 16.0e9)       # S / algbw = 393.2 µs
    assert ar.measured


def test_c19_pcie_default_does_not_scale_with_gpus(glm5, ws):
    # the literature default: 8 GPUs busbw 24 GB/s (communication.md §2), 4 GPUs 35 GB/s (C19): algbw 13.7 vs 23.3
    p8 = plan(glm5, ws, "tp8", 512, weights="nvfp4")
    p4 = plan(glm5, ws, "tp4pp2", 512, weights="nvfp4")
    a8 = next(op for op in p8.ops if op.name == "TP all-reduce after attention")
    a4 = next(op for op in p4.ops if op.name == "TP all-reduce after attention")
    assert a8.time_s == pytest.approx(24.6e-6 + 512 * 6144 * 2 * (2 * 7 / 8) / 24e9)
    assert a4.bytes == 256 * 6144 * 2                                  # micro-batch of 512 / 2 stages
    assert a4.time_s == pytest.approx(19.4e-6 + 256 * 6144 * 2 * (2 * 3 / 4) / 35e9)


def _hundred_allreduce_model(tmp_path):
    """Qwen3-30B-A3B geometry (hidden 2048: a bf16 token is 4 KB) with 50 layers: 100 all-reduces per token at TP."""
    cfg = _preset("qwen3-30b-a3b")
    cfg["num_hidden_layers"] = 50
    p = tmp_path / "config.json"
    p.write_text(json.dumps(cfg))
    return load_model(str(p))


def test_c20_hundred_allreduces_cost_1_94_ms(tmp_path):
    # C20: 4 GPUs behind one PCIe switch, 4 KB all-reduce 19.4 µs (NCCL), ~100 all-reduces per token -> 1.94 ms.
    model = _hundred_allreduce_model(tmp_path)
    rec = _timed("collective", {"op": "all_reduce", "bytes": 4096, "count": 2048, "n_ranks": 4, "dtype": "bf16"},
                 19.4e-6, derived={"algbw_bytes_per_s": 4096 / 19.4e-6, "busbw_bytes_per_s": 4096 / 19.4e-6 * 1.5})
    meas = load_measured(_jsonl(tmp_path / "c.jsonl", [rec]))
    p = plan(model, get_accelerator("NVIDIA GeForce RTX 5090"), "tp4", 1, measured=meas)
    layer_ar = [op for op in p.ops if op.detail.get("collective") == "all_reduce"
                and op.detail.get("where") in ("attention", "mlp")]
    assert sum(op.calls for op in layer_ar) == 100
    assert all(op.time_s == pytest.approx(19.4e-6) and op.measured for op in layer_ar)
    assert sum(op.total_s for op in layer_ar) == pytest.approx(1.94e-3)
    flag = next(n for n in p.notes if isinstance(n, PcieCommunicationBound))
    assert (flag.tp_group, flag.batch, flag.small_batch) == (4, 1, True)
    assert flag.time_s == pytest.approx(sum(op.total_s for op in p.ops if op.group == "communication"))
    assert finding_text(flag).startswith("communication-bound: TP4 over PCIe only — collectives take ")


# -- routing (C17) -----------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("batch, rows, pad64, pad16", [
    (96, 1.875, 0.971, 0.883), (512, 10, 0.844, 0.375), (768, 15, 0.766, 0.0625)])
def test_c17_rows_per_expert_not_per_batch(batch, rows, pad64, pad16, h200):
    # C17: E = 512, top-10 (Qwen3-Next): rows per expert = M * 10 / 512, padded share with 64- and 16-row tiles
    model = load_model("qwen3-next-80b-a3b")
    r = plan(model, h200, "tp1", batch, context=1024).routing
    assert r.mean_tokens_per_expert == pytest.approx(rows)
    assert r.padding_64 == pytest.approx(pad64, abs=1e-3)
    assert r.padding_16 == pytest.approx(pad16, abs=1e-3)


def test_ep_uses_busiest_gpu(glm5, ws):
    p = plan(glm5, ws, "ep8", 512, weights="nvfp4")
    r = p.routing
    assert r.experts_per_gpu == 32
    assert r.gpu_pairs == r.busiest_gpu_pairs > 512 * 8 / 8        # the max over GPUs exceeds the mean
    gu = p.expert_op("gate+up")
    assert gu.flop == pytest.approx(2 * r.busiest_gpu_pairs * 2 * 2048 * 6144)   # full width I_e per expert
    assert gu.weight_bytes == pytest.approx(r.gpu_active_experts * 2 * 2048 * 6144 * 0.5625)


# -- measured times ----------------------------------------------------------------------------------------------------


def test_interpolate():
    pts = [(1.0, 10.0), (3.0, 30.0)]
    assert interpolate(pts, 2.0) == (20.0, "interpolated")
    assert interpolate(pts, 3.0) == (30.0, "exact")
    assert interpolate(pts, 0.5) == (10.0, "clamped")
    assert interpolate(pts, 4.0) is None
    assert interpolate(pts, 4.0, above="linear") == (40.0, "extrapolated")


def test_measured_gemm_replaces_roofline_and_missing_falls_back(tmp_path, dsv3, h200):
    # o_proj of DeepSeek-V3 at TP8: M = batch, N = 7168, K = 128 heads / 8 x 128 = 2048, fp8
    recs = [_timed("gemm", {"m": m, "n": 7168, "k": 2048}, t, format="fp8_e4m3") for m, t in ((1, 10e-6), (64, 20e-6))]
    recs.append({**_timed("gemm", {"m": 32, "n": 7168, "k": 2048}, 1.0, format="fp8_e4m3"), "status": "failed",
                 "reason": "out of memory", "correctness": None})
    meas = load_measured(_jsonl(tmp_path / "g.jsonl", recs + [{"not": "a record"}]))
    p = plan(dsv3, h200, "tp8", 32, weights="fp8", measured=meas)
    o = next(op for op in p.ops if op.name == "o_proj")
    assert o.measured and o.time_s == pytest.approx(10e-6 + (20e-6 - 10e-6) * 31 / 63)
    assert "o_proj" in p.measured_ops
    q = next(op for op in p.ops if op.name == "q_b proj")
    assert not q.measured and q.source == "roofline"


def test_measured_moe_experts(tmp_path, glm5, ws):
    # GLM-5 at TP8: 256 experts on each GPU, hidden 6144, expert width 2048 / 8 = 256
    recs = [_timed("moe_experts", {"model": "glm-5", "layout": "tp8", "routing": "uniform", "tokens_per_expert": tpe,
                                   "E_local": 256, "H": 6144, "I": 256, "top_k": 8, "T": tpe * 32,
                                   "weights_format": "nvfp4"}, t, format="nvfp4")
            for tpe, t in ((8, 300e-6), (32, 500e-6))]
    p = plan(glm5, ws, "tp8", 512, weights="nvfp4", measured=load_measured(_jsonl(tmp_path / "m.jsonl", recs)))
    gu, dn = p.expert_op("gate+up"), p.expert_op("down")
    assert gu.measured and dn.measured
    assert gu.time_s + dn.time_s == pytest.approx(300e-6 + 200e-6 * (16 - 8) / 24)   # 16 tokens per expert


def test_measured_file_without_usable_records(tmp_path):
    with pytest.raises(TruepeakError, match="no usable measurement"):
        load_measured(_jsonl(tmp_path / "x.jsonl", [_timed("membw", {"label": "copy", "nbytes": 8}, 1.0)]))
    with pytest.raises(TruepeakError, match="cannot read"):
        load_measured(str(tmp_path / "missing.jsonl"))


# -- attention kinds and pipeline --------------------------------------------------------------------------------------


def test_gqa_sliding_and_full_kv_reads(h200):
    # gpt-oss-120b: 36 layers alternating sliding (window 128) / full, 8 KV heads x 64, bf16 KV cache
    p = plan(load_model("gpt-oss-120b"), h200, "tp1", 1, weights="mxfp4", context=4096)
    sliding = next(op for op in p.ops if op.name == "sliding-window attention over KV cache")
    full = next(op for op in p.ops if op.name == "attention over KV cache")
    assert (sliding.calls, full.calls) == (18, 18)
    assert sliding.bytes == 128 * 2 * 8 * 64 * 2 == 262_144
    assert full.bytes == 4096 * 2 * 8 * 64 * 2 == 8_388_608
    assert p.formats.dequantised                                   # mxfp4 on Hopper: no fp4 tensor cores


def test_linear_attention_state_is_context_free(h200):
    # Qwen3-Next: 36 Gated DeltaNet layers (32 value heads x 128 x 128 state) + 12 full-attention layers
    model = load_model("qwen3-next-80b-a3b")
    a, b = plan(model, h200, "tp1", 4, context=1000), plan(model, h200, "tp1", 4, context=8000)
    da = next(op for op in a.ops if op.name == "Gated DeltaNet state update")
    db = next(op for op in b.ops if op.name == "Gated DeltaNet state update")
    assert da.calls == 36 and da.bytes == db.bytes == 2 * 4 * 32 * 128 * 128 * 2     # read + write, bf16


def test_pipeline_bubble_when_fewer_microbatches_than_stages(glm5, ws):
    # GLM-5 at PP4: 78 layers -> stages of 19, 19, 20, 20 (the remainder on the last stages); the last also runs
    # lm_head, so it is the slowest. Batch 1 = one micro-batch: the step is its trip through the 4 stages.
    p = plan(glm5, ws, "tp2pp4", 1, weights="nvfp4")
    busy = sum(op.total_s for op in p.ops)                          # the slowest stage, once
    assert {op.calls for op in p.ops} == {1, 20}                   # the last stage: 20 MoE layers, lm_head once
    assert not any(op.name == "pipeline send to next stage" for op in p.ops)
    assert 3 * busy < p.step_s < 4 * busy
    assert p.bubble_s == pytest.approx(p.step_s - busy)
    full = plan(glm5, ws, "tp2pp4", 8, weights="nvfp4")             # 4 micro-batches of 2: the pipeline is full
    assert full.step_s == pytest.approx(sum(op.total_s for op in full.ops)) and full.bubble_s == 0
