"""Records files: JSON Lines, one record per line, appended the moment each record is finished.

Crash safety: :class:`RecordWriter` writes each record as one line and calls ``flush`` + ``os.fsync`` before returning,
so a crash loses at most the record being written; a torn last line is skipped by :func:`done_keys` and by
``read_records(strict=False)``, and the next write starts on a fresh line.

:func:`read_records` reads a file of this schema version or an older one it migrates (:mod:`truepeak.records.migrate`),
plain or gzip-compressed (recognised by its first bytes, whatever its name), strictly (the first bad line is an error)
or tolerantly (bad lines are listed with why). The warnings about skipped lines are capped per kind of problem
(:func:`cap_repeats`): a binary file read as records is thousands of lines that all say the same thing.

Standard library only.
"""

from __future__ import annotations

import gzip
import json
import os
import zlib
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import truepeak
from truepeak.errors import TruepeakError
from truepeak.records._fields import RecordError
from truepeak.records.record import DONE_STATUSES, Record, schema_mismatch

_GZIP_MAGIC = b"\x1f\x8b"


class RecordWriter:
    """Append records to a JSON Lines file, one line each, flushed and fsynced before :meth:`write` returns.

    Opening never truncates: an existing file is continued (that is how ``--resume`` works). If the file ends in a
    torn line (a crash while writing), the next record starts on a new line, and the torn line stays for
    ``read_records(strict=False)`` to report.

    Usage::

        with RecordWriter("results.jsonl") as out:
            done = out.done_keys()
            ...
            out.write(make_record(...))

    Args:
        path: the ``.jsonl`` file; parent directories are created.

    Raises:
        TruepeakError: the file cannot be opened for appending, or is gzip-compressed (records are appended to plain
            files only).
    """

    def __init__(self, path: str | os.PathLike[str]):
        self.path = Path(path)
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            new = not self.path.exists()
            if not new and _is_gzip(self.path):
                raise TruepeakError(f"cannot append records to {self.path}: it is gzip-compressed; write to a plain "
                                    ".jsonl file")
            self._f = open(self.path, "ab")  # noqa: SIM115 (closed in close())
        except OSError as exc:
            raise TruepeakError(f"cannot write records to {self.path}: {_why(exc)}") from exc
        try:
            if not new and self.path.stat().st_size > 0:
                with open(self.path, "rb") as r:
                    r.seek(-1, os.SEEK_END)
                    if r.read(1) != b"\n":
                        self._f.write(b"\n")
                        self._sync()
        except OSError as exc:
            self._f.close()
            raise TruepeakError(f"cannot write records to {self.path}: {_why(exc)}") from exc
        if new:
            self._sync_dir()

    def _sync(self) -> None:
        self._f.flush()
        os.fsync(self._f.fileno())

    def _sync_dir(self) -> None:
        try:  # make the new file's directory entry durable too (POSIX; best effort)
            fd = os.open(self.path.parent, os.O_RDONLY)
        except OSError:
            return
        try:
            os.fsync(fd)
        except OSError:
            pass
        finally:
            os.close(fd)

    def write(self, record: Record) -> None:
        """Append one record (:meth:`Record.to_dict`) as one line and fsync it.

        Raises:
            TruepeakError: the writer is closed, ``record`` is not a :class:`Record`, or the file cannot be written
                (disk full, ...; the message names the file).
        """
        if self._f.closed:
            raise TruepeakError(f"the record writer for {self.path} is closed")
        if not isinstance(record, Record):
            raise TruepeakError(f"a record must be a truepeak.records.Record, got {type(record).__name__}")
        line = json.dumps(record.to_dict(), ensure_ascii=False, allow_nan=False, separators=(",", ":"))
        try:
            self._f.write(line.encode("utf-8") + b"\n")
            self._sync()
        except OSError as exc:
            raise TruepeakError(f"cannot write records to {self.path}: {_why(exc)}") from exc

    def done_keys(self) -> set[str]:
        """Keys of ``ok`` and ``skipped`` records already in the file (``failed`` ones are retried by --resume)."""
        return done_keys(self.path)

    def close(self) -> None:
        """Close the file (idempotent).

        Raises:
            TruepeakError: the last bytes could not be written (disk full, ...); the message names the file.
        """
        if not self._f.closed:
            try:
                self._f.close()
            except OSError as exc:
                raise TruepeakError(f"cannot write records to {self.path}: {_why(exc)}") from exc

    @property
    def closed(self) -> bool:
        """Whether :meth:`close` was called."""
        return self._f.closed

    def __enter__(self) -> RecordWriter:
        return self

    def __exit__(self, exc_type: Any, *exc: Any) -> None:
        try:
            self.close()
        except TruepeakError:
            if exc_type is None:
                raise  # otherwise the error already leaving the block is the one to report


