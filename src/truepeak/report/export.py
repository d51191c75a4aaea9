"""Records as tables of every kind, and as CSV.

Two jobs, both rendered from records alone (never measuring):

- :func:`kind_table`: one formatted table per record kind, the cells that the HTML and Markdown reports show, so the
  two cannot disagree. GEMM and copy records use the table of ``truepeak run`` (:func:`truepeak.report.table.table_rows`);
  ``moe_experts``, ``collective`` and ``collective_fit`` records have their own columns; a kind this truepeak does not
  know gets a plain table of its workload name, backend, format, mode, time, status and every scalar field of its
  ``derived`` (so a new kind never breaks a report). Each table's footer states the units that apply to it
  (:func:`units_footer`: collectives never get the GEMM line about TFLOPS and the dense peak). Numbers are formatted by :mod:`truepeak.units`; a time column uses
  one unit chosen from the data (:func:`truepeak.report.table.time_unit`).
- :func:`csv_text`: one row per record, for spreadsheets and pandas. SI values as the records hold them (seconds, B/s,
  FLOP/s, fractions; full precision via ``repr``), column names carry the unit (``time_s``, ``flop_per_s``), followed
  by every field of ``workload`` (``workload.m``, ...) and ``derived`` that any record has, in first-seen order. The
  derived columns keep the names of the exported format (schema 2: ``derived.pct_roofline`` holds
  ``roofline_fraction``, a fraction; :func:`csv_name`), so spreadsheets made from older exports keep working. Lists
  and dicts are written as JSON. A first column ``source`` names the file of each record. (Model: hyperfine's CSV
  exporter, sharkdp/hyperfine ``src/export/csv.rs``: SI seconds in every column.)

Pure Python: imports no numpy or matplotlib.
"""

from __future__ import annotations

import csv
import io
import json
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from truepeak.records import (V2_DERIVED_NAMES, CopyMetrics, GemmMetrics, MeasurementSummary, Record,
                              readable_schemas)
from truepeak.report.load import Results
from truepeak.report.table import columns as gemm_columns, format_label, note, scaling_of, table_rows, time_unit
from truepeak.units import DASH, UNITS_FOOTER, fmt_bandwidth, fmt_pct, fmt_rate, fmt_size, fmt_time_in

#: Kinds rendered by the ``truepeak run`` table (a peak search that could not run is one row of it).
RUN_KINDS = ("gemm", "membw", "peak_search")


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
Cell = Callable[[Record, float], str]
Get = Callable[[Record], Any]


def _derived(name: str) -> Get:
    """The record's derived metric ``name`` (None without derived metrics)."""
    return lambda r: getattr(r.derived, name) if r.derived is not None else None


def _ok(get: Get, fmt: Callable[[Any], str]) -> Cell:
    """``fmt`` of ``get(record)`` for an ok record, else a dash."""
    return lambda r, _s: fmt(get(r)) if r.ok else DASH


def _pct(get: Get) -> Cell:
    return _ok(get, lambda v: fmt_pct(v, sign=False))


def _time(r: Record, scale: float) -> str:
    return fmt_time_in(r.time_s, scale) if r.ok else DASH


def _shown(get: Get, fmt: Callable[[Any], str] = str) -> Cell:
    """``fmt`` of ``get(record)``, whatever the status, or a dash when it is None."""
    def cell(r: Record, _s: float) -> str:
        v = get(r)
        return DASH if v is None else fmt(v)
    return cell


def _text(get: Get) -> Cell:
    return _shown(get)


def _int(get: Get) -> Cell:
    return _shown(get, lambda v: f"{v:.0f}")


def _us(get: Get) -> Cell:
    return _shown(get, lambda v: f"{v * 1e6:.4g}")


def _status(r: Record, _s: float) -> str:
    return str(r.status)


def _note_cell(r: Record, _s: float) -> str:
    return note(r)


def _moe_note(r: Record, _s: float) -> str:
    """The note of a ``moe_experts`` record; for a ``moe tune`` candidate first its phase and the two kernels'
    configurations (``search: m16 n64 k128 w4 s4 g1 / m16 n128 k128 w8 s4``, gate/up then down), which tell the
    candidates of one point apart."""
    tune = getattr(r.workload, "triton_tune", None)
    rest = note(r)
    if not isinstance(tune, dict) or not all(isinstance(tune.get(k), dict) for k in ("gate_up", "down")):
        return rest
    from truepeak.report.tune import config_text

    try:
        what = f"{tune.get('phase', 'tune')}: {config_text(tune['gate_up'])} / {config_text(tune['down'])}"
    except KeyError:  # a configuration without the fields config_text reads
        return rest
    return what + (f"; {rest}" if rest else "")


