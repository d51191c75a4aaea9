"""The main job: the sweep as data, records written as cases finish, failures as data, --resume, and the rendering."""

from __future__ import annotations

import dataclasses
import datetime as dt
import json

import pytest

torch = pytest.importorskip("torch")

from truepeak.bench import run as R  # noqa: E402
from truepeak.bench.records import read_records  # noqa: E402
from truepeak.errors import TruepeakError, UnknownNameError  # noqa: E402
from truepeak.hardware.detect import cuda_device_info, detect_cpu  # noqa: E402
from truepeak.report.markdown import best_per_format, summary_markdown  # noqa: E402
from truepeak.report.table import fmt_pct, fmt_tflops, fmt_time, table_rows, table_text, time_unit  # noqa: E402

RECORD_FIELDS = {"schema_version", "methodology_version", "key", "kind", "status", "reason", "workload", "backend",
                 "format", "mode", "time_s", "measurement", "correctness", "derived", "env", "timestamp"}


def _h200():
    return cuda_device_info("NVIDIA H200", "9.0", sm_count=132, l2_bytes=62914560, smem_per_block_bytes=232448,
                            max_sm_clock_hz=1980e6, memory_bytes=150 * 10**9, index=0)


@pytest.fixture(scope="module")
def cpu():
    return detect_cpu()


@pytest.fixture(scope="module")
def quick_run(tmp_path_factory, cpu):
    out = tmp_path_factory.mktemp("quick")
    return R.run_main_job(out, device=cpu, quick=True, progress=False, argv=["truepeak", "run", "--quick"])


# -- the sweep as data ---------------------------------------------------------------------------------------------------


def test_default_gpu_sweep():
    dev = _h200()
    cases = R.plan_cases(dev, R.default_formats(dev))
    assert cases[0].kind == "membw" and cases[0].nbytes == 2 * 2**30
    gemms = [c for c in cases if c.kind == "gemm" and not c.skip_reason]
    # 9 decode M x 2 model shapes + 2 squares, for each of 6 formats
    assert len(gemms) == 6 * (9 * 2 + 2)
    assert [c.format for c in gemms[::20]] == ["fp32", "tf32", "bf16", "fp16", "fp8_e4m3", "int8"]
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


def test_parse_formats():
    assert R.parse_formats("bf16, fp8,BF16") == ["bf16", "fp8_e4m3"]
    assert R.parse_formats(None) is None and R.parse_formats("") is None
    with pytest.raises(UnknownNameError, match="known: fp32, tf32, bf16"):
        R.parse_formats("bf17")


def test_default_out_dir():
    assert str(R.default_out_dir(dt.datetime(2026, 11, 30, 1, 2, 3))) == "truepeak-run-20261130-010203"


def test_case_keys_are_unique_and_stable(cpu):
    cases = R.plan_cases(cpu, ["fp32", "bf16"])
    keys = [R.case_key(c, cpu) for c in cases]
    assert len(set(keys)) == len(keys)
    assert keys == [R.case_key(c, cpu) for c in R.plan_cases(cpu, ["fp32", "bf16"])]


# -- a quick run on this CPU ---------------------------------------------------------------------------------------------


def test_quick_run_writes_one_record_per_case(quick_run):
    res = quick_run
    on_disk = read_records(res.records_path)
    assert len(on_disk) == len(res.records) == len(R.plan_cases(res.device, ["fp32"], quick=True))
    assert [r["key"] for r in on_disk] == [r["key"] for r in res.records]
    assert res.summary_path.exists()
    for rec in on_disk:
        assert RECORD_FIELDS <= set(rec)
        assert rec["status"] == "ok", rec["reason"]
        assert rec["mode"] == "cpu"


def test_quick_run_derived_values_are_consistent(quick_run):
    for rec in quick_run.records:
        d = rec["derived"]
        m = rec["measurement"]
        assert rec["time_s"] == m["steady_median_s"]
        if rec["kind"] == "gemm":
            w = rec["workload"]
            assert w["flop"] == 2 * w["m"] * w["n"] * w["k"]
            assert d["tflops"] == pytest.approx(w["flop"] / rec["time_s"] / 1e12)
            assert d["gbps"] == pytest.approx(w["min_bytes"] / rec["time_s"] / 1e9)
            assert d["pct_dense"] == pytest.approx(d["tflops"] * 1e12 / quick_run.device.accelerator.dense_flops("fp32"))
            assert d["bound"] in ("memory", "compute")
            assert rec["correctness"]["passed"] and rec["correctness"]["rel_error"] <= 1e-5
            assert m["input_kind"] == "random"
            assert m["n_sets"] is None or m["n_sets"] >= 2
        else:
            assert d["gbps"] == pytest.approx(2 * rec["workload"]["nbytes"] / rec["time_s"] / 1e9)
            assert d["pct_bandwidth"] is None  # a CPU has no catalog bandwidth


