"""The environment a measurement ran on: machine, software, GPU and the settings that change results.

Called once per run by every command that measures; the result is stored in each record
(:class:`truepeak.records.Environment`). Follows mamf-finder's header and pytest-benchmark's ``machine_info``.
Imports torch and NVML only inside :func:`environment`, and never fails: an unknown value is None.
"""

from __future__ import annotations

import os
import platform
import shlex
import sys
from collections.abc import Iterable
from typing import Any

import truepeak
from truepeak.records import Environment, RecordError

#: Environment variables that change what a measurement means; recorded when set (plus every NCCL_*).
ENV_VARS = (
    "CUDA_VISIBLE_DEVICES", "CUDA_DEVICE_MAX_CONNECTIONS", "CUDA_MODULE_LOADING", "CUBLAS_WORKSPACE_CONFIG",
    "CUBLASLT_WORKSPACE_SIZE", "NVIDIA_TF32_OVERRIDE", "TORCH_ALLOW_TF32_CUBLAS_OVERRIDE", "TORCH_BLAS_PREFER_CUBLASLT",
    "PYTORCH_CUDA_ALLOC_CONF", "PYTORCH_TUNABLEOP_ENABLED", "PYTORCH_NVML_BASED_CUDA_CHECK", "TRITON_CACHE_DIR",
    "OMP_NUM_THREADS",
)
_SECRETISH = ("TOKEN", "KEY", "SECRET", "PASSWORD", "PASSWD", "CREDENTIAL")


# -- environment -------------------------------------------------------------------------------------------------------
def _try(get: Any, default: Any = None) -> Any:
    try:
        return get()
    except Exception:
        return default


def _cpu_model() -> str | None:
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as f:
            for line in f:
                if line.lower().startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or None


def _dist_version(name: str) -> str | None:
    from importlib import metadata

    try:
        return metadata.version(name)
    except Exception:
        return None


def _env_vars() -> dict[str, str]:
    out = {}
    for name, value in sorted(os.environ.items()):
        if any(s in name.upper() for s in _SECRETISH):
            continue
        if name in ENV_VARS or name.startswith("NCCL_"):
            out[name] = value
    return out


def _torch_info(device: int | None) -> tuple[dict[str, Any], dict[str, Any] | None]:
    """Versions from torch, and the GPU's description (None without CUDA). Never raises."""
    info: dict[str, Any] = {"torch": None, "cuda": None, "cudnn": None, "nccl": None}
    try:
        import torch
    except Exception:
        return info, None
    info["torch"] = getattr(torch, "__version__", None)
    info["cuda"] = _try(lambda: torch.version.cuda)
    info["cudnn"] = _try(lambda: torch.backends.cudnn.version() if torch.backends.cudnn.is_available() else None)
    info["float32_matmul_precision"] = _try(torch.get_float32_matmul_precision)
    info["allow_tf32_cublas"] = _try(lambda: bool(torch.backends.cuda.matmul.allow_tf32))
    gpu = None
    if device is not None and _try(torch.cuda.is_available, False):
        nccl = _try(lambda: torch.cuda.nccl.version())
        if isinstance(nccl, tuple):
            nccl = ".".join(str(p) for p in nccl)
        info["nccl"] = None if nccl is None else str(nccl)
        props = _try(lambda: torch.cuda.get_device_properties(device))
        if props is not None:
            gpu = {
                "index": device,
                "count": _try(torch.cuda.device_count),
                "name": _try(lambda: props.name),
                "compute_capability": _try(lambda: f"{props.major}.{props.minor}"),
                "sm_count": _try(lambda: props.multi_processor_count),
                "memory_bytes": _try(lambda: int(props.total_memory)),
                "l2_bytes": _try(lambda: int(props.L2_cache_size)),
                "uuid": _try(lambda: str(props.uuid)),
            }
            gpu.update(_nvml_info(_try(lambda: int(torch.cuda._get_nvml_device_index(device)), device)))
    return info, gpu


def _nvml_info(index: int) -> dict[str, Any]:
    """Driver version, power limit and max SM clock of NVML device ``index``, from :mod:`truepeak.hardware.nvml`
    (NVML initialised once per process, each device's facts read once); Nones when NVML is unavailable. Never
    raises."""
    out: dict[str, Any] = {"driver": None, "power_limit_w": None, "max_sm_clock_hz": None}
    try:
        from truepeak.hardware import nvml

        out["driver"] = nvml.driver_version()
        info = nvml.device_info(int(index))
    except Exception:
        return out
    if info is not None:
        out["power_limit_w"] = info.power_limit_w
        out["max_sm_clock_hz"] = info.max_sm_clock_hz
    return out


def environment(argv: Iterable[str] | None = None, *, device: int | None = 0) -> Environment:
    """Describe the machine and software a measurement ran on; every field is optional and nothing raises.

    Args:
        argv: the command line to record (default ``sys.argv``).
        device: torch CUDA device index to describe; ``None`` skips the GPU (and CUDA initialisation).

    Returns:
        :class:`truepeak.records.Environment`: ``truepeak_version``, ``python``, ``platform``, ``machine``, ``cpu``,
        ``numpy``, ``torch``, ``cuda`` (torch's CUDA build), ``cudnn``, ``nccl``, ``triton``,
        ``float32_matmul_precision``, ``allow_tf32_cublas``, ``gpu`` (:class:`~truepeak.records.GpuInfo`: name,
        compute capability "9.0", SMs, memory and L2 bytes, driver, power limit, max SM clock; None without a CUDA
        GPU), ``env_vars`` (CUDA/cuBLAS/NCCL/torch settings that change results), ``argv`` and ``command_line``.
        Unknown values are None. The detected device is added by the caller: ``env.replace(device=dev.to_dict())``.

    torch is imported here when installed (this takes a second or two); call it once per run and pass the result to
    :func:`truepeak.records.make_record`.
    """
    args = [str(a) for a in (sys.argv if argv is None else argv)]
    torch_info, gpu = _torch_info(device)
    return _typed({
        "truepeak_version": truepeak.__version__,
        "python": platform.python_version(),
        "python_implementation": platform.python_implementation(),
        "platform": _try(platform.platform),
        "machine": platform.machine() or None,
        "cpu": _try(_cpu_model),
        "numpy": _dist_version("numpy"),
        **torch_info,
        "triton": _dist_version("triton"),
        "gpu": gpu,
        "env_vars": _try(_env_vars, {}),
        "argv": args,
        "command_line": _try(lambda: shlex.join(args), " ".join(args)),
    })



def _typed(info: dict[str, Any]) -> Environment:
    """``info`` as an :class:`Environment`; a value of a type the schema does not expect (a library reporting its
    version oddly) becomes None rather than failing the run."""
    while True:
        try:
            return Environment.from_dict(info)
        except RecordError as exc:
            *parents, name = exc.field.split(".")
            holder = info
            for p in parents:
                holder = holder.get(p) if isinstance(holder, dict) else None
            if not isinstance(holder, dict) or holder.get(name) is None:
                return Environment(truepeak_version=truepeak.__version__)
            holder[name] = None


__all__ = ["environment", "ENV_VARS"]
