"""truepeak's fused-MoE Triton kernels on the CPU under TRITON_INTERPRET=1 (small shapes), and their routing
metadata. Every format against the float32 reference of the dequantised weights, including experts with zero tokens,
one expert holding every token, and slots routed to another EP rank (id -1)."""

from __future__ import annotations

import os

import pytest

torch = pytest.importorskip("torch")

from truepeak.errors import TruepeakError, UnknownNameError, UnsupportedError  # noqa: E402
from truepeak.kernels import moe_triton as mt  # noqa: E402


def test_align_routing_hand_example():
    # docstring example: ids [[0, 2], [2, 1]], E = 3, block_m = 2
    a = mt.align_routing(torch.tensor([[0, 2], [2, 1]]), 3, 2)
    assert a.counts.tolist() == [1, 1, 2]
    assert a.sorted_slots.tolist() == [0, 4, 3, 4, 1, 2]
    assert a.block_expert.tolist() == [0, 1, 2]
    assert a.num_blocks == 3 and a.num_slots == 4


def test_align_routing_pads_and_drops_foreign_slots():
    # expert 1 gets 5 slots -> 2 blocks of 4 (3 padding rows); expert 0 none; -1 and 7 (not local) dropped
    ids = torch.tensor([[1, -1], [1, 7], [1, 2], [1, 1]])
    a = mt.align_routing(ids, 3, 4)
    assert a.counts.tolist() == [0, 5, 1]
    assert a.num_blocks == 3 and a.block_expert.tolist() == [1, 1, 2]
    assert a.sorted_slots.tolist() == [0, 2, 4, 6, 7, 8, 8, 8, 5, 8, 8, 8]


def test_align_routing_bad_input():
    with pytest.raises(TruepeakError, match=r"\[T, top_k\]"):
        mt.align_routing(torch.tensor([1, 2]), 4, 16)
    with pytest.raises(TruepeakError, match="positive"):
        mt.align_routing(torch.tensor([[1, 2]]), 4, 0)


def test_c17_config_follows_tokens_per_expert_not_batch():
    # C17: E=512, k=10, batch 512 -> 10 tokens per expert; the tile is picked from that, whatever the batch
    assert mt.choose_config(10, "bf16", True).block_m == 32
    assert mt.choose_config(1.875, "bf16", True).block_m == 16
    assert mt.choose_config(15, "bf16", True).block_m == 32   # 32-token blocks up to 20 (stop 13)
    assert mt.choose_config(25, "bf16", True).block_m == 64
    assert mt.choose_config(256, "bf16", False).block_m == 128


def test_c14_config_shrinks_stages_to_fit_shared_memory():
    # 256 tokens per expert: 128 tokens x 2 x 128 weight rows x 64 K, bf16: per stage 2*128*64*2 + 128*64*2 = 49,152 B
    big = mt.choose_config(256, "bf16", True)
    assert (big.block_m, big.block_n, big.block_k, big.num_stages) == (128, 128, 64, 3)
    assert big.smem_bytes("bf16", True) == 147_456
    assert mt.choose_config(256, "bf16", True, smem_limit=232_448).num_stages == 3   # sm_90 / sm_100 (C14)
    fitted = mt.choose_config(256, "bf16", True, smem_limit=101_376)                 # sm_120 (C14): 2 stages
    assert fitted.num_stages == 2 and fitted.smem_bytes("bf16", True) == 98_304
    with pytest.raises(UnsupportedError, match="49,152 B of shared memory per block; the device allows 40,000 B"):
        mt.choose_config(256, "bf16", True, smem_limit=40_000)


def test_smem_estimate_bounds_what_triton_allocates_on_sm90():
    """choose_config's estimate against the compiler: each kernel compiled for sm_90 on the CPU (Triton's bundled
    ptxas; no GPU needed); the estimate must not be below Triton's allocation (equal for bf16)."""
    pytest.importorskip("triton")
    from truepeak.kernels.moe_inspect import compile_gate_up

    def shared(cfg, wfmt, w8a8=False):
        return compile_gate_up(cfg, wfmt, w8a8).metadata.shared

    for tpe, wfmt, w8a8 in ((1, "bf16", False), (16, "bf16", False), (1, "fp8", False), (1, "fp8", True),
                            (64, "fp8", True), (1, "nvfp4", False), (16, "mxfp4", False), (1, "nvfp4", True),
                            (8, "mxfp4", True), (32, "nvfp4", True)):
        cfg = mt.choose_config(tpe, wfmt, True, smem_limit=232_448, k_dim=7168, w8a8=w8a8)
        est, got = cfg.smem_bytes(wfmt, True, w8a8), shared(cfg, wfmt, w8a8)
        assert got <= est <= 232_448, (tpe, wfmt, w8a8, est, got)
        if wfmt == "bf16" or (w8a8 and wfmt.startswith("fp8")):  # w4a8's scale words stay in registers
            assert est == got, (tpe, wfmt, w8a8, est, got)


