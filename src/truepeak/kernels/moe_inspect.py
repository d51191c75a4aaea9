"""Compile truepeak's MoE gate/up kernel for a GPU target on any machine (no GPU needed: Triton's bundled ptxas) and
read what the compiler made of it: shared memory, registers, and the instruction mix of the K loop in SASS.

Used by the tests (choose_config's shared-memory estimate against Triton's allocation) and by
``benchmarks/moe_kernel_sass.py`` (instructions per weight value, the evidence for what bounds the fp4 kernel).
triton is imported inside the functions.
"""

from __future__ import annotations

import collections
import os
import re
import subprocess
import tempfile
from dataclasses import dataclass
from typing import Any

from truepeak.errors import require
from truepeak.kernels.moe_triton.config import WFMT_ID


def _compile(fn: Any, sig: dict, consts: dict, cfg: Any, capability: int, divisible: tuple = ()) -> Any:
    """``triton.compile`` of ``fn`` for sm_``capability`` with ``cfg``'s warps, stages and register cap; pointers,
    strides and the ``divisible`` arguments marked 16-byte divisible, as Triton's JIT marks real tensors."""
    triton = require("triton", "compiling the MoE kernel", "pip install triton")
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    sig = {**sig, **{k: "constexpr" for k in consts}}
    attrs = {(fn.arg_names.index(n),): [["tt.divisibility", 16]] for n, t in sig.items()
             if t.startswith("*") or n.startswith("stride") or n in divisible}
    return triton.compile(ASTSource(fn=fn, signature=sig, constexprs=consts, attrs=attrs),
                          target=GPUTarget("cuda", capability, 32),
                          options={"num_warps": cfg.num_warps, "num_stages": cfg.num_stages,
                                   **({"maxnreg": cfg.maxnreg} if getattr(cfg, "maxnreg", None) else {})})


def compile_gate_up(cfg: Any, wfmt: str, w8a8: bool = False, capability: int = 90, H: int = 7168,
                    I: int = 2048, tiled: bool = True, mma: bool = False) -> Any:  # noqa: E741 - the expert width
    """The gate/up kernel compiled for ``capability`` (e.g. 90 = sm_90) with ``cfg`` (a KernelConfig), weights
    ``wfmt``, K = H and 2I weight rows. Pointers and strides are marked 16-byte divisible, as Triton's JIT marks
    them for real expert tensors. ``tiled`` (fp4): the weights in the tiled layout (w4a8 and the tiled w4a16;
    False: the untiled w4a16 kernel). ``mma`` (fp4): the weights in the MMA layout (:func:`~truepeak.kernels.
    moe_triton.to_mma_layout`; fp16 or, with ``w8a8``, e4m3 activations). Returns Triton's CompiledKernel
    (``.metadata.shared`` bytes, ``.asm``)."""
    from truepeak.kernels import _moe_jit

    w = {"bf16": "*bf16", "fp8": "*fp8e4nv", "fp8_block": "*fp8e4nv", "nvfp4": "*u8", "mxfp4": "*u8"}[wfmt]
    sc = {"bf16": "*fp32", "fp8": "*fp32", "fp8_block": "*fp32", "nvfp4": "*fp8e4nv", "mxfp4": "*u8"}[wfmt]
    fp4 = wfmt in ("nvfp4", "mxfp4")
    tiled = fp4 and (tiled or w8a8 or mma)
    if tiled:
        sc = "*i32"  # the tiled kernels read the block scales as one int32 word per row and step
    act = "*fp8e4nv" if w8a8 else "*bf16" if wfmt == "bf16" else "*fp16"  # w8a8: fp8 or fp4 weights, fp8 x
    fn = _moe_jit.gate_up_kernel
    # the intermediate as FusedMoE allocates it: bf16 for bf16 weights and for fp8 activations (with bf16 x), float32
    # for fp16 activations (scaled per row after the kernel)
    sig = {"x_ptr": act, "xs_ptr": "*fp32", "w_ptr": w, "ws_ptr": sc, "wgs_ptr": "*fp32",
           "out_ptr": "*bf16" if wfmt == "bf16" or (w8a8 and not mma) else "*fp32", "sorted_ptr": "*i32", "bexp_ptr": "*i32",
           "num_blocks": "i32", "num_slots": "i32", "top_k": "i32", "stride_x": "i32", "stride_out": "i32",
           "stride_we": "i32", "stride_wn": "i32", "x_plane": "i32", "num_programs": "i32"}
    consts = {"I": I, "H": H, "WFMT": WFMT_ID[wfmt], "BLOCK_M": cfg.block_m, "BLOCK_N": cfg.block_n,
              "BLOCK_K": cfg.block_k, "INTERP": False, "PREFETCH": cfg.prefetch, "HOIST": cfg.hoist, "ACT8": w8a8,
              "TILED": tiled, "XSCALE": wfmt != "bf16", "MMAL": fp4 and mma, "PERSIST": cfg.persistent,
              "GROUP_M": cfg.group_m}  # quantised weights: per-row activation scales, as FusedMoE
    return _compile(fn, sig, consts, cfg, capability, divisible=("x_plane",))


