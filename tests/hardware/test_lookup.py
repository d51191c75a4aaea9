"""Name lookup: every accepted spelling, and every substring trap from accelerators.md section 8 (trap 9)."""

from __future__ import annotations

import pytest

from truepeak.errors import TruepeakError, UnknownNameError
from truepeak.hardware import get_accelerator, load_catalog, match_device_name
from truepeak.hardware.lookup import compact, tokens

DEVICE_STRINGS = {
    "NVIDIA H200": "h200-sxm",
    "NVIDIA H200 NVL": "h200-nvl",
    "NVIDIA H100 80GB HBM3": "h100-sxm",
    "NVIDIA H100 PCIe": "h100-pcie",
    "NVIDIA H100 NVL": "h100-nvl",
    "NVIDIA A100-SXM4-80GB": "a100-sxm-80gb",
    "NVIDIA A100 80GB PCIe": "a100-pcie-80gb",
    "NVIDIA L40S": "l40s",
    "NVIDIA L4": "l4",
    "NVIDIA GeForce RTX 4090": "rtx-4090",
    "NVIDIA GeForce RTX 5090": "rtx-5090",
    "NVIDIA RTX 6000 Ada Generation": "rtx-6000-ada",
    "NVIDIA RTX PRO 6000 Blackwell Workstation Edition": "rtx-pro-6000-ws",
    "NVIDIA RTX PRO 6000 Blackwell Max-Q Workstation Edition": "rtx-pro-6000-maxq",
    "NVIDIA RTX PRO 6000 Blackwell Server Edition": "rtx-pro-6000-server",
    "NVIDIA B200": "b200",
    "NVIDIA GB200": "gb200",
    "AMD Instinct MI300X": "mi300x",
    "AMD Instinct MI355X": "mi355x",
}


@pytest.mark.parametrize("name,key", DEVICE_STRINGS.items())
def test_exact_device_strings(name, key):
    assert get_accelerator(name).key == key
    assert match_device_name(name).key == key


@pytest.mark.parametrize("name,key", [
    ("h200", "h200-sxm"), ("H200-SXM", "h200-sxm"), ("rtx-pro-6000-ws", "rtx-pro-6000-ws"), ("mi300x", "mi300x"),
    ("MI-300X", "mi300x"), ("5090", "rtx-5090"), ("4090", "rtx-4090"), ("RTX5090", "rtx-5090"),
    ("rtx pro 6000 max-q", "rtx-pro-6000-maxq"), ("RTX PRO 6000 MaxQ", "rtx-pro-6000-maxq"),
    ("rtx pro 6000 server", "rtx-pro-6000-server"), ("h100", "h100-sxm"), ("H100_PCIE", "h100-pcie"),
    ("h100nvl", "h100-nvl"), ("  NVIDIA   h200   nvl ", "h200-nvl"), ("b300", "b300"), ("GB300", "gb300"),
    ("NVIDIA B300", "b300"), ("a100", "a100-sxm-80gb"), ("a100 pcie", "a100-pcie-80gb"), ("l40s", "l40s"),
    ("mi325x", "mi325x"), ("mi350x", "mi350x"), ("h20", "h20"), ("NVIDIA H20", "h20"),
    ("NVIDIA RTX PRO 6000 Blackwell Workstation Edition", "rtx-pro-6000-ws"),
])
def test_aliases_are_case_space_and_hyphen_insensitive(name, key):
    assert get_accelerator(name).key == key


def test_catalog_keys_and_marketing_names_resolve_to_themselves():
    for acc in load_catalog().accelerators:
        assert get_accelerator(acc.key) is acc
        assert get_accelerator(acc.name) is acc
        for device in acc.device_names:
            assert get_accelerator(device) is acc


# ---------------------------------------------------------------------------------------------------------------------
# Substring traps: each pair differs by a token that a substring test would ignore.


def test_gb300_is_not_b300():
    assert get_accelerator("NVIDIA GB300").key == "gb300"
    assert get_accelerator("NVIDIA B300").key == "b300"
    assert get_accelerator("gb300").key != "b300"


def test_gb200_is_not_b200():
    assert get_accelerator("NVIDIA GB200").key == "gb200"
    assert get_accelerator("NVIDIA B200").key == "b200"


def test_h200_nvl_is_not_h200_sxm_and_not_h100():
    acc = get_accelerator("NVIDIA H200 NVL")
    assert acc.key == "h200-nvl"
    assert acc.key not in ("h200-sxm", "h100-nvl", "h100-pcie", "h100-sxm")
    assert acc.dense_flops("bf16") == pytest.approx(835.5e12)  # not the SXM's 989.4


def test_h200_pcie_and_nvl_are_not_h100_pcie():
    assert get_accelerator("H200 PCIe").key == "h200-nvl"
    assert get_accelerator("NVIDIA H200 PCIe 141GB").key == "h200-nvl"
    assert get_accelerator("H100 PCIe").key == "h100-pcie"


def test_rtx_pro_6000_server_is_not_rtx_6000_ada():
    assert get_accelerator("NVIDIA RTX PRO 6000 Blackwell Server Edition").key == "rtx-pro-6000-server"
    assert get_accelerator("NVIDIA RTX 6000 Ada Generation").key == "rtx-6000-ada"
    assert match_device_name("NVIDIA RTX 6000") is None  # Turing Quadro RTX 6000 is not in the catalog


