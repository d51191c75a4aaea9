"""The decode step: the ops of one GPU of the slowest pipeline stage, their FLOP, bytes and times, and the collectives.

Every op of one decode step on one GPU of the slowest pipeline stage gets FLOP and bytes in the chosen formats and a
roofline time (:mod:`truepeak.moe.ops`), or a measured one (:mod:`truepeak.moe.measured`); collectives get an α–β
time (:mod:`truepeak.comm.model`). Step time is their sum: no overlap of communication with computation is modelled
(decode at small batch runs them in sequence; two-batch overlap and multi-stream shared experts are not modelled), so
the prediction is a floor for the kernels and a sum for the step.

The decode step (B = ``batch``: sequences decoding together, one new token each; C = ``context``: tokens in each
sequence's KV cache; layout rules in :mod:`truepeak.moe.layout`):

- Pipeline: the batch is split in ``n = min(pp, B)`` micro-batches of ``mb = ceil(B / pp)``; a step takes ``max(n ×
  slowest stage, one micro-batch's trip through all stages)`` (each micro-batch crosses every stage once; the slowest
  stage's idle time is shown as a pipeline bubble). Layers are split into ``pp`` contiguous stages, the remainder going
  to the last stages; the first stage also embeds, the last also runs lm_head; each stage but the last sends
  ``mb × H`` bf16 to the next.
- Attention replicas: with ``dpD`` each replica handles ``ceil(mb / D)`` sequences (the busiest); otherwise every GPU
  of the stage sees all ``mb`` tokens.
- Per layer and GPU (heads h = heads / attention TP):
    - MLA (DeepSeek-V3, Kimi-K2, GLM-5), **absorbed** as in vLLM/SGLang MLA decode: q_a + kv_a projection (replicated
      on every attention-TP rank, ``ReplicatedLinear``) [t × H]·[H × (q_lora + kv_lora + rope)]; q_b [t × q_lora]·
      [q_lora × h·d_qk]; the absorbed kv_b halves W_UK [h: nope × kv_lora] and W_UV [h: kv_lora × v] as bf16 batched
      GEMMs (dequantised at load); attention over the latent cache: every rank reads its sequences' whole latent
      cache (the latent is shared by all heads, so attention TP replicates it), C × (kv_lora + rope) per sequence,
      FLOP 2·t·h·C'·(2·kv_lora + rope); o_proj [t × h·v]·[h·v × H]. GLM-5's DSA indexer reads C index keys per
      sequence (C × index_head_dim) and caps attention at C' = min(C, index_topk); its projections are counted.
    - GQA: qkv [t × H]·[H × (h·d·(2 with an output gate) + 2·kv·d)] with kv = max(1, KV heads / TP); attention reads
      t × C' × 2·kv·d of KV (C' = C, or min(C, window) on sliding layers), FLOP 4·t·h·C'·d; o_proj.
    - Linear attention (Gated DeltaNet, Qwen3-Next): in_proj [t × H]·[H × (2·k_dim + 2·v_dim + 2·n_v)] / TP; the
      recurrent state n_v · d_k · d_v per sequence read and written once; out_proj.
    - Router [T × H]·[H × E] in bf16 on the tokens this GPU routes.
    - Routed experts (grouped GEMM, Triton fused_moe style: every (token, expert) pair reads its token's row):
      gate+up and down at the busiest GPU's (token, expert) pairs (``RoutingStats.busiest_gpu_pairs`` under EP; all
      T·k pairs under expert TP) and reading the weights of the expected ACTIVE experts on that GPU only
      (``active_experts`` / ``busiest_gpu_active_experts``), width I_e / expert TP. Routing statistics come from
      :func:`truepeak.moe.routing.routing_stats` (memoised per (T, k, E, routing, ep) for what-if tables), or the
      observed values of a topk_ids dump that has exactly T rows (:mod:`~truepeak.moe.plan.routing_facts`).
    - Shared experts and dense MLP layers: [t × H]·[H × 2·I / TP] and [t × I / TP]·[I / TP × H].
    - lm_head [t × H]·[H × V / TP] (vocab-parallel) in bf16 on the last stage.
- Communication per layer: with attention TP > 1, an all-reduce of t × H × 2 B after attention and one after the MLP /
  MoE block (GLM-5 at TP8: 2 × 78 = 156 per step; docs/method.md, 'Small-message latency'); with DP attention and EP, a
  dispatch and a combine all-to-all of the tokens each GPU receives (one bf16 copy per token and destination GPU, DeepEP
  style), plus an all-reduce inside a TP group when tp > 1; with DP attention and expert TP, an all-gather before and a
  reduce-scatter after the experts. Plus a vocab-parallel embedding all-reduce, an lm_head logits all-gather and the
  pipeline sends. A collective costs α + S · factor / busbw (:class:`truepeak.comm.model.CollectiveModel`), S the
  nccl-tests size, from measurements when given, else the literature defaults per interconnect.
"""

