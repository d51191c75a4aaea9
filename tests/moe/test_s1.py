"""Case S1 (cases.md; communication.md §4; moe_models.md §3): GLM-5 NVFP4 on 8x RTX PRO 6000 Blackwell Workstation
Edition at TP8, through the planner. Every expected number is computed by hand below from the case's inputs."""

from __future__ import annotations

import pytest

from truepeak.moe.findings import AllReduceShare, CommunicationBound, ExpertGemmIntensity
from truepeak.moe.plan import MAJOR_SHARE, plan
from truepeak.report.plan import finding_text

# GLM-5 geometry (moe_models.md §2): H = 6144, I_e = 2048, E = 256, top-8, 78 layers (3 dense + 75 MoE).
H, I_E, E, K = 6144, 2048, 256, 8
NVFP4 = 0.5625                      # B per value: 4 bits + one 8-bit scale per 16 (C13)
PEAK = 2015.2e12                    # dense FP4: 188 SMs x 2617 MHz x 4096 FLOP/clk/SM
BW = 1.792e12                       # B/s


@pytest.fixture(scope="module")
def b512(glm5, ws):
    return plan(glm5, ws, "tp8", 512, weights="nvfp4")


@pytest.fixture(scope="module")
def b1(glm5, ws):
    return plan(glm5, ws, "tp8", 1, weights="nvfp4")


def test_S1_batch512_sixteen_tokens_per_expert(b512):
    r = b512.routing
    assert r.mean_tokens_per_expert == 512 * 8 / 256 == 16
    # moe_models.md §5.2: uniform routing puts ~28.2 tokens on the busiest expert at T = 512
    assert r.busiest_expert_tokens == pytest.approx(28.2, rel=0.02)
    assert r.active_experts == pytest.approx(256 * (1 - (1 - 8 / 256) ** 512))


def test_S1_batch512_expert_gemm_is_memory_bound(b512):
    gu = b512.expert_op("gate+up")
    # TP8: each GPU holds every expert with N sliced by 8: gate+up [M x 6144] . [6144 x 2*2048/8 = 512]
    pairs, n = 512 * 8, 2 * I_E // 8
    active = 256 * (1 - (1 - 8 / 256) ** 512)
    flop = 2 * pairs * n * H                                   # 25,769,803,776
    weight_bytes = active * n * H * NVFP4                      # ~452,984,832 with all 256 experts active
    a_bytes, c_bytes = pairs * H * NVFP4, pairs * n * 2        # nvfp4 activations in, bf16 out
    assert gu.flop == flop == 25_769_803_776
    assert gu.weight_bytes == pytest.approx(weight_bytes)
    assert gu.bytes == pytest.approx(weight_bytes + a_bytes + c_bytes)
    assert gu.flop / gu.weight_bytes == pytest.approx(56.889, abs=1e-3)       # "AI ~ 57 FLOP/B" (weights only)
    assert gu.intensity == pytest.approx(54.674, abs=1e-3)                    # with activations counted
    assert b512.ridge == pytest.approx(PEAK / BW) == pytest.approx(1124.55, abs=0.01)
    assert gu.bound == "memory"
    assert gu.time_s == pytest.approx((weight_bytes + a_bytes + c_bytes) / BW)   # 263.0 µs
    assert b512.expert_op("down").bound == "memory"


def test_S1_batch1_allreduces_are_a_major_share(b1):
    colls = b1.collectives()
    ar = colls["all_reduce"]
    in_layers = [op for op in b1.ops if op.detail.get("collective") == "all_reduce"
                 and op.detail.get("where") in ("attention", "mlp")]
    assert sum(op.calls for op in in_layers) == 2 * 78 == 156
    assert ar["calls"] == 157                                   # + the vocab-parallel embedding's all-reduce
    # PCIe 8-GPU default: α 24.6 µs, busbw 24 GB/s; message 6144 x 2 B = 12 KiB; factor 2(n-1)/n = 1.75
    per_call = 24.6e-6 + 12288 * 1.75 / 24e9
    assert ar["per_call_s"] == pytest.approx(per_call)
    layer_time = sum(op.total_s for op in in_layers)
    assert layer_time == pytest.approx(156 * per_call)          # 3.977 ms
    assert 3.9e-3 <= layer_time <= 5.5e-3                       # communication.md §4: 156 x 25-35 µs
    assert ar["time_s"] / b1.step_s >= MAJOR_SHARE
    assert b1.interconnect == "pcie"


def test_S1_conclusions_as_findings(b1, b512):
    """The conclusions are data: at batch 512 the expert GEMMs sit at 54.7 FLOP/B (56.9 per weight byte) under the
    1124.6 FLOP/B ridge; at batch 1 the 157 all-reduces (156 in the layers) are a major share."""
    gu = next(c for c in b512.conclusions() if isinstance(c, ExpertGemmIntensity))
    assert (gu.mean_tokens_per_expert, gu.tokens, gu.top_k, gu.num_experts) == (16, 512, 8, 256)
    assert gu.flop_per_byte == pytest.approx(54.674, abs=1e-3) and gu.memory_bound
    assert gu.flop_per_weight_byte == pytest.approx(56.889, abs=1e-3)
    assert gu.ridge_flop_per_byte == pytest.approx(PEAK / BW) and gu.compute_format == "nvfp4"
    ar = next(c for c in b1.conclusions() if isinstance(c, AllReduceShare))
    assert (ar.calls, ar.layer_calls, ar.major) == (157, 156, True)
    assert ar.per_call_s == pytest.approx(24.6e-6 + 12288 * 1.75 / 24e9)
    bn = b1.bottleneck()
    assert isinstance(bn, CommunicationBound) and (bn.collective, bn.calls, bn.interconnect) == ("all_reduce", 157,
                                                                                                   "pcie")


def test_S1_conclusions_in_words(b1, b512):
    text512 = " ".join(finding_text(c) for c in b512.conclusions())
    assert "16 tokens per expert on average" in text512
    assert "memory-bound" in text512 and "1125 FLOP/B ridge" in text512
    text1 = " ".join(finding_text(c) for c in b1.conclusions())
    assert "156 in the layers" in text1 and "a major share of the step" in text1
    assert "communication-bound: TP8 over PCIe only" in text1
    assert finding_text(b1.bottleneck()).startswith("Communication-bound: 158 collectives take ")


def test_S1_tuned_config_names(b512):
    t = b512.tuned_configs
    dev = "NVIDIA_RTX_PRO_6000_Blackwell_Workstation_Edition"
    assert t.vllm == f"E=256,N=256,device_name={dev}.json"          # N = I_e / TP = 2048 / 8
    assert t.sglang == f"E=257,N=256,device_name={dev}.json"        # shared expert fused as E + 1


@pytest.mark.parametrize("batch, per_gpu_mb", [(1, 21.2), (512, 679.5)])
def test_S1_routed_weight_bytes_per_layer_per_gpu(glm5, ws, batch, per_gpu_mb):
    # moe_models.md §3: NVFP4 routed weights streamed per MoE layer per GPU at TP8: 21 MB at T = 1 (8 active experts),
    # 0.68 GB at T >= 512 (all 256): active x 3 x 6144 x 2048 / 8 x 0.5625 B
    p = plan(glm5, ws, "tp8", batch, weights="nvfp4")
    wb = p.expert_op("gate+up").weight_bytes + p.expert_op("down").weight_bytes
    active = 256 * (1 - (1 - 8 / 256) ** batch)
    assert wb == pytest.approx(active * 3 * 6144 * 2048 / 8 * 0.5625)
    assert wb / 1e6 == pytest.approx(per_gpu_mb, rel=2e-3)
