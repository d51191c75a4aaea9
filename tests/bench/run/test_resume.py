"""--resume of truepeak run (truepeak/bench/run/resume.py, through run_main_job): finished cases skipped, bad
lines warned about, other settings, schemas and formats refused.

Timing is stubbed (``fake_timing``, tests/bench/run/conftest.py): every GEMM call "takes" 0.1 s and every copy
10 ms, on a CPU with a hand-set 100 GFLOP/s fp32 peak and a 16 MiB cache, so derived values are computed by hand.
"""

from __future__ import annotations

import dataclasses
import json

import pytest

torch = pytest.importorskip("torch")

from truepeak.bench import run as R  # noqa: E402
from truepeak.records import read_records  # noqa: E402
from truepeak.errors import TruepeakError  # noqa: E402


def _no_measuring(monkeypatch):
    def boom(*a, **k):
        raise AssertionError("measured before the output folder was checked")

    monkeypatch.setattr(R.runners, "run_gemm", boom)
    monkeypatch.setattr(R.runners, "run_copy", boom)
    monkeypatch.setattr(R.settle, "cpu_bf16_fast_enough", boom)


def test_resume_skips_finished_cases(tmp_path, cpu, monkeypatch, fake_timing):
    first = R.run_main_job(tmp_path, device=cpu, quick=True, progress=False)
    lines = len(read_records(first.records_path))

    def boom(*a, **k):
        raise AssertionError("a finished case ran again")

    monkeypatch.setattr(R.runners, "run_gemm", boom)
    monkeypatch.setattr(R.runners, "run_copy", boom)
    again = R.run_main_job(tmp_path, device=cpu, quick=True, resume=True, progress=False)
    assert len(read_records(again.records_path)) == lines
    assert again.records == first.records and again.resumed_keys == {r.key for r in first.records}


def test_resume_caps_the_warnings_about_many_bad_lines(tmp_path, cpu, fake_timing):
    first = R.run_main_job(tmp_path, device=cpu, quick=True, progress=False)
    path = first.records_path
    n = len(path.read_bytes().splitlines())
    with open(path, "ab") as f:
        f.write(b"[0]\n" * 12)  # 12 lines that are JSON lists, not records
    warnings: list[str] = []
    R.run_main_job(tmp_path, device=cpu, quick=True, resume=True, progress=False, warn=warnings.append)
    assert warnings == [*(f"{path} line {n + i} is not a valid record and is ignored: a JSON list, not an object"
                          for i in range(1, 6)),
                        f"... and 7 more like this ({path}: a JSON list, not an object)"]


def test_resume_reads_the_results_file_once(tmp_path, cpu, monkeypatch, fake_timing):
    R.run_main_job(tmp_path, device=cpu, quick=True, progress=False)
    reads = []
    from truepeak.bench import outdir
    real = outdir.read_records
    monkeypatch.setattr(outdir, "read_records", lambda *a, **k: reads.append(a) or real(*a, **k))
    R.run_main_job(tmp_path, device=cpu, quick=True, resume=True, progress=False)
    assert len(reads) == 1


def test_resume_warns_about_bad_lines_and_continues_on_a_fresh_line(tmp_path, cpu, fake_timing):
    first = R.run_main_job(tmp_path, device=cpu, quick=True, progress=False)
    path = first.records_path
    lines = path.read_bytes().splitlines()
    # drop the last record and leave a malformed line and a torn tail, as a crash mid-write would
    path.write_bytes(b"\n".join(lines[:-1]) + b'\n[1, 2]\n{"key": "gemm|torn')
    warnings: list[str] = []
    again = R.run_main_job(tmp_path, device=cpu, quick=True, resume=True, progress=False, warn=warnings.append)
    n = len(lines)
    assert warnings == [
        f"{path} line {n} is not a valid record and is ignored: a JSON list, not an object",
        f"{path} line {n + 1} is not a valid record and is ignored: not valid JSON: Unterminated string starting at "
        "(column 9)",
    ]
    recs = read_records(path, strict=False)
    assert recs.bad_lines == [n, n + 1]  # the bad lines stay, nothing else is lost
    assert [r.key for r in recs] == [r.key for r in first.records]  # the missing case ran again, on its own line
    assert len(again.resumed_keys) == n - 1
    assert again.records[-1].key not in again.resumed_keys


def test_resume_refuses_records_made_with_other_settings(tmp_path, cpu, monkeypatch, fake_timing):
    R.run_main_job(tmp_path, device=cpu, quick=True, progress=False)
    _no_measuring(monkeypatch)
    with pytest.raises(TruepeakError, match=r"cannot --resume .*different settings: quick \(there: True, now: False\); "
                                            r"rerun with the same options"):
        R.run_main_job(tmp_path, device=cpu, quick=False, resume=True, progress=False)
    other = dataclasses.replace(cpu, name="Another CPU")
    with pytest.raises(TruepeakError, match=r"device_name \(there: .*, now: Another CPU\)"):
        R.run_main_job(tmp_path, device=other, quick=True, resume=True, progress=False)


def test_resume_refuses_records_of_another_schema(tmp_path, cpu, monkeypatch):
    _no_measuring(monkeypatch)
    (tmp_path / "results.jsonl").write_text(json.dumps({"schema_version": 1, "key": "k", "status": "ok"}) + "\n")
    with pytest.raises(TruepeakError, match=r"cannot --resume .*schema version 1, and this truepeak writes version 3 "
                                            r"only; choose another --out"):
        R.run_main_job(tmp_path, device=cpu, quick=True, resume=True, progress=False)


