"""The moe bench sweep (truepeak.bench.moe.job): bad input refused before anything is measured; on a GPU (marked
gpu), records written and a failed point that does not stop the sweep."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from truepeak.bench import moe  # noqa: E402
from truepeak.bench.moe import job  # noqa: E402
from truepeak.errors import TruepeakError, UnknownNameError  # noqa: E402


def test_run_bench_validates_before_measuring():
    with pytest.raises(UnknownNameError, match="unknown --weights 'int4'"):
        moe.run_bench("deepseek-v3", weights=["int4"])
    with pytest.raises(UnknownNameError, match="unknown backend 'cutlass'"):
        moe.run_bench("deepseek-v3", backends=["cutlass"])
    with pytest.raises(TruepeakError, match="must be a finite number > 0"):
        moe.run_bench("deepseek-v3", tokens_per_expert=[0])
    with pytest.raises(TruepeakError, match="--ep 5"):
        moe.run_bench("deepseek-v3", ep=5)


def test_bad_fp4_activations_named_before_any_measurement():
    with pytest.raises(TruepeakError, match=r"--fp4-activations 'int4': expected auto \(fp16 for nvfp4, fp8 for mxfp4; "
                                            r"with the block-scaled kernel fp4 for nvfp4, fp8 for mxfp4\), fp16 "
                                            r"\(w4a16\), fp8 \(w4a8\) or fp4 \(W4A4, block-scaled kernel only\)"):
        moe.run_bench("deepseek-v3", weights=["nvfp4"], fp4_activations="int4")
    with pytest.raises(TruepeakError, match=r"--fp4-kernel 'marlin': expected auto, dequant, block-scaled"):
        moe.run_bench("deepseek-v3", weights=["nvfp4"], fp4_kernel="marlin")
    # a kernel and activations that do not go together are refused before anything is measured (no GPU needed)
    with pytest.raises(TruepeakError, match=r"--fp4-activations fp4 with --fp4-kernel dequant and weights mxfp4: the "
                                            r"dequantising kernels take fp8 or fp16"):
        moe.run_bench("deepseek-v3", weights=["bf16", "mxfp4"], fp4_kernel="dequant", fp4_activations="fp4")
    with pytest.raises(TruepeakError, match=r"--fp4-activations fp16 with --fp4-kernel block-scaled"):
        moe.run_bench("deepseek-v3", weights=["nvfp4"], fp4_kernel="block-scaled", fp4_activations="fp16")
    with pytest.raises(TruepeakError, match=r"--fp4-activations fp8 with --fp4-kernel block-scaled and weights "
                                            r"nvfp4, mxfp4: .* fp8 \(mxfp4 only\)"):
        moe.run_bench("deepseek-v3", weights=["nvfp4", "mxfp4"], fp4_kernel="BLOCK-SCALED", fp4_activations="fp8")


def test_bad_fp8_activations_named_before_any_measurement():
    with pytest.raises(TruepeakError, match="--fp8-activations 'int8': expected fp8 .w8a8. or fp16 .w8a16."):
        moe.run_bench("deepseek-v3", weights=["fp8"], fp8_activations="int8")


def test_run_bench_refuses_bad_arguments_before_measuring():
    for kw, msg in (({"tokens_per_expert": "1,2"}, "tokens_per_expert must be a list of numbers"),
                    ({"tokens_per_expert": ["x"]}, "tokens per expert must be numbers, got .'x'."),
                    ({"tokens_per_expert": []}, "no tokens per expert given"),
                    ({"weights": []}, "no weight format or backend given"),
                    ({"read_bw": 0}, "read_bw must be a finite number of bytes per second > 0, got 0"),
                    ({"warmup_s": -1}, "warmup_s must be a finite number of seconds >= 0, got -1"),
                    ({"triton_tune": {"bf16": {"blockk": 64}}}, r"triton_tune\['bf16'\]: .* got 'bf16' with blockk"),
                    ({"triton_tune": {"bf16": 3}}, "triton_tune must map a weight format to a dict")):
        with pytest.raises(TruepeakError, match=msg):
            moe.run_bench("deepseek-v3", **kw)
    # a comma-separated string is a list of names, not of letters
    with pytest.raises(UnknownNameError, match="unknown --weights 'int4'"):
        moe.run_bench("deepseek-v3", weights="bf16,int4")


@pytest.mark.gpu
def test_gpu_sweep_writes_records_and_survives_a_failure(tmp_path, monkeypatch):
    real = job.build_backend

    def flaky(backend, *a, **kw):
        if backend == "bmm":
            raise torch.cuda.OutOfMemoryError("CUDA out of memory (simulated)")
        return real(backend, *a, **kw)

    monkeypatch.setattr(job, "build_backend", flaky)  # the name the sweep calls
    recs = moe.run_bench("qwen3-235b-a22b", ep=16, tokens_per_expert=[2], weights=["bf16", "nvfp4"],
                         out_path=str(tmp_path / "r.jsonl"), budget_s=0.02, warmup_s=0.01, read_bw=4.5e12)
    status = {(r.format, r.backend): r.status for r in recs}
    assert status[("bf16", "bmm")] == "failed" and status[("bf16", "triton")] == "ok"
    assert status[("nvfp4", "per_expert")] == "skipped" and status[("nvfp4", "triton")] == "ok"
    ok = [r for r in recs if r.ok]
    assert all(r.kind == "moe_experts" and 0 < r.derived.read_bandwidth_fraction for r in ok)
