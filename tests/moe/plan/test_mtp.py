"""truepeak.moe.plan.mtp: tokens per step, the composed step, and the input it refuses."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from truepeak.errors import ConfigError
from truepeak.moe.plan import plan
from truepeak.moe.plan.mtp import MtpSetting, check_mtp, compose


def test_tokens_per_step():
    assert MtpSetting(1, 0.85).tokens_per_step == pytest.approx(1.85)      # DeepSeek-V3 report: 1.85-1.9
    assert MtpSetting(2, 0.8).tokens_per_step == pytest.approx(1 + 0.8 + 0.64)
    assert MtpSetting(3, 1).tokens_per_step == 4


@pytest.mark.parametrize("n, p", [(1, 0), (1, 1.5), (1, -0.1), (0, 0.8), (1.5, 0.8), (True, 0.8)])
def test_refused(n, p):
    with pytest.raises(ConfigError) as e:
        MtpSetting(n, p)
    assert "\n" not in str(e.value)


def test_a_model_without_mtp_layers_is_refused():
    from truepeak.moe.config import load_model

    with pytest.raises(ConfigError, match="has no MTP layers"):
        check_mtp(load_model("qwen3-30b-a3b"), MtpSetting(1, 0.8))


def _plan(step, kv, lm_head, e_step, e_kv, e_lm):
    return SimpleNamespace(step_s=step, time_by_group=lambda: {"kv_cache": kv, "lm_head": lm_head},
                           expected=SimpleNamespace(step_s=e_step, by_group={"kv_cache": e_kv, "lm_head": e_lm}))


def test_compose_by_hand():
    # verify step 10 ms with 2 ms of KV reads at N = 1: the cache is read once for 2 queries, 10 − 2/2 = 9 ms;
    # one draft: the plain 6 ms step's average layer over 61 (lm_head 0.1 ms left out) + lm_head
    verify, plain = _plan(10e-3, 2e-3, 0, 20e-3, 4e-3, 0), _plan(6e-3, 0, 0.1e-3, 12e-3, 0, 0.2e-3)
    ceiling, expected = compose(plain, verify, MtpSetting(1, 0.85), 61)
    assert ceiling == pytest.approx(9e-3 + 5.9e-3 / 61 + 0.1e-3)
    assert expected == pytest.approx(18e-3 + 11.8e-3 / 61 + 0.2e-3)


def test_plan_with_mtp_is_a_higher_ceiling(dsv3, h200):
    base = plan(dsv3, h200, "tp8", 8, context=1536)
    m = plan(dsv3, h200, "tp8", 8, context=1536, mtp=MtpSetting(1, 0.85))
    assert m.step_s == base.step_s                          # the roofline step stays the plain one
    e = m.expected
    assert e.tokens_per_step == pytest.approx(1.85) and e.batch == 8 and e.mtp == MtpSetting(1, 0.85)
    assert e.ceiling_tokens_per_s > base.tokens_per_s and e.tokens_per_s > base.expected.tokens_per_s