def _sizes(r: Record, _s: float) -> str:
    return f"{fmt_size(r.workload.min_bytes)} to {fmt_size(r.workload.max_bytes)}"


_BACKEND, _FORMAT, _MODE = _text(lambda r: r.backend), _text(lambda r: r.format), _text(lambda r: r.mode)
_WRONG = _int(lambda r: r.correctness.wrong if r.correctness is not None else None)

#: (header, numeric, cell) per kind. ``{time}`` in a header is replaced by the column's unit.
SPECS: dict[str, list[tuple[str, bool, Cell]]] = {
    "moe_experts": [
        ("model", False, _text(lambda r: r.workload.model)), ("layout", False, _text(lambda r: r.workload.layout)),
        ("routing", False, _text(lambda r: r.workload.routing)),
        ("tokens/expert", True, lambda r, _s: f"{r.workload.tokens_per_expert:g}"), ("format", False, _FORMAT),
        ("backend", False, _BACKEND), ("mode", False, _MODE), ("time ({time})", True, _time),
        ("TFLOPS", True, _ok(_derived("flop_per_s"), fmt_rate)),
        ("GB/s", True, _ok(_derived("bytes_per_s"), fmt_bandwidth)),
        ("% read BW", True, _pct(_derived("read_bandwidth_fraction"))), ("status", False, _status),
        ("note", False, _moe_note),
    ],
    "collective": [
        ("op", False, _text(lambda r: r.workload.op)), ("size", True, lambda r, _s: fmt_size(r.workload.bytes)),
        ("ranks", True, _int(lambda r: r.workload.n_ranks)), ("dtype", False, _text(lambda r: r.workload.dtype)),
        ("mode", False, _MODE), ("time ({time})", True, _time),
        ("algbw GB/s", True, _ok(_derived("algbw_bytes_per_s"), fmt_bandwidth)),
        ("busbw GB/s", True, _ok(_derived("busbw_bytes_per_s"), fmt_bandwidth)),
        ("#wrong", True, _WRONG), ("status", False, _status), ("note", False, _note_cell),
    ],
    "collective_fit": [
        ("op", False, _text(lambda r: r.workload.op)), ("mode", False, _MODE),
        ("ranks", True, _int(lambda r: r.workload.n_ranks)), ("dtype", False, _text(lambda r: r.workload.dtype)),
        ("α (µs)", True, _us(_derived("alpha_s"))),
        ("busbw GB/s", True, _ok(_derived("busbw_bytes_per_s"), fmt_bandwidth)),
        ("sizes", False, _sizes), ("points", True, _int(_derived("points"))),
        ("max rel. residual", True, _pct(_derived("max_rel_residual"))),
        ("status", False, _status), ("note", False, _note_cell),
    ],
}


def _is_scalar(v: Any) -> bool:
    return v is None or isinstance(v, (str, int, float, bool))


def _generic_spec(records: Sequence[Record]) -> list[tuple[str, bool, Cell]]:
    names: list[str] = []
    for r in records:
        if r.derived is not None:
            names += [k for k, v in r.derived.to_dict().items() if k not in names and _is_scalar(v)]
    spec: list[tuple[str, bool, Cell]] = [
        ("workload", False, lambda r, _s: r.workload.name), ("backend", False, _BACKEND),
        ("format", False, _FORMAT), ("mode", False, _MODE), ("time ({time})", True, _time)]
    for name in names:
        spec.append((name, True, _derived_cell(name)))
    spec += [("status", False, _status), ("note", False, _note_cell)]
    return spec


def _derived_cell(name: str) -> Cell:
    def get(r: Record, _s: float) -> str:
        v = r.derived.to_dict().get(name) if r.derived is not None else None
        if v is None:
            return DASH
        if isinstance(v, float):
            return f"{v:.4g}"
        return str(v)
    return get


def kind_table(kind: str, records: Sequence[Record]) -> KindTable:
    """The formatted table of the records of one kind (see the module docstring for the columns)."""
    if kind in RUN_KINDS:
        rows, meta = table_rows(records)
        cols = gemm_columns(meta)
        from truepeak.report.table import NUMERIC
        return KindTable(kind, [h for _, h in cols], [[row[c] for c, _ in cols] for row in rows],
                         [c in NUMERIC for c, _ in cols], meta["footer"])
    spec = SPECS.get(kind) or _generic_spec(records)
    unit, scale = time_unit(r.time_s for r in records if r.ok)
    shown = "µs" if unit == "us" else unit
    headers = [h.replace("{time}", shown) for h, _, _ in spec]
    rows = [[cell(r, scale) for _, _, cell in spec] for r in records]
    modes = sorted({r.mode for r in records if r.mode})
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
def _timing(r: Record) -> MeasurementSummary | None:
    return r.measurement if isinstance(r.measurement, MeasurementSummary) else None


