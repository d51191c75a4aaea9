"""The MoE expert layer on block-scaled MMAs (``tl.dot_scaled``): the native fp4 path for Blackwell.

**Not run on a Blackwell GPU:** only on an H200 (sm_90), through Triton's emulation. What is checked instead (the tests
and ``docs/results/cpu/moe_blockscaled_ptx.md``): the kernels compile with Triton 3.6's own ptxas for sm_100 and
sm_120 into the block-scaled MMA instructions named below, with shared memory inside each device's per-block limit;
they give the float32 reference's answer in Triton's interpreter on the CPU; and the mxfp4 variants, which Triton
also compiles for sm_90 by upcasting the operands to bf16, run on the H200 (``docs/results/h200/moe/``).

The unit of work is :class:`truepeak.kernels.moe_triton.FusedMoE`'s: ``x [T, H]``, ``topk_ids`` /
``topk_weights [T, k]`` → ``out [T, H] = Σ_j w[t, j] · down_e(silu(gate_e(x_t)) · up_e(x_t))``, with the same routing
metadata (:func:`~truepeak.kernels.moe_triton.align_routing`: token blocks of one expert, the block size chosen from
tokens per expert, docs/method.md 'Padding per expert') and the same swap-AB tiling (weights the MMA's M, tokens its N).

Where Hopper has no fp4 MMA and :class:`~truepeak.kernels.moe_triton.FusedMoE` decodes e2m1 in registers, Blackwell's
tensor cores take e2m1 values and their block scales directly (PTX ISA 8.7+, ``tcgen05.mma ... .block_scale`` on
sm_100a and ``mma.sync ... .block_scale`` on sm_120a): both operands must be block-scaled, so the activations are
quantised per row inside the call (:func:`~truepeak.kernels._moe_blockscaled_jit.quant_rows_blockscaled_kernel`):

- ``activations="fp4"`` (nvfp4's default): the activations in the weights' own format, W4A4 — NVFP4 (e2m1, e4m3
  scale per 16, and an fp32 scale per row standing in for NVIDIA's per-tensor one) or MXFP4 (e2m1, e8m0 per 32);
- ``activations="fp8"`` (mxfp4's default, mxfp4 weights only): MXFP8 activations (e4m3, e8m0 per 32), W4A8.

What Triton 3.6.0 makes of each (compiled here; the PTX's MMA instruction):

- nvfp4 x fp4: sm_100 ``tcgen05.mma ... kind::mxf4nvf4.block_scale.scale_vec::4X``; sm_120 ``mma.sync ... m16n8k64
  kind::mxf4nvf4.block_scale.scale_vec::4X`` with ue4m3 scales. Native on both.
- mxfp4 x fp4: sm_100 ``tcgen05.mma ... kind::mxf4.block_scale.scale_vec::2X``; sm_120 ``mma.sync ... m16n8k64
  kind::mxf4nvf4.block_scale.scale_vec::2X`` with ue8m0 scales. Native on both.
- mxfp4 x fp8: sm_100 ``tcgen05.mma ... kind::mxf8f6f4.block_scale.scale_vec::1X`` (native); sm_120 emulated (bf16
  ``mma.sync``: Triton 3.6 has no mxf8f6f4 lowering there).

On sm_90 (Hopper) Triton emulates the mxfp4 variants (operands upcast to bf16, then ``wgmma``): correct, and
runnable on the H200, but not the fast Hopper path (that is ``FusedMoE``'s); nvfp4's e4m3 block scales do not compile
for sm_90 in Triton 3.6, so nvfp4 needs sm_100 / sm_120 here (:func:`blockscaled_path`).

Bytes: the weights are read in the standard packed layout (``[E, N, K/2]`` uint8, element 2i in the low nibble, as
:mod:`truepeak.kernels.quant` packs and ``tl.dot_scaled`` reads them) with their scales ``[E, N, K/16]`` e4m3 or
``[E, N, K/32]`` e8m0; weights in FusedMoE's tiled layout are unpacked to it once, at construction.

torch and triton are imported lazily inside functions.
"""

from __future__ import annotations

import functools
from typing import Any

from truepeak.errors import TruepeakError, UnsupportedError, require
from truepeak.kernels.moe_triton import (ExpertWeights, KernelConfig, align_routing, check_inputs,
                                         check_tokens_per_expert, device_smem_limit, fit_shared_memory, interpreting,
                                         mean_tokens_per_expert)

