"""One decode-step prediction (:class:`Plan`): its ops and times, what dominates, what to conclude, as data."""

from __future__ import annotations

from dataclasses import dataclass

from truepeak.moe.findings import (AllReduceShare, CommunicationBound, ComputeBound, DoesNotFit, ExpertGemmIntensity,
                                   Finding, MemoryBound, UnquantisedGroups)
from truepeak.moe.layout import Layout
from truepeak.moe.ops import GROUPS, Formats, OpCost
from truepeak.moe.plan.flags import MAJOR_SHARE
from truepeak.moe.plan.interconnect import InterconnectChoice
from truepeak.moe.plan.memory import MemoryFit
from truepeak.moe.plan.routing_facts import RoutingFacts
from truepeak.moe.plan.weights import WeightsChoice
from truepeak.moe.tuned_configs import TunedConfigNames


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
        expected: the expected step beside this roofline ceiling
            (:class:`~truepeak.moe.plan.expected.ExpectedStep`), or None.
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
    expected: object = None

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
        """Collectives per step by op name: ``{name: {"calls", "time_s", "per_call_s", "ranks", "network"}}``
        (``network``: some of its calls cross the network between nodes, ``--nodes``)."""
        out: dict[str, dict] = {}
        for op in self.ops:
            if op.group != "communication":
                continue
            key = op.detail.get("collective", op.name)
            d = out.setdefault(key, {"calls": 0, "time_s": 0.0, "ranks": op.detail.get("ranks"), "network": False})
            d["network"] = d["network"] or bool(op.detail.get("network"))
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
                                      d["per_call_s"], "network" if d["network"] else self.interconnect)
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
            **({} if self.expected is None else {
                "expected_step_s": self.expected.step_s, "expected_tokens_per_s": self.expected.tokens_per_s,
                "expected_time_by_group_s": dict(self.expected.by_group), "expected": self.expected.to_dict()}),
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
