"""Efficiency of a measured GEMM against the DENSE peak and the roofline (the workflow of docs/method.md, 'Worked
example: GLM-5 on RTX PRO 6000').

Pure Python (no torch). Units inside are SI (FLOP, bytes, seconds, FLOP/s, B/s, Hz); fractions are fractions
(0.645, rendered "64.5 %" by :mod:`truepeak.units` only when shown). :func:`derived_metrics` returns the typed metrics a
record stores (:class:`truepeak.records.GemmMetrics`), in SI too; the report converts them.

Formulas (sources in :mod:`truepeak.roofline`): FLOP = 2 M N K; minimum bytes = A + B + C in their formats; intensity =
FLOP / bytes; attainable = min(dense peak, bandwidth x intensity) (Williams et al. 2009); efficiency = achieved / dense
peak (never the 2:4-sparse datasheet figure: pytorch/pytorch#182023; docs/method.md, 'Dense and sparse peaks'); peak
at a clock = FLOP/clk/SM x SMs x clock (docs/method.md, 'Peak at the measured clock').
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from truepeak.errors import MeasurementError, TruepeakError, UnsupportedError
from truepeak.formats import Format, check_scaling, get_format
from truepeak.records import CopyMetrics, GemmMetrics
from truepeak.roofline import (
    MIN_TIME_S,
    TERA,
    Copy,
    Gemm,
    Roofline,
    check_clock,
    check_memory_plausible,
    check_plausible,
    check_time,
    implausible,
    parse_shape,
    plausibility_limit,
)
from truepeak.units import fmt_bandwidth, fmt_bytes, fmt_pct, fmt_rate, fmt_time, rate_unit

if TYPE_CHECKING:  # pragma: no cover
    from truepeak.hardware.catalog import Accelerator, Peak
    from truepeak.roofline import PlausibilityLimit

#: Relative disagreement allowed between a given throughput and shape / time (rounding of typed numbers).
CONSISTENCY_TOLERANCE = 0.01

SPARSE_WHY = "2:4 sparsity doubles the datasheet rate; dense GEMMs never reach it"
SPARSE_WHY_NOT_2X = "it is the 2:4-sparse rate (not 2 x dense on this part); dense GEMMs never reach it"

@dataclass(frozen=True)
class Efficiency:
    """Where one measured GEMM throughput stands. SI units; fractions as fractions; None where undefined.

    Attributes:
        accelerator: the accelerator's marketing name; ``accelerator_key`` its catalog key.
        format: the input format name; ``rate`` the catalog peak governing it; ``accumulate`` the accumulator.
        dense_flops: dense peak, FLOP/s (the denominator). ``peak_source``/``peak_derived``: its provenance.
        sparse_flops: the 2:4-sparse peak, FLOP/s, if the vendor lists one (display only).
        achieved_flops: measured FLOP/s (given, or FLOP / time); None when only a shape was given (bounds only).
        pct_dense: achieved / dense peak (None without a measurement); above 1 when the GPU ran above its spec clock
            (a note says so).
        ceiling_flops, ceiling_basis: the plausibility ceiling (:func:`truepeak.roofline.plausibility_limit`) and how
            it was obtained.
        peak_note: the catalog's caveat on the governing peak (e.g. "unverified: ...", "e4m3fnuz"); ``unit``:
            "TFLOPS", or "TOPS" for int8.
        pct_sparse: achieved / sparse peak: the figure a sparse headline gives, which is WRONG; ``sparse_trap`` says so
            in one line (None without a sparse peak).
        clock_hz, peak_at_clock_flops, pct_at_clock: with a measured SM clock, the dense peak at that clock
            (FLOP/clk/SM x SMs x clock) and achieved / it.
        gemm: the :class:`~truepeak.roofline.Gemm`, or None without a shape; ``shape``, ``flop``, ``min_bytes``,
            ``a_bytes``, ``b_bytes``, ``c_bytes`` and ``intensity`` (FLOP/B) are read from it (None without it).
        time_s: measured (or implied) seconds per GEMM; None without a shape.
        ridge: dense peak / bandwidth (FLOP/B); ``bandwidth``: spec memory bandwidth (B/s).
        attainable_flop_per_s: the roofline ceiling at this shape (FLOP/s); ``pct_roofline``: achieved / it.
        bound: ``"memory"`` or ``"compute"``; ``time_floor_s``: max(FLOP / peak, bytes / bandwidth).
        achieved_bandwidth, pct_bandwidth: min_bytes / time (B/s) and its fraction of the spec bandwidth; set for
            memory-bound shapes, where it is the percentage that matters.
        notes: warnings in words (for example a throughput above the memory roofline).
    """

    accelerator: str
    accelerator_key: str
    format: str
    rate: str
    accumulate: str
    dense_flops: float
    sparse_flops: float | None
    peak_source: str
    peak_derived: bool
    achieved_flops: float | None
    pct_dense: float | None
    pct_sparse: float | None
    sparse_trap: str | None
    ceiling_flops: float | None = None
    ceiling_basis: str = ""
    peak_note: str = ""
    unit: str = "TFLOPS"
    clock_hz: float | None = None
    peak_at_clock_flops: float | None = None
    pct_at_clock: float | None = None
    gemm: Gemm | None = None
    time_s: float | None = None
    bandwidth: float | None = None
    ridge: float | None = None
    attainable_flop_per_s: float | None = None
    pct_roofline: float | None = None
    bound: str | None = None
    time_floor_s: float | None = None
    achieved_bandwidth: float | None = None
    pct_bandwidth: float | None = None
    notes: tuple[str, ...] = field(default=())

    # -- counts of the GEMM (None without a shape) ---------------------------------------------------------------------
    @property
    def shape(self) -> tuple[int, int, int] | None:
        return None if self.gemm is None else (self.gemm.m, self.gemm.n, self.gemm.k)

    @property
    def flop(self) -> int | None:
        return None if self.gemm is None else self.gemm.flop

    @property
    def min_bytes(self) -> int | None:
        return None if self.gemm is None else self.gemm.min_bytes

    @property
    def a_bytes(self) -> int | None:
        return None if self.gemm is None else self.gemm.a_bytes

    @property
    def b_bytes(self) -> int | None:
        return None if self.gemm is None else self.gemm.b_bytes

    @property
    def c_bytes(self) -> int | None:
        return None if self.gemm is None else self.gemm.c_bytes

    @property
    def intensity(self) -> float | None:
        return None if self.gemm is None else self.gemm.intensity

    #: Properties :meth:`to_dict` writes beside the fields.
    _COUNTS = ("shape", "flop", "min_bytes", "a_bytes", "b_bytes", "c_bytes", "intensity")

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict (SI units, fractions); the GEMM becomes its M, N, K and formats, and its counts (shape,
        flop, min_bytes, a/b/c_bytes, intensity) are written as keys of their own."""
        out: dict[str, Any] = {}
        for name in self.__dataclass_fields__:
            value = getattr(self, name)
            if name == "gemm":
                value = None if value is None else {
                    "m": value.m, "n": value.n, "k": value.k, "format": value.format.name,
                    "out_format": value.out_format.name, "scaling": value.scaling, "label": value.label,
                }
            elif isinstance(value, tuple):
                value = list(value)
            out[name] = value
        for name in self._COUNTS:
            value = getattr(self, name)
            out[name] = list(value) if isinstance(value, tuple) else value
        out["units"] = "SI: FLOP, B, s, FLOP/s, B/s, Hz; pct_* are fractions; efficiency is against the DENSE peak"
        return out


