"""Loading a model (truepeak.moe.config.loading, presets, hub): the presets, names, paths and hub ids."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from truepeak.errors import TruepeakError, UnknownNameError
from truepeak.moe.config import load_model


def test_preset_names_case_insensitive_and_alias():
    assert load_model("DeepSeek-V3") == load_model("deepseek-v3") == load_model("deepseek-r1")
    assert load_model(" GLM-5 ").name == "glm-5"


def test_unknown_name_suggests_closest():
    with pytest.raises(UnknownNameError) as err:
        load_model("glm5")
    msg = str(err.value)
    assert "glm-5" in msg.split("presets:")[0] and "config.json" in msg


def test_load_from_folder_and_file(tmp_path):
    cfg = json.loads((Path(__file__).parents[3] / "src/truepeak/moe/presets/mixtral-8x7b.json").read_text())
    folder = tmp_path / "Mixtral-8x7B-v0.1"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps(cfg))
    by_folder, by_file = load_model(str(folder)), load_model(folder / "config.json")
    assert by_folder == by_file and by_folder.name == "Mixtral-8x7B-v0.1"
    assert by_folder.num_moe_layers == 32
    with pytest.raises(TruepeakError, match="no config.json"):
        load_model(str(tmp_path))
    with pytest.raises(TruepeakError, match="no such file"):
        load_model(str(tmp_path / "missing.json"))
    (tmp_path / "bad.json").write_text("{not json")
    with pytest.raises(TruepeakError, match="not valid JSON"):
        load_model(str(tmp_path / "bad.json"))


def test_hub_id_without_huggingface_hub(monkeypatch):
    monkeypatch.setitem(sys.modules, "huggingface_hub", None)  # import fails
    with pytest.raises(TruepeakError, match="pass a local path to its config.json"):
        load_model("zai-org/GLM-5")


def test_hub_id_fetch_failure(monkeypatch):
    import socket
    import types

    def offline(repo_id, filename, **kw):      # not in the cache (local_files_only), then the download fails
        raise OSError("We couldn't connect to 'https://huggingface.co'")

    monkeypatch.setitem(sys.modules, "huggingface_hub", types.SimpleNamespace(hf_hub_download=offline))
    monkeypatch.setattr(socket, "create_connection", lambda *a, **k: types.SimpleNamespace(close=lambda: None))
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    with pytest.raises(TruepeakError, match="could not fetch config.json of 'org/model'.*local path"):
        load_model("org/model")


def test_hub_id_fetched(monkeypatch, tmp_path):
    import types

    src = Path(__file__).parents[3] / "src/truepeak/moe/presets/qwen3-30b-a3b.json"
    calls = []

    def download(repo_id, filename, **kw):     # found in the local cache (local_files_only=True) on the first call
        calls.append((repo_id, filename))
        return str(src)

    monkeypatch.setitem(sys.modules, "huggingface_hub", types.SimpleNamespace(hf_hub_download=download))
    m = load_model("Qwen/Qwen3-30B-A3B")
    assert calls == [("Qwen/Qwen3-30B-A3B", "config.json")]
    assert (m.name, m.source, m.num_moe_layers) == ("Qwen/Qwen3-30B-A3B", "hf:Qwen/Qwen3-30B-A3B", 48)


@pytest.mark.parametrize("spec, suggested", [
    ("kimi-k2-instruc", "closest: kimi-k2;"),   # the alias kimi-k2-instruct is suggested as its preset
    ("deepsek-v3", "closest: deepseek-v3;"),
    ("nosuch", None),                           # nothing alike: no suggestion (it was kimi-k2-instruct)
])
def test_unknown_model_suggests_only_listed_presets(spec, suggested):
    with pytest.raises(UnknownNameError) as info:
        load_model(spec)
    text = str(info.value)
    assert (suggested in text) if suggested else ("closest" not in text)
    assert "kimi-k2-instruct" not in text
