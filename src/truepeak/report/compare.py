"""``truepeak compare A.jsonl B.jsonl``: match the records of two runs and say, case by case, whether B is faster,
slower, or the same within the measured noise.

Matching: two records are the same case when their kind, workload, backend, format and mode are equal (the record
key of :func:`truepeak.bench.records.record_key`, recomputed so that files from any command match). Cases left over
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

from truepeak.bench.records import record_key
from truepeak.report.export import record_time
from truepeak.report.load import Results, device_name, label
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


@dataclass
class Comparison:
    """The result of :func:`compare`: ``rows`` in A's order then B-only ones, ``warnings`` (different devices, unusable
    lines), the device names and files of each side, ``min_noise``, and ``counts`` per verdict."""

    rows: list[Row]
    warnings: list[str]
    device_a: list[str]
    device_b: list[str]
    file_a: str
    file_b: str
    min_noise: float
    counts: dict[str, int] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {"file_a": self.file_a, "file_b": self.file_b, "device_a": self.device_a, "device_b": self.device_b,
                "warnings": self.warnings, "min_noise": self.min_noise, "counts": self.counts,
                "rows": [asdict(r) for r in self.rows]}


def noise(rec: dict) -> float | None:
    """IQR / median of a record's samples (``steady_rel_iqr``, else ``rel_iqr``, else from ``iqr_s`` and the time,
    else computed from ``samples_s``, as collective records carry), or None when the record has none."""
    m = rec.get("measurement") if isinstance(rec.get("measurement"), dict) else {}
    for name in ("steady_rel_iqr", "rel_iqr"):
        v = m.get(name)
        if isinstance(v, (int, float)) and not isinstance(v, bool) and v >= 0:
            return float(v)
    iqr, t = m.get("iqr_s"), record_time(rec)
    if isinstance(iqr, (int, float)) and t:
        return float(iqr) / t
    samples = m.get("samples_s")
    if isinstance(samples, list) and len(samples) >= 4 and all(isinstance(x, (int, float)) for x in samples):
        # quartiles by linear interpolation (numpy's default, as truepeak.bench.measurement uses)
        q1, med, q3 = statistics.quantiles([float(x) for x in samples], n=4, method="inclusive")
        return (q3 - q1) / med if med > 0 else None
    return None


def _key(rec: dict) -> str:
    return record_key(str(rec.get("kind")), rec.get("workload"), rec.get("backend"), rec.get("format"),
                      rec.get("mode"))


def _loose_key(rec: dict) -> str:
    w = rec.get("workload")
    if isinstance(w, dict):  # a run's workload dict holds derived byte counts that differ by device; keep identity
        w = {k: v for k, v in w.items() if k not in ("min_bytes", "intensity", "flop", "origin")}
    return record_key(str(rec.get("kind")), w, None, rec.get("format"), None)


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


def _row(a: dict | None, b: dict | None, min_noise: float, note: str = "") -> Row:
    rec = a if a is not None else b
    assert rec is not None
    case = label(rec) + (f" [{rec.get('backend')}]" if rec.get("backend") else "")
    common = dict(kind=str(rec.get("kind")), case=case, format=rec.get("format"), mode=rec.get("mode"))
    if a is None or b is None:
        return Row(**common, time_a_s=None, time_b_s=None, ratio=None, change=None, noise_a=None, noise_b=None,
                   threshold=None, verdict="only in A" if b is None else "only in B", note=note)
    ok_a, ok_b = a.get("status") == "ok", b.get("status") == "ok"
    ta = record_time(a) if ok_a else None
    tb = record_time(b) if ok_b else None
    na, nb = noise(a), noise(b)
    if not ok_a and not ok_b and (a.get("status"), a.get("reason")) == (b.get("status"), b.get("reason")):
        return Row(**common, time_a_s=None, time_b_s=None, ratio=None, change=None, noise_a=na, noise_b=nb,
                   threshold=None, verdict="not ok",
                   note="; ".join(p for p in (note, f"{a.get('status')} in both: {a.get('reason')}") if p))
    if not (ok_a and ok_b):
        why = "; ".join(f"{side} {r.get('status')}: {r.get('reason')}" for side, r, ok in (("A", a, ok_a),
                                                                                          ("B", b, ok_b)) if not ok)
        return Row(**common, time_a_s=ta, time_b_s=tb, ratio=None, change=None, noise_a=na, noise_b=nb,
                   threshold=None, verdict="not ok", note="; ".join(p for p in (note, why) if p))
    v, change, threshold = verdict(ta, tb, na, nb, min_noise)
    return Row(**common, time_a_s=ta, time_b_s=tb, ratio=ta / tb if ta and tb else None, change=change,
               noise_a=na, noise_b=nb, threshold=threshold, verdict=v, note=note)


def _differs(a: dict, b: dict) -> str:
    parts = [name for name in ("backend", "mode") if a.get(name) != b.get(name)]
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
    dev_a = list(dict.fromkeys(device_name(r) for r in a.records))
    dev_b = list(dict.fromkeys(device_name(r) for r in b.records))
    if dev_a != dev_b:
        warnings.append(f"the runs were measured on different devices (A: {', '.join(dev_a)}; B: {', '.join(dev_b)}): "
                        "the ratios compare devices, not only code")
    for side, res in (("A", a), ("B", b)):
        if res.problems:
            warnings.append(f"{side}: {len(res.problems)} line(s) not used: "
                            + "; ".join(str(p) for p in res.problems[:3])
                            + (" ..." if len(res.problems) > 3 else ""))
    b_by_key: dict[str, dict] = {}
    for r in b.records:
        b_by_key.setdefault(_key(r), r)
    used_b: set[int] = set()
    pairs: list[tuple[dict | None, dict | None, str]] = []
    left_a: list[int] = []
    for r in a.records:
        m = b_by_key.get(_key(r))
        if m is not None and id(m) not in used_b:
            used_b.add(id(m))
            pairs.append((r, m, ""))
        else:
            left_a.append(len(pairs))
            pairs.append((r, None, ""))
    # loose pairing of the leftovers: kind + workload + format, only when unambiguous on both sides
    rest_b = [r for r in b.records if id(r) not in used_b]
    cand_a: dict[str, list[int]] = {}
    for i in left_a:
        cand_a.setdefault(_loose_key(pairs[i][0]), []).append(i)
    cand_b: dict[str, list[dict]] = {}
    for r in rest_b:
        cand_b.setdefault(_loose_key(r), []).append(r)
    for k, idx in cand_a.items():
        if len(idx) == 1 and len(cand_b.get(k, [])) == 1:
            ra, rb = pairs[idx[0]][0], cand_b[k][0]
            pairs[idx[0]] = (ra, rb, _differs(ra, rb))
            used_b.add(id(rb))
    pairs += [(None, r, "") for r in b.records if id(r) not in used_b]
    rows = [_row(pa, pb, min_noise, note) for pa, pb, note in pairs]
    counts = {v: sum(1 for r in rows if r.verdict == v) for v in VERDICTS}
    return Comparison(rows, warnings, dev_a, dev_b, a.files[0] if a.files else "A", b.files[0] if b.files else "B",
                      min_noise, {k: n for k, n in counts.items() if n})


def compare_text(c: Comparison, *, width: int = 200, all_rows: bool = True) -> str:
    """The comparison as a plain-text table: warnings first (``warning: ...``), then one row per case, then a summary
    line per verdict and the rule."""
    from rich.console import Console
    from rich.table import Table
    import io

    buf = io.StringIO()
    con = Console(file=buf, width=width, color_system=None, highlight=False, force_terminal=False)
    for w in c.warnings:
        con.print(f"warning: {w}", markup=False, soft_wrap=True)
    con.print(f"A: {c.file_a} ({', '.join(c.device_a)})\nB: {c.file_b} ({', '.join(c.device_b)})", markup=False,
              soft_wrap=True)
    t = Table(header_style="bold")
    for h, right in (("kind", False), ("case", False), ("format", False), ("mode", False), ("time A", True),
                     ("time B", True), ("B/A", True), ("change", True), ("noise", True), ("verdict", False),
                     ("note", False)):
        t.add_column(h, justify="right" if right else "left", overflow="fold")
    for r in c.rows:
        if not all_rows and r.verdict == "same":
            continue
        t.add_row(r.kind, r.case, r.format or "-", r.mode or "-", fmt_time(r.time_a_s), fmt_time(r.time_b_s),
                  f"{r.ratio:.3f}" if r.ratio else "-", fmt_pct(r.change) if r.change is not None else "-",
                  fmt_pct(r.threshold) if r.threshold is not None else "-", r.verdict, r.note)
    con.print(t)
    con.print(", ".join(f"{n} {v}" for v, n in c.counts.items()) or "no cases", markup=False, soft_wrap=True)
    con.print(f"B/A = throughput of B over A (= time A / time B; > 1: B is faster). same: |change| <= noise, where "
              f"noise = max(min(IQR/median of A, of B), {fmt_pct(c.min_noise)}) (nvbench's compare rule, with the "
              "IQR and a run-to-run floor).", markup=False, soft_wrap=True)
    return buf.getvalue()


def compare_json(c: Comparison) -> str:
    """The comparison as JSON (SI seconds, fractions)."""
    return json.dumps(c.to_dict(), indent=1, ensure_ascii=False)


__all__ = ["MIN_NOISE", "VERDICTS", "Row", "Comparison", "compare", "compare_text", "compare_json", "verdict",
           "noise"]
