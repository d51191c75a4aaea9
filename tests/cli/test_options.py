"""The option text the CLI reads for `run` and `peak` (truepeak/cli/options.py): --formats and --mode; no torch
needed."""

from __future__ import annotations

import pytest

from truepeak.cli.options import mode_names, parse_formats, parse_modes
from truepeak.errors import ConfigError, TruepeakError, UnknownNameError


def test_parse_formats():
    assert parse_formats("bf16, fp8,BF16") == ["bf16", "fp8_e4m3"]
    assert parse_formats(None) is None and parse_formats("") is None
    with pytest.raises(UnknownNameError, match="known: fp32, tf32, bf16"):
        parse_formats("bf17")


def test_parse_modes():
    assert parse_modes(None) == ["sustained"] and parse_modes("both") == ["sustained", "burst"]
    assert parse_modes("burst") == ["burst"] and parse_modes("burst, sustained") == ["burst", "sustained"]
    with pytest.raises(TruepeakError, match="unknown mode 'fast'; accepted: sustained .* burst .* both") as info:
        parse_modes("fast")
    assert isinstance(info.value, ConfigError) and info.value.field == "modes"


def test_mode_names_keep_what_was_given():
    assert mode_names(None) is None and mode_names("both") == ["both"]
    assert mode_names("Burst, both") == ["Burst", "both"]
    with pytest.raises(ConfigError, match="unknown mode 'turbo'"):
        mode_names("turbo")


def test_help_text_breaks_long_examples_between_options():
    from truepeak.cli.options import EXAMPLE_WIDTH, help_text

    text = help_text(["Summary.", "  truepeak moe tune --model deepseek-v3 --weights bf16,fp8 --tokens-per-expert "
                      "1,2,4,8,16,32,64 --budget-s 600", "  truepeak compare a/results.jsonl b/results.jsonl    (a "
                      "run against another, its note on its own line)", "  truepeak specs h200", "Prose is left "
                      "alone however long it is, for rich to wrap at the terminal's width as it does any paragraph."])
    assert text.split("\n\n") == [
        "Summary.",
        "  truepeak moe tune --model deepseek-v3 --weights bf16,fp8 \\\n"
        "      --tokens-per-expert 1,2,4,8,16,32,64 --budget-s 600",
        "  truepeak compare a/results.jsonl b/results.jsonl\n"
        "      (a run against another, its note on its own line)",
        "  truepeak specs h200",
        "Prose is left alone however long it is, for rich to wrap at the terminal's width as it does any paragraph."]
    # a quoted argument is one word: never broken inside
    long = help_text(['  truepeak serve --launch "vllm serve Qwen/Qwen3-30B-A3B --port 8000" --concurrency 1,8,64 '
                      '--model qwen3-30b-a3b'])
    assert long.split("\n")[0] == '  truepeak serve --launch "vllm serve Qwen/Qwen3-30B-A3B --port 8000" \\'
    assert all(len(line) <= EXAMPLE_WIDTH for line in long.split("\n"))


def test_every_command_example_fits_80_columns():
    import truepeak.cli  # noqa: F401  (registers every command)
    from truepeak.cli import comm, compare, efficiency, moe, moe_bench, moe_tune, peak, report, run, serve, specs
    from truepeak.cli.options import EXAMPLE_WIDTH

    helps = [m.HELP for m in (comm, compare, efficiency, moe_bench, moe_tune, peak, report, run, serve, specs)]
    helps.append(moe.PLAN_HELP)
    examples = [p for h in helps for p in h.split("\n\n") if p.startswith("  truepeak ")]
    assert len(examples) >= 30
    long = [line for p in examples for line in p.split("\n") if len(line) > EXAMPLE_WIDTH]
    assert long == []
