"""The architecture of an MoE model: layers, attention, experts, and the parameter and KV-cache counts.

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
"""

from __future__ import annotations

from dataclasses import dataclass, field

from truepeak.errors import TruepeakError


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
