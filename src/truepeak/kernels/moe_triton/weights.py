"""Expert weights in a kernel format (:class:`ExpertWeights`: values, block scales, per-expert scale, layout) and
their quantisation from float weights (:func:`quantize_experts`). torch is imported inside the functions."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from truepeak.errors import TruepeakError, require
from truepeak.kernels.moe_triton.config import check_wfmt, fp4_block_k, w4a8_block_k
from truepeak.kernels.moe_triton.layouts import (from_kernel_nibble_order, from_mma_layout, from_w4a8_layout,
                                                 to_kernel_nibble_order, to_mma_layout, to_w4a8_layout)


@dataclass
class ExpertWeights:
    """One projection's expert weights in a kernel format: ``data`` ``[E, N, K]`` (``[E, N, K//2]`` uint8 for fp4),
    ``scale`` (None for bf16; fp32 ``[E, N]`` for fp8; fp32 ``[E, N//128, K//128]`` for fp8_block; e4m3
    ``[E, N, K//16]`` for nvfp4; uint8 ``[E, N, K//32]`` for mxfp4), ``global_scale`` (fp32 ``[E]``: nvfp4's
    per-tensor scale; for mxfp4 None, or the power of two its scales were rebased by in :meth:`in_kernel_order`),
    ``nibble_chunk`` (fp4 only: 0 = the standard nibble order, c > 0 = :func:`to_kernel_nibble_order` with chunk c;
    the kernels need c = the kernel's ``block_k`` and repack otherwise), ``w4a8_layout`` (fp4 only: the bytes are in
    the w4a8 kernel's layout, :func:`to_w4a8_layout`: 64-element nibble chunks, the e4m3 bit layout and 64-row x
    64-element tiles stored contiguously), ``mma_layout`` (fp4 only: the bytes are in the MMA layout,
    :func:`to_mma_layout`, which the fp4 kernels read by default)."""

    wfmt: str
    data: Any
    scale: Any = None
    global_scale: Any = None
    nibble_chunk: int = 0
    w4a8_layout: bool = False
    mma_layout: bool = False
    _words: Any = field(default=None, init=False, repr=False, compare=False)  # w4a8_scale_words' cache

    def w4a8_scale_words(self, block_k: int | None = None) -> Any:
        """The block scales as the w4a8 kernel reads them: int32 ``[E, K/BK, N]`` (BK = ``block_k``, default
        :func:`w4a8_block_k` of K), word ``[e, s, n]`` = the scale bytes of row n's K step s (little-endian: the
        step's first block in the low byte; 4 blocks per word, or 2 and two zero bytes for mxfp4 with 64-element
        steps), step-major so one step's words of consecutive rows are contiguous (coalesced loads). Made once per
        weights object and step (a copy of the scales: 1/16 (nvfp4) or 1/32 (mxfp4; 1/16 with 64-element steps) byte
        per weight).

        Raises:
            TruepeakError: not fp4, or a step that is not 4 (or, mxfp4, 2) scale blocks dividing K."""
        if self.wfmt not in ("nvfp4", "mxfp4"):
            raise TruepeakError(f"{self.wfmt} weights have no fp4 block scales")
        e, n, k = self.shape
        bk = block_k or w4a8_block_k(self.wfmt, k)
        g = 16 if self.wfmt == "nvfp4" else 32
        if bk not in ((64,) if g == 16 else (64, 128)) or k % bk:
            raise TruepeakError(f"no w4a8 scale words for {self.wfmt} with K={k} in steps of {bk} (steps of "
                                f"{'64' if g == 16 else '64 or 128'} elements dividing K)")
        # cached per step and per state of the scale tensor (its identity and in-place version counter), so scales
        # replaced or loaded in place are repacked again
        key = (bk, id(self.scale), getattr(self.scale, "_version", None))
        words = self._words if isinstance(self._words, dict) else {}
        if key not in words:
            torch = require("torch", "repacking fp4 scales")
            b = self.scale.contiguous().view(torch.uint8).reshape(e, n, k // bk, bk // g)
            if bk // g < 4:  # mxfp4 in 64-element steps: 2 scale bytes, zero-padded to a word
                b = torch.cat([b, torch.zeros_like(b)], dim=-1)
            w = b.contiguous().view(torch.int32).reshape(e, n, k // bk).transpose(1, 2)
            words = {key: w.contiguous().clone()}  # a copy even where the transpose is a view (one step)
            self._words = words
        return words[key]

    def mma_scale_words(self, block_k: int | None = None) -> Any:
        """The block scales as the MMA-layout kernel reads them: :meth:`w4a8_scale_words` (nvfp4 in 64-element
        steps: e4m3 bytes), for mxfp4 with each e8m0 byte re-encoded as the e5m2 byte of the same power of two
        (2^-16..2^15 exactly; smaller ones 0, 255 (NaN) e5m2's NaN 0x7F), which the hardware converts to fp16 two
        at a time (PTX ISA, cvt.f16x2.e5m2x2). The scales rebased per expert by :meth:`in_kernel_order` are at
        most 2^9; blocks down to 2^18 below their expert's largest multiply exactly in fp16 (the decoded value x
        2^-14 times a scale >= 2^-9 stays >= 2^-24, fp16's smallest subnormal), blocks further below round to fp16's
        subnormals, and blocks more than 2^25 below become 0.

        Raises:
            TruepeakError: as :meth:`w4a8_scale_words`."""
        if self.wfmt == "nvfp4":
            return self.w4a8_scale_words(64)
        words = self.w4a8_scale_words(block_k)
        key = ("e5m2", block_k, id(self.scale), getattr(self.scale, "_version", None))
        cache = self._words
        if key not in cache:
            torch = require("torch", "repacking fp4 scales")
            b = words.contiguous().view(torch.uint8).to(torch.int32)
            p = b - 127
            enc = torch.where(p >= -14, (p + 15) << 2, torch.where(p == -15, 2, torch.where(p == -16, 1, 0)))
            enc = torch.where(b == 255, 0x7F, enc)
            cache[key] = enc.to(torch.uint8).view(torch.int32).reshape(words.shape).contiguous()
        return cache[key]

    def in_kernel_order(self, chunk: int | None = None, w4a8: bool = False, mma: bool = False) -> "ExpertWeights":
        """These weights as the fp4 kernels read them (self when already so, or when not fp4; otherwise a copy):
        bytes in the kernel's nibble order with ``chunk`` (default :func:`fp4_block_k` of K; the kernel's
        ``block_k``) or, with ``w4a8``, in the w4a8 kernel's layout (:func:`to_w4a8_layout`; ``chunk`` None or
        64), and for mxfp4 the e8m0 scales rebased per expert so that the largest is 136 (2^9), with the
        rebasing power of two folded into the per-expert ``global_scale`` that the kernel applies after the K loop:
        the fp16 block scales then do not depend on the weights' magnitude. Dequantised values are unchanged except
        for blocks more than 2^136 below their expert's largest (they become 2^-127 x value); NaN scales (255) stay
        255 (the tiled kernels decode them as NaN, the untiled w4a16 kernel as inf). The rebasing is per expert, not per
        row: a row 10^8 times larger than the rest of its expert leaves the others in fp16's subnormal range (seen
        in Triton's interpreter). ``mma``: the MMA layout (:func:`to_mma_layout`) instead, rebased alike."""
        if self.wfmt not in ("nvfp4", "mxfp4"):
            return self
        torch = require("torch", "repacking fp4 weights")
        if w4a8 and chunk not in (None, 64):
            raise TruepeakError(f"the w4a8 layout has 64-element nibble chunks, not {chunk}")
        if mma and (w4a8 or chunk not in (None, 64)):
            raise TruepeakError("the MMA layout is a layout of its own: pass mma=True alone")
        chunk = 64 if w4a8 or mma else chunk or fp4_block_k(self.shape[2])
        w = self
        if w.nibble_chunk != chunk or w.w4a8_layout != w4a8 or w.mma_layout != mma:
            std = w.standard_bytes()
            data = (to_mma_layout(std) if mma else to_w4a8_layout(std) if w4a8 else
                    to_kernel_nibble_order(std, chunk))
            w = ExpertWeights(w.wfmt, data, w.scale, w.global_scale, chunk, w4a8, mma)
        if w.wfmt == "mxfp4":
            s = w.scale.to(torch.int32)
            finite = torch.where(s == 255, torch.zeros_like(s), s)  # 255 is e8m0's NaN
            off = finite.flatten(1).amax(dim=1) - 136  # per expert: the largest scale becomes 2^(136 - 127) = 2^9
            if bool((off != 0).any()):
                rebased = torch.where(s == 255, s, (s - off[:, None, None]).clamp(0, 254)).to(torch.uint8)
                g = torch.pow(2.0, off.to(torch.float32))
                if w.global_scale is not None:
                    g = g * w.global_scale.float()
                w = ExpertWeights(w.wfmt, w.data, rebased, g, w.nibble_chunk, w.w4a8_layout, w.mma_layout)
        return w

    def standard_bytes(self) -> Any:
        """fp4 bytes in the standard nibble order (the stored bytes when ``nibble_chunk`` is 0)."""
        if self.mma_layout:
            return from_mma_layout(self.data)
        if self.w4a8_layout:
            return from_w4a8_layout(self.data)
        return self.data if not self.nibble_chunk else from_kernel_nibble_order(self.data, self.nibble_chunk)

    @property
    def shape(self) -> tuple[int, int, int]:
        """(E, N, K) in elements."""
        e, n, k = self.data.shape
        return int(e), int(n), int(k * 2 if self.wfmt in ("nvfp4", "mxfp4") else k)

    def nbytes_per_expert(self) -> int:
        """Bytes one expert's values and scales take (the nvfp4 per-expert 4-byte global scale included)."""
        e = self.shape[0]
        total = self.data.numel() * self.data.element_size()
        for t in (self.scale, self.global_scale):
            if t is not None:
                total += t.numel() * t.element_size()
        return total // e

    def dequantize(self) -> Any:
        """float32 ``[E, N, K]`` (for references)."""
        from truepeak.kernels import quant

        if self.wfmt == "bf16":
            return self.data.float()
        if self.wfmt == "fp8":
            return quant.dequantize_fp8(self.data, self.scale, "channel")
        if self.wfmt == "fp8_block":
            return quant.dequantize_fp8(self.data, self.scale, "block128")
        if self.wfmt == "nvfp4":
            if self.global_scale is None:
                raise TruepeakError("nvfp4 weights need their per-expert global_scale (fp32 [E]) to be dequantised")
            return quant.dequantize_nvfp4(self.standard_bytes(), self.scale, self.global_scale[:, None, None])
        w = quant.dequantize_mxfp4(self.standard_bytes(), self.scale)
        return w if self.global_scale is None else w * self.global_scale[:, None, None]