def _telemetry(r: Record, name: str) -> Any:
    m = _timing(r)
    return getattr(m.telemetry, name) if m is not None and m.telemetry is not None else None


def _rel_iqr(r: Record) -> float | None:
    m = _timing(r)
    if m is None:
        return None
    return m.steady_rel_iqr if m.steady_rel_iqr is not None else m.rel_iqr


#: The fixed leading columns of the CSV: (column, getter).
CSV_FIXED: tuple[tuple[str, Callable[[Record], Any]], ...] = (
    ("kind", lambda r: r.kind),
    ("status", lambda r: str(r.status)),
    ("reason", lambda r: r.reason),
    ("device", lambda r: r.device_name),
    ("workload", lambda r: r.workload.name),
    ("backend", lambda r: r.backend),
    ("format", lambda r: r.format),
    ("mode", lambda r: r.mode),
    ("time_s", lambda r: r.time_s),
    ("q1_s", lambda r: _timing(r).q1_s if _timing(r) else None),
    ("q3_s", lambda r: _timing(r).q3_s if _timing(r) else None),
    ("rel_iqr", _rel_iqr),
    ("n_samples", lambda r: _timing(r).n_samples if _timing(r) else None),
    ("sm_clock_median_hz", lambda r: _telemetry(r, "sm_clock_median_hz")),
    ("power_median_w", lambda r: _telemetry(r, "power_median_w")),
    ("warnings", lambda r: " | ".join(r.warnings) or None),
    ("schema_version", lambda r: r.source_schema),
    ("timestamp", lambda r: r.timestamp),
    ("key", lambda r: r.key),
)

#: Per kind, the CSV column name of each derived metric that schema 3 renamed (the exported format keeps the
#: schema-2 names: ``roofline_fraction`` -> ``pct_roofline``).
CSV_NAMES: dict[str, dict[str, str]] = {kind: {new: old for old, new in names.items()}
                                         for kind, names in V2_DERIVED_NAMES.items()}


def csv_name(kind: str, metric: str) -> str:
    """The CSV column (after ``derived.``) of a derived metric of ``kind``: its schema-2 name where schema 3 renamed
    it (``csv_name("gemm", "dense_fraction") == "pct_dense"``), else the metric's own name."""
    return CSV_NAMES.get(kind, {}).get(metric, metric)


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


def _parts(rec: Record) -> dict[str, dict[str, Any]]:
    """The record's ``workload`` and ``derived`` as the CSV names their fields."""
    derived = rec.derived.to_dict() if rec.derived is not None else {}
    return {"workload": rec.workload.to_dict(), "derived": {csv_name(rec.kind, k): v for k, v in derived.items()}}


def csv_columns(records: Sequence[Record]) -> list[str]:
    """``source``, the fixed columns, then ``workload.*`` and ``derived.*`` of every field any record has."""
    extra: dict[str, None] = {}
    parts = [_parts(r) for r in records]
    for place in ("workload", "derived"):
        for p in parts:
            for k in p[place]:
                extra.setdefault(f"{place}.{k}", None)
    return ["source", *(c for c, _ in CSV_FIXED), *extra]


def csv_text(data: Results | Sequence[Record], sources: Sequence[str] | None = None) -> str:
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
        parts = _parts(rec)
        for col in cols[len(CSV_FIXED) + 1:]:
            place, _, name = col.partition(".")
            row.append(_csv_value(parts[place].get(name)))
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


def remeasured(rec: Record) -> bool:
    """Whether a record is a ``truepeak peak`` re-measurement (``search.phase == "remeasure"``)."""
    return rec.search is not None and rec.search.phase == "remeasure"


def better_peak(held: Record, new: Record) -> bool:
    """Whether GEMM record ``new`` replaces ``held`` as a peak: a re-measurement beats a first-pass trial (the
    maximum over first-pass trials is biased upward by noise), and between records of the same kind the higher
    FLOP/s wins. Both must be ``ok`` GEMM records with derived metrics."""
    h, n = remeasured(held), remeasured(new)
    return (n and not h) or (n == h and new.derived.flop_per_s > held.derived.flop_per_s)


