"""The CPU fp32 peak estimate, computed by hand from /proc/cpuinfo-style text (truepeak.hardware.cpu)."""

from __future__ import annotations

import math

import pytest

from truepeak.hardware import cpu
from truepeak.hardware import detect as det


def _cpuinfo(*cpus: str) -> str:
    """/proc/cpuinfo text: each logical CPU's fields after its "processor : i" line, a blank line between CPUs."""
    return "\n".join(f"processor\t: {i}\n{fields}" for i, fields in enumerate(cpus))


# Two logical CPUs of an AVX-512 EPYC VM (Zen 4: family 25 = 0x19, model 17; one socket, no SMT), trimmed to the
# fields the estimate reads.
_EPYC_AVX512_CPU = """\
vendor_id	: AuthenticAMD
cpu family	: 25
model		: 17
model name	: AMD EPYC
cpu MHz		: 2596.138
cache size	: 1024 KB
siblings	: 2
cpu cores	: 2
flags		: fpu sse sse2 fma avx avx2 avx512f avx512dq avx512_bf16
"""
EPYC_AVX512 = _cpuinfo(_EPYC_AVX512_CPU, _EPYC_AVX512_CPU)


def _intel_avx2_smt_cpu(mhz: str) -> str:
    return f"""\
vendor_id	: GenuineIntel
cpu family	: 6
model		: 158
model name	: Intel(R) Core(TM) i7-7700 CPU @ 3.60GHz
cpu MHz		: {mhz}
siblings	: 8
cpu cores	: 4
flags		: fpu sse sse2 fma avx avx2
"""


# A 4-core / 8-thread AVX2 desktop part: SMT halves the logical count; the fastest "cpu MHz" line wins.
INTEL_AVX2_SMT = _cpuinfo(_intel_avx2_smt_cpu("800.000"), _intel_avx2_smt_cpu("4200.000"))

# AArch64: no "model name", NEON reported as "asimd" in Features.
ARM_NEON = """\
processor	: 0
BogoMIPS	: 50.00
Features	: fp asimd evtstrm aes pmull sha1 sha2 crc32 atomics fphp asimdhp cpuid asimdrdm lrcpc dcpop asimddp
CPU implementer	: 0x41
"""


def test_cpu_estimate_zen4_avx512_runs_on_256_bit_pipes():
    """Zen 4 decodes AVX-512 but executes it on 2 x 256-bit FMA pipes: 32 FLOP/cycle/core, not 64."""
    spec = cpu.cpu_spec_from(EPYC_AVX512, logical_cpus=2)
    assert (spec.model, spec.cores, spec.lanes, spec.isa, spec.fma_units) == ("AMD EPYC", 2, 8, "avx512f", 2)
    assert spec.flop_per_cycle_per_core == 32
    assert spec.clock_hz == pytest.approx(2596.138e6)
    assert spec.clock_source == "/proc/cpuinfo cpu MHz"
    # 2 cores x 2 FMA units x 8 lanes x 2 (FMA) x 2.596138 GHz = 166.2 GFLOP/s
    assert spec.fp32_peak_flops == pytest.approx(2 * 2 * 8 * 2 * 2596.138e6)
    assert spec.fp32_peak_flops == pytest.approx(166.15e9, rel=1e-4)
    assert ("2 cores x 2 FMA units x 8 fp32 lanes (256-bit) x 2 (FMA) = 32 FLOP/cycle/core x 2.596 GHz"
            in spec.formula)
    assert "AMD family 0x19 (Zen 3/Zen 4)" in spec.formula and "256-bit halves" in spec.formula


def _flags(*names):
    return frozenset(names)


@pytest.mark.parametrize(("vendor", "family", "model", "flags", "machine", "units", "bits", "words"), [
    ("AuthenticAMD", 0x17, 0x01, _flags("avx2", "fma"), "x86_64", 2, 128, "Zen 1"),
    ("AuthenticAMD", 0x17, 0x31, _flags("avx2", "fma"), "x86_64", 2, 256, "Zen 2"),
    ("AuthenticAMD", 0x19, 0x01, _flags("avx2", "fma"), "x86_64", 2, 256, "Zen 3/Zen 4"),
    ("AuthenticAMD", 0x19, 0x11, _flags("avx2", "fma", "avx512f"), "x86_64", 2, 256, "256-bit halves"),
    ("AuthenticAMD", 0x1A, 0x02, _flags("avx2", "fma", "avx512f"), "x86_64", 2, 512, "Zen 5"),
    ("AuthenticAMD", 0x1A, 0x24, _flags("avx2", "fma"), "x86_64", 2, 256, "Zen 5"),
    ("GenuineIntel", 6, 0x8F, _flags("avx2", "fma", "avx512f"), "x86_64", 2, 512, "assumed: some SKUs have 1"),
    ("GenuineIntel", 6, 0x9E, _flags("avx2", "fma"), "x86_64", 2, 256, "avx2 + fma"),
    (None, None, None, _flags("asimd"), "aarch64", 2, 128, "assumed"),
    ("AuthenticAMD", 0x15, 0x02, _flags("avx", "fma"), "x86_64", 1, 256, "not in truepeak's table"),
    (None, None, None, _flags("fpu"), "x86_64", 1, 32, "scalar"),
])
def test_fma_datapath_by_vendor_and_family(vendor, family, model, flags, machine, units, bits, words):
    got_units, got_bits, basis = cpu.fma_datapath(vendor, family, model, flags, machine)
    assert (got_units, got_bits) == (units, bits)
    assert words in basis


