"""Rendering rules, pinned with hand-written strings."""

from truepeak.units import fmt_bandwidth, fmt_bytes, fmt_pct, fmt_rate, fmt_size, fmt_tera, fmt_time, rate_unit


def test_rates_print_one_way():
    assert fmt_rate(1978.9e12) == "1978.9"
    assert fmt_rate(989.4e12) == "989.4"
    assert fmt_rate(46.1e12) == "46.1"
    assert fmt_rate(0.805306368e12) == "0.8053"
    assert fmt_rate(None) == "-" and fmt_rate(float("nan")) == "-"


def test_absurd_rates_print_in_scientific_notation():
    # 1e15 TFLOPS printed as "1000000000000000.0", 1e290 as 291 digits; from 1e6 TFLOPS (1e18 FLOP/s) up: 4 digits
    assert fmt_rate(999_999.9e12) == "999999.9"
    assert fmt_rate(1e6 * 1e12) == "1e+06"
    assert fmt_rate(1e15 * 1e12) == "1e+15"
    assert fmt_tera(1e308) == "1e+308" and fmt_tera(1.23456e300) == "1.235e+300"
    assert fmt_tera(989.4) == fmt_rate(989.4e12) == "989.4" and fmt_tera(0.805306368) == "0.8053"
    assert fmt_tera(float("inf")) == "-"


def test_rate_unit_int8_is_tops():
    assert rate_unit("int8") == "TOPS"
    assert rate_unit("bf16") == "TFLOPS"
    assert rate_unit("fp8_e4m3") == "TFLOPS"


def test_percent_bandwidth_time_bytes():
    assert fmt_pct(0.645) == "64.5 %"
    assert fmt_pct(0.00798) == "0.798 %"
    assert fmt_pct(0.424, sign=False) == "42.4"
    assert fmt_bandwidth(4274.4e9) == "4274"
    assert fmt_bandwidth(42.13e9) == "42.1"
    assert fmt_time(1.0995e12 / 989.4e12) == "1.111 ms"  # C07's compute floor
    assert fmt_time(20.1e-6) == "20.1 µs"
    assert fmt_time(2.5) == "2.5 s"
    assert fmt_bytes(14_155_776) == "14.16 MB"  # S1's nvfp4 weight
    assert fmt_bytes(512) == "512 B"
    assert fmt_size(2 * 2**30) == "2 GiB"
    assert fmt_size(62914560) == "60 MiB"  # H200 L2 as the device reports it


def test_to_si_keeps_decimal_inputs_exact():
    from truepeak.units import to_si

    assert 2.039 * 1e12 != 2039000000000.0  # the bug: binary floating point
    assert to_si(2.039, 1e12) == 2039000000000.0
    assert to_si(989.4, 1e12) == 989.4e12
    assert to_si(2617, 1e6) == 2617e6
    assert to_si(96, 1) == 96 and isinstance(to_si(96, 1), int)
