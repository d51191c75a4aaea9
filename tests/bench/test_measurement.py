"""Measurement statistics, warnings (C09, C11, C12) and serialisation, on hand-made samples."""

from __future__ import annotations

import json
import math
import subprocess
import sys

import pytest

from truepeak.bench.measurement import Measurement
from truepeak.bench.telemetry import Telemetry
from truepeak.errors import MeasurementError, TruepeakError

MS = 1e-3


def test_C12_compile_inside_timed_window():
    """Three sweeps [581.81, 202.42, 196.46] ms: steady state 199.4 ms, the mean 326.9 is wrong and is flagged."""
    m = Measurement(samples_s=(581.81 * MS, 202.42 * MS, 196.46 * MS))
    assert m.leading_outlier
    assert m.steady_samples_s == (202.42 * MS, 196.46 * MS)
    assert m.steady_median_s == pytest.approx(199.44 * MS)
    assert round(m.steady_median_s / MS, 1) == 199.4
    assert m.mean_s == pytest.approx(326.8967 * MS, rel=1e-6)  # the wrong number, kept but never used for results
    assert m.median_s == pytest.approx(202.42 * MS)
    assert m.warning_codes == ["warmup_in_window"]
    assert "2.9x the median of the others" in m.warnings[0]
    assert "excluded" in m.warnings[0]


def test_no_leading_outlier_at_exactly_twice():
    m = Measurement(samples_s=(2.0, 1.0, 1.0))
    assert not m.leading_outlier
    assert m.steady_median_s == m.median_s == 1.0
    assert Measurement(samples_s=(2.0001, 1.0, 1.0)).leading_outlier


def test_single_sample_has_no_outlier_and_no_noise():
    m = Measurement(samples_s=(1e-3,))
    assert not m.leading_outlier and m.warnings == []
    assert m.iqr_s == 0 and m.rel_iqr == 0


def test_statistics_linear_percentiles():
    m = Measurement(samples_s=(4.0, 1.0, 3.0, 2.0), calls_per_sample=8)
    assert m.median_s == 2.5
    assert m.mean_s == 2.5
    assert (m.min_s, m.max_s) == (1.0, 4.0)
    assert m.q1_s == pytest.approx(1.75)  # numpy linear: 1 + 0.75 * (2 - 1)
    assert m.q3_s == pytest.approx(3.25)
    assert m.iqr_s == pytest.approx(1.5)
    assert m.rel_iqr == pytest.approx(0.6)
    assert m.n_samples == 4 and m.n_calls == 32


@pytest.mark.parametrize(
    ("samples", "codes"),
    [
        ((0.96, 0.98, 1.0, 1.02, 1.04), []),  # IQR 4 % of the median
        ((0.8, 0.9, 1.0, 1.1, 1.2), ["noisy"]),  # 20 %
        ((0.5, 0.75, 1.0, 1.25, 1.5), ["very_noisy"]),  # 50 %
    ],
)
def test_noise_thresholds_like_torch_utils_benchmark(samples, codes):
    m = Measurement(samples_s=samples)
    assert m.warning_codes == codes
    if codes:
        assert "IQR is" in m.warnings[0]


def test_noise_is_judged_without_the_leading_outlier():
    m = Measurement(samples_s=(10.0, 1.0, 1.01, 0.99, 1.0))
    assert m.rel_iqr > 0  # raw spread includes the outlier
    assert m.warning_codes == ["warmup_in_window"]


def test_C09_inputs_not_random_are_flagged():
    m = Measurement(samples_s=(1e-3, 1e-3), input_kind="zeros")
    assert m.warning_codes == ["inputs_not_random"]
    assert "zeros" in m.warnings[0] and "not a peak" in m.warnings[0] and "7-20 %" in m.warnings[0]
    assert Measurement(samples_s=(1e-3,), input_kind="random").warnings == []


def _throttled_telemetry() -> Telemetry:
    # C11: B200 back-to-back, SM clock 1965 -> 1580 MHz (x0.804)
    return Telemetry(n_samples=200, sm_clock_median_hz=1580e6, sm_clock_min_hz=1540e6, sm_clock_max_hz=1965e6,
                     sm_clock_limit_hz=1965e6, power_median_w=995.0, power_max_w=1001.0, power_limit_w=1000.0,
                     temperature_max_c=71.0, reasons={"power cap": 0.97, "idle": 0.01, "sw thermal": 0.05})


def test_C11_low_clock_names_throttle_reasons():
    m = Measurement(samples_s=(1e-3, 1e-3), telemetry=_throttled_telemetry())
    assert m.warning_codes == ["low_clock"]
    w = m.warnings[0]
    assert "1580 MHz" in w and "80 %" in w and "1965 MHz" in w
    assert "power cap 97 %" in w and "sw thermal 5 %" in w and "idle" not in w


def test_clock_at_90_percent_is_not_flagged():
    tel = Telemetry(n_samples=3, sm_clock_median_hz=1800e6, sm_clock_limit_hz=1980e6)  # 90.9 %
    assert Measurement(samples_s=(1.0,), telemetry=tel).warnings == []
    unknown_limit = Telemetry(n_samples=3, sm_clock_median_hz=100e6)
    assert Measurement(samples_s=(1.0,), telemetry=unknown_limit).warnings == []