@pytest.mark.parametrize(("family", "model", "flags", "per_cycle"), [
    (25, 17, "fma avx2 avx512f", 32),   # Zen 4 (this kind of EPYC): 2 x 256-bit
    (26, 2, "fma avx2 avx512f", 64),    # Zen 5 server: 2 x 512-bit
    (23, 49, "fma avx2", 32),           # Zen 2 (EPYC Rome, model 0x31)
    (23, 1, "fma avx2", 16),            # Zen 1 (EPYC Naples)
])
def test_cpu_estimate_amd_from_mocked_cpuinfo(family, model, flags, per_cycle):
    text = (f"vendor_id : AuthenticAMD\ncpu family : {family}\nmodel : {model}\nmodel name : AMD EPYC\n"
            f"cpu MHz : 3000\nflags : fpu sse2 {flags}\n")
    spec = cpu.cpu_spec_from(text, logical_cpus=4)
    assert spec.flop_per_cycle_per_core == per_cycle
    assert spec.fp32_peak_flops == pytest.approx(4 * per_cycle * 3e9)
    acc = cpu.cpu_accelerator(spec)
    assert acc.architecture.flop_per_clk_per_sm["fp32"] == per_cycle
    assert "estimated" in acc.peak("fp32").source and f"= {per_cycle} FLOP/cycle/core" in acc.peak("fp32").source


def test_cpu_estimate_intel_avx512_and_avx2():
    avx512 = ("vendor_id : GenuineIntel\ncpu family : 6\nmodel : 143\nmodel name : Intel(R) Xeon(R) Platinum 8480+\n"
              "cpu MHz : 2000\nflags : fpu fma avx2 avx512f\n")
    spec = cpu.cpu_spec_from(avx512, logical_cpus=8)
    assert spec.flop_per_cycle_per_core == 64 and "assumed" in spec.formula
    spec = cpu.cpu_spec_from(INTEL_AVX2_SMT, logical_cpus=8)
    assert spec.flop_per_cycle_per_core == 32


def test_cpu_estimate_prefers_sysfs_max_freq_and_counts_physical_cores():
    spec = cpu.cpu_spec_from(INTEL_AVX2_SMT, logical_cpus=8, max_freq_khz="4200000\n")
    assert spec.cores == 4  # 8 logical / (8 siblings / 4 cores)
    assert (spec.lanes, spec.isa) == (8, "avx2")
    assert spec.clock_source == "cpuinfo_max_freq"
    # 4 x 8 x 2 x 2 x 4.2 GHz = 537.6 GFLOP/s
    assert spec.fp32_peak_flops == pytest.approx(537.6e9)


def test_cpu_estimate_without_sysfs_takes_the_fastest_cpu_mhz():
    spec = cpu.cpu_spec_from(INTEL_AVX2_SMT, logical_cpus=8)
    assert spec.clock_hz == pytest.approx(4.2e9)  # not the idle 800 MHz of cpu0


def test_cpu_estimate_neon_and_scalar():
    arm = cpu.cpu_spec_from(ARM_NEON, logical_cpus=4, max_freq_khz="3000000", machine="aarch64")
    assert (arm.lanes, arm.isa, arm.fma_units) == (4, "asimd", 2)
    assert "assumed" in arm.formula
    assert arm.fp32_peak_flops == pytest.approx(4 * 4 * 2 * 2 * 3.0e9)  # 192 GFLOP/s
    scalar = cpu.cpu_spec_from("model name : toy\nflags : fpu\ncpu MHz : 1000\n", logical_cpus=1)
    assert (scalar.lanes, scalar.isa, scalar.fma_units) == (1, "scalar", 1)
    assert scalar.fp32_peak_flops == pytest.approx(1 * 1 * 2 * 1 * 1e9)


def test_cpu_without_clock_has_no_peak():
    spec = cpu.cpu_spec_from("model name : mystery\nflags : avx2\n", logical_cpus=2)
    assert spec.clock_hz is None and spec.fp32_peak_flops is None
    acc = cpu.cpu_accelerator(spec)
    assert acc.peaks == ()


