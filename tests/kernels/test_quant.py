"""NVFP4 / MXFP4 / MXFP8 / FP8 quantisation against exact values worked out by hand.

Known values: the e2m1 grid (0, 0.5, 1, 1.5, 2, 3, 4, 6) with signs (OCP MX v1.0 §5.3.3), round-to-nearest-even ties,
e4m3 scale values (3 mantissa bits: 0.5, 0.5625, 0.625, ... in [0.5, 1)), e8m0 shared exponents
``floor(log2(amax)) - emax_elem`` biased by 127 (OCP MX v1.0 §6.3), byte counts of a DeepSeek-V3 expert projection.
"""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from truepeak.errors import TruepeakError, UnknownNameError  # noqa: E402
from truepeak.formats import get_format  # noqa: E402
from truepeak.kernels import quant  # noqa: E402

GRID = [0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0]


def test_e2m1_grid_and_signs_round_trip():
    x = torch.tensor(GRID + [-v for v in GRID[1:]])
    codes = quant.e2m1_encode(x)
    assert codes.tolist() == list(range(8)) + list(range(9, 16))
    assert quant.e2m1_decode(codes).tolist() == x.tolist()


def test_e2m1_ties_round_to_even_and_saturate():
    # midpoints: 0.25->0, 0.75->1.0, 1.25->1.0, 1.75->2.0, 2.5->2.0, 3.5->4.0, 5.0->4.0; 7 and 100 saturate to 6
    x = torch.tensor([0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5.0, 7.0, 100.0, -5.0, 0.26, 5.01])
    got = quant.e2m1_decode(quant.e2m1_encode(x)).tolist()
    assert got == [0.0, 1.0, 1.0, 2.0, 2.0, 4.0, 4.0, 6.0, 6.0, -4.0, 0.5, 6.0]


def test_packing_low_nibble_is_even_element():
    codes = torch.tensor([[1, 2, 15, 0]], dtype=torch.uint8)
    packed = quant.pack_nibbles(codes)
    assert packed.tolist() == [[0x21, 0x0F]]
    assert quant.unpack_nibbles(packed).tolist() == codes.tolist()


def test_nvfp4_hand_block_with_unit_global_scale():
    vals = [0, 0.5, 1, 1.5, 2, 3, 4, 6, -0.5, -1, -1.5, -2, -3, -4, -6, 0]
    x = torch.tensor([vals], dtype=torch.float32)
    packed, scales, gs = quant.quantize_nvfp4(x, global_scale=1.0)
    # amax 6 -> block scale e4m3(6/6/1) = 1.0; codes 0..7, 9..15, 0 packed low nibble first
    assert scales.dtype == torch.float8_e4m3fn and scales.float().tolist() == [[1.0]]
    assert packed.tolist() == [[0x10, 0x32, 0x54, 0x76, 0xA9, 0xCB, 0xED, 0x0F]]
    assert quant.dequantize_nvfp4(packed, scales, gs).tolist() == [[float(v) for v in vals]]


def test_nvfp4_default_global_scale_is_amax_over_448_times_6():
    x = torch.tensor([[6.0] + [1.0] * 15])
    packed, scales, gs = quant.quantize_nvfp4(x)
    assert gs.item() == pytest.approx(6 / 2688)
    assert scales.float().item() == 448.0  # amax/6/gs = 448, exact in e4m3
    assert torch.allclose(quant.dequantize_nvfp4(packed, scales, gs), x, rtol=1e-6, atol=0)


def test_nvfp4_e4m3_scale_rounds_to_nearest():
    # block amax 3.3 with global scale 1: 3.3 / 6 = 0.55 -> e4m3 0.5625 (grid 0.5, 0.5625, 0.625 in [0.5, 1))
    x = torch.tensor([[3.3] + [0.0] * 15])
    packed, scales, gs = quant.quantize_nvfp4(x, global_scale=1.0)
    assert scales.float().item() == 0.5625
    # 3.3 / 0.5625 = 5.87 -> e2m1 6 -> 6 * 0.5625 = 3.375
    assert quant.dequantize_nvfp4(packed, scales, gs)[0, 0].item() == 3.375


def test_mxfp4_shared_exponent_and_values():
    x = torch.zeros(3, 32)
    x[0, 0], x[0, 1] = 5.0, 0.1       # floor(log2 5) - 2 = 0 -> byte 127; 5 -> 4 (tie to even), 0.1 -> 0
    x[1, 0], x[1, 1] = 0.75, 0.1      # floor(log2 0.75) - 2 = -3 -> byte 124; 0.75/0.125 = 6, 0.1/0.125 = 0.8 -> 1
    x[2, 0] = 7.0                     # exponent 0 -> 7 saturates to 6
    packed, scales = quant.quantize_mxfp4(x)
    assert scales.dtype == torch.uint8 and scales.tolist() == [[127], [124], [127]]
    d = quant.dequantize_mxfp4(packed, scales)
    assert d[0, :2].tolist() == [4.0, 0.0]
    assert d[1, :2].tolist() == [0.75, 0.125]
    assert d[2, 0].item() == 6.0
    assert packed.shape == (3, 16)


