"""One rank of ``truepeak comm``: started by torchrun (``python -m truepeak.bench.comm.worker CONFIG.json``), never
directly.

Per case (op × nccl-tests size) and mode, every rank runs the collective out of place on its own GPU (NCCL) or CPU
(gloo) and times it (out of place, except all_reduce through ``--api torch``); rank 0 writes one record per case to ``results.jsonl`` as it finishes, then the α–β fits.

Method (nccl-tests' ``src/common.cu`` semantics where they apply, its ``#wrong`` count for the check):

- **Inputs with an exact known result.** Element j of rank r holds ``v(j, r) = (7j + (j >> 7) + 13r) mod m`` (integers,
  with m chosen so that a sum over all ranks stays exactly representable in the dtype: m ≤ limit / n, e.g. 256 / n
  for bf16). Every reduction order then gives the exact sum, so the check is equality, like nccl-tests' ``#wrong``
  (the number of output elements that differ, summed over ranks).
- **eager**: ``warmup`` untimed calls, a pilot window of 3 calls (the per-call estimate), then ``iters`` windows of
  m back-to-back calls, each window between a pair of CUDA events (CPU: ``time.perf_counter``),
  m = clamp(⌈500 µs / estimate⌉, 1, 20); a sample is window / m and the per-rank time is the median of the samples.
  nccl-tests also times a window of back-to-back calls (20, averaged); events around every single call would add two
  event records to each launch-bound small call. The case's time is the MAX over ranks of the per-rank medians (a collective ends when its
  slowest rank ends; nccl-tests' ``-a`` reduces across ranks, AVG by default: on a symmetric node they agree).
- **API**: ``nccl`` calls libnccl directly (:mod:`truepeak.bench.comm.pynccl`; out of place, the calls nccl-tests
  makes); ``torch`` calls torch.distributed (what a PyTorch program sees, c10d's per-call work included).
- **graph** (CUDA only): ``k`` calls captured in one CUDA graph (k = clamp(⌈200 µs / eager time⌉, 1, 20)), replayed
  ``warmup`` times, then ``iters`` replays each between CUDA events; per-call time = replay / k. This is the per-call
  latency a decode step under CUDA graphs sees (no CPU launch cost per call).
- All eager cases run before any graph case, so a graph-capture failure cannot lose the eager sweep. A failing case
  (out of memory, a capture error) becomes a ``failed`` record and the sweep goes on (all ranks agree on the outcome
  before the next collective).
"""

from __future__ import annotations

import json
import math
import os
import statistics
import sys
import time
import traceback
import warnings
from datetime import timedelta
from pathlib import Path
from typing import Any

from truepeak.comm.model import busbw_factor, fit_alpha_beta
from truepeak.comm.sweep import Case, plan_cases

#: Largest integer each dtype holds exactly (the check's sums must stay below it).
_EXACT_LIMIT = {"bf16": 256, "fp16": 2048, "fp32": 2**24, "fp64": 2**53, "int8": 127, "uint8": 255,
                "int32": 2**31 - 1, "int64": 2**62}
#: Target replay length when choosing how many calls one CUDA graph holds.
GRAPH_TARGET_S = 200e-6
GRAPH_MAX_CALLS = 20
#: Target eager window and the most calls in one.
EAGER_TARGET_S = 500e-6
EAGER_MAX_CALLS = 20
#: Calls in the pilot window that estimates the per-call time after warm-up.
PILOT_CALLS = 3
ERROR_FILE = "error_rank{rank}.txt"


def _torch_dtype(torch: Any, name: str) -> Any:
    return {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32, "fp64": torch.float64,
            "int8": torch.int8, "uint8": torch.uint8, "int32": torch.int32, "int64": torch.int64}[name]


