"""Published decode measurements of real MoE servers, and the planner's ceiling and expected step for each
(:data:`POINTS`, :func:`validate`).

Pure Python. Each point is a deployment with its published setup and decode throughput; :func:`validate` plans the
same configuration and returns the measured value, the roofline ceiling, the expected step and their ratio. The
calibration is never fitted to these points: they test it (docs/planner-validation.md).

"decode tok/s" is concurrency ÷ mean TPOT where the source gives TPOT, else the source's output tokens/s (then it
includes prefill and understates pure decode). Context = input length + half the output.
"""

from __future__ import annotations

from dataclasses import dataclass

from truepeak.moe.plan.mtp import MtpSetting

INFERENCEX_870 = "github.com/SemiAnalysisAI/InferenceX/issues/870"
INFERENCEX_1061 = "github.com/SemiAnalysisAI/InferenceX/pull/1061"
TT_340 = "github.com/tenstorrent/tt-inference-server/issues/340"
DEEPSEEK_DAY6 = ("DeepSeek open-infra day 6, 'DeepSeek-V3/R1 inference system overview' (github.com/deepseek-ai/"
                 "open-infra-index), as quoted by third-party summaries")


@dataclass(frozen=True)
class ValidationPoint:
    """One published measurement and the plan that reproduces its setup.

    Attributes:
        key: ``"V1"`` …; source: where it was published; model, gpu, layout, batch, context, weights: the plan's
            inputs (``weights`` None: the checkpoint's); mtp: the MTP setting the deployment ran, or None.
        measured_tokens_per_s: decode tokens/s of the whole layout as published.
        engine: the serving engine and its setup in words; caveat: what the published number includes or assumes.
    """

    key: str
    source: str
    model: str
    gpu: str
    layout: str
    batch: int
    context: int
    measured_tokens_per_s: float
    engine: str
    weights: str | None = None
    mtp: MtpSetting | None = None
    caveat: str = ""


_V13 = dict(source=INFERENCEX_870, model="deepseek-v3", gpu="h200", layout="tp8", context=1536,
            engine="SGLang v0.5.7, TP8, no MTP, no DP attention; DeepSeek-R1-0528 fp8 (128-block)")
_V58 = dict(source=INFERENCEX_870, model="deepseek-v3", gpu="b200", layout="ep8", context=1536,
            weights="routed_experts=nvfp4",
            engine="SGLang v0.5.6, TP8 EP8; DeepSeek-R1-0528-FP4-v2 (nvfp4 routed experts, the rest fp8)",
            caveat="output tok/s per GPU x 8: includes prefill")
_V910 = dict(source=INFERENCEX_1061, model="gpt-oss-120b", gpu="mi300x", layout="tp1", context=1536,
             engine="vLLM 0.17, TP1, mxfp4")

#: The published points (12), in the order of docs/planner-validation.md.
POINTS: tuple[ValidationPoint, ...] = (
    ValidationPoint("V1", batch=8, measured_tokens_per_s=625, **_V13),
    ValidationPoint("V2", batch=16, measured_tokens_per_s=930, **_V13),
    ValidationPoint("V3", batch=32, measured_tokens_per_s=1250, **_V13),
    ValidationPoint("V4", batch=64, measured_tokens_per_s=1850, **_V13),
    ValidationPoint("V5", batch=4, measured_tokens_per_s=478, **_V58),
    ValidationPoint("V6", batch=8, measured_tokens_per_s=838, **_V58),
    ValidationPoint("V7", batch=16, measured_tokens_per_s=1354, **_V58),
    ValidationPoint("V8", batch=32, measured_tokens_per_s=2259, **_V58),
    ValidationPoint("V9", batch=64, measured_tokens_per_s=2038, **_V910),
    ValidationPoint("V10", batch=256, measured_tokens_per_s=4391, **_V910),
    ValidationPoint("V11", TT_340, "qwen3-30b-a3b", "a100", "tp1", 1, 192, 104, "vLLM, bf16",
                    caveat="GPU (A100 SXM 80 GB) and dtype assumed; the cited thread does not state them"),
    ValidationPoint("V12", DEEPSEEK_DAY6, "deepseek-v3", "h100", "dp128ep128", 88 * 128, 4989, 1850 * 128,
                    "DeepSeek's own, EP144 with DP attention on H800 nodes, MTP on",
                    mtp=MtpSetting(1, 0.85),
                    caveat="H800 planned as H100 SXM (same HBM3 and compute; NVLink cut to 400 GB/s); EP144 with 288 "
                           "expert copies (2 per GPU) planned as dp128ep128 (2 experts per GPU, the same 88 "
                           "sequences and 352 tokens per expert); per-GPU batch derived (14.8k tok/s / 8 GPUs at "
                           "~20 tok/s per user); MTP acceptance 85 % (technical report: 85-90 %)"),
)


@dataclass(frozen=True)
class ValidationRow:
    """A point (:class:`ValidationPoint`) and what the planner says: ``ceiling`` and ``expected`` tokens/s of the
    layout (with MTP composed where the deployment ran it); ``expected_over_measured``."""

    point: ValidationPoint
    ceiling_tokens_per_s: float
    expected_tokens_per_s: float
    fits: bool

    @property
    def expected_over_measured(self) -> float:
        return self.expected_tokens_per_s / self.point.measured_tokens_per_s

    @property
    def ceiling_over_measured(self) -> float:
        return self.ceiling_tokens_per_s / self.point.measured_tokens_per_s


def validate(points=POINTS, calibration=None) -> list[ValidationRow]:
    """Plan every point (:func:`truepeak.moe.plan.plan_set`, the shipped calibration unless ``calibration``)."""
    from truepeak.moe.plan import plan_set

    rows = []
    for pt in points:
        r = plan_set(pt.model, pt.gpu, layout=pt.layout, batches=[pt.batch], context=pt.context, weights=pt.weights,
                     mtp=pt.mtp, calibration=calibration)
        p = r.plans[0]
        rows.append(ValidationRow(pt, p.expected.ceiling_tokens_per_s, p.expected.tokens_per_s, p.memory.fits))
    return rows


def mean_absolute_error(rows) -> float:
    """Mean of |expected / measured − 1| over ``rows``."""
    return sum(abs(r.expected_over_measured - 1) for r in rows) / len(rows)


__all__ = ["ValidationPoint", "ValidationRow", "POINTS", "validate", "mean_absolute_error"]
