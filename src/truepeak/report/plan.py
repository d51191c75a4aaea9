"""`truepeak moe plan` rendered: the text a user reads and the ``--json`` document, from the planner's objects.

The planner (:mod:`truepeak.moe.plan`) returns plans, what-if cells and findings (:mod:`truepeak.moe.findings`) in
SI units; this module says every finding in a sentence (:func:`finding_text`), renders the plan's lines and tables,
and builds the JSON document (the planner's data plus those sentences: :func:`plan_json`). It is the only place the
planner's numbers become text, through :mod:`truepeak.units`:

- times in sentences: milliseconds / microseconds, three significant digits (``4.04 ms``, ``25.5 µs``); the step and
  the time-by lines four (``6.745 ms``); table cells in the unit of their header (:func:`truepeak.units.fmt_time_in`);
- shares of the step in sentences: one decimal from 10 % up, two significant digits below (``59.9 %``, ``3.2 %``);
  in the time-by lines and the padding figures one decimal (``0.0 %``);
- bytes in GB, four significant digits (``53.98 GB``); tokens/s whole from 100 up
  (:func:`~truepeak.units.fmt_tokens_per_s`); counts and FLOP per byte as plain numbers
  (:func:`~truepeak.units.fmt_number`); peaks in TFLOPS (:func:`~truepeak.units.fmt_rate`), bandwidths in GB/s
  (:func:`~truepeak.units.fmt_bandwidth`).
"""

from __future__ import annotations

import json

from truepeak.moe.findings import (ActivationsFallback, AllReduceShare, CommunicationBound, CompareOtherGpus,
                                   ComputeBound, ContextAboveLimit, CrossesBaseboard, DoesNotFit, ExpertGemmIntensity,
                                   Finding, MeasuredOtherDevices, MemoryBound, PcieCommunicationBound,
                                   UnquantisedGroups, WeightsDequantised)
from truepeak.moe.measured import other_devices_text
from truepeak.report.plan_expected import TEXT as EXPECTED_TEXT
from truepeak.report.plan_expected import expected_line, lever_lines
from truepeak.units import (fmt_bandwidth, fmt_bytes, fmt_number, fmt_pct, fmt_rate, fmt_time, fmt_time_in,
                            fmt_tokens_per_s)

#: The footer under the plan text.
FOOTER = ("Roofline time per op = max(FLOP / dense peak, bytes / memory bandwidth); collectives α + S·factor / busbw "
          "(nccl-tests); no compute/communication overlap. Expected step: the same ops at the measured fractions of "
          "the calibration, plus small kernels and launch costs (docs/planner.md, 'Expected step'). GB = 1e9 B, "
          "GB/s = 1e9 B/s, TFLOPS = 1e12 FLOP/s (decimal); peaks are DENSE.")


def table(headers: list[str], rows: list[list[str]], right: set[int] | None = None, *, width: int | None = None,
          wrap: set[int] | None = None, drop: dict[int, int] | None = None, indent: str = "") -> list[str]:
    """Plain aligned text table (a header, a row of dashes, the rows; columns two spaces apart), fitted into ``width``
    terminal columns by :func:`truepeak.report.fit.fit_lines` (None: not a terminal, the natural width). Columns in
    ``right`` are right-aligned numbers, never wrapped; columns in ``wrap`` wrap at spaces; ``drop`` maps the columns
    a narrow terminal may leave out to their priority (lowest first)."""
    from truepeak.report.fit import Column, fit_lines

    right, wrap, drop = right or set(), wrap or set(), drop or {}
    cols = [Column(h, numeric=i in right, wrap=i in wrap, drop=i in drop, priority=drop.get(i, 0))
            for i, h in enumerate(headers)]
    return fit_lines(cols, [[str(c) for c in r] for r in rows], width, indent=indent)


def _ms(seconds: float) -> str:
    """A time of the step and time-by lines: milliseconds, four significant digits."""
    return fmt_time(seconds, "ms")


def _share(fraction: float) -> str:
    """A share of the time-by lines and the padding figures: one decimal."""
    return fmt_pct(fraction, decimals=1)


def _gb(nbytes: float | None) -> str:
    return fmt_bytes(nbytes, "GB")


def _ms3(seconds: float) -> str:
    """A time in a sentence: milliseconds, three significant digits."""
    return fmt_time(seconds, "ms", 3)


