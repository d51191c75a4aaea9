#!/usr/bin/env bash
# What bounds the fp4 MoE kernels at decode, in one device batch: Nsight Compute profiles of both kernels with the
# shipped tuned tables at 8 tokens per expert (DeepSeek-V3, E = 256, uniform routing): nvfp4 in the MMA layout
# (fp16 activations, 128-element K steps as shipped, then 64-element steps), and mxfp4 in the tiles layout (w4a8).
#
# Usage: benchmarks/moe_fp4_bound_batch.sh OUT   (writes OUT/device.txt, OUT/ncu_*.txt)
set -uo pipefail
cd "$(dirname "$0")/.."
export PYTHONUNBUFFERED=1 PYTHONPATH=src
out=$1
mkdir -p "$out"
source benchmarks/ncu_lib.sh
PROF_TIMEOUT=130
device_info
prof nvfp4_8 python3 benchmarks/moe_kernel_profile_point.py nvfp4 8
prof nvfp4_8_k64 python3 benchmarks/moe_kernel_profile_point.py nvfp4 8 - '{"block_k": 64}'
prof mxfp4_8 python3 benchmarks/moe_kernel_profile_point.py mxfp4 8
echo "== $(date -u +%H:%M:%S) done"
