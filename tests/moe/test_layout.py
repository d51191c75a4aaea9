"""Parallel layouts (truepeak.moe.layout): parsing, the divisibility a model breaks, the default layouts."""

from __future__ import annotations

import pytest

from truepeak.errors import TruepeakError
from truepeak.moe.layout import check_layout, default_layouts, parse_layout, parse_layouts


@pytest.mark.parametrize("text, gpus, attn_tp, moe_tp, ep, pp", [
    ("tp8", 8, 8, 8, 1, 1),
    ("tp4pp2", 8, 4, 4, 1, 2),
    ("ep8", 8, 8, 1, 8, 1),
    ("tp2ep4", 8, 8, 2, 4, 1),
    ("dp8ep8", 8, 1, 1, 8, 1),
    ("dp8", 8, 1, 8, 1, 1),
    ("DP4-EP4-PP2", 8, 1, 1, 4, 2),
])
def test_parse_layout(text, gpus, attn_tp, moe_tp, ep, pp):
    lay = parse_layout(text)
    assert (lay.gpus, lay.attn_tp, lay.moe_tp, lay.ep, lay.pp) == (gpus, attn_tp, moe_tp, ep, pp)


@pytest.mark.parametrize("text, words", [
    ("tp0", "must be at least 1"), ("tp8tp2", "twice"), ("xp8", "cannot read"), ("", "empty"),
    ("dp4ep8", "must be equal"), ("tp8,", "cannot read"),
])
def test_parse_layout_rejects(text, words):
    with pytest.raises(TruepeakError, match=words):
        parse_layout(text)


def test_layout_that_does_not_divide_says_which(glm5):
    with pytest.raises(TruepeakError) as e:
        check_layout(glm5, parse_layout("ep3"))
    msg = str(e.value)
    assert "256 routed experts are not divisible by EP3" in msg
    assert "64 attention heads are not divisible by attention TP3" in msg
    with pytest.raises(TruepeakError, match="80 layers|exceeds the 78 layers"):
        check_layout(glm5, parse_layout("pp80"))


def test_default_layouts_are_six_valid_ones(dsv3):
    lays = default_layouts(8, dsv3)
    assert [l.name for l in lays] == ["tp8", "ep8", "dp8ep8", "tp4pp2", "tp2pp4", "tp2ep4"]
    assert all(l.gpus == 8 for l in lays)
    assert [l.name for l in parse_layouts("tp8, ep8,tp8")] == ["tp8", "ep8"]
