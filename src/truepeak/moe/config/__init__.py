"""MoE model architecture from a Hugging Face ``config.json``: :class:`MoEModel` and its parameter counts.

Pure Python (``json`` only; ``huggingface_hub`` is imported lazily, only to fetch a hub id). Every number here is a
count of elements (parameters, hidden widths); bytes come from a :class:`truepeak.formats.Format` at the caller.

Modules: :mod:`~truepeak.moe.config.model` (the architecture types and their parameter counts),
:mod:`~truepeak.moe.config.families` (``config.json`` of each supported family → :class:`MoEModel`),
:mod:`~truepeak.moe.config.presets` (the bundled presets), :mod:`~truepeak.moe.config.hub` (fetching a hub id's
``config.json``) and :mod:`~truepeak.moe.config.loading` (:func:`load_model`: a path, a preset or a hub id).

Public API (stable):

- :func:`load_model` ``(spec) -> MoEModel``: ``spec`` is a path to a ``config.json`` (or to a folder holding one), a
  preset name (case-insensitive, :func:`preset_names`), or a Hugging Face hub id ``org/name``.
- :func:`parse_config` ``(cfg, name, source="") -> MoEModel``: from an already-loaded ``config.json`` dict.
- :func:`checkpoint_format` ``(quantization_config) -> str | None``: the truepeak weight format of a quantized
  checkpoint (fp8, mxfp4, nvfp4), the planner's default ``--weights``.
- :func:`preset_names` ``() -> list[str]``; :data:`SUPPORTED_FAMILIES` (the ``model_type`` values understood).
- :class:`MoEModel` (frozen): ``name, family, hidden_size, num_layers, vocab_size, tie_word_embeddings, layers,
  experts, dense_intermediate_size, attention, activation, num_mtp_layers, dtype, quant_method, weight_block_size,
  checkpoint_format, source, max_position_embeddings, modules_not_converted``; properties ``num_moe_layers,
  num_dense_layers, moe_layer_ids, dense_layer_ids``, ``attention_counts``; methods ``params_total() -> ParamCount``, ``params_active() -> ParamCount`` (per token), ``attention_params(kind)``,
  ``params_per_layer_dense_mlp()``, ``kv_cache_elements(context)``, ``summary()``.
- :class:`LayerSpec` ``(index, mlp: 'moe'|'dense', attention: 'mla'|'full'|'sliding'|'linear')``.
- :class:`ExpertSpec` ``(num_experts, top_k, intermediate_size, num_shared, shared_intermediate_size, gated, bias,
  norm_topk_prob, scoring_func, routed_scaling_factor, n_group, topk_group)``; properties ``params_per_expert``,
  ``params_shared``.
- :class:`AttentionSpec` ``(kind: 'mla'|'gqa', num_heads, num_kv_heads, head_dim, v_head_dim, q_lora_rank,
  kv_lora_rank, qk_nope_head_dim, qk_rope_head_dim, sliding_window, bias, qk_norm, output_gate, linear, indexer)``.
- :class:`LinearAttentionSpec` (Gated DeltaNet, Qwen3-Next), :class:`IndexerSpec` (DSA indexer, GLM-5).
- :class:`ParamCount` ``(attention, dense_mlp, routed_experts, shared_experts, router, embedding, lm_head, norms)``
  with ``.total``.
"""

from truepeak.moe.config.families import SUPPORTED_FAMILIES, checkpoint_format, parse_config
from truepeak.moe.config.loading import load_model
from truepeak.moe.config.model import (AttentionSpec, ExpertSpec, IndexerSpec, LayerSpec, LinearAttentionSpec,
                                       MoEModel, ParamCount)
from truepeak.moe.config.presets import PRESET_ALIASES, preset_names

__all__ = ["SUPPORTED_FAMILIES", "PRESET_ALIASES", "AttentionSpec", "ExpertSpec", "IndexerSpec", "LayerSpec",
           "LinearAttentionSpec", "MoEModel", "ParamCount", "checkpoint_format", "load_model", "parse_config",
           "preset_names"]
