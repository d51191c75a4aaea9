"""The tuner's search space (truepeak.kernels.moe_triton.search_space): candidate values, neighbours, the
shared-memory fit with hand-computed bytes, and the refusals. Pure Python."""

from __future__ import annotations

import dataclasses

import pytest

from truepeak.kernels.moe_triton import search_space as ss
from truepeak.kernels.moe_triton.config import KernelConfig

H200 = 232_448   # sharedMemPerBlockOptin on sm_90 (227 KB; CUDA C++ Programming Guide, compute capabilities table)
SM120 = 101_376  # sm_120: 99 KB


def test_a_tile_that_does_not_fit_with_one_stage_is_dropped():
    # bf16 gate/up, 256 weight rows x 256 K, 64 tokens: per stage 2 tiles x 256 x 256 x 2 B + 64 x 256 x 2 B
    # = 262,144 + 32,768 = 294,912 B > 232,448 B with one stage
    assert KernelConfig(64, 256, 256, 4, 1).smem_bytes("bf16", True) == 294_912
    assert ss.fit(KernelConfig(64, 256, 256, 4, 4), "bf16", True, False, 7168, H200) is None


def test_stages_are_dropped_until_the_tile_fits():
    # bf16 gate/up 128 x 128, 16 tokens: 2 x 128 x 128 x 2 + 16 x 128 x 2 = 69,632 B per stage: 5 stages 348,160 B,
    # 3 stages 208,896 B <= 232,448 (4 would be 278,528); on sm_120 one stage (2 would be 139,264 > 101,376)
    cfg = KernelConfig(16, 128, 128, 4, 5)
    assert ss.fit(cfg, "bf16", True, False, 7168, H200).num_stages == 3
    assert ss.fit(cfg, "bf16", True, False, 7168, SM120).num_stages == 1
    assert ss.fit(cfg, "bf16", True, False, 7168, 0) == cfg  # no limit
    # fp8 w8a8 down 128 x 256, 16 tokens: 128 x 256 x 1 + 16 x 256 x 1 = 36,864 B per stage; 4 stages 147,456 B fit
    # the H200; on sm_120 2 stages (73,728 B; 3 would be 110,592 > 101,376)
    cfg = KernelConfig(16, 128, 256, 4, 4)
    assert ss.fit(cfg, "fp8", False, True, 2048, H200).num_stages == 4
    assert ss.fit(cfg, "fp8", False, True, 2048, SM120).num_stages == 2


def test_a_step_that_does_not_divide_k_is_dropped():
    assert ss.fit(KernelConfig(16, 64, 256, 4, 2), "bf16", False, False, 384, H200) is None  # 384 / 256 = 1.5
    pair = (KernelConfig(16, 64, 128, 4, 2), KernelConfig(16, 64, 256, 4, 2))
    assert ss.fit_pair(pair, "bf16", False, 7168, 384, H200) is None  # down reduces over I = 384
    assert ss.fit_pair(pair, "bf16", False, 7168, 2048, H200) == pair


def test_space_per_format_and_bucket():
    s = ss.search_space("bf16", False, 1)
    assert s["block_m"] == (16, 32) and s["block_k"] == (64, 128, 256) and s["maxnreg"] == (None,)
    assert ss.search_space("fp8", True, 32)["block_m"] == (16, 32, 64, 128)
    assert ss.search_space("fp8_block", True, 8)["block_k"] == (64, 128)  # one 128 x 128 scale per step
    assert ss.search_space("nvfp4", True, 8)["block_k"] == (64,)          # w4a8 nvfp4: 64-element steps only
    # the MMA layout: nvfp4 in 64- or 128-element steps (two chunks, two scale words), whatever the activations
    assert ss.search_space("nvfp4", True, 8, "mma")["block_k"] == (64, 128)
    assert ss.search_space("nvfp4", False, 8, "mma")["block_k"] == (64, 128)
    assert ss.search_space("fp8", False, 8)["maxnreg"] == (None, 128)     # w8a16 decodes in registers
    assert ss.search_space("mxfp4", False, 8)["prefetch"] == (False, True)


