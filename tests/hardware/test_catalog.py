"""Invariants over the whole spec catalog, and the hand-computed cases (cases.md C01-C04, C14, S1).

Efficiency in these tests is simply measured / dense peak (the roofline module is tested elsewhere). Expected values
come from ../shared/cases.md and ../shared/data/accelerators.md.
"""

from __future__ import annotations

import re

import pytest

from truepeak.hardware import check_claim, get_accelerator, load_catalog
from truepeak.hardware.catalog import SPARSE_RATIO_TOLERANCE, Catalog, Sourced, sparse_is_twice_dense

TERA = 1e12
CATALOG = load_catalog()
ACCS = CATALOG.accelerators
PEAKS = [(a, p) for a in ACCS for p in a.peaks]


def _id(ap) -> str:
    a, p = ap
    return f"{a.key}-{p.rate}@{p.accumulate}"


def _pct(measured_tflops: float, acc_name: str, fmt: str, accumulate: str | None = None) -> float:
    """Efficiency in percent: measured / dense peak (DESIGN.md: always against DENSE peaks). Tests compare it rounded
    to one decimal, as cases.md states it."""
    return 100 * measured_tflops * TERA / get_accelerator(acc_name).dense_flops(fmt, accumulate)


# ----------------------------------------------------------------------------------------------------------------------
# The catalog as a whole


def test_catalog_has_the_required_entries():
    keys = {a.key for a in ACCS}
    assert keys >= {
        "rtx-pro-6000-ws", "rtx-pro-6000-maxq", "rtx-pro-6000-server", "rtx-5090", "rtx-4090", "rtx-6000-ada",
        "b200", "b300", "gb200", "gb300", "h100-sxm", "h100-pcie", "h100-nvl", "h200-sxm", "h200-nvl", "h20",
        "l40s", "l4", "a100-sxm-80gb", "a100-pcie-80gb", "mi300x", "mi325x", "mi350x", "mi355x",
    }


@pytest.mark.parametrize("ap", PEAKS, ids=_id)
def test_sparse_is_twice_dense_within_vendor_rounding(ap):
    """C02: where the vendor lists sparsity, sparse = 2 x dense within 1.5 % (L40S 733 / 362, MI355X 10100 / 5000),
    except on a peak whose ``sparse_ratio_note`` says why not (B300 FP4: dense raised without the sparse rate)."""
    _, p = ap
    assert SPARSE_RATIO_TOLERANCE == 0.015
    if p.sparse is not None and not p.sparse_ratio_note:
        assert sparse_is_twice_dense(p.dense, p.sparse)


@pytest.mark.parametrize("ap", [ap for ap in PEAKS if ap[1].sparse_ratio_note], ids=_id)
def test_sparse_ratio_note_only_where_sparse_is_not_twice_dense(ap):
    """The exemption is explicit and never decorative: a peak carrying it has a published sparse value that is NOT
    2 x dense, but still above dense."""
    _, p = ap
    assert p.sparse is not None
    assert not sparse_is_twice_dense(p.dense, p.sparse)
    assert p.sparse > p.dense


@pytest.mark.parametrize("ap", PEAKS, ids=_id)
def test_peak_reproduces_from_flop_per_clk_sms_and_clock_unless_why_not(ap):
    """peak = FLOP/clk/SM x SMs x clock (accelerators.md section 5) within 2 %; `why_not` only where it cannot."""
    a, p = ap
    per_clk = a.peak_flop_per_clk(p)  # a format-specific peak (formats = [...]) may carry its own FLOP/clk/SM
    clock = a.clock_basis_hz(p)
    sms = a.sm_count.value if a.sm_count else None
    computed = per_clk * sms * clock if (per_clk and sms and clock) else None
    reproduces = computed is not None and abs(computed / p.dense - 1) <= 0.02
    if p.why_not:
        assert not reproduces, f"{a.key} {p.rate}: why_not is set but {computed / TERA:.1f} TF reproduces {p.dense / TERA}"
    else:
        assert computed is not None, f"{a.key} {p.rate}: cannot be checked (no FLOP/clk/SM, SMs or clock) and no why_not"
        assert reproduces, f"{a.key} {p.rate}: {computed / TERA:.1f} TF computed vs {p.dense / TERA} TF stored"


