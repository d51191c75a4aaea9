"""Per-kind tables and the CSV exporter, from hand-made records (tests/report/conftest.py)."""

from __future__ import annotations

import csv
import io

from truepeak.records import Record
from truepeak.report.export import csv_columns, csv_name, csv_text, kind_table, peak_rows, report_warnings
from truepeak.report.load import Problem


def test_gemm_table_is_the_run_table(three):
    t = kind_table("gemm", three[1:])
    assert t.headers[:3] == ["shape (MxNxK)", "format", "time (µs)"]
    assert t.rows[0][:4] == ["16x4096x7168", "bf16", "40", "23.49"]
    assert t.rows[1][-2:] == ["skipped", "nvfp4 GEMM needs sm_100 or sm_120; this device is sm_90"]


def test_unknown_kind_gets_a_plain_table(three, edit):
    odd = edit(three[1], kind="paged_attention", derived={"tokens_per_s": 1500.0, "kv_bytes": 3, "nested": {}},
               workload={"label": "ctx 8192"})
    t = kind_table("paged_attention", [odd])
    assert t.headers == ["workload", "backend", "format", "mode", "time (µs)", "tokens_per_s", "kv_bytes", "status",
                         "note"]
    assert t.rows[0][:7] == ["ctx 8192", "torch", "bf16", "sustained", "40", "1500", "3"]


WORKLOADS = {"collective": {"op": "all_reduce", "bytes": 1024, "count": 512, "dtype": "bf16", "n_ranks": 2},
             "collective_fit": {"op": "all_reduce", "n_ranks": 2, "dtype": "bf16", "min_bytes": 1024,
                                "max_bytes": 2048},
             "moe_experts": {"model": "m", "layout": "ep8", "routing": "uniform", "tokens_per_expert": 1, "E_local": 32,
                             "H": 64, "I": 64, "top_k": 8, "T": 32, "weights_format": "bf16"},
             "something_new": {}, "gemm": {"m": 1, "n": 2, "k": 3}, "membw": {"label": "copy", "nbytes": 8}}


def test_tables_survive_records_with_only_their_required_parts():
    """A skipped record of each kind (a workload and a reason, nothing measured) still fills every column."""
    for kind, workload in WORKLOADS.items():
        rec = Record.from_dict({"schema_version": 3, "kind": kind, "status": "skipped", "reason": "r",
                                "workload": workload})
        t = kind_table(kind, [rec])
        assert len(t.rows[0]) == len(t.headers)


def test_a_tune_candidate_names_its_configurations():
    cfg = {"block_m": 16, "block_n": 64, "block_k": 128, "num_warps": 4, "num_stages": 4, "group_m": 1}
    down = {**cfg, "block_n": 128, "num_warps": 8, "group_m": 0}
    tune = {"gate_up": cfg, "down": down, "phase": "search"}
    ok = Record.from_dict({"schema_version": 3, "kind": "moe_experts", "status": "failed", "reason": "too slow",
                           "workload": {**WORKLOADS["moe_experts"], "triton_tune": tune}})
    plain = Record.from_dict({"schema_version": 3, "kind": "moe_experts", "status": "skipped", "reason": "r",
                              "workload": WORKLOADS["moe_experts"]})
    t = kind_table("moe_experts", [ok, plain])
    assert t.rows[0][-1] == "search: m16 n64 k128 w4 s4 g1 / m16 n128 k128 w8 s4; too slow"
    assert t.rows[1][-1] == "r"


def test_peak_rows_by_hand(four):
    rows = peak_rows(four[1:], None)
    bf16 = rows[0]
    # bf16: the square (91.63 TFLOPS) beats the decode GEMM (23.49); the square has no clock
    assert bf16["format"] == "bf16" and bf16["shape"] == "4096x4096x4096" and bf16["n"] == 2
    assert bf16["measured"] == 2 * 4096**3 / 1.5e-3 and bf16["dense"] == 989.4e12
    assert bf16["sparse"] is None  # no catalog accelerator given
    assert rows[1]["format"] == "nvfp4" and rows[1]["measured"] is None and "sm_90" in rows[1]["reason"]


def test_peak_at_clock_is_rate_over_fraction(three):
    [row, _] = peak_rows(three[1:], None)
    # 4096 FLOP/clk/SM x 132 SMs x 1.755 GHz = 948.9e12
    assert abs(row["at_clock"] - 4096 * 132 * 1.755e9) < 1e3


