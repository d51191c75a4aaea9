"""The ``moe bench`` sweep: tokens per expert x weight formats x backends for one model and layout, one
``moe_experts`` record per point, appended the moment it is finished (:mod:`truepeak.bench.moe` for what is timed)."""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any, Callable, Iterable

from truepeak.bench.moe.backends import BACKENDS, build_backend
from truepeak.bench.moe.reference import check_output, reference_rows
from truepeak.bench.moe.shapes import expert_shape, local_ids, sample_routing, tokens_for, unit_flop
from truepeak.bench.moe.weights import active_bytes, make_weights
from truepeak.bench.read_bandwidth import measure_read_bandwidth
from truepeak.errors import TruepeakError, UnknownNameError, UnsupportedError, closest, require
from truepeak.records import MoeExpertsMetrics, MoeExpertsWorkload, Record, RecordWriter, make_record

KIND = "moe_experts"
#: --fp4-kernel values (our kernel with nvfp4 / mxfp4 weights).
FP4_KERNELS = ("auto", "dequant", "block-scaled")
#: --weights values: bf16, fp8 (e4m3, per-channel fp32 scales), fp8_block (128 x 128 scales), nvfp4, mxfp4.
WEIGHT_FORMATS = ("bf16", "fp8", "fp8_block", "nvfp4", "mxfp4")
DEFAULT_TPE = (1, 2, 4, 8, 16, 32, 64, 128, 256)


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
              fp8_activations: str = "fp8", fp4_activations: str = "auto", fp4_kernel: str = "auto") -> list[Record]:
    """Sweep tokens per expert x formats x backends for one model and layout; return (and append) records
    (:class:`truepeak.records.Record` of kind ``moe_experts``).

    ``triton_tune`` maps a weight format to KernelConfig overrides for the triton backend (recorded in the workload as
    ``triton_tune``). ``fp8_activations``: our kernel with fp8 weights runs ``"fp8"`` (w8a8, the default) or
    ``"fp16"`` (w8a16); ``fp4_activations`` for nvfp4 / mxfp4 weights: ``"auto"`` (default: each format's
    :func:`~truepeak.kernels.moe_triton.default_activations`, fp16 for nvfp4 and fp8 for mxfp4), ``"fp8"`` (w4a8)
    or ``"fp16"`` (w4a16), and with the block-scaled kernel ``"fp4"`` (W4A4) or ``"fp8"`` (mxfp4 W4A8).
    ``fp4_kernel``: ``"auto"`` (the block-scaled kernel, :mod:`truepeak.kernels.moe_blockscaled`, where it runs
    natively: sm_100, sm_103, sm_120; else the dequantising FusedMoE), ``"dequant"`` or ``"block-scaled"``. The
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
    from truepeak.kernels.moe_triton import default_activations
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
                w1, w2 = make_weights(shape, wfmt, "cuda", seed, w4a8=fp4 and tiled, standard=scaled)
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
                                           "dequant")
                        # the activations' precision in the GEMMs (ours: fp8 weights run w8a8 by default)
                        acts = getattr(fn, "activations", None) or (
                            "fp8 e4m3, per-row scale" if wfmt.startswith("fp8") else "bf16")
                        rec_kw["workload"] = {**rec_kw["workload"], "activations": acts}
                        act_fmt = getattr(fn, "act_format", None)  # the block-scaled kernel's activation rounding
                        if fp4 and b == "triton":
                            rec_kw["workload"]["fp4_kernel"] = "block-scaled" if act_fmt else "dequant"
                        if act_fmt:
                            rec_kw["workload"].update(kernel_path=fn.path, native=fn.native)
                        out = fn()
                        check = check_output(out, x, w1, w2, ids, topw, ref, wfmt, acts, act_fmt)
                        correct, err, tol = check
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
