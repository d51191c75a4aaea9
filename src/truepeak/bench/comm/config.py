"""The settings of one ``truepeak comm`` run, checked when they are built, before torch is imported.

:class:`CommConfig` refuses what no machine could run (a count below its minimum, an unknown backend or API, a
rendezvous that names no endpoint, an op or size that is not a nccl-tests case) with a
:class:`~truepeak.errors.ConfigError` naming the field; the checks that need the machine (GPUs, NCCL, cores, the
endpoint answering) stay in :func:`truepeak.bench.comm.launch.preflight`. The messages name the ``truepeak comm``
flags, which carry the fields' names (``nproc_per_node`` is ``--nproc-per-node``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from truepeak.comm.model import MEASURED_OPS, canonical_dtype
from truepeak.comm.sweep import MAX_BYTES
from truepeak.errors import ConfigError, UnknownNameError

BACKENDS = ("nccl", "gloo")
APIS = ("nccl", "torch")


def _check_int(field: str, value: Any, minimum: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        flag = "--" + field.replace("_", "-")
        raise ConfigError(f"{flag} must be a whole number >= {minimum}, got {value!r}", field=field)


@dataclass(frozen=True)
class CommConfig:
    """Settings of one ``truepeak comm`` run (what the CLI parsed; defaults declared once, here).

    Attributes:
        nproc_per_node: worker processes on this node (one GPU each with NCCL); None: every visible GPU with NCCL
            (found when the run starts, :func:`truepeak.bench.comm.launch.run_comm`), 2 with gloo.
        ops, sizes: canonical op names (:data:`truepeak.comm.model.MEASURED_OPS`) and nccl-tests total sizes in bytes
            (:mod:`truepeak.comm.sweep`); lists are kept as tuples.
        dtype: element type (``bf16``, ...; :data:`truepeak.comm.model.DTYPE_BYTES`); an alias (``bfloat16``) is kept
            as its canonical name (:func:`truepeak.comm.model.canonical_dtype`).
        iters, warmup: timed and untimed calls per case (nccl-tests ``-n 20 -w 5``).
        graph: also measure in CUDA-graph mode (NCCL on CUDA only).
        backend: ``nccl`` or ``gloo`` (CPU tensors).
        api: ``nccl`` (libnccl called directly, out of place, as nccl-tests; default with the NCCL backend) or
            ``torch`` (torch.distributed, what a PyTorch program sees; the only one with gloo). None picks the
            default, which the built config then holds.
        out_dir: where results.jsonl goes (None: a temporary folder, removed after reading).
        nnodes, node_rank, rdzv_endpoint, rdzv_backend, rdzv_id, master_addr, master_port: torchrun's rendezvous
            options, passed through when nnodes > 1 (one node uses --standalone).
        rdzv_timeout_s: how long to wait for the rendezvous (and for the endpoint to answer, node_rank > 0), seconds.
        nccl_debug_log: run with NCCL_DEBUG=INFO, NCCL_DEBUG_SUBSYS=INIT,TUNING and read the algorithm and protocol
            NCCL chose per size from its log (timings then include NCCL's logging; use a separate run).
        fit: fit α and β per op and mode at the end.
        progress: a progress bar on rank 0 (stderr).
        argv: the command line to record.
        timeout_s: the workers' process-group timeout (torch.distributed ``init_process_group``), seconds.
        nccl_library: the NCCL shared library the ``nccl`` API loads (a path or a soname); None: the one torch
            loaded (``libnccl.so.2`` from the nvidia-nccl wheel).
        debug: a failing worker also prints its Python traceback to stderr.
        resume: continue the sweep in ``out_dir``: the cases its results.jsonl holds as ok (measured with the same
            ranks, dtype, iterations, backend and API) are not measured again (:func:`truepeak.bench.comm.launch.
            resumed_cases`).

    Raises:
        ConfigError: a field no machine could run, in this order: a count below its minimum (``--nproc-per-node``,
            ``--nnodes`` >= 1, ``--iters`` >= 1, ``--warmup`` >= 0), a ``--rdzv-timeout`` that is not a finite
            number > 0, ``--node-rank`` outside 0 .. nnodes - 1, an unknown backend or API, ``--api nccl`` with gloo,
            several nodes without an endpoint, then an op, size, dtype or timeout that is not a case.
    """

    nproc_per_node: int | None
    ops: tuple[str, ...]
    sizes: tuple[int, ...]
    dtype: str = "bf16"
    iters: int = 20
    warmup: int = 5
    graph: bool = True
    backend: str = "nccl"
    api: str | None = None
    out_dir: str | None = None
    nnodes: int = 1
    node_rank: int = 0
    rdzv_endpoint: str | None = None
    rdzv_backend: str = "c10d"
    rdzv_id: str | None = None
    master_addr: str | None = None
    master_port: int | None = None
    rdzv_timeout_s: float = 60.0
    nccl_debug_log: bool = False
    fit: bool = True
    progress: bool = True
    argv: tuple[str, ...] | None = None
    timeout_s: float = 300.0
    nccl_library: str | None = None
    debug: bool = False
    resume: bool = False

    def __post_init__(self) -> None:
        set_ = object.__setattr__  # frozen: the normalised values are set once, here
        set_(self, "ops", tuple(self.ops))
        set_(self, "sizes", tuple(self.sizes))
        if self.argv is not None:
            set_(self, "argv", tuple(self.argv))
        if self.nproc_per_node is not None:
            _check_int("nproc_per_node", self.nproc_per_node, 1)
        _check_int("nnodes", self.nnodes, 1)
        _check_int("iters", self.iters, 1)
        _check_int("warmup", self.warmup, 0)
        timeout = self.rdzv_timeout_s
        if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or not 0 < timeout < math.inf:
            raise ConfigError(f"--rdzv-timeout {timeout} must be a finite number of seconds > 0, e.g. 60",
                              field="rdzv_timeout_s")
        if isinstance(self.node_rank, bool) or not isinstance(self.node_rank, int) \
                or not 0 <= self.node_rank < self.nnodes:
            raise ConfigError(f"--node-rank {self.node_rank} must be between 0 and --nnodes - 1 = {self.nnodes - 1}",
                              field="node_rank")
        if self.backend not in BACKENDS:
            raise ConfigError(f"unknown --backend {self.backend!r}; valid: {', '.join(BACKENDS)}", field="backend")
        if self.nproc_per_node is None and self.backend == "gloo":
            set_(self, "nproc_per_node", 2)
        if self.api is None:
            set_(self, "api", "nccl" if self.backend == "nccl" else "torch")
        if self.api not in APIS:
            raise ConfigError(f"unknown --api {self.api!r}; valid: {', '.join(APIS)}", field="api")
        if self.api == "nccl" and self.backend != "nccl":
            raise ConfigError(f"--api nccl calls libnccl and needs --backend nccl; with --backend {self.backend} use "
                              "--api torch", field="api")
        if self.nnodes > 1 and self.endpoint is None:
            raise ConfigError(f"--nnodes {self.nnodes} needs --rdzv-endpoint HOST:PORT (or --master-addr) of node 0",
                              field="rdzv_endpoint")
        self._check_cases()

    def _check_cases(self) -> None:
        """The sweep's own fields (the CLI parses them first, :mod:`truepeak.comm.sweep`; a library caller may not)."""
        if not self.ops:
            raise ConfigError(f"ops is empty; valid ops: {', '.join(MEASURED_OPS)}", field="ops")
        for op in self.ops:
            if op not in MEASURED_OPS:
                raise ConfigError(f"op {op!r} is not measured; valid ops: {', '.join(MEASURED_OPS)} (canonical names, "
                                  "truepeak.comm.sweep.parse_ops turns aliases into them)", field="ops")
        if not self.sizes:
            raise ConfigError("sizes is empty; give message sizes in bytes, e.g. (1024, 65536)", field="sizes")
        for s in self.sizes:
            if isinstance(s, bool) or not isinstance(s, int) or not 1 <= s <= MAX_BYTES:
                raise ConfigError(f"message size {s!r} must be a whole number of bytes from 1 to {MAX_BYTES} (16 GiB)",
                                  field="sizes")
        try:
            object.__setattr__(self, "dtype", canonical_dtype(self.dtype))  # the worker knows the canonical names only
        except UnknownNameError as exc:
            raise ConfigError(str(exc), field="dtype") from None
        t = self.timeout_s
        if isinstance(t, bool) or not isinstance(t, (int, float)) or not 0 < t < math.inf:
            raise ConfigError(f"timeout_s {t!r} must be a finite number of seconds > 0, e.g. 300", field="timeout_s")
        if self.master_port is not None:
            _check_int("master_port", self.master_port, 1)

    @property
    def endpoint(self) -> str | None:
        """Node 0's ``HOST:PORT``: ``rdzv_endpoint``, else ``master_addr:master_port`` (port 29500, torchrun's
        default, when left out); None on one node without either."""
        if self.rdzv_endpoint:
            return self.rdzv_endpoint
        if self.master_addr:
            return f"{self.master_addr}:{self.master_port or 29500}"
        return None

    @property
    def world(self) -> int | None:
        """Ranks in all: nnodes × nproc_per_node (None until nproc_per_node is known)."""
        return None if self.nproc_per_node is None else self.nnodes * self.nproc_per_node
