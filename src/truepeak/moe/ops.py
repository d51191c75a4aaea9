"""The ops of a decode step: FLOP, bytes and a roofline time per op, and which format's peak governs each.

Pure Python. One :class:`OpCost` is one kind of kernel call on one GPU (the GPU on the slowest pipeline stage), with
the number of times it runs per decode step. Its time comes from the roofline (``max(FLOP / peak, bytes /
bandwidth)``; Williams, Waterman, Patterson, CACM 52(4), 2009), from a measurement (:mod:`truepeak.moe.measured`), or,
for a collective, from the α–β model of :mod:`truepeak.comm.model`.

Formats (:func:`resolve_formats`): weights, GEMM activations (the A operand) and KV cache each have a
:class:`truepeak.formats.Format`; bytes include block scales (nvfp4 0.5625 B per value, mxfp4 0.53125; docs/method.md,
'Counting FLOP and bytes').
The compute peak of a GEMM is the dense peak of the WIDER of its two input formats on the device (an nvfp4 x bf16
GEMM runs at the bf16 rate). A weight format the device cannot compute in (nvfp4 / mxfp4 on Hopper or Ada, which have
no fp4 tensor cores; fp8 on Ampere) is dequantised inside the kernel (Marlin-style W4A16 / W8A16): its bytes stay
those of the stored format, its compute runs at the activation format's peak. Attention over the KV cache, the router
and lm_head compute at the bf16 peak (FlashAttention / FlashMLA compute in bf16; routers and lm_head are left
unquantised in NVFP4 / FP8 checkpoints).

fp8 / int8 scales (never dropped: docs/method.md, 'Counting FLOP and bytes'): every weight and activation byte figure of
an fp8 / int8 operand includes its fp32 scales, counted by :meth:`truepeak.formats.Format.matrix_bytes`. A checkpoint
with ``weight_block_size`` [128, 128] (DeepSeek-V3, Kimi-K2, Qwen3-FP8) stores one fp32 scale per 128 x 128 weight
block, and its serving path (vLLM / SGLang block-fp8, DeepGEMM) quantises activations per 1 x 128 group with one fp32
scale each (scaling ``"block128"``). fp8 / int8 weights without a block size are assumed per-channel: one fp32 scale
per output row of each weight, with per-token activation scales (scaling ``"row"``, llm-compressor's FP8_DYNAMIC /
W8A8 scheme); a per-tensor checkpoint stores 4 B per tensor instead (fewer bytes), and the plan says which was
assumed (:attr:`Formats.weight_scaling`). DeepSeek-V3, one layer's 256 routed experts in fp8 block128:
7,516,192,768 + 3,758,096,384 B of values + 256·(32·56 + 56·16)·4 = 2,752,512 B of scales. Collectives carry the bf16
hidden states (2 B per value, as vLLM and SGLang do; GLM-5: 6144 × 2 B = 12 KiB per token), whatever the GEMM
activation format.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from truepeak.errors import TruepeakError
from truepeak.formats import Format, get_format
from truepeak.moe.findings import ActivationsFallback, Finding, WeightsDequantised
from truepeak.units import fmt_number, fmt_size

#: Op groups, in display order. "communication" ops have no FLOP; their time is a collective model's.
GROUPS = ("attention", "kv_cache", "router", "routed_experts", "shared_experts", "dense_mlp", "lm_head",
          "communication")
#: Bytes per value of the hidden states that collectives and the residual stream carry (bf16).
HIDDEN_BYTES = 2
BF16 = get_format("bf16")


@dataclass(frozen=True)
class Formats:
    """The formats of one plan and the compute peaks they imply on one accelerator.

    Attributes:
        weights, activations, kv_cache: the formats (activations = the A operand of the GEMMs).
        gemm_compute: the format whose dense peak governs weight GEMMs (the wider input, or the activation format
            when the weights are dequantised).
        gemm_peak: that dense peak, FLOP/s.
        bf16_peak: the dense bf16 peak, FLOP/s (attention core, router, lm_head).
        dequantised: True when the device has no tensor-core path for the weight format.
        notes: what the user must know about the choice, as findings (:mod:`truepeak.moe.findings`): an activation
            format the device lacks (:class:`~truepeak.moe.findings.ActivationsFallback`), dequantised weights
            (:class:`~truepeak.moe.findings.WeightsDequantised`); empty when neither.
        groups: per-group overrides, ``((group, Formats), ...)`` (``--weights routed_experts=nvfp4,attention=fp8``):
            the ops of that group use those formats (:meth:`for_group`).
        weight_scaling: fp32 scale layout of ``weights`` for :meth:`truepeak.formats.Format.matrix_bytes`
            (``"block128"``: one per 128 x 128 block, the checkpoint's ``weight_block_size``; ``"row"``: one per
            output row, assumed when the checkpoint gives no block size) when they are fp8 / int8, else None
            (block-scaled formats carry their own).
        activation_scaling: the same for ``activations`` (1 x 128 groups with ``"block128"``, per token with
            ``"row"``).
    """

    weights: Format
    activations: Format
    kv_cache: Format
    gemm_compute: Format
    gemm_peak: float
    bf16_peak: float
    dequantised: bool = False
    notes: tuple[Finding, ...] = ()
    weight_scaling: str | None = None
    activation_scaling: str | None = None
    groups: tuple = ()

    def for_group(self, group: str) -> Formats:
        """The formats of op ``group``: its own (a per-group weight format, :attr:`groups`) or these."""
        for g, f in self.groups:
            if g == group:
                return f
        return self

    @property
    def group_weights(self) -> dict[str, str]:
        """Op group → weight format name of the per-group overrides (empty: one format for every group)."""
        return {g: f.weights.name for g, f in self.groups}

    def scaling_of(self, fmt: Format) -> str | None:
        """The scale layout of operand format ``fmt``: :attr:`weight_scaling` for the plan's weight format,
        :attr:`activation_scaling` for its activation format, None for anything else (bf16 router / lm_head)."""
        if fmt is self.weights:
            return self.weight_scaling
        if fmt is self.activations:
            return self.activation_scaling
        return None

    def weight_bytes(self, fmt: Format, n: int, k: int, count: float = 1) -> float:
        """Bytes of ``count`` weights of N x K (stored N x K, scales along K) in ``fmt``, scales included:
        ``count x fmt.matrix_bytes(n, k, scaling, weight=True)`` (``count`` may be an expected, fractional number of
        active experts). DeepSeek-V3 expert gate+up in fp8 block128: 4096·7168 + 32·56·4 = 29,367,296 B."""
        if count <= 0:
            return 0.0
        return count * fmt.matrix_bytes(n, k, self.scaling_of(fmt) if fmt is self.weights else None, weight=True)

    def activation_bytes(self, fmt: Format, m: float, k: int) -> float:
        """Bytes of M x K activations in ``fmt`` (scales along K included), for a possibly fractional expected row
        count M: linear between the :meth:`truepeak.formats.Format.matrix_bytes` of the whole row counts around M
        (exact for per-row and 1 x 128 scales, which grow by whole rows; 0 rows = 0 B)."""
        if m <= 0:
            return 0.0
        scaling = self.activation_scaling if fmt is self.activations else None
        lo = int(m)
        hi = lo if lo == m else lo + 1
        b_hi = fmt.matrix_bytes(hi, k, scaling)
        if hi == lo:
            return float(b_hi)
        b_lo = fmt.matrix_bytes(lo, k, scaling) if lo else 0
        return b_lo + (m - lo) * (b_hi - b_lo)

    def weight_values_bytes(self, fmt: Format, count: float, k: int) -> float:
        """Bytes of ``count`` weight values in ``fmt`` spread over matrices with reduction dimension ``k`` (memory of
        layers counted by parameters, e.g. attention at K = H): the bytes per value of one [128 x k] weight
        (:meth:`truepeak.formats.Format.matrix_bytes`, scales included) times ``count``; exact for whole 128-row
        blocks, and for formats without fp32 scales it is :meth:`truepeak.formats.Format.values_bytes`."""
        if count <= 0:
            return 0.0
        scaling = self.weight_scaling if fmt is self.weights else None
        if scaling is None:
            return fmt.values_bytes(count)
        return count * fmt.matrix_bytes(128, k, scaling, weight=True) / (128 * k)

    @property
    def mixed(self) -> bool:
        """The weight format is native but the GEMMs compute at the wider activation format's peak."""
        return not self.dequantised and self.gemm_compute.name != self.weights.name

    def to_dict(self) -> dict:
        """JSON-ready (FLOP/s); ``findings``: :attr:`notes` as :meth:`truepeak.moe.findings.Finding.to_dict`."""
        return {"weights": self.weights.name, "activations": self.activations.name, "kv_cache": self.kv_cache.name,
                "gemm_compute": self.gemm_compute.name, "gemm_peak_flops": self.gemm_peak,
                "bf16_peak_flops": self.bf16_peak, "dequantised": self.dequantised,
                "weight_scaling": self.weight_scaling, "activation_scaling": self.activation_scaling,
                "group_weights": self.group_weights, "findings": [n.to_dict() for n in self.notes]}