def _us3(seconds: float) -> str:
    """A per-call time in a sentence: microseconds, three significant digits."""
    return fmt_time(seconds, "µs", 3)


def _pct2(fraction: float) -> str:
    """A share in a sentence: one decimal from 10 % up, two significant digits below."""
    return fmt_pct(fraction, digits=2)


#: The op groups (:data:`truepeak.moe.ops.GROUPS`) in words.
GROUP_WORDS = {"attention": "attention projections", "kv_cache": "attention over the KV cache", "router": "router",
               "routed_experts": "routed experts", "shared_experts": "shared experts", "dense_mlp": "dense MLP layers",
               "lm_head": "lm_head", "communication": "communication"}


def _words(items: list[str]) -> str:
    """``a``, ``a and b``, ``a, b and c``."""
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1]


# ----------------------------------------------------------------------------------------------------------------------
# Findings in words
# ----------------------------------------------------------------------------------------------------------------------

def _communication_bound(f: CommunicationBound) -> str:
    link = {"pcie": "PCIe", "network": "the network between nodes"}.get(f.interconnect, "NVLink")
    return (f"Communication-bound: {f.collectives} collectives take {_ms3(f.time_s)} of the {_ms3(f.step_s)} step "
            f"({_pct2(f.time_s / f.step_s)}), {f.calls} {f.collective.replace('_', '-')}s at {_us3(f.per_call_s)} "
            f"each over {link} — latency, not bandwidth, at these message sizes; fewer TP ranks, a custom all-reduce "
            "or larger batches per step would help most.")


def _memory_bound(f: MemoryBound) -> str:
    if f.group == "kv_cache":
        fix = ("the KV cache read grows with batch x context, so a shorter context, an fp8 KV cache"
               + (" or DP attention (MLA's latent cache is replicated over attention TP)" if f.dp_attention_helps
                  else "") + " would help most")
    else:
        fix = (f"weights dominate, so larger batches cost little until the expert GEMMs reach the "
               f"{fmt_number(f.ridge_flop_per_byte, decimals=0)} FLOP/B ridge")
    return (f"Memory-bound: each GPU streams {_gb(f.bytes)} of weights and KV cache per step at "
            f"{fmt_bandwidth(f.bandwidth_B_per_s)} GB/s ({_pct2(f.time_s / f.step_s)} of the {_ms3(f.step_s)} step; "
            f"{GROUP_WORDS[f.group]} {_pct2(f.group_s / f.step_s)}); {fix}.")


def _compute_bound(f: ComputeBound) -> str:
    return (f"Compute-bound: {GROUP_WORDS[f.group]} take {_pct2(f.group_s / f.step_s)} of the {_ms3(f.step_s)} step "
            f"at the {fmt_rate(f.peak_flop_per_s)} TFLOPS dense {f.compute_format} peak; a lower-precision format or "
            "more GPUs would help most.")


def _expert_gemm_intensity(f: ExpertGemmIntensity) -> str:
    bound = "memory-bound" if f.memory_bound else "compute-bound"
    return (f"routed experts: {fmt_number(f.mean_tokens_per_expert)} tokens per expert on average (T·k/E = "
            f"{f.tokens}·{f.top_k}/{f.num_experts}), busiest expert {fmt_number(f.busiest_expert_tokens, 3)}; the "
            f"expert GEMMs run at {fmt_number(f.flop_per_byte, 3)} FLOP/B ({fmt_number(f.flop_per_weight_byte, 3)} "
            f"per weight byte) against a {fmt_number(f.ridge_flop_per_byte, decimals=0)} FLOP/B ridge "
            f"({f.compute_format}) → {bound}: judge them by % of memory bandwidth, not % of {f.compute_format} peak")


def _all_reduce_share(f: AllReduceShare) -> str:
    major = " — a major share of the step" if f.major else ""
    return (f"{f.calls} all-reduces per step ({f.layer_calls} in the layers: 2 per layer) at {_us3(f.per_call_s)} "
            f"each = {_ms3(f.time_s)}, {_pct2(f.time_s / f.step_s)} of the {_ms3(f.step_s)} step{major}")