def test_cpu_roofline_uses_the_measured_copy_bandwidth(quick_run):
    copy, gemm = quick_run.records[0], quick_run.records[1]
    d = gemm["derived"]
    assert d["bandwidth_gbps"] == pytest.approx(copy["derived"]["gbps"])
    assert "measured" in d["bandwidth_source"]
    assert d["pct_roofline"] is not None


def test_existing_results_need_resume(quick_run):
    with pytest.raises(TruepeakError, match="--resume"):
        R.run_main_job(quick_run.out_dir, device=quick_run.device, quick=True, progress=False)


def test_resume_skips_finished_cases(tmp_path, cpu, monkeypatch):
    first = R.run_main_job(tmp_path, device=cpu, quick=True, progress=False)
    lines = len(read_records(first.records_path))

    def boom(*a, **k):
        raise AssertionError("a finished case ran again")

    monkeypatch.setattr(R, "_run_gemm", boom)
    monkeypatch.setattr(R, "_run_copy", boom)
    again = R.run_main_job(tmp_path, device=cpu, quick=True, resume=True, progress=False)
    assert len(read_records(again.records_path)) == lines
    assert [r["key"] for r in again.records] == [r["key"] for r in first.records]


def test_a_failing_case_is_a_failed_record_and_the_sweep_goes_on(tmp_path, cpu, monkeypatch):
    real_check = R.G.TorchGemm.check
    calls = {"n": 0}

    def flaky(self, rows=None):
        calls["n"] += 1
        if calls["n"] == 1:
            raise RuntimeError("CUDA out of memory. Tried to allocate 2.00 GiB")
        return real_check(self, rows)

    monkeypatch.setattr(R.G.TorchGemm, "check", flaky)
    res = R.run_main_job(tmp_path, device=cpu, quick=True, progress=False)
    statuses = [r["status"] for r in res.records]
    assert statuses[1] == "failed" and statuses[2:] == ["ok"] * (len(statuses) - 2)
    assert res.records[1]["reason"].startswith("out of memory:")
    # failed cases are retried by --resume
    monkeypatch.setattr(R.G.TorchGemm, "check", real_check)
    again = R.run_main_job(tmp_path, device=cpu, quick=True, resume=True, progress=False)
    assert [r["status"] for r in R.latest_records(again.records)] == ["ok"] * len(statuses)


def test_a_result_above_the_peak_is_rejected_not_recorded(tmp_path, cpu):
    """C08: a throughput above the applicable dense peak is a timing error, written as failed with the reason."""
    acc = cpu.accelerator
    tiny = dataclasses.replace(acc.peaks[0], dense=1e6)  # a 1 MFLOP/s "peak": every real GEMM beats it
    # no maximum clock either, so the ceiling is the tiny peak (plus headroom), not FLOP/cycle x cores x max clock
    dev = dataclasses.replace(cpu, accelerator=dataclasses.replace(acc, peaks=(tiny,), max_clock_hz=None))
    res = R.run_main_job(tmp_path, device=dev, quick=True, progress=False)
    gemms = [r for r in res.records if r["kind"] == "gemm"]
    assert gemms and all(r["status"] == "failed" for r in gemms)
    assert all("cannot be a real measurement" in r["reason"] for r in gemms)
    assert all(r["derived"] is None for r in gemms)


def test_unsupported_format_is_skipped_with_reason(tmp_path, cpu):
    res = R.run_main_job(tmp_path, device=cpu, formats="fp32,nvfp4", quick=True, progress=False)
    skipped = [r for r in res.records if r["status"] == "skipped"]
    assert [r["format"] for r in skipped] == ["nvfp4"]
    assert skipped[0]["reason"] == "nvfp4 GEMM needs a CUDA GPU; this device is a CPU"
    assert "skipped" in table_text(res.records)


