"""Talking to an OpenAI-compatible server: is it one (:func:`check_server`), what does it serve, and one streaming
request timed chunk by chunk (:func:`stream_request`).

HTTP, connection pooling, timeouts and line splitting are httpx's (``httpx.AsyncClient.stream``,
``Response.aiter_lines``); this module reads the server-sent-event ``data:`` lines of the stream (the OpenAI API's
streaming format: one JSON chunk per line, ``data: [DONE]`` at the end where the server sends it) and asks for the
usage chunk with ``stream_options: {"include_usage": true}`` (OpenAI API reference, "Create completion" /
"Create chat completion"), which sends the usage in one last chunk whose ``choices`` is empty;
``transformers serve`` sends it in the chunk that carries the finish reason: both are read.

httpx is imported inside the functions (:func:`truepeak.errors.require`).
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from typing import Any

from truepeak.bench.serve.stats import RequestResult
from truepeak.errors import TruepeakError, require

#: Common one-token English words a prompt is made of: most tokenizers give each of them (with its leading space)
#: one token, so the words counted are close to the prompt tokens; :func:`truepeak.bench.serve.load.calibrate` then
#: adjusts the count to what the server's usage reports.
PROMPT_WORDS: tuple[str, ...] = (
    "the", "of", "and", "to", "in", "is", "it", "you", "that", "he", "was", "for", "on", "are", "as", "with",
    "his", "they", "at", "be", "this", "have", "from", "or", "one", "had", "by", "word", "but", "not", "what", "all",
    "were", "we", "when", "your", "can", "said", "there", "use", "an", "each", "which", "she", "do", "how", "their",
    "if", "will", "up", "other", "about", "out", "many", "then", "them", "these", "so", "some", "her", "would",
    "make", "like", "him")


def prompt_text(words: int, index: int = 0) -> str:
    """A prompt of ``words`` words of :data:`PROMPT_WORDS`, starting ``index`` words in, so successive requests do
    not share a prefix a server could cache."""
    n = len(PROMPT_WORDS)
    return " ".join(PROMPT_WORDS[(index * 7 + i) % n] for i in range(words))


def httpx_module() -> Any:
    """httpx, or MissingDependencyError naming the install command."""
    return require("httpx", "truepeak serve (its HTTP client)", "pip install httpx")


class ServerError(TruepeakError):
    """The server cannot be driven: unreachable, not OpenAI-compatible, serving nothing, or refusing the request
    shape; the message says which, in one line."""


@dataclass(frozen=True)
class ServerInfo:
    """What /v1/models said: the model ids served, and the context length where the server states one (vLLM's
    ``max_model_len``), else None."""

    models: tuple[str, ...]
    max_model_len: int | None = None


def _detail(text: str, limit: int = 160) -> str:
    """A server's error body in one short line: the JSON ``detail``/``message``/``error`` if there is one."""
    try:
        data = json.loads(text)
    except ValueError:
        data = None
    if isinstance(data, dict):
        for key in ("detail", "message", "error"):
            v = data.get(key)
            if isinstance(v, dict):
                v = v.get("message", v)
            if v:
                text = v if isinstance(v, str) else json.dumps(v)
                break
    one = " ".join(str(text).split())
    return one if len(one) <= limit else one[: limit - 3] + "..."


def check_server(url: str, timeout_s: float = 10.0) -> ServerInfo:
    """GET ``url``/v1/models and check that it answers as an OpenAI-compatible server: HTTP 200 with a JSON object
    whose ``data`` lists at least one model with an ``id``.

    Raises:
        ServerError: nothing listens there (connection refused, no such host, timeout), the answer is another status
            or not that JSON (a web server, another API), or it lists no model; one line naming the URL.
    """
    httpx = httpx_module()
    where = f"{url}/v1/models"
    try:
        resp = httpx.get(where, timeout=timeout_s)
    except httpx.ConnectError as exc:
        raise ServerError(f"cannot reach {url}: {exc or 'connection refused'}; is the server running there (or give "
                          "--launch to start it)?") from None
    except httpx.TimeoutException:
        raise ServerError(f"{url} did not answer GET /v1/models within {timeout_s:g} s") from None
    except httpx.HTTPError as exc:
        raise ServerError(f"cannot talk to {url}: {type(exc).__name__}: {exc}") from None
    not_openai = ("is not an OpenAI-compatible server (vLLM, SGLang, TensorRT-LLM and transformers serve list "
                  "their models at GET /v1/models)")
    if resp.status_code != 200:
        raise ServerError(f"{url} answered GET /v1/models with HTTP {resp.status_code}: it {not_openai}")
    try:
        data = resp.json()
    except ValueError:
        raise ServerError(f"{url} answered GET /v1/models with something that is not JSON: it {not_openai}") from None
    items = data.get("data") if isinstance(data, dict) else None
    if not isinstance(items, list):
        raise ServerError(f"{url} answered GET /v1/models without a 'data' list: it {not_openai}")
    ids = tuple(str(m["id"]) for m in items if isinstance(m, dict) and m.get("id"))
    if not ids:
        raise ServerError(f"{url} serves no model (GET /v1/models lists none); load one, or pass its name with "
                          "--served-model")
    lens = [m.get("max_model_len") for m in items if isinstance(m, dict)]
    max_len = next((int(v) for v in lens if isinstance(v, int) and not isinstance(v, bool) and v > 0), None)
    return ServerInfo(models=ids, max_model_len=max_len)


