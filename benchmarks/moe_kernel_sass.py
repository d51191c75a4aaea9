"""What the compiler made of truepeak's MoE gate/up kernel for sm_90 (H100/H200), on any machine (no GPU):
per format and tokens per expert, the default configuration's shared memory, registers and K-loop SASS instructions
per weight value, with the instruction mix; then the same for every entry of the shipped H200 table of DeepSeek-V3's
E = 256 shape, beside the % of the read bandwidth it measured. The evidence behind docs/results/h200/moe/README.md's
"what bounds it".

Usage: PYTHONPATH=src python3 benchmarks/moe_kernel_sass.py > docs/results/cpu/moe_kernel_sass.md
"""
import triton

from truepeak.kernels import moe_triton as mt
from truepeak.kernels.moe_triton import tuned as tt
from truepeak.kernels.moe_inspect import compile_gate_up, sass_loop_report

print("# MoE gate/up kernel compiled for sm_90: the K loop in SASS\n")
print(f"Command: `PYTHONPATH=src python3 benchmarks/moe_kernel_sass.py` (triton {triton.__version__}, CPU only: "
      "Triton's bundled ptxas and cuobjdump). DeepSeek-V3 shapes (K = H = 7168, 2I = 4096 weight rows); the "
      "configuration `choose_config` picks. Instructions are per thread per K-loop iteration; values = weight "
      "elements one thread handles per iteration (2 tiles x block_n x block_k / threads). fp4 with fp16 activations is "
      "the tiled w4a16 kernel and fp4 with fp8 activations the w4a8 kernel, both on the w4a8 layout (layout `tiles`); "
      "layout `mma` is the MMA layout's kernel (the fp4 default: each 32-bit word decoded into the MMA's registers, fp16 "
      "MMAs, with fp16 or fp8 activations).\n")
print("| weights | activations | layout | tok/expert | block m x n x k, warps, stages | regs | smem B | instr / iter | "
      "instr / value | top of the mix |")
print("|---|---|---|---:|---|---:|---:|---:|---:|---|")
for wfmt, w8a8, mma in (("bf16", False, False), ("fp8", True, False), ("fp8", False, False), ("nvfp4", True, False),
                        ("mxfp4", True, False), ("nvfp4", False, False), ("mxfp4", False, False),
                        ("nvfp4", False, True), ("nvfp4", True, True), ("mxfp4", False, True), ("mxfp4", True, True)):
    for tpe in (1, 8, 32):
        cfg = mt.choose_config(tpe, wfmt, True, 232_448, 7168, w8a8, mma=mma)
        r = sass_loop_report(compile_gate_up(cfg, wfmt, w8a8, mma=mma), cfg)
        acts = "fp8" if w8a8 else "bf16" if wfmt == "bf16" else "fp16"
        layout = "mma" if mma else "tiles" if wfmt in ("nvfp4", "mxfp4") else "-"
        mix = ", ".join(f"{k} {v}" for k, v in list(r.mix.items())[:6])
        print(f"| {wfmt} | {acts} | {layout} | {tpe} | {cfg.block_m}x{cfg.block_n}x{cfg.block_k}, {cfg.num_warps}, "
              f"{cfg.num_stages}{', hoist' if cfg.hoist else ''}{f', maxnreg {cfg.maxnreg}' if cfg.maxnreg else ''} | "
              f"{r.registers} | {r.shared_bytes:,} | "
              f"{r.instructions} | {r.per_value:.2f} | {mix} |")

TABLE = "E=256,N=2048,H=7168,device_name=NVIDIA_H200.json"
print(f"\n## The shipped H200 table's entries (`src/truepeak/kernels/moe_triton/tuned/{TABLE}`)\n")
print("Each entry's gate/up configuration compiled as above; `% read bw` is the entry's figure in the table (the whole "
      "unit, measured on an H200: docs/results/h200/moe-tune/README.md). `group` is the tile order (`group_m`).\n")
print("| weights | activations | layout | tok/expert | block m x n x k, warps, stages, group | regs | instr / iter | "
      "instr / value | % read bw |")
print("|---|---|---|---:|---|---:|---:|---:|---:|")
table = tt.load_table(tt.package_dir() / TABLE)
for (wfmt, acts, bucket), e in sorted(table.entries.items(), key=lambda kv: (mt.WEIGHT_FORMATS.index(kv[0][0]),
                                                                              kv[0][1], kv[0][2])):
    cfg, mma = e.gate_up, e.fp4_layout == "mma"
    r = sass_loop_report(compile_gate_up(cfg, wfmt, acts == "fp8", mma=mma), cfg)
    layout = e.fp4_layout or "-"
    print(f"| {wfmt} | {acts} | {layout} | {bucket} | {cfg.block_m}x{cfg.block_n}x{cfg.block_k}, {cfg.num_warps}, "
          f"{cfg.num_stages}, {cfg.group_m} | {r.registers} | {r.instructions} | {r.per_value:.2f} | "
          f"{100 * e.read_bandwidth_fraction:.1f} |")
