"""Run ``truepeak moe tune`` over several expert shapes of one model in one process (one read-bandwidth measurement
shared by all), then write OUT/summary.md: per shape, format and tokens per expert, the % of the read bandwidth of
choose_config's default and of the tuned configuration, both timed in the same run.

Usage: PYTHONPATH=src python3 benchmarks/moe_tune.py OUT [--budget-s S] [--model NAME] [--layouts single,ep8,tp8]
       [--weights bf16,fp8] [--tokens-per-expert 1,2,4,8,16,32,64] [--commit SHA] [--resume] [--quick]

The whole budget is split over the layouts in the ratio 4:3:2 (single, ep8, tp8; other layouts 2). Each layout
writes OUT/<layout>/results.jsonl (every candidate's record) and OUT/<layout>/<table>.json (the tuned table).
--resume: a layout whose OUT/<layout>/results.jsonl exists continues that run (its records are reused, not measured
again; the search goes on with this run's budget); the others start afresh.
--quick: a tiny made-up expert shape (H = 256, I = 128, 8 experts, top-2) run on the CPU in Triton's interpreter
(TRITON_INTERPRET=1 must be set before Python starts) with a nominal read bandwidth of 1 GB/s: it checks the script
and the tuner, its figures mean nothing.
"""
import argparse
import os
import sys
import time

from truepeak.bench import moe
from truepeak.bench.moe_tune import TuneConfig, git_commit, run_tune
from truepeak.report.tune import rows

p = argparse.ArgumentParser()
p.add_argument("out")
p.add_argument("--budget-s", type=float, default=200.0)
p.add_argument("--model", default="deepseek-v3")
p.add_argument("--layouts", default="single,ep8,tp8")
p.add_argument("--weights", default="bf16,fp8")
p.add_argument("--tokens-per-expert", default="1,2,4,8,16,32,64")
p.add_argument("--commit", default=None)
p.add_argument("--resume", action="store_true")
p.add_argument("--quick", action="store_true")
a = p.parse_args()
layouts = a.layouts.split(",")
share = {"single": 4, "ep8": 3, "tp8": 2}
total = sum(share.get(lay, 2) for lay in layouts)
tpes = tuple(float(t) for t in a.tokens_per_expert.split(","))
read_bw = 1e9 if a.quick else moe.measure_read_bandwidth()
print(f"read bandwidth: {read_bw / 1e12:.3f} TB/s", flush=True)
t0 = time.time()
commit = a.commit or git_commit()
bw_line = ("read bandwidth: a nominal 1 GB/s (--quick: the figures mean nothing)" if a.quick else
           f"read bandwidth measured in this run: {read_bw / 1e12:.3f} TB/s")
summary = [f"# moe tune: {'a tiny made-up shape (--quick)' if a.quick else a.model}, {a.weights}, tokens per expert "
           f"{a.tokens_per_expert}", "", f"{bw_line}; commit {commit}", ""]
for i, lay in enumerate(layouts):
    tp = int(lay[2:]) if lay.startswith("tp") else 1
    ep = int(lay[2:]) if lay.startswith("ep") else 1
    # the budget left, shared by the layouts left in their ratio
    left = a.budget_s - (time.time() - t0)
    budget = max(1.0, left * share.get(lay, 2) / sum(share.get(x, 2) for x in layouts[i:]))
    cfg = TuneConfig(model=a.model, tp=tp, ep=ep, weights=tuple(a.weights.split(",")), tokens_per_expert=tpes,
                     budget_s=budget)
    shape = moe.ExpertShape("tiny", 256, 128, 8, 8, 2) if a.quick else None
    t1 = time.time()
    resume = a.resume and os.path.exists(os.path.join(a.out, lay, "results.jsonl"))
    res = run_tune(cfg, os.path.join(a.out, lay), shape=shape, read_bw=read_bw, commit=commit, resume=resume,
                   progress=lambda pr: print(f"  [{pr.done}/{pr.total}] {pr.label}: {pr.candidates} timed, best "
                                             f"{100 * (pr.best_fraction or 0):.1f} %", flush=True))
    table = res.table.to_dict()
    print(f"{lay}: {res.timed} candidates timed, {res.dropped} dropped, {time.time() - t1:.0f} s, "
          f"not run: {res.not_run}", flush=True)
    summary += [f"## {lay}{' (resumed)' if resume else ''}: E={table['E']}, N={table['N']}, H={table['H']} "
                f"({res.table_path.name})", "",
                f"budget {budget:.0f} s, {res.timed} candidates timed, {res.dropped} dropped before timing "
                f"(shared memory or K); not reached: {', '.join(res.not_run) or 'none'}", "",
                "| weights | activations | tokens per expert | default % read bw | tuned % read bw | speed-up | "
                "gate/up | down | timed |", "|---|---|---|---|---|---|---|---|---|"]
    summary += ["| " + " | ".join(r[:6] + r[7:]) + " |" for r in rows(table)] + [""]
with open(os.path.join(a.out, "summary.md"), "w") as f:
    f.write("\n".join(summary) + "\n")
print("\n".join(summary))
print(f"total {time.time() - t0:.0f} s", flush=True)
sys.exit(0)
