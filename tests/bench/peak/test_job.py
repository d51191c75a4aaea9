"""A search on the CPU (truepeak/bench/peak/job.py), with the timing stubbed from a known landscape so the
numbers are known: every trial a record, formats the CPU cannot run, out-of-memory shapes, bad settings, Ctrl-C and
--resume; one smoke search on a GPU."""

from __future__ import annotations

import dataclasses
import json
import math

import pytest

from truepeak.bench import peak as P

torch = pytest.importorskip("torch")

from truepeak.bench import gemm as G  # noqa: E402
from truepeak.bench import run as R  # noqa: E402
from truepeak.bench.measurement import Measurement  # noqa: E402
from truepeak.records import read_records  # noqa: E402
from truepeak.hardware.detect import detect_cpu  # noqa: E402


def landscape(best=(3072, 11264, 5376), top=800e12, ripple=0.0, unit=1024):
    """A smooth synthetic TFLOPS landscape with a single maximum ``top`` at ``best`` (multiples of 256), falling
    off ~2-4 % per 1024 in each dimension; ``ripple`` adds tile-quantisation ripple (zero on multiples of 1024, up to
    ``ripple`` per dimension between them), which can move the maximum off ``best``."""
    def f(shape):
        d = [(s - b) / unit for s, b in zip(shape, best)]
        smooth = math.exp(-0.03 * (d[0] ** 2) - 0.02 * (d[1] ** 2) - 0.04 * (d[2] ** 2))
        rip = 1 - ripple * sum(abs(math.sin(math.pi * s / 1024)) for s in shape)
        return top * smooth * rip
    return f


@pytest.fixture(scope="module")
def cpu():
    return detect_cpu()


def _cpu_landscape(shape):
    """Best at 768 x 1024 x 640 on the CPU grid (multiples of 128), 40 GFLOP/s there, falling off 2-4 % per 128."""
    return landscape(best=(768, 1024, 640), top=40e9, unit=128)(shape)


#: A small CPU plan (the default one measures ~30 shapes up to 2048, too slow for a 2-core CI machine).
SMALL_CPU_PLAN = P.SearchPlan(((1024, 1024, 512), (512, 1024, 1024), (512, 512, 512), (1024, 512, 256)),
                              steps=(256, 128), min_dim=128, max_dim=1024, top_k=2, tolerance=0.01, starts=1)


@pytest.fixture
def stub_landscape(monkeypatch):
    """Every GEMM "takes" FLOP / landscape(shape) seconds; records which cases were timed."""
    seen = []

    def time_gemm(gemm, case, dev, budgets, n_sets):
        seen.append(case)
        t = 2 * case.m * case.n * case.k / _cpu_landscape((case.m, case.n, case.k))
        return Measurement(samples_s=(t,) * 5, mode="cpu", input_kind=gemm.input_kind)

    monkeypatch.setattr(R.runners, "time_gemm", time_gemm)
    return seen


#: The best of SMALL_CPU_PLAN's first two coarse shapes on the CPU landscape: 1024 x 1024 x 512 is (2, 0, -1) steps of
#: 128 from the optimum, 40 GFLOP/s x exp(-0.03 x 4 - 0.04 x 1) = 34.09 GFLOP/s (512 x 1024 x 1024: exp(-0.48), 24.75).
BEST_OF_TWO = 40e9 * math.exp(-0.03 * 4 - 0.04 * 1)


#: SMALL_CPU_PLAN stopped after its first two coarse shapes (then both re-measured): a search of 4 evaluations.
TWO_SHAPES = dataclasses.replace(SMALL_CPU_PLAN, max_evals=2)


def test_cpu_search_finds_the_best_shape_and_records_every_trial(tmp_path, cpu, stub_landscape):
    run = P.run_peak(tmp_path / "pk", device=cpu, argv=["truepeak", "peak"], plan=SMALL_CPU_PLAN, budget_s=120)
    (fp,) = run.peaks
    assert (fp.format, fp.mode, fp.status) == ("fp32", "cpu", "ok")
    s = fp.summary()
    assert s["shape"] == [768, 1024, 640]
    assert s["flop_per_s"] == pytest.approx(_cpu_landscape((768, 1024, 640)))
    recs = read_records(run.records_path)
    assert len(recs) == fp.result.evaluations == len(stub_landscape)
    assert all(r.kind == "gemm" and r.mode == "cpu" and r.status == "ok" for r in recs)
    assert [r.search.eval for r in recs] == list(range(len(recs)))
    assert {r.search.phase for r in recs} == {"coarse", "refine", "remeasure"}
    assert len({r.key for r in recs}) == len(recs)  # a re-measured shape gets its own record
    assert all(r.correctness.passed for r in recs)  # checked against float64 before timing
    # the re-measurements get the longer budgets
    finals = [c for c in stub_landscape if c.origin.endswith("(remeasure)")]
    assert finals and all(c.budget_s == P.CPU_PEAK_BUDGETS.final_budget_s for c in finals)
    summary = json.loads((run.out_dir / "peak.json").read_text())
    assert summary["peaks"][0]["shape"] == [768, 1024, 640]
    assert P.CPU_NOTE in run.notes