def value_modulus(dtype: str, n_ranks: int) -> int:
    """m of the input pattern: sums of n values below m stay exact in ``dtype`` (at most 64, at least 2)."""
    return max(2, min(64, _EXACT_LIMIT[dtype] // max(1, n_ranks)))


def _pattern(torch: Any, start: int, length: int, rank: int, mod: int, dtype: Any, device: Any) -> Any:
    """``v(j, r)`` for j in [start, start + length): ``(7j + (j >> 7) + 13r) mod m`` as ``dtype``."""
    j = torch.arange(start, start + length, dtype=torch.int64 if start + length >= 2**31 // 8 else torch.int32,
                     device=device)
    return ((j * 7 + (j >> 7) + 13 * rank) % mod).to(dtype)


class _Buffers:
    """Input, output and exact expected output of one case on one rank (shapes in elements: all_reduce in/out
    [count]; all_gather in [count] out [n·count]; reduce_scatter in [n·count] out [count]; all_to_all in/out
    [n·count], ``count`` elements to/from each peer)."""

    def __init__(self, torch: Any, case: Case, rank: int, device: Any):
        n, c, op = case.n_ranks, case.count, case.op
        dt = _torch_dtype(torch, case.dtype)
        m = value_modulus(case.dtype, n)
        pat = lambda start, length, r: _pattern(torch, start, length, r, m, dt, device)  # noqa: E731
        if op == "all_reduce":
            self.inp = pat(0, c, rank)
            self.out = torch.empty(c, dtype=dt, device=device)
            exp = pat(0, c, 0)
            for q in range(1, n):
                exp += pat(0, c, q)
        elif op == "all_gather":
            self.inp = pat(0, c, rank)
            self.out = torch.empty(n * c, dtype=dt, device=device)
            exp = torch.cat([pat(0, c, q) for q in range(n)])
        elif op == "reduce_scatter":
            self.inp = pat(0, n * c, rank)
            self.out = torch.empty(c, dtype=dt, device=device)
            exp = pat(rank * c, c, 0)
            for q in range(1, n):
                exp += pat(rank * c, c, q)
        elif op == "all_to_all":
            self.inp = pat(0, n * c, rank)
            self.out = torch.empty(n * c, dtype=dt, device=device)
            exp = torch.cat([pat(rank * c, c, q) for q in range(n)])  # chunk q comes from peer q's slot `rank`
        else:  # pragma: no cover (plan_cases only yields measured ops)
            raise ValueError(op)
        self.expected = exp
        self.out.fill_(-1 if dt.is_signed else 0)

    def wrong(self) -> int:
        return int((self.out != self.expected).sum().item())


def _collective(r: "_Rank", op: str, buf: _Buffers, dtype: str) -> tuple[Any, bool]:
    """A zero-argument callable running the op, and whether it runs in place.

    API ``nccl`` (:class:`truepeak.bench.comm.pynccl.NcclComm`): every op out of place (``inp`` → ``out``), as
    nccl-tests' out-of-place column. API ``torch`` (torch.distributed; newer torch names first): all_reduce runs IN
    PLACE on ``out`` because c10d has no out-of-place all_reduce and copying the input first would time a copy too (nccl-tests'
    in-place and out-of-place all_reduce columns agree). The values in ``out`` then grow with every call, which does
    not change NCCL's work; the check copies ``inp`` into ``out`` and runs ONE call.
    """
    if r.nccl is not None:
        f = getattr(r.nccl, op)
        return (lambda: f(buf.out, buf.inp, dtype)), False
    dist = r.dist
    if op == "all_reduce":
        return (lambda: dist.all_reduce(buf.out)), True
    if op == "all_gather":
        f = getattr(dist, "all_gather_single", None) or dist.all_gather_into_tensor
        return (lambda: f(buf.out, buf.inp)), False
    if op == "reduce_scatter":
        f = getattr(dist, "reduce_scatter_single", None) or dist.reduce_scatter_tensor
        return (lambda: f(buf.out, buf.inp)), False
    return (lambda: dist.all_to_all_single(buf.out, buf.inp)), False


class _Rank:
    """This process's view: torch, dist, device, backend, rank and world size; small helpers for agreeing across
    ranks (tensors live on the GPU with NCCL, on the CPU with gloo)."""

    def __init__(self, torch: Any, dist: Any, backend: str, device: Any):
        self.torch, self.dist, self.backend, self.device = torch, dist, backend, device
        self.rank, self.world = dist.get_rank(), dist.get_world_size()
        self.cuda = device.type == "cuda"
        self.nccl: Any = None  # a truepeak.bench.comm.pynccl.NcclComm with --api nccl

    def sync(self) -> None:
        if self.cuda:
            self.torch.cuda.synchronize(self.device)

    def reduce(self, values: list[float], op: str) -> list[float]:
        """Element-wise MAX / MIN / SUM of ``values`` over ranks (float64)."""
        t = self.torch.tensor(values, dtype=self.torch.float64, device=self.device)
        self.dist.all_reduce(t, op={"max": self.dist.ReduceOp.MAX, "min": self.dist.ReduceOp.MIN,
                                    "sum": self.dist.ReduceOp.SUM}[op])
        return [float(x) for x in t.tolist()]

    def gather(self, value: float) -> list[float]:
        """``value`` of every rank, in rank order."""
        t = self.torch.tensor([value], dtype=self.torch.float64, device=self.device)
        out = self.torch.empty(self.world, dtype=self.torch.float64, device=self.device)
        f = getattr(self.dist, "all_gather_single", None) or self.dist.all_gather_into_tensor
        f(out, t)
        return [float(x) for x in out.tolist()]

    def agree(self, ok: bool) -> bool:
        """True when every rank's ``ok`` is true (one small collective)."""
        return self.reduce([1.0 if ok else 0.0], "min")[0] > 0.5


def eager_calls(per_call_s: float | None) -> int:
    """Calls timed as one eager window: enough for ~500 µs, between 1 and 20 (nccl-tests times 20 calls a window)."""
    if per_call_s is None or not per_call_s > 0:
        return 1
    return max(1, min(EAGER_MAX_CALLS, math.ceil(EAGER_TARGET_S / per_call_s)))


def _time_eager(r: _Rank, fn: Any, iters: int, warmup: int) -> tuple[list[float], int]:
    """Per-call seconds of ``iters`` windows of ``m`` back-to-back calls each (CUDA events around each window; CPU:
    perf_counter), and m. After the untimed warm-up, a pilot window of :data:`PILOT_CALLS` calls gives the per-call
    estimate that sets m (:func:`eager_calls`; timing the warm-up itself would include NCCL's lazy connection set-up
    on the first call and pick m = 1 for the first size of each op). Timing each call alone would add two event
    records per call to a launch-bound small message; nccl-tests also times a window of back-to-back calls."""
    torch = r.torch
    for _ in range(warmup):  # untimed: the first calls set up NCCL's connections (lazily, per op and protocol)
        fn()
    r.sync()
    pilot = PILOT_CALLS
    if r.cuda:
        w0, w1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        w0.record()
        for _ in range(pilot):
            fn()
        w1.record()
        torch.cuda.synchronize(r.device)
        est = w0.elapsed_time(w1) * 1e-3 / pilot
    else:
        t0 = time.perf_counter()
        for _ in range(pilot):
            fn()
        est = (time.perf_counter() - t0) / pilot
    m = eager_calls(r.reduce([est], "max")[0])
    r.dist.barrier()
    r.sync()
    if r.cuda:
        ev = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for _ in range(iters)]
        for s, e in ev:
            s.record()
            for _ in range(m):
                fn()
            e.record()
        torch.cuda.synchronize(r.device)
        samples = [s.elapsed_time(e) * 1e-3 / m for s, e in ev]
    else:
        samples = []
        for _ in range(iters):
            t0 = time.perf_counter()
            for _ in range(m):
                fn()
            samples.append((time.perf_counter() - t0) / m)
    return samples, m


def graph_calls(eager_s: float | None) -> int:
    """Calls captured in one CUDA graph: enough for a ~200 µs replay, between 1 and 20."""
    if eager_s is None or not eager_s > 0:
        return 4
    return max(1, min(GRAPH_MAX_CALLS, math.ceil(GRAPH_TARGET_S / eager_s)))


def _time_graph(r: _Rank, fn: Any, k: int, iters: int, warmup: int) -> tuple[list[float], Any]:
    """Per-call seconds of ``iters`` replays of a graph holding ``k`` calls; returns the samples and the graph."""
    torch = r.torch
    side = torch.cuda.Stream(device=r.device)
    side.wait_stream(torch.cuda.current_stream(r.device))
    with torch.cuda.stream(side):
        for _ in range(2):
            fn()
    torch.cuda.current_stream(r.device).wait_stream(side)
    r.sync()
    g = torch.cuda.CUDAGraph()
    err = None
    try:
        # thread_local: NCCL's watchdog thread may query events while this thread captures
        with torch.cuda.graph(g, capture_error_mode="thread_local"):
            for _ in range(k):
                fn()
    except Exception as exc:  # every rank must learn of it before anyone replays (a lone replay would hang)
        err = exc
    if not r.agree(err is None):
        raise err if err is not None else RuntimeError("CUDA graph capture failed on another rank")
    for _ in range(max(1, warmup)):
        g.replay()
    r.sync()
    r.dist.barrier()
    ev = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for _ in range(iters)]
    for s, e in ev:
        s.record()
        g.replay()
        e.record()
    torch.cuda.synchronize(r.device)
    return [s.elapsed_time(e) * 1e-3 / k for s, e in ev], g


