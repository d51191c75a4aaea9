"""What a record's measurement means: derived metrics per kind, the unit in every name.

Rates are per second (``flop_per_s``, ``bytes_per_s``), times in seconds (``_s``), clocks in Hz (``_hz``), sizes in
bytes; a value that is a share of something is a fraction (0.684, never 68.4) and says of what (``dense_fraction``:
of the dense peak; ``roofline_fraction``: of the roofline's attainable rate). None where a value is undefined (no
catalog peak, no bandwidth, no clock).

Standard library only.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar

from truepeak.records._fields import NONNEGATIVE, AsRead, Part


@dataclass(frozen=True, kw_only=True)
class Metrics(Part):
    """Base of the derived-metric types."""


@dataclass(frozen=True, kw_only=True)
class GemmMetrics(Metrics):
    """One GEMM against the DENSE peak and the roofline (:func:`truepeak.efficiency.derived_metrics`).

    - ``flop_per_s`` = FLOP / time; ``bytes_per_s`` = minimum bytes / time;
    - ``dense_fraction`` = flop_per_s / ``dense_peak_flop_per_s`` (the catalog's dense peak, ``peak_source``;
      ``peak_estimated`` when it is an estimate, as for a CPU);
    - ``attainable_flop_per_s`` = min(dense peak, bandwidth x intensity) (Williams, Waterman & Patterson, "Roofline",
      CACM 2009), ``roofline_fraction`` = flop_per_s / it, ``bound`` ``"compute"`` or ``"memory"``;
    - ``at_clock_fraction`` = flop_per_s / ``peak_at_clock_flop_per_s`` (FLOP/clk/SM x SMs x ``sm_clock_hz``, the
      median SM clock sampled while timing);
    - ``bandwidth_fraction`` = bytes_per_s / ``bandwidth_bytes_per_s`` (``bandwidth_source``);
    - ``memory_note``: above the spec bandwidth, why that is possible at all (the working set fits in the cache).
    """

    DESCRIPTION: ClassVar[str] = "gemm metrics"

    flop_per_s: float = field(metadata=NONNEGATIVE)
    bytes_per_s: float = field(metadata=NONNEGATIVE)
    dense_fraction: float | None = None
    roofline_fraction: float | None = None
    bound: str | None = None
    attainable_flop_per_s: float | None = None
    at_clock_fraction: float | None = None
    bandwidth_fraction: float | None = None
    sm_clock_hz: float | None = None
    dense_peak_flop_per_s: float | None = None
    peak_source: str | None = None
    peak_estimated: bool | None = None
    bandwidth_bytes_per_s: float | None = None
    bandwidth_source: str | None = None
    memory_note: str | None = None
    peak_at_clock_flop_per_s: float | None = None


@dataclass(frozen=True, kw_only=True)
class CopyMetrics(Metrics):
    """A copy: ``bytes_per_s`` counts read + write (2 x nbytes / time); ``bandwidth_fraction`` of the catalog's
    ``bandwidth_bytes_per_s`` (``bandwidth_source``); ``memory_note`` when it reads above the spec bandwidth."""

    DESCRIPTION: ClassVar[str] = "copy metrics"

    bytes_per_s: float = field(metadata=NONNEGATIVE)
    bandwidth_fraction: float | None = None
    bandwidth_bytes_per_s: float | None = None
    bandwidth_source: str | None = None
    memory_note: str | None = None


@dataclass(frozen=True, kw_only=True)
class MoeExpertsMetrics(Metrics):
    """The routed-expert layer: its ``time_s`` per call, ``flop`` (2 x tokens x top_k x 3 H I over the tokens routed
    here) and ``bytes`` (the weights and scales of the experts that received tokens) with their rates, the layer's
    share of the read bandwidth measured in the same run (``read_bandwidth_fraction`` = bytes_per_s /
    ``read_bandwidth_bytes_per_s``: the memory roofline of streaming the weights), its share of the
    roofline max(bytes / read bandwidth, flop / dense peak) (``roofline_fraction``), and the bf16 dense peak used
    (``dense_peak_flop_per_s``)."""

    DESCRIPTION: ClassVar[str] = "moe_experts metrics"

    time_s: float | None = field(default=None, metadata=NONNEGATIVE)
    flop: int | None = field(default=None, metadata=NONNEGATIVE)
    flop_per_s: float = field(metadata=NONNEGATIVE)
    bytes: int | None = field(default=None, metadata=NONNEGATIVE)
    bytes_per_s: float = field(metadata=NONNEGATIVE)
    read_bandwidth_fraction: float | None = None
    read_bandwidth_bytes_per_s: float | None = None
    roofline_fraction: float | None = None
    dense_peak_flop_per_s: float | None = None


@dataclass(frozen=True, kw_only=True)
class CollectiveMetrics(Metrics):
    """nccl-tests' bandwidths (NVIDIA/nccl-tests doc/PERFORMANCE.md): ``algbw_bytes_per_s`` = S / time,
    ``busbw_bytes_per_s`` = algbw x ``bus_factor`` (all_reduce 2(n-1)/n, all_gather and reduce_scatter (n-1)/n);
    ``requested_bytes``: the size asked for before rounding to whole elements per rank."""

    DESCRIPTION: ClassVar[str] = "collective metrics"

    algbw_bytes_per_s: float = field(metadata=NONNEGATIVE)
    busbw_bytes_per_s: float = field(metadata=NONNEGATIVE)
    bus_factor: float | None = None
    requested_bytes: int | None = field(default=None, metadata=NONNEGATIVE)


@dataclass(frozen=True, kw_only=True)
class CollectiveFitMetrics(Metrics):
    """time = ``alpha_s`` + S x bus factor / ``busbw_bytes_per_s`` fitted over ``points`` sizes
    (:func:`truepeak.comm.model.fit_alpha_beta`, ``weighting``); ``max_rel_residual`` = the largest |fit - measured| /
    measured over them."""

    DESCRIPTION: ClassVar[str] = "collective_fit metrics"

    alpha_s: float = field(metadata=NONNEGATIVE)
    busbw_bytes_per_s: float = field(metadata=NONNEGATIVE)
    points: int | None = field(default=None, metadata=NONNEGATIVE)
    max_rel_residual: float | None = None
    weighting: str | None = None


@dataclass(frozen=True, kw_only=True)
class PeakSearchMetrics(Metrics):
    """The answer of one peak search: the best shape ``m`` x ``n`` x ``k`` (its re-measured median), its
    ``flop_per_s``, ``dense_fraction`` and ``at_clock_fraction`` (as :class:`GemmMetrics`), and the ``evaluations``
    the search made."""

    DESCRIPTION: ClassVar[str] = "peak_search metrics"

    m: int = field(metadata={"min": 1})
    n: int = field(metadata={"min": 1})
    k: int = field(metadata={"min": 1})
    flop_per_s: float = field(metadata=NONNEGATIVE)
    dense_fraction: float | None = None
    at_clock_fraction: float | None = None
    evaluations: int | None = field(default=None, metadata=NONNEGATIVE)


@dataclass(frozen=True, kw_only=True)
class ServingMetrics(Metrics):
    """One concurrency level of a serving benchmark, over the requests that completed (the failed ones are counted in
    the record's correctness, ``wrong`` of ``checked``). Definitions as vLLM's ``benchmark_serving`` has them
    (vllm-project/vllm, benchmarks): TTFT = request sent to first generated token; TPOT = (end - first token) /
    (output tokens - 1), one value per request; ITL = the gap between successive streamed chunks, pooled over requests.

    - ``output_tokens_per_s`` = output tokens of the completed requests / ``elapsed_s`` (the level's wall time);
      ``requests_per_s`` = completed requests / ``elapsed_s``;
    - ``ttft_*_s``, ``tpot_*_s``, ``itl_*_s``: median, 90th and 99th percentile (linear interpolation, as
      ``numpy.percentile``);
    - ``decode_tokens_per_s`` = concurrency / ``tpot_median_s``: the tokens per second of ``concurrency`` sequences
      each advancing one token per TPOT, the figure a decode-step model predicts at batch = concurrency;
    - ``mean_prompt_tokens``, ``mean_output_tokens``: what the server's usage reported per request;
    - against the MoE planner (``truepeak moe plan``) at batch = concurrency: its roofline ``ceiling_tokens_per_s``
      and ``ceiling_fraction`` = decode_tokens_per_s / it, its ``expected_tokens_per_s`` and ``expected_fraction``,
      and its ``largest_lever`` in words (None where the planner gives none).
    """

    DESCRIPTION: ClassVar[str] = "serving metrics"

    output_tokens_per_s: float | None = field(default=None, metadata=NONNEGATIVE)
    requests_per_s: float | None = field(default=None, metadata=NONNEGATIVE)
    ttft_median_s: float | None = field(default=None, metadata=NONNEGATIVE)
    tpot_median_s: float | None = field(default=None, metadata=NONNEGATIVE)
    ttft_p90_s: float | None = field(default=None, metadata=NONNEGATIVE)
    ttft_p99_s: float | None = field(default=None, metadata=NONNEGATIVE)
    tpot_p90_s: float | None = field(default=None, metadata=NONNEGATIVE)
    tpot_p99_s: float | None = field(default=None, metadata=NONNEGATIVE)
    itl_median_s: float | None = field(default=None, metadata=NONNEGATIVE)
    itl_p90_s: float | None = field(default=None, metadata=NONNEGATIVE)
    itl_p99_s: float | None = field(default=None, metadata=NONNEGATIVE)
    decode_tokens_per_s: float | None = field(default=None, metadata=NONNEGATIVE)
    elapsed_s: float | None = field(default=None, metadata=NONNEGATIVE)
    mean_prompt_tokens: float | None = field(default=None, metadata=NONNEGATIVE)
    mean_output_tokens: float | None = field(default=None, metadata=NONNEGATIVE)
    ceiling_tokens_per_s: float | None = field(default=None, metadata=NONNEGATIVE)
    ceiling_fraction: float | None = field(default=None, metadata=NONNEGATIVE)
    expected_tokens_per_s: float | None = field(default=None, metadata=NONNEGATIVE)
    expected_fraction: float | None = field(default=None, metadata=NONNEGATIVE)
    largest_lever: str | None = None


@dataclass(frozen=True, kw_only=True)
class OtherMetrics(AsRead, Metrics):
    """The derived values of a kind this truepeak does not know, as read (``data``, JSON data)."""

    DESCRIPTION: ClassVar[str] = "metrics"


__all__ = ["Metrics", "GemmMetrics", "CopyMetrics", "MoeExpertsMetrics", "CollectiveMetrics", "CollectiveFitMetrics",
           "PeakSearchMetrics", "ServingMetrics", "OtherMetrics"]
