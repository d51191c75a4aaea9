"""Quantise and dequantise weights to block-scaled low-precision formats (NVFP4, MXFP4, MXFP8) and to FP8 with fp32
scales, in plain torch (CPU or GPU). Reference implementations: exact, readable, not fast.

Layouts (K = the last dimension, the GEMM's reduction dimension; scales group values along K):

=========  ==========================================  ===========================================================
format     values                                      scales
=========  ==========================================  ===========================================================
nvfp4      uint8 ``[..., K//2]``, two e2m1 per byte    float8_e4m3fn ``[..., K//16]`` + one fp32 global scale
mxfp4      uint8 ``[..., K//2]``, two e2m1 per byte    uint8 e8m0 ``[..., K//32]`` (biased exponent, bias 127)
mxfp8      float8_e4m3fn ``[..., K]``                  uint8 e8m0 ``[..., K//32]``
fp8        float8_e4m3fn ``[..., K]``                  float32: ``[]`` (tensor), ``[...]`` per row (channel), or
                                                       ``[..., N//128, K//128]`` (block128, 128 x 128 blocks)
=========  ==========================================  ===========================================================

Packing: byte i of a row holds element 2i in its low nibble and element 2i+1 in its high nibble (torch's
``float4_e2m1fn_x2`` convention; also the layout of NVIDIA's and the OCP reference packers). A nibble is
``sign << 3 | code`` with ``code`` indexing the e2m1 magnitudes ``(0, 0.5, 1, 1.5, 2, 3, 4, 6)``
(:data:`E2M1_VALUES`).

Rounding: values round to the nearest grid point, ties to even (the code with mantissa bit 0), and saturate at the
format's largest magnitude (6 for e2m1, 448 for e4m3), as the OCP MX spec v1.0 §6.3 and NVIDIA's recipes prescribe for
conversion to the element format. NaN/Inf inputs are not supported (they saturate or become NaN).

Sources:
    - OCP Microscaling Formats (MX) Specification v1.0 (2023), §5.2 (E8M0 scale: bias 127, 0xFF = NaN), §5.3 (element
      formats: FP4 E2M1 max 6.0 = 1.5·2^2, so emax_elem = 2; FP8 E4M3 max 448 = 1.75·2^8, emax_elem = 8), §6.3
      (conversion: ``shared_exp = floor(log2(max_i |V_i|)) - emax_elem``, ``X = 2^shared_exp``,
      ``P_i = quantize_to_element_format(V_i / X)``, clamped to the element format's normal range).
    - NVIDIA NVFP4 (Blackwell): e2m1 values with one e4m3 scale per 16 values and one fp32 per-tensor scale;
      "Introducing NVFP4 for Efficient and Accurate Low-Precision Inference", NVIDIA technical blog (June 2025), and the
      TensorRT-LLM / FlashInfer quantiser (``fp4_quantize``): the per-tensor encode scale is ``448 * 6 / amax(x)``, so a
      block scale ``amax_block / 6`` times it fits e4m3's range. This module stores the *decode* scale
      ``global_scale = amax(x) / (448 * 6)`` (the reciprocal; x ≈ e2m1 · e4m3_scale · global_scale).
    - FP8 with fp32 scales: per-tensor and per-row (``torch._scaled_mm``'s rowwise), and DeepSeek-V3's 128 x 128 weight
      blocks (DeepSeek-V3 technical report §3.3.2; DeepGEMM ``per_block_cast_to_fp8``): ``scale = amax / 448``.

torch is imported inside each function; importing this module needs nothing beyond the standard library.
"""

from __future__ import annotations

from typing import Any

from truepeak.errors import TruepeakError, UnknownNameError, require

#: Magnitudes of the 8 FP4 E2M1 codes (OCP MX v1.0 §5.3.3): code 0..7, sign is bit 3 of the nibble.
E2M1_VALUES = (0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0)
#: Largest finite magnitudes of the element formats.
E2M1_MAX = 6.0
E4M3_MAX = 448.0
#: emax_elem of OCP MX v1.0 §6.3: exponent of the largest normal (6 = 1.5·2^2, 448 = 1.75·2^8).
EMAX_E2M1 = 2
EMAX_E4M3 = 8
#: Values per scale.
NVFP4_BLOCK = 16
MX_BLOCK = 32
FP8_BLOCK = 128
#: E8M0 bias and NaN encoding (OCP MX v1.0 §5.2).
E8M0_BIAS = 127
E8M0_NAN = 255
FP8_GRANULARITIES = ("tensor", "channel", "block128")

# Midpoints between consecutive e2m1 magnitudes, and whether a tie there rounds up (the upper neighbour's code is
# even, i.e. its mantissa bit is 0). Ties to even: 0.25 -> 0, 0.75 -> 1.0, 1.25 -> 1.0, 1.75 -> 2.0, 2.5 -> 2.0,
# 3.5 -> 4.0, 5.0 -> 4.0.
_MIDPOINTS = (0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5.0)
_TIE_UP = (False, True, False, True, False, True, False)


