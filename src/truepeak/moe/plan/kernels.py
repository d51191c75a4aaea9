"""The kernels of a serving engine's decode step that are not the planner's GEMMs, attention or collectives.

Pure Python. The roofline plan (:mod:`truepeak.moe.plan.step`) times GEMMs, attention over the KV cache and
collectives; a serving engine's decode graph also runs norms, RoPE, activation quantisation, the router's top-k, the
MoE alignment / permutation, residual adds, KV-cache writes and sampling, each a kernel of its own. This module lists
them per block, with the bytes each moves, as the engines run them:

- SGLang ``python/sglang/srt/models/deepseek_v2.py`` (``DeepseekV2AttentionMLA.forward_absorb_prepare`` /
  ``forward_absorb_core``: the fused q_a + kv_a GEMM, ``q_a_layernorm``, ``kv_a_layernorm``, the rotary embedding,
  the absorbed ``bmm`` with ``w_kc`` / ``w_vc`` and the copies around it, the KV-cache write, the attention backend's
  split-KV combine; ``DeepseekV2DecoderLayer``: ``fused_add_rmsnorm`` before attention and before the MLP;
  ``DeepseekV2MoE``: the gate GEMM, ``select_experts`` (one fused biased grouped top-k), the shared experts'
  ``SiluAndMul`` and the add of shared and routed outputs);
- vLLM ``vllm/model_executor/layers/fused_moe/fused_moe.py`` (``moe_align_block_size`` before the grouped GEMMs;
  ``per_token_group_quant_fp8`` before each block-fp8 GEMM of ``vllm/model_executor/layers/quantization/utils/
  fp8_utils.py``).

The routed-expert unit measured for the calibration (docs/results/h200/moe/README.md) includes its activation
quantisation, ``silu_and_mul`` and the weighted combine, so those are not listed again; the alignment is outside it
and is. Each kernel here is timed by :meth:`truepeak.moe.calibration.Calibration.elementwise_s` at its bytes (one
fused kernel each, as the engines run them), and sampling by :meth:`~truepeak.moe.calibration.Calibration.argmax_s`.
"""

from __future__ import annotations

from dataclasses import dataclass

#: Bytes per value of the bf16 hidden states these kernels read and write.
_B = 2


@dataclass(frozen=True)
class SmallKernel:
    """One kernel of the decode graph besides the plan's ops: ``name``, ``bytes`` moved per call, ``kind``
    (``"elementwise"`` or ``"argmax"``; for argmax ``rows`` × ``cols`` logits)."""

    name: str
    bytes: float
    kind: str = "elementwise"
    rows: float = 0.0
    cols: int = 0


