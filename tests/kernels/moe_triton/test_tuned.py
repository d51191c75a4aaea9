"""The tuned tables of the MoE kernels (truepeak.kernels.moe_triton.tuned): buckets, file names, the JSON form, the
loader's rejections and fallback; FusedMoE taking its configuration from a table (CPU, Triton's interpreter); each
shipped table entry's configuration run against the float32 reference on small shapes (interpreter) and on its own
shape on the GPU it was tuned for (gpu)."""

from __future__ import annotations

import dataclasses
import json
import math
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from truepeak.errors import TruepeakError
from truepeak.kernels.moe_triton import tuned as tt
from truepeak.kernels.moe_triton.config import KernelConfig

CFG1 = KernelConfig(16, 64, 128, 4, 4)
CFG2 = KernelConfig(16, 128, 256, 8, 3, maxnreg=128)


def table(device="NVIDIA H200", E=256, N=2048, H=7168, **kw):
    e = tt.TunedEntry(CFG1, CFG2, tokens_per_expert=16.0, time_s=2.5e-4, read_bandwidth_fraction=0.95,
                      default_read_bandwidth_fraction=0.92, default_time_s=2.58e-4, candidates=12)
    return tt.TunedTable(device_name=device, E=E, N=N, H=H, entries={("bf16", "bf16", 16): e}, model="deepseek-v3",
                         layout="single", date="2026-12-02T07:00:00Z", truepeak_commit="abc",
                         read_bandwidth_bytes_per_s=4.58e12, **kw)


@pytest.mark.parametrize("t,bucket", [(1, 1), (0.25, 1), (1.4, 1), (1.5, 2), (2.8, 2), (2.9, 4), (5.6, 4), (6, 8),
                                      (16, 16), (23, 32), (64, 64), (5000, 1024)])
def test_bucket_is_the_nearest_power_of_two_in_log2(t, bucket):
    # log2(1.4) = 0.485 -> 2^0; log2(1.5) = 0.585 -> 2^1; log2(2.8) = 1.485 -> 2; log2(2.9) = 1.536 -> 4;
    # log2(5.6) = 2.485 -> 4; log2(6) = 2.585 -> 8; log2(23) = 4.52 -> 32; 5000 is past the last bucket, 1024
    assert tt.bucket_of(t) == bucket


@pytest.mark.parametrize("bad", [0, -1, math.nan, math.inf, "x", None])
def test_bucket_refuses_what_is_not_a_count(bad):
    with pytest.raises(TruepeakError, match="tokens per expert must be a finite number > 0"):
        tt.bucket_of(bad)


def test_file_name_is_vllms_with_the_hidden_size():
    assert tt.table_file_name("NVIDIA H200", 256, 2048, 7168) == "E=256,N=2048,H=7168,device_name=NVIDIA_H200.json"
    assert table(E=32).file_name == "E=32,N=2048,H=7168,device_name=NVIDIA_H200.json"


def test_json_round_trip_and_lookup_by_bucket():
    t = table()
    d = json.loads(json.dumps(t.to_dict()))
    assert d["schema"] == tt.SCHEMA and d["configs"]["bf16"]["bf16"]["16"]["down"]["maxnreg"] == 128
    back = tt.TunedTable.from_dict(d)
    assert back == t
    # 12 and 20 tokens per expert are in bucket 16 (log2 3.58 and 4.32); 8 is not
    assert back.lookup("bf16", None, 12).down == CFG2 and back.lookup("bf16", "bf16", 20).gate_up == CFG1
    assert back.lookup("bf16", None, 8) is None and back.lookup("fp8", "fp8", 16) is None


def test_token_blocks_per_expert_counts_blocks_of_active_experts():
    # (ceil(1/16) + ceil(20/16) + ceil(3/16)) / 3 active experts = (1 + 2 + 1) / 3
    assert tt.token_blocks_per_expert([1, 0, 20, 3], 16) == pytest.approx(4 / 3)
    assert tt.token_blocks_per_expert([1, 0, 20, 3], 32) == 1.0
    assert tt.token_blocks_per_expert([0, 0], 16) == 1.0  # no expert has tokens
    with pytest.raises(TruepeakError, match="block_m must be a positive integer, got 0"):
        tt.token_blocks_per_expert([1], 0)
    with pytest.raises(TruepeakError, match="token counts must be >= 0, got -1"):
        tt.token_blocks_per_expert([1, -1], 16)


