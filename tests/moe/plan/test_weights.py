"""Where a plan's weight format comes from (truepeak.moe.plan.choose_weights, its words:
truepeak.report.plan.weights_origin_text) and the
``weights:`` line of ``truepeak moe plan``: --weights, else the checkpoint's quantization_config, else bf16."""

from __future__ import annotations

import json
from importlib import resources

import pytest
from typer.testing import CliRunner

import truepeak.cli.moe  # noqa: F401  (registers the sub-app)
from truepeak.cli.app import app
from truepeak.errors import UnknownNameError
from truepeak.moe.config import load_model, parse_config
from truepeak.moe.plan import choose_weights
from truepeak.report.plan import finding_text, weights_origin_text


def _json(name: str) -> dict:
    return json.loads((resources.files("truepeak.moe") / "presets" / f"{name}.json").read_text())


def run(*args: str):
    return CliRunner().invoke(app, ["moe", "plan", *args])


def test_checkpoint_origin_line_names_the_quantization_config():
    # DeepSeek-V3's checkpoint: fp8 e4m3 with one fp32 scale per 128 x 128 block on every projection
    c = choose_weights(load_model("deepseek-v3"))
    assert (c.format, c.origin, c.checkpoint_format, c.weight_block_size) == \
        ("fp8_e4m3", "checkpoint", "fp8_e4m3", (128, 128))
    assert c.quantised_groups == ("attention", "routed_experts", "shared_experts", "dense_mlp")
    t = run("--model", "deepseek-v3", "--gpu", "h200", "--gpus", "8")
    assert t.exit_code == 0, t.output
    assert ("  weights: fp8_e4m3, from the checkpoint's quantization_config (quant_method fp8, weight_block_size "
            "[128, 128]: attention projections, routed experts, shared experts and dense MLP layers)"
            ) in t.stdout.splitlines()


def test_option_origin_line_names_what_the_checkpoint_has():
    t = run("--model", "deepseek-v3", "--gpu", "h200", "--gpus", "8", "--weights", "nvfp4")
    assert "  weights: nvfp4, from --weights (the checkpoint's quantization_config gives fp8_e4m3)" in t.stdout
    t = run("--model", "deepseek-v3", "--gpu", "h200", "--gpus", "8", "--weights", "fp8")
    assert "  weights: fp8_e4m3, from --weights, the checkpoint's own format (quant_method fp8" in t.stdout
    o = json.loads(run("--model", "deepseek-v3", "--gpu", "h200", "--gpus", "8", "--weights", "bf16",
                       "--json").stdout)["plans"][0]["weights_origin"]
    assert (o["format"], o["origin"], o["checkpoint_format"], o["note"]) == ("bf16", "option", "fp8_e4m3", None)
    assert o["text"] == "bf16, from --weights (the checkpoint's quantization_config gives fp8_e4m3)"


def test_bf16_checkpoint_says_it_is_the_default():
    t = run("--model", "glm-5", "--gpu", "h200", "--gpus", "8")
    assert t.exit_code == 0, t.output
    assert "  weights: bf16, the --weights default (the config has no quantization_config, torch_dtype bfloat16)" \
        in t.stdout.splitlines()
    o = json.loads(run("--model", "glm-5", "--gpu", "h200", "--gpus", "8", "--json").stdout)["plans"][0]
    assert (o["weights_origin"]["format"], o["weights_origin"]["origin"]) == ("bf16", "default")



def test_a_scheme_without_a_truepeak_format_falls_back_to_bf16_and_says_why():
    cfg = _json("qwen3-30b-a3b") | {"quantization_config": {"quant_method": "awq", "bits": 4, "group_size": 128}}
    c = choose_weights(parse_config(cfg, "q"))
    assert (c.format, c.origin, c.quant_method) == ("bf16", "default", "awq")
    assert weights_origin_text(c) == ("bf16, the --weights default (quantization_config quant_method 'awq' has no truepeak "
                            "format; --weights picks one)")


def test_unquantised_modules_are_read_from_modelopt_and_compressed_tensors_keys():
    base = _json("qwen3-30b-a3b")
    m = parse_config(base | {"quantization_config": {"quant_method": "modelopt", "quant_algo": "NVFP4",
                                                     "exclude_modules": ["lm_head", "model.layers.*.self_attn*"]}},
                     "q")
    c = choose_weights(m)
    assert (m.modules_not_converted, c.format, c.quantised_groups) == \
        (("lm_head", "model.layers.*.self_attn*"), "nvfp4", ("routed_experts",))
    assert parse_config(base | {"quantization_config": {"quant_method": "fp8", "ignore": ["lm_head"]}},
                        "q").modules_not_converted == ("lm_head",)


