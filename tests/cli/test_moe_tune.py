"""`truepeak moe tune` command line: help, registration on `truepeak moe`, one-line errors for bad input."""

from __future__ import annotations

import pytest

from truepeak.cli.app import main


def run(capsys, *args):
    with pytest.raises(SystemExit) as exc:
        main(["moe", "tune", *args])
    cap = capsys.readouterr()
    return exc.value.code, cap.out, cap.err


def test_help_names_the_table_and_the_search(capsys):
    code, out, _ = run(capsys, "--help")
    assert code == 0
    assert "tuned table" in out and "tokens-per-expert bucket" in out and "--resume" in out and "--budget-s" in out


BASE = ["--model", "deepseek-v3", "--weights", "bf16", "--tokens-per-expert", "1,2"]


@pytest.mark.parametrize("args,msg", [
    (["--model", "deepseek-v3", "--weights", "fp5", "--tokens-per-expert", "1"],
     "error: --weights 'fp5': unknown format 'fp5'; expected FMT or FMT:ACTS"),
    (["--model", "deepseek-v3", "--weights", "bf16:fp8", "--tokens-per-expert", "1"],
     "error: --weights 'bf16:fp8': bf16 weights take no activations suffix"),
    (["--model", "deepseek-v3", "--weights", "fp8:int4", "--tokens-per-expert", "1"],
     "error: --weights 'fp8:int4': fp8 weights take activations fp8 or fp16"),
    (["--model", "deepseek-v3", "--weights", "nvfp4:fp4", "--tokens-per-expert", "1"],
     "error: --weights 'nvfp4:fp4': nvfp4 weights take activations fp8 or fp16 (fp4 activations run the "
     "block-scaled kernel of Blackwell, which moe tune does not tune)"),
    (["--model", "deepseek-v3", "--weights", "bf16", "--tokens-per-expert", "1,1.3"],
     "error: --tokens-per-expert 1 and 1.3 fall in the same bucket (1); give one value per power of two"),
    (["--model", "deepseek-v3", "--weights", "bf16", "--tokens-per-expert", "0"],
     "error: --tokens-per-expert 0: expected a finite number > 0"),
    (["--model", "deepseek-v3", "--weights", "bf16", "--tokens-per-expert", "1e9"],
     "error: --tokens-per-expert 1e+09: beyond the largest bucket of a tuned table (1024, which holds values below "
     "1448)"),
    (BASE + ["--tp", "2", "--ep", "2"], "error: --tp 2 and --ep 2: give one of them"),
    (BASE + ["--budget-s", "0"], "error: --budget-s 0: expected a finite number of seconds > 0"),
    (BASE + ["--ep", "7"], "error: --ep 7 does not divide the 256 experts of deepseek-v3"),
    (BASE + ["--resume"], "error: --resume needs --out DIR naming the tuning run to continue"),
])
def test_bad_input_is_one_line_and_exit_2(capsys, args, msg):
    pytest.importorskip("torch")
    code, out, err = run(capsys, *args)
    assert code == 2 and out == ""
    assert err.startswith(msg) and err.count("\n") == 1 and "Traceback" not in err


def test_no_gpu_is_refused_with_the_reason(capsys, tmp_path):
    torch = pytest.importorskip("torch")
    if torch.cuda.is_available():
        pytest.skip("a GPU is present")
    code, _, err = run(capsys, *BASE, "--out", str(tmp_path / "t"))
    assert code == 2 and err == "error: truepeak moe tune needs a CUDA GPU (torch sees none)\n"
    assert not (tmp_path / "t").exists()  # refused before the folder is made
