"""Random expert weights in each stored format and the bytes a point reads (truepeak.bench.moe.weights)."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from truepeak.bench import moe  # noqa: E402
from truepeak.kernels import moe_triton as mt  # noqa: E402


def test_active_bytes_count_the_experts_that_got_tokens():
    # DeepSeek-V3 nvfp4 (0.5625 B per value: e2m1 + one e4m3 scale per 16, docs/method.md 'Counting FLOP and bytes'):
    # gate_up [4096, 7168] = 4096 * (3584 + 448) B, down [7168, 2048] = 8,257,536 B, each plus a 4-byte per-expert
    # global scale
    w1 = mt.ExpertWeights("nvfp4", torch.empty(1, 4096, 3584, dtype=torch.uint8),
                          torch.empty(1, 4096, 448, dtype=torch.float8_e4m3fn), torch.ones(1))
    w2 = mt.ExpertWeights("nvfp4", torch.empty(1, 7168, 1024, dtype=torch.uint8),
                          torch.empty(1, 7168, 128, dtype=torch.float8_e4m3fn), torch.ones(1))
    assert moe.active_bytes(w1, w2, [3, 0, 1]) == 2 * (16_515_072 + 4 + 8_257_536 + 4)


def test_w4a8_weights_need_their_layouts_tiles():
    # gpt-oss-120b at TP2 has I = 1440 = 22.5 x 64: the down projection's K cannot be cut into the w4a8 layout's
    # 64-element tiles (nor into w4a16's 64-element steps), so the format's points are skipped; with w4a8 the sweep
    # used to abort in the float32 reference
    pytest.importorskip("torch")
    from truepeak.errors import UnsupportedError

    small = moe.ExpertShape("toy", H=128, I=96, E=4, E_local=4, top_k=2)
    with pytest.raises(UnsupportedError, match="mxfp4 in the tiled layout .the w4a8 and w4a16 kernels. needs N and K "
                                               "multiples of 64, got N=128, K=96"):
        moe.make_weights(small, "mxfp4", "cpu", w4a8=True)
    with pytest.raises(UnsupportedError, match="K=96 is not a multiple of 64: the fp4 MoE kernel"):
        moe.make_weights(small, "mxfp4", "cpu")
