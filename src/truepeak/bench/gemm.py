"""GEMM backends on torch, one per number format: build inputs, check the result, hand a launch function to the timer.

Every GEMM here is ``C[M, N] = A[M, K] @ B[N, K]^T`` with B the weight stored N x K (as ``nn.Linear`` stores it), so
the library sees A row-major and B column-major ("TN", as mamf-finder and cuBLAS benchmarks use):

===========  ==========================================================================================  ===========
format       call                                                                                        output
===========  ==========================================================================================  ===========
fp32         ``torch.mm(A, B.t(), out=C)`` with ``torch.backends.cuda.matmul.allow_tf32 = False``       fp32
tf32         the same with ``allow_tf32 = True`` (fp32 storage, 10-bit-mantissa tensor-core math)        fp32
bf16, fp16   ``torch.mm(A, B.t(), out=C)``                                                              bf16, fp16
fp8_e4m3     ``torch._scaled_mm(A, B.t(), scale_a, scale_b, out_dtype=bfloat16)``, fp32 per-tensor       bf16
             scales (1.0), default (non-fast) accumulation
int8         ``torch._int_mm(A, B.t())`` (cuBLASLt; needs M > 16 and K, N multiples of 8)                int32
===========  ==========================================================================================  ===========

Inputs are uniform in [-1, 1] (int8: uniform integers in [-128, 127]) from a seeded ``torch.Generator``, never zeros:
zero or low-entropy data runs 7-20 % faster at lower power (cases.md C09; measurement_methodology.md sections 1.2, 2).
Enough input sets are allocated that their total is >= 2x the device-reported L2 (``rotation_sets``), and the timer
launches set ``i % n_sets`` on call ``i`` (measurement_methodology.md section 1.1).

Before timing, the output of set 0 is checked against a float64 reference computed from the same (quantised) inputs,
on the first ``check_rows`` rows (rows of C are independent, so a slice checks the kernel at a fraction of the cost):
relative error ``||out - ref||_F / ||ref||_F`` with per-format tolerances (:data:`TOLERANCES`; section 1.7). A NaN or an
error above the tolerance makes the case ``failed``. Using float64 on the GPU too (rather than a float32 reference)
keeps the fp32 check meaningful: an fp32 reference would repeat the kernel's own arithmetic.

Torch is imported lazily; a missing torch raises :class:`~truepeak.errors.MissingDependencyError` with the install
command.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from truepeak.errors import require
from truepeak.formats import Format, get_format
from truepeak.roofline import Gemm

if TYPE_CHECKING:  # pragma: no cover
    from truepeak.hardware.detect import DeviceInfo

#: Largest relative Frobenius error ||out - ref|| / ||ref|| accepted per format (int8 must be exact).
TOLERANCES: dict[str, float] = {"fp32": 1e-5, "tf32": 5e-3, "bf16": 2e-2, "fp16": 2e-2, "fp8_e4m3": 0.1, "int8": 0.0}

#: Formats these backends can run, in sweep order.
GPU_FORMATS: tuple[str, ...] = ("fp32", "tf32", "bf16", "fp16", "fp8_e4m3", "int8")
CPU_FORMATS: tuple[str, ...] = ("fp32", "bf16")
#: Formats a default GPU run reports as skipped when the device cannot run them (one record each).
GPU_SKIP_PROBES: tuple[str, ...] = ("mxfp8", "nvfp4", "mxfp4")

_BLOCK_SCALED_ARCHS = "sm_100 or sm_120"


def torch_module():
    """Import torch or raise MissingDependencyError with the install command."""
    return require("torch", "measuring GEMMs")


def supported(fmt: str | Format, device: DeviceInfo, shape: tuple[int, int, int] | None = None) -> tuple[bool, str]:
    """Can this backend run ``fmt`` (at ``shape``) on ``device``? Returns ``(ok, reason)``; reason is "" when ok.

    A False is written as a ``skipped`` record with the reason, never raised (DESIGN.md "Measuring on a GPU").
    Examples: nvfp4 on an H200 -> ``(False, "nvfp4 GEMM needs sm_100 or sm_120; this device is sm_90")``;
    int8 at M=16 -> ``(False, "torch._int_mm needs M > 16 ...")``.
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
        if cc < 100:
            return False, f"{f.name} GEMM needs {_BLOCK_SCALED_ARCHS}; this device is {arch}"
        return False, f"{f.name} GEMM is not implemented in truepeak's torch backend yet (block-scaled _scaled_mm)"
    if f.name == "fp8_e5m2":
        return False, "fp8_e5m2 x fp8_e5m2 GEMMs are not supported by cuBLASLt (torch._scaled_mm); measure fp8_e4m3"
    if f.name not in GPU_FORMATS:
        return False, f"{f.name} GEMM is not implemented in truepeak's torch backend"
    if f.name in ("tf32", "bf16") and cc < 80:
        return False, f"{f.name} tensor-core GEMM needs sm_80 or newer; this device is {arch}"
    if f.name == "int8" and cc < 75:
        return False, f"int8 tensor-core GEMM needs sm_75 or newer; this device is {arch}"
    torch = torch_module()
    if f.name == "fp8_e4m3":
        if cc < 89:
            return False, f"fp8 GEMM needs sm_89 or newer; this device is {arch}"
        if not hasattr(torch, "float8_e4m3fn") or not hasattr(torch, "_scaled_mm"):
            return False, f"torch {torch.__version__} has no float8_e4m3fn / _scaled_mm; fp8 needs torch >= 2.1"
        if shape is not None and (shape[1] % 16 or shape[2] % 16):
            return False, f"torch._scaled_mm needs N and K to be multiples of 16; got N={shape[1]}, K={shape[2]}"
    if f.name == "int8":
        if not hasattr(torch, "_int_mm"):
            return False, f"torch {torch.__version__} has no _int_mm; int8 GEMM needs torch >= 2.1"
        if shape is not None:
            m, n, k = shape
            if m <= 16 or k % 8 or n % 8:
                return False, f"torch._int_mm needs M > 16 and K, N multiples of 8; got M={m}, N={n}, K={k}"
    return True, ""


