"""What the decode planner concludes, as data: one frozen dataclass per kind of finding, its values in SI units.

The planner (:mod:`truepeak.moe.plan`, :mod:`truepeak.moe.ops`) returns these; :mod:`truepeak.report.plan` says each
in words. Every finding has a ``KIND`` (a stable name, also the ``"kind"`` of :meth:`Finding.to_dict`) and the values
its sentence needs: seconds, bytes, FLOP/s, B/s, fractions, counts and names.

- The bottleneck of a step (one of): :class:`CommunicationBound`, :class:`MemoryBound`, :class:`ComputeBound`.
- Conclusions of a step: :class:`ExpertGemmIntensity`, :class:`AllReduceShare`, :class:`DoesNotFit`, and the flags:
  :class:`PcieCommunicationBound` (docs/method.md, 'Small-message latency'), :class:`CrossesBaseboard`.
- Notes on the formats (:func:`truepeak.moe.ops.resolve_formats`): :class:`ActivationsFallback`,
  :class:`WeightsDequantised`.
- The weight format: :class:`UnquantisedGroups` (one format covers weights the checkpoint keeps in bf16).
- Warnings about the input, planned anyway: :class:`ContextAboveLimit`, :class:`CompareOtherGpus`,
  :class:`MeasuredOtherDevices`.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import ClassVar


@dataclass(frozen=True)
class Finding:
    """Base of every finding: ``KIND`` names it; :meth:`to_dict` gives ``{"kind": KIND, field: value, ...}``."""

    KIND: ClassVar[str] = "finding"

    def to_dict(self) -> dict:
        """JSON-ready: the kind and every field (tuples as lists), SI units."""
        out: dict = {"kind": self.KIND}
        for f in fields(self):
            v = getattr(self, f.name)
            out[f.name] = list(v) if isinstance(v, tuple) else v
        return out


# -- the bottleneck of a step -----------------------------------------------------------------------------------------

@dataclass(frozen=True)
class CommunicationBound(Finding):
    """Collectives take the largest share of the step. ``collectives``: calls of all collectives per step;
    ``time_s``: their seconds per step; ``collective``, ``calls``, ``per_call_s``: the one that dominates (the
    all-reduces when they are at least half the communication, else the costliest); ``interconnect``: ``"pcie"``,
    ``"nvlink"``, or ``"network"`` when that collective crosses the network between nodes."""

    KIND: ClassVar[str] = "communication_bound"
    collectives: int
    time_s: float
    step_s: float
    collective: str
    calls: int
    per_call_s: float
    interconnect: str


@dataclass(frozen=True)
class MemoryBound(Finding):
    """Memory-bound ops take the largest share. ``bytes``: DRAM bytes of the memory-bound ops per step on one GPU;
    ``time_s``: their seconds; ``group``, ``group_s``: the op group (:data:`truepeak.moe.ops.GROUPS`) with the most
    time but communication, and its seconds; ``ridge_flop_per_byte``: the weight GEMMs' ridge;
    ``dp_attention_helps``: attention is tensor-parallel over more than one GPU without DP attention (MLA's latent
    cache is then replicated, so DP attention would shrink a KV-cache read)."""

    KIND: ClassVar[str] = "memory_bound"
    bytes: float
    bandwidth_B_per_s: float
    time_s: float
    step_s: float
    group: str
    group_s: float
    ridge_flop_per_byte: float
    dp_attention_helps: bool


@dataclass(frozen=True)
class ComputeBound(Finding):
    """Compute-bound ops take the largest share: ``group`` and ``group_s`` as :class:`MemoryBound`, at the dense
    ``peak_flop_per_s`` of ``compute_format``."""

    KIND: ClassVar[str] = "compute_bound"
    group: str
    group_s: float
    step_s: float
    peak_flop_per_s: float
    compute_format: str


# -- conclusions ------------------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class ExpertGemmIntensity(Finding):
    """Tokens per expert and where the routed-expert GEMMs sit on the roofline (docs/method.md, 'Worked example:
    GLM-5 on RTX PRO 6000'): T·k/E = ``tokens``·``top_k``/``num_experts`` on average, the busiest expert's tokens, the
    gate+up GEMM's FLOP per DRAM byte and per weight byte against the ridge of ``compute_format``; ``memory_bound``:
    the intensity is below the ridge."""

    KIND: ClassVar[str] = "expert_gemm_intensity"
    mean_tokens_per_expert: float
    tokens: int
    top_k: int
    num_experts: int
    busiest_expert_tokens: float
    flop_per_byte: float
    flop_per_weight_byte: float
    ridge_flop_per_byte: float
    compute_format: str
    memory_bound: bool


@dataclass(frozen=True)
class AllReduceShare(Finding):
    """The all-reduces of a step: ``calls`` in all (``layer_calls`` of them after attention and the MLP, 2 per
    layer), ``per_call_s`` each, ``time_s`` together; ``major``: at least
    :data:`truepeak.moe.plan.MAJOR_SHARE` of the step."""

    KIND: ClassVar[str] = "all_reduce_share"
    calls: int
    layer_calls: int
    per_call_s: float
    time_s: float
    step_s: float
    major: bool


@dataclass(frozen=True)
class PcieCommunicationBound(Finding):
    """More than two tensor-parallel GPUs over PCIe only (docs/method.md, 'Small-message latency'): TP ``tp_group``,
    collectives ``time_s`` of the ``step_s`` step at ``batch``; ``small_batch``: the batch is at most
    :data:`truepeak.moe.plan.SMALL_BATCH` (latency dominates), else collectives are a major share (bus bandwidth
    does)."""

    KIND: ClassVar[str] = "pcie_communication_bound"
    tp_group: int
    time_s: float
    step_s: float
    batch: int
    small_batch: bool


@dataclass(frozen=True)
class CrossesBaseboard(Finding):
    """A pipeline stage's ``stage_gpus`` GPUs exceed one NVLink baseboard of ``baseboard_gpus`` (``accelerator``):
    their collectives cross boxes, which the α–β defaults of one NVLink domain do not model."""

    KIND: ClassVar[str] = "crosses_baseboard"
    stage_gpus: int
    accelerator: str
    baseboard_gpus: int


@dataclass(frozen=True)
class DoesNotFit(Finding):
    """Weights + KV cache per GPU exceed the GPU's memory (``capacity_bytes``) by ``over_bytes``."""

    KIND: ClassVar[str] = "does_not_fit"
    total_bytes: float
    weights_bytes: float
    kv_cache_bytes: float
    capacity_bytes: float
    over_bytes: float
    accelerator: str


# -- the formats ------------------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class ActivationsFallback(Finding):
    """The ``requested`` activation format has no tensor-core path on ``accelerator``: activations run as ``used``."""

    KIND: ClassVar[str] = "activations_fallback"
    accelerator: str
    requested: str
    used: str


@dataclass(frozen=True)
class WeightsDequantised(Finding):
    """``accelerator`` (``architecture``) cannot compute in the weight format: the weights are dequantised inside the
    GEMM (Marlin-style W\\ ``weight_bits``\\ A\\ ``activation_bits``) and the GEMMs compute at the dense
    ``peak_flop_per_s`` of ``activations``; weight bytes stay ``bytes_per_value`` per value. ``reason``: ``"no_fp4"``
    (no fp4 tensor cores), ``"no_rate"`` (no tensor-core path for ``rate``), ``"no_block_scaling"`` (no hardware
    block scaling)."""

    KIND: ClassVar[str] = "weights_dequantised"
    accelerator: str
    architecture: str
    reason: str
    rate: str
    weights: str
    weight_bits: int
    activations: str
    activation_bits: int
    peak_flop_per_s: float
    bytes_per_value: float


# -- the weight format ------------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class UnquantisedGroups(Finding):
    """One weight format per plan covers op ``groups`` that the checkpoint leaves unquantised: they are planned in
    ``format`` like its ``quantised_groups``; ``plan_bytes`` per GPU here, ``bf16_bytes`` in bf16."""

    KIND: ClassVar[str] = "unquantised_groups"
    format: str
    groups: tuple[str, ...]
    quantised_groups: tuple[str, ...]
    plan_bytes: float
    bf16_bytes: float


# -- the expected step -------------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class CalibrationCarriedOver(Finding):
    """The expected step of ``accelerator`` uses a calibration measured on another GPU (``calibration``, read from
    ``source``; ``user_file``: given with ``--calibration`` rather than the shipped default), by the carry-over rule
    of :mod:`truepeak.moe.calibration`: fractions of the read bandwidth on the catalog bandwidth × ``ratio``, fixed
    costs in seconds, collective size terms × ``link_ratio``, ``native_formats`` at the measured fp8 fractions."""

    KIND: ClassVar[str] = "calibration_carried_over"
    accelerator: str
    calibration: str
    source: str
    ratio: float
    link_ratio: float
    native_formats: tuple[str, ...]
    user_file: bool


@dataclass(frozen=True)
class MtpNotModelled(Finding):
    """``model`` has ``layers`` MTP layers and no ``--mtp`` was given: a server that runs MTP gains more than one
    token per step, so the plain prediction is not its ceiling."""

    KIND: ClassVar[str] = "mtp_not_modelled"
    model: str
    layers: int


# -- warnings about the input -----------------------------------------------------------------------------------------

@dataclass(frozen=True)
class ContextAboveLimit(Finding):
    """``context`` exceeds ``model``'s ``max_position_embeddings`` (``limit``); planned anyway."""

    KIND: ClassVar[str] = "context_above_limit"
    context: int
    model: str
    limit: int


@dataclass(frozen=True)
class CompareOtherGpus(Finding):
    """A what-if layout on another GPU count (``layout_gpus``) than the plan's (``plan_gpus``; ``gpus_given``: set
    by ``--gpus`` rather than by the plan's layout); its row is planned on its own GPUs."""

    KIND: ClassVar[str] = "compare_other_gpus"
    layout: str
    layout_gpus: int
    plan_gpus: int
    gpus_given: bool


@dataclass(frozen=True)
class MeasuredOtherDevices(Finding):
    """``--measured`` records of other devices than ``accelerator`` were left out: ``devices`` holds ``(name,
    records)`` pairs, most records first."""

    KIND: ClassVar[str] = "measured_other_devices"
    accelerator: str
    devices: tuple[tuple[str, int], ...]


__all__ = ["Finding", "CommunicationBound", "MemoryBound", "ComputeBound", "ExpertGemmIntensity", "AllReduceShare",
           "PcieCommunicationBound", "CrossesBaseboard", "DoesNotFit", "ActivationsFallback", "WeightsDequantised",
           "UnquantisedGroups", "ContextAboveLimit", "CompareOtherGpus", "CalibrationCarriedOver", "MtpNotModelled",
           "MeasuredOtherDevices"]
