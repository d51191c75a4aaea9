"""The main job, ``truepeak run``: measure this device's copy bandwidth and GEMM throughput per format, write records.

The default sweep (cases as data: :func:`plan_cases`):

1. Memory bandwidth first (:mod:`truepeak.bench.membw`): a device copy over buffers >= 8x the cache. Where the
   catalog has no bandwidth (a CPU) this copy is the roofline's memory ceiling; a ``very_noisy`` one is then measured
   once more over :data:`COPY_REMEASURE_FACTOR` x the budget, and the record's reason says so.
2. For each timing mode (GPU: ``sustained`` by default, ``burst`` or both with ``modes``; CPU: ``cpu``) and each
   supported format (GPU: fp32, tf32, bf16, fp16, fp8_e4m3 with per-tensor, per-row and 128-block scales, fp8_e5m2
   (e4m3 x e5m2) with per-tensor and per-row scales, int8; CPU: fp32, plus bf16 outside quick mode when the CPU runs
   it at least half as fast as fp32; quick mode keeps the per-tensor fp8 scales only), in that order:

   - the decode regime, M in {1, 2, 4, 8, 16, 32, 64, 128, 256}, at two DeepSeek-V3 MoE expert shapes: gate+up
     (N=4096 = 2 x 2048, K=7168 = hidden) and down (N=7168, K=2048);
   - large squares: 4096^3 and 8192^3 on a GPU, 1024^3 and 2048^3 on a CPU.

   Formats the device cannot run (nvfp4/mxfp4/mxfp8 on sm_90, say) get one ``skipped`` record each with the reason;
   shapes a backend cannot run (int8 needs M > 16) get a ``skipped`` record per shape; a combination the library
   refuses at its first call (:class:`~truepeak.bench.gemm.BackendUnsupported`) is ``skipped`` with its words.

Every GEMM record is labelled with its mode, stores the NVML telemetry summary of its timed region, the dense peak
and the peak at the median sampled SM clock (``derived.peak_at_clock_flop_per_s``) with both efficiencies, and
warns (:func:`clock_warnings`) when the clock ran below 90 % of its maximum (naming the throttle reason) or when a
sampled clock above the catalog maximum made ``at_clock_fraction`` unusable.

Each case becomes a :class:`truepeak.records.Record` (:func:`truepeak.records.make_record`) written the moment it
finishes through :class:`~truepeak.records.RecordWriter` (flushed and fsynced: a crash loses nothing), with ``derived``
from :func:`truepeak.efficiency.derived_metrics` (SI: FLOP/s, B/s, fractions of the dense peak, the roofline and the peak
at the median SM clock NVML sampled, and the peak and bandwidth they are against). An exception inside one case (out
of memory, an unsupported layout, a result above the peak) becomes a ``failed`` record with the reason, and the sweep
continues. A GEMM above 100 % of its roofline gets a record warning saying why (:func:`roofline_warnings`).
``resume=True`` skips cases whose ``ok``/``skipped`` records are already in the file (failed ones run again); it
continues with the formats recorded in ``run_config`` unless formats are given, and refuses other settings
(:func:`check_resume_config`). This module measures and returns records; rendering them (the table, ``summary.md``) is
:mod:`truepeak.report`'s job, called by the CLI.

Time budget and its trade-off (docs/method.md, 'Warm-up outliers'): the whole default run should take <=
3 min on an H200 and <= 2 min on a 2-core CPU, for ~200 GPU cases (sustained only). So the GPU gets ONE long warm-up
(3 s of back-to-back bf16 8192^3 GEMMs) at the start to bring clock and power to their sustained state, then short
per-case budgets: 0.1 s warm-up + 0.3 s timed per decode case, 1.5 s + 1 s per large square (the squares draw the most
power and need the clock settled again after the light decode cases). The CUTLASS fixed-power protocol asks >= 3 s
warm-up and > 1000 iterations per shape; these shorter windows make the large-square numbers sit a little closer to
burst than a long sustained run (expect bf16 8192^3 on a 700 W H200 in ~650-800 TFLOPS, sustained literature 677-701,
burst ~807). Every record states its mode (sustained, back-to-back launches), warm-up seconds, sample count and the SM
clock it ran at, and its ``run_config`` holds the budgets, so the numbers can be read for what they are. For a longer,
stricter measurement, pass larger :class:`Budgets`.

Units: seconds, bytes, FLOP inside; records store SI values and fractions (0.68); the report renders them.
"""

from __future__ import annotations

import dataclasses
import itertools
import math
import os
import sys
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from truepeak.bench import cuda_timer, membw, timing
from truepeak.bench import gemm as G
from truepeak.bench.cuda_timer import GRAPH_THRESHOLD_S, RotationPlan, plan_rotation
from truepeak.bench.environment import environment
from truepeak.bench.outdir import (check_out_arg, default_out_dir, make_out_dir, prepare_out_dir,  # noqa: F401
                                   read_previous, refuse_other_schemas)
from truepeak.efficiency import derived_metrics
from truepeak.errors import MeasurementError, TruepeakError, require
from truepeak.formats import get_format
from truepeak.hardware.detect import DeviceInfo, detect, with_measured_bandwidth
from truepeak.records import (DONE_STATUSES, CopyMetrics, CopyWorkload, Correctness, Environment, GemmMetrics,
                              GemmWorkload, Record, RecordWriter, Rotation, latest, make_record, record_key)
from truepeak.roofline import Copy
from truepeak.units import fmt_bandwidth, fmt_pct, fmt_rate, fmt_size, rate_unit

