"""fp8 scale bytes in the MoE planner (cases.md C13: bytes of scaled formats are never dropped), the context warning
and the checkpoint's block size. Every expected value is computed by hand in the comment beside it.

DeepSeek-V3 (moe_models.md §2; its config.json: quantization_config weight_block_size [128, 128]): H = 7168,
I_e = 2048, E = 256, top-8, 58 MoE layers. One expert: gate+up W[2·2048 x 7168], down W[7168 x 2048]. fp8 with one
fp32 (4 B) scale per 128 x 128 weight block; activations quantised per 1 x 128 group (one fp32 scale per 128 values).
"""

from __future__ import annotations

import json
from importlib import resources

import pytest

from truepeak.errors import TruepeakError
from truepeak.formats import get_format
from truepeak.hardware.lookup import get_accelerator
from truepeak.moe.config import load_model, parse_config
from truepeak.moe.findings import ContextAboveLimit
from truepeak.moe.ops import resolve_formats, scalings
from truepeak.moe.plan import checkpoint_block_size, context_warning, plan
from truepeak.report.plan import finding_text, formats_json, scaling_text

FP8 = get_format("fp8")


@pytest.fixture(scope="module")
def f_block(h200):
    return resolve_formats(h200, "fp8", weight_block_size=(128, 128))


def test_c13_deepseek_v3_routed_experts_of_one_layer_fp8_block_scales(f_block):
    # values: 256 x 4096 x 7168 = 7,516,192,768 B (gate+up), 256 x 7168 x 2048 = 3,758,096,384 B (down)
    # scales: 256 x (4096/128 x 7168/128 + 7168/128 x 2048/128) x 4 B = 256 x (32·56 + 56·16) x 4 = 256 x 2688 x 4
    #       = 2,752,512 B
    assert f_block.weight_scaling == "block128" and f_block.activation_scaling == "block128"
    gate_up = f_block.weight_bytes(FP8, 2 * 2048, 7168, 256)
    down = f_block.weight_bytes(FP8, 7168, 2048, 256)
    assert gate_up == 7_516_192_768 + 256 * 32 * 56 * 4          # 7,517,110,272
    assert down == 3_758_096_384 + 256 * 56 * 16 * 4              # 3,759,013,888
    assert gate_up + down - (7_516_192_768 + 3_758_096_384) == 2_752_512
    assert gate_up + down == 11_277_041_664


def test_c13_activation_scales_per_1x128_group(f_block):
    # one token row of K = 7168 fp8: 7168 B + 56 groups x 4 B = 7392 B; 2.5 expected rows (linear in whole rows)
    assert f_block.activation_bytes(FP8, 1, 7168) == 7392
    assert f_block.activation_bytes(FP8, 2.5, 7168) == pytest.approx(2.5 * 7392)   # 18,480
    assert f_block.activation_bytes(FP8, 0, 7168) == 0
    # a bf16 operand takes no fp32 scales: 2 B per value
    bf16 = get_format("bf16")
    assert f_block.activation_bytes(bf16, 3, 7168) == 3 * 7168 * 2
    assert f_block.weight_bytes(bf16, 256, 7168) == 256 * 7168 * 2


def test_c13_weight_values_bytes_per_value_of_a_128_block(f_block):
    # 917,504 values = 128 x 7168: one row of 56 blocks of 128 x 128 → + 56 x 4 = 224 B
    assert f_block.weight_values_bytes(FP8, 128 * 7168, 7168) == pytest.approx(917_504 + 224)


def test_c13_plan_memory_counts_expert_block_scales(dsv3, h200):
    # ep8: 32 of 256 experts per GPU, 58 MoE layers, fp8 (the checkpoint's format: its 128 x 128 blocks apply)
    # 58 x 11,277,041,664 / 8 = 58 x 1,409,630,208 = 81,758,552,064 B
    p = plan(dsv3, h200, "ep8", 1, weights="fp8")
    assert p.formats.weight_scaling == "block128"
    assert p.memory.weight_parts["routed_experts"] == 81_758_552_064


def test_c13_plan_expert_gemm_bytes_include_weight_and_activation_scales(dsv3, h200):
    # tp8, batch 1: 8 (token, expert) pairs on 8 distinct active experts; expert width 2048 / 8 = 256
    p = plan(dsv3, h200, "tp8", 1, weights="fp8")
    gu = next(op for op in p.ops if op.name == "routed experts gate+up")
    dn = next(op for op in p.ops if op.name == "routed experts down")
    assert gu.detail["active_experts"] == pytest.approx(8)
    # gate+up W[512 x 7168]: 3,670,016 B + (512/128 x 7168/128 = 4 x 56 = 224) x 4 B = 3,670,912 B; x 8 = 29,367,296
    # A: 8 rows x (7168 + 56 x 4) = 59,136 B; C bf16: 8 x 512 x 2 = 8,192 B
    assert gu.weight_bytes == pytest.approx(29_367_296)
    assert gu.bytes == pytest.approx(29_367_296 + 59_136 + 8_192)            # 29,434,624
    # down W[7168 x 256]: 1,835,008 B + (56 x 2 = 112) x 4 B = 1,835,456 B; x 8 = 14,683,648
    # A: 8 x (256 + 2 x 4) = 2,112 B; C bf16: 8 x 7168 x 2 = 114,688 B
    assert dn.weight_bytes == pytest.approx(14_683_648)
    assert dn.bytes == pytest.approx(14_683_648 + 2_112 + 114_688)           # 14,800,448


