"""The interconnect of a plan's collectives (truepeak.moe.plan.interconnect) and its reasons."""

from __future__ import annotations

from truepeak.hardware.lookup import get_accelerator
from truepeak.moe.plan import interconnect_of
from truepeak.report.plan import interconnect_text


def test_interconnect_rule(ws, h200):
    assert (interconnect_of(ws, 8).kind, interconnect_of(ws, 8).basis) == ("pcie", "catalog")
    assert interconnect_of(h200, 8).kind == "nvlink"
    h100 = get_accelerator("NVIDIA H100 PCIe")
    assert interconnect_of(h100, 2).kind == "nvlink"                                 # NVLink bridge: 2 GPUs
    four = interconnect_of(h100, 4)
    assert (four.kind, four.basis, four.gpus) == ("pcie", "bridge_beyond", 4)
    assert interconnect_text(four) == ("catalog: NVLink bridge 600 GB/s (2 GPUs); PCIe 5.0 x16 (bridge links 2 GPUs; "
                                       "4 talk over PCIe)")
    given = interconnect_of(h200, 8, "pcie")
    assert (given.kind, given.basis, interconnect_text(given)) == ("pcie", "given", "given")
    nvl = interconnect_of(get_accelerator("h200-nvl"), 8)
    assert (nvl.kind, nvl.basis) == ("pcie", "nvl_beyond_bridge")
    assert interconnect_text(nvl) == "no interconnect in the catalog; NVL bridges link at most 4 GPUs, the rest is PCIe"
    mi = interconnect_of(get_accelerator("mi300x"), 8)
    assert (mi.kind, mi.basis) == ("nvlink", "catalog_xgmi")
    assert interconnect_text(mi).endswith("(XGMI treated as an NVLink-class fabric)")
