"""Every table the CLI prints, at terminals of 80, 100 and 120 columns and piped (not a terminal): no line wider than
the terminal, no ellipsis, and every number shown equal to the record's (or the catalog's) value formatted at the
precision the column documents, so that a number cut short (41.6 GB/s shown as ``4``, bf16 as ``503.…``) fails.

How the numbers are checked (:func:`check_shown`): the expected text of each cell is computed here from the record's
SI value (4.16e10 B/s -> ``41.6``) or, for text cells (names, notes, sources), taken from the text itself; every
number token of the output must be one of those (or a number of a header or of a line around the table), and every
expected token must be shown at least as often as expected, except those of a column the output names as not shown.
"""

from __future__ import annotations

import io
import re
from collections import Counter

import pytest
from rich.cells import cell_len
from rich.console import Console
from typer.testing import CliRunner

import truepeak.cli.specs as specs_cli
import truepeak.report.specs as specs_report
from truepeak.cli.app import app
from truepeak.hardware import load_catalog
from truepeak.hardware.lookup import get_accelerator
from truepeak.records import Record
from truepeak.report.load import Results
from truepeak.units import UNITS_FOOTER

WIDTHS = (80, 100, 120, None)  # None: piped

#: A number as it is read on screen: a shape (4096x4096x18432), a number with thousands separators (62,914,560), a
#: decimal with an optional exponent (41.6, 2.1e-03), optionally signed; never part of a word (bf16, sm_90, x16).
TOKEN = re.compile(r"(?<![\w.])[-+]?(?:\d+(?:x\d+)+|\d{1,3}(?:,\d{3})+(?:\.\d+)?|\d+(?:\.\d+)?(?:e[-+]?\d+)?)(?!\w)")
DROPPED = re.compile(r"not shown at (\d+) columns: (.*?); widen the terminal or pipe the output")


def numbers(text: str) -> list[str]:
    """The number tokens of ``text``, in order."""
    return TOKEN.findall(text)


def test_numbers_reads_whole_numbers_only():
    assert numbers("41.6 GB/s, 4096x4096x18432, 62,914,560 B (60 MiB), bf16 sm_90 x16, 2.1e-03, -20.0 %, 503.…") == [
        "41.6", "4096x4096x18432", "62,914,560", "60", "2.1e-03", "-20.0", "503"]


def terminal(width: int) -> tuple[Console, io.StringIO]:
    buf = io.StringIO()
    return Console(file=buf, width=width, force_terminal=True, color_system=None, highlight=False), buf


def console_at(width: int | None) -> tuple[Console, io.StringIO]:
    """A terminal of ``width`` columns, or (None) a console on a file: not a terminal."""
    if width is not None:
        return terminal(width)
    buf = io.StringIO()
    return Console(file=buf, width=80, force_terminal=False, color_system=None, highlight=False), buf


def check_shown(text: str, width: int | None, columns: dict[str, list[str]], around: list[str] = (),
                droppable: set[str] = frozenset(), heading: str | None = None) -> list[str]:
    """Check the rendered ``text`` of a table.

    Args:
        width: the terminal's width (no line may be wider), or None for piped output (no column may be left out).
        columns: header -> the number tokens its cells must show (computed by the test).
        around: lines printed around the table (title, footers): their numbers must show too.
        droppable: the headers that may be left out (and named in the "not shown" line).
        heading: the first column's header: a stacked layout shows that column's cells as headings, without it.

    Returns:
        The headers the output says it left out.
    """
    lines = text.splitlines()
    if width is not None:
        wide = [line for line in lines if cell_len(line) > width]
        assert not wide, f"lines wider than {width}: {wide}"
    assert "…" not in text, "an ellipsis: something was cut"
    flat = " ".join(text.split())
    found = DROPPED.search(flat)
    dropped = [h for h in found.group(2).split(", ")] if found else []
    if width is None:
        assert not dropped, "piped output must show every column"
    else:
        assert set(dropped) <= droppable, f"left out a column that may not be: {dropped}"
        if found:
            assert found.group(1) == str(width)
    for header in columns:
        if header not in dropped and header != heading:
            for word in header.split():
                assert word in text, f"header {header!r} lost {word!r}"
    want = [tok for header, toks in columns.items() if header not in dropped for tok in toks]
    want += [tok for line in around for tok in numbers(line)]
    got = Counter(numbers(text))
    missing = Counter(want) - got
    assert not missing, f"numbers not shown (cut or wrong): {dict(missing)}"
    allowed = set(want) | set(numbers(" ".join(columns))) | ({str(width)} if found else set())
    unexplained = sorted(set(got) - allowed)
    assert not unexplained, f"numbers shown that no record holds (a cut number?): {unexplained}"
    return dropped