#: Activation formats of the block-scaled kernels, per weight format (the first is the default).
ACTIVATIONS = {"nvfp4": ("fp4",), "mxfp4": ("fp8", "fp4")}

# (compute capability, weights, activations) -> how Triton 3.6.0 lowers tl.dot_scaled there (compiled for sm_90,
# sm_100, sm_103 and sm_120 by tests/kernels/test_moe_blockscaled.py and benchmarks/moe_blockscaled_ptx.py; see the
# module docstring). Exact capabilities: for sm_121 Triton 3.6 emulates mxfp4 and fails on nvfp4, for sm_110 it
# compiles nothing of this.
_TC05 = "native tcgen05.mma block_scale kind::{} (sm_{}{})"
_EMU = "emulated by Triton: operands upcast to bf16{} (sm_{}{} has no {} lowering in Triton 3.6)"
_NATIVE = {}
for _cc in ((10, 0), (10, 3)):
    _NATIVE[(_cc, "nvfp4", "fp4")] = _TC05.format("mxf4nvf4", *_cc)
    _NATIVE[(_cc, "mxfp4", "fp4")] = _TC05.format("mxf4", *_cc)
    _NATIVE[(_cc, "mxfp4", "fp8")] = _TC05.format("mxf8f6f4", *_cc)
_NATIVE[((12, 0), "nvfp4", "fp4")] = "native mma.sync block_scale kind::mxf4nvf4, ue4m3 scales (sm_120)"
_NATIVE[((12, 0), "mxfp4", "fp4")] = "native mma.sync block_scale kind::mxf4nvf4, ue8m0 scales (sm_120)"
_NATIVE[((12, 0), "mxfp4", "fp8")] = _EMU.format("", 12, 0, "mxf8f6f4")
_NATIVE[((9, 0), "mxfp4", "fp4")] = _EMU.format(", wgmma", 9, 0, "fp4 MMA")
_NATIVE[((9, 0), "mxfp4", "fp8")] = _EMU.format(", wgmma", 9, 0, "fp4 MMA")
#: Compute capabilities where the block-scaled kernel runs natively (the bench's ``--fp4-kernel auto`` picks it there).
NATIVE_CAPABILITIES = ((10, 0), (10, 3), (12, 0))


def _capability(capability: Any) -> tuple[int, int] | None:
    """(major, minor) of a capability tuple, or None when ``capability`` is None.

    Raises:
        TruepeakError: anything but a pair of integers."""
    if capability is None:
        return None
    import operator

    try:
        major, minor = capability
        return operator.index(major), operator.index(minor)
    except (TypeError, ValueError):
        raise TruepeakError(f"capability must be (major, minor), e.g. (10, 0) for sm_100, got {capability!r}") from None


def default_blockscaled_activations(wfmt: str, capability: Any = None) -> str:
    """The activations :class:`BlockScaledMoE` runs ``wfmt`` with by default: ``"fp4"`` for nvfp4 (W4A4, the only
    variant Triton 3.6 lowers to a block-scaled MMA with e4m3 scales), for mxfp4 ``"fp8"`` (MXFP8 activations: 8-bit
    rather than 4-bit activation values, the native ``kind::mxf8f6f4`` on sm_100 / sm_103) except on sm_120, where
    only mxfp4 W4A4 is native (``capability``: (major, minor) of the device; None: sm_100's choice).

    Raises:
        UnsupportedError: a weight format without block scales (bf16, fp8). TruepeakError: a malformed capability."""
    if wfmt not in ACTIVATIONS:
        raise UnsupportedError(f"the block-scaled kernels take nvfp4 or mxfp4 weights, not {wfmt!r} (bf16 and fp8 "
                               "run FusedMoE)")
    if wfmt == "mxfp4" and _capability(capability) == (12, 0):
        return "fp4"
    return ACTIVATIONS[wfmt][0]


