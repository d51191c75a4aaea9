"""Timing GPU work with CUDA events: rotation sets against L2, warm-up by time, CUDA graphs for short kernels, and
sustained vs burst modes, with NVML telemetry during the timed region.

The method (docs/method.md; NVIDIA's GEMM measurement guideline, NVIDIA/cutlass
``media/docs/cpp/gemm_performance_measurement_methodology_guidelines.md``):

- **Caches.** The caller allocates ``n_sets`` copies of the inputs totalling >= 2x the L2 the *device* reports
  (:data:`ROTATION_L2_MULTIPLE`), at least 2 (CUTLASS GEMM measurement guideline: ">= 2 x L2 in total and >= 2 buffers per tensor"; the H200 reports
  60 MiB, not the 50 MB product figure). :func:`rotation_sets` gives the count; ``fn(i)`` launches on set ``i``.
  Rotation is used instead of an L2 flush because a flush inside or between timed calls adds idle gaps that let
  clocks recover (triton do_bench's 256 MB ``zero_()``, triton-lang/triton PR #3943; mamf-finder's per-iteration flush).
- **Warm-up by time, not by count**: clocks on a power-capped part oscillate for ~3 s (CUTLASS guideline); triton's
  25 ms default warm-up reads ~30 % low (triton-lang/triton#2306). The first call (compilation, autotuning, lazy
  initialisation) runs alone before anything is timed (docs/method.md, 'Warm-up outliers').
- **Per-sample CUDA events** around back-to-back launches (one event pair per sample, as ``triton.testing.do_bench``).
  Kernels under ~50 us are launch-bound when launched from Python, so they are timed as replays of a CUDA graph holding
  ``calls_per_sample`` launches that cycle through the rotation sets (like triton ``do_bench_cudagraph``, but with
  rotation so L2 stays cold; quack ``_bench_cuda_graph_l2_rotate``).
- **Two modes, always labelled**: *sustained* = back-to-back, as a serving GPU runs (power-limited); *burst* = an idle
  gap (``torch.cuda._sleep``, calibrated to ``burst_gap_s``) before each sample, outside the event pair, so clocks
  recover. On a 700 W H200 at 8192^3 BF16 they differ by ~18-20 % (677 vs 807 TFLOPS; docs/method.md, 'H200 reference
  measurements').
- The number of samples is planned from the post-warm-up estimate and all samples are queued without host
  synchronisation, so nothing idles the GPU inside the timed region; one synchronisation at the end.

torch is imported lazily (:func:`truepeak.errors.require`).
"""

from __future__ import annotations

import contextlib
import math
import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from truepeak.bench.measurement import Measurement
from truepeak.bench.telemetry import NvmlSampler
from truepeak.bench.timing import check_timing_args
from truepeak.errors import TruepeakError, UnsupportedError, require

#: Input rotation must cover this many times the device-reported L2 (CUTLASS GEMM measurement guideline: ">= 2 x L2 in
#: total"), so every timed call reads its operands from DRAM.
ROTATION_L2_MULTIPLE = 2

#: Kernels faster than this (seconds per call, eager) are timed as CUDA-graph replays when ``graph=None``.
GRAPH_THRESHOLD_S = 50e-6
#: Target duration of one graph replay (seconds); bounds event resolution (~0.5 us) and replay launch cost.
GRAPH_TARGET_SAMPLE_S = 0.5e-3
#: Most launches captured in one graph (raised to ``n_sets`` when there are more sets).
MAX_GRAPH_CALLS = 2048
#: Eager samples last at least this long (seconds); kernels >= 50 us get one call per sample.
EAGER_MIN_SAMPLE_S = 50e-6
#: GPU time per host synchronisation during warm-up (seconds).
WARMUP_CHUNK_S = 0.05
#: Work queued (seconds of GPU time) to keep the GPU busy while events are created and the NVML thread starts.
BRIDGE_S = 0.05
#: Clock cycles used to calibrate ``torch.cuda._sleep``.
SLEEP_CALIBRATION_CYCLES = 2_000_000
#: Per-call estimate: time blocks of calls until a block lasts this long (seconds).
ESTIMATE_BLOCK_S = 2e-3
MODES = ("sustained", "burst")


