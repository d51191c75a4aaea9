"""The host CPU as an accelerator: an *estimated* fp32 peak and no memory bandwidth (truepeak run measures that).

The model name comes from /proc/cpuinfo; py-cpuinfo (about 1 s per call) is asked only where /proc/cpuinfo is missing
(macOS, Windows) or names no model, then ``platform.processor()``. The fp32 peak is *estimated* and labelled so
(``derived=True``, "estimated" in its source)::

    fp32 peak = physical cores x FMA units per core x (FMA datapath bits / 32) fp32 lanes x 2 (FLOP per FMA) x clock

with the FMA datapath per core taken from the vendor and family (:func:`fma_datapath`), not from the widest
instruction set alone: a core can decode AVX-512 and still execute it on 256-bit pipes.

===========================================  ==============  ================================
CPU                                          FMA datapath    FLOP/cycle/core (fp32)
===========================================  ==============  ================================
AMD family 0x17 model < 0x30 (Zen 1)         2 x 128-bit     16
AMD family 0x17 model >= 0x30 (Zen 2)        2 x 256-bit     32
AMD family 0x19 (Zen 3, Zen 4)               2 x 256-bit     32 (Zen 4 runs AVX-512 in halves)
AMD family 0x1a (Zen 5) with avx512f         2 x 512-bit     64 (else 2 x 256-bit: 32)
Intel with avx512f                           2 x 512-bit     64 (assumed: some SKUs have 1 unit)
Intel with avx2 + fma                        2 x 256-bit     32
Arm64 with NEON (asimd)                      2 x 128-bit     16 (assumed; 4-pipe cores are more)
anything else                                1 x widest SIMD (avx512f 512, avx2/fma 256, sse/neon 128, scalar 32)
===========================================  ==============  ================================

The clock is the highest one the system reports (``cpuinfo_max_freq`` in sysfs, else the largest ``cpu MHz`` in
/proc/cpuinfo, else py-cpuinfo's). Only ``cpuinfo_max_freq`` is a maximum clock.

The pure part (:func:`parse_cpuinfo`, :func:`cpu_spec_from`, :func:`cpu_accelerator`) takes text and numbers, so tests
feed it /proc/cpuinfo-style text; :func:`read_cpu_spec` reads this machine. :func:`truepeak.hardware.detect.detect_cpu`
wraps the result in a ``DeviceInfo``.
"""

from __future__ import annotations

import os
import platform
import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from truepeak.hardware.catalog import Accelerator, Architecture, Peak, Sourced

#: Cache size assumed for a CPU that reports none, in bytes (rotation and copy buffers are sized from it).
DEFAULT_CPU_CACHE_BYTES = 32 * 2**20


@dataclass(frozen=True)
class CpuSpec:
    """What the CPU peak estimate is made of.

    Attributes:
        model: model name.
        cores: physical cores available to this process.
        lanes: fp32 lanes of one FMA unit (its datapath bits / 32: 16 for 512-bit, 8 for 256-bit, 4 for 128-bit,
            1 scalar).
        isa: the widest vector instruction set the flags show ("avx512f", "avx2", "fma", "asimd", "scalar").
        fma_units: vector FMA units per core.
        clock_hz: clock used for the estimate, in Hz, or None if none was found.
        clock_source: where the clock came from.
        cache_bytes: last-level cache in bytes, or None.
        memory_bytes: system memory in bytes, or None.
        fma_basis: why this FMA datapath (vendor/family rule and what is assumed).
    """

    model: str
    cores: int
    lanes: int
    isa: str
    fma_units: int
    clock_hz: float | None
    clock_source: str
    cache_bytes: int | None = None
    memory_bytes: int | None = None
    fma_basis: str = ""

    @property
    def clock_is_max(self) -> bool:
        """Whether ``clock_hz`` is the maximum clock (sysfs ``cpuinfo_max_freq``), not a momentary or nominal one."""
        return self.clock_source == "cpuinfo_max_freq"

    @property
    def flop_per_cycle_per_core(self) -> int:
        """fp32 FLOP per cycle per core: FMA units x lanes x 2 (an FMA is 2 FLOP)."""
        return self.fma_units * self.lanes * 2

    @property
    def fp32_peak_flops(self) -> float | None:
        """Estimated fp32 peak in FLOP/s: cores x FMA units x lanes x 2 (FMA) x clock; None without a clock."""
        if not self.clock_hz:
            return None
        return self.cores * self.flop_per_cycle_per_core * self.clock_hz

    @property
    def formula(self) -> str:
        """The estimate written out, e.g. ``"2 cores x 2 FMA units x 8 fp32 lanes (256-bit) x 2 (FMA) = 32 FLOP/cycle/
        core x 2.596 GHz (...) [AMD family 0x19 (Zen 3/Zen 4): ...]"``."""
        clock = f"{self.clock_hz / 1e9:.3f} GHz ({self.clock_source})" if self.clock_hz else "unknown clock"
        basis = f" [{self.fma_basis}]" if self.fma_basis else ""
        return (f"{self.cores} cores x {self.fma_units} FMA units x {self.lanes} fp32 lanes ({self.lanes * 32}-bit) "
                f"x 2 (FMA) = {self.flop_per_cycle_per_core} FLOP/cycle/core x {clock}{basis}")


