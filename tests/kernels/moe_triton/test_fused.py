"""truepeak's fused-MoE launcher (truepeak.kernels.moe_triton.fused) on the CPU under TRITON_INTERPRET=1 (small
shapes): every format against the float32 reference of the dequantised weights, including experts with zero tokens,
one expert holding every token, and slots routed to another EP rank (id -1); its arguments and refusals."""

from __future__ import annotations

import os

import pytest

torch = pytest.importorskip("torch")

from truepeak.errors import TruepeakError, UnsupportedError  # noqa: E402
from truepeak.kernels import moe_triton as mt  # noqa: E402

ROUTINGS = {
    # token -> (expert, expert); expert 2 gets nothing, -1 = a slot routed to another EP rank
    "mixed": [[0, 1], [1, 3], [1, 0], [3, 1], [1, -1]],
    # one expert holds every token (and more than one block of 16 rows)
    "all_in_one": [[2, -1]] * 18,
}

# Runs in a fresh interpreter with TRITON_INTERPRET=1 set before triton is imported (the variable is read when
# ``@triton.jit`` runs and the interpreter keeps process-wide state, so it cannot be switched on inside this process).
_CHILD = """
import json, os, sys
import torch
from truepeak.kernels import moe_triton as mt
routings = json.loads(sys.argv[1])
ROWS_MIXED = routings["mixed"]
out = {}
for routing, rows in routings.items():
    for wfmt in mt.WEIGHT_FORMATS:
        torch.manual_seed(0)
        E, H, I = 4, 128, 128
        ids = torch.tensor(rows)
        T, k = ids.shape
        w1 = mt.quantize_experts(torch.randn(E, 2 * I, H) * 0.1, wfmt)
        w2 = mt.quantize_experts(torch.randn(E, H, I) * 0.1, wfmt)
        x = (torch.rand(T, H) * 2 - 1).bfloat16()
        tw = torch.rand(T, k)
        ref = mt.moe_reference(x, w1.dequantize(), w2.dequantize(), ids, tw)
        bk = 64 if wfmt in ("nvfp4", "mxfp4") else 32
        # "all_in_one" runs the persistent launch: 3 programs looping over its tiles; "mixed" the grouped tile order,
        # groups of 2 of its 3 token blocks (the last group holds one)
        persist = routing == "all_in_one"
        group = 0 if persist else 2
        cfg = mt.KernelConfig(16, 64, bk, 4, 1, prefetch=(routing == "mixed"), hoist=persist, persistent=persist,
                              group_m=group)
        acts = (["fp8", "fp16"] if wfmt.startswith("fp8") else ["fp8", "fp16", "fp16u", "mma8", "mma16"]
                if wfmt.endswith("fp4") else [None])
        for act in acts:
            c = cfg
            if act != "fp16u" and wfmt.endswith("fp4"):  # the tiled and MMA-layout kernels: 4 scale blocks per step
                c = mt.KernelConfig(16, 64, mt.w4a8_block_k(wfmt), 4, 1, prefetch=(routing == "mixed"),
                                    persistent=persist, group_m=group)
            layout = "mma" if act and act.startswith("mma") else "tiles" if wfmt.endswith("fp4") else None
            a = act and ("fp8" if act in ("fp8", "mma8") else "fp16")
            fused = mt.FusedMoE(x, w1, w2, ids, tw, config=c, activations=a, fp4_layout=layout,
                                untiled_w4a16=act == "fp16u")  # fp16u: the untiled w4a16
            y = fused()
            err = float((y.float() - ref).abs().max() / ref.abs().max())
            out[routing + "/" + wfmt + ("/" + act if act else "")] = {
                "err": err, "shape": list(y.shape), "dtype": str(y.dtype), "counts": fused.align.counts.tolist(),
                "activations": fused.activations, "tiled": getattr(fused, "tiled", None), "mma": fused.mma,
                "programs": sorted(fused._grid.values()), "persistent": [fused.cfg1.persistent, fused.cfg2.persistent],
                "group_m": [fused.cfg1.group_m, fused.cfg2.group_m]}
# small weights (scale 1e-3) through the fp4 path that decodes in the loaded layout: the per-expert scale is applied
# after the K loop, so the fp16 tiles do not lose precision with the weights' magnitude (8.4e-3 when it was not)
torch.manual_seed(0)
E, H, I = 4, 256, 256
ids = torch.tensor(ROWS_MIXED)
tw = torch.rand(ids.shape)
xs = (torch.rand(ids.shape[0], H) * 2 - 1).bfloat16()
for wfmt in ("nvfp4", "mxfp4"):
    w1 = mt.quantize_experts(torch.randn(E, 2 * I, H) * 1e-3, wfmt)
    w2 = mt.quantize_experts(torch.randn(E, H, I) * 1e-3, wfmt)
    ref = mt.moe_reference(xs, w1.dequantize(), w2.dequantize(), ids, tw)
    y = mt.FusedMoE(xs, w1, w2, ids, tw, config=mt.KernelConfig(64, 64, 128, 4, 1, hoist=False), activations="fp16",
                    untiled_w4a16=True)()
    out["small/" + wfmt] = float((y.float() - ref).abs().max() / ref.abs().max())
    y = mt.FusedMoE(xs, w1, w2, ids, tw, config=mt.KernelConfig(64, 64, mt.w4a8_block_k(wfmt), 4, 1),
                    activations="fp16", fp4_layout="tiles")()
    out["small_tiled/" + wfmt] = float((y.float() - ref).abs().max() / ref.abs().max())
    y = mt.FusedMoE(xs, w1, w2, ids, tw, config=mt.KernelConfig(64, 64, mt.w4a8_block_k(wfmt), 4, 1),
                    activations="fp16", fp4_layout="mma")()
    out["small_mma/" + wfmt] = float((y.float() - ref).abs().max() / ref.abs().max())
    # 128-element steps: two chunks per step (nvfp4: two scale words, read as one int64)
    y = mt.FusedMoE(xs, w1, w2, ids, tw, config=mt.KernelConfig(16, 64, 128, 4, 1), activations="fp16",
                    fp4_layout="mma")()
    out["small_mma128/" + wfmt] = float((y.float() - ref).abs().max() / ref.abs().max())
# mxfp4 w4a8 with K not a multiple of 128 (gpt-oss-like: 64-element steps, 2 scale blocks), H = 192, I = 64
torch.manual_seed(1)
w1g = mt.quantize_experts(torch.randn(4, 128, 192) * 0.1, "mxfp4")
w2g = mt.quantize_experts(torch.randn(4, 192, 64) * 0.1, "mxfp4")
xg = (torch.rand(ids.shape[0], 192) * 2 - 1).bfloat16()
refg = mt.moe_reference(xg, w1g.dequantize(), w2g.dequantize(), ids, tw)
fg = mt.FusedMoE(xg, w1g, w2g, ids, tw, tokens_per_expert=2)
out["mxfp4_k192"] = {"err": float((fg().float() - refg).abs().max() / refg.abs().max()),
                     "block_k": [fg.cfg1.block_k, fg.cfg2.block_k]}
# mxfp4 w4a8 with its block scales dropped (the timing experiment): the kernel computes with e2m1 values times the
# per-expert rebasing scale 2^(max_e - 136) alone, i.e. the reference of weights whose every e8m0 scale is max_e - 9
torch.manual_seed(4)
w1d = mt.quantize_experts(torch.randn(4, 128, 128) * 0.1, "mxfp4")
w2d = mt.quantize_experts(torch.randn(4, 128, 64) * 0.1, "mxfp4")
xd = (torch.rand(ids.shape[0], 128) * 2 - 1).bfloat16()
def flat_scales(w):
    top = w.scale.to(torch.int32).flatten(1).amax(1)
    return mt.ExpertWeights("mxfp4", w.data, (top[:, None, None] - 9).expand_as(w.scale).to(torch.uint8).contiguous())
ref_d = mt.moe_reference(xd, w1d.dequantize(), w2d.dequantize(), ids, tw)
ref_flat = mt.moe_reference(xd, flat_scales(w1d).dequantize(), flat_scales(w2d).dequantize(), ids, tw)
fd = mt.FusedMoE(xd, w1d, w2d, ids, tw, activations="fp8", drop_block_scales=True, output_unchecked=True)
yd = fd().float()
out["dropped_scales"] = {"err_flat": float((yd - ref_flat).abs().max() / ref_flat.abs().max()),
                         "err_true": float((yd - ref_d).abs().max() / ref_d.abs().max()),
                         "output_valid": fd.output_valid, "act8": fd._act8_flag()}
# an e8m0 NaN scale (255) in mxfp4 w4a8 gives NaN outputs (the exponent field alone is inf)
w1n = mt.quantize_experts(torch.randn(4, 128, 128) * 0.1, "mxfp4")
w2n = mt.quantize_experts(torch.randn(4, 128, 64) * 0.1, "mxfp4")
w1n.scale[1, 0, 0] = 255
yn = mt.FusedMoE((torch.rand(ids.shape[0], 128) * 2 - 1).bfloat16(), w1n, w2n, ids, tw, activations="FP8")()
out["nan_scale"] = {"nan": int(yn.float().isnan().sum()), "inf": int(yn.float().isinf().sum())}
# mxfp4 weights with no activations argument run w4a8 (their default)
out["default_fp4"] = mt.FusedMoE(xs, w1, w2, ids, tw, config=mt.KernelConfig(16, 64, 128, 4, 1)).activations
# nvfp4 with no activations argument runs the tiled w4a16 (its default)
w1v = mt.quantize_experts(torch.randn(4, 512, 256) * 0.1, "nvfp4")
w2v = mt.quantize_experts(torch.randn(4, 256, 256) * 0.1, "nvfp4")
fv = mt.FusedMoE(xs, w1v, w2v, ids, tw, config=mt.KernelConfig(16, 64, 64, 4, 1))
out["default_nvfp4"] = {"activations": fv.activations, "tiled": fv.tiled, "mma": fv.mma}
# fp16 activations (w4a16, w8a16) with inputs or weights far from 1: each row is scaled by a power of two, so nothing
# overflows fp16 (x of +-300 made the intermediate inf before) or sinks to zero (weights x 1e-5)
torch.manual_seed(2)
ids_r, tw_r = torch.randint(0, 4, (8, 2)), torch.softmax(torch.rand(8, 2), 1)
out["range"] = {}
for wfmt, xscale, wscale in (("nvfp4", 300.0, 0.05), ("nvfp4", 1.0, 1e3), ("nvfp4", 1.0, 1e-5), ("fp8", 300.0, 0.05),
                             ("fp8", 1e-6, 0.05)):
    w1r = mt.quantize_experts(torch.randn(4, 256, 128) * wscale, wfmt)
    w2r = mt.quantize_experts(torch.randn(4, 128, 128) * wscale, wfmt)
    xr_ = ((torch.rand(8, 128) * 2 - 1) * xscale).bfloat16()
    ref_r = mt.moe_reference(xr_, w1r.dequantize(), w2r.dequantize(), ids_r, tw_r)
    y_r = mt.FusedMoE(xr_, w1r, w2r, ids_r, tw_r, activations="fp16")().float()
    out["range"][f"{wfmt} x{xscale:g} w{wscale:g}"] = {
        "nonfinite": int((~torch.isfinite(y_r)).sum()), "err": float((y_r - ref_r).abs().max() / ref_r.abs().max())}
# fp16 x with fp8 activations: the intermediate (here up to ~3e5) must not pass through fp16 (it overflowed)
torch.manual_seed(3)
w1h = mt.quantize_experts(torch.randn(4, 512, 128) * 0.05, "fp8")
w2h = mt.quantize_experts(torch.randn(4, 128, 256) * 5e-5, "fp8")
xh = ((torch.rand(6, 128) * 2 - 1) * 600).half()
ids_h, tw_h = torch.randint(0, 4, (6, 2)), torch.softmax(torch.rand(6, 2), 1)
ref_h = mt.moe_reference(xh.float(), w1h.dequantize(), w2h.dequantize(), ids_h, tw_h)
y_h = mt.FusedMoE(xh, w1h, w2h, ids_h, tw_h)().float()
out["fp16_x_w8a8"] = {"nonfinite": int((~torch.isfinite(y_h)).sum()),
                      "err": float((y_h - ref_h).abs().max() / ref_h.abs().max())}
# an EP rank with no local slot, and an empty batch: zeros, not an error
for name, ids_n in (("nowhere", torch.full((3, 2), -1)), ("empty", torch.zeros(0, 2, dtype=torch.long))):
    w1 = mt.quantize_experts(torch.randn(4, 256, 128) * 0.1, "bf16")
    w2 = mt.quantize_experts(torch.randn(4, 128, 128) * 0.1, "bf16")
    y = mt.FusedMoE(torch.rand(ids_n.shape[0], 128).bfloat16(), w1, w2, ids_n, torch.rand(ids_n.shape))()
    out[name] = {"shape": list(y.shape), "zero": bool((y == 0).all())}
xr = (torch.rand(5, 300) * 2 - 1).bfloat16()
q = torch.empty(1, 5, 300, dtype=torch.float8_e4m3fn)
sc = torch.empty(5)
mt.FusedMoE._quant_rows(xr, q, sc)
s_ref = xr.float().abs().amax(1) / 448
q_ref = (xr.float() / s_ref[:, None]).to(torch.float8_e4m3fn)
q2 = torch.full((2, 5, 300), 1.0, dtype=torch.float8_e4m3fn)  # nvfp4 w4a8: two planes (even / odd 16-blocks)
mt.FusedMoE._quant_rows(xr, q2, torch.empty(5))
odd = (torch.arange(300) // 16) % 2 == 1
out["quant_rows"] = {"scale_err": float((sc - s_ref).abs().max() / s_ref.max()),
                     "mismatches": int((q[0].float() != q_ref.float()).sum()),
                     "plane_mismatches": int((q2[0].float() != torch.where(odd, 0.0, q_ref.float())).sum()
                                             + (q2[1].float() != torch.where(odd, q_ref.float(), 0.0)).sum())}
# the MMA layout's activations: the same e4m3 values stored in mma_logical_order's K order (320 columns: 5 chunks)
xp = (torch.randn(3, 320) * 2).bfloat16()
qp, qn = torch.empty(1, 3, 320, dtype=torch.float8_e4m3fn), torch.empty(1, 3, 320, dtype=torch.float8_e4m3fn)
mt.FusedMoE._quant_rows(xp, qp, torch.empty(3), perm=True)
mt.FusedMoE._quant_rows(xp, qn, torch.empty(3))
order = torch.tensor(mt.mma_logical_order(320))
out["quant_rows_perm"] = {"mismatches": int((qp[0].float() != qn[0].float()[:, order]).sum()),
                          "moved": int((qp[0].float() != qn[0].float()).sum())}
# a skewed routing (counts [40, 2, 1, 1]: expert 0 has more than 2 x the mean 11, and more than the other experts'
# 16-token block): expert 0 in a launch of its own (in line here), the sum of both launches against the reference
ids_s = torch.tensor([[0, -1]] * 36 + [[0, 1], [0, 1], [0, 2], [0, 3]])
tw_s = torch.rand(ids_s.shape)
xs_s = (torch.rand(ids_s.shape[0], 128) * 2 - 1).bfloat16()
out["split"] = {}
for wfmt, layout in (("bf16", None), ("fp8", None), ("nvfp4", "mma")):
    torch.manual_seed(5)
    w1s = mt.quantize_experts(torch.randn(4, 256, 128) * 0.1, wfmt)
    w2s = mt.quantize_experts(torch.randn(4, 128, 128) * 0.1, wfmt)
    ref_s = mt.moe_reference(xs_s, w1s.dequantize(), w2s.dequantize(), ids_s, tw_s)
    for split in (True, False):
        f = mt.FusedMoE(xs_s, w1s, w2s, ids_s, tw_s, fp4_layout=layout, split_busy=split)
        y = f().float()
        out["split"][f"{wfmt}/{split}"] = {
            "err": float((y - ref_s).abs().max() / ref_s.abs().max()),
            "busy": None if f.busy is None else f.busy.experts,
            "counts": f.align.counts.tolist(), "busy_counts": None if f.busy is None else f.busy.align.counts.tolist(),
            "block_m": [f.cfg1.block_m] + ([] if f.busy is None else [f.busy.cfg1.block_m]),
            "note": f.config_note}
out["interpreting"] = mt.interpreting()
print("RESULT " + json.dumps(out))
"""


