"""The sweep of ``truepeak run`` as data: the shapes, the formats and their fp8 scale variants, one :class:`Case` each.

Shapes (module docstring of :mod:`truepeak.bench.run`): the decode regime, M in :data:`DECODE_M`, at the DeepSeek-V3
MoE expert shapes :data:`MODEL_NK` (DeepSeek-V3 technical report, arXiv:2412.19437: hidden 7168, expert intermediate
2048), and large squares; quick mode keeps a handful of small cases.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from truepeak.bench import gemm as G
from truepeak.bench import membw
from truepeak.hardware.detect import DeviceInfo
from truepeak.records import CopyWorkload, GemmWorkload, record_key
from truepeak.roofline import Copy
from truepeak.units import fmt_size


#: Decode-regime M values (tokens per expert / batch rows).
DECODE_M: tuple[int, ...] = (1, 2, 4, 8, 16, 32, 64, 128, 256)
#: (N, K) of real model GEMMs: DeepSeek-V3 MoE expert gate+up (2 x 2048 intermediate, 7168 hidden) and down.
MODEL_NK: tuple[tuple[int, int, str], ...] = (
    (4096, 7168, "DeepSeek-V3 expert gate+up"),
    (7168, 2048, "DeepSeek-V3 expert down"),
)
GPU_SQUARES: tuple[int, ...] = (4096, 8192)
CPU_SQUARES: tuple[int, ...] = (1024, 2048)


# Quick mode (tests, smoke runs): a handful of small cases.
QUICK_CPU_SHAPES: tuple[tuple[int, int, int], ...] = ((1, 1024, 2048), (32, 1024, 2048), (256, 256, 256))
QUICK_GPU_SHAPES: tuple[tuple[int, int, int], ...] = ((1, 4096, 7168), (32, 4096, 7168), (4096, 4096, 4096))


@dataclass(frozen=True)
class Case:
    """One thing to measure.

    Attributes:
        kind: ``"membw"`` (copy bandwidth) or ``"gemm"``.
        format: format name (GEMMs), None for the copy.
        m, n, k: GEMM shape (0 for the copy).
        nbytes: bytes per buffer (copy only).
        large: a large square (gets the longer budget).
        origin: where the shape comes from ("DeepSeek-V3 expert gate+up", "square", ...).
        skip_reason: set for a format the device cannot run: the case is written as ``skipped`` without running.
        mode: ``"sustained"`` or ``"burst"`` on a GPU (``""``: the device's default, sustained; a CPU is always
            ``"cpu"``).
        scaling: fp8 scale layout (``"tensor"``, ``"row"``, ``"block128"``; None: the format's default).
        inputs: ``"random"`` (always, for results) or ``"zeros"`` (docs/method.md, 'Random inputs': only when asked;
            labelled).
        warmup_s, budget_s: per-case warm-up and timed budget (seconds) overriding the run's budgets (the peak search
            sets them); None uses :class:`Budgets`.
    """

    kind: str
    format: str | None = None
    m: int = 0
    n: int = 0
    k: int = 0
    nbytes: int = 0
    large: bool = False
    origin: str = ""
    skip_reason: str = ""
    mode: str = ""
    scaling: str | None = None
    inputs: str = "random"
    warmup_s: float | None = None
    budget_s: float | None = None

    @property
    def label(self) -> str:
        if self.kind == "membw":
            return f"copy {fmt_size(self.nbytes)}"
        return f"{self.m}x{self.n}x{self.k}"

    @property
    def progress_label(self) -> str:
        """What the progress bar shows for this case: ``"copy 256 MiB"``, ``"bf16 8192x8192x8192"``."""
        return self.label if self.kind == "membw" else f"{self.format} {self.label}"

    def workload(self) -> CopyWorkload | GemmWorkload:
        """The record's ``workload``: parameters, FLOP and minimum bytes (deterministic, so it can key ``--resume``)."""
        if self.kind == "membw":
            return CopyWorkload(label=self.label, nbytes=self.nbytes, bytes_moved=Copy(self.nbytes).min_bytes,
                                counting="read + write")
        g = G.gemm_workload(self.format, self.m, self.n, self.k, self.scaling)
        return GemmWorkload(label=self.label, m=self.m, n=self.n, k=self.k, out_format=g.out_format.name,
                            scaling=g.scaling, flop=g.flop, min_bytes=g.min_bytes, intensity=g.intensity,
                            origin=self.origin,
                            # never a peak: kept apart from the random-input case
                            inputs=self.inputs if self.inputs != "random" else None)


