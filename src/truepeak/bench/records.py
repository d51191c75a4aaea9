"""Result records: one JSON object per measurement, appended to a JSON Lines file the moment it finishes.

Each record carries the schema and methodology versions, what was measured (kind, workload, backend, format, mode),
the status (``ok``, ``skipped``, ``failed`` + reason), the measurement with raw samples and telemetry, correctness,
derived metrics, the environment and a UTC timestamp. Provenance follows mamf-finder's header and ``benchmark_version``
and pytest-benchmark's ``machine_info``; failures are data, as flashinfer-bench's ``EvaluationStatus``.

Crash safety: :class:`RecordWriter` writes each record as one line and calls ``flush`` + ``os.fsync`` before returning,
so a crash loses at most the record being written; a torn last line is skipped by ``done_keys`` and by
``read_records(strict=False)`` and the next write starts on a fresh line.

Imports without torch; :func:`environment` imports torch and NVML only inside, and never fails.
"""

from __future__ import annotations

import dataclasses
import datetime as _dt
import functools
import json
import math
import os
import platform
import shlex
import sys
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import truepeak
from truepeak.bench.measurement import Measurement
from truepeak.errors import TruepeakError

STATUSES = ("ok", "skipped", "failed")
#: Statuses whose cases ``--resume`` does not run again (failed ones are retried).
DONE_STATUSES = frozenset({"ok", "skipped"})

#: Environment variables that change what a measurement means; recorded when set (plus every NCCL_*).
ENV_VARS = (
    "CUDA_VISIBLE_DEVICES", "CUDA_DEVICE_MAX_CONNECTIONS", "CUDA_MODULE_LOADING", "CUBLAS_WORKSPACE_CONFIG",
    "CUBLASLT_WORKSPACE_SIZE", "NVIDIA_TF32_OVERRIDE", "TORCH_ALLOW_TF32_CUBLAS_OVERRIDE", "TORCH_BLAS_PREFER_CUBLASLT",
    "PYTORCH_CUDA_ALLOC_CONF", "PYTORCH_TUNABLEOP_ENABLED", "PYTORCH_NVML_BASED_CUDA_CHECK", "TRITON_CACHE_DIR",
    "OMP_NUM_THREADS",
)
_SECRETISH = ("TOKEN", "KEY", "SECRET", "PASSWORD", "PASSWD", "CREDENTIAL")


# -- environment -------------------------------------------------------------------------------------------------------
def _try(get: Any, default: Any = None) -> Any:
    try:
        return get()
    except Exception:
        return default


def _cpu_model() -> str | None:
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as f:
            for line in f:
                if line.lower().startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or None


def _dist_version(name: str) -> str | None:
    from importlib import metadata

    try:
        return metadata.version(name)
    except Exception:
        return None


def _env_vars() -> dict[str, str]:
    out = {}
    for name, value in sorted(os.environ.items()):
        if any(s in name.upper() for s in _SECRETISH):
            continue
        if name in ENV_VARS or name.startswith("NCCL_"):
            out[name] = value
    return out


def _torch_info(device: int | None) -> tuple[dict[str, Any], dict[str, Any] | None]:
    """Versions from torch, and the GPU's description (None without CUDA). Never raises."""
    info: dict[str, Any] = {"torch": None, "cuda": None, "cudnn": None, "nccl": None}
    try:
        import torch
    except Exception:
        return info, None
    info["torch"] = getattr(torch, "__version__", None)
    info["cuda"] = _try(lambda: torch.version.cuda)
    info["cudnn"] = _try(lambda: torch.backends.cudnn.version() if torch.backends.cudnn.is_available() else None)
    info["float32_matmul_precision"] = _try(torch.get_float32_matmul_precision)
    info["allow_tf32_cublas"] = _try(lambda: bool(torch.backends.cuda.matmul.allow_tf32))
    gpu = None
    if device is not None and _try(torch.cuda.is_available, False):
        nccl = _try(lambda: torch.cuda.nccl.version())
        if isinstance(nccl, tuple):
            nccl = ".".join(str(p) for p in nccl)
        info["nccl"] = None if nccl is None else str(nccl)
        props = _try(lambda: torch.cuda.get_device_properties(device))
        if props is not None:
            gpu = {
                "index": device,
                "count": _try(torch.cuda.device_count),
                "name": _try(lambda: props.name),
                "compute_capability": _try(lambda: f"{props.major}.{props.minor}"),
                "sm_count": _try(lambda: props.multi_processor_count),
                "memory_bytes": _try(lambda: int(props.total_memory)),
                "l2_bytes": _try(lambda: int(props.L2_cache_size)),
                "uuid": _try(lambda: str(props.uuid)),
            }
            gpu.update(_nvml_info(_try(lambda: int(torch.cuda._get_nvml_device_index(device)), device)))
    return info, gpu


