#!/usr/bin/env bash
# Busy experts in a launch of their own (FusedMoE's split_busy), in one device batch: the GPU tests of the split
# (a second CUDA stream, eagerly and in a CUDA graph) and of the tuned tables, then FusedMoE with the split against
# one launch for all, in the same run, under power-law 1.2 routing: DeepSeek-V3 (E = 256: bf16, fp8, nvfp4), GLM-5
# (E = 256: bf16, fp8) and DeepSeek-V3 EP8-local (bf16, fp8), 1-64 tokens per expert.
#
# Usage: benchmarks/moe_busy_split_batch.sh OUT   (writes OUT/device.txt, OUT/tests.log, OUT/*/split_blocks.json,
#   OUT/split.log)
set -uo pipefail
cd "$(dirname "$0")/.."
export PYTHONUNBUFFERED=1 PYTHONPATH=src
out=$1
mkdir -p "$out"
{ date -u; nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader
  python3 -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__)"; } >"$out/device.txt"
timeout 240 python3 -m pytest -q -p no:cacheprovider tests/kernels/moe_triton/test_fused.py \
  tests/kernels/moe_triton/test_tuned.py -m gpu -k "second_stream or tuned" >"$out/tests.log" 2>&1
tail -3 "$out/tests.log"
split() {  # NAME ARGS...
  local name=$1; shift
  timeout 150 python3 benchmarks/moe_split_blocks.py "$out/$name" --thresholds "" \
    --tokens-per-expert 1,2,4,8,16,32,64 "$@" 2>&1 | grep -v Warning | tee -a "$out/split.log"
}
split dsv3 --weights bf16,fp8,nvfp4
split glm5 --model glm-5 --weights bf16,fp8
split dsv3_ep8 --ep 8 --weights bf16,fp8
echo "== $(date -u +%H:%M:%S) done"