def _as_gemm(shape: Any, fmt: Format, scaling: str | None) -> Gemm:
    if isinstance(shape, Gemm):
        return shape
    if isinstance(shape, str):
        m, n, k = parse_shape(shape)
    else:
        try:
            m, n, k = shape
        except (TypeError, ValueError):
            raise TruepeakError(f"shape {shape!r} is not (M, N, K) or 'MxNxK', e.g. 16x6144x4096") from None
    return Gemm(m, n, k, fmt, scaling=scaling)


def _accelerator(acc: str | Accelerator) -> Accelerator:
    """An :class:`Accelerator` as it is, or a name resolved with :func:`truepeak.hardware.get_accelerator` (marketing
    name, device string, catalog key or alias: ``"h200"``, ``"NVIDIA H200"``)."""
    from truepeak.hardware.catalog import Accelerator as _Acc

    if isinstance(acc, _Acc):
        return acc
    if not isinstance(acc, str):
        raise TruepeakError(f"accelerator must be a name such as 'h200' or an Accelerator, not {type(acc).__name__}")
    from truepeak.hardware.lookup import get_accelerator

    return get_accelerator(acc)


def analyze(acc: str | Accelerator, fmt: str | Format, *, tflops: float | None = None, shape: Any = None,
            time_s: float | None = None, accumulate: str | None = None, scaling: str | None = None,
            clock_hz: float | None = None) -> Efficiency:
    """Place a measured GEMM against the dense peak and, with a shape, on the roofline (docs/method.md, 'Worked example:
    GLM-5 on RTX PRO 6000').

    Args:
        acc: the accelerator: an :class:`~truepeak.hardware.catalog.Accelerator` or a name
            :func:`truepeak.hardware.get_accelerator` resolves (``"h200"``, ``"NVIDIA H200"``, ``"rtx-pro-6000-ws"``).
        fmt: input format (name or Format); :meth:`Accelerator.peak` picks the catalog peak governing it.
        tflops: measured throughput in TFLOPS (1e12 FLOP/s; TOPS for int8).
        shape: ``"MxNxK"``, ``(M, N, K)`` or a :class:`Gemm` (then ``scaling`` is ignored).
        time_s: measured seconds per GEMM (needs ``shape``, which gives the FLOP count).
        accumulate: accumulator for the peak (``"fp16"`` for GeForce fp16-accumulate rates); default the format's.
        scaling: fp8/int8 scale layout for the byte count (``"tensor"``, ``"row"``, ``"block128"``); validated even
            without a shape.
        clock_hz: a measured SM clock: adds the peak at that clock and raises the plausibility ceiling to it.

    Any two of (tflops, shape, time_s) give the third; all three must agree within 1 %. A shape alone gives the bounds
    (FLOP, bytes, intensity, ridge, roofline ceiling, bound, time floor) with no measurement: ``achieved_flops`` and
    the percentages are None.

    Returns:
        :class:`Efficiency`.

    Raises:
        TruepeakError: none of throughput, shape, time given; a time without a shape; an inconsistent triple;
            a malformed shape; a scaling the format does not take.
        MeasurementError: a zero, negative or non-finite throughput, time or clock; a clock above the catalog
            maximum clock + 2 % (1.5 x the spec clock where no maximum is known); a time (given or implied by a
            throughput and shape) under 100 ns; a throughput above the plausibility ceiling (docs/method.md,
            'Impossible timings'; :func:`truepeak.roofline.plausibility_limit`); with a shape and a time or
            throughput, a time in which the working set cannot have moved: more than the memory bandwidth for the
            bytes the L2 cannot hold, or more than 10 x it at all (:func:`truepeak.roofline.check_memory_plausible`).
        UnknownNameError, UnsupportedError: unknown accelerator name, format or scaling, or no peak for the format on
            ``acc``.

    Example::

        analyze("h200", "bf16", tflops=500)  # 500 / 989.4 dense TFLOPS = 50.5 % of the dense peak
    """
    acc = _accelerator(acc)
    f = get_format(fmt)
    peak = acc.peak(f, accumulate)
    if not isinstance(shape, Gemm):
        check_scaling(f, scaling)
    if tflops is not None and math.isinf(_tflops_input(tflops) * TERA):
        # a finite TFLOPS figure whose FLOP/s overflow a float (above ~1.8e296 TFLOPS): above every ceiling; say so
        # with the value as given rather than as "inf FLOP/s"
        clk = None if clock_hz is None else check_clock(acc, clock_hz)
        raise implausible(_tflops_input(tflops), plausibility_limit(acc, f, peak.accumulate, clk))
    achieved, t, clk, gemm = _resolve_inputs(acc, f, tflops, shape, time_s, scaling, clock_hz)
    lim = plausibility_limit(acc, f, peak.accumulate, clk)
    if achieved is not None:
        check_plausible(achieved, lim)
    memory_note = None
    if gemm is not None and t is not None and achieved is not None:  # the memory side (docs/method.md)
        memory_note = _memory_check(acc, gemm, t, f, peak.accumulate, clk)
    notes: list[str] = []
    out = _peak_fields(acc, f, peak, lim, achieved, clk, notes)
    if gemm is not None:
        out.update(gemm=gemm, time_s=t)
        out.update(_roofline_fields(acc, gemm, float(peak.dense), achieved, t, notes, memory_note))
    out["notes"] = tuple(notes)
    return Efficiency(**out)


