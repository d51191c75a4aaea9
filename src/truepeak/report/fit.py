"""Tables that fit the width they are printed at, without ever cutting a number: the one rule every table truepeak
prints follows (``specs``, ``run``, ``peak``, ``comm``, ``compare``, ``moe plan``, ``moe bench``).

The rule, given the cells as already formatted strings and the width of the output:

- **Not a terminal** (piped, redirected to a file, captured by a test): the table at its natural width. Every cell
  on one line; nothing is cut, wrapped or left out, whatever ``COLUMNS`` says.
- **A terminal of W columns**, the first of these that fits in W:

  1. the table at its natural width;
  2. headers wrapped onto two lines at a space, and the text of columns marked ``wrap`` (notes, sources, names)
     wrapped at spaces, never inside a word; numbers and every other cell keep their full width;
  3. the same without the outer border and the lines between columns (the ``compact`` style);
  4. 2 and 3 again with the columns marked ``drop`` left out, lowest ``priority`` first (the rightmost of equal
     priority first); one footer line names them (:func:`dropped_line`);
  5. the **stacked** layout: one block per row, its first cell as a heading, then ``header: value`` one per line,
     values wrapped at spaces.

A cell is never cut, never ellipsised and never folded inside a word: the narrowest a column gets is its longest
word (its whole cells where it may not wrap), so a number always shows every digit. Widths are terminal cells
(:func:`rich.cells.cell_len`: ``µ``, ``†``, ``α`` count one).

Two renderers share the layout: :func:`fit_table` builds a rich renderable (a :class:`rich.table.Table`, or a
:class:`rich.text.Text` for the stacked layout) and :func:`print_table` prints it on a console with its footer;
:func:`fit_lines` gives plain text lines (columns two spaces apart, a row of dashes under the header) for the
commands that print lines (``moe plan``, ``moe bench``).
"""

from __future__ import annotations

import re
import textwrap
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Union

from rich.cells import cell_len
from rich.text import Text

#: A cell: plain text, or a :class:`rich.text.Text` (for a style, e.g. a coloured status); never markup.
Cell = Union[str, Text]

#: A column that may wrap is not made narrower than this (nor than its longest word; its natural width if that is
#: smaller): narrower, a note of a few hundred characters would take dozens of lines, and a droppable column is
#: better left out.
WRAP_FLOOR = 20

BOXED = "boxed"      # rich's default box: heavy header rule, vertical lines between columns, an outer border
COMPACT = "compact"  # one rule under the header, columns two spaces apart, no border
PLAIN = "plain"      # plain text lines: header, a row of dashes, columns two spaces apart (fit_lines)
STACKED = "stacked"  # one block of ``header: value`` lines per row


@dataclass(frozen=True)
class Column:
    """How one column may be fitted.

    Attributes:
        header: the header text; it may wrap onto two lines at a space, never losing characters.
        numeric: right-aligned (numbers); its cells never wrap.
        wrap: its text may wrap at spaces (notes, sources, long names); otherwise every cell stays on one line.
        drop: it may be left out when the table does not fit otherwise (notes, sources, origin).
        priority: among the droppable columns, the lowest priority is left out first.
        justify: ``"left"``, ``"right"`` or ``"center"``; default right for a numeric column, else left.
    """

    header: str
    numeric: bool = False
    wrap: bool = False
    drop: bool = False
    priority: int = 0
    justify: str | None = None

    @property
    def align(self) -> str:
        return self.justify or ("right" if self.numeric else "left")


@dataclass(frozen=True)
class Layout:
    """The result of fitting: which columns show, how wide, in which style.

    Attributes:
        style: :data:`BOXED`, :data:`COMPACT`, :data:`PLAIN` or :data:`STACKED`.
        shown: indices of the columns shown, in order.
        widths: content width (terminal cells, padding and borders excluded) of each shown column.
        dropped: headers of the columns left out.
        width: the width of the rendered table in terminal cells (for stacked: the width it was wrapped to, or the
            longest line when not a terminal).
    """

    style: str
    shown: tuple[int, ...]
    widths: tuple[int, ...]
    dropped: tuple[str, ...]
    width: int


