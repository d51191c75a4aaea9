"""Ranked levers: for one plan, the expected gain of each change a user can make, by re-planning with that one change
(:func:`levers`).

Pure Python. Each lever changes one thing and plans again (:func:`truepeak.moe.plan.plan`, or
:func:`truepeak.moe.plan.expected.expected_step` on the same ops for what only the expected step sees); its gain is
the expected tokens/s after over before. A lever that does not apply to the plan (CUDA graphs when the step already
replays one, MTP for a model without MTP layers, EP for a layout that already splits its experts, an fp8 KV cache
that is already fp8, fp4 weights that are already 4-bit, a layout the model does not divide into) is left out; with
MTP the levers that re-time only the expected step of one pass (fusing the small ops, a faster all-reduce, an expert
kernel at the roofline) are left out too, since the MTP step is composed of two passes.
Sorted by gain, largest first. :data:`truepeak.report.plan_expected.LEVER_WORDS` says what each assumes.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from truepeak.moe.layout import LayoutError, parse_layout

#: Every lever, in the order they are tried.
LEVERS = ("cuda_graphs", "fuse_small_ops", "faster_all_reduce", "ep", "dp_attention", "mtp", "fp8_kv_cache",
          "expert_roofline", "fp4_weights", "larger_batch")
#: The acceptance the MTP lever assumes (DeepSeek-V3 technical report, arXiv:2412.19437, section 5.4.3: 85-90 %).
MTP_ACCEPTANCE = 0.85
#: The share of the measured all-reduce time the faster-all-reduce lever assumes is left.
FASTER_ALL_REDUCE = 0.5


@dataclass(frozen=True)
class Lever:
    """One change and its expected effect. ``key``: one of :data:`LEVERS`; steps in seconds, rates in tokens/s of
    the layout (``tokens_per_s_after`` counts the GPUs of the changed plan); ``fits``: the changed plan fits in GPU
    memory."""

    key: str
    step_before_s: float
    step_after_s: float
    tokens_per_s_before: float
    tokens_per_s_after: float
    fits: bool = True

    @property
    def tokens_gain(self) -> float:
        """Expected tokens/s after / before − 1."""
        return self.tokens_per_s_after / self.tokens_per_s_before - 1.0

    def to_dict(self) -> dict:
        return {"lever": self.key, "step_before_s": self.step_before_s, "step_after_s": self.step_after_s,
                "tokens_per_s_before": self.tokens_per_s_before, "tokens_per_s_after": self.tokens_per_s_after,
                "tokens_per_s_gain": self.tokens_gain, "fits": self.fits}


def _scaled_collectives(plan, scale: float):
    """``plan`` with every all-reduce's time × ``scale`` and marked measured, so the expected step keeps it."""
    ops = []
    for op in plan.ops:
        if op.group == "communication" and op.detail.get("collective") == "all_reduce":
            e = plan.expected.op_s.get(op.name, op.time_s)
            op = replace(op, time_s=e * scale, source="measured: lever")
        ops.append(op)
    return replace(plan, ops=tuple(ops))


def levers(plan, model, acc, cal, **kw) -> list[Lever]:
    """The levers of ``plan`` (a :class:`truepeak.moe.plan.Plan` with an expected step, of ``model`` on ``acc``
    under calibration ``cal``), sorted by expected tokens/s gain; ``kw``: the :func:`truepeak.moe.plan.plan` keywords
    the plan was made with (``context``, ``routing``, ``formats``, ``eager``, ``mtp``, ...)."""
    from truepeak.moe.plan.expected import expected_step
    from truepeak.moe.plan.mtp import MtpSetting
    from truepeak.moe.plan.planner import plan as replan

    e = plan.expected
    eager = kw.get("eager", False)
    base = dict(kw, calibration=cal)
    out: list[Lever] = []

    def add(key, p2=None, e2=None):
        e2 = e2 or p2.expected
        fits = p2.memory.fits if p2 is not None else plan.memory.fits
        out.append(Lever(key, e.step_s, e2.step_s, e.tokens_per_s, e2.tokens_per_s, fits))

    def again(change: dict, layout=None, batch=None):
        args = dict(base, **change)
        try:
            return replan(model, acc, layout or plan.layout, batch or plan.batch, **args)
        except LayoutError:
            return None

    if eager:
        add("cuda_graphs", again({"eager": False}))
    if e.mtp is None:
        add("fuse_small_ops", e2=expected_step(plan, model, acc, cal, eager=eager, small_ops=False))
        if any(op.detail.get("collective") == "all_reduce" for op in plan.ops):
            add("faster_all_reduce", e2=expected_step(_scaled_collectives(plan, FASTER_ALL_REDUCE), model, acc, cal,
                                                      eager=eager))
        add("expert_roofline", e2=expected_step(plan, model, acc, cal, eager=eager, expert_fraction=1.0)) \
            if model.num_moe_layers else None
    lay = plan.layout
    n = lay.stage_gpus
    if model.num_moe_layers and lay.ep == 1 and n > 1:
        for key, text in (("ep", f"ep{n}"), ("dp_attention", f"dp{n}ep{n}")):
            new = parse_layout(text + (f"pp{lay.pp}" if lay.pp > 1 else ""))
            p2 = again({}, layout=new)
            if p2 is not None:
                add(key, p2)
    elif model.num_moe_layers and lay.dp == 1 and n > 1:
        p2 = again({}, layout=parse_layout(f"dp{n}ep{n}" + (f"pp{lay.pp}" if lay.pp > 1 else "")))
        if p2 is not None:
            add("dp_attention", p2)
    if e.mtp is None and getattr(model, "num_mtp_layers", 0):
        add("mtp", again({"mtp": MtpSetting(1, MTP_ACCEPTANCE)}))
    f = plan.formats
    if f.kv_cache.bits_per_value > 8:
        add("fp8_kv_cache", again({"formats": None, "kv_cache": "fp8", "weights": kw.get("weights"),
                                   "activations": kw.get("activations")}))
    if f.weights.bits_per_value > 4.6:
        fp4 = "nvfp4" if acc.has_rate("nvfp4") else "mxfp4"
        add("fp4_weights", again({"formats": None, "weights": fp4, "kv_cache": f.kv_cache.name,
                                  "activations": kw.get("activations")}))
    add("larger_batch", again({}, batch=plan.batch * 2))
    return sorted(out, key=lambda lv: -lv.tokens_gain)


__all__ = ["LEVERS", "MTP_ACCEPTANCE", "FASTER_ALL_REDUCE", "Lever", "levers"]
