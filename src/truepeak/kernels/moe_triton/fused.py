"""The launcher of the fused-MoE kernels: :class:`FusedMoE`, one prepared launch of the two kernels for one
routing. torch and triton are imported inside; the ``@triton.jit`` kernels (:mod:`truepeak.kernels._moe_jit`) on
first use."""

from __future__ import annotations

import contextlib
import functools
from dataclasses import dataclass
from typing import Any

from truepeak.errors import TruepeakError, UnsupportedError, require
from truepeak.kernels.moe_triton.checks import check_inputs
from truepeak.kernels.moe_triton.config import (WFMT_ID, KernelConfig, choose_config, default_activations,
                                                default_fp4_layout)
from truepeak.kernels.moe_triton.routing import (BUSY_FACTOR, Alignment, align_routing, busy_experts, expert_counts,
                                                 mean_of_counts)
from truepeak.kernels.moe_triton.smem import device_programs, device_smem_limit, fit_shared_memory
from truepeak.kernels.moe_triton.weights import ExpertWeights


@dataclass
class BusyLaunch:
    """The busy experts of a skewed routing, run by :class:`FusedMoE` in a launch of their own (on a second CUDA
    stream, beside the other experts' launch): which experts, their routing metadata and their configurations.

    Attributes:
        experts: one bool per local expert, True for the busy ones (:func:`busy_experts`).
        align: their :class:`Alignment` (the other experts' slots dropped).
        cfg1, cfg2: their gate/up and down configurations.
        config_note: where those came from (as :attr:`FusedMoE.config_note`).
        rows: int32 ``[n]``: their slots (the rows of the intermediate they quantise on their own stream).
    """

    experts: list
    align: Alignment
    cfg1: KernelConfig
    cfg2: KernelConfig
    config_note: str
    rows: Any = None


@functools.lru_cache(maxsize=None)
def _kernels() -> tuple[Any, Any]:
    require("triton", "truepeak's MoE Triton kernel", "pip install triton")
    from truepeak.kernels import _moe_jit

    return _moe_jit.gate_up_kernel, _moe_jit.down_kernel


def interpreting() -> bool:
    """Whether Triton runs kernels in its CPU interpreter, as Triton itself decides (``triton.knobs.runtime.interpret``,
    which follows Triton's ``TRITON_INTERPRET=1``): the kernels then take their interpreter paths (``INTERP``) and
    tensors may live on the CPU. False where triton is not installed."""
    try:
        import triton
    except ImportError:
        return False
    return bool(triton.knobs.runtime.interpret)


