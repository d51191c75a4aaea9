"""The results folder every measuring command shares (truepeak/bench/outdir.py), as truepeak run uses it."""

from __future__ import annotations

import datetime as dt

import pytest

from truepeak.bench import run as R
from truepeak.errors import TruepeakError


def test_default_out_dir():
    assert str(R.default_out_dir(dt.datetime(2026, 11, 30, 1, 2, 3))) == "truepeak-run-20261130-010203"
    assert str(R.default_out_dir(dt.datetime(2026, 11, 30, 23, 59, 0), "comm")) == "truepeak-comm-20261130-235900"


@pytest.mark.parametrize(("value", "message"), [
    ("", "--out is empty; give a folder for the results (e.g. --out h200-run), or omit --out for "
         "./truepeak-moe-bench-YYYYmmdd-HHMMSS"),
    ("/dev/null", "--out /dev/null is an existing file, not a folder; choose a folder path for the results"),
    ("moe.jsonl", "--out moe.jsonl: --out is a folder, and the records go to results.jsonl inside it; give a folder, "
                  "e.g. --out moe"),
    ("runs/A.JSONL/", "--out runs/A.JSONL/: --out is a folder, and the records go to results.jsonl inside it; give a "
                      "folder, e.g. --out runs/A"),
])
def test_check_out_arg_refuses_what_cannot_be_a_results_folder(tmp_path, monkeypatch, value, message):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(TruepeakError) as info:
        R.check_out_arg(value, "moe bench")
    assert str(info.value) == message
    assert list(tmp_path.iterdir()) == []  # nothing created


def test_check_out_arg_accepts_folders_new_or_existing(tmp_path):
    (tmp_path / "old.jsonl").mkdir()  # a folder that happens to end in .jsonl: it is a folder, so it is accepted
    for ok in (None, tmp_path / "new", tmp_path / "old.jsonl", str(tmp_path)):
        R.check_out_arg(ok)
    assert R.make_out_dir(tmp_path / "a" / "b") == tmp_path / "a" / "b" and (tmp_path / "a" / "b").is_dir()


def test_an_oserror_writing_records_names_the_file(tmp_path):
    from truepeak.records import RecordWriter

    (tmp_path / "results.jsonl").mkdir()  # a folder where the file should be
    with pytest.raises(TruepeakError, match=r"cannot write records to .*results\.jsonl: Is a directory"):
        RecordWriter(tmp_path / "results.jsonl")
