"""The main job (truepeak/bench/run/job.py): records written as cases finish, the output folder checked before
measuring, Ctrl-C keeping the records. The one real run, end to end, is in tests/cli/test_run.py.

Timing is stubbed (``fake_timing``, tests/bench/run/conftest.py): every GEMM call "takes" 0.1 s and every copy
10 ms, on a CPU with a hand-set 100 GFLOP/s fp32 peak and a 16 MiB cache, so derived values are computed by hand.
"""

from __future__ import annotations

import dataclasses

import pytest

torch = pytest.importorskip("torch")

import truepeak  # noqa: E402
from truepeak.bench import run as R  # noqa: E402
from truepeak.records import read_records  # noqa: E402
from truepeak.errors import TruepeakError  # noqa: E402


RECORD_FIELDS = {"schema_version", "methodology_version", "key", "kind", "status", "reason", "workload", "backend",
                 "format", "mode", "time_s", "measurement", "correctness", "derived", "env", "run_config", "rotation",
                 "timestamp"}


COPY_S = 0.01  # every stubbed copy takes 10 ms


def _no_measuring(monkeypatch):
    def boom(*a, **k):
        raise AssertionError("measured before the output folder was checked")

    monkeypatch.setattr(R.runners, "run_gemm", boom)
    monkeypatch.setattr(R.runners, "run_copy", boom)
    monkeypatch.setattr(R.settle, "cpu_bf16_fast_enough", boom)


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


def test_out_that_is_a_file_is_an_error_before_measuring(tmp_path, cpu, monkeypatch):
    _no_measuring(monkeypatch)
    afile = tmp_path / "afile"
    afile.write_text("x")
    with pytest.raises(TruepeakError, match=r"--out .*afile is an existing file, not a folder"):
        R.run_main_job(afile, device=cpu, quick=True, progress=False)
    with pytest.raises(TruepeakError, match=r"cannot create the --out folder .*afile/sub: Not a directory"):
        R.run_main_job(afile / "sub", device=cpu, quick=True, progress=False)
    assert afile.read_text() == "x"


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


def test_empty_out_is_refused_before_anything_is_written(tmp_path, cpu, monkeypatch):
    _no_measuring(monkeypatch)
    monkeypatch.chdir(tmp_path)
    for empty in ("", "  "):
        with pytest.raises(TruepeakError, match=r"^--out is empty; give a folder for the results"):
            R.run_main_job(empty, device=cpu, quick=True, progress=False)
    assert list(tmp_path.iterdir()) == []


def test_bench_never_imports_report():
    import ast
    from pathlib import Path

    bench = Path(R.__file__).parents[1]  # src/truepeak/bench, its packages included
    for path in bench.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else (
                [node.module or ""] if isinstance(node, ast.ImportFrom) else [])
            assert not any(n.startswith(("truepeak.report", "truepeak.cli")) for n in names), path.name
