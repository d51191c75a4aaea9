"""`truepeak report`: render results files (any kind of record) as a self-contained HTML page, Markdown and CSV.

Thin adapter: read the files tolerantly (:func:`truepeak.report.load.load_results`: a torn or malformed line, a record
of another schema version or an empty file is named on stderr and left out, the rest is rendered; at most
:data:`truepeak.records.REPEAT_LIMIT` warnings of one kind per file, then one line counting the rest) → render
(:mod:`truepeak.report.html`, :func:`truepeak.report.markdown.report_markdown`, :func:`truepeak.report.export.csv_text`)
→ write. The paths written go to stderr; ``-`` as a file writes to stdout. No valid record in any file is an error
(exit status 2) naming the problems and the schema versions understood.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Optional

import typer

from truepeak.cli.app import app
from truepeak.cli.options import help_text
from truepeak.errors import TruepeakError

HELP = help_text([
    "Render results files (from truepeak run, peak, moe bench, moe tune, comm) as reports: a self-contained HTML page "
    "with charts (opens with no network), Markdown, and CSV.",
    "The HTML shows the device and environment; spec against measured peaks per format (dense and 2:4-sparse "
    "labelled, the peak at the measured SM clock); a roofline per device (arithmetic intensity in FLOP/B against "
    "TFLOPS, memory and compute ceilings) with the measured points of each format; efficiency against M at decode; "
    "MoE % of read bandwidth against tokens per expert; collective algbw/busbw against message size; and warnings "
    "(throttling, noise, cache-resident working sets, skipped and failed cases).",
    "Bad lines (a torn last line, another schema version) are named on stderr and left out; the rest is rendered.",
    "Examples:",
    "  truepeak report h200/results.jsonl    (writes h200/report.html)",
    "  truepeak report a.jsonl b.jsonl --html both.html --md both.md --csv both.csv",
    "  truepeak report results.jsonl --md -    (Markdown on stdout)",
    "Units: TFLOPS = 1e12 FLOP/s, GB/s = 1e9 B/s (decimal); the CSV holds SI values (s, FLOP/s, B/s, fractions).",
])


def _write(text: str, target: str, what: str) -> None:
    if target == "-":
        sys.stdout.write(text)
        return
    p = Path(target)
    try:
        if p.parent and not p.parent.exists():
            p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text, encoding="utf-8")
    except OSError as exc:
        raise TruepeakError(f"cannot write the {what} to {p}: {exc.strerror or exc}") from exc
    typer.echo(f"{what}: {p}", err=True)


def _same(a: Path, b: Path) -> bool:
    try:
        return a.resolve() == b.resolve() or (a.exists() and b.exists() and a.samefile(b))
    except OSError:
        return False


def _check_targets(results: list[str], targets: dict[str, Optional[str]]) -> None:
    """Refuse, before anything is written, an output that is one of the results files (writing it would destroy the
    records) and two outputs to the same file (one would overwrite the other; ``-`` counts once per option too).

    Raises:
        TruepeakError: one line naming the option and the path.
    """
    seen: dict[str, str] = {}
    for option, target in targets.items():
        if target is None:
            continue
        if target != "-":
            for source in results:
                if _same(Path(target), Path(source)):
                    raise TruepeakError(f"{option} {target} is the results file being read; writing it would destroy "
                                        "the records: choose another path")
        for other, path in seen.items():
            if (target == path == "-") or (target != "-" and path != "-" and _same(Path(target), Path(path))):
                raise TruepeakError(f"{other} and {option} both write to {target}; give each its own file")
        seen[option] = target


@app.command("report", help=HELP)
def report_command(
    results: list[str] = typer.Argument(..., metavar="RESULTS.jsonl...", help="Results files (JSON Lines), or the folders truepeak wrote them in (their results.jsonl)."),
    html: Optional[str] = typer.Option(None, "--html", metavar="FILE",
                                       help="Write the HTML report here (default: report.html beside the first "
                                            "file, when no other output is asked for)."),
    md: Optional[str] = typer.Option(None, "--md", metavar="FILE", help="Write the Markdown report ('-': stdout)."),
    csv: Optional[str] = typer.Option(None, "--csv", metavar="FILE", help="Write every record as CSV ('-': stdout)."),
) -> None:
    from truepeak.records import cap_repeats, problem_kind
    from truepeak.report.load import load_results

    data = load_results(results)
    data.require_records()  # nothing usable: one error that names the problems, without warnings repeating them
    for line in cap_repeats((f"{p.path}: {problem_kind(p.why)}", f"{p} (left out)") for p in data.problems):
        typer.echo(f"warning: {line}", err=True)  # at most REPEAT_LIMIT of each kind, then one line counting the rest
    if html is None and md is None and csv is None:
        html = str(Path(data.files[0]).parent / "report.html")
    _check_targets(data.files, {"--html": html, "--md": md, "--csv": csv})
    if html is not None:
        from truepeak.report.html import html_report

        _write(html_report(data), html, "html report")
    if md is not None:
        from truepeak.report.markdown import report_markdown

        _write(report_markdown(data), md, "markdown report")
    if csv is not None:
        from truepeak.report.export import csv_text

        _write(csv_text(data), csv, "csv")
