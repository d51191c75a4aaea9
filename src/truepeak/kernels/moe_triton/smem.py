"""Shared-memory fitting with the compiler's own figure: compile each MoE kernel and drop pipeline stages until
it fits the device's per-block limit (docs/method.md, 'Shared memory per block'); and how many programs of a compiled
kernel one SM holds at once (the grid of a persistent launch)."""

from __future__ import annotations

from typing import Any

from truepeak.errors import UnsupportedError, require
from truepeak.kernels.moe_triton.config import KernelConfig


def device_smem_limit(device: Any) -> int:
    """The device's shared memory per block with opt-in (``sharedMemPerBlockOptin``: 232,448 B on sm_90, 101,376 B on
    sm_120; 0 where torch does not report it)."""
    torch = require("torch", "running the MoE kernel")
    return int(getattr(torch.cuda.get_device_properties(device), "shared_memory_per_block_optin", 0))


def programs_per_sm(shared_bytes: int, registers: int, num_warps: int, smem_per_sm: int, regs_per_sm: int = 65536,
                    threads_per_sm: int = 2048, reserved_per_block: int = 1024) -> int:
    """Programs (thread blocks) of one kernel an SM holds at once, the least of three limits: shared memory
    (``smem_per_sm // (shared_bytes + reserved_per_block)``: the CUDA C++ Programming Guide's 1 KB of shared memory
    the system reserves per block from compute capability 8.0 on), registers (``registers`` per thread rounded up to
    a multiple of 8, per warp of 32 threads) and threads; at least 1. On the H200 (228 KB of shared memory and 65,536
    registers per SM, at most 2,048 threads): a 4-warp program of 160 KB and 168 registers per thread holds 1; of
    80 KB and 128 registers, 2.

    Raises:
        TruepeakError: a negative or zero size where a positive one is needed."""
    from truepeak.errors import TruepeakError

    if min(smem_per_sm, regs_per_sm, threads_per_sm, num_warps) <= 0 or shared_bytes < 0 or registers < 0:
        raise TruepeakError(f"programs_per_sm needs positive SM sizes and warps and non-negative program sizes, got "
                            f"shared_bytes={shared_bytes}, registers={registers}, num_warps={num_warps}, "
                            f"smem_per_sm={smem_per_sm}, regs_per_sm={regs_per_sm}, threads_per_sm={threads_per_sm}")
    by_smem = smem_per_sm // (shared_bytes + reserved_per_block)
    per_warp = -(-max(registers, 1) // 8) * 8 * 32
    by_regs = regs_per_sm // (per_warp * num_warps)
    by_threads = threads_per_sm // (32 * num_warps)
    return max(1, min(by_smem, by_regs, by_threads))


def device_programs(compiled: Any, num_warps: int, device: Any) -> int:
    """Programs of a compiled Triton kernel (``.metadata.shared`` bytes, ``.n_regs`` registers per thread) that the
    whole ``device`` holds at once: :func:`programs_per_sm` times its SMs."""
    torch = require("torch", "running the MoE kernel")
    p = torch.cuda.get_device_properties(device)
    per_sm = programs_per_sm(int(compiled.metadata.shared), int(getattr(compiled, "n_regs", 0) or 0), num_warps,
                             int(getattr(p, "shared_memory_per_multiprocessor", 0) or 233472),
                             int(getattr(p, "regs_per_multiprocessor", 0) or 65536),
                             int(getattr(p, "max_threads_per_multi_processor", 0) or 2048))
    return per_sm * int(p.multi_processor_count)


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
