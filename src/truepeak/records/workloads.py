"""What a record measured: one workload type per record kind.

A workload is the identity of a case: two records with equal workloads (and backend, format and mode) measured the
same thing, and :func:`truepeak.records.record_key` builds ``--resume`` keys from it. Sizes are in bytes, counts of
FLOP in FLOP, intensities in FLOP per byte; every type names its kind (``KIND``).

- :class:`GemmWorkload` (``gemm``): one GEMM, C[M, N] = A[M, K] B[K, N] (``truepeak run``, every trial of ``truepeak
  peak``).
- :class:`CopyWorkload` (``membw``): a device-to-device copy (``truepeak run``'s bandwidth).
- :class:`MoeExpertsWorkload` (``moe_experts``): the routed-expert layer of an MoE model at decode (``truepeak moe
  bench``).
- :class:`CollectiveWorkload` (``collective``) and :class:`CollectiveFitWorkload` (``collective_fit``): one collective
  of nccl-tests' total size S, and the latency-bandwidth fit over a range of sizes (``truepeak comm``).
- :class:`PeakSearchWorkload` (``peak_search``): one (format, mode) search of ``truepeak peak`` as a whole.
- :class:`ServingWorkload` (``serving``): one concurrency level of a serving benchmark (``truepeak serve``).
- :class:`OtherWorkload`: the parameters of a kind this truepeak does not know, kept as read (a newer file renders as
  a plain table).

Standard library only.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar

from truepeak.records._fields import NONNEGATIVE, AsRead, Part


@dataclass(frozen=True, kw_only=True)
class Workload(Part):
    """Base of the workload types."""

    #: The record kind this workload belongs to.
    KIND: ClassVar[str] = ""

    @property
    def name(self) -> str:
        """A short name for tables: its parameters, ``"model=deepseek-v3, E_local=256, ..."`` (at most 80
        characters)."""
        return ", ".join(f"{k}={v}" for k, v in self.to_dict().items()
                         if not isinstance(v, (dict, list)))[:80] or "-"


@dataclass(frozen=True, kw_only=True)
class GemmWorkload(Workload):
    """One GEMM: ``m``, ``n``, ``k`` (C[M, N] = A[M, K] B[K, N]), its FLOP (2 M N K) and minimum bytes (A, B read
    once, C written once, each in its format, scales included; :class:`truepeak.roofline.Gemm`), the arithmetic
    intensity (FLOP / minimum bytes), the output format, the fp8/int8 scale layout (``scaling``: ``"tensor"``,
    ``"row"``, ``"block128"``; None for formats without one), where the shape comes from (``origin``: ``"square"``,
    ``"DeepSeek-V3 expert gate+up"``, ``"peak search (coarse)"``) and ``inputs`` when they were not random
    (``"zeros"``: never a peak)."""

    KIND: ClassVar[str] = "gemm"
    DESCRIPTION: ClassVar[str] = "a gemm workload"

    label: str | None = None
    m: int = field(metadata={"min": 1})
    n: int = field(metadata={"min": 1})
    k: int = field(metadata={"min": 1})
    out_format: str | None = None
    scaling: str | None = None
    flop: int | None = field(default=None, metadata=NONNEGATIVE)
    min_bytes: int | None = field(default=None, metadata=NONNEGATIVE)
    intensity: float | None = field(default=None, metadata=NONNEGATIVE)
    origin: str | None = None
    inputs: str | None = None

    @property
    def name(self) -> str:
        """``label``, else ``"MxNxK"``."""
        return self.label or f"{self.m}x{self.n}x{self.k}"


@dataclass(frozen=True, kw_only=True)
class CopyWorkload(Workload):
    """A copy of ``nbytes`` from one device buffer to another: ``bytes_moved`` counts the read and the write (2 x
    nbytes, ``counting`` says so), as STREAM's copy does."""

    KIND: ClassVar[str] = "membw"
    DESCRIPTION: ClassVar[str] = "a copy workload"

    label: str
    nbytes: int = field(metadata={"min": 1})
    bytes_moved: int | None = field(default=None, metadata=NONNEGATIVE)
    counting: str | None = None

    @property
    def name(self) -> str:
        return self.label


@dataclass(frozen=True, kw_only=True)
class MoeExpertsWorkload(Workload):
    """The routed-expert layer of one MoE layer at decode on one GPU (:mod:`truepeak.bench.moe`): ``model``, the
    ``layout`` (``"single"``, ``"tp8"``, ``"ep8"``), the ``routing`` (``"uniform"``, ``"powerlaw:1.2"``), the mean
    ``tokens_per_expert``, ``E_local`` experts on the GPU, hidden size ``H``, expert width ``I`` (per GPU),
    ``top_k``, the ``T`` tokens routed and the ``weights_format``; then what the routing drew
    (``active_experts`` with tokens, ``max_tokens_per_expert``) and, where they apply, the activations' precision in
    the GEMMs, the fp4 kernel, how the device ran a block-scaled kernel (``kernel_path``, ``native``), the Triton
    kernel settings tried (``triton_tune``), ``split_busy`` False when the busy experts of a skewed routing were not
    given a launch of their own (absent: they were, where the rule found any), and ``gemm`` when the time is one GEMM's (``"gate_up"`` or ``"down"``;
    absent: the whole block, gate+up, activation and down)."""

    KIND: ClassVar[str] = "moe_experts"
    DESCRIPTION: ClassVar[str] = "a moe_experts workload"

    model: str
    layout: str
    routing: str
    tokens_per_expert: float = field(metadata=NONNEGATIVE)
    E_local: int = field(metadata={"min": 1})
    H: int = field(metadata={"min": 1})
    I: int = field(metadata={"min": 1})  # noqa: E741 (the expert width's usual name)
    top_k: int = field(metadata={"min": 1})
    T: int = field(metadata={"min": 1})
    weights_format: str
    active_experts: int | None = field(default=None, metadata=NONNEGATIVE)
    max_tokens_per_expert: int | None = field(default=None, metadata=NONNEGATIVE)
    activations: str | None = None
    fp4_kernel: str | None = None
    fp4_layout: str | None = None
    kernel_path: str | None = None
    native: bool | None = None
    triton_tune: Mapping[str, Any] | None = None
    split_busy: bool | None = None
    gemm: str | None = None

    @property
    def name(self) -> str:
        """``"model=deepseek-v3, layout=ep8, routing=uniform, tokens_per_expert=16"``."""
        return (f"model={self.model}, layout={self.layout}, routing={self.routing}, "
                f"tokens_per_expert={self.tokens_per_expert}")


