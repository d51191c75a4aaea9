"""Result records as types: the schema every truepeak command writes and every reader reads.

A :class:`Record` is one result: its kind's workload, a :class:`Status`, the measurement summary, the correctness
check, derived metrics with the unit in every name, the environment and its provenance, checked on construction
(a failed record has a reason and no derived metrics; an ok one has a measurement and a passed check).
:class:`RecordWriter` appends records to a JSON Lines file the moment each is finished; :func:`read_records` reads
them back, migrating files of the previous schema version (``docs/records.md`` describes the schema).

- :mod:`~truepeak.records.workloads`, :mod:`~truepeak.records.metrics`, :mod:`~truepeak.records.measurement`,
  :mod:`~truepeak.records.environment`: the parts;
- :mod:`~truepeak.records.record`: the record, the status rules, keys;
- :mod:`~truepeak.records.migrate`: schema 2 to 3;
- :mod:`~truepeak.records.io`: reading and writing files, the capped warnings about bad lines.

Standard library only: a report or a planner reads records on a laptop with no numpy or torch.
"""

from truepeak.records._fields import Part, RecordError
from truepeak.records.environment import DeviceSummary, Environment, GpuInfo
from truepeak.records.io import (REPEAT_LIMIT, RESULTS_FILE, RecordList, RecordWriter, cap_repeats, done_keys,
                                 problem_kind, problem_warnings, read_records, results_file)
from truepeak.records.measurement import Correctness, FitPoints, MeasurementSummary, Rotation, TelemetrySummary
from truepeak.records.metrics import (CollectiveFitMetrics, CollectiveMetrics, CopyMetrics, GemmMetrics, Metrics,
                                      MoeExpertsMetrics, OtherMetrics, PeakSearchMetrics, ServingMetrics)
from truepeak.records.migrate import V2_DERIVED_NAMES
from truepeak.records.record import (DONE_STATUSES, KINDS, OTHER_KIND, READABLE_SCHEMAS, KindSchema, Record,
                                     SearchStep, Status, latest, make_record, readable_schemas, record_key,
                                     schema_found, schema_mismatch, schema_of)
from truepeak.records.workloads import (WORKLOADS, CollectiveFitWorkload, CollectiveWorkload, CopyWorkload,
                                        GemmWorkload, MoeExpertsWorkload, OtherWorkload, PeakSearchWorkload,
                                        ServingWorkload, Workload)

__all__ = [
    "Record", "Status", "DONE_STATUSES", "make_record", "record_key", "latest", "RecordError", "Part", "KindSchema",
    "KINDS", "OTHER_KIND", "schema_of", "SearchStep",
    "Workload", "GemmWorkload", "CopyWorkload", "MoeExpertsWorkload", "CollectiveWorkload", "CollectiveFitWorkload",
    "PeakSearchWorkload", "ServingWorkload", "OtherWorkload", "WORKLOADS",
    "Metrics", "GemmMetrics", "CopyMetrics", "MoeExpertsMetrics", "CollectiveMetrics", "CollectiveFitMetrics",
    "PeakSearchMetrics", "ServingMetrics", "OtherMetrics",
    "MeasurementSummary", "TelemetrySummary", "FitPoints", "Rotation", "Correctness",
    "Environment", "GpuInfo", "DeviceSummary",
    "RecordWriter", "RecordList", "read_records", "done_keys", "schema_mismatch", "schema_found", "readable_schemas",
    "READABLE_SCHEMAS", "V2_DERIVED_NAMES", "REPEAT_LIMIT", "problem_kind", "cap_repeats", "problem_warnings",
    "RESULTS_FILE", "results_file",
]