@dataclass
class TableData:
    """A table before it is fitted: its column specs and its rows of formatted cells (for code that builds tables in
    one place and prints them in another, as ``truepeak specs`` does)."""

    columns: list[Column]
    rows: list[list[Cell]]


def _plain(cell: Cell) -> str:
    return cell.plain if isinstance(cell, Text) else str(cell)


def _lines(text: str) -> list[str]:
    return text.split("\n") if text else [""]


def _longest_word(text: str) -> int:
    return max((cell_len(w) for w in text.split()), default=0)


def header_min_width(header: str) -> int:
    """The narrowest a header gets: split at one space into two lines, the longer line's width (``"% dense peak"``
    -> 7: ``% dense`` / ``peak``); a header without a space keeps its width."""
    words = header.split(" ")
    best = cell_len(header)
    for i in range(1, len(words)):
        best = min(best, max(cell_len(" ".join(words[:i])), cell_len(" ".join(words[i:]))))
    return best


def _natural(col: Column, cells: list[str]) -> int:
    return max([cell_len(col.header)] + [cell_len(line) for c in cells for line in _lines(c)])


def _minimum(col: Column, cells: list[str]) -> int:
    if col.wrap:
        body = max([_longest_word(c) for c in cells] + [0])
        natural = max([cell_len(line) for c in cells for line in _lines(c)] + [0])
        body = max(body, min(natural, WRAP_FLOOR))
    else:
        body = max([cell_len(line) for c in cells for line in _lines(c)] + [0])
    return max(header_min_width(col.header), body)


def overhead(style: str, n: int) -> int:
    """Terminal cells a table of ``n`` columns adds to its cells' widths: :data:`BOXED` a border and one padding
    space on each side of every cell (``3n + 1``); :data:`COMPACT` and :data:`PLAIN` two spaces between columns
    (``2(n - 1)``)."""
    if n == 0:
        return 0
    return 3 * n + 1 if style == BOXED else 2 * (n - 1)


def layout(columns: Sequence[Column], rows: Sequence[Sequence[Cell]], width: int | None,
           styles: Sequence[str] = (BOXED, COMPACT)) -> Layout:
    """Fit a table into ``width`` terminal cells by the rule of this module.

    Args:
        columns: the column specs.
        rows: the cells, one sequence per row, as many as ``columns``.
        width: the terminal's width; None when the output is not a terminal (the natural width, always).
        styles: the table styles to try, in order (:data:`BOXED`, :data:`COMPACT`, or :data:`PLAIN` alone).

    Raises:
        ValueError: a row with another number of cells than ``columns``.
    """
    for i, row in enumerate(rows):
        if len(row) != len(columns):
            raise ValueError(f"row {i} has {len(row)} cells for {len(columns)} columns")
    cells = [[_plain(r[j]) for r in rows] for j in range(len(columns))]
    natural = [_natural(c, cells[j]) for j, c in enumerate(columns)]
    everything = tuple(range(len(columns)))
    if width is None:
        return Layout(styles[0], everything, tuple(natural), (), sum(natural) + overhead(styles[0], len(columns)))
    minimum = [_minimum(c, cells[j]) for j, c in enumerate(columns)]
    droppable = sorted((j for j, c in enumerate(columns) if c.drop), key=lambda j: (columns[j].priority, -j))
    shown = list(everything)
    for n_dropped in range(len(droppable) + 1):
        if n_dropped:
            shown.remove(droppable[n_dropped - 1])
        for style in styles:
            budget = width - overhead(style, len(shown))
            if sum(natural[j] for j in shown) <= budget:
                widths = {j: natural[j] for j in shown}
            elif sum(minimum[j] for j in shown) <= budget:
                widths = _distribute(columns, shown, minimum, natural, budget)
            else:
                continue
            dropped = tuple(columns[j].header for j in everything if j not in shown)
            return Layout(style, tuple(shown), tuple(widths[j] for j in shown), dropped,
                          sum(widths.values()) + overhead(style, len(shown)))
    return Layout(STACKED, everything, tuple(natural), (), width)


