"""truepeak.report.fit: the one fitting rule of every table, on small hand-made tables whose widths are counted by
hand. (Every CLI table at 80, 100, 120 columns and piped: tests/report/test_table_widths.py.)"""

from __future__ import annotations

import io

import pytest
from rich.console import Console

from truepeak.report.fit import (BOXED, COMPACT, PLAIN, STACKED, Column, dropped_line, fit_lines, fit_table,
                                 header_min_width, layout, overhead, print_table, stacked_lines)

# A run-table-like table. Natural widths (header or widest cell): shape 13 ("shape (MxNxK)"), GB/s 4 ("41.6"),
# % dense peak 12, note 49.
COLS = [Column("shape (MxNxK)"), Column("GB/s", numeric=True), Column("% dense peak", numeric=True),
        Column("note", wrap=True, drop=True)]
NOTE = "noisy; 118.6 % of the roofline at 8.38 GB/s today"  # 49 cells, longest word "roofline" (8)
ROWS = [["1x4096x7168", "41.6", "2.52", NOTE], ["copy 256 MiB", "7.06", "-", ""]]


def terminal(width: int) -> tuple[Console, io.StringIO]:
    buf = io.StringIO()
    return Console(file=buf, width=width, force_terminal=True, color_system=None), buf


def piped() -> tuple[Console, io.StringIO]:
    buf = io.StringIO()
    return Console(file=buf, width=80, force_terminal=False, color_system=None), buf


def test_header_min_width_splits_at_one_space():
    assert header_min_width("% dense peak") == 7          # "% dense" / "peak"
    assert header_min_width("sparse (2:4) TFLOPS") == 12  # "sparse (2:4)" / "TFLOPS" (or "sparse" / "(2:4) TFLOPS")
    assert header_min_width("time (µs)") == 4             # "time" / "(µs)": µ is one cell
    assert header_min_width("FLOP/clk/SM") == 11          # no space: never split


def test_overhead_by_style():
    # boxed: "│ " + cell + " " per column and the closing "│": 3n + 1; compact / plain: two spaces between columns
    assert overhead(BOXED, 4) == 13 and overhead(COMPACT, 4) == 6 and overhead(PLAIN, 1) == 0


def test_natural_width_when_not_a_terminal():
    lay = layout(COLS, ROWS, None)
    assert lay.style == BOXED and lay.widths == (13, 4, 12, 49) and lay.dropped == ()
    assert lay.width == 13 + 4 + 12 + 49 + 13  # 91


def test_the_rule_step_by_step():
    # 91 fits 91: the natural table
    assert layout(COLS, ROWS, 91).widths == (13, 4, 12, 49)
    # minima: shape 12 (its header splits to "shape" / "(MxNxK)" = 7, its widest cell "copy 256 MiB" is 12), GB/s 4,
    # % dense peak 7, note 20 (the wrap floor; its longest word is 8): 43
    # 60: boxed 43 + 13 = 56 <= 60; the 4 spare cells go to the columns that do not wrap, left to right: shape 12 -> 13
    # (natural), % dense peak 7 -> 10 (its header still on two lines); none left for the note
    lay = layout(COLS, ROWS, 60)
    assert (lay.style, lay.widths, lay.width) == (BOXED, (13, 4, 10, 20), 60)
    # 50: boxed needs 56; compact 43 + 6 = 49, the spare cell to shape
    lay = layout(COLS, ROWS, 50)
    assert (lay.style, lay.widths, lay.dropped) == (COMPACT, (13, 4, 7, 20), ())
    # 40: the note is left out: boxed 13 + 4 + 12 + 10 = 39 <= 40 (every header on one line again)
    lay = layout(COLS, ROWS, 40)
    assert (lay.style, lay.shown, lay.widths, lay.dropped) == (BOXED, (0, 1, 2), (13, 4, 12), ("note",))
    # 26: compact without the note needs 12 + 4 + 7 + 4 = 27: stacked
    assert layout(COLS, ROWS, 27).style == COMPACT and layout(COLS, ROWS, 26).style == STACKED


def test_rendered_width_equals_the_layout_width_and_no_number_is_cut():
    for width in (91, 60, 50, 40, 26):
        fitted = fit_table(COLS, ROWS, width)
        con, buf = terminal(width)
        con.print(fitted.renderable)
        lines = buf.getvalue().splitlines()
        if fitted.layout.style != STACKED:
            assert {len(x) for x in lines} == {fitted.layout.width}, width  # rich draws exactly the planned width
        assert max(len(x) for x in lines) <= width
        text = buf.getvalue()
        assert "…" not in text and "41.6" in text and "7.06" in text and "2.52" in text, width
        assert "4\n" not in text  # regression: 41.6 GB/s printed as "4" in a one-cell column


