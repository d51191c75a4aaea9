"""`truepeak compare`: records matched by kind, workload, backend, format and mode; the verdict respects the measured
noise (nvbench's compare rule with IQR/median and a 1 % floor), computed by hand here."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import truepeak.cli  # noqa: F401  (registers every command)
from truepeak.cli.app import main
from truepeak.errors import TruepeakError
from truepeak.records import Record
from truepeak.report.compare import compare, compare_text, noise, verdict
from truepeak.report.load import Results


def call(capsys, *args: str) -> tuple[int, str, str]:
    with pytest.raises(SystemExit) as info:
        main(list(args))
    captured = capsys.readouterr()
    return info.value.code, captured.out, captured.err


def timed(rec: Record, time_s: float, rel_iqr: float | None, **changes) -> Record:
    """``rec`` timed at ``time_s`` with IQR / median ``rel_iqr`` (and other top-level ``changes``)."""
    out = rec.to_dict()
    out["measurement"].update(steady_median_s=time_s, steady_rel_iqr=rel_iqr)
    if "mode" in changes:
        out["measurement"]["mode"] = changes["mode"]
    out.update(changes)
    return Record.from_dict(out)


def res(*records: Record, name: str = "x.jsonl") -> Results:
    return Results(records=list(records), sources=[name] * len(records), files=[name])


@pytest.mark.parametrize(("ta", "tb", "na", "nb", "want", "threshold"), [
    (100e-6, 97e-6, 0.02, 0.03, "faster", 0.02),   # -3 % beyond the smaller noise, 2 %
    (100e-6, 99e-6, 0.02, 0.03, "same", 0.02),     # -1 % within 2 %
    (100e-6, 105e-6, 0.02, 0.03, "slower", 0.02),  # +5 %
    (100e-6, 99.5e-6, 0.001, 0.0007, "same", 0.01),  # IQRs of 0.1 % / 0.07 %: the 1 % run-to-run floor applies
    (100e-6, 98e-6, 0.001, 0.0007, "faster", 0.01),
    (100e-6, 97e-6, None, 0.05, "same", 0.05),     # only B's noise known: it is used
    (100e-6, 97e-6, None, None, "unknown", None),
])
def test_verdict_by_hand(ta, tb, na, nb, want, threshold):
    v, change, thr = verdict(ta, tb, na, nb)
    assert v == want and thr == threshold
    assert change == pytest.approx((tb - ta) / ta)


def test_noise_is_iqr_over_median(three, edit):
    assert noise(timed(three[1], 40e-6, 0.05)) == 0.05
    rec = edit(three[1], measurement={"mode": "sustained", "steady_median_s": 40e-6, "iqr_s": 2e-6})
    assert noise(rec) == pytest.approx(2e-6 / 40e-6)
    assert noise(three[2]) is None  # skipped: no measurement


def test_matching_and_ratios(three, four):
    a = res(timed(three[0], 1e-3, 0.001), timed(three[1], 40e-6, 0.02), three[2])
    b = res(timed(three[0], 1e-3 * 1.003, 0.001), timed(three[1], 32e-6, 0.03), three[2],
            timed(four[3], 1.5e-3, 0.01), name="y.jsonl")
    c = compare(a, b)
    assert [(r.case.split(" [")[0], r.verdict) for r in c.rows] == [
        ("copy 2 GiB", "same"), ("16x4096x7168", "faster"), ("8192x8192x8192", "not ok"),
        ("4096x4096x4096", "only in B")]
    decode = c.rows[1]
    assert decode.ratio == pytest.approx(40 / 32) and decode.change == pytest.approx(-0.2)
    assert decode.threshold == 0.02
    assert c.rows[2].note == "skipped in both: nvfp4 GEMM needs sm_100 or sm_120; this device is sm_90"
    assert c.counts == {"faster": 1, "same": 1, "only in B": 1, "not ok": 1}
    assert c.warnings == []


def test_loose_match_across_backend_and_mode(three):
    a = res(timed(three[1], 40e-6, 0.02))
    other = timed(three[1], 80e-6, 0.02, backend="cpu blas", mode="cpu")
    c = compare(a, res(other))
    [row] = c.rows
    assert row.verdict == "slower" and row.ratio == pytest.approx(0.5)
    assert row.note == "loose match: backend and mode differ"


def test_different_devices_warn_first(three):
    cpu = timed(three[1], 80e-6, 0.02, env={"cpu": "AMD EPYC"})
    c = compare(res(timed(three[1], 40e-6, 0.02)), res(cpu))
    assert c.warnings[0].startswith("the runs were measured on different devices (A: NVIDIA H200; B: AMD EPYC)")
    text = compare_text(c)
    assert text.startswith("warning: the runs were measured on different devices")
    assert "1 slower" in text and "B/A = throughput of B over A" in text


def test_bad_inputs(three):
    with pytest.raises(TruepeakError, match="--min-noise must be a percentage"):
        compare(res(three[0]), res(three[0]), min_noise=-0.1)
    with pytest.raises(TruepeakError, match="no valid records"):
        compare(res(three[0]), Results(files=["empty.jsonl"]))


def _write(path: Path, records: list[Record]) -> Path:
    path.write_text("".join(json.dumps(r.to_dict()) + "\n" for r in records))
    return path


def test_cli_text_and_json(tmp_path, capsys, three):
    a = _write(tmp_path / "a.jsonl", [timed(three[1], 40e-6, 0.02)])
    b = _write(tmp_path / "b.jsonl", [timed(three[1], 30e-6, 0.02)])
    code, out, err = call(capsys, "compare", str(a), str(b))
    assert code == 0 and "faster" in out and "1.333" in out and "-25.0 %" in out
    code, out, err = call(capsys, "compare", str(a), str(b), "--json")
    data = json.loads(out)
    assert data["counts"] == {"faster": 1} and data["rows"][0]["ratio"] == pytest.approx(4 / 3)
    assert data["device_a"] == ["NVIDIA H200"] and data["min_noise"] == 0.01
    code, out, err = call(capsys, "compare", str(a), str(b), "--min-noise", "30")
    assert code == 0 and "1 same" in out


def test_cli_bad_lines_become_warnings(tmp_path, capsys, three):
    a = _write(tmp_path / "a.jsonl", [timed(three[1], 40e-6, 0.02)])
    b = tmp_path / "b.jsonl"
    b.write_text(json.dumps(timed(three[1], 40e-6, 0.02).to_dict()) + "\n" + '{"schema_version": 7}\n')
    code, out, err = call(capsys, "compare", str(a), str(b))
    assert code == 0
    assert f"warning: B: 1 line(s) not used: {b}, line 2: a record of schema version 7" in out
    empty = tmp_path / "e.jsonl"
    empty.write_text("")
    code, out, err = call(capsys, "compare", str(a), str(empty))
    assert code == 2 and "error: no records: " in err and "is empty" in err


def test_noise_from_raw_samples(three, edit):
    # quartiles of 1..5 by linear interpolation: 2 and 4, median 3 -> (4 - 2) / 3
    rec = edit(three[1], measurement={"mode": "sustained", "samples_s": [1.0, 2.0, 3.0, 4.0, 5.0], "median_s": 3.0})
    assert noise(rec) == pytest.approx(2 / 3)
