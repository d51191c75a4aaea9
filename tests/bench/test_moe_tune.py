"""The tuner (truepeak.bench.moe_tune): its settings' checks (pure), and one small search run end to end on the CPU
in Triton's interpreter: records appended, the table written and read back, the default's figure beside the choice,
and --resume replaying the search from the records without measuring again; the report's table of it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from truepeak.bench.moe_tune.config import TuneConfig, parse_weights
from truepeak.errors import ConfigError


def test_parse_weights_takes_default_and_named_activations():
    assert parse_weights("bf16,fp8,fp8:fp16,mxfp4,nvfp4") == (
        ("bf16", "bf16"), ("fp8", "fp8"), ("fp8", "fp16"), ("mxfp4", "fp8"), ("nvfp4", "fp16"))
    # a ':' with nothing after it is a typo, not the default
    with pytest.raises(ConfigError, match=r"^--weights 'nvfp4:': give the activations after ':' \(fp8 or fp16\), "
                                          "or drop the ':' for nvfp4's default$"):
        parse_weights("bf16,nvfp4:")


@pytest.mark.parametrize("kw,field", [
    ({"weights": ("bf16", "bf16")}, "weights"), ({"weights": ()}, "weights"),
    ({"tokens_per_expert": (4, 5)}, "tokens_per_expert"), ({"tokens_per_expert": ()}, "tokens_per_expert"),
    ({"tp": 0}, "tp"), ({"ep": 2, "tp": 2}, "tp"), ({"budget_s": float("inf")}, "budget_s"),
    ({"warmup_s": -1}, "warmup_s"), ({"model": " "}, "model"), ({"seed": True}, "seed"),
])
def test_config_names_the_field(kw, field):
    args = {"model": "deepseek-v3", "weights": ("bf16",), "tokens_per_expert": (1, 2), **kw}
    with pytest.raises(ConfigError) as exc:
        TuneConfig(**args)
    assert exc.value.field == field and "\n" not in str(exc.value)


def test_tokens_per_expert_stop_at_the_largest_bucket():
    # bucket_of keys 1024 for t in [1024 / sqrt(2), 1024 * sqrt(2)) = [724.1, 1448.2); beyond it a table has no key
    base = {"model": "deepseek-v3", "weights": ("bf16",)}
    assert TuneConfig(**base, tokens_per_expert=(1448,)).tokens_per_expert == (1448.0,)
    with pytest.raises(ConfigError, match=r"^--tokens-per-expert 1449: beyond the largest bucket of a tuned table "
                                          r"\(1024, which holds values below 1448\)$"):
        TuneConfig(**base, tokens_per_expert=(1, 1449))


def test_under_one_token_in_the_layer_is_refused_before_anything_runs(tmp_path):
    pytest.importorskip("torch")
    from truepeak.bench.moe_tune import run_tune
    from truepeak.errors import TruepeakError

    # DeepSeek-V3: T = tpe * 256 / 8, so 0.02 tokens per expert is 0.64 tokens; the fewest is 1 / 32 = 0.03125
    cfg = TuneConfig(model="deepseek-v3", weights=("bf16",), tokens_per_expert=(0.02,))
    with pytest.raises(TruepeakError, match=r"^tokens per expert 0.02 is 0.64 tokens in the layer \(T = tpe·E/k with "
                                            r"E=256, k=8\); the fewest is one token, 0.03125 per expert$"):
        run_tune(cfg, tmp_path / "t", read_bw=1e9)
    assert not (tmp_path / "t").exists()


def test_config_layout_names():
    base = {"model": "m", "weights": ("bf16",), "tokens_per_expert": (1,)}
    assert [TuneConfig(**base, **kw).layout for kw in ({}, {"tp": 8}, {"ep": 8})] == ["single", "tp8", "ep8"]


_CHILD = r"""
import json, sys
from truepeak.bench.moe import ExpertShape
from truepeak.bench.moe_tune import TuneConfig, run_tune
from truepeak.records import read_records
out = sys.argv[1]
shape = ExpertShape("tiny", 128, 128, 4, 4, 2)
cfg = TuneConfig(model="tiny", weights=("bf16",), tokens_per_expert=(2,), budget_s=6.0, search_budget_s=0.01,
                 final_budget_s=0.01)
r = run_tune(cfg, out, shape=shape, read_bw=1e9, commit="abc", env=None)
n1 = len(read_records(r.records_path))
r2 = run_tune(cfg, out, shape=shape, read_bw=1e9, commit="abc", resume=True)
n2 = len(read_records(r.records_path))
# a start table: its entry is the second candidate, right after the default
import dataclasses
from truepeak.kernels.moe_triton import KernelConfig
(key, entry), = r.table.entries.items()
start = KernelConfig(16, 32, 64, 4, 1, group_m=1)
table = dataclasses.replace(r.table, entries={key: dataclasses.replace(entry, gate_up=start, down=start)})
cfg3 = TuneConfig(model="tiny", weights=("bf16",), tokens_per_expert=(2,), budget_s=8.0, search_budget_s=0.01,
                  final_budget_s=0.01)
