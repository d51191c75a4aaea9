"""What ``truepeak comm`` measures: message sizes, ops and the per-case element counts (pure Python).

Sizes are nccl-tests total sizes S (:func:`truepeak.comm.model.total_bytes`) with binary prefixes, as nccl-tests'
``-b 1K -e 1G -f 2`` (K = 1024 B): ``"1K:1G"`` is every power of two from 1 KiB to 1 GiB (21 sizes), ``"1K:1G:4"``
steps by 4, ``"12K,96K,768K"`` is a list (GLM-5 decode allreduce sizes: 6144 × 2 B × 1, 8, 64 tokens).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from truepeak.comm.model import ALIASES, MEASURED_OPS, canonical_op, count_for_bytes, dtype_bytes, total_bytes
from truepeak.errors import TruepeakError, UnknownNameError, closest

_UNITS = {"": 1, "b": 1, "k": 2**10, "kib": 2**10, "m": 2**20, "mib": 2**20, "g": 2**30, "gib": 2**30}
_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([a-zA-Z]*)\s*$")
#: The largest message accepted (per buffer; 16 GiB).
MAX_BYTES = 16 * 2**30
#: At most this many sizes in one sweep.
MAX_SIZES = 64

SIZES_HELP = ("nccl-tests total sizes with binary prefixes (K = 1024 B): START:END (powers of two, like nccl-tests "
              "-b START -e END -f 2), START:END:FACTOR, or a comma list such as 12K,96K,768K")


def parse_size(text: str) -> int:
    """``"1K"`` → 1024, ``"1G"`` → 2**30, ``"4096"`` → 4096 (K/KiB, M/MiB, G/GiB are binary, as nccl-tests).

    Raises:
        TruepeakError: not a size, or outside 1 B .. 16 GiB.
    """
    m = _SIZE.match(str(text))
    unit = m.group(2).lower() if m else None
    if m is None or unit not in _UNITS:
        raise TruepeakError(f"bad message size {text!r}; use bytes or K/M/G (binary, K = 1024), e.g. 1K, 64K, 1G")
    value = float(m.group(1)) * _UNITS[unit]
    if value != int(value) or not 1 <= value <= MAX_BYTES:
        raise TruepeakError(f"message size {text!r} must be a whole number of bytes from 1 B to 16G")
    return int(value)


def parse_sizes(text: str) -> list[int]:
    """Message sizes in bytes from ``--sizes`` (see :data:`SIZES_HELP`), ascending, without duplicates.

    Raises:
        TruepeakError: a bad size, END < START, FACTOR < 2, or more than :data:`MAX_SIZES` sizes.
    """
    text = str(text).strip()
    if not text:
        raise TruepeakError(f"--sizes is empty; give {SIZES_HELP}")
    if ":" in text:
        parts = text.split(":")
        if len(parts) not in (2, 3):
            raise TruepeakError(f"bad --sizes {text!r}; give {SIZES_HELP}")
        start, end = parse_size(parts[0]), parse_size(parts[1])
        factor = 2
        if len(parts) == 3:
            if not parts[2].strip().isdigit() or int(parts[2]) < 2:
                raise TruepeakError(f"bad size step factor {parts[2]!r} in --sizes {text!r}; give a whole number >= 2")
            factor = int(parts[2])
        if end < start:
            raise TruepeakError(f"--sizes {text!r}: END {parts[1]} is below START {parts[0]}")
        sizes, s = [], start
        while s <= end:
            sizes.append(s)
            s *= factor
    else:
        sizes = sorted({parse_size(p) for p in text.split(",") if p.strip()})
    if len(sizes) > MAX_SIZES:
        raise TruepeakError(f"--sizes {text!r} gives {len(sizes)} sizes; at most {MAX_SIZES}")
    return sizes


def parse_ops(text: str | None) -> list[str]:
    """Canonical op names from ``--ops`` (comma list; aliases such as allreduce, a2a accepted); default
    :data:`MEASURED_OPS`.

    Raises:
        UnknownNameError: an unknown op (lists the valid ones). TruepeakError: an op truepeak comm cannot measure.
    """
    if text is None or not str(text).strip():
        return list(MEASURED_OPS)
    out: list[str] = []
    for part in str(text).split(","):
        if not part.strip():
            continue
        try:
            op = canonical_op(part)
        except UnknownNameError:
            near = closest(part.strip().lower(), [*MEASURED_OPS, *(a for a, o in ALIASES.items() if o in MEASURED_OPS)])
            hint = f" (did you mean {near[0]}?)" if near else ""
            raise UnknownNameError(f"unknown collective {part.strip()!r} in --ops{hint}; valid ops: "
                                   f"{', '.join(MEASURED_OPS)} (aliases such as allreduce, ar, ag, rs, a2a)") from None
        if op not in MEASURED_OPS:
            raise TruepeakError(f"truepeak comm measures {', '.join(MEASURED_OPS)}; {op} is not measured "
                                f"(its busbw factor is 1: see truepeak.comm.model)")
        if op not in out:
            out.append(op)
    if not out:
        raise TruepeakError(f"--ops is empty; valid ops: {', '.join(MEASURED_OPS)}")
    return out


@dataclass(frozen=True)
class Case:
    """One measurement: ``op`` on ``n_ranks`` with per-rank element ``count`` (nccl-tests' count) and total size
    ``bytes`` (nccl-tests S), from the ``requested_bytes`` the user asked for."""

    op: str
    count: int
    bytes: int
    requested_bytes: int
    dtype: str
    n_ranks: int

    def workload(self) -> dict:
        """The record's workload: ``{op, bytes, count, dtype, n_ranks}``."""
        return {"op": self.op, "bytes": self.bytes, "count": self.count, "dtype": self.dtype, "n_ranks": self.n_ranks}


def plan_cases(ops: list[str], sizes: list[int], n_ranks: int, dtype: str) -> tuple[list[Case], list[str]]:
    """The cases of a sweep (op-major, sizes ascending) and notes on sizes that had to be rounded.

    A size that is not a whole number of elements per rank (``dtype_bytes`` for all_reduce; ``n · dtype_bytes`` for
    all_gather, reduce_scatter and all_to_all, whose S is n per-rank pieces) is rounded DOWN to the nearest such size
    (at least one element per rank) and a note says so; sizes that round to the same S are measured once.

    Raises:
        TruepeakError: n_ranks < 2 (a collective on one rank moves no data) or an unknown dtype.
    """
    if n_ranks < 2:
        raise TruepeakError(f"a collective needs at least 2 ranks, got {n_ranks}")
    b = dtype_bytes(dtype)
    cases: list[Case] = []
    notes: list[str] = []
    for op in ops:
        seen: set[int] = set()
        rounded: list[str] = []
        for s in sizes:
            count, total = count_for_bytes(op, s, n_ranks, b)
            if total != s:
                rounded.append(f"{s} → {total}")
            if total in seen:
                continue
            seen.add(total)
            cases.append(Case(op, count, total, s, dtype, n_ranks))
        if rounded:
            unit = total_bytes(op, 1, n_ranks, b)
            notes.append(f"{op}: sizes must be multiples of {unit} B ({'' if unit == b else f'{n_ranks} ranks × '}"
                         f"{b} B {dtype}); rounded {', '.join(rounded)} B")
    return cases, notes
