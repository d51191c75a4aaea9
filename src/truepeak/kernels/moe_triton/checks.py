"""The checks every MoE kernel makes of its inputs before building anything (:func:`check_inputs`): an input the
kernels would read wrongly is refused with what would fit. torch is imported inside the functions."""

from __future__ import annotations

from typing import Any

from truepeak.errors import TruepeakError, require
from truepeak.kernels.moe_triton.config import check_wfmt
from truepeak.kernels.moe_triton.weights import ExpertWeights


def _check_weights(name: str, w: ExpertWeights) -> None:
    """The kernels index values with the tensors' strides but assume K contiguous (stride 1) and scales stored
    densely in the documented shapes: anything else would be read wrongly without an error."""
    torch = require("torch", "running the MoE kernel")
    e, n, k = w.shape
    fp4 = w.wfmt in ("nvfp4", "mxfp4")
    data_dt = {"bf16": torch.bfloat16, "fp8": torch.float8_e4m3fn, "fp8_block": torch.float8_e4m3fn,
               "nvfp4": torch.uint8, "mxfp4": torch.uint8}[w.wfmt]
    scale_dt = {"fp8": torch.float32, "fp8_block": torch.float32, "nvfp4": torch.float8_e4m3fn,
                "mxfp4": torch.uint8}.get(w.wfmt)
    if w.data.dtype != data_dt:
        shape = "packed [E, N, K/2]" if fp4 else "[E, N, K]"
        raise TruepeakError(f"{name}: {w.wfmt} values must be {data_dt} ({shape}), got {w.data.dtype}")
    if w.data.stride(-1) != 1:
        raise TruepeakError(f"{name}.data must be contiguous along K (stride 1), got strides "
                            f"{tuple(w.data.stride())}: pass a .contiguous() copy")
    if fp4 and not w.data.is_contiguous():
        raise TruepeakError(f"{name}.data: fp4 bytes must be one dense [E, N, K/2] tensor (the kernels address its "
                            f"tiles from the shape), got strides {tuple(w.data.stride())}: pass a .contiguous() copy")
    if scale_dt is not None and w.scale is not None and w.scale.dtype != scale_dt:
        hint = " (e8m0 bytes: scale.view(torch.uint8))" if w.wfmt == "mxfp4" else ""
        raise TruepeakError(f"{name}: {w.wfmt} scales must be {scale_dt}{hint}, got {w.scale.dtype}")
    want = {"fp8": (e, n), "fp8_block": (e, n // 128, k // 128), "nvfp4": (e, n, k // 16),
            "mxfp4": (e, n, k // 32)}.get(w.wfmt)
    if want is not None:
        if w.scale is None or tuple(w.scale.shape) != want:
            got = None if w.scale is None else list(w.scale.shape)
            raise TruepeakError(f"{name}: {w.wfmt} scales must be {list(want)} for values {list(w.shape)}, got {got}")
        if not w.scale.is_contiguous():
            raise TruepeakError(f"{name}.scale must be contiguous: pass a .contiguous() copy")
    g = w.global_scale
    if g is not None and (g.dtype != torch.float32 or tuple(g.shape) != (e,) or not g.is_contiguous()):
        raise TruepeakError(f"{name}.global_scale must be a contiguous float32 [E] = [{e}], got {g.dtype} "
                            f"{list(g.shape)}")


def _check_shapes(x: Any, w1: ExpertWeights, w2: ExpertWeights) -> tuple[int, int, int]:
    for w in (w1, w2):
        check_wfmt(w.wfmt)
    e1, n1, k1 = w1.shape
    e2, n2, k2 = w2.shape
    h = int(x.shape[-1])
    if not (e1 == e2 and k1 == h and n2 == h and n1 == 2 * k2):
        raise TruepeakError(f"expert weight shapes do not fit: x [T, {h}], w1 {list(w1.shape)} (want [E, 2I, H]), "
                            f"w2 {list(w2.shape)} (want [E, H, I])")
    if w1.wfmt != w2.wfmt:
        raise TruepeakError(f"w1 and w2 must share one format, got {w1.wfmt} and {w2.wfmt}")
    for name, w in (("w1", w1), ("w2", w2)):
        _check_weights(name, w)
    return e1, k2, h


def check_inputs(x: Any, w1: ExpertWeights, w2: ExpertWeights, topk_ids: Any, topk_weights: Any
                 ) -> tuple[int, int, int, int, int]:
    """The checks every MoE kernel makes of its inputs before building anything: weight shapes and formats
    (:func:`_check_shapes`), nvfp4's global scale, x ``[T, H]`` bf16/fp16/fp32 contiguous along H, integer
    ``topk_ids [T, k]`` and ``topk_weights`` of the same shape.

    Returns:
        ``(E, I, H, T, k)``.

    Raises:
        TruepeakError / UnknownNameError: the first input that does not fit, named with what would.
    """
    torch = require("torch", "running the MoE kernel")
    E, I, H = _check_shapes(x, w1, w2)  # noqa: E741 - the field's name for the expert width
    for w in (w1, w2):
        if w.wfmt == "nvfp4" and w.global_scale is None:
            raise TruepeakError("nvfp4 weights need their per-expert global_scale (fp32 [E]): without it every "
                                "value would be off by that factor")
    if topk_ids.dim() != 2 or x.dim() != 2 or int(x.shape[0]) != int(topk_ids.shape[0]):
        raise TruepeakError(f"x must be [T, H] and topk_ids [T, top_k] with the same T, got x "
                            f"{list(x.shape)} and topk_ids {list(topk_ids.shape)}")
    if x.dtype not in (torch.bfloat16, torch.float16, torch.float32):
        raise TruepeakError(f"x must be bf16, fp16 or fp32 hidden states, got {x.dtype}")
    if topk_ids.dtype.is_floating_point or topk_ids.dtype.is_complex or topk_ids.dtype == torch.bool:
        raise TruepeakError(f"topk_ids must hold integer expert ids, got {topk_ids.dtype}")
    if tuple(topk_weights.shape) != tuple(topk_ids.shape):
        raise TruepeakError(f"topk_weights must have topk_ids' shape {list(topk_ids.shape)}, got "
                            f"{list(topk_weights.shape)}")
    if x.shape[0] and x.stride(-1) != 1:
        raise TruepeakError(f"x must be contiguous along H (stride 1), got strides {tuple(x.stride())}: pass "
                            "x.contiguous() (the kernels address rows by x.stride(0) and read each row in place)")
    return E, I, H, int(topk_ids.shape[0]), int(topk_ids.shape[1])
