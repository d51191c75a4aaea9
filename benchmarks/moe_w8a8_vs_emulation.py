"""w8a8 against a float32 emulation of exactly its rounding, on the device: truepeak's MoE kernel with fp8 weights
(x and the intermediate quantised per row to e4m3) against the same computation in float32 with the same e4m3
rounding, DeepSeek-V3 EP8-local, 1 token per expert, uniform routing, first 16 tokens; also 128-element K steps and
w8a16 (fp16 activations, emulated without activation rounding). Prints the largest per-token difference (relative to
the emulation's max |out|), the worst token, and for each of its local experts the error of the intermediate row and
of that slot's down-projection output. A kernel that rounds as it should differs from the emulation by bf16 output
rounding and sum order only; the fp8 MMA's partial sums must be promoted to fp32 for that (_moe_jit's _dot_fp8).

Usage: PYTHONPATH=src python3 benchmarks/moe_w8a8_vs_emulation.py   (from the repository root, on a CUDA GPU)
"""
import torch

from truepeak.bench import moe
from truepeak.kernels.moe_triton import FusedMoE

shape = moe.expert_shape("deepseek-v3", ep=8)
w1, w2 = moe.make_weights(shape, "fp8", "cuda", 0)
x, ids, topw = moe.decode_inputs(shape, 1)


def q(a):
    """Per-row e4m3 quantise-dequantise, as the kernel's quant_rows_kernel (scale max|row| / 448)."""
    s = a.float().abs().amax(-1, keepdim=True).clamp(min=1e-12) / 448
    return (a.float() / s).to(torch.float8_e4m3fn).float() * s


W1 = w1.data.float() * w1.scale[:, :, None]
W2 = w2.data.float() * w2.scale[:, :, None]
I = shape.I  # noqa: E741 - the expert width's name
for tune, acts in (({}, None), ({"block_k": 128}, None), ({}, "fp16")):
    f = FusedMoE(x, w1, w2, ids, topw, tokens_per_expert=1, tune=tune or None, activations=acts)
    out = f()[:16].float()
    emu = torch.zeros(16, shape.H, device="cuda")
    xq = q(x[:16]) if acts is None else x[:16].float()
    hs = {}
    for t in range(16):
        for j in range(shape.top_k):
            e = int(ids[t, j])
            if e < 0:
                continue
            h = W1[e] @ xq[t]
            a = (torch.nn.functional.silu(h[:I]) * h[I:]).bfloat16()
            hs[(t, j)] = a.float()
            emu[t] += topw[t, j] * (W2[e] @ (q(a) if acts is None else a.float()))
    m = emu.abs().max()
    d = (out - emu).abs().amax(1) / m
    worst = int(d.argmax())
    print(tune, acts, f.cfg1.block_k, f.cfg1.block_m, "ours-emu", float(d.max()), "worst token", worst)
    for j in range(shape.top_k):
        if (worst, j) not in hs:
            continue
        e, h = int(ids[worst, j]), hs[(worst, j)]
        inter = f.inter[worst * shape.top_k + j].float()
        want = topw[worst, j] * (W2[e] @ (q(h) if acts is None else h))
        partial = f.partial[worst * shape.top_k + j].float()
        print("   slot", j, "expert", e, "inter rel err", float((inter - h).abs().max() / h.abs().max()),
              "partial rel", float((partial - want).abs().max() / m))
