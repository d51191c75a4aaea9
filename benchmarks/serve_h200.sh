#!/usr/bin/env bash
# truepeak serve on one GPU against `transformers serve` with a random-weight MoE model: the launch check, three
# concurrency levels, and each level against the planner. Results (records, report.html, server log, the device and
# the date) go to $OUT (default ./serve-h200).
#
#   bash benchmarks/serve_h200.sh            # on the GPU machine, truepeak's src/ on PYTHONPATH
#
# The model: benchmarks/make_random_moe.py's default, Qwen3-30B-A3B's layer geometry with 4 layers, bf16, made on the
# GPU. transformers serve runs it with continuous batching (--continuous-batching); if that launch or run fails, the
# same levels are run once more without it, into $OUT/serve-default.
set -uo pipefail
OUT=${OUT:-serve-h200}
mkdir -p "$OUT"
MODEL_DIR=${MODEL_DIR:-/tmp/random-qwen3-moe}
PORT=${PORT:-8000}
date -u +"%Y-%m-%d %H:%M:%S UTC" > "$OUT/date.txt"
nvidia-smi --query-gpu=name,driver_version,power.limit,memory.total --format=csv > "$OUT/device.txt" 2>&1
python3 -c "import sys, torch, transformers; print('python', sys.version.split()[0], 'torch', torch.__version__, 'transformers', transformers.__version__)" >> "$OUT/device.txt"
python3 benchmarks/make_random_moe.py "$MODEL_DIR" --device cuda > "$OUT/make_model.log" 2>&1 || { cat "$OUT/make_model.log"; exit 1; }
tail -1 "$OUT/make_model.log"

serve() {  # $1: the results folder, $2...: extra transformers serve flags
  local dir=$1; shift
  python3 -m truepeak serve \
    --launch "python3 -m transformers.cli.transformers serve $MODEL_DIR --host 127.0.0.1 --port $PORT --device cuda:0 --dtype bfloat16 $*" \
    --url "http://127.0.0.1:$PORT" --concurrency 1,4,16 --input-len 128 --output-len 64 --requests 16 \
    --ready-timeout 150 --request-timeout 60 --gpu h200 --out "$dir" --no-progress
}
set -x
serve "$OUT/serve" --continuous-batching 2>&1 | tee "$OUT/serve.log"
rc=${PIPESTATUS[0]}
set +x
if [ "$rc" -ne 0 ]; then
  echo "continuous batching run failed (status $rc); running with transformers serve's defaults"
  serve "$OUT/serve-default" 2>&1 | tee "$OUT/serve-default.log"
fi
