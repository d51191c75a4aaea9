#!/usr/bin/env bash
# MoE expert layer at decode on one H200 (issue #5). Usage: benchmarks/moe_experts_sweep.sh OUT_DIR [--quick]
set -euo pipefail
cd "$(dirname "$0")/.."
export PYTHONUNBUFFERED=1
PYTHONPATH=src python3 benchmarks/moe_experts_sweep.py "${1:-results_moe}" "${@:2}"