@pytest.mark.parametrize("bad,message", [
    ("123", "token counts must be a sequence of integers >= 0 (one per expert), got '123'"),
    (None, "token counts must be a sequence of integers >= 0 (one per expert), got None"),
    (5, "token counts must be a sequence of integers >= 0 (one per expert), got 5"),
    ([1.5, 2], "token counts must be integers >= 0, got 1.5"),
    ([True, 1], "token counts must be integers >= 0, got True"),
    (["3"], "token counts must be integers >= 0, got '3'"),
    ([float("nan")], "token counts must be integers >= 0, got nan"),
    ([[1, 2]], "token counts must be integers >= 0, got [1, 2]"),
])
def test_counts_that_are_not_token_counts_are_refused(bad, message):
    with pytest.raises(TruepeakError, match="^" + re.escape(message) + "$"):
        tt.token_blocks_per_expert(bad, 16)
    with pytest.raises(TruepeakError, match="^" + re.escape(message) + "$"):
        _skew_table().lookup_for_counts("bf16", None, 8, bad)


def test_tuned_pair_refuses_what_is_no_device_or_shape():
    for kw, message in (({"E": "256"}, "E must be a positive integer, got '256'"),
                        ({"E": -256}, "E must be a positive integer, got -256"),
                        ({"H": True}, "H must be a positive integer, got True"),
                        ({"device_name": None}, "device_name must be a GPU's name as torch reports it, got None")):
        args = {"device_name": "NVIDIA H200", "E": 256, "N": 2048, "H": 7168, **kw}
        with pytest.raises(TruepeakError, match="^" + re.escape(message) + "$"):
            tt.tuned_pair(args["device_name"], "bf16", None, args["E"], args["N"], args["H"], 8)
    with pytest.raises(TruepeakError, match="tokens per expert must be a finite number > 0, got True"):
        tt.tuned_pair("NVIDIA H200", "bf16", None, 256, 2048, 7168, True)


def _skew_table():
    def entry(bm, frac, layout=None):
        return tt.TunedEntry(KernelConfig(bm, 64, 128, 4, 3), KernelConfig(bm, 64, 128, 4, 3), tokens_per_expert=8.0,
                             time_s=1e-3, read_bandwidth_fraction=frac, fp4_layout=layout)
    return tt.TunedTable(device_name="NVIDIA H200", E=256, N=2048, H=7168, entries={
        ("bf16", "bf16", 4): entry(16, 0.999), ("bf16", "bf16", 8): entry(16, 0.999),
        ("bf16", "bf16", 16): entry(32, 0.982), ("bf16", "bf16", 32): entry(64, 0.942),
        ("bf16", "bf16", 64): entry(128, 0.74), ("nvfp4", "fp16", 8): entry(16, 0.7, "mma"),
        ("nvfp4", "fp16", 16): entry(32, 0.69, "tiles"), ("nvfp4", "fp16", 32): entry(64, 0.6, "mma")})


