"""``truepeak compare A.jsonl B.jsonl``: match the records of two runs and say, case by case, whether B is faster,
slower, or the same within the measured noise.

Matching: two records are the same case when they measured the same thing (:func:`match_key`): for a GEMM its kind,
M, N, K, format, scale layout, mode and backend; for other kinds the workload without its provenance fields, backend,
format and mode (recomputed with :func:`truepeak.records.record_key`, never the stored ``key``, so that files of
any command match: a ``truepeak peak`` file keys records by search phase). A side with several records of one case (a
peak search measures a shape in several phases) is represented by one (:func:`representatives`): an ok record, the
re-measured one (``search.phase == "remeasure"``) else the one with the most samples; the output says how many cases
were matched, how many were left on each side and how many records were set aside as repeats. Cases left over
on both sides are then paired by kind, workload and format alone when that pairing is unambiguous (one candidate on
each side): this lets a run on another device or with another backend build be compared; such rows are marked
``loose`` and name what differs.

The verdict, after nvbench's compare script (NVIDIA/nvbench ``scripts/nvbench_compare.py``): with the times ``t_A``
(reference) and ``t_B`` and ``change = (t_B - t_A) / t_A``, the case is **same** when ``|change| <= threshold``,
else **faster** (B takes less time) or **slower**. nvbench's threshold is the smaller relative standard deviation of
the two runs; truepeak's records carry the interquartile range instead (robust to the outliers GPU timing has), so
the noise of a record is ``IQR / median`` of its samples (``measurement.steady_rel_iqr``) and::

    threshold = max(min(noise_A, noise_B), min_noise)

``min_noise`` (default :data:`MIN_NOISE` = 1 %) is a floor for run-to-run drift that one run's samples cannot show:
two runs minutes apart differ in clock, temperature and power state by more than the IQR of one 0.3 s window (the
committed H200 copy has an IQR of 0.07 % of its median). A record without samples' spread (a CPU estimate, an old
file) uses the other's noise; with neither the verdict is ``unknown``. Cases that are skipped or failed on one side,
or present on one side only, are listed with that status.

``B/A`` is the throughput ratio ``t_A / t_B`` (FLOP/s, B/s and busbw scale with 1 / time for the same workload):
above 1, B is faster. Comparing runs of different devices is allowed; :func:`compare_text` and the JSON say so first.

Pure Python: imports no numpy.
"""

from __future__ import annotations

import json
import statistics
from dataclasses import asdict, dataclass, field
from typing import Any

from truepeak.records import GemmWorkload, MeasurementSummary, Record, record_key
from truepeak.report.export import remeasured
from truepeak.report.load import Results
from truepeak.report.table import SCALING_LABELS, scaling_of
from truepeak.units import fmt_pct, fmt_time

#: Floor of the noise threshold (a fraction): run-to-run drift a single run's IQR does not show.
MIN_NOISE = 0.01
VERDICTS = ("faster", "slower", "same", "unknown", "only in A", "only in B", "not ok")


@dataclass
class Row:
    """One compared case.

    Attributes:
        kind, case, format, mode: what was measured (``case`` is the workload label and backend).
        time_a_s, time_b_s: the times per call (s), None when not ok.
        ratio: throughput B/A = ``time_a / time_b`` (> 1: B is faster), or None.
        change: ``(time_b - time_a) / time_a``, or None.
        noise_a, noise_b: IQR / median of each record, or None.
        threshold: the noise threshold used (fraction), or None.
        verdict: one of :data:`VERDICTS`.
        note: what else the reader must know (a loose match and what differs, a skipped side's reason).
        scaling: the fp8/int8 scale layout (``workload.scaling``: tensor, row, block128), or None.
    """

    kind: str
    case: str
    format: str | None
    mode: str | None
    time_a_s: float | None
    time_b_s: float | None
    ratio: float | None
    change: float | None
    noise_a: float | None
    noise_b: float | None
    threshold: float | None
    verdict: str
    note: str = ""
    scaling: str | None = None


@dataclass
class Comparison:
    """The result of :func:`compare`: ``rows`` in A's order then B-only ones, ``warnings`` (different devices, unusable
    lines), the device names and files of each side, ``min_noise``, ``counts`` per verdict, and ``matching``: how many
    cases were matched (``matched``), left on one side (``only_in_a``, ``only_in_b``), the records read per side
    (``records_a``, ``records_b``) and those set aside as repeats of a case (``set_aside_a``, ``set_aside_b``)."""

    rows: list[Row]
    warnings: list[str]
    device_a: list[str]
    device_b: list[str]
    file_a: str
    file_b: str
    min_noise: float
    counts: dict[str, int] = field(default_factory=dict)
    matching: dict[str, int] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {"file_a": self.file_a, "file_b": self.file_b, "device_a": self.device_a, "device_b": self.device_b,
                "warnings": self.warnings, "min_noise": self.min_noise, "counts": self.counts,
                "matching": self.matching,
                "rows": [asdict(r) for r in self.rows]}