def _distribute(columns, shown, minimum, natural, budget) -> dict[int, int]:
    """Widths from the minima up: first every column that does not wrap gets its one-line header back (left to
    right, while the space lasts), then the wrapping columns share what is left (left to right, each up to its
    natural width)."""
    widths = {j: minimum[j] for j in shown}
    spare = budget - sum(widths.values())
    for wrapping in (False, True):
        for j in shown:
            if columns[j].wrap != wrapping:
                continue
            grow = min(natural[j] - widths[j], spare)
            if grow > 0:
                widths[j] += grow
                spare -= grow
    return widths


def dropped_line(dropped: Sequence[str], width: int) -> str:
    """The footer line under a table that left columns out: ``"not shown at 80 columns: note, source; widen the
    terminal or pipe the output"``."""
    return f"not shown at {width} columns: {', '.join(dropped)}; widen the terminal or pipe the output"


# ----------------------------------------------------------------------------------------------------------------------
# Rich renderer


@dataclass
class Fitted:
    """A fitted table: its :class:`Layout`, what to print (``renderable``) and the footer line naming the columns left
    out (``note``, None when every column shows)."""

    layout: Layout
    renderable: Any
    note: str | None


def fit_table(columns: Sequence[Column], rows: Sequence[Sequence[Cell]], width: int | None, *,
              title: str | None = None, title_justify: str = "center", header_style: str = "bold") -> Fitted:
    """The table as a rich renderable fitted into ``width`` (None: not a terminal, the natural width).

    Args:
        columns: the column specs (:class:`Column`).
        rows: the formatted cells (str or :class:`rich.text.Text`; never parsed as markup).
        width: the terminal's width in cells, or None for output that is not a terminal.
        title: a title over the table (the first line of a stacked layout).
        title_justify: where a table's title sits (``"left"``, ``"center"``).
        header_style: rich style of the header row (and of the headings of a stacked layout).

    Returns:
        A :class:`Fitted`; print ``renderable`` at a width of at least ``layout.width`` (:func:`print_table` does).

    Raises:
        ValueError: a row with another number of cells than ``columns``.
    """
    lay = layout(columns, rows, width)
    note = dropped_line(lay.dropped, width) if lay.dropped and width is not None else None
    if lay.style == STACKED:
        return Fitted(lay, _stacked_text(columns, rows, width, title, header_style), note)
    from rich import box
    from rich.table import Table

    if lay.style == BOXED:
        table = Table(title=title, title_justify=title_justify, header_style=header_style)
    else:
        table = Table(title=title, title_justify=title_justify, header_style=header_style, box=box.SIMPLE_HEAD,
                      show_edge=False, pad_edge=False, padding=(0, 1, 0, 0))
    for j, w in zip(lay.shown, lay.widths):
        c = columns[j]
        table.add_column(c.header, justify=c.align, width=w, no_wrap=False, overflow="fold")
    for r in rows:
        table.add_row(*(r[j] if isinstance(r[j], Text) else Text(str(r[j])) for j in lay.shown))
    return Fitted(lay, table, note)


def _stacked_text(columns, rows, width, title, header_style) -> Text:
    out = Text()
    if title:
        out.append(title, style=header_style)
        out.append("\n\n")
    for i, line_style in enumerate(stacked_lines(columns, rows, width, styled=True)):
        line, style = line_style
        if i:
            out.append("\n")
        out.append(line, style=header_style if style else None)
    return out


