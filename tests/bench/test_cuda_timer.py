"""cuda_timer: rotation-set arithmetic and sample planning (pure), the timing flow against a simulated GPU, and real
GPU runs (marked ``gpu``, skipped without CUDA)."""

from __future__ import annotations

import contextlib
import math
import types

import pytest

import truepeak.bench.cuda_timer as ct
from truepeak.bench.cuda_timer import (
    eager_calls_per_sample,
    graph_calls_per_sample,
    plan_rotation,
    planned_samples,
    rotation_sets,
    sleep_cycles,
    time_cuda,
)
from truepeak.errors import MeasurementError, TruepeakError, UnsupportedError

H200_L2 = 62_914_560  # bytes, as the device reports (60 MiB), not the 50 MB product figure
MiB = 1 << 20


# -- rotation sets -----------------------------------------------------------------------------------------------------
def test_rotation_sets_h200_gemm_8192_bf16():
    a = b = c = 8192 * 8192 * 2
    assert a == 134_217_728
    assert rotation_sets(a + b + c, H200_L2) == 2  # one set is already 6.4x L2; the guideline still wants 2


def test_rotation_sets_64mib_and_1mib():
    # 2 x L2 = 125,829,120 B; 64 MiB = 67,108,864 B -> ceil(1.875) = 2; 1 MiB -> exactly 120
    assert rotation_sets(64 * MiB, H200_L2) == 2
    assert rotation_sets(1 * MiB, H200_L2) == 120
    assert rotation_sets(1 * MiB + 1, H200_L2) == 120
    assert rotation_sets(1 * MiB - 1, H200_L2) == 121


def test_rotation_sets_min_sets_and_no_l2():
    assert rotation_sets(1, 0) == 2
    assert rotation_sets(1 * MiB, H200_L2, min_sets=200) == 200
    assert rotation_sets(10, 0, min_sets=1) == 1


@pytest.mark.parametrize("args", [(0, H200_L2), (-5, H200_L2), (1, -1), (1, 1, 0)])
def test_rotation_sets_bad_arguments(args):
    with pytest.raises(TruepeakError):
        rotation_sets(*args)


def test_C10_plan_rotation_cap_is_flagged():
    # 1 MiB sets want 120 (= 2x L2); with 64 MiB free at 80 % only 51 fit -> capped and not cold
    plan = plan_rotation(1 * MiB, H200_L2, free_bytes=64 * MiB)
    assert plan.wanted_sets == 120 and plan.n_sets == 51 and plan.capped and not plan.cold
    assert "below 2x L2" in plan.note and "51" in plan.note
    ok = plan_rotation(1 * MiB, H200_L2, free_bytes=140 * (1 << 30))
    assert ok.n_sets == 120 and not ok.capped and ok.cold and ok.note == ""
    assert ok.total_bytes == 120 * MiB


def test_plan_rotation_max_sets_and_no_room():
    plan = plan_rotation(1 * MiB, H200_L2, max_sets=16)
    assert plan.n_sets == 16 and plan.capped and "max_sets=16" in plan.note
    with pytest.raises(UnsupportedError, match="does not fit"):
        plan_rotation(10 * (1 << 30), H200_L2, free_bytes=4 * (1 << 30))


# -- sample planning ---------------------------------------------------------------------------------------------------
def test_graph_calls_per_sample():
    assert graph_calls_per_sample(1e-6, 1) == 500  # 0.5 ms replay
    assert graph_calls_per_sample(1e-6, 120) == 600  # rounded up to a multiple of the sets
    assert graph_calls_per_sample(1e-8, 1) == ct.MAX_GRAPH_CALLS
    assert graph_calls_per_sample(1e-8, 5000) == 5000  # cap raised to cover every set once
    assert graph_calls_per_sample(40e-6, 2) == 14  # ceil(12.5) = 13 -> 14


def test_eager_calls_and_planned_samples_and_sleep_cycles():
    assert eager_calls_per_sample(200e-6) == 1
    assert eager_calls_per_sample(2e-6) == 25
    assert planned_samples(1.0, 1e-3, 10, 100_000) == 1000
    assert planned_samples(1.0, 1.0, 10, 100_000) == 10
    assert planned_samples(1.0, 1e-7, 10, 100_000) == 100_000
    assert sleep_cycles(0.0015, 1.98e9) == 2_970_000
    assert sleep_cycles(1e-12, 1e9) == 1