def _why(exc: OSError) -> str:
    return exc.strerror or str(exc) or type(exc).__name__


def _is_gzip(path: Path) -> bool:
    try:
        with open(path, "rb") as f:
            return f.read(2) == _GZIP_MAGIC
    except OSError:
        return False


class RecordList(list):
    """The :class:`Record` objects of a file, in file order, with what ``read_records(strict=False)`` skipped.

    Attributes:
        problems: ``(line number, why)`` of each skipped line, e.g. ``(4, "not valid JSON: ...")``.
        bad_lines: the 1-based numbers of the skipped lines.
        line_numbers: the 1-based line number of each record, parallel to the list.
        other_schema: ``(line number, schema_version found)`` of the skipped lines that are JSON objects of a schema
            version this truepeak cannot read (also in ``problems``).
        migrated: ``(line number, schema_version)`` of the records read from an older schema version (kept, upgraded):
            ``--resume`` refuses to append to such a file rather than mix schemas.
    """

    def __init__(self, records: Iterable[Record] = (), problems: Iterable[tuple[int, str]] = (),
                 line_numbers: Iterable[int] | None = None, other_schema: Iterable[tuple[int, Any]] = (),
                 migrated: Iterable[tuple[int, int]] = ()):
        super().__init__(records)
        self.problems: list[tuple[int, str]] = list(problems)
        self.bad_lines: list[int] = [n for n, _ in self.problems]
        self.line_numbers: list[int] = list(line_numbers) if line_numbers is not None else []
        self.other_schema: list[tuple[int, Any]] = list(other_schema)
        self.migrated: list[tuple[int, int]] = list(migrated)


def _read_bytes(p: Path) -> bytes:
    """The file's bytes, decompressed when it is gzip."""
    try:
        raw = p.read_bytes()
    except OSError as exc:
        raise TruepeakError(f"cannot read records file {p}: {exc.strerror or exc}") from exc
    if raw[:2] != _GZIP_MAGIC:
        return raw
    try:
        return gzip.decompress(raw)
    except (OSError, EOFError, zlib.error) as exc:
        raise TruepeakError(f"cannot read records file {p}: a damaged gzip file ({exc})") from exc


#: The records file in a folder truepeak wrote (``--out`` of run, peak, comm, moe bench, serve).
RESULTS_FILE = "results.jsonl"


def results_file(path: str | os.PathLike[str]) -> Path:
    """``path`` as a records file: a folder that holds :data:`RESULTS_FILE` stands for it; anything else is
    returned as given (a file, or a path that does not exist, for the caller's own error)."""
    p = Path(path).expanduser()
    return p / RESULTS_FILE if p.is_dir() and (p / RESULTS_FILE).is_file() else p