def stacked_lines(columns: Sequence[Column], rows: Sequence[Sequence[Cell]], width: int | None, *,
                  styled: bool = False, indent: str = "") -> list:
    """The stacked layout as lines: per row, its first cell as a heading, then ``  header: value`` for each other
    non-empty cell, values aligned and wrapped at spaces into ``width`` (not at all when None); a blank line between
    rows. With ``styled=True`` each item is ``(line, is_heading)``."""
    labels = [f"{c.header}:" for c in columns[1:]]
    label_w = max((cell_len(x) for x in labels), default=0)
    pad = "  "
    out: list = []
    for n, r in enumerate(rows):
        if n:
            out.append(("", False))
        room = None if width is None else width - cell_len(indent)
        out += [(indent + line, True) for line in _wrap(_plain(r[0]), room)]
        for label, cell in zip(labels, r[1:]):
            value = _plain(cell)
            if not value.strip():
                continue
            head = f"{indent}{pad}{label.ljust(label_w)} "
            room = None if width is None else width - cell_len(head)
            if room is not None and room < WRAP_FLOOR:  # a long label: the value goes on its own lines below
                out.append((f"{indent}{pad}{label}", False))
                head = indent + pad * 2
                room = width - cell_len(head)
            parts = _wrap(value, room)
            out.append((head + parts[0], False))
            out += [(" " * cell_len(head) + p, False) for p in parts[1:]]
    return out if styled else [line for line, _ in out]


def _wrap(text: str, width: int | None) -> list[str]:
    """``text`` wrapped at spaces into ``width`` cells; a word longer than the width stays whole on its own line."""
    if width is None:
        return _lines(text)
    out: list[str] = []
    for para in _lines(text):
        out += textwrap.wrap(para, width=max(width, 1), break_long_words=False, break_on_hyphens=False) or [""]
    return out


#: A label column at the start of a line of prose: words, then two or more spaces before the value
#: (``"  ceiling step    3.365 ms ..."``); continuation lines start under the value.
_LABEL = re.compile(r"\S.*?\S {2,}(?=\S)|\S {2,}(?=\S)")

#: The spaces :func:`wrap_line` never breaks at: between a number and its unit (``3.36 ms``, ``900 GB/s``,
#: ``62.0 %``) and inside a product of numbers (``1 x 4096``).
_GLUE = re.compile(r"(?<=\d) (?=(?:ms|µs|ns|s|GB/s|TB/s|GB|MB|KiB|MiB|GiB|B|TFLOPS|tok/s|tokens/s|FLOP/B|%|W|MHz|"
                   r"GHz)(?![\w/])|x \d)|(?<=\d x) (?=\d)")
_NO_BREAK = "\x00"


def wrap_line(text: str, width: int | None) -> list[str]:
    """One line of prose (a sentence, a ``label   value`` row, a ``- `` bullet) fitted into ``width`` terminal
    columns: unchanged when it fits or when ``width`` is None (not a terminal: one line that can be grepped); else
    wrapped at spaces, never inside a word nor between a number and its unit, the continuation lines indented to
    where its text starts (after the bullet, or under the value of a label within the first half of the width).
    Table lines are fitted by :func:`fit_lines` and never reach this wider than ``width`` except for a word longer
    than the room."""
    if width is None or cell_len(text) <= width:
        return [text]
    lead = len(text) - len(text.lstrip(" "))
    body = text[lead:]
    hang = 2 if body.startswith("- ") else 0
    m = None if hang else _LABEL.match(body)
    if m is not None and lead + m.end() <= width // 2:
        hang = m.end()
    room = max(width - lead, hang + 1)
    parts = textwrap.wrap(_GLUE.sub(_NO_BREAK, body), width=room, subsequent_indent=" " * hang,
                          break_long_words=False, break_on_hyphens=False, replace_whitespace=False)
    return [" " * lead + part.replace(_NO_BREAK, " ") for part in parts] or [text]


def wrap_lines(lines: Sequence[str], width: int | None) -> list[str]:
    """Every line of ``lines`` through :func:`wrap_line`."""
    return [part for line in lines for part in wrap_line(line, width)]


# ----------------------------------------------------------------------------------------------------------------------
# Printing on a console


def terminal_width(console: Any) -> int | None:
    """The width to fit a table into on ``console``: its width when it writes to a terminal, None otherwise (piped,
    a file: the natural width)."""
    return console.width if console.is_terminal else None


def stdout_width() -> int | None:
    """:func:`terminal_width` of standard output: the terminal's width, or None when stdout is not a terminal. For
    commands that build their output as text lines (``compare``, ``moe plan``, ``moe bench``)."""
    from rich.console import Console

    return terminal_width(Console())


