"""Records as tables of every kind, and as CSV.

Two jobs, both rendered from records alone (never measuring):

- :func:`kind_table`: one formatted table per record kind, the cells that the HTML and Markdown reports show, so the
  two cannot disagree. GEMM and copy records use the table of ``truepeak run`` (:func:`truepeak.report.table.table_rows`);
  ``moe_experts``, ``collective`` and ``collective_fit`` records have their own columns; a kind this truepeak does not
  know gets a plain table of its workload label, backend, format, mode, time, status and every scalar field of its
  ``derived`` (so a new kind never breaks a report). Each table's footer states the units that apply to it
  (:func:`units_footer`: collectives never get the GEMM line about TFLOPS and the dense peak). Numbers are formatted by :mod:`truepeak.units`; a time column uses
  one unit chosen from the data (:func:`truepeak.report.table.time_unit`).
- :func:`csv_text`: one row per record, for spreadsheets and pandas. SI values as the records hold them (seconds, B/s,
  FLOP/s, fractions; full precision via ``repr``), column names carry the unit (``time_s``, ``flop_per_s``), followed
  by every scalar field of ``workload`` (``workload.m``, ...) and ``derived`` (``derived.pct_roofline``, ...) that
  any record has, in first-seen order. Lists and dicts are written as JSON. A first column ``source`` names the file
  of each record. (Model: hyperfine's CSV exporter, sharkdp/hyperfine ``src/export/csv.rs``: SI seconds in every
  column.)

Pure Python: imports no numpy or matplotlib.
"""

from __future__ import annotations

import csv
import io
import json
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from truepeak.report.load import Results, device_name, field, label, number
from truepeak.report.table import _note, columns as gemm_columns, format_label, scaling_of, table_rows, time_unit
from truepeak.units import DASH, UNITS_FOOTER, fmt_bandwidth, fmt_pct, fmt_rate, fmt_size, fmt_time_in

#: Kinds rendered by the ``truepeak run`` table.
RUN_KINDS = ("gemm", "membw")


@dataclass
class KindTable:
    """A formatted table: ``headers`` and ``rows`` of strings, ``numeric`` (right-aligned) flags per column, and a
    ``footer`` stating the units."""

    kind: str
    headers: list[str]
    rows: list[list[str]]
    numeric: list[bool]
    footer: str


# -- per-kind columns --------------------------------------------------------------------------------------------------
Cell = Callable[[dict, float], str]


def _pct(*names: str) -> Cell:
    return lambda r, _s: fmt_pct(number(r, *names), sign=False) if r.get("status") == "ok" else DASH


def _rate(r: dict, _s: float) -> str:
    return fmt_rate(number(r, "flop_per_s")) if r.get("status") == "ok" else DASH


def _bw(*names: str) -> Cell:
    return lambda r, _s: fmt_bandwidth(number(r, *names)) if r.get("status") == "ok" else DASH


def _time(r: dict, scale: float) -> str:
    return fmt_time_in(record_time(r), scale) if r.get("status") == "ok" else DASH


def _text(name: str) -> Cell:
    def get(r: dict, _s: float) -> str:
        v = field(r, name)
        return DASH if v is None else str(v)
    return get


def _top(name: str) -> Cell:
    return lambda r, _s: DASH if r.get(name) is None else str(r.get(name))


def _size(*names: str) -> Cell:
    return lambda r, _s: fmt_size(number(r, *names))


def _int(*names: str) -> Cell:
    def get(r: dict, _s: float) -> str:
        v = number(r, *names)
        return DASH if v is None else f"{v:.0f}"
    return get


def _num(*names: str) -> Cell:
    def get(r: dict, _s: float) -> str:
        v = number(r, *names)
        return DASH if v is None else f"{v:g}"
    return get


def _status(r: dict, _s: float) -> str:
    return str(r.get("status") or DASH)


def _note_cell(r: dict, _s: float) -> str:
    return _note(r)


def _ratio_us(*names: str) -> Cell:
    def get(r: dict, _s: float) -> str:
        v = number(r, *names)
        return DASH if v is None else f"{v * 1e6:.4g}"
    return get


