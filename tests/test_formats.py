"""Number formats: bytes per value with block scales (case C13) and fp8 scale tensors, all computed by hand."""

from __future__ import annotations

import pytest

from truepeak.errors import TruepeakError, UnknownNameError
from truepeak.formats import FORMAT_NAMES, all_formats, get_format
from truepeak.roofline import Gemm


# ---------------------------------------------------------------------------------------------------------------------
# C13 — bytes of block-scaled formats


def test_C13_bytes_per_value():
    # nvfp4: 4-bit E2M1 + one 8-bit E4M3 scale per 16 values = 4 + 8/16 = 4.5 bits = 0.5625 B
    assert get_format("nvfp4").bits_per_value == 4.5
    assert get_format("nvfp4").bytes_per_value == 0.5625
    # mxfp4: 4 bits + one 8-bit E8M0 scale per 32 values = 4.25 bits = 0.53125 B
    assert get_format("mxfp4").bytes_per_value == 0.53125
    # mxfp8: 8 + 8/32 = 8.25 bits; mxfp6: 6 + 8/32 = 6.25 bits
    assert get_format("mxfp8").bits_per_value == 8.25
    assert get_format("mxfp6").bits_per_value == 6.25


def test_C13_nvfp4_weight_7168x2048():
    # payload: 7168 * 2048 values * 4 bit / 8 = 7,340,032 B; scales: 7168 * (2048 / 16) * 1 B = 917,504 B
    nbytes = get_format("nvfp4").matrix_bytes(7168, 2048, weight=True)
    assert nbytes == 7_340_032 + 917_504 == 8_257_536
    assert nbytes != 7_340_032  # the payload-only count that forgets the scales
    # the same weight as the B operand of a GEMM (N=7168 outputs, K=2048 inputs)
    assert Gemm(1, 7168, 2048, "nvfp4").b_bytes == 8_257_536


def test_C13_70e9_values():
    assert get_format("nvfp4").values_bytes(70e9) == pytest.approx(39.375e9, rel=0, abs=1)  # 70e9 * 0.5625
    mx = get_format("mxfp4").values_bytes(70e9)  # 70e9 * 0.53125 = 37.1875e9
    assert mx == pytest.approx(37.1875e9, rel=0, abs=1)
    assert f"{mx / 1e9:.2f} GB" == "37.19 GB"


def test_C13_partial_blocks_store_whole_scales():
    # nvfp4 1 x 17: payload 17 * 4 = 68 bits; ceil(17/16) = 2 scales * 8 = 16 bits; 84 bits -> ceil(10.5) = 11 B
    assert get_format("nvfp4").matrix_bytes(1, 17) == 11
    # mxfp8 1 x 33: 33 B payload + ceil(33/32) = 2 scales = 35 B
    assert get_format("mxfp8").matrix_bytes(1, 33) == 35


def test_C13_block_scaled_formats_take_no_extra_scaling():
    with pytest.raises(TruepeakError):
        get_format("nvfp4").matrix_bytes(16, 16, "row")
    with pytest.raises(TruepeakError):
        Gemm(16, 16, 16, "mxfp4", scaling="tensor")


# ---------------------------------------------------------------------------------------------------------------------
# fp8 scale tensors (fp32 = 4 B per scale), computed by hand for a 256 x 512 matrix


@pytest.mark.parametrize(
    ("scaling", "weight", "expected"),
    [
        (None, False, 256 * 512),                          # payload only: 131,072 B
        ("tensor", False, 256 * 512 + 4),                  # one fp32 scale
        ("row", False, 256 * 512 + 4 * 256),               # one per row: 132,096 B
        ("block128", False, 256 * 512 + 4 * 256 * 4),      # 1 x 128 activation blocks: 256 rows * ceil(512/128) = 1024 scales
        ("block128", True, 256 * 512 + 4 * 2 * 4),         # 128 x 128 weight blocks: ceil(256/128) * ceil(512/128) = 8 scales
    ],
)
def test_fp8_scaling_bytes(scaling, weight, expected):
    assert get_format("fp8_e4m3").matrix_bytes(256, 512, scaling, weight=weight) == expected


