"""Expert weights in the MoE kernels' formats (truepeak.kernels.moe_triton.weights): the kernel copies, the w4a8 scale
words, mxfp4's per-expert rebasing, bytes per expert."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from truepeak.errors import TruepeakError, UnsupportedError  # noqa: E402
from truepeak.kernels import moe_triton as mt  # noqa: E402


def test_weights_in_the_w4a8_layout_and_their_scale_words():
    # the hand example of test_layouts.py (element 70 of row 5 = 1.5) as mxfp4 weights: the kernel copy holds the
    # w4a8 layout's bytes and dequantises to the same values
    std = torch.zeros(1, 64, 64, dtype=torch.uint8)
    std[0, 5, 35] = 0b0011
    w = mt.ExpertWeights("mxfp4", std, torch.full((1, 64, 4), 127, dtype=torch.uint8))
    k = w.in_kernel_order(w4a8=True)
    assert k.w4a8_layout and k.nibble_chunk == 64 and torch.equal(k.data, mt.to_w4a8_layout(std))
    assert torch.equal(k.dequantize(), w.dequantize())
    with pytest.raises(TruepeakError, match="the w4a8 layout has 64-element nibble chunks, not 128"):
        w.in_kernel_order(128, w4a8=True)
    # scale words (nvfp4: 16-element blocks, a 64-element step = 4 blocks): row n's 4 scale bytes of step s in one
    # little-endian int32, step-major [E, K/64, N]. Row 0's e4m3 scales 1, 2, 0.5, 4 | 1.5, 3, 0.75, 6 (bytes 0x38,
    # 0x40, 0x30, 0x48 | 0x3C, 0x44, 0x34, 0x4C) -> words 0x48304038 and 0x4C34443C
    sc = torch.full((1, 64, 8), 0x38, dtype=torch.uint8)
    sc[0, 0] = torch.tensor([0x38, 0x40, 0x30, 0x48, 0x3C, 0x44, 0x34, 0x4C], dtype=torch.uint8)
    nv = mt.ExpertWeights("nvfp4", std, sc.view(torch.float8_e4m3fn), torch.ones(1))
    assert sc.view(torch.float8_e4m3fn)[0, 0].float().tolist() == [1, 2, 0.5, 4, 1.5, 3, 0.75, 6]
    ws = nv.in_kernel_order(w4a8=True).w4a8_scale_words()
    assert ws.shape == (1, 2, 64) and ws.dtype == torch.int32
    assert [int(ws[0, 0, 0]), int(ws[0, 1, 0])] == [0x48304038, 0x4C34443C]
    assert int(ws[0, 0, 1]) == 0x38383838
    # mxfp4 in 64-element steps (K not a multiple of 128): 2 scale bytes per word, the high two zero
    mx = mt.ExpertWeights("mxfp4", torch.zeros(1, 64, 96, dtype=torch.uint8),
                          torch.tensor([[[120, 121, 122, 123, 124, 125]] * 64], dtype=torch.uint8))
    w64 = mx.w4a8_scale_words(64)
    assert w64.shape == (1, 3, 64) and [int(v) for v in w64[0, :, 0]] == [0x7978, 0x7B7A, 0x7D7C]
    with pytest.raises(TruepeakError, match="no w4a8 scale words for mxfp4 with K=192 in steps of 128"):
        mx.w4a8_scale_words(128)
    # the scale-word cache belongs to one scale tensor: a replaced copy computes its own
    import dataclasses

    nv2 = dataclasses.replace(nv, scale=torch.full_like(sc, 0x40).view(torch.float8_e4m3fn))
    k2 = nv2.in_kernel_order(w4a8=True)
    assert int(k2.w4a8_scale_words()[0, 0, 0]) == 0x40404040
    # ... and scales loaded in place (the tensor's version counter changes) are repacked again, into a copy
    k2.scale.view(torch.uint8).fill_(0x30)
    assert int(k2.w4a8_scale_words()[0, 0, 0]) == 0x30303030
    before = k2.w4a8_scale_words()
    k2.scale.view(torch.uint8)[0, 0, 0] = 0x38
    assert int(before[0, 0, 0]) == 0x30303030 and int(k2.w4a8_scale_words()[0, 0, 0]) == 0x30303038


def test_mxfp4_scales_rebased_per_expert_for_the_kernel():
    # e8m0 scales of expert 0 span 100..120, of expert 1 50..60: the kernel copy rebases each expert so its largest
    # scale is 136 (2^9) and keeps 2^(max - 136) as the per-expert scale; the dequantised values do not change
    scale = torch.stack([torch.randint(100, 121, (8, 4)), torch.randint(50, 61, (8, 4))]).to(torch.uint8)
    scale[0, 0, 0], scale[1, 0, 0] = 120, 60
    w = mt.ExpertWeights("mxfp4", torch.randint(0, 256, (2, 8, 64), dtype=torch.uint8), scale)
    k = w.in_kernel_order()
    assert k.scale.flatten(1).amax(1).tolist() == [136, 136]
    assert k.global_scale.tolist() == [2.0 ** (120 - 136), 2.0 ** (60 - 136)]
    assert torch.equal(k.dequantize(), w.dequantize())
    assert k.in_kernel_order() is k


def test_expert_weight_bytes_per_expert():
    # one DeepSeek-V3 down projection (7168 x 2048) in nvfp4: 8,257,536 B + its 4-byte per-expert global scale
    w = mt.ExpertWeights("nvfp4", torch.zeros(1, 7168, 1024, dtype=torch.uint8),
                         torch.zeros(1, 7168, 128, dtype=torch.float8_e4m3fn), torch.ones(1))
    assert w.shape == (1, 7168, 2048)
    assert w.nbytes_per_expert() == 8_257_536 + 4


def test_fp4_block_k_and_weights_in_kernel_order_dequantize_unchanged():
    # DeepSeek-V3 H 7168 = 28 * 256, I 2048 = 8 * 256; gpt-oss H = I = 2880 = 45 * 64; 720 (gpt-oss TP4) has no step
    assert (mt.fp4_block_k(7168), mt.fp4_block_k(2048), mt.fp4_block_k(2880), mt.fp4_block_k(384)) == (128, 128, 64,
                                                                                                        128)
    with pytest.raises(UnsupportedError, match="K=720"):
        mt.fp4_block_k(720)
    for wfmt in ("nvfp4", "mxfp4"):
        w = mt.quantize_experts(torch.randn(2, 8, 512), wfmt)
        k = w.in_kernel_order()
        assert k.nibble_chunk == 128 and not torch.equal(k.data, w.data)
        assert torch.equal(k.dequantize(), w.dequantize())
        # the kernel copy of mxfp4 adds its 4-byte per-expert rebasing scale
        assert k.in_kernel_order() is k
        assert k.nbytes_per_expert() == w.nbytes_per_expert() + (4 if wfmt == "mxfp4" else 0)


def test_nvfp4_weights_need_their_global_scale_to_dequantize():
    nv = mt.ExpertWeights("nvfp4", torch.zeros(1, 4, 8, dtype=torch.uint8), torch.zeros(1, 4, 1, dtype=torch.float8_e4m3fn))
    with pytest.raises(TruepeakError, match="need their per-expert global_scale"):
        nv.dequantize()
