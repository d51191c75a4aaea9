"""What ``truepeak specs`` prints: the catalog table, one accelerator's peaks and properties, a claim's verdict, and
the ``--json`` documents; no lookups, no arithmetic beyond unit conversion.

Every rate, catalog peak or claim verdict, renders with :func:`truepeak.units.fmt_rate` (364.25 -> "364.2", 1457 ->
"1457.0"): one rendering for specs, --claim and efficiency. Tables are fitted to the terminal by
:mod:`truepeak.report.fit` (the natural width when piped: a log keeps every digit).

JSON (SI units): ``{"schema": "truepeak.specs/1", "units": {...}, "accelerators": [...], "sources": {...}}`` for the
catalog, ``{"schema", "units", "accelerator": {...}}`` for one accelerator, plus ``"claim": {...}`` with a claim. The
accelerator keys are documented in :func:`truepeak.hardware.catalog.accelerator_to_dict`, the claim keys in
:class:`truepeak.hardware.claims.ClaimVerdict`.
"""

from __future__ import annotations

import json
import re

from rich.console import Console
from rich.text import Text

from truepeak.hardware.catalog import Accelerator, Catalog, Sourced, accelerator_to_dict, sparse_is_twice_dense
from truepeak.hardware.claims import ClaimVerdict
from truepeak.report.fit import Column, TableData, print_line, print_table
from truepeak.units import fmt_rate, rate_unit

FOOTER = "TFLOPS = 1e12 FLOP/s, dense unless labelled sparse; TB/s decimal"
DERIVED_MARK = "*"
UNVERIFIED_MARK = "†"
LEGEND = (f"{DERIVED_MARK} derived (computed from other published numbers, not published itself); "
          f"{UNVERIFIED_MARK} unverified (a single third-party report or conflicting sources)")
JSON_SCHEMA = "truepeak.specs/1"
JSON_UNITS = {
    "flops": "FLOP/s (ops/s for int8); dense unless the key says sparse",
    "bandwidth": "B/s (decimal)",
    "clock": "Hz",
    "memory": "bytes",
    "power": "W",
    "fractions": "deviation and tolerance are fractions (0.05 = 5 %)",
}


def catalog_json(catalog: Catalog) -> str:
    """``truepeak specs --json``: every accelerator (:func:`~truepeak.hardware.catalog.accelerator_to_dict`) and the
    catalog's source keys, SI units."""
    return _json({"schema": JSON_SCHEMA, "units": JSON_UNITS,
                  "accelerators": [accelerator_to_dict(a) for a in catalog.accelerators],
                  "sources": dict(catalog.sources)})


def accelerator_json(acc: Accelerator, verdict: ClaimVerdict | None = None) -> str:
    """``truepeak specs NAME --json``: the accelerator, and with ``verdict`` the claim
    (:meth:`~truepeak.hardware.claims.ClaimVerdict.to_dict`), SI units."""
    doc = {"schema": JSON_SCHEMA, "units": JSON_UNITS, "accelerator": accelerator_to_dict(acc)}
    if verdict is not None:
        doc["claim"] = verdict.to_dict()
    return _json(doc)


def print_catalog(catalog: Catalog, *, sources: bool = False, console: Console | None = None) -> None:
    """``truepeak specs``: a title, one row per accelerator (:func:`list_table`), with ``sources`` the source keys
    (:func:`sources_table`), and the units and marks; on ``console`` (default: stdout, fitted to the terminal)."""
    console = console or _console()
    _line(console, "truepeak spec catalog: dense peaks (efficiency denominators)")
    _table(console, list_table(catalog.accelerators))
    if sources:
        _line(console, "sources")
        _table(console, sources_table(catalog.sources))
    _line(console, f"{FOOTER}. {LEGEND}. `truepeak specs NAME` shows one accelerator.")


def print_accelerator(acc: Accelerator, *, sources: dict[str, str] | None = None,
                      console: Console | None = None) -> None:
    """``truepeak specs NAME``: :func:`accelerator_view` line by line and table by table; ``sources`` (the catalog's
    ``[sources]`` table) adds the source columns and the legend of the keys they cite."""
    console = console or _console()
    for item in accelerator_view(acc, sources=sources):
        if isinstance(item, Text):
            _line(console, item)
        else:
            _table(console, item)


def _json(doc: dict) -> str:
    return json.dumps(doc, indent=2)


