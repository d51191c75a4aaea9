"""The typer application and the error boundary shared by every subcommand.

The CLI is a thin adapter: each command parses and validates its options, calls a library function that returns
objects, and renders them. Results go to stdout; progress, warnings and errors go to stderr.
"""

from __future__ import annotations

import sys
from typing import Any

import typer
import typer.main

try:  # typer >= 0.2x carries its own copy of click; older typer uses click itself
    from typer._click.exceptions import BadParameter, ClickException, UsageError
except ImportError:  # pragma: no cover
    from click.exceptions import BadParameter, ClickException, UsageError

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


def _usage_hint(exc: ClickException, command: Any, args: list[str]) -> str:
    """`` (see 'truepeak specs --help')``: the help of the command the error is about (from the error's context, else
    the subcommands the arguments name, ``truepeak moe tune``)."""
    ctx = getattr(exc, "ctx", None)
    if ctx is not None and ctx.command.get_help_option(ctx) is not None:
        return f" (see '{ctx.command_path} {ctx.help_option_names[0]}')"
    path = ["truepeak"]
    for a in (a for a in args if not a.startswith("-")):  # down the subcommands named (``moe tune``)
        names = getattr(command, "commands", {}) or {}
        if a not in names:
            break
        path.append(a)
        command = names[a]
    return f" (see '{' '.join(path)} --help')"


def invoked_argv(ctx: Any) -> list[str] | None:
    """The command line as the user typed it (``["truepeak", "run", ...]``), when :func:`main` started this command;
    None otherwise (the command was invoked some other way, e.g. typer's CliRunner)."""
    obj = ctx.find_root().obj if ctx is not None else None
    argv = obj.get("argv") if isinstance(obj, dict) else None
    return list(argv) if argv is not None else None


#: Options whose command says more about an empty value than the generic rule (``--out``: where results go instead).
_OWN_EMPTY_MESSAGE = frozenset({"--out", "-o"})


def _empty_value(args: list[str]) -> str | None:
    """Why the command line is refused before parsing, or None: an empty or blank value (``--mode ""``,
    ``--ops=``, ``report ""``). No truepeak option means anything by an empty value, and click would pass it on as
    "not given" for some options and as a file name or format for others; one rule for all commands instead."""
    for i, a in enumerate(args):
        if a.startswith("--") and "=" in a and not a.split("=", 1)[1].strip():
            if a.split("=", 1)[0] in _OWN_EMPTY_MESSAGE:
                continue
            return f"{a.split('=', 1)[0]} was given an empty value; give one"
        if not a.strip():
            prev = args[i - 1] if i else ""
            if prev in _OWN_EMPTY_MESSAGE:
                continue
            where = f"after {prev}" if prev.startswith("-") else "as an argument"
            return f"an empty value {a!r} {where}; give a value"
    return None


def _with_typed_value(exc: Exception, message: str, args: list[str]) -> str:
    """Click's ``Invalid value for '--tp': ...`` names the option but not what was typed (typer's own integer and
    float messages do not either): put the value the user gave after the option's name, as in ``Invalid value 'abc'
    for '--tp': ...``. Other messages, and options not found in ``args``, are returned unchanged."""
    param = getattr(exc, "param", None)
    if not isinstance(exc, BadParameter) or param is None:
        return message
    for opt in getattr(param, "opts", ()):
        head = f"Invalid value for '{opt}':"
        if head not in message:
            continue
        for i, a in enumerate(args):
            if a == opt and i + 1 < len(args):
                value = args[i + 1]
            elif a.startswith(opt + "="):
                value = a[len(opt) + 1:]
            else:
                continue
            if repr(value) in message or f"'{value}'" in message:  # click's own message names it already
                return message
            return message.replace(head, f"Invalid value {value!r} for '{opt}':", 1)
    return message


