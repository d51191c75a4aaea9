"""The bundled presets carry their released checkpoint's quantization_config and max_position_embeddings, and the
planner plans each in its checkpoint's format by default and says where the format came from
(truepeak.moe.plan.choose_weights / weights_note, ``truepeak moe plan`` text and --json).

Published values, read off each checkpoint's config.json on the Hugging Face hub (hub id next to each row; the presets
README lists them with their sources)."""

from __future__ import annotations

import json

from truepeak.moe.findings import MtpNotModelled
from truepeak.report.plan import finding_text
from importlib import resources

import pytest
from typer.testing import CliRunner

import truepeak.cli.moe  # noqa: F401  (registers the sub-app)
from truepeak.cli.app import app
from truepeak.hardware.lookup import get_accelerator
from truepeak.moe.config import load_model
from truepeak.moe.plan import choose_weights, plan

FP8_BLOCK = {"activation_scheme": "dynamic", "fmt": "e4m3", "quant_method": "fp8", "weight_block_size": [128, 128]}
GPT_OSS_MXFP4 = {"modules_to_not_convert": ["model.layers.*.self_attn", "model.layers.*.mlp.router",
                                            "model.embed_tokens", "lm_head"], "quant_method": "mxfp4"}

# preset: (quantization_config as published, or None for a bf16 checkpoint; max_position_embeddings)
RELEASED = {
    "deepseek-v3": (FP8_BLOCK, 163840),          # deepseek-ai/DeepSeek-V3
    "kimi-k2": (FP8_BLOCK, 262144),              # moonshotai/Kimi-K2-Instruct-0905 (4096 x yarn factor 64)
    "glm-4.5": (None, 131072),                   # zai-org/GLM-4.5 (bf16; FP8 in zai-org/GLM-4.5-FP8)
    "glm-4.5-air": (None, 131072),               # zai-org/GLM-4.5-Air
    "glm-5": (None, 202752),                     # zai-org/GLM-5 (bf16; FP8 in zai-org/GLM-5-FP8)
    "gpt-oss-120b": (GPT_OSS_MXFP4, 131072),     # openai/gpt-oss-120b
    "gpt-oss-20b": (GPT_OSS_MXFP4, 131072),      # openai/gpt-oss-20b
    "llama-4-maverick": (None, 1048576),         # meta-llama/Llama-4-Maverick-17B-128E-Instruct (text_config)
    "mixtral-8x7b": (None, 32768),               # mistralai/Mixtral-8x7B-v0.1
    "qwen3-235b-a22b": (None, 40960),            # Qwen/Qwen3-235B-A22B
    "qwen3-30b-a3b": (None, 40960),              # Qwen/Qwen3-30B-A3B
    "qwen3-next-80b-a3b": (None, 262144),        # Qwen/Qwen3-Next-80B-A3B-Instruct
}
#: quant_method -> the truepeak format it plans in by default
FORMAT_OF = {"fp8": "fp8_e4m3", "mxfp4": "mxfp4"}


def _json(name: str) -> dict:
    return json.loads((resources.files("truepeak.moe") / "presets" / f"{name}.json").read_text())


def run(*args: str):
    return CliRunner().invoke(app, ["moe", "plan", *args])


def test_every_preset_is_listed():
    from truepeak.moe.config import preset_names

    assert sorted(RELEASED) == preset_names()


@pytest.mark.parametrize("name", sorted(RELEASED))
def test_presets_carry_the_released_checkpoint(name):
    q, max_pos = RELEASED[name]
    cfg = _json(name)
    text = cfg.get("text_config", cfg)                       # Llama-4 keeps the text model's fields there
    assert cfg.get("quantization_config") == q
    assert text["max_position_embeddings"] == max_pos
    m = load_model(name)
    assert m.max_position_embeddings == max_pos
    choice = choose_weights(m)
    if q is None:
        assert (m.checkpoint_format, choice.format, choice.origin) == (None, "bf16", "default")
    else:
        assert (choice.format, choice.origin) == (FORMAT_OF[q["quant_method"]], "checkpoint")
        assert m.modules_not_converted == tuple(q.get("modules_to_not_convert", ()))
        assert m.weight_block_size == (tuple(q["weight_block_size"]) if "weight_block_size" in q else None)


def test_presets_readme_points_inside_this_repository():
    text = (resources.files("truepeak.moe") / "presets" / "README.md").read_text()
    for outside in ("../", "/work", "shared/", "moe_models.md", "cases.md", "DESIGN.md", "STYLE.md"):
        assert outside not in text, outside
    for hub_id in ("deepseek-ai/DeepSeek-V3", "moonshotai/Kimi-K2-Instruct-0905", "zai-org/GLM-5",
                   "openai/gpt-oss-120b", "Qwen/Qwen3-Next-80B-A3B-Instruct"):
        assert hub_id in text


# -- gpt-oss-120b: one 80 GB GPU in the released mxfp4 ----------------------------------------------------------------

