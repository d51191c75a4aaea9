"""The MoE kernels' input checks (truepeak.kernels.moe_triton.checks): every input the kernels would read wrongly is
refused with what would fit."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from truepeak.errors import TruepeakError, UnknownNameError  # noqa: E402
from truepeak.kernels import moe_triton as mt  # noqa: E402


def test_check_inputs_returns_the_dimensions():
    # w1 [E = 4, 2I = 256, H = 128], w2 [4, H, I = 128], topk_ids [T = 3, k = 2]
    w1 = mt.quantize_experts(torch.zeros(4, 256, 128), "bf16")
    w2 = mt.quantize_experts(torch.zeros(4, 128, 128), "bf16")
    ids = torch.tensor([[0, 1], [1, 3], [2, -1]])
    assert mt.check_inputs(torch.rand(3, 128).bfloat16(), w1, w2, ids, torch.rand(3, 2)) == (4, 128, 128, 3, 2)


def test_check_inputs_refuses_inputs_the_kernels_would_misread():
    # each of these once ran and returned wrong numbers (or read out of bounds) instead of an error
    w1 = mt.quantize_experts(torch.zeros(4, 256, 128), "bf16")
    w2 = mt.quantize_experts(torch.zeros(4, 128, 128), "bf16")
    ids = torch.tensor([[0, 1], [1, 3], [2, -1]])
    tw = torch.rand(3, 2)
    x = torch.rand(3, 128).bfloat16()
    with pytest.raises(TruepeakError, match=r"contiguous along H \(stride 1\), got strides \(1, 3\)"):
        mt.check_inputs(torch.rand(128, 3).bfloat16().t(), w1, w2, ids, tw)
    with pytest.raises(TruepeakError, match=r"same T, got x \[1, 128\] and topk_ids \[3, 2\]"):
        mt.check_inputs(x[:1], w1, w2, ids, tw)
    with pytest.raises(TruepeakError, match=r"topk_weights must have topk_ids' shape \[3, 2\], got \[3, 1\]"):
        mt.check_inputs(x, w1, w2, ids, tw[:, :1])
    with pytest.raises(TruepeakError, match="do not fit"):
        mt.check_inputs(x, w1, mt.quantize_experts(torch.zeros(4, 128, 64), "bf16"), ids, tw)


def test_check_inputs_refuses_weights_the_kernels_would_read_wrongly():
    import dataclasses

    torch.manual_seed(0)
    w1 = mt.quantize_experts(torch.randn(2, 128, 64), "bf16")
    w2 = mt.quantize_experts(torch.randn(2, 64, 64), "bf16")
    x, ids, tw = torch.rand(3, 64).bfloat16(), torch.zeros(3, 1, dtype=torch.long), torch.ones(3, 1)
    # the same values stored with K not contiguous (read as they are, the output was 1.13 of max |ref| off)
    strided = mt.ExpertWeights("bf16", w1.data.transpose(1, 2).contiguous().transpose(1, 2))
    with pytest.raises(TruepeakError, match=r"w1.data must be contiguous along K \(stride 1\)"):
        mt.check_inputs(x, strided, w2, ids, tw)
    with pytest.raises(TruepeakError, match="topk_ids must hold integer expert ids, got torch.float32"):
        mt.check_inputs(x, w1, w2, ids.float(), tw)
    f1 = mt.quantize_experts(torch.randn(2, 128, 64), "fp8")
    f2 = mt.quantize_experts(torch.randn(2, 64, 64), "fp8")
    with pytest.raises(TruepeakError, match=r"w2: fp8 scales must be \[2, 64\] for values \[2, 64, 64\], got \[2, 1, 64\]"):
        mt.check_inputs(x, f1, dataclasses.replace(f2, scale=f2.scale[:, None, :]), ids, tw)
    with pytest.raises(TruepeakError, match="w1.scale must be contiguous"):
        mt.check_inputs(x, dataclasses.replace(f1, scale=f1.scale.t().contiguous().t()), f2, ids, tw)
    with pytest.raises(UnknownNameError, match="fp4"):
        mt.check_inputs(x, mt.ExpertWeights("fp4", w1.data), w2, ids, tw)
    # dtypes the kernels would misread (fp8 with float64 scales gave all zeros)
    with pytest.raises(TruepeakError, match="w1: fp8 scales must be torch.float32, got torch.float64"):
        mt.check_inputs(x, dataclasses.replace(f1, scale=f1.scale.double()), f2, ids, tw)
    with pytest.raises(TruepeakError, match="w1: bf16 values must be torch.bfloat16"):
        mt.check_inputs(x, mt.ExpertWeights("bf16", w1.data.half()), w2, ids, tw)
    with pytest.raises(TruepeakError, match="x must be bf16, fp16 or fp32 hidden states, got torch.int32"):
        mt.check_inputs(x.int(), w1, w2, ids, tw)
    m1 = mt.quantize_experts(torch.randn(2, 128, 64), "mxfp4")
    m2 = mt.quantize_experts(torch.randn(2, 64, 64), "mxfp4")
    if hasattr(torch, "float8_e8m0fnu"):
        with pytest.raises(TruepeakError, match=r"mxfp4 scales must be torch.uint8 \(e8m0 bytes: scale.view"):
            mt.check_inputs(x, dataclasses.replace(m1, scale=m1.scale.view(torch.float8_e8m0fnu)), m2, ids, tw)
    with pytest.raises(TruepeakError, match="fp4 bytes must be one dense"):
        mt.check_inputs(x, dataclasses.replace(m1, data=torch.zeros(2, 256, 32, dtype=torch.uint8)[:, ::2]), m2, ids,
                        tw)


def test_check_inputs_refuses_nvfp4_without_its_global_scale():
    nv1 = mt.ExpertWeights("nvfp4", torch.zeros(1, 16, 128, dtype=torch.uint8),
                           torch.zeros(1, 16, 16, dtype=torch.float8_e4m3fn))
    nv2 = mt.ExpertWeights("nvfp4", torch.zeros(1, 256, 4, dtype=torch.uint8),
                           torch.zeros(1, 256, 0, dtype=torch.float8_e4m3fn), torch.ones(1))
    with pytest.raises(TruepeakError, match="need their per-expert global_scale"):
        mt.check_inputs(torch.zeros(2, 256).bfloat16(), nv1, nv2, torch.zeros(2, 1, dtype=torch.long), torch.ones(2, 1))
