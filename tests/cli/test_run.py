"""`truepeak run` end to end on this CPU through typer's CliRunner, and its input errors through the entry point."""

from __future__ import annotations

import builtins
import json

import pytest
from typer.testing import CliRunner

pytest.importorskip("torch")

import truepeak.cli.run  # noqa: E402,F401  (registers the command)
from truepeak.bench.records import read_records  # noqa: E402
from truepeak.cli.app import app, main  # noqa: E402

FOOTER = "TFLOPS = 1e12 FLOP/s; GB/s = 1e9 B/s; % of dense peak (never sparse); mode: cpu"
FIELDS = {"schema_version", "methodology_version", "truepeak_version", "key", "kind", "status", "reason", "workload",
          "backend", "format", "mode", "time_s", "measurement", "warnings", "correctness", "derived", "env",
          "timestamp"}


def run_main(capsys, *args: str) -> tuple[int, str, str]:
    """Run through the console entry point (the error boundary): (exit code, stdout, stderr)."""
    with pytest.raises(SystemExit) as info:
        main(["run", *args])
    captured = capsys.readouterr()
    return info.value.code, captured.out, captured.err


@pytest.fixture(scope="module")
def quick(tmp_path_factory):
    out = tmp_path_factory.mktemp("cli") / "run"
    result = CliRunner().invoke(app, ["run", "--quick", "--device", "cpu", "--out", str(out), "--no-progress"])
    return out, result


def test_quick_run_exits_zero_and_writes_files(quick):
    out, result = quick
    assert result.exit_code == 0, result.output
    assert (out / "results.jsonl").exists() and (out / "summary.md").exists()
    assert f"records: {out / 'results.jsonl'}" in result.stderr
    assert f"summary: {out / 'summary.md'}" in result.stderr
    assert "records:" not in result.stdout  # paths and notes go to stderr, the table to stdout


def test_quick_run_records(quick):
    out, _ = quick
    records = read_records(out / "results.jsonl")
    assert [r["kind"] for r in records] == ["membw", "gemm", "gemm", "gemm"]
    for rec in records:
        assert FIELDS <= set(rec)
        assert rec["status"] == "ok", rec["reason"]
        assert rec["schema_version"] >= 1 and rec["mode"] == "cpu"
        assert rec["env"]["command_line"].startswith("truepeak run")
        assert rec["measurement"]["n_samples"] >= 5
        assert len(rec["measurement"]["samples_s"]) == rec["measurement"]["n_samples"]
    for rec in records[1:]:
        w, d = rec["workload"], rec["derived"]
        assert rec["format"] == "fp32"
        assert d["tflops"] == pytest.approx(w["flop"] / rec["measurement"]["steady_median_s"] / 1e12, rel=1e-12)
        assert d["tflops"] == pytest.approx(2 * w["m"] * w["n"] * w["k"] / rec["time_s"] / 1e12, rel=1e-12)
        assert 0 < d["pct_dense"] < 1
        assert rec["correctness"]["passed"] is True


def test_quick_run_table(quick):
    out, result = quick
    text = result.stdout
    assert "truepeak run:" in text
    for header in ("shape (MxNxK)", "TFLOPS", "GB/s", "% dense peak", "% roofline", "bound", "status"):
        assert header in text
    assert FOOTER in text
    records = read_records(out / "results.jsonl")
    for label in (records[0]["workload"]["label"], "1x1024x2048", "32x1024x2048", "256x256x256"):
        assert label in text
    tflops = records[-1]["derived"]["tflops"]
    from truepeak.report.table import fmt_tflops

    assert fmt_tflops(tflops) in text


def test_json_output_and_resume(quick):
    out, _ = quick
    result = CliRunner().invoke(app, ["run", "--quick", "--device", "cpu", "--out", str(out), "--resume", "--json",
                                      "--no-progress"])
    assert result.exit_code == 0, result.output
    records = json.loads(result.stdout)
    assert [r["key"] for r in records] == [r["key"] for r in read_records(out / "results.jsonl")]  # nothing re-ran


def test_existing_results_without_resume_is_an_error(quick, capsys):
    out, _ = quick
    code, _, err = run_main(capsys, "--quick", "--device", "cpu", "--out", str(out), "--no-progress")
    assert code == 2
    assert "--resume" in err and err.startswith("error: ")


def test_unknown_format_exits_2_with_the_known_names(capsys, tmp_path):
    code, out, err = run_main(capsys, "--formats", "bf16,fp9", "--device", "cpu", "--out", str(tmp_path / "x"))
    assert code == 2 and out == ""
    assert "unknown number format 'fp9'" in err
    assert "known: fp32, tf32, bf16, fp16, fp8_e4m3" in err
    assert not (tmp_path / "x").exists()


