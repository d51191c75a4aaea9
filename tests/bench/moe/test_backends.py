"""The backends that run the unit (truepeak.bench.moe.backends): the torch backends' gather, padding and combine
against the float32 reference on the CPU, the combinations they cannot run, and every backend on a GPU (marked gpu)."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from truepeak.bench import moe  # noqa: E402
from truepeak.errors import TruepeakError, UnsupportedError  # noqa: E402
from truepeak.kernels import moe_triton as mt  # noqa: E402


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


@pytest.mark.parametrize("wfmt", ["nvfp4", "mxfp4", "fp8_block"])
def test_torch_backends_skip_formats_they_cannot_run(wfmt):
    w = mt.ExpertWeights(wfmt, torch.zeros(2, 4, 4, dtype=torch.uint8))
    note = "; fp8 weights run w8a8 on the grouped_mm backend" if wfmt.startswith("fp8") else "$"
    with pytest.raises(UnsupportedError, match=f"backend bmm has no {wfmt} path: torch has no {wfmt} batched matmul"
                                               + note):
        moe.build_torch_backend("bmm", torch.zeros(1, 8).bfloat16(), w, w, torch.tensor([[0]]), torch.ones(1, 1))


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


@pytest.mark.gpu
@pytest.mark.parametrize("wfmt", ["bf16", "fp8", "fp8_block", "nvfp4", "mxfp4"])
def test_gpu_every_backend_matches_reference(wfmt):
    """Device correctness: every backend and format against the float32 reference, random routing with experts
    that get no token, and one expert that gets every token."""
    shape = moe.ExpertShape("test", 512, 256, 16, 16, 4)
    w1, w2 = moe.make_weights(shape, wfmt, "cuda")
    for ids in (moe.sample_routing("uniform", 6, 16, 4), torch.tensor([[3, -1, -1, -1]] * 40)):
        ids = ids.cuda()
        g = torch.Generator(device="cuda").manual_seed(1)  # not the default generator (see bench/read_bandwidth.py)
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
