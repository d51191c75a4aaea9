"""The transient progress bar ``truepeak run`` shows on stderr while it measures (rich; nothing when stderr is not a
terminal)."""

from __future__ import annotations

import sys
from typing import Any


class Progress:
    """A transient rich progress bar on stderr; a no-op when disabled or stderr is not a terminal."""

    def __init__(self, total: int, enabled: bool | None):
        if enabled is None:
            enabled = sys.stderr.isatty()
        self.enabled = bool(enabled)
        self.total = total
        self._p = None
        self._task = None

    def __enter__(self) -> Progress:
        if self.enabled:
            from rich.console import Console
            from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

            self._p = Progress(TextColumn("[bold]truepeak run[/bold] {task.description}"), BarColumn(),
                               MofNCompleteColumn(), TimeElapsedColumn(), console=Console(stderr=True),
                               transient=True)
            self._p.__enter__()
            self._task = self._p.add_task("", total=self.total)
        return self

    def update(self, text: str) -> None:
        if self._p is not None:
            self._p.update(self._task, description=text)

    def advance(self) -> None:
        if self._p is not None:
            self._p.advance(self._task)

    def __exit__(self, *exc: Any) -> None:
        if self._p is not None:
            self._p.__exit__(*exc)


__all__ = ["Progress"]
