"""The settings of one ``truepeak peak`` as a frozen :class:`PeakConfig` that checks itself when built, before torch is
imported: a bad flag on a machine without torch is named, not reported as a missing torch."""

from __future__ import annotations

import math
import os
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from truepeak.bench.peak.plan import DEFAULT_CPU_FORMATS, DEFAULT_GPU_FORMATS, PeakBudgets, SearchPlan
from truepeak.bench.run.config import canonical_formats, check_device, check_out, expand_modes
from truepeak.errors import ConfigError


def _check_budget(value: Any) -> None:
    if value is None:
        return
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or not value > 0:
        raise ConfigError(f"--budget must be > 0 seconds, got {value}", field="budget_s")


@dataclass(frozen=True)
class PeakConfig:
    """What one ``truepeak peak`` searches, and how.

    Attributes:
        out: output folder (None: ``./truepeak-peak-YYYYmmdd-HHMMSS``).
        device: ``"auto"``, ``"cpu"``, ``"cuda"``, ``"cuda:N"`` or a DeviceInfo.
        formats: canonical format names (built from any names :func:`truepeak.bench.run.config.canonical_formats`
            accepts), or None: :func:`peak_formats` picks the device's defaults.
        modes: the mode names as given (``("both",)``, ``("burst",)``; checked by
            :func:`truepeak.bench.run.config.expand_modes`), or None: both on a GPU. Kept as given so a CPU's note can
            name the ``--mode`` that does not apply there.
        budget_s: wall seconds per (format, mode), > 0; or a dict keyed by ``(format, mode)`` or format, each > 0;
            None: :data:`~truepeak.bench.peak.plan.DEFAULT_BUDGET_S`.
        resume: continue ``results.jsonl`` in ``out`` (which must then be given).
        plan: the :class:`~truepeak.bench.peak.plan.SearchPlan` (None: the device's).
        budgets: per-mode :class:`~truepeak.bench.peak.plan.PeakBudgets` overrides.

    Raises:
        ConfigError: naming the field: an unknown format or mode, a budget that is not > 0, a bad device or ``out``,
            ``resume`` without ``out``, a plan or budgets of the wrong type.
    """

    out: str | os.PathLike | None = None
    device: Any = "auto"
    formats: tuple[str, ...] | None = None
    modes: tuple[str, ...] | None = None
    budget_s: float | dict | None = None
    resume: bool = False
    plan: SearchPlan | None = None
    budgets: dict[str, PeakBudgets] | None = None

    def __post_init__(self) -> None:
        budget_map = self.budget_s if isinstance(self.budget_s, dict) else {}
        for value in [None if budget_map else self.budget_s, *budget_map.values()]:
            _check_budget(value)
        check_device(self.device)
        object.__setattr__(self, "formats", canonical_formats(self.formats))
        if self.modes is not None:
            expand_modes(self.modes)
            object.__setattr__(self, "modes", tuple(self.modes))
        object.__setattr__(self, "resume", bool(self.resume))
        if self.resume and self.out is None:
            raise ConfigError("--resume needs --out DIR naming the peak search to continue", field="resume")
        check_out(self.out, "peak")
        if self.plan is not None and not isinstance(self.plan, SearchPlan):
            raise ConfigError(f"plan must be a SearchPlan, got {type(self.plan).__name__}", field="plan")
        if self.budgets is not None and not all(isinstance(b, PeakBudgets) for b in dict(self.budgets).values()):
            raise ConfigError("budgets must map a mode to PeakBudgets", field="budgets")

    def budget_map(self) -> dict:
        """The per-(format, mode) or per-format budgets (empty when ``budget_s`` is one number or None)."""
        return dict(self.budget_s) if isinstance(self.budget_s, dict) else {}

    def budget_default(self) -> float | None:
        """The one ``budget_s`` for every search (None when it is a dict or not given)."""
        return None if isinstance(self.budget_s, dict) else self.budget_s


def peak_formats(formats: Sequence[str] | None, device: Any) -> list[str]:
    """The formats to search: ``formats`` (canonical names), or by default bf16 and fp8_e4m3 on a GPU, fp32 on a CPU
    (:data:`~truepeak.bench.peak.plan.DEFAULT_GPU_FORMATS`, :data:`~truepeak.bench.peak.plan.DEFAULT_CPU_FORMATS`)."""
    if formats is None:
        return list(DEFAULT_GPU_FORMATS if device.kind == "cuda" else DEFAULT_CPU_FORMATS)
    return list(formats)


__all__ = ["PeakConfig", "peak_formats"]
