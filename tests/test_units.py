"""Rendering rules, pinned with hand-written strings."""

from truepeak.units import (fmt_bandwidth, fmt_bytes, fmt_number, fmt_pct, fmt_rate, fmt_size, fmt_tera, fmt_time,
                            fmt_tokens_per_s, rate_unit)


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


def test_fixed_units_digits_and_decimals():
    # one unit for every time of a sentence, three significant digits: 4.039e-3 s -> "4.04 ms", 25.5e-6 s -> "25.5 µs"
    assert fmt_time(4.0386e-3, "ms", 3) == "4.04 ms" and fmt_time(0.263e-3, "ms", 3) == "0.263 ms"
    assert fmt_time(25.52e-6, "µs", 3) == "25.5 µs" and fmt_time(6.7452e-3, "ms") == "6.745 ms"
    assert fmt_time(None, "ms") == "-"
    # shares: one decimal from 10 % up, then 2 significant digits; or one decimal at every size (0 is "0.0 %")
    assert fmt_pct(0.5993, digits=2) == "59.9 %" and fmt_pct(0.03172, digits=2) == "3.2 %"
    assert fmt_pct(0.0, decimals=1) == "0.0 %" and fmt_pct(0.998, decimals=1) == "99.8 %"
    assert fmt_pct(1.0, decimals=1) == "100.0 %" and fmt_pct(0.0734, decimals=1, sign=False) == "7.3"
    # a fixed decimal prefix: 449,839,104 B of KV cache -> "0.4498 GB" next to a capacity of "96 GB"
    assert fmt_bytes(449_839_104, "GB") == "0.4498 GB" and fmt_bytes(96e9, "GB") == "96 GB"
    assert fmt_bytes(None, "GB") == "-"


def test_plain_numbers_and_tokens_per_second():
    assert fmt_number(16.0) == "16" and fmt_number(1 * 8 / 256) == "0.03125"
    assert fmt_number(312_500.0) == "312500" and fmt_number(4096, 3) == "4096"     # whole: never "3.125e+05"
    assert fmt_number(28.19, 3) == "28.2" and fmt_number(0.5625, 6) == "0.5625"
    assert fmt_number(2015.2e12 / 1.792e12, decimals=0) == "1125"   # the ridge of an RTX PRO 6000 in fp4
    assert fmt_number(float("inf")) == "-"
    assert fmt_tokens_per_s(17851.3) == "17851" and fmt_tokens_per_s(148.26) == "148"
    assert fmt_tokens_per_s(18.533) == "18.53" and fmt_tokens_per_s(None) == "-"


def test_to_si_keeps_decimal_inputs_exact():
    from truepeak.units import to_si

    assert 2.039 * 1e12 != 2039000000000.0  # the bug: binary floating point
    assert to_si(2.039, 1e12) == 2039000000000.0
    assert to_si(989.4, 1e12) == 989.4e12
    assert to_si(2617, 1e6) == 2617e6
    assert to_si(96, 1) == 96 and isinstance(to_si(96, 1), int)