def test_every_nvidia_peak_is_checked_or_explained():
    unexplained = [_id((a, p)) for a, p in PEAKS if a.vendor == "nvidia" and p.why_not == "" and
                   a.peak_flop_per_clk(p) is None]
    assert unexplained == []


@pytest.mark.parametrize("acc", ACCS, ids=lambda a: a.key)
def test_C02_no_dense_value_equals_a_published_sparse_headline(acc):
    """C02: each sparse headline is recognised as sparse, and no dense peak of its format and accumulator equals it.

    (On GeForce the dense fp16-ACCUMULATE rate legitimately equals the fp32-accumulate sparse figure: 4090 fp8 660.6.
    The accumulators are different peaks; the default fp32-accumulate one is what the claim is checked against.)
    """
    for text in acc.sparse_headlines:
        v = check_claim(acc, text)
        if v.kind == "ambiguous":  # GeForce: also the dense fp16-accumulate rate; both readings are listed
            assert v.rate is not None and v.accumulate == "fp32", f"{acc.key}: {text!r}: {v.explanation}"
            assert any(a.startswith("2:4-sparse") for a in v.alternatives)
            assert all("fp16 accumulate" in a for a in v.alternatives if a.startswith("dense"))
        else:
            assert v.kind == "sparse", f"{acc.key}: {text!r} -> {v.kind}: {v.explanation}"
        for p in acc.peaks:
            if p.rate == v.rate and p.accumulate == v.accumulate:
                assert abs(p.dense / v.claimed - 1) > SPARSE_RATIO_TOLERANCE, (
                    f"{acc.key}: dense {p.rate} equals headline {text!r}")


@pytest.mark.parametrize("acc", ACCS, ids=lambda a: a.key)
def test_C02_dense_and_sparse_of_a_format_never_coincide(acc):
    for p in acc.peaks:
        if p.sparse is not None:
            assert p.sparse > (1.1 if p.sparse_ratio_note else 1.9) * p.dense


def _sourced_fields(acc):
    for name in ("memory_bytes", "memory_bandwidth", "sm_count", "boost_clock_hz", "max_clock_hz", "l2_bytes",
                 "infinity_cache_bytes", "smem_per_block_bytes", "tdp_w", "interconnect"):
        value = getattr(acc, name)
        if value is not None:
            yield name, value


_KEYS = sorted(CATALOG.sources, key=len, reverse=True)
SOURCE_KEY_RE = re.compile(r"(?<![A-Za-z0-9-])(" + "|".join(map(re.escape, _KEYS)) + r")(?![A-Za-z0-9-])")


def _cites_a_source_key(text: str) -> bool:
    """A source string names a [sources] key as a whole word."""
    return bool(SOURCE_KEY_RE.search(text))


@pytest.mark.parametrize("acc", ACCS, ids=lambda a: a.key)
def test_every_value_has_a_source_that_names_a_source_key(acc):
    for name, s in _sourced_fields(acc):
        assert isinstance(s, Sourced)
        assert s.source.strip(), f"{acc.key}.{name} has no source"
        assert _cites_a_source_key(s.source), f"{acc.key}.{name}: {s.source!r} names no [sources] key"
    for p in acc.peaks:
        assert p.source.strip(), f"{acc.key} {p.rate} has no source"
        assert _cites_a_source_key(p.source), f"{acc.key} {p.rate}: {p.source!r} names no [sources] key"
    assert acc.architecture.source.strip()


@pytest.mark.parametrize("acc", ACCS, ids=lambda a: a.key)
def test_every_entry_has_bandwidth_and_a_bf16_peak(acc):
    assert acc.memory_bandwidth is not None and acc.memory_bandwidth.value > 0
    assert acc.has_rate("bf16") or any("bf16" in n for n in acc.notes)
    assert acc.memory_bytes is not None


@pytest.mark.parametrize("acc", ACCS, ids=lambda a: a.key)
def test_units_are_si_and_plausible(acc):
    """Loaded values are SI: bandwidth 0.1-20 TB/s in B/s, clocks 0.5-3.5 GHz in Hz, peaks in FLOP/s."""
    assert 1e11 < acc.memory_bandwidth.value < 2e13
    for clock in (acc.boost_clock_hz, acc.max_clock_hz):
        if clock is not None:
            assert 5e8 < clock.value < 3.5e9
    for p in acc.peaks:
        assert 1e12 < p.dense < 1e17
        assert p.accumulate in ("fp32", "fp16", "int32")


