"""MoeBenchConfig (truepeak.bench.moe.config): every field checked when it is built, with torch hidden (what a laptop
sees), each refusal a ConfigError naming its field; names normalised, lists as tuples."""

from __future__ import annotations

import pytest

from truepeak.bench.moe import MoeBenchConfig
from truepeak.errors import ConfigError


@pytest.fixture(autouse=True)
def _no_torch(without_torch):
    """The configuration is checked before torch is imported: every test here runs without it."""


def refused(field, match, **kw):
    with pytest.raises(ConfigError, match=match) as exc:
        MoeBenchConfig("deepseek-v3", **kw)
    assert exc.value.field == field, exc.value
    return str(exc.value)


def test_a_valid_config_is_normalised():
    c = MoeBenchConfig("deepseek-v3", ep=8, tokens_per_expert=[1, 16], weights="BF16,nvfp4", backends=["Triton"],
                       fp4_kernel="BLOCK-SCALED", fp4_activations="FP4")
    assert (c.tokens_per_expert, c.weights, c.backends) == ((1.0, 16.0), ("bf16", "nvfp4"), ("triton",))
    assert (c.fp4_kernel, c.fp4_activations, c.layout) == ("block-scaled", "fp4", "ep8")
    # DeepSeek-V3 at EP8: 256 / 8 = 32 local experts of H = 7168, I = 2048, top-8
    assert (c.shape.E, c.shape.E_local, c.shape.H, c.shape.I, c.shape.top_k) == (256, 32, 7168, 2048, 8)
    assert MoeBenchConfig("qwen3-235b-a22b", tp=4).layout == "tp4" and MoeBenchConfig("glm-5").layout == "single"
    assert c.split_busy is True and MoeBenchConfig("glm-5", split_busy=False).split_busy is False


def test_names_and_layouts_are_refused_by_field():
    assert refused("weights", "unknown `weights` 'int4'; expected one of bf16, fp8, fp8_block, nvfp4, mxfp4",
                   weights=["int4"])
    refused("weights", "did you mean fp8", weights=["fp8x"])
    refused("backends", "unknown backend 'cutlass'; expected one of per_expert, bmm, grouped_mm, triton",
            backends=["cutlass"])
    refused("ep", "`ep` 5 does not divide the 256 experts of deepseek-v3; use a divisor of 256", ep=5)
    refused("routing", "unknown routing 'zipf'", routing="zipf")
    refused("tp", "`tp` must be a whole number, got 1.5", tp=1.5)
    # a comma-separated string is a list of names, not of letters
    refused("weights", "unknown `weights` 'int4'", weights="bf16,int4")


def test_tokens_per_expert_are_refused():
    refused("tokens_per_expert", "must be a finite number > 0, got 0", tokens_per_expert=[0])
    refused("tokens_per_expert", "must be a finite number > 0, got inf", tokens_per_expert=[1, float("inf")])
    refused("tokens_per_expert", "`tokens_per_expert` must be a list of numbers", tokens_per_expert="1,2")
    refused("tokens_per_expert", "tokens per expert must be numbers, got .'x'.", tokens_per_expert=["x"])
    refused("tokens_per_expert", "no tokens per expert given", tokens_per_expert=[])


def test_numbers_and_tuning_are_refused():
    for kw, field, msg in (({"weights": []}, "weights", "no `weights` given"),
                           ({"backends": ""}, "backends", "unknown backend ''"),
                           ({"budget_s": 0}, "budget_s", "`budget_s` 0 must be a finite number of seconds > 0 "
                                                         r"\(timed seconds per point, e.g. 0.2\)"),
                           ({"budget_s": float("inf")}, "budget_s", "`budget_s` inf must be"),
                           ({"read_bw": 0}, "read_bw", "`read_bw` must be a finite number of bytes per second > 0, "
                                                       "got 0"),
                           ({"warmup_s": -1}, "warmup_s", "`warmup_s` -1 must be a finite number of seconds >= 0"),
                           ({"triton_tune": {"bf16": {"blockk": 64}}}, "triton_tune",
                            r"`triton_tune`\['bf16'\]: .* got 'bf16' with blockk"),
                           ({"triton_tune": {"bf16": 3}}, "triton_tune",
                            "`triton_tune` must map a weight format to a dict"),
                           ({"split_busy": 0}, "split_busy", "`split_busy` must be True or False, got 0"),
                           ({"split_busy": "no"}, "split_busy", "`split_busy` must be True or False, got 'no'")):
        refused(field, msg, **kw)


def test_activations_and_fp4_kernel_are_refused():
    refused("fp4_activations", r"`fp4_activations` 'int4': expected auto \(fp16 for nvfp4, fp8 for mxfp4; with the "
            r"block-scaled kernel fp4 for nvfp4, fp8 for mxfp4\), fp16 \(w4a16\), fp8 \(w4a8\) or fp4 \(W4A4, "
            r"block-scaled kernel only\)", weights=["nvfp4"], fp4_activations="int4")
    refused("fp4_kernel", r"`fp4_kernel` 'marlin': expected auto, dequant, block-scaled", weights=["nvfp4"],
            fp4_kernel="marlin")
    refused("fp8_activations", "`fp8_activations` 'int8': expected fp8 .w8a8. or fp16 .w8a16.", weights=["fp8"],
            fp8_activations="int8")
    # a kernel and activations that do not go together are refused before anything is measured (no GPU needed)
    refused("fp4_activations", r"`fp4_activations` fp4 with `fp4_kernel` dequant and weights mxfp4: the dequantising "
            r"kernels take fp8 or fp16", weights=["bf16", "mxfp4"], fp4_kernel="dequant", fp4_activations="fp4")
    refused("fp4_activations", r"`fp4_activations` fp16 with `fp4_kernel` block-scaled", weights=["nvfp4"],
            fp4_kernel="block-scaled", fp4_activations="fp16")
    refused("fp4_activations", r"`fp4_activations` fp8 with `fp4_kernel` block-scaled and weights nvfp4, mxfp4: .* "
            r"fp8 \(mxfp4 only\)", weights=["nvfp4", "mxfp4"], fp4_kernel="BLOCK-SCALED", fp4_activations="fp8")
    # auto activations go with either kernel; the block-scaled kernel takes fp8 activations for mxfp4
    MoeBenchConfig("deepseek-v3", weights=["nvfp4"], fp4_kernel="dequant")
    MoeBenchConfig("deepseek-v3", weights=["mxfp4"], fp4_kernel="block-scaled", fp4_activations="fp8")


def test_a_config_is_frozen():
    import dataclasses

    c = MoeBenchConfig("deepseek-v3")
    with pytest.raises(dataclasses.FrozenInstanceError):
        c.ep = 8
