"""One result record: what was measured, its status, and everything that makes its numbers explain themselves.

A :class:`Record` holds the kind and its typed workload (:mod:`truepeak.records.workloads`), the backend, number format
and timing mode, the :class:`Status` with its reason, the measurement summary (:mod:`truepeak.records.measurement`),
the correctness check, the derived metrics of the kind (:mod:`truepeak.records.metrics`), warnings in words, the
environment, the settings of the command that made it (``run_config``), the input rotation, a peak search's step, the
``--resume`` key and a UTC timestamp. Failures are data, as flashinfer-bench's evaluation records have them
(``EvaluationStatus``); provenance follows mamf-finder's ``benchmark_version`` and pytest-benchmark's
``machine_info``.

Which parts a record has depends on its status, checked on construction (:class:`RecordError` names the field):

- ``ok``: a measurement and a correctness check that passed (except the kinds of :data:`KINDS` whose ``unchecked``
  says why they have none);
- ``skipped`` (never run: the device cannot, the library refuses): a reason, no measurement, no derived metrics;
- ``failed`` (ran and went wrong: out of memory, a wrong output, a time that cannot be real): a reason, no derived
  metrics (a measurement and a correctness check may be kept).

Standard library only.
"""

from __future__ import annotations

import dataclasses
import datetime as _dt
import enum
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar

import truepeak
from truepeak.records._fields import Part, RecordError, coerce, kind_of
from truepeak.records.environment import Environment
from truepeak.records.measurement import Correctness, FitPoints, MeasurementSummary, Rotation
from truepeak.records.migrate import upgrade
from truepeak.records.metrics import (CollectiveFitMetrics, CollectiveMetrics, CopyMetrics, GemmMetrics, Metrics,
                                      MoeExpertsMetrics, OtherMetrics, PeakSearchMetrics, ServingMetrics)
from truepeak.records.workloads import (CollectiveFitWorkload, CollectiveWorkload, CopyWorkload, GemmWorkload,
                                        MoeExpertsWorkload, OtherWorkload, PeakSearchWorkload, ServingWorkload,
                                        Workload)


class Status(str, enum.Enum):
    """What became of a case: ``ok`` (measured and checked), ``skipped`` (not run, with the reason), ``failed`` (ran
    and went wrong, with the reason). Compares equal to its string (``Status.OK == "ok"``)."""

    OK = "ok"
    SKIPPED = "skipped"
    FAILED = "failed"

    def __str__(self) -> str:
        return self.value

    __format__ = str.__format__


#: Statuses whose cases ``--resume`` does not run again (failed ones are retried).
DONE_STATUSES = frozenset({Status.OK, Status.SKIPPED})


@dataclass(frozen=True)
class KindSchema:
    """The parts of one record kind: its workload, derived-metric and measurement types, and (``unchecked``) why an
    ``ok`` record of it carries no correctness check, or None when it must."""

    workload: type[Workload]
    metrics: type[Metrics]
    measurement: type[Part] = MeasurementSummary
    unchecked: str | None = None


#: The schema of each record kind. A peak search's correctness is the aggregate of its trials' checks (``checked``
#: trials, ``wrong`` of them failed); a serving benchmark's counts failed requests the same way.
KINDS: dict[str, KindSchema] = {
    "gemm": KindSchema(GemmWorkload, GemmMetrics),
    "membw": KindSchema(CopyWorkload, CopyMetrics),
    "moe_experts": KindSchema(MoeExpertsWorkload, MoeExpertsMetrics),
    "collective": KindSchema(CollectiveWorkload, CollectiveMetrics),
    "collective_fit": KindSchema(
        CollectiveFitWorkload, CollectiveFitMetrics, FitPoints,
        unchecked="a fit is made only from the collective records of the same run whose output was right (wrong == 0); "
                  "those records carry the checks"),
    "peak_search": KindSchema(PeakSearchWorkload, PeakSearchMetrics),
    "serving": KindSchema(ServingWorkload, ServingMetrics),
}
#: The parts of a kind this truepeak does not know (kept as read, so a newer file still renders).
OTHER_KIND = KindSchema(OtherWorkload, OtherMetrics)