def _pcie_communication_bound(f: PcieCommunicationBound) -> str:
    why = ("each small all-reduce costs ~20-35 µs of latency whatever its size" if f.small_batch else
           "PCIe bus bandwidth (~24 GB/s busbw on 8 GPUs) does not grow with the GPU count (see docs/method.md, "
           "'busbw and algbw')")
    return (f"communication-bound: TP{f.tp_group} over PCIe only — collectives take {_ms3(f.time_s)} "
            f"({_pct2(f.time_s / f.step_s)}) of the step at batch {f.batch}; {why}, and vLLM / SGLang disable their "
            "custom all-reduce for more than two PCIe-only GPUs; prefer TP <= 2 (EP / PP for the rest) on PCIe boxes "
            "(see docs/method.md, 'Small-message latency')")


def _crosses_baseboard(f: CrossesBaseboard) -> str:
    return (f"{f.stage_gpus} GPUs per pipeline stage exceed one {f.accelerator} baseboard ({f.baseboard_gpus} GPUs in "
            "one NVLink domain): their collectives cross boxes over InfiniBand / RoCE, which this plan does not model "
            "(it uses single-box NVLink numbers, so communication is optimistic); keep TP / EP within "
            f"{f.baseboard_gpus} GPUs and use PP across boxes, or pass --measured from a multi-node truepeak comm run")


def _does_not_fit(f: DoesNotFit) -> str:
    return (f"does not fit: {_gb(f.total_bytes)} per GPU ({_gb(f.weights_bytes)} weights + {_gb(f.kv_cache_bytes)} "
            f"KV cache) exceeds the {_gb(f.capacity_bytes)} of {f.accelerator} by {_gb(f.over_bytes)}")


def _activations_fallback(f: ActivationsFallback) -> str:
    return f"{f.accelerator} has no {f.requested} tensor-core path: activations run as {f.used}"


#: Why a device cannot compute in a weight format (:attr:`truepeak.moe.findings.WeightsDequantised.reason`).
DEQUANT_WHY = {"no_fp4": "has no fp4 tensor cores", "no_rate": "has no {rate} tensor-core path",
               "no_block_scaling": "has no hardware block scaling"}


def _weights_dequantised(f: WeightsDequantised) -> str:
    why = DEQUANT_WHY[f.reason].format(rate=f.rate)
    return (f"{f.accelerator} ({f.architecture}) {why}: {f.weights} weights are dequantised inside the GEMM "
            f"(Marlin-style W{f.weight_bits}A{f.activation_bits}) and compute at the dense {f.activations} peak of "
            f"{fmt_rate(f.peak_flop_per_s)} TFLOPS; weight bytes stay {fmt_number(f.bytes_per_value, 6)} B per value")


def _unquantised_groups(f: UnquantisedGroups) -> str:
    like = f" like the {_words([GROUP_WORDS[g] for g in f.quantised_groups])}" if f.quantised_groups else ""
    return (f"one weight format per plan: {_words([GROUP_WORDS[g] for g in f.groups])} are planned in {f.format}"
            f"{like}, though the checkpoint leaves them unquantised ({_gb(f.plan_bytes)} of weights per GPU here, "
            f"{_gb(f.bf16_bytes)} in bf16: their bytes and time are below the checkpoint's); router, embedding and "
            "lm_head are bf16 in every plan, as in the checkpoint")


def _context_above_limit(f: ContextAboveLimit) -> str:
    return (f"--context {f.context} is above {f.model}'s max_position_embeddings {f.limit}: planned anyway, but the "
            "model does not serve that context as configured")


def _compare_other_gpus(f: CompareOtherGpus) -> str:
    src = "--gpus" if f.gpus_given else "the plan above"
    return (f"--compare layout {f.layout} uses {f.layout_gpus} GPUs, not the {f.plan_gpus} of {src}: its row is "
            f"planned on {f.layout_gpus} GPUs (tokens/s total for {f.layout_gpus} GPUs; compare rows per GPU)")


def _measured_other_devices(f: MeasuredOtherDevices) -> str:
    n = sum(c for _, c in f.devices)
    return (f"--measured: left out {n} {'record' if n == 1 else 'records'} measured on another device than the "
            f"{f.accelerator} ({other_devices_text(dict(f.devices))}); a time measured elsewhere is not this GPU's")


_TEXT = {CommunicationBound: _communication_bound, MemoryBound: _memory_bound, ComputeBound: _compute_bound,
         ExpertGemmIntensity: _expert_gemm_intensity, AllReduceShare: _all_reduce_share,
         PcieCommunicationBound: _pcie_communication_bound, CrossesBaseboard: _crosses_baseboard,
         DoesNotFit: _does_not_fit, ActivationsFallback: _activations_fallback,
         WeightsDequantised: _weights_dequantised, UnquantisedGroups: _unquantised_groups,
         ContextAboveLimit: _context_above_limit, CompareOtherGpus: _compare_other_gpus,
         MeasuredOtherDevices: _measured_other_devices, **EXPECTED_TEXT}


