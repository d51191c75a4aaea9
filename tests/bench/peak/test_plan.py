"""How a search walks the shape space and how long it measures (truepeak/bench/peak/plan.py): the coarse grid,
plans refused, every evaluation warmed up (C12)."""

from __future__ import annotations

import pytest

from truepeak.bench import peak as P


def test_coarse_grid_is_large_and_aspect_varied():
    grid = P.coarse_grid(P.GPU_COARSE_DIMS)
    assert len(grid) == 40 and grid[0] == (16384, 16384, 16384)
    assert (2048, 2048, 16384) in grid and (2048, 16384, 4096) in grid and (8192, 8192, 8192) in grid
    assert all(m <= n for m, n, _ in grid)


def test_a_bad_plan_is_refused():
    with pytest.raises(Exception, match="coarse shape"):
        P.SearchPlan(())
    with pytest.raises(Exception, match="top_k"):
        P.SearchPlan(((1, 1, 1),), top_k=0)


def test_C12_every_search_evaluation_warms_up_and_sustained_settles():
    for b in (P.BURST_BUDGETS, P.SUSTAINED_BUDGETS, P.CPU_PEAK_BUDGETS):
        assert b.warmup_s > 0 and b.final_warmup_s >= b.warmup_s and b.final_budget_s > b.budget_s
    assert P.SUSTAINED_BUDGETS.settle_s >= 3.0 and P.SUSTAINED_BUDGETS.final_warmup_s >= 3.0  # CUTLASS: ~3 s
    assert P.SUSTAINED_BUDGETS.reserve_s(3) == pytest.approx(3 * (3.0 + 2.0 + 0.3))


def test_a_bad_plan_names_its_field():
    from truepeak.errors import ConfigError

    with pytest.raises(ConfigError, match=r"refinement steps must be positive, got \(256, 0\)") as info:
        P.SearchPlan(((1024, 1024, 1024),), steps=(256, 0))
    assert info.value.field == "steps"