def _native(acc, fmt: Format) -> bool:
    return acc.has_rate(fmt)


def resolve_formats(acc, weights: str, activations: str | None = None, kv_cache: str | None = None, *,
                    weight_block_size: tuple[int, ...] | None = None) -> Formats:
    """The formats of a plan on ``acc`` (:class:`truepeak.hardware.catalog.Accelerator`) and the peaks they imply.

    Args:
        weights: weight format name (nvfp4, mxfp4, fp8, bf16, ... : any :func:`truepeak.formats.get_format` name).
        activations: GEMM activation format; default: the weight format when the device computes in it natively and
            it is at most 8 bits wide (W4A4 nvfp4 on Blackwell, W8A8 fp8 on Hopper), else bf16.
        kv_cache: KV-cache format; default bf16 (vLLM's ``--kv-cache-dtype auto`` for a bf16 model).
        weight_block_size: the checkpoint's ``quantization_config.weight_block_size`` (``(128, 128)`` for
            DeepSeek-V3), or None: picks the fp32 scale layout of fp8 / int8 weights and activations
            (:func:`scalings`).

    Raises:
        UnknownNameError: an unknown format name.
        TruepeakError: int8 activations with <= 8-bit float weights, or <= 8-bit float activations with int8 weights
            (no tensor-core GEMM mixes them; weight-only int8 with bf16 activations is fine).
        UnsupportedError: the device has no bf16 (or fp16) peak at all, so nothing can be planned on it.
    """
    w = get_format(weights)
    kv = get_format(kv_cache) if kv_cache else BF16
    notes: list[Finding] = []
    if not _native(acc, BF16):
        base = get_format("fp16")
        acc.peak(base)  # raises UnsupportedError with the device's peaks when there is no 16-bit path either
    else:
        base = BF16
    bf16_peak = acc.dense_flops(base)
    if activations:
        a = get_format(activations)
        if (a.rate == "int8") != (w.rate == "int8") and w.element_bits <= 8 and a.element_bits <= 8:
            raise TruepeakError(f"--activations {a.name} with --weights {w.name}: tensor cores multiply int8 by int8 "
                                "and 8-bit floats by 8-bit floats only; give int8 for both (W8A8 int8), bf16 "
                                "activations (weight-only), or fp8 activations for float weights")
        if not _native(acc, a):
            notes.append(ActivationsFallback(acc.name, a.name, base.name))
            a = base
    else:
        a = w if (_native(acc, w) and w.bits_per_value <= 8) else base
    if _native(acc, w):
        compute = w if w.bits_per_value >= a.bits_per_value else a
        dequant = False
    else:
        compute, dequant = a, True
        why = ("no_fp4" if w.rate == "fp4" else
               "no_rate" if not w.is_block_scaled or acc.architecture.block_scaled else "no_block_scaling")
        notes.append(WeightsDequantised(acc.name, acc.architecture.key, why, w.rate, w.name, w.element_bits, a.name,
                                        a.element_bits, acc.dense_flops(a), w.bytes_per_value))
    peak = acc.dense_flops(compute)
    ws, as_ = scalings(w, a, weight_block_size)
    return Formats(w, a, kv, compute, peak, bf16_peak, dequant, tuple(notes), ws, as_)


