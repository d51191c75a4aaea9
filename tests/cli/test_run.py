"""`truepeak run` through typer's CliRunner and the entry point: one real quick run on this CPU end to end (marked
slow), the rest with stubbed timing (every GEMM call "takes" 0.1 s, every copy 10 ms) so values are computed by hand."""

from __future__ import annotations

import json
import sys

import pytest
from typer.testing import CliRunner

pytest.importorskip("torch")

import truepeak.cli.run  # noqa: E402,F401  (registers the command)
from truepeak.records import read_records  # noqa: E402
from truepeak.cli.app import app, main  # noqa: E402
from truepeak.units import UNITS_FOOTER  # noqa: E402

FOOTER = f"{UNITS_FOOTER}; mode: cpu"
FIELDS = {"schema_version", "methodology_version", "truepeak_version", "key", "kind", "status", "reason", "workload",
          "backend", "format", "mode", "time_s", "measurement", "warnings", "correctness", "derived", "env",
          "run_config", "rotation", "timestamp"}
GEMM_S, COPY_S = 0.1, 0.01


@pytest.fixture
def fake_timing(monkeypatch, stub_timing):
    stub_timing(monkeypatch, gemm_s=GEMM_S, copy_s=COPY_S)


def run_main(capsys, *args: str) -> tuple[int, str, str]:
    """Run through the console entry point (the error boundary): (exit code, stdout, stderr)."""
    with pytest.raises(SystemExit) as info:
        main(["run", *args])
    captured = capsys.readouterr()
    return info.value.code, captured.out, captured.err


@pytest.fixture(scope="module")
def quick(tmp_path_factory, stub_timing):
    """A stubbed quick run through CliRunner, shared by the read-only checks."""
    out = tmp_path_factory.mktemp("cli") / "run"
    with pytest.MonkeyPatch.context() as mp:
        stub_timing(mp, gemm_s=GEMM_S, copy_s=COPY_S)
        result = CliRunner().invoke(app, ["run", "--quick", "--device", "cpu", "--out", str(out), "--no-progress"])
    return out, result


@pytest.mark.slow
def test_quick_run_end_to_end_on_this_cpu(tmp_path):
    """The one real run: measure, write records and summary.md, print the table."""
    out = tmp_path / "run"
    result = CliRunner().invoke(app, ["run", "--quick", "--device", "cpu", "--out", str(out), "--no-progress"])
    assert result.exit_code == 0, result.output
    records = read_records(out / "results.jsonl")
    assert [r.kind for r in records] == ["membw", "gemm", "gemm", "gemm"]
    for rec in records:
        assert FIELDS <= set(rec.to_dict())
        assert rec.status == "ok", rec.reason  # a failure here: check this CPU's peak estimate
        assert rec.to_dict()["schema_version"] == 3 and rec.mode == "cpu"
        assert rec.env.command_line.startswith("truepeak run")
        assert rec.measurement.n_samples >= 5
        assert len(rec.measurement.samples_s) == rec.measurement.n_samples
    for rec in records[1:]:
        w, d = rec.workload, rec.derived
        assert rec.format == "fp32" and rec.correctness.passed is True
        assert d.flop_per_s == pytest.approx(2 * w.m * w.n * w.k / rec.time_s, rel=1e-12)
        assert 0 < d.dense_fraction < 1.5
    summary = (out / "summary.md").read_text()
    assert "## All results" in summary and "| fp32 |" in summary
    assert FOOTER in result.stdout and "256x256x256" in result.stdout
    assert f"summary: {out / 'summary.md'}" in result.stderr


def test_quick_run_exits_zero_and_writes_files(quick):
    out, result = quick
    assert result.exit_code == 0, result.output
    assert (out / "results.jsonl").exists() and (out / "summary.md").exists()
    assert f"records: {out / 'results.jsonl'}" in result.stderr
    assert f"summary: {out / 'summary.md'}" in result.stderr
    assert "4 ok, 0 skipped, 0 failed in" in result.stderr
    assert "records:" not in result.stdout  # paths and notes go to stderr, the table to stdout


