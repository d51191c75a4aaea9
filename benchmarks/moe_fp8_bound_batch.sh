#!/usr/bin/env bash
# What bounds the w8a8 MoE kernels at 16-32 tokens per expert, in one device batch: Nsight Compute profiles of both
# kernels with the shipped tuned tables (DeepSeek-V3 fp8 and bf16 at 32 tokens per expert, GLM-5 fp8 at 16), then
# benchmarks/moe_fp8_promotion.py (the fp32 promotion of the fp8 MMA's partial sums, shipped and varied).
#
# Usage: benchmarks/moe_fp8_bound_batch.sh OUT   (writes OUT/device.txt, OUT/ncu_*.txt, OUT/fp8_promotion.json,
#        OUT/promotion.log)
set -uo pipefail
cd "$(dirname "$0")/.."
export PYTHONUNBUFFERED=1 PYTHONPATH=src
out=$1
mkdir -p "$out"
source benchmarks/ncu_lib.sh
device_info
prof fp8_32 python3 benchmarks/moe_kernel_profile_point.py fp8 32
prof bf16_32 python3 benchmarks/moe_kernel_profile_point.py bf16 32
MOE_MODEL=glm-5 prof glm5_fp8_16 python3 benchmarks/moe_kernel_profile_point.py fp8 16
echo "== $(date -u +%H:%M:%S) promotion"
timeout 280 python3 benchmarks/moe_fp8_promotion.py "$out" 2>&1 | tee "$out/promotion.log"
echo "== $(date -u +%H:%M:%S) done"
