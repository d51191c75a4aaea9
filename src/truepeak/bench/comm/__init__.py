"""``truepeak comm``'s measuring side: the settings (:mod:`~truepeak.bench.comm.config`), the torchrun launch
(:mod:`~truepeak.bench.comm.launch`), one rank's sweep (:mod:`~truepeak.bench.comm.worker`, started as ``python -m
truepeak.bench.comm.worker``) and direct NCCL calls (:mod:`~truepeak.bench.comm.pynccl`). The definitions and the
α–β model they measure against are pure Python, in :mod:`truepeak.comm`.

Importing this package imports no torch: the launch and the workers import it inside the functions that measure.
"""

from truepeak.bench.comm.config import APIS, BACKENDS, CommConfig
from truepeak.bench.comm.launch import CommInterrupted, CommResult, planned_cases, run_comm

__all__ = ["APIS", "BACKENDS", "CommConfig", "CommInterrupted", "CommResult", "planned_cases", "run_comm"]
