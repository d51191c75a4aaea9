# Shared by the Nsight Compute device batches (benchmarks/moe_*_bound_batch.sh): source it after setting `out`.
# prof NAME CMD...: profile both MoE kernels of CMD (launches 5-6 of each name) with the sections below into
# $out/ncu_NAME.txt, and print its headline lines. device_info: write $out/device.txt (date, GPU, versions).
sections=(--section SpeedOfLight --section MemoryWorkloadAnalysis --section WarpStateStats --section SchedulerStats
          --section Occupancy --section LaunchStats --section InstructionStats)
prof() {
  local name=$1; shift
  echo "== $(date -u +%H:%M:%S) ncu $name"
  timeout "${PROF_TIMEOUT:-170}" ncu --clock-control none --kernel-name regex:'gate_up|down' --launch-skip 4 \
    --launch-count 2 "${sections[@]}" "$@" > "$out/ncu_$name.txt" 2>&1
  grep -E "configs|us per call|Duration|DRAM Throughput|Memory Throughput|L2 Cache Throughput|Issue Slots Busy|Registers Per|Achieved Occ" \
    "$out/ncu_$name.txt" | head -24
}
device_info() {
  { date -u; nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,power.limit --format=csv
    python3 -c "import torch, triton, sys; print(sys.version.split()[0], torch.__version__, triton.__version__)"
  } > "$out/device.txt" 2>&1
  cat "$out/device.txt"
}