# -- the timing flow on a simulated GPU --------------------------------------------------------------------------------
class FakeGPU:
    """A one-stream GPU timeline: launches add their duration; events read the timeline; graphs replay sums.

    :meth:`now` is the host clock of this simulated machine (the host waits for every launch, so it reads the timeline);
    :meth:`time_cuda` passes it as ``timer``, so warm-up length and sample counts depend on simulated time only, never
    on how loaded the machine running the tests is.
    """

    def __init__(self, clock_hz: float = 1.5e9, fail_capture: bool = False, has_sleep: bool = True):
        self.t = 0.0
        self.clock_hz = clock_hz
        self.capturing: list | None = None
        self.fail_capture = fail_capture
        self.syncs = 0
        self.replays = 0
        self.sleeps: list[int] = []
        self.torch = self._make_torch(has_sleep)

    def now(self) -> float:
        return self.t

    def time_cuda(self, fn, **kwargs):
        return time_cuda(fn, timer=self.now, **kwargs)

    def launch(self, seconds: float) -> None:
        if self.capturing is not None:
            if self.fail_capture:
                raise RuntimeError("CUDA error: operation not permitted when stream is capturing")
            self.capturing.append(seconds)
        else:
            self.t += seconds

    def _make_torch(self, has_sleep: bool) -> types.SimpleNamespace:
        gpu = self

        class Event:
            def __init__(self, enable_timing=False):
                assert enable_timing
                self.t = None

            def record(self, stream=None):
                assert gpu.capturing is None
                self.t = gpu.t

            def synchronize(self):
                gpu.syncs += 1

            def elapsed_time(self, other):
                return (other.t - self.t) * 1e3  # ms, like torch

        class Stream:
            def __init__(self, device=None):
                self.device = device

            def wait_stream(self, other):
                pass

        class CUDAGraph:
            def __init__(self):
                self.durations: list[float] = []

            def replay(self):
                gpu.replays += 1
                gpu.t += sum(self.durations)

            def reset(self):
                self.durations = []

        class graph:
            def __init__(self, g, pool=None, stream=None, capture_error_mode="global"):
                assert isinstance(stream, Stream)
                self.g = g

            def __enter__(self):
                gpu.capturing = self.g.durations

            def __exit__(self, *exc):
                gpu.capturing = None

        def _sleep(cycles):
            gpu.sleeps.append(cycles)
            gpu.launch(cycles / gpu.clock_hz)

        def synchronize(device=None):
            gpu.syncs += 1

        cuda = types.SimpleNamespace(
            is_available=lambda: True,
            device_count=lambda: 1,
            device=lambda d: contextlib.nullcontext(),
            Stream=Stream,
            stream=lambda s: contextlib.nullcontext(),
            current_stream=lambda device=None: Stream(device),
            Event=Event,
            synchronize=synchronize,
            CUDAGraph=CUDAGraph,
            graph=graph,
            _get_nvml_device_index=lambda d: d,
        )
        if has_sleep:
            cuda._sleep = _sleep
        return types.SimpleNamespace(cuda=cuda, __version__="fake", version=types.SimpleNamespace(cuda="13.0"))


@pytest.fixture
def fake_gpu(monkeypatch):
    def make(**kwargs) -> FakeGPU:
        gpu = FakeGPU(**kwargs)
        monkeypatch.setattr(ct, "require", lambda module, purpose, install=None: gpu.torch)
        return gpu

    return make


def test_sustained_eager_for_long_kernels(fake_gpu):
    gpu = fake_gpu()
    seen = []

    def fn(i):
        seen.append(i)
        gpu.launch(200e-6)

    m = gpu.time_cuda(fn, n_sets=3, warmup_s=0.01, budget_s=0.01, telemetry=False)
    assert m.mode == "sustained" and not m.graph and m.calls_per_sample == 1 and m.n_sets == 3
    assert m.n_samples == 50  # 10 ms budget / 200 us
    assert all(s == pytest.approx(200e-6) for s in m.samples_s)
    assert m.warmup_s >= 0.01 and m.burst_gap_s is None and m.warnings == []
    assert set(seen) == {0, 1, 2}
    assert seen[:7] == [0, 1, 2, 0, 1, 2, 0]  # rotation carries on across calls and samples
    assert gpu.replays == 0


