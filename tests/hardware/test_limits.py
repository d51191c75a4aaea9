"""Kernel-config limits checked against the device (cases.md C14: shared memory per block on sm_120)."""

from __future__ import annotations

import pytest

from truepeak.errors import TruepeakError, UnsupportedError
from truepeak.hardware import check_shared_memory, get_accelerator
from truepeak.hardware.detect import cuda_device_info

WS = "NVIDIA RTX PRO 6000 Blackwell Workstation Edition"


@pytest.mark.parametrize("gpu", [WS, "NVIDIA GeForce RTX 5090"])
@pytest.mark.parametrize("need", [111_616, 102_400])
def test_C14_configs_above_101376_bytes_are_rejected_on_sm_120(gpu, need):
    acc = get_accelerator(gpu)
    with pytest.raises(UnsupportedError) as err:
        check_shared_memory(acc, need)
    msg = str(err.value)
    assert f"needs {need:,} B of shared memory per block; {acc.name} allows 101,376 B (sm_120)" in msg
    assert "\n" not in msg


def test_C14_message_names_what_needs_it():
    with pytest.raises(UnsupportedError, match=r"^tile 128x256, 4 stages needs 111,616 B"):
        check_shared_memory(get_accelerator(WS), 111_616, what="tile 128x256, 4 stages")


@pytest.mark.parametrize("gpu", ["h100", "h200", "b200"])
@pytest.mark.parametrize("need", [111_616, 102_400, 232_448])
def test_C14_the_same_configs_fit_sm_90_and_sm_100(gpu, need):
    assert check_shared_memory(get_accelerator(gpu), need) == 232_448


def test_C14_101376_bytes_fit_sm_120_exactly():
    assert check_shared_memory(get_accelerator(WS), 101_376) == 101_376


def test_C14_a_bare_limit():
    assert check_shared_memory(232_448, 111_616) == 232_448
    with pytest.raises(UnsupportedError, match="needs 111,616 B of shared memory per block; the device allows 101,376 B"):
        check_shared_memory(101_376, 111_616)


def test_C14_the_device_reported_limit_wins_over_the_catalog():
    info = cuda_device_info(WS, "12.0", sm_count=188, l2_bytes=128 * 2**20, smem_per_block_bytes=101_376,
                            max_sm_clock_hz=None, memory_bytes=2**36)
    with pytest.raises(UnsupportedError, match=r"allows 101,376 B \(sm_120, reported by the device\)"):
        check_shared_memory(info, 102_400)
    # a device that reports more than the catalog (a future driver) is believed
    roomy = cuda_device_info(WS, "12.0", sm_count=188, l2_bytes=None, smem_per_block_bytes=232_448,
                             max_sm_clock_hz=None, memory_bytes=None)
    assert check_shared_memory(roomy, 111_616) == 232_448
    # no device report: the catalog value for the matched GPU
    quiet = cuda_device_info(WS, "12.0", sm_count=188, l2_bytes=None, smem_per_block_bytes=None,
                             max_sm_clock_hz=None, memory_bytes=None)
    with pytest.raises(UnsupportedError, match="101,376 B"):
        check_shared_memory(quiet, 111_616)


def test_C14_unknown_limit_is_not_checked():
    info = cuda_device_info("NVIDIA Imaginary X1", "9.0", sm_count=100, l2_bytes=None, smem_per_block_bytes=None,
                            max_sm_clock_hz=None, memory_bytes=None)
    assert check_shared_memory(info, 111_616) is None


@pytest.mark.parametrize("bad", [0, -1, 1.5, True, "100"])
def test_C14_needed_bytes_must_be_a_positive_whole_number(bad):
    with pytest.raises(TruepeakError):
        check_shared_memory(get_accelerator(WS), bad)


def test_check_shared_memory_accepts_a_name():
    """Adversarial test 6: check_shared_memory("rtx-5090", 102400) raised TypeError."""
    from truepeak.errors import UnknownNameError, UnsupportedError
    from truepeak.hardware import check_shared_memory

    with pytest.raises(UnsupportedError, match="102,400 B .*allows 101,376 B"):
        check_shared_memory("rtx-5090", 102400)
    assert check_shared_memory("h200", 102400) == 232448
    with pytest.raises(UnknownNameError):
        check_shared_memory("no-such-gpu", 1024)