#: Decode-regime M values (tokens per expert / batch rows).
DECODE_M: tuple[int, ...] = (1, 2, 4, 8, 16, 32, 64, 128, 256)
#: (N, K) of real model GEMMs: DeepSeek-V3 MoE expert gate+up (2 x 2048 intermediate, 7168 hidden) and down.
MODEL_NK: tuple[tuple[int, int, str], ...] = (
    (4096, 7168, "DeepSeek-V3 expert gate+up"),
    (7168, 2048, "DeepSeek-V3 expert down"),
)
GPU_SQUARES: tuple[int, ...] = (4096, 8192)
CPU_SQUARES: tuple[int, ...] = (1024, 2048)
#: The GPU settles clock and power on back-to-back SETTLE_SIZE^3 GEMMs in :func:`settle_format`.
SETTLE_SIZE = 8192
#: A very noisy copy that will be the roofline's memory ceiling is measured once more over this many times the budget.
COPY_REMEASURE_FACTOR = 4

# Quick mode (tests, smoke runs): a handful of small cases.
QUICK_CPU_SHAPES: tuple[tuple[int, int, int], ...] = ((1, 1024, 2048), (32, 1024, 2048), (256, 256, 256))
QUICK_GPU_SHAPES: tuple[tuple[int, int, int], ...] = ((1, 4096, 7168), (32, 4096, 7168), (4096, 4096, 4096))


@dataclass(frozen=True)
class Budgets:
    """Time budgets in seconds, and the reference-check size.

    Attributes:
        settle_s: one warm-up at the start of a GPU run (back-to-back bf16 GEMMs) to settle clock and power.
        warmup_s, budget_s: per-case warm-up and timed budget for decode-regime GEMMs.
        large_warmup_s, large_budget_s: the same for the large squares.
        copy_warmup_s, copy_budget_s: the same for the copy-bandwidth case.
        check_rows: rows of C compared with the float64 reference.
    """

    settle_s: float
    warmup_s: float
    budget_s: float
    large_warmup_s: float
    large_budget_s: float
    copy_warmup_s: float
    copy_budget_s: float
    check_rows: int


GPU_BUDGETS = Budgets(settle_s=3.0, warmup_s=0.1, budget_s=0.3, large_warmup_s=1.5, large_budget_s=1.0,
                      copy_warmup_s=0.3, copy_budget_s=0.5, check_rows=256)
CPU_BUDGETS = Budgets(settle_s=0.0, warmup_s=0.1, budget_s=0.8, large_warmup_s=0.2, large_budget_s=1.0,
                      copy_warmup_s=0.2, copy_budget_s=1.0, check_rows=64)
QUICK_BUDGETS = Budgets(settle_s=0.0, warmup_s=0.02, budget_s=0.05, large_warmup_s=0.05, large_budget_s=0.1,
                        copy_warmup_s=0.02, copy_budget_s=0.05, check_rows=32)
QUICK_GPU_BUDGETS = replace(QUICK_BUDGETS, settle_s=0.5, check_rows=128)


def default_budgets(device: DeviceInfo, quick: bool = False) -> Budgets:
    """The built-in budgets for a device: :data:`GPU_BUDGETS`/:data:`CPU_BUDGETS`, or in quick mode
    :data:`QUICK_GPU_BUDGETS`/:data:`QUICK_BUDGETS`."""
    if device.kind == "cuda":
        return QUICK_GPU_BUDGETS if quick else GPU_BUDGETS
    return QUICK_BUDGETS if quick else CPU_BUDGETS


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


@dataclass
class RunResult:
    """What :func:`run_main_job` returns (and :class:`RunInterrupted` carries).

    Attributes:
        out_dir: the output folder.
        records_path: ``results.jsonl`` in it.
        records: the records of this run, in sweep order (for resumed cases, the records already in the file).
        device: the detected device.
        elapsed_s: wall time of the run.
        notes: caveats in words (a roofline left without a memory ceiling, ...).
        resumed_keys: keys of the records taken over from ``results.jsonl`` by ``resume`` (not measured again).
        interrupted: the run was stopped by Ctrl-C; ``records`` are those finished before.
        n_cases: how many cases the sweep planned (0 when stopped before planning them): an interrupted run
            finished ``len(records)`` of ``n_cases``.
    """

    out_dir: Path
    records_path: Path
    records: list[Record]
    device: DeviceInfo
    elapsed_s: float = 0.0
    notes: list[str] = field(default_factory=list)
    resumed_keys: frozenset[str] = frozenset()
    interrupted: bool = False
    n_cases: int = 0


class RunInterrupted(KeyboardInterrupt):
    """:func:`run_main_job` was interrupted (Ctrl-C). The records finished so far are in ``records_path`` and in
    ``result.records`` (a :class:`RunResult` with ``interrupted=True``), for the caller to render.

    Attributes:
        result: the partial :class:`RunResult`.
        n_records, out_dir, records_path: shortcuts into it.
    """

    def __init__(self, result: RunResult):
        super().__init__(f"interrupted after {len(result.records)} records; they are in {result.records_path}")
        self.result = result

    @property
    def n_records(self) -> int:
        return len(self.result.records)

    @property
    def out_dir(self) -> Path:
        return self.result.out_dir

    @property
    def records_path(self) -> Path:
        return self.result.records_path


def default_formats(device: DeviceInfo, quick: bool = False) -> list[str]:
    """Formats of the default sweep: GPU: fp32, tf32, bf16, fp16, fp8_e4m3, int8 + probes mxfp8, nvfp4, mxfp4 (skipped
    where unsupported); CPU: fp32, and bf16 outside quick mode."""
    if device.kind == "cuda":
        return list(G.GPU_FORMATS) + list(G.GPU_SKIP_PROBES)
    return ["fp32"] if quick else ["fp32", "bf16"]


