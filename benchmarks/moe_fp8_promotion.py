"""What the fp32 promotion of the fp8 MMA's partial sums costs truepeak's w8a8 MoE kernels, on the device: the whole
unit (as ``truepeak moe bench`` times it) with the shipped tuned configuration, its kernels compiled as shipped
(partial sums added into fp32 every 128 products, ``_moe_jit._dot_fp8``) and compiled with that promotion changed
(every 256 products, with 256-element K steps; or never, Triton's default on sm_90), each output's error against
the float32 reference and against the shipped kernel's output. A study of the kernels, not a product option: the
variants are copies of ``truepeak/kernels/_moe_jit.py`` with one line changed, loaded beside it.

Usage: PYTHONPATH=src python3 benchmarks/moe_fp8_promotion.py OUT [MODEL:TPE ...]
  (default deepseek-v3:16 deepseek-v3:32 deepseek-v3:64 glm-5:16 glm-5:32); writes OUT/fp8_promotion.json
"""
import dataclasses
import importlib.util
import json
import pathlib
import sys
import tempfile

import torch

import truepeak.kernels as tk
from truepeak.bench import moe
from truepeak.bench.cuda_timer import time_cuda
from truepeak.kernels.moe_triton import FusedMoE, fused

LINE = "IMP: tl.constexpr = 128 if BLOCK_K >= 128 else BLOCK_K"
SRC = pathlib.Path(tk.__file__).with_name("_moe_jit.py").read_text()
assert LINE in SRC, "the promotion line of _moe_jit._dot_fp8 moved: update this study"


def variant(name: str, imp: int | None):
    """A copy of _moe_jit with the promotion interval ``imp`` (None: never promote), loaded as its own module."""
    if imp is None:
        src = SRC.replace(LINE + "\n        return tl.dot(a, b, acc, max_num_imprecise_acc=IMP)",
                          "return tl.dot(a, b, acc)")
    else:
        src = SRC.replace(LINE, f"IMP: tl.constexpr = {imp} if BLOCK_K >= {imp} else BLOCK_K")
    assert src != SRC
    path = pathlib.Path(tempfile.mkdtemp()) / f"_moe_jit_{name}.py"
    path.write_text(src)
    spec = importlib.util.spec_from_file_location(f"truepeak.kernels._moe_jit_{name}", path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod
    spec.loader.exec_module(mod)
    return mod


def main() -> None:
    out = pathlib.Path(sys.argv[1])
    out.mkdir(parents=True, exist_ok=True)
    points = sys.argv[2:] or ["deepseek-v3:16", "deepseek-v3:32", "deepseek-v3:64", "glm-5:16", "glm-5:32"]
    shipped = fused._kernels()
    variants = {"shipped (every 128)": None, "every 256": variant("p256", 256), "never": variant("never", None)}
    read_bw = moe.measure_read_bandwidth()
    rows = []
    weights = {}
    for item in points:
        model, tpe = item.split(":")
        tpe = float(tpe)
        shape = moe.expert_shape(model)
        if model not in weights:
            weights.clear()
            torch.cuda.empty_cache()
            weights[model] = moe.make_weights(shape, "fp8", "cuda", 0)
        w1, w2 = weights[model]
        x, ids, topw = moe.decode_inputs(shape, tpe)
        counts = torch.bincount(ids[ids >= 0], minlength=shape.E_local).tolist()
        nbytes = moe.active_bytes(w1, w2, counts)
        ref = moe.reference_rows(x, w1, w2, ids, topw)
        base = FusedMoE(x, w1, w2, ids, topw, tokens_per_expert=tpe)
        pair = (base.cfg1, base.cfg2)
        k256 = tuple(dataclasses.replace(c, block_k=256, num_stages=min(c.num_stages, 3)) for c in pair)
        out_base = None
        for vname, mod in variants.items():
            kernels = shipped if mod is None else (mod.gate_up_kernel, mod.down_kernel)
            fused._kernels = lambda k=kernels: k
            for cname, cfg in (("tuned", pair), ("tuned, K step 256", k256)):
                if vname == "every 256" and cname == "tuned":
                    continue  # 128-element steps promote every step whatever the interval
                try:
                    fn = FusedMoE(x, w1, w2, ids, topw, tokens_per_expert=tpe, config=cfg)
                    o = fn()[:16].float()
                    if out_base is None:
                        out_base = o
                    err = float((o - ref).abs().max() / ref.abs().max())
                    err_b = float((o - out_base).abs().max() / out_base.abs().max())
                    m = time_cuda(lambda _i: fn(), n_sets=1, warmup_s=0.05, budget_s=0.2, graph=True,
                                  min_samples=5, telemetry=False)
                    t = m.steady_median_s
                    row = dict(model=model, tokens_per_expert=tpe, promotion=vname, config=cname,
                               gate_up=dataclasses.asdict(fn.cfg1), down=dataclasses.asdict(fn.cfg2), time_s=t,
                               read_bandwidth_fraction=nbytes / t / read_bw, error_vs_reference=err,
                               error_vs_shipped=err_b)
                    print(f"{model} {tpe:g} {vname:20s} {cname:18s} {100 * nbytes / t / read_bw:6.1f} % "
                          f"err {err:.4f} vs shipped {err_b:.4f}", flush=True)
                except Exception as exc:  # noqa: BLE001 - a variant that fails is data
                    row = dict(model=model, tokens_per_expert=tpe, promotion=vname, config=cname,
                               error=f"{type(exc).__name__}: {str(exc).splitlines()[0][:200]}")
                    print(row, flush=True)
                rows.append(row)
                fn = None
        fused._kernels = lambda k=shipped: k
        (out / "fp8_promotion.json").write_text(json.dumps(dict(read_bandwidth_bytes_per_s=read_bw, rows=rows),
                                                           indent=1))


if __name__ == "__main__":
    main()