def test_cpu_bf16_probe_returns_a_reason_when_slow(monkeypatch):
    ok, reason = R.cpu_bf16_fast_enough(torch, size=64, ratio=1e-9)
    assert not ok and "slower than fp32" in reason and "--formats bf16" in reason
    assert R.cpu_bf16_fast_enough(torch, size=64, ratio=1e9) == (True, "")


# -- rendering -----------------------------------------------------------------------------------------------------------


def test_time_unit_is_chosen_from_the_smallest_time():
    assert time_unit([12e-6, 0.02]) == ("us", 1e-6)
    assert time_unit([0.0012, 0.5]) == ("ms", 1e-3)
    assert time_unit([2.0]) == ("s", 1.0)
    assert time_unit([]) == ("us", 1e-6)
    assert fmt_time(0.0216361, 1e-6) == "21636.1"
    assert fmt_time(6.711e-6, 1e-6) == "6.711"
    assert fmt_tflops(685.44) == "685.4" and fmt_tflops(0.00802) == "0.00802"
    assert fmt_pct(0.693) == "69.3" and fmt_pct(0.0266) == "2.66" and fmt_pct(None) == "-"


def test_table_text(quick_run):
    text = table_text(quick_run.records, title="t")
    for header in ("shape (MxNxK)", "format", "time (", "TFLOPS", "GB/s", "% dense peak", "% roofline", "bound",
                   "status"):
        assert header in text
    assert "TFLOPS = 1e12 FLOP/s; GB/s = 1e9 B/s; % of dense peak (never sparse); mode: cpu" in text
    assert "1x1024x2048" in text and quick_run.records[0]["workload"]["label"] in text
    rows, meta = table_rows(quick_run.records)
    assert meta["time_unit"] in ("us", "ms")
    gemm = quick_run.records[1]
    assert rows[1]["tflops"] == fmt_tflops(gemm["derived"]["tflops"])


def test_summary_markdown(quick_run):
    text = quick_run.summary_path.read_text()
    for section in ("## Device", "## Environment", "## Method", "## Memory bandwidth",
                    "## Best measured TFLOPS per format", "## All results"):
        assert section in text
    assert "uniform random in [-1, 1]" in text and "2x the cache" in text
    assert "| fp32 |" in text
    assert "estimated" in text
    best = best_per_format(quick_run.records)
    assert [r["format"] for r in best] == ["fp32"]
    assert best[0]["derived"]["tflops"] == max(r["derived"]["tflops"] for r in quick_run.records if r["kind"] == "gemm")


def test_summary_renders_gpu_records_from_the_h200_results():
    """summary.md from a stored H200 run: percentages of the DENSE peaks, skipped formats listed."""
    from pathlib import Path

    path = Path(__file__).resolve().parents[2] / "docs" / "results" / "h200" / "results.jsonl"
    if not path.exists():
        pytest.skip("no stored H200 results")
    records = read_records(path)
    text = summary_markdown(records)
    assert "NVIDIA H200" in text and "sustained" in text
    assert "nvfp4: skipped: nvfp4 GEMM needs sm_100 or sm_120; this device is sm_90" in text
    bf16 = next(r for r in best_per_format(records) if r["format"] == "bf16")
    assert bf16["derived"]["pct_dense"] == pytest.approx(bf16["derived"]["tflops"] / 989.4)
    assert 500 < bf16["derived"]["tflops"] < 989.4


def test_latest_records_keeps_the_last_per_key():
    recs = [{"key": "a", "status": "failed"}, {"key": "b", "status": "ok"}, {"key": "a", "status": "ok"}]
    assert R.latest_records(recs) == [{"key": "a", "status": "ok"}, {"key": "b", "status": "ok"}]
    assert json.dumps(R.latest_records([]))


# -- output folder, resume, interrupts ----------------------------------------------------------------------------------


def _no_measuring(monkeypatch):
    def boom(*a, **k):
        raise AssertionError("measured before the output folder was checked")

    monkeypatch.setattr(R, "_run_gemm", boom)
    monkeypatch.setattr(R, "_run_copy", boom)
    monkeypatch.setattr(R, "cpu_bf16_fast_enough", boom)


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
    from truepeak.bench.records import RecordWriter

    (tmp_path / "results.jsonl").mkdir()  # a folder where the file should be
    with pytest.raises(TruepeakError, match=r"cannot write records to .*results\.jsonl: Is a directory"):
        RecordWriter(tmp_path / "results.jsonl")


