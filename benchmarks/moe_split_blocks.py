"""A skewed routing's experts in two launches, on the device: the busy experts (more tokens than a threshold) with
a configuration of their own, the others with the tuned entry of their own mean, against one launch for all
(FusedMoE's routing-aware lookup). Each launch is a FusedMoE of the same weights whose top-k ids keep only its
group's experts (the others' slots become -1 and are dropped), so the two outputs add up to the unit's exactly:
out = F_light() + F_busy(). Each variant runs the two launches one after the other ("seq") or on two streams of the
CUDA graph ("par", the busy experts' launch first), so the busy experts' compute-bound tiles can overlap the others'
weight reads. Each part is also timed alone. The whole sum is timed as one CUDA graph, % of the read bandwidth
measured in the same run; each variant's first 16 tokens are checked against the float32 reference. The study behind
FusedMoE's busy-expert launch (docs/results/h200/moe-routing/README.md, 'Busy experts in a launch of their own').

"one launch" is FusedMoE with ``split_busy=False``; "FusedMoE" as it runs by default (busy experts in a launch of
their own by its rule, routing.busy_experts).

Usage: PYTHONPATH=src python3 benchmarks/moe_split_blocks.py OUT [--model deepseek-v3] [--ep 8] [--weights bf16,fp8]
  [--routing powerlaw:1.2] [--tokens-per-expert 8,16,32] [--thresholds 2,4,8] [--busy-configs tuned,128x128x64w8s4]
  [--quick]
  --thresholds: busy = more tokens than THRESHOLD x the mean tokens per active expert ("": none, only the two
  FusedMoE variants).
  --busy-configs: the busy experts' configuration, for both kernels: "tuned" (the tuned entry of their mean) or
  BMxBNxBKwWARPSsSTAGES[pPROGRAMS] (block_m x block_n x block_k, warps, stages; with pPROGRAMS persistent with that
  many programs, leaving the other SMs to the light experts' launch).
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
from truepeak.kernels.moe_triton import FusedMoE, KernelConfig


def group_ids(ids, busy):
    """``ids`` with the slots of experts outside the group (``busy`` a bool per local expert, True = keep) set to
    -1."""
    keep = (ids >= 0) & busy[ids.clamp(min=0)]
    return torch.where(keep, ids, torch.full_like(ids, -1))


def parse_config(spec: str):
    """``"tuned"`` -> (None, None); ``BMxBNxBKwWsS[pP]`` -> (a KernelConfig for both kernels, P): with ``pP`` the
    launches are persistent with P programs (so that the other group's launch has the rest of the SMs)."""
    if spec == "tuned":
        return None, None
    programs = None
    if "p" in spec:
        spec, programs = spec.split("p")
        programs = int(programs)
    tiles, rest = spec.split("w")
    warps, stages = rest.split("s")
    bm, bn, bk = (int(v) for v in tiles.split("x"))
    return KernelConfig(bm, bn, bk, num_warps=int(warps), num_stages=int(stages),
                        persistent=programs is not None), programs


def timed(fn, quick: bool):
    if quick:
        return None
    m = time_cuda(lambda _i: fn(), n_sets=1, warmup_s=0.05, budget_s=0.3, graph=True, min_samples=5,
                  telemetry=False)
    return m.steady_median_s


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--model", default="deepseek-v3")
    ap.add_argument("--ep", type=int, default=1)
    ap.add_argument("--weights", default="bf16,fp8")
    ap.add_argument("--routing", default="powerlaw:1.2")
    ap.add_argument("--tokens-per-expert", default="8,16,32")
    ap.add_argument("--thresholds", default="2,4,8")
    ap.add_argument("--busy-configs", default="tuned")
    ap.add_argument("--modes", default="seq,par")
    ap.add_argument("--quick", action="store_true")
    a = ap.parse_args()
    out = pathlib.Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    dev = "cpu" if a.quick else "cuda"
    shape = moe.ExpertShape("tiny", 256, 128, 8, 8, 2) if a.quick else moe.expert_shape(a.model, 1, a.ep)
    read_bw = 1e9 if a.quick else moe.measure_read_bandwidth()
    side = None if a.quick else torch.cuda.Stream()
    rows: list[dict] = []

    def record(row, t0, nbytes):
        rows.append(row)
        if row.get("time_s"):
            row["read_bandwidth_fraction"] = nbytes / row["time_s"] / read_bw
        frac = row.get("read_bandwidth_fraction")
        print(f"{row['weights']} {a.routing} {row['tokens_per_expert']:g} {row['variant']}: "
              + (f"{100 * frac:.1f} % " if frac else "")
              + (f"err {row['error_vs_reference']:.4f} " if "error_vs_reference" in row else "")
              + (f"light {1e3 * row['light_s']:.3f} ms busy {1e3 * row['busy_s']:.3f} ms "
                 if row.get("light_s") else "")
              + f"blocks {row.get('block_m')} {row.get('error', row.get('skipped', ''))}"
              f" ({time.monotonic() - t0:.1f} s)", flush=True)

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
            base = dict(model=shape.model, ep=a.ep, weights=wfmt, routing=a.routing, tokens_per_expert=tpe)

            def check(row, fn):
                o = fn()[:ref.shape[0]].float()
                row["error_vs_reference"] = float((o - ref).abs().max() / ref.abs().max())

            # one launch for all (split_busy=False), then FusedMoE as it runs by default (busy experts split off)
            for variant, split in (("one launch", False), ("FusedMoE", True)):
                t0 = time.monotonic()
                row = dict(base, variant=variant)
                try:
                    f = FusedMoE(x, w1, w2, ids, topw, tokens_per_expert=tpe, split_busy=split)
                    check(row, f)
                    row.update(notes=[f.config_note], block_m=[f.cfg1.block_m] + ([f.busy.cfg1.block_m] if f.busy
                                                                                   else []),
                               busy_experts=sum(f.busy.experts) if f.busy else 0, time_s=timed(f, a.quick))
                except Exception as exc:  # noqa: BLE001 - a variant that fails is data
                    row["error"] = f"{type(exc).__name__}: {str(exc).splitlines()[0][:200]}"
                f = None
                record(row, t0, nbytes)
            for th in (float(t) for t in a.thresholds.split(",") if t):
                busy = counts > th * mean
                if not bool(busy.any()) or bool(busy.sum() == active.sum()):
                    rows.append(dict(base, variant=f"busy > {th:g} x mean", skipped="one group is empty"))
                    continue
                sel_light = active & ~busy
                light = FusedMoE(x, w1, w2, group_ids(ids, sel_light), topw,
                                 tokens_per_expert=float(counts[sel_light].float().mean()), split_busy=False)
                t_light = timed(light, a.quick)
                busy_ids = group_ids(ids, busy)
                busy_mean = float(counts[busy].float().mean())
                for spec in a.busy_configs.split(","):
                    t0 = time.monotonic()
                    row = dict(base, threshold=th, busy_config=spec, busy_experts=int(busy.sum()),
                               busy_slots=int(counts[busy].sum()), busy_mean=busy_mean)
                    try:
                        cfg, programs = parse_config(spec)
                        heavy = FusedMoE(x, w1, w2, busy_ids, topw, tokens_per_expert=busy_mean, config=cfg,
                                         split_busy=False)
                        if programs:  # FusedMoE._programs' cache: the persistent grid
                            heavy._grid.update({(1, heavy.cfg1): programs, (2, heavy.cfg2): programs})
                        t_busy = timed(heavy, a.quick)
                    except Exception as exc:  # noqa: BLE001 - a configuration that fails is data
                        rows.append(dict(row, variant=f"busy > {th:g} x mean, {spec}",
                                         error=f"{type(exc).__name__}: {str(exc).splitlines()[0][:200]}"))
                        print(f"{wfmt} {tpe:g} busy > {th:g} x mean {spec}: {rows[-1]['error']}", flush=True)
                        continue

                    def seq(light=light, heavy=heavy):
                        return light() + heavy()

                    def par(light=light, heavy=heavy):
                        main_stream = torch.cuda.current_stream()
                        side.wait_stream(main_stream)
                        with torch.cuda.stream(side):
                            h = heavy()
                        lo = light()
                        main_stream.wait_stream(side)
                        return lo + h

                    for mode in a.modes.split(","):
                        if mode == "par" and a.quick:
                            continue
                        t0 = time.monotonic()
                        r = dict(row, variant=f"busy > {th:g} x mean, {spec}, {mode}", mode=mode,
                                 block_m=[light.cfg1.block_m, heavy.cfg1.block_m],
                                 notes=[light.config_note, heavy.config_note], light_s=t_light, busy_s=t_busy)
                        fn = seq if mode == "seq" else par
                        try:
                            check(r, fn)
                            r["time_s"] = timed(fn, a.quick)
                        except Exception as exc:  # noqa: BLE001
                            r["error"] = f"{type(exc).__name__}: {str(exc).splitlines()[0][:200]}"
                        record(r, t0, nbytes)
                    heavy = None
                light = None
            (out / "split_blocks.json").write_text(json.dumps(dict(read_bandwidth_bytes_per_s=read_bw, rows=rows),
                                                              indent=1))


if __name__ == "__main__":
    main()