@pytest.fixture(scope="module")
def interpreted():
    """Results of every (routing, format) case run by the kernels under Triton's CPU interpreter."""
    import json
    import subprocess
    import sys
    from pathlib import Path

    pytest.importorskip("triton")
    import truepeak

    src = str(Path(truepeak.__file__).resolve().parents[1])
    env = {**os.environ, "TRITON_INTERPRET": "1", "PYTHONPATH": src + os.pathsep + os.environ.get("PYTHONPATH", "")}
    proc = subprocess.run([sys.executable, "-c", _CHILD, json.dumps(ROUTINGS)], env=env, capture_output=True,
                          text=True, timeout=300)
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT ")]
    assert proc.returncode == 0 and lines, proc.stderr[-3000:]
    return json.loads(lines[-1][len("RESULT "):])


@pytest.mark.parametrize("wfmt", ["bf16", "fp8/fp8", "fp8/fp16", "fp8_block/fp8", "fp8_block/fp16", "nvfp4/fp16",
                                  "mxfp4/fp16", "nvfp4/fp16u", "mxfp4/fp16u", "nvfp4/fp8", "mxfp4/fp8",
                                  "nvfp4/mma16", "mxfp4/mma16", "nvfp4/mma8", "mxfp4/mma8"])
@pytest.mark.parametrize("routing", list(ROUTINGS))
def test_fused_moe_matches_reference_in_interpreter(interpreted, wfmt, routing):
    r = interpreted[f"{routing}/{wfmt}"]
    T = len(ROUTINGS[routing])
    assert r["shape"] == [T, 128] and r["dtype"] == "torch.bfloat16"
    # w8a8 (and w4a8) also rounds the activations (x and the intermediate) to e4m3, 3 mantissa bits: at H = I = 128 a float32
    # emulation of exactly that rounding is itself 4-7 % from the float32 reference, so a looser bound
    e4m3 = wfmt.endswith(("/fp8", "/mma8"))
    tol = 1e-1 if e4m3 else 2e-2
    assert r["err"] < tol, f"{wfmt} {routing}: relative error {r['err']:.3g}"
    assert r["activations"] == ("bf16" if wfmt == "bf16" else "fp8 e4m3, per-row scale" if e4m3
                                else "fp16, per-row power-of-two scale")
    # expert 2 receives no token in "mixed" (its blocks are skipped); in "all_in_one" it receives all 18
    assert r["counts"] == ([2, 5, 0, 2] if routing == "mixed" else [0, 0, 18, 0])
    # fp4 reads the tiled layout except with untiled_w4a16=True (fp16u); other formats have no layout
    fp4 = wfmt.startswith(("nvfp4", "mxfp4"))
    assert r["tiled"] == (fp4 and not wfmt.endswith("fp16u"))
    assert r["mma"] == ("/mma" in wfmt)
    # "all_in_one" ran both kernels persistent: 3 programs each (2 blocks x 2 or 4 weight tiles = 4 or 8 tiles)
    assert r["persistent"] == [routing == "all_in_one"] * 2
    assert r["programs"] == ([3, 3] if routing == "all_in_one" else [])
    assert r["group_m"] == ([0, 0] if routing == "all_in_one" else [2, 2])