def backend_name(fmt: str | Format, device_kind: str) -> str:
    """One line naming the code path measured (library call, layout, scales, accumulate): methodology section 1.10."""
    f = get_format(fmt)
    lib = "cuBLAS" if device_kind == "cuda" else "CPU BLAS (oneDNN/MKL/OpenBLAS)"
    if f.name == "fp32":
        return f"torch.mm TN ({lib}), allow_tf32=False, fp32 out"
    if f.name == "tf32":
        return f"torch.mm TN ({lib}), allow_tf32=True, fp32 out"
    if f.name in ("bf16", "fp16"):
        return f"torch.mm TN ({lib}), {f.name} out, fp32 accumulate"
    if f.name == "fp8_e4m3":
        return "torch._scaled_mm TN (cuBLASLt), e4m3 x e4m3, per-tensor fp32 scales, bf16 out, use_fast_accum=False"
    if f.name == "int8":
        return "torch._int_mm TN (cuBLASLt), int32 out"
    return f"torch ({f.name})"


def gemm_workload(fmt: str | Format, m: int, n: int, k: int) -> Gemm:
    """The :class:`~truepeak.roofline.Gemm` these backends run: fp8_e4m3 goes through ``torch._scaled_mm`` with
    per-tensor fp32 scales (``scaling="tensor"``, the scales counted in the bytes); every other format has none."""
    f = get_format(fmt)
    return Gemm(m, n, k, f, scaling="tensor" if f.name == "fp8_e4m3" else None)


def bytes_per_set(fmt: str | Format, m: int, n: int, k: int) -> int:
    """Bytes of one input/output set (A + B + C in their formats, fp8 scales counted), for rotation sizing."""
    return gemm_workload(fmt, m, n, k).min_bytes


# ----------------------------------------------------------------------------------------------------------------------
# Inputs


def _uniform(torch, shape: tuple[int, ...], fmt: Format, device: str, seed: int):
    """Uniform [-1, 1] values in ``fmt``'s torch dtype (int8: integers in [-128, 127]); deterministic for ``seed``."""
    gen = torch.Generator(device=device)
    gen.manual_seed(seed)
    if fmt.name == "int8":
        return torch.randint(-128, 128, shape, generator=gen, device=device, dtype=torch.int8)
    x = torch.rand(shape, generator=gen, device=device, dtype=torch.float32)
    x.mul_(2).sub_(1)
    return x.to(getattr(torch, fmt.torch_dtype))


