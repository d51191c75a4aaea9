"""Golden files: the Markdown report and the CSV of tests/report/golden/mixed.jsonl (one record of each kind), with the
numbers in them checked by hand (golden/README.md)."""

from __future__ import annotations

import csv
import io
import os
from pathlib import Path

import pytest

from truepeak.report.export import csv_text
from truepeak.report.load import load_results
from truepeak.report.markdown import report_markdown

GOLDEN = Path(__file__).parent / "golden"
UPDATE = bool(os.environ.get("TRUEPEAK_UPDATE_GOLDEN"))


@pytest.fixture
def mixed(monkeypatch):
    monkeypatch.chdir(GOLDEN)  # the reports name the file as given: "mixed.jsonl"
    return load_results(["mixed.jsonl"])


def _check(name: str, text: str) -> None:
    path = GOLDEN / name
    if UPDATE:
        path.write_text(text, encoding="utf-8")
    assert text == path.read_text(encoding="utf-8")


def test_markdown_is_pinned(mixed):
    _check("mixed.md", report_markdown(mixed))


def test_csv_is_pinned(mixed):
    _check("mixed.csv", csv_text(mixed))


def test_markdown_numbers_by_hand(mixed):
    text = report_markdown(mixed)
    # copy: 2 x 2^31 B in 1 ms = 4295 GB/s = 89.5 % of 4800
    assert "- copy 2 GiB: **4295 GB/s** counting read + write = 89.5 % of the catalog's 4800 GB/s" in text
    # bf16 16x4096x7168 in 40 us: 23.49 TFLOPS, 2.37 % of 989.4; peak at 1755 MHz = 4096 x 132 x 1.755e9 = 948.9
    # TFLOPS, 2.48 % of it; the H200's bf16 2:4-sparse rate 1979 is shown, labelled display only
    assert "| bf16 | sustained | 989.4 | 1979.0 | 23.49 | 2.37 | 1755 | 948.9 | 2.48 | 16x4096x7168 |" in text
    assert "spec 2:4 sparse TFLOPS (display only)" in text
    assert "| nvfp4 | sustained | - | - | - | - | - | - | - | - | skipped: nvfp4 GEMM needs sm_100" not in text
    assert "skipped: nvfp4 GEMM needs sm_100 or sm_120; this device is sm_90 |" in text
    # MoE: 4.0e12 / 4.54e12 = 88.1 % of read bandwidth at 16 tokens per expert
    assert "| deepseek-v3 | ep8 | uniform | 16 | bf16 | triton | graph | 100 | 10 | 4000 | 88.1 | ok | noisy |" in text
    # all_reduce 1 MiB in 24.6 us: algbw = busbw (factor 2(n-1)/n = 1 at n = 2) = 42.6 GB/s
    assert "| all_reduce | 1 MiB | 2 | bf16 | eager | 24.6 | 42.6 | 42.6 | 0 | ok |  |" in text
    assert "| all_reduce | eager | 2 | bf16 | 16.6 | 325 | 1 KiB to 1 GiB | 21 | 4.2 | ok |  |" in text
    # a kind truepeak has no section for: a plain table of its fields
    assert "## Records: attention_decode (1)" in text and "| tokens_per_s |" in text and "1.235e+04" in text
    # warnings: throttling, noise, failed, skipped
    for w in ("- **throttling**: 1 record(s)", "- **noise**: 1 record(s) are noisy", "- **failed**: 1 case(s) failed",
              "  - gemm 65536x65536x65536 bf16 sustained: out of memory", "- **skipped**: 1 case(s) skipped"):
        assert w in text


def test_csv_rows_hold_si_values(mixed):
    rows = list(csv.DictReader(io.StringIO(csv_text(mixed))))
    assert [r["kind"] for r in rows] == ["membw", "gemm", "gemm", "gemm", "moe_experts", "collective",
                                         "collective_fit", "attention_decode"]
    assert {r["source"] for r in rows} == {"mixed.jsonl"}
    copy, decode, probe = rows[0], rows[1], rows[2]
    assert float(copy["derived.bytes_per_s"]) == 2 * 2**31 / 1e-3
    assert float(decode["time_s"]) == 40e-6 and float(decode["derived.flop_per_s"]) == 939_524_096 / 40e-6
    assert decode["workload.m"] == "16" and decode["rel_iqr"] == "0.02"
    assert probe["status"] == "skipped" and probe["time_s"] == "" and "sm_90" in probe["reason"]
    assert float(rows[5]["derived.busbw_B_per_s"]) == pytest.approx(1_048_576 / 24.6e-6)
    assert rows[7]["derived.tokens_per_s"] == "12345.6"
