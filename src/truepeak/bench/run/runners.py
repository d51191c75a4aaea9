"""One case of a sweep measured into one record: the copy (:func:`run_copy`) and a GEMM (:func:`run_gemm`), with the
state the cases of a run share (:class:`Sweep`). An exception inside a case becomes a ``failed`` record with its
reason; only Ctrl-C propagates. ``truepeak peak`` measures its shapes through :func:`run_gemm` too.
"""

from __future__ import annotations

import dataclasses
import itertools
import math
from dataclasses import dataclass, field
from typing import Any

from truepeak.bench import cuda_timer, membw, timing
from truepeak.bench import gemm as G
from truepeak.bench.cuda_timer import RotationPlan, plan_rotation
from truepeak.bench.run.cases import Case, case_backend, case_mode
from truepeak.bench.run.config import Budgets
from truepeak.bench.run.settle import settle_gpu
from truepeak.bench.run.warnings import clock_warnings, roofline_warnings
from truepeak.efficiency import derived_metrics
from truepeak.errors import MeasurementError, require
from truepeak.hardware.detect import DeviceInfo, with_measured_bandwidth
from truepeak.records import CopyMetrics, Correctness, Environment, GemmMetrics, Record, Rotation, make_record
from truepeak.units import fmt_bandwidth, fmt_pct, fmt_size


#: A very noisy copy that will be the roofline's memory ceiling is measured once more over this many times the budget.
COPY_REMEASURE_FACTOR = 4


@dataclass
class Sweep:
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
        return dict(kind=case.kind, workload=case.workload(), backend=case_backend(case, self.dev), format=case.format,
                    env=self.env, key=key, run_config=self.config)


def run_case(case: Case, key: str, sweep: Sweep, torch: Any) -> Record:
    """Measure one case and return its record (ok, skipped or failed; only Ctrl-C propagates). The first GEMM that
    runs on a GPU settles clock and power first (:func:`settle_gpu`)."""
    if case.kind == "membw":
        return run_copy(case, key, sweep)
    if not sweep.settled and not case.skip_reason:
        settle_gpu(torch, sweep.dev, sweep.budgets.settle_s)
        sweep.settled = True
    return run_gemm(case, key, sweep)


def use_copy(sweep: Sweep, copy_record: Record, notes: list[str]) -> None:
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


def _copy_is_ceiling(dev: DeviceInfo, case: Case) -> bool:
    """Whether the copy will be the roofline's memory ceiling (:func:`_roofline_accelerator`): the catalog has no
    bandwidth for the device (a CPU) and the copy's working set is not cache-resident."""
    return dev.accelerator.memory_bandwidth is None and not membw.cache_resident(case.nbytes, dev.l2_bytes)


def run_copy(case: Case, key: str, sweep: Sweep) -> Record:
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
        free_device(dev)
        return make_record(**common, measurement=None, status="failed", reason=failure_reason(exc), mode=case_mode(dev))
    correctness = Correctness(passed=True, reference="destination equals source after timing")
    return make_record(**common, measurement=res.measurement, status="ok", reason="; ".join([*res.notes, *notes]),
                       correctness=correctness, derived=res.derived)


def run_gemm(case: Case, key: str, sweep: Sweep) -> Record:
    """Measure one GEMM case into its record: ``skipped`` when the device or the library cannot run it (with the
    reason), ``failed`` when its correctness check fails or an exception occurs (out of memory, a result above the
    peak: :class:`~truepeak.errors.MeasurementError`), else ``ok`` with the measurement, the derived metrics
    (:func:`truepeak.efficiency.derived_metrics`, plus the peak at the median sampled SM clock), the rotation and
    the warnings (:mod:`truepeak.bench.run.warnings`). Only Ctrl-C propagates."""
    dev = sweep.dev
    mode = case_mode(dev, case)
    common = sweep.common(case, key)
    reason = case.skip_reason or G.supported(case.format, dev, (case.m, case.n, case.k), case.scaling)[1]
    if reason:
        return make_record(**common, measurement=None, status="skipped", reason=reason, mode=mode)
    gemm = meas = correctness = plan = None
    try:
        plan = plan_case_rotation(case, dev)
        rotation = rotation_record(plan)
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
        meas = time_gemm(gemm, case, dev, sweep.budgets, plan.n_sets)
        tel = meas.telemetry
        clock = tel.sm_clock_median_hz if tel is not None else None
        work = G.gemm_workload(case.format, case.m, case.n, case.k, case.scaling)
        derived = derived_metrics(sweep.acc, work, meas.steady_median_s, clock_hz=clock, sm_count=dev.sm_count)
        derived = derived.replace(peak_at_clock_flop_per_s=peak_at_clock(sweep.acc, case.format, derived,
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
        return make_record(**common, measurement=meas, status="failed", reason=failure_reason(exc), mode=mode,
                           correctness=correctness, rotation=rotation_record(plan))
    except Exception as exc:  # noqa: BLE001  (OOM, unsupported layout, ...: record it and go on)
        if gemm is not None:
            gemm.close()
        free_device(dev)
        return make_record(**common, measurement=None, status="failed", reason=failure_reason(exc), mode=mode,
                           correctness=correctness, rotation=rotation_record(plan))
    finally:
        if gemm is not None:
            gemm.close()


def plan_case_rotation(case: Case, dev: DeviceInfo) -> RotationPlan:
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


def rotation_record(plan: RotationPlan | None) -> Rotation | None:
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


def time_gemm(gemm: G.TorchGemm, case: Case, dev: DeviceInfo, budgets: Budgets, n_sets: int):
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
                                        mode=case_mode(dev, case), device=dev.index or 0, input_kind=gemm.input_kind)
        counter = itertools.count()
        return timing.time_cpu(lambda: gemm(next(counter)), warmup_s=warmup, budget_s=budget, min_samples=5,
                               input_kind=gemm.input_kind)


def peak_at_clock(acc: Any, fmt: str, derived: GemmMetrics, sm_count: int | None) -> float | None:
    """FLOP/clk/SM x SMs x the median sampled SM clock (FLOP/s), or None without a usable clock (docs/method.md, 'Peak
    at the measured clock')."""
    clock = derived.sm_clock_hz
    if not clock:
        return None
    try:
        return acc.peak_at_clock(fmt, clock, sm_count)
    except Exception:  # noqa: BLE001  (no per-clock rate for this format: None)
        return None


def failure_reason(exc: BaseException) -> str:
    """A failed record's reason: the exception's first line; a MeasurementError (a result that cannot be real) in
    full, others cut at 300 characters."""
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    name = type(exc).__name__
    if not isinstance(exc, MeasurementError):
        text = text[:300]
    if "OutOfMemory" in name or "out of memory" in text.lower():
        return f"out of memory: {text}"
    return f"{name}: {text}" if text else name


def free_device(dev: DeviceInfo) -> None:
    """Synchronise and empty torch's CUDA cache after a failed case (nothing on a CPU; never raises)."""
    if dev.kind != "cuda":
        return
    try:
        import torch

        torch.cuda.synchronize()
        torch.cuda.empty_cache()
    except Exception:  # noqa: BLE001
        pass


__all__ = ["COPY_REMEASURE_FACTOR", "Sweep", "run_case", "use_copy", "run_copy", "run_gemm", "plan_case_rotation",
           "rotation_record", "time_gemm", "peak_at_clock", "failure_reason", "free_device"]
