"""Config parsing (truepeak.moe.config): every preset against the table of ../shared/data/moe_models.md §2 and the
JSON files of ../shared/data/hf_configs (values read off those files by hand), parameter counts against published
sizes (source named at each number), and bad input."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from truepeak.errors import TruepeakError, UnknownNameError, UnsupportedError
from truepeak.moe.config import (
    SUPPORTED_FAMILIES,
    load_model,
    parse_config,
    preset_names,
)

SHARED_CONFIGS = Path("/work/shared/data/hf_configs")

# name: (family, layers, dense, moe, hidden, I_e, dense FFN (None: no dense layers), E, top_k, shared, shared width,
#        attention kind, heads, kv heads, Q/K head dim, V head dim, q_lora, kv_lora, vocab, MTP layers)
# From ../shared/data/moe_models.md §2 and the hf_configs JSON files (Qwen3 and Llama-4 dense widths from the files).
TABLE = {
    "deepseek-v3": ("deepseek_v3", 61, 3, 58, 7168, 2048, 18432, 256, 8, 1, 2048, "mla", 128, 128, 192, 128, 1536,
                    512, 129280, 1),
    "kimi-k2": ("kimi_k2", 61, 1, 60, 7168, 2048, 18432, 384, 8, 1, 2048, "mla", 64, 64, 192, 128, 1536, 512, 163840,
                0),
    "glm-4.5": ("glm4_moe", 92, 3, 89, 5120, 1536, 12288, 160, 8, 1, 1536, "gqa", 96, 8, 128, 128, None, None, 151552,
                1),
    "glm-4.5-air": ("glm4_moe", 46, 1, 45, 4096, 1408, 10944, 128, 8, 1, 1408, "gqa", 96, 8, 128, 128, None, None,
                    151552, 1),
    "glm-5": ("glm_moe_dsa", 78, 3, 75, 6144, 2048, 12288, 256, 8, 1, 2048, "mla", 64, 64, 256, 256, 2048, 512, 154880,
              1),
    "qwen3-235b-a22b": ("qwen3_moe", 94, 0, 94, 4096, 1536, None, 128, 8, 0, None, "gqa", 64, 4, 128, 128, None, None,
                        151936, 0),
    "qwen3-30b-a3b": ("qwen3_moe", 48, 0, 48, 2048, 768, None, 128, 8, 0, None, "gqa", 32, 4, 128, 128, None, None,
                      151936, 0),
    "qwen3-next-80b-a3b": ("qwen3_next", 48, 0, 48, 2048, 512, None, 512, 10, 1, 512, "gqa", 16, 2, 256, 256, None,
                           None, 151936, 0),
    "mixtral-8x7b": ("mixtral", 32, 0, 32, 4096, 14336, None, 8, 2, 0, None, "gqa", 32, 8, 128, 128, None, None, 32000,
                     0),
    "gpt-oss-120b": ("gpt_oss", 36, 0, 36, 2880, 2880, None, 128, 4, 0, None, "gqa", 64, 8, 64, 64, None, None, 201088,
                     0),
    "gpt-oss-20b": ("gpt_oss", 24, 0, 24, 2880, 2880, None, 32, 4, 0, None, "gqa", 64, 8, 64, 64, None, None, 201088,
                    0),
    "llama-4-maverick": ("llama4", 48, 24, 24, 5120, 8192, 16384, 128, 1, 1, 8192, "gqa", 40, 8, 128, 128, None, None,
                         202048, 0),
}


def test_presets_are_the_table():
    assert preset_names() == sorted(TABLE)


@pytest.mark.parametrize("name", sorted(TABLE))
def test_preset_geometry(name):
    (family, layers, dense, moe, hidden, i_e, i_dense, e, k, shared, i_shared, kind, heads, kv, d_qk, d_v, q_lora,
     kv_lora, vocab, mtp) = TABLE[name]
    m = load_model(name)
    assert (m.name, m.family, m.num_layers, m.num_dense_layers, m.num_moe_layers) == (name, family, layers, dense, moe)
    assert len(m.layers) == layers and [l.index for l in m.layers] == list(range(layers))
    assert (m.hidden_size, m.experts.intermediate_size, m.dense_intermediate_size if dense else None) == \
        (hidden, i_e, i_dense)
    assert (m.experts.num_experts, m.experts.top_k, m.experts.num_shared, m.experts.shared_intermediate_size) == \
        (e, k, shared, i_shared)
    a = m.attention
    assert (a.kind, a.num_heads, a.num_kv_heads, a.head_dim, a.v_head_dim, a.q_lora_rank, a.kv_lora_rank) == \
        (kind, heads, kv, d_qk, d_v, q_lora, kv_lora)
    assert (m.vocab_size, m.num_mtp_layers, m.tie_word_embeddings) == (vocab, mtp, False)
    assert m.experts.gated


@pytest.mark.skipif(not SHARED_CONFIGS.is_dir(), reason="../shared/data/hf_configs is not on this machine")
@pytest.mark.parametrize("name", sorted(TABLE))
def test_shared_hf_configs_parse_to_the_same_model(name):
    """Every file in ../shared/data/hf_configs parses, by path, to the same architecture as its bundled preset. The
    presets add their released checkpoint's quantization_config and max_position_embeddings, which those files
    leave out (checked in test_presets_carry_the_released_checkpoint)."""
    import dataclasses

    by_path = load_model(str(SHARED_CONFIGS / f"{name}.json"))
    preset = load_model(name)
    checkpoint = ("max_position_embeddings", "quant_method", "weight_block_size", "checkpoint_format",
                  "modules_not_converted")
    assert dataclasses.replace(by_path, **{k: getattr(preset, k) for k in checkpoint}) == preset
    assert by_path.source.endswith(f"{name}.json")


def test_every_shared_file_is_a_preset():
    if SHARED_CONFIGS.is_dir():
        assert sorted(p.stem for p in SHARED_CONFIGS.glob("*.json")) == preset_names()


def test_dense_layer_placement():
    """first_k_dense_replace: layers 0..k-1 dense; Llama-4 interleave step 2: MoE at 1, 3, ..., 47
    (transformers Llama4TextConfig: range(step - 1, L, step))."""
    assert load_model("deepseek-v3").dense_layer_ids == (0, 1, 2)
    assert load_model("kimi-k2").dense_layer_ids == (0,)
    assert load_model("glm-5").moe_layer_ids == tuple(range(3, 78))
    assert load_model("llama-4-maverick").moe_layer_ids == tuple(range(1, 48, 2))
    assert load_model("mixtral-8x7b").moe_layer_ids == tuple(range(32))


def test_attention_kinds_per_layer():
    """gpt-oss alternates sliding (even) / full (odd) with window 128; Qwen3-Next: full attention every 4th layer
    (full_attention_interval 4: layers 3, 7, ..., 47), Gated DeltaNet elsewhere: 12 + 36 (moe_models.md §2)."""
    g = load_model("gpt-oss-120b")
    assert [l.attention for l in g.layers[:4]] == ["sliding", "full", "sliding", "full"]
    assert g.attention_counts == {"sliding": 18, "full": 18} and g.attention.sliding_window == 128
    q = load_model("qwen3-next-80b-a3b")
    assert q.attention_counts == {"linear": 36, "full": 12}
    assert [l.index for l in q.layers if l.attention == "full"] == list(range(3, 48, 4))
    lin = q.attention.linear
    assert (lin.num_key_heads, lin.num_value_heads, lin.key_head_dim, lin.value_head_dim, lin.conv_kernel) == \
        (16, 32, 128, 128, 4)
    assert q.attention.output_gate and q.attention.qk_norm
    assert load_model("deepseek-v3").attention_counts == {"mla": 61}
    assert load_model("mixtral-8x7b").attention_counts == {"full": 32}


def test_router_and_extras():
    d = load_model("deepseek-v3")
    assert (d.experts.scoring_func, d.experts.routed_scaling_factor, d.experts.n_group, d.experts.topk_group) == \
        ("sigmoid", 2.5, 8, 4)
    assert (d.quant_method, d.weight_block_size, d.dtype) == ("fp8", (128, 128), "bfloat16")
    g5 = load_model("glm-5")
    assert (g5.attention.indexer.num_heads, g5.attention.indexer.head_dim, g5.attention.indexer.topk) == (32, 128, 2048)
    assert load_model("qwen3-30b-a3b").experts.scoring_func == "softmax"
    assert load_model("gpt-oss-20b").experts.bias
    assert load_model("llama-4-maverick").experts.scoring_func == "sigmoid"


# -- parameter counts --------------------------------------------------------------------------------------------------

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


# -- loading ----------------------------------------------------------------------------------------------------------

def test_preset_names_case_insensitive_and_alias():
    assert load_model("DeepSeek-V3") == load_model("deepseek-v3") == load_model("deepseek-r1")
    assert load_model(" GLM-5 ").name == "glm-5"


def test_unknown_name_suggests_closest():
    with pytest.raises(UnknownNameError) as err:
        load_model("glm5")
    msg = str(err.value)
    assert "glm-5" in msg.split("presets:")[0] and "config.json" in msg


def test_load_from_folder_and_file(tmp_path):
    cfg = json.loads((Path(__file__).parents[2] / "src/truepeak/moe/presets/mixtral-8x7b.json").read_text())
    folder = tmp_path / "Mixtral-8x7B-v0.1"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps(cfg))
    by_folder, by_file = load_model(str(folder)), load_model(folder / "config.json")
    assert by_folder == by_file and by_folder.name == "Mixtral-8x7B-v0.1"
    assert by_folder.num_moe_layers == 32
    with pytest.raises(TruepeakError, match="no config.json"):
        load_model(str(tmp_path))
    with pytest.raises(TruepeakError, match="no such file"):
        load_model(str(tmp_path / "missing.json"))
    (tmp_path / "bad.json").write_text("{not json")
    with pytest.raises(TruepeakError, match="not valid JSON"):
        load_model(str(tmp_path / "bad.json"))


def test_hub_id_without_huggingface_hub(monkeypatch):
    monkeypatch.setitem(sys.modules, "huggingface_hub", None)  # import fails
    with pytest.raises(TruepeakError, match="pass a local path to its config.json"):
        load_model("zai-org/GLM-5")


def test_hub_id_fetch_failure(monkeypatch):
    import socket
    import types

    def offline(repo_id, filename, **kw):      # not in the cache (local_files_only), then the download fails
        raise OSError("We couldn't connect to 'https://huggingface.co'")

    monkeypatch.setitem(sys.modules, "huggingface_hub", types.SimpleNamespace(hf_hub_download=offline))
    monkeypatch.setattr(socket, "create_connection", lambda *a, **k: types.SimpleNamespace(close=lambda: None))
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    with pytest.raises(TruepeakError, match="could not fetch config.json of 'org/model'.*local path"):
        load_model("org/model")


def test_hub_id_fetched(monkeypatch, tmp_path):
    import types

    src = Path(__file__).parents[2] / "src/truepeak/moe/presets/qwen3-30b-a3b.json"
    calls = []

    def download(repo_id, filename, **kw):     # found in the local cache (local_files_only=True) on the first call
        calls.append((repo_id, filename))
        return str(src)

    monkeypatch.setitem(sys.modules, "huggingface_hub", types.SimpleNamespace(hf_hub_download=download))
    m = load_model("Qwen/Qwen3-30B-A3B")
    assert calls == [("Qwen/Qwen3-30B-A3B", "config.json")]
    assert (m.name, m.source, m.num_moe_layers) == ("Qwen/Qwen3-30B-A3B", "hf:Qwen/Qwen3-30B-A3B", 48)


# -- parse rules and bad input ----------------------------------------------------------------------------------------

def _preset(name: str) -> dict:
    return json.loads((Path(__file__).parents[2] / f"src/truepeak/moe/presets/{name}.json").read_text())


def test_unsupported_model_type_names_families():
    cfg = _preset("mixtral-8x7b") | {"model_type": "llama"}
    with pytest.raises(UnsupportedError) as err:
        parse_config(cfg, "x")
    assert "'llama'" in str(err.value) and all(f in str(err.value) for f in SUPPORTED_FAMILIES)


def test_missing_keys_all_named():
    cfg = _preset("deepseek-v3")
    for key in ("n_routed_experts", "kv_lora_rank", "hidden_size"):
        del cfg[key]
    with pytest.raises(TruepeakError) as err:
        parse_config(cfg, "dsv3")
    msg = str(err.value)
    assert all(key in msg for key in ("n_routed_experts", "kv_lora_rank", "hidden_size")) and "deepseek_v3" in msg


def test_bad_values():
    with pytest.raises(TruepeakError, match="exceeds the 8 routed experts"):
        parse_config(_preset("mixtral-8x7b") | {"num_experts_per_tok": 9}, "x")
    with pytest.raises(TruepeakError, match="hidden_size"):
        parse_config(_preset("mixtral-8x7b") | {"hidden_size": "4096"}, "x")
    with pytest.raises(TruepeakError, match="not a JSON object"):
        parse_config([1, 2], "x")
    with pytest.raises(TruepeakError, match="layer_types"):
        parse_config(_preset("gpt-oss-20b") | {"layer_types": ["full_attention"]}, "x")


def test_qwen3_sparse_step_and_mlp_only_layers():
    """Qwen3MoeDecoderLayer: MoE iff i not in mlp_only_layers and (i + 1) % decoder_sparse_step == 0."""
    m = parse_config(_preset("qwen3-30b-a3b") | {"decoder_sparse_step": 2, "mlp_only_layers": [1, 5]}, "q")
    assert m.moe_layer_ids == tuple(i for i in range(48) if (i + 1) % 2 == 0 and i not in (1, 5))
    assert m.num_dense_layers == 48 - 22 and m.dense_intermediate_size == 6144


def test_mla_without_q_lora():
    """q_lora_rank null (DeepSeek-V2-Lite style): the query is one H × heads·(nope + rope) projection."""
    base = load_model("deepseek-v3")
    m = parse_config(_preset("deepseek-v3") | {"q_lora_rank": None}, "x")
    assert m.attention.q_lora_rank is None
    per_layer = m.attention.params(7168) - base.attention.params(7168)
    assert per_layer == 7168 * 128 * 192 - (7168 * 1536 + 1536 + 1536 * 128 * 192)


def test_glm5_mlp_layer_types_and_aliases():
    cfg = _preset("glm-5")
    cfg["mlp_layer_types"] = ["dense"] * 5 + ["sparse"] * 73
    cfg["num_local_experts"] = cfg.pop("n_routed_experts")
    m = parse_config(cfg, "glm-5x")
    assert (m.num_dense_layers, m.num_moe_layers, m.experts.num_experts) == (5, 73, 256)


def test_llama4_explicit_moe_layers_and_top_level_text_config():
    cfg = _preset("llama-4-maverick")
    cfg["text_config"]["moe_layers"] = [0, 47]
    assert parse_config(cfg, "x").moe_layer_ids == (0, 47)
    flat = dict(_preset("llama-4-maverick")["text_config"])  # a bare llama4_text config
    assert parse_config(flat, "x").num_moe_layers == 24


def test_gpt_oss_alias_keys():
    cfg = _preset("gpt-oss-20b")
    cfg["num_experts"] = cfg.pop("num_local_experts")
    del cfg["num_experts_per_tok"]
    del cfg["layer_types"]
    m = parse_config(cfg, "x")
    assert (m.experts.num_experts, m.experts.top_k, m.attention_counts) == (32, 4, {"sliding": 12, "full": 12})


def test_import_pulls_no_numpy_or_torch():
    code = ("import sys, truepeak.moe.config, truepeak.moe.routing; "
            "print(sorted(m for m in ('numpy', 'torch', 'huggingface_hub') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
