"""`truepeak serve --launch` against a real `transformers serve` on 127.0.0.1 with a tiny random-weight Qwen3-MoE made
in the test's folder: the launch is verified, two levels are measured with the token counts from the server's usage,
and each level is held against the planner. Bounded: 3 timed requests of 4 tokens per level, 120 s to be ready."""

from __future__ import annotations

import json
import sys

import pytest

from truepeak.bench.serve.compare import PlannerTarget, planner_figures
from truepeak.cli import main

from .conftest import free_port, make_tiny_moe

pytest.importorskip("transformers")
pytest.importorskip("fastapi")
pytest.importorskip("uvicorn")
pytest.importorskip("httpx")


@pytest.mark.slow
def test_launch_measure_and_plan_against_transformers_serve(tmp_path, capsys):
    model = make_tiny_moe(tmp_path / "tiny-moe")
    port = free_port()
    out = tmp_path / "run"
    launch = (f"{sys.executable} -m transformers.cli.transformers serve {model} --host 127.0.0.1 --port {port} "
              "--device cpu")
    with pytest.raises(SystemExit) as done:
        main(["serve", "--launch", launch, "--url", f"http://127.0.0.1:{port}", "-c", "1,2", "--requests", "3",
              "--input-len", "16", "--output-len", "4", "--ready-timeout", "120", "--request-timeout", "60",
              "--gpu", "h200", "--out", str(out), "--json", "--no-progress"])
    assert done.value.code in (0, None)
    recs = json.loads(capsys.readouterr().out)
    assert [r["status"] for r in recs] == ["ok", "ok"]
    assert [r["workload"]["concurrency"] for r in recs] == [1, 2]
    for r in recs:
        d = r["derived"]
        assert d["mean_prompt_tokens"] == 16 and d["mean_output_tokens"] == 4  # the word-level tokenizer: 1 per word
        assert r["correctness"]["wrong"] == 0 and r["correctness"]["checked"] == 3
        assert d["decode_tokens_per_s"] == pytest.approx(r["workload"]["concurrency"] / d["tpot_median_s"])
        assert d["ceiling_fraction"] == pytest.approx(d["decode_tokens_per_s"] / d["ceiling_tokens_per_s"])
        assert 0 < d["expected_tokens_per_s"] < d["ceiling_tokens_per_s"]  # the expected step is above the ceiling's
        assert d["expected_fraction"] == pytest.approx(d["decode_tokens_per_s"] / d["expected_tokens_per_s"])
    from truepeak.hardware.lookup import get_accelerator
    from truepeak.moe.config import load_model

    target = PlannerTarget(load_model(str(model)), get_accelerator("h200"), None, None, "")
    figures = planner_figures(target, 2, 16 + 4 // 2)
    assert recs[1]["derived"]["ceiling_tokens_per_s"] == pytest.approx(figures.ceiling_tokens_per_s)
    assert recs[1]["derived"]["expected_tokens_per_s"] == pytest.approx(figures.expected_tokens_per_s)
    assert recs[1]["derived"]["largest_lever"] == figures.largest_lever
    assert (out / "server.log").stat().st_size > 0 and "Serving" in (out / "report.html").read_text()
