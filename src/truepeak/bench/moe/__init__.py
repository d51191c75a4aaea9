"""`truepeak moe bench`: one MoE layer's routed-expert forward at decode, timed per backend against the read roofline.

The unit of work (issue #5): hidden states ``x [T, H]`` (bf16, uniform in [-1, 1]) and router output (top-k ids and
weights ``[T, k]``) → ``out [T, H] = Σ_j w[t, j] · down_e(silu(gate_e x) · up_e x)``. SiLU-gated for every model
(gpt-oss's clamped SwiGLU is the same amount of elementwise work and is not implemented).

What is timed: the whole unit — token gather, both projections, activation, routing-weight scaling and the combine —
as a CUDA-graph replay (:func:`truepeak.bench.cuda_timer.time_cuda` with ``graph=True``). The routing *metadata*
(per-expert sorted token ids, offsets, padding: "alignment") is computed once per routing, outside the timed region,
for every backend alike. Expert weights (≥ 0.8 GB per point) are far larger than the 60 MB L2, so each replay streams
them from HBM; the few-MB activations may stay in L2, as in a real decode step.

Points: the tokens-per-expert axis is the target mean over the *global* experts: ``T = tpe · E / k`` tokens routed
top-k over all E experts; with ``ep = N`` the GPU holds ``E/N`` contiguous experts and only the slots routed to them
are computed (``E_local``); with ``tp = N`` every expert's width ``I`` is divided by N.

Per point (one record, kind ``moe_experts``): time, TFLOPS (2 · 3 · H · I per routed slot), bytes of the weights of
the experts that received tokens (values + scales) and GB/s, the fraction of the read bandwidth measured in the same
run (:func:`truepeak.bench.read_bandwidth.measure_read_bandwidth`, a Triton read-only reduction over 4 GiB) and of
the roofline ``max(bytes / read_bw, flop / dense_peak)``, the error against a float32 reference (on up to 16 tokens),
status.

Backends: ``per_expert`` (two matmuls per active expert, replayed from a CUDA graph), ``bmm`` (padded batched matmul
over all local experts), ``grouped_mm`` (``torch._grouped_mm``, bf16) / ``scaled_grouped_mm``
(``torch._scaled_grouped_mm``, fp8 w8a8 with per-row activation and per-channel weight scales), and ``triton``
(truepeak's kernel, :mod:`truepeak.kernels.moe_triton`; fp8 there is w8a8 with per-row e4m3 activations, as
the torch fp8 backend; fp4 by default as each format's :func:`~truepeak.kernels.moe_triton.default_activations`:
nvfp4 w4a16, mxfp4 w4a8; ``fp4_activations`` picks one for both; on Blackwell fp4 weights run the block-scaled
kernel, :mod:`truepeak.kernels.moe_blockscaled`, compiled for sm_100 / sm_120 but not run on one). A combination a
backend cannot run is a ``skipped`` record with the reason; an error or out-of-memory is a ``failed`` record and the
sweep goes on.

Modules: :mod:`~truepeak.bench.moe.shapes` (the expert shape under TP / EP, tokens, routing ids, a point's inputs, FLOP),
:mod:`~truepeak.bench.moe.weights` (random weights in each stored format, bytes read),
:mod:`~truepeak.bench.moe.backends` (the callables that run the unit), :mod:`~truepeak.bench.moe.reference` (the
float32 reference and the output check), :mod:`~truepeak.bench.moe.config` (:class:`MoeBenchConfig`, what a sweep
measures, validated when it is built), :mod:`~truepeak.bench.moe.job` (the sweep, :func:`run_bench`). The table and
the plot: :mod:`truepeak.report.moe`.
"""

from truepeak.bench.moe.backends import BACKENDS, build_backend, build_torch_backend
from truepeak.bench.moe.config import (DEFAULT_TPE, FP4_ACTIVATIONS, FP4_KERNELS, FP8_ACTIVATIONS, WEIGHT_FORMATS,
                                       MoeBenchConfig, check_fp4_choice)
from truepeak.bench.moe.job import KIND, BenchPoint, run_bench
from truepeak.bench.moe.reference import OutputCheck, check_output, reference_rows, relative_error
from truepeak.bench.moe.shapes import (ExpertShape, decode_inputs, expert_shape, local_ids, sample_routing,
                                      tokens_for, unit_flop)
from truepeak.bench.moe.weights import active_bytes, make_weights
from truepeak.bench.read_bandwidth import measure_read_bandwidth

__all__ = ["KIND", "BACKENDS", "FP4_KERNELS", "FP8_ACTIVATIONS", "FP4_ACTIVATIONS", "WEIGHT_FORMATS", "DEFAULT_TPE",
           "MoeBenchConfig", "check_fp4_choice", "ExpertShape", "expert_shape",
           "sample_routing", "tokens_for", "local_ids", "decode_inputs", "unit_flop", "make_weights", "active_bytes",
           "build_torch_backend", "build_backend", "reference_rows", "relative_error", "check_output", "OutputCheck",
           "BenchPoint", "run_bench", "measure_read_bandwidth"]