def test_w4a8_config_follows_tokens_per_expert_and_needs_whole_steps():
    # w4a8 (fp4 weights, fp8 activations): 4 scale blocks per K step, 64 elements for nvfp4 (16-element blocks) and
    # 128 for mxfp4 (32); the token block follows tokens per expert (C17), 16 rows up to 10
    c = {t: mt.choose_config(t, "mxfp4", True, k_dim=7168, w8a8=True) for t in (1, 8, 16, 32, 256)}
    assert [c[t].block_m for t in (1, 8, 16, 32, 256)] == [16, 16, 32, 64, 128]
    assert {cc.block_k for cc in c.values()} == {128}
    assert mt.choose_config(8, "nvfp4", True, k_dim=7168, w8a8=True).block_k == 64
    # gpt-oss: K = H = I = 2880 = 22.5 x 128 = 45 x 64: mxfp4 takes 64-element steps (2 scale blocks)
    assert mt.choose_config(1, "mxfp4", True, k_dim=2880, w8a8=True).block_k == 64
    with pytest.raises(UnsupportedError, match="K=96 is not a multiple of 64: the w4a8 nvfp4"):
        mt.choose_config(1, "nvfp4", True, k_dim=96, w8a8=True)
    with pytest.raises(UnsupportedError, match="K=160 is not a multiple of 64: the w4a8 mxfp4"):
        mt.choose_config(1, "mxfp4", True, k_dim=160, w8a8=True)


def test_w4a8_layout_hand_example():
    # one expert, N = 64 rows, K = 128 (two 64-element chunks): element k = 70 of row 5 is 1.5 (code 0b0011), the
    # rest 0. Standard order: byte 35 of row 5, low nibble. Kernel order: chunk 1, position 6 (< 32, so the low
    # value of byte 6); e4m3 bit layout: L.e0 -> bit 3, L.m -> bit 2: 0b00001100. Tile (row group 0, chunk 1) starts
    # at byte 2048 of the expert; row 5 at +5 * 32, byte 6: flat offset 2214.
    std = torch.zeros(1, 64, 64, dtype=torch.uint8)
    std[0, 5, 35] = 0b0011
    t = mt.to_w4a8_layout(std)
    flat = t.flatten()
    assert int(flat[2214]) == 0b00001100 and int(flat.count_nonzero()) == 1
    assert torch.equal(mt.from_w4a8_layout(t), std)
    w = mt.ExpertWeights("mxfp4", std, torch.full((1, 64, 4), 127, dtype=torch.uint8))
    k = w.in_kernel_order(w4a8=True)
    assert k.w4a8_layout and k.nibble_chunk == 64 and torch.equal(k.data, t)
    assert torch.equal(k.dequantize(), w.dequantize())
    # scale words (nvfp4: 16-element blocks, a 64-element step = 4 blocks): row n's 4 scale bytes of step s in one
    # little-endian int32, step-major [E, K/64, N]. Row 0's e4m3 scales 1, 2, 0.5, 4 | 1.5, 3, 0.75, 6 (bytes 0x38,
    # 0x40, 0x30, 0x48 | 0x3C, 0x44, 0x34, 0x4C) -> words 0x48304038 and 0x4C34443C
    sc = torch.full((1, 64, 8), 0x38, dtype=torch.uint8)
    sc[0, 0] = torch.tensor([0x38, 0x40, 0x30, 0x48, 0x3C, 0x44, 0x34, 0x4C], dtype=torch.uint8)
    nv = mt.ExpertWeights("nvfp4", std, sc.view(torch.float8_e4m3fn), torch.ones(1))
    assert sc.view(torch.float8_e4m3fn)[0, 0].float().tolist() == [1, 2, 0.5, 4, 1.5, 3, 0.75, 6]
    ws = nv.in_kernel_order(w4a8=True).w4a8_scale_words()
    assert ws.shape == (1, 2, 64) and ws.dtype == torch.int32
    assert [int(ws[0, 0, 0]), int(ws[0, 1, 0])] == [0x48304038, 0x4C34443C]
    assert int(ws[0, 0, 1]) == 0x38383838
    # mxfp4 in 64-element steps (K not a multiple of 128): 2 scale bytes per word, the high two zero
    mx = mt.ExpertWeights("mxfp4", torch.zeros(1, 64, 96, dtype=torch.uint8),
                          torch.tensor([[[120, 121, 122, 123, 124, 125]] * 64], dtype=torch.uint8))
    w64 = mx.w4a8_scale_words(64)
    assert w64.shape == (1, 3, 64) and [int(v) for v in w64[0, :, 0]] == [0x7978, 0x7B7A, 0x7D7C]
    with pytest.raises(TruepeakError, match="no w4a8 scale words for mxfp4 with K=192 in steps of 128"):
        mx.w4a8_scale_words(128)
    with pytest.raises(TruepeakError, match="the w4a8 layout needs N and K multiples of 64, got N=32"):
        mt.to_w4a8_layout(torch.zeros(1, 32, 64, dtype=torch.uint8))
    with pytest.raises(TruepeakError, match="the w4a8 layout needs N and K multiples of 64, got N=64, K=96"):
        mt.from_w4a8_layout(torch.zeros(1, 64, 48, dtype=torch.uint8))
    with pytest.raises(TruepeakError, match="must be uint8 bytes .two e2m1 values per byte., got torch.int8"):
        mt.to_w4a8_layout(torch.zeros(1, 64, 32, dtype=torch.int8))
    with pytest.raises(TruepeakError, match=r"must be \[E, N, K/2\] bytes, got shape \[64, 32\]"):
        mt.from_w4a8_layout(torch.zeros(64, 32, dtype=torch.uint8))
    with pytest.raises(TruepeakError, match="the w4a8 layout has 64-element nibble chunks, not 128"):
        w.in_kernel_order(128, w4a8=True)
    with pytest.raises(UnknownNameError, match="the w4a8 kernel takes nvfp4 or mxfp4 weights, not 'bf16'"):
        mt.w4a8_block_k("bf16")
    # the scale-word cache belongs to one scale tensor: a replaced copy computes its own
    import dataclasses

    nv2 = dataclasses.replace(nv, scale=torch.full_like(sc, 0x40).view(torch.float8_e4m3fn))
    k2 = nv2.in_kernel_order(w4a8=True)
    assert int(k2.w4a8_scale_words()[0, 0, 0]) == 0x40404040
    # ... and scales loaded in place (the tensor's version counter changes) are repacked again, into a copy
    k2.scale.view(torch.uint8).fill_(0x30)
    assert int(k2.w4a8_scale_words()[0, 0, 0]) == 0x30303030
    before = k2.w4a8_scale_words()
    k2.scale.view(torch.uint8)[0, 0, 0] = 0x38
    assert int(before[0, 0, 0]) == 0x30303030 and int(k2.w4a8_scale_words()[0, 0, 0]) == 0x30303038


