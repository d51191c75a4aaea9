"""What ``truepeak moe tune`` shows: the tuned table as a fitted text table (:func:`render_table`), one line per
(format, activations, bucket) with the default and the tuned figures, and the progress bar of a run
(:class:`ProgressBar`, rich). Reads the table's JSON form (``TunedTable.to_dict()``), so nothing here imports the
kernels."""

from __future__ import annotations

import textwrap
from typing import Any

from truepeak.units import fmt_number

#: The columns: header, numeric (right-aligned, never wrapped).
COLUMNS = (("weights", False), ("activations", False), ("tok/exp", True), ("default % read bw", True),
           ("tuned % read bw", True), ("speed-up", True), ("tuned µs", True), ("gate/up config", False),
           ("down config", False), ("timed", True))


def config_text(cfg: dict[str, Any]) -> str:
    """A configuration in one short word per field: ``m16 n64 k128 w4 s4`` (token block, weight rows, K step, warps,
    stages), then ``r128`` (register cap), ``pf`` (prefetch), ``hoist``, ``persist`` (persistent launch), ``g1`` (tile order: groups of one token block) where set."""
    parts = [f"m{cfg['block_m']}", f"n{cfg['block_n']}", f"k{cfg['block_k']}", f"w{cfg['num_warps']}",
             f"s{cfg['num_stages']}"]
    parts += [f"r{cfg['maxnreg']}"] if cfg.get("maxnreg") else []
    parts += ["pf"] if cfg.get("prefetch") else []
    parts += ["hoist"] if cfg.get("hoist") else []
    parts += ["persist"] if cfg.get("persistent") else []
    parts += [f"g{cfg['group_m']}"] if cfg.get("group_m") else []
    return " ".join(parts)


def rows(table: dict[str, Any]) -> list[list[str]]:
    """One row per entry, formats in table order, buckets ascending."""
    out = []
    for wfmt, by_act in table.get("configs", {}).items():
        for acts, by_bucket in by_act.items():
            for bucket in sorted(by_bucket, key=int):
                e = by_bucket[bucket]
                d = e.get("default_read_bandwidth_fraction")
                speed = (e["default_time_s"] / e["time_s"]) if e.get("default_time_s") else None
                out.append([wfmt, acts, fmt_number(e["tokens_per_expert"]),
                            "-" if d is None else fmt_number(100 * d, decimals=1),
                            fmt_number(100 * e["read_bandwidth_fraction"], decimals=1),
                            "-" if speed is None else f"{fmt_number(speed, decimals=2)}x",
                            fmt_number(e["time_s"] * 1e6, decimals=1), config_text(e["gate_up"]),
                            config_text(e["down"]), str(e.get("candidates", 0))])
    return out


def render_table(table: dict[str, Any], width: int | None = None, not_run: list[str] | None = None,
                 dropped: int = 0, table_path: str | None = None) -> list[str]:
    """The tuned table as lines fitted into ``width`` columns (None: natural width; :mod:`truepeak.report.fit`), then
    where it came from (device, shape, read bandwidth) and the points the budget did not reach."""
    from truepeak.report.fit import Column, fit_lines

    cols = [Column(h, numeric=num, wrap=h.endswith("config")) for h, num in COLUMNS]
    lines = fit_lines(cols, rows(table), width)
    bw = table.get("read_bandwidth_bytes_per_s")
    foot = [f"{table.get('device_name')}, experts E={table.get('E')}, N={table.get('N')}, H={table.get('H')} "
            f"({table.get('model')}, {table.get('layout')}), {table.get('routing')} routing"
            + (f"; read bandwidth measured in this run: {fmt_number(bw / 1e12, decimals=3)} TB/s" if bw else "")
            + "; default = choose_config's rules, timed again beside the tuned one"]
    if dropped:
        foot.append(f"{dropped} candidates dropped before timing: they do not fit the device's shared memory or K")
    if not_run:
        foot.append(f"not reached within the budget: {'; '.join(not_run)}")
    if table_path:
        foot.append(f"table: {table_path}")
    for f in foot:
        lines += [f] if width is None else textwrap.wrap(f, width, break_long_words=False, break_on_hyphens=False)
    return lines


class ProgressBar:
    """A rich progress bar on stderr over the run's points: ``with ProgressBar(enabled) as bar: bar.update(p)``
    with ``p`` a :class:`~truepeak.bench.moe_tune.TuneProgress`. Disabled: does nothing."""

    def __init__(self, enabled: bool = True):
        self.enabled = enabled
        self._progress: Any = None
        self._task: Any = None

    def __enter__(self) -> ProgressBar:
        return self

    def _start(self) -> None:
        from rich.console import Console
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

        self._progress = Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                                  TimeElapsedColumn(), console=Console(stderr=True), transient=False)
        self._progress.__enter__()

    def update(self, p: Any) -> None:
        """Show ``p`` (started on the first call, so a run refused before measuring prints nothing)."""
        if not self.enabled:
            return
        if self._progress is None:
            self._start()
        best = "" if p.best_fraction is None else f", best {fmt_number(100 * p.best_fraction, decimals=1)} %"
        text = f"{p.label}: {p.candidates} timed{best}"
        if self._task is None:
            self._task = self._progress.add_task(text, total=p.total)
        self._progress.update(self._task, completed=p.done, description=text)

    def __exit__(self, *exc: Any) -> None:
        if self._progress is not None:
            self._progress.__exit__(*exc)


__all__ = ["COLUMNS", "ProgressBar", "config_text", "render_table", "rows"]
