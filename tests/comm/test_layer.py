"""truepeak.comm is the pure model (docs/architecture.md): no module of it imports bench, report, cli or torch, not
even inside a function, and importing every module loads none of them."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import truepeak.comm

COMM = Path(truepeak.comm.__file__).parent
REFUSED = ("truepeak.bench", "truepeak.report", "truepeak.cli", "torch", "triton")


def imported_names(source: str) -> list[str]:
    """Every module an ``import`` or ``from ... import`` in ``source`` names, at any depth (relative imports made
    absolute under truepeak.comm)."""
    out = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            out += [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            out.append(node.module if node.level == 0 else f"truepeak.comm.{node.module or ''}".rstrip("."))
    return out


def refused(names: list[str]) -> list[str]:
    return [n for n in names if any(n == r or n.startswith(r + ".") for r in REFUSED)]


def test_the_scan_sees_imports_inside_functions():
    src = "import math\ndef f():\n    from truepeak.bench.outdir import check_out_arg\n    import torch.distributed\n"
    assert refused(imported_names(src)) == ["truepeak.bench.outdir", "torch.distributed"]


def test_no_comm_module_imports_bench_report_cli_or_torch():
    modules = sorted(COMM.rglob("*.py"))
    assert {p.name for p in modules} == {"__init__.py", "model.py", "sweep.py"}
    for path in modules:
        assert refused(imported_names(path.read_text(encoding="utf-8"))) == [], path.name


def test_importing_comm_loads_no_bench_report_or_torch():
    code = ("import sys, truepeak.comm, truepeak.comm.model, truepeak.comm.sweep; "
            "print(sorted(m for m in sys.modules if m.split('.')[0] in ('torch', 'triton') "
            "or m.startswith(('truepeak.bench', 'truepeak.report', 'truepeak.cli'))))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         env={"PYTHONPATH": str(COMM.parents[1])})
    assert out.stdout.strip() == "[]"