def test_records_carry_the_run_config(quick_run):
    for rec in read_records(quick_run.records_path):
        assert rec["run_config"] == {"quick": True, "device": "cpu", "device_name": quick_run.device.name,
                                     "budgets": "quick"}
    assert quick_run.resumed_keys == frozenset()


def test_resume_warns_about_bad_lines_and_continues_on_a_fresh_line(tmp_path, cpu):
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
    assert [r["key"] for r in recs] == [r["key"] for r in first.records]  # the missing case ran again, on its own line
    assert len(again.resumed_keys) == n - 1
    assert again.records[-1]["key"] not in again.resumed_keys


def test_resume_refuses_records_made_with_other_settings(tmp_path, cpu, monkeypatch):
    R.run_main_job(tmp_path, device=cpu, quick=True, progress=False)
    _no_measuring(monkeypatch)
    with pytest.raises(TruepeakError, match=r"cannot --resume .*different settings: quick \(there: True, now: False\); "
                                            r"rerun with the same options"):
        R.run_main_job(tmp_path, device=cpu, quick=False, resume=True, progress=False)
    other = dataclasses.replace(cpu, name="Another CPU")
    with pytest.raises(TruepeakError, match=r"device_name \(there: .*, now: Another CPU\)"):
        R.run_main_job(tmp_path, device=other, quick=True, resume=True, progress=False)


def test_interrupt_keeps_the_records_and_writes_the_summary(tmp_path, cpu, monkeypatch):
    real = R._run_gemm
    calls = {"n": 0}

    def interrupted(*a, **k):
        calls["n"] += 1
        if calls["n"] == 2:
            raise KeyboardInterrupt
        return real(*a, **k)

    monkeypatch.setattr(R, "_run_gemm", interrupted)
    with pytest.raises(R.RunInterrupted) as info:
        R.run_main_job(tmp_path, device=cpu, quick=True, progress=False)
    stop = info.value
    assert isinstance(stop, KeyboardInterrupt)
    assert stop.n_records == 2 and stop.records_path == tmp_path / "results.jsonl" and stop.out_dir == tmp_path
    assert len(read_records(stop.records_path)) == 2
    assert stop.summary_path == tmp_path / "summary.md" and "## All results" in stop.summary_path.read_text()


# -- the quick copy and the roofline's memory ceiling ---------------------------------------------------------------------


def test_quick_copy_is_sized_beyond_the_cache(cpu):
    from truepeak.bench.membw import QUICK_COPY_BYTES, cache_resident, copy_bytes

    assert copy_bytes(cpu, quick=True) >= max(QUICK_COPY_BYTES, 2 * cpu.l2_bytes)
    assert not cache_resident(copy_bytes(cpu, quick=True), cpu.l2_bytes)
    small = dataclasses.replace(cpu, l2_bytes=1 * 2**20)
    assert copy_bytes(small, quick=True) == QUICK_COPY_BYTES
    huge = dataclasses.replace(cpu, l2_bytes=4 * 2**30)
    assert copy_bytes(huge, quick=True) == 2**30  # capped: then it is cache-resident and not a ceiling
    assert cache_resident(2**30, huge.l2_bytes) and not cache_resident(2**30, None)


def test_a_cache_resident_copy_is_never_the_roofline_ceiling(tmp_path, cpu, monkeypatch):
    """cases.md C10: a copy whose working set fits in 2x the cache reads the cache, not memory."""
    from truepeak.bench import membw

    monkeypatch.setattr(membw, "QUICK_COPY_MAX_BYTES", 4 * 2**20)
    dev = dataclasses.replace(cpu, l2_bytes=64 * 2**20)  # quick copy 32 MiB: working set 64 MiB < 2 x 64 MiB
    res = R.run_main_job(tmp_path, device=dev, quick=True, progress=False)
    copy, gemms = res.records[0], res.records[1:]
    assert copy["status"] == "ok" and copy["derived"]["gbps"] > 0
    for rec in gemms:
        d = rec["derived"]
        assert d["bandwidth_gbps"] is None and d["pct_roofline"] is None
        assert "under 2x the 64 MiB cache" in d["bandwidth_source"]
    assert any("no roofline memory ceiling" in n for n in res.notes)
