"""truepeak.comm.sweep: --sizes / --ops parsing and per-case element counts (nccl-tests sizes)."""

from __future__ import annotations

import pytest

from truepeak.comm.sweep import parse_ops, parse_size, parse_sizes, plan_cases
from truepeak.errors import TruepeakError, UnknownNameError


def test_default_sweep_is_21_powers_of_two_1k_to_1g():
    sizes = parse_sizes("1K:1G")
    assert len(sizes) == 21 and sizes[0] == 1024 and sizes[-1] == 2**30
    assert all(b == 2 * a for a, b in zip(sizes, sizes[1:]))


def test_sizes_forms():
    assert parse_sizes("1K:64K:4") == [1024, 4096, 16384, 65536]
    assert parse_sizes("12K,96K,768K") == [12288, 98304, 786432]  # GLM-5 decode allreduce at batch 1, 8, 64
    assert parse_size("4096") == 4096 and parse_size("1MiB") == 2**20
    for bad in ("", "1X", "1K:1G:1", "64K:1K", "0", "17G", "1.5"):
        with pytest.raises(TruepeakError):
            parse_sizes(bad)


def test_ops_parsing():
    assert parse_ops(None) == ["all_reduce", "all_gather", "reduce_scatter", "all_to_all"]
    assert parse_ops("allreduce,a2a,ar") == ["all_reduce", "all_to_all"]
    with pytest.raises(UnknownNameError, match="valid ops: all_reduce"):
        parse_ops("all_reduce,allscatter")
    with pytest.raises(TruepeakError, match="not measured"):
        parse_ops("broadcast")


def test_plan_rounds_sizes_not_divisible_and_says_so():
    # 3 ranks, bf16: all_gather S must be a multiple of 3 * 2 = 6 B: 1024 -> 1020 (170 per rank); all_reduce keeps it.
    cases, notes = plan_cases(["all_reduce", "all_gather"], [1024, 4096], 3, "bf16")
    ag = [c for c in cases if c.op == "all_gather"]
    assert [(c.count, c.bytes) for c in ag] == [(170, 1020), (682, 4092)]
    assert [(c.count, c.bytes) for c in cases if c.op == "all_reduce"] == [(512, 1024), (2048, 4096)]
    assert notes == ["all_gather: sizes must be multiples of 6 B (3 ranks × 2 B bf16); rounded 1024 → 1020, "
                     "4096 → 4092 B"]
    # 2 ranks: 1 KiB all_to_all bf16 = 256 elements to each peer, no rounding.
    cases, notes = plan_cases(["all_to_all"], [1024], 2, "bf16")
    assert (cases[0].count, cases[0].bytes, notes) == (256, 1024, [])
    with pytest.raises(TruepeakError, match="at least 2 ranks"):
        plan_cases(["all_reduce"], [1024], 1, "bf16")

