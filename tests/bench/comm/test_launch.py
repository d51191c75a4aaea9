"""truepeak.bench.comm.launch: torchrun's command line, NCCL's tuning log, an unreachable rendezvous and an interrupt
inside torchrun (the library, then the CLI reporting what finished)."""

from __future__ import annotations

import json
import socket

import pytest

import truepeak.cli  # noqa: F401  (registers every command)
from truepeak.bench.comm.config import CommConfig
from truepeak.bench.comm.launch import algos_by_case, parse_nccl_algos, run_comm, torchrun_args
from truepeak.cli.app import main
from truepeak.errors import TruepeakError


def call(capsys, *args: str) -> tuple[int, str, str]:
    """Run ``truepeak ARGS`` through :func:`main` (the CLI's error boundary): (exit code, stdout, stderr)."""
    with pytest.raises(SystemExit) as info:
        main(list(args))
    captured = capsys.readouterr()
    return info.value.code, captured.out, captured.err


def test_unreachable_rendezvous_times_out_naming_the_address(tmp_path):
    pytest.importorskip("torch")  # the machine is checked (torch, gloo) before the endpoint is waited for
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    cfg = CommConfig(nproc_per_node=1, ops=["all_reduce"], sizes=[1024], backend="gloo", nnodes=2, node_rank=1,
                     rdzv_endpoint=f"127.0.0.1:{port}", rdzv_timeout_s=1.0, out_dir=str(tmp_path))
    with pytest.raises(TruepeakError, match=f"cannot reach the rendezvous at 127.0.0.1:{port} within 1 s"):
        run_comm(cfg)


def test_torchrun_args_pass_rendezvous_options_through():
    one = CommConfig(nproc_per_node=8, ops=["all_reduce"], sizes=[1024])
    assert torchrun_args(one, "c.json") == ["--nproc-per-node", "8", "--max-restarts", "0", "--standalone", "-m",
                                            "truepeak.bench.comm.worker", "c.json"]
    two = CommConfig(nproc_per_node=8, ops=["all_reduce"], sizes=[1024], nnodes=2, node_rank=1,
                     rdzv_endpoint="node0:29400", rdzv_id="job7", rdzv_timeout_s=30)
    args = torchrun_args(two, "c.json")
    assert args[:8] == ["--nproc-per-node", "8", "--max-restarts", "0", "--nnodes", "2", "--node-rank", "1"]
    assert ["--rdzv-endpoint", "node0:29400"] == args[args.index("--rdzv-endpoint"):args.index("--rdzv-endpoint") + 2]
    assert "join_timeout=30,read_timeout=30" in args and "--rdzv-id" in args


def test_nccl_tuning_log_parsing():
    log = ("host:1:1 [0] NCCL INFO AllReduce: 4096 Bytes -> Algo RING proto LL channel{Lo..Hi}={0..1}\n"
           "host:1:1 [0] NCCL INFO AllGather: 524288 Bytes -> Algo RING proto SIMPLE channel{Lo..Hi}={0..3}\n"
           "host:1:1 [0] NCCL INFO 1024 Bytes -> Algo 1 proto 0 time 12.5\n")
    lines = parse_nccl_algos(log)
    assert [(ln["op"], ln["bytes"], ln["algo"], ln["proto"], ln["channels"]) for ln in lines] == [
        ("all_reduce", 4096, "RING", "LL", 2), ("all_gather", 524288, "RING", "SIMPLE", 4)]
    algos = algos_by_case(lines, 2)
    assert algos["all_reduce|4096"]["proto"] == "LL"
    assert algos["all_gather|1048576"]["algo"] == "RING"  # NCCL's per-rank size × n = nccl-tests S
    assert json.dumps(algos)


