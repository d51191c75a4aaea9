"""The settings of one ``truepeak moe tune`` run: :class:`TuneConfig`, a frozen dataclass that checks every field
when it is built (before torch is imported), and :func:`parse_weights` for ``--weights``. Pure Python."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from truepeak.errors import ConfigError, TruepeakError
from truepeak.errors import shown as _shown
from truepeak.kernels.moe_triton.config import WEIGHT_FORMATS, default_activations
from truepeak.kernels.moe_triton.tuned import BUCKETS, activations_key, bucket_of


def parse_weights(items: Any) -> tuple[tuple[str, str], ...]:
    """``--weights`` items as (weight format, activations) pairs: ``FMT`` (the format's default activations,
    :func:`default_activations`; bf16 weights: bf16) or ``FMT:ACTS`` with ACTS ``fp8`` or ``fp16``:
    ``["bf16", "fp8", "fp8:fp16"]`` -> ``(("bf16", "bf16"), ("fp8", "fp8"), ("fp8", "fp16"))``.

    Raises:
        ConfigError (field ``weights``): an unknown format or activations, a pair given twice, or none."""
    items = items.split(",") if isinstance(items, str) else list(items)
    out: list[tuple[str, str]] = []
    for item in items:
        text = str(item).strip().lower()
        wfmt, colon, acts = text.partition(":")
        if colon and not acts:
            raise ConfigError(f"--weights {item!r}: give the activations after ':' (fp8 or fp16), or drop the ':' "
                              f"for {wfmt}'s default", "weights")
        if wfmt not in WEIGHT_FORMATS:
            raise ConfigError(f"--weights {item!r}: unknown format {wfmt!r}; expected FMT or FMT:ACTS with FMT one of "
                              f"{', '.join(WEIGHT_FORMATS)} and ACTS fp8 or fp16 (e.g. bf16,fp8,fp8:fp16)", "weights")
        try:
            pair = (wfmt, activations_key(wfmt, acts or default_activations(wfmt)))
        except TruepeakError:
            w4a4 = (" (fp4 activations run the block-scaled kernel of Blackwell, which moe tune does not tune)"
                    if acts == "fp4" and wfmt in ("nvfp4", "mxfp4") else "")
            raise ConfigError(f"--weights {item!r}: {wfmt} weights take "
                              f"{'no activations suffix' if wfmt == 'bf16' else 'activations fp8 or fp16'}{w4a4}",
                              "weights") from None
        if pair in out:
            raise ConfigError(f"--weights {item!r} is given twice", "weights")
        out.append(pair)
    if not out:
        raise ConfigError("--weights is empty; give e.g. bf16,fp8", "weights")
    return tuple(out)




@dataclass(frozen=True)
class TuneConfig:
    """One tuning run: the model's expert shape (``model``, ``tp`` or ``ep``), the (format, activations) pairs,
    the tokens per expert (one per bucket, below 1024·√2 = 1448:
    :func:`~truepeak.kernels.moe_triton.tuned.bucket_of`), the routing, the whole run's time budget (seconds), the
    timing budget of one candidate during the search and of the final figures (the chosen and the default
    configuration, seconds), the warm-up before each timing, and the seed of weights, routing and inputs.

    Raises:
        ConfigError: a field out of range, named by ``field``."""

    model: str
    weights: tuple[tuple[str, str], ...]
    tokens_per_expert: tuple[float, ...]
    tp: int = 1
    ep: int = 1
    routing: str = "uniform"
    budget_s: float = 600.0
    search_budget_s: float = 0.05
    final_budget_s: float = 0.2
    warmup_s: float = 0.02
    seed: int = 0

    def __post_init__(self) -> None:
        if not isinstance(self.model, str) or not self.model.strip():
            raise ConfigError(f"--model {self.model!r}: give a model name or config.json (e.g. deepseek-v3)", "model")
        object.__setattr__(self, "weights", parse_weights(self.weights))
        for name in ("tp", "ep", "seed"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int) or v < (0 if name == "seed" else 1):
                raise ConfigError(f"--{name} {v!r}: expected an integer >= {0 if name == 'seed' else 1}", name)
        if self.tp > 1 and self.ep > 1:
            raise ConfigError(f"--tp {self.tp} and --ep {self.ep}: give one of them (the experts are split one way "
                              "per table)", "tp")
        for name in ("budget_s", "search_budget_s", "final_budget_s", "warmup_s"):
            v = getattr(self, name)
            low_ok = name == "warmup_s"
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or not (
                    v >= 0 if low_ok else v > 0):
                raise ConfigError(f"`{name}` {_shown(v)}: expected a finite number of seconds "
                                  f"{'>= 0' if low_ok else '> 0'}", name)
        tpes = self.tokens_per_expert
        if isinstance(tpes, (str, bytes)) or not tpes:
            raise ConfigError(f"--tokens-per-expert {tpes!r}: give a list of numbers > 0 (e.g. 1,2,4,8,16,32,64)",
                              "tokens_per_expert")
        seen: dict[int, float] = {}
        for t in tpes:
            if isinstance(t, bool) or not isinstance(t, (int, float)) or not (math.isfinite(t) and t > 0):
                raise ConfigError(f"--tokens-per-expert {_shown(t)}: expected a finite number > 0",
                                  "tokens_per_expert")
            if t >= BUCKETS[-1] * math.sqrt(2):
                raise ConfigError(f"--tokens-per-expert {t:g}: beyond the largest bucket of a tuned table "
                                  f"({BUCKETS[-1]}, which holds values below {BUCKETS[-1] * math.sqrt(2):.0f})",
                                  "tokens_per_expert")
            b = bucket_of(t)
            if b in seen:
                raise ConfigError(f"--tokens-per-expert {seen[b]:g} and {t:g} fall in the same bucket ({b}); give "
                                  "one value per power of two", "tokens_per_expert")
            seen[b] = t
        object.__setattr__(self, "tokens_per_expert", tuple(float(t) for t in tpes))

    @property
    def layout(self) -> str:
        """``"tp8"``, ``"ep8"`` or ``"single"`` (as ``moe bench`` names it)."""
        return f"tp{self.tp}" if self.tp > 1 else f"ep{self.ep}" if self.ep > 1 else "single"


__all__ = ["TuneConfig", "parse_weights"]
