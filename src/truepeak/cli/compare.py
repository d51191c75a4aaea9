"""`truepeak compare A.jsonl B.jsonl`: case-by-case ratios of run B against reference run A, with a verdict that
respects the measured noise (faster, slower, or same within noise).

Thin adapter over :func:`truepeak.report.compare.compare` (the matching and the noise rule are documented there). The
table (or ``--json``) goes to stdout; unusable lines of either file are warnings in the output. Runs of different
devices are compared too, with a warning first.
"""

from __future__ import annotations

import typer

from truepeak.cli.app import app
from truepeak.cli.options import help_text

HELP = help_text([
    "Compare two results files: match records by what they measured: kind, workload (M, N, K and the fp8 scale "
    "layout of a GEMM; tokens per expert; message size), backend, format and mode, and print B/A (throughput of B "
    "over A = time A / time B) with a verdict per case. Files of any command match: a truepeak peak search (several "
    "records per shape) against a truepeak run. A file with several records of one case is represented by its "
    "re-measured record (search phase remeasure), else the one with the most samples; the output says how many cases "
    "were matched and how many were left unmatched on each side.",
    "Verdict (after nvbench's compare): same when |time B / time A - 1| <= the noise, where the noise is the smaller "
    "IQR/median of the two records, at least --min-noise (default 1 %, for run-to-run drift); else faster or slower. "
    "Skipped or failed cases and cases in one file only are listed as such.",
    "Examples:",
    "  truepeak compare before/results.jsonl after/results.jsonl",
    "  truepeak compare a.jsonl b.jsonl --json",
    "  truepeak compare h200/results.jsonl h200-peak/results.jsonl    (a run's squares against a peak search)",
    "Runs of different devices are compared with a warning at the top.",
])


@app.command("compare", help=HELP)
def compare_command(
    a: str = typer.Argument(..., metavar="A.jsonl", help="The reference run: a results file, or the folder truepeak wrote it in."),
    b: str = typer.Argument(..., metavar="B.jsonl", help="The run compared against A (a file or a folder, as A)."),
    as_json: bool = typer.Option(False, "--json", help="Print the comparison as JSON (SI seconds, fractions)."),
    min_noise: float = typer.Option(1.0, "--min-noise", metavar="PCT",
                                    help="Floor of the noise threshold, in percent."),
    changed: bool = typer.Option(False, "--changed", help="Show only the cases that are not 'same'."),
) -> None:
    from truepeak.report.compare import compare, compare_json, compare_text
    from truepeak.report.load import load_results

    result = compare(load_results([a]), load_results([b]), min_noise=min_noise / 100)
    if as_json:
        typer.echo(compare_json(result))
    else:
        from truepeak.report.fit import stdout_width

        typer.echo(compare_text(result, width=stdout_width(), all_rows=not changed), nl=False)
