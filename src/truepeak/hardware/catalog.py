"""The accelerator spec catalog: every number with its source, dense and sparse peaks kept apart.

The data lives in ``hardware/data/accelerators.toml`` (human units: TFLOPS, TB/s, MHz, GB); this module loads it into
frozen dataclasses in SI units (FLOP/s, B/s, Hz, bytes).

Rules the catalog keeps (tested over every entry in tests/hardware/test_catalog.py):
    - Efficiency denominators are *dense* peaks. A sparse value (2:4 structured sparsity) is stored beside its dense
      value and equals 2 x dense within vendor rounding (:data:`SPARSE_RATIO_TOLERANCE`, 1.5 %), unless the peak carries a ``sparse_ratio_note`` saying
      why the published sparse figure is not 2 x dense (Blackwell Ultra raised dense NVFP4 without a matching sparse rate).
    - A peak may list ``formats`` (e.g. ``["mxfp8"]``): it then governs only those formats and takes precedence over the
      plain peak of its rate for them (a separate instruction kind: block-scaled MXFP8 on GeForce, docs/method.md,
      'GeForce accumulate rates'). Such a peak may carry its own ``flop_per_clk_per_sm``.
    - For every NVIDIA entry, FLOP/clk/SM (per architecture, from ``[architectures]``) x SM count x the peak's clock basis
      (:meth:`Accelerator.clock_basis_hz`) reproduces the dense peak within 2 %, unless the peak carries a ``why_not`` note saying why it cannot.
    - Values we derived rather than found published carry ``derived = true``; values from a single third-party report
      or conflicting sources carry ``unverified = true``.

Sources: the ``[sources]`` table of the data file (``truepeak specs --sources``); method: docs/method.md.
"""

from __future__ import annotations

import functools
import sys
from dataclasses import dataclass, field
from importlib import resources
from typing import Any

from truepeak.errors import UnknownNameError, UnsupportedError
from truepeak.formats import RATES, Format, check_accumulate, default_accumulate, get_format
from truepeak.units import to_si

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

TERA = 1e12
MEGA = 1e6

#: Vendor rounding between a published 2:4-sparse peak and 2 x its dense peak (L40S 733 / 362 = 2.025, MI355X
#: 10100 / 5000 = 2.02): within it, sparse "is" 2 x dense; beyond it the peak needs a ``sparse_ratio_note``.
SPARSE_RATIO_TOLERANCE = 0.015

#: The architectures with hardware MX / NV block scaling, in words (``block_scaled = true`` in the data file).
BLOCK_SCALED_ARCHS = "sm_100, sm_120, CDNA4"


def sparse_is_twice_dense(dense: float, sparse: float) -> bool:
    """Whether a sparse peak is 2 x the dense one within :data:`SPARSE_RATIO_TOLERANCE` (both in FLOP/s)."""
    return abs(sparse / (2 * dense) - 1) <= SPARSE_RATIO_TOLERANCE


@dataclass(frozen=True)
class Sourced:
    """A catalog value with its provenance.

    Attributes:
        value: the number (SI units once loaded) or text.
        source: where it comes from (a key of the ``[sources]`` table and/or a locator).
        derived: True if we computed it rather than found it published.
        note: caveats in words.
        unverified: True if it rests on a single third-party report or on conflicting sources.
    """

    value: Any
    source: str
    derived: bool = False
    note: str = ""
    unverified: bool = False


