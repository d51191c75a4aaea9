"""The command-line outputs that explain a number point to something a user can open: a section of docs/method.md
that exists, or a public source (catalog source keys are cited in full by ``truepeak specs --sources``); never a
file outside the repository or a bare case id.

One test per output that used to name such a file: the `run` note of a cache-resident copy, `efficiency` on an
RTX 4090, the `moe plan` conclusions on a PCIe-only machine, its tokens-per-expert line, and `specs --claim`.
"""

from __future__ import annotations

import dataclasses
import re
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

import truepeak.cli.efficiency  # noqa: F401  (registers the command)
import truepeak.cli.moe  # noqa: F401
import truepeak.cli.specs  # noqa: F401
from truepeak.cli.app import app, main

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from test_references import broken_method_refs, headings, unfollowable  # noqa: E402

WS = "NVIDIA RTX PRO 6000 Blackwell Workstation Edition"


def run(*args: str):
    result = CliRunner().invoke(app, list(args))
    assert result.exit_code == 0, result.output
    return result.output


def followable(text: str) -> None:
    """No file outside the repository, no case id, and every docs/method.md section named exists."""
    assert unfollowable(text) == []
    assert broken_method_refs(text) == []


def test_efficiency_on_an_rtx_4090_cites_the_accumulate_rate_section():
    """165.2 TFLOPS dense bf16 with fp32 accumulate (half the fp16-accumulate 330.3): 164.81 / 165.2 = 99.8 %."""
    out = run("efficiency", "--gpu", "rtx-4090", "--format", "bf16", "--tflops", "164.81")
    assert "164.8 TFLOPS = 99.8 % of the dense peak" in out
    peak = next(line for line in out.splitlines() if "dense peak" in line and "[" in line)
    assert "165.2 TFLOPS" in peak and "NANOCHAT (165.2 non-sparse)" in peak
    assert "docs/method.md, 'GeForce accumulate rates'" in peak
    assert "GeForce accumulate rates" in headings()
    followable(out)


def test_moe_plan_on_pcie_cites_the_communication_sections():
    """TP8 over PCIe only is flagged at batch 1 (latency) and 512 (bus bandwidth), each with its method section."""
    out = run("moe", "plan", "--model", "glm-5", "--gpu", WS, "--gpus", "8", "--weights", "nvfp4", "--batch", "1,512")
    flags = [line for line in out.splitlines() if "communication-bound: TP8 over PCIe only" in line]
    assert len(flags) == 2
    assert all(line.endswith("on PCIe boxes (see docs/method.md, 'Small-message latency')") for line in flags)
    assert "~20-35 µs of latency whatever its size" in flags[0]
    assert "does not grow with the GPU count (see docs/method.md, 'busbw and algbw')" in flags[1]
    followable(out)


def test_moe_plan_tokens_per_expert_line_names_the_padding_section():
    """Mean-based padded share 1 − r/(ceil(r/B)·B): batch 1, r = 1·8/256 = 0.03125: 1 − 0.03125/16 = 99.8 % and
    1 − 0.03125/64 = 100.0 %; batch 512, r = 16: 0.0 % and 1 − 16/64 = 75.0 %."""
    out = run("moe", "plan", "--model", "glm-5", "--gpu", WS, "--gpus", "8", "--weights", "nvfp4", "--batch", "1,512")
    lines = [line for line in out.splitlines() if "tokens/expert" in line]
    assert len(lines) == 2
    assert "(mean-based: 99.8 % / 100.0 %; docs/method.md, 'Padding per expert')" in lines[0]
    assert "(mean-based: 0.0 % / 75.0 %; docs/method.md, 'Padding per expert')" in lines[1]
    assert "C17" not in out
    followable(out)


def test_specs_claim_gives_the_arithmetic_and_its_source_keys():
    """The dense FP4 of the RTX PRO 6000 Workstation: 188 SMs x 2.617 GHz x 4096 FLOP/clk/SM = 2015.2 TFLOPS, half the
    whitepaper's 4030.4 sparse; every key it rests on is cited in full by `specs --sources`."""
    out = run("specs", "rtx-pro-6000-ws", "--claim", "4 PFLOPS FP4")
    assert ("dense = 188 SMs (CFE #1164) x 2.617 GHz (PROWP) x 4096 FLOP/clk/SM (CFE) = 2015.2 = 4030.4 / 2"
            in " ".join(out.split()))
    assert 188 * 2.617e9 * 4096 / 1e12 == pytest.approx(2015.2, abs=0.05)
    followable(out)
    sources = run("specs", "--sources")
    for key, cited in (("PROWP", "RTX-Blackwell-PRO-GPU-Architecture-v1.0.pdf"), ("CFE", "NVIDIA/cudnn-frontend#650")):
        line = " ".join(sources.split())
        assert re.search(rf"\b{key}\b", line) and cited in line, key
    followable(sources)


def test_run_note_for_a_cache_resident_copy_cites_the_cache_section(tmp_path, monkeypatch, capsys, stub_timing):
    """A quick copy of 32 MiB per buffer on a 64 MiB cache: working set 64 MiB < 2 x 64 MiB, so no roofline memory
    ceiling, and the note says where the 2x L2 rule is explained."""
    pytest.importorskip("torch")
    from truepeak.bench import membw
    from truepeak.bench import run as R
    from truepeak.hardware.detect import detect_cpu

    stub_timing(monkeypatch, gemm_s=0.1, copy_s=0.01)
    monkeypatch.setattr(membw, "QUICK_COPY_MAX_BYTES", 4 * 2**20)
    dev = dataclasses.replace(detect_cpu(), l2_bytes=64 * 2**20)
    monkeypatch.setattr(R.job, "detect", lambda device: dev)
    with pytest.raises(SystemExit) as info:
        main(["run", "--quick", "--device", "cpu", "--out", str(tmp_path / "run"), "--no-progress"])
    err = capsys.readouterr().err
    assert info.value.code == 0, err
    note = next(line for line in err.splitlines() if "no roofline memory ceiling" in line)
    assert "working set (64 MiB, source + destination) is under 2x the 64 MiB cache" in note
    assert "(see docs/method.md, 'Cache-resident working sets'); % of roofline is left empty" in note
    followable(err)


def test_copy_note_for_a_buffer_under_8x_the_cache_cites_the_cache_section():
    """A real 1 MiB copy on this CPU, told its cache is 64 MiB: 1 MiB < 8 x 64 MiB, so the note warns and says why."""
    pytest.importorskip("torch")
    from truepeak.bench import membw
    from truepeak.hardware.detect import detect_cpu

    dev = dataclasses.replace(detect_cpu(), l2_bytes=64 * 2**20)
    res = membw.measure_copy(dev, nbytes=2**20, warmup_s=0.0, budget_s=0.01)
    assert res.notes == ["buffer 1 MiB is under 8x the 64 MiB cache: part of the traffic may be served from cache "
                         "(see docs/method.md, 'Cache-resident working sets')"]
    followable(res.notes[0])