def _resolve_inputs(acc: Accelerator, f: Format, tflops: float | None, shape: Any, time_s: float | None,
                    scaling: str | None, clock_hz: float | None
                    ) -> tuple[float | None, float | None, float | None, Gemm | None]:
    """``(achieved FLOP/s, seconds per GEMM, checked clock, Gemm)`` from any two of throughput, shape and time (the
    third implied); Nones for what cannot be known. Raises as :func:`analyze` says."""
    if tflops is None and time_s is None and shape is None:
        raise TruepeakError("give a measured throughput, a time per GEMM with its shape (MxNxK, e.g. 16x6144x4096), "
                            "or a shape alone for its roofline bounds")
    achieved = None if tflops is None else _tflops_input(tflops) * TERA
    t = None if time_s is None else check_time(time_s)
    clk = None if clock_hz is None else check_clock(acc, clock_hz)
    gemm = None if shape is None else _as_gemm(shape, f, scaling)
    if gemm is None:
        if t is not None:
            raise TruepeakError("a time needs the GEMM shape (MxNxK, e.g. 16x6144x4096) to give the FLOP count; "
                                "or give the throughput alone")
        return achieved, t, clk, gemm
    if t is not None:
        implied = gemm.flop / t
        if achieved is not None and abs(achieved - implied) > CONSISTENCY_TOLERANCE * implied:
            unit = rate_unit(f)
            raise TruepeakError(
                f"inconsistent input: {gemm.label} ({gemm.flop:.4g} FLOP) in {fmt_time(t)} is "
                f"{fmt_rate(implied)} {unit}, not {fmt_rate(achieved)}; give any two of throughput, shape and time")
        achieved = implied
    elif achieved is not None:
        t = gemm.flop / achieved
        if t < MIN_TIME_S:
            raise MeasurementError(
                f"{fmt_rate(achieved)} {rate_unit(f)} on {gemm.label} ({gemm.flop:.4g} FLOP) means {fmt_time(t)} per "
                f"GEMM, below {fmt_time(MIN_TIME_S)}: no kernel or library call completes that fast (a GPU launch "
                "alone takes microseconds); a timing error or a wrong shape")
    return achieved, t, clk, gemm


