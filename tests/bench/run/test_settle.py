"""Settling before a sweep (truepeak/bench/run/settle.py): the CPU bf16 check."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from truepeak.bench import run as R  # noqa: E402


def test_cpu_bf16_probe_returns_a_reason_when_slow():
    ok, reason = R.cpu_bf16_fast_enough(torch, size=64, ratio=1e-9)
    assert not ok and "slower than fp32" in reason and "--formats bf16" in reason
    assert R.cpu_bf16_fast_enough(torch, size=64, ratio=1e9) == (True, "")
