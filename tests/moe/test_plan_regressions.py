"""Planner regressions (truepeak.moe.plan): each test names the wrong behaviour it guards against; expected values
computed by hand."""

from __future__ import annotations

from truepeak.hardware.lookup import get_accelerator
from truepeak.moe.config import load_model
from truepeak.moe.plan import plan


def test_tp16_on_hgx_h200_says_collectives_cross_boxes():
    # Bug: 16 GPUs of TP on H200 SXM were planned as one NVLink domain (8x H100 ring numbers) without a word; an HGX
    # H200 baseboard has 8 GPUs, so 16 span two boxes and their all-reduces go over InfiniBand / RoCE.
    dsv3, h200 = load_model("deepseek-v3"), get_accelerator("h200")
    from truepeak.moe.findings import CrossesBaseboard
    from truepeak.report.plan import finding_text

    def crossings(p):
        return [n for n in p.notes if isinstance(n, CrossesBaseboard)]

    p = plan(dsv3, h200, "tp16", 1, weights="fp8")
    assert crossings(p) == [CrossesBaseboard(16, "NVIDIA H200 SXM", 8)]
    assert finding_text(crossings(p)[0]).startswith("16 GPUs per pipeline stage exceed one NVIDIA H200 SXM baseboard "
                                                    "(8 GPUs in one NVLink domain)")
    # 8 GPUs per stage (tp8pp2: 16 GPUs, two stages of 8) stay inside one box: no note
    assert crossings(plan(dsv3, h200, "tp8pp2", 1, weights="fp8")) == []
    # GB200 NVL72: one NVLink domain of 72 GPUs, 16 fit
    assert crossings(plan(dsv3, get_accelerator("gb200"), "ep16", 1, weights="fp8")) == []


def test_int8_activations_with_fp8_weights_are_refused():
    # Bug: --weights fp8 --activations int8 was planned as an "fp8 GEMM" with int8 activations; no tensor-core
    # instruction multiplies int8 by fp8.
    import pytest

    from truepeak.errors import TruepeakError
    from truepeak.moe.ops import resolve_formats

    h200 = get_accelerator("h200")
    with pytest.raises(TruepeakError, match="--activations int8 with --weights fp8_e4m3"):
        resolve_formats(h200, "fp8", "int8")
    with pytest.raises(TruepeakError, match="--activations fp8_e4m3 with --weights int8"):
        resolve_formats(h200, "int8", "fp8")
    # W8A8 int8 and weight-only int8 (bf16 activations) stay: H200 int8 dense peak = fp8's 1978.9 TOPS
    assert resolve_formats(h200, "int8", "int8").gemm_peak == resolve_formats(h200, "fp8").gemm_peak
    assert resolve_formats(h200, "int8", "bf16").gemm_compute.name == "bf16"


def test_hub_id_offline_fails_fast_in_one_line(monkeypatch):
    # Offline, huggingface_hub retries for ~24 s and prints a warning per retry before failing; the loader tries the
    # cache first, then checks in 3 seconds that the hub answers, and fails in one line.
    import socket
    import sys
    import types

    import pytest

    from truepeak.errors import TruepeakError

    calls = []

    def hf_hub_download(repo_id, filename, **kw):
        calls.append(kw)
        if kw.get("local_files_only"):
            raise FileNotFoundError("not cached")
        raise AssertionError("must not try the network when the hub is unreachable")

    def unreachable(*a, **k):
        raise socket.gaierror(-2, "Name or service not known")

    monkeypatch.setitem(sys.modules, "huggingface_hub", types.SimpleNamespace(hf_hub_download=hf_hub_download))
    monkeypatch.setattr(socket, "create_connection", unreachable)
    for v in ("HTTPS_PROXY", "https_proxy", "HTTP_PROXY", "http_proxy", "ALL_PROXY", "all_proxy"):
        monkeypatch.delenv(v, raising=False)
    with pytest.raises(TruepeakError, match=r"cannot reach the Hugging Face hub at huggingface.co:443 to fetch "
                                            r"'org/model' \(Name or service not known; offline\?\)"):
        load_model("org/model")
    assert calls == [{"local_files_only": True}]
    # HF_HUB_OFFLINE as huggingface_hub reads it (huggingface_hub.constants): no network at all
    monkeypatch.setitem(sys.modules, "huggingface_hub.constants",
                        types.SimpleNamespace(HF_HUB_OFFLINE=True, ENDPOINT="https://huggingface.co"))
    with pytest.raises(TruepeakError, match="not in the local Hugging Face cache and HF_HUB_OFFLINE is set"):
        load_model("org/model")
    # a mirror named by huggingface_hub's HF_ENDPOINT is the host checked
    monkeypatch.setitem(sys.modules, "huggingface_hub.constants",
                        types.SimpleNamespace(HF_HUB_OFFLINE=False, ENDPOINT="http://mirror.example:8080"))
    with pytest.raises(TruepeakError, match="cannot reach the Hugging Face hub at mirror.example:8080"):
        load_model("org/model")