@pytest.mark.parametrize("wfmt", ["bf16", "fp8", "nvfp4"])
def test_busy_experts_run_in_a_launch_of_their_own_in_interpreter(interpreted, wfmt):
    split, one = interpreted["split"][f"{wfmt}/True"], interpreted["split"][f"{wfmt}/False"]
    tol = {"bf16": 0.02, "fp8": 0.08, "nvfp4": 0.1}[wfmt]
    assert split["err"] < tol and one["err"] < tol
    assert split["busy"] == [True, False, False, False] and one["busy"] is None
    # the busy expert's 40 slots in its own alignment, the other experts' 2 + 1 + 1 in this one's
    assert split["busy_counts"] == [40, 0, 0, 0] and split["counts"] == [0, 2, 1, 1]
    assert one["counts"] == [40, 2, 1, 1]
    assert split["block_m"][0] == 16 and split["block_m"][1] > 16
    # no table on the CPU: the reason once, then each launch's token block
    assert split["note"].endswith(f": choose_config's rules (16-token blocks); 1 busy expert (more than 2 x the mean "
                                  f"11.0 tokens) in a launch of their own ({split['block_m'][1]}-token blocks): "
                                  "choose_config's rules")
    assert split["note"].count("tuned table") == 1


def test_the_busy_experts_note_leaves_out_the_table_it_shares():
    from truepeak.kernels.moe_triton.fused import _without_shared_table as short

    light = "tuned table E=256,N=2048,H=7168,device_name=NVIDIA_H200.json, bf16, bf16 activations, bucket 8"
    assert short("tuned table E=256,N=2048,H=7168,device_name=NVIDIA_H200.json has no entry for bf16, bf16 "
                 "activations, bucket 256: choose_config's rules", light) == \
        "the same table has no entry for bf16, bf16 activations, bucket 256: choose_config's rules"
    assert short(light.replace("bucket 8", "bucket 64"), light) == "the same table, bf16, bf16 activations, bucket 64"
    # the same reason for both: what follows it; another table or reason: the note as it is
    why = "tuned table X.json is for NVIDIA H100 80GB HBM3, not NVIDIA H200: choose_config's rules"
    assert short(why, why) == "choose_config's rules"
    assert short("no tuned table for this GPU: choose_config's rules", light) == \
        "no tuned table for this GPU: choose_config's rules"


