"""Kernel-configuration limits checked against the device (pure Python; no torch).

:func:`check_shared_memory` rejects a kernel config that needs more shared memory per block than the GPU allows
(docs/method.md, 'Shared memory per block': sm_120 / sm_121 parts, RTX 5090, RTX PRO 6000, GB10, allow 101,376 B opt-in
per block, where sm_90 / sm_100 allow 232,448 B). The device-reported limit
(``cudaDevAttrMaxSharedMemoryPerBlockOptin``, read by :func:`truepeak.hardware.detect.detect` into
``DeviceInfo.smem_per_block_bytes``) wins over the catalog.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Union

from truepeak.errors import UnsupportedError
from truepeak.formats import check_positive_int
from truepeak.hardware.catalog import Accelerator

if TYPE_CHECKING:  # pragma: no cover
    from truepeak.hardware.detect import DeviceInfo

SmemLimit = Union[Accelerator, "DeviceInfo", int, str]


def _arch(compute_capability: str | None) -> str:
    """``"12.0"`` -> ``"sm_120"``; empty for an unknown one."""
    if not compute_capability or "." not in compute_capability:
        return ""
    major, minor = compute_capability.split(".", 1)
    return f"sm_{major}{minor}"


def _limit(acc_or_limit: SmemLimit) -> tuple[int | None, str, str]:
    """``(limit in bytes or None, who allows it, how it is known)`` for an accelerator, a device or a bare limit."""
    if isinstance(acc_or_limit, bool):
        raise TypeError("the shared-memory limit must be an Accelerator, a DeviceInfo or a number of bytes, not a bool")
    if isinstance(acc_or_limit, int):
        return check_positive_int("shared memory per block limit", acc_or_limit), "the device", ""
    if isinstance(acc_or_limit, str):  # a name: "rtx-5090", "h200", a device string
        from truepeak.hardware.lookup import get_accelerator

        return _limit(get_accelerator(acc_or_limit))
    if isinstance(acc_or_limit, Accelerator):
        s = acc_or_limit.smem_per_block_bytes
        return (None if s is None or not s.value else int(s.value)), acc_or_limit.name, _arch(
            acc_or_limit.compute_capability)
    # a DeviceInfo (duck-typed, so this module does not import detect): its own report first, then its catalog entry
    reported = getattr(acc_or_limit, "smem_per_block_bytes", None)
    acc = getattr(acc_or_limit, "accelerator", None)
    arch = _arch(getattr(acc_or_limit, "compute_capability", None))
    name = getattr(acc_or_limit, "name", None) or (acc.name if acc is not None else "the device")
    if reported:
        return int(reported), name, ", ".join(x for x in (arch, "reported by the device") if x)
    if isinstance(acc, Accelerator):
        limit, _, acc_arch = _limit(acc)
        return limit, name, arch or acc_arch
    raise TypeError(f"cannot read a shared-memory limit from {acc_or_limit!r}")


def check_shared_memory(acc_or_limit: SmemLimit, needed_bytes: int, what: str = "kernel config") -> int | None:
    """Reject a kernel config that needs more shared memory per block than the GPU allows (docs/method.md,
    'Shared memory per block').

    Args:
        acc_or_limit: an :class:`~truepeak.hardware.catalog.Accelerator` (its catalog ``smem_per_block_bytes``), a
            name :func:`truepeak.hardware.get_accelerator` resolves (``"rtx-5090"``), a
            :class:`~truepeak.hardware.detect.DeviceInfo` (the limit the device reports, else its catalog entry's), or
            the limit itself in bytes.
        needed_bytes: shared memory one block of the config needs, bytes.
        what: the config in words, starting the message (``"tile 128x256, 4 stages"``).

    Returns:
        The limit checked against, bytes; None when no limit is known (an unknown GPU without a device report): the
        config is then not checked.

    Raises:
        UnsupportedError: ``needed_bytes`` exceeds the limit, one line: "kernel config needs 111,616 B of shared memory
            per block; NVIDIA RTX PRO 6000 Blackwell Workstation Edition allows 101,376 B (sm_120)".
        TruepeakError: ``needed_bytes`` is not a positive whole number.
        UnknownNameError: a name no catalog entry has.
    """
    need = check_positive_int("needed shared memory per block", needed_bytes)
    limit, who, how = _limit(acc_or_limit)
    if limit is None:
        return None
    if need > limit:
        raise UnsupportedError(f"{what} needs {need:,} B of shared memory per block; {who} allows {limit:,} B"
                               + (f" ({how})" if how else ""))
    return limit