def _nvml_info(index: int) -> dict[str, Any]:
    """Driver version, power limit and max SM clock of NVML device ``index``, from :mod:`truepeak.hardware.nvml`
    (NVML initialised once per process, each device's facts read once); Nones when NVML is unavailable. Never
    raises."""
    out: dict[str, Any] = {"driver": None, "power_limit_w": None, "max_sm_clock_hz": None}
    try:
        from truepeak.hardware import nvml

        out["driver"] = nvml.driver_version()
        info = nvml.device_info(int(index))
    except Exception:
        return out
    if info is not None:
        out["power_limit_w"] = info.power_limit_w
        out["max_sm_clock_hz"] = info.max_sm_clock_hz
    return out


def environment(argv: Iterable[str] | None = None, *, device: int | None = 0) -> dict[str, Any]:
    """Describe the machine and software a measurement ran on; every field is optional and nothing raises.

    Args:
        argv: the command line to record (default ``sys.argv``).
        device: torch CUDA device index to describe; ``None`` skips the GPU (and CUDA initialisation).

    Returns:
        ``truepeak_version``, ``python``, ``platform``, ``machine``, ``cpu``, ``numpy``, ``torch``, ``cuda`` (torch's
        CUDA build), ``cudnn``, ``nccl``, ``triton``, ``float32_matmul_precision``, ``allow_tf32_cublas``, ``gpu``
        (``name``, ``compute_capability`` "9.0", ``sm_count``, ``memory_bytes``, ``l2_bytes``, ``driver``,
        ``power_limit_w``, ``max_sm_clock_hz``, ...; ``None`` without a CUDA GPU), ``env_vars`` (CUDA/cuBLAS/NCCL/torch
        settings that change results), ``argv`` and ``command_line``. Unknown values are ``None``.

    torch is imported here when installed (this takes a second or two); call it once per run and pass the result to
    :func:`make_record`.
    """
    args = [str(a) for a in (sys.argv if argv is None else argv)]
    torch_info, gpu = _torch_info(device)
    return {
        "truepeak_version": truepeak.__version__,
        "python": platform.python_version(),
        "python_implementation": platform.python_implementation(),
        "platform": _try(platform.platform),
        "machine": platform.machine() or None,
        "cpu": _try(_cpu_model),
        "numpy": _dist_version("numpy"),
        **torch_info,
        "triton": _dist_version("triton"),
        "gpu": gpu,
        "env_vars": _try(_env_vars, {}),
        "argv": args,
        "command_line": _try(lambda: shlex.join(args), " ".join(args)),
    }


@functools.lru_cache(maxsize=1)
def _default_environment() -> dict[str, Any]:
    return environment()


# -- records -----------------------------------------------------------------------------------------------------------
def _jsonable(obj: Any) -> Any:
    """Plain JSON data: numpy scalars -> Python numbers, tuples -> lists, NaN/inf -> None, objects with to_dict()."""
    if obj is None or isinstance(obj, (bool, str, int)):
        return obj
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if isinstance(obj, Mapping):
        return {str(k): _jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple, set, frozenset)):
        return [_jsonable(v) for v in obj]
    if hasattr(obj, "to_dict"):
        return _jsonable(obj.to_dict())
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return _jsonable(dataclasses.asdict(obj))
    if hasattr(obj, "item"):  # numpy / torch scalar
        return _jsonable(obj.item())
    if isinstance(obj, os.PathLike):
        return os.fspath(obj)
    raise TruepeakError(f"cannot store a {type(obj).__name__} in a record; pass numbers, strings, lists or dicts")


def _label(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, str):
        return value
    return json.dumps(_jsonable(value), sort_keys=True, separators=(",", ":"))