@pytest.mark.parametrize("wfmt", ["nvfp4", "mxfp4"])
def test_fp4_small_weights_keep_precision_in_interpreter(interpreted, wfmt):
    # both w4a16 kernels apply the per-expert scale after the K loop (the untiled one was 8.4e-3 when it did not)
    assert interpreted["small/" + wfmt] < 6.5e-3
    assert interpreted["small_tiled/" + wfmt] < 6.5e-3
    assert interpreted["small_mma/" + wfmt] < 6.5e-3
    assert interpreted["small_mma128/" + wfmt] < 6.5e-3


def test_mxfp4_w4a8_with_k_not_a_multiple_of_128_in_interpreter(interpreted):
    r = interpreted["mxfp4_k192"]
    assert r["block_k"] == [64, 64] and r["err"] < 1e-1, r


def test_mxfp4_nan_scale_stays_nan_in_w4a8_in_interpreter(interpreted):
    # expert 1's first block of gate row 0 has scale 255 (NaN): every token routed to expert 1 comes out NaN through
    # its intermediate's row scale (activations given as "FP8": case-insensitive); nothing becomes inf
    r = interpreted["nan_scale"]
    assert r["nan"] > 0 and r["inf"] == 0, r


def test_fp4_default_activations_in_interpreter(interpreted):
    assert interpreted["default_fp4"] == "fp8 e4m3, per-row scale"  # mxfp4: w4a8
    nv = interpreted["default_nvfp4"]
    assert nv["activations"] == "fp16, per-row power-of-two scale" and nv["tiled"] and nv["mma"]


