"""The flags of a plan (truepeak.moe.plan.flags): more than two TP GPUs over PCIe only (C20)."""

from __future__ import annotations

import pytest

from truepeak.moe.findings import PcieCommunicationBound
from truepeak.moe.plan import MAJOR_SHARE, SMALL_BATCH, pcie_flag, plan


def test_c20_flag_only_for_tp_above_two_on_pcie(glm5, ws, h200, dsv3):
    def flags(p):
        return [n for n in p.notes if isinstance(n, PcieCommunicationBound)]

    assert [f.tp_group for f in flags(plan(glm5, ws, "tp8", 1, weights="nvfp4"))] == [8]
    assert flags(plan(glm5, ws, "tp2pp4", 1, weights="nvfp4")) == []
    assert flags(plan(dsv3, h200, "tp8", 1, weights="fp8")) == []


def test_c20_flag_at_a_large_batch_is_for_bus_bandwidth(glm5, ws):
    # batch 512 > SMALL_BATCH (64): flagged only because collectives are at least MAJOR_SHARE (25 %) of the step
    p = plan(glm5, ws, "tp8", 512, weights="nvfp4")
    flag = next(n for n in p.notes if isinstance(n, PcieCommunicationBound))
    comm = sum(op.total_s for op in p.ops if op.group == "communication")
    assert (flag.tp_group, flag.batch, flag.small_batch) == (8, 512, False)
    assert flag.time_s == pytest.approx(comm) and comm / p.step_s >= MAJOR_SHARE and 512 > SMALL_BATCH
    assert pcie_flag(p.layout, "nvlink", 512, p.ops, p.step_s) is None          # NVLink: no flag