r3 = run_tune(cfg3, out + "-start", shape=shape, read_bw=1e9, commit="abc",
              start_table=table)
tunes = [x.workload.triton_tune for x in read_records(r3.records_path)]
print("RESULT " + json.dumps({"table": r.table.to_dict(), "table2": r2.table.to_dict(), "n1": n1, "n2": n2,
                              "timed": r.timed, "path": str(r.table_path),
                              "statuses": [x.status.value for x in read_records(r.records_path)],
                              "keys": [x.key for x in read_records(r.records_path)],
                              "start_tunes": tunes[:2]}))
"""


@pytest.fixture(scope="module")
def tuned(tmp_path_factory):
    pytest.importorskip("torch")
    pytest.importorskip("triton")
    import truepeak

    out = tmp_path_factory.mktemp("tune") / "run"
    src = str(Path(truepeak.__file__).resolve().parents[1])
    env = {**os.environ, "TRITON_INTERPRET": "1", "PYTHONPATH": src + os.pathsep + os.environ.get("PYTHONPATH", "")}
    proc = subprocess.run([sys.executable, "-c", _CHILD, str(out)], env=env, capture_output=True, text=True,
                          timeout=600)
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT ")]
    assert proc.returncode == 0 and lines, proc.stderr[-3000:]
    return json.loads(lines[-1][len("RESULT "):])


def test_a_small_search_writes_records_and_a_table(tuned):
    t = tuned["table"]
    assert Path(tuned["path"]).name == "E=4,N=128,H=128,device_name=cpu.json" and Path(tuned["path"]).is_file()
    e = t["configs"]["bf16"]["bf16"]["2"]
    assert t["truepeak_commit"] == "abc" and t["read_bandwidth_bytes_per_s"] == 1e9 and t["layout"] == "single"
    # the default (choose_config at 2 tokens per expert: 16-token blocks, 64 / 128 weight rows) was timed first
    assert e["default_read_bandwidth_fraction"] > 0 and e["candidates"] >= 1 and e["gate_up"]["block_m"] in (16, 32)
    # the entry's figure is the faster of the two final timings
    assert e["read_bandwidth_fraction"] >= e["default_read_bandwidth_fraction"]
    # every timed search candidate and the final timings are records; each passed the reference check
    assert tuned["n1"] >= tuned["timed"] + 1 and set(tuned["statuses"]) == {"ok"}


def test_resume_measures_nothing_again(tuned):
    # the resumed run reuses the first run's records (by key) and goes on from there with its own budget: no
    # candidate is measured twice, and the search went on from where the first stopped
    keys = tuned["keys"]
    assert len(set(keys)) == len(keys) and tuned["n2"] >= tuned["n1"]
    e1, e2 = (tuned[t]["configs"]["bf16"]["bf16"]["2"] for t in ("table", "table2"))
    assert e2["candidates"] >= e1["candidates"]


def test_a_start_table_entry_is_tried_after_the_default(tuned):
    first, second = tuned["start_tunes"]
    assert first["phase"] == second["phase"] == "search"
    assert first["gate_up"]["group_m"] == 0 and first["gate_up"]["block_n"] == 64  # choose_config at 2 tokens
    start = {"block_m": 16, "block_n": 32, "block_k": 64, "num_warps": 4, "num_stages": 1, "group_m": 1}
    for k in ("gate_up", "down"):
        assert {f: second[k][f] for f in start} == start


def test_report_renders_the_table(tuned):
    from truepeak.report.tune import config_text, render_table

    lines = render_table(tuned["table"], None, ["fp8 fp8 activations, 1 tokens per expert"], dropped=3)
    assert lines[0].split()[:3] == ["weights", "activations", "tok/exp"]
    row = lines[2].split()
    e = tuned["table"]["configs"]["bf16"]["bf16"]["2"]
    assert row[:3] == ["bf16", "bf16", "2"] and row[4] == f"{100 * e['read_bandwidth_fraction']:.1f}"
    assert " ".join(row).count(config_text(e["gate_up"])) >= 1
    assert any("3 candidates dropped before timing" in ln for ln in lines)
    assert any("not reached within the budget: fp8 fp8 activations, 1 tokens per expert" in ln for ln in lines)
    assert config_text({"block_m": 16, "block_n": 64, "block_k": 128, "num_warps": 4, "num_stages": 3,
                        "maxnreg": 128, "prefetch": True}) == "m16 n64 k128 w4 s3 r128 pf"
    assert config_text({"block_m": 32, "block_n": 128, "block_k": 128, "num_warps": 8, "num_stages": 4,
                        "group_m": 1, "persistent": False}) == "m32 n128 k128 w8 s4 g1"
