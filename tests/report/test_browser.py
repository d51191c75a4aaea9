"""The HTML report of the committed H200 run, opened in headless Chromium: every chart rendered (its SVG holds plotted
data, and its region of a screenshot holds coloured pixels), the page logged no console errors, and a screenshot of the
whole page is not blank.

Needs Debian's ``chromium`` (``.ci/run`` installs it; ``apt-get install -y chromium chromium-driver``); skipped when it
is absent. Chromium is started with the flags that keep it off the (closed) network: ``--headless --no-sandbox
--disable-gpu --no-first-run --disable-background-networking --disable-component-update --disable-sync``, a fresh
``--user-data-dir``, and ``--enable-logging=stderr --v=0`` so that the page's console messages (``CONSOLE``) appear
on stderr. Three Chromium starts of ~2 s each; the whole file takes well under 20 s.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

from truepeak.report.html import html_report
from truepeak.report.load import load_results
from truepeak.report.plots import FORMAT_COLOURS

ROOT = Path(__file__).resolve().parents[2]
H200 = ROOT / "docs" / "results" / "h200" / "results.jsonl.gz"
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
pytestmark = pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed (apt-get install -y chromium)")

FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking",
         "--disable-component-update", "--disable-sync", "--disable-quic", "--hide-scrollbars",
         "--enable-logging=stderr", "--v=0")
CELL_W, CELL_H = 640, 480


def shoot(page: Path, png: Path, width: int, height: int, profile: Path) -> str:
    """Screenshot ``page`` into ``png``; returns Chromium's stderr (its log, with the page's console lines)."""
    proc = subprocess.run([CHROMIUM, *FLAGS, f"--user-data-dir={profile}", f"--screenshot={png}",
                           f"--window-size={width},{height}", page.as_uri()],
                          capture_output=True, text=True, timeout=90)
    assert png.exists(), proc.stderr[-2000:]
    return proc.stderr


def console_lines(log: str) -> list[str]:
    """The page's console messages and uncaught errors in Chromium's log (``INFO:CONSOLE...``)."""
    return [line for line in log.splitlines() if ":CONSOLE" in line]


def pixels(png: Path):
    from PIL import Image

    return Image.open(png).convert("RGB")


def coloured_fraction(img, box) -> tuple[float, float]:
    """(fraction of non-white pixels, fraction of saturated pixels) in ``box`` of ``img``."""
    import numpy as np

    a = np.asarray(img.crop(box), dtype=np.int16)
    non_white = float((a.min(axis=2) < 235).mean())
    coloured = float((a.max(axis=2) - a.min(axis=2) > 60).mean())
    return non_white, coloured


@pytest.fixture(scope="module")
def rendered(tmp_path_factory):
    out = tmp_path_factory.mktemp("browser")
    page = out / "report.html"
    page.write_text(html_report(load_results([H200])), encoding="utf-8")
    return out, page


def charts(page_text: str) -> list[tuple[str, str]]:
    return re.findall(r'<figure class="chart" data-chart="(\w+)">(<svg.*?</svg>)', page_text, flags=re.S)


def test_every_chart_has_plotted_data(rendered):
    _, page = rendered
    found = charts(page.read_text())
    assert [name for name, _ in found] == ["peaks", "roofline", "decode"]
    palette = {c.lower() for c in FORMAT_COLOURS.values()} | {"#08519c", "#9ecae1"}
    for name, svg in found:
        colours = set(re.findall(r"(?:stroke|fill): (#[0-9a-f]{6})", svg))
        assert colours & palette, f"{name}: no data colour in its SVG"
        drawn = len(re.findall(r'<g id="(?:line2d|PathCollection|patch)_\d+"', svg))
        assert drawn > 10, f"{name}: only {drawn} drawn elements"


def test_page_renders_without_console_errors(rendered):
    out, page = rendered
    png = out / "page.png"
    log = shoot(page, png, 1280, 4000, out / "profile-page")
    assert console_lines(log) == []
    img = pixels(png)
    assert img.size == (1280, 4000)
    non_white, coloured = coloured_fraction(img, (0, 0, 1280, 4000))
    assert non_white > 0.02 and coloured > 0.005


def test_each_chart_region_is_not_blank(rendered):
    """Each chart alone in a fixed 640 x 480 cell of one page, one screenshot: every cell holds drawn axes (non-white)
    and plotted data (saturated colours)."""
    out, page = rendered
    found = charts(page.read_text())
    cells = "".join(
        f'<div style="position:absolute;left:{(i % 2) * CELL_W}px;top:{(i // 2) * CELL_H}px;width:{CELL_W}px;'
        f'height:{CELL_H}px">{svg}</div>' for i, (_, svg) in enumerate(found))
    grid = out / "grid.html"
    grid.write_text('<!DOCTYPE html><html><head><meta charset="utf-8"><link rel="icon" href="data:,"><style>'
                    "body{margin:0;background:#fff} svg{width:100%;height:100%}</style></head><body>"
                    f"{cells}</body></html>", encoding="utf-8")
    rows = (len(found) + 1) // 2
    png = out / "grid.png"
    log = shoot(grid, png, 2 * CELL_W, rows * CELL_H, out / "profile-grid")
    assert console_lines(log) == []
    img = pixels(png)
    for i, (name, _) in enumerate(found):
        x, y = (i % 2) * CELL_W, (i // 2) * CELL_H
        non_white, coloured = coloured_fraction(img, (x, y, x + CELL_W, y + CELL_H))
        assert non_white > 0.02, f"{name}: blank ({non_white:.3%} non-white)"
        assert coloured > 0.002, f"{name}: no plotted data visible ({coloured:.3%} coloured)"


def test_console_errors_would_be_caught(tmp_path):
    """The detector itself: a page that logs an error and throws is caught."""
    bad = tmp_path / "bad.html"
    bad.write_text('<html><body><script>console.error("boom"); missingFunction();</script></body></html>')
    log = shoot(bad, tmp_path / "bad.png", 400, 300, tmp_path / "profile")
    found = console_lines(log)
    assert any("boom" in line for line in found) and any("missingFunction" in line for line in found)


#: Counts the line boxes of every format cell (``td.fmt``) once the page has loaded and writes them into the DOM,
#: which ``--dump-dom`` prints.
LINE_COUNTER = ("<script>window.addEventListener('load',()=>{const out=[];for(const td of "
                "document.querySelectorAll('td.fmt')){const r=document.createRange();r.selectNodeContents(td);"
                "out.push(td.textContent+'='+new Set([...r.getClientRects()].map(x=>Math.round(x.top))).size);}"
                "document.body.setAttribute('data-lines',out.join('|'));});</script>")


def format_cell_lines(page_text: str, path: Path, profile: Path, width: int = 500) -> list[tuple[str, int]]:
    """``(text, lines)`` of every format cell of ``page_text`` laid out by Chromium in a ``width``-px window."""
    path.write_text(page_text.replace("</body>", LINE_COUNTER + "</body>"), encoding="utf-8")
    proc = subprocess.run([CHROMIUM, *FLAGS, f"--user-data-dir={profile}", f"--window-size={width},800",
                           "--dump-dom", path.as_uri()], capture_output=True, text=True, timeout=90)
    m = re.search(r'data-lines="([^"]*)"', proc.stdout)
    assert m, proc.stderr[-2000:]
    return [(c.rsplit("=", 1)[0], int(c.rsplit("=", 1)[1])) for c in m.group(1).split("|")]


def test_format_labels_stay_on_one_line(tmp_path):
    """Regression: in a narrow window "fp8_e4m3 (per-tensor)" wrapped at its hyphen ("fp8_e4m3 (per-" / "tensor)").
    The re-measured records of the committed H200 peak search, laid out 500 px wide: every format cell is one line;
    the same page without the nowrap rule wraps the fp8 label (so the check can fail)."""
    peak = load_results([ROOT / "docs" / "results" / "h200" / "peak" / "results.jsonl.gz"])
    recs = [r for r in peak.records if r.search is not None and r.search.phase == "remeasure"]
    assert {r.format for r in recs} == {"bf16", "fp8_e4m3"} and len(recs) == 12
    page = html_report(recs)
    cells = format_cell_lines(page, tmp_path / "page.html", tmp_path / "profile")
    assert ("fp8_e4m3 (per-tensor)", 1) in cells and ("bf16", 1) in cells
    assert all(n == 1 for _, n in cells), cells
    control = format_cell_lines(page.replace("td.fmt { white-space: nowrap; }", ""), tmp_path / "control.html",
                                tmp_path / "profile2")
    assert any(text == "fp8_e4m3 (per-tensor)" and n > 1 for text, n in control)
