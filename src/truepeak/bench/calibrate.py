"""Measure on one GPU what the planner's expected decode step is built from: the calibration's raw points.

What a roofline leaves out of a real decode step, measured the way a serving engine runs it (sustained, inside CUDA
graphs):

- **kernel cost**: the time of one tiny kernel inside a CUDA graph (``kernel.graph_s``: 64 dependent one-element
  adds per graph, per kernel) and launched eagerly from Python (``kernel.eager_s``: the same adds, no graph);
- **small ops** at decode shapes (rows = tokens in the step, cols = hidden size or expert count or vocabulary): an
  elementwise add, ``torch.nn.functional.rms_norm``, the router's softmax + top-k and the sampler's argmax, each with
  its bytes moved, inside a graph and with its inputs L2-resident, as in a step where the previous kernel wrote them;
- **GEMM efficiency against M**: cuBLAS through :class:`truepeak.bench.gemm.TorchGemm` (bf16, fp8 per-tensor, fp8
  with 128-block scales) at M = 1..512 on three weight shapes, weights rotated over more than 2x L2 so they stream from
  HBM as a decode step's do, each point with its fraction of the memory roofline against this run's read bandwidth;
- **decode attention efficiency against batch and context**: ``torch.nn.functional.scaled_dot_product_attention``
  with one query token per sequence over a KV cache of ``context`` tokens, its bytes (K and V read once) over its
  time against the read bandwidth;
- the **read bandwidth** of this run (:func:`truepeak.bench.read_bandwidth.measure_read_bandwidth`), the denominator
  of every fraction.

Routed-expert efficiency and collective latency are measured by ``truepeak moe bench`` and ``truepeak comm``; their
records join these points in the calibration file (``benchmarks/calibration.py``).

Every point is timed by :func:`truepeak.bench.cuda_timer.time_cuda` (CUDA events around graph replays, warm-up by
time, NVML off: the short windows make its samples meaningless). A point that fails is kept with its error, and the
sweep goes on. torch is imported lazily.
"""

from __future__ import annotations

import datetime as _dt
import json
import math
import os
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from truepeak.errors import TruepeakError, UnsupportedError, require

#: Version of the calibration points file this module writes.
CALIBRATION_POINTS_VERSION = 1
#: Tiny kernels per CUDA graph for the kernel-cost point (more amortise the graph launch; 64 is plenty: a graph
#: launch costs a few microseconds).
GRAPH_KERNELS = 64
#: Rows (tokens in a decode step) of the small-op and attention points.
SMALL_OP_ROWS: tuple[int, ...] = (1, 4, 16, 64, 256, 1024)
#: Hidden sizes of the small-op points (gpt-oss 2880, Qwen3-30B-A3B 2048, GLM-5 6144, DeepSeek-V3 7168).
SMALL_OP_COLS: tuple[int, ...] = (2048, 7168)
#: Router width (experts) and sampler width (vocabulary) of the small-op points: DeepSeek-V3's 256 and 129,280.
ROUTER_EXPERTS = 256
ROUTER_TOP_K = 8
VOCAB = 129_280
#: GEMM points: M, the (N, K) weight shapes (DeepSeek-V3 routed expert gate+up and down at TP1; an attention
#: projection 7168 -> 1536) and formats.
GEMM_M: tuple[int, ...] = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512)
GEMM_NK: tuple[tuple[int, int], ...] = ((4096, 7168), (7168, 2048), (1536, 7168))
GEMM_FORMATS: tuple[tuple[str, str | None], ...] = (("bf16", None), ("fp8_e4m3", "tensor"), ("fp8_e4m3", "block128"))
#: Attention points: batch x context, 8 KV heads of 128 (MHA: as many query heads), bf16.
ATTN_BATCH: tuple[int, ...] = (1, 4, 16, 64, 256)
ATTN_CONTEXT: tuple[int, ...] = (1024, 4096, 16384)
ATTN_HEADS = 8
ATTN_HEAD_DIM = 128
#: Largest KV cache of one attention point (tokens x heads x dim x 2 tensors x 2 bytes); larger points are skipped.
ATTN_MAX_BYTES = 8 << 30


@dataclass(frozen=True)
class Budgets:
    """Warm-up and timed seconds per point (short: each point is one kernel shape, and the sweep must fit in about
    two minutes on an H200)."""

    warmup_s: float = 0.1
    budget_s: float = 0.2


QUICK = Budgets(warmup_s=0.02, budget_s=0.05)


def _point(kind: str, **fields: Any) -> dict[str, Any]:
    return {"kind": kind, **fields}