def finding_text(f: Finding) -> str:
    """One finding (:mod:`truepeak.moe.findings`) in one sentence, its numbers through :mod:`truepeak.units`.

    Raises:
        TypeError: an object that is not a finding of :mod:`truepeak.moe.findings`.
    """
    try:
        return _TEXT[type(f)](f)
    except KeyError:
        raise TypeError(f"no sentence for {type(f).__name__}") from None


# ----------------------------------------------------------------------------------------------------------------------
# The plan's choices in words
# ----------------------------------------------------------------------------------------------------------------------

def interconnect_text(c) -> str:
    """Why the plan's collectives run over their interconnect (:class:`truepeak.moe.plan.InterconnectChoice`)."""
    if c.basis == "given":
        return "given"
    if c.basis == "catalog":
        return f"catalog: {c.catalog}"
    if c.basis == "catalog_xgmi":
        return f"catalog: {c.catalog} (XGMI treated as an NVLink-class fabric)"
    if c.basis == "bridge_beyond":
        return f"catalog: {c.catalog} (bridge links 2 GPUs; {c.gpus} talk over PCIe)"
    if c.basis == "board_without_nvlink":
        return f"no interconnect in the catalog; {c.device} boards have no NVLink (PCIe only)"
    if c.basis == "nvl_bridge":
        return "no interconnect in the catalog; NVL boards are NVLink-bridged up to 4 GPUs"
    if c.basis == "nvl_beyond_bridge":
        return "no interconnect in the catalog; NVL bridges link at most 4 GPUs, the rest is PCIe"
    return f"no interconnect in the catalog; {c.device} assumed on an NVLink/NVSwitch baseboard"


def weights_origin_text(choice) -> str:
    """One line: the weight format and where it came from (:class:`truepeak.moe.plan.WeightsChoice`), e.g. ``mxfp4,
    from the checkpoint's quantization_config (quant_method mxfp4: routed experts; it leaves model.layers.*.self_attn,
    ... unquantised)``, ``bf16, the --weights default (the config has no quantization_config)`` or ``nvfp4, from
    --weights (the checkpoint's quantization_config gives mxfp4)``."""
    c = choice
    if c.origin == "checkpoint":
        return f"{c.format}, from the checkpoint's quantization_config ({_checkpoint_words(c)})"
    if c.origin == "option":
        if c.checkpoint_format is None:
            return f"{c.format}, from --weights"
        if c.checkpoint_format == c.format:
            return f"{c.format}, from --weights, the checkpoint's own format ({_checkpoint_words(c)})"
        return f"{c.format}, from --weights (the checkpoint's quantization_config gives {c.checkpoint_format})"
    if c.quant_method:
        return (f"{c.format}, the --weights default (quantization_config quant_method {c.quant_method!r} has no "
                "truepeak format; --weights picks one)")
    dtype = f", torch_dtype {c.dtype}" if c.dtype else ""
    return f"{c.format}, the --weights default (the config has no quantization_config{dtype})"


def _checkpoint_words(c) -> str:
    head = f"quant_method {c.quant_method}"
    if c.weight_block_size:
        head += f", weight_block_size {list(c.weight_block_size)}"
    covers = _words([GROUP_WORDS[g] for g in c.quantised_groups]) if c.quantised_groups else "no weight GEMM"
    kept = f"; it leaves {', '.join(c.not_converted)} unquantised" if c.not_converted else ""
    return f"{head}: {covers}{kept}"


def peak_text(f) -> str:
    """What the GEMM compute peak is on this device (:class:`truepeak.moe.ops.Formats`): the weight format's dense
    peak, the wider activation format's, or the dequantised weights' finding."""
    for n in f.notes:
        if isinstance(n, WeightsDequantised):
            return finding_text(n)
    if f.mixed:
        return (f"{f.weights.name} weights x {f.activations.name} activations compute at the dense "
                f"{f.activations.name} peak of {fmt_rate(f.gemm_peak)} TFLOPS")
    return f"GEMMs compute at the dense {f.weights.name} peak of {fmt_rate(f.gemm_peak)} TFLOPS"


