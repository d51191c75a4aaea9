"""The backends that run the unit: torch's (per-expert matmuls, padded bmm, grouped matmul) and truepeak's kernels.

Each is a no-argument callable (CUDA-graph capturable) built for one routing; the routing metadata (per-expert sorted
token ids, offsets, padding) is computed when it is built, outside the timed region, for every backend alike.
"""

from __future__ import annotations

from typing import Any, Callable

from truepeak.errors import TruepeakError, UnknownNameError, UnsupportedError, require

BACKENDS = ("per_expert", "bmm", "grouped_mm", "triton")


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
                  fp4_kernel: str = "dequant", fp4_layout: str | None = None,
                  split_busy: bool = True) -> Callable[[], Any]:
    """A no-argument callable for ``backend`` (``triton`` = :class:`truepeak.kernels.moe_triton.FusedMoE`, with
    ``tune`` overriding its :class:`~truepeak.kernels.moe_triton.KernelConfig` fields and ``activations`` its
    activation precision; with fp4 weights and ``fp4_kernel="block-scaled"``,
    :class:`truepeak.kernels.moe_blockscaled.BlockScaledMoE`, whose activations are ``"fp4"`` or ``"fp8"`` and
    which takes no ``tune``; ``fp4_layout``: FusedMoE's fp4 weight layout, ``"mma"``, ``"tiles"`` or None for the
    format's default; ``split_busy``: FusedMoE's busy-expert launch; the torch backends ignore them all).

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

        return FusedMoE(x, w1, w2, ids, topw, tokens_per_expert=tpe, smem_limit=smem_limit, tune=tune,
                        activations=activations, split_busy=split_busy,
                        fp4_layout=fp4_layout if getattr(w1, "wfmt", None) in ("nvfp4", "mxfp4") else None)
    return build_torch_backend(backend, x, w1, w2, ids, topw)