def test_quick_run_table(quick):
    out, result = quick
    text = result.stdout
    assert "truepeak run:" in text
    for header in ("shape (MxNxK)", "time (ms)", "TFLOPS", "GB/s", "% dense peak", "% roofline", "bound", "status"):
        assert header in text
    assert FOOTER in text
    records = read_records(out / "results.jsonl")
    for label in (records[0].workload.label, "1x1024x2048", "32x1024x2048", "256x256x256"):
        assert label in text
    # 256^3: 33,554,432 FLOP in 0.1 s = 0.0003355 TFLOPS; 3 x 256 KiB in 0.1 s = 7.86 MB/s = 0.00786 GB/s
    row = next(line for line in text.splitlines() if "256x256x256" in line)
    assert "│       100 │ 0.0003355 │ 0.00786 │" in row


def test_json_output_and_resume(quick):
    out, _ = quick
    result = CliRunner().invoke(app, ["run", "--quick", "--device", "cpu", "--out", str(out), "--resume", "--json",
                                      "--no-progress"])
    assert result.exit_code == 0, result.output
    records = json.loads(result.stdout)
    assert [r["key"] for r in records] == [r.key for r in read_records(out / "results.jsonl")]  # nothing re-ran
    assert "4 ok (4 resumed, 0 new), 0 skipped, 0 failed" in result.stderr


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
    monkeypatch.setitem(sys.modules, "torch", None)  # `import torch` raises ImportError
    code, _, err = run_main(capsys, "--quick", "--out", str(tmp_path / "x"))
    assert code == 2
    assert err.count("\n") == 1  # one line
    # truepeak is not on PyPI: the hint is the README's install line, from a clone
    assert "pip install -e '.[measure]' 'torch==2.11.0'" in err and "clone" in err
    assert "pip install torch " not in err and "pip install 'truepeak[measure]'" not in err


def test_one_install_hint_everywhere():
    from truepeak.bench import gemm, run
    from truepeak.errors import MissingDependencyError, require

    assert not hasattr(gemm, "INSTALL") and not hasattr(run, "INSTALL")  # errors.INSTALL_HINT, through require
    with pytest.raises(MissingDependencyError, match=r"install it with: pip install -e '\.\[measure\]'"):
        require("truepeak_no_such_module", "a test")


def test_empty_formats_is_an_error(capsys, tmp_path):
    code, _, err = run_main(capsys, "--formats", ",", "--device", "cpu", "--out", str(tmp_path / "x"))
    assert code == 2 and err.startswith("error: --formats is empty; give comma-separated names from: fp32, tf32")


@pytest.mark.parametrize("kind", ["file", "under a file"])
def test_out_that_cannot_be_a_folder_is_one_line_exit_2(capsys, tmp_path, kind):
    afile = tmp_path / "afile"
    afile.write_text("x")
    target = afile if kind == "file" else afile / "sub"
    code, out, err = run_main(capsys, "--quick", "--device", "cpu", "--out", str(target), "--no-progress")
    assert code == 2 and out == ""
    assert err.count("\n") == 1 and err.startswith("error: ") and str(target) in err
    assert ("existing file, not a folder" if kind == "file" else "Not a directory") in err


def test_records_keep_the_command_line_as_typed(capsys, tmp_path, fake_timing):
    args = ["--no-progress", "--out", str(tmp_path / "r"), "--device", "cpu", "--quick"]
    code, _, err = run_main(capsys, *args)
    assert code == 0, err
    for rec in read_records(tmp_path / "r" / "results.jsonl"):
        assert rec.env.argv == ("truepeak", "run", *args)
    code, _, err = run_main(capsys, *args, "--resume")
    assert code == 0, err
    assert "4 ok (4 resumed, 0 new), 0 skipped, 0 failed in" in err


def test_resume_warns_about_a_torn_line_and_refuses_other_settings(capsys, tmp_path, fake_timing):
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


