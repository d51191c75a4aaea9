"""The main job, ``truepeak run``: measure this device's copy bandwidth and GEMM throughput per format, write records.

The default sweep (cases as data: :func:`plan_cases`):

1. Memory bandwidth first (:mod:`truepeak.bench.membw`): a device copy over buffers >= 8x the cache.
2. For each supported format (GPU: fp32, tf32, bf16, fp16, fp8_e4m3, int8; CPU: fp32, plus bf16 outside quick mode
   when the CPU runs it at least half as fast as fp32), in that order:

   - the decode regime, M in {1, 2, 4, 8, 16, 32, 64, 128, 256}, at two DeepSeek-V3 MoE expert shapes: gate+up
     (N=4096 = 2 x 2048, K=7168 = hidden) and down (N=7168, K=2048);
   - large squares: 4096^3 and 8192^3 on a GPU, 1024^3 and 2048^3 on a CPU.

   Formats the device cannot run (nvfp4/mxfp4/mxfp8 on sm_90, say) get one ``skipped`` record each with the reason;
   shapes a backend cannot run (int8 needs M > 16) get a ``skipped`` record per shape.

Each case becomes a record (:func:`truepeak.bench.records.make_record`) written the moment it finishes through
:class:`~truepeak.bench.records.RecordWriter` (flushed and fsynced: a crash loses nothing), with ``derived`` from
:func:`truepeak.efficiency.derived_metrics` (TFLOPS, GB/s, % of dense peak, % of roofline, bound, % of the peak at
the median SM clock NVML sampled). An exception inside one case (out of memory, an unsupported layout, a result above
the peak) becomes a ``failed`` record with the reason, and the sweep continues. ``resume=True`` skips cases whose
``ok``/``skipped`` records are already in the file (failed ones run again).

Time budget and its trade-off (measurement_methodology.md sections 1.3, 3, 6, 8): the whole default run should take
<= 3 min on an H200 and <= 2 min on a 2-core CPU, for ~120 GPU cases. So the GPU gets ONE long warm-up (3 s of
back-to-back bf16 8192^3 GEMMs) at the start to bring clock and power to their sustained state, then short per-case
budgets: 0.1 s warm-up + 0.3 s timed per decode case, 1.5 s + 1 s per large square (the squares draw the most power
and need the clock settled again after the light decode cases). The CUTLASS fixed-power protocol asks >= 3 s warm-up
and > 1000 iterations per shape; these shorter windows make the large-square numbers sit a little closer to burst than
a long sustained run (expect bf16 8192^3 on a 700 W H200 in ~650-800 TFLOPS, sustained literature 677-701, burst
~807). Every record states its mode (sustained, back-to-back launches), warm-up seconds, sample count and the SM clock
it ran at, so the numbers can be read for what they are. For a longer, stricter measurement, pass larger
:class:`Budgets`.

Units: seconds, bytes, FLOP inside; records store fractions (0.68), tables render percentages.
"""

from __future__ import annotations

import datetime as _dt
import itertools
import math
import os
import sys
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from truepeak.bench import gemm as G
from truepeak.bench.membw import cache_resident, copy_bytes
from truepeak.errors import INSTALL_HINT, MeasurementError, TruepeakError, require
from truepeak.formats import get_format
from truepeak.hardware.detect import DeviceInfo, detect, with_measured_bandwidth
from truepeak.roofline import Copy, Gemm

INSTALL = INSTALL_HINT

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

    @property
    def label(self) -> str:
        if self.kind == "membw":
            return f"copy {_size(self.nbytes)}"
        return f"{self.m}x{self.n}x{self.k}"

    def workload(self) -> dict[str, Any]:
        """The record's ``workload``: parameters, FLOP and minimum bytes (deterministic, so it can key ``--resume``)."""
        if self.kind == "membw":
            c = Copy(self.nbytes)
            return {"label": self.label, "nbytes": self.nbytes, "bytes_moved": c.min_bytes, "flop": 0,
                    "counting": "read + write"}
        f = get_format(self.format)
        g = Gemm(self.m, self.n, self.k, f, scaling="tensor" if f.name == "fp8_e4m3" else None)
        return {"label": self.label, "m": self.m, "n": self.n, "k": self.k, "out_format": g.out_format.name,
                "scaling": g.scaling, "flop": g.flop, "min_bytes": g.min_bytes, "intensity": g.intensity,
                "origin": self.origin}


