"""A GEMM's inputs: seeded uniform values (never zeros unless asked: docs/method.md, 'Random inputs'), fp8 scales, the
block-scaled operands quantised by :mod:`truepeak.kernels.quant` (:func:`make_operand`), and the weight sets a decode
sweep over M shares (:class:`WeightCache`). torch is imported lazily
(:func:`~truepeak.bench.gemm.support.torch_module`)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from truepeak.bench.gemm.scales import swizzle_block_scales
from truepeak.bench.gemm.support import fp8_scaling, torch_module
from truepeak.formats import Format, get_format


def _uniform(torch, shape: tuple[int, ...], fmt: Format, device: str, seed: int, inputs: str = "random",
             dtype: Any = None):
    """Uniform [-1, 1] values in ``fmt``'s torch dtype (or ``dtype``; int8: integers in [-128, 127]); deterministic
    for ``seed``. ``inputs="zeros"`` gives zeros (only when asked, and labelled: docs/method.md,
    'Random inputs')."""
    dtype = dtype if dtype is not None else getattr(torch, fmt.torch_dtype)
    if inputs == "zeros":
        return torch.zeros(shape, device=device, dtype=dtype)
    gen = torch.Generator(device=device)
    gen.manual_seed(seed)
    if fmt.name == "int8":
        return torch.randint(-128, 128, shape, generator=gen, device=device, dtype=torch.int8)
    x = torch.rand(shape, generator=gen, device=device, dtype=torch.float32)
    x.mul_(2).sub_(1)
    return x.to(dtype)


def _scale_values(torch, shape: tuple[int, ...], device: str, seed: int, inputs: str):
    """fp32 scales uniform in [0.25, 1] (ones for zero inputs)."""
    if inputs == "zeros":
        return torch.ones(shape, device=device, dtype=torch.float32)
    gen = torch.Generator(device=device)
    gen.manual_seed(seed)
    return torch.rand(shape, generator=gen, device=device, dtype=torch.float32).mul_(0.75).add_(0.25)


@dataclass
class Operand:
    """One matrix operand ready for the library call, and how to rebuild its values for the reference.

    Attributes:
        data: the tensor passed to the library ([rows, K]; fp4 packed [rows, K / 2]).
        scale: the scale tensor(s) passed to the library (None for unscaled formats).
        dequant: ``dequant(rows)`` -> float64 [rows, K] values the library multiplies (scales applied).
        factor: a scalar the output is multiplied by in the check (nvfp4 global scales), 1.0 otherwise.
    """

    data: Any
    scale: Any = None
    dequant: Callable[[int | None], Any] | None = None
    factor: float = 1.0


def make_operand(fmt: str | Format, rows: int, k: int, device: str, seed: int, *, scaling: str | None = None,
                 weight: bool = False, inputs: str = "random") -> Operand:
    """Build one operand (A: ``weight=False``, M x K; B: ``weight=True``, N x K) in ``fmt`` with its scales.

    fp8: data uniform [-1, 1] in e4m3 (e5m2 for B of fp8_e5m2); scales per ``scaling``: ``tensor`` a 0-d fp32 tensor
    (1.0, the mamf-finder setting), ``row`` [rows, 1] for A and [1, rows] for B, ``block128`` A [M, K/128] stored
    outer-dim-major (stride [1, M]) and B's 128 x 128 scales [N/128, K/128] padded to L4 = round_up(K/128, 4) columns
    and passed transposed ([L4, N/128], stride [1, L4]): the layouts torch's ``scaled_mm`` asks on sm_90 (pytorch
    test/test_scaled_matmul_cuda.py ``test_scaled_mm_block_wise_numerics``). Block-scaled formats: quantised with
    :mod:`truepeak.kernels.quant`, scales swizzled (:func:`swizzle_block_scales`).
    """
    torch = torch_module()
    f = get_format(fmt)
    s = fp8_scaling(f, scaling)
    if f.is_block_scaled:
        return _block_operand(torch, f, rows, k, device, seed, inputs)
    if f.name in ("fp8_e4m3", "fp8_e5m2"):
        dtype = torch.float8_e5m2 if (f.name == "fp8_e5m2" and weight) else torch.float8_e4m3fn
        data = _uniform(torch, (rows, k), f, device, seed, inputs, dtype=dtype)
        if s == "tensor":
            scale = torch.ones((), device=device, dtype=torch.float32)
            full = scale
        elif s == "row":
            vals = _scale_values(torch, (rows, 1), device, seed + 1, inputs)
            scale = vals.reshape(1, rows).contiguous() if weight else vals
            full = vals
        else:  # block128
            if weight:
                blocks = _scale_values(torch, (-(-rows // 128), k // 128), device, seed + 1, inputs)
                l4 = -(-(k // 128) // 4) * 4
                padded = torch.ones((blocks.shape[0], l4), device=device, dtype=torch.float32)
                padded[:, : k // 128] = blocks
                scale = padded.t()
                full = blocks.repeat_interleave(128, 0)[:rows].repeat_interleave(128, 1)
            else:
                blocks = _scale_values(torch, (rows, k // 128), device, seed + 1, inputs)
                scale = outer_dim_major(torch, blocks)
                full = blocks.repeat_interleave(128, 1)

        def dequant(r: int | None = None, data=data, full=full):
            d = data if r is None else data[:r]
            sc = full if (full.dim() == 0 or full.shape[0] == 1) else (full if r is None else full[:r])
            return d.to(torch.float64) * sc.to(torch.float64)

        return Operand(data, scale, dequant)
    data = _uniform(torch, (rows, k), f, device, seed, inputs)
    return Operand(data, None, lambda r=None, data=data: (data if r is None else data[:r]).to(torch.float64))


def outer_dim_major(torch, blocks):
    """``blocks`` ([M, K/128] fp32) copied into storage of strides ``(1, M)``: the activation-scale layout torch's
    ``scaled_mm`` checks exactly on sm_90 (``torch/_meta_registrations.py``: ``stride(0) == 1`` and ``stride(1) == M``).

    ``blocks.t().contiguous().t()`` is not enough: at M = 1 the transposed view ``[K/128, 1]`` already counts as
    contiguous (a dimension of size 1 has no stride constraint), so no copy is made and the strides stay
    ``(K/128, 1)``, which ``scaled_mm`` refuses ("scale_a must have strides (1, 1)").
    """
    rows, cols = blocks.shape
    out = torch.empty_strided((rows, cols), (1, rows), device=blocks.device, dtype=blocks.dtype)
    out.copy_(blocks)
    return out


def _block_operand(torch, f: Format, rows: int, k: int, device: str, seed: int, inputs: str) -> Operand:
    """An mxfp8 / nvfp4 / mxfp4 operand from :mod:`truepeak.kernels.quant` (never run on a Blackwell GPU here)."""
    from truepeak.kernels import quant

    x = _uniform(torch, (rows, k), get_format("fp32"), device, seed, inputs)
    if f.name == "mxfp8":
        values, scales = quant.quantize_mxfp8(x)
        deq = quant.dequantize_mxfp8(values, scales)
        return Operand(values, swizzle_block_scales(scales).view(torch.float8_e8m0fnu),
                       lambda r=None, d=deq: (d if r is None else d[:r]).to(torch.float64))
    if f.name == "mxfp4":
        packed, scales = quant.quantize_mxfp4(x)
        deq = quant.dequantize_mxfp4(packed, scales)
        return Operand(packed.view(torch.float4_e2m1fn_x2), swizzle_block_scales(scales).view(torch.float8_e8m0fnu),
                       lambda r=None, d=deq: (d if r is None else d[:r]).to(torch.float64))
    packed, scales, global_scale = quant.quantize_nvfp4(x)
    deq = quant.dequantize_nvfp4(packed, scales, global_scale)
    # the library multiplies e2m1 x e4m3 scales only; the global scale's effect is measured from the dequantiser
    unit = quant.dequantize_nvfp4(packed, scales, torch.ones_like(torch.as_tensor(global_scale, dtype=torch.float32)))
    den = float((unit.double() * unit.double()).sum())
    factor = float((deq.double() * unit.double()).sum()) / den if den else 1.0
    return Operand(packed.view(torch.float4_e2m1fn_x2), swizzle_block_scales(scales),
                   lambda r=None, d=deq: (d if r is None else d[:r]).to(torch.float64), factor)


class WeightCache:
    """Weight sets (B, N x K) shared by the GEMMs of one (format, scaling, inputs, N, K) group, so a decode sweep over
    M draws them once.

    Holds one group at a time: asking for another group frees the previous one. Set ``j`` always has seed
    ``stable_seed("B", N, K, j)``, so the weights of a case do not depend on the order of the sweep.
    """

    def __init__(self) -> None:
        self._key: tuple | None = None
        self._sets: list[Operand] = []

    def get(self, fmt: Format, n: int, k: int, count: int, device: str, scaling: str | None = None,
            inputs: str = "random") -> list[Operand]:
        f = get_format(fmt)
        key = (f.name, fp8_scaling(f, scaling), inputs, n, k, device)
        if key != self._key:
            self.clear()
            self._key = key
        while len(self._sets) < count:
            j = len(self._sets)
            self._sets.append(make_operand(f, n, k, device, stable_seed("B", n, k, j), scaling=scaling, weight=True,
                                           inputs=inputs))
        return self._sets[:count]

    def clear(self) -> None:
        self._sets = []
        self._key = None


def stable_seed(*parts: Any) -> int:
    """A stable 63-bit seed from the parts (Python's ``hash`` of str is salted per process; this is not)."""
    h = 1469598103934665603
    for ch in repr(parts).encode():
        h = ((h ^ ch) * 1099511628211) & 0xFFFFFFFFFFFFFFFF
    return h & 0x7FFFFFFFFFFFFFFF


__all__ = ["Operand", "make_operand", "outer_dim_major", "WeightCache", "stable_seed"]