def scaling_text(f) -> str:
    """Which fp32 scale layout the plan counts for fp8 / int8 operands (:class:`truepeak.moe.ops.Formats`) and why,
    or "" when neither operand takes fp32 scales."""
    w, a = f.weights.name, f.activations.name
    if f.weight_scaling is None and f.activation_scaling is None:
        return ""
    if f.weight_scaling == "block128":
        acts = (f", {a} activations with one fp32 scale per 1 x 128 group (block-fp8 serving path)"
                if f.activation_scaling else "")
        return (f"{w} weights with one fp32 scale per 128 x 128 block (checkpoint weight_block_size [128, 128])"
                f"{acts}: scale bytes counted")
    parts = []
    if f.weight_scaling:
        parts.append(f"{w} weights assumed per-channel: one fp32 scale per output row (the checkpoint gives no "
                     "weight_block_size; a per-tensor checkpoint stores 4 B per tensor instead)")
    if f.activation_scaling:
        parts.append(f"{a} activations per-token: one fp32 scale per row")
    return "; ".join(parts) + ": scale bytes counted"


def render_plan(p, width: int | None = None) -> list[str]:
    """The lines of one plan (one batch size); the ops table fitted into ``width`` terminal columns (None: the
    natural width; :mod:`truepeak.report.fit`): where it must, it leaves out where each time came from, the op group
    and the shape, in that order."""
    lines = [f"batch {p.batch}, context {p.context} (layout {p.layout.name}: {p.layout.describe()})"]
    row = "  {:<16}{}".format
    lines.append(row("ceiling step", f"{_ms(p.step_s)} → {fmt_tokens_per_s(p.tokens_per_s)} tokens/s total, "
                             f"{fmt_tokens_per_s(p.tokens_per_s_per_gpu)} tokens/s per GPU, "
                             f"{fmt_tokens_per_s(p.tokens_per_s_per_user)} tokens/s per sequence"))
    e = p.expected
    if e is not None and e.mtp is not None:
        lines.append(row("MTP ceiling", f"{_ms(e.ceiling_s)} per step of {fmt_number(e.tokens_per_step, 3)} tokens "
                                        f"per sequence (MTP {e.mtp.draft_tokens} draft x "
                                        f"{_share(e.mtp.acceptance)} acceptance) → "
                                        f"{fmt_tokens_per_s(e.ceiling_tokens_per_s)} tokens/s total, "
                                        f"{fmt_tokens_per_s(e.ceiling_tokens_per_s / e.gpus)} tokens/s per GPU; "
                                        "the lines below break down the step without MTP"))
    if e is not None:
        lines.append(row("expected", expected_line(p.expected, lead=False)))
    b = p.time_by_bound()
    parts = [f"{k} {_ms(v)} ({_share(v / p.step_s)})" for k, v in b.items() if v > 0 or k != "pipeline_bubble"]
    lines.append(row("time by bound", " · ".join(parts)))
    g = p.time_by_group()
    lines.append(row("time by op", " · ".join(f"{GROUP_WORDS[k]} {_ms(v)} ({_share(v / p.step_s)})"
                                             for k, v in sorted(g.items(), key=lambda kv: -kv[1]))))
    lines.append(row("bottleneck", finding_text(p.bottleneck())))
    m = p.memory
    cap = f" of {_gb(m.capacity)}" if m.capacity else ""
    verdict = "fits" if m.fits else f"DOES NOT FIT: {_gb(m.over)} over"
    lines.append(row("memory per GPU", f"{_gb(m.total)}{cap} (weights {_gb(m.weights)} + KV cache "
                                       f"{_gb(m.kv_cache)} at {p.batch} x {p.context} tokens) — {verdict}"))
    if p.routing:
        r = p.routing
        ep = (f"; busiest GPU (EP{r.ep}) {fmt_number(r.busiest_gpu_pairs)} token-expert pairs vs "
              f"{fmt_number(r.mean_gpu_pairs)} mean, {fmt_number(r.gpu_active_experts)} of {r.experts_per_gpu} "
              "local experts active" if r.ep > 1 else "")
        lines.append(row("tokens/expert", f"mean {fmt_number(r.mean_tokens_per_expert)} (T·k/E = "
                                          f"{r.tokens}·{r.top_k}/{r.num_experts}), busiest expert "
                                          f"{fmt_number(r.busiest_expert_tokens, 3)}, "
                                          f"{fmt_number(r.active_experts)} of {r.num_experts} experts active; "
                                          f"padded rows {_share(r.expected_padding_16)} at BLOCK_M 16, "
                                          f"{_share(r.expected_padding_64)} at 64 (mean-based: "
                                          f"{_share(r.padding_16)} / {_share(r.padding_64)}; docs/method.md, "
                                          f"'Padding per expert'){ep} ({r.routing} routing)"))
    lines.append("  conclusions:")
    for c in p.conclusions():
        lines.append(f"    - {finding_text(c)}")
    lines.append("  ops on one GPU of the slowest stage, per step:")
    rows = []
    for op in p.ops:
        rows.append([op.name, op.group, str(op.calls), fmt_time_in(op.time_s, 1e-6), fmt_time_in(op.total_s, 1e-3),
                     op.bound, fmt_number(op.intensity, 3), op.shape, "measured" if op.measured else
                     ("α–β" if op.group == "communication" else "roofline")])
    lines += table(["op", "group", "calls", "µs/call", "ms/step", "bound", "FLOP/B", "shape", "time from"], rows,
                   right={2, 3, 4, 6}, wrap={0, 7}, drop={8: 0, 1: 1, 7: 2}, width=width, indent="    ")
    if p.bubble_s > 0:
        lines.append(f"    pipeline bubble: {_ms(p.bubble_s)} (fewer micro-batches than stages)")
    return lines