def noise(rec: Record) -> float | None:
    """IQR / median of a record's samples (``steady_rel_iqr``, else ``rel_iqr``, else from ``iqr_s`` and the time,
    else computed from ``samples_s``, as collective records carry), or None when the record has none."""
    m = rec.measurement
    if not isinstance(m, MeasurementSummary):
        return None
    if m.noise is not None:
        return float(m.noise)
    if m.samples_s is not None and len(m.samples_s) >= 4:
        # quartiles by linear interpolation (numpy's default, as truepeak.bench.measurement uses)
        q1, med, q3 = statistics.quantiles([float(x) for x in m.samples_s], n=4, method="inclusive")
        return (q3 - q1) / med if med > 0 else None
    return None


#: Workload fields that say where a record came from, not what was measured (a ``truepeak peak`` search's
#: ``origin: "peak search (coarse)"`` against a run's ``"square"``; derived byte and FLOP counts; the label).
PROVENANCE_FIELDS = frozenset({"origin", "label", "flop", "min_bytes", "intensity"})


def match_key(rec: Record) -> str:
    """What two records must share to be the same case: the measured workload. For a GEMM: kind, M, N, K, format,
    scale layout (``workload.scaling``), mode and backend; for other kinds: kind, the workload without its provenance
    fields (:data:`PROVENANCE_FIELDS`), backend, format and mode. Never the record's ``key`` or ``search`` fields:
    a ``truepeak peak`` file keys its records by search phase and evaluation (``...|search:coarse:0``) and writes
    several records of one shape, which must still match a ``truepeak run`` record of that shape."""
    w = rec.workload
    if isinstance(w, GemmWorkload):
        ident = {"m": w.m, "n": w.n, "k": w.k, "scaling": w.scaling}
    else:
        ident = {k: v for k, v in w.to_dict().items() if k not in PROVENANCE_FIELDS}
    return record_key(rec.kind, ident, rec.backend, rec.format, rec.mode)


_key = match_key


def _samples(rec: Record) -> int:
    return rec.measurement.sample_count if isinstance(rec.measurement, MeasurementSummary) else 0


def _rank(rec: Record) -> tuple[bool, bool, int]:
    """Which of several records of one case represents it: an ok record first, then a re-measured one
    (``search.phase == "remeasure"``: a peak search's top shapes timed again with longer budgets), then the one with
    the most samples."""
    return (rec.ok, remeasured(rec), _samples(rec))


def representatives(records: list[Record]) -> tuple[list[Record], int]:
    """One record per :func:`match_key`, in first-seen order: the best by :func:`_rank` (the first on a tie).
    Returns ``(records, n_set_aside)``."""
    best: dict[str, Record] = {}
    for r in records:
        k = match_key(r)
        if k not in best or _rank(r) > _rank(best[k]):
            best[k] = r
    return list(best.values()), len(records) - len(best)


def _loose_key(rec: Record) -> str:
    # a run's workload holds derived byte counts that differ by device; keep its identity
    w = {k: v for k, v in rec.workload.to_dict().items() if k not in ("min_bytes", "intensity", "flop", "origin")}
    return record_key(rec.kind, w, None, rec.format, None)


def verdict(time_a: float | None, time_b: float | None, noise_a: float | None, noise_b: float | None,
            min_noise: float = MIN_NOISE) -> tuple[str, float | None, float | None]:
    """``(verdict, change, threshold)`` for two times (s) and their noises (fractions); see the module docstring.

    >>> verdict(1.0, 0.9, 0.02, 0.03)
    ('faster', -0.1, 0.02)
    """
    if not time_a or not time_b:
        return "unknown", None, None
    change = (time_b - time_a) / time_a
    noises = [n for n in (noise_a, noise_b) if n is not None]
    if not noises:
        return "unknown", change, None
    threshold = max(min(noises), min_noise)
    if abs(change) <= threshold:
        return "same", change, threshold
    return ("faster" if change < 0 else "slower"), change, threshold


