"""Tune and re-run truepeak's MoE kernel for the dequantised formats (fp8 w8a16, nvfp4, mxfp4) on the H200.

Step 1: on DeepSeek-V3 EP8-local (32 experts), uniform, 8 tokens per expert, time each KernelConfig variant (register
prefetch of the next K step, pipeline stages, warps, block_k) and keep the fastest per format.
Step 2: DeepSeek-V3 and GLM-5, E=256 and EP8-local, uniform routing, tokens per expert 1..256, triton backend only,
with the chosen variant. Usage: PYTHONPATH=src python3 benchmarks/moe_dequant_tuning.py OUT_DIR
"""
import os
import sys
import time

from truepeak.bench import moe
from truepeak.bench.environment import environment

out = sys.argv[1]
os.makedirs(out, exist_ok=True)
t0 = time.time()
bw = moe.measure_read_bandwidth()
print(f"read bandwidth (Triton reduction, 4 GiB): {bw / 1e12:.3f} TB/s", flush=True)
env = environment()
VARIANTS = {
    "fp8": [{}, {"prefetch": True, "num_stages": 1}, {"prefetch": True, "num_stages": 1, "block_k": 256},
            {"prefetch": True, "num_stages": 2}],
    "nvfp4": [{}, {"prefetch": True, "num_stages": 1, "num_warps": 4}, {"prefetch": True, "num_stages": 1},
              {"prefetch": True, "num_stages": 1, "num_warps": 4, "block_k": 512},
              {"prefetch": True, "num_stages": 2, "num_warps": 4}],
}
VARIANTS["mxfp4"] = VARIANTS["nvfp4"]
chosen = {}
for fmt, variants in VARIANTS.items():
    best = None
    for v in variants:
        config = moe.MoeBenchConfig("deepseek-v3", ep=8, tokens_per_expert=(8,), weights=(fmt,), backends=("triton",),
                                    budget_s=0.05, warmup_s=0.02, read_bw=bw, triton_tune={fmt: v})
        recs = moe.run_bench(config, out_path=os.path.join(out, "tune.jsonl"), env=env)
        r = recs[0].to_dict()
        if r["status"] == "ok":
            pct = 100 * r["derived"]["read_bandwidth_fraction"]
            print(f"tune {fmt:6s} {str(v):75s} {r['derived']['time_s'] * 1e6:8.1f} us {pct:5.1f} %bw", flush=True)
            if best is None or r["derived"]["time_s"] < best[0]:
                best = (r["derived"]["time_s"], v)
        else:
            print(f"tune {fmt:6s} {str(v):75s} {r['status']}: {r['reason'][:150]}", flush=True)
    chosen[fmt] = best[1] if best else {}
print("chosen:", chosen, f"at {time.time() - t0:.0f} s", flush=True)


def show(r):
    r = r.to_dict()
    w = r["workload"]
    if r["status"] == "ok":
        d = r["derived"]
        print(f"{w['model']:12s} E{w['E_local']:<4d} {w['weights_format']:6s} tpe {w['tokens_per_expert']:>5g} "
              f"{d['time_s'] * 1e6:9.1f} us {100 * d['read_bandwidth_fraction']:5.1f} %bw err "
              f"{r['correctness']['max_rel_error']:.1e}", flush=True)
    else:
        print(w["model"], w["E_local"], w["weights_format"], w["tokens_per_expert"], r["status"], r["reason"][:150])


for model, ep in (("deepseek-v3", 1), ("deepseek-v3", 8), ("glm-5", 8), ("glm-5", 1)):
    config = moe.MoeBenchConfig(model, ep=ep, tokens_per_expert=(1, 4, 8, 16, 32, 64, 256),
                                weights=("fp8", "nvfp4", "mxfp4"), backends=("triton",), budget_s=0.05, warmup_s=0.02,
                                read_bw=bw, triton_tune=chosen)
    moe.run_bench(config, out_path=os.path.join(out, "moe_experts_dequant_tuned.jsonl"), env=env, progress=show)
    print(f"-- {model} ep{ep} done at {time.time() - t0:.0f} s", flush=True)
