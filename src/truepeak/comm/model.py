"""Collective communication: nccl-tests' size and bandwidth definitions, and a latency--bandwidth (α--β) model.

Pure Python (no torch, no numpy): the MoE planner and the report import it freely.

Definitions (``NVIDIA/nccl-tests:doc/PERFORMANCE.md`` and ``NVIDIA/nccl-tests:src/*.cu``; docs/method.md, 'busbw and
algbw'). For ``n`` ranks and a message of ``S`` bytes (nccl-tests' *total* size, the ``size`` column it prints):

- ``algbw = S / t``
- ``busbw = algbw × factor(op, n)``: all_reduce 2(n−1)/n; all_gather, reduce_scatter, all_to_all (n−1)/n;
  broadcast, reduce, send_recv 1. busbw is comparable to the per-link hardware bandwidth and roughly independent of
  n for ring algorithms; under NVLink SHARP (NVLS) it is not link traffic any more (NVIDIA/nccl-tests#212).
- ``S`` from the per-rank element ``count`` nccl-tests passes to its ``GetBw`` (:func:`total_bytes`):
  all_reduce ``count·typesize`` (the buffer), all_gather ``sendcount·n·typesize`` (the output),
  reduce_scatter ``recvcount·n·typesize`` (the input), all_to_all ``count·n·typesize`` with ``count`` the elements
  sent to EACH peer (``src/alltoall.cu``: ``AlltoAllGetBw`` uses ``count * nranks * typesize``), so S is one rank's
  whole send buffer.

Model (docs/method.md, 'Small-message latency'): ``t(S) = α + S · factor(op, n) / busbw``, where α is the fixed per-call
cost (launch, synchronisation, protocol latency) and busbw the asymptotic bus bandwidth. At decode message sizes α
dominates (haohervchb/sglang-V100 PR #2); on PCIe, busbw does not grow with the GPU count (NVIDIA/nccl#1639).

Units: seconds, bytes, B/s (GB/s = 1e9 B/s only when rendering).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from truepeak.errors import TruepeakError, UnknownNameError, closest
from truepeak.records import Record, read_records

__all__ = [
    "OPS", "MEASURED_OPS", "ALIASES", "DTYPE_BYTES", "INTERCONNECTS", "canonical_op", "dtype_bytes",
    "busbw_factor", "algbw_from_busbw", "busbw_from_algbw", "total_bytes", "count_for_bytes",
    "CollectiveModel", "default_model", "fit_alpha_beta", "step_time", "models_from_records", "load_fits",
]

#: Every collective truepeak knows, nccl-tests' order. The bus-bandwidth factor of each is :func:`busbw_factor`.
OPS = ("all_reduce", "all_gather", "reduce_scatter", "all_to_all", "broadcast", "reduce", "send_recv")
#: The collectives ``truepeak comm`` measures.
MEASURED_OPS = ("all_reduce", "all_gather", "reduce_scatter", "all_to_all")
#: Other spellings accepted for op names (nccl-tests binary names, NCCL API names, short forms).
ALIASES = {
    "allreduce": "all_reduce", "ar": "all_reduce", "all-reduce": "all_reduce",
    "allgather": "all_gather", "ag": "all_gather", "all-gather": "all_gather",
    "reducescatter": "reduce_scatter", "rs": "reduce_scatter", "reduce-scatter": "reduce_scatter",
    "alltoall": "all_to_all", "a2a": "all_to_all", "all-to-all": "all_to_all", "all2all": "all_to_all",
    "sendrecv": "send_recv", "p2p": "send_recv", "send-recv": "send_recv", "bcast": "broadcast",
}
#: Bytes per element of the element types NCCL and gloo reduce (nccl ``ncclDataType_t``).
DTYPE_BYTES = {"bf16": 2, "fp16": 2, "fp32": 4, "fp64": 8, "int8": 1, "uint8": 1, "int32": 4, "int64": 8}
_DTYPE_ALIASES = {"bfloat16": "bf16", "float16": "fp16", "half": "fp16", "float32": "fp32", "float": "fp32",
                  "float64": "fp64", "double": "fp64"}
INTERCONNECTS = ("nvlink", "pcie")


def canonical_op(op: str) -> str:
    """The canonical name of ``op`` (``"allreduce"`` → ``"all_reduce"``).

    Raises:
        UnknownNameError: not a collective; the message lists the valid ones and the closest match.
    """
    key = str(op).strip().lower().replace(" ", "_")
    if key in OPS:
        return key
    if key in ALIASES:
        return ALIASES[key]
    hint = closest(key, [*OPS, *ALIASES])
    did = f" (did you mean {hint[0]}?)" if hint else ""
    raise UnknownNameError(f"unknown collective {op!r}{did}; valid ops: {', '.join(OPS)}")


def canonical_dtype(dtype: str) -> str:
    """The key of :data:`DTYPE_BYTES` that ``dtype`` names (``"bfloat16"`` → ``"bf16"``, ``" FP32 "`` → ``"fp32"``).

    Raises:
        UnknownNameError: neither a key of :data:`DTYPE_BYTES` nor one of its aliases (``bfloat16``, ``half``, ...).
    """
    key = str(dtype).strip().lower()
    key = _DTYPE_ALIASES.get(key, key)
    if key not in DTYPE_BYTES:
        raise UnknownNameError(f"unknown collective dtype {dtype!r}; valid: {', '.join(DTYPE_BYTES)}")
    return key


def dtype_bytes(dtype: str) -> int:
    """Bytes per element of ``dtype`` (``"bf16"`` → 2; aliases as :func:`canonical_dtype`).

    Raises:
        UnknownNameError: not in :data:`DTYPE_BYTES` (nor an alias).
    """
    return DTYPE_BYTES[canonical_dtype(dtype)]


def _check_n(n: Any) -> int:
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise TruepeakError(f"number of ranks n must be an integer >= 1, got {n!r}")
    return n


def busbw_factor(op: str, n: int) -> float:
    """busbw / algbw for ``op`` on ``n`` ranks (``NVIDIA/nccl-tests:doc/PERFORMANCE.md``).

    all_reduce 2(n−1)/n; all_gather, reduce_scatter, all_to_all (n−1)/n; broadcast, reduce, send_recv 1. With n = 1 the
    first four are 0 (nothing crosses a link; nccl-tests prints busbw 0).

    Raises:
        UnknownNameError: unknown op. TruepeakError: n not an integer >= 1.
    """
    op = canonical_op(op)
    n = _check_n(n)
    if op == "all_reduce":
        return 2.0 * (n - 1) / n
    if op in ("all_gather", "reduce_scatter", "all_to_all"):
        return (n - 1) / n
    return 1.0


def busbw_from_algbw(op: str, n: int, algbw_B_per_s: float) -> float:
    """busbw (B/s) = algbw × :func:`busbw_factor`."""
    return float(algbw_B_per_s) * busbw_factor(op, n)


def algbw_from_busbw(op: str, n: int, busbw_B_per_s: float) -> float:
    """algbw (B/s) = busbw / :func:`busbw_factor` (docs/method.md, 'busbw and algbw': 8 GPUs, AR busbw 28 GB/s →
    algbw 16.0 GB/s).

    Raises:
        TruepeakError: the factor is 0 (n = 1 for a reduction/gather op: busbw says nothing about algbw).
    """
    f = busbw_factor(op, n)
    if f == 0:
        raise TruepeakError(f"{canonical_op(op)} on n={n} rank has bus factor 0; algbw cannot be derived from busbw")
    return float(busbw_B_per_s) / f


def total_bytes(op: str, count: int, n: int, dtype_bytes: int) -> int:
    """nccl-tests' total size S in bytes, from the per-rank element ``count`` nccl-tests hands to ``GetBw``.

    - all_reduce, broadcast, reduce, send_recv: ``count · dtype_bytes`` (``count`` = elements of the buffer)
    - all_gather: ``sendcount · n · dtype_bytes`` (``count`` = elements each rank contributes; S = the output buffer)
    - reduce_scatter: ``recvcount · n · dtype_bytes`` (``count`` = elements each rank receives; S = the input)
    - all_to_all: ``count · n · dtype_bytes`` (``count`` = elements sent to EACH peer; S = one rank's send buffer)

    Source: ``NVIDIA/nccl-tests:src/{all_reduce,all_gather,reduce_scatter,alltoall}.cu`` ``*GetBw``.

    Raises:
        UnknownNameError: unknown op. TruepeakError: negative count, n < 1 or dtype_bytes < 1.
    """
    op = canonical_op(op)
    n = _check_n(n)
    if isinstance(count, bool) or not isinstance(count, int) or count < 0:
        raise TruepeakError(f"element count must be an integer >= 0, got {count!r}")
    if isinstance(dtype_bytes, bool) or not isinstance(dtype_bytes, int) or dtype_bytes < 1:
        raise TruepeakError(f"dtype_bytes must be an integer >= 1, got {dtype_bytes!r}")
    if op in ("all_gather", "reduce_scatter", "all_to_all"):
        return count * n * dtype_bytes
    return count * dtype_bytes


def count_for_bytes(op: str, nbytes: int, n: int, dtype_bytes: int) -> tuple[int, int]:
    """The per-rank element count whose nccl-tests total size is closest to ``nbytes`` without exceeding it (at least
    one element), and that size: ``(count, S)``. S differs from ``nbytes`` when ``nbytes`` is not a multiple of
    ``dtype_bytes`` (× n for all_gather, reduce_scatter and all_to_all); the caller says so."""
    op = canonical_op(op)
    unit = total_bytes(op, 1, n, dtype_bytes)
    count = max(1, int(nbytes) // unit)
    return count, count * unit


# -- the α–β model -----------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class CollectiveModel:
    """Latency + size / bandwidth model of one collective on ``n`` ranks: ``t(S) = α + S · factor(op, n) / busbw``.

    Attributes:
        alpha_s: α, the fixed cost of one call (seconds, >= 0).
        busbw_B_per_s: asymptotic bus bandwidth (B/s, > 0), nccl-tests' busbw.
        op: canonical op name (:data:`OPS`).
        n: ranks (>= 1).
        source: where the numbers come from (a citation, or "fit of N points, 1 KiB–1 GiB, ...").
        mode: ``"eager"`` or ``"graph"`` (CUDA-graph replay) when measured; None for literature defaults.
    """

    alpha_s: float
    busbw_B_per_s: float
    op: str
    n: int
    source: str = ""
    mode: str | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "op", canonical_op(self.op))
        _check_n(self.n)
        a, b = float(self.alpha_s), float(self.busbw_B_per_s)
        if not math.isfinite(a) or a < 0:
            raise TruepeakError(f"alpha_s must be a finite number >= 0 seconds, got {self.alpha_s!r}")
        if not math.isfinite(b) or b <= 0:
            raise TruepeakError(f"busbw_B_per_s must be a finite number > 0 B/s, got {self.busbw_B_per_s!r}")
        object.__setattr__(self, "alpha_s", a)
        object.__setattr__(self, "busbw_B_per_s", b)

    @property
    def factor(self) -> float:
        """:func:`busbw_factor` of this op and n."""
        return busbw_factor(self.op, self.n)

    def time(self, nbytes: float) -> float:
        """Seconds for one call moving nccl-tests total size ``nbytes``: α + nbytes · factor / busbw."""
        if nbytes < 0:
            raise TruepeakError(f"message size must be >= 0 bytes, got {nbytes!r}")
        return self.alpha_s + float(nbytes) * self.factor / self.busbw_B_per_s

    def algbw(self, nbytes: float) -> float:
        """Predicted algbw (B/s) at ``nbytes``: nbytes / :meth:`time` (0 for an empty message)."""
        t = self.time(nbytes)
        return float(nbytes) / t if t > 0 else 0.0

    def busbw(self, nbytes: float) -> float:
        """Predicted busbw (B/s) at ``nbytes``: :meth:`algbw` × factor; tends to ``busbw_B_per_s`` for large sizes."""
        return self.algbw(nbytes) * self.factor

    def to_dict(self) -> dict[str, Any]:
        return {"op": self.op, "n": self.n, "alpha_s": self.alpha_s, "busbw_B_per_s": self.busbw_B_per_s,
                "mode": self.mode, "source": self.source}


# Literature defaults (sources in each string; the 2×H200 numbers are nccl-tests runs tabulated in
# docs/results/h200x2/README.md). Values per op: (alpha_s, busbw_B_per_s, source). A size-independent busbw is the
# ring approximation (NVIDIA/nccl-tests doc/PERFORMANCE.md).
_PCIE8 = ("8× RTX PRO 6000 Server Edition (PCIe Gen5, NCCL 2.29.2), ai-dynamo/aiconfigurator "
          "systems/data/rtx_pro_6000_server/comm/nccl/2.29.2/nccl_perf.parquet")
_PCIE4 = ("4 GPUs on PCIe: AR busbw 35 GB/s (NVIDIA/nccl#1639, 4× RTX 5090) and 4 KB AR 19.4 µs "
          "(haohervchb/sglang-V100 PR #2, 4× V100 on one PLX switch)")
_NVL8 = ("8× H100 SXM: ring AR busbw ≈ 370 GB/s (NVIDIA/nccl-tests#212, NVLS off), "
         "AG/RS ≈ 330 GB/s at 512 MiB and NCCL allgather 11 µs (ai-dynamo/aiconfigurator h100_sxm), "
         "NCCL AR (pynccl, graph) 16.8 µs at 2 KiB (sgl-project/sglang#22734)")
_H200X2 = ("nccl-tests 2.19.6, NCCL 2.28.9, 2× H200 NVLink, out-of-place, 20 iterations "
           "(docs/results/h200x2/README.md)")
_DEFAULTS: dict[tuple[str, str], dict[str, tuple[float, float, str]]] = {
    ("pcie", "8"): {
        "all_reduce": (24.6e-6, 24e9, _PCIE8 + " (AR ≤ 1 KiB 24.6 µs, busbw ≈ 24 GB/s at 16-512 MiB)"),
        "all_gather": (24.6e-6, 23e9, _PCIE8 + " (busbw ≈ 23 GB/s; α assumed equal to AR's)"),
        "reduce_scatter": (24.6e-6, 23e9, _PCIE8 + " (busbw ≈ 23 GB/s; α assumed equal to AR's)"),
        "all_to_all": (24.6e-6, 15e9, _PCIE8 + " (busbw ≈ 15-18 GB/s, low end; α assumed equal to AR's)"),
    },
    ("pcie", "4"): {
        "all_reduce": (19.4e-6, 35e9, _PCIE4),
        "all_gather": (19.4e-6, 35e9, _PCIE4 + " (AR numbers reused for AG)"),
        "reduce_scatter": (19.4e-6, 35e9, _PCIE4 + " (AR numbers reused for RS)"),
        "all_to_all": (19.4e-6, 35e9 * 15 / 24, _PCIE4 + " (busbw scaled by the 8-GPU A2A/AR ratio 15/24)"),
    },
    ("nvlink", "8"): {
        "all_reduce": (16.8e-6, 370e9, _NVL8),
        "all_gather": (11e-6, 330e9, _NVL8),
        "reduce_scatter": (11e-6, 330e9, _NVL8 + " (α assumed equal to AG's)"),
        "all_to_all": (11e-6, 330e9, _NVL8 + " (AG numbers reused for A2A)"),
    },
    ("nvlink", "h200x2"): {
        "all_reduce": (16.6e-6, 325.2e9, _H200X2 + " (AR 16.6-20.7 µs at 1-64 KiB, busbw 325.2 GB/s at 1 GiB)"),
        "all_gather": (12e-6, 273.9e9, _H200X2 + " (AG 12-13 µs small, busbw 273.9 GB/s at 1 GiB)"),
        "reduce_scatter": (12e-6, 273.9e9, _H200X2 + " (AG numbers reused for RS)"),
        "all_to_all": (12e-6, 330.9e9, _H200X2 + " (A2A busbw 330.9 GB/s at 1 GiB; α assumed equal to AG's)"),
    },
}


def default_model(op: str, n: int, interconnect: str = "nvlink", device: str | None = None) -> CollectiveModel:
    """A literature α–β model for ``op`` on ``n`` GPUs of one node (no measurement), with its source.

    - ``pcie``: n <= 4 uses the 4-GPU numbers (α 19.4 µs, AR busbw 35 GB/s), larger n the 8-GPU ones
      (α ≈ 25 µs, AR busbw ≈ 24 GB/s). busbw is NOT scaled with the GPU count (docs/method.md, 'busbw and algbw').
    - ``nvlink``: 2 GPUs of an H200 (``device`` containing "h200") use the nccl-tests figures of
      docs/results/h200x2/README.md; anything else the 8× H100/H200 ring numbers (AR busbw ≈ 370 GB/s, α 16.8 µs;
      AG/RS ≈ 330 GB/s, α 11 µs).
    - broadcast/reduce/send_recv reuse all_gather's α and busbw (factor 1: one pass over the data).

    Raises:
        UnknownNameError: unknown op or interconnect. TruepeakError: n < 2 (a collective on one GPU moves nothing).
    """
    op = canonical_op(op)
    n = _check_n(n)
    ic = str(interconnect).strip().lower()
    if ic not in INTERCONNECTS:
        raise UnknownNameError(f"unknown interconnect {interconnect!r}; valid: {', '.join(INTERCONNECTS)}")
    if n < 2:
        raise TruepeakError(f"a collective on n={n} GPU moves no data; a model needs n >= 2")
    if ic == "pcie":
        table = _DEFAULTS[("pcie", "4" if n <= 4 else "8")]
    elif n == 2 and device is not None and "h200" in str(device).lower():
        table = _DEFAULTS[("nvlink", "h200x2")]
    else:
        table = _DEFAULTS[("nvlink", "8")]
    alpha, busbw, source = table.get(op, table["all_gather"])
    return CollectiveModel(alpha, busbw, op, n, source=source)


def step_time(model: CollectiveModel, nbytes: float, calls: int) -> float:
    """Seconds of collective time in one decode step: ``calls`` × ``model.time(nbytes)`` (docs/method.md,
    'Small-message latency': 100 × 19.4 µs = 1.94 ms per token)."""
    if isinstance(calls, bool) or not isinstance(calls, int) or calls < 0:
        raise TruepeakError(f"calls per step must be an integer >= 0, got {calls!r}")
    return calls * model.time(nbytes)


def fit_alpha_beta(sizes_bytes: Sequence[float], times_s: Sequence[float], op: str, n: int, *,
                   relative: bool = True, source: str | None = None, mode: str | None = None) -> CollectiveModel:
    """Least-squares fit of ``t = α + S · factor(op, n) / busbw`` to measured (S, t) points.

    The model is linear in (α, γ = 1/busbw) with regressor ``x = S · factor``. By default (``relative=True``) each point
    is weighted by ``1/t²``, i.e. the fit minimises the sum of squared RELATIVE errors: with sizes spanning 1 KiB to
    1 GiB, ordinary least squares is dominated by the largest messages (absolute residuals of milliseconds) and
    returns an α that can be off by tens of µs or negative; relative weighting gives each size equal say, so α is set
    by the small messages and γ by the large ones. Closed form of the weighted 2×2 normal equations:
    ``D = Σw·Σwx² − (Σwx)²``, ``γ = (Σw·Σwxt − Σwx·Σwt) / D``, ``α = (Σwt − γ·Σwx) / Σw``.
    A negative α is clamped to 0 and γ refitted through the origin (``γ = Σwxt / Σwx²``).

    Args:
        sizes_bytes: nccl-tests total sizes S (bytes), at least two distinct.
        times_s: measured seconds per call, same length, each > 0.
        op, n: the collective and its rank count (n >= 2: the factor must be > 0).
        relative: weight by 1/t² (default) or fit unweighted (``False``).
        source: text stored in the model (default describes the fit).
        mode: ``"eager"``/``"graph"``, stored in the model.

    Returns:
        A :class:`CollectiveModel`.

    Raises:
        TruepeakError: fewer than two distinct sizes, lengths differ, a time <= 0, n < 2, or the data show no bandwidth
            term (γ <= 0: time does not grow with size).
    """
    op = canonical_op(op)
    f = busbw_factor(op, n)
    if f == 0:
        raise TruepeakError(f"cannot fit {op} on n={n}: the bus factor is 0 (one rank moves no data)")
    xs = [float(s) * f for s in sizes_bytes]
    ts = [float(t) for t in times_s]
    if len(xs) != len(ts):
        raise TruepeakError(f"{len(xs)} sizes but {len(ts)} times; give one time per size")
    if len(set(xs)) < 2:
        raise TruepeakError("an α–β fit needs at least two distinct message sizes")
    if any(not math.isfinite(t) or t <= 0 for t in ts) or any(not math.isfinite(x) or x < 0 for x in xs):
        raise TruepeakError("an α–β fit needs times > 0 and sizes >= 0 (finite)")
    ws = [1.0 / (t * t) for t in ts] if relative else [1.0] * len(ts)
    sw = math.fsum(ws)
    swx = math.fsum(w * x for w, x in zip(ws, xs))
    swxx = math.fsum(w * x * x for w, x in zip(ws, xs))
    swt = math.fsum(w * t for w, t in zip(ws, ts))
    swxt = math.fsum(w * x * t for w, x, t in zip(ws, xs, ts))
    d = sw * swxx - swx * swx
    gamma = (sw * swxt - swx * swt) / d if d > 0 else 0.0
    alpha = (swt - gamma * swx) / sw
    if alpha < 0:
        alpha = 0.0
        gamma = swxt / swxx if swxx > 0 else 0.0
    if not gamma > 0:
        raise TruepeakError(f"{op}: time does not grow with message size over {min(sizes_bytes):g}-"
                            f"{max(sizes_bytes):g} B, so no bandwidth can be fitted; include larger messages")
    if source is None:
        source = (f"{'relative' if relative else 'unweighted'} least-squares fit of {len(xs)} points, "
                  f"{int(min(sizes_bytes))}-{int(max(sizes_bytes))} B")
    return CollectiveModel(alpha, 1.0 / gamma, op, n, source=source, mode=mode)


# -- measured fits (records of kind "collective_fit") -------------------------------------------------------------------
def models_from_records(records: Iterable[Record]) -> dict[tuple[str, int, str | None], CollectiveModel]:
    """The fitted models in records of kind ``collective_fit`` (written by ``truepeak comm``), keyed by
    ``(op, n, mode)``; later records replace earlier ones. Other kinds and non-ok records are ignored.

    A ``collective_fit`` record carries a :class:`~truepeak.records.CollectiveFitWorkload` (``op``, ``n_ranks``,
    ``min_bytes``, ``max_bytes``, ``dtype``), its ``mode`` and :class:`~truepeak.records.CollectiveFitMetrics`
    (``alpha_s``, ``busbw_bytes_per_s``, ``points``, ``max_rel_residual``).
    """
    out: dict[tuple[str, int, str | None], CollectiveModel] = {}
    for r in records:
        if r.kind != "collective_fit" or not r.ok or r.derived is None:
            continue
        w, d = r.workload, r.derived
        try:
            m = CollectiveModel(d.alpha_s, d.busbw_bytes_per_s, w.op, w.n_ranks, mode=r.mode,
                                source=(f"measured: truepeak comm fit over {w.min_bytes}-{w.max_bytes} "
                                        f"B, {r.mode}, {r.timestamp}").strip())
        except (TypeError, ValueError):
            continue
        out[(m.op, m.n, m.mode)] = m
    return out


def load_fits(path: str) -> dict[tuple[str, int, str | None], CollectiveModel]:
    """:func:`models_from_records` of a JSON Lines file written by ``truepeak comm`` (``--out DIR`` → DIR/results.jsonl).

    Raises:
        TruepeakError: the file cannot be read or holds no ``collective_fit`` record (the message names it).
    """
    fits = models_from_records(read_records(path, strict=False))
    if not fits:
        raise TruepeakError(f"{path} holds no collective_fit record; write one with `truepeak comm --out DIR`")
    return fits
