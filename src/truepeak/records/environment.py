"""Where a record was measured: the machine, the software and the device, as :func:`truepeak.bench.environment.
environment` describes them (after mamf-finder's header and pytest-benchmark's ``machine_info``).

Every field is optional: the environment is described on a best-effort basis and an unknown value is None. Sizes in
bytes, clocks in Hz, power in W.

Standard library only.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import ClassVar

from truepeak.records._fields import NONNEGATIVE, Part


@dataclass(frozen=True, kw_only=True)
class DeviceFacts(Part):
    """What the GPU and the detected device both say: the ``name`` the device reports, its ``index``, compute
    capability (``"9.0"``), SMs (cores on a CPU), L2 (the last-level cache on a CPU) and memory in bytes, and the
    maximum SM (core) clock in Hz."""

    name: str | None = None
    index: int | None = None
    compute_capability: str | None = None
    sm_count: int | None = field(default=None, metadata=NONNEGATIVE)
    l2_bytes: int | None = field(default=None, metadata=NONNEGATIVE)
    memory_bytes: int | None = field(default=None, metadata=NONNEGATIVE)
    max_sm_clock_hz: float | None = None


@dataclass(frozen=True, kw_only=True)
class GpuInfo(DeviceFacts):
    """The CUDA GPU as torch and NVML report it (:class:`DeviceFacts`), with the ``count`` of GPUs visible, its
    ``uuid``, the driver and the enforced power limit (W)."""

    DESCRIPTION: ClassVar[str] = "the GPU description"

    count: int | None = None
    uuid: str | None = None
    driver: str | None = None
    power_limit_w: float | None = None


@dataclass(frozen=True, kw_only=True)
class DeviceSummary(DeviceFacts):
    """The measured device as truepeak detected it (:meth:`truepeak.hardware.detect.DeviceInfo.to_dict`;
    :class:`DeviceFacts`): ``kind`` (``"cuda"`` or ``"cpu"``), the catalog entry it matched (``accelerator`` key and
    ``accelerator_name``; ``matched_catalog``), shared memory per block in bytes and caveats in words (``notes``)."""

    DESCRIPTION: ClassVar[str] = "the device description"

    kind: str | None = None
    accelerator: str | None = None
    accelerator_name: str | None = None
    matched_catalog: bool | None = None
    smem_per_block_bytes: int | None = field(default=None, metadata=NONNEGATIVE)
    notes: tuple[str, ...] = ()


class _DeviceOrGpu:
    """A fact of the environment's detected device (:class:`DeviceSummary`), else of its GPU (:class:`GpuInfo`), by
    the attribute's own name: ``env.sm_count``; None when neither has it."""

    def __set_name__(self, owner: type, name: str) -> None:
        self.name = name

    def __get__(self, env: Environment | None, owner: type | None = None):
        if env is None:
            return self
        for part in (env.device, env.gpu):
            value = getattr(part, self.name) if part is not None else None
            if value:
                return value
        return None


@dataclass(frozen=True, kw_only=True)
class Environment(Part):
    """The machine and software: truepeak, Python and platform, the CPU model, numpy, torch (its CUDA build, cuDNN,
    NCCL, the fp32 matmul precision and TF32 switch), Triton; the GPU (:class:`GpuInfo`, None without one) and the
    detected device (:class:`DeviceSummary`, written by the commands that detect one); the environment variables that
    change what a measurement means (``env_vars``: CUDA, cuBLAS, NCCL and torch settings, never secrets); and the
    command line."""

    DESCRIPTION: ClassVar[str] = "the environment"

    truepeak_version: str | None = None
    python: str | None = None
    python_implementation: str | None = None
    platform: str | None = None
    machine: str | None = None
    cpu: str | None = None
    numpy: str | None = None
    torch: str | None = None
    cuda: str | None = None
    cudnn: int | None = None
    nccl: str | None = None
    float32_matmul_precision: str | None = None
    allow_tf32_cublas: bool | None = None
    triton: str | None = None
    gpu: GpuInfo | None = None
    device: DeviceSummary | None = None
    env_vars: Mapping[str, str] = field(default_factory=dict)
    argv: tuple[str, ...] = ()
    command_line: str | None = None

    @property
    def device_name(self) -> str | None:
        """The device measured on: the detected device's name, else the GPU's, else the CPU model; None if unknown."""
        for name in (self.device.name if self.device else None, self.gpu.name if self.gpu else None, self.cpu):
            if name:
                return name
        return None

    #: The device's facts, else the GPU's (:class:`_DeviceOrGpu`).
    compute_capability = _DeviceOrGpu()
    sm_count = _DeviceOrGpu()  # SMs (cores on a CPU)
    l2_bytes = _DeviceOrGpu()  # the last-level cache on a CPU
    memory_bytes = _DeviceOrGpu()
    max_sm_clock_hz = _DeviceOrGpu()  # the maximum core clock on a CPU


__all__ = ["DeviceFacts", "GpuInfo", "DeviceSummary", "Environment"]
