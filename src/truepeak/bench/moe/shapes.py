"""The routed-expert shape of a model on one GPU (under TP or EP), and the tokens and routing ids of a bench point.

``T = tpe · E / k`` tokens routed top-k over all E experts give a mean of ``tpe`` tokens per (global) expert; with EP
the GPU holds ``E / ep`` contiguous experts and the slots routed to the others are dropped (:func:`local_ids`); with TP
every expert's width ``I`` is divided by ``tp``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from truepeak.errors import ConfigError, TruepeakError, UnsupportedError, require


@dataclass(frozen=True)
class ExpertShape:
    """A model's routed-expert shape on one GPU: hidden ``H``, per-expert width ``I`` (after TP), ``E`` global experts,
    ``E_local`` on this GPU (after EP), ``top_k``."""

    model: str
    H: int
    I: int
    E: int
    E_local: int
    top_k: int
    tp: int = 1
    ep: int = 1


def expert_shape(model: str, tp: int = 1, ep: int = 1) -> ExpertShape:
    """The expert shape of ``model`` (a name :func:`truepeak.moe.config.load_model` takes) under TP or EP.

    Raises:
        UnsupportedError: the model has no MoE layers. ConfigError (``field`` ``"tp"`` or ``"ep"``): ``tp`` / ``ep``
            < 1, both > 1, EP not dividing E, TP not dividing I. UnknownNameError: unknown model.
    """
    if tp < 1 or ep < 1:
        raise ConfigError(f"`tp` and `ep` must be >= 1, got tp={tp}, ep={ep}", field="tp" if tp < 1 else "ep")
    if tp > 1 and ep > 1:
        raise ConfigError("give `tp` or `ep`, not both (the expert layer is split one way per benchmark)", field="ep")
    from truepeak.moe.config import load_model

    m = load_model(model)
    if not getattr(m, "num_moe_layers", 0):
        raise UnsupportedError(f"model {model!r} has no MoE layers: there is no expert layer to benchmark")
    h, i, e, k = m.hidden_size, m.experts.intermediate_size, m.experts.num_experts, m.experts.top_k
    model = m.name
    if e % ep:
        raise ConfigError(f"`ep` {ep} does not divide the {e} experts of {model}; use a divisor of {e}", field="ep")
    if i % tp:
        divisors = ", ".join(str(d) for d in (1, 2, 4, 8, 16) if i % d == 0)
        raise ConfigError(f"`tp` {tp} does not divide the expert width I={i} of {model}; use a divisor of {i} "
                          f"({divisors}, ...)", field="tp")
    return ExpertShape(model, h, i // tp, e, e // ep, k, tp, ep)


def sample_routing(spec: str, T: int, E: int, k: int, seed: int = 0) -> Any:
    """Top-k expert ids ``[T, k]`` (int64, CPU; distinct experts per token) from routing ``spec``, in the planner's
    routing grammar (:mod:`truepeak.moe.routing.grammar`, so a ``moe bench`` record and a ``moe plan`` of the same
    routing mean the same distribution): :func:`truepeak.moe.routing.sample_routing_ids`.

    - ``uniform``: each token picks k distinct experts uniformly.
    - ``powerlaw:ALPHA[:random|sorted|balanced]``: Zipf popularity by rank, (rank + 1)^-ALPHA, water-filled to
      inclusion probabilities p_e (Σ p_e = k, each ≤ 1), ranks placed on expert ids at random (seeded) unless a
      placement is named; each token picks exactly k distinct experts, expert e with probability p_e.
    - a per-expert histogram file (E counts): the same, with p_e ∝ its counts.
    - a ``topk_ids`` file (rows of k ids; text, .json or .npy): its rows, repeated and cut to T rows.

    Raises:
        TruepeakError: a spec the grammar refuses (unknown text, a malformed exponent, ids out of [0, E) or rows that
            are not k wide), or k > E.
    """
    torch = require("torch", "sampling MoE routing")
    from truepeak.moe.routing import sample_routing_ids

    return torch.from_numpy(sample_routing_ids(spec, T, k, E, seed=seed))


def tokens_for(tpe: float, shape: ExpertShape) -> int:
    """Tokens T in the layer for a target mean of ``tpe`` tokens per (global) expert: ``T = tpe · E / k``.

    Raises:
        TruepeakError: ``tpe`` <= 0, not a number or infinite, or under one token in the layer (``tpe · E / k`` < 1).
    """
    if not (tpe > 0 and math.isfinite(tpe)):
        raise TruepeakError(f"tokens per expert must be a finite number > 0, got {tpe:g}; give e.g. 1,2,4,8,16,32")
    raw = tpe * shape.E / shape.top_k
    if raw < 1:
        raise TruepeakError(f"tokens per expert {tpe:g} is {raw:.3g} tokens in the layer (T = tpe·E/k with "
                            f"E={shape.E}, k={shape.top_k}); the fewest is one token, {shape.top_k / shape.E:g} per "
                            "expert")
    return round(raw)


def local_ids(ids: Any, shape: ExpertShape, rank: int = 0) -> Any:
    """Map global ids to this EP rank's local ids (contiguous placement); other ranks' experts become -1."""
    lo = rank * shape.E_local
    loc = ids - lo
    return loc.masked_fill((loc < 0) | (loc >= shape.E_local), -1)


def decode_inputs(shape: ExpertShape, tpe: float, routing: str = "uniform", seed: int = 0,
                  device: Any = "cuda") -> tuple[Any, Any, Any]:
    """The inputs of one decode point, as ``moe bench`` and ``moe tune`` make them: ``T =``
    :func:`tokens_for` ``(tpe, shape)`` tokens; hidden states ``x [T, H]`` bf16 uniform in [-1, 1) (a generator on
    ``device`` seeded with ``seed``); the top-k ids ``[T, k]`` of ``routing`` (:func:`sample_routing`, then
    :func:`local_ids`: other EP ranks' experts are -1); the routing weights ``[T, k]`` float32, a softmax of uniform
    draws (CPU generator seeded with ``seed``). The same arguments give the same tensors, so a figure of one tool can
    be reproduced by the other.

    Returns:
        ``(x, topk_ids, topk_weights)``, all on ``device``.

    Raises:
        TruepeakError: ``tpe`` <= 0 or not finite, or a routing :func:`sample_routing` refuses.
    """
    torch = require("torch", "making MoE inputs")
    T = tokens_for(tpe, shape)
    ids = local_ids(sample_routing(routing, T, shape.E, shape.top_k, seed), shape).to(device)
    topw = torch.softmax(torch.rand(T, shape.top_k, generator=torch.Generator().manual_seed(seed)), dim=1).to(device)
    x = (torch.rand(T, shape.H, device=device, dtype=torch.bfloat16,
                    generator=torch.Generator(device=device).manual_seed(seed)) * 2 - 1)
    return x, ids, topw


def unit_flop(shape: ExpertShape, routed_slots: int) -> int:
    """FLOP of the unit: 2 · (2I · H + H · I) per routed (token, expert) slot."""
    return 2 * 3 * shape.H * shape.I * routed_slots
