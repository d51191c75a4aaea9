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
from truepeak.bench.records import read_records  # noqa: E402
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
    monkeypatch.setattr(P, "cpu_plan", lambda max_evals=None: plan)

    def time_gemm(gemm, case, dev, budgets, n_sets):  # best at 768 x 512 x 384: 20 GFLOP/s, 1 % less per 128
        dist = (abs(case.m - 768) + abs(case.n - 512) + abs(case.k - 384)) / 128
        t = 2 * case.m * case.n * case.k / (20e9 * (1 - 0.02 * dist))
        return Measurement(samples_s=(t,) * 5, mode="cpu", input_kind=gemm.input_kind)

    monkeypatch.setattr(R, "_time_gemm", time_gemm)


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
    assert len(recs) == p["evaluations"] and all("search" in r for r in recs)
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


def test_gpu_table_keeps_clock_and_power():
    """An H200 bf16 burst answer (docs/results/h200/peak: 839.0 TFLOPS at 1980 MHz): 839.0 / 989.4 = 84.8 % of dense;
    at 1980 MHz the dense peak is 4096 FLOP/clk/SM x 132 SMs x 1.98e9 = 1070.5 TFLOPS, 839.0 / 1070.5 = 78.4 %."""
    import io

    from truepeak.cli.peak import render_peaks

    at_clock = 4096 * 132 * 1.98e9
    summary = {"device": "NVIDIA H200", "device_kind": "cuda", "peaks": [
        {"format": "bf16", "mode": "burst", "status": "ok", "shape": [4096, 4096, 18432], "flop_per_s": 839.0e12,
         "pct_dense": 839.0e12 / 989.4e12, "peak_at_clock_flop_per_s": at_clock, "pct_at_clock": 839.0e12 / at_clock,
         "sm_clock_median_hz": 1.98e9, "power_median_w": 699.6, "evaluations": 86, "elapsed_s": 60.2},
        {"format": "int8", "mode": "burst", "status": "skipped", "reason": "no int8 kernel"}]}
    buf = io.StringIO()
    render_peaks(summary, file=buf)
    text = buf.getvalue()
    assert _table_header(text) == ["format", "mode", "best shape MxNxK", "TFLOPS", "% dense", "peak @ clock",
                                   "% @ clock", "SM MHz", "W", "shapes", "s"]
    row = next(line for line in text.splitlines() if "4096x4096x18432" in line)
    assert [c.strip() for c in row.strip("│").split("│")] == ["bf16", "burst", "4096x4096x18432", "839.0", "84.8",
                                                             "1070.5", "78.4", "1980", "700", "86", "60"]
    assert "skipped: no int8 kernel" in text
