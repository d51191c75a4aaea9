"""The expected decode step in words: the one line beside the ceiling, where the gap goes, the levers, and the
sentences of the expected step's findings (:mod:`truepeak.moe.plan.expected`, :mod:`truepeak.moe.plan.levers`).

Numbers through :mod:`truepeak.units`: tokens/s whole from 100 up, ms with three significant digits, shares with
two significant digits below 10 % and one decimal above.
"""

from __future__ import annotations

from truepeak.moe.findings import CalibrationCarriedOver, MtpNotModelled
from truepeak.units import fmt_number, fmt_pct, fmt_time, fmt_tokens_per_s

#: The gap parts (:data:`truepeak.moe.plan.expected.GAP_PARTS`) in words.
GAP_WORDS = {"kernel_launches": "kernel launches", "small_ops": "small ops", "gemm_efficiency": "GEMMs below roofline",
             "expert_efficiency": "experts below roofline", "attention_efficiency": "attention below roofline",
             "communication": "collectives (measured vs α–β)", "pipeline_bubble": "pipeline bubble"}


def _ms(s: float) -> str:
    return fmt_time(s, "ms", 3)


def _pct(f: float) -> str:
    return fmt_pct(f, digits=2)


def _tok(x: float) -> str:
    return fmt_tokens_per_s(x)


def expected_line(e, lead: bool = True) -> str:
    """The expected step beside the ceiling and where the gap goes, one line, e.g. ``expected 626 tok/s = 54 % of
    the 1166 ceiling (step 12.8 ms vs 6.86 ms): experts below roofline 3.01 ms, GEMMs below roofline 1.73 ms, small
    ops 1.34 ms, ...; experts at 56 % of roofline``; ``lead=False`` leaves out the leading word (a row labelled
    "expected")."""
    parts = sorted(((k, v) for k, v in e.gap.items() if abs(v) >= 1e-6), key=lambda kv: -abs(kv[1]))
    gap = ", ".join(f"{GAP_WORDS[k]} {'+' if v > 0 else '−'}{_ms(abs(v))}" for k, v in parts)
    mode = " eager (no CUDA graph)" if e.eager else ""
    mtp = (f", MTP {e.mtp.draft_tokens} draft x {_pct(e.mtp.acceptance)} acceptance = "
           f"{fmt_number(e.tokens_per_step, 3)} tokens per step" if e.mtp is not None else "")
    experts = f"; experts at {_pct(e.expert_fraction)} of roofline" if e.expert_fraction else ""
    head = f"expected{mode} " if lead else (mode.strip() + ": " if mode else "")
    return (f"{head}{_tok(e.tokens_per_s)} tok/s = {_pct(e.of_ceiling)} of the "
            f"{_tok(e.ceiling_tokens_per_s)} ceiling (step {_ms(e.step_s)} vs {_ms(e.ceiling_s)}{mtp}): "
            f"{gap}{experts}; {e.kernels} kernels per step")


def calibration_carried_over(f: CalibrationCarriedOver) -> str:
    fp4 = (f"; {', '.join(f.native_formats)} take the measured fp8 fractions (native here, dequantised where "
           "measured)" if f.native_formats else "")
    link = f"; collective size terms x {fmt_number(f.link_ratio, 3)} (NVLink bandwidth ratio)" \
        if abs(f.link_ratio - 1) > 1e-9 else ""
    whose = "the --calibration file" if f.user_file else "the shipped calibration"
    return (f"assumption: {f.accelerator} was never measured here; the expected step uses {whose} of the "
            f"{f.calibration} ({f.source}): fractions of the read bandwidth apply to the catalog bandwidth x "
            f"{fmt_number(f.ratio, 3)} (that GPU's read / catalog ratio), kernel, small-op and collective latencies "
            f"carry over in seconds{link}{fp4}")


def mtp_not_modelled(f: MtpNotModelled) -> str:
    return (f"{f.model} has {f.layers} MTP layer(s) and no --mtp was given: a server running MTP gains more than one "
            "token per step, so this prediction is not its ceiling (e.g. --mtp 1 --mtp-acceptance 0.85, "
            "DeepSeek-V3's reported acceptance of the second token)")