#: (header, numeric, cell) per kind. ``{time}`` in a header is replaced by the column's unit.
SPECS: dict[str, list[tuple[str, bool, Cell]]] = {
    "moe_experts": [
        ("model", False, _text("model")), ("layout", False, _text("layout")), ("routing", False, _text("routing")),
        ("tokens/expert", True, _num("tokens_per_expert")), ("format", False, _top("format")),
        ("backend", False, _top("backend")), ("mode", False, _top("mode")), ("time ({time})", True, _time),
        ("TFLOPS", True, _rate), ("GB/s", True, _bw("bytes_per_s")),
        ("% read BW", True, _pct("pct_read_bandwidth")), ("status", False, _status), ("note", False, _note_cell),
    ],
    "collective": [
        ("op", False, _text("op")), ("size", True, _size("bytes", "nbytes", "size_bytes")),
        ("ranks", True, _int("n_ranks", "world_size", "nranks")), ("dtype", False, _text("dtype")),
        ("mode", False, _top("mode")), ("time ({time})", True, _time),
        ("algbw GB/s", True, _bw("algbw_B_per_s", "algbw_bytes_per_s")),
        ("busbw GB/s", True, _bw("busbw_B_per_s", "busbw_bytes_per_s")),
        ("#wrong", True, _int("wrong")), ("status", False, _status), ("note", False, _note_cell),
    ],
    "collective_fit": [
        ("op", False, _text("op")), ("mode", False, _top("mode")),
        ("ranks", True, _int("n_ranks", "world_size", "nranks")), ("dtype", False, _text("dtype")),
        ("α (µs)", True, _ratio_us("alpha_s", "alpha")),
        ("busbw GB/s", True, _bw("busbw_B_per_s", "bandwidth_B_per_s", "beta_B_per_s")),
        ("sizes", False, lambda r, _s: f"{fmt_size(number(r, 'min_bytes'))} to {fmt_size(number(r, 'max_bytes'))}"),
        ("points", True, _int("points")),
        ("max rel. residual", True, _pct("max_rel_residual")),
        ("status", False, _status), ("note", False, _note_cell),
    ],
}


def record_time(rec: Mapping[str, Any]) -> float | None:
    """A record's time per call in seconds: ``time_s``, else its measurement's steady median or median."""
    return number(rec, "time_s", "steady_median_s", "median_s")


def _generic_spec(records: Sequence[dict]) -> list[tuple[str, bool, Cell]]:
    names: list[str] = []
    for r in records:
        d = r.get("derived")
        if isinstance(d, Mapping):
            names += [k for k, v in d.items() if k not in names and _is_scalar(v) and v is not None]
    spec: list[tuple[str, bool, Cell]] = [
        ("workload", False, lambda r, _s: label(r)), ("backend", False, _top("backend")),
        ("format", False, _top("format")), ("mode", False, _top("mode")), ("time ({time})", True, _time)]
    for name in names:
        spec.append((name, True, _derived_cell(name)))
    spec += [("status", False, _status), ("note", False, _note_cell)]
    return spec


def _derived_cell(name: str) -> Cell:
    def get(r: dict, _s: float) -> str:
        v = (r.get("derived") or {}).get(name)
        if v is None:
            return DASH
        if isinstance(v, float):
            return f"{v:.4g}"
        return str(v)
    return get


def kind_table(kind: str, records: Sequence[dict]) -> KindTable:
    """The formatted table of the records of one kind (see the module docstring for the columns)."""
    if kind in RUN_KINDS:
        rows, meta = table_rows(records)
        cols = gemm_columns(meta)
        from truepeak.report.table import NUMERIC
        return KindTable(kind, [h for _, h in cols], [[row[c] for c, _ in cols] for row in rows],
                         [c in NUMERIC for c, _ in cols], meta["footer"])
    spec = SPECS.get(kind) or _generic_spec(records)
    unit, scale = time_unit(record_time(r) for r in records if r.get("status") == "ok")
    shown = "µs" if unit == "us" else unit
    headers = [h.replace("{time}", shown) for h, _, _ in spec]
    rows = [[cell(r, scale) for _, _, cell in spec] for r in records]
    modes = sorted({str(r.get("mode")) for r in records if r.get("mode")})
    footer = units_footer(kind, unit) + (f"; mode: {', '.join(modes)}" if modes else "")
    return KindTable(kind, headers, rows, [n for _, n, _ in spec], footer)


