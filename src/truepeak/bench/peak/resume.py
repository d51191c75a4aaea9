"""``truepeak peak --resume``: a results file read back as searches (the last attempt of each (format, mode)), whether
each finished, whether it was made with the settings asked now, and a finished search's answer rebuilt from its
records."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from truepeak.bench.peak.results import FormatPeak
from truepeak.bench.peak.search import SearchResult, Trial, best_so_far
from truepeak.errors import TruepeakError
from truepeak.records import Record


#: ``run_config`` fields a finished search must share with the settings asked now for ``resume`` to reuse it.
PEAK_RESUME_MUST_MATCH = ("device", "device_name", "scaling", "budget_s", "budgets", "plan")


def previous_searches(path: Path, warn: Callable[[str], None]) -> dict[tuple[str, str], list[Record]]:
    """The records of each (format, mode) search in a results file being resumed, in file order, from the last
    attempt only: a search's first trial (``search.eval == 0``) starts a new attempt. Lines that are not valid
    records are reported through ``warn`` (capped: :func:`~truepeak.records.problem_warnings`) and ignored.

    Raises:
        TruepeakError: a record of another schema version (appending this schema's records to it would mix two).
    """
    from truepeak.bench.outdir import refuse_other_schemas
    from truepeak.records import problem_warnings, read_records

    recs = read_records(path, strict=False)
    refuse_other_schemas(recs, path)
    for line in problem_warnings(path, recs.problems, "{path} line {line} is not a valid record and is ignored: {why}"):
        warn(line)  # capped per kind of problem
    return attempts(recs)


def attempts(records: Sequence[Record]) -> dict[tuple[str, str], list[Record]]:
    """Per (format, mode), the peak-search records of its last attempt, in order (``search.eval == 0`` starts one)."""
    out: dict[tuple[str, str], list[Record]] = {}
    for rec in records:
        config, search = rec.run_config, rec.search
        if not isinstance(config, dict) or config.get("command") != "peak" or search is None:
            continue
        key = (str(config.get("format")), str(config.get("mode")))
        if search.eval == 0:
            out[key] = []
        out.setdefault(key, []).append(rec)
    return out


def search_finished(records: Sequence[Record]) -> bool:
    """Whether one search's records (its last attempt) are complete: a ``skipped`` search, or a last record that is
    the search's last re-measurement (``search.final``). A search with no shape that ran never has one: it is
    searched again, as ``truepeak run --resume`` runs failed cases again."""
    if not records:
        return False
    last = records[-1].search
    return last is not None and (bool(last.final) or (len(records) == 1 and last.phase == "skipped"
                                                      and records[0].status == "skipped"))


def check_resume_settings(record: Record, config: dict[str, Any], path: Path) -> None:
    """Refuse to reuse a finished search made with other settings (:data:`PEAK_RESUME_MUST_MATCH`).

    Raises:
        TruepeakError: one line naming the search and each setting that differs, e.g. ``budget_s (there: 15.0,
            now: 30.0)``.
    """
    there = record.run_config or {}
    diff = [f"{k} (there: {there.get(k)}, now: {config.get(k)})" for k in PEAK_RESUME_MUST_MATCH
            if there.get(k) != config.get(k)]
    if diff:
        raise TruepeakError(f"cannot --resume {path}: its {config['format']} {config['mode']} search was made with "
                            f"different settings: {'; '.join(diff)}; rerun with the same --budget and --device, or "
                            "choose another --out")


def peak_from_records(fmt: str, mode: str, records: Sequence[Record]) -> FormatPeak:
    """The answer of a finished search rebuilt from its records (``resume``): the best re-measured record (else the
    best first-pass one, as :func:`search_shapes` picks it), every record a :class:`Trial`, ``stopped`` from the
    final record, and the time as the span of the records' timestamps. A skipped search gives a ``skipped`` answer
    with its reason."""
    first = records[0] if records else None
    if first is not None and first.status == "skipped" and first.search is not None \
            and first.search.phase == "skipped":
        return FormatPeak(fmt, mode, "skipped", first.reason, resumed=True)
    trials = trials_of(records)
    best = best_so_far(trials)
    last = records[-1].search if records else None
    stopped = str((last.stopped if last is not None else None) or "converged")
    span = _timestamp_span(records)
    result = SearchResult(best, trials, stopped, span)
    if best is None:
        return FormatPeak(fmt, mode, "failed", "no shape ran", result=result, elapsed_s=span, resumed=True)
    return FormatPeak(fmt, mode, "ok", best_record=best.record, result=result, elapsed_s=span, resumed=True)


def trials_of(records: Sequence[Record]) -> list[Trial]:
    """One search's records as :class:`Trial` objects (the value is the record's FLOP/s when it is ``ok``)."""
    trials = []
    for rec in records:
        w, info = rec.workload, rec.search
        if info is None or info.phase == "skipped" or rec.kind != "gemm":
            continue
        value = rec.derived.flop_per_s if rec.ok and rec.derived is not None else None
        trials.append(Trial((w.m, w.n, w.k), info.phase, info.round, info.step, info.eval, value, rec, info.stopped))
    return trials


def _timestamp_span(records: Sequence[Record]) -> float:
    """Seconds from the first to the last record's ``timestamp`` (ISO 8601, UTC); 0 when they cannot be read."""
    import datetime as _dt

    stamps = []
    for rec in records:
        try:
            stamps.append(_dt.datetime.fromisoformat(rec.timestamp.replace("Z", "+00:00")))
        except ValueError:
            continue
    return (max(stamps) - min(stamps)).total_seconds() if len(stamps) > 1 else 0.0


__all__ = ["PEAK_RESUME_MUST_MATCH", "previous_searches", "attempts", "search_finished", "check_resume_settings",
           "peak_from_records", "trials_of"]