def quantize_experts(w: Any, wfmt: str) -> ExpertWeights:
    """Quantise float expert weights ``[E, N, K]`` to a kernel format with :mod:`truepeak.kernels.quant`
    (nvfp4: one global scale per expert, as each expert is its own tensor).

    Raises:
        UnknownNameError: unknown format. TruepeakError: K (or N for fp8_block) not a multiple of the format's block.
    """
    torch = require("torch", "quantising expert weights")
    from truepeak.kernels import quant

    check_wfmt(wfmt)
    if wfmt == "bf16":
        return ExpertWeights(wfmt, w.to(torch.bfloat16).contiguous())
    if wfmt == "fp8":
        v, s = quant.quantize_fp8(w, "channel")
        return ExpertWeights(wfmt, v.contiguous(), s.contiguous())
    if wfmt == "fp8_block":
        v, s = quant.quantize_fp8(w, "block128")
        return ExpertWeights(wfmt, v.contiguous(), s.contiguous())
    if wfmt == "nvfp4":
        gs = torch.stack([quant.nvfp4_global_scale(w[i]) for i in range(w.shape[0])])
        packed, scales, _ = quant.quantize_nvfp4(w, global_scale=gs[:, None, None])
        return ExpertWeights(wfmt, packed.contiguous(), scales.contiguous(), gs.contiguous())
    packed, scales = quant.quantize_mxfp4(w)
    return ExpertWeights(wfmt, packed.contiguous(), scales.contiguous())