def _row(a: Record | None, b: Record | None, min_noise: float, note: str = "") -> Row:
    rec = a if a is not None else b
    assert rec is not None
    case = rec.workload.name + (f" [{rec.backend}]" if rec.backend else "")
    common = dict(kind=rec.kind, case=case, format=rec.format, mode=rec.mode, scaling=scaling_of(rec))
    if a is None or b is None:
        return Row(**common, time_a_s=None, time_b_s=None, ratio=None, change=None, noise_a=None, noise_b=None,
                   threshold=None, verdict="only in A" if b is None else "only in B", note=note)
    ok_a, ok_b = a.ok, b.ok
    ta = a.time_s if ok_a else None
    tb = b.time_s if ok_b else None
    na, nb = noise(a), noise(b)
    if not ok_a and not ok_b and (a.status, a.reason) == (b.status, b.reason):
        return Row(**common, time_a_s=None, time_b_s=None, ratio=None, change=None, noise_a=na, noise_b=nb,
                   threshold=None, verdict="not ok",
                   note="; ".join(p for p in (note, f"{a.status} in both: {a.reason}") if p))
    if not (ok_a and ok_b):
        why = "; ".join(f"{side} {r.status}: {r.reason}" for side, r, ok in (("A", a, ok_a), ("B", b, ok_b))
                        if not ok)
        return Row(**common, time_a_s=ta, time_b_s=tb, ratio=None, change=None, noise_a=na, noise_b=nb,
                   threshold=None, verdict="not ok", note="; ".join(p for p in (note, why) if p))
    v, change, threshold = verdict(ta, tb, na, nb, min_noise)
    return Row(**common, time_a_s=ta, time_b_s=tb, ratio=ta / tb if ta and tb else None, change=change,
               noise_a=na, noise_b=nb, threshold=threshold, verdict=v, note=note)


def _differs(a: Record, b: Record) -> str:
    parts = [name for name, x, y in (("backend", a.backend, b.backend), ("mode", a.mode, b.mode)) if x != y]
    return "loose match: " + (" and ".join(parts) + " differ" if parts else "workload details differ")


def compare(a: Results, b: Results, *, min_noise: float = MIN_NOISE) -> Comparison:
    """Compare run B against reference run A (see the module docstring).

    Args:
        a, b: the two runs (:func:`truepeak.report.load.load_results`, one file each).
        min_noise: the floor of the noise threshold, a fraction (0.01 = 1 %).

    Raises:
        TruepeakError: ``min_noise`` is negative or not below 1, or a side has no valid record.
    """
    from truepeak.errors import TruepeakError

    if not 0 <= min_noise < 1:
        raise TruepeakError(f"--min-noise must be a percentage in [0, 100), got {100 * min_noise:g}")
    a.require_records()
    b.require_records()
    warnings: list[str] = []
    dev_a = list(dict.fromkeys(r.device_name for r in a.records))
    dev_b = list(dict.fromkeys(r.device_name for r in b.records))
    if dev_a != dev_b:
        warnings.append(f"the runs were measured on different devices (A: {', '.join(dev_a)}; B: {', '.join(dev_b)}): "
                        "the ratios compare devices, not only code")
    for side, res in (("A", a), ("B", b)):
        if res.problems:
            warnings.append(f"{side}: {len(res.problems)} line(s) not used: "
                            + "; ".join(str(p) for p in res.problems[:3])
                            + (" ..." if len(res.problems) > 3 else ""))
    recs_a, dup_a = representatives(list(a.records))
    recs_b, dup_b = representatives(list(b.records))
    b_by_key: dict[str, Record] = {_key(r): r for r in recs_b}
    used_b: set[int] = set()
    pairs: list[tuple[Record | None, Record | None, str]] = []
    left_a: list[int] = []
    for r in recs_a:
        m = b_by_key.get(_key(r))
        if m is not None and id(m) not in used_b:
            used_b.add(id(m))
            pairs.append((r, m, ""))
        else:
            left_a.append(len(pairs))
            pairs.append((r, None, ""))
    # loose pairing of the leftovers: kind + workload + format, only when unambiguous on both sides
    rest_b = [r for r in recs_b if id(r) not in used_b]
    cand_a: dict[str, list[int]] = {}
    for i in left_a:
        cand_a.setdefault(_loose_key(pairs[i][0]), []).append(i)
    cand_b: dict[str, list[Record]] = {}
    for r in rest_b:
        cand_b.setdefault(_loose_key(r), []).append(r)
    for k, idx in cand_a.items():
        if len(idx) == 1 and len(cand_b.get(k, [])) == 1:
            ra, rb = pairs[idx[0]][0], cand_b[k][0]
            pairs[idx[0]] = (ra, rb, _differs(ra, rb))
            used_b.add(id(rb))
    pairs += [(None, r, "") for r in recs_b if id(r) not in used_b]
    rows = [_row(pa, pb, min_noise, note) for pa, pb, note in pairs]
    counts = {v: sum(1 for r in rows if r.verdict == v) for v in VERDICTS}
    matched = sum(1 for pa, pb, _ in pairs if pa is not None and pb is not None)
    matching = {"matched": matched, "only_in_a": sum(1 for _, pb, _ in pairs if pb is None),
                "only_in_b": sum(1 for pa, _, _ in pairs if pa is None),
                "records_a": len(a.records), "records_b": len(b.records),
                "set_aside_a": dup_a, "set_aside_b": dup_b}
    return Comparison(rows, warnings, dev_a, dev_b, a.files[0] if a.files else "A", b.files[0] if b.files else "B",
                      min_noise, {k: n for k, n in counts.items() if n}, matching)


