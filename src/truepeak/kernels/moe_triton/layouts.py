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


# The MMA layout: each 32-bit word holds the 8 values one thread of a Hopper warpgroup MMA needs in its A-operand
# registers for two 16-element K slices, with the bits placed so that 4 rotations and 6 masks (LOP3) put them as
# 4 fp16x2 registers (value x 2^-14: sign at bit 15 of each 16-bit lane, exponent and mantissa bits at 11..9).
# Word bit b holds bit _MMA_BITS[b] = (output register j, lane, nibble bit) of the word's values 2j + lane. The
# decode (the kernel's PTX): R0 = w & M; R1 = rotl(w, 3) & M; with t = rotl(w, 7): R2 = (rotl(w, 10) & 0x8C008C00)
# | (t & 0x02000200), R3 = (rotl(w, 12) & 0x86008600) | (t & 0x08000800), M = 0x8E008E00. Found by an exhaustive
# search over rotations: no layout needs fewer than 10 integer instructions for 8 values with these operations (a
# single masked rotation per register would need the 8-bit pattern to tile the word, which it does not). Marlin
# (vLLM csrc/quantization/marlin) and triton_kernels' Hopper value layout (triton-lang/triton,
# python/triton_kernels/.../layout_details/hopper_value.py, 11 instructions) interleave bits offline the same way.
_MMA_BITS = ((2, 0, 1), (2, 0, 2), (2, 0, 0), (3, 0, 3), (3, 0, 2), (2, 0, 3), (1, 0, 0), (1, 0, 1), (1, 0, 2),
             (0, 0, 0), (0, 0, 1), (0, 0, 2), (1, 0, 3), (3, 1, 0), (3, 1, 1), (0, 0, 3), (2, 1, 1), (2, 1, 2),
             (2, 1, 0), (3, 1, 3), (3, 1, 2), (2, 1, 3), (1, 1, 0), (1, 1, 1), (1, 1, 2), (0, 1, 0), (0, 1, 1),
             (0, 1, 2), (1, 1, 3), (3, 0, 0), (3, 0, 1), (0, 1, 3))


def mma_logical_order(k: int) -> list[int]:
    """The MMA layout's K order within each 64-element chunk: position L of the MMA holds element
    ``order[L]`` (``16 c + 4 s + 2 i1 + i0`` for L = ``i0 + 2 c + 8 i1 + 16 s``, c the thread's column 0..3 of the
    MMA fragment, s the 16-element K slice): each thread's 16 values of a row are 16 consecutive elements, so one
    nvfp4 block (16) or half an mxfp4 block (32), and one block scale per thread and row. The activations are
    stored in this order by the kernels' quantisation (the MMA sums over K, so both operands permuted alike give the
    same product). ``k`` a multiple of 64.

    Raises:
        TruepeakError: k not a positive multiple of 64."""
    if k <= 0 or k % 64:
        raise TruepeakError(f"the MMA layout's K order needs K a multiple of 64, got {k}")
    one = [16 * ((L >> 1) & 3) + 4 * (L >> 4) + 2 * ((L >> 3) & 1) + (L & 1) for L in range(64)]
    return [64 * c + o for c in range(k // 64) for o in one]


def _mma_tile_perm(torch: Any, device: Any) -> Any:
    """Byte offset in a 2 KB tile of the MMA layout of byte (row r, byte j) of the 64-row x 32-byte tile: rows
    ``16 a + 8 h + g`` pair up (g and g + 8: the two rows of one thread's MMA fragment) into 64-byte lines
    ``8 a + g``, in which thread column c = j // 8 owns 16 bytes: its 8 bytes of row g, then of row g + 8."""
    r = torch.arange(64, device=device)[:, None]
    j = torch.arange(32, device=device)[None, :]
    a, h, g = r // 16, (r // 8) % 2, r % 8
    return (8 * a + g) * 64 + 16 * (j // 8) + 8 * h + j % 8


def to_mma_layout(packed: Any) -> Any:
    """Standard-order fp4 bytes ``[E, N, K/2]`` → the MMA layout, same shape: 64-row x 64-element tiles of 2 KB
    stored contiguously (tile (n, c) at byte ``(n * K/64 + c) * 2048`` of the expert, as :func:`to_w4a8_layout`);
    in a row's 32 bytes of a tile, word m (4 bytes, little-endian) holds elements 8m..8m+7 with their bits
    interleaved as :data:`_MMA_BITS` says (element 8m + 2j + lane → output register j); rows g and g + 8 of each
    16-row group share 64-byte lines, each thread column's 8 + 8 bytes together (:func:`_mma_tile_perm`).

    Why: one thread of the MMA's fragment then loads its 16 bytes at once and decodes each 32-bit word (8 values)
    straight into its A-operand registers in 10 integer instructions (1.25 per value), and a thread's values of a
    row share one block scale (:func:`mma_logical_order`); the w4a8 layout decodes 2 bytes at a time in the MMA's
    register layout. Inverse: :func:`from_mma_layout`.

    Raises:
        TruepeakError: not uint8, not 3-D, or N or K not multiples of 64."""
    torch = require("torch", "repacking fp4 weights")
    from truepeak.kernels import quant

    _check_w4a8_bytes(packed)
    e, n, kb = (int(d) for d in packed.shape)
    t = W4A8_TILE
    perm = _mma_tile_perm(torch, packed.device).flatten()
    out = torch.empty_like(packed)
    for x in range(e):  # one expert at a time: the int64 temporaries are 16 bytes per weight value
        codes = quant.unpack_nibbles(packed[x]).to(torch.int64).reshape(n, kb // 4, 8)  # 8 values per word
        word = torch.zeros(n, kb // 4, dtype=torch.int64, device=packed.device)
        for b, (j, lane, nib) in enumerate(_MMA_BITS):
            word |= ((codes[..., 2 * j + lane] >> nib) & 1) << b
        by = torch.stack([(word >> (8 * i)) & 0xFF for i in range(4)], dim=-1).to(torch.uint8)
        tiles = by.reshape(n // t, t, kb // (t // 2), t // 2).permute(0, 2, 1, 3).reshape(-1, t * t // 2)
        dst = torch.empty_like(tiles)
        dst[:, perm] = tiles
        out[x] = dst.reshape(n, kb)
    return out


def from_mma_layout(packed: Any) -> Any:
    """Inverse of :func:`to_mma_layout`: bytes ``[E, N, K/2]`` in the MMA layout → the standard order, same shape.

    Raises:
        TruepeakError: not uint8, not 3-D, or N or K not multiples of 64."""
    torch = require("torch", "repacking fp4 weights")
    from truepeak.kernels import quant

    _check_w4a8_bytes(packed)
    e, n, kb = (int(d) for d in packed.shape)
    t = W4A8_TILE
    perm = _mma_tile_perm(torch, packed.device).flatten()
    out = torch.empty_like(packed)
    for x in range(e):  # one expert at a time (int64 temporaries)
        tiles = packed[x].reshape(-1, t * t // 2)[:, perm]
        by = tiles.reshape(n // t, kb // (t // 2), t, t // 2).permute(0, 2, 1, 3).reshape(n, kb // 4, 4)
        word = sum(by[..., i].to(torch.int64) << (8 * i) for i in range(4))
        codes = torch.zeros(n, kb // 4, 8, dtype=torch.int64, device=packed.device)
        for b, (j, lane, nib) in enumerate(_MMA_BITS):
            codes[..., 2 * j + lane] |= ((word >> b) & 1) << nib
        out[x] = quant.pack_nibbles(codes.reshape(n, 2 * kb).to(torch.uint8))
    return out