def text_tokens(*texts: str) -> list[str]:
    return [tok for t in texts for tok in numbers(t)]


# ----------------------------------------------------------------------------------------------------------------------
# truepeak specs


def _one_decimal_or_4g(x: float) -> str:
    """TFLOPS as the catalog columns print them (truepeak.units.fmt_rate): one decimal from 100 up, four significant
    digits below (67 TFLOPS -> "67", 494.7 -> "494.7")."""
    return f"{x:.1f}" if x >= 100 else f"{x:.4g}"


def _strip(x: float, digits: int, min_digits: int = 0) -> str:
    """At most ``digits`` decimals, trailing zeros dropped down to ``min_digits`` (4.800 TB/s -> "4.8")."""
    text = f"{x:.{digits}f}"
    head, _, tail = text.partition(".")
    tail = tail.rstrip("0").ljust(min_digits, "0")
    return f"{head}.{tail}" if tail else head


def _list_expected() -> dict[str, list[str]]:
    cols: dict[str, list[str]] = {h: [] for h in ("name", "key", "memory GB", "BW TB/s", "SMs/CUs", "bf16 TFLOPS",
                                                  "fp8 TFLOPS", "fp4 TFLOPS", "TDP W")}
    for a in load_catalog().accelerators:
        cols["name"] += numbers(a.name)
        cols["key"] += numbers(a.key)
        if a.memory_bytes:
            cols["memory GB"].append(_strip(a.memory_bytes.value / 1e9, 0))
        if a.memory_bandwidth:
            cols["BW TB/s"].append(_strip(a.memory_bandwidth.value / 1e12, 3, 1))
        if a.sm_count:
            cols["SMs/CUs"].append(str(a.sm_count.value))
        for header, fmt in (("bf16 TFLOPS", "bf16"), ("fp8 TFLOPS", "fp8_e4m3"), ("fp4 TFLOPS", "nvfp4")):
            if a.has_rate(fmt):
                cols[header].append(_one_decimal_or_4g(a.peak(fmt).dense / 1e12))
        if a.tdp_w:
            cols["TDP W"].append(str(a.tdp_w.value))
    return cols


def _specs(monkeypatch, width: int | None, *args) -> str:
    """``truepeak specs ARGS`` through the command's own code, on a terminal of ``width`` (None: through CliRunner,
    whose stdout is not a terminal)."""
    if width is None:
        result = CliRunner().invoke(app, ["specs", *args])
        assert result.exit_code == 0, result.output
        return result.stdout
    con, buf = terminal(width)
    monkeypatch.setattr(specs_report, "_console", lambda: con)
    name = args[0] if args and not args[0].startswith("-") else None
    specs_cli.specs_command(name=name, sources="--sources" in args, as_json=False, claim=None)
    return buf.getvalue()


@pytest.mark.parametrize("width", WIDTHS)
def test_specs_list(monkeypatch, width):
    text = _specs(monkeypatch, width)
    dropped = check_shown(text, width, _list_expected(), droppable={"key"}, heading="name",
                          around=[f"{specs_report.FOOTER}. {specs_report.LEGEND}."])
    # hand-checked: the H200 SXM row of the catalog (141 GB, 4.8 TB/s, 132 SMs, 989.4 / 1978.9 dense, 700 W) and the
    # RTX PRO 6000 Workstation's bf16 503.8 (printed "503.…" at 100 columns before)
    for value in ("141", "4.8", "132", "989.4", "1978.9", "700", "503.8 †", "2015.2 †"):
        assert value in text
    if width is None:
        assert "rtx-pro-6000-ws" in text and "NVIDIA RTX PRO 6000 Blackwell Max-Q Workstation Edition" in text
    if width == 100:  # natural width 165: the key (an alias) is left out, the numbers all stay
        assert dropped == ["key"]