def _console() -> Console:
    # Fitted to the terminal; the natural width when piped (report/fit.py: one rule for every table).
    return Console(highlight=False, soft_wrap=False)


def _line(console: Console, text: str | Text) -> None:
    """One line of text: wrapped at spaces to a terminal's width, whole when piped (so it can be grepped)."""
    if console.is_terminal:
        console.print(text if isinstance(text, Text) else Text(text))
    else:
        print_line(console, text.plain if isinstance(text, Text) else text)


def _table(console: Console, table: TableData) -> None:
    print_table(console, table.columns, table.rows)


def _num(x: float, digits: int = 2, min_digits: int = 0) -> str:
    """A number with at most ``digits`` and at least ``min_digits`` decimals (989.4, 2015.2, 364.25, 67, 8.0)."""
    text = f"{x:.{digits}f}"
    if "." in text:
        head, tail = text.split(".")
        tail = tail.rstrip("0").ljust(min_digits, "0")
        text = f"{head}.{tail}" if tail else head
    return text


def _tflops(flops: float | None) -> str:
    """A catalog peak in FLOP/s as TFLOPS text, rendered as everywhere else (:func:`truepeak.units.fmt_rate`:
    ``364.2``, ``67``, ``1457.0``); ``—`` for none."""
    return "—" if flops is None else fmt_rate(flops)


def _mark(derived: bool, unverified: bool = False) -> str:
    """`` *`` for a derived value, `` †`` for an unverified one (both may apply)."""
    marks = (DERIVED_MARK if derived else "") + (UNVERIFIED_MARK if unverified else "")
    return f" {marks}" if marks else ""


def list_table(accs) -> TableData:
    """One row per accelerator: memory, bandwidth, SMs, dense bf16 / fp8 / fp4 TFLOPS, TDP. The name may wrap at its
    spaces; every number keeps its width; the key (an alias: the name is accepted as NAME too) is the column a narrow
    terminal leaves out."""
    cols = [Column("name", wrap=True), Column("key", drop=True)]
    cols += [Column(h, numeric=True) for h in ("memory GB", "BW TB/s", "SMs/CUs", "bf16 TFLOPS", "fp8 TFLOPS",
                                               "fp4 TFLOPS", "TDP W")]
    rows = []
    for a in accs:
        row = [a.name, a.key, _sourced_num(a.memory_bytes, 1e9, 0), _sourced_num(a.memory_bandwidth, 1e12, 3, 1),
               _sourced_num(a.sm_count, 1, 0)]
        for fmt in ("bf16", "fp8_e4m3", "nvfp4"):
            if a.has_rate(fmt):
                p = a.peak(fmt)
                row.append(_tflops(p.dense) + _mark(p.derived, p.unverified))
            else:
                row.append("—")
        row.append(_sourced_num(a.tdp_w, 1, 0))
        rows.append(row)
    return TableData(cols, rows)


def _sourced_num(s: Sourced | None, scale: float, digits: int, min_digits: int = 0) -> str:
    if s is None:
        return "—"
    return _num(s.value / scale, digits, min_digits) + _mark(s.derived, s.unverified)


def sources_table(sources: dict[str, str]) -> TableData:
    """The source keys and what each is (the ``[sources]`` table of the catalog's data file)."""
    return TableData([Column("key"), Column("source", wrap=True)], [[k, v] for k, v in sources.items()])


def source_keys(texts, sources: dict[str, str]) -> list[str]:
    """The keys of ``sources`` that the source strings ``texts`` cite, in the order of ``sources``: a key counts as a
    whole word (``ML`` in ``"ML; datasheet ..."``, ``H200-MEAS`` in ``"H200-MEAS (NVML max SM clock)"``, never the
    ``ML`` inside ``"HTML"`` or ``"ML-X"``)."""
    joined = "\n".join(t for t in texts if t)
    return [k for k in sources if re.search(rf"(?<![\w-]){re.escape(k)}(?![\w-])", joined)]


