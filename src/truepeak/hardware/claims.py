"""Headline-claim checking: is "4 PFLOPS FP4" a dense or a 2:4-sparse figure, and which dense peak should you use?

Datasheets since Hopper print tensor rates *with* 2:4 structured sparsity; "AI TOPS" is the 2:4-sparse rate of the
lowest-precision tensor format the part has (FP4 on Blackwell, FP8 on Ada and Hopper); HGX / DGX / NVL72 pages print
platform totals (docs/method.md, 'Dense and sparse peaks'). A claim is compared
with the catalog's dense and sparse values of the named format. Marketing figures are rounded ("4 PFLOPS" for 4030.4,
"3.7 PFLOPS" for 3742.4), so a claim matches a value within ±5 % (:data:`TOLERANCE`).

Accepted forms (case-insensitive): ``<number> <unit> [format]`` or ``[format] <number> <unit>``, e.g.
``"4 PFLOPS FP4"``, ``"3.7 PFLOPS FP4"``, ``"4000 AI TOPS"``, ``"1979 TFLOPS FP8"``, ``"989 TFLOPS bf16"``,
``"1.979 PFLOPS"``, ``"330.3 TFLOPS fp16 with fp16 accumulate"``. Units: GFLOPS, TFLOPS, PFLOPS, EFLOPS (also
``TFLOP/s``, ``TF``, ``PF``), GOPS, TOPS, POPS and ``AI TOPS``. Formats: a catalog rate (fp32, tf32, bf16, fp16, fp8,
fp6, fp4, int8), ``fp16/bf16``, or any :func:`truepeak.formats.get_format` name (``nvfp4`` -> fp4, ``e4m3`` -> fp8).
Without a format every rate of the accelerator is tried (``TOPS`` alone means int8; ``AI TOPS`` the sparse rate of the
lowest-precision tensor format: fp4, else fp8).
Numbers may use thousands separators and exponents (``1,979``, ``4e3``); zero, negative and infinite figures are
rejected.

A claim that fits several readings is ``ambiguous`` and lists them all: readings of several formats (``"1979 TFLOPS"``
on an H200: sparse bf16 or dense fp8), and a sparse reading beside a dense one of another accumulator (``"330 TFLOPS
fp16"`` on an RTX 4090: sparse with fp32 accumulate, dense with fp16 accumulate). Naming the format or the accumulator
(``"... with fp16 accumulate"``) decides.

A claim that matches no per-GPU peak but is 8 or 72 x a dense or sparse peak (:data:`PLATFORM_GPUS`) is read as an
HGX / DGX (8 GPUs) or NVL72 (72 GPUs) platform total: divide by the GPU count, then by 2 if sparse (cosmos-framework
PR #114: HGX B300 bf16 "36 PFLOPS" / 8 / 2 = 2.25 PFLOPS dense per GPU).

A claim that matches none of these but is a vendor headline the catalog lists for the entry as 2:4-sparse
(``Accelerator.sparse_headlines``, e.g. the RTX PRO 6000 Server's "1 PFLOPS FP16/BF16" = 2 x 467.8 loosely rounded)
is reported as that sparse listing, not as "neither".
"""

from __future__ import annotations

import math
import re
from dataclasses import asdict, dataclass, field

from truepeak.errors import TruepeakError, UnknownNameError
from truepeak.formats import RATES, default_accumulate, get_format
from truepeak.hardware.catalog import Accelerator, Peak
from truepeak.units import fmt_rate, rate_unit

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

#: What "AI TOPS" is (NVIDIA's GeForce / RTX PRO / Jetson headline unit): the 2:4-sparse rate of the lowest-precision
#: tensor format the part has: FP4 on Blackwell, FP8 on Ada and Hopper (docs/method.md, 'Dense and sparse peaks').
AI_TOPS_RULE = ("'AI TOPS' is the 2:4-sparse rate of the lowest-precision tensor format a part has (FP4 on Blackwell, "
                "FP8 on Ada and Hopper)")
