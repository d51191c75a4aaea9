"""Number formats: bits per value *including* block-scale overhead, and the byte count of a matrix.

Pure Python. Each :class:`Format` knows its payload width, its block scale (for MX / NV block-scaled formats), which
catalog peak applies to it (``rate``), its default accumulator (:func:`default_accumulate`, the one rule), and the
format a GEMM on it usually writes. :func:`check_scaling` is the one rule for which fp32 scale layouts a format takes.

Sources:
    - OCP Microscaling (MX) Formats Specification v1.0: MXFP8/MXFP6/MXFP4 share one E8M0 (8-bit) scale per 32 values.
    - NVIDIA NVFP4 (Blackwell): E2M1 values with one E4M3 (8-bit) scale per 16 values, plus one FP32 per-tensor scale.
      The per-tensor FP32 scale is 4 bytes per tensor and is *not* counted here (0.00005 % of a 7168 x 2048 weight);
      NVFP4 is 4 + 8/16 = 4.5 bits = 0.5625 B per value (docs/method.md, 'Counting FLOP and bytes').
    - TF32 is a compute mode: values are stored as FP32 (32 bits) and rounded to a 10-bit mantissa inside the tensor core.
    - FP8 scales (tensorwise, rowwise, 128-blockwise as in DeepSeek-V3) are FP32 (4 bytes) each, as torch._scaled_mm and
      DeepGEMM take them.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from truepeak.errors import TruepeakError, UnknownNameError, closest


@dataclass(frozen=True)
class Format:
    """One number format.

    Attributes:
        name: canonical name (``"nvfp4"``).
        element_bits: payload bits per value (4 for nvfp4, 32 for tf32 because it is stored as fp32).
        rate: the catalog peak that governs its throughput: fp32, tf32, bf16, fp16, fp8, fp6, fp4 or int8.
        output: name of the format a GEMM on these inputs writes by default.
        block_size: values sharing one scale (16 for nvfp4, 32 for MX formats), or ``None`` without block scales.
        scale_bits: bits of one block scale (8 for E8M0 and E4M3 scales).
        torch_dtype: name of the torch dtype holding the payload, if torch has one.
        aliases: other spellings accepted by :func:`get_format`.
        description: one line for tables and ``--help``.
    """

    name: str
    element_bits: int
    rate: str
    output: str
    block_size: int | None = None
    scale_bits: int = 0
    torch_dtype: str | None = None
    aliases: tuple[str, ...] = field(default=())
    description: str = ""

    @property
    def accumulate(self) -> str:
        """Default accumulator precision: :func:`default_accumulate` of :attr:`rate` (``"fp32"``; ``"int32"`` for int8)."""
        return default_accumulate(self.rate)

    @property
    def bits_per_value(self) -> float:
        """Average bits per value including block scales: element_bits + scale_bits / block_size."""
        if self.block_size:
            return self.element_bits + self.scale_bits / self.block_size
        return float(self.element_bits)

    @property
    def bytes_per_value(self) -> float:
        """Average bytes per value including block scales (nvfp4: 0.5625, mxfp4: 0.53125)."""
        return self.bits_per_value / 8

    @property
    def is_block_scaled(self) -> bool:
        """True for formats whose values carry their own block scales (mxfp8, mxfp6, mxfp4: one E8M0 per 32 values;
        nvfp4: one E4M3 per 16). Their scale bytes are always counted and they take no ``scaling``."""
        return self.block_size is not None

    def values_bytes(self, count: int | float) -> float:
        """Bytes of ``count`` values, block scales included (assumes whole blocks). 70e9 nvfp4 values = 39.375e9 B."""
        return count * self.bytes_per_value

    def matrix_bytes(self, outer: int, inner: int, scaling: str | None = None, *, weight: bool = False) -> int:
        """Bytes of an ``outer x inner`` matrix whose block scales run along ``inner`` (the GEMM's K).

        Args:
            outer: rows (M for A, N for a weight stored N x K).
            inner: the reduction dimension K; block scales group values along it.
            scaling: for fp8 and int8 only: ``"tensor"`` (one fp32 scale), ``"row"`` (one fp32 scale per outer index),
                ``"block128"`` (DeepSeek-V3 style: 1 x 128 blocks for activations, 128 x 128 for weights). ``None``
                counts no scale. Which format takes which scaling is :func:`check_scaling`'s rule: block-scaled formats
                carry their own scales (always counted) and 16/32-bit formats take none.
            weight: with ``scaling="block128"``, use 128 x 128 blocks (weights) instead of 1 x 128 (activations).

        Returns:
            Bytes, rounded up to a whole byte. A partial last block still stores a whole scale.

        Raises:
            TruepeakError: a dimension that is not a positive whole number, or a scaling this format does not take.
            UnknownNameError: an unknown scaling name.
        """
        check_positive_int("outer", outer)
        check_positive_int("inner", inner)
        scaling = check_scaling(self, scaling)
        payload = outer * inner * self.element_bits
        if self.block_size:
            payload += outer * math.ceil(inner / self.block_size) * self.scale_bits
        return math.ceil(payload / 8) + 4 * _scale_count(scaling, outer, inner, weight)


    def block_padding_note(self, inner: int, scaling: str | None = None) -> str | None:
        """Say so when ``inner`` (the GEMM's K) is not a whole number of scale blocks, else None.

        :meth:`matrix_bytes` counts a partial last block with a whole scale, which is what is stored (the byte count is
        right), but a user who picked K = 1 in nvfp4 sees 1.5 B per value and should be told why. Blocks are this
        format's own (16 values for nvfp4, 32 for the MX formats) or, with ``scaling="block128"``, the 128-value fp32
        scale blocks of fp8 / int8.

        Returns:
            e.g. ``"K=1 is not a multiple of nvfp4's 16-value block: each row stores 1 partial block, counted whole
            (its 8-bit scale serves 1 of 16 values)"``; None for whole blocks or a format without blocks.

        Raises:
            TruepeakError: ``inner`` is not a positive whole number, or a scaling this format does not take.
            UnknownNameError: an unknown scaling name.
        """
        check_positive_int("K", inner)
        scaling = check_scaling(self, scaling)
        if self.block_size:
            block, what, scale = self.block_size, "block", f"{self.scale_bits}-bit scale"
        elif scaling == "block128":
            block, what, scale = 128, "scale block (block128)", "fp32 scale"
        else:
            return None
        rest = inner % block
        if rest == 0:
            return None
        return (f"K={inner} is not a multiple of {self.name}'s {block}-value {what}: each row stores 1 partial block, "
                f"counted whole (its {scale} serves {rest} of {block} values)")


def default_accumulate(rate: str) -> str:
    """The accumulator a rate's GEMMs use unless told otherwise: ``"int32"`` for integer rates (int8), ``"fp32"`` for
    every float rate (bf16/fp16/fp8 GEMMs in PyTorch accumulate in fp32). The one rule for the catalog, claims and the
    CLI; a peak with another accumulator (the GeForce fp16-accumulate rates) is labelled as such."""
    return "int32" if rate.startswith("int") else "fp32"


#: The accumulators a peak can be published for: fp32 (float default), fp16 (the GeForce fast path), int32 (int8).
ACCUMULATORS = ("fp32", "fp16", "int32")


def check_accumulate(accumulate: str | None) -> str | None:
    """Return ``accumulate`` (None passes: the format's default); UnknownNameError (one line listing
    :data:`ACCUMULATORS`) for any other value."""
    if accumulate is None or accumulate in ACCUMULATORS:
        return accumulate
    raise UnknownNameError(f"unknown accumulator {accumulate!r}; known: {', '.join(ACCUMULATORS)}")


def check_positive_int(name: str, value: object) -> int:
    """Return ``value`` if it is a positive whole number (an ``int``, not a ``bool``).

    Raises:
        TruepeakError: one line naming ``name`` and the bad value.
    """
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise TruepeakError(f"{name}={value!r} is not a positive whole number")
    return value


SCALINGS = ("tensor", "row", "block128")


def _scale_count(scaling: str | None, outer: int, inner: int, weight: bool) -> int:
    """fp32 scales of a matrix under a scaling :func:`check_scaling` accepted (None: none)."""
    if scaling is None:
        return 0
    if scaling == "tensor":
        return 1
    if scaling == "row":
        return outer
    return (math.ceil(outer / 128) if weight else outer) * math.ceil(inner / 128)  # block128


_FORMATS: tuple[Format, ...] = (
    Format("fp32", 32, "fp32", "fp32", torch_dtype="float32", aliases=("float32", "float", "f32"),
           description="IEEE single precision on the CUDA cores (no TF32)"),
    Format("tf32", 32, "tf32", "fp32", torch_dtype="float32", aliases=("tensorfloat32",),
           description="fp32 storage, 10-bit-mantissa tensor-core math"),
    Format("bf16", 16, "bf16", "bf16", torch_dtype="bfloat16", aliases=("bfloat16",),
           description="bfloat16, fp32 accumulate"),
    Format("fp16", 16, "fp16", "fp16", torch_dtype="float16", aliases=("float16", "half"),
           description="IEEE half, fp32 accumulate"),
    Format("fp8_e4m3", 8, "fp8", "bf16", torch_dtype="float8_e4m3fn",
           aliases=("fp8", "e4m3", "float8_e4m3fn", "fp8e4m3"), description="fp8 E4M3 (fp32 scales: tensor, row or 128-block)"),
    Format("fp8_e5m2", 8, "fp8", "bf16", torch_dtype="float8_e5m2",
           aliases=("e5m2", "float8_e5m2", "fp8e5m2"), description="fp8 E5M2 (fp32 scales: tensor, row or 128-block)"),
    Format("mxfp8", 8, "fp8", "bf16", block_size=32, scale_bits=8, torch_dtype="float8_e4m3fn",
           aliases=("mxfp8_e4m3",), description="OCP MX fp8 E4M3, one E8M0 scale per 32 values"),
    Format("mxfp6", 6, "fp6", "bf16", block_size=32, scale_bits=8,
           aliases=("mxfp6_e3m2", "mxfp6_e2m3"), description="OCP MX fp6, one E8M0 scale per 32 values"),
    Format("mxfp4", 4, "fp4", "bf16", block_size=32, scale_bits=8, torch_dtype="float4_e2m1fn_x2",
           aliases=("mxfp4_e2m1",), description="OCP MX fp4 E2M1, one E8M0 scale per 32 values"),
    Format("nvfp4", 4, "fp4", "bf16", block_size=16, scale_bits=8, torch_dtype="float4_e2m1fn_x2",
           aliases=("fp4", "nvfp4_e2m1"), description="NVIDIA fp4 E2M1, one E4M3 scale per 16 values"),
    Format("int8", 8, "int8", "int32", torch_dtype="int8", aliases=("i8",),
           description="8-bit integer, int32 accumulate (rates in TOPS)"),
    Format("int32", 32, "int32", "int32", torch_dtype="int32", description="32-bit integer (GEMM output only)"),
)

#: Formats a user can measure or ask about (int32 exists only as an int8 GEMM's output).
FORMAT_NAMES: tuple[str, ...] = tuple(f.name for f in _FORMATS if f.name != "int32")
#: Peak keys in the spec catalog, in display order.
RATES: tuple[str, ...] = ("fp32", "tf32", "bf16", "fp16", "fp8", "fp6", "fp4", "int8")

_BY_NAME: dict[str, Format] = {}
for _f in _FORMATS:
    for _n in (_f.name, *_f.aliases):
        _BY_NAME[_n.lower().replace("-", "_")] = _f


#: Rate names that are not formats, and the format to use instead.
RATE_NOT_FORMAT = {"fp6": "mxfp6"}

#: Aliases that pick one of several formats, and what else the user may have meant.
AMBIGUOUS_ALIASES = {"fp4": "give mxfp4 for the OCP MX format", "fp8": "give fp8_e5m2 for E5M2"}

ALIASES_HINT = "aliases are accepted, e.g. fp8 = fp8_e4m3, fp4 = nvfp4, bfloat16 = bf16, half = fp16, e5m2 = fp8_e5m2"


def _key(name: object) -> str:
    return str(name).strip().lower().replace("-", "_")


def get_format(name: str | Format) -> Format:
    """Look up a format by name or alias (case-insensitive; ``-`` and ``_`` are the same).

    Raises:
        UnknownNameError: the name is unknown; the message lists the closest canonical names, all canonical names, and
            says aliases are accepted. A rate that is no format (``fp6``) names the format to use (``mxfp6``).
    """
    if isinstance(name, Format):
        return name
    key = _key(name)
    try:
        return _BY_NAME[key]
    except KeyError:
        pass
    if key in RATE_NOT_FORMAT:
        use = RATE_NOT_FORMAT[key]
        raise UnknownNameError(f"unknown number format {name!r}: {key} is a rate, not a format: use {use} "
                               f"({_BY_NAME[use].description})")
    near: list[str] = []
    for hit in closest(key, _BY_NAME):
        canonical = _BY_NAME[hit].name
        if canonical not in near:
            near.append(canonical)
    hint = f" (did you mean {', '.join(near)}?)" if near else ""
    raise UnknownNameError(f"unknown number format {name!r}{hint}; known: {', '.join(FORMAT_NAMES)}; {ALIASES_HINT}")


def alias_note(name: str | Format) -> str | None:
    """One line saying how an alias was read (``"fp4 read as nvfp4 (...)"``), or None for a canonical name."""
    if isinstance(name, Format):
        return None
    f = get_format(name)
    key = _key(name)
    if key == f.name:
        return None
    other = AMBIGUOUS_ALIASES.get(key)
    return f"{key} read as {f.name} ({f.description}{'; ' + other if other else ''})"


def check_scaling(fmt: str | Format, scaling: str | None, flag: str = "scaling") -> str | None:
    """Validate an fp8/int8 scale layout for ``fmt`` and return it (None passes through).

    Raises:
        UnknownNameError: ``scaling`` is not one of :data:`SCALINGS`.
        TruepeakError: the format takes no scaling (block-scaled formats carry their own; 16/32-bit formats have none).
    """
    if scaling is None:
        return None
    f = get_format(fmt)
    if scaling not in SCALINGS:
        raise UnknownNameError(f"unknown {flag} {scaling!r}; accepted: {', '.join(SCALINGS)} (fp8 and int8 only)")
    if f.is_block_scaled:
        raise TruepeakError(f"{f.name} carries its own block scales; {flag} {scaling!r} does not apply")
    if f.element_bits != 8:
        raise TruepeakError(f"{flag} {scaling!r} applies to fp8 and int8 inputs, not {f.name}")
    return scaling


def all_formats() -> tuple[Format, ...]:
    """Every user-facing format, in display order."""
    return tuple(get_format(n) for n in FORMAT_NAMES)
