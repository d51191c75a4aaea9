"""`truepeak peak` on one GPU, with its checks: the MAMF search in burst and sustained mode, its stability over three
runs, a local exhaustive grid to compare the search's best with, a short decode GEMM timed for comparison with ncu,
and every fp8 scale layout at 8192^3.

Run through benchmarks/peak_search.sh (it adds ncu and the GPU tests). Usage:

    PYTHONPATH=src python3 benchmarks/peak_search.py smoke OUTDIR     # ~2 min: short searches, per-evaluation cost
    PYTHONPATH=src python3 benchmarks/peak_search.py search OUTDIR    # ~5 min: search, stability, grid, short GEMM
    PYTHONPATH=src python3 benchmarks/peak_search.py variants OUTDIR  # ~1 min: short GEMM twice, fp8 scale layouts
    PYTHONPATH=src python3 benchmarks/peak_search.py ncu-launch       # the short GEMM, eager, inside an NVTX range

Everything is measured by truepeak's own code (run_peak, the run.py GEMM case, time_cuda); this script only chooses
budgets and shapes and writes OUTDIR/summary.json (and prints it last): ``search`` writes the search's records under
OUTDIR/search/ and the stability, grid and short-GEMM records to OUTDIR/checks.jsonl, ``variants`` its records to
OUTDIR/variants.jsonl. docs/results/h200/peak/ holds an H200's results.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

from truepeak.bench import gemm as G
from truepeak.bench import peak as P
from truepeak.bench import run as R
from truepeak.bench.environment import environment
from truepeak.records import RecordWriter

SHORT = (16, 4096, 7168)  # ~10 us bf16: the decode GEMM timed against ncu


def _tflops(x):
    return None if x is None else round(x / 1e12, 1)


def _brief(peak: P.FormatPeak) -> dict:
    s = peak.summary()
    keep = ("format", "mode", "status", "reason", "shape", "flop_per_s", "pct_dense", "pct_at_clock",
            "peak_at_clock_flop_per_s", "sm_clock_median_hz", "power_median_w", "rel_iqr", "evaluations", "elapsed_s",
            "stopped", "first_pass_best")
    out = {k: s.get(k) for k in keep}
    out["tflops"] = _tflops(s.get("flop_per_s"))
    return out


class Measurer:
    """One GEMM case at a time through truepeak run's code path, records to one JSON Lines file."""

    def __init__(self, dev, writer, env):
        self.dev, self.writer = dev, writer
        self.sweep = R.Sweep(dev, R.Budgets(0.0, 0.1, 0.2, 0.1, 0.2, 0.0, 0.0, 256), False, env,
                              {"command": "benchmarks/peak_search.py"}, acc=dev.accelerator, settled=True)
        self.n = 0

    def measure(self, fmt, shape, mode, warmup_s, budget_s, tag, graph_note=""):
        m, n, k = shape
        case = R.Case("gemm", fmt, m, n, k, large=True, origin=f"benchmark {tag}", mode=mode,
                      scaling=G.default_scaling(fmt), warmup_s=warmup_s, budget_s=budget_s)
        rec = R.runners.run_gemm(case, R.case_key(case, self.dev) + f"|bench:{tag}:{self.n}", self.sweep)
        rec = rec.replace(search={"phase": tag, "round": 0, "step": None, "eval": self.n})
        self.n += 1
        self.writer.write(rec)
        return rec.to_dict()


def _value(rec):
    return (rec.get("derived") or {}).get("flop_per_s") if rec.get("status") == "ok" else None


def smoke(out: Path) -> dict:
    dev = R.detect("cuda")
    res = {}
    t0 = time.perf_counter()
    run = P.run_peak(out / "search", device=dev, formats=["bf16", "fp8"], modes=["burst", "sustained"],
                     budget_s={("bf16", "burst"): 25, ("fp8_e4m3", "burst"): 20, ("bf16", "sustained"): 30,
                               ("fp8_e4m3", "sustained"): 12},
                     argv=["benchmarks/peak_search.py", "smoke"], progress=lambda line: print(line, flush=True))
    res["peaks"] = [_brief(p) for p in run.peaks]
    for p in run.peaks:
        if p.result is not None and p.result.evaluations:
            res.setdefault("seconds_per_eval", {})[f"{p.format}/{p.mode}"] = round(
                p.elapsed_s / p.result.evaluations, 3)
    res["notes"] = run.notes
    res["elapsed_s"] = time.perf_counter() - t0
    return res