@pytest.mark.parametrize("width", WIDTHS)
@pytest.mark.parametrize("sources", [False, True])
def test_specs_one_accelerator(monkeypatch, width, sources):
    acc = get_accelerator("h200")
    args = ["h200"] + (["--sources"] if sources else [])
    text = _specs(monkeypatch, width, *args)
    # the peaks by hand: FLOP/clk/SM x 132 SMs x 1.83 GHz (fp32 at its 1.98 GHz maximum: 67 as published)
    peaks = {"dense TFLOPS": ["67", "494.7", "989.4", "989.4", "1978.9", "1978.9"],
             "sparse (2:4) TFLOPS": ["989.4", "1979.0", "1979.0", "3958.0", "3958.0"],
             "FLOP/clk/SM": ["256", "2048", "4096", "4096", "8192", "8192"],
             "clock MHz": ["1980", "1830", "1830", "1830", "1830", "1830"],
             "notes": ["1"]}
    props = {"value": ["141", "4.8", "4.24", "132", "1830", "1980", "62,914,560", "60", "50", "232,448", "227",
                       "700", "900", "5.0", "9.0"]}
    text_cells = {"property": text_tokens("memory", "L2 cache", "TDP")}
    if sources:
        text_cells["source"] = text_tokens(*(p.source for p in acc.peaks), acc.memory_bytes.source,
                                           acc.memory_bandwidth.source, acc.sm_count.source,
                                           acc.boost_clock_hz.source, acc.max_clock_hz.source, acc.l2_bytes.source,
                                           acc.smem_per_block_bytes.source, acc.tdp_w.source, acc.interconnect.source,
                                           acc.architecture.source)
    catalog = load_catalog()
    legend = [catalog.sources[k] for k in ("ML", "NET", "CUT", "CFE", "H200-MEAS")] if sources else []
    around = [acc.headline, *acc.sparse_headlines, *acc.notes, f"{specs_report.FOOTER}. {specs_report.LEGEND}.",
              "[1] fp32: non-tensor FP32 is quoted at the 1980 MHz maximum clock: 132 SMs x 256 x 1.98 GHz = 66.9",
              "h200, h200-sxm, h200 sxm, h200 141gb, h200-sxm-141gb", *legend]
    check_shown(text, width, {**peaks, **props, **text_cells}, around=around, droppable={"notes"})
    if width == 80 and not sources:  # the regression: "dense T…" at 80 columns; now every header word is there
        assert "dense" in text and "TFLOPS" in text and "sparse (2:4)" in text
    # --sources: each key the tables cite is explained under them (the [sources] table of accelerators.toml), and
    # only those
    if sources:
        assert "source keys used above" in text
        for key in ("ML", "NET", "CUT", "CFE", "H200-MEAS"):
            assert catalog.sources[key].split()[0] in text
        assert catalog.sources["PROWP"] not in " ".join(text.split())
    else:
        assert "source keys" not in text


# ----------------------------------------------------------------------------------------------------------------------
# truepeak run


def _cpu_copy(rec: Record) -> Record:
    """The new user's case: a CPU copy at 4.16e10 B/s = 41.6 GB/s (printed as "4" at 80 columns before)."""
    out = rec.to_dict()
    out["mode"] = out["measurement"]["mode"] = "cpu"
    out["derived"]["bytes_per_s"] = 4.16e10
    out["derived"]["bandwidth_fraction"] = None
    return Record.from_dict(out)


@pytest.mark.parametrize("width", WIDTHS)
def test_run_table(three, width):
    from truepeak.report.table import table_text

    recs = [*three, _cpu_copy(three[0])]
    text = table_text(recs, title="truepeak run: NVIDIA H200 (cuda)", width=width)
    # by hand (tests/report/conftest.py): copy 2 GiB in 1 ms = 4295 GB/s, 89.5 % of 4800; bf16 16x4096x7168 in 40 us:
    # 23.49 TFLOPS, 1477 GB/s, 2.37 % of dense, 30.8 % of roofline, 2.48 % at 1755 MHz; the CPU copy 41.6 GB/s
    cols = {"shape (MxNxK)": ["2", "16x4096x7168", "8192x8192x8192", "2"], "time (µs)": ["1000", "40", "1000"],
            "TFLOPS": ["23.49"], "GB/s": ["4295", "1477", "41.6"], "% dense peak": ["2.37"],
            "% roofline": ["89.5", "30.8"], "% peak @ clock": ["2.48"],
            "note": numbers("nvfp4 GEMM needs sm_100 or sm_120; this device is sm_90")}
    dropped = check_shown(text, width, cols, around=[f"{UNITS_FOOTER}; mode: cpu, sustained"], droppable={"note"},
                          heading="shape (MxNxK)")
    assert "41.6" in text
    if width is None:
        assert not dropped and text.splitlines()[-1] == f"{UNITS_FOOTER}; mode: cpu, sustained"