# -- rotation sets (pure) ----------------------------------------------------------------------------------------------
def rotation_sets(bytes_per_set: int, l2_bytes: int, min_sets: int = 2) -> int:
    """Smallest number of input sets ``n >= min_sets`` with ``n * bytes_per_set >= ROTATION_L2_MULTIPLE * l2_bytes``
    (2x L2).

    CUTLASS GEMM measurement guideline: rotate >= 2 buffers per operand totalling >= 2x L2, sized from the L2 the
    device reports. Examples (H200, L2 = 62,914,560 B): an 8192^2 BF16 A+B+C set (402,653,184 B) -> 2 sets;
    a 64 MiB set -> 2 sets (2 x 64 MiB = 128 MiB >= 120 MiB); a 1 MiB set -> 120 sets.

    Args:
        bytes_per_set: bytes one set of inputs (and outputs, if they are rotated) occupies (> 0).
        l2_bytes: the device's L2 size in bytes (>= 0; ``torch.cuda.get_device_properties(d).L2_cache_size``).
        min_sets: fewest sets (>= 1; default 2 as the guideline asks).

    Raises:
        TruepeakError: a non-positive ``bytes_per_set``, a negative ``l2_bytes`` or ``min_sets < 1``.

    See :func:`plan_rotation` to cap the count by free GPU memory.
    """
    if bytes_per_set <= 0:
        raise TruepeakError(f"bytes_per_set must be > 0, got {bytes_per_set}")
    if l2_bytes < 0:
        raise TruepeakError(f"l2_bytes must be >= 0, got {l2_bytes}")
    if min_sets < 1:
        raise TruepeakError(f"min_sets must be >= 1, got {min_sets}")
    return max(int(min_sets), -(-ROTATION_L2_MULTIPLE * int(l2_bytes) // int(bytes_per_set)))


@dataclass(frozen=True)
class RotationPlan:
    """How many input sets to rotate and whether that defeats L2.

    Attributes:
        n_sets: sets to allocate.
        wanted_sets: what :func:`rotation_sets` asked for before any cap.
        bytes_per_set: bytes of one set.
        l2_bytes: the L2 size used.
        capped: ``n_sets < wanted_sets`` because GPU memory (or ``max_sets``) would not hold them.
        note: why it was capped and what that means ("" when not capped).
    """

    n_sets: int
    wanted_sets: int
    bytes_per_set: int
    l2_bytes: int
    capped: bool = False
    note: str = ""

    @property
    def total_bytes(self) -> int:
        """Bytes of all sets together."""
        return self.n_sets * self.bytes_per_set

    @property
    def cold(self) -> bool:
        """Whether the rotation covers >= 2x L2 (:data:`ROTATION_L2_MULTIPLE`), so timed calls read from HBM
        (docs/method.md, 'Cache-resident working sets')."""
        return self.total_bytes >= ROTATION_L2_MULTIPLE * self.l2_bytes


def plan_rotation(
    bytes_per_set: int,
    l2_bytes: int,
    *,
    min_sets: int = 2,
    free_bytes: int | None = None,
    memory_fraction: float = 0.8,
    max_sets: int | None = None,
) -> RotationPlan:
    """:func:`rotation_sets`, capped by GPU memory, with a flag when the cap leaves the working set L2-resident.

    Args:
        bytes_per_set: bytes of one set (> 0).
        l2_bytes: device L2 bytes.
        min_sets: fewest sets wanted.
        free_bytes: free GPU memory (``torch.cuda.mem_get_info()[0]``); ``None`` = no memory cap.
        memory_fraction: share of ``free_bytes`` the sets may take (0 < f <= 1), leaving room for workspaces.
        max_sets: an explicit upper bound (>= 1), e.g. to bound CUDA-graph size.

    Returns:
        A :class:`RotationPlan`; when ``capped`` its ``note`` says how much of 2x L2 is covered.

    Raises:
        UnsupportedError: not even one set fits in ``memory_fraction * free_bytes``.
        TruepeakError: bad arguments.
    """
    wanted = rotation_sets(bytes_per_set, l2_bytes, min_sets)
    if not 0 < memory_fraction <= 1:
        raise TruepeakError(f"memory_fraction must be in (0, 1], got {memory_fraction}")
    limit = wanted
    why = ""
    if max_sets is not None:
        if max_sets < 1:
            raise TruepeakError(f"max_sets must be >= 1, got {max_sets}")
        if max_sets < limit:
            limit, why = int(max_sets), f"max_sets={max_sets}"
    if free_bytes is not None:
        fit = int(free_bytes * memory_fraction // bytes_per_set)
        if fit < 1:
            raise UnsupportedError(
                f"one input set of {bytes_per_set:,} B does not fit in {memory_fraction:.0%} of the "
                f"{int(free_bytes):,} B of free GPU memory; choose a smaller shape"
            )
        if fit < limit:
            limit, why = fit, f"{memory_fraction:.0%} of {int(free_bytes):,} B free GPU memory holds {fit} sets"
    if limit >= wanted:
        return RotationPlan(wanted, wanted, int(bytes_per_set), int(l2_bytes))
    total = limit * bytes_per_set
    note = f"rotating {limit} input sets instead of {wanted} ({why})"
    if total < ROTATION_L2_MULTIPLE * l2_bytes:
        note += (f": the working set ({total:,} B) is {total / l2_bytes:.2f}x L2, below {ROTATION_L2_MULTIPLE}x L2, so "
                 "some reads may hit L2 and bandwidth or TFLOPS may read high")
    return RotationPlan(limit, wanted, int(bytes_per_set), int(l2_bytes), capped=True, note=note)


# -- sample planning (pure) --------------------------------------------------------------------------------------------
def _ceil(x: float) -> int:
    """``math.ceil`` that ignores float noise (0.5e-3 / 1e-6 = 500.00000000000006 -> 500)."""
    return math.ceil(round(x, 9))


def graph_calls_per_sample(per_call_s: float, n_sets: int, *, target_s: float = GRAPH_TARGET_SAMPLE_S,
                           max_calls: int = MAX_GRAPH_CALLS) -> int:
    """Launches to capture in one CUDA graph so a replay lasts about ``target_s``.

    Always a multiple of ``n_sets`` and at least ``n_sets``: every replay cycles through all sets equally often (a
    graph of fewer launches would replay the same sets and read them from L2). Capped at ``max_calls`` rounded down
    to a multiple of ``n_sets`` (but never below ``n_sets``).
    """
    calls = max(1, _ceil(target_s / max(per_call_s, 1e-9)))
    calls = _ceil(calls / n_sets) * n_sets
    cap = max(n_sets, (max_calls // n_sets) * n_sets)
    return min(calls, cap)


def eager_calls_per_sample(per_call_s: float, *, min_sample_s: float = EAGER_MIN_SAMPLE_S,
                           max_calls: int = 1000) -> int:
    """Back-to-back calls in one eager sample: 1 for calls >= ``min_sample_s``, more for shorter ones (<= max_calls)."""
    return max(1, min(max_calls, _ceil(min_sample_s / max(per_call_s, 1e-9))))


def planned_samples(budget_s: float, sample_s: float, min_samples: int, max_samples: int) -> int:
    """Samples that fit in ``budget_s`` at ``sample_s`` each, clamped to ``[min_samples, max_samples]``."""
    n = _ceil(budget_s / max(sample_s, 1e-9))
    return int(min(max(n, min_samples), max_samples))


def sleep_cycles(gap_s: float, cycles_per_s: float) -> int:
    """Cycles for ``torch.cuda._sleep`` to spin about ``gap_s`` seconds at a clock of ``cycles_per_s`` (>= 1)."""
    return max(1, int(round(gap_s * cycles_per_s)))


# -- the timer ---------------------------------------------------------------------------------------------------------
def time_cuda(
    fn: Callable[[int], Any],
    *,
    n_sets: int,
    warmup_s: float = 1.0,
    budget_s: float = 1.0,
    mode: str = "sustained",
    graph: bool | None = None,
    device: int = 0,
    min_samples: int = 10,
    max_samples: int = 100_000,
    burst_gap_s: float = 0.0015,
    telemetry: bool = True,
    input_kind: str = "random",
    timer: Callable[[], float] = time.perf_counter,
) -> Measurement:
    """Time GPU work launched by ``fn(i)`` with CUDA events; return per-call samples in seconds.

    Steps: (1) one call of ``fn`` alone, synchronised (compilation/autotuning stay out of every timed window);
    (2) per-call estimate from CUDA events over blocks of back-to-back calls; (3) with ``graph=None`` a CUDA graph is
    used when a call takes < 50 us: it captures ``calls_per_sample`` launches cycling through the sets (a multiple of
    ``n_sets``), and each sample is one replay; if capture fails, eager launches are timed instead and a note says so;
    (4) warm-up **by time** in the same launch pattern as the timed region (synchronising every ~50 ms) until
    ``warmup_s`` has passed; (5) the sample count is planned from the settled per-sample time and ``budget_s``; all
    samples are queued without host synchronisation, each inside its own event pair, with the NVML sampler running;
    (6) one synchronisation at the end.

    Modes: ``"sustained"`` launches back to back. ``"burst"`` puts ``torch.cuda._sleep(cycles)`` before each sample,
    outside its event pair, with ``cycles`` calibrated against CUDA events so the gap lasts ~``burst_gap_s`` (if
    ``_sleep`` is missing or fails, the host sleeps after a synchronisation instead; a note says so).

    All work runs on a private CUDA stream (capture needs a non-default stream) that first waits for the current
    stream, so inputs prepared by the caller are ready.

    Args:
        fn: ``fn(i)`` launches the work on rotation set ``i`` (``0 <= i < n_sets``; truepeak passes ``i % n_sets``).
            It must only enqueue GPU work: no host synchronisation, no ``.item()``, no allocation-dependent branching
            (it may be captured in a CUDA graph).
        n_sets: input sets to rotate (see :func:`rotation_sets`).
        warmup_s: warm-up time in seconds (>= 0; the CUTLASS guideline asks ~3 s for a power-settled peak).
        budget_s: timed-region budget in seconds (> 0); ``min_samples`` wins if it needs longer.
        mode: ``"sustained"`` or ``"burst"``.
        graph: ``True``/``False`` forces CUDA-graph replays on/off; ``None`` decides by the 50 us threshold.
        device: torch CUDA device index.
        min_samples, max_samples: bounds on the number of samples.
        burst_gap_s: idle gap before each sample in burst mode (seconds; default 1.5 ms as in docs/method.md, 'H200
            reference measurements').
        telemetry: sample NVML (clocks, power, temperature, throttle reasons) during the timed region.
        input_kind: what the inputs are (``"random"``, ``"zeros"``, ...), recorded for warnings (docs/method.md, 'Random
            inputs').
        timer: the host clock, in seconds, that times the warm-up and the launch-bound planning (default
            ``time.perf_counter``; tests pass the simulated GPU's clock so sample counts are deterministic).

    Returns:
        :class:`Measurement` with ``mode``, ``calls_per_sample``, ``graph`` (whether replays were timed), ``n_sets``,
        ``burst_gap_s``, the measured warm-up time, the telemetry summary and notes.

    Raises:
        MissingDependencyError: torch is not installed.
        UnsupportedError: CUDA is not available.
        TruepeakError: a bad argument.
        MeasurementError: a non-positive event time (a broken timer or launch).
        Exceptions from ``fn`` propagate (after a best-effort synchronisation).
    """
    check_timing_args(fn, "time_cuda needs a callable fn(i)", warmup_s=warmup_s, budget_s=budget_s,
                      min_samples=min_samples, max_samples=max_samples)
    if int(n_sets) != n_sets or n_sets < 1:
        raise TruepeakError(f"n_sets must be an integer >= 1, got {n_sets!r}")
    if mode not in MODES:
        raise TruepeakError(f"unknown timing mode {mode!r}; expected one of {', '.join(MODES)}")
    if mode == "burst" and not burst_gap_s > 0:
        raise TruepeakError(f"burst mode needs burst_gap_s > 0 seconds, got {burst_gap_s}")
    if graph not in (None, True, False):
        raise TruepeakError(f"graph must be None (auto), True or False, got {graph!r}")

    torch = require("torch", "measuring on a GPU")
    if not torch.cuda.is_available():
        raise UnsupportedError(
            f"time_cuda needs a CUDA GPU but torch.cuda.is_available() is False (torch {torch.__version__}, "
            f"CUDA build {getattr(torch.version, 'cuda', None)}); time host code with truepeak.bench.timing.time_cpu"
        )
    count = torch.cuda.device_count()
    if not 0 <= int(device) < count:
        raise TruepeakError(f"CUDA device {device} does not exist; this machine has {count} (0..{count - 1})")

    notes: list[str] = []
    sampler = _make_sampler(torch, int(device), notes) if telemetry else None
    try:
        with torch.cuda.device(int(device)):
            run = _CudaRun(torch, fn, int(n_sets), int(device), mode, float(burst_gap_s), notes, timer)
            return run.measure(
                warmup_s=float(warmup_s), budget_s=float(budget_s), graph=graph, min_samples=int(min_samples),
                max_samples=int(max_samples), sampler=sampler, input_kind=input_kind,
            )
    finally:
        if sampler is not None:
            sampler.close()


def _make_sampler(torch: Any, device: int, notes: list[str]) -> NvmlSampler:
    """An opened NVML sampler for torch device ``device`` (NVML numbering honours CUDA_VISIBLE_DEVICES)."""
    index = device
    try:
        index = int(torch.cuda._get_nvml_device_index(device))
    except Exception as exc:
        if os.environ.get("CUDA_VISIBLE_DEVICES"):
            notes.append(f"could not map CUDA device {device} to its NVML index ({type(exc).__name__}); "
                         f"telemetry read NVML device {device}, which may be another GPU")
    sampler = NvmlSampler(index)
    sampler.open()  # pay NVML start-up before the timed region
    return sampler


class _CudaRun:
    """State of one ``time_cuda`` call: the stream, the rotation counter, the graph and the burst gap."""

    def __init__(self, torch: Any, fn: Callable[[int], Any], n_sets: int, device: int, mode: str,
                 burst_gap_s: float, notes: list[str], timer: Callable[[], float] = time.perf_counter):
        self.torch = torch
        self.timer = timer
        self.cuda = torch.cuda
        self.fn = fn
        self.n_sets = n_sets
        self.device = device
        self.mode = mode
        self.burst_gap_s = burst_gap_s
        self.notes = notes
        self.i = 0
        self.calls = 1
        self.graph: Any = None
        self.cycles = 0
        self.host_gap = False
        self.stream = self.cuda.Stream(device=device)

    # -- launching -----------------------------------------------------------------------------------------------------
    def eager(self, k: int) -> None:
        for _ in range(k):
            self.fn(self.i % self.n_sets)
            self.i += 1

    def work(self) -> None:
        """One sample's work: one graph replay, or ``calls`` eager launches."""
        if self.graph is not None:
            self.graph.replay()
        else:
            self.eager(self.calls)

    def gap(self) -> None:
        """The idle gap before a burst sample (nothing in sustained mode)."""
        if self.mode != "burst":
            return
        if self.host_gap:
            self.cuda.synchronize(self.device)
            time.sleep(self.burst_gap_s)
        else:
            self.cuda._sleep(self.cycles)

    def sample(self) -> None:
        self.gap()
        self.work()

    def sync(self) -> None:
        self.cuda.synchronize(self.device)

    def event(self) -> Any:
        return self.cuda.Event(enable_timing=True)

    def time_block(self, launch: Callable[[], None], k: int) -> tuple[float, float]:
        """``(gpu_s, wall_s)`` for ``k`` back-to-back ``launch()`` calls: CUDA-event time between one event pair and
        host time until it finished (synchronises). Planning uses the larger, so launch-bound work is planned by
        what it really takes."""
        t0 = self.timer()
        start, end = self.event(), self.event()
        start.record()
        for _ in range(k):
            launch()
        end.record()
        end.synchronize()
        return start.elapsed_time(end) * 1e-3, self.timer() - t0

    # -- phases --------------------------------------------------------------------------------------------------------
    def estimate_per_call(self) -> float:
        """Seconds per eager call, from blocks of back-to-back calls grown until one lasts >= 2 ms."""
        k, cap = 1, 1 << 14
        while True:
            t, wall = self.time_block(lambda: self.eager(1), k)
            if t >= ESTIMATE_BLOCK_S or wall >= 10 * ESTIMATE_BLOCK_S or k >= cap:
                return max(t / k, 1e-9)
            k = min(cap, k * max(2, math.ceil(ESTIMATE_BLOCK_S / max(t, 1e-7))))

    def capture(self, calls: int) -> Any:
        """A CUDA graph of ``calls`` launches cycling through the sets, replayed once to check it runs."""
        g = self.cuda.CUDAGraph()
        with self.cuda.graph(g, stream=self.stream, capture_error_mode="thread_local"):
            for j in range(calls):
                self.fn(j % self.n_sets)
        g.replay()
        self.sync()
        return g

    def setup_gap(self) -> None:
        """Calibrate ``torch.cuda._sleep`` cycles so the burst gap lasts ~``burst_gap_s``."""
        sleep = getattr(self.cuda, "_sleep", None)
        try:
            if sleep is None:
                raise AttributeError("torch.cuda._sleep is missing")
            cycles = SLEEP_CALIBRATION_CYCLES
            t = 0.0
            for _ in range(2):  # the first run pays launch and clock ramp
                t = self.time_block(lambda: sleep(cycles), 1)[0]
            if not t > 0:
                raise RuntimeError(f"torch.cuda._sleep({cycles}) took {t} s")
            rate = cycles / t
            self.cycles = sleep_cycles(self.burst_gap_s, rate)
            self.notes.append(f"burst gap: torch.cuda._sleep({self.cycles}) before each sample, "
                              f"~{self.burst_gap_s * 1e3:.3g} ms at the calibrated {rate / 1e9:.3g} GHz")
        except Exception as exc:
            self.sync()
            self.host_gap = True
            self.notes.append(f"torch.cuda._sleep unusable ({type(exc).__name__}: {exc}); burst gap made by a host "
                              f"sleep of {self.burst_gap_s * 1e3:.3g} ms after synchronising")

    def measure(self, *, warmup_s: float, budget_s: float, graph: bool | None, min_samples: int, max_samples: int,
                sampler: NvmlSampler | None, input_kind: str) -> Measurement:
        cuda = self.cuda
        self.stream.wait_stream(cuda.current_stream(self.device))
        try:
            with cuda.stream(self.stream):
                return self._measure(warmup_s, budget_s, graph, min_samples, max_samples, sampler, input_kind)
        except BaseException:
            with contextlib.suppress(Exception):
                self.sync()
            raise
        finally:
            if self.graph is not None:
                with contextlib.suppress(Exception):
                    self.graph.reset()
                self.graph = None

    def _measure(self, warmup_s: float, budget_s: float, graph: bool | None, min_samples: int, max_samples: int,
                 sampler: NvmlSampler | None, input_kind: str) -> Measurement:
        # (1) first call alone: compilation, autotuning, cuBLAS workspace on this stream
        self.eager(1)
        self.sync()
        # (2) per-call estimate
        per_call = self.estimate_per_call()
        # (3) graph or eager
        use_graph = graph if graph is not None else per_call < GRAPH_THRESHOLD_S
        if use_graph:
            calls = graph_calls_per_sample(per_call, self.n_sets)
            try:
                self.graph = self.capture(calls)
                self.calls = calls
            except Exception as exc:
                try:
                    self.sync()
                except Exception:
                    raise exc from None
                self.graph = None
                use_graph = False
                _release_default_generator(self.cuda)
                first = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
                self.notes.append(f"CUDA graph capture failed ({type(exc).__name__}: {first[:200]}); "
                                  "timed eager launches instead")
        if not use_graph:
            self.calls = eager_calls_per_sample(per_call)
        if self.mode == "burst":
            self.setup_gap()
        # (4) warm-up by time, in the timed launch pattern
        sample_s = per_call * self.calls
        loop_start = self.timer()
        chunk = 0
        while True:  # chunks of ~50 ms, grown at most 10x at a time from 1 sample
            chunk = max(1, min(10 * chunk, 100_000, math.ceil(WARMUP_CHUNK_S / max(sample_s, 1e-9))))
            sample_s = max(*self.time_block(self.sample, chunk), chunk * 1e-9) / chunk
            if self.timer() - loop_start >= warmup_s:
                break
        warmed_s = self.timer() - loop_start
        # (5) plan, bridge, time
        n = planned_samples(budget_s, sample_s, min_samples, max_samples)
        if not self.host_gap:
            for _ in range(max(1, min(10_000, math.ceil(BRIDGE_S / sample_s)))):
                self.sample()  # keeps the GPU busy while events are created and the sampler starts
        starts = [self.event() for _ in range(n)]
        ends = [self.event() for _ in range(n)]
        with sampler if sampler is not None else contextlib.nullcontext():
            for j in range(n):
                self.gap()
                starts[j].record()
                self.work()
                ends[j].record()
            self.sync()  # (6)
        windows = [s.elapsed_time(e) * 1e-3 for s, e in zip(starts, ends)]
        tel = None
        if sampler is not None:
            tel = sampler.summary()
            if tel is None:
                self.notes.append(f"no telemetry: {sampler.reason}")
        if use_graph:
            self.notes.append(f"timed CUDA-graph replays of {self.calls} launches each")
        return Measurement(
            samples_s=tuple(w / self.calls for w in windows),
            calls_per_sample=self.calls,
            mode=self.mode,
            warmup_s=warmed_s,
            telemetry=tel,
            input_kind=input_kind,
            graph=bool(use_graph),
            n_sets=self.n_sets,
            burst_gap_s=self.burst_gap_s if self.mode == "burst" else None,
            notes=tuple(self.notes),
        )


def _release_default_generator(cuda: Any) -> bool:
    """After an aborted CUDA-graph capture, give the device's default generator a fresh (not capturing) state.

    ``capture_begin`` puts the default CUDA generator's state in capture mode and only a successful ``capture_end``
    takes it out; after a failed capture every later ``torch.rand(..., device="cuda")`` in the process fails with
    "Offset increment outside graph capture encountered unexpectedly" (seen on the H200 in
    docs/results/h200x2/bound/gpu-tests.log). ``Generator.graphsafe_set_state`` swaps in the state of a new generator
    seeded like the old one. Best effort: returns False when this torch lacks the API (or ``cuda`` is a test fake).
    """
    try:
        idx = cuda.current_device()
        gen = cuda.default_generators[idx]
        import torch

        fresh = torch.Generator(device=f"cuda:{idx}")
        fresh.manual_seed(gen.initial_seed())
        gen.graphsafe_set_state(fresh.graphsafe_get_state())
        return True
    except Exception:
        return False