def test_unknown_device_exits_2(capsys, tmp_path):
    code, _, err = run_main(capsys, "--device", "tpu", "--out", str(tmp_path / "x"))
    assert code == 2 and "auto, cpu, cuda or cuda:N" in err


def test_missing_torch_gives_the_install_command(capsys, monkeypatch, tmp_path):
    real_import = builtins.__import__

    def no_torch(name, *args, **kwargs):
        if name == "torch" or name.startswith("torch."):
            raise ImportError("No module named 'torch'")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_torch)
    code, _, err = run_main(capsys, "--quick", "--out", str(tmp_path / "x"))
    assert code == 2
    assert err.count("\n") == 1  # one line
    # truepeak is not on PyPI: the hint is the README's install line, from a clone
    assert "pip install -e '.[measure]' 'torch==2.13.0'" in err and "clone" in err
    assert "pip install torch " not in err and "pip install 'truepeak[measure]'" not in err


def test_one_install_hint_everywhere(monkeypatch):
    from truepeak.bench import gemm, run
    from truepeak.errors import INSTALL_HINT, MissingDependencyError, require

    assert gemm.INSTALL == run.INSTALL == INSTALL_HINT
    with pytest.raises(MissingDependencyError, match=r"install it with: pip install -e '\.\[measure\]'"):
        require("truepeak_no_such_module", "a test")


@pytest.mark.parametrize("kind", ["file", "under a file"])
def test_out_that_cannot_be_a_folder_is_one_line_exit_2(capsys, tmp_path, kind):
    afile = tmp_path / "afile"
    afile.write_text("x")
    target = afile if kind == "file" else afile / "sub"
    code, out, err = run_main(capsys, "--quick", "--device", "cpu", "--out", str(target), "--no-progress")
    assert code == 2 and out == ""
    assert err.count("\n") == 1 and err.startswith("error: ") and str(target) in err
    assert ("existing file, not a folder" if kind == "file" else "Not a directory") in err


def test_records_keep_the_command_line_as_typed(capsys, tmp_path):
    args = ["--no-progress", "--out", str(tmp_path / "r"), "--device", "cpu", "--quick"]
    code, _, err = run_main(capsys, *args)
    assert code == 0, err
    for rec in read_records(tmp_path / "r" / "results.jsonl"):
        assert rec["env"]["argv"] == ["truepeak", "run", *args]
    code, _, err = run_main(capsys, *args, "--resume")
    assert code == 0, err
    assert "4 ok (4 resumed, 0 new), 0 skipped, 0 failed in" in err


def test_resume_warns_about_a_torn_line_and_refuses_other_settings(capsys, tmp_path):
    out = tmp_path / "r"
    code, _, err = run_main(capsys, "--quick", "--device", "cpu", "--out", str(out), "--no-progress")
    assert code == 0, err
    path = out / "results.jsonl"
    lines = path.read_bytes().splitlines()
    path.write_bytes(b"\n".join(lines[:-1]) + b'\n{"key": "gemm|torn')
    code, _, err = run_main(capsys, "--quick", "--device", "cpu", "--out", str(out), "--no-progress", "--resume")
    assert code == 0, err
    assert err.startswith(f"warning: {path} line 4 is not a valid record and is ignored: not valid JSON")
    assert "3 ok (3 resumed, 0 new)" not in err and "4 ok (3 resumed, 1 new)" in err
    code, _, err = run_main(capsys, "--device", "cpu", "--out", str(out), "--no-progress", "--resume")
    last = err.splitlines()[-1]  # after the warning about the torn line, which stays in the file
    assert code == 2 and last.startswith("error: cannot --resume") and "quick (there: True, now: False)" in last


def test_ctrl_c_says_where_the_records_are_and_writes_the_summary(capsys, tmp_path, monkeypatch):
    from truepeak.bench import run as R

    real = R._run_gemm
    calls = {"n": 0}

    def interrupted(*a, **k):
        calls["n"] += 1
        if calls["n"] == 2:
            raise KeyboardInterrupt
        return real(*a, **k)

    monkeypatch.setattr(R, "_run_gemm", interrupted)
    out = tmp_path / "r"
    code, _, err = run_main(capsys, "--quick", "--device", "cpu", "--out", str(out), "--no-progress")
    assert code == 130
    assert (f"interrupted after 2 records; they are in {out / 'results.jsonl'}; continue with: "
            f"truepeak run --resume --out {out}") in err
    assert (out / "summary.md").exists() and len(read_records(out / "results.jsonl")) == 2
