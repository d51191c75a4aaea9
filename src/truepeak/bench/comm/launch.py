"""Start ``truepeak comm``'s workers through torchrun and collect what they wrote.

No home-made launcher: :func:`run_comm` calls torchrun's own ``torch.distributed.run``
(``parse_args`` + ``run``, what ``python -m torch.distributed.run`` does) in this process, with ``--nproc-per-node``
and, for several nodes, the rendezvous options passed through (``--nnodes --node-rank --rdzv-endpoint --rdzv-backend
--rdzv-id --master-addr --master-port``); one node uses ``--standalone``. Each worker is ``python -m
truepeak.bench.comm.worker CONFIG.json`` (:mod:`truepeak.bench.comm.worker`); rank 0 writes ``results.jsonl`` in
the output folder. Running torchrun in-process lets a worker failure or a rendezvous timeout end in one line (a
:class:`~truepeak.errors.TruepeakError`) instead of torchrun's traceback.

The settings check themselves when the :class:`~truepeak.bench.comm.config.CommConfig` is built. Checks of the
machine before starting anything (each a one-line error): no visible GPU for the default ``--nproc-per-node`` with
NCCL, fewer than 2 ranks in all ("one GPU only"), the NCCL backend without CUDA or without NCCL in this torch (pass
``--backend gloo``), fewer GPUs than ``--nproc-per-node``, more gloo processes than cores, and on a node other than 0
an endpoint that does not answer within ``--rdzv-timeout`` seconds (named in the message).

Ctrl-C (or another death signal torchrun's agent receives) stops the workers and ends in :class:`CommInterrupted`,
which carries the records rank 0 finished; the CLI reports them (torchrun's own "Received 2 death signal" warning
may still be printed before that).
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import re
import socket
import tempfile
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

import truepeak
from truepeak.bench.comm.config import CommConfig
from truepeak.comm.sweep import plan_cases
from truepeak.errors import ConfigError, MeasurementError, TruepeakError, UnsupportedError, require
from truepeak.records import Record, read_records

NCCL_LOG = "nccl_debug.%h.%p.txt"
#: What torchrun starts on each rank: ``python -m WORKER_MODULE CONFIG.json``.
WORKER_MODULE = "truepeak.bench.comm.worker"
_ALGO_LINE = re.compile(r"\b(AllReduce|AllGather|ReduceScatter|AllToAll|AlltoAll|SendRecv|Broadcast|Reduce)"
                        r":\s+(\d+) Bytes -> Algo (\S+) proto (\S+)(?: channel\{Lo\.\.Hi\}=\{(\d+)\.\.(\d+)\})?")
_NCCL_OPS = {"AllReduce": "all_reduce", "AllGather": "all_gather", "ReduceScatter": "reduce_scatter",
             "AllToAll": "all_to_all", "AlltoAll": "all_to_all"}


@dataclass
class CommResult:
    """What a run produced: its records (this run's only), the notes (rounded sizes, ...), the output folder, and the
    algorithm/protocol NCCL chose per (op, bytes) when it was logged."""

    records: list[Record]
    notes: list[str]
    out_dir: str | None
    results_path: str | None
    algos: dict[str, dict[str, Any]] = field(default_factory=dict)
    node_rank: int = 0

    def collectives(self) -> list[Record]:
        return [r for r in self.records if r.kind == "collective"]

    def fits(self) -> list[Record]:
        return [r for r in self.records if r.kind == "collective_fit"]


class CommInterrupted(KeyboardInterrupt):
    """:func:`run_comm` was interrupted (Ctrl-C, or another death signal torchrun received): the workers are stopped,
    and the records rank 0 finished before are in ``result.records`` (and, with an ``out_dir``, in its
    ``results.jsonl``), for the caller to report.

    Attributes:
        result: a :class:`CommResult` of the records finished (cases only: the α–β fits are written at the end).
        n_cases: how many case records the sweep planned (:func:`planned_cases`).
    """

    def __init__(self, result: CommResult, n_cases: int):
        super().__init__(f"interrupted after {len(result.collectives())} of {n_cases} cases")
        self.result = result
        self.n_cases = n_cases


def planned_cases(cfg: CommConfig) -> int:
    """How many case records a run of ``cfg`` writes: one per op and size (:func:`truepeak.comm.sweep.plan_cases`)
    per mode (eager, and graph with ``cfg.graph`` on the NCCL backend, as :mod:`truepeak.bench.comm.worker` sweeps
    them). ``cfg.nproc_per_node`` must be known (:func:`with_nproc`)."""
    cases, _ = plan_cases(cfg.ops, cfg.sizes, cfg.nnodes * cfg.nproc_per_node, cfg.dtype)
    return len(cases) * (2 if cfg.graph and cfg.backend == "nccl" else 1)


def _split_endpoint(ep: str) -> tuple[str, int]:
    host, _, port = ep.rpartition(":")
    if not host or not port.isdigit():
        return ep, 29400
    return host.strip("[]"), int(port)


def wait_for_endpoint(endpoint: str, timeout_s: float) -> None:
    """Wait until a TCP connection to ``host:port`` succeeds.

    Raises:
        TruepeakError: nothing answered within ``timeout_s`` (the message names the address).
    """
    host, port = _split_endpoint(endpoint)
    deadline = time.monotonic() + timeout_s
    last = ""
    while True:
        try:
            with socket.create_connection((host, port), timeout=min(5.0, max(0.1, timeout_s))):
                return
        except OSError as exc:
            last = exc.strerror or str(exc)
        if time.monotonic() >= deadline:
            raise TruepeakError(f"cannot reach the rendezvous at {host}:{port} within {timeout_s:g} s ({last}); "
                                "start node 0 first, check --rdzv-endpoint and the firewall, or raise --rdzv-timeout")
        time.sleep(0.5)


def preflight(cfg: CommConfig) -> list[str]:
    """Check the machine before starting torchrun (the settings checked themselves when ``cfg`` was built); returns
    notes (rounded sizes).

    Raises:
        UnsupportedError: fewer than 2 ranks in all, NCCL without CUDA/NCCL, fewer GPUs than --nproc-per-node.
        TruepeakError: more gloo processes than cores, an unreachable rendezvous (node_rank > 0).
        MissingDependencyError: torch is not installed.
    """
    world = cfg.nnodes * cfg.nproc_per_node
    torch = require("torch", "measuring collectives")
    if cfg.backend == "nccl":
        gpus = 0
        with contextlib.suppress(Exception):
            gpus = torch.cuda.device_count() if torch.cuda.is_available() else 0
        if gpus == 0:
            raise UnsupportedError(f"the NCCL backend needs CUDA GPUs and torch {torch.__version__} sees none; "
                                   "pass --backend gloo to measure CPU collectives instead")
        import torch.distributed as dist

        if not dist.is_available() or not dist.is_nccl_available():
            raise UnsupportedError(f"torch {torch.__version__} was built without NCCL; pass --backend gloo to "
                                   "measure with gloo instead")
        if cfg.api == "nccl":
            from truepeak.bench.comm.pynccl import load_library

            try:
                load_library(cfg.nccl_library)
            except OSError as exc:
                raise UnsupportedError(str(exc)) from exc
        if world < 2:
            raise UnsupportedError(f"one GPU only: a collective needs at least 2 ranks, and --nproc-per-node 1 on 1 "
                                   f"node gives one (this machine has {gpus} GPU{'s' if gpus != 1 else ''}); "
                                   "give --nproc-per-node 2 or more")
        if gpus < cfg.nproc_per_node:
            what = "one GPU only" if gpus == 1 else f"only {gpus} GPUs"
            raise UnsupportedError(f"{what}: --nproc-per-node {cfg.nproc_per_node} needs one GPU per process and "
                                   f"this machine shows {gpus}; give --nproc-per-node {gpus}"
                                   + (" on several nodes" if gpus == 1 else "")
                                   + " (CUDA_VISIBLE_DEVICES limits what is shown)")
    else:
        import torch.distributed as dist

        if not dist.is_available() or not dist.is_gloo_available():
            raise UnsupportedError(f"torch {torch.__version__} was built without gloo")
        if world < 2:
            raise UnsupportedError("a collective needs at least 2 ranks; give --nproc-per-node 2 or more")
        cores = max(2, os.cpu_count() or 1)
        if cfg.nproc_per_node > cores:
            # torchrun starts every worker at once: 100000 gloo workers exhaust the machine before any error
            raise TruepeakError(f"--nproc-per-node {cfg.nproc_per_node} with --backend gloo starts that many CPU "
                                f"processes on a machine with {cores} cores; give 2 to {cores} (more would time the "
                                "scheduler, not gloo)")
    _, notes = plan_cases(cfg.ops, cfg.sizes, world, cfg.dtype)
    if cfg.nnodes > 1 and cfg.node_rank > 0:
        wait_for_endpoint(cfg.endpoint, cfg.rdzv_timeout_s)
    return notes


def torchrun_args(cfg: CommConfig, config_path: str) -> list[str]:
    """torchrun's command line (after ``torchrun``) for this run."""
    args = ["--nproc-per-node", str(cfg.nproc_per_node), "--max-restarts", "0"]
    if cfg.nnodes == 1 and cfg.endpoint is None:
        args += ["--standalone"]
    else:
        args += ["--nnodes", str(cfg.nnodes), "--node-rank", str(cfg.node_rank)]
        if cfg.rdzv_endpoint:
            args += ["--rdzv-backend", cfg.rdzv_backend, "--rdzv-endpoint", cfg.rdzv_endpoint]
            if cfg.rdzv_id:
                args += ["--rdzv-id", cfg.rdzv_id]
            t = int(max(1, round(cfg.rdzv_timeout_s)))
            args += ["--rdzv-conf", f"join_timeout={t},read_timeout={t}"]
        else:
            args += ["--rdzv-backend", "static", "--master-addr", str(cfg.master_addr),
                     "--master-port", str(cfg.master_port or 29500)]
    return [*args, "-m", WORKER_MODULE, config_path]


@contextlib.contextmanager
def _env(updates: dict[str, str]) -> Iterator[None]:
    old = {k: os.environ.get(k) for k in updates}
    os.environ.update(updates)
    try:
        yield
    finally:
        for k, v in old.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


@contextlib.contextmanager
def _quiet_torchrun() -> Iterator[None]:
    """torchrun's agent logs worker failures with tracebacks; the launcher reports them in one line instead."""
    names = ("torch.distributed.elastic", "torch.distributed.run", "torch.distributed.launcher")
    old = {n: logging.getLogger(n).level for n in names}
    for n in names:
        logging.getLogger(n).setLevel(logging.CRITICAL)
    try:
        yield
    finally:
        for n, level in old.items():
            logging.getLogger(n).setLevel(level)


def _worker_env(cfg: CommConfig, out_dir: Path) -> dict[str, str]:
    pkg_root = str(Path(truepeak.__file__).resolve().parents[1])
    path = os.environ.get("PYTHONPATH", "")
    env = {"PYTHONPATH": pkg_root + (os.pathsep + path if path else ""),
           "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS", "1"), "PYTHONUNBUFFERED": "1"}
    if cfg.nccl_debug_log and cfg.backend == "nccl":
        env.update({"NCCL_DEBUG": "INFO", "NCCL_DEBUG_SUBSYS": "INIT,TUNING",
                    "NCCL_DEBUG_FILE": str(out_dir / NCCL_LOG)})
    return env