def record_key(kind: str, workload: Any, backend: str | None, format: str | None, mode: str | None) -> str:
    """The stable identity of a case, used by ``--resume``: ``"kind|workload|backend|format|mode"``.

    ``workload`` may be a label (``"8192x8192x8192"``) or a dict (serialised with sorted keys); ``None`` parts are
    ``-``. Compute it before measuring and skip the case when it is in :meth:`RecordWriter.done_keys`.
    """
    return "|".join(_label(p) for p in (kind, workload, backend, format, mode))


def _utc_now() -> str:
    return _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def make_record(
    *,
    kind: str,
    workload: Any,
    backend: str | None,
    format: str | None,
    measurement: Measurement | Mapping[str, Any] | None,
    status: str,
    reason: str = "",
    correctness: Mapping[str, Any] | None = None,
    derived: Mapping[str, Any] | None = None,
    env: Mapping[str, Any] | None = None,
    key: str | None = None,
    mode: str | None = None,
    run_config: Mapping[str, Any] | None = None,
    rotation: Mapping[str, Any] | None = None,
    warnings: Iterable[str] = (),
) -> dict[str, Any]:
    """Build one result record (plain JSON data).

    Args:
        kind: what was measured: ``"gemm"``, ``"membw"``, ``"grouped_gemm"``, ``"collective"``, ...
        workload: a label (``"8192x8192x8192"``) or a dict of its parameters.
        backend: who ran it (``"torch"``, ``"triton"``, ...).
        format: number format name (``"bf16"``), or ``None``.
        measurement: the :class:`Measurement` (stored with raw samples), its ``to_dict()``, or ``None``.
        status: ``"ok"``, ``"skipped"`` or ``"failed"``.
        reason: why it was skipped or failed (required for those; e.g. "nvfp4 needs sm_100 or newer; this is sm_90").
        correctness: the output check (e.g. ``{"max_rel_error": 2e-3, "passed": True}``).
        derived: metrics from :func:`truepeak.efficiency.derived_metrics` (SI units: ``flop_per_s``,
            ``bytes_per_s``, ...; fractions, not percentages).
        env: :func:`environment` output; ``None`` computes it once per process (pass it explicitly in sweeps).
        key: the resume key; default :func:`record_key` of kind, workload, backend, format and mode.
        mode: ``"sustained"``/``"burst"``/``"cpu"``; default the measurement's. Pass it for skipped/failed records so
            their key matches the case's.
        run_config: the settings of the run that made the record (``truepeak run``: ``quick``, ``device``,
            ``device_name``, ``budgets``, ...), so ``--resume`` can refuse to mix runs made with different settings
            and a report can state the method from the records alone.
        rotation: how the input sets were rotated (``truepeak run``: the
            :class:`~truepeak.bench.cuda_timer.RotationPlan` fields, ``capped`` and its ``note``), or None.
        warnings: record-level warnings in words (e.g. a result above its roofline), stored after the measurement's
            own warnings.

    Returns:
        A dict with ``schema_version``, ``methodology_version``, ``truepeak_version``, ``key``, ``kind``, ``status``,
        ``reason``, ``workload``, ``backend``, ``format``, ``mode``, ``time_s`` (the measurement's
        ``steady_median_s``, the robust per-call time results use), ``measurement``, ``warnings`` (the
        measurement's, then ``warnings``), ``correctness``,
        ``derived``, ``env``, ``run_config`` and ``rotation`` (None unless given) and ``timestamp`` (UTC, ISO 8601).

    Raises:
        TruepeakError: unknown status, a skipped/failed record without a reason, an ok record without a measurement,
            a mode that contradicts the measurement's, or a value that is not JSON data.
    """
    if not isinstance(kind, str) or not kind:
        raise TruepeakError(f"record kind must be a non-empty string such as 'gemm', got {kind!r}")
    if status not in STATUSES:
        raise TruepeakError(f"unknown record status {status!r}; expected one of {', '.join(STATUSES)}")
    reason = (reason or "").strip()
    if status != "ok" and not reason:
        raise TruepeakError(f"a {status} record needs a reason saying why")
    if status == "ok" and measurement is None:
        raise TruepeakError("an ok record needs a measurement")
    m_dict: dict[str, Any] | None
    if measurement is None:
        m_dict = None
    elif isinstance(measurement, Measurement):
        m_dict = measurement.to_dict(include_samples=True)
    elif isinstance(measurement, Mapping):
        m_dict = dict(measurement)
    else:
        raise TruepeakError(f"measurement must be a Measurement, a dict or None, got {type(measurement).__name__}")
    m_mode = None if m_dict is None else m_dict.get("mode")
    if mode is not None and m_mode is not None and mode != m_mode:
        raise TruepeakError(f"mode {mode!r} contradicts the measurement's mode {m_mode!r}")
    mode = mode or m_mode
    time_s = None
    if m_dict is not None:
        time_s = m_dict.get("steady_median_s", m_dict.get("median_s"))
    record = {
        "schema_version": truepeak.SCHEMA_VERSION,
        "methodology_version": truepeak.METHODOLOGY_VERSION,
        "truepeak_version": truepeak.__version__,
        "key": key if key is not None else record_key(kind, workload, backend, format, mode),
        "kind": kind,
        "status": status,
        "reason": reason,
        "workload": workload,
        "backend": backend,
        "format": format,
        "mode": mode,
        "time_s": time_s,
        "measurement": m_dict,
        "warnings": [*(m_dict.get("warnings", []) if m_dict is not None else []), *(str(w) for w in warnings)],
        "correctness": correctness,
        "derived": derived,
        "env": _default_environment() if env is None else env,
        "run_config": None if run_config is None else dict(run_config),
        "rotation": None if rotation is None else dict(rotation),
        "timestamp": _utc_now(),
    }
    return _jsonable(record)