def test_interrupt_inside_torchrun_reports_the_finished_records(capsys, tmp_path, monkeypatch):
    """Library and CLI without a real signal: torchrun stops with its SignalException after rank 0 wrote 2 records
    (and tore a third); run_comm raises CommInterrupted carrying the 2, and the CLI reports them with --out."""
    pytest.importorskip("torch")
    from torch.distributed import run as torchrun
    from torch.distributed.elastic.multiprocessing.api import SignalException

    from truepeak.records import CollectiveWorkload, RecordWriter, make_record
    from truepeak.bench.comm.launch import CommInterrupted, planned_cases

    out = tmp_path / "c"

    def stopped(args):
        with RecordWriter(out / "results.jsonl") as w:
            for b in (1024, 2048):
                w.write(make_record(workload=CollectiveWorkload(op="all_reduce", bytes=b, count=b // 2, n_ranks=2,
                                                                dtype="bf16"),
                                    backend="gloo", format="bf16", measurement=None, status="failed",
                                    reason="stand-in", mode="eager"))
        with open(out / "results.jsonl", "a", encoding="utf-8") as f:
            f.write('{"torn')
        raise SignalException("Process 1 got signal: 2", 2)

    monkeypatch.setattr(torchrun, "run", stopped)
    cfg = CommConfig(nproc_per_node=2, ops=["all_reduce", "all_gather"], sizes=[1024, 2048, 4096],
                     backend="gloo", out_dir=str(out))
    assert planned_cases(cfg) == 6  # 2 ops x 3 sizes, eager only on gloo
    assert planned_cases(CommConfig(nproc_per_node=2, ops=["all_reduce"], sizes=[1024])) == 2  # nccl: + graph
    with pytest.raises(CommInterrupted) as info:
        run_comm(cfg)
    assert info.value.n_cases == 6 and len(info.value.result.records) == 2
    assert info.value.result.results_path == str(out / "results.jsonl")
    code, stdout, stderr = call(capsys, "comm", "--backend", "gloo", "--ops", "all_reduce,all_gather", "--sizes",
                                "1K,2K,4K", "--out", str(out), "--no-progress", "--json")
    assert code == 130
    assert [r["workload"]["bytes"] for r in json.loads(stdout)] == [1024, 2048]  # this run's: 2 more records
    assert stderr.splitlines()[-2].startswith(f"interrupted after 2 of 6 cases; the finished records are in "
                                              f"{out / 'results.jsonl'}; run again with: truepeak comm")
    assert (out / "summary.md").read_text(encoding="utf-8").splitlines()[2].startswith(
        "**Interrupted after 2 of 6 cases; run again with: truepeak comm --backend gloo")


def test_a_worker_killed_by_a_signal_is_named_not_sent_to_debug(tmp_path):
    """Regression: a rank the out-of-memory killer ended gave "the comm workers failed (ChildFailedError: ====...);
    run with --debug", and --debug showed nothing (SIGKILL leaves no traceback). torchrun's own error type, with the
    exit code -9 it records for SIGKILL."""
    pytest.importorskip("torch")
    from torch.distributed.elastic.multiprocessing.errors import ChildFailedError, ProcessFailure

    from truepeak.bench.comm.launch import _raise_launch_error
    from truepeak.errors import MeasurementError

    exc = ChildFailedError("truepeak-comm", {1: ProcessFailure(1, 4242, -9, "<N/A>")})
    with pytest.raises(MeasurementError) as info:
        _raise_launch_error(CommConfig(2, ("all_reduce",), (1024,), backend="gloo"), exc, tmp_path)
    text = str(info.value)
    assert text.startswith("the comm workers failed: rank 1 killed by SIGKILL, often the kernel's out-of-memory "
                           "killer (see dmesg): try smaller --sizes")
    assert str(tmp_path / "results.jsonl") in text and "--debug" not in text


def test_resume_keeps_the_finished_cases_of_the_same_settings(tmp_path):
    """On the committed 2x H200 sweep (20 iterations, 5 warm-up, NCCL API, bf16): all_reduce at 1 and 2 KiB in eager
    and graph mode are 4 kept cases; other settings are refused, naming the first difference."""
    from pathlib import Path

    from truepeak.bench.comm.launch import resumed_cases
    from truepeak.errors import ConfigError

    results = Path(__file__).resolve().parents[3] / "docs" / "results" / "h200x2" / "results.jsonl"
    same = CommConfig(2, ("all_reduce",), (1024, 2048), iters=20, warmup=5, api="nccl", resume=True)
    kept = resumed_cases(same, results)
    assert sorted((r.workload.bytes, r.mode) for r in kept) == [(1024, "eager"), (1024, "graph"), (2048, "eager"),
                                                               (2048, "graph")]
    with pytest.raises(ConfigError, match=r"was measured with --iters 20, this run asks 10; repeat its settings"):
        resumed_cases(CommConfig(2, ("all_reduce",), (1024,), iters=10, api="nccl", resume=True), results)
    with pytest.raises(ConfigError, match="does not exist; run without --resume"):
        resumed_cases(same, tmp_path / "results.jsonl")