def test_host_stalls_do_not_change_the_plan(fake_gpu):
    """A loaded CI machine stalls the test process; the plan follows the simulated clock, so counts stay exact."""
    import time

    gpu = fake_gpu()
    calls = []

    def fn(i):
        calls.append(i)
        if len(calls) in (3, 40):
            time.sleep(0.005)  # a 5 ms host stall during the estimate and the warm-up
        gpu.launch(200e-6)

    m = gpu.time_cuda(fn, n_sets=3, warmup_s=0.01, budget_s=0.01, telemetry=False)
    calm = gpu.time_cuda(lambda i: gpu.launch(200e-6), n_sets=3, warmup_s=0.01, budget_s=0.01, telemetry=False)
    assert m.n_samples == calm.n_samples == 50
    assert m.warmup_s == pytest.approx(calm.warmup_s)  # simulated seconds: the stalls are invisible


def test_short_kernels_use_a_cuda_graph(fake_gpu):
    gpu = fake_gpu()
    m = gpu.time_cuda(lambda i: gpu.launch(2e-6), n_sets=3, warmup_s=0.01, budget_s=0.01, min_samples=5,
                      telemetry=False)
    assert m.graph
    assert m.calls_per_sample == graph_calls_per_sample(2e-6, 3) == 252
    assert all(s == pytest.approx(2e-6) for s in m.samples_s)
    assert any("CUDA-graph replays of 252" in n for n in m.notes)
    assert gpu.replays > m.n_samples  # warm-up replays too


def test_graph_can_be_forced_off_and_on(fake_gpu):
    gpu = fake_gpu()
    m = gpu.time_cuda(lambda i: gpu.launch(2e-6), n_sets=2, warmup_s=0, budget_s=0.005, graph=False, telemetry=False)
    assert not m.graph and m.calls_per_sample == 25
    m = gpu.time_cuda(lambda i: gpu.launch(1e-3), n_sets=2, warmup_s=0, budget_s=0.005, graph=True, telemetry=False)
    assert m.graph and m.calls_per_sample == 2
    assert m.samples_s[0] == pytest.approx(1e-3)


def test_graph_capture_failure_falls_back_to_eager(fake_gpu):
    gpu = fake_gpu(fail_capture=True)
    m = gpu.time_cuda(lambda i: gpu.launch(2e-6), n_sets=2, warmup_s=0, budget_s=0.005, telemetry=False)
    assert not m.graph and m.calls_per_sample == 25
    assert any("CUDA graph capture failed" in n and "eager" in n for n in m.notes)
    assert all(s == pytest.approx(2e-6) for s in m.samples_s)


def test_burst_gap_is_outside_the_event_pair(fake_gpu):
    gpu = fake_gpu(clock_hz=1.5e9)
    m = gpu.time_cuda(lambda i: gpu.launch(200e-6), n_sets=2, mode="burst", warmup_s=0, budget_s=0.05, telemetry=False)
    assert m.mode == "burst" and m.burst_gap_s == 0.0015
    assert all(s == pytest.approx(200e-6) for s in m.samples_s)  # the gap is not timed
    assert gpu.sleeps[-1] == 2_250_000  # 1.5 ms at the calibrated 1.5 GHz
    assert m.n_samples == math.ceil(0.05 / 1.7e-3)  # planned with the gap included
    assert any("burst gap" in n for n in m.notes)


def test_burst_without_sleep_uses_host_gap(fake_gpu):
    gpu = fake_gpu(has_sleep=False)
    m = gpu.time_cuda(lambda i: gpu.launch(200e-6), n_sets=2, mode="burst", warmup_s=0, budget_s=0.002,
                  burst_gap_s=1e-4, telemetry=False)
    assert any("host sleep" in n for n in m.notes)
    assert all(s == pytest.approx(200e-6) for s in m.samples_s)


def test_telemetry_unavailable_is_a_note(fake_gpu, monkeypatch):
    import sys

    gpu = fake_gpu()
    monkeypatch.setitem(sys.modules, "pynvml", None)
    m = gpu.time_cuda(lambda i: gpu.launch(1e-3), n_sets=2, warmup_s=0, budget_s=0.01)
    assert m.telemetry is None
    assert any(n.startswith("no telemetry:") for n in m.notes)


def test_telemetry_is_attached_from_nvml(fake_gpu, fake_pynvml):
    gpu = fake_gpu()
    calls = fake_pynvml.calls
    m = gpu.time_cuda(lambda i: gpu.launch(1e-3), n_sets=2, warmup_s=0, budget_s=0.05)
    assert m.telemetry is not None and m.telemetry.n_samples >= 2
    assert m.telemetry.sm_clock_median_hz == 1455e6 and m.telemetry.reasons == {"power cap": 1.0}
    assert "low_clock" in m.warning_codes  # 1455 of 1980 MHz = 73 %, power cap named
    assert calls["init"] == 1 and calls["max_clock"] == 1


