"""The routed-expert layer at decode on one GPU: every backend and weight format over tokens per expert, for
DeepSeek-V3 and GLM-5, all experts on the GPU (E = 256) and EP8-local (32 experts), uniform and power-law routing.

Usage: PYTHONPATH=src python3 benchmarks/moe_experts_sweep.py OUT_DIR [--quick] [--routing uniform|powerlaw:1.2]
                                                         [--weights bf16,fp8,nvfp4,mxfp4] [--models deepseek-v3,glm-5]
                                                         [--ep 1,8] [--backends triton,...] [--budget 0.08]
                                                         [--fp4-activations auto|fp8|fp16|fp4]
                                                         [--fp4-kernel auto|dequant|block-scaled]
                                                         [--fp8-activations fp8|fp16]
  --quick: DeepSeek-V3, E = 256, uniform routing only. Without it: both models, E = 256 and EP8-local, uniform and
  powerlaw:1.2, bf16 / fp8 / nvfp4 / mxfp4; with power-law routing only `grouped_mm` and truepeak's kernel (the
  fastest torch backend and ours). --routing keeps one routing, --weights those formats, --models those models,
  --ep those expert-parallel sizes, --backends those backends; --budget is the timed seconds per point (0.08).
Writes OUT_DIR/moe_experts.jsonl (records appended as each point finishes, so a time limit keeps what ran) and the
plots OUT_DIR/moe_pct_read_bw.png (DeepSeek-V3, E = 256, uniform) and OUT_DIR/moe_pct_read_bw_ep8.png (EP8).
`truepeak moe bench` runs one (model, EP, routing) case of this sweep.
"""
import argparse
import os
import time

from truepeak.bench import moe
from truepeak.bench.environment import environment
from truepeak.report.moe import plot_records

TOKENS_PER_EXPERT = (1, 4, 8, 16, 32, 64, 256)
FORMATS = ("bf16", "fp8", "nvfp4", "mxfp4")


def _list(text: str) -> list[str]:
    return [v for v in text.split(",") if v]


def parse_args(argv=None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out")
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--routing", help="one routing instead of uniform and powerlaw:1.2")
    ap.add_argument("--weights", type=_list, default=list(FORMATS))
    ap.add_argument("--models", type=_list)
    ap.add_argument("--ep", type=lambda s: [int(v) for v in _list(s)])
    ap.add_argument("--backends", type=_list)
    ap.add_argument("--budget", type=float, default=0.08, help="timed seconds per point")
    ap.add_argument("--fp4-activations", default="auto")
    ap.add_argument("--fp4-kernel", default="auto")
    ap.add_argument("--fp8-activations", default="fp8")
    return ap.parse_args(argv)


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


def main(argv=None) -> None:
    args = parse_args(argv)
    os.makedirs(args.out, exist_ok=True)
    path = os.path.join(args.out, "moe_experts.jsonl")
    t0 = time.time()
    bw = moe.measure_read_bandwidth()
    print(f"read bandwidth (Triton reduction, 4 GiB): {bw / 1e12:.3f} TB/s", flush=True)
    env = environment()
    if args.quick:
        cases = [("deepseek-v3", 1, "uniform")]
    else:
        # most important first: the records are appended as they finish, so a time limit keeps what ran
        routings = (args.routing,) if args.routing else ("uniform", "powerlaw:1.2")
        cases = [(m, ep, r) for r in routings for ep in (1, 8) for m in ("deepseek-v3", "glm-5")]
    if args.models:
        cases = [c for c in cases if c[0] in args.models]
    if args.ep:
        cases = [c for c in cases if c[1] in args.ep]
    records = []
    for model, ep, routing in cases:
        backends = moe.BACKENDS if routing == "uniform" else ("grouped_mm", "triton")
        if args.backends:
            backends = tuple(args.backends)
        config = moe.MoeBenchConfig(model, ep=ep, tokens_per_expert=TOKENS_PER_EXPERT, routing=routing,
                                    weights=tuple(args.weights), backends=backends, budget_s=args.budget,
                                    warmup_s=0.03, read_bw=bw, fp4_activations=args.fp4_activations,
                                    fp4_kernel=args.fp4_kernel, fp8_activations=args.fp8_activations)
        records += moe.run_bench(config, out_path=path, progress=show, env=env)
        print(f"-- {model} ep{ep} {routing} done at {time.time() - t0:.0f} s", flush=True)
    for e_local, name in ((256, "moe_pct_read_bw.png"), (32, "moe_pct_read_bw_ep8.png")):
        sel = [r for r in records if r.workload.model == "deepseek-v3" and r.workload.E_local == e_local
               and r.workload.routing == "uniform"]
        if sel:
            try:
                plot_records(sel, os.path.join(args.out, name))
            except Exception as exc:
                print("plot failed:", exc)
    print(f"total {time.time() - t0:.0f} s")


if __name__ == "__main__":
    main()
