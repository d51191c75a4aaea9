"""Records files: JSON Lines round trip, crash safety, --resume keys, malformed lines, other schema versions, gzip, and
the cap on repeated warnings."""

from __future__ import annotations

import gzip
import json
import os
import subprocess
import sys

import pytest

import truepeak
from truepeak.errors import TruepeakError
from truepeak.records import (REPEAT_LIMIT, Correctness, GemmMetrics, GemmWorkload, MeasurementSummary, RecordWriter,
                              cap_repeats, done_keys, make_record, problem_kind, problem_warnings, read_records)

ENV = {"gpu": {"name": "NVIDIA H200"}, "command_line": "truepeak run"}
MEASUREMENT = MeasurementSummary(mode="sustained", steady_median_s=199.44e-3, median_s=202.42e-3,
                                 samples_s=(581.81e-3, 202.42e-3, 196.46e-3))


def ok_record(label="8192x8192x8192", fmt="bf16", **kw):
    return make_record(workload=GemmWorkload(label=label, m=8192, n=8192, k=8192), backend="torch", format=fmt,
                       measurement=MEASUREMENT, status="ok", correctness=Correctness(passed=True),
                       derived=GemmMetrics(flop_per_s=677.1e12, bytes_per_s=1e9, dense_fraction=0.684), env=ENV,
                       key=f"gemm|{label}|torch|{fmt}|sustained", **kw)


def other_record(status, fmt="nvfp4", reason="r"):
    return make_record(workload=GemmWorkload(label="8192x8192x8192", m=8192, n=8192, k=8192), backend="torch",
                       format=fmt, measurement=None, status=status, reason=reason, env=ENV, mode="sustained",
                       key=f"gemm|8192x8192x8192|torch|{fmt}|sustained")


def test_round_trip(tmp_path):
    path = tmp_path / "sub" / "results.jsonl"
    records = [ok_record(), ok_record(fmt="fp8_e4m3"), other_record("failed", "bf16", "CUDA out of memory")]
    with RecordWriter(path) as w:
        for r in records:
            w.write(r)
    back = read_records(path)
    assert back == records and back.bad_lines == [] and back.migrated == []
    assert back[0].measurement.samples_s == (581.81e-3, 202.42e-3, 196.46e-3)
    assert path.read_text().count("\n") == 3
    line = json.loads(path.read_text().splitlines()[0])
    assert line["schema_version"] == truepeak.SCHEMA_VERSION == 3 and line["time_s"] == 199.44e-3


def test_the_writer_takes_records_only(tmp_path):
    with RecordWriter(tmp_path / "r.jsonl") as w, pytest.raises(TruepeakError, match="must be a truepeak.records.Record"):
        w.write({"schema_version": 3, "key": "k", "status": "ok"})