def test_no_local_slot_and_empty_batch_give_zeros_in_interpreter(interpreted):
    assert interpreted["nowhere"] == {"shape": [3, 128], "zero": True}
    assert interpreted["empty"] == {"shape": [0, 128], "zero": True}


def test_quant_rows_matches_torch_e4m3_in_interpreter(interpreted):
    # per-row scale max|x| / 448 and round-to-nearest e4m3 values, as torch's .to(float8_e4m3fn): 300 columns
    # (not a power of two: the masked tail of the 512-wide block)
    r = interpreted["quant_rows"]
    assert r["scale_err"] < 1e-6 and r["mismatches"] == 0
    # the MMA layout's K order (mma_logical_order): position L holds element order[L]; most elements move
    p = interpreted["quant_rows_perm"]
    assert p["mismatches"] == 0 and p["moved"] > 800, p
    # the nvfp4 w4a8 planes: plane 0 = the same values with columns 16-31, 48-63, ... zero, plane 1 the others zero
    assert r["plane_mismatches"] == 0


def test_fp16_activations_are_scaled_per_row_in_interpreter(interpreted):
    # x of +-300, weights x 1e3 or x 1e-5, x of 1e-6: finite and within 2e-2 of the float32 reference (before the
    # per-row scaling, x of +-150 already turned every nvfp4 w4a16 output into NaN/inf, weights x 1e-5 into zeros)
    for case, r in interpreted["range"].items():
        assert r["nonfinite"] == 0 and r["err"] < 2e-2, (case, r)
    # and fp8 activations with fp16 x (the intermediate, ~3e5 here, is kept in float32 until its per-row scaling)
    r = interpreted["fp16_x_w8a8"]
    assert r["nonfinite"] == 0 and r["err"] < 1e-1, r


def test_dropped_block_scales_compute_without_them_and_say_so_in_interpreter(interpreted):
    # the experiment reaches the kernel (ACT8 = 1 | 2) and computes what it says: the flat-scale reference to w4a8's
    # tolerance, while against the true weights the output is wrong (each weight comes out 2^(s - max_e - 9) of its
    # value, at most 2^-9, so the output is near zero against the true one)
    r = interpreted["dropped_scales"]
    assert r["act8"] == 3 and r["output_valid"] is False
    assert r["err_flat"] < 1e-1 and r["err_true"] > 0.99, r


