"""The calibration points: what runs on a CPU (byte counts, the file), and the measurement itself on a GPU."""

from __future__ import annotations

import json
import math

import pytest

from truepeak.bench import calibrate as C
from truepeak.errors import UnsupportedError


def test_attention_bytes_count_k_and_v_once():
    # 4 sequences x 8 heads x 1024 tokens x 128 dims x 2 B, for K and for V; plus q and the output (1 token each)
    assert C.attention_bytes(4, 1024) == 2 * 4 * 8 * 1024 * 128 * 2 + 2 * 4 * 8 * 128 * 2 == 16_793_600


def test_points_file_writes_non_finite_as_null(tmp_path):
    p = C.write_points({"points": [{"seconds": math.nan, "bytes": 3}], "read_bandwidth_bytes_per_s": math.inf},
                       tmp_path / "sub" / "points.json")
    assert json.loads(p.read_text()) == {"points": [{"seconds": None, "bytes": 3}], "read_bandwidth_bytes_per_s": None}


def test_measure_needs_a_gpu(tmp_path, monkeypatch):
    torch = pytest.importorskip("torch")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    with pytest.raises(UnsupportedError, match="CUDA GPU"):
        C.measure(tmp_path / "p.json")
    assert not (tmp_path / "p.json").exists()


@pytest.mark.gpu
def test_gpu_quick_calibration_points(tmp_path):
    doc = C.measure(tmp_path / "p.json", quick=True)
    kinds = {p["kind"] for p in doc["points"]}
    assert kinds == {"kernel", "small_op", "gemm", "attention"}
    kernel = doc["points"][0]
    # a kernel inside a graph costs between 0.3 and 20 us on any recent GPU; eager launches cost more
    assert 0.3e-6 < kernel["graph_s"] < 20e-6 and kernel["eager_s"] > kernel["graph_s"]
    ok = [p for p in doc["points"] if "error" not in p and p["kind"] in ("gemm", "attention")]
    assert ok and all(0 < p["memory_fraction"] <= 1.1 for p in ok)
    assert json.loads((tmp_path / "p.json").read_text())["points"][0]["kind"] == "kernel"


def test_points_document_environment_is_json():
    """The points document's environment is the record schema's Environment as JSON (it once was the typed object,
    which json.dumps refuses)."""
    import json

    from truepeak.bench.calibrate import _environment

    env = _environment(["benchmarks/calibration_points.py", "--out", "x.json"])
    assert json.loads(json.dumps(env))["argv"] == ["benchmarks/calibration_points.py", "--out", "x.json"]