def test_print_table_names_the_dropped_columns():
    con, buf = terminal(40)
    fitted = print_table(con, COLS, ROWS)
    assert fitted.note == "not shown at 40 columns: note; widen the terminal or pipe the output"
    # the note line wraps at spaces to the terminal's 40 columns
    assert " ".join(x.strip() for x in buf.getvalue().splitlines()[-2:]) == fitted.note
    assert dropped_line(["note", "source"], 80) == ("not shown at 80 columns: note, source; widen the terminal or pipe "
                                                    "the output")


def test_piped_output_is_never_cut_nor_wrapped():
    con, buf = piped()  # a non-terminal console of 80 columns
    print_table(con, COLS, ROWS, title="t")
    lines = buf.getvalue().splitlines()
    assert max(len(x) for x in lines) == 91 and any(NOTE in x for x in lines)
    assert "not shown" not in buf.getvalue()


def test_stacked_layout_by_hand():
    assert stacked_lines(COLS, ROWS, 40) == [
        "1x4096x7168",
        "  GB/s:         41.6",
        "  % dense peak: 2.52",
        "  note:         noisy; 118.6 % of the",   # 16 cells of label, 24 left for the value
        "                roofline at 8.38 GB/s",
        "                today",
        "",
        "copy 256 MiB",
        "  GB/s:         7.06",
        "  % dense peak: -",                       # an empty note is not shown
    ]


def test_plain_lines_match_the_aligned_text_tables():
    # natural width: header, dashes, rows, two spaces apart, stripped on the right
    assert fit_lines(COLS[:3], [r[:3] for r in ROWS], None, indent="  ") == [
        "  shape (MxNxK)  GB/s  % dense peak",
        "  -------------  ----  ------------",
        "  1x4096x7168    41.6          2.52",
        "  copy 256 MiB   7.06             -",
    ]
    # 40 columns, indent 2: with the note 12 + 4 + 7 + 20 + 6 (gaps) = 49 > 38; without it the natural 13 + 4 + 12 + 4
    # = 33 <= 38
    lines = fit_lines(COLS, ROWS, 40, indent="  ")
    assert lines[:4] == ["  shape (MxNxK)  GB/s  % dense peak", "  -------------  ----  ------------",
                         "  1x4096x7168    41.6          2.52", "  copy 256 MiB   7.06             -"]
    assert lines[4:] == ["  not shown at 40 columns: note; widen", "  the terminal or pipe the output"]  # 38 cells
    assert max(len(x) for x in lines) <= 40


def test_plain_lines_wrap_headers_and_text_without_cutting_words():
    cols = [Column("op", wrap=True), Column("µs/call", numeric=True)]
    rows = [["vocab-parallel embedding all-reduce", "16.87"]]
    # 30 columns: op min = max(longest word 10, min(35, 20)) = 20; 20 + 7 + 2 = 29 <= 30, op gets 21
    assert fit_lines(cols, rows, 30) == ["op                     µs/call", "---------------------  -------",
                                         "vocab-parallel           16.87", "embedding all-reduce"]


def test_a_row_of_the_wrong_length_is_refused():
    with pytest.raises(ValueError, match="row 0 has 1 cells for 4 columns"):
        layout(COLS, [["x"]], 80)


# -- wrap_line: prose lines of `moe plan` fitted to a terminal ------------------------------------------------------


def test_wrap_line_leaves_a_fitting_line_and_piped_output_alone():
    from truepeak.report.fit import wrap_line

    long = "  bottleneck      " + "word " * 40
    assert wrap_line("short", 80) == ["short"]
    assert wrap_line(long, None) == [long]


def test_wrap_line_hangs_under_the_label_and_keeps_numbers_with_units():
    from truepeak.report.fit import wrap_line

    line = ("  ceiling step    3.365 ms → 297 tokens/s total, 37.15 tokens/s per GPU, 297 tokens/s per sequence at "
            "1 x 4096 tokens")
    out = wrap_line(line, 40)
    # the label is 2 + 16 columns: every continuation starts at column 18
    assert out[0].startswith("  ceiling step    3.365 ms")
    assert all(l.startswith(" " * 18) and l[18] != " " for l in out[1:])
    assert all(len(l) <= 40 for l in out)
    # nothing lost or reordered, and no number parted from its unit
    assert " ".join(l.strip() for l in out).split() == line.split()
    joined = "\n".join(out)
    for kept in ("3.365 ms", "297 tokens/s", "37.15 tokens/s", "1 x 4096"):
        assert kept in joined


def test_wrap_line_hangs_after_a_bullet_and_keeps_a_long_word_whole():
    from truepeak.report.fit import wrap_line

    out = wrap_line("    - +73.8 % tok/s, step +0.981 ms (267 tok/s): twice the batch, E=256,N=256,device_name=NVIDIA_H200.json",
                    30)
    assert out[0] == "    - +73.8 % tok/s, step"
    assert all(l.startswith("      ") for l in out[1:])
    assert "      E=256,N=256,device_name=NVIDIA_H200.json" in out   # wider than 30: on its own line, whole