def _takes_scales(fmt: Format) -> bool:
    """fp8 / int8 (8-bit, no block scales of its own): the formats that take fp32 scales (formats.check_scaling)."""
    return fmt.element_bits == 8 and not fmt.is_block_scaled and fmt.rate in ("fp8", "int8")


def scalings(weights: Format, activations: Format, weight_block_size=None) -> tuple[str | None, str | None]:
    """``(weight_scaling, activation_scaling)``: the fp32 scale layouts of fp8 / int8 operands (module docstring).
    ``weight_block_size`` (128, 128) → ``"block128"`` (128 x 128 weight blocks, 1 x 128 activation groups); any other
    block size is not modelled and raises; None → per-channel weights (``"row"``, an assumption the plan states) and
    per-token activations. Formats without fp32 scales get None.

    Raises:
        TruepeakError: a ``weight_block_size`` other than [128, 128] with fp8 / int8 weights.
    """
    w_s = _takes_scales(weights)
    a_s = _takes_scales(activations)
    if not (w_s or a_s):
        return None, None
    block = tuple(weight_block_size) if weight_block_size else None
    if block is not None and w_s:
        if block != (128, 128):
            raise TruepeakError(f"weight_block_size {list(block)} is not modelled; fp8 / int8 block scales are "
                                "counted for [128, 128] blocks only (DeepSeek-V3 style)")
        return "block128", ("block128" if a_s else None)
    return ("row" if w_s else None), ("row" if a_s else None)