def simd_lanes(flags: set[str] | frozenset[str]) -> tuple[int, str]:
    """fp32 lanes of the widest vector FMA and the flag that gave it: avx512f 16, avx2/fma 8, neon/asimd 4, else 1."""
    if "avx512f" in flags:
        return 16, "avx512f"
    if "avx2" in flags or "fma" in flags:
        return 8, "avx2" if "avx2" in flags else "fma"
    if "asimd" in flags or "neon" in flags:
        return 4, "asimd" if "asimd" in flags else "neon"
    return 1, "scalar"


def fma_datapath(vendor: str | None, family: int | None, model: int | None, flags: set[str] | frozenset[str],
                 machine: str = "") -> tuple[int, int, str]:
    """FMA units per core and the bits of each, from vendor and family (see the module docstring's table).

    Args:
        vendor: /proc/cpuinfo ``vendor_id`` ("AuthenticAMD", "GenuineIntel", ...), or None.
        family, model: /proc/cpuinfo ``cpu family`` and ``model`` (decimal there: Zen 4 is family 25 = 0x19).
        flags: instruction-set flags.
        machine: ``platform.machine()``.

    Returns:
        ``(units, bits, basis)``: basis says which rule applied and what is assumed.
    """
    vendor = (vendor or "").strip()
    arm = machine.lower() in ("arm64", "aarch64") or "asimd" in flags or "neon" in flags
    avx512 = "avx512f" in flags
    avx2_fma = "avx2" in flags and "fma" in flags
    if vendor in ("AuthenticAMD", "HygonGenuine") and family is not None:
        fam = f"AMD family {family:#x}"
        if family == 0x17 or (vendor == "HygonGenuine" and family == 0x18):
            if model is not None and model >= 0x30:
                return 2, 256, f"{fam} model {model:#x} (Zen 2): 2 x 256-bit FMA pipes"
            return 2, 128, f"{fam} (Zen 1/Zen+): 2 x 128-bit FMA pipes, AVX2 runs in 128-bit halves"
        if family == 0x19:
            return 2, 256, (f"{fam} (Zen 3/Zen 4): 2 x 256-bit FMA pipes"
                            + (", AVX-512 runs on them in 256-bit halves" if avx512 else ""))
        if family == 0x1A:
            if avx512:
                return 2, 512, f"{fam} (Zen 5): 2 x 512-bit FMA pipes (assumed: mobile Zen 5 has 256-bit ones)"
            return 2, 256, f"{fam} (Zen 5) without avx512f: 2 x 256-bit FMA pipes"
    if vendor == "GenuineIntel":
        if avx512:
            return 2, 512, "Intel with avx512f: 2 x 512-bit FMA units (assumed: some SKUs have 1)"
        if avx2_fma:
            return 2, 256, "Intel with avx2 + fma: 2 x 256-bit FMA units"
    if arm and not (avx512 or avx2_fma):
        return 2, 128, "Arm64 NEON: 2 x 128-bit FMA pipes (assumed; cores with 4 pipes reach more)"
    lanes, isa = simd_lanes(flags)
    if isa == "scalar":
        return 1, 32, "no vector FMA flags: 1 scalar FMA per cycle (assumed)"
    return 1, lanes * 32, (f"vendor/family not in truepeak's table ({vendor or 'unknown vendor'}"
                           f"{f', family {family:#x}' if family is not None else ''}): 1 x {lanes * 32}-bit "
                           f"({isa}) FMA unit assumed, likely an underestimate")