@dataclass
class LoopReport:
    """The compiled kernel's main K loop: ``instructions`` per iteration per thread, their ``mix`` (SASS opcode →
    count), ``registers`` per thread, ``shared_bytes`` per program, and ``values_per_thread`` (weight values one
    thread handles per iteration: tiles x block_n x block_k / threads)."""

    instructions: int
    mix: dict
    registers: int | None
    shared_bytes: int
    values_per_thread: float

    @property
    def per_value(self) -> float:
        """SASS instructions per weight value per thread."""
        return self.instructions / self.values_per_thread


def _nvidia_tool(name: str) -> str:
    triton = require("triton", "reading SASS")
    return os.path.join(os.path.dirname(triton.__file__), "backends", "nvidia", "bin", name)


def _cuobjdump(compiled: Any, *flags: str) -> list[str]:
    """cuobjdump (from Triton's wheel) of the compiled kernel's cubin, once per flag."""
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "k.cubin")
        with open(path, "wb") as f:
            f.write(compiled.asm["cubin"])
        return [subprocess.run([_nvidia_tool("cuobjdump"), flag, path], capture_output=True, text=True,
                               check=True).stdout for flag in flags]


def _parse_res_usage(out: str) -> dict:
    return {name: int(m.group(1)) if (m := re.search(key + r":(\d+)", out)) else None
            for name, key in (("registers", "REG"), ("stack", "STACK"))}


def resource_usage(compiled: Any) -> dict:
    """A compiled kernel's registers per thread and stack bytes per thread (``{"registers": R, "stack": S}``; a stack
    above 0 means spills), from cuobjdump -res-usage (no GPU needed)."""
    return _parse_res_usage(_cuobjdump(compiled, "-res-usage")[0])


def sass_loop_report(compiled: Any, cfg: Any, gated: bool = True) -> LoopReport:
    """Disassemble ``compiled`` (cuobjdump from Triton's wheel) and report its longest backward-branch loop (the K
    loop) and the register count."""
    sass, res = _cuobjdump(compiled, "-sass", "-res-usage")
    lines = [ln for ln in sass.splitlines() if re.search(r"/\*[0-9a-f]{4,5}\*/", ln)]

    def addr(ln: str) -> int:
        return int(re.search(r"/\*([0-9a-f]{4,5})\*/", ln).group(1), 16)

    best: list[str] = []
    for ln in lines:
        target = re.search(r"BRA\s+(?:`\(\.L_x_\d+\)\s*)?0x([0-9a-f]+)", ln)
        if target and int(target.group(1), 16) < addr(ln):
            body = [x for x in lines if int(target.group(1), 16) <= addr(x) <= addr(ln)]
            best = body if len(body) > len(best) else best
    mix = collections.Counter(re.findall(r"\*/\s+(?:@!?U?P\w+\s+)?([A-Z][A-Z0-9_]*)", "\n".join(best)))
    tiles = 2 if gated else 1
    return LoopReport(len(best), dict(mix.most_common()), _parse_res_usage(res)["registers"],
                      int(compiled.metadata.shared),
                      tiles * cfg.block_n * cfg.block_k / (32 * cfg.num_warps))


