"""The MoE kernels' tuning rules (truepeak.kernels.moe_triton.config): KernelConfig's validation and shared-memory
estimate, choose_config's tiles from the tokens per expert, the fp4 K steps and each format's default activations."""

from __future__ import annotations

import pytest

from truepeak.errors import TruepeakError, UnknownNameError, UnsupportedError
from truepeak.kernels import moe_triton as mt


def test_config_follows_tokens_per_expert_not_batch():
    # E = 512, k = 10, batch 512 -> 10 tokens per expert; the tile is picked from that, whatever the batch
    assert mt.choose_config(10, "bf16", True).block_m == 32
    assert mt.choose_config(1.875, "bf16", True).block_m == 16
    assert mt.choose_config(15, "bf16", True).block_m == 32   # 32-token blocks up to 20
    assert mt.choose_config(25, "bf16", True).block_m == 64
    assert mt.choose_config(256, "bf16", False).block_m == 128


def test_the_grouped_tile_order_at_about_32_tokens_per_expert():
    # bf16 and fp8 w8a8 from 20 to 40 tokens per expert (64-token blocks): one expert's weight tiles back to back;
    # token block fastest elsewhere, and for the formats decoded in registers (not measured with it)
    for wfmt, w8a8 in (("bf16", False), ("fp8", True)):
        for gated in (True, False):
            assert mt.choose_config(32, wfmt, gated, w8a8=w8a8).group_m == 1
            assert mt.choose_config(25, wfmt, gated, w8a8=w8a8).group_m == 1
            assert mt.choose_config(20, wfmt, gated, w8a8=w8a8).group_m == 0
            assert mt.choose_config(64, wfmt, gated, w8a8=w8a8).group_m == 0
            assert mt.choose_config(8, wfmt, gated, w8a8=w8a8).group_m == 0
    assert mt.choose_config(32, "fp8", True, w8a8=False).group_m == 0   # w8a16
    assert mt.choose_config(32, "nvfp4", True, mma=True).group_m == 0


def test_config_drops_stages_to_fit_shared_memory():
    # 256 tokens per expert: 128 tokens x 2 x 128 weight rows x 64 K, bf16: per stage 2*128*64*2 + 128*64*2 = 49,152 B
    big = mt.choose_config(256, "bf16", True)
    assert (big.block_m, big.block_n, big.block_k, big.num_stages) == (128, 128, 64, 3)
    assert big.smem_bytes("bf16", True) == 147_456
    assert mt.choose_config(256, "bf16", True, smem_limit=232_448).num_stages == 3   # sm_90 / sm_100
    fitted = mt.choose_config(256, "bf16", True, smem_limit=101_376)                 # sm_120: 2 stages
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
    # 128 for mxfp4 (32); the token block follows tokens per expert, 16 rows up to 10
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


def test_choose_config_refuses_k_it_cannot_step():
    with pytest.raises(TruepeakError, match="k_dim .the GEMM's K. must be a positive integer, got 64.0"):
        mt.choose_config(1, "bf16", True, k_dim=64.0)
    with pytest.raises(TruepeakError, match="must be a positive integer, got True"):
        mt.choose_config(1, "bf16", True, k_dim=True)
    with pytest.raises(UnsupportedError, match="K=0 is not a multiple of 64"):
        mt.w4a8_block_k("mxfp4", 0)
    with pytest.raises(UnknownNameError, match="the w4a8 kernel takes nvfp4 or mxfp4 weights, not 'bf16'"):
        mt.w4a8_block_k("bf16")


def test_choose_config_block_k_divides_k_and_bad_format():
    assert mt.choose_config(8, "nvfp4", False, k_dim=2880).block_k == 64      # gpt-oss I = 2880 = 45 * 64
    with pytest.raises(UnsupportedError, match="K=720"):
        mt.choose_config(8, "nvfp4", False, k_dim=720)                         # gpt-oss TP4: 720 = 16 * 45
    with pytest.raises(UnknownNameError, match="bf16, fp8, fp8_block, nvfp4, mxfp4"):
        mt.choose_config(8, "int4", False)


