"""Headline-claim checking: is "4 PFLOPS FP4" a dense or a 2:4-sparse figure, and which dense peak should you use?

Datasheets since Hopper print tensor rates *with* 2:4 structured sparsity; GeForce and RTX PRO "AI TOPS" are sparse FP4
by definition; HGX / DGX / NVL72 pages print platform totals (accelerators.md sections 1, 4 and 8). A claim is compared
with the catalog's dense and sparse values of the named format. Marketing figures are rounded ("4 PFLOPS" for 4030.4,
"3.7 PFLOPS" for 3742.4), so a claim matches a value within +-5 % (:data:`TOLERANCE`).

Accepted forms (case-insensitive): ``<number> <unit> [format]`` or ``[format] <number> <unit>``, e.g.
``"4 PFLOPS FP4"``, ``"3.7 PFLOPS FP4"``, ``"4000 AI TOPS"``, ``"1979 TFLOPS FP8"``, ``"989 TFLOPS bf16"``,
``"1.979 PFLOPS"``, ``"330.3 TFLOPS fp16 with fp16 accumulate"``. Units: GFLOPS, TFLOPS, PFLOPS, EFLOPS (also
``TFLOP/s``, ``TF``, ``PF``), GOPS, TOPS, POPS and ``AI TOPS``. Formats: a catalog rate (fp32, tf32, bf16, fp16, fp8,
fp6, fp4, int8), ``fp16/bf16``, or any :func:`truepeak.formats.get_format` name (``nvfp4`` -> fp4, ``e4m3`` -> fp8).
Without a format every rate of the accelerator is tried (``TOPS`` alone means int8; ``AI TOPS`` means sparse FP4).
Numbers may use thousands separators and exponents (``1,979``, ``4e3``); zero and negative figures are rejected.

A claim that matches no per-GPU peak but is 8 or 72 x a dense or sparse peak (:data:`PLATFORM_GPUS`) is read as an
HGX / DGX (8 GPUs) or NVL72 (72 GPUs) platform total: divide by the GPU count, then by 2 if sparse (accelerators.md
section 1, trap 2).
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass, field

from truepeak.errors import TruepeakError, UnknownNameError
from truepeak.formats import RATES, get_format
from truepeak.hardware.catalog import Accelerator, Peak

#: Relative tolerance for a claim to match a catalog value (marketing rounding: "4 PFLOPS" for 4030.4 is -0.8 %,
#: "3.7 PFLOPS" for 2 x 1871.2 is -1.1 %). Dense and sparse differ by 2x, so they can never both match.
TOLERANCE = 0.05

#: GPU counts of the platforms whose pages print totals: HGX / DGX boards (8) and NVL72 racks (72).
PLATFORM_GPUS = (8, 72)

ACCEPTED_FORMS = (
    "'4 PFLOPS FP4', '4000 AI TOPS', '1979 TFLOPS FP8', '989 TFLOPS bf16', '1.979 PFLOPS' "
    "(units: GFLOPS, TFLOPS, PFLOPS, TOPS, POPS, AI TOPS; formats: fp32, tf32, bf16, fp16, fp8, fp6, fp4, int8 "
    "or a format name such as nvfp4)"
)

_SCALE = {"g": 1e9, "t": 1e12, "p": 1e15, "e": 1e18}
_NUMBER = r"(?P<sign>[-+\u2212]\s*)?(?P<num>(?:\d{1,3}(?:,\d{3})+(?:\.\d+)?|\d+(?:\.\d+)?|\.\d+)(?:e[-+]?\d+)?)"
_UNIT = (
    r"(?P<unit>ai[\s_-]*tops"
    r"|(?P<fp>[gtpe])(?:flop(?:/s|s)?|flops)"
    r"|(?P<op>[gtp])ops"
    r"|(?P<word>tera|peta)[\s-]*(?:flops|ops)"
    r"|(?P<short>[tp])f)"
)
_CLAIM = re.compile(_NUMBER + r"\s*" + _UNIT + r"(?![a-z0-9])")
_ACCUMULATE = re.compile(
    r"(?:with\s+)?(?P<acc>fp16|fp32|f16|f32|half|float)[\s_-]*(?:accumulate|accumulation|accum|acc)\b")
_FILLER = frozenset({
    "dense", "sparse", "sparsity", "with", "w", "o", "without", "non", "structured", "tensor", "core", "cores", "peak",
    "of", "at", "up", "to", "about", "approx", "approximately", "theoretical", "per", "gpu", "is", "the", "a",
})
_SPARSE_WORDS = re.compile(r"\b(?:with\s+sparsity|sparse|w/\s*sparsity)\b")
_DENSE_WORDS = re.compile(r"\b(?:dense|non[\s-]*sparse|without\s+sparsity|w/o\s+sparsity)\b")


@dataclass(frozen=True)
class ParsedClaim:
    """A claim read from text. ``value`` in FLOP/s (ops/s for int8); ``rate`` None when no format was named."""

    text: str
    value: float
    rate: str | None
    accumulate: str | None
    ai_tops: bool
    ops: bool  # the unit was *OPS (integer operations)
    stated: str | None  # "dense" or "sparse" if the text says so
    format: str | None = None  # the canonical format name when the claim named one (mxfp8), not only a rate (fp8)


@dataclass(frozen=True)
class ClaimVerdict:
    """What a headline figure is, for one accelerator.

    Attributes:
        text: the claim as given.
        accelerator: marketing name of the accelerator it was checked against.
        claimed: the claimed rate in FLOP/s (ops/s for int8).
        rate: the number format (catalog rate key: fp4, bf16, ...), or None if it could not be told.
        accumulate: the accumulator of the matched peak (fp32, fp16, int32), or None.
        kind: ``"dense"`` (matches the dense peak), ``"sparse"`` (matches the 2:4-sparse peak), ``"neither"`` or
            ``"ambiguous"`` (no format given and several readings fit; ``alternatives`` lists them).
        gpus: 1 for a per-GPU figure; 8 or 72 when the claim is that many GPUs' total (an HGX / NVL72 platform page);
            ``matched`` is then the platform total.
        unverified: the matched peak's dense value is marked unverified in the catalog (``explanation`` says why).
        formats: the formats a format-specific matched peak alone governs (e.g. ``("mxfp8",)``), else empty.
        dense: the dense peak to use for efficiency, FLOP/s (None if ``rate`` is unknown or absent on this GPU).
        sparse: the sparse peak, FLOP/s: the published one, or 2 x dense when ``sparse_published`` is False.
        matched: the catalog value the claim matched, FLOP/s (None for neither / ambiguous).
        deviation: claimed / matched - 1 (for neither: claimed / dense - 1).
        sparse_published: whether the catalog holds a published sparse value for this peak.
        derived: whether the dense value is derived rather than published.
        ai_tops: the claim was in "AI TOPS" (sparse FP4 by definition).
        tolerance: the relative tolerance used (:data:`TOLERANCE`).
        explanation: one or two sentences saying what the figure is and which number to use.
        alternatives: for ambiguous claims, each reading in words.
    """

    text: str
    accelerator: str
    claimed: float
    rate: str | None
    accumulate: str | None
    kind: str
    dense: float | None
    sparse: float | None
    matched: float | None
    deviation: float | None
    sparse_published: bool
    derived: bool
    ai_tops: bool
    tolerance: float
    explanation: str
    alternatives: tuple[str, ...] = field(default=())
    gpus: int = 1
    unverified: bool = False
    formats: tuple[str, ...] = ()

    @property
    def format(self) -> str | None:
        """Alias of :attr:`rate`."""
        return self.rate

    @property
    def is_sparse(self) -> bool:
        return self.kind == "sparse"

    @property
    def is_dense(self) -> bool:
        return self.kind == "dense"

    def to_dict(self) -> dict:
        """JSON-ready dict; rates in FLOP/s (SI), ``deviation`` and ``tolerance`` as fractions."""
        d = asdict(self)
        d["alternatives"] = list(self.alternatives)
        d["formats"] = list(self.formats)
        return d


def parse_claim(text: str) -> ParsedClaim:
    """Read a claim such as ``"4 PFLOPS FP4"`` (forms: module docstring).

    Raises:
        TruepeakError: the text has no ``<number> <unit>``, or words that are neither a format nor filler; the message
            names the text and shows the accepted forms.
    """
    raw = str(text)
    s = raw.strip().lower()
    m = _CLAIM.search(s)
    if not m:
        raise TruepeakError(f"cannot read the claim {raw!r}: expected a number and a unit, e.g. {ACCEPTED_FORMS}")
    value = float(m.group("num").replace(",", ""))
    if (m.group("sign") or "").strip() in ("-", "\u2212") or value <= 0:
        raise TruepeakError(f"cannot read the claim {raw!r}: a peak figure must be positive, e.g. {ACCEPTED_FORMS}")
    unit = m.group("unit")
    ai_tops = unit.startswith("ai")
    if ai_tops:
        scale, ops = 1e12, True
    elif m.group("fp"):
        scale, ops = _SCALE[m.group("fp")], False
    elif m.group("op"):
        scale, ops = _SCALE[m.group("op")], True
    elif m.group("word"):
        scale, ops = (1e12 if m.group("word") == "tera" else 1e15), not unit.endswith("flops")
    else:
        scale, ops = _SCALE[m.group("short")], False
    rest = s[: m.start()] + " " + s[m.end():]
    if _CLAIM.search(rest):
        raise TruepeakError(
            f"cannot read the claim {raw!r}: it holds more than one number with a unit; give one, e.g. {ACCEPTED_FORMS}")

    stated = "sparse" if _SPARSE_WORDS.search(rest) and not _DENSE_WORDS.search(rest) else None
    if _DENSE_WORDS.search(rest):
        stated = "dense"

    accumulate = None
    am = _ACCUMULATE.search(rest)
    if am:
        accumulate = "fp16" if am.group("acc") in ("fp16", "f16", "half") else "fp32"
        rest = rest[: am.start()] + " " + rest[am.end():]
    rest = rest.replace("2:4", " ").replace("fp16/bf16", "bf16").replace("bf16/fp16", "bf16")

    rates: list[str] = []
    formats: list[str] = []
    for word in re.split(r"[^a-z0-9_.]+", rest):
        if not word or word in _FILLER:
            continue
        if word in RATES:
            rates.append(word)
            continue
        try:
            f = get_format(word)
        except UnknownNameError:
            raise TruepeakError(
                f"cannot read the claim {raw!r}: {word!r} is not a number format; write e.g. {ACCEPTED_FORMS}"
            ) from None
        rates.append(f.rate)
        formats.append(f.name)
    if len(set(rates)) > 1:
        raise TruepeakError(f"cannot read the claim {raw!r}: it names several formats ({', '.join(rates)}); give one")
    rate = rates[0] if rates else None
    if ai_tops and rate not in (None, "fp4"):
        raise TruepeakError(f"cannot read the claim {raw!r}: 'AI TOPS' is a sparse FP4 figure by definition, not {rate}")
    fmt = formats[0] if len(set(formats)) == 1 and len(formats) == len(rates) else None
    return ParsedClaim(raw, value * scale, rate, accumulate, ai_tops, ops, stated, fmt)


def _default_accumulate(rate: str) -> str:
    return "int32" if rate == "int8" else "fp32"


def _unit(rate: str | None) -> str:
    return "TOPS" if rate == "int8" else "TFLOPS"


def _t(x: float) -> str:
    """FLOP/s -> TFLOPS text with one decimal (decimal units: 1e12)."""
    return f"{x / 1e12:.1f}"


def _peak_label(p: Peak) -> str:
    return p.label


@dataclass(frozen=True)
class _Match:
    peak: Peak
    kind: str  # dense | sparse
    value: float  # per GPU
    published: bool
    gpus: int = 1

    @property
    def total(self) -> float:
        return self.gpus * self.value

    def words(self) -> str:
        if self.kind == "dense":
            what = "dense"
        else:
            what = "2:4-sparse" if self.published else "2:4-sparse (2 x dense, unpublished)"
        text = f"{what} {_peak_label(self.peak)} {_t(self.value)} {_unit(self.peak.rate)}"
        return text if self.gpus == 1 else f"{self.gpus} x the {text} ({_t(self.total)}, a {self.gpus}-GPU total)"


def _candidate_rates(acc: Accelerator, claim: ParsedClaim) -> list[str]:
    have = [r for r in RATES if any(p.rate == r for p in acc.peaks)]
    if claim.ai_tops:
        return ["fp4"] if "fp4" in have else [r for r in ("fp8", "int8") if r in have]
    if claim.rate is not None:
        return [claim.rate]
    if claim.ops:
        return ["int8"] if "int8" in have else have
    return [r for r in have if r != "int8"]


def _candidate_peaks(acc: Accelerator, claim: ParsedClaim, rates: list[str]) -> list[Peak]:
    """The peaks a claim is compared with: those governing its named format (a format-specific peak such as the RTX
    5090's mxfp8 one only when the claim names that format), else the plain peaks of the candidate rates."""
    if claim.format is not None:
        out: list[Peak] = []
        for accumulate in dict.fromkeys(p.accumulate for p in acc.peaks if p.rate == claim.rate):
            if acc.has_rate(claim.format, accumulate):
                p = acc.peak(claim.format, accumulate)
                if p not in out:
                    out.append(p)
        return out
    return [p for p in acc.peaks if p.rate in rates and not p.formats]


def _matches(acc: Accelerator, claim: ParsedClaim, rates: list[str], tolerance: float,
             gpus: tuple[int, ...] = (1,)) -> list[_Match]:
    out = []
    for p in _candidate_peaks(acc, claim, rates):
        if claim.accumulate and p.accumulate != claim.accumulate:
            continue
        refs = [("dense", p.dense, True)]
        if p.sparse is not None:
            refs.append(("sparse", p.sparse, True))
        elif p.rate != "fp32":  # fp32 runs on the CUDA cores: no sparse mode
            refs.append(("sparse", 2 * p.dense, False))
        for n in gpus:
            for kind, value, published in refs:
                if abs(claim.value / (n * value) - 1) <= tolerance:
                    out.append(_Match(p, kind, value, published, n))
    return out


def _caveat(p: Peak) -> str:
    """The UNVERIFIED caveat of a peak, from its note (empty for a verified peak)."""
    if not p.unverified:
        return ""
    note = p.note.strip()
    if note.lower().startswith("unverified"):
        note = note.split(":", 1)[1].strip() if ":" in note else ""
    return f" UNVERIFIED: the dense {p.label} value is not confirmed by a primary source" + (f" ({note})" if note else "") + "."


def check_claim(acc: Accelerator | str, text: str, tolerance: float = TOLERANCE) -> ClaimVerdict:
    """Check a headline figure against an accelerator's dense and sparse peaks.

    Args:
        acc: an :class:`Accelerator`, or any name :func:`truepeak.hardware.get_accelerator` accepts.
        text: the claim, e.g. ``"4 PFLOPS FP4"`` or ``"4000 AI TOPS"`` (forms: module docstring).
        tolerance: relative match tolerance, default +-5 % for marketing rounding.

    Returns:
        A :class:`ClaimVerdict`: ``kind`` is dense, sparse, neither or ambiguous; ``dense`` is the peak to use for
        efficiency (FLOP/s). Sparse values are 2:4 structured sparsity (accelerators.md section 1); "AI TOPS" is
        sparse FP4 (section 4).

    Raises:
        TruepeakError: unreadable claim (see :func:`parse_claim`); UnknownNameError for an unknown accelerator name.
    """
    if isinstance(acc, str):
        from truepeak.hardware.lookup import get_accelerator

        acc = get_accelerator(acc)
    claim = parse_claim(text)
    rates = _candidate_rates(acc, claim)
    found = _matches(acc, claim, rates, tolerance)
    if not found:  # not a per-GPU figure: an HGX / DGX / NVL72 platform total? (accelerators.md section 1)
        found = _matches(acc, claim, rates, tolerance, PLATFORM_GPUS)
    tol = f"+-{tolerance * 100:g} % allowed for marketing rounding"
    prefix = "'AI TOPS' is by definition the 2:4-sparse FP4 rate. " if claim.ai_tops else ""

    # Without an explicit accumulator, the format's default accumulator (fp32; int32 for int8) is the reading that
    # matters: bf16/fp16/fp8 GEMMs in PyTorch accumulate in fp32.
    default = [f for f in found if f.peak.accumulate == _default_accumulate(f.peak.rate)]
    chosen = default if (default and not claim.accumulate) else found
    others = [f for f in found if f not in chosen]

    def verdict(**kw) -> ClaimVerdict:
        base = dict(text=claim.text, accelerator=acc.name, claimed=claim.value, ai_tops=claim.ai_tops,
                    tolerance=tolerance, sparse_published=False, derived=False, accumulate=None, sparse=None,
                    matched=None, deviation=None, alternatives=())
        base.update(kw)
        return ClaimVerdict(**base)

    if not chosen:
        rate = claim.rate if claim.rate is not None else ("fp4" if claim.ai_tops and "fp4" in rates else None)
        peak = None
        if rate is not None:
            want = claim.accumulate or _default_accumulate(rate)
            if claim.format is not None and acc.has_rate(claim.format, want):
                peak = acc.peak(claim.format, want)
            else:
                peak = next((p for p in acc.peaks if p.rate == rate and p.accumulate == want and not p.formats), None)
        if peak is None:
            have = ", ".join(sorted({p.rate for p in acc.peaks}, key=RATES.index))
            if rate is not None:
                why = f"{acc.name} has no published {rate} peak"
                if claim.accumulate:
                    why += f" with {claim.accumulate} accumulate"
                why += f" (it has: {have})"
            else:
                why = f"it is not within {tol.split(' allowed')[0]} of any dense or sparse peak of {acc.name} ({have})"
            return verdict(rate=rate, kind="neither", dense=None, explanation=f"{prefix}{claim.text!r}: {why}.")
        sparse = peak.sparse if peak.sparse is not None else (2 * peak.dense if peak.rate != "fp32" else None)
        ratio = claim.value / peak.dense
        sp = f" nor the 2:4-sparse ({_t(sparse)})" if sparse else ""
        if sparse and abs(claim.value / sparse - 1) <= 3 * tolerance:
            hint = (f" It is {(claim.value / sparse - 1) * 100:+.1f} % from the sparse value: probably a loosely rounded "
                    f"sparse figure.")
        elif ratio > 1 + tolerance:
            hint = " It is above the dense peak, so it is no dense rate of this GPU (a platform total? another GPU?)."
        else:
            hint = ""
        expl = (f"{prefix}{claim.text!r} = {_t(claim.value)} {_unit(rate)} is neither the dense {_peak_label(peak)} "
                f"peak of {acc.name} ({_t(peak.dense)}){sp} within {tol.split(' allowed')[0]}: it is {ratio:.2f}x "
                f"dense.{hint} Use the dense {_t(peak.dense)} {_unit(rate)}.")
        return verdict(rate=rate, accumulate=peak.accumulate, kind="neither", dense=peak.dense, sparse=sparse,
                       deviation=ratio - 1, sparse_published=peak.sparse is not None, derived=peak.derived,
                       explanation=expl + _caveat(peak), unverified=peak.unverified, formats=peak.formats)

    kinds = {f.kind for f in chosen}
    denses = {round(f.peak.dense / 1e9) for f in chosen}
    if len(kinds) > 1 or len(denses) > 1:
        alts = tuple(f.words() for f in chosen)
        expl = (f"{prefix}{claim.text!r} fits several peaks of {acc.name}: " + "; ".join(alts)
                + ". Name the format (e.g. '... BF16') to decide.")
        return verdict(rate=None, kind="ambiguous", dense=None, explanation=expl, alternatives=alts)

    best = min(chosen, key=lambda f: abs(claim.value / f.total - 1))
    p = best.peak
    dev = claim.value / best.total - 1
    same = sorted({f.peak.rate for f in chosen} - {p.rate}, key=RATES.index)
    also = f" (same value for {', '.join(same)})" if same else ""
    other = f" It is also the {others[0].words()}." if others else ""
    sparse = p.sparse if p.sparse is not None else (2 * p.dense if p.rate != "fp32" else None)
    derived = " (derived)" if p.derived else ""
    unit = _unit(p.rate)
    if best.gpus > 1:
        per_gpu = f"divide by {best.gpus}" + (", then by 2 (2:4 sparsity)" if best.kind == "sparse" else "")
        what = "2:4-SPARSE" if best.kind == "sparse" else "DENSE"
        ratio = f"; the vendor's sparse rate is not 2 x dense here: {p.sparse_ratio_note}" if (
            best.kind == "sparse" and p.sparse_ratio_note) else ""
        expl = (f"{prefix}{claim.text!r} = {_t(claim.value)} {unit} is {'an' if best.gpus == 8 else 'a'} {best.gpus}-GPU "
                f"{'HGX / DGX' if best.gpus == 8 else 'NVL72'} {what} platform total: {best.gpus} x the "
                f"{'2:4-sparse' if best.kind == 'sparse' else 'dense'} {_peak_label(p)} peak of {acc.name} "
                f"({best.gpus} x {_t(best.value)} = {_t(best.total)}; {dev * 100:+.1f} %, {tol}){also}. Per GPU: "
                f"{per_gpu}{ratio}. Efficiency must use the per-GPU dense peak: {_t(p.dense)} {unit}{derived}.{other}")
    elif best.kind == "sparse":
        pub = "" if best.published else " -- 2 x dense; the vendor's sparse figure is not in the catalog"
        ratio = (f" The sparse rate is not 2 x dense here: {p.sparse_ratio_note}." if p.sparse_ratio_note else "")
        expl = (f"{prefix}{claim.text!r} = {_t(claim.value)} {unit} is the 2:4-SPARSE {_peak_label(p)} peak of "
                f"{acc.name} ({_t(best.value)}{pub}; {dev * 100:+.1f} %, {tol}){also}.{ratio} "
                f"Efficiency must use the dense peak: {_t(p.dense)} {unit}{derived}.{other}")
    else:
        expl = (f"{prefix}{claim.text!r} = {_t(claim.value)} {unit} is the DENSE {_peak_label(p)} peak of {acc.name} "
                f"({_t(best.value)}{derived}; {dev * 100:+.1f} %, {tol}){also}. Use it as the efficiency "
                f"denominator.{other}")
    if claim.stated and claim.stated != best.kind:
        expl += f" Note: the claim says {claim.stated}, but the number is the {best.kind} rate."
    expl += _caveat(p)
    return verdict(rate=p.rate, accumulate=p.accumulate, kind=best.kind, dense=p.dense, sparse=sparse,
                   matched=best.total, deviation=dev, sparse_published=p.sparse is not None, derived=p.derived,
                   explanation=expl, gpus=best.gpus, unverified=p.unverified, formats=p.formats)