def _timed(torch: Any, fn: Callable[[int], Any], n_sets: int, budgets: Budgets) -> float:
    """Median seconds per call of ``fn`` as a CUDA-graph replay (sustained), NVML off."""
    from truepeak.bench.cuda_timer import time_cuda

    m = time_cuda(fn, n_sets=n_sets, warmup_s=budgets.warmup_s, budget_s=budgets.budget_s, graph=True,
                  min_samples=5, telemetry=False)
    return float(m.steady_median_s)


def _eager_per_call(torch: Any, fn: Callable[[], Any], calls: int = 2000) -> float:
    """Seconds per call of ``fn`` launched eagerly ``calls`` times back to back (host launch rate and GPU time
    together), after one warm-up block, timed with CUDA events."""
    for _ in range(100):
        fn()
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(calls):
        fn()
    end.record()
    end.synchronize()
    return start.elapsed_time(end) * 1e-3 / calls


def measure_kernel_cost(torch: Any, budgets: Budgets) -> dict[str, Any]:
    """The cost of one tiny kernel: ``graph_s`` inside a CUDA graph of :data:`GRAPH_KERNELS` dependent one-element
    adds, and ``eager_s`` launched from Python one by one (seconds per kernel)."""
    x = torch.zeros(1, device="cuda", dtype=torch.float32)

    def body(_i: int) -> None:
        for _ in range(GRAPH_KERNELS):
            x.add_(1.0)

    graph_s = _timed(torch, body, 1, budgets) / GRAPH_KERNELS
    eager_s = _eager_per_call(torch, lambda: x.add_(1.0))
    return _point("kernel", graph_s=graph_s, eager_s=eager_s, kernels_per_graph=GRAPH_KERNELS)


def small_op_points(torch: Any, budgets: Budgets, rows: Iterable[int] = SMALL_OP_ROWS,
                    cols: Iterable[int] = SMALL_OP_COLS) -> list[dict[str, Any]]:
    """Time the small ops of a decode step at ``rows`` tokens: ``add`` and ``rms_norm`` over ``[rows, cols]`` bf16,
    ``router`` (fp32 softmax then top-:data:`ROUTER_TOP_K` over ``[rows, ROUTER_EXPERTS]``) and ``argmax`` over
    ``[rows, VOCAB]`` fp32 logits. Each point: op, rows, cols, kernels (torch kernels the op launches), bytes (read +
    written once), seconds (per op, inside a graph, inputs L2-resident unless larger than L2)."""
    F = torch.nn.functional
    bf16, f32 = torch.bfloat16, torch.float32
    out: list[dict[str, Any]] = []
    for r in rows:
        for c in cols:
            a = torch.rand((r, c), device="cuda", dtype=bf16)
            b = torch.rand((r, c), device="cuda", dtype=bf16)
            y = torch.empty_like(a)
            w = torch.ones(c, device="cuda", dtype=bf16)
            cases = [
                ("add", lambda _i, a=a, b=b, y=y: torch.add(a, b, out=y), 1, 3 * r * c * 2),
                ("rms_norm", lambda _i, a=a, w=w: F.rms_norm(a, (a.shape[-1],), w, 1e-6), None, 2 * r * c * 2 + c * 2),
            ]
            out += _time_cases(torch, budgets, cases, rows=r, cols=c)
        logits = torch.rand((r, ROUTER_EXPERTS), device="cuda", dtype=f32)
        vocab = torch.rand((r, VOCAB), device="cuda", dtype=f32)
        k = ROUTER_TOP_K
        cases = [
            ("router", lambda _i, x=logits: torch.topk(torch.softmax(x, dim=-1), k, dim=-1), None,
             r * ROUTER_EXPERTS * 4 * 2 + r * k * (4 + 8)),
            ("argmax", lambda _i, x=vocab: torch.argmax(x, dim=-1), 1, r * VOCAB * 4 + r * 8),
        ]
        out += _time_cases(torch, budgets, cases[:1], rows=r, cols=ROUTER_EXPERTS)
        out += _time_cases(torch, budgets, cases[1:], rows=r, cols=VOCAB)
    return out


def _time_cases(torch: Any, budgets: Budgets, cases: Sequence[tuple], **where: Any) -> list[dict[str, Any]]:
    out = []
    for name, fn, kernels, nbytes in cases:
        try:
            out.append(_point("small_op", op=name, **where, kernels=kernels, bytes=int(nbytes),
                              seconds=_timed(torch, fn, 1, budgets)))
        except Exception as exc:  # noqa: BLE001  (one point failing is data; the sweep goes on)
            out.append(_point("small_op", op=name, **where, error=_why(exc)))
    return out


