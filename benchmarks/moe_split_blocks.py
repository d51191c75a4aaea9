"""A skewed routing's experts in two launches, on the device: the busy experts (more tokens than a threshold) with
the token block of their own mean, the others with theirs, against one launch for all (FusedMoE's routing-aware
lookup). Each launch is a FusedMoE of the same weights whose top-k ids keep only its group's experts (the others'
slots become -1 and are dropped), so the two outputs add up to the unit's exactly: out = F_light() + F_busy(). The
whole sum is timed as one CUDA graph, % of the read bandwidth measured in the same run; each variant's first 16
tokens are checked against the float32 reference. A study of what a per-expert token block would gain
(docs/results/h200/moe-routing/README.md), not a product path.

Usage: PYTHONPATH=src python3 benchmarks/moe_split_blocks.py OUT [--model deepseek-v3] [--ep 8] [--weights bf16,fp8]
  [--routing powerlaw:1.2] [--tokens-per-expert 8,16,32] [--thresholds 2,4,8] [--quick]
  --thresholds: busy = more tokens than THRESHOLD x the mean tokens per active expert.
  --quick: a tiny made-up shape on the CPU in Triton's interpreter (TRITON_INTERPRET=1 before Python starts): checks
  the script and the sum's correctness, its timings mean nothing.
  writes OUT/split_blocks.json (rewritten after every point)
"""
import argparse
import json
import pathlib
import time

import torch

from truepeak.bench import moe
from truepeak.bench.cuda_timer import time_cuda
from truepeak.kernels.moe_triton import FusedMoE


def group_ids(ids, busy):
    """``ids`` with the slots of experts outside the group (``busy`` a bool per local expert, True = keep) set to
    -1."""
    keep = (ids >= 0) & busy[ids.clamp(min=0)]
    return torch.where(keep, ids, torch.full_like(ids, -1))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--model", default="deepseek-v3")
    ap.add_argument("--ep", type=int, default=1)
    ap.add_argument("--weights", default="bf16,fp8")
    ap.add_argument("--routing", default="powerlaw:1.2")
    ap.add_argument("--tokens-per-expert", default="8,16,32")
    ap.add_argument("--thresholds", default="2,4,8")
    ap.add_argument("--quick", action="store_true")
    a = ap.parse_args()
    out = pathlib.Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    dev = "cpu" if a.quick else "cuda"
    shape = moe.ExpertShape("tiny", 256, 128, 8, 8, 2) if a.quick else moe.expert_shape(a.model, 1, a.ep)
    read_bw = 1e9 if a.quick else moe.measure_read_bandwidth()
    rows: list[dict] = []
    for wfmt in a.weights.split(","):
        if not a.quick:
            torch.cuda.empty_cache()
        w1, w2 = moe.make_weights(shape, wfmt, dev, 0)
        for tpe in (float(t) for t in a.tokens_per_expert.split(",")):
            x, ids, topw = moe.decode_inputs(shape, tpe, a.routing, device=dev)
            counts = torch.bincount(ids[ids >= 0], minlength=shape.E_local)
            active = counts > 0
            mean = float(counts[active].float().mean())
            nbytes = moe.active_bytes(w1, w2, counts.tolist())
            ref = moe.reference_rows(x, w1, w2, ids, topw)
            variants = [("one launch", None)] + [(f"busy > {th:g} x mean", th)
                                                 for th in (float(t) for t in a.thresholds.split(","))]
            for name, th in variants:
                t0 = time.monotonic()
                row = dict(model=shape.model, ep=a.ep, weights=wfmt, routing=a.routing, tokens_per_expert=tpe,
                           variant=name, threshold=th)
                try:
                    if th is None:
                        f = FusedMoE(x, w1, w2, ids, topw, tokens_per_expert=tpe)
                        fn, notes = f, [f.config_note]
                        row["block_m"] = [f.cfg1.block_m]
                    else:
                        busy = counts > th * mean
                        if not bool(busy.any()) or bool(busy.sum() == active.sum()):
                            row["skipped"] = "one group is empty"
                            rows.append(row)
                            continue
                        parts = []
                        for sel in (active & ~busy, busy):
                            g_ids = group_ids(ids, sel)
                            g_mean = float(counts[sel].float().mean())
                            parts.append(FusedMoE(x, w1, w2, g_ids, topw, tokens_per_expert=g_mean))
                        light, heavy = parts

                        def fn(light=light, heavy=heavy):
                            return light() + heavy()
                        notes = [light.config_note, heavy.config_note]
                        row.update(busy_experts=int(busy.sum()), busy_slots=int(counts[busy].sum()),
                                   block_m=[light.cfg1.block_m, heavy.cfg1.block_m])
                    o = fn()[:ref.shape[0]].float()
                    row["error_vs_reference"] = float((o - ref).abs().max() / ref.abs().max())
                    row["notes"] = notes
                    if not a.quick:
                        m = time_cuda(lambda _i: fn(), n_sets=1, warmup_s=0.05, budget_s=0.3, graph=True,
                                      min_samples=5, telemetry=False)
                        row["time_s"] = m.steady_median_s
                        row["read_bandwidth_fraction"] = nbytes / m.steady_median_s / read_bw
                except Exception as exc:  # noqa: BLE001 - a variant that fails is data
                    row["error"] = f"{type(exc).__name__}: {str(exc).splitlines()[0][:200]}"
                fn = None
                rows.append(row)
                frac = row.get("read_bandwidth_fraction")
                print(f"{wfmt} {a.routing} {tpe:g} {name}: "
                      + (f"{100 * frac:.1f} % " if frac else "")
                      + (f"err {row['error_vs_reference']:.4f} " if "error_vs_reference" in row else "")
                      + f"blocks {row.get('block_m')} {row.get('error', row.get('skipped', ''))}"
                      f" ({time.monotonic() - t0:.1f} s)", flush=True)
            (out / "split_blocks.json").write_text(json.dumps(dict(read_bandwidth_bytes_per_s=read_bw, rows=rows),
                                                              indent=1))


if __name__ == "__main__":
    main()
