"""GEMM backends on torch, one per number format (and fp8 scale layout): build inputs, check the result, hand a launch
function to the timer.

Every GEMM here is ``C[M, N] = A[M, K] @ B[N, K]^T`` with B the weight stored N x K (as ``nn.Linear`` stores it), so
the library sees A row-major and B column-major ("TN", as mamf-finder and cuBLAS benchmarks use; Hopper's fp8 GEMMs
accept only TN):

==============  =====================================================================================  ==============
format/scaling  call                                                                                   output
==============  =====================================================================================  ==============
fp32            ``torch.mm(A, B.t(), out=C)`` with ``torch.backends.cuda.matmul.allow_tf32 = False``  fp32
tf32            the same with ``allow_tf32 = True`` (fp32 storage, 10-bit-mantissa tensor-core math)   fp32
bf16, fp16      ``torch.mm(A, B.t(), out=C)``                                                         bf16, fp16
fp8_e4m3        ``torch._scaled_mm(A, B.t(), scale_a, scale_b, out_dtype=bfloat16)``; ``tensor``:      bf16
                one fp32 scale each; ``row``: scale_a [M, 1], scale_b [1, N] fp32 (sm_89+);
                ``block128``: ``torch.nn.functional.scaled_mm`` with 1 x 128 activation scales and
                128 x 128 weight scales (DeepSeek-V3 style; cuBLAS >= 12.9 on sm_90 only)
fp8_e5m2        as fp8_e4m3 with A in e4m3 and B in e5m2: cuBLASLt has no e5m2 x e5m2 GEMM              bf16
                (cuBLAS docs, cublasLtMatmul FP8 type table); tensor and row scales
int8            ``torch._int_mm(A, B.t())`` (cuBLASLt; needs M > 16 and K, N multiples of 8)           int32
mxfp8           ``torch._scaled_mm`` on float8_e4m3fn with e8m0 scales per 32 values (sm_100/sm_120)     bf16
nvfp4           ``torch._scaled_mm`` on float4_e2m1fn_x2 with e4m3 scales per 16 values; the two        bf16
                per-tensor fp32 global scales are applied to the output in the check (sm_100/sm_120)
mxfp4           ``torch._scaled_mm`` on float4_e2m1fn_x2 with e8m0 scales per 32 values (sm_100/sm_120) bf16
==============  =====================================================================================  ==============

The block-scaled formats (mxfp8, nvfp4, mxfp4) quantise with :mod:`truepeak.kernels.quant` and pass their scales in
cuBLAS's swizzled 128 x 4 layout (:func:`swizzle_block_scales`). **These paths have not been run on an sm_100 or
sm_120 device**: only their quantisation and scale layout are tested, on the CPU; on sm_90 they are ``skipped`` with
the reason ("nvfp4 GEMM needs sm_100 or sm_120; this device is sm_90"). A library call that rejects a combination it
does not support (a 128-block fp8 scale on a torch without ``scaled_mm``, say) raises :class:`BackendUnsupported`
from the first call, which ``truepeak run`` and ``truepeak peak`` record as ``skipped`` with the library's words.

Inputs are uniform in [-1, 1] (int8: uniform integers in [-128, 127]) from a seeded ``torch.Generator``, never zeros:
zero or low-entropy data runs 7-20 % faster at lower power (NVIDIA/cutlass#2004; docs/method.md, 'Random inputs').
Zeros are used only when asked for (``inputs="zeros"``), and the Measurement is then labelled (``input_kind``) and
carries an ``inputs_not_random`` warning. fp8 scales are uniform in [0.25, 1] (CUTLASS guideline: scale factors in
[0, 1]; kept away from 0 so the output stays in range). Enough input sets are allocated that their total is >= 2x the
device-reported L2 (``rotation_sets``), and the timer launches set ``i % n_sets`` on call ``i`` (docs/method.md,
'Cache-resident working sets').

Before timing, the output of set 0 is checked against a float64 reference computed from the same (quantised and
scaled) inputs, on the first ``check_rows`` rows (rows of C are independent, so a slice checks the kernel at a
fraction of the cost): relative error ``||out - ref||_F / ||ref||_F`` with per-format tolerances
(:data:`TOLERANCES`). A NaN or an error above the tolerance makes the case ``failed``. Using float64 on
the GPU too (rather than a float32 reference) keeps the fp32 check meaningful: an fp32 reference would repeat the
kernel's own arithmetic.

Torch is imported lazily; a missing torch raises :class:`~truepeak.errors.MissingDependencyError` with the install
command.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

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
#: The library answers that say "this combination is not supported" (vs a bug or an out-of-memory).
_UNSUPPORTED_WORDS = ("not supported", "not_supported", "only supported", "unsupported", "invalid scaling",
                      "expected", "is not implemented", "no kernel", "requires")


class BackendUnsupported(UnsupportedError):
    """The library refused a format / scale combination at its first call (e.g. CUBLAS_STATUS_NOT_SUPPORTED): the
    case is ``skipped`` with this message, never a crash."""


def torch_module():
    """Import torch or raise MissingDependencyError with the install command."""
    return require("torch", "measuring GEMMs")


def default_scaling(fmt: str | Format) -> str | None:
    """``"tensor"`` for the fp8 formats (mamf-finder's and the literature's fp8 figures are per-tensor), else None."""
    return "tensor" if get_format(fmt).name in ("fp8_e4m3", "fp8_e5m2") else None


def _scaling(fmt: Format, scaling: str | None) -> str | None:
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
        s = _scaling(f, scaling)
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
        s = _scaling(f, scaling)
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
    return Gemm(m, n, k, f, scaling=_scaling(f, scaling))


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
    if f.name in ("fp8_e4m3", "fp8_e5m2") and _scaling(f, scaling) == "block128":
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


# ----------------------------------------------------------------------------------------------------------------------
# cuBLAS block-scale layout


def swizzled_scale_index(row: int, col: int, cols: int) -> int:
    """Position of scale ``(row, col)`` of a ``[rows, cols]`` block-scale matrix in cuBLAS's swizzled layout.

    cuBLAS "1D Block Scaling Factors Layout" (cuBLAS docs, section on block-scaled GEMMs; the same rearrangement as
    PyTorch's ``to_blocked`` in ``torch/testing/_internal/common_quantized.py``): the matrix is padded to multiples of
    128 rows and 4 columns and cut into 128 x 4 tiles stored one after another, row of tiles by row of tiles
    (``tile = (row // 128) * ceil(cols / 4) + col // 4``); inside a tile of 512 bytes, row ``r`` = ``32 i + j``
    (``i`` in 0..3, ``j`` in 0..31) and column ``c`` land at ``16 j + 4 i + c``.
    """
    col_tiles = -(-int(cols) // 4)
    tile = (row // 128) * col_tiles + col // 4
    r = row % 128
    return tile * 512 + (r % 32) * 16 + (r // 32) * 4 + (col % 4)


def swizzle_block_scales(scales: Any) -> Any:
    """Rearrange row-major block scales ``[rows, cols]`` (one byte each: e8m0 or e4m3) into cuBLAS's swizzled 128 x 4
    layout (:func:`swizzled_scale_index`), zero-padded to 128-row / 4-column multiples; returns a flat tensor of
    ``ceil(rows / 128) * 128 * ceil(cols / 4) * 4`` elements of the input dtype. ``rows`` is M (A's scales) or N (B's),
    ``cols`` is K / block size.

    Raises:
        UnsupportedError: not a 2-D tensor of a one-byte dtype.
    """
    torch = torch_module()
    if scales.dim() != 2 or scales.element_size() != 1:
        raise UnsupportedError(f"block scales must be a 2-D one-byte tensor, got shape {tuple(scales.shape)} "
                               f"of {scales.dtype}")
    rows, cols = scales.shape
    rt, ct = -(-rows // 128), -(-cols // 4)
    raw = scales.view(torch.uint8)
    padded = torch.zeros((rt * 128, ct * 4), dtype=torch.uint8, device=scales.device)
    padded[:rows, :cols] = raw
    # [rt, 128, ct, 4] -> tiles [rt, ct, 128, 4] -> rows 128 = (i 4, j 32) -> (j, i, c): offset 16 j + 4 i + c
    tiles = padded.view(rt, 128, ct, 4).permute(0, 2, 1, 3).reshape(rt, ct, 4, 32, 4).transpose(2, 3)
    return tiles.reshape(-1).view(scales.dtype)


# ----------------------------------------------------------------------------------------------------------------------
# Inputs


def _uniform(torch, shape: tuple[int, ...], fmt: Format, device: str, seed: int, inputs: str = "random",
             dtype: Any = None):
    """Uniform [-1, 1] values in ``fmt``'s torch dtype (or ``dtype``; int8: integers in [-128, 127]); deterministic
    for ``seed``. ``inputs="zeros"`` gives zeros (only when asked, and labelled: docs/method.md,
    'Random inputs')."""
    dtype = dtype if dtype is not None else getattr(torch, fmt.torch_dtype)
    if inputs == "zeros":
        return torch.zeros(shape, device=device, dtype=dtype)
    gen = torch.Generator(device=device)
    gen.manual_seed(seed)
    if fmt.name == "int8":
        return torch.randint(-128, 128, shape, generator=gen, device=device, dtype=torch.int8)
    x = torch.rand(shape, generator=gen, device=device, dtype=torch.float32)
    x.mul_(2).sub_(1)
    return x.to(dtype)


def _scale_values(torch, shape: tuple[int, ...], device: str, seed: int, inputs: str):
    """fp32 scales uniform in [0.25, 1] (ones for zero inputs)."""
    if inputs == "zeros":
        return torch.ones(shape, device=device, dtype=torch.float32)
    gen = torch.Generator(device=device)
    gen.manual_seed(seed)
    return torch.rand(shape, generator=gen, device=device, dtype=torch.float32).mul_(0.75).add_(0.25)


@dataclass
class Operand:
    """One matrix operand ready for the library call, and how to rebuild its values for the reference.

    Attributes:
        data: the tensor passed to the library ([rows, K]; fp4 packed [rows, K / 2]).
        scale: the scale tensor(s) passed to the library (None for unscaled formats).
        dequant: ``dequant(rows)`` -> float64 [rows, K] values the library multiplies (scales applied).
        factor: a scalar the output is multiplied by in the check (nvfp4 global scales), 1.0 otherwise.
    """

    data: Any
    scale: Any = None
    dequant: Callable[[int | None], Any] | None = None
    factor: float = 1.0


def make_operand(fmt: str | Format, rows: int, k: int, device: str, seed: int, *, scaling: str | None = None,
                 weight: bool = False, inputs: str = "random") -> Operand:
    """Build one operand (A: ``weight=False``, M x K; B: ``weight=True``, N x K) in ``fmt`` with its scales.

    fp8: data uniform [-1, 1] in e4m3 (e5m2 for B of fp8_e5m2); scales per ``scaling``: ``tensor`` a 0-d fp32 tensor
    (1.0, the mamf-finder setting), ``row`` [rows, 1] for A and [1, rows] for B, ``block128`` A [M, K/128] stored
    outer-dim-major (stride [1, M]) and B's 128 x 128 scales [N/128, K/128] padded to L4 = round_up(K/128, 4) columns
    and passed transposed ([L4, N/128], stride [1, L4]): the layouts torch's ``scaled_mm`` asks on sm_90 (pytorch
    test/test_scaled_matmul_cuda.py ``test_scaled_mm_block_wise_numerics``). Block-scaled formats: quantised with
    :mod:`truepeak.kernels.quant`, scales swizzled (:func:`swizzle_block_scales`).
    """
    torch = torch_module()
    f = get_format(fmt)
    s = _scaling(f, scaling)
    if f.is_block_scaled:
        return _block_operand(torch, f, rows, k, device, seed, inputs)
    if f.name in ("fp8_e4m3", "fp8_e5m2"):
        dtype = torch.float8_e5m2 if (f.name == "fp8_e5m2" and weight) else torch.float8_e4m3fn
        data = _uniform(torch, (rows, k), f, device, seed, inputs, dtype=dtype)
        if s == "tensor":
            scale = torch.ones((), device=device, dtype=torch.float32)
            full = scale
        elif s == "row":
            vals = _scale_values(torch, (rows, 1), device, seed + 1, inputs)
            scale = vals.reshape(1, rows).contiguous() if weight else vals
            full = vals
        else:  # block128
            if weight:
                blocks = _scale_values(torch, (-(-rows // 128), k // 128), device, seed + 1, inputs)
                l4 = -(-(k // 128) // 4) * 4
                padded = torch.ones((blocks.shape[0], l4), device=device, dtype=torch.float32)
                padded[:, : k // 128] = blocks
                scale = padded.t()
                full = blocks.repeat_interleave(128, 0)[:rows].repeat_interleave(128, 1)
            else:
                blocks = _scale_values(torch, (rows, k // 128), device, seed + 1, inputs)
                scale = outer_dim_major(torch, blocks)
                full = blocks.repeat_interleave(128, 1)

        def dequant(r: int | None = None, data=data, full=full):
            d = data if r is None else data[:r]
            sc = full if (full.dim() == 0 or full.shape[0] == 1) else (full if r is None else full[:r])
            return d.to(torch.float64) * sc.to(torch.float64)

        return Operand(data, scale, dequant)
    data = _uniform(torch, (rows, k), f, device, seed, inputs)
    return Operand(data, None, lambda r=None, data=data: (data if r is None else data[:r]).to(torch.float64))


def outer_dim_major(torch, blocks):
    """``blocks`` ([M, K/128] fp32) copied into storage of strides ``(1, M)``: the activation-scale layout torch's
    ``scaled_mm`` checks exactly on sm_90 (``torch/_meta_registrations.py``: ``stride(0) == 1`` and ``stride(1) == M``).

    ``blocks.t().contiguous().t()`` is not enough: at M = 1 the transposed view ``[K/128, 1]`` already counts as
    contiguous (a dimension of size 1 has no stride constraint), so no copy is made and the strides stay
    ``(K/128, 1)``, which ``scaled_mm`` refuses ("scale_a must have strides (1, 1)").
    """
    rows, cols = blocks.shape
    out = torch.empty_strided((rows, cols), (1, rows), device=blocks.device, dtype=blocks.dtype)
    out.copy_(blocks)
    return out


def _block_operand(torch, f: Format, rows: int, k: int, device: str, seed: int, inputs: str) -> Operand:
    """An mxfp8 / nvfp4 / mxfp4 operand from :mod:`truepeak.kernels.quant` (never run on a Blackwell GPU here)."""
    from truepeak.kernels import quant

    x = _uniform(torch, (rows, k), get_format("fp32"), device, seed, inputs)
    if f.name == "mxfp8":
        values, scales = quant.quantize_mxfp8(x)
        deq = quant.dequantize_mxfp8(values, scales)
        return Operand(values, swizzle_block_scales(scales).view(torch.float8_e8m0fnu),
                       lambda r=None, d=deq: (d if r is None else d[:r]).to(torch.float64))
    if f.name == "mxfp4":
        packed, scales = quant.quantize_mxfp4(x)
        deq = quant.dequantize_mxfp4(packed, scales)
        return Operand(packed.view(torch.float4_e2m1fn_x2), swizzle_block_scales(scales).view(torch.float8_e8m0fnu),
                       lambda r=None, d=deq: (d if r is None else d[:r]).to(torch.float64))
    packed, scales, global_scale = quant.quantize_nvfp4(x)
    deq = quant.dequantize_nvfp4(packed, scales, global_scale)
    # the library multiplies e2m1 x e4m3 scales only; the global scale's effect is measured from the dequantiser
    unit = quant.dequantize_nvfp4(packed, scales, torch.ones_like(torch.as_tensor(global_scale, dtype=torch.float32)))
    den = float((unit.double() * unit.double()).sum())
    factor = float((deq.double() * unit.double()).sum()) / den if den else 1.0
    return Operand(packed.view(torch.float4_e2m1fn_x2), swizzle_block_scales(scales),
                   lambda r=None, d=deq: (d if r is None else d[:r]).to(torch.float64), factor)


class WeightCache:
    """Weight sets (B, N x K) shared by the GEMMs of one (format, scaling, inputs, N, K) group, so a decode sweep over
    M draws them once.

    Holds one group at a time: asking for another group frees the previous one. Set ``j`` always has seed
    ``_seed("B", N, K, j)``, so the weights of a case do not depend on the order of the sweep.
    """

    def __init__(self) -> None:
        self._key: tuple | None = None
        self._sets: list[Operand] = []

    def get(self, fmt: Format, n: int, k: int, count: int, device: str, scaling: str | None = None,
            inputs: str = "random") -> list[Operand]:
        f = get_format(fmt)
        key = (f.name, _scaling(f, scaling), inputs, n, k, device)
        if key != self._key:
            self.clear()
            self._key = key
        while len(self._sets) < count:
            j = len(self._sets)
            self._sets.append(make_operand(f, n, k, device, _seed("B", n, k, j), scaling=scaling, weight=True,
                                           inputs=inputs))
        return self._sets[:count]

    def clear(self) -> None:
        self._sets = []
        self._key = None


def _seed(*parts: Any) -> int:
    """A stable 63-bit seed from the parts (Python's ``hash`` of str is salted per process; this is not)."""
    h = 1469598103934665603
    for ch in repr(parts).encode():
        h = ((h ^ ch) * 1099511628211) & 0xFFFFFFFFFFFFFFFF
    return h & 0x7FFFFFFFFFFFFFFF


@contextlib.contextmanager
def tf32_mode(enabled: bool) -> Iterator[None]:
    """Set ``torch.backends.cuda.matmul.allow_tf32`` (and cuDNN's) for the block; restore the old values after."""
    torch = torch_module()
    old = (torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32)
    torch.backends.cuda.matmul.allow_tf32 = enabled
    torch.backends.cudnn.allow_tf32 = enabled
    try:
        yield
    finally:
        torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = old


@dataclass
class TorchGemm:
    """One GEMM case, allocated and ready to launch: ``gemm(i)`` runs the product on input set ``i % n_sets``.

    Args:
        fmt: format name or Format (one of :data:`GPU_FORMATS`, :data:`GPU_SKIP_PROBES` / :data:`CPU_FORMATS`).
        m, n, k: shape; A is M x K, the weight B is N x K, C is M x N.
        device: torch device string (``"cuda:0"``, ``"cpu"``).
        n_sets: rotation sets (>= 1); each has its own A, B and C.
        weights: a :class:`WeightCache` to share B across cases with the same (format, N, K); None draws fresh ones.
        scaling: fp8 scale layout (``"tensor"`` default, ``"row"``, ``"block128"``); None for other formats.
        inputs: ``"random"`` (default) or ``"zeros"`` (docs/method.md, 'Random inputs': only when asked; pass it on to
            the timer as ``input_kind`` so the measurement is labelled).

    Memory: ``n_sets * bytes_per_set(fmt, m, n, k)`` bytes on the device (torch may raise OutOfMemoryError).
    Call :meth:`close` (or let it go out of scope) to free it.
    """

    fmt: Format
    m: int
    n: int
    k: int
    device: str
    n_sets: int
    weights: WeightCache | None = None
    scaling: str | None = None
    inputs: str = "random"

    def __post_init__(self) -> None:
        torch = torch_module()
        self.fmt = get_format(self.fmt)
        self.scaling = _scaling(self.fmt, self.scaling)
        if self.inputs not in INPUT_KINDS:
            raise UnsupportedError(f"unknown inputs {self.inputs!r}; accepted: {', '.join(INPUT_KINDS)}")
        self.n_sets = max(1, int(self.n_sets))
        f, m, n, k = self.fmt, self.m, self.n, self.k
        self._torch = torch
        if self.weights is not None:
            self._b = self.weights.get(f, n, k, self.n_sets, self.device, self.scaling, self.inputs)
        else:
            self._b = [make_operand(f, n, k, self.device, _seed("B", n, k, j), scaling=self.scaling, weight=True,
                                    inputs=self.inputs) for j in range(self.n_sets)]
        rows = run_rows(f, m, self.scaling)
        self._a = [make_operand(f, rows, k, self.device, _seed("A", rows, k, j), scaling=self.scaling,
                                inputs=self.inputs) for j in range(self.n_sets)]
        self.a = [op.data for op in self._a]
        self.b = [op.data for op in self._b]
        self.bt = [b.t() for b in self.b]  # (K, N) column-major views: the TN layout
        self.c: list = []
        self._called = False
        if f.name in ("fp32", "tf32", "bf16", "fp16"):
            out_dtype = getattr(torch, get_format(f.output).torch_dtype)
            self.c = [torch.empty((m, n), device=self.device, dtype=out_dtype) for _ in range(self.n_sets)]
        self._launch = self._make_launch()

    @property
    def note(self) -> str:
        """What the record must say about how this GEMM ran (M padded for 128-block scales, :func:`padding_note`), or
        an empty string."""
        return padding_note(self.fmt, self.m, self.scaling)

    @property
    def input_kind(self) -> str:
        """What the inputs are, for :func:`~truepeak.bench.cuda_timer.time_cuda`'s ``input_kind``."""
        return self.inputs

    @property
    def tolerance(self) -> float:
        return TOLERANCES[self.fmt.name]

    def mode(self):
        """Context manager the launches and the check must run under (TF32 on for tf32, off for everything else)."""
        return tf32_mode(self.fmt.name == "tf32")

    def _make_launch(self) -> Callable[[int], Any]:
        torch, name = self._torch, self.fmt.name
        a, bt, A, B = self.a, self.bt, self._a, self._b
        if name == "int8":
            return lambda j: torch._int_mm(a[j], bt[j])
        if name in ("fp32", "tf32", "bf16", "fp16"):
            c = self.c
            return lambda j: torch.mm(a[j], bt[j], out=c[j])
        bf16 = torch.bfloat16
        if self.scaling == "block128":
            F = torch.nn.functional
            ra, rb = F.ScalingType.BlockWise1x128, F.ScalingType.BlockWise128x128
            return lambda j: F.scaled_mm(a[j], bt[j], A[j].scale, ra, B[j].scale, rb, output_dtype=bf16)
        return lambda j: torch._scaled_mm(a[j], bt[j], A[j].scale, B[j].scale, out_dtype=bf16)

    def __call__(self, i: int = 0):
        """Launch the GEMM on set ``i % n_sets``; returns the output tensor (asynchronous on a GPU)."""
        return self._launch(i % self.n_sets)

    def _first_call(self):
        """The first launch: a library refusal of this combination becomes :class:`BackendUnsupported`."""
        try:
            with self.mode():
                return self(0)
        except (RuntimeError, ValueError, NotImplementedError, TypeError) as exc:
            text = str(exc).strip()
            first = text.splitlines()[0] if text else type(exc).__name__
            if "out of memory" in text.lower() or self.fmt.name in ("fp32", "tf32", "bf16", "fp16", "int8") or (
                    self.fmt.name == "fp8_e4m3" and self.scaling == "tensor"):
                raise
            if not any(w in text.lower() for w in _UNSUPPORTED_WORDS) and "CUBLAS_STATUS" not in text:
                raise
            torch = self._torch
            arch = ""
            with contextlib.suppress(Exception):
                if str(self.device).startswith("cuda"):
                    major, minor = torch.cuda.get_device_capability(self.device)
                    arch = f" on sm_{major}{minor}"
            what = self.fmt.name + (f" ({self.scaling} scales)" if self.scaling else "")
            raise BackendUnsupported(f"{what} GEMM rejected by torch {torch.__version__}{arch}: {first[:240]}") \
                from None

    def check(self, rows: int | None = None) -> float:
        """Relative error ``||out - ref||_F / ||ref||_F`` of set 0 against a float64 reference on the first ``rows`` rows.

        The reference uses the same quantised inputs with their scales applied (upcast to float64), so the error
        measures the kernel's arithmetic and output rounding only. Returns ``nan`` if the output holds a NaN or Inf,
        0.0 for an exact match (int8 must be exact). Poisons the output buffer first, so an unwritten output cannot
        pass.

        Raises:
            BackendUnsupported: the library refused this format / scaling at its first call (a ``skipped`` case).
        """
        torch = self._torch
        r = self.m if rows is None else max(1, min(int(rows), self.m))
        if self.c:
            self.c[0].fill_(float("nan"))
        out = self._first_call() if not self._called else None
        self._called = True
        if out is None:
            with self.mode():
                out = self(0)
        a = self._a[0].dequant(r)
        b = self._b[0].dequant(None)
        ref = a @ b.t()
        got = out[:r].to(torch.float64) * (self._a[0].factor * self._b[0].factor)
        if not bool(torch.isfinite(got).all()):
            return math.nan
        ref_norm = float(torch.linalg.vector_norm(ref))
        diff = float(torch.linalg.vector_norm(got - ref))
        if ref_norm == 0.0:
            return 0.0 if diff == 0.0 else math.inf
        return diff / ref_norm

    def close(self) -> None:
        self.a = self.b = self.bt = self.c = []
        self._a = self._b = []


def check_passes(fmt: str | Format, error: float) -> bool:
    """True if a relative error is within the format's tolerance (NaN never passes; int8 must be exactly 0)."""
    tol = TOLERANCES[get_format(fmt).name]
    return math.isfinite(error) and error <= tol


__all__ = ["TOLERANCES", "GPU_FORMATS", "CPU_FORMATS", "GPU_SKIP_PROBES", "FP8_SCALINGS", "INPUT_KINDS",
           "BackendUnsupported", "supported", "backend_name", "gemm_workload", "bytes_per_set", "default_scaling",
           "swizzle_block_scales", "swizzled_scale_index", "make_operand", "Operand", "TorchGemm", "WeightCache",
           "BLOCK128_ROW_MULTIPLE", "run_rows", "padding_note",
           "tf32_mode", "check_passes"]
