"""ServeConfig refuses bad settings with the field named, before anything starts (truepeak.bench.serve.config)."""

from __future__ import annotations

import pytest

from truepeak.bench.serve.config import ServeConfig, check_url, parse_concurrency
from truepeak.errors import ConfigError


def _refused(field: str, match: str, **kw):
    with pytest.raises(ConfigError, match=match) as info:
        ServeConfig(**{"url": "http://127.0.0.1:8000", **kw})
    assert info.value.field == field


def test_concurrency_zero_and_other_bad_levels_are_refused():
    _refused("concurrency", r"--concurrency 0: each level must be a whole number >= 1", concurrency=(0,))
    _refused("concurrency", r"lists 8 twice", concurrency=(1, 8, 8))
    _refused("concurrency", r"above the 4096", concurrency=(64000,))
    _refused("concurrency", r"is empty", concurrency=())
    with pytest.raises(ConfigError, match=r"--concurrency 'x' is not a whole number"):
        parse_concurrency("1,x")
    assert parse_concurrency("1, 8,64") == (1, 8, 64)


def test_lengths_timeouts_endpoint_and_launch():
    _refused("output_len", r"--output-len 1 must be a whole number >= 2", output_len=1)
    _refused("input_len", r"--input-len 0", input_len=0)
    _refused("ready_timeout_s", r"--ready-timeout 0", ready_timeout_s=0)
    _refused("endpoint", r"--endpoint 'responses' is not one of completions, chat", endpoint="responses")
    _refused("launch", r"holds shell syntax", launch="vllm serve m && sleep 1")
    _refused("launch", r"--launch is empty", launch=" ")
    with pytest.raises(ConfigError, match=r"give --url http://HOST:PORT") as info:
        ServeConfig()
    assert info.value.field == "url"
    with pytest.raises(ConfigError, match=r"not an http:// or https:// address"):
        check_url("127.0.0.1:8000")
    with pytest.raises(ConfigError, match=r"port that is not a number"):
        check_url("http://127.0.0.1:99999")


def test_defaults_per_level():
    """Without --requests: 4 x concurrency, at least 8; the warm-up is one request per slot; the planner's context
    is the prompt plus half the output (128 + 64 / 2 = 160)."""
    cfg = ServeConfig(launch="vllm serve m", input_len=128, output_len=64)
    assert cfg.url == "http://127.0.0.1:8000" and cfg.launch_argv == ("vllm", "serve", "m")
    assert [cfg.requests_for(c) for c in (1, 2, 16)] == [8, 8, 64]
    assert cfg.warmup_for(16) == 16 and cfg.planner_context == 160
    assert ServeConfig(url="http://h:1/", requests=5).requests_for(64) == 5


@pytest.mark.parametrize("launch, url", [
    ("vllm serve m --port 8104", "http://127.0.0.1:8104"),
    ("transformers serve /m --host 127.0.0.1 --port=8111", "http://127.0.0.1:8111"),
    ("python -m sglang.launch_server --model m", "http://127.0.0.1:8000"),
])
def test_a_launch_without_url_waits_on_the_commands_own_port(launch, url):
    """Regression: --launch "... --port 8104" without --url waited on :8000 for the whole --ready-timeout while the
    server was up on 8104."""
    assert ServeConfig(launch=launch).url == url


def test_a_launch_port_that_is_not_a_number_is_refused():
    with pytest.raises(ConfigError, match="port that is not a number"):
        ServeConfig(launch="vllm serve m --port abc")