#: The units line of each table kind that is not a GEMM/copy table (those state :data:`truepeak.units.UNITS_FOOTER`:
#: TFLOPS and efficiency against the DENSE peak). Collectives have no FLOP and no peak: their line states nccl-tests'
#: bandwidths (NVIDIA/nccl-tests doc/PERFORMANCE.md: algbw = S / t, busbw = algbw x the op's bus factor, S the total
#: size: the whole all_reduce buffer, the gathered output of all_gather, the input of reduce_scatter).
KIND_FOOTERS: dict[str, str] = {
    "collective": ("algbw and busbw in GB/s = 1e9 B/s (decimal); size = S, nccl-tests' total size in bytes "
                   "(KiB/MiB/GiB = 2^10/2^20/2^30 B); time per call in {time}; "
                   "algbw = S / time, busbw = algbw x the op's bus factor (nccl-tests' definitions)"),
    "collective_fit": ("α (latency) in µs = 1e-6 s; busbw in GB/s = 1e9 B/s (decimal); sizes = S, nccl-tests' total "
                       "size in bytes (KiB/MiB/GiB = 2^10/2^20/2^30 B); fit: time = α + S x bus factor / busbw; "
                       "max rel. residual = the largest |fit - measured| / measured over the points"),
    "moe_experts": ("TFLOPS = 1e12 FLOP/s (TOPS for int8), GB/s = 1e9 B/s (decimal); % read BW = of the read "
                    "bandwidth measured in the same run (the memory roofline of streaming the experts' weights)"),
}
#: The units line of a kind this truepeak has no table for (its derived fields are shown as the records hold them).
GENERIC_FOOTER = ("time per call in {time}; the other columns are the records' derived "
                  "fields as they hold them (SI: FLOP/s, B/s, fractions)")


#: A time column's unit as a footer states it.
TIME_UNITS = {"us": "µs (1e-6 s)", "ms": "ms (1e-3 s)", "s": "s"}


def units_footer(kind: str, time_unit: str = "us") -> str:
    """The units line that applies to a table of ``kind`` (without the mode): GEMM and copy tables
    :data:`truepeak.units.UNITS_FOOTER` (TFLOPS, efficiency against the DENSE peak), collectives and their fits
    nccl-tests' algbw/busbw in GB/s, S and µs (:data:`KIND_FOOTERS`), other kinds :data:`GENERIC_FOOTER`; ``time_unit``
    (``"us"``, ``"ms"``, ``"s"``: the table's time column, :func:`truepeak.report.table.time_unit`) is named in it."""
    if kind in RUN_KINDS:
        return UNITS_FOOTER
    return KIND_FOOTERS.get(kind, GENERIC_FOOTER).replace("{time}", TIME_UNITS.get(time_unit, time_unit))


# -- CSV ---------------------------------------------------------------------------------------------------------------
#: The fixed leading columns of the CSV: (column, getter).
CSV_FIXED: tuple[tuple[str, Callable[[dict], Any]], ...] = (
    ("kind", lambda r: r.get("kind")),
    ("status", lambda r: r.get("status")),
    ("reason", lambda r: r.get("reason")),
    ("device", device_name),
    ("workload", label),
    ("backend", lambda r: r.get("backend")),
    ("format", lambda r: r.get("format")),
    ("mode", lambda r: r.get("mode")),
    ("time_s", record_time),
    ("q1_s", lambda r: (r.get("measurement") or {}).get("q1_s")),
    ("q3_s", lambda r: (r.get("measurement") or {}).get("q3_s")),
    ("rel_iqr", lambda r: (r.get("measurement") or {}).get("steady_rel_iqr",
                                                             (r.get("measurement") or {}).get("rel_iqr"))),
    ("n_samples", lambda r: (r.get("measurement") or {}).get("n_samples")),
    ("sm_clock_median_hz", lambda r: ((r.get("measurement") or {}).get("telemetry") or {}).get("sm_clock_median_hz")),
    ("power_median_w", lambda r: ((r.get("measurement") or {}).get("telemetry") or {}).get("power_median_w")),
    ("warnings", lambda r: " | ".join(str(w) for w in r.get("warnings") or []) or None),
    ("schema_version", lambda r: r.get("schema_version")),
    ("timestamp", lambda r: r.get("timestamp")),
    ("key", lambda r: r.get("key")),
)


