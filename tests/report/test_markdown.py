"""summary.md from hand-made records (tests/report/conftest.py): the table pinned, the method stated from the
records, the best rate per format picked by hand."""

from __future__ import annotations

from truepeak.records import Record
from truepeak.report.markdown import best_per_format, markdown_table, summary_markdown, write_summary

GOLDEN_TABLE = """\
| shape (MxNxK) | format | time (µs) | TFLOPS | GB/s | % dense peak | % roofline | bound | % peak @ clock | status | note |
| --- | --- | ---: | ---: | ---: | ---: | ---: | --- | ---: | --- | --- |
| copy 2 GiB | copy | 1000 | - | 4295 | - | 89.5 | memory | - | ok |  |
| 16x4096x7168 | bf16 | 40 | 23.49 | 1477 | 2.37 | 30.8 | memory | 2.48 | ok |  |
| 8192x8192x8192 | nvfp4 | - | - | - | - | - | - | - | skipped | nvfp4 GEMM needs sm_100 or sm_120; this device is sm_90 |

TFLOPS = 1e12 FLOP/s (TOPS for int8), GB/s = 1e9 B/s (decimal); efficiency is against the DENSE peak, never the \
2:4-sparse one; mode: sustained."""


def test_markdown_table_is_pinned(three):
    assert markdown_table(three) == GOLDEN_TABLE


def test_cells_with_a_pipe_are_escaped(three, edit):
    odd = edit(three[2], reason="a | b\nc")
    assert "| a \\| b c |" in markdown_table([odd])


def test_best_per_format_by_hand(four):
    # bf16: 4096^3 at 91.63 TFLOPS beats 16x4096x7168 at 23.49; nvfp4 has no ok record; the copy is no GEMM
    assert [r.workload.label for r in best_per_format(four)] == ["4096x4096x4096"]
    assert best_per_format(four[:3]) == [four[1]]
    assert best_per_format([four[0], four[2]]) == []


def test_summary_sections(four):
    text = summary_markdown(four)
    assert text.startswith("# truepeak run: NVIDIA H200\n")
    for section in ("## Device", "## Environment", "## Method", "## Memory bandwidth",
                    "## Best measured TFLOPS per format", "## All results"):
        assert f"\n{section}\n" in text
    assert ("- GPU: NVIDIA H200, compute capability 9.0, 132 SMs, L2 60 MiB, memory 139.7 GiB, "
            "max SM clock 1.980 GHz") in text
    assert "- copy 2 GiB: **4295 GB/s** counting read + write = 89.5 % of the catalog's 4800 GB/s" in text
    assert "| bf16 | 91.63 | 9.26 | 989.4 | 4096x4096x4096 | - | - |" in text
    assert "- nvfp4: skipped: nvfp4 GEMM needs sm_100 or sm_120; this device is sm_90" in text
    assert "- Measured: 2026-11-30T01:00:00.000Z to 2026-11-30T01:00:02.000Z (UTC)" in text
    assert text.endswith(" mode: sustained.\n")


def test_method_is_rendered_from_the_records(four):
    text = summary_markdown(four)
    # from run_config: the settling GEMMs, the budgets, the graph threshold; from the measurements: 1 of 2 graphs
    assert ("- Warm-up: 3 s of back-to-back bf16 8192x8192x8192 GEMMs once at the start (clock and power settle), "
            "then per case 0.1 s warm-up + 0.3 s timed (decode shapes), 1.5 s + 1 s (large squares), "
            "0.3 s + 0.5 s (copy)") in text
    assert "(CUDA-graph replays for kernels under 50 µs: 1 of 2 GEMM cases)" in text
    # from rotation and correctness
    assert "- Rotation: 2 to 3 input sets (A, B, C) per GEMM, so that they total at least 2x the 60 MiB cache" in text
    assert "tolerances bf16 0.02); 2 of 2 passed" in text
    assert "- Inputs: uniform random in [-1, 1]" in text


def test_method_follows_other_settings(four, edit):
    cfg = {**four[1].run_config, "settle": None, "graph_threshold_s": 60e-6,
           "budget_settings": {**four[1].run_config["budget_settings"], "warmup_s": 0.5}}
    capped = {"n_sets": 1, "wanted_sets": 4, "capped": True, "l2_bytes": 62914560,
              "note": "80% of 1,000 B free GPU memory holds 1 sets"}
    int8 = edit(four[3], format="int8", correctness={"tolerance": 0.0, "passed": True}, rotation=capped)
    recs = [edit(r, run_config=cfg) for r in (four[1], int8)]
    text = summary_markdown(recs)
    assert "- Warm-up per case: 0.5 s warm-up + 0.3 s timed" in text
    assert "kernels under 60 µs" in text
    assert "tolerances bf16 0.02, int8 exact" in text
    assert "- Rotation capped by memory in 1 case(s) (the note column says which): 80% of 1,000 B free" in text


