"""`truepeak moe bench`: one MoE layer's routed-expert forward at decode, timed per backend against the read roofline.

The unit of work (issue #5): hidden states ``x [T, H]`` (bf16, uniform in [-1, 1]) and router output (top-k ids and
weights ``[T, k]``) → ``out [T, H] = Σ_j w[t, j] · down_e(silu(gate_e x) · up_e x)``. SiLU-gated for every model
(gpt-oss's clamped SwiGLU is the same amount of elementwise work and is not implemented).

What is timed: the whole unit — token gather, both projections, activation, routing-weight scaling and the combine —
as a CUDA-graph replay (:func:`truepeak.bench.cuda_timer.time_cuda` with ``graph=True``). The routing *metadata*
(per-expert sorted token ids, offsets, padding: "alignment") is computed once per routing, outside the timed region,
for every backend alike. Expert weights (≥ 0.8 GB per point) are far larger than the 60 MB L2, so each replay streams
them from HBM; the few-MB activations may stay in L2, as in a real decode step.

Points: the tokens-per-expert axis is the target mean over the *global* experts: ``T = tpe · E / k`` tokens routed
top-k over all E experts; with ``--ep N`` the GPU holds ``E/N`` contiguous experts and only the slots routed to them
are computed (``E_local``); with ``--tp N`` every expert's width ``I`` is divided by N.

Per point (one record, kind ``moe_experts``): time, TFLOPS (2 · 3 · H · I per routed slot), bytes of the weights of
the experts that received tokens (values + scales) and GB/s, the fraction of the read bandwidth measured in the same
run (:func:`measure_read_bandwidth`, a Triton read-only reduction over 4 GiB) and of the roofline
``max(bytes / read_bw, flop / dense_peak)``, the error against a float32 reference (on up to 16 tokens), status.

Backends: ``per_expert`` (two matmuls per active expert, replayed from a CUDA graph), ``bmm`` (padded batched matmul
over all local experts), ``grouped_mm`` (``torch._grouped_mm``, bf16) / ``scaled_grouped_mm``
(``torch._scaled_grouped_mm``, fp8 w8a8 with per-row activation and per-channel weight scales), and ``triton``
(truepeak's kernel, :mod:`truepeak.kernels.moe_triton`; fp8 there is w8a8 with per-row e4m3 activations, as
the torch fp8 backend; fp4 by default as each format's :func:`~truepeak.kernels.moe_triton.default_activations`:
nvfp4 w4a16, mxfp4 w4a8; ``fp4_activations`` picks one for both; on Blackwell fp4 weights run the block-scaled
kernel, :mod:`truepeak.kernels.moe_blockscaled`, compiled for sm_100 / sm_120 but not run on one). A combination a
backend cannot run is a ``skipped`` record with the reason; an error or out-of-memory is a ``failed`` record and the
sweep goes on.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any, Callable, Iterable

from truepeak.errors import TruepeakError, UnknownNameError, UnsupportedError, closest, require
from truepeak.records import Correctness, MoeExpertsMetrics, MoeExpertsWorkload, Record, RecordWriter, make_record

KIND = "moe_experts"
BACKENDS = ("per_expert", "bmm", "grouped_mm", "triton")
#: --fp4-kernel values (our kernel with nvfp4 / mxfp4 weights).
FP4_KERNELS = ("auto", "dequant", "block-scaled")
#: --weights values: bf16, fp8 (e4m3, per-channel fp32 scales), fp8_block (128 x 128 scales), nvfp4, mxfp4.
WEIGHT_FORMATS = ("bf16", "fp8", "fp8_block", "nvfp4", "mxfp4")
DEFAULT_TPE = (1, 2, 4, 8, 16, 32, 64, 128, 256)
#: Fallback shapes (H, I, E, k) from the bundled presets (truepeak/moe/presets) when truepeak.moe.config is unavailable.
_FALLBACK = {"deepseek-v3": (7168, 2048, 256, 8), "glm-5": (6144, 2048, 256, 8),
             "qwen3-235b-a22b": (4096, 1536, 128, 8), "gpt-oss-120b": (2880, 2880, 128, 4)}


@dataclass(frozen=True)
class ExpertShape:
    """A model's routed-expert shape on one GPU: hidden ``H``, per-expert width ``I`` (after TP), ``E`` global experts,
    ``E_local`` on this GPU (after EP), ``top_k``."""

    model: str
    H: int
    I: int
    E: int
    E_local: int
    top_k: int
    tp: int = 1
    ep: int = 1


def expert_shape(model: str, tp: int = 1, ep: int = 1) -> ExpertShape:
    """The expert shape of ``model`` (a name :func:`truepeak.moe.config.load_model` takes) under TP or EP.

    Raises:
        UnsupportedError: the model has no MoE layers. TruepeakError: ``tp``/``ep`` < 1, both > 1, EP not dividing E,
            TP not dividing I. UnknownNameError: unknown model.
    """
    if tp < 1 or ep < 1:
        raise TruepeakError(f"--tp and --ep must be >= 1, got tp={tp}, ep={ep}")
    if tp > 1 and ep > 1:
        raise TruepeakError("give --tp or --ep, not both (the expert layer is split one way per benchmark)")
    try:
        from truepeak.moe.config import load_model
    except ImportError:  # pragma: no cover - before truepeak.moe existed
        key = model.lower()
        if key not in _FALLBACK:
            raise UnknownNameError(f"unknown model {model!r}; known: {', '.join(_FALLBACK)}") from None
        h, i, e, k = _FALLBACK[key]
    else:
        m = load_model(model)
        if not getattr(m, "num_moe_layers", 0):
            raise UnsupportedError(f"model {model!r} has no MoE layers: there is no expert layer to benchmark")
        h, i, e, k = m.hidden_size, m.experts.intermediate_size, m.experts.num_experts, m.experts.top_k
        model = m.name
    if e % ep:
        raise TruepeakError(f"--ep {ep} does not divide the {e} experts of {model}; use a divisor of {e}")
    if i % tp:
        raise TruepeakError(f"--tp {tp} does not divide the expert width I={i} of {model}")
    return ExpertShape(model, h, i // tp, e, e // ep, k, tp, ep)


# -- routing -----------------------------------------------------------------------------------------------------------
def sample_routing(spec: str, T: int, E: int, k: int, seed: int = 0) -> Any:
    """Top-k expert ids ``[T, k]`` (int64, CPU; distinct experts per token) from routing ``spec``, in the planner's
    routing grammar (:mod:`truepeak.moe.routing.grammar`, so a ``moe bench`` record and a ``moe plan`` of the same
    routing mean the same distribution): :func:`truepeak.moe.routing.sample_routing_ids`.

    - ``uniform``: each token picks k distinct experts uniformly.
    - ``powerlaw:ALPHA[:random|sorted|balanced]``: Zipf popularity by rank, (rank + 1)^-ALPHA, water-filled to
      inclusion probabilities p_e (Σ p_e = k, each ≤ 1), ranks placed on expert ids at random (seeded) unless a
      placement is named; each token picks exactly k distinct experts, expert e with probability p_e.
    - a per-expert histogram file (E counts): the same, with p_e ∝ its counts.
    - a ``topk_ids`` file (rows of k ids; text, .json or .npy): its rows, repeated and cut to T rows.

    Raises:
        TruepeakError: a spec the grammar refuses (unknown text, a malformed exponent, ids out of [0, E) or rows that
            are not k wide), or k > E.
    """
    torch = require("torch", "sampling MoE routing")
    from truepeak.moe.routing import sample_routing_ids

    return torch.from_numpy(sample_routing_ids(spec, T, k, E, seed=seed))


def tokens_for(tpe: float, shape: ExpertShape) -> int:
    """Tokens T in the layer for a target mean of ``tpe`` tokens per (global) expert: ``T = tpe · E / k``.

    Raises:
        TruepeakError: ``tpe`` <= 0, not a number or infinite.
    """
    if not (tpe > 0 and math.isfinite(tpe)):
        raise TruepeakError(f"tokens per expert must be a finite number > 0, got {tpe}; give e.g. 1,2,4,8,16,32")
    return max(1, round(tpe * shape.E / shape.top_k))


def local_ids(ids: Any, shape: ExpertShape, rank: int = 0) -> Any:
    """Map global ids to this EP rank's local ids (contiguous placement); other ranks' experts become -1."""
    lo = rank * shape.E_local
    loc = ids - lo
    return loc.masked_fill((loc < 0) | (loc >= shape.E_local), -1)


# -- weights -----------------------------------------------------------------------------------------------------------
def make_weights(shape: ExpertShape, wfmt: str, device: Any, seed: int = 0, w4a8: bool = False,
                 standard: bool = False, mma: bool = False) -> tuple[Any, Any]:
    """Random expert weights ``w1 [E_local, 2I, H]``, ``w2 [E_local, H, I]`` as :class:`ExpertWeights`.

    fp4 bytes are random codes labelled as already in the layout our kernel reads (``w4a8``: the w4a8 layout of
    :func:`~truepeak.kernels.moe_triton.to_w4a8_layout`; ``mma``: the MMA layout of
    :func:`~truepeak.kernels.moe_triton.to_mma_layout`; ``standard``: the standard packing, which the block-scaled
    kernels read; otherwise :func:`~truepeak.kernels.moe_triton.fp4_block_k` chunks), so no repack copy of
    gigabytes is made; the reference reads them back through that layout.

    Values are drawn directly in the stored format (random bytes for fp4 codes, fp8 values from uniform [-1, 1] ·
    0.05, block scales in a realistic range), so a 20 GB bf16 weight set needs no float32 copy; the reference
    dequantises only the experts it checks.

    Raises:
        UnknownNameError: unknown format. UnsupportedError: a shape the format (or, with ``w4a8``, its layout: N
        and K multiples of 64) cannot hold; the bench makes the format's points ``skipped``.
    """
    torch = require("torch", "building MoE weights")
    from truepeak.kernels.moe_triton import ExpertWeights, check_wfmt, fp4_block_k

    check_wfmt(wfmt)
    g = torch.Generator(device=device).manual_seed(seed)

    def one(n: int, k: int) -> Any:
        e = shape.E_local
        if wfmt == "bf16":
            return ExpertWeights(wfmt, ((torch.rand(e, n, k, device=device, generator=g, dtype=torch.bfloat16) * 2 - 1)
                                        * 0.05))
        if wfmt in ("fp8", "fp8_block"):
            v = ((torch.rand(e, n, k, device=device, generator=g, dtype=torch.bfloat16) * 2 - 1) * 448).to(
                torch.float8_e4m3fn)
            if wfmt == "fp8":
                s = torch.rand(e, n, device=device, generator=g) * 1e-4 + 5e-5
            else:
                if n % 128 or k % 128:
                    raise UnsupportedError(f"fp8_block needs N and K multiples of 128, got N={n}, K={k}")
                s = torch.rand(e, n // 128, k // 128, device=device, generator=g) * 1e-4 + 5e-5
            return ExpertWeights(wfmt, v, s)
        if (w4a8 or mma) and (n % 64 or k % 64):  # to_w4a8_layout's tiles; checked here, as the bytes are labelled, not made
            raise UnsupportedError(f"{wfmt} in the tiled layout (the w4a8 and w4a16 kernels) needs N and K "
                                   f"multiples of 64, got N={n}, "
                                   f"K={k}")
        packed = torch.randint(0, 256, (e, n, k // 2), device=device, generator=g, dtype=torch.uint8)
        if wfmt == "nvfp4":
            if k % 16:
                raise UnsupportedError(f"nvfp4 needs K a multiple of 16, got K={k}")
            s = (torch.rand(e, n, k // 16, device=device, generator=g) * 200 + 100).to(torch.float8_e4m3fn)
            gs = torch.full((e,), 0.05 / (6 * 300), device=device)
            return ExpertWeights(wfmt, packed, s, gs, nibble_chunk=chunk(k), w4a8_layout=w4a8, mma_layout=mma)
        if k % 32:
            raise UnsupportedError(f"mxfp4 needs K a multiple of 32, got K={k}")
        s = torch.randint(119, 122, (e, n, k // 32), device=device, generator=g, dtype=torch.uint8)
        # random codes: labelled as already in the kernel's nibble order (the reference reorders them back)
        return ExpertWeights(wfmt, packed, s, nibble_chunk=chunk(k), w4a8_layout=w4a8, mma_layout=mma)

    def chunk(k: int) -> int:
        return 0 if standard and not (w4a8 or mma) else 64 if w4a8 or mma else fp4_block_k(k)

    return one(2 * shape.I, shape.H), one(shape.H, shape.I)


# -- torch backends ----------------------------------------------------------------------------------------------------
class _Prepared:
    """Per-routing metadata shared by the torch backends (computed outside the timed region)."""

    def __init__(self, ids: Any, weights: Any, E: int):
        torch = require("torch", "the MoE torch backends")
        self.T, self.k = ids.shape
        flat = ids.reshape(-1)
        valid = flat >= 0
        slots = torch.nonzero(valid).reshape(-1)
        order = torch.argsort(flat[slots], stable=True)
        self.slots = slots[order]                     # valid slots sorted by expert
        self.tokens = self.slots // self.k            # their token rows
        self.wts = weights.reshape(-1)[self.slots].float()[:, None]
        self.counts = torch.bincount(flat[self.slots], minlength=E)
        self.offs = torch.cumsum(self.counts, 0).to(torch.int32)
        self.counts_host = self.counts.tolist()
        self.max_m = max(self.counts_host) if self.counts_host else 0


def _silu_mul(h: Any) -> Any:
    torch = require("torch", "the MoE torch backends")
    i = h.shape[-1] // 2
    return torch.nn.functional.silu(h[..., :i]) * h[..., i:]


def build_torch_backend(backend: str, x: Any, w1: Any, w2: Any, ids: Any, topw: Any) -> Callable[[], Any]:
    """A no-argument callable running the unit on a torch backend (CUDA-graph capturable), or UnsupportedError."""
    torch = require("torch", "the MoE torch backends")
    E = w1.shape[0]
    fmt = w1.wfmt
    p = _Prepared(ids, topw, E)
    T, H = x.shape
    out = torch.zeros(T, H, dtype=x.dtype, device=x.device)
    if backend == "grouped_mm" and fmt in ("fp8",):
        if not hasattr(torch, "_scaled_grouped_mm"):
            raise UnsupportedError(f"torch {torch.__version__} has no torch._scaled_grouped_mm")
        b1 = w1.data.transpose(1, 2)
        b2 = w2.data.transpose(1, 2)
        s1, s2 = w1.scale.float(), w2.scale.float()

        def run_fp8() -> Any:
            xs = x[p.tokens]
            sa = xs.float().abs().amax(dim=1).clamp(min=1e-12) / 448.0
            xq = (xs.float() / sa[:, None]).to(torch.float8_e4m3fn)
            h = torch._scaled_grouped_mm(xq, b1, sa, s1, offs=p.offs, out_dtype=torch.bfloat16)
            a = _silu_mul(h)
            sa2 = a.float().abs().amax(dim=1).clamp(min=1e-12) / 448.0
            aq = (a.float() / sa2[:, None]).to(torch.float8_e4m3fn)
            y = torch._scaled_grouped_mm(aq, b2, sa2, s2, offs=p.offs, out_dtype=torch.bfloat16)
            out.zero_()
            out.index_add_(0, p.tokens, (y.float() * p.wts).to(out.dtype))
            return out

        return run_fp8
    if fmt != "bf16":
        fp8_note = ("; fp8 weights run w8a8 on the grouped_mm backend (torch._scaled_grouped_mm)"
                    if fmt.startswith("fp8") else "")
        raise UnsupportedError(f"backend {backend} has no {fmt} path: torch has no {fmt} "
                               f"{'grouped' if backend == 'grouped_mm' else 'batched'} matmul{fp8_note}")
    if backend == "per_expert":
        groups = []
        start = 0
        for e, c in enumerate(p.counts_host):
            if c:
                groups.append((e, p.tokens[start:start + c], p.wts[start:start + c]))
            start += c

        def run_per_expert() -> Any:
            out.zero_()
            for e, tok, wt in groups:
                h = x[tok] @ w1.data[e].T
                y = _silu_mul(h) @ w2.data[e].T
                out.index_add_(0, tok, (y.float() * wt).to(out.dtype))
            return out

        return run_per_expert
    if backend == "bmm":
        m = max(p.max_m, 1)
        # padded gather index [E, m] into x with a zero row at index T; rank of each sorted slot within its expert
        starts = torch.cumsum(p.counts, 0) - p.counts
        e_of = torch.repeat_interleave(torch.arange(E, device=x.device), p.counts)
        rank = torch.arange(p.slots.numel(), device=x.device) - starts[e_of]
        gidx = torch.full((E, m), T, dtype=torch.int64, device=x.device)
        gidx[e_of, rank] = p.tokens
        gw = torch.zeros(E, m, 1, device=x.device)
        gw[e_of, rank] = p.wts
        xz = torch.cat([x, torch.zeros(1, H, dtype=x.dtype, device=x.device)])
        oz = torch.zeros(T + 1, H, dtype=x.dtype, device=x.device)

        def run_bmm() -> Any:
            xb = xz[gidx]                                   # [E, m, H]
            h = torch.bmm(xb, w1.data.transpose(1, 2))
            y = torch.bmm(_silu_mul(h), w2.data.transpose(1, 2))
            oz.zero_()
            oz.index_add_(0, gidx.reshape(-1), (y.float() * gw).to(x.dtype).reshape(-1, H))
            return oz[:T]

        return run_bmm
    if backend == "grouped_mm":
        if not hasattr(torch, "_grouped_mm"):
            raise UnsupportedError(f"torch {torch.__version__} has no torch._grouped_mm")
        b1 = w1.data.transpose(1, 2)
        b2 = w2.data.transpose(1, 2)

        def run_grouped() -> Any:
            xs = x[p.tokens]
            h = torch._grouped_mm(xs, b1, offs=p.offs)
            y = torch._grouped_mm(_silu_mul(h), b2, offs=p.offs)
            out.zero_()
            out.index_add_(0, p.tokens, (y.float() * p.wts).to(out.dtype))
            return out

        return run_grouped
    raise UnknownNameError(f"unknown MoE backend {backend!r}; expected one of {', '.join(BACKENDS)}")


def build_backend(backend: str, x: Any, w1: Any, w2: Any, ids: Any, topw: Any, tpe: float,
                  smem_limit: Any = None, tune: dict | None = None, activations: str | None = None,
                  fp4_kernel: str = "dequant", fp4_layout: str | None = None) -> Callable[[], Any]:
    """A no-argument callable for ``backend`` (``triton`` = :class:`truepeak.kernels.moe_triton.FusedMoE`, with
    ``tune`` overriding its :class:`~truepeak.kernels.moe_triton.KernelConfig` fields and ``activations`` its
    activation precision; with fp4 weights and ``fp4_kernel="block-scaled"``,
    :class:`truepeak.kernels.moe_blockscaled.BlockScaledMoE`, whose activations are ``"fp4"`` or ``"fp8"`` and
    which takes no ``tune``; ``fp4_layout`` FusedMoE's fp4 kernels, ``"mma"``, ``"tiles"`` or None for the
    format's default; the torch backends ignore them all).

    Raises:
        UnsupportedError: a combination the backend cannot run on this device (the bench's ``skipped``)."""
    kernel = str(fp4_kernel).lower()
    if kernel not in ("dequant", "block-scaled"):
        raise TruepeakError(f"fp4_kernel {fp4_kernel!r}: expected dequant or block-scaled (run_bench resolves auto)")
    if backend == "triton" and kernel == "block-scaled" and getattr(w1, "wfmt", None) in ("nvfp4", "mxfp4"):
        from truepeak.kernels.moe_blockscaled import BlockScaledMoE, check_blockscaled_activations

        try:
            check_blockscaled_activations(w1.wfmt, activations)
        except TruepeakError as exc:
            raise UnsupportedError(str(exc)) from None
        if tune:
            raise UnsupportedError("the block-scaled kernel takes no triton_tune")
        return BlockScaledMoE(x, w1, w2, ids, topw, tokens_per_expert=tpe, activations=activations)
    if backend == "triton":
        from truepeak.kernels.moe_triton import FusedMoE

        fp4 = getattr(w1, "wfmt", None) in ("nvfp4", "mxfp4")
        return FusedMoE(x, w1, w2, ids, topw, tokens_per_expert=tpe, smem_limit=smem_limit, tune=tune,
                        activations=activations, fp4_layout=fp4_layout if fp4 else None)
    return build_torch_backend(backend, x, w1, w2, ids, topw)


# -- counts ------------------------------------------------------------------------------------------------------------
def active_bytes(w1: Any, w2: Any, counts: Iterable[int]) -> int:
    """Bytes of the weights (values + scales) of the experts that received at least one token."""
    active = sum(1 for c in counts if c > 0)
    return active * (w1.nbytes_per_expert() + w2.nbytes_per_expert())


def unit_flop(shape: ExpertShape, routed_slots: int) -> int:
    """FLOP of the unit: 2 · (2I · H + H · I) per routed (token, expert) slot."""
    return 2 * 3 * shape.H * shape.I * routed_slots


# -- read bandwidth ----------------------------------------------------------------------------------------------------
def measure_read_bandwidth(nbytes: int = 4 << 30, budget_s: float = 0.5) -> float:
    """The read-only ceiling of this run: a Triton reduction over ``nbytes`` (≥ 4 GiB by default), CUDA-graph timed;
    returns bytes/s (median of the best of three launch shapes). The issue's H200 figure: 4.54 TB/s."""
    torch = require("torch", "measuring read bandwidth")
    if not torch.cuda.is_available():
        raise UnsupportedError("measuring the read bandwidth needs a CUDA GPU (torch sees none)")
    from truepeak.bench.cuda_timer import time_cuda
    from truepeak.kernels._moe_jit import read_sum_kernel

    n = nbytes // 4
    # A private generator: the default CUDA generator is unusable after an aborted graph capture elsewhere.
    buf = torch.rand(n, device="cuda", dtype=torch.float32, generator=torch.Generator(device="cuda").manual_seed(0))
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    best = 0.0
    for block, per_sm, warps in ((4096, 8, 8), (8192, 4, 8), (2048, 16, 4)):  # the best of three launch shapes
        programs = sms * per_sm
        per = (n + programs - 1) // programs
        per = (per + block - 1) // block * block
        part = torch.empty(programs, device="cuda", dtype=torch.float32)

        def fn(_i: int, buf=buf, block=block, programs=programs, per=per, part=part, warps=warps) -> None:
            read_sum_kernel[(programs,)](buf, part, n, per, BLOCK=block, num_warps=warps)

        m = time_cuda(fn, n_sets=1, warmup_s=0.2, budget_s=budget_s / 3, graph=True, min_samples=5, telemetry=False)
        best = max(best, n * 4 / m.steady_median_s)
    del buf
    return best


# -- the sweep ---------------------------------------------------------------------------------------------------------
@dataclass
class BenchPoint:
    """One point's workload fields (the record's ``workload``)."""

    model: str
    E_local: int
    H: int
    I: int
    top_k: int
    tokens_per_expert: float
    T: int
    routing: str
    weights_format: str
    layout: str


def _error(out: Any, ref: Any) -> float:
    return float((out.float() - ref).abs().max() / ref.abs().max().clamp(min=1e-12))


def reference_rows(x: Any, w1: Any, w2: Any, ids: Any, topw: Any, rows: int = 16, act_quant: Any = None) -> Any:
    """float32 reference of the first ``rows`` tokens, dequantising only the experts they use (``act_quant``: as
    :func:`~truepeak.kernels.moe_triton.moe_reference`'s)."""
    torch = require("torch", "the MoE reference")
    from truepeak.kernels.moe_triton import ExpertWeights, moe_reference

    ids_r, w_r = ids[:rows], topw[:rows]
    used = sorted(e for e in torch.unique(ids_r).tolist() if e >= 0)
    if not used:
        return torch.zeros(ids_r.shape[0], x.shape[1], device=x.device)
    sel = torch.tensor(used, device=x.device)

    def sub(w: Any) -> Any:
        return ExpertWeights(w.wfmt, w.data[sel], None if w.scale is None else w.scale[sel],
                             None if w.global_scale is None else w.global_scale[sel], w.nibble_chunk,
                             w.w4a8_layout, w.mma_layout).dequantize()

    remap = torch.full((w1.shape[0] + 1,), -1, dtype=torch.int64, device=x.device)
    remap[sel] = torch.arange(len(used), device=x.device)
    loc = torch.where(ids_r >= 0, remap[ids_r.clamp(min=0)], torch.full_like(ids_r, -1))
    return moe_reference(x[:rows], sub(w1), sub(w2), loc, w_r, act_quant=act_quant)


def _check_fp4_choice(fp4_kernel: str, fp4_activations: str, weights: list[str], why: str = "") -> None:
    """Refuse, before measuring, fp4 activations the fp4 kernel does not take: the dequantising kernels take fp8 or
    fp16, the block-scaled one fp4 (nvfp4, mxfp4) or fp8 (mxfp4 only)."""
    from truepeak.kernels.moe_blockscaled import ACTIVATIONS

    fp4_fmts = [w for w in weights if w in ("nvfp4", "mxfp4")]
    if not fp4_fmts or fp4_activations == "auto":
        return
    # FusedMoE takes fp8 or fp16 activations for fp4 weights; the block-scaled kernel what ACTIVATIONS lists
    takes = {f: ("fp8", "fp16") if fp4_kernel == "dequant" else ACTIVATIONS[f] for f in fp4_fmts}
    if any(fp4_activations not in takes[f] for f in fp4_fmts):
        raise TruepeakError(f"--fp4-activations {fp4_activations} with --fp4-kernel {fp4_kernel}{why} and weights "
                            f"{', '.join(fp4_fmts)}: the dequantising kernels take fp8 or fp16, the block-scaled one "
                            "fp4 (nvfp4, mxfp4) or fp8 (mxfp4 only)")


def run_bench(model: str, *, tp: int = 1, ep: int = 1, tokens_per_expert: Iterable[float] = DEFAULT_TPE,
              routing: str = "uniform", weights: Iterable[str] = ("bf16",), backends: Iterable[str] = BACKENDS,
              out_path: str | None = None, budget_s: float = 0.15, warmup_s: float = 0.05,
              read_bw: float | None = None, seed: int = 0, progress: Callable[[Record], None] | None = None,
              env: Any = None, triton_tune: dict[str, dict] | None = None,
              fp8_activations: str = "fp8", fp4_activations: str = "auto", fp4_kernel: str = "auto",
              fp4_layout: str = "auto") -> list[Record]:
    """Sweep tokens per expert x formats x backends for one model and layout; return (and append) records
    (:class:`truepeak.records.Record` of kind ``moe_experts``).

    ``triton_tune`` maps a weight format to KernelConfig overrides for the triton backend (recorded in the workload as
    ``triton_tune``). ``fp8_activations``: our kernel with fp8 weights runs ``"fp8"`` (w8a8, the default) or
    ``"fp16"`` (w8a16); ``fp4_activations`` for nvfp4 / mxfp4 weights: ``"auto"`` (default: each format's
    :func:`~truepeak.kernels.moe_triton.default_activations`, fp16 for nvfp4 and fp8 for mxfp4), ``"fp8"`` (w4a8)
    or ``"fp16"`` (w4a16), and with the block-scaled kernel ``"fp4"`` (W4A4) or ``"fp8"`` (mxfp4 W4A8).
    ``fp4_kernel``: ``"auto"`` (the block-scaled kernel, :mod:`truepeak.kernels.moe_blockscaled`, where it runs
    natively: sm_100, sm_103, sm_120; else the dequantising FusedMoE), ``"dequant"`` or ``"block-scaled"``;
    ``fp4_layout`` the dequantising kernels' weight layout (FusedMoE's, recorded as ``workload.fp4_layout``):
    ``"auto"`` (default: :func:`~truepeak.kernels.moe_triton.default_fp4_layout`), ``"mma"`` or ``"tiles"``. The
    record's ``workload.activations`` says which activations ran, ``workload.fp4_kernel`` which kernel, and for the
    block-scaled one ``workload.kernel_path`` how the device ran it (native block-scaled MMA or Triton's emulation);
    its ``correctness.passed`` is checked against the float32 reference with the activations rounded as the kernel
    rounds them (``correctness.max_rel_error_same_rounding``, tolerance 2e-2), while ``correctness.max_rel_error``
    stays the error against unrounded activations, comparable across kernels (W4A4 is far less accurate).

    Raises (before any measurement): TruepeakError for bad model/layout/routing/format/backend names, tokens per
    expert <= 0, or fp4 activations the chosen fp4 kernel does not take. Per point, errors become ``failed`` records
    and unsupported combinations ``skipped`` ones.
    """
    torch = require("torch", "the MoE benchmark")
    from truepeak.kernels.moe_blockscaled import default_blockscaled_activations
    from truepeak.kernels.moe_triton import default_activations, default_fp4_layout
    from truepeak.bench.environment import environment
    from truepeak.moe.routing import parse_routing

    shape = expert_shape(model, tp, ep)
    parse_routing(routing, shape.E, shape.top_k)
    fp8_activations = str(fp8_activations).lower()
    if fp8_activations not in ("fp8", "fp16"):
        raise TruepeakError(f"--fp8-activations {fp8_activations!r}: expected fp8 (w8a8) or fp16 (w8a16)")
    fp4_activations = str(fp4_activations).lower()
    if fp4_activations not in ("auto", "fp8", "fp16", "fp4"):
        raise TruepeakError(f"--fp4-activations {fp4_activations!r}: expected auto (fp16 for nvfp4, fp8 for mxfp4; "
                            "with the block-scaled kernel fp4 for nvfp4, fp8 for mxfp4), fp16 (w4a16), fp8 (w4a8) or "
                            "fp4 (W4A4, block-scaled kernel only)")
    if fp4_layout not in ("auto", "mma", "tiles"):
        raise TruepeakError(f"fp4_layout {fp4_layout!r}: expected auto, mma or tiles")
    fp4_kernel = str(fp4_kernel).lower()
    if fp4_kernel not in FP4_KERNELS:
        raise TruepeakError(f"--fp4-kernel {fp4_kernel!r}: expected {', '.join(FP4_KERNELS)} (auto: block-scaled on "
                            "Blackwell, sm_100 / sm_103 / sm_120; dequant elsewhere)")
    if isinstance(budget_s, bool) or not isinstance(budget_s, (int, float)) or not 0 < budget_s < math.inf:
        raise TruepeakError(f"--budget {budget_s} must be a finite number of seconds > 0 (timed seconds per point, "
                            "e.g. 0.2)")
    if isinstance(tokens_per_expert, (str, bytes)) or isinstance(weights, bytes) or isinstance(backends, bytes):
        raise TruepeakError("tokens_per_expert must be a list of numbers (e.g. [1, 8, 32]); weights and backends "
                            "lists or comma-separated strings")
    try:
        tpes = [float(t) for t in tokens_per_expert]
    except (TypeError, ValueError):
        raise TruepeakError(f"tokens per expert must be numbers, got {tokens_per_expert!r}") from None
    if not tpes:
        raise TruepeakError("no tokens per expert given (e.g. [1, 8, 32])")
    for t in tpes:
        tokens_for(t, shape)
    # a comma-separated string is a list (the CLI's form), not a sequence of letters
    weights = weights.split(",") if isinstance(weights, str) else list(weights)
    backends = backends.split(",") if isinstance(backends, str) else list(backends)
    if not weights or not backends:
        raise TruepeakError(f"no weight format or backend given (weights {weights!r}, backends {backends!r})")
    if read_bw is not None and not (isinstance(read_bw, (int, float)) and 0 < read_bw < math.inf):
        raise TruepeakError(f"read_bw must be a finite number of bytes per second > 0, got {read_bw!r}")
    if isinstance(warmup_s, bool) or not isinstance(warmup_s, (int, float)) or not 0 <= warmup_s < math.inf:
        raise TruepeakError(f"warmup_s must be a finite number of seconds >= 0, got {warmup_s!r}")
    if triton_tune is not None:
        import dataclasses

        from truepeak.kernels.moe_triton import KernelConfig

        fields = {f.name for f in dataclasses.fields(KernelConfig)}
        if not isinstance(triton_tune, dict) or not all(isinstance(v, dict) for v in triton_tune.values()):
            raise TruepeakError(f"triton_tune must map a weight format to a dict of KernelConfig fields, got "
                                f"{triton_tune!r}")
        for fmt, tune in triton_tune.items():
            bad = sorted(set(tune) - fields)
            if fmt not in WEIGHT_FORMATS or bad:
                raise TruepeakError(f"triton_tune[{fmt!r}]: formats are {', '.join(WEIGHT_FORMATS)} and fields "
                                    f"{', '.join(sorted(fields))}; got {fmt!r} with {', '.join(bad) or 'valid fields'}")
    for w in weights:
        if w not in WEIGHT_FORMATS:
            raise UnknownNameError(f"unknown --weights {w!r}; expected one of {', '.join(WEIGHT_FORMATS)}"
                                   + (f" (did you mean {closest(w, WEIGHT_FORMATS)[0]}?)"
                                      if closest(w, WEIGHT_FORMATS) else ""))
    for b in backends:
        if b not in BACKENDS:
            raise UnknownNameError(f"unknown backend {b!r}; expected one of {', '.join(BACKENDS)}")
    if fp4_kernel != "auto":
        _check_fp4_choice(fp4_kernel, fp4_activations, weights)
    if not torch.cuda.is_available():
        raise UnsupportedError("truepeak moe bench needs a CUDA GPU (torch sees none)")
    cc = tuple(torch.cuda.get_device_capability())
    if fp4_kernel == "auto":  # Blackwell: the block-scaled MMA; elsewhere the dequantising kernels
        from truepeak.kernels.moe_blockscaled import NATIVE_CAPABILITIES

        fp4_kernel = "block-scaled" if cc in NATIVE_CAPABILITIES else "dequant"
        _check_fp4_choice(fp4_kernel, fp4_activations, weights, f" (auto on sm_{cc[0]}{cc[1]})")
    from truepeak.bench.cuda_timer import time_cuda
    from truepeak.hardware.detect import detect

    dev = detect("cuda")
    env = env if env is not None else environment()
    if read_bw is None:
        read_bw = measure_read_bandwidth()
    try:
        peak_bf16 = dev.accelerator.dense_flops("bf16") if dev.accelerator is not None else None
    except Exception:
        peak_bf16 = None
    layout = f"tp{tp}" if tp > 1 else (f"ep{ep}" if ep > 1 else "single")
    writer = RecordWriter(out_path) if out_path else None
    records: list[Record] = []

    def emit(rec: Record) -> None:
        records.append(rec)
        if writer:
            writer.write(rec)
        if progress:
            progress(rec)

    try:
        for wfmt in weights:
            try:
                fp4 = wfmt in ("nvfp4", "mxfp4")
                fp4_acts = None
                scaled = fp4 and fp4_kernel == "block-scaled"
                if fp4:
                    auto = default_blockscaled_activations(wfmt, cc) if scaled else default_activations(wfmt)
                    fp4_acts = auto if fp4_activations == "auto" else fp4_activations
                # fp4 in the layout our kernel reads (made here, so it does not repack a copy): the standard packing
                # for the block-scaled kernel, else the tiled one
                tiled = not scaled
                lay = default_fp4_layout(wfmt) if fp4 and fp4_layout == "auto" else fp4_layout
                w1, w2 = make_weights(shape, wfmt, "cuda", seed, w4a8=fp4 and tiled and lay == "tiles",
                                      standard=scaled, mma=fp4 and tiled and lay == "mma")
            except Exception as exc:  # OOM or unsupported shape: every point of this format fails/skips
                torch.cuda.empty_cache()
                for t in tpes:
                    for b in backends:
                        wl = asdict(BenchPoint(shape.model, shape.E_local, shape.H, shape.I, shape.top_k, t,
                                               tokens_for(t, shape), routing, wfmt, layout))
                        st = "skipped" if isinstance(exc, UnsupportedError) else "failed"
                        emit(_moe_record(kind=KIND, workload=wl, backend=b, format=wfmt, measurement=None,
                                         status=st, reason=f"weights: {exc}", env=env, mode="sustained"))
                continue
            for t in tpes:
                T = tokens_for(t, shape)
                g_ids = sample_routing(routing, T, shape.E, shape.top_k, seed)
                ids = local_ids(g_ids, shape).cuda()
                topw = torch.softmax(torch.rand(T, shape.top_k, generator=torch.Generator().manual_seed(seed)),
                                     dim=1).cuda()
                x = (torch.rand(T, shape.H, device="cuda", dtype=torch.bfloat16,
                                generator=torch.Generator(device="cuda").manual_seed(seed)) * 2 - 1)
                counts = torch.bincount(ids[ids >= 0], minlength=shape.E_local).tolist()
                slots = sum(counts)
                nbytes = active_bytes(w1, w2, counts)
                flop = unit_flop(shape, slots)
                wl = asdict(BenchPoint(shape.model, shape.E_local, shape.H, shape.I, shape.top_k, t, T, routing,
                                       wfmt, layout))
                wl["active_experts"] = sum(1 for c in counts if c)
                wl["max_tokens_per_expert"] = max(counts) if counts else 0
                ref = reference_rows(x, w1, w2, ids, topw)
                for b in backends:
                    rec_kw = dict(kind=KIND, workload=wl, backend=b, format=wfmt, env=env, mode="sustained")
                    try:
                        tune = (triton_tune or {}).get(wfmt) if b == "triton" else None
                        if tune:
                            rec_kw["workload"] = {**wl, "triton_tune": tune}
                        acts_arg = fp8_activations if wfmt.startswith("fp8") else fp4_acts
                        fn = build_backend(b, x, w1, w2, ids, topw, t, smem_limit=dev, tune=tune,
                                           activations=acts_arg, fp4_kernel=fp4_kernel if b == "triton" else
                                           "dequant", fp4_layout=lay)
                        # the activations' precision in the GEMMs (ours: fp8 weights run w8a8 by default)
                        acts = getattr(fn, "activations", None) or (
                            "fp8 e4m3, per-row scale" if wfmt.startswith("fp8") else "bf16")
                        rec_kw["workload"] = {**rec_kw["workload"], "activations": acts}
                        act_fmt = getattr(fn, "act_format", None)  # the block-scaled kernel's activation rounding
                        if fp4 and b == "triton":
                            rec_kw["workload"]["fp4_kernel"] = "block-scaled" if act_fmt else "dequant"
                            if not act_fmt:
                                rec_kw["workload"]["fp4_layout"] = lay
                        if act_fmt:
                            rec_kw["workload"].update(kernel_path=fn.path, native=fn.native)
                        out = fn()
                        err = _error(out[:ref.shape[0]], ref)
                        # quantised weights: 8e-2; with e4m3 activations (w8a8, w4a8: each activation rounded by up
                        # to 2^-4 relative) 1e-1, as the CPU tests (at H = I = 128 a float32 emulation of the same
                        # rounding is 4-8 % from the reference; measured shapes stay at 2-6 %)
                        tol = 2e-2 if wfmt == "bf16" else 1e-1 if str(acts).startswith("fp8") else 8e-2
                        correct = Correctness(max_rel_error=err, passed=err <= tol,
                                              reference="float32, first 16 tokens")
                        if act_fmt:  # against the same activation rounding: only bf16 outputs and sum order differ
                            from truepeak.kernels.moe_blockscaled import fake_quantize_rows

                            ref_q = reference_rows(x, w1, w2, ids, topw,
                                                   act_quant=lambda a, f=act_fmt: fake_quantize_rows(a, f))
                            err_q = _error(out[:ref_q.shape[0]], ref_q)
                            tol = 2e-2
                            # max_rel_error stays the error against unrounded activations (comparable with the
                            # other kernels: the format's accuracy); the check is against the same rounding (whether
                            # the kernel computes what it should)
                            correct = Correctness(max_rel_error=err, passed=err_q <= tol,
                                                  reference="float32, first 16 tokens",
                                                  max_rel_error_same_rounding=err_q,
                                                  checked_against=f"float32, first 16 tokens, activations rounded to "
                                                                  f"{act_fmt} as the kernel rounds them")
                            err = err_q
                        if not err <= tol:
                            emit(_moe_record(**rec_kw, measurement=None, status="failed", correctness=correct,
                                             reason=f"output differs from the float32 reference: max error "
                                                    f"{err:.3g} of max |ref| (tolerance {tol})"))
                            continue
                        m = time_cuda(lambda _i: fn(), n_sets=1, warmup_s=warmup_s, budget_s=budget_s, graph=True,
                                      min_samples=5, telemetry=False)
                        ts = m.steady_median_s
                        roof = max(nbytes / read_bw, flop / peak_bf16 if peak_bf16 else 0.0)
                        derived = MoeExpertsMetrics(time_s=ts, flop=flop, flop_per_s=flop / ts, bytes=nbytes,
                                                    bytes_per_s=nbytes / ts, read_bandwidth_bytes_per_s=read_bw,
                                                    read_bandwidth_fraction=nbytes / ts / read_bw,
                                                    roofline_fraction=roof / ts, dense_peak_flop_per_s=peak_bf16)
                        emit(_moe_record(**rec_kw, measurement=m, status="ok", correctness=correct, derived=derived))
                    except UnsupportedError as exc:
                        emit(_moe_record(**rec_kw, measurement=None, status="skipped", reason=str(exc)))
                    except Exception as exc:  # noqa: BLE001 - a failed point is data; the sweep goes on
                        if "out of memory" in str(exc).lower():
                            torch.cuda.empty_cache()
                        emit(_moe_record(**rec_kw, measurement=None, status="failed",
                                         reason=f"{type(exc).__name__}: {str(exc).splitlines()[0][:300]}"))
                    finally:
                        fn = None
            del w1, w2
            torch.cuda.empty_cache()
    finally:
        if writer:
            writer.close()
    return records


def _moe_record(*, workload: dict[str, Any], **kw: Any) -> Record:
    """:func:`truepeak.records.make_record` of one point, its workload fields as the point built them up."""
    return make_record(workload=MoeExpertsWorkload(**workload), **kw)


def plot_records(records: Iterable[Record], path: str) -> str:
    """Plot % of read bandwidth vs tokens per expert, one line per (backend, format); matplotlib imported here."""
    plt = require("matplotlib.pyplot", "plotting", "pip install matplotlib")
    series: dict[str, list[tuple[float, float]]] = {}
    for r in records:
        if not r.ok or r.derived.read_bandwidth_fraction is None:
            continue
        key = f"{r.backend} {r.format}"
        point = (r.workload.tokens_per_expert, 100 * r.derived.read_bandwidth_fraction)
        series.setdefault(key, []).append(point)
    fig, ax = plt.subplots(figsize=(7, 4.5))
    for key, pts in sorted(series.items()):
        pts.sort()
        ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", label=key)
    ax.set_xscale("log", base=2)
    ax.set_xlabel("tokens per expert (mean)")
    ax.set_ylabel("% of measured read bandwidth")
    ax.axhline(95, color="grey", lw=0.5, ls="--")
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
