"""What each GEMM format needs and where it runs: the formats and fp8 scale layouts the backends sweep, their
correctness tolerances, whether a device can run one (:func:`supported`), the backend's name, the workload (FLOP and
minimum bytes) and the rows the library call gets. torch is imported lazily, only where :func:`supported` asks it for
the dtypes a format needs (:func:`torch_module`)."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from truepeak.errors import UnsupportedError, require
from truepeak.formats import Format, get_format
from truepeak.roofline import Gemm

if TYPE_CHECKING:  # pragma: no cover
    from truepeak.hardware.detect import DeviceInfo

#: Largest relative Frobenius error ||out - ref|| / ||ref|| accepted per format (int8 must be exact). The reference
#: uses the same quantised inputs, so fp8/fp4 errors are the bf16 output rounding (~2^-9) plus accumulation order.
TOLERANCES: dict[str, float] = {"fp32": 1e-5, "tf32": 5e-3, "bf16": 2e-2, "fp16": 2e-2, "fp8_e4m3": 0.1,
                                "fp8_e5m2": 0.1, "int8": 0.0, "mxfp8": 0.1, "nvfp4": 0.1, "mxfp4": 0.1}

#: Formats these backends can run, in sweep order.
GPU_FORMATS: tuple[str, ...] = ("fp32", "tf32", "bf16", "fp16", "fp8_e4m3", "fp8_e5m2", "int8")
CPU_FORMATS: tuple[str, ...] = ("fp32", "bf16")
#: Block-scaled formats: measured on sm_100 / sm_120 (never run here yet), one skipped record each elsewhere.
GPU_SKIP_PROBES: tuple[str, ...] = ("mxfp8", "nvfp4", "mxfp4")
#: fp32 scale layouts of the fp8 formats, in sweep order (formats.SCALINGS names).
FP8_SCALINGS: tuple[str, ...] = ("tensor", "row", "block128")
#: Input kinds a TorchGemm can be built with: random (the default and the only one for peaks) and zeros
#: (docs/method.md, 'Random inputs').
INPUT_KINDS: tuple[str, ...] = ("random", "zeros")
#: Compute capabilities (major * 10 + minor) with block-scaled (MX / NVFP4) tensor cores that cuBLAS exposes.
BLOCK_SCALED_CCS = frozenset({100, 101, 103, 110, 120, 121})

_BLOCK_SCALED_ARCHS = "sm_100 or sm_120"


class BackendUnsupported(UnsupportedError):
    """The library refused a format / scale combination at its first call (e.g. CUBLAS_STATUS_NOT_SUPPORTED): the
    case is ``skipped`` with this message, never a crash."""


def torch_module():
    """Import torch or raise MissingDependencyError with the install command."""
    return require("torch", "measuring GEMMs")


def default_scaling(fmt: str | Format) -> str | None:
    """``"tensor"`` for the fp8 formats (mamf-finder's and the literature's fp8 figures are per-tensor), else None."""
    return "tensor" if get_format(fmt).name in ("fp8_e4m3", "fp8_e5m2") else None


def fp8_scaling(fmt: Format, scaling: str | None) -> str | None:
    """The fp8 scale layout a case runs with: ``scaling`` (default ``"tensor"``) for the fp8 formats, None for others.

    Raises:
        UnsupportedError: an fp8 scaling not in :data:`FP8_SCALINGS`.
    """
    if fmt.name in ("fp8_e4m3", "fp8_e5m2"):
        s = scaling or "tensor"
        if s not in FP8_SCALINGS:
            raise UnsupportedError(f"unknown fp8 scaling {s!r}; accepted: {', '.join(FP8_SCALINGS)}")
        return s
    return None


def supported(fmt: str | Format, device: DeviceInfo, shape: tuple[int, int, int] | None = None,
              scaling: str | None = None) -> tuple[bool, str]:
    """Can this backend run ``fmt`` (with fp8 ``scaling``, at ``shape``) on ``device``? Returns ``(ok, reason)``;
    reason is "" when ok.

    A False is written as a ``skipped`` record with the reason, never raised.
    Examples: nvfp4 on an H200 -> ``(False, "nvfp4 GEMM needs sm_100 or sm_120; this device is sm_90")``;
    int8 at M=16 -> ``(False, "torch._int_mm needs M > 16 ...")``. What the check cannot know before calling the
    library (a torch build that rejects a scale layout) surfaces as :class:`BackendUnsupported` from
    :meth:`TorchGemm.check`.
    """
    f = get_format(fmt)
    if device.kind == "cpu":
        if f.name in CPU_FORMATS:
            return True, ""
        if f.name == "fp16":
            return False, "fp16 GEMM on a CPU is not measured: torch's CPU fp16 matmul is not a tuned path"
        if f.name == "tf32":
            return False, "tf32 is a tensor-core mode of NVIDIA GPUs (sm_80 and newer); a CPU has none"
        return False, f"{f.name} GEMM needs a CUDA GPU; this device is a CPU"
    cc = device.sm_arch or 0
    arch = f"sm_{cc}"
    if f.is_block_scaled:
        return _block_scaled_supported(f, cc, arch, shape)
    if f.name not in GPU_FORMATS:
        return False, f"{f.name} GEMM is not implemented in truepeak's torch backend"
    if f.name in ("tf32", "bf16") and cc < 80:
        return False, f"{f.name} tensor-core GEMM needs sm_80 or newer; this device is {arch}"
    if f.name == "int8" and cc < 75:
        return False, f"int8 tensor-core GEMM needs sm_75 or newer; this device is {arch}"
    torch = torch_module()
    if f.name in ("fp8_e4m3", "fp8_e5m2"):
        s = fp8_scaling(f, scaling)
        if cc < 89:
            return False, f"fp8 GEMM needs sm_89 or newer; this device is {arch}"
        if not hasattr(torch, "float8_e4m3fn") or not hasattr(torch, "_scaled_mm"):
            return False, f"torch {torch.__version__} has no float8_e4m3fn / _scaled_mm; fp8 needs torch >= 2.1"
        if shape is not None and (shape[1] % 16 or shape[2] % 16):
            return False, f"torch._scaled_mm needs N and K to be multiples of 16; got N={shape[1]}, K={shape[2]}"
        if s == "block128":
            if f.name != "fp8_e4m3":
                return False, "128-block fp8 scales are measured for fp8_e4m3 only (DeepSeek-V3 style e4m3 x e4m3)"
            if cc != 90:
                return False, (f"128-block fp8 scales (1x128 x 128x128) run through cuBLAS on sm_90 only in torch; "
                               f"this device is {arch}")
            if not hasattr(getattr(torch.nn, "functional", None), "scaled_mm"):
                return False, (f"torch {torch.__version__} has no torch.nn.functional.scaled_mm (ScalingType "
                               "BlockWise1x128 / BlockWise128x128), needed for 128-block fp8 scales")
            if shape is not None and (shape[1] % 128 or shape[2] % 128):
                return False, f"128-block fp8 scales need N and K multiples of 128; got N={shape[1]}, K={shape[2]}"
    if f.name == "int8":
        if not hasattr(torch, "_int_mm"):
            return False, f"torch {torch.__version__} has no _int_mm; int8 GEMM needs torch >= 2.1"
        if shape is not None:
            m, n, k = shape
            if m <= 16 or k % 8 or n % 8:
                return False, f"torch._int_mm needs M > 16 and K, N multiples of 8; got M={m}, N={n}, K={k}"
    return True, ""


def _block_scaled_supported(f: Format, cc: int, arch: str, shape: tuple[int, int, int] | None) -> tuple[bool, str]:
    """mxfp8 / nvfp4 / mxfp4: sm_100 or sm_120, a torch with the dtypes, the quantiser, and K a multiple of 32."""
    if cc not in BLOCK_SCALED_CCS:
        return False, f"{f.name} GEMM needs {_BLOCK_SCALED_ARCHS}; this device is {arch}"
    if f.name == "mxfp6":
        return False, "mxfp6 GEMM is not implemented in truepeak's torch backend (torch has no fp6 dtype)"
    torch = torch_module()
    needs = ["float8_e4m3fn"] + (["float8_e8m0fnu"] if f.name != "nvfp4" else []) + (
        ["float4_e2m1fn_x2"] if f.name in ("nvfp4", "mxfp4") else [])
    missing = [d for d in needs if not hasattr(torch, d)]
    if missing:
        return False, f"torch {torch.__version__} has no {', '.join(missing)}; {f.name} GEMM needs a newer torch"
    try:
        from truepeak.kernels import quant  # noqa: F401
    except ImportError as exc:
        return False, f"{f.name} quantisation (truepeak.kernels.quant) is not available: {exc}"
    if shape is not None and (shape[2] % 32 or shape[1] % 16):
        return False, f"{f.name} GEMM needs K a multiple of 32 and N of 16; got N={shape[1]}, K={shape[2]}"
    return True, ""


def backend_name(fmt: str | Format, device_kind: str, scaling: str | None = None) -> str:
    """One line naming the code path measured (library call, layout, scales, accumulate)."""
    f = get_format(fmt)
    lib = "cuBLAS" if device_kind == "cuda" else "CPU BLAS (oneDNN/MKL/OpenBLAS)"
    if f.name == "fp32":
        return f"torch.mm TN ({lib}), allow_tf32=False, fp32 out"
    if f.name == "tf32":
        return f"torch.mm TN ({lib}), allow_tf32=True, fp32 out"
    if f.name in ("bf16", "fp16"):
        return f"torch.mm TN ({lib}), {f.name} out, fp32 accumulate"
    if f.name in ("fp8_e4m3", "fp8_e5m2"):
        s = fp8_scaling(f, scaling)
        types = "e4m3 x e4m3" if f.name == "fp8_e4m3" else "e4m3 (A) x e5m2 (B; cuBLASLt has no e5m2 x e5m2)"
        if s == "block128":
            return (f"torch.nn.functional.scaled_mm TN (cuBLASLt), {types}, 1x128 (A) x 128x128 (B) fp32 block "
                    "scales, bf16 out, use_fast_accum=False")
        scales = "per-tensor fp32 scales" if s == "tensor" else "per-row fp32 scales (scale_a [M,1], scale_b [1,N])"
        return f"torch._scaled_mm TN (cuBLASLt), {types}, {scales}, bf16 out, use_fast_accum=False"
    if f.name == "int8":
        return "torch._int_mm TN (cuBLASLt), int32 out"
    if f.name == "mxfp8":
        return "torch._scaled_mm TN (cuBLASLt), mxfp8 e4m3 x e4m3, e8m0 scales per 32 (swizzled 128x4), bf16 out"
    if f.name == "nvfp4":
        return ("torch._scaled_mm TN (cuBLASLt), nvfp4 e2m1 x e2m1, e4m3 scales per 16 (swizzled 128x4) and fp32 "
                "global scales, bf16 out")
    if f.name == "mxfp4":
        return "torch._scaled_mm TN (cuBLASLt), mxfp4 e2m1 x e2m1, e8m0 scales per 32 (swizzled 128x4), bf16 out"
    return f"torch ({f.name})"


def gemm_workload(fmt: str | Format, m: int, n: int, k: int, scaling: str | None = None) -> Gemm:
    """The :class:`~truepeak.roofline.Gemm` these backends run: the fp8 formats carry their fp32 scales (``scaling``,
    default ``"tensor"``; counted in the bytes); block-scaled formats carry their own; the others have none."""
    f = get_format(fmt)
    return Gemm(m, n, k, f, scaling=fp8_scaling(f, scaling))


def bytes_per_set(fmt: str | Format, m: int, n: int, k: int, scaling: str | None = None) -> int:
    """Bytes of one input/output set (A + B + C in their formats, scales counted), for rotation sizing."""
    return gemm_workload(fmt, m, n, k, scaling).min_bytes


#: cuBLASLt's fp8 kernels need every matrix's leading dimension 16-byte aligned (cuBLAS documentation,
#: ``cublasLtMatmul``, fp8 requirements: "All matrix pointers must be 16-byte aligned" and dimensions as in "Tensor Core
#: Usage"). The 1 x 128 activation scales are a [M, K/128] fp32 matrix stored with leading dimension M, so M must be a
#: multiple of 4: on an H200 (torch 2.11, CUDA 13) M = 1 and 2 are refused with CUBLAS_STATUS_NOT_SUPPORTED in
#: ``cublasLtMatmulAlgoGetHeuristic`` and M = 4 runs (docs/results/h200/README.md).
BLOCK128_ROW_MULTIPLE = 4


def run_rows(fmt: str | Format, m: int, scaling: str | None = None) -> int:
    """Rows of A the library call actually gets: ``m``, except for 128-block fp8 scales, where M is padded up to a
    multiple of :data:`BLOCK128_ROW_MULTIPLE` (an engine that calls cuBLAS pads its batch the same way). The padding
    rows are random inputs like the rest; only the first ``m`` rows are checked, and FLOP and bytes count ``m``."""
    f = get_format(fmt)
    if f.name in ("fp8_e4m3", "fp8_e5m2") and fp8_scaling(f, scaling) == "block128":
        step = BLOCK128_ROW_MULTIPLE
        return -(-int(m) // step) * step
    return int(m)


def padding_note(fmt: str | Format, m: int, scaling: str | None = None) -> str:
    """The record's note when :func:`run_rows` pads M (empty otherwise): ``"M=1 run as 4 rows: ..."``."""
    rows = run_rows(fmt, m, scaling)
    if rows == m:
        return ""
    return (f"M={m} run as {rows} rows: cuBLASLt's 1x128-scaled fp8 GEMM needs M a multiple of "
            f"{BLOCK128_ROW_MULTIPLE} (16-byte-aligned scale columns); FLOP and bytes count the {m} real rows")


def check_passes(fmt: str | Format, error: float) -> bool:
    """True if a relative error is within the format's tolerance (NaN never passes; int8 must be exactly 0)."""
    tol = TOLERANCES[get_format(fmt).name]
    return math.isfinite(error) and error <= tol


__all__ = ["TOLERANCES", "GPU_FORMATS", "CPU_FORMATS", "GPU_SKIP_PROBES", "FP8_SCALINGS", "INPUT_KINDS",
           "BLOCK_SCALED_CCS", "BackendUnsupported", "torch_module", "default_scaling", "fp8_scaling", "supported",
           "backend_name", "gemm_workload", "bytes_per_set", "BLOCK128_ROW_MULTIPLE", "run_rows", "padding_note",
           "check_passes"]