# -- writing and reading -----------------------------------------------------------------------------------------------
class RecordWriter:
    """Append records to a JSON Lines file, one line each, flushed and fsynced before :meth:`write` returns.

    Opening never truncates: an existing file is continued (that is how ``--resume`` works). If the file ends in a
    torn line (a crash while writing), the next record starts on a new line, and the torn line stays for
    ``read_records(strict=False)`` to report.

    Usage::

        with RecordWriter("results.jsonl") as out:
            done = out.done_keys()
            ...
            out.write(make_record(...))

    Args:
        path: the ``.jsonl`` file; parent directories are created.
    """

    def __init__(self, path: str | os.PathLike[str]):
        self.path = Path(path)
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            new = not self.path.exists()
            self._f = open(self.path, "ab")  # noqa: SIM115 (closed in close())
        except OSError as exc:
            raise TruepeakError(f"cannot write records to {self.path}: {_why(exc)}") from exc
        try:
            if not new and self.path.stat().st_size > 0:
                with open(self.path, "rb") as r:
                    r.seek(-1, os.SEEK_END)
                    if r.read(1) != b"\n":
                        self._f.write(b"\n")
                        self._sync()
        except OSError as exc:
            self._f.close()
            raise TruepeakError(f"cannot write records to {self.path}: {_why(exc)}") from exc
        if new:
            self._sync_dir()

    def _sync(self) -> None:
        self._f.flush()
        os.fsync(self._f.fileno())

    def _sync_dir(self) -> None:
        try:  # make the new file's directory entry durable too (POSIX; best effort)
            fd = os.open(self.path.parent, os.O_RDONLY)
        except OSError:
            return
        try:
            os.fsync(fd)
        except OSError:
            pass
        finally:
            os.close(fd)

    def write(self, record: Mapping[str, Any]) -> None:
        """Append one record as one line and fsync it.

        Raises:
            TruepeakError: the writer is closed, the record is not a dict of JSON data, or the file cannot be written
                (disk full, ...; the message names the file).
        """
        if self._f.closed:
            raise TruepeakError(f"the record writer for {self.path} is closed")
        if not isinstance(record, Mapping):
            raise TruepeakError(f"a record must be a dict, got {type(record).__name__}")
        line = _json_line(record)
        try:
            self._f.write(line.encode("utf-8") + b"\n")
            self._sync()
        except OSError as exc:
            raise TruepeakError(f"cannot write records to {self.path}: {_why(exc)}") from exc

    def done_keys(self) -> set[str]:
        """Keys of ``ok`` and ``skipped`` records already in the file (``failed`` ones are retried by --resume)."""
        return done_keys(self.path)

    def close(self) -> None:
        """Close the file (idempotent)."""
        if not self._f.closed:
            self._f.close()

    @property
    def closed(self) -> bool:
        """Whether :meth:`close` was called."""
        return self._f.closed

    def __enter__(self) -> RecordWriter:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


