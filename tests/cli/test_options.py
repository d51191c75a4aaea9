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
