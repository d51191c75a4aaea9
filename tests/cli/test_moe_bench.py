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
                 "error: tokens per expert must be a finite number > 0, got 0;", marks=checked_after_torch),
    (["--model", "deepseek-v3", "--tokens-per-expert", "a"], "error: tokens per expert 'a' is not a number"),
    pytest.param(["--model", "deepseek-v3", "--weights", "fp5"], "error: unknown --weights 'fp5'",
                 marks=checked_after_torch),
    pytest.param(["--model", "deepseek-v3", "--routing", "zipf"], "error: unknown routing 'zipf'",
                 marks=checked_after_torch),
    # regression: inf went through to round(inf * E / k) and ended in an OverflowError traceback
    pytest.param(["--model", "deepseek-v3", "--tokens-per-expert", "1,inf"],
                 "error: tokens per expert must be a finite number > 0, got inf", marks=checked_after_torch),
    # regression: a zero / negative / infinite time budget was not checked
    pytest.param(["--model", "deepseek-v3", "--budget", "0"], "error: --budget 0 must be a finite number of seconds > 0",
                 marks=checked_after_torch),
    pytest.param(["--model", "deepseek-v3", "--budget", "inf"],
                 "error: --budget inf must be a finite number of seconds > 0", marks=checked_after_torch),
    # fewer than one token in the layer (T = tpe·E/k) was timed at one token under the figure typed
    pytest.param(["--model", "deepseek-v3", "--tokens-per-expert", "0.001"],
                 "error: tokens per expert 0.001 is 0.032 tokens in the layer (T = tpe·E/k with E=256, k=8); the "
                 "fewest is one token, 0.03125 per expert", marks=checked_after_torch),
    pytest.param(["--model", "deepseek-v3", "--tokens-per-expert", "8,8"], "error: tokens per expert 8 is given twice",
                 marks=checked_after_torch),
    # moe tune's FORMAT:ACTIVATIONS is pointed to bench's own activation options
    pytest.param(["--model", "deepseek-v3", "--weights", "fp8:fp16"],
                 "error: --weights 'fp8:fp16': give the format alone (bf16, fp8, fp8_block, nvfp4, mxfp4) and the "
                 "activations with --fp8-activations or --fp4-activations", marks=checked_after_torch),
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


@pytest.mark.parametrize("args,msg", [
    (["--weights", "fp5"], "error: unknown --weights 'fp5'; expected one of bf16, fp8, fp8_block, nvfp4, mxfp4"),
    (["--ep", "7"], "error: --ep 7 does not divide the 256 experts of deepseek-v3; use a divisor of 256"),
    (["--tp", "2", "--ep", "2"], "error: give --tp or --ep, not both"),
    (["--budget", "0"], "error: --budget 0 must be a finite number of seconds > 0"),
    (["--fp4-kernel", "marlin"], "error: --fp4-kernel 'marlin': expected auto, dequant, block-scaled"),
    (["--fp8-activations", "int8"], "error: --fp8-activations 'int8': expected fp8 (w8a8) or fp16 (w8a16)"),
    (["--weights", "mxfp4", "--fp4-kernel", "dequant", "--fp4-activations", "fp4"],
     "error: --fp4-activations fp4 with --fp4-kernel dequant and weights mxfp4: the dequantising kernels take fp8"),
    (["--routing", "zipf"], "error: unknown routing 'zipf'"),
])
def test_without_torch_a_bad_flag_is_named(capsys, tmp_path, monkeypatch, without_torch, args, msg):
    """On a machine without torch a bad flag is named, in the flag's spelling, not met with "install torch"."""
    monkeypatch.chdir(tmp_path)
    code, out, err = run(capsys, "--model", "deepseek-v3", *args)
    assert (code, out) == (2, "")
    assert err.startswith(msg) and err.count("\n") == 1, err
    assert list(tmp_path.iterdir()) == []


def test_without_torch_valid_flags_ask_for_torch(capsys, tmp_path, monkeypatch, without_torch):
    monkeypatch.chdir(tmp_path)
    code, _, err = run(capsys, "--model", "deepseek-v3", "--tokens-per-expert", "1", "--out", "dsv3")
    assert code == 2 and err.startswith("error: torch is needed for the MoE benchmark but is not installed")
    assert "install it with: pip install -e '.[measure]'" in err
    assert list(tmp_path.iterdir()) == []


def test_flag_message_writes_each_field_as_its_flag():
    from truepeak.cli.moe_bench import flag_message
    from truepeak.errors import ConfigError

    assert flag_message(ConfigError("`fp4_activations` fp4 with `fp4_kernel` dequant and weights mxfp4", field="x")) \
        == "--fp4-activations fp4 with --fp4-kernel dequant and weights mxfp4"
    # a field the command has no flag for, and words that are not in backticks, stay as they are
    assert flag_message(ConfigError("`warmup_s` -1 must be >= 0; weights and ep", field="warmup_s")) \
        == "`warmup_s` -1 must be >= 0; weights and ep"


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
    from truepeak.cli import moe_bench

    calls = []
    monkeypatch.setattr(moe, "run_bench", lambda config, **kw: calls.append(("bench", kw["out_path"])) or [])
    monkeypatch.setattr(moe_bench, "plot_records", lambda records, path: calls.append(("plot", path)) or path)
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


def test_no_split_busy_reaches_the_config(capsys, tmp_path, monkeypatch):
    """--no-split-busy keeps every expert in one launch (MoeBenchConfig.split_busy False); the default splits."""
    from truepeak.bench import moe

    seen = []
    monkeypatch.setattr(moe, "run_bench", lambda config, **kw: seen.append(config.split_busy) or [])
    monkeypatch.chdir(tmp_path)
    for flag in ([], ["--no-split-busy"]):
        code, _, err = run(capsys, "--model", "deepseek-v3", "--out", "o", *flag)
        assert code == 0, err
    assert seen == [True, False]