def test_derived_clocks_are_marked_derived():
    for key in ("h100-pcie", "h100-nvl", "h200-nvl", "rtx-pro-6000-server", "b200", "gb200"):
        assert CATALOG.by_key(key).boost_clock_hz.derived, key
    assert not CATALOG.by_key("h200-sxm").boost_clock_hz.derived


def test_derived_clocks_follow_from_published_peaks():
    """H100 PCIe 756 TF -> 1620 MHz; H100/H200 NVL 835.5 -> ~1545; RTX PRO Server ~2430; B200 ~1856; GB200 2062."""
    assert get_accelerator("h100-pcie").boost_clock_hz.value == pytest.approx(756e12 / (114 * 4096), rel=2e-3)
    assert get_accelerator("h100-nvl").boost_clock_hz.value == pytest.approx(835.5e12 / (132 * 4096), rel=2e-3)
    assert get_accelerator("h200-nvl").boost_clock_hz.value == pytest.approx(835.5e12 / (132 * 4096), rel=2e-3)
    assert get_accelerator("rtx-pro-6000-server").boost_clock_hz.value == pytest.approx(117e12 / (188 * 256), rel=2e-3)
    assert get_accelerator("b200").boost_clock_hz.value == pytest.approx(2250e12 / (148 * 8192), rel=2e-3)
    assert get_accelerator("gb200").boost_clock_hz.value == pytest.approx(2062e6)


def test_architecture_rates_are_positive_ints():
    for arch in CATALOG.architectures.values():
        for key, value in arch.flop_per_clk_per_sm.items():
            rate, _, acc = key.partition("@")
            assert rate in ("fp32", "tf32", "bf16", "fp16", "fp8", "fp6", "fp4", "int8"), key
            assert acc in ("", "fp16"), key
            assert isinstance(value, int) and value > 0


# ----------------------------------------------------------------------------------------------------------------------
# C14: shared memory per block as data


@pytest.mark.parametrize("acc", [a for a in ACCS if a.compute_capability == "12.0"], ids=lambda a: a.key)
def test_C14_sm120_parts_have_101376_bytes_of_shared_memory_per_block(acc):
    assert acc.smem_per_block_bytes.value == 101376


@pytest.mark.parametrize("key", ["h100-sxm", "h100-pcie", "h100-nvl", "h200-sxm", "h200-nvl", "h20", "b200", "gb200",
                                 "b300", "gb300"])
def test_C14_sm90_and_sm100_parts_have_232448_bytes(key):
    assert CATALOG.by_key(key).smem_per_block_bytes.value == 232448


def test_C14_a_102400_byte_kernel_fits_h200_but_not_rtx_pro_6000():
    need = 102400
    assert need > get_accelerator("NVIDIA RTX PRO 6000 Blackwell Workstation Edition").smem_per_block_bytes.value
    assert need > get_accelerator("NVIDIA GeForce RTX 5090").smem_per_block_bytes.value
    assert need <= get_accelerator("NVIDIA H200").smem_per_block_bytes.value
    assert 111616 <= get_accelerator("NVIDIA B200").smem_per_block_bytes.value


def test_C14_a100_and_ada_limits_follow_the_cuda_guide():
    assert get_accelerator("NVIDIA A100-SXM4-80GB").smem_per_block_bytes.value == 166912  # 163 KB
    for name in ("NVIDIA GeForce RTX 4090", "NVIDIA L40S", "NVIDIA L4", "NVIDIA RTX 6000 Ada Generation"):
        assert get_accelerator(name).smem_per_block_bytes.value == 101376  # 99 KB


# ----------------------------------------------------------------------------------------------------------------------
# Hand-computed cases


def test_C01_h200_bf16_efficiency_uses_dense_peak():
    assert get_accelerator("NVIDIA H200").dense_flops("bf16") / TERA == pytest.approx(989.4, abs=0.2)
    assert round(_pct(420, "NVIDIA H200", "bf16"), 1) == 42.4
    assert _pct(420, "NVIDIA H200", "bf16") != pytest.approx(21.2, abs=0.5)  # never against the sparse 1979


