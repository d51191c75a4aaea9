"""The typed record: its parts, the status rules checked on construction, keys, and the JSON round trip."""

from __future__ import annotations

import json
import math
import subprocess
import sys

import pytest

import truepeak
from truepeak.errors import TruepeakError
from truepeak.records import (KINDS, CollectiveFitMetrics, CollectiveFitWorkload, CollectiveMetrics,
                              CollectiveWorkload, CopyMetrics, CopyWorkload, Correctness, Environment, FitPoints,
                              GemmMetrics, GemmWorkload, MeasurementSummary, MoeExpertsWorkload, OtherMetrics,
                              OtherWorkload, PeakSearchWorkload, Record, RecordError, ServingWorkload, Status, latest,
                              make_record, record_key)

GEMM = GemmWorkload(label="8192x8192x8192", m=8192, n=8192, k=8192, scaling=None)
TIMED = MeasurementSummary(mode="sustained", steady_median_s=1.6e-3, median_s=1.61e-3, warnings=("noisy: ...",),
                           warning_codes=("noisy",))
CHECK = Correctness(passed=True, rel_error=1e-3, tolerance=2e-2)
METRICS = GemmMetrics(flop_per_s=687.2e12, bytes_per_s=251.7e9, dense_fraction=0.6946)


def ok(**kw):
    return make_record(**{"workload": GEMM, "backend": "torch", "format": "bf16", "measurement": TIMED,
                          "status": "ok", "correctness": CHECK, "derived": METRICS, **kw})


class FakeMeasurement:
    """What :class:`truepeak.bench.measurement.Measurement` hands a record: its ``to_dict()``."""

    def to_dict(self):
        return {"mode": "burst", "steady_median_s": 2e-3, "samples_s": [2e-3, 2.1e-3], "warnings": ["w"],
                "warning_codes": ["c"], "telemetry": {"sm_clock_median_hz": 1.755e9, "reasons": {"power cap": 0.9}}}


def test_make_record_fields():
    r = ok(warnings=["104.5 % of the roofline: ..."])
    assert r.kind == "gemm" and r.status is Status.OK and r.status == "ok" and r.mode == "sustained"
    assert r.key == 'gemm|{"k":8192,"label":"8192x8192x8192","m":8192,"n":8192}|torch|bf16|sustained'
    assert r.time_s == 1.6e-3  # the steady median, not the median
    assert r.warnings == ("noisy: ...", "104.5 % of the roofline: ...")  # the measurement's first, then the record's
    assert r.timestamp.endswith("Z") and "T" in r.timestamp
    assert r.methodology_version == truepeak.METHODOLOGY_VERSION and r.env is None
    d = r.to_dict()
    assert d["schema_version"] == 3 and d["time_s"] == 1.6e-3 and d["derived"] == {
        "flop_per_s": 687.2e12, "bytes_per_s": 251.7e9, "dense_fraction": 0.6946}  # null fields left out
    assert "search" not in d
    json.dumps(d, allow_nan=False)


def test_a_measurement_object_is_stored_through_its_to_dict():
    r = make_record(workload=GEMM, backend="torch", format="bf16", measurement=FakeMeasurement(), status="ok",
                    correctness=CHECK)
    assert r.mode == "burst" and r.time_s == 2e-3 and r.measurement.samples_s == (2e-3, 2.1e-3)
    assert r.measurement.telemetry.sm_clock_median_hz == 1.755e9 and r.measurement.telemetry.reasons == {
        "power cap": 0.9}
    assert r.warnings == ("w",)


def test_round_trip_through_json_is_exact():
    r = ok(env=Environment(python="3.11.7", env_vars={"NCCL_DEBUG": "INFO"}, argv=("truepeak", "run")),
           run_config={"quick": True, "budgets": {"warmup_s": 0.1}}, rotation={"n_sets": 4, "capped": False},
           search={"phase": "coarse", "eval": 0})
    back = Record.from_dict(json.loads(json.dumps(r.to_dict())))
    assert back == r and back.to_dict() == r.to_dict()
    assert back.rotation.n_sets == 4 and back.search.phase == "coarse" and back.env.argv == ("truepeak", "run")