@dataclass
class RunResult:
    """What :func:`run_main_job` returns.

    Attributes:
        out_dir: the output folder.
        records_path: ``results.jsonl`` in it.
        summary_path: ``summary.md`` in it (None if it could not be written).
        records: the records of this run, in sweep order (for resumed cases, the records already in the file).
        device: the detected device.
        elapsed_s: wall time of the run.
        notes: caveats in words (a summary that could not be written, a roofline left without a memory ceiling).
        resumed_keys: keys of the records taken over from ``results.jsonl`` by ``resume`` (not measured again).
    """

    out_dir: Path
    records_path: Path
    summary_path: Path | None
    records: list[dict[str, Any]]
    device: DeviceInfo
    elapsed_s: float = 0.0
    notes: list[str] = field(default_factory=list)
    resumed_keys: frozenset[str] = frozenset()


class RunInterrupted(KeyboardInterrupt):
    """:func:`run_main_job` was interrupted (Ctrl-C). The records finished so far are in ``records_path`` and
    ``summary.md`` was written from them (``summary_path``; None if it could not be).

    Attributes:
        n_records: records of the run so far (resumed ones included).
        out_dir, records_path, summary_path: where they are.
    """

    def __init__(self, n_records: int, out_dir: Path, records_path: Path, summary_path: Path | None):
        super().__init__(f"interrupted after {n_records} records; they are in {records_path}")
        self.n_records = n_records
        self.out_dir = out_dir
        self.records_path = records_path
        self.summary_path = summary_path


def default_out_dir(now: _dt.datetime | None = None) -> Path:
    """``./truepeak-run-YYYYmmdd-HHMMSS`` (local time)."""
    now = now or _dt.datetime.now()
    return Path(f"truepeak-run-{now:%Y%m%d-%H%M%S}")


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


def plan_cases(device: DeviceInfo, formats: Sequence[str], quick: bool = False,
               format_skips: dict[str, str] | None = None) -> list[Case]:
    """The sweep as data: the copy first, then for each format every shape (or one skipped case if the format cannot
    run here).

    Args:
        device: the detected device.
        formats: canonical format names, in order.
        quick: the small quick-mode shapes and copy.
        format_skips: extra ``{format: reason}`` to skip (e.g. CPU bf16 found too slow).
    """
    format_skips = dict(format_skips or {})
    cases = [Case("membw", nbytes=copy_bytes(device, quick), origin="device copy")]
    shapes = gemm_shapes(device, quick)
    for fmt in formats:
        ok, reason = G.supported(fmt, device)
        if ok and fmt in format_skips:
            ok, reason = False, format_skips[fmt]
        if not ok:
            m, n, k, _, _ = shapes[-1]
            cases.append(Case("gemm", fmt, m, n, k, large=True, origin="format probe", skip_reason=reason))
            continue
        cases += [Case("gemm", fmt, m, n, k, large=large, origin=origin) for m, n, k, large, origin in shapes]
    return cases


def _mode(device: DeviceInfo) -> str:
    return "sustained" if device.kind == "cuda" else "cpu"


def case_key(case: Case, device: DeviceInfo) -> str:
    """The ``--resume`` key of a case: :func:`truepeak.bench.records.record_key` of its record."""
    from truepeak.bench.records import record_key

    return record_key(case.kind, case.workload(), _backend(case, device), case.format, _mode(device))


def _backend(case: Case, device: DeviceInfo) -> str:
    if case.kind == "membw":
        return "torch Tensor.copy_" + (" (CUDA)" if device.kind == "cuda" else " (CPU)")
    return G.backend_name(case.format, device.kind)


