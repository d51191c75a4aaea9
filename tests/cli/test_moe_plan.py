"""`truepeak moe plan` through typer's CliRunner: the S1 conclusions printed, --json, --compare, one-line errors."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

import truepeak.cli.moe  # noqa: F401  (registers the sub-app)
from truepeak.cli.app import app
from truepeak.cli.moe import moe_app
from truepeak.moe.findings import MtpNotModelled
from truepeak.report.plan import finding_text

WS = "NVIDIA RTX PRO 6000 Blackwell Workstation Edition"
S1 = ("--model", "glm-5", "--gpu", WS, "--gpus", "8", "--weights", "nvfp4")


def run(*args: str):
    return CliRunner().invoke(app, ["moe", "plan", *args])


def test_moe_app_is_exported_for_other_commands():
    from truepeak.cli import moe_app as home

    assert moe_app is home.moe_app and moe_app.info.name == "moe"
    assert sorted(c.name for c in moe_app.registered_commands) == ["bench", "plan", "tune"]


def test_S1_cli_prints_the_conclusions():
    r = run(*S1, "--batch", "1,512")
    assert r.exit_code == 0, r.output
    out = r.stdout
    assert "16 tokens per expert on average (T·k/E = 512·8/256)" in out
    assert "→ memory-bound" in out and "1125 FLOP/B ridge" in out
    assert "56.9 per weight byte" in out                        # the S1 "AI ~ 57 FLOP/B"
    assert "156 in the layers: 2 per layer" in out and "a major share of the step" in out
    assert "communication-bound: TP8 over PCIe only" in out
    assert "E=256,N=256,device_name=NVIDIA_RTX_PRO_6000_Blackwell_Workstation_Edition.json" in out
    assert "E=257,N=256" in out
    assert "DOES NOT FIT" in out                                  # batch 512 x 4096 tokens of replicated MLA cache


def test_S1_cli_json():
    r = run(*S1, "--batch", "512", "--json")
    assert r.exit_code == 0, r.output
    d = json.loads(r.stdout)
    p = d["plans"][0]
    assert p["routing"]["mean_tokens_per_expert"] == 16
    assert p["layout"]["gpus"] == 8 and p["interconnect"] == "pcie"
    gu = next(op for op in p["ops"] if op["name"] == "routed experts gate+up")
    assert gu["bound"] == "memory" and gu["flop"] == 25_769_803_776
    assert p["tokens_per_s"] == pytest.approx(512 / p["step_s"])
    assert set(p["time_by_bound_s"]) == {"compute", "memory", "communication", "pipeline_bubble"}


def test_json_keeps_every_sentence_and_adds_the_findings_as_data():
    d = json.loads(run(*S1, "--batch", "1", "--json").stdout)["plans"][0]
    # the sentences a user reads stay (bottleneck, conclusions, notes, interconnect_why) ...
    assert d["bottleneck"].startswith("Communication-bound: 158 collectives take")
    assert d["interconnect_why"] == "catalog: no NVLink; PCIe 5.0 x16"
    assert len(d["conclusions"]) == 3 and d["notes"][0].startswith("communication-bound: TP8 over PCIe only")
    # ... and the findings come as data, SI units: 157 all-reduces at 24.6 µs + 12288 B x 1.75 / 24 GB/s each
    f = d["findings"]
    assert (f["bottleneck"]["kind"], f["bottleneck"]["collective"], f["bottleneck"]["calls"]) == \
        ("communication_bound", "all_reduce", 157)
    assert f["bottleneck"]["per_call_s"] == pytest.approx(24.6e-6 + 12288 * 1.75 / 24e9)
    assert [c["kind"] for c in f["conclusions"]] == ["expert_gemm_intensity", "all_reduce_share",
                                                      "pcie_communication_bound"]
    assert d["interconnect_choice"] == {"kind": "pcie", "basis": "catalog", "catalog": "no NVLink; PCIe 5.0 x16",
                                        "device": WS, "gpus": 8}


def test_compare_default_is_six_layouts_by_eight_batches():
    r = run("--model", "deepseek-v3", "--gpu", "h200", "--gpus", "8", "--compare", "--json")
    assert r.exit_code == 0, r.output
    c = json.loads(r.stdout)["compare"]
    assert [l["layout"] for l in c["layouts"]] == ["tp8", "ep8", "dp8ep8", "tp4pp2", "tp2pp4", "tp2ep4"]
    assert c["batches"] == [1, 2, 8, 16, 32, 64, 128, 512]
    assert len(c["cells"]) == 48 and all("tokens_per_s" in cell for cell in c["cells"])


def test_compare_with_a_list_and_batches_text():
    r = run(*S1, "--compare", "tp8,dp8ep8", "--batch", "1,64")
    assert r.exit_code == 0, r.output
    table = r.stdout[r.stdout.index("what-if"):]
    assert "tp8" in table and "dp8ep8" in table and "b=1" in table and "b=64" in table


@pytest.mark.parametrize("args, words", [
    (("--batch", "0"), "--batch 0 must be at least 1"),
    (("--layout", "ep3"), "256 routed experts are not divisible by EP3"),
    (("--layout", "tp4"), "--layout tp4 uses 4 GPUs but --gpus is 8"),
    (("--weights", "fp5"), "fp5"),
    (("stray",), "unexpected argument"),
])
def test_bad_input_is_one_line(args, words):
    base = S1 if "--layout" not in args or "tp4" in args else S1[:4] + S1[6:]    # ep3: no --gpus 8
    r = run(*base, *args)
    assert r.exit_code == 2
    assert words in r.output


def test_unknown_model_via_main(capsys):
    from truepeak.cli import main

    with pytest.raises(SystemExit) as e:
        main(["moe", "plan", "--model", "glm-9", "--gpu", "h200"])
    assert e.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: unknown model 'glm-9'")


def _collective(nbytes, t, n, mode=None):
    """A collective record (schema 3): all_reduce of ``nbytes`` on ``n`` GPUs in ``t`` seconds."""
    return {"schema_version": 3, "kind": "collective", "status": "ok", "mode": mode,
            "workload": {"op": "all_reduce", "bytes": nbytes, "count": nbytes // 2, "dtype": "bf16", "n_ranks": n},
            "measurement": {"mode": mode or "eager", "median_s": t},
            "correctness": {"wrong": 0, "checked": nbytes // 2, "passed": True}}


def test_measured_says_which_ops_used_measurements(tmp_path):
    recs = [_collective(b, t, 8) for b, t in ((1024, 20e-6), (65536, 40e-6))]
    path = tmp_path / "comm.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in recs))
    r = run(*S1, "--measured", str(path))
    assert r.exit_code == 0, r.output
    line = next(l for l in r.stdout.splitlines() if l.startswith("measured:"))
    assert "TP all-reduce after attention" in line and "1 collective curves" in line
    # 12 KiB lies between the 1 KiB and 64 KiB points: 20 + 20 * (12288 - 1024) / (65536 - 1024) µs
    d = json.loads(run(*S1, "--measured", str(path), "--json").stdout)
    ar = next(op for op in d["plans"][0]["ops"] if op["name"] == "TP all-reduce after attention")
    assert ar["time_s"] == pytest.approx(20e-6 + 20e-6 * (12288 - 1024) / (65536 - 1024))


def test_number_list_is_shared_by_plan_and_bench():
    # `moe plan --batch` and `moe bench --tokens-per-expert` read their lists with one helper, in cli/options.py;
    # the bench command does not import the plan command
    import ast
    import inspect

    from truepeak.cli import moe, moe_bench
    from truepeak.cli.options import number_list
    from truepeak.errors import TruepeakError

    assert moe_bench.number_list is number_list and moe.number_list is number_list
    imported = {n.module for n in ast.walk(ast.parse(inspect.getsource(moe_bench))) if isinstance(n, ast.ImportFrom)}
    assert "truepeak.cli.options" in imported and "truepeak.cli.moe" not in imported
    assert number_list(" 1, 8, 512", "--batch") == [1, 8, 512]
    assert number_list("0.5,16", "tokens per expert", float, "1,2,4") == [0.5, 16.0]
    with pytest.raises(TruepeakError, match=r"--batch '1.5' is not a whole number; give e.g. 1,8,64,512"):
        number_list("1,1.5", "--batch")
    with pytest.raises(TruepeakError, match=r"no tokens per expert in ','; give e.g. 1,2,4"):
        number_list(",", "tokens per expert", float, "1,2,4")


def test_measured_that_does_not_match_says_why(tmp_path):
    # Measured data that matches no op says why, not only "ops timed from measurements: none matched": a 2-GPU comm
    # run given to an 8-GPU plan, expert curves of the full expert width (N = I_e = 2048) given to a TP8 plan
    # (N = 2048 / 8 = 256).
    recs = [_collective(b, 9.8e-6, 2, "graph") for b in (8192, 16384)]
    recs += [{"schema_version": 3, "kind": "moe_experts", "status": "ok", "format": "fp8", "backend": "triton",
              "workload": {"model": "deepseek-v3", "layout": "single", "routing": "uniform", "tokens_per_expert": tpe,
                           "E_local": 256, "H": 7168, "I": 2048, "top_k": 8, "T": tpe * 32, "weights_format": "fp8"},
              "measurement": {"mode": "sustained", "steady_median_s": t}, "correctness": {"passed": True}}
             for tpe, t in ((1, 300e-6), (16, 600e-6))]
    f = tmp_path / "m.jsonl"
    f.write_text("\n".join(json.dumps(r) for r in recs) + "\n")
    r = run("--model", "deepseek-v3", "--gpu", "h200", "--gpus", "8", "--batch", "512", "--measured", str(f))
    assert r.exit_code == 0, r.output
    assert "collectives were measured on 2 GPUs; this plan's run on 8" in r.stdout
    assert "this plan needs E=256 N=256 fp8_e4m3 uniform" in r.stdout


def test_c13_cli_fp8_block_scales_in_header_and_json():
    # DeepSeek-V3's checkpoint is fp8 with weight_block_size [128, 128]: its default --weights, scales counted
    r = run("--model", "deepseek-v3", "--gpu", "h200", "--gpus", "8", "--json")
    assert r.exit_code == 0, r.output
    f = json.loads(r.stdout)["plans"][0]["formats"]
    assert (f["weights"], f["weight_scaling"], f["activation_scaling"]) == ("fp8_e4m3", "block128", "block128")
    gu = next(op for op in json.loads(r.stdout)["plans"][0]["ops"] if op["name"] == "routed experts gate+up")
    # tp8, batch 1: 8 active experts x (512 x 7168 + 4 x 56 x 4) = 8 x 3,670,912 = 29,367,296 B
    assert gu["weight_bytes"] == pytest.approx(29_367_296)
    t = run("--model", "deepseek-v3", "--gpu", "h200", "--gpus", "8")
    assert "weights fp8_e4m3 (1 B/value + fp32 scale per 128x128 block)" in t.stdout
    assert "activations fp8_e4m3 (fp32 scale per 1x128 group)" in t.stdout


def test_cli_fp8_without_block_size_says_per_channel():
    r = run("--model", "qwen3-30b-a3b", "--gpu", "h200", "--weights", "fp8", "--json")
    assert r.exit_code == 0, r.output
    f = json.loads(r.stdout)["plans"][0]["formats"]
    assert f["weight_scaling"] == "row" and f["activation_scaling"] == "row"
    assert "assumed per-channel" in f["scaling_note"]
    t = run("--model", "qwen3-30b-a3b", "--gpu", "h200", "--weights", "fp8")
    line = next(l for l in t.stdout.splitlines() if "assumed per-channel" in l)
    assert "one fp32 scale per output row" in line and "per-tensor" in line


def test_compare_layout_on_another_gpu_count_warns_one_line_each():
    # decision (truepeak.moe.plan.plan_set docstring): warn, do not refuse; tp8 matches --gpus 8 and gets no warning
    r = run("--model", "deepseek-v3", "--gpu", "h200", "--gpus", "8", "--compare", "tp8,tp4,ep16", "--batch", "1",
            "--json")
    assert r.exit_code == 0, r.output
    w = json.loads(r.stdout)["warnings"]
    assert w[0] == finding_text(MtpNotModelled("deepseek-v3", 1))
    w = w[1:]
    assert w == ["--compare layout tp4 uses 4 GPUs, not the 8 of --gpus: its row is planned on 4 GPUs (tokens/s "
                 "total for 4 GPUs; compare rows per GPU)",
                 "--compare layout ep16 uses 16 GPUs, not the 8 of --gpus: its row is planned on 16 GPUs (tokens/s "
                 "total for 16 GPUs; compare rows per GPU)"]
    t = run("--model", "deepseek-v3", "--gpu", "h200", "--gpus", "8", "--compare", "tp8,tp4", "--batch", "1")
    assert t.exit_code == 0
    assert [l for l in t.stderr.splitlines() if l.startswith("warning:")][1:] == ["warning: " + w[0]]
    assert "warning" not in t.stdout


def test_context_above_max_position_embeddings_warns(tmp_path):
    from importlib import resources

    cfg = json.loads(resources.files("truepeak.moe").joinpath("presets/deepseek-v3.json").read_text())
    cfg["max_position_embeddings"] = 163840
    path = tmp_path / "config.json"
    path.write_text(json.dumps(cfg))
    r = run("--model", str(path), "--gpu", "h200", "--gpus", "8", "--context", "200000", "--json")
    assert r.exit_code == 0, r.output
    d = json.loads(r.stdout)
    assert len(d["warnings"]) == 2 and "200000" in d["warnings"][0] and "163840" in d["warnings"][0]
    assert d["plans"][0]["context"] == 200000                           # planned anyway
    t = run("--model", str(path), "--gpu", "h200", "--gpus", "8", "--context", "163840", "--json")
    w = json.loads(t.stdout)["warnings"]           # only the MTP warning (the config has an MTP layer) is left
    assert len(w) == 1 and "no --mtp was given" in w[0]


def test_help_shows_compare_takes_layouts():
    # --compare is a flag with an optional list after it; its help showed "<bool>", as if it took true/false
    r = CliRunner().invoke(app, ["moe", "plan", "--help"], env={"COLUMNS": "200"})
    assert r.exit_code == 0
    line = next(l for l in r.stdout.splitlines() if "--compare " in l and "What-if" in l)
    assert "[LAYOUTS]" in line and "<bool>" not in line
    text = " ".join(l.strip(" │") for l in r.stdout.splitlines())
    assert "--compare tp8,tp4pp2,ep8; --compare alone for 6 default layouts" in text


@pytest.mark.parametrize("text", ["1,,2", "1,2,", ",1", "1, ,2"])
def test_empty_list_items_are_refused(text):
    # "--batch 1,,2" planned batches 1 and 2: a doubled or stray comma is a typo, refused with the value as typed
    from truepeak.cli.moe import comma_items, number_list
    from truepeak.errors import TruepeakError

    with pytest.raises(TruepeakError, match=rf"^--batch '{text}' has an empty item; give e.g. 1,8,64,512$"):
        number_list(text, "--batch")
    with pytest.raises(TruepeakError, match=r"has an empty item"):
        comma_items(text, "--weights", "bf16,fp8")
    r = run(*S1, "--batch", text)
    assert r.exit_code == 2
    assert r.output.strip().splitlines() == [f"error: --batch '{text}' has an empty item; give e.g. 1,8,64,512"]


def test_empty_compare_layout_is_refused():
    from truepeak.errors import TruepeakError
    from truepeak.moe.layout import parse_layouts

    r = run(*S1, "--compare", "tp8,,ep8")
    assert r.exit_code == 2
    assert r.output.strip().splitlines() == ["error: --compare 'tp8,,ep8' has an empty item; give e.g. "
                                             "tp8,tp4pp2,ep8"]
    with pytest.raises(TruepeakError, match=r"layouts 'tp8,ep8,' have an empty item"):
        parse_layouts("tp8,ep8,")
    assert [l.name for l in parse_layouts(" tp8 , ep8")] == ["tp8", "ep8"]


@pytest.mark.parametrize("args, words", [
    (("--mtp", "1", "--mtp-acceptance", "1.5"), "must be in (0, 1]"),
    (("--mtp", "1", "--mtp-acceptance", "0"), "must be in (0, 1]"),
    (("--mtp-acceptance", "0.8"), "needs --mtp N"),
    (("--weights", "experts=nvfp4"), "names no op group"),
    (("--calibration", "/nonexistent/cal.json"), "cannot read it"),
    # the values as typed, in the option's units (not the planner's B/s and seconds)
    (("--nodes", "2", "--network-bandwidth", "-5"), "--network-bandwidth -5 GB/s must be > 0 GB/s"),
    (("--nodes", "2", "--network-latency", "-1"), "--network-latency -1 µs must be >= 0 µs"),
])
def test_expected_step_input_refused_in_one_line(args, words):
    r = run("--model", "deepseek-v3", "--gpu", "h200", "--gpus", "8", *args)
    assert r.exit_code == 2 and words in r.output and len(r.output.strip().splitlines()) == 1, r.output
    assert "Traceback" not in r.output


def test_mtp_for_a_model_without_mtp_layers_is_refused():
    r = run("--model", "qwen3-30b-a3b", "--gpu", "h200", "--mtp", "1")
    assert r.exit_code == 2 and "has no MTP layers" in r.output and len(r.output.strip().splitlines()) == 1


def test_expected_line_levers_and_json_fields():
    r = run("--model", "deepseek-v3", "--gpu", "h200", "--gpus", "8", "--batch", "8", "--context", "1536")
    assert r.exit_code == 0, r.output
    line = next(l for l in r.stdout.splitlines() if l.strip().startswith("expected"))
    assert "626 tok/s" in line and "of the 1166 ceiling" in line and "small ops" in line
    assert "levers (expected, one change each, re-planned):" in r.stdout
    d = json.loads(run("--model", "deepseek-v3", "--gpu", "h200", "--gpus", "8", "--batch", "8", "--context",
                       "1536", "--json", "--mtp", "1").stdout)["plans"][0]
    assert d["step_s"] < d["expected_step_s"] and d["expected"]["tokens_per_step"] == pytest.approx(1.85)
    assert set(d["expected_time_by_group_s"]) >= {"routed_experts", "small_ops", "communication"}
    assert d["levers"] and d["levers_text"][0].startswith("+")


def test_a_calibration_from_another_gpu_is_used_with_a_line_saying_so(tmp_path):
    from importlib import resources

    doc = json.loads(resources.files("truepeak.moe").joinpath("calibrations/h200.json").read_text())
    path = tmp_path / "cal.json"
    path.write_text(json.dumps(doc))
    r = run("--model", "qwen3-30b-a3b", "--gpu", "b200", "--calibration", str(path))
    assert r.exit_code == 0, r.output
    warn = [l for l in r.stderr.splitlines() if "the --calibration file of the NVIDIA H200 SXM" in l]
    assert len(warn) == 1 and str(path) in warn[0]
    assert run("--model", "qwen3-30b-a3b", "--gpu", "h200", "--calibration", str(path)).stderr.strip() == ""


def test_nodes_that_do_not_divide_the_layout_are_refused_and_dividing_ones_cross_the_network():
    r = run("--model", "deepseek-v3", "--gpu", "h200", "--layout", "tp8", "--nodes", "3")
    assert r.exit_code == 2 and "--nodes 3 does not divide the 8 GPUs of layout tp8" in r.output
    assert len(r.output.strip().splitlines()) == 1
    d = json.loads(run("--model", "deepseek-v3", "--gpu", "h200", "--layout", "dp16ep16", "--nodes", "2",
                       "--batch", "64", "--json", "--no-levers").stdout)["plans"][0]
    a2a = [o for o in d["ops"] if o["name"] == "EP dispatch all-to-all"][0]
    # 16 ranks over 2 nodes: α (as inside a node, 11 µs) + S x 15/16 / 50 GB/s
    assert a2a["time_s"] == pytest.approx(11e-6 + a2a["bytes"] * 15 / 16 / 50e9)
    assert a2a["detail"]["network"] is True


def test_mtp_ceiling_has_its_own_line():
    """Regression: with --mtp the ceiling line gave the plain step (3.365 ms, 297 tok/s) while the expected line said
    "of the 463 ceiling". MTP 1 at 85 %: 1 + 0.85 = 1.85 tokens per sequence per step."""
    r = run("--model", "deepseek-v3", "--gpu", "h200", "--gpus", "8", "--mtp", "1", "--no-levers")
    assert r.exit_code == 0, r.output
    lines = r.stdout.splitlines()
    mtp = next(l for l in lines if l.strip().startswith("MTP ceiling"))
    expected = next(l for l in lines if l.strip().startswith("expected"))
    d = json.loads(run("--model", "deepseek-v3", "--gpu", "h200", "--gpus", "8", "--mtp", "1", "--no-levers",
                       "--json").stdout)["plans"][0]
    tok = round(d["expected"]["ceiling_tokens_per_s"])
    assert d["expected"]["ceiling_tokens_per_s"] > d["tokens_per_s"] * 1.5
    assert "1.85 tokens per sequence" in mtp and f"{tok} tokens/s total" in mtp and f"of the {tok} ceiling" in expected
    no_mtp = run("--model", "deepseek-v3", "--gpu", "h200", "--gpus", "8", "--no-levers").stdout
    assert "MTP ceiling" not in no_mtp


def test_per_group_weights_are_named_in_the_header():
    """Regression: --weights routed_experts=nvfp4 changed the numbers but the header named only the checkpoint's fp8.
    On an H200 (no fp4 tensor cores) nvfp4 is dequantised: 0.5625 B per value (4 bits + one e4m3 scale per 16)."""
    r = run("--model", "deepseek-v3", "--gpu", "h200", "--gpus", "8", "--weights", "routed_experts=nvfp4",
            "--no-levers")
    assert r.exit_code == 0, r.output
    line = next(l for l in r.stdout.splitlines() if l.strip().startswith("routed experts: weights"))
    assert "nvfp4 from --weights (0.5625 B/value)" in line and "dequantised" in line


def test_a_bottleneck_across_nodes_says_it_crosses_the_network():
    """Regression: TP16 over 2 nodes of 8 said "123 all-reduces ... over NVLink"; every TP all-reduce spans 16 GPUs,
    so it crosses the network."""
    base = ("--model", "deepseek-v3", "--gpu", "h200", "--gpus", "16", "--no-levers")
    two = next(l for l in run(*base, "--nodes", "2").stdout.splitlines() if "bottleneck" in l)
    one = next(l for l in run(*base).stdout.splitlines() if "bottleneck" in l)
    assert "123 all-reduces" in two and "over the network between nodes" in two
    assert "over NVLink" in one


def test_measured_records_of_another_device_are_left_out_with_a_warning():
    """Regression: --measured with a CPU run's records replaced the H200's roofline times by the CPU's (o_proj 2426 µs
    a call, a 152 ms "ceiling"). The committed CPU run has 41 records, all measured on the AMD EPYC; the H200 run's
    records are kept."""
    import os

    root = os.path.join(os.path.dirname(__file__), "..", "..", "docs", "results")
    cpu, h200 = os.path.join(root, "cpu", "results.jsonl"), os.path.join(root, "h200", "results.jsonl.gz")
    base = ("--model", "deepseek-v3", "--gpu", "h200", "--gpus", "8", "--no-levers")
    r = run(*base, "--measured", cpu)
    assert r.exit_code == 2 and "left out, measured on another device than the NVIDIA H200 SXM: 41 records of " \
                                "AMD EPYC" in r.output
    mixed = run(*base, "--measured", h200, "--measured", cpu)
    assert mixed.exit_code == 0, mixed.output
    assert ("warning: --measured: left out 41 records measured on another device than the NVIDIA H200 SXM "
            "(41 records of AMD EPYC)") in mixed.stderr
    only = run(*base, "--measured", h200)
    assert only.stdout == mixed.stdout and "left out" not in only.stderr
    # a run's folder stands for its results.jsonl, as in `truepeak report`
    folder = run(*base, "--measured", os.path.dirname(cpu))
    assert folder.exit_code == 2 and "41 records of AMD EPYC" in folder.output
