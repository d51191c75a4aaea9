"""How ``truepeak peak`` searches: the shape space (coarse grids, refinement steps, bounds: :class:`SearchPlan`), the
per-evaluation time budgets of each mode (:class:`PeakBudgets`), the defaults, and the ``run_config`` every record of
a search stores (:func:`search_config`). The reasons for the numbers are in :mod:`truepeak.bench.peak`'s docstring."""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from truepeak.errors import ConfigError

Shape = tuple[int, int, int]

#: Coarse grid edges (GPU): M, N, K in these values with M <= N (a GEMM and its transpose run alike): 40 shapes.
GPU_COARSE_DIMS: tuple[int, ...] = (2048, 4096, 8192, 16384)
CPU_COARSE_DIMS: tuple[int, ...] = (256, 512, 1024)
#: Refinement steps, largest first; every searched dimension is a multiple of the last (finest) one.
GPU_STEPS: tuple[int, ...] = (2048, 1024, 512, 256)
CPU_STEPS: tuple[int, ...] = (256, 128)
GPU_MAX_DIM = 20480
CPU_MAX_DIM = 2048
#: A neighbour must beat the current shape by more than this fraction to be moved to (timing noise of one short
#: measurement is ~0.3-1 %).
MOVE_TOLERANCE = 0.003
#: Distinct shapes re-measured at the end.
TOP_K = 3

PHASES = ("coarse", "refine", "remeasure")


def coarse_grid(dims: Sequence[int]) -> list[Shape]:
    """M, N, K over ``dims`` with M <= N, largest FLOP count first (a search stopped early has seen the big ones)."""
    shapes = [(m, n, k) for m, n, k in itertools.product(dims, dims, dims) if m <= n]
    return sorted(shapes, key=lambda s: (-s[0] * s[1] * s[2], s))


@dataclass(frozen=True)
class SearchPlan:
    """How a search walks the shape space.

    Attributes:
        coarse: shapes measured first.
        steps: refinement steps, largest first; shapes are kept multiples of ``steps[-1]``.
        min_dim, max_dim: bounds on M, N and K.
        top_k: distinct best shapes re-measured at the end.
        starts: refinement starts from the best this many coarse shapes (one after another, sharing what was
            measured), so one lucky or misleading coarse winner cannot keep the search away from the real top.
        tolerance: relative improvement below which a neighbour is not moved to.
        max_evals: evaluations at most (coarse + refine; None: only the time budget limits).
    """

    coarse: tuple[Shape, ...]
    steps: tuple[int, ...] = GPU_STEPS
    min_dim: int = 256
    max_dim: int = GPU_MAX_DIM
    top_k: int = TOP_K
    tolerance: float = MOVE_TOLERANCE
    max_evals: int | None = None
    starts: int = 2

    def __post_init__(self) -> None:
        if not self.coarse:
            raise ConfigError("a search needs at least one coarse shape", field="coarse")
        if not self.steps or any(s <= 0 for s in self.steps):
            raise ConfigError(f"refinement steps must be positive, got {self.steps}", field="steps")
        if self.top_k < 1:
            raise ConfigError(f"top_k must be >= 1, got {self.top_k}", field="top_k")

    @property
    def align(self) -> int:
        return self.steps[-1]


def gpu_plan(max_evals: int | None = None) -> SearchPlan:
    """The GPU search: the 40-shape coarse grid over :data:`GPU_COARSE_DIMS`, steps :data:`GPU_STEPS`, dims 256 to
    :data:`GPU_MAX_DIM`, top :data:`TOP_K` re-measured, two refinement starts."""
    return SearchPlan(tuple(coarse_grid(GPU_COARSE_DIMS)), GPU_STEPS, 256, GPU_MAX_DIM, TOP_K, MOVE_TOLERANCE,
                      max_evals, starts=2)


def cpu_plan(max_evals: int | None = None) -> SearchPlan:
    """The CPU search: the coarse grid over :data:`CPU_COARSE_DIMS`, steps :data:`CPU_STEPS`, dims 128 to
    :data:`CPU_MAX_DIM`, top 2 re-measured, a 1 % move tolerance (host timings are noisier), one start."""
    return SearchPlan(tuple(coarse_grid(CPU_COARSE_DIMS)), CPU_STEPS, 128, CPU_MAX_DIM, 2, 0.01, max_evals, starts=1)


