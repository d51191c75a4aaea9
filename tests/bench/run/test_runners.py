"""One case measured into one record (truepeak/bench/run/runners.py): rotation, failures as data, the copy as
the roofline's memory ceiling, peaks at the measured clock, zero inputs.

Timing is stubbed (``fake_timing``, tests/bench/run/conftest.py): every GEMM call "takes" 0.1 s and every copy
10 ms, on a CPU with a hand-set 100 GFLOP/s fp32 peak and a 16 MiB cache, so derived values are computed by hand.
"""

from __future__ import annotations

import dataclasses

import pytest

torch = pytest.importorskip("torch")

from truepeak.bench import gemm as G  # noqa: E402
from truepeak.bench import membw  # noqa: E402
from truepeak.bench import run as R  # noqa: E402
from truepeak.bench.measurement import Measurement  # noqa: E402
from truepeak.efficiency import derived_metrics  # noqa: E402
from truepeak.hardware.catalog import Peak, Sourced  # noqa: E402
from truepeak.hardware.detect import cuda_device_info  # noqa: E402
from truepeak.roofline import Copy  # noqa: E402


def _h200():
    return cuda_device_info("NVIDIA H200", "9.0", sm_count=132, l2_bytes=62914560, smem_per_block_bytes=232448,
                            max_sm_clock_hz=1980e6, memory_bytes=150 * 10**9, index=0)


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