@dataclass(frozen=True)
class Peak:
    """One peak rate of an accelerator.

    Attributes:
        rate: catalog rate key (fp32, tf32, bf16, fp16, fp8, fp6, fp4, int8); see ``Format.rate``.
        accumulate: accumulator precision this rate applies to (``"fp32"``, ``"fp16"``, ``"int32"``).
        dense: dense peak in FLOP/s (ops/s for int8). The efficiency denominator.
        sparse: the 2:4-sparse peak in FLOP/s if the vendor lists one, else None. Display only.
        source: provenance of the values.
        derived: True if the dense value was computed (for example sparse / 2, or from an implied clock).
        clock_hz: clock basis of this peak if it differs from the accelerator's spec boost clock, else None.
        why_not: why FLOP/clk/SM x SMs x clock cannot reproduce this peak (empty if it can).
        note: other caveats.
        formats: format names this peak alone governs (e.g. ``("mxfp8",)``); empty: every format of ``rate`` that no
            format-specific peak claims.
        flop_per_clk_per_sm: this peak's own dense FLOP/clk/SM when it differs from the architecture's rate for
            ``rate@accumulate`` (a different instruction kind), else None.
        unverified: True if the dense value rests on a single third-party report or on conflicting sources.
        sparse_ratio_note: why the published sparse value is not 2 x dense (empty where it is).
    """

    rate: str
    accumulate: str
    dense: float
    sparse: float | None
    source: str
    derived: bool = False
    clock_hz: float | None = None
    why_not: str = ""
    note: str = ""
    formats: tuple[str, ...] = ()
    flop_per_clk_per_sm: int | None = None
    unverified: bool = False
    sparse_ratio_note: str = ""

    @property
    def label(self) -> str:
        """``"fp8"``, ``"fp16 (fp16 accumulate)"``, ``"fp8 (mxfp8)"``: the rate, its formats and a non-default accumulator."""
        parts = list(self.formats)
        if self.accumulate != default_accumulate(self.rate):
            parts.append(f"{self.accumulate} accumulate")
        return self.rate + (f" ({', '.join(parts)})" if parts else "")

    @property
    def implied_sparse(self) -> float | None:
        """The 2:4-sparse rate in FLOP/s: the published one, else 2 x dense (structured sparsity doubles the tensor-core
        rate); None for fp32, which runs on the CUDA cores and has no sparse mode. Display and claim checks only."""
        if self.sparse is not None:
            return self.sparse
        return None if self.rate == "fp32" else 2 * self.dense


@dataclass(frozen=True)
class Architecture:
    """Per-SM (per-CU on AMD) dense FLOP per clock, keyed ``rate`` or ``rate@accumulate`` (e.g. ``fp16@fp16``).

    ``note`` holds caveats (which instruction kind reaches a rate, or why an architecture has no rates yet).
    ``block_scaled``: the tensor cores apply MX / NV block scales in hardware (sm_100, sm_103, sm_120, CDNA4), so
    block-scaled formats (mxfp8, mxfp6, mxfp4, nvfp4) run there; elsewhere they have no peak.
    """

    key: str
    name: str
    flop_per_clk_per_sm: dict[str, int]
    source: str
    note: str = ""
    block_scaled: bool = False

    def rate_per_clk(self, rate: str, accumulate: str | None = None) -> int | None:
        """FLOP/clk/SM for a rate and accumulator (None: the rate's default), or None if the architecture has no such
        path."""
        if accumulate and accumulate != default_accumulate(rate):
            return self.flop_per_clk_per_sm.get(f"{rate}@{accumulate}")
        return self.flop_per_clk_per_sm.get(rate)