@dataclass(frozen=True)
class PeakBudgets:
    """Per-evaluation time budgets (seconds) of one mode.

    Attributes:
        warmup_s, budget_s: warm-up and timed budget of a search evaluation.
        final_warmup_s, final_budget_s: the same for the re-measurements.
        settle_s: back-to-back GEMMs before the search starts (sustained: clocks and power settle, ~3 s).
    """

    warmup_s: float
    budget_s: float
    final_warmup_s: float
    final_budget_s: float
    settle_s: float = 0.0

    def reserve_s(self, top_k: int) -> float:
        """Time to keep for the re-measurements (plus ~0.3 s set-up each)."""
        return top_k * (self.final_warmup_s + self.final_budget_s + 0.3)


#: burst: the clock recovers in the 1.5 ms gap before each sample, so a short warm-up suffices.
BURST_BUDGETS = PeakBudgets(warmup_s=0.05, budget_s=0.15, final_warmup_s=0.5, final_budget_s=1.5)
#: sustained: longer warm-ups, a 3 s settle first and 3 s before each re-measurement (CUTLASS guideline: clocks
#: oscillate for ~3 s on a power-capped part).
SUSTAINED_BUDGETS = PeakBudgets(warmup_s=0.3, budget_s=0.15, final_warmup_s=3.0, final_budget_s=2.0, settle_s=3.0)
CPU_PEAK_BUDGETS = PeakBudgets(warmup_s=0.02, budget_s=0.06, final_warmup_s=0.05, final_budget_s=0.3)
#: Default ``--budget`` per (format, mode), seconds.
DEFAULT_BUDGET_S = {"cuda": 60.0, "cpu": 15.0}
#: Formats ``truepeak peak`` searches when none are given.
DEFAULT_GPU_FORMATS: tuple[str, ...] = ("bf16", "fp8_e4m3")
DEFAULT_CPU_FORMATS: tuple[str, ...] = ("fp32",)

CPU_NOTE = ("on a CPU truepeak peak runs a small search (M, N, K up to 2048) with the host timer: it finds the best "
            "BLAS shape for this CPU; there are no GPU clocks or NVML telemetry and no burst/sustained distinction "
            "(records are labelled mode cpu); tensor-core formats (tf32, fp16, fp8, int8, block-scaled) need a GPU")


def budgets_for(mode: str) -> PeakBudgets:
    """The per-evaluation budgets of a mode: :data:`BURST_BUDGETS`, :data:`SUSTAINED_BUDGETS`, else (``"cpu"``)
    :data:`CPU_PEAK_BUDGETS`."""
    return {"burst": BURST_BUDGETS, "sustained": SUSTAINED_BUDGETS}.get(mode, CPU_PEAK_BUDGETS)


def search_config(dev: Any, fmt: str, mode: str, budgets: PeakBudgets, plan: SearchPlan, budget_s: float,
                 scaling: str | None) -> dict[str, Any]:
    """The ``run_config`` every record of one search stores (``command: "peak"``): device, format, mode, fp8 scaling,
    the wall budget in seconds, the per-evaluation budgets and the plan; what ``--resume`` compares
    (:data:`truepeak.bench.peak.resume.PEAK_RESUME_MUST_MATCH`)."""
    return {"command": "peak", "device": dev.torch_device, "device_name": dev.name, "format": fmt, "mode": mode,
            "scaling": scaling, "budget_s": budget_s, "budgets": dataclasses.asdict(budgets),
            "plan": {"coarse": len(plan.coarse), "steps": list(plan.steps), "min_dim": plan.min_dim,
                     "max_dim": plan.max_dim, "top_k": plan.top_k, "tolerance": plan.tolerance,
                     "max_evals": plan.max_evals}}


__all__ = ["Shape", "GPU_COARSE_DIMS", "CPU_COARSE_DIMS", "GPU_STEPS", "CPU_STEPS", "GPU_MAX_DIM", "CPU_MAX_DIM",
           "MOVE_TOLERANCE", "TOP_K", "PHASES", "coarse_grid", "SearchPlan", "gpu_plan", "cpu_plan", "PeakBudgets",
           "BURST_BUDGETS", "SUSTAINED_BUDGETS", "CPU_PEAK_BUDGETS", "DEFAULT_BUDGET_S", "DEFAULT_GPU_FORMATS",
           "DEFAULT_CPU_FORMATS", "CPU_NOTE", "budgets_for", "search_config"]
