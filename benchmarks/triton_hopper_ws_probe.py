"""Which K loops Triton's Hopper warp specialisation compiles, on any machine (no GPU: Triton's compiler for sm_90).

Four small GEMM kernels with the loop ``tl.range(0, K, BK, warp_specialize=WS)``, each compiled with WS off and on:
both operands loaded through pointers (as truepeak's MoE kernels load them), both through TMA tensor descriptors
(``tl.make_tensor_descriptor``), and the MoE kernels' swap-AB shape (weights as the MMA's M side) with the weights
through a descriptor and the activation rows gathered by index through pointers, or through a descriptor over rows
already in expert order. Prints a Markdown table: compiled or the compiler's failure, and whether the TTGIR holds
``ttg.warp_specialize`` partitions.

Usage: python3 benchmarks/triton_hopper_ws_probe.py > docs/results/cpu/triton_hopper_ws.md
"""
import os
import re
import subprocess
import sys

import triton
import triton.language as tl


@triton.jit
def both_pointers(a_ptr, b_ptr, c_ptr, idx_ptr, M, N, K: tl.constexpr, BM: tl.constexpr, BN: tl.constexpr,
                  BK: tl.constexpr, WS: tl.constexpr):
    om = tl.program_id(0) * BM + tl.arange(0, BM)
    on = tl.program_id(1) * BN + tl.arange(0, BN)
    ok = tl.arange(0, BK)
    acc = tl.zeros((BM, BN), tl.float32)
    for k in tl.range(0, K, BK, warp_specialize=WS):
        a = tl.load(a_ptr + om[:, None] * K + (k + ok)[None, :])
        b = tl.load(b_ptr + on[None, :] * K + (k + ok)[:, None])
        acc = tl.dot(a, b, acc)
    tl.store(c_ptr + om[:, None] * N + on[None, :], acc.to(tl.bfloat16))


@triton.jit
def both_descriptors(a_ptr, b_ptr, c_ptr, idx_ptr, M, N, K: tl.constexpr, BM: tl.constexpr, BN: tl.constexpr,
                     BK: tl.constexpr, WS: tl.constexpr):
    ad = tl.make_tensor_descriptor(a_ptr, shape=[M, K], strides=[K, 1], block_shape=[BM, BK])
    bd = tl.make_tensor_descriptor(b_ptr, shape=[N, K], strides=[K, 1], block_shape=[BN, BK])
    acc = tl.zeros((BM, BN), tl.float32)
    for k in tl.range(0, K, BK, warp_specialize=WS):
        acc = tl.dot(ad.load([tl.program_id(0) * BM, k]), bd.load([tl.program_id(1) * BN, k]).T, acc)
    om = tl.program_id(0) * BM + tl.arange(0, BM)
    on = tl.program_id(1) * BN + tl.arange(0, BN)
    tl.store(c_ptr + om[:, None] * N + on[None, :], acc.to(tl.bfloat16))


@triton.jit
def swap_ab_gathered_rows(a_ptr, b_ptr, c_ptr, idx_ptr, M, N, K: tl.constexpr, BM: tl.constexpr, BN: tl.constexpr,
                          BK: tl.constexpr, WS: tl.constexpr):
    wd = tl.make_tensor_descriptor(b_ptr, shape=[N, K], strides=[K, 1], block_shape=[BN, BK])
    rows = tl.load(idx_ptr + tl.program_id(0) * BM + tl.arange(0, BM))
    ok = tl.arange(0, BK)
    acc = tl.zeros((BN, BM), tl.float32)
    for k in tl.range(0, K, BK, warp_specialize=WS):
        x = tl.load(a_ptr + rows[None, :] * K + (k + ok)[:, None])
        acc = tl.dot(wd.load([tl.program_id(1) * BN, k]), x, acc)
    om = tl.program_id(0) * BM + tl.arange(0, BM)
    on = tl.program_id(1) * BN + tl.arange(0, BN)
    tl.store(c_ptr + om[None, :] * N + on[:, None], acc.to(tl.bfloat16))


