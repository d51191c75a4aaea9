"""Direct NCCL calls through ctypes: the same library calls nccl-tests makes (and vLLM's ``pynccl`` wrapper), without
torch.distributed's per-call bookkeeping (work objects, events, stream joins, the flight recorder).

Used by the ``nccl`` API of ``truepeak comm`` (``--api nccl``, the default on GPUs): out-of-place ``ncclAllReduce``,
``ncclAllGather``, ``ncclReduceScatter`` and an all-to-all made of ``ncclSend``/``ncclRecv`` pairs in one group, as
``NVIDIA/nccl-tests:src/alltoall.cu`` does. The communicator's unique id is handed out over the torch.distributed
process group that torchrun's rendezvous set up. The library is the one torch loaded (``libnccl.so.2``, from the
nvidia-nccl wheel), or ``TRUEPEAK_NCCL_LIBRARY``.

Signatures: NCCL ``nccl.h`` (``ncclResult_t ncclAllReduce(const void* sendbuff, void* recvbuff, size_t count,
ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream)``, ...); enum values from the same
header (ncclInt8 0, ncclUint8 1, ncclInt32 2, ncclInt64 4, ncclFloat16 6, ncclFloat32 7, ncclFloat64 8,
ncclBfloat16 9; ncclSum 0).
"""

from __future__ import annotations

import ctypes
import glob
import os
from typing import Any

NCCL_DTYPES = {"int8": 0, "uint8": 1, "int32": 2, "int64": 4, "fp16": 6, "fp32": 7, "fp64": 8, "bf16": 9}
NCCL_SUM = 0


class _UniqueId(ctypes.Structure):
    _fields_ = [("internal", ctypes.c_byte * 128)]


def _candidates() -> list[str]:
    out = []
    env = os.environ.get("TRUEPEAK_NCCL_LIBRARY")
    if env:
        out.append(env)
    out.append("libnccl.so.2")
    try:
        import nvidia.nccl as nv  # the wheel torch depends on

        for p in nv.__path__:
            out += sorted(glob.glob(os.path.join(p, "lib", "libnccl.so*")))
    except Exception:
        pass
    out.append("libnccl.so")
    return out


def load_library() -> ctypes.CDLL:
    """The NCCL shared library (the one already in the process when torch loaded it).

    Raises:
        OSError: none could be loaded (the message lists what was tried).
    """
    tried = []
    for name in _candidates():
        try:
            lib = ctypes.CDLL(name)
            lib.ncclGetVersion  # noqa: B018 (is it NCCL?)
            return lib
        except (OSError, AttributeError) as exc:
            tried.append(f"{name} ({exc})")
    raise OSError("cannot load the NCCL library; tried " + "; ".join(tried) + ". Set TRUEPEAK_NCCL_LIBRARY or pass "
                  "--api torch")


