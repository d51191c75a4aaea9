"""What ``truepeak peak`` answers: one :class:`FormatPeak` per (format, mode), gathered in a :class:`PeakRun` (whose
:meth:`~PeakRun.summary` is ``peak.json``); :class:`PeakInterrupted` carries a run stopped by Ctrl-C."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from truepeak.bench.peak.search import SearchResult
from truepeak.records import Record


@dataclass
class FormatPeak:
    """The answer for one (format, mode).

    Attributes:
        format, mode: what was searched (mode ``cpu`` on a CPU).
        status: ``"ok"``, ``"skipped"`` (the device cannot run the format; ``reason`` says why), ``"failed"`` or
            ``"interrupted"`` (Ctrl-C during this search: ``best_record`` is the best so far, or None).
        best_record: the winning re-measured record (None unless ok or interrupted).
        result: the :class:`SearchResult`.
        elapsed_s: wall seconds spent on this format and mode (settle included); for a resumed search the span of
            its records' timestamps.
        resumed: taken from the records of an earlier run by ``resume`` (not searched again).
    """

    format: str
    mode: str
    status: str
    reason: str = ""
    best_record: Record | None = None
    result: SearchResult | None = None
    elapsed_s: float = 0.0
    resumed: bool = False

    def summary(self) -> dict[str, Any]:
        """A JSON-ready summary: best shape, median FLOP/s, % of dense spec, % of peak at measured clock, clock and
        power (SI units, fractions), evaluations and time; ``remeasured`` says whether the best is a re-measurement
        (False for an interrupted search's best so far from the first pass), ``resumed`` whether it came from an
        earlier run's records."""
        out: dict[str, Any] = {"format": self.format, "mode": self.mode, "status": self.status, "reason": self.reason,
                               "elapsed_s": self.elapsed_s, "resumed": self.resumed}
        if self.result is not None:
            out.update(evaluations=self.result.evaluations, stopped=self.result.stopped)
            first = self.result.first_pass_best()
            out["first_pass_best"] = None if first is None else {"shape": list(first.shape), "flop_per_s": first.value}
        rec = self.best_record
        if rec is None:
            return out
        d, w, m = rec.derived, rec.workload, rec.measurement
        tel = m.telemetry if m is not None else None
        out.update(
            shape=[w.m, w.n, w.k], backend=rec.backend,
            remeasured=rec.search is not None and rec.search.phase == "remeasure",
            flop_per_s=d.flop_per_s if d else None, time_s=rec.time_s,
            rel_iqr=m.steady_rel_iqr if m else None,
            dense_peak_flop_per_s=d.dense_peak_flop_per_s if d else None,
            pct_dense=d.dense_fraction if d else None,
            peak_at_clock_flop_per_s=d.peak_at_clock_flop_per_s if d else None,
            pct_at_clock=d.at_clock_fraction if d else None,
            sm_clock_median_hz=tel.sm_clock_median_hz if tel else None,
            power_median_w=tel.power_median_w if tel else None,
            temperature_max_c=tel.temperature_max_c if tel else None,
            throttle_reasons=dict(tel.reasons) if tel else None,
            warnings=list(rec.warnings),
        )
        return out


@dataclass
class PeakRun:
    """What :func:`run_peak` returns (and :class:`PeakInterrupted` carries): one :class:`FormatPeak` per (format,
    mode) searched, where the records are, and notes.

    Attributes:
        records: the records this run wrote (not those a resumed search took from the file).
        interrupted: stopped by Ctrl-C; ``peaks`` ends with the interrupted search (status ``interrupted``) and
            ``not_searched`` lists the (format, mode) pairs that never started.
    """

    out_dir: Path
    records_path: Path
    peaks: list[FormatPeak]
    device: Any
    notes: list[str] = field(default_factory=list)
    elapsed_s: float = 0.0
    records: list[Record] = field(default_factory=list)
    interrupted: bool = False
    not_searched: list[tuple[str, str]] = field(default_factory=list)

    def summary(self) -> dict[str, Any]:
        """peak.json: device, records path, time, notes, units and one :meth:`FormatPeak.summary` per search;
        ``interrupted`` (a partial answer: the interrupted search's best so far) and ``not_searched``."""
        return {"device": getattr(self.device, "name", None), "device_kind": getattr(self.device, "kind", None),
                "records": str(self.records_path), "elapsed_s": self.elapsed_s, "notes": list(self.notes),
                "units": "SI: FLOP/s, s, Hz, W; pct_* are fractions of the DENSE peak",
                "interrupted": self.interrupted,
                "not_searched": [{"format": f, "mode": m} for f, m in self.not_searched],
                "peaks": [p.summary() for p in self.peaks]}


class PeakInterrupted(KeyboardInterrupt):
    """:func:`run_peak` was interrupted (Ctrl-C). The records are kept in ``run.records_path`` and ``peak.json`` holds
    the partial answer (``interrupted: true``; the interrupted search's best so far); ``run`` is the :class:`PeakRun`
    with ``interrupted=True``, for the caller to render."""

    def __init__(self, run: PeakRun):
        super().__init__(f"interrupted after {len(run.records)} records; they are in {run.records_path}")
        self.run = run


def interrupted_peak(fmt: str, mode: str, result: SearchResult, elapsed_s: float) -> FormatPeak:
    """The answer of a search stopped by Ctrl-C: status ``interrupted``, its best so far (:func:`best_so_far`), and a
    reason saying how far it got and whether that best was re-measured."""
    best = result.best
    n = result.evaluations
    if best is None:
        why = f"interrupted after {n} shape{'s' if n != 1 else ''}, none of which ran" if n else \
            "interrupted before any shape finished"
    else:
        why = (f"interrupted after {n} shape{'s' if n != 1 else ''}; best so far, "
               + ("re-measured" if result.remeasured else "not re-measured"))
    return FormatPeak(fmt, mode, "interrupted", why, best_record=best.record if best else None, result=result,
                      elapsed_s=elapsed_s)


__all__ = ["FormatPeak", "PeakRun", "PeakInterrupted", "interrupted_peak"]