def test_crash_safety_readable_while_writer_open(tmp_path):
    path = tmp_path / "r.jsonl"
    w = RecordWriter(path)
    w.write(ok_record())
    # another process reads the file while the writer is still open: the record is already on disk
    code = "import json,sys; print(len([json.loads(l) for l in open(sys.argv[1]) if l.strip()]))"
    out = subprocess.run([sys.executable, "-c", code, str(path)], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "1"
    assert len(read_records(path)) == 1
    w.write(ok_record(fmt="fp16"))
    assert len(read_records(path)) == 2
    w.close()
    with pytest.raises(TruepeakError, match="closed"):
        w.write(ok_record())


def test_resume_keys_and_torn_last_line(tmp_path):
    path = tmp_path / "r.jsonl"
    assert done_keys(path) == set()
    with RecordWriter(path) as w:
        w.write(ok_record())
        w.write(other_record("skipped", "nvfp4", "no FP4 on sm_90"))
        w.write(other_record("failed", "fp16", "OOM"))
        assert w.done_keys() == {"gemm|8192x8192x8192|torch|bf16|sustained",
                                 "gemm|8192x8192x8192|torch|nvfp4|sustained"}  # failed cases are retried
    # simulate a crash in the middle of a write
    with open(path, "ab") as f:
        f.write(b'{"key": "gemm|torn')
    assert len(done_keys(path)) == 2
    with pytest.raises(TruepeakError, match=r"r\.jsonl, line 4: malformed record"):
        read_records(path)
    # resuming appends on a fresh line; the torn line stays reported, nothing else is lost
    with RecordWriter(path) as w:
        w.write(ok_record(fmt="fp16"))
    recs = read_records(path, strict=False)
    assert recs.bad_lines == [4] and recs.line_numbers == [1, 2, 3, 5]
    assert [r.format for r in recs] == ["bf16", "nvfp4", "fp16", "fp16"]
    assert "gemm|8192x8192x8192|torch|fp16|sustained" in done_keys(path)


def test_malformed_line_messages(tmp_path):
    good = json.dumps(ok_record().to_dict())
    path = tmp_path / "bad.jsonl"
    path.write_text(f'{good}\n\n[1, 2]\nnot json\n{{"schema_version": 3, "kind": "gemm", "status": "ok"}}\n')
    with pytest.raises(TruepeakError) as e:
        read_records(path)
    msg = str(e.value)
    assert str(path) in msg and "line 3" in msg and "JSON list, not an object" in msg and "strict=False" in msg
    recs = read_records(path, strict=False)
    assert [r.key for r in recs] == [ok_record().key] and recs.bad_lines == [3, 4, 5]
    assert recs.problems[2] == (5, "field 'workload' is missing")
    with pytest.raises(TruepeakError, match="cannot read records file"):
        read_records(tmp_path / "missing.jsonl")


@pytest.mark.parametrize("version, found", [(1, "schema version 1"), (9, "schema version 9"),
                                            (None, "no schema_version"), ("2", 'schema version "2"'),
                                            (True, "schema version true")])
def test_a_record_of_another_schema_is_an_error_or_a_bad_line(tmp_path, version, found):
    """Strict: one line naming the file, the line and the versions understood; non-strict: a bad line (with the
    version found in ``other_schema``), the readable records kept."""
    path = tmp_path / "old.jsonl"
    other = {"key": "b", "status": "ok"} if version is None else {"schema_version": version, "key": "b", "status": "ok"}
    path.write_text(json.dumps(ok_record().to_dict()) + "\n" + json.dumps(other) + "\n")
    with pytest.raises(TruepeakError) as e:
        read_records(path)
    msg = str(e.value)
    assert msg.startswith(f"{path}, line 2: record of {found}; truepeak {truepeak.__version__} reads schema "
                          "versions 2 and 3")
    assert "\n" not in msg
    recs = read_records(path, strict=False)
    assert [r.key for r in recs] == [ok_record().key] and recs.bad_lines == [2]
    assert recs.other_schema == [(2, version)] and "reads schema versions 2 and 3" in recs.problems[0][1]


def test_gzip_files_read_as_plain_ones(tmp_path):
    """A compressed records file reads the same, whatever its name (the first bytes say gzip); appending to one is
    refused, and a damaged one names the file."""
    plain = tmp_path / "results.jsonl"
    with RecordWriter(plain) as w:
        w.write(ok_record())
        w.write(other_record("skipped", reason="no FP4 on sm_90"))
    packed = tmp_path / "results.jsonl.gz"
    packed.write_bytes(gzip.compress(plain.read_bytes()))
    assert read_records(packed) == read_records(plain)
    assert done_keys(packed) == done_keys(plain)
    with pytest.raises(TruepeakError, match=r"cannot append records to .*results\.jsonl\.gz: it is gzip-compressed"):
        RecordWriter(packed)
    (tmp_path / "cut.jsonl.gz").write_bytes(packed.read_bytes()[:20])
    with pytest.raises(TruepeakError, match=r"cut\.jsonl\.gz: a damaged gzip file"):
        read_records(tmp_path / "cut.jsonl.gz")


def test_writer_oserror_names_the_file(tmp_path, monkeypatch):
    path = tmp_path / "r.jsonl"
    with RecordWriter(path) as w:
        def disk_full(fd):
            raise OSError(28, "No space left on device")

        monkeypatch.setattr(os, "fsync", disk_full)
        with pytest.raises(TruepeakError, match=r"cannot write records to .*r\.jsonl: No space left on device"):
            w.write(ok_record())


def test_a_full_disk_is_one_error_not_a_second_one_from_close(tmp_path):
    """Regression: on a full disk the write's TruepeakError was followed by an OSError from close() (the unwritten
    buffer flushed again) as a traceback. A writer whose file object cannot flush stands in for the disk."""
    import io

    class FullDisk(io.RawIOBase):
        def writable(self):
            return True

        def write(self, b):
            raise OSError(28, "No space left on device")

    path = tmp_path / "r.jsonl"
    with pytest.raises(TruepeakError, match="No space left on device") as info:
        with RecordWriter(path) as w:
            w._f.close()
            w._f = io.BufferedWriter(FullDisk(), buffer_size=1 << 20)
            w._f.write(b"x" * 10)  # buffered, unwritten
            raise TruepeakError("cannot write records to r.jsonl: No space left on device (from write)")
    assert "(from write)" in str(info.value)
    w2 = RecordWriter(tmp_path / "s.jsonl")
    w2._f.close()
    w2._f = io.BufferedWriter(FullDisk(), buffer_size=1 << 20)
    w2._f.write(b"x" * 10)
    with pytest.raises(TruepeakError, match=r"cannot write records to .*s\.jsonl: No space left on device"):
        w2.close()


# -- the cap on repeated warnings --------------------------------------------------------------------------------------


@pytest.mark.parametrize(("why", "kind"), [
    ("not UTF-8 (invalid continuation byte)", "not UTF-8"),
    ("not valid JSON: Expecting value (column 1)", "not valid JSON"),
    ("a record of schema version 1; truepeak 0.1.0 reads schema versions 2 and 3", "a record of schema version 1"),
    ("a JSON list, not an object", "a JSON list, not an object"),
    ("field 'time_s' is a string, not a number", "field 'time_s' is a string, not a number"),
    ("field 'workload.m' is negative (-16)", "field 'workload.m' is negative"),
    ("empty file: no records", "empty file"),
])
def test_problem_kind_drops_the_details(why, kind):
    assert problem_kind(why) == kind


def test_cap_repeats_keeps_five_of_each_kind_then_counts_the_rest():
    items = [("a", f"a{i}") for i in range(12)] + [("b", "b0")] + [("c", f"c{i}") for i in range(6)]
    assert REPEAT_LIMIT == 5
    assert cap_repeats(items) == ["a0", "a1", "a2", "a3", "a4", "b0", "c0", "c1", "c2", "c3", "c4",
                                  "... and 7 more like this (a)", "... and 1 more like this (c)"]
    assert cap_repeats([("k", "m")] * 38_785, limit=5)[-1] == "... and 38,780 more like this (k)"
    assert cap_repeats([]) == []


def test_a_binary_file_read_as_records_gives_a_few_warnings_not_one_per_line(tmp_path):
    """Regression: `truepeak report` of a 10 MB binary file printed 38,786 warning lines. Here 3,000 lines that are
    not UTF-8 and 40 that are JSON numbers: 5 of each, then one line per kind counting the rest (2,995 and 35)."""
    path = tmp_path / "blob.jsonl"
    path.write_bytes(b"\xff\xfe\n" * 3000 + b"7\n" * 40)
    recs = read_records(path, strict=False)
    assert len(recs) == 0 and len(recs.problems) == 3040
    lines = problem_warnings(path, recs.problems, "{path}, line {line}: {why}")
    assert lines == [*(f"{path}, line {n}: not UTF-8 (invalid start byte)" for n in range(1, 6)),
                     *(f"{path}, line {n}: a JSON int, not an object" for n in range(3001, 3006)),
                     f"... and 2,995 more like this ({path}: not UTF-8)",
                     f"... and 35 more like this ({path}: a JSON int, not an object)"]
