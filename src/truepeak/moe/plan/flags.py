"""The flags of a plan: more than two tensor-parallel GPUs over PCIe only, collectives beyond one NVLink baseboard,
and a context above the model's limit (:mod:`truepeak.moe.findings`)."""

from __future__ import annotations

from truepeak.moe.findings import ContextAboveLimit, CrossesBaseboard, PcieCommunicationBound
from truepeak.moe.layout import Layout

#: Batch at or below which TP > 2 on PCIe-only GPUs is flagged as communication-bound (docs/method.md, 'Small-message
#: latency').
SMALL_BATCH = 64
#: Share of the step above which communication is called a major share.
MAJOR_SHARE = 0.25


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


def context_warning(model, context: int) -> ContextAboveLimit | None:
    """:class:`~truepeak.moe.findings.ContextAboveLimit` when ``context`` exceeds the model's
    ``max_position_embeddings`` (the plan is still made: the KV cache and attention cost grow with C either way, but
    the model was not trained or configured for it), else None (within range, or a config that does not declare
    it)."""
    limit = getattr(model, "max_position_embeddings", None)
    if limit and context > limit:
        return ContextAboveLimit(context, model.name, limit)
    return None