def test_warnings_name_bad_lines_and_schema_versions(three):
    warns = report_warnings(three, [Problem("a.jsonl", 3, "a record of schema version 1; truepeak 0.1.0 reads "
                                                           "schema versions 2 and 3")])
    assert warns[0].category == "input" and "understands record schema versions 2 and 3" in warns[0].text
    assert warns[0].items == ["a.jsonl, line 3: a record of schema version 1; truepeak 0.1.0 reads schema versions "
                              "2 and 3"]
    assert [w.category for w in warns] == ["input", "skipped"]


def test_warnings_cache_resident_and_devices(four, edit):
    capped = edit(four[3], rotation={"n_sets": 1, "capped": True, "note": "covers 40 % of 2x L2"})
    cpu = edit(four[1], env={"cpu": "AMD EPYC"})
    cats = {w.category: w for w in report_warnings([capped, cpu], [])}
    assert "rotation capped: covers 40 % of 2x L2" in cats["cache"].items[0]
    assert cats["devices"].items == ["NVIDIA H200", "AMD EPYC"]


def test_csv_columns_union_in_first_seen_order(three):
    cols = csv_columns(three)
    assert cols[:3] == ["source", "kind", "status"]
    assert cols.index("workload.nbytes") < cols.index("workload.m") < cols.index("derived.flop_per_s")
    rows = list(csv.DictReader(io.StringIO(csv_text(three))))
    assert rows[0]["workload.m"] == "" and rows[1]["workload.m"] == "16"
    assert rows[2]["status"] == "skipped" and rows[2]["time_s"] == ""


def test_csv_keeps_the_exported_names_of_derived_metrics(three):
    """The CSV columns of derived metrics keep the names of the exported format (schema 2), holding fractions."""
    assert csv_name("gemm", "dense_fraction") == "pct_dense" and csv_name("gemm", "flop_per_s") == "flop_per_s"
    assert csv_name("collective", "busbw_bytes_per_s") == "busbw_B_per_s"
    assert csv_name("moe_experts", "read_bandwidth_bytes_per_s") == "read_bandwidth_bps"
    row = list(csv.DictReader(io.StringIO(csv_text(three))))[1]
    assert float(row["derived.pct_dense"]) == 939_524_096 / 40e-6 / 989.4e12   # 0.02374: a fraction
    assert "derived.dense_fraction" not in row


def _trial(rec, phase, flop_per_s, *, mode="burst", scaling=None):
    """A ``truepeak peak`` search record: ``rec`` with a ``search`` phase, a rate, a mode and a scale layout."""
    d = rec.to_dict()
    d["workload"]["scaling"] = scaling
    d.update(mode=mode, format="fp8_e4m3" if scaling else d["format"],
             search={"phase": phase, "round": 0, "step": None, "eval": 0})
    d["measurement"]["mode"] = mode
    d["derived"]["flop_per_s"] = flop_per_s
    return Record.from_dict(d)


def test_peak_rows_prefer_the_remeasured_phase(four):
    """Regression: `truepeak report` on a `truepeak peak` file took the maximum over every search trial, a lucky
    first-pass measurement included (winner's curse). The re-measured phase wins when present."""
    square = four[3]
    recs = [_trial(square, "coarse", 700e12), _trial(square, "refine", 720e12),  # lucky first-pass trials
            _trial(square, "remeasure", 690e12), _trial(square, "remeasure", 680e12)]
    [row] = peak_rows(recs, None)
    assert row["measured"] == 690e12 and row["remeasured"] and row["n"] == 4
    # without a remeasure phase (a `truepeak run` file): the maximum, as before
    [row] = peak_rows(recs[:2], None)
    assert row["measured"] == 720e12 and not row["remeasured"]
    # the same rule for summary.md's best per format
    from truepeak.report.markdown import best_per_format

    assert [r.derived.flop_per_s for r in best_per_format(recs)] == [690e12]


def test_peak_rows_per_mode_and_scale_layout(four):
    """burst and sustained, per-tensor and per-row fp8: one row each, labelled, never merged into one maximum."""
    square = four[3]
    recs = [_trial(square, "remeasure", 600e12, mode="sustained", scaling="tensor"),
            _trial(square, "remeasure", 700e12, mode="burst", scaling="tensor"),
            _trial(square, "remeasure", 650e12, mode="burst", scaling="row")]
    rows = peak_rows(recs, None)
    assert [(r["label"], r["mode"], r["measured"]) for r in rows] == [
        ("fp8_e4m3 (per-tensor)", "sustained", 600e12), ("fp8_e4m3 (per-tensor)", "burst", 700e12),
        ("fp8_e4m3 (per-row)", "burst", 650e12)]
