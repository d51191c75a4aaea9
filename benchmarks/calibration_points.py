"""Measure the calibration points of this GPU (truepeak.bench.calibrate) and write them to a JSON file.

Usage (from the repository root, truepeak not installed):
    PYTHONPATH=src python3 benchmarks/calibration_points.py --out $OUT/calibration/h200_points.json [--quick]

About two minutes on an H200 (`--quick`: about 20 s).
"""

import argparse
import sys
import time

from truepeak.bench.calibrate import measure


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True, help="the JSON file to write")
    ap.add_argument("--quick", action="store_true", help="short budgets and trimmed grids (a smoke test)")
    args = ap.parse_args()
    t0 = time.time()
    doc = measure(args.out, quick=args.quick, progress=lambda m: print(m, flush=True), argv=sys.argv)
    bad = [p for p in doc["points"] if "error" in p]
    print(f"{len(doc['points'])} points, {len(bad)} with an error, {time.time() - t0:.0f} s -> {args.out}")
    for p in bad[:20]:
        print("  error:", {k: v for k, v in p.items() if k != "error"}, p["error"])
    return 0


if __name__ == "__main__":
    sys.exit(main())
