"""w8a8 correctness check on the device: our kernel against a float32 emulation of exactly its rounding (x and the
intermediate quantised per row to e4m3), DeepSeek-V3 EP8-local, 1 token per expert, uniform routing, first 16 tokens.
Prints the largest per-token difference (relative to the emulation's max |out|), the worst token, and for each of its
local experts the error of the intermediate row and of that slot's down-projection output. It found the fp8 MMA
accumulating without fp32 promotion (docs/results/h200/moe/calls/w8a8_check.log).

Usage: python3 benchmarks/moe_w8a8_vs_emulation.py   (from the repository root, on a CUDA GPU)
"""
import torch, sys
sys.path.insert(0, "src")
from truepeak.bench import moe
from truepeak.kernels.moe_triton import FusedMoE
shape = moe.expert_shape("deepseek-v3", ep=8)
w1, w2 = moe.make_weights(shape, "fp8", "cuda", 0)
T = moe.tokens_for(1, shape)
ids = moe.local_ids(moe.sample_routing("uniform", T, shape.E, shape.top_k, 0), shape).cuda()
topw = torch.softmax(torch.rand(T, shape.top_k, generator=torch.Generator().manual_seed(0)), 1).cuda()
x = (torch.rand(T, shape.H, device="cuda", dtype=torch.bfloat16, generator=torch.Generator(device="cuda").manual_seed(0)) * 2 - 1)
def q(a):
    s = a.float().abs().amax(-1, keepdim=True).clamp(min=1e-12) / 448
    return (a.float() / s).to(torch.float8_e4m3fn).float() * s
W1 = w1.data.float() * w1.scale[:, :, None]; W2 = w2.data.float() * w2.scale[:, :, None]
I = shape.I
print("token 11 ids", ids[11].tolist())
for tune, acts in (({}, None), ({"block_k": 128}, None), ({}, "fp16")):
    f = FusedMoE(x, w1, w2, ids, topw, tokens_per_expert=1, tune=tune or None, activations=acts)
    out = f()[:16].float()
    emu = torch.zeros(16, shape.H, device="cuda")
    xq = q(x[:16]) if acts is None else x[:16].float()
    hs = {}
    for t in range(16):
        for j in range(shape.top_k):
            e = int(ids[t, j])
            if e < 0: continue
            h = W1[e] @ xq[t]; a = (torch.nn.functional.silu(h[:I]) * h[I:]).bfloat16()
            hs[(t, j)] = a.float()
            emu[t] += topw[t, j] * (W2[e] @ (q(a) if acts is None else a.float()))
    m = emu.abs().max()
    d = ((out - emu).abs().amax(1) / m)
    worst = int(d.argmax())
    print(tune, acts, f.cfg1.block_k, f.cfg1.block_m, "ours-emu", float(d.max()), "worst token", worst)
    for j in range(shape.top_k):
        if (worst, j) in hs:
            got = f.inter[worst * shape.top_k + j].float()
            print("   slot", j, "expert", int(ids[worst, j]), "inter rel err", float((got - hs[(worst, j)]).abs().max() / hs[(worst, j)].abs().max()),
                  "partial rel", float((f.partial[worst * shape.top_k + j].float() - topw[worst, j] * (W2[int(ids[worst, j])] @ (q(hs[(worst, j)]) if acts is None else hs[(worst, j)]))).abs().max() / m))