def test_keys_are_stable_and_dict_workloads_are_canonical():
    a = record_key("gemm", {"m": 16, "n": 4096, "k": 6144}, "torch", "nvfp4", "burst")
    b = record_key("gemm", {"k": 6144, "n": 4096, "m": 16}, "torch", "nvfp4", "burst")
    assert a == b == 'gemm|{"k":6144,"m":16,"n":4096}|torch|nvfp4|burst'
    assert record_key("gemm", GemmWorkload(m=16, n=4096, k=6144), "torch", "nvfp4", "burst") == a
    assert record_key("membw", "copy 1 GiB", None, None, "sustained") == "membw|copy 1 GiB|-|-|sustained"


@pytest.mark.parametrize(("change", "message"), [
    ({"status": "done"}, "field 'status' is 'done', not one of ok, skipped, failed"),
    ({"measurement": None}, "field 'measurement' is missing: an ok record needs a measurement"),
    ({"correctness": None}, "field 'correctness' is missing: an ok gemm record needs a correctness check"),
    ({"correctness": Correctness(passed=False)}, "field 'correctness' did not pass: a record whose check failed is "
                                                 "failed, not ok"),
    ({"status": "failed", "reason": "  "}, "field 'reason' is empty: a failed record needs a reason saying why"),
    ({"status": "failed", "reason": "OOM"}, "field 'derived' is given: a failed record has no derived metrics"),
    ({"status": "skipped", "reason": "no fp4", "derived": None}, "field 'measurement' is given: a skipped record "
                                                                  "was never measured"),
    ({"mode": "burst"}, "field 'mode' is 'burst', which contradicts the measurement's mode 'sustained'"),
    ({"derived": CopyMetrics(bytes_per_s=1.0)}, "field 'derived' is CopyMetrics, not GemmMetrics (what a gemm record "
                                                "holds)"),
    ({"workload": {"m": 1, "n": 1, "k": 1}}, "field 'workload' is an object, not a typed workload (GemmWorkload, "
                                             "CopyWorkload, ...)"),
    ({"kind": "membw"}, "field 'kind' is 'membw', but the workload is a gemm workload"),
])
def test_the_status_rules_are_checked_on_construction(change, message):
    with pytest.raises(RecordError) as info:
        ok(**change)
    assert str(info.value) == message and isinstance(info.value, TruepeakError)


def test_failed_and_skipped_records_keep_what_they_may():
    failed = ok(status="failed", reason="above the peak: cannot be a real measurement", derived=None)
    assert failed.measurement is TIMED and failed.correctness is CHECK and failed.time_s == 1.6e-3
    skipped = make_record(workload=GEMM, backend="torch", format="nvfp4", measurement=None, status="skipped",
                          reason="  nvfp4 needs sm_100  ", mode="sustained")
    assert skipped.reason == "nvfp4 needs sm_100" and skipped.time_s is None
    assert skipped.key == 'gemm|{"k":8192,"label":"8192x8192x8192","m":8192,"n":8192}|torch|nvfp4|sustained'


def test_parts_check_their_fields():
    with pytest.raises(RecordError, match=r"^field 'm' is negative \(-16\)$"):
        GemmWorkload(m=-16, n=1, k=1)
    with pytest.raises(RecordError, match=r"^field 'm' is 0; it must be at least 1$"):
        GemmWorkload(m=0, n=1, k=1)
    with pytest.raises(RecordError, match=r"^field 'n' is a string, not a whole number$"):
        GemmWorkload(m=1, n="2", k=1)
    with pytest.raises(RecordError, match=r"^field 'k' is a number, not a whole number$"):
        GemmWorkload(m=1, n=2, k=1.5)
    with pytest.raises(RecordError, match=r"^field 'flop_per_s' is nan, not a finite number$"):
        GemmMetrics(flop_per_s=math.nan, bytes_per_s=1.0)
    with pytest.raises(RecordError, match=r"^field 'median_s' is missing \(a measurement needs steady_median_s or "
                                          r"median_s\)$"):
        MeasurementSummary(mode="cpu")
    with pytest.raises(RecordError, match=r"^field 'workload.layout' is missing$"):
        MoeExpertsWorkload.from_dict({"model": "m"}, "workload")
    with pytest.raises(RecordError, match=r"^field 'warnings' is a list, not a list of strings$"):
        Record(status="skipped", reason="r", workload=GEMM, warnings=["ok", 3])
    with pytest.raises(RecordError, match=r"^field 'workload.bogus' is not a field of a gemm workload$"):
        GemmWorkload.from_dict({"m": 1, "n": 1, "k": 1, "bogus": 2}, "workload")


