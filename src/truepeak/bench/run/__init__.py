"""The main job, ``truepeak run``: measure this device's copy bandwidth and GEMM throughput per format, write records.

The default sweep (cases as data: :func:`plan_cases`):

1. Memory bandwidth first (:mod:`truepeak.bench.membw`): a device copy over buffers >= 8x the cache. Where the
   catalog has no bandwidth (a CPU) this copy is the roofline's memory ceiling; a ``very_noisy`` one is then measured
   once more over :data:`~truepeak.bench.run.runners.COPY_REMEASURE_FACTOR` x the budget, and the record's reason says
   so.
2. For each timing mode (GPU: ``sustained`` by default, ``burst`` or both with ``modes``; CPU: ``cpu``) and each
   supported format (GPU: fp32, tf32, bf16, fp16, fp8_e4m3 with per-tensor, per-row and 128-block scales, fp8_e5m2
   (e4m3 x e5m2) with per-tensor and per-row scales, int8; CPU: fp32, plus bf16 outside quick mode when the CPU runs
   it at least half as fast as fp32; quick mode keeps the per-tensor fp8 scales only), in that order:

   - the decode regime, M in {1, 2, 4, 8, 16, 32, 64, 128, 256}, at two DeepSeek-V3 MoE expert shapes: gate+up
     (N=4096 = 2 x 2048, K=7168 = hidden) and down (N=7168, K=2048);
   - large squares: 4096^3 and 8192^3 on a GPU, 1024^3 and 2048^3 on a CPU.

   Formats the device cannot run (nvfp4/mxfp4/mxfp8 on sm_90, say) get one ``skipped`` record each with the reason;
   shapes a backend cannot run (int8 needs M > 16) get a ``skipped`` record per shape; a combination the library
   refuses at its first call (:class:`~truepeak.bench.gemm.BackendUnsupported`) is ``skipped`` with its words.

Every GEMM record is labelled with its mode, stores the NVML telemetry summary of its timed region, the dense peak and
the peak at the median sampled SM clock (``derived.peak_at_clock_flop_per_s``) with both efficiencies, and warns
(:func:`~truepeak.bench.run.warnings.clock_warnings`) when the clock ran below 90 % of its maximum (naming the throttle
reason) or when a sampled clock above the catalog maximum made ``at_clock_fraction`` unusable.

Each case becomes a :class:`truepeak.records.Record` (:func:`truepeak.records.make_record`) written the moment it
finishes through :class:`~truepeak.records.RecordWriter` (flushed and fsynced: a crash loses nothing), with ``derived``
from :func:`truepeak.efficiency.derived_metrics` (SI: FLOP/s, B/s, fractions of the dense peak, the roofline and the
peak at the median SM clock NVML sampled, and the peak and bandwidth they are against). An exception inside one case
(out of memory, an unsupported layout, a result above the peak) becomes a ``failed`` record with the reason, and the
sweep continues. A GEMM above 100 % of its roofline gets a record warning saying why
(:func:`~truepeak.bench.run.warnings.roofline_warnings`). ``resume=True`` skips cases whose ``ok``/``skipped`` records
are already in the file (failed ones run again); it continues with the formats recorded in ``run_config`` unless formats
are given, and refuses other settings (:func:`~truepeak.bench.run.resume.check_resume_config`). This package measures
and returns records; rendering them (the table, ``summary.md``) is :mod:`truepeak.report`'s job, called by the CLI.

Time budget and its trade-off (docs/method.md, 'Warm-up outliers'): the whole default run should take <=
3 min on an H200 and <= 2 min on a 2-core CPU, for ~200 GPU cases (sustained only). So the GPU gets ONE long warm-up
(3 s of back-to-back bf16 8192^3 GEMMs) at the start to bring clock and power to their sustained state, then short
per-case budgets: 0.1 s warm-up + 0.3 s timed per decode case, 1.5 s + 1 s per large square (the squares draw the most
power and need the clock settled again after the light decode cases). The CUTLASS fixed-power protocol asks >= 3 s
warm-up and > 1000 iterations per shape; these shorter windows make the large-square numbers sit a little closer to
burst than a long sustained run (expect bf16 8192^3 on a 700 W H200 in ~650-800 TFLOPS, sustained literature 677-701,
burst ~807). Every record states its mode (sustained, back-to-back launches), warm-up seconds, sample count and the SM
clock it ran at, and its ``run_config`` holds the budgets, so the numbers can be read for what they are. For a longer,
stricter measurement, pass larger :class:`~truepeak.bench.run.config.Budgets`.

Units: seconds, bytes, FLOP inside; records store SI values and fractions (0.68); the report renders them.

The package, one concept per module: :mod:`~truepeak.bench.run.cases` (the sweep as data),
:mod:`~truepeak.bench.run.config` (budgets, the self-validating :class:`~truepeak.bench.run.config.RunConfig`, the
records' ``run_config``), :mod:`~truepeak.bench.run.resume` (what ``--resume`` compares),
:mod:`~truepeak.bench.run.settle` (settling the GPU, the CPU bf16 check), :mod:`~truepeak.bench.run.runners` (one case
into one record), :mod:`~truepeak.bench.run.warnings` (a record's warnings in words),
:mod:`~truepeak.bench.run.progress` (the progress bar) and :mod:`~truepeak.bench.run.job` (:func:`run_main_job`). The
names below are importable from ``truepeak.bench.run`` itself.
"""

