"""The architecture types (truepeak.moe.config.model): parameter counts against published sizes (source named at
each number) and KV-cache elements."""

from __future__ import annotations

import pytest

from truepeak.errors import TruepeakError
from truepeak.moe.config import load_model, preset_names


def test_glm5_total_parameters_exact():
    """NVIDIA-NeMo/Megatron-Bridge docs/models/glm/glm5.md: the BF16 GLM-5 export reloads as GlmMoeDsaForCausalLM with
    743,911,199,232 parameters (moe_models.md §2, GLM-5 sources)."""
    assert load_model("glm-5").params_total().total == 743_911_199_232


def test_glm5_routed_share():
    """moe_models.md §3: 3·6144·2048 = 37,748,736 per expert; 724.8B routed parameters of 744B."""
    m = load_model("glm-5")
    assert m.experts.params_per_expert(m.hidden_size) == 37_748_736
    assert m.params_total().routed_experts == 75 * 256 * 37_748_736
    assert round(m.params_total().routed_experts / 1e9, 1) == 724.8


def test_deepseek_v3_671b_total_37b_active():
    """DeepSeek-V3 technical report (arXiv 2412.19437), abstract: 671B total, 37B activated per token (MTP module
    excluded). Routed by hand: 58 · 256 · 3 · 7168 · 2048."""
    m = load_model("deepseek-v3")
    total, active = m.params_total(), m.params_active()
    assert total.routed_experts == 58 * 256 * 3 * 7168 * 2048
    assert total.total == pytest.approx(671e9, rel=0.002)
    assert active.routed_experts == 58 * 8 * 3 * 7168 * 2048
    assert active.total == pytest.approx(37e9, rel=0.02)   # 36.6B: "37B" is rounded
    assert total.embedding == total.lm_head == 129280 * 7168 and active.embedding == 0


def test_gpt_oss_model_card_counts():
    """gpt-oss model card (arXiv 2508.10925, Table 1): 120b 116.83B total / 5.13B active, 20b 20.91B / 3.61B
    (active counts the unembedding, not the embedding — the convention of params_active)."""
    big, small = load_model("gpt-oss-120b"), load_model("gpt-oss-20b")
    assert big.params_total().total == pytest.approx(116.83e9, rel=1e-3)
    assert big.params_active().total == pytest.approx(5.13e9, rel=2e-3)
    assert small.params_total().total == pytest.approx(20.91e9, rel=1e-3)
    assert small.params_active().total == pytest.approx(3.61e9, rel=2e-3)


def test_mixtral_46_7b_total_12_9b_active():
    """Mistral AI, "Mixtral of experts" (2023-12-11): 46.7B total, 12.9B used per token (counting the embedding)."""
    m = load_model("mixtral-8x7b")
    assert m.params_total().total == pytest.approx(46.7e9, rel=2e-3)
    assert m.params_active().total + m.params_total().embedding == pytest.approx(12.9e9, rel=0.01)


def test_qwen3_model_card_counts():
    """Qwen3 model cards (Qwen/Qwen3-30B-A3B, Qwen/Qwen3-235B-A22B): 30.5B total, 3.3B activated, 29.9B non-embedding;
    235B total, 22B activated, 234B non-embedding. Qwen counts the embedding among activated parameters;
    non-embedding = total − embedding − lm_head."""
    small, big = load_model("qwen3-30b-a3b"), load_model("qwen3-235b-a22b")
    for m, total, active, non_emb in ((small, 30.5e9, 3.3e9, 29.9e9), (big, 235e9, 22e9, 234e9)):
        t = m.params_total()
        assert t.total == pytest.approx(total, rel=0.005)
        assert m.params_active().total + t.embedding == pytest.approx(active, rel=0.02)
        assert t.total - t.embedding - t.lm_head == pytest.approx(non_emb, rel=0.005)


def test_other_published_sizes():
    """Rounded headline sizes: Qwen3-Next-80B-A3B 80B (Qwen model card); Kimi-K2 1T total / 32B active
    (MoonshotAI/Kimi-K2 README); Llama-4-Maverick 400B total / 17B active (Meta model card; the text model, embedding
    counted); GLM-4.5 355B / 32B and GLM-4.5-Air 106B / 12B (zai-org model cards; MTP layer excluded here, active
    counted without embedding and lm_head)."""
    assert load_model("qwen3-next-80b-a3b").params_total().total == pytest.approx(80e9, rel=0.01)
    kimi = load_model("kimi-k2")
    assert kimi.params_total().total == pytest.approx(1.0e12, rel=0.03)
    assert kimi.params_active().total == pytest.approx(32e9, rel=0.02)
    mav = load_model("llama-4-maverick")
    assert mav.params_total().total == pytest.approx(400e9, rel=0.005)
    assert mav.params_active().total + mav.params_total().embedding == pytest.approx(17e9, rel=0.02)
    for name, total, active in (("glm-4.5", 355e9, 32e9), ("glm-4.5-air", 106e9, 12e9)):
        m = load_model(name)
        assert m.params_total().total == pytest.approx(total, rel=0.01)
        assert m.params_active().total - m.params_active().lm_head == pytest.approx(active, rel=0.02)


def test_param_parts_add_up_and_active_is_a_subset():
    for name in preset_names():
        m = load_model(name)
        t, a = m.params_total(), m.params_active()
        assert sum(v for key, v in t.as_dict().items() if key != "total") == t.total
        assert a.total < t.total and a.attention == t.attention and a.shared_experts == t.shared_experts
        e = m.experts
        assert a.routed_experts * e.num_experts == t.routed_experts * e.top_k


def test_llama4_dense_and_shared_widths():
    """Llama-4-Maverick: 24 dense layers of 3·5120·16384, 24 shared experts of 3·5120·8192 (intermediate_size)."""
    t = load_model("llama-4-maverick").params_total()
    assert t.dense_mlp == 24 * 3 * 5120 * 16384
    assert t.shared_experts == 24 * 3 * 5120 * 8192


def test_kv_cache_elements():
    """MLA caches kv_lora + rope = 576 per token per layer (DeepSeek-V3); GQA 2·kv·d; gpt-oss sliding layers stop at
    the 128-token window; Qwen3-Next linear layers keep a fixed state 32·128·128 + (2·2048 + 4096)·3."""
    assert load_model("deepseek-v3").kv_cache_elements(1000) == 61 * 576 * 1000
    assert load_model("gpt-oss-120b").kv_cache_elements(1000) == 18 * 1024 * 1000 + 18 * 1024 * 128
    q = load_model("qwen3-next-80b-a3b")
    state = 32 * 128 * 128 + (2 * 2048 + 4096) * 3
    assert q.kv_cache_elements(1000) == 12 * 2 * 2 * 256 * 1000 + 36 * state
    with pytest.raises(TruepeakError, match="context length"):
        q.kv_cache_elements(-1)