def _errors(out_dir: Path) -> list[str]:
    msgs = []
    for p in sorted(out_dir.glob("error_rank*.txt")):
        with contextlib.suppress(OSError):
            msgs.append(f"{p.stem.replace('error_', '')}: {p.read_text(encoding='utf-8').strip()}")
    return msgs


def parse_nccl_algos(text: str) -> list[dict[str, Any]]:
    """The algorithm/protocol lines of an NCCL ``NCCL_DEBUG_SUBSYS=TUNING`` log, in order:
    ``AllReduce: 4096 Bytes -> Algo RING proto LL channel{Lo..Hi}={0..1}`` → ``{"nccl_op": "AllReduce", "op":
    "all_reduce", "bytes": 4096, "algo": "RING", "proto": "LL", "channels": 2}`` (NCCL ``src/enqueue.cc``; older NCCL
    prints numbers for the algorithm and protocol, kept as they are)."""
    out = []
    for m in _ALGO_LINE.finditer(text):
        lo, hi = m.group(5), m.group(6)
        out.append({"nccl_op": m.group(1), "op": _NCCL_OPS.get(m.group(1)), "bytes": int(m.group(2)),
                    "algo": m.group(3), "proto": m.group(4),
                    "channels": None if lo is None else int(hi) - int(lo) + 1})
    return out