ANSI = re.compile(r"\x1b\[[0-9;]*m")


@pytest.mark.parametrize("width", WIDTHS)
def test_run_on_a_cpu_end_to_end(capsys, monkeypatch, tmp_path, stub_timing, width):
    """`truepeak run --quick --device cpu --mode both` at a terminal of ``width`` columns (rich reads TTY_COMPATIBLE
    and COLUMNS) or piped, with stubbed timings (every GEMM 2 ms, every copy 5 ms): every number of the table is the
    record's, formatted as its column documents (GB/s whole from 100 up, else 3 significant digits; TFLOPS 4
    significant digits below 100; percentages 3 significant digits below 10)."""
    pytest.importorskip("torch")
    from truepeak.cli.app import main
    from truepeak.records import CopyMetrics, read_records

    stub_timing(monkeypatch, gemm_s=2e-3, copy_s=5e-3)
    if width is not None:
        monkeypatch.setenv("TTY_COMPATIBLE", "1")
        monkeypatch.setenv("COLUMNS", str(width))
    with pytest.raises(SystemExit) as info:
        main(["run", "--quick", "--device", "cpu", "--out", str(tmp_path / "r"), "--no-progress", "--mode", "both"])
    out, err = capsys.readouterr()
    out = ANSI.sub("", out)
    assert info.value.code == 0, err
    records = read_records(tmp_path / "r" / "results.jsonl")
    assert records and all(r.ok for r in records)

    def pct(f):
        return None if f is None else (f"{100 * f:.1f}" if 100 * f >= 10 else f"{100 * f:.3g}")

    cols: dict[str, list[str]] = {h: [] for h in ("shape (MxNxK)", "time (ms)", "TFLOPS", "GB/s", "% dense peak",
                                                  "% roofline", "note")}
    from truepeak.report.table import table_rows

    for r, row in zip(records, table_rows(records)[0]):
        d = r.derived
        copy = isinstance(d, CopyMetrics)
        cols["shape (MxNxK)"] += numbers(row["shape"])
        cols["time (ms)"].append(f"{r.time_s * 1e3:.4g}")  # 2 ms a GEMM, 5 ms the copy
        if not copy and d.flop_per_s:
            tf = d.flop_per_s / 1e12
            cols["TFLOPS"].append(f"{tf:.1f}" if tf >= 100 else f"{tf:.4g}")
        gb = d.bytes_per_s / 1e9
        cols["GB/s"].append(f"{gb:.0f}" if gb >= 100 else f"{gb:.3g}")
        for header, value in (("% dense peak", None if copy else d.dense_fraction),
                              ("% roofline", d.bandwidth_fraction if copy else d.roofline_fraction)):
            if pct(value) is not None:
                cols[header].append(pct(value))
        cols["note"] += numbers(row["note"])
    title = next(line for line in out.splitlines() if "truepeak run:" in line)
    check_shown(out, width, cols, around=[title, f"{UNITS_FOOTER}; mode: cpu"], droppable={"note"},
                heading="shape (MxNxK)")
    # a CPU run's output says nothing of burst, sustained or a peak at the SM clock: none of them is shown
    for word in ("burst", "sustained", "@ clock", "SM clock"):
        assert word not in out


def test_the_check_fails_on_a_cut_number(three):
    """The checker itself: the run table as rich rendered it before (no_wrap columns squeezed into 80 columns: the
    GB/s column one cell wide, 41.6 shown as "4") fails it."""
    from rich.table import Table

    from truepeak.report.table import columns, table_rows

    recs = [*three, _cpu_copy(three[0])]
    rows, meta = table_rows(recs)
    old = Table()
    for cid, header in columns(meta):
        old.add_column(header, no_wrap=cid != "note", overflow="fold")
    for row in rows:
        old.add_row(*(row[cid] for cid, _ in columns(meta)))
    con, buf = terminal(80)
    con.print(old)
    text = buf.getvalue()
    with pytest.raises(AssertionError, match="lost"):  # the headers are cut ("T" for TFLOPS) ...
        check_shown(text, 80, {"GB/s": ["4295", "1477", "41.6"], "TFLOPS": ["23.49"]}, droppable={"note"})
    with pytest.raises(AssertionError, match="cut"):  # ... and so are the numbers
        check_shown(text, 80, {"": ["4295", "1477", "41.6", "23.49"]}, droppable={"note"})


