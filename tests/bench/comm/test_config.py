"""truepeak.bench.comm.config: CommConfig checks itself when built, before torch is imported; `truepeak comm` with a bad
flag names the flag on a machine without torch (the without_torch fixture of tests/conftest.py)."""

from __future__ import annotations

import dataclasses

import pytest

import truepeak.cli  # noqa: F401  (registers every command)
from truepeak.bench.comm.config import CommConfig
from truepeak.cli.app import main
from truepeak.errors import ConfigError

BASE = {"nproc_per_node": 2, "ops": ["all_reduce"], "sizes": [1024]}


def refused(**fields) -> ConfigError:
    with pytest.raises(ConfigError) as info:
        CommConfig(**{**BASE, **fields})
    return info.value


@pytest.mark.parametrize(("fields", "field", "message"), [
    ({"nproc_per_node": 0}, "nproc_per_node", "--nproc-per-node must be a whole number >= 1, got 0"),
    ({"nproc_per_node": True}, "nproc_per_node", "--nproc-per-node must be a whole number >= 1, got True"),
    ({"nnodes": 0}, "nnodes", "--nnodes must be a whole number >= 1, got 0"),
    ({"iters": 0}, "iters", "--iters must be a whole number >= 1, got 0"),
    ({"warmup": -1}, "warmup", "--warmup must be a whole number >= 0, got -1"),
    ({"rdzv_timeout_s": 0.0}, "rdzv_timeout_s", "--rdzv-timeout 0.0 must be a finite number of seconds > 0, e.g. 60"),
    ({"rdzv_timeout_s": float("inf")}, "rdzv_timeout_s",
     "--rdzv-timeout inf must be a finite number of seconds > 0, e.g. 60"),
    ({"nnodes": 2, "node_rank": 2, "rdzv_endpoint": "node0:29400"}, "node_rank",
     "--node-rank 2 must be between 0 and --nnodes - 1 = 1"),
    ({"backend": "mpi"}, "backend", "unknown --backend 'mpi'; valid: nccl, gloo"),
    ({"api": "mpi"}, "api", "unknown --api 'mpi'; valid: nccl, torch"),
    ({"backend": "gloo", "api": "nccl"}, "api",
     "--api nccl calls libnccl and needs --backend nccl; with --backend gloo use --api torch"),
    ({"nnodes": 2}, "rdzv_endpoint", "--nnodes 2 needs --rdzv-endpoint HOST:PORT (or --master-addr) of node 0"),
    ({"ops": []}, "ops", "ops is empty; valid ops: all_reduce, all_gather, reduce_scatter, all_to_all"),
    ({"ops": ["allreduce"]}, "ops", "op 'allreduce' is not measured; valid ops: all_reduce, all_gather, "
     "reduce_scatter, all_to_all (canonical names, truepeak.comm.sweep.parse_ops turns aliases into them)"),
    ({"sizes": []}, "sizes", "sizes is empty; give message sizes in bytes, e.g. (1024, 65536)"),
    # 16 GiB = 17,179,869,184 B is the largest buffer (truepeak.comm.sweep.MAX_BYTES)
    ({"sizes": [1024, 2**34 + 1]}, "sizes",
     "message size 17179869185 must be a whole number of bytes from 1 to 17179869184 (16 GiB)"),
    ({"dtype": "fp7"}, "dtype", "unknown collective dtype 'fp7'; valid: bf16, fp16, fp32, fp64, int8, uint8, int32, "
     "int64"),
    ({"timeout_s": -5}, "timeout_s", "timeout_s -5 must be a finite number of seconds > 0, e.g. 300"),
    ({"master_port": 0}, "master_port", "--master-port must be a whole number >= 1, got 0"),
])
def test_each_bad_field_is_named(fields, field, message):
    err = refused(**fields)
    assert (err.field, str(err)) == (field, message)


