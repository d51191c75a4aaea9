"""What one ``moe bench`` sweep measures: :class:`MoeBenchConfig`, a frozen configuration that validates itself.

Every field is checked when the object is built, before torch is imported, so bad input is refused on a laptop as on
a GPU machine, and nothing is measured or written. A refused field raises :class:`truepeak.errors.ConfigError` with
``field`` set to the field's name; the message writes a field in backticks (```ep` 3 does not divide the 256
experts``), which a front end may replace with its own spelling (the CLI writes its flag, ``--ep``). What only the
device can decide (whether there is a GPU, which fp4 kernel ``auto`` picks) is checked by
:func:`truepeak.bench.moe.job.run_bench`.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from typing import Any, Iterable

from truepeak.bench.moe.backends import BACKENDS
from truepeak.bench.moe.shapes import ExpertShape, expert_shape, tokens_for
from truepeak.errors import ConfigError, TruepeakError, closest, shown

#: Weight formats: bf16, fp8 (e4m3, per-channel fp32 scales), fp8_block (128 x 128 scales), nvfp4, mxfp4.
WEIGHT_FORMATS = ("bf16", "fp8", "fp8_block", "nvfp4", "mxfp4")
#: The fp4 kernels of truepeak's backend (nvfp4 / mxfp4 weights): auto picks block-scaled where it runs natively.
FP4_KERNELS = ("auto", "dequant", "block-scaled")
#: Activations of truepeak's kernel with fp8 weights: fp8 (w8a8) or fp16 (w8a16).
FP8_ACTIVATIONS = ("fp8", "fp16")
#: Activations of truepeak's kernels with fp4 weights (fp4: the block-scaled kernel only).
FP4_ACTIVATIONS = ("auto", "fp8", "fp16", "fp4")
#: Default mean tokens per expert of a sweep.
DEFAULT_TPE = (1, 2, 4, 8, 16, 32, 64, 128, 256)


def _names(value: Any, name: str) -> tuple[str, ...]:
    """A list of names as a tuple; a comma-separated string is a list (the CLI's form), not a sequence of letters."""
    if isinstance(value, bytes):
        raise ConfigError(f"`{name}` must be a list of names or a comma-separated string, got {value!r}", field=name)
    items = value.split(",") if isinstance(value, str) else list(value)
    return tuple(str(v) for v in items)


def _seconds(value: Any, name: str, low_ok: bool, meaning: str) -> None:
    ok = not isinstance(value, bool) and isinstance(value, (int, float)) and (
        0 <= value < math.inf if low_ok else 0 < value < math.inf)
    if not ok:
        raise ConfigError(f"`{name}` {shown(value)} must be a finite number of seconds {'>=' if low_ok else '>'} 0"
                          f"{meaning}", field=name)


def check_fp4_choice(fp4_kernel: str, fp4_activations: str, weights: Iterable[str], why: str = "") -> None:
    """Refuse fp4 activations the fp4 kernel does not take: the dequantising kernels take fp8 or fp16, the
    block-scaled one what :data:`truepeak.kernels.moe_blockscaled.ACTIVATIONS` lists (fp4 for nvfp4; fp4 or fp8 for
    mxfp4). ``"auto"`` activations, or no fp4 weights, always pass; ``why`` follows the kernel's name in the message
    (how ``auto`` resolved).

    Raises:
        ConfigError: field ``fp4_activations``.
    """
    from truepeak.kernels.moe_blockscaled import ACTIVATIONS

    fp4_fmts = [w for w in weights if w in ("nvfp4", "mxfp4")]
    if not fp4_fmts or fp4_activations == "auto":
        return
    takes = {f: ("fp8", "fp16") if fp4_kernel == "dequant" else ACTIVATIONS[f] for f in fp4_fmts}
    if any(fp4_activations not in takes[f] for f in fp4_fmts):
        raise ConfigError(f"`fp4_activations` {fp4_activations} with `fp4_kernel` {fp4_kernel}{why} and weights "
                          f"{', '.join(fp4_fmts)}: the dequantising kernels take fp8 or fp16, the block-scaled one "
                          "fp4 (nvfp4, mxfp4) or fp8 (mxfp4 only)", field="fp4_activations")


@dataclass(frozen=True)
class MoeBenchConfig:
    """One sweep of ``moe bench``: tokens per expert x weight formats x backends for one model and layout.

    Fields:
        model: a name :func:`truepeak.moe.config.load_model` takes (preset, config.json path, Hugging Face id).
        tp, ep: tensor parallel (each expert's width I / tp) or expert parallel (E / ep local experts); one of them.
        tokens_per_expert: mean tokens per global expert of each point (T = tpe · E / k), finite and > 0.
        routing: a spec of the planner's routing grammar (:func:`truepeak.moe.routing.parse_routing`).
        weights: formats of :data:`WEIGHT_FORMATS`; backends: of :data:`truepeak.bench.moe.backends.BACKENDS`
            (lists, or comma-separated strings).
        budget_s: timed seconds per point (> 0); warmup_s: warm-up seconds per point (>= 0).
        read_bw: the read bandwidth in B/s to judge against; None measures it in the run
            (:func:`truepeak.bench.read_bandwidth.measure_read_bandwidth`).
        seed: of the weights, routing, routing weights and hidden states.
        triton_tune: weight format -> :class:`truepeak.kernels.moe_triton.KernelConfig` field overrides for the
            ``triton`` backend (recorded in the workload as ``triton_tune``).
        fp8_activations: truepeak's kernel with fp8 weights: ``"fp8"`` (w8a8) or ``"fp16"`` (w8a16).
        fp4_activations: with nvfp4 / mxfp4 weights: ``"auto"`` (each format's default), ``"fp8"`` (w4a8),
            ``"fp16"`` (w4a16); the block-scaled kernel takes ``"fp4"`` (W4A4) or, mxfp4 only, ``"fp8"``.
        fp4_kernel: ``"auto"`` (block-scaled on sm_100 / sm_103 / sm_120, else dequant), ``"dequant"`` or
            ``"block-scaled"``.
        fp4_layout: the dequantising kernels' fp4 weight layout (recorded as ``workload.fp4_layout``): ``"auto"``
            (:func:`~truepeak.kernels.moe_triton.default_fp4_layout`: mma for nvfp4, tiles for mxfp4), ``"mma"`` or
            ``"tiles"``.
        split_busy: the ``triton`` backend runs the busy experts of a skewed routing in a launch of their own
            (True, :class:`~truepeak.kernels.moe_triton.FusedMoE`'s default) or every expert in one launch (False,
            recorded as ``workload.split_busy``).

    Names are lower-cased and lists become tuples. ``shape`` (not a constructor argument) is the model's
    :class:`~truepeak.bench.moe.shapes.ExpertShape` under the layout.

    Raises:
        ConfigError: a refused field (``field`` names it). UnknownNameError: an unknown model. UnsupportedError: a
            model without MoE layers.
    """

    model: str
    tp: int = 1
    ep: int = 1
    tokens_per_expert: Iterable[float] = DEFAULT_TPE
    routing: str = "uniform"
    weights: Iterable[str] = ("bf16",)
    backends: Iterable[str] = BACKENDS
    budget_s: float = 0.15
    warmup_s: float = 0.05
    read_bw: float | None = None
    seed: int = 0
    triton_tune: dict[str, dict] | None = None
    fp8_activations: str = "fp8"
    fp4_activations: str = "auto"
    fp4_kernel: str = "auto"
    fp4_layout: str = "auto"
    split_busy: bool = True
    shape: ExpertShape = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        def put(name: str, value: Any) -> None:
            object.__setattr__(self, name, value)

        for name in ("tp", "ep", "seed"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int):
                raise ConfigError(f"`{name}` must be a whole number, got {value!r}", field=name)
        if type(self.split_busy).__name__ not in ("bool", "bool_"):
            raise ConfigError(f"`split_busy` must be True or False, got {self.split_busy!r}", field="split_busy")
        put("split_busy", bool(self.split_busy))
        put("shape", expert_shape(self.model, self.tp, self.ep))
        from truepeak.moe.routing import parse_routing

        try:
            parse_routing(self.routing, self.shape.E, self.shape.top_k)
        except TruepeakError as exc:
            raise ConfigError(str(exc), field="routing") from None
        for name, accepted, meaning in (
                ("fp8_activations", FP8_ACTIVATIONS, "fp8 (w8a8) or fp16 (w8a16)"),
                ("fp4_activations", FP4_ACTIVATIONS, "auto (fp16 for nvfp4, fp8 for mxfp4; with the block-scaled "
                                                     "kernel fp4 for nvfp4, fp8 for mxfp4), fp16 (w4a16), fp8 (w4a8) "
                                                     "or fp4 (W4A4, block-scaled kernel only)"),
                ("fp4_kernel", FP4_KERNELS, f"{', '.join(FP4_KERNELS)} (auto: block-scaled on Blackwell, sm_100 / "
                                            "sm_103 / sm_120; dequant elsewhere)"),
                ("fp4_layout", ("auto", "mma", "tiles"), "auto (the format's default: mma for nvfp4, tiles for "
                                                         "mxfp4), mma or tiles")):
            value = str(getattr(self, name)).lower()
            if value not in accepted:
                raise ConfigError(f"`{name}` {value!r}: expected {meaning}", field=name)
            put(name, value)
        _seconds(self.budget_s, "budget_s", False, " (timed seconds per point, e.g. 0.2)")
        tpe = self.tokens_per_expert
        if isinstance(tpe, (str, bytes)):
            raise ConfigError(f"`tokens_per_expert` must be a list of numbers (e.g. [1, 8, 32]), got {tpe!r}",
                              field="tokens_per_expert")
        try:
            tpes = tuple(float(t) for t in tpe)
        except (TypeError, ValueError):
            raise ConfigError(f"tokens per expert must be numbers, got {tpe!r}", field="tokens_per_expert") from None
        if not tpes:
            raise ConfigError("no tokens per expert given (e.g. [1, 8, 32])", field="tokens_per_expert")
        for i, t in enumerate(tpes):
            try:
                tokens_for(t, self.shape)
            except TruepeakError as exc:
                raise ConfigError(str(exc), field="tokens_per_expert") from None
            if t in tpes[:i]:
                raise ConfigError(f"tokens per expert {t:g} is given twice", field="tokens_per_expert")
        put("tokens_per_expert", tpes)
        weights, backends = _names(self.weights, "weights"), _names(self.backends, "backends")
        for name, names in (("weights", weights), ("backends", backends)):
            if not names:
                raise ConfigError(f"no `{name}` given (e.g. {'bf16,fp8' if name == 'weights' else 'triton'})",
                                  field=name)
        read_bw = self.read_bw
        if read_bw is not None and (isinstance(read_bw, bool) or not isinstance(read_bw, (int, float))
                                    or not 0 < read_bw < math.inf):
            raise ConfigError(f"`read_bw` must be a finite number of bytes per second > 0, got {read_bw!r}",
                              field="read_bw")
        _seconds(self.warmup_s, "warmup_s", True, "")
        if self.triton_tune is not None:
            put("triton_tune", _checked_tune(self.triton_tune))
        weights = tuple(w.lower() for w in weights)
        for w in weights:
            if w not in WEIGHT_FORMATS:
                hint = closest(w, WEIGHT_FORMATS)
                if ":" in w:  # moe tune's FORMAT:ACTIVATIONS
                    raise ConfigError(f"`weights` {w!r}: give the format alone ({', '.join(WEIGHT_FORMATS)}) and "
                                      "the activations with --fp8-activations or --fp4-activations", field="weights")
                raise ConfigError(f"unknown `weights` {w!r}; expected one of {', '.join(WEIGHT_FORMATS)}"
                                  + (f" (did you mean {hint[0]}?)" if hint else ""), field="weights")
        backends = tuple(b.lower() for b in backends)
        for b in backends:
            if b not in BACKENDS:
                raise ConfigError(f"unknown backend {b!r}; expected one of {', '.join(BACKENDS)}", field="backends")
        put("weights", weights)
        put("backends", backends)
        if self.fp4_kernel != "auto":
            check_fp4_choice(self.fp4_kernel, self.fp4_activations, weights)

    @property
    def layout(self) -> str:
        """The records' ``workload.layout``: ``"tpN"``, ``"epN"`` or ``"single"``."""
        return f"tp{self.tp}" if self.tp > 1 else (f"ep{self.ep}" if self.ep > 1 else "single")


def _checked_tune(tune: Any) -> dict[str, dict]:
    """``triton_tune`` checked (formats of :data:`WEIGHT_FORMATS`, fields of KernelConfig) and copied."""
    from truepeak.kernels.moe_triton import KernelConfig

    fields = {f.name for f in dataclasses.fields(KernelConfig)}
    if not isinstance(tune, dict) or not all(isinstance(v, dict) for v in tune.values()):
        raise ConfigError(f"`triton_tune` must map a weight format to a dict of KernelConfig fields, got {tune!r}",
                          field="triton_tune")
    for fmt, over in tune.items():
        bad = sorted(set(over) - fields)
        if fmt not in WEIGHT_FORMATS or bad:
            raise ConfigError(f"`triton_tune`[{fmt!r}]: formats are {', '.join(WEIGHT_FORMATS)} and fields "
                              f"{', '.join(sorted(fields))}; got {fmt!r} with {', '.join(bad) or 'valid fields'}",
                              field="triton_tune")
    return {fmt: dict(over) for fmt, over in tune.items()}


__all__ = ["MoeBenchConfig", "WEIGHT_FORMATS", "FP4_KERNELS", "FP8_ACTIVATIONS", "FP4_ACTIVATIONS", "DEFAULT_TPE",
           "check_fp4_choice"]