# ----------------------------------------------------------------------------------------------------------------------
# truepeak peak


AT_CLOCK = 4096 * 132 * 1.98e9
GPU_PEAKS = {"device": "NVIDIA H200", "device_kind": "cuda", "peaks": [
    {"format": "bf16", "mode": "burst", "status": "ok", "shape": [4096, 4096, 18432], "flop_per_s": 839.0e12,
     "pct_dense": 839.0e12 / 989.4e12, "peak_at_clock_flop_per_s": AT_CLOCK, "pct_at_clock": 839.0e12 / AT_CLOCK,
     "sm_clock_median_hz": 1.98e9, "power_median_w": 699.6, "evaluations": 86, "elapsed_s": 60.2},
    {"format": "bf16", "mode": "sustained", "status": "ok", "shape": [8192, 8192, 8192], "flop_per_s": 702.3e12,
     "pct_dense": 702.3e12 / 989.4e12, "peak_at_clock_flop_per_s": 4096 * 132 * 1.455e9,
     "pct_at_clock": 702.3e12 / (4096 * 132 * 1.455e9), "sm_clock_median_hz": 1.455e9, "power_median_w": 690.4,
     "evaluations": 91, "elapsed_s": 61.0},
    {"format": "int8", "mode": "burst", "status": "skipped", "reason": "no int8 kernel"}]}
CPU_PEAKS = {"device": "AMD EPYC", "device_kind": "cpu", "peaks": [
    {"format": "fp32", "mode": "cpu", "status": "ok", "shape": [1024, 1024, 1024], "flop_per_s": 5.295e10,
     "pct_dense": 5.295e10 / 1.662e11, "evaluations": 5, "elapsed_s": 3.8}]}


@pytest.mark.parametrize("width", WIDTHS)
def test_peak_table_on_a_gpu(width):
    from truepeak.report.peak import render_peaks

    con, buf = console_at(width)
    render_peaks(GPU_PEAKS, console=con)
    text = buf.getvalue()
    # 839.0 / 989.4 = 84.8 %; at 1980 MHz the peak is 4096 x 132 x 1.98e9 = 1070.5 TFLOPS, 839.0 / 1070.5 = 78.4 %;
    # sustained 702.3 / 989.4 = 71.0 %, 4096 x 132 x 1.455e9 = 786.7, 702.3 / 786.7 = 89.3 %
    cols = {"best shape MxNxK": ["4096x4096x18432", "8192x8192x8192"], "TFLOPS": ["839.0", "702.3"],
            "% dense": ["84.8", "71.0"], "peak @ clock": ["1070.5", "786.7"], "% @ clock": ["78.4", "89.3"],
            "SM MHz": ["1980", "1455"], "W": ["700", "690"], "shapes": ["86", "91"], "s": ["60", "61"]}
    check_shown(text, width, cols, droppable={"s", "shapes"}, heading="format",
                around=["TFLOPS = 1e12 FLOP/s (TOPS for int8)"])
    flat = " ".join(text.split())
    assert all(word in flat for word in ("skipped:", "no int8", "kernel"))  # the reason may wrap in its cell
    assert "peak @ clock = FLOP/clk/SM x SMs x median sampled SM clock" in flat
    assert "burst = an idle gap" in flat and "sustained = back to back" in flat