def parse_formats(text: str | Sequence[str] | None) -> list[str] | None:
    """``"bf16,fp8"`` -> ``["bf16", "fp8_e4m3"]`` (canonical names, duplicates dropped); None/"" -> None (defaults).

    Raises:
        UnknownNameError: an unknown format; the message lists the known names.
    """
    if text is None:
        return None
    items = text.split(",") if isinstance(text, str) else list(text)
    out: list[str] = []
    for item in items:
        item = item.strip()
        if not item:
            continue
        name = get_format(item).name
        if name not in out:
            out.append(name)
    return out or None


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


def parse_modes(text: str | Sequence[str] | None) -> list[str]:
    """``--mode``: ``"sustained"`` (default), ``"burst"`` or ``"both"`` (sustained, then burst).

    Raises:
        TruepeakError: another value; the message lists the accepted ones.
    """
    if text is None:
        return ["sustained"]
    items = [text] if isinstance(text, str) else list(text)
    out: list[str] = []
    for item in items:
        for part in str(item).split(","):
            part = part.strip().lower()
            if not part:
                continue
            if part == "both":
                names = ["sustained", "burst"]
            elif part in cuda_timer.MODES:
                names = [part]
            else:
                raise TruepeakError(f"unknown mode {part!r}; accepted: sustained (back-to-back, as a serving GPU "
                                    "runs), burst (an idle gap before each iteration), both")
            out += [n for n in names if n not in out]
    return out or ["sustained"]


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


def _mode(device: DeviceInfo, case: Case | None = None) -> str:
    """The timing mode of a case: ``"cpu"`` on a CPU; on a GPU the case's mode, sustained by default."""
    if device.kind != "cuda":
        return "cpu"
    return (case.mode if case is not None and case.mode else "sustained")


def case_key(case: Case, device: DeviceInfo) -> str:
    """The ``--resume`` key of a case: :func:`truepeak.records.record_key` of its record."""
    return record_key(case.kind, case.workload(), _backend(case, device), case.format, _mode(device, case))


def _backend(case: Case, device: DeviceInfo) -> str:
    if case.kind == "membw":
        return membw.backend_name(device.kind)
    return G.backend_name(case.format, device.kind, case.scaling)


def settle_format(device: DeviceInfo) -> str:
    """The format of the settling GEMMs: bf16, or fp16 before sm_80 (no bf16 tensor cores)."""
    return "bf16" if (device.sm_arch or 0) >= 80 else "fp16"


# ----------------------------------------------------------------------------------------------------------------------
# Running


def budgets_name(budgets: Budgets) -> str:
    """``"gpu"``, ``"cpu"``, ``"quick"``, ``"quick-gpu"`` for the built-in budgets, ``"custom"`` otherwise."""
    for name, b in (("gpu", GPU_BUDGETS), ("cpu", CPU_BUDGETS), ("quick", QUICK_BUDGETS),
                    ("quick-gpu", QUICK_GPU_BUDGETS)):
        if budgets == b:
            return name
    return "custom"



def run_config(dev: DeviceInfo, quick: bool, budgets: Budgets, formats: Sequence[str] | None = None,
               formats_given: bool = False, modes: Sequence[str] | None = None) -> dict[str, Any]:
    """The settings stored in every record as ``run_config``: what ``--resume`` compares (:data:`RESUME_MUST_MATCH`)
    and what a report needs to state the method from the records alone (the budgets in seconds, the settling GEMMs,
    the CUDA-graph threshold).

    Args:
        formats: the formats the run sweeps (canonical names, in order); None leaves ``formats`` out.
        formats_given: they were asked for by name (``--formats``) rather than being the device's defaults.
        modes: the timing modes swept (GPU; ``["sustained"]`` by default); None leaves ``modes`` out.
    """
    cuda = dev.kind == "cuda"
    settle = None
    if cuda and budgets.settle_s > 0:
        settle = {"format": settle_format(dev), "shape": f"{SETTLE_SIZE}x{SETTLE_SIZE}x{SETTLE_SIZE}",
                  "seconds": budgets.settle_s}
    config = {"quick": bool(quick), "device": dev.torch_device, "device_name": dev.name,
              "budgets": budgets_name(budgets), "budget_settings": dataclasses.asdict(budgets), "settle": settle,
              "graph_threshold_s": GRAPH_THRESHOLD_S if cuda else None}
    if formats is not None:
        config.update(formats=list(formats), formats_given=bool(formats_given))
    if modes is not None:
        config["modes"] = list(modes) if cuda else ["cpu"]
    return config


#: ``run_config`` fields that must be equal for ``--resume`` to continue a results file (``formats`` as a set).
RESUME_MUST_MATCH = ("quick", "device", "device_name", "budgets", "formats", "modes")


def _config_value(key: str, value: Any) -> Any:
    """A ``run_config`` value as ``--resume`` compares it: formats as a set (their order is only the sweep's)."""
    return frozenset(value) if key == "formats" and isinstance(value, (list, tuple)) else value


def _show_config(key: str, value: Any) -> str:
    """A ``run_config`` value in a message: formats as ``--formats`` takes them (``bf16,fp32``)."""
    return ",".join(value) if key == "formats" and isinstance(value, (list, tuple)) else str(value)


def recorded_formats(previous: Iterable[Record]) -> tuple[list[str], bool] | None:
    """``(formats, formats_given)`` of the run that wrote ``previous`` (the first record whose ``run_config`` has
    them), or None for records written before ``run_config`` held the formats."""
    for rec in previous:
        there = rec.run_config
        if isinstance(there, dict) and isinstance(there.get("formats"), list):
            return [str(f) for f in there["formats"]], bool(there.get("formats_given"))
    return None