def test_unknown_weights_name_is_refused():
    with pytest.raises(UnknownNameError, match="fp5"):
        choose_weights(load_model("glm-5"), "fp5")


def test_note_when_one_format_covers_weights_the_checkpoint_leaves_unquantised(tmp_path):
    # a gpt-oss-20b config.json with the released quantization_config: mxfp4 experts, bf16 self_attn / router /
    # embed_tokens / lm_head. The plan puts attention in mxfp4 too and says so, with both byte counts: 24 layers x
    # (2880 x 4096 q + 2880 x 1024 k,v + 4096 x 2880 o + 8000 biases + 64 sinks) = 24 x 26,550,144 = 637,203,456 values
    # x 0.53125 B = 338,514,336 B (0.3385 GB) here, x 2 B = 1,274,406,912 B (1.274 GB) in bf16.
    from truepeak.hardware.lookup import get_accelerator
    from truepeak.moe.plan import plan

    cfg = _json("gpt-oss-20b") | {"quantization_config": {
        "modules_to_not_convert": ["model.layers.*.self_attn", "model.layers.*.mlp.router", "model.embed_tokens",
                                   "lm_head"], "quant_method": "mxfp4"}}
    (tmp_path / "config.json").write_text(json.dumps(cfg))
    m = load_model(str(tmp_path))
    p = plan(m, get_accelerator("h100-sxm"), "tp1", 1)
    assert p.formats.weights.name == "mxfp4" and p.weights_origin.quantised_groups == ("routed_experts",)
    assert p.memory.weight_parts["attention"] == pytest.approx(24 * 26_550_144 * 0.53125)
    note = p.weights_note
    assert (note.format, note.groups, note.quantised_groups) == ("mxfp4", ("attention",), ("routed_experts",))
    assert note.plan_bytes == pytest.approx(338_514_336) and note.bf16_bytes == pytest.approx(1_274_406_912)
    assert finding_text(note) == (
        "one weight format per plan: attention projections are planned in mxfp4 like the routed experts, though the "
        "checkpoint leaves them unquantised (0.3385 GB of weights per GPU here, 1.274 GB in bf16: their bytes and time "
        "are below the checkpoint's); router, embedding and lm_head are bf16 in every plan, as in the checkpoint")
    assert plan(m, get_accelerator("h100-sxm"), "tp1", 1, weights="nvfp4").weights_note is None   # not its format


def test_per_group_weight_formats_parse_and_plan():
    from truepeak.errors import ConfigError
    from truepeak.hardware.lookup import get_accelerator
    from truepeak.moe.config import load_model
    from truepeak.moe.plan import plan
    from truepeak.moe.plan.weights import parse_weights

    assert parse_weights("nvfp4") == ("nvfp4", {}) and parse_weights(None) == (None, {})
    assert parse_weights("routed_experts=nvfp4,attention=fp8") == (None, {"routed_experts": "nvfp4",
                                                                          "attention": "fp8"})
    assert parse_weights("bf16, routed_experts=nvfp4") == ("bf16", {"routed_experts": "nvfp4"})
    for bad, why in (("experts=nvfp4", "names no op group"), ("attention=fp8,attention=bf16", "twice"),
                     ("fp8,bf16,attention=fp8", "two formats"), ("attention=fp8,,x", "empty item")):
        with pytest.raises(ConfigError, match=why):
            parse_weights(bad)
    # DeepSeek-V3 on a B200 with nvfp4 routed experts: the experts' weight bytes are nvfp4's 0.5625 B per value
    # (scales included), attention keeps the checkpoint's fp8
    m, b200 = load_model("deepseek-v3"), get_accelerator("b200")
    p = plan(m, b200, "ep8", 8, context=1536, weights="routed_experts=nvfp4")
    gu = next(o for o in p.ops if o.name == "routed experts gate+up")
    active = gu.detail["active_experts"]
    assert gu.weight_bytes == pytest.approx(active * 4096 * 7168 * 0.5625)
    assert p.formats.weights.name == "fp8_e4m3" and p.formats.group_weights == {"routed_experts": "nvfp4"}
    one = plan(m, b200, "ep8", 8, context=1536, weights="nvfp4")
    qa = [next(o for o in x.ops if o.name.startswith("q_a")) for x in (p, one)]
    assert qa[0].weight_bytes > qa[1].weight_bytes          # fp8 attention in the first, nvfp4 in the second