def _is_scalar(v: Any) -> bool:
    return v is None or isinstance(v, (str, int, float, bool))


def _csv_value(v: Any) -> str:
    if v is None:
        return ""
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, float):
        return repr(v) if math.isfinite(v) else ""
    if isinstance(v, (dict, list)):
        return json.dumps(v, sort_keys=True, separators=(",", ":"))
    return str(v)


def csv_columns(records: Sequence[dict]) -> list[str]:
    """``source``, the fixed columns, then ``workload.*`` and ``derived.*`` of every field any record has."""
    extra: dict[str, None] = {}
    for place in ("workload", "derived"):
        for r in records:
            holder = r.get(place)
            if isinstance(holder, Mapping):
                for k in holder:
                    extra.setdefault(f"{place}.{k}", None)
    return ["source", *(c for c, _ in CSV_FIXED), *extra]


def csv_text(data: Results | Sequence[dict], sources: Sequence[str] | None = None) -> str:
    """The records as CSV text (``\\n`` line ends, a header row first). ``sources`` (default the Results' files, or
    empty) fills the ``source`` column."""
    if isinstance(data, Results):
        records, sources = data.records, data.sources
    else:
        records = list(data)
    sources = list(sources) if sources is not None else [""] * len(records)
    cols = csv_columns(records)
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(cols)
    for rec, src in zip(records, sources):
        row = [src]
        row += [_csv_value(get(rec)) for _, get in CSV_FIXED]
        for col in cols[len(CSV_FIXED) + 1:]:
            place, _, name = col.partition(".")
            holder = rec.get(place)
            row.append(_csv_value(holder.get(name) if isinstance(holder, Mapping) else None))
        w.writerow(row)
    return buf.getvalue()


# -- peaks per format --------------------------------------------------------------------------------------------------
def catalog_accelerator(key: str | None) -> Any:
    """The catalog :class:`~truepeak.hardware.catalog.Accelerator` of ``key`` (``"h200-sxm"``), or None."""
    if not key:
        return None
    try:
        from truepeak.hardware.lookup import get_accelerator

        return get_accelerator(key)
    except Exception:
        return None


def _catalog_sparse(acc: Any, fmt: str | None) -> tuple[float | None, bool]:
    """The 2:4-sparse spec rate of ``fmt`` (FLOP/s) and whether the vendor publishes it (else it is 2 x dense)."""
    if acc is None or not fmt:
        return None, False
    try:
        p = acc.peak(fmt)
    except Exception:
        return None, False
    return p.implied_sparse, p.sparse is not None


def _remeasured(rec: Mapping[str, Any]) -> bool:
    """Whether a record is a ``truepeak peak`` re-measurement (``search.phase == "remeasure"``)."""
    search = rec.get("search")
    return isinstance(search, Mapping) and search.get("phase") == "remeasure"


