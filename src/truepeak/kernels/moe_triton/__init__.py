"""truepeak's fused-MoE Triton kernels for decode: stream each active expert's weights once. What they reach on an
H200, against the read bandwidth measured in the same run and against torch's backends:
docs/results/h200/moe/README.md.

Modules: :mod:`~truepeak.kernels.moe_triton.config` (weight formats, :class:`KernelConfig`, :func:`choose_config`,
default activations, fp4 K steps), :mod:`~truepeak.kernels.moe_triton.routing` (:func:`align_routing`),
:mod:`~truepeak.kernels.moe_triton.layouts` (the fp4 layouts and their inverses),
:mod:`~truepeak.kernels.moe_triton.weights` (:class:`ExpertWeights`, :func:`quantize_experts`),
:mod:`~truepeak.kernels.moe_triton.checks` (:func:`check_inputs`), :mod:`~truepeak.kernels.moe_triton.smem`
(:func:`fit_shared_memory`), :mod:`~truepeak.kernels.moe_triton.fused` (:class:`FusedMoE`, the launcher),
:mod:`~truepeak.kernels.moe_triton.reference` (:func:`moe_reference`), :mod:`~truepeak.kernels.moe_triton.tuned` (the
tuned tables ``truepeak moe tune`` writes and :class:`FusedMoE` loads: :class:`TunedTable`, :func:`find_table`,
:func:`bucket_of`), :mod:`~truepeak.kernels.moe_triton.search_space` (the tuner's candidates and their shared-memory
fit); the ``@triton.jit`` sources are in
:mod:`truepeak.kernels._moe_jit` (the GEMMs) and :mod:`truepeak.kernels._moe_quant_jit` (the activation quantiser). Every public name is importable from this package.

The unit of work: hidden states ``x [T, H]`` and router output (``topk_ids``, ``topk_weights`` ``[T, k]``)
→ ``out [T, H] = Σ_j w[t, j] · down_e(act(gate_up_e(x[t])))`` with ``e = topk_ids[t, j]`` and the SiLU-gated
activation ``act(g, u) = silu(g) · u`` (DeepSeek-V3, GLM-5, Qwen3; gpt-oss's clamped SwiGLU with alpha = 1.702 and
limit 7 is *not* implemented: its cost is the same elementwise work, the benchmark runs SiLU-gated for every model).

Design (why it reaches the weight-streaming roofline at a few tokens per expert):

- Routing metadata is computed once per routing, on the host side of the timed region, by :func:`align_routing`:
  the (token, slot) pairs sorted by expert and padded to ``block_m`` rows per block, one expert per block (vLLM's
  ``moe_align_block_size`` layout). ``block_m`` is chosen from the *tokens per expert* (docs/method.md, 'Padding per
  expert'), not the batch, so that at ≤ 32 tokens per expert almost every active expert is one block: its weights are
  read once.
- Each program computes a ``block_n x block_m`` tile of one expert's output with the **weights as the MMA's A
  operand** ("swap AB"): the weight tile ``[block_n, block_k]`` is the big operand, the few tokens are the MMA's N
  (16..128), so no MMA rows are wasted on padding tokens and the weights can be dequantised in registers.
- Programs are ordered M-block-fastest: the M blocks of one expert that has more tokens than ``block_m`` run next to
  each other and share its weight tile through L2.
- Kernel 1 computes gate and up tiles in one K loop (two accumulators; each activation tile is loaded once for both)
  and writes ``silu(g) · u`` per (token, slot) row; kernel 2 is the down projection, scaled by the routing weight,
  written per (token, slot) row; the ``k`` rows of a token are summed by one ``sum`` (the combine).
- Weight formats (``wfmt``): ``bf16``; ``fp8`` (e4m3, per-channel fp32 scales, applied to the accumulator once);
  ``fp8_block`` (128 x 128 fp32 block scales, applied per K step of at most 128); ``nvfp4`` (e2m1 packed two per byte,
  e4m3 scale per 16 and a per-expert fp32 scale) and ``mxfp4`` (e2m1, e8m0 scale per 32).
- fp8 weights run **w8a8** by default: x and the intermediate are quantised per row to e4m3 (scale max|row| / 448)
  by :func:`truepeak.kernels._moe_quant_jit.quant_rows_kernel` inside the call, the MMA is fp8 x fp8 fed from shared
  memory like bf16, with the tensor core's partial sums added into fp32 every 128 products (Hopper's fp8 MMA
  accumulates with limited precision: DeepSeek-V3 report §3.3.2). ``activations="fp16"`` gives w8a16 (e4m3 → fp16
  in registers, one cvt per 2 values).
- FP4 weights in the **MMA layout** (``fp4_layout="mma"``, nvfp4's default, :func:`default_fp4_layout`;
  :func:`to_mma_layout`): each 32-bit word holds the 8 e2m1 values one thread of the warpgroup MMA needs for two
  16-element K slices, bit-interleaved so that 4 rotations and 6 LOP3 give its 4 fp16x2 A-operand registers, one
  HMUL2 each applies the block scale, and fp16 MMAs follow (fp16 or e4m3 activations, stored in the layout's K order,
  :func:`mma_logical_order`). docs/results/h200/moe-fp4/README.md has the measurements.
- FP4 weights with ``fp4_layout="tiles"`` (mxfp4's default) are repacked once (:func:`to_w4a8_layout`: 64-element nibble chunks, a bit permutation that makes
  e2m1 → e4m3 5 integer instructions per 8 values, and 64-row x 64-element tiles of 2 KB stored contiguously; the
  block scales as one int32 word per row and 64- or 128-element step, :meth:`ExpertWeights.w4a8_scale_words`). The
  2 KB tiles matter most: a K step reads 32 or 64 bytes of each row, which as rows K/2 bytes apart are small strided
  reads (docs/results/h200/moe/README.md). Two kernels read them; :func:`default_activations` picks the faster one
  measured per format:
- **w4a8** (``activations="fp8"``, mxfp4's default): the activations quantised per row as for fp8, e2m1 decoded to
  e4m3, the step's scale blocks each one fp8 MMA of K = 32 whose fp32 result is multiplied by the block scale
  (nvfp4's 16-element blocks through two activation planes, even and odd blocks, the other zeroed).
- **the tiled w4a16** (``activations="fp16"``): the same e4m3 decode converted to fp16 (one cvt per 2
  values), multiplied by the block scale in fp16 (exact: at most 6 significant bits and 42 (nvfp4) or 48 (mxfp4,
  rebased per expert) in magnitude) and fed to fp16 MMAs with the activations scaled per row by a power of two into
  fp16: one multiply per weight value whatever the token count (w4a8's FFMAs grow with the token block), and fp16
  instead of e4m3 activations.
- With ``untiled_w4a16=True`` (kept for comparison) fp16 activations run the untiled w4a16 kernel: nibbles decoded
  into fp16 by inline PTX (with the nibble at the top of a 16-bit lane, the sign stays and the exponent/mantissa bits
  move right by 3: the e2m1 value times 2^-14), bytes repacked into the kernel's nibble order
  (:func:`to_kernel_nibble_order`). All are the Hopper path;
  Blackwell's native block-scaled fp4 MMA is :mod:`truepeak.kernels.moe_blockscaled` (compiled for sm_100 / sm_120,
  not run on such a device).
- ``KernelConfig.hoist`` (fp4): decode in the MMA operand's register layout straight from shared memory (2 bytes per
  PTX call) rather than in the loaded layout plus a shared-memory round trip; ``prefetch``: register double
  buffering of the next K step (an option for tuning studies; the defaults leave it off).
- Shared memory (docs/method.md, 'Shared memory per block'): :func:`choose_config` estimates it (exact for bf16 and
  w8a8, an upper bound otherwise, checked against Triton's allocation for sm_90 in the tests) and :class:`FusedMoE`
  compiles each kernel and drops stages until the compiler's own figure fits the device's per-block limit.

Layouts: ``w1 [E, 2I, H]`` (gate rows 0..I-1, up rows I..2I-1; K = H contiguous), ``w2 [E, H, I]``; fp4 weights as
packed uint8 ``[E, N, K//2]`` with the scales of :mod:`truepeak.kernels.quant` (``[E, N, K//16]`` e4m3 for nvfp4 plus
a float32 ``[E]`` global scale; ``[E, N, K//32]`` uint8 e8m0 for mxfp4).

torch and triton are imported lazily inside functions; the ``@triton.jit`` kernels are built on first use.
"""