def test_ctrl_c_says_where_the_records_are_and_writes_the_summary(capsys, tmp_path, monkeypatch, fake_timing,
                                                                   interrupt_gemm):
    interrupt_gemm(monkeypatch, 2)  # Ctrl-C at the second GEMM case
    out = tmp_path / "r"
    code, _, err = run_main(capsys, "--quick", "--device", "cpu", "--out", str(out), "--no-progress")
    assert code == 130
    assert (f"interrupted after 2 records; they are in {out / 'results.jsonl'}; continue with: "
            f"truepeak run --resume --out {out} --device cpu --quick\n") in err
    assert f"summary so far: {out / 'summary.md'}" in err
    assert len(read_records(out / "results.jsonl")) == 2
    summary = (out / "summary.md").read_text()  # rendered from the two records finished
    assert summary.count("| ok |") == 2 and "1x1024x2048" in summary and "32x1024x2048" not in summary


def test_ctrl_c_writes_report_html_of_what_finished(capsys, tmp_path, monkeypatch, fake_timing, interrupt_gemm):
    """Regression: an interrupted run wrote summary.md but no report.html. It now writes both, the HTML from the two
    records finished (the copy and the 1 x 1024 x 2048 GEMM) with the interrupted line under its title."""
    import html

    interrupt_gemm(monkeypatch, 2)
    out = tmp_path / "r"
    code, _, err = run_main(capsys, "--quick", "--device", "cpu", "--out", str(out), "--no-progress")
    assert code == 130
    assert err.splitlines()[-1] == f"report so far: {out / 'report.html'}"
    page = html.unescape((out / "report.html").read_text(encoding="utf-8"))
    line = f"Interrupted after 2 of 4 cases; continue with: truepeak run --resume --out {out} --device cpu --quick"
    assert f'<div class="warnings" id="notice"><p><strong>{line}</strong></p></div>' in page
    assert "2 record(s)" in page and "1x1024x2048" in page and "32x1024x2048" not in page


def test_ctrl_c_marks_the_summary_and_the_table_as_interrupted(capsys, tmp_path, monkeypatch, fake_timing,
                                                              interrupt_gemm):
    """An interrupted run's summary.md and table never read like a finished run's: both carry the line."""
    interrupt_gemm(monkeypatch, 2)  # Ctrl-C at the second GEMM case: 2 of 4 cases finished
    out = tmp_path / "r"
    code, stdout, _ = run_main(capsys, "--quick", "--device", "cpu", "--out", str(out), "--no-progress")
    line = (f"Interrupted after 2 of 4 cases; continue with: truepeak run --resume --out {out} --device cpu "
            "--quick")
    assert code == 130
    title, blank, first = (out / "summary.md").read_text().splitlines()[:3]
    assert title.startswith("# truepeak run: ") and blank == "" and first == f"**{line}**"
    assert stdout.splitlines()[-2:] == [FOOTER, line] and "1x1024x2048" in stdout


def test_ctrl_c_with_json_prints_the_partial_records_as_json(capsys, tmp_path, monkeypatch, fake_timing,
                                                             interrupt_gemm):
    interrupt_gemm(monkeypatch, 2)
    out = tmp_path / "r"
    code, stdout, err = run_main(capsys, "--quick", "--device", "cpu", "--out", str(out), "--no-progress", "--json")
    assert code == 130 and "continue with: truepeak run --resume" in err
    records = json.loads(stdout)  # the same shape as a finished run's: a list of records
    assert isinstance(records, list) and records == [r.to_dict() for r in read_records(out / "results.jsonl")]
    assert [r["kind"] for r in records] == ["membw", "gemm"] and FIELDS <= set(records[1])


@pytest.mark.parametrize("what", ["missing folder", "empty folder"])
def test_resume_with_nothing_to_resume_is_one_line_exit_2(capsys, tmp_path, monkeypatch, what):
    monkeypatch.chdir(tmp_path)
    if what == "empty folder":
        (tmp_path / "NOPE").mkdir()
    code, stdout, err = run_main(capsys, "--resume", "--out", "NOPE", "--device", "cpu", "--quick")
    assert code == 2 and stdout == ""
    assert err == "error: --resume: no results.jsonl in NOPE to resume; drop --resume to start a new run there\n"
    assert [p.name for p in tmp_path.iterdir()] == (["NOPE"] if what == "empty folder" else [])