@pytest.mark.parametrize("width", WIDTHS)
def test_peak_table_on_a_cpu_explains_only_what_it_shows(width):
    """Regression: on a CPU the footer explained the peak @ clock and burst / sustained, none of them shown."""
    from truepeak.report.peak import render_peaks

    con, buf = console_at(width)
    render_peaks(CPU_PEAKS, console=con)
    text = buf.getvalue()
    # 5.295e10 FLOP/s = 0.05295 TFLOPS (four significant digits), 31.9 % of 0.1662
    check_shown(text, width, {"best shape MxNxK": ["1024x1024x1024"], "TFLOPS": ["0.05295"], "% dense": ["31.9"],
                              "shapes": ["5"], "s": ["4"]}, droppable={"s", "shapes"}, heading="format",
                around=["TFLOPS = 1e12 FLOP/s (TOPS for int8)"])
    flat = " ".join(text.split())
    assert flat.endswith("TFLOPS = 1e12 FLOP/s (TOPS for int8), median of the re-measured best shape; % dense = of the "
                         "DENSE spec peak. cpu = the host timer around back-to-back calls (a CPU has no burst or "
                         "sustained mode).")
    for gpu_only in ("peak @ clock", "SM MHz", "burst =", "sustained =", "mamf-finder"):
        assert gpu_only not in flat


# ----------------------------------------------------------------------------------------------------------------------
# truepeak comm


def _collective(op, nbytes, count, mode, time_s, busbw_factor=1.0):
    algbw = nbytes / time_s
    return Record.from_dict({
        "schema_version": 3, "kind": "collective", "status": "ok", "mode": mode, "backend": "gloo", "format": "bf16",
        "measurement": {"mode": mode, "median_s": time_s},
        "workload": {"op": op, "bytes": nbytes, "count": count, "dtype": "bf16", "n_ranks": 2},
        "derived": {"algbw_bytes_per_s": algbw, "busbw_bytes_per_s": algbw * busbw_factor},
        "correctness": {"wrong": 0, "checked": count, "passed": True},
        "run_config": {"n_ranks": 2, "backend": "gloo", "iters": 20, "warmup": 5}, "env": {"cpu": "AMD EPYC"}})


COMM = [
    # all_reduce on 2 ranks: busbw = algbw x 2(n-1)/n = algbw. 1 KiB in 700 us: 1024 / 7e-4 = 1.463e6 B/s = 0.00146
    # GB/s; 1 MiB (524,288 bf16) in 200 us: 5.243e9 B/s = 5.24 GB/s; graph replays 650 us and 180 us: 0.00158, 5.83
    _collective("all_reduce", 1024, 512, "eager", 7e-4), _collective("all_reduce", 2**20, 2**19, "eager", 2e-4),
    _collective("all_reduce", 1024, 512, "graph", 6.5e-4), _collective("all_reduce", 2**20, 2**19, "graph", 1.8e-4),
    Record.from_dict({"schema_version": 3, "kind": "collective_fit", "status": "ok", "mode": "eager",
                      "workload": {"op": "all_reduce", "n_ranks": 2, "dtype": "bf16", "min_bytes": 1024,
                                   "max_bytes": 2**20},
                      "measurement": {"mode": "eager", "points": [[1024, 7e-4], [2**20, 2e-4]]},
                      "derived": {"alpha_s": 6.98e-4, "busbw_bytes_per_s": 5.3e9, "points": 2,
                                  "max_rel_residual": 0.04}}),
]
ALGOS = {"all_reduce|1024": {"algo": "Ring", "proto": "LL"}, "all_reduce|1048576": {"algo": "Ring", "proto": "LL128"}}


@pytest.mark.parametrize("width", WIDTHS)
def test_comm_tables(width):
    from truepeak.report.comm import render_tables

    con, buf = console_at(width)
    render_tables(COMM, ALGOS, console=con)
    text = buf.getvalue()
    cols = {"S": ["1", "1"], "count": ["512", "524288"], "eager µs": ["700", "200"],
            "graph µs": ["650", "180"], "algbw": ["0.00146", "5.24", "0.00158", "5.83"],
            "busbw": ["0.00146", "5.24", "0.00158", "5.83"], "#wrong": ["0"] * 4, "NCCL algo/proto": [],
            # the fit: α 698 µs, busbw 5.30 GB/s, 2 points, 4 % max residual, sizes 1 KiB–1 MiB
            "α µs": ["698"], "busbw GB/s": ["5.30"], "points": ["2"], "max resid.": ["4"], "sizes": ["1", "1"]}
    around = ["truepeak comm: 2 ranks, gloo, bf16, 20 iters after 5 warm-up; AMD EPYC",
              "time per call in µs; algbw, busbw in GB/s = 1e9 B/s; S = nccl-tests total size"]
    check_shown(text, width, cols, around=around, droppable={"NCCL algo/proto", "sizes"}, heading="S")


