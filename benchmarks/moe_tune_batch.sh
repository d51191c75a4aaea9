#!/usr/bin/env bash
# One device batch of `truepeak moe tune` for some points of one model, the tables merged over the shipped ones and
# installed into the package, then (optionally) the tuned-table GPU test and vLLM's Triton fused-MoE kernel tuned on
# its grid beside ours (benchmarks/moe_peer_vllm.py, DeepSeek-V3 bf16 only). Each step has its own time limit; the
# results are packed into OUT/results.tar.gz before every step, so a batch stopped at its limit returns what it
# finished (OUT/log is the whole log).
#
# Usage: benchmarks/moe_tune_batch.sh OUT COMMIT, with the settings in the environment:
#   MODEL (deepseek-v3), LAYOUTS (single), WEIGHTS (bf16,fp8), TPES (1,2,4,8,16,32,64), BUDGET (seconds, 300),
#   GPU_TEST (1: run tests/kernels/moe_triton/test_tuned.py -m gpu after installing), PEER (vLLM kernel file; empty:
#   no peer), PEER_TPES (32,16)
#   e.g. WEIGHTS=bf16,fp8 TPES=16,32 PEER=.peer/vllm_fused_moe_kernel.py benchmarks/moe_tune_batch.sh "$OUT" abc1234
set -uo pipefail
cd "$(dirname "$0")/.."
export PYTHONUNBUFFERED=1 PYTHONPATH=src
out=$1 commit=$2
model=${MODEL:-deepseek-v3} layouts=${LAYOUTS:-single} weights=${WEIGHTS:-bf16,fp8}
tpes=${TPES:-1,2,4,8,16,32,64} budget=${BUDGET:-300} gpu_test=${GPU_TEST:-0} peer=${PEER:-}
peer_tpes=${PEER_TPES:-32,16}
work=$(mktemp -d)
shipped=src/truepeak/kernels/moe_triton/tuned
step() { cp "$work/log" "$out/log" 2>/dev/null; tar -czf "$out/results.tar.gz" -C "$work" . 2>/dev/null
         echo "== $(date -u +%H:%M:%S) $*"; }
{
  step device; nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,power.limit --format=csv
  python3 -c "import torch, triton, sys; print(sys.version.split()[0], torch.__version__, triton.__version__)"
  echo "model $model, layouts $layouts, weights $weights, tokens per expert $tpes, budget $budget s"
  step tune; timeout $((budget + 120)) python3 benchmarks/moe_tune.py "$work/tune" --budget-s "$budget" \
    --model "$model" --layouts "$layouts" --weights "$weights" --tokens-per-expert "$tpes" --commit "$commit"
  step install tables
  for f in "$work"/tune/*/E=*.json; do
    [ -f "$f" ] || continue
    name=$(basename "$f")
    if [ -f "$shipped/$name" ]; then
      python3 benchmarks/merge_tuned_tables.py "$work/merged/$name" "$shipped/$name" "$f"
    else
      mkdir -p "$work/merged" && cp "$f" "$work/merged/$name"
    fi
    cp "$work/merged/$name" "$shipped/$name"
  done
  if [ "$gpu_test" = 1 ]; then
    step tuned table test; timeout 150 python3 -m pytest -q -p no:cacheprovider -m gpu \
      tests/kernels/moe_triton/test_tuned.py 2>&1 | tail -3
  fi
  if [ -n "$peer" ]; then
    step peer; timeout 200 python3 benchmarks/moe_peer_vllm.py "$work/peer" --peer-source "$peer" \
      --tokens-per-expert "$peer_tpes" --commit "$commit"
  fi
  step done
} 2>&1 | tee "$work/log"
cp "$work/log" "$out/log"
tar -czf "$out/results.tar.gz" -C "$work" .
