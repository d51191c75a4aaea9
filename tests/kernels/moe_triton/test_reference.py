"""The float32 reference of the MoE unit (truepeak.kernels.moe_triton.reference) on a hand-worked example."""

from __future__ import annotations

import math

import pytest

torch = pytest.importorskip("torch")

from truepeak.kernels import moe_triton as mt  # noqa: E402


def test_moe_reference_hand_example():
    # E = 2, H = 2, I = 1. Token 0 = [1, 2] goes to experts 0 (weight 0.5) and 1 (0.25); token 1 only to ids outside
    # [0, E) (another rank's), so its row stays zero.
    # expert 0: g = [1, 0].x = 1, u = [0, 1].x = 2, h = silu(1) * 2 = 2 / (1 + e^-1) = 1.4621172; down [1, 2] h
    # expert 1: g = [1, 1].x = 3, u = [1, 0].x = 1, h = silu(3) = 3 / (1 + e^-3) = 2.8577223; down [1, -1] h
    # out[0] = 0.5 * 1.4621172 * [1, 2] + 0.25 * 2.8577223 * [1, -1] = [1.4454892, 0.7476866]
    w1 = torch.tensor([[[1.0, 0.0], [0.0, 1.0]], [[1.0, 1.0], [1.0, 0.0]]])
    w2 = torch.tensor([[[1.0], [2.0]], [[1.0], [-1.0]]])
    x = torch.tensor([[1.0, 2.0], [1.0, 1.0]])
    ids = torch.tensor([[0, 1], [-1, 2]])
    tw = torch.tensor([[0.5, 0.25], [1.0, 1.0]])
    out = mt.moe_reference(x, w1, w2, ids, tw)
    assert out.dtype == torch.float32 and out.shape == (2, 2)
    assert out[0].tolist() == pytest.approx([1.4454892, 0.7476866], rel=1e-6)
    assert 0.5 * 2 / (1 + math.exp(-1)) + 0.25 * 3 / (1 + math.exp(-3)) == pytest.approx(1.4454892, rel=1e-6)
    assert out[1].tolist() == [0.0, 0.0]
    # act_quant rounds x and each intermediate row before its GEMM: floor(1.462) = 1 and floor(2.858) = 2, so
    # out[0] = 0.5 * 1 * [1, 2] + 0.25 * 2 * [1, -1] = [1, 0.5]
    assert mt.moe_reference(x, w1, w2, ids, tw, act_quant=torch.floor)[0].tolist() == [1.0, 0.5]