def default_formats(device: DeviceInfo, quick: bool = False) -> list[str]:
    """Formats of the default sweep: GPU: fp32, tf32, bf16, fp16, fp8_e4m3, int8 + probes mxfp8, nvfp4, mxfp4 (skipped
    where unsupported); CPU: fp32, and bf16 outside quick mode."""
    if device.kind == "cuda":
        return list(G.GPU_FORMATS) + list(G.GPU_SKIP_PROBES)
    return ["fp32"] if quick else ["fp32", "bf16"]


def gemm_shapes(device: DeviceInfo, quick: bool = False) -> list[tuple[int, int, int, bool, str]]:
    """``(m, n, k, large, origin)`` of the GEMM sweep for this device."""
    if quick:
        shapes = QUICK_GPU_SHAPES if device.kind == "cuda" else QUICK_CPU_SHAPES
        return [(m, n, k, m == n == k, "square" if m == n == k else "quick") for m, n, k in shapes]
    out = [(m, n, k, False, origin) for n, k, origin in MODEL_NK for m in DECODE_M]
    squares = GPU_SQUARES if device.kind == "cuda" else CPU_SQUARES
    out += [(s, s, s, True, "square") for s in squares]
    return out


def format_variants(fmt: str, quick: bool = False) -> list[str | None]:
    """The fp8 scale layouts swept for a format: fp8_e4m3 tensor, row and 128-block; fp8_e5m2 tensor and row (the
    128-block recipe is e4m3 only); quick mode keeps the per-tensor one. Other formats: ``[None]``."""
    if fmt == "fp8_e4m3":
        return ["tensor"] if quick else list(G.FP8_SCALINGS)
    if fmt == "fp8_e5m2":
        return ["tensor"] if quick else ["tensor", "row"]
    return [None]


def plan_cases(device: DeviceInfo, formats: Sequence[str], quick: bool = False,
               format_skips: dict[str, str] | None = None, modes: Sequence[str] = ("sustained",)) -> list[Case]:
    """The sweep as data: the copy first, then for each mode and format every shape (or one skipped case if the format
    cannot run here), fp8 formats once per scale layout (:func:`format_variants`).

    Args:
        device: the detected device.
        formats: canonical format names, in order.
        quick: the small quick-mode shapes and copy.
        format_skips: extra ``{format: reason}`` to skip (e.g. CPU bf16 found too slow).
        modes: timing modes on a GPU, in order (``"sustained"``, ``"burst"``); a CPU has one, ``"cpu"``.
    """
    format_skips = dict(format_skips or {})
    cases = [Case("membw", nbytes=membw.copy_bytes(device, quick), origin="device copy")]
    shapes = gemm_shapes(device, quick)
    gpu_modes = list(modes) if device.kind == "cuda" else [""]
    for mode in gpu_modes:
        mode = "" if mode == "sustained" else mode  # the default mode keeps the keys runs made before --mode had
        for fmt in formats:
            for scaling in format_variants(fmt, quick):
                ok, reason = G.supported(fmt, device, scaling=scaling)
                if ok and fmt in format_skips:
                    ok, reason = False, format_skips[fmt]
                if not ok:
                    m, n, k, _, _ = shapes[-1]
                    cases.append(Case("gemm", fmt, m, n, k, large=True, origin="format probe", skip_reason=reason,
                                      mode=mode, scaling=scaling))
                    continue
                cases += [Case("gemm", fmt, m, n, k, large=large, origin=origin, mode=mode, scaling=scaling)
                          for m, n, k, large, origin in shapes]
    return cases


def case_mode(device: DeviceInfo, case: Case | None = None) -> str:
    """The timing mode of a case: ``"cpu"`` on a CPU; on a GPU the case's mode, sustained by default."""
    if device.kind != "cuda":
        return "cpu"
    return (case.mode if case is not None and case.mode else "sustained")


def case_key(case: Case, device: DeviceInfo) -> str:
    """The ``--resume`` key of a case: :func:`truepeak.records.record_key` of its record."""
    return record_key(case.kind, case.workload(), case_backend(case, device), case.format, case_mode(device, case))


def case_backend(case: Case, device: DeviceInfo) -> str:
    """The record's ``backend``: the copy's (:func:`truepeak.bench.membw.backend_name`) or the GEMM's
    (:func:`truepeak.bench.gemm.backend_name`)."""
    if case.kind == "membw":
        return membw.backend_name(device.kind)
    return G.backend_name(case.format, device.kind, case.scaling)


__all__ = ["DECODE_M", "MODEL_NK", "GPU_SQUARES", "CPU_SQUARES", "QUICK_CPU_SHAPES", "QUICK_GPU_SHAPES", "Case",
           "default_formats", "gemm_shapes", "format_variants", "plan_cases", "case_mode", "case_key", "case_backend"]