# ----------------------------------------------------------------------------------------------------------------------
# truepeak compare


def _timed(rec: Record, time_s: float, rel_iqr: float) -> Record:
    out = rec.to_dict()
    out["measurement"] = {**out["measurement"], "steady_median_s": time_s, "steady_rel_iqr": rel_iqr}
    return Record.from_dict(out)


@pytest.mark.parametrize("width", WIDTHS)
def test_compare_table(three, width):
    from truepeak.report.compare import compare, compare_text, matching_line

    a = Results(records=[_timed(three[0], 1e-3, 0.001), _timed(three[1], 40e-6, 0.02), three[2]],
                sources=["a.jsonl"] * 3, files=["a.jsonl"])
    b = Results(records=[_timed(three[0], 1.003e-3, 0.001), _timed(three[1], 32e-6, 0.03), three[2]],
                sources=["b.jsonl"] * 3, files=["b.jsonl"])
    c = compare(a, b)
    text = compare_text(c, width=width)
    # copy: 1 ms -> 1.003 ms, B/A = 1 / 1.003 = 0.997, +0.3 %, noise max(0.1 %, 1 % floor) = 1 %;
    # decode: 40 -> 32 us, B/A = 1.250, -20.0 %, noise min(2 %, 3 %) = 2 %
    cols = {"case": text_tokens(*(r.case for r in c.rows)), "time A": ["1", "40"], "time B": ["1.003", "32"],
            "B/A": ["0.997", "1.250"], "change": ["0.3", "-20.0"], "noise": ["1", "2"],
            "note": text_tokens(*(r.note for r in c.rows))}
    around = ["A: a.jsonl (NVIDIA H200)", "B: b.jsonl (NVIDIA H200)", "1 faster, 1 same, 1 not ok", matching_line(c),
              "noise = max(min(IQR/median of A, of B), 1 %)"]
    check_shown(text, width, cols, around=around, droppable={"note"})


# ----------------------------------------------------------------------------------------------------------------------
# truepeak moe plan / moe bench


@pytest.fixture(scope="module")
def deepseek_plan():
    from truepeak.moe.config import load_model
    from truepeak.moe.layout import parse_layout, parse_layouts
    from truepeak.moe.plan import compare, plan

    mdl, acc = load_model("deepseek-v3"), get_accelerator("h200")
    layouts = parse_layouts("tp8,ep8,dp8ep8,tp4pp2")
    batches = [1, 8, 64, 512]
    return plan(mdl, acc, parse_layout("tp8"), 1), compare(mdl, acc, layouts, batches), layouts, batches


@pytest.mark.parametrize("width", WIDTHS)
def test_moe_plan_ops_table(deepseek_plan, width):
    from truepeak.cli.moe import render_plan

    p = deepseek_plan[0]
    lines = render_plan(p, width)
    table = "\n".join(lines[lines.index("  ops on one GPU of the slowest stage, per step:") + 1:])
    # the op's values at the precision the table documents: µs per call and ms per step 4 significant digits, FLOP/B 3
    cols = {"op": text_tokens(*(op.name for op in p.ops)), "calls": [str(op.calls) for op in p.ops],
            "µs/call": [f"{op.time_s * 1e6:.4g}" for op in p.ops], "ms/step": [f"{op.total_s * 1e3:.4g}" for op in p.ops],
            "FLOP/B": [f"{op.intensity:.3g}" for op in p.ops if op.intensity is not None],
            "shape": text_tokens(*(op.shape for op in p.ops))}
    check_shown(table, width, cols, droppable={"time from", "group", "shape"}, heading="op")


@pytest.mark.parametrize("width", WIDTHS)
def test_moe_plan_what_if_table(deepseek_plan, width):
    from truepeak.cli.moe import render_compare

    _, cells, layouts, batches = deepseek_plan
    text = "\n".join(render_compare(cells, layouts, batches, width))
    cols: dict[str, list[str]] = {"parallelism": text_tokens(*(lay.describe() for lay in layouts))}
    for cell in cells:
        # expected / ceiling tokens/s: whole from 100 up, else 4 significant digits
        for t in (cell.plan.expected.tokens_per_s, cell.plan.tokens_per_s):
            cols.setdefault(f"b={cell.batch}", []).append(f"{t:.0f}" if t >= 100 else f"{t:.4g}")
    assert all(len(cols[f"b={b}"]) == 2 * len(layouts) for b in batches)
    check_shown(text, width, cols, heading="layout")


