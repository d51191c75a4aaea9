"""The console entry point's error boundary: every usage error is ONE line on stderr and exit status 2."""

from __future__ import annotations

import pytest

import truepeak.cli  # noqa: F401  (registers every command)
from truepeak.cli.app import main


def call(capsys, *args: str) -> tuple[int, str, str]:
    """Run ``truepeak ARGS`` through :func:`main`: (exit code, stdout, stderr)."""
    with pytest.raises(SystemExit) as info:
        main(list(args))
    captured = capsys.readouterr()
    return info.value.code, captured.out, captured.err


@pytest.mark.parametrize(("args", "needle", "see"), [
    (["efficiency", "--tflops", "abc"], "Invalid value 'abc' for '--tflops'", "truepeak efficiency --help"),
    (["efficiency", "--tflops=1x"], "Invalid value '1x' for '--tflops'", "truepeak efficiency --help"),
    (["moe", "tune", "--model", "deepseek-v3", "--weights", "bf16", "--tokens-per-expert", "1", "--tp", "abc"],
     "Invalid value 'abc' for '--tp': ", "truepeak moe tune --help"),
    (["efficiency", "--tflops", "100"], "Missing option '--gpu'", "truepeak efficiency --help"),
    (["bogus"], "No such command 'bogus'", "truepeak --help"),
    (["specs", "h200", "extra"], "unexpected extra argument", "truepeak specs --help"),
    (["specs", "--bogus"], "No such option: --bogus", "truepeak specs --help"),
    (["run", "--out"], "Option '--out' requires an argument", "truepeak run --help"),
])
def test_usage_errors_are_one_line_exit_2(capsys, args, needle, see):
    code, out, err = call(capsys, *args)
    assert code == 2
    assert out == ""
    assert err.count("\n") == 1, err  # one line, no boxed panel, no "Usage:" block
    assert err.startswith("error: ") and needle in err
    assert err.rstrip().endswith(f"(see '{see}')")
    assert "╭" not in err and "Usage:" not in err


def test_help_and_version_exit_0(capsys):
    code, out, err = call(capsys, "--help")
    assert code == 0 and "efficiency" in out and "specs" in out and err == ""
    code, out, _ = call(capsys, "specs", "--help")
    assert code == 0 and "--sources" in out
    code, out, _ = call(capsys, "--version")
    assert code == 0 and out.startswith("truepeak ")


def test_no_arguments_prints_the_help_once(capsys):
    code, out, err = call(capsys)
    assert code == 2
    assert out.count("Commands") == 1 and "error" not in err


def test_a_successful_command_exits_0(capsys):
    code, out, err = call(capsys, "specs", "h200")
    assert code == 0 and "H200" in out


def test_truepeak_errors_stay_one_line(capsys):
    code, _, err = call(capsys, "specs", "h300-nonexistent")
    assert code == 2 and err.startswith("error: ") and err.count("\n") == 1


def test_keyboard_interrupt_exits_130(capsys, monkeypatch):
    import typer.main

    class Boom:
        def main(self, **kwargs):
            raise KeyboardInterrupt

    monkeypatch.setattr(typer.main, "get_command", lambda app: Boom())
    code, _, err = call(capsys, "specs")
    assert code == 130 and err.count("\n") == 1


def test_unquoted_name_with_spaces_says_to_quote_it(capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(["specs", "NVIDIA", "H200"])
    assert exit_info.value.code == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1
    assert "must be quoted" in err and "(H200)" in err


@pytest.mark.parametrize(("args", "needle", "see"), [
    (["run", "--mode", ""], "an empty value '' after --mode", "truepeak run --help"),
    (["comm", "--ops", " "], "an empty value ' ' after --ops", "truepeak comm --help"),
    (["moe", "plan", "--model", "glm-5", "--layout="], "--layout was given an empty value", "truepeak moe plan --help"),
    (["moe", "tune", "--weights", ""], "an empty value '' after --weights", "truepeak moe tune --help"),
    (["report", ""], "an empty value '' as an argument", "truepeak report --help"),
])
def test_empty_values_are_refused_in_one_line(capsys, args, needle, see):
    # A blank value used to mean "the default" for some options (run --mode, comm --ops: the whole 1K:1G sweep) and
    # a file named "" for others; now every command refuses it the same way.
    code, out, err = call(capsys, *args)
    assert code == 2 and out == ""
    assert err.count("\n") == 1 and needle in err and see in err, err


@pytest.mark.parametrize("command", ["", "specs", "efficiency", "run", "peak", "report", "compare", "comm",
                                     "moe plan", "moe bench", "moe tune", "serve"])
def test_help_at_80_columns_cuts_no_word(command):
    """Regression: at 80 columns rich cut three option texts with an ellipsis (``powerlaw:ALPHA[:random|sorted|…``,
    ``benchmarks/build_calibration.…``, the moe bench output folder): a word longer than the help column is cut,
    not wrapped, so the help must not hold one."""
    import os
    import subprocess
    import sys

    env = {**os.environ, "COLUMNS": "80", "TERM": "xterm"}
    env.pop("NO_COLOR", None)
    out = subprocess.run([sys.executable, "-m", "truepeak", *command.split(), "--help"], capture_output=True,
                         text=True, env=env, check=True).stdout
    assert "Usage" in out
    assert [line for line in out.splitlines() if "…" in line] == []