def search(out: Path) -> dict:
    dev = R.detect("cuda")
    t_start = time.perf_counter()
    res: dict = {"device": dev.name}
    # (1) + (2): burst (the mamf-finder comparison) then sustained (the serving figure)
    budgets = {("bf16", "burst"): 60, ("fp8_e4m3", "burst"): 35, ("bf16", "sustained"): 40,
               ("fp8_e4m3", "sustained"): 35}
    run = P.run_peak(out / "search", device=dev, formats=["bf16", "fp8"], modes=["burst", "sustained"],
                     budget_s=budgets,
                     argv=["benchmarks/peak_search.py", "search"], progress=lambda line: print(line, flush=True))
    res["peaks"] = [_brief(p) for p in run.peaks]
    res["search_s"] = time.perf_counter() - t_start
    best = {(p.format, p.mode): p for p in run.peaks if p.status == "ok"}
    env = environment(["benchmarks/peak_search.py", "search"], device=dev.index or 0).replace(device=dev.to_dict())
    import torch

    with RecordWriter(out / "checks.jsonl") as writer:
        mz = Measurer(dev, writer, env)
        # (3) stability: sustained MAMF at the best sustained shape, 3 times each, after a settle
        res["stability"] = {}
        for fmt in ("bf16", "fp8_e4m3"):
            p = best.get((fmt, "sustained"))
            if p is None:
                continue
            w = p.best_record.to_dict()["workload"]
            shape = (w["m"], w["n"], w["k"])
            R.settle_gpu(torch, dev, 3.0)
            vals = [_value(mz.measure(fmt, shape, "sustained", 3.0, 2.0, "stability")) for _ in range(3)]
            ok = [v for v in vals if v]
            mid = sorted(ok)[len(ok) // 2] if ok else None
            res["stability"][fmt] = {"shape": list(shape), "tflops": [_tflops(v) for v in vals],
                                     "max_dev_from_median": None if not ok else max(abs(v / mid - 1) for v in ok)}
        # (5) short kernel: CUDA-graph timer (ncu runs after this process, see peak_search.sh)
        rec = mz.measure("bf16", SHORT, "sustained", 0.5, 2.0, "short-kernel")
        m = rec.get("measurement") or {}
        res["short_kernel"] = {"shape": list(SHORT), "median_s": rec.get("time_s"), "steady_rel_iqr":
                               m.get("steady_rel_iqr"), "graph": m.get("graph"), "calls_per_sample":
                               m.get("calls_per_sample"), "n_sets": m.get("n_sets"), "status": rec["status"]}
        # (4) local exhaustive grid, step 1024, around the bf16 burst best, as much as fits
        p = best.get(("bf16", "burst"))
        deadline = t_start + float(sys.argv[3]) if len(sys.argv) > 3 else t_start + 330
        if p is not None:
            w = p.best_record.to_dict()["workload"]
            c = [max(1024, min(16384, round(x / 1024) * 1024)) for x in (w["m"], w["n"], w["k"])]
            axis = [sorted({max(1024, min(16384, v + d * 1024)) for d in (-2, -1, 0, 1, 2)}) for v in c]
            shapes = sorted(((a, b, d) for a in axis[0] for b in axis[1] for d in axis[2]),
                            key=lambda s: sum(abs(x - y) for x, y in zip(s, c)))
            b = P.BURST_BUDGETS
            grid = []
            for shape in shapes:
                if time.perf_counter() > deadline - 8:
                    break
                grid.append((shape, _value(mz.measure("bf16", shape, "burst", b.warmup_s, b.budget_s, "grid"))))
            done = [(s, v) for s, v in grid if v]
            top = max(done, key=lambda sv: sv[1]) if done else None
            final_top = None
            if top is not None:
                final_top = _value(mz.measure("bf16", top[0], "burst", b.final_warmup_s, b.final_budget_s,
                                              "grid-remeasure"))
            search_best = p.summary()["flop_per_s"]
            res["grid"] = {"center": c, "measured": len(done), "of": len(shapes),
                           "best_shape": None if top is None else list(top[0]),
                           "best_first_pass_tflops": None if top is None else _tflops(top[1]),
                           "best_remeasured_tflops": _tflops(final_top),
                           "search_best_shape": p.summary()["shape"], "search_best_tflops": _tflops(search_best),
                           "search_vs_grid": None if not final_top else search_best / final_top - 1}
    res["elapsed_s"] = time.perf_counter() - t_start
    return res


def variants(out: Path) -> dict:
    """The short GEMM on the CUDA-graph timer (for ncu in the same session) and every fp8 scale layout at 8192^3."""
    dev = R.detect("cuda")
    t0 = time.perf_counter()
    env = environment(["benchmarks/peak_search.py", "variants"], device=dev.index or 0).replace(device=dev.to_dict())
    res: dict = {"short_kernel": [], "fp8_variants": []}
    with RecordWriter(out / "variants.jsonl") as writer:
        mz = Measurer(dev, writer, env)
        for _ in range(2):
            rec = mz.measure("bf16", SHORT, "sustained", 0.5, 2.0, "short-kernel")
            m = rec.get("measurement") or {}
            res["short_kernel"].append({"median_s": rec.get("time_s"), "steady_rel_iqr": m.get("steady_rel_iqr"),
                                        "graph": m.get("graph"), "calls_per_sample": m.get("calls_per_sample")})
        for fmt, scaling in (("fp8_e4m3", "tensor"), ("fp8_e4m3", "row"), ("fp8_e4m3", "block128"),
                             ("fp8_e5m2", "tensor"), ("fp8_e5m2", "row")):
            for mode in ("sustained", "burst"):
                case = R.Case("gemm", fmt, 8192, 8192, 8192, large=True, origin="benchmark fp8 variants", mode=mode,
                              scaling=scaling, warmup_s=1.0, budget_s=1.0)
                rec = R.runners.run_gemm(case, R.case_key(case, dev) + f"|bench:fp8:{mz.n}", mz.sweep)
                rec = rec.replace(search={"phase": "fp8-variants", "round": 0, "step": None, "eval": mz.n})
                mz.n += 1
                writer.write(rec)
                rec = rec.to_dict()
                tel = ((rec.get("measurement") or {}).get("telemetry")) or {}
                res["fp8_variants"].append({"format": fmt, "scaling": scaling, "mode": mode, "status": rec["status"],
                                            "reason": rec["reason"][:200], "tflops": _tflops(_value(rec)),
                                            "rel_error": (rec.get("correctness") or {}).get("rel_error"),
                                            "sm_clock_median_hz": tel.get("sm_clock_median_hz"),
                                            "power_median_w": tel.get("power_median_w")})
    res["elapsed_s"] = time.perf_counter() - t0
    return res


def ncu_launch() -> None:
    """Launch the short GEMM eagerly (rotated inputs) after a warm-up, the timed launches inside NVTX range 'gemm'."""
    import torch

    dev = R.detect("cuda")
    m, n, k = SHORT
    plan = R.runners.plan_case_rotation(R.Case("gemm", "bf16", m, n, k), dev)
    g = G.TorchGemm("bf16", m, n, k, dev.torch_device, plan.n_sets)
    for i in range(200):
        g(i)
    torch.cuda.synchronize()
    torch.cuda.nvtx.range_push("gemm")
    for i in range(60):
        g(i)
    torch.cuda.nvtx.range_pop()
    torch.cuda.synchronize()
    print(f"ncu-launch: 60 launches of {m}x{n}x{k} bf16 over {plan.n_sets} input sets")


def main() -> None:
    modes = {"smoke": smoke, "search": search, "variants": variants}
    what = sys.argv[1] if len(sys.argv) > 1 else None
    if what == "ncu-launch":
        ncu_launch()
        return
    if what not in modes or len(sys.argv) < 3:
        print(f"mode {what!r}: expected smoke OUTDIR, search OUTDIR [SECONDS], variants OUTDIR or ncu-launch",
              file=sys.stderr)
        raise SystemExit(2)
    out = Path(sys.argv[2])
    out.mkdir(parents=True, exist_ok=True)
    res = modes[what](out)
    (out / "summary.json").write_text(json.dumps(res, indent=1, default=str) + "\n")
    print(json.dumps(res, indent=1, default=str))


if __name__ == "__main__":
    main()