class NcclComm:
    """One NCCL communicator for this rank, created collectively over ``dist`` (the default process group).

    Args:
        dist: ``torch.distributed`` (initialised); rank 0's unique id is broadcast over it.
        torch: the torch module. device: this rank's CUDA device.
    """

    def __init__(self, torch: Any, dist: Any, device: Any):
        self.torch = torch
        lib = self.lib = load_library()
        vp, sz, ci = ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int
        lib.ncclGetErrorString.restype = ctypes.c_char_p
        lib.ncclGetErrorString.argtypes = [ci]
        lib.ncclGetVersion.argtypes = [ctypes.POINTER(ci)]
        lib.ncclGetUniqueId.argtypes = [ctypes.POINTER(_UniqueId)]
        lib.ncclCommInitRank.argtypes = [ctypes.POINTER(vp), ci, _UniqueId, ci]
        lib.ncclCommDestroy.argtypes = [vp]
        lib.ncclAllReduce.argtypes = [vp, vp, sz, ci, ci, vp, vp]
        lib.ncclAllGather.argtypes = [vp, vp, sz, ci, vp, vp]
        lib.ncclReduceScatter.argtypes = [vp, vp, sz, ci, ci, vp, vp]
        lib.ncclSend.argtypes = [vp, sz, ci, ci, vp, vp]
        lib.ncclRecv.argtypes = [vp, sz, ci, ci, vp, vp]
        for f in ("ncclGetErrorString", "ncclGetVersion", "ncclGetUniqueId", "ncclCommInitRank", "ncclCommDestroy",
                  "ncclAllReduce", "ncclAllGather", "ncclReduceScatter", "ncclSend", "ncclRecv", "ncclGroupStart",
                  "ncclGroupEnd"):
            if f != "ncclGetErrorString":
                getattr(lib, f).restype = ci
        v = ci()
        self._check(lib.ncclGetVersion(ctypes.byref(v)))
        code = v.value  # 22809 = 2.28.9 (major*10000 + minor*100 + patch since 2.9)
        self.version = f"{code // 10000}.{code // 100 % 100}.{code % 100}"
        self.rank, self.world = dist.get_rank(), dist.get_world_size()
        uid = _UniqueId()
        if self.rank == 0:
            self._check(lib.ncclGetUniqueId(ctypes.byref(uid)))
        t = torch.tensor(list(bytes(uid.internal)), dtype=torch.uint8, device=device)
        dist.broadcast(t, src=0)
        ctypes.memmove(ctypes.addressof(uid), bytes(t.cpu().tolist()), 128)
        self.comm = ctypes.c_void_p()
        with torch.cuda.device(device):
            self._check(lib.ncclCommInitRank(ctypes.byref(self.comm), self.world, uid, self.rank))

    def _check(self, result: int) -> None:
        if result != 0:
            raise RuntimeError(f"NCCL error {result}: {self.lib.ncclGetErrorString(result).decode()}")

    def _stream(self) -> ctypes.c_void_p:
        return ctypes.c_void_p(self.torch.cuda.current_stream().cuda_stream)

    def all_reduce(self, out: Any, inp: Any, dtype: str) -> None:
        """Out-of-place sum: ``out`` [count] = Σ ranks ``inp`` [count]."""
        self._check(self.lib.ncclAllReduce(inp.data_ptr(), out.data_ptr(), inp.numel(), NCCL_DTYPES[dtype], NCCL_SUM,
                                           self.comm, self._stream()))

    def all_gather(self, out: Any, inp: Any, dtype: str) -> None:
        """``out`` [n·count] = concatenation over ranks of ``inp`` [count]."""
        self._check(self.lib.ncclAllGather(inp.data_ptr(), out.data_ptr(), inp.numel(), NCCL_DTYPES[dtype],
                                           self.comm, self._stream()))

    def reduce_scatter(self, out: Any, inp: Any, dtype: str) -> None:
        """``out`` [count] = Σ ranks of this rank's slice of ``inp`` [n·count]."""
        self._check(self.lib.ncclReduceScatter(inp.data_ptr(), out.data_ptr(), out.numel(), NCCL_DTYPES[dtype],
                                               NCCL_SUM, self.comm, self._stream()))

    def all_to_all(self, out: Any, inp: Any, dtype: str) -> None:
        """Chunk p of ``inp`` [n·count] goes to rank p; chunk q of ``out`` comes from rank q (ncclSend/ncclRecv)."""
        n = self.world
        count = inp.numel() // n
        step = count * inp.element_size()
        s, dt, lib = self._stream(), NCCL_DTYPES[dtype], self.lib
        ip, op = inp.data_ptr(), out.data_ptr()
        self._check(lib.ncclGroupStart())
        for p in range(n):
            self._check(lib.ncclSend(ip + p * step, count, dt, p, self.comm, s))
            self._check(lib.ncclRecv(op + p * step, count, dt, p, self.comm, s))
        self._check(lib.ncclGroupEnd())

    def bound(self, op: str, out: Any, inp: Any, dtype: str) -> Any:
        """A zero-argument callable running ``op`` (out of place, ``inp`` → ``out``) on the CURRENT stream at the time
        of this call, with every ctypes argument converted once: the eager timing loop then costs one foreign call per
        collective, as nccl-tests' C loop does, instead of a stream lookup, pointer reads and conversions per call
        (which made eager small messages launch-bound at ~25 µs on 2x H200). Not for CUDA-graph capture, which runs on
        another stream: use the methods above there. all_to_all keeps the per-call method (a group of n send/recv)."""
        if op == "all_to_all":
            f = self.all_to_all
            return lambda: f(out, inp, dtype)
        vp, sz, ci = ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int
        stream, comm, dt = vp(self.torch.cuda.current_stream().cuda_stream), self.comm, ci(NCCL_DTYPES[dtype])
        if op == "all_reduce":
            fn, args = self.lib.ncclAllReduce, (vp(inp.data_ptr()), vp(out.data_ptr()), sz(inp.numel()), dt,
                                                ci(NCCL_SUM), comm, stream)
        elif op == "all_gather":
            fn, args = self.lib.ncclAllGather, (vp(inp.data_ptr()), vp(out.data_ptr()), sz(inp.numel()), dt, comm,
                                                stream)
        elif op == "reduce_scatter":
            fn, args = self.lib.ncclReduceScatter, (vp(inp.data_ptr()), vp(out.data_ptr()), sz(out.numel()), dt,
                                                    ci(NCCL_SUM), comm, stream)
        else:
            raise ValueError(f"unknown op {op!r}")
        check = self._check

        def call() -> None:
            rc = fn(*args)
            if rc:
                check(rc)

        return call

    def close(self) -> None:
        if self.comm:
            self.lib.ncclCommDestroy(self.comm)
            self.comm = ctypes.c_void_p()
