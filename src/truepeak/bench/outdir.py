"""The results folder every measuring command writes: its default name, the checks of ``--out`` before anything is
measured, its creation, and the records of a run being resumed.

``truepeak run``, ``peak``, ``comm`` and ``moe bench`` share these, so ``--out`` means the same folder everywhere and is
refused with the same words.
"""

from __future__ import annotations

import datetime as _dt
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import truepeak
from truepeak.errors import TruepeakError
from truepeak.records import Record, problem_warnings, read_records, schema_found


def default_out_dir(now: _dt.datetime | None = None, command: str = "run") -> Path:
    """The folder a command writes to without ``--out``: ``./truepeak-<command>-YYYYmmdd-HHMMSS`` (local time), e.g.
    ``truepeak-run-20261130-010203``; ``truepeak run``, ``peak`` and ``comm`` all name theirs so."""
    now = now or _dt.datetime.now()
    return Path(f"truepeak-{command}-{now:%Y%m%d-%H%M%S}")


def check_out_arg(out_dir: str | os.PathLike | None, command: str = "run") -> None:
    """The one check of an ``--out`` folder argument, for every command that writes a results folder (``run``,
    ``peak``, ``comm``, ``moe bench``), before anything is measured or created. None (no ``--out``) passes.

    Refused: an empty value (``""`` or blanks, which ``Path`` would silently turn into the current folder); a path
    that is an existing file (``/dev/null``, a results file); a path ending in ``.jsonl`` that is not an existing
    folder: ``--out`` names a folder, and the records go to ``results.jsonl`` inside it.

    Args:
        command: the command's name after ``truepeak`` (``"moe bench"``), for the default folder the message names.

    Raises:
        TruepeakError: one line naming the value and what to give instead.
    """
    if out_dir is None:
        return
    text = os.fspath(out_dir)
    default = f"truepeak-{command.replace(' ', '-')}-YYYYmmdd-HHMMSS"  # default_out_dir's pattern
    if not text.strip():
        raise TruepeakError(f"--out is empty; give a folder for the results (e.g. --out h200-run), or omit --out "
                            f"for ./{default}")
    path = Path(text)
    if path.exists() and not path.is_dir():
        raise TruepeakError(f"--out {text} is an existing file, not a folder; choose a folder path for the results")
    if text.rstrip("/").lower().endswith(".jsonl") and not path.is_dir():
        raise TruepeakError(f"--out {text}: --out is a folder, and the records go to results.jsonl inside it; give a "
                            f"folder, e.g. --out {text.rstrip('/')[:-len('.jsonl')] or 'results'}")


def make_out_dir(out_dir: str | os.PathLike) -> Path:
    """Create an ``--out`` folder (and its parents) that :func:`check_out_arg` accepted, and check that it can be
    written; returns it.

    Raises:
        TruepeakError: it cannot be created (under a file, no permission: the message names the path and why) or
            written.
    """
    out = Path(out_dir)
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise TruepeakError(f"cannot create the --out folder {out}: {exc.strerror or exc}") from exc
    if not os.access(out, os.W_OK | os.X_OK):
        raise TruepeakError(f"cannot write into the --out folder {out}: permission denied")
    return out


def prepare_out_dir(out_dir: str | os.PathLike | None, resume: bool = False, command: str = "run") -> Path:
    """Check and create the output folder before anything is measured; returns it (default
    :func:`default_out_dir` for ``command``).

    Raises:
        TruepeakError: ``out_dir`` is refused by :func:`check_out_arg` (empty, a file, a ``.jsonl`` name), cannot be
            created or written (:func:`make_out_dir`), already holds ``results.jsonl`` without ``resume``, or holds
            none with ``resume`` (nothing to continue; the folder is not created then).
    """
    check_out_arg(out_dir, command)
    out = Path(out_dir) if out_dir is not None else default_out_dir(command=command)
    if resume and not (out / "results.jsonl").exists():  # checked before the folder is created
        raise TruepeakError(f"--resume: no results.jsonl in {out} to resume; drop --resume to start a new run there")
    make_out_dir(out)
    path = out / "results.jsonl"
    if path.exists() and not path.is_file():
        raise TruepeakError(f"{path} exists but is not a file; choose another --out")
    if path.exists() and path.stat().st_size > 0 and not resume:
        raise TruepeakError(f"{path} already holds results; pass --resume to continue it, or choose another --out")
    return out


def read_previous(path: Path, warn: Callable[[str], None]) -> dict[str, Record]:
    """The records of a results file being resumed, by key (the last of a key wins). Each line that is not a valid
    record (torn by a crash, not JSON, not a record) is reported through ``warn`` and ignored (at most
    :data:`~truepeak.records.REPEAT_LIMIT` lines of each kind, then one that counts the rest).

    Raises:
        TruepeakError: a record of another schema version, older (read by migration) or unreadable: appending this
            schema's records to it would mix two.
    """
    recs = read_records(path, strict=False)
    refuse_other_schemas(recs, path)
    for line in problem_warnings(path, recs.problems, "{path} line {line} is not a valid record and is ignored: {why}"):
        warn(line)  # at most REPEAT_LIMIT per kind of problem, then one line counting the rest
    return {rec.key: rec for rec in recs}


def refuse_other_schemas(recs: Any, path: Path) -> None:
    """``--resume`` appends to a file of the current schema only (:class:`~truepeak.records.RecordList` of
    ``path``).

    Raises:
        TruepeakError: a line of another schema version (an older one that reading migrates, or one it cannot read):
            one line naming the file, the line and the versions.
    """
    other = sorted([*recs.other_schema, *recs.migrated], key=lambda p: p[0])
    if other:
        n, version = other[0]
        raise TruepeakError(f"cannot --resume {path}: line {n} has {schema_found(version)}, and this truepeak writes "
                            f"version {truepeak.SCHEMA_VERSION} only; choose another --out")