def _json_line(record: Mapping[str, Any]) -> str:
    """One compact JSON line. Records from :func:`make_record` are plain JSON data already and are dumped as they
    are; anything else (numpy numbers, NaN, objects with ``to_dict``) goes through :func:`_jsonable` first."""
    try:
        return json.dumps(record, ensure_ascii=False, allow_nan=False, separators=(",", ":"))
    except (TypeError, ValueError):
        return json.dumps(_jsonable(record), ensure_ascii=False, allow_nan=False, separators=(",", ":"))


def _why(exc: OSError) -> str:
    return exc.strerror or str(exc) or type(exc).__name__


class RecordList(list):
    """A list of records with what ``read_records(strict=False)`` skipped.

    Attributes:
        bad_lines: 1-based numbers of the skipped lines.
        problems: ``(line number, why)`` of each skipped line, e.g. ``(4, "not valid JSON (...)")``.
        line_numbers: the 1-based line number of each record, parallel to the list.
        other_schema: ``(line number, schema_version found)`` of the skipped lines that are JSON objects of another
            schema version (also in ``problems``): ``--resume`` refuses such a file rather than mixing schemas.
    """

    def __init__(self, records: Iterable[dict[str, Any]] = (), bad_lines: Iterable[int] = (),
                 problems: Iterable[tuple[int, str]] = (), line_numbers: Iterable[int] | None = None,
                 other_schema: Iterable[tuple[int, Any]] = ()):
        super().__init__(records)
        self.problems: list[tuple[int, str]] = list(problems)
        self.bad_lines: list[int] = list(bad_lines) or [n for n, _ in self.problems]
        self.line_numbers: list[int] = list(line_numbers) if line_numbers is not None else []
        self.other_schema: list[tuple[int, Any]] = list(other_schema)


def schema_mismatch(record: Mapping[str, Any]) -> str | None:
    """The one schema check (reading a file, ``--resume`` and the report all use it): None for a record of the schema
    this truepeak writes (:data:`truepeak.SCHEMA_VERSION`), else what is wrong, in words: ``"schema version 1;
    truepeak 0.1.0 reads schema version 2 only"`` (``"no schema_version; ..."`` when the field is missing)."""
    version = record.get("schema_version")
    if version == truepeak.SCHEMA_VERSION and type(version) is int:
        return None
    return (f"{schema_found(version)}; truepeak {truepeak.__version__} reads schema version "
            f"{truepeak.SCHEMA_VERSION} only")


def schema_found(version: Any) -> str:
    """A record's ``schema_version`` in words: ``"schema version 1"``, ``"no schema_version"``, or for a value that is
    no integer its JSON (``'schema version "2"'``)."""
    if version is None:
        return "no schema_version"
    return f"schema version {version if type(version) is int else json.dumps(version)}"