def matching_line(c: Comparison) -> str:
    """How the records were matched, in one line: ``"matched 4 cases; unmatched: 116 only in A, 232 only in B;
    B: 243 records, 7 set aside as repeats of a case (kept: the re-measured one, else the most samples)"``."""
    m = c.matching
    if not m:
        return ""
    line = (f"matched {m['matched']} case(s); unmatched: {m['only_in_a']} only in A, {m['only_in_b']} only in B "
            "(matched on kind, workload (M, N, K and scale layout for a GEMM), format, mode and backend)")
    for side in ("a", "b"):
        if m[f"set_aside_{side}"]:
            line += (f"; {side.upper()}: {m[f'records_{side}']} records, {m[f'set_aside_{side}']} set aside as repeats "
                     "of a case (kept per case: an ok record, the re-measured one (search.phase remeasure), else the "
                     "one with the most samples)")
    return line


def compare_text(c: Comparison, *, width: int | None = None, all_rows: bool = True) -> str:
    """The comparison as a plain-text table: warnings first (``warning: ...``), then one row per case, then a summary
    line per verdict and the rule.

    Args:
        width: a terminal's width: the table is fitted into it and the lines around it wrap at spaces
            (:mod:`truepeak.report.fit`); None (output that is not a terminal): the natural width, every line whole.
        all_rows: False leaves out the cases whose verdict is ``same``.
    """
    import io

    from rich.console import Console

    from truepeak.report.fit import Column, print_line, print_table

    buf = io.StringIO()
    con = Console(file=buf, width=width or 80, color_system=None, highlight=False, force_terminal=width is not None)
    for w in c.warnings:
        print_line(con, f"warning: {w}")
    print_line(con, f"A: {c.file_a} ({', '.join(c.device_a)})")
    print_line(con, f"B: {c.file_b} ({', '.join(c.device_b)})")
    cols = [Column("kind"), Column("case", wrap=True), Column("format", wrap=True), Column("mode")]
    cols += [Column(h, numeric=True) for h in ("time A", "time B", "B/A", "change", "noise")]
    cols += [Column("verdict"), Column("note", wrap=True, drop=True)]
    rows = []
    for r in c.rows:
        if not all_rows and r.verdict == "same":
            continue
        fmt = (f"{r.format} ({SCALING_LABELS.get(r.scaling, r.scaling)})" if r.scaling else r.format) or "-"
        rows.append([r.kind, r.case, fmt, r.mode or "-", fmt_time(r.time_a_s), fmt_time(r.time_b_s),
                     f"{r.ratio:.3f}" if r.ratio else "-", fmt_pct(r.change) if r.change is not None else "-",
                     fmt_pct(r.threshold) if r.threshold is not None else "-", r.verdict, r.note])
    print_table(con, cols, rows)
    print_line(con, ", ".join(f"{n} {v}" for v, n in c.counts.items()) or "no cases")
    if c.matching:
        print_line(con, matching_line(c))
    print_line(con, f"B/A = throughput of B over A (= time A / time B; > 1: B is faster). same: |change| <= noise, "
                    f"where noise = max(min(IQR/median of A, of B), {fmt_pct(c.min_noise)}) (nvbench's compare rule, "
                    "with the IQR and a run-to-run floor).")
    return buf.getvalue()


def compare_json(c: Comparison) -> str:
    """The comparison as JSON (SI seconds, fractions)."""
    return json.dumps(c.to_dict(), indent=1, ensure_ascii=False)


__all__ = ["MIN_NOISE", "VERDICTS", "PROVENANCE_FIELDS", "match_key", "representatives", "matching_line",
          "Row", "Comparison", "compare", "compare_text", "compare_json", "verdict",
           "noise"]
