"""Device memory bandwidth: a large device-to-device copy, ``dst.copy_(src)``.

Method (docs/method.md, 'Cache-resident working sets' and 'Counting FLOP and bytes'):
    - Buffers far larger than the cache so every byte comes from DRAM: each of ``src`` and ``dst`` is at least 8x the
      device-reported L2 (GPU) or last-level cache (CPU). Defaults: 2 GiB per buffer on a GPU (34x the H200's 60 MiB
      L2), 256 MiB on a CPU. Quick mode: 32 MiB, raised to 2x the cache (at most 1 GiB), so that even a smoke run's
      working set (source + destination) is at least 4x the cache (NVIDIA/TileGym PR #118: a working set under 2x L2
      reads ~1.6x too high). A copy whose working set is under 2x the cache (:func:`cache_resident`) is never used as a
      roofline's memory ceiling.
    - Bytes counted read + write: ``2 * nbytes`` per copy (:class:`truepeak.roofline.Copy`), in decimal GB/s
      (1e9 B/s) as vendors and nccl-tests use. Reference: H200 device-to-device copy 4.24 TB/s = 88 % of 4.8 TB/s.
    - Source filled with uniform random fp32 values (never zeros).
    - GPU: timed with CUDA events via :func:`truepeak.bench.cuda_timer.time_cuda` (sustained mode, NVML telemetry);
      CPU: :func:`truepeak.bench.timing.time_cpu`.

The result's ``derived`` comes from :func:`truepeak.efficiency.derived_metrics` (:class:`truepeak.records.CopyMetrics`:
``bytes_per_s``, ``bandwidth_fraction`` of the catalog bandwidth; None where the catalog has none, as for a CPU).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from truepeak.errors import TruepeakError, require
from truepeak.roofline import Copy
from truepeak.units import fmt_size

if TYPE_CHECKING:  # pragma: no cover
    from truepeak.bench.measurement import Measurement
    from truepeak.records import CopyMetrics
    from truepeak.hardware.detect import DeviceInfo

GPU_COPY_BYTES = 2 * 2**30
CPU_COPY_BYTES = 256 * 2**20
QUICK_COPY_BYTES = 32 * 2**20
#: Quick mode raises each buffer to this many times the cache, up to QUICK_COPY_MAX_BYTES.
QUICK_CACHE_MULTIPLE = 2
QUICK_COPY_MAX_BYTES = 2**30
#: Each buffer is at least this many times the cache size (outside quick mode).
CACHE_MULTIPLE = 8
#: A copy whose working set (source + destination) is under this many times the cache may be served from cache.
RESIDENT_MULTIPLE = 2


@dataclass
class CopyResult:
    """One copy-bandwidth measurement.

    Attributes:
        nbytes: bytes per buffer (one copy reads ``nbytes`` and writes ``nbytes``).
        measurement: timing (seconds per copy).
        derived: :func:`~truepeak.efficiency.derived_metrics` of ``Copy(nbytes)``: ``bytes_per_s`` (B/s, read +
            write), ``bandwidth_fraction`` (of the catalog bandwidth, or None).
        notes: caveats (for example a buffer smaller than 8x the cache).
    """

    nbytes: int
    measurement: Measurement
    derived: CopyMetrics
    notes: list[str] = field(default_factory=list)

    @property
    def bandwidth_bps(self) -> float:
        """Measured bandwidth in B/s (read + write): ``2 * nbytes / steady median``."""
        return Copy(self.nbytes).min_bytes / self.measurement.steady_median_s


def backend_name(device_kind: str) -> str:
    """The call :func:`measure_copy` times, as records name it (``"torch Tensor.copy_ (CUDA)"``)."""
    return "torch Tensor.copy_" + (" (CUDA)" if device_kind == "cuda" else " (CPU)")


def copy_bytes(device: DeviceInfo, quick: bool = False) -> int:
    """Default bytes per buffer: 2 GiB (GPU), 256 MiB (CPU), raised to >= 8x the cache when needed; quick mode
    32 MiB raised to 2x the cache (at most 1 GiB)."""
    cache = int(device.l2_bytes or 0)
    if quick:
        return max(QUICK_COPY_BYTES, min(QUICK_CACHE_MULTIPLE * cache, QUICK_COPY_MAX_BYTES))
    base = GPU_COPY_BYTES if device.kind == "cuda" else CPU_COPY_BYTES
    return max(base, CACHE_MULTIPLE * cache)


def cache_resident(nbytes: int, cache_bytes: int | None) -> bool:
    """Whether a copy of ``nbytes`` per buffer may run from cache: its working set (source + destination,
    ``2 * nbytes``) is under 2x ``cache_bytes``. Such a figure reads too high (docs/method.md, 'Cache-resident working
    sets') and is not a memory ceiling. False when the cache size is unknown."""
    return bool(cache_bytes) and 2 * int(nbytes) < RESIDENT_MULTIPLE * int(cache_bytes)


def measure_copy(device: DeviceInfo, *, nbytes: int | None = None, quick: bool = False, warmup_s: float = 0.2,
                 budget_s: float = 0.5) -> CopyResult:
    """Measure device copy bandwidth.

    Args:
        device: from :func:`truepeak.hardware.detect.detect`.
        nbytes: bytes per buffer (default :func:`copy_bytes`); rounded down to a multiple of 4.
        quick: small buffers for tests (the result is then flagged if it is under 8x the cache).
        warmup_s, budget_s: time budgets in seconds for warm-up and timing.

    Returns:
        :class:`CopyResult`.

    Raises:
        MissingDependencyError: torch is not installed (message carries the install command).
        TruepeakError: ``nbytes`` below 4.
        torch.OutOfMemoryError: the buffers do not fit (the caller records it as a failed case).
    """
    torch = require("torch", "measuring memory bandwidth")
    from truepeak.efficiency import derived_metrics

    nbytes = int(nbytes if nbytes is not None else copy_bytes(device, quick)) // 4 * 4
    if nbytes < 4:
        raise TruepeakError(f"copy size {nbytes} B is too small; give at least 4 bytes")
    notes: list[str] = []
    if device.l2_bytes and nbytes < CACHE_MULTIPLE * device.l2_bytes:
        notes.append(f"buffer {fmt_size(nbytes)} is under {CACHE_MULTIPLE}x the {fmt_size(device.l2_bytes)} cache: "
                     "part of the traffic may be served from cache (see docs/method.md, "
                     "'Cache-resident working sets')")
    dev = device.torch_device
    gen = torch.Generator(device=dev)
    gen.manual_seed(12345)
    src = torch.rand(nbytes // 4, generator=gen, device=dev, dtype=torch.float32)
    dst = torch.empty_like(src)

    if device.kind == "cuda":
        from truepeak.bench.cuda_timer import time_cuda

        meas = time_cuda(lambda i: dst.copy_(src), n_sets=1, warmup_s=warmup_s, budget_s=budget_s,
                         mode="sustained", device=device.index or 0)
    else:
        from truepeak.bench.timing import time_cpu

        meas = time_cpu(lambda: dst.copy_(src), warmup_s=warmup_s, budget_s=budget_s, min_samples=5)
    if not torch.equal(dst[:1024], src[:1024]):
        raise TruepeakError("the copy did not copy: destination differs from source after timing")
    median = meas.steady_median_s
    clock = meas.telemetry.sm_clock_median_hz if meas.telemetry is not None else None
    derived = derived_metrics(device.accelerator, Copy(nbytes), median, clock_hz=clock, sm_count=device.sm_count)
    del src, dst
    return CopyResult(nbytes, meas, derived, notes)


__all__ = ["CopyResult", "measure_copy", "backend_name", "copy_bytes", "cache_resident", "GPU_COPY_BYTES", "CPU_COPY_BYTES", "QUICK_COPY_BYTES"]
