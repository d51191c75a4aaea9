"""The MoE kernels' tuning rules: the weight formats, :class:`KernelConfig` (one launch's tiles, warps and stages),
:func:`choose_config` (the tile from the tokens per expert), the activations each format runs with by default, and
the fp4 K steps. Pure Python: nothing here imports torch or triton."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from truepeak.errors import TruepeakError, UnknownNameError, UnsupportedError

#: Weight formats the kernels take.
WEIGHT_FORMATS = ("bf16", "fp8", "fp8_block", "nvfp4", "mxfp4")
#: The kernels' ``WFMT`` constexpr of each weight format.
WFMT_ID = {"bf16": 0, "fp8": 1, "fp8_block": 2, "nvfp4": 3, "mxfp4": 4}


@dataclass(frozen=True)
class KernelConfig:
    """One launch configuration: tile sizes, warps and pipeline stages.

    ``block_m`` tokens (the MMA's N), ``block_n`` weight rows (output features), ``block_k`` reduction elements per
    step (for fp4: unpacked elements, so ``block_k // 2`` bytes per row). ``prefetch``: load the next K step's weights
    into registers before converting the current one (for dequantised formats). ``hoist`` (fp4): let Triton decode in
    the MMA operand's register layout, straight from shared memory, instead of decoding in the loaded layout and
    moving the fp16 tile to the MMA through shared memory (more instructions, less shared memory and no barrier;
    the untiled w4a16 kernel only). ``maxnreg``: a cap on registers per thread (ptxas ``.maxnreg``; None = the
    compiler's choice): more programs per SM, or spills. ``persistent``: launch as many programs as fit on the
    device at once, each looping over (token block, weight tile) work as one flattened loop, so that a program's next
    tile is being loaded while its last K steps run (instead of a new program filling its pipeline from empty).
    ``group_m``: the order of the (token block, weight tile) work. 0: token block fastest, so the blocks of one
    expert run together and share each weight tile in L2 (pays when an expert has many blocks); g > 0: groups of g
    token blocks, each group's weight tiles back to back, so they share the group's activation tiles in L2 (pays
    when an expert has one or a few blocks, as at decode).

    Raises:
        TruepeakError: a field of the wrong type or out of range (tiles powers of two >= 16, ``num_stages`` >= 1,
            ``num_warps`` 1..16 and a power of two, ``maxnreg`` None or 24..255, ``group_m`` >= 0, the flags True or
            False).
    """

    block_m: int
    block_n: int
    block_k: int
    num_warps: int = 4
    num_stages: int = 4
    prefetch: bool = False
    hoist: bool = False
    maxnreg: int | None = None
    persistent: bool = False
    group_m: int = 0

    def __post_init__(self) -> None:
        import operator

        bad = []
        for name in ("block_m", "block_n", "block_k", "num_warps", "num_stages", "maxnreg", "group_m"):
            v = getattr(self, name)
            if v is None and name == "maxnreg":
                continue
            try:
                i = -1 if isinstance(v, bool) else operator.index(v)
            except TypeError:
                i = -1
            ok = {"num_warps": i in (1, 2, 4, 8, 16), "num_stages": i >= 1,
                  "maxnreg": 24 <= i <= 255, "group_m": i >= 0}.get(name, i >= 16 and i & (i - 1) == 0)
            if not ok:
                bad.append(f"{name}={v!r}")
            elif type(v) is not int:  # numpy / 0-d torch integers: plain ints (Triton's JIT takes no others)
                object.__setattr__(self, name, int(i))
        for name in ("prefetch", "hoist", "persistent"):
            v = getattr(self, name)
            if type(v).__name__ not in ("bool", "bool_"):  # numpy's bool too; 0 / 1 are not flags
                bad.append(f"{name}={v!r}")
            else:
                object.__setattr__(self, name, bool(v))
        if bad:
            raise TruepeakError(f"MoE kernel configuration out of range: block_m, block_n and block_k must be >= 16 "
                                f"and powers of two, num_stages >= 1, num_warps a power of two up to 16, maxnreg None "
                                f"or 24..255 registers (ptxas' .maxnreg), group_m >= 0 and prefetch, hoist and persistent True or "
                                f"False; got {', '.join(bad)}")

    def smem_bytes(self, wfmt: str, gated: bool, w8a8: bool = False) -> int:
        """Shared memory one program needs, estimated: ``num_stages`` x (weight tile(s) + activation tile) bytes,
        plus, for fp4 decoded in the loaded layout (``hoist`` off), one fp16 weight tile on its way to the MMA.
        Weight bytes per element: 2 (bf16), 1 (fp8), 0.5 (fp4) plus scales; activations 2 (1 with ``w8a8``: fp8 or
        fp4 weights with fp8 activations; nvfp4 w4a8 reads two activation planes). The gate/up kernel
        streams two weight tiles per step. Equal to what Triton 3.6 allocates for bf16 and an upper bound for the
        others in the configurations compiled for sm_90 (tests/kernels/moe_triton/test_config.py); :class:`FusedMoE` checks
        the compiler's own figure before launching."""
        wbytes = {"bf16": 2.0, "fp8": 1.0, "fp8_block": 1.0, "nvfp4": 0.5 + 1 / 16, "mxfp4": 0.5 + 1 / 32}[wfmt]
        tiles = 2 if gated else 1
        planes = 2 if w8a8 and wfmt == "nvfp4" else 1  # nvfp4 w4a8 reads two activation planes
        per_stage = (tiles * self.block_n * self.block_k * wbytes
                     + planes * self.block_m * self.block_k * (1 if w8a8 else 2))
        staging = self.block_n * self.block_k * 2 if wfmt in ("nvfp4", "mxfp4") and not (self.hoist or w8a8) else 0
        return int(math.ceil(self.num_stages * per_stage + staging))


def check_tokens_per_expert(tokens_per_expert: Any) -> float:
    """``tokens_per_expert`` as a float, the key of the configuration choice (docs/method.md, 'Padding per expert').

    Raises:
        TruepeakError: not a finite number > 0."""
    try:
        if isinstance(tokens_per_expert, (bool, str, bytes)):
            raise TypeError
        t = float(tokens_per_expert)
    except (TypeError, ValueError):
        t = math.nan
    if not (math.isfinite(t) and t > 0):
        raise TruepeakError(f"tokens per expert must be a finite number > 0, got {tokens_per_expert!r}")
    return t


def choose_config(tokens_per_expert: float, wfmt: str, gated: bool, smem_limit: Any = None,
                  k_dim: int | None = None, w8a8: bool = False, untiled: bool = False,
                  mma: bool = False) -> KernelConfig:
    """Pick the tile configuration from the mean tokens per expert (docs/method.md, 'Tokens per expert': a decode batch
    is many small GEMMs of ~tokens-per-expert rows each, so the batch size says nothing about the tile), then check its
    shared memory.

    ``block_m`` covers the busiest expert of a uniform routing at that mean (E[max] ≈ 1.8x the mean at 16 tokens per
    expert for E = 256, k = 8: docs/method.md, 'Tokens per expert'), so weights are streamed once up to ~32 tokens per
    expert. Stages are dropped until the config fits ``smem_limit`` (anything
    :func:`truepeak.hardware.limits.check_shared_memory` takes: an Accelerator, DeviceInfo, name or bytes; None skips).
    ``k_dim`` (the GEMM's K) shrinks ``block_k`` to a divisor of K. ``w8a8``: fp8 activations: for fp8 weights an
    fp8 MMA fed straight from shared memory, tiled like bf16, rather than w8a16 (weights converted in registers); for
    fp4 weights w4a8 (e2m1 decoded to e4m3 in registers, one fp8 MMA per scale block, 64- or 128-element K steps) rather
    than w4a16. ``untiled`` (fp4 without ``w8a8``): the untiled w4a16 kernel's configurations instead of the tiled
    w4a16's (see :class:`FusedMoE`).

    Raises:
        UnknownNameError: an unknown ``wfmt``.
        UnsupportedError: no stage count fits the limit, or K has no usable step.
    """
    check_wfmt(wfmt)
    t = check_tokens_per_expert(tokens_per_expert)
    if k_dim is not None:
        import operator

        given = k_dim
        try:
            k_dim = 0 if isinstance(k_dim, bool) else operator.index(k_dim)
        except TypeError:
            k_dim = 0
        if k_dim <= 0:
            raise TruepeakError(f"k_dim (the GEMM's K) must be a positive integer, got {given!r}")
    t = max(t, 1.0)
    fp4 = wfmt in ("nvfp4", "mxfp4")
    fp8 = wfmt in ("fp8", "fp8_block")
    # Every choice below is the fastest measured on the H200 (benchmarks/moe_kernel_tuning.py, DeepSeek-V3 shapes;
    # the figures are in docs/results/h200/moe/README.md); a device with a different balance may prefer others.
    bm = 16 if t <= 4 else 32 if t <= 10 else 64 if t <= 40 else 128
    bn = 64 if gated else 128
    bk, warps, stages, prefetch, hoist, maxnreg = 128, 4, 4 if bm <= 64 else 3, False, False, None
    if bm == 128:  # 128-token blocks: 128 x 128 tiles, 8 warps
        bn, bk, warps = 128, 64, 8
    if 10 < t <= 20 and wfmt in ("bf16", "fp8"):  # 32-token blocks at 16 tokens per expert: half the activation
        # traffic through L2 of 64-token blocks; bf16 with 128 weight rows
        bm, bn = 32, 128 if gated and wfmt == "bf16" else bn
    if fp8 and w8a8:  # fp8 MMA from shared memory, partial sums promoted to fp32 every 128 products
        stages = 3
        if t <= 10 and wfmt == "fp8":  # fp8_block: one 128 x 128 scale per K step, so 128 at most
            # 16-token blocks and 256-element steps up to 10 tokens per expert
            bm, bk = 16, 256
        if bm == 128:  # 128 x 128 tiles, 128-element steps (the promoted accumulators spill a little, still faster)
            bk = 128
    if fp8 and not w8a8:  # w8a16: smaller token blocks and fewer stages keep more programs per SM
        bm = 16 if t <= 10 else 32 if t <= 20 else bm
        stages = 2 if bm == 32 else 3
        warps = 8 if bm == 128 else 4
    if fp4 and mma:  # the MMA layout: the tiled w4a16's token blocks and 128 weight rows; 128-element steps (two
        # 64-element chunks) where K is a multiple of 128, else 64, as for mxfp4's w4a8 step: nvfp4 at 8 tokens per
        # expert 1,847 against 1,987 us per unit on the H200 (docs/results/h200/moe-fp4/ncu_nvfp4_8.txt against
        # docs/results/h200/moe-fp4/ncu_nvfp4_8_k64.txt)
        bm = 16 if t <= 10 else 32 if t <= 20 else 64 if t <= 40 else 128
        bk = 128 if k_dim is None or k_dim % 128 == 0 else 64
        bn, stages, warps = 128, 3, 4 if bm <= 64 else 8
    elif fp4 and w8a8:  # w4a8: one fp8 MMA of K = 32 per scale block, 4 blocks per step (see w4a8_block_k)
        # 16-token blocks up to 10 tokens per expert, 32 up to 20; 128 weight rows up to 32-token blocks, 64 from
        # 64-token blocks; 3 stages
        bm = 16 if t <= 10 else 32 if t <= 20 else bm
        bk, bn, stages, warps = w4a8_block_k(wfmt, k_dim), 128 if bm <= 32 else 64, 3, 4
    elif fp4 and not untiled:  # tiled w4a16: the w4a8 layout and step, fp16 MMAs after an fp16 scale multiply
        # 16-token blocks up to 10 tokens per expert, 32 up to 20, 64 up to 40; 8 warps on 128-token blocks
        bm = 16 if t <= 10 else 32 if t <= 20 else 64 if t <= 40 else 128
        bk, bn, stages, warps = w4a8_block_k(wfmt, k_dim), 128, 3, 4 if bm <= 64 else 8
        if wfmt == "nvfp4" and bm == 128 and (k_dim is None or k_dim % 128 == 0):
            bk = 128  # two chunks and two scale words per step
        if wfmt == "nvfp4" and bm <= 32:
            # capped at 128 registers: 4 programs of 128 threads per SM instead of 3
            maxnreg = 128
    elif fp4:  # untiled w4a16: 128-element K steps (fewer registers than 256: 4 programs per SM)
        bk, stages = 128, 3
        if bm <= 32:
            hoist = True  # decode in the MMA operand's layout
        else:  # 64-row blocks for every larger count (128 spills registers), 8 warps on 128 weight rows
            bm, bn, warps = 64, 128, 8
    if k_dim is not None and fp4 and untiled and not w8a8:  # (tiled: w4a8_block_k above checked K)
        bk = fp4_block_k(k_dim)  # also the weights' nibble-order chunk (see to_kernel_nibble_order)
    elif k_dim is not None and not fp4:  # the largest power-of-two step <= bk that divides K (kernels do not mask K)
        while bk > 16 and k_dim % bk:
            bk //= 2
        if k_dim % bk:
            raise UnsupportedError(f"K={k_dim} is not a multiple of {bk}: the MoE kernel needs K in whole steps of "
                                   f"16 elements")
    # 64-token blocks at about 32 tokens per expert, bf16 and fp8 w8a8: one expert's weight tiles back to back
    # (group_m = 1), so they share its activation tile in L2: over token block fastest, fp8 w8a8 1.10-1.11x with both
    # kernels grouped, bf16 1.15x with gate/up 1 and down 4, DeepSeek-V3 and GLM-5 E = 256 on the H200 (the tuner's
    # candidates that differ from these rules in the tile order only: docs/results/h200/moe-tune/retune.jsonl.gz,
    # glm5.jsonl.gz)
    group = 1 if 20 < t <= 40 and (wfmt == "bf16" or (wfmt == "fp8" and w8a8)) else 0
    cfg = KernelConfig(bm, bn, bk, warps, stages, prefetch, hoist, maxnreg, group_m=group)
    if smem_limit is None:
        return cfg
    from truepeak.hardware.limits import check_shared_memory

    while True:
        try:
            check_shared_memory(smem_limit, cfg.smem_bytes(wfmt, gated, w8a8),
                                f"MoE kernel tile {cfg.block_n}x{cfg.block_m}x{cfg.block_k}, {cfg.num_stages} stages")
            return cfg
        except UnsupportedError:
            if cfg.num_stages <= 1:
                raise
            import dataclasses

            cfg = dataclasses.replace(cfg, num_stages=cfg.num_stages - 1)


def default_activations(wfmt: str) -> str | None:
    """The activations :class:`FusedMoE` runs a weight format with when none is asked for: ``"fp8"`` for fp8 weights
    (w8a8) and mxfp4 (w4a8), ``"fp16"`` for nvfp4 (measured with the tiled w4a16; nvfp4 now runs the MMA layout,
    :func:`default_fp4_layout`, where fp8 activations measured within 3 % of fp16 up to 8 tokens per expert), None for
    bf16. Measured on the H200
    (docs/results/h200/moe/README.md): mxfp4's w4a8 is faster than its tiled w4a16 at every tokens per expert;
    nvfp4's tiled w4a16 is a few percent slower than its w4a8 up to 8 tokens per expert, faster from 16 on, and an
    order of magnitude closer to the float32 reference (fp16 rather than e4m3 activations), so nvfp4's default does
    not depend on the batch.

    Raises:
        UnknownNameError: an unknown format."""
    check_wfmt(wfmt)
    return {"bf16": None, "nvfp4": "fp16"}.get(wfmt, "fp8")


def default_fp4_layout(wfmt: str) -> str:
    """The fp4 weight layout :class:`FusedMoE` runs a format with when none is asked for: ``"mma"``
    (:func:`~truepeak.kernels.moe_triton.to_mma_layout`) for nvfp4, ``"tiles"`` (the w4a8 layout's kernels) for
    mxfp4. Measured on the H200 in one run (docs/results/h200/moe-fp4/README.md): nvfp4 in the MMA layout is
    1.11-1.15x faster than the tiles kernel's w4a16 up to 8 tokens per expert, 1.07-1.10x at 16-32 and 5 % slower at
    64 (E = 256); mxfp4's tiles w4a8 (5 integer instructions per 8 decoded values, then one FFMA per accumulator per
    block scale) is 1.27-1.29x faster than the MMA layout up to 8 tokens per expert and 1.08-1.18x at 16-32.

    Raises:
        UnknownNameError: not an fp4 format."""
    if wfmt not in ("nvfp4", "mxfp4"):
        raise UnknownNameError(f"fp4 layouts are for nvfp4 or mxfp4 weights, not {wfmt!r}")
    return "mma" if wfmt == "nvfp4" else "tiles"


def check_wfmt(wfmt: str) -> str:
    """Return ``wfmt`` or raise UnknownNameError naming the accepted formats."""
    if wfmt not in WFMT_ID:
        raise UnknownNameError(f"unknown MoE kernel weight format {wfmt!r}; expected one of "
                               f"{', '.join(WEIGHT_FORMATS)}")
    return wfmt


def fp4_block_k(k_dim: int) -> int:
    """The K step of the fp4 kernels for a GEMM of reduction size ``k_dim`` (elements): 128 or 64, whichever divides
    K, preferring 128 (faster than 256 on the H200: fewer registers, more programs per SM).
    It is also the chunk of :func:`to_kernel_nibble_order`, so it depends on K only (not on tokens per expert):
    weights are repacked once, at load time.

    Raises:
        UnsupportedError: K is not a multiple of 64 (a 64-element step holds one mxfp4 scale block per half).
    """
    for bk in (128, 64):
        if k_dim % bk == 0:
            return bk
    raise UnsupportedError(f"K={k_dim} is not a multiple of 64: the fp4 MoE kernel needs K in whole steps of 64 "
                           f"elements (32 bytes)")


def w4a8_block_k(wfmt: str, k_dim: int | None = None) -> int:
    """The K step of the w4a8 kernel: 4 scale blocks, so that each row's scale bytes of a step are one int32 word:
    64 for nvfp4 (16-element blocks), 128 for mxfp4 (32), or 64 for mxfp4 when K is not a multiple of 128 (2 blocks
    per step, the word's high bytes unused: gpt-oss's K = 2880). The weights' nibble chunk is 64 for every step (a
    128 step holds two chunks).

    Raises:
        UnknownNameError: not an fp4 format. UnsupportedError: K not a multiple of 64."""
    if wfmt not in ("nvfp4", "mxfp4"):
        raise UnknownNameError(f"the w4a8 kernel takes nvfp4 or mxfp4 weights, not {wfmt!r}")
    if k_dim is not None and (k_dim <= 0 or k_dim % 64):
        raise UnsupportedError(f"K={k_dim} is not a multiple of 64: the w4a8 {wfmt} MoE kernel needs K in whole "
                               f"steps of 64 elements")
    return 64 if wfmt == "nvfp4" or (k_dim is not None and k_dim % 128) else 128
