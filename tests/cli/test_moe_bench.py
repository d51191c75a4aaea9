"""`truepeak moe bench` command line: help, registration on `truepeak moe`, one-line errors for bad input."""

from __future__ import annotations

import importlib.util

import pytest

from truepeak.cli.app import main

#: The values `truepeak moe bench` checks inside truepeak.bench.moe.run_bench, after torch is required: without torch
#: the command says how to install it instead (the other values are checked by the CLI, with or without torch).
checked_after_torch = pytest.mark.skipif(importlib.util.find_spec("torch") is None,
                                         reason="checked inside truepeak.bench.moe.run_bench, after torch is required")


def run(capsys, *args):
    with pytest.raises(SystemExit) as exc:
        main(["moe", "bench", *args])
    cap = capsys.readouterr()
    return exc.value.code, cap.out, cap.err


def test_help_teaches_the_terms(capsys):
    code, out, _ = run(capsys, "--help")
    assert code == 0
    assert "tokens per expert" in out and "read bandwidth" in out and "--ep" in out


@pytest.mark.parametrize("args,msg", [
    pytest.param(["--model", "deepseek-v3", "--ep", "7"], "error: --ep 7 does not divide the 256 experts of deepseek-v3",
                 marks=checked_after_torch),
    pytest.param(["--model", "deepseek-v3", "--tokens-per-expert", "0"],
                 "error: tokens per expert must be a finite number > 0, got 0.0", marks=checked_after_torch),
    (["--model", "deepseek-v3", "--tokens-per-expert", "a"], "error: tokens per expert 'a' is not a number"),
    pytest.param(["--model", "deepseek-v3", "--weights", "fp5"], "error: unknown --weights 'fp5'",
                 marks=checked_after_torch),
    pytest.param(["--model", "deepseek-v3", "--routing", "zipf"], "error: unknown routing 'zipf'",
                 marks=checked_after_torch),
    # regression: inf went through to round(inf * E / k) and ended in an OverflowError traceback
    pytest.param(["--model", "deepseek-v3", "--tokens-per-expert", "1,inf"],
                 "error: tokens per expert must be a finite number > 0, got inf", marks=checked_after_torch),
    # regression: a zero / negative / infinite time budget was not checked
    pytest.param(["--model", "deepseek-v3", "--budget", "0"], "error: --budget 0.0 must be a finite number of seconds > 0",
                 marks=checked_after_torch),
    pytest.param(["--model", "deepseek-v3", "--budget", "inf"],
                 "error: --budget inf must be a finite number of seconds > 0", marks=checked_after_torch),
    # regression: empty items of the comma lists were skipped, so a typo ran a different sweep
    (["--model", "deepseek-v3", "--tokens-per-expert", "1,,8"],
     "error: tokens per expert '1,,8' has an empty item; give e.g. 1,2,4,8,16,32"),
    (["--model", "deepseek-v3", "--weights", "bf16,"], "error: --weights 'bf16,' has an empty item; give e.g. bf16,fp8"),
    (["--model", "deepseek-v3", "--backends", "bmm,,triton"],
     "error: --backends 'bmm,,triton' has an empty item; give e.g. per_expert,triton"),
])
def test_bad_input_is_one_line(capsys, args, msg):
    code, _, err = run(capsys, *args)
    assert code == 2
    assert err.startswith(msg) and err.count("\n") == 1


def test_out_naming_a_jsonl_file_says_out_is_a_folder(capsys, tmp_path, monkeypatch):
    """`--out moe.jsonl` (a file name) is refused in one line that says what --out is: a folder."""
    monkeypatch.chdir(tmp_path)
    code, out, err = run(capsys, "--model", "deepseek-v3", "--out", "moe.jsonl")
    assert (code, out) == (2, "")
    assert err == ("error: --out moe.jsonl: --out is a folder, and the records go to results.jsonl inside it; give a "
                   "folder, e.g. --out moe\n")
    assert list(tmp_path.iterdir()) == []


def test_records_go_to_results_jsonl_in_the_out_folder_and_the_plot_beside_them(capsys, tmp_path, monkeypatch):
    """The CLI's mapping of --out and --plot onto the library (which measures on a GPU only): the records file is
    DIR/results.jsonl, a relative --plot lands in DIR, an absolute one where it says."""
    from truepeak.bench import moe

    calls = []
    monkeypatch.setattr(moe, "run_bench", lambda model, **kw: calls.append(("bench", kw["out_path"])) or [])
    monkeypatch.setattr(moe, "plot_records", lambda records, path: calls.append(("plot", path)) or path)
    monkeypatch.chdir(tmp_path)
    code, _, err = run(capsys, "--model", "deepseek-v3", "--out", "dsv3", "--plot", "moe.png")
    assert code == 0, err
    assert calls == [("bench", "dsv3/results.jsonl"), ("plot", "dsv3/moe.png")]
    assert err == "records: dsv3/results.jsonl\nplot: dsv3/moe.png\n"
    calls.clear()
    code, _, err = run(capsys, "--model", "deepseek-v3", "--plot", str(tmp_path / "abs.png"))
    assert code == 0, err
    (bench, out_path), plot = calls
    assert out_path.startswith("truepeak-moe-bench-2") and out_path.endswith("/results.jsonl")
    assert plot == ("plot", str(tmp_path / "abs.png"))


def test_without_a_gpu_nothing_is_created(capsys, tmp_path, monkeypatch):
    pytest.importorskip("torch")
    import torch

    if torch.cuda.is_available():
        pytest.skip("this machine has a CUDA GPU")
    monkeypatch.chdir(tmp_path)
    code, _, err = run(capsys, "--model", "deepseek-v3", "--tokens-per-expert", "1")
    assert code == 2 and err == "error: truepeak moe bench needs a CUDA GPU (torch sees none)\n"
    assert list(tmp_path.iterdir()) == []  # the default folder is made with the first record, not before
