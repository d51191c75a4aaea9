"""The search space of ``truepeak moe tune``: which :class:`KernelConfig` values are tried per weight format and
activations, the neighbours of a configuration pair, the shared-memory fit of a candidate, and the formats and shapes
a device cannot run. Pure Python: nothing here imports torch or triton.

A candidate is a pair (gate/up kernel, down kernel) that shares ``block_m`` (one routing alignment serves both);
every other field is the kernel's own. The values cover vLLM's tuning grid (``benchmarks/kernels/benchmark_moe.py``
in ``vllm-project/vllm``: BLOCK_SIZE_M 16..256, BLOCK_SIZE_N 32..256, BLOCK_SIZE_K 64..256, 4 or 8 warps, 2..5
stages) restricted to what the kernels take.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Callable

from truepeak.errors import TruepeakError
from truepeak.kernels.moe_triton.config import KernelConfig, check_wfmt

#: The kernel fields a candidate changes per kernel (``block_m`` is shared by both kernels), in the order tried:
#: the persistent launch last, as it was slower than the best launch without it at every point measured on the
#: H200 (docs/results/h200/moe-tune/README.md).
KERNEL_FIELDS = ("group_m", "block_n", "num_warps", "num_stages", "block_k", "maxnreg", "prefetch", "persistent")
#: Pairs: (gate/up, down). A field name ``gate_up.block_n`` / ``down.block_n`` changes one kernel.
KERNELS = ("gate_up", "down")


def search_space(wfmt: str, w8a8: bool, bucket: int, fp4_layout: str | None = None) -> dict[str, tuple]:
    """The values tried for each field at tokens-per-expert ``bucket``: ``block_m`` 16, 32, 64 (and 128 from 32 tokens
    per expert on; 64 only from 4 on: larger blocks only pad), ``block_n`` 32..256, warps 4 or 8, stages 2..5,
    ``block_k`` 64..256 (fp8_block: at most 128, one 128 x 128 scale per step; fp4 64 or 128, nvfp4 with w4a8
    in the tiled layout 64 only), the tile order ``group_m`` 0 (token block
    fastest), 1 or 4 (groups of one or four token blocks, weight tile fastest within a group), a persistent launch
    or not, and for formats decoded in registers (fp8 w8a16, fp4) a register cap of 128 or none and register
    prefetch of the next step.

    Raises:
        UnknownNameError: an unknown format."""
    check_wfmt(wfmt)
    fp4 = wfmt in ("nvfp4", "mxfp4")
    bm = (16, 32) + ((64,) if bucket >= 4 else ()) + ((128,) if bucket >= 32 else ())
    if wfmt == "nvfp4" and w8a8 and fp4_layout != "mma":
        bk: tuple = (64,)
    else:
        bk = (64, 128) if fp4 or wfmt == "fp8_block" else (64, 128, 256)
    dequant = fp4 or (wfmt in ("fp8", "fp8_block") and not w8a8)
    return {"block_m": bm, "block_n": (32, 64, 128, 256), "num_warps": (4, 8), "num_stages": (2, 3, 4, 5),
            "block_k": bk, "maxnreg": (None, 128) if dequant else (None,),
            "prefetch": (False, True) if dequant else (False,), "persistent": (False, True),
            "group_m": (0, 1, 4)}


def apply(pair: tuple[KernelConfig, KernelConfig], change: dict[str, Any]) -> tuple[KernelConfig, KernelConfig]:
    """``pair`` with ``change`` applied: ``{"block_m": 32}`` to both kernels, ``{"gate_up.block_n": 128}`` to one.

    Raises:
        TruepeakError: a value :class:`KernelConfig` refuses. KeyError: an unknown field name."""
    both = {k: v for k, v in change.items() if "." not in k}
    out = []
    for name, cfg in zip(KERNELS, pair):
        own = {k.split(".", 1)[1]: v for k, v in change.items() if k.startswith(name + ".")}
        out.append(dataclasses.replace(cfg, **both, **own))
    return out[0], out[1]


def field_names() -> list[str]:
    """The fields a search changes, in the order tried: ``block_m`` (both kernels), then for each of
    :data:`KERNEL_FIELDS` the gate/up kernel's and the down kernel's (``gate_up.block_n``, ``down.block_n``, ...)."""
    return ["block_m"] + [f"{name}.{f}" for f in KERNEL_FIELDS for name in KERNELS]


def _value(pair: tuple[KernelConfig, KernelConfig], name: str) -> Any:
    kernel, _, field = name.rpartition(".")
    return getattr(pair[KERNELS.index(kernel)] if kernel else pair[0], field)


def neighbours(pair: tuple[KernelConfig, KernelConfig], space: dict[str, tuple]) -> list[dict[str, Any]]:
    """Every one-field change of ``pair`` within ``space``, in :func:`field_names`' order."""
    return [{name: v} for name in field_names() for v in space[name.rpartition(".")[2]] if v != _value(pair, name)]


