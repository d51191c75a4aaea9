"""What ``truepeak moe plan`` computes, as one call: a model on a GPU type, plans at several batches, an optional
what-if table, and the warnings about the input (:func:`plan_set` → :class:`PlanSet`).

Warnings (:mod:`truepeak.moe.findings`) are for input that is planned anyway but may not be what was meant:

- a context above the model's ``max_position_embeddings`` (:class:`~truepeak.moe.findings.ContextAboveLimit`);
- a what-if layout whose GPU count differs from the plan's (:class:`~truepeak.moe.findings.CompareOtherGpus`), one
  per such layout. Decision: warn, do not refuse. A layout that contradicts the GPU count is refused because the one
  detailed plan must have one GPU count; a what-if row on another GPU count is a legitimate question (is tp4 on 4
  GPUs better per GPU than tp8 on 8?), each row is planned on its own layout's GPUs, and the warning says that its
  tokens/s total is for that many GPUs, so the rows are compared per GPU.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from truepeak.errors import TruepeakError
from truepeak.moe.findings import CompareOtherGpus, Finding
from truepeak.moe.layout import Layout, LayoutError, check_layout, default_layouts, parse_layout, parse_layouts
from truepeak.moe.plan.compare import DEFAULT_COMPARE_BATCHES, CompareCell, default_compare_layouts
from truepeak.moe.plan.compare import compare as compare_cells
from truepeak.moe.plan.flags import context_warning
from truepeak.moe.plan.planner import DEFAULT_CONTEXT, plan
from truepeak.moe.plan.result import Plan
from truepeak.moe.plan.weights import plan_formats


@dataclass(frozen=True)
class PlanSet:
    """Plans of one model on one GPU type (:func:`plan_set`).

    Attributes:
        model: the :class:`truepeak.moe.config.MoEModel`. accelerator: the
            :class:`truepeak.hardware.catalog.Accelerator`.
        layout: the layout of the detailed plans. plans: one :class:`Plan` per batch, in the order asked.
        layouts, batches, cells: the what-if table (its layouts, batches and :class:`CompareCell` list), or None.
        measured: the :class:`truepeak.moe.measured.MeasuredTables` used, or None.
        warnings: findings about the input, planned anyway (module docstring).
        levers: per plan, its ranked :class:`~truepeak.moe.plan.levers.Lever` list (empty when not asked for).
    """

    model: object
    accelerator: object
    layout: Layout
    plans: tuple[Plan, ...]
    layouts: tuple[Layout, ...] | None = None
    batches: tuple[int, ...] | None = None
    cells: tuple[CompareCell, ...] | None = None
    measured: object = None
    warnings: tuple[Finding, ...] = ()
    levers: tuple[tuple, ...] = ()


def default_layout(model, n_gpus: int, for_compare: bool = False) -> Layout:
    """``tp<n_gpus>`` when ``model`` divides by it; otherwise, ``for_compare``, the first default layout of ``n_gpus``
    GPUs that fits (the what-if table is what was asked for), and without it an error naming the layouts that fit.

    Raises:
        LayoutError: ``tp<n_gpus>`` does not fit and neither does any default layout, or (not ``for_compare``) it does
            not fit: the message names the layouts of ``n_gpus`` GPUs that do.
    """
    lay = parse_layout(f"tp{n_gpus}")
    try:
        check_layout(model, lay)
        return lay
    except LayoutError as exc:
        fits = []
        for cand in default_layouts(n_gpus, model):
            try:
                check_layout(model, cand)
                fits.append(cand)
            except LayoutError:
                pass
        if not fits:
            raise
        if for_compare:
            return fits[0]
        raise LayoutError(f"{exc}; layouts of {n_gpus} GPUs that fit: {', '.join(l.name for l in fits)} (pass one "
                          "with --layout, or --compare for all of them)") from None


def plan_set(model, gpu, *, gpus: int | None = None, layout: Layout | str | None = None,
             batches: Sequence[int] = (1,), context: int = DEFAULT_CONTEXT, weights: str | None = None,
             activations: str | None = None, kv_cache: str | None = None, routing="uniform", compare: bool = False,
             compare_layouts: Sequence[Layout | str] | None = None, compare_batches: Sequence[int] | None = None,
             measured=None, interconnect: str | None = None, calibration=None, eager: bool = False, mtp=None,
             expert_kernel: str = "library", with_levers: bool = False, network=None) -> PlanSet:
    """Plan ``model`` on ``gpu`` at every batch of ``batches``, and, with ``compare``, a what-if table.

    Args:
        model: a :class:`truepeak.moe.config.MoEModel`, or what :func:`truepeak.moe.config.load_model` reads (a
            config.json path or folder, a preset, a hub id).
        gpu: an accelerator, or a name :func:`truepeak.hardware.lookup.get_accelerator` knows; a device string as
            torch reports it also names the tuned-config files.
        gpus: the GPU count: the detailed plans run on ``tp<gpus>`` (or, when the model does not divide by it, on
            the layouts :func:`default_layout` allows); default 1, or ``layout``'s count.
        layout: the layout of the detailed plans (a :class:`Layout` or a string); must use ``gpus`` GPUs when both
            are given.
        batches: decode batches, one plan each (each >= 1). context: tokens in each sequence's KV cache.
        weights, activations, kv_cache, routing, interconnect: as :func:`truepeak.moe.plan.plan` (formats resolved
            once for all plans).
        compare: plan the what-if table: ``compare_layouts`` (default: the default layouts of the plan's GPU count)
            × ``compare_batches`` (default :data:`DEFAULT_COMPARE_BATCHES`).
        measured: :class:`truepeak.moe.measured.MeasuredTables`, JSON Lines paths to load them from, or None; from
            paths, records measured on another device than ``gpu`` are left out with a
            :class:`~truepeak.moe.findings.MeasuredOtherDevices` warning.
        calibration: a :class:`truepeak.moe.calibration.Calibration`, a calibration file path, or None (the shipped
            default); a file measured on another GPU than ``gpu`` adds a
            :class:`~truepeak.moe.findings.CalibrationCarriedOver` warning.
        eager, mtp, expert_kernel: as :func:`~truepeak.moe.plan.plan`; a model with MTP layers planned without
            ``mtp`` adds a :class:`~truepeak.moe.findings.MtpNotModelled` warning.
        with_levers: rank the levers of every plan (:func:`truepeak.moe.plan.levers.levers`).
        network: a :class:`truepeak.moe.plan.network.Network` for a layout over several nodes, or None.

    Raises:
        TruepeakError: a layout that uses another GPU count than ``gpus``, a GPU count < 1, and whatever
            :func:`~truepeak.moe.plan.plan`, :func:`~truepeak.moe.plan.compare`, the model loader, the accelerator
            lookup or the measured-data loader raise (UnknownNameError for unknown names; LayoutError for layouts
            the model cannot be split into).
    """
    from truepeak.hardware.lookup import get_accelerator
    from truepeak.moe.config import load_model
    from truepeak.moe.measured import MeasuredTables, load_measured

    name = gpu if isinstance(gpu, str) else None
    acc = get_accelerator(gpu) if isinstance(gpu, str) else gpu
    mdl = load_model(model) if isinstance(model, str) or hasattr(model, "__fspath__") else model
    if layout is not None:
        lay = parse_layout(layout) if isinstance(layout, str) else layout
        if gpus is not None and gpus != lay.gpus:
            raise TruepeakError(f"layout {lay.name} uses {lay.gpus} GPUs, not the {gpus} given")
    else:
        if gpus is not None and (isinstance(gpus, bool) or not isinstance(gpus, int) or gpus < 1):
            raise TruepeakError(f"GPU count {gpus!r} must be a whole number >= 1")
        lay = default_layout(mdl, gpus or 1, compare)
    fmts = plan_formats(mdl, acc, weights, activations, kv_cache)
    warnings: list[Finding] = []
    above = context_warning(mdl, context)
    if above is not None:
        warnings.append(above)
    tables = measured if measured is None or isinstance(measured, MeasuredTables) else load_measured(measured, acc)
    if tables is not None and tables.other_devices:
        from truepeak.moe.findings import MeasuredOtherDevices

        warnings.append(MeasuredOtherDevices(acc.name, tuple(sorted(tables.other_devices.items(),
                                                                       key=lambda kv: -kv[1]))))
    from truepeak.moe.calibration import Calibration, carry_over, default_calibration, load_calibration
    from truepeak.moe.findings import CalibrationCarriedOver, MtpNotModelled
    from truepeak.moe.plan.levers import levers as rank_levers

    cal = (calibration if isinstance(calibration, Calibration) else
           load_calibration(calibration) if calibration is not None else default_calibration())
    carry = carry_over(cal, acc)
    if calibration is not None and not carry.same_device:
        warnings.append(CalibrationCarriedOver(acc.name, cal.device, cal.source, carry.ratio, carry.link_ratio,
                                               carry.native_fp4, True))
    if mtp is None and getattr(mdl, "num_mtp_layers", 0):
        warnings.append(MtpNotModelled(mdl.name, mdl.num_mtp_layers))
    kw = dict(context=context, routing=routing, measured=tables, interconnect=interconnect, weights=weights,
              formats=fmts, device_name=name if name in acc.device_names else None, calibration=cal, eager=eager,
              expert_kernel=expert_kernel, mtp=mtp, network=network)
    plans = tuple(plan(mdl, acc, lay, b, **kw) for b in batches)
    lkw = {**{k: v for k, v in kw.items() if k != "calibration"}, "activations": activations, "kv_cache": kv_cache}
    lv = tuple(tuple(rank_levers(p, mdl, acc, cal, **lkw)) for p in plans) if with_levers else ()
    if not compare:
        return PlanSet(mdl, acc, lay, plans, measured=tables, warnings=tuple(warnings), levers=lv)
    layouts = (parse_layouts(compare_layouts) if isinstance(compare_layouts, str) else
               [parse_layout(x) if isinstance(x, str) else x for x in compare_layouts] if compare_layouts else
               default_compare_layouts(mdl, lay.gpus))
    cmp_batches = tuple(compare_batches) if compare_batches else DEFAULT_COMPARE_BATCHES
    warnings += [CompareOtherGpus(x.name, x.gpus, lay.gpus, gpus is not None) for x in layouts if x.gpus != lay.gpus]
    cells = compare_cells(mdl, acc, layouts, cmp_batches, **kw)
    return PlanSet(mdl, acc, lay, plans, tuple(layouts), cmp_batches, tuple(cells), tables, tuple(warnings), lv)


__all__ = ["PlanSet", "default_layout", "plan_set"]