# ----------------------------------------------------------------------------------------------------------------------
# Running


def prepare_out_dir(out_dir: str | os.PathLike | None, resume: bool = False) -> Path:
    """Check and create the output folder before anything is measured; returns it.

    Raises:
        TruepeakError: ``out_dir`` is a file, cannot be created or written (the message names the path and why), or
            already holds ``results.jsonl`` without ``resume``.
    """
    out = Path(out_dir) if out_dir is not None else default_out_dir()
    if out.exists() and not out.is_dir():
        raise TruepeakError(f"--out {out} is an existing file, not a folder; choose a folder path for the results")
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise TruepeakError(f"cannot create the --out folder {out}: {exc.strerror or exc}") from exc
    if not os.access(out, os.W_OK | os.X_OK):
        raise TruepeakError(f"cannot write into the --out folder {out}: permission denied")
    path = out / "results.jsonl"
    if path.exists() and not path.is_file():
        raise TruepeakError(f"{path} exists but is not a file; choose another --out")
    if path.exists() and path.stat().st_size > 0 and not resume:
        raise TruepeakError(f"{path} already holds results; pass --resume to continue it, or choose another --out")
    return out


def budgets_name(budgets: Budgets) -> str:
    """``"gpu"``, ``"cpu"``, ``"quick"``, ``"quick-gpu"`` for the built-in budgets, ``"custom"`` otherwise."""
    for name, b in (("gpu", GPU_BUDGETS), ("cpu", CPU_BUDGETS), ("quick", QUICK_BUDGETS),
                    ("quick-gpu", QUICK_GPU_BUDGETS)):
        if budgets == b:
            return name
    return "custom"


def run_config(dev: DeviceInfo, quick: bool, budgets: Budgets) -> dict[str, Any]:
    """The settings stored in every record as ``run_config``; ``--resume`` refuses to mix records whose
    :data:`RESUME_MUST_MATCH` fields differ."""
    return {"quick": bool(quick), "device": dev.torch_device, "device_name": dev.name,
            "budgets": budgets_name(budgets)}


#: ``run_config`` fields that must be equal for ``--resume`` to continue a results file.
RESUME_MUST_MATCH = ("quick", "device", "device_name", "budgets")


def check_resume_config(previous: Iterable[dict], config: dict[str, Any], path: Path) -> None:
    """Refuse to resume ``path`` when a record there was made with other settings (records without ``run_config``,
    written before it existed, are not checked).

    Raises:
        TruepeakError: one line naming the settings that differ, e.g. ``quick (there: True, now: False)``.
    """
    for rec in previous:
        there = rec.get("run_config")
        if not isinstance(there, dict):
            continue
        keys = [k for k in RESUME_MUST_MATCH if k in there and there.get(k) != config.get(k)]
        if len(keys) > 1 and "budgets" in keys:
            keys.remove("budgets")  # follows from quick and device; name it only when it alone differs
        diff = [f"{k} (there: {there.get(k)}, now: {config.get(k)})" for k in keys]
        if diff:
            raise TruepeakError(f"cannot --resume {path}: its records were made with different settings: "
                                f"{'; '.join(diff)}; rerun with the same options (--quick, --device), "
                                "or choose another --out")


def _default_warn(message: str) -> None:
    print(f"warning: {message}", file=sys.stderr)


