"""truepeak's own kernels and the reference quantisers they are checked against.

- :mod:`truepeak.kernels.quant`: NVFP4 / MXFP4 / MXFP8 / FP8 quantise and dequantise in plain torch (reference
  implementations with exact rounding).
- :mod:`truepeak.kernels.moe_triton`: the fused-MoE Triton kernels for decode (weight streaming at the read roofline)
  and their routing metadata; the ``@triton.jit`` code itself is in ``_moe_jit`` (imported on first launch).

Nothing here imports torch or triton at import time.
"""