def test_fp8_block128_weight_partial_blocks():
    # 300 x 200 weight: ceil(300/128) = 3, ceil(200/128) = 2 -> 6 scales * 4 B = 24 B on top of 60,000 B
    assert get_format("fp8").matrix_bytes(300, 200, "block128", weight=True) == 60_000 + 24


def test_fp8_gemm_scaling_bytes_by_operand():
    # M=128, N=256, K=512, fp8 in, bf16 out (2 B). A = 128*512 = 65,536 B; B = 256*512 = 131,072 B; C = 128*256*2 = 65,536 B
    g = Gemm(128, 256, 512, "fp8", scaling="block128")
    assert g.a_bytes == 65_536 + 4 * 128 * 4          # 128 rows x 4 K-blocks
    assert g.b_bytes == 131_072 + 4 * 2 * 4           # 2 N-blocks x 4 K-blocks
    assert g.c_bytes == 65_536                        # output carries no scale
    t = Gemm(128, 256, 512, "fp8", scaling="tensor")
    assert (t.a_bytes, t.b_bytes) == (65_540, 131_076)
    r = Gemm(128, 256, 512, "fp8", scaling="row")
    assert (r.a_bytes, r.b_bytes) == (65_536 + 512, 131_072 + 1024)


# ---------------------------------------------------------------------------------------------------------------------
# Plain formats and lookup


@pytest.mark.parametrize(("name", "nbytes"), [("fp32", 4), ("tf32", 4), ("bf16", 2), ("fp16", 2), ("fp8_e4m3", 1),
                                              ("fp8_e5m2", 1), ("int8", 1)])
def test_plain_bytes_per_value(name, nbytes):
    assert get_format(name).bytes_per_value == nbytes  # tf32 is stored as fp32


def test_aliases_and_case():
    assert get_format("BF16").name == "bf16"
    assert get_format("bfloat16").name == "bf16"
    assert get_format("fp8").name == "fp8_e4m3"
    assert get_format("FP8-E4M3").name == "fp8_e4m3"
    assert get_format("fp4").name == "nvfp4"


def test_unknown_format_lists_known_names():
    with pytest.raises(UnknownNameError) as err:
        get_format("bf17")
    msg = str(err.value)
    assert "bf17" in msg and "bf16" in msg and "\n" not in msg


def test_format_names_cover_all_formats():
    assert tuple(f.name for f in all_formats()) == FORMAT_NAMES
    assert "int32" not in FORMAT_NAMES


@pytest.mark.parametrize("dims", [(0, 4), (4, 0), (-1, 4), (2.5, 4), (True, 4)])
def test_matrix_bytes_rejects_bad_dims(dims):
    with pytest.raises(TruepeakError, match="not a positive whole number") as err:
        get_format("bf16").matrix_bytes(*dims)
    assert not isinstance(err.value, UnknownNameError)  # a bad dimension is no unknown name


@pytest.mark.parametrize(("fmt", "scaling"), [("bf16", "tensor"), ("fp32", "row"), ("nvfp4", "block"),
                                              ("mxfp8", "block128"), ("bf16", "block")])
def test_matrix_bytes_takes_the_scalings_check_scaling_takes(fmt, scaling):
    """One rule: matrix_bytes accepts exactly what check_scaling accepts (no hidden "block", no fp32 scales on bf16)."""
    from truepeak.formats import check_scaling

    with pytest.raises(TruepeakError) as by_check:
        check_scaling(fmt, scaling)
    with pytest.raises(TruepeakError) as by_bytes:
        get_format(fmt).matrix_bytes(16, 256, scaling)
    assert str(by_bytes.value) == str(by_check.value)


