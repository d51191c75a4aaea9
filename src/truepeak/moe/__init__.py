"""MoE decode planning: model configs (:mod:`truepeak.moe.config`) and routing statistics
(:mod:`truepeak.moe.routing`), the decode planner (:mod:`truepeak.moe.plan`). Pure Python at import; numpy is imported
lazily inside the functions that need it."""

from truepeak.moe.config import (
    SUPPORTED_FAMILIES,
    AttentionSpec,
    ExpertSpec,
    IndexerSpec,
    LayerSpec,
    LinearAttentionSpec,
    MoEModel,
    ParamCount,
    load_model,
    parse_config,
    preset_names,
)

__all__ = [
    "SUPPORTED_FAMILIES",
    "AttentionSpec",
    "ExpertSpec",
    "IndexerSpec",
    "LayerSpec",
    "LinearAttentionSpec",
    "MoEModel",
    "ParamCount",
    "load_model",
    "parse_config",
    "preset_names",
]
