"""`truepeak serve` bad input: one line on stderr, status 2, no traceback (truepeak.cli.serve)."""

from __future__ import annotations

import socket
import subprocess
import sys


def _run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "truepeak", "serve", *args], capture_output=True, text=True,
                          timeout=60)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_concurrency_zero_is_one_line_and_status_2(tmp_path):
    p = _run("--url", "http://127.0.0.1:1", "-c", "0,8", "--out", str(tmp_path / "o"))
    assert p.returncode == 2 and "Traceback" not in p.stderr
    assert p.stderr.strip() == ("error: --concurrency 0: each level must be a whole number >= 1 (requests in flight "
                                "at once; 0 sends nothing)")
    assert not (tmp_path / "o").exists()


def test_an_unreachable_url_and_a_missing_launch_script(tmp_path):
    port = _free_port()
    p = _run("--url", f"http://127.0.0.1:{port}", "--out", str(tmp_path / "a"))
    assert p.returncode == 2 and p.stderr.count("\n") == 1
    assert p.stderr.startswith(f"error: cannot reach http://127.0.0.1:{port}: ")
    p = _run("--launch", f"bash {tmp_path}/run_tp8.sh", "--url", f"http://127.0.0.1:{port}", "--out",
             str(tmp_path / "b"))
    assert p.returncode == 2 and "Traceback" not in p.stderr
    assert p.stderr.strip().endswith(f"error: cannot launch the server: {tmp_path}/run_tp8.sh: no such script (bash "
                                     "would exit at once)")


def test_help_teaches():
    p = _run("--help")
    assert p.returncode == 0
    for words in ("--launch", "--ready-timeout", "% of ceiling", "truepeak serve --url http://127.0.0.1:8000"):
        assert words in " ".join(p.stdout.split())


def test_rest_command_replaces_the_levels_and_the_folder():
    """After an interrupted run, the levels not reached go to a new folder: serve never appends to one."""
    from truepeak.cli.serve import rest_command

    argv = ["truepeak", "serve", "--url", "http://127.0.0.1:8000", "-c", "1,4,16", "--out", "s5", "--json"]
    assert rest_command(argv, [4, 16], "s5-rest") == ("truepeak serve --url http://127.0.0.1:8000 --json "
                                                       "--concurrency 4,16 --out s5-rest")
    argv = ["truepeak", "serve", "--launch", "vllm serve m --port 8000", "--concurrency=1,8", "--out=a b"]
    assert rest_command(argv, [8], "a b-rest") == ("truepeak serve --launch 'vllm serve m --port 8000' "
                                                   "--concurrency 8 --out 'a b-rest'")