def _peak_fields(acc: Accelerator, f: Format, peak: Peak, lim: PlausibilityLimit, achieved: float | None,
                 clk: float | None, notes: list[str]) -> dict[str, Any]:
    """The fields about the peak: dense (and its provenance), sparse (the labelled trap), at the measured clock.
    Appends warnings to ``notes``."""
    dense = float(peak.dense)
    unit = rate_unit(f)
    out: dict[str, Any] = dict(
        accelerator=acc.name, accelerator_key=acc.key, format=f.name, rate=peak.rate, accumulate=peak.accumulate,
        dense_flops=dense, sparse_flops=peak.sparse, peak_source=peak.source, peak_derived=peak.derived,
        achieved_flops=achieved, pct_dense=None if achieved is None else achieved / dense, pct_sparse=None,
        sparse_trap=None, ceiling_flops=lim.ceiling, ceiling_basis=lim.basis, peak_note=peak.note, unit=unit,
    )
    if achieved is not None:
        above = lim.above_spec_note(achieved)
        if above:
            notes.append(above)
    if peak.sparse and achieved is not None:
        out["pct_sparse"] = achieved / peak.sparse
        out["sparse_trap"] = (f"against the {fmt_rate(peak.sparse)} {unit} sparse figure this would read "
                              f"{fmt_pct(achieved / peak.sparse)} — wrong: "
                              f"{SPARSE_WHY_NOT_2X if peak.sparse_ratio_note else SPARSE_WHY}")
    if clk is None:
        return out
    at_clock = acc.peak_at_clock(f, clk, accumulate=peak.accumulate)
    out["clock_hz"] = clk
    if at_clock is None:
        notes.append(f"no FLOP/clk/SM or SM count for {f.name} on {acc.name}: no peak at the measured clock")
        return out
    out["peak_at_clock_flops"] = at_clock
    if achieved is not None:
        out["pct_at_clock"] = achieved / at_clock
        if achieved > at_clock * (1 + 1e-9):
            notes.append(f"above the peak at the given {clk / 1e6:.0f} MHz clock: the SM clock during the run "
                         "was higher than the value given (a median or idle sample?)")
    return out


