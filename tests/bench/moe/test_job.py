"""The moe bench sweep (truepeak.bench.moe.job): what it refuses before measuring (anything but a MoeBenchConfig; a
valid one without torch or without a GPU, with nothing written); on a GPU (marked gpu), records written and a failed
point that does not stop the sweep. The configuration's own checks: test_config.py."""

from __future__ import annotations

import pytest

from truepeak.bench import moe
from truepeak.bench.moe import job
from truepeak.errors import MissingDependencyError, TruepeakError, UnsupportedError


def test_run_bench_takes_a_config():
    with pytest.raises(TruepeakError, match="run_bench takes a MoeBenchConfig, got str 'deepseek-v3'"):
        moe.run_bench("deepseek-v3")


def test_a_valid_config_without_torch_asks_for_torch_and_writes_nothing(without_torch, tmp_path):
    config = moe.MoeBenchConfig("deepseek-v3", tokens_per_expert=[1])
    with pytest.raises(MissingDependencyError, match="torch is needed for the MoE benchmark"):
        moe.run_bench(config, out_path=str(tmp_path / "r.jsonl"))
    assert list(tmp_path.iterdir()) == []


def test_without_a_gpu_nothing_is_written(tmp_path):
    torch = pytest.importorskip("torch")
    if torch.cuda.is_available():
        pytest.skip("this machine has a CUDA GPU")
    with pytest.raises(UnsupportedError, match="truepeak moe bench needs a CUDA GPU .torch sees none."):
        moe.run_bench(moe.MoeBenchConfig("deepseek-v3", tokens_per_expert=[1]), out_path=str(tmp_path / "r.jsonl"))
    assert list(tmp_path.iterdir()) == []


@pytest.mark.gpu
def test_gpu_sweep_writes_records_and_survives_a_failure(tmp_path, monkeypatch):
    torch = pytest.importorskip("torch")
    real = job.build_backend

    def flaky(backend, *a, **kw):
        if backend == "bmm":
            raise torch.cuda.OutOfMemoryError("CUDA out of memory (simulated)")
        return real(backend, *a, **kw)

    monkeypatch.setattr(job, "build_backend", flaky)  # the name the sweep calls
    config = moe.MoeBenchConfig("qwen3-235b-a22b", ep=16, tokens_per_expert=[2], weights=["bf16", "nvfp4"],
                                budget_s=0.02, warmup_s=0.01, read_bw=4.5e12)
    recs = moe.run_bench(config, out_path=str(tmp_path / "r.jsonl"))
    status = {(r.format, r.backend): r.status for r in recs}
    assert status[("bf16", "bmm")] == "failed" and status[("bf16", "triton")] == "ok"
    assert status[("nvfp4", "per_expert")] == "skipped" and status[("nvfp4", "triton")] == "ok"
    ok = [r for r in recs if r.ok]
    assert all(r.kind == "moe_experts" and 0 < r.derived.read_bandwidth_fraction for r in ok)
    # the Triton kernel's records say where its configuration came from (FusedMoE.config_note); torch backends none
    assert all(r.reason.endswith("choose_config's rules") or r.reason.startswith("tuned table")
               for r in ok if r.backend == "triton")
    assert all(r.reason == "" for r in ok if r.backend != "triton")