def test_fused_moe_activations_argument():
    w = mt.quantize_experts(torch.zeros(2, 64, 32), "bf16")
    w2 = mt.quantize_experts(torch.zeros(2, 32, 32), "bf16")
    with pytest.raises(TruepeakError, match="activations='fp8' is not available for bf16 weights"):
        mt.FusedMoE(torch.zeros(3, 32).bfloat16(), w, w2, torch.zeros(3, 1, dtype=torch.long), torch.ones(3, 1),
                    activations="fp8")


def test_fused_moe_refuses_configurations_out_of_range():
    w = mt.quantize_experts(torch.zeros(2, 128, 64), "bf16")
    w2 = mt.quantize_experts(torch.zeros(2, 64, 64), "bf16")
    for tune in ({"block_n": 0}, {"block_k": 0}, {"num_stages": 0}, {"block_m": 8}, {"num_warps": 3}):
        with pytest.raises(TruepeakError, match="out of range: block_m, block_n and block_k must be >= 16"):
            mt.FusedMoE(torch.zeros(3, 64).bfloat16(), w, w2, torch.zeros(3, 1, dtype=torch.long), torch.ones(3, 1),
                        tune=tune)


def test_fused_moe_tune_bad_values():
    w1 = mt.quantize_experts(torch.zeros(2, 64, 32), "bf16")
    w2 = mt.quantize_experts(torch.zeros(2, 32, 32), "bf16")
    x, ids, tw = torch.zeros(3, 32).bfloat16(), torch.zeros(3, 1, dtype=torch.long), torch.ones(3, 1)
    with pytest.raises(TruepeakError, match="unknown KernelConfig field.s. blockk in tune; expected block_m"):
        mt.FusedMoE(x, w1, w2, ids, tw, tune={"blockk": 64})
    with pytest.raises(TruepeakError, match="tune must be a dict of KernelConfig fields"):
        mt.FusedMoE(x, w1, w2, ids, tw, tune="maxnreg")
    for bad in (1, "yes", None):  # checked before anything needs a GPU
        with pytest.raises(TruepeakError, match=f"split_busy must be True or False, got {bad!r}"):
            mt.FusedMoE(x, w1, w2, ids, tw, split_busy=bad)


def test_fused_moe_refuses_fp8_block_steps_spanning_two_scale_blocks():
    # 128 x 128 block scales change every 128 elements of K: a 256-element step would apply one block's scale to two
    w = mt.quantize_experts(torch.zeros(2, 512, 256), "fp8_block")
    w2 = mt.quantize_experts(torch.zeros(2, 256, 256), "fp8_block")
    with pytest.raises(UnsupportedError, match="block_k dividing 128"):
        mt.FusedMoE(torch.zeros(3, 256).bfloat16(), w, w2, torch.zeros(3, 1, dtype=torch.long), torch.ones(3, 1),
                    config=mt.KernelConfig(16, 64, 256))


@pytest.mark.skipif(os.environ.get("TRITON_INTERPRET") == "1", reason="the interpreter runs CPU tensors")
def test_fused_moe_refuses_cpu_tensors_outside_the_interpreter():
    w1 = mt.quantize_experts(torch.zeros(4, 256, 128), "bf16")
    w2 = mt.quantize_experts(torch.zeros(4, 128, 128), "bf16")
    with pytest.raises(UnsupportedError, match="run on a CUDA GPU .x is on cpu.; on a CPU set TRITON_INTERPRET=1"):
        mt.FusedMoE(torch.rand(3, 128).bfloat16(), w1, w2, torch.tensor([[0, 1], [1, 3], [2, -1]]), torch.rand(3, 2))


def test_fused_moe_shape_errors():
    w1 = mt.quantize_experts(torch.zeros(2, 64, 32), "bf16")
    w2 = mt.quantize_experts(torch.zeros(2, 32, 16), "bf16")
    with pytest.raises(TruepeakError, match="do not fit"):
        mt.FusedMoE(torch.zeros(3, 32).bfloat16(), w1, w2, torch.zeros(3, 1, dtype=torch.long), torch.ones(3, 1))


