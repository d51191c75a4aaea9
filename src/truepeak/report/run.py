"""What ``truepeak run`` shows: the records as a table or JSON on stdout, ``summary.md`` and ``report.html`` beside
them, and the lines on stderr (notes, counts, paths; after Ctrl-C where the partial results are and how to continue).

The CLI (:mod:`truepeak.cli.run`) calls these and echoes the stderr lines they return; a run's result is read by its
attributes (``out_dir``, ``records_path``, ``records``, ``device``, ``notes``, ``elapsed_s``, ``resumed_keys``:
:class:`truepeak.bench.run.RunResult`), so report never imports bench.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import IO, Any

from truepeak.records import Record, latest


def print_run_records(records: Sequence[Record], device: Any, as_json: bool, notice: str | None = None,
                      file: IO[str] | None = None) -> None:
    """stdout (or ``file``): the records as JSON (a list of :meth:`truepeak.records.Record.to_dict`, the same shape
    finished or interrupted), or the table (:func:`truepeak.report.table.render_table`) titled with the device, with
    ``notice`` (an interrupted run's line) below its footer."""
    if as_json:
        print(json.dumps([r.to_dict() for r in records], indent=1, ensure_ascii=False), file=file or sys.stdout)
        return
    from truepeak.report.table import render_table

    render_table(list(records), title=f"truepeak run: {device.name} ({device.kind})", notice=notice, file=file)


def write_run_summary(result: Any, notice: str | None = None) -> Path | None:
    """Write summary.md beside the records (one record per case, :func:`truepeak.records.latest`; ``notice`` under the
    title: an interrupted run's line) and return its path; on an OS error add a note to ``result.notes`` and return
    None."""
    from truepeak.report.markdown import write_summary

    path = result.out_dir / "summary.md"
    try:
        return write_summary(latest(result.records), path, result.device, notice)
    except OSError as exc:
        result.notes.append(f"could not write {path}: {exc.strerror or exc}")
        return None


def write_run_html(out_dir: Path, warn: Callable[[str], None], notice: str | None = None) -> Path | None:
    """report.html beside the records (``notice`` under the title: an interrupted run's line); never raises: a
    failure is one line to ``warn`` and None (:func:`truepeak.report.html.write_run_report`)."""
    from truepeak.report.html import write_run_report

    return write_run_report(out_dir, warn=warn, notice=notice)


def count_line(records: Sequence[Record], resumed_keys: frozenset[str] | set[str] = frozenset()) -> str:
    """``"41 ok (12 resumed, 29 new), 3 skipped, 0 failed"``: per status, how many records were taken over from
    results.jsonl by --resume and how many were made by this run (the split is shown where any were resumed)."""
    parts = []
    for status in ("ok", "skipped", "failed"):
        of = [r for r in records if r.status == status]
        old = sum(1 for r in of if r.key in resumed_keys)
        parts.append(f"{len(of)} {status}" + (f" ({old} resumed, {len(of) - old} new)" if old else ""))
    return ", ".join(parts)


def run_finished_lines(result: Any, records: Sequence[Record], summary: Path | None) -> list[str]:
    """The stderr lines after a finished run, before report.html is written: the device's and the run's notes, the
    counts with the time, where the records and the summary are."""
    lines = [f"note: {note}" for note in [*result.device.notes, *result.notes]]
    lines.append(f"{count_line(records, result.resumed_keys)} in {result.elapsed_s:.1f} s")
    lines.append(f"records: {result.records_path}")
    if summary is not None:
        lines.append(f"summary: {summary}")
    return lines


def report_line(report: Path | None, interrupted: bool = False) -> list[str]:
    """``report: PATH`` (``report so far: PATH`` after Ctrl-C), or nothing when no report was written."""
    if report is None:
        return []
    return [f"report{' so far' if interrupted else ''}: {report}"]


def run_interrupted_lines(n_records: int, records_path: Path, command: str, summary: Path | None) -> list[str]:
    """The stderr lines after Ctrl-C: how many records finished and where they are, the command that continues, and
    where the summary so far is."""
    lines = [f"interrupted after {n_records} records; they are in {records_path}; continue with: {command}"]
    if summary is not None:
        lines.append(f"summary so far: {summary}")
    return lines


__all__ = ["print_run_records", "write_run_summary", "write_run_html", "count_line", "run_finished_lines",
           "report_line", "run_interrupted_lines"]
