"""Workload FLOP and byte counts, the roofline, and the plausibility check on measured throughput.

Pure Python (no torch). Units are SI throughout: FLOP, bytes, seconds, FLOP/s, B/s. Rendering converts (TFLOPS = 1e12
FLOP/s, GB/s = 1e9 B/s, decimal).

Formulas and sources:
    - GEMM FLOP = 2 * M * N * K: one fused multiply-add is two floating-point operations (the convention of vendor
      peak figures, cuBLAS/CUTLASS profilers and ../shared/cases.md C07; never "/2 for MACs").
    - Minimum bytes of a GEMM C[M, N] = A[M, K] @ B[N, K]^T: every operand read or written once,
      A (M x K) + B (the weight, N x K) + C (M x N), each in its own format including block scales and fp8/int8 scale
      tensors (:meth:`truepeak.formats.Format.matrix_bytes`; ../shared/cases.md C13).
    - Arithmetic intensity = FLOP / minimum bytes (FLOP/B); roofline: attainable = min(peak, bandwidth * intensity),
      ridge = peak / bandwidth. S. Williams, A. Waterman, D. Patterson, "Roofline: an insightful visual performance
      model for multicore architectures", Communications of the ACM 52(4), 2009.
    - A throughput above the applicable dense peak cannot be measured: it is a timing error (../shared/cases.md C08).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING

from truepeak.errors import MeasurementError, TruepeakError, UnsupportedError
from truepeak.formats import SCALINGS, Format, get_format

if TYPE_CHECKING:  # pragma: no cover
    from truepeak.hardware.catalog import Accelerator

TERA = 1e12
GIGA = 1e9

SHAPE_FORM = "MxNxK, e.g. 16x6144x4096 (or M=16,N=6144,K=4096)"


def _positive_int(name: str, value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise TruepeakError(f"{name}={value!r} is not a positive whole number")
    return value


def _finite_positive(name: str, value: float, unit: str = "") -> float:
    """Return ``float(value)``; raise MeasurementError if it is not finite and > 0."""
    try:
        v = float(value)
    except (TypeError, ValueError):
        raise MeasurementError(f"{name} {value!r} is not a number") from None
    if not math.isfinite(v) or v <= 0:
        raise MeasurementError(f"{name} {value!r}{unit} is not a positive finite number; a measurement must be > 0")
    return v


# ----------------------------------------------------------------------------------------------------------------------
# Workloads


@dataclass(frozen=True)
class Gemm:
    """One GEMM ``C[M, N] = A[M, K] @ B[N, K]^T``; B is the weight (stored N x K, as ``nn.Linear`` stores it).

    Args:
        m: rows of A and C (tokens at decode).
        n: rows of the weight B, columns of C (output features).
        k: the reduction dimension (input features); block scales group values along K.
        format: input format of A and B (name or :class:`~truepeak.formats.Format`).
        out_format: format of C; default ``format.output`` (bf16 for fp8/fp4 inputs, int32 for int8).
        scaling: fp8/int8 scale layout, ``"tensor"``, ``"row"`` or ``"block128"`` (fp32 scales, 4 B each); the
            scale bytes are added to A and B (B with 128 x 128 weight blocks under ``"block128"``). ``None``: no scales
            counted. Block-scaled formats (mxfp*, nvfp4) carry their own scales and take no ``scaling``.

    Raises:
        TruepeakError: a dimension that is not a positive whole number, or a scaling the format does not take.
        UnknownNameError: an unknown format or scaling name.
    """

    m: int
    n: int
    k: int
    format: Format
    out_format: Format | None = None
    scaling: str | None = None

    def __post_init__(self) -> None:
        for name in ("m", "n", "k"):
            _positive_int(name.upper(), getattr(self, name))
        fmt = get_format(self.format)
        object.__setattr__(self, "format", fmt)
        out = self.out_format if self.out_format is not None else fmt.output
        object.__setattr__(self, "out_format", get_format(out))
        if self.scaling is not None:
            if fmt.is_block_scaled:
                raise TruepeakError(f"{fmt.name} carries its own block scales; scaling={self.scaling!r} does not apply")
            if self.scaling not in SCALINGS:
                raise TruepeakError(f"unknown scaling {self.scaling!r}; accepted: {', '.join(SCALINGS)} (fp8 and int8)")
            if fmt.element_bits != 8:
                raise TruepeakError(f"scaling={self.scaling!r} applies to fp8 and int8 inputs, not {fmt.name}")

    @property
    def flop(self) -> int:
        """FLOP = 2 * M * N * K (one multiply-add = 2 FLOP)."""
        return 2 * self.m * self.n * self.k

    @property
    def a_bytes(self) -> int:
        """Bytes of A (M x K, activations) in ``format``, block scales / fp8 scales included."""
        return self.format.matrix_bytes(self.m, self.k, self.scaling)

    @property
    def b_bytes(self) -> int:
        """Bytes of B (the N x K weight) in ``format`` with its scales (128 x 128 blocks under ``"block128"``)."""
        return self.format.matrix_bytes(self.n, self.k, self.scaling, weight=True)

    @property
    def c_bytes(self) -> int:
        """Bytes of C (M x N) in ``out_format`` (written once; no scales)."""
        return self.out_format.matrix_bytes(self.m, self.n)

    @property
    def min_bytes(self) -> int:
        """Minimum DRAM traffic in bytes: A + B + C, each touched exactly once."""
        return self.a_bytes + self.b_bytes + self.c_bytes

    @property
    def intensity(self) -> float:
        """Arithmetic intensity in FLOP/B: ``flop / min_bytes``."""
        return self.flop / self.min_bytes

    @property
    def label(self) -> str:
        """``"MxNxK"``, the form :func:`parse_shape` reads."""
        return f"{self.m}x{self.n}x{self.k}"


@dataclass(frozen=True)
class Copy:
    """A device-to-device copy of ``nbytes`` bytes: reads and writes each byte once.

    ``min_bytes = 2 * nbytes`` (read + write counted, as the memory-bandwidth convention of STREAM copy and of
    ``truepeak``'s H200 reference measurement); ``flop = 0``.

    Raises:
        TruepeakError: ``nbytes`` is not a positive whole number.
    """

    nbytes: int

    def __post_init__(self) -> None:
        _positive_int("nbytes", self.nbytes)

    @property
    def intensity(self) -> float:
        """0 FLOP/B: a copy does no arithmetic."""
        return 0.0

    @property
    def flop(self) -> int:
        return 0

    @property
    def min_bytes(self) -> int:
        """Bytes moved: read + write = ``2 * nbytes``."""
        return 2 * self.nbytes

    @property
    def label(self) -> str:
        return f"copy {self.nbytes} B"


_X_SPLIT = re.compile(r"[x×*]", re.IGNORECASE)
_KEY_FORM = re.compile(r"^\s*([mnk])\s*=\s*(.*?)\s*$", re.IGNORECASE)


def _dim(name: str, raw: str, text: str) -> int:
    raw = raw.strip()
    if not re.fullmatch(r"[+-]?[0-9]+", raw):
        what = "missing" if raw == "" else f"{raw!r} is not a whole number"
        raise TruepeakError(f"bad GEMM shape {text!r}: {name} {what}; expected {SHAPE_FORM}")
    value = int(raw)
    if value <= 0:
        raise TruepeakError(f"bad GEMM shape {text!r}: {name}={value} must be at least 1; expected {SHAPE_FORM}")
    return value


def parse_shape(text: str) -> tuple[int, int, int]:
    """Parse a GEMM shape into ``(m, n, k)``.

    Accepted: ``"8192x8192x8192"`` (``x``, ``X``, ``×`` or ``*`` between the numbers) and ``"M=16,N=6144,K=4096"``
    (keys in any order and case, separated by commas or spaces). Each dimension is a positive whole number.

    Raises:
        TruepeakError: one line naming the bad value and the accepted form, e.g. for ``"8192x"``, ``"0x4x4"``,
            ``"-1x2x3"`` or ``"16x6144x4096.5"``.
    """
    if not isinstance(text, str):
        raise TruepeakError(f"bad GEMM shape {text!r}: expected a string of the form {SHAPE_FORM}")
    if "=" in text:
        parts = [p for p in re.split(r"[,\s;]+", text.strip()) if p]
        found: dict[str, str] = {}
        for part in parts:
            hit = _KEY_FORM.match(part)
            if not hit:
                raise TruepeakError(f"bad GEMM shape {text!r}: cannot read {part!r}; expected {SHAPE_FORM}")
            key = hit.group(1).upper()
            if key in found:
                raise TruepeakError(f"bad GEMM shape {text!r}: {key} given twice; expected {SHAPE_FORM}")
            found[key] = hit.group(2)
        missing = [k for k in "MNK" if k not in found]
        if missing:
            raise TruepeakError(f"bad GEMM shape {text!r}: {', '.join(missing)} missing; expected {SHAPE_FORM}")
        return tuple(_dim(k, found[k], text) for k in "MNK")  # type: ignore[return-value]
    parts = _X_SPLIT.split(text.strip())
    if len(parts) != 3:
        given = sum(1 for p in parts if p.strip())
        detail = (f"it has {len(parts)} dimensions, not 3" if len(parts) > 3
                  else f"it gives {given} of the 3 dimensions M, N, K")
        raise TruepeakError(f"bad GEMM shape {text!r}: {detail}; expected {SHAPE_FORM}")
    return tuple(_dim(k, v, text) for k, v in zip("MNK", parts))  # type: ignore[return-value]


# ----------------------------------------------------------------------------------------------------------------------
# The roofline


@dataclass(frozen=True)
class Roofline:
    """A two-ceiling roofline (Williams, Waterman, Patterson 2009).

    Args:
        peak_flops: compute ceiling in FLOP/s (a *dense* peak).
        bandwidth: memory ceiling in B/s.

    Raises:
        TruepeakError: either value is not a positive finite number.
    """

    peak_flops: float
    bandwidth: float

    def __post_init__(self) -> None:
        for name in ("peak_flops", "bandwidth"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or v <= 0:
                raise TruepeakError(f"roofline {name}={v!r} must be a positive finite number")

    @property
    def ridge(self) -> float:
        """Ridge point in FLOP/B: ``peak_flops / bandwidth``; below it a workload is memory-bound."""
        return self.peak_flops / self.bandwidth

    def attainable(self, intensity: float) -> float:
        """Attainable FLOP/s at ``intensity`` (FLOP/B): ``min(peak_flops, bandwidth * intensity)``."""
        if not math.isfinite(intensity) or intensity < 0:
            raise TruepeakError(f"arithmetic intensity {intensity!r} must be a finite number >= 0")
        return min(self.peak_flops, self.bandwidth * intensity)

    def bound(self, intensity: float) -> str:
        """``"memory"`` below the ridge, ``"compute"`` at or above it."""
        return "memory" if intensity < self.ridge else "compute"

    def time_floor(self, flop: float, nbytes: float) -> float:
        """Shortest possible time in seconds: ``max(flop / peak_flops, nbytes / bandwidth)``."""
        if flop < 0 or nbytes < 0:
            raise TruepeakError(f"flop={flop!r} and nbytes={nbytes!r} must be >= 0")
        return max(flop / self.peak_flops, nbytes / self.bandwidth)


def roofline_for(acc: Accelerator, fmt: str | Format, accumulate: str | None = None) -> Roofline:
    """The roofline of ``acc`` for ``fmt``: its dense catalog peak and its spec memory bandwidth.

    Raises:
        UnknownNameError: unknown format.
        UnsupportedError: the accelerator has no peak for that format/accumulator, or no memory bandwidth.
    """
    peak = acc.dense_flops(fmt, accumulate)
    if acc.memory_bandwidth is None or not acc.memory_bandwidth.value:
        raise UnsupportedError(f"{acc.name} has no memory bandwidth in the catalog, so it has no roofline")
    return Roofline(float(peak), float(acc.memory_bandwidth.value))


# ----------------------------------------------------------------------------------------------------------------------
# Plausibility

TIMING_CAUSES = ("a timing error: too few FLOP counted, a cache-resident or eliminated op, "
                 "or a time that excludes the kernel")


def check_plausible(achieved_flops: float, peak_flops: float, what: str) -> float:
    """Reject a throughput that no real measurement can reach; return ``achieved_flops / peak_flops``.

    Args:
        achieved_flops: measured FLOP/s.
        peak_flops: the applicable dense peak in FLOP/s.
        what: the peak in words, completing "... % of the <peak> TFLOPS <what>", e.g.
            ``"dense fp32 peak of NVIDIA GeForce RTX 4090"``.

    Raises:
        MeasurementError: ``achieved_flops`` is not a positive finite number, or exceeds ``peak_flops`` (case C08:
            "500.0 TFLOPS is 605 % of the 82.6 TFLOPS dense fp32 peak of ...: this cannot be a real measurement (...)").
        TruepeakError: ``peak_flops`` is not a positive finite number.
    """
    achieved = _finite_positive("throughput", achieved_flops, " FLOP/s")
    if isinstance(peak_flops, bool) or not math.isfinite(peak_flops) or peak_flops <= 0:
        raise TruepeakError(f"peak {peak_flops!r} FLOP/s must be a positive finite number")
    fraction = achieved / peak_flops
    if achieved > peak_flops:
        raise MeasurementError(
            f"{achieved / TERA:.1f} TFLOPS is {100 * fraction:.0f} % of the {peak_flops / TERA:.1f} TFLOPS {what}: "
            f"this cannot be a real measurement ({TIMING_CAUSES})"
        )
    return fraction


def check_time(time_s: float) -> float:
    """Return ``time_s`` as a float; raise MeasurementError unless it is a positive finite number of seconds."""
    return _finite_positive("time", time_s, " s")
