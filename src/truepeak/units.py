"""Rendering numbers: the one place where SI values (FLOP/s, B/s, s, B, fractions) become text.

Everything inside truepeak is SI (seconds, bytes, FLOP, Hz); tables, messages and Markdown call these functions so
that a number prints the same way everywhere. Decimal prefixes (TFLOPS = 1e12 FLOP/s, GB/s = 1e9 B/s), as vendors and
nccl-tests use; binary sizes (MiB, GiB) only for buffer sizes, labelled as such.
"""

from __future__ import annotations

import math
from decimal import Decimal

TERA = 1e12
GIGA = 1e9
DASH = "-"

#: The footer every table and report carries.
UNITS_FOOTER = ("TFLOPS = 1e12 FLOP/s (TOPS for int8), GB/s = 1e9 B/s (decimal); "
                "efficiency is against the DENSE peak, never the 2:4-sparse one")


def _bad(x: float | None) -> bool:
    return x is None or not isinstance(x, (int, float)) or not math.isfinite(x)


def rate_unit(rate: str) -> str:
    """``"TOPS"`` for the int8 rate (integer operations), ``"TFLOPS"`` otherwise.

    Args:
        rate: a catalog rate key (``"int8"``, ``"bf16"``...) or a format name (``"int8"``, ``"fp8_e4m3"``...).
    """
    from truepeak.formats import RATES, get_format

    key = rate if rate in RATES else get_format(rate).rate
    return "TOPS" if key == "int8" else "TFLOPS"


#: From this many TFLOPS (1e18 FLOP/s, far above any one device) up, a rate prints in scientific notation.
SCIENTIFIC_TERA = 1e6


def fmt_tera(x: float | None) -> str:
    """A throughput already in units of 1e12 (TFLOPS, TOPS) as :func:`fmt_rate` prints it: one decimal from 100 up
    (``1978.9``), four significant digits below (``0.805``), four significant digits in scientific notation from
    :data:`SCIENTIFIC_TERA` up (``1e+15``, ``1e+308``: an absurd input prints as typed, not as 300 digits).
    ``None``/non-finite -> ``"-"``."""
    if _bad(x):
        return DASH
    if abs(x) >= SCIENTIFIC_TERA:
        return f"{x:.4g}"
    return f"{x:.1f}" if abs(x) >= 100 else f"{x:.4g}"


def fmt_rate(flop_per_s: float | None) -> str:
    """A throughput in FLOP/s as a number of TFLOPS: one decimal from 100 up (``1978.9``, ``989.4``), four
    significant digits below (``46.1``, ``0.805``), scientific notation from 1e6 TFLOPS up (:func:`fmt_tera`).
    ``None``/non-finite -> ``"-"``."""
    if _bad(flop_per_s):
        return DASH
    return fmt_tera(flop_per_s / TERA)


def fmt_bandwidth(bytes_per_s: float | None) -> str:
    """A bandwidth in B/s as a number of GB/s (1e9): whole numbers from 100 up (``4274``), three significant digits
    below (``42.1``)."""
    if _bad(bytes_per_s):
        return DASH
    x = bytes_per_s / GIGA
    return f"{x:.0f}" if abs(x) >= 100 else f"{x:.3g}"


def fmt_pct(fraction: float | None, sign: bool = True, *, digits: int = 3, decimals: int | None = None) -> str:
    """A fraction as a percentage: one decimal from 10 % up (``"64.5 %"``), ``digits`` (3) significant digits below
    (``"0.798 %"``; ``digits=2``: ``"3.2 %"``). ``decimals`` fixes the decimals at every size instead (``decimals=1``:
    ``"0.0 %"``, ``"7.3 %"``, ``"100.0 %"``: shares that are read side by side). ``sign=False`` drops the `` %``
    (table cells under a "%" header). ``None``/non-finite -> ``"-"``."""
    if _bad(fraction):
        return DASH
    p = 100 * fraction
    if decimals is not None:
        text = f"{p:.{decimals}f}"
    else:
        text = f"{p:.1f}" if abs(p) >= 10 else f"{p:.{digits}g}"
    return f"{text} %" if sign else text


#: Time units by name, in seconds.
TIME_UNITS = {"s": 1.0, "ms": 1e-3, "µs": 1e-6, "ns": 1e-9}


