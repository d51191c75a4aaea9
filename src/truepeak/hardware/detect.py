"""Detect the device `truepeak run` measures: a CUDA GPU (through torch and NVML) or the host CPU.

:func:`detect` returns a :class:`DeviceInfo`: what the device itself reports (SM count, L2 size, opt-in shared memory
per block, memory, maximum SM clock) plus the catalog :class:`~truepeak.hardware.catalog.Accelerator` whose *dense*
peaks are the efficiency denominators.

GPUs: the name torch reports is matched to the catalog with :func:`truepeak.hardware.match_device_name`. A GPU the
catalog does not know is still measured, but gets an accelerator with **no peaks and no bandwidth**, so every efficiency
figure is left empty; truepeak never substitutes a default peak (pytorch/torchtitan's ``get_peak_flops`` falls back to
the A100's for an unknown name). The maximum SM clock comes from NVML, read once per process
(:mod:`truepeak.hardware.nvml`).

CPUs: no catalog entry; :mod:`truepeak.hardware.cpu` estimates the fp32 peak (labelled estimated) from the vendor,
family, core count and clock. The CPU accelerator has **no memory bandwidth**: `truepeak run` measures the copy
bandwidth first and uses that measured value as the CPU roofline's memory ceiling (:func:`with_measured_bandwidth`).

Sources: docs/method.md, 'Cache-resident working sets' (size rotation from the *device-reported* L2: the H200 reports
60 MiB, not the 50 MB product figure) and 'Shared memory per block' (read the per-block limit from the device).
"""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass, field

from truepeak.errors import TruepeakError, UnsupportedError, require
from truepeak.hardware import nvml
from truepeak.hardware.catalog import Accelerator, Architecture, Sourced
from truepeak.hardware.cpu import DEFAULT_CPU_CACHE_BYTES, cpu_accelerator, read_cpu_spec
from truepeak.hardware.lookup import match_device_name

DEVICE_FORM = "auto, cpu, cuda or cuda:N"


@dataclass(frozen=True)
class DeviceInfo:
    """The measured device, as it reports itself.

    Attributes:
        kind: ``"cuda"`` or ``"cpu"``.
        name: the name the device reports (``torch.cuda.get_device_name``; the CPU model name).
        accelerator: the catalog entry (matched GPU), an entry with no peaks (unknown GPU), or the estimated CPU entry.
        matched_catalog: True when ``accelerator`` came from the catalog.
        compute_capability: ``"9.0"`` for a CUDA GPU, None for a CPU.
        sm_count: streaming multiprocessors (GPU) or physical cores (CPU).
        l2_bytes: cache size that input rotation must defeat, in bytes: the device-reported L2 of a GPU, the
            last-level cache (L3 where present) of a CPU, summed over the cache domains of the CPUs this process may
            run on.
        smem_per_block_bytes: opt-in shared memory per block in bytes (GPU; None for a CPU or an old torch).
        max_sm_clock_hz: maximum SM clock from NVML (GPU) or the highest reported core clock (CPU), in Hz; None if
            unknown.
        memory_bytes: device memory (GPU) or system memory (CPU), in bytes.
        index: CUDA device index, None for a CPU.
        notes: caveats in words (an unknown GPU, how the CPU peak was estimated).
    """

    kind: str
    name: str
    accelerator: Accelerator
    matched_catalog: bool
    compute_capability: str | None
    sm_count: int | None
    l2_bytes: int | None
    smem_per_block_bytes: int | None
    max_sm_clock_hz: float | None
    memory_bytes: int | None
    index: int | None = None
    notes: tuple[str, ...] = field(default=())

    @property
    def torch_device(self) -> str:
        """The torch device string: ``"cuda:N"`` or ``"cpu"``."""
        return f"cuda:{self.index}" if self.kind == "cuda" else "cpu"

    @property
    def sm_arch(self) -> int | None:
        """Compute capability as an integer, ``90`` for ``"9.0"``; None for a CPU."""
        if not self.compute_capability:
            return None
        major, minor = self.compute_capability.split(".")
        return int(major) * 10 + int(minor)

    def to_dict(self) -> dict:
        """JSON-ready summary (the accelerator by key and name)."""
        return {
            "kind": self.kind,
            "name": self.name,
            "accelerator": self.accelerator.key,
            "accelerator_name": self.accelerator.name,
            "matched_catalog": self.matched_catalog,
            "compute_capability": self.compute_capability,
            "sm_count": self.sm_count,
            "l2_bytes": self.l2_bytes,
            "smem_per_block_bytes": self.smem_per_block_bytes,
            "max_sm_clock_hz": self.max_sm_clock_hz,
            "memory_bytes": self.memory_bytes,
            "index": self.index,
            "notes": list(self.notes),
        }


