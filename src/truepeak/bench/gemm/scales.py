"""cuBLAS's swizzled 128 x 4 block-scale layout, in which the block-scaled formats (mxfp8, nvfp4, mxfp4) pass their
scales (:func:`swizzle_block_scales`)."""

from __future__ import annotations

from typing import Any

from truepeak.bench.gemm.support import torch_module
from truepeak.errors import UnsupportedError


def swizzled_scale_index(row: int, col: int, cols: int) -> int:
    """Position of scale ``(row, col)`` of a ``[rows, cols]`` block-scale matrix in cuBLAS's swizzled layout.

    cuBLAS "1D Block Scaling Factors Layout" (cuBLAS docs, section on block-scaled GEMMs; the same rearrangement as
    PyTorch's ``to_blocked`` in ``torch/testing/_internal/common_quantized.py``): the matrix is padded to multiples of
    128 rows and 4 columns and cut into 128 x 4 tiles stored one after another, row of tiles by row of tiles
    (``tile = (row // 128) * ceil(cols / 4) + col // 4``); inside a tile of 512 bytes, row ``r`` = ``32 i + j``
    (``i`` in 0..3, ``j`` in 0..31) and column ``c`` land at ``16 j + 4 i + c``.
    """
    col_tiles = -(-int(cols) // 4)
    tile = (row // 128) * col_tiles + col // 4
    r = row % 128
    return tile * 512 + (r % 32) * 16 + (r // 32) * 4 + (col % 4)


def swizzle_block_scales(scales: Any) -> Any:
    """Rearrange row-major block scales ``[rows, cols]`` (one byte each: e8m0 or e4m3) into cuBLAS's swizzled 128 x 4
    layout (:func:`swizzled_scale_index`), zero-padded to 128-row / 4-column multiples; returns a flat tensor of
    ``ceil(rows / 128) * 128 * ceil(cols / 4) * 4`` elements of the input dtype. ``rows`` is M (A's scales) or N (B's),
    ``cols`` is K / block size.

    Raises:
        UnsupportedError: not a 2-D tensor of a one-byte dtype.
    """
    torch = torch_module()
    if scales.dim() != 2 or scales.element_size() != 1:
        raise UnsupportedError(f"block scales must be a 2-D one-byte tensor, got shape {tuple(scales.shape)} "
                               f"of {scales.dtype}")
    rows, cols = scales.shape
    rt, ct = -(-rows // 128), -(-cols // 4)
    raw = scales.view(torch.uint8)
    padded = torch.zeros((rt * 128, ct * 4), dtype=torch.uint8, device=scales.device)
    padded[:rows, :cols] = raw
    # [rt, 128, ct, 4] -> tiles [rt, ct, 128, 4] -> rows 128 = (i 4, j 32) -> (j, i, c): offset 16 j + 4 i + c
    tiles = padded.view(rt, 128, ct, 4).permute(0, 2, 1, 3).reshape(rt, ct, 4, 32, 4).transpose(2, 3)
    return tiles.reshape(-1).view(scales.dtype)


__all__ = ["swizzled_scale_index", "swizzle_block_scales"]