def test_C10_every_search_record_rotates_inputs_over_2x_the_cache(tmp_path, cpu, stub_landscape):
    run = P.run_peak(tmp_path / "pk", device=cpu, budget_s=3, plan=SMALL_CPU_PLAN)
    for r in read_records(run.records_path):
        rot = r.rotation
        assert rot.total_bytes >= 2 * rot.l2_bytes and rot.cold is True


def test_cpu_says_what_it_cannot_do(tmp_path, cpu, stub_landscape):
    run = P.run_peak(tmp_path / "pk", device=cpu, formats=["fp32", "fp8"], modes=["burst"], budget_s=2,
                     plan=SMALL_CPU_PLAN)
    assert [(p.format, p.status) for p in run.peaks] == [("fp32", "ok"), ("fp8_e4m3", "skipped")]
    assert run.peaks[1].reason == "fp8_e4m3 GEMM needs a CUDA GPU; this device is a CPU"
    assert any("--mode burst has no meaning on a CPU" in n for n in run.notes)
    skipped = [r for r in read_records(run.records_path) if r.status == "skipped"]
    assert skipped[0].search.phase == "skipped" and skipped[0].format == "fp8_e4m3"


def test_an_out_of_memory_shape_is_a_failed_record_and_the_search_goes_on(tmp_path, cpu, stub_landscape, monkeypatch):
    real = G.TorchGemm.__post_init__

    def oom_for_big(self):
        if self.m * self.n * self.k > 512 * 1024 * 768:
            raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB")
        real(self)

    monkeypatch.setattr(G.TorchGemm, "__post_init__", oom_for_big)
    run = P.run_peak(tmp_path / "pk", device=cpu, plan=SMALL_CPU_PLAN, budget_s=120)
    recs = read_records(run.records_path)
    failed = [r for r in recs if r.status == "failed"]
    assert failed and all(r.reason.startswith("out of memory:") for r in failed)
    assert run.peaks[0].status == "ok"
    w = run.peaks[0].best_record.workload
    assert w.m * w.n * w.k <= 512 * 1024 * 768


def test_unknown_format_lists_the_accepted_ones(tmp_path, cpu):
    from truepeak.errors import ConfigError

    with pytest.raises(ConfigError, match="known: fp32, tf32, bf16") as info:
        P.run_peak(tmp_path / "pk", device=cpu, formats=["fp9"])
    assert info.value.field == "formats"


def test_bad_budget_and_mode_are_refused(tmp_path, cpu):
    from truepeak.errors import TruepeakError

    with pytest.raises(TruepeakError, match="--budget must be > 0"):
        P.run_peak(tmp_path / "pk", device=cpu, budget_s=0)
    with pytest.raises(TruepeakError, match="accepted: sustained .* burst .* both"):
        P.run_peak(tmp_path / "pk2", device=cpu, modes=["turbo"])


@pytest.mark.gpu
def test_gpu_search_smoke_both_modes_labelled(tmp_path):
    plan = P.SearchPlan(((2048, 2048, 2048), (4096, 4096, 4096)), steps=(1024,), max_evals=4, top_k=1)
    quick = P.PeakBudgets(0.05, 0.05, 0.1, 0.1, settle_s=0.2)
    run = P.run_peak(tmp_path / "pk", device="cuda", formats=["bf16"], modes=["both"], plan=plan,
                     budgets={"burst": quick, "sustained": quick})
    assert [(p.mode, p.status) for p in run.peaks] == [("sustained", "ok"), ("burst", "ok")]
    for p in run.peaks:
        rec = p.best_record
        assert rec.mode == p.mode and rec.measurement.mode == p.mode
        if rec.measurement.telemetry is not None:
            assert rec.derived.sm_clock_hz and rec.derived.peak_at_clock_flop_per_s


def test_an_existing_results_file_is_not_appended_to(tmp_path, cpu):
    from truepeak.errors import TruepeakError

    (tmp_path / "pk").mkdir()
    (tmp_path / "pk" / "results.jsonl").write_text('{"schema_version": 2}\n')
    with pytest.raises(TruepeakError, match="already holds results; pass --resume to continue it, or choose another "
                                            "--out"):
        P.run_peak(tmp_path / "pk", device=cpu)


