"""One check of an ``--out`` folder argument for every command that writes a results folder (run, peak, comm, moe
bench): the same one-line error, exit status 2, and nothing measured or created
(:func:`truepeak.bench.outdir.check_out_arg`)."""

from __future__ import annotations

import pytest

pytest.importorskip("torch")

import truepeak.cli  # noqa: E402,F401  (registers every command)
from truepeak.cli.app import main  # noqa: E402

#: Each command (by the name its default folder carries) with options that make it valid, so that only --out can be
#: refused (moe bench needs a GPU to measure, but its --out is checked before anything else).
COMMANDS = {
    "run": ["run", "--device", "cpu", "--quick", "--no-progress"],
    "peak": ["peak", "--device", "cpu", "--budget", "1", "--quiet"],
    "comm": ["comm", "--backend", "gloo", "--nproc-per-node", "2", "--sizes", "1K", "--no-progress"],
    "moe-bench": ["moe", "bench", "--model", "deepseek-v3", "--tokens-per-expert", "1"],
}


def call(capsys, *args: str) -> tuple[int, str, str]:
    with pytest.raises(SystemExit) as info:
        main(list(args))
    captured = capsys.readouterr()
    return info.value.code, captured.out, captured.err


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_out_naming_a_file_is_the_same_one_line_everywhere(capsys, tmp_path, monkeypatch, command):
    """Regression: `comm --out /dev/null` said "File exists" where `run` said "is an existing file, not a folder"."""
    monkeypatch.chdir(tmp_path)
    code, out, err = call(capsys, *COMMANDS[command], "--out", "/dev/null")
    assert (code, out) == (2, "")
    assert err == "error: --out /dev/null is an existing file, not a folder; choose a folder path for the results\n"
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_out_naming_a_jsonl_file_says_out_is_a_folder(capsys, tmp_path, monkeypatch, command):
    monkeypatch.chdir(tmp_path)
    code, out, err = call(capsys, *COMMANDS[command], "--out", "results.jsonl")
    assert (code, out) == (2, "")
    assert err == ("error: --out results.jsonl: --out is a folder, and the records go to results.jsonl inside it; "
                   "give a folder, e.g. --out results\n")
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_empty_out_names_the_commands_default_folder(capsys, tmp_path, monkeypatch, command):
    monkeypatch.chdir(tmp_path)
    code, out, err = call(capsys, *COMMANDS[command], "--out", "")
    assert (code, out) == (2, "")
    assert err == (f"error: --out is empty; give a folder for the results (e.g. --out h200-run), or omit --out for "
                   f"./truepeak-{command}-YYYYmmdd-HHMMSS\n")
    assert list(tmp_path.iterdir()) == []