def fmt_time(seconds: float | None, unit: str | None = None, digits: int = 4) -> str:
    """Seconds with a unit, ``digits`` (4) significant digits: ``1.111 ms``, ``20.1 µs``. The unit is chosen from the
    magnitude, or fixed by ``unit`` (a :data:`TIME_UNITS` key: ``fmt_time(0.263e-3, "ms")`` -> ``"0.263 ms"``, for
    sentences that compare times in one unit). ``None``/non-finite -> ``"-"``."""
    if _bad(seconds):
        return DASH
    if unit is not None:
        return f"{seconds / TIME_UNITS[unit]:.{digits}g} {unit}"
    for name, scale in (("s", 1.0), ("ms", 1e-3), ("µs", 1e-6)):
        if abs(seconds) >= scale:
            return f"{seconds / scale:.{digits}g} {name}"
    return f"{seconds / 1e-9:.{digits}g} ns"


def fmt_time_in(seconds: float | None, scale: float) -> str:
    """Seconds as a number of ``scale``-second units (1e-6 for a µs column), four significant digits as
    :func:`fmt_time` (whole numbers from 10000 up, never an exponent): ``21636``, ``6.711``, ``12.35``, ``0.5``. For
    table columns whose one unit is printed in the header (as torch.utils.benchmark's ``Compare`` prints one unit per
    table)."""
    if _bad(seconds):
        return DASH
    v = seconds / scale
    return f"{v:.0f}" if abs(v) >= 9999.5 else f"{v:.4g}"


#: Decimal byte units by name.
BYTE_UNITS = {"GB": 1e9, "MB": 1e6, "kB": 1e3, "B": 1.0}


def fmt_bytes(nbytes: float | None, unit: str | None = None) -> str:
    """Bytes with a decimal prefix (kB, MB, GB: 1e3, 1e6, 1e9), four significant digits: ``14.16 MB``; ``unit`` (a
    :data:`BYTE_UNITS` key) fixes the prefix: ``fmt_bytes(0.4498e9, "GB")`` -> ``"0.4498 GB"`` (memory per GPU, read
    against a capacity in GB). ``None``/non-finite -> ``"-"``."""
    if _bad(nbytes):
        return DASH
    if unit is not None:
        return f"{nbytes / BYTE_UNITS[unit]:.4g} {unit}"
    for name, scale in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if abs(nbytes) >= scale:
            return f"{nbytes / scale:.4g} {name}"
    return f"{nbytes:.0f} B"


def fmt_size(nbytes: float | None) -> str:
    """A buffer size with a binary prefix (KiB, MiB, GiB: 2**10, 2**20, 2**30): ``2 GiB``, ``60 MiB``."""
    if _bad(nbytes):
        return DASH
    for unit, scale in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if abs(nbytes) >= scale:
            return f"{nbytes / scale:.4g} {unit}"
    return f"{nbytes:.0f} B"


def fmt_number(x: float | None, digits: int = 4, *, decimals: int | None = None) -> str:
    """A plain number (a count, a ratio, FLOP per byte): a whole number prints whole (``16``, ``312500``, ``4096``),
    any other with ``digits`` (4) significant digits (``0.03125``; ``digits=3``: ``28.2``); ``decimals`` fixes the
    decimals instead (``decimals=0``: ``1125``). ``None``/non-finite -> ``"-"``."""
    if _bad(x):
        return DASH
    if decimals is not None:
        return f"{x:.{decimals}f}"
    return f"{x:.0f}" if float(x).is_integer() else f"{x:.{digits}g}"


def fmt_tokens_per_s(x: float | None) -> str:
    """Tokens per second: whole numbers from 100 up (``17851``), four significant digits below (``36.84``).
    ``None``/non-finite -> ``"-"``."""
    if _bad(x):
        return DASH
    return f"{x:.0f}" if abs(x) >= 100 else f"{x:.4g}"


def to_si(value: int | float, factor: int | float) -> int | float:
    """``value`` in a human unit times ``factor`` (1e12 for TB/s or TFLOPS, 1e6 for MHz), computed in decimal so a
    decimal input stays exact: ``to_si(2.039, 1e12) == 2039000000000.0`` (binary floating point gives
    2039000000000.0002). Two ints give an int; otherwise the float nearest the exact decimal product."""
    if isinstance(value, int) and isinstance(factor, int):
        return value * factor
    return float(Decimal(repr(float(value))) * Decimal(repr(float(factor))))
