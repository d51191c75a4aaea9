"""Routing facts of a plan (truepeak.moe.plan.routing_facts): what the busiest GPU computes with and without EP."""

from __future__ import annotations

import pytest

from truepeak.moe.plan import RoutingFacts, clear_routing_cache, plan
from truepeak.moe.routing import routing_stats


def test_routing_facts_of_the_busiest_gpu(glm5, ws):
    # tp8, batch 512: every GPU holds every expert (width / 8), so it computes all T·k = 4096 pairs and receives all
    # 512 tokens; ep8: the busiest of 8 GPUs, from routing_stats(512, 8, 256, ep=8)
    tp = plan(glm5, ws, "tp8", 512, weights="nvfp4").routing
    assert isinstance(tp, RoutingFacts)
    assert (tp.tokens, tp.top_k, tp.num_experts, tp.ep) == (512, 8, 256, 1)
    assert (tp.gpu_pairs, tp.gpu_tokens_received) == (4096.0, 512.0) and tp.gpu_active_experts == tp.active_experts
    assert tp.padding_16 == 0.0 and tp.padding_64 == pytest.approx(1 - 16 / 64)        # 16 rows per expert
    rs = routing_stats(512, 8, 256, ep=8)
    ep = plan(glm5, ws, "ep8", 512, weights="nvfp4").routing
    assert (ep.gpu_pairs, ep.gpu_active_experts, ep.gpu_tokens_received) == (
        rs.busiest_gpu_pairs, rs.busiest_gpu_active_experts, rs.busiest_gpu_tokens_sent)
    assert ep.gpu_pairs > 512 * 8 / 8 and ep.experts_per_gpu == 32


def test_routing_facts_to_dict_keeps_the_json_names(glm5, ws):
    d = plan(glm5, ws, "tp8", 1, weights="nvfp4").routing.to_dict()
    assert list(d) == ["routing", "method", "mean_tokens_per_expert", "busiest_expert_tokens", "active_experts",
                       "experts_per_gpu", "mean_gpu_pairs", "busiest_gpu_pairs", "busiest_gpu_active_experts",
                       "busiest_gpu_tokens_sent", "padding_16", "padding_64", "expected_padding_16",
                       "expected_padding_64", "tokens", "top_k", "num_experts", "ep", "gpu_pairs",
                       "gpu_active_experts", "gpu_tokens_received"]
    assert (d["routing"], d["method"], d["mean_tokens_per_expert"]) == ("uniform", "exact", 8 / 256)


def test_clearing_the_routing_cache_changes_no_plan(glm5, ws):
    before = plan(glm5, ws, "ep8", 64, weights="nvfp4")
    clear_routing_cache()
    after = plan(glm5, ws, "ep8", 64, weights="nvfp4")
    assert after.routing == before.routing and after.step_s == before.step_s
