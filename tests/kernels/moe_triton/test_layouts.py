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
