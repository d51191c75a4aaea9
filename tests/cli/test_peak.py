"""`truepeak peak` through the console entry point: bad input is one line and exit status 2; a small CPU search (timing
stubbed from a known landscape) prints the answer and writes every shape tried."""

from __future__ import annotations

import json

import pytest

pytest.importorskip("torch")

import truepeak.cli.peak  # noqa: E402,F401  (registers the command)
from truepeak.bench import peak as P  # noqa: E402
from truepeak.bench import run as R  # noqa: E402
from truepeak.bench.measurement import Measurement  # noqa: E402
from truepeak.records import read_records  # noqa: E402
from truepeak.cli.app import main  # noqa: E402


def run_main(capsys, *args: str) -> tuple[int, str, str]:
    with pytest.raises(SystemExit) as info:
        main(["peak", *args])
    captured = capsys.readouterr()
    return info.value.code, captured.out, captured.err


@pytest.mark.parametrize("args,message", [
    (["--format", "fp9"], "error: unknown number format 'fp9'"),
    (["--format", ","], "error: --format is empty; give comma-separated names from: fp32, tf32, bf16"),
    (["--mode", "turbo"], "error: unknown mode 'turbo'; accepted: sustained"),
    (["--budget", "0"], "error: --budget must be > 0 seconds, got 0"),
    (["--out", " "], "error: --out is empty"),
    (["--device", "tpu"], "error: "),
])
def test_bad_input_is_one_line_and_status_2(capsys, args, message):
    code, out, err = run_main(capsys, "--device", "cpu", *args) if "--device" not in args else run_main(capsys, *args)
    assert code == 2 and out == ""
    assert err.startswith(message) and err.count("\n") == 1


def test_help_teaches_the_method(capsys):
    with pytest.raises(SystemExit) as info:
        main(["peak", "--help"])
    text = capsys.readouterr().out
    assert info.value.code == 0
    for words in ("MAMF", "coarse grid", "burst", "sustained", "DENSE", "measured SM clock", "--budget"):
        assert words in text


@pytest.fixture
def small_cpu_search(monkeypatch):
    plan = P.SearchPlan(((512, 512, 512), (1024, 512, 256)), steps=(256, 128), min_dim=128, max_dim=1024, top_k=1,
                        tolerance=0.01, starts=1)
    monkeypatch.setattr(P.plan, "cpu_plan", lambda max_evals=None: plan)

    def time_gemm(gemm, case, dev, budgets, n_sets):  # best at 768 x 512 x 384: 20 GFLOP/s, 1 % less per 128
        dist = (abs(case.m - 768) + abs(case.n - 512) + abs(case.k - 384)) / 128
        t = 2 * case.m * case.n * case.k / (20e9 * (1 - 0.02 * dist))
        return Measurement(samples_s=(t,) * 5, mode="cpu", input_kind=gemm.input_kind)

    monkeypatch.setattr(R.runners, "time_gemm", time_gemm)


def test_cpu_search_json(capsys, tmp_path, small_cpu_search):
    code, out, err = run_main(capsys, "--device", "cpu", "--budget", "60", "--out", str(tmp_path / "pk"), "--json",
                              "--mode", "both")
    assert code == 0, err
    summary = json.loads(out)
    (p,) = summary["peaks"]
    assert (p["format"], p["mode"], p["status"], p["shape"]) == ("fp32", "cpu", "ok", [768, 512, 384])
    assert p["flop_per_s"] == pytest.approx(20e9)
    assert "--mode both has no meaning on a CPU" in err and "no burst/sustained distinction" in err
    recs = read_records(tmp_path / "pk" / "results.jsonl")
    assert len(recs) == p["evaluations"] and all(r.search is not None for r in recs)
    assert json.loads((tmp_path / "pk" / "peak.json").read_text())["peaks"][0]["shape"] == [768, 512, 384]


def test_cpu_search_table(capsys, tmp_path, small_cpu_search):
    code, out, err = run_main(capsys, "--device", "cpu", "--budget", "60", "--out", str(tmp_path / "pk"), "-q",
                              "--format", "fp32,int8")
    assert code == 0, err
    assert "768x512x384" in out and "% dense" in out
    assert "skipped: int8 GEMM needs a CUDA GPU; this device is a CPU" in out
    assert "records:" in err and "coarse" not in err  # -q: no per-shape progress


def test_progress_lines_keep_small_rates_readable(capsys, tmp_path, small_cpu_search):
    """Regression: progress printed `{TFLOPS:.1f}`, so every CPU shape read "0.0 TFLOPS". The landscape's best,
    768 x 512 x 384, runs at 20 GFLOP/s = 0.02 TFLOPS (truepeak.units.fmt_rate: four significant digits)."""
    code, _, err = run_main(capsys, "--device", "cpu", "--budget", "60", "--out", str(tmp_path / "pk"))
    assert code == 0, err
    assert "fp32 cpu remeasure 768x512x384: 0.02 TFLOPS" in err
    assert ": 0.0 TFLOPS" not in err


def _table_header(text: str) -> list[str]:
    """The column names of a rendered rich table (the line under its top border)."""
    lines = text.splitlines()
    top = next(i for i, line in enumerate(lines) if line.startswith("┏"))
    return [c.strip() for c in lines[top + 1].strip("┃").split("┃")]


