"""What Triton makes of truepeak's block-scaled MoE gate/up kernel (:mod:`truepeak.kernels.moe_blockscaled`) for
Blackwell (sm_100, sm_103, sm_120) and Hopper (sm_90), on any machine (no GPU: Triton's bundled ptxas): per weight
format, activations and tokens per expert, the MMA instruction in the PTX, shared memory and registers, against each
device's shared memory per block (docs/method.md, 'Shared memory per block'). Compiled only: no Blackwell GPU ran it.

Usage: PYTHONPATH=src python3 benchmarks/moe_blockscaled_ptx.py > docs/results/cpu/moe_blockscaled_ptx.md
"""
import triton

from truepeak.kernels import moe_blockscaled as bs
from truepeak.kernels.moe_triton import fit_shared_memory
from truepeak.kernels.moe_inspect import compile_blockscaled, mma_instructions, resource_usage

# sharedMemPerBlockOptin (CUDA C++ Programming Guide, "Features and Technical Specifications": compute capability
# 9.0 and 10.x: 227 KB = 232,448 B; 12.0: 99 KB = 101,376 B)
LIMIT = {90: 232_448, 100: 232_448, 103: 232_448, 120: 101_376}
print("# Block-scaled MoE gate/up kernel compiled for sm_100, sm_103, sm_120 and sm_90 (no GPU)\n")
print(f"Command: `PYTHONPATH=src python3 benchmarks/moe_blockscaled_ptx.py` (triton {triton.__version__}, Triton's "
      "bundled ptxas). DeepSeek-V3 shapes (K = H = 7168, 2I = 4096 weight rows); the configuration "
      "`choose_blockscaled_config` picks, with the stages `fit_shared_memory` keeps under each device's shared memory "
      "per block; a stack above 0 bytes means register spills. **Compiled only: no kernel here has run on a Blackwell "
      "GPU.** The mxfp4 rows for sm_90 are "
      "Triton's bf16 emulation, which was run on the H200 (docs/results/h200/moe/README.md).\n")
print("| target | weights | activations | tok/expert | block m x n x k, stages | smem B (limit) | regs | stack B | "
      "MMA instruction | path |")
print("|---|---|---|---:|---|---:|---:|---:|---|---|")
for cap in (100, 103, 120, 90):
    for wfmt, acts in (("nvfp4", "fp4"), ("mxfp4", "fp4"), ("mxfp4", "fp8")):
        for tpe in (1, 32, 256):
            cfg = bs.choose_blockscaled_config(tpe, 7168, gated=True, capability=(cap // 10, cap % 10))
            try:
                path = bs.blockscaled_path(wfmt, acts, (cap // 10, cap % 10))[0]
            except Exception as exc:  # noqa: BLE001 - the refusal is the row
                print(f"| sm_{cap} | {wfmt} | {acts} | {tpe} | | | | | | refused: {str(exc).split(':')[1].strip()} |")
                continue
            cfg, _ = fit_shared_memory(lambda _w, c, warmup=True: compile_blockscaled(c, wfmt, acts, cap), cfg, cfg,
                                       LIMIT[cap])
            k = compile_blockscaled(cfg, wfmt, acts, cap)
            mma = ", ".join(f"`{m}`" for m in mma_instructions(k))
            use = resource_usage(k)
            print(f"| sm_{cap} | {wfmt} | {acts} | {tpe} | {cfg.block_m}x{2 * cfg.block_n}x{cfg.block_k}, "
                  f"{cfg.num_stages} | {int(k.metadata.shared):,} ({LIMIT[cap]:,}) | {use['registers']} | "
                  f"{use['stack']} | {mma} | {path} |")
