"""Headline-claim checking against real catalog values (cases.md S1, C01; accelerators.md sections 1 and 4)."""

from __future__ import annotations

import pytest

from truepeak.errors import TruepeakError
from truepeak.hardware import check_claim, get_accelerator
from truepeak.hardware.claims import TOLERANCE, parse_claim

WS = "NVIDIA RTX PRO 6000 Blackwell Workstation Edition"
SERVER = "NVIDIA RTX PRO 6000 Blackwell Server Edition"
H100 = "NVIDIA H100 80GB HBM3"


def test_S1_workstation_4_pflops_fp4_is_sparse_use_2015():
    v = check_claim(get_accelerator(WS), "4 PFLOPS FP4")
    assert v.kind == "sparse"
    assert v.rate == "fp4"
    assert v.claimed == pytest.approx(4e15)
    assert v.dense / 1e12 == pytest.approx(2015.2)
    assert v.matched / 1e12 == pytest.approx(4030.4)
    assert v.deviation == pytest.approx(4000 / 4030.4 - 1)
    assert "2015.2" in v.explanation and "SPARSE" in v.explanation


def test_S1_server_3_7_pflops_fp4_is_sparse_dense_derived_about_1872():
    v = check_claim(get_accelerator(SERVER), "3.7 PFLOPS FP4")
    assert v.kind == "sparse"
    assert v.dense / 1e12 == pytest.approx(1872, abs=1.5)
    assert v.derived
    assert "derived" in v.explanation


def test_S1_4000_ai_tops_is_sparse_fp4_by_definition():
    v = check_claim(WS, "4000 AI TOPS")
    assert v.ai_tops
    assert v.kind == "sparse" and v.rate == "fp4"
    assert v.dense / 1e12 == pytest.approx(2015.2)
    assert "AI TOPS" in v.explanation


def test_S1_efficiency_against_the_claim_vs_the_dense_peak():
    v = check_claim(WS, "4 PFLOPS FP4")
    assert round(1300e12 / v.dense * 100, 1) == 64.5  # not 32.5 % of 4000


def test_h100_1979_tflops_fp8_is_dense():
    v = check_claim(H100, "1979 TFLOPS FP8")
    assert v.kind == "dense"
    assert v.dense / 1e12 == pytest.approx(1978.9)


def test_C01_h100_1979_tflops_bf16_is_sparse_use_989():
    v = check_claim(H100, "1979 TFLOPS BF16")
    assert v.kind == "sparse"
    assert v.dense / 1e12 == pytest.approx(989.4)
    assert round(480e12 / v.dense * 100, 1) == 48.5


def test_claim_matching_neither():
    v = check_claim(H100, "1500 TFLOPS BF16")
    assert v.kind == "neither"
    assert v.rate == "bf16"
    assert v.dense / 1e12 == pytest.approx(989.4)  # the value to use is still the dense peak
    assert v.matched is None
    assert v.deviation == pytest.approx(1500 / 989.4 - 1, rel=1e-3)
    assert "neither" in v.explanation


def test_claim_for_a_format_the_gpu_lacks():
    v = check_claim(H100, "4 PFLOPS FP4")
    assert v.kind == "neither" and v.dense is None
    assert "no published fp4" in v.explanation


def test_claim_without_a_format_can_be_ambiguous():
    """1.979 PFLOPS on an H100 is the sparse bf16 or the dense fp8 figure: truepeak does not guess."""
    v = check_claim(H100, "1.979 PFLOPS")
    assert v.kind == "ambiguous"
    assert v.dense is None
    assert len(v.alternatives) >= 2


def test_claim_without_a_format_that_fits_one_reading():
    v = check_claim(WS, "4030 TFLOPS")
    assert v.kind == "sparse" and v.rate == "fp4"


def test_tolerance_is_five_percent_and_stated():
    assert TOLERANCE == 0.05
    assert check_claim(H100, "1885 TFLOPS BF16").kind == "sparse"  # -4.7 %
    assert check_claim(H100, "1870 TFLOPS BF16").kind == "neither"  # -5.5 %
    assert "5 %" in check_claim(H100, "989 TFLOPS BF16").explanation