def test_C01_h100_sxm_bf16_efficiency_uses_dense_peak():
    assert round(_pct(480, "NVIDIA H100 80GB HBM3", "bf16"), 1) == 48.5


def test_C02_h100_nvl_and_h200_in_one_table_are_both_dense():
    assert get_accelerator("NVIDIA H100 NVL").dense_flops("bf16") / TERA == pytest.approx(835.5)
    assert round(_pct(400, "NVIDIA H100 NVL", "bf16"), 1) == 47.9
    assert round(_pct(400, "NVIDIA H200", "bf16"), 1) == 40.4
    # the mixed-table trap (Lightning #21743): 1671 is the NVL's SPARSE figure
    assert get_accelerator("NVIDIA H100 NVL").peak("bf16").sparse / TERA == pytest.approx(1671)


def test_C03_a100_bf16_is_not_halved_twice():
    acc = get_accelerator("NVIDIA A100-SXM4-80GB")
    assert acc.dense_flops("bf16") / TERA == pytest.approx(312)
    assert acc.peak("bf16").sparse / TERA == pytest.approx(624)
    assert round(_pct(150, "NVIDIA A100-SXM4-80GB", "bf16"), 1) == 48.1


def test_C04_rtx_4090_bf16_fp32_accumulate_is_half_rate():
    acc = get_accelerator("NVIDIA GeForce RTX 4090")
    assert acc.dense_flops("bf16") / TERA == pytest.approx(165.2)
    assert acc.dense_flops("fp16", accumulate="fp16") / TERA == pytest.approx(330.3)
    assert round(_pct(164.81, "NVIDIA GeForce RTX 4090", "bf16"), 1) == 99.8
    # the per-SM rates carry the accumulate dimension too
    assert acc.flop_per_clk_per_sm("bf16") == 512
    assert acc.flop_per_clk_per_sm("fp16", accumulate="fp16") == 1024


def test_C04_geforce_5090_keeps_fp32_and_fp16_accumulate_apart():
    acc = get_accelerator("NVIDIA GeForce RTX 5090")
    assert acc.dense_flops("bf16") / TERA == pytest.approx(209.5)
    assert acc.dense_flops("fp16", accumulate="fp16") / TERA == pytest.approx(419)
    assert acc.dense_flops("fp8_e4m3") / TERA == pytest.approx(419)
    assert acc.dense_flops("fp8_e4m3", accumulate="fp16") / TERA == pytest.approx(838)
    assert acc.dense_flops("nvfp4") / TERA == pytest.approx(1676)


def test_rtx_pro_runs_fp32_accumulate_at_full_rate():
    acc = get_accelerator("rtx-pro-6000-ws")
    assert acc.dense_flops("bf16") / TERA == pytest.approx(503.8)
    assert not acc.has_rate("bf16", accumulate="fp16")  # no separate, faster fp16-accumulate rate


def test_C08_rtx_4090_fp32_floor_for_4096_cubed():
    acc = get_accelerator("NVIDIA GeForce RTX 4090")
    floor_s = 2 * 4096**3 / acc.dense_flops("fp32")
    assert floor_s * 1e3 == pytest.approx(1.664, abs=0.001)


def test_S1_workstation_dense_fp4_is_188_sms_x_2617_mhz_x_4096():
    acc = get_accelerator("NVIDIA RTX PRO 6000 Blackwell Workstation Edition")
    assert acc.dense_flops("nvfp4") / TERA == pytest.approx(2015.2)
    assert acc.peak_at_clock("nvfp4", 2617e6) / TERA == pytest.approx(188 * 2.617 * 4096 / 1e3, rel=1e-9)
    assert acc.peak_at_clock("nvfp4", 2617e6) / TERA == pytest.approx(2015.2, abs=0.1)
    assert acc.peak("nvfp4").sparse / TERA == pytest.approx(4030.4)
    assert round(_pct(1300, acc.name, "nvfp4"), 1) == 64.5
    assert round(_pct(437, acc.name, "nvfp4"), 1) == 21.7


def test_S1_server_edition_dense_fp4_is_derived_about_1872():
    acc = get_accelerator("NVIDIA RTX PRO 6000 Blackwell Server Edition")
    p = acc.peak("nvfp4")
    assert p.derived
    assert p.dense / TERA == pytest.approx(1872, abs=1.5)
    assert 69 <= _pct(1300, acc.name, "nvfp4") <= 70
    assert acc.memory_bandwidth.value == pytest.approx(1.597e12)


