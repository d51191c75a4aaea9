"""Config parsing (truepeak.moe.config.families): every preset against the table of
../shared/data/moe_models.md §2 and the JSON files of ../shared/data/hf_configs (values read off those files by hand),
the parse rules of each family, and bad input."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from truepeak.errors import TruepeakError, UnsupportedError
from truepeak.moe.config import SUPPORTED_FAMILIES, load_model, parse_config, preset_names


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


def test_every_shared_file_is_a_preset():
    if SHARED_CONFIGS.is_dir():
        assert sorted(p.stem for p in SHARED_CONFIGS.glob("*.json")) == preset_names()


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


# -- parse rules and bad input ----------------------------------------------------------------------------------------


def _preset(name: str) -> dict:
    return json.loads((Path(__file__).parents[3] / f"src/truepeak/moe/presets/{name}.json").read_text())


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


def test_qwen3_moe_expert_count_as_transformers_5_writes_it():
    """transformers 5's Qwen3MoeConfig.save_pretrained writes the expert count as num_local_experts (seen in the
    config.json it writes); Qwen3-30B-A3B's 128 experts read the same under either key."""
    cfg = _preset("qwen3-30b-a3b")
    cfg["num_local_experts"] = cfg.pop("num_experts")
    m = parse_config(cfg, "q")
    assert (m.experts.num_experts, m.experts.top_k) == (128, 8)


def test_import_pulls_no_numpy_or_torch():
    code = ("import sys, truepeak.moe.config, truepeak.moe.routing; "
            "print(sorted(m for m in ('numpy', 'torch', 'huggingface_hub') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