def algos_by_case(lines: list[dict[str, Any]], n_ranks: int) -> dict[str, dict[str, Any]]:
    """``{"all_reduce|4096": {"algo", "proto", "channels"}}`` keyed by op and nccl-tests size S. NCCL logs the size
    it works on (S for all_reduce; S or S/n for all_gather/reduce_scatter depending on the version); both are keyed.
    The last line of each wins."""
    out: dict[str, dict[str, Any]] = {}
    for ln in lines:
        if ln["op"] is None:
            continue
        info = {"algo": ln["algo"], "proto": ln["proto"], "channels": ln["channels"]}
        out[f"{ln['op']}|{ln['bytes']}"] = info
        if ln["op"] in ("all_gather", "reduce_scatter"):
            out.setdefault(f"{ln['op']}|{ln['bytes'] * n_ranks}", info)
    return out


def visible_gpus() -> int:
    """CUDA GPUs torch sees (0 without CUDA, or when torch cannot be imported or fails to look)."""
    try:
        import torch

        return torch.cuda.device_count() if torch.cuda.is_available() else 0
    except Exception:
        return 0


def with_nproc(cfg: CommConfig) -> CommConfig:
    """``cfg`` with ``nproc_per_node`` known: as given, else every visible GPU (:func:`visible_gpus`; the config
    already holds 2 for gloo).

    Raises:
        UnsupportedError: NCCL and no GPU is visible (the message says to pass --backend gloo).
    """
    if cfg.nproc_per_node is not None:
        return cfg
    n = visible_gpus()
    if n == 0:
        raise UnsupportedError("the NCCL backend needs CUDA GPUs and none is visible; pass --backend gloo to measure "
                               "CPU collectives instead")
    return replace(cfg, nproc_per_node=n)


