"""The settings of one ``truepeak serve`` run (:class:`ServeConfig`), checked when they are built, before a server is
started, a connection is made or anything heavy is imported.

Standard library only.
"""

from __future__ import annotations

import math
import shlex
from dataclasses import dataclass, field
from urllib.parse import urlsplit

from truepeak.errors import ConfigError

#: The OpenAI-compatible endpoints a run can drive, by name: the legacy text completions and chat completions.
ENDPOINTS: dict[str, str] = {"completions": "/v1/completions", "chat": "/v1/chat/completions"}

#: The most requests in flight at once a run accepts: one client process holds one connection per request; the
#: bound refuses a mistyped level (64000 for 64) before thousands of connections are opened.
MAX_CONCURRENCY = 4096

#: The most requests one level sends when it runs for a duration without a request count: a bound, so a level always
#: ends even against a server that answers instantly.
MAX_LEVEL_REQUESTS = 100_000

#: Where ``--launch`` serves when no ``--url`` is given: ``transformers serve``'s and vLLM's default port, on this
#: machine.
DEFAULT_LAUNCH_URL = "http://127.0.0.1:8000"


def launch_url(argv) -> str:
    """Where a launched server listens when no ``--url`` is given: ``http://127.0.0.1:PORT`` for the command's own
    ``--port PORT`` (``vllm serve``, ``transformers serve``, ``python -m sglang.launch_server`` all take it), else
    :data:`DEFAULT_LAUNCH_URL`. A port that is not a number is left to :func:`check_url` to refuse."""
    words = list(argv)
    for i, w in enumerate(words):
        if w == "--port" and i + 1 < len(words):
            return f"http://127.0.0.1:{words[i + 1]}"
        if w.startswith("--port="):
            return f"http://127.0.0.1:{w.split('=', 1)[1]}"
    return DEFAULT_LAUNCH_URL