def stderr_width() -> int | None:
    """:func:`terminal_width` of standard error: for the notes and status lines commands write there."""
    from rich.console import Console

    return terminal_width(Console(stderr=True))


def _console_for(console: Any, width: int) -> Any:
    """``console`` itself when it is at least ``width`` wide, else a console on the same file that is (rich crops a
    print to the console's width)."""
    if console.width >= width:
        return console
    from rich.console import Console

    return Console(file=console.file, width=width, highlight=False, soft_wrap=False,
                   color_system=console.color_system, force_terminal=console.is_terminal, no_color=console.no_color)


def print_line(console: Any, text: str) -> None:
    """One line of text under or over a table: wrapped at spaces to a terminal's width, never wrapped when the output
    is not a terminal (one line that can be grepped)."""
    if console.is_terminal:
        console.print(Text(text), overflow="fold")
    else:
        console.print(Text(text), soft_wrap=True)


def print_table(console: Any, columns: Sequence[Column], rows: Sequence[Sequence[Cell]], *, title: str | None = None,
                title_justify: str = "center", header_style: str = "bold") -> Fitted:
    """Fit the table to ``console`` (:func:`terminal_width`), print it, then the line naming any column left out.

    Returns:
        The :class:`Fitted` table (its layout says what was shown).
    """
    fitted = fit_table(columns, rows, terminal_width(console), title=title, title_justify=title_justify,
                       header_style=header_style)
    target = _console_for(console, fitted.layout.width)
    target.print(fitted.renderable)
    if fitted.note:
        print_line(console, fitted.note)
    return fitted


# ----------------------------------------------------------------------------------------------------------------------
# Plain text renderer


def fit_lines(columns: Sequence[Column], rows: Sequence[Sequence[Cell]], width: int | None, *,
              indent: str = "") -> list[str]:
    """The table as plain text lines fitted into ``width`` (None: not a terminal, the natural width): a header (two
    lines where a header wraps), a row of dashes, then the rows (several lines where a cell wraps), columns two spaces
    apart, every line prefixed with ``indent`` and stripped on the right; or the stacked layout; and last, where
    columns were left out, the :func:`dropped_line` (wrapped at spaces into ``width``).

    Raises:
        ValueError: a row with another number of cells than ``columns``.
    """
    room = None if width is None else width - cell_len(indent)
    lay = layout(columns, rows, room, styles=(PLAIN,))
    if lay.style == STACKED:
        return stacked_lines(columns, rows, room, indent=indent)
    shown = [columns[j] for j in lay.shown]

    def block(cells: list[str], widths) -> list[str]:
        parts = [_wrap(c, w) if cell_len(c) > w else _lines(c) for c, w in zip(cells, widths)]
        out = []
        for k in range(max(len(p) for p in parts)):
            line = "  ".join(_just(p[k] if k < len(p) else "", w, col.align)
                             for p, w, col in zip(parts, widths, shown))
            out.append((indent + line).rstrip())
        return out

    lines = block([c.header for c in shown], lay.widths)
    lines.append((indent + "  ".join("-" * w for w in lay.widths)).rstrip())
    for r in rows:
        lines += block([_plain(r[j]) for j in lay.shown], lay.widths)
    if lay.dropped:
        lines += [indent + x for x in _wrap(dropped_line(lay.dropped, width), room)]
    return lines


def _just(text: str, width: int, align: str) -> str:
    gap = max(0, width - cell_len(text))
    if align == "right":
        return " " * gap + text
    if align == "center":
        return " " * (gap // 2) + text + " " * (gap - gap // 2)
    return text + " " * gap


__all__ = ["Cell", "Column", "TableData", "Layout", "Fitted", "WRAP_FLOOR", "BOXED", "COMPACT", "PLAIN", "STACKED",
           "header_min_width", "overhead", "layout", "dropped_line", "fit_table", "stacked_lines", "terminal_width",
           "stdout_width", "stderr_width",
           "wrap_line", "wrap_lines", "print_line", "print_table", "fit_lines"]
