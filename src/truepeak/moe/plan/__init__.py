"""The MoE decode step model: model × accelerator × layout × batch → per-op times, communication, tokens/s, bottleneck.

Pure Python (no torch, no numpy at import). :func:`plan` predicts one decode step and returns a :class:`Plan`: the
ops of one GPU of the slowest pipeline stage with their FLOP, bytes and times, the step time and tokens/s, memory per
GPU, the routing facts, and what the planner concludes as findings (:mod:`truepeak.moe.findings`);
:func:`compare` plans a what-if table over layouts × batches. :mod:`truepeak.report.plan` renders them.

Modules, one concept each:

- :mod:`~truepeak.moe.plan.step`: the decode step model (the ops of a step, its collectives, the pipeline);
- :mod:`~truepeak.moe.plan.routing_facts`: the routing facts of one MoE layer at a micro-batch;
- :mod:`~truepeak.moe.plan.memory`: memory per GPU (:class:`MemoryFit`);
- :mod:`~truepeak.moe.plan.weights`: the weight format and where it came from (:class:`WeightsChoice`);
- :mod:`~truepeak.moe.plan.interconnect`: NVLink or PCIe (:class:`InterconnectChoice`);
- :mod:`~truepeak.moe.plan.flags`: the PCIe communication flag, collectives beyond a baseboard, the context limit;
- :mod:`~truepeak.moe.plan.result`: :class:`Plan`, its bottleneck and conclusions;
- :mod:`~truepeak.moe.plan.planner`: :func:`plan` and its input checks;
- :mod:`~truepeak.moe.plan.compare`: the what-if table;
- :mod:`~truepeak.moe.plan.plan_set`: what ``truepeak moe plan`` computes, in one call (:func:`plan_set`).
"""

from truepeak.moe.plan.compare import DEFAULT_COMPARE_BATCHES, CompareCell, compare, default_compare_layouts
from truepeak.moe.plan.flags import (BASEBOARD_GPUS, MAJOR_SHARE, SMALL_BATCH, baseboard_flag, context_warning,
                                     pcie_flag)
from truepeak.moe.plan.interconnect import InterconnectChoice, interconnect_of
from truepeak.moe.plan.memory import MemoryFit, memory_fit
from truepeak.moe.plan.plan_set import PlanSet, default_layout, plan_set
from truepeak.moe.plan.planner import DEFAULT_CONTEXT, MAX_BATCH, check_batch, check_context, plan
from truepeak.moe.plan.result import Plan
from truepeak.moe.plan.routing_facts import RoutingFacts, clear_routing_cache
from truepeak.moe.plan.weights import FORMAT_GROUPS, WeightsChoice, checkpoint_block_size, choose_weights, weights_note

__all__ = ["DEFAULT_CONTEXT", "DEFAULT_COMPARE_BATCHES", "SMALL_BATCH", "MAJOR_SHARE", "MAX_BATCH", "BASEBOARD_GPUS",
           "FORMAT_GROUPS", "InterconnectChoice", "RoutingFacts", "MemoryFit", "Plan", "CompareCell", "WeightsChoice",
           "interconnect_of", "plan", "compare", "default_compare_layouts", "check_batch", "check_context",
           "checkpoint_block_size", "context_warning", "choose_weights", "weights_note", "pcie_flag",
           "baseboard_flag", "memory_fit", "clear_routing_cache", "PlanSet", "plan_set", "default_layout"]
