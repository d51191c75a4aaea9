"""Rebuild a ``truepeak moe tune`` table from its records (``results.jsonl``), on any machine: for a run whose table
file did not come back with it (file names with '=' or ',' are refused by some transfer tools).

Per (format, activations, tokens per expert) the ``final`` records are the chosen pair's and then, when it differs,
the default pair's (``truepeak.bench.moe_tune.search``, step 3): the entry is the faster, as the tuner keeps it.

Usage: PYTHONPATH=src python3 benchmarks/tuned_table_from_records.py RESULTS_JSONL OUT_DIR --device-name NAME
       [--model deepseek-v3] [--layout single] [--read-bw BYTES_PER_S] [--commit SHA] [--date ISO]
"""
import argparse
import json
from collections import defaultdict

from truepeak.kernels.moe_triton import KernelConfig
from truepeak.kernels.moe_triton.tuned import TunedEntry, TunedTable, activations_key, bucket_of, write_table

p = argparse.ArgumentParser()
p.add_argument("records")
p.add_argument("out")
p.add_argument("--device-name", required=True)
p.add_argument("--model", default="deepseek-v3")
p.add_argument("--layout", default="single")
p.add_argument("--read-bw", type=float, default=None)
p.add_argument("--commit", default=None)
p.add_argument("--date", default=None)
a = p.parse_args()
finals, searched, shape = defaultdict(list), defaultdict(int), None
read_bw, dates = a.read_bw, []
for line in open(a.records):
    r = json.loads(line)
    w = r["workload"]
    wfmt, acts_text = w["weights_format"], w.get("activations") or ""
    acts = None if wfmt == "bf16" else "fp8" if acts_text.startswith("fp8") else "fp16"
    key = (wfmt, activations_key(wfmt, acts), bucket_of(w["tokens_per_expert"]))
    shape = (w["E_local"], w["I"], w["H"])
    dates.append(r["timestamp"])
    tune = w["triton_tune"]
    if tune["phase"] == "search":
        searched[key] += 1
    elif r["status"] == "ok":
        finals[key].append((r, tune))
        read_bw = read_bw or r["derived"]["read_bandwidth_bytes_per_s"]
entries = {}
for key, recs in finals.items():
    chosen = recs[0]
    default = recs[1] if len(recs) > 1 else recs[0]
    best = default if default[0]["time_s"] <= chosen[0]["time_s"] else chosen
    r, tune = best
    cfg = [KernelConfig(**tune.get(f"fitted_{k}", tune[k])) for k in ("gate_up", "down")]
    entries[key] = TunedEntry(cfg[0], cfg[1], float(r["workload"]["tokens_per_expert"]), r["time_s"],
                              r["derived"]["read_bandwidth_fraction"],
                              default[0]["derived"]["read_bandwidth_fraction"], default[0]["time_s"], searched[key])
table = TunedTable(device_name=a.device_name, E=shape[0], N=shape[1], H=shape[2], entries=entries, model=a.model,
                   layout=a.layout, routing="uniform", date=a.date or min(dates), truepeak_commit=a.commit,
                   truepeak_version="0.1.0", read_bandwidth_bytes_per_s=read_bw)
print(write_table(table, a.out))
