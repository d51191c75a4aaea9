"""The weight format of a plan: which one, where it came from, and what one format does to weights the checkpoint
keeps in bf16.

Weight format (:func:`choose_weights`): ``weights`` when given, else the checkpoint's (its ``quantization_config``:
fp8 for DeepSeek-V3 and Kimi-K2, mxfp4 for gpt-oss), else bf16; the plan says which (:class:`WeightsChoice`). It is
one format for attention, routed experts, shared experts and dense MLPs; where the checkpoint keeps some of those in
bf16 (gpt-oss's ``modules_to_not_convert``: attention) the plan says what that changes (:func:`weights_note`).
"""

from __future__ import annotations

from dataclasses import dataclass

from truepeak.moe.findings import UnquantisedGroups
from truepeak.moe.ops import BF16, Formats
from truepeak.moe.plan.memory import MemoryFit


#: The op groups of a plan whose weights are in the plan's weight format (router, embedding and lm_head are bf16 in
#: every plan).
FORMAT_GROUPS = ("attention", "routed_experts", "shared_experts", "dense_mlp")


def _excluded_groups(patterns) -> set[str]:
    """The op groups a checkpoint's unquantised-module patterns name: ``*self_attn*`` / ``*attn*`` / ``*attention*``
    → attention, ``*shared_expert*`` → shared experts, another ``*experts*`` → routed experts. Routers, embeddings and
    lm_head are bf16 in every plan, and other patterns name no group the planner can tell apart."""
    out = set()
    for pat in patterns:
        low = pat.lower()
        if "attn" in low or "attention" in low:
            out.add("attention")
        elif "shared_expert" in low:
            out.add("shared_experts")
        elif "experts" in low:
            out.add("routed_experts")
    return out


def _groups_of(model) -> list[str]:
    """The op groups of ``model`` that carry weights in the plan's weight format (:data:`FORMAT_GROUPS`)."""
    have = {"attention", "routed_experts"}
    if model.experts.num_shared:
        have.add("shared_experts")
    if model.num_dense_layers:
        have.add("dense_mlp")
    return [g for g in FORMAT_GROUPS if g in have]


@dataclass(frozen=True)
class WeightsChoice:
    """The weight format of a plan and where it came from (:func:`choose_weights`).

    Attributes:
        format: the planned format's canonical name (:func:`truepeak.formats.get_format`: ``"mxfp4"``,
            ``"fp8_e4m3"``, ``"bf16"``).
        origin: ``"option"`` (given: ``--weights`` / ``plan(weights=...)``), ``"checkpoint"`` (the format of the
            config's ``quantization_config``, :func:`truepeak.moe.config.checkpoint_format`) or ``"default"`` (bf16:
            the config has no ``quantization_config`` truepeak has a format for).
        checkpoint_format: the checkpoint's format (canonical name), or None.
        quant_method: ``quantization_config.quant_method`` as published (``"fp8"``, ``"mxfp4"``, ``"awq"``), or None.
        weight_block_size: ``quantization_config.weight_block_size``, or None.
        not_converted: the modules the checkpoint leaves unquantised (``modules_to_not_convert``), as published.
        quantised_groups: the op groups (:data:`truepeak.moe.ops.GROUP_WORDS` keys) the checkpoint's format covers:
            the groups of the model with weights in the plan's weight format, less those ``not_converted`` names.
        dtype: the config's ``torch_dtype`` (``"bfloat16"``), or None.
    """

    format: str
    origin: str
    checkpoint_format: str | None = None
    quant_method: str | None = None
    weight_block_size: tuple[int, ...] | None = None
    not_converted: tuple[str, ...] = ()
    quantised_groups: tuple[str, ...] = ()
    dtype: str | None = None

    def to_dict(self) -> dict:
        return {"format": self.format, "origin": self.origin, "checkpoint_format": self.checkpoint_format,
                "quant_method": self.quant_method,
                "weight_block_size": None if self.weight_block_size is None else list(self.weight_block_size),
                "modules_not_converted": list(self.not_converted), "quantised_groups": list(self.quantised_groups),
                "dtype": self.dtype}


def choose_weights(model, weights: str | None = None) -> WeightsChoice:
    """The weight format to plan ``model`` in: ``weights`` when given (``--weights``), else the checkpoint's
    (``model.checkpoint_format``, from its ``quantization_config``: fp8 for DeepSeek-V3 and Kimi-K2, mxfp4 for
    gpt-oss), else bf16.

    Raises:
        UnknownNameError: ``weights`` (or a checkpoint format) is not a truepeak format name.
    """
    from truepeak.formats import get_format

    ckpt = get_format(model.checkpoint_format).name if model.checkpoint_format else None
    if weights is not None:
        fmt, origin = get_format(weights).name, "option"
    elif ckpt is not None:
        fmt, origin = ckpt, "checkpoint"
    else:
        fmt, origin = BF16.name, "default"
    excluded = _excluded_groups(model.modules_not_converted)
    groups = tuple(g for g in _groups_of(model) if g not in excluded) if ckpt else ()
    return WeightsChoice(fmt, origin, ckpt, model.quant_method, model.weight_block_size,
                         tuple(model.modules_not_converted), groups, model.dtype)


