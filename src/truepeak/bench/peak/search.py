"""The search itself, pure: coarse grid, coordinate descent, re-measurement of the best few (:func:`search_shapes`).
It takes an ``evaluate(shape, trial) -> FLOP/s or None`` and a clock, so it is tested on synthetic throughput
landscapes; :mod:`truepeak.bench.peak.job` gives it a device."""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from truepeak.bench.peak.plan import SearchPlan, Shape
from truepeak.records import Record, SearchStep


@dataclass
class Trial:
    """One evaluation: shape, where in the search it happened, and its throughput (FLOP/s; None when it failed).

    ``stopped`` is set on the search's last trial only (the last re-measurement): why the coarse and refine phases
    ended (:attr:`SearchResult.stopped`). A search whose records hold that trial finished; ``truepeak peak --resume``
    takes its answer from the records instead of searching again."""

    shape: Shape
    phase: str
    round: int
    step: int | None
    index: int
    value: float | None
    record: Record | None = None
    stopped: str | None = None

    @property
    def search_info(self) -> SearchStep:
        """The record's ``search`` step: ``phase``, ``round``, ``step``, ``eval`` (the trial's index, 0 first), and on
        the last trial ``final=True`` with ``stopped``."""
        last = self.stopped is not None
        return SearchStep(phase=self.phase, round=self.round, step=self.step, eval=self.index,
                          final=True if last else None, stopped=self.stopped)


@dataclass
class SearchResult:
    """What :func:`search_shapes` found.

    Attributes:
        best: the winning trial (a re-measurement when there was one), or None when nothing ran. After an
            interruption (:class:`SearchInterrupted`): the best so far, re-measured if any re-measurement finished,
            else the best first-pass trial.
        trials: every evaluation, in order (coarse, refine, remeasure).
        stopped: why the coarse/refine phases ended: ``"converged"`` (no neighbour better at the finest step),
            ``"budget"`` (time), ``"max_evals"``; ``"interrupted"`` (Ctrl-C) in a :class:`SearchInterrupted`.
        elapsed_s: time the search took by its clock.
    """

    best: Trial | None
    trials: list[Trial]
    stopped: str
    elapsed_s: float

    @property
    def evaluations(self) -> int:
        return len(self.trials)

    @property
    def remeasured(self) -> bool:
        """Whether ``best`` is a re-measurement (the answer of a finished search; after an interruption before the
        re-measurements, ``best`` is a first-pass trial)."""
        return self.best is not None and self.best.phase == "remeasure"

    def first_pass_best(self) -> Trial | None:
        """The best coarse/refine trial (before re-measurement)."""
        ok = [t for t in self.trials if t.phase != "remeasure" and t.value is not None]
        return max(ok, key=lambda t: t.value) if ok else None


class SearchInterrupted(KeyboardInterrupt):
    """:func:`search_shapes` was interrupted (Ctrl-C inside an evaluation): ``result`` holds the trials finished before
    it and the best so far (``stopped == "interrupted"``). The evaluation in progress is not among the trials."""

    def __init__(self, result: SearchResult):
        super().__init__(f"search interrupted after {result.evaluations} evaluations")
        self.result = result


def best_so_far(trials: Sequence[Trial]) -> Trial | None:
    """The answer an interrupted search can give: the best re-measured trial if any re-measurement finished, else the
    best first-pass (coarse or refine) trial; None when no trial has a value."""
    for phases in (("remeasure",), ("coarse", "refine")):
        ok = [t for t in trials if t.phase in phases and t.value is not None]
        if ok:
            return max(ok, key=lambda t: t.value)
    return None


def _align(x: int, step: int, lo: int, hi: int) -> int:
    return int(min(max(round(x / step) * step, lo), hi))


def neighbours(shape: Shape, step: int, plan: SearchPlan) -> list[Shape]:
    """Shapes one ``step`` away in one of M, N, K, inside the plan's bounds, multiples of its finest step."""
    out: list[Shape] = []
    lo = max(plan.min_dim, plan.align)
    hi = plan.max_dim - plan.max_dim % plan.align
    for axis in range(3):
        for sign in (1, -1):
            s = list(shape)
            s[axis] = s[axis] + sign * step
            if s[axis] < lo or s[axis] > hi:
                continue
            cand = (s[0], s[1], s[2])
            if cand != shape and cand not in out:
                out.append(cand)
    return out