def test_fp8_without_block_size_assumes_per_channel_and_says_so(h200):
    # Qwen3-30B-A3B (no quantization_config): H = 2048, I_e = 768, E = 128, top-8; --weights fp8 at tp1, batch 1
    m = load_model("qwen3-30b-a3b")
    assert (m.hidden_size, m.experts.intermediate_size, m.weight_block_size) == (2048, 768, None)
    p = plan(m, h200, "tp1", 1, weights="fp8")
    f = p.formats
    assert (f.weight_scaling, f.activation_scaling) == ("row", "row")
    assert scaling_text(f) == ("fp8_e4m3 weights assumed per-channel: one fp32 scale per output row (the checkpoint "
                               "gives no weight_block_size; a per-tensor checkpoint stores 4 B per tensor instead); "
                               "fp8_e4m3 activations per-token: one fp32 scale per row: scale bytes counted")
    d = formats_json(f)
    assert d["weight_scaling"] == "row" and d["scaling_note"] == scaling_text(f) and "scaling_note" not in f.to_dict()
    gu = next(op for op in p.ops if op.name == "routed experts gate+up")
    # W[1536 x 2048]: 3,145,728 B + 1536 row scales x 4 B = 3,151,872 B; x 8 active experts = 25,214,976
    # A: 8 rows x (2048 + 4) = 16,416 B; C bf16: 8 x 1536 x 2 = 24,576 B
    assert gu.weight_bytes == pytest.approx(25_214_976)
    assert gu.bytes == pytest.approx(25_214_976 + 16_416 + 24_576)


def test_block_size_belongs_to_the_checkpoint_format(dsv3):
    assert checkpoint_block_size(dsv3, "fp8") == (128, 128)
    assert checkpoint_block_size(dsv3, "fp8_e4m3") == (128, 128)
    assert checkpoint_block_size(dsv3, "int8") is None          # another format asked for: no checkpoint blocks
    assert checkpoint_block_size(dsv3, "nvfp4") is None


def test_scalings_rules():
    bf16, nvfp4, int8 = get_format("bf16"), get_format("nvfp4"), get_format("int8")
    assert scalings(bf16, bf16) == (None, None)
    assert scalings(nvfp4, nvfp4) == (None, None)               # carries its own 8-bit block scales
    assert scalings(FP8, bf16, (128, 128)) == ("block128", None)   # weight-only fp8 (Ampere): no activation scales
    assert scalings(int8, int8) == ("row", "row")
    assert scalings(bf16, FP8, (128, 128)) == (None, "row")      # the block size is the weights'; fp8 activations
    a100 = get_accelerator("a100-sxm4-80gb")                     # no fp8 path: fp8 weights dequantised, bf16 acts
    assert scaling_text(resolve_formats(a100, "fp8", weight_block_size=(128, 128))) == (
        "fp8_e4m3 weights with one fp32 scale per 128 x 128 block (checkpoint weight_block_size [128, 128]): scale "
        "bytes counted")
    h200 = get_accelerator("h200")
    assert scaling_text(resolve_formats(h200, "fp8", weight_block_size=(128, 128))).startswith(
        "fp8_e4m3 weights with one fp32 scale per 128 x 128 block (checkpoint weight_block_size [128, 128]), fp8_e4m3 "
        "activations with one fp32 scale per 1 x 128 group (block-fp8 serving path): scale bytes counted")
    assert scaling_text(resolve_formats(h200, "bf16")) == ""
    with pytest.raises(TruepeakError, match=r"weight_block_size \[64, 64\]"):
        scalings(FP8, FP8, (64, 64))


def _dsv3_config(**extra) -> dict:
    cfg = json.loads(resources.files("truepeak.moe").joinpath("presets/deepseek-v3.json").read_text())
    cfg.update(extra)
    return cfg


def test_context_above_max_position_embeddings_warns_with_both_numbers(h200):
    m = parse_config(_dsv3_config(max_position_embeddings=163840), "dsv3")
    assert m.max_position_embeddings == 163840
    w = context_warning(m, 200000)
    assert w == ContextAboveLimit(200000, "dsv3", 163840)
    assert finding_text(w) == ("--context 200000 is above dsv3's max_position_embeddings 163840: planned anyway, but "
                               "the model does not serve that context as configured")
    assert context_warning(m, 163840) is None
    assert context_warning(load_model("deepseek-v3"), 10**6) is not None   # the preset carries 163840 too
    assert plan(m, h200, "tp8", 1, context=200000).context == 200000     # still planned