from truepeak.kernels.moe_triton.checks import check_inputs
from truepeak.kernels.moe_triton.config import (WEIGHT_FORMATS, WFMT_ID, KernelConfig, check_tokens_per_expert,
                                                check_wfmt, choose_config, default_activations,
                                                default_fp4_layout, fp4_block_k,
                                                w4a8_block_k)
from truepeak.kernels.moe_triton.fused import BusyLaunch, FusedMoE, interpreting
from truepeak.kernels.moe_triton.layouts import (W4A8_TILE, from_e4m3_bit_layout, from_kernel_nibble_order,
                                                 from_mma_layout, from_w4a8_layout, mma_logical_order,
                                                 to_e4m3_bit_layout, to_kernel_nibble_order, to_mma_layout,
                                                 to_w4a8_layout)
from truepeak.kernels.moe_triton.reference import moe_reference
from truepeak.kernels.moe_triton.routing import (BUSY_FACTOR, Alignment, align_routing, busy_experts,
                                                 mean_tokens_per_expert)
from truepeak.kernels.moe_triton.smem import device_smem_limit, fit_shared_memory
from truepeak.kernels.moe_triton.tuned import TunedEntry, TunedTable, bucket_of, find_table, load_table
from truepeak.kernels.moe_triton.weights import ExpertWeights, quantize_experts

__all__ = ["Alignment", "BUSY_FACTOR", "BusyLaunch", "ExpertWeights", "FusedMoE", "KernelConfig", "TunedEntry",
           "TunedTable", "W4A8_TILE", "WEIGHT_FORMATS", "WFMT_ID", "align_routing", "bucket_of", "busy_experts",
           "check_inputs", "check_tokens_per_expert", "check_wfmt", "choose_config", "default_activations",
           "default_fp4_layout", "device_smem_limit", "find_table", "fit_shared_memory", "fp4_block_k",
           "from_e4m3_bit_layout", "from_kernel_nibble_order", "from_mma_layout", "from_w4a8_layout", "interpreting",
           "load_table", "mean_tokens_per_expert", "mma_logical_order", "moe_reference", "quantize_experts",
           "to_e4m3_bit_layout", "to_kernel_nibble_order", "to_mma_layout", "to_w4a8_layout", "w4a8_block_k"]