def test_S1_ridge_on_the_workstation_is_about_1125_flop_per_byte():
    acc = get_accelerator("rtx-pro-6000-ws")
    assert acc.dense_flops("nvfp4") / acc.memory_bandwidth.value == pytest.approx(1125, abs=1)


def test_max_q_is_slower_than_workstation_and_server_in_between():
    ws, server, maxq = (get_accelerator(k).dense_flops("nvfp4") for k in ("rtx-pro-6000-ws", "rtx-pro-6000-server",
                                                                         "rtx-pro-6000-maxq"))
    assert maxq < server < ws
    assert maxq / TERA == pytest.approx(1755.6, abs=0.2)


def test_b300_dense_fp4_is_unverified_and_the_published_sparse_18000_is_not_twice_dense():
    """accelerators.md section 2: B300 sparse FP4 18000 per GPU (HGX '144 PF' / 8); dense 15000 unverified."""
    p = get_accelerator("b300").peak("nvfp4")
    assert p.dense / TERA == pytest.approx(15000)
    assert p.sparse / TERA == pytest.approx(18000)
    assert p.unverified
    assert "unverified" in p.note.lower()
    assert "without a matching sparse rate" in p.sparse_ratio_note
    assert not get_accelerator("b300").has_rate("int8")


def test_h20_is_capped_and_explained():
    acc = get_accelerator("NVIDIA H20")
    assert acc.dense_flops("bf16") / TERA == pytest.approx(148)
    assert acc.dense_flops("fp8_e4m3") / TERA == pytest.approx(296)
    assert all(p.why_not for p in acc.peaks)
    assert acc.sm_count is None


def test_non_tensor_fp32_uses_the_max_clock_where_that_is_its_basis():
    h100 = get_accelerator("h100-sxm").peak("fp32")
    assert h100.clock_hz == pytest.approx(1980e6)
    assert get_accelerator("b200").peak("fp32").clock_hz == pytest.approx(1965e6)


def test_amd_mi300x_fp8_is_fnuz_and_mi325x_has_the_same_compute():
    mi300x, mi325x = get_accelerator("AMD Instinct MI300X"), get_accelerator("mi325x")
    assert "fnuz" in mi300x.peak("fp8_e4m3").note
    assert mi325x.dense_flops("bf16") == mi300x.dense_flops("bf16") == pytest.approx(1307.4e12)
    assert mi325x.memory_bytes.value == pytest.approx(256e9)
    assert mi325x.memory_bandwidth.value == pytest.approx(6.0e12)
    assert mi325x.tdp_w.value == 1000


def test_mi355x_sparse_fp8_headline_is_sparse():
    acc = get_accelerator("AMD Instinct MI355X")
    assert acc.dense_flops("fp8_e4m3") / TERA == pytest.approx(5000)
    assert acc.peak("fp8_e4m3").sparse / TERA == pytest.approx(10100)


def test_to_dict_is_si_and_complete():
    d = get_accelerator("h200").to_dict()
    assert d["memory_bandwidth_bytes_per_s"]["value"] == pytest.approx(4.8e12)
    bf16 = next(p for p in d["peaks"] if p["rate"] == "bf16")
    assert bf16["dense_flops"] == pytest.approx(989.4e12)
    assert bf16["sparse_flops"] == pytest.approx(1979e12)
    assert bf16["flop_per_clk_per_sm"] == 4096
    assert bf16["clock_hz"] == pytest.approx(1830e6)


# ----------------------------------------------------------------------------------------------------------------------
# Format-specific peaks (instruction kinds) and unverified values


