#!/usr/bin/env bash
# `truepeak peak` on one GPU and its checks (benchmarks/peak_search.py), each mode one run. From the repository root:
#
#   bash benchmarks/peak_search.sh smoke     # ~3 min: GPU tests of the bench code, short searches in both modes, ncu check
#   bash benchmarks/peak_search.sh search    # ~4 min: bf16/fp8 burst + sustained MAMF, stability, local grid, ncu
#   bash benchmarks/peak_search.sh variants  # ~1.5 min: short GEMM graph timer + ncu --cache-control none, fp8 scale
#                                            # layouts at 8192^3, truepeak run --quick --mode both
#
# Writes under $OUT/peak (OUT defaults to ./device-out): device.txt, log.txt, summary.json, search/results.jsonl (every
# shape tried), search/peak.json (the answers), checks.jsonl (stability, grid and short-kernel records; search),
# variants.jsonl and run/ (variants), gpu-tests.log (smoke), ncu.csv (every mode, where ncu is installed).
set -uo pipefail
what="${1:-smoke}"
case "$what" in smoke|search|variants) ;; *) echo "mode '$what': expected smoke, search or variants" >&2; exit 2;; esac
OUT="${OUT:-./device-out}"
DEST="$OUT/peak"
mkdir -p "$DEST"
export PYTHONPATH="$PWD/src${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
{
  echo "# date -u"; date -u
  echo "# nvidia-smi"; nvidia-smi --query-gpu=name,driver_version,power.limit,power.default_limit,clocks.max.sm,temperature.gpu,power.draw,persistence_mode --format=csv
  echo "# ncu"; command -v ncu && ncu --version | tail -1
  python3 -c "import torch; print('torch', torch.__version__, 'cuda', torch.version.cuda, torch.cuda.get_device_name(0), 'F.scaled_mm', hasattr(torch.nn.functional, 'scaled_mm'))"
} > "$DEST/device.txt" 2>&1
cat "$DEST/device.txt"
start=$(date +%s)
if [ "$what" = smoke ]; then
  timeout 90 python3 -m pytest -q -m gpu tests/bench -x -p no:cacheprovider > "$DEST/gpu-tests.log" 2>&1
  echo "# gpu tests exit $? in $(( $(date +%s) - start )) s"; tail -15 "$DEST/gpu-tests.log"
  timeout 130 python3 benchmarks/peak_search.py smoke "$DEST" > "$DEST/log.txt" 2>&1
  echo "# smoke exit $? at $(( $(date +%s) - start )) s"
  grep -v "^ " "$DEST/log.txt" | grep -c TFLOPS; tail -60 "$DEST/log.txt"
elif [ "$what" = variants ]; then
  timeout 60 python3 benchmarks/peak_search.py variants "$DEST" > "$DEST/log.txt" 2>&1
  echo "# variants exit $? at $(( $(date +%s) - start )) s"; tail -50 "$DEST/log.txt"
  timeout 40 python3 -m truepeak run --quick --mode both --formats bf16,fp8_e4m3 --out "$DEST/run" --no-progress \
    > "$DEST/run.log" 2>&1
  echo "# truepeak run --quick --mode both exit $? at $(( $(date +%s) - start )) s"; tail -25 "$DEST/run.log"
  NCU_CACHE="--cache-control none"  # the graph timer's L2 state (rotation), not ncu's flush before every kernel
else
  timeout 320 python3 benchmarks/peak_search.py search "$DEST" 285 > "$DEST/log.txt" 2>&1
  echo "# search exit $? at $(( $(date +%s) - start )) s"
fi
# short kernel against ncu: gpu__time_duration of every kernel inside the NVTX range 'gemm' (60 launches)
if command -v ncu >/dev/null; then
  timeout 60 ncu --clock-control none ${NCU_CACHE:-} --nvtx --nvtx-include "gemm/" --metrics gpu__time_duration.sum --csv \
    --print-units base python3 benchmarks/peak_search.py ncu-launch > "$DEST/ncu.csv" 2>&1
  echo "# ncu exit $? at $(( $(date +%s) - start )) s"
  python3 - "$DEST/ncu.csv" <<'PY'
import csv, statistics, sys
rows = [r for r in csv.reader(open(sys.argv[1])) if len(r) > 10]
if not rows:
    print("ncu: no rows"); print(open(sys.argv[1]).read()[-2000:]); sys.exit()
h = rows[0]; ki = h.index("Kernel Name"); vi = h.index("Metric Value")
d = [(r[ki], float(r[vi].replace(",", ""))) for r in rows[1:]]
calls, cur = [], None  # one GEMM call = its main kernel plus any split-K reduce after it
for name, ns in d:
    if "reduce" in name.lower() and cur is not None:
        cur += ns
    else:
        if cur is not None:
            calls.append(cur)
        cur = ns
if cur is not None:
    calls.append(cur)
print(f"ncu: {len(d)} kernels in {len(calls)} GEMM calls; names {sorted({n[:60] for n, _ in d})}")
q = statistics.quantiles(calls, n=4)
print(f"ncu: per-call median {statistics.median(calls):.0f} ns, IQR {q[2] - q[0]:.0f} ns, mean {statistics.mean(calls):.0f} ns")
PY
fi
python3 - "$DEST/summary.json" <<'PY' 2>/dev/null
import json, sys
r = json.load(open(sys.argv[1]))
for p in r.get("peaks", []):
    print(f"{p['format']:9s} {p['mode']:9s} {p['status']:6s} {str(p.get('shape')):22s} {p.get('tflops')} TFLOPS "
          f"dense {p.get('pct_dense')} at-clock {p.get('pct_at_clock')} clk {p.get('sm_clock_median_hz')} "
          f"W {p.get('power_median_w')} evals {p.get('evaluations')} {p.get('elapsed_s')} s")
for k in ("seconds_per_eval", "stability", "short_kernel", "grid"):
    if k in r: print(k, json.dumps(r[k]))
PY
echo "# total $(( $(date +%s) - start )) s"