def test_round_trip_through_json():
    m = Measurement(samples_s=(3e-3, 1e-3, 1.01e-3, 0.99e-3), calls_per_sample=4, mode="burst", warmup_s=3.0,
                    telemetry=_throttled_telemetry(), input_kind="zeros", graph=True, n_sets=3, burst_gap_s=0.0015,
                    notes=("timed CUDA-graph replays of 4 launches each",))
    d = json.loads(json.dumps(m.to_dict()))
    back = Measurement.from_dict(d)
    assert back == m
    assert back.warnings == m.warnings
    assert d["steady_median_s"] == pytest.approx(1e-3)
    assert d["warning_codes"] == ["warmup_in_window", "inputs_not_random", "low_clock"]


def test_to_dict_without_samples_cannot_be_rebuilt():
    d = Measurement(samples_s=(1.0, 2.0)).to_dict(include_samples=False)
    assert "samples_s" not in d and d["median_s"] == 1.5
    with pytest.raises(MeasurementError, match="without raw samples"):
        Measurement.from_dict(d)


@pytest.mark.parametrize("bad", [(), (0.0,), (-1e-3,), (math.nan,), (math.inf,)])
def test_impossible_samples_are_measurement_errors(bad):
    with pytest.raises(MeasurementError):
        Measurement(samples_s=bad)


def test_bad_mode_and_calls():
    with pytest.raises(TruepeakError, match="sustained, burst, cpu"):
        Measurement(samples_s=(1.0,), mode="fast")
    with pytest.raises(TruepeakError, match="calls_per_sample"):
        Measurement(samples_s=(1.0,), calls_per_sample=0)


def test_list_samples_become_a_tuple_and_repr_shows_warnings():
    m = Measurement(samples_s=[581.81 * MS, 202.42 * MS, 196.46 * MS])
    assert isinstance(m.samples_s, tuple)
    r = repr(m)
    assert "199.4 ms steady median" in r and "WARNING" in r


def test_imports_without_torch():
    code = ("import sys, truepeak.bench.measurement, truepeak.bench.environment, truepeak.records, "
            "truepeak.bench.telemetry, "
            "truepeak.bench.timing, truepeak.bench.cuda_timer; "
            "assert 'torch' not in sys.modules and 'pynvml' not in sys.modules")
    subprocess.run([sys.executable, "-c", code], check=True)


# -- replicates (STYLE 8.1: merge()) -----------------------------------------------------------------------------------
def test_merge_pools_replicates_of_one_case():
    a = Measurement(samples_s=(1.0 * MS, 1.2 * MS, 1.1 * MS), calls_per_sample=4, warmup_s=3.0, notes=("graph",))
    b = Measurement(samples_s=(0.9 * MS, 1.3 * MS), calls_per_sample=4, warmup_s=2.5, notes=("graph",),
                    telemetry=_throttled_telemetry())
    m = a.merge(b)
    assert m.samples_s == (1.0 * MS, 1.2 * MS, 1.1 * MS, 0.9 * MS, 1.3 * MS)
    assert m.n_samples == 5 and m.n_calls == 20
    assert m.steady_median_s == pytest.approx(1.1 * MS)  # recomputed over the pool
    assert m.warmup_s == 2.5 and m.notes == ("graph",)
    assert m.telemetry == b.telemetry  # a had none
    assert a.merge(b).samples_s == m.samples_s and a.n_samples == 3  # pure: replicates are left as they were


def test_merge_drops_the_second_replicates_warmup_outlier():
    """C12 in the second replicate: its compile-inflated first sample would hide mid-pool, so it is left out."""
    a = Measurement(samples_s=(202.42 * MS, 196.46 * MS))
    b = Measurement(samples_s=(581.81 * MS, 199.0 * MS, 201.0 * MS))
    m = a.merge(b)
    assert m.samples_s == (202.42 * MS, 196.46 * MS, 199.0 * MS, 201.0 * MS)
    assert m.steady_median_s == pytest.approx(200.0 * MS)
    assert any("581.8 ms" in n and "left out" in n for n in m.notes)


def test_merge_keeps_the_first_telemetry_and_says_so():
    tel = _throttled_telemetry()
    m = Measurement(samples_s=(1.0,), telemetry=tel).merge(Measurement(samples_s=(1.0,), telemetry=Telemetry(n_samples=3)))
    assert m.telemetry == tel and any("telemetry is the first replicate's" in n for n in m.notes)


@pytest.mark.parametrize("change", [{"mode": "burst", "burst_gap_s": 0.0015}, {"calls_per_sample": 2},
                                    {"input_kind": "zeros"}, {"graph": True}, {"n_sets": 3}])
def test_merge_refuses_measurements_taken_differently(change):
    a = Measurement(samples_s=(1.0,))
    with pytest.raises(TruepeakError, match="not replicates"):
        a.merge(Measurement(samples_s=(1.0,), **change))
    with pytest.raises(TruepeakError, match="Measurement"):
        a.merge((1.0,))