@dataclass(frozen=True)
class OpCost:
    """One kind of call on one GPU, and its cost.

    Attributes:
        name: what it is (``"routed experts gate+up"``).
        group: one of :data:`GROUPS`.
        calls: times it runs per decode step on this GPU (layers of the stage × micro-batches).
        flop: FLOP of one call (2·M·N·K for a GEMM); 0 for a collective.
        bytes: DRAM bytes of one call (weights + activations + KV cache); for a collective, the nccl-tests size S.
        weight_bytes: the weight part of ``bytes``.
        time_s: seconds per call.
        bound: ``"compute"``, ``"memory"`` or ``"communication"``.
        source: ``"roofline"``, ``"measured: ..."`` or the collective model's source.
        shape: the shape in the field's terms (``"M=16 N=512 K=6144 x 256 experts"``).
        detail: extra facts for the renderer (tokens per expert, collective op and ranks, ...).
    """

    name: str
    group: str
    calls: int
    flop: float
    bytes: float
    weight_bytes: float
    time_s: float
    bound: str
    source: str = "roofline"
    shape: str = ""
    detail: dict = field(default_factory=dict)

    @property
    def total_s(self) -> float:
        """Seconds per decode step: calls × time_s."""
        return self.calls * self.time_s

    @property
    def intensity(self) -> float | None:
        """FLOP per DRAM byte of one call (None for a collective or an op without bytes)."""
        if self.group == "communication" or not self.bytes:
            return None
        return self.flop / self.bytes

    @property
    def measured(self) -> bool:
        return self.source.startswith("measured")

    def to_dict(self) -> dict:
        return {"name": self.name, "group": self.group, "calls": self.calls, "flop": self.flop, "bytes": self.bytes,
                "weight_bytes": self.weight_bytes, "time_s": self.time_s, "total_s": self.total_s,
                "bound": self.bound, "intensity": self.intensity, "source": self.source, "shape": self.shape,
                "detail": dict(self.detail)}