def test_fused_moe_refuses_configurations_out_of_range():
    w = mt.quantize_experts(torch.zeros(2, 128, 64), "bf16")
    w2 = mt.quantize_experts(torch.zeros(2, 64, 64), "bf16")
    for tune in ({"block_n": 0}, {"block_k": 0}, {"num_stages": 0}, {"block_m": 8}, {"num_warps": 3}):
        with pytest.raises(TruepeakError, match="out of range: block_m, block_n and block_k must be >= 16"):
            mt.FusedMoE(torch.zeros(3, 64).bfloat16(), w, w2, torch.zeros(3, 1, dtype=torch.long), torch.ones(3, 1),
                        tune=tune)
    with pytest.raises(TruepeakError, match="k_dim .the GEMM's K. must be a positive integer, got 64.0"):
        mt.choose_config(1, "bf16", True, k_dim=64.0)
    with pytest.raises(TruepeakError, match="must be a positive integer, got True"):
        mt.choose_config(1, "bf16", True, k_dim=True)
    with pytest.raises(UnsupportedError, match="K=0 is not a multiple of 64"):
        mt.w4a8_block_k("mxfp4", 0)


def test_choose_config_block_k_divides_k_and_bad_format():
    assert mt.choose_config(8, "nvfp4", False, k_dim=2880).block_k == 64      # gpt-oss I = 2880 = 45 * 64
    with pytest.raises(UnsupportedError, match="K=720"):
        mt.choose_config(8, "nvfp4", False, k_dim=720)                         # gpt-oss TP4: 720 = 16 * 45
    with pytest.raises(UnknownNameError, match="bf16, fp8, fp8_block, nvfp4, mxfp4"):
        mt.choose_config(8, "int4", False)


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
        cfg = mt.KernelConfig(16, 64, bk, 4, 1, prefetch=(routing == "mixed"), hoist=(routing == "all_in_one"))
        acts = (["fp8", "fp16"] if wfmt.startswith("fp8") else ["fp8", "fp16", "fp16u"] if wfmt.endswith("fp4")
                else [None])
        for act in acts:
            c = cfg
            if act in ("fp8", "fp16") and wfmt.endswith("fp4"):  # the tiled kernels: 4 scale blocks per step
                c = mt.KernelConfig(16, 64, mt.w4a8_block_k(wfmt), 4, 1, prefetch=(routing == "mixed"))
            fused = mt.FusedMoE(x, w1, w2, ids, tw, config=c, activations=act and act[:4],
                                untiled_w4a16=act == "fp16u")  # fp16u: the untiled w4a16
            y = fused()
            err = float((y.float() - ref).abs().max() / ref.abs().max())
            out[routing + "/" + wfmt + ("/" + act if act else "")] = {
                "err": err, "shape": list(y.shape), "dtype": str(y.dtype), "counts": fused.align.counts.tolist(),
                "activations": fused.activations, "tiled": getattr(fused, "tiled", None)}
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
                    activations="fp16")()
    out["small_tiled/" + wfmt] = float((y.float() - ref).abs().max() / ref.abs().max())
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
# mxfp4 weights with no activations argument run w4a8 (its default since stop 12)
out["default_fp4"] = mt.FusedMoE(xs, w1, w2, ids, tw, config=mt.KernelConfig(16, 64, 128, 4, 1)).activations
# nvfp4 with no activations argument runs the tiled w4a16 (the default since stop 13)
w1v = mt.quantize_experts(torch.randn(4, 512, 256) * 0.1, "nvfp4")
w2v = mt.quantize_experts(torch.randn(4, 256, 256) * 0.1, "nvfp4")
fv = mt.FusedMoE(xs, w1v, w2v, ids, tw, config=mt.KernelConfig(16, 64, 64, 4, 1))
out["default_nvfp4"] = {"activations": fv.activations, "tiled": fv.tiled}
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
    src = str(Path(mt.__file__).resolve().parents[2])
    env = {**os.environ, "TRITON_INTERPRET": "1", "PYTHONPATH": src + os.pathsep + os.environ.get("PYTHONPATH", "")}
    proc = subprocess.run([sys.executable, "-c", _CHILD, json.dumps(ROUTINGS)], env=env, capture_output=True,
                          text=True, timeout=300)
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT ")]
    assert proc.returncode == 0 and lines, proc.stderr[-3000:]
    return json.loads(lines[-1][len("RESULT "):])