#: Sentences of the expected step's findings, merged into :func:`truepeak.report.plan.finding_text`.
TEXT = {CalibrationCarriedOver: calibration_carried_over, MtpNotModelled: mtp_not_modelled}

#: What each lever (:data:`truepeak.moe.plan.levers.LEVERS`) changes and assumes, in words.
LEVER_WORDS = {
    "cuda_graphs": "CUDA graphs (replay the step; launches cost the graph's 1.15 µs per kernel, not the host's)",
    "fuse_small_ops": "fuse the small ops into their neighbours (assumes every norm, RoPE, quantisation, top-k and "
                      "alignment kernel disappears)",
    "faster_all_reduce": "a faster small-message all-reduce (one-shot / MSCCL++ style: assumes half the measured "
                         "time per call)",
    "ep": "expert parallelism instead of expert TP (experts split whole over the GPUs, attention TP)",
    "dp_attention": "DP attention + EP (attention replicas, experts split)",
    "mtp": "MTP, 1 draft token at 85 % acceptance (DeepSeek-V3 technical report)",
    "fp8_kv_cache": "an fp8 KV cache (half the KV bytes)",
    "expert_roofline": "an expert kernel at the read roofline (100 % of the measured read bandwidth)",
    "fp4_weights": "fp4 weights (nvfp4 where the GPU computes it, else mxfp4 dequantised in the kernel)",
    "larger_batch": "twice the batch (per-sequence speed drops; needs the memory)",
}


def lever_lines(levers) -> list[str]:
    """The ranked levers, one line each: ``+y % tok/s, step −x ms: what (assumption)``; the gains with one decimal
    at every size (``+3.0 %`` beside ``+73.8 %``), read down the list."""
    out = []
    for lv in levers:
        d = lv.step_after_s - lv.step_before_s
        sign = "+" if d > 0 else "−"
        fit = "" if lv.fits else " — does not fit in GPU memory"
        gain = ("+" if lv.tokens_gain > 0 else "−") + fmt_pct(abs(lv.tokens_gain), decimals=1)
        out.append(f"{gain} tok/s, step {sign}{_ms(abs(d))} "
                   f"({_tok(lv.tokens_per_s_after)} tok/s): {LEVER_WORDS[lv.key]}{fit}")
    return out


__all__ = ["GAP_WORDS", "TEXT", "LEVER_WORDS", "expected_line", "lever_lines", "calibration_carried_over", "validation_table",
           "mtp_not_modelled"]


def validation_table(rows) -> list[str]:
    """The validation table (:func:`truepeak.moe.validation.validate`) as Markdown: per point the setup, measured,
    ceiling and expected tokens/s and expected / measured, then the mean absolute error."""
    from truepeak.moe.validation import mean_absolute_error

    out = ["| # | model | GPUs, layout | batch | context | measured tok/s | ceiling tok/s | expected tok/s | "
           "expected / measured |", "|---|---|---|---:|---:|---:|---:|---:|---:|"]
    for r in rows:
        p = r.point
        mtp = f", MTP {p.mtp.draft_tokens} @ {_pct(p.mtp.acceptance)}" if p.mtp is not None else ""
        out.append(f"| {p.key} | {p.model}{f' ({p.weights})' if p.weights else ''} | {p.gpu}, {p.layout}{mtp} | "
                   f"{p.batch} | {p.context} | {_tok(p.measured_tokens_per_s)} | {_tok(r.ceiling_tokens_per_s)} | "
                   f"{_tok(r.expected_tokens_per_s)} | {fmt_number(r.expected_over_measured, decimals=2)} |")
    out.append("")
    out.append(f"Mean absolute error of the expected estimate: {_pct(mean_absolute_error(rows))} over {len(rows)} "
               f"points; largest {_pct(max(abs(r.expected_over_measured - 1) for r in rows))}.")
    return out