def check_resume_config(previous: Iterable[Record], config: dict[str, Any], path: Path) -> None:
    """Refuse to resume ``path`` when a record there was made with other settings (records without ``run_config``,
    written before it existed, are not checked for settings; nor are settings a record's ``run_config`` lacks, such
    as ``formats`` in records older than that field). Records of another schema version never get here:
    :func:`_read_previous` refuses such a file.

    Raises:
        TruepeakError: one line naming the settings that differ, e.g. ``quick (there: True, now: False)`` or
            ``formats (there: bf16, now: fp32,bf16)``.
    """
    for rec in previous:
        there = rec.run_config
        if not isinstance(there, dict):
            continue
        keys = [k for k in RESUME_MUST_MATCH
                if k in there and k in config and _config_value(k, there.get(k)) != _config_value(k, config.get(k))]
        if len(keys) > 1 and "budgets" in keys:
            keys.remove("budgets")  # follows from quick and device; name it only when it alone differs
        diff = [f"{k} (there: {_show_config(k, there.get(k))}, now: {_show_config(k, config.get(k))})" for k in keys]
        if diff:
            raise TruepeakError(f"cannot --resume {path}: its records were made with different settings: "
                                f"{'; '.join(diff)}; rerun with the same options (--quick, --device, --formats; "
                                "without --formats --resume takes the recorded ones), or choose another --out")


def _default_warn(message: str) -> None:
    print(f"warning: {message}", file=sys.stderr)


@dataclass
class _Sweep:
    """What the cases of one run share: the device, budgets, environment and settings, and the state the sweep
    carries from case to case (the roofline accelerator once the copy is measured, settled clocks, weights)."""

    dev: DeviceInfo
    budgets: Budgets
    quick: bool
    env: Environment
    config: dict[str, Any]
    acc: Any
    settled: bool
    bandwidth_note: str = ""
    ceiling_from_copy: bool = False
    weights: G.WeightCache = field(default_factory=G.WeightCache)

    def common(self, case: Case, key: str) -> dict[str, Any]:
        """The :func:`make_record` arguments every record of ``case`` has."""
        return dict(kind=case.kind, workload=case.workload(), backend=_backend(case, self.dev), format=case.format,
                    env=self.env, key=key, run_config=self.config)


def run_main_job(out_dir: str | os.PathLike | None = None, *, device: str | DeviceInfo = "auto",
                 formats: str | Sequence[str] | None = None, quick: bool = False, resume: bool = False,
                 progress: bool | None = None, argv: Sequence[str] | None = None,
                 budgets: Budgets | None = None, warn: Callable[[str], None] | None = None,
                 modes: str | Sequence[str] | None = None) -> RunResult:
    """Run the main job and write ``results.jsonl`` under ``out_dir`` (rendering is the caller's:
    :mod:`truepeak.report`).

    Args:
        out_dir: output folder (created); default :func:`default_out_dir`.
        device: ``"auto"``, ``"cpu"``, ``"cuda"``, ``"cuda:N"`` or a :class:`DeviceInfo`.
        formats: format names (``"bf16,fp8"`` or a list); None for :func:`default_formats`, or with ``resume`` the
            formats recorded in the ``run_config`` of the records being continued. They are stored in every record's
            ``run_config``; resuming with other formats is refused.
        quick: a few small cases with tiny budgets (tests and smoke runs; < 15 s on a CPU).
        resume: continue an existing ``results.jsonl``, skipping cases already ``ok`` or ``skipped``.
        progress: a transient progress bar on stderr; None shows it only when stderr is a terminal.
        argv: command line recorded in each record's environment (default ``sys.argv``).
        budgets: override the time budgets (default :func:`default_budgets`).
        warn: called with one line per problem found in a resumed ``results.jsonl`` (a torn or malformed line, which
            is ignored); default prints ``warning: ...`` on stderr.
        modes: ``"sustained"`` (default), ``"burst"``, ``"both"`` or a list (:func:`parse_modes`): every GEMM case is
            timed once per mode, each record labelled with its mode. A CPU has one mode, ``"cpu"``.

    Returns:
        :class:`RunResult`.

    Raises:
        MissingDependencyError: torch is not installed (message carries the install command).
        UnknownNameError: an unknown format name.
        TruepeakError: a bad device string; ``out_dir`` is a file or cannot be created or written;
            ``results.jsonl`` already exists in ``out_dir`` without ``resume``, or does not exist with it;
            ``resume`` into records of another schema (:func:`_read_previous`) or made with other settings
            (:func:`check_resume_config`); results cannot be written.
        UnsupportedError: ``cuda`` asked for but not available.
        RunInterrupted: Ctrl-C; the records so far are kept in the file and carried by the exception.
    """
    torch = require("torch", "truepeak run")
    warn = warn or _default_warn
    t_start = time.perf_counter()
    fmts = parse_formats(formats)
    mode_list = parse_modes(modes)
    dev = device if isinstance(device, DeviceInfo) else detect(device)
    out = prepare_out_dir(out_dir, resume)  # before anything is measured
    path = out / "results.jsonl"
    budgets = budgets or default_budgets(dev, quick)
    previous = read_previous(path, warn) if resume and path.exists() else {}
    given = fmts is not None
    recorded = recorded_formats(previous.values()) if fmts is None else None
    if recorded is not None:  # --resume without --formats: the formats of the run being continued
        fmts, given = recorded
    sweep_formats = fmts or default_formats(dev, quick)
    config = run_config(dev, quick, budgets, sweep_formats, given, mode_list)
    check_resume_config(previous.values(), config, path)
    done = {key for key, rec in previous.items() if rec.status in DONE_STATUSES}

    result = RunResult(out, path, [], dev)
    if dev.kind != "cuda" and mode_list != ["sustained"]:  # as truepeak peak says it (bench/peak.py)
        result.notes.append(f"--mode {'/'.join(mode_list)}: burst and sustained have no meaning on a CPU; measured "
                            "with the host timer (mode cpu)")
    resumed: set[str] = set()
    sweep = None
    try:
        if dev.kind == "cuda":
            torch.cuda.set_device(dev.index or 0)
        cases = plan_cases(dev, sweep_formats, quick, _format_skips(torch, dev, fmts if given else None, quick),
                           modes=mode_list)
        result.n_cases = len(cases)
        env = environment(argv, device=dev.index if dev.kind == "cuda" else None).replace(device=dev.to_dict())
        sweep = _Sweep(dev, budgets, quick, env, config, acc=dev.accelerator,
                       settled=dev.kind != "cuda" or budgets.settle_s <= 0)
        with RecordWriter(path) as writer, _Progress(len(cases), progress) as bar:
            for case in cases:
                bar.update(f"{case.format or 'copy'} {case.label}")
                key = case_key(case, dev)
                if key in done:
                    rec = previous[key]
                    resumed.add(key)
                else:
                    rec = _run_case(case, key, sweep, torch)
                    writer.write(rec)
                if case.kind == "membw":
                    _use_copy(sweep, rec, result.notes)
                result.records.append(rec)
                bar.advance()
    except KeyboardInterrupt:
        result.interrupted = True
        raise RunInterrupted(_finish(result, resumed, t_start)) from None
    finally:
        if sweep is not None:
            sweep.weights.clear()
        _free(dev)
    return _finish(result, resumed, t_start)


