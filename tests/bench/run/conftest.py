"""Fixtures of the run tests (tests/bench/run/): this CPU with a hand-set 100 GFLOP/s fp32 peak and a 16 MiB cache,
stubbed timing (every GEMM call "takes" 0.1 s and every copy 10 ms: the root conftest's ``stub_timing``), and one
stubbed quick run shared by the tests that read it."""

from __future__ import annotations

import dataclasses

import pytest

from truepeak.hardware.catalog import Peak
from truepeak.hardware.detect import detect_cpu


GEMM_S = 0.1  # every stubbed GEMM call takes 0.1 s
COPY_S = 0.01  # every stubbed copy takes 10 ms
PEAK = 100e9  # the test CPU's fp32 peak, FLOP/s


@pytest.fixture(scope="module")
def host():
    return detect_cpu()


@pytest.fixture(scope="module")
def cpu(host):
    """This CPU with a 16 MiB cache (quick copy: 32 MiB) and a 100 GFLOP/s fp32 peak without a maximum clock."""
    acc = dataclasses.replace(host.accelerator, peaks=(Peak("fp32", "fp32", PEAK, None, "test"),), max_clock_hz=None)
    return dataclasses.replace(host, l2_bytes=16 * 2**20, accelerator=acc)


@pytest.fixture
def fake_timing(monkeypatch, stub_timing):
    stub_timing(monkeypatch, gemm_s=GEMM_S, copy_s=COPY_S)


@pytest.fixture(scope="module")
def quick_run(tmp_path_factory, cpu, stub_timing):
    """One stubbed quick run shared by the read-only checks (skipped without torch, like the tests that read it)."""
    pytest.importorskip("torch")
    from truepeak.bench import run as R

    out = tmp_path_factory.mktemp("quick")
    with pytest.MonkeyPatch.context() as mp:
        stub_timing(mp, gemm_s=GEMM_S, copy_s=COPY_S)
        return R.run_main_job(out, device=cpu, quick=True, progress=False, argv=["truepeak", "run", "--quick"])