from __future__ import annotations

from truepeak.formats import Format
from truepeak.moe.layout import Layout, ceil_div
from truepeak.moe.ops import BF16, HIDDEN_BYTES, Formats, OpCost, comm_op, gemm_cost, roofline_op, with_time
from truepeak.moe.plan.routing_facts import _routing_facts


def _by_generation(model, acc, ic: str):
    """The NVLink literature default ``model`` (measured on NVLink4, 900 GB/s per GPU) with its busbw scaled to
    ``acc``'s link bandwidth from the catalog (:func:`truepeak.moe.calibration.link_bandwidth`: NVLink5 1.8 TB/s
    doubles it, NVLink3 600 GB/s takes 2/3); α unchanged. PCIe defaults and links the catalog gives no figure for
    are kept."""
    from truepeak.comm.model import CollectiveModel
    from truepeak.moe.calibration import DEFAULTS_LINK, link_bandwidth

    link = link_bandwidth(acc) if ic == "nvlink" else None
    if not link or abs(link - DEFAULTS_LINK) < 1e6:
        return model
    r = link / DEFAULTS_LINK
    return CollectiveModel(model.alpha_s, model.busbw_B_per_s * r, model.op, model.n,
                           source=f"{model.source}; busbw x {r:.3g} for this GPU's link ({link / 1e9:g} GB/s)")