def test_quick_cpu_title_and_device():
    cpu_env = {"cpu": "AMD EPYC", "device": {"kind": "cpu", "name": "AMD EPYC", "sm_count": 2,
                                             "l2_bytes": 32 * 2**20, "max_sm_clock_hz": 2.596e9}}
    rec = Record.from_dict({"schema_version": 3, "kind": "membw", "status": "failed", "reason": "out of memory: x",
                            "mode": "cpu", "workload": {"label": "copy 32 MiB", "nbytes": 32 * 2**20},
                            "env": cpu_env, "run_config": {"quick": True}})
    text = summary_markdown([rec])
    assert text.startswith("# truepeak run: AMD EPYC (quick)\n")
    assert "- CPU: AMD EPYC, 2 cores, last-level cache 32 MiB, memory unknown, clock 2.596 GHz" in text
    assert "- copy 32 MiB: failed: out of memory: x" in text
    assert "1 case(s) failed" in text


def test_no_records_still_renders():
    assert "## All results" in summary_markdown([])


def test_write_summary_writes_the_summary(four, tmp_path):
    path = write_summary(four, tmp_path / "summary.md")
    assert path.read_text(encoding="utf-8") == summary_markdown(four)


def test_an_interrupted_summary_says_so_under_the_title(four, tmp_path):
    line = "Interrupted after 2 of 4 cases; continue with: truepeak run --resume --out r --quick"
    text = summary_markdown(four[:2], notice=line)
    assert text.startswith(f"# truepeak run: NVIDIA H200\n\n**{line}**\n\n## Device\n")
    assert write_summary(four[:2], tmp_path / "s.md", notice=line).read_text(encoding="utf-8") == text
    assert "Interrupted" not in summary_markdown(four[:2])


def test_best_table_says_clock_on_a_cpu_and_sm_clock_on_a_gpu(four, edit):
    """A CPU has cores, not SMs: its best-per-format table heads the clock column "clock (MHz)"."""
    cpu_env = {"cpu": "AMD EPYC", "device": {"kind": "cpu", "name": "AMD EPYC", "sm_count": 2}}
    gemm = edit(four[3], env=cpu_env, mode="cpu", format="fp32", **{"measurement.mode": "cpu"})
    cpu_text = summary_markdown([gemm])
    assert "| shape (MxNxK) | clock (MHz) | % of peak at that clock |" in cpu_text
    assert "SM clock" not in cpu_text
    no_device = summary_markdown([edit(gemm, env={})])  # no device in the records: the cpu mode says it
    assert "| clock (MHz) |" in no_device and "SM clock" not in no_device
    assert "| shape (MxNxK) | SM clock (MHz) | % of peak at that clock |" in summary_markdown(four)


def test_method_names_burst_mode_and_best_is_per_mode(four, edit):
    """Regression: summary.md of a `--mode both` run described only the sustained mode and merged both modes into one
    best row per format (the burst maximum shown without its mode)."""
    burst = edit(four[3], mode="burst", time=1.2e-3, key="burst",
                 **{"measurement.mode": "burst", "measurement.burst_gap_s": 1.5e-3,
                    "derived.flop_per_s": 2 * 4096**3 / 1.2e-3})
    text = summary_markdown([*four, burst])
    assert "- Mode: **burst**: a 1.5 ms idle gap" in text
    best = text[text.index("## Best measured"):text.index("## All results")]
    # bf16 sustained: 4096^3 in 1.5 ms = 91.63 TFLOPS; bf16 burst: 4096^3 in 1.2 ms = 114.5 TFLOPS
    assert "| format | mode | best TFLOPS |" in best
    assert "| bf16 | sustained | 91.63 |" in best and "| bf16 | burst | 114.5 |" in best


def test_records_of_two_devices_get_a_table_each(three, edit):
    """Regression: records of the same case from two devices sat in one table as two unnamed rows (6.292 and
    6.928 ms of 1x4096x7168 fp32). With two devices each kind's table is split and named by device, in Markdown and
    in the HTML report; with one device the tables are not."""
    from truepeak.report.html import html_report
    from truepeak.report.markdown import report_markdown

    other = [edit(r, **{"env.device.name": "NVIDIA H100 80GB HBM3", "run_config.device_name": "NVIDIA H100 80GB HBM3"})
             for r in three]
    md = report_markdown(list(three) + other)
    assert "## Records: membw on NVIDIA H200 (1)" in md and "## Records: membw on NVIDIA H100 80GB HBM3 (1)" in md
    assert "## Records: gemm on NVIDIA H200 (2)" in md
    one = report_markdown(list(three))
    assert "## Records: gemm (2)" in one and " on NVIDIA H200 (" not in one
    page = html_report(list(three) + other)
    assert "gemm on NVIDIA H100 80GB HBM3: 2 record(s)" in page


def test_a_resumed_run_names_each_command(four, edit):
    """Regression: after --resume, summary.md named only the first command, though the later records came from the
    second."""
    first = "truepeak run --out r2"
    second = "truepeak run --resume --out r2"
    recs = [edit(r, **{"env.command_line": first}) for r in four[:2]] + \
           [edit(r, **{"env.command_line": second}) for r in four[2:]]
    text = summary_markdown(recs)
    assert f"- Commands, in order: `{first}`; then `{second}`" in text
    assert f"- Command: `{first}`" in summary_markdown(recs[:2])
