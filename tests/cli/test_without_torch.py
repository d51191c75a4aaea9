"""On a machine without torch, a bad flag of `truepeak run` or `truepeak peak` is named in one line (exit status 2), not
reported as a missing torch: the options are checked (RunConfig, PeakConfig) before torch is required. The
``without_torch`` fixture (tests/conftest.py) makes ``import torch`` fail, so these tests mean the same with or without
torch installed."""

from __future__ import annotations

import pytest

import truepeak.cli.peak  # noqa: F401  (registers the command)
import truepeak.cli.run  # noqa: F401
from truepeak.cli.app import main
from truepeak.errors import ConfigError


def run_main(capsys, *args: str) -> tuple[int, str, str]:
    with pytest.raises(SystemExit) as info:
        main(list(args))
    captured = capsys.readouterr()
    return info.value.code, captured.out, captured.err


def test_the_fixture_hides_torch(without_torch):
    with pytest.raises(ImportError):
        import torch  # noqa: F401
    with pytest.raises(ImportError):
        import triton  # noqa: F401


@pytest.mark.parametrize("command", ["run", "peak"])
@pytest.mark.parametrize("args,message", [
    (["--formats", "bogus"], "error: unknown number format 'bogus'"),
    (["--formats", ","], "is empty; give comma-separated names from: fp32, tf32, bf16"),
    (["--mode", "turbo"], "error: unknown mode 'turbo'; accepted: sustained"),
    (["--out", " "], "error: --out is empty"),
    (["--out", "results.jsonl"], "error: --out results.jsonl: --out is a folder"),
    (["--device", "tpu"], "error: unknown device 'tpu'"),
    (["--resume"], "error: --resume needs --out DIR"),
])
def test_a_bad_flag_is_named_without_torch(capsys, without_torch, command, args, message):
    code, out, err = run_main(capsys, command, *args)
    assert code == 2 and out == ""
    assert message in err and err.startswith("error: ") and err.count("\n") == 1
    assert "torch" not in err


def test_an_existing_file_as_out_is_named_without_torch(capsys, without_torch, tmp_path):
    afile = tmp_path / "afile"
    afile.write_text("x")
    for command in ("run", "peak"):
        code, _, err = run_main(capsys, command, "--out", str(afile))
        assert code == 2 and f"{afile} is an existing file, not a folder" in err and "torch" not in err


def test_peak_budget_is_named_without_torch(capsys, without_torch):
    code, _, err = run_main(capsys, "peak", "--budget", "0")
    assert code == 2 and err == "error: --budget must be > 0 seconds, got 0\n"


def test_good_flags_without_torch_say_how_to_install_it(capsys, without_torch, tmp_path):
    for command in ("run", "peak"):
        code, out, err = run_main(capsys, command, "--device", "cpu", "--out", str(tmp_path / command))
        assert code == 2 and out == ""
        assert err.startswith("error: torch is needed for truepeak " + command) and "pip install -e" in err
        assert not (tmp_path / command).exists()  # nothing created before torch was found missing


def test_the_library_checks_its_settings_before_torch(without_torch, tmp_path):
    from truepeak.bench.peak import run_peak
    from truepeak.bench.run import run_main_job

    with pytest.raises(ConfigError, match="unknown number format 'bogus'") as info:
        run_main_job(tmp_path, formats=["bogus"])
    assert info.value.field == "formats"
    with pytest.raises(ConfigError, match="unknown mode 'turbo'") as info:
        run_peak(tmp_path, modes=["turbo"])
    assert info.value.field == "modes"
    with pytest.raises(ConfigError, match="formats takes a list of names") as info:
        run_main_job(tmp_path, formats="bf16,fp8")
    assert info.value.field == "formats"