def test_timing_experiments_are_refused_unless_asked_for_explicitly():
    m1 = mt.quantize_experts(torch.randn(2, 128, 64), "mxfp4")
    m2 = mt.quantize_experts(torch.randn(2, 64, 64), "mxfp4")
    b1 = mt.quantize_experts(torch.zeros(2, 128, 64), "bf16")
    b2 = mt.quantize_experts(torch.zeros(2, 64, 64), "bf16")
    x, ids, tw = torch.rand(3, 64).bfloat16(), torch.zeros(3, 1, dtype=torch.long), torch.ones(3, 1)
    with pytest.raises(TruepeakError, match="drop_block_scales=True leaves the block scales out .* pass "
                                            "output_unchecked=True as well"):
        mt.FusedMoE(x, m1, m2, ids, tw, drop_block_scales=True)
    with pytest.raises(TruepeakError, match="drop_block_scales must be True or False, got 1"):
        mt.FusedMoE(x, m1, m2, ids, tw, drop_block_scales=1, output_unchecked=True)
    with pytest.raises(TruepeakError, match="untiled_w4a16 must be True or False, got 'yes'"):
        mt.FusedMoE(x, m1, m2, ids, tw, untiled_w4a16="yes")
    with pytest.raises(TypeError):  # keyword only: no positional argument can switch an experiment on
        mt.FusedMoE(x, m1, m2, ids, tw, None, None, None, None, "fp8", True)
    with pytest.raises(TruepeakError, match="drop_block_scales=True applies to fp4 weights with activations='fp8' "
                                            r"\(w4a8\) only, got mxfp4 weights with activations 'fp16'"):
        mt.FusedMoE(x, m1, m2, ids, tw, activations="fp16", drop_block_scales=True, output_unchecked=True)
    with pytest.raises(TruepeakError, match="drop_block_scales=True applies to fp4 .*, got bf16 weights"):
        mt.FusedMoE(x, b1, b2, ids, tw, drop_block_scales=True, output_unchecked=True)
    with pytest.raises(TruepeakError, match="untiled_w4a16=True applies to fp4 weights with activations='fp16' only, "
                                            "got mxfp4 weights with activations 'fp8'"):
        mt.FusedMoE(x, m1, m2, ids, tw, untiled_w4a16=True)
    with pytest.raises(TruepeakError, match="untiled_w4a16=True applies .*, got bf16 weights with activations None"):
        mt.FusedMoE(x, b1, b2, ids, tw, untiled_w4a16=True)


@pytest.mark.gpu
@pytest.mark.parametrize("wfmt,acts,x_dtype,untiled,layout", [
    ("fp8", "fp16", "bfloat16", False, None), ("fp8_block", "fp16", "bfloat16", False, None),
    ("nvfp4", "fp16", "bfloat16", True, None), ("mxfp4", "fp16", "bfloat16", True, None),
    ("mxfp4", "fp16", "bfloat16", False, "tiles"), ("nvfp4", "fp8", "bfloat16", False, "tiles"),
    ("fp8", "fp8", "float16", False, None), ("nvfp4", "fp16", "float16", False, "tiles"),
    ("nvfp4", "fp16", "bfloat16", False, "mma"), ("nvfp4", "fp8", "bfloat16", False, "mma"),
    ("mxfp4", "fp16", "bfloat16", False, "mma"), ("mxfp4", "fp8", "bfloat16", False, "mma"),
    ("nvfp4", "fp16", "float16", False, "mma")])
def test_gpu_activation_variants_match_reference(wfmt, acts, x_dtype, untiled, layout):
    """The variants the sweeps do not run by default, on the device: w8a16 (fp8 weights, fp16 activations scaled per
    row), the untiled w4a16 (``untiled_w4a16=True``), fp4 with the other activations, fp16 hidden states (with
    fp8 activations the intermediate stays float32), with x of +-200 (fp16 activations overflowed before the per-row
    scaling), random routing with empty experts and one expert holding every token."""
    g = torch.Generator(device="cuda").manual_seed(0)
    E, H, I = 8, 1024, 512
    w1 = mt.quantize_experts(torch.randn(E, 2 * I, H, device="cuda", generator=g) * 0.05, wfmt)
    # fp16 x: its output must fit fp16 too (with w2 x 0.05 the reference reaches 1.2e5), while the intermediate still
    # reaches ~1e5 (above fp16's 65,504: it must stay float32)
    w2s = 0.05 if x_dtype == "bfloat16" else 5e-4
    w2 = mt.quantize_experts(torch.randn(E, H, I, device="cuda", generator=g) * w2s, wfmt)
    import numpy as np

    for ids in (torch.randint(0, E, (24, 2), device="cuda", generator=g), torch.full((40, 2), 5, device="cuda")):
        tw = torch.rand(ids.shape, device="cuda", generator=g)
        x = ((torch.rand(ids.shape[0], H, device="cuda", generator=g) * 2 - 1) * 200).to(getattr(torch, x_dtype))
        ref = mt.moe_reference(x, w1.dequantize(), w2.dequantize(), ids, tw)
        f = mt.FusedMoE(x, w1, w2, ids, tw, activations=acts, tune={"num_stages": np.int64(2)}, untiled_w4a16=untiled,
                        fp4_layout=layout)
        assert f.tiled == (wfmt in ("nvfp4", "mxfp4") and not untiled) and f.mma == (layout == "mma")
        y = f().float()
        err = float((y - ref).abs().max() / ref.abs().max())
        assert torch.isfinite(y).all() and err < (1e-1 if acts == "fp8" else 8e-2), (wfmt, acts, x_dtype, err)


@pytest.mark.gpu
@pytest.mark.parametrize("wfmt,acts,layout", [("bf16", None, None), ("fp8", "fp8", None), ("fp8", "fp16", None),
                                               ("fp8_block", "fp8", None), ("mxfp4", "fp8", "tiles"),
                                               ("nvfp4", "fp16", "mma")])