def test_json_values_are_normalised():
    """A NaN or infinity in an optional number is None (as JSON has no NaN); a list a tuple; numpy scalars numbers."""
    m = GemmMetrics(flop_per_s=1.0, bytes_per_s=2, dense_fraction=math.inf, sm_clock_hz=math.nan)
    assert m.dense_fraction is None and m.sm_clock_hz is None and m.to_dict() == {"flop_per_s": 1.0, "bytes_per_s": 2}
    np = pytest.importorskip("numpy")
    w = GemmWorkload(m=np.int64(4), n=2, k=2, intensity=np.float32(0.5))
    assert type(w.m) is int and w.m == 4 and type(w.intensity) is float and w.intensity == 0.5
    s = MeasurementSummary(mode="cpu", median_s=1e-3, samples_s=[1e-3, 2e-3])
    assert s.samples_s == (1e-3, 2e-3)


def test_each_kind_has_its_parts():
    """The kinds of every producer, and the two without a producer yet (serving; peak_search ok records)."""
    assert set(KINDS) == {"gemm", "membw", "moe_experts", "collective", "collective_fit", "peak_search", "serving"}
    copy = make_record(workload=CopyWorkload(label="copy 2 GiB", nbytes=2**31, bytes_moved=2**32),
                       backend="torch copy_", format=None, status="ok", measurement=TIMED,
                       correctness=Correctness(passed=True, reference="destination equals source after timing"),
                       derived=CopyMetrics(bytes_per_s=2**32 / 1.6e-3))
    assert copy.kind == "membw" and copy.workload.name == "copy 2 GiB"
    coll = make_record(workload=CollectiveWorkload(op="all_reduce", bytes=2**20, count=2**19, dtype="bf16",
                                                   n_ranks=2),
                       backend="nccl", format="bf16", status="ok",
                       measurement=MeasurementSummary(mode="eager", median_s=24.6e-6,
                                                      per_rank_median_s=(24.1e-6, 24.6e-6)),
                       correctness=Correctness(wrong=0, checked=2**19, passed=True),
                       derived=CollectiveMetrics(algbw_bytes_per_s=2**20 / 24.6e-6,
                                                 busbw_bytes_per_s=2**20 / 24.6e-6))
    assert coll.workload.name == "op=all_reduce, bytes=1048576, count=524288, dtype=bf16, n_ranks=2"
    # a fit carries no check of its own: only the collective records whose output was right enter it
    assert "whose output was right" in KINDS["collective_fit"].unchecked
    fit = make_record(workload=CollectiveFitWorkload(op="all_reduce", n_ranks=2, dtype="bf16", min_bytes=1024,
                                                     max_bytes=2**30),
                      backend="nccl", format="bf16", status="ok",
                      measurement=FitPoints(mode="eager", points=[(1024, 1.7e-5), (2**30, 3.3e-3)]),
                      derived=CollectiveFitMetrics(alpha_s=1.66e-5, busbw_bytes_per_s=325.2e9))
    assert fit.time_s is None and fit.measurement.points[1] == (2**30, 3.3e-3)
    with pytest.raises(RecordError, match="an ok peak_search record needs a correctness check"):
        make_record(workload=PeakSearchWorkload(format="bf16"), backend=None, format="bf16", status="ok",
                    measurement=TIMED)
    serving = ServingWorkload(model="deepseek-v3", concurrency=64, input_tokens_per_request=1024,
                              output_tokens_per_request=256, requests=640)
    skipped = make_record(workload=serving, backend="vllm", format="fp8", status="skipped", reason="not yet",
                          measurement=None)
    assert skipped.kind == "serving" and Record.from_dict(skipped.to_dict()).workload == serving


