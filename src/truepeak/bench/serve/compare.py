"""The MoE planner's figures for a serving level: what ``truepeak moe plan`` predicts for the served model at a
decode batch equal to the level's concurrency (:func:`planner_figures`), and what to plan against
(:func:`planner_target`: the model, GPU type, GPU count and layout given, or read from the served model's name and the
GPU detected here).

This module is the one place the serving comparison reads the planner: today's plan result gives the roofline
ceiling (:attr:`truepeak.moe.plan.Plan.tokens_per_s`, batch / step); the expected figure and the largest lever are
None until the plan result carries them, and a report shows them as "n/a".
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from truepeak.errors import TruepeakError


@dataclass(frozen=True)
class PlannerFigures:
    """The planner at one batch: its roofline ``ceiling_tokens_per_s`` (output tokens per second of the whole layout,
    batch / predicted step), its ``expected_tokens_per_s`` and its ``largest_lever`` in words (None where the plan
    result has neither), and the ``layout`` planned."""

    ceiling_tokens_per_s: float
    expected_tokens_per_s: float | None = None
    largest_lever: str | None = None
    layout: str | None = None


@dataclass(frozen=True)
class PlannerTarget:
    """What to plan: the model (:class:`truepeak.moe.config.MoEModel`), the accelerator
    (:class:`truepeak.hardware.catalog.Accelerator`), the GPU count and layout (None: ``tp<gpus>`` or the default the
    planner picks), and ``source``: where each came from, in words."""

    model: object
    accelerator: object
    gpus: int | None
    layout: str | None
    source: str


def detected_gpu_name() -> str | None:
    """The name of GPU 0 as NVML reports it, or None without NVML or a GPU."""
    from truepeak.hardware import nvml

    info = nvml.device_info(0)
    return info.name if info is not None else None


def model_from_name(name: str | None) -> object | None:
    """The planner's model for a served model name that is a preset or a local config folder/file; else None."""
    from truepeak.moe.config import load_model, preset_names

    if not name:
        return None
    if name in preset_names() or (os.path.exists(name) and (Path(name).is_file()
                                                             or (Path(name) / "config.json").is_file())):
        try:
            return load_model(name)
        except TruepeakError:
            return None
    return None


def planner_target(model: str | None, gpu: str | None, gpus: int | None, layout: str | None,
                   served_model: str | None = None, detect: bool = True) -> tuple[PlannerTarget | None, str]:
    """Resolve what the serving levels are planned against, before any load is sent.

    Args:
        model: ``--model`` (a preset, a config.json or folder, a hub id); None: the served model's name when it is a
            preset or a local config.
        gpu: ``--gpu`` (a catalog name); None: the GPU NVML detects here (``detect``), for a server on this machine.
        gpus, layout: ``--gpus`` and ``--layout``; checked by the planner against the model.
        served_model: the name the server serves (``/v1/models``).

    Returns:
        The target, or None with the reason in words when there is nothing to plan (no model, no GPU).

    Raises:
        TruepeakError: a ``--model`` or ``--gpu`` given that the planner cannot read (UnknownNameError for names),
            a ``--layout`` that does not fit the model or contradicts ``--gpus``; as ``truepeak moe plan`` does.
    """
    from truepeak.hardware.lookup import get_accelerator, match_device_name
    from truepeak.moe.config import load_model

    notes = []
    if model is not None:
        mdl = load_model(model)
        notes.append(f"model {model}")
    else:
        mdl = model_from_name(served_model)
        if mdl is None:
            return None, ("no --model, and the served model's name is no preset or local config.json: give --model "
                          "(a preset or a config.json) for the planner's figures")
        notes.append(f"model {served_model} (the served model's config)")
    if gpu is not None:
        acc = get_accelerator(gpu)
        notes.append(f"GPU {acc.name}")
    else:
        name = detected_gpu_name() if detect else None
        acc = match_device_name(name) if name else None
        if acc is None:
            return None, (f"no --gpu, and {'the GPU detected here, ' + name + ', is not in the catalog' if name else 'no GPU was detected here'}: "
                          "give --gpu (e.g. h200) for the planner's figures")
        notes.append(f"GPU {acc.name} (detected)")
    target = PlannerTarget(mdl, acc, gpus, layout, ", ".join(notes))
    planner_figures(target, 1, 1)  # a layout that does not fit fails now, before the load
    return target, target.source


def planner_figures(target: PlannerTarget, batch: int, context: int) -> PlannerFigures:
    """The planner's figures for ``target`` at decode batch ``batch`` with ``context`` tokens per sequence.

    The ceiling is :attr:`truepeak.moe.plan.Plan.tokens_per_s` (batch / the roofline step time of
    :mod:`truepeak.moe.plan.step`); the expected figure is the plan's expected step (:mod:`truepeak.moe.plan.expected`), and the largest lever
    the key (:data:`truepeak.moe.plan.levers.LEVERS`) of the ranked lever with the largest tokens/s gain that fits.

    Raises:
        TruepeakError: what :func:`truepeak.moe.plan.plan_set` raises for this input.
    """
    from truepeak.moe.plan import plan_set

    ps = plan_set(target.model, target.accelerator, gpus=target.gpus, layout=target.layout, batches=(batch,),
                  context=context, with_levers=True)
    p = ps.plans[0]
    ranked = [lv for lv in (ps.levers[0] if ps.levers else ()) if lv.fits and lv.tokens_gain > 0]
    return PlannerFigures(ceiling_tokens_per_s=p.tokens_per_s, layout=ps.layout.name,
                          expected_tokens_per_s=None if p.expected is None else p.expected.tokens_per_s,
                          largest_lever=ranked[0].key if ranked else None)


__all__ = ["PlannerFigures", "PlannerTarget", "planner_figures", "planner_target", "detected_gpu_name",
           "model_from_name"]