def test_defaults_are_filled_in_and_lists_kept_as_tuples():
    nccl = CommConfig(**BASE)
    assert nccl.api == "nccl" and nccl.ops == ("all_reduce",) and nccl.sizes == (1024,)
    assert (nccl.iters, nccl.warmup, nccl.rdzv_timeout_s, nccl.timeout_s) == (20, 5, 60.0, 300.0)  # nccl-tests -n, -w
    gloo = CommConfig(nproc_per_node=None, ops=["all_gather"], sizes=[4096], backend="gloo", argv=["truepeak", "comm"])
    assert (gloo.api, gloo.nproc_per_node, gloo.argv) == ("torch", 2, ("truepeak", "comm"))
    # NCCL's default (every visible GPU) is found by the launch, not here: no torch while the config is built
    assert CommConfig(**{**BASE, "nproc_per_node": None}).nproc_per_node is None
    with pytest.raises(dataclasses.FrozenInstanceError):
        nccl.iters = 3


def test_a_dtype_alias_is_kept_as_its_canonical_name():
    # regression: --dtype bfloat16 was accepted, then every case failed in the worker with KeyError: 'bfloat16'
    assert CommConfig(**BASE, dtype="bfloat16").dtype == "bf16"
    assert CommConfig(**BASE, dtype="float").dtype == "fp32"


def test_endpoint_and_world():
    assert CommConfig(**BASE).endpoint is None and CommConfig(**BASE).world == 2
    two = CommConfig(**{**BASE, "nproc_per_node": 8}, nnodes=2, master_addr="10.0.0.1")
    assert two.endpoint == "10.0.0.1:29500" and two.world == 16  # torchrun's default master port; 2 nodes x 8
    rdzv = CommConfig(**BASE, nnodes=2, rdzv_endpoint="node0:29400", master_addr="10.0.0.1", master_port=1234)
    assert rdzv.endpoint == "node0:29400"


def call(capsys, *args: str) -> tuple[int, str, str]:
    """``truepeak ARGS`` through :func:`main` (the CLI's error boundary): (exit code, stdout, stderr)."""
    with pytest.raises(SystemExit) as info:
        main(list(args))
    captured = capsys.readouterr()
    return info.value.code, captured.out, captured.err


@pytest.mark.parametrize(("args", "message"), [
    # the NCCL default --nproc-per-node (every visible GPU) needs torch: the flags are checked first
    (["--iters", "0"], "--iters must be a whole number >= 1, got 0"),
    (["--warmup", "-1"], "--warmup must be a whole number >= 0, got -1"),
    (["--nproc-per-node", "0"], "--nproc-per-node must be a whole number >= 1, got 0"),
    (["--backend", "mpi"], "unknown --backend 'mpi'; valid: nccl, gloo"),
    (["--backend", "gloo", "--api", "nccl"],
     "--api nccl calls libnccl and needs --backend nccl; with --backend gloo use --api torch"),
    (["--rdzv-timeout", "-1"], "--rdzv-timeout -1.0 must be a finite number of seconds > 0, e.g. 60"),
    (["--nnodes", "2"], "--nnodes 2 needs --rdzv-endpoint HOST:PORT (or --master-addr) of node 0"),
    (["--nnodes", "2", "--node-rank", "5", "--rdzv-endpoint", "node0:29400"],
     "--node-rank 5 must be between 0 and --nnodes - 1 = 1"),
    (["--dtype", "fp7"], "unknown collective dtype 'fp7'; valid: bf16, fp16, fp32, fp64, int8, uint8, int32, int64"),
    (["--sizes", "64K:1K"], "--sizes '64K:1K': END 1K is below START 64K"),
])
def test_a_bad_flag_without_torch_names_the_flag(capsys, without_torch, args, message):
    code, out, err = call(capsys, "comm", *args)
    assert (code, out, err) == (2, "", f"error: {message}\n")


def test_without_torch_really_hides_torch(without_torch):
    # the fixture the test above relies on: an import of torch fails while it is active
    with pytest.raises(ImportError):
        import torch  # noqa: F401
    with pytest.raises(ImportError):
        from torch import distributed  # noqa: F401