def weights_note(choice: WeightsChoice, model, formats: Formats, memory: MemoryFit) -> UnquantisedGroups | None:
    """What planning every weight GEMM in one format does to weights the checkpoint keeps in bf16
    (:class:`~truepeak.moe.findings.UnquantisedGroups`), or None.

    The planner applies one weight format to attention, routed experts, shared experts and dense MLPs (router,
    embedding and lm_head are bf16 in every plan). When that format is the checkpoint's own and the checkpoint leaves
    some of those groups unquantised (gpt-oss: ``model.layers.*.self_attn``), the plan counts them in the quantised
    format: the finding names them with their weight bytes per GPU in the plan and in bf16. The bf16 figure is the
    plan's bytes / the plan's bytes per weight value at K = H (:meth:`~truepeak.moe.ops.Formats.weight_values_bytes`,
    the rule the memory model counts attention by) × 2 B. gpt-oss-120b on one GPU in mxfp4: attention 36 × 26,550,144
    values × 0.53125 B = 0.5078 GB in the plan, × 2 B = 1.912 GB in bf16.
    """
    if choice.checkpoint_format is None or choice.format != choice.checkpoint_format:
        return None
    w = formats.weights
    missed = [g for g in _groups_of(model) if g in _excluded_groups(choice.not_converted)]
    if not missed or w.name == BF16.name:
        return None
    per_value = formats.weight_values_bytes(w, 1, model.hidden_size)
    here = sum(memory.weight_parts.get(g, 0.0) for g in missed)
    return UnquantisedGroups(w.name, tuple(missed), tuple(choice.quantised_groups), here,
                             here / per_value * BF16.values_bytes(1))


def checkpoint_block_size(model, weights) -> tuple[int, ...] | None:
    """The checkpoint's ``weight_block_size`` when the planned ``weights`` format is the checkpoint's own
    (``model.checkpoint_format``; DeepSeek-V3 fp8 → (128, 128)), else None: block scales belong to the checkpoint that
    has them, not to another format asked for on the command line."""
    from truepeak.formats import get_format

    if not model.weight_block_size or not model.checkpoint_format:
        return None
    if get_format(weights) is not get_format(model.checkpoint_format):
        return None
    return tuple(model.weight_block_size)


#: The op groups a per-group weight format may name (``--weights routed_experts=nvfp4,attention=fp8``).
WEIGHT_GROUPS = ("attention", "dense_mlp", "shared_experts", "routed_experts", "lm_head")


def parse_weights(text: str | None) -> tuple[str | None, dict[str, str]]:
    """``--weights`` as (the format of every group not named, {group: format}): ``"nvfp4"`` → (``"nvfp4"``, {});
    ``"routed_experts=nvfp4,attention=fp8"`` → (None, {...}): the groups not named keep the checkpoint's format;
    ``"fp8,routed_experts=nvfp4"`` → (``"fp8"``, {"routed_experts": "nvfp4"}). Format names are checked by
    :func:`truepeak.formats.get_format` when the plan resolves them.

    Raises:
        ConfigError: a group that is not one of :data:`WEIGHT_GROUPS`, a group given twice, an empty item, or more
            than one bare format.
    """
    from truepeak.errors import ConfigError

    if text is None or "=" not in str(text):
        return text, {}
    base, groups = None, {}
    for item in (x.strip() for x in str(text).split(",")):
        if not item:
            raise ConfigError(f"--weights {text!r} has an empty item; expected FORMAT or GROUP=FORMAT,... with "
                              f"GROUP one of {', '.join(WEIGHT_GROUPS)}", field="weights")
        if "=" not in item:
            if base is not None:
                raise ConfigError(f"--weights {text!r} gives two formats for every group ({base}, {item})",
                                  field="weights")
            base = item
            continue
        g, fmt = (x.strip() for x in item.split("=", 1))
        if g not in WEIGHT_GROUPS:
            raise ConfigError(f"--weights {text!r}: {g!r} names no op group; expected one of "
                              f"{', '.join(WEIGHT_GROUPS)}", field="weights")
        if g in groups:
            raise ConfigError(f"--weights {text!r} gives {g} twice", field="weights")
        groups[g] = fmt
    return base, groups


def plan_formats(model, acc, weights: str | None, activations: str | None = None, kv_cache: str | None = None):
    """The :class:`~truepeak.moe.ops.Formats` of a plan for ``--weights`` text (:func:`parse_weights`): the base
    format (given, else the checkpoint's) for every group, and each named group's own
    (:attr:`~truepeak.moe.ops.Formats.groups`), each with the checkpoint's block size when it is the checkpoint's
    format.

    Raises:
        ConfigError: as :func:`parse_weights`. UnknownNameError: an unknown format name.
    """
    from dataclasses import replace

    from truepeak.moe.ops import resolve_formats

    base, groups = parse_weights(weights)
    w = choose_weights(model, base).format
    f = resolve_formats(acc, w, activations, kv_cache, weight_block_size=checkpoint_block_size(model, w))
    if not groups:
        return f
    own = tuple((g, resolve_formats(acc, fmt, activations, kv_cache,
                                    weight_block_size=checkpoint_block_size(model, fmt))) for g, fmt in groups.items())
    return replace(f, groups=own)