def _check(r: _Rank, buf: _Buffers, in_place: bool, fn_once: Any) -> int:
    """Wrong output elements on this rank after the timed calls (in place: after one call on a fresh copy)."""
    if in_place:
        buf.out.copy_(buf.inp)
        fn_once()
    r.sync()
    return buf.wrong()


def _measure_case(r: _Rank, case: Case, mode: str, cfg: dict, eager_s: float | None) -> dict:
    """Measure one case in one mode on every rank; returns the agreed result (same on all ranks) or raises."""
    torch = r.torch
    buf, err = None, None
    try:
        buf = _Buffers(torch, case, r.rank, r.device)
    except Exception as exc:  # out of memory, ...: agree before anyone enters the collective
        err = exc
    if not r.agree(err is None):
        raise err if err is not None else RuntimeError("another rank could not set up this case")
    fn, in_place = _collective(r, case.op, buf, case.dtype)
    iters, warmup = cfg["iters"], cfg["warmup"]
    extra: dict[str, Any] = {}
    if mode == "eager":
        if in_place:
            buf.out.copy_(buf.inp)
        if r.nccl is not None:  # arguments converted once, on the current stream (graph mode keeps fn)
            fn = r.nccl.bound(case.op, buf.out, buf.inp, case.dtype)
        samples, k = _time_eager(r, fn, iters, warmup)
        wrong = _check(r, buf, in_place, fn)
    else:
        k = graph_calls(eager_s)
        samples, g = _time_graph(r, fn, k, iters, warmup)
        if in_place:  # one call, in its own graph, on a fresh copy of the input
            g1 = torch.cuda.CUDAGraph()
            with torch.cuda.graph(g1, capture_error_mode="thread_local"):
                fn()
            wrong = _check(r, buf, True, g1.replay)
            del g1
        else:
            wrong = _check(r, buf, False, None)
        del g
    median = statistics.median(samples)
    per_rank = r.gather(median)
    iter_max = r.reduce(samples, "max")
    wrong_total = int(r.reduce([float(wrong)], "sum")[0])
    checked = r.world * buf.out.numel()
    del buf
    return {"per_rank_median_s": per_rank, "samples_s": iter_max, "wrong": wrong_total, "checked": checked,
            "calls_per_sample": k, **extra}


