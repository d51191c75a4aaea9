#!/usr/bin/env bash
# One device batch: the MoE kernels' GPU tests, `truepeak moe tune` for DeepSeek-V3 (E = 256, bf16 and fp8 w8a8),
# the tuned table installed into the package, then vLLM's Triton fused-MoE kernel tuned on its grid beside ours with
# that table (benchmarks/moe_peer_vllm.py), then Nsight Compute on both at one point. Every step has its own time
# limit so that a slow one leaves the others their share; everything lands in OUT/results.tar.gz (and OUT/log).
#
# Usage: benchmarks/moe_tune_vs_peer.sh OUT COMMIT PEER_SOURCE [TUNE_BUDGET_S] [PEER_TPES] [PROFILE_TPE]
#   e.g. benchmarks/moe_tune_vs_peer.sh "$OUT" abc1234 .peer/vllm_fused_moe_kernel.py 230 32,16 32
set -uo pipefail
cd "$(dirname "$0")/.."
export PYTHONUNBUFFERED=1 PYTHONPATH=src
out=$1 commit=$2 peer=$3 budget=${4:-200} tpes=${5:-32,16} prof=${6:-32}
work=$(mktemp -d)
table="E=256,N=2048,H=7168,device_name=NVIDIA_H200.json"
# the results are packed again before every step, so a batch stopped at its limit still returns what it finished
step() { cp "$work/log" "$out/log" 2>/dev/null; tar -czf "$out/results.tar.gz" -C "$work" . 2>/dev/null
         echo "== $(date -u +%H:%M:%S) $*"; }
{
  step device; nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,power.limit --format=csv
  python3 -c "import torch, triton, sys; print(sys.version.split()[0], torch.__version__, triton.__version__)"
  step gpu tests; timeout 90 python3 -m pytest -q -p no:cacheprovider -m gpu tests/kernels/moe_triton/test_fused.py \
    -k "tile_orders or persistent" 2>&1 | tail -5
  step tune; timeout $((budget + 90)) python3 benchmarks/moe_tune.py "$work/tune" --budget-s "$budget" \
    --layouts single --commit "$commit"
  if [ -f "$work/tune/single/$table" ]; then
    cp "$work/tune/single/$table" "src/truepeak/kernels/moe_triton/tuned/$table"
    step tuned table test; timeout 60 python3 -m pytest -q -p no:cacheprovider -m gpu \
      tests/kernels/moe_triton/test_tuned.py 2>&1 | tail -2
  fi
  step peer; timeout 200 python3 benchmarks/moe_peer_vllm.py "$work/peer" --peer-source "$peer" \
    --tokens-per-expert "$tpes" --commit "$commit"
  if command -v ncu >/dev/null && [ -f "$work/peer/peer.json" ]; then
    sections="--section SpeedOfLight --section MemoryWorkloadAnalysis --section Occupancy"
    step ncu ours; timeout 45 ncu --clock-control none --kernel-name regex:'gate_up|down' --launch-skip 2 \
      --launch-count 2 $sections python3 benchmarks/moe_kernel_profile_point.py bf16 "$prof" > "$work/ncu_ours.txt" 2>&1
    step ncu peer; timeout 45 ncu --clock-control none --kernel-name fused_moe_kernel --launch-skip 2 \
      --launch-count 2 $sections python3 benchmarks/moe_peer_vllm.py "$work/peer" --peer-source "$peer" \
      --profile "$prof" > "$work/ncu_peer.txt" 2>&1
  fi
  step done
} 2>&1 | tee "$work/log"
cp "$work/log" "$out/log"
tar -czf "$out/results.tar.gz" -C "$work" .
