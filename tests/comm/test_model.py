"""truepeak.comm.model: nccl-tests definitions (NVIDIA/nccl-tests doc/PERFORMANCE.md), cases C19/C20, the α–β fit."""

from __future__ import annotations

import math
import random
import subprocess
import sys
from pathlib import Path

import pytest

from truepeak.comm import model as cm
from truepeak.errors import TruepeakError, UnknownNameError

GB = 1e9


def test_c19_pcie_8_gpus_busbw_28_is_algbw_16():
    # 8 GPUs PCIe, ring AR busbw 28 GB/s -> algbw = 28 * 8 / (2 * 7) = 16.0 GB/s; 1 GB takes 1e9 / 16e9 = 62.5 ms.
    algbw = cm.algbw_from_busbw("all_reduce", 8, 28 * GB)
    assert algbw == pytest.approx(16.0 * GB)
    m = cm.CollectiveModel(0.0, 28 * GB, "all_reduce", 8)
    assert m.time(1e9) == pytest.approx(62.5e-3)
    assert m.algbw(1e9) == pytest.approx(16.0 * GB)


def test_c19_pcie_4_gpus_busbw_35_is_algbw_23_3():
    # 4 GPUs at busbw 35 -> algbw = 35 * 4 / 6 = 23.33 GB/s; 1 GB / 23.33 GB/s = 42.86 ms.
    assert cm.algbw_from_busbw("allreduce", 4, 35 * GB) == pytest.approx(23.333 * GB, rel=1e-4)
    assert cm.CollectiveModel(0.0, 35 * GB, "all_reduce", 4).time(1e9) == pytest.approx(42.857e-3, rel=1e-4)


def test_c19_busbw_not_scaled_with_gpu_count():
    # Same PCIe busbw on 8 GPUs gives LOWER algbw than on 4 (factor 1.75 vs 1.5): more GPUs, slower allreduce.
    assert cm.algbw_from_busbw("all_reduce", 8, 30 * GB) < cm.algbw_from_busbw("all_reduce", 4, 30 * GB)
    assert cm.default_model("all_reduce", 8, "pcie").busbw_B_per_s == 24 * GB
    assert cm.default_model("all_reduce", 4, "pcie").busbw_B_per_s == 35 * GB


def test_c20_small_allreduce_latency_per_token():
    # 4 KB allreduce 19.4 us, ~100 per token -> 1.94 ms; 1.94 / 10.9 = 17.8 %, 1.94 / 10.3 = 18.8 %.
    m = cm.CollectiveModel(19.4e-6, 35 * GB, "all_reduce", 4)
    per_token = cm.step_time(cm.CollectiveModel(19.4e-6, 1e30, "all_reduce", 4), 4000, 100)
    assert per_token == pytest.approx(1.94e-3)
    assert per_token / 10.9e-3 == pytest.approx(0.178, abs=5e-4)
    assert per_token / 10.3e-3 == pytest.approx(0.188, abs=5e-4)
    # With the bandwidth term the 4 KB message adds 4000 * 1.5 / 35e9 = 0.17 ns: alpha is 99.999 % of it.
    assert m.time(4000) == pytest.approx(19.4e-6 + 4000 * 1.5 / 35e9)
    assert cm.default_model("all_reduce", 4, "pcie").alpha_s == pytest.approx(19.4e-6)


FACTORS = {"all_reduce": lambda n: 2 * (n - 1) / n, "all_gather": lambda n: (n - 1) / n,
           "reduce_scatter": lambda n: (n - 1) / n, "all_to_all": lambda n: (n - 1) / n,
           "broadcast": lambda n: 1.0, "reduce": lambda n: 1.0, "send_recv": lambda n: 1.0}


@pytest.mark.parametrize("op", cm.OPS)
@pytest.mark.parametrize("n", range(2, 9))
def test_busbw_algbw_round_trip_every_op_and_n(op, n):
    assert cm.busbw_factor(op, n) == pytest.approx(FACTORS[op](n))
    algbw = 100 * GB
    busbw = cm.busbw_from_algbw(op, n, algbw)
    assert busbw == pytest.approx(algbw * FACTORS[op](n))
    assert cm.algbw_from_busbw(op, n, busbw) == pytest.approx(algbw)


def test_factor_values_by_hand():
    assert cm.busbw_factor("all_reduce", 2) == 1.0
    assert cm.busbw_factor("all_reduce", 8) == 1.75
    assert cm.busbw_factor("all_gather", 2) == 0.5
    assert cm.busbw_factor("alltoall", 8) == 0.875
    assert cm.busbw_factor("all_reduce", 1) == 0.0
    with pytest.raises(TruepeakError, match="bus factor 0"):
        cm.algbw_from_busbw("all_reduce", 1, 1e9)