def test_ctrl_c_hint_repeats_the_formats_and_following_it_measures_only_them(capsys, tmp_path, monkeypatch,
                                                                              fake_timing, interrupt_gemm):
    """`--formats bf16`, Ctrl-C: the hint repeats --device, --formats and --quick; following it (or resuming without
    --formats) measures bf16 only, and resuming with other formats is refused in one line naming both."""
    import shlex

    out = tmp_path / "intr 3"
    with monkeypatch.context() as mp:
        interrupt_gemm(mp, 2)  # Ctrl-C at the second GEMM case
        code, _, err = run_main(capsys, "--device", "cpu", "--formats", "BF16", "--quick", "--out", str(out),
                                "--no-progress")
    assert code == 130
    hint = err.split("continue with: ", 1)[1].splitlines()[0]
    assert hint == f"truepeak run --resume --out '{out}' --device cpu --formats bf16 --quick"
    code, _, err = run_main(capsys, "--resume", "--formats", "fp32", "--device", "cpu", "--quick", "--out", str(out),
                            "--no-progress")
    assert code == 2 and err.count("\n") == 1
    assert err.startswith("error: cannot --resume") and "formats (there: bf16, now: fp32)" in err
    code, _, err = run_main(capsys, *shlex.split(hint)[2:], "--no-progress")
    assert code == 0, err
    assert "4 ok (2 resumed, 2 new), 0 skipped, 0 failed" in err
    assert {r.format for r in read_records(out / "results.jsonl")} == {None, "bf16"}


@pytest.mark.parametrize("empty", ["", " "])
def test_empty_out_is_one_line_exit_2(capsys, tmp_path, monkeypatch, empty):
    monkeypatch.chdir(tmp_path)
    code, out, err = run_main(capsys, "--quick", "--device", "cpu", "--out", empty, "--no-progress")
    assert code == 2 and out == ""
    assert err == ("error: --out is empty; give a folder for the results (e.g. --out h200-run), or omit --out for "
                   "./truepeak-run-YYYYmmdd-HHMMSS\n")
    assert list(tmp_path.iterdir()) == []  # nothing written into the current folder


def test_ctrl_c_before_results_jsonl_exists_hints_without_resume(capsys, tmp_path, monkeypatch):
    """Stopped before the first record file is created: the hint must not say --resume (which would be refused)."""
    import truepeak.bench.run as R

    def ctrl_c(*a, **k):
        raise KeyboardInterrupt

    out = tmp_path / "r"
    with monkeypatch.context() as mp:
        mp.setattr(R.job, "environment", ctrl_c)
        code, stdout, err = run_main(capsys, "--quick", "--device", "cpu", "--out", str(out), "--no-progress")
    assert code == 130 and not (out / "results.jsonl").exists()
    assert not (out / "report.html").exists() and "warning" not in err  # nothing finished: no report to write
    assert stdout.splitlines()[-1] == (f"Interrupted after 0 of 4 cases; continue with: truepeak run --out {out} "
                                       "--device cpu --quick")
    code, _, err = run_main(capsys, "--out", str(out), "--device", "cpu", "--quick", "--no-progress")
    assert code == 0, err


def test_mode_on_a_cpu_is_noted_not_silently_dropped(capsys, tmp_path, fake_timing):
    """Regression: `truepeak run --mode both` on a CPU measured in mode cpu without a word (truepeak peak says it)."""
    code, out, err = run_main(capsys, "--quick", "--device", "cpu", "--out", str(tmp_path / "r"), "--no-progress",
                              "--mode", "both")
    assert code == 0, err
    assert ("note: --mode sustained/burst: burst and sustained have no meaning on a CPU; measured with the host timer "
            "(mode cpu)") in err
    assert {r.mode for r in read_records(tmp_path / "r" / "results.jsonl")} == {"cpu"}
    code, out, err = run_main(capsys, "--quick", "--device", "cpu", "--out", str(tmp_path / "s"), "--no-progress")
    assert code == 0 and "no meaning" not in err  # the default mode: nothing to say