@dataclass(frozen=True)
class Accelerator:
    """One SKU. Numbers are in SI units; each is a :class:`Sourced` with its provenance.

    Attributes:
        key: stable short id (``"h200-sxm"``).
        name: marketing name.
        vendor: ``"nvidia"`` or ``"amd"``.
        architecture: key into the ``[architectures]`` table (FLOP/clk/SM).
        compute_capability: ``"9.0"`` for NVIDIA parts, None for AMD.
        device_names: exact strings that ``torch.cuda.get_device_name()`` / NVML report for this SKU.
        aliases: other names users type (``"h200"``).
        peaks: every (rate, accumulate) peak.
        memory_bytes, memory_bandwidth (B/s), sm_count (SMs or CUs), boost_clock_hz (the clock basis of the spec
        peaks), max_clock_hz, l2_bytes, smem_per_block_bytes (opt-in maximum per block), tdp_w, interconnect:
        each a :class:`Sourced` or None where no public source gives it.
        infinity_cache_bytes: AMD's Infinity Cache (MALL), a memory-side cache behind the L2, or None (NVIDIA parts
            have none). :attr:`cache_bytes` adds it to the L2.
        memory_type: e.g. ``"HBM3e"``.
        headline: the figure the vendor prints most prominently, and what it is.
        notes: caveats in words.
        sparse_headlines: published headline figures that are 2:4-sparse (e.g. ``"1979 TFLOPS BF16"``), in the claim
            syntax of :func:`truepeak.hardware.claims.check_claim`; tests check that no dense value equals one
            (tests/hardware/test_catalog.py).
    """

    key: str
    name: str
    vendor: str
    architecture: Architecture
    compute_capability: str | None
    device_names: tuple[str, ...]
    aliases: tuple[str, ...]
    peaks: tuple[Peak, ...]
    memory_bytes: Sourced | None
    memory_bandwidth: Sourced | None
    sm_count: Sourced | None
    boost_clock_hz: Sourced | None
    max_clock_hz: Sourced | None
    l2_bytes: Sourced | None
    smem_per_block_bytes: Sourced | None
    tdp_w: Sourced | None
    interconnect: Sourced | None
    memory_type: str = ""
    headline: str = ""
    notes: tuple[str, ...] = field(default=())
    sparse_headlines: tuple[str, ...] = field(default=())
    infinity_cache_bytes: Sourced | None = None

    @property
    def cache_bytes(self) -> int | None:
        """Bytes of on-chip cache that can hold operands between kernel launches: the L2 plus an Infinity Cache where
        there is one; None when the L2 size is unknown. What a working set must exceed to have to come from memory
        (:func:`truepeak.roofline.check_memory_plausible`)."""
        if self.l2_bytes is None or not self.l2_bytes.value:
            return None
        extra = self.infinity_cache_bytes.value if self.infinity_cache_bytes is not None else 0
        return int(self.l2_bytes.value) + int(extra or 0)

    def peak(self, fmt: str | Format, accumulate: str | None = None) -> Peak:
        """The catalog peak that governs ``fmt`` with the given accumulator.

        A peak listing ``fmt`` in its ``formats`` comes first (e.g. the RTX 5090's block-scaled mxfp8 peak); otherwise the
        plain peak (no ``formats``) of ``fmt.rate``. A format-specific peak never governs other formats.

        Args:
            fmt: a format name or :class:`~truepeak.formats.Format`.
            accumulate: ``None`` for the format's default (fp32 for floats, int32 for int8), or ``"fp16"`` for the
                GeForce fp16-accumulate rates.

        Raises:
            UnknownNameError: unknown format.
            UnknownNameError: an accumulator other than fp32, fp16, int32.
            UnsupportedError: this accelerator has no published rate for that format/accumulator; the message lists
                the accumulators it has for that rate and every (rate, accumulator) pair it has. A block-scaled format
                (mxfp8, nvfp4, ...) on an architecture without hardware block scaling (``Architecture.block_scaled``).
        """
        f = get_format(fmt)
        acc = check_accumulate(accumulate) or f.accumulate
        if f.is_block_scaled and not self.architecture.block_scaled:
            raise UnsupportedError(
                f"{f.name} needs hardware block scaling ({BLOCK_SCALED_ARCHS}); {self.name} "
                f"({self.architecture.key}) has none")
        for p in self.peaks:
            if f.name in p.formats and p.rate == f.rate and p.accumulate == acc:
                return p
        for p in self.peaks:
            if not p.formats and p.rate == f.rate and p.accumulate == acc:
                return p
        raise UnsupportedError(f"{self.name} has no published {f.rate} peak with {acc} accumulate "
                               f"(needed for {f.name}); {self._peaks_we_have(f)}")

    def _peaks_we_have(self, f: Format) -> str:
        """What :meth:`peak` says it has instead: the accumulators of ``f.rate``, then every (rate, accumulator)
        pair, e.g. ``"bf16 is published with fp32 accumulate only; (rate/accumulator) pairs it has: fp32/fp32,
        ..."``."""
        accs = list(dict.fromkeys(p.accumulate for p in self.peaks
                                  if p.rate == f.rate and (not p.formats or f.name in p.formats)))
        head = (f"{f.rate} is published with {' and '.join(accs)} accumulate only" if accs
                else f"it has no {f.rate} peak at all")
        pairs = ", ".join(p.rate + (f" ({', '.join(p.formats)})" if p.formats else "") + f"/{p.accumulate}"
                          for p in self.peaks)
        return f"{head}; (rate/accumulator) pairs it has: {pairs or 'none'}"

    def has_rate(self, fmt: str | Format, accumulate: str | None = None) -> bool:
        """True if :meth:`peak` would succeed."""
        try:
            self.peak(fmt, accumulate)
            return True
        except UnsupportedError:
            return False

    def dense_flops(self, fmt: str | Format, accumulate: str | None = None) -> float:
        """Dense peak in FLOP/s for ``fmt`` (the efficiency denominator). Raises like :meth:`peak`."""
        return self.peak(fmt, accumulate).dense

    def peak_flop_per_clk(self, p: Peak) -> int | None:
        """Dense FLOP/clk/SM behind one of this accelerator's peaks: its own, else the architecture's, else None."""
        if p.flop_per_clk_per_sm is not None:
            return p.flop_per_clk_per_sm
        return self.architecture.rate_per_clk(p.rate, p.accumulate)

    def flop_per_clk_per_sm(self, fmt: str | Format, accumulate: str | None = None) -> int | None:
        """Dense FLOP per clock per SM for ``fmt``: that of the peak governing it (which may be a format-specific
        instruction kind), else the architecture's rate for its ``rate@accumulate``; None if unknown."""
        f = get_format(fmt)
        acc = accumulate or f.accumulate
        try:
            return self.peak_flop_per_clk(self.peak(f, acc))
        except UnsupportedError:
            return self.architecture.rate_per_clk(f.rate, acc)

    def clock_basis_hz(self, p: Peak) -> float | None:
        """The clock (Hz) one of this accelerator's peaks is quoted at: the peak's own ``clock_hz`` (e.g. the maximum
        clock for non-tensor fp32), else the spec boost clock; None if neither is known."""
        if p.clock_hz is not None:
            return p.clock_hz
        boost = self.boost_clock_hz
        return float(boost.value) if boost is not None and boost.value else None

    @property
    def bandwidth_bytes_per_s(self) -> float | None:
        """Memory bandwidth in B/s (spec, or measured for a CPU), or None where there is none (no roofline then)."""
        if self.memory_bandwidth is None or not self.memory_bandwidth.value:
            return None
        return float(self.memory_bandwidth.value)

    def peak_at_clock(self, fmt: str | Format, clock_hz: float, sm_count: int | None = None,
                      accumulate: str | None = None) -> float | None:
        """Dense peak at a given (measured) SM clock: FLOP/clk/SM x SMs x clock, in FLOP/s.

        ``sm_count`` defaults to the catalog's (pass the device-reported count when measuring). Returns None when the
        per-SM rate or the SM count is unknown. Source: docs/method.md, 'Peak at the measured clock'.
        """
        per_clk = self.flop_per_clk_per_sm(fmt, accumulate)
        sms = sm_count if sm_count is not None else (self.sm_count.value if self.sm_count else None)
        if per_clk is None or sms is None:
            return None
        return float(per_clk) * sms * clock_hz

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict in SI units (FLOP/s, B/s, Hz, bytes, W); see :func:`accelerator_to_dict`."""
        return accelerator_to_dict(self)


def _sourced_dict(s: Sourced | None) -> dict[str, Any] | None:
    if s is None:
        return None
    return {"value": s.value, "source": s.source, "derived": s.derived, "note": s.note, "unverified": s.unverified}


def accelerator_to_dict(acc: Accelerator) -> dict[str, Any]:
    """One accelerator as a JSON-ready dict. Units are SI: FLOP/s (ops/s for int8), B/s, Hz, bytes, W.

    Keys: ``key``, ``name``, ``vendor``, ``architecture`` (key), ``compute_capability``, ``device_names``, ``aliases``,
    ``memory_type``, ``headline``, ``sparse_headlines``, ``notes``; ``memory_bytes``, ``memory_bandwidth_bytes_per_s``,
    ``sm_count``, ``boost_clock_hz``, ``max_clock_hz``, ``l2_bytes``, ``infinity_cache_bytes`` (AMD only),
    ``smem_per_block_bytes``, ``tdp_w``,
    ``interconnect``: each ``{value, source, derived, note, unverified}`` or null; ``peaks``: a list of ``{rate,
    formats, accumulate, dense_flops, sparse_flops, flop_per_clk_per_sm, clock_hz, source, derived, unverified,
    why_not, note, sparse_ratio_note}`` where ``clock_hz`` is the clock basis of that peak (the peak's own clock, else
    the boost clock; :meth:`Accelerator.clock_basis_hz`) and ``formats`` lists the formats a format-specific peak alone
    governs (empty: all of its rate).
    """
    return {
        "key": acc.key,
        "name": acc.name,
        "vendor": acc.vendor,
        "architecture": acc.architecture.key,
        "compute_capability": acc.compute_capability,
        "device_names": list(acc.device_names),
        "aliases": list(acc.aliases),
        "memory_type": acc.memory_type,
        "headline": acc.headline,
        "sparse_headlines": list(acc.sparse_headlines),
        "notes": list(acc.notes),
        "memory_bytes": _sourced_dict(acc.memory_bytes),
        "memory_bandwidth_bytes_per_s": _sourced_dict(acc.memory_bandwidth),
        "sm_count": _sourced_dict(acc.sm_count),
        "boost_clock_hz": _sourced_dict(acc.boost_clock_hz),
        "max_clock_hz": _sourced_dict(acc.max_clock_hz),
        "l2_bytes": _sourced_dict(acc.l2_bytes),
        "infinity_cache_bytes": _sourced_dict(acc.infinity_cache_bytes),
        "smem_per_block_bytes": _sourced_dict(acc.smem_per_block_bytes),
        "tdp_w": _sourced_dict(acc.tdp_w),
        "interconnect": _sourced_dict(acc.interconnect),
        "peaks": [
            {
                "rate": p.rate,
                "formats": list(p.formats),
                "accumulate": p.accumulate,
                "dense_flops": p.dense,
                "sparse_flops": p.sparse,
                "flop_per_clk_per_sm": acc.peak_flop_per_clk(p),
                "clock_hz": acc.clock_basis_hz(p),
                "source": p.source,
                "derived": p.derived,
                "unverified": p.unverified,
                "why_not": p.why_not,
                "note": p.note,
                "sparse_ratio_note": p.sparse_ratio_note,
            }
            for p in acc.peaks
        ],
    }


# ----------------------------------------------------------------------------------------------------------------------
# Loading

_SCALE = {  # data-file key -> (attribute, factor to SI)
    "memory_gb": ("memory_bytes", 1e9),
    "memory_bandwidth_tbps": ("memory_bandwidth", TERA),
    "sm_count": ("sm_count", 1),
    "boost_clock_mhz": ("boost_clock_hz", MEGA),
    "max_clock_mhz": ("max_clock_hz", MEGA),
    "l2_bytes": ("l2_bytes", 1),
    "infinity_cache_bytes": ("infinity_cache_bytes", 1),
    "smem_per_block_bytes": ("smem_per_block_bytes", 1),
    "tdp_w": ("tdp_w", 1),
    "interconnect": ("interconnect", None),
}


def _field(raw: Any, name: str, where: str) -> Any:
    """``raw[name]``; ValueError naming the entry and the field when ``raw`` is no table or lacks it."""
    if not isinstance(raw, dict):
        raise ValueError(f"catalog: {where} must be a table, got {raw!r}")
    if name not in raw:
        raise ValueError(f"catalog: {where}: missing field {name!r}")
    return raw[name]


def _sourced(raw: Any, factor: float | None, where: str) -> Sourced:
    if not isinstance(raw, dict) or "value" not in raw or "source" not in raw:
        raise ValueError(f"catalog: {where} must be a table with 'value' and 'source', got {raw!r}")
    value = raw["value"] if factor is None else to_si(raw["value"], factor)
    return Sourced(value, raw["source"], bool(raw.get("derived", False)), raw.get("note", ""),
                   bool(raw.get("unverified", False)))


def _peak(raw: Any, where: str) -> Peak:
    rate = _field(raw, "rate", where)
    if rate not in RATES:
        raise ValueError(f"catalog: {where}: unknown rate {rate!r}; known: {RATES}")
    where = f"{where} ({rate})"
    dense = _field(raw, "dense_tflops", where)
    source = _field(raw, "source", where)
    sparse = raw.get("sparse_tflops")
    clock = raw.get("clock_mhz")
    formats = tuple(raw.get("formats", ()))
    for name in formats:
        try:
            f = get_format(name)
        except UnknownNameError:
            raise ValueError(f"catalog: {where}: unknown format {name!r} in formats") from None
        if f.name != name or f.rate != rate:
            raise ValueError(f"catalog: {where}: formats entry {name!r} must be a canonical format of rate {rate!r}")
    per_clk = raw.get("flop_per_clk_per_sm")
    return Peak(
        rate=rate,
        accumulate=raw.get("accumulate", default_accumulate(rate)),
        dense=to_si(dense, TERA),
        sparse=None if sparse is None else to_si(sparse, TERA),
        source=source,
        derived=bool(raw.get("derived", False)),
        clock_hz=None if clock is None else to_si(clock, MEGA),
        why_not=raw.get("why_not", ""),
        note=raw.get("note", ""),
        formats=formats,
        flop_per_clk_per_sm=None if per_clk is None else int(per_clk),
        unverified=bool(raw.get("unverified", False)),
        sparse_ratio_note=raw.get("sparse_ratio_note", ""),
    )


def _architecture(key: str, raw: Any) -> Architecture:
    where = f"architectures.{key}"
    return Architecture(key, _field(raw, "name", where), dict(_field(raw, "flop_per_clk_per_sm", where)),
                        _field(raw, "source", where), raw.get("note", ""), bool(raw.get("block_scaled", False)))


def _accelerator(raw: Any, archs: dict[str, Architecture], index: int) -> Accelerator:
    where = f"accelerators[{index}]"
    key = _field(raw, "key", where)
    where = f"accelerator {key!r}"
    arch = _field(raw, "architecture", where)
    if arch not in archs:
        raise ValueError(f"catalog: {where}: unknown architecture {arch!r}")
    kw = {attr: _sourced(raw[name], factor, f"{where}.{name}") if name in raw else None
          for name, (attr, factor) in _SCALE.items()}
    return Accelerator(
        key=key,
        name=_field(raw, "name", where),
        vendor=_field(raw, "vendor", where),
        architecture=archs[arch],
        compute_capability=raw.get("compute_capability"),
        device_names=tuple(raw.get("device_names", ())),
        aliases=tuple(raw.get("aliases", ())),
        peaks=tuple(_peak(p, f"{where}.peaks[{i}]") for i, p in enumerate(raw.get("peaks", ()))),
        memory_type=raw.get("memory_type", ""),
        headline=raw.get("headline", ""),
        notes=tuple(raw.get("notes", ())),
        sparse_headlines=tuple(raw.get("sparse_headlines", ())),
        **kw,
    )


@functools.lru_cache(maxsize=1)
def load_catalog() -> Catalog:
    """Load and validate the packaged catalog (cached). Raises ValueError on a malformed data file."""
    text = resources.files("truepeak.hardware").joinpath("data/accelerators.toml").read_text(encoding="utf-8")
    return Catalog.from_toml(text)


@dataclass(frozen=True)
class Catalog:
    """All accelerators, architectures and source keys of the data file."""

    accelerators: tuple[Accelerator, ...]
    architectures: dict[str, Architecture]
    sources: dict[str, str]
    schema_version: int

    @classmethod
    def from_toml(cls, text: str) -> Catalog:
        """Build a catalog from the text of an ``accelerators.toml`` (human units: TFLOPS, TB/s, MHz, GB), converting
        every number to SI units (FLOP/s, B/s, Hz, bytes).

        Args:
            text: TOML with ``schema_version``, ``[architectures.<key>]`` tables (``name``, ``flop_per_clk_per_sm``,
                ``source``), ``[[accelerators]]`` entries (``key``, ``name``, ``vendor``, ``architecture`` and
                sourced ``{value, source}`` tables; ``peaks`` with ``rate``, ``dense_tflops``, ``source``) and an
                optional ``[sources]`` table.

        Raises:
            ValueError: malformed TOML (``tomllib.TOMLDecodeError`` is one), a missing field (the message names the
                entry and the field), an unknown rate, architecture or format, or duplicate keys.
        """
        data = tomllib.loads(text)
        archs = {key: _architecture(key, a) for key, a in _field(data, "architectures", "the file").items()}
        accs = [_accelerator(raw, archs, i) for i, raw in enumerate(_field(data, "accelerators", "the file"))]
        keys = [a.key for a in accs]
        dupes = {k for k in keys if keys.count(k) > 1}
        if dupes:
            raise ValueError(f"catalog: duplicate keys {sorted(dupes)}")
        return cls(tuple(accs), archs, dict(data.get("sources", {})), int(_field(data, "schema_version", "the file")))

    def by_key(self, key: str) -> Accelerator:
        """Exact lookup by catalog key. For any user- or device-reported name use :func:`truepeak.hardware.get_accelerator`."""
        for a in self.accelerators:
            if a.key == key:
                return a
        raise UnknownNameError(f"no catalog entry with key {key!r}")