# Weights per GPU of gpt-oss-120b on one GPU, by hand from the config (H = 2880, 36 layers, 128 experts of I = 2880,
# 64 query heads and 8 KV heads of 64, vocab 201088), mxfp4 = 0.53125 B per value (4 bits + one e8m0 scale per 32):
#   routed experts  36 x 128 x 3 x 2880 x 2880 = 114,661,785,600 values x 0.53125 B = 60,914,073,600 B
#   expert biases   36 x 128 x (2 x 2880 + 2880) =    39,813,120 values x 2 B (bf16) =     79,626,240 B
#   attention       36 x (2880 x 4096 q + 2880 x 1024 k,v + 4096 x 2880 o + 4096 + 1024 + 2880 biases + 64 sinks)
#                   = 36 x 26,550,144 = 955,805,184 values x 0.53125 B (planned in mxfp4)  =    507,771,504 B
#   router          36 x 128 x 2880 x 2 B (bf16)                                           =     26,542,080 B
#   embedding + lm_head  2 x 201088 x 2880 x 2 B (bf16)                                    =  2,316,533,760 B
#   total                                                                                  = 63,844,547,184 B
# KV cache at batch 1, context 4096 (bf16): 18 sliding layers x 128 + 18 full layers x 4096 tokens, x 2 x 8 x 64
# values x 2 B = 155,713,536 B; 64,000,260,720 B in all, under the H100 SXM's 80 GB. In bf16 the routed experts alone
# take 229.4 GB (the "233.8 GB of 80 GB: DOES NOT FIT" the preset planned before it carried the quantization_config).
GPT_OSS_WEIGHTS = 60_914_073_600 + 79_626_240 + 507_771_504 + 26_542_080 + 2_316_533_760
GPT_OSS_KV = (18 * 128 + 18 * 4096) * 2 * 8 * 64 * 2


def test_gpt_oss_120b_fits_one_h100_in_its_checkpoint_format():
    assert GPT_OSS_WEIGHTS == 63_844_547_184 and GPT_OSS_KV == 155_713_536
    r = run("--model", "gpt-oss-120b", "--gpu", "h100-sxm", "--json")
    assert r.exit_code == 0, r.output
    p = json.loads(r.stdout)["plans"][0]
    assert p["formats"]["weights"] == "mxfp4"
    m = p["memory"]
    assert m["weights_bytes"] == pytest.approx(GPT_OSS_WEIGHTS)
    assert m["kv_cache_bytes"] == pytest.approx(GPT_OSS_KV)
    assert m["capacity_bytes"] == 80e9 and m["fits"] is True
    t = run("--model", "gpt-oss-120b", "--gpu", "h100-sxm")
    assert "memory per GPU  64 GB of 80 GB (weights 63.84 GB + KV cache 0.1557 GB at 1 x 4096 tokens) — fits" \
        in t.stdout


def test_gpt_oss_origin_and_what_one_format_does_to_its_bf16_attention():
    r = run("--model", "gpt-oss-120b", "--gpu", "h100-sxm")
    assert r.exit_code == 0, r.output
    lines = r.stdout.splitlines()
    assert ("  weights: mxfp4, from the checkpoint's quantization_config (quant_method mxfp4: routed experts; it "
            "leaves model.layers.*.self_attn, model.layers.*.mlp.router, model.embed_tokens, lm_head unquantised)"
            ) in lines
    # attention 955,805,184 values: 507,771,504 B in mxfp4 (0.5078 GB), x 2 B = 1,911,610,368 B in bf16 (1.912 GB)
    assert ("  one weight format per plan: attention projections are planned in mxfp4 like the routed experts, though "
            "the checkpoint leaves them unquantised (0.5078 GB of weights per GPU here, 1.912 GB in bf16: their bytes "
            "and time are below the checkpoint's); router, embedding and lm_head are bf16 in every plan, as in the "
            "checkpoint") in lines
    d = json.loads(run("--model", "gpt-oss-120b", "--gpu", "h100-sxm", "--json").stdout)
    o = d["plans"][0]["weights_origin"]
    assert (o["format"], o["origin"], o["checkpoint_format"], o["quant_method"]) == \
        ("mxfp4", "checkpoint", "mxfp4", "mxfp4")
    assert o["modules_not_converted"] == GPT_OSS_MXFP4["modules_to_not_convert"]
    assert o["quantised_groups"] == ["routed_experts"]
    assert o["text"].startswith("mxfp4, from the checkpoint's quantization_config") and "1.912 GB" in o["note"]


# -- Kimi-K2: block fp8 by default, --weights still overrides -----------------------------------------------------------

