"""The planner against 12 published decode measurements (docs/planner-validation.md): the targets that are met are
asserted, the ones that are not are pinned at today's values so a change that moves them shows (the calibration is
never fitted to these points)."""

from __future__ import annotations

from pathlib import Path

import pytest

from truepeak.moe.validation import POINTS, mean_absolute_error, validate
from truepeak.report.plan_expected import validation_table

DOC = Path(__file__).resolve().parents[2] / "docs" / "planner-validation.md"


@pytest.fixture(scope="module")
def rows():
    return {r.point.key: r for r in validate()}


def test_the_points_are_the_published_ones():
    # InferenceX issues/870 (V1-V8), pull/1061 (V9-V10), tt-inference-server issues/340 (V11), DeepSeek
    # open-infra day 6 (V12): 14.8k tok/s per 8-GPU node = 1850 per GPU, over 128 GPUs here
    got = {p.key: (p.batch, p.measured_tokens_per_s) for p in POINTS}
    assert got == {"V1": (8, 625), "V2": (16, 930), "V3": (32, 1250), "V4": (64, 1850), "V5": (4, 478),
                   "V6": (8, 838), "V7": (16, 1354), "V8": (32, 2259), "V9": (64, 2038), "V10": (256, 4391),
                   "V11": (1, 104), "V12": (11264, 236800)}


def test_the_ceiling_is_never_below_what_was_measured(rows):
    for key, r in rows.items():
        assert r.ceiling_tokens_per_s >= r.point.measured_tokens_per_s, key
        assert r.fits, key


def test_met_on_the_h200_and_b200_deepseek_points(rows):
    # V1-V8: SGLang on 8x H200 (TP8, fp8) and 8x B200 (EP8, nvfp4): every point within +-35 %, MAE <= 15 %
    near = [rows[f"V{i}"] for i in range(1, 9)]
    assert all(abs(r.expected_over_measured - 1) <= 0.35 for r in near)
    assert mean_absolute_error(near) <= 0.15
    # the H200 points, where the calibration was measured, within 10 %
    assert all(abs(rows[f"V{i}"].expected_over_measured - 1) <= 0.10 for i in range(1, 5))


def test_missed_points_pinned(rows):
    # not met (docs/planner-validation.md, 'What the model lacks'): the MI300X and A100 points take the H200
    # calibration by the carry-over rule and come out 1.6-2.7x too fast; V12 (DeepSeek's EP144 on H800) 26 % slow.
    pinned = {"V9": 2.08, "V10": 2.69, "V11": 1.59, "V12": 0.74}
    for key, ratio in pinned.items():
        assert rows[key].expected_over_measured == pytest.approx(ratio, abs=0.02), key
    assert mean_absolute_error(rows.values()) == pytest.approx(0.339, abs=0.01)      # target <= 0.15: missed
    outside = sorted(k for k, r in rows.items() if abs(r.expected_over_measured - 1) > 0.35)
    assert outside == ["V10", "V11", "V9"]                                           # target: none: missed


def test_the_doc_shows_the_table_this_code_computes(rows):
    table = validation_table(list(rows.values()))
    text = DOC.read_text()
    for line in table:
        assert line in text, line