def peak_rows(records: Sequence[dict], accelerator: Any = None) -> list[dict[str, Any]]:
    """Spec against measured peaks, per (format, scale layout, mode) of the GEMM records of ONE device, in first-seen
    order.

    For each (format, scale layout, mode): the best ``ok`` record by FLOP/s. A ``truepeak peak`` search
    (:mod:`truepeak.bench.peak`) writes one record per shape tried; when re-measured records (``search.phase ==
    "remeasure"``: the top shapes timed again with longer budgets) are present, only they compete, since the maximum
    over every first-pass trial is biased upward by noise (the winner's curse; peak.py step 3) and is not what
    ``truepeak peak`` reports. Returns dicts with ``format``, ``scaling`` (``workload.scaling`` or None), ``label``
    (the format as tables show it: ``fp8_e4m3 (per-row)``; :func:`truepeak.report.table.format_label`), ``mode``,
    ``remeasured`` (the best is a re-measured record), ``dense`` (the dense
    spec peak the record was measured against, FLOP/s), ``sparse`` (the catalog's 2:4-sparse rate, display only;
    ``sparse_published`` False when it is 2 x dense because the vendor prints none), ``measured`` (FLOP/s),
    ``pct_dense``, ``clock_hz`` (median SM clock of that record), ``at_clock`` (the dense peak at that clock:
    ``measured / pct_at_clock`` = FLOP/clk/SM x SMs x clock), ``pct_at_clock``, ``shape``, ``estimated`` (the peak is an
    estimate, as on a CPU), ``n`` (records of that format, layout and mode), and ``reason`` for a format with no ok
    record
    (its first skipped or failed reason).
    """
    order: list[tuple[str, str, str]] = []  # (format, scaling or "", mode or "")
    best: dict[tuple[str, str, str], dict] = {}
    count: dict[tuple[str, str, str], int] = {}
    reasons: dict[tuple[str, str, str], str] = {}
    labels: dict[tuple[str, str, str], str] = {}
    for rec in records:
        if rec.get("kind") != "gemm":
            continue
        key = (str(rec.get("format")), scaling_of(rec) or "", str(rec.get("mode") or ""))
        if key not in count:
            order.append(key)
            count[key] = 0
            labels[key] = format_label(rec)
        count[key] += 1
        rate = number(rec, "flop_per_s")
        if rec.get("status") != "ok" or rate is None:
            reasons.setdefault(key, f"{rec.get('status')}: {rec.get('reason')}")
            continue
        if key not in best:
            best[key] = rec
            continue
        held, new = _remeasured(best[key]), _remeasured(rec)
        if (new and not held) or (new == held and rate > number(best[key], "flop_per_s")):
            best[key] = rec
    out = []
    for key in order:
        fmt, scaling, mode = key
        rec = best.get(key)
        sparse, published = _catalog_sparse(accelerator, fmt)
        row: dict[str, Any] = {"format": fmt, "scaling": scaling or None, "label": labels[key], "mode": mode,
                               "remeasured": rec is not None and _remeasured(rec), "n": count[key], "sparse": sparse,
                               "sparse_published": published, "dense": None, "measured": None, "pct_dense": None,
                               "clock_hz": None, "at_clock": None, "pct_at_clock": None, "shape": None,
                               "estimated": False, "reason": None if rec is not None else reasons.get(key)}
        if rec is None:
            try:
                row["dense"] = accelerator.dense_flops(fmt) if accelerator is not None else None
            except Exception:
                pass
            out.append(row)
            continue
        d = rec.get("derived") or {}
        rate = number(rec, "flop_per_s")
        at = number(rec, "pct_at_clock")
        row.update(dense=number(rec, "dense_peak_flop_per_s"), measured=rate, pct_dense=number(rec, "pct_dense"),
                   clock_hz=number(rec, "sm_clock_hz"), pct_at_clock=at,
                   at_clock=rate / at if rate and at else None, shape=label(rec),
                   estimated=bool(d.get("peak_estimated")))
        out.append(row)
    return out


# -- warnings ----------------------------------------------------------------------------------------------------------
@dataclass
class ReportWarning:
    """One warning of a report: a ``category`` (input, devices, throttling, noise, cache, failed, skipped, inputs,
    record), a one-line ``text``, and the ``items`` it is about (one line each)."""

    category: str
    text: str
    items: list[str]


def _case(rec: Mapping[str, Any]) -> str:
    parts = [str(rec.get("kind") or "?"), label(rec)]
    if rec.get("format"):
        parts.append(format_label(rec))
    if rec.get("mode"):
        parts.append(str(rec["mode"]))
    return " ".join(parts)