def test_resume_refuses_a_file_of_the_previous_schema_that_reading_migrates(tmp_path, cpu, monkeypatch, fake_timing):
    """A schema-2 file reads (it is migrated), but --resume would append schema-3 lines to it: refused."""
    first = R.run_main_job(tmp_path, device=cpu, quick=True, progress=False)
    lines = first.records_path.read_text().splitlines()
    old = json.loads(lines[0])
    old.update(schema_version=2, correctness={"check": old["correctness"]["reference"], "passed": True})
    first.records_path.write_text("\n".join([json.dumps(old), *lines[1:]]) + "\n")
    assert read_records(first.records_path).migrated == [(1, 2)]
    _no_measuring(monkeypatch)
    with pytest.raises(TruepeakError, match=r"cannot --resume .*: line 1 has schema version 2, and this truepeak "
                                            r"writes version 3 only; choose another --out"):
        R.run_main_job(tmp_path, device=cpu, quick=True, resume=True, progress=False)


@pytest.mark.parametrize("what", ["missing folder", "empty folder"])
def test_resume_with_nothing_to_resume_is_an_error_and_creates_nothing(tmp_path, cpu, monkeypatch, what):
    _no_measuring(monkeypatch)
    out = tmp_path / "NOPE"
    if what == "empty folder":
        out.mkdir()
    with pytest.raises(TruepeakError) as info:
        R.run_main_job(out, device=cpu, quick=True, resume=True, progress=False)
    assert str(info.value) == (f"--resume: no results.jsonl in {out} to resume; drop --resume to start a new run "
                               "there")
    assert out.exists() == (what == "empty folder") and not (out / "results.jsonl").exists()


def test_resume_refuses_a_file_with_a_record_of_another_schema_on_any_line(tmp_path, cpu, monkeypatch, fake_timing):
    first = R.run_main_job(tmp_path, device=cpu, quick=True, progress=False)
    with open(first.records_path, "a", encoding="utf-8") as f:
        f.write(json.dumps({"schema_version": 9, "key": "k", "status": "ok"}) + "\n")
    _no_measuring(monkeypatch)
    n = len(first.records) + 1
    with pytest.raises(TruepeakError, match=rf"cannot --resume .*: line {n} has schema version 9, and this truepeak "
                                            r"writes version 3 only; choose another --out"):
        R.run_main_job(tmp_path, device=cpu, quick=True, resume=True, progress=False)


def test_resume_without_formats_continues_with_the_recorded_ones(tmp_path, cpu, monkeypatch, fake_timing,
                                                                   interrupt_gemm):
    """A --formats bf16 run, interrupted and resumed without --formats, measures bf16 only (it used to add the
    default fp32 cases)."""
    with monkeypatch.context() as mp:
        interrupt_gemm(mp, 2)  # Ctrl-C at the second GEMM case
        with pytest.raises(R.RunInterrupted):
            R.run_main_job(tmp_path, device=cpu, formats=["bf16"], quick=True, progress=False)
    first = read_records(tmp_path / "results.jsonl")
    assert [r.format for r in first] == [None, "bf16"]
    assert first[1].run_config["formats"] == ["bf16"] and first[1].run_config["formats_given"] is True
    again = R.run_main_job(tmp_path, device=cpu, quick=True, resume=True, progress=False)
    assert [r.format for r in again.records] == [None, "bf16", "bf16", "bf16"]
    assert {r.format for r in read_records(again.records_path)} == {None, "bf16"}
    assert len(again.resumed_keys) == 2
    assert all(r.run_config["formats"] == ["bf16"] for r in read_records(again.records_path))


def test_resume_with_other_formats_is_refused_naming_both(tmp_path, cpu, monkeypatch, fake_timing):
    R.run_main_job(tmp_path, device=cpu, formats=["bf16"], quick=True, progress=False)
    _no_measuring(monkeypatch)
    with pytest.raises(TruepeakError) as info:
        R.run_main_job(tmp_path, device=cpu, formats=["fp32", "bf16"], quick=True, resume=True, progress=False)
    message = str(info.value)
    assert "\n" not in message
    assert "different settings: formats (there: bf16, now: fp32,bf16); rerun with the same options" in message


def test_resume_with_the_same_formats_in_another_order_continues(tmp_path, cpu, monkeypatch, fake_timing):
    first = R.run_main_job(tmp_path, device=cpu, formats=["fp32", "bf16"], quick=True, progress=False)
    monkeypatch.setattr(R.runners, "run_gemm", lambda *a, **k: pytest.fail("a finished case ran again"))
    again = R.run_main_job(tmp_path, device=cpu, formats=["bf16", "fp32"], quick=True, resume=True, progress=False)
    assert again.resumed_keys == {r.key for r in first.records}


def test_resume_of_records_without_recorded_formats_uses_the_defaults(tmp_path, cpu, monkeypatch, fake_timing):
    """Records written before run_config held the formats are continued as before (the defaults; no check)."""
    first = R.run_main_job(tmp_path, device=cpu, quick=True, progress=False)
    path = first.records_path
    old = []
    for rec in read_records(path):
        cfg = {k: v for k, v in rec.run_config.items() if k not in ("formats", "formats_given")}
        old.append(json.dumps({**rec.to_dict(), "run_config": cfg}))
    path.write_text("\n".join(old) + "\n")
    assert R.recorded_formats(read_records(path)) is None
    monkeypatch.setattr(R.runners, "run_gemm", lambda *a, **k: pytest.fail("a finished case ran again"))
    again = R.run_main_job(tmp_path, device=cpu, quick=True, resume=True, progress=False)
    assert again.resumed_keys == {r.key for r in first.records}
