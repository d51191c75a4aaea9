"""`truepeak moe bench` command line: help, registration on `truepeak moe`, one-line errors for bad input."""

from __future__ import annotations

import pytest

from truepeak.cli.app import main


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
    (["--model", "deepseek-v3", "--ep", "7"], "error: --ep 7 does not divide the 256 experts of deepseek-v3"),
    (["--model", "deepseek-v3", "--tokens-per-expert", "0"], "error: tokens per expert must be a finite number > 0, got 0.0"),
    (["--model", "deepseek-v3", "--tokens-per-expert", "a"], "error: tokens per expert 'a' is not a number"),
    (["--model", "deepseek-v3", "--weights", "fp5"], "error: unknown --weights 'fp5'"),
    (["--model", "deepseek-v3", "--routing", "zipf"], "error: unknown routing 'zipf'"),
    # regression: inf went through to round(inf * E / k) and ended in an OverflowError traceback
    (["--model", "deepseek-v3", "--tokens-per-expert", "1,inf"],
     "error: tokens per expert must be a finite number > 0, got inf"),
    # regression: a zero / negative / infinite time budget was not checked
    (["--model", "deepseek-v3", "--budget", "0"], "error: --budget 0.0 must be a finite number of seconds > 0"),
    (["--model", "deepseek-v3", "--budget", "inf"], "error: --budget inf must be a finite number of seconds > 0"),
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