def main(argv: list[str] | None = None) -> None:
    """Console entry point: run the app and exit with its status.

    Every failure the user can cause ends in ONE line on stderr, never a traceback or a boxed panel:

    - a usage error (bad option value, missing option, unknown command or option, extra argument):
      ``error: <click's message> (see 'truepeak <cmd> --help')``, exit status 2;
    - a :class:`TruepeakError`: ``error: <message>``, its exit status (2);
    - Ctrl-C (KeyboardInterrupt, click's Abort): exit status 130. SIGTERM (``kill``, ``timeout``, a batch
      scheduler) is handled as Ctrl-C, so a command keeps what finished and stops what it started, and exits 143;
      a second signal within :data:`REPEAT_WINDOW_S` of the first is the same stop and is ignored.

    ``--help`` and ``--version`` print and exit 0. ``argv`` (default ``sys.argv[1:]``) is recorded as typed, after
    ``truepeak``, in the records ``truepeak run`` writes.
    """
    args = list(sys.argv[1:] if argv is None else argv)
    command = typer.main.get_command(app)
    empty = _empty_value(args)
    if empty is not None:
        typer.echo(f"error: {empty}{_usage_hint(UsageError(''), command, args)}", err=True)
        sys.exit(2)
    terminated = _terminate_as_interrupt()
    try:
        rv = command.main(args=args, prog_name="truepeak", standalone_mode=False,
                          obj={"argv": ["truepeak", *args]})
    except TruepeakError as exc:
        typer.echo(f"error: {exc}", err=True)
        sys.exit(exc.exit_code)
    except UsageError as exc:
        if type(exc).__name__ == "NoArgsIsHelpError":  # `truepeak` alone: the help is already printed
            sys.exit(2)
        message = _with_typed_value(exc, exc.format_message(), args)
        if "unexpected extra argument" in message:
            message += "; a name with spaces must be quoted, e.g. truepeak specs \"NVIDIA H200\""
        typer.echo(f"error: {message}{_usage_hint(exc, command, args)}", err=True)
        sys.exit(2)
    except ClickException as exc:
        typer.echo(f"error: {exc.format_message()}", err=True)
        sys.exit(exc.exit_code)
    except (typer.Abort, KeyboardInterrupt):
        typer.echo("terminated" if terminated else "interrupted", err=True)
        sys.exit(143 if terminated else 130)
    code = rv if isinstance(rv, int) else 0
    sys.exit(143 if terminated and code == 130 else code)


class _Terminated:
    """Truthy once SIGTERM arrived (see :func:`_terminate_as_interrupt`)."""

    def __init__(self) -> None:
        self.seen = False
        self.first_at: float | None = None

    def __bool__(self) -> bool:
        return self.seen


#: Seconds after a Ctrl-C or SIGTERM in which another one is taken for the same stop and ignored: ``timeout`` and
#: a terminal can deliver a signal to the process and again through its group, and a second KeyboardInterrupt
#: raised while the first is handled would cut the summary short. A later one interrupts again.
REPEAT_WINDOW_S = 2.0


def _terminate_as_interrupt() -> _Terminated:
    """Make SIGTERM raise KeyboardInterrupt in the main thread, as Ctrl-C does, so the commands' interrupt handling
    (records kept, summaries written, launched servers and workers stopped) runs for it too; a repeat of either
    within :data:`REPEAT_WINDOW_S` is ignored. Returns a flag that turns true when SIGTERM came. Outside the main
    thread (an embedding program) nothing is installed."""
    import signal
    import threading
    import time

    flag = _Terminated()
    if threading.current_thread() is not threading.main_thread():
        return flag

    def handler(signum, frame):
        now = time.monotonic()
        if flag.first_at is not None and now - flag.first_at < REPEAT_WINDOW_S:
            return  # the same stop, delivered twice
        flag.first_at = now
        if signum == signal.SIGTERM:
            flag.seen = True
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, handler)
    signal.signal(signal.SIGINT, handler)
    return flag