def search_shapes(
    evaluate: Callable[[Shape, Trial], float | None],
    plan: SearchPlan,
    *,
    budget_s: float | None = None,
    remeasure_reserve_s: float = 0.0,
    clock: Callable[[], float] = time.monotonic,
    remeasure: Callable[[Shape, Trial], float | None] | None = None,
    on_trial: Callable[[Trial], None] | None = None,
) -> SearchResult:
    """Find the shape with the highest throughput: coarse grid, coordinate descent, re-measurement of the top few.

    Args:
        evaluate: ``evaluate(shape, trial) -> FLOP/s`` (higher is better), or None when the shape failed (out of
            memory, unsupported): it is then never the answer and the search goes on. ``trial`` says where in the
            search it is (its ``value`` is filled in afterwards).
        plan: the :class:`SearchPlan`.
        budget_s: wall budget of the whole search by ``clock`` (None: no time limit). The coarse and refine phases
            stop when ``budget_s - remeasure_reserve_s`` has passed; re-measurement then runs regardless (it is
            what the answer rests on).
        remeasure_reserve_s: time kept for the re-measurements.
        clock: seconds (a fake one in tests).
        remeasure: the longer measurement for the final phase (default ``evaluate``).
        on_trial: called after each trial (progress, records).

    Returns:
        :class:`SearchResult`; ``best`` is the best re-measured trial (or, if every re-measurement failed, the best
        first-pass one). The last re-measurement's trial carries ``stopped`` (its record's ``search.final``).

    Raises:
        SearchInterrupted: a KeyboardInterrupt (Ctrl-C) inside ``evaluate`` or ``remeasure``; it carries the trials
            finished before and the best so far (:func:`best_so_far`).
    """
    start = clock()
    trials: list[Trial] = []
    try:
        return _search(evaluate, plan, budget_s, remeasure_reserve_s, clock, remeasure, on_trial, start, trials)
    except KeyboardInterrupt:
        raise SearchInterrupted(SearchResult(best_so_far(trials), list(trials), "interrupted",
                                             clock() - start)) from None


def _search(evaluate, plan, budget_s, remeasure_reserve_s, clock, remeasure, on_trial, start,
            trials: list[Trial]) -> SearchResult:
    """:func:`search_shapes`' three phases; ``trials`` is filled as they run (so an interruption keeps them)."""
    seen: dict[Shape, Trial] = {}
    stopped = "converged"

    def out_of_time() -> bool:
        return budget_s is not None and clock() - start >= budget_s - remeasure_reserve_s

    def run(shape: Shape, phase: str, rnd: int, step: int | None, fn=evaluate, last: str | None = None) -> Trial:
        t = Trial(shape, phase, rnd, step, len(trials), None, stopped=last)
        t.value = fn(shape, t)
        if t.value is not None and not (math.isfinite(t.value) and t.value > 0):
            t.value = None
        trials.append(t)
        if phase != "remeasure":
            seen[shape] = t
        if on_trial is not None:
            on_trial(t)
        return t

    def limited() -> str | None:
        if plan.max_evals is not None and len(trials) >= plan.max_evals:
            return "max_evals"
        if out_of_time():
            return "budget"
        return None

    # 1. coarse
    for shape in plan.coarse:
        why = limited()
        if why:
            stopped = why
            break
        if shape not in seen:
            run(shape, "coarse", 0, None)

    # 2. refine: coordinate descent, step by step, from each of the best few coarse shapes
    coarse_ok = sorted((t for t in seen.values() if t.value is not None), key=lambda t: (-t.value, t.index))
    rnd = 0
    for cur in coarse_ok[: plan.starts]:
        if stopped != "converged":
            break
        for step in plan.steps:
            if stopped != "converged":
                break
            while True:
                rnd += 1
                cands: list[Trial] = []
                for shape in neighbours(cur.shape, step, plan):
                    if shape in seen:
                        cands.append(seen[shape])
                        continue
                    why = limited()
                    if why:
                        stopped = why
                        break
                    cands.append(run(shape, "refine", rnd, step))
                better = [t for t in cands if t.value is not None and t.value > cur.value * (1 + plan.tolerance)]
                if better:
                    cur = max(better, key=lambda t: t.value)
                if stopped != "converged" or not better:
                    break
    # 3. remeasure the top few distinct shapes
    ranked = sorted((t for t in seen.values() if t.value is not None), key=lambda t: -t.value)
    top = ranked[: plan.top_k]
    finals = [run(t.shape, "remeasure", rnd + 1, None, remeasure or evaluate, stopped if i == len(top) - 1 else None)
              for i, t in enumerate(top)]
    ok = [t for t in finals if t.value is not None]
    best = max(ok, key=lambda t: t.value) if ok else (ranked[0] if ranked else None)
    return SearchResult(best, trials, stopped, clock() - start)


__all__ = ["Trial", "SearchResult", "SearchInterrupted", "best_so_far", "neighbours", "search_shapes"]