def _roofline_fields(acc: Accelerator, gemm: Gemm, dense: float, achieved: float | None, t: float | None,
                     notes: list[str], memory_note: str | None = None) -> dict[str, Any]:
    """The roofline fields of a GEMM shape (ridge, ceiling, bound, time floor; with a measurement, % of the
    roofline and, memory-bound, the achieved bandwidth). Appends warnings to ``notes``: above the memory roof,
    ``memory_note`` (from :func:`truepeak.roofline.check_memory_plausible`) when given."""
    bw = acc.memory_bandwidth.value if acc.memory_bandwidth else None
    if not bw:
        notes.append(f"{acc.name} has no memory bandwidth in the catalog: no roofline")
        return {}
    roof = Roofline(dense, float(bw))
    ceiling = roof.attainable(gemm.intensity)
    bound = roof.bound(gemm.intensity)
    out: dict[str, Any] = dict(bandwidth=float(bw), ridge=roof.ridge, attainable_flop_per_s=ceiling, bound=bound,
                               time_floor_s=roof.time_floor(gemm.flop, gemm.min_bytes))
    if achieved is None:
        return out
    out["pct_roofline"] = achieved / ceiling
    achieved_bw = gemm.min_bytes / t
    if bound == "memory":
        out.update(achieved_bandwidth=achieved_bw, pct_bandwidth=achieved_bw / bw)
    if achieved_bw > bw * (1 + 1e-9):  # above the memory roof (compute-bound above the peak: _peak_fields says so)
        notes.append(memory_note or _above_memory_roof(acc, gemm, achieved_bw, float(bw)))
    return out


def _tflops_input(tflops: float) -> float:
    """A given throughput in TFLOPS as a float; MeasurementError unless positive and finite."""
    try:
        v = float(tflops)
    except (TypeError, ValueError):
        raise MeasurementError(f"throughput {tflops!r} TFLOPS is not a number") from None
    if not math.isfinite(v) or v <= 0:
        raise MeasurementError(
            f"throughput {tflops!r} TFLOPS is not a positive finite number; a measurement must be > 0")
    return v


def _above_memory_roof(acc: Accelerator, gemm: Gemm, achieved_bw: float, bw: float) -> str:
    l2 = acc.l2_bytes.value if acc.l2_bytes else None
    where = (f"the {fmt_bytes(gemm.min_bytes)} working set fits in the {fmt_bytes(l2)} L2"
             if l2 and gemm.min_bytes < 2 * l2 else "the operands came from cache")
    return (f"{fmt_bandwidth(achieved_bw)} GB/s of minimum traffic is above the {fmt_bandwidth(bw)} GB/s memory "
            f"bandwidth: {where}; a serving workload streams these bytes from DRAM (rotate buffers over >= 2x L2 "
            "when measuring)")


