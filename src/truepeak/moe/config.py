"""MoE model architecture from a Hugging Face ``config.json``: :class:`MoEModel` and its parameter counts.

Pure Python (``json`` only; ``huggingface_hub`` is imported lazily, only to fetch a hub id). Every number here is a
count of elements (parameters, hidden widths); bytes come from a :class:`truepeak.formats.Format` at the caller.

Public API (stable):

- :func:`load_model` ``(spec) -> MoEModel``: ``spec`` is a path to a ``config.json`` (or to a folder holding one), a
  preset name (case-insensitive, :func:`preset_names`), or a Hugging Face hub id ``org/name``.
- :func:`parse_config` ``(cfg, name, source="") -> MoEModel``: from an already-loaded ``config.json`` dict.
- :func:`checkpoint_format` ``(quantization_config) -> str | None``: the truepeak weight format of a quantized
  checkpoint (fp8, mxfp4, nvfp4), the planner's default ``--weights``.
- :func:`preset_names` ``() -> list[str]``; :data:`SUPPORTED_FAMILIES` (the ``model_type`` values understood).
- :class:`MoEModel` (frozen): ``name, family, hidden_size, num_layers, vocab_size, tie_word_embeddings, layers,
  experts, dense_intermediate_size, attention, activation, num_mtp_layers, dtype, quant_method, weight_block_size,
  checkpoint_format, source, max_position_embeddings, modules_not_converted``; properties ``num_moe_layers, num_dense_layers, moe_layer_ids, dense_layer_ids``, ``attention_counts``;
  methods ``params_total() -> ParamCount``, ``params_active() -> ParamCount`` (per token), ``attention_params(kind)``,
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

Conventions:

- A *decoder layer* is one of ``num_hidden_layers``. Multi-token-prediction (MTP / "nextn") layers
  (``num_nextn_predict_layers``) are recorded in ``num_mtp_layers`` but are not layers and are not counted in the
  parameters (DeepSeek-V3's published 671B excludes its 14B MTP module: DeepSeek-V3 technical report, arXiv 2412.19437,
  §4.2 / model card).
- MLP weights are gated (SwiGLU): gate and up projections of ``hidden x I`` plus a down projection ``I x hidden``,
  3·hidden·I parameters per MLP (every supported family; ``transformers`` ``*MLP`` classes).
- ``params_total`` counts every weight of the decoder the ``transformers`` model class builds: projections, biases,
  RMSNorm/LayerNorm weights, router weights and bias, embedding and lm_head (once if tied); rotary tables and MTP
  layers are excluded.
- ``params_active`` is the weights one decode token touches: everything except the routed experts it did not pick
  (top_k of num_experts per MoE layer) and except the input embedding table (a row lookup, not a matmul). This is the
  convention of the gpt-oss model card (arXiv 2508.10925, Table 1: 116.83B total / 5.13B active for gpt-oss-120b,
  where 5.13B includes the unembedding but not the embedding).

Family rules (key names are the real Hugging Face ones; sources: ``huggingface/transformers``
``src/transformers/models/<family>/configuration_*.py`` and ``modeling_*.py``):

- ``deepseek_v3`` / ``kimi_k2`` / ``glm_moe_dsa``: MLA attention; layer i is MoE iff
  ``i >= first_k_dense_replace and i % moe_layer_freq == 0`` (GLM-5 may carry an explicit ``mlp_layer_types`` list of
  ``"dense"``/``"sparse"``); ``n_shared_experts`` shared experts of width ``moe_intermediate_size``.
  ``glm_moe_dsa`` adds the DSA lightning indexer (``index_n_heads``, ``index_head_dim``, ``index_topk``).
- ``glm4_moe``: GQA with ``head_dim``; dense rule ``first_k_dense_replace``; ``n_shared_experts``.
- ``qwen3_moe`` / ``qwen3_next``: layer i is MoE iff ``i not in mlp_only_layers and (i + 1) % decoder_sparse_step ==
  0``. ``qwen3_next``: layer i uses full (gated-output) attention iff ``(i + 1) % full_attention_interval == 0``, else
  Gated DeltaNet linear attention (``linear_*`` keys, ``linear_conv_kernel_dim`` default 4); one gated shared expert of
  ``shared_expert_intermediate_size``.
- ``mixtral`` / ``gpt_oss``: every layer MoE, per-expert width ``intermediate_size``. ``gpt_oss``: attention per
  ``layer_types`` (``sliding_attention`` / ``full_attention``; default: even layers sliding) with ``sliding_window``,
  attention and expert biases, attention sinks.
- ``llama4``: fields under ``text_config``; MoE layers ``moe_layers`` or ``range(step - 1, L, step)`` with
  ``step = interleave_moe_layer_step``; dense layers use ``intermediate_size_mlp``; experts and the one implicit
  shared expert use ``intermediate_size``.
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

from truepeak.errors import TruepeakError, UnknownNameError, UnsupportedError, closest

#: ``model_type`` values this parser understands.
SUPPORTED_FAMILIES = ("deepseek_v3", "kimi_k2", "glm4_moe", "glm_moe_dsa", "qwen3_moe", "qwen3_next", "mixtral",
                      "gpt_oss", "llama4")

#: Other names accepted for a preset (lower case) -> preset name. DeepSeek-R1 shares DeepSeek-V3's architecture.
PRESET_ALIASES = {"deepseek-r1": "deepseek-v3", "deepseek-v3.1": "deepseek-v3", "kimi-k2-instruct": "kimi-k2"}

_MLA_FAMILIES = ("deepseek_v3", "kimi_k2", "glm_moe_dsa")
_HUB_ID = re.compile(r"^[A-Za-z0-9][\w.-]*/[\w.-]+$")


# ----------------------------------------------------------------------------------------------------------------------
# Data
# ----------------------------------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class LayerSpec:
    """One decoder layer: its index (0-based), MLP kind ``'moe'`` or ``'dense'``, and attention kind:
    ``'mla'`` (multi-head latent attention), ``'full'`` (GQA/MHA over the whole context), ``'sliding'`` (GQA over the
    last ``sliding_window`` tokens) or ``'linear'`` (Gated DeltaNet: fixed-size state, no KV cache)."""

    index: int
    mlp: str
    attention: str


@dataclass(frozen=True)
class LinearAttentionSpec:
    """Gated DeltaNet linear attention (Qwen3-Next ``linear_*`` keys). Key dim = ``num_key_heads * key_head_dim``,
    value dim = ``num_value_heads * value_head_dim``; causal depthwise conv of ``conv_kernel`` taps over q, k, v."""

    num_key_heads: int
    num_value_heads: int
    key_head_dim: int
    value_head_dim: int
    conv_kernel: int = 4

    @property
    def key_dim(self) -> int:
        return self.num_key_heads * self.key_head_dim

    @property
    def value_dim(self) -> int:
        return self.num_value_heads * self.value_head_dim

    def params(self, hidden: int) -> int:
        """Weights of one layer (``Qwen3NextGatedDeltaNet``): in_proj_qkvz H·(2·key_dim + 2·value_dim), in_proj_ba
        H·2·n_v, depthwise conv (2·key_dim + value_dim)·conv_kernel, dt_bias and A_log 2·n_v, gated RMSNorm v_head_dim,
        out_proj value_dim·H."""
        conv_dim = 2 * self.key_dim + self.value_dim
        return (hidden * (2 * self.key_dim + 2 * self.value_dim) + hidden * 2 * self.num_value_heads
                + conv_dim * self.conv_kernel + 2 * self.num_value_heads + self.value_head_dim
                + self.value_dim * hidden)

    def state_elements(self) -> int:
        """Recurrent state per sequence per layer: n_v · d_k · d_v (delta-rule state) + conv state
        (2·key_dim + value_dim)·(conv_kernel − 1). Independent of context length."""
        return (self.num_value_heads * self.key_head_dim * self.value_head_dim
                + (2 * self.key_dim + self.value_dim) * (self.conv_kernel - 1))


@dataclass(frozen=True)
class IndexerSpec:
    """DeepSeek Sparse Attention lightning indexer (GLM-5 ``index_*`` keys; DeepSeek-V3.2 design): each query attends
    to its ``topk`` highest-scoring past tokens, scored by ``num_heads`` heads of ``head_dim``."""

    num_heads: int
    head_dim: int
    topk: int

    def params(self, hidden: int, q_lora_rank: int | None) -> int:
        """wq_b (q_lora or H)·heads·head_dim + wk H·head_dim + k_norm LayerNorm 2·head_dim + weights_proj H·heads."""
        q_in = q_lora_rank if q_lora_rank else hidden
        return q_in * self.num_heads * self.head_dim + hidden * self.head_dim + 2 * self.head_dim \
            + hidden * self.num_heads


@dataclass(frozen=True)
class AttentionSpec:
    """Attention geometry.

    ``kind`` is ``'mla'`` (low-rank latent KV: DeepSeek-V3, Kimi-K2, GLM-5) or ``'gqa'`` (grouped-query; MHA when
    ``num_kv_heads == num_heads``). ``head_dim`` is the Q/K head dim (MLA: ``qk_nope_head_dim + qk_rope_head_dim``),
    ``v_head_dim`` the V head dim (GQA: = ``head_dim``). ``q_lora_rank`` is None when the query is not low-rank.
    ``linear`` describes the linear-attention layers of a hybrid model (Qwen3-Next), ``indexer`` the DSA indexer
    (GLM-5); both None otherwise.
    """

    kind: str
    num_heads: int
    num_kv_heads: int
    head_dim: int
    v_head_dim: int
    q_lora_rank: int | None = None
    kv_lora_rank: int | None = None
    qk_nope_head_dim: int | None = None
    qk_rope_head_dim: int | None = None
    sliding_window: int | None = None
    bias: bool = False
    qk_norm: bool = False
    output_gate: bool = False
    sinks: bool = False
    linear: LinearAttentionSpec | None = None
    indexer: IndexerSpec | None = None

    def params(self, hidden: int) -> int:
        """Weights of one softmax-attention (MLA or GQA) layer, norms inside attention included.

        MLA (``DeepseekV3Attention``): q_a H·q_lora + q_a_norm q_lora + q_b q_lora·h·d_qk (or q H·h·d_qk without
        q_lora), kv_a H·(kv_lora + rope) + kv_a_norm kv_lora, kv_b kv_lora·h·(nope + v), o h·v·H, + the DSA indexer.
        GQA: q H·h·d (×2 with an output gate, Qwen3-Next), k and v H·kv·d each, o h·d·H; biases on q/k/v/o when
        ``bias``; q/k RMSNorm of d each when ``qk_norm``; one sink logit per head when ``sinks`` (gpt-oss).
        """
        h, d = self.num_heads, self.head_dim
        if self.kind == "mla":
            q = (hidden * self.q_lora_rank + self.q_lora_rank + self.q_lora_rank * h * d) if self.q_lora_rank \
                else hidden * h * d
            kv = hidden * (self.kv_lora_rank + self.qk_rope_head_dim) + self.kv_lora_rank \
                + self.kv_lora_rank * h * (self.qk_nope_head_dim + self.v_head_dim)
            n = q + kv + h * self.v_head_dim * hidden
            if self.indexer is not None:
                n += self.indexer.params(hidden, self.q_lora_rank)
            return n
        q_out = h * d * (2 if self.output_gate else 1)
        kv_out = 2 * self.num_kv_heads * d
        n = hidden * q_out + hidden * kv_out + h * d * hidden
        if self.bias:
            n += q_out + kv_out + hidden
        if self.qk_norm:
            n += 2 * d
        if self.sinks:
            n += h
        return n

    def kv_elements_per_token(self) -> int:
        """KV-cache elements one token adds to one softmax-attention layer: MLA caches the latent plus the shared
        rope key, ``kv_lora_rank + qk_rope_head_dim`` (+ the indexer key ``head_dim`` with DSA); GQA caches K and V,
        ``2 · num_kv_heads · head_dim``."""
        if self.kind == "mla":
            n = self.kv_lora_rank + self.qk_rope_head_dim
            if self.indexer is not None:
                n += self.indexer.head_dim
            return n
        return 2 * self.num_kv_heads * self.head_dim


@dataclass(frozen=True)
class ExpertSpec:
    """Routed and shared experts of one MoE layer.

    ``num_experts`` routed experts (E), each token picks ``top_k`` distinct ones; each expert is a gated MLP of width
    ``intermediate_size`` (I_e): gate+up GEMM [M × H]·[H × 2·I_e], down GEMM [M × I_e]·[I_e × H]. ``num_shared``
    shared experts of width ``shared_intermediate_size`` see every token (0 and None when there are none).
    ``bias``: experts carry biases (gpt-oss). Router: ``scoring_func`` ('softmax'|'sigmoid'), ``norm_topk_prob``
    (top-k weights renormalised), ``routed_scaling_factor``, group-limited routing ``n_group``/``topk_group``
    (DeepSeek; None when absent).
    """

    num_experts: int
    top_k: int
    intermediate_size: int
    num_shared: int = 0
    shared_intermediate_size: int | None = None
    gated: bool = True
    bias: bool = False
    norm_topk_prob: bool = True
    scoring_func: str = "softmax"
    routed_scaling_factor: float = 1.0
    n_group: int | None = None
    topk_group: int | None = None

    def params_per_expert(self, hidden: int) -> int:
        """One routed expert: 3·H·I_e (gated) or 2·H·I_e, + biases 2·I_e + H when ``bias``."""
        n = (3 if self.gated else 2) * hidden * self.intermediate_size
        if self.bias:
            n += (2 if self.gated else 1) * self.intermediate_size + hidden
        return n

    def params_shared(self, hidden: int) -> int:
        """All shared experts of one layer: num_shared · 3·H·I_shared."""
        if not self.num_shared:
            return 0
        return self.num_shared * (3 if self.gated else 2) * hidden * self.shared_intermediate_size


@dataclass(frozen=True)
class ParamCount:
    """Parameter counts (elements) split by part. ``router`` includes a router bias where it is a parameter (gpt-oss;
    Qwen3-Next's shared-expert gate is in ``shared_experts``); ``norms`` are the per-layer and final RMSNorm weights
    outside attention."""

    attention: int = 0
    dense_mlp: int = 0
    routed_experts: int = 0
    shared_experts: int = 0
    router: int = 0
    embedding: int = 0
    lm_head: int = 0
    norms: int = 0

    @property
    def total(self) -> int:
        return (self.attention + self.dense_mlp + self.routed_experts + self.shared_experts + self.router
                + self.embedding + self.lm_head + self.norms)

    def as_dict(self) -> dict[str, int]:
        """Parts and ``total`` as a plain dict (for JSON records)."""
        d = {k: getattr(self, k) for k in ("attention", "dense_mlp", "routed_experts", "shared_experts", "router",
                                           "embedding", "lm_head", "norms")}
        d["total"] = self.total
        return d


@dataclass(frozen=True)
class MoEModel:
    """The architecture of one MoE model (decoder only; see the module docstring for conventions).

    Fields: ``name`` (preset name, hub id or file stem), ``family`` (``model_type``), ``hidden_size`` (H),
    ``num_layers`` (decoder layers, MTP excluded), ``vocab_size``, ``tie_word_embeddings``, ``layers`` (one
    :class:`LayerSpec` per decoder layer), ``experts`` (:class:`ExpertSpec`), ``dense_intermediate_size`` (width of
    the dense-layer MLP; None when the family has none, e.g. Mixtral), ``attention`` (:class:`AttentionSpec`),
    ``activation`` (``hidden_act``), ``num_mtp_layers``, ``dtype`` (``torch_dtype``, e.g. 'bfloat16', or None),
    ``quant_method`` / ``weight_block_size`` (from ``quantization_config``; None when absent),
    ``checkpoint_format`` (the truepeak format of the checkpoint's weights read from ``quantization_config``:
    :func:`checkpoint_format`; None for an unquantised or unrecognised checkpoint), ``source`` (where the config came
    from), ``max_position_embeddings`` (the longest context the config declares; None when absent; every bundled
    preset carries its released checkpoint's value), ``modules_not_converted`` (the module name patterns the
    checkpoint's ``quantization_config`` leaves unquantised, as published: its ``modules_to_not_convert``, else
    ``ignore`` or ``exclude_modules``; gpt-oss: ``model.layers.*.self_attn``, ``model.layers.*.mlp.router``,
    ``model.embed_tokens``, ``lm_head``; empty when none are listed).
    """

    name: str
    family: str
    hidden_size: int
    num_layers: int
    vocab_size: int
    tie_word_embeddings: bool
    layers: tuple[LayerSpec, ...]
    experts: ExpertSpec
    dense_intermediate_size: int | None
    attention: AttentionSpec
    activation: str = "silu"
    num_mtp_layers: int = 0
    dtype: str | None = None
    quant_method: str | None = None
    weight_block_size: tuple[int, ...] | None = None
    checkpoint_format: str | None = None
    source: str = field(default="", compare=False)
    max_position_embeddings: int | None = None
    modules_not_converted: tuple[str, ...] = ()

    # -- layer bookkeeping ------------------------------------------------------------------------------------------
    @property
    def moe_layer_ids(self) -> tuple[int, ...]:
        return tuple(l.index for l in self.layers if l.mlp == "moe")

    @property
    def dense_layer_ids(self) -> tuple[int, ...]:
        return tuple(l.index for l in self.layers if l.mlp == "dense")

    @property
    def num_moe_layers(self) -> int:
        return len(self.moe_layer_ids)

    @property
    def num_dense_layers(self) -> int:
        return len(self.dense_layer_ids)

    @property
    def attention_counts(self) -> dict[str, int]:
        """Number of layers per attention kind, e.g. ``{'linear': 36, 'full': 12}``."""
        out: dict[str, int] = {}
        for l in self.layers:
            out[l.attention] = out.get(l.attention, 0) + 1
        return out

    # -- parameters -------------------------------------------------------------------------------------------------
    def attention_params(self, kind: str) -> int:
        """Weights of one layer's attention of ``kind`` ('linear' → :meth:`LinearAttentionSpec.params`, any other →
        :meth:`AttentionSpec.params`)."""
        return self._attention_params(kind)

    def _attention_params(self, kind: str) -> int:
        if kind == "linear":
            return self.attention.linear.params(self.hidden_size)
        return self.attention.params(self.hidden_size)

    def _router_params(self) -> int:
        # Router weight E x H; gpt-oss's router is a Linear with bias. DeepSeek/GLM's e_score_correction_bias is a
        # registered buffer in transformers, not a parameter (it reproduces GLM-5's 743,911,199,232 exactly).
        e = self.experts.num_experts
        return e * self.hidden_size + (e if self.family == "gpt_oss" else 0)

    def _shared_params(self) -> int:
        n = self.experts.params_shared(self.hidden_size)
        if self.family == "qwen3_next" and self.experts.num_shared:
            n += self.hidden_size  # shared_expert_gate: Linear(H, 1)
        return n

    def params_per_layer_dense_mlp(self) -> int:
        """Weights of one dense-layer MLP: 3·H·I_dense (0 when the model has no dense layers)."""
        if not self.num_dense_layers:
            return 0
        return 3 * self.hidden_size * self.dense_intermediate_size

    def _count(self, routed_per_layer: int, embedding: bool) -> ParamCount:
        h = self.hidden_size
        attn = sum(self._attention_params(l.attention) for l in self.layers)
        n_moe = self.num_moe_layers
        emb = self.vocab_size * h
        return ParamCount(
            attention=attn,
            dense_mlp=self.num_dense_layers * self.params_per_layer_dense_mlp(),
            routed_experts=n_moe * routed_per_layer * self.experts.params_per_expert(h),
            shared_experts=n_moe * self._shared_params(),
            router=n_moe * self._router_params(),
            embedding=emb if embedding else 0,
            lm_head=0 if (self.tie_word_embeddings and embedding) else emb,
            norms=2 * h * self.num_layers + h,
        )

    def params_total(self) -> ParamCount:
        """All decoder weights (module docstring), split by part. ``params_total().total`` is the model size."""
        return self._count(self.experts.num_experts, embedding=True)

    def params_active(self) -> ParamCount:
        """Weights one decode token touches: top_k routed experts per MoE layer, everything else but the input
        embedding table (lm_head counted; a tied lm_head counted once, as lm_head)."""
        return self._count(self.experts.top_k, embedding=False)

    # -- KV cache ---------------------------------------------------------------------------------------------------
    def kv_cache_elements(self, context_len: int) -> int:
        """KV-cache (and recurrent-state) elements of one sequence of ``context_len`` tokens, summed over layers:
        full/MLA layers ``context_len`` × :meth:`AttentionSpec.kv_elements_per_token`; sliding layers
        ``min(context_len, sliding_window)`` × the same; linear layers their fixed state
        (:meth:`LinearAttentionSpec.state_elements`). Multiply by bytes per element for bytes."""
        if isinstance(context_len, bool) or not isinstance(context_len, int) or context_len < 0:
            raise TruepeakError(f"context length {context_len!r} must be an integer >= 0")
        per_tok = self.attention.kv_elements_per_token()
        n = 0
        for l in self.layers:
            if l.attention == "linear":
                n += self.attention.linear.state_elements()
            elif l.attention == "sliding":
                n += min(context_len, self.attention.sliding_window or context_len) * per_tok
            else:
                n += context_len * per_tok
        return n

    def summary(self) -> str:
        """One line, e.g. ``deepseek-v3 (deepseek_v3): 61 layers (3 dense + 58 MoE), E=256 top-8 +1 shared, ...``."""
        e = self.experts
        shared = f" +{e.num_shared} shared" if e.num_shared else ""
        return (f"{self.name} ({self.family}): {self.num_layers} layers ({self.num_dense_layers} dense + "
                f"{self.num_moe_layers} MoE), H={self.hidden_size}, E={e.num_experts} top-{e.top_k}{shared}, "
                f"I_e={e.intermediate_size}, attention {self.attention.kind}")


# ----------------------------------------------------------------------------------------------------------------------
# Parsing
# ----------------------------------------------------------------------------------------------------------------------

class _Reader:
    """Reads keys from one config dict, remembering every missing required key so they are reported together."""

    def __init__(self, cfg: dict, name: str, family: str):
        self.cfg, self.name, self.family = cfg, name, family
        self.missing: list[str] = []

    def req(self, *keys: str) -> Any:
        """The value of the first present key (aliases), else record ``keys[0]`` as missing and return None."""
        for k in keys:
            if self.cfg.get(k) is not None:
                return self.cfg[k]
        self.missing.append(keys[0] if len(keys) == 1 else "/".join(keys))
        return None

    def opt(self, key: str, default: Any = None) -> Any:
        v = self.cfg.get(key)
        return default if v is None else v

    def check(self) -> None:
        if self.missing:
            raise TruepeakError(f"config {self.name!r} ({self.family}) lacks required keys: "
                                f"{', '.join(self.missing)}")


def _int(name: str, key: str, v: Any, minimum: int = 1) -> int:
    if isinstance(v, bool) or not isinstance(v, int) or v < minimum:
        raise TruepeakError(f"config {name!r}: {key} = {v!r} must be an integer >= {minimum}")
    return v


def parse_config(cfg: dict, name: str, source: str = "") -> MoEModel:
    """Parse a Hugging Face ``config.json`` dict into a :class:`MoEModel`.

    Args:
        cfg: the decoded JSON object. Llama-4 (``model_type`` ``llama4``) keeps the text model under ``text_config``;
            any config with a ``text_config`` whose ``model_type`` is not itself supported is read from there.
        name: the model's display name.
        source: where it came from (path, preset, hub id), kept in :attr:`MoEModel.source`.

    Raises:
        TruepeakError: not a dict; an unsupported ``model_type`` (the message names the supported families); missing
            keys (all of them named at once); a value of the wrong type or out of range (e.g. top_k > experts).
    """
    if not isinstance(cfg, dict):
        raise TruepeakError(f"config {name!r} is not a JSON object (got {type(cfg).__name__})")
    top_type = cfg.get("model_type")
    if top_type not in SUPPORTED_FAMILIES and isinstance(cfg.get("text_config"), dict):
        inner = cfg["text_config"].get("model_type")
        top_type = inner if inner in SUPPORTED_FAMILIES else top_type
    family = "llama4" if top_type in ("llama4", "llama4_text") else top_type
    if family not in SUPPORTED_FAMILIES:
        raise UnsupportedError(f"config {name!r} has model_type {top_type!r}, which truepeak cannot parse; supported "
                               f"families: {', '.join(SUPPORTED_FAMILIES)}")
    if family == "llama4" and isinstance(cfg.get("text_config"), dict):
        merged = dict(cfg)
        merged.update(cfg["text_config"])
        cfg = merged
    r = _Reader(cfg, name, family)

    hidden = r.req("hidden_size")
    n_layers = r.req("num_hidden_layers")
    vocab = r.req("vocab_size")
    heads = r.req("num_attention_heads")
    kv_heads = r.opt("num_key_value_heads", heads)
    top_k = r.req("num_experts_per_tok", "experts_per_token") if family == "gpt_oss" else r.req("num_experts_per_tok")

    if family in ("deepseek_v3", "kimi_k2", "glm4_moe", "glm_moe_dsa"):
        n_exp = r.req("n_routed_experts", "num_local_experts") if family == "glm_moe_dsa" else r.req("n_routed_experts")
        i_e = r.req("moe_intermediate_size")
        i_dense = r.req("intermediate_size")
    elif family in ("qwen3_moe", "qwen3_next"):
        n_exp = r.req("num_experts")
        i_e = r.req("moe_intermediate_size")
        i_dense = r.opt("intermediate_size")
    elif family in ("mixtral", "gpt_oss"):
        n_exp = r.req("num_local_experts", "num_experts") if family == "gpt_oss" else r.req("num_local_experts")
        i_e = r.req("moe_intermediate_size", "intermediate_size")
        i_dense = None
    else:  # llama4
        n_exp = r.req("num_local_experts")
        i_e = r.req("intermediate_size")
        i_dense = r.opt("intermediate_size_mlp")

    # attention keys
    if family in _MLA_FAMILIES:
        kv_lora = r.req("kv_lora_rank")
        nope = r.req("qk_nope_head_dim")
        rope = r.req("qk_rope_head_dim")
        v_dim = r.req("v_head_dim")
        head_dim = None
    else:
        head_dim = r.opt("head_dim")
        if head_dim is None and isinstance(hidden, int) and isinstance(heads, int) and heads > 0:
            head_dim = hidden // heads  # Mixtral's HF file has no head_dim key (transformers derives H / heads)
    linear = None
    if family == "qwen3_next":
        lin = [r.req(k) for k in ("linear_num_key_heads", "linear_num_value_heads", "linear_key_head_dim",
                                  "linear_value_head_dim")]
    r.check()

    # type/range checks (after all keys are known to be present)
    for key, v in (("hidden_size", hidden), ("num_hidden_layers", n_layers), ("vocab_size", vocab),
                   ("num_attention_heads", heads), ("num_key_value_heads", kv_heads), ("experts", n_exp),
                   ("num_experts_per_tok", top_k), ("expert intermediate_size", i_e)):
        _int(name, key, v)
    if top_k > n_exp:
        raise TruepeakError(f"config {name!r}: num_experts_per_tok = {top_k} exceeds the {n_exp} routed experts")
    if heads % kv_heads:
        raise TruepeakError(f"config {name!r}: num_attention_heads = {heads} is not a multiple of "
                            f"num_key_value_heads = {kv_heads}")

    # --- layers: MLP kind --------------------------------------------------------------------------------------------
    moe_ids = _moe_layer_ids(cfg, name, family, n_layers)
    # --- layers: attention kind --------------------------------------------------------------------------------------
    attn_kinds = _attention_kinds(cfg, name, family, n_layers)
    layers = tuple(LayerSpec(i, "moe" if i in moe_ids else "dense", attn_kinds[i]) for i in range(n_layers))
    if any(l.mlp == "dense" for l in layers):
        if i_dense is None:
            key = "intermediate_size_mlp" if family == "llama4" else "intermediate_size"
            raise TruepeakError(f"config {name!r} ({family}) has dense layers but lacks required keys: {key}")
        _int(name, "dense intermediate_size", i_dense)

    # --- attention spec ----------------------------------------------------------------------------------------------
    if family in _MLA_FAMILIES:
        q_lora = cfg.get("q_lora_rank")  # may be null (DeepSeek-V2-Lite style: full-rank query)
        for key, v in (("kv_lora_rank", kv_lora), ("qk_nope_head_dim", nope), ("qk_rope_head_dim", rope),
                       ("v_head_dim", v_dim)):
            _int(name, key, v)
        if q_lora is not None:
            _int(name, "q_lora_rank", q_lora)
        indexer = None
        if family == "glm_moe_dsa" and cfg.get("index_n_heads") and cfg.get("index_head_dim"):
            indexer = IndexerSpec(_int(name, "index_n_heads", cfg["index_n_heads"]),
                                  _int(name, "index_head_dim", cfg["index_head_dim"]),
                                  int(cfg.get("index_topk") or 2048))
        attention = AttentionSpec("mla", heads, kv_heads, nope + rope, v_dim, q_lora_rank=q_lora, kv_lora_rank=kv_lora,
                                  qk_nope_head_dim=nope, qk_rope_head_dim=rope,
                                  bias=bool(cfg.get("attention_bias", False)), indexer=indexer)
    else:
        _int(name, "head_dim", head_dim)
        if family == "qwen3_next":
            linear = LinearAttentionSpec(*(_int(name, k, v) for k, v in zip(
                ("linear_num_key_heads", "linear_num_value_heads", "linear_key_head_dim", "linear_value_head_dim"),
                lin)), conv_kernel=_int(name, "linear_conv_kernel_dim", cfg.get("linear_conv_kernel_dim", 4)))
        sliding = cfg.get("sliding_window") if "sliding" in attn_kinds else None
        if "sliding" in attn_kinds:
            _int(name, "sliding_window", sliding)
        qk_norm = family in ("qwen3_moe", "qwen3_next") or bool(cfg.get("use_qk_norm", False))
        attention = AttentionSpec("gqa", heads, kv_heads, head_dim, head_dim, sliding_window=sliding,
                                  bias=bool(cfg.get("attention_bias", family == "gpt_oss")), qk_norm=qk_norm,
                                  output_gate=family == "qwen3_next", sinks=family == "gpt_oss", linear=linear)

    # --- experts -----------------------------------------------------------------------------------------------------
    num_shared, i_shared = 0, None
    if family in ("deepseek_v3", "kimi_k2", "glm4_moe", "glm_moe_dsa"):
        num_shared = _int(name, "n_shared_experts", cfg.get("n_shared_experts") or 0, minimum=0)
        i_shared = i_e if num_shared else None
    elif family == "qwen3_next":
        w = cfg.get("shared_expert_intermediate_size") or 0
        num_shared, i_shared = (1, _int(name, "shared_expert_intermediate_size", w)) if w else (0, None)
    elif family == "llama4":
        num_shared, i_shared = 1, i_e  # one implicit shared expert of intermediate_size (Llama4TextMoe)
    scoring = cfg.get("scoring_func") or ("sigmoid" if family in ("deepseek_v3", "kimi_k2", "glm4_moe", "glm_moe_dsa",
                                                                   "llama4") else "softmax")
    norm_default = family not in ("qwen3_moe", "llama4")  # transformers defaults (Qwen3MoeConfig: False)
    experts = ExpertSpec(
        num_experts=n_exp, top_k=top_k, intermediate_size=i_e, num_shared=num_shared, shared_intermediate_size=i_shared,
        gated=True, bias=family == "gpt_oss", norm_topk_prob=bool(cfg.get("norm_topk_prob", norm_default)),
        scoring_func=str(scoring), routed_scaling_factor=float(cfg.get("routed_scaling_factor") or 1.0),
        n_group=cfg.get("n_group"), topk_group=cfg.get("topk_group"))

    q = cfg.get("quantization_config") if isinstance(cfg.get("quantization_config"), dict) else {}
    wbs = q.get("weight_block_size")
    return MoEModel(
        name=name, family=family, hidden_size=hidden, num_layers=n_layers, vocab_size=vocab,
        tie_word_embeddings=bool(cfg.get("tie_word_embeddings", False)), layers=layers, experts=experts,
        dense_intermediate_size=i_dense if any(l.mlp == "dense" for l in layers) else (
            i_dense if isinstance(i_dense, int) and i_dense > 0 else None),
        attention=attention, activation=str(cfg.get("hidden_act") or "silu"),
        num_mtp_layers=int(cfg.get("num_nextn_predict_layers") or 0),
        dtype=cfg.get("torch_dtype") or cfg.get("dtype"), quant_method=q.get("quant_method"),
        weight_block_size=tuple(wbs) if isinstance(wbs, list) else None, checkpoint_format=checkpoint_format(q),
        source=source or name, max_position_embeddings=_max_positions(cfg.get("max_position_embeddings")),
        modules_not_converted=_not_converted(q))


def _not_converted(q: dict) -> tuple[str, ...]:
    """The module patterns a ``quantization_config`` leaves unquantised: the first list among
    ``modules_to_not_convert`` (transformers' quantizers; gpt-oss's mxfp4), ``ignore`` (compressed-tensors) and
    ``exclude_modules`` (NVIDIA ModelOpt), as strings; () when none is there."""
    for key in ("modules_to_not_convert", "ignore", "exclude_modules"):
        v = q.get(key)
        if isinstance(v, list):
            return tuple(str(x) for x in v)
    return ()


def _max_positions(v: Any) -> int | None:
    """``max_position_embeddings`` as a positive int, or None (absent or not a positive whole number)."""
    return v if isinstance(v, int) and not isinstance(v, bool) and v > 0 else None


def checkpoint_format(quantization_config: dict | None) -> str | None:
    """The truepeak format name of a checkpoint's (expert) weights from its ``quantization_config``, or None.

    ``quant_method`` ``"fp8"`` (DeepSeek-V3 / Kimi-K2 block-fp8) → ``"fp8"``; ``"mxfp4"`` (gpt-oss: MoE experts in
    MXFP4) → ``"mxfp4"``; ``quant_algo`` ``"NVFP4"`` / ``"FP8"`` (NVIDIA ModelOpt exports, e.g. GLM-5 NVFP4:
    ``quant_algo: NVFP4`` in ``lukealonso/GLM-5.2-NVFP4``, local-inference-lab/rtx6kpro#25) → ``"nvfp4"`` / ``"fp8"``.
    Anything else (no config, int4 / AWQ / GPTQ schemes that truepeak has no format for) → None: the caller falls back
    to the unquantised dtype.
    """
    q = quantization_config if isinstance(quantization_config, dict) else {}
    method = str(q.get("quant_method") or "").strip().lower()
    algo = str(q.get("quant_algo") or "").strip().lower()
    if method in ("fp8", "mxfp4", "nvfp4"):
        return method
    if algo in ("nvfp4", "fp8", "mxfp4"):
        return algo
    return None


def _moe_layer_ids(cfg: dict, name: str, family: str, n_layers: int) -> frozenset[int]:
    """Indices of the MoE layers under the family's rule (module docstring)."""
    if family in ("mixtral", "gpt_oss"):
        return frozenset(range(n_layers))
    if family in ("deepseek_v3", "kimi_k2", "glm4_moe", "glm_moe_dsa"):
        types = cfg.get("mlp_layer_types")
        if types is not None:
            if not isinstance(types, list) or len(types) != n_layers \
                    or any(t not in ("dense", "sparse") for t in types):
                raise TruepeakError(f"config {name!r}: mlp_layer_types must list 'dense' or 'sparse' for each of the "
                                    f"{n_layers} layers")
            return frozenset(i for i, t in enumerate(types) if t == "sparse")
        k = _int(name, "first_k_dense_replace", cfg.get("first_k_dense_replace", 0), minimum=0)
        freq = _int(name, "moe_layer_freq", cfg.get("moe_layer_freq", 1))
        return frozenset(i for i in range(n_layers) if i >= k and i % freq == 0)
    if family in ("qwen3_moe", "qwen3_next"):
        step = _int(name, "decoder_sparse_step", cfg.get("decoder_sparse_step", 1))
        only = cfg.get("mlp_only_layers") or []
        if not isinstance(only, list) or any(isinstance(i, bool) or not isinstance(i, int) for i in only):
            raise TruepeakError(f"config {name!r}: mlp_only_layers must be a list of layer indices, got {only!r}")
        return frozenset(i for i in range(n_layers) if i not in only and (i + 1) % step == 0)
    # llama4
    explicit = cfg.get("moe_layers")
    if explicit is not None:
        if not isinstance(explicit, list) or any(not isinstance(i, int) or not 0 <= i < n_layers for i in explicit):
            raise TruepeakError(f"config {name!r}: moe_layers must list layer indices in [0, {n_layers})")
        return frozenset(explicit)
    step = _int(name, "interleave_moe_layer_step", cfg.get("interleave_moe_layer_step", 1))
    return frozenset(range(step - 1, n_layers, step))


def _attention_kinds(cfg: dict, name: str, family: str, n_layers: int) -> list[str]:
    """Attention kind of every layer: 'mla', 'full', 'sliding' or 'linear' (module docstring)."""
    if family in _MLA_FAMILIES:
        return ["mla"] * n_layers
    if family in ("gpt_oss", "qwen3_next"):
        types = cfg.get("layer_types")
        if types is None:
            if family == "gpt_oss":
                types = ["sliding_attention" if (i + 1) % 2 else "full_attention" for i in range(n_layers)]
            else:
                step = _int(name, "full_attention_interval", cfg.get("full_attention_interval", 4))
                types = ["linear_attention" if (i + 1) % step else "full_attention" for i in range(n_layers)]
        table = {"sliding_attention": "sliding", "full_attention": "full", "linear_attention": "linear"}
        if not isinstance(types, list) or len(types) != n_layers or any(t not in table for t in types):
            raise TruepeakError(f"config {name!r}: layer_types must give one of {', '.join(table)} for each of the "
                                f"{n_layers} layers")
        return [table[t] for t in types]
    return ["full"] * n_layers


# ----------------------------------------------------------------------------------------------------------------------
# Loading
# ----------------------------------------------------------------------------------------------------------------------

def _preset_dir():
    return resources.files("truepeak.moe") / "presets"


def preset_names() -> list[str]:
    """Names of the bundled presets (``config.json`` files of released checkpoints, architecture fields and
    ``quantization_config``; sources in presets/README.md), sorted."""
    return sorted(p.name[:-5] for p in _preset_dir().iterdir() if p.name.endswith(".json"))


def _read_json(text: str, where: str) -> dict:
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise TruepeakError(f"{where} is not valid JSON ({exc})") from None


def load_model(spec: str | os.PathLike) -> MoEModel:
    """Load an MoE model from a path, a preset name or a Hugging Face hub id.

    Resolution order: an existing file (a ``config.json``) or folder containing ``config.json``; a preset name
    (case-insensitive, also :data:`PRESET_ALIASES`); a hub id ``org/name``, fetched with
    ``huggingface_hub.hf_hub_download(repo_id, "config.json")`` (needs the package and network access).

    Raises:
        UnknownNameError: not a path, not a preset, not of the form ``org/name``; names the closest presets.
        TruepeakError: the file/folder is unreadable or not JSON; a hub fetch failed (not installed, offline, no such
            repo, gated) — the message says to pass a local path to config.json; anything :func:`parse_config` raises.
    """
    if isinstance(spec, os.PathLike):
        spec = os.fspath(spec)
    if not isinstance(spec, str) or not spec.strip():
        raise TruepeakError(f"model {spec!r} must be a path to config.json, a preset name or a Hugging Face id")
    spec = spec.strip()
    path = Path(spec).expanduser()
    if path.is_dir():
        path = path / "config.json"
        if not path.is_file():
            raise TruepeakError(f"folder {spec!r} has no config.json; pass the path of the model's config.json")
    if path.is_file():
        try:
            text = path.read_text()
        except OSError as exc:
            raise TruepeakError(f"cannot read {str(path)!r}: {exc.strerror or exc}") from None
        stem = path.parent.name if path.name == "config.json" and path.parent.name else path.stem
        return parse_config(_read_json(text, repr(str(path))), stem, source=str(path))

    key = PRESET_ALIASES.get(spec.lower(), spec.lower())
    names = preset_names()
    if key in names:
        text = (_preset_dir() / f"{key}.json").read_text()
        return parse_config(_read_json(text, f"preset {key!r}"), key, source=f"preset:{key}")

    looks_like_path = spec.endswith(".json") or spec.startswith((".", "/", "~")) or "\\" in spec
    if _HUB_ID.match(spec) and not looks_like_path:
        return parse_config(_fetch_hub_config(spec), spec, source=f"hf:{spec}")
    if looks_like_path:
        raise TruepeakError(f"no such file: {spec!r}; pass the path of a config.json, a folder holding one, a preset "
                            f"({', '.join(names)}) or a Hugging Face id org/name")
    near = closest(spec, list(names) + list(PRESET_ALIASES))
    hint = f"; closest: {', '.join(near)}" if near else ""
    raise UnknownNameError(f"unknown model {spec!r}{hint}; presets: {', '.join(names)}; or pass a path to config.json "
                           f"or a Hugging Face id org/name")


def _hub_download(hf_hub_download, repo_id: str) -> str:
    """``config.json`` of ``repo_id``: from the local hub cache if it is there, else downloaded, after a 3-second check
    that the hub answers at all. Without it, an offline machine spent ~24 s in huggingface_hub's retries and printed a
    warning per retry before the one-line error.

    Raises:
        TruepeakError: the hub cannot be reached (the message names the host), or HF_HUB_OFFLINE is set and the file is
            not in the cache. Other huggingface_hub errors propagate (the caller turns them into one line).
    """
    import logging
    import socket
    from urllib.parse import urlparse

    hub_log = logging.getLogger("huggingface_hub")
    level = hub_log.level
    hub_log.setLevel(logging.ERROR)
    try:
        try:
            return hf_hub_download(repo_id, "config.json", local_files_only=True)
        except Exception:  # noqa: BLE001  (not cached: fetch it)
            pass
        if os.environ.get("HF_HUB_OFFLINE", "").strip().lower() in ("1", "true", "yes", "on"):
            raise TruepeakError(f"config.json of {repo_id!r} is not in the local Hugging Face cache and HF_HUB_OFFLINE "
                                "is set; pass a local path to its config.json instead")
        url = urlparse(os.environ.get("HF_ENDPOINT") or "https://huggingface.co")
        host, port = url.hostname or "huggingface.co", url.port or (80 if url.scheme == "http" else 443)
        proxied = any(os.environ.get(v) for v in ("HTTPS_PROXY", "https_proxy", "HTTP_PROXY", "http_proxy",
                                                   "ALL_PROXY", "all_proxy"))
        try:
            if not proxied:       # behind a proxy only the proxy is reachable: let huggingface_hub go through it
                socket.create_connection((host, port), timeout=3).close()
        except OSError as exc:
            raise TruepeakError(f"cannot reach the Hugging Face hub at {host}:{port} to fetch {repo_id!r} "
                                f"({exc.strerror or type(exc).__name__}; offline?); pass a local path to its "
                                "config.json instead") from None
        return hf_hub_download(repo_id, "config.json", etag_timeout=10)
    finally:
        hub_log.setLevel(level)


def _fetch_hub_config(repo_id: str) -> dict:
    """Download ``config.json`` of ``repo_id`` with huggingface_hub (lazily imported)."""
    fix = "pass a local path to its config.json instead"
    try:
        from huggingface_hub import hf_hub_download
    except ImportError:
        raise TruepeakError(f"fetching {repo_id!r} from the Hugging Face hub needs huggingface_hub, which is not "
                            f"installed (pip install huggingface_hub); or {fix}") from None
    try:
        local = _hub_download(hf_hub_download, repo_id)
    except TruepeakError:
        raise
    except Exception as exc:  # noqa: BLE001  (offline, 404, gated repo, bad token: all end the same way)
        msg = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise TruepeakError(f"could not fetch config.json of {repo_id!r} from the Hugging Face hub "
                            f"({type(exc).__name__}: {msg[:200]}); {fix}") from None
    return _read_json(Path(local).read_text(), f"config.json of {repo_id!r}")