from __future__ import annotations

from truepeak.bench.outdir import check_out_arg, default_out_dir, make_out_dir, prepare_out_dir
from truepeak.bench.run.cases import (CPU_SQUARES, DECODE_M, GPU_SQUARES, MODEL_NK, QUICK_CPU_SHAPES,
                                      QUICK_GPU_SHAPES, Case, case_backend, case_key, case_mode, default_formats,
                                      format_variants, gemm_shapes, plan_cases)
from truepeak.bench.run.config import (CPU_BUDGETS, GPU_BUDGETS, MODE_CHOICES, QUICK_BUDGETS, QUICK_GPU_BUDGETS,
                                       Budgets, RunConfig, budgets_name, canonical_formats, default_budgets,
                                       expand_modes, run_config)
from truepeak.bench.run.job import RunInterrupted, RunResult, latest_records, run_main_job
from truepeak.bench.run.resume import RESUME_MUST_MATCH, check_resume_config, recorded_formats
from truepeak.bench.run.runners import COPY_REMEASURE_FACTOR, Sweep
from truepeak.bench.run.settle import SETTLE_SIZE, cpu_bf16_fast_enough, settle_format, settle_gpu
from truepeak.bench.run.warnings import (CLOCK_ABOVE_MAX_TOLERANCE, LOW_CLOCK_FRACTION, clock_warnings,
                                         roofline_warnings)

__all__ = ["Budgets", "Case", "RunConfig", "RunResult", "RunInterrupted", "Sweep", "run_main_job", "prepare_out_dir",
           "check_out_arg", "make_out_dir", "run_config", "check_resume_config", "recorded_formats",
           "roofline_warnings", "clock_warnings", "budgets_name", "default_budgets", "plan_cases", "default_formats",
           "canonical_formats", "expand_modes", "gemm_shapes", "format_variants", "default_out_dir", "case_key",
           "case_mode", "case_backend", "settle_gpu", "settle_format", "cpu_bf16_fast_enough", "latest_records",
           "DECODE_M", "MODEL_NK", "GPU_SQUARES", "CPU_SQUARES", "QUICK_CPU_SHAPES", "QUICK_GPU_SHAPES", "SETTLE_SIZE",
           "COPY_REMEASURE_FACTOR", "GPU_BUDGETS", "CPU_BUDGETS", "QUICK_BUDGETS", "QUICK_GPU_BUDGETS",
           "RESUME_MUST_MATCH", "MODE_CHOICES", "CLOCK_ABOVE_MAX_TOLERANCE", "LOW_CLOCK_FRACTION"]
