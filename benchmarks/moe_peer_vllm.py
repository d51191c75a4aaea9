"""Time vLLM's Triton fused-MoE kernel, tuned on a grid the way its users tune it, beside truepeak's MoE kernels
with their shipped tuned tables, in one process on one GPU: DeepSeek-V3 routed experts (H 7168, I 2048, top-8 of
256), all 256 experts on the GPU, uniform routing (seed 0, as ``truepeak moe tune``), bf16 weights.

vLLM's kernel is not part of truepeak: the script imports ``fused_moe_kernel`` from
``vllm.model_executor.layers.fused_moe.fused_moe`` where vLLM is installed, else from the file given with
``--peer-source`` (that function and ``write_zeros_to_output`` copied from vLLM's file).

The peer's unit, timed as one CUDA graph like ours: gate/up GEMM (N = 2I) into ``[T, k, 2I]``, SiLU and multiply
(torch), down GEMM with the routing weight into ``[T, k, H]``, the sum over k (torch). Its routing alignment
(vLLM's ``moe_align_block_size``: slots sorted by expert, each expert padded to whole blocks) is made once, outside
the timed unit, which favours the peer: ours sorts inside its unit. Grid per point (vLLM's
``benchmarks/kernels/benchmark_moe.py`` space, restricted): BLOCK_SIZE_M 16/32/64 (at most 2x the tokens per expert,
at least 16), BLOCK_SIZE_N 64/128, BLOCK_SIZE_K 128/256, GROUP_SIZE_M 1/16, 4/8 warps, 3/4 stages; every
candidate checked against a float32 reference of the first 16 tokens before it is timed.

Usage: PYTHONPATH=src python3 benchmarks/moe_peer_vllm.py OUT [--peer-source FILE] [--tokens-per-expert 4,8,16,32]
       [--budget-s 0.1] [--commit SHA]
Writes OUT/peer.json (per point: the peer's best configuration and figure, ours with the shipped table, both as %
of the read bandwidth measured in the same run) and prints a table.
With ``--profile TPE`` it only runs the peer's best configuration of that point (from OUT/peer.json) four times,
for a profiler to attach to (``ncu --kernel-name fused_moe_kernel --launch-skip 2 --launch-count 2 ...``).
"""
import argparse
import importlib.util
import itertools
import json
import os
import sys
import time

import torch

from truepeak.bench import moe
from truepeak.bench.cuda_timer import time_cuda
from truepeak.kernels.moe_triton import FusedMoE


