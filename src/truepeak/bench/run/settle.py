"""Settling before a sweep: back-to-back GEMMs that bring a GPU's clock and power to their sustained state, and the
check that keeps a CPU without native bf16 units out of a bf16 sweep (docs/method.md, 'Warm-up outliers').

torch is passed in by the caller (who imported it through :func:`truepeak.errors.require`).
"""

from __future__ import annotations

import math
import time
from typing import Any

from truepeak.formats import get_format
from truepeak.hardware.detect import DeviceInfo


#: The GPU settles clock and power on back-to-back SETTLE_SIZE^3 GEMMs in :func:`settle_format`.
SETTLE_SIZE = 8192


def settle_format(device: DeviceInfo) -> str:
    """The format of the settling GEMMs: bf16, or fp16 before sm_80 (no bf16 tensor cores)."""
    return "bf16" if (device.sm_arch or 0) >= 80 else "fp16"


def settle_gpu(torch: Any, dev: DeviceInfo, seconds: float) -> float:
    """Run back-to-back :func:`settle_format` :data:`SETTLE_SIZE`^3 GEMMs for ``seconds`` so clock and power reach
    their sustained state before the sweep (docs/method.md, 'Warm-up outliers': clocks oscillate for ~3 s).
    Returns the seconds spent."""
    if seconds <= 0:
        return 0.0
    dtype = getattr(torch, get_format(settle_format(dev)).torch_dtype)
    d = dev.torch_device
    gen = torch.Generator(device=d)
    gen.manual_seed(7)
    a = (torch.rand((SETTLE_SIZE, SETTLE_SIZE), generator=gen, device=d) * 2 - 1).to(dtype)
    b = (torch.rand((SETTLE_SIZE, SETTLE_SIZE), generator=gen, device=d) * 2 - 1).to(dtype)
    c = torch.empty_like(a)
    t0 = time.perf_counter()
    while time.perf_counter() - t0 < seconds:
        for _ in range(8):
            torch.mm(a, b.t(), out=c)
        torch.cuda.synchronize(d)
    del a, b, c
    return time.perf_counter() - t0


def cpu_bf16_fast_enough(torch: Any, size: int = 512, ratio: float = 2.0) -> tuple[bool, str]:
    """Is bf16 matmul on this CPU at most ``ratio`` x slower than fp32? (No native bf16 units make it 10-50x slower,
    which would blow the run's time budget.) Returns ``(ok, reason)``."""
    times = {}
    for dt in (torch.float32, torch.bfloat16):
        a = torch.rand((size, size), dtype=torch.float32).mul_(2).sub_(1).to(dt)
        b = torch.rand((size, size), dtype=torch.float32).mul_(2).sub_(1).to(dt)
        torch.mm(a, b)
        best = math.inf
        for _ in range(3):
            t = time.perf_counter()
            torch.mm(a, b)
            best = min(best, time.perf_counter() - t)
        times[dt] = best
    slow = times[torch.bfloat16] / max(times[torch.float32], 1e-9)
    if slow > ratio:
        return False, (f"bf16 matmul on this CPU runs {slow:.1f}x slower than fp32 (no native bf16 units); skipped "
                       "to keep the run short (ask for it with --formats bf16)")
    return True, ""


__all__ = ["SETTLE_SIZE", "settle_format", "settle_gpu", "cpu_bf16_fast_enough"]
