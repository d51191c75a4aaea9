"""`truepeak comm` end to end on the CPU: torchrun starts 2 gloo workers (the same code path as NCCL on GPUs), every
result is checked (#wrong = 0) and the records follow docs (coord/comm_api.md); bad input ends in one line."""

from __future__ import annotations

import pytest

import truepeak.cli  # noqa: F401  (registers every command)
from truepeak.cli.app import main
from truepeak.comm.model import models_from_records
from truepeak.records import read_records

pytest.importorskip("torch")


def call(capsys, *args: str) -> tuple[int, str, str]:
    """Run ``truepeak ARGS`` through :func:`main` (the CLI's error boundary): (exit code, stdout, stderr)."""
    with pytest.raises(SystemExit) as info:
        main(list(args))
    captured = capsys.readouterr()
    return info.value.code, captured.out, captured.err


def test_gloo_two_ranks_through_torchrun_correct_and_recorded(capsys, tmp_path):
    out = tmp_path / "comm"
    code, stdout, stderr = call(capsys, "comm", "--backend", "gloo", "--nproc-per-node", "2", "--sizes", "1K:64K:8",
                                "--iters", "3", "--warmup", "1", "--out", str(out), "--no-progress")
    assert code == 0, stderr
    recs = read_records(out / "results.jsonl")
    cases = [r for r in recs if r.kind == "collective"]
    # 4 ops x 3 sizes (1K, 8K, 64K), eager only (CUDA graphs need CUDA).
    assert len(cases) == 12
    assert {r.workload.op for r in cases} == {"all_reduce", "all_gather", "reduce_scatter", "all_to_all"}
    for r in cases:
        assert r.status == "ok" and r.mode == "eager" and r.backend == "gloo"
        assert r.correctness.wrong == 0 and r.correctness.passed is True
        w, d = r.workload, r.derived
        assert w.n_ranks == 2 and w.dtype == "bf16" and w.bytes in (1024, 8192, 65536)
        # nccl-tests S: all_reduce count * 2 B; the others count * n * 2 B.
        assert w.bytes == w.count * 2 * (1 if w.op == "all_reduce" else 2)
        assert d.algbw_bytes_per_s == pytest.approx(w.bytes / r.time_s)
        factor = 1.0 if w.op == "all_reduce" else 0.5  # 2(n-1)/n and (n-1)/n at n = 2
        assert d.busbw_bytes_per_s == pytest.approx(d.algbw_bytes_per_s * factor)
        assert r.time_s == max(r.measurement.per_rank_median_s)
        assert r.run_config["api"] == "torch" and r.run_config["iters"] == 3
    fits = [r for r in recs if r.kind == "collective_fit"]
    assert {r.workload.op for r in fits} == {"all_reduce", "all_gather", "reduce_scatter", "all_to_all"}
    for f in fits:
        assert f.status in ("ok", "skipped")
        assert f.workload.min_bytes == 1024 and f.workload.max_bytes == 65536
        if f.status == "ok":
            assert f.derived.alpha_s >= 0 and f.derived.busbw_bytes_per_s > 0
    assert all(k[1] == 2 for k in models_from_records(recs))
    assert "all_reduce" in stdout and "#wrong" in stdout
    assert (out / "summary.md").read_text(encoding="utf-8").startswith("# truepeak comm")


@pytest.mark.parametrize(("args", "message"), [
    (["--ops", "allreduce,bogus"], "unknown collective 'bogus'"),
    (["--sizes", "1K:1X"], "bad message size"),
    (["--nproc-per-node", "1"], "at least 2 ranks"),
    (["--api", "nccl"], "--api nccl calls libnccl and needs --backend nccl"),
    (["--dtype", "fp7"], "unknown collective dtype"),
    # regression: the error listed broadcast / reduce / send_recv as valid, then refused them
    (["--ops", "bogus"], "valid ops: all_reduce, all_gather, reduce_scatter, all_to_all (aliases"),
    (["--rdzv-timeout", "-1"], "--rdzv-timeout -1.0 must be a finite number of seconds > 0"),
    # regression: 100000 gloo workers were started at once (a fork storm) before anything failed
    (["--nproc-per-node", "100000"], "--nproc-per-node 100000 with --backend gloo starts that many CPU processes"),
    # regression: the default folder was made, then named as the run that did not exist
    (["--resume"], "error: --resume needs --out DIR naming the sweep to continue"),
])
def test_bad_input_is_one_line(capsys, args, message):
    code, _, err = call(capsys, "comm", "--backend", "gloo", *args)
    assert code == 2
    assert message in err and "Traceback" not in err and len(err.strip().splitlines()) == 1


def test_nccl_without_cuda_says_pass_gloo(capsys):
    import torch

    if torch.cuda.is_available():
        pytest.skip("this machine has CUDA")
    code, _, err = call(capsys, "comm", "--nproc-per-node", "2")
    assert code == 2 and "pass --backend gloo" in err


@pytest.mark.gpu
def test_nccl_two_gpus_eager_and_graph(capsys, tmp_path):
    import torch

    if torch.cuda.device_count() < 2:
        pytest.skip("needs 2 GPUs")
    code, _, err = call(capsys, "comm", "--nproc-per-node", "2", "--sizes", "1K:1M:32", "--iters", "3", "--warmup", "2",
                        "--out", str(tmp_path), "--no-progress")
    assert code == 0, err
    recs = [r for r in read_records(tmp_path / "results.jsonl") if r.kind == "collective"]
    assert len(recs) == 4 * 3 * 2 and all(r.correctness.wrong == 0 for r in recs)
    assert {r.mode for r in recs} == {"eager", "graph"} and recs[0].run_config["api"] == "nccl"


