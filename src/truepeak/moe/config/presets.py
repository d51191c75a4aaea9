"""The bundled presets: ``config.json`` files of released checkpoints (sources in presets/README.md)."""

from __future__ import annotations

from importlib import resources

#: Other names accepted for a preset (lower case) -> preset name. DeepSeek-R1 shares DeepSeek-V3's architecture.
PRESET_ALIASES = {"deepseek-r1": "deepseek-v3", "deepseek-v3.1": "deepseek-v3", "kimi-k2-instruct": "kimi-k2"}


def _preset_dir():
    return resources.files("truepeak.moe") / "presets"


def preset_names() -> list[str]:
    """Names of the bundled presets (``config.json`` files of released checkpoints, architecture fields and
    ``quantization_config``; sources in presets/README.md), sorted."""
    return sorted(p.name[:-5] for p in _preset_dir().iterdir() if p.name.endswith(".json"))
