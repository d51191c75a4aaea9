"""Where the time of truepeak's MoE unit goes, on the device: the unit (activation quantisation, gate/up kernel,
intermediate quantisation, down kernel, combine) with the shipped tuned tables, captured in a CUDA graph and
replayed under torch.profiler; per kernel its mean duration inside the graph and the bytes it must read over that
time as % of the read bandwidth measured in the same run; the replay's span (first kernel start to last kernel end)
and the gaps between kernels. No hardware counters: the kernel durations are the CUPTI activity records.

Usage: PYTHONPATH=src python3 benchmarks/moe_unit_breakdown.py OUT [MODEL:LAYOUT:FORMAT:TPE ...]
  LAYOUT single or ep8; default points: DeepSeek-V3 E = 256 bf16 and fp8 at 8, 16, 32; EP8 bf16 and fp8 at 1, 8;
  GLM-5 E = 256 fp8 at 16, 32. Writes OUT/unit_breakdown.json and prints one block per point.
"""
import collections
import json
import pathlib
import sys

import torch

from truepeak.bench import moe
from truepeak.kernels.moe_triton import FusedMoE

DEFAULT = ["deepseek-v3:single:bf16:8", "deepseek-v3:single:bf16:16", "deepseek-v3:single:bf16:32",
           "deepseek-v3:single:fp8:8", "deepseek-v3:single:fp8:16", "deepseek-v3:single:fp8:32",
           "deepseek-v3:ep8:bf16:1", "deepseek-v3:ep8:bf16:8", "deepseek-v3:ep8:fp8:1", "deepseek-v3:ep8:fp8:8",
           "glm-5:single:fp8:16", "glm-5:single:fp8:32"]
REPLAYS = 20


def kernel_role(name: str) -> str:
    for key, role in (("gate_up", "gate/up GEMM"), ("down", "down GEMM"), ("quant_rows", "quantise rows"),
                      ("reduce", "combine (sum over k)"), ("sum", "combine (sum over k)")):
        if key in name:
            return role
    return name[:40]


def main() -> None:
    out = pathlib.Path(sys.argv[1])
    out.mkdir(parents=True, exist_ok=True)
    points = sys.argv[2:] or DEFAULT
    read_bw = moe.measure_read_bandwidth()
    print(f"read bandwidth {read_bw / 1e12:.3f} TB/s", flush=True)
    results = {"read_bandwidth_bytes_per_s": read_bw, "device": torch.cuda.get_device_name(),
               "torch": torch.__version__, "points": []}
    cache = {}
    for item in points:
        model, layout, wfmt, tpe = item.split(":")
        tpe = float(tpe)
        ep = 8 if layout == "ep8" else 1
        shape = moe.expert_shape(model, 1, ep)
        key = (model, ep, wfmt)
        if key not in cache:
            cache.clear()
            torch.cuda.empty_cache()
            cache[key] = moe.make_weights(shape, wfmt, "cuda", 0)
        w1, w2 = cache[key]
        T = moe.tokens_for(tpe, shape)
        x, ids, topw = moe.decode_inputs(shape, tpe)
        counts = torch.bincount(ids[ids >= 0], minlength=shape.E_local).tolist()
        active = [e for e, n in enumerate(counts) if n]
        nbytes = moe.active_bytes(w1, w2, counts)
        fn = FusedMoE(x, w1, w2, ids, topw, tokens_per_expert=tpe)
        for _ in range(3):
            fn()
        torch.cuda.synchronize()
        g = torch.cuda.CUDAGraph()
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):
            fn()
            with torch.cuda.graph(g, stream=s):
                fn()
        torch.cuda.current_stream().wait_stream(s)
        for _ in range(5):
            g.replay()
        torch.cuda.synchronize()
        ev = [torch.cuda.Event(enable_timing=True) for _ in range(2)]
        ev[0].record()
        for _ in range(REPLAYS):
            g.replay()
        ev[1].record()
        torch.cuda.synchronize()
        per_replay = ev[0].elapsed_time(ev[1]) / 1e3 / REPLAYS
        with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
            for _ in range(REPLAYS):
                g.replay()
            torch.cuda.synchronize()
        kernels = sorted((e for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA
                          and e.device_resource_id is not None and e.time_range.elapsed_us() > 0),
                         key=lambda e: e.time_range.start)
        per_kernel = collections.defaultdict(float)
        n_kernels = len(kernels) // REPLAYS if kernels else 0
        spans, busy = [], []
        for r in range(REPLAYS):
            ks = kernels[r * n_kernels:(r + 1) * n_kernels]
            if not ks:
                continue
            spans.append((ks[-1].time_range.end - ks[0].time_range.start) * 1e-6)
            busy.append(sum(k.time_range.elapsed_us() for k in ks) * 1e-6)
            for k in ks:
                per_kernel[kernel_role(k.name)] += k.time_range.elapsed_us() * 1e-6 / REPLAYS
        # bytes each GEMM must read: its active experts' weights (scales left out: under 0.1 % for bf16 and fp8)
        b1 = sum(w1.data[e].numel() * w1.data.element_size() for e in active)
        b2 = sum(w2.data[e].numel() * w2.data.element_size() for e in active)
        span = sorted(spans)[len(spans) // 2] if spans else float("nan")
        pt = dict(model=model, layout=layout, weights=wfmt, tokens_per_expert=tpe, T=T, bytes=nbytes,
                  configs=[str(fn.cfg1), str(fn.cfg2)], config_note=fn.config_note,
                  replay_s=per_replay, unit_pct=100 * nbytes / per_replay / read_bw, span_s=span,
                  kernels_per_replay=n_kernels, kernel_s=dict(per_kernel),
                  gaps_s=span - (sorted(busy)[len(busy) // 2] if busy else float("nan")),
                  gate_up_pct=100 * b1 / per_kernel.get("gate/up GEMM", float("nan")) / read_bw,
                  down_pct=100 * b2 / per_kernel.get("down GEMM", float("nan")) / read_bw)
        results["points"].append(pt)
        print(f"{model} {layout} {wfmt} {tpe:g}: unit {per_replay * 1e6:.1f} us ({pt['unit_pct']:.1f} %), span "
              f"{span * 1e6:.1f} us, gaps {pt['gaps_s'] * 1e6:.1f} us over {n_kernels} kernels; gate/up "
              f"{pt['gate_up_pct']:.1f} %, down {pt['down_pct']:.1f} %", flush=True)
        for role, t in sorted(per_kernel.items(), key=lambda kv: -kv[1]):
            print(f"    {role:24s} {t * 1e6:9.1f} us  {100 * t / per_replay:5.1f} % of the unit", flush=True)
        (out / "unit_breakdown.json").write_text(json.dumps(results, indent=1))
        fn = g = None


if __name__ == "__main__":
    main()
