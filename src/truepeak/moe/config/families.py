"""Parsing a Hugging Face ``config.json`` of each supported family into a :class:`MoEModel`.

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
from typing import Any

from truepeak.errors import TruepeakError, UnsupportedError
from truepeak.moe.config.model import (AttentionSpec, ExpertSpec, IndexerSpec, LayerSpec, LinearAttentionSpec,
                                       MoEModel)

#: ``model_type`` values this parser understands.
SUPPORTED_FAMILIES = ("deepseek_v3", "kimi_k2", "glm4_moe", "glm_moe_dsa", "qwen3_moe", "qwen3_next", "mixtral",
                      "gpt_oss", "llama4")

_MLA_FAMILIES = ("deepseek_v3", "kimi_k2", "glm_moe_dsa")


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
        # transformers 5 writes a Qwen3MoeConfig's expert count as num_local_experts (its save_pretrained output)
        n_exp = r.req("num_experts", "num_local_experts")
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


def _read_json(text: str, where: str) -> dict:
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise TruepeakError(f"{where} is not valid JSON ({exc})") from None