@pytest.mark.parametrize("wfmt", ["bf16", "fp8/fp8", "fp8/fp16", "fp8_block/fp8", "fp8_block/fp16", "nvfp4/fp16",
                                  "mxfp4/fp16", "nvfp4/fp16u", "mxfp4/fp16u", "nvfp4/fp8", "mxfp4/fp8"])
@pytest.mark.parametrize("routing", list(ROUTINGS))
def test_fused_moe_matches_reference_in_interpreter(interpreted, wfmt, routing):
    r = interpreted[f"{routing}/{wfmt}"]
    T = len(ROUTINGS[routing])
    assert r["shape"] == [T, 128] and r["dtype"] == "torch.bfloat16"
    # w8a8 (and w4a8) also rounds the activations (x and the intermediate) to e4m3, 3 mantissa bits: at H = I = 128 a float32
    # emulation of exactly that rounding is itself 4-7 % from the float32 reference, so a looser bound
    tol = 1e-1 if wfmt.endswith("/fp8") else 2e-2
    assert r["err"] < tol, f"{wfmt} {routing}: relative error {r['err']:.3g}"
    assert r["activations"] == ("bf16" if wfmt == "bf16" else "fp8 e4m3, per-row scale" if wfmt.endswith("/fp8")
                                else "fp16, per-row power-of-two scale")
    # expert 2 receives no token in "mixed" (its blocks are skipped); in "all_in_one" it receives all 18
    assert r["counts"] == ([2, 5, 0, 2] if routing == "mixed" else [0, 0, 18, 0])
    # fp4 reads the tiled layout except with untiled_w4a16=True (fp16u); other formats have no layout
    fp4 = wfmt.startswith(("nvfp4", "mxfp4"))
    assert r["tiled"] == (fp4 and not wfmt.endswith("fp16u"))


@pytest.mark.parametrize("wfmt", ["nvfp4", "mxfp4"])
def test_fp4_small_weights_keep_precision_in_interpreter(interpreted, wfmt):
    # both w4a16 kernels apply the per-expert scale after the K loop (the untiled one was 8.4e-3 when it did not)
    assert interpreted["small/" + wfmt] < 6.5e-3
    assert interpreted["small_tiled/" + wfmt] < 6.5e-3


def test_mxfp4_scales_rebased_per_expert_for_the_kernel():
    # e8m0 scales of expert 0 span 100..120, of expert 1 50..60: the kernel copy rebases each expert so its largest
    # scale is 136 (2^9) and keeps 2^(max - 136) as the per-expert scale; the dequantised values do not change
    scale = torch.stack([torch.randint(100, 121, (8, 4)), torch.randint(50, 61, (8, 4))]).to(torch.uint8)
    scale[0, 0, 0], scale[1, 0, 0] = 120, 60
    w = mt.ExpertWeights("mxfp4", torch.randint(0, 256, (2, 8, 64), dtype=torch.uint8), scale)
    k = w.in_kernel_order()
    assert k.scale.flatten(1).amax(1).tolist() == [136, 136]
    assert k.global_scale.tolist() == [2.0 ** (120 - 136), 2.0 ** (60 - 136)]
    assert torch.equal(k.dequantize(), w.dequantize())
    assert k.in_kernel_order() is k


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
    assert nv["activations"] == "fp16, per-row power-of-two scale" and nv["tiled"]


def test_no_local_slot_and_empty_batch_give_zeros_in_interpreter(interpreted):
    assert interpreted["nowhere"] == {"shape": [3, 128], "zero": True}
    assert interpreted["empty"] == {"shape": [0, 128], "zero": True}


def test_quant_rows_matches_torch_e4m3_in_interpreter(interpreted):
    # per-row scale max|x| / 448 and round-to-nearest e4m3 values, as torch's .to(float8_e4m3fn): 300 columns
    # (not a power of two: the masked tail of the 512-wide block)
    r = interpreted["quant_rows"]
    assert r["scale_err"] < 1e-6 and r["mismatches"] == 0
    # the nvfp4 w4a8 planes: plane 0 = the same values with columns 16-31, 48-63, ... zero, plane 1 the others zero
    assert r["plane_mismatches"] == 0


def test_fp8_block_steps_never_span_two_scale_blocks():
    # w8a8 picks 256-element K steps for per-channel fp8 at <= 4 tokens per expert; 128 x 128 block scales change
    # every 128 elements of K, so fp8_block keeps 128 (a 256 step once applied one block's scale to two blocks)
    assert mt.choose_config(1, "fp8", True, k_dim=7168, w8a8=True).block_k == 256
    assert mt.choose_config(1, "fp8_block", True, k_dim=7168, w8a8=True).block_k == 128
    assert 128 % mt.choose_config(256, "fp8_block", False, k_dim=2048, w8a8=True).block_k == 0
    w = mt.quantize_experts(torch.zeros(2, 512, 256), "fp8_block")
    w2 = mt.quantize_experts(torch.zeros(2, 256, 256), "fp8_block")
    with pytest.raises(UnsupportedError, match="block_k dividing 128"):
        mt.FusedMoE(torch.zeros(3, 256).bfloat16(), w, w2, torch.zeros(3, 1, dtype=torch.long), torch.ones(3, 1),
                    config=mt.KernelConfig(16, 64, 256))


def test_fused_moe_activations_argument():
    w = mt.quantize_experts(torch.zeros(2, 64, 32), "bf16")
    w2 = mt.quantize_experts(torch.zeros(2, 32, 32), "bf16")
    with pytest.raises(TruepeakError, match="activations='fp8' is not available for bf16 weights"):
        mt.FusedMoE(torch.zeros(3, 32).bfloat16(), w, w2, torch.zeros(3, 1, dtype=torch.long), torch.ones(3, 1),
                    activations="fp8")


