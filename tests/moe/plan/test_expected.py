"""truepeak.moe.plan.expected: each cost term of the expected step, by hand from the shipped H200 calibration
(DeepSeek-V3 on 8 H200s, tp8, batch 8, context 1536: the setup of the first validation point)."""

from __future__ import annotations

import math

import pytest

from truepeak.comm.model import busbw_factor
from truepeak.moe.calibration import default_calibration
from truepeak.moe.plan import plan
from truepeak.moe.plan.expected import GAP_PARTS, expected_step

BW = 4.48454e12                     # the calibration's measured read bandwidth (same GPU: no carry-over)


@pytest.fixture(scope="module")
def p8(dsv3, h200):
    return plan(dsv3, h200, "tp8", 8, context=1536)


def op(p, name):
    (hit,) = [o for o in p.ops if o.name == name]
    return hit


def test_a_gemm_at_its_measured_fraction(p8):
    o = op(p8, "o_proj")                                  # M=8 N=7168 K=2048 fp8 block128: a measured point
    assert (o.detail["m"], o.detail["n"], o.detail["k"]) == (8, 7168, 2048)
    assert p8.expected.op_s["o_proj"] == pytest.approx(o.bytes / (BW * 0.354342))
    r = op(p8, "router")                                  # bf16 7168 x 256: below the smallest shape, held there
    assert p8.expected.op_s["router"] == pytest.approx(r.bytes / (BW * 0.462609))


def test_routed_experts_at_the_library_kernels_fraction(p8):
    gu = op(p8, "routed experts gate+up")
    # 8 x 8 / 256 = 0.25 tokens per expert, held at the 1-token point of torch._scaled_grouped_mm, E = 256: 0.599586
    assert gu.detail["pairs"] / 256 == 0.25
    assert p8.expected.op_s["routed experts gate+up"] == pytest.approx(gu.bytes / (BW * 0.599586))
    assert p8.expected.expert_kernel == "library"
    assert p8.expected.expert_fraction == pytest.approx(BW * 0.599586 / 4.8e12)   # roofline / expected


def test_an_all_reduce_at_the_measured_two_gpu_time_scaled_by_the_bus_factor(p8):
    cal = default_calibration()
    ar = op(p8, "TP all-reduce after attention")
    assert ar.bytes == 8 * 7168 * 2
    size = ar.bytes * busbw_factor("all_reduce", 8) / busbw_factor("all_reduce", 2)     # x 1.75
    pts = dict(cal.collectives["graph"]["all_reduce"])
    w = math.log(size / 131072) / math.log(2)
    want = pts[131072] + w * (pts[262144] - pts[131072])
    assert p8.expected.op_s["TP all-reduce after attention"] == pytest.approx(want)
    assert 11e-6 < want < 13e-6                           # against the α–β default's 17.3 µs


def test_small_kernels_counted_per_block(p8):
    # DeepSeek-V3 fp8 activations: per MLA block 8 kernels + 3 quantisations, per MoE block 7, per dense block 4,
    # per step 4 (embedding, final norm, logits cast, argmax)
    calls = sum(o.calls for o in p8.ops)
    assert p8.expected.kernels == calls + 61 * 11 + 58 * 7 + 3 * 4 + 4


def test_the_gap_adds_up_and_eager_floors_every_kernel(dsv3, h200, p8):
    e = p8.expected
    assert set(e.gap) == set(GAP_PARTS)
    assert sum(e.gap.values()) == pytest.approx(e.step_s - p8.step_s)
    assert sum(e.by_group.values()) == pytest.approx(e.step_s)
    eager = plan(dsv3, h200, "tp8", 8, context=1536, eager=True).expected
    assert eager.op_s["q_b proj"] == 1.13999e-5          # a 1 µs GEMM waits for its host launch
    assert eager.step_s > e.step_s and eager.gap["kernel_launches"] > 0.01
    assert e.gap["kernel_launches"] < 1e-4               # in a graph almost nothing is below 1.15 µs


def test_what_ifs_of_the_levers(dsv3, h200, p8):
    cal = default_calibration()
    no_small = expected_step(p8, dsv3, h200, cal, small_ops=False)
    assert no_small.step_s == pytest.approx(p8.expected.step_s - p8.expected.by_group["small_ops"])
    roof = expected_step(p8, dsv3, h200, cal, expert_fraction=1.0)
    gu = op(p8, "routed experts gate+up")
    assert roof.op_s["routed experts gate+up"] == pytest.approx(gu.bytes / BW)


def test_a_b200_carries_the_h200_over(dsv3):
    from truepeak.hardware.lookup import get_accelerator

    b = plan(dsv3, get_accelerator("b200"), "ep8", 8, context=1536, weights="routed_experts=nvfp4")
    e = b.expected
    assert not e.carry.same_device and e.carry.bandwidth == pytest.approx(8e12 * 4.48454e12 / 4.8e12)
    assert [a.KIND for a in e.assumptions] == ["calibration_carried_over"]
    gu = op(b, "routed experts gate+up")
    # nvfp4 is native on a B200 but was dequantised on the H200: the measured fp8 library fraction, E_local 32
    cal = default_calibration()
    f = cal.expert_fraction("library", "fp8_e4m3", gu.detail["pairs"] / 32, 32)
    assert e.op_s["routed experts gate+up"] == pytest.approx(gu.bytes / (e.carry.bandwidth * f))