def _finish(result: RunResult, resumed: set[str], t_start: float) -> RunResult:
    result.resumed_keys = frozenset(resumed)
    result.elapsed_s = time.perf_counter() - t_start
    return result


def _format_skips(torch: Any, dev: DeviceInfo, asked: list[str] | None, quick: bool) -> dict[str, str]:
    """``{format: reason}`` of default formats to skip: CPU bf16 when this CPU runs it far slower than fp32 (never
    when asked for by name)."""
    if asked is not None or dev.kind != "cpu" or "bf16" not in default_formats(dev, quick):
        return {}
    ok, why = cpu_bf16_fast_enough(torch)
    return {} if ok else {"bf16": why}


def _run_case(case: Case, key: str, sweep: _Sweep, torch: Any) -> Record:
    """Measure one case and return its record (ok, skipped or failed; only Ctrl-C propagates). The first GEMM that
    runs on a GPU settles clock and power first (:func:`settle_gpu`)."""
    if case.kind == "membw":
        return _run_copy(case, key, sweep)
    if not sweep.settled and not case.skip_reason:
        settle_gpu(torch, sweep.dev, sweep.budgets.settle_s)
        sweep.settled = True
    return _run_gemm(case, key, sweep)


def _use_copy(sweep: _Sweep, copy_record: Record, notes: list[str]) -> None:
    """Place the following GEMMs against the roofline the copy gives (:func:`_roofline_accelerator`)."""
    sweep.acc, sweep.bandwidth_note = _roofline_accelerator(sweep.dev, copy_record)
    sweep.ceiling_from_copy = sweep.acc is not sweep.dev.accelerator
    if sweep.bandwidth_note:
        notes.append(sweep.bandwidth_note)


def _roofline_accelerator(dev: DeviceInfo, copy_record: Record) -> tuple[Any, str]:
    """The accelerator GEMM records are placed against, and why it has no memory ceiling ("" when it has one or the
    catalog decides): the catalog one, or (no catalog bandwidth, e.g. a CPU) the same with the measured copy
    bandwidth as the roofline's memory ceiling. A copy whose working set is under 2x the cache
    (:func:`~truepeak.bench.membw.cache_resident`) is never used: it measures the cache, not memory."""
    acc = dev.accelerator
    if acc.memory_bandwidth is not None or not copy_record.ok or not isinstance(copy_record.derived, CopyMetrics):
        return acc, ""
    bytes_per_s = copy_record.derived.bytes_per_s
    if not bytes_per_s:
        return acc, ""
    workload = copy_record.workload
    nbytes = int(workload.nbytes)
    if membw.cache_resident(nbytes, dev.l2_bytes):
        return acc, (f"no roofline memory ceiling: the copy's working set ({fmt_size(2 * nbytes)}, source + "
                     f"destination) is under 2x the {fmt_size(dev.l2_bytes)} cache, so its bandwidth is a "
                     "cache figure, not memory (see docs/method.md, 'Cache-resident working sets'); % of roofline "
                     "is left empty")
    return with_measured_bandwidth(acc, bytes_per_s, f"truepeak run copy bandwidth, {workload.label}"), ""


def settle_gpu(torch: Any, dev: DeviceInfo, seconds: float) -> float:
    """Run back-to-back :func:`settle_format` :data:`SETTLE_SIZE`^3 GEMMs for ``seconds`` so clock and power reach
    their sustained state before the sweep (docs/method.md, 'Warm-up outliers': clocks oscillate for ~3 s).
    Returns the seconds spent."""
    if seconds <= 0:
        return 0.0
    dtype = getattr(torch, get_format(settle_format(dev)).torch_dtype)
    d = dev.torch_device
    gen = torch.Generator(device=d)
    gen.manual_seed(7)
    a = (torch.rand((SETTLE_SIZE, SETTLE_SIZE), generator=gen, device=d) * 2 - 1).to(dtype)
    b = (torch.rand((SETTLE_SIZE, SETTLE_SIZE), generator=gen, device=d) * 2 - 1).to(dtype)
    c = torch.empty_like(a)
    t0 = time.perf_counter()
    while time.perf_counter() - t0 < seconds:
        for _ in range(8):
            torch.mm(a, b.t(), out=c)
        torch.cuda.synchronize(d)
    del a, b, c
    return time.perf_counter() - t0


