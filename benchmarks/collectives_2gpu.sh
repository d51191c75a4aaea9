#!/usr/bin/env bash
# truepeak comm on two GPUs of one node: all four collectives, 1 KiB..1 GiB, eager and CUDA-graph modes, through both
# APIs:
#   nccl/          --api nccl  (libnccl called directly, out of place: the calls nccl-tests makes)
#   torch/         --api torch (torch.distributed: what a PyTorch program sees, c10d's per-call work included)
#   torch_fr_off/  --api torch, small all_reduce only, with torch's NCCL flight recorder off
#                  (TORCH_NCCL_TRACE_BUFFER_SIZE=0)
#   probe/         (PROBE=1, the default) a short run with NCCL's TUNING log: the algorithm/protocol NCCL picks per
#                  size (its timings include logging and are not results): nccl_algo.json, summary.md,
#                  nccl_logs.tar.gz
# plus env.txt (nvidia-smi topo -m, versions) and run.log. Each run writes results.jsonl + summary.md.
# Usage (repository root): OUT=/some/dir [PROBE=0|1] [MAIN_TIMEOUT=120] [PROBE_TIMEOUT=60] bash benchmarks/collectives_2gpu.sh
set -u
OUT=${OUT:-./collectives-2gpu-out}
mkdir -p "$OUT"
export PYTHONPATH="$PWD/src${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1 COLUMNS=200
# NVLink SHARP / multicast (NVLS) off: busbw then means link traffic (ring), as nccl-tests reports it without NVLS
# (NVIDIA/nccl-tests#212), and the results compare with nccl-tests runs made the same way.
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
{
  date -u +"date: %Y-%m-%dT%H:%M:%SZ"
  nvidia-smi -L; nvidia-smi topo -m
  nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,power.limit --format=csv
  python3 -c 'import torch, sys; print("python", sys.version.split()[0]); print("torch", torch.__version__, "cuda", torch.version.cuda, "nccl", torch.cuda.nccl.version(), "gpus", torch.cuda.device_count())'
  env | grep -E '^(NCCL_|TORCH_SYMM|TORCH_NCCL|NVSHMEM_)' | sort
} > "$OUT/env.txt" 2>&1
cat "$OUT/env.txt"
SWEEP="--nproc-per-node 2 --ops all_reduce,all_gather,reduce_scatter,all_to_all --sizes 1K:1G --dtype bf16 --iters 20 --warmup 5"
{
  echo "== --api nccl"
  timeout "${MAIN_TIMEOUT:-120}" python3 -m truepeak comm $SWEEP --api nccl --graph --out "$OUT/nccl" --no-progress
  echo "nccl rc=$?"
  echo "== --api torch"
  timeout "${MAIN_TIMEOUT:-120}" python3 -m truepeak comm $SWEEP --api torch --graph --out "$OUT/torch" --no-progress
  echo "torch rc=$?"
  echo "== --api torch, flight recorder off, small all_reduce"
  TORCH_NCCL_TRACE_BUFFER_SIZE=0 timeout 60 python3 -m truepeak comm --nproc-per-node 2 --ops all_reduce --sizes 1K:64K \
      --api torch --no-graph --no-fit --out "$OUT/torch_fr_off" --no-progress
  echo "torch_fr_off rc=$?"; rm -f "$OUT/torch_fr_off/results.jsonl"
  if [ "${PROBE:-1}" = 1 ]; then
    echo "== probe run (NCCL_DEBUG_SUBSYS=TUNING; timings perturbed)"
    timeout "${PROBE_TIMEOUT:-60}" python3 -m truepeak comm --nproc-per-node 2 --sizes 1K:1G --iters 2 --warmup 1 \
        --no-graph --no-fit --nccl-debug-log --out "$OUT/probe" --no-progress > /dev/null
    echo "probe rc=$?"
    (cd "$OUT/probe" && { tar czf nccl_logs.tar.gz nccl_debug.*.txt 2>/dev/null; rm -f nccl_debug.*.txt results.jsonl; })
  fi
} 2>&1 | tee "$OUT/run.log"