def test_fused_moe_shape_errors():
    w1 = mt.quantize_experts(torch.zeros(2, 64, 32), "bf16")
    w2 = mt.quantize_experts(torch.zeros(2, 32, 16), "bf16")
    with pytest.raises(TruepeakError, match="do not fit"):
        mt.FusedMoE(torch.zeros(3, 32).bfloat16(), w1, w2, torch.zeros(3, 1, dtype=torch.long), torch.ones(3, 1))


def test_expert_weight_bytes_c13():
    # one DeepSeek-V3 down projection (7168 x 2048) in nvfp4: 8,257,536 B + its 4-byte per-expert global scale
    w = mt.ExpertWeights("nvfp4", torch.zeros(1, 7168, 1024, dtype=torch.uint8),
                         torch.zeros(1, 7168, 128, dtype=torch.float8_e4m3fn), torch.ones(1))
    assert w.shape == (1, 7168, 2048)
    assert w.nbytes_per_expert() == 8_257_536 + 4


def test_w8a8_fp8_dots_promote_to_fp32_every_128_products():
    """Hopper's fp8 MMA accumulates with limited precision; without promotion one H200 row came out 10 % off
    (docs/results/h200/moe/calls/w8a8_check.log). Triton's sm_90 default never promotes (2^30): every fp8 dot of the
    compiled w8a8 kernel must carry maxNumImpreciseAcc = 128, for 256- and 128-element K steps alike."""
    pytest.importorskip("triton")
    import re

    from truepeak.kernels.moe_inspect import compile_gate_up

    for tpe in (1, 32):  # block_k 256 and 128
        cfg = mt.choose_config(tpe, "fp8", True, smem_limit=232_448, k_dim=7168, w8a8=True)
        ttgir = compile_gate_up(cfg, "fp8", w8a8=True).asm["ttgir"]
        dots = re.findall(r"warp_group_dot .*", ttgir)
        assert len(dots) == 2 and all("maxNumImpreciseAcc = 128" in d for d in dots), (cfg, dots)


def test_kernel_nibble_order_hand_example_and_round_trip():
    # elements [1, 2, 3, 4] (codes), chunk 4: standard bytes [1 | 2<<4, 3 | 4<<4] = [0x21, 0x43];
    # kernel order: byte j = element j | element 2+j << 4 = [1 | 3<<4, 2 | 4<<4] = [0x31, 0x42]
    std = torch.tensor([[0x21, 0x43]], dtype=torch.uint8)
    assert mt.to_kernel_nibble_order(std, 4).tolist() == [[0x31, 0x42]]
    assert mt.from_kernel_nibble_order(torch.tensor([[0x31, 0x42]], dtype=torch.uint8), 4).tolist() == [[0x21, 0x43]]
    g = torch.Generator().manual_seed(0)
    b = torch.randint(0, 256, (3, 5, 128), dtype=torch.uint8, generator=g)
    for chunk in (64, 128, 256):
        assert torch.equal(mt.from_kernel_nibble_order(mt.to_kernel_nibble_order(b, chunk), chunk), b)
    with pytest.raises(TruepeakError, match="chunks of 96"):
        mt.to_kernel_nibble_order(b, 96)


def test_fp4_block_k_and_weights_in_kernel_order_dequantize_unchanged():
    # DeepSeek-V3 H 7168 = 28 * 256, I 2048 = 8 * 256; gpt-oss H = I = 2880 = 45 * 64; 720 (gpt-oss TP4) has no step
    assert (mt.fp4_block_k(7168), mt.fp4_block_k(2048), mt.fp4_block_k(2880), mt.fp4_block_k(384)) == (128, 128, 64,
                                                                                                        128)
    with pytest.raises(UnsupportedError, match="K=720"):
        mt.fp4_block_k(720)
    for wfmt in ("nvfp4", "mxfp4"):
        w = mt.quantize_experts(torch.randn(2, 8, 512), wfmt)
        k = w.in_kernel_order()
        assert k.nibble_chunk == 128 and not torch.equal(k.data, w.data)
        assert torch.equal(k.dequantize(), w.dequantize())
        # the kernel copy of mxfp4 adds its 4-byte per-expert rebasing scale
        assert k.in_kernel_order() is k
        assert k.nbytes_per_expert() == w.nbytes_per_expert() + (4 if wfmt == "mxfp4" else 0)


@pytest.mark.gpu
@pytest.mark.parametrize("variant", ["_fp4_pair_asm", "_fp4_pair_asm2"])
def test_gpu_fp4_decode_asm_is_exact_for_every_byte(variant):
    """The inline-PTX e2m1 decodes (4 and 2 bytes per invocation) against the e2m1 table for all 256 bytes: low
    nibble -> lo, high nibble -> hi, times 2^-14."""
    import triton
    import triton.language as tl

    from truepeak.kernels import quant
    from truepeak.kernels._moe_jit import _fp4_pair_asm, _fp4_pair_asm2

    @triton.jit
    def decode(b_ptr, lo_ptr, hi_ptr, N: tl.constexpr, TWO: tl.constexpr):
        offs = tl.arange(0, N)
        if TWO:
            lo, hi = _fp4_pair_asm2(tl.load(b_ptr + offs))
        else:
            lo, hi = _fp4_pair_asm(tl.load(b_ptr + offs))
        tl.store(lo_ptr + offs, lo)
        tl.store(hi_ptr + offs, hi)

    b = torch.arange(256, dtype=torch.uint8, device="cuda")
    lo = torch.empty(256, dtype=torch.float16, device="cuda")
    hi = torch.empty_like(lo)
    decode[(1,)](b, lo, hi, N=256, TWO=variant.endswith("2"), num_warps=1)
    want_lo = quant.e2m1_decode(b.cpu() & 15) * 2.0 ** -14
    want_hi = quant.e2m1_decode(b.cpu() >> 4) * 2.0 ** -14
    assert torch.equal(lo.cpu().float(), want_lo) and torch.equal(hi.cpu().float(), want_hi)


