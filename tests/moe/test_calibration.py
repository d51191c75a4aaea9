"""truepeak.moe.calibration: the shipped H200 calibration read back, its interpolation and the carry-over rule, with
values from the committed measurements (docs/results/h200/calibration/h200_points.json, docs/results/h200/moe/,
docs/results/h200x2/bound/results.jsonl)."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import pytest

from truepeak.errors import ConfigError
from truepeak.hardware.lookup import get_accelerator
from truepeak.moe.calibration import carry_over, default_calibration, interp_log, link_bandwidth, load_calibration

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def cal():
    return default_calibration()


def test_interp_log_between_and_outside_the_points():
    assert interp_log([1, 4], [0.5, 0.7], 2) == pytest.approx(0.6)          # log 2 / log 4 = 1/2 of the way
    assert interp_log([1, 4], [0.5, 0.7], 0.5) == 0.5 and interp_log([1, 4], [0.5, 0.7], 9) == 0.7


def test_the_shipped_file_is_a_fresh_build_of_the_committed_measurements():
    r = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "build_calibration.py"), "--check"],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr


def test_fixed_costs_as_measured(cal):
    # h200_points.json: graph 1.147 µs, eager 11.3999 µs per kernel; read bandwidth 4.4845 TB/s
    assert cal.kernel_s(False) == 1.147e-6 and cal.kernel_s(True) == 1.13999e-5
    assert cal.read_bandwidth == 4.48454e12
    assert cal.elementwise_s(12288) == 1.16204e-6                 # the add over [1, 2048] bf16
    assert cal.elementwise_s(2 * 44040192) == pytest.approx(2 * 9.18467e-6)   # above the largest: its bandwidth
    assert cal.argmax_s(1, 129280) == 2.66863e-05 and cal.argmax_s(1, 2 * 129280) == pytest.approx(2 * 2.66863e-05)


def test_gemm_fraction_at_a_point_between_m_and_between_shapes(cal):
    assert cal.gemm_fraction("bf16", 1, 4096, 7168) == 0.64546
    assert cal.gemm_fraction("fp8_e4m3:block128", 8, 7168, 2048) == 0.354342
    # M = 3 between the M = 2 (0.656074) and M = 4 (0.652807) points of bf16 4096 x 7168
    assert cal.gemm_fraction("bf16", 3, 4096, 7168) == pytest.approx(0.656074 + (0.652807 - 0.656074) *
                                                                      math.log(1.5) / math.log(2))
    # N·K = 20e6 between 7168 x 2048 (14.68e6 values: 0.63784 at M = 1) and 4096 x 7168 (29.36e6: 0.64546)
    w = math.log(20e6 / (7168 * 2048)) / math.log(2)
    assert cal.gemm_fraction("bf16", 1, 20_000_000, 1) == pytest.approx(0.63784 + w * (0.64546 - 0.63784))
    assert cal.gemm_key("nvfp4", None) == "fp8_e4m3:tensor" and cal.gemm_key("fp8_e4m3", "block128") == \
        "fp8_e4m3:block128" and cal.gemm_key("fp16", None) == "bf16"


def test_expert_fraction_tables_and_extrapolation(cal):
    # moe_experts.jsonl.gz, DeepSeek-V3 uniform: torch._scaled_grouped_mm fp8 at 1 token per expert, E = 256
    assert cal.expert_fraction("library", "fp8_e4m3", 1, 256) == 0.599586
    assert cal.expert_fraction("library", "fp8_e4m3", 0.25, 256) == 0.599586          # held below 1
    assert cal.expert_fraction("library", "fp8_e4m3", 512, 256) == pytest.approx(0.10665 * 256 / 512)
    assert cal.expert_fraction("library", "fp8_e4m3", 1, 2) == 0.461302              # E = 32 table, held
    # no library fp4 kernel on Hopper: truepeak's Triton kernel's table
    assert cal.expert_table("library", "nvfp4") == ("truepeak_triton", "nvfp4")
    with pytest.raises(ConfigError):
        cal.expert_fraction("library", "int4", 1, 256)


def test_collectives_as_measured_on_two_h200s(cal):
    assert cal.collective_s("all_reduce", 1024, eager=False) == 9.90533e-6   # bound/results.jsonl, graph: 9.91 µs
    assert cal.collective_s("all_reduce", 1024, eager=True) == 1.68997e-5    # eager: 16.9 µs
    # 200,704 B between the 131,072 B (11.4242 µs) and 262,144 B points, log-linear
    lo, hi = cal.collectives["graph"]["all_reduce"][7], cal.collectives["graph"]["all_reduce"][8]
    assert lo[0] == 131072 and hi[0] == 262144
    w = math.log(200704 / 131072) / math.log(2)
    assert cal.collective_s("all_reduce", 200704, eager=False) == pytest.approx(lo[1] + w * (hi[1] - lo[1]))
    assert cal.collective_s("broadcast", 1024, eager=False) is None


def test_carry_over_to_a_b200_and_none_on_the_h200(cal):
    b = carry_over(cal, get_accelerator("b200"))
    ratio = 4.48454e12 / 4.8e12                     # measured read / H200 catalog bandwidth
    assert not b.same_device and b.ratio == pytest.approx(ratio)
    assert b.bandwidth == pytest.approx(8e12 * ratio)
    assert b.link_ratio == pytest.approx(900 / 1800) and b.native_fp4 == ("nvfp4", "mxfp4")
    h = carry_over(cal, get_accelerator("h200"))
    assert h.same_device and h.bandwidth == 4.48454e12 and h.link_ratio == 1.0 and h.native_fp4 == ()
    assert link_bandwidth(get_accelerator("a100")) == 600e9


def test_a_bad_calibration_file_is_one_line(tmp_path):
    with pytest.raises(ConfigError, match="cannot read it"):
        load_calibration(tmp_path / "nope.json")
    bad = tmp_path / "bad.json"
    bad.write_text("{")
    with pytest.raises(ConfigError, match="not JSON"):
        load_calibration(bad)
    bad.write_text(json.dumps({"calibration_version": 99}))
    with pytest.raises(ConfigError, match="is not a truepeak calibration") as e:
        load_calibration(bad)
    assert "\n" not in str(e.value)
    doc = json.loads((ROOT / "src/truepeak/moe/calibrations/h200.json").read_text())
    del doc["kernel_s"]
    bad.write_text(json.dumps(doc))
    with pytest.raises(ConfigError, match="missing or malformed"):
        load_calibration(bad)
