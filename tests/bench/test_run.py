"""The main job: the sweep as data, records written as cases finish, failures as data, --resume, Ctrl-C.

Timing is stubbed (``fake_timing``): every GEMM call "takes" :data:`GEMM_S` and every copy :data:`COPY_S`, on a CPU
with a hand-set 100 GFLOP/s fp32 peak and a 16 MiB cache, so derived values are computed by hand and nothing depends
on this machine's speed. The GEMMs and their correctness checks still run for real (they are small). The one real run,
end to end, is in tests/cli/test_run.py.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import json

import pytest

torch = pytest.importorskip("torch")

import truepeak  # noqa: E402
from truepeak.bench import gemm as G  # noqa: E402
from truepeak.bench import membw  # noqa: E402
from truepeak.bench import run as R  # noqa: E402
from truepeak.bench.measurement import Measurement  # noqa: E402
from truepeak.records import read_records  # noqa: E402
from truepeak.efficiency import derived_metrics  # noqa: E402
from truepeak.errors import TruepeakError  # noqa: E402
from truepeak.hardware.catalog import Peak, Sourced  # noqa: E402
from truepeak.hardware.detect import cuda_device_info, detect_cpu  # noqa: E402
from truepeak.roofline import Copy  # noqa: E402

RECORD_FIELDS = {"schema_version", "methodology_version", "key", "kind", "status", "reason", "workload", "backend",
                 "format", "mode", "time_s", "measurement", "correctness", "derived", "env", "run_config", "rotation",
                 "timestamp"}
GEMM_S = 0.1  # every stubbed GEMM call takes 0.1 s
COPY_S = 0.01  # every stubbed copy takes 10 ms
PEAK = 100e9  # the test CPU's fp32 peak, FLOP/s


def _h200():
    return cuda_device_info("NVIDIA H200", "9.0", sm_count=132, l2_bytes=62914560, smem_per_block_bytes=232448,
                            max_sm_clock_hz=1980e6, memory_bytes=150 * 10**9, index=0)


@pytest.fixture(scope="module")
def host():
    return detect_cpu()


@pytest.fixture(scope="module")
def cpu(host):
    """This CPU with a 16 MiB cache (quick copy: 32 MiB) and a 100 GFLOP/s fp32 peak without a maximum clock."""
    acc = dataclasses.replace(host.accelerator, peaks=(Peak("fp32", "fp32", PEAK, None, "test"),), max_clock_hz=None)
    return dataclasses.replace(host, l2_bytes=16 * 2**20, accelerator=acc)


@pytest.fixture
def fake_timing(monkeypatch, stub_timing):
    stub_timing(monkeypatch, gemm_s=GEMM_S, copy_s=COPY_S)


@pytest.fixture(scope="module")
def quick_run(tmp_path_factory, cpu, stub_timing):
    """One stubbed quick run shared by the read-only checks."""
    out = tmp_path_factory.mktemp("quick")
    with pytest.MonkeyPatch.context() as mp:
        stub_timing(mp, gemm_s=GEMM_S, copy_s=COPY_S)
        return R.run_main_job(out, device=cpu, quick=True, progress=False, argv=["truepeak", "run", "--quick"])


# -- the sweep as data ---------------------------------------------------------------------------------------------------


def test_default_gpu_sweep():
    dev = _h200()
    cases = R.plan_cases(dev, R.default_formats(dev))
    assert cases[0].kind == "membw" and cases[0].nbytes == 2 * 2**30 and cases[0].label == "copy 2 GiB"
    gemms = [c for c in cases if c.kind == "gemm" and not c.skip_reason]
    # 9 decode M x 2 model shapes + 2 squares, for each of 10 variants: fp32, tf32, bf16, fp16, fp8_e4m3 (tensor,
    # row, 128-block scales), fp8_e5m2 (tensor, row; e4m3 x e5m2), int8
    assert len(gemms) == 10 * (9 * 2 + 2)
    assert [(c.format, c.scaling) for c in gemms[::20]] == [
        ("fp32", None), ("tf32", None), ("bf16", None), ("fp16", None), ("fp8_e4m3", "tensor"), ("fp8_e4m3", "row"),
        ("fp8_e4m3", "block128"), ("fp8_e5m2", "tensor"), ("fp8_e5m2", "row"), ("int8", None)]
    assert {c.mode for c in gemms} == {""}  # sustained, keyed as before --mode existed
    shapes = {(c.m, c.n, c.k) for c in gemms}
    assert (1, 4096, 7168) in shapes and (256, 7168, 2048) in shapes and (8192, 8192, 8192) in shapes
    assert {c.m for c in gemms if c.n == 4096 and c.k == 7168} == set(R.DECODE_M)
    probes = {c.format: c.skip_reason for c in cases if c.skip_reason}
    assert probes == {f: f"{f} GEMM needs sm_100 or sm_120; this device is sm_90" for f in ("mxfp8", "nvfp4", "mxfp4")}
    assert all(c.large for c in gemms if c.m == c.n == c.k)


def test_default_cpu_sweep(cpu):
    cases = R.plan_cases(cpu, R.default_formats(cpu))
    assert [c.kind for c in cases].count("membw") == 1
    assert {c.format for c in cases if c.kind == "gemm"} == {"fp32", "bf16"}
    assert {(c.m, c.n, c.k) for c in cases if c.large} == {(1024, 1024, 1024), (2048, 2048, 2048)}
    assert R.default_formats(cpu, quick=True) == ["fp32"]
    skipped = R.plan_cases(cpu, ["fp32", "bf16"], format_skips={"bf16": "too slow here"})
    assert [c.skip_reason for c in skipped if c.format == "bf16"] == ["too slow here"]


def test_quick_cpu_sweep_is_small(cpu):
    cases = R.plan_cases(cpu, ["fp32"], quick=True)
    assert len(cases) <= 5
    assert all(c.m * c.n * c.k <= 2**26 for c in cases if c.kind == "gemm")


def test_default_budgets():
    assert R.default_budgets(_h200()) is R.GPU_BUDGETS and R.default_budgets(_h200(), quick=True) is R.QUICK_GPU_BUDGETS
    cpu = dataclasses.replace(_h200(), kind="cpu")
    assert R.default_budgets(cpu) is R.CPU_BUDGETS and R.default_budgets(cpu, quick=True) is R.QUICK_BUDGETS


def test_fp8_workloads_count_their_per_tensor_scales():
    w = R.Case("gemm", "fp8_e4m3", 16, 64, 32).workload()
    # A 16x32 + B 64x32 in 1 byte, C 16x64 in bf16, two fp32 scales
    assert w.scaling == "tensor" and w.min_bytes == 16 * 32 + 64 * 32 + 2 * 16 * 64 + 8
    assert R.Case("gemm", "bf16", 16, 64, 32).workload().scaling is None


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


def test_case_keys_are_unique_and_stable(cpu):
    cases = R.plan_cases(cpu, ["fp32", "bf16"])
    keys = [R.case_key(c, cpu) for c in cases]
    assert len(set(keys)) == len(keys)
    assert keys == [R.case_key(c, cpu) for c in R.plan_cases(cpu, ["fp32", "bf16"])]


def test_run_config_states_the_method():
    cfg = R.run_config(_h200(), False, R.GPU_BUDGETS)
    assert cfg["settle"] == {"format": "bf16", "shape": "8192x8192x8192", "seconds": 3.0}
    assert cfg["graph_threshold_s"] == 50e-6
    assert cfg["budget_settings"]["large_budget_s"] == 1.0 and cfg["budgets"] == "gpu"
    volta = cuda_device_info("Tesla V100-SXM2-32GB", "7.0", sm_count=80, l2_bytes=6 * 2**20,
                             smem_per_block_bytes=None, max_sm_clock_hz=None, memory_bytes=None)
    assert R.run_config(volta, False, R.GPU_BUDGETS)["settle"]["format"] == "fp16"  # no bf16 before sm_80


def test_gpu_rotation_is_capped_by_free_memory(monkeypatch):
    # bf16 4096^3: 3 x 32 MiB = 100,663,296 B a set; 2x the 60 MiB L2 wants 2 sets; 150 MB free (+ 10 MB cached by
    # torch) x 0.8 holds 1
    monkeypatch.setattr(torch.cuda, "mem_get_info", lambda i=0: (150_000_000, 150 * 10**9))
    monkeypatch.setattr(torch.cuda, "memory_reserved", lambda i=0: 30_000_000)
    monkeypatch.setattr(torch.cuda, "memory_allocated", lambda i=0: 20_000_000)
    plan = R.runners.plan_case_rotation(R.Case("gemm", "bf16", 4096, 4096, 4096), _h200())
    assert (plan.n_sets, plan.wanted_sets, plan.capped) == (1, 2, True)
    assert "160,000,000 B free GPU memory holds 1 sets" in plan.note
    record = R.runners.rotation_record(plan)
    assert record.capped is True and record.cold is False and record.total_bytes == 100_663_296


# -- a stubbed quick run -------------------------------------------------------------------------------------------------


def test_quick_run_writes_one_record_per_case(quick_run):
    res = quick_run
    on_disk = read_records(res.records_path)
    assert len(on_disk) == len(res.records) == 4
    assert on_disk == res.records
    assert not (res.out_dir / "summary.md").exists()  # rendering is the caller's (truepeak.report)
    for rec in on_disk:
        assert RECORD_FIELDS <= set(rec.to_dict())
        assert rec.source_schema == rec.to_dict()["schema_version"] == truepeak.SCHEMA_VERSION == 3
        assert rec.status == "ok", rec.reason
        assert rec.mode == "cpu"


def test_quick_copy_record(quick_run):
    copy = quick_run.records[0]
    assert copy.workload.to_dict() == {"label": "copy 32 MiB", "nbytes": 32 * 2**20, "bytes_moved": 64 * 2**20,
                                       "counting": "read + write"}
    assert copy.time_s == COPY_S
    assert copy.derived.bytes_per_s == pytest.approx(6_710_886_400)  # 2 x 32 MiB / 10 ms = 6.711 GB/s
    assert copy.derived.bandwidth_fraction is None  # a CPU has no catalog bandwidth
    assert copy.backend == "torch Tensor.copy_ (CPU)"


def test_quick_gemm_derived_values_by_hand(quick_run):
    # 1x1024x2048 fp32: 2 x 1 x 1024 x 2048 = 4,194,304 FLOP; A 8192 B + B 8,388,608 B + C 4096 B = 8,400,896 B
    rec = quick_run.records[1]
    w, d = rec.workload, rec.derived
    assert (w.flop, w.min_bytes) == (4_194_304, 8_400_896)
    assert d.flop_per_s == pytest.approx(41_943_040)       # 4,194,304 FLOP / 0.1 s
    assert d.bytes_per_s == pytest.approx(84_008_960)      # 8,400,896 B / 0.1 s
    assert d.dense_fraction == pytest.approx(41_943_040 / 100e9)
    assert d.dense_peak_flop_per_s == 100e9 and d.peak_source == "test" and d.peak_estimated is False
    # the roofline's memory ceiling is the measured copy, 6.711e9 B/s; intensity 0.4993 FLOP/B: memory-bound
    assert d.bandwidth_bytes_per_s == pytest.approx(6_710_886_400)
    assert d.bandwidth_source.startswith("measured: truepeak run copy bandwidth, copy 32 MiB")
    assert d.bound == "memory"
    assert d.attainable_flop_per_s == pytest.approx(6_710_886_400 * 4_194_304 / 8_400_896)  # 3.351e9
    assert d.roofline_fraction == pytest.approx(84_008_960 / 6_710_886_400)  # memory-bound: bytes/s over bandwidth
    assert d.at_clock_fraction is None and d.sm_clock_hz is None
    # 256^3: intensity 2 x 256^3 / (3 x 4 x 256^2) = 42.7 FLOP/B > ridge 100e9 / 6.711e9 = 14.9: compute-bound
    sq = quick_run.records[3].derived
    assert sq.bound == "compute" and sq.roofline_fraction == pytest.approx(2 * 256**3 / 0.1 / 100e9)
    assert not hasattr(d, "tflops") and not hasattr(d, "gbps")  # SI only


def test_quick_gemm_correctness_and_rotation(quick_run):
    rec = quick_run.records[1]
    c = rec.correctness
    assert c.passed is True and c.tolerance == 1e-5 and 0 <= c.rel_error <= 1e-5 and c.rows_checked == 1
    # ceil(2 x 16 MiB / 8,400,896 B) = 4 sets cover 2x the cache
    assert rec.rotation.to_dict() == {"n_sets": 4, "wanted_sets": 4, "bytes_per_set": 8_400_896, "l2_bytes": 16 * 2**20,
                               "capped": False, "note": "", "total_bytes": 33_603_584, "cold": True}
    assert rec.measurement.input_kind == "random"


def test_records_carry_the_run_config(quick_run):
    for rec in read_records(quick_run.records_path):
        cfg = rec.run_config
        assert {k: cfg[k] for k in R.RESUME_MUST_MATCH} == {"quick": True, "device": "cpu",
                                                             "device_name": quick_run.device.name, "budgets": "quick",
                                                             "formats": ["fp32"], "modes": ["cpu"]}
        assert cfg["formats_given"] is False  # the device's default formats
        assert cfg["budget_settings"] == dataclasses.asdict(R.QUICK_BUDGETS)
        assert cfg["settle"] is None and cfg["graph_threshold_s"] is None
    assert quick_run.resumed_keys == frozenset() and not quick_run.interrupted


def test_existing_results_need_resume(quick_run):
    with pytest.raises(TruepeakError, match="--resume"):
        R.run_main_job(quick_run.out_dir, device=quick_run.device, quick=True, progress=False)


# -- failures as data ----------------------------------------------------------------------------------------------------


def test_a_failing_case_is_a_failed_record_and_the_sweep_goes_on(tmp_path, cpu, monkeypatch, fake_timing):
    real_check = G.TorchGemm.check
    calls = {"n": 0}

    def flaky(self, rows=None):
        calls["n"] += 1
        if calls["n"] == 1:
            raise RuntimeError("CUDA out of memory. Tried to allocate 2.00 GiB")
        return real_check(self, rows)

    monkeypatch.setattr(G.TorchGemm, "check", flaky)
    res = R.run_main_job(tmp_path, device=cpu, quick=True, progress=False)
    statuses = [r.status for r in res.records]
    assert statuses == ["ok", "failed", "ok", "ok"]
    assert res.records[1].reason == "out of memory: CUDA out of memory. Tried to allocate 2.00 GiB"
    # failed cases are retried by --resume
    monkeypatch.setattr(G.TorchGemm, "check", real_check)
    again = R.run_main_job(tmp_path, device=cpu, quick=True, resume=True, progress=False)
    assert [r.status for r in R.latest_records(again.records)] == ["ok"] * 4
    assert len(again.resumed_keys) == 3


def test_a_wrong_result_fails_its_check(tmp_path, cpu, monkeypatch, fake_timing):
    monkeypatch.setattr(G.TorchGemm, "check", lambda self, rows=None: 0.5)
    res = R.run_main_job(tmp_path, device=cpu, quick=True, progress=False)
    gemm = res.records[1]
    assert gemm.status == "failed" and gemm.measurement is None
    assert gemm.reason == "correctness check failed: relative error 0.5 > tolerance 1e-05 for fp32"


def test_a_result_above_the_peak_is_rejected_not_recorded(tmp_path, cpu, fake_timing):
    """C08: a throughput above the applicable dense peak is a timing error, written as failed with the reason."""
    tiny = Peak("fp32", "fp32", 1e6, None, "test")  # a 1 MFLOP/s "peak": 41.9 MFLOP/s in 0.1 s beats it
    dev = dataclasses.replace(cpu, accelerator=dataclasses.replace(cpu.accelerator, peaks=(tiny,)))
    res = R.run_main_job(tmp_path, device=dev, quick=True, progress=False)
    gemms = [r for r in res.records if r.kind == "gemm"]
    assert gemms and all(r.status == "failed" for r in gemms)
    assert all("cannot be a real measurement" in r.reason for r in gemms)
    assert all(r.derived is None and r.measurement is not None for r in gemms)


def test_unsupported_format_is_skipped_with_reason(tmp_path, cpu, fake_timing):
    res = R.run_main_job(tmp_path, device=cpu, formats=["fp32", "nvfp4"], quick=True, progress=False)
    skipped = [r for r in res.records if r.status == "skipped"]
    assert [r.format for r in skipped] == ["nvfp4"]
    assert skipped[0].reason == "nvfp4 GEMM needs a CUDA GPU; this device is a CPU"
    assert skipped[0].workload.origin == "format probe"


def test_cpu_bf16_probe_returns_a_reason_when_slow():
    ok, reason = R.cpu_bf16_fast_enough(torch, size=64, ratio=1e-9)
    assert not ok and "slower than fp32" in reason and "--formats bf16" in reason
    assert R.cpu_bf16_fast_enough(torch, size=64, ratio=1e9) == (True, "")


def test_latest_records_keeps_the_last_per_key():
    from truepeak.records import Correctness, GemmWorkload, MeasurementSummary, Record

    def rec(key, status):
        ok = status == "ok"
        return Record(status=status, reason="" if ok else "r", key=key, workload=GemmWorkload(m=1, n=1, k=1),
                      measurement=MeasurementSummary(mode="cpu", median_s=1.0) if ok else None,
                      correctness=Correctness(passed=True) if ok else None)

    recs = [rec("a", "failed"), rec("b", "ok"), rec("a", "ok")]
    assert R.latest_records(recs) == [recs[2], recs[1]]  # a's last record, in a's first place
    assert R.latest_records([]) == []


# -- output folder, resume, interrupts ----------------------------------------------------------------------------------


def _no_measuring(monkeypatch):
    def boom(*a, **k):
        raise AssertionError("measured before the output folder was checked")

    monkeypatch.setattr(R.runners, "run_gemm", boom)
    monkeypatch.setattr(R.runners, "run_copy", boom)
    monkeypatch.setattr(R.settle, "cpu_bf16_fast_enough", boom)


def test_out_that_is_a_file_is_an_error_before_measuring(tmp_path, cpu, monkeypatch):
    _no_measuring(monkeypatch)
    afile = tmp_path / "afile"
    afile.write_text("x")
    with pytest.raises(TruepeakError, match=r"--out .*afile is an existing file, not a folder"):
        R.run_main_job(afile, device=cpu, quick=True, progress=False)
    with pytest.raises(TruepeakError, match=r"cannot create the --out folder .*afile/sub: Not a directory"):
        R.run_main_job(afile / "sub", device=cpu, quick=True, progress=False)
    assert afile.read_text() == "x"


def test_an_oserror_writing_records_names_the_file(tmp_path):
    from truepeak.records import RecordWriter

    (tmp_path / "results.jsonl").mkdir()  # a folder where the file should be
    with pytest.raises(TruepeakError, match=r"cannot write records to .*results\.jsonl: Is a directory"):
        RecordWriter(tmp_path / "results.jsonl")


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


def test_interrupt_keeps_the_records_and_returns_them(tmp_path, cpu, monkeypatch, fake_timing, interrupt_gemm):
    interrupt_gemm(monkeypatch, 2)
    with pytest.raises(R.RunInterrupted) as info:
        R.run_main_job(tmp_path, device=cpu, quick=True, progress=False)
    stop = info.value
    assert isinstance(stop, KeyboardInterrupt)
    assert stop.n_records == 2 and stop.records_path == tmp_path / "results.jsonl" and stop.out_dir == tmp_path
    assert stop.result.interrupted and read_records(stop.records_path) == stop.result.records
    assert stop.result.n_cases == 4  # 2 of 4 cases finished
    assert [r.kind for r in stop.result.records] == ["membw", "gemm"]
    assert not (tmp_path / "summary.md").exists()  # the CLI renders it (bench never imports report)


def test_bench_never_imports_report():
    import ast
    from pathlib import Path

    bench = Path(R.__file__).parents[1]  # src/truepeak/bench, its packages included
    for path in bench.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else (
                [node.module or ""] if isinstance(node, ast.ImportFrom) else [])
            assert not any(n.startswith(("truepeak.report", "truepeak.cli")) for n in names), path.name


# -- the quick copy and the roofline's memory ceiling ---------------------------------------------------------------------


def test_quick_copy_is_sized_beyond_the_cache(cpu):
    from truepeak.bench.membw import QUICK_COPY_BYTES, cache_resident, copy_bytes

    assert copy_bytes(cpu, quick=True) == 32 * 2**20  # max(32 MiB, 2 x 16 MiB)
    assert not cache_resident(copy_bytes(cpu, quick=True), cpu.l2_bytes)
    small = dataclasses.replace(cpu, l2_bytes=1 * 2**20)
    assert copy_bytes(small, quick=True) == QUICK_COPY_BYTES
    huge = dataclasses.replace(cpu, l2_bytes=4 * 2**30)
    assert copy_bytes(huge, quick=True) == 2**30  # capped: then it is cache-resident and not a ceiling
    assert cache_resident(2**30, huge.l2_bytes) and not cache_resident(2**30, None)


def test_a_cache_resident_copy_is_never_the_roofline_ceiling(tmp_path, cpu, monkeypatch, fake_timing):
    """cases.md C10: a copy whose working set fits in 2x the cache reads the cache, not memory."""
    monkeypatch.setattr(membw, "QUICK_COPY_MAX_BYTES", 4 * 2**20)
    dev = dataclasses.replace(cpu, l2_bytes=64 * 2**20)  # quick copy 32 MiB: working set 64 MiB < 2 x 64 MiB
    res = R.run_main_job(tmp_path, device=dev, quick=True, progress=False)
    copy, gemms = res.records[0], res.records[1:]
    assert copy.status == "ok" and copy.derived.bytes_per_s == pytest.approx(6_710_886_400)
    for rec in gemms:
        d = rec.derived
        assert d.bandwidth_bytes_per_s is None and d.roofline_fraction is None
        assert "under 2x the 64 MiB cache" in d.bandwidth_source
    assert any("no roofline memory ceiling" in n for n in res.notes)


# -- --resume and the formats ------------------------------------------------------------------------------------------


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


def test_empty_out_is_refused_before_anything_is_written(tmp_path, cpu, monkeypatch):
    _no_measuring(monkeypatch)
    monkeypatch.chdir(tmp_path)
    for empty in ("", "  "):
        with pytest.raises(TruepeakError, match=r"^--out is empty; give a folder for the results"):
            R.run_main_job(empty, device=cpu, quick=True, progress=False)
    assert list(tmp_path.iterdir()) == []


# -- a GEMM above its roofline; a very noisy copy as the memory ceiling ----------------------------------------------


def test_a_gemm_above_its_roofline_gets_a_record_warning(tmp_path, cpu, monkeypatch, fake_timing):
    """A copy that reads far too slow (10 s for 32 MiB: 6.7 MB/s) puts every GEMM above 100 % of the roofline: each
    record says the measured ceiling is below what the GEMM achieved (it used to say nothing: warnings [])."""
    def slow_copy(device, *, nbytes=None, quick=False, warmup_s=0.0, budget_s=0.0):
        nbytes = nbytes or membw.copy_bytes(device, quick)
        return membw.CopyResult(nbytes, Measurement(samples_s=(10.0,) * 5, mode="cpu"),
                                derived_metrics(device.accelerator, Copy(nbytes), 10.0))

    monkeypatch.setattr(membw, "measure_copy", slow_copy)
    res = R.run_main_job(tmp_path, device=cpu, quick=True, progress=False)
    for rec in res.records[1:]:
        d = rec.derived
        assert d.roofline_fraction > 1 and d.bound == "memory"
        [warning] = rec.warnings
        assert warning.startswith(f"{100 * d.roofline_fraction:.1f} % of the roofline: this GEMM moved its minimum bytes")
        assert "above the 0.00671 GB/s memory ceiling (measured: truepeak run copy bandwidth, copy 32 MiB)" in warning
        assert "the measured memory ceiling is too low (a noisy copy measurement) or the GEMM reused" in warning


def _metrics(**values):
    from truepeak.records import GemmMetrics

    return GemmMetrics(**{"flop_per_s": 1e12, "bytes_per_s": 1e9, **values})


def test_roofline_warnings_by_hand():
    under = _metrics(roofline_fraction=0.98, bound="memory")
    assert R.roofline_warnings(under) == [] and R.roofline_warnings(_metrics(roofline_fraction=None)) == []
    gpu = _metrics(roofline_fraction=1.2, bound="memory", bytes_per_s=5.76e12, bandwidth_bytes_per_s=4.8e12,
                   bandwidth_source="NVIDIA H200 datasheet")
    assert R.roofline_warnings(gpu) == [
        "120.0 % of the roofline: this GEMM moved its minimum bytes at 5760 GB/s, above the 4800 GB/s memory ceiling "
        "(NVIDIA H200 datasheet): the operands were served from cache, not memory"]
    compute = _metrics(roofline_fraction=1.02, bound="compute", dense_peak_flop_per_s=989.4e12)
    assert R.roofline_warnings(compute) == [
        "102.0 % of the roofline: above the 989.4 TFLOPS dense peak (a clock above the one the peak assumes, or an "
        "estimated peak that is too low)"]


def _copy_sequence(monkeypatch, times_and_samples):
    """measure_copy returns these sample tuples in turn and records the budgets it was given."""
    calls = []

    def measure_copy(device, *, nbytes=None, quick=False, warmup_s=0.0, budget_s=0.0):
        nbytes = nbytes or membw.copy_bytes(device, quick)
        samples = times_and_samples[len(calls)]
        calls.append((warmup_s, budget_s))
        meas = Measurement(samples_s=samples, mode="cpu")
        return membw.CopyResult(nbytes, meas, derived_metrics(device.accelerator, Copy(nbytes),
                                                              meas.steady_median_s))

    monkeypatch.setattr(membw, "measure_copy", measure_copy)
    return calls


NOISY = (0.01, 0.02, 0.01, 0.03, 0.01, 0.025, 0.012)  # IQR far above 25 % of the median
CLEAN = (0.004,) * 7


def test_a_very_noisy_copy_ceiling_is_measured_again_with_a_longer_budget(tmp_path, cpu, monkeypatch, fake_timing):
    calls = _copy_sequence(monkeypatch, [NOISY, CLEAN])
    assert "very_noisy" in Measurement(samples_s=NOISY, mode="cpu").warning_codes
    res = R.run_main_job(tmp_path, device=cpu, quick=True, progress=False)
    b = R.QUICK_BUDGETS
    f = R.COPY_REMEASURE_FACTOR
    assert calls == [(b.copy_warmup_s, b.copy_budget_s), (f * b.copy_warmup_s, f * b.copy_budget_s)]
    copy = res.records[0]
    assert copy.status == "ok" and copy.time_s == pytest.approx(0.004)  # the second measurement
    assert copy.warnings == ()
    assert copy.reason.startswith("the first copy measurement was very noisy (IQR ")
    assert (f"over {b.copy_budget_s:g} s); measured again over {f * b.copy_budget_s:g} s "
            f"({f * b.copy_warmup_s:g} s warm-up) before using it as the roofline's memory ceiling: 16.8 GB/s"
            ) in copy.reason
    ceiling = 2 * 32 * 2**20 / 0.004
    for rec in res.records[1:]:
        assert rec.derived.bandwidth_bytes_per_s == pytest.approx(ceiling)


def test_a_noisy_copy_is_measured_once_when_it_is_no_ceiling(tmp_path, cpu, monkeypatch, fake_timing):
    """A catalog bandwidth (a GPU) is the ceiling, not the copy; a clean copy needs no second look."""
    calls = _copy_sequence(monkeypatch, [NOISY, CLEAN])
    acc = dataclasses.replace(cpu.accelerator, memory_bandwidth=Sourced(50e9, "test"))
    R.run_main_job(tmp_path / "a", device=dataclasses.replace(cpu, accelerator=acc), quick=True, progress=False)
    assert len(calls) == 1
    calls = _copy_sequence(monkeypatch, [CLEAN, CLEAN])
    res = R.run_main_job(tmp_path / "b", device=cpu, quick=True, progress=False)
    assert len(calls) == 1 and res.records[0].reason == ""


def test_a_time_the_memory_cannot_deliver_is_a_failed_record(tmp_path, cpu, fake_timing):
    """Against a SPEC bandwidth (5 MB/s here, 1 MiB cache), 1x1024x2048 fp32 (8.4 MB) in 0.1 s needs >= 1.5 s from
    memory: a timing error, recorded as failed with the message (as a compute-side impossibility is); 256^3 (786 kB,
    7.86 MB/s) fits the cache: ok, with the cache note as its warning."""
    acc = dataclasses.replace(cpu.accelerator, memory_bandwidth=Sourced(5e6, "test spec"),
                              l2_bytes=Sourced(2**20, "test"))
    res = R.run_main_job(tmp_path, device=dataclasses.replace(cpu, accelerator=acc), quick=True, progress=False)
    by_label = {r.workload.label: r for r in res.records}
    copy = res.records[0]
    assert copy.status == "failed" and copy.reason.startswith("MeasurementError: 10 ms for copy 33554432 B")
    for label in ("1x1024x2048", "32x1024x2048"):
        rec = by_label[label]
        assert rec.status == "failed", label
        assert rec.reason.startswith(f"MeasurementError: 100 ms for {label} fp32 moves ")
        assert rec.reason.endswith("an eliminated op, or a time in the wrong unit)")  # the whole message
    square = by_label["256x256x256"]
    assert square.status == "ok"
    [warning] = square.warnings
    assert square.derived.roofline_fraction == pytest.approx(3 * 256 * 256 * 4 / 0.1 / 5e6)
    assert warning.startswith("157.3 % of the roofline: 0.00786 GB/s of minimum traffic is above the 0.005 GB/s")
    assert "fits in the 1.049 MB L2" in warning


def test_roofline_warning_names_tops_for_int8():
    [warning] = R.roofline_warnings(_metrics(roofline_fraction=1.05, bound="compute", dense_peak_flop_per_s=1979e12),
                                    fmt="int8")
    assert "above the 1979.0 TOPS dense peak" in warning


# -- modes, clock warnings, zero inputs (issue: every format, sustained and burst, clock telemetry) --------------------


def test_modes_parse_and_both_times_every_gemm_twice():
    assert R.expand_modes(None) == ["sustained"] and R.expand_modes(["both"]) == ["sustained", "burst"]
    assert R.expand_modes(["burst"]) == ["burst"]
    with pytest.raises(TruepeakError, match="unknown mode 'fast'; accepted: sustained .* burst .* both"):
        R.expand_modes(["fast"])
    dev = _h200()
    one = R.plan_cases(dev, ["bf16"], quick=True)
    both = R.plan_cases(dev, ["bf16"], quick=True, modes=["sustained", "burst"])
    gemms = [c for c in both if c.kind == "gemm"]
    assert len(gemms) == 2 * len([c for c in one if c.kind == "gemm"])
    assert [R.case_mode(dev, c) for c in gemms] == ["sustained"] * 3 + ["burst"] * 3
    keys = {R.case_key(c, dev) for c in gemms}
    assert len(keys) == len(gemms)  # the mode is part of the key
    assert R.case_key(one[1], dev).endswith("|sustained")  # sustained keys as before --mode existed


def _tel(median_mhz, limit_mhz=1980.0, reasons=None):
    from truepeak.bench.telemetry import Telemetry

    return Telemetry(n_samples=100, sm_clock_median_hz=median_mhz * 1e6, sm_clock_limit_hz=limit_mhz * 1e6,
                     power_median_w=690.0, reasons=reasons or {})


def test_a_clock_above_the_catalog_maximum_is_a_visible_warning():
    """The known gap: derived_metrics drops a sampled clock > 2 % above the catalog maximum (no at_clock_fraction); the
    record must say so instead of leaving it out silently."""
    acc = _h200().accelerator
    top = acc.max_clock_hz.value / 1e6
    assert R.clock_warnings(acc, _tel(top * 1.01)) == []  # within the 2 % reading granularity
    (w,) = R.clock_warnings(acc, _tel(top * 1.05, limit_mhz=top * 1.05))
    assert "above the" in w and "catalog maximum" in w and "% of peak at measured clock is left out" in w
    d = derived_metrics(acc, G.gemm_workload("bf16", 8192, 8192, 8192), 1.6e-3, clock_hz=top * 1.05e6)
    assert d.at_clock_fraction is None and d.sm_clock_hz is None  # what the warning explains


def test_C11_a_throttled_clock_is_named_with_its_reason_and_recorded():
    acc = _h200().accelerator
    # B200-like: 1580 of 1965 MHz = 80 %, power-capped in 97 % of the polls
    (w,) = R.clock_warnings(acc, _tel(1580, limit_mhz=1965, reasons={"power cap": 0.97, "idle": 0.5}))
    assert "80 % of the 1965 MHz maximum" in w and "power cap 97 %" in w and "idle" not in w
    # already flagged by the measurement: not twice
    assert R.clock_warnings(acc, _tel(1580, limit_mhz=1965), ["low_clock"]) == []
    assert R.clock_warnings(acc, _tel(1800, limit_mhz=1980)) == []  # 91 %: not throttled
    assert R.clock_warnings(acc, None) == []
    # thermal: named as such
    (w,) = R.clock_warnings(acc, _tel(1200, reasons={"sw thermal": 1.0}))
    assert "sw thermal 100 %" in w


def test_C11_peak_at_measured_clock_is_stored_with_both_efficiencies():
    acc = _h200().accelerator
    work = G.gemm_workload("bf16", 8192, 8192, 8192)
    t = work.flop / 677e12  # sustained literature figure, at 1455 MHz
    d = derived_metrics(acc, work, t, clock_hz=1455e6, sm_count=132)
    at_clock = R.runners.peak_at_clock(acc, "bf16", d, 132)
    assert at_clock == pytest.approx(132 * 4096 * 1455e6)  # FLOP/clk/SM x SMs x clock = 786.7 TFLOPS
    assert d.at_clock_fraction == pytest.approx(677e12 / at_clock)  # 86.1 %
    assert d.dense_fraction == pytest.approx(677e12 / 989.4e12, rel=1e-3)  # 68.4 %


def test_C09_a_zero_input_case_is_labelled_and_keyed_apart(tmp_path, cpu, monkeypatch):
    seen = []

    def time_gemm(gemm, case, dev, budgets, n_sets):
        seen.append(gemm.input_kind)
        return Measurement(samples_s=(0.01,) * 5, mode="cpu", input_kind=gemm.input_kind)

    monkeypatch.setattr(R.runners, "time_gemm", time_gemm)
    sweep = R.Sweep(cpu, R.QUICK_BUDGETS, True, {}, {}, acc=cpu.accelerator, settled=True)
    rand = R.Case("gemm", "fp32", 64, 128, 256)
    zero = dataclasses.replace(rand, inputs="zeros")
    assert R.case_key(rand, cpu) != R.case_key(zero, cpu) and rand.workload().inputs is None
    rec = R.runners.run_gemm(zero, R.case_key(zero, cpu), sweep)
    assert seen == ["zeros"] and rec.workload.inputs == "zeros"
    assert rec.measurement.input_kind == "zeros" and "inputs_not_random" in rec.measurement.warning_codes
    assert any("not a peak" in w for w in rec.warnings)