@pytest.mark.gpu
def test_gpu_fp4_e4m3_decode_asm_is_exact_for_every_byte():
    """The w4a8 inline-PTX decode (4 bytes per invocation) against the e2m1 table for all 256 values of a byte in
    the e4m3 bit layout: low value -> lo, high value -> hi, both e4m3 equal to the e2m1 value times 2^-6."""
    import triton
    import triton.language as tl

    from truepeak.kernels import quant
    from truepeak.kernels._moe_jit import _fp4_e4m3_pair

    @triton.jit
    def decode(b_ptr, lo_ptr, hi_ptr, N: tl.constexpr):
        offs = tl.arange(0, N)
        lo, hi = _fp4_e4m3_pair(tl.load(b_ptr + offs), False)
        tl.store(lo_ptr + offs, lo)
        tl.store(hi_ptr + offs, hi)

    std = torch.arange(256, dtype=torch.uint8)
    b = mt.to_e4m3_bit_layout(std).cuda()
    lo = torch.empty(256, dtype=torch.float8_e4m3fn, device="cuda")
    hi = torch.empty_like(lo)
    decode[(1,)](b, lo, hi, N=256, num_warps=1)
    assert torch.equal(lo.cpu().float(), quant.e2m1_decode(std & 15) * 2.0 ** -6)
    assert torch.equal(hi.cpu().float(), quant.e2m1_decode(std >> 4) * 2.0 ** -6)


def test_e4m3_bit_layout_decodes_every_byte_exactly():
    """The w4a8 layout's bit moves (the kernel's PTX does them on 4 bytes at once; this is the same on one byte, as
    the interpreter path runs them): for all 256 bytes both values decode, as e4m3, to the e2m1 value x 2^-6; and the
    layout round-trips. Hand example: L = 0b0011 (1.5), H = 0b1110 (-4) -> 0b01101110."""
    from truepeak.kernels import quant

    std = torch.arange(256, dtype=torch.uint8)
    b = mt.to_e4m3_bit_layout(std)
    assert int(mt.to_e4m3_bit_layout(torch.tensor([0xE3], dtype=torch.uint8))) == 0b01101110
    assert torch.equal(mt.from_e4m3_bit_layout(b), std)
    lo = (b & 0x9C).view(torch.float8_e4m3fn).float()
    hi = (((b.to(torch.int32) << 2) & 0x8C) | ((b.to(torch.int32) >> 2) & 0x10)).to(torch.uint8)
    hi = hi.view(torch.float8_e4m3fn).float()
    assert torch.equal(lo, quant.e2m1_decode(std & 15) * 2.0 ** -6)
    assert torch.equal(hi, quant.e2m1_decode(std >> 4) * 2.0 ** -6)
    # e.g. low code 1 (0.5) is stored as 0b00000100, e4m3's subnormal 2^-7; code 7 (6.0) as 0b00011100, e4m3
    # exponent 3 - 7 and mantissa 0.5: 1.5 * 2^-4 = 6 * 2^-6
    assert int(b[1]) == 0b00000100 and float(lo[1]) == 2.0 ** -7
    assert int(b[7]) == 0b00011100 and float(lo[7]) == 6 * 2.0 ** -6


def test_fused_moe_refuses_inputs_it_would_misread():
    # each of these once ran and returned wrong numbers (or read out of bounds) instead of an error
    w1 = mt.quantize_experts(torch.zeros(4, 256, 128), "bf16")
    w2 = mt.quantize_experts(torch.zeros(4, 128, 128), "bf16")
    ids = torch.tensor([[0, 1], [1, 3], [2, -1]])
    tw = torch.rand(3, 2)
    x = torch.rand(3, 128).bfloat16()
    with pytest.raises(TruepeakError, match=r"contiguous along H \(stride 1\), got strides \(1, 3\)"):
        mt.FusedMoE(torch.rand(128, 3).bfloat16().t(), w1, w2, ids, tw)
    with pytest.raises(TruepeakError, match=r"same T, got x \[1, 128\] and topk_ids \[3, 2\]"):
        mt.FusedMoE(x[:1], w1, w2, ids, tw)
    with pytest.raises(TruepeakError, match=r"topk_weights must have topk_ids' shape \[3, 2\], got \[3, 1\]"):
        mt.FusedMoE(x, w1, w2, ids, tw[:, :1])
    if os.environ.get("TRITON_INTERPRET") != "1":
        with pytest.raises(UnsupportedError, match="run on a CUDA GPU .x is on cpu.; on a CPU set TRITON_INTERPRET=1"):
            mt.FusedMoE(x, w1, w2, ids, tw)


