"""The what-if table: a plan for every layout × batch (:func:`compare`)."""

from __future__ import annotations

from dataclasses import dataclass

from truepeak.moe.layout import Layout, LayoutError, default_layouts, parse_layout
from truepeak.moe.plan.planner import DEFAULT_CONTEXT, check_batch, check_context, plan
from truepeak.moe.plan.result import Plan
from truepeak.moe.plan.weights import plan_formats

#: The batch sizes of a ``--compare`` table when none are given (8 sizes).
DEFAULT_COMPARE_BATCHES = (1, 2, 8, 16, 32, 64, 128, 512)


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
                "bound": max(("compute", "memory", "communication"), key=lambda k: p.time_by_bound()[k]),
                **({} if p.expected is None else {"expected_step_s": p.expected.step_s,
                                                  "expected_tokens_per_s": p.expected.tokens_per_s,
                                                  "ceiling_tokens_per_s": p.expected.ceiling_tokens_per_s})}


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
        kw["formats"] = plan_formats(model, acc, kw.get("weights"), kw.pop("activations", None),
                                     kw.pop("kv_cache", None))
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