class _Step:
    """Builds the ops of one plan (internal; :func:`plan` is the entry point)."""

    def __init__(self, model, acc, layout: Layout, batch: int, context: int, formats: Formats, routing, measured,
                 ic: str, network=None):
        self.m, self.acc, self.lay, self.B, self.C, self.f = model, acc, layout, batch, context, formats
        self.measured, self.ic = measured, ic
        self.net = network
        self.per_node = network.gpus_per_node(layout) if network is not None else None
        self.bw = acc.bandwidth_bytes_per_s
        self.n_mb = min(layout.pp, batch)                     # micro-batches in flight
        self.mb = ceil_div(batch, layout.pp)                   # tokens per micro-batch (the stage's T)
        self.t_a = ceil_div(self.mb, layout.dp)                # tokens per attention replica (busiest)
        self.H = model.hidden_size
        self.routing = _routing_facts(self.mb, model, layout, routing) if model.num_moe_layers else None
        self.measured_notes: list[str] = []

    # -- helpers -----------------------------------------------------------------------------------------------------
    def gemm(self, name, group, m, n, k, *, weights: Format | None = None, acts: Format | None = None, peak=None,
             batch=1, **detail) -> OpCost:
        f = self.f.for_group(group)
        w = weights or f.weights
        a = acts or f.activations
        pk = peak if peak is not None else (f.gemm_peak if w is f.weights else f.bf16_peak)
        op = gemm_cost(name, group, 1, m, n, k, w, a, pk, self.bw, batch=batch, formats=f, **detail)
        if self.measured is not None and batch == 1 and m > 0 and w.name == a.name:
            hit = self.measured.gemm_time(m, n, k, w.name)
            if hit is not None:
                op = with_time(op, hit[0], hit[1])
        return op

    def collective(self, name: str, op: str, ranks: int, nbytes: float, where: str) -> OpCost | None:
        if ranks < 2 or nbytes <= 0:
            return None
        if self.net is not None and ranks > self.per_node:
            from truepeak.comm.model import CollectiveModel, default_model

            alpha = (self.net.latency_s if self.net.latency_s is not None else
                     default_model(op, min(ranks, max(2, self.per_node)), self.ic, device=self.acc.name).alpha_s)
            model = CollectiveModel(alpha, self.net.bandwidth, op, ranks,
                                    source=f"between {self.net.nodes} nodes: {self.net.bandwidth / 1e9:g} GB/s per GPU")
            return comm_op(name, 1, nbytes, model.time(nbytes), f"α–β network: {model.source}", collective=op,
                           ranks=ranks, where=where, alpha_s=alpha, network=True)
        hit = self.measured.collective_time(op, ranks, nbytes) if self.measured is not None else None
        if hit is None:
            from truepeak.comm.model import default_model

            model = default_model(op, ranks, self.ic, device=self.acc.name)
            model = _by_generation(model, self.acc, self.ic)
            t, src = model.time(nbytes), f"α–β default ({self.ic}): {model.source}"
            alpha = model.alpha_s
        else:
            (t, src), alpha = hit, None
        return comm_op(name, 1, nbytes, t, src, collective=op, ranks=ranks, where=where, alpha_s=alpha)

    # -- attention ---------------------------------------------------------------------------------------------------
    def attention_ops(self, kind: str) -> list[OpCost]:
        a, t, tp, C, H = self.m.attention, self.t_a, self.lay.attn_tp, self.C, self.H
        kvf, bf16 = self.f.kv_cache, self.f.bf16_peak
        ops: list[OpCost] = []
        if kind == "mla":
            h = a.num_heads // tp
            rope, lora, nope, v = a.qk_rope_head_dim, a.kv_lora_rank, a.qk_nope_head_dim, a.v_head_dim
            if a.q_lora_rank:
                ops.append(self.gemm("q_a + kv_a proj (replicated)", "attention", t, a.q_lora_rank + lora + rope, H))
                ops.append(self.gemm("q_b proj", "attention", t, h * a.head_dim, a.q_lora_rank))
            else:
                ops.append(self.gemm("q proj", "attention", t, h * a.head_dim, H))
                ops.append(self.gemm("kv_a proj (replicated)", "attention", t, lora + rope, H))
            ops.append(self.gemm("kv_b absorbed W_UK (bf16 bmm)", "attention", t, lora, nope, weights=BF16, acts=BF16,
                                 batch=h))
            ops.append(self.gemm("kv_b absorbed W_UV (bf16 bmm)", "attention", t, v, lora, weights=BF16, acts=BF16,
                                 batch=h))
            ctx = C
            if a.indexer is not None:
                ix = a.indexer
                q_in = a.q_lora_rank or H
                ops.append(self.gemm("indexer q proj", "attention", t, ix.num_heads * ix.head_dim, q_in))
                ops.append(self.gemm("indexer k + weights proj (replicated)", "attention", t,
                                     ix.head_dim + ix.num_heads, H, weights=BF16, acts=BF16))
                ops.append(roofline_op("DSA indexer over C index keys", "kv_cache", 1,
                                       2.0 * t * ix.num_heads * C * ix.head_dim, kvf.values_bytes(t * C * ix.head_dim),
                                       0.0, bf16, self.bw, f"{t} seq x C={C} x {ix.head_dim}", context=C))
                ctx = min(C, ix.topk)
            flop = 2.0 * t * h * ctx * (2 * lora + rope)
            kv_bytes = kvf.values_bytes(t * ctx * (lora + rope))
            ops.append(roofline_op("MLA attention over latent cache", "kv_cache", 1, flop, kv_bytes, 0.0, bf16,
                                   self.bw, f"{t} seq x C'={ctx} x ({lora}+{rope}), {h} heads", context=ctx))
            ops.append(self.gemm("o_proj", "attention", t, H, h * v))
            return ops
        if kind == "linear":
            la = a.linear
            nk, nv = max(1, la.num_key_heads // tp), la.num_value_heads // tp
            kd, vd = nk * la.key_head_dim, nv * la.value_head_dim
            ops.append(self.gemm("linear-attn in_proj (qkvz, ba)", "attention", t, 2 * kd + 2 * vd + 2 * nv, H))
            state = nv * la.key_head_dim * la.value_head_dim
            ops.append(roofline_op("Gated DeltaNet state update", "kv_cache", 1, 6.0 * t * state,
                                   2 * kvf.values_bytes(t * state), 0.0, bf16, self.bw,
                                   f"{t} seq x {nv} heads x {la.key_head_dim}x{la.value_head_dim} state"))
            ops.append(self.gemm("linear-attn out_proj", "attention", t, H, vd))
            return ops
        # GQA: full or sliding
        h = a.num_heads // tp
        kvh = max(1, a.num_kv_heads // tp)
        d = a.head_dim
        q = h * d * (2 if a.output_gate else 1)
        ops.append(self.gemm("qkv proj", "attention", t, q + 2 * kvh * d, H))
        ctx = min(C, a.sliding_window) if kind == "sliding" and a.sliding_window else C
        label = "sliding-window attention" if kind == "sliding" else "attention"
        ops.append(roofline_op(f"{label} over KV cache", "kv_cache", 1, 4.0 * t * h * ctx * d,
                               kvf.values_bytes(t * ctx * 2 * kvh * d), 0.0, bf16, self.bw,
                               f"{t} seq x C'={ctx} x 2x{kvh}x{d}, {h} heads", context=ctx))
        ops.append(self.gemm("o_proj", "attention", t, H, h * d))
        return ops

    # -- MLP ---------------------------------------------------------------------------------------------------------
    def mlp_tokens(self) -> int:
        """Tokens each GPU runs its attention-TP MLPs (shared experts, dense MLP, router) on."""
        return self.t_a if self.lay.dp > 1 else self.mb

    def dense_ops(self, width: int, group: str, label: str) -> list[OpCost]:
        tp, t, H = self.lay.attn_tp, self.mlp_tokens(), self.H
        n = width // tp
        return [self.gemm(f"{label} gate+up", group, t, 2 * n, H), self.gemm(f"{label} down", group, t, H, n)]

    def moe_ops(self) -> list[OpCost]:
        e, r, H = self.m.experts, self.routing, self.H
        ops = [self.gemm("router", "router", self.mlp_tokens(), e.num_experts, H, weights=BF16, acts=BF16)]
        width = e.intermediate_size // self.lay.moe_tp
        pairs, active = r.gpu_pairs, r.gpu_active_experts
        fe = self.f.for_group("routed_experts")
        w, a = fe.weights, fe.activations
        m_per = pairs / active if active else 0.0
        detail = dict(tokens_per_expert_mean=r.mean_tokens_per_expert, busiest_expert=r.busiest_expert_tokens,
                      pairs=pairs, active_experts=active, m_per_active_expert=m_per)
        for name, n, k in (("routed experts gate+up", 2 * width, H), ("routed experts down", H, width)):
            wb = fe.weight_bytes(w, n, k, active)                        # fp32 scales included (ops docstring)
            nbytes = wb + fe.activation_bytes(a, pairs, k) + BF16.values_bytes(pairs * n)
            shape = f"M≈{m_per:.3g} N={n} K={k} x {active:.4g} active experts"
            ops.append(roofline_op(name, "routed_experts", 1, 2.0 * pairs * n * k, nbytes, wb, fe.gemm_peak,
                                   self.bw, shape, n=n, k=k, **detail))
        if self.measured is not None:
            ops[1:] = self._measured_experts(ops[1:], width)
        if e.num_shared:
            ops += self.dense_ops(e.num_shared * e.shared_intermediate_size, "shared_experts", "shared expert")
        return ops

    def _measured_experts(self, ops: list[OpCost], width: int) -> list[OpCost]:
        e, r = self.m.experts, self.routing
        local = e.num_experts // self.lay.ep
        tpe = r.gpu_pairs / local
        kw = dict(experts=local, hidden=self.H, width=width, fmt=self.f.for_group("routed_experts").weights.name,
                  active_experts=r.gpu_active_experts, routing=r.routing)
        whole = self.measured.moe_time(tpe, **kw)
        if whole is not None:
            share = [op.time_s for op in ops]
            total = sum(share) or 1.0
            return [with_time(op, whole[0] * s / total, whole[1] + " (split between gate+up and down as the roofline)")
                    for op, s in zip(ops, share)]
        out = []
        for op, g in zip(ops, ("gate_up", "down")):
            hit = self.measured.moe_time(tpe, gemm=g, **kw)
            out.append(with_time(op, *hit) if hit is not None else op)
        return out

    # -- communication per layer --------------------------------------------------------------------------------------
    def layer_comm(self) -> tuple[list[OpCost], list[OpCost], list[OpCost]]:
        """(after attention, after a dense MLP, after a MoE block) collectives of one layer."""
        lay, H = self.lay, self.H
        hb = HIDDEN_BYTES
        S = lay.stage_gpus
        att = [self.collective("TP all-reduce after attention", "all_reduce", lay.attn_tp, self.t_a * H * hb,
                               "attention")]
        dense = [self.collective("TP all-reduce after MLP", "all_reduce", lay.attn_tp, self.t_a * H * hb, "mlp")]
        if lay.dp == 1:
            moe = [self.collective("TP all-reduce after MoE", "all_reduce", S, self.mb * H * hb, "mlp")]
        elif lay.ep > 1:
            recv = self.routing.gpu_tokens_received if self.routing else self.t_a
            moe = [self.collective("EP dispatch all-to-all", "all_to_all", S, recv * H * hb, "dispatch"),
                   self.collective("EP combine all-to-all", "all_to_all", S, recv * H * hb, "combine"),
                   self.collective("TP all-reduce after MoE (shared experts)", "all_reduce", lay.tp,
                                   self.t_a * H * hb, "mlp")]
        else:
            moe = [self.collective("all-gather before experts (DP attention)", "all_gather", S, self.mb * H * hb,
                                   "dispatch"),
                   self.collective("reduce-scatter after experts (DP attention)", "reduce_scatter", S,
                                   self.mb * H * hb, "combine"),
                   self.collective("TP all-reduce after MoE (shared experts)", "all_reduce", lay.tp,
                                   self.t_a * H * hb, "mlp")]
        return [o for o in att if o], [o for o in dense if o], [o for o in moe if o]

    # -- stages -------------------------------------------------------------------------------------------------------
    def build(self) -> tuple[list[OpCost], float, float]:
        """The ops of one GPU of the slowest stage (calls per step), its time per micro-batch, and the sum of all
        stages' times per micro-batch (one micro-batch's trip through the pipeline)."""
        lay, m = self.lay, self.m
        att_comm, dense_comm, moe_comm = self.layer_comm()
        cache: dict[tuple[str, str], list[OpCost]] = {}

        def layer_ops(att_kind: str, mlp: str) -> list[OpCost]:
            key = (att_kind, mlp)
            if key not in cache:
                ops = self.attention_ops(att_kind) + att_comm
                if mlp == "moe":
                    ops += self.moe_ops() + moe_comm
                else:
                    ops += self.dense_ops(m.dense_intermediate_size, "dense_mlp", "dense MLP") + dense_comm
                cache[key] = ops
            return cache[key]

        n = m.num_layers
        base, extra = divmod(n, lay.pp)
        sizes = [base + (1 if i >= lay.pp - extra else 0) for i in range(lay.pp)]
        t = self.mlp_tokens()
        V, H = m.vocab_size, self.H
        best: tuple[float, list[OpCost]] | None = None
        trip = 0.0
        start = 0
        for s, size in enumerate(sizes):
            ops: list[OpCost] = []
            if s == 0:
                emb = self.collective("vocab-parallel embedding all-reduce", "all_reduce", lay.attn_tp,
                                      t * H * HIDDEN_BYTES, "embedding")
                if emb:
                    ops.append(emb)
            for layer in m.layers[start:start + size]:
                ops.extend(layer_ops(layer.attention, layer.mlp))
            start += size
            if s == lay.pp - 1:
                head = self.f.for_group("lm_head")
                own = head is not self.f                   # lm_head has its own format only when given
                ops.append(self.gemm("lm_head (vocab-parallel)", "lm_head", t, ceil_div(V, lay.attn_tp), H,
                                     weights=head.weights if own else BF16, acts=head.activations if own else BF16))
                g = self.collective("lm_head logits all-gather", "all_gather", lay.attn_tp, t * V * HIDDEN_BYTES,
                                    "lm_head")
                if g:
                    ops.append(g)
            else:
                ops.append(self.collective("pipeline send to next stage", "send_recv", 2, t * H * HIDDEN_BYTES,
                                           "pipeline"))
            total = sum(op.time_s for op in ops)
            trip += total
            if best is None or total > best[0]:
                best = (total, ops)
        stage_s, ops = best
        return _merge(ops, self.n_mb), stage_s, trip


def _merge(ops: list[OpCost], n_mb: int) -> list[OpCost]:
    """Identical ops of several layers merged into one entry with ``calls`` = layers × micro-batches, first-seen
    order."""
    out: dict[tuple, OpCost] = {}
    counts: dict[tuple, int] = {}
    for op in ops:
        key = (op.name, op.group, op.shape, op.time_s)
        if key not in out:
            out[key] = op
        counts[key] = counts.get(key, 0) + 1
    merged = []
    for key, op in out.items():
        merged.append(OpCost(op.name, op.group, counts[key] * n_mb, op.flop, op.bytes, op.weight_bytes, op.time_s,
                             op.bound, op.source, op.shape, op.detail))
    return merged
