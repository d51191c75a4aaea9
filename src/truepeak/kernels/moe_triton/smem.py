"""Shared-memory fitting with the compiler's own figure: compile each MoE kernel and drop pipeline stages until
it fits the device's per-block limit (docs/method.md, 'Shared memory per block')."""

from __future__ import annotations

from typing import Any

from truepeak.errors import UnsupportedError, require
from truepeak.kernels.moe_triton.config import KernelConfig


def device_smem_limit(device: Any) -> int:
    """The device's shared memory per block with opt-in (``sharedMemPerBlockOptin``: 232,448 B on sm_90, 101,376 B on
    sm_120; 0 where torch does not report it)."""
    torch = require("torch", "running the MoE kernel")
    return int(getattr(torch.cuda.get_device_properties(device), "shared_memory_per_block_optin", 0))


def fit_shared_memory(launch: Any, cfg1: KernelConfig, cfg2: KernelConfig, limit: int
                      ) -> tuple[KernelConfig, KernelConfig]:
    """The shared-memory check (docs/method.md, 'Shared memory per block') with the compiler's own figure: compile each
    of the two MoE kernels (``launch(which, cfg, warmup=True)`` returns Triton's compiled kernel for kernel 1 (gate/up)
    or 2 (down)) and drop pipeline stages until the shared memory Triton allocates fits ``limit`` bytes per block
    (:func:`device_smem_limit`; 0 = no check). :func:`choose_config`'s estimate is a first guess; this is the check.

    Returns:
        The two configurations, each with the most stages (at most its own) that fit.

    Raises:
        UnsupportedError: a kernel does not fit with one stage, or does not compile under its ``maxnreg``.
    """
    import dataclasses

    if not limit:
        return cfg1, cfg2
    out = []
    for which, cfg in ((1, cfg1), (2, cfg2)):
        while True:
            try:
                need = int(launch(which, cfg, warmup=True).metadata.shared)
            except Exception as exc:  # noqa: BLE001 - a register cap ptxas cannot meet: say so, not 1000s of lines
                if not cfg.maxnreg:
                    raise
                why = next((ln.strip() for ln in str(exc).splitlines() if "register" in ln.lower()),
                           type(exc).__name__)
                raise UnsupportedError(f"MoE kernel {which} does not compile with maxnreg={cfg.maxnreg}: {why}; "
                                       "raise maxnreg or leave it None") from None
            if need <= limit:
                break
            if cfg.num_stages <= 1:
                raise UnsupportedError(f"MoE kernel {which} ({cfg.block_n}x{cfg.block_m}x{cfg.block_k}, 1 stage) "
                                       f"needs {need:,} B of shared memory; this device allows {limit:,} B")
            cfg = dataclasses.replace(cfg, num_stages=cfg.num_stages - 1)
        out.append(cfg)
    return out[0], out[1]
