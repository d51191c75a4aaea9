"""What `truepeak run` shows (truepeak/report/run.py): the count line, the stderr lines of a finished and an interrupted
run, summary.md beside the records; no torch needed (results are read by their attributes)."""

from __future__ import annotations

import io
import json
from pathlib import Path
from types import SimpleNamespace

from truepeak.report.run import (count_line, print_run_records, report_line, run_finished_lines,
                                 run_interrupted_lines, write_run_summary)


def _rec(status, key):
    return SimpleNamespace(status=status, key=key, to_dict=lambda: {"key": key, "status": status})


RECORDS = [_rec("ok", "a"), _rec("ok", "b"), _rec("ok", "c"), _rec("skipped", "d"), _rec("failed", "e")]


def test_count_line_splits_resumed_from_new_only_where_any_were_resumed():
    assert count_line(RECORDS) == "3 ok, 1 skipped, 1 failed"
    # a and d were taken over by --resume: 3 ok = 1 resumed + 2 new, 1 skipped = 1 resumed + 0 new
    assert count_line(RECORDS, {"a", "d"}) == "3 ok (1 resumed, 2 new), 1 skipped (1 resumed, 0 new), 1 failed"


def test_finished_and_interrupted_lines():
    out = Path("/tmp/r")
    result = SimpleNamespace(device=SimpleNamespace(notes=["dev note"]), notes=["run note"], elapsed_s=1.25,
                             resumed_keys=frozenset(), records_path=out / "results.jsonl")
    assert run_finished_lines(result, RECORDS, out / "summary.md") == [
        "note: dev note", "note: run note", "3 ok, 1 skipped, 1 failed in 1.2 s", "records: /tmp/r/results.jsonl",
        "summary: /tmp/r/summary.md"]
    assert run_finished_lines(result, RECORDS, None)[-1] == "records: /tmp/r/results.jsonl"
    assert run_interrupted_lines(2, out / "results.jsonl", "CMD", None) == [
        "interrupted after 2 records; they are in /tmp/r/results.jsonl; continue with: CMD"]
    assert report_line(out / "report.html") == ["report: /tmp/r/report.html"]
    assert report_line(out / "report.html", interrupted=True) == ["report so far: /tmp/r/report.html"]
    assert report_line(None) == []


def test_json_is_the_records_list():
    buf = io.StringIO()
    print_run_records(RECORDS[:2], SimpleNamespace(name="x", kind="cpu"), as_json=True, file=buf)
    assert json.loads(buf.getvalue()) == [{"key": "a", "status": "ok"}, {"key": "b", "status": "ok"}]


def test_a_summary_that_cannot_be_written_is_a_note(tmp_path):
    afile = tmp_path / "afile"
    afile.write_text("x")  # out_dir is a file: summary.md cannot be created under it
    result = SimpleNamespace(out_dir=afile, records=[], device=None, notes=[])
    assert write_run_summary(result) is None
    assert len(result.notes) == 1 and result.notes[0].startswith(f"could not write {afile / 'summary.md'}: ")
