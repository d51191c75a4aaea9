"""The words of `truepeak moe plan` (truepeak.report.plan): every kind of finding in its sentence, from values set by
hand (numbers through truepeak.units: times 3 significant digits in ms / µs, shares one decimal from 10 % up and two
significant digits below, GB 4 significant digits), the interconnect's reasons, and the JSON document: the
planner's data with the sentences added, never a field lost."""

from __future__ import annotations

import json

import pytest

from truepeak.hardware.lookup import get_accelerator
from truepeak.moe.config import load_model
from truepeak.moe.findings import (ActivationsFallback, AllReduceShare, CommunicationBound, CompareOtherGpus,
                                   ComputeBound, ContextAboveLimit, CrossesBaseboard, DoesNotFit, ExpertGemmIntensity,
                                   MemoryBound, PcieCommunicationBound, UnquantisedGroups, WeightsDequantised)
from truepeak.moe.plan import InterconnectChoice, PlanSet, plan
from truepeak.report.plan import finding_text, interconnect_text, plan_json, render_json


@pytest.mark.parametrize("finding, text", [
    # 158 collectives, 4.0386 ms of a 6.7452 ms step (59.87 %), 157 all-reduces of 25.52 µs
    (CommunicationBound(158, 4.0386e-3, 6.7452e-3, "all_reduce", 157, 25.52e-6, "pcie"),
     "Communication-bound: 158 collectives take 4.04 ms of the 6.75 ms step (59.9 %), 157 all-reduces at 25.5 µs each "
     "over PCIe — latency, not bandwidth, at these message sizes; fewer TP ranks, a custom all-reduce or larger "
     "batches per step would help most."),
    (CommunicationBound(16, 0.2e-3, 1e-3, "all_to_all", 8, 12e-6, "nvlink"),
     "Communication-bound: 16 collectives take 0.2 ms of the 1 ms step (20.0 %), 8 all-to-alls at 12 µs each over "
     "NVLink — latency, not bandwidth, at these message sizes; fewer TP ranks, a custom all-reduce or larger batches "
     "per step would help most."),
    # 5.6e9 B at 4.8e12 B/s; memory 1.2 ms of 1.5 ms (80 %), routed experts 0.9 ms (60 %); ridge 412.3 FLOP/B
    (MemoryBound(5.6e9, 4.8e12, 1.2e-3, 1.5e-3, "routed_experts", 0.9e-3, 412.3, True),
     "Memory-bound: each GPU streams 5.6 GB of weights and KV cache per step at 4800 GB/s (80.0 % of the 1.5 ms step; "
     "routed experts 60.0 %); weights dominate, so larger batches cost little until the expert GEMMs reach the 412 "
     "FLOP/B ridge."),
    (MemoryBound(2e9, 4.8e12, 1e-3, 2e-3, "kv_cache", 0.05e-3, 412.3, True),
     "Memory-bound: each GPU streams 2 GB of weights and KV cache per step at 4800 GB/s (50.0 % of the 2 ms step; "
     "attention over the KV cache 2.5 %); the KV cache read grows with batch x context, so a shorter context, an fp8 "
     "KV cache or DP attention (MLA's latent cache is replicated over attention TP) would help most."),
    (MemoryBound(2e9, 4.8e12, 1e-3, 2e-3, "kv_cache", 0.05e-3, 412.3, False),
     "Memory-bound: each GPU streams 2 GB of weights and KV cache per step at 4800 GB/s (50.0 % of the 2 ms step; "
     "attention over the KV cache 2.5 %); the KV cache read grows with batch x context, so a shorter context, an fp8 "
     "KV cache would help most."),
    (ComputeBound("routed_experts", 3e-3, 4e-3, 1978.9e12, "fp8_e4m3"),
     "Compute-bound: routed experts take 75.0 % of the 4 ms step at the 1978.9 TFLOPS dense fp8_e4m3 peak; a "
     "lower-precision format or more GPUs would help most."),
    (ExpertGemmIntensity(16.0, 512, 8, 256, 28.19, 54.674, 56.889, 1124.55, "nvfp4", True),
     "routed experts: 16 tokens per expert on average (T·k/E = 512·8/256), busiest expert 28.2; the expert GEMMs run "
     "at 54.7 FLOP/B (56.9 per weight byte) against a 1125 FLOP/B ridge (nvfp4) → memory-bound: judge them by % of "
     "memory bandwidth, not % of nvfp4 peak"),
    (AllReduceShare(157, 156, 25.52e-6, 4.0066e-3, 6.7452e-3, True),
     "157 all-reduces per step (156 in the layers: 2 per layer) at 25.5 µs each = 4.01 ms, 59.4 % of the 6.75 ms "
     "step — a major share of the step"),
    (AllReduceShare(3, 2, 10e-6, 30e-6, 1e-3, False),
     "3 all-reduces per step (2 in the layers: 2 per layer) at 10 µs each = 0.03 ms, 3 % of the 1 ms step"),
    (PcieCommunicationBound(8, 4.0386e-3, 6.7452e-3, 1, True),
     "communication-bound: TP8 over PCIe only — collectives take 4.04 ms (59.9 %) of the step at batch 1; each small "
     "all-reduce costs ~20-35 µs of latency whatever its size, and vLLM / SGLang disable their custom all-reduce for "
     "more than two PCIe-only GPUs; prefer TP <= 2 (EP / PP for the rest) on PCIe boxes (see docs/method.md, "
     "'Small-message latency')"),
    (PcieCommunicationBound(8, 9e-3, 30e-3, 512, False),
     "communication-bound: TP8 over PCIe only — collectives take 9 ms (30.0 %) of the step at batch 512; PCIe bus "
     "bandwidth (~24 GB/s busbw on 8 GPUs) does not grow with the GPU count (see docs/method.md, 'busbw and algbw'), "
     "and vLLM / SGLang disable their custom all-reduce for more than two PCIe-only GPUs; prefer TP <= 2 (EP / PP for "
     "the rest) on PCIe boxes (see docs/method.md, 'Small-message latency')"),
    (CrossesBaseboard(16, "NVIDIA H200 SXM", 8),
     "16 GPUs per pipeline stage exceed one NVIDIA H200 SXM baseboard (8 GPUs in one NVLink domain): their "
     "collectives cross boxes over InfiniBand / RoCE, which this plan does not model (it uses single-box NVLink "
     "numbers, so communication is optimistic); keep TP / EP within 8 GPUs and use PP across boxes, or pass "
     "--measured from a multi-node truepeak comm run"),
    (DoesNotFit(150.25e9, 149.9e9, 0.35e9, 141e9, 9.25e9, "NVIDIA H200 SXM"),
     "does not fit: 150.2 GB per GPU (149.9 GB weights + 0.35 GB KV cache) exceeds the 141 GB of NVIDIA H200 SXM by "
     "9.25 GB"),
    (ActivationsFallback("NVIDIA A100 SXM 80GB", "fp8_e4m3", "bf16"),
     "NVIDIA A100 SXM 80GB has no fp8_e4m3 tensor-core path: activations run as bf16"),
    (WeightsDequantised("NVIDIA A100 SXM 80GB", "sm_80", "no_rate", "fp8", "fp8_e4m3", 8, "bf16", 16, 312e12, 1.0),
     "NVIDIA A100 SXM 80GB (sm_80) has no fp8 tensor-core path: fp8_e4m3 weights are dequantised inside the GEMM "
     "(Marlin-style W8A16) and compute at the dense bf16 peak of 312.0 TFLOPS; weight bytes stay 1 B per value"),
    (WeightsDequantised("X", "sm_89", "no_block_scaling", "fp8", "mxfp8", 8, "bf16", 16, 82.58e12, 1.03125),
     "X (sm_89) has no hardware block scaling: mxfp8 weights are dequantised inside the GEMM (Marlin-style W8A16) "
     "and compute at the dense bf16 peak of 82.58 TFLOPS; weight bytes stay 1.03125 B per value"),
    (UnquantisedGroups("mxfp4", ("attention", "shared_experts"), (), 1e9, 3.7647e9),
     "one weight format per plan: attention projections and shared experts are planned in mxfp4, though the "
     "checkpoint leaves them unquantised (1 GB of weights per GPU here, 3.765 GB in bf16: their bytes and time are "
     "below the checkpoint's); router, embedding and lm_head are bf16 in every plan, as in the checkpoint"),
    (ContextAboveLimit(200000, "deepseek-v3", 163840),
     "--context 200000 is above deepseek-v3's max_position_embeddings 163840: planned anyway, but the model does not "
     "serve that context as configured"),
    (CompareOtherGpus("tp4", 4, 8, True),
     "--compare layout tp4 uses 4 GPUs, not the 8 of --gpus: its row is planned on 4 GPUs (tokens/s total for 4 "
     "GPUs; compare rows per GPU)"),
    (CompareOtherGpus("ep16", 16, 8, False),
     "--compare layout ep16 uses 16 GPUs, not the 8 of the plan above: its row is planned on 16 GPUs (tokens/s total "
     "for 16 GPUs; compare rows per GPU)"),
])
def test_every_finding_in_its_sentence(finding, text):
    assert finding_text(finding) == text
    d = finding.to_dict()
    assert d["kind"] == finding.KIND and json.loads(json.dumps(d)) == d


