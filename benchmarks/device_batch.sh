#!/usr/bin/env bash
# One call on a lent GPU machine: describe it, run `truepeak run`, keep what comes back under $OUT.
#
# Usage (from the repository root, truepeak not installed there):
#   bash benchmarks/device_batch.sh                      # the default sweep (~2-3 min on an H200)
#   bash benchmarks/device_batch.sh --quick              # smoke test: a few small cases
#   bash benchmarks/device_batch.sh --formats bf16,fp8   # any other `truepeak run` options
#
# Writes (at most 2 folders deep, <= 8 files, as the device tool returns them):
#   $OUT/h200/device.txt     date -u, nvidia-smi, python and torch versions
#   $OUT/h200/run.log        stdout + stderr of truepeak run (the table)
#   $OUT/h200/results.jsonl  one record per case
#   $OUT/h200/summary.md     device, environment, method, bandwidth, best TFLOPS per format, full table
#   $OUT/summary.md          a copy of the summary
set -uo pipefail
OUT="${OUT:-./device-out}"
DEST="$OUT/h200"
mkdir -p "$DEST"
{
  echo "# date -u"; date -u
  echo "# nvidia-smi"; nvidia-smi
  echo "# nvidia-smi -q (clocks, power)"; nvidia-smi -q -d CLOCK,POWER | sed -n 1,80p
  echo "# python / torch"
  python3 --version
  python3 -c "import torch, sys; print('torch', torch.__version__, 'cuda', torch.version.cuda, 'gpu', torch.cuda.get_device_name(0))"
} > "$DEST/device.txt" 2>&1
cat "$DEST/device.txt" | sed -n 1,40p

export PYTHONPATH="$PWD/src${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
start=$(date +%s)
python3 -m truepeak run --out "$DEST" --no-progress "$@" 2>&1 | tee "$DEST/run.log"
rc=${PIPESTATUS[0]}
echo "# truepeak run exit status $rc, wall $(( $(date +%s) - start )) s" | tee -a "$DEST/run.log"
[ -f "$DEST/summary.md" ] && cp "$DEST/summary.md" "$OUT/summary.md"
exit "$rc"