def read_records(path: str | os.PathLike[str], *, strict: bool = True) -> RecordList:
    """Read a JSON Lines records file (plain or gzip-compressed) into :class:`Record` objects.

    Blank lines are ignored. Every other line must be a JSON object of a schema version this truepeak reads
    (:func:`truepeak.records.schema_mismatch`; an older one is migrated) that is a valid record
    (:meth:`Record.from_dict`).

    Args:
        path: the ``.jsonl`` (or ``.jsonl.gz``) file.
        strict: raise on the first line that is not a valid record (default). With ``strict=False`` such lines (e.g.
            a line torn by a crash) are skipped and listed in the result's ``problems`` (their numbers in
            ``bad_lines``; those of an unreadable schema version also in ``other_schema``).

    Returns:
        A :class:`RecordList`.

    Raises:
        TruepeakError: the file cannot be read, or (strict) a line is not JSON, not an object, of a schema version
            this truepeak cannot read, or not a valid record; the message names the file, the line number and why.
    """
    p = Path(path)
    raw = _read_bytes(p)
    records: list[Record] = []
    numbers: list[int] = []
    bad: list[tuple[int, str]] = []
    other: list[tuple[int, Any]] = []
    migrated: list[tuple[int, int]] = []
    for n, line in enumerate(raw.split(b"\n"), start=1):
        if not line.strip():
            continue
        problem = None
        obj: Any = None
        try:
            obj = json.loads(line.decode("utf-8"))
            if not isinstance(obj, dict):
                problem = f"a JSON {type(obj).__name__}, not an object"
        except UnicodeDecodeError as exc:
            problem = f"not UTF-8 ({exc.reason})"
        except json.JSONDecodeError as exc:
            problem = f"not valid JSON: {exc.msg} (column {exc.colno})"
        if problem is None:
            mismatch = schema_mismatch(obj)
            if mismatch is not None:
                if strict:
                    raise TruepeakError(f"{p}, line {n}: record of {mismatch}; regenerate it with `truepeak run`, "
                                        "or read with strict=False to skip it")
                bad.append((n, f"a record of {mismatch}"))
                other.append((n, obj.get("schema_version")))
                continue
            try:
                rec = Record.from_dict(obj)
            except RecordError as exc:
                problem = str(exc)
            else:
                records.append(rec)
                numbers.append(n)
                if rec.source_schema != truepeak.SCHEMA_VERSION:
                    migrated.append((n, rec.source_schema))
                continue
        if strict:
            raise TruepeakError(f"{p}, line {n}: malformed record: {problem}; fix or delete the line, "
                                "or read with strict=False to skip it")
        bad.append((n, problem))
    return RecordList(records, bad, numbers, other, migrated)


def done_keys(path: str | os.PathLike[str]) -> set[str]:
    """Keys of ``ok``/``skipped`` records in ``path`` (empty when the file does not exist); bad lines skipped."""
    p = Path(path)
    if not p.exists():
        return set()
    return {r.key for r in read_records(p, strict=False) if r.status in DONE_STATUSES}


#: Warnings of one kind printed in full before the rest are counted in one line: a 10 MB binary file read as records
#: is ~39,000 unusable lines, and every one of them says the same thing.
REPEAT_LIMIT = 5


def problem_kind(why: str) -> str:
    """What kind of problem a skipped line's reason names, without its details: the text before the first ``": "``,
    ``" ("`` or ``"; "`` (``"not valid JSON: Expecting value (column 1)"`` → ``"not valid JSON"``, ``"not UTF-8
    (invalid start byte)"`` → ``"not UTF-8"``, ``"a record of schema version 1; truepeak ... reads ..."`` → ``"a
    record of schema version 1"``)."""
    cut = [i for i in (why.find(": "), why.find(" ("), why.find("; ")) if i > 0]
    return why[:min(cut)] if cut else why


def cap_repeats(items: Iterable[tuple[str, str]], limit: int = REPEAT_LIMIT) -> list[str]:
    """The one cap on repeated warnings, for every command that reads records (``report``, ``compare``, ``run
    --resume``, ``peak --resume``).

    Args:
        items: ``(kind, message)`` pairs in the order they were found; ``kind`` groups messages that say the same
            thing (e.g. ``f"{path}: {problem_kind(why)}"``).
        limit: messages shown per kind.

    Returns:
        The messages, at most ``limit`` of each kind, in order; then for each kind that had more, in first-seen
        order, one line: ``"... and 38,615 more like this (results.jsonl: not UTF-8)"``.
    """
    shown: list[str] = []
    seen: dict[str, int] = {}
    for kind, message in items:
        seen[kind] = seen.get(kind, 0) + 1
        if seen[kind] <= limit:
            shown.append(message)
    return shown + [f"... and {n - limit:,} more like this ({kind})" for kind, n in seen.items() if n > limit]


def problem_warnings(path: str | os.PathLike[str], problems: Iterable[tuple[int | None, str]], template: str,
                     limit: int = REPEAT_LIMIT) -> list[str]:
    """Warning lines for the lines ``read_records(strict=False)`` skipped in ``path`` (its ``problems``), capped per
    kind of problem by :func:`cap_repeats`.

    Args:
        template: one warning, with ``{path}``, ``{line}`` and ``{why}``, e.g. ``"{path}, line {line}: {why} (left
            out)"``.
    """
    return cap_repeats(((f"{path}: {problem_kind(why)}", template.format(path=path, line=line, why=why))
                        for line, why in problems), limit)


__all__ = ["RecordWriter", "RecordList", "read_records", "done_keys", "REPEAT_LIMIT", "problem_kind", "cap_repeats",
           "problem_warnings", "RESULTS_FILE", "results_file"]