def test_a_serving_level_round_trips_and_an_older_serving_line_still_reads():
    """A level of ``truepeak serve`` keeps its percentiles and planner figures; a serving line with only the four
    metrics the schema first had (and no endpoint) reads as before."""
    from truepeak.records import Correctness, MeasurementSummary, ServingMetrics

    w = ServingWorkload(model="tiny", concurrency=4, input_tokens_per_request=32, output_tokens_per_request=16,
                        requests=8, endpoint="completions", warmup_requests=2, duration_limit_s=30.0)
    m = ServingMetrics(output_tokens_per_s=100.0, requests_per_s=6.25, ttft_median_s=0.02, tpot_median_s=0.01,
                       tpot_p99_s=0.03, itl_p90_s=0.012, decode_tokens_per_s=400.0, ceiling_tokens_per_s=8000.0,
                       ceiling_fraction=0.05, largest_lever=None)
    rec = make_record(workload=w, backend="http://127.0.0.1:8000", format=None, status="ok",
                      measurement=MeasurementSummary(mode="streaming", median_s=0.17, n_samples=8),
                      correctness=Correctness(passed=True, wrong=1, checked=8), derived=m)
    back = Record.from_dict(rec.to_dict())
    assert back.workload == w and back.derived == m and back.mode == "streaming" and back.correctness.wrong == 1
    assert w.name == "concurrency 4, 32 in / 16 out"
    old = {"schema_version": 3, "kind": "serving", "status": "ok", "backend": "vllm", "mode": "streaming",
           "workload": {"model": "m", "concurrency": 2, "input_tokens_per_request": 8, "output_tokens_per_request": 4,
                        "requests": 4},
           "measurement": {"mode": "streaming", "median_s": 0.5}, "correctness": {"passed": True},
           "derived": {"output_tokens_per_s": 16.0, "requests_per_s": 4.0, "ttft_median_s": 0.1,
                       "tpot_median_s": 0.05}}
    got = Record.from_dict(old)
    assert got.derived.tpot_median_s == 0.05 and got.derived.itl_median_s is None and got.workload.endpoint is None


def test_a_kind_this_truepeak_does_not_know_is_kept_as_read():
    data = {"schema_version": 3, "kind": "attention_decode", "status": "ok", "workload": {"label": "mla 4096 ctx"},
            "measurement": {"mode": "graph", "steady_median_s": 2.5e-5}, "correctness": {"passed": True},
            "derived": {"tokens_per_s": 12345.6, "bound": "memory"}}
    r = Record.from_dict(data)
    assert isinstance(r.workload, OtherWorkload) and r.workload.name == "mla 4096 ctx"
    assert isinstance(r.derived, OtherMetrics) and r.derived.to_dict() == {"tokens_per_s": 12345.6, "bound": "memory"}
    assert Record.from_dict(r.to_dict()) == r
    with pytest.raises(RecordError, match="field 'kind' is missing"):
        Record(status="skipped", reason="r", workload=OtherWorkload(data={}))
    with pytest.raises(RecordError, match=r"field 'kind' is 'gemm': a gemm record needs its own workload type "
                                          r"\(GemmWorkload\)"):
        Record(kind="gemm", status="skipped", reason="r", workload=OtherWorkload(data={}))


def test_from_dict_names_the_bad_field():
    good = ok().to_dict()
    cases = [({"time_s": "fast"}, "field 'time_s' is a string, not a number"),
             ({"surprise": 1}, "field 'surprise' is not a field of a record"),
             ({"workload": None}, "field 'workload' is missing"),
             ({"measurement": {**good["measurement"], "telemetry": 3}},
              "field 'measurement.telemetry' is a number, not an object or null"),
             ({"env": {"gpu": {"sm_count": "x"}}}, "field 'env.gpu.sm_count' is a string, not a whole number or null"),
             ({"schema_version": 4}, "a record of schema version 4; truepeak 0.1.0 reads schema versions 2 and 3")]
    for change, message in cases:
        with pytest.raises(RecordError) as info:
            Record.from_dict({**good, **change})
        assert str(info.value) == message


def test_latest_keeps_the_last_record_of_each_key_in_first_seen_order():
    a1, b, a2 = ok(key="a"), ok(key="b"), ok(key="a", reason="retried")
    assert latest([a1, b, a2]) == [a2, b]
    assert latest([]) == []


def test_records_import_without_numpy_or_torch():
    code = ("import sys, truepeak.records; "
            "assert not {'numpy', 'torch', 'truepeak.bench'} & set(sys.modules), sorted(sys.modules)")
    subprocess.run([sys.executable, "-c", code], check=True)