AI_TOPS_RATES = ("fp4", "fp8", "int8")

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
            ``"ambiguous"`` (several readings fit: several formats, or a sparse and a dense reading on different
            accumulators; ``alternatives`` lists them). An ambiguous claim whose readings share one rate keeps that
            ``rate`` and gives the dense peak of its default accumulator (fp32; what PyTorch GEMMs use) in ``dense``;
            across rates ``rate`` and ``dense`` are None.
        gpus: 1 for a per-GPU figure; 8 or 72 when the claim is that many GPUs' total (an HGX / NVL72 platform page);
            ``matched`` is then the platform total.
        unverified: the matched peak's dense value is marked unverified in the catalog (``explanation`` says why).
        formats: the formats a format-specific matched peak alone governs (e.g. ``("mxfp8",)``), else empty.
        dense: the dense peak to use for efficiency, FLOP/s (None if ``rate`` is unknown or absent on this GPU).
        sparse: the sparse peak, FLOP/s: the published one, or 2 x dense when ``sparse_published`` is False
            (:attr:`~truepeak.hardware.catalog.Peak.implied_sparse`).
        matched: the catalog value the claim matched, FLOP/s (None for neither / ambiguous).
        deviation: claimed / matched - 1 (for neither: claimed / dense - 1).
        sparse_published: whether the catalog holds a published sparse value for this peak.
        derived: whether the dense value is derived rather than published.
        ai_tops: the claim was in "AI TOPS" (the sparse rate of the lowest-precision tensor format: fp4, else fp8).
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
    if not math.isfinite(value * scale):
        figure = raw.strip()[m.start():m.end()]  # as typed (s is raw stripped and lower-cased: same positions)
        raise TruepeakError(f"cannot read the claim {raw!r}: {figure!r} is not a finite number; a peak figure is a "
                            f"finite positive number, e.g. {ACCEPTED_FORMS}")
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
    if ai_tops and rate not in (None, *AI_TOPS_RATES):
        raise TruepeakError(f"cannot read the claim {raw!r}: {AI_TOPS_RULE}, not {rate}")
    fmt = formats[0] if len(set(formats)) == 1 and len(formats) == len(rates) else None
    return ParsedClaim(raw, value * scale, rate, accumulate, ai_tops, ops, stated, fmt)


def _unit(rate: str | None) -> str:
    """TFLOPS, or TOPS for int8 (:func:`truepeak.units.rate_unit`); TFLOPS while the rate is unknown."""
    return rate_unit(rate) if rate else "TFLOPS"


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
        text = f"{what} {self.peak.label} {fmt_rate(self.value)} {_unit(self.peak.rate)}"
        return text if self.gpus == 1 else f"{self.gpus} x the {text} ({fmt_rate(self.total)}, a {self.gpus}-GPU total)"


def _candidate_rates(acc: Accelerator, claim: ParsedClaim) -> list[str]:
    have = [r for r in RATES if any(p.rate == r for p in acc.peaks)]
    if claim.rate is not None:
        return [claim.rate]
    if claim.ai_tops:  # the lowest-precision tensor format the part has (int8 only where it has no fp8 or fp4)
        lowest = _ai_tops_rate(acc)
        return [lowest] if lowest else []
    if claim.ops:
        return ["int8"] if "int8" in have else have
    return [r for r in have if r != "int8"]


def _ai_tops_rate(acc: Accelerator) -> str | None:
    """The rate "AI TOPS" means on ``acc``: its lowest-precision tensor format (fp4, else fp8, else int8), or None."""
    have = {p.rate for p in acc.peaks}
    return next((r for r in AI_TOPS_RATES if r in have), None)


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
        if p.implied_sparse is not None:
            refs.append(("sparse", p.implied_sparse, p.sparse is not None))
        for n in gpus:
            for kind, value, published in refs:
                if abs(claim.value / (n * value) - 1) <= tolerance:
                    out.append(_Match(p, kind, value, published, n))
    return out