def peak_rows(records: Sequence[Record], accelerator: Any = None) -> list[dict[str, Any]]:
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
    ``dense_fraction``, ``clock_hz`` (median SM clock of that record), ``at_clock`` (the dense peak at that clock:
    ``measured / at_clock_fraction`` = FLOP/clk/SM x SMs x clock), ``at_clock_fraction``, ``shape``, ``estimated`` (the peak is an
    estimate, as on a CPU), ``n`` (records of that format, layout and mode), and ``reason`` for a format with no ok
    record (its first skipped or failed reason; a peak search that could not run counts as a record of its format).
    """
    order: list[tuple[str, str, str]] = []  # (format, scaling or "", mode or "")
    best: dict[tuple[str, str, str], Record] = {}
    count: dict[tuple[str, str, str], int] = {}
    reasons: dict[tuple[str, str, str], str] = {}
    labels: dict[tuple[str, str, str], str] = {}
    for rec in records:
        if rec.kind not in ("gemm", "peak_search"):
            continue
        key = (str(rec.format), scaling_of(rec) or "", rec.mode or "")
        if key not in count:
            order.append(key)
            count[key] = 0
            labels[key] = format_label(rec)
        count[key] += 1
        rate = rec.derived.flop_per_s if rec.kind == "gemm" and rec.derived is not None else None
        if not rec.ok or rate is None:
            reasons.setdefault(key, f"{rec.status}: {rec.reason}")
            continue
        if key not in best or better_peak(best[key], rec):
            best[key] = rec
    out = []
    for key in order:
        fmt, scaling, mode = key
        rec = best.get(key)
        sparse, published = _catalog_sparse(accelerator, fmt)
        row: dict[str, Any] = {"format": fmt, "scaling": scaling or None, "label": labels[key], "mode": mode,
                               "remeasured": rec is not None and remeasured(rec), "n": count[key], "sparse": sparse,
                               "sparse_published": published, "dense": None, "measured": None,
                               "dense_fraction": None, "clock_hz": None, "at_clock": None, "at_clock_fraction": None,
                               "shape": None, "estimated": False,
                               "reason": None if rec is not None else reasons.get(key)}
        if rec is None:
            try:
                row["dense"] = accelerator.dense_flops(fmt) if accelerator is not None else None
            except Exception:
                pass
            out.append(row)
            continue
        d = rec.derived
        rate, at = d.flop_per_s, d.at_clock_fraction
        row.update(dense=d.dense_peak_flop_per_s, measured=rate, dense_fraction=d.dense_fraction,
                   clock_hz=d.sm_clock_hz, at_clock_fraction=at, at_clock=rate / at if rate and at else None,
                   shape=rec.workload.name, estimated=bool(d.peak_estimated))
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


def _case(rec: Record) -> str:
    parts = [rec.kind, rec.workload.name]
    if rec.format:
        parts.append(format_label(rec))
    if rec.mode:
        parts.append(rec.mode)
    return " ".join(parts)


def report_warnings(records: Sequence[Record], problems: Sequence[Any] = ()) -> list[ReportWarning]:
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
        other = any("schema" in str(getattr(p, "why", p)) for p in problems)
        text = f"{len(problems)} line(s) or file(s) could not be used and are not shown"
        if other:
            text += f" (this truepeak understands record schema versions {readable_schemas()})"
        out.append(ReportWarning("input", text, [str(p) for p in problems]))
    devices = list(dict.fromkeys(r.device_name for r in records))
    if len(devices) > 1:
        out.append(ReportWarning("devices", f"records of {len(devices)} different devices: compare numbers across "
                                            "devices with care", devices))
    throttled, noisy, warm, cache, inputs, other = [], [], [], [], [], []
    failed, skipped = [], {}
    for rec in records:
        m = _timing(rec)
        codes = list(m.warning_codes) if m is not None else []
        own = list(m.warnings) if m is not None else []
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
        if rec.rotation is not None and rec.rotation.capped:
            cache.append(f"{case}: rotation capped: {rec.rotation.note}")
        if isinstance(rec.derived, (GemmMetrics, CopyMetrics)) and rec.derived.memory_note:
            cache.append(f"{case}: {rec.derived.memory_note}")
        for w in rec.warnings:
            if w in own:
                continue
            if "cache" in w.lower() or "L2" in w:
                cache.append(f"{case}: {w}")
            else:
                other.append(f"{case}: {w}")
        status, reason = rec.status, rec.reason
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


__all__ = ["KindTable", "units_footer", "KIND_FOOTERS", "GENERIC_FOOTER", "peak_rows", "remeasured", "report_warnings",
           "ReportWarning", "catalog_accelerator", "kind_table", "csv_text", "csv_columns", "csv_name", "CSV_NAMES",
           "SPECS", "RUN_KINDS", "CSV_FIXED"]