def _fake_gpus(monkeypatch, count):
    import torch
    import torch.distributed as dist

    import truepeak.bench.comm.pynccl as pynccl

    monkeypatch.setattr(torch.cuda, "is_available", lambda: count > 0)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: count)
    monkeypatch.setattr(dist, "is_nccl_available", lambda: True)
    monkeypatch.setattr(pynccl, "load_library", lambda path=None: None)


def test_one_gpu_says_so_without_traceback(capsys, monkeypatch):
    _fake_gpus(monkeypatch, 1)
    code, _, err = call(capsys, "comm", "--nproc-per-node", "1")
    assert code == 2 and "one GPU only" in err and "Traceback" not in err
    code, _, err = call(capsys, "comm", "--nproc-per-node", "2")
    assert code == 2 and "one GPU only: --nproc-per-node 2 needs one GPU per process" in err
    code, _, err = call(capsys, "comm")  # default: every visible GPU, here one
    assert code == 2 and "one GPU only" in err


def test_fewer_gpus_than_processes(capsys, monkeypatch):
    _fake_gpus(monkeypatch, 4)
    code, _, err = call(capsys, "comm", "--nproc-per-node", "8")
    assert code == 2 and "only 4 GPUs: --nproc-per-node 8" in err


def test_out_that_is_a_file_is_one_line(capsys, tmp_path):
    # regression: --out naming an existing file ended in a FileExistsError traceback from mkdir
    f = tmp_path / "results.txt"
    f.write_text("x")
    code, _, err = call(capsys, "comm", "--backend", "gloo", "--sizes", "1K", "--out", str(f))
    assert code == 2 and "Traceback" not in err and len(err.strip().splitlines()) == 1
    assert err == f"error: --out {f} is an existing file, not a folder; choose a folder path for the results\n"


def test_sizes_help_shows_the_colon_form_not_an_emoji(capsys):
    """Regression: rich read ':END:' in 'START:END:FACTOR' as the :end: emoji code and printed START🔚FACTOR."""
    code, out, _ = call(capsys, "comm", "--help")
    assert code == 0
    assert "START:END[:FACTOR]" in " ".join(out.split()) and "\U0001f51a" not in out


def _wait_for_records(path, proc, timeout_s: float = 120.0) -> None:
    """Until ``path`` holds a whole record (a line ending in a newline) or ``proc`` has exited."""
    import time

    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline and proc.poll() is None:
        if path.exists() and b"\n" in path.read_bytes():
            return
        time.sleep(0.01)
    raise AssertionError(f"no record appeared in {path} (exit status {proc.poll()})")


@pytest.mark.slow
def test_ctrl_c_of_a_real_gloo_run_says_what_happened_last_and_keeps_the_records(tmp_path):
    """A real `truepeak comm` without --out, Ctrl-C (SIGINT to its process group, as a terminal sends it) once its
    first record is written: the records go to the default folder, our line comes after torchrun's "Received 2 death
    signal" warning and names the records and the command to run again, summary.md holds what finished, exit 130."""
    import os
    import shlex
    import signal
    import subprocess
    import sys
    from pathlib import Path

    import truepeak

    src = str(Path(truepeak.__file__).resolve().parents[1])
    env = {**os.environ, "PYTHONPATH": src + os.pathsep + os.environ.get("PYTHONPATH", "")}
    argv = ["truepeak", "comm", "--nproc-per-node", "2", "--backend", "gloo", "--sizes", "1K:4K", "--iters", "100",
            "--no-progress"]
    proc = subprocess.Popen([sys.executable, "-m", *argv], cwd=tmp_path, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        folder = None
        while folder is None and proc.poll() is None:
            folder = next(iter(tmp_path.glob("truepeak-comm-*")), None)
        assert folder is not None and folder.name.startswith("truepeak-comm-2")
        _wait_for_records(folder / "results.jsonl", proc)
        os.killpg(proc.pid, signal.SIGINT)
        stdout, stderr = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.communicate()
    assert proc.returncode == 130, stderr
    records = read_records(folder / "results.jsonl", strict=False)
    done = len(records)
    assert 1 <= done < 12 and all(r.kind == "collective" and r.status == "ok" for r in records)
    command = shlex.join([*argv, "--resume", "--out", folder.name])
    line = f"Interrupted after {done} of 12 cases; run again with: {command}"
    assert stderr.splitlines()[-2:] == [
        f"interrupted after {done} of 12 cases; the finished records are in {folder.name}/results.jsonl; run again "
        f"with: {command}",
        f"summary so far: {folder.name}/summary.md"]
    assert "Traceback" not in stderr
    assert stdout.splitlines()[-1] == line and "all_reduce" in stdout
    summary = (folder / "summary.md").read_text(encoding="utf-8").splitlines()
    assert summary[:3] == ["# truepeak comm", "", f"**{line}**"]
    rows = [ln for ln in summary if ln.startswith("| ") and " KiB | " in ln]  # one per finished case (eager only)
    assert len(rows) == done and rows[0].startswith("| 1 KiB | 512 | ") and "## all_reduce" in summary
    assert "α–β fits" not in "\n".join(summary)  # fits are written at the end only
    # following the hint measures only the cases not finished: 12 collective records in all, each case once, the
    # first ones untouched, and the fit of all 12 points at the end
    first = [r.to_dict() for r in records]
    again = subprocess.run([sys.executable, "-m", *shlex.split(command)], cwd=tmp_path, env=env, capture_output=True,
                           text=True, timeout=300)
    assert again.returncode == 0, again.stderr
    after = read_records(folder / "results.jsonl", strict=False)
    colls = [r for r in after if r.kind == "collective"]
    assert len(colls) == 12 and len({r.key for r in colls}) == 12
    assert [r.to_dict() for r in colls[:done]] == first
    assert [r.kind for r in after].count("collective_fit") == 4