def test_ctrl_c_writes_peak_json_with_the_best_so_far_and_resume_finishes(tmp_path, cpu, stub_landscape,
                                                                           monkeypatch, interrupt_gemm):
    out = tmp_path / "pk"
    with monkeypatch.context() as mp:
        interrupt_gemm(mp, 3)  # Ctrl-C while the third shape is measured
        with pytest.raises(P.PeakInterrupted) as info:
            P.run_peak(out, device=cpu, formats=["fp32", "fp8"], plan=SMALL_CPU_PLAN, budget_s=120)
    run = info.value.run
    assert isinstance(info.value, KeyboardInterrupt) and run.interrupted
    assert len(run.records) == 2 and read_records(out / "results.jsonl") == run.records
    (fp,) = run.peaks
    assert (fp.format, fp.mode, fp.status) == ("fp32", "cpu", "interrupted")
    assert fp.reason == "interrupted after 2 shapes; best so far, not re-measured"
    assert run.not_searched == [("fp8_e4m3", "cpu")]
    answer = json.loads((out / "peak.json").read_text())
    assert answer["interrupted"] is True and answer["not_searched"] == [{"format": "fp8_e4m3", "mode": "cpu"}]
    (p,) = answer["peaks"]
    assert (p["status"], p["shape"], p["remeasured"], p["evaluations"]) == ("interrupted", [1024, 1024, 512], False, 2)
    assert p["flop_per_s"] == pytest.approx(BEST_OF_TWO)

    resumed = P.run_peak(out, device=cpu, formats=["fp32", "fp8"], plan=SMALL_CPU_PLAN, budget_s=120, resume=True)
    assert [(q.format, q.status, q.resumed) for q in resumed.peaks] == [("fp32", "ok", False),
                                                                       ("fp8_e4m3", "skipped", False)]
    assert resumed.peaks[0].summary()["shape"] == [768, 1024, 640]  # the optimum, as an uninterrupted search finds
    answer = json.loads((out / "peak.json").read_text())
    assert answer["interrupted"] is False and answer["not_searched"] == []
    recs = read_records(out / "results.jsonl")
    assert len(recs) == 2 + len(resumed.records)  # the interrupted attempt's records stay, the new ones follow
    assert recs[2].search.eval == 0 and recs[-1].search.phase == "skipped"

    timed = len(stub_landscape)
    again = P.run_peak(out, device=cpu, formats=["fp32", "fp8"], plan=SMALL_CPU_PLAN, budget_s=120, resume=True)
    assert len(stub_landscape) == timed and again.records == []  # both searches finished: nothing measured
    assert [(q.status, q.resumed) for q in again.peaks] == [("ok", True), ("skipped", True)]
    assert again.peaks[0].summary() | {"elapsed_s": 0, "resumed": False} == \
        resumed.peaks[0].summary() | {"elapsed_s": 0, "resumed": False}


def test_resume_refuses_a_finished_search_made_with_another_budget(tmp_path, cpu, stub_landscape):
    from truepeak.errors import TruepeakError

    out = tmp_path / "pk"
    P.run_peak(out, device=cpu, plan=TWO_SHAPES, budget_s=120)
    with pytest.raises(TruepeakError) as info:
        P.run_peak(out, device=cpu, plan=TWO_SHAPES, budget_s=60, resume=True)
    assert str(info.value) == (f"cannot --resume {out / 'results.jsonl'}: its fp32 cpu search was made with different "
                               "settings: budget_s (there: 120.0, now: 60.0); rerun with the same --budget and "
                               "--device, or choose another --out")


def test_a_search_with_no_shape_that_ran_is_searched_again_on_resume(tmp_path, cpu, stub_landscape, monkeypatch):
    """Like `truepeak run --resume` with failed cases: a search whose every shape failed has no final
    re-measurement, so it is not finished."""
    out = tmp_path / "pk"
    def no_blas(self):
        raise RuntimeError("no BLAS")

    with monkeypatch.context() as mp:
        mp.setattr(G.TorchGemm, "__post_init__", no_blas)
        run = P.run_peak(out, device=cpu, plan=TWO_SHAPES, budget_s=120)
    assert run.peaks[0].status == "failed" and len(run.records) == 2  # the 2 coarse shapes, each failed
    again = P.run_peak(out, device=cpu, plan=TWO_SHAPES, budget_s=120, resume=True)
    assert again.peaks[0].status == "ok" and not again.peaks[0].resumed
    s = again.peaks[0].summary()
    assert s["shape"] == [1024, 1024, 512] and s["flop_per_s"] == pytest.approx(BEST_OF_TWO)