def gemm_points(torch: Any, dev: Any, budgets: Budgets, read_bw: float, ms: Iterable[int] = GEMM_M,
                nks: Iterable[tuple[int, int]] = GEMM_NK,
                formats: Iterable[tuple[str, str | None]] = GEMM_FORMATS) -> list[dict[str, Any]]:
    """cuBLAS GEMMs at decode M, weights streamed from HBM (rotation over >= 2x L2): each point with its minimum
    bytes (:func:`truepeak.bench.gemm.gemm_workload`), seconds and ``memory_fraction`` = bytes / seconds /
    ``read_bw``."""
    from truepeak.bench import gemm as G
    from truepeak.bench.cuda_timer import plan_rotation

    out: list[dict[str, Any]] = []
    for fmt, scaling in formats:
        for n, k in nks:
            for m in ms:
                where = {"format": fmt, "scaling": scaling, "m": m, "n": n, "k": k}
                ok, reason = G.supported(fmt, dev, (m, n, k), scaling)
                if not ok:
                    out.append(_point("gemm", **where, error=reason))
                    continue
                g = None
                try:
                    work = G.gemm_workload(fmt, m, n, k, scaling)
                    free = torch.cuda.mem_get_info()[0]
                    plan = plan_rotation(work.min_bytes, int(dev.l2_bytes or 0), free_bytes=free)
                    g = G.TorchGemm(fmt, m, n, k, dev.torch_device, plan.n_sets, scaling=scaling)
                    with g.mode():
                        err = g.check(rows=min(m, 16))
                        if not G.check_passes(fmt, err):
                            raise TruepeakError(f"correctness check failed: relative error {err:.3g}")
                        t = _timed(torch, g, plan.n_sets, budgets)
                    out.append(_point("gemm", **where, bytes=int(work.min_bytes), flop=int(work.flop), seconds=t,
                                      memory_fraction=work.min_bytes / t / read_bw, rel_error=err))
                except Exception as exc:  # noqa: BLE001
                    out.append(_point("gemm", **where, error=_why(exc)))
                finally:
                    if g is not None:
                        g.close()
                    torch.cuda.empty_cache()
    return out


def attention_bytes(batch: int, context: int, heads: int = ATTN_HEADS, head_dim: int = ATTN_HEAD_DIM) -> int:
    """Bytes a decode attention call must move at least: K and V of the cache read once (bf16), the query read and the
    output written (one token per sequence)."""
    return 2 * batch * heads * context * head_dim * 2 + 2 * batch * heads * head_dim * 2


def attention_points(torch: Any, dev: Any, budgets: Budgets, read_bw: float, batches: Iterable[int] = ATTN_BATCH,
                     contexts: Iterable[int] = ATTN_CONTEXT) -> list[dict[str, Any]]:
    """Decode attention: ``scaled_dot_product_attention(q [B, H, 1, D], k, v [B, H, L, D])`` in bf16, the cache
    rotated over >= 2x L2; each point with bytes (:func:`attention_bytes`), seconds and ``memory_fraction``."""
    from truepeak.bench.cuda_timer import rotation_sets

    F = torch.nn.functional
    out: list[dict[str, Any]] = []
    for b in batches:
        for ctx in contexts:
            where = {"batch": b, "context": ctx, "heads": ATTN_HEADS, "head_dim": ATTN_HEAD_DIM}
            nbytes = attention_bytes(b, ctx)
            if nbytes > ATTN_MAX_BYTES:
                out.append(_point("attention", **where, error=f"KV cache of {nbytes:,} B is over the sweep's limit"))
                continue
            sets = []
            try:
                n_sets = rotation_sets(nbytes, int(dev.l2_bytes or 0))
                shape = (b, ATTN_HEADS, ctx, ATTN_HEAD_DIM)
                for _ in range(n_sets):
                    q = torch.rand((b, ATTN_HEADS, 1, ATTN_HEAD_DIM), device="cuda", dtype=torch.bfloat16)
                    sets.append((q, torch.rand(shape, device="cuda", dtype=torch.bfloat16),
                                 torch.rand(shape, device="cuda", dtype=torch.bfloat16)))

                def fn(i: int, sets=sets) -> Any:
                    q, k, v = sets[i]
                    return F.scaled_dot_product_attention(q, k, v)

                t = _timed(torch, fn, n_sets, budgets)
                out.append(_point("attention", **where, bytes=nbytes, seconds=t, memory_fraction=nbytes / t / read_bw))
            except Exception as exc:  # noqa: BLE001
                out.append(_point("attention", **where, error=_why(exc)))
            finally:
                sets.clear()
                torch.cuda.empty_cache()
    return out