@dataclass(frozen=True, kw_only=True)
class CollectiveWorkload(Workload):
    """One collective ``op`` (``"all_reduce"``, ...) on ``n_ranks`` ranks of ``count`` elements of ``dtype``;
    ``bytes`` is nccl-tests' total size S (the whole all_reduce buffer, the gathered output of all_gather, the input
    of reduce_scatter; NVIDIA/nccl-tests doc/PERFORMANCE.md)."""

    KIND: ClassVar[str] = "collective"
    DESCRIPTION: ClassVar[str] = "a collective workload"

    op: str
    bytes: int = field(metadata=NONNEGATIVE)
    count: int = field(metadata=NONNEGATIVE)
    dtype: str
    n_ranks: int = field(metadata={"min": 1})


@dataclass(frozen=True, kw_only=True)
class CollectiveFitWorkload(Workload):
    """The latency-bandwidth fit of one ``op`` on ``n_ranks`` ranks over sizes ``min_bytes`` to ``max_bytes`` (S, as
    :class:`CollectiveWorkload`)."""

    KIND: ClassVar[str] = "collective_fit"
    DESCRIPTION: ClassVar[str] = "a collective_fit workload"

    op: str
    n_ranks: int = field(metadata={"min": 1})
    dtype: str
    min_bytes: int = field(metadata=NONNEGATIVE)
    max_bytes: int = field(metadata=NONNEGATIVE)


@dataclass(frozen=True, kw_only=True)
class PeakSearchWorkload(Workload):
    """One search of ``truepeak peak`` for the highest GEMM throughput of ``format`` (with its fp8 ``scaling``): the
    record of the search as a whole, beside one ``gemm`` record per shape it tried."""

    KIND: ClassVar[str] = "peak_search"
    DESCRIPTION: ClassVar[str] = "a peak_search workload"

    format: str
    scaling: str | None = None

    @property
    def name(self) -> str:
        return "peak search"


@dataclass(frozen=True, kw_only=True)
class ServingWorkload(Workload):
    """One concurrency level of a serving benchmark (``truepeak serve``): ``requests`` streaming requests to
    ``model`` (the name the server serves it under), ``concurrency`` in flight at a time, each asking for
    ``input_tokens_per_request`` prompt tokens and ``output_tokens_per_request`` generated tokens (the counts the
    server's usage reported are the metrics'). Optional: the OpenAI-compatible ``endpoint`` (``"completions"`` or
    ``"chat"``), the ``warmup_requests`` sent first and left out, and the level's ``duration_limit_s`` (requests
    stop being started after it)."""

    KIND: ClassVar[str] = "serving"
    DESCRIPTION: ClassVar[str] = "a serving workload"

    model: str
    concurrency: int = field(metadata={"min": 1})
    input_tokens_per_request: int = field(metadata=NONNEGATIVE)
    output_tokens_per_request: int = field(metadata={"min": 1})
    requests: int = field(metadata={"min": 1})
    endpoint: str | None = None
    warmup_requests: int | None = field(default=None, metadata=NONNEGATIVE)
    duration_limit_s: float | None = field(default=None, metadata=NONNEGATIVE)

    @property
    def name(self) -> str:
        """``"concurrency 16, 128 in / 64 out"``."""
        return (f"concurrency {self.concurrency}, {self.input_tokens_per_request} in / "
                f"{self.output_tokens_per_request} out")


@dataclass(frozen=True, kw_only=True)
class OtherWorkload(AsRead, Workload):
    """The workload of a kind this truepeak does not know: its parameters as read (``data``, JSON data)."""

    DESCRIPTION: ClassVar[str] = "a workload"

    @property
    def name(self) -> str:
        """Its ``label`` parameter, else its parameters."""
        label = self.data.get("label")
        return str(label) if label else super().name


#: The workload type of each kind this truepeak writes or reads.
WORKLOADS: dict[str, type[Workload]] = {w.KIND: w for w in (
    GemmWorkload, CopyWorkload, MoeExpertsWorkload, CollectiveWorkload, CollectiveFitWorkload, PeakSearchWorkload,
    ServingWorkload)}


__all__ = ["Workload", "GemmWorkload", "CopyWorkload", "MoeExpertsWorkload", "CollectiveWorkload",
           "CollectiveFitWorkload", "PeakSearchWorkload", "ServingWorkload", "OtherWorkload", "WORKLOADS"]