def _nccl_version(torch: Any) -> str | None:
    try:
        v = torch.cuda.nccl.version()
    except Exception:
        return None
    return ".".join(str(p) for p in v) if isinstance(v, tuple) else str(v)


def run_worker(cfg: dict) -> None:
    """Initialise the process group, run the sweep; rank 0 writes the records."""
    import torch
    import torch.distributed as dist

    warnings.filterwarnings("ignore", category=FutureWarning, module=r"torch\.distributed.*")
    backend = cfg["backend"]
    local = int(os.environ.get("LOCAL_RANK", "0"))
    timeout = timedelta(seconds=float(cfg.get("timeout_s", 300)))
    if backend == "nccl":
        torch.cuda.set_device(local)
        device = torch.device("cuda", local)
        try:  # device_id: eager communicator set-up bound to this GPU (torch >= 2.3)
            dist.init_process_group("nccl", timeout=timeout, device_id=device)
        except TypeError:
            dist.init_process_group("nccl", timeout=timeout)
    else:
        device = torch.device("cpu")
        dist.init_process_group("gloo", timeout=timeout)
    r = _Rank(torch, dist, backend, device)
    try:
        if backend == "nccl" and cfg.get("api", "nccl") == "nccl":
            from truepeak.bench.comm.pynccl import NcclComm

            r.nccl = NcclComm(torch, dist, device, cfg.get("nccl_library"))
        _sweep(r, cfg)
    finally:
        if r.nccl is not None:
            r.nccl.close()
        dist.destroy_process_group()


