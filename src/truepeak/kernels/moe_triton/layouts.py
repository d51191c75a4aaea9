"""The fp4 weight layouts the kernels read, each with its inverse: the kernel nibble order, the e4m3 bit layout of
the w4a8 decode, and the w4a8 layout's 2 KB tiles. Byte tensors in, byte tensors out (torch inside the functions)."""

from __future__ import annotations

from typing import Any

from truepeak.errors import TruepeakError, require


def to_kernel_nibble_order(packed: Any, chunk: int) -> Any:
    """Repack fp4 bytes ``[..., K//2]`` from the standard order (element 2i in the low nibble of byte i, 2i+1 in the
    high: :func:`truepeak.kernels.quant.pack_nibbles`) to the kernel's order: within each chunk of ``chunk``
    consecutive elements, byte j holds element j in its low nibble and element ``chunk/2 + j`` in its high nibble.

    Why: the kernel decodes the low and high nibbles of a [BN, chunk/2] byte tile into two fp16 tiles that are two
    MMAs against two *contiguous* halves of the activations, so no interleave and no strided activation load is
    needed (serving kernels such as Marlin repack weights offline for the same reason). The block scales keep their
    standard layout (a half chunk is a whole number of 16/32-element blocks). Example: chunk 4, elements
    ``[a, b, c, d]`` → bytes ``[a | c<<4, b | d<<4]`` (standard: ``[a | b<<4, c | d<<4]``).

    Raises:
        TruepeakError: K not a multiple of ``chunk`` or ``chunk`` odd.
    """
    from truepeak.kernels import quant

    codes = quant.unpack_nibbles(packed)
    k = codes.shape[-1]
    if chunk <= 0 or chunk % 2 or k % chunk:
        raise TruepeakError(f"cannot repack K={k} in chunks of {chunk} elements (need an even chunk dividing K)")
    c = codes.reshape(*codes.shape[:-1], k // chunk, 2, chunk // 2)
    return (c[..., 0, :] | (c[..., 1, :] << 4)).reshape(packed.shape).contiguous()


def from_kernel_nibble_order(packed: Any, chunk: int) -> Any:
    """Inverse of :func:`to_kernel_nibble_order`: kernel-order bytes back to the standard order."""
    torch = require("torch", "repacking fp4 weights")
    from truepeak.kernels import quant

    n = packed.shape[-1] * 2
    if chunk <= 0 or chunk % 2 or n % chunk:
        raise TruepeakError(f"cannot repack K={n} in chunks of {chunk} elements (need an even chunk dividing K)")
    b = packed.reshape(*packed.shape[:-1], n // chunk, chunk // 2)
    codes = torch.stack((b & 0xF, b >> 4), dim=-2).reshape(*packed.shape[:-1], n)
    return quant.pack_nibbles(codes)


def to_e4m3_bit_layout(packed: Any) -> Any:
    """Permute the bits of each kernel-order fp4 byte (low value ``L`` = s e1 e0 m in bits 3..0, high value ``H`` in
    bits 7..4) into the w4a8 kernel's layout, bits 7..0 = ``L.s H.e1 H.s L.e1 L.e0 L.m H.e0 H.m``.

    Why: the low value's bits then sit where an e4m3 byte has its sign, exponent lsbs and mantissa msb (one AND
    with 0x9C gives an e4m3 equal to the e2m1 value x 2^-6, exactly), and the high value's after shifts by 2 and one
    more AND/OR: 5 integer instructions decode 8 values on Hopper, against ~17 for the untiled w4a16 kernel's e2m1
    -> fp16 (the tiled w4a16 decodes this layout too, then converts e4m3 -> fp16). Example: L = 0b0011 (1.5),
    H = 0b1110 (-4), byte 0xE3 → 0b01101110. Inverse: :func:`from_e4m3_bit_layout`."""
    lo, hi = packed & 15, packed >> 4

    def bit(v: Any, i: int) -> Any:
        return (v >> i) & 1

    return ((bit(lo, 3) << 7) | (bit(hi, 2) << 6) | (bit(hi, 3) << 5) | (bit(lo, 2) << 4) | (bit(lo, 1) << 3)
            | (bit(lo, 0) << 2) | (bit(hi, 1) << 1) | bit(hi, 0))


def from_e4m3_bit_layout(packed: Any) -> Any:
    """Inverse of :func:`to_e4m3_bit_layout`: kernel-order fp4 bytes with the low value in bits 3..0."""

    def bit(v: Any, i: int) -> Any:
        return (v >> i) & 1

    lo = (bit(packed, 7) << 3) | (bit(packed, 4) << 2) | (bit(packed, 3) << 1) | bit(packed, 2)
    hi = (bit(packed, 5) << 3) | (bit(packed, 6) << 2) | (bit(packed, 1) << 1) | bit(packed, 0)
    return lo | (hi << 4)


#: Rows and K elements of one contiguous tile of the w4a8 layout (64 x 64 elements = 64 x 32 bytes = 2 KB).
W4A8_TILE = 64


def to_w4a8_layout(packed: Any) -> Any:
    """Standard-order fp4 bytes ``[E, N, K/2]`` → the w4a8 kernel's layout, same shape: the kernel nibble order with
    64-element chunks (:func:`to_kernel_nibble_order`), the e4m3 bit layout (:func:`to_e4m3_bit_layout`), and the
    64-row x 64-element tiles (64 rows x 32 bytes) each stored contiguously, tile (n, c) at byte
    ``(n * K/64 + c) * 2048`` of the expert (rows of a tile 32 bytes apart).

    Why the tiles: a K step of the kernel reads 32 or 64 bytes of each of its rows; with rows K/2 bytes apart
    (3,584 B for K = 7168) those are small strided pieces, which held the w4a8 kernel far below the read bandwidth
    whatever its MMA scheduling; read as 2 KB tiles it streams near it (docs/results/h200/moe/README.md). Marlin and
    other serving kernels pre-tile weights for the same reason.

    Raises:
        TruepeakError: not uint8, not 3-D, or N or K not multiples of 64."""
    _check_w4a8_bytes(packed)
    e, n, kb = (int(d) for d in packed.shape)
    t = W4A8_TILE
    b = to_e4m3_bit_layout(to_kernel_nibble_order(packed, t))
    return b.reshape(e, n // t, t, kb // (t // 2), t // 2).permute(0, 1, 3, 2, 4).contiguous().reshape(e, n, kb)


def _check_w4a8_bytes(packed: Any) -> None:
    dtype = str(getattr(packed, "dtype", type(packed).__name__))
    if dtype != "torch.uint8":
        raise TruepeakError(f"fp4 weights must be uint8 bytes (two e2m1 values per byte), got {dtype}")
    if packed.dim() != 3:
        raise TruepeakError(f"fp4 weights must be [E, N, K/2] bytes, got shape {list(packed.shape)}")
    n, kb = int(packed.shape[1]), int(packed.shape[2])
    if n % W4A8_TILE or (2 * kb) % W4A8_TILE:
        raise TruepeakError(f"the w4a8 layout needs N and K multiples of {W4A8_TILE}, got N={n}, K={2 * kb}")


def from_w4a8_layout(packed: Any) -> Any:
    """Inverse of :func:`to_w4a8_layout`: bytes ``[E, N, K/2]`` in the w4a8 layout → the standard order, same shape.

    Raises:
        TruepeakError: not uint8, not 3-D, or N or K not multiples of 64."""
    _check_w4a8_bytes(packed)
    e, n, kb = (int(d) for d in packed.shape)
    t = W4A8_TILE
    b = packed.reshape(e, n // t, kb // (t // 2), t, t // 2).permute(0, 1, 3, 2, 4).reshape(e, n, kb)
    return from_kernel_nibble_order(from_e4m3_bit_layout(b), t)