def cpu_bf16_fast_enough(torch: Any, size: int = 512, ratio: float = 2.0) -> tuple[bool, str]:
    """Is bf16 matmul on this CPU at most ``ratio`` x slower than fp32? (No native bf16 units make it 10-50x slower,
    which would blow the run's time budget.) Returns ``(ok, reason)``."""
    times = {}
    for dt in (torch.float32, torch.bfloat16):
        a = torch.rand((size, size), dtype=torch.float32).mul_(2).sub_(1).to(dt)
        b = torch.rand((size, size), dtype=torch.float32).mul_(2).sub_(1).to(dt)
        torch.mm(a, b)
        best = math.inf
        for _ in range(3):
            t = time.perf_counter()
            torch.mm(a, b)
            best = min(best, time.perf_counter() - t)
        times[dt] = best
    slow = times[torch.bfloat16] / max(times[torch.float32], 1e-9)
    if slow > ratio:
        return False, (f"bf16 matmul on this CPU runs {slow:.1f}x slower than fp32 (no native bf16 units); skipped "
                       "to keep the run short (ask for it with --formats bf16)")
    return True, ""


def _copy_is_ceiling(dev: DeviceInfo, case: Case) -> bool:
    """Whether the copy will be the roofline's memory ceiling (:func:`_roofline_accelerator`): the catalog has no
    bandwidth for the device (a CPU) and the copy's working set is not cache-resident."""
    return dev.accelerator.memory_bandwidth is None and not membw.cache_resident(case.nbytes, dev.l2_bytes)


def _run_copy(case: Case, key: str, sweep: _Sweep) -> Record:
    """Measure the copy. When it will be the roofline's memory ceiling and came out ``very_noisy`` (one noisy copy
    once made a CPU GEMM read 104.5 % of its roofline), it is measured once more over :data:`COPY_REMEASURE_FACTOR`
    times the budget and that measurement is used (its median, as always); the record's reason says so."""
    dev, budgets = sweep.dev, sweep.budgets
    common = sweep.common(case, key)
    notes: list[str] = []
    try:
        res = membw.measure_copy(dev, nbytes=case.nbytes, quick=sweep.quick, warmup_s=budgets.copy_warmup_s,
                                 budget_s=budgets.copy_budget_s)
        if _copy_is_ceiling(dev, case) and "very_noisy" in res.measurement.warning_codes:
            first = res
            warmup_s = COPY_REMEASURE_FACTOR * budgets.copy_warmup_s
            budget_s = COPY_REMEASURE_FACTOR * budgets.copy_budget_s
            res = membw.measure_copy(dev, nbytes=case.nbytes, quick=sweep.quick, warmup_s=warmup_s,
                                     budget_s=budget_s)
            notes.append(f"the first copy measurement was very noisy (IQR "
                         f"{fmt_pct(first.measurement.steady_rel_iqr)} of the median, "
                         f"{fmt_bandwidth(first.bandwidth_bps)} GB/s over {budgets.copy_budget_s:g} s); measured "
                         f"again over {budget_s:g} s ({warmup_s:g} s warm-up) before using it as the roofline's "
                         f"memory ceiling: {fmt_bandwidth(res.bandwidth_bps)} GB/s")
    except KeyboardInterrupt:
        raise
    except Exception as exc:  # noqa: BLE001  (one failed case must not stop the sweep)
        _free(dev)
        return make_record(**common, measurement=None, status="failed", reason=_reason(exc), mode=_mode(dev))
    correctness = Correctness(passed=True, reference="destination equals source after timing")
    return make_record(**common, measurement=res.measurement, status="ok", reason="; ".join([*res.notes, *notes]),
                       correctness=correctness, derived=res.derived)


def roofline_warnings(derived: GemmMetrics, ceiling_from_copy: bool = False, fmt: str | None = None) -> list[str]:
    """A record's warning when a GEMM reads above 100 % of its roofline (``roofline_fraction > 1``), in words.

    Memory-bound: its minimum traffic moved faster than the memory ceiling, so the ceiling is too low for it: a noisy
    copy measurement (``ceiling_from_copy``: the ceiling is this run's measured copy) or operands reused from cache
    (against a spec bandwidth, ``derived.memory_note`` says how much of the working set the cache holds).
    Compute-bound: it ran above the dense peak (a clock above the one the peak assumes, or an estimated peak that is
    low). Empty when at or under the roofline."""
    pct = derived.roofline_fraction
    if pct is None or pct <= 1:
        return []
    if derived.bound != "memory":
        unit = rate_unit(fmt) if fmt else "TFLOPS"
        return [f"{fmt_pct(pct)} of the roofline: above the {fmt_rate(derived.dense_peak_flop_per_s)} {unit} "
                "dense peak (a clock above the one the peak assumes, or an estimated peak that is too low)"]
    if derived.memory_note and not ceiling_from_copy:  # against a spec bandwidth: the cache, in numbers
        return [f"{fmt_pct(pct)} of the roofline: {derived.memory_note}"]
    bw = derived.bandwidth_bytes_per_s
    where = f" ({derived.bandwidth_source})" if derived.bandwidth_source else ""
    why = ("the measured memory ceiling is too low (a noisy copy measurement) or the GEMM reused operands from cache"
           if ceiling_from_copy else "the operands were served from cache, not memory")
    return [f"{fmt_pct(pct)} of the roofline: this GEMM moved its minimum bytes at "
            f"{fmt_bandwidth(derived.bytes_per_s)} GB/s, above the {fmt_bandwidth(bw)} GB/s memory "
            f"ceiling{where}: {why}"]