def test_cpu_table_drops_columns_with_no_value(capsys, tmp_path, small_cpu_search):
    """Regression: on a CPU the "SM MHz" and "W" columns (and the peak at clock) were printed empty: a CPU has no NVML
    clock or power reading. The table keeps only columns with a value in some row."""
    code, out, err = run_main(capsys, "--device", "cpu", "--budget", "60", "--out", str(tmp_path / "pk"), "-q")
    assert code == 0, err
    header = _table_header(out)
    assert header == ["format", "mode", "best shape MxNxK", "TFLOPS", "% dense", "shapes", "s"]
    row = next(line for line in out.splitlines() if "768x512x384" in line)
    assert [c.strip() for c in row.strip("│").split("│")][:3] == ["fp32", "cpu", "768x512x384"]


# -- Ctrl-C ------------------------------------------------------------------------------------------------------------


def test_ctrl_c_prints_the_best_so_far_and_how_to_continue(capsys, tmp_path, small_cpu_search, monkeypatch,
                                                           interrupt_gemm):
    """Regression: Ctrl-C exited 130 in silence, with no peak.json. Stopped while the second shape is measured, the
    first, 512 x 512 x 512, is the best so far: (256 + 0 + 128) / 128 = 3 steps from the optimum, 20 GFLOP/s x
    (1 - 0.02 x 3) = 18.8 GFLOP/s = 0.0188 TFLOPS."""
    import shlex

    out = tmp_path / "pk"
    with monkeypatch.context() as mp:
        interrupt_gemm(mp, 2)
        code, stdout, err = run_main(capsys, "--device", "cpu", "--budget", "60", "--out", str(out), "-q")
    hint = f"truepeak peak --resume --out {out} --device cpu --budget 60"
    assert code == 130
    assert err.splitlines()[-1] == (f"interrupted after 1 shape; they are in {out / 'results.jsonl'}; best so far in "
                                    f"{out / 'peak.json'}; continue with: {hint}")
    row = next(line for line in stdout.splitlines() if "512x512x512" in line)
    assert [c.strip() for c in row.strip("│").split("│")][:4] == [
        "fp32", "cpu", "512x512x512 (best so far, not re-measured)", "0.0188"]
    assert stdout.splitlines()[-1] == f"Interrupted after 0 of 1 searches; continue with: {hint}"
    answer = json.loads((out / "peak.json").read_text())
    assert answer["interrupted"] is True and answer["peaks"][0]["flop_per_s"] == pytest.approx(18.8e9)

    code, stdout, err = run_main(capsys, *shlex.split(hint)[2:], "-q")  # following the hint finishes the search
    assert code == 0, err
    assert "768x512x384" in stdout and "best so far" not in stdout
    assert json.loads((out / "peak.json").read_text())["interrupted"] is False


def test_ctrl_c_with_json_prints_the_partial_answers(capsys, tmp_path, small_cpu_search, monkeypatch, interrupt_gemm):
    out = tmp_path / "pk"
    with monkeypatch.context() as mp:
        interrupt_gemm(mp, 2)
        code, stdout, err = run_main(capsys, "--device", "cpu", "--format", "FP32,int8", "--mode", "burst",
                                     "--out", str(out), "--json", "-q")
    assert code == 130
    answer = json.loads(stdout)  # the same as peak.json
    assert answer == json.loads((out / "peak.json").read_text())
    assert answer["interrupted"] is True and answer["not_searched"] == [{"format": "int8", "mode": "cpu"}]
    assert err.splitlines()[-1].endswith(f"continue with: truepeak peak --resume --out {out} --device cpu "
                                         "--format fp32,int8 --mode burst")


def test_resume_without_out_is_one_line(capsys):
    code, out, err = run_main(capsys, "--device", "cpu", "--resume")
    assert (code, out) == (2, "")
    assert err == "error: --resume needs --out DIR naming the peak search to continue\n"


@pytest.mark.slow
def test_ctrl_c_of_a_real_cpu_search(tmp_path):
    """A real `truepeak peak --device cpu` (the small fp32 search), Ctrl-C (SIGINT to its process group) once its
    first record is written: exit 130, the last line names the records and the command that continues, and
    peak.json's best so far is the fastest record in results.jsonl."""
    import os
    import signal
    import subprocess
    import sys
    import time
    from pathlib import Path

    import truepeak

    src = str(Path(truepeak.__file__).resolve().parents[1])
    env = {**os.environ, "PYTHONPATH": src + os.pathsep + os.environ.get("PYTHONPATH", "")}
    out = tmp_path / "pk"
    proc = subprocess.Popen([sys.executable, "-m", "truepeak", "peak", "--device", "cpu", "--budget", "15", "--out",
                             str(out), "-q"], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)
    try:
        deadline = time.monotonic() + 120
        results = out / "results.jsonl"
        while time.monotonic() < deadline and proc.poll() is None:
            if results.exists() and b"\n" in results.read_bytes():
                break
            time.sleep(0.01)
        os.killpg(proc.pid, signal.SIGINT)
        stdout, stderr = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.communicate()
    assert proc.returncode == 130, stderr
    recs = read_records(results, strict=False)
    assert recs and "Traceback" not in stderr
    shapes = f"{len(recs)} shape{'s' if len(recs) != 1 else ''}"
    assert stderr.splitlines()[-1] == (f"interrupted after {shapes}; they are in {results}; best so far in "
                                       f"{out / 'peak.json'}; continue with: truepeak peak --resume --out {out} "
                                       "--device cpu --budget 15")
    (p,) = json.loads((out / "peak.json").read_text())["peaks"]
    best = max((r for r in recs if r.ok), key=lambda r: r.derived.flop_per_s)
    assert p["status"] == "interrupted" and p["flop_per_s"] == best.derived.flop_per_s
    assert p["shape"] == [best.workload.m, best.workload.n, best.workload.k] and p["evaluations"] == len(recs)
    assert stdout.splitlines()[-1].startswith("Interrupted after 0 of 1 searches; continue with: truepeak peak")