def _sweep(r: _Rank, cfg: dict) -> None:
    from truepeak import records as rec
    from truepeak.bench.environment import environment

    cases, _notes = plan_cases(cfg["ops"], cfg["sizes"], r.world, cfg["dtype"])
    modes = ["eager"] + (["graph"] if cfg.get("graph") and r.cuda else [])
    lead = r.rank == 0
    nccl = _nccl_version(r.torch) if r.backend == "nccl" else None
    env = environment(cfg.get("argv"), device=r.device.index if r.cuda else None) if lead else None
    run_config = {
        "iters": cfg["iters"], "warmup": cfg["warmup"], "graph": bool(cfg.get("graph")), "n_ranks": r.world,
        "backend": r.backend, "api": "nccl" if r.nccl is not None else "torch",
        "api_detail": ("libnccl called directly through ctypes (truepeak.bench.comm.pynccl), out of place"
                       if r.nccl is not None else "torch.distributed (c10d); all_reduce in place"),
        "nccl_version": nccl, "nccl_library_version": None if r.nccl is None else r.nccl.version,
        "torch_nccl_env": {k: v for k, v in os.environ.items() if k.startswith("TORCH_NCCL_")},
        "nccl_algo": os.environ.get("NCCL_ALGO"), "nccl_proto": os.environ.get("NCCL_PROTO"),
        "algo_source": ("NCCL_ALGO/NCCL_PROTO from the environment; unset means NCCL's tuner chose per size, which "
                        "this run did not log (run with --nccl-debug-log to record it)") if r.backend == "nccl"
        else "gloo (no algorithm choice)",
        "all_reduce_in_place": r.nccl is None, "time_reduction": "max over ranks of the per-rank median",
    }
    writer = rec.RecordWriter(Path(cfg["out_dir"]) / "results.jsonl") if lead else None
    progress = None
    if lead and cfg.get("progress", True):
        from rich.console import Console
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

        progress = Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                            console=Console(stderr=True), transient=True)
        progress.start()
        task = progress.add_task("collectives", total=len(cases) * len(modes))
    eager_time: dict[tuple[str, int], float] = {}
    points: dict[tuple[str, str], list[tuple[int, float]]] = {}
    # cases a --resume keeps (launch.resumed_cases): not measured again, their times still feed graph mode and the fit
    done = {(d["op"], d["bytes"], d["mode"]): d for d in cfg.get("done", ())}
    try:
        for mode in modes:
            for case in cases:
                kept = done.get((case.op, case.bytes, mode))
                if kept is not None:
                    if mode == "eager":
                        eager_time[(case.op, case.bytes)] = kept["time_s"]
                    if kept["wrong"] == 0:
                        points.setdefault((case.op, mode), []).append((case.bytes, kept["time_s"]))
                    if progress is not None:
                        progress.advance(task)
                    continue
                if progress is not None:
                    progress.update(task, description=f"{case.op} {case.bytes} B {mode}")
                result, reason = None, ""
                try:
                    result = _measure_case(r, case, mode, cfg, eager_time.get((case.op, case.bytes)))
                    ok = True
                except Exception as exc:  # recorded as a failed case; the sweep goes on
                    ok, reason = False, f"{type(exc).__name__}: {str(exc).strip().splitlines()[0][:300]}"
                    if r.cuda:
                        r.torch.cuda.empty_cache()
                if not r.agree(ok):
                    result, reason = None, reason or "another rank failed on this case"
                if result is not None:
                    t = max(result["per_rank_median_s"])
                    if mode == "eager":
                        eager_time[(case.op, case.bytes)] = t
                    if result["wrong"] == 0:
                        points.setdefault((case.op, mode), []).append((case.bytes, t))
                if lead:
                    writer.write(_case_record(rec, case, mode, result, reason, r.backend, env, run_config))
                if progress is not None:
                    progress.advance(task)
        if lead and cfg.get("fit", True):
            for (op, mode), pts in points.items():
                writer.write(_fit_record(rec, op, mode, pts, r.world, cfg["dtype"], r.backend, env, run_config))
    finally:
        if progress is not None:
            progress.stop()
        if writer is not None:
            writer.close()