def _caveat(p: Peak) -> str:
    """The UNVERIFIED caveat of a peak (empty for a verified peak): why, from its note when the note says it, else its
    source."""
    if not p.unverified:
        return ""
    note = p.note.strip()
    if note.lower().startswith("unverified"):
        why = note.split(":", 1)[1].strip() if ":" in note else ""
    else:
        why = f"source: {p.source}"
    return f" UNVERIFIED: the dense {p.label} value is not confirmed by a primary source" + (f" ({why})" if why else "") + "."


@dataclass(frozen=True)
class _Check:
    """One claim being checked against one accelerator: what every verdict and explanation needs."""

    acc: Accelerator
    claim: ParsedClaim
    tolerance: float

    @property
    def within(self) -> str:
        """The tolerance in words: ``"±5 %"`` (the one spelling, as ``truepeak specs --claim`` prints it)."""
        return f"±{self.tolerance * 100:g} %"

    @property
    def allowed(self) -> str:
        """``"±5 % allowed for marketing rounding"``."""
        return f"{self.within} allowed for marketing rounding"

    @property
    def prefix(self) -> str:
        if not self.claim.ai_tops:
            return ""
        lowest = self.claim.rate or _ai_tops_rate(self.acc)
        here = f": {lowest} on {self.acc.name}" if lowest else ""
        return f"{AI_TOPS_RULE[0].upper()}{AI_TOPS_RULE[1:]}{here}. "

    def said(self, rate: str | None) -> str:
        """``"'4 PFLOPS FP4' = 4000.0 TFLOPS"``: the claim and its value, in the unit of ``rate``."""
        return f"{self.claim.text!r} = {fmt_rate(self.claim.value)} {_unit(rate)}"

    def verdict(self, **kw) -> ClaimVerdict:
        base = dict(text=self.claim.text, accelerator=self.acc.name, claimed=self.claim.value,
                    ai_tops=self.claim.ai_tops, tolerance=self.tolerance, sparse_published=False, derived=False,
                    accumulate=None, sparse=None, matched=None, deviation=None, alternatives=())
        base.update(kw)
        return ClaimVerdict(**base)

    def peak_verdict(self, p: Peak, **kw) -> ClaimVerdict:
        """A verdict whose dense / sparse values are those of peak ``p``."""
        return self.verdict(rate=p.rate, accumulate=p.accumulate, dense=p.dense, sparse=p.implied_sparse,
                            sparse_published=p.sparse is not None, derived=p.derived, unverified=p.unverified,
                            formats=p.formats, **kw)


def check_claim(acc: Accelerator | str, text: str, tolerance: float = TOLERANCE) -> ClaimVerdict:
    """Check a headline figure against an accelerator's dense and sparse peaks.

    Args:
        acc: an :class:`Accelerator`, or any name :func:`truepeak.hardware.get_accelerator` accepts.
        text: the claim, e.g. ``"4 PFLOPS FP4"`` or ``"4000 AI TOPS"`` (forms: module docstring).
        tolerance: relative match tolerance, default ±5 % for marketing rounding.

    Returns:
        A :class:`ClaimVerdict`: ``kind`` is dense, sparse, neither or ambiguous; ``dense`` is the peak to use for
        efficiency (FLOP/s). Sparse values are 2:4 structured sparsity; "AI TOPS" is sparse FP4
        (docs/method.md, 'Dense and sparse peaks').

    Raises:
        TruepeakError: unreadable claim (see :func:`parse_claim`); UnknownNameError for an unknown accelerator name.
    """
    if isinstance(acc, str):
        from truepeak.hardware.lookup import get_accelerator

        acc = get_accelerator(acc)
    check = _Check(acc, parse_claim(text), tolerance)
    rates = _candidate_rates(acc, check.claim)
    found = _matches(acc, check.claim, rates, tolerance)
    if not found:  # not a per-GPU figure: an HGX / DGX / NVL72 platform total?
        found = _matches(acc, check.claim, rates, tolerance, PLATFORM_GPUS)
    if not found:
        return _no_match(check, rates)
    # Every accumulator counts: a figure that is sparse with fp32 accumulate and dense with fp16 accumulate (GeForce)
    # is ambiguous, never silently read one way. (A claim naming its accumulator only matched peaks of that one.)
    if len({f.kind for f in found}) > 1 or len({round(f.peak.dense / 1e9) for f in found}) > 1:
        return _ambiguous(check, found)
    return _matched(check, found)