def request_body(endpoint: str, model: str, prompt: str, max_tokens: int, ignore_eos: bool = False) -> dict:
    """The JSON body of one streaming request: ``prompt`` (completions) or one user message (chat), ``max_tokens``,
    ``stream`` with the usage asked for, greedy sampling (``temperature`` 0: the same work each time) and, with
    ``ignore_eos``, vLLM's and SGLang's ``ignore_eos``."""
    body: dict[str, Any] = {"model": model, "max_tokens": max_tokens, "stream": True,
                            "stream_options": {"include_usage": True}, "temperature": 0.0}
    if endpoint == "chat":
        body["messages"] = [{"role": "user", "content": prompt}]
    else:
        body["prompt"] = prompt
    if ignore_eos:
        body["ignore_eos"] = True
    return body


def _text_of(choice: dict) -> str:
    if "text" in choice:
        return choice.get("text") or ""
    delta = choice.get("delta") or {}
    return (delta.get("content") or "") + (delta.get("reasoning_content") or "")


async def stream_request(client: Any, url: str, path: str, body: dict, timeout_s: float) -> RequestResult:
    """Send one streaming request and time it: the first text chunk (TTFT), every text chunk, the end; read the
    finish reason and the usage.

    Args:
        client: an ``httpx.AsyncClient``.
        url, path: the server's base address and the endpoint's path (``/v1/completions``).
        body: :func:`request_body`'s JSON.
        timeout_s: seconds to wait for the connection and for each next byte.

    Returns:
        A :class:`RequestResult`; a failure is data (``error`` in words), never raised: an HTTP error status with
        the server's message, a connection lost or a stream that stopped before its end (no finish reason or no
        usage), no byte within ``timeout_s``, a chunk that is not JSON, an error object in the stream.
    """
    httpx = httpx_module()
    t0 = time.perf_counter()
    times: list[float] = []
    finish = usage = None
    try:
        async with client.stream("POST", url + path, json=body, timeout=timeout_s) as resp:
            if resp.status_code != 200:
                text = (await resp.aread()).decode("utf-8", "replace")
                return RequestResult(error=f"HTTP {resp.status_code}: {_detail(text)}")
            async for line in resp.aiter_lines():
                if not line.startswith("data:"):
                    continue  # blank separators, ": keep-alive" comments, event: lines
                data = line[5:].strip()
                if data == "[DONE]":
                    break
                try:
                    chunk = json.loads(data)
                except ValueError:
                    return RequestResult(error=f"a stream chunk is not JSON: {_detail(data, 60)}")
                if not isinstance(chunk, dict):
                    return RequestResult(error=f"a stream chunk is not a JSON object: {_detail(data, 60)}")
                if chunk.get("error"):
                    return RequestResult(error=f"the server sent an error mid-stream: {_detail(data)}")
                now = time.perf_counter() - t0
                for choice in chunk.get("choices") or ():
                    if _text_of(choice):
                        times.append(now)
                    finish = choice.get("finish_reason") or finish
                usage = chunk.get("usage") or usage
    except httpx.TimeoutException:
        return RequestResult(error=f"no data for {timeout_s:g} s (--request-timeout)")
    except httpx.ConnectError as exc:
        return RequestResult(error=f"cannot connect: {exc or 'connection refused'}")
    except (httpx.RemoteProtocolError, httpx.ReadError) as exc:
        return RequestResult(error=f"the stream stopped: the server closed the connection ({exc or type(exc).__name__})")
    except httpx.HTTPError as exc:
        return RequestResult(error=f"{type(exc).__name__}: {exc}")
    end = time.perf_counter() - t0
    if finish is None or not isinstance(usage, dict):
        missing = "no finish reason" if finish is None else "no usage chunk (stream_options.include_usage)"
        return RequestResult(error=f"the stream stopped after {len(times)} text chunks: {missing}",
                             ttft_s=times[0] if times else None, chunk_times_s=tuple(times))
    out = usage.get("completion_tokens")
    prompt = usage.get("prompt_tokens")
    if not isinstance(out, int) or out < 1:
        return RequestResult(error=f"the usage reports {out!r} output tokens", chunk_times_s=tuple(times))
    if not times:
        return RequestResult(error="the stream carried no text", prompt_tokens=prompt, output_tokens=out)
    return RequestResult(ttft_s=times[0], latency_s=end, chunk_times_s=tuple(times),
                         prompt_tokens=prompt if isinstance(prompt, int) else None, output_tokens=out,
                         finish_reason=str(finish))


__all__ = ["PROMPT_WORDS", "prompt_text", "ServerError", "ServerInfo", "check_server", "request_body",
           "stream_request", "httpx_module"]