def run_main_job(out_dir: str | os.PathLike | None = None, *, device: str | DeviceInfo = "auto",
                 formats: str | Sequence[str] | None = None, quick: bool = False, resume: bool = False,
                 progress: bool | None = None, argv: Sequence[str] | None = None,
                 budgets: Budgets | None = None, warn: Callable[[str], None] | None = None) -> RunResult:
    """Run the main job and write ``results.jsonl`` and ``summary.md`` under ``out_dir``.

    Args:
        out_dir: output folder (created); default :func:`default_out_dir`.
        device: ``"auto"``, ``"cpu"``, ``"cuda"``, ``"cuda:N"`` or a :class:`DeviceInfo`.
        formats: format names (``"bf16,fp8"`` or a list); None for :func:`default_formats`.
        quick: a few small cases with tiny budgets (tests and smoke runs; < 15 s on a CPU).
        resume: continue an existing ``results.jsonl``, skipping cases already ``ok`` or ``skipped``.
        progress: a transient progress bar on stderr; None shows it only when stderr is a terminal.
        argv: command line recorded in each record's environment (default ``sys.argv``).
        budgets: override the time budgets (:data:`GPU_BUDGETS`, :data:`CPU_BUDGETS`, :data:`QUICK_BUDGETS`).
        warn: called with one line per problem found in a resumed ``results.jsonl`` (a torn or malformed line, which
            is ignored); default prints ``warning: ...`` on stderr.

    Returns:
        :class:`RunResult`.

    Raises:
        MissingDependencyError: torch is not installed (message carries the install command).
        UnknownNameError: an unknown format name.
        TruepeakError: a bad device string; ``out_dir`` is a file or cannot be created or written;
            ``results.jsonl`` already exists in ``out_dir`` without ``resume``; ``resume`` into records made with
            other settings (:func:`check_resume_config`); results cannot be written.
        UnsupportedError: ``cuda`` asked for but not available.
        RunInterrupted: Ctrl-C; the records so far are kept and summary.md is written from them.
    """
    from truepeak.bench.records import RecordWriter, environment

    torch = require("torch", "truepeak run", INSTALL)
    warn = warn or _default_warn
    t_start = time.perf_counter()
    fmts = parse_formats(formats)
    dev = device if isinstance(device, DeviceInfo) else detect(device)
    out = prepare_out_dir(out_dir, resume)  # before anything is measured
    path = out / "results.jsonl"
    explicit = fmts is not None
    if fmts is None:
        fmts = default_formats(dev, quick)
    if budgets is None:
        budgets = (QUICK_GPU_BUDGETS if dev.kind == "cuda" else QUICK_BUDGETS) if quick else (
            GPU_BUDGETS if dev.kind == "cuda" else CPU_BUDGETS)
    config = run_config(dev, quick, budgets)

    previous: dict[str, dict] = {}
    if resume and path.exists():
        previous = _read_previous(path, warn)
        check_resume_config(previous.values(), config, path)

    records: list[dict[str, Any]] = []
    resumed: set[str] = set()
    acc, bw_note = dev.accelerator, ""
    weights = G.WeightCache()
    settled = dev.kind != "cuda" or budgets.settle_s <= 0
    notes: list[str] = []
    env: dict[str, Any] | None = None
    try:
        if dev.kind == "cuda":
            torch.cuda.set_device(dev.index or 0)
        skips: dict[str, str] = {}
        if dev.kind == "cpu" and "bf16" in fmts and not explicit:
            ok, why = cpu_bf16_fast_enough(torch)
            if not ok:
                skips["bf16"] = why
        cases = plan_cases(dev, fmts, quick, skips)
        env = environment(argv, device=dev.index if dev.kind == "cuda" else None)
        env["device"] = dev.to_dict()
        with RecordWriter(path) as writer, _Progress(len(cases), progress) as bar:
            done = writer.done_keys() if resume else set()
            for case in cases:
                bar.update(f"{case.format or 'copy'} {case.label}")
                key = case_key(case, dev)
                if key in done and key in previous:
                    rec = previous[key]
                    resumed.add(key)
                else:
                    if not settled and case.kind == "gemm" and not case.skip_reason:
                        settle_gpu(torch, dev, budgets.settle_s)
                        settled = True
                    if case.kind == "membw":
                        rec = _run_copy(case, dev, budgets, quick, env, key, run_config=config)
                    else:
                        rec = _run_gemm(case, dev, acc, budgets, weights, env, key, run_config=config,
                                        bandwidth_note=bw_note)
                    writer.write(rec)
                if case.kind == "membw":
                    acc, bw_note = _roofline_accelerator(dev, rec)
                    if bw_note:
                        notes.append(bw_note)
                records.append(rec)
                bar.advance()
    except KeyboardInterrupt:
        weights.clear()
        summary = _write_summary(records, dev, out, env, budgets, quick, []) if env is not None else None
        raise RunInterrupted(len(records), out, path, summary) from None
    weights.clear()
    if dev.kind == "cuda":
        torch.cuda.empty_cache()

    summary = _write_summary(records, dev, out, env, budgets, quick, notes)
    return RunResult(out, path, summary, records, dev, time.perf_counter() - t_start, notes, frozenset(resumed))


