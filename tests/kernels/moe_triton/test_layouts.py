"""The fp4 weight layouts the MoE kernels read (truepeak.kernels.moe_triton.layouts) and their inverses, on hand-worked
bytes and round trips over every byte."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from truepeak.errors import TruepeakError  # noqa: E402
from truepeak.kernels import moe_triton as mt  # noqa: E402


def test_w4a8_layout_hand_example():
    # one expert, N = 64 rows, K = 128 (two 64-element chunks): element k = 70 of row 5 is 1.5 (code 0b0011), the
    # rest 0. Standard order: byte 35 of row 5, low nibble. Kernel order: chunk 1, position 6 (< 32, so the low
    # value of byte 6); e4m3 bit layout: L.e0 -> bit 3, L.m -> bit 2: 0b00001100. Tile (row group 0, chunk 1) starts
    # at byte 2048 of the expert; row 5 at +5 * 32, byte 6: flat offset 2214.
    std = torch.zeros(1, 64, 64, dtype=torch.uint8)
    std[0, 5, 35] = 0b0011
    t = mt.to_w4a8_layout(std)
    flat = t.flatten()
    assert int(flat[2214]) == 0b00001100 and int(flat.count_nonzero()) == 1
    assert torch.equal(mt.from_w4a8_layout(t), std)
    with pytest.raises(TruepeakError, match="the w4a8 layout needs N and K multiples of 64, got N=32"):
        mt.to_w4a8_layout(torch.zeros(1, 32, 64, dtype=torch.uint8))
    with pytest.raises(TruepeakError, match="the w4a8 layout needs N and K multiples of 64, got N=64, K=96"):
        mt.from_w4a8_layout(torch.zeros(1, 64, 48, dtype=torch.uint8))
    with pytest.raises(TruepeakError, match="must be uint8 bytes .two e2m1 values per byte., got torch.int8"):
        mt.to_w4a8_layout(torch.zeros(1, 64, 32, dtype=torch.int8))
    with pytest.raises(TruepeakError, match=r"must be \[E, N, K/2\] bytes, got shape \[64, 32\]"):
        mt.from_w4a8_layout(torch.zeros(64, 32, dtype=torch.uint8))


def test_kernel_nibble_order_hand_example_and_round_trip():
    # elements [1, 2, 3, 4] (codes), chunk 4: standard bytes [1 | 2<<4, 3 | 4<<4] = [0x21, 0x43];
    # kernel order: byte j = element j | element 2+j << 4 = [1 | 3<<4, 2 | 4<<4] = [0x31, 0x42]
    std = torch.tensor([[0x21, 0x43]], dtype=torch.uint8)
    assert mt.to_kernel_nibble_order(std, 4).tolist() == [[0x31, 0x42]]
    assert mt.from_kernel_nibble_order(torch.tensor([[0x31, 0x42]], dtype=torch.uint8), 4).tolist() == [[0x21, 0x43]]
    g = torch.Generator().manual_seed(0)
    b = torch.randint(0, 256, (3, 5, 128), dtype=torch.uint8, generator=g)
    for chunk in (64, 128, 256):
        assert torch.equal(mt.from_kernel_nibble_order(mt.to_kernel_nibble_order(b, chunk), chunk), b)
    with pytest.raises(TruepeakError, match="chunks of 96"):
        mt.to_kernel_nibble_order(b, 96)


def test_e4m3_bit_layout_decodes_every_byte_exactly():
    """The w4a8 layout's bit moves (the kernel's PTX does them on 4 bytes at once; this is the same on one byte, as
    the interpreter path runs them): for all 256 bytes both values decode, as e4m3, to the e2m1 value x 2^-6; and the
    layout round-trips. Hand example: L = 0b0011 (1.5), H = 0b1110 (-4) -> 0b01101110."""
    from truepeak.kernels import quant

    std = torch.arange(256, dtype=torch.uint8)
    b = mt.to_e4m3_bit_layout(std)
    assert int(mt.to_e4m3_bit_layout(torch.tensor([0xE3], dtype=torch.uint8))) == 0b01101110
    assert torch.equal(mt.from_e4m3_bit_layout(b), std)
    lo = (b & 0x9C).view(torch.float8_e4m3fn).float()
    hi = (((b.to(torch.int32) << 2) & 0x8C) | ((b.to(torch.int32) >> 2) & 0x10)).to(torch.uint8)
    hi = hi.view(torch.float8_e4m3fn).float()
    assert torch.equal(lo, quant.e2m1_decode(std & 15) * 2.0 ** -6)
    assert torch.equal(hi, quant.e2m1_decode(std >> 4) * 2.0 ** -6)
    # e.g. low code 1 (0.5) is stored as 0b00000100, e4m3's subnormal 2^-7; code 7 (6.0) as 0b00011100, e4m3
    # exponent 3 - 7 and mantissa 0.5: 1.5 * 2^-4 = 6 * 2^-6
    assert int(b[1]) == 0b00000100 and float(lo[1]) == 2.0 ** -7
    assert int(b[7]) == 0b00011100 and float(lo[7]) == 6 * 2.0 ** -6


def test_mma_layout_hand_example():
    # N = 64 rows, K = 64: element 13 of row 9 is 1.5 (code 0b0011), the rest 0; standard order: high nibble of
    # byte 6 of row 9. MMA layout: word 13 // 8 = 1, value 5 = output register 2, high lane; its mantissa bit goes
    # to word bit 18 and its exponent lsb to bit 16 (_MMA_BITS), so word 1 = 0x00050000: byte 4 * 1 + 2 = 6 of the
    # row is 0x05. Rows 9 = 16 * 0 + 8 * 1 + 1 share line 8 * 0 + 1 with row 1, its bytes after row 1's 8 bytes of
    # thread column 6 // 8 = 0: tile byte 1 * 64 + 16 * 0 + 8 * 1 + 6 % 8 = 78.
    std = torch.zeros(1, 64, 32, dtype=torch.uint8)
    std[0, 9, 6] = 0x30
    t = mt.to_mma_layout(std)
    flat = t.flatten()
    assert int(flat[78]) == 0x05 and int(flat.count_nonzero()) == 1
    assert torch.equal(mt.from_mma_layout(t), std)
    with pytest.raises(TruepeakError, match="the w4a8 layout needs N and K multiples of 64, got N=32"):
        mt.to_mma_layout(torch.zeros(1, 32, 64, dtype=torch.uint8))


def test_mma_layout_round_trips_and_decodes_like_the_kernel():
    """Random bytes round-trip; the kernel's PTX decode, emulated here on each 32-bit word (R0 = w & M, R1 =
    rotl(w, 3) & M, R2 = rotl(w, 10) & 0x8C008C00 | rotl(w, 7) & 0x02000200, R3 = rotl(w, 12) & 0x86008600 |
    rotl(w, 7) & 0x08000800, M = 0x8E008E00), gives each value as fp16 x 2^-14 in element order."""
    from truepeak.kernels import quant

    g = torch.Generator().manual_seed(0)
    b = torch.randint(0, 256, (2, 128, 64), dtype=torch.uint8, generator=g)
    t = mt.to_mma_layout(b)
    assert torch.equal(mt.from_mma_layout(t), b) and not torch.equal(t, b)
    # undo the line pairing, then decode the words of each row (2 experts x 2 row tiles x 2 chunks x 64 rows)
    perm = mt.layouts._mma_tile_perm(torch, "cpu").flatten()
    rows = t.reshape(-1, 2048)[:, perm].reshape(2, 2, 2, 64, 8, 4).to(torch.int64)
    w = rows[..., 0] | rows[..., 1] << 8 | rows[..., 2] << 16 | rows[..., 3] << 24

    def rotl(x, s):
        return ((x << s) | (x >> (32 - s))) & 0xFFFFFFFF

    m, r7 = 0x8E008E00, rotl(w, 7)
    regs = (w & m, rotl(w, 3) & m, (rotl(w, 10) & 0x8C008C00) | (r7 & 0x02000200),
            (rotl(w, 12) & 0x86008600) | (r7 & 0x08000800))
    vals = [((r >> (16 * lane)) & 0xFFFF).to(torch.int16).view(torch.float16).float() for r in regs
            for lane in (0, 1)]
    dec = torch.stack(vals, -1).permute(0, 1, 3, 2, 4, 5).reshape(2, 128, 128) * 2.0 ** 14
    assert torch.equal(dec, quant.e2m1_decode(quant.unpack_nibbles(b)))


def test_mma_logical_order():
    # position L = i0 + 2c + 8 i1 + 16 s holds element 16c + 4s + 2 i1 + i0: thread column c's values are 16c..16c+15
    order = mt.mma_logical_order(128)
    assert order[:10] == [0, 1, 16, 17, 32, 33, 48, 49, 2, 3] and order[16] == 4 and order[64] == 64
    assert sorted(order) == list(range(128))
    with pytest.raises(TruepeakError, match="needs K a multiple of 64, got 96"):
        mt.mma_logical_order(96)