def _reference_peak(acc: Accelerator, claim: ParsedClaim, rate: str) -> Peak | None:
    """The peak a claim that matched nothing is compared with: the one governing its format (or plain rate) with the
    claim's accumulator (else the rate's default), or None where the accelerator has none."""
    want = claim.accumulate or default_accumulate(rate)
    if claim.format is not None and acc.has_rate(claim.format, want):
        return acc.peak(claim.format, want)
    return next((p for p in acc.peaks if p.rate == rate and p.accumulate == want and not p.formats), None)


def _no_match(check: _Check, rates: list[str]) -> ClaimVerdict:
    """Verdict "neither": the claim is no dense or sparse peak (nor a platform total) of the accelerator."""
    acc, claim = check.acc, check.claim
    rate = claim.rate if claim.rate is not None else (rates[0] if claim.ai_tops and rates else None)
    peak = None if rate is None else _reference_peak(acc, claim, rate)
    listed = _listed_headline(check, rate, peak)
    if listed is not None:
        return listed
    if peak is None:
        have = ", ".join(sorted({p.rate for p in acc.peaks}, key=RATES.index))
        if rate is not None:
            acc_words = f" with {claim.accumulate} accumulate" if claim.accumulate else ""
            why = f"{acc.name} has no published {rate} peak{acc_words} (it has: {have})"
        else:
            why = f"it is not within {check.within} of any dense or sparse peak of {acc.name} ({have})"
        return check.verdict(rate=rate, kind="neither", dense=None, explanation=f"{check.prefix}{claim.text!r}: {why}.")
    sparse = peak.implied_sparse
    ratio = claim.value / peak.dense
    unit = _unit(rate)
    sp = f" nor the 2:4-sparse ({fmt_rate(sparse)})" if sparse else ""
    if sparse and abs(claim.value / sparse - 1) <= 3 * check.tolerance:
        hint = (f" It is {(claim.value / sparse - 1) * 100:+.1f} % from the sparse value: probably a loosely rounded "
                "sparse figure.")
    elif ratio > 1 + check.tolerance:
        hint = " It is above the dense peak, so it is no dense rate of this GPU (a platform total? another GPU?)."
    else:
        hint = ""
    expl = (f"{check.prefix}{check.said(rate)} is neither the dense {peak.label} "
            f"peak of {acc.name} ({fmt_rate(peak.dense)}){sp} within {check.within}: it is {ratio:.2f}x "
            f"dense.{hint} Use the dense {fmt_rate(peak.dense)} {unit}.")
    return check.peak_verdict(peak, kind="neither", deviation=ratio - 1, explanation=expl + _caveat(peak))


def _headline_rates(text: str) -> set[str]:
    """The rates a listed headline names: ``"1 PFLOPS FP16/BF16"`` -> {fp16, bf16}."""
    parsed = parse_claim(text)
    rates = {parsed.rate} if parsed.rate else set()
    low = text.lower()
    if "fp16/bf16" in low or "bf16/fp16" in low:
        rates |= {"fp16", "bf16"}
    return rates


