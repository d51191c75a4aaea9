"""Build the planner's shipped H200 calibration from the committed H200 measurements (reproducible, no GPU).

Reads, relative to the repository root:

- ``docs/results/h200/calibration/h200_points.json`` (``benchmarks/calibration_points.py``): the per-kernel cost inside
  a CUDA graph and launched eagerly, small ops at decode shapes, cuBLAS GEMM fractions of the read bandwidth vs M,
  decode attention fractions vs batch x context, and the read bandwidth of that run;
- ``docs/results/h200/moe/moe_experts.jsonl.gz`` (the routed-expert sweep): fractions of the read bandwidth by weight
  format, kernel and tokens per expert, DeepSeek-V3 shapes, uniform routing, E_local 256 and 32;
- the catalog's dense peaks of the measured GPU (the denominator of ``gemm_compute_fraction``);
- ``docs/results/h200x2/bound/results.jsonl`` (``truepeak comm`` on 2x H200 NVLink): time per call of each collective
  by size, in a CUDA graph and eagerly.

Writes ``src/truepeak/moe/calibrations/h200.json`` (:mod:`truepeak.moe.calibration` reads it). Nothing here is fitted
to a serving measurement: every number is a kernel or collective timed on the GPU.

    python3 benchmarks/build_calibration.py            # rewrite the shipped file
    python3 benchmarks/build_calibration.py --check    # exit 1 when the shipped file differs from a fresh build
"""

from __future__ import annotations

import argparse
import gzip
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
POINTS = "docs/results/h200/calibration/h200_points.json"
EXPERTS = "docs/results/h200/moe/moe_experts.jsonl.gz"
COLLECTIVES = "docs/results/h200x2/bound/results.jsonl"
OUT = "src/truepeak/moe/calibrations/h200.json"
#: Expert kernels that count as the stock library path (torch's grouped / batched GEMMs, cuBLAS / CUTLASS inside).
LIBRARY = ("per_expert", "bmm", "grouped_mm")
FORMATS = {"bf16": "bf16", "fp8": "fp8_e4m3", "nvfp4": "nvfp4", "mxfp4": "mxfp4"}


def _r(x: float, digits: int = 6) -> float:
    return float(f"{x:.{digits}g}")


def build() -> dict:
    pts = json.loads((ROOT / POINTS).read_text())
    points = pts["points"]
    kernel = next(p for p in points if p["kind"] == "kernel")
    elementwise = sorted((p["bytes"], _r(p["seconds"])) for p in points if p["kind"] == "small_op" and p["op"] == "add")
    argmax = sorted((p["rows"], p["cols"], _r(p["seconds"])) for p in points
                    if p["kind"] == "small_op" and p["op"] == "argmax")
    gemm: dict[str, dict[str, list]] = {}
    for p in points:
        if p["kind"] != "gemm":
            continue
        key = p["format"] + (f":{p['scaling']}" if p.get("scaling") else "")
        shape = f"{p['n']}x{p['k']}"
        gemm.setdefault(key, {}).setdefault(shape, []).append([p["m"], _r(p["memory_fraction"]), _r(p["seconds"])])
    sys.path.insert(0, str(ROOT / "src"))
    from truepeak.hardware.lookup import get_accelerator

    acc = get_accelerator(pts["device"]["catalog_key"])
    compute: dict[str, float] = {}
    for p in points:
        if p["kind"] == "gemm":
            key = p["format"] + (f":{p['scaling']}" if p.get("scaling") else "")
            frac = p["flop"] / (p["seconds"] * acc.dense_flops(p["format"]))
            compute[key] = max(compute.get(key, 0.0), _r(frac))
    gemm_out = {key: [{"n": int(s.split("x")[0]), "k": int(s.split("x")[1]), "points": sorted(v)}
                      for s, v in shapes.items()] for key, shapes in gemm.items()}
    attention = sorted([p["bytes"], _r(p["memory_fraction"])] for p in points
                       if p["kind"] == "attention" and "seconds" in p)
    experts: dict[str, dict[str, dict[str, dict[float, float]]]] = {"library": {}, "truepeak_triton": {}}
    with gzip.open(ROOT / EXPERTS, "rt") as fh:
        for line in fh:
            d = json.loads(line)
            w = d["workload"]
            if d["status"] != "ok" or w["model"] != "deepseek-v3" or w["routing"] != "uniform":
                continue
            kind = "truepeak_triton" if d["backend"] == "triton" else "library" if d["backend"] in LIBRARY else None
            if kind is None:
                continue
            frac = d["derived"]["pct_read_bandwidth"]
            table = experts[kind].setdefault(FORMATS[d["format"]], {}).setdefault(str(w["E_local"]), {})
            tpe = float(w["tokens_per_expert"])
            table[tpe] = max(table.get(tpe, 0.0), frac)     # the best library kernel at each point
    experts_out = {kind: {fmt: {e: [[t, _r(f)] for t, f in sorted(v.items())] for e, v in by_e.items()}
                          for fmt, by_e in by_fmt.items()} for kind, by_fmt in experts.items()}
    coll: dict[str, dict[str, list]] = {"graph": {}, "eager": {}}
    for line in (ROOT / COLLECTIVES).read_text().splitlines():
        d = json.loads(line)
        if d.get("kind") != "collective" or d.get("status") != "ok":
            continue
        w = d["workload"]
        coll[d["mode"]].setdefault(w["op"], []).append([w["bytes"], _r(d["time_s"])])
    coll = {m: {op: sorted(v) for op, v in ops.items()} for m, ops in coll.items()}
    return {
        "calibration_version": 1,
        "device": {"name": "NVIDIA H200 SXM", "catalog_key": pts["device"]["catalog_key"]},
        "sources": {"points": POINTS, "points_date": pts["date"], "experts": EXPERTS, "collectives": COLLECTIVES,
                    "built_by": "benchmarks/build_calibration.py"},
        "read_bandwidth_B_per_s": _r(pts["read_bandwidth_bytes_per_s"]),
        "kernel_s": {"graph": _r(kernel["graph_s"]), "eager": _r(kernel["eager_s"])},
        "elementwise": [[b, s] for b, s in elementwise],
        "argmax": [[r, c, s] for r, c, s in argmax],
        "gemm": gemm_out,
        "gemm_compute_fraction": compute,
        "attention": attention,
        "experts": experts_out,
        "collectives": {"ranks": 2, **coll},
    }


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--check", action="store_true", help="compare with the shipped file instead of writing it")
    args = ap.parse_args(argv)
    text = json.dumps(build(), indent=1, sort_keys=False) + "\n"
    out = ROOT / OUT
    if args.check:
        same = out.exists() and out.read_text() == text
        print(f"{OUT}: {'up to date' if same else 'differs from a fresh build'}")
        return 0 if same else 1
    out.write_text(text)
    print(f"wrote {OUT} ({len(text)} B)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
