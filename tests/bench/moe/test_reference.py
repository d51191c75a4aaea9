"""The float32 reference of the unit (truepeak.kernels.moe_triton.moe_reference, which truepeak.bench.moe.reference
calls)."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from truepeak.kernels import moe_triton as mt  # noqa: E402


def test_reference_sums_weighted_experts_by_hand():
    # E=1, I=1, H=1: gate = 2x, up = 3x; x = 1 -> silu(2) * 3 = 5.2848; down = 0.5 -> 2.6424; weight 0.25 -> 0.6606
    w1 = torch.tensor([[[2.0], [3.0]]])
    w2 = torch.tensor([[[0.5]]])
    out = mt.moe_reference(torch.tensor([[1.0]]), w1, w2, torch.tensor([[0, -1]]), torch.tensor([[0.25, 0.75]]))
    silu2 = 2 / (1 + torch.exp(torch.tensor(-2.0)))
    assert out.item() == pytest.approx(float(silu2) * 3 * 0.5 * 0.25, rel=1e-6)


def test_relative_error_is_max_difference_over_max_reference():
    from truepeak.bench.moe import relative_error

    # max |out - ref| = |2 - 4| = 2; max |ref| = 4 -> 0.5
    assert relative_error(torch.tensor([1.0, 2.0]), torch.tensor([1.0, 4.0])) == 0.5


def test_output_check_tolerance_by_weights_and_activations():
    from truepeak.bench.moe import check_output

    ref = torch.tensor([[1.0, -2.0], [0.5, 4.0]])
    out = ref * 1.05                       # max |out - ref| = 0.2 of max |ref| = 4: error 0.05
    args = (None, None, None, None, None, ref)
    bf16 = check_output(out, *args, "bf16", "bf16")
    assert bf16.error == pytest.approx(0.05) and bf16.tolerance == 2e-2 and not bf16.correctness.passed
    nvfp4 = check_output(out, *args, "nvfp4", "fp16")      # quantised weights: 8e-2
    assert nvfp4.tolerance == 8e-2 and nvfp4.correctness.passed
    assert nvfp4.correctness.max_rel_error == pytest.approx(0.05)
    fp8 = check_output(out, *args, "fp8", "fp8 e4m3, per-row scale")    # e4m3 activations: 1e-1
    assert fp8.tolerance == 1e-1 and fp8.correctness.passed
    assert fp8.correctness.reference == "float32, first 16 tokens"
