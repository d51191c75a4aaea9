"""The README's top: exactly two commands, the install line every "missing torch" message repeats, and the test
command that .ci/run runs."""

from __future__ import annotations

import re
from pathlib import Path

from truepeak.errors import INSTALL_HINT

ROOT = Path(__file__).resolve().parents[1]


def _top_commands() -> list[str]:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    block = re.search(r"```bash\n(.*?)```", text, re.S)
    assert block is not None and text.index(block.group(0)) < text.index("\n## "), "the README starts with a bash block"
    return [line for line in block.group(1).splitlines() if line.strip()]


def test_readme_top_is_two_commands_run_and_test():
    run, test = _top_commands()  # exactly two
    assert run.endswith("&& truepeak run") and test.endswith("&& python3 -m pytest -q")
    install_run, install_test = run.split(" && ")[0], test.split(" && ")[0]
    assert install_run == "pip install -e '.[measure]' 'torch==2.11.0'"
    assert install_test == "pip install -e '.[test,measure]' 'torch==2.11.0'"


def test_ci_runs_the_readme_test_command():
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    assert _top_commands()[1] in ci.splitlines()


def test_install_hint_is_the_readme_install_line():
    assert INSTALL_HINT.startswith(_top_commands()[0].split(" && ")[0] + " in a clone of truepeak")


def test_pinned_torch_needs_the_triton_the_test_extra_pins():
    """torch 2.11.0's wheels on PyPI require triton==3.6.0 (its METADATA: ``Requires-Dist: triton==3.6.0;
    platform_system == "Linux"``); torch 2.13.0's require 3.7.1, which made the test command unresolvable from the
    public index alone. The test extra pins the Triton the kernels are checked with; the two must agree."""
    pyproject = (ROOT / "pyproject.toml").read_text(encoding="utf-8")
    assert re.search(r'"triton==3\.6\.0;', pyproject)
    assert "'torch==2.11.0'" in _top_commands()[1]