def _torch() -> Any:
    return require("torch", "quantising weights")


def _check_last_dim(x: Any, block: int, fmt: str) -> int:
    if x.dim() < 1:
        raise TruepeakError(f"{fmt} quantisation needs a tensor with a last dimension K, got a scalar")
    k = int(x.shape[-1])
    if k == 0 or k % block:
        raise TruepeakError(f"{fmt} needs K (the last dimension) to be a positive multiple of its {block}-value block, "
                            f"got K={k}; pad K to {max(block, -(-k // block) * block)}")
    return k


def _blocks(x: Any, block: int) -> Any:
    """``[..., K]`` → float32 ``[..., K//block, block]``."""
    return x.float().reshape(*x.shape[:-1], x.shape[-1] // block, block)


# -- e2m1 codes and packing --------------------------------------------------------------------------------------------
def e2m1_encode(x: Any) -> Any:
    """Round float values to FP4 E2M1 nibbles (uint8, 0..15): round to nearest, ties to even, saturate at ±6.

    ``e2m1_encode(tensor([0.25, 0.75, 2.5, 5.0, 7.0, -1.0]))`` → codes of ``0, 1.0, 2.0, 4.0, 6.0, -1.0`` =
    ``[0, 2, 4, 6, 7, 10]``.
    """
    torch = _torch()
    a = x.float().abs()
    code = torch.zeros(a.shape, dtype=torch.uint8, device=a.device)
    for mid, up in zip(_MIDPOINTS, _TIE_UP):
        code += (a >= mid if up else a > mid).to(torch.uint8)
    sign = (x.float() < 0).to(torch.uint8) << 3
    return code | sign


def e2m1_decode(nibbles: Any) -> Any:
    """FP4 E2M1 nibbles (uint8 0..15) → float32 values."""
    torch = _torch()
    table = torch.tensor(E2M1_VALUES + tuple(-v for v in E2M1_VALUES), dtype=torch.float32, device=nibbles.device)
    return table[nibbles.long() & 0xF]


def pack_nibbles(codes: Any) -> Any:
    """uint8 codes ``[..., K]`` (K even) → bytes ``[..., K//2]``: element 2i in the low nibble, 2i+1 in the high."""
    if codes.shape[-1] % 2:
        raise TruepeakError(f"packing two 4-bit values per byte needs an even K, got K={codes.shape[-1]}")
    return codes[..., 0::2] | (codes[..., 1::2] << 4)


def unpack_nibbles(packed: Any) -> Any:
    """bytes ``[..., K//2]`` → uint8 codes ``[..., K]`` (inverse of :func:`pack_nibbles`)."""
    torch = _torch()
    lo = packed & 0xF
    hi = packed >> 4
    return torch.stack((lo, hi), dim=-1).reshape(*packed.shape[:-1], packed.shape[-1] * 2)


# -- e8m0 scales -------------------------------------------------------------------------------------------------------
def _mx_shared_exp(amax: Any, emax_elem: int) -> Any:
    """OCP MX v1.0 §6.3: ``floor(log2(amax)) - emax_elem``, clamped to E8M0's [-127, 127]; an all-zero block gets -127
    (its values are all zero whatever the scale)."""
    torch = _torch()
    safe = torch.where(amax > 0, amax, torch.ones_like(amax))
    # frexp: amax = m * 2^e with m in [0.5, 1), so floor(log2(amax)) = e - 1 exactly (no float log rounding).
    _, e = torch.frexp(safe)
    exp = (e - 1 - emax_elem).to(torch.int32)
    exp = torch.where(amax > 0, exp, torch.full_like(exp, -E8M0_BIAS))
    return exp.clamp(-E8M0_BIAS, E8M0_BIAS)


def e8m0_to_float(scales: Any) -> Any:
    """uint8 E8M0 biased exponents → float32 ``2^(s - 127)`` (255 → NaN)."""
    torch = _torch()
    s = scales.to(torch.int32)
    out = torch.pow(torch.tensor(2.0, dtype=torch.float32, device=scales.device), (s - E8M0_BIAS).float())
    return torch.where(s == E8M0_NAN, torch.full_like(out, float("nan")), out)


# -- NVFP4 -------------------------------------------------------------------------------------------------------------
def nvfp4_global_scale(x: Any) -> Any:
    """The per-tensor fp32 decode scale ``amax(x) / (448 · 6)`` (1.0 for an all-zero tensor), as a 0-d tensor."""
    torch = _torch()
    amax = x.float().abs().max()
    return torch.where(amax > 0, amax / (E4M3_MAX * E2M1_MAX), torch.ones_like(amax)).to(torch.float32)


def quantize_nvfp4(x: Any, global_scale: Any = None) -> tuple[Any, Any, Any]:
    """Quantise to NVFP4: e2m1 values, one e4m3 scale per 16 values along K, one fp32 per-tensor scale.

    Recipe (NVIDIA, see module docstring): ``global_scale = amax(x) / (448·6)``; for each 16-value block
    ``s = e4m3(amax_block / 6 / global_scale)`` (round to nearest even, ≤ 448); values ``e2m1(x / (s·global_scale))``
    (nearest even, saturating at ±6). Dequantise: ``e2m1 · s · global_scale``.

    Args:
        x: float tensor ``[..., K]``, K a multiple of 16.
        global_scale: a calibrated decode scale to use instead of the tensor's own amax (0-d float32).

    Returns:
        ``(packed uint8 [..., K//2], scales float8_e4m3fn [..., K//16], global_scale float32 0-d tensor)``.

    Raises:
        TruepeakError: K is not a positive multiple of 16.
    """
    torch = _torch()
    _check_last_dim(x, NVFP4_BLOCK, "nvfp4")
    gs = nvfp4_global_scale(x) if global_scale is None else torch.as_tensor(global_scale, dtype=torch.float32,
                                                                            device=x.device)
    b = _blocks(x, NVFP4_BLOCK)
    amax = b.abs().amax(dim=-1)
    scale = (amax / E2M1_MAX / gs).clamp(max=E4M3_MAX).to(torch.float8_e4m3fn)
    denom = scale.float() * gs
    q = torch.where(denom[..., None] > 0, b / denom[..., None].clamp(min=torch.finfo(torch.float32).tiny),
                    torch.zeros_like(b))
    codes = e2m1_encode(q).reshape(x.shape)
    return pack_nibbles(codes), scale, gs


def dequantize_nvfp4(packed: Any, scales: Any, global_scale: Any) -> Any:
    """NVFP4 → float32 ``[..., K]`` (inverse of :func:`quantize_nvfp4`, up to rounding)."""
    v = e2m1_decode(unpack_nibbles(packed))
    v = v.reshape(*v.shape[:-1], v.shape[-1] // NVFP4_BLOCK, NVFP4_BLOCK)
    out = v * (scales.float() * global_scale.float())[..., None]
    return out.reshape(*out.shape[:-2], -1)


# -- MXFP4 / MXFP8 -----------------------------------------------------------------------------------------------------
def _quantize_mx(x: Any, emax_elem: int, fmt: str) -> tuple[Any, Any]:
    """Shared exponents (uint8 e8m0 ``[..., K//32]``) and the scaled float32 values ``V / 2^shared_exp``."""
    torch = _torch()
    _check_last_dim(x, MX_BLOCK, fmt)
    b = _blocks(x, MX_BLOCK)
    exp = _mx_shared_exp(b.abs().amax(dim=-1), emax_elem)
    scaled = torch.ldexp(b, (-exp)[..., None].to(torch.float32))
    return (exp + E8M0_BIAS).to(torch.uint8), scaled


def quantize_mxfp4(x: Any) -> tuple[Any, Any]:
    """Quantise to MXFP4 (OCP MX v1.0): e2m1 values, one E8M0 scale per 32 values along K.

    ``shared_exp = floor(log2(amax_block)) - 2``, stored biased by 127; values ``e2m1(V / 2^shared_exp)`` (nearest
    even, saturating at ±6: a block whose amax has a mantissa above 1.5 clips its largest values to 6, as the spec
    does).

    Returns:
        ``(packed uint8 [..., K//2], scales uint8 e8m0 [..., K//32])``.

    Raises:
        TruepeakError: K is not a positive multiple of 32.
    """
    scales, scaled = _quantize_mx(x, EMAX_E2M1, "mxfp4")
    return pack_nibbles(e2m1_encode(scaled).reshape(x.shape)), scales


def dequantize_mxfp4(packed: Any, scales: Any) -> Any:
    """MXFP4 → float32 ``[..., K]``."""
    v = e2m1_decode(unpack_nibbles(packed))
    v = v.reshape(*v.shape[:-1], v.shape[-1] // MX_BLOCK, MX_BLOCK) * e8m0_to_float(scales)[..., None]
    return v.reshape(*v.shape[:-2], -1)


def quantize_mxfp8(x: Any) -> tuple[Any, Any]:
    """Quantise to MXFP8 E4M3 (OCP MX v1.0): e4m3 values, one E8M0 scale per 32 values; ``shared_exp =
    floor(log2(amax_block)) - 8``; values saturate at ±448.

    Returns:
        ``(values float8_e4m3fn [..., K], scales uint8 e8m0 [..., K//32])``.

    Raises:
        TruepeakError: K is not a positive multiple of 32.
    """
    torch = _torch()
    scales, scaled = _quantize_mx(x, EMAX_E4M3, "mxfp8")
    vals = scaled.clamp(-E4M3_MAX, E4M3_MAX).to(torch.float8_e4m3fn).reshape(x.shape)
    return vals, scales


def dequantize_mxfp8(values: Any, scales: Any) -> Any:
    """MXFP8 → float32 ``[..., K]``."""
    v = values.float()
    v = v.reshape(*v.shape[:-1], v.shape[-1] // MX_BLOCK, MX_BLOCK) * e8m0_to_float(scales)[..., None]
    return v.reshape(*v.shape[:-2], -1)


# -- FP8 with fp32 scales ----------------------------------------------------------------------------------------------
def _check_granularity(granularity: str) -> str:
    if granularity not in FP8_GRANULARITIES:
        raise UnknownNameError(f"unknown fp8 scale granularity {granularity!r}; expected one of "
                               f"{', '.join(FP8_GRANULARITIES)}")
    return granularity


def _fp8_scale(amax: Any) -> Any:
    torch = _torch()
    return torch.where(amax > 0, amax / E4M3_MAX, torch.ones_like(amax)).to(torch.float32)


def quantize_fp8(x: Any, granularity: str = "channel") -> tuple[Any, Any]:
    """Quantise to FP8 E4M3 with fp32 scales ``amax / 448`` (x ≈ values · scale).

    Args:
        x: float tensor ``[..., N, K]`` (a weight stored N x K: N output channels, K the reduction dimension).
        granularity: ``"tensor"`` (one scale, shape ``[]``), ``"channel"`` (one scale per row, i.e. per output channel:
            shape ``x.shape[:-1]``), or ``"block128"`` (one per 128 x 128 block of the last two dimensions, DeepSeek-V3
            weights: shape ``[..., N//128, K//128]``).

    Returns:
        ``(values float8_e4m3fn, shape of x; scales float32)``.

    Raises:
        UnknownNameError: an unknown granularity.
        TruepeakError: block128 on a tensor with fewer than 2 dimensions or N, K not multiples of 128.
    """
    torch = _torch()
    _check_granularity(granularity)
    xf = x.float()
    if granularity == "tensor":
        scale = _fp8_scale(xf.abs().max())
        return (xf / scale).clamp(-E4M3_MAX, E4M3_MAX).to(torch.float8_e4m3fn), scale
    if granularity == "channel":
        _check_last_dim(x, 1, "fp8 (channel)")
        scale = _fp8_scale(xf.abs().amax(dim=-1))
        return (xf / scale[..., None]).clamp(-E4M3_MAX, E4M3_MAX).to(torch.float8_e4m3fn), scale
    if x.dim() < 2:
        raise TruepeakError("fp8 block128 scaling needs a tensor [..., N, K] with N and K multiples of 128, "
                            f"got shape {tuple(x.shape)}")
    n, k = int(x.shape[-2]), int(x.shape[-1])
    if n % FP8_BLOCK or k % FP8_BLOCK or n == 0 or k == 0:
        raise TruepeakError(f"fp8 block128 scaling needs N and K (the last two dimensions) to be multiples of 128, "
                            f"got N={n}, K={k}")
    b = xf.reshape(*x.shape[:-2], n // FP8_BLOCK, FP8_BLOCK, k // FP8_BLOCK, FP8_BLOCK)
    scale = _fp8_scale(b.abs().amax(dim=(-3, -1)))
    q = (b / scale[..., :, None, :, None]).clamp(-E4M3_MAX, E4M3_MAX).to(torch.float8_e4m3fn)
    return q.reshape(x.shape), scale


def dequantize_fp8(values: Any, scales: Any, granularity: str = "channel") -> Any:
    """FP8 + fp32 scales → float32 (inverse of :func:`quantize_fp8`)."""
    _check_granularity(granularity)
    v = values.float()
    if granularity == "tensor":
        return v * scales
    if granularity == "channel":
        return v * scales[..., None]
    n, k = v.shape[-2], v.shape[-1]
    b = v.reshape(*v.shape[:-2], n // FP8_BLOCK, FP8_BLOCK, k // FP8_BLOCK, FP8_BLOCK)
    return (b * scales[..., :, None, :, None]).reshape(v.shape)


# -- byte counts -------------------------------------------------------------------------------------------------------
def quantized_nbytes(*tensors: Any) -> int:
    """Bytes stored by the given tensors (packed values + scales), e.g. ``quantized_nbytes(*quantize_nvfp4(w)[:2])``.
    NVFP4's 4-byte global scale is per tensor and left out, as :mod:`truepeak.formats` does (docs/method.md,
    'Counting FLOP and bytes')."""
    return sum(int(t.numel()) * int(t.element_size()) for t in tensors)