def test_a_finding_to_dict_names_its_kind_and_values():
    assert CrossesBaseboard(16, "NVIDIA H200 SXM", 8).to_dict() == {
        "kind": "crosses_baseboard", "stage_gpus": 16, "accelerator": "NVIDIA H200 SXM", "baseboard_gpus": 8}
    assert UnquantisedGroups("mxfp4", ("attention",), ("routed_experts",), 1.0, 2.0).to_dict()["groups"] == \
        ["attention"]
    with pytest.raises(TypeError, match="no sentence for str"):
        finding_text("not a finding")


@pytest.mark.parametrize("choice, text", [
    (InterconnectChoice("pcie", "given"), "given"),
    (InterconnectChoice("pcie", "catalog", "no NVLink; PCIe 5.0 x16"), "catalog: no NVLink; PCIe 5.0 x16"),
    (InterconnectChoice("nvlink", "catalog_xgmi", "AMD Infinity Fabric (XGMI)"),
     "catalog: AMD Infinity Fabric (XGMI) (XGMI treated as an NVLink-class fabric)"),
    (InterconnectChoice("pcie", "bridge_beyond", "NVLink bridge (2 GPUs)", gpus=4),
     "catalog: NVLink bridge (2 GPUs) (bridge links 2 GPUs; 4 talk over PCIe)"),
    (InterconnectChoice("pcie", "board_without_nvlink", device="NVIDIA GeForce RTX 5090"),
     "no interconnect in the catalog; NVIDIA GeForce RTX 5090 boards have no NVLink (PCIe only)"),
    (InterconnectChoice("nvlink", "nvl_bridge"),
     "no interconnect in the catalog; NVL boards are NVLink-bridged up to 4 GPUs"),
    (InterconnectChoice("pcie", "nvl_beyond_bridge"),
     "no interconnect in the catalog; NVL bridges link at most 4 GPUs, the rest is PCIe"),
    (InterconnectChoice("nvlink", "baseboard_assumed", device="NVIDIA B200"),
     "no interconnect in the catalog; NVIDIA B200 assumed on an NVLink/NVSwitch baseboard"),
])
def test_interconnect_reasons(choice, text):
    assert interconnect_text(choice) == text