def resumed_cases(cfg: CommConfig, results: Path) -> list[Record]:
    """The collective records of ``results`` that a ``--resume`` of ``cfg`` keeps: status ok, the same ranks and
    dtype, an op and size of this sweep; the newest of each case.

    Raises:
        ConfigError: no ``results`` to resume, or its records were measured with other settings (iterations,
            warm-up, backend, API or ranks): the message names the first difference.
    """
    from truepeak.comm.model import canonical_op
    from truepeak.records import latest

    if not results.is_file():
        raise ConfigError(f"--resume: {results} does not exist; run without --resume to start the sweep there",
                          field="resume")
    n = cfg.nnodes * cfg.nproc_per_node
    api = cfg.api or ("nccl" if cfg.backend == "nccl" else "torch")
    want = {"iters": cfg.iters, "warmup": cfg.warmup, "backend": cfg.backend, "api": api, "n_ranks": n}
    cases = {(c.op, c.bytes) for c in plan_cases(cfg.ops, cfg.sizes, n, cfg.dtype)[0]}
    kept = []
    for r in latest(read_records(results, strict=False)):
        if r.kind != "collective":
            continue
        rc = r.run_config or {}
        for name, value in want.items():
            if rc.get(name) is not None and rc.get(name) != value:
                flag = {"n_ranks": "ranks (--nnodes x --nproc-per-node)"}.get(name, f"--{name}")
                raise ConfigError(f"--resume: {results} was measured with {flag} {rc.get(name)}, this run asks "
                                  f"{value}; repeat its settings or choose another --out", field="resume")
        w = r.workload
        if r.ok and w.dtype == cfg.dtype and w.n_ranks == n and (canonical_op(w.op), w.bytes) in cases:
            kept.append(r)
    return kept