def _listed_headline(check: _Check, rate: str | None, peak: Peak | None) -> ClaimVerdict | None:
    """A claim that matched no peak but is (within the tolerance) a headline the catalog lists for the entry as
    2:4-sparse (``Accelerator.sparse_headlines``): the sparse verdict, saying it is that listing, loosely rounded from
    2 x dense. None otherwise (or where the entry has no peak for the rate to name the dense value)."""
    acc, claim = check.acc, check.claim
    if peak is None or peak.implied_sparse is None:
        return None
    for text in acc.sparse_headlines:
        listed = parse_claim(text)
        rates = _headline_rates(text)
        if rates and rate not in rates:
            continue
        if abs(claim.value / listed.value - 1) > check.tolerance:
            continue
        sparse = peak.implied_sparse
        off = (claim.value / sparse - 1) * 100
        pub = "" if peak.sparse is not None else ", 2 x dense"
        expl = (f"{check.prefix}{check.said(rate)} is the vendor headline {text!r}, which the catalog lists for "
                f"{acc.name} as 2:4-SPARSE: the sparse {peak.label} peak ({fmt_rate(sparse)}{pub}) loosely rounded "
                f"({off:+.1f} %, beyond the {check.allowed}). Efficiency must use the dense peak: "
                f"{_dense_use(peak)}.")
        return check.peak_verdict(peak, kind="sparse", matched=sparse, deviation=claim.value / sparse - 1,
                                  explanation=expl + _caveat(peak))
    return None


def _ambiguous(check: _Check, chosen: list[_Match]) -> ClaimVerdict:
    """Verdict "ambiguous": several readings fit (several formats, or sparse and dense on different accumulators).

    Readings of one rate keep the rate and give the dense peak of its default accumulator (what a GEMM that does not
    say otherwise is measured against); readings of several rates give neither."""
    acc, claim = check.acc, check.claim
    alts = tuple(f.words() for f in chosen)
    head = f"{check.prefix}{claim.text!r} fits several peaks of {acc.name}: " + "; ".join(alts) + "."
    rates = list(dict.fromkeys(f.peak.rate for f in chosen))
    if len(rates) > 1:
        other_acc = any(f.peak.accumulate != default_accumulate(f.peak.rate) for f in chosen)
        how = "the format (e.g. '... BF16')" + (" and the accumulator" if other_acc else "")
        return check.verdict(rate=None, kind="ambiguous", dense=None, alternatives=alts,
                             explanation=f"{head} Name {how} to decide.")
    rate = rates[0]
    others = sorted({f.peak.accumulate for f in chosen} - {default_accumulate(rate)})
    say = " or ".join(f"'... with {a} accumulate'" for a in others) or "the accumulator"
    ref = _reference_peak(acc, claim, rate)
    if ref is None:
        return check.verdict(rate=rate, kind="ambiguous", dense=None, alternatives=alts,
                             explanation=f"{head} Say the accumulator ({say}) to decide.")
    expl = (f"{head} Say the accumulator ({say}) to decide. A GEMM accumulating in {ref.accumulate} (PyTorch's "
            f"default) is measured against the dense {ref.label} peak: {_dense_use(ref)}.")
    return check.peak_verdict(ref, kind="ambiguous", alternatives=alts, explanation=expl + _caveat(ref))


def _matched(check: _Check, chosen: list[_Match]) -> ClaimVerdict:
    """Verdict "dense" or "sparse" (per GPU or a platform total): every matching reading is of that kind and dense
    peak; the one on the default accumulator, else the closest, names it."""
    claim = check.claim
    best = min(chosen, key=lambda f: (f.peak.accumulate != default_accumulate(f.peak.rate),
                                      abs(claim.value / f.total - 1)))
    p = best.peak
    same = sorted({f.peak.rate for f in chosen} - {p.rate}, key=RATES.index)
    also = f" (same value for {', '.join(same)})" if same else ""
    if best.gpus > 1:
        expl = _explain_platform(check, best, also)
    elif best.kind == "sparse":
        expl = _explain_sparse(check, best, also)
    else:
        expl = _explain_dense(check, best, also)
    if claim.stated and claim.stated != best.kind:
        expl += f" Note: the claim says {claim.stated}, but the number is the {best.kind} rate."
    return check.peak_verdict(p, kind=best.kind, matched=best.total, deviation=claim.value / best.total - 1,
                              explanation=expl + _caveat(p), gpus=best.gpus)