class FusedMoE:
    """A prepared launch of the two kernels for one routing: ``FusedMoE(x, w1, w2, topk_ids, topk_weights,
    tokens_per_expert)()`` returns ``out [T, H]`` (x's dtype). Buffers and routing metadata are made once in
    ``__init__`` (outside any timed region); ``__call__`` only launches kernels and is CUDA-graph capturable.

    Args:
        x: ``[T, H]`` bf16 hidden states. w1 / w2: :class:`ExpertWeights` ``[E, 2I, H]`` / ``[E, H, I]``.
        topk_ids: ``[T, k]`` int (local expert ids; others are dropped). topk_weights: ``[T, k]`` float.
        tokens_per_expert: the configuration key (docs/method.md, 'Padding per expert'); default the mean over experts
            with tokens. Not used when the busy experts get a launch of their own (``split_busy``): each launch is
            then keyed by the mean of its own experts' counts.
        config: override the kernels' configuration: one :class:`KernelConfig` for both, or a pair (gate/up, down)
            sharing ``block_m``; None: the tuned table of this GPU and expert shape (the entry of
            ``tokens_per_expert``'s bucket, or of a larger bucket whose larger token block re-reads the busiest
            experts' weights less often under a skewed routing: :meth:`TunedTable.lookup_for_counts`), else
            :func:`choose_config`.
        smem_limit: device or bytes for :func:`choose_config`'s shared-memory check (docs/method.md, 'Shared memory per
            block').
        tune: KernelConfig field overrides applied to both kernels (e.g. ``{"prefetch": True, "num_stages": 1}``).
        activations: for fp8 weights, ``"fp8"`` (default: w8a8, activations quantised per row to e4m3 with scale
            max|row| / 448 by :func:`quant_rows_kernel` inside the call, then fp8 x fp8 MMAs) or ``"fp16"`` (w8a16:
            weights converted to fp16 in registers); for fp4 weights, ``"fp8"`` (w4a8, mxfp4's default: the same
            activations, e2m1 decoded to e4m3 in registers, one fp8 MMA per scale block) or ``"fp16"`` (w4a16,
            nvfp4's default: e2m1 decoded to fp16 and multiplied by its block scale, fp16 MMAs); both read
            :func:`to_w4a8_layout` (the w4a16 its untiled layout with ``untiled_w4a16``). None:
            :func:`default_activations`. bf16 takes only None.
        fp4_layout: fp4 weights only: ``"mma"`` (the weights in :func:`to_mma_layout`, each 32-bit word
            decoded straight into the MMA's registers, block scales applied in fp16, fp16 MMAs; fp16 or fp8
            activations, the latter converted exactly to fp16) or ``"tiles"`` (the kernels of
            :func:`to_w4a8_layout`: w4a8 with one fp8 MMA per scale block, or the tiled w4a16). None (default):
            :func:`default_fp4_layout` ("tiles" with ``untiled_w4a16`` or ``drop_block_scales``). Keyword only.
        untiled_w4a16: fp4 weights with ``activations="fp16"`` and ``fp4_layout="tiles"`` only: run the untiled
            w4a16 kernel (bytes in
            :func:`to_kernel_nibble_order`, e2m1 decoded to fp16 by inline PTX) instead of the tiled one, to compare
            the two (benchmarks/moe_kernel_tuning.py). Keyword only; default False.
        drop_block_scales: an ablation for timing w4a8 (fp4 weights, fp8 activations) only: the K loop leaves the
            block scales out, so **the output is wrong**; it shows what the scales cost. Refused unless
            ``output_unchecked`` is True as well. Keyword only; default False.
        output_unchecked: the caller's statement that it will neither use nor check the output (required by
            ``drop_block_scales``). Keyword only; default False.
        tuned_table: a tuned table file, or a folder of them, tried before the shipped ones
            (:func:`truepeak.kernels.moe_triton.tuned.find_table`, keyed by the GPU's name, E, N = I and H, then
            by weight format, activations and tokens-per-expert bucket). Used when ``config`` is None (and neither
            ``untiled_w4a16`` nor ``drop_block_scales`` is set); a table for another GPU or shape is rejected, and
            :func:`choose_config`'s rules apply, with the reason in ``config_note``. Keyword only; default None.
        split_busy: with ``config`` None and no ``tune`` (and neither ``untiled_w4a16`` nor ``drop_block_scales``), run
            the busy experts of a skewed routing (:func:`busy_experts`: more than 2 x the mean tokens per active
            expert, when one of them has more tokens than the other experts' token block) in a launch of their own,
            on a second CUDA stream beside the others' launch, each group with the configuration of its own counts
            (tuned table, else :func:`choose_config`); ``tokens_per_expert`` is then not used. Under power-law 1.2
            routing on an H200 this gained up to 7.2 points of the read bandwidth at E = 256 and 9.8 with EP8's 32
            local experts, and lost up to 2.8 at E = 256 (fp8 at 64 tokens per expert) and 6.9 at EP8 (bf16 at 2)
            (docs/results/h200/moe-routing/README.md, 'Busy experts in a launch of their own'). Keyword only; default True; False: always one launch.

    Attributes:
        output_valid: False when ``drop_block_scales`` is set (the output is not the unit's result), else True.
        config_note: one line saying where the configuration came from: the tuned table and bucket, or why
            :func:`choose_config`'s rules were used (no table for this GPU and shape, a table rejected, no entry for
            the bucket), or ``"given"`` for ``config``; with busy experts, then where theirs came from.
        cfg1, cfg2, align: the gate/up and down configurations and the routing metadata of the launch (of the
            experts that are not busy, when :attr:`busy` is set).
        busy: the busy experts' :class:`BusyLaunch`, or None (one launch for all).

    Range: activations of quantised weights are scaled per row (x and the intermediate ``silu(g) · u``): fp8 by the
    row's largest magnitude / 448, floored at 1e-12 (rows below that quantise to zero); fp16 by a power of two that
    puts the row's largest magnitude in (2^13, 2^14] (exact; elements more than ~2^38 below their row's largest
    become 0). The intermediate is stored in bf16 (fp8 activations with bf16 x) or float32 before that scaling. The
    weights' own magnitude does not matter: block scales are applied relative to a per-expert scale. bf16 weights
    keep bf16 activations unscaled.

    Raises:
        TruepeakError: shapes that do not fit, formats that differ, ``activations`` not allowed for the format,
            ``untiled_w4a16`` / ``drop_block_scales`` / ``output_unchecked`` not a bool or set where they do not apply
            (``drop_block_scales`` without ``output_unchecked`` included),
            weight values not contiguous along K, scales not in the documented shapes or not contiguous,
            non-integer ``topk_ids``, ``tune`` not a dict of valid :class:`KernelConfig` fields.
        UnknownNameError: a weight format truepeak does not know.
        UnsupportedError: K not a multiple of the K step; a configuration that cannot fit the device's shared memory.
    """

    def __init__(self, x: Any, w1: ExpertWeights, w2: ExpertWeights, topk_ids: Any, topk_weights: Any,
                 tokens_per_expert: float | None = None, config: KernelConfig | None = None, smem_limit: Any = None,
                 tune: dict | None = None, activations: str | None = None, *, fp4_layout: str | None = None,
                 untiled_w4a16: bool = False, drop_block_scales: bool = False, output_unchecked: bool = False,
                 tuned_table: Any = None, split_busy: bool = True):
        flags = {"untiled_w4a16": untiled_w4a16, "drop_block_scales": drop_block_scales,
                 "output_unchecked": output_unchecked}
        for name, value in flags.items():
            if not isinstance(value, bool):
                raise TruepeakError(f"{name} must be True or False, got {value!r}")
        if drop_block_scales and not output_unchecked:
            raise TruepeakError("drop_block_scales=True leaves the block scales out of the K loop, so the output is "
                                "wrong (an ablation for timing); pass output_unchecked=True as well to say the output "
                                "will be neither used nor checked")
        if fp4_layout not in (None, "mma", "tiles"):
            raise TruepeakError(f"fp4_layout must be 'mma' or 'tiles', got {fp4_layout!r}")
        if fp4_layout is None:
            fp4 = getattr(w1, "wfmt", None) in ("nvfp4", "mxfp4")
            fp4_layout = ("tiles" if untiled_w4a16 is True or drop_block_scales is True or not fp4 else
                          default_fp4_layout(w1.wfmt))
        torch = require("torch", "running the MoE kernel")
        self.E, self.I, self.H, self.T, self.k = check_inputs(x, w1, w2, topk_ids, topk_weights)
        fp8 = w1.wfmt in ("fp8", "fp8_block")
        fp4 = w1.wfmt in ("nvfp4", "mxfp4")
        if isinstance(activations, str):
            activations = activations.lower()
        if activations is not None and not ((fp8 or fp4) and activations in ("fp8", "fp16")):
            raise TruepeakError(f"activations={activations!r} is not available for {w1.wfmt} weights; fp8 and fp4 "
                                "weights take 'fp8' (w8a8 / w4a8) or 'fp16' (w8a16 / w4a16), bf16 only the default")
        if activations is None:
            activations = default_activations(w1.wfmt)
        counts = expert_counts(topk_ids, self.E)  # the key's default and the tuned-table lookup's routing
        if tokens_per_expert is None:
            tokens_per_expert = mean_of_counts(counts)
        w8a8 = (fp8 or fp4) and activations != "fp16"
        if untiled_w4a16 and fp4_layout == "mma":
            raise TruepeakError("untiled_w4a16=True runs the untiled kernel of the 'tiles' kernels; pass "
                                "fp4_layout='tiles' with it")
        if untiled_w4a16 and not (fp4 and not w8a8):
            raise TruepeakError(f"untiled_w4a16=True applies to fp4 weights with activations='fp16' only, got "
                                f"{w1.wfmt} weights with activations {activations!r}")
        if drop_block_scales and fp4_layout == "mma":
            raise TruepeakError("drop_block_scales=True applies to the w4a8 kernel of fp4_layout='tiles' only")
        if drop_block_scales and not (fp4 and w8a8):
            raise TruepeakError(f"drop_block_scales=True applies to fp4 weights with activations='fp8' (w4a8) only, "
                                f"got {w1.wfmt} weights with activations {activations!r}")
        self.drop_block_scales = drop_block_scales
        self.output_valid = not drop_block_scales
        # fp4 weights are read in the tiled layout (to_w4a8_layout) by both the w4a8 and the w4a16 kernel; the
        # untiled w4a16 kernel stays for comparison, behind untiled_w4a16 (both need H and I in whole 64-element
        # steps, so the tiles always fit where either kernel runs)
        self.tiled = fp4 and not untiled_w4a16
        self.mma = fp4 and fp4_layout == "mma"
        untiled = fp4 and not self.tiled
        if isinstance(config, (tuple, list)) and len(config) == 2 and all(isinstance(c, KernelConfig) for c in config):
            config_pair = (config[0], config[1])
        elif config is None or isinstance(config, KernelConfig):
            config_pair = None if config is None else (config, config)
        else:
            raise TruepeakError(f"config must be a KernelConfig or a pair (gate/up, down) of them, got {config!r}")
        def configure(key: float, group_counts: list[int]) -> tuple[tuple[KernelConfig, KernelConfig], str]:
            """The tuned table's pair for a group's counts (key: its mean), else choose_config's rules."""
            pair, note = None, "choose_config's rules"
            if not (untiled_w4a16 or drop_block_scales):
                from truepeak.kernels.moe_triton.tuned import tuned_pair

                device_name = torch.cuda.get_device_name(x.device) if x.device.type == "cuda" else x.device.type
                pair, note = tuned_pair(device_name, w1.wfmt, activations, self.E, self.I, self.H, key, tuned_table,
                                        fp4_layout if fp4 else None, group_counts)
            if pair is None:
                pair = (choose_config(key, w1.wfmt, True, smem_limit, self.H, w8a8, untiled, self.mma),
                        choose_config(key, w2.wfmt, False, smem_limit, self.I, w8a8, untiled, self.mma))
            return pair, note

        if type(split_busy).__name__ not in ("bool", "bool_"):  # numpy's bool too; 0 / 1 are not flags
            raise TruepeakError(f"split_busy must be True or False, got {split_busy!r}")
        split_busy = bool(split_busy)
        busy = None
        if config_pair is None:
            if split_busy and not tune and not (untiled_w4a16 or drop_block_scales):
                busy = busy_experts(counts)
            if busy is not None:  # the other experts' configuration first: its token block decides the split
                light = [0 if b else c for c, b in zip(counts, busy)]
                config_pair, self.config_note = configure(mean_of_counts(light), light)
                if busy_experts(counts, config_pair[0].block_m) is None:
                    busy = config_pair = None
            if config_pair is None:
                config_pair, self.config_note = configure(tokens_per_expert, counts)
        else:
            self.config_note = "given"
        self.cfg1, self.cfg2 = config_pair
        if tune is not None and not isinstance(tune, dict):
            raise TruepeakError(f"tune must be a dict of KernelConfig fields (e.g. {{'num_stages': 3}}), got "
                                f"{type(tune).__name__} {tune!r}")
        if tune:  # overrides of KernelConfig fields for both kernels (benchmark-side tuning)
            import dataclasses

            fields = [f.name for f in dataclasses.fields(KernelConfig)]
            bad = sorted(set(tune) - set(fields))
            if bad:
                raise TruepeakError(f"unknown KernelConfig field(s) {', '.join(bad)} in tune; expected "
                                    f"{', '.join(fields)}")
            self.cfg1 = dataclasses.replace(self.cfg1, **tune)
            self.cfg2 = dataclasses.replace(self.cfg2, **tune)
        self._check_pair(self.cfg1, self.cfg2, w1.wfmt, w8a8)
        if x.device.type != "cuda" and not interpreting():
            raise UnsupportedError(f"the MoE kernels run on a CUDA GPU (x is on {x.device}); on a CPU set "
                                   "TRITON_INTERPRET=1 before importing triton to run them in Triton's interpreter")
        if w8a8 and x.device.type == "cuda" and not interpreting():
            cc = torch.cuda.get_device_capability(x.device)
            if cc < (8, 9):  # fp8 tensor-core MMAs: Ada (sm_89) and Hopper (sm_90) onward (PTX ISA, mma / wgmma)
                raise UnsupportedError(f"{w1.wfmt} weights with fp8 activations need fp8 MMAs (compute capability "
                                       f">= 8.9); this GPU is sm_{cc[0]}{cc[1]}: pass activations='fp16'")
        # fp4 bytes in the kernel's nibble order for each kernel's K step (a copy only if they are not already)
        self.x = x
        tiled = self.tiled  # 64-element nibble chunks in the e4m3 bit layout, 2 KB tiles
        if self.mma:
            self.w1, self.w2 = w1.in_kernel_order(mma=True), w2.in_kernel_order(mma=True)
        else:
            self.w1 = w1.in_kernel_order(None if tiled else self.cfg1.block_k, w4a8=tiled)
            self.w2 = w2.in_kernel_order(None if tiled else self.cfg2.block_k, w4a8=tiled)
        self.busy = None
        if busy is not None:  # the busy experts' slots to their own launch, the others' to this one
            bt = torch.tensor(busy, dtype=torch.bool, device=topk_ids.device)
            ids = topk_ids.long()
            local = (ids >= 0) & (ids < self.E)
            is_busy = local & bt[ids.clamp(0, self.E - 1)]
            none = torch.full_like(ids, -1)
            busy_counts = [c if b else 0 for c, b in zip(counts, busy)]
            (b1, b2), note = configure(mean_of_counts(busy_counts), busy_counts)
            self._check_pair(b1, b2, w1.wfmt, w8a8)
            balign = align_routing(torch.where(is_busy, ids, none), self.E, b1.block_m)
            self.busy = BusyLaunch(busy, balign, b1, b2, note, _slots_of(balign))
            topk_ids = torch.where(local & ~is_busy, ids, none)
            n_busy = sum(busy)
            self.config_note += (f" ({self.cfg1.block_m}-token blocks); {n_busy} busy expert{'s' * (n_busy != 1)} "
                                 f"(more than {BUSY_FACTOR:g} x the mean {mean_of_counts(counts):.1f} tokens) in a "
                                 f"launch of their own ({b1.block_m}-token blocks): "
                                 f"{_without_shared_table(note, self.config_note)}")
        self.align = align_routing(topk_ids, self.E, self.cfg1.block_m)
        self._rows = None if self.busy is None else _slots_of(self.align)  # this launch's rows of the intermediate
        self.topw = topk_weights.reshape(-1).float().contiguous()
        dev = x.device
        # Quantised weights multiply activations in fp8 (w8a8, w4a8: e4m3, scale max|row| / 448) or fp16 (w8a16, w4a16:
        # dequantised weights are fp16 in registers, e4m3 and e2m1 convert to fp16 in one step, to bf16 not); either
        # way each row of x and of the intermediate is scaled by its own factor (fp16: a power of two putting the row's
        # largest magnitude in (2^13, 2^14], exact, so no row overflows fp16's 65,504 or sinks into its subnormals),
        # applied back after the K loop. bf16 weights keep bf16 activations, unscaled.
        self.act8 = w8a8
        self.rowscale = w1.wfmt != "bf16"
        self.activations = ("fp8 e4m3, per-row scale" if self.act8 else "bf16" if w1.wfmt == "bf16" else
                            "fp16, per-row power-of-two scale")
        # nvfp4 w4a8: the quantised activations in two planes (even / odd 16-element blocks; see quant_rows_kernel)
        self.planes = 2 if self.act8 and w1.wfmt == "nvfp4" and not self.mma else 1
        n_slots = self.T * self.k
        # the intermediate silu(g) * u is written unscaled, then scaled per row: in bf16 for fp8 activations with bf16
        # x (its e4m3 rounding dominates; fp16 would overflow at 65,504, so float32 for other x), in float32 for fp16
        # activations (bf16 would lose 3 of fp16's mantissa bits, and the output twice as much accuracy); zeros: rows
        # of slots routed to another rank are never written, every row is scaled
        bf16_inter = not self.rowscale or (self.act8 and x.dtype == torch.bfloat16)
        inter_dt = torch.bfloat16 if bf16_inter else torch.float32
        self.inter = torch.zeros(n_slots, self.I, dtype=inter_dt, device=dev)
        # bf16 weights: x as bf16 (a copy, made per call, when it is not)
        self.xin = x if self.rowscale or x.dtype == torch.bfloat16 else torch.empty(x.shape, dtype=torch.bfloat16,
                                                                                       device=dev)
        if self.rowscale:
            qdt = torch.float8_e4m3fn if self.act8 else torch.float16
            self.xq = torch.empty(self.planes, self.T, self.H, dtype=qdt, device=dev)
            self.xs = torch.empty(self.T, dtype=torch.float32, device=dev)
            self.interq = torch.empty(self.planes, n_slots, self.I, dtype=qdt, device=dev)
            self.inters = torch.empty(n_slots, dtype=torch.float32, device=dev)
        self.partial = torch.zeros(self.T * self.k, self.H, dtype=x.dtype, device=dev)
        self.out = torch.empty(self.T, self.H, dtype=x.dtype, device=dev)
        self.wfmt = WFMT_ID[w1.wfmt]
        self._dummy = torch.zeros(1, dtype=torch.float32, device=dev)
        self._ones = torch.ones(self.E, dtype=torch.float32, device=dev)  # per-expert scale of formats without one
        self._grid: dict = {}  # persistent launches' program counts (_programs)
        # the busy experts' CUDA stream (_busy_chain)
        self._side = (torch.cuda.Stream(device=dev) if self.busy is not None and dev.type == "cuda" else None)
        if dev.type == "cuda" and not interpreting() and (self.align.num_blocks or self.busy is not None):
            self._fit_shared_memory()

    def _check_pair(self, cfg1: KernelConfig, cfg2: KernelConfig, wfmt: str, w8a8: bool) -> None:
        """Refuse a (gate/up, down) pair these weights cannot run (see the class's Raises)."""
        for cfg, kd in ((cfg1, self.H), (cfg2, self.I)):
            if kd % cfg.block_k:
                raise UnsupportedError(f"K={kd} is not a multiple of block_k={cfg.block_k}")
        if cfg1.block_m != cfg2.block_m:
            raise TruepeakError("both kernels must share block_m")
        if wfmt == "fp8_block" and (128 % cfg1.block_k or 128 % cfg2.block_k):
            raise UnsupportedError(f"fp8_block weights need block_k dividing 128 (one 128 x 128 scale per K step), got "
                                   f"{cfg1.block_k} and {cfg2.block_k}")
        for cfg, kd in ((cfg1, self.H), (cfg2, self.I)):
            ok = (64,) if wfmt == "nvfp4" and w8a8 and not self.mma else (64, 128)
            if self.tiled and cfg.block_k not in ok:
                raise UnsupportedError(f"{wfmt} weights in the tiled layout need block_k in {ok} (4 scale blocks "
                                       f"per step; mxfp4 also 2), got {cfg.block_k} for K={kd}")
        if wfmt in ("nvfp4", "mxfp4") and (cfg1.block_k < 64 or cfg2.block_k < 64):
            raise UnsupportedError(f"fp4 weights need block_k >= 64 (one mxfp4 scale block per half step), got "
                                   f"{cfg1.block_k} and {cfg2.block_k}")

    def _args(self, w: ExpertWeights, block_k: int) -> tuple[Any, Any, Any]:
        scale = w.scale if w.scale is not None else self._dummy
        if self.mma:  # one int32 word = a row's 4 block scales (mxfp4 re-encoded as e5m2)
            scale = w.mma_scale_words(block_k)
        elif self.tiled:  # one int32 word = a row's block scales of a step (nvfp4: of 64 elements)
            scale = w.w4a8_scale_words(64 if w.wfmt == "nvfp4" else block_k)
        return w.data, scale, (w.global_scale if w.global_scale is not None else self._ones)

    def _launch(self, which: int, cfg: KernelConfig, warmup: bool = False, align: Alignment | None = None) -> Any:
        """Launch kernel 1 (gate/up) or 2 (down) with ``cfg`` over ``align``'s token blocks (default: this launch's,
        :attr:`align`); with ``warmup`` only compile it (Triton's ``JITFunction.warmup``) and return the compiled
        kernel, whose ``metadata.shared`` is the shared memory it needs."""
        gate_up, down = _kernels()
        a = self.align if align is None else align
        kw = dict(WFMT=self.wfmt, BLOCK_M=cfg.block_m, BLOCK_N=cfg.block_n, BLOCK_K=cfg.block_k,
                  INTERP=interpreting(), PREFETCH=cfg.prefetch, HOIST=cfg.hoist, ACT8=self._act8_flag(),
                  TILED=self.tiled, XSCALE=self.rowscale, MMAL=self.mma, PERSIST=cfg.persistent, GROUP_M=cfg.group_m,
                  num_warps=cfg.num_warps, num_stages=cfg.num_stages)
        if cfg.maxnreg:
            kw["maxnreg"] = cfg.maxnreg
        if which == 1:
            d, s, g = self._args(self.w1, cfg.block_k)
            xa, xs = (self.xq, self.xs) if self.rowscale else (self.xin, self._dummy)
            plane = self.T * self.H if self.act8 else 0
            tiles = a.num_blocks * -(-self.I // cfg.block_n)
            args = [xa, xs, d, s, g, self.inter, a.sorted_slots, a.block_expert, a.num_blocks, a.num_slots, self.k,
                    self.I, self.H, xa.stride(-2), self.inter.stride(0), d.stride(0), d.stride(1), plane, tiles]
            kernel = gate_up
        else:
            d, s, g = self._args(self.w2, cfg.block_k)
            xa, xs = (self.interq, self.inters) if self.rowscale else (self.inter, self._dummy)
            plane = self.T * self.k * self.I if self.act8 else 0
            tiles = a.num_blocks * -(-self.H // cfg.block_n)
            args = [xa, xs, d, s, g, self.partial, a.sorted_slots, a.block_expert, self.topw, a.num_blocks,
                    a.num_slots, self.H, self.I, xa.stride(-2), self.partial.stride(0), d.stride(0), d.stride(1),
                    plane, tiles]
            kernel = down
        if warmup:
            return kernel.warmup(*args, grid=(tiles,), **kw)
        if cfg.persistent:  # as many programs as the device holds at once, each looping over tiles
            args[-1] = min(tiles, self._programs(which, cfg))
        return kernel[(args[-1],)](*args, **kw)

    def _programs(self, which: int, cfg: KernelConfig) -> int:
        """The grid of a persistent launch of kernel ``which`` with ``cfg``: the programs the device holds at once
        (:func:`device_programs` of the compiled kernel; 3 in the interpreter, so that its programs loop)."""
        key = (which, cfg)
        if key not in self._grid:
            self._grid[key] = (3 if interpreting() or self.x.device.type != "cuda" else
                               device_programs(self._launch(which, cfg, warmup=True), cfg.num_warps, self.x.device))
        return self._grid[key]

    def _act8_flag(self) -> Any:
        """The kernels' ACT8 value: 1 with fp8 activations, 0 without; plus 2 with ``drop_block_scales`` (w4a8 only:
        the block scales left out, so the output is wrong)."""
        return int(self.act8) | (2 if self.drop_block_scales else 0)

    @staticmethod
    def _quant_rows(src: Any, q: Any, scales: Any, perm: bool = False, rows: Any = None) -> None:
        """Per-row quantisation of ``src [R, C]`` into ``q [P, R, C]`` and ``scales [R]`` (one program per row): e4m3
        (q's dtype float8_e4m3fn; P = 2 planes: even / odd 16-element blocks, for nvfp4 w4a8) or fp16 with a
        power-of-two scale (q float16); for the MMA layout (``perm``) stored in its K order
        (:func:`mma_logical_order`). ``rows``: int32 row indices, only those rows (default all)."""
        from truepeak.kernels._moe_quant_jit import quant_rows_kernel

        n_rows, cols = src.shape
        block = min(8192, 1 << max(4, (cols - 1).bit_length()))
        grid = n_rows if rows is None else rows.numel()
        if grid == 0:
            return
        quant_rows_kernel[(grid,)](src, q, scales, src.stride(0), q.stride(1), q.stride(0), n_cols=cols,
                                   BLOCK=block, INTERP=interpreting(), SPLIT16=q.shape[0] == 2,
                                   F16=q.element_size() == 2, PERM=perm, rows_ptr=rows,
                                   ROWS=rows is not None, num_warps=4)  # e4m3 1 byte, fp16 2

    def _fit_shared_memory(self) -> None:
        """The shared-memory check with the compiler's own figure (see :func:`fit_shared_memory`), for each launch."""
        limit = device_smem_limit(self.x.device)
        self.cfg1, self.cfg2 = fit_shared_memory(self._launch, self.cfg1, self.cfg2, limit)
        b = self.busy
        if b is not None:
            b.cfg1, b.cfg2 = fit_shared_memory(functools.partial(self._launch, align=b.align), b.cfg1, b.cfg2, limit)

    def _busy_chain(self) -> Any:
        """The busy experts' kernels (gate/up, their rows of the intermediate quantised, down) on the second stream,
        after the work queued so far on the current one; returns the stream to wait for (None without busy experts).
        In Triton's interpreter they run in line."""
        b = self.busy
        if b is None:
            return None
        torch = require("torch", "running the MoE kernel")
        cuda = self._side is not None
        if cuda:
            self._side.wait_stream(torch.cuda.current_stream(self.x.device))
        with torch.cuda.stream(self._side) if cuda else contextlib.nullcontext():
            self._launch(1, b.cfg1, align=b.align)
            if self.rowscale:
                self._quant_rows(self.inter, self.interq, self.inters, self.mma, b.rows)
            self._launch(2, b.cfg2, align=b.align)
        return self._side if cuda else None

    def __call__(self) -> Any:
        a = self.align
        torch = require("torch", "running the MoE kernel")
        if a.num_blocks == 0 and self.busy is None:
            self.out.zero_()
            return self.out
        if self.rowscale:
            self._quant_rows(self.x, self.xq, self.xs, self.mma)
        elif self.xin is not self.x:
            self.xin.copy_(self.x)
        # the busy experts' kernels run beside the others' on a second stream (their compute-bound tiles overlap the
        # others' weight reads); each launch quantises its own rows of the intermediate; joined before the combine
        side = self._busy_chain()
        if a.num_blocks:
            self._launch(1, self.cfg1)
            if self.rowscale:
                self._quant_rows(self.inter, self.interq, self.inters, self.mma, self._rows)
            self._launch(2, self.cfg2)
        if side is not None:
            torch.cuda.current_stream(self.x.device).wait_stream(side)
        # combine: the k rows of each token (rows of slots routed elsewhere stay zero from construction)
        torch.sum(self.partial.view(self.T, self.k, self.H), dim=1, out=self.out)
        return self.out


def _without_shared_table(note: str, other: str) -> str:
    """The busy experts' configuration note without the tuned-table phrase it shares with the other experts' note
    ``other``: ``"tuned table F.json, bf16, ..."`` -> ``"the same table, bf16, ..."``; a reason that is the same in
    both (no table, a table rejected) -> what follows it, ``"choose_config's rules"``."""
    head, sep, rest = note.rpartition(": ")
    if sep and other.startswith(head + sep):
        return rest
    if note.startswith("tuned table "):
        end = note.find(".json") + len(".json")
        if end > len(".json") and other.startswith(note[:end]):
            return "the same table" + note[end:]
    return note


def _slots_of(align: Alignment) -> Any:
    """The slots of ``align``'s token blocks without their padding, as int32 (the rows of the intermediate that its
    launch writes)."""
    s = align.sorted_slots
    return s[s < align.num_slots].contiguous()
