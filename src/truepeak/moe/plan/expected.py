"""The expected decode step: what a serving engine measures, beside the roofline ceiling (:func:`expected_step`).

Pure Python. The roofline plan times every op at the peak of its format or the catalog bandwidth; real servers reach
a fraction of that. The expected step re-times the same ops with what the GPU achieves at those shapes, measured
(:mod:`truepeak.moe.calibration`), and adds what the roofline leaves out:

- **GEMMs** (attention projections, router, shared experts, dense MLPs, lm_head):
  ``max(bytes / (B × f_gemm(format, M, N·K)), FLOP / (peak × f_compute))``, B the read bandwidth the calibration
  applies to this GPU (:class:`~truepeak.moe.calibration.CarryOver`), ``f_gemm`` the measured cuBLAS fraction of the
  read bandwidth at that M and weight size, ``f_compute`` the best measured compute fraction of that format.
- **Routed experts**: ``max(bytes / (B × f_expert(format, tokens per expert, local experts)), FLOP / (peak ×
  f_compute))`` with the measured fraction of the stock library kernel (``expert_kernel="library"``: torch's grouped /
  batched GEMMs; fp4 on Hopper was measured with truepeak's Triton kernel only, which is then used).
- **Attention over the KV cache**: ``bytes / (B × f_attention(bytes))`` (measured SDPA decode; MLA and sliding
  windows take the same fraction at the same bytes, an assumption).
- **Collectives**: the measured time per call at the nccl-tests size S' = S × factor(op, n) / factor(op, n_measured)
  (equal bus bandwidth per GPU inside one NVLink / NVSwitch domain) × the NVLink size ratio of the carry-over; on
  PCIe, and between nodes (:mod:`truepeak.moe.plan.network`), the plan's α–β time (neither was measured). The EP dispatch carries the GEMM activation format when it is 8-bit
  (DeepEP's fp8 dispatch), the combine bf16.
- **Small kernels** (:mod:`truepeak.moe.plan.kernels`): norms, RoPE, quantisation, top-k, alignment, KV writes,
  sampling, each one kernel at its bytes.
- **Launches**: every kernel costs at least one kernel's fixed cost, inside a CUDA graph (1.15 µs on the H200) or,
  ``eager``, launched from the host (11.4 µs: a kernel shorter than that leaves the GPU waiting); collectives then
  take the eager curve.

``gap`` says where ``expected − ceiling`` goes: kernel launches (the floors), small ops, GEMM / expert / attention
efficiency, communication (negative where the measured collective beats the α–β default) and the pipeline bubble.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from truepeak.moe.calibration import Calibration, CarryOver, carry_over
from truepeak.moe.ops import OpCost
from truepeak.moe.plan.kernels import SmallKernel, attention_kernels, dense_kernels, moe_kernels, step_kernels

#: The parts of the gap between the ceiling and the expected step, in display order.
GAP_PARTS = ("kernel_launches", "small_ops", "gemm_efficiency", "expert_efficiency", "attention_efficiency",
             "communication", "pipeline_bubble")
_GEMM_GROUPS = ("attention", "router", "shared_experts", "dense_mlp", "lm_head")


@dataclass(frozen=True)
class ExpectedStep:
    """The expected decode step of one plan (:func:`expected_step`). Seconds, tokens/s, fractions.

    Attributes:
        step_s: expected seconds per step. ceiling_s: the roofline seconds of the same step (the plan's
            ``step_s``, or with MTP the composed ceiling).
        batch: sequences; gpus: GPUs of the layout; tokens_per_step: tokens each sequence gains per step (1, or
            ``1 + Σ P^i`` with MTP).
        by_group: expected seconds per op group (:data:`truepeak.moe.ops.GROUPS`) plus ``"small_ops"``.
        gap: :data:`GAP_PARTS` → seconds of ``step_s − ceiling_s``.
        kernels: kernels per step (plan ops' calls + small kernels; a collective counts one).
        expert_fraction: roofline / expected time of the routed experts (None without them).
        eager: no CUDA graph. calibration: the calibration's source. carry: how it applies to this GPU.
        expert_kernel: the expert kernel whose fractions were used (``"library"`` or ``"truepeak_triton"``).
        op_s: op name → expected seconds per call (the plan's ops).
        mtp: the :class:`~truepeak.moe.plan.mtp.MtpSetting`, or None.
        assumptions: findings the expected step rests on
            (:class:`~truepeak.moe.findings.CalibrationCarriedOver` for a GPU never measured).
    """

    step_s: float
    ceiling_s: float
    batch: int
    gpus: int
    tokens_per_step: float
    by_group: dict
    gap: dict
    kernels: int
    expert_fraction: float | None
    eager: bool
    calibration: str
    carry: CarryOver
    expert_kernel: str
    op_s: dict = field(default_factory=dict)
    mtp: object = None
    assumptions: tuple = ()

    @property
    def tokens_per_s(self) -> float:
        """Expected output tokens per second of the layout: batch × tokens per step / step."""
        return self.batch * self.tokens_per_step / self.step_s

    @property
    def ceiling_tokens_per_s(self) -> float:
        return self.batch * self.tokens_per_step / self.ceiling_s

    @property
    def of_ceiling(self) -> float:
        """Expected tokens/s over the ceiling's."""
        return self.ceiling_s / self.step_s

    def to_dict(self) -> dict:
        return {"expected_step_s": self.step_s, "expected_tokens_per_s": self.tokens_per_s,
                "expected_tokens_per_s_per_gpu": self.tokens_per_s / self.gpus,
                "ceiling_step_s": self.ceiling_s, "ceiling_tokens_per_s": self.ceiling_tokens_per_s,
                "expected_over_ceiling": self.of_ceiling, "tokens_per_step": self.tokens_per_step,
                "expected_time_by_group_s": dict(self.by_group), "gap_s": dict(self.gap),
                "kernels_per_step": self.kernels, "expert_roofline_fraction": self.expert_fraction,
                "eager": self.eager, "calibration": self.calibration, "carry_over": self.carry.to_dict(),
                "expert_kernel": self.expert_kernel, "expected_op_s": dict(self.op_s),
                "mtp": None if self.mtp is None else self.mtp.to_dict(),
                "assumptions": [a.to_dict() for a in self.assumptions]}


class _Timer:
    """Expected seconds of single ops under one calibration, GPU and mode (internal)."""

    def __init__(self, cal: Calibration, acc, formats, carry: CarryOver, eager: bool, expert_kernel: str,
                 interconnect: str):
        self.cal, self.acc, self.f, self.c, self.eager = cal, acc, formats, carry, eager
        self.kernel = expert_kernel
        self.ic = interconnect
        self.floor = cal.kernel_s(eager)
        self.used_kernel = expert_kernel
        self.expert_override: float | None = None

    def _fmt_key(self, op: OpCost) -> tuple[str, str | None, float]:
        """(format name, scaling, dense peak) of a GEMM op's weights: bf16 when its weights take 2 B per value."""
        d = op.detail
        values = float(d.get("n", 0)) * d.get("k", 0) * d.get("batch", 1)
        f = self.f.for_group(op.group)
        if values and op.weight_bytes / values >= 1.9:
            return "bf16", None, f.bf16_peak
        return f.weights.name, f.weight_scaling, f.gemm_peak

    def gemm(self, op: OpCost) -> float:
        d = op.detail
        if not op.bytes or "n" not in d:
            return op.time_s
        fmt, scaling, peak = self._fmt_key(op)
        key = self.cal.gemm_key(fmt, scaling)
        frac = self.cal.gemm_fraction(key, float(d["m"]), int(d["n"]), int(d["k"]) * int(d.get("batch", 1)))
        return max(op.bytes / (self.c.bandwidth * frac), op.flop / (peak * self.cal.compute_fraction(key)))

    def experts(self, op: OpCost, local_experts: int) -> float:
        d = op.detail
        fe = self.f.for_group("routed_experts")
        fmt = fe.weights.name
        if fmt in self.c.native_fp4:
            fmt = "fp8_e4m3"
        hit = self.cal.expert_table(self.kernel, fmt) or self.cal.expert_table(self.kernel, "fp8_e4m3")
        if hit is None:
            return op.time_s
        self.used_kernel = hit[0]
        tpe = d.get("pairs", 0.0) / max(1, local_experts)
        frac = self.expert_override or self.cal.expert_fraction(hit[0], hit[1], max(tpe, 1e-9), local_experts)
        key = self.cal.gemm_key(fmt, fe.weight_scaling)
        return max(op.bytes / (self.c.bandwidth * frac), op.flop / (fe.gemm_peak * self.cal.compute_fraction(key)))

    def attention(self, op: OpCost) -> float:
        frac = self.cal.attention_fraction(op.bytes)
        return max(op.bytes / (self.c.bandwidth * frac), op.time_s)

    def collective(self, op: OpCost) -> float:
        from truepeak.comm.model import busbw_factor

        d = op.detail
        name, n = d.get("collective", "all_reduce"), int(d.get("ranks", 2))
        if op.measured or self.ic != "nvlink" or d.get("network"):
            return op.time_s
        measured_op = name if name in ("all_reduce", "all_gather", "reduce_scatter", "all_to_all") else "all_gather"
        nbytes = op.bytes
        if d.get("where") == "dispatch" and self.f.activations.bits_per_value <= 8:
            nbytes *= self.f.activations.bytes_per_value * (1 + 4 / 128) / 2
        f_n = busbw_factor(measured_op, n)
        f_m = busbw_factor(measured_op, self.cal.collective_ranks)
        t = self.cal.collective_s(measured_op, nbytes * (f_n / f_m if f_m else 1.0) * self.c.link_ratio, self.eager)
        return op.time_s if t is None else t

    def small(self, k: SmallKernel) -> float:
        t = self.cal.argmax_s(k.rows, k.cols) if k.kind == "argmax" else self.cal.elementwise_s(k.bytes)
        return t


def _small_kernels(model, op: OpCost, plan) -> list[SmallKernel]:
    """The small kernels that run once per call of ``op`` (the op that closes their block)."""
    d, f = op.detail, plan.formats
    eight = f.activations.bits_per_value <= 8
    kvb = f.kv_cache.bytes_per_value
    t = float(d.get("m", 0) or 0)
    a = model.attention
    if op.group == "attention" and op.name == "o_proj":
        kind = "mla" if a.kind == "mla" else "gqa"
        per_head = a.v_head_dim if kind == "mla" else a.head_dim
        return attention_kernels(model, kind, t, max(1, int(d["k"]) // per_head), eight, kvb)
    if op.group == "attention" and op.name == "linear-attn out_proj":
        return attention_kernels(model, "linear", t, 0, eight, kvb)
    if op.group == "router":
        shared = next((o for o in plan.ops if o.name == "shared expert gate+up"), None)
        return moe_kernels(model, t, int(shared.detail["n"]) // 2 if shared else 0, eight)
    if op.group == "dense_mlp" and op.name == "dense MLP gate+up":
        return dense_kernels(model, t, int(d["n"]) // 2, eight)
    if op.group == "lm_head" and "n" in d:
        return step_kernels(model, t, int(d["n"]))
    return []


def expected_step(plan, model, acc, cal: Calibration, *, eager: bool = False, expert_kernel: str = "library",
                  mtp=None, small_ops: bool = True, expert_fraction: float | None = None) -> ExpectedStep:
    """The expected step of ``plan`` (a :class:`truepeak.moe.plan.Plan` of ``model`` on ``acc``) under calibration
    ``cal`` (module docstring for every term). ``mtp`` is only recorded here (:func:`truepeak.moe.plan.mtp.compose`
    composes the MTP step). What-ifs of the levers (:mod:`truepeak.moe.plan.levers`): ``small_ops=False`` leaves the
    small kernels out (fused away); ``expert_fraction`` replaces the measured expert fraction of the read bandwidth
    (1.0: an expert kernel at the read roofline)."""
    carry = carry_over(cal, acc)
    tm = _Timer(cal, acc, plan.formats, carry, eager, expert_kernel, plan.interconnect)
    tm.expert_override = expert_fraction
    local = (model.experts.num_experts // plan.layout.ep) if model.num_moe_layers else 1
    by_group: dict[str, float] = {}
    gap = {k: 0.0 for k in GAP_PARTS}
    op_s: dict[str, float] = {}
    kernels = 0
    exp_roof = exp_exp = 0.0
    for op in plan.ops:
        if op.measured and op.group != "communication":
            t = op.time_s
            part = None
        elif op.group == "communication":
            t, part = tm.collective(op), "communication"
        elif op.group == "routed_experts":
            t, part = tm.experts(op, local), "expert_efficiency"
        elif op.group == "kv_cache":
            t, part = tm.attention(op), "attention_efficiency"
        elif op.group in _GEMM_GROUPS:
            t, part = tm.gemm(op), "gemm_efficiency"
        else:
            t, part = op.time_s, None
        floor = tm.floor if op.group != "communication" else 0.0
        floored = max(t, floor)
        op_s[op.name] = floored
        by_group[op.group] = by_group.get(op.group, 0.0) + floored * op.calls
        if part is not None:
            gap[part] += (t - op.time_s) * op.calls
        gap["kernel_launches"] += (floored - t) * op.calls
        if op.group == "routed_experts":
            exp_roof += op.time_s * op.calls
            exp_exp += floored * op.calls
        kernels += op.calls
        for k in (_small_kernels(model, op, plan) if small_ops else ()):
            ts = tm.small(k)
            tf = max(ts, tm.floor)
            by_group["small_ops"] = by_group.get("small_ops", 0.0) + tf * op.calls
            gap["small_ops"] += ts * op.calls
            gap["kernel_launches"] += (tf - ts) * op.calls
            kernels += op.calls
    ops_roof = sum(op.total_s for op in plan.ops)
    ops_exp = sum(by_group.values())
    bubble = plan.bubble_s * (ops_exp / ops_roof if ops_roof else 1.0)
    gap["pipeline_bubble"] = bubble - plan.bubble_s
    step = ops_exp + bubble
    return ExpectedStep(step, plan.step_s, plan.batch, plan.layout.gpus, 1.0, by_group, gap, kernels,
                        exp_roof / exp_exp if exp_exp else None, eager, cal.source, carry, tm.used_kernel, op_s, mtp)


__all__ = ["GAP_PARTS", "ExpectedStep", "expected_step"]