def test_total_bytes_nccl_tests_definitions():
    # bf16 (2 B), n = 4: AR count*2; AG sendcount*4*2; RS recvcount*4*2; A2A per-peer count*4*2.
    assert cm.total_bytes("all_reduce", 1024, 4, 2) == 2048
    assert cm.total_bytes("all_gather", 1024, 4, 2) == 8192
    assert cm.total_bytes("reduce_scatter", 1024, 4, 2) == 8192
    assert cm.total_bytes("all_to_all", 1024, 4, 2) == 8192
    assert cm.total_bytes("broadcast", 1024, 4, 2) == 2048
    # 1 MiB all_gather on 2 ranks in bf16: each rank sends 262144 elements.
    assert cm.count_for_bytes("all_gather", 2**20, 2, 2) == (262144, 2**20)
    # 1000 B all_gather on 3 ranks in fp32: unit 12 B -> 83 elements, 996 B (rounded down).
    assert cm.count_for_bytes("all_gather", 1000, 3, 4) == (83, 996)
    assert cm.count_for_bytes("all_reduce", 1, 2, 4) == (1, 4)


def test_unknown_op_lists_valid_ones():
    with pytest.raises(UnknownNameError, match="valid ops: all_reduce, all_gather"):
        cm.canonical_op("allreduc3")
    assert cm.canonical_op("AllGather") == "all_gather"
    assert cm.canonical_op("a2a") == "all_to_all"
    with pytest.raises(UnknownNameError, match="valid: bf16"):
        cm.dtype_bytes("fp7")
    assert cm.dtype_bytes("bfloat16") == 2


def test_dtype_aliases_have_one_canonical_name():
    # the names the worker knows (torch dtypes, exact-integer limits) are DTYPE_BYTES' keys only
    assert [cm.canonical_dtype(d) for d in ("bfloat16", " BF16 ", "half", "float", "double", "int8")] == [
        "bf16", "bf16", "fp16", "fp32", "fp64", "int8"]
    with pytest.raises(UnknownNameError, match="unknown collective dtype 'fp7'; valid: bf16"):
        cm.canonical_dtype("fp7")


def test_model_time_and_algbw():
    m = cm.CollectiveModel(20e-6, 300 * GB, "all_gather", 2)
    # 1 GiB all_gather on 2: 20 us + 2^30 * 0.5 / 300e9 = 20 us + 1789.6 us.
    assert m.time(2**30) == pytest.approx(20e-6 + 2**30 * 0.5 / 300e9)
    assert m.algbw(2**30) == pytest.approx(2**30 / m.time(2**30))
    assert m.busbw(2**30) == pytest.approx(0.5 * m.algbw(2**30))
    assert m.algbw(0) == 0.0
    with pytest.raises(TruepeakError, match="busbw_B_per_s"):
        cm.CollectiveModel(1e-6, 0.0, "all_reduce", 2)
    with pytest.raises(TruepeakError, match="alpha_s"):
        cm.CollectiveModel(-1e-6, 1e9, "all_reduce", 2)


def test_default_models_sources():
    m = cm.default_model("all_reduce", 2, "nvlink", device="NVIDIA H200")
    assert (m.alpha_s, m.busbw_B_per_s) == (16.6e-6, 325.2e9)
    assert "docs/results/h200x2/README.md" in m.source   # the nccl-tests table these numbers come from
    assert (Path(__file__).parents[2] / "docs/results/h200x2/README.md").is_file()
    assert cm.default_model("all_to_all", 2, "nvlink", device="h200").busbw_B_per_s == 330.9e9
    assert cm.default_model("all_reduce", 8, "nvlink").busbw_B_per_s == 370e9
    assert "nccl-tests#212" in cm.default_model("all_reduce", 8).source
    assert cm.default_model("all_gather", 8, "pcie").busbw_B_per_s == 23e9
    with pytest.raises(UnknownNameError, match="nvlink, pcie"):
        cm.default_model("all_reduce", 8, "infiniband")
    with pytest.raises(TruepeakError, match="n >= 2"):
        cm.default_model("all_reduce", 1)


SIZES = [2**k for k in range(10, 31)]  # 1 KiB .. 1 GiB, the truepeak comm default sweep


@pytest.mark.parametrize(("alpha", "busbw", "op", "n"), [
    (18e-6, 325e9, "all_reduce", 2), (12e-6, 274e9, "all_gather", 2), (25e-6, 24e9, "all_reduce", 8),
    (5e-6, 330e9, "all_to_all", 8),
])
def test_fit_recovers_exact_alpha_beta(alpha, busbw, op, n):
    truth = cm.CollectiveModel(alpha, busbw, op, n)
    fit = cm.fit_alpha_beta(SIZES, [truth.time(s) for s in SIZES], op, n, mode="eager")
    assert fit.alpha_s == pytest.approx(alpha, rel=1e-9)
    assert fit.busbw_B_per_s == pytest.approx(busbw, rel=1e-9)
    assert (fit.op, fit.n, fit.mode) == (op, n, "eager")


