"""The client against real HTTP servers on 127.0.0.1: an unreachable URL, a server that is not OpenAI-compatible,
errors part-way (counted; the run goes on), a stream that stops (truepeak.bench.serve.client, .run)."""

from __future__ import annotations

import pytest

from truepeak.bench.serve import ServeConfig, ServerError, check_server, run_serve
from truepeak.records import read_records

from .conftest import free_port


def test_an_unreachable_url_is_one_line():
    url = f"http://127.0.0.1:{free_port()}"
    with pytest.raises(ServerError, match=rf"cannot reach {url}: .*is the server running there"):
        check_server(url, timeout_s=2)


def test_a_server_that_is_not_openai_compatible(fake_server):
    url = fake_server("not-openai")
    with pytest.raises(ServerError, match=r"answered GET /v1/models with HTTP 404: it is not an OpenAI-compatible"):
        check_server(url)


def test_errors_part_way_are_counted_and_the_run_goes_on(fake_server, tmp_path):
    """Every third POST fails with HTTP 500. The calibration is POST 1; level 1 sends 1 warm-up (POST 2) and 6 timed
    (POSTs 3-8: 3 and 6 fail); level 2 sends 2 warm-up (9, 10) and 6 timed (11-16: 12 and 15 fail)."""
    url = fake_server("fail-every-3rd")
    cfg = ServeConfig(url=url, concurrency=(1, 2), input_len=10, output_len=4, requests=6, out_dir=str(tmp_path))
    res = run_serve(cfg)
    assert [r.status for r in res.records] == ["ok", "ok"]
    assert [(r.correctness.wrong, r.correctness.checked) for r in res.records] == [(2, 6), (2, 6)]
    assert "2 of 6 requests failed: HTTP 500: out of KV cache blocks (x2)" in res.records[0].warnings
    assert res.records[0].derived.mean_prompt_tokens == 10 and res.records[0].derived.mean_output_tokens == 4
    assert [r.workload.concurrency for r in read_records(tmp_path / "results.jsonl")] == [1, 2]


def test_a_stream_that_stops_is_a_counted_failure(fake_server, tmp_path):
    """The calibration asks for 2 tokens and completes; every timed request's stream ends after 2 chunks."""
    cfg = ServeConfig(url=fake_server("stop"), concurrency=(1,), input_len=4, output_len=4, requests=2, warmup=0,
                      out_dir=str(tmp_path))
    rec = run_serve(cfg).records[0]
    assert rec.status == "failed" and rec.correctness.wrong == 2
    assert rec.reason == "no request completed: the stream stopped after 2 text chunks: no finish reason"


def test_the_chat_endpoint_reads_deltas(fake_server, tmp_path):
    cfg = ServeConfig(url=fake_server(), endpoint="chat", concurrency=(2,), input_len=6, output_len=3, requests=4,
                      out_dir=str(tmp_path))
    rec = run_serve(cfg).records[0]
    assert rec.ok and rec.workload.endpoint == "chat" and rec.correctness.wrong == 0
    assert (rec.derived.mean_prompt_tokens, rec.derived.mean_output_tokens) == (6, 3)


def test_a_planner_model_it_cannot_read_is_refused_before_the_folder_or_the_load(fake_server, tmp_path):
    from truepeak.errors import TruepeakError

    cfg = ServeConfig(url=fake_server(), concurrency=(1,), model="no-such-model-preset", gpu="h200",
                      out_dir=str(tmp_path / "o"))
    with pytest.raises(TruepeakError, match="no-such-model-preset"):
        run_serve(cfg)
    assert not (tmp_path / "o").exists()