def test_mxfp4_all_zero_block_gets_smallest_exponent():
    packed, scales = quant.quantize_mxfp4(torch.zeros(1, 32))
    assert scales.tolist() == [[0]] and packed.tolist() == [[0] * 16]


def test_mxfp8_shared_exponent_emax_8():
    x = torch.zeros(2, 32)
    x[0, 0], x[0, 1] = 1.0, 0.5       # floor(log2 1) - 8 = -8 -> byte 119; 1.0 * 256 = 256 exact in e4m3
    x[1, 0] = 448.0                   # exponent 0 -> byte 127
    vals, scales = quant.quantize_mxfp8(x)
    assert vals.dtype == torch.float8_e4m3fn and scales.tolist() == [[119], [127]]
    assert vals.float()[0, :2].tolist() == [256.0, 128.0]
    assert quant.dequantize_mxfp8(vals, scales)[:, :2].tolist() == [[1.0, 0.5], [448.0, 0.0]]


def test_e8m0_decoding():
    s = torch.tensor([127, 128, 124, 0, 255], dtype=torch.uint8)
    got = quant.e8m0_to_float(s)
    assert got[:3].tolist() == [1.0, 2.0, 0.125]
    assert got[3].item() == 2.0 ** -127
    assert torch.isnan(got[4])


@pytest.mark.parametrize("gran", ["tensor", "channel", "block128"])
def test_fp8_scales_are_amax_over_448(gran):
    w = torch.zeros(256, 256)
    w[0, 0] = 448.0 * 3   # block (0,0) / row 0 / tensor amax
    w[200, 200] = 448.0 / 2
    vals, scales = quant.quantize_fp8(w, gran)
    expect = {"tensor": (), "channel": (256,), "block128": (2, 2)}[gran]
    assert tuple(scales.shape) == expect and scales.dtype == torch.float32
    if gran == "tensor":
        assert scales.item() == 3.0
    elif gran == "channel":
        assert scales[0].item() == 3.0 and scales[200].item() == 0.5 and scales[1].item() == 1.0  # zero row -> 1
    else:
        assert scales.tolist() == [[3.0, 1.0], [1.0, 0.5]]
    back = quant.dequantize_fp8(vals, scales, gran)
    assert back[0, 0].item() == 1344.0
    if gran != "tensor":  # 224 / 3 = 74.67 is no e4m3 value (72 is): only the finer scales give 224 back exactly
        assert back[200, 200].item() == 224.0


def test_round_trip_error_is_bounded():
    torch.manual_seed(0)
    x = torch.rand(8, 64) * 2 - 1
    # amax < 1 here. nvfp4: scale ~amax/6, top e2m1 spacing 2 -> error <= amax/6 (+ e4m3 rounding of the scale).
    assert (quant.dequantize_nvfp4(*quant.quantize_nvfp4(x)) - x).abs().max() <= 1 / 6 * 1.07
    # MX: the floor in shared_exp (OCP MX v1.0 §6.3) can clip: amax in [0.5, 1) -> X = 2^-3, largest value 6/8 = 0.75,
    # so up to 0.25 is lost at the top; mxfp8: X = 2^-9, largest 448/512 = 0.875 -> up to 0.125.
    assert (quant.dequantize_mxfp4(*quant.quantize_mxfp4(x)) - x).abs().max() <= 0.25
    assert (quant.dequantize_mxfp8(*quant.quantize_mxfp8(x)) - x).abs().max() <= 0.125


def test_nvfp4_and_mxfp4_bytes_of_a_deepseek_v3_projection_match_formats():
    w = torch.rand(7168, 2048, dtype=torch.bfloat16)
    p, s, _ = quant.quantize_nvfp4(w)
    assert p.shape == (7168, 1024) and s.shape == (7168, 128)
    assert quant.quantized_nbytes(p, s) == 8_257_536 == get_format("nvfp4").matrix_bytes(7168, 2048)
    assert quant.quantized_nbytes(p, s) / w.numel() == 0.5625
    p, s = quant.quantize_mxfp4(w[:64])
    assert quant.quantized_nbytes(p, s) / (64 * 2048) == 0.53125 == get_format("mxfp4").bytes_per_value
    assert quant.quantized_nbytes(p, s) * (7168 // 64) == get_format("mxfp4").matrix_bytes(7168, 2048)


@pytest.mark.parametrize("fn,k", [(quant.quantize_nvfp4, 24), (quant.quantize_mxfp4, 48), (quant.quantize_mxfp8, 16)])
def test_k_not_a_multiple_of_the_block_is_a_clear_error(fn, k):
    with pytest.raises(TruepeakError, match=f"K={k}"):
        fn(torch.ones(2, k))


def test_fp8_bad_granularity_and_block_shape():
    with pytest.raises(UnknownNameError, match="'row'.*tensor, channel, block128"):
        quant.quantize_fp8(torch.ones(128, 128), "row")
    with pytest.raises(TruepeakError, match="N=128, K=100"):
        quant.quantize_fp8(torch.ones(128, 100), "block128")