def run_comm(cfg: CommConfig) -> CommResult:
    """Run the sweep on ``cfg.nproc_per_node`` local workers (None: :func:`with_nproc`) through torchrun and return
    this run's records (with ``cfg.resume``, the resumed cases' records first: :func:`resumed_cases`).

    Raises:
        TruepeakError (and subclasses): an ``out_dir`` that cannot be a folder
            (:func:`truepeak.bench.outdir.check_out_arg`, :func:`~truepeak.bench.outdir.make_out_dir`), bad settings or
            machine (:func:`preflight`), an unreachable rendezvous, or a worker that failed (the message carries the
            worker's one-line error).
        CommInterrupted: Ctrl-C or another death signal (the workers are stopped by torchrun); it carries the
            records finished so far. A KeyboardInterrupt before torchrun starts or after it ends propagates as is.
    """
    from truepeak.bench.outdir import check_out_arg, make_out_dir

    check_out_arg(cfg.out_dir, "comm")
    cfg = with_nproc(cfg)
    notes = preflight(cfg)
    require("torch", "measuring collectives")
    from torch.distributed import run as torchrun

    tmp = None
    if cfg.out_dir is None:
        tmp = tempfile.TemporaryDirectory(prefix="truepeak-comm-")
        out_dir = Path(tmp.name)
    else:
        out_dir = Path(cfg.out_dir)
    try:
        if tmp is None:
            make_out_dir(out_dir)
        results = out_dir / "results.jsonl"
        resumed = resumed_cases(cfg, results) if cfg.resume else []
        before = _count_lines(results)
        for p in out_dir.glob("error_rank*.txt"):
            p.unlink()
        done = [{"op": r.workload.op, "bytes": r.workload.bytes, "mode": r.mode, "time_s": r.time_s,
                 "wrong": r.correctness.wrong if r.correctness is not None else None} for r in resumed]
        wcfg = {**asdict(cfg), "out_dir": str(out_dir), "done": done}
        config_path = out_dir / f"comm_config.{os.getpid()}.json"
        config_path.write_text(json.dumps(wcfg), encoding="utf-8")
        args = torchrun.parse_args(torchrun_args(cfg, str(config_path)))
        interrupted = False
        try:
            with _env(_worker_env(cfg, out_dir)), _quiet_torchrun():
                torchrun.run(args)
        except KeyboardInterrupt:
            interrupted = True
        except Exception as exc:  # ChildFailedError, rendezvous errors, SignalException, ...
            interrupted = type(exc).__name__ == "SignalException"  # torchrun's agent got SIGINT / SIGTERM
            if not interrupted:
                _raise_launch_error(cfg, exc, out_dir)
        finally:
            with contextlib.suppress(OSError):
                config_path.unlink()
        records: list[Record] = []
        if results.exists():
            records = resumed + list(read_records(results, strict=False))[before:]  # a torn last line is left out
        if interrupted:
            partial = CommResult(records, notes, None if tmp else str(out_dir), None if tmp else str(results),
                                 node_rank=cfg.node_rank)
            raise CommInterrupted(partial, planned_cases(cfg)) from None
        algos: dict[str, dict[str, Any]] = {}
        if cfg.nccl_debug_log:
            lines = []
            for p in sorted(out_dir.glob("nccl_debug.*.txt")):
                lines += parse_nccl_algos(p.read_text(encoding="utf-8", errors="replace"))
            algos = algos_by_case(lines, cfg.nnodes * cfg.nproc_per_node)
            (out_dir / "nccl_algo.json").write_text(json.dumps(algos, indent=1, sort_keys=True), encoding="utf-8")
            if not algos:
                notes.append("NCCL logged no 'Bytes -> Algo' lines (this NCCL version may not print them at "
                             "NCCL_DEBUG_SUBSYS=TUNING); algorithm and protocol stay unknown")
        return CommResult(records, notes, None if tmp else str(out_dir), None if tmp else str(results), algos,
                          cfg.node_rank)
    finally:
        if tmp is not None:
            tmp.cleanup()


def _count_lines(path: Path) -> int:
    if not path.exists():
        return 0
    return len(read_records(path, strict=False))


def _raise_launch_error(cfg: CommConfig, exc: BaseException, out_dir: Path) -> None:
    name = type(exc).__name__
    errs = _errors(out_dir)
    if errs:
        raise MeasurementError(f"the comm workers failed: {'; '.join(errs[:2])}") from exc
    ep = cfg.endpoint
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else name
    if ("Rendezvous" in name or "rendezvous" in text.lower() or "DistNetworkError" in name
            or isinstance(exc, TimeoutError)):
        where = ep or "localhost (standalone)"
        raise TruepeakError(f"cannot reach the rendezvous at {where} within {cfg.rdzv_timeout_s:g} s ({name}: "
                            f"{text[:200]}); start node 0 first, check --rdzv-endpoint, or raise --rdzv-timeout"
                            ) from exc
    killed = _killed_ranks(exc)
    if killed:
        raise MeasurementError(f"the comm workers failed: {killed}; the cases finished before are in "
                               f"{out_dir / 'results.jsonl'}") from exc
    raise MeasurementError(f"the comm workers failed ({name}: {text[:300]}); run with --debug for the "
                           "workers' tracebacks") from exc


def _killed_ranks(exc: BaseException) -> str:
    """The ranks of a torchrun ``ChildFailedError`` that a signal ended (``rank 1 killed by SIGKILL, often the
    kernel's out-of-memory killer (see dmesg): try smaller --sizes``), or "" when none was: a killed process leaves
    no traceback for --debug to show."""
    failures = getattr(exc, "failures", None)
    if not isinstance(failures, dict):
        return ""
    parts = []
    for rank, f in sorted(failures.items()):
        code = getattr(f, "exitcode", None)
        if isinstance(code, int) and code < 0:
            sig = f.signal_name() if hasattr(f, "signal_name") else f"signal {-code}"
            hint = (", often the kernel's out-of-memory killer (see dmesg): try smaller --sizes"
                    if sig == "SIGKILL" else "")
            parts.append(f"rank {rank} killed by {sig}{hint}")
    return "; ".join(parts)