Pair = tuple[KernelConfig, KernelConfig]


def descend(start: Pair, space: dict[str, tuple], time_of: Callable[[Pair], tuple[Pair, float] | None],
            out_of_time: Callable[[], bool]) -> Pair:
    """Coordinate descent from ``start``: field by field (:func:`field_names`), every value of the field tried on
    the best pair so far and a faster one adopted at once, so that changes of different fields -- and of the two
    kernels, whose times add -- combine within one sweep (a steepest descent, which moves along the single best
    change per sweep, needs a sweep per change). Sweeps repeat until one adopts nothing or ``out_of_time()``.

    ``time_of(pair)`` checks and times a candidate: (the pair as it ran, e.g. fitted to shared memory, and its time
    in seconds), or None when it was dropped or failed; it is called once per distinct pair, ``start`` first.
    Returns the fastest pair seen (``start`` if nothing beat it or it failed).
    """
    tried = {start}
    got = time_of(start)
    best, t_best = (start, None) if got is None else got
    while not out_of_time():
        before = best
        for name in field_names():
            for v in space[name.rpartition(".")[2]]:
                if out_of_time():
                    return best
                try:
                    cand = apply(best, {name: v})
                except TruepeakError:
                    continue
                if cand in tried:
                    continue
                tried.add(cand)
                got = time_of(cand)
                if got is not None and (t_best is None or got[1] < t_best):
                    best, t_best = got
        if best == before:
            break
    return best


def fit(cfg: KernelConfig, wfmt: str, gated: bool, w8a8: bool, k_dim: int, smem_limit: int) -> KernelConfig | None:
    """``cfg`` fitted to the device: None when ``block_k`` does not divide K (``k_dim``) or the tile does not fit
    ``smem_limit`` bytes of shared memory per block even with one stage; else ``cfg`` with its stages dropped until
    :meth:`KernelConfig.smem_bytes` fits (0 = no limit). The estimate is Triton 3.6's allocation for bf16 and w8a8 and
    an upper bound otherwise (tests/kernels/moe_triton/test_config.py); :class:`FusedMoE` checks the compiler's figure
    when it is built."""
    if k_dim % cfg.block_k:
        return None
    while smem_limit and cfg.smem_bytes(wfmt, gated, w8a8) > smem_limit:
        if cfg.num_stages <= 1:
            return None
        cfg = dataclasses.replace(cfg, num_stages=cfg.num_stages - 1)
    return cfg


def fit_pair(pair: tuple[KernelConfig, KernelConfig], wfmt: str, w8a8: bool, H: int, I: int,  # noqa: E741
             smem_limit: int) -> tuple[KernelConfig, KernelConfig] | None:
    """Both kernels fitted (:func:`fit`; gate/up reduces over K = H, down over K = I), or None if either does not."""
    a = fit(pair[0], wfmt, True, w8a8, H, smem_limit)
    b = fit(pair[1], wfmt, False, w8a8, I, smem_limit)
    return None if a is None or b is None else (a, b)


def refusal(wfmt: str, activations: str | None, H: int, I: int,  # noqa: E741
            capability: tuple[int, int] | None) -> str | None:
    """Why the kernels cannot run ``wfmt`` weights with ``activations`` on experts of hidden size ``H`` and width
    ``I`` on a GPU of compute ``capability`` (None: not checked), or None when they can: K (H for gate/up, I for
    down) in whole steps of 16 elements (64 for fp4: the tiled layout's 64 x 64 tiles, N too; 128 for fp8_block:
    its 128 x 128 scale blocks); fp8 activations need fp8 MMAs (compute capability 8.9 or newer: PTX ISA, ``mma``
    with ``.e4m3``)."""
    check_wfmt(wfmt)
    step = 64 if wfmt in ("nvfp4", "mxfp4") else 128 if wfmt == "fp8_block" else 16
    for name, v in (("H", H), ("I", I)):
        if v % step:
            return (f"{wfmt} weights need the expert's {name} in whole steps of {step} elements, got {name}={v}")
    if activations == "fp8" and capability is not None and tuple(capability) < (8, 9):
        return (f"{wfmt} weights with fp8 activations need fp8 MMAs (compute capability >= 8.9); this GPU is "
                f"sm_{capability[0]}{capability[1]}: use fp16 activations ({wfmt}:fp16)")
    return None


__all__ = ["KERNELS", "KERNEL_FIELDS", "Pair", "apply", "descend", "field_names", "fit", "fit_pair", "neighbours",
           "refusal", "search_space"]
