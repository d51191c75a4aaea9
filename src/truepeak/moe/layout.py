"""Parallel layouts for MoE decode: tensor (TP), expert (EP), pipeline (PP) and attention data parallelism (DP).

Pure Python. A layout string lists factors, in any order: ``tp8``, ``tp4pp2``, ``ep8``, ``tp2ep4``, ``dp8ep8``.

How a string maps onto GPUs (one rule, stated once; the names follow vLLM / SGLang usage):

- A pipeline stage holds ``S = tp × R`` GPUs, where ``R`` is the ``ep`` or ``dp`` factor (1 when neither is given).
  ``dp`` and ``ep`` given together name the SAME GPUs from two sides (``dp8ep8`` = 8 GPUs: attention data-parallel
  over 8, experts split over 8) and must be equal. GPUs = S × ``pp``.
- **Attention** (and the dense MLP layers, shared experts, router, lm_head): with ``dpD``, ``D`` replicas, each
  tensor-parallel over ``tp`` GPUs and each holding ``1/D`` of the batch (SGLang ``--enable-dp-attention``, vLLM
  ``--data-parallel-size``); without ``dp``, tensor-parallel over all ``S`` GPUs of the stage (vLLM
  ``-tp S --enable-expert-parallel``; SGLang ``--tp S --ep E``).
- **Routed experts**: split over ``ep`` expert-parallel groups (``E / ep`` whole experts each, contiguous placement);
  inside a group every expert is tensor-parallel over ``moe_tp = S / ep`` GPUs (its intermediate width I_e sliced).
  ``tp8`` = attention TP8 + experts TP8; ``ep8`` = attention TP8 + EP8; ``tp2ep4`` = attention TP8, experts EP4 × TP2;
  ``dp8ep8`` = attention DP8 + EP8; ``dp8`` = attention DP8 + experts TP8.
- **Pipeline**: ``pp`` stages of consecutive layers, the decode batch split in ``pp`` micro-batches.

:func:`check_layout` says which divisibility a model breaks: heads by the attention TP degree, KV heads (GQA: either
divides the other; vLLM replicates KV heads when TP exceeds them), experts by ``ep``, the expert width I_e by
``moe_tp`` and the layer count by ``pp`` (at least one layer per stage).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from truepeak.errors import TruepeakError

class LayoutError(TruepeakError):
    """A layout the model cannot be split into (:func:`check_layout`: heads, experts, widths or layers that the
    layout's factors do not divide). Callers that try several layouts (a what-if table, the default layouts) catch
    this type and keep going; any other error stops them."""


#: The layout factors, in display order.
FACTORS = ("tp", "dp", "ep", "pp")
LAYOUT_FORM = "factors tpN, epN, dpN, ppN joined, e.g. tp8, tp4pp2, ep8, tp2ep4, dp8ep8"
_TOKEN = re.compile(r"(tp|ep|dp|pp)(\d+)")


@dataclass(frozen=True)
class Layout:
    """One parallel layout (module docstring for the rules).

    Attributes:
        tp: the ``tp`` factor as written (attention TP degree when ``dp`` is given; else a factor of the stage size).
        dp: attention data-parallel replicas (1: attention tensor-parallel over the whole stage).
        ep: expert-parallel groups (1: no expert parallelism).
        pp: pipeline stages.
        text: the string as parsed, normalised (``"tp2ep4"``).
    """

    tp: int = 1
    dp: int = 1
    ep: int = 1
    pp: int = 1
    text: str = ""

    @property
    def stage_gpus(self) -> int:
        """GPUs per pipeline stage, S = tp × max(dp, ep) (dp and ep, when both given, are equal)."""
        return self.tp * max(self.dp, self.ep)

    @property
    def gpus(self) -> int:
        """All GPUs: S × pp."""
        return self.stage_gpus * self.pp

    @property
    def attn_tp(self) -> int:
        """Tensor-parallel degree of attention, dense MLPs, shared experts and lm_head: tp with DP attention, else S."""
        return self.tp if self.dp > 1 else self.stage_gpus

    @property
    def moe_tp(self) -> int:
        """Tensor-parallel degree of each routed expert inside its EP group: S / ep."""
        return self.stage_gpus // self.ep

    @property
    def name(self) -> str:
        return self.text or format_layout(self)

    def describe(self) -> str:
        """``"attention TP8; experts EP4 x TP2; 8 GPUs"`` — the layout in words."""
        attn = f"DP{self.dp} x TP{self.tp}" if self.dp > 1 else f"TP{self.attn_tp}"
        if self.ep > 1:
            moe = f"EP{self.ep}" + (f" x TP{self.moe_tp}" if self.moe_tp > 1 else "")
        else:
            moe = f"TP{self.moe_tp}"
        pp = f"; PP{self.pp} stages" if self.pp > 1 else ""
        return f"attention {attn}; experts {moe}{pp}; {self.gpus} GPU{'s' if self.gpus > 1 else ''}"

    def to_dict(self) -> dict:
        return {"layout": self.name, "tp": self.tp, "dp": self.dp, "ep": self.ep, "pp": self.pp,
                "attn_tp": self.attn_tp, "moe_tp": self.moe_tp, "stage_gpus": self.stage_gpus, "gpus": self.gpus}


def format_layout(layout: Layout) -> str:
    """The canonical string of a layout: factors > 1 in the order tp, dp, ep, pp (``"tp1"`` for one GPU)."""
    parts = [f"{k}{getattr(layout, k)}" for k in FACTORS if getattr(layout, k) > 1]
    return "".join(parts) or "tp1"


def parse_layout(text: str) -> Layout:
    """Parse a layout string (module docstring), e.g. ``"tp4pp2"`` -> ``Layout(tp=4, pp=2)``.

    Raises:
        TruepeakError: one line naming the bad text and the accepted form: an unknown factor, a repeated factor, a
            factor of 0, or ``dp`` and ``ep`` both given with different values.
    """
    if not isinstance(text, str) or not text.strip():
        raise TruepeakError(f"layout {text!r} is empty; expected {LAYOUT_FORM}")
    raw = text.strip().lower().replace("-", "").replace("_", "").replace(" ", "")
    pos, seen = 0, {}
    for m in _TOKEN.finditer(raw):
        if m.start() != pos:
            break
        key, value = m.group(1), int(m.group(2))
        if key in seen:
            raise TruepeakError(f"layout {text!r} gives {key} twice; expected {LAYOUT_FORM}")
        if value < 1:
            raise TruepeakError(f"layout {text!r}: {key}{value} must be at least 1")
        seen[key] = value
        pos = m.end()
    if pos != len(raw) or not seen:
        bad = raw[pos:] or raw
        raise TruepeakError(f"layout {text!r}: cannot read {bad!r}; expected {LAYOUT_FORM}")
    dp, ep = seen.get("dp", 1), seen.get("ep", 1)
    if "dp" in seen and "ep" in seen and dp != ep:
        raise TruepeakError(f"layout {text!r}: dp{dp} and ep{ep} describe the same GPUs of a stage (attention replicas "
                            f"and expert groups) and must be equal, e.g. dp{ep}ep{ep}")
    lay = Layout(tp=seen.get("tp", 1), dp=dp, ep=ep, pp=seen.get("pp", 1))
    return Layout(lay.tp, lay.dp, lay.ep, lay.pp, text=format_layout(lay))


def parse_layouts(text: str) -> list[Layout]:
    """A comma-separated list of layouts (``"tp8,tp4pp2,ep8"``), duplicates dropped, order kept.

    Raises:
        TruepeakError: no layout; an empty item (``"tp8,,ep8"``: a doubled or stray comma is a typo, refused as the
            CLI's other lists are); a layout :func:`parse_layout` refuses.
    """
    parts = [p.strip() for p in str(text).split(",")]
    if not any(parts):
        raise TruepeakError(f"no layout in {text!r}; expected a comma-separated list of {LAYOUT_FORM}")
    if not all(parts):
        raise TruepeakError(f"layouts {text!r} have an empty item; expected a comma-separated list of {LAYOUT_FORM}")
    out: list[Layout] = []
    for part in parts:
        lay = parse_layout(part)
        if lay.name not in [x.name for x in out]:
            out.append(lay)
    return out


def check_layout(model, layout: Layout) -> None:
    """Raise :class:`LayoutError` naming what ``layout`` fails to divide in ``model`` (a
    :class:`truepeak.moe.config.MoEModel`).

    Rules: attention heads % attn_tp == 0; GQA KV heads and attn_tp divide one another (KV heads are replicated when
    TP exceeds them); routed experts % ep == 0; expert width I_e % moe_tp == 0 (and the shared-expert and dense-MLP
    widths % attn_tp); linear-attention heads % attn_tp; pp <= decoder layers.
    """
    a, e = model.attention, model.experts
    problems = []
    t = layout.attn_tp
    if a.num_heads % t:
        problems.append(f"the {a.num_heads} attention heads are not divisible by attention TP{t}")
    elif a.kind != "mla" and a.num_kv_heads % t and t % a.num_kv_heads:
        problems.append(f"the {a.num_kv_heads} KV heads and attention TP{t} do not divide one another")
    if a.linear is not None and (a.linear.num_value_heads % t or a.linear.num_key_heads % t and
                                 t % a.linear.num_key_heads):
        problems.append(f"the {a.linear.num_value_heads} linear-attention value heads are not divisible by TP{t}")
    if e.num_experts % layout.ep:
        problems.append(f"the {e.num_experts} routed experts are not divisible by EP{layout.ep}")
    if e.intermediate_size % layout.moe_tp:
        problems.append(f"the expert width I_e={e.intermediate_size} is not divisible by expert TP{layout.moe_tp}")
    if e.num_shared and e.shared_intermediate_size % t:
        problems.append(f"the shared-expert width {e.shared_intermediate_size} is not divisible by TP{t}")
    if model.num_dense_layers and model.dense_intermediate_size % t:
        problems.append(f"the dense MLP width {model.dense_intermediate_size} is not divisible by TP{t}")
    if layout.pp > model.num_layers:
        problems.append(f"PP{layout.pp} exceeds the {model.num_layers} layers")
    if problems:
        raise LayoutError(f"layout {layout.name} ({layout.describe()}) does not fit {model.name}: "
                          + "; ".join(problems))


def layout_for_gpus(n: int) -> Layout:
    """The plain layout for ``n`` GPUs: ``tp{n}``."""
    return parse_layout(f"tp{n}")


def default_layouts(n: int, model=None, limit: int = 6) -> list[Layout]:
    """Up to ``limit`` (6) layouts for ``n`` GPUs that ``model`` accepts, in this order of preference:
    tp{n}, ep{n}, dp{n}ep{n}, tp{n/2}pp2, tp{n/4}pp4, tp{n/3}pp3, tp2ep{n/2}, dp{n/2}ep{n/2}pp2, dp{n} (DP attention,
    expert TP), pp{n}. (GPU counts like 6 need the pp3 and dp forms: Qwen3-235B's 64 heads and 128 experts do not
    divide by 6, but tp2pp3 and dp6 fit.)

    With ``model`` None no divisibility check is made. Always at least ``tp{n}`` (even if the model rejects it, so the
    caller gets the error message of the plain layout).
    """
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise TruepeakError(f"GPU count {n!r} must be a positive whole number")
    cands = [f"tp{n}", f"ep{n}", f"dp{n}ep{n}"]
    for p in (2, 4, 3):
        if n % p == 0 and n // p >= 1:
            cands.append(f"tp{n // p}pp{p}")
    if n % 2 == 0 and n >= 4:
        cands.append(f"tp2ep{n // 2}")
        cands.append(f"dp{n // 2}ep{n // 2}pp2")
    if n > 1:
        cands.append(f"dp{n}")
    cands.append(f"pp{n}")
    out: list[Layout] = []
    for c in cands:
        lay = parse_layout(c)
        if lay.gpus != n or lay.name in [x.name for x in out]:
            continue
        if model is not None:
            try:
                check_layout(model, lay)
            except LayoutError:
                continue
        out.append(lay)
        if len(out) == limit:
            break
    return out or [layout_for_gpus(n)]


def ceil_div(a: int, b: int) -> int:
    """ceil(a / b) for positive integers."""
    return -(-a // b)


__all__ = ["FACTORS", "LAYOUT_FORM", "Layout", "LayoutError", "format_layout", "parse_layout", "parse_layouts", "check_layout",
           "layout_for_gpus", "default_layouts", "ceil_div"]
