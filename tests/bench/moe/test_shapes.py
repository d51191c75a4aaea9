"""The expert shape of a model under TP and EP, tokens per expert, routing ids and the unit's FLOP
(truepeak.bench.moe.shapes)."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from truepeak.bench import moe  # noqa: E402
from truepeak.errors import ConfigError, TruepeakError, UnsupportedError  # noqa: E402


def test_expert_shapes_from_configs_and_layouts():
    # the presets' config.json (sources: src/truepeak/moe/presets/README.md): DeepSeek-V3 hidden 7168, expert width
    # 2048, 256 experts, top-8; GLM-5 6144 / 2048 / 256 / 8; Qwen3-235B-A22B 4096 / 1536 / 128 / 8; gpt-oss-120b
    # 2880 / 2880 / 128 / 4
    s = moe.expert_shape("deepseek-v3")
    assert (s.H, s.I, s.E, s.E_local, s.top_k) == (7168, 2048, 256, 256, 8)
    s = moe.expert_shape("glm-5", ep=8)
    assert (s.H, s.I, s.E_local) == (6144, 2048, 32)
    s = moe.expert_shape("qwen3-235b-a22b", tp=4)
    assert (s.H, s.I, s.E, s.top_k) == (4096, 384, 128, 8)
    s = moe.expert_shape("gpt-oss-120b")
    assert (s.H, s.I, s.E, s.top_k) == (2880, 2880, 128, 4)


def test_bad_layouts():
    with pytest.raises(ConfigError, match="`ep` 3 does not divide the 256 experts") as exc:
        moe.expert_shape("deepseek-v3", ep=3)
    assert exc.value.field == "ep"
    with pytest.raises(ConfigError, match=r"`tp` 3 does not divide the expert width I=2048 .*; use a divisor of "
                                          r"2048 \(1, 2, 4, 8, 16, ...\)") as exc:
        moe.expert_shape("deepseek-v3", tp=3)
    assert exc.value.field == "tp"
    with pytest.raises(ConfigError, match="not both"):
        moe.expert_shape("deepseek-v3", tp=2, ep=2)
    with pytest.raises(ConfigError, match=">= 1, got tp=1, ep=0") as exc:
        moe.expert_shape("deepseek-v3", ep=0)
    assert exc.value.field == "ep"


def test_model_without_moe_layers_is_refused(monkeypatch):
    import types

    from truepeak.moe import config

    dense = types.SimpleNamespace(name="dense-7b", num_moe_layers=0, hidden_size=4096,
                                  experts=types.SimpleNamespace(intermediate_size=0, num_experts=0, top_k=0))
    monkeypatch.setattr(config, "load_model", lambda name: dense)
    with pytest.raises(UnsupportedError, match="no MoE layers"):
        moe.expert_shape("dense-7b")


def test_tokens_per_expert_sets_T():
    s = moe.expert_shape("deepseek-v3")
    assert moe.tokens_for(16, s) == 512          # 16 * 256 / 8: batch 512 -> 16 per expert
    assert moe.tokens_for(1, s) == 32
    assert moe.tokens_for(256, moe.expert_shape("glm-5", ep=8)) == 8192   # T is global: E = 256, not 32
    with pytest.raises(TruepeakError, match="must be a finite number > 0, got 0"):
        moe.tokens_for(0, s)


def test_routing_uniform_powerlaw_and_file(tmp_path):
    # the planner's routing grammar (truepeak.moe.routing): one meaning of a spec for `moe plan` and `moe bench`
    ids = moe.sample_routing("uniform", 512, 256, 8)
    assert ids.shape == (512, 8) and ids.dtype == torch.int64
    assert all(len(set(r)) == 8 for r in ids.tolist())                   # distinct experts per token
    assert torch.equal(moe.sample_routing("powerlaw:0", 512, 256, 8), ids)   # alpha 0 is uniform
    # powerlaw:1.2, E = 64, k = 4: Zipf weights (r + 1)^-1.2 water-filled to sum 4. Rank 0 would get
    # 4 / sum_r (r + 1)^-1.2 = 1.54 > 1: capped at 1, picked by every token; rank 1 gets 3 * 2^-1.2 / sum_{r>=1} = 0.540
    ids = moe.sample_routing("powerlaw:1.2", 4096, 64, 4)
    assert all(len(set(r)) == 4 for r in ids.tolist())
    counts = torch.bincount(ids.flatten(), minlength=64).sort(descending=True).values
    p1 = 3 * 2 ** -1.2 / sum((r + 1) ** -1.2 for r in range(1, 64))
    assert p1 == pytest.approx(0.540, abs=1e-3)
    assert counts[0] == 4096                                             # the saturated expert: every token
    assert abs(counts[1] - 4096 * p1) < 5 * (4096 * p1 * (1 - p1)) ** 0.5
    assert counts.sum() == 4 * 4096
    f = tmp_path / "ids.txt"
    f.write_text("0 1\n2,3\n")
    assert moe.sample_routing(str(f), 3, 4, 2).tolist() == [[0, 1], [2, 3], [0, 1]]   # a dump replays its rows
    g = tmp_path / "ids"                                                 # a file without a suffix is a file too
    g.write_text("3 2\n")
    assert moe.sample_routing(str(g), 2, 4, 2).tolist() == [[3, 2], [3, 2]]
    with pytest.raises(TruepeakError, match="row 0 has 2 ids, expected top_k = 3"):
        moe.sample_routing(str(f), 3, 4, 3)
    with pytest.raises(TruepeakError, match="unknown routing 'zipf'"):
        moe.sample_routing("zipf", 8, 4, 2)
    with pytest.raises(TruepeakError, match="alpha -1.0 must be a number >= 0"):
        moe.sample_routing("powerlaw:-1", 8, 4, 2)


def test_local_ids_for_ep():
    s = moe.expert_shape("deepseek-v3", ep=8)                            # 32 local experts, rank 0 holds 0..31
    assert moe.local_ids(torch.tensor([[0, 31, 32, 255]]), s).tolist() == [[0, 31, -1, -1]]
    assert moe.local_ids(torch.tensor([[32, 63, 64]]), s, rank=1).tolist() == [[0, 31, -1]]


def test_decode_inputs_are_the_seeded_point():
    s = moe.expert_shape("deepseek-v3", ep=8)
    x, ids, topw = moe.decode_inputs(s, 2, "uniform", 3, "cpu")
    # T = 2 * 256 / 8 = 64 tokens; top-8 ids, local to rank 0's 32 experts (others -1); weights sum to 1 per token
    assert x.shape == (64, 7168) and x.dtype == torch.bfloat16 and ids.shape == topw.shape == (64, 8)
    assert float(x.min()) >= -1 and float(x.max()) < 1
    assert int(ids.max()) <= 31 and int(ids.min()) == -1 and bool((ids >= 0).any())
    assert torch.allclose(topw.sum(1), torch.ones(64))
    assert torch.equal(ids, moe.local_ids(moe.sample_routing("uniform", 64, 256, 8, 3), s))
    again = moe.decode_inputs(s, 2, "uniform", 3, "cpu")
    assert all(torch.equal(a, b) for a, b in zip((x, ids, topw), again))
    other = moe.decode_inputs(s, 2, "uniform", 4, "cpu")
    assert not torch.equal(x, other[0]) and not torch.equal(ids, other[1])


def test_unit_flop():
    s = moe.expert_shape("deepseek-v3")
    assert moe.unit_flop(s, 4096) == 2 * 3 * 7168 * 2048 * 4096        # 360.8 GFLOP at 16 tokens per expert
