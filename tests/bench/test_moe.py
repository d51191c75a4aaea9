"""`truepeak moe bench` logic on the CPU: shapes per layout, routing, tokens, byte/FLOP counts, the torch backends'
gather/padding/combine against the float32 reference, skipped combinations and bad input. The GPU sweep (records,
failed points, read bandwidth) carries @pytest.mark.gpu."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from truepeak.bench import moe  # noqa: E402
from truepeak.errors import TruepeakError, UnknownNameError, UnsupportedError  # noqa: E402
from truepeak.kernels import moe_triton as mt  # noqa: E402


def test_expert_shapes_from_configs_and_layouts():
    # ../shared/data/hf_configs: DeepSeek-V3 7168 / 2048 / 256 experts / top-8; GLM-5 6144 / 2048 / 256 / 8
    s = moe.expert_shape("deepseek-v3")
    assert (s.H, s.I, s.E, s.E_local, s.top_k) == (7168, 2048, 256, 256, 8)
    s = moe.expert_shape("glm-5", ep=8)
    assert (s.H, s.I, s.E_local) == (6144, 2048, 32)
    s = moe.expert_shape("qwen3-235b-a22b", tp=4)
    assert (s.H, s.I, s.E, s.top_k) == (4096, 384, 128, 8)
    s = moe.expert_shape("gpt-oss-120b")
    assert (s.H, s.I, s.E, s.top_k) == (2880, 2880, 128, 4)


def test_bad_layouts():
    with pytest.raises(TruepeakError, match="--ep 3 does not divide the 256 experts"):
        moe.expert_shape("deepseek-v3", ep=3)
    with pytest.raises(TruepeakError, match="--tp 3 does not divide the expert width I=2048"):
        moe.expert_shape("deepseek-v3", tp=3)
    with pytest.raises(TruepeakError, match="not both"):
        moe.expert_shape("deepseek-v3", tp=2, ep=2)
    with pytest.raises(TruepeakError, match=">= 1"):
        moe.expert_shape("deepseek-v3", ep=0)


def test_model_without_moe_layers_is_refused(monkeypatch):
    import types

    from truepeak.moe import config

    dense = types.SimpleNamespace(name="dense-7b", num_moe_layers=0, hidden_size=4096,
                                  experts=types.SimpleNamespace(intermediate_size=0, num_experts=0, top_k=0))
    monkeypatch.setattr(config, "load_model", lambda name: dense)
    with pytest.raises(UnsupportedError, match="no MoE layers"):
        moe.expert_shape("dense-7b")


def test_tokens_per_expert_sets_T():
    s = moe.expert_shape("deepseek-v3")
    assert moe.tokens_for(16, s) == 512          # 16 * 256 / 8 (moe_models.md: batch 512 -> 16 per expert)
    assert moe.tokens_for(1, s) == 32
    assert moe.tokens_for(256, moe.expert_shape("glm-5", ep=8)) == 8192   # T is global: E = 256, not 32
    with pytest.raises(TruepeakError, match="must be a finite number > 0, got 0"):
        moe.tokens_for(0, s)


def test_routing_uniform_powerlaw_and_file(tmp_path):
    # the planner's routing grammar (truepeak.moe.routing): one meaning of a spec for `moe plan` and `moe bench`
    ids = moe.sample_routing("uniform", 512, 256, 8)
    assert ids.shape == (512, 8) and ids.dtype == torch.int64
    assert all(len(set(r)) == 8 for r in ids.tolist())                   # distinct experts per token
    assert torch.equal(moe.sample_routing("powerlaw:0", 512, 256, 8), ids)   # alpha 0 is uniform
    # powerlaw:1.2, E = 64, k = 4: Zipf weights (r + 1)^-1.2 water-filled to sum 4. Rank 0 would get
    # 4 / sum_r (r + 1)^-1.2 = 1.54 > 1: capped at 1, picked by every token; rank 1 gets 3 * 2^-1.2 / sum_{r>=1} = 0.540
    ids = moe.sample_routing("powerlaw:1.2", 4096, 64, 4)
    assert all(len(set(r)) == 4 for r in ids.tolist())
    counts = torch.bincount(ids.flatten(), minlength=64).sort(descending=True).values
    p1 = 3 * 2 ** -1.2 / sum((r + 1) ** -1.2 for r in range(1, 64))
    assert p1 == pytest.approx(0.540, abs=1e-3)
    assert counts[0] == 4096                                             # the saturated expert: every token
    assert abs(counts[1] - 4096 * p1) < 5 * (4096 * p1 * (1 - p1)) ** 0.5
    assert counts.sum() == 4 * 4096
    f = tmp_path / "ids.txt"
    f.write_text("0 1\n2,3\n")
    assert moe.sample_routing(str(f), 3, 4, 2).tolist() == [[0, 1], [2, 3], [0, 1]]   # a dump replays its rows
    g = tmp_path / "ids"                                                 # a file without a suffix is a file too
    g.write_text("3 2\n")
    assert moe.sample_routing(str(g), 2, 4, 2).tolist() == [[3, 2], [3, 2]]
    with pytest.raises(TruepeakError, match="row 0 has 2 ids, expected top_k = 3"):
        moe.sample_routing(str(f), 3, 4, 3)
    with pytest.raises(TruepeakError, match="unknown routing 'zipf'"):
        moe.sample_routing("zipf", 8, 4, 2)
    with pytest.raises(TruepeakError, match="alpha -1.0 must be a number >= 0"):
        moe.sample_routing("powerlaw:-1", 8, 4, 2)


def test_local_ids_for_ep():
    s = moe.expert_shape("deepseek-v3", ep=8)                            # 32 local experts, rank 0 holds 0..31
    assert moe.local_ids(torch.tensor([[0, 31, 32, 255]]), s).tolist() == [[0, 31, -1, -1]]
    assert moe.local_ids(torch.tensor([[32, 63, 64]]), s, rank=1).tolist() == [[0, 31, -1]]


def test_c13_active_bytes_and_flop():
    # DeepSeek-V3 nvfp4: gate_up [4096, 7168] = 4096 * (3584 + 448) B, down [7168, 2048] = 8,257,536 B (C13),
    # each plus a 4-byte per-expert global scale
    w1 = mt.ExpertWeights("nvfp4", torch.empty(1, 4096, 3584, dtype=torch.uint8),
                          torch.empty(1, 4096, 448, dtype=torch.float8_e4m3fn), torch.ones(1))
    w2 = mt.ExpertWeights("nvfp4", torch.empty(1, 7168, 1024, dtype=torch.uint8),
                          torch.empty(1, 7168, 128, dtype=torch.float8_e4m3fn), torch.ones(1))
    assert moe.active_bytes(w1, w2, [3, 0, 1]) == 2 * (16_515_072 + 4 + 8_257_536 + 4)
    s = moe.expert_shape("deepseek-v3")
    assert moe.unit_flop(s, 4096) == 2 * 3 * 7168 * 2048 * 4096        # 360.8 GFLOP at 16 tokens per expert


ROUTINGS = {"mixed": [[0, 1], [1, 3], [1, 0], [3, 1], [1, -1], [0, 3]], "all_in_one": [[2, -1]] * 7}


@pytest.mark.parametrize("backend", ["per_expert", "bmm", "grouped_mm"])
@pytest.mark.parametrize("routing", list(ROUTINGS))
def test_torch_backends_match_reference(backend, routing):
    torch.manual_seed(0)
    E, H, I = 4, 32, 16
    ids = torch.tensor(ROUTINGS[routing])
    T, k = ids.shape
    w1 = mt.quantize_experts(torch.randn(E, 2 * I, H) * 0.2, "bf16")
    w2 = mt.quantize_experts(torch.randn(E, H, I) * 0.2, "bf16")
    x = (torch.rand(T, H) * 2 - 1).bfloat16()
    tw = torch.rand(T, k)
    ref = mt.moe_reference(x, w1.dequantize(), w2.dequantize(), ids, tw)
    if backend == "grouped_mm" and not hasattr(torch, "_grouped_mm"):
        pytest.skip("torch has no _grouped_mm")
    out = moe.build_torch_backend(backend, x, w1, w2, ids, tw)()
    assert out.shape == (T, H)
    assert (out.float() - ref).abs().max() / ref.abs().max() < 2e-2
    assert torch.allclose(moe.reference_rows(x, w1, w2, ids, tw, rows=3), ref[:3], atol=1e-5)


def test_reference_sums_weighted_experts_by_hand():
    # E=1, I=1, H=1: gate = 2x, up = 3x; x = 1 -> silu(2) * 3 = 5.2848; down = 0.5 -> 2.6424; weight 0.25 -> 0.6606
    w1 = torch.tensor([[[2.0], [3.0]]])
    w2 = torch.tensor([[[0.5]]])
    out = mt.moe_reference(torch.tensor([[1.0]]), w1, w2, torch.tensor([[0, -1]]), torch.tensor([[0.25, 0.75]]))
    silu2 = 2 / (1 + torch.exp(torch.tensor(-2.0)))
    assert out.item() == pytest.approx(float(silu2) * 3 * 0.5 * 0.25, rel=1e-6)


@pytest.mark.parametrize("wfmt", ["nvfp4", "mxfp4", "fp8_block"])
def test_torch_backends_skip_formats_they_cannot_run(wfmt):
    w = mt.ExpertWeights(wfmt, torch.zeros(2, 4, 4, dtype=torch.uint8))
    note = "; fp8 weights run w8a8 on the grouped_mm backend" if wfmt.startswith("fp8") else "$"
    with pytest.raises(UnsupportedError, match=f"backend bmm has no {wfmt} path: torch has no {wfmt} batched matmul"
                                               + note):
        moe.build_torch_backend("bmm", torch.zeros(1, 8).bfloat16(), w, w, torch.tensor([[0]]), torch.ones(1, 1))


def test_run_bench_validates_before_measuring():
    with pytest.raises(UnknownNameError, match="unknown --weights 'int4'"):
        moe.run_bench("deepseek-v3", weights=["int4"])
    with pytest.raises(UnknownNameError, match="unknown backend 'cutlass'"):
        moe.run_bench("deepseek-v3", backends=["cutlass"])
    with pytest.raises(TruepeakError, match="must be a finite number > 0"):
        moe.run_bench("deepseek-v3", tokens_per_expert=[0])
    with pytest.raises(TruepeakError, match="--ep 5"):
        moe.run_bench("deepseek-v3", ep=5)


@pytest.mark.gpu
@pytest.mark.parametrize("wfmt", ["bf16", "fp8", "fp8_block", "nvfp4", "mxfp4"])
def test_gpu_every_backend_matches_reference(wfmt):
    """Device correctness: every backend and format against the float32 reference, random routing with experts
    that get no token, and one expert that gets every token."""
    shape = moe.ExpertShape("test", 512, 256, 16, 16, 4)
    w1, w2 = moe.make_weights(shape, wfmt, "cuda")
    for ids in (moe.sample_routing("uniform", 6, 16, 4), torch.tensor([[3, -1, -1, -1]] * 40)):
        ids = ids.cuda()
        g = torch.Generator(device="cuda").manual_seed(1)  # not the default generator (see bench/moe.py)
        tw = torch.rand(ids.shape, device="cuda", generator=g)
        x = (torch.rand(ids.shape[0], 512, device="cuda", generator=g) * 2 - 1).bfloat16()
        ref = moe.reference_rows(x, w1, w2, ids, tw, rows=ids.shape[0])
        for b in moe.BACKENDS:
            try:
                out = moe.build_backend(b, x, w1, w2, ids, tw, tpe=4)()
            except UnsupportedError:
                continue
            err = float((out.float() - ref).abs().max() / ref.abs().max())
            assert err < (2e-2 if wfmt == "bf16" else 8e-2), (b, wfmt, err)


@pytest.mark.gpu
def test_gpu_sweep_writes_records_and_survives_a_failure(tmp_path, monkeypatch):
    real = moe.build_backend

    def flaky(backend, *a, **kw):
        if backend == "bmm":
            raise torch.cuda.OutOfMemoryError("CUDA out of memory (simulated)")
        return real(backend, *a, **kw)

    monkeypatch.setattr(moe, "build_backend", flaky)
    recs = moe.run_bench("qwen3-235b-a22b", ep=16, tokens_per_expert=[2], weights=["bf16", "nvfp4"],
                         out_path=str(tmp_path / "r.jsonl"), budget_s=0.02, warmup_s=0.01, read_bw=4.5e12)
    status = {(r.format, r.backend): r.status for r in recs}
    assert status[("bf16", "bmm")] == "failed" and status[("bf16", "triton")] == "ok"
    assert status[("nvfp4", "per_expert")] == "skipped" and status[("nvfp4", "triton")] == "ok"
    ok = [r for r in recs if r.ok]
    assert all(r.kind == "moe_experts" and 0 < r.derived.read_bandwidth_fraction for r in ok)


def test_w4a8_weights_need_their_layouts_tiles():
    # gpt-oss-120b at TP2 has I = 1440 = 22.5 x 64: the down projection's K cannot be cut into the w4a8 layout's
    # 64-element tiles (nor into w4a16's 64-element steps), so the format's points are skipped; with w4a8 the sweep
    # used to abort in the float32 reference
    pytest.importorskip("torch")
    from truepeak.errors import UnsupportedError

    small = moe.ExpertShape("toy", H=128, I=96, E=4, E_local=4, top_k=2)
    with pytest.raises(UnsupportedError, match="mxfp4 in the tiled layout .the w4a8 and w4a16 kernels. needs N and K "
                                               "multiples of 64, got N=128, K=96"):
        moe.make_weights(small, "mxfp4", "cpu", w4a8=True)
    with pytest.raises(UnsupportedError, match="K=96 is not a multiple of 64: the fp4 MoE kernel"):
        moe.make_weights(small, "mxfp4", "cpu")


def test_bad_fp4_activations_named_before_any_measurement():
    with pytest.raises(TruepeakError, match=r"--fp4-activations 'int4': expected auto \(fp16 for nvfp4, fp8 for mxfp4; "
                                            r"with the block-scaled kernel fp4 for nvfp4, fp8 for mxfp4\), fp16 "
                                            r"\(w4a16\), fp8 \(w4a8\) or fp4 \(W4A4, block-scaled kernel only\)"):
        moe.run_bench("deepseek-v3", weights=["nvfp4"], fp4_activations="int4")
    with pytest.raises(TruepeakError, match=r"--fp4-kernel 'marlin': expected auto, dequant, block-scaled"):
        moe.run_bench("deepseek-v3", weights=["nvfp4"], fp4_kernel="marlin")
    # a kernel and activations that do not go together are refused before anything is measured (no GPU needed)
    with pytest.raises(TruepeakError, match=r"--fp4-activations fp4 with --fp4-kernel dequant and weights mxfp4: the "
                                            r"dequantising kernels take fp8 or fp16"):
        moe.run_bench("deepseek-v3", weights=["bf16", "mxfp4"], fp4_kernel="dequant", fp4_activations="fp4")
    with pytest.raises(TruepeakError, match=r"--fp4-activations fp16 with --fp4-kernel block-scaled"):
        moe.run_bench("deepseek-v3", weights=["nvfp4"], fp4_kernel="block-scaled", fp4_activations="fp16")
    with pytest.raises(TruepeakError, match=r"--fp4-activations fp8 with --fp4-kernel block-scaled and weights "
                                            r"nvfp4, mxfp4: .* fp8 \(mxfp4 only\)"):
        moe.run_bench("deepseek-v3", weights=["nvfp4", "mxfp4"], fp4_kernel="BLOCK-SCALED", fp4_activations="fp8")


def test_block_scaled_backend_combinations_the_kernel_cannot_run_are_unsupported():
    """build_backend turns activations the block-scaled kernel does not take into UnsupportedError (a ``skipped``
    record), and weights labelled in the standard packing are made for it."""
    from truepeak.errors import UnsupportedError

    shape = moe.ExpertShape("toy", H=128, I=64, E=4, E_local=4, top_k=2)
    w1, w2 = moe.make_weights(shape, "nvfp4", "cpu", standard=True)
    assert w1.nibble_chunk == 0 and not w1.w4a8_layout and tuple(w1.data.shape) == (4, 128, 64)
    ids = torch.zeros(2, 2, dtype=torch.long)
    with pytest.raises(UnsupportedError, match="nvfp4 weights with activations 'fp4', got 'fp16'"):
        moe.build_backend("triton", torch.zeros(2, 128), w1, w2, ids, torch.ones(2, 2), 1.0, activations="fp16",
                          fp4_kernel="block-scaled")
    with pytest.raises(TruepeakError, match="fp4_kernel 'bogus': expected dequant or block-scaled"):
        moe.build_backend("triton", torch.zeros(2, 128), w1, w2, ids, torch.ones(2, 2), 1.0, fp4_kernel="bogus")
    with pytest.raises(UnsupportedError, match="takes no triton_tune"):
        moe.build_backend("triton", torch.zeros(2, 128), w1, w2, ids, torch.ones(2, 2), 1.0, activations="fp4",
                          tune={"num_stages": 2}, fp4_kernel="block-scaled")


def test_bad_fp8_activations_named_before_any_measurement():
    with pytest.raises(TruepeakError, match="--fp8-activations 'int8': expected fp8 .w8a8. or fp16 .w8a16."):
        moe.run_bench("deepseek-v3", weights=["fp8"], fp8_activations="int8")


def test_run_bench_refuses_bad_arguments_before_measuring():
    for kw, msg in (({"tokens_per_expert": "1,2"}, "tokens_per_expert must be a list of numbers"),
                    ({"tokens_per_expert": ["x"]}, "tokens per expert must be numbers, got .'x'."),
                    ({"tokens_per_expert": []}, "no tokens per expert given"),
                    ({"weights": []}, "no weight format or backend given"),
                    ({"read_bw": 0}, "read_bw must be a finite number of bytes per second > 0, got 0"),
                    ({"warmup_s": -1}, "warmup_s must be a finite number of seconds >= 0, got -1"),
                    ({"triton_tune": {"bf16": {"blockk": 64}}}, r"triton_tune\['bf16'\]: .* got 'bf16' with blockk"),
                    ({"triton_tune": {"bf16": 3}}, "triton_tune must map a weight format to a dict")):
        with pytest.raises(TruepeakError, match=msg):
            moe.run_bench("deepseek-v3", **kw)
    # a comma-separated string is a list of names, not of letters
    with pytest.raises(UnknownNameError, match="unknown --weights 'int4'"):
        moe.run_bench("deepseek-v3", weights="bf16,int4")
