"""Run truepeak's MoE kernel for one (format, tokens per expert) point a few times, for a profiler to attach to
(``ncu``): DeepSeek-V3 shapes (MOE_MODEL: another model's), all 256 experts on the GPU, uniform routing, the
configuration FusedMoE picks (the tuned table, else the default rules) unless TUNE_JSON overrides fields.

Usage: [MOE_EP=8] [MOE_MODEL=glm-5] PYTHONPATH=src python3 benchmarks/moe_kernel_profile_point.py FORMAT TPE [ACTIVATIONS|-] [TUNE_JSON]
  e.g. ncu --clock-control none --kernel-name regex:'gate_up|down' --launch-skip 2 --launch-count 2 \\
           --section SpeedOfLight --section WarpStateStats --section Occupancy \\
           python3 benchmarks/moe_kernel_profile_point.py mxfp4 1 fp8
"""
import json
import os
import sys

import torch

from truepeak.bench import moe
from truepeak.kernels.moe_triton import FusedMoE

wfmt, tpe = sys.argv[1], float(sys.argv[2])
acts = sys.argv[3] if len(sys.argv) > 3 and sys.argv[3] != "-" else None
tune = json.loads(sys.argv[4]) if len(sys.argv) > 4 else None
ep = int(os.environ.get("MOE_EP", "1"))  # 8: the EP8-local layout (32 experts, only their tokens)
shape = moe.expert_shape(os.environ.get("MOE_MODEL", "deepseek-v3"), 1, ep)
w4a8 = wfmt in ("nvfp4", "mxfp4")  # the tiled layout (w4a8 and w4a16; FusedMoE repacks for the untiled one)
w1, w2 = moe.make_weights(shape, wfmt, "cuda", seed=0, w4a8=w4a8)
x, ids, topw = moe.decode_inputs(shape, tpe)  # as moe bench and moe tune make them
fn = FusedMoE(x, w1, w2, ids, topw, tokens_per_expert=tpe, activations=acts, tune=tune)
print("configs", fn.cfg1, fn.cfg2, flush=True)
for _ in range(4):
    fn()
torch.cuda.synchronize()
ev = [torch.cuda.Event(enable_timing=True) for _ in range(2)]
ev[0].record()
for _ in range(10):
    fn()
ev[1].record()
torch.cuda.synchronize()
print(f"{wfmt} tpe {tpe} acts {acts}: {ev[0].elapsed_time(ev[1]) / 10 * 1e3:.1f} us per call", flush=True)