def read_records(path: str | os.PathLike[str], *, strict: bool = True) -> RecordList:
    """Read a JSON Lines records file.

    Blank lines are ignored. Every other line must be a JSON object of this truepeak's schema version
    (:func:`schema_mismatch`): a record of another schema means something else by its fields.

    Args:
        path: the ``.jsonl`` file.
        strict: raise on the first malformed line or record of another schema (default). With ``strict=False`` such
            lines (e.g. a line torn by a crash) are skipped and their numbers listed in the result's ``bad_lines``
            (with the reasons in ``problems``; the other-schema ones also in ``other_schema``).

    Returns:
        A :class:`RecordList` (a plain list of dicts, in file order, with a ``bad_lines`` attribute).

    Raises:
        TruepeakError: the file cannot be read, or (strict) a line is not a JSON object or is a record of another
            schema version; the message names the file, the line number (and the schema versions understood).
    """
    p = Path(path)
    try:
        raw = p.read_bytes()
    except OSError as exc:
        raise TruepeakError(f"cannot read records file {p}: {exc.strerror or exc}") from exc
    records: list[dict[str, Any]] = []
    numbers: list[int] = []
    bad: list[tuple[int, str]] = []
    other: list[tuple[int, Any]] = []
    for n, line in enumerate(raw.split(b"\n"), start=1):
        if not line.strip():
            continue
        problem = None
        try:
            obj = json.loads(line.decode("utf-8"))
            if not isinstance(obj, dict):
                problem = f"a JSON {type(obj).__name__}, not an object"
        except UnicodeDecodeError as exc:
            problem = f"not UTF-8 ({exc.reason})"
        except json.JSONDecodeError as exc:
            problem = f"not valid JSON: {exc.msg} (column {exc.colno})"
        if problem is None:
            mismatch = schema_mismatch(obj)
            if mismatch is None:
                records.append(obj)
                numbers.append(n)
                continue
            if strict:
                raise TruepeakError(f"{p}, line {n}: record of {mismatch}; regenerate it with `truepeak run`, or read "
                                    "with strict=False to skip it")
            bad.append((n, f"a record of {mismatch}"))
            other.append((n, obj.get("schema_version")))
        elif strict:
            raise TruepeakError(f"{p}, line {n}: malformed record: {problem}; fix or delete the line, "
                                "or read with strict=False to skip it")
        else:
            bad.append((n, problem))
    return RecordList(records, problems=bad, line_numbers=numbers, other_schema=other)


#: Warnings of one kind printed in full before the rest are counted in one line: a 10 MB binary file read as records
#: is ~39,000 unusable lines, and every one of them says the same thing.
REPEAT_LIMIT = 5


def problem_kind(why: str) -> str:
    """What kind of problem a skipped line's reason names, without its details: the text before the first ``": "``,
    ``" ("`` or ``"; "`` (``"not valid JSON: Expecting value (column 1)"`` → ``"not valid JSON"``, ``"not UTF-8
    (invalid start byte)"`` → ``"not UTF-8"``, ``"a record of schema version 1; truepeak ... reads ..."`` → ``"a
    record of schema version 1"``)."""
    cut = [i for i in (why.find(": "), why.find(" ("), why.find("; ")) if i > 0]
    return why[:min(cut)] if cut else why


def cap_repeats(items: Iterable[tuple[str, str]], limit: int = REPEAT_LIMIT) -> list[str]:
    """The one cap on repeated warnings, for every command that reads records (``report``, ``compare``, ``run
    --resume``, ``peak --resume``).

    Args:
        items: ``(kind, message)`` pairs in the order they were found; ``kind`` groups messages that say the same
            thing (e.g. ``f"{path}: {problem_kind(why)}"``).
        limit: messages shown per kind.

    Returns:
        The messages, at most ``limit`` of each kind, in order; then for each kind that had more, in first-seen
        order, one line: ``"... and 38,615 more like this (results.jsonl: not UTF-8)"``.
    """
    shown: list[str] = []
    seen: dict[str, int] = {}
    for kind, message in items:
        seen[kind] = seen.get(kind, 0) + 1
        if seen[kind] <= limit:
            shown.append(message)
    return shown + [f"... and {n - limit:,} more like this ({kind})" for kind, n in seen.items() if n > limit]


def problem_warnings(path: str | os.PathLike[str], problems: Iterable[tuple[int | None, str]], template: str,
                     limit: int = REPEAT_LIMIT) -> list[str]:
    """Warning lines for the lines ``read_records(strict=False)`` skipped in ``path`` (its ``problems``), capped per
    kind of problem by :func:`cap_repeats`.

    Args:
        template: one warning, with ``{path}``, ``{line}`` and ``{why}``, e.g. ``"{path}, line {line}: {why} (left
            out)"``.
    """
    return cap_repeats(((f"{path}: {problem_kind(why)}", template.format(path=path, line=line, why=why))
                        for line, why in problems), limit)


def done_keys(path: str | os.PathLike[str]) -> set[str]:
    """Keys of ``ok``/``skipped`` records in ``path`` (empty when the file does not exist); malformed lines skipped."""
    p = Path(path)
    if not p.exists():
        return set()
    return {r["key"] for r in read_records(p, strict=False)
            if r.get("status") in DONE_STATUSES and isinstance(r.get("key"), str)}