def _whole(value: object, name: str, field_: str, minimum: int, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ConfigError(f"{name} {value!r} must be a whole number >= {minimum} ({what})", field=field_)
    return value


def _seconds(value: object, name: str, field_: str, what: str, allow_none: bool = False) -> float | None:
    if value is None and allow_none:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value <= 0:
        raise ConfigError(f"{name} {value!r} must be a number of seconds > 0 ({what})", field=field_)
    return float(value)


def parse_concurrency(text: str) -> tuple[int, ...]:
    """``"1,8,64"`` -> ``(1, 8, 64)``: the concurrency levels, in the order given.

    Raises:
        ConfigError: an empty list, a value that is not a whole number, one below 1 (concurrency 0 sends nothing) or
            above :data:`MAX_CONCURRENCY`, or a level given twice.
    """
    parts = [p.strip() for p in str(text).split(",")]
    if not any(parts):
        raise ConfigError("--concurrency is empty; give levels such as 1,8,64", field="concurrency")
    out: list[int] = []
    for p in parts:
        try:
            out.append(int(p))
        except ValueError:
            raise ConfigError(f"--concurrency {p!r} is not a whole number; give levels such as 1,8,64",
                              field="concurrency") from None
    return tuple(out)


def check_url(url: str, flag: str = "--url") -> str:
    """``url`` without a trailing slash when it is ``http://HOST:PORT`` or ``https://HOST[:PORT]`` (a path prefix is
    kept: ``http://host/serving``), else ConfigError naming it and the form wanted."""
    text = str(url).strip().rstrip("/")
    parts = urlsplit(text)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ConfigError(f"{flag} {url!r} is not an http:// or https:// address; give e.g. http://127.0.0.1:8000",
                          field="url")
    try:
        parts.port
    except ValueError:
        raise ConfigError(f"{flag} {url!r} has a port that is not a number in 1..65535", field="url") from None
    if parts.query or parts.fragment:
        raise ConfigError(f"{flag} {url!r} has a query or fragment; give the server's base address only", field="url")
    return text


@dataclass(frozen=True)
class ServeConfig:
    """What ``truepeak serve`` runs: which server, the load at each concurrency level, and the planner to hold it
    against.

    Attributes:
        url: the server's base address (``http://HOST:PORT``); with ``launch`` default the command's own ``--port``
            on 127.0.0.1 (:func:`launch_url`), else :data:`DEFAULT_LAUNCH_URL`.
        launch: the command line that starts the server (split into words as a POSIX shell would; no pipes, ``&&``
            or redirections: put those in a script), or None to attach to a running server at ``url``.
        concurrency: the levels: requests in flight at once, each >= 1, run in the order given.
        input_len, output_len: prompt tokens and generated tokens per request (output >= 2: TPOT needs two tokens).
        requests: requests per level (after the warm-up); None: 4 x concurrency, at least 8, or with ``duration_s``
            as many as fit (at most :data:`MAX_LEVEL_REQUESTS`).
        duration_s: seconds per level after which no new request starts (the ones in flight finish), or None.
        warmup: requests sent at each level's concurrency before it is timed and left out (None: one per slot, that
            is ``concurrency``).
        endpoint: ``"completions"`` or ``"chat"`` (:data:`ENDPOINTS`).
        served_model: the model name sent with each request; None: the first one the server lists at /v1/models.
        ignore_eos: send ``"ignore_eos": true`` so each request generates ``output_len`` tokens (vLLM and SGLang take
            it; a server that refuses unknown fields, as ``transformers serve`` does, refuses the request).
        ready_timeout_s: seconds a launched server has to answer /health or /v1/models.
        request_timeout_s: seconds one request may wait for its next byte before it counts as failed.
        model, gpu, gpus, layout: what the planner plans (a preset, a config.json or folder; a catalog GPU name; the
            GPU count; a layout such as ``"tp8"``); None: read from the served model and the detected GPU where
            possible.
        out_dir: the results folder (None: ``./truepeak-serve-YYYYmmdd-HHMMSS``).

    Raises:
        ConfigError: a field out of range, with ``field`` naming it and the message naming the value and what is
            accepted.
    """

    url: str | None = None
    launch: str | None = None
    concurrency: tuple[int, ...] = (1, 8, 64)
    input_len: int = 128
    output_len: int = 128
    requests: int | None = None
    duration_s: float | None = None
    warmup: int | None = None
    endpoint: str = "completions"
    served_model: str | None = None
    ignore_eos: bool = False
    ready_timeout_s: float = 600.0
    request_timeout_s: float = 300.0
    model: str | None = None
    gpu: str | None = None
    gpus: int | None = None
    layout: str | None = None
    out_dir: str | None = None
    argv: tuple[str, ...] = field(default=(), compare=False)

    def __post_init__(self) -> None:
        put = lambda name, value: object.__setattr__(self, name, value)  # noqa: E731 (frozen)
        if self.launch is not None:
            if not str(self.launch).strip():
                raise ConfigError("--launch is empty; give the command that starts the server, e.g. "
                                  "--launch \"vllm serve MODEL --port 8000\"", field="launch")
            try:
                words = shlex.split(self.launch)
            except ValueError as exc:
                raise ConfigError(f"--launch {self.launch!r} cannot be split into words ({exc})",
                                  field="launch") from None
            if any(w in ("|", "||", "&&", ";", "&", ">", "<") for w in words):
                raise ConfigError(f"--launch {self.launch!r} holds shell syntax; put the pipeline in a script and "
                                  "give --launch \"bash run_server.sh\"", field="launch")
        if self.url is None and self.launch is None:
            raise ConfigError("give --url http://HOST:PORT to attach to a running server, or --launch \"CMD\" to "
                              "start one", field="url")
        put("url", check_url(self.url if self.url is not None else launch_url(self.launch_argv)))
        levels = tuple(self.concurrency)
        if not levels:
            raise ConfigError("--concurrency is empty; give levels such as 1,8,64", field="concurrency")
        for c in levels:
            if isinstance(c, bool) or not isinstance(c, int) or c < 1:
                raise ConfigError(f"--concurrency {c!r}: each level must be a whole number >= 1 (requests in "
                                  "flight at once; 0 sends nothing)", field="concurrency")
            if c > MAX_CONCURRENCY:
                raise ConfigError(f"--concurrency {c} is above the {MAX_CONCURRENCY} requests in flight truepeak "
                                  f"drives; give 1 to {MAX_CONCURRENCY}", field="concurrency")
        if len(set(levels)) != len(levels):
            twice = next(c for c in levels if levels.count(c) > 1)
            raise ConfigError(f"--concurrency lists {twice} twice; give each level once", field="concurrency")
        put("concurrency", levels)
        _whole(self.input_len, "--input-len", "input_len", 1, "prompt tokens per request")
        _whole(self.output_len, "--output-len", "output_len", 2,
               "generated tokens per request; TPOT needs a second token")
        if self.requests is not None:
            _whole(self.requests, "--requests", "requests", 1, "requests per level")
            if self.requests > MAX_LEVEL_REQUESTS:
                raise ConfigError(f"--requests {self.requests} is above {MAX_LEVEL_REQUESTS} per level",
                                  field="requests")
        put("duration_s", _seconds(self.duration_s, "--duration", "duration_s", "per level", allow_none=True))
        if self.warmup is not None:
            _whole(self.warmup, "--warmup", "warmup", 0, "untimed requests per level")
        if self.endpoint not in ENDPOINTS:
            raise ConfigError(f"--endpoint {self.endpoint!r} is not one of {', '.join(ENDPOINTS)}", field="endpoint")
        if self.served_model is not None and not str(self.served_model).strip():
            raise ConfigError("--served-model is empty; give the name the server serves, or leave it out",
                              field="served_model")
        put("ready_timeout_s", _seconds(self.ready_timeout_s, "--ready-timeout", "ready_timeout_s",
                                        "how long a launched server has to become ready"))
        put("request_timeout_s", _seconds(self.request_timeout_s, "--request-timeout", "request_timeout_s",
                                          "how long one request may wait for its next byte"))
        if self.gpus is not None:
            _whole(self.gpus, "--gpus", "gpus", 1, "GPUs the server runs on")

    # -- derived -----------------------------------------------------------------------------------------------------
    @property
    def launch_argv(self) -> tuple[str, ...]:
        """``launch`` split into words (empty when attaching)."""
        return tuple(shlex.split(self.launch)) if self.launch is not None else ()

    @property
    def path(self) -> str:
        """The endpoint's path (``/v1/completions``)."""
        return ENDPOINTS[self.endpoint]

    def requests_for(self, concurrency: int) -> int:
        """Requests timed at ``concurrency``: ``requests``; else with a duration :data:`MAX_LEVEL_REQUESTS` (the
        duration ends the level first); else 4 x concurrency, at least 8 (each slot sends several, so the level is
        not one wave that starts and ends together)."""
        if self.requests is not None:
            return self.requests
        if self.duration_s is not None:
            return MAX_LEVEL_REQUESTS
        return max(8, 4 * concurrency)

    def warmup_for(self, concurrency: int) -> int:
        """Untimed requests before the level: ``warmup``, else ``concurrency``."""
        return self.warmup if self.warmup is not None else concurrency

    @property
    def planner_context(self) -> int:
        """Tokens in each sequence's KV cache that the planner is asked about: the prompt plus half the output,
        the mean context over a request's decode."""
        return self.input_len + self.output_len // 2

    def to_dict(self) -> dict:
        """The settings as JSON data, stored in each record's ``run_config``."""
        return {"url": self.url, "launch": self.launch, "concurrency": list(self.concurrency),
                "input_len": self.input_len, "output_len": self.output_len, "requests": self.requests,
                "duration_s": self.duration_s, "warmup": self.warmup, "endpoint": self.endpoint,
                "served_model": self.served_model, "ignore_eos": self.ignore_eos,
                "ready_timeout_s": self.ready_timeout_s, "request_timeout_s": self.request_timeout_s,
                "model": self.model, "gpu": self.gpu, "gpus": self.gpus, "layout": self.layout,
                "argv": list(self.argv) or None}


__all__ = ["ServeConfig", "ENDPOINTS", "MAX_CONCURRENCY", "MAX_LEVEL_REQUESTS", "DEFAULT_LAUNCH_URL",
           "parse_concurrency", "check_url", "launch_url"]