def parse_device(device: str) -> tuple[str, int | None]:
    """Split a device string into ``(kind, index)``: ``"auto"`` -> ("auto", None), ``"cuda:1"`` -> ("cuda", 1).

    Raises:
        TruepeakError: anything but auto, cpu, cuda or cuda:N.
    """
    text = str(device).strip().lower()
    if text in ("auto", "cpu", "cuda"):
        return text, None
    hit = re.fullmatch(r"cuda:(\d+)", text)
    if hit:
        return "cuda", int(hit.group(1))
    raise TruepeakError(f"unknown device {device!r}; accepted: {DEVICE_FORM}")


def detect(device: str = "auto") -> DeviceInfo:
    """Detect the device to measure.

    Args:
        device: ``"auto"`` (the current CUDA GPU if torch sees one, else the CPU), ``"cpu"``, ``"cuda"`` (the current
            CUDA device) or ``"cuda:N"``.

    Returns:
        A :class:`DeviceInfo`.

    Raises:
        TruepeakError: a malformed device string.
        MissingDependencyError: torch is needed to look at a CUDA device (install command in the message).
        UnsupportedError: ``cuda`` was asked for but torch sees no CUDA device, or the index is out of range.
    """
    kind, index = parse_device(device)
    if kind == "cpu":
        return detect_cpu()
    if kind == "auto":
        try:
            import torch
        except ImportError:
            return detect_cpu()
        if not torch.cuda.is_available():
            return detect_cpu()
        return detect_cuda(torch.cuda.current_device())
    torch = require("torch", "measuring on a CUDA GPU")
    if not torch.cuda.is_available():
        raise UnsupportedError(f"device {device!r} was asked for, but torch {torch.__version__} sees no CUDA GPU; "
                               "use --device cpu, or install a CUDA build of torch")
    count = torch.cuda.device_count()
    if index is None:
        index = torch.cuda.current_device()
    if index >= count:
        raise UnsupportedError(f"device {device!r} does not exist; torch sees {count} CUDA device(s): cuda:0..cuda:{count - 1}")
    return detect_cuda(index)


# ----------------------------------------------------------------------------------------------------------------------
# CUDA


def detect_cuda(index: int) -> DeviceInfo:
    """Describe CUDA device ``index`` from ``torch.cuda.get_device_properties`` and NVML.

    Reads: name, compute capability, ``multi_processor_count``, ``L2_cache_size``, ``shared_memory_per_block_optin``
    (where this torch has it), ``total_memory``; the maximum SM clock from NVML (None when NVML is missing).

    Raises:
        MissingDependencyError: torch is not installed (install command in the message).
        RuntimeError, AssertionError: from torch, when CUDA is unusable or ``index`` is out of range (call
            :func:`detect`, which checks both and raises UnsupportedError instead).
    """
    torch = require("torch", "measuring on a CUDA GPU")
    props = torch.cuda.get_device_properties(index)
    name = props.name
    cc = f"{props.major}.{props.minor}"
    sm_count = int(props.multi_processor_count)
    l2 = getattr(props, "L2_cache_size", None)
    smem = getattr(props, "shared_memory_per_block_optin", None)
    memory = int(props.total_memory)
    max_clock = _nvml_max_sm_clock_hz(index, props)
    return cuda_device_info(name, cc, sm_count=sm_count, l2_bytes=int(l2) if l2 else None,
                            smem_per_block_bytes=int(smem) if smem else None, max_sm_clock_hz=max_clock,
                            memory_bytes=memory, index=index)


def cuda_device_info(name: str, compute_capability: str, *, sm_count: int | None, l2_bytes: int | None,
                     smem_per_block_bytes: int | None, max_sm_clock_hz: float | None, memory_bytes: int | None,
                     index: int = 0) -> DeviceInfo:
    """Build the :class:`DeviceInfo` of a CUDA GPU from what it reports (no torch needed; tests call this).

    The name is matched to the catalog; an unknown GPU gets :func:`unknown_gpu_accelerator` and a note saying that no
    efficiency can be computed.
    """
    acc = match_device_name(name)
    notes: list[str] = []
    if acc is None:
        acc = unknown_gpu_accelerator(name, compute_capability, sm_count=sm_count, l2_bytes=l2_bytes,
                                      memory_bytes=memory_bytes)
        notes.append(f"{name!r} is not in the truepeak catalog: it is measured, but with no catalog peaks or memory "
                     "bandwidth, so no efficiency (% of dense peak, % of roofline) is computed; no default peak is "
                     "substituted")
        matched = False
    else:
        matched = True
        if acc.compute_capability and acc.compute_capability != compute_capability:
            notes.append(f"the catalog gives compute capability {acc.compute_capability} for {acc.name}, the device "
                         f"reports {compute_capability}")
        if acc.sm_count and sm_count and int(acc.sm_count.value) != sm_count:
            notes.append(f"the catalog gives {acc.sm_count.value} SMs for {acc.name}, the device reports {sm_count}")
    return DeviceInfo("cuda", name, acc, matched, compute_capability, sm_count, l2_bytes, smem_per_block_bytes,
                      max_sm_clock_hz, memory_bytes, index, tuple(notes))


