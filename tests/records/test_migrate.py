"""Schema-2 files load as schema-3 records: the renames by hand, and every committed results file under docs/results
(plain or gzip-compressed) read with its values intact."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from truepeak.records import (CollectiveFitMetrics, CollectiveMetrics, CopyMetrics, GemmMetrics, MoeExpertsMetrics,
                              PeakSearchWorkload, Record, RecordError, read_records)
from truepeak.records.migrate import upgrade_v2

ROOT = Path(__file__).resolve().parents[2]
RESULTS = ROOT / "docs" / "results"


def committed(rel: str) -> Path:
    """A committed results file, plain or gzip-compressed; skips the test when neither is there."""
    for path in (RESULTS / rel, RESULTS / f"{rel}.gz"):
        if path.exists():
            return path
    pytest.skip(f"docs/results/{rel} is not committed")


def raw_lines(path: Path) -> list[dict]:
    data = path.read_bytes()
    if data[:2] == b"\x1f\x8b":
        data = gzip.decompress(data)
    return [json.loads(line) for line in data.splitlines() if line.strip()]


def v2(kind: str, workload: dict, *, derived=None, correctness=None, status="ok", measurement=None, **top) -> dict:
    """A schema-2 record as truepeak 0.1.0 wrote it (null fields written out)."""
    if measurement is None and status == "ok":
        measurement = {"mode": "sustained", "steady_median_s": 1e-3, "median_s": 1e-3, "telemetry": None,
                       "burst_gap_s": None, "warnings": [], "warning_codes": []}
    return {"schema_version": 2, "methodology_version": 1, "truepeak_version": "0.1.0", "key": f"{kind}|k",
            "kind": kind, "status": status, "reason": "" if status == "ok" else "why", "workload": workload,
            "backend": "torch", "format": "bf16", "mode": "sustained", "time_s": 1e-3 if status == "ok" else None,
            "measurement": measurement, "warnings": [], "correctness": correctness, "derived": derived,
            "env": {"gpu": None, "cudnn": None}, "run_config": None, "rotation": None,
            "timestamp": "2026-11-30T01:00:00.000Z", **top}


def test_gemm_metrics_are_renamed_with_their_values():
    rec = Record.from_dict(v2("gemm", {"label": "8x8x8", "m": 8, "n": 8, "k": 8, "scaling": None},
                              correctness={"rel_error": 1e-3, "tolerance": 2e-2, "passed": True},
                              derived={"flop_per_s": 1.024e6, "bytes_per_s": 3.84e5, "pct_dense": 0.25,
                                       "pct_roofline": 0.5, "pct_at_clock": 0.3, "pct_bandwidth": 0.1,
                                       "attainable_flop_per_s": 2.048e6, "bound": "memory", "memory_note": None}))
    assert rec.source_schema == 2 and rec.to_dict()["schema_version"] == 3
    assert rec.derived == GemmMetrics(flop_per_s=1.024e6, bytes_per_s=3.84e5, dense_fraction=0.25,
                                      roofline_fraction=0.5, at_clock_fraction=0.3, bandwidth_fraction=0.1,
                                      attainable_flop_per_s=2.048e6, bound="memory")
    assert rec.workload.scaling is None and rec.key == "gemm|k"  # the stored key is kept


def test_a_copy_loses_its_null_gemm_metrics_and_its_flop():
    rec = Record.from_dict(v2("membw", {"label": "copy 2 GiB", "nbytes": 2**31, "bytes_moved": 2**32, "flop": 0,
                                        "counting": "read + write"},
                              correctness={"check": "destination equals source after timing", "passed": True},
                              derived={"flop_per_s": None, "bytes_per_s": 4.25e12, "pct_dense": None,
                                       "pct_bandwidth": 0.8858, "bandwidth_bytes_per_s": 4.8e12,
                                       "bandwidth_source": "ML", "memory_note": None}))
    assert rec.derived == CopyMetrics(bytes_per_s=4.25e12, bandwidth_fraction=0.8858, bandwidth_bytes_per_s=4.8e12,
                                      bandwidth_source="ML")
    assert rec.workload.to_dict() == {"label": "copy 2 GiB", "nbytes": 2**31, "bytes_moved": 2**32,
                                      "counting": "read + write"}
    assert rec.correctness.reference == "destination equals source after timing"


def test_moe_and_collective_metrics_get_unit_bearing_names():
    moe = Record.from_dict(v2("moe_experts", {"model": "deepseek-v3", "E_local": 256, "H": 7168, "I": 2048,
                                              "top_k": 8, "tokens_per_expert": 1.0, "T": 32, "routing": "uniform",
                                              "weights_format": "bf16", "layout": "single"},
                              correctness={"max_rel_error": 4e-3, "passed": True},
                              derived={"flop_per_s": 7e12, "bytes_per_s": 4.49e12, "read_bandwidth_bps": 4.485e12,
                                       "pct_read_bandwidth": 1.0015, "pct_roofline": 1.0015}))
    assert moe.derived == MoeExpertsMetrics(flop_per_s=7e12, bytes_per_s=4.49e12, read_bandwidth_bytes_per_s=4.485e12,
                                            read_bandwidth_fraction=1.0015, roofline_fraction=1.0015)
    coll = Record.from_dict(v2("collective", {"op": "all_reduce", "bytes": 1024, "count": 512, "dtype": "bf16",
                                              "n_ranks": 2},
                               correctness={"wrong": 0, "checked": 1024, "passed": True},
                               derived={"algbw_B_per_s": 2.7e7, "busbw_B_per_s": 2.7e7, "bus_factor": 1.0}))
    assert coll.derived == CollectiveMetrics(algbw_bytes_per_s=2.7e7, busbw_bytes_per_s=2.7e7, bus_factor=1.0)
    fit = Record.from_dict(v2("collective_fit", {"op": "all_reduce", "n_ranks": 2, "dtype": "bf16",
                                                 "min_bytes": 1024, "max_bytes": 2**30},
                              measurement={"mode": "sustained", "points": [[1024, 3.7e-5], [2048, 2.7e-5]]},
                              derived={"alpha_s": 2.56e-5, "busbw_B_per_s": 3.21e11, "points": 2}))
    assert fit.derived == CollectiveFitMetrics(alpha_s=2.56e-5, busbw_bytes_per_s=3.21e11, points=2)
    assert fit.measurement.points == ((1024, 3.7e-5), (2048, 2.7e-5))


def test_a_peak_search_that_could_not_run_becomes_its_own_kind():
    rec = Record.from_dict(v2("gemm", {"label": "peak search", "format": "nvfp4"}, status="skipped",
                              search={"phase": "skipped", "round": 0, "step": None, "eval": 0}))
    assert rec.kind == "peak_search" and rec.workload == PeakSearchWorkload(format="nvfp4")
    assert rec.search.phase == "skipped" and rec.reason == "why"


def test_what_schema_3_forbids_is_dropped_not_invented():
    """A skipped fit kept its points and a failed collective its bandwidths in schema 2; schema 3 has neither."""
    fit = Record.from_dict(v2("collective_fit", {"op": "all_reduce", "n_ranks": 2, "dtype": "bf16", "min_bytes": 1024,
                                                 "max_bytes": 1024},
                              status="skipped", measurement={"mode": "eager", "points": [[1024, 1e-5]]}))
    assert fit.measurement is None
    bad = Record.from_dict(v2("collective", {"op": "all_reduce", "bytes": 1024, "count": 512, "dtype": "bf16",
                                             "n_ranks": 2}, status="failed",
                              measurement={"mode": "eager", "median_s": 1e-5},
                              correctness={"wrong": 3, "checked": 512, "passed": False},
                              derived={"algbw_B_per_s": 1e8, "busbw_B_per_s": 1e8}, mode="eager"))
    assert bad.derived is None and bad.correctness.wrong == 3 and bad.time_s == 1e-5
    with pytest.raises(RecordError, match="field 'correctness' is missing: an ok gemm record needs a correctness"):
        Record.from_dict(v2("gemm", {"m": 8, "n": 8, "k": 8}, derived={"flop_per_s": 1.0, "bytes_per_s": 1.0}))


def test_the_bf16_8192_cube_of_the_h200_run_keeps_its_numbers():
    """docs/results/h200/results.jsonl, bf16 8192^3: 2 x 8192^3 = 1,099,511,627,776 FLOP in its steady median; the
    raw file's derived.flop_per_s and derived.pct_dense are the record's flop_per_s and dense_fraction."""
    path = committed("h200/results.jsonl")
    key = ('gemm|{"flop":1099511627776,"intensity":2730.6666666666665,"k":8192,"label":"8192x8192x8192","m":8192,'
           '"min_bytes":402653184,"n":8192,"origin":"square","out_format":"bf16","scaling":null}|torch.mm TN '
           '(cuBLAS), bf16 out, fp32 accumulate|bf16|sustained')
    (raw,) = [r for r in raw_lines(path) if r["key"] == key]
    (rec,) = [r for r in read_records(path) if r.key == key]
    assert rec.source_schema == 2 and rec.kind == "gemm" and rec.format == "bf16"
    d = rec.derived
    assert d.flop_per_s == raw["derived"]["flop_per_s"] == pytest.approx(1_099_511_627_776 / rec.time_s)
    assert d.dense_fraction == raw["derived"]["pct_dense"] == pytest.approx(d.flop_per_s / 989.4e12)
    assert d.roofline_fraction == raw["derived"]["pct_roofline"] and d.at_clock_fraction == raw["derived"]["pct_at_clock"]
    assert rec.time_s == raw["time_s"] and rec.measurement.n_samples == raw["measurement"]["n_samples"]
    assert rec.correctness.passed and rec.correctness.rel_error == raw["correctness"]["rel_error"]
    assert rec.env.device.accelerator == "h200-sxm" and rec.rotation.cold is True


def test_the_h200_copy_and_the_2xh200_collectives_keep_their_numbers():
    copy = next(r for r in read_records(committed("h200/results.jsonl")) if r.kind == "membw")
    # 2 x 2 GiB = 4,294,967,296 B per copy in its steady median
    assert copy.derived.bytes_per_s == pytest.approx(4_294_967_296 / copy.time_s)
    assert copy.derived.bandwidth_fraction == pytest.approx(copy.derived.bytes_per_s / 4.8e12)
    path = committed("h200x2/results.jsonl")
    recs = read_records(path)
    raw = {r["key"]: r for r in raw_lines(path)}
    big = [r for r in recs if r.kind == "collective" and r.workload.op == "all_reduce" and r.workload.bytes == 2**30]
    assert {r.mode for r in big} == {"eager", "graph"}
    for r in big:  # algbw = S / t: 1 GiB over the slowest rank's median; busbw = algbw x 2(n-1)/n = algbw at n = 2
        assert r.derived.algbw_bytes_per_s == pytest.approx(2**30 / r.time_s)
        assert r.derived.busbw_bytes_per_s == raw[r.key]["derived"]["busbw_B_per_s"] == r.derived.algbw_bytes_per_s
        assert r.time_s == max(r.measurement.per_rank_median_s)
    fits = {r.mode: r for r in recs if r.kind == "collective_fit" and r.workload.op == "all_reduce"}
    assert fits["eager"].derived.busbw_bytes_per_s == raw[fits["eager"].key]["derived"]["busbw_B_per_s"]
    assert fits["graph"].derived.alpha_s < fits["eager"].derived.alpha_s  # a graph replay's latency is lower


def test_the_moe_experts_records_keep_their_fractions():
    """moe_experts.jsonl: read_bandwidth_fraction = bytes_per_s / the read bandwidth measured in the same run."""
    path = committed("h200/moe/moe_experts.jsonl")
    ok = [r for r in read_records(path) if r.ok]
    assert ok and all(r.derived.read_bandwidth_fraction == pytest.approx(
        r.derived.bytes_per_s / r.derived.read_bandwidth_bytes_per_s) for r in ok)
    raw = {r["key"]: r for r in raw_lines(path)}
    assert all(r.derived.read_bandwidth_fraction == raw[r.key]["derived"]["pct_read_bandwidth"] for r in ok)


def _record_files() -> list[Path]:
    files = sorted([*RESULTS.rglob("*.jsonl"), *RESULTS.rglob("*.jsonl.gz")])
    return [p for p in files if "schema_version" in raw_lines(p)[0]] if files else []


def _without_nulls(value):
    """``value`` without nulls and empty lists (they hold nothing: schema 3 leaves nulls out and writes a
    measurement's empty warning lists)."""
    if isinstance(value, dict):
        return {k: _without_nulls(v) for k, v in value.items() if v is not None and v != []}
    if isinstance(value, list):
        return [_without_nulls(v) for v in value]
    return value


@pytest.mark.parametrize("path", _record_files(), ids=lambda p: str(p.relative_to(RESULTS)))
def test_every_committed_results_file_loads_with_nothing_lost(path):
    """Every record of the file reads strictly, and its schema-3 JSON holds what the schema-2 line held, renamed
    (:func:`truepeak.records.migrate.upgrade_v2`): no value is lost or changed on the way."""
    raw = raw_lines(path)
    recs = read_records(path)
    assert len(recs) == len(raw) and not recs.problems
    for line, rec in zip(raw, recs):
        if line["schema_version"] == 3:
            assert rec.to_dict() == line
            continue
        want = _without_nulls(upgrade_v2(line))
        got = _without_nulls(rec.to_dict())
        assert got == want, rec.key
