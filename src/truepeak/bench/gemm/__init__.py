"""GEMM backends on torch, one per number format (and fp8 scale layout): build inputs, check the result, hand a launch
function to the timer.

Every GEMM here is ``C[M, N] = A[M, K] @ B[N, K]^T`` with B the weight stored N x K (as ``nn.Linear`` stores it), so
the library sees A row-major and B column-major ("TN", as mamf-finder and cuBLAS benchmarks use; Hopper's fp8 GEMMs
accept only TN):

==============  =====================================================================================  ==============
format/scaling  call                                                                                   output
==============  =====================================================================================  ==============
fp32            ``torch.mm(A, B.t(), out=C)`` with ``torch.backends.cuda.matmul.allow_tf32 = False``  fp32
tf32            the same with ``allow_tf32 = True`` (fp32 storage, 10-bit-mantissa tensor-core math)   fp32
bf16, fp16      ``torch.mm(A, B.t(), out=C)``                                                         bf16, fp16
fp8_e4m3        ``torch._scaled_mm(A, B.t(), scale_a, scale_b, out_dtype=bfloat16)``; ``tensor``:      bf16
                one fp32 scale each; ``row``: scale_a [M, 1], scale_b [1, N] fp32 (sm_89+);
                ``block128``: ``torch.nn.functional.scaled_mm`` with 1 x 128 activation scales and
                128 x 128 weight scales (DeepSeek-V3 style; cuBLAS >= 12.9 on sm_90 only)
fp8_e5m2        as fp8_e4m3 with A in e4m3 and B in e5m2: cuBLASLt has no e5m2 x e5m2 GEMM              bf16
                (cuBLAS docs, cublasLtMatmul FP8 type table); tensor and row scales
int8            ``torch._int_mm(A, B.t())`` (cuBLASLt; needs M > 16 and K, N multiples of 8)           int32
mxfp8           ``torch._scaled_mm`` on float8_e4m3fn with e8m0 scales per 32 values (sm_100/sm_120)     bf16
nvfp4           ``torch._scaled_mm`` on float4_e2m1fn_x2 with e4m3 scales per 16 values; the two        bf16
                per-tensor fp32 global scales are applied to the output in the check (sm_100/sm_120)
mxfp4           ``torch._scaled_mm`` on float4_e2m1fn_x2 with e8m0 scales per 32 values (sm_100/sm_120) bf16
==============  =====================================================================================  ==============

The block-scaled formats (mxfp8, nvfp4, mxfp4) quantise with :mod:`truepeak.kernels.quant` and pass their scales in
cuBLAS's swizzled 128 x 4 layout (:func:`~truepeak.bench.gemm.scales.swizzle_block_scales`). **These paths have not been
run on an sm_100 or sm_120 device**: only their quantisation and scale layout are tested, on the CPU; on sm_90 they are
``skipped`` with the reason ("nvfp4 GEMM needs sm_100 or sm_120; this device is sm_90"). A library call that rejects a
combination it does not support (a 128-block fp8 scale on a torch without ``scaled_mm``, say) raises
:class:`~truepeak.bench.gemm.support.BackendUnsupported` from the first call, which ``truepeak run`` and ``truepeak
peak`` record as ``skipped`` with the library's words.

Inputs are uniform in [-1, 1] (int8: uniform integers in [-128, 127]) from a seeded ``torch.Generator``, never zeros:
zero or low-entropy data runs 7-20 % faster at lower power (NVIDIA/cutlass#2004; docs/method.md, 'Random inputs').
Zeros are used only when asked for (``inputs="zeros"``), and the Measurement is then labelled (``input_kind``) and
carries an ``inputs_not_random`` warning. fp8 scales are uniform in [0.25, 1] (CUTLASS guideline: scale factors in
[0, 1]; kept away from 0 so the output stays in range). Enough input sets are allocated that their total is >= 2x the
device-reported L2 (``rotation_sets``), and the timer launches set ``i % n_sets`` on call ``i`` (docs/method.md,
'Cache-resident working sets').

Before timing, the output of set 0 is checked against a float64 reference computed from the same (quantised and scaled)
inputs, on the first ``check_rows`` rows (rows of C are independent, so a slice checks the kernel at a fraction of the
cost): relative error ``||out - ref||_F / ||ref||_F`` with per-format tolerances
(:data:`~truepeak.bench.gemm.support.TOLERANCES`). A NaN or an error above the tolerance makes the case ``failed``.
Using float64 on the GPU too (rather than a float32 reference) keeps the fp32 check meaningful: an fp32 reference would
repeat the kernel's own arithmetic.

Torch is imported lazily; a missing torch raises :class:`~truepeak.errors.MissingDependencyError` with the install
command.

The package, by concept: :mod:`~truepeak.bench.gemm.support` (formats, scale layouts, tolerances, what runs where,
workloads), :mod:`~truepeak.bench.gemm.scales` (cuBLAS's block-scale layout), :mod:`~truepeak.bench.gemm.operands`
(inputs, scales, weight sets) and :mod:`~truepeak.bench.gemm.backend` (:class:`~truepeak.bench.gemm.backend.TorchGemm`).
The names below are importable from ``truepeak.bench.gemm`` itself.
"""

from __future__ import annotations

from truepeak.bench.gemm.backend import TorchGemm, tf32_mode
from truepeak.bench.gemm.operands import Operand, WeightCache, make_operand, outer_dim_major
from truepeak.bench.gemm.scales import swizzle_block_scales, swizzled_scale_index
from truepeak.bench.gemm.support import (BLOCK128_ROW_MULTIPLE, BLOCK_SCALED_CCS, CPU_FORMATS, FP8_SCALINGS,
                                         GPU_FORMATS, GPU_SKIP_PROBES, INPUT_KINDS, TOLERANCES, BackendUnsupported,
                                         backend_name, bytes_per_set, check_passes, default_scaling, gemm_workload,
                                         padding_note, run_rows, supported, torch_module)
from truepeak.formats import get_format

__all__ = ["TOLERANCES", "GPU_FORMATS", "CPU_FORMATS", "GPU_SKIP_PROBES", "FP8_SCALINGS", "INPUT_KINDS",
           "BLOCK_SCALED_CCS", "BackendUnsupported", "supported", "backend_name", "gemm_workload", "bytes_per_set",
           "default_scaling", "swizzle_block_scales", "swizzled_scale_index", "make_operand", "outer_dim_major",
           "Operand", "TorchGemm", "WeightCache", "BLOCK128_ROW_MULTIPLE", "run_rows", "padding_note", "tf32_mode",
           "check_passes", "torch_module", "get_format"]
