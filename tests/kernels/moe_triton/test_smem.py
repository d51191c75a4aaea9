"""Shared-memory fitting of the MoE kernels (truepeak.kernels.moe_triton.smem) with the compiler's figure, here a
stand-in compiler whose allocation grows with the stages."""

from __future__ import annotations

import dataclasses
from types import SimpleNamespace

import pytest

from truepeak.errors import UnsupportedError
from truepeak.kernels import moe_triton as mt


def fake_launch(per_stage):
    """A ``launch(which, cfg, warmup=True)`` whose compiled kernel allocates ``per_stage[which]`` bytes per stage."""
    def launch(which, cfg, warmup=False):
        assert warmup
        return SimpleNamespace(metadata=SimpleNamespace(shared=per_stage[which] * cfg.num_stages))
    return launch


def test_fit_shared_memory_drops_stages_per_kernel_until_each_fits():
    # kernel 1: 40,000 B a stage -> 160,000 / 120,000 / 80,000 at 4 / 3 / 2 stages; kernel 2: 30,000 B -> 120,000 /
    # 90,000: under a 100,000 B limit kernel 1 keeps 2 stages, kernel 2 keeps 3; every other field stays
    cfg1 = mt.KernelConfig(16, 64, 128, num_stages=4, maxnreg=128)
    cfg2 = mt.KernelConfig(16, 128, 128, num_stages=4)
    got1, got2 = mt.fit_shared_memory(fake_launch({1: 40_000, 2: 30_000}), cfg1, cfg2, 100_000)
    assert got1 == dataclasses.replace(cfg1, num_stages=2) and got2 == dataclasses.replace(cfg2, num_stages=3)
    # a limit of 0 (the device does not report one) checks nothing
    assert mt.fit_shared_memory(fake_launch({1: 10**9, 2: 10**9}), cfg1, cfg2, 0) == (cfg1, cfg2)


def test_fit_shared_memory_refuses_a_kernel_that_does_not_fit_with_one_stage():
    cfg = mt.KernelConfig(16, 64, 128, num_stages=2)
    with pytest.raises(UnsupportedError, match=r"MoE kernel 1 \(64x16x128, 1 stage\) needs 50,000 B of shared memory; "
                                               "this device allows 30,000 B"):
        mt.fit_shared_memory(fake_launch({1: 50_000, 2: 10_000}), cfg, cfg, 30_000)


def test_fit_shared_memory_names_a_register_cap_ptxas_cannot_meet():
    def launch(which, cfg, warmup=False):
        raise RuntimeError("PTXAS error: Internal error\nptxas fatal: Entry function uses too many registers")

    capped = mt.KernelConfig(16, 64, 128, maxnreg=64)
    with pytest.raises(UnsupportedError, match="MoE kernel 1 does not compile with maxnreg=64: ptxas fatal: Entry "
                                               "function uses too many registers; raise maxnreg or leave it None"):
        mt.fit_shared_memory(launch, capped, capped, 232_448)
    with pytest.raises(RuntimeError, match="PTXAS error"):  # without a cap the compiler's own error stands
        mt.fit_shared_memory(launch, mt.KernelConfig(16, 64, 128), mt.KernelConfig(16, 64, 128), 232_448)
