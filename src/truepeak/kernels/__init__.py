"""truepeak's own kernels and the reference quantisers they are checked against.

- :mod:`truepeak.kernels.quant`: NVFP4 / MXFP4 / MXFP8 / FP8 quantise and dequantise in plain torch (reference
  implementations with exact rounding).
- :mod:`truepeak.kernels.moe_triton`: the fused-MoE Triton kernels for decode (weight streaming at the read roofline):
  tuning rules, routing metadata, fp4 layouts, expert weights, input checks, the launcher and the reference, one module
  each; the ``@triton.jit`` code itself is in ``_moe_jit`` and ``_moe_quant_jit`` (imported on first launch).
- :mod:`truepeak.kernels.moe_blockscaled`: the MoE expert layer on Blackwell's block-scaled MMAs; its ``@triton.jit``
  code is in ``_moe_blockscaled_jit``. The jit helpers both families inline are in ``_moe_jit_common``.
- :mod:`truepeak.kernels.moe_inspect`: compile the kernels for a GPU target without a GPU and read what the compiler
  made of them.

Nothing here imports torch or triton at import time.
"""