def check_blockscaled_activations(wfmt: str, activations: str | None, capability: Any = None) -> str:
    """``activations`` (or the default for ``capability``) checked against ``wfmt``: nvfp4 takes ``"fp4"``, mxfp4
    ``"fp8"`` or ``"fp4"``.

    Raises:
        UnsupportedError: a weight format without block scales. TruepeakError: activations the format does not take.
    """
    default = default_blockscaled_activations(wfmt, capability)
    if activations is None:
        return default
    acts = str(activations).lower()
    if acts not in ACTIVATIONS[wfmt]:
        raise TruepeakError(f"the block-scaled kernels run {wfmt} weights with activations "
                            f"{' or '.join(repr(a) for a in ACTIVATIONS[wfmt])}, got {activations!r}")
    return acts


def blockscaled_path(wfmt: str, activations: str | None, capability: tuple[int, int]) -> tuple[str, bool]:
    """How the block-scaled kernels run ``wfmt`` weights with ``activations`` on a GPU of compute capability
    ``capability`` (major, minor), as Triton 3.6.0 compiles them (the module docstring's list).

    Returns:
        ``(description, native)``: native is True where the MMA takes the block-scaled operands itself.

    Raises:
        UnsupportedError: a combination Triton does not compile for that device (nvfp4 below sm_100; anything below
            sm_90, or on a major version this was not compiled for), naming what would run.
        TruepeakError: activations the format does not take.
    """
    cc = _capability(capability)
    if cc is None:
        raise TruepeakError("capability must be (major, minor), e.g. (10, 0) for sm_100, got None")
    acts = check_blockscaled_activations(wfmt, activations, cc)
    major, minor = cc
    path = _NATIVE.get((cc, wfmt, acts))
    if path is None:
        other = "FusedMoE (the dequantising kernels)" if major >= 8 else "a GPU of sm_90 or later"
        if cc == (9, 0) and wfmt == "nvfp4":
            why = "Triton 3.6 does not lower tl.dot_scaled with e4m3 (nvfp4) block scales for sm_90"
        else:
            why = ("compiled for sm_90, sm_100, sm_103 and sm_120 only (Triton 3.6 fails on or emulates the others, "
                   "sm_121 included)")
        raise UnsupportedError(f"the block-scaled MoE kernel does not run {wfmt} weights with {acts} activations on "
                               f"sm_{major}{minor}: {why}; use {other}")
    return path, path.startswith("native")


def blockscaled_block_k(k_dim: int) -> int:
    """The K step of the block-scaled kernels: 256, 128 or 64 elements, the largest dividing K (one step is at most
    128 bytes of a packed weight row; 64 is the K of one fp4 MMA instruction).

    Raises:
        TruepeakError: K not a positive integer. UnsupportedError: K not a multiple of 64."""
    import operator

    try:
        k_dim = -1 if isinstance(k_dim, bool) else operator.index(k_dim)
    except TypeError:
        k_dim = -1
    if k_dim <= 0:
        raise TruepeakError(f"K (the GEMM's reduction size) must be a positive integer, got {k_dim!r}")
    for bk in (256, 128, 64):
        if k_dim % bk == 0:
            return bk
    raise UnsupportedError(f"K={k_dim} is not a multiple of 64: the block-scaled MoE kernel needs K in whole steps "
                           "of 64 elements")


def choose_blockscaled_config(tokens_per_expert: float, k_dim: int, gated: bool = False,
                              capability: Any = None) -> KernelConfig:
    """The tile for one of the two GEMMs: ``block_m`` (tokens, the MMA's N) from the mean tokens per expert
    (docs/method.md, 'Padding per expert': 16 up to 16, then 32, 64, 128; at most 64 on sm_120, where ``mma.sync`` keeps
    the accumulator in registers and 128-token blocks spill: 255 registers and a stack, compiled), 128 weight rows (the
    M of one ``tcgen05.mma``; ``gated``, the gate/up GEMM: 64 gate rows and the 64 matching up rows in one tile), the K
    step of :func:`blockscaled_block_k`, 4 warps (one warpgroup), 3 stages (fewer where the device's shared memory needs
    it: :func:`~truepeak.kernels.moe_triton.fit_shared_memory`). Not tuned on a Blackwell device.

    Raises:
        TruepeakError: tokens per expert not a finite number > 0. UnsupportedError: K not a multiple of 64."""
    t = check_tokens_per_expert(tokens_per_expert)
    bm = 16 if t <= 16 else 32 if t <= 32 else 64 if t <= 64 else 128
    if _capability(capability) == (12, 0):
        bm = min(bm, 64)
    return KernelConfig(bm, 64 if gated else 128, blockscaled_block_k(k_dim), 4, 3)


