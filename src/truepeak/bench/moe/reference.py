"""The float32 reference of a point's first tokens and the check of a backend's output against it."""

from __future__ import annotations

from typing import Any, NamedTuple

from truepeak.errors import require
from truepeak.records import Correctness


def relative_error(out: Any, ref: Any) -> float:
    """max |out - ref| / max |ref| (the denominator at least 1e-12): the ``max_rel_error`` of a record."""
    return float((out.float() - ref).abs().max() / ref.abs().max().clamp(min=1e-12))


def reference_rows(x: Any, w1: Any, w2: Any, ids: Any, topw: Any, rows: int = 16, act_quant: Any = None) -> Any:
    """float32 reference of the first ``rows`` tokens, dequantising only the experts they use (``act_quant``: as
    :func:`~truepeak.kernels.moe_triton.moe_reference`'s)."""
    torch = require("torch", "the MoE reference")
    from truepeak.kernels.moe_triton import ExpertWeights, moe_reference

    ids_r, w_r = ids[:rows], topw[:rows]
    used = sorted(e for e in torch.unique(ids_r).tolist() if e >= 0)
    if not used:
        return torch.zeros(ids_r.shape[0], x.shape[1], device=x.device)
    sel = torch.tensor(used, device=x.device)

    def sub(w: Any) -> Any:
        return ExpertWeights(w.wfmt, w.data[sel], None if w.scale is None else w.scale[sel],
                             None if w.global_scale is None else w.global_scale[sel], w.nibble_chunk,
                             w.w4a8_layout, w.mma_layout).dequantize()

    remap = torch.full((w1.shape[0] + 1,), -1, dtype=torch.int64, device=x.device)
    remap[sel] = torch.arange(len(used), device=x.device)
    loc = torch.where(ids_r >= 0, remap[ids_r.clamp(min=0)], torch.full_like(ids_r, -1))
    return moe_reference(x[:rows], sub(w1), sub(w2), loc, w_r, act_quant=act_quant)


class OutputCheck(NamedTuple):
    """A backend output's check: the record's correctness, the error it was judged by and that error's tolerance."""

    correctness: Correctness
    error: float
    tolerance: float


def check_output(out: Any, x: Any, w1: Any, w2: Any, ids: Any, topw: Any, ref: Any, wfmt: str, activations: Any,
                 act_format: str | None = None) -> OutputCheck:
    """Check ``out [T, H]`` of one backend against ``ref`` (:func:`reference_rows` of the same inputs).

    Tolerances: bf16 weights 2e-2; quantised weights 8e-2; with e4m3 activations (``activations`` naming fp8: w8a8,
    w4a8; each activation rounded by up to 2^-4 relative) 1e-1, as the CPU tests (at H = I = 128 a float32 emulation
    of the same rounding is 4-8 % from the reference; measured shapes stay at 2-6 %). ``act_format`` (the
    block-scaled kernel's activation rounding, e.g. ``"nvfp4"``): the check is against a reference with the
    activations rounded the same way, tolerance 2e-2 (only bf16 outputs and the order of sums differ), while
    ``max_rel_error`` stays the error against unrounded activations (comparable with the other kernels: the format's
    accuracy).
    """
    err = relative_error(out[:ref.shape[0]], ref)
    tol = 2e-2 if wfmt == "bf16" else 1e-1 if str(activations).startswith("fp8") else 8e-2
    correct = Correctness(max_rel_error=err, passed=err <= tol, reference="float32, first 16 tokens")
    if act_format:
        from truepeak.kernels.moe_blockscaled import fake_quantize_rows

        ref_q = reference_rows(x, w1, w2, ids, topw, act_quant=lambda a, f=act_format: fake_quantize_rows(a, f))
        err_q = relative_error(out[:ref_q.shape[0]], ref_q)
        tol = 2e-2
        correct = Correctness(max_rel_error=err, passed=err_q <= tol, reference="float32, first 16 tokens",
                              max_rel_error_same_rounding=err_q,
                              checked_against=f"float32, first 16 tokens, activations rounded to {act_format} as the "
                                              "kernel rounds them")
        err = err_q
    return OutputCheck(correct, err, tol)
