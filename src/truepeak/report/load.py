"""Reading results files for reports: render what is valid, name what is not.

``truepeak report`` and ``truepeak compare`` read JSON Lines files written by any truepeak command (``run``, ``peak``,
``moe bench``, ``comm``). Unlike ``--resume``, a report must not give up on a file with one bad line: a run killed
mid-write leaves a torn last line, and an old file may hold records of another schema version. So every file is read
with :func:`truepeak.bench.records.read_records` (``strict=False``, the one reader and the one schema rule) and each
line it skipped becomes a :class:`Problem` that the report shows at the top ("results.jsonl, line 7: not valid JSON:
...", "line 1: a record of schema version 1; truepeak 0.1.0 reads schema version 2 only"). An empty file is a problem
too; only when no file holds a single valid record is that an error (:meth:`Results.require_records`).

A resumed file holds a retried case twice; reports show the last record per key (:func:`latest`), as ``truepeak run``
does.

Helpers that every renderer shares live here too: :func:`field` (a named value wherever a record kind keeps it),
:func:`device_name` and :func:`accelerator_key` (which device a record was measured on), :func:`label` (a short name
of a record's workload).

Pure Python: imports no numpy, torch or matplotlib.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field as dc_field
from pathlib import Path
from typing import Any

import truepeak
from truepeak.bench.records import read_records
from truepeak.errors import TruepeakError

#: Schema versions the reports understand (the one :mod:`truepeak.bench.records` writes).
UNDERSTOOD_SCHEMAS: tuple[int, ...] = (truepeak.SCHEMA_VERSION,)


@dataclass(frozen=True)
class Problem:
    """One thing a report could not use: a line of a file (``line`` 1-based) or a whole file (``line`` None)."""

    path: str
    line: int | None
    why: str

    def __str__(self) -> str:
        return f"{self.path}, line {self.line}: {self.why}" if self.line is not None else f"{self.path}: {self.why}"


@dataclass
class Results:
    """The valid records of one or more results files, and what was skipped.

    Attributes:
        records: valid records (the last one per key of each file), in file order, files in the order given.
        sources: the file each record came from, parallel to ``records``.
        files: the files read, as given.
        problems: skipped lines and empty files, in order.
    """

    records: list[dict[str, Any]] = dc_field(default_factory=list)
    sources: list[str] = dc_field(default_factory=list)
    files: list[str] = dc_field(default_factory=list)
    problems: list[Problem] = dc_field(default_factory=list)

    def of(self, path: str) -> list[dict[str, Any]]:
        """The records read from ``path``."""
        return [r for r, s in zip(self.records, self.sources) if s == path]

    def require_records(self) -> None:
        """Raise when there is nothing to render.

        Raises:
            TruepeakError: no file holds a valid record; the message names every problem (up to 5) and the schema
                versions understood.
        """
        if self.records:
            return
        shown = "; ".join(str(p) for p in self.problems[:5])
        more = f" (and {len(self.problems) - 5} more)" if len(self.problems) > 5 else ""
        raise TruepeakError(f"no valid records in {', '.join(self.files) or 'no files'}"
                            + (f": {shown}{more}" if shown else "")
                            + f"; truepeak {truepeak.__version__} reads record schema version "
                            + " and ".join(str(v) for v in UNDERSTOOD_SCHEMAS))


def latest(records: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """One record per ``key``, the last one written, in first-seen order (a resumed file holds a retried case twice).
    Records without a key are all kept."""
    order: list[str] = []
    last: dict[str, dict] = {}
    for i, rec in enumerate(records):
        key = rec.get("key") if isinstance(rec.get("key"), str) else f"#{i}"
        if key not in last:
            order.append(key)
        last[key] = rec
    return [last[k] for k in order]


def load_results(paths: Sequence[str | os.PathLike[str]], *, dedupe: bool = True) -> Results:
    """Read results files tolerantly.

    Args:
        paths: JSON Lines files.
        dedupe: keep only the last record per key of each file (:func:`latest`).

    Returns:
        :class:`Results`; an empty or wholly bad file contributes problems and no records.

    Raises:
        TruepeakError: a file cannot be read (missing, a folder, no permission); the message names it.
    """
    out = Results()
    for raw in paths:
        name = os.fspath(raw)
        p = Path(name)
        if p.is_dir():
            hint = " (it holds results.jsonl)" if (p / "results.jsonl").exists() else ""
            raise TruepeakError(f"{name} is a folder, not a results file{hint}; pass the .jsonl file")
        out.files.append(name)
        recs = read_records(p, strict=False)
        out.problems += [Problem(name, n, why) for n, why in recs.problems]
        if not list(recs) and not recs.problems:
            out.problems.append(Problem(name, None, "empty file: no records"))
        good = []
        for i, rec in enumerate(recs):
            why = malformed(rec)
            if why is None:
                good.append(rec)
            else:
                line = recs.line_numbers[i] if i < len(recs.line_numbers) else None
                out.problems.append(Problem(name, line, why if line is not None else f"record {i + 1}: {why}"))
        kept = latest(good) if dedupe else good
        out.records += kept
        out.sources += [name] * len(kept)
    return out


#: Top-level fields and the JSON types a record of the schema may give them (None: JSON null).
_TOP_TYPES: dict[str, tuple[type | None, ...]] = {
    "kind": (str,), "status": (str,), "reason": (str, None), "key": (str, None), "workload": (dict, str, None),
    "backend": (str, None), "format": (str, None), "mode": (str, None), "time_s": (float, None),
    "measurement": (dict, None), "warnings": (list, None), "correctness": (dict, None), "derived": (dict, None),
    "env": (dict, None), "run_config": (dict, None), "rotation": (dict, None), "search": (dict, None),
    "timestamp": (str, None),
}
#: Nested fields the renderers read as numbers (besides every ``derived`` field named like one: :func:`_numeric_name`).
_NUMBERS = {"workload": ("m", "n", "k", "flop", "min_bytes", "intensity", "nbytes", "bytes_moved"),
            "measurement": ("steady_median_s", "median_s", "q1_s", "q3_s", "iqr_s", "rel_iqr", "steady_rel_iqr",
                            "n_samples", "burst_gap_s"),
            "rotation": ("n_sets", "wanted_sets", "l2_bytes")}
_NUMERIC_SUFFIXES = ("_s", "_per_s", "_hz", "_w", "_bytes", "_c", "_flops")


def _numeric_name(name: str) -> bool:
    return name.startswith("pct_") or name.endswith(_NUMERIC_SUFFIXES)


def _kind_of(v: Any) -> str:
    return "null" if v is None else {bool: "a boolean", int: "a number", float: "a number", str: "a string",
                                     list: "a list", dict: "an object"}.get(type(v), type(v).__name__)


def _is_number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and v == v and abs(v) != float("inf")


def malformed(rec: Mapping[str, Any]) -> str | None:
    """What makes a record of the right schema version unusable, in words, or None when it is usable.

    truepeak writes records with these JSON types (:mod:`truepeak.bench.records`; never NaN or infinity: the writer
    uses ``allow_nan=False``), so a record that breaks them was edited or written by something else; a report leaves
    it out and names it rather than failing half-way. Checked: the top-level fields (:data:`_TOP_TYPES`), the
    numbers the renderers read (:data:`_NUMBERS`, every ``derived`` field named ``pct_*`` or ``*_s``, ``*_per_s``,
    ``*_hz``, ``*_w``, ``*_bytes``), the ``warnings`` and ``measurement.warning_codes`` / ``warnings`` lists (of
    strings) and ``measurement.telemetry`` (an object).

    >>> malformed({"kind": "gemm", "status": "ok", "time_s": "fast"})
    "field 'time_s' is a string, not a number"
    """
    for name, types in _TOP_TYPES.items():
        if name not in rec:
            if name in ("kind", "status"):
                return f"field {name!r} is missing"
            continue
        v = rec[name]
        if v is None:
            if None in types:
                continue
            return f"field {name!r} is null"
        if float in types and not _is_number(v):
            return f"field {name!r} is {_kind_of(v) if not isinstance(v, float) else repr(v)}, not a number"
        if float not in types and not isinstance(v, tuple(t for t in types if t is not None)):
            allowed = " or ".join(_kind_of(t()) if t is not None else "null" for t in types)
            return f"field {name!r} is {_kind_of(v)}, not {allowed}"
    if isinstance(rec.get("time_s"), (int, float)) and rec["time_s"] < 0:
        return f"field 'time_s' is negative ({rec['time_s']!r})"
    for place, names in _NUMBERS.items():
        holder = rec.get(place)
        if isinstance(holder, dict):
            for n in names:
                if holder.get(n) is not None and not _is_number(holder[n]):
                    return f"field '{place}.{n}' is {_kind_of(holder[n])}, not a number"
                if place == "workload" and holder.get(n) is not None and holder[n] < 0:
                    return f"field 'workload.{n}' is negative ({holder[n]!r})"
    env = rec.get("env")
    if isinstance(env, dict):
        for n in ("device", "gpu", "env_vars"):
            if env.get(n) is not None and not isinstance(env[n], dict):
                return f"field 'env.{n}' is {_kind_of(env[n])}, not an object"
    derived = rec.get("derived")
    if isinstance(derived, dict):
        for n, v in derived.items():
            if v is not None and _numeric_name(str(n)) and not _is_number(v):
                return f"field 'derived.{n}' is {_kind_of(v)}, not a number"
            if isinstance(v, float) and not _is_number(v):
                return f"field 'derived.{n}' is {v!r}, not a finite number"
    lists = [("warnings", rec.get("warnings"))]
    m = rec.get("measurement")
    if isinstance(m, dict):
        lists += [("measurement.warning_codes", m.get("warning_codes")), ("measurement.warnings", m.get("warnings"))]
        if m.get("telemetry") is not None and not isinstance(m["telemetry"], dict):
            return f"field 'measurement.telemetry' is {_kind_of(m['telemetry'])}, not an object"
    for name, v in lists:
        if v is None:
            continue
        if not isinstance(v, list) or not all(isinstance(x, str) for x in v):
            return f"field {name!r} is {_kind_of(v)}, not a list of strings"
    return None


def records_of(data: Results | Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """The records of a :class:`Results` or of a plain list."""
    return list(data.records) if isinstance(data, Results) else list(data)


# -- reading fields ----------------------------------------------------------------------------------------------------
_PLACES = ("derived", None, "workload", "measurement", "correctness")


def field(rec: Mapping[str, Any], name: str, default: Any = None) -> Any:
    """A named value wherever a record keeps it: ``derived``, then the record itself, then ``workload``,
    ``measurement``, ``correctness`` (new record kinds put their metrics in either place; the report must not care).
    Returns ``default`` when none has it (or it is None)."""
    for place in _PLACES:
        holder = rec if place is None else rec.get(place)
        if isinstance(holder, Mapping) and holder.get(name) is not None:
            return holder[name]
    return default


def number(rec: Mapping[str, Any], *names: str) -> float | None:
    """The first of ``names`` that :func:`field` finds as a finite number (bools excluded), else None."""
    for name in names:
        v = field(rec, name)
        if isinstance(v, (int, float)) and not isinstance(v, bool) and v == v and abs(v) != float("inf"):
            return float(v)
    return None


def env_of(rec: Mapping[str, Any]) -> dict[str, Any]:
    env = rec.get("env")
    return env if isinstance(env, dict) else {}


def device_name(rec: Mapping[str, Any]) -> str:
    """The device a record was measured on: the detected device's name, else the GPU's, else the CPU model."""
    env = env_of(rec)
    dev = env.get("device") if isinstance(env.get("device"), dict) else {}
    gpu = env.get("gpu") if isinstance(env.get("gpu"), dict) else {}
    name = dev.get("name") or gpu.get("name") or env.get("cpu")
    if not name and isinstance(rec.get("run_config"), dict):
        name = rec["run_config"].get("device_name")
    return str(name) if name else "unknown device"


def accelerator_key(rec: Mapping[str, Any]) -> str | None:
    """The catalog key (``"h200-sxm"``) of the device a record was measured on, when it matched the catalog.

    A record with ``env.device`` (``truepeak run``, ``peak``, ``moe bench``) says so itself (``matched_catalog``).
    One without it (``truepeak comm`` records carry only ``env.gpu``) is matched from its GPU's reported name by the
    same rule that device detection uses (:func:`truepeak.hardware.lookup.match_device_name`: exact device strings,
    no substring guesses), so a collective run on an H200 is not reported as "not in the catalog"."""
    env = env_of(rec)
    dev = env.get("device")
    if isinstance(dev, dict):
        return str(dev["accelerator"]) if dev.get("matched_catalog") and dev.get("accelerator") else None
    gpu = env.get("gpu")
    if isinstance(gpu, dict) and isinstance(gpu.get("name"), str) and gpu["name"].strip():
        from truepeak.hardware.lookup import match_device_name

        acc = match_device_name(gpu["name"])
        return acc.key if acc is not None else None
    return None


def label(rec: Mapping[str, Any]) -> str:
    """A short name of the workload: its ``label``, ``MxNxK`` for a GEMM, else its parameters."""
    w = rec.get("workload")
    if isinstance(w, Mapping):
        if w.get("label"):
            return str(w["label"])
        if all(k in w for k in ("m", "n", "k")):
            return f"{w['m']}x{w['n']}x{w['k']}"
        return ", ".join(f"{k}={_scalar(v)}" for k, v in w.items() if not isinstance(v, (dict, list)))[:80] or "-"
    return "-" if w is None else str(w)


def _scalar(v: Any) -> str:
    return json.dumps(v) if isinstance(v, (dict, list)) else str(v)


def kinds_in(records: Iterable[Mapping[str, Any]]) -> list[str]:
    """The record kinds present, in first-seen order."""
    return list(dict.fromkeys(str(r.get("kind") or "unknown") for r in records))


__all__ = ["UNDERSTOOD_SCHEMAS", "Problem", "Results", "load_results", "latest", "records_of", "field", "number",
           "env_of", "device_name", "accelerator_key", "label", "kinds_in", "malformed"]