def _case_record(rec: Any, case: Case, mode: str, result: dict | None, reason: str, backend: str, env: Any,
                 run_config: dict) -> Any:
    """The ``collective`` record of one case (``rec`` is :mod:`truepeak.records`)."""
    workload = rec.CollectiveWorkload(**case.workload())
    if result is None:
        return rec.make_record(workload=workload, backend=backend, format=case.dtype,
                               measurement=None, status="failed", reason=reason, env=env, mode=mode,
                               run_config=run_config)
    t = max(result["per_rank_median_s"])
    algbw = case.bytes / t
    factor = busbw_factor(case.op, case.n_ranks)
    measurement = rec.MeasurementSummary(
        mode=mode, median_s=t, per_rank_median_s=result["per_rank_median_s"],
        mean_over_ranks_s=sum(result["per_rank_median_s"]) / len(result["per_rank_median_s"]),
        samples_s=result["samples_s"], iters=run_config["iters"], warmup=run_config["warmup"],
        calls_per_sample=result["calls_per_sample"])
    wrong = result["wrong"]
    status, why = ("ok", "") if wrong == 0 else ("failed", f"{wrong} of {result['checked']} output elements wrong")
    return rec.make_record(
        workload=workload, backend=backend, format=case.dtype, measurement=measurement,
        status=status, reason=why, env=env, mode=mode, run_config=run_config,
        correctness=rec.Correctness(wrong=wrong, checked=result["checked"], passed=wrong == 0),
        derived=None if wrong else rec.CollectiveMetrics(algbw_bytes_per_s=algbw, busbw_bytes_per_s=algbw * factor,
                                                         bus_factor=factor, requested_bytes=case.requested_bytes))


def _fit_record(rec: Any, op: str, mode: str, pts: list[tuple[int, float]], n: int, dtype: str, backend: str,
                env: Any, run_config: dict) -> Any:
    """The ``collective_fit`` record of one op and mode over its right points (``rec`` is :mod:`truepeak.records`);
    ``skipped`` (no measurement: the points are the collective records') when no fit can be made."""
    sizes = [p[0] for p in pts]
    workload = rec.CollectiveFitWorkload(op=op, n_ranks=n, dtype=dtype, min_bytes=min(sizes), max_bytes=max(sizes))
    try:
        m = fit_alpha_beta(sizes, [p[1] for p in pts], op, n, mode=mode)
    except Exception as exc:
        return rec.make_record(workload=workload, backend=backend, format=dtype, measurement=None,
                               status="skipped", reason=str(exc), env=env, mode=mode, run_config=run_config)
    resid = max(abs(m.time(s) - t) / t for s, t in pts)
    return rec.make_record(workload=workload, backend=backend, format=dtype,
                           measurement=rec.FitPoints(mode=mode, points=pts), status="ok", env=env, mode=mode,
                           run_config=run_config,
                           derived=rec.CollectiveFitMetrics(alpha_s=m.alpha_s, busbw_bytes_per_s=m.busbw_B_per_s,
                                                            points=len(pts), max_rel_residual=resid,
                                                            weighting="relative (1/t^2)"))


def main(argv: list[str] | None = None) -> int:
    """Entry point of one rank: ``python -m truepeak.bench.comm.worker CONFIG.json`` (torchrun sets RANK, WORLD_SIZE,
    LOCAL_RANK, MASTER_ADDR, MASTER_PORT). On an error it writes ``error_rank{R}.txt`` beside the results (one line,
    read by the launcher) and exits with status 1."""
    args = sys.argv[1:] if argv is None else argv
    cfg = json.loads(Path(args[0]).read_text(encoding="utf-8"))
    rank = int(os.environ.get("RANK", "0"))
    try:
        run_worker(cfg)
    except BaseException as exc:  # noqa: BLE001 (reported to the launcher as one line)
        if isinstance(exc, KeyboardInterrupt):
            return 130
        msg = f"{type(exc).__name__}: {str(exc).strip().splitlines()[0] if str(exc).strip() else ''}"
        try:
            Path(cfg["out_dir"], ERROR_FILE.format(rank=rank)).write_text(msg + "\n", encoding="utf-8")
            if cfg.get("debug"):
                traceback.print_exc()
        except OSError:
            pass
        print(f"truepeak comm rank {rank}: {msg}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