def _why(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0][:300] if text else ''}"


def measure(out_path: str | os.PathLike, *, quick: bool = False, progress: Callable[[str], None] | None = None,
            argv: Sequence[str] | None = None) -> dict[str, Any]:
    """Measure every calibration point on CUDA device 0 and write them as one JSON document to ``out_path``.

    Returns the document: ``calibration_points_version``, ``device`` (name, compute capability, SMs, L2 bytes),
    ``environment`` (:func:`truepeak.bench.environment.environment` when present), ``date`` (UTC),
    ``read_bandwidth_bytes_per_s`` and ``points`` (kernel, small_op, gemm and attention points; see the module
    docstring). ``quick`` shortens every budget and trims the grids (a smoke test).

    Raises:
        MissingDependencyError: torch is not installed.
        UnsupportedError: no CUDA GPU.
        TruepeakError: ``out_path`` cannot be written.
    """
    torch = require("torch", "measuring a calibration")
    if not torch.cuda.is_available():
        raise UnsupportedError("a calibration is measured on a CUDA GPU; torch sees none")
    from truepeak.bench.read_bandwidth import measure_read_bandwidth
    from truepeak.hardware.detect import detect

    say = progress or (lambda _msg: None)
    budgets = QUICK if quick else Budgets()
    dev = detect("cuda")
    read_bw = measure_read_bandwidth(nbytes=(1 << 30) if quick else (4 << 30))
    say(f"read bandwidth {read_bw / 1e12:.3f} TB/s")
    points: list[dict[str, Any]] = [measure_kernel_cost(torch, budgets)]
    say(f"kernel in a graph {points[0]['graph_s'] * 1e6:.2f} us, eager {points[0]['eager_s'] * 1e6:.2f} us")
    rows = SMALL_OP_ROWS[::2] if quick else SMALL_OP_ROWS
    points += small_op_points(torch, budgets, rows=rows)
    say(f"small ops: {sum(p['kind'] == 'small_op' for p in points)} points")
    ms = GEMM_M[::3] if quick else GEMM_M
    points += gemm_points(torch, dev, budgets, read_bw, ms=ms)
    say(f"gemm: {sum(p['kind'] == 'gemm' for p in points)} points")
    points += attention_points(torch, dev, budgets, read_bw,
                               batches=ATTN_BATCH[::2] if quick else ATTN_BATCH)
    say(f"attention: {sum(p['kind'] == 'attention' for p in points)} points")
    doc = {
        "calibration_points_version": CALIBRATION_POINTS_VERSION,
        "device": {"name": dev.name, "catalog_key": getattr(dev.accelerator, "key", None) if dev.matched_catalog
                   else None, "compute_capability": dev.compute_capability, "sm_count": dev.sm_count,
                   "l2_bytes": dev.l2_bytes},
        "environment": _environment(argv),
        "date": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds").replace("+00:00", "Z"),
        "quick": quick,
        "read_bandwidth_bytes_per_s": read_bw,
        "points": points,
    }
    write_points(doc, out_path)
    return doc


def _environment(argv: Sequence[str] | None) -> dict[str, Any] | None:
    """The machine and software, as the JSON of :class:`truepeak.records.Environment` (best effort: None on error)."""
    from truepeak.bench.environment import environment

    try:
        return environment(argv).to_dict()
    except Exception:  # noqa: BLE001  (the environment is best effort)
        return None


def write_points(doc: dict[str, Any], out_path: str | os.PathLike) -> Path:
    """Write the document as indented JSON (non-finite numbers as null).

    Raises:
        TruepeakError: the file cannot be written; the message names it.
    """
    p = Path(out_path)
    try:
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(json.dumps(_finite(doc), indent=1) + "\n", encoding="utf-8")
    except OSError as exc:
        raise TruepeakError(f"cannot write the calibration points to {p}: {exc.strerror or exc}") from exc
    return p


def _finite(obj: Any) -> Any:
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if isinstance(obj, dict):
        return {k: _finite(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_finite(v) for v in obj]
    return obj


__all__ = ["CALIBRATION_POINTS_VERSION", "Budgets", "QUICK", "measure", "measure_kernel_cost", "small_op_points",
           "gemm_points", "attention_points", "attention_bytes", "write_points"]
