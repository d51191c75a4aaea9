"""`truepeak specs`: the spec catalog, one accelerator's dense and sparse peaks, and headline-claim checks.

Thin adapter: parse → :mod:`truepeak.hardware` (``load_catalog``, ``get_accelerator``, ``check_claim``) → render
through :mod:`truepeak.report.specs` (rich tables, the claim's lines, or the ``--json`` documents it describes). Bad
input raises a :class:`~truepeak.errors.TruepeakError`; the entry point prints ``error: <one line>`` and exits with
status 2.
"""

from __future__ import annotations

from typing import Optional

import typer

from truepeak.cli.app import app
from truepeak.cli.options import help_text
from truepeak.errors import TruepeakError
from truepeak.hardware.catalog import load_catalog
from truepeak.hardware.claims import check_claim
from truepeak.hardware.lookup import get_accelerator
from truepeak.report.specs import (
    DERIVED_MARK, FOOTER, UNVERIFIED_MARK, accelerator_json, catalog_json, claim_lines, print_accelerator,
    print_catalog,
)

HELP = help_text([
    "Spec catalog: DENSE and 2:4-sparse peaks per number format, memory, clocks, caches and power, every number "
    "with its source.",
    "Datasheets since Hopper print tensor rates WITH sparsity, and 'AI TOPS' is sparse FP4: use the dense column for "
    "efficiency. --claim says which one a headline figure is.",
    "Examples:",
    "  truepeak specs    (one row per accelerator)",
    "  truepeak specs h200    (peaks, memory, clocks, L2, smem, TDP)",
    "  truepeak specs \"NVIDIA H100 80GB HBM3\" --sources",
    "  truepeak specs rtx-pro-6000-ws --claim \"4 PFLOPS FP4\"",
    "  → sparse (2:4); use the dense 2015.2 TFLOPS",
    "  truepeak specs 5090 --json > rtx5090.json",
    "NAME is a marketing name, a torch.cuda.get_device_name() / NVML string or an alias (case, spaces and hyphens "
    "do not matter).",
    f"Units: {FOOTER}. Values marked {DERIVED_MARK} are derived (computed from other published numbers), "
    f"{UNVERIFIED_MARK} unverified.",
])


@app.command("specs", help=HELP)
def specs_command(
    name: Optional[str] = typer.Argument(
        None, metavar="NAME", help="Accelerator: marketing name, device string or alias (e.g. h200, 'NVIDIA L40S', 5090). "
        "Omit to list all."),
    sources: bool = typer.Option(
        False, "--sources", help="Show where each number comes from (without NAME: the source keys)."),
    as_json: bool = typer.Option(
        False, "--json", help="Print machine-readable JSON (SI units) to stdout instead of tables."),
    claim: Optional[str] = typer.Option(
        None, "--claim", metavar="TEXT", help="Check a headline figure against NAME, e.g. '4 PFLOPS FP4', '4000 AI TOPS', "
        "'1979 TFLOPS BF16': is it dense or sparse, and which dense peak to use."),
) -> None:
    """Print the catalog, one accelerator, or a claim verdict."""
    if claim is not None and name is None:
        raise TruepeakError("--claim needs an accelerator NAME, e.g. truepeak specs rtx-pro-6000-ws --claim '4 PFLOPS FP4'")
    if name is None:
        catalog = load_catalog()
        if as_json:
            typer.echo(catalog_json(catalog))
        else:
            print_catalog(catalog, sources=sources)
        return

    acc = get_accelerator(name)
    verdict = check_claim(acc, claim) if claim is not None else None
    if as_json:
        typer.echo(accelerator_json(acc, verdict))
    elif verdict is not None:
        from truepeak.report.fit import stdout_width, wrap_lines

        for line in wrap_lines(claim_lines(verdict), stdout_width()):
            typer.echo(line)
    else:
        print_accelerator(acc, sources=load_catalog().sources if sources else None)
