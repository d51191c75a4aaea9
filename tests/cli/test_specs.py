"""`truepeak specs` through typer's CliRunner: the catalog, one accelerator, --sources, --json and --claim (S1, C01)."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

import truepeak.cli.specs  # noqa: F401  (registers the command)
from truepeak.cli.app import app, main
from truepeak.hardware import load_catalog

WS = "NVIDIA RTX PRO 6000 Blackwell Workstation Edition"
FOOTER = "TFLOPS = 1e12 FLOP/s, dense unless labelled sparse; TB/s decimal"


def run(*args: str):
    result = CliRunner().invoke(app, ["specs", *args])
    return result


def run_main(capsys, *args: str) -> tuple[int, str, str]:
    """Run through the console entry point (the error boundary), returning (exit code, stdout, stderr)."""
    with pytest.raises(SystemExit) as info:
        main(["specs", *args])
    captured = capsys.readouterr()
    return info.value.code, captured.out, captured.err


def _row(stdout: str, first_cell: str) -> list[str]:
    """Cells of the table row whose first cell is ``first_cell``."""
    for line in stdout.splitlines():
        cells = [c.strip() for c in line.strip("│┃ ").split("│")]
        if cells and cells[0] == first_cell:
            return cells
    raise AssertionError(f"no row {first_cell!r} in:\n{stdout}")


def test_list_has_one_row_per_accelerator_with_dense_peaks():
    r = run()
    assert r.exit_code == 0, r.output
    for acc in load_catalog().accelerators:
        assert acc.name in r.stdout
    h200 = _row(r.stdout, "NVIDIA H200 SXM")
    assert h200[1:] == ["h200-sxm", "141", "4.8", "132", "989.4", "1978.9", "—", "700"]
    ws = _row(r.stdout, WS)
    assert ws[5:8] == ["503.8 †", "1007.6 †", "2015.2 †"]  # PROWP via CAT: unverified against the whitepaper PDF
    assert "4030.4" not in r.stdout  # the list shows dense peaks only
    assert FOOTER in r.stdout


def test_list_marks_derived_values():
    server = _row(run().stdout, "NVIDIA RTX PRO 6000 Blackwell Server Edition")
    assert server[7] == "1871.2 *"


def test_one_accelerator_has_labelled_dense_and_sparse_columns():
    r = run("h200")
    assert r.exit_code == 0, r.output
    assert "dense TFLOPS" in r.stdout and "sparse (2:4) TFLOPS" in r.stdout and "derived" in r.stdout
    bf16 = _row(r.stdout, "bf16")
    assert bf16[:4] == ["bf16", "fp32", "989.4", "1979.0"]
    fp32 = _row(r.stdout, "fp32")
    assert fp32[2:4] == ["67", "—"] and "1980 (max)" in fp32
    for text in ("141 GB HBM3e", "4.8 TB/s", "1830 MHz", "1980 MHz", "62,914,560 B", "232,448 B", "700 W", "NVLink4",
                 "headline:", FOOTER):
        assert text in r.stdout, text


def test_C01_device_string_resolves_and_shows_the_dense_peak():
    r = run("NVIDIA H100 80GB HBM3")
    assert r.exit_code == 0, r.output
    assert "NVIDIA H100 SXM" in r.stdout
    assert _row(r.stdout, "bf16")[2:4] == ["989.4", "1979.0"]


def test_C04_geforce_shows_both_accumulators():
    r = run("4090")
    rows = [line for line in r.stdout.splitlines() if line.strip("│ ").startswith("fp16")]
    assert len(rows) == 2
    assert any("165.2" in line and "fp32" in line for line in rows)
    assert any("330.3" in line and "fp16 " in line for line in rows)


def test_S1_server_edition_marks_derived_peaks():
    r = run("rtx-pro-6000-server")
    fp4 = _row(r.stdout, "fp4")
    assert fp4[2:5] == ["1871.2", "3700.0", "*"]
    assert "2430 MHz *" in r.stdout  # the implied clock is marked derived too


def test_why_not_is_shown_as_a_note():
    r = run("h20")
    assert "does not reproduce" in r.stdout and "capped" in r.stdout
    assert "not published in our sources" in r.stdout  # SM count / clock


def test_sources_adds_a_source_column():
    plain, sourced = run("h200"), run("h200", "--sources")
    header = next(line for line in plain.stdout.splitlines() if "dense TFLOPS" in line)
    assert "source" not in header
    assert "source" in next(line for line in sourced.stdout.splitlines() if "dense TFLOPS" in line)
    assert "H200-MEAS" in sourced.stdout and "cudaGetDeviceProperties" in sourced.stdout
    assert "deepseek-ai/FlashMLA#75" in sourced.stdout


def test_sources_without_name_lists_source_keys():
    r = run("--sources")
    assert r.exit_code == 0
    assert "PROWP" in r.stdout and "CUDA-GUIDE" in r.stdout


def test_json_one_accelerator_is_si():
    r = run("rtx-pro-6000-ws", "--json")
    assert r.exit_code == 0, r.output
    doc = json.loads(r.stdout)
    assert doc["schema"] == "truepeak.specs/1"
    acc = doc["accelerator"]
    assert acc["key"] == "rtx-pro-6000-ws"
    assert acc["memory_bandwidth_bytes_per_s"]["value"] == pytest.approx(1.792e12)
    assert acc["smem_per_block_bytes"]["value"] == 101376
    fp4 = next(p for p in acc["peaks"] if p["rate"] == "fp4")
    assert fp4["dense_flops"] == pytest.approx(2015.2e12)
    assert fp4["sparse_flops"] == pytest.approx(4030.4e12)
    assert fp4["flop_per_clk_per_sm"] == 4096 and fp4["clock_hz"] == pytest.approx(2617e6)
    assert "flops" in doc["units"]


def test_json_list_has_every_accelerator():
    doc = json.loads(run("--json").stdout)
    assert len(doc["accelerators"]) == len(load_catalog().accelerators)
    assert "ML" in doc["sources"]


def test_S1_claim_4_pflops_fp4_is_sparse():
    r = run(WS, "--claim", "4 PFLOPS FP4")
    assert r.exit_code == 0, r.output
    assert "SPARSE (2:4)" in r.stdout
    assert "2015.2 TFLOPS" in r.stdout and "use this for efficiency" in r.stdout
    assert "4030.4" in r.stdout


def test_S1_claim_4000_ai_tops_and_server_3_7_pflops():
    assert "SPARSE" in run("rtx pro 6000", "--claim", "4000 AI TOPS").stdout
    r = run("NVIDIA RTX PRO 6000 Blackwell Server Edition", "--claim", "3.7 PFLOPS FP4")
    assert "SPARSE" in r.stdout and "1871.2 TFLOPS *" in r.stdout


def test_C01_claim_1979_bf16_on_h100_is_sparse_use_989():
    r = run("h100", "--claim", "1979 TFLOPS BF16")
    assert "SPARSE" in r.stdout and "989.4 TFLOPS" in r.stdout
    r = run("h100", "--claim", "1979 TFLOPS FP8")
    assert "DENSE" in r.stdout


def test_claim_json():
    doc = json.loads(run("h100", "--claim", "1979 TFLOPS BF16", "--json").stdout)
    assert doc["claim"]["kind"] == "sparse"
    assert doc["claim"]["dense"] == pytest.approx(989.4e12)


def test_unknown_name_is_one_line_error_exit_2(capsys):
    code, out, err = run_main(capsys, "NVIDIA H300")
    assert code == 2
    assert out == ""
    assert err.startswith("error: unknown accelerator 'NVIDIA H300'")
    assert err.count("\n") == 1 and "closest" in err


def test_bad_claim_is_one_line_error_exit_2(capsys):
    code, _, err = run_main(capsys, "h200", "--claim", "very fast")
    assert code == 2
    assert err.startswith("error: cannot read the claim 'very fast'") and "4 PFLOPS FP4" in err


def test_claim_without_name_is_an_error(capsys):
    code, _, err = run_main(capsys, "--claim", "4 PFLOPS FP4")
    assert code == 2 and "--claim needs an accelerator NAME" in err


def test_help_has_examples():
    r = CliRunner().invoke(app, ["specs", "--help"])
    assert r.exit_code == 0
    for text in ("--claim", "--json", "--sources", "truepeak specs h200", "2015.2"):
        assert text in r.stdout, text


# ----------------------------------------------------------------------------------------------------------------------
# Rendering fixes (fresh-user bugs 3 and 6)


def test_list_marks_unverified_values_with_a_legend():
    r = run()
    b300 = _row(r.stdout, "NVIDIA B300")
    assert b300[4] == "160 †" and b300[7] == "15000.0 †"
    assert _row(r.stdout, "NVIDIA GB300")[4] == "160 †"
    assert _row(r.stdout, "NVIDIA B200")[4] == "148"
    assert "† unverified" in r.stdout and "* derived" in r.stdout


def test_a100_l2_is_not_printed_twice():
    r = run("a100-sxm-80gb")
    line = next(line for line in r.stdout.splitlines() if "L2 cache" in line)
    assert line.count("40 MiB") == 1, line


def test_5090_shows_the_mxfp8_instruction_kind():
    r = run("5090")
    mx = _row(r.stdout, "fp8 (mxfp8 only)")
    assert mx[1:4] == ["fp32", "838.0 †", "—"] and mx[5] == "2048"


def test_mi355x_int8_has_the_rounding_note():
    r = run("mi355x")
    assert "int8: 10100 / 2 = 5050: within vendor rounding" in r.stdout


def test_claim_platform_total_and_b300_sparse():
    r = run("b200", "--claim", "144 PFLOPS FP4")
    assert r.exit_code == 0, r.output
    assert "SPARSE (2:4) 8-GPU PLATFORM TOTAL" in r.stdout and "9000.0 TFLOPS" in r.stdout
    r = run("b300", "--claim", "18 PFLOPS FP4")
    assert "SPARSE (2:4)" in r.stdout and "NEITHER" not in r.stdout
    assert "sparse peak: 18000.0 TFLOPS (published; not 2 x dense on this part)" in r.stdout
    r = run("b300", "--claim", "15 PFLOPS FP4")
    assert "DENSE" in r.stdout and "15000.0 TFLOPS †" in r.stdout and "UNVERIFIED" in r.stdout


def test_claim_output_shows_each_peak_one_way():
    """The verdict lines, the explanation and the peaks table render peaks with one formatter (364.25 in the
    catalog -> 364.2 everywhere; adversarial test 6: specs printed 364.25, efficiency / --claim 364.2)."""
    r = run("rtx-6000-ada", "--claim", "364 TFLOPS bf16")
    assert r.exit_code == 0, r.output
    assert "dense peak:  364.2 TFLOPS" in r.stdout and "(364.2;" in r.stdout
    assert "364.25" not in r.stdout
    table = run("rtx-6000-ada").stdout  # the peaks table renders catalog values with the same formatter
    assert _row(table, "bf16")[2:4] == ["364.2", "728.5"] and _row(table, "fp8")[2:4] == ["728.5", "1457.0"]
    r = run("h200", "--claim", "67 TFLOPS fp32")
    assert "dense peak:  67 TFLOPS" in r.stdout and "(67;" in r.stdout


# ----------------------------------------------------------------------------------------------------------------------
# Fresh-user bugs: ambiguous sparse/dense claims, infinite claims, one tolerance sign, † from the data


def test_claim_330_tflops_fp16_on_4090_is_ambiguous_and_lists_both():
    r = run("rtx-4090", "--claim", "330 TFLOPS fp16")
    assert r.exit_code == 0, r.output
    assert "AMBIGUOUS" in r.stdout and "SPARSE" not in r.stdout.split("\n")[1]
    assert "2:4-sparse fp16 330.4" in r.stdout and "dense fp16 (fp16 accumulate) 330.3" in r.stdout
    assert "dense peak:  165.2 TFLOPS" in r.stdout and "fp32 accumulate" in r.stdout
    assert "+-" not in r.stdout and "±5 %" in r.stdout


def test_claim_1979_on_h200_stays_ambiguous():
    r = run("h200", "--claim", "1979 TFLOPS")
    assert "AMBIGUOUS — name the format to decide" in r.stdout


@pytest.mark.parametrize("text", ["1e400 TFLOPS BF16", "nan TFLOPS BF16"])
def test_infinite_or_nan_claim_is_an_error(capsys, text):
    code, out, err = run_main(capsys, "rtx-4090", "--claim", text)
    assert code == 2 and out == "" and err.startswith("error: cannot read the claim")


def test_rtx_5090_l2_carries_the_unverified_marker():
    line = next(line for line in run("5090").stdout.splitlines() if "L2 cache" in line)
    assert "96,000,000 B" in line and "†" in line


def test_mi300x_shows_its_infinity_cache():
    line = next(line for line in run("mi300x").stdout.splitlines() if "Infinity Cache (behind L2)" in line)
    assert "268,435,456 B" in line


def test_a100_json_bandwidth_is_exact():
    r = run("a100-sxm-80gb", "--json")
    assert '"value": 2039000000000.0,' in r.stdout
