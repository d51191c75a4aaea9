"""truepeak.report.specs: what `truepeak specs` prints, from catalog entries (tables, claim lines, JSON documents);
the same text the command prints (tests/cli/test_specs.py runs it through the CLI)."""

from __future__ import annotations

import io
import json

import pytest
from rich.console import Console

from truepeak.hardware import load_catalog
from truepeak.hardware.claims import check_claim
from truepeak.hardware.lookup import get_accelerator
from truepeak.report import specs as S


def test_source_keys_are_whole_words():
    sources = {"ML": "a", "H200-MEAS": "b", "CAT": "c", "NET": "d"}
    assert S.source_keys(["ML; H200-MEAS (NVML)", "HTML CATALOG ML-X NETWORK"], sources) == ["ML", "H200-MEAS"]
    assert S.source_keys(["ML, NET"], sources) == ["ML", "NET"]


def test_list_row_of_the_h200():
    # 141 GB, 4.8 TB/s, 132 SMs; dense bf16 = 4096 FLOP/clk/SM x 132 x 1.83 GHz = 989.4 TFLOPS, fp8 twice that
    # (1978.9), no fp4 on Hopper, 700 W
    table = S.list_table([get_accelerator("h200")])
    assert [c.header for c in table.columns] == ["name", "key", "memory GB", "BW TB/s", "SMs/CUs", "bf16 TFLOPS",
                                                 "fp8 TFLOPS", "fp4 TFLOPS", "TDP W"]
    assert table.rows == [["NVIDIA H200 SXM", "h200-sxm", "141", "4.8", "132", "989.4", "1978.9", "—", "700"]]


def test_claim_lines_of_a_sparse_headline():
    # H100 SXM: "1979 TFLOPS BF16" is the 2:4-sparse figure; the dense peak is 132 x 4096 x 1.83 GHz = 989.4 TFLOPS
    lines = S.claim_lines(check_claim(get_accelerator("h100"), "1979 TFLOPS BF16"))
    assert lines[:6] == ["claim:       1979 TFLOPS BF16  (NVIDIA H100 SXM)",
                         "verdict:     SPARSE (2:4) — not an efficiency denominator; use the dense value below",
                         "format:      bf16, fp32 accumulate",
                         "dense peak:  989.4 TFLOPS  <- use this for efficiency",
                         "sparse peak: 1979.0 TFLOPS",
                         "tolerance:   ±5 % (marketing rounding)"]
    assert lines[-1] == S.FOOTER


def test_json_documents_carry_schema_units_and_si_values():
    acc = get_accelerator("h100")
    doc = json.loads(S.accelerator_json(acc, check_claim(acc, "1979 TFLOPS BF16")))
    assert doc["schema"] == "truepeak.specs/1" and doc["units"] == S.JSON_UNITS
    assert doc["accelerator"]["key"] == "h100-sxm"
    assert doc["claim"]["kind"] == "sparse" and doc["claim"]["dense"] == pytest.approx(989.4e12, rel=1e-4)
    assert "claim" not in json.loads(S.accelerator_json(acc))
    catalog = load_catalog()
    listing = json.loads(S.catalog_json(catalog))
    assert len(listing["accelerators"]) == len(catalog.accelerators) and listing["sources"] == dict(catalog.sources)


def test_printed_catalog_and_accelerator_to_a_pipe_keep_whole_lines():
    buf = io.StringIO()
    console = Console(file=buf, width=80, highlight=False, soft_wrap=False)  # not a terminal: natural width
    S.print_catalog(load_catalog(), console=console)
    lines = buf.getvalue().splitlines()
    assert lines[0] == "truepeak spec catalog: dense peaks (efficiency denominators)"
    assert lines[-1] == f"{S.FOOTER}. {S.LEGEND}. `truepeak specs NAME` shows one accelerator."
    buf.seek(0)
    buf.truncate()
    S.print_accelerator(get_accelerator("h200"), console=console)
    lines = buf.getvalue().splitlines()
    assert lines[0] == "NVIDIA H200 SXM  (h200-sxm)" and lines[-1] == f"{S.FOOTER}. {S.LEGEND}."
    assert "source keys used above" not in buf.getvalue()