def test_plan_json_is_the_data_with_its_sentences():
    model, acc = load_model("glm-5"), get_accelerator("NVIDIA RTX PRO 6000 Blackwell Workstation Edition")
    p = plan(model, acc, "tp8", 1, weights="nvfp4")
    data, doc = p.to_dict(), plan_json(p)
    # every field of the data is in the document, in its order; the sentences are added next to what they say
    assert [k for k in doc if k in data] == list(data)
    assert list(doc)[list(doc).index("interconnect") + 1] == "interconnect_why"
    assert doc["interconnect_why"] == "catalog: no NVLink; PCIe 5.0 x16"
    assert doc["bottleneck"] == finding_text(p.bottleneck()) and doc["bottleneck"].startswith("Communication-bound")
    assert doc["conclusions"] == [finding_text(c) for c in p.conclusions()]
    assert [c["kind"] for c in data["findings"]["conclusions"]] == ["expert_gemm_intensity", "all_reduce_share",
                                                                     "pcie_communication_bound"]
    assert doc["notes"] == [finding_text(n) for n in p.notes] and len(doc["notes"]) == 1
    assert doc["formats"]["peak_note"] == "GEMMs compute at the dense nvfp4 peak of 2015.2 TFLOPS"
    assert doc["formats"]["notes"] == [] and doc["formats"]["scaling_note"] == ""
    assert doc["weights_origin"]["text"] == "nvfp4, from --weights" and doc["weights_origin"]["note"] is None
    warned = json.loads(render_json(PlanSet(model, acc, p.layout, (p,),
                                            warnings=(ContextAboveLimit(300000, "glm-5", 202752),))))
    assert warned["warnings"] == [finding_text(ContextAboveLimit(300000, "glm-5", 202752))]
    assert warned["warning_findings"] == [{"kind": "context_above_limit", "context": 300000, "model": "glm-5",
                                           "limit": 202752}]
