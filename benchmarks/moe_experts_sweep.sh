#!/usr/bin/env bash
# The routed-expert layer at decode on one GPU (benchmarks/moe_experts_sweep.py: every backend and format over tokens
# per expert). Usage: benchmarks/moe_experts_sweep.sh OUT_DIR [--quick] [any other option of the .py]; a relative
# OUT_DIR is taken from the repository root.
set -euo pipefail
cd "$(dirname "$0")/.."
export PYTHONUNBUFFERED=1
PYTHONPATH=src python3 benchmarks/moe_experts_sweep.py "${1:-results_moe}" "${@:2}"
