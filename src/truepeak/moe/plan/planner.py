"""Planning one decode step: validate the input, choose formats and interconnect, build the step, collect the
findings (:func:`plan`)."""

from __future__ import annotations

from dataclasses import replace

from truepeak.errors import ConfigError, TruepeakError
from truepeak.moe.findings import CalibrationCarriedOver
from truepeak.moe.layout import Layout, check_layout, parse_layout
from truepeak.moe.ops import Formats
from truepeak.moe.plan.flags import baseboard_flag, pcie_flag
from truepeak.moe.plan.interconnect import interconnect_of
from truepeak.moe.plan.memory import memory_fit
from truepeak.moe.plan.result import Plan
from truepeak.moe.plan.step import _Step
from truepeak.moe.plan.weights import choose_weights, parse_weights, plan_formats, weights_note
from truepeak.moe.tuned_configs import tuned_config_names

#: Default context length (tokens in each sequence's KV cache) when none is given.
DEFAULT_CONTEXT = 4096

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
         interconnect: str | None = None, device_name: str | None = None, formats: Formats | None = None,
         calibration=None, eager: bool = False, expert_kernel: str = "library", mtp=None, network=None) -> Plan:
    """Predict one decode step (the model: :mod:`truepeak.moe.plan.step`, :mod:`~truepeak.moe.plan.memory`,
    :mod:`~truepeak.moe.plan.weights`).

    Args:
        model: a :class:`truepeak.moe.config.MoEModel` (``load_model``).
        acc: a :class:`truepeak.hardware.catalog.Accelerator` (``get_accelerator``).
        layout: a :class:`Layout` or a layout string (``"tp8"``).
        batch: sequences decoding together (B >= 1).
        context: tokens in each sequence's KV cache (C >= 1).
        weights: weight format name, or per group (``"routed_experts=nvfp4,attention=fp8"``:
            :func:`~truepeak.moe.plan.weights.parse_weights`; groups not named keep the checkpoint's format), or None
            for the checkpoint's (:func:`choose_weights`: the format of the
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
        calibration: the :class:`truepeak.moe.calibration.Calibration` of the expected step
            (:mod:`truepeak.moe.plan.expected`); None: the shipped default (an H200, carried over to other GPUs).
        eager: the expected step without CUDA graphs (kernels launched from the host).
        expert_kernel: the routed-expert kernel whose measured fractions the expected step takes (``"library"``,
            ``"truepeak_triton"``).
        mtp: a :class:`truepeak.moe.plan.mtp.MtpSetting` (draft tokens and acceptance), or None: the expected step
            and its ceiling are composed as :func:`truepeak.moe.plan.mtp.compose` says; ``step_s`` stays the plain
            roofline step.
        network: a :class:`truepeak.moe.plan.network.Network` (``--nodes``): collectives spanning more GPUs than
            one node take its α–β; None: one node (beyond a baseboard, a flag says the traffic is not modelled).

    Raises:
        TruepeakError: a batch < 1, a context < 1, a layout that does not divide the model (which part), an accelerator
            without memory bandwidth; UnknownNameError for unknown formats; ConfigError for MTP on a model without
            MTP layers or an unknown expert kernel.
    """
    from truepeak.moe.calibration import EXPERT_KERNELS, carry_over, default_calibration
    from truepeak.moe.plan.expected import expected_step
    from truepeak.moe.plan.mtp import check_mtp, compose

    if expert_kernel not in EXPERT_KERNELS:
        raise ConfigError(f"expert kernel {expert_kernel!r} is not one of {', '.join(EXPERT_KERNELS)}",
                          field="expert_kernel")
    check_mtp(model, mtp)
    check_batch(batch)
    check_context(context)
    lay = parse_layout(layout) if isinstance(layout, str) else layout
    check_layout(model, lay)
    if acc.bandwidth_bytes_per_s is None:
        raise TruepeakError(f"{acc.name} has no memory bandwidth in the catalog; the roofline needs one")
    choice = choose_weights(model, parse_weights(weights)[0])
    if formats is not None and formats.weights.name != choice.format:
        choice = choose_weights(model, formats.weights.name)
    f = formats or plan_formats(model, acc, weights, activations, kv_cache)
    link = interconnect_of(acc, lay.stage_gpus, interconnect)    # the GPUs that run collectives together
    ic = link.kind
    st = _Step(model, acc, lay, batch, context, f, routing, measured, ic, network)
    ops, stage_s, trip_s = st.build()
    busy = st.n_mb * stage_s
    step_s = max(busy, trip_s)         # pipeline full: n_mb x slowest stage; else one micro-batch's trip

    flags = [pcie_flag(lay, ic, batch, ops, step_s), None if network is not None else baseboard_flag(acc, lay, ic)]
    notes = (*f.notes, *(n for n in flags if n is not None))
    dev = device_name or (acc.device_names[0] if acc.device_names else acc.name)
    names = tuned_config_names(model, lay, dev, f.weights.name, f.activations.name)
    memory = memory_fit(model, acc, lay, batch, context, f)
    cal = calibration if calibration is not None else default_calibration()
    carry = carry_over(cal, acc)
    assumed = () if carry.same_device else (
        CalibrationCarriedOver(acc.name, cal.device, cal.source, carry.ratio, carry.link_ratio, carry.native_fp4,
                               not cal.source.startswith("shipped")),)
    p = Plan(model.name, acc.name, lay, batch, context, f, ic, link, tuple(ops), step_s, step_s - busy,
             st.routing, memory, names, st.bw, notes, choice, weights_note(choice, model, f, memory))
    exp = replace(expected_step(p, model, acc, cal, eager=eager, expert_kernel=expert_kernel), assumptions=assumed)
    p = replace(p, expected=exp)
    if mtp is None:
        return p
    verify = plan(model, acc, lay, batch * (mtp.draft_tokens + 1), context=context, routing=routing,
                  measured=measured, interconnect=interconnect, device_name=device_name, formats=f, weights=weights,
                  calibration=cal, eager=eager, expert_kernel=expert_kernel, network=network)
    ceiling_s, expected_s = compose(p, verify, mtp, model.num_layers)
    v = verify.expected
    exp = replace(v, step_s=expected_s, ceiling_s=ceiling_s, batch=batch, tokens_per_step=mtp.tokens_per_step,
                  mtp=mtp)
    return replace(p, expected=exp)