def _run_gemm(case: Case, key: str, sweep: _Sweep) -> Record:
    dev = sweep.dev
    mode = _mode(dev, case)
    common = sweep.common(case, key)
    reason = case.skip_reason or G.supported(case.format, dev, (case.m, case.n, case.k), case.scaling)[1]
    if reason:
        return make_record(**common, measurement=None, status="skipped", reason=reason, mode=mode)
    gemm = meas = correctness = plan = None
    try:
        plan = _plan_rotation(case, dev)
        rotation = _rotation_record(plan)
        gemm = G.TorchGemm(case.format, case.m, case.n, case.k, dev.torch_device, plan.n_sets, sweep.weights,
                           scaling=case.scaling, inputs=case.inputs)
        try:
            correctness = _check(gemm, case, sweep.budgets.check_rows)
        except G.BackendUnsupported as exc:  # the library refuses this combination: a skip, not a failure
            return make_record(**common, measurement=None, status="skipped", reason=str(exc), mode=mode,
                               rotation=rotation)
        if not correctness.passed:
            return make_record(**common, measurement=None, status="failed", mode=mode, correctness=correctness,
                               rotation=rotation, reason=_check_failure(case, correctness))
        meas = _time_gemm(gemm, case, dev, sweep.budgets, plan.n_sets)
        tel = meas.telemetry
        clock = tel.sm_clock_median_hz if tel is not None else None
        work = G.gemm_workload(case.format, case.m, case.n, case.k, case.scaling)
        derived = derived_metrics(sweep.acc, work, meas.steady_median_s, clock_hz=clock, sm_count=dev.sm_count)
        derived = derived.replace(peak_at_clock_flop_per_s=_peak_at_clock(sweep.acc, case.format, derived,
                                                                          dev.sm_count))
        if derived.bandwidth_bytes_per_s is None and sweep.bandwidth_note:
            derived = derived.replace(bandwidth_source=sweep.bandwidth_note)
        note = "; ".join(n for n in (plan.note, gemm.note) if n)
        return make_record(**common, measurement=meas, status="ok", reason=note, correctness=correctness,
                           derived=derived, rotation=rotation,
                           warnings=[*roofline_warnings(derived, sweep.ceiling_from_copy, case.format),
                                     *clock_warnings(sweep.acc, tel, meas.warning_codes)])
    except KeyboardInterrupt:
        raise
    except MeasurementError as exc:  # above the peak: a timing error, never a result (docs/method.md)
        return make_record(**common, measurement=meas, status="failed", reason=_reason(exc), mode=mode,
                           correctness=correctness, rotation=_rotation_record(plan))
    except Exception as exc:  # noqa: BLE001  (OOM, unsupported layout, ...: record it and go on)
        if gemm is not None:
            gemm.close()
        _free(dev)
        return make_record(**common, measurement=None, status="failed", reason=_reason(exc), mode=mode,
                           correctness=correctness, rotation=_rotation_record(plan))
    finally:
        if gemm is not None:
            gemm.close()


def _plan_rotation(case: Case, dev: DeviceInfo) -> RotationPlan:
    """Input sets to rotate over (>= 2x L2), capped on a GPU by the memory it has free (plus what torch's caching
    allocator holds and can hand out again); ``capped`` says when the cap leaves the sets L2-resident."""
    free = None
    if dev.kind == "cuda":
        torch = require("torch", "truepeak run")
        index = dev.index or 0
        free = (torch.cuda.mem_get_info(index)[0] + torch.cuda.memory_reserved(index)
                - torch.cuda.memory_allocated(index))
    return plan_rotation(G.bytes_per_set(case.format, case.m, case.n, case.k), int(dev.l2_bytes or 0),
                         free_bytes=free)


def _rotation_record(plan: RotationPlan | None) -> Rotation | None:
    """A record's ``rotation``: the plan's fields and whether it covers 2x L2 (``cold``)."""
    if plan is None:
        return None
    return Rotation(**dataclasses.asdict(plan), total_bytes=plan.total_bytes, cold=plan.cold)


def _check(gemm: G.TorchGemm, case: Case, check_rows: int) -> Correctness:
    """The record's ``correctness``: set 0's first rows against the float64 reference, with the format's tolerance."""
    rows = min(case.m, check_rows)
    err = gemm.check(rows=rows)
    return Correctness(rel_error=err if math.isfinite(err) else None, tolerance=gemm.tolerance,
                       passed=G.check_passes(case.format, err), rows_checked=rows,
                       reference="float64 matmul of the same quantised inputs (set 0), first rows of C; "
                                 "error = ||out - ref||_F / ||ref||_F")


def _check_failure(case: Case, correctness: Correctness) -> str:
    err = correctness.rel_error
    what = "NaN/Inf in the output" if err is None else f"relative error {err:.3g}"
    return f"correctness check failed: {what} > tolerance {correctness.tolerance:g} for {case.format}"


def _time_gemm(gemm: G.TorchGemm, case: Case, dev: DeviceInfo, budgets: Budgets, n_sets: int):
    """Time the GEMM over its rotation sets: CUDA events (:func:`~truepeak.bench.cuda_timer.time_cuda`, in the case's
    mode: sustained or burst) on a GPU, the host timer (:func:`~truepeak.bench.timing.time_cpu`) on a CPU; the large
    squares get longer budgets, and a case's own ``warmup_s`` / ``budget_s`` win. The inputs' kind (random, or zeros
    when asked) labels the measurement (docs/method.md, 'Random inputs')."""
    warmup, budget = ((budgets.large_warmup_s, budgets.large_budget_s) if case.large
                      else (budgets.warmup_s, budgets.budget_s))
    warmup = case.warmup_s if case.warmup_s is not None else warmup
    budget = case.budget_s if case.budget_s is not None else budget
    with gemm.mode():
        if dev.kind == "cuda":
            return cuda_timer.time_cuda(gemm, n_sets=n_sets, warmup_s=warmup, budget_s=budget,
                                        mode=_mode(dev, case), device=dev.index or 0, input_kind=gemm.input_kind)
        counter = itertools.count()
        return timing.time_cpu(lambda: gemm(next(counter)), warmup_s=warmup, budget_s=budget, min_samples=5,
                               input_kind=gemm.input_kind)


