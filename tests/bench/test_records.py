"""Records: validation, JSON Lines round trip, crash safety, --resume keys, malformed lines."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import pytest

import truepeak
from truepeak.bench.measurement import Measurement
from truepeak.bench.records import (
    REPEAT_LIMIT,
    RecordWriter,
    cap_repeats,
    done_keys,
    environment,
    make_record,
    problem_kind,
    problem_warnings,
    read_records,
    record_key,
)
from truepeak.errors import TruepeakError

ENV = {"gpu": {"name": "NVIDIA H200"}, "command_line": "truepeak run"}
M = Measurement(samples_s=(581.81e-3, 202.42e-3, 196.46e-3), mode="sustained")


def ok_record(workload="8192x8192x8192", fmt="bf16", **kw):
    return make_record(kind="gemm", workload=workload, backend="torch", format=fmt, measurement=M, status="ok",
                       derived={"flop_per_s": np.float64(677.1e12), "pct_dense": 0.684, "bad": float("nan")}, env=ENV, **kw)


def test_make_record_fields():
    r = ok_record(correctness={"max_rel_error": 1e-3, "passed": True})
    assert r["schema_version"] == truepeak.SCHEMA_VERSION and r["methodology_version"] == truepeak.METHODOLOGY_VERSION
    assert r["key"] == "gemm|8192x8192x8192|torch|bf16|sustained"
    assert r["status"] == "ok" and r["reason"] == "" and r["mode"] == "sustained"
    assert r["time_s"] == pytest.approx(199.44e-3)  # steady median, not the mean (C12)
    assert r["measurement"]["samples_s"] == list(M.samples_s)
    assert r["warnings"] == M.warnings
    assert r["derived"] == {"flop_per_s": 677.1e12, "pct_dense": 0.684, "bad": None}  # numpy -> float, NaN -> null
    assert r["timestamp"].endswith("Z") and "T" in r["timestamp"]
    assert r["env"] == ENV
    json.dumps(r, allow_nan=False)


def test_key_is_stable_and_dict_workloads_are_canonical():
    a = record_key("gemm", {"m": 16, "n": 4096, "k": 6144}, "torch", "nvfp4", "burst")
    b = record_key("gemm", {"k": 6144, "n": 4096, "m": 16}, "torch", "nvfp4", "burst")
    assert a == b == 'gemm|{"k":6144,"m":16,"n":4096}|torch|nvfp4|burst'
    assert record_key("membw", "copy 1 GiB", None, None, "sustained") == "membw|copy 1 GiB|-|-|sustained"


def test_skipped_record_needs_reason_and_gets_the_case_key():
    with pytest.raises(TruepeakError, match="reason"):
        make_record(kind="gemm", workload="x", backend="torch", format="nvfp4", measurement=None, status="skipped",
                    env=ENV)
    r = make_record(kind="gemm", workload="8192x8192x8192", backend="torch", format="nvfp4", measurement=None,
                    status="skipped", reason="nvfp4 needs sm_100 or newer; this GPU is sm_90", env=ENV,
                    mode="sustained")
    assert r["key"] == "gemm|8192x8192x8192|torch|nvfp4|sustained"
    assert r["measurement"] is None and r["time_s"] is None


def test_status_validation():
    with pytest.raises(TruepeakError, match="ok, skipped, failed"):
        make_record(kind="gemm", workload="x", backend="t", format="bf16", measurement=M, status="done", env=ENV)
    with pytest.raises(TruepeakError, match="needs a measurement"):
        make_record(kind="gemm", workload="x", backend="t", format="bf16", measurement=None, status="ok", env=ENV)
    with pytest.raises(TruepeakError, match="reason"):
        make_record(kind="gemm", workload="x", backend="t", format="bf16", measurement=M, status="failed", env=ENV,
                    reason="  ")
    with pytest.raises(TruepeakError, match="contradicts"):
        make_record(kind="gemm", workload="x", backend="t", format="bf16", measurement=M, status="ok", env=ENV,
                    mode="burst")
    with pytest.raises(TruepeakError, match="cannot store"):
        make_record(kind="gemm", workload=object(), backend="t", format="bf16", measurement=M, status="ok", env=ENV)


def test_round_trip(tmp_path):
    path = tmp_path / "sub" / "results.jsonl"
    records = [ok_record(), ok_record(fmt="fp8_e4m3"),
               make_record(kind="gemm", workload="x", backend="torch", format="bf16", measurement=None,
                           status="failed", reason="CUDA out of memory", env=ENV, mode="sustained")]
    with RecordWriter(path) as w:
        for r in records:
            w.write(r)
    back = read_records(path)
    assert back == records and back.bad_lines == []
    assert Measurement.from_dict(back[0]["measurement"]) == M
    assert path.read_text().count("\n") == 3


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
        w.write(make_record(kind="gemm", workload="8192x8192x8192", backend="torch", format="nvfp4",
                            measurement=None, status="skipped", reason="no FP4 on sm_90", env=ENV, mode="sustained"))
        w.write(make_record(kind="gemm", workload="8192x8192x8192", backend="torch", format="fp16",
                            measurement=None, status="failed", reason="OOM", env=ENV, mode="sustained"))
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
    assert recs.bad_lines == [4]
    assert [r["format"] for r in recs] == ["bf16", "nvfp4", "fp16", "fp16"]
    assert "gemm|8192x8192x8192|torch|fp16|sustained" in done_keys(path)


def test_malformed_line_messages(tmp_path):
    path = tmp_path / "bad.jsonl"
    path.write_text('{"schema_version": 2, "key": "a", "status": "ok"}\n\n[1, 2]\nnot json\n')
    with pytest.raises(TruepeakError) as e:
        read_records(path)
    msg = str(e.value)
    assert str(path) in msg and "line 3" in msg and "JSON list, not an object" in msg and "strict=False" in msg
    recs = read_records(path, strict=False)
    assert recs == [{"schema_version": 2, "key": "a", "status": "ok"}] and recs.bad_lines == [3, 4]
    with pytest.raises(TruepeakError, match="cannot read records file"):
        read_records(tmp_path / "missing.jsonl")


def test_environment_never_fails_and_records_command_line():
    env = environment(["truepeak", "run", "--shape", "8192x8192x8192", "my file"], device=None)
    assert env["truepeak_version"] == truepeak.__version__
    assert env["python"] and env["command_line"] == "truepeak run --shape 8192x8192x8192 'my file'"
    assert env["gpu"] is None
    json.dumps(env)
    full = environment([])  # with whatever torch/GPU this machine has
    assert "torch" in full and "gpu" in full and "cudnn" in full and "nccl" in full and "triton" in full
    json.dumps(full)


def test_make_record_computes_the_environment_once_when_not_given():
    a = make_record(kind="gemm", workload="x", backend="t", format="bf16", measurement=M, status="ok")
    b = make_record(kind="gemm", workload="y", backend="t", format="bf16", measurement=M, status="ok")
    assert a["env"]["truepeak_version"] == truepeak.__version__ and a["env"] == b["env"]


def test_environment_hides_secret_looking_variables(monkeypatch):
    monkeypatch.setenv("NCCL_DEBUG", "INFO")
    monkeypatch.setenv("NCCL_API_TOKEN", "do-not-record")
    env = environment([], device=None)
    assert env["env_vars"]["NCCL_DEBUG"] == "INFO" and "NCCL_API_TOKEN" not in env["env_vars"]


@pytest.mark.gpu
def test_environment_on_a_gpu():
    env = environment(["truepeak", "run"])
    gpu = env["gpu"]
    assert gpu["name"] and gpu["compute_capability"].count(".") == 1 and gpu["sm_count"] > 0
    assert gpu["l2_bytes"] > 0 and gpu["memory_bytes"] > 0
    assert env["cuda"] and env["torch"]
    assert gpu["driver"] is None or isinstance(gpu["driver"], str)
    json.dumps(env)


def test_records_are_converted_to_json_data_once(tmp_path, monkeypatch):
    from truepeak.bench import records as rec_mod

    record = ok_record(rotation={"n_sets": 4, "capped": False})
    assert record["rotation"] == {"n_sets": 4, "capped": False}
    calls = []
    real = rec_mod._jsonable
    monkeypatch.setattr(rec_mod, "_jsonable", lambda obj: calls.append(1) or real(obj))
    with RecordWriter(tmp_path / "r.jsonl") as w:
        w.write(record)  # from make_record: already JSON data, dumped as it is
        assert calls == []
        w.write({"schema_version": 2, "key": "k", "status": "ok", "x": np.float32(0.5),
                 "y": float("nan")})  # anything else: converted
        assert len(calls) >= 1
    assert read_records(tmp_path / "r.jsonl")[1] == {"schema_version": 2, "key": "k", "status": "ok", "x": 0.5,
                                                     "y": None}


def test_make_record_keeps_the_run_config():
    rec = make_record(kind="gemm", workload="8x8x8", backend="torch", format="bf16", measurement=None,
                      status="skipped", reason="r", env=ENV, mode="cpu", run_config={"quick": True, "device": "cpu"})
    assert rec["run_config"] == {"quick": True, "device": "cpu"}
    assert make_record(kind="gemm", workload="8x8x8", backend="torch", format="bf16", measurement=None,
                       status="skipped", reason="r", env=ENV, mode="cpu")["run_config"] is None


def test_writer_oserror_names_the_file(tmp_path, monkeypatch):
    path = tmp_path / "r.jsonl"
    with RecordWriter(path) as w:
        def disk_full(fd):
            raise OSError(28, "No space left on device")

        monkeypatch.setattr(os, "fsync", disk_full)
        with pytest.raises(TruepeakError, match=r"cannot write records to .*r\.jsonl: No space left on device"):
            w.write(ok_record())


def test_environment_reads_nvml_through_the_shared_session(monkeypatch):
    """The driver, power limit and max SM clock come from truepeak.hardware.nvml (one nvmlInit per process, facts
    read once per device), never from an nvmlInit/nvmlShutdown pair of its own, which would tear down the session the
    telemetry samplers share."""
    import types

    from truepeak.bench.records import _nvml_info
    from truepeak.hardware import nvml

    calls = {"init": 0, "shutdown": 0, "power": 0}

    def init():
        calls["init"] += 1

    def shutdown():
        calls["shutdown"] += 1

    def power(h):
        calls["power"] += 1
        return 700_000

    fake = types.SimpleNamespace(
        nvmlInit=init, nvmlShutdown=shutdown, NVML_CLOCK_SM=1,
        nvmlSystemGetDriverVersion=lambda: b"580.95.05",
        nvmlDeviceGetHandleByIndex=lambda i: ("handle", i),
        nvmlDeviceGetEnforcedPowerLimit=power,
        nvmlDeviceGetMaxClockInfo=lambda h, kind: 1980,
        nvmlDeviceGetName=lambda h: b"NVIDIA H200",
    )
    monkeypatch.setitem(sys.modules, "pynvml", fake)
    nvml.clear_cache()
    try:
        for _ in range(3):
            assert _nvml_info(0) == {"driver": "580.95.05", "power_limit_w": 700.0, "max_sm_clock_hz": 1980e6}
        assert calls == {"init": 1, "shutdown": 0, "power": 1}
    finally:
        nvml.clear_cache()


def test_record_warnings_follow_the_measurements():
    noisy = Measurement(samples_s=(0.01, 0.02, 0.01, 0.03, 0.01, 0.025, 0.012), mode="cpu")
    r = make_record(kind="gemm", workload="1x4096x7168", backend="torch", format="fp32", measurement=noisy,
                    status="ok", env=ENV, warnings=["104.5 % of the roofline: ..."])
    assert r["warnings"] == [*noisy.warnings, "104.5 % of the roofline: ..."]
    assert r["measurement"]["warnings"] == noisy.warnings
    assert ok_record()["warnings"] == M.warnings


@pytest.mark.parametrize("version, found", [(1, "schema version 1"), (9, "schema version 9"),
                                            (None, "no schema_version"), ("2", 'schema version "2"'),
                                            (True, "schema version true")])
def test_a_record_of_another_schema_is_an_error_or_a_bad_line(tmp_path, version, found):
    """Strict: one line naming the file, the line and the version understood; non-strict: a bad line (with the version
    found in ``other_schema``), the current-schema records kept."""
    path = tmp_path / "old.jsonl"
    other = {"key": "b", "status": "ok"} if version is None else {"schema_version": version, "key": "b", "status": "ok"}
    with RecordWriter(path) as w:
        w.write(ok_record())
        w.write(other)
    with pytest.raises(TruepeakError) as e:
        read_records(path)
    msg = str(e.value)
    assert msg.startswith(f"{path}, line 2: record of {found}; truepeak {truepeak.__version__} reads schema "
                          f"version {truepeak.SCHEMA_VERSION} only")
    assert "\n" not in msg
    recs = read_records(path, strict=False)
    assert [r["key"] for r in recs] == [ok_record()["key"]] and recs.bad_lines == [2]
    assert recs.other_schema == [(2, version)] and "reads schema version 2 only" in recs.problems[0][1]


# -- the cap on repeated warnings --------------------------------------------------------------------------------------


@pytest.mark.parametrize(("why", "kind"), [
    ("not UTF-8 (invalid continuation byte)", "not UTF-8"),
    ("not valid JSON: Expecting value (column 1)", "not valid JSON"),
    ("a record of schema version 1; truepeak 0.1.0 reads schema version 2 only", "a record of schema version 1"),
    ("a JSON list, not an object", "a JSON list, not an object"),
    ("field 'time_s' is a string, not a number", "field 'time_s' is a string, not a number"),
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