def test_fp8_block_steps_never_span_two_scale_blocks():
    # w8a8 picks 256-element K steps for per-channel fp8 at <= 4 tokens per expert; 128 x 128 block scales change
    # every 128 elements of K, so fp8_block keeps 128 (a 256 step once applied one block's scale to two blocks)
    assert mt.choose_config(1, "fp8", True, k_dim=7168, w8a8=True).block_k == 256
    assert mt.choose_config(1, "fp8_block", True, k_dim=7168, w8a8=True).block_k == 128
    assert 128 % mt.choose_config(256, "fp8_block", False, k_dim=2048, w8a8=True).block_k == 0


def test_choose_config_bad_values():
    for bad in (float("nan"), 0, -1, float("inf")):
        with pytest.raises(TruepeakError, match="tokens per expert must be a finite number > 0"):
            mt.choose_config(bad, "bf16", True)
    with pytest.raises(TruepeakError, match="k_dim .the GEMM's K. must be a positive integer, got 0"):
        mt.choose_config(8, "bf16", True, k_dim=0)


def test_choose_config_takes_numpy_and_torch_scalars():
    np = pytest.importorskip("numpy")
    assert mt.choose_config(np.float32(8), "bf16", True, k_dim=np.int64(7168)) == mt.choose_config(8, "bf16", True,
                                                                                                    k_dim=7168)
    torch = pytest.importorskip("torch")
    assert mt.choose_config(torch.tensor(8.0), "bf16", True).block_m == 32


def test_default_activations_per_format():
    # measured on the H200 (docs/results/h200/moe/README.md): nvfp4 runs w4a16, mxfp4 w4a8, fp8 w8a8
    assert [mt.default_activations(f) for f in mt.WEIGHT_FORMATS] == [None, "fp8", "fp8", "fp16", "fp8"]
    with pytest.raises(UnknownNameError, match="int4"):
        mt.default_activations("int4")


def test_kernel_config_validates_its_fields():
    np = pytest.importorskip("numpy")

    for kw in ({"block_m": 24}, {"block_n": 48}, {"block_k": 8}, {"num_warps": 3}, {"num_stages": 0},
               {"maxnreg": 23}, {"maxnreg": 256}, {"maxnreg": True}, {"maxnreg": "128"}, {"block_m": "16"},
               {"num_warps": 4.0}, {"persistent": 1}, {"prefetch": "yes"}, {"hoist": None}, {"group_m": -1},
               {"group_m": 2.0}, {"group_m": False}):
        fields = {"block_m": 16, "block_n": 64, "block_k": 64, **kw}
        name = next(iter(kw))
        with pytest.raises(TruepeakError, match=f"out of range: .*got {name}="):
            mt.KernelConfig(**fields)
    cfg = mt.KernelConfig(np.int64(16), 64, 64, maxnreg=np.int64(128))   # numpy integers become plain ints (the
    assert (cfg.block_m, cfg.maxnreg) == (16, 128) and type(cfg.block_m) is int and type(cfg.maxnreg) is int  # JIT)
    cfg = mt.KernelConfig(16, 64, 64, persistent=np.bool_(True))  # numpy's bool becomes a plain bool
    assert cfg.persistent is True and mt.KernelConfig(16, 64, 64).persistent is False
    assert mt.KernelConfig(16, 64, 64).group_m == 0 and mt.KernelConfig(16, 64, 64, group_m=3).group_m == 3


def test_default_fp4_layout_is_the_measured_one():
    # docs/results/h200/moe-fp4/README.md: nvfp4 faster in the MMA layout, mxfp4 with the tiles kernels' w4a8
    from truepeak.errors import UnknownNameError
    from truepeak.kernels import moe_triton as mt

    assert mt.default_fp4_layout("nvfp4") == "mma" and mt.default_fp4_layout("mxfp4") == "tiles"
    with pytest.raises(UnknownNameError, match="fp4 layouts are for nvfp4 or mxfp4 weights, not 'bf16'"):
        mt.default_fp4_layout("bf16")
    cfg = mt.choose_config(1, "nvfp4", True, None, 7168, mma=True)
    # 128-element steps where K allows: 1.08x at 8 tokens per expert (docs/results/h200/moe-fp4/ncu_nvfp4_8.txt
    # against docs/results/h200/moe-fp4/ncu_nvfp4_8_k64.txt)
    assert (cfg.block_m, cfg.block_n, cfg.block_k, cfg.num_stages) == (16, 128, 128, 3)
    assert mt.choose_config(32, "nvfp4", True, None, 2880, mma=True).block_k == 64  # K = 2880: 64-element steps
    assert mt.choose_config(32, "mxfp4", True, None, 2880, True, mma=True).block_k == 64
