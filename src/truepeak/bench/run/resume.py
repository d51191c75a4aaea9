"""``--resume`` of ``truepeak run``: the settings a results file must share with the run continuing it, and the formats
it recorded (a resume without ``--formats`` takes them)."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any

from truepeak.errors import TruepeakError
from truepeak.records import Record


#: ``run_config`` fields that must be equal for ``--resume`` to continue a results file (``formats`` as a set).
RESUME_MUST_MATCH = ("quick", "device", "device_name", "budgets", "formats", "modes")


def _config_value(key: str, value: Any) -> Any:
    """A ``run_config`` value as ``--resume`` compares it: formats as a set (their order is only the sweep's)."""
    return frozenset(value) if key == "formats" and isinstance(value, (list, tuple)) else value


def _show_config(key: str, value: Any) -> str:
    """A ``run_config`` value in a message: formats as ``--formats`` takes them (``bf16,fp32``)."""
    return ",".join(value) if key == "formats" and isinstance(value, (list, tuple)) else str(value)


def recorded_formats(previous: Iterable[Record]) -> tuple[list[str], bool] | None:
    """``(formats, formats_given)`` of the run that wrote ``previous`` (the first record whose ``run_config`` has
    them), or None for records written before ``run_config`` held the formats."""
    for rec in previous:
        there = rec.run_config
        if isinstance(there, dict) and isinstance(there.get("formats"), list):
            return [str(f) for f in there["formats"]], bool(there.get("formats_given"))
    return None


def check_resume_config(previous: Iterable[Record], config: dict[str, Any], path: Path) -> None:
    """Refuse to resume ``path`` when a record there was made with other settings (records without ``run_config``,
    written before it existed, are not checked for settings; nor are settings a record's ``run_config`` lacks, such
    as ``formats`` in records older than that field). Records of another schema version never get here:
    :func:`truepeak.bench.outdir.read_previous` refuses such a file.

    Raises:
        TruepeakError: one line naming the settings that differ, e.g. ``quick (there: True, now: False)`` or
            ``formats (there: bf16, now: fp32,bf16)``.
    """
    for rec in previous:
        there = rec.run_config
        if not isinstance(there, dict):
            continue
        keys = [k for k in RESUME_MUST_MATCH
                if k in there and k in config and _config_value(k, there.get(k)) != _config_value(k, config.get(k))]
        if len(keys) > 1 and "budgets" in keys:
            keys.remove("budgets")  # follows from quick and device; name it only when it alone differs
        diff = [f"{k} (there: {_show_config(k, there.get(k))}, now: {_show_config(k, config.get(k))})" for k in keys]
        if diff:
            raise TruepeakError(f"cannot --resume {path}: its records were made with different settings: "
                                f"{'; '.join(diff)}; rerun with the same options (--quick, --device, --formats; "
                                "without --formats --resume takes the recorded ones), or choose another --out")


__all__ = ["RESUME_MUST_MATCH", "recorded_formats", "check_resume_config"]
