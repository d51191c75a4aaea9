"""The ``moe bench`` sweep: tokens per expert x weight formats x backends for one model and layout
(:class:`~truepeak.bench.moe.config.MoeBenchConfig`), one ``moe_experts`` record per point, appended the moment it is
finished (:mod:`truepeak.bench.moe` for what is timed)."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any, Callable

from truepeak.bench.moe.backends import build_backend
from truepeak.bench.moe.config import MoeBenchConfig, check_fp4_choice
from truepeak.bench.moe.reference import check_output, reference_rows
from truepeak.bench.moe.shapes import decode_inputs, tokens_for, unit_flop
from truepeak.bench.moe.weights import active_bytes, make_weights
from truepeak.bench.read_bandwidth import measure_read_bandwidth
from truepeak.errors import TruepeakError, UnsupportedError, require
from truepeak.records import MoeExpertsMetrics, MoeExpertsWorkload, Record, RecordWriter, make_record

#: The records' kind.
KIND = "moe_experts"


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


def run_bench(config: MoeBenchConfig, *, out_path: str | None = None,
              progress: Callable[[Record], None] | None = None, env: Any = None) -> list[Record]:
    """Sweep ``config``'s tokens per expert x formats x backends; return the records (:class:`truepeak.records.Record`
    of kind ``moe_experts``), each appended to the JSON Lines file ``out_path`` (None: none written) and passed to
    ``progress`` as it is finished. ``env``: the records' environment (None: this machine's,
    :func:`truepeak.bench.environment.environment`).

    Per point: time (median of CUDA-graph replays for ``config.budget_s`` seconds), FLOP and bytes of the active
    experts, their rates and fractions of the read bandwidth and of the roofline, and the check against the float32
    reference (:func:`truepeak.bench.moe.reference.check_output`; a point that fails it is a ``failed`` record and is
    not timed). The record's ``workload.activations`` says which activations ran, ``workload.fp4_kernel`` which fp4
    kernel, and for the block-scaled one ``workload.kernel_path`` how the device ran it (native block-scaled MMA or
    Triton's emulation); an ok record of the Triton kernel holds in ``reason`` where its configuration came from
    (:attr:`FusedMoE.config_note <truepeak.kernels.moe_triton.FusedMoE>`: the tuned table and bucket, and the busy
    experts' launch under a skewed routing). ``fp4_kernel="auto"`` resolves here: the block-scaled kernel
    (:mod:`truepeak.kernels.moe_blockscaled`) where it runs natively (sm_100, sm_103, sm_120), else the dequantising
    :class:`~truepeak.kernels.moe_triton.FusedMoE`.

    Raises (before any measurement): TruepeakError when ``config`` is not a MoeBenchConfig; MissingDependencyError
    without torch; UnsupportedError without a CUDA GPU; ConfigError (field ``fp4_activations``) when the kernel
    ``auto`` picked does not take the given fp4 activations. Per point, errors become ``failed`` records and
    unsupported combinations ``skipped`` ones.
    """
    if not isinstance(config, MoeBenchConfig):
        raise TruepeakError(f"run_bench takes a MoeBenchConfig, got {type(config).__name__} {config!r}; build one "
                            "with truepeak.bench.moe.MoeBenchConfig(model, ...)")
    torch = require("torch", "the MoE benchmark")
    from truepeak.bench.environment import environment
    from truepeak.kernels.moe_blockscaled import default_blockscaled_activations
    from truepeak.kernels.moe_triton import default_activations, default_fp4_layout

    shape, tpes, routing, seed = config.shape, config.tokens_per_expert, config.routing, config.seed
    weights, backends, layout = config.weights, config.backends, config.layout
    fp8_activations, fp4_activations, fp4_kernel = config.fp8_activations, config.fp4_activations, config.fp4_kernel
    budget_s, warmup_s, read_bw, triton_tune = config.budget_s, config.warmup_s, config.read_bw, config.triton_tune
    if not torch.cuda.is_available():
        raise UnsupportedError("truepeak moe bench needs a CUDA GPU (torch sees none)")
    cc = tuple(torch.cuda.get_device_capability())
    if fp4_kernel == "auto":  # Blackwell: the block-scaled MMA; elsewhere the dequantising kernels
        from truepeak.kernels.moe_blockscaled import NATIVE_CAPABILITIES

        fp4_kernel = "block-scaled" if cc in NATIVE_CAPABILITIES else "dequant"
        check_fp4_choice(fp4_kernel, fp4_activations, weights, f" (auto on sm_{cc[0]}{cc[1]})")
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
                lay = default_fp4_layout(wfmt) if fp4 and config.fp4_layout == "auto" else config.fp4_layout
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
                x, ids, topw = decode_inputs(shape, t, routing, seed, "cuda")
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
                        if b == "triton" and not config.split_busy:  # absent (the default) keeps the keys
                            rec_kw["workload"] = {**rec_kw["workload"], "split_busy": False}
                        acts_arg = fp8_activations if wfmt.startswith("fp8") else fp4_acts
                        fn = build_backend(b, x, w1, w2, ids, topw, t, smem_limit=dev, tune=tune,
                                           activations=acts_arg, fp4_kernel=fp4_kernel if b == "triton" else
                                           "dequant", fp4_layout=lay if fp4 else None,
                                           split_busy=config.split_busy)
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
                        emit(_moe_record(**rec_kw, measurement=m, status="ok", correctness=correct, derived=derived,
                                         reason=getattr(fn, "config_note", "")))
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