@pytest.mark.parametrize("width", (80, 100, 120))
def test_moe_plan_text_fits_the_terminal_and_keeps_every_number(width):
    """Regression: the plan's header, rows, conclusions and levers printed as lines of 200-400 columns at an 80-column
    terminal. Above the ops table (fitted on its own) the text at ``width`` holds the same words, so the same
    numbers, as the piped text, wrapped into the width."""
    from truepeak.moe.plan.mtp import MtpSetting
    from truepeak.moe.plan import plan_set
    from truepeak.report.plan import render_text

    result = plan_set("deepseek-v3", "h200", gpus=8, batches=[1], mtp=MtpSetting(1, 0.85), with_levers=True)
    at, piped = render_text(result, width), render_text(result, None)
    cut = "  ops on one GPU of the slowest stage, per step:"
    prose_at, prose_piped = at[:at.index(cut)], piped[:piped.index(cut)]
    assert " ".join(prose_at).split() == " ".join(prose_piped).split()
    assert numbers(" ".join(prose_at)) == numbers(" ".join(prose_piped))
    # wider only where one word is wider than the room (a tuned-config file name), and then alone on its line
    assert all(cell_len(line) <= width or len(line.split()) == 1 for line in at)
    assert len(prose_at) > len(prose_piped)


def test_moe_plan_cli_piped_keeps_the_natural_table():
    r = CliRunner().invoke(app, ["moe", "plan", "--model", "deepseek-v3", "--gpu", "h200", "--gpus", "8"])
    assert r.exit_code == 0, r.output
    header = next(line for line in r.stdout.splitlines() if line.strip().startswith("op "))
    assert header.split() == ["op", "group", "calls", "µs/call", "ms/step", "bound", "FLOP/B", "shape", "time", "from"]
    assert "not shown" not in r.stdout


def _bench_record(fmt, tpe, backend, status="ok", reason=""):
    rec = {"schema_version": 3, "kind": "moe_experts", "status": status, "reason": reason, "backend": backend,
           "workload": {"model": "deepseek-v3", "layout": "ep8", "routing": "uniform", "tokens_per_expert": tpe,
                        "E_local": 32, "H": 7168, "I": 2048, "top_k": 8, "T": 512, "weights_format": fmt,
                        "activations": "e4m3"}}
    if status == "ok":
        # 41.5 us; 162.3 MB of active experts / 41.5e-6 s = 3.911e12 B/s = 3.911 TB/s = 91.2 % of a 4.288 TB/s read;
        # 51.2 GFLOP / 41.5e-6 s = 1.2 TFLOPS (one decimal)
        rec["measurement"] = {"mode": "sustained", "steady_median_s": 41.5e-6}
        rec["derived"] = {"time_s": 41.5e-6, "bytes_per_s": 162.3e6 / 41.5e-6, "read_bandwidth_fraction":
                          162.3e6 / 41.5e-6 / 4.288e12, "flop_per_s": 51.2e6 / 41.5e-6,
                          "read_bandwidth_bytes_per_s": 4.288e12}
        rec["correctness"] = {"max_rel_error": 2.1e-3, "passed": True}
    return Record.from_dict(rec)


@pytest.mark.parametrize("width", WIDTHS)
def test_moe_bench_table(width):
    from truepeak.report.moe import render

    recs = [_bench_record("fp8", 16, "triton"), _bench_record("fp8", 16, "grouped_mm"),
            _bench_record("nvfp4", 16, "triton", "skipped",
                          "nvfp4 weights need the dequant kernel on sm_90 or the block-scaled one on sm_100 / sm_120")]
    text = "\n".join(render(recs, width))
    cols = {"tok/exp": ["16"] * 3, "time µs": ["41.5"] * 2, "TB/s": ["3.911"] * 2, "% read bw": ["91.2"] * 2,
            "TFLOPS": ["1.2"] * 2, "error / status": ["2.1e-03"] * 2 + numbers(recs[2].reason)}
    check_shown(text, width, cols, around=["read bandwidth measured in this run: 4.288 TB/s; TB/s = 1e12 B/s"],
                heading="weights")

