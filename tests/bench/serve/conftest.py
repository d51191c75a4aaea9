"""Servers for the serve tests, all on 127.0.0.1 and bounded: free ports, a stdlib OpenAI-like server whose answers
can fail on purpose (errors part-way, a stream that stops, a non-OpenAI server), and a tiny random-weight Qwen3-MoE
model with a word-level tokenizer made in the test's folder (no hub)."""

from __future__ import annotations

import json
import socket
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class FakeOpenAI(BaseHTTPRequestHandler):
    """/v1/models lists "fake"; /v1/completions and /v1/chat/completions stream ``max_tokens`` one-word chunks and the usage. ``mode``:
    ``"ok"``; ``"fail-every-3rd"`` (HTTP 500 on requests 3, 6, ...); ``"stop"`` (timed requests close the stream after
    two chunks, with no finish reason); ``"not-openai"`` (404 everywhere)."""

    mode = "ok"
    count = 0
    lock = threading.Lock()

    def log_message(self, *args):  # quiet
        pass

    def _json(self, code: int, data: dict) -> None:
        body = json.dumps(data).encode()
        self.send_response(code)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self):
        if self.mode == "not-openai":
            return self._json(404, {"detail": "Not Found"})
        if self.path == "/v1/models":
            return self._json(200, {"object": "list", "data": [{"id": "fake", "object": "model"}]})
        return self._json(200 if self.path == "/health" else 404, {})

    def do_POST(self):
        n = int(self.headers.get("content-length", 0))
        req = json.loads(self.rfile.read(n))
        with self.lock:
            type(self).count += 1
            i = type(self).count
        if self.mode == "not-openai":
            return self._json(404, {"detail": "Not Found"})
        if self.mode == "fail-every-3rd" and i % 3 == 0:
            return self._json(500, {"detail": "out of KV cache blocks"})
        chat = "messages" in req
        words = len((req["messages"][0]["content"] if chat else req["prompt"]).split())
        self.send_response(200)
        self.send_header("content-type", "text/event-stream")
        self.end_headers()
        k = req["max_tokens"]
        for j in range(k):
            if self.mode == "stop" and k > 2 and j == 2:
                return  # the connection closes: no finish reason, no usage
            last = j == k - 1
            piece = {"delta": {"content": f" w{j}"}} if chat else {"text": f" w{j}"}
            chunk = {"choices": [{"index": 0, **piece, "finish_reason": "length" if last else None}]}
            self.wfile.write(f"data: {json.dumps(chunk)}\n\n".encode())
            self.wfile.flush()
        usage = {"choices": [], "usage": {"prompt_tokens": words, "completion_tokens": k, "total_tokens": words + k}}
        self.wfile.write(f"data: {json.dumps(usage)}\n\ndata: [DONE]\n\n".encode())


@pytest.fixture
def fake_server():
    """Start a FakeOpenAI server; yields a function ``start(mode) -> url``; stops it after the test."""
    servers = []

    def start(mode: str = "ok") -> str:
        handler = type("Handler", (FakeOpenAI,), {"mode": mode, "count": 0, "lock": threading.Lock()})
        srv = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        srv.daemon_threads = True
        threading.Thread(target=srv.serve_forever, daemon=True).start()
        servers.append(srv)
        return f"http://127.0.0.1:{srv.server_address[1]}"

    yield start
    for srv in servers:
        srv.shutdown()
        srv.server_close()


def make_tiny_moe(out: Path) -> Path:
    """A 2-layer Qwen3-MoE (8 experts, top-2, hidden 64) with random weights and a word-level tokenizer that gives
    each of truepeak's prompt words one token; no end-of-sequence id, so every request generates max_tokens."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast, Qwen3MoeConfig, Qwen3MoeForCausalLM
    import torch

    from truepeak.bench.serve.client import PROMPT_WORDS

    words = list(dict.fromkeys([*PROMPT_WORDS, *(f"w{i}" for i in range(64))]))
    vocab = {"<unk>": 0, **{w: i + 1 for i, w in enumerate(words)}}
    tok = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    tok.decoder = decoders.WordPiece(prefix="##")
    PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="<unk>").save_pretrained(out)
    cfg = Qwen3MoeConfig(vocab_size=len(vocab), hidden_size=64, intermediate_size=128, moe_intermediate_size=32,
                         num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2, head_dim=16,
                         num_experts=8, num_experts_per_tok=2, max_position_embeddings=256, eos_token_id=None,
                         bos_token_id=None, pad_token_id=0)
    torch.manual_seed(0)
    Qwen3MoeForCausalLM(cfg).save_pretrained(out)
    return out