def _read_previous(path: Path, warn: Callable[[str], None]) -> dict[str, dict]:
    """The records of a results file being resumed, by key (the last of a key wins). Each line that is not a valid
    record (torn by a crash, not JSON, not a record) is reported through ``warn`` and ignored."""
    from truepeak.bench.records import STATUSES, read_records

    recs = read_records(path, strict=False)
    problems = list(recs.problems)
    previous: dict[str, dict] = {}
    for n, rec in zip(recs.line_numbers or [None] * len(recs), recs):
        if not isinstance(rec.get("key"), str) or rec.get("status") not in STATUSES:
            problems.append((n, "a JSON object without a string 'key' and a status (ok, skipped, failed)"))
            continue
        previous[rec["key"]] = rec
    for n, why in sorted(problems, key=lambda p: p[0] or 0):
        warn(f"{path} line {n} is not a valid record and is ignored: {why}")
    return previous


def _write_summary(records: list[dict], dev: DeviceInfo, out: Path, env: dict, budgets: Budgets, quick: bool,
                   notes: list[str]) -> Path | None:
    """Write summary.md; on failure add a note and return None."""
    from truepeak.report.markdown import write_summary

    summary = out / "summary.md"
    try:
        write_summary(records, dev, summary, env=env, budgets=budgets, quick=quick)
    except OSError as exc:
        notes.append(f"could not write {summary}: {exc.strerror or exc}")
        return None
    return summary


def _roofline_accelerator(dev: DeviceInfo, copy_record: dict) -> tuple[Any, str]:
    """The accelerator GEMM records are placed against, and why it has no memory ceiling ("" when it has one or the
    catalog decides): the catalog one, or (no catalog bandwidth, e.g. a CPU) the same with the measured copy
    bandwidth as the roofline's memory ceiling. A copy whose working set is under 2x the cache
    (:func:`~truepeak.bench.membw.cache_resident`) is never used: it measures the cache, not memory."""
    acc = dev.accelerator
    if acc.memory_bandwidth is not None or copy_record.get("status") != "ok":
        return acc, ""
    gbps = (copy_record.get("derived") or {}).get("gbps")
    if not gbps:
        return acc, ""
    workload = copy_record.get("workload") or {}
    nbytes = int(workload.get("nbytes") or 0)
    if cache_resident(nbytes, dev.l2_bytes):
        return acc, (f"no roofline memory ceiling: the copy's working set ({2 * nbytes / 2**20:.0f} MiB, source + "
                     f"destination) is under 2x the {dev.l2_bytes / 2**20:.0f} MiB cache, so its bandwidth is a "
                     "cache figure, not memory (cases.md C10); % of roofline is left empty")
    return with_measured_bandwidth(acc, gbps * 1e9, f"truepeak run copy bandwidth, {workload.get('label')}"), ""


def settle_gpu(torch: Any, dev: DeviceInfo, seconds: float) -> float:
    """Run back-to-back bf16 (fp16 before sm_80) 8192^3 GEMMs for ``seconds`` so clock and power reach their sustained
    state before the sweep (measurement_methodology.md section 1.3: clocks oscillate for ~3 s). Returns the seconds
    spent."""
    if seconds <= 0:
        return 0.0
    dtype = torch.bfloat16 if (dev.sm_arch or 0) >= 80 else torch.float16
    d = dev.torch_device
    gen = torch.Generator(device=d)
    gen.manual_seed(7)
    a = (torch.rand((8192, 8192), generator=gen, device=d) * 2 - 1).to(dtype)
    b = (torch.rand((8192, 8192), generator=gen, device=d) * 2 - 1).to(dtype)
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