def _quant(t: float, k: int, label: str) -> SmallKernel:
    """Activation quantisation to 8 bits before a GEMM: read t × k bf16, write t × k bytes + scales."""
    return SmallKernel(f"activation quantisation ({label})", t * k * (_B + 1) + t * (k // 128 + 1) * 4)


def attention_kernels(model, kind: str, t: float, heads: int, eight_bit: bool, kv_bytes: float) -> list[SmallKernel]:
    """The small kernels of one attention block on ``t`` tokens with ``heads`` local heads (module docstring);
    ``eight_bit``: the GEMM activations are 8-bit (a quantisation kernel before each projection GEMM);
    ``kv_bytes``: bytes per KV-cache value."""
    a, H = model.attention, model.hidden_size
    out = [SmallKernel("fused add + RMSNorm (input)", t * H * _B * 4)]
    if kind == "mla":
        lora, rope = a.kv_lora_rank, a.qk_rope_head_dim
        if a.q_lora_rank:
            out.append(SmallKernel("q_a_layernorm", t * a.q_lora_rank * _B * 2))
        out += [SmallKernel("kv_a_layernorm", t * lora * _B * 2),
                SmallKernel("rotary embedding (q_pe, k_pe)", t * (heads + 1) * rope * _B * 2),
                SmallKernel("copy / transpose into the absorbed bmm", t * heads * a.qk_nope_head_dim * _B * 2),
                SmallKernel("copy / transpose out of the absorbed bmm", t * heads * a.v_head_dim * _B * 2),
                SmallKernel("KV-cache write (latent + rope)", t * (lora + rope) * (_B + kv_bytes)),
                SmallKernel("split-KV attention combine", t * heads * lora * 4 * 2)]
        if eight_bit:
            out += [_quant(t, H, "q_a + kv_a input")]
            if a.q_lora_rank:
                out.append(_quant(t, a.q_lora_rank, "q_b input"))
            out.append(_quant(t, heads * a.v_head_dim, "o_proj input"))
        return out
    if kind == "linear":
        la = a.linear
        out += [SmallKernel("causal conv1d update", t * 2 * la.num_value_heads * la.value_head_dim * _B * 2),
                SmallKernel("gated RMSNorm", t * la.num_value_heads * la.value_head_dim * _B * 3)]
        if eight_bit:
            out += [_quant(t, H, "in_proj input"), _quant(t, la.num_value_heads * la.value_head_dim, "out_proj input")]
        return out
    d = a.head_dim
    out += [SmallKernel("rotary embedding (q, k)", t * (heads + max(1, a.num_kv_heads)) * d * _B * 2),
            SmallKernel("KV-cache write", t * 2 * max(1, a.num_kv_heads) * d * (_B + kv_bytes)),
            SmallKernel("split-KV attention combine", t * heads * d * 4 * 2)]
    if eight_bit:
        out += [_quant(t, H, "qkv input"), _quant(t, heads * d, "o_proj input")]
    return out


def moe_kernels(model, t: float, shared_width: int, eight_bit: bool) -> list[SmallKernel]:
    """The small kernels of one MoE block on ``t`` tokens (``shared_width``: the local shared-expert width, 0 for
    none): the norm before it, the router's top-k, the expert alignment and, with shared experts, their SiLU-and-mul,
    quantisation and the add of shared and routed outputs."""
    e, H = model.experts, model.hidden_size
    out = [SmallKernel("fused add + RMSNorm (post-attention)", t * H * _B * 4),
           SmallKernel("router top-k (fused softmax / sigmoid + top-k)", t * e.num_experts * 4 + t * e.top_k * 8),
           SmallKernel("moe_align_block_size (sort by expert, pad)", t * e.top_k * 4 * 3 + e.num_experts * 4)]
    if shared_width:
        out.append(SmallKernel("shared experts SiLU-and-mul", t * shared_width * _B * 3))
        if eight_bit:
            out += [_quant(t, H, "shared gate+up input"), _quant(t, shared_width, "shared down input")]
        out.append(SmallKernel("add shared + routed outputs", t * H * _B * 3))
    return out


def dense_kernels(model, t: float, width: int, eight_bit: bool) -> list[SmallKernel]:
    """The small kernels of one dense MLP block on ``t`` tokens, local width ``width``."""
    H = model.hidden_size
    out = [SmallKernel("fused add + RMSNorm (post-attention)", t * H * _B * 4),
           SmallKernel("SiLU-and-mul", t * width * _B * 3)]
    if eight_bit:
        out += [_quant(t, H, "gate+up input"), _quant(t, width, "down input")]
    return out


def step_kernels(model, t: float, vocab_local: int) -> list[SmallKernel]:
    """The kernels of a step outside the layers: the embedding lookup, the final norm, sampling (argmax over the
    whole vocabulary on ``t`` tokens; the logits are gathered first) and the logits' cast."""
    H, V = model.hidden_size, model.vocab_size
    return [SmallKernel("embedding lookup", t * H * _B * 2),
            SmallKernel("final RMSNorm", t * H * _B * 2),
            SmallKernel("logits to fp32", t * vocab_local * (_B + 4)),
            SmallKernel("sampling (argmax over the vocabulary)", t * V * 4, "argmax", t, V)]


__all__ = ["SmallKernel", "attention_kernels", "moe_kernels", "dense_kernels", "step_kernels"]