def roofline_op(name: str, group: str, calls: int, flop: float, nbytes: float, weight_bytes: float, peak: float,
                bandwidth: float, shape: str = "", **detail) -> OpCost:
    """An :class:`OpCost` timed by the roofline: ``max(flop / peak, nbytes / bandwidth)``; ``bound`` says which term
    won (memory on a tie). ``peak`` in FLOP/s, ``bandwidth`` in B/s."""
    if peak <= 0 or bandwidth <= 0:
        raise TruepeakError(f"{name}: the roofline needs a positive peak and bandwidth")
    tc, tm = flop / peak, nbytes / bandwidth
    return OpCost(name, group, calls, float(flop), float(nbytes), float(weight_bytes), max(tc, tm),
                  "compute" if tc > tm else "memory", "roofline", shape, dict(detail))


def gemm_cost(name: str, group: str, calls: int, m: int, n: int, k: int, weights: Format, activations: Format,
              peak: float, bandwidth: float, *, batch: int = 1, out: Format = BF16, formats: Formats | None = None,
              **detail) -> OpCost:
    """A (batched) GEMM C[M, N] = A[M, K] · W[N, K]ᵀ, ``batch`` independent weights (heads / experts):
    FLOP = 2·M·N·K·batch; bytes = weights N·K·batch in ``weights`` + A M·K·batch in ``activations`` + C M·N·batch
    in ``out`` (bf16), each element read or written once (block scales included; with ``formats``, the fp32 scales of
    fp8 / int8 operands too: :meth:`Formats.weight_bytes`, :meth:`Formats.activation_bytes`)."""
    if m <= 0:
        return OpCost(name, group, calls, 0.0, 0.0, 0.0, 0.0, "memory", "roofline", "no tokens", dict(detail))
    if formats is not None:
        wb = formats.weight_bytes(weights, n, k, batch)
        nbytes = wb + batch * formats.activation_bytes(activations, m, k) + out.values_bytes(m * n * batch)
    else:
        wb = weights.values_bytes(n * k * batch)
        nbytes = wb + activations.values_bytes(m * k * batch) + out.values_bytes(m * n * batch)
    shape = f"M={fmt_number(m, 3)} N={n} K={k}" + (f" x {batch}" if batch > 1 else "")
    return roofline_op(name, group, calls, 2.0 * m * n * k * batch, nbytes, wb, peak, bandwidth, shape,
                       m=m, n=n, k=k, batch=batch, **detail)


def with_time(op: OpCost, time_s: float, source: str, **detail) -> OpCost:
    """``op`` with a measured (or interpolated) time; ``bound`` stays the roofline's (which resource limits the op does
    not change with where its time comes from) and the roofline time is kept in ``detail["roofline_s"]``."""
    d = dict(op.detail)
    d.update(detail)
    d["roofline_s"] = op.time_s
    return OpCost(op.name, op.group, op.calls, op.flop, op.bytes, op.weight_bytes, float(time_s), op.bound, source,
                  op.shape, d)


def comm_op(name: str, calls: int, nbytes: float, time_s: float, source: str, **detail) -> OpCost:
    """A collective: ``nbytes`` is its nccl-tests total size S, ``time_s`` the model's or measurement's seconds."""
    return OpCost(name, "communication", calls, 0.0, float(nbytes), 0.0, float(time_s), "communication", source,
                  f"S={fmt_size(nbytes)}", dict(detail))


__all__ = ["GROUPS", "HIDDEN_BYTES", "Formats", "resolve_formats", "scalings", "OpCost", "roofline_op", "gemm_cost",
           "with_time", "comm_op"]