def load_peer(path):
    try:
        from vllm.model_executor.layers.fused_moe.fused_moe import fused_moe_kernel
        return fused_moe_kernel, "vllm (installed)"
    except ImportError:
        pass
    if not path:
        sys.exit("vLLM is not installed: pass --peer-source FILE holding vLLM's fused_moe_kernel")
    spec = importlib.util.spec_from_file_location("peer_fused_moe", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod.fused_moe_kernel, path


def align(ids, E, bm):
    """vLLM's moe_align_block_size in torch: (sorted slot ids padded with T*k, expert of each block, padded count)."""
    flat = ids.flatten()
    n = flat.numel()
    counts = torch.bincount(flat, minlength=E)
    padded = (counts + bm - 1) // bm * bm
    starts = torch.cumsum(padded, 0) - padded
    order = torch.argsort(flat, stable=True)
    first = torch.cumsum(counts, 0) - counts
    e_sorted = flat[order]
    rank = torch.arange(n, device=flat.device) - first[e_sorted]
    out = torch.full((int(padded.sum()),), n, dtype=torch.int32, device=flat.device)
    out[starts[e_sorted] + rank] = order.to(torch.int32)
    expert_ids = torch.repeat_interleave(torch.arange(E, device=flat.device, dtype=torch.int32), padded // bm)
    return out, expert_ids, torch.tensor([out.numel()], dtype=torch.int32, device=flat.device)


class PeerUnit:
    def __init__(self, kernel, x, w1, w2, ids, topw, cfg):
        self.kernel, self.x, self.w1, self.w2, self.cfg = kernel, x, w1, w2, cfg
        T, k = ids.shape
        self.T, self.k = T, k
        E = w1.shape[0]
        self.sorted, self.eids, self.ntp = align(ids, E, cfg["BLOCK_SIZE_M"])
        self.topw = topw.float().contiguous()
        self.c1 = torch.empty(T, k, w1.shape[1], dtype=torch.bfloat16, device=x.device)
        self.c2 = torch.empty(T, k, w2.shape[1], dtype=torch.bfloat16, device=x.device)
        self.out = torch.empty(T, w2.shape[1], dtype=torch.bfloat16, device=x.device)

    def _gemm(self, a, b, c, mul, top_k):
        cfg = dict(self.cfg)
        warps, stages = cfg.pop("num_warps"), cfg.pop("num_stages")
        em = self.sorted.numel()
        grid = (triton_cdiv(em, cfg["BLOCK_SIZE_M"]) * triton_cdiv(b.shape[1], cfg["BLOCK_SIZE_N"]),)
        self.kernel[grid](a, b, c, None, None, self.topw, self.sorted, self.eids, self.ntp, b.shape[1], b.shape[2],
                          em, self.T * self.k, a.stride(0), a.stride(1), b.stride(0), b.stride(2), b.stride(1),
                          c.stride(1), c.stride(2), 0, 0, 0, 0, 0, 0, 0, MUL_ROUTED_WEIGHT=mul, top_k=top_k,
                          compute_type=tl_bf16(), use_fp8_w8a8=False, use_int8_w8a8=False, use_int8_w8a16=False,
                          per_channel_quant=False, num_warps=warps, num_stages=stages, **cfg)

    def __call__(self):
        self._gemm(self.x, self.w1, self.c1, False, self.k)
        i = self.w2.shape[2]
        g, u = self.c1[..., :i], self.c1[..., i:]
        h = (torch.nn.functional.silu(g.float()) * u.float()).bfloat16().view(self.T * self.k, i)
        self._gemm(h, self.w2, self.c2, True, 1)
        torch.sum(self.c2, dim=1, out=self.out)
        return self.out


def triton_cdiv(a, b):
    return -(-a // b)


def tl_bf16():
    import triton.language as tl
    return tl.bfloat16


def main():
    p = argparse.ArgumentParser()
    p.add_argument("out")
    p.add_argument("--peer-source", default=None)
    p.add_argument("--tokens-per-expert", default="4,8,16,32")
    p.add_argument("--budget-s", type=float, default=0.1)
    p.add_argument("--commit", default=None)
    p.add_argument("--profile", type=float, default=None)
    a = p.parse_args()
    os.makedirs(a.out, exist_ok=True)
    kernel, source = load_peer(a.peer_source)
    shape = moe.expert_shape("deepseek-v3")
    if a.profile is not None:
        with open(os.path.join(a.out, "peer.json")) as f:
            cfg = next(pt["peer_config"] for pt in json.load(f)["points"] if pt["tokens_per_expert"] == a.profile)
        w1, w2 = moe.make_weights(shape, "bf16", "cuda", 0)
        x, ids, topw = moe.decode_inputs(shape, a.profile)
        unit = PeerUnit(kernel, x, w1.data, w2.data, ids, topw, cfg)
        print("peer config", cfg, flush=True)
        for _ in range(4):
            unit()
        torch.cuda.synchronize()
        return
    read_bw = moe.measure_read_bandwidth()
    print(f"read bandwidth {read_bw / 1e12:.3f} TB/s; peer from {source}", flush=True)
    w1, w2 = moe.make_weights(shape, "bf16", "cuda", 0)
    d1, d2 = w1.data, w2.data  # [E, 2I, H], [E, H, I] bf16
    results = {"read_bandwidth_bytes_per_s": read_bw, "commit": a.commit, "device": torch.cuda.get_device_name(),
               "torch": torch.__version__, "peer_source": os.path.basename(source), "points": []}

    def timed(fn):
        return time_cuda(lambda _i: fn(), n_sets=1, warmup_s=0.05, budget_s=a.budget_s, graph=True, min_samples=5,
                         telemetry=False).steady_median_s

    for tpe in (float(t) for t in a.tokens_per_expert.split(",")):
        x, ids, topw = moe.decode_inputs(shape, tpe)
        counts = torch.bincount(ids[ids >= 0], minlength=shape.E_local).tolist()
        nbytes = moe.active_bytes(w1, w2, counts)
        ref = moe.reference_rows(x, w1, w2, ids, topw)

        def err(out):
            return float((out[:ref.shape[0]].float() - ref).abs().max() / ref.abs().max())

        ours = FusedMoE(x, w1, w2, ids, topw, tokens_per_expert=tpe)
        t_ours, e_ours = timed(ours), err(ours())
        best = None
        tried = failed = 0
        t0 = time.time()
        bms = [m for m in (16, 32, 64) if m <= max(16, 2 * tpe)]
        for bm, bn, bk, gm, w, s in itertools.product(bms, (64, 128), (128, 256), (1, 16), (4, 8), (3, 4)):
            cfg = dict(BLOCK_SIZE_M=bm, BLOCK_SIZE_N=bn, BLOCK_SIZE_K=bk, GROUP_SIZE_M=gm, num_warps=w, num_stages=s)
            try:
                unit = PeerUnit(kernel, x, d1, d2, ids, topw, cfg)
                e = err(unit())
                if not e <= 2e-2:
                    failed += 1
                    continue
                t = timed(unit)
            except Exception as exc:  # noqa: BLE001 - a configuration that does not compile or fit is skipped
                failed += 1
                print(f"  {cfg}: {type(exc).__name__}: {str(exc).splitlines()[0][:120]}", flush=True)
                continue
            tried += 1
            if best is None or t < best[0]:
                best = (t, cfg, e)
            del unit
        pt = {"tokens_per_expert": tpe, "bytes": nbytes, "ours_time_s": t_ours, "ours_pct": 100 * nbytes / t_ours / read_bw,
              "ours_error": e_ours, "ours_config": [str(ours.cfg1), str(ours.cfg2)], "ours_note": ours.config_note,
              "peer_candidates": tried, "peer_failed": failed}
        if best:
            pt.update(peer_time_s=best[0], peer_pct=100 * nbytes / best[0] / read_bw, peer_config=best[1],
                      peer_error=best[2])
        results["points"].append(pt)
        print(f"tpe {tpe:g}: ours {pt['ours_pct']:.1f} %  peer {pt.get('peer_pct', float('nan')):.1f} % "
              f"({best[1] if best else None}; {tried} timed, {failed} failed, {time.time() - t0:.0f} s)", flush=True)
        with open(os.path.join(a.out, "peer.json"), "w") as f:
            json.dump(results, f, indent=1)


if __name__ == "__main__":
    main()