@pytest.mark.parametrize("acc", ACCS, ids=lambda a: a.key)
def test_format_specific_peaks_are_well_formed_and_unique(acc):
    """A peak with `formats` names canonical formats of its own rate; at most one plain peak per (rate, accumulate)
    and at most one format-specific peak per (format, accumulate), so Accelerator.peak() is never ambiguous."""
    from truepeak.formats import get_format

    plain, specific = set(), set()
    for p in acc.peaks:
        if p.formats:
            for name in p.formats:
                assert get_format(name).name == name and get_format(name).rate == p.rate
                assert (name, p.accumulate) not in specific
                specific.add((name, p.accumulate))
        else:
            assert (p.rate, p.accumulate) not in plain, f"{acc.key}: two plain {p.rate}@{p.accumulate} peaks"
            plain.add((p.rate, p.accumulate))
        if p.flop_per_clk_per_sm is not None:
            assert p.formats, f"{acc.key} {p.rate}: an own FLOP/clk/SM only on a format-specific peak"


def test_5090_block_scaled_mxfp8_peak_takes_precedence_for_mxfp8_only():
    acc = get_accelerator("NVIDIA GeForce RTX 5090")
    mx = acc.peak("mxfp8")
    assert mx.formats == ("mxfp8",) and mx.derived and mx.unverified
    assert mx.dense / TERA == pytest.approx(838.0, abs=0.1)             # 2048 x 170 x 2.407 GHz = 838.0
    assert mx.dense == pytest.approx(2048 * 170 * 2.407e9, rel=1e-3)
    assert "642" in mx.note and "419" in mx.note
    assert acc.flop_per_clk_per_sm("mxfp8") == 2048
    # every other fp8 format keeps the fp32-accumulate half rate
    for fmt in ("fp8_e4m3", "fp8_e5m2"):
        assert acc.peak(fmt).dense / TERA == pytest.approx(419) and acc.peak(fmt).formats == ()
        assert acc.flop_per_clk_per_sm(fmt) == 1024
    assert acc.peak("mxfp8", accumulate="fp16").dense / TERA == pytest.approx(838)  # the plain fp16-acc rate
    # a format-specific peak never governs another format
    assert get_accelerator("rtx-pro-6000-ws").peak("mxfp8").formats == ()


def test_peak_precedence_on_a_hand_built_accelerator():
    from truepeak.hardware.catalog import Accelerator, Architecture, Peak

    plain = Peak("fp8", "fp32", 1e14, None, "t")
    mx = Peak("fp8", "fp32", 2e14, None, "t", formats=("mxfp8",), flop_per_clk_per_sm=2048)
    arch = Architecture("a", "a", {"fp8": 1024}, "t", block_scaled=True)
    acc = Accelerator("x", "X", "nvidia", arch, None, (), (), (mx, plain),
                      None, None, None, None, None, None, None, None, None)
    assert acc.peak("mxfp8") is mx and acc.peak("fp8_e4m3") is plain and acc.peak("fp8_e5m2") is plain
    assert acc.flop_per_clk_per_sm("mxfp8") == 2048 and acc.flop_per_clk_per_sm("fp8") == 1024


@pytest.mark.parametrize(("key", "field"), [("b300", "sm_count"), ("gb300", "sm_count")])
def test_unverified_values_are_flagged(key, field):
    assert getattr(CATALOG.by_key(key), field).unverified


def test_mi355x_int8_sparse_has_the_rounding_note():
    p = get_accelerator("mi355x").peak("int8")
    assert p.sparse / TERA == pytest.approx(10100) and "rounding" in p.note


def test_to_dict_carries_formats_and_flags():
    d = get_accelerator("5090").to_dict()
    mx = next(p for p in d["peaks"] if p["formats"] == ["mxfp8"])
    assert mx["flop_per_clk_per_sm"] == 2048 and mx["unverified"] is True
    b300 = get_accelerator("b300").to_dict()
    assert b300["sm_count"]["unverified"] is True
    assert next(p for p in b300["peaks"] if p["rate"] == "fp4")["sparse_ratio_note"]


# ----------------------------------------------------------------------------------------------------------------------
# One rule each: implied sparse, clock basis, bandwidth, default accumulator


def test_implied_sparse_is_published_else_twice_dense_except_fp32():
    h200 = get_accelerator("h200")
    assert h200.peak("bf16").implied_sparse == h200.peak("bf16").sparse == pytest.approx(1979e12)
    assert h200.peak("fp32").implied_sparse is None  # CUDA cores: no sparse mode
    maxq = get_accelerator("rtx-pro-6000-maxq").peak("bf16")
    assert maxq.sparse is None and maxq.implied_sparse == 2 * maxq.dense


