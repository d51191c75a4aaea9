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
    for label in ("copy 32 MiB", "1x1024x2048", "32x1024x2048", "256x256x256"):
        assert label in text
    records = read_records(out / "results.jsonl")
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
    assert "pip install torch" in err and "pip install 'truepeak[measure]'" in err