#: The sampled SM clock may exceed the catalog maximum by this fraction (reading granularity) before it is flagged;
#: the same rule as :data:`truepeak.roofline.MAX_CLOCK_TOLERANCE`.
CLOCK_ABOVE_MAX_TOLERANCE = 0.02
#: A median SM clock below this fraction of the maximum while timing is a throttled run (docs/method.md, 'Throttling,
#: sustained and burst').
LOW_CLOCK_FRACTION = 0.90


def clock_warnings(acc: Any, tel: Any, existing_codes: Sequence[str] = ()) -> list[str]:
    """Record warnings about the SM clock sampled while timing (NVML :class:`~truepeak.bench.telemetry.Telemetry`):

    - above the catalog maximum clock by more than 2 %: :func:`~truepeak.efficiency.derived_metrics` then leaves
      ``at_clock_fraction`` out (such a clock cannot be used for "peak at measured clock"); this says so instead of
      dropping it silently;
    - below 90 % of the maximum (NVML's, else the catalog's) with the throttle reasons NVML gave (power cap, thermal),
      unless the measurement already carries its ``low_clock`` warning.

    Empty without telemetry or a median clock.
    """
    if tel is None or tel.sm_clock_median_hz is None:
        return []
    out: list[str] = []
    clk = float(tel.sm_clock_median_hz)
    top = getattr(getattr(acc, "max_clock_hz", None), "value", None)
    if top and clk > float(top) * (1 + CLOCK_ABOVE_MAX_TOLERANCE):
        out.append(f"sampled SM clock median {clk / 1e6:.0f} MHz is above the {float(top) / 1e6:.0f} MHz catalog "
                   f"maximum of {acc.name} (+{100 * CLOCK_ABOVE_MAX_TOLERANCE:g} % allowed): % of peak at measured "
                   "clock is left out; the catalog's maximum clock or the NVML reading is wrong for this device")
    limit = tel.sm_clock_limit_hz or (float(top) if top else None)
    if "low_clock" not in existing_codes and limit and clk < LOW_CLOCK_FRACTION * limit:
        reasons = tel.throttle_reasons()
        why = ", ".join(f"{n} {100 * f:.0f} %" for n, f in reasons) if reasons else "no throttle reason reported"
        out.append(f"SM clock median {clk / 1e6:.0f} MHz is {100 * clk / limit:.0f} % of the {limit / 1e6:.0f} MHz "
                   f"maximum during timing (throttle reasons: {why})")
    return out


def _peak_at_clock(acc: Any, fmt: str, derived: GemmMetrics, sm_count: int | None) -> float | None:
    """FLOP/clk/SM x SMs x the median sampled SM clock (FLOP/s), or None without a usable clock (docs/method.md, 'Peak
    at the measured clock')."""
    clock = derived.sm_clock_hz
    if not clock:
        return None
    try:
        return acc.peak_at_clock(fmt, clock, sm_count)
    except Exception:  # noqa: BLE001  (no per-clock rate for this format: None)
        return None


def _reason(exc: BaseException) -> str:
    """A failed record's reason: the exception's first line; a MeasurementError (a result that cannot be real) in
    full, others cut at 300 characters."""
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    name = type(exc).__name__
    if not isinstance(exc, MeasurementError):
        text = text[:300]
    if "OutOfMemory" in name or "out of memory" in text.lower():
        return f"out of memory: {text}"
    return f"{name}: {text}" if text else name


def _free(dev: DeviceInfo) -> None:
    if dev.kind != "cuda":
        return
    try:
        import torch

        torch.cuda.synchronize()
        torch.cuda.empty_cache()
    except Exception:  # noqa: BLE001
        pass


class _Progress:
    """A transient rich progress bar on stderr; a no-op when disabled or stderr is not a terminal."""

    def __init__(self, total: int, enabled: bool | None):
        if enabled is None:
            enabled = sys.stderr.isatty()
        self.enabled = bool(enabled)
        self.total = total
        self._p = None
        self._task = None

    def __enter__(self) -> _Progress:
        if self.enabled:
            from rich.console import Console
            from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

            self._p = Progress(TextColumn("[bold]truepeak run[/bold] {task.description}"), BarColumn(),
                               MofNCompleteColumn(), TimeElapsedColumn(), console=Console(stderr=True),
                               transient=True)
            self._p.__enter__()
            self._task = self._p.add_task("", total=self.total)
        return self

    def update(self, text: str) -> None:
        if self._p is not None:
            self._p.update(self._task, description=text)

    def advance(self) -> None:
        if self._p is not None:
            self._p.advance(self._task)

    def __exit__(self, *exc: Any) -> None:
        if self._p is not None:
            self._p.__exit__(*exc)


#: One record per key, the last one written, in first-seen order (a resumed file holds retried cases twice).
latest_records = latest


__all__ = ["Budgets", "Case", "RunResult", "RunInterrupted", "run_main_job", "prepare_out_dir", "check_out_arg",
           "make_out_dir", "run_config", "check_resume_config", "recorded_formats", "roofline_warnings", "budgets_name",
           "default_budgets", "plan_cases", "default_formats", "parse_formats", "gemm_shapes", "default_out_dir",
           "case_key", "settle_gpu", "settle_format", "cpu_bf16_fast_enough", "latest_records", "DECODE_M", "MODEL_NK",
           "GPU_SQUARES", "CPU_SQUARES", "SETTLE_SIZE", "COPY_REMEASURE_FACTOR", "GPU_BUDGETS", "CPU_BUDGETS",
           "QUICK_BUDGETS", "QUICK_GPU_BUDGETS"]
