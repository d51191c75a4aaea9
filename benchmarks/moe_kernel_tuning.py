"""Tune truepeak's MoE Triton kernel: time KernelConfig variants (the lists in GRID) against choose_config's
defaults, per weight format and tokens per expert, on DeepSeek-V3's expert shapes with all 256 experts on the GPU
(or the EP8-local ones) and top-8 routing. The choices choose_config makes come from these records
(docs/results/h200/moe/README.md).

Each (format, tokens per expert) point builds the weights, routing and float32 reference once, then for each variant
checks the output against the reference and times the whole unit from a CUDA graph (sustained, median), as
``truepeak moe bench`` does. Prints one line per variant and writes OUT_DIR/tune.jsonl (one JSON object per variant:
format, tokens per expert, overrides, the resolved configs, time, % of the read bandwidth measured at the start).

Usage: PYTHONPATH=src python3 benchmarks/moe_kernel_tuning.py [--untiled-w4a16] OUT_DIR [FORMAT ...]
(FORMAT: a key of GRID; fp8a8 = fp8 weights with fp8 activations, fp8 = fp8 weights with fp16 activations;
nvfp4a8 / mxfp4a8 = fp4 weights with fp8 activations (w4a8), nvfp4 / mxfp4 = w4a16; a suffix after "-" names another
list for the same format, e.g. nvfp4a8-defaults)
Environment: TUNE_DEADLINE_S (default 420): no new point starts after this many seconds. TUNE_ROUTING (default
uniform): the routing of every point (e.g. powerlaw:1.2; recorded in each line). TUNE_EP (default 1): expert
parallelism, e.g. 8 for the EP8-local experts 0-31 and the slots routed to them (recorded as E_local).
--untiled-w4a16: fp4 with fp16 activations through the untiled w4a16 kernel (FusedMoE's ``untiled_w4a16``, for
comparison). Lists whose name ends in "-noscale" run the w4a8 kernel with its block scales left out (FusedMoE's
``drop_block_scales``): the output is wrong by design, so those lines say "output unchecked" and their records carry
``"output_unchecked": true`` instead of an error; only their time means something.
"""
import dataclasses
import json
import os
import sys
import time

import torch

from truepeak.bench import moe
from truepeak.bench.cuda_timer import time_cuda
from truepeak.kernels.moe_triton import FusedMoE

args = sys.argv[1:]
untiled_w4a16 = "--untiled-w4a16" in args
args = [a for a in args if a != "--untiled-w4a16"]
out = args[0]
os.makedirs(out, exist_ok=True)
deadline = float(os.environ.get("TUNE_DEADLINE_S", "420"))
routing = os.environ.get("TUNE_ROUTING", "uniform")
t0 = time.time()
bw = moe.measure_read_bandwidth()
print(f"read bandwidth (Triton reduction, 4 GiB): {bw / 1e12:.3f} TB/s", flush=True)

# Variant lists (KernelConfig overrides; {} is choose_config's default) per tokens per expert. The list names are the
# FORMAT arguments and are recorded in each line; "fp8" is w8a16 (activations="fp16"), "fp8a8" the same weights with
# fp8 activations (w8a8, the default).
# w4a8 (tiled layout): narrower weight tiles and stage counts
W = [{}, {"block_n": 64}, {"num_stages": 3}, {"num_stages": 6}]
# the tiled w4a16 (fp16 activations, block scale multiplied in fp16, fp16 MMAs): stages, 256-row weight tiles, 8 warps
T16 = {1: [{}, {"num_stages": 4}, {"num_stages": 2}], 8: [{}, {"num_stages": 4}],
       16: [{}, {"block_n": 256}, {"num_warps": 8}], 32: [{}, {"block_n": 256}, {"num_warps": 8}],
       64: [{}, {"num_warps": 8}, {"block_n": 256, "num_warps": 8}], 256: [{}, {"block_n": 256}]}
