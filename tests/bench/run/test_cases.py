"""The sweep as data (truepeak/bench/run/cases.py): default and quick sweeps, fp8 scale variants, case keys,
modes."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from truepeak.bench import run as R  # noqa: E402
from truepeak.errors import TruepeakError  # noqa: E402
from truepeak.hardware.detect import cuda_device_info  # noqa: E402


def _h200():
    return cuda_device_info("NVIDIA H200", "9.0", sm_count=132, l2_bytes=62914560, smem_per_block_bytes=232448,
                            max_sm_clock_hz=1980e6, memory_bytes=150 * 10**9, index=0)


def test_default_gpu_sweep():
    dev = _h200()
    cases = R.plan_cases(dev, R.default_formats(dev))
    assert cases[0].kind == "membw" and cases[0].nbytes == 2 * 2**30 and cases[0].label == "copy 2 GiB"
    # the progress bar names the copy once ("copy 2 GiB", not "copy copy 2 GiB") and a GEMM by format and shape
    assert cases[0].progress_label == "copy 2 GiB"
    gemm = next(c for c in cases if c.kind == "gemm")
    assert gemm.progress_label == f"{gemm.format} {gemm.m}x{gemm.n}x{gemm.k}"
    gemms = [c for c in cases if c.kind == "gemm" and not c.skip_reason]
    # 9 decode M x 2 model shapes + 2 squares, for each of 10 variants: fp32, tf32, bf16, fp16, fp8_e4m3 (tensor,
    # row, 128-block scales), fp8_e5m2 (tensor, row; e4m3 x e5m2), int8
    assert len(gemms) == 10 * (9 * 2 + 2)
    assert [(c.format, c.scaling) for c in gemms[::20]] == [
        ("fp32", None), ("tf32", None), ("bf16", None), ("fp16", None), ("fp8_e4m3", "tensor"), ("fp8_e4m3", "row"),
        ("fp8_e4m3", "block128"), ("fp8_e5m2", "tensor"), ("fp8_e5m2", "row"), ("int8", None)]
    assert {c.mode for c in gemms} == {""}  # sustained, keyed as before --mode existed
    shapes = {(c.m, c.n, c.k) for c in gemms}
    assert (1, 4096, 7168) in shapes and (256, 7168, 2048) in shapes and (8192, 8192, 8192) in shapes
    assert {c.m for c in gemms if c.n == 4096 and c.k == 7168} == set(R.DECODE_M)
    probes = {c.format: c.skip_reason for c in cases if c.skip_reason}
    assert probes == {f: f"{f} GEMM needs sm_100 or sm_120; this device is sm_90" for f in ("mxfp8", "nvfp4", "mxfp4")}
    assert all(c.large for c in gemms if c.m == c.n == c.k)


def test_default_cpu_sweep(cpu):
    cases = R.plan_cases(cpu, R.default_formats(cpu))
    assert [c.kind for c in cases].count("membw") == 1
    assert {c.format for c in cases if c.kind == "gemm"} == {"fp32", "bf16"}
    assert {(c.m, c.n, c.k) for c in cases if c.large} == {(1024, 1024, 1024), (2048, 2048, 2048)}
    assert R.default_formats(cpu, quick=True) == ["fp32"]
    skipped = R.plan_cases(cpu, ["fp32", "bf16"], format_skips={"bf16": "too slow here"})
    assert [c.skip_reason for c in skipped if c.format == "bf16"] == ["too slow here"]


def test_quick_cpu_sweep_is_small(cpu):
    cases = R.plan_cases(cpu, ["fp32"], quick=True)
    assert len(cases) <= 5
    assert all(c.m * c.n * c.k <= 2**26 for c in cases if c.kind == "gemm")


def test_fp8_workloads_count_their_per_tensor_scales():
    w = R.Case("gemm", "fp8_e4m3", 16, 64, 32).workload()
    # A 16x32 + B 64x32 in 1 byte, C 16x64 in bf16, two fp32 scales
    assert w.scaling == "tensor" and w.min_bytes == 16 * 32 + 64 * 32 + 2 * 16 * 64 + 8
    assert R.Case("gemm", "bf16", 16, 64, 32).workload().scaling is None


def test_case_keys_are_unique_and_stable(cpu):
    cases = R.plan_cases(cpu, ["fp32", "bf16"])
    keys = [R.case_key(c, cpu) for c in cases]
    assert len(set(keys)) == len(keys)
    assert keys == [R.case_key(c, cpu) for c in R.plan_cases(cpu, ["fp32", "bf16"])]


def test_modes_parse_and_both_times_every_gemm_twice():
    assert R.expand_modes(None) == ["sustained"] and R.expand_modes(["both"]) == ["sustained", "burst"]
    assert R.expand_modes(["burst"]) == ["burst"]
    with pytest.raises(TruepeakError, match="unknown mode 'fast'; accepted: sustained .* burst .* both"):
        R.expand_modes(["fast"])
    dev = _h200()
    one = R.plan_cases(dev, ["bf16"], quick=True)
    both = R.plan_cases(dev, ["bf16"], quick=True, modes=["sustained", "burst"])
    gemms = [c for c in both if c.kind == "gemm"]
    assert len(gemms) == 2 * len([c for c in one if c.kind == "gemm"])
    assert [R.case_mode(dev, c) for c in gemms] == ["sustained"] * 3 + ["burst"] * 3
    keys = {R.case_key(c, dev) for c in gemms}
    assert len(keys) == len(gemms)  # the mode is part of the key
    assert R.case_key(one[1], dev).endswith("|sustained")  # sustained keys as before --mode existed
