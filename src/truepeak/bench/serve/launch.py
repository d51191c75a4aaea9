"""Starting an inference server and proving it is up (:class:`LaunchedServer`): the command in its own process
group with its output captured to a log file, each way a launch fails reported at once, and what was started (and
nothing else) stopped on exit, on error and on Ctrl-C.

A launch fails, with one :class:`LaunchError` line (and the log's last lines where there is a log), when:

- the command, or the script an interpreter is given (``bash run_tp8.sh``, ``python serve.py``), does not exist
  (checked before anything starts: the failure that a ``nohup ... &`` followed by a blind ``sleep`` hides);
- something already answers at the server's host and port (checked before starting: the new server could not bind,
  and the old one would be measured);
- the process exits before it is ready (its exit status and last log lines);
- it is not ready within the timeout: neither ``GET /health`` nor ``GET /v1/models`` answered 200.

Stopping: SIGTERM to the process group, then SIGKILL to it after a grace period (``os.killpg``: the server's worker
processes, which share its group, go with it; processes of other groups are never signalled).

Standard library, and httpx inside :meth:`LaunchedServer.wait_ready`.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from urllib.parse import urlsplit

from truepeak.errors import TruepeakError

#: Programs whose first argument is a script to run: a missing script is reported before they start.
INTERPRETERS = frozenset({"bash", "sh", "zsh", "dash", "python", "python3", "nohup"})

#: Seconds between SIGTERM and SIGKILL when stopping a server (vLLM and SGLang shut down in a few seconds).
STOP_GRACE_S = 10.0

#: Lines of the log a failure shows.
TAIL_LINES = 12


class LaunchError(TruepeakError):
    """A server launch failed: the message names how, in one line, and ends with the log's last lines when there
    are any (``log_tail``)."""

    def __init__(self, message: str, log_tail: Sequence[str] = ()):
        tail = [ln for ln in log_tail if ln.strip()]
        super().__init__(message + (" | last log lines: " + " / ".join(tail) if tail else ""))
        self.log_tail = tuple(tail)


def log_tail(path: str | os.PathLike, n: int = TAIL_LINES) -> list[str]:
    """The last ``n`` lines of a log file, carriage-return progress bars reduced to their last state; [] when
    there is none."""
    try:
        text = Path(path).read_text(encoding="utf-8", errors="replace")
    except OSError:
        return []
    lines = [ln.rsplit("\r", 1)[-1].rstrip() for ln in text.splitlines()]
    return [ln for ln in lines if ln.strip()][-n:]


def missing_program(argv: Sequence[str]) -> str | None:
    """Why ``argv`` cannot start, or None: its program is not a file / not on PATH / not executable, or the script
    an interpreter (:data:`INTERPRETERS`) is asked to run does not exist."""
    if not argv:
        return "the launch command is empty"
    prog = argv[0]
    if "/" in prog:
        if not os.path.exists(prog):
            return f"{prog}: no such file"
        if os.path.isdir(prog) or not os.access(prog, os.X_OK):
            return f"{prog} is not an executable file (chmod +x it, or run it as: bash {prog})"
    elif shutil.which(prog) is None:
        return f"{prog}: command not found on PATH"
    name = os.path.basename(prog)
    if name in INTERPRETERS and len(argv) > 1:
        rest = list(argv[1:])
        if name == "nohup":
            return missing_program(rest)
        for a in rest:
            if a in ("-m", "-c"):
                break  # python -m module, bash -c "command": no script file
            if a.startswith("-"):
                continue
            if ("/" in a or a.endswith((".sh", ".py", ".bash"))) and not os.path.isfile(a):
                return f"{a}: no such script ({prog} would exit at once)"
            break
    return None


def host_port(url: str) -> tuple[str, int]:
    """The host and port of ``url`` (port 80/443 by scheme when it has none)."""
    parts = urlsplit(url)
    return parts.hostname or "127.0.0.1", parts.port or (443 if parts.scheme == "https" else 80)


def port_in_use(host: str, port: int, timeout_s: float = 0.5) -> bool:
    """Whether something accepts TCP connections at ``host``:``port`` now."""
    try:
        with socket.create_connection((host, port), timeout=timeout_s):
            return True
    except OSError:
        return False


class LaunchedServer:
    """A server started by truepeak: :meth:`start`, :meth:`wait_ready`, :meth:`stop` (also on leaving a ``with``
    block, whatever ends it, Ctrl-C included).

    Args:
        argv: the command's words.
        url: where it will serve (its host and port are checked before starting and polled after).
        log_path: the file its stdout and stderr go to (created; appended to).
    """

    def __init__(self, argv: Sequence[str], url: str, log_path: str | os.PathLike):
        self.argv = tuple(argv)
        self.url = url.rstrip("/")
        self.log_path = Path(log_path)
        self.proc: subprocess.Popen | None = None
        self.ready_after_s: float | None = None

    def __enter__(self) -> LaunchedServer:
        return self

    def __exit__(self, *exc) -> None:
        self.stop()

    def start(self) -> None:
        """Check the command and the port, then start the command in a new session (its own process group), stdin
        closed, stdout and stderr to the log.

        Raises:
            LaunchError: the command or its script does not exist; the port is taken; the process cannot be started.
        """
        why = missing_program(self.argv)
        if why is not None:
            raise LaunchError(f"cannot launch the server: {why}")
        host, port = host_port(self.url)
        if port_in_use(host, port):
            raise LaunchError(f"port {port} on {host} is already taken: something answers there before the launch; "
                              "stop it, or attach to it with --url and no --launch, or serve on another port (the "
                              "same in --url and the command)")
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        log = open(self.log_path, "ab")  # noqa: SIM115 - the child holds it; closed below once it has it
        try:
            self.proc = subprocess.Popen(self.argv, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                                         start_new_session=True)
        except OSError as exc:
            raise LaunchError(f"cannot launch the server: {self.argv[0]}: {exc.strerror or exc}") from None
        finally:
            log.close()

    def exited(self) -> int | None:
        """The exit status if the process has ended, else None."""
        return None if self.proc is None else self.proc.poll()

    def wait_ready(self, timeout_s: float, progress: Callable[[float, str], None] | None = None,
                   poll_s: float = 0.5) -> float:
        """Poll ``GET /health`` and ``GET /v1/models`` until one answers 200; returns the seconds it took.

        Args:
            timeout_s: seconds to wait.
            progress: called each poll with the seconds waited and the log's last line.
            poll_s: seconds between polls.

        Raises:
            LaunchError: the process exited (its status and the log's tail), or the timeout passed (the log's tail;
                the process is stopped).
        """
        from truepeak.bench.serve.client import httpx_module

        httpx = httpx_module()
        t0 = time.monotonic()
        while True:
            waited = time.monotonic() - t0
            code = self.exited()
            if code is not None:
                raise LaunchError(f"the server exited with status {code} after {waited:.1f} s, before it was ready "
                                  f"(log: {self.log_path})", log_tail(self.log_path))
            for path in ("/health", "/v1/models"):
                try:
                    if httpx.get(self.url + path, timeout=min(2.0, max(poll_s, 0.2))).status_code == 200:
                        self.ready_after_s = time.monotonic() - t0
                        return self.ready_after_s
                except httpx.HTTPError:
                    pass
            if progress is not None:
                tail = log_tail(self.log_path, 1)
                progress(waited, tail[-1] if tail else "")
            if waited >= timeout_s:
                tail = log_tail(self.log_path)
                self.stop()
                raise LaunchError(f"the server was not ready within --ready-timeout {timeout_s:g} s: neither GET "
                                  f"{self.url}/health nor /v1/models answered 200 (log: {self.log_path})", tail)
            time.sleep(poll_s)

    def stop(self, grace_s: float = STOP_GRACE_S) -> int | None:
        """Stop the process group this server started (SIGTERM, then SIGKILL after ``grace_s``); returns the exit
        status, None if nothing was started. Safe to call twice."""
        proc = self.proc
        if proc is None:
            return None
        if proc.poll() is None:
            try:
                os.killpg(proc.pid, signal.SIGTERM)  # the group the new session made: its id is the child's pid
            except ProcessLookupError:
                pass
            try:
                proc.wait(timeout=grace_s)
            except subprocess.TimeoutExpired:
                try:
                    os.killpg(proc.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                proc.wait()
        else:  # the leader ended; workers it left in its group are still ours to stop
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
        return proc.returncode


__all__ = ["LaunchedServer", "LaunchError", "log_tail", "missing_program", "port_in_use", "host_port",
           "INTERPRETERS", "STOP_GRACE_S"]