def test_a_skewed_routing_takes_the_entry_that_rereads_busy_experts_least():
    t = _skew_table()
    # 200 active experts: four busy ones (256, 128, 64, 32 tokens) and 196 with one token. Blocks per active expert:
    # 16 rows (16 + 8 + 4 + 2 + 196) / 200 = 1.13, 32 rows 211 / 200 = 1.055,
    # 64 rows 204 / 200 = 1.02, 128 rows 201 / 200 = 1.005; fraction / blocks: bucket 8 0.884, bucket 16 0.931,
    # bucket 32 0.924, bucket 64 0.736 -> bucket 16
    skew = [256, 128, 64, 32] + [1] * 196 + [0] * 56
    bucket, e = t.lookup_for_counts("bf16", None, 8, skew)
    assert bucket == 16 and e.gate_up.block_m == 32
    # uniform: 8 tokens each, one block per expert for every entry -> the mean's own entry (bucket 4's equal
    # fraction is below the mean's bucket and never a candidate)
    assert t.lookup_for_counts("bf16", None, 8, [8] * 256)[0] == 8
    # a larger bucket with a higher fraction but no fewer blocks is not taken: bucket 4 (0.999) at 4 tokens each
    # against bucket 8's equal 16-token block
    assert t.lookup_for_counts("bf16", None, 4, [4] * 256)[0] == 4
    t2 = dataclasses.replace(t, entries={**t.entries, ("bf16", "bf16", 8): dataclasses.replace(
        t.entries[("bf16", "bf16", 8)], read_bandwidth_fraction=1.0)})
    assert t2.lookup_for_counts("bf16", None, 4, [4] * 256)[0] == 4
    # no entry for the mean's bucket: None, as lookup (choose_config's rules then)
    assert t.lookup_for_counts("bf16", None, 2, skew) is None
    # fp4: only entries of the launch's layout are candidates (bucket 16 is for "tiles"): bucket 8 0.7 / 1.13 = 0.619
    # against bucket 32 0.6 / 1.02 = 0.588; one expert of 300 tokens and 10 of one: 0.7 / (29 / 11) = 0.266 against
    # 0.6 / (15 / 11) = 0.44 -> bucket 32
    assert t.lookup_for_counts("nvfp4", "fp16", 8, skew, "mma")[0] == 8
    assert t.lookup_for_counts("nvfp4", "fp16", 8, [300] + [1] * 10 + [0] * 245, "mma")[0] == 32
    # no layout named: nvfp4's default (mma), as tuned_pair; an entry of another layout is no entry; a bad layout
    assert t.lookup_for_counts("nvfp4", "fp16", 8, [300] + [1] * 10 + [0] * 245)[0] == 32
    assert t.lookup_for_counts("nvfp4", "fp16", 8, [300] + [1] * 10 + [0] * 245, "tiles") is None
    with pytest.raises(TruepeakError, match="fp4_layout must be 'mma' or 'tiles' .*got 'bogus'"):
        t.lookup_for_counts("nvfp4", "fp16", 8, skew, "bogus")
    # one count per local expert of the table's shape
    with pytest.raises(TruepeakError, match=r"^token counts for 11 experts; this table is for E=256 \(one count per "
                                            r"local expert\)$"):
        t.lookup_for_counts("bf16", None, 8, [300] + [1] * 10)


def test_tuned_pair_names_the_bucket_a_skewed_routing_takes(tmp_path):
    path = tt.write_table(_skew_table(), tmp_path)
    skew = [256, 128, 64, 32] + [1] * 196 + [0] * 56
    pair, note = tt.tuned_pair("NVIDIA H200", "bf16", None, 256, 2048, 7168, 8, path, counts=skew)
    assert pair[0].block_m == 32 and note == (f"tuned table {path}, bf16, bf16 activations, bucket 8, skewed routing: "
                                              "the entry of bucket 16 (1.05 token blocks per active expert against "
                                              "1.13)")
    pair, note = tt.tuned_pair("NVIDIA H200", "bf16", None, 256, 2048, 7168, 8, path, counts=[8] * 256)
    assert pair[0].block_m == 16 and note == f"tuned table {path}, bf16, bf16 activations, bucket 8"


@pytest.mark.parametrize("edit,message", [
    (lambda d: d.update(schema="other"), "schema 'other', expected 'truepeak.moe_tuned/1'"),
    (lambda d: d.update(E=0), "E=0, expected a positive integer"),
    (lambda d: d["configs"]["bf16"]["bf16"].update({"3": d["configs"]["bf16"]["bf16"]["16"]}), "bucket '3'"),
    (lambda d: d["configs"]["bf16"]["bf16"]["16"]["gate_up"].update(block_m=32), "must share block_m"),
    (lambda d: d["configs"]["bf16"]["bf16"]["16"].update(time_s=-1.0), "time_s=-1.0"),
    (lambda d: d["configs"].update(fp4={}), "unknown MoE kernel weight format 'fp4'"),
])
def test_from_dict_names_the_bad_field(edit, message):
    d = table().to_dict()
    edit(d)
    with pytest.raises(TruepeakError, match="^tuned table is not a truepeak tuned table: .*" + message.replace(
            "[", r"\[").replace("(", r"\(")) as exc:
        tt.TunedTable.from_dict(d)
    assert "\n" not in str(exc.value)


