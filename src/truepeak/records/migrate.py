"""Reading older record files: a schema-2 record becomes the schema-3 JSON object it would be today.

Schema 2 (truepeak 0.1.0 until the typed records) held the same parts under other names; schema 3 gives every
derived metric its unit and calls a fraction a fraction. :func:`upgrade` renames, and drops what schema 3 no longer
has; the values themselves are never changed:

- derived metrics (:data:`V2_DERIVED_NAMES`): ``pct_dense`` -> ``dense_fraction``, ``pct_roofline`` ->
  ``roofline_fraction``, ``pct_at_clock`` -> ``at_clock_fraction``, ``pct_bandwidth`` -> ``bandwidth_fraction``,
  ``pct_read_bandwidth`` -> ``read_bandwidth_fraction``, ``read_bandwidth_bps`` -> ``read_bandwidth_bytes_per_s``,
  ``algbw_B_per_s`` / ``busbw_B_per_s`` -> ``algbw_bytes_per_s`` / ``busbw_bytes_per_s``; a copy's GEMM-only
  metrics, which schema 2 wrote as null, are left out;
- a copy's workload loses ``flop`` (always 0), its correctness ``check`` becomes ``reference``;
- the record of a peak search that could not run (schema 2: kind ``gemm``, workload ``{"label": "peak search",
  "format": ...}``) becomes kind ``peak_search``;
- a skipped record keeps no measurement (schema 2 kept the points of a fit that could not be made), a failed one no
  derived metrics (schema 2 kept the bandwidths of a collective whose output was wrong);
- fields that are null are left out of the parts (null and absent mean the same).

Standard library only.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

#: Per kind, the schema-2 names of derived metrics that schema 3 renamed: ``{kind: {old: new}}``.
V2_DERIVED_NAMES: dict[str, dict[str, str]] = {
    "gemm": {"pct_dense": "dense_fraction", "pct_roofline": "roofline_fraction", "pct_at_clock": "at_clock_fraction",
             "pct_bandwidth": "bandwidth_fraction"},
    "membw": {"pct_bandwidth": "bandwidth_fraction"},
    "moe_experts": {"read_bandwidth_bps": "read_bandwidth_bytes_per_s", "pct_read_bandwidth": "read_bandwidth_fraction",
                    "pct_roofline": "roofline_fraction"},
    "collective": {"algbw_B_per_s": "algbw_bytes_per_s", "busbw_B_per_s": "busbw_bytes_per_s"},
    "collective_fit": {"busbw_B_per_s": "busbw_bytes_per_s"},
}
#: Derived metrics schema 2 wrote for a copy (always null there: it has no FLOP and no peak).
_COPY_GEMM_ONLY = frozenset({"flop_per_s", "pct_dense", "pct_roofline", "bound", "attainable_flop_per_s",
                             "pct_at_clock", "sm_clock_hz", "dense_peak_flop_per_s", "peak_source", "peak_estimated"})


def _no_nulls(part: Any) -> Any:
    return {k: v for k, v in part.items() if v is not None} if isinstance(part, Mapping) else part


def upgrade_v2(record: Mapping[str, Any]) -> dict[str, Any]:
    """The schema-3 JSON object of a schema-2 record (module docstring); anything that does not fit is left for
    :meth:`truepeak.records.Record.from_dict` to name."""
    out = dict(record)
    out["schema_version"] = 3
    kind = out.get("kind")
    w = _no_nulls(out.get("workload"))
    if kind == "gemm" and isinstance(w, Mapping) and w.get("label") == "peak search" and "m" not in w:
        kind = out["kind"] = "peak_search"
        w = {k: v for k, v in w.items() if k != "label"}
    if kind == "membw" and isinstance(w, Mapping) and w.get("flop") == 0:
        w = {k: v for k, v in w.items() if k != "flop"}
    out["workload"] = w
    derived = out.get("derived")
    if isinstance(derived, Mapping):
        names = V2_DERIVED_NAMES.get(str(kind), {})
        if kind == "membw":
            derived = {k: v for k, v in derived.items() if not (k in _COPY_GEMM_ONLY and v is None)}
        out["derived"] = {names.get(k, k): v for k, v in _no_nulls(derived).items()}
    correctness = _no_nulls(out.get("correctness"))
    if kind == "membw" and isinstance(correctness, Mapping) and "check" in correctness:
        correctness = {("reference" if k == "check" else k): v for k, v in correctness.items()}
    out["correctness"] = correctness
    for name in ("measurement", "rotation", "search"):
        out[name] = _no_nulls(out.get(name))
    if out.get("status") == "skipped":
        out["measurement"] = None
    if out.get("status") in ("skipped", "failed"):
        out["derived"] = None
    return out


#: The upgrade of each older schema version to the current one.
UPGRADES = {2: upgrade_v2}


def upgrade(record: Mapping[str, Any], version: int) -> dict[str, Any]:
    """``record`` (of schema ``version``, one of :data:`UPGRADES`) as a JSON object of the current schema."""
    return UPGRADES[version](record)


__all__ = ["V2_DERIVED_NAMES", "UPGRADES", "upgrade", "upgrade_v2"]