def test_max_q_is_not_workstation():
    maxq = get_accelerator("NVIDIA RTX PRO 6000 Blackwell Max-Q Workstation Edition")
    assert maxq.key == "rtx-pro-6000-maxq"
    assert maxq.dense_flops("nvfp4") < get_accelerator("rtx-pro-6000-ws").dense_flops("nvfp4")


def test_l40s_is_not_l40_or_l4():
    assert get_accelerator("NVIDIA L40S").key == "l40s"
    assert match_device_name("NVIDIA L40") is None
    with pytest.raises(UnknownNameError):
        get_accelerator("NVIDIA L40")


def test_l4_is_not_l40s():
    assert get_accelerator("NVIDIA L4").key == "l4"
    assert get_accelerator("NVIDIA L4").memory_bandwidth.value == pytest.approx(0.3e12)


def test_h100_nvl_vs_pcie_vs_sxm():
    keys = {get_accelerator(n).key for n in ("NVIDIA H100 NVL", "NVIDIA H100 PCIe", "NVIDIA H100 80GB HBM3")}
    assert keys == {"h100-nvl", "h100-pcie", "h100-sxm"}
    bf16 = [get_accelerator(n).dense_flops("bf16") / 1e12 for n in ("NVIDIA H100 NVL", "NVIDIA H100 PCIe",
                                                                     "NVIDIA H100 80GB HBM3")]
    assert bf16 == pytest.approx([835.5, 756, 989.4])


def test_a100_40gb_is_not_the_80gb_entry():
    assert match_device_name("NVIDIA A100-SXM4-40GB") is None
    assert match_device_name("NVIDIA A100-PCIE-40GB") is None


# ---------------------------------------------------------------------------------------------------------------------
# Form-factor suffixes


def test_unlisted_form_factor_suffix_is_accepted_when_unambiguous():
    """cosmos-framework PR #114: the B300 device string carries a suffix the catalog does not list."""
    assert "NVIDIA B300 SXM6 AC" not in get_accelerator("b300").device_names
    assert get_accelerator("NVIDIA B300 SXM6 AC").key == "b300"
    assert get_accelerator("NVIDIA GB300 SXM6 AC").key == "gb300"
    assert get_accelerator("NVIDIA H100 SXM5 80GB").key == "h100-sxm"
    assert get_accelerator("NVIDIA H100 NVL 94GB").key == "h100-nvl"
    assert get_accelerator("AMD Instinct MI300X VF").key == "mi300x"
    assert get_accelerator("PCIe H100").key == "h100-pcie"  # same words, another order


def test_distinguishing_suffixes_are_not_harmless():
    assert match_device_name("NVIDIA H100 PCIe HBM3") is None  # the PCIe part is HBM2e
    assert match_device_name("NVIDIA B300 PCIe") is None
    assert match_device_name("NVIDIA H200 SXM 96GB") is None  # wrong memory size


# ---------------------------------------------------------------------------------------------------------------------
# Unknown names


def test_unknown_name_lists_closest_and_never_defaults():
    with pytest.raises(UnknownNameError) as info:
        get_accelerator("NVIDIA H300")
    message = str(info.value)
    assert "H300" in message and "closest" in message
    assert "NVIDIA H200 SXM" in message
    assert "\n" not in message
    assert isinstance(info.value, TruepeakError)
    assert match_device_name("NVIDIA H300") is None


def test_unknown_gibberish_still_one_line():
    with pytest.raises(UnknownNameError) as info:
        get_accelerator("definitely not a gpu")
    assert "truepeak specs" in str(info.value)


def test_tokens_drop_vendor_words_and_split_on_punctuation():
    assert tokens("NVIDIA A100-SXM4-80GB") == ("a100", "sxm4", "80gb")
    assert compact("NVIDIA RTX PRO 6000 Blackwell Max-Q Workstation Edition") == "rtxpro6000blackwellmaxqworkstation"


def test_no_two_entries_share_a_normalised_name():
    seen = {}
    for acc in load_catalog().accelerators:
        for name in (acc.key, acc.name, *acc.device_names, *acc.aliases):
            other = seen.setdefault(compact(name), acc.key)
            assert other == acc.key, f"{name!r} of {acc.key} collides with {other}"


# ---------------------------------------------------------------------------------------------------------------------
# The rules on a tiny catalog


_TINY = """
schema_version = 1
[architectures.a]
name = "test"
flop_per_clk_per_sm = {}
source = "test"
[[accelerators]]
key = "x100-a"
name = "X100 A"
vendor = "nvidia"
architecture = "a"
aliases = ["x100 sxm4"]
[[accelerators]]
key = "x100-b"
name = "X100 B"
vendor = "nvidia"
architecture = "a"
aliases = ["x100 sxm5"]
"""


def test_ambiguous_form_factor_match_is_an_error_not_a_guess():
    from truepeak.hardware.catalog import Catalog

    tiny = Catalog.from_toml(_TINY)
    assert get_accelerator("x100 sxm4", tiny).key == "x100-a"
    assert match_device_name("X100 SXM4 SXM5", tiny) is None
    with pytest.raises(UnknownNameError, match="ambiguous"):
        get_accelerator("X100 SXM4 SXM5", tiny)


def test_colliding_names_in_the_catalog_are_rejected():
    from truepeak.hardware.catalog import Catalog

    tiny = Catalog.from_toml(_TINY.replace('aliases = ["x100 sxm5"]', 'aliases = ["X100-SXM4"]'))
    with pytest.raises(ValueError, match="collides"):
        match_device_name("x100", tiny)
