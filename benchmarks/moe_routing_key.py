"""Which tuned-table entry serves a skewed routing best, on the device: for each routing and mean tokens per expert, the
whole MoE unit (as ``truepeak moe bench`` times it: a CUDA graph, % of the read bandwidth measured in the same run)
with the shipped table's entry of every bucket in turn (a bucket without an entry: the default rules at that many
tokens per expert), then as FusedMoE's lookup chooses for the routing ("lookup"; every entry in one launch,
``split_busy=False``), beside the per-expert token counts, so that the key a lookup should use (the mean over active
experts, the token-weighted mean sum(n^2)/sum(n), the largest count) can be read off against the entry that was
fastest. The outputs of every entry are checked against the float32 reference.

Usage: PYTHONPATH=src python3 benchmarks/moe_routing_key.py OUT [--model deepseek-v3] [--ep 8] [--weights bf16,fp8]
  [--routings uniform,powerlaw:1.2] [--tokens-per-expert 1,2,4,8,16,32,64] [--buckets 1,2,4,8,16,32,64,128,256]
  writes OUT/routing_key.json (rewritten after every point)
"""
import argparse
import dataclasses
import json
import pathlib
import time

import torch

from truepeak.bench import moe
from truepeak.bench.cuda_timer import time_cuda
from truepeak.kernels.moe_triton import FusedMoE
from truepeak.kernels.moe_triton.tuned import find_table


def keys(counts: list[int]) -> dict:
    """The candidate lookup keys of one routing's per-expert token counts."""
    active = [c for c in counts if c > 0]
    slots = sum(active)
    return {"mean_active": slots / max(1, len(active)), "token_weighted": sum(c * c for c in active) / max(1, slots),
            "max": max(active, default=0), "active_experts": len(active), "slots": slots}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--model", default="deepseek-v3")
    ap.add_argument("--ep", type=int, default=1, help="8: the EP8-local experts (E/8 on the GPU, their tokens only)")
    ap.add_argument("--weights", default="bf16,fp8")
    ap.add_argument("--routings", default="uniform,powerlaw:1.2")
    ap.add_argument("--tokens-per-expert", default="1,2,4,8,16,32,64")
    ap.add_argument("--buckets", default="1,2,4,8,16,32,64,128,256")
    a = ap.parse_args()
    out = pathlib.Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    shape = moe.expert_shape(a.model, 1, a.ep)
    table = find_table(torch.cuda.get_device_name(), shape.E_local, shape.I, shape.H)[0]
    read_bw = moe.measure_read_bandwidth()
    rows: list[dict] = []
    buckets = [int(b) for b in a.buckets.split(",")]
    for wfmt in a.weights.split(","):
        torch.cuda.empty_cache()
        w1, w2 = moe.make_weights(shape, wfmt, "cuda", 0)
        for routing in a.routings.split(","):
            for tpe in (float(t) for t in a.tokens_per_expert.split(",")):
                x, ids, topw = moe.decode_inputs(shape, tpe, routing)
                counts = torch.bincount(ids[ids >= 0], minlength=shape.E_local).tolist()
                nbytes = moe.active_bytes(w1, w2, counts)
                ref = moe.reference_rows(x, w1, w2, ids, topw)
                point = dict(model=a.model, ep=a.ep, weights=wfmt, routing=routing, tokens_per_expert=tpe, counts=counts,
                             keys=keys(counts), entries=[])
                acts = "bf16" if wfmt == "bf16" else "fp8"
                for b in buckets + ["lookup"]:
                    t0 = time.monotonic()
                    try:
                        entry = table.entries.get((wfmt, acts, b)) if table is not None else None
                        if b == "lookup":  # the lookup's choice, in one launch (moe_split_blocks.py times the split)
                            fn = FusedMoE(x, w1, w2, ids, topw, tokens_per_expert=tpe, split_busy=False)
                        elif entry is not None:  # this bucket's entry as it stands
                            fn = FusedMoE(x, w1, w2, ids, topw, config=(entry.gate_up, entry.down))
                        else:  # no entry: the default rules at b tokens per expert
                            fn = FusedMoE(x, w1, w2, ids, topw, tokens_per_expert=b, split_busy=False)
                        o = fn()[:16].float()
                        err = float((o - ref).abs().max() / ref.abs().max())
                        m = time_cuda(lambda _i: fn(), n_sets=1, warmup_s=0.05, budget_s=0.3, graph=True,
                                      min_samples=5, telemetry=False)
                        t = m.steady_median_s
                        e = dict(bucket=b, note=fn.config_note, gate_up=dataclasses.asdict(fn.cfg1),
                                 down=dataclasses.asdict(fn.cfg2), time_s=t,
                                 read_bandwidth_fraction=nbytes / t / read_bw, error_vs_reference=err)
                    except Exception as exc:  # noqa: BLE001 - an entry that fails is data
                        e = dict(bucket=b, error=f"{type(exc).__name__}: {str(exc).splitlines()[0][:200]}")
                    fn = None
                    point["entries"].append(e)
                    frac = e.get("read_bandwidth_fraction")
                    print(f"{wfmt} {routing} {tpe:g} keys {point['keys']['mean_active']:.1f}/"
                          f"{point['keys']['token_weighted']:.1f}/{point['keys']['max']} bucket {b}: "
                          + (f"{100 * frac:.1f} % err {e['error_vs_reference']:.4f}" if frac else e.get("error", ""))
                          + f" ({time.monotonic() - t0:.1f} s)", flush=True)
                rows.append(point)
                (out / "routing_key.json").write_text(json.dumps(dict(read_bandwidth_bytes_per_s=read_bw,
                                                                      device=torch.cuda.get_device_name(),
                                                                      points=rows), indent=1))


if __name__ == "__main__":
    main()