def test_six_gpus_get_layouts_that_fit():
    # Bug: `--gpus 6` (with or without --compare) ended in "tp6 does not fit" and offered nothing: the candidates had
    # no pp3 and no DP-attention-with-expert-TP form. Qwen3-235B-A22B: 64 heads, 128 experts, I_e 1536, 94 layers:
    # tp6 (64 % 6), ep6 / dp6ep6 (128 % 6), tp3pp2 (64 % 3), tp2ep3, dp3ep3pp2 (128 % 3) do not divide;
    # tp2pp3 (64 / 2, 1536 / 2), dp6 (attention TP1, experts TP6: 1536 / 6 = 256) and pp6 do.
    from truepeak.moe.layout import default_layouts

    q = load_model("qwen3-235b-a22b")
    assert [lay.name for lay in default_layouts(6, q)] == ["tp2pp3", "dp6", "pp6"]
    # 8 GPUs keep their six layouts
    assert [lay.name for lay in default_layouts(8, q)] == ["tp8", "ep8", "dp8ep8", "tp4pp2", "tp2pp4", "tp2ep4"]


def test_cli_six_gpus_names_the_layouts_that_fit(capsys):
    import pytest

    from truepeak.cli.app import main

    with pytest.raises(SystemExit) as e:
        main(["moe", "plan", "--model", "qwen3-235b-a22b", "--gpu", "h200", "--gpus", "6"])
    err = capsys.readouterr().err
    assert e.value.code == 2 and len(err.strip().splitlines()) == 1
    assert "layouts of 6 GPUs that fit: tp2pp3, dp6, pp6" in err
    with pytest.raises(SystemExit) as e:
        main(["moe", "plan", "--model", "qwen3-235b-a22b", "--gpu", "h200", "--gpus", "6", "--compare", "--batch", "1"])
    out = capsys.readouterr().out
    assert e.value.code in (0, None)
    assert "layout tp2pp3" in out and "dp6 " in out and "what-if" in out


def test_routing_folder_is_called_a_folder(tmp_path):
    # "routing file '/tmp' does not exist" was wrong: it exists, it is a folder.
    import pytest

    from truepeak.errors import TruepeakError
    from truepeak.moe.routing import routing_stats

    with pytest.raises(TruepeakError, match="is a folder, not a file; accepted routing: 'uniform'"):
        routing_stats(8, 8, 256, routing=str(tmp_path) + "/")


def test_routing_label_one_spelling():
    from truepeak.moe.routing import parse_routing, routing_label

    assert routing_label("PowerLaw:1.20") == "powerlaw:1.2"
    assert routing_label("powerlaw:1.2:random") == "powerlaw:1.2"
    assert routing_label("zipf:1.2:sorted") == "powerlaw:1.2:sorted"
    assert routing_label("powerlaw:0") == "uniform" and routing_label(" Uniform ") == "uniform"
    # the label parse_routing puts on its result
    assert parse_routing("PowerLaw:1.20:random", 256, 8).label == "powerlaw:1.2"


def test_huge_batch_is_a_one_line_error_not_an_overflow():
    """Regression: --batch 99999999999999999999 raised OverflowError from the busiest-expert binomial (routing.py
    _binom_window); 1e10 ran for minutes. Batches above MAX_BATCH = 1e7 sequences are refused, 1e7 itself plans."""
    import pytest

    from truepeak.errors import TruepeakError
    from truepeak.moe.plan import MAX_BATCH

    model, acc = load_model("deepseek-v3"), get_accelerator("h200")
    assert MAX_BATCH == 10_000_000
    with pytest.raises(TruepeakError, match="batch 99999999999999999999 is above the 10,000,000 sequences"):
        plan(model, acc, "tp8", 99999999999999999999)
    p = plan(model, acc, "tp8", MAX_BATCH)
    # T·k/E = 1e7 · 8 / 256 = 312500 tokens per expert on average
    assert p.routing.mean_tokens_per_expert == 312500 and p.batch == MAX_BATCH