def test_loader_rejects_another_gpu_or_shape_and_falls_back(tmp_path, monkeypatch):
    monkeypatch.setattr(tt, "package_dir", lambda: tmp_path / "shipped")
    other_gpu = tt.write_table(table(device="NVIDIA H100 80GB HBM3"), tmp_path)
    got, note = tt.find_table("NVIDIA H200", 256, 2048, 7168, other_gpu)
    assert got is None and note == (f"tuned table {other_gpu.name} is for NVIDIA H100 80GB HBM3, not NVIDIA H200: "
                                    "choose_config's rules")
    other_shape = tt.write_table(table(E=32), tmp_path)
    got, note = tt.find_table("NVIDIA H200", 256, 2048, 7168, other_shape)
    assert got is None and note == (f"tuned table {other_shape.name} is for experts E=32, N=2048, H=7168, not "
                                    "E=256, N=2048, H=7168: choose_config's rules")
    broken = tmp_path / "broken.json"
    broken.write_text("{")
    got, note = tt.find_table("NVIDIA H200", 256, 2048, 7168, broken)
    assert got is None and note.startswith(f"the tuned table {broken} is not JSON: ") and "\n" not in note
    # nothing anywhere: the one-line note names the file looked for
    got, note = tt.find_table("NVIDIA H200", 8, 128, 256)
    assert got is None and note == "no tuned table E=8,N=128,H=256,device_name=NVIDIA_H200.json: choose_config's rules"
    # a folder holding the right file; then the shipped tables after a rejected user file
    got, note = tt.find_table("NVIDIA H200", 32, 2048, 7168, tmp_path)
    assert got == table(E=32) and note == f"tuned table {tmp_path / table(E=32).file_name}"
    tt.write_table(table(), tmp_path / "shipped")
    got, note = tt.find_table("NVIDIA H200", 256, 2048, 7168, other_gpu)
    assert got == table() and note == (f"tuned table {table().file_name} (tuned table {other_gpu.name} is for NVIDIA "
                                       "H100 80GB HBM3, not NVIDIA H200)")
    pair, note = tt.tuned_pair("NVIDIA H200", "bf16", None, 256, 2048, 7168, 16)
    assert pair == (CFG1, CFG2) and note.endswith("bf16, bf16 activations, bucket 16")
    pair, note = tt.tuned_pair("NVIDIA H200", "bf16", None, 256, 2048, 7168, 64)
    assert pair is None and note.endswith("has no entry for bf16, bf16 activations, bucket 64: choose_config's rules")


def test_an_fp4_entry_serves_only_the_layout_it_was_tuned_for(tmp_path, monkeypatch):
    monkeypatch.setattr(tt, "package_dir", lambda: tmp_path / "shipped")
    e = tt.TunedEntry(CFG1, CFG2, tokens_per_expert=4.0, time_s=1e-3, read_bandwidth_fraction=0.7, fp4_layout="mma")
    t = tt.TunedTable(device_name="NVIDIA H200", E=256, N=2048, H=7168, entries={("nvfp4", "fp16", 4): e})
    d = json.loads(json.dumps(t.to_dict()))
    assert d["configs"]["nvfp4"]["fp16"]["4"]["fp4_layout"] == "mma" and tt.TunedTable.from_dict(d) == t
    assert "fp4_layout" not in table().to_dict()["configs"]["bf16"]["bf16"]["16"]  # none for other formats
    path = tt.write_table(t, tmp_path)
    pair, note = tt.tuned_pair("NVIDIA H200", "nvfp4", "fp16", 256, 2048, 7168, 4, path, fp4_layout="mma")
    assert pair == (CFG1, CFG2) and note.endswith("nvfp4, fp16 activations, bucket 4, mma layout")
    pair, note = tt.tuned_pair("NVIDIA H200", "nvfp4", "fp16", 256, 2048, 7168, 4, path, fp4_layout="tiles")
    assert pair is None and note == (f"tuned table {path}: its entry for nvfp4, fp16 activations, bucket 4 was tuned "
                                     "for the mma fp4 layout, not tiles: choose_config's rules")
    # no layout named: nvfp4's default (the MMA layout); a layout that does not exist is refused
    pair, _ = tt.tuned_pair("NVIDIA H200", "nvfp4", "fp16", 256, 2048, 7168, 4, path)
    assert pair == (CFG1, CFG2)
    with pytest.raises(TruepeakError, match="fp4_layout must be 'mma' or 'tiles' .*got 'bogus'"):
        tt.tuned_pair("NVIDIA H200", "nvfp4", "fp16", 256, 2048, 7168, 4, path, fp4_layout="bogus")
    d["configs"]["nvfp4"]["fp16"]["4"]["fp4_layout"] = "rows"
    with pytest.raises(TruepeakError, match=r"configs\['nvfp4'\]\['fp16'\]\['4'\]: fp4_layout='rows', expected "
                                            "'mma' or 'tiles'"):
        tt.TunedTable.from_dict(d)


