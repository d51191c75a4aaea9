"""``truepeak peak``: the maximum achievable matmul FLOPS (MAMF) per format, found by a search over GEMM shapes.

mamf-finder brute-forces a cartesian grid (its "medium" 1024..16384 step 1024 cube is 4096 shapes, 15-30 min; the
exhaustive one takes hours to days; stas00/ml-engineering ``compute/accelerator/benchmarks/README.md``). The throughput
landscape over (M, N, K) is smooth at the scale of a few hundred elements except for tile-quantisation ripples, so a
coarse look plus local refinement finds its top in a few dozen evaluations:

1. **coarse**: a grid of large and aspect-varied shapes (:data:`~truepeak.bench.peak.plan.GPU_COARSE_DIMS`: M, N, K in
   {2048, 4096, 8192, 16384} with M <= N, 40 shapes; the best published MAMF shapes are of both kinds: 2048 x 2048 x
   13312 on an H100, 1024 x 15360 x 4096 on a GH200, 12288 x 8192 x 8192 on an MI355X);
2. **refine**: coordinate descent from the best coarse shape, in steps of :data:`~truepeak.bench.peak.plan.GPU_STEPS`
   (2048, 1024, 512, 256): try +-step in each of M, N, K, move to the best neighbour while it beats the current shape by
   more than the noise tolerance (0.3 %), halve the step when no neighbour does; every shape stays a multiple of the
   finest step. Then the same from the second-best coarse shape (``starts``), so one lucky coarse measurement cannot
   hold the search;
3. **remeasure**: the best few distinct shapes (``top_k``, default 3) are measured again with longer warm-up and timed
   budgets, and the best *re-measured* median wins. A shape that won its first measurement by luck (noise; the
   "winner's curse" of picking a maximum over many noisy values) loses here.

Every evaluation is one :mod:`truepeak.bench.run` GEMM case (random inputs rotated over >= 2x L2, checked against a
float64 reference before timing, CUDA events, NVML telemetry) and becomes a ``gemm`` record with a ``search`` step
(:class:`truepeak.records.SearchStep`: ``phase``, ``round``, ``step``, ``eval``), written the moment it finishes. An
out-of-memory shape becomes a ``failed: out of memory`` record and the search goes on around it. A format the device
cannot run becomes one ``skipped`` record of kind ``peak_search`` (:class:`truepeak.records.PeakSearchWorkload`).

Modes (always labelled): **burst** puts a 1.5 ms idle gap before each timed GEMM, as mamf-finder's per-iteration
cache flush does, so clocks recover: the figure comparable with mamf-finder's; **sustained** launches back to back
after a 3 s settle, the power-capped figure a serving GPU gets. They differ by ~18-20 % on a 700 W H200
(docs/method.md, 'H200 reference measurements'). A search in burst mode favours shorter kernels, which let clocks
recover between launches, so each mode is searched on its own.

On a CPU the search runs a small fp32 (and, if asked, bf16) search over shapes up to 2048 with the host timer: it
finds the best BLAS shape for this CPU, but there are no GPU clocks, no telemetry and no burst/sustained distinction
(mode ``cpu``).

The search itself (:func:`~truepeak.bench.peak.search.search_shapes`) is pure: it takes an ``evaluate(shape, info) ->
FLOP/s or None`` and a clock, so it is tested with synthetic throughput landscapes.

The package, one concept per module: :mod:`~truepeak.bench.peak.plan` (the shape space, budgets and defaults),
:mod:`~truepeak.bench.peak.search` (the search algorithm), :mod:`~truepeak.bench.peak.config` (the self-validating
:class:`~truepeak.bench.peak.config.PeakConfig`), :mod:`~truepeak.bench.peak.results` (the answers, ``peak.json``),
:mod:`~truepeak.bench.peak.resume` (``--resume``: finished searches read back from the records) and
:mod:`~truepeak.bench.peak.job` (:func:`run_peak`, the orchestrator). The names below are importable from
``truepeak.bench.peak`` itself.
"""

from __future__ import annotations

from truepeak.bench.peak.config import PeakConfig, peak_formats
from truepeak.bench.peak.job import run_peak
from truepeak.bench.peak.plan import (BURST_BUDGETS, CPU_COARSE_DIMS, CPU_MAX_DIM, CPU_NOTE, CPU_PEAK_BUDGETS,
                                      CPU_STEPS, DEFAULT_BUDGET_S, DEFAULT_CPU_FORMATS, DEFAULT_GPU_FORMATS,
                                      GPU_COARSE_DIMS, GPU_MAX_DIM, GPU_STEPS, MOVE_TOLERANCE, PHASES,
                                      SUSTAINED_BUDGETS, TOP_K, PeakBudgets, SearchPlan, Shape, budgets_for,
                                      coarse_grid, cpu_plan, gpu_plan, search_config)
from truepeak.bench.peak.results import FormatPeak, PeakInterrupted, PeakRun
from truepeak.bench.peak.resume import PEAK_RESUME_MUST_MATCH, peak_from_records
from truepeak.bench.peak.search import SearchInterrupted, SearchResult, Trial, best_so_far, neighbours, search_shapes

__all__ = ["Shape", "SearchPlan", "Trial", "SearchResult", "SearchInterrupted", "best_so_far", "PeakInterrupted",
           "peak_from_records", "PEAK_RESUME_MUST_MATCH", "search_shapes", "neighbours", "coarse_grid", "gpu_plan",
           "cpu_plan", "PeakBudgets", "BURST_BUDGETS", "SUSTAINED_BUDGETS", "CPU_PEAK_BUDGETS", "FormatPeak", "PeakRun",
           "PeakConfig", "run_peak", "peak_formats", "budgets_for", "search_config", "CPU_NOTE", "DEFAULT_BUDGET_S",
           "DEFAULT_GPU_FORMATS", "DEFAULT_CPU_FORMATS", "GPU_COARSE_DIMS", "CPU_COARSE_DIMS", "GPU_STEPS", "CPU_STEPS",
           "GPU_MAX_DIM", "CPU_MAX_DIM", "MOVE_TOLERANCE", "TOP_K", "PHASES"]