@triton.jit
def swap_ab_sorted_rows(a_ptr, b_ptr, c_ptr, idx_ptr, M, N, K: tl.constexpr, BM: tl.constexpr, BN: tl.constexpr,
                        BK: tl.constexpr, WS: tl.constexpr):
    wd = tl.make_tensor_descriptor(b_ptr, shape=[N, K], strides=[K, 1], block_shape=[BN, BK])
    xd = tl.make_tensor_descriptor(a_ptr, shape=[M, K], strides=[K, 1], block_shape=[BM, BK])
    acc = tl.zeros((BN, BM), tl.float32)
    for k in tl.range(0, K, BK, warp_specialize=WS):
        acc = tl.dot(wd.load([tl.program_id(1) * BN, k]), xd.load([tl.program_id(0) * BM, k]).T, acc)
    om = tl.program_id(0) * BM + tl.arange(0, BM)
    on = tl.program_id(1) * BN + tl.arange(0, BN)
    tl.store(c_ptr + om[None, :] * N + on[:, None], acc.to(tl.bfloat16))


CASES = ((both_pointers, "A and B through pointers", (128, 128, 64)),
         (both_descriptors, "A and B through tensor descriptors", (128, 128, 64)),
         (swap_ab_gathered_rows, "swap-AB: weights through a descriptor, activation rows gathered by index",
          (16, 128, 128)),
         (swap_ab_sorted_rows, "swap-AB: weights and activation rows (in expert order) through descriptors",
          (16, 128, 128)))

CHILD = """
import sys, json
sys.path.insert(0, {here!r})
import triton
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource
import triton_hopper_ws_probe as p
fn = getattr(p, sys.argv[1]); bm, bn, bk = map(int, sys.argv[2:5]); ws = sys.argv[5] == "1"
sig = {{"a_ptr": "*bf16", "b_ptr": "*bf16", "c_ptr": "*bf16", "idx_ptr": "*i32", "M": "i32", "N": "i32",
       "K": "constexpr", "BM": "constexpr", "BN": "constexpr", "BK": "constexpr", "WS": "constexpr"}}
attrs = {{(fn.arg_names.index(n),): [["tt.divisibility", 16]] for n in ("a_ptr", "b_ptr", "c_ptr", "idx_ptr", "M", "N")}}
k = triton.compile(ASTSource(fn=fn, signature=sig, constexprs={{"K": 7168, "BM": bm, "BN": bn, "BK": bk, "WS": ws}},
                             attrs=attrs), target=GPUTarget("cuda", 90, 32), options={{"num_warps": 4, "num_stages": 3}})
print("PARTITIONS" if "ttg.warp_specialize" in k.asm["ttgir"] else "NONE")
"""


def compile_case(name: str, tile: tuple, ws: bool) -> str:
    """Compile in a child process (a failed MLIR assertion aborts the process) and describe the outcome."""
    code = CHILD.format(here=os.path.dirname(os.path.abspath(__file__)))
    proc = subprocess.run([sys.executable, "-c", code, name, *map(str, tile), "1" if ws else "0"],
                          capture_output=True, text=True, timeout=600)
    if proc.returncode == 0:
        return ("compiled, warp-specialised partitions" if "PARTITIONS" in proc.stdout
                else "compiled, one partition")
    text = proc.stderr
    m = (re.search(r"(\w+\.cpp):(\d+): [^\n]*?(Assertion `[^']*' failed)", text)
         or re.search(r"(UNREACHABLE executed at )\S*/(\w+\.cpp):(\d+)", text))
    failing = re.search(r"Pipeline failed while executing \[`(\w+)`", text)
    where = ""
    if m:
        where = f" ({m.group(1)}{m.group(2)}:{m.group(3)})" if m.group(1).startswith("UNREACHABLE") else \
            f" ({m.group(3)} at {m.group(1)}:{m.group(2)})"
    return f"failed in {failing.group(1) if failing else 'the compiler'}{where}"


if __name__ == "__main__":
    print("# Triton's Hopper warp specialisation: which K loops it compiles\n")
    print(f"Command: `python3 benchmarks/triton_hopper_ws_probe.py` (triton {triton.__version__}, target sm_90, CPU "
          "only: nothing runs). K = 7168, bf16, 4 warps, 3 stages; the loop is "
          "`tl.range(0, K, BK, warp_specialize=WS)`.\n")
    print("| kernel | tile (M x N x K step) | warp_specialize=False | warp_specialize=True |")
    print("|---|---|---|---|")
    for fn, what, tile in CASES:
        cells = [compile_case(fn.__name__, tile, ws) for ws in (False, True)]
        print(f"| {what} | {tile[0]} x {tile[1]} x {tile[2]} | {cells[0]} | {cells[1]} |", flush=True)