def compile_blockscaled(cfg: Any, wfmt: str, activations: str, capability: int, H: int = 7168,
                        I: int = 2048) -> Any:  # noqa: E741 - the field's name for the expert width
    """The block-scaled gate/up kernel (:mod:`truepeak.kernels.moe_blockscaled`) compiled for ``capability`` (90,
    100, 120, ...) with ``cfg``, ``wfmt`` weights (nvfp4 / mxfp4) and ``activations`` ("fp4" / "fp8"), K = H and 2I
    weight rows; pointers and strides marked 16-byte divisible as the JIT marks real tensors. Returns Triton's
    CompiledKernel (``.asm["ptx"]`` holds the MMA instruction, ``.metadata.shared`` the shared memory).

    Any capability Triton has a target for is compiled, including those :func:`~truepeak.kernels.moe_blockscaled.
    blockscaled_path` refuses (sm_121, where Triton 3.6 emulates mxfp4 and fails on nvfp4).

    Raises:
        TruepeakError / UnsupportedError: a format or activations the block-scaled kernel does not take, a malformed
        capability, H or I not multiples of ``cfg.block_k``. Triton's compilation error where Triton does not lower
        the combination for that target (nvfp4 on sm_90 and sm_121)."""
    from truepeak.errors import TruepeakError
    from truepeak.kernels import _moe_blockscaled_jit as jit
    from truepeak.kernels.moe_blockscaled import check_blockscaled_activations

    activations = check_blockscaled_activations(wfmt, activations)
    if isinstance(capability, bool) or not isinstance(capability, int) or capability < 80:
        raise TruepeakError(f"capability must be an integer such as 90, 100 or 120, got {capability!r}")
    if H % cfg.block_k or I % cfg.block_k:
        raise TruepeakError(f"H={H} and I={I} must be multiples of block_k={cfg.block_k}")
    fp8 = activations == "fp8"
    xfmt = jit.MXFP8.value if fp8 else jit.NVFP4.value if wfmt == "nvfp4" else jit.MXFP4.value
    e4m3_scales = "*fp8e4nv" if wfmt == "nvfp4" else "*u8"
    fn = jit.scaled_gate_up_kernel
    sig = {"x_ptr": "*fp8e4nv" if fp8 else "*u8", "xs_ptr": e4m3_scales if not fp8 else "*u8", "xg_ptr": "*fp32",
           "w_ptr": "*u8", "ws_ptr": e4m3_scales, "wgs_ptr": "*fp32", "out_ptr": "*fp32", "sorted_ptr": "*i32",
           "bexp_ptr": "*i32", "num_blocks": "i32", "num_slots": "i32", "top_k": "i32", "stride_x": "i32",
           "stride_xs": "i32", "stride_out": "i32", "stride_we": "i32", "stride_wn": "i32", "stride_se": "i32",
           "stride_sn": "i32"}
    consts = {"I": I, "H": H, "WG": 16 if wfmt == "nvfp4" else 32, "XFMT": xfmt, "BLOCK_M": cfg.block_m,
              "BLOCK_N": cfg.block_n, "BLOCK_K": cfg.block_k, "INTERP": False}
    return _compile(fn, sig, consts, cfg, capability)


def mma_instructions(compiled: Any) -> list[str]:
    """The distinct MMA instructions in a compiled kernel's PTX (``tcgen05.mma...``, ``mma.sync...``,
    ``wgmma.mma_async...``), sorted."""
    ptx = compiled.asm["ptx"]
    return sorted(set(re.findall(r"\b(tcgen05\.mma[\w.:]*|mma\.sync[\w.:]*|wgmma\.mma_async[\w.:]*)", ptx)))