T8 = {16: [{}, {"block_n": 256}], 32: [{}, {"block_n": 128}, {"block_n": 128, "num_warps": 8}]}
D = {t: [{}] for t in (1, 4, 8, 16, 32, 64, 256)}  # the defaults alone, over the whole range
GRID = {
    # register caps for more programs per SM (a K loop without spills in the compiled sm_90 kernel)
    "nvfp4-reg": {t: [{}, {"maxnreg": 96}] for t in (1, 8)},
    "nvfp4-reg128": {t: [{}, {"maxnreg": 128}] for t in (1, 4, 8, 16)},
    "mxfp4a8-reg": {t: [{}, {"maxnreg": 128}] for t in (1, 8)},
    # 4 stages with and without the cap for nvfp4; fp8 w8a8 at 8 tokens per expert with 16-token blocks
    "nvfp4-s4": {t: [{}, {"num_stages": 4}, {"maxnreg": 128}, {"num_stages": 4, "maxnreg": 128}] for t in (1, 4, 8)},
    "fp8a8-bm16": {8: [{}, {"block_m": 16}, {"block_m": 16, "block_k": 256}, {"block_m": 16, "num_stages": 4}]},
    # with TUNE_EP=8: narrower weight tiles where the EP8-local grid is a few programs per SM
    "mxfp4a8-ep": {t: [{}, {"block_n": 64}] for t in (1, 4, 8)},
    "nvfp4-ep": {t: [{}, {"block_n": 64}] for t in (1, 8)},
    "fp8a8-ep": {t: [{}, {"block_n": 32}, {"block_k": 128}] for t in (1, 8)},
    "bf16-ep": {1: [{}, {"block_n": 32}]},
    # 32-token blocks at 16 tokens per expert (bf16 also 128-row tiles); nvfp4 w4a16 in 128-element steps (two chunks
    # and two scale words per step)
    "bf16-16": {16: [{}, {"block_m": 32, "block_n": 128}, {"block_m": 32}]},
    "fp8a8-16": {16: [{}, {"block_m": 32}]},
    "nvfp4-bk": {t: [{}, {"block_k": 128}] for t in (1, 8, 16, 32, 64)},
    # bf16 and fp8 w8a8 at 8-32 tokens per expert: smaller token blocks (less activation traffic through L2), wider
    # weight tiles, longer steps
    "bf16": {16: [{}, {"block_m": 32}, {"block_m": 32, "block_n": 128}, {"block_n": 128, "num_warps": 8}],
             32: [{}, {"block_n": 128, "num_warps": 8}, {"block_m": 32}]},
    "fp8a8": {8: [{}, {"block_k": 256}, {"num_stages": 4}, {"block_n": 128}],
              16: [{}, {"block_m": 32}, {"block_n": 128}, {"block_n": 128, "num_warps": 8}],
              32: [{}, {"block_n": 128, "num_warps": 8}, {"block_m": 32}, {"block_k": 256}]},
    "nvfp4": T16, "mxfp4": T16, "mxfp4a8-tiles": T8,
    "nvfp4a8-defaults": D, "mxfp4a8-defaults": D,
    "nvfp4a8": {1: W, 4: W[:2], 8: W[:2], 16: W[:2] + [{"block_m": 32}], 32: W[:2] + [{"block_m": 32}]},
    "mxfp4a8": {1: W, 4: W[:2], 8: W[:2], 16: W[:2] + [{"block_m": 32}], 32: W[:2] + [{"block_m": 32}]},
    "nvfp4a8-noscale": {1: [{}], 8: [{}]},  # block scales dropped (output wrong): the cost of the block scales
}
formats = args[1:] or list(GRID)
if set(formats) - set(GRID):
    sys.exit(f"no variant list for {', '.join(sorted(set(formats) - set(GRID)))}: this version of the script has "
             f"{', '.join(GRID)} (add a list to GRID)")