@pytest.mark.parametrize("tune", [{"persistent": True}, {"group_m": 1}, {"group_m": 4, "persistent": True}])
def test_gpu_persistent_launch_and_tile_orders_match_reference(wfmt, acts, layout, tune):
    """The persistent launch (``persistent=True``: as many programs as the device holds, each looping over tiles)
    and the grouped tile orders (``group_m``), on the device: the same output as the reference with 64 experts,
    random routing (many more tiles than programs) and one expert holding every token (few tiles: programs with
    nothing to do)."""
    g = torch.Generator(device="cuda").manual_seed(1)
    E, H, I = 64, 1024, 512
    w1 = mt.quantize_experts(torch.randn(E, 2 * I, H, device="cuda", generator=g) * 0.05, wfmt)
    w2 = mt.quantize_experts(torch.randn(E, H, I, device="cuda", generator=g) * 0.05, wfmt)
    for ids in (torch.randint(0, E, (512, 4), device="cuda", generator=g), torch.full((40, 2), 5, device="cuda")):
        tw = torch.rand(ids.shape, device="cuda", generator=g)
        x = (torch.rand(ids.shape[0], H, device="cuda", generator=g) * 2 - 1).bfloat16()
        ref = mt.moe_reference(x, w1.dequantize(), w2.dequantize(), ids, tw)
        f = mt.FusedMoE(x, w1, w2, ids, tw, activations=acts, fp4_layout=layout, tune=tune)
        y = f().float()
        persist = tune.get("persistent", False)
        assert f.cfg1.persistent == f.cfg2.persistent == persist and len(f._grid) == 2 * persist
        # the tile order given, else the rules' (grouped near 32 tokens per expert: the random routing here)
        t = mt.mean_tokens_per_expert(ids, E)
        rules = [mt.choose_config(t, wfmt, gated, None, kd, acts == "fp8", False, layout == "mma").group_m
                 for gated, kd in ((True, H), (False, I))]
        assert [f.cfg1.group_m, f.cfg2.group_m] == ([tune["group_m"]] * 2 if "group_m" in tune else rules)
        n_sm = torch.cuda.get_device_properties(0).multi_processor_count
        assert all(n % n_sm == 0 for n in f._grid.values()), f._grid  # whole programs per SM
        err = float((y - ref).abs().max() / ref.abs().max())
        tol = 2e-2 if wfmt == "bf16" else 1e-1 if acts == "fp8" else 8e-2
        assert torch.isfinite(y).all() and err < tol, (wfmt, acts, err)


def test_interpreting_follows_triton(interpreted, monkeypatch):
    # the child ran with TRITON_INTERPRET=1: Triton interprets there, and the launcher agrees
    assert interpreted["interpreting"] is True
    import sys

    import triton

    monkeypatch.setattr(triton.knobs.runtime, "interpret", False)
    assert mt.interpreting() is False
    monkeypatch.setattr(triton.knobs.runtime, "interpret", True)
    assert mt.interpreting() is True
    monkeypatch.setitem(sys.modules, "triton", None)  # not installed: no interpreter either
    assert mt.interpreting() is False


@pytest.mark.gpu
@pytest.mark.parametrize("wfmt,acts,layout", [("bf16", None, None), ("fp8", "fp8", None), ("fp8", "fp16", None),
                                               ("nvfp4", "fp16", "mma"), ("mxfp4", "fp8", "tiles")])
def test_gpu_busy_experts_on_a_second_stream_match_reference(wfmt, acts, layout):
    """A skewed routing on the device: the busy experts' launch on a second CUDA stream beside the others', eagerly
    and replayed from a CUDA graph (the stream forks and joins inside the capture), against the reference and
    against one launch for all (``split_busy=False``)."""
    g = torch.Generator(device="cuda").manual_seed(2)
    E, H, I, T = 16, 1024, 512, 256
    w1 = mt.quantize_experts(torch.randn(E, 2 * I, H, device="cuda", generator=g) * 0.05, wfmt)
    w2 = mt.quantize_experts(torch.randn(E, H, I, device="cuda", generator=g) * 0.05, wfmt)
    # every token's first slot to expert 3 (256 tokens), its second spread over the others (about 17 each)
    other = torch.randint(0, E - 1, (T,), device="cuda", generator=g)
    ids = torch.stack([torch.full((T,), 3, device="cuda"), other + (other >= 3).long()], 1)
    tw = torch.rand(ids.shape, device="cuda", generator=g)
    x = (torch.rand(T, H, device="cuda", generator=g) * 2 - 1).bfloat16()
    ref = mt.moe_reference(x, w1.dequantize(), w2.dequantize(), ids, tw)
    f = mt.FusedMoE(x, w1, w2, ids, tw, activations=acts, fp4_layout=layout)
    one = mt.FusedMoE(x, w1, w2, ids, tw, activations=acts, fp4_layout=layout, split_busy=False)
    assert f.busy is not None and f.busy.experts == [e == 3 for e in range(E)] and one.busy is None
    assert f.busy.align.counts.tolist()[3] == T and f.align.counts.tolist()[3] == 0
    y_one = one().float().clone()
    y = f().float().clone()
    tol = 1e-1 if acts == "fp8" else 8e-2
    err = float((y - ref).abs().max() / ref.abs().max())
    assert torch.isfinite(y).all() and err < tol, (wfmt, acts, err)
    assert float((y - y_one).abs().max() / ref.abs().max()) < tol
    graph = torch.cuda.CUDAGraph()
    f.out.zero_()
    with torch.cuda.graph(graph):
        f()
    graph.replay()
    torch.cuda.synchronize()
    assert torch.equal(f.out.float(), y)
