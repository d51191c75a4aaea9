"""GPU check of the Gluon w4a8 kernel against the tl.dot w4a8 kernel (same formats and math, different MMA
scheduling): DeepSeek-V3 shapes, all 256 experts, uniform routing, 1 and 8 tokens per expert, nvfp4 and mxfp4.
Prints max |difference| / max |tl.dot output| per point. Usage: PYTHONPATH=src python3 benchmarks/moe_gluon_check.py
"""
import torch

from truepeak.bench import moe
from truepeak.kernels.moe_triton import FusedMoE

shape = moe.expert_shape("deepseek-v3")
for wfmt in ("mxfp4", "nvfp4"):
    w1, w2 = moe.make_weights(shape, wfmt, "cuda", seed=0, w4a8=True)
    for tpe in (1, 8):
        T = moe.tokens_for(tpe, shape)
        ids = moe.local_ids(moe.sample_routing("uniform", T, shape.E, shape.top_k, 0), shape).cuda()
        topw = torch.softmax(torch.rand(T, shape.top_k), 1).cuda()
        x = torch.rand(T, shape.H, device="cuda", dtype=torch.bfloat16) * 2 - 1
        ref = FusedMoE(x, w1, w2, ids, topw, tokens_per_expert=tpe, activations="fp8")().float()
        g = FusedMoE(x, w1, w2, ids, topw, tokens_per_expert=tpe, activations="fp8",
                     tune={"gluon": True, "block_n": 64})
        y = g().float()
        print(f"{wfmt} tpe {tpe}: gluon vs tl.dot max |diff| / max |ref| = "
              f"{float((y - ref).abs().max() / ref.abs().max()):.2e}", flush=True)
