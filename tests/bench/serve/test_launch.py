"""Launch failures, each a real one on this machine: a missing command and script, a command that exits at once, a
port already taken, a server that never becomes ready; and stopping stops what was started
(truepeak.bench.serve.launch). Every wait is bounded by a few seconds."""

from __future__ import annotations

import os
import socket
import sys
import time

import pytest

from truepeak.bench.serve.launch import LaunchedServer, LaunchError

from .conftest import free_port


def _server(tmp_path, argv, port=None):
    return LaunchedServer(argv, f"http://127.0.0.1:{port or free_port()}", tmp_path / "server.log")


def test_a_missing_command_or_script_is_reported_before_anything_starts(tmp_path):
    with pytest.raises(LaunchError, match=r"no-such-server-cmd: command not found on PATH"):
        _server(tmp_path, ["no-such-server-cmd", "--port", "1"]).start()
    script = str(tmp_path / "run_tp8.sh")
    with pytest.raises(LaunchError, match=r"run_tp8.sh: no such script \(bash would exit at once\)"):
        _server(tmp_path, ["nohup", "bash", script]).start()
    assert not (tmp_path / "server.log").exists()


def test_a_command_that_exits_at_once_shows_its_status_and_last_lines(tmp_path):
    s = _server(tmp_path, [sys.executable, "-c", "import sys; print('CUDA out of memory'); sys.exit(3)"])
    with s, pytest.raises(LaunchError, match=r"exited with status 3 .*last log lines: CUDA out of memory"):
        s.start()
        s.wait_ready(10, poll_s=0.1)


def test_a_port_already_taken_is_refused(tmp_path):
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        with pytest.raises(LaunchError, match=rf"port {port} on 127.0.0.1 is already taken"):
            _server(tmp_path, [sys.executable, "-m", "http.server"], port).start()


def test_a_server_that_never_becomes_ready_times_out_and_is_stopped(tmp_path):
    """python -m http.server answers 404 for /health and /v1/models: it listens, but is not an inference server."""
    port = free_port()
    s = _server(tmp_path, [sys.executable, "-m", "http.server", str(port), "--bind", "127.0.0.1"], port)
    t0 = time.monotonic()
    seen = []
    with pytest.raises(LaunchError, match=r"not ready within --ready-timeout 2 s: neither GET .*/health nor"):
        s.start()
        s.wait_ready(2, progress=lambda waited, line: seen.append(waited), poll_s=0.2)
    assert time.monotonic() - t0 < 15 and seen and s.exited() is not None


def test_stop_ends_the_whole_group_it_started_and_nothing_else(tmp_path):
    pidfile = tmp_path / "child.pid"
    s = _server(tmp_path, ["bash", "-c", f"sleep 60 & echo $! > {pidfile}; wait"])
    s.start()
    for _ in range(50):
        if pidfile.exists() and pidfile.read_text().strip():
            break
        time.sleep(0.1)
    child = int(pidfile.read_text())
    s.stop(grace_s=5)
    assert s.exited() is not None
    assert _gone(child)  # the leader's own child was in its group: signalled too
    assert os.getpid()  # this process, in another group, is untouched


def _gone(pid: int, wait_s: float = 5.0) -> bool:
    """Whether ``pid`` has ended (no such process, or a zombie waiting for its reaper), within ``wait_s``."""
    t0 = time.monotonic()
    while time.monotonic() - t0 < wait_s:
        try:
            with open(f"/proc/{pid}/stat") as f:
                if f.read().rsplit(")", 1)[1].split()[0] in ("Z", "X"):
                    return True
        except FileNotFoundError:
            return True
        time.sleep(0.1)
    return False


@pytest.mark.parametrize("signame, status, times", [("SIGINT", 130, 1), ("SIGTERM", 143, 1), ("SIGINT", 130, 2)])
def test_ctrl_c_keeps_the_finished_levels_and_stops_the_server(tmp_path, signame, status, times):
    """truepeak serve launches a slow server (each chunk 0.2 s apart), finishes level 1, gets SIGINT (Ctrl-C) or
    SIGTERM (kill, timeout, a scheduler) during level 2: level 1's record in results.jsonl, the server's process
    gone, and the command for level 2 into a new folder. Regression: SIGTERM left the server running; two SIGINTs
    20 ms apart (``timeout`` and a terminal's process group can deliver one twice) ended it silently."""
    import signal
    import subprocess

    from truepeak.records import read_records

    port, pidfile, out = free_port(), tmp_path / "server.pid", tmp_path / "run"
    script = os.path.join(os.path.dirname(__file__), "slow_server.py")
    p = subprocess.Popen([sys.executable, "-m", "truepeak", "serve", "--launch",
                          f"{sys.executable} {script} {port} {pidfile}", "--url", f"http://127.0.0.1:{port}",
                          "-c", "1,2", "--requests", "2", "--warmup", "0", "--input-len", "4", "--output-len", "3",
                          "--ready-timeout", "30", "--out", str(out), "--no-progress"],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        t0 = time.monotonic()
        done = out / "results.jsonl"
        while time.monotonic() - t0 < 60 and not (done.exists() and done.stat().st_size > 0):
            time.sleep(0.1)
        time.sleep(0.3)  # inside level 2
        for i in range(times):
            if i:
                time.sleep(0.02)
            p.send_signal(getattr(signal, signame))
        stdout, stderr = p.communicate(timeout=60)
    finally:
        if p.poll() is None:
            p.kill()
    assert p.returncode == status, stderr
    assert [r.workload.concurrency for r in read_records(out / "results.jsonl")] == [1]
    assert "Interrupted after 1 of 2 levels" in stdout
    assert f"--concurrency 2 --out {out}-rest" in " ".join(stdout.split())
    assert _gone(int(pidfile.read_text()))