def report_warnings(records: Sequence[dict], problems: Sequence[Any] = ()) -> list[ReportWarning]:
    """What a reader must know before trusting the numbers, from the records alone.

    - input: lines of the results files that could not be used (torn, not JSON, another schema version; with the
      versions understood), empty files;
    - devices: records of more than one device;
    - throttling: timed records whose SM clock median fell below 90 % of the maximum (measurement code ``low_clock``),
      with the throttle reasons NVML gave;
    - noise: IQR/median >= 10 % (``noisy``) or 25 % (``very_noisy``), and a first sample that was excluded
      (``warmup_in_window``);
    - cache: working sets that may have been served from cache (rotation capped below 2x the cache, a copy under 2x
      the cache, or any record warning that says so);
    - inputs: non-random inputs (not a peak);
    - failed and skipped cases, each with its reason (skipped ones grouped by reason);
    - record: other warnings a record carries (a result above its roofline, ...).
    """
    out: list[ReportWarning] = []
    if problems:
        from truepeak.report.load import UNDERSTOOD_SCHEMAS
        other = any("schema" in str(getattr(p, "why", p)) for p in problems)
        text = f"{len(problems)} line(s) or file(s) could not be used and are not shown"
        if other:
            text += f" (this truepeak understands record schema version {', '.join(map(str, UNDERSTOOD_SCHEMAS))})"
        out.append(ReportWarning("input", text, [str(p) for p in problems]))
    devices = list(dict.fromkeys(device_name(r) for r in records))
    if len(devices) > 1:
        out.append(ReportWarning("devices", f"records of {len(devices)} different devices: compare numbers across "
                                            "devices with care", devices))
    throttled, noisy, warm, cache, inputs, other = [], [], [], [], [], []
    failed, skipped = [], {}
    for rec in records:
        m = rec.get("measurement") if isinstance(rec.get("measurement"), dict) else {}
        codes = list(m.get("warning_codes") or [])
        own = list(m.get("warnings") or [])
        by_code = dict(zip(codes, own))
        case = _case(rec)
        if "low_clock" in by_code:
            throttled.append(f"{case}: {by_code['low_clock']}")
        for code in ("very_noisy", "noisy"):
            if code in by_code:
                noisy.append(f"{case}: {by_code[code]}")
        if "warmup_in_window" in by_code:
            warm.append(f"{case}: {by_code['warmup_in_window']}")
        if "inputs_not_random" in by_code:
            inputs.append(f"{case}: {by_code['inputs_not_random']}")
        rot = rec.get("rotation") if isinstance(rec.get("rotation"), dict) else {}
        if rot.get("capped"):
            cache.append(f"{case}: rotation capped: {rot.get('note')}")
        note = (rec.get("derived") or {}).get("memory_note") if isinstance(rec.get("derived"), dict) else None
        if note:
            cache.append(f"{case}: {note}")
        for w in rec.get("warnings") or []:
            w = str(w)
            if w in own:
                continue
            if "cache" in w.lower() or "L2" in w:
                cache.append(f"{case}: {w}")
            else:
                other.append(f"{case}: {w}")
        status = rec.get("status")
        reason = str(rec.get("reason") or "")
        if status == "failed":
            failed.append(f"{case}: {reason}")
        elif status == "skipped":
            skipped.setdefault(reason, []).append(case)
        elif reason and ("cache" in reason.lower()):
            cache.append(f"{case}: {reason}")
    if throttled:
        out.append(ReportWarning("throttling", f"{len(throttled)} record(s) ran below 90 % of the maximum SM clock; "
                                               "their results hold at the measured clock (see % of peak at clock)",
                                 throttled))
    if noisy:
        out.append(ReportWarning("noise", f"{len(noisy)} record(s) are noisy (IQR/median >= 10 %): treat their "
                                          "medians as approximate", noisy))
    if warm:
        out.append(ReportWarning("noise", f"{len(warm)} record(s) had a warm-up sample inside the timed window "
                                          "(excluded from the steady median)", warm))
    if cache:
        out.append(ReportWarning("cache", f"{len(cache)} working set(s) may have been served from cache, not "
                                          "memory: such numbers read too high", cache))
    if inputs:
        out.append(ReportWarning("inputs", f"{len(inputs)} record(s) used non-random inputs: not peaks", inputs))
    if failed:
        out.append(ReportWarning("failed", f"{len(failed)} case(s) failed", failed))
    if skipped:
        n = sum(len(v) for v in skipped.values())
        out.append(ReportWarning("skipped", f"{n} case(s) skipped", [
            f"{reason or 'no reason given'}: {', '.join(cases) if len(cases) <= 3 else f'{len(cases)} cases'}"
            for reason, cases in skipped.items()]))
    if other:
        out.append(ReportWarning("record", f"{len(other)} other warning(s) carried by records", other))
    return out


__all__ = ["KindTable", "units_footer", "KIND_FOOTERS", "GENERIC_FOOTER", "peak_rows", "report_warnings", "ReportWarning", "catalog_accelerator", "kind_table", "record_time", "csv_text", "csv_columns", "SPECS", "RUN_KINDS", "CSV_FIXED"]
