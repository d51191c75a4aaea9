"""Random expert weights in the stored format of each weight format, and the bytes a point reads from them."""

from __future__ import annotations

from typing import Any, Iterable

from truepeak.bench.moe.shapes import ExpertShape
from truepeak.errors import UnsupportedError, require


def make_weights(shape: ExpertShape, wfmt: str, device: Any, seed: int = 0, w4a8: bool = False, mma: bool = False,
                 standard: bool = False) -> tuple[Any, Any]:
    """Random expert weights ``w1 [E_local, 2I, H]``, ``w2 [E_local, H, I]`` as :class:`ExpertWeights`.

    fp4 bytes are random codes labelled as already in the layout our kernel reads (``w4a8``: the w4a8 layout of
    :func:`~truepeak.kernels.moe_triton.to_w4a8_layout`; ``standard``: the standard packing, which the block-scaled
    kernels read; otherwise :func:`~truepeak.kernels.moe_triton.fp4_block_k` chunks), so no repack copy of
    gigabytes is made; the reference reads them back through that layout.

    Values are drawn directly in the stored format (random bytes for fp4 codes, fp8 values from uniform [-1, 1] ·
    0.05, block scales in a realistic range), so a 20 GB bf16 weight set needs no float32 copy; the reference
    dequantises only the experts it checks.

    Raises:
        UnknownNameError: unknown format. UnsupportedError: a shape the format (or, with ``w4a8``, its layout: N
        and K multiples of 64) cannot hold; the bench makes the format's points ``skipped``.
    """
    torch = require("torch", "building MoE weights")
    from truepeak.kernels.moe_triton import ExpertWeights, check_wfmt, fp4_block_k

    check_wfmt(wfmt)
    g = torch.Generator(device=device).manual_seed(seed)

    def one(n: int, k: int) -> Any:
        e = shape.E_local
        if wfmt == "bf16":
            return ExpertWeights(wfmt, ((torch.rand(e, n, k, device=device, generator=g, dtype=torch.bfloat16) * 2 - 1)
                                        * 0.05))
        if wfmt in ("fp8", "fp8_block"):
            v = ((torch.rand(e, n, k, device=device, generator=g, dtype=torch.bfloat16) * 2 - 1) * 448).to(
                torch.float8_e4m3fn)
            if wfmt == "fp8":
                s = torch.rand(e, n, device=device, generator=g) * 1e-4 + 5e-5
            else:
                if n % 128 or k % 128:
                    raise UnsupportedError(f"fp8_block needs N and K multiples of 128, got N={n}, K={k}")
                s = torch.rand(e, n // 128, k // 128, device=device, generator=g) * 1e-4 + 5e-5
            return ExpertWeights(wfmt, v, s)
        if (w4a8 or mma) and (n % 64 or k % 64):  # to_w4a8_layout's tiles; checked here, as the bytes are labelled, not made
            raise UnsupportedError(f"{wfmt} in the tiled layout (the w4a8 and w4a16 kernels) needs N and K "
                                   f"multiples of 64, got N={n}, "
                                   f"K={k}")
        packed = torch.randint(0, 256, (e, n, k // 2), device=device, generator=g, dtype=torch.uint8)
        if wfmt == "nvfp4":
            if k % 16:
                raise UnsupportedError(f"nvfp4 needs K a multiple of 16, got K={k}")
            s = (torch.rand(e, n, k // 16, device=device, generator=g) * 200 + 100).to(torch.float8_e4m3fn)
            gs = torch.full((e,), 0.05 / (6 * 300), device=device)
            return ExpertWeights(wfmt, packed, s, gs, nibble_chunk=chunk(k), w4a8_layout=w4a8, mma_layout=mma)
        if k % 32:
            raise UnsupportedError(f"mxfp4 needs K a multiple of 32, got K={k}")
        s = torch.randint(119, 122, (e, n, k // 32), device=device, generator=g, dtype=torch.uint8)
        # random codes: labelled as already in the kernel's nibble order (the reference reorders them back)
        return ExpertWeights(wfmt, packed, s, nibble_chunk=chunk(k), w4a8_layout=w4a8, mma_layout=mma)

    def chunk(k: int) -> int:
        return 0 if standard and not (w4a8 or mma) else 64 if w4a8 or mma else fp4_block_k(k)

    return one(2 * shape.I, shape.H), one(shape.H, shape.I)


def active_bytes(w1: Any, w2: Any, counts: Iterable[int]) -> int:
    """Bytes of the weights (values + scales) of the experts that received at least one token."""
    active = sum(1 for c in counts if c > 0)
    return active * (w1.nbytes_per_expert() + w2.nbytes_per_expert())
