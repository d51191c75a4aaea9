"""The device-side scripts in benchmarks/ run only on a GPU machine, where a mistake costs device time: here each
Python script must compile and each shell script must parse (``bash -n``), and the kernel-source line that
benchmarks/moe_fp8_promotion.py rewrites must still be in the kernel."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SCRIPTS = sorted((ROOT / "benchmarks").glob("*.py"))
SHELL = sorted((ROOT / "benchmarks").glob("*.sh"))


def test_there_are_scripts():
    assert len(SCRIPTS) >= 20 and len(SHELL) >= 5


@pytest.mark.parametrize("path", SCRIPTS, ids=lambda p: p.name)
def test_python_script_compiles(path):
    compile(path.read_text(), str(path), "exec")


@pytest.mark.parametrize("path", SHELL, ids=lambda p: p.name)
def test_shell_script_parses(path):
    bash = shutil.which("bash")
    if bash is None:
        pytest.skip("no bash")
    r = subprocess.run([bash, "-n", str(path)], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr


def test_the_promotion_study_finds_its_line():
    src = (ROOT / "benchmarks" / "moe_fp8_promotion.py").read_text()
    kernel = (ROOT / "src" / "truepeak" / "kernels" / "_moe_jit.py").read_text()
    line = next(ln for ln in src.splitlines() if ln.startswith("LINE = "))
    anchor = line.split("=", 1)[1].strip().strip('"')
    assert anchor in kernel
    assert anchor + "\n        return tl.dot(a, b, acc, max_num_imprecise_acc=IMP)" in kernel