def test_clock_basis_is_the_peak_clock_else_the_boost_clock():
    h100 = get_accelerator("h100-sxm")
    assert h100.clock_basis_hz(h100.peak("bf16")) == pytest.approx(1830e6)
    assert h100.clock_basis_hz(h100.peak("fp32")) == pytest.approx(1980e6)  # non-tensor fp32 at the max clock
    assert get_accelerator("h20").clock_basis_hz(get_accelerator("h20").peak("bf16")) is None  # no clock published


def test_bandwidth_bytes_per_s():
    assert get_accelerator("h200").bandwidth_bytes_per_s == 4.8e12


def test_default_accumulate_labels():
    from truepeak.formats import default_accumulate

    assert default_accumulate("int8") == "int32" and default_accumulate("fp8") == "fp32"
    fp16 = [p.label for p in get_accelerator("4090").peaks if p.rate == "fp16"]
    assert sorted(fp16) == ["fp16", "fp16 (fp16 accumulate)"]
    assert get_accelerator("h200").peak("int8").label == "int8"


# ----------------------------------------------------------------------------------------------------------------------
# Loading errors name the entry and the field

_MINI = """
schema_version = 1
[architectures.sm_x]
name = "X"
flop_per_clk_per_sm = { bf16 = 1024 }
source = "S"
[[accelerators]]
key = "x1"
name = "X1"
vendor = "nvidia"
architecture = "sm_x"
[[accelerators.peaks]]
rate = "bf16"
dense_tflops = 100
source = "S"
"""


def test_from_toml_reads_a_minimal_file():
    cat = Catalog.from_toml(_MINI)
    assert cat.by_key("x1").dense_flops("bf16") == 100e12 and cat.schema_version == 1


@pytest.mark.parametrize(("drop", "message"), [
    ("dense_tflops = 100\n", "accelerator 'x1'.peaks[0] (bf16): missing field 'dense_tflops'"),
    ('vendor = "nvidia"\n', "accelerator 'x1': missing field 'vendor'"),
    ('key = "x1"\n', "accelerators[0]: missing field 'key'"),
    ('source = "S"\n[[accelerators]]', "architectures.sm_x: missing field 'source'"),
    ("schema_version = 1\n", "the file: missing field 'schema_version'"),
])
def test_from_toml_missing_field_is_a_value_error_naming_entry_and_field(drop, message):
    text = _MINI.replace(drop, "[[accelerators]]" if drop.endswith("[[accelerators]]") else "", 1)
    with pytest.raises(ValueError) as err:
        Catalog.from_toml(text)
    assert not isinstance(err.value, KeyError)
    assert str(err.value) == f"catalog: {message}"


# ----------------------------------------------------------------------------------------------------------------------
# Fresh-user bugs: the unverified marker follows the data, sparse = 2 x dense on the L4, SI values exact

WEAK_SOURCES = {k for k, v in CATALOG.sources.items() if re.search(r"unverified|third-party", v, re.I)}


def _values_and_peaks(acc):
    for name, s in _sourced_fields(acc):
        yield f"{acc.key}.{name}", s.source, s.note, s.unverified
    for p in acc.peaks:
        yield f"{acc.key} {p.label}", p.source, p.note, p.unverified


def test_weak_source_keys_are_the_third_party_and_unverified_ones():
    assert WEAK_SOURCES == {"PROWP", "CAT", "HMC", "GPUSPEC", "BWULTRA"}


@pytest.mark.parametrize("acc", ACCS, ids=lambda a: a.key)
def test_unverified_flag_follows_the_sources(acc):
    """`unverified = true` exactly where the source or note says "unverified", or every source key it names is a
    third-party / unverified one (PROWP, CAT, HMC, GPUSPEC, BWULTRA): the † marker derives from the data."""
    for where, source, note, flag in _values_and_peaks(acc):
        keys = set(SOURCE_KEY_RE.findall(source))
        says = bool(re.search(r"unverified", f"{source} {note}", re.I))
        weak_only = bool(keys) and keys <= WEAK_SOURCES
        assert flag == (says or weak_only), f"{where}: unverified={flag}; source {source!r}, note {note!r}"


def test_rtx_5090_l2_is_marked_unverified():
    l2 = CATALOG.by_key("rtx-5090").l2_bytes
    assert l2.value == 96_000_000 and l2.unverified