def derived_metrics(acc: str | Accelerator, work: Gemm | Copy, time_s: float, fmt: str | Format | None = None,
                    clock_hz: float | None = None, sm_count: int | None = None, *,
                    accumulate: str | None = None) -> GemmMetrics | CopyMetrics:
    """Metrics of one measurement, stored as ``derived`` in every record ``truepeak run`` writes; each record names the
    peak, clock and bandwidth it was placed against, so its fractions explain themselves.

    Args:
        acc: the accelerator, or a name :func:`truepeak.hardware.get_accelerator` resolves (``"h200"``); may be one
            built for a CPU: no peaks, ``memory_bandwidth`` None → those fields None.
        work: a :class:`Gemm` or :class:`Copy`.
        time_s: median seconds per call.
        fmt: format whose peak applies; default the GEMM's input format.
        clock_hz: median sampled SM clock (Hz) for ``at_clock_fraction`` (None, 0, non-finite or far above the
            maximum: left out).
        sm_count: device-reported SM count (default the catalog's).
        accumulate: accumulator for the peak (default the format's).

    Returns:
        For a GEMM, :class:`truepeak.records.GemmMetrics` (SI units, fractions, None where undefined):

        - ``flop_per_s`` = FLOP / time; ``bytes_per_s`` = minimum bytes / time;
        - ``dense_fraction`` = flop_per_s / ``dense_peak_flop_per_s`` (with ``peak_source``, ``peak_estimated``);
        - ``attainable_flop_per_s`` = min(dense peak, bandwidth x intensity) (Williams et al. 2009),
          ``roofline_fraction`` = flop_per_s / it, ``bound`` (``"compute"``/``"memory"``);
        - ``at_clock_fraction`` = flop_per_s / (FLOP/clk/SM x SMs x ``sm_clock_hz``), the clock used (None if
          unusable);
        - ``bandwidth_fraction`` = bytes_per_s / ``bandwidth_bytes_per_s`` (with ``bandwidth_source``);
        - ``memory_note``: above the spec memory bandwidth, why that is possible at all (the working set fits in, or
          was partly held by, the cache), from :func:`truepeak.roofline.check_memory_plausible`; None otherwise.

        For a Copy (or a GEMM of no FLOP), :class:`truepeak.records.CopyMetrics`: the bytes, bandwidth and memory-note
        fields.

    Raises:
        MeasurementError: a zero, negative or non-finite time; a GEMM throughput above the plausibility ceiling
            (:func:`truepeak.roofline.plausibility_limit`: the dense peak at the maximum clock, or at ``clock_hz`` if
            higher); a time in which the bytes cannot have moved: above the SPEC memory bandwidth for the part of the
            working set the L2 cannot hold (:func:`truepeak.roofline.check_memory_plausible`; a measured bandwidth,
            as a CPU's copy, is not checked against). Such a result is a timing error, never a record: ``truepeak
            run`` records the case as ``failed`` with the message.
        UnknownNameError: unknown accelerator name or format.
    """
    acc = _accelerator(acc)
    t = check_time(time_s)
    out: dict[str, Any] = {"bytes_per_s": work.min_bytes / t}
    bw_spec = acc.memory_bandwidth
    bw = bw_spec.value if bw_spec else None
    if bw:
        out.update(bandwidth_fraction=work.min_bytes / t / bw, bandwidth_bytes_per_s=float(bw),
                   bandwidth_source=bw_spec.source)
    if isinstance(work, Copy) or work.flop == 0:
        return CopyMetrics(**out, memory_note=_memory_check(acc, work, t))
    f = get_format(fmt if fmt is not None else work.format)
    achieved = work.flop / t
    out["flop_per_s"] = achieved
    try:
        peak = acc.peak(f, accumulate)
    except UnsupportedError:
        peak = None
    if clock_hz is not None:
        try:
            clock_hz = check_clock(acc, clock_hz)
        except MeasurementError:  # an unusable clock sample (nan, 0, far above the maximum): no at_clock_fraction
            clock_hz = None
    out["sm_clock_hz"] = clock_hz
    if peak is not None:
        check_plausible(achieved, plausibility_limit(acc, f, peak.accumulate, clock_hz, sm_count))
        out.update(dense_fraction=achieved / peak.dense, dense_peak_flop_per_s=float(peak.dense),
                   peak_source=peak.source, peak_estimated=bool(peak.derived))
        if bw:
            roof = Roofline(float(peak.dense), float(bw))
            ceiling = roof.attainable(work.intensity)
            out.update(attainable_flop_per_s=ceiling, roofline_fraction=achieved / ceiling,
                       bound=roof.bound(work.intensity))
    if clock_hz is not None:
        at_clock = acc.peak_at_clock(f, clock_hz, sm_count, accumulate=accumulate)
        if at_clock:
            out["at_clock_fraction"] = achieved / at_clock
    out["memory_note"] = _memory_check(acc, work, t, f, accumulate, clock_hz, sm_count)
    return GemmMetrics(**out)


def _memory_check(acc: Accelerator, work: Gemm | Copy, t: float, f: Format | None = None,
                  accumulate: str | None = None, clock_hz: float | None = None,
                  sm_count: int | None = None) -> str | None:
    """:func:`truepeak.roofline.check_memory_plausible` against a SPEC bandwidth: a measured (``derived``) one, such
    as a CPU's copy bandwidth, is no hard limit (a noisy copy reads low), so it is not checked against."""
    bw_spec = acc.memory_bandwidth
    if bw_spec is None or bw_spec.derived:
        return None
    return check_memory_plausible(acc, work, t, fmt=f, accumulate=accumulate, clock_hz=clock_hz, sm_count=sm_count)