@pytest.mark.parametrize("text,value,rate", [
    ("4 PFLOPS FP4", 4e15, "fp4"),
    ("3.7 PFLOPS fp4", 3.7e15, "fp4"),
    ("4000 AI TOPS", 4e15, None),
    ("1979 TFLOPS FP8", 1979e12, "fp8"),
    ("989 TFLOPS bf16", 989e12, "bf16"),
    ("1.979 PFLOPS", 1.979e15, None),
    ("1,979 TFLOPS BF16", 1979e12, "bf16"),
    ("BF16 989.4 TFLOP/s", 989.4e12, "bf16"),
    ("500000 GFLOPS fp16", 500e12, "fp16"),
    ("3958 TOPS INT8", 3958e12, "int8"),
    ("1.2 POPS int8", 1.2e15, "int8"),
    ("2 PF nvfp4", 2e15, "fp4"),
    ("733 TFLOPS FP16/BF16 with sparsity", 733e12, "bf16"),
])
def test_parse_claim_units_and_formats(text, value, rate):
    c = parse_claim(text)
    assert c.value == pytest.approx(value)
    assert c.rate == rate


def test_parse_accumulate_phrase():
    c = parse_claim("330.3 TFLOPS fp16 with fp16 accumulate")
    assert c.rate == "fp16" and c.accumulate == "fp16"
    v = check_claim("4090", "330.3 TFLOPS fp16 with fp16 accumulate")
    assert v.kind == "dense" and v.accumulate == "fp16"


def test_C04_geforce_330_tflops_fp16_is_ambiguous_between_sparse_and_fp16_accumulate_dense():
    """330.3 is dense with fp16 accumulate but sparse with fp32 accumulate: truepeak does not guess which one the
    headline means; it lists both and gives the fp32-accumulate dense peak (what PyTorch GEMMs use) as the default."""
    v = check_claim("NVIDIA GeForce RTX 4090", "330.3 TFLOPS FP16")
    assert v.kind == "ambiguous"
    assert v.rate == "fp16" and v.accumulate == "fp32"
    assert v.dense / 1e12 == pytest.approx(165.2)
    assert "fp16 accumulate" in v.explanation
    assert any("2:4-sparse fp16 330.4" in a for a in v.alternatives)
    assert any("dense fp16 (fp16 accumulate) 330.3" in a for a in v.alternatives)


@pytest.mark.parametrize("text", ["", "fast", "4 PFLOPS FP4 and 2 PFLOPS FP8", "4 PFLOPS banana", "4000 AI TOPS bf16",
                                  "4 furlongs FP4"])
def test_unparseable_claims_raise_with_accepted_forms(text):
    with pytest.raises(TruepeakError) as info:
        check_claim(H100, text)
    message = str(info.value)
    assert repr(text) in message
    assert "\n" not in message


def test_unreadable_claim_message_shows_examples():
    with pytest.raises(TruepeakError, match="4 PFLOPS FP4"):
        parse_claim("lots of flops")


def test_stated_dense_that_is_really_sparse_is_called_out():
    v = check_claim(H100, "1979 TFLOPS BF16 dense")
    assert v.kind == "sparse"
    assert "says dense" in v.explanation


def test_unpublished_sparse_is_recognised_as_two_times_dense():
    v = check_claim("rtx-pro-6000-maxq", "877.8 TFLOPS BF16")
    assert v.kind == "sparse" and not v.sparse_published
    assert v.dense / 1e12 == pytest.approx(438.9)


def test_to_dict_round_trips_to_json():
    import json

    d = check_claim(WS, "4 PFLOPS FP4").to_dict()
    assert json.loads(json.dumps(d))["kind"] == "sparse"
    assert d["dense"] == pytest.approx(2015.2e12)


# ----------------------------------------------------------------------------------------------------------------------
# Blackwell Ultra sparse FP4, platform totals, parsing (fresh-user bug 3)


def test_b300_18_pflops_fp4_is_the_published_sparse_figure():
    v = check_claim("b300", "18 PFLOPS FP4")
    assert v.kind == "sparse" and v.sparse_published and v.gpus == 1
    assert v.matched / 1e12 == pytest.approx(18000) and v.dense / 1e12 == pytest.approx(15000)
    assert "not 2 x dense" in v.explanation and "without a matching sparse rate" in v.explanation
    assert "UNVERIFIED" in v.explanation and v.unverified


