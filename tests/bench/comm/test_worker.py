"""The collective worker (truepeak.bench.comm.worker) from hand-made values: its records, the exact-input modulus and
the window sizes; no torch, no ranks."""

from __future__ import annotations

import pytest

from truepeak import records as rec
from truepeak.comm.sweep import Case
from truepeak.bench.comm.worker import _case_record, _fit_record, eager_calls, graph_calls, value_modulus

RUN = {"iters": 20, "warmup": 5, "n_ranks": 2}
ALL_REDUCE = Case(op="all_reduce", count=524_288, bytes=1_048_576, requested_bytes=1_000_000, dtype="bf16", n_ranks=2)


def timed(wrong=0, medians=(24.1e-6, 24.6e-6)):
    return {"per_rank_median_s": list(medians), "samples_s": [24.6e-6] * 20, "calls_per_sample": 1, "wrong": wrong,
            "checked": 1_048_576}


def test_a_right_collective_is_ok_with_nccl_tests_bandwidths():
    r = _case_record(rec, ALL_REDUCE, "eager", timed(), "", "nccl", None, RUN)
    assert r.status == "ok" and r.kind == "collective" and r.mode == "eager"
    # the time is the slowest rank's median; algbw = S / t = 1,048,576 / 24.6e-6 = 42.63e9 B/s; busbw = algbw x
    # 2(n-1)/n = algbw at n = 2
    assert r.time_s == 24.6e-6 and r.measurement.mean_over_ranks_s == pytest.approx(24.35e-6)
    assert r.derived.algbw_bytes_per_s == pytest.approx(42.625e9, rel=1e-4)
    assert r.derived.busbw_bytes_per_s == r.derived.algbw_bytes_per_s and r.derived.bus_factor == 1.0
    assert r.derived.requested_bytes == 1_000_000
    assert r.correctness == rec.Correctness(wrong=0, checked=1_048_576, passed=True)


def test_wrong_elements_make_a_failed_record_without_bandwidths():
    r = _case_record(rec, ALL_REDUCE, "eager", timed(wrong=3), "", "nccl", None, RUN)
    assert r.status == "failed" and r.reason == "3 of 1048576 output elements wrong"
    assert r.derived is None and r.correctness.passed is False and r.time_s == 24.6e-6


def test_a_case_that_raised_is_failed_with_its_reason():
    r = _case_record(rec, ALL_REDUCE, "graph", None, "RuntimeError: NCCL error", "nccl", None, RUN)
    assert r.status == "failed" and r.measurement is None and r.reason == "RuntimeError: NCCL error"
    assert r.key == ('collective|{"bytes":1048576,"count":524288,"dtype":"bf16","n_ranks":2,"op":"all_reduce"}|nccl|'
                     'bf16|graph')


def test_the_fit_and_a_fit_that_cannot_be_made():
    # t = 10 us + S / 100 GB/s exactly (bus factor 1 at n = 2): the fit gives alpha 10 us and busbw 100e9 B/s
    pts = [(s, 10e-6 + s / 100e9) for s in (1024, 2**20, 2**30)]
    r = _fit_record(rec, "all_reduce", "eager", pts, 2, "bf16", "nccl", None, RUN)
    assert r.status == "ok" and r.correctness is None  # the points are right records; they carry the checks
    assert r.derived.alpha_s == pytest.approx(10e-6) and r.derived.busbw_bytes_per_s == pytest.approx(100e9)
    assert r.derived.points == 3 and r.derived.max_rel_residual == pytest.approx(0, abs=1e-9)
    assert r.measurement.points[0] == (1024, 10e-6 + 1024 / 100e9) and r.time_s is None
    assert (r.workload.min_bytes, r.workload.max_bytes) == (1024, 2**30)
    one = _fit_record(rec, "all_reduce", "eager", pts[:1], 2, "bf16", "nccl", None, RUN)
    assert one.status == "skipped" and one.measurement is None and one.reason


def test_exact_check_modulus_and_window_sizes():
    # bf16 holds integers up to 256 exactly: sums over 2 ranks of values < 64 stay exact; 8 ranks -> m = 32.
    assert value_modulus("bf16", 2) == 64 and value_modulus("bf16", 8) == 32 and value_modulus("int8", 64) == 2
    # Eager windows: ~500 us, 1..20 calls; graphs: ~200 us, 1..20 calls.
    assert eager_calls(20e-6) == 20 and eager_calls(100e-6) == 5 and eager_calls(3e-3) == 1
    assert graph_calls(10e-6) == 20 and graph_calls(50e-6) == 4 and graph_calls(3e-3) == 1 and graph_calls(None) == 4