def schema_of(kind: str) -> KindSchema:
    """The :class:`KindSchema` of ``kind`` (:data:`OTHER_KIND` for one this truepeak does not know)."""
    return KINDS.get(kind, OTHER_KIND)


@dataclass(frozen=True, kw_only=True)
class SearchStep(Part):
    """Where in a ``truepeak peak`` search a trial was made (:class:`truepeak.bench.peak.Trial`): ``phase``
    (``"coarse"``, ``"refine"``, ``"remeasure"``; ``"skipped"`` for a search that could not run), ``round``, the
    refinement ``step`` (elements), the trial's index ``eval`` (0 first), and on the search's last trial ``final``
    with why the search ``stopped``."""

    DESCRIPTION: ClassVar[str] = "a search step"

    phase: str
    round: int = 0
    step: int | None = None
    eval: int = 0
    final: bool | None = None
    stopped: str | None = None


def _label(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, str):
        return value
    if isinstance(value, Part):
        value = value.to_dict()
    return json.dumps(value, sort_keys=True, separators=(",", ":"), default=str)


def record_key(kind: str, workload: Any, backend: str | None, format: str | None, mode: str | None) -> str:
    """The stable identity of a case, used by ``--resume``: ``"kind|workload|backend|format|mode"``.

    ``workload`` may be a typed workload or a dict (written as JSON with sorted keys) or a label
    (``"8192x8192x8192"``); ``None`` parts are ``-``. Compute it before measuring and skip the case when it is in
    :meth:`truepeak.records.RecordWriter.done_keys`.
    """
    return "|".join(_label(p) for p in (kind, workload, backend, format, mode))


#: Schema versions this truepeak reads: its own, and the older ones :mod:`truepeak.records.migrate` upgrades.
READABLE_SCHEMAS: tuple[int, ...] = (2, truepeak.SCHEMA_VERSION)


def schema_found(version: Any) -> str:
    """A record's ``schema_version`` in words: ``"schema version 1"``, ``"no schema_version"``, or for a value that is
    no integer its JSON (``'schema version "2"'``)."""
    if version is None:
        return "no schema_version"
    return f"schema version {version if type(version) is int else json.dumps(version)}"


def readable_schemas() -> str:
    """The schema versions this truepeak reads, in words: ``"2 and 3"``."""
    return " and ".join(str(v) for v in READABLE_SCHEMAS)


def schema_mismatch(record: Mapping[str, Any]) -> str | None:
    """The one schema check (reading a file, ``--resume`` and the report all use it): None for a record of a schema
    this truepeak reads (:data:`READABLE_SCHEMAS`), else what is wrong, in words: ``"schema version 1; truepeak 0.1.0
    reads schema versions 2 and 3"`` (``"no schema_version; ..."`` when the field is missing)."""
    version = record.get("schema_version")
    if type(version) is int and version in READABLE_SCHEMAS:
        return None
    return f"{schema_found(version)}; truepeak {truepeak.__version__} reads schema versions {readable_schemas()}"


def readable_version(record: Mapping[str, Any]) -> int:
    """The record's ``schema_version`` when this truepeak reads it.

    Raises:
        RecordError: another version, or none (:func:`schema_mismatch` says which).
    """
    mismatch = schema_mismatch(record)
    if mismatch is not None:
        raise RecordError("", f"a record of {mismatch}")
    return record["schema_version"]


def utc_now() -> str:
    """The time now, UTC, ISO 8601 to the millisecond: ``"2026-11-30T03:53:09.522Z"``."""
    return _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")