class WeightCache:
    """Weight sets (B, N x K) shared by the GEMMs of one (format, N, K) group, so a decode sweep over M draws them once.

    Holds one group at a time: asking for another (format, N, K, device) frees the previous one. Set ``j`` always has
    seed ``hash((N, K, j))``, so the weights of a case do not depend on the order of the sweep.
    """

    def __init__(self) -> None:
        self._key: tuple | None = None
        self._sets: list = []

    def get(self, fmt: Format, n: int, k: int, count: int, device: str) -> list:
        key = (fmt.name, n, k, device)
        if key != self._key:
            self.clear()
            self._key = key
        torch = torch_module()
        while len(self._sets) < count:
            j = len(self._sets)
            self._sets.append(_uniform(torch, (n, k), fmt, device, seed=_seed("B", n, k, j)))
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
        fmt: format name or Format (one of :data:`GPU_FORMATS` / :data:`CPU_FORMATS`).
        m, n, k: shape; A is M x K, the weight B is N x K, C is M x N.
        device: torch device string (``"cuda:0"``, ``"cpu"``).
        n_sets: rotation sets (>= 1); each has its own A, B and C.
        weights: a :class:`WeightCache` to share B across cases with the same (format, N, K); None draws fresh ones.

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

    def __post_init__(self) -> None:
        torch = torch_module()
        self.fmt = get_format(self.fmt)
        self.n_sets = max(1, int(self.n_sets))
        f, m, n, k = self.fmt, self.m, self.n, self.k
        self._torch = torch
        if self.weights is not None:
            self.b = self.weights.get(f, n, k, self.n_sets, self.device)
        else:
            self.b = [_uniform(torch, (n, k), f, self.device, seed=_seed("B", n, k, j)) for j in range(self.n_sets)]
        self.a = [_uniform(torch, (m, k), f, self.device, seed=_seed("A", m, k, j)) for j in range(self.n_sets)]
        self.bt = [b.t() for b in self.b]  # (K, N) column-major views: the TN layout
        self.c: list = []
        self.scale_a = self.scale_b = None
        if f.name == "fp8_e4m3":
            self.scale_a = torch.ones((), device=self.device, dtype=torch.float32)
            self.scale_b = torch.ones((), device=self.device, dtype=torch.float32)
        elif f.name != "int8":
            out_dtype = getattr(torch, get_format(f.output).torch_dtype)
            self.c = [torch.empty((m, n), device=self.device, dtype=out_dtype) for _ in range(self.n_sets)]

    @property
    def tolerance(self) -> float:
        return TOLERANCES[self.fmt.name]

    def mode(self):
        """Context manager the launches and the check must run under (TF32 on for tf32, off for everything else)."""
        return tf32_mode(self.fmt.name == "tf32")

    def __call__(self, i: int = 0):
        """Launch the GEMM on set ``i % n_sets``; returns the output tensor (asynchronous on a GPU)."""
        torch = self._torch
        j = i % self.n_sets
        name = self.fmt.name
        if name == "fp8_e4m3":
            return torch._scaled_mm(self.a[j], self.bt[j], self.scale_a, self.scale_b, out_dtype=torch.bfloat16)
        if name == "int8":
            return torch._int_mm(self.a[j], self.bt[j])
        return torch.mm(self.a[j], self.bt[j], out=self.c[j])

    def check(self, rows: int | None = None) -> float:
        """Relative error ``||out - ref||_F / ||ref||_F`` of set 0 against a float64 reference on the first ``rows`` rows.

        The reference uses the same quantised inputs (upcast to float64) and the fp8 scales, so the error measures the
        kernel's arithmetic and output rounding only. Returns ``nan`` if the output holds a NaN or Inf, 0.0 for an
        exact match (int8 must be exact). Poisons the output buffer first, so an unwritten output cannot pass.
        """
        torch = self._torch
        r = self.m if rows is None else max(1, min(int(rows), self.m))
        if self.c:
            self.c[0].fill_(float("nan"))
        with self.mode():
            out = self(0)
        a = self.a[0][:r].to(torch.float64)
        b = self.b[0].to(torch.float64)
        if self.scale_a is not None:
            a = a * self.scale_a.to(torch.float64)
            b = b * self.scale_b.to(torch.float64)
        ref = a @ b.t()
        got = out[:r].to(torch.float64)
        if not bool(torch.isfinite(got).all()):
            return math.nan
        ref_norm = float(torch.linalg.vector_norm(ref))
        diff = float(torch.linalg.vector_norm(got - ref))
        if ref_norm == 0.0:
            return 0.0 if diff == 0.0 else math.inf
        return diff / ref_norm

    def close(self) -> None:
        self.a = self.b = self.bt = self.c = []
        self.scale_a = self.scale_b = None


def check_passes(fmt: str | Format, error: float) -> bool:
    """True if a relative error is within the format's tolerance (NaN never passes; int8 must be exactly 0)."""
    tol = TOLERANCES[get_format(fmt).name]
    return math.isfinite(error) and error <= tol


__all__ = ["TOLERANCES", "GPU_FORMATS", "CPU_FORMATS", "GPU_SKIP_PROBES", "supported", "backend_name", "gemm_workload",
           "bytes_per_set", "TorchGemm", "WeightCache", "tf32_mode", "check_passes"]