def test_l4_int8_sparse_is_twice_dense_like_fp8():
    l4 = CATALOG.by_key("l4")
    int8, fp8 = l4.peak("int8"), l4.peak("fp8_e4m3")
    assert int8.dense == fp8.dense == 242.5e12
    assert int8.sparse == 2 * int8.dense == 485e12


@pytest.mark.parametrize("acc", ACCS, ids=lambda a: a.key)
def test_si_values_converted_from_decimal_inputs_are_exact(acc):
    """TB/s, TFLOPS, MHz and GB become whole numbers of B/s, FLOP/s, Hz and bytes: no 2039000000000.0002."""
    for name in ("memory_bytes", "memory_bandwidth", "boost_clock_hz", "max_clock_hz"):
        s = getattr(acc, name)
        if s is not None:
            assert float(s.value).is_integer(), (acc.key, name, s.value)
    for p in acc.peaks:
        for v in (p.dense, p.sparse, p.clock_hz):
            assert v is None or float(v).is_integer(), (acc.key, p.label, v)


def test_a100_bandwidth_in_json_is_2039e9_exactly():
    import json

    from truepeak.hardware.catalog import accelerator_to_dict

    d = accelerator_to_dict(CATALOG.by_key("a100-sxm-80gb"))
    assert d["memory_bandwidth_bytes_per_s"]["value"] == 2_039_000_000_000
    assert '"value": 2039000000000.0' in json.dumps(d)


def test_missing_accumulator_lists_rate_accumulator_pairs():
    from truepeak.errors import UnsupportedError

    with pytest.raises(UnsupportedError) as err:
        get_accelerator("h200").peak("bf16", "fp16")
    msg = str(err.value)
    assert "no published bf16 peak with fp16 accumulate" in msg
    assert "bf16 is published with fp32 accumulate only" in msg
    assert "bf16/fp32" in msg and "int8/int32" in msg and "it has: fp32, tf32" not in msg
    with pytest.raises(UnsupportedError, match="no fp6 peak at all"):
        get_accelerator("rtx-5090").peak("mxfp6")


def test_amd_infinity_cache_is_catalogued():
    for key in ("mi300x", "mi325x", "mi355x"):
        a = CATALOG.by_key(key)
        assert a.infinity_cache_bytes.value == 268_435_456
        assert a.cache_bytes == a.l2_bytes.value + 268_435_456
    assert CATALOG.by_key("h200-sxm").cache_bytes == 62_914_560
    assert CATALOG.by_key("h100-nvl").cache_bytes is None


def test_block_scaled_formats_need_hardware_block_scaling():
    """Adversarial test 4: mxfp8 on an H100 (sm_90, no block scaling) was measured against the fp8 peak."""
    from truepeak.errors import UnsupportedError

    scaled = {k for k, a in load_catalog().architectures.items() if a.block_scaled}
    assert scaled == {"sm_100", "sm_103", "sm_120_geforce", "sm_120_pro", "cdna4"}
    with pytest.raises(UnsupportedError) as err:
        get_accelerator("h100-sxm").peak("mxfp8")
    assert str(err.value) == ("mxfp8 needs hardware block scaling (sm_100, sm_120, CDNA4); NVIDIA H100 SXM (sm_90) "
                              "has none")
    for key, fmt in (("mi300x", "mxfp4"), ("rtx-4090", "nvfp4"), ("a100-sxm-80gb", "mxfp8")):
        assert not get_accelerator(key).has_rate(fmt)
    assert get_accelerator("h100-sxm").has_rate("fp8_e4m3")  # plain fp8 is unaffected
    for key, fmt in (("b200", "nvfp4"), ("rtx-5090", "mxfp8"), ("rtx-pro-6000-ws", "nvfp4"), ("mi355x", "mxfp4")):
        assert get_accelerator(key).has_rate(fmt), (key, fmt)


def test_unknown_accumulator_is_rejected_with_the_list():
    """Adversarial test 6: --accumulate banana said "no published bf16 peak with banana accumulate"."""
    from truepeak.errors import UnknownNameError

    with pytest.raises(UnknownNameError) as err:
        get_accelerator("h200").peak("bf16", "banana")
    assert str(err.value).strip("'\"") == "unknown accumulator 'banana'; known: fp32, fp16, int32"