#: How a Formats scaling reads in the header.
SCALING_WORDS = {"block128": "fp32 scale per 128x128 block", "row": "fp32 scale per output row",
                 "tensor": "fp32 scale per tensor"}
#: The same for activations (block128 = 1 x 128 groups; row = per token).
ACT_SCALING_WORDS = {"block128": "fp32 scale per 1x128 group", "row": "fp32 scale per token",
                     "tensor": "fp32 scale per tensor"}


def _scaled(scaling: str | None, pre: str = " + ", post: str = "", words: dict = SCALING_WORDS) -> str:
    return f"{pre}{words[scaling]}{post}" if scaling else ""


def render_header(p, measured) -> list[str]:
    """The lines above the plans: model, GPUs and interconnect; formats and peaks; where the weight format came from
    (:attr:`truepeak.moe.plan.Plan.weights_origin`) and what one format does to weights the checkpoint keeps in bf16;
    the formats' notes; the measured data used."""
    f = p.formats
    lines = [f"{p.model} on {p.layout.gpus} x {p.accelerator}; interconnect {p.interconnect} "
             f"({interconnect_text(p.interconnect_choice)})",
             f"formats: weights {f.weights.name} ({fmt_number(f.weights.bytes_per_value, 6)} B/value"
             f"{_scaled(f.weight_scaling)}), activations {f.activations.name}"
             f"{_scaled(f.activation_scaling, ' (', ')', ACT_SCALING_WORDS)}, KV cache {f.kv_cache.name}; "
             f"GEMM peak {fmt_rate(f.gemm_peak)} TFLOPS dense {f.gemm_compute.name}, memory "
             f"{fmt_bandwidth(p.bandwidth)} GB/s → ridge {fmt_number(p.ridge, decimals=0)} FLOP/B"]
    if p.weights_origin is not None:
        lines.append(f"  weights: {weights_origin_text(p.weights_origin)}")
    for group, gf in f.groups:
        lines.append(f"  {GROUP_WORDS[group]}: weights {gf.weights.name} from --weights "
                     f"({fmt_number(gf.weights.bytes_per_value, 6)} B/value{_scaled(gf.weight_scaling)}); "
                     f"{peak_text(gf)}")
    if p.expected is not None:
        lines += [f"  {finding_text(a)}" for a in p.expected.assumptions]
    if p.weights_note is not None:
        lines.append(f"  {finding_text(p.weights_note)}")
    notes = [finding_text(n) for n in f.notes if not isinstance(n, WeightsDequantised)]
    for n in (peak_text(f), *notes, scaling_text(f)):
        if n:
            lines.append(f"  {n}")
    if measured is not None:
        used = sorted({n for n in p.measured_ops})
        lines.append(f"measured: {measured.summary()}; ops timed from measurements: "
                     f"{', '.join(used) if used else 'none matched (roofline / defaults used)'}")
        lines += [f"  {w}" for w in _unmatched(p, measured)]
    return lines


