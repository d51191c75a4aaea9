"""The settings of ``truepeak run``: the time budgets (:class:`Budgets`), the run's options as one frozen
:class:`RunConfig` that validates itself before torch is imported, and the ``run_config`` stored in every record."""

from __future__ import annotations

import dataclasses
import math
import os
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

from truepeak.bench.cuda_timer import GRAPH_THRESHOLD_S, MODES
from truepeak.bench.outdir import check_out_arg
from truepeak.bench.run.settle import SETTLE_SIZE, settle_format
from truepeak.errors import ConfigError, TruepeakError
from truepeak.formats import get_format
from truepeak.hardware.detect import DeviceInfo, parse_device


@dataclass(frozen=True)
class Budgets:
    """Time budgets in seconds, and the reference-check size.

    Attributes:
        settle_s: one warm-up at the start of a GPU run (back-to-back bf16 GEMMs) to settle clock and power.
        warmup_s, budget_s: per-case warm-up and timed budget for decode-regime GEMMs.
        large_warmup_s, large_budget_s: the same for the large squares.
        copy_warmup_s, copy_budget_s: the same for the copy-bandwidth case.
        check_rows: rows of C compared with the float64 reference.
    """

    settle_s: float
    warmup_s: float
    budget_s: float
    large_warmup_s: float
    large_budget_s: float
    copy_warmup_s: float
    copy_budget_s: float
    check_rows: int

    def __post_init__(self) -> None:
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            if f.name == "check_rows":
                if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                    raise ConfigError(f"budgets check_rows must be a whole number >= 1, got {value!r}",
                                      field="check_rows")
            elif isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) \
                    or value < 0:
                raise ConfigError(f"budgets {f.name} must be a number of seconds >= 0, got {value!r}", field=f.name)


GPU_BUDGETS = Budgets(settle_s=3.0, warmup_s=0.1, budget_s=0.3, large_warmup_s=1.5, large_budget_s=1.0,
                      copy_warmup_s=0.3, copy_budget_s=0.5, check_rows=256)
CPU_BUDGETS = Budgets(settle_s=0.0, warmup_s=0.1, budget_s=0.8, large_warmup_s=0.2, large_budget_s=1.0,
                      copy_warmup_s=0.2, copy_budget_s=1.0, check_rows=64)
QUICK_BUDGETS = Budgets(settle_s=0.0, warmup_s=0.02, budget_s=0.05, large_warmup_s=0.05, large_budget_s=0.1,
                        copy_warmup_s=0.02, copy_budget_s=0.05, check_rows=32)
QUICK_GPU_BUDGETS = replace(QUICK_BUDGETS, settle_s=0.5, check_rows=128)


def default_budgets(device: DeviceInfo, quick: bool = False) -> Budgets:
    """The built-in budgets for a device: :data:`GPU_BUDGETS`/:data:`CPU_BUDGETS`, or in quick mode
    :data:`QUICK_GPU_BUDGETS`/:data:`QUICK_BUDGETS`."""
    if device.kind == "cuda":
        return QUICK_GPU_BUDGETS if quick else GPU_BUDGETS
    return QUICK_BUDGETS if quick else CPU_BUDGETS


def budgets_name(budgets: Budgets) -> str:
    """``"gpu"``, ``"cpu"``, ``"quick"``, ``"quick-gpu"`` for the built-in budgets, ``"custom"`` otherwise."""
    for name, b in (("gpu", GPU_BUDGETS), ("cpu", CPU_BUDGETS), ("quick", QUICK_BUDGETS),
                    ("quick-gpu", QUICK_GPU_BUDGETS)):
        if budgets == b:
            return name
    return "custom"


def run_config(dev: DeviceInfo, quick: bool, budgets: Budgets, formats: Sequence[str] | None = None,
               formats_given: bool = False, modes: Sequence[str] | None = None) -> dict[str, Any]:
    """The settings stored in every record as ``run_config``: what ``--resume`` compares (:data:`RESUME_MUST_MATCH`)
    and what a report needs to state the method from the records alone (the budgets in seconds, the settling GEMMs,
    the CUDA-graph threshold).

    Args:
        formats: the formats the run sweeps (canonical names, in order); None leaves ``formats`` out.
        formats_given: they were asked for by name (``--formats``) rather than being the device's defaults.
        modes: the timing modes swept (GPU; ``["sustained"]`` by default); None leaves ``modes`` out.
    """
    cuda = dev.kind == "cuda"
    settle = None
    if cuda and budgets.settle_s > 0:
        settle = {"format": settle_format(dev), "shape": f"{SETTLE_SIZE}x{SETTLE_SIZE}x{SETTLE_SIZE}",
                  "seconds": budgets.settle_s}
    config = {"quick": bool(quick), "device": dev.torch_device, "device_name": dev.name,
              "budgets": budgets_name(budgets), "budget_settings": dataclasses.asdict(budgets), "settle": settle,
              "graph_threshold_s": GRAPH_THRESHOLD_S if cuda else None}
    if formats is not None:
        config.update(formats=list(formats), formats_given=bool(formats_given))
    if modes is not None:
        config["modes"] = list(modes) if cuda else ["cpu"]
    return config


#: What ``modes`` accepts: the timing modes (:data:`truepeak.bench.cuda_timer.MODES`) and ``both`` (sustained, then
#: burst), with what each means, as a refused value's message lists them.
MODE_CHOICES = ("sustained (back-to-back, as a serving GPU runs), burst (an idle gap before each iteration), both")


