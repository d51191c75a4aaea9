"""The typer application and the error boundary shared by every subcommand.

The CLI is a thin adapter: each command parses and validates its options, calls a library function that returns
objects, and renders them. Results go to stdout; progress, warnings and errors go to stderr.
"""

from __future__ import annotations

import sys

import typer

from truepeak.errors import TruepeakError

app = typer.Typer(
    name="truepeak",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode="rich",
)


def _version(value: bool) -> None:
    if value:
        from truepeak import __version__

        typer.echo(f"truepeak {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    version: bool = typer.Option(False, "--version", callback=_version, is_eager=True, help="Print the version and exit."),
) -> None:
    """Measured, correctly normalised GPU peaks for LLM inference engineers.

    Efficiency is always against DENSE peaks (datasheets since Hopper print 2:4-sparse tensor rates).
    Units: TFLOPS = 1e12 FLOP/s, GB/s = 1e9 B/s (decimal, as vendors and nccl-tests use).

    Start with: truepeak run (measure this device), truepeak specs NAME, truepeak efficiency --help.
    """


def fail(message: str, code: int = 2) -> typer.Exit:
    """Print ``error: message`` on stderr and return the Exit to raise (status 2 for bad input)."""
    typer.echo(f"error: {message}", err=True)
    return typer.Exit(code)


def main(argv: list[str] | None = None) -> None:
    """Console entry point: run the app; a :class:`TruepeakError` becomes one line on stderr and exit status 2."""
    try:
        app(args=argv, prog_name="truepeak")
    except TruepeakError as exc:
        typer.echo(f"error: {exc}", err=True)
        sys.exit(exc.exit_code)
    except KeyboardInterrupt:
        typer.echo("interrupted; records written so far are kept", err=True)
        sys.exit(130)