def test_b300_15_pflops_fp4_is_dense_and_unverified():
    v = check_claim("b300", "15 PFLOPS FP4")
    assert v.kind == "dense" and v.unverified
    assert "UNVERIFIED" in v.explanation and "12600" in v.explanation


@pytest.mark.parametrize(("gpu", "text", "gpus", "dense"), [
    ("b200", "144 PFLOPS FP4", 8, 9000),      # HGX B200: 8 x 18000 sparse
    ("b300", "144 PFLOPS FP4", 8, 15000),     # HGX B300: 8 x 18000 sparse
    ("gb200", "1440 PFLOPS FP4", 72, 10000),  # GB200 NVL72: 72 x 20000 sparse
    ("b200", "72 PFLOPS FP4", 8, 9000),       # 8 x 9000 dense
])
def test_platform_totals_are_recognised(gpu, text, gpus, dense):
    v = check_claim(gpu, text)
    assert v.gpus == gpus and v.kind in ("dense", "sparse")
    assert v.dense / 1e12 == pytest.approx(dense)
    assert f"{gpus}-GPU" in v.explanation and f"divide by {gpus}" in v.explanation
    if v.kind == "sparse":
        assert "then by 2" in v.explanation


def test_per_gpu_match_wins_over_a_platform_reading():
    assert check_claim("b200", "18 PFLOPS FP4").gpus == 1


@pytest.mark.parametrize("text", ["-5 TFLOPS BF16", "0 TFLOPS", "0.0 PFLOPS FP4", "\u22125 TFLOPS"])
def test_non_positive_claims_are_errors(text):
    with pytest.raises(TruepeakError, match="positive"):
        parse_claim(text)


@pytest.mark.parametrize(("text", "value"), [("4e3 TFLOPS FP4", 4e15), ("1.979E3 TFLOPS bf16", 1.979e15),
                                             ("2e-3 EFLOPS fp8", 2e15)])
def test_exponent_numbers_parse(text, value):
    assert parse_claim(text).value == pytest.approx(value)


def test_mxfp8_claim_uses_the_block_scaled_peak_on_the_5090():
    v = check_claim("5090", "838 TFLOPS MXFP8")
    assert v.kind == "dense" and v.formats == ("mxfp8",) and v.unverified
    # naming the rate only keeps the plain peaks: 838 is the sparse fp8 (fp32 accumulate) or the dense fp8 (fp16
    # accumulate) figure -- ambiguous; the fp32-accumulate dense 419 is the default denominator
    w = check_claim("5090", "838 TFLOPS FP8")
    assert w.kind == "ambiguous" and w.dense / 1e12 == pytest.approx(419) and w.formats == ()
    assert check_claim("5090", "838 TFLOPS FP8 with fp32 accumulate").kind == "sparse"


# ----------------------------------------------------------------------------------------------------------------------
# Fresh-user bugs: sparse-or-dense readings are ambiguous, infinite figures are errors, one tolerance sign


@pytest.mark.parametrize("text", ["330 TFLOPS fp16", "330.3 TFLOPS FP16", "660.6 TFLOPS FP8"])
def test_a_claim_matching_a_sparse_and_a_dense_reading_is_ambiguous(text):
    v = check_claim("rtx-4090", text)
    assert v.kind == "ambiguous", v.explanation
    kinds = " ".join(v.alternatives)
    assert "2:4-sparse" in kinds and "dense" in kinds and "(fp16 accumulate)" in kinds
    assert "It is also" not in v.explanation
    assert "with fp16 accumulate" in v.explanation  # how to decide


def test_naming_the_accumulator_decides():
    assert check_claim("rtx-4090", "330 TFLOPS fp16 with fp16 accumulate").kind == "dense"
    assert check_claim("rtx-4090", "330 TFLOPS fp16 with fp32 accumulate").kind == "sparse"


def test_ambiguity_across_formats_is_unchanged():
    v = check_claim("h200", "1979 TFLOPS")
    assert v.kind == "ambiguous" and v.rate is None and v.dense is None
    assert len(v.alternatives) >= 2


def test_same_kind_on_two_accumulators_is_not_ambiguous():
    """On the RTX PRO the fp32-accumulate rate is full rate: no fp16-accumulate peak, one reading."""
    assert check_claim("rtx-pro-6000-ws", "503.8 TFLOPS bf16").kind == "dense"