def test_errors_from_fn_propagate(fake_gpu):
    gpu = fake_gpu()

    def fn(i):
        raise ValueError("bad kernel")

    with pytest.raises(ValueError, match="bad kernel"):
        gpu.time_cuda(fn, n_sets=1, warmup_s=0, budget_s=0.01, telemetry=False)


def test_zero_time_kernel_is_a_measurement_error(fake_gpu):
    gpu = fake_gpu()
    with pytest.raises(MeasurementError):
        gpu.time_cuda(lambda i: None, n_sets=1, warmup_s=0, budget_s=0.01, min_samples=2, max_samples=2,
                  graph=False, telemetry=False)


@pytest.mark.parametrize(
    "kwargs",
    [{"n_sets": 0}, {"n_sets": 1, "mode": "fast"}, {"n_sets": 1, "warmup_s": -1}, {"n_sets": 1, "budget_s": 0},
     {"n_sets": 1, "mode": "burst", "burst_gap_s": 0}, {"n_sets": 1, "min_samples": 0}, {"n_sets": 1, "graph": "yes"}],
)
def test_bad_arguments(kwargs):
    with pytest.raises(TruepeakError):
        time_cuda(lambda i: None, **kwargs)


def test_without_cuda_is_unsupported(monkeypatch):
    torch = pytest.importorskip("torch")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    with pytest.raises(UnsupportedError, match="time_cpu"):
        time_cuda(lambda i: None, n_sets=1)


# -- real GPU ----------------------------------------------------------------------------------------------------------
def _gemm_sets(torch, n, n_sets, dtype):
    sets = []
    for _ in range(n_sets):
        a = torch.empty(n, n, device="cuda", dtype=dtype).uniform_(-1, 1)
        b = torch.empty(n, n, device="cuda", dtype=dtype).uniform_(-1, 1)
        sets.append((a, b, torch.empty(n, n, device="cuda", dtype=dtype)))
    return sets


@pytest.mark.gpu
@pytest.mark.parametrize("mode", ["sustained", "burst"])
def test_gpu_large_gemm(mode):
    import torch

    n = 4096
    l2 = torch.cuda.get_device_properties(0).L2_cache_size
    n_sets = rotation_sets(3 * n * n * 2, l2)
    sets = _gemm_sets(torch, n, n_sets, torch.bfloat16)
    m = time_cuda(lambda i: torch.mm(sets[i][0], sets[i][1], out=sets[i][2]), n_sets=n_sets, mode=mode,
                  warmup_s=0.3, budget_s=0.3)
    assert m.mode == mode and not m.graph and m.calls_per_sample == 1 and m.n_samples >= 10
    tflops = 2 * n**3 / m.steady_median_s / 1e12
    assert 10 < tflops < 5000, tflops
    if m.telemetry is not None:
        assert m.telemetry.n_samples >= 2 and m.telemetry.sm_clock_median_hz > 0


@pytest.mark.gpu
def test_gpu_small_kernel_uses_graph():
    import torch

    n_sets = 8
    xs = [torch.empty(1 << 16, device="cuda").uniform_(-1, 1) for _ in range(n_sets)]
    m = time_cuda(lambda i: xs[i].mul_(1.0001), n_sets=n_sets, warmup_s=0.1, budget_s=0.1)
    assert m.graph and m.calls_per_sample % n_sets == 0
    assert 0 < m.steady_median_s < 50e-6


@pytest.mark.gpu
def test_gpu_capture_failure_falls_back():
    import torch

    x = torch.ones(1024, device="cuda")

    def fn(i):
        x.add_(1.0)
        if torch.cuda.is_current_stream_capturing():
            raise RuntimeError("this op cannot be captured")

    m = time_cuda(fn, n_sets=1, warmup_s=0.05, budget_s=0.05, graph=True)
    assert not m.graph and any("capture failed" in note for note in m.notes)
    assert m.calls_per_sample >= 1 and m.n_samples >= 10


@pytest.mark.gpu
def test_gpu_capture_failure_from_a_host_sync_falls_back():
    import torch

    x = torch.ones(1024, device="cuda")

    def fn(i):
        x.add_(1.0)
        if torch.cuda.is_current_stream_capturing():
            x.sum().item()  # a device-to-host copy: not allowed while capturing

    m = time_cuda(fn, n_sets=1, warmup_s=0.05, budget_s=0.05, graph=True)
    assert not m.graph and any("capture failed" in note for note in m.notes)
    y = torch.ones(4, device="cuda") * 2  # the context still works afterwards
    assert y.sum().item() == 8.0
