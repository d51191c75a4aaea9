"""Loading an MoE model from a path to a ``config.json``, a preset name or a Hugging Face hub id."""

from __future__ import annotations

import os
from pathlib import Path

from truepeak.errors import TruepeakError, UnknownNameError, closest
from truepeak.moe.config.families import _read_json, parse_config
from truepeak.moe.config.hub import _HUB_ID, _fetch_hub_config
from truepeak.moe.config.model import MoEModel
from truepeak.moe.config.presets import PRESET_ALIASES, _preset_dir, preset_names


def load_model(spec: str | os.PathLike) -> MoEModel:
    """Load an MoE model from a path, a preset name or a Hugging Face hub id.

    Resolution order: an existing file (a ``config.json``) or folder containing ``config.json``; a preset name
    (case-insensitive, also :data:`PRESET_ALIASES`); a hub id ``org/name``, fetched with
    ``huggingface_hub.hf_hub_download(repo_id, "config.json")`` (needs the package and network access).

    Raises:
        UnknownNameError: not a path, not a preset, not of the form ``org/name``; names the closest presets.
        TruepeakError: the file/folder is unreadable or not JSON; a hub fetch failed (not installed, offline, no such
            repo, gated) — the message says to pass a local path to config.json; anything :func:`parse_config` raises.
    """
    if isinstance(spec, os.PathLike):
        spec = os.fspath(spec)
    if not isinstance(spec, str) or not spec.strip():
        raise TruepeakError(f"model {spec!r} must be a path to config.json, a preset name or a Hugging Face id")
    spec = spec.strip()
    path = Path(spec).expanduser()
    if path.is_dir():
        path = path / "config.json"
        if not path.is_file():
            raise TruepeakError(f"folder {spec!r} has no config.json; pass the path of the model's config.json")
    if path.is_file():
        try:
            text = path.read_text()
        except OSError as exc:
            raise TruepeakError(f"cannot read {str(path)!r}: {exc.strerror or exc}") from None
        stem = path.parent.name if path.name == "config.json" and path.parent.name else path.stem
        return parse_config(_read_json(text, repr(str(path))), stem, source=str(path))

    key = PRESET_ALIASES.get(spec.lower(), spec.lower())
    names = preset_names()
    if key in names:
        text = (_preset_dir() / f"{key}.json").read_text()
        return parse_config(_read_json(text, f"preset {key!r}"), key, source=f"preset:{key}")

    looks_like_path = spec.endswith(".json") or spec.startswith((".", "/", "~")) or "\\" in spec
    if _HUB_ID.match(spec) and not looks_like_path:
        return parse_config(_fetch_hub_config(spec), spec, source=f"hf:{spec}")
    if looks_like_path:
        raise TruepeakError(f"no such file: {spec!r}; pass the path of a config.json, a folder holding one, a preset "
                            f"({', '.join(names)}) or a Hugging Face id org/name")
    # an alias is suggested as the preset it names, so every suggestion is in the list that follows
    near = list(dict.fromkeys(PRESET_ALIASES.get(c, c) for c in closest(spec, list(names) + list(PRESET_ALIASES),
                                                                         cutoff=0.5)))
    hint = f"; closest: {', '.join(near)}" if near else ""
    raise UnknownNameError(f"unknown model {spec!r}{hint}; presets: {', '.join(names)}; or pass a path to config.json "
                           f"or a Hugging Face id org/name")
