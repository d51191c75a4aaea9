"""`truepeak efficiency` through typer's CliRunner: the S1 numbers from the command line, and one-line errors."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

import truepeak.cli.efficiency  # noqa: F401  (registers the command)
from truepeak.cli.app import app

WS = "NVIDIA RTX PRO 6000 Blackwell Workstation Edition"
H200 = "NVIDIA H200"


def run(*args: str):
    return CliRunner().invoke(app, ["efficiency", *args])


def out_lines(result) -> list[str]:
    return result.stdout.splitlines()


def test_S1_large_gemm():
    r = run("--gpu", WS, "--format", "nvfp4", "--tflops", "1300")
    assert r.exit_code == 0, r.output
    assert "2015.2 TFLOPS" in r.stdout
    achieved = next(line for line in out_lines(r) if "achieved" in line)
    assert "64.5 % of the dense peak" in achieved
    assert ("against the 4030.4 TFLOPS sparse figure this would read 32.3 % — wrong: 2:4 sparsity doubles the "
            "datasheet rate; dense GEMMs never reach it") in r.stdout
    assert "32.5" not in r.stdout


def test_S1_moe_aggregate():
    r = run("--gpu", WS, "--format", "nvfp4", "--tflops", "437")
    assert r.exit_code == 0 and "21.7 % of the dense peak" in r.stdout


def test_S1_per_expert_gemm_is_memory_bound():
    # GLM-5 gate+up at 16 tokens per expert: M = 16, N = 2 x 2048 = 4096, K = 6144 (hidden), nvfp4 in, bf16 out.
    # FLOP 2 x 16 x 4096 x 6144 = 805,306,368; bytes A 16 x 6144 x 0.5625 = 55,296 + B 4096 x 6144 x 0.5625 =
    # 14,155,776 + C 16 x 4096 x 2 = 131,072 = 14,342,144 B -> 56.15 FLOP/B; ceiling 1.792e12 x 56.15 = 100.6 TFLOPS;
    # 0.8 TFLOPS -> 805,306,368 / 0.8e12 = 1.007 ms, 14,342,144 B / 1.007 ms = 14.2 GB/s = 0.795 % of 1792 GB/s
    r = run("--gpu", WS, "--format", "nvfp4", "--shape", "16x4096x6144", "--tflops", "0.8")
    assert r.exit_code == 0, r.output
    text = r.stdout
    assert "56.15 FLOP/B; ridge 1125 FLOP/B → memory-bound" in text
    assert "100.6 TFLOPS" in text                      # roofline ceiling, A + B + C bytes counted
    assert "14.34 MB = A 55.3 kB + weight B 14.16 MB + C 131.1 kB" in text
    assert "8.0531e+08" in text                        # 0.805 GFLOP
    assert "1.007 ms per GEMM" in text
    bw = next(line for line in out_lines(r) if "memory bandwidth" in line)
    assert "14.2 GB/s = 0.795 % of 1792 GB/s" in bw and "the percentage that matters" in bw


def test_S1_json():
    r = run("--gpu", WS, "--format", "nvfp4", "--shape", "16x4096x6144", "--tflops", "0.8", "--json")
    assert r.exit_code == 0, r.output
    d = json.loads(r.stdout)
    assert d["bound"] == "memory" and d["b_bytes"] == 14_155_776 and d["flop"] == 805_306_368
    assert d["ridge"] == pytest.approx(2015.2 / 1.792)


def test_C01_h200():
    r = run("--gpu", H200, "--format", "bf16", "--tflops", "420")
    assert r.exit_code == 0
    for line in out_lines(r):
        if "21.2 %" in line:
            assert "wrong" in line  # the sparse figure appears only as the labelled trap
    assert "42.4 % of the dense peak" in r.stdout


def test_C07_time_route():
    r = run("--gpu", H200, "--format", "bf16", "--shape", "8192x8192x8192", "--time-ms", "1.5")
    assert r.exit_code == 0, r.output
    assert "74.1 % of the dense peak" in r.stdout and "floor 1.111 ms" in r.stdout and "compute-bound" in r.stdout


def test_help_has_the_S1_example():
    r = CliRunner().invoke(app, ["efficiency", "--help"], env={"COLUMNS": "160"})
    assert r.exit_code == 0
    assert "16x4096x6144" in r.stdout and "DENSE" in r.stdout


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["--gpu", H200, "--format", "bf16", "--shape", "8192x", "--tflops", "100"], "8192x"),
        (["--gpu", H200, "--format", "bf16", "--shape", "0x4x4", "--tflops", "100"], "M=0"),
        (["--gpu", H200, "--format", "bf16", "--shape", "-1x2x3", "--tflops", "100"], "M=-1"),
        (["--gpu", H200, "--format", "bf17", "--tflops", "100"], "bf17"),
        (["--gpu", "H300 SXM", "--format", "bf16", "--tflops", "100"], "H300 SXM"),
        (["--gpu", H200, "--format", "bf16", "--tflops", "5000"], "505 %"),
        (["--gpu", H200, "--format", "bf16", "--shape", "8x8x8", "--time-ms", "0"], "--time-ms 0"),
        (["--gpu", H200, "--format", "bf16", "--shape", "8x8x8", "--time-ms", "-2"], "--time-ms -2"),
        (["--gpu", H200, "--format", "bf16"], "throughput"),
        (["--gpu", H200, "--format", "bf16", "--tflops", "0"], "--tflops 0 "),
        (["--gpu", H200, "--format", "bf16", "--tflops", "nan"], "nan"),
        (["--gpu", H200, "--format", "nvfp4", "--tflops", "10"], "fp4"),
        (["--gpu", H200, "--format", "bf16", "--tflops", "700", "--shape", "8192x8192x8192", "--time-ms", "1.5"],
         "inconsistent"),
        (["--gpu", H200, "--format", "bf16", "--tflops", "10", "--accumulate", "fp64"], "fp64"),
    ],
)
def test_bad_input_one_line_exit_2(args, needle):
    r = run(*args)
    assert r.exit_code == 2, r.output
    err = r.stderr.strip()
    assert err.startswith("error: ")
    assert "\n" not in err
    assert needle in err
    assert r.stdout == ""


# ---------------------------------------------------------------------------------------------------------------------
# Fresh-user bugs


@pytest.mark.parametrize(("gpu", "tflops", "pct"), [("h100", "990", "100.1 %"), ("5090", "239", "114.1 %"),
                                                    ("4090", "178", "107.7 %")])
def test_measurements_above_the_spec_clock_peak_are_accepted_with_a_note(gpu, tflops, pct):
    r = run("--gpu", gpu, "--format", "bf16", "--tflops", tflops)
    assert r.exit_code == 0, r.output
    assert f"{pct} of the dense peak" in r.stdout
    note = next(line for line in out_lines(r) if line.startswith("note: above the spec-clock dense peak"))
    assert "spec clock; pass --clock-mhz (or use truepeak run, which samples it)" in note


def test_C08_error_names_clock_mhz():
    r = run("--gpu", "4090", "--format", "fp32", "--shape", "4096x4096x4096", "--time-ms", "0.275")
    assert r.exit_code == 2
    assert "605 %" in r.stderr and "--clock-mhz compares against the peak at the clock the GPU ran" in r.stderr


def test_5090_mxfp8_at_measured_clock():
    r = run("--gpu", "5090", "--format", "mxfp8", "--tflops", "660", "--clock-mhz", "2750")
    assert r.exit_code == 0, r.output
    assert "838.0 TFLOPS" in r.stdout and "78.8 % of the dense peak" in r.stdout
    assert "68.9 % of 957.4 TFLOPS" in r.stdout and "unverified" in r.stdout
    bad = run("--gpu", "5090", "--format", "fp8_e4m3", "--tflops", "660", "--clock-mhz", "2750")
    assert bad.exit_code == 2 and "cannot be a real measurement" in bad.stderr


def test_S1_shape_alone_prints_the_bounds():
    r = run("--gpu", WS, "--format", "nvfp4", "--shape", "16x6144x4096")
    assert r.exit_code == 0, r.output
    for text in ("8.0531e+08", "14.39 MB", "55.97 FLOP/B", "ridge 1125 FLOP/B", "memory-bound", "100.3 TFLOPS",
                 "floor 8.03 µs"):
        assert text in r.stdout, text
    assert "of the dense peak" not in r.stdout  # no invented measurement


def test_one_number_formatter_for_peak_and_ceiling():
    r = run("--gpu", "h100", "--format", "fp8", "--tflops", "1000", "--shape", "8192x8192x8192")
    assert r.exit_code == 0, r.output
    dense = next(line for line in out_lines(r) if "dense peak" in line)
    ceiling = next(line for line in out_lines(r) if "roofline ceiling" in line)
    assert "1978.9 TFLOPS" in dense and "1978.9 TFLOPS" in ceiling


def test_int8_is_rendered_in_tops():
    r = run("--gpu", H200, "--format", "int8", "--tflops", "1000", "--shape", "8192x8192x8192")
    assert r.exit_code == 0, r.output
    assert "1978.9 TOPS" in r.stdout and "TFLOPS" not in r.stdout


def test_alias_is_said_and_amd_fp8_is_fnuz():
    r = run("--gpu", "5090", "--format", "fp4", "--tflops", "1000")
    assert r.exit_code == 0 and "fp4 read as nvfp4" in r.stdout
    assert "e4m3fnuz" in run("--gpu", "mi300x", "--format", "fp8", "--tflops", "1000").stdout


@pytest.mark.parametrize(
    ("args", "needles"),
    [
        (["--scaling", "bogus", "--tflops", "100"], ["--scaling 'bogus'", "tensor, row, block128"]),
        (["--scaling", "row", "--tflops", "100"], ["--scaling 'row'", "fp8 and int8", "not bf16"]),
        (["--time-ms", "3"], ["--time-ms", "--shape"]),
        ([], ["--tflops", "--time-ms", "--shape"]),
        (["--tflops", "500", "--clock-mhz", "5000"], ["--clock-mhz 5000", "1980 MHz maximum clock"]),
        (["--tflops", "500", "--clock-mhz", "0"], ["--clock-mhz 0", "positive"]),
        (["--tflops", "500", "--format", "fp6"], ["fp6 is a rate, not a format: use mxfp6"]),
        (["--tflops", "500", "--format", "bogus"], ["known: fp32", "aliases are accepted", "fp8 = fp8_e4m3"]),
    ],
)
def test_more_bad_input_names_the_flags(args, needles):
    base = ["--gpu", H200] + ([] if "--format" in args else ["--format", "bf16"])
    r = run(*base, *args)
    assert r.exit_code == 2, r.output
    err = r.stderr.strip()
    assert err.startswith("error: ") and "\n" not in err
    for needle in needles:
        assert needle in err, (needle, err)
    assert "(tflops)" not in err and "time_s" not in err  # flags, not parameter names


# ---------------------------------------------------------------------------------------------------------------------
# Fresh-user bugs: partial blocks said, JSON units SI, accumulator pairs listed


def test_partial_block_is_said_in_text_and_json():
    args = ("--gpu", WS, "--format", "nvfp4", "--shape", "1x70000000000x1")
    r = run(*args)
    assert r.exit_code == 0, r.output
    assert ("note: K=1 is not a multiple of nvfp4's 16-value block: each row stores 1 partial block, counted whole"
            in r.stdout)
    d = json.loads(run(*args, "--json").stdout)
    assert d["b_bytes"] == 105_000_000_000  # 70e9 x (0.5 B payload + one whole 1 B scale)
    assert any(n.startswith("K=1 is not a multiple of nvfp4's 16-value block") for n in d["notes"])
    assert not any("partial block" in n for n in json.loads(run("--gpu", WS, "--format", "nvfp4", "--shape",
                                                                "16x6144x4096", "--json").stdout)["notes"])


def test_json_unit_says_si():
    d = json.loads(run("--gpu", H200, "--format", "bf16", "--tflops", "420", "--json").stdout)
    assert d["unit"] == "FLOP/s" and d["display_unit"] == "TFLOPS"
    assert d["dense_flops"] == pytest.approx(989.4e12)
    d = json.loads(run("--gpu", H200, "--format", "int8", "--tflops", "420", "--json").stdout)
    assert d["unit"] == "ops/s" and d["display_unit"] == "TOPS"


def test_missing_accumulator_lists_what_the_gpu_has():
    r = run("--gpu", H200, "--format", "bf16", "--accumulate", "fp16", "--tflops", "100")
    assert r.exit_code == 2
    assert "bf16 is published with fp32 accumulate only" in r.stderr and "bf16/fp32" in r.stderr


@pytest.mark.parametrize(
    ("args", "needles"),
    [
        # 1a: a cache-resident working set above 10 x HBM; a GPU with no L2 in the catalog
        (["--gpu", "h200", "--format", "bf16", "--shape", "1x4096x7168", "--time-ms", "0.0001"],
         ["587428 GB/s", "10 x the memory bandwidth", "cannot be a real measurement"]),
        (["--gpu", "l40s", "--format", "bf16", "--shape", "1x16384x16384", "--time-ms", "0.01"],
         ["6214.5 %", "cache size is not in the catalog"]),
        # 1b: no call completes in under 100 ns
        (["--gpu", "h200", "--format", "bf16", "--shape", "1x1x1", "--time-ms", "1e-9"],
         ["--time-ms 1e-09", "below 100 ns"]),
        # 2: a clock above the catalog maximum (NVML-measured 1980 MHz) cannot lift the ceiling
        (["--gpu", "h200", "--format", "bf16", "--tflops", "1450", "--clock-mhz", "2900"],
         ["--clock-mhz 2900 is above the 1980 MHz maximum clock"]),
        # 4: no hardware block scaling on sm_90 (and "block scaling" is not the --scaling flag)
        (["--gpu", "h100-sxm", "--format", "mxfp8", "--tflops", "500"],
         ["mxfp8 needs hardware block scaling (sm_100, sm_120, CDNA4); NVIDIA H100 SXM (sm_90) has none"]),
        # 6: accumulators are validated
        (["--gpu", "h200", "--format", "bf16", "--tflops", "500", "--accumulate", "banana"],
         ["unknown accumulator 'banana'; known: fp32, fp16, int32"]),
    ],
)
def test_adversarial_inputs_are_rejected(args, needles):
    r = run(*args)
    assert r.exit_code == 2, r.output
    err = r.stderr.strip()
    assert err.startswith("error: ") and "\n" not in err
    for needle in needles:
        assert needle in err, (needle, err)


def test_rtx_5090_at_its_real_clock_is_accepted():
    """Adversarial test 3: RTX 5090 cards run 2.7-2.8 GHz against the 2407 MHz spec: 241 TFLOPS bf16 is real."""
    r = run("--gpu", "rtx-5090", "--format", "bf16", "--tflops", "241")
    assert r.exit_code == 0, r.output
    assert "115.0 % of the dense peak" in r.stdout


@pytest.mark.parametrize("typed, shown, pct", [
    # 1e308 TFLOPS = 1e320 FLOP/s overflows a float: it was refused as "throughput inf FLOP/s is not a positive finite
    # number". It is a value far above the peak: 1e308 / 989.4 x 100 % = 1.01e307 %.
    ("1e308", "1e+308", "1.01e+307"),
    ("1e297", "1e+297", "1.01e+296"),
    # finite in FLOP/s but printed with 16 and 15 digits before: 1e15 / 989.4 x 100 % = 1.01e14 %
    ("1e15", "1e+15", "1.01e+14"),
])
def test_absurd_throughput_is_shown_as_typed_and_called_above_the_peak(typed, shown, pct):
    r = run("--gpu", "h100-sxm", "--format", "bf16", "--tflops", typed)
    assert r.exit_code == 2, r.output
    assert r.stderr.strip().splitlines() == [
        f"error: {shown} TFLOPS is {pct} % of the 989.4 TFLOPS dense bf16 peak of NVIDIA H100 SXM: this cannot be a "
        "real measurement (above the 1070.5 TFLOPS ceiling, its peak at the 1980 MHz maximum clock; a timing error: "
        "too few FLOP counted, a cache-resident or eliminated op, or a time that excludes the kernel); --clock-mhz "
        "compares against the peak at the clock the GPU ran"]
    assert "inf" not in r.stderr
    with_shape = run("--gpu", "h100-sxm", "--format", "bf16", "--tflops", "1e308", "--shape", "8192x8192x8192")
    assert with_shape.exit_code == 2 and "1e+308 TFLOPS is 1.01e+307 %" in with_shape.stderr


def test_readme_per_expert_example_says_what_the_command_prints():
    # The README's per-expert example is the GLM-5 gate+up GEMM of the field case (M=16, N=4096, K=6144 at ~0.8
    # TFLOPS); every number its comment quotes must be in the command's output.
    import re
    import shlex
    from pathlib import Path

    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text().splitlines()
    i = next(i for i, l in enumerate(readme) if l.startswith("truepeak efficiency") and "--shape 16x4096x6144" in l)
    comment = []
    j = i - 1
    while readme[j].startswith("#"):
        comment.insert(0, readme[j].lstrip("# "))
        j -= 1
    comment = " ".join(comment)
    r = run(*shlex.split(readme[i])[2:])
    assert r.exit_code == 0, r.output
    quoted = re.findall(r"\d[\d.]* (?:FLOP/B|TFLOPS|ms|GB/s|%)", comment)
    assert {"56.15 FLOP/B", "1125 FLOP/B", "100.6 TFLOPS", "1.007 ms", "14.2 GB/s", "0.795 %", "1792 GB/s"} <= set(quoted)
    for q in quoted:
        assert q in r.stdout, q


def test_a_bare_gpu_alias_says_which_part_it_means():
    """`specs` prints what the bare alias 'rtx pro 6000' means; `efficiency` used it silently. The catalog note is
    shown for the alias, not for the full key."""
    from typer.testing import CliRunner

    from truepeak.cli.app import app

    base = ["efficiency", "--tflops", "100", "--format", "bf16", "--gpu"]
    out = CliRunner().invoke(app, [*base, "rtx pro 6000"]).stdout.splitlines()
    assert out[1] == ("  GPU read as: the bare alias 'rtx pro 6000' means this Workstation Edition (600 W); the Max-Q "
                      "(300 W) and Server Edition have lower clocks")
    assert "GPU read as" not in CliRunner().invoke(app, [*base, "rtx-pro-6000-ws"]).stdout