def test_choose_config_and_tune_bad_values():
    for bad in (float("nan"), 0, -1, float("inf")):
        with pytest.raises(TruepeakError, match="tokens per expert must be a finite number > 0"):
            mt.choose_config(bad, "bf16", True)
    with pytest.raises(TruepeakError, match="k_dim .the GEMM's K. must be a positive integer, got 0"):
        mt.choose_config(8, "bf16", True, k_dim=0)
    w1 = mt.quantize_experts(torch.zeros(2, 64, 32), "bf16")
    w2 = mt.quantize_experts(torch.zeros(2, 32, 32), "bf16")
    with pytest.raises(TruepeakError, match="unknown KernelConfig field.s. blockk in tune; expected block_m"):
        mt.FusedMoE(torch.zeros(3, 32).bfloat16(), w1, w2, torch.zeros(3, 1, dtype=torch.long), torch.ones(3, 1),
                    tune={"blockk": 64})
    nv = mt.ExpertWeights("nvfp4", torch.zeros(1, 4, 8, dtype=torch.uint8), torch.zeros(1, 4, 1, dtype=torch.float8_e4m3fn))
    with pytest.raises(TruepeakError, match="need their per-expert global_scale"):
        nv.dequantize()
    nv2 = mt.ExpertWeights("nvfp4", torch.zeros(1, 16, 128, dtype=torch.uint8),
                           torch.zeros(1, 16, 16, dtype=torch.float8_e4m3fn))
    with pytest.raises(TruepeakError, match="need their per-expert global_scale"):
        mt.FusedMoE(torch.zeros(2, 256).bfloat16(), nv2, mt.ExpertWeights(
            "nvfp4", torch.zeros(1, 256, 4, dtype=torch.uint8), torch.zeros(1, 256, 0, dtype=torch.float8_e4m3fn),
            torch.ones(1)), torch.zeros(2, 1, dtype=torch.long), torch.ones(2, 1))
    # numpy / torch scalars are numbers too
    import numpy as np
    assert mt.choose_config(np.float32(8), "bf16", True, k_dim=np.int64(7168)) == mt.choose_config(8, "bf16", True,
                                                                                                    k_dim=7168)
    assert mt.choose_config(torch.tensor(8.0), "bf16", True).block_m == 32


def test_default_activations_per_format():
    # measured on the H200 (docs/results/h200/moe/README.md): nvfp4 runs w4a16, mxfp4 w4a8, fp8 w8a8
    assert [mt.default_activations(f) for f in mt.WEIGHT_FORMATS] == [None, "fp8", "fp8", "fp16", "fp8"]
    with pytest.raises(UnknownNameError, match="int4"):
        mt.default_activations("int4")


def test_tiled_w4a16_scale_multiply_is_exact_in_fp16():
    # the tiled w4a16 multiplies each decoded e2m1 value (times 2^-6) by its block scale in fp16 (_moe_jit's
    # _chunk_f16_dot); every product must equal the exact one: e2m1 has <= 2 significant bits, e4m3 <= 4, so <= 6
    e2m1 = torch.tensor([0, 0.5, 1, 1.5, 2, 3, 4, 6], dtype=torch.float64)
    e2m1 = torch.cat([e2m1, -e2m1]) * 2.0 ** -6
    codes = torch.arange(256, dtype=torch.uint8)
    e4m3 = codes.view(torch.float8_e4m3fn).double()
    e4m3 = e4m3[torch.isfinite(e4m3)]                                   # nvfp4 block scales (all finite e4m3)
    mx = 2.0 ** torch.arange(-17, 10, dtype=torch.float64)              # mxfp4 scales rebased to at most 2^9
    for scales, largest in ((e4m3, 6 * 448 * 2.0 ** -6), (mx, 6 * 2.0 ** 9 * 2.0 ** -6)):
        exact = e2m1[:, None] * scales[None, :]
        in_fp16 = (e2m1.half()[:, None] * scales.half()[None, :]).double()
        assert torch.equal(in_fp16, exact)
        assert float(exact.abs().max()) == largest                      # 42 for nvfp4, 48 for mxfp4: finite in fp16


def test_fp16_activations_are_scaled_per_row_in_interpreter(interpreted):
    # x of +-300, weights x 1e3 or x 1e-5, x of 1e-6: finite and within 2e-2 of the float32 reference (before the
    # per-row scaling, x of +-150 already turned every nvfp4 w4a16 output into NaN/inf, weights x 1e-5 into zeros)
    for case, r in interpreted["range"].items():
        assert r["nonfinite"] == 0 and r["err"] < 2e-2, (case, r)
    # and fp8 activations with fp16 x (the intermediate, ~3e5 here, is kept in float32 until its per-row scaling)
    r = interpreted["fp16_x_w8a8"]
    assert r["nonfinite"] == 0 and r["err"] < 1e-1, r


def test_kernel_config_validates_its_fields():
    import numpy as np

    for kw in ({"block_m": 24}, {"block_n": 48}, {"block_k": 8}, {"num_warps": 3}, {"num_stages": 0},
               {"maxnreg": 23}, {"maxnreg": 256}, {"maxnreg": True}, {"maxnreg": "128"}, {"block_m": "16"},
               {"num_warps": 4.0}):
        fields = {"block_m": 16, "block_n": 64, "block_k": 64, **kw}
        name = next(iter(kw))
        with pytest.raises(TruepeakError, match=f"out of range: .*got {name}="):
            mt.KernelConfig(**fields)
    cfg = mt.KernelConfig(np.int64(16), 64, 64, maxnreg=np.int64(128))   # numpy integers become plain ints (the
    assert (cfg.block_m, cfg.maxnreg) == (16, 128) and type(cfg.block_m) is int and type(cfg.maxnreg) is int  # JIT)