def fake_quantize_rows(a: Any, fmt: str) -> Any:
    """float ``[R, C]`` → float32 ``[R, C]`` quantised and dequantised per row as the block-scaled kernels quantise
    activations (:mod:`truepeak.kernels.quant`): ``"mxfp8"`` / ``"mxfp4"`` (OCP MX, e8m0 per 32) or ``"nvfp4"`` (e4m3
    per 16 and an fp32 scale per row, ``amax(row) / (448 · 6)``, 1 for a zero row). For references
    (:func:`~truepeak.kernels.moe_triton.moe_reference`'s ``act_quant``).

    Raises:
        TruepeakError: an unknown ``fmt``, or C not a multiple of the format's block."""
    torch = require("torch", "quantising activations")
    from truepeak.kernels import quant

    a = a.float()
    if fmt not in ("mxfp8", "mxfp4", "nvfp4"):
        raise TruepeakError(f"unknown activation format {fmt!r}; expected mxfp8, mxfp4 or nvfp4")
    if a.numel() == 0:
        return a.clone()
    if fmt == "mxfp8":
        return quant.dequantize_mxfp8(*quant.quantize_mxfp8(a))
    if fmt == "mxfp4":
        return quant.dequantize_mxfp4(*quant.quantize_mxfp4(a))
    amax = a.abs().amax(dim=-1, keepdim=True)  # nvfp4, with the per-row scale standing in for the per-tensor one
    g = torch.where(amax > 0, amax / (quant.E4M3_MAX * quant.E2M1_MAX), torch.ones_like(amax))
    packed, scales, g = quant.quantize_nvfp4(a, global_scale=g)
    return quant.dequantize_nvfp4(packed, scales, g)


@functools.lru_cache(maxsize=None)
def _jit() -> Any:
    require("triton", "truepeak's block-scaled MoE kernel", "pip install triton")
    from truepeak.kernels import _moe_blockscaled_jit

    return _moe_blockscaled_jit


