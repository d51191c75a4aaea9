"""The MoE decode step model: model × accelerator × layout × batch → per-op times, communication, tokens/s, bottleneck.

Pure Python (no torch, no numpy at import). Every op of one decode step on one GPU of the slowest pipeline stage gets
FLOP and bytes in the chosen formats and a roofline time (:mod:`truepeak.moe.ops`), or a measured one
(:mod:`truepeak.moe.measured`); collectives get an α–β time (:mod:`truepeak.comm.model`). Step time is their sum: no
overlap of communication with computation is modelled (decode at small batch runs them in sequence; two-batch overlap
and multi-stream shared experts are not modelled), so the prediction is a floor for the kernels and a sum for the step.

The decode step (B = ``batch``: sequences decoding together, one new token each; C = ``context``: tokens in each
sequence's KV cache; layout rules in :mod:`truepeak.moe.layout`):

- Pipeline: the batch is split in ``n = min(pp, B)`` micro-batches of ``mb = ceil(B / pp)``; a step takes
  ``max(n × slowest stage, one micro-batch's trip through all stages)`` (each micro-batch crosses every stage once;
  the slowest stage's idle time is shown as a pipeline bubble). Layers are split into ``pp`` contiguous stages, the remainder going to the last stages; the
  first stage also embeds, the last also runs lm_head; each stage but the last sends ``mb × H`` bf16 to the next.
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
      observed values of a topk_ids dump that has exactly T rows (:func:`_observed`).
    - Shared experts and dense MLP layers: [t × H]·[H × 2·I / TP] and [t × I / TP]·[I / TP × H].
    - lm_head [t × H]·[H × V / TP] (vocab-parallel) in bf16 on the last stage.
- Communication per layer: with attention TP > 1, an all-reduce of t × H × 2 B after attention and one after the MLP /
  MoE block (GLM-5 at TP8: 2 × 78 = 156 per step; docs/method.md, 'Small-message latency'); with DP attention and EP, a
  dispatch and a combine all-to-all of the tokens each GPU receives (one bf16 copy per token and destination GPU, DeepEP
  style), plus an all-reduce inside a TP group when tp > 1; with DP attention and expert TP, an all-gather before and a
  reduce-scatter after the experts. Plus a vocab-parallel embedding all-reduce, an lm_head logits all-gather and the
  pipeline sends. A collective costs α + S · factor / busbw (:class:`truepeak.comm.model.CollectiveModel`), S the
  nccl-tests size, from measurements when given, else the literature defaults per interconnect.
- Weight format (:func:`choose_weights`): ``weights`` when given, else the checkpoint's (its ``quantization_config``:
  fp8 for DeepSeek-V3 and Kimi-K2, mxfp4 for gpt-oss), else bf16; the plan says which (:class:`WeightsChoice`). It is
  one format for attention, routed experts, shared experts and dense MLPs; where the checkpoint keeps some of those in
  bf16 (gpt-oss's ``modules_to_not_convert``: attention) the plan says what that changes (:func:`weights_note`).
- Memory per GPU: weights of the heaviest stage (routed experts E / ep × width / expert TP; attention, shared experts
  and dense MLPs / attention TP, MLA's q_a/kv_a replicated; router, embedding and lm_head in bf16, vocab-parallel;
  expert biases (gpt-oss) in bf16, as its checkpoint stores them next to the mxfp4 expert weights)
  plus the KV cache of the sequences the GPU holds (B / dp; MLA's latent cache replicated over attention TP) at
  context C. Activations, CUDA graphs and allocator reserve are not counted (vLLM keeps 10 % free by default).
  fp8 / int8 weights count their fp32 scales (:mod:`truepeak.moe.ops`: 128 x 128 blocks when the checkpoint has
  ``weight_block_size`` [128, 128], else one per output row): expert, shared-expert and dense-MLP matrices by their
  shapes, attention weights by the per-value bytes of a [128 x H] weight.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields

from truepeak.errors import TruepeakError
from truepeak.formats import Format
from truepeak.moe.layout import Layout, LayoutError, ceil_div, check_layout, default_layouts, parse_layout
from truepeak.moe.findings import (AllReduceShare, CommunicationBound, ComputeBound, ContextAboveLimit,
                                   CrossesBaseboard, DoesNotFit, ExpertGemmIntensity, Finding, MemoryBound,
                                   PcieCommunicationBound, UnquantisedGroups)
from truepeak.moe.ops import (BF16, GROUPS, HIDDEN_BYTES, Formats, OpCost, comm_op, gemm_cost,
                              resolve_formats, roofline_op, with_time)
from truepeak.moe.tuned_configs import TunedConfigNames, tuned_config_names

#: Default context length (tokens in each sequence's KV cache) when none is given.
DEFAULT_CONTEXT = 4096
#: The batch sizes of a ``--compare`` table when none are given (8 sizes).
DEFAULT_COMPARE_BATCHES = (1, 2, 8, 16, 32, 64, 128, 512)
#: Batch at or below which TP > 2 on PCIe-only GPUs is flagged as communication-bound (docs/method.md, 'Small-message
#: latency').
SMALL_BATCH = 64
#: Share of the step above which communication is called a major share.
MAJOR_SHARE = 0.25


# ----------------------------------------------------------------------------------------------------------------------
# Interconnect
# ----------------------------------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class InterconnectChoice:
    """The interconnect of a plan's collectives and why it was taken (:func:`interconnect_of`).

    Attributes:
        kind: ``"nvlink"`` or ``"pcie"``.
        basis: why: ``"given"`` (the override); ``"catalog"`` (the catalog's interconnect text says so);
            ``"catalog_xgmi"`` (AMD Infinity Fabric, treated as an NVLink-class fabric); ``"bridge_beyond"`` (an
            NVLink bridge links 2 GPUs, more talk over PCIe); with no catalog entry: ``"board_without_nvlink"``
            (GeForce, RTX and L-series boards), ``"nvl_bridge"`` (H100/H200 NVL, bridged up to 4 GPUs),
            ``"nvl_beyond_bridge"`` (more than 4 NVL GPUs), ``"baseboard_assumed"`` (an NVLink/NVSwitch baseboard).
        catalog: the catalog's interconnect text ("" when it has none). device: the accelerator's name.
        gpus: the GPUs that run the collectives together.
    """

    kind: str
    basis: str
    catalog: str = ""
    device: str = ""
    gpus: int = 1

    def to_dict(self) -> dict:
        return {"kind": self.kind, "basis": self.basis, "catalog": self.catalog, "device": self.device,
                "gpus": self.gpus}


def interconnect_of(acc, n_gpus: int, override: str | None = None) -> InterconnectChoice:
    """The interconnect (:class:`InterconnectChoice`: ``"nvlink"`` or ``"pcie"``, and why) of collectives among
    ``n_gpus`` GPUs of ``acc`` in one box (the planner passes the GPUs of one pipeline stage, which run the TP / EP
    collectives together).

    Rule (the catalog's ``interconnect`` text, else the device family): "no NVLink" → pcie; an "NVLink bridge" links
    2 GPUs only → nvlink for 2, pcie beyond; NVLink / NVSwitch / AMD Infinity Fabric (XGMI) → nvlink (an all-to-all
    GPU fabric); no entry: GeForce, RTX and L-series boards → pcie, H100/H200 NVL → nvlink up to 4 (bridged), else
    nvlink. ``override`` (``"nvlink"``/``"pcie"``) wins.

    Raises:
        TruepeakError: an ``override`` other than nvlink or pcie.
    """
    if override:
        o = override.strip().lower()
        if o not in ("nvlink", "pcie"):
            raise TruepeakError(f"interconnect {override!r} is not one of nvlink, pcie")
        return InterconnectChoice(o, "given", device=acc.name, gpus=n_gpus)
    text = (acc.interconnect.value if acc.interconnect is not None else "") or ""
    low = text.lower()

    def choice(kind: str, basis: str) -> InterconnectChoice:
        return InterconnectChoice(kind, basis, text, acc.name, n_gpus)

    if "no nvlink" in low:
        return choice("pcie", "catalog")
    if "nvlink bridge" in low:
        return choice("nvlink", "catalog") if n_gpus <= 2 else choice("pcie", "bridge_beyond")
    if "nvlink" in low or "infinity fabric" in low or "xgmi" in low:
        return choice("nvlink", "catalog_xgmi" if "xgmi" in low else "catalog")
    name = acc.name.lower()
    if any(s in name for s in ("geforce", "rtx", " l40", " l4")):
        return choice("pcie", "board_without_nvlink")
    if " nvl" in name:
        return choice("nvlink", "nvl_bridge") if n_gpus <= 4 else choice("pcie", "nvl_beyond_bridge")
    return choice("nvlink", "baseboard_assumed")


# ----------------------------------------------------------------------------------------------------------------------
# Results
# ----------------------------------------------------------------------------------------------------------------------

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


@dataclass(frozen=True)
class Plan:
    """One decode-step prediction. Times in seconds, rates in tokens/s, bytes in B.

    Attributes:
        model, accelerator: names. layout: the :class:`Layout`. batch, context: B and C.
        formats: :class:`~truepeak.moe.ops.Formats`. interconnect: ``"pcie"``/``"nvlink"``;
        interconnect_choice: that and why (:class:`InterconnectChoice`).
        ops: the :class:`OpCost` list of one GPU of the slowest stage for one step (calls per step included).
        step_s: seconds per decode step (every sequence advances one token). bubble_s: pipeline idle time in it.
        routing: routing facts of one MoE layer at the micro-batch (:class:`RoutingFacts`), None for a model without
            MoE layers.
        memory: :class:`MemoryFit`. tuned_configs: :class:`TunedConfigNames`.
        notes: findings (:mod:`truepeak.moe.findings`) of the formats (dequantised weights, activations the device
            lacks) and of the layout (:class:`~truepeak.moe.findings.PcieCommunicationBound`,
            :class:`~truepeak.moe.findings.CrossesBaseboard`).
        weights_origin: where the weight format came from (:class:`WeightsChoice`), or None.
        weights_note: what the one weight format does to weights the checkpoint keeps in bf16
            (:func:`weights_note`), or None.
    """

    model: str
    accelerator: str
    layout: Layout
    batch: int
    context: int
    formats: Formats
    interconnect: str
    interconnect_choice: InterconnectChoice
    ops: tuple[OpCost, ...]
    step_s: float
    bubble_s: float
    routing: RoutingFacts | None
    memory: MemoryFit
    tuned_configs: TunedConfigNames
    bandwidth: float
    notes: tuple[Finding, ...] = ()
    weights_origin: WeightsChoice | None = None
    weights_note: UnquantisedGroups | None = None

    # -- derived ----------------------------------------------------------------------------------------------------
    @property
    def tokens_per_s(self) -> float:
        """Output tokens per second of the whole layout: B / step."""
        return self.batch / self.step_s

    @property
    def tokens_per_s_per_gpu(self) -> float:
        return self.tokens_per_s / self.layout.gpus

    @property
    def tokens_per_s_per_user(self) -> float:
        """Tokens per second each sequence sees: 1 / step."""
        return 1.0 / self.step_s

    def time_by_bound(self) -> dict[str, float]:
        """Seconds per step spent in compute-bound ops, memory-bound ops, communication and pipeline bubble."""
        out = {"compute": 0.0, "memory": 0.0, "communication": 0.0}
        for op in self.ops:
            out[op.bound] += op.total_s
        out["pipeline_bubble"] = self.bubble_s
        return out

    def time_by_group(self) -> dict[str, float]:
        """Seconds per step by op group (:data:`~truepeak.moe.ops.GROUPS`), in that order, groups with time only."""
        out = {g: 0.0 for g in GROUPS}
        for op in self.ops:
            out[op.group] += op.total_s
        return {g: t for g, t in out.items() if t > 0}

    @property
    def ridge(self) -> float:
        """Ridge point of the weight GEMMs, FLOP/B: dense peak of the GEMM compute format / memory bandwidth."""
        return self.formats.gemm_peak / self.bandwidth

    def collectives(self) -> dict[str, dict]:
        """Collectives per step by op name: ``{name: {"calls", "time_s", "per_call_s", "bytes", "ranks"}}``."""
        out: dict[str, dict] = {}
        for op in self.ops:
            if op.group != "communication":
                continue
            key = op.detail.get("collective", op.name)
            d = out.setdefault(key, {"calls": 0, "time_s": 0.0, "ranks": op.detail.get("ranks")})
            d["calls"] += op.calls
            d["time_s"] += op.total_s
        for d in out.values():
            d["per_call_s"] = d["time_s"] / d["calls"] if d["calls"] else 0.0
        return out

    @property
    def measured_ops(self) -> list[str]:
        """Names of the ops whose time came from a measurement."""
        return [op.name for op in self.ops if op.measured]

    def expert_op(self, which: str = "gate+up") -> OpCost | None:
        for op in self.ops:
            if op.group == "routed_experts" and which in op.name:
                return op
        return None

    def bottleneck(self) -> Finding:
        """What dominates the step (:class:`~truepeak.moe.findings.CommunicationBound`,
        :class:`~truepeak.moe.findings.MemoryBound` or :class:`~truepeak.moe.findings.ComputeBound`): the bound with
        the most time, with its share and what would move it."""
        step = self.step_s
        bounds = self.time_by_bound()
        groups = self.time_by_group()
        top_group = max((g for g in groups if g != "communication"), key=lambda g: groups[g], default=None)
        comm = bounds["communication"]
        kind = max(("compute", "memory", "communication"), key=lambda k: bounds[k])
        if kind == "communication":
            colls = self.collectives()
            ar = colls.get("all_reduce")
            main = max(colls.items(), key=lambda kv: kv[1]["time_s"])
            name, d = ("all_reduce", ar) if ar and ar["time_s"] >= 0.5 * comm else main
            return CommunicationBound(sum(c["calls"] for c in colls.values()), comm, step, name, d["calls"],
                                      d["per_call_s"], self.interconnect)
        g = top_group or "routed_experts"
        if kind == "memory":
            nbytes = sum(op.bytes * op.calls for op in self.ops if op.bound == "memory")
            return MemoryBound(nbytes, self.bandwidth, bounds["memory"], step, g, groups.get(g, 0.0), self.ridge,
                               self.layout.dp == 1 and self.layout.attn_tp > 1)
        return ComputeBound(g, groups.get(g, 0.0), step, self.formats.gemm_peak, self.formats.gemm_compute.name)

    def conclusions(self) -> list[Finding]:
        """What the user should conclude (docs/method.md, 'Worked example: GLM-5 on RTX PRO 6000'), as findings:
        tokens per expert and the expert GEMMs' bound (:class:`~truepeak.moe.findings.ExpertGemmIntensity`), the
        all-reduces' share of the step (:class:`~truepeak.moe.findings.AllReduceShare`), the :attr:`notes`, and
        :class:`~truepeak.moe.findings.DoesNotFit` when the memory does not fit."""
        out: list[Finding] = []
        r = self.routing
        gu = self.expert_op("gate+up")
        if r and gu is not None and gu.flop:
            w_ai = gu.flop / gu.weight_bytes if gu.weight_bytes else float("inf")
            ai = gu.intensity
            out.append(ExpertGemmIntensity(r.mean_tokens_per_expert, r.tokens, r.top_k, r.num_experts,
                                           r.busiest_expert_tokens, ai, w_ai, self.ridge,
                                           self.formats.gemm_compute.name, ai < self.ridge))
        colls = self.collectives()
        ar = colls.get("all_reduce")
        if ar:
            layers = sum(op.calls for op in self.ops if op.detail.get("collective") == "all_reduce"
                         and op.detail.get("where") in ("attention", "mlp"))
            out.append(AllReduceShare(ar["calls"], layers, ar["per_call_s"], ar["time_s"], self.step_s,
                                      ar["time_s"] / self.step_s >= MAJOR_SHARE))
        out.extend(self.notes)
        if not self.memory.fits:
            m = self.memory
            out.append(DoesNotFit(m.total, m.weights, m.kv_cache, m.capacity, m.over, self.accelerator))
        return out

    def to_dict(self) -> dict:
        """JSON-ready data, SI units; the findings as :meth:`truepeak.moe.findings.Finding.to_dict`
        (:func:`truepeak.report.plan.plan_json` adds their sentences)."""
        return {
            "model": self.model, "accelerator": self.accelerator, "layout": self.layout.to_dict(),
            "batch": self.batch, "context": self.context, "formats": self.formats.to_dict(),
            "interconnect": self.interconnect, "interconnect_choice": self.interconnect_choice.to_dict(),
            "bandwidth_B_per_s": self.bandwidth, "ridge_flop_per_byte": self.ridge,
            "step_s": self.step_s, "tokens_per_s": self.tokens_per_s, "tokens_per_s_per_gpu": self.tokens_per_s_per_gpu,
            "tokens_per_s_per_user": self.tokens_per_s_per_user,
            "time_by_bound_s": self.time_by_bound(), "time_by_group_s": self.time_by_group(),
            "collectives": self.collectives(),
            "routing": None if self.routing is None else self.routing.to_dict(), "memory": self.memory.to_dict(),
            "tuned_configs": self.tuned_configs.to_dict(), "measured_ops": self.measured_ops,
            "ops": [op.to_dict() for op in self.ops],
            "weights_origin": None if self.weights_origin is None else {
                **self.weights_origin.to_dict(),
                "note_finding": None if self.weights_note is None else self.weights_note.to_dict()},
            "findings": {"bottleneck": self.bottleneck().to_dict(),
                         "conclusions": [c.to_dict() for c in self.conclusions()]},
        }


# ----------------------------------------------------------------------------------------------------------------------
# Routing (truepeak.moe.routing)
# ----------------------------------------------------------------------------------------------------------------------

_STATS_CACHE: dict = {}


def _stats(tokens: int, top_k: int, num_experts: int, routing, ep: int):
    """:func:`truepeak.moe.routing.routing_stats`, memoised for hashable routing specs (a what-if table asks for the
    same (T, k, E, routing, ep) from several layouts); :func:`_observed` for a dump of exactly ``tokens`` rows."""
    from truepeak.moe.routing import routing_stats

    def compute():
        return _observed(tokens, top_k, num_experts, routing, ep) or routing_stats(tokens, top_k, num_experts,
                                                                                   routing=routing, ep=ep)

    try:
        key = (tokens, top_k, num_experts, routing, ep)
        hash(key)
    except TypeError:
        return compute()
    if key not in _STATS_CACHE:
        if len(_STATS_CACHE) > 4096:
            _STATS_CACHE.clear()
        _STATS_CACHE[key] = compute()
    return _STATS_CACHE[key]


def _observed(tokens: int, top_k: int, num_experts: int, routing, ep: int):
    """The OBSERVED statistics (:func:`truepeak.moe.routing.empirical_stats`) when ``routing`` is a topk_ids dump file
    of exactly ``tokens`` rows (the batch the plan is for), else None.

    A dump is otherwise read as per-expert probabilities and the expected busiest expert is computed from them, which
    counts the dump's own sampling noise twice: for a uniform 512-token DeepSeek-V3 dump whose busiest expert got 29
    tokens (and busiest EP8 GPU 536 pairs), the model says 35.2 (553.9). At the dump's own T the observed values are
    the answer; at other T the probabilities are all there is.
    """
    from dataclasses import replace

    from truepeak.moe.routing import empirical_stats, load_topk_ids, routing_file

    p = routing_file(routing)
    if p is None:
        return None
    rows = load_topk_ids(p)
    if len(rows) != tokens or not isinstance(rows[0], list) or len(rows[0]) != top_k or top_k == num_experts:
        return None                      # another T, a histogram, or a malformed file (routing_stats says what)
    st = empirical_stats(rows, num_experts, ep=ep)
    return replace(st, routing=f"dump:{p.name}, observed")


@dataclass(frozen=True)
class RoutingFacts:
    """Routing facts of one MoE layer for the tokens of one micro-batch (counts of tokens or (token, expert) pairs).

    Attributes:
        routing, method: the routing's label and how its statistics were computed
            (:class:`truepeak.moe.routing.RoutingStats`).
        mean_tokens_per_expert, busiest_expert_tokens, active_experts, experts_per_gpu, mean_gpu_pairs,
        busiest_gpu_pairs, busiest_gpu_active_experts, busiest_gpu_tokens_sent: as
            :class:`~truepeak.moe.routing.RoutingStats`.
        padding_16, padding_64: the mean-based padded share of a grouped GEMM with BLOCK_M 16 / 64 rows
            (:meth:`~truepeak.moe.routing.RoutingStats.padding_waste`); expected_padding_16, expected_padding_64:
            the expected share over the load distribution (``expected_padding_waste``).
        tokens, top_k, num_experts, ep: T, k, E and the EP degree.
        gpu_pairs, gpu_active_experts, gpu_tokens_received: what the plan's busiest GPU computes and receives: the
            busiest GPU's pairs, active experts and dispatched tokens under EP; all T·k pairs, every active expert
            and all T tokens without.
    """

    routing: str
    method: str
    mean_tokens_per_expert: float
    busiest_expert_tokens: float
    active_experts: float
    experts_per_gpu: int
    mean_gpu_pairs: float
    busiest_gpu_pairs: float
    busiest_gpu_active_experts: float
    busiest_gpu_tokens_sent: float
    padding_16: float
    padding_64: float
    expected_padding_16: float
    expected_padding_64: float
    tokens: int
    top_k: int
    num_experts: int
    ep: int
    gpu_pairs: float
    gpu_active_experts: float
    gpu_tokens_received: float

    def to_dict(self) -> dict:
        """The facts by name, in field order (JSON-ready)."""
        return {f.name: getattr(self, f.name) for f in fields(self)}


def _routing_facts(tokens: int, model, layout: Layout, routing) -> RoutingFacts:
    """Routing facts of one MoE layer for ``tokens`` tokens, from :func:`truepeak.moe.routing.routing_stats`."""
    e = model.experts
    rs = _stats(tokens, e.top_k, e.num_experts, routing, layout.ep)
    if layout.ep > 1:
        pairs, active, sent = rs.busiest_gpu_pairs, rs.busiest_gpu_active_experts, rs.busiest_gpu_tokens_sent
    else:
        pairs, active, sent = float(tokens * e.top_k), rs.active_experts, float(tokens)
    return RoutingFacts(
        rs.routing, rs.method, rs.mean_tokens_per_expert, rs.busiest_expert_tokens, rs.active_experts,
        rs.experts_per_gpu, rs.mean_gpu_pairs, rs.busiest_gpu_pairs, rs.busiest_gpu_active_experts,
        rs.busiest_gpu_tokens_sent, rs.padding_waste(16), rs.padding_waste(64), rs.expected_padding_waste(16),
        rs.expected_padding_waste(64), tokens, e.top_k, e.num_experts, layout.ep, pairs, active, sent)


# ----------------------------------------------------------------------------------------------------------------------
# The step model
# ----------------------------------------------------------------------------------------------------------------------

class _Step:
    """Builds the ops of one plan (internal; :func:`plan` is the entry point)."""

    def __init__(self, model, acc, layout: Layout, batch: int, context: int, formats: Formats, routing, measured,
                 ic: str):
        self.m, self.acc, self.lay, self.B, self.C, self.f = model, acc, layout, batch, context, formats
        self.measured, self.ic = measured, ic
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
        w = weights or self.f.weights
        a = acts or self.f.activations
        pk = peak if peak is not None else (self.f.gemm_peak if w is self.f.weights else self.f.bf16_peak)
        op = gemm_cost(name, group, 1, m, n, k, w, a, pk, self.bw, batch=batch, formats=self.f, **detail)
        if self.measured is not None and batch == 1 and m > 0 and w.name == a.name:
            hit = self.measured.gemm_time(m, n, k, w.name)
            if hit is not None:
                op = with_time(op, hit[0], hit[1])
        return op

    def collective(self, name: str, op: str, ranks: int, nbytes: float, where: str) -> OpCost | None:
        if ranks < 2 or nbytes <= 0:
            return None
        hit = self.measured.collective_time(op, ranks, nbytes) if self.measured is not None else None
        if hit is None:
            from truepeak.comm.model import default_model

            model = default_model(op, ranks, self.ic, device=self.acc.name)
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
        w, a = self.f.weights, self.f.activations
        m_per = pairs / active if active else 0.0
        detail = dict(tokens_per_expert_mean=r.mean_tokens_per_expert, busiest_expert=r.busiest_expert_tokens,
                      pairs=pairs, active_experts=active, m_per_active_expert=m_per)
        for name, n, k in (("routed experts gate+up", 2 * width, H), ("routed experts down", H, width)):
            wb = self.f.weight_bytes(w, n, k, active)                   # fp32 scales included (ops docstring)
            nbytes = wb + self.f.activation_bytes(a, pairs, k) + BF16.values_bytes(pairs * n)
            shape = f"M≈{m_per:.3g} N={n} K={k} x {active:.4g} active experts"
            ops.append(roofline_op(name, "routed_experts", 1, 2.0 * pairs * n * k, nbytes, wb, self.f.gemm_peak,
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
        kw = dict(experts=local, hidden=self.H, width=width, fmt=self.f.weights.name,
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
                ops.append(self.gemm("lm_head (vocab-parallel)", "lm_head", t, ceil_div(V, lay.attn_tp), H,
                                     weights=BF16, acts=BF16))
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

    def memory(self) -> MemoryFit:
        """Weights + KV cache per GPU on the heaviest stage (module docstring)."""
        m, lay, f = self.m, self.lay, self.f
        a, e, H, tp = m.attention, m.experts, self.H, lay.attn_tp
        w = f.weights

        def wv(count: float, k: int = H) -> float:      # weight values of matrices with reduction dim k, scales incl.
            return f.weight_values_bytes(w, count, k)
        n = m.num_layers
        base, extra = divmod(n, lay.pp)
        sizes = [base + (1 if i >= lay.pp - extra else 0) for i in range(lay.pp)]
        seqs = ceil_div(self.B, lay.dp)
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
                    kv += f.kv_cache.values_bytes(seqs * self.C * per_tok)      # latent replicated over TP
                else:
                    parts["attention"] += wv(a.params(H) / tp)
                    kvh = max(1, a.num_kv_heads // tp)
                    ctx = min(self.C, a.sliding_window) if layer.attention == "sliding" and a.sliding_window else self.C
                    kv += f.kv_cache.values_bytes(seqs * ctx * 2 * kvh * a.head_dim)
                if layer.mlp == "moe":
                    width = e.intermediate_size // lay.moe_tp
                    bias = e.params_per_expert(H) - 3 * H * e.intermediate_size      # gpt-oss expert biases (bf16)
                    parts["routed_experts"] += (f.weight_bytes(w, 2 * width, H, e.num_experts // lay.ep)
                                                + f.weight_bytes(w, H, width, e.num_experts // lay.ep)
                                                + BF16.values_bytes(e.num_experts // lay.ep * bias / lay.moe_tp))
                    if e.num_shared:
                        sw = e.num_shared * e.shared_intermediate_size // tp
                        parts["shared_experts"] += f.weight_bytes(w, 2 * sw, H) + f.weight_bytes(w, H, sw)
                    parts["router"] += BF16.values_bytes(e.num_experts * H)
                else:
                    dw = m.dense_intermediate_size // tp
                    parts["dense_mlp"] += f.weight_bytes(w, 2 * dw, H) + f.weight_bytes(w, H, dw)
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
        cap = self.acc.memory_bytes.value if self.acc.memory_bytes is not None else None
        return MemoryFit(sum(parts.values()), kv, float(cap) if cap else None,
                         {k: v for k, v in parts.items() if v})


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


# ----------------------------------------------------------------------------------------------------------------------
# Weight format: which one, and where it came from
# ----------------------------------------------------------------------------------------------------------------------

#: The op groups of a plan whose weights are in the plan's weight format (router, embedding and lm_head are bf16 in
#: every plan: module docstring).
FORMAT_GROUPS = ("attention", "routed_experts", "shared_experts", "dense_mlp")


def _excluded_groups(patterns) -> set[str]:
    """The op groups a checkpoint's unquantised-module patterns name: ``*self_attn*`` / ``*attn*`` / ``*attention*``
    → attention, ``*shared_expert*`` → shared experts, another ``*experts*`` → routed experts. Routers, embeddings and
    lm_head are bf16 in every plan, and other patterns name no group the planner can tell apart."""
    out = set()
    for pat in patterns:
        low = pat.lower()
        if "attn" in low or "attention" in low:
            out.add("attention")
        elif "shared_expert" in low:
            out.add("shared_experts")
        elif "experts" in low:
            out.add("routed_experts")
    return out


def _groups_of(model) -> list[str]:
    """The op groups of ``model`` that carry weights in the plan's weight format (:data:`FORMAT_GROUPS`)."""
    have = {"attention", "routed_experts"}
    if model.experts.num_shared:
        have.add("shared_experts")
    if model.num_dense_layers:
        have.add("dense_mlp")
    return [g for g in FORMAT_GROUPS if g in have]


@dataclass(frozen=True)
class WeightsChoice:
    """The weight format of a plan and where it came from (:func:`choose_weights`).

    Attributes:
        format: the planned format's canonical name (:func:`truepeak.formats.get_format`: ``"mxfp4"``,
            ``"fp8_e4m3"``, ``"bf16"``).
        origin: ``"option"`` (given: ``--weights`` / ``plan(weights=...)``), ``"checkpoint"`` (the format of the
            config's ``quantization_config``, :func:`truepeak.moe.config.checkpoint_format`) or ``"default"`` (bf16:
            the config has no ``quantization_config`` truepeak has a format for).
        checkpoint_format: the checkpoint's format (canonical name), or None.
        quant_method: ``quantization_config.quant_method`` as published (``"fp8"``, ``"mxfp4"``, ``"awq"``), or None.
        weight_block_size: ``quantization_config.weight_block_size``, or None.
        not_converted: the modules the checkpoint leaves unquantised (``modules_to_not_convert``), as published.
        quantised_groups: the op groups (:data:`truepeak.moe.ops.GROUP_WORDS` keys) the checkpoint's format covers:
            the groups of the model with weights in the plan's weight format, less those ``not_converted`` names.
        dtype: the config's ``torch_dtype`` (``"bfloat16"``), or None.
    """

    format: str
    origin: str
    checkpoint_format: str | None = None
    quant_method: str | None = None
    weight_block_size: tuple[int, ...] | None = None
    not_converted: tuple[str, ...] = ()
    quantised_groups: tuple[str, ...] = ()
    dtype: str | None = None

    def to_dict(self) -> dict:
        return {"format": self.format, "origin": self.origin, "checkpoint_format": self.checkpoint_format,
                "quant_method": self.quant_method,
                "weight_block_size": None if self.weight_block_size is None else list(self.weight_block_size),
                "modules_not_converted": list(self.not_converted), "quantised_groups": list(self.quantised_groups),
                "dtype": self.dtype}


def choose_weights(model, weights: str | None = None) -> WeightsChoice:
    """The weight format to plan ``model`` in: ``weights`` when given (``--weights``), else the checkpoint's
    (``model.checkpoint_format``, from its ``quantization_config``: fp8 for DeepSeek-V3 and Kimi-K2, mxfp4 for
    gpt-oss), else bf16.

    Raises:
        UnknownNameError: ``weights`` (or a checkpoint format) is not a truepeak format name.
    """
    from truepeak.formats import get_format

    ckpt = get_format(model.checkpoint_format).name if model.checkpoint_format else None
    if weights is not None:
        fmt, origin = get_format(weights).name, "option"
    elif ckpt is not None:
        fmt, origin = ckpt, "checkpoint"
    else:
        fmt, origin = BF16.name, "default"
    excluded = _excluded_groups(model.modules_not_converted)
    groups = tuple(g for g in _groups_of(model) if g not in excluded) if ckpt else ()
    return WeightsChoice(fmt, origin, ckpt, model.quant_method, model.weight_block_size,
                         tuple(model.modules_not_converted), groups, model.dtype)


def weights_note(choice: WeightsChoice, model, formats: Formats, memory: MemoryFit) -> UnquantisedGroups | None:
    """What planning every weight GEMM in one format does to weights the checkpoint keeps in bf16
    (:class:`~truepeak.moe.findings.UnquantisedGroups`), or None.

    The planner applies one weight format to attention, routed experts, shared experts and dense MLPs (router,
    embedding and lm_head are bf16 in every plan). When that format is the checkpoint's own and the checkpoint leaves
    some of those groups unquantised (gpt-oss: ``model.layers.*.self_attn``), the plan counts them in the quantised
    format: the finding names them with their weight bytes per GPU in the plan and in bf16. The bf16 figure is the
    plan's bytes / the plan's bytes per weight value at K = H (:meth:`~truepeak.moe.ops.Formats.weight_values_bytes`,
    the rule the memory model counts attention by) × 2 B. gpt-oss-120b on one GPU in mxfp4: attention 36 × 26,550,144
    values × 0.53125 B = 0.5078 GB in the plan, × 2 B = 1.912 GB in bf16.
    """
    if choice.checkpoint_format is None or choice.format != choice.checkpoint_format:
        return None
    w = formats.weights
    missed = [g for g in _groups_of(model) if g in _excluded_groups(choice.not_converted)]
    if not missed or w.name == BF16.name:
        return None
    per_value = formats.weight_values_bytes(w, 1, model.hidden_size)
    here = sum(memory.weight_parts.get(g, 0.0) for g in missed)
    return UnquantisedGroups(w.name, tuple(missed), tuple(choice.quantised_groups), here,
                             here / per_value * BF16.values_bytes(1))


def checkpoint_block_size(model, weights) -> tuple[int, ...] | None:
    """The checkpoint's ``weight_block_size`` when the planned ``weights`` format is the checkpoint's own
    (``model.checkpoint_format``; DeepSeek-V3 fp8 → (128, 128)), else None: block scales belong to the checkpoint that
    has them, not to another format asked for on the command line."""
    from truepeak.formats import get_format

    if not model.weight_block_size or not model.checkpoint_format:
        return None
    if get_format(weights) is not get_format(model.checkpoint_format):
        return None
    return tuple(model.weight_block_size)


def context_warning(model, context: int) -> ContextAboveLimit | None:
    """:class:`~truepeak.moe.findings.ContextAboveLimit` when ``context`` exceeds the model's
    ``max_position_embeddings`` (the plan is still made: the KV cache and attention cost grow with C either way, but
    the model was not trained or configured for it), else None (within range, or a config that does not declare
    it)."""
    limit = getattr(model, "max_position_embeddings", None)
    if limit and context > limit:
        return ContextAboveLimit(context, model.name, limit)
    return None


MAX_BATCH = 10_000_000
"""Largest decode batch :func:`plan` accepts. Real decode batches are thousands of sequences; the routing statistics
(busiest expert: a binomial pmf over a window of ~20 standard deviations) stay sub-second up to 1e8 tokens and overflow
(OverflowError) or run for minutes at 1e10 and above, so the bound is a clear error instead."""


def check_batch(batch) -> int:
    """``batch`` if it is a whole number in 1..:data:`MAX_BATCH`; else TruepeakError naming the accepted range."""
    if isinstance(batch, bool) or not isinstance(batch, int) or batch < 1:
        raise TruepeakError(f"batch {batch!r} must be a whole number >= 1 (sequences decoding together; a batch of 0 "
                            "has no step to plan)")
    if batch > MAX_BATCH:
        raise TruepeakError(f"batch {batch} is above the {MAX_BATCH:,} sequences truepeak plans (decode batches are "
                            "thousands at most); give 1 to 10000000")
    return batch


def check_context(context) -> int:
    if isinstance(context, bool) or not isinstance(context, int) or context < 1:
        raise TruepeakError(f"context {context!r} must be a whole number of tokens >= 1")
    return context


def plan(model, acc, layout: Layout | str, batch: int, *, context: int = DEFAULT_CONTEXT, weights: str | None = None,
         activations: str | None = None, kv_cache: str | None = None, routing="uniform", measured=None,
         interconnect: str | None = None, device_name: str | None = None, formats: Formats | None = None) -> Plan:
    """Predict one decode step (module docstring for the model).

    Args:
        model: a :class:`truepeak.moe.config.MoEModel` (``load_model``).
        acc: a :class:`truepeak.hardware.catalog.Accelerator` (``get_accelerator``).
        layout: a :class:`Layout` or a layout string (``"tp8"``).
        batch: sequences decoding together (B >= 1).
        context: tokens in each sequence's KV cache (C >= 1).
        weights: weight format name, or None for the checkpoint's (:func:`choose_weights`: the format of the
            config's ``quantization_config``, else bf16); the plan records which (:attr:`Plan.weights_origin`).
        activations, kv_cache: format names (:func:`truepeak.moe.ops.resolve_formats`).
        routing: ``"uniform"``, ``"powerlaw:A"``, a per-expert histogram, a topk_ids dump path, or a Routing object
            (:func:`truepeak.moe.routing.routing_stats`).
        measured: :class:`truepeak.moe.measured.MeasuredTables` or None.
        interconnect: ``"nvlink"``/``"pcie"`` to override :func:`interconnect_of`.
        device_name: the name torch reports, for the tuned-config file names (default: the catalog's first device
            string for ``acc``).
        formats: precomputed :class:`Formats` (speeds up a what-if table); their weight format is the one planned
            (``weights`` then only names its origin, when it is the same format).

    Raises:
        TruepeakError: a batch < 1, a context < 1, a layout that does not divide the model (which part), an accelerator
            without memory bandwidth; UnknownNameError for unknown formats.
    """
    check_batch(batch)
    check_context(context)
    lay = parse_layout(layout) if isinstance(layout, str) else layout
    check_layout(model, lay)
    if acc.bandwidth_bytes_per_s is None:
        raise TruepeakError(f"{acc.name} has no memory bandwidth in the catalog; the roofline needs one")
    choice = choose_weights(model, weights)
    if formats is not None and formats.weights.name != choice.format:
        choice = choose_weights(model, formats.weights.name)
    f = formats or resolve_formats(acc, choice.format, activations, kv_cache,
                                   weight_block_size=checkpoint_block_size(model, choice.format))
    link = interconnect_of(acc, lay.stage_gpus, interconnect)    # the GPUs that run collectives together
    ic = link.kind
    st = _Step(model, acc, lay, batch, context, f, routing, measured, ic)
    ops, stage_s, trip_s = st.build()
    busy = st.n_mb * stage_s
    step_s = max(busy, trip_s)         # pipeline full: n_mb x slowest stage; else one micro-batch's trip

    flags = [pcie_flag(lay, ic, batch, ops, step_s), baseboard_flag(acc, lay, ic)]
    notes = (*f.notes, *(n for n in flags if n is not None))
    dev = device_name or (acc.device_names[0] if acc.device_names else acc.name)
    names = tuned_config_names(model, lay, dev, f.weights.name, f.activations.name)
    memory = st.memory()
    return Plan(model.name, acc.name, lay, batch, context, f, ic, link, tuple(ops), step_s, step_s - busy,
                st.routing, memory, names, st.bw, notes, choice, weights_note(choice, model, f, memory))


def pcie_flag(lay: Layout, ic: str, batch: int, ops, step_s: float) -> PcieCommunicationBound | None:
    """The communication flag of docs/method.md, 'Small-message latency': more than two tensor-parallel GPUs over
    PCIe only, at a batch of at most :data:`SMALL_BATCH` (or whenever collectives are at least :data:`MAJOR_SHARE` of
    the step), is communication-bound (:class:`~truepeak.moe.findings.PcieCommunicationBound`); else None."""
    comm = sum(op.total_s for op in ops if op.group == "communication")
    group = max(lay.attn_tp, lay.stage_gpus if lay.dp == 1 else lay.tp)
    if ic == "pcie" and group > 2 and (batch <= SMALL_BATCH or comm / step_s >= MAJOR_SHARE):
        return PcieCommunicationBound(group, comm, step_s, batch, batch <= SMALL_BATCH)
    return None


#: GPUs in one NVLink / NVSwitch / XGMI domain of a server baseboard (HGX H100/H200/B200/B300 and A100: 8 GPUs;
#: MI300X / MI325X / MI355X platforms: 8 OAM modules), unless the catalog names a larger domain (GB200 / GB300 NVL72).
BASEBOARD_GPUS = 8


def baseboard_flag(acc, lay: Layout, ic: str) -> CrossesBaseboard | None:
    """:class:`~truepeak.moe.findings.CrossesBaseboard` when a stage's NVLink collectives span more GPUs than one
    baseboard holds (:data:`BASEBOARD_GPUS`, unless the catalog names an NVL72 domain): the α–β defaults are those of
    one NVLink domain, and the traffic between boxes (InfiniBand / RoCE) is not modelled; else None."""
    text = (acc.interconnect.value if acc.interconnect is not None else "") or ""
    n = lay.stage_gpus
    if ic != "nvlink" or n <= BASEBOARD_GPUS or "nvl72" in text.lower().replace(" ", ""):
        return None
    return CrossesBaseboard(n, acc.name, BASEBOARD_GPUS)


# ----------------------------------------------------------------------------------------------------------------------
# What-if table
# ----------------------------------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class CompareCell:
    """One (layout, batch) cell: the plan, or why there is none (a layout the model rejects)."""

    layout: str
    batch: int
    plan: Plan | None = None
    error: str = ""

    def to_dict(self) -> dict:
        if self.plan is None:
            return {"layout": self.layout, "batch": self.batch, "error": self.error}
        p = self.plan
        return {"layout": self.layout, "batch": self.batch, "step_s": p.step_s, "tokens_per_s": p.tokens_per_s,
                "tokens_per_s_per_gpu": p.tokens_per_s_per_gpu, "fits": p.memory.fits,
                "memory_per_gpu_bytes": p.memory.total, "over_bytes": p.memory.over,
                "communication_share": p.time_by_bound()["communication"] / p.step_s,
                "bound": max(("compute", "memory", "communication"), key=lambda k: p.time_by_bound()[k])}


def compare(model, acc, layouts, batches, **kw) -> list[CompareCell]:
    """Plans for every layout × batch (a layout the model rejects gives cells with its error, not an exception).

    ``layouts``: Layout objects or strings; ``batches``: ints; ``kw``: as :func:`plan` (formats resolved once).

    Raises:
        TruepeakError: a batch or context :func:`plan` refuses (checked before any cell is planned), a layout string
            that does not parse, or any other error of :func:`plan` but a :class:`~truepeak.moe.layout.LayoutError`.
    """
    for b in batches:
        check_batch(b)
    check_context(kw.get("context", DEFAULT_CONTEXT))
    if not kw.get("formats"):
        w = choose_weights(model, kw.get("weights")).format
        kw["formats"] = resolve_formats(acc, w, kw.pop("activations", None), kw.pop("kv_cache", None),
                                        weight_block_size=checkpoint_block_size(model, w))
    else:
        for k in ("activations", "kv_cache"):
            kw.pop(k, None)
    cells = []
    for lay in layouts:
        lay = parse_layout(lay) if isinstance(lay, str) else lay
        for b in batches:
            try:
                cells.append(CompareCell(lay.name, b, plan(model, acc, lay, b, **kw)))
            except LayoutError as exc:
                cells.append(CompareCell(lay.name, b, None, str(exc)))
    return cells


def default_compare_layouts(model, n_gpus: int) -> list[Layout]:
    """The default what-if layouts for ``n_gpus`` (:func:`truepeak.moe.layout.default_layouts`, 6 at most)."""
    return default_layouts(n_gpus, model)


__all__ = ["DEFAULT_CONTEXT", "DEFAULT_COMPARE_BATCHES", "SMALL_BATCH", "MAJOR_SHARE", "MAX_BATCH", "BASEBOARD_GPUS",
           "FORMAT_GROUPS", "InterconnectChoice", "RoutingFacts", "MemoryFit", "Plan", "CompareCell", "WeightsChoice",
           "interconnect_of", "plan", "compare", "default_compare_layouts", "check_batch", "check_context",
           "checkpoint_block_size", "context_warning", "choose_weights", "weights_note", "pcie_flag",
           "baseboard_flag"]