@dataclass(frozen=True, kw_only=True)
class Record:
    """One result (module docstring). Build it with :func:`make_record` or directly; read it with
    :meth:`from_dict`; write it with :meth:`to_dict` (or :class:`truepeak.records.RecordWriter`).

    Attributes:
        kind: the record kind (default: the workload's; required for an :class:`OtherWorkload`).
        status: :class:`Status` (a string ``"ok"`` is taken).
        workload: the kind's workload type.
        backend, format, mode: who ran it (``"torch.mm TN (cuBLAS), ..."``), the number format (``"bf16"``), the
            timing mode (``"sustained"``, ``"burst"``, ``"cpu"``, ``"eager"``, ``"graph"``; default the
            measurement's).
        reason: why it was skipped or failed; on an ok record a note (``"rotation capped ..."``).
        measurement, correctness, derived: the kind's parts (see the status rules).
        warnings: in words: the measurement's first, then the record's own (a result above its roofline).
        env: the :class:`Environment`; run_config: the command's settings (JSON data: ``quick``, ``budgets``, ...).
        rotation, search: how the inputs were rotated; where in a peak search the trial was made.
        key: the ``--resume`` key (default :func:`record_key` of kind, workload, backend, format and mode).
        timestamp: UTC, ISO 8601 (default now).
        methodology_version, truepeak_version: what measured it.
        source_schema: the schema version of the line it was read from (older lines are migrated on reading);
            :meth:`to_dict` always writes the current layout and version.

    Raises:
        RecordError: a part of the wrong type for the kind, or missing or present against the status rules.
    """

    kind: str = ""
    status: Status
    workload: Workload
    backend: str | None = None
    format: str | None = None
    mode: str | None = None
    reason: str = ""
    measurement: MeasurementSummary | FitPoints | None = None
    correctness: Correctness | None = None
    derived: Metrics | None = None
    warnings: tuple[str, ...] = ()
    env: Environment | None = None
    run_config: Mapping[str, Any] | None = None
    rotation: Rotation | None = None
    search: SearchStep | None = None
    key: str = ""
    timestamp: str = ""
    methodology_version: int = truepeak.METHODOLOGY_VERSION
    truepeak_version: str = truepeak.__version__
    source_schema: int = field(default=truepeak.SCHEMA_VERSION, compare=False)

    def __post_init__(self) -> None:
        put = lambda name, value: object.__setattr__(self, name, value)  # noqa: E731 (frozen)
        put("status", coerce(self.status, Status, "status"))
        w = self.workload
        if not isinstance(w, Workload):
            raise RecordError("workload", f"is {kind_of(w)}, not a typed workload (GemmWorkload, CopyWorkload, ...)")
        kind = coerce(self.kind, str, "kind").strip()
        if isinstance(w, OtherWorkload):
            if not kind or kind in KINDS:
                raise RecordError("kind", f"is {kind!r}: a {kind or 'record'} record needs its own workload type "
                                          f"({schema_of(kind).workload.__name__})" if kind else "is missing")
        elif kind and kind != w.KIND:
            raise RecordError("kind", f"is {kind!r}, but the workload is {w.DESCRIPTION}")
        put("kind", kind or w.KIND)
        schema = schema_of(self.kind)
        for name in ("backend", "format", "mode"):
            put(name, coerce(getattr(self, name), str | None, name))
        put("reason", (coerce(self.reason, str | None, "reason") or "").strip())
        self._check_part("measurement", schema.measurement)
        self._check_part("correctness", Correctness)
        self._check_part("derived", schema.metrics)
        put("warnings", coerce(self.warnings, tuple[str, ...], "warnings"))
        put("env", coerce(self.env, Environment | None, "env"))
        put("run_config", coerce(self.run_config, Mapping[str, Any] | None, "run_config"))
        put("rotation", coerce(self.rotation, Rotation | None, "rotation"))
        put("search", coerce(self.search, SearchStep | None, "search"))
        put("methodology_version", coerce(self.methodology_version, int, "methodology_version"))
        put("truepeak_version", coerce(self.truepeak_version, str, "truepeak_version"))
        m_mode = getattr(self.measurement, "mode", None)
        if self.mode is not None and m_mode is not None and self.mode != m_mode:
            raise RecordError("mode", f"is {self.mode!r}, which contradicts the measurement's mode {m_mode!r}")
        if self.mode is None and m_mode is not None:
            put("mode", m_mode)
        self._check_status(schema)
        put("key", coerce(self.key, str, "key") or record_key(self.kind, w, self.backend, self.format, self.mode))
        put("timestamp", coerce(self.timestamp, str, "timestamp") or utc_now())

    def _check_part(self, name: str, tp: type) -> None:
        value = getattr(self, name)
        if value is not None and not isinstance(value, tp):
            got = type(value).__name__ if isinstance(value, Part) else kind_of(value)
            raise RecordError(name, f"is {got}, not {tp.__name__} (what a {self.kind} record holds)")

    def _check_status(self, schema: KindSchema) -> None:
        s = self.status
        if s is not Status.OK and not self.reason:
            raise RecordError("reason", f"is empty: a {s} record needs a reason saying why")
        if s is not Status.OK and self.derived is not None:
            raise RecordError("derived", f"is given: a {s} record has no derived metrics")
        if s is Status.SKIPPED and self.measurement is not None:
            raise RecordError("measurement", "is given: a skipped record was never measured")
        if s is Status.OK:
            if self.measurement is None:
                raise RecordError("measurement", "is missing: an ok record needs a measurement")
            if self.correctness is None and schema.unchecked is None:
                raise RecordError("correctness", f"is missing: an ok {self.kind} record needs a correctness check")
            if self.correctness is not None and not self.correctness.passed:
                raise RecordError("correctness", "did not pass: a record whose check failed is failed, not ok")

    # -- reading values ------------------------------------------------------------------------------------------------
    @property
    def ok(self) -> bool:
        """Whether the status is ``ok``."""
        return self.status is Status.OK

    @property
    def time_s(self) -> float | None:
        """Seconds per call: the measurement's steady median (else median); None without one (or for a fit)."""
        return None if self.measurement is None else self.measurement.time_s

    @property
    def device_name(self) -> str:
        """The device it was measured on: the detected device's name, else the GPU's, else the CPU model, else the
        ``run_config``'s ``device_name``; ``"unknown device"`` when none says."""
        name = self.env.device_name if self.env is not None else None
        if not name and self.run_config:
            name = self.run_config.get("device_name")
        return str(name) if name else "unknown device"

    def replace(self, **changes: Any) -> Record:
        """A copy with ``changes``, checked as a new record (the key and timestamp are kept unless changed)."""
        return dataclasses.replace(self, **changes)

    # -- JSON ----------------------------------------------------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        """The record as the JSON object a records file holds (schema :data:`truepeak.SCHEMA_VERSION`):
        ``schema_version``, ``methodology_version``, ``truepeak_version``, ``key``, ``kind``, ``status``, ``reason``,
        ``workload``, ``backend``, ``format``, ``mode``, ``time_s`` (the measurement's, repeated for readers of the
        raw file), ``measurement``, ``warnings``, ``correctness``, ``derived``, ``env``, ``run_config``, ``rotation``,
        ``search`` (a peak search's trials only) and ``timestamp``. Parts leave out their fields that hold no
        value."""
        part = lambda p: None if p is None else p.to_dict()  # noqa: E731
        out: dict[str, Any] = {
            "schema_version": truepeak.SCHEMA_VERSION, "methodology_version": self.methodology_version,
            "truepeak_version": self.truepeak_version, "key": self.key, "kind": self.kind, "status": self.status.value,
            "reason": self.reason, "workload": self.workload.to_dict(), "backend": self.backend,
            "format": self.format, "mode": self.mode, "time_s": self.time_s, "measurement": part(self.measurement),
            "warnings": list(self.warnings), "correctness": part(self.correctness), "derived": part(self.derived),
            "env": part(self.env), "run_config": None if self.run_config is None else dict(self.run_config),
            "rotation": part(self.rotation)}
        if self.search is not None:
            out["search"] = self.search.to_dict()
        out["timestamp"] = self.timestamp
        return out

    @classmethod
    def from_dict(cls, data: Any) -> Record:
        """A record from its JSON object: one of this schema version, or of an older one this truepeak migrates
        (:mod:`truepeak.records.migrate`).

        Raises:
            RecordError: not an object; a schema version this truepeak cannot read (:func:`schema_mismatch`); a field
                missing, unknown or of the wrong type; the status rules broken. The message names the field.
        """
        if not isinstance(data, Mapping):
            raise RecordError("", f"a record is a JSON object, not {kind_of(data)}")
        version = readable_version(data)
        if version != truepeak.SCHEMA_VERSION:
            data = upgrade(data, version)
        unknown = sorted(set(data) - _TOP_FIELDS)
        if unknown:
            raise RecordError(unknown[0], "is not a field of a record")
        for name in ("kind", "status", "workload"):
            if data.get(name) is None:
                raise RecordError(name, "is missing")
        if data.get("time_s") is not None:
            coerce(data["time_s"], float, "time_s")  # repeated from the measurement; checked, not kept
        kind = coerce(data["kind"], str, "kind")
        schema = schema_of(kind)
        parts: dict[str, Any] = {}
        for name, tp in (("workload", schema.workload), ("measurement", schema.measurement),
                         ("correctness", Correctness), ("derived", schema.metrics)):
            if data.get(name) is not None:
                parts[name] = tp.from_dict(data[name], name)
        simple = {k: data[k] for k in _SIMPLE_FIELDS if data.get(k) is not None}
        return cls(kind=kind, **parts, **simple, source_schema=version)


_SIMPLE_FIELDS = ("status", "backend", "format", "mode", "reason", "warnings", "env", "run_config", "rotation",
                  "search", "key", "timestamp", "methodology_version", "truepeak_version")
_TOP_FIELDS = frozenset({"schema_version", "kind", "workload", "measurement", "correctness",
                         "derived", "time_s", *_SIMPLE_FIELDS})


def make_record(*, kind: str = "", workload: Workload, backend: str | None, format: str | None,
                measurement: Any, status: str | Status, reason: str = "", correctness: Correctness | None = None,
                derived: Metrics | None = None, env: Environment | Mapping[str, Any] | None = None,
                key: str | None = None, mode: str | None = None, run_config: Mapping[str, Any] | None = None,
                rotation: Rotation | Mapping[str, Any] | None = None, warnings: Iterable[str] = (),
                search: SearchStep | Mapping[str, Any] | None = None) -> Record:
    """Build one :class:`Record`, as the producers do.

    Args:
        kind: the record kind (default the workload's).
        workload: the kind's workload type.
        backend, format: who ran it and the number format (None where none applies).
        measurement: a :class:`MeasurementSummary` or :class:`FitPoints`, or an object with ``to_dict()`` (a
            :class:`truepeak.bench.measurement.Measurement`: stored with its raw samples), or None.
        status: ``"ok"``, ``"skipped"`` or ``"failed"``.
        reason: why it was skipped or failed (required for those); on an ok record a note.
        correctness, derived: the check and the kind's metrics.
        env: the environment (:func:`truepeak.bench.environment.environment`), or None.
        key: the resume key; default :func:`record_key` of kind, workload, backend, format and mode.
        mode: the timing mode; default the measurement's. Pass it for skipped/failed records so their key matches
            the case's.
        run_config: the settings of the command that made the record, so ``--resume`` can refuse to mix runs and a
            report can state the method from the records alone.
        rotation: how the input sets were rotated, or None.
        warnings: the record's own warnings in words, stored after the measurement's.
        search: a peak search's step, or None.

    Raises:
        RecordError: see :class:`Record`.
    """
    if measurement is not None and not isinstance(measurement, (MeasurementSummary, FitPoints)):
        if not hasattr(measurement, "to_dict"):
            raise RecordError("measurement", f"is {kind_of(measurement)}, not a MeasurementSummary")
        measurement = MeasurementSummary.from_dict(measurement.to_dict(), "measurement")
    own = tuple(getattr(measurement, "warnings", ()) or ())
    return Record(kind=kind, status=status, workload=workload, backend=backend, format=format, mode=mode,
                  reason=reason or "", measurement=measurement, correctness=correctness, derived=derived,
                  warnings=(*own, *(str(w) for w in warnings)), env=env, run_config=run_config, rotation=rotation,
                  search=search, key=key or "")


def latest(records: Iterable[Record]) -> list[Record]:
    """One record per key, the last one written, in first-seen order (a resumed file holds a retried case twice)."""
    last: dict[str, Record] = {}
    for rec in records:
        last[rec.key] = rec  # a dict keeps the first position of a key and takes the last value
    return list(last.values())


__all__ = ["Status", "DONE_STATUSES", "READABLE_SCHEMAS", "schema_found", "schema_mismatch", "readable_version",
           "readable_schemas", "KindSchema", "KINDS", "OTHER_KIND", "schema_of", "SearchStep", "Record",
           "make_record", "record_key", "latest", "utc_now"]
