"""Multi-token prediction (MTP) and speculative decoding in a decode step (:class:`MtpSetting`, :func:`compose`).

Pure Python. With N draft tokens per step, each accepted with probability P given the one before it was, a sequence
gains ``1 + P + P² + … + P^N`` tokens per step (the first token is the verified one; DeepSeek-V3's technical report,
arXiv:2412.19437, section 5.4.3: 85–90 % acceptance of the second token, 1.8× tokens per second). The step costs:

- the verification pass: the main model on B × (N + 1) tokens; each sequence's KV cache is read once for its N + 1
  queries, so the attention-over-KV time of a B × (N + 1)-token plan is divided by N + 1;
- N draft passes of the MTP module on B tokens: one decoder layer (the plain step's average layer, lm_head excluded)
  plus lm_head (DeepSeek-V3's MTP module shares the main model's embedding and output head).

Both the ceiling and the expected step are composed this way; without MTP the plain prediction is not a ceiling
of a server that runs it.
"""

from __future__ import annotations

from dataclasses import dataclass

from truepeak.errors import ConfigError


@dataclass(frozen=True)
class MtpSetting:
    """``draft_tokens`` (N >= 1) per step, each accepted with probability ``acceptance`` (0 < P <= 1).

    Raises:
        ConfigError: N not a whole number >= 1, or P outside (0, 1].
    """

    draft_tokens: int
    acceptance: float

    def __post_init__(self) -> None:
        n, p = self.draft_tokens, self.acceptance
        if isinstance(n, bool) or not isinstance(n, int) or n < 1:
            raise ConfigError(f"--mtp {n!r} must be a whole number of draft tokens >= 1", field="mtp")
        if isinstance(p, bool) or not isinstance(p, (int, float)) or not 0 < p <= 1:
            raise ConfigError(f"--mtp-acceptance {p!r} must be in (0, 1] (the probability each draft token is "
                              "accepted, e.g. 0.85)", field="mtp_acceptance")

    @property
    def tokens_per_step(self) -> float:
        """Tokens each sequence gains per step: 1 + Σ_{i=1..N} P^i (N = 1, P = 0.85: 1.85)."""
        return 1.0 + sum(self.acceptance ** i for i in range(1, self.draft_tokens + 1))

    def to_dict(self) -> dict:
        return {"draft_tokens": self.draft_tokens, "acceptance": self.acceptance,
                "tokens_per_step": self.tokens_per_step}


def check_mtp(model, mtp: MtpSetting | None) -> None:
    """Refuse MTP for a model without MTP layers.

    Raises:
        ConfigError: ``mtp`` given and ``model.num_mtp_layers`` is 0.
    """
    if mtp is not None and not getattr(model, "num_mtp_layers", 0):
        raise ConfigError(f"--mtp {mtp.draft_tokens}: {model.name} has no MTP layers (num_nextn_predict_layers is 0); "
                          "give --mtp only for a checkpoint that has them (DeepSeek-V3, GLM-4.5, ...)", field="mtp")


def _layer_and_head(total: float, lm_head: float, layers: int) -> float:
    """One MTP pass: the average decoder layer of a step of ``total`` seconds with ``lm_head`` seconds of output head,
    plus that head."""
    return (total - lm_head) / max(1, layers) + lm_head


def compose(plain, verify, mtp: MtpSetting, layers: int) -> tuple[float, float]:
    """(ceiling seconds, expected seconds) of one MTP step from the ``plain`` plan on B tokens and the ``verify``
    plan on B × (N + 1) tokens (both :class:`truepeak.moe.plan.Plan` with an ``expected`` step); ``layers``: the
    model's decoder layers. Module docstring for the rule. DeepSeek-V3-like check: a verify step of 10 ms with 2 ms
    of KV reads at N = 1 and a plain step of 6 ms over 61 layers with 0.1 ms lm_head: 10 − 1 + (5.9 / 61 + 0.1)."""
    n = mtp.draft_tokens
    kv_v = verify.time_by_group().get("kv_cache", 0.0)
    kv_e = verify.expected.by_group.get("kv_cache", 0.0)
    keep = 1.0 - 1.0 / (n + 1)
    ceiling = verify.step_s - keep * kv_v
    expected = verify.expected.step_s - keep * kv_e
    ceiling += n * _layer_and_head(plain.step_s, plain.time_by_group().get("lm_head", 0.0), layers)
    expected += n * _layer_and_head(plain.expected.step_s, plain.expected.by_group.get("lm_head", 0.0), layers)
    return ceiling, expected


__all__ = ["MtpSetting", "check_mtp", "compose"]