def peaks_table(acc: Accelerator, *, sources: bool = False) -> tuple[TableData, list[str]]:
    """The peaks of one accelerator, dense and 2:4-sparse in separate, labelled columns; plus numbered notes. The
    note numbers are the column a narrow terminal leaves out first (the notes follow the table in full); the
    sources, asked for, wrap but are never left out (a terminal too narrow for them gets the stacked layout)."""
    cols = [Column("format"), Column("accumulate"), Column("dense TFLOPS", numeric=True),
            Column("sparse (2:4) TFLOPS", numeric=True), Column("derived", justify="center"),
            Column("FLOP/clk/CU" if acc.vendor == "amd" else "FLOP/clk/SM", numeric=True),
            Column("clock MHz", numeric=True), Column("notes", drop=True, priority=1)]
    if sources:
        cols.append(Column("source", wrap=True))
    rows: list[list[str]] = []
    notes: list[str] = []
    max_clock = acc.max_clock_hz.value if acc.max_clock_hz else None
    for p in acc.peaks:
        refs = []
        for text in (p.why_not and f"does not reproduce from FLOP/clk/SM x SMs x clock: {p.why_not}", p.note,
                     p.sparse_ratio_note and f"sparse is not 2 x dense: {p.sparse_ratio_note}"):
            if text:
                notes.append(f"[{len(notes) + 1}] {p.label}: {text}")
                refs.append(str(len(notes)))
        clock = acc.clock_basis_hz(p)
        clock_text = "—" if clock is None else _num(clock / 1e6, 0)
        if p.clock_hz is not None and max_clock is not None and abs(p.clock_hz - max_clock) < 1:
            clock_text += " (max)"
        per_clk = acc.peak_flop_per_clk(p)
        label = "int8 (TOPS)" if p.rate == "int8" else p.rate
        if p.formats:
            label += f" ({', '.join(p.formats)} only)"
        row = [label, p.accumulate, _tflops(p.dense) + _mark(False, p.unverified), _tflops(p.sparse),
               DERIVED_MARK if p.derived else "",
               "—" if per_clk is None else str(per_clk), clock_text, ",".join(refs)]
        if sources:
            row.append(p.source)
        rows.append(row)
    return TableData(cols, rows), notes


def properties_table(acc: Accelerator, *, sources: bool = False) -> TableData:
    """Memory, bandwidth, SMs, clocks, L2, shared memory per block, TDP, interconnect, with sources on request. Every
    column may wrap at spaces (a value's numbers stay whole)."""
    cols = [Column("property", wrap=True), Column("value", wrap=True)]
    if sources:
        cols.append(Column("source", wrap=True))
    out: list[list[str]] = []
    sm_label = "CUs" if acc.vendor == "amd" else "SMs"
    rows = [
        ("memory", acc.memory_bytes, lambda v: f"{_num(v / 1e9, 1)} GB {acc.memory_type}".rstrip()),
        ("memory bandwidth", acc.memory_bandwidth, lambda v: f"{_num(v / 1e12, 3, 1)} TB/s"),
        (sm_label, acc.sm_count, lambda v: f"{v}"),
        ("boost clock (peak basis)", acc.boost_clock_hz, lambda v: f"{_num(v / 1e6, 0)} MHz"),
        ("max clock", acc.max_clock_hz, lambda v: f"{_num(v / 1e6, 0)} MHz"),
        ("L2 cache", acc.l2_bytes, lambda v: f"{v:,} B ({_num(v / 2**20, 1)} MiB)"),
        *([("Infinity Cache (behind L2)", acc.infinity_cache_bytes, lambda v: f"{v:,} B ({_num(v / 2**20, 1)} MiB)")]
          if acc.infinity_cache_bytes is not None else []),
        ("shared memory per block (opt-in)", acc.smem_per_block_bytes, lambda v: f"{v:,} B ({_num(v / 1024, 1)} KiB)"),
        ("TDP", acc.tdp_w, lambda v: f"{v} W"),
        ("interconnect", acc.interconnect, lambda v: str(v)),
    ]
    for label, s, fmt in rows:
        if s is None:
            row = [label, "not published in our sources"] + (["—"] if sources else [])
        else:
            text = fmt(s.value)
            note = f" ({s.note})" if s.note and s.note not in text else ""  # no "(40 MiB) (40 MiB)"
            value = text + _mark(s.derived, s.unverified) + note
            row = [label, value] + ([s.source] if sources else [])
        out.append(row)
    arch = acc.architecture
    cc = f"compute capability {acc.compute_capability}, " if acc.compute_capability else ""
    extra = [("architecture", f"{arch.key}: {arch.name} ({cc}FLOP/clk per {sm_label[:-1]})", arch.source),
             ("device names", ", ".join(acc.device_names) or "—", ""),
             ("aliases", ", ".join(acc.aliases) or "—", "")]
    for label, value, src in extra:
        out.append([label, value] + ([src] if sources else []))
    return TableData(cols, out)


