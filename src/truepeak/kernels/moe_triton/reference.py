"""The float32 reference of the MoE unit the kernels are checked against. torch is imported inside."""

from __future__ import annotations

from typing import Any

from truepeak.errors import require


def moe_reference(x: Any, w1: Any, w2: Any, topk_ids: Any, topk_weights: Any, act_quant: Any = None) -> Any:
    """float32 reference of the unit: ``Σ_j w[t, j] · W2_e (silu(g) · u)`` with ``[g; u] = W1_e x[t]``.

    Args:
        x: ``[T, H]``; w1: float ``[E, 2I, H]``; w2: float ``[E, H, I]``; topk_ids / topk_weights ``[T, k]`` (ids
            outside ``[0, E)`` are skipped, as an EP rank skips experts it does not hold).
        act_quant: a function applied to x and to each expert's intermediate rows before their GEMM (float32
            ``[R, C]`` → float32 ``[R, C]``; e.g. a quantise-dequantise of the activations, to check a kernel that
            quantises them against the same rounding); None: none.

    Returns:
        float32 ``[T, H]``.
    """
    torch = require("torch", "the MoE reference")
    E, I2, H = w1.shape
    i = I2 // 2
    q = act_quant or (lambda a: a)
    xf = q(x.float())
    out = torch.zeros(x.shape[0], H, dtype=torch.float32, device=x.device)
    for e in torch.unique(topk_ids).tolist():
        if e < 0 or e >= E:
            continue
        t, j = torch.nonzero(topk_ids == e, as_tuple=True)
        h = xf[t] @ w1[e].float().T
        a = q(torch.nn.functional.silu(h[:, :i]) * h[:, i:])
        out.index_add_(0, t, (a @ w2[e].float().T) * topk_weights[t, j].float()[:, None])
    return out