# Kimi-K2 at TP8 (H = 7168, 384 experts of I = 2048 sliced to 256 per GPU, 60 MoE layers); fp8 with one fp32 scale
# per 128 x 128 block (weight_block_size [128, 128]):
#   gate+up  N = 2 x 256 = 512, K = 7168: 512 x 7168 B + (512/128) x (7168/128) = 4 x 56 = 224 scales x 4 B = 3,670,912 B
#   down     N = 7168, K = 256:           7168 x 256 B + 56 x 2 = 112 scales x 4 B                     = 1,835,456 B
#   routed experts per GPU: 60 x 384 x (3,670,912 + 1,835,456) = 126,866,718,720 B
# bf16: 60 x 384 x (512 x 7168 + 7168 x 256) x 2 B = 253,671,505,920 B
KIMI_FP8_ROUTED = 60 * 384 * (512 * 7168 + 224 * 4 + 7168 * 256 + 112 * 4)
KIMI_BF16_ROUTED = 60 * 384 * (512 * 7168 + 7168 * 256) * 2


def test_kimi_k2_plans_in_fp8_by_default():
    assert KIMI_FP8_ROUTED == 126_866_718_720
    r = run("--model", "kimi-k2", "--gpu", "h200", "--gpus", "8", "--json")
    assert r.exit_code == 0, r.output
    p = json.loads(r.stdout)["plans"][0]
    assert (p["formats"]["weights"], p["formats"]["weight_scaling"]) == ("fp8_e4m3", "block128")
    assert p["memory"]["weight_parts_bytes"]["routed_experts"] == pytest.approx(KIMI_FP8_ROUTED)
    assert p["weights_origin"]["origin"] == "checkpoint" and p["weights_origin"]["note"] is None
    t = run("--model", "kimi-k2", "--gpu", "h200", "--gpus", "8")
    assert ("  weights: fp8_e4m3, from the checkpoint's quantization_config (quant_method fp8, weight_block_size "
            "[128, 128]: attention projections, routed experts, shared experts and dense MLP layers)"
            ) in t.stdout.splitlines()


def test_weights_option_still_overrides_the_checkpoint():
    assert KIMI_BF16_ROUTED == 253_671_505_920
    r = run("--model", "kimi-k2", "--gpu", "h200", "--gpus", "8", "--weights", "bf16", "--json")
    assert r.exit_code == 0, r.output
    p = json.loads(r.stdout)["plans"][0]
    assert (p["formats"]["weights"], p["formats"]["weight_scaling"]) == ("bf16", None)
    assert p["memory"]["weight_parts_bytes"]["routed_experts"] == pytest.approx(KIMI_BF16_ROUTED)
    assert (p["weights_origin"]["origin"], p["weights_origin"]["checkpoint_format"]) == ("option", "fp8_e4m3")
    t = run("--model", "kimi-k2", "--gpu", "h200", "--gpus", "8", "--weights", "bf16")
    assert "  weights: bf16, from --weights (the checkpoint's quantization_config gives fp8_e4m3)" in t.stdout
    # the what-if table plans the same format as the detailed plan
    c = json.loads(run("--model", "kimi-k2", "--gpu", "h200", "--gpus", "8", "--weights", "bf16", "--compare",
                       "tp8", "--batch", "1", "--json").stdout)
    assert c["compare"]["cells"][0]["memory_per_gpu_bytes"] == pytest.approx(c["plans"][0]["memory"]["total_bytes"])


def test_context_warning_fires_for_a_preset():
    # glm-5 declares max_position_embeddings 202752; 10,000,000 tokens is planned with a one-line warning
    r = run("--model", "glm-5", "--gpu", "h200", "--gpus", "8", "--context", "10000000")
    assert r.exit_code == 0, r.output
    warn = [l for l in r.stderr.splitlines() if l.startswith("warning:")]
    mtp = finding_text(MtpNotModelled("glm-5", 1))
    assert warn == ["warning: --context 10000000 is above glm-5's max_position_embeddings 202752: planned anyway, "
                    "but the model does not serve that context as configured", "warning: " + mtp]
    d = json.loads(run("--model", "glm-5", "--gpu", "h200", "--gpus", "8", "--context", "10000000", "--json").stdout)
    assert d["warnings"] == [warn[0][len("warning: "):], mtp] and d["plans"][0]["context"] == 10_000_000
    assert json.loads(run("--model", "glm-5", "--gpu", "h200", "--gpus", "8", "--context", "202752",
                          "--json").stdout)["warnings"] == [mtp]


# -- the library ---------------------------------------------------------------------------------------------------------

def test_plan_defaults_to_the_checkpoint_format_and_records_it():
    m, acc = load_model("gpt-oss-120b"), get_accelerator("h100-sxm")
    p = plan(m, acc, "tp1", 1)
    assert p.formats.weights.name == "mxfp4" and p.weights_origin.origin == "checkpoint"
    assert p.memory.weights == pytest.approx(GPT_OSS_WEIGHTS)
    q = plan(m, acc, "tp1", 1, weights="bf16")
    assert q.formats.weights.name == "bf16" and q.weights_origin.origin == "option" and q.weights_note is None
