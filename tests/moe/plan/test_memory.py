"""Memory per GPU (truepeak.moe.plan.memory): weights and KV cache by hand, and a plan that does not fit."""

from __future__ import annotations

import pytest

from truepeak.moe.findings import DoesNotFit
from truepeak.moe.plan import plan
from truepeak.report.plan import finding_text


def test_model_that_does_not_fit_says_by_how_much(dsv3, h200):
    p = plan(dsv3, h200, "tp1", 1, weights="bf16", context=4096)
    pc = dsv3.params_total()
    moe_layers = dsv3.num_moe_layers
    # bf16 everywhere; the router's weight E x H counted, its bias and the RMSNorm weights not
    weights = 2 * (pc.attention + pc.dense_mlp + pc.routed_experts + pc.shared_experts + pc.embedding + pc.lm_head
                   + moe_layers * 256 * 7168)
    kv = 4096 * 61 * (512 + 64) * 2                                      # MLA latent + rope key per token, bf16
    assert p.memory.weights == pytest.approx(weights)
    assert p.memory.kv_cache == kv == 287_834_112
    assert not p.memory.fits
    assert p.memory.over == pytest.approx(weights + kv - 141e9)
    nofit = next(c for c in p.conclusions() if isinstance(c, DoesNotFit))
    assert (nofit.capacity_bytes, nofit.over_bytes, nofit.accelerator) == (141e9, p.memory.over, "NVIDIA H200 SXM")
    # GB with four significant digits: 1342 GB of bf16 weights (hand count above), 0.2878 GB of KV cache, 141 GB
    assert round(weights / 1e9) == round((weights + kv) / 1e9) == 1342 and round((weights + kv - 141e9) / 1e9) == 1201
    assert finding_text(nofit) == ("does not fit: 1342 GB per GPU (1342 GB weights + 0.2878 GB KV cache) exceeds the "
                                   "141 GB of NVIDIA H200 SXM by 1201 GB")


def test_mla_latent_cache_is_replicated_over_attention_tp(glm5, ws):
    tp = plan(glm5, ws, "tp8", 8, weights="nvfp4", context=1000).memory.kv_cache
    dp = plan(glm5, ws, "dp8ep8", 8, weights="nvfp4", context=1000).memory.kv_cache
    per_seq = 1000 * 78 * (512 + 64 + 128) * 2                          # latent + rope + DSA index key, bf16
    assert tp == 8 * per_seq and dp == 1 * per_seq


def test_memory_fit_is_the_plans_memory(glm5, ws):
    from truepeak.moe.layout import parse_layout
    from truepeak.moe.ops import resolve_formats
    from truepeak.moe.plan import memory_fit

    p = plan(glm5, ws, "tp2pp4", 8, weights="nvfp4", context=2048)
    assert memory_fit(glm5, ws, parse_layout("tp2pp4"), 8, 2048, resolve_formats(ws, "nvfp4")) == p.memory
