"""truepeak.moe.plan.levers: each lever is one re-plan, sorted by expected gain."""

from __future__ import annotations

import pytest

from truepeak.moe.calibration import default_calibration
from truepeak.moe.plan import plan
from truepeak.moe.plan.levers import levers


@pytest.fixture(scope="module")
def base(dsv3, h200):
    return plan(dsv3, h200, "tp8", 8, context=1536)


def test_levers_are_re_plans_sorted_by_gain(dsv3, h200, base):
    cal = default_calibration()
    lv = levers(base, dsv3, h200, cal, context=1536, formats=base.formats)
    keys = [x.key for x in lv]
    assert "cuda_graphs" not in keys                 # already in a graph
    assert {"ep", "dp_attention", "mtp", "fp8_kv_cache", "fp4_weights", "larger_batch", "fuse_small_ops",
            "faster_all_reduce", "expert_roofline"} <= set(keys)
    gains = [x.tokens_gain for x in lv]
    assert gains == sorted(gains, reverse=True)
    ep = next(x for x in lv if x.key == "ep")
    assert ep.step_after_s == pytest.approx(plan(dsv3, h200, "ep8", 8, context=1536).expected.step_s)
    twice = next(x for x in lv if x.key == "larger_batch")
    assert twice.tokens_per_s_after == pytest.approx(plan(dsv3, h200, "tp8", 16, context=1536).expected.tokens_per_s)
    small = next(x for x in lv if x.key == "fuse_small_ops")
    assert base.expected.step_s - small.step_after_s == pytest.approx(base.expected.by_group["small_ops"])


def test_eager_gets_the_cuda_graph_lever(dsv3, h200):
    cal = default_calibration()
    p = plan(dsv3, h200, "tp8", 1, context=1536, eager=True)
    lv = {x.key: x for x in levers(p, dsv3, h200, cal, context=1536, formats=p.formats, eager=True)}
    assert lv["cuda_graphs"].step_after_s == pytest.approx(plan(dsv3, h200, "tp8", 1, context=1536).expected.step_s)
    assert lv["cuda_graphs"].tokens_gain > 0


def test_no_mtp_lever_without_mtp_layers(h200):
    from truepeak.moe.config import load_model

    m = load_model("qwen3-30b-a3b")
    p = plan(m, h200, "tp1", 8, context=1536)
    assert "mtp" not in [x.key for x in levers(p, m, h200, default_calibration(), context=1536, formats=p.formats)]
