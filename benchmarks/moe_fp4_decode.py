"""fp4 weight decoding on one GPU: truepeak's MoE kernel with fp4 weights in the MMA layout (nvfp4 and mxfp4, fp16
and fp8 activations) against the same kernel on the w4a8 layout (`tiles`, each format's default activations), with
bf16 and fp8 weights as a control, DeepSeek-V3 routed experts, E = 256 and EP8-local, uniform routing, at 1-64
tokens per expert, timed as `truepeak moe bench` times (the whole unit from a CUDA graph, % of the read bandwidth
measured in the same run).

Usage: PYTHONPATH=src python3 benchmarks/moe_fp4_decode.py OUT_DIR [--budget 0.05] [--ep 1,8]
Writes OUT_DIR/moe_fp4.jsonl (records appended as each point finishes, so a time limit keeps what ran) and prints
one line per point.
"""
import argparse
import os
import time

from truepeak.bench import moe
from truepeak.bench.environment import environment

TOKENS_PER_EXPERT = (1, 2, 4, 8, 16, 32, 64)
#: (weights, fp4 layout, fp4 activations, KernelConfig overrides): the control formats, the MMA layout, the w4a8
#: layout's kernels, then the MMA layout's nvfp4 gate/up capped at 128 registers (4 programs per SM instead of 3)
RUNS = (("bf16", "mma", "auto", None), ("fp8", "mma", "auto", None), ("nvfp4", "mma", "fp16", None),
        ("nvfp4", "mma", "fp8", None), ("mxfp4", "mma", "fp16", None), ("mxfp4", "mma", "fp8", None),
        ("nvfp4", "tiles", "auto", None), ("mxfp4", "tiles", "auto", None), ("nvfp4", "mma", "fp16", {"maxnreg": 128}))


def show(r):
    r = r.to_dict()
    w = r["workload"]
    head = (f"E{w['E_local']:<4d} {w['weights_format']:6s} {w.get('fp4_layout') or '-':5s} "
            f"{'r128 ' if w.get('triton_tune') else ''}"
            f"{w.get('activations', '')[:4]:4s} tpe {w['tokens_per_expert']:>3g}")
    if r["status"] == "ok":
        d = r["derived"]
        print(f"{head} {d['time_s'] * 1e6:8.1f} us {100 * d['read_bandwidth_fraction']:5.1f} %bw "
              f"err {r['correctness']['max_rel_error']:.2e}", flush=True)
    else:
        print(f"{head} {r['status']}: {r['reason'][:200]}", flush=True)


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out")
    ap.add_argument("--budget", type=float, default=0.05, help="timed seconds per point")
    ap.add_argument("--ep", default="1,8")
    args = ap.parse_args(argv)
    os.makedirs(args.out, exist_ok=True)
    path = os.path.join(args.out, "moe_fp4.jsonl")
    t0 = time.time()
    bw = moe.measure_read_bandwidth()
    print(f"read bandwidth (Triton reduction, 4 GiB): {bw / 1e12:.3f} TB/s", flush=True)
    env = environment()
    for ep in (int(v) for v in args.ep.split(",")):
        for wfmt, layout, acts, tune in RUNS:
            config = moe.MoeBenchConfig("deepseek-v3", ep=ep, tokens_per_expert=TOKENS_PER_EXPERT, routing="uniform",
                                        weights=(wfmt,), backends=("triton",), budget_s=args.budget, warmup_s=0.03,
                                        read_bw=bw, fp4_activations=acts, fp4_kernel="dequant", fp4_layout=layout,
                                        triton_tune={wfmt: tune} if tune else None)
            moe.run_bench(config, out_path=path, progress=show, env=env)
            print(f"-- ep{ep} {wfmt} {layout} {acts} done at {time.time() - t0:.0f} s", flush=True)
    print(f"total {time.time() - t0:.0f} s")


if __name__ == "__main__":
    main()
