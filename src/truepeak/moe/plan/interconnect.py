"""The interconnect of a plan's collectives: NVLink or PCIe, and why (:func:`interconnect_of`)."""

from __future__ import annotations

from dataclasses import dataclass

from truepeak.errors import TruepeakError


@dataclass(frozen=True)
class InterconnectChoice:
    """The interconnect of a plan's collectives and why it was taken (:func:`interconnect_of`).

    Attributes:
        kind: ``"nvlink"`` or ``"pcie"``.
        basis: why: ``"given"`` (the override); ``"catalog"`` (the catalog's interconnect text says so);
            ``"catalog_xgmi"`` (AMD Infinity Fabric, treated as an NVLink-class fabric); ``"bridge_beyond"`` (an
            NVLink bridge links 2 GPUs, more talk over PCIe); with no catalog entry: ``"board_without_nvlink"``
            (GeForce, RTX and L-series boards), ``"nvl_bridge"`` (H100/H200 NVL, bridged up to 4 GPUs),
            ``"nvl_beyond_bridge"`` (more than 4 NVL GPUs), ``"baseboard_assumed"`` (an NVLink/NVSwitch baseboard).
        catalog: the catalog's interconnect text ("" when it has none). device: the accelerator's name.
        gpus: the GPUs that run the collectives together.
    """

    kind: str
    basis: str
    catalog: str = ""
    device: str = ""
    gpus: int = 1

    def to_dict(self) -> dict:
        return {"kind": self.kind, "basis": self.basis, "catalog": self.catalog, "device": self.device,
                "gpus": self.gpus}


def interconnect_of(acc, n_gpus: int, override: str | None = None) -> InterconnectChoice:
    """The interconnect (:class:`InterconnectChoice`: ``"nvlink"`` or ``"pcie"``, and why) of collectives among
    ``n_gpus`` GPUs of ``acc`` in one box (the planner passes the GPUs of one pipeline stage, which run the TP / EP
    collectives together).

    Rule (the catalog's ``interconnect`` text, else the device family): "no NVLink" → pcie; an "NVLink bridge" links
    2 GPUs only → nvlink for 2, pcie beyond; NVLink / NVSwitch / AMD Infinity Fabric (XGMI) → nvlink (an all-to-all
    GPU fabric); no entry: GeForce, RTX and L-series boards → pcie, H100/H200 NVL → nvlink up to 4 (bridged), else
    nvlink. ``override`` (``"nvlink"``/``"pcie"``) wins.

    Raises:
        TruepeakError: an ``override`` other than nvlink or pcie.
    """
    if override:
        o = override.strip().lower()
        if o not in ("nvlink", "pcie"):
            raise TruepeakError(f"interconnect {override!r} is not one of nvlink, pcie")
        return InterconnectChoice(o, "given", device=acc.name, gpus=n_gpus)
    text = (acc.interconnect.value if acc.interconnect is not None else "") or ""
    low = text.lower()

    def choice(kind: str, basis: str) -> InterconnectChoice:
        return InterconnectChoice(kind, basis, text, acc.name, n_gpus)

    if "no nvlink" in low:
        return choice("pcie", "catalog")
    if "nvlink bridge" in low:
        return choice("nvlink", "catalog") if n_gpus <= 2 else choice("pcie", "bridge_beyond")
    if "nvlink" in low or "infinity fabric" in low or "xgmi" in low:
        return choice("nvlink", "catalog_xgmi" if "xgmi" in low else "catalog")
    name = acc.name.lower()
    if any(s in name for s in ("geforce", "rtx", " l40", " l4")):
        return choice("pcie", "board_without_nvlink")
    if " nvl" in name:
        return choice("nvlink", "nvl_bridge") if n_gpus <= 4 else choice("pcie", "nvl_beyond_bridge")
    return choice("nvlink", "baseboard_assumed")