def test_default_accumulate_is_the_formats_accumulator():
    from truepeak.formats import default_accumulate

    assert {f.name: f.accumulate for f in all_formats() if f.accumulate != "fp32"} == {"int8": "int32"}
    assert all(f.accumulate == default_accumulate(f.rate) for f in all_formats())
    assert get_format("nvfp4").is_block_scaled and not get_format("fp8").is_block_scaled


def test_unknown_scaling_rejected():
    with pytest.raises(TruepeakError):
        get_format("fp8").matrix_bytes(4, 4, "blockwise")


def test_unknown_format_lists_canonical_names_and_says_aliases_are_accepted():
    with pytest.raises(UnknownNameError) as err:
        get_format("bogus")
    msg = str(err.value)
    assert "known: fp32, tf32, bf16, fp16, fp8_e4m3, fp8_e5m2, mxfp8, mxfp6, mxfp4, nvfp4, int8" in msg
    assert "aliases are accepted" in msg and "fp8 = fp8_e4m3" in msg
    assert "bfloat16?" not in msg  # suggestions are canonical names


def test_fp6_is_a_rate_not_a_format():
    with pytest.raises(UnknownNameError, match="fp6 is a rate, not a format: use mxfp6"):
        get_format("fp6")


def test_alias_note():
    from truepeak.formats import alias_note

    assert alias_note("fp4").startswith("fp4 read as nvfp4") and "mxfp4" in alias_note("fp4")
    assert alias_note("fp8").startswith("fp8 read as fp8_e4m3")
    assert alias_note("nvfp4") is None and alias_note("BF16") is None and alias_note("fp8-e4m3") is None


def test_check_scaling():
    from truepeak.formats import check_scaling

    assert check_scaling("fp8", "row") == "row" and check_scaling("int8", "block128") == "block128"
    assert check_scaling("bf16", None) is None
    with pytest.raises(UnknownNameError, match="tensor, row, block128"):
        check_scaling("fp8", "bogus", flag="--scaling")
    with pytest.raises(TruepeakError, match="--scaling 'row' applies to fp8 and int8 inputs, not bf16"):
        check_scaling("bf16", "row", flag="--scaling")
    with pytest.raises(TruepeakError, match="own block scales"):
        check_scaling("mxfp8", "tensor")


# ----------------------------------------------------------------------------------------------------------------------
# Partial blocks are counted whole, and said so (fresh-user bug: K=1 in nvfp4 padded silently)


def test_block_padding_note_nvfp4_k1():
    f = get_format("nvfp4")
    assert f.matrix_bytes(70_000_000_000, 1) == 105_000_000_000  # 0.5 B payload + one whole 1 B scale per row
    note = f.block_padding_note(1)
    assert note.startswith("K=1 is not a multiple of nvfp4's 16-value block: each row stores 1 partial block, "
                           "counted whole")
    assert "1 of 16" in note


@pytest.mark.parametrize(("name", "k"), [("nvfp4", 4096), ("mxfp4", 4096), ("mxfp8", 64), ("bf16", 1), ("fp8", 7)])
def test_block_padding_note_none_for_whole_blocks_or_no_blocks(name, k):
    assert get_format(name).block_padding_note(k) is None


def test_block_padding_note_mx_and_fp8_block128():
    assert "K=40 is not a multiple of mxfp4's 32-value block" in get_format("mxfp4").block_padding_note(40)
    assert "8 of 32" in get_format("mxfp4").block_padding_note(40)
    note = get_format("fp8").block_padding_note(200, "block128")
    assert note.startswith("K=200 is not a multiple of fp8_e4m3's 128-value scale block (block128)")
    assert get_format("fp8").block_padding_note(200, "row") is None


def test_block_padding_note_rejects_bad_k():
    with pytest.raises(TruepeakError):
        get_format("nvfp4").block_padding_note(0)
