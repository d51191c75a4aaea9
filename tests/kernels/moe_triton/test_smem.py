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


def test_programs_per_sm_is_the_least_of_shared_memory_registers_and_threads():
    from truepeak.kernels.moe_triton.smem import programs_per_sm

    h200 = dict(smem_per_sm=233_472, regs_per_sm=65_536, threads_per_sm=2048)
    # 160 KB + 1 KB reserved: 233,472 // 164,864 = 1; 168 registers x 32 x 4 warps = 21,504: 3 by registers
    assert programs_per_sm(163_840, 168, 4, **h200) == 1
    # 80 KB: 233,472 // 82,944 = 2 by shared memory; 128 registers: 65,536 // 16,384 = 4
    assert programs_per_sm(81_920, 128, 4, **h200) == 2
    # registers bound: 40 KB (5 by shared memory), 255 -> 256 registers x 32 x 4 = 32,768: 2
    assert programs_per_sm(40_960, 255, 4, **h200) == 2
    # threads bound: no shared memory, 32 registers, 8 warps of 32 = 256 threads: 2048 // 256 = 8
    assert programs_per_sm(0, 32, 8, **h200) == 8
    # a program larger than the SM still gets one (the launch fails later, with the compiler's own message)
    assert programs_per_sm(300_000, 64, 4, **h200) == 1
    from truepeak.errors import TruepeakError

    with pytest.raises(TruepeakError, match="num_warps=0"):
        programs_per_sm(1024, 64, 0, **h200)