def test_fit_recovers_alpha_beta_from_noisy_data():
    # 3 % multiplicative noise: the relative (1/t^2) fit keeps alpha within 5 % and busbw within 3 %.
    rng = random.Random(6)
    truth = cm.CollectiveModel(18e-6, 325e9, "all_reduce", 2)
    times = [truth.time(s) * (1 + rng.uniform(-0.03, 0.03)) for s in SIZES]
    fit = cm.fit_alpha_beta(SIZES, times, "all_reduce", 2)
    assert fit.alpha_s == pytest.approx(18e-6, rel=0.05)
    assert fit.busbw_B_per_s == pytest.approx(325e9, rel=0.03)


def test_relative_fit_keeps_small_message_latency_where_unweighted_loses_it():
    # Large messages 1 % slow: unweighted least squares shifts alpha by microseconds (a 1 GiB residual of 33 us
    # outweighs every small point); the relative fit keeps alpha at 18 us within 2 %.
    truth = cm.CollectiveModel(18e-6, 325e9, "all_reduce", 2)
    times = [truth.time(s) * (1.01 if s >= 2**26 else 1.0) for s in SIZES]
    rel = cm.fit_alpha_beta(SIZES, times, "all_reduce", 2)
    plain = cm.fit_alpha_beta(SIZES, times, "all_reduce", 2, relative=False)
    assert rel.alpha_s == pytest.approx(18e-6, rel=0.02)
    assert abs(plain.alpha_s - 18e-6) > 5 * abs(rel.alpha_s - 18e-6)


def test_fit_bad_input():
    with pytest.raises(TruepeakError, match="two distinct"):
        cm.fit_alpha_beta([1024, 1024], [1e-5, 1e-5], "all_reduce", 2)
    with pytest.raises(TruepeakError, match="one time per size"):
        cm.fit_alpha_beta([1024, 2048], [1e-5], "all_reduce", 2)
    with pytest.raises(TruepeakError, match="no bandwidth"):
        cm.fit_alpha_beta([1024, 2048, 4096], [3e-5, 2e-5, 1e-5], "all_reduce", 2)
    with pytest.raises(TruepeakError, match="bus factor is 0"):
        cm.fit_alpha_beta([1024, 2048], [1e-5, 2e-5], "all_reduce", 1)


def test_models_from_collective_fit_records():
    from truepeak.records import Record

    fit = {"op": "all_reduce", "n_ranks": 2, "min_bytes": 1024, "max_bytes": 2**30, "dtype": "bf16"}
    recs = [Record.from_dict(r) for r in (
        {"schema_version": 3, "kind": "collective", "status": "skipped", "reason": "x",
         "workload": {"op": "all_reduce", "bytes": 1024, "count": 512, "dtype": "bf16", "n_ranks": 2}},
        {"schema_version": 3, "kind": "collective_fit", "status": "ok", "mode": "eager", "timestamp": "t",
         "workload": fit, "measurement": {"mode": "eager", "points": [[1024, 17e-6]]},
         "derived": {"alpha_s": 17e-6, "busbw_bytes_per_s": 320e9}},
        {"schema_version": 3, "kind": "collective_fit", "status": "skipped", "reason": "x", "mode": "graph",
         "workload": fit},
    )]
    fits = cm.models_from_records(recs)
    assert list(fits) == [("all_reduce", 2, "eager")]
    assert fits[("all_reduce", 2, "eager")].busbw_B_per_s == 320e9


def test_model_imports_without_torch_or_numpy():
    code = ("import sys, truepeak.comm, truepeak.comm.model; "
            "print('torch' in sys.modules, 'numpy' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         env={"PYTHONPATH": str(__import__("pathlib").Path(cm.__file__).parents[2])})
    assert out.stdout.split() == ["False", "False"]
    assert math.isfinite(cm.default_model("all_reduce", 8).time(12 * 1024))


def test_committed_h200x2_results_feed_the_planner():
    # docs/results/h200x2/results.jsonl (truepeak comm on 2x H200, --api nccl): one fit per op and mode, and the fitted
    # graph-mode alpha is the small-message floor measured there (7-11 us per call), far below the eager one.
    from pathlib import Path

    path = Path(__file__).resolve().parents[2] / "docs" / "results" / "h200x2" / "results.jsonl"
    if not path.exists():
        pytest.skip("no committed h200x2 results")
    fits = cm.load_fits(str(path))
    assert set(fits) == {(op, 2, mode) for op in cm.MEASURED_OPS for mode in ("eager", "graph")}
    for op in cm.MEASURED_OPS:
        graph, eager = fits[(op, 2, "graph")], fits[(op, 2, "eager")]
        assert 7e-6 < graph.alpha_s < 11e-6 < 20e-6 < eager.alpha_s
        assert 200e9 < graph.busbw_B_per_s and 250e9 < eager.busbw_B_per_s < 350e9
