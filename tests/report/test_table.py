"""The results table from hand-made records (tests/report/conftest.py): one unit per time column, cells formatted by
truepeak.units, the units footer."""

from __future__ import annotations

from truepeak.report.table import columns, interrupted_line, table_rows, table_text, time_unit
from truepeak.units import UNITS_FOOTER, fmt_time_in


def test_time_unit_is_chosen_from_the_smallest_time():
    assert time_unit([12e-6, 0.02]) == ("us", 1e-6)
    assert time_unit([0.0012, 0.5]) == ("ms", 1e-3)
    assert time_unit([2.0]) == ("s", 1.0)
    assert time_unit([]) == ("us", 1e-6)
    assert time_unit([None, float("nan"), 0.0, 3e-3]) == ("ms", 1e-3)


def test_times_in_the_column_unit_keep_four_significant_digits():
    assert fmt_time_in(0.0216361, 1e-6) == "21636"  # never 2.164e+04
    assert fmt_time_in(6.711e-6, 1e-6) == "6.711"
    assert fmt_time_in(1.5e-3, 1e-6) == "1500"
    assert fmt_time_in(12.345e-3, 1e-3) == "12.35"
    assert fmt_time_in(None, 1e-6) == "-"


def test_rows_by_hand(three):
    rows, meta = table_rows(three)
    assert meta == {"time_unit": "us", "modes": ["sustained"], "has_clock": True,
                    "footer": f"{UNITS_FOOTER}; mode: sustained"}
    copy, decode, probe = rows
    # a copy: 2 x 2 GiB in 1 ms = 4295 GB/s, 89.5 % of 4800 GB/s, bound by memory by definition
    assert (copy["time"], copy["rate"], copy["bandwidth"], copy["pct_roofline"], copy["bound"]) == (
        "1000", "-", "4295", "89.5", "memory")
    # 939,524,096 FLOP in 40 us = 23.49 TFLOPS = 2.37 % of 989.4; 59,080,704 B in 40 us = 1477 GB/s = 30.8 % of 4800
    assert decode == {"shape": "16x4096x7168", "format": "bf16", "mode": "sustained", "time": "40", "rate": "23.49",
                      "bandwidth": "1477",
                      "pct_dense": "2.37", "pct_roofline": "30.8", "bound": "memory", "pct_at_clock": "2.48",
                      "status": "ok", "note": ""}
    assert probe["status"] == "skipped" and probe["time"] == probe["rate"] == probe["bound"] == "-"
    assert probe["note"] == "nvfp4 GEMM needs sm_100 or sm_120; this device is sm_90"
    assert [h for _, h in columns(meta)][2] == "time (µs)"


def test_no_clock_column_without_a_clock(three):
    rows, meta = table_rows(three[:1])
    assert not meta["has_clock"] and "pct_at_clock" not in dict(columns(meta))


def test_table_text_has_the_footer_on_one_line(three):
    text = table_text(three, title="t")  # not a terminal: natural width, every footer whole
    assert f"{UNITS_FOOTER}; mode: sustained" in text.splitlines()
    for header in ("shape (MxNxK)", "format", "time (µs)", "TFLOPS", "GB/s", "% dense peak", "% roofline", "bound",
                   "% peak @ clock", "status"):
        assert header in text
    assert "skipped" in text and "23.49" in text


def test_warnings_go_to_the_note(three, edit):
    noisy = edit(three[1], **{"measurement.warning_codes": ["noisy"], "reason": "rotation capped"})
    assert table_rows([noisy])[0][0]["note"] == "rotation capped; noisy"


def test_the_records_own_warnings_go_to_the_note_in_full(three, edit):
    """A record warning that is not the measurement's (a GEMM above its roofline) is shown in full beside the codes."""
    above = "104.5 % of the roofline: this GEMM moved its minimum bytes at 19.4 GB/s, above the 18.6 GB/s ceiling"
    rec = edit(three[1], **{"measurement.warning_codes": ["very_noisy"],
                            "measurement.warnings": ["very noisy: IQR is 30 %"],
                            "warnings": ["very noisy: IQR is 30 %", above]})
    assert table_rows([rec])[0][0]["note"] == f"very_noisy; {above}"
    clean = edit(three[1], warnings=[above])
    assert table_rows([clean])[0][0]["note"] == above


def test_an_interrupted_runs_line_ends_the_footer(three):
    line = interrupted_line(2, 4, "truepeak run --resume --out r --device cpu --quick")
    assert line == "Interrupted after 2 of 4 cases; continue with: truepeak run --resume --out r --device cpu --quick"
    text = table_text(three[:2], notice=line)  # not a terminal: never wrapped
    assert text.splitlines()[-2:] == [f"{UNITS_FOOTER}; mode: sustained", line]
    # a terminal of 60 columns: wrapped at spaces to 60, not to the table's width, and the notice last
    narrow = table_text(three[:2], notice=line, width=60).splitlines()
    assert max(len(x) for x in narrow) <= 60
    assert " ".join(x.strip() for x in narrow[-2:]) == line  # the notice in two lines, after the footer
    assert line not in table_text(three[:2])


def _variant(rec, *, mode=None, scaling=None, time_s=None):
    """A copy of a hand-made record with another mode / fp8 scale layout / time (derived values left as they are)."""
    out = rec.to_dict()
    if mode:
        out["mode"] = out["measurement"]["mode"] = mode
    if scaling:
        out["format"] = "fp8_e4m3"
        out["workload"]["scaling"] = scaling
    if time_s:
        out["measurement"]["steady_median_s"] = time_s
    return type(rec).from_dict(out)


def test_mode_column_only_when_a_run_holds_two_modes(three):
    """Regression: a `--mode both` run printed sustained and burst rows of one shape identically (no per-row mode)."""
    decode = three[1]
    both = [decode, _variant(decode, mode="burst", time_s=32e-6)]
    rows, meta = table_rows(both)
    assert meta["modes"] == ["burst", "sustained"]
    assert [h for _, h in columns(meta)][:4] == ["shape (MxNxK)", "format", "mode", "time (µs)"]
    assert [(r["shape"], r["mode"], r["time"]) for r in rows] == [("16x4096x7168", "sustained", "40"),
                                                                   ("16x4096x7168", "burst", "32")]
    text = table_text(both)
    assert "mode: burst, sustained" in text
    # one mode: no column (the footer names it)
    assert "mode" not in dict(columns(table_rows(three)[1]))


def test_fp8_scale_layout_is_shown_beside_the_format(three):
    """Regression: fp8 per-tensor / per-row / block128 rows of one shape looked identical."""
    decode = three[1]
    recs = [_variant(decode, scaling=s) for s in ("tensor", "row", "block128")]
    rows, _ = table_rows(recs)
    assert [r["format"] for r in rows] == ["fp8_e4m3 (per-tensor)", "fp8_e4m3 (per-row)", "fp8_e4m3 (block128)"]
    assert table_rows(three)[0][1]["format"] == "bf16"  # no scaling: the bare format
