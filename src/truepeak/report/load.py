"""Reading results files for reports: render what is valid, name what is not.

``truepeak report`` and ``truepeak compare`` read records files written by any truepeak command (``run``, ``peak``,
``moe bench``, ``comm``). Unlike ``--resume``, a report must not give up on a file with one bad line: a run killed
mid-write leaves a torn last line, and an old file may hold records of another schema version. So every file is read
with :func:`truepeak.records.read_records` (``strict=False``: the one reader, the one schema rule, the typed
validation; older schema versions are migrated) and each line it skipped becomes a :class:`Problem` that the report
shows at the top ("results.jsonl, line 7: not valid JSON: ...", "line 2: field 'time_s' is a string, not a number",
"line 1: a record of schema version 1; truepeak 0.1.0 reads schema versions 2 and 3"). An empty file is a problem
too; only when no file holds a single valid record is that an error (:meth:`Results.require_records`).

A resumed file holds a retried case twice; reports show the last record per key (:func:`truepeak.records.latest`),
as ``truepeak run`` does.

Helpers every renderer shares live here too: :func:`accelerator_key` (which catalog device a record was measured on)
and :func:`kinds_in`.

Pure Python: imports no numpy, torch or matplotlib.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field as dc_field
from pathlib import Path

import truepeak
from truepeak.errors import TruepeakError
from truepeak.records import READABLE_SCHEMAS, RESULTS_FILE, Record, latest, read_records, results_file

#: Schema versions the reports understand (the one :mod:`truepeak.records` writes, and the older ones it migrates).
UNDERSTOOD_SCHEMAS: tuple[int, ...] = READABLE_SCHEMAS

#: The :class:`Problem` of a file that holds no line at all.
EMPTY_FILE = "empty file: no records"


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

    records: list[Record] = dc_field(default_factory=list)
    sources: list[str] = dc_field(default_factory=list)
    files: list[str] = dc_field(default_factory=list)
    problems: list[Problem] = dc_field(default_factory=list)

    def of(self, path: str) -> list[Record]:
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
        if self.problems and all(p.line is None and p.why == EMPTY_FILE for p in self.problems):
            files = ", ".join(self.files)
            raise TruepeakError(f"no records: {files} {'is' if len(self.files) == 1 else 'are'} empty (a run stopped "
                                "before its first case finished writes none)")
        shown = "; ".join(str(p) for p in self.problems[:5])
        more = f" (and {len(self.problems) - 5} more)" if len(self.problems) > 5 else ""
        raise TruepeakError(f"no valid records in {', '.join(self.files) or 'no files'}"
                            + (f": {shown}{more}" if shown else "")
                            + f"; truepeak {truepeak.__version__} reads record schema versions "
                            + " and ".join(str(v) for v in UNDERSTOOD_SCHEMAS))


def load_results(paths: Sequence[str | os.PathLike[str]], *, dedupe: bool = True) -> Results:
    """Read results files tolerantly.

    Args:
        paths: JSON Lines files (plain or gzip-compressed), or folders holding a ``results.jsonl`` (the ``--out``
            folder of ``truepeak run``, ``comm``, ``moe bench``, ...), which stand for that file.
        dedupe: keep only the last record per key of each file (:func:`truepeak.records.latest`).

    Returns:
        :class:`Results`; an empty or wholly bad file contributes problems and no records.

    Raises:
        TruepeakError: a file cannot be read (missing, a folder without results.jsonl, no permission); the message
            names it.
    """
    out = Results()
    for raw in paths:
        p = results_file(raw)
        name = os.fspath(raw) if p == Path(raw).expanduser() else os.fspath(p)
        if p.is_dir():
            raise TruepeakError(f"{name} is a folder without {RESULTS_FILE}, not a results file; pass a .jsonl "
                                "file or a folder that truepeak wrote")
        out.files.append(name)
        recs = read_records(p, strict=False)
        out.problems += [Problem(name, n, why) for n, why in recs.problems]
        if not list(recs) and not recs.problems:
            out.problems.append(Problem(name, None, EMPTY_FILE))
        kept = latest(recs) if dedupe else list(recs)
        out.records += kept
        out.sources += [name] * len(kept)
    return out


def records_of(data: Results | Sequence[Record]) -> list[Record]:
    """The records of a :class:`Results` or of a plain list."""
    return list(data.records) if isinstance(data, Results) else list(data)


def accelerator_key(rec: Record) -> str | None:
    """The catalog key (``"h200-sxm"``) of the device a record was measured on, when it matched the catalog
    (:func:`truepeak.hardware.lookup.environment_device`: a record's own ``env.device``, else its GPU's reported name
    matched exactly, so a collective run on an H200 is not reported as "not in the catalog"); None for a CPU or a
    device the catalog does not hold."""
    from truepeak.hardware.lookup import environment_device

    key, _ = environment_device(rec.env)
    return None if key == "cpu" else key


def kinds_in(records: Iterable[Record]) -> list[str]:
    """The record kinds present, in first-seen order."""
    return list(dict.fromkeys(r.kind for r in records))


def record_groups(records: Sequence[Record]) -> list[tuple[str, str | None, list[Record]]]:
    """The records split for the per-kind tables: ``(kind, device, records)`` in first-seen order; ``device`` is
    None when every record comes from one device, else each kind's records are split by device, so two rows of the
    same case measured on two devices are never side by side unnamed."""
    devices = list(dict.fromkeys(r.device_name for r in records))
    out = []
    for kind in kinds_in(records):
        recs = [r for r in records if r.kind == kind]
        if len(devices) < 2:
            out.append((kind, None, recs))
            continue
        for name in dict.fromkeys(r.device_name for r in recs):
            out.append((kind, name, [r for r in recs if r.device_name == name]))
    return out


__all__ = ["UNDERSTOOD_SCHEMAS", "Problem", "Results", "load_results", "records_of", "accelerator_key", "kinds_in",
           "record_groups"]