def accelerator_view(acc: Accelerator, *, sources: dict[str, str] | None = None) -> list:
    """Everything ``truepeak specs NAME`` prints, in order: lines as :class:`rich.text.Text`, tables as
    :class:`~truepeak.report.fit.TableData`. ``sources``: the catalog's ``[sources]`` table (key -> what it is) to show the source
    columns and, under the tables, a legend of the keys they cite; None for no sources."""
    out: list = [Text(f"{acc.name}  ({acc.key})", style="bold")]
    if acc.headline:
        out.append(Text(f"headline: {acc.headline}"))
    if acc.sparse_headlines:
        figures = "; ".join(acc.sparse_headlines)
        out.append(Text(f"sparse (2:4) headline figures, never efficiency denominators: {figures}"))
    with_sources = sources is not None
    peaks, notes = peaks_table(acc, sources=with_sources)
    out.append(Text("peaks (dense = efficiency denominator; sparse = 2:4 structured sparsity, display only)"))
    out.append(peaks)
    out.extend(Text(n) for n in notes)
    out.append(Text("memory, clocks, caches, power"))
    props = properties_table(acc, sources=with_sources)
    out.append(props)
    if with_sources:
        cited = [row[-1] for row in peaks.rows] + [c for row in props.rows for c in row[1:]] + notes
        keys = source_keys(cited, sources)
        if keys:
            out.append(Text("source keys used above"))
            out.append(sources_table({k: sources[k] for k in keys}))
    for note in acc.notes:
        out.append(Text(f"note: {note}"))
    if acc.architecture.note:
        out.append(Text(f"architecture note: {acc.architecture.note}"))
    out.append(Text(f"{FOOTER}. {LEGEND}."))
    return out


_KIND_WORDS = {
    "dense": "DENSE — use it as the efficiency denominator",
    "sparse": "SPARSE (2:4) — not an efficiency denominator; use the dense value below",
    "neither": "NEITHER the dense nor the sparse peak",
    "ambiguous": "AMBIGUOUS — name the format to decide",
}

_PLATFORM_WORDS = {
    "dense": "DENSE {n}-GPU PLATFORM TOTAL — divide by {n} for one GPU",
    "sparse": "SPARSE (2:4) {n}-GPU PLATFORM TOTAL — divide by {n}, then use the dense value below",
}


def claim_lines(v: ClaimVerdict) -> list[str]:
    """The lines ``truepeak specs NAME --claim TEXT`` prints; peaks render as in the explanation (one formatter)."""
    unit = rate_unit(v.rate) if v.rate else "TFLOPS"
    words = _PLATFORM_WORDS[v.kind].format(n=v.gpus) if v.gpus > 1 else _KIND_WORDS[v.kind]
    if v.kind == "ambiguous" and v.rate:  # one format, several accumulators
        words = "AMBIGUOUS — name the accumulator to decide"
    lines = [
        f"claim:       {v.text}  ({v.accelerator})",
        f"verdict:     {words}",
    ]
    if v.rate:
        acc = f", {v.accumulate} accumulate" if v.accumulate else ""
        only = f" ({', '.join(v.formats)} only)" if v.formats else ""
        lines.append(f"format:      {v.rate}{only}{acc}")
    if v.dense is not None:
        use = (f"for a GEMM accumulating in {v.accumulate} (PyTorch's default)" if v.kind == "ambiguous"
               else "use this for efficiency")
        lines.append(f"dense peak:  {fmt_rate(v.dense)} {unit}{_mark(v.derived, v.unverified)}  <- {use}")
    if v.sparse is not None:
        if not v.sparse_published:
            pub = " (2 x dense; not published for this SKU)"
        elif v.dense is not None and not sparse_is_twice_dense(v.dense, v.sparse):
            pub = " (published; not 2 x dense on this part)"
        else:
            pub = ""
        lines.append(f"sparse peak: {fmt_rate(v.sparse)} {unit}{pub}")
    lines.append(f"tolerance:   ±{v.tolerance * 100:g} % (marketing rounding)")
    lines.append(v.explanation)
    lines.append(FOOTER)
    return lines
