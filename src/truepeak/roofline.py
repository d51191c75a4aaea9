"""Workload FLOP and byte counts, the roofline, and the plausibility check on measured throughput.

Pure Python (no torch). Units are SI throughout: FLOP, bytes, seconds, FLOP/s, B/s. Rendering converts (TFLOPS = 1e12
FLOP/s, GB/s = 1e9 B/s, decimal).

Formulas and sources:
    - GEMM FLOP = 2 * M * N * K: one fused multiply-add is two floating-point operations (the convention of vendor
      peak figures, cuBLAS/CUTLASS profilers; never "/2 for MACs": docs/method.md, 'Counting FLOP and bytes').
    - Minimum bytes of a GEMM C[M, N] = A[M, K] @ B[N, K]^T: every operand read or written once,
      A (M x K) + B (the weight, N x K) + C (M x N), each in its own format including block scales and fp8/int8 scale
      tensors (:meth:`truepeak.formats.Format.matrix_bytes`; docs/method.md, 'Counting FLOP and bytes').
    - Arithmetic intensity = FLOP / minimum bytes (FLOP/B); roofline: attainable = min(peak, bandwidth * intensity),
      ridge = peak / bandwidth. S. Williams, A. Waterman, D. Patterson, "Roofline: an insightful visual performance
      model for multicore architectures", Communications of the ACM 52(4), 2009.
    - A throughput above the dense peak at the highest clock the part can run cannot be measured: it is a timing error
      (docs/method.md, 'Impossible timings'; :func:`plausibility_limit`).
    - The same on the memory side (:func:`check_memory_plausible`): the bytes of a working set that no on-chip cache can
      hold (minimum bytes - L2, minus an AMD Infinity Cache) must cross the memory bus, which cannot beat its spec
      bandwidth; a time shorter than that is a timing error. A working set that fits in cache is possible above the
      memory bandwidth (a cache-resident benchmark, docs/method.md, 'Cache-resident working sets') and gets a note
      instead, up to a loose cache ceiling of :data:`CACHE_BANDWIDTH_FACTOR` (10) x the memory bandwidth, which no
      on-chip cache exceeds.
    - No call completes in under :data:`MIN_TIME_S` (100 ns; :func:`check_time`).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING

from truepeak.errors import MeasurementError, TruepeakError, UnsupportedError
from truepeak.formats import Format, check_positive_int, check_scaling, get_format
from truepeak.units import fmt_bandwidth, fmt_bytes, fmt_pct, fmt_rate, fmt_tera, fmt_time
from truepeak.units import rate_unit as _rate_unit

if TYPE_CHECKING:  # pragma: no cover
    from truepeak.hardware.catalog import Accelerator

TERA = 1e12
GIGA = 1e9

SHAPE_FORM = "MxNxK, e.g. 16x6144x4096 (or M=16,N=6144,K=4096)"


def _finite_positive(name: str, value: object, unit: str = "", error: type[TruepeakError] = MeasurementError) -> float:
    """Return ``float(value)``; raise ``error`` (one line naming ``name``) unless it is a finite number > 0 (a bool is
    no number)."""
    if isinstance(value, bool):
        raise error(f"{name} {value!r} is not a number")
    try:
        v = float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        raise error(f"{name} {value!r} is not a number") from None
    if not math.isfinite(v) or v <= 0:
        what = "a measurement must be > 0" if error is MeasurementError else "it must be > 0"
        raise error(f"{name} {value!r}{unit} is not a positive finite number; {what}")
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
            check_positive_int(name.upper(), getattr(self, name))
        fmt = get_format(self.format)
        object.__setattr__(self, "format", fmt)
        out = self.out_format if self.out_format is not None else fmt.output
        object.__setattr__(self, "out_format", get_format(out))
        check_scaling(fmt, self.scaling)

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
        check_positive_int("nbytes", self.nbytes)

    @property
    def intensity(self) -> float:
        """0 FLOP/B: a copy does no arithmetic."""
        return 0.0

    @property
    def flop(self) -> int:
        """0 FLOP: a copy moves bytes and does no arithmetic (so it has no TFLOPS and no compute efficiency)."""
        return 0

    @property
    def min_bytes(self) -> int:
        """Bytes moved: read + write = ``2 * nbytes``."""
        return 2 * self.nbytes

    @property
    def label(self) -> str:
        """``"copy 1073741824 B"``: the bytes copied (``nbytes``, not the 2x counted as traffic), for tables and
        record keys."""
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
        _finite_positive("roofline peak_flops", self.peak_flops, " FLOP/s", TruepeakError)
        _finite_positive("roofline bandwidth", self.bandwidth, " B/s", TruepeakError)

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
    bandwidth = acc.bandwidth_bytes_per_s
    if bandwidth is None:
        raise UnsupportedError(f"{acc.name} has no memory bandwidth in the catalog, so it has no roofline")
    return Roofline(float(peak), bandwidth)


# ----------------------------------------------------------------------------------------------------------------------
# Plausibility

TIMING_CAUSES = ("a timing error: too few FLOP counted, a cache-resident or eliminated op, "
                 "or a time that excludes the kernel")

#: Headroom above the spec-clock dense peak allowed for a GPU where the catalog has no maximum clock (or no FLOP/clk/SM
#: to apply it). The largest documented gap between spec and running clock without a catalogued maximum: GeForce RTX
#: 5090 cards run at 2.7-2.8 GHz against a 2407 MHz spec boost clock, 2.8 / 2.407 = 1.16x (docs/method.md, 'Peak at the
#: measured clock'; measured 235-241 TFLOPS bf16 against the 209.5 spec, zzc0721/torch-performance-test-data #96,
#: #124), and factory-overclocked cards ship with higher boost clocks still; 1.20 covers them. H100 1980/1830 = 1.08x
#: and B200 1965/1856 = 1.06x are below it.
CLOCK_HEADROOM = 1.20

#: The same headroom for a CPU (vendor ``"cpu"``, :func:`truepeak.hardware.cpu.cpu_accelerator`), whose peak is
#: estimated from a nominal clock (a VM's /proc/cpuinfo "cpu MHz") that turbo boost exceeds: an EPYC with a 2.6 GHz base
#: clock boosts to ~3.7 GHz (1.42x); measured on this project's CI host: 113.8 % of the estimate.
CPU_CLOCK_HEADROOM = 1.5

#: Where the catalog has a maximum SM clock (measured by NVML), a given clock above it by more than this fraction is not
#: a clock the GPU runs (2 % for the granularity of clock readings): rejected.
MAX_CLOCK_TOLERANCE = 0.02

#: Where no maximum clock is known, a given SM clock above this multiple of the spec clock is not one the GPU runs.
CLOCK_SANITY_FACTOR = 1.5

#: No kernel or library call completes in under 100 ns: a GPU kernel launch alone takes microseconds. A shorter time
#: per call is a timing error (or a time in the wrong unit).
MIN_TIME_S = 100e-9

#: Deliberately loose ceiling on what an on-chip cache can serve, as a multiple of the spec DRAM bandwidth: the L2
#: bandwidth of recent GPUs is a few times their DRAM bandwidth, so no cache-resident working set moves at more than
#: 10 x it. Not a spec: it only catches timing errors where the working set may be cache-resident (or the cache size is
#: unknown), which the DRAM floor of :func:`check_memory_plausible` cannot.
CACHE_BANDWIDTH_FACTOR = 10.0


def clock_headroom(acc: Accelerator) -> float:
    """The headroom above the spec-clock dense peak where no maximum clock applies: :data:`CPU_CLOCK_HEADROOM` for a
    CPU (vendor ``"cpu"``), :data:`CLOCK_HEADROOM` otherwise. The one place this choice is made."""
    return CPU_CLOCK_HEADROOM if acc.vendor == "cpu" else CLOCK_HEADROOM

#: No GPU runs a kernel below this SM clock (H200 idles at ~345 MHz); a smaller value is a unit mistake (GHz for MHz).
MIN_CLOCK_HZ = 100e6

CLOCK_HINT = "--clock-mhz compares against the peak at the clock the GPU ran"


def rate_unit(fmt: str | Format) -> str:
    """``"TOPS"`` for int8 (integer operations), ``"TFLOPS"`` otherwise: :func:`truepeak.units.rate_unit` (kept here
    for existing imports)."""
    return _rate_unit(fmt)


#: A throughput in FLOP/s as TFLOPS text: :func:`truepeak.units.fmt_rate` (kept here for existing imports).
rate_text = fmt_rate


@dataclass(frozen=True)
class PlausibilityLimit:
    """The most a real measurement of one format on one accelerator can reach (see :func:`plausibility_limit`).

    Attributes:
        spec_peak: the catalog dense peak at its spec clock, FLOP/s: the efficiency denominator.
        ceiling: the highest throughput accepted, FLOP/s (>= ``spec_peak``).
        what: the spec peak in words, e.g. ``"dense fp32 peak of NVIDIA GeForce RTX 4090"``.
        basis: how ``ceiling`` was obtained, in words (empty when it is the spec peak itself).
        spec_clock_hz: the clock basis of the spec peak, Hz, if known.
        clock_hz: the measured clock that was taken into account, Hz, if any.
        unit: ``"TFLOPS"`` (``"TOPS"`` for int8).
        per_clock_known: whether FLOP/clk/SM and the SM count are known, so a peak at another clock can be computed.
    """

    spec_peak: float
    ceiling: float
    what: str
    basis: str = ""
    spec_clock_hz: float | None = None
    clock_hz: float | None = None
    unit: str = "TFLOPS"
    per_clock_known: bool = True

    def above_spec_note(self, achieved: float) -> str | None:
        """A note for a throughput between the spec-clock dense peak and the ceiling (None at or below the peak)."""
        if achieved <= self.spec_peak * (1 + 1e-9):
            return None
        spec = (f"its {self.spec_clock_hz / 1e6:.0f} MHz spec clock" if self.spec_clock_hz
                else "the clock basis of its spec peak")
        if not self.per_clock_known:
            return (f"above the spec-clock dense peak: the GPU ran above {spec}; the catalog has no FLOP/clk/SM or SM "
                    "count for this peak, so the peak at the clock it ran cannot be computed")
        if self.clock_hz is None:
            return (f"above the spec-clock dense peak: the GPU ran above {spec}; pass --clock-mhz (or use truepeak run, "
                    "which samples it) to compare against the peak at the clock it ran")
        return (f"above the spec-clock dense peak: the GPU ran at {self.clock_hz / 1e6:.0f} MHz, above {spec}; "
                "compare against the peak at that clock")


def check_clock(acc: Accelerator, clock_hz: float, label: str = "SM clock") -> float:
    """Return ``clock_hz`` (Hz) as a float; MeasurementError (one line, naming ``label``) unless it is a positive finite
    clock no higher than the catalog maximum clock + :data:`MAX_CLOCK_TOLERANCE` (2 %), or, where no maximum is known,
    :data:`CLOCK_SANITY_FACTOR` x the spec boost clock."""
    try:
        clk = float(clock_hz)
    except (TypeError, ValueError):
        raise MeasurementError(f"{label} {clock_hz!r} is not a number") from None
    mhz = "" if label.endswith("-mhz") else " MHz"  # a CLI flag already names the unit
    if not math.isfinite(clk) or clk <= 0:
        raise MeasurementError(f"{label} {clk / 1e6:g}{mhz} is not a positive clock")
    if clk < MIN_CLOCK_HZ:
        raise MeasurementError(
            f"{label} {clk / 1e6:g}{mhz} is below {MIN_CLOCK_HZ / 1e6:g} MHz, lower than any SM clock under load "
            f"(was it given in GHz? {clk / 1e6:g} GHz = {clk / 1e3:g} MHz)")
    if acc.max_clock_hz is not None and acc.max_clock_hz.value:
        top = float(acc.max_clock_hz.value)
        if clk > top * (1 + MAX_CLOCK_TOLERANCE):
            raise MeasurementError(
                f"{label} {clk / 1e6:g}{mhz} is above the {top / 1e6:.0f} MHz maximum clock of {acc.name} (source: "
                f"{acc.max_clock_hz.source}; {100 * MAX_CLOCK_TOLERANCE:g} % allowed for reading granularity): not an "
                "SM clock it runs (give the measured SM clock in MHz)")
        return clk
    ref, kind = None, ""
    if acc.boost_clock_hz is not None and acc.boost_clock_hz.value:
        ref, kind = float(acc.boost_clock_hz.value), "spec"
    if ref is not None and clk > CLOCK_SANITY_FACTOR * ref:
        raise MeasurementError(
            f"{label} {clk / 1e6:g}{mhz} is above {CLOCK_SANITY_FACTOR:g} x the {ref / 1e6:.0f} MHz {kind} clock of "
            f"{acc.name}: not an SM clock it can run (give the measured SM clock in MHz)")
    return clk


def plausibility_limit(acc: Accelerator, fmt: str | Format, accumulate: str | None = None,
                       clock_hz: float | None = None, sm_count: int | None = None) -> PlausibilityLimit:
    """The applicable ceiling for a measured throughput: the dense peak at the highest clock the part can run.

    ceiling = max of
        - the catalog dense peak (at its spec clock);
        - FLOP/clk/SM x SMs x the catalog maximum clock, when both are known; when they are not,
          :func:`clock_headroom` x the spec-clock dense peak (1.20 for a GPU, 1.5 for a CPU's estimate): GPUs run above
          their spec boost clock (RTX 5090: 2.7-2.8 GHz against 2407 MHz = 1.16x; docs/method.md, 'Peak at the
          measured clock'), so a measurement up to that is physically possible, while the 605 % of docs/method.md,
          'Impossible timings' stays a timing error;
        - FLOP/clk/SM x SMs x ``clock_hz``, when a measured clock is given (``sm_count``: the device's SM count).

    The one rule :func:`check_plausible`, :func:`truepeak.efficiency.analyze` and
    :func:`truepeak.efficiency.derived_metrics` use.

    Raises:
        UnknownNameError, UnsupportedError: as :meth:`Accelerator.peak`.
    """
    f = get_format(fmt)
    peak = acc.peak(f, accumulate)
    dense = float(peak.dense)
    spec_clock = acc.clock_basis_hz(peak)
    candidates: list[tuple[float, str]] = [(dense, "")]
    max_clock = float(acc.max_clock_hz.value) if acc.max_clock_hz is not None and acc.max_clock_hz.value else None
    at_max = None if max_clock is None else acc.peak_at_clock(f, max_clock, sm_count, accumulate=peak.accumulate)
    if at_max is not None:
        candidates.append((at_max, f"its peak at the {max_clock / 1e6:.0f} MHz maximum clock"))
    else:
        why = "no maximum clock in the catalog" if max_clock is None else "no FLOP/clk/SM to apply the maximum clock to"
        headroom = clock_headroom(acc)
        candidates.append((headroom * dense, f"{100 * (headroom - 1):.0f} % above the spec-clock peak "
                                             f"as there is {why}"))
    measured = None
    if clock_hz is not None and math.isfinite(clock_hz) and clock_hz > 0:
        measured = float(clock_hz)
        at_clock = acc.peak_at_clock(f, measured, sm_count, accumulate=peak.accumulate)
        if at_clock is not None:
            candidates.append((at_clock, f"its peak at the measured {measured / 1e6:.0f} MHz clock"))
    ceiling, basis = candidates[0]
    for value, words in candidates[1:]:
        if value >= ceiling:  # on a tie the later (more specific) basis names the ceiling
            ceiling, basis = value, words
    if ceiling <= dense:
        basis = ""
    what = f"dense {peak.label} peak of {acc.name}"
    known = acc.peak_at_clock(f, 1.0, sm_count, accumulate=peak.accumulate) is not None
    return PlausibilityLimit(dense, ceiling, what, basis, spec_clock, measured, _rate_unit(f), known)


def check_plausible(achieved_flops: float, peak: float | PlausibilityLimit, what: str = "") -> float:
    """Reject a throughput that no real measurement can reach; return ``achieved_flops / spec peak``.

    Args:
        achieved_flops: measured FLOP/s.
        peak: a :class:`PlausibilityLimit` (from :func:`plausibility_limit`), or a bare dense peak in FLOP/s, which is
            then also the ceiling.
        what: with a bare peak, the peak in words, completing "... % of the <peak> TFLOPS <what>", e.g.
            ``"dense fp32 peak of NVIDIA GeForce RTX 4090"``.

    Raises:
        MeasurementError: ``achieved_flops`` is not a positive finite number, or exceeds the ceiling (docs/method.md,
            'Impossible timings':
            "500.0 TFLOPS is 605 % of the 82.6 TFLOPS dense fp32 peak of ...: this cannot be a real measurement (...)").
        TruepeakError: the peak is not a positive finite number.
    """
    achieved = _finite_positive("throughput", achieved_flops, " FLOP/s")
    lim = peak if isinstance(peak, PlausibilityLimit) else PlausibilityLimit(peak, peak, what)
    for value in (lim.spec_peak, lim.ceiling):
        _finite_positive("peak", value, " FLOP/s", TruepeakError)
    fraction = achieved / lim.spec_peak
    if achieved > lim.ceiling * (1 + 1e-12):
        raise implausible(achieved / TERA, lim)
    return fraction


def implausible(achieved_tera: float, lim: PlausibilityLimit) -> MeasurementError:
    """The error for a throughput above ``lim.ceiling`` (docs/method.md, 'Impossible timings': "500.0 TFLOPS is 605 %
    of the 82.6 TFLOPS dense fp32 peak of ...: this cannot be a real measurement (...)"), raised by
    :func:`check_plausible`.

    ``achieved_tera`` is the throughput in units of 1e12 FLOP/s (TFLOPS), so that a value typed in TFLOPS whose FLOP/s
    overflow a float (``--tflops 1e300``: 1e312 FLOP/s is inf) still prints as typed; the percentage of the spec peak
    prints whole below 1e6 %, with three significant digits above (``1.01e+307 %``).
    """
    u = lim.unit
    pct = 100 * (achieved_tera / (lim.spec_peak / TERA))
    pct_text = f"{pct:.0f}" if pct < 1e6 else (f"{pct:.3g}" if math.isfinite(pct) else "over 1e+308")
    above = f"above the {fmt_rate(lim.ceiling)} {u} ceiling, {lim.basis}; " if lim.basis else ""
    hint = "" if lim.clock_hz is not None else f"; {CLOCK_HINT}"
    return MeasurementError(
        f"{fmt_tera(achieved_tera)} {u} is {pct_text} % of the {fmt_rate(lim.spec_peak)} {u} {lim.what}: "
        f"this cannot be a real measurement ({above}{TIMING_CAUSES}){hint}")


MEMORY_TIMING_CAUSES = ("a timing error: an asynchronous launch timed without synchronizing, a time that excludes "
                        "the kernel, an eliminated op, or a time in the wrong unit")


def _work_label(work: Gemm | Copy) -> str:
    """``"1x16384x16384 bf16"`` for a GEMM, ``"copy 1073741824 B"`` for a copy."""
    return f"{work.label} {work.format.name}" if isinstance(work, Gemm) else work.label


def _cache_words(acc: Accelerator) -> str:
    """``"62.91 MB L2"``, or ``"33.55 MB L2 + 268.4 MB Infinity Cache"`` where there is one."""
    words = f"{fmt_bytes(acc.l2_bytes.value)} L2"
    if acc.infinity_cache_bytes is not None and acc.infinity_cache_bytes.value:
        words += f" + {fmt_bytes(acc.infinity_cache_bytes.value)} Infinity Cache"
    return words


def check_memory_plausible(acc: Accelerator, work: Gemm | Copy, time_s: float, *, fmt: str | Format | None = None,
                           accumulate: str | None = None, clock_hz: float | None = None,
                           sm_count: int | None = None) -> str | None:
    """Reject a time in which the work's bytes cannot have moved; return a note where the time needs a warm cache.

    Rules (SI units; ``bytes = work.min_bytes``, ``bandwidth = acc.bandwidth_bytes_per_s``, exact: memory cannot beat
    its spec bandwidth, so no headroom; ``cache = acc.cache_bytes``, the L2 plus an AMD Infinity Cache):

    - a GEMM whose FLOP / time is above the compute ceiling (:func:`plausibility_limit` at ``clock_hz``, the dense peak
      at the highest clock the part runs): MeasurementError from :func:`check_plausible` (the compute floor,
      docs/method.md, 'Impossible timings');
    - bytes / time <= bandwidth: None (nothing to say);
    - bytes / time above :data:`CACHE_BANDWIDTH_FACTOR` (10) x bandwidth: MeasurementError, whatever the cache size
      (known or not): no on-chip cache serves that much (a deliberately loose bound that catches timing errors);
    - no cache size in the catalog: a note; not checked;
    - bytes <= cache: the working set can be cache-resident: the note that the figure is a cache figure
      (docs/method.md, 'Cache-resident working sets');
    - otherwise at least ``bytes - cache`` bytes come from memory, so time >= (bytes - cache) / bandwidth: a shorter
      time raises MeasurementError ("... cannot be a real measurement (a timing error: ...)"); a time between that floor
      and bytes / bandwidth is possible only if the cache held part of the working set: a note.

    Args:
        acc: the accelerator (one without a memory bandwidth, e.g. a CPU before its copy bandwidth is measured: only
            the compute floor is checked).
        work: a :class:`Gemm` or :class:`Copy`.
        time_s: measured seconds per call.
        fmt, accumulate, clock_hz, sm_count: select the compute ceiling as :func:`plausibility_limit` (default the
            GEMM's input format and its default accumulator); a format without a peak on ``acc`` skips the compute floor.

    Returns:
        A note (one line) or None.

    Raises:
        MeasurementError: a time that is not a positive finite number, or below the compute or memory floor.
    """
    t = check_time(time_s)
    if isinstance(work, Gemm) and work.flop:
        f = get_format(fmt if fmt is not None else work.format)
        if acc.has_rate(f, accumulate):
            clk = clock_hz if clock_hz is not None and math.isfinite(clock_hz) and clock_hz > 0 else None
            check_plausible(work.flop / t, plausibility_limit(acc, f, accumulate, clk, sm_count))
    bw = acc.bandwidth_bytes_per_s
    nbytes = work.min_bytes
    achieved = nbytes / t
    if bw is None or achieved <= bw * (1 + 1e-12):
        return None
    above = (f"{fmt_bandwidth(achieved)} GB/s of minimum traffic is above the {fmt_bandwidth(bw)} GB/s memory "
             "bandwidth")
    cache = acc.cache_bytes
    if cache is None:
        _check_cache_ceiling(acc, work, t, achieved, bw, "its cache size is not in the catalog")
        return (f"{above}; {acc.name} has no L2 size in the catalog, so whether the {fmt_bytes(nbytes)} working set "
                f"could come from cache is not checked beyond {CACHE_BANDWIDTH_FACTOR:g} x the memory bandwidth")
    rotate = "a serving workload streams these bytes from DRAM (rotate buffers over >= 2x L2 when measuring)"
    if nbytes <= cache:
        _check_cache_ceiling(acc, work, t, achieved, bw, f"the working set fits in its {_cache_words(acc)}")
        return f"{above}: the {fmt_bytes(nbytes)} working set fits in the {_cache_words(acc)}; {rotate}"
    from_memory = nbytes - cache
    floor = from_memory / bw
    if t < floor * (1 - 1e-12):
        raise MeasurementError(
            f"{fmt_time(t)} for {_work_label(work)} moves {fmt_bytes(nbytes)} at {fmt_bandwidth(achieved)} GB/s = "
            f"{fmt_pct(achieved / bw)} of the {fmt_bandwidth(bw)} GB/s memory bandwidth of {acc.name}; the working set "
            f"({fmt_bytes(nbytes)}) is larger than its {_cache_words(acc)}, so at least {fmt_bytes(from_memory)} come "
            f"from memory, which takes at least {fmt_time(floor)}: this cannot be a real measurement "
            f"({MEMORY_TIMING_CAUSES})")
    _check_cache_ceiling(acc, work, t, achieved, bw, f"part of the working set may be held in its {_cache_words(acc)}")
    return (f"{above}: possible only with part of the {fmt_bytes(nbytes)} working set held in the {_cache_words(acc)} "
            f"between calls (at least {fmt_bytes(from_memory)} must come from memory: >= {fmt_time(floor)}); {rotate}")


def _check_cache_ceiling(acc: Accelerator, work: Gemm | Copy, t: float, achieved: float, bw: float,
                         where: str) -> None:
    """MeasurementError when ``achieved`` B/s is above :data:`CACHE_BANDWIDTH_FACTOR` x the memory bandwidth ``bw``:
    more than any on-chip cache serves, however much of the working set it holds (``where`` says what is known)."""
    ceiling = CACHE_BANDWIDTH_FACTOR * bw
    if achieved > ceiling * (1 + 1e-12):
        raise MeasurementError(
            f"{fmt_time(t)} for {_work_label(work)} moves {fmt_bytes(work.min_bytes)} at {fmt_bandwidth(achieved)} "
            f"GB/s = {fmt_pct(achieved / bw)} of the {fmt_bandwidth(bw)} GB/s memory bandwidth of {acc.name}; "
            f"{where}, but no on-chip cache serves more than {CACHE_BANDWIDTH_FACTOR:g} x the memory bandwidth "
            f"({fmt_bandwidth(ceiling)} GB/s): this cannot be a real measurement ({MEMORY_TIMING_CAUSES})")


def check_time(time_s: float) -> float:
    """Return ``time_s`` as a float; raise MeasurementError unless it is a positive finite number of seconds and at
    least :data:`MIN_TIME_S` (100 ns: no kernel or library call completes faster)."""
    t = _finite_positive("time", time_s, " s")
    if t < MIN_TIME_S:
        raise MeasurementError(
            f"time {t:g} s ({fmt_time(t)}) per call is below {fmt_time(MIN_TIME_S)}: no kernel or library call "
            "completes that fast (a GPU launch alone takes microseconds); a timing error or a time in the wrong unit")
    return t