def test_cpu_accelerator_is_estimated_fp32_only_without_bandwidth():
    acc = cpu.cpu_accelerator(cpu.cpu_spec_from(EPYC_AVX512, logical_cpus=2))
    assert acc.vendor == "cpu"
    assert [p.rate for p in acc.peaks] == ["fp32"]
    peak = acc.peak("fp32")
    assert peak.derived and "estimated" in peak.source and "x 2 (FMA)" in peak.source
    assert peak.sparse is None
    assert acc.memory_bandwidth is None  # the measured copy bandwidth is used instead
    assert not acc.has_rate("bf16")
    with_bw = det.with_measured_bandwidth(acc, 20e9, "copy 256 MiB")
    assert with_bw.memory_bandwidth.value == 20e9 and "measured" in with_bw.memory_bandwidth.source
    assert acc.memory_bandwidth is None


def test_parse_cpuinfo_fields():
    info = cpu.parse_cpuinfo(EPYC_AVX512)
    assert info["model"] == "AMD EPYC"
    assert {"avx512f", "avx2", "fma"} <= info["flags"]
    assert info["threads_per_core"] == 1
    assert info["cache_bytes"] == 1024 * 1024


@pytest.mark.parametrize("flags,lanes", [({"avx512f", "avx2"}, 16), ({"avx2", "fma"}, 8), ({"fma"}, 8),
                                          ({"asimd"}, 4), ({"neon"}, 4), (set(), 1)])
def test_simd_lanes(flags, lanes):
    assert cpu.simd_lanes(flags)[0] == lanes


def test_estimate_arithmetic_is_finite_for_many_cores():
    spec = cpu.cpu_spec_from(EPYC_AVX512, logical_cpus=192, max_freq_khz="3700000")
    assert spec.cores == 192
    assert math.isfinite(spec.fp32_peak_flops)
    assert spec.fp32_peak_flops == pytest.approx(192 * 2 * 8 * 2 * 3.7e9)  # Zen 4: 32 FLOP/cycle/core


def test_only_sysfs_max_freq_is_a_maximum_clock():
    """A "cpu MHz" clock (nominal in a VM) is not a ceiling: a Zen 4 that boosts past it may measure > 100 %."""
    nominal = cpu.cpu_accelerator(cpu.cpu_spec_from(EPYC_AVX512, logical_cpus=2))
    assert nominal.max_clock_hz is None and nominal.boost_clock_hz.value == pytest.approx(2596.138e6)
    maxed = cpu.cpu_accelerator(cpu.cpu_spec_from(EPYC_AVX512, logical_cpus=2, max_freq_khz="3700000"))
    assert maxed.max_clock_hz.value == pytest.approx(3.7e9)


def test_a_gemm_slightly_above_the_nominal_clock_peak_is_not_a_measurement_error():
    from truepeak.efficiency import derived_metrics
    from truepeak.roofline import Gemm

    acc = cpu.cpu_accelerator(cpu.cpu_spec_from(EPYC_AVX512, logical_cpus=2))
    work = Gemm(2048, 2048, 2048, "fp32")
    t = work.flop / (1.004 * acc.dense_flops("fp32"))  # seen on this machine: 100.4 % of the 2.596 GHz estimate
    assert derived_metrics(acc, work, t).dense_fraction == pytest.approx(1.004)


def test_cpu_peak_from_a_nominal_clock_gets_the_cpu_headroom():
    """Adversarial test 3: a CPU peak estimated from a nominal /proc clock (EPYC 2.6 GHz base boosts to ~3.7 GHz,
    1.42x; measured 113.8 % of the estimate) gets 1.5 x headroom, a GPU without a max clock 1.20 x."""
    from truepeak.errors import MeasurementError
    from truepeak.roofline import (CLOCK_HEADROOM, CPU_CLOCK_HEADROOM, check_plausible, clock_headroom,
                                   plausibility_limit)

    acc = cpu.cpu_accelerator(cpu.cpu_spec_from(EPYC_AVX512, logical_cpus=2))
    assert acc.vendor == "cpu" and acc.max_clock_hz is None
    assert clock_headroom(acc) == CPU_CLOCK_HEADROOM == 1.5 and CLOCK_HEADROOM == 1.20
    lim = plausibility_limit(acc, "fp32")
    peak = acc.peak("fp32").dense
    assert lim.ceiling == pytest.approx(1.5 * peak) and "50 %" in lim.basis
    assert check_plausible(1.42 * peak, lim) == pytest.approx(1.42)
    with pytest.raises(MeasurementError):
        check_plausible(1.51 * peak, lim)