@pytest.mark.parametrize("text", ["1e400 TFLOPS BF16", "1e300 EFLOPS", "1e309 TFLOPS"])
def test_infinite_claims_are_errors(text):
    with pytest.raises(TruepeakError, match="finite"):
        parse_claim(text)


def test_tolerance_is_written_one_way():
    for gpu, text in ((H100, "989 TFLOPS BF16"), (WS, "4 PFLOPS FP4"), (H100, "1500 TFLOPS BF16"),
                      ("b200", "144 PFLOPS FP4"), (H100, "1.979 PFLOPS"), ("h20", "5 PFLOPS")):
        v = check_claim(gpu, text)
        assert "+-" not in v.explanation, v.explanation
    assert "±5 %" in check_claim(H100, "989 TFLOPS BF16").explanation


def test_ai_tops_is_the_sparse_rate_of_the_lowest_precision_format():
    """Adversarial test 5a: "AI TOPS" is sparse fp4 on Blackwell, sparse fp8 on Ada / Hopper; the wording says so."""
    from truepeak.hardware.claims import AI_TOPS_RULE

    v = check_claim("h200", "4000 AI TOPS")
    assert v.kind == "sparse" and v.rate == "fp8"
    assert "by definition the 2:4-sparse FP4" not in v.explanation and "sparse FP4" not in v.explanation
    assert v.explanation.startswith(f"{AI_TOPS_RULE}: fp8 on NVIDIA H200 SXM. ")
    assert AI_TOPS_RULE == ("'AI TOPS' is the 2:4-sparse rate of the lowest-precision tensor format a part has "
                            "(FP4 on Blackwell, FP8 on Ada and Hopper)")
    assert "(same value for int8)" not in v.explanation  # int8 is not what AI TOPS counts where fp8 exists
    assert check_claim(WS, "4000 AI TOPS").rate == "fp4"


def test_rtx_4090_ai_tops_is_sparse_fp8_fp16_accumulate_and_gives_both_dense_values():
    """Adversarial test 5a: 1321 AI TOPS on an RTX 4090 = 2 x 660.6 (fp8, fp16 accumulate); torch's fp8 GEMMs
    accumulate in fp32, whose dense peak is 330.3."""
    v = check_claim("rtx-4090", "1321 AI TOPS")
    assert v.kind == "sparse" and v.rate == "fp8" and v.accumulate == "fp16"
    assert v.dense / 1e12 == pytest.approx(660.6, abs=0.05)
    assert "2:4-SPARSE fp8 (fp16 accumulate) peak" in v.explanation
    assert "660.6 TFLOPS with fp16 accumulate" in v.explanation
    assert "accumulating in fp32" in v.explanation and "330.3 TFLOPS" in v.explanation
    assert "torch._scaled_mm" in v.explanation
    assert check_claim("rtx-4090", "1321 AI TOPS fp8").kind == "sparse"  # naming the format is allowed


def test_listed_sparse_headline_is_reported_as_that_listing_not_neither():
    """Adversarial test 5b: the Server Edition's "1 PFLOPS FP16/BF16" can only be sparse (accelerators.md 4.3):
    6.9 % off 2 x 467.8, beyond the ±5 % tolerance, yet listed by the vendor."""
    server = get_accelerator("rtx-pro-6000-server")
    assert "1 PFLOPS FP16/BF16" in server.sparse_headlines
    for text, rate in (("1 PFLOPS FP16", "fp16"), ("1 PFLOPS BF16", "bf16"), ("1000 TFLOPS fp16/bf16", "bf16")):
        v = check_claim(server, text)
        assert v.kind == "sparse" and v.rate == rate, v.explanation
        assert v.matched / 1e12 == pytest.approx(935.6, abs=0.1) and v.deviation == pytest.approx(0.0689, abs=1e-3)
        assert "vendor headline '1 PFLOPS FP16/BF16'" in v.explanation and "loosely rounded" in v.explanation
        assert "467.8 TFLOPS" in v.explanation
    assert check_claim(server, "1 PFLOPS FP8").kind == "neither"  # not a listed headline of that format
    ws = check_claim("rtx-pro-6000-ws", "1 PFLOPS FP16")  # the Workstation's 2 x 503.8 is within ±5 %: a plain match
    assert ws.kind == "sparse" and "vendor headline" not in ws.explanation