def _run_copy(case: Case, dev: DeviceInfo, budgets: Budgets, quick: bool, env: dict, key: str, *,
              run_config: dict | None = None) -> dict:
    from truepeak.bench.membw import measure_copy
    from truepeak.bench.records import make_record

    common = dict(kind="membw", workload=case.workload(), backend=_backend(case, dev), format=None, env=env, key=key,
                  run_config=run_config)
    try:
        res = measure_copy(dev, nbytes=case.nbytes, quick=quick, warmup_s=budgets.copy_warmup_s,
                           budget_s=budgets.copy_budget_s)
    except KeyboardInterrupt:
        raise
    except Exception as exc:  # noqa: BLE001  (one failed case must not stop the sweep)
        _free(dev)
        return make_record(**common, measurement=None, status="failed", reason=_reason(exc), mode=_mode(dev))
    correctness = {"check": "destination equals source after timing", "passed": True}
    reason = "; ".join(res.notes)
    return make_record(**common, measurement=res.measurement, status="ok", reason=reason, correctness=correctness,
                       derived=res.derived)


def _run_gemm(case: Case, dev: DeviceInfo, acc: Any, budgets: Budgets, weights: G.WeightCache, env: dict,
              key: str, *, run_config: dict | None = None, bandwidth_note: str = "") -> dict:
    from truepeak.bench.records import make_record

    mode = _mode(dev)
    common = dict(kind="gemm", workload=case.workload(), backend=_backend(case, dev), format=case.format, env=env,
                  key=key, run_config=run_config)
    if case.skip_reason:
        return make_record(**common, measurement=None, status="skipped", reason=case.skip_reason, mode=mode)
    shape = (case.m, case.n, case.k)
    ok, reason = G.supported(case.format, dev, shape)
    if not ok:
        return make_record(**common, measurement=None, status="skipped", reason=reason, mode=mode)

    warmup, budget = ((budgets.large_warmup_s, budgets.large_budget_s) if case.large
                      else (budgets.warmup_s, budgets.budget_s))
    gemm = None
    meas = None
    correctness = None
    try:
        from truepeak.bench.cuda_timer import rotation_sets

        n_sets = rotation_sets(G.bytes_per_set(case.format, *shape), int(dev.l2_bytes or 0))
        gemm = G.TorchGemm(case.format, case.m, case.n, case.k, dev.torch_device, n_sets, weights)
        rows = min(case.m, budgets.check_rows)
        err = gemm.check(rows=rows)
        passed = G.check_passes(case.format, err)
        correctness = {"rel_error": err if math.isfinite(err) else None, "tolerance": gemm.tolerance,
                       "passed": passed, "rows_checked": rows,
                       "reference": "float64 matmul of the same quantised inputs (set 0), first rows of C; "
                                    "error = ||out - ref||_F / ||ref||_F"}
        if not passed:
            what = "NaN/Inf in the output" if not math.isfinite(err) else f"relative error {err:.3g}"
            return make_record(**common, measurement=None, status="failed", mode=mode, correctness=correctness,
                               reason=f"correctness check failed: {what} > tolerance {gemm.tolerance:g} "
                                      f"for {case.format}")
        with gemm.mode():
            if dev.kind == "cuda":
                from truepeak.bench.cuda_timer import time_cuda

                meas = time_cuda(gemm, n_sets=n_sets, warmup_s=warmup, budget_s=budget, mode="sustained",
                                 device=dev.index or 0)
            else:
                from truepeak.bench.timing import time_cpu

                counter = itertools.count()
                meas = time_cpu(lambda: gemm(next(counter)), warmup_s=warmup, budget_s=budget, min_samples=5)
        clock = meas.telemetry.sm_clock_median_hz if meas.telemetry is not None else None
        work = Gemm(case.m, case.n, case.k, case.format, scaling="tensor" if case.format == "fp8_e4m3" else None)
        derived = derived_metrics_for(acc, work, meas.steady_median_s, clock, dev.sm_count)
        if derived.get("bandwidth_gbps") is None and bandwidth_note:
            derived["bandwidth_source"] = bandwidth_note
        return make_record(**common, measurement=meas, status="ok", correctness=correctness, derived=derived)
    except KeyboardInterrupt:
        raise
    except MeasurementError as exc:  # above the peak: a timing error, never a record of a result (cases.md C08)
        return make_record(**common, measurement=meas, status="failed", reason=_reason(exc), mode=mode,
                           correctness=correctness)
    except Exception as exc:  # noqa: BLE001  (OOM, unsupported layout, ...: record it and go on)
        if gemm is not None:
            gemm.close()
        _free(dev)
        return make_record(**common, measurement=None, status="failed", reason=_reason(exc), mode=mode,
                           correctness=correctness)
    finally:
        if gemm is not None:
            gemm.close()


