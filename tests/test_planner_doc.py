"""docs/planner.md's worked example, recomputed: DeepSeek-V3 on 8 H200s, layout ep8, batch 64, context 4096, fp8 with
128 x 128 block scales. Each number the document prints is computed here by hand from the formulas it states, checked
against the planner, and found in the document as printed; and the measured all-reduce of its Qwen3-235B command."""

from __future__ import annotations

from pathlib import Path

import pytest

from truepeak.hardware.lookup import get_accelerator
from truepeak.moe.config import load_model
from truepeak.moe.measured import load_measured
from truepeak.moe.plan import plan

ROOT = Path(__file__).resolve().parents[1]
DOC = " ".join((ROOT / "docs" / "planner.md").read_text(encoding="utf-8").split())   # wrapping aside
H, E, K, I_E, LAYERS_MOE, B, C = 7168, 256, 8, 2048, 58, 64, 4096
BW = 4.8e12                           # H200 memory bandwidth, B/s (catalog)


@pytest.fixture(scope="module")
def ep8():
    return plan(load_model("deepseek-v3"), get_accelerator("h200"), "ep8", B, context=C)


def op(p, name):
    (hit,) = [o for o in p.ops if o.name == name]
    return hit


def test_routing_by_hand(ep8):
    r = ep8.routing
    assert r.mean_tokens_per_expert == B * K / E == 2.0
    active = E * (1 - (1 - K / E) ** B)                  # 256 · [1 − (248/256)^64] = 222.44
    assert r.active_experts == pytest.approx(active, rel=1e-12) and round(active, 1) == 222.4
    assert r.mean_gpu_pairs == B * K / 8 == 64
    assert round(r.busiest_gpu_pairs, 2) == 75.44 and round(r.busiest_gpu_active_experts, 1) == 30.3
    assert "**2 tokens per expert**" in DOC and "**222.4 of 256 experts active**" in DOC
    assert "**75.44** (token, expert) pairs against a mean of 64" in DOC and "**30.3** active experts" in DOC


def test_routed_expert_gate_up_by_hand(ep8):
    r, gu = ep8.routing, op(ep8, "routed experts gate+up")
    pairs, active = r.busiest_gpu_pairs, r.busiest_gpu_active_experts
    n = 2 * I_E                                           # gate and up rows, experts not split (EP)
    per_expert = n * H + (n // 128) * (H // 128) * 4      # fp8 values + one fp32 scale per 128 x 128 block
    assert per_expert == 29_367_296
    acts = pairs * (H + (H // 128) * 4)                   # fp8 rows + one fp32 scale per 1 x 128 group
    out = pairs * n * 2                                   # bf16 output
    nbytes = active * per_expert + acts + out
    assert gu.flop == pytest.approx(2 * pairs * n * H, rel=1e-12)
    assert gu.weight_bytes == pytest.approx(active * per_expert, rel=1e-12)
    assert gu.bytes == pytest.approx(nbytes, rel=1e-9)
    assert gu.time_s == pytest.approx(nbytes / BW, rel=1e-9) and gu.bound == "memory" and gu.calls == LAYERS_MOE
    assert round(gu.flop / 1e9, 3) == 4.430 and round(gu.weight_bytes / 1e6, 1) == 889.7
    assert round(nbytes / 1e6, 1) == 890.9 and round(gu.time_s * 1e6, 1) == 185.6
    assert round(gu.flop / gu.bytes, 2) == 4.97 and round(ep8.ridge) == 412
    assert "4.430 GFLOP" in DOC and "889.7 MB" in DOC and "**185.6 µs**" in DOC and "4.97 FLOP/B" in DOC


def test_mla_attention_and_all_reduce_by_hand(ep8):
    mla = op(ep8, "MLA attention over latent cache")
    kv = B * C * (512 + 64) * 2                           # bf16 latent cache: kv_lora 512 + rope 64 per token
    assert mla.bytes == kv == 301_989_888
    assert mla.flop == 2 * B * (128 // 8) * C * (2 * 512 + 64)
    assert round(mla.time_s * 1e6, 2) == round(kv / BW * 1e6, 2) == 62.91
    ar = op(ep8, "TP all-reduce after attention")
    s = B * H * 2
    assert ar.bytes == s == 917_504 == 896 * 1024
    t = 16.8e-6 + s * (2 * 7 / 8) / 370e9                 # α + S·factor/busbw, 8 GPUs on NVLink (defaults)
    assert ar.time_s == pytest.approx(t, rel=1e-12) and round(t * 1e6, 2) == 21.14
    assert sum(o.calls for o in ep8.ops if o.detail.get("collective") == "all_reduce") == 61 + 3 + 58 + 1 == 123
    assert "**62.91 µs**" in DOC and "**21.14 µs**, 123 per" in DOC and "917,504 B × 1.75 / 370 GB/s" in DOC


def test_step_and_memory(ep8):
    assert round(ep8.step_s * 1e3, 2) == 23.42 and round(ep8.tokens_per_s) == 2732
    assert ep8.tokens_per_s == pytest.approx(B / ep8.step_s) and round(ep8.tokens_per_s_per_gpu) == 342
    bounds = ep8.time_by_bound()
    assert round(100 * bounds["memory"] / ep8.step_s, 1) == 88.7
    assert round(100 * bounds["communication"] / ep8.step_s, 1) == 11.3
    m = ep8.memory
    assert (round(m.total / 1e9, 1), round(m.weights / 1e9, 2), round(m.kv_cache / 1e9, 2)) == (103.6, 85.14, 18.42)
    assert "Step **23.42 ms**, **2732 tokens/s** (342 per GPU)" in DOC
    assert "103.6 GB per GPU of 141 GB (85.14 GB weights + 18.42 GB KV cache)" in DOC


def test_measured_all_reduce_of_the_qwen_command():
    """`--measured docs/results/h200x2/results.jsonl`: a batch-1 all-reduce (1 x 4096 x 2 B = 8 KiB) on 2 H200s takes
    the measured CUDA-graph time, 9.73 µs, not the nccl-tests default's 16.6 µs + 8192 B / 325.2 GB/s."""
    measured = load_measured([str(ROOT / "docs" / "results" / "h200x2" / "results.jsonl")])
    p = plan(load_model("qwen3-235b-a22b"), get_accelerator("h200"), "tp2", 1, weights="fp8", measured=measured)
    ar = op(p, "TP all-reduce after attention")
    assert ar.bytes == 4096 * 2 == 8192 and ar.measured
    assert round(ar.time_s * 1e6, 2) == 9.73
    default = plan(load_model("qwen3-235b-a22b"), get_accelerator("h200"), "tp2", 1, weights="fp8")
    assert op(default, "TP all-reduce after attention").time_s == pytest.approx(16.6e-6 + 8192 / 325.2e9, rel=1e-12)
    assert "each 8 KiB all-reduce costs 9.73 µs" in DOC and "16.6 µs α of the nccl-tests default" in DOC