def _unmatched(p, measured) -> list[str]:
    """Why measured collectives / expert curves were not used by plan ``p`` (GPU count, experts, width)."""
    out = []
    comm = [op for op in p.ops if op.group == "communication"]
    if comm and not any(op.measured for op in comm) and (measured.collectives or measured.fits):
        have = sorted({k[1] for k in (*measured.collectives, *measured.fits)})
        need = sorted({op.detail.get("ranks") for op in comm if op.detail.get("ranks")})
        out.append(f"collectives were measured on {', '.join(map(str, have))} GPUs; this plan's run on "
                   f"{', '.join(map(str, need))}: literature defaults used (measure with truepeak comm "
                   f"--nproc-per-node {need[-1] if need else p.layout.gpus})")
    experts = [op for op in p.ops if op.group == "routed_experts"]
    if experts and not any(op.measured for op in experts) and measured.moe_experts:
        have = sorted({(k.get("experts"), k.get("width"), k.get("format"), k.get("routing"))
                       for k, *_ in measured.moe_experts}, key=str)
        r = p.routing
        e_local = (r.num_experts if r else 0) // max(1, p.layout.ep)
        width = (experts[0].detail.get("k") if "down" in experts[0].name else
                 (experts[0].detail.get("n") or 0) // 2)
        shown = "; ".join(f"E={e} N={n} {f} {rt}" for e, n, f, rt in have[:4]) + (" ..." if len(have) > 4 else "")
        out.append(f"expert curves measured for {shown}; this plan needs E={e_local} N={width} "
                   f"{p.formats.weights.name} {r.routing if r else None} (or above the largest measured tokens per "
                   "expert): roofline used")
    return out


def render_tuned(p) -> list[str]:
    """The vLLM and SGLang fused-MoE tuned-config file names of plan ``p``'s layout."""
    t = p.tuned_configs
    lines = [f"fused-MoE tuned-config files for this layout (E={t.experts_per_rank} experts per GPU, "
             f"N={t.n_per_rank} = I_e / expert TP):",
             f"  vLLM:   {t.vllm}   (vllm/model_executor/layers/fused_moe/configs/)",
             f"  SGLang: {t.sglang}   (python/sglang/srt/layers/moe/fused_moe_triton/configs/triton_<version>/)"]
    if t.note:
        lines.append(f"  note: {t.note}")
    return lines


def render_compare(cells, layouts, batches, width: int | None = None) -> list[str]:
    """The what-if table: one row per layout, one column per batch; cells tokens/s total; fitted into ``width``
    terminal columns (None: the natural width; :mod:`truepeak.report.fit`)."""
    by = {(c.layout, c.batch): c for c in cells}
    rows = []
    errors = []
    for lay in layouts:
        row = [lay.name, lay.describe()]
        for b in batches:
            c = by.get((lay.name, b))
            if c is None or c.plan is None:
                row.append("n/a")
                if c is not None and c.error and c.error not in errors:
                    errors.append(c.error)
                continue
            p = c.plan
            mark = "" if p.memory.fits else "*"
            comm = p.time_by_bound()["communication"] / p.step_s
            mark += "!" if comm >= 0.5 else ""
            both = (f"{fmt_tokens_per_s(p.expected.tokens_per_s)} / {fmt_tokens_per_s(p.expected.ceiling_tokens_per_s)}"
                    if p.expected is not None else fmt_tokens_per_s(p.tokens_per_s))
            row.append(f"{both}{mark}")
        rows.append(row)
    lines = ["what-if: output tokens/s (all GPUs), expected / roofline ceiling, layout x batch"]
    lines += table(["layout", "parallelism", *[f"b={b}" for b in batches]], rows,
                   right=set(range(2, 2 + len(batches))), wrap={1}, width=width, indent="  ")
    legend = ["* does not fit in GPU memory at that batch and context", "! communication is over half the step"]
    one_line = "  " + "   ".join(legend)
    lines += [one_line] if width is None or len(one_line) <= width else ["  " + x for x in legend]
    for e in errors:
        lines.append(f"  n/a: {e}")
    return lines


def render_text(result, width: int | None = None) -> list[str]:
    """The lines of ``truepeak moe plan`` for a :class:`truepeak.moe.plan.PlanSet`: the model, the header of the
    first plan, each plan, the tuned-config file names, the what-if table when there is one, the footer; tables
    fitted into ``width`` terminal columns and the other lines wrapped into them
    (:func:`truepeak.report.fit.wrap_lines`; None: not a terminal, nothing wrapped). The warnings are not in them
    (:func:`finding_text` says each)."""
    from truepeak.report.fit import wrap_lines

    plans = result.plans
    lines = [result.model.summary()] + render_header(plans[0], result.measured) + [""]
    for i, p in enumerate(plans):
        lines += render_plan(p, width)
        if i < len(result.levers) and result.levers[i]:
            lines.append("  levers (expected, one change each, re-planned):")
            lines += [f"    - {x}" for x in lever_lines(result.levers[i])]
        lines.append("")
    lines += render_tuned(plans[0])
    if result.cells is not None:
        lines += [""] + render_compare(result.cells, result.layouts, result.batches, width)
    lines.append("")
    lines.append(FOOTER)
    return wrap_lines(lines, width)


def _after(d: dict, key: str, new: str, value) -> dict:
    """``d`` with ``new: value`` placed right after ``key``."""
    out = {}
    for k, v in d.items():
        out[k] = v
        if k == key:
            out[new] = value
    return out


def formats_json(f) -> dict:
    """:meth:`truepeak.moe.ops.Formats.to_dict` with its sentences: ``peak_note`` (:func:`peak_text`), ``notes`` (the
    formats' findings) and ``scaling_note`` (:func:`scaling_text`)."""
    d = _after(f.to_dict(), "dequantised", "peak_note", peak_text(f))
    d = _after(d, "peak_note", "notes", [finding_text(n) for n in f.notes])
    return _after(d, "activation_scaling", "scaling_note", scaling_text(f))


def plan_json(p) -> dict:
    """One plan for ``--json``: :meth:`truepeak.moe.plan.Plan.to_dict` (SI units, the findings as data) with the
    sentences a user reads: ``interconnect_why``, the formats' notes (:func:`formats_json`), ``bottleneck``,
    ``conclusions``, ``notes`` and, under ``weights_origin``, ``text`` and ``note``."""
    d = _after(p.to_dict(), "interconnect", "interconnect_why", interconnect_text(p.interconnect_choice))
    d["formats"] = formats_json(p.formats)
    d = _after(d, "collectives", "bottleneck", finding_text(p.bottleneck()))
    d = _after(d, "bottleneck", "conclusions", [finding_text(c) for c in p.conclusions()])
    d = _after(d, "measured_ops", "notes", [finding_text(n) for n in p.notes])
    if p.expected is not None:
        d = _after(d, "expected", "expected_text", expected_line(p.expected))
        d = _after(d, "expected_text", "expected_assumptions", [finding_text(a) for a in p.expected.assumptions])
    if p.weights_origin is not None:
        w = _after(d["weights_origin"], "origin", "text", weights_origin_text(p.weights_origin))
        w["note"] = None if p.weights_note is None else finding_text(p.weights_note)
        d["weights_origin"] = w
    return d


def render_json(result) -> str:
    """The ``--json`` document of ``truepeak moe plan`` for a :class:`truepeak.moe.plan.PlanSet` (SI units): the
    model and accelerator, the warnings (in words; ``warning_findings`` as data), every plan (:func:`plan_json`), the
    what-if table and the measured data used, when there are."""
    m = result.model
    doc = {"model": m.name, "family": m.family, "model_summary": m.summary(), "accelerator": result.accelerator.name,
           "warnings": [finding_text(w) for w in result.warnings], "plans": [plan_json(p) for p in result.plans]}
    for i, d in enumerate(doc["plans"]):
        if i < len(result.levers):
            d["levers"] = [lv.to_dict() for lv in result.levers[i]]
            d["levers_text"] = lever_lines(result.levers[i])
    if result.cells is not None:
        doc["compare"] = {"layouts": [lay.to_dict() for lay in result.layouts], "batches": list(result.batches),
                          "cells": [c.to_dict() for c in result.cells]}
    if result.measured is not None:
        doc["measured"] = {"sources": result.measured.sources, "summary": result.measured.summary()}
    doc["warning_findings"] = [w.to_dict() for w in result.warnings]
    return json.dumps(doc, indent=2)


__all__ = ["FOOTER", "GROUP_WORDS", "table", "finding_text", "interconnect_text", "weights_origin_text", "peak_text",
           "scaling_text", "render_plan", "render_header", "render_tuned", "render_compare", "render_text",
           "formats_json", "plan_json", "render_json"]
