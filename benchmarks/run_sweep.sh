#!/usr/bin/env bash
# The default `truepeak run` sweep on one GPU, then the GPU tests, in one go; everything kept under $OUT.
#
# Usage (from the repository root, truepeak not installed there):
#   bash benchmarks/run_sweep.sh                      # the default sweep (~2.5 min on an H200) + GPU tests
#   bash benchmarks/run_sweep.sh --quick              # smoke test: a few small cases
#   bash benchmarks/run_sweep.sh --formats bf16,fp8   # any other `truepeak run` options
#
# Writes:
#   $OUT/run/device.txt     date -u, nvidia-smi, python and torch versions, git commit ($COMMIT, else git's)
#   $OUT/run/run.log        stdout + stderr of truepeak run (the table)
#   $OUT/run/results.jsonl  one record per case
#   $OUT/run/summary.md     device, environment, method, bandwidth, best TFLOPS per format, full table
#   $OUT/run/report.html    the HTML report of the records
#   $OUT/run/gpu-tests.log  python3 -m pytest -q -m gpu tests
set -uo pipefail
OUT="${OUT:-./sweep-out}"
DEST="$OUT/run"
mkdir -p "$DEST"
{
  echo "# date -u"; date -u
  echo "# git commit"; echo "${COMMIT:-$(git rev-parse --short HEAD 2>/dev/null || echo unknown)}"
  echo "# nvidia-smi"; nvidia-smi
  echo "# nvidia-smi -q (clocks, power)"; nvidia-smi -q -d CLOCK,POWER | sed -n 1,80p
  echo "# python / torch"
  python3 --version
  python3 -c "import torch, sys; print('torch', torch.__version__, 'cuda', torch.version.cuda, 'gpu', torch.cuda.get_device_name(0))"
} > "$DEST/device.txt" 2>&1
sed -n 1,12p "$DEST/device.txt"

export PYTHONPATH="$PWD/src${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
start=$(date +%s)
python3 -m truepeak run --out "$DEST" --no-progress "$@" 2>&1 | tee "$DEST/run.log"
rc=${PIPESTATUS[0]}
echo "# truepeak run exit status $rc, wall $(( $(date +%s) - start )) s" | tee -a "$DEST/run.log"
start=$(date +%s)
python3 -m pytest -q -m gpu -p no:cacheprovider tests > "$DEST/gpu-tests.log" 2>&1
trc=$?
echo "# pytest -m gpu exit status $trc, wall $(( $(date +%s) - start )) s" | tee -a "$DEST/gpu-tests.log"
tail -5 "$DEST/gpu-tests.log"
exit "$rc"
