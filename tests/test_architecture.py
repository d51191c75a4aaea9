"""The import rules and module sizes of docs/architecture.md, checked on every test run.

Every ``import`` and ``from ... import`` in ``src/truepeak`` is read from the syntax tree, at the top of a module and
inside functions alike (lazy imports count), and each edge between two packages must be one the architecture allows.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src" / "truepeak"

BASE = {"errors"}
#: package -> the truepeak packages it may import (docs/architecture.md, "Layers" table).
ALLOWED: dict[str, set[str]] = {
    "errors": set(),
    "formats": BASE,
    "units": BASE | {"formats"},
    "records": BASE,
    "hardware": BASE | {"formats", "units"},
    "roofline": BASE | {"formats", "units", "hardware"},
    "efficiency": BASE | {"formats", "units", "hardware", "roofline", "records"},
    "comm": BASE | {"formats", "units", "hardware", "roofline", "efficiency", "records"},
    "moe": BASE | {"formats", "units", "hardware", "roofline", "efficiency", "records", "comm"},
    "kernels": BASE | {"formats", "hardware"},
    "bench": BASE | {"formats", "units", "hardware", "roofline", "efficiency", "records", "comm", "moe",
                     "kernels"},
    "report": BASE | {"formats", "units", "hardware", "roofline", "efficiency", "records", "comm", "moe"},
    "cli": BASE | {"formats", "units", "hardware", "roofline", "efficiency", "records", "comm", "moe", "kernels",
                   "bench", "report"},
    "__main__": {"cli"},
}
#: Packages that must import without torch, numpy being the most they use from outside the standard library.
PURE = ("errors", "formats", "units", "records", "hardware", "roofline", "efficiency", "comm", "moe")
#: No module is longer than this many lines ("about 600"); exceptions are named in docs/architecture.md.
SIZE_LIMIT = 650
SIZE_EXCEPTIONS: dict[str, str] = {}


def _modules():
    for path in sorted(SRC.rglob("*.py")):
        rel = path.relative_to(SRC.parent).with_suffix("")
        parts = list(rel.parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        yield path, ".".join(parts)


def _package(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else ""


def _imports(path: Path, module: str):
    """(line, imported module name) for every import in ``path``, relative imports resolved."""
    is_pkg = path.name == "__init__.py"
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield node.lineno, alias.name
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = module.split(".")
                base = base if is_pkg else base[:-1]
                base = base[: len(base) - (node.level - 1)]
                name = ".".join(base + ([node.module] if node.module else []))
            else:
                name = node.module or ""
            yield node.lineno, name
            for alias in node.names:  # "from truepeak import bench" names a package too
                if name == "truepeak" and ((SRC / alias.name).is_dir() or (SRC / f"{alias.name}.py").exists()):
                    yield node.lineno, f"truepeak.{alias.name}"


def _edges():
    for path, module in _modules():
        src = _package(module)
        for line, name in _imports(path, module):
            if not (name == "truepeak" or name.startswith("truepeak.")):
                continue
            dst = _package(name)
            if dst and dst != src:
                yield path, line, src, dst


def test_every_package_is_in_the_architecture():
    packages = {_package(m) for _, m in _modules()} - {""}
    assert packages <= set(ALLOWED), sorted(packages - set(ALLOWED))


def test_imports_follow_the_layers():
    bad = [f"{p.relative_to(SRC.parent)}:{line}: {src} imports {dst}" for p, line, src, dst in _edges()
           if dst not in ALLOWED.get(src, set())]
    assert not bad, "imports the architecture does not allow:\n" + "\n".join(bad)


def test_the_check_sees_lazy_imports(tmp_path):
    """An import inside a function counts as much as one at the top (the scan is not fooled by laziness)."""
    path = tmp_path / "mod.py"
    path.write_text("def f():\n    from truepeak.bench import run\n    import truepeak.report.fit\n")
    assert [name for _, name in _imports(path, "truepeak.moe.mod")] == ["truepeak.bench", "truepeak.report.fit"]


def test_relative_imports_are_resolved(tmp_path):
    pkg = tmp_path / "__init__.py"
    pkg.write_text("from .plan import x\nfrom ..records import y\n")
    assert [n for _, n in _imports(pkg, "truepeak.moe")] == ["truepeak.moe.plan", "truepeak.records"]


@pytest.mark.parametrize("package", PURE)
def test_pure_packages_do_not_import_torch_at_module_level(package):
    heavy = ("torch", "triton", "matplotlib", "rich", "typer", "pynvml")
    bad = []
    for path, module in _modules():
        if _package(module) != package:
            continue
        tree = ast.parse(path.read_text())
        for node in tree.body:  # module level only: detection functions import torch lazily
            names = ([a.name for a in node.names] if isinstance(node, ast.Import)
                     else [node.module or ""] if isinstance(node, ast.ImportFrom) else [])
            bad += [f"{module}: {n}" for n in names if n.split(".")[0] in heavy]
    assert not bad, bad


def test_no_module_is_over_the_size_limit():
    over = {m: n for p, m in _modules() if (n := len(p.read_text().splitlines())) > SIZE_LIMIT
            and m not in SIZE_EXCEPTIONS}
    assert not over, over


def test_no_environment_switch_in_src():
    """Behaviour is chosen by arguments, never by an environment variable read inside the library."""
    bad = []
    for path, module in _modules():
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value.startswith("TRUEPEAK_"):
                bad.append(f"{module}:{node.lineno}: {node.value}")
    assert not bad, bad
