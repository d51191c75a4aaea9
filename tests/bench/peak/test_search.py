"""The MAMF search itself (truepeak/bench/peak/search.py), on synthetic throughput landscapes: the optimum
found, the winner's curse, failed shapes, budgets, Ctrl-C."""

from __future__ import annotations

import math

import pytest

from truepeak.bench import peak as P


def landscape(best=(3072, 11264, 5376), top=800e12, ripple=0.0, unit=1024):
    """A smooth synthetic TFLOPS landscape with a single maximum ``top`` at ``best`` (multiples of 256), falling
    off ~2-4 % per 1024 in each dimension; ``ripple`` adds tile-quantisation ripple (zero on multiples of 1024, up to
    ``ripple`` per dimension between them), which can move the maximum off ``best``."""
    def f(shape):
        d = [(s - b) / unit for s, b in zip(shape, best)]
        smooth = math.exp(-0.03 * (d[0] ** 2) - 0.02 * (d[1] ** 2) - 0.04 * (d[2] ** 2))
        rip = 1 - ripple * sum(abs(math.sin(math.pi * s / 1024)) for s in shape)
        return top * smooth * rip
    return f


def grid_max(f, best, span=8, step=256):
    """The exhaustive maximum of ``f`` over a step-256 grid of +-span steps around ``best``."""
    r = range(-span, span + 1)
    return max(f((best[0] + i * step, best[1] + j * step, best[2] + k * step))
               for i in r for j in r for k in r if min(best[0] + i * step, best[1] + j * step, best[2] + k * step) > 0)


def run_search(f, plan=None, **kw):
    calls = []

    def evaluate(shape, trial):
        calls.append((shape, trial.phase))
        return f(shape)

    res = P.search_shapes(evaluate, plan or P.gpu_plan(), **kw)
    return res, calls


def interrupting(f, at: int, phase: str | None = None):
    """``evaluate`` for :func:`P.search_shapes`: ``f(shape)``, but Ctrl-C at the ``at``-th call (counting only calls
    of ``phase`` when given)."""
    calls = {"n": 0}

    def evaluate(shape, trial):
        if phase is None or trial.phase == phase:
            calls["n"] += 1
            if calls["n"] == at:
                raise KeyboardInterrupt
        return f(shape)

    return evaluate


def test_search_finds_the_known_optimum_within_150_evaluations():
    f = landscape()
    res, calls = run_search(f)
    assert res.best.shape == (3072, 11264, 5376)
    assert res.best.value == pytest.approx(f((3072, 11264, 5376)))
    assert res.stopped == "converged"
    assert res.evaluations <= 150  # an exhaustive step-256 grid up to 20480 has 80^3 = 512,000 shapes
    assert [p for _, p in calls[:40]] == ["coarse"] * 40
    assert {p for _, p in calls} == {"coarse", "refine", "remeasure"}


@pytest.mark.parametrize("best", [(16384, 16384, 16384), (256, 20480, 2048), (7936, 4352, 19712)])
def test_search_reaches_optima_at_the_edges_and_between_the_grid(best):
    f = landscape(best=best)
    res, _ = run_search(f)
    assert res.best.value >= 0.99 * f(best) and res.evaluations <= 200


@pytest.mark.parametrize("best", [(3072, 11264, 5376), (1280, 4096, 12032)])
def test_with_tile_ripple_the_search_is_within_1_percent_of_the_exhaustive_grid(best):
    f = landscape(best=best, ripple=0.004)
    res, _ = run_search(f)
    assert res.best.value >= 0.99 * grid_max(f, best) and res.evaluations <= 200


def test_neighbours_stay_in_bounds_and_on_the_finest_step():
    plan = P.gpu_plan()
    assert P.neighbours((2048, 2048, 2048), 1024, plan) == [(3072, 2048, 2048), (1024, 2048, 2048),
                                                            (2048, 3072, 2048), (2048, 1024, 2048),
                                                            (2048, 2048, 3072), (2048, 2048, 1024)]
    assert P.neighbours((256, 20480, 512), 256, plan) == [(512, 20480, 512), (256, 20224, 512), (256, 20480, 768),
                                                          (256, 20480, 256)]
    assert all(d % 256 == 0 for s in P.neighbours((4096, 8192, 512), 2048, plan) for d in s)