class BlockScaledMoE:
    """A prepared launch of the block-scaled MoE kernels for one routing (the interface of
    :class:`~truepeak.kernels.moe_triton.FusedMoE`): ``BlockScaledMoE(x, w1, w2, topk_ids, topk_weights)()`` returns
    ``out [T, H]`` in x's dtype. ``__init__`` builds buffers and routing metadata (outside any timed region);
    ``__call__`` only launches kernels (quantise x, gate/up, quantise the intermediate, down, combine) and is CUDA-graph
    capturable.

    Args:
        x: ``[T, H]`` hidden states (bf16, fp16 or fp32). w1 / w2: nvfp4 or mxfp4
            :class:`~truepeak.kernels.moe_triton.ExpertWeights` ``[E, 2I, H]`` / ``[E, H, I]`` (any layout; the
            standard one is read, a copy is made of others). topk_ids / topk_weights: ``[T, k]``.
        tokens_per_expert: the configuration key (docs/method.md, 'Padding per expert'); default the mean over experts
            with tokens.
        activations: ``"fp4"`` or ``"fp8"`` (:func:`check_blockscaled_activations`; None: the format's default).
        config: one :class:`~truepeak.kernels.moe_triton.KernelConfig` for both kernels (tests); block_k must divide
            H and I and be a multiple of 64.

    Attributes:
        path: how the device runs it (:func:`blockscaled_path`; in the interpreter "Triton interpreter (CPU)").
        native: whether that is the block-scaled MMA itself. activations: the activations' format, in words;
        act_format: its name for :func:`fake_quantize_rows` ("mxfp8", "mxfp4" or "nvfp4").

    Accuracy: the activations are rounded to 4 (W4A4) or 8 bits per value, so the output is further from a float32
    reference than with the dequantising kernels' fp16 or per-row e4m3 activations. On the H200, DeepSeek-V3 shapes
    (docs/results/h200/moe/README.md), as fractions of max |output| against unrounded activations: mxfp4 W4A8
    8.6e-2 and W4A4 0.29, where FusedMoE's mxfp4 w4a8 is 3.8e-2. Against the reference computed with the same
    activation rounding the kernel agrees to bf16 output rounding (CPU tests, GPU tests). Inputs holding inf or NaN
    give NaN output rows. In Triton's interpreter (the CPU path) an e8m0 scale byte of 0 decodes as 0, not 2^-127, so
    activation blocks whose largest magnitude is below 2^-119 (mxfp8) or 2^-125 (mxfp4) come out as zeros there.

    Raises:
        TruepeakError: as FusedMoE's input checks; activations the format does not take; a config whose block_k does
            not divide H and I. UnsupportedError: bf16/fp8 weights; no GPU and no interpreter; a device or
            combination Triton does not compile (:func:`blockscaled_path`); a tile that does not fit the device's
            shared memory.
    """

    def __init__(self, x: Any, w1: ExpertWeights, w2: ExpertWeights, topk_ids: Any, topk_weights: Any,
                 tokens_per_expert: float | None = None, activations: str | None = None,
                 config: KernelConfig | None = None):
        torch = require("torch", "running the MoE kernel")
        if w1.wfmt not in ACTIVATIONS:
            raise UnsupportedError(f"the block-scaled kernels take nvfp4 or mxfp4 weights, got {w1.wfmt!r} (bf16 and "
                                   "fp8 run FusedMoE)")
        self.E, self.I, self.H, self.T, self.k = check_inputs(x, w1, w2, topk_ids, topk_weights)
        check_blockscaled_activations(w1.wfmt, activations)  # a bad value named before anything else
        if x.device.type != "cuda" and not interpreting():
            raise UnsupportedError(f"the MoE kernels run on a CUDA GPU (x is on {x.device}); on a CPU set "
                                   "TRITON_INTERPRET=1 before importing triton to run them in Triton's interpreter")
        cc = None if interpreting() else tuple(torch.cuda.get_device_capability(x.device))
        acts = check_blockscaled_activations(w1.wfmt, activations, cc)
        if cc is None:
            self.path, self.native = "Triton interpreter (CPU)", False
        else:
            self.path, self.native = blockscaled_path(w1.wfmt, acts, cc)
        jit = _jit()
        fmt = "mxfp8" if acts == "fp8" else w1.wfmt
        self.act_format = fmt
        self.xfmt = {"mxfp8": jit.MXFP8, "mxfp4": jit.MXFP4, "nvfp4": jit.NVFP4}[fmt].value
        self.group = 16 if fmt == "nvfp4" else 32
        self.activations = {"mxfp8": "mxfp8 (e4m3, e8m0 per 32)", "mxfp4": "mxfp4 (e2m1, e8m0 per 32)",
                            "nvfp4": "nvfp4 (e2m1, e4m3 per 16, fp32 per row)"}[fmt]
        if tokens_per_expert is None:
            tokens_per_expert = mean_tokens_per_expert(topk_ids, self.E)
        tokens_per_expert = check_tokens_per_expert(tokens_per_expert)
        if config is not None:
            for kd in (self.H, self.I):
                if kd % config.block_k or config.block_k % 64:
                    raise TruepeakError(f"config.block_k={config.block_k} must be a multiple of 64 dividing H={self.H} "
                                        f"and I={self.I}")
            self.cfg1 = self.cfg2 = config
        else:
            self.cfg1 = choose_blockscaled_config(tokens_per_expert, self.H, gated=True, capability=cc)
            self.cfg2 = choose_blockscaled_config(tokens_per_expert, self.I, capability=cc)
        self.w1, self.w2 = (self._standard(w) for w in (w1, w2))
        self.align = align_routing(topk_ids, self.E, self.cfg1.block_m)
        self.topw = topk_weights.reshape(-1).float().contiguous()
        dev = x.device
        self.x = x
        n_slots = self.T * self.k
        self.inter = torch.zeros(n_slots, self.I, dtype=torch.float32, device=dev)
        self.xq, self.xs, self.xg = self._act_buffers(self.T, self.H, dev)
        self.interq, self.inters, self.interg = self._act_buffers(n_slots, self.I, dev)
        self.partial = torch.zeros(n_slots, self.H, dtype=x.dtype, device=dev)
        self.out = torch.empty(self.T, self.H, dtype=x.dtype, device=dev)
        self._ones = torch.ones(self.E, dtype=torch.float32, device=dev)
        if dev.type == "cuda" and not interpreting() and self.align.num_blocks:
            self.cfg1, self.cfg2 = fit_shared_memory(self._launch, self.cfg1, self.cfg2, device_smem_limit(dev))

    @staticmethod
    def _standard(w: ExpertWeights) -> ExpertWeights:
        """``w`` in the standard packed layout (itself when it is; a copy of the bytes otherwise)."""
        if not w.nibble_chunk and not w.w4a8_layout:
            return w
        return ExpertWeights(w.wfmt, w.standard_bytes().contiguous(), w.scale, w.global_scale)

    def _act_buffers(self, rows: int, cols: int, dev: Any) -> tuple[Any, Any, Any]:
        """Quantised activations ``[rows, cols]`` (e4m3, or e2m1 packed ``[rows, cols/2]``), their block scales
        ``[rows, cols/group]`` (e8m0 bytes or e4m3) and per-row fp32 scales ``[rows]``."""
        torch = require("torch", "running the MoE kernel")
        if cols % self.group:
            raise UnsupportedError(f"{cols} is not a multiple of the activations' {self.group}-element scale block")
        fp8 = self.xfmt == _jit().MXFP8.value
        q = (torch.empty(rows, cols, dtype=torch.float8_e4m3fn, device=dev) if fp8 else
             torch.empty(rows, cols // 2, dtype=torch.uint8, device=dev))
        sdt = torch.float8_e4m3fn if self.group == 16 else torch.uint8
        return q, torch.empty(rows, cols // self.group, dtype=sdt, device=dev), torch.ones(rows, device=dev)

    def _quant(self, src: Any, q: Any, s: Any, g: Any) -> None:
        rows, cols = src.shape
        if not rows:
            return
        block = min(4096, max(self.group * 2, 1 << (cols - 1).bit_length()))
        _jit().quant_rows_blockscaled_kernel[(rows,)](src, q, s, g, src.stride(0), q.stride(0), s.stride(0),
                                                      n_cols=cols, BLOCK=block, XFMT=self.xfmt,
                                                      INTERP=interpreting(), num_warps=4)

    def _launch(self, which: int, cfg: KernelConfig, warmup: bool = False) -> Any:
        """Launch kernel 1 (gate/up) or 2 (down); with ``warmup`` only compile it and return the compiled kernel."""
        jit = _jit()
        a = self.align
        w = self.w1 if which == 1 else self.w2
        g = w.global_scale if w.global_scale is not None else self._ones
        kw = dict(WG=16 if w.wfmt == "nvfp4" else 32, XFMT=self.xfmt, BLOCK_M=cfg.block_m, BLOCK_N=cfg.block_n,
                  BLOCK_K=cfg.block_k, INTERP=interpreting(), num_warps=cfg.num_warps,
                  num_stages=cfg.num_stages)
        wst = (w.data.stride(0), w.data.stride(1), w.scale.stride(0), w.scale.stride(1))
        if which == 1:
            grid = (a.num_blocks * -(-self.I // cfg.block_n),)
            args = (self.xq, self.xs, self.xg, w.data, w.scale, g, self.inter, a.sorted_slots, a.block_expert,
                    a.num_blocks, a.num_slots, self.k, self.I, self.H, self.xq.stride(0), self.xs.stride(0),
                    self.inter.stride(0), *wst)
            kernel = jit.scaled_gate_up_kernel
        else:
            grid = (a.num_blocks * -(-self.H // cfg.block_n),)
            args = (self.interq, self.inters, self.interg, w.data, w.scale, g, self.partial, a.sorted_slots,
                    a.block_expert, self.topw, a.num_blocks, a.num_slots, self.H, self.I, self.interq.stride(0),
                    self.inters.stride(0), self.partial.stride(0), *wst)
            kernel = jit.scaled_down_kernel
        if warmup:
            return kernel.warmup(*args, grid=grid, **kw)
        return kernel[grid](*args, **kw)

    def __call__(self) -> Any:
        if self.align.num_blocks == 0:
            self.out.zero_()
            return self.out
        self._quant(self.x, self.xq, self.xs, self.xg)
        self._launch(1, self.cfg1)
        self._quant(self.inter, self.interq, self.inters, self.interg)
        self._launch(2, self.cfg2)
        require("torch", "running the MoE kernel").sum(self.partial.view(self.T, self.k, self.H), dim=1,
                                                         out=self.out)
        return self.out