def test_nearest_table_is_of_this_gpu_and_the_closest_shape(tmp_path, monkeypatch):
    monkeypatch.setattr(tt, "package_dir", lambda: tmp_path)
    assert tt.nearest_table("NVIDIA H200", 256, 2048, 6144) is None  # nothing shipped
    for t in (table(), table(E=32), table(N=256), table(device="NVIDIA H100 80GB HBM3", H=6144)):
        tt.write_table(t, tmp_path)
    # GLM-5's experts (H 6144): the H100's table has the very shape but is another GPU; of the H200's, E=256,
    # N=2048 differs in H only (one field), E=32 and N=256 in two
    assert tt.nearest_table("NVIDIA H200", 256, 2048, 6144) == table()
    # EP8-local GLM-5 (E 32): the E=32 table differs in H only
    assert tt.nearest_table("NVIDIA H200", 32, 2048, 6144) == table(E=32)
    # TP8 (N 256): the N=256 table (one field) before the others (two)
    assert tt.nearest_table("NVIDIA H200", 256, 256, 6144) == table(N=256)
    # ties in the count of fields are broken by the size of the difference: N=512 is nearer 256 (1 octave) than
    # 2048 (2 octaves)
    tt.write_table(table(E=32, N=512), tmp_path)
    assert tt.nearest_table("NVIDIA H200", 32, 256, 7168) == table(E=32, N=512)
    assert tt.nearest_table("NVIDIA A100-SXM4-80GB", 256, 2048, 7168) is None


def shipped_entries():
    out = []
    for p in sorted(tt.package_dir().glob("*.json")):
        t = tt.load_table(p)
        out += [(p.name, key, e) for key, e in sorted(t.entries.items())]
    return out


def test_shipped_tables_are_valid_and_named_after_their_contents():
    files = sorted(tt.package_dir().glob("*.json"))
    assert files, "no tuned table is shipped"
    for p in files:
        t = tt.load_table(p)
        assert p.name == t.file_name and t.entries and t.truepeak_commit and t.read_bandwidth_bytes_per_s
        for e in t.entries.values():
            assert 0 < e.read_bandwidth_fraction < 1.1 and e.default_read_bandwidth_fraction