def test_winners_curse_a_lucky_first_measurement_loses_the_remeasure():
    f = landscape()
    lucky = (8192, 8192, 8192)  # 6 % above the true optimum on its first (noisy) measurement only

    def evaluate(shape, trial):
        if shape == lucky and trial.phase != "remeasure":
            return 1.06 * f((3072, 11264, 5376))
        return f(shape)

    res = P.search_shapes(evaluate, P.gpu_plan())
    assert res.first_pass_best().shape == lucky
    assert res.best.shape == (3072, 11264, 5376)  # re-measured: the lucky shape shows its true, lower value
    assert [t.shape for t in res.trials if t.phase == "remeasure"][0] == lucky


def test_failed_shapes_out_of_memory_are_skipped_and_the_search_goes_on():
    f = landscape(best=(12288, 12288, 12288))
    fits = lambda s: s[0] * s[1] + s[1] * s[2] + s[0] * s[2] <= 3 * 10240 ** 2  # noqa: E731

    res, _ = run_search(lambda s: f(s) if fits(s) else None)
    failed = [t for t in res.trials if t.value is None]
    assert failed and all(not fits(t.shape) for t in failed)
    assert fits(res.best.shape)
    best_fit = max(f(s) for s in P.coarse_grid(P.GPU_COARSE_DIMS) if fits(s))
    assert res.best.value >= best_fit


def test_the_time_budget_stops_the_search_but_the_best_is_still_remeasured():
    now = [0.0]

    def clock():
        return now[0]

    def evaluate(shape, trial):
        now[0] += 1.0  # every evaluation "takes" 1 s
        return landscape()(shape)

    res = P.search_shapes(evaluate, P.gpu_plan(), budget_s=20.0, remeasure_reserve_s=3.0, clock=clock)
    assert res.stopped == "budget"
    assert len([t for t in res.trials if t.phase != "remeasure"]) == 17
    assert len([t for t in res.trials if t.phase == "remeasure"]) == 3
    assert res.elapsed_s == 20.0


def test_max_evals_bounds_the_search():
    res, _ = run_search(landscape(), P.SearchPlan(tuple(P.coarse_grid(P.GPU_COARSE_DIMS)), max_evals=10))
    assert res.stopped == "max_evals" and len([t for t in res.trials if t.phase != "remeasure"]) == 10


def test_nothing_runs_gives_no_best():
    res, _ = run_search(lambda s: None, P.SearchPlan(((1024, 1024, 1024),)))
    assert res.best is None and res.evaluations == 1


def test_the_last_remeasurement_marks_the_search_finished():
    """The last trial (the last re-measurement) carries why the first pass stopped; its record's ``search`` field
    says ``final``, so `truepeak peak --resume` can tell a finished search from an interrupted one."""
    res, _ = run_search(landscape())
    last = res.trials[-1]
    assert last.phase == "remeasure" and last.stopped == res.stopped == "converged"
    assert last.search_info.to_dict() == {"phase": "remeasure", "round": last.round, "eval": res.evaluations - 1,
                                          "final": True, "stopped": "converged"}
    assert all(t.stopped is None and t.search_info.final is None and t.search_info.stopped is None
               for t in res.trials[:-1])


def test_ctrl_c_in_the_first_pass_keeps_the_trials_and_the_best_so_far():
    f = landscape()
    first = P.coarse_grid(P.GPU_COARSE_DIMS)[:3]
    with pytest.raises(P.SearchInterrupted) as info:
        P.search_shapes(interrupting(f, 4), P.gpu_plan())
    res = info.value.result
    assert isinstance(info.value, KeyboardInterrupt)
    assert [t.shape for t in res.trials] == first  # the 4th, interrupted, is not a trial
    assert res.stopped == "interrupted" and not res.remeasured
    assert res.best.shape == max(first, key=f) and res.best.value == f(max(first, key=f))


def test_ctrl_c_in_the_remeasurements_answers_with_a_remeasured_best():
    f = landscape()
    full, _ = run_search(f)
    with pytest.raises(P.SearchInterrupted) as info:
        P.search_shapes(interrupting(f, 2, phase="remeasure"), P.gpu_plan())
    res = info.value.result
    assert res.evaluations == full.evaluations - 2  # the last two re-measurements did not finish
    assert res.remeasured and res.best.phase == "remeasure" and res.best.shape == (3072, 11264, 5376)
    assert P.best_so_far([]) is None