def expand_modes(names: Sequence[str] | None) -> list[str]:
    """Timing modes in sweep order, ``both`` expanded (``["both"]`` -> ``["sustained", "burst"]``), duplicates dropped,
    case and blanks ignored; None or nothing -> ``["sustained"]``.

    Raises:
        ConfigError: (``field="modes"``) a string instead of a list, or a name other than sustained, burst or both;
            the message lists the accepted ones.
    """
    if names is None:
        return ["sustained"]
    if isinstance(names, str):
        raise ConfigError(f"modes takes a list of names, got the string {names!r}; give e.g. ['sustained', "
                          "'burst']", field="modes")
    out: list[str] = []
    for item in names:
        part = str(item).strip().lower()
        if not part:
            continue
        if part == "both":
            chosen = ["sustained", "burst"]
        elif part in MODES:
            chosen = [part]
        else:
            raise ConfigError(f"unknown mode {part!r}; accepted: {MODE_CHOICES}", field="modes")
        out += [n for n in chosen if n not in out]
    return out or ["sustained"]


def canonical_formats(names: Sequence[str] | None) -> tuple[str, ...] | None:
    """Format names as canonical names (:func:`truepeak.formats.get_format`: ``"fp8"`` -> ``"fp8_e4m3"``), in order,
    duplicates and blanks dropped; None or nothing -> None (the device's defaults).

    Raises:
        ConfigError: (``field="formats"``) a string instead of a list, or an unknown name; the message lists the
            known names.
    """
    if names is None:
        return None
    if isinstance(names, str):
        raise ConfigError(f"formats takes a list of names, got the string {names!r}; give e.g. ['bf16', "
                          "'fp8']", field="formats")
    out: list[str] = []
    for item in names:
        item = str(item).strip()
        if not item:
            continue
        try:
            name = get_format(item).name
        except TruepeakError as exc:
            raise ConfigError(str(exc), field="formats") from exc
        if name not in out:
            out.append(name)
    return tuple(out) or None


def check_device(device: str | DeviceInfo, field: str = "device") -> None:
    """A device string as :func:`truepeak.hardware.detect.parse_device` reads it (a :class:`DeviceInfo` passes).

    Raises:
        ConfigError: anything but auto, cpu, cuda or cuda:N.
    """
    if isinstance(device, DeviceInfo):
        return
    try:
        parse_device(device)
    except TruepeakError as exc:
        raise ConfigError(str(exc), field=field) from exc


def check_out(out: str | os.PathLike | None, command: str) -> None:
    """An ``--out`` folder as :func:`truepeak.bench.outdir.check_out_arg` checks it.

    Raises:
        ConfigError: (``field="out"``) an empty value, an existing file, a ``.jsonl`` path.
    """
    try:
        check_out_arg(out, command)
    except ConfigError:
        raise
    except TruepeakError as exc:
        raise ConfigError(str(exc), field="out") from exc


@dataclass(frozen=True)
class RunConfig:
    """The settings of one ``truepeak run``, checked when built, before torch is imported (a bad flag on a machine
    without torch is named, not reported as a missing torch).

    Attributes:
        out: the output folder (None: :func:`~truepeak.bench.outdir.default_out_dir`).
        device: ``"auto"``, ``"cpu"``, ``"cuda"``, ``"cuda:N"`` or a :class:`DeviceInfo`.
        formats: canonical format names in sweep order (built from any names :func:`canonical_formats` accepts), or
            None for the device's defaults (with ``resume``: the formats recorded in the file).
        modes: timing modes in order (built from names :func:`expand_modes` accepts; default sustained).
        quick: the small quick-mode cases and budgets.
        resume: continue ``results.jsonl`` in ``out`` (which must then be given).
        budgets: time budgets (None: :func:`default_budgets` for the device).

    Raises:
        ConfigError: naming the field: an unknown format or mode, a bad device string, a bad ``out``
            (:func:`check_out`), ``resume`` without ``out``, budgets that are not :class:`Budgets`.
    """

    out: str | os.PathLike | None = None
    device: str | DeviceInfo = "auto"
    formats: tuple[str, ...] | None = None
    modes: tuple[str, ...] = ("sustained",)
    quick: bool = False
    resume: bool = False
    budgets: Budgets | None = None

    def __post_init__(self) -> None:
        check_device(self.device)
        object.__setattr__(self, "formats", canonical_formats(self.formats))
        object.__setattr__(self, "modes", tuple(expand_modes(self.modes)))
        object.__setattr__(self, "quick", bool(self.quick))
        object.__setattr__(self, "resume", bool(self.resume))
        if self.resume and self.out is None:
            raise ConfigError("--resume needs --out DIR naming the run to continue", field="resume")
        check_out(self.out, "run")
        if self.budgets is not None and not isinstance(self.budgets, Budgets):
            raise ConfigError(f"budgets must be a Budgets, got {type(self.budgets).__name__}", field="budgets")


__all__ = ["Budgets", "GPU_BUDGETS", "CPU_BUDGETS", "QUICK_BUDGETS", "QUICK_GPU_BUDGETS", "default_budgets",
           "budgets_name", "run_config", "MODE_CHOICES", "expand_modes", "canonical_formats", "check_device",
           "check_out", "RunConfig"]