# Runs in a fresh interpreter with TRITON_INTERPRET=1 set before triton is imported (as tests/kernels/moe_triton/
# test_fused.py): every distinct configuration pair of the shipped tables on E = 4, H = I = 256 (every block_k of the
# search divides 256), and FusedMoE reading a table for the CPU (device name "cpu") or rejecting one for a GPU.
_CHILD = r"""
import json, sys, tempfile, dataclasses
import torch
from truepeak.kernels import moe_triton as mt
from truepeak.kernels.moe_triton import tuned as tt
cases = json.loads(sys.argv[1])
out = {}
torch.manual_seed(0)
E, H, I = 4, 256, 256
ids = torch.tensor([[0, 1], [1, 3], [1, 0], [3, 1], [1, -1], [2, 0]])
tw = torch.rand(ids.shape)
x = (torch.rand(ids.shape[0], H) * 2 - 1).bfloat16()
weights = {}
for name, wfmt, acts, c1, c2, layout in cases:
    if wfmt not in weights:
        w1 = mt.quantize_experts(torch.randn(E, 2 * I, H) * 0.1, wfmt)
        w2 = mt.quantize_experts(torch.randn(E, H, I) * 0.1, wfmt)
        weights[wfmt] = (w1, w2, mt.moe_reference(x, w1.dequantize(), w2.dequantize(), ids, tw))
    w1, w2, ref = weights[wfmt]
    f = mt.FusedMoE(x, w1, w2, ids, tw, config=(mt.KernelConfig(**c1), mt.KernelConfig(**c2)),
                    activations=None if wfmt == "bf16" else acts, fp4_layout=layout)
    out[name] = float((f().float() - ref).abs().max() / ref.abs().max())
w1, w2, ref = weights.get("bf16") or (mt.quantize_experts(torch.randn(E, 2 * I, H) * 0.1, "bf16"),
                                      mt.quantize_experts(torch.randn(E, H, I) * 0.1, "bf16"), None)
cfg = (mt.KernelConfig(16, 32, 64, 4, 1), mt.KernelConfig(16, 64, 128, 4, 2))
entry = tt.TunedEntry(*cfg, tokens_per_expert=3.0, time_s=1.0, read_bandwidth_fraction=0.5)
d = tempfile.mkdtemp()
for dev in ("cpu", "NVIDIA H200"):
    tt.write_table(tt.TunedTable(device_name=dev, E=E, N=I, H=H, entries={("bf16", "bf16", 4): entry}), d + "/" + dev)
res = {}
for dev in ("cpu", "NVIDIA H200"):
    p = d + "/" + dev + "/" + tt.table_file_name(dev, E, I, H)
    for tpe in (3.0, 1.0):
        f = mt.FusedMoE(x, w1, w2, ids, tw, tokens_per_expert=tpe, tuned_table=p)
        res[dev + "/" + str(tpe)] = [dataclasses.asdict(f.cfg1), dataclasses.asdict(f.cfg2), f.config_note,
                                     float(f().float().abs().max())]
out["loader"] = res
out["file"] = tt.table_file_name("cpu", E, I, H)
# a skewed routing: expert 0 receives all 18 tokens, experts 1-3 two, one and one (22 slots, mean 5.5: bucket 4);
# bucket 4's 16-token blocks run (2 + 1 + 1 + 1) / 4 = 1.25 blocks per active expert, bucket 16's 32-token blocks 1
ids_s = torch.tensor([[0, 1], [0, 1], [0, 2], [0, 3]] + [[0, -1]] * 14)
tw_s = torch.rand(ids_s.shape)
x_s = (torch.rand(ids_s.shape[0], H) * 2 - 1).bfloat16()
e4 = tt.TunedEntry(*cfg, tokens_per_expert=4.0, time_s=1.0, read_bandwidth_fraction=0.9)
e16 = tt.TunedEntry(mt.KernelConfig(32, 64, 64, 4, 1), mt.KernelConfig(32, 64, 128, 4, 1), tokens_per_expert=16.0,
                    time_s=1.0, read_bandwidth_fraction=0.8)
p = tt.write_table(tt.TunedTable(device_name="cpu", E=E, N=I, H=H, entries={("bf16", "bf16", 4): e4,
                                                                             ("bf16", "bf16", 16): e16}),
                   tempfile.mkdtemp())
# one launch for all (expert 0 is busy by FusedMoE's rule: its own launch is tested in test_fused.py)
f = mt.FusedMoE(x_s, w1, w2, ids_s, tw_s, tuned_table=str(p), split_busy=False)
ref_s = mt.moe_reference(x_s, w1.dequantize(), w2.dequantize(), ids_s, tw_s)
out["skew"] = [f.cfg1.block_m, f.config_note, float((f().float() - ref_s).abs().max() / ref_s.abs().max())]
print("RESULT " + json.dumps(out))
"""


@pytest.fixture(scope="module")
def interpreted():
    torch = pytest.importorskip("torch")  # noqa: F841
    pytest.importorskip("triton")
    import dataclasses

    import truepeak

    seen, cases = set(), []
    for fname, (wfmt, acts, bucket), e in shipped_entries():
        key = (wfmt, acts, e.gate_up, e.down, e.fp4_layout)
        if key not in seen:
            seen.add(key)
            cases.append([f"{fname}/{wfmt}/{acts}/{bucket}", wfmt, acts, dataclasses.asdict(e.gate_up),
                          dataclasses.asdict(e.down), e.fp4_layout])
    src = str(Path(truepeak.__file__).resolve().parents[1])
    env = {**os.environ, "TRITON_INTERPRET": "1", "PYTHONPATH": src + os.pathsep + os.environ.get("PYTHONPATH", "")}
    proc = subprocess.run([sys.executable, "-c", _CHILD, json.dumps(cases)], env=env, capture_output=True,
                          text=True, timeout=900)
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT ")]
    assert proc.returncode == 0 and lines, proc.stderr[-3000:]
    return json.loads(lines[-1][len("RESULT "):]), cases


def test_every_shipped_entry_matches_the_reference_in_interpreter(interpreted):
    out, cases = interpreted
    assert cases
    for name, wfmt, acts, _c1, _c2, _layout in cases:
        # moe bench's tolerances: bf16 2e-2; e4m3 activations (w8a8) round every activation by up to 2^-4: 1e-1
        tol = 2e-2 if wfmt == "bf16" else 1e-1 if acts == "fp8" else 8e-2
        assert out[name] < tol, (name, out[name])


