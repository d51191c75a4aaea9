"""The what-if table (truepeak.moe.plan.compare): a bad layout is a cell, any other error stops the table."""

from __future__ import annotations

import pytest

from truepeak.errors import TruepeakError
from truepeak.moe.layout import LayoutError, check_layout, parse_layout
from truepeak.moe.plan import compare


def test_compare_keeps_going_past_a_bad_layout(glm5, ws):
    cells = compare(glm5, ws, ["tp8", "ep3"], [1, 8], weights="nvfp4")
    assert [c.layout for c in cells] == ["tp8", "tp8", "ep3", "ep3"]
    assert cells[0].plan is not None and cells[2].plan is None and "EP3" in cells[2].error


def test_compare_tells_errors_apart_by_type(glm5, ws):
    # only a LayoutError becomes a cell; a bad batch (any size, checked first) or another error stops the table
    with pytest.raises(LayoutError, match="256 routed experts are not divisible by EP3"):
        check_layout(glm5, parse_layout("ep3"))
    with pytest.raises(TruepeakError, match="batch 0 must be a whole number >= 1"):
        compare(glm5, ws, ["ep3", "tp8"], [1, 0], weights="nvfp4")
    with pytest.raises(TruepeakError, match="batch 20000000 is above the 10,000,000 sequences"):
        compare(glm5, ws, ["tp8"], [20_000_000], weights="nvfp4")
    with pytest.raises(TruepeakError, match="interconnect 'infiniband' is not one of nvlink, pcie"):
        compare(glm5, ws, ["tp8"], [1], weights="nvfp4", interconnect="infiniband")