def test_neighbours_change_one_field_of_one_kernel():
    pair = (KernelConfig(16, 64, 128, 4, 4), KernelConfig(16, 128, 128, 4, 4))
    n = ss.neighbours(pair, ss.search_space("bf16", False, 1))
    # block_m: 32 (1); per kernel: 2 other tile orders, 3 other block_n, 1 other warp count, 3 other stage counts,
    # 2 other K steps, persistent (1) = 12
    assert len(n) == 1 + 2 * 12 and n[0] == {"block_m": 32}
    assert n[1:5] == [{"gate_up.group_m": 1}, {"gate_up.group_m": 4}, {"down.group_m": 1}, {"down.group_m": 4}]
    assert n[5:7] == [{"gate_up.block_n": 32}, {"gate_up.block_n": 128}]
    assert n[-2:] == [{"gate_up.persistent": True}, {"down.persistent": True}]
    assert all(len(c) == 1 for c in n)
    a, b = ss.apply(pair, {"gate_up.block_n": 128})
    assert a.block_n == 128 and b == pair[1]
    a, b = ss.apply(pair, {"block_m": 32})
    assert a.block_m == b.block_m == 32


def test_refusals_name_the_reason():
    assert ss.refusal("bf16", "bf16", 7168, 2048, (9, 0)) is None
    assert ss.refusal("mxfp4", "fp8", 7168, 2880, (9, 0)) is None  # 2880 = 45 x 64
    assert ss.refusal("mxfp4", "fp8", 7168, 100, (9, 0)) == ("mxfp4 weights need the expert's I in whole steps of "
                                                             "64 elements, got I=100")
    assert "H in whole steps of 128 elements, got H=2880" in ss.refusal("fp8_block", "fp8", 2880, 2048, (9, 0))
    assert ss.refusal("fp8", "fp8", 7168, 2048, (8, 0)) == (
        "fp8 weights with fp8 activations need fp8 MMAs (compute capability >= 8.9); this GPU is sm_80: use fp16 "
        "activations (fp8:fp16)")
    assert ss.refusal("fp8", "fp16", 7168, 2048, (8, 0)) is None


def _additive_cost(pair):
    """A made-up unit time (µs) in which the two kernels' times add, as they do in the unit (one after the
    other): gate/up is fastest with 128 weight rows and 8 warps, down with tile order 1 and 3 stages."""
    g, d = pair
    return (10 + (g.block_n != 128) * 3 + (g.num_warps != 8) * 2 + (g.block_m != 16) * 4
            + 5 + (d.group_m != 1) * 2 + (d.num_stages != 3) * 1.5)


START = (KernelConfig(16, 64, 128, 4, 4), KernelConfig(16, 128, 128, 4, 4))


def test_descent_combines_changes_of_both_kernels_in_one_sweep():
    space, start = ss.search_space("bf16", False, 1), START
    seen = []

    def time_of(p):
        seen.append(p)
        return p, _additive_cost(p)

    best = ss.descend(start, space, time_of, lambda: False)
    # 10 + 5 = 15 µs: all four changes adopted (start: 10 + 3 + 2 + 5 + 2 + 1.5 = 23.5)
    assert _additive_cost(best) == 15
    assert (best[0].block_n, best[0].num_warps, best[1].group_m, best[1].num_stages) == (128, 8, 1, 3)
    assert best[0].block_m == best[1].block_m == 16
    # one sweep finds them (each field's values on the best so far: at most 1 + 2 x 12 candidates), a second adopts
    # nothing and ends it; the start is timed first and no pair twice
    assert seen[0] == start and len(set(seen)) == len(seen) <= 1 + 2 * (1 + 2 * 12)
    # stopped after the start and one sweep's 24 candidates, it already has all four
    n = []
    best = ss.descend(start, space, lambda p: (n.append(p), (p, _additive_cost(p)))[1], lambda: len(n) >= 25)
    assert _additive_cost(best) == 15


def test_descent_stops_when_told_and_keeps_the_best_so_far():
    space, start = ss.search_space("bf16", False, 1), START
    calls = []

    def time_of(p):
        calls.append(p)
        # block_m 32 fails (None); every other candidate as the additive model
        return None if p[0].block_m == 32 else (p, _additive_cost(p))

    best = ss.descend(start, space, time_of, lambda: len(calls) >= 7)
    # the start, block_m 32 (failed), gate/up group_m 1, 4, down group_m 1 (adopted: -2), 4, gate/up block_n 32
    assert len(calls) == 7 and best[1].group_m == 1 and _additive_cost(best) == 23.5 - 2
    # a start that fails is returned when nothing else runs
    assert ss.descend(start, space, lambda p: None, lambda: False) == start


def test_descent_adopts_the_fitted_pair():
    space, start = ss.search_space("bf16", False, 1), START

    def time_of(p):  # the device takes at most 3 stages: the pair that ran has them dropped
        ran = tuple(dataclasses.replace(c, num_stages=min(c.num_stages, 3)) for c in p)
        return ran, _additive_cost(ran)

    best = ss.descend(start, space, time_of, lambda: False)
    assert best[1].num_stages == 3 and _additive_cost(best) == 15