def test_fused_moe_takes_its_config_from_the_table_or_falls_back(interpreted):
    out, _ = interpreted
    res, fname = out["loader"], out["file"]
    # the table for this device ("cpu" in the interpreter) and shape: bucket 4 (3 tokens per expert) is used
    c1, c2, note, peak = res["cpu/3.0"]
    assert (c1["block_n"], c1["block_k"], c1["num_stages"], c2["block_n"], c2["num_stages"]) == (32, 64, 1, 64, 2)
    assert note.startswith("tuned table ") and note.endswith(f"{fname}, bf16, bf16 activations, bucket 4")
    assert peak > 0
    # bucket 1 is not in it: choose_config's rules (16-token blocks, 64 / 128 weight rows, 4 stages)
    c1, c2, note, _ = res["cpu/1.0"]
    assert (c1["block_m"], c1["block_n"], c2["block_n"], c1["num_stages"]) == (16, 64, 128, 4)
    assert note.endswith("has no entry for bf16, bf16 activations, bucket 1: choose_config's rules")
    # a table for a GPU is rejected on the CPU, with the reason, whatever the bucket
    c1, _, note, _ = res["NVIDIA H200/3.0"]
    assert c1["block_n"] == 64 and note == (f"tuned table {tt.table_file_name('NVIDIA H200', 4, 256, 256)} is for "
                                            "NVIDIA H200, not cpu: choose_config's rules")


def test_fused_moe_takes_a_larger_token_block_for_a_skewed_routing(interpreted):
    out, _ = interpreted
    block_m, note, err = out["skew"]
    # 0.9 / 1.25 = 0.72 against 0.8 / 1 = 0.8: bucket 16's entry, named in the note, and the output still right
    assert block_m == 32 and note.endswith("bf16, bf16 activations, bucket 4, skewed routing: the entry of bucket 16 "
                                           "(1.00 token blocks per active expert against 1.25)")
    assert err < 2e-2


@pytest.mark.gpu
def test_gpu_tuned_tables_of_this_gpu_match_the_reference():
    """Every shipped table of this GPU, at its own expert shape: FusedMoE built without a configuration reads the
    table (its note says so) and takes the entry TunedTable.lookup_for_counts picks for the routing, and every
    entry's configuration matches the float32 reference of the first 16 tokens."""
    import torch

    from truepeak.bench import moe
    from truepeak.kernels.moe_triton import FusedMoE

    name = torch.cuda.get_device_name()
    tables = [t for t in map(tt.load_table, sorted(tt.package_dir().glob("*.json")))
              if tt.device_token(t.device_name) == tt.device_token(name)]
    if not tables:
        pytest.skip(f"no shipped tuned table for {name}")
    for t in tables:
        shape = moe.ExpertShape(t.model or "table", t.H, t.N, 256, t.E, 8)
        for wfmt in sorted({k[0] for k in t.entries}):
            w1, w2 = moe.make_weights(shape, wfmt, "cuda", 0, w4a8=wfmt in ("nvfp4", "mxfp4"))
            for (w, acts, bucket), e in sorted(t.entries.items()):
                if w != wfmt:
                    continue
                x, ids, tw = moe.decode_inputs(shape, e.tokens_per_expert)
                kw = dict(activations=None if w == "bf16" else acts, fp4_layout=e.fp4_layout)
                f = FusedMoE(x, w1, w2, ids, tw, tokens_per_expert=e.tokens_per_expert, **kw)
                assert f.config_note.startswith(f"tuned table {t.file_name}"), f.config_note
                counts = torch.bincount(ids[ids >= 0], minlength=t.E).tolist()
                _, chosen = t.lookup_for_counts(w, acts, e.tokens_per_expert, counts, e.fp4_layout)
                assert (f.cfg1, f.cfg2) == (chosen.gate_up, chosen.down)
                if chosen != e:  # this routing's counts take another bucket's entry: run this entry's as given
                    f = FusedMoE(x, w1, w2, ids, tw, config=(e.gate_up, e.down), **kw)
                ref = moe.reference_rows(x, w1, w2, ids, tw)
                err = float((f()[:ref.shape[0]].float() - ref).abs().max() / ref.abs().max())
                assert err < (2e-2 if w == "bf16" else 1e-1 if acts == "fp8" else 8e-2), (t.file_name, w, bucket, err)
            del w1, w2
            torch.cuda.empty_cache()
