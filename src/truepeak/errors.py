"""Errors truepeak raises for bad input and impossible measurements.

Every error the user can cause is a :class:`TruepeakError`. Its message is one line that names the bad value and what
would be accepted (or the command that fixes it). The CLI prints it as ``error: <message>`` and exits with status 2,
without a traceback.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable


#: How to install what measuring needs. truepeak is not on PyPI: it is installed from a clone (README.md). One line,
#: used by every "missing torch" message.
INSTALL_HINT = ("pip install -e '.[measure]' 'torch==2.11.0' in a clone of truepeak (on a GPU machine that has a CUDA "
                "build of torch, pip install -e '.[measure]' keeps it)")


class TruepeakError(ValueError):
    """Base class: bad input or an impossible value. The message is complete and user-facing."""

    exit_code = 2


class UnknownNameError(TruepeakError, KeyError):
    """A name (GPU, format, op, ...) that truepeak does not know."""

    def __str__(self) -> str:  # KeyError would quote the message
        return str(self.args[0]) if self.args else ""


class UnsupportedError(TruepeakError):
    """A valid request that this accelerator, format or installation cannot serve."""


class MeasurementError(TruepeakError):
    """A value that cannot be a real measurement (for example a throughput above the peak, or a zero time)."""


class ConfigError(TruepeakError):
    """A configuration object (a run's, a search's, a bench's settings) refused one of its fields.

    Raised by the frozen configuration dataclasses when they are built, before anything heavy is imported, so a bad
    flag is named on a machine without torch. ``field`` is the configuration field; the message names the value and
    what would be accepted.
    """

    def __init__(self, message: str, field: str | None = None):
        super().__init__(message)
        self.field = field


class MissingDependencyError(TruepeakError):
    """An optional package is needed for this action; the message carries the install command."""


def closest(name: str, choices: Iterable[str], n: int = 5, cutoff: float = 0.3) -> list[str]:
    """Return up to ``n`` of ``choices`` closest to ``name`` (case-insensitive), best first: those whose
    :class:`difflib.SequenceMatcher` ratio to ``name`` is at least ``cutoff`` (0..1)."""
    choices = list(choices)
    lowered = {c.lower(): c for c in choices}
    hits = difflib.get_close_matches(name.lower(), list(lowered), n=n, cutoff=cutoff)
    return [lowered[h] for h in hits]


def require(module: str, purpose: str, install: str | None = None):
    """Import ``module`` lazily or raise :class:`MissingDependencyError` with the install command.

    Args:
        module: dotted module name, e.g. ``"torch"``.
        purpose: what it is needed for, e.g. ``"measuring on a GPU"``.
        install: the install command to suggest; default :data:`INSTALL_HINT`.
    """
    import importlib

    try:
        return importlib.import_module(module)
    except ImportError as exc:
        cmd = install or INSTALL_HINT
        raise MissingDependencyError(f"{module} is needed for {purpose} but is not installed ({exc}); "
                                     f"install it with: {cmd}") from exc


def shown(v: object) -> str:
    """A value in a message as the user typed it: numbers with ``:g`` (``0``, not ``0.0``), anything else as its
    repr (``'abc'``)."""
    return f"{v:g}" if isinstance(v, (int, float)) and not isinstance(v, bool) else repr(v)
