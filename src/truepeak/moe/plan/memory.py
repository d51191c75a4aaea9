"""Memory per GPU of a plan: weights and KV cache on the heaviest pipeline stage, against the GPU's capacity.

Memory per GPU: weights of the heaviest stage (routed experts E / ep × width / expert TP; attention, shared experts and
dense MLPs / attention TP, MLA's q_a/kv_a replicated; router, embedding and lm_head in bf16, vocab-parallel; expert
biases (gpt-oss) in bf16, as its checkpoint stores them next to the mxfp4 expert weights) plus the KV cache of the
sequences the GPU holds (B / dp; MLA's latent cache replicated over attention TP) at context C. Activations, CUDA graphs
and allocator reserve are not counted (vLLM keeps 10 % free by default). fp8 / int8 weights count their fp32 scales
(:mod:`truepeak.moe.ops`: 128 x 128 blocks when the checkpoint has ``weight_block_size`` [128, 128], else one per output
row): expert, shared-expert and dense-MLP matrices by their shapes, attention weights by the per-value bytes of a
[128 x H] weight.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from truepeak.moe.layout import Layout, ceil_div
from truepeak.moe.ops import BF16, Formats


@dataclass(frozen=True)
class MemoryFit:
    """Memory per GPU on the heaviest pipeline stage, bytes.

    Attributes:
        weights: weight bytes; ``weight_parts`` splits them by group.
        kv_cache: KV-cache (and recurrent-state) bytes at the batch and context.
        capacity: the GPU's memory (catalog), or None if unknown.
        fits: total <= capacity (True when the capacity is unknown).
        over: bytes beyond capacity (0 when it fits).
    """

    weights: float
    kv_cache: float
    capacity: float | None
    weight_parts: dict = field(default_factory=dict)

    @property
    def total(self) -> float:
        return self.weights + self.kv_cache

    @property
    def fits(self) -> bool:
        return self.capacity is None or self.total <= self.capacity

    @property
    def over(self) -> float:
        return 0.0 if self.fits else self.total - self.capacity

    def to_dict(self) -> dict:
        return {"weights_bytes": self.weights, "kv_cache_bytes": self.kv_cache, "total_bytes": self.total,
                "capacity_bytes": self.capacity, "fits": self.fits, "over_bytes": self.over,
                "weight_parts_bytes": dict(self.weight_parts)}


def memory_fit(model, acc, layout: Layout, batch: int, context: int, formats: Formats) -> MemoryFit:
    """Weights + KV cache per GPU on the heaviest stage (module docstring) of ``model`` (a
    :class:`truepeak.moe.config.MoEModel`) on ``acc`` at ``batch`` sequences of ``context`` tokens, bytes."""
    m, lay, f = model, layout, formats
    a, e, H, tp = m.attention, m.experts, m.hidden_size, lay.attn_tp
    fa, fr, fs, fd = (f.for_group(g) for g in ("attention", "routed_experts", "shared_experts", "dense_mlp"))

    def wv(count: float, k: int = H) -> float:      # weight values of matrices with reduction dim k, scales incl.
        return fa.weight_values_bytes(fa.weights, count, k)
    n = m.num_layers
    base, extra = divmod(n, lay.pp)
    sizes = [base + (1 if i >= lay.pp - extra else 0) for i in range(lay.pp)]
    seqs = ceil_div(batch, lay.dp)
    best = None
    start = 0
    for s, size in enumerate(sizes):
        parts = {g: 0.0 for g in ("attention", "routed_experts", "shared_experts", "dense_mlp", "router",
                                  "embedding", "lm_head")}
        kv = 0.0
        for layer in m.layers[start:start + size]:
            if layer.attention == "linear":
                parts["attention"] += wv(a.linear.params(H) / tp)
                la = a.linear
                kv += f.kv_cache.values_bytes(seqs * la.state_elements() / tp)
            elif a.kind == "mla":
                repl = H * ((a.q_lora_rank or 0) + a.kv_lora_rank + a.qk_rope_head_dim)
                if a.indexer is not None:
                    repl += H * (a.indexer.head_dim + a.indexer.num_heads)
                parts["attention"] += wv(repl + (a.params(H) - repl) / tp)
                per_tok = a.kv_elements_per_token()
                kv += f.kv_cache.values_bytes(seqs * context * per_tok)      # latent replicated over TP
            else:
                parts["attention"] += wv(a.params(H) / tp)
                kvh = max(1, a.num_kv_heads // tp)
                ctx = min(context, a.sliding_window) if layer.attention == "sliding" and a.sliding_window else context
                kv += f.kv_cache.values_bytes(seqs * ctx * 2 * kvh * a.head_dim)
            if layer.mlp == "moe":
                width = e.intermediate_size // lay.moe_tp
                bias = e.params_per_expert(H) - 3 * H * e.intermediate_size      # gpt-oss expert biases (bf16)
                parts["routed_experts"] += (fr.weight_bytes(fr.weights, 2 * width, H, e.num_experts // lay.ep)
                                            + fr.weight_bytes(fr.weights, H, width, e.num_experts // lay.ep)
                                            + BF16.values_bytes(e.num_experts // lay.ep * bias / lay.moe_tp))
                if e.num_shared:
                    sw = e.num_shared * e.shared_intermediate_size // tp
                    parts["shared_experts"] += fs.weight_bytes(fs.weights, 2 * sw, H) + fs.weight_bytes(fs.weights, H, sw)
                parts["router"] += BF16.values_bytes(e.num_experts * H)
            else:
                dw = m.dense_intermediate_size // tp
                parts["dense_mlp"] += fd.weight_bytes(fd.weights, 2 * dw, H) + fd.weight_bytes(fd.weights, H, dw)
        start += size
        vocab = BF16.values_bytes(m.vocab_size * H / tp)
        if s == 0:
            parts["embedding"] = vocab
        if s == lay.pp - 1 and not (m.tie_word_embeddings and lay.pp == 1):
            parts["lm_head"] = vocab
        total = sum(parts.values()) + kv
        if best is None or total > best[0]:
            best = (total, parts, kv)
    _, parts, kv = best
    cap = acc.memory_bytes.value if acc.memory_bytes is not None else None
    return MemoryFit(sum(parts.values()), kv, float(cap) if cap else None,
                     {k: v for k, v in parts.items() if v})
