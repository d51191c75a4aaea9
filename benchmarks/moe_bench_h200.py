"""MoE expert layer at decode on the H200 (issue #5): all backends x formats, printing a compact table.

Usage: PYTHONPATH=src python3 benchmarks/moe_bench_h200.py OUT_DIR [--quick] [--routing uniform|powerlaw:1.2]
                                                         [--weights bf16,fp8,nvfp4,mxfp4]
                                                         [--fp4-activations auto|fp8|fp16|fp4] [--models deepseek-v3,glm-5]
                                                         [--fp4-kernel auto|dequant|block-scaled] [--ep 1,8]
                                                         [--fp8-activations fp8|fp16] [--backends triton,...]
  --quick: DeepSeek-V3 E=256, uniform only (the first device check). Without it: DeepSeek-V3 and GLM-5, E=256 and
  EP8-local, uniform and powerlaw:1.2, bf16/fp8/nvfp4/mxfp4, all backends. --routing keeps one routing (to split
  the sweep over two device calls); --weights keeps those formats.
Writes OUT_DIR/moe_experts.jsonl and OUT_DIR/moe_pct_read_bw.png.
"""
import os
import sys
import time

from truepeak.bench import moe
from truepeak.bench.environment import environment

out = sys.argv[1]
quick = "--quick" in sys.argv
os.makedirs(out, exist_ok=True)
path = os.path.join(out, "moe_experts.jsonl")
t0 = time.time()
bw = moe.measure_read_bandwidth()
print(f"read bandwidth (Triton reduction, 4 GiB): {bw / 1e12:.3f} TB/s", flush=True)
env = environment()
if quick:
    cases = [("deepseek-v3", 1, "uniform")]
    tpes = (1, 4, 8, 16, 32, 64, 256)
    fmts = ("bf16", "fp8", "nvfp4", "mxfp4")
else:
    # most important first: the records are appended as they finish, so a time limit keeps what ran
    routings = ("uniform", "powerlaw:1.2")
    if "--routing" in sys.argv:
        routings = (sys.argv[sys.argv.index("--routing") + 1],)
    cases = [(m, ep, r) for r in routings for ep in (1, 8) for m in ("deepseek-v3", "glm-5")]
    tpes = (1, 4, 8, 16, 32, 64, 256)
    fmts = ("bf16", "fp8", "nvfp4", "mxfp4")
if "--weights" in sys.argv:
    fmts = tuple(sys.argv[sys.argv.index("--weights") + 1].split(","))
if "--models" in sys.argv:
    keep = sys.argv[sys.argv.index("--models") + 1].split(",")
    cases = [c for c in cases if c[0] in keep]
fp4_acts = sys.argv[sys.argv.index("--fp4-activations") + 1] if "--fp4-activations" in sys.argv else "auto"
fp4_kernel = sys.argv[sys.argv.index("--fp4-kernel") + 1] if "--fp4-kernel" in sys.argv else "auto"
fp8_acts = sys.argv[sys.argv.index("--fp8-activations") + 1] if "--fp8-activations" in sys.argv else "fp8"
only = sys.argv[sys.argv.index("--backends") + 1].split(",") if "--backends" in sys.argv else None
if "--ep" in sys.argv:
    keep_ep = [int(v) for v in sys.argv[sys.argv.index("--ep") + 1].split(",")]
    cases = [c for c in cases if c[1] in keep_ep]
budget = float(os.environ.get("MOE_BUDGET_S", "0.08"))


def show(r):
    r = r.to_dict()
    w = r["workload"]
    if r["status"] == "ok":
        d = r["derived"]
        a = w.get("activations", "")
        acts = "a8" if a.startswith(("fp8", "mxfp8")) else "a4" if a.startswith(("nvfp4", "mxfp4")) else "  "
        print(f"{w['model']:12s} E{w['E_local']:<4d} {w['routing']:13s} {w['weights_format']:6s}{acts} "
              f"tpe {w['tokens_per_expert']:>5g} "
              f"{r['backend']:10s} {d['time_s'] * 1e6:9.1f} us {d['bytes_per_s'] / 1e12:6.3f} TB/s "
              f"{100 * d['read_bandwidth_fraction']:5.1f} %bw {d['flop_per_s'] / 1e12:7.1f} TFLOPS "
              f"err {r['correctness']['max_rel_error']:.2e}", flush=True)
    else:
        print(f"{w['model']:12s} E{w['E_local']:<4d} {w['routing']:13s} {w['weights_format']:6s} "
              f"tpe {w['tokens_per_expert']:>5g} "
              f"{r['backend']:10s} {r['status']}: {r['reason'][:160]}", flush=True)


records = []
for model, ep, routing in cases:
    # power-law points: the fastest torch backend (grouped_mm) and ours, to stay inside the device time
    backends = moe.BACKENDS if routing == "uniform" else ("grouped_mm", "triton")
    if only:
        backends = tuple(only)
    records += moe.run_bench(model, ep=ep, tokens_per_expert=tpes, routing=routing, weights=fmts, backends=backends,
                             out_path=path, budget_s=budget, warmup_s=0.03, read_bw=bw, progress=show, env=env,
                             fp4_activations=fp4_acts, fp4_kernel=fp4_kernel, fp8_activations=fp8_acts)
    print(f"-- {model} ep{ep} {routing} done at {time.time() - t0:.0f} s", flush=True)
for e_local, name in ((256, "moe_pct_read_bw.png"), (32, "moe_pct_read_bw_ep8.png")):
    sel = [r for r in records if r.workload.model == "deepseek-v3" and r.workload.E_local == e_local
           and r.workload.routing == "uniform"]
    if sel:
        try:
            moe.plot_records(sel, os.path.join(out, name))
        except Exception as exc:
            print("plot failed:", exc)
print(f"total {time.time() - t0:.0f} s")
