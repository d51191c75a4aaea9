"""The routing grammar (truepeak.moe.routing.grammar): the power law and its placements, histograms, dump
files and numpy inputs."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from truepeak.errors import TruepeakError
from truepeak.moe.routing import (empirical_stats, monte_carlo, parse_routing, powerlaw_probs, routing_file,
                                  routing_stats)


def test_powerlaw_definition():
    """Zipf by rank, (r + 1)^−α, water-filled to Σ p = k with p ≤ 1, ranks → ids by a seeded permutation."""
    p = powerlaw_probs(0.5, 8, 256, seed=3)
    assert sum(p) == pytest.approx(8.0) and max(p) < 1
    w = sorted(((r + 1) ** -0.5 for r in range(256)), reverse=True)
    assert sorted(p, reverse=True) == pytest.approx([8 * x / sum(w) for x in w], rel=1e-12)
    assert powerlaw_probs(0.5, 8, 256, seed=3) == p and powerlaw_probs(0.5, 8, 256, seed=4) != p
    steep = sorted(powerlaw_probs(1.2, 8, 128), reverse=True)
    assert steep[:2] == [1.0, 1.0] and sum(steep) == pytest.approx(8.0) and steep[2] < 1
    assert routing_stats(64, 8, 256, routing="powerlaw:0").method == "exact"


def test_powerlaw_placements():
    """'sorted': rank r is expert r (hottest on GPU 0); 'balanced': greedy hottest-first onto the least-loaded GPU with
    a free slot (GPU sums of p differ by at most the largest p); all three agree with Monte-Carlo on the busiest GPU."""
    p = powerlaw_probs(0.8, 8, 64, placement="sorted")
    assert p == sorted(p, reverse=True)
    b = powerlaw_probs(0.8, 8, 64, placement="balanced", ep=8)
    per_gpu = [sum(b[g * 8:(g + 1) * 8]) for g in range(8)]
    assert sorted(b) == pytest.approx(sorted(p)) and max(per_gpu) - min(per_gpu) <= max(p)  # greedy bound
    assert max(per_gpu) < sum(p[:8])  # GPU 0 of 'sorted' holds the 8 hottest
    loads = {}
    for pl in ("sorted", "", "balanced"):
        rt = "powerlaw:1.01" + (f":{pl}" if pl else "")
        s = routing_stats(512, 8, 256, routing=rt, ep=8)
        mc = monte_carlo(512, 8, 256, routing=rt, ep=8, trials=20)
        assert s.busiest_gpu_pairs == pytest.approx(mc.busiest_gpu_pairs, rel=0.02)
        assert s.routing == rt
        loads[pl] = s.gpu_imbalance
    assert loads["sorted"] > loads[""] > loads["balanced"] > 1
    with pytest.raises(TruepeakError, match="placement 'hot' is unknown"):
        routing_stats(8, 8, 256, routing="powerlaw:1:hot")


IDS = [[0, 1], [0, 2], [0, 3]]


@pytest.mark.parametrize("suffix", [".json", ".txt", ".npy"])
def test_dump_files(tmp_path, suffix):
    path = tmp_path / f"topk_ids{suffix}"
    if suffix == ".json":
        path.write_text(json.dumps({"topk_ids": IDS}))
    elif suffix == ".txt":
        path.write_text("# token ids\n0 1\n0,2\n0 3\n")
    else:
        import numpy as np

        np.save(path, np.array(IDS, dtype=np.int32))
    assert empirical_stats(str(path), 4, ep=2).busiest_gpu_pairs == 4
    r = parse_routing(str(path), 4, 2)
    assert r.kind == "dump" and r.probs == pytest.approx((1.0, 1 / 3, 1 / 3, 1 / 3))
    s = routing_stats(30, 2, 4, routing=path, ep=2)
    assert s.hottest_expert_mean == pytest.approx(30.0) and s.routing == f"dump:{path.name}"


def test_numpy_inputs():
    import numpy as np

    hist = np.full(256, 3.0)
    assert routing_stats(64, 8, 256, routing=hist).routing == "histogram"
    assert parse_routing(np.array(IDS), 4, 2).kind == "dump"
    assert routing_stats(np.int64(64), 8, 256).tokens == 64


def test_histogram_file(tmp_path):
    path = tmp_path / "counts.json"
    path.write_text(json.dumps([3, 1, 1, 1]))
    assert parse_routing(str(path), 4, 2).kind == "histogram"


def test_routing_file_says_which_text_names_a_file(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "ids").write_text("0 1\n")
    (tmp_path / "uniform").write_text("0 1\n")                       # a keyword stays a keyword
    assert routing_file("uniform") is None and routing_file("powerlaw:1.2") is None
    assert routing_file("missing") is None                           # no suffix, no such file: not a path
    assert routing_file("missing.npy") == Path("missing.npy")       # a suffix makes a path, existing or not
    assert routing_file("some/where") == Path("some/where")
    assert routing_file("ids") == Path("ids") and routing_file(tmp_path / "ids") == tmp_path / "ids"
    assert routing_file([1, 2]) is None
    r = parse_routing("ids", 4, 2)
    assert (r.kind, r.label, r.ids) == ("dump", "dump:ids", ((0, 1),))
    assert r.probs == pytest.approx((1.0, 1.0, 0.0, 0.0))
    assert parse_routing("uniform", 4, 2).kind == "uniform"


def test_text_too_long_for_a_file_name_is_an_unknown_routing():
    # 256 counts typed on a command line (511 characters, past the 255 a file name may have): not a file, and the
    # error names the forms text may take (a histogram only from a file or from Python)
    spec = ",".join(["1"] * 256)
    assert routing_file(spec) is None
    with pytest.raises(TruepeakError, match=r"^unknown routing '1,1,.*accepted: .*a file of E per-expert counts"):
        parse_routing(spec, 256, 8)