shape = moe.expert_shape("deepseek-v3", ep=int(os.environ.get("TUNE_EP", "1")))
path = os.path.join(out, "tune.jsonl")
with open(path, "a") as f:
    for fmt in formats:
        if time.time() - t0 > deadline:
            break
        if fmt.split("-")[0].endswith("a8"):
            wfmt, acts = fmt.split("-")[0][:-2], "fp8"
        else:
            wfmt, acts = fmt.split("-")[0], "fp16" if fmt.startswith(("fp8", "nvfp4", "mxfp4")) else None
        # fp4 weights in the tiled layout (w4a8 and the tiled w4a16) or, with --untiled-w4a16 and fp16 activations,
        # repacked once for the untiled kernel's 128-element K step (FusedMoE would repack per variant)
        untiled = untiled_w4a16 and wfmt in ("nvfp4", "mxfp4") and acts == "fp16"
        tiled = wfmt in ("nvfp4", "mxfp4") and not untiled
        dropped = fmt.endswith("-noscale")  # timing only: the output is wrong by design
        w1, w2 = moe.make_weights(shape, wfmt, "cuda", seed=0, w4a8=tiled)
        w128 = ((w1.in_kernel_order(128), w2.in_kernel_order(128)) if wfmt in ("nvfp4", "mxfp4") and untiled
                else (w1, w2))
        for tpe, variants in GRID[fmt].items():
            if time.time() - t0 > deadline:
                print(f"deadline: {fmt} tpe {tpe} and later not run", flush=True)
                break
            T = moe.tokens_for(tpe, shape)
            x, ids, topw = moe.decode_inputs(shape, tpe, routing)
            counts = torch.bincount(ids[ids >= 0], minlength=shape.E_local).tolist()
            nbytes = moe.active_bytes(w1, w2, counts)
            ref = moe.reference_rows(x, w1, w2, ids, topw)
            for v in variants:
                row = {"format": fmt, "tokens_per_expert": tpe, "routing": routing, "E_local": shape.E_local,
                       "tune": v, "T": T, "bytes": nbytes}
                try:
                    a, b = w128 if v.get("block_k") == 128 else (w1, w2)
                    fn = FusedMoE(x, a, b, ids, topw, tokens_per_expert=tpe, tune=v or None, activations=acts,
                                  untiled_w4a16=untiled, drop_block_scales=dropped, output_unchecked=dropped)
                    row["cfg1"], row["cfg2"] = dataclasses.asdict(fn.cfg1), dataclasses.asdict(fn.cfg2)
                    if dropped:
                        fn()
                        row["output_unchecked"] = True
                        check = "output unchecked (block scales dropped)"
                    else:
                        err = float((fn()[:ref.shape[0]].float() - ref).abs().max() / ref.abs().max())
                        row["max_rel_error"] = err
                        check = f"err {err:.1e}"
                    m = time_cuda(lambda _i: fn(), n_sets=1, warmup_s=0.02, budget_s=0.05, graph=True,
                                  min_samples=5, telemetry=False)
                    row["time_s"] = m.steady_median_s
                    row["pct_read_bandwidth"] = nbytes / m.steady_median_s / bw
                    print(f"{fmt:6s} tpe {tpe:4d} {json.dumps(v):62s} {m.steady_median_s * 1e6:9.1f} us "
                          f"{100 * row['pct_read_bandwidth']:6.1f} %bw {check}", flush=True)
                except Exception as exc:  # noqa: BLE001 - a failed variant is data
                    row["error"] = f"{type(exc).__name__}: {str(exc).splitlines()[0][:200]}"
                    print(f"{fmt:6s} tpe {tpe:4d} {json.dumps(v):62s} FAILED {row['error']}", flush=True)
                fn = None
                f.write(json.dumps(row) + "\n")
                f.flush()
        del w1, w2, w128
        torch.cuda.empty_cache()
print(f"total {time.time() - t0:.0f} s", flush=True)