def _dense_use(p: Peak) -> str:
    """``"2015.2 TFLOPS"`` (``" (derived)"`` appended for a derived peak): the number to use for efficiency."""
    return f"{fmt_rate(p.dense)} {_unit(p.rate)}" + (" (derived)" if p.derived else "")


def _deviation(check: _Check, best: _Match) -> str:
    """``"-0.8 %, ±5 % allowed for marketing rounding"``."""
    return f"{(check.claim.value / best.total - 1) * 100:+.1f} %, {check.allowed}"


def _explain_platform(check: _Check, best: _Match, also: str) -> str:
    p, n = best.peak, best.gpus
    sparse = best.kind == "sparse"
    per_gpu = f"divide by {n}" + (", then by 2 (2:4 sparsity)" if sparse else "")
    ratio = f"; the vendor's sparse rate is not 2 x dense here: {p.sparse_ratio_note}" if (
        sparse and p.sparse_ratio_note) else ""
    platform = "an 8-GPU HGX / DGX" if n == 8 else f"a {n}-GPU NVL72"
    return (f"{check.prefix}{check.said(p.rate)} is {platform} "
            f"{'2:4-SPARSE' if sparse else 'DENSE'} platform total: {n} x the {'2:4-sparse' if sparse else 'dense'} "
            f"{p.label} peak of {check.acc.name} ({n} x {fmt_rate(best.value)} = {fmt_rate(best.total)}; "
            f"{_deviation(check, best)}){also}. Per GPU: {per_gpu}{ratio}. Efficiency must use the per-GPU dense peak: "
            f"{_dense_use(p)}.")


def _explain_sparse(check: _Check, best: _Match, also: str) -> str:
    p = best.peak
    pub = "" if best.published else " -- 2 x dense; the vendor's sparse figure is not in the catalog"
    ratio = f" The sparse rate is not 2 x dense here: {p.sparse_ratio_note}." if p.sparse_ratio_note else ""
    return (f"{check.prefix}{check.said(p.rate)} is the 2:4-SPARSE {p.label} peak of {check.acc.name} "
            f"({fmt_rate(best.value)}{pub}; {_deviation(check, best)}){also}.{ratio} "
            f"Efficiency must use the dense peak: {_dense_use(p)}{_default_accumulate_dense(check.acc, p)}.")


def _default_accumulate_dense(acc: Accelerator, p: Peak) -> str:
    """For a matched peak on a non-default accumulator (GeForce fp16 accumulate): ``" with fp16 accumulate; a GEMM
    accumulating in fp32 (what PyTorch's GEMMs use, torch._scaled_mm for fp8) uses the dense fp8 peak 330.3 TFLOPS"``;
    empty otherwise."""
    default = default_accumulate(p.rate)
    if p.accumulate == default:
        return ""
    ref = next((q for q in acc.peaks if q.rate == p.rate and q.accumulate == default and q.formats == p.formats), None)
    if ref is None:
        return f" with {p.accumulate} accumulate"
    torch = "torch._scaled_mm for fp8" if p.rate == "fp8" else "torch.matmul"
    return (f" with {p.accumulate} accumulate; a GEMM accumulating in {default} (what PyTorch's GEMMs use: {torch}) "
            f"uses the dense {ref.label} peak, {_dense_use(ref)}")


def _explain_dense(check: _Check, best: _Match, also: str) -> str:
    p = best.peak
    derived = " (derived)" if p.derived else ""
    return (f"{check.prefix}{check.said(p.rate)} is the DENSE {p.label} peak of {check.acc.name} "
            f"({fmt_rate(best.value)}{derived}; {_deviation(check, best)}){also}. Use it as the efficiency "
            f"denominator.")