def test_fused_moe_refuses_inputs_it_would_read_wrongly():
    import dataclasses

    torch.manual_seed(0)
    w1 = mt.quantize_experts(torch.randn(2, 128, 64), "bf16")
    w2 = mt.quantize_experts(torch.randn(2, 64, 64), "bf16")
    x, ids, tw = torch.rand(3, 64).bfloat16(), torch.zeros(3, 1, dtype=torch.long), torch.ones(3, 1)
    with pytest.raises(TruepeakError, match="tune must be a dict of KernelConfig fields"):
        mt.FusedMoE(x, w1, w2, ids, tw, tune="maxnreg")
    # the same values stored with K not contiguous (the fresh-clone pass saw an error of 1.13 of max |ref|)
    strided = mt.ExpertWeights("bf16", w1.data.transpose(1, 2).contiguous().transpose(1, 2))
    with pytest.raises(TruepeakError, match=r"w1.data must be contiguous along K \(stride 1\)"):
        mt.FusedMoE(x, strided, w2, ids, tw)
    with pytest.raises(TruepeakError, match="topk_ids must hold integer expert ids, got torch.float32"):
        mt.FusedMoE(x, w1, w2, ids.float(), tw)
    f1 = mt.quantize_experts(torch.randn(2, 128, 64), "fp8")
    f2 = mt.quantize_experts(torch.randn(2, 64, 64), "fp8")
    with pytest.raises(TruepeakError, match=r"w2: fp8 scales must be \[2, 64\] for values \[2, 64, 64\], got \[2, 1, 64\]"):
        mt.FusedMoE(x, f1, dataclasses.replace(f2, scale=f2.scale[:, None, :]), ids, tw)
    with pytest.raises(TruepeakError, match="w1.scale must be contiguous"):
        mt.FusedMoE(x, dataclasses.replace(f1, scale=f1.scale.t().contiguous().t()), f2, ids, tw)
    with pytest.raises(UnknownNameError, match="fp4"):
        mt.FusedMoE(x, mt.ExpertWeights("fp4", w1.data), w2, ids, tw)
    # dtypes the kernels would misread (fp8 with float64 scales gave all zeros)
    with pytest.raises(TruepeakError, match="w1: fp8 scales must be torch.float32, got torch.float64"):
        mt.FusedMoE(x, dataclasses.replace(f1, scale=f1.scale.double()), f2, ids, tw)
    with pytest.raises(TruepeakError, match="w1: bf16 values must be torch.bfloat16"):
        mt.FusedMoE(x, mt.ExpertWeights("bf16", w1.data.half()), w2, ids, tw)
    with pytest.raises(TruepeakError, match="x must be bf16, fp16 or fp32 hidden states, got torch.int32"):
        mt.FusedMoE(x.int(), w1, w2, ids, tw)
    m1 = mt.quantize_experts(torch.randn(2, 128, 64), "mxfp4")
    m2 = mt.quantize_experts(torch.randn(2, 64, 64), "mxfp4")
    if hasattr(torch, "float8_e8m0fnu"):
        with pytest.raises(TruepeakError, match=r"mxfp4 scales must be torch.uint8 \(e8m0 bytes: scale.view"):
            mt.FusedMoE(x, dataclasses.replace(m1, scale=m1.scale.view(torch.float8_e8m0fnu)), m2, ids, tw)
    with pytest.raises(TruepeakError, match="fp4 bytes must be one dense"):
        mt.FusedMoE(x, dataclasses.replace(m1, data=torch.zeros(2, 256, 32, dtype=torch.uint8)[:, ::2]), m2, ids, tw)


@pytest.mark.gpu
@pytest.mark.parametrize("wfmt,acts,x_dtype,untiled", [
    ("fp8", "fp16", "bfloat16", False), ("fp8_block", "fp16", "bfloat16", False), ("nvfp4", "fp16", "bfloat16", True),
    ("mxfp4", "fp16", "bfloat16", True), ("mxfp4", "fp16", "bfloat16", False), ("nvfp4", "fp8", "bfloat16", False),
    ("fp8", "fp8", "float16", False), ("nvfp4", "fp16", "float16", False)])
def test_gpu_activation_variants_match_reference(wfmt, acts, x_dtype, untiled):
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
        f = mt.FusedMoE(x, w1, w2, ids, tw, activations=acts, tune={"num_stages": np.int64(2)}, untiled_w4a16=untiled)
        assert f.tiled == (wfmt in ("nvfp4", "mxfp4") and not untiled)
        y = f().float()
        err = float((y - ref).abs().max() / ref.abs().max())
        assert torch.isfinite(y).all() and err < (1e-1 if acts == "fp8" else 8e-2), (wfmt, acts, x_dtype, err)


def test_dropped_block_scales_compute_without_them_and_say_so_in_interpreter(interpreted):
    # the experiment reaches the kernel (ACT8 = 1 | 2) and computes what it says: the flat-scale reference to w4a8's
    # tolerance, while against the true weights the output is wrong (each weight comes out 2^(s - max_e - 9) of its
    # value, at most 2^-9, so the output is near zero against the true one)
    r = interpreted["dropped_scales"]
    assert r["act8"] == 3 and r["output_valid"] is False
    assert r["err_flat"] < 1e-1 and r["err_true"] > 0.99, r


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