def derived_metrics_for(acc: Any, work: Gemm, time_s: float, clock_hz: float | None, sm_count: int | None) -> dict:
    """:func:`truepeak.efficiency.derived_metrics` plus the clock and peak used (so a record explains its percentages).

    Raises:
        MeasurementError: a throughput above the applicable dense peak (cases.md C08).
    """
    from truepeak.efficiency import derived_metrics

    out = dict(derived_metrics(acc, work, time_s, clock_hz=clock_hz, sm_count=sm_count))
    out["sm_clock_hz"] = clock_hz
    try:
        peak = acc.peak(work.format)
        out["dense_peak_tflops"] = peak.dense / 1e12
        out["peak_source"] = peak.source
        out["peak_estimated"] = bool(peak.derived)
    except Exception:  # noqa: BLE001  (no peak: unknown GPU, or a CPU format without an estimate)
        out["dense_peak_tflops"] = None
    bw = acc.memory_bandwidth
    out["bandwidth_gbps"] = bw.value / 1e9 if bw is not None else None
    out["bandwidth_source"] = bw.source if bw is not None else None
    return out


def _reason(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    name = type(exc).__name__
    if "OutOfMemory" in name or "out of memory" in text.lower():
        return f"out of memory: {text[:300]}"
    return f"{name}: {text[:300]}" if text else name


def _free(dev: DeviceInfo) -> None:
    if dev.kind != "cuda":
        return
    try:
        import torch

        torch.cuda.synchronize()
        torch.cuda.empty_cache()
    except Exception:  # noqa: BLE001
        pass


def _size(nbytes: int) -> str:
    for unit, scale in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if nbytes >= scale and nbytes % scale == 0:
            return f"{nbytes // scale} {unit}"
    return f"{nbytes} B"


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


def latest_records(records: Iterable[dict]) -> list[dict]:
    """One record per key, the last one written, in first-seen order (a resumed file holds retried cases twice)."""
    order: list[str] = []
    last: dict[str, dict] = {}
    for i, rec in enumerate(records):
        key = rec.get("key") or f"#{i}"
        if key not in last:
            order.append(key)
        last[key] = rec
    return [last[k] for k in order]


__all__ = ["Budgets", "Case", "RunResult", "RunInterrupted", "run_main_job", "prepare_out_dir", "run_config",
           "check_resume_config", "budgets_name", "plan_cases", "default_formats", "parse_formats",
           "gemm_shapes", "default_out_dir", "case_key", "settle_gpu", "cpu_bf16_fast_enough", "latest_records",
           "DECODE_M", "MODEL_NK", "GPU_SQUARES", "CPU_SQUARES", "GPU_BUDGETS", "CPU_BUDGETS", "QUICK_BUDGETS"]
