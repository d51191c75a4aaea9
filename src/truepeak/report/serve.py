"""What ``truepeak serve`` shows: the table of its levels (fitted by :mod:`truepeak.report.fit`), the HTML report's
serving section with its charts (output and decode tokens/s, and TPOT, against concurrency), and the lines a run
prints while it waits and measures. Renders records; never measures.

Columns, one row per level: concurrency; requests completed of those sent (failures counted); output tokens/s and
requests/s; TTFT, TPOT and ITL as median / p90 / p99 in ms; the decode rate (concurrency / median TPOT); the planner's
ceiling at batch = concurrency and the decode rate's share of it, its expected figure and share, its largest lever
("n/a" where the planner gives none). Definitions: :class:`truepeak.records.ServingMetrics`.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from typing import Any

from truepeak.records import Record, ServingMetrics, ServingWorkload
from truepeak.report.fit import Column
from truepeak.units import DASH, fmt_pct, fmt_time_in, fmt_tokens_per_s

#: What a planner figure the plan result does not give shows.
NA = "n/a"

UNITS_LINE = ("Times in ms: median / p90 / p99 over the level's completed requests (TTFT: to the first token; TPOT: "
              "per output token after it; ITL: between streamed chunks). decode tok/s = concurrency / median TPOT, "
              "held against the planner at batch = concurrency.")


def lever_name(key: str | None) -> str:
    """A lever key (:data:`truepeak.moe.plan.levers.LEVERS`) as the short words of
    :data:`truepeak.report.plan_expected.LEVER_WORDS`; n/a for None."""
    from truepeak.report.plan_expected import LEVER_WORDS

    if key is None:
        return NA
    return LEVER_WORDS.get(key, key).split(" (")[0]


def _serving(records: Sequence[Record]) -> list[Record]:
    return sorted((r for r in records if isinstance(r.workload, ServingWorkload)),
                  key=lambda r: r.workload.concurrency)


def _ms3(a: float | None, b: float | None, c: float | None) -> str:
    return " / ".join(fmt_time_in(x, 1e-3) for x in (a, b, c))


def _planner_cells(d: ServingMetrics | None) -> list[str]:
    """Ceiling, % of it, expected, % of it, largest lever: "n/a" for each figure the planner did not give."""
    if d is None:
        return [DASH] * 5
    na = lambda v, f: NA if v is None else f(v)  # noqa: E731
    return [na(d.ceiling_tokens_per_s, fmt_tokens_per_s), na(d.ceiling_fraction, lambda v: fmt_pct(v, sign=False)),
            na(d.expected_tokens_per_s, fmt_tokens_per_s), na(d.expected_fraction, lambda v: fmt_pct(v, sign=False)),
            lever_name(d.largest_lever)]


COLUMNS: tuple[Column, ...] = (
    Column("concurrency", numeric=True), Column("completed / sent", numeric=True),
    Column("output tok/s", numeric=True), Column("req/s", numeric=True, drop=True, priority=2),
    Column("TTFT ms p50 / p90 / p99", numeric=True), Column("TPOT ms p50 / p90 / p99", numeric=True),
    Column("ITL ms p50 / p90 / p99", numeric=True, drop=True, priority=3), Column("decode tok/s", numeric=True),
    Column("planner ceiling tok/s", numeric=True), Column("% of ceiling", numeric=True),
    Column("planner expected tok/s", numeric=True, drop=True, priority=4), Column("% of expected", numeric=True),
    Column("largest lever", wrap=True, drop=True, priority=5), Column("status / note", wrap=True, drop=True,
                                                                          priority=1))


def level_cells(r: Record) -> list[str]:
    """The cells of one level (:data:`COLUMNS`)."""
    w, d = r.workload, r.derived if isinstance(r.derived, ServingMetrics) else None
    c = r.correctness
    sent = c.checked if c is not None and c.checked is not None else w.requests
    done = sent - (c.wrong or 0) if c is not None else (w.requests if r.ok else 0)
    note = str(r.status) if r.ok else f"{r.status}: {r.reason}"
    if r.warnings:
        note += "; " + "; ".join(r.warnings)
    if d is None:
        return [str(w.concurrency), f"{done} / {sent}", DASH, DASH, DASH, DASH, DASH, DASH, *_planner_cells(None), note]
    return [str(w.concurrency), f"{done} / {sent}", fmt_tokens_per_s(d.output_tokens_per_s),
            fmt_tokens_per_s(d.requests_per_s), _ms3(d.ttft_median_s, d.ttft_p90_s, d.ttft_p99_s),
            _ms3(d.tpot_median_s, d.tpot_p90_s, d.tpot_p99_s), _ms3(d.itl_median_s, d.itl_p90_s, d.itl_p99_s),
            fmt_tokens_per_s(d.decode_tokens_per_s), *_planner_cells(d), note]


def serving_title(records: Sequence[Record]) -> str:
    """``"tiny-moe at http://127.0.0.1:8000: 32 in / 16 out tokens per request, completions"``."""
    recs = _serving(records)
    if not recs:
        return "serving"
    w = recs[0].workload
    return (f"{w.model} ({recs[0].backend}): {w.input_tokens_per_request} in / {w.output_tokens_per_request} out "
            f"tokens per request" + (f", {w.endpoint}" if w.endpoint else ""))


def render_serving(records: Sequence[Record], *, file: Any = None, notice: str | None = None) -> None:
    """Print the levels' table (title, the table fitted to the terminal, the units line, ``notice``) on ``file``
    (default stdout)."""
    from rich.console import Console

    from truepeak.report.fit import print_line, print_table

    console = Console(file=file or sys.stdout, highlight=False, soft_wrap=False)
    recs = _serving(records)
    print_table(console, COLUMNS, [level_cells(r) for r in recs], title=serving_title(recs))
    print_line(console, UNITS_LINE)
    if notice:
        print_line(console, notice)


def serving_section(records: Sequence[Record]) -> str:
    """The HTML report's serving section: per server and request shape, the table and one chart (empty string when
    there are no serving records)."""
    from truepeak.report import plots
    from truepeak.report.html import _e, _figure, _table

    recs = _serving(records)
    if not recs:
        return ""
    groups: dict[tuple, list[Record]] = {}
    for r in recs:
        w = r.workload
        groups.setdefault((w.model, r.backend, w.input_tokens_per_request, w.output_tokens_per_request,
                           w.endpoint), []).append(r)
    parts = ['<h2 id="serving">Serving</h2>']
    for group in groups.values():
        parts.append(f"<h3>{_e(serving_title(group))}</h3>")
        parts.append(_table([c.header for c in COLUMNS], [level_cells(r) for r in group],
                            [c.numeric for c in COLUMNS], [str(r.status) for r in group]))
        parts.append(f'<p class="footer">{_e(UNITS_LINE)}</p>')
        pts = [(r.workload.concurrency, r.derived) for r in group if r.ok and isinstance(r.derived, ServingMetrics)]
        if len(pts) >= 1:
            series = {
                "output tok/s": [(c, d.output_tokens_per_s) for c, d in pts],
                "decode tok/s (concurrency / TPOT)": [(c, d.decode_tokens_per_s) for c, d in pts],
                "planner ceiling tok/s": [(c, d.ceiling_tokens_per_s) for c, d in pts],
                "planner expected tok/s": [(c, d.expected_tokens_per_s) for c, d in pts],
            }
            tpot = {"median": [(c, d.tpot_median_s) for c, d in pts], "p90": [(c, d.tpot_p90_s) for c, d in pts],
                    "p99": [(c, d.tpot_p99_s) for c, d in pts]}
            parts.append(_figure(plots.serving_chart(series, tpot, title=serving_title(group)), "serving",
                                 "Left: tokens per second against concurrency (log scales): output tokens over the "
                                 "level's wall time, the decode rate, and the planner's figures at batch = "
                                 "concurrency where it has them. Right: time per output token (ms)."))
    return "".join(parts)


def wait_line(waited_s: float, timeout_s: float, last_log: str) -> str:
    """The line shown while a launched server starts: ``"waiting for the server: 12 s of 600 s; log: ..."``."""
    tail = " ".join(last_log.split())
    return f"waiting for the server: {waited_s:.0f} s of {timeout_s:g} s" + (f"; log: {tail[:100]}" if tail else "")


class Progress:
    """The progress shown on stderr while a run waits for its server and sends its requests (rich's progress bar
    on a terminal, nothing when stderr is not one). Use as a context manager; :meth:`wait` and :meth:`request` update
    it."""

    def __init__(self, enabled: bool = True):
        from rich.console import Console

        self.console = Console(stderr=True, highlight=False)
        self.enabled = enabled and self.console.is_terminal
        self._bar = None
        self._task = None
        self._level = None

    def __enter__(self) -> Progress:
        if self.enabled:
            from rich.progress import BarColumn, Progress as Bar, TextColumn, TimeElapsedColumn

            self._bar = Bar(TextColumn("{task.description}"), BarColumn(), TimeElapsedColumn(),
                            console=self.console, transient=True)
            self._bar.__enter__()
        return self

    def __exit__(self, *exc) -> None:
        if self._bar is not None:
            self._bar.__exit__(*exc)

    def _show(self, text: str, done: float, total: float) -> None:
        if self._bar is None:
            return
        if self._task is None:
            self._task = self._bar.add_task(text, total=total)
        self._bar.update(self._task, description=text, completed=done, total=total)

    def wait(self, waited_s: float, timeout_s: float, last_log: str) -> None:
        self._show(wait_line(waited_s, timeout_s, last_log), waited_s, timeout_s)

    def request(self, concurrency: int, done: int, total: int) -> None:
        self._show(f"concurrency {concurrency}: {done} requests done", done, total)

    def line(self, text: str) -> None:
        """One status line on stderr. A status line ends a phase (the server is ready, a level starts), so the bar of
        the phase before goes; the next update starts a new one."""
        if self._bar is not None and self._task is not None:
            self._bar.remove_task(self._task)
            self._task = None
        self.console.print(text, markup=False, highlight=False, soft_wrap=True)


__all__ = ["COLUMNS", "NA", "UNITS_LINE", "level_cells", "render_serving", "serving_section", "serving_title",
           "wait_line", "Progress"]