def parse_cpuinfo(text: str) -> dict:
    """Read the fields the estimate needs from /proc/cpuinfo text.

    Returns:
        ``{"model": str | None, "flags": set[str], "mhz": float | None (the largest "cpu MHz"),
        "threads_per_core": int | None (siblings / cpu cores), "cache_bytes": int | None ("cache size"),
        "vendor": str | None ("vendor_id"), "family": int | None ("cpu family"), "model_number": int | None
        ("model")}``.
    """
    model = None
    vendor = family = model_number = None
    flags: set[str] = set()
    mhz: list[float] = []
    siblings = cpu_cores = None
    cache = None
    for line in text.splitlines():
        if ":" not in line:
            continue
        key, _, value = line.partition(":")
        key, value = key.strip().lower(), value.strip()
        if key in ("model name", "hardware", "cpu model") and model is None and value:
            model = value
        elif key in ("flags", "features") and not flags:
            flags = set(value.lower().split())
        elif key == "cpu mhz":
            try:
                mhz.append(float(value))
            except ValueError:
                pass
        elif key == "siblings" and siblings is None:
            siblings = _int(value)
        elif key == "cpu cores" and cpu_cores is None:
            cpu_cores = _int(value)
        elif key == "cache size" and cache is None:
            cache = _size_bytes(value)
        elif key == "vendor_id" and vendor is None:
            vendor = value
        elif key == "cpu family" and family is None:
            family = _int(value)
        elif key == "model" and model_number is None:
            model_number = _int(value)
    tpc = None
    if siblings and cpu_cores and siblings >= cpu_cores:
        tpc = max(1, siblings // cpu_cores)
    return {"model": model, "flags": flags, "mhz": max(mhz) if mhz else None, "threads_per_core": tpc,
            "cache_bytes": cache, "vendor": vendor, "family": family, "model_number": model_number}


def cpu_spec_from(cpuinfo_text: str | None, *, logical_cpus: int, max_freq_khz: str | None = None,
                  cache_bytes: int | None = None, memory_bytes: int | None = None,
                  py_cpuinfo: dict | None = None, machine: str = "") -> CpuSpec:
    """Build a :class:`CpuSpec` from raw inputs (pure; tests feed it /proc/cpuinfo-style text).

    Args:
        cpuinfo_text: contents of /proc/cpuinfo, or None where there is none (macOS, Windows).
        logical_cpus: CPUs this process may run on (``len(os.sched_getaffinity(0))`` or ``os.cpu_count()``).
            Divided by threads per core (siblings / cpu cores) when /proc/cpuinfo shows SMT.
        max_freq_khz: contents of ``cpuinfo_max_freq`` (kHz), preferred over "cpu MHz" (a momentary clock).
        cache_bytes: last-level cache from sysfs; else /proc/cpuinfo "cache size"; else py-cpuinfo's.
        memory_bytes: system memory.
        py_cpuinfo: ``cpuinfo.get_cpu_info()`` output, used only for what /proc/cpuinfo lacks.
        machine: ``platform.machine()``; "arm64"/"aarch64" imply NEON when no flags are known.
    """
    info = parse_cpuinfo(cpuinfo_text) if cpuinfo_text else {"model": None, "flags": set(), "mhz": None,
                                                               "threads_per_core": None, "cache_bytes": None,
                                                               "vendor": None, "family": None, "model_number": None}
    py = py_cpuinfo or {}
    model = info["model"] or py.get("brand_raw") or platform.processor() or machine or "unknown CPU"
    flags = info["flags"] or {str(f).lower() for f in py.get("flags", ())}
    if not flags and machine.lower() in ("arm64", "aarch64"):
        flags = {"asimd"}  # NEON is mandatory on AArch64
    _, isa = simd_lanes(flags)
    vendor = info["vendor"] or py.get("vendor_id_raw")
    family = info["family"] if info["family"] is not None else _int(py.get("family"))
    model_number = info["model_number"] if info["model_number"] is not None else _int(py.get("model"))
    units, bits, basis = fma_datapath(vendor, family, model_number, flags, machine)
    tpc = info["threads_per_core"] or 1
    cores = max(1, logical_cpus // tpc)

    clock_hz, clock_source = None, "none found"
    khz = _int((max_freq_khz or "").strip())
    if khz:
        clock_hz, clock_source = khz * 1e3, "cpuinfo_max_freq"
    elif info["mhz"]:
        clock_hz, clock_source = info["mhz"] * 1e6, "/proc/cpuinfo cpu MHz"
    else:
        hz = py.get("hz_advertised") or py.get("hz_actual")
        if hz and hz[0]:
            clock_hz, clock_source = float(hz[0]), "py-cpuinfo"
    cache = cache_bytes or info["cache_bytes"] or py.get("l3_cache_size") or py.get("l2_cache_size") or None
    return CpuSpec(model=model, cores=cores, lanes=bits // 32, isa=isa, fma_units=units, clock_hz=clock_hz,
                   clock_source=clock_source, cache_bytes=int(cache) if cache else None, memory_bytes=memory_bytes,
                   fma_basis=basis)


def cpu_accelerator(spec: CpuSpec) -> Accelerator:
    """The CPU as an :class:`Accelerator`: vendor "cpu", one *estimated* fp32 peak, **no memory bandwidth**.

    The peak is ``derived=True`` with the formula in its source. Without a clock there is no peak at all.
    """
    est = "estimated: " + spec.formula
    peaks: tuple[Peak, ...] = ()
    if spec.fp32_peak_flops:
        peaks = (Peak("fp32", "fp32", spec.fp32_peak_flops, None, est, derived=True, clock_hz=spec.clock_hz,
                      note="estimated from the instruction set, core count and clock; not a vendor figure"),)
    arch = Architecture("cpu", f"CPU ({spec.isa})", {"fp32": spec.flop_per_cycle_per_core},
                        "FMA units x fp32 lanes per unit x 2 (FMA) per core, from vendor and family (estimated): "
                        + (spec.fma_basis or "no basis"))
    slug = re.sub(r"[^a-z0-9]+", "-", spec.model.lower()).strip("-") or "unknown"
    return Accelerator(
        key=f"cpu-{slug}", name=spec.model, vendor="cpu", architecture=arch, compute_capability=None,
        device_names=(spec.model,), aliases=(), peaks=peaks,
        memory_bytes=Sourced(spec.memory_bytes, "/proc/meminfo MemTotal") if spec.memory_bytes else None,
        memory_bandwidth=None,
        sm_count=Sourced(spec.cores, "physical cores available to this process"),
        boost_clock_hz=Sourced(spec.clock_hz, spec.clock_source) if spec.clock_hz else None,
        # only sysfs cpuinfo_max_freq is a maximum; "cpu MHz" (in a VM often the nominal clock) is not, and cores
        # boost above it, so a GEMM may measure above the peak at that clock: vendor "cpu" gets the CPU headroom of
        # truepeak.roofline.clock_headroom (CPU_CLOCK_HEADROOM, 1.5 x), the one place that choice is made
        max_clock_hz=Sourced(spec.clock_hz, spec.clock_source) if spec.clock_hz and spec.clock_is_max else None,
        l2_bytes=Sourced(spec.cache_bytes, "last-level cache reported by the OS") if spec.cache_bytes else None,
        smem_per_block_bytes=None, tdp_w=None, interconnect=None,
        headline="fp32 peak " + est,
        notes=("CPU peak is an estimate (" + spec.formula + ")",
               "no memory bandwidth in a spec table: truepeak run uses the measured copy bandwidth as the roofline's "
               "memory ceiling"),
    )


def read_cpu_spec() -> CpuSpec:
    """The :class:`CpuSpec` of this machine, from /proc/cpuinfo, sysfs and /proc/meminfo (py-cpuinfo only where
    /proc/cpuinfo names no model). Never raises for a missing file: what cannot be read is None."""
    text = _read("/proc/cpuinfo")
    py = None
    if not text or not parse_cpuinfo(text)["model"]:
        py = _py_cpuinfo()  # slow (~1 s); only where /proc/cpuinfo does not say
    try:
        logical = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        logical = os.cpu_count() or 1
    return cpu_spec_from(text, logical_cpus=logical,
                         max_freq_khz=_read("/sys/devices/system/cpu/cpu0/cpufreq/cpuinfo_max_freq"),
                         cache_bytes=_sysfs_llc_bytes(), memory_bytes=_meminfo_bytes(), py_cpuinfo=py,
                         machine=platform.machine())


def _read(path: str) -> str | None:
    try:
        return Path(path).read_text()
    except OSError:
        return None


def _int(text: str) -> int | None:
    try:
        return int(text)
    except (TypeError, ValueError):
        return None


def _size_bytes(text: str) -> int | None:
    """``"32768K"``, ``"1024 KB"``, ``"32 MiB"`` -> bytes."""
    hit = re.fullmatch(r"\s*(\d+)\s*([KMG]?)(i?B)?\s*", text, re.IGNORECASE)
    if not hit:
        return None
    return int(hit.group(1)) * {"": 1, "K": 2**10, "M": 2**20, "G": 2**30}[hit.group(2).upper()]


def _sysfs_llc_bytes(root: str = "/sys/devices/system/cpu", cpus: Iterable[int] | None = None) -> int | None:
    """Last-level cache this process can use, in bytes, from sysfs: the highest-level data/unified cache
    (``index*/level``, ``size``), summed over its distinct domains (``shared_cpu_list``) among ``cpus`` (default the
    CPUs this process may run on). A multi-threaded copy or GEMM uses every domain's L3, so one domain's size (cpu0's
    alone) would undersize the buffers on a multi-CCD or multi-socket machine."""
    if cpus is None:
        try:
            cpus = sorted(os.sched_getaffinity(0))
        except (AttributeError, OSError):
            cpus = [0]
    domains: dict[tuple[int, str], int] = {}
    for cpu in cpus:
        best: tuple[int, str, int] | None = None
        for d in Path(root, f"cpu{cpu}", "cache").glob("index*"):
            kind = _read(str(d / "type"))
            if kind and kind.strip() == "Instruction":
                continue
            size = _size_bytes(_read(str(d / "size")) or "")
            level = _int((_read(str(d / "level")) or "").strip()) or 0
            if not size:
                continue
            shared = (_read(str(d / "shared_cpu_list")) or f"cpu{cpu}").strip()
            if best is None or (level, size) > (best[0], best[2]):
                best = (level, shared, size)
        if best is not None:
            domains[(best[0], best[1])] = best[2]
    if not domains:
        return None
    top = max(level for level, _ in domains)
    return sum(size for (level, _), size in domains.items() if level == top)


def _meminfo_bytes() -> int | None:
    text = _read("/proc/meminfo") or ""
    hit = re.search(r"^MemTotal:\s+(\d+)\s*kB", text, re.MULTILINE)
    return int(hit.group(1)) * 1024 if hit else None


def _py_cpuinfo() -> dict | None:
    try:
        import cpuinfo
    except ImportError:
        return None
    try:
        return cpuinfo.get_cpu_info()
    except Exception:
        return None


__all__ = ["CpuSpec", "DEFAULT_CPU_CACHE_BYTES", "cpu_accelerator", "cpu_spec_from", "fma_datapath", "parse_cpuinfo",
           "read_cpu_spec", "simd_lanes"]