def unknown_gpu_accelerator(name: str, compute_capability: str | None, *, sm_count: int | None = None,
                            l2_bytes: int | None = None, memory_bytes: int | None = None) -> Accelerator:
    """An accelerator for a GPU the catalog does not know: device-reported sizes, **no peaks, no bandwidth**."""
    src = "reported by the device (not in the truepeak catalog)"
    arch = Architecture(f"sm_{(compute_capability or '?').replace('.', '')}", "unknown (not in the catalog)", {},
                        "none: GPU not in the catalog")
    return Accelerator(
        key="unknown-gpu", name=name, vendor="unknown", architecture=arch, compute_capability=compute_capability,
        device_names=(name,), aliases=(), peaks=(),
        memory_bytes=Sourced(memory_bytes, src) if memory_bytes else None, memory_bandwidth=None,
        sm_count=Sourced(sm_count, src) if sm_count else None, boost_clock_hz=None, max_clock_hz=None,
        l2_bytes=Sourced(l2_bytes, src) if l2_bytes else None, smem_per_block_bytes=None, tdp_w=None,
        interconnect=None, notes=("not in the truepeak catalog: no peaks, so no efficiency figures",),
    )


def _nvml_max_sm_clock_hz(index: int, props) -> float | None:
    """NVML's maximum SM clock in Hz for CUDA device ``index``, found by PCI bus id (CUDA and NVML order can differ;
    torch's index is the fallback). Read once per device and process (:func:`truepeak.hardware.nvml.device_info`)."""
    nvml_index = None
    bus = getattr(props, "pci_bus_id", None)
    if bus is not None:
        dom = getattr(props, "pci_domain_id", 0) or 0
        dev = getattr(props, "pci_device_id", 0) or 0
        nvml_index = nvml.index_of_pci_bus_id(f"{dom:08x}:{bus:02x}:{dev:02x}.0")
    info = nvml.device_info(index if nvml_index is None else nvml_index)
    return None if info is None else info.max_sm_clock_hz


# ----------------------------------------------------------------------------------------------------------------------
# CPU


def with_measured_bandwidth(acc: Accelerator, bandwidth_bps: float, how: str) -> Accelerator:
    """A copy of ``acc`` whose memory bandwidth is a measured value (B/s), for accelerators with none in the catalog.

    Used for CPUs: the roofline's memory ceiling becomes the copy bandwidth `truepeak run` measured.
    """
    return dataclasses.replace(acc, memory_bandwidth=Sourced(float(bandwidth_bps), f"measured: {how}", derived=True,
                                                             note="measured by truepeak run, not a spec value"))


def detect_cpu() -> DeviceInfo:
    """Describe the host CPU: :func:`truepeak.hardware.cpu.read_cpu_spec` and its estimated accelerator, with notes
    on what was estimated or assumed."""
    spec = read_cpu_spec()
    notes = ["CPU fp32 peak estimated: " + spec.formula,
             "CPU memory bandwidth: the measured copy bandwidth is used as the roofline's memory ceiling",
             "only the fp32 peak is estimated for a CPU: rows in other formats (bf16, ...) show - for % of dense peak, "
             "% of roofline and bound"]
    if spec.clock_hz is None:
        notes.append("no CPU clock found, so no fp32 peak estimate and no efficiency")
    elif not spec.clock_is_max:
        notes.append(f"the CPU clock is from {spec.clock_source}, not a maximum clock: cores that boost above it can "
                     "measure above 100 % of the estimated fp32 peak")
    if spec.cache_bytes is None:
        notes.append(f"no cache size reported; {DEFAULT_CPU_CACHE_BYTES // 2**20} MiB assumed for rotation sizing")
    return DeviceInfo("cpu", spec.model, cpu_accelerator(spec), False, None, spec.cores,
                      spec.cache_bytes or DEFAULT_CPU_CACHE_BYTES, None, spec.clock_hz, spec.memory_bytes, None,
                      tuple(notes))


__all__ = ["DEVICE_FORM", "DeviceInfo", "cuda_device_info", "detect", "detect_cpu", "detect_cuda", "parse_device",
           "unknown_gpu_accelerator", "with_measured_bandwidth"]
