"""Every reference truepeak shows a user can be followed: no file outside this repository, no bare case ids, and every
``docs/method.md`` section or repository path it names exists.

Scanned: every Python, TOML, JSON and Markdown file under ``src/`` (docstrings, comments, printed strings, catalog
source strings, bundled presets), plus README.md and docs/method.md. The scanners are tested on hand-written bad
text first, so the clean result over the tree cannot pass vacuously.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SRC = ROOT / "src"
METHOD = ROOT / "docs" / "method.md"
SCANNED_SUFFIXES = (".py", ".toml", ".json", ".md")

#: Files that are not part of this repository (the notes the facts were collected in), and the paths leading to them.
UNFOLLOWABLE = re.compile(
    r"cases\.md|accelerators\.md|communication\.md|moe_models\.md|measurement_methodology\.md"
    r"|serving_measurements\.md|DESIGN\.md|STYLE\.md|\.\./shared|shared/data|shared/[A-Z]+\.md|/work/")
#: Ids of those notes' cases ("C17 mean-based", "case S1"): meaningless without them.
CASE_ID = re.compile(r"\b(?:C\d{2}|S[12])\b")
#: A reference into the method document: plain, with a quoted section name (one or two), or with an anchor.
METHOD_REF = re.compile(r"docs/method\.md(?:#([a-z0-9-]+)|,? '([^']+)'(?: and '([^']+)')?)?")
#: Paths into this repository's docs/ and tests/ (not another project's ``owner/repo:docs/...``).
REPO_PATH = re.compile(r"(?<![\w/.:-])((?:docs/(?:results|method)|tests/)[\w./-]*[\w/])")


def scanned_files() -> list[Path]:
    files = [p for p in sorted(SRC.rglob("*")) if p.is_file() and p.suffix in SCANNED_SUFFIXES
             and "__pycache__" not in p.parts]
    return [*files, ROOT / "README.md", METHOD]


def joined(text: str) -> str:
    """The text with adjacent Python string literals joined, comment markers of continued lines dropped and
    whitespace collapsed, so a reference wrapped over lines reads as one."""
    text = re.sub(r'"\s*\n\s*f?"', "", text)
    text = re.sub(r"\n\s*(?:#:?\s*)?", " ", text)
    return re.sub(r"\s+", " ", text)


def headings() -> dict[str, str]:
    """docs/method.md's section headings -> their GitHub anchors."""
    out = {}
    for line in METHOD.read_text(encoding="utf-8").splitlines():
        if line.startswith("## "):
            name = line[3:].strip()
            out[name] = re.sub(r"[^a-z0-9 -]", "", name.lower()).replace(" ", "-")
    return out


def unfollowable(text: str) -> list[str]:
    """Names of files outside the repository and bare case ids in ``text``."""
    return [m.group(0) for m in UNFOLLOWABLE.finditer(text)] + [m.group(0) for m in CASE_ID.finditer(text)]


def broken_method_refs(text: str) -> list[str]:
    """References to docs/method.md whose section name or anchor is not a heading there."""
    names = headings()
    anchors = set(names.values())
    bad = []
    for m in METHOD_REF.finditer(joined(text)):
        anchor, *sections = m.groups()
        if anchor is not None and anchor not in anchors:
            bad.append(m.group(0))
        bad += [m.group(0) for s in sections if s is not None and s not in names]
    return bad


def missing_paths(text: str) -> list[str]:
    """Paths into this repository's docs/ and tests/ that do not exist."""
    return [p for p in REPO_PATH.findall(text) if not (ROOT / p.rstrip(".")).exists()]


# -- the scanners catch what they are for ---------------------------------------------------------------------------


@pytest.mark.parametrize("bad", [
    "(cases.md C10)", "see ../shared/data/moe_models.md §5.2", "accelerators.md section 4 arithmetic",
    "communication.md §4", "measurement_methodology.md section 1.3", "DESIGN.md \"Conventions\"",
    "shared/STYLE.md section 5", "``/work/coord/moe_api.md``", "serving_measurements.md",
])
def test_file_names_outside_the_repository_are_caught(bad):
    assert unfollowable(bad)


@pytest.mark.parametrize("bad", ["padded rows 37.5 % (C17 mean-based: 0.0 %)", "the workflow of case S1",
                                 "(C19/C20: α 19.4 µs)", "from the ADAWP; cases C04"])
def test_bare_case_ids_are_caught(bad):
    assert CASE_ID.search(bad)


def test_good_references_pass():
    good = ("fp16 accumulate (ADAWP; docs/method.md, 'GeForce accumulate rates'); NVIDIA/cutlass PR #3272; "
            "pytorch/pytorch#182023; arXiv 2412.19437 §5.4.3; docs/method.md#cache-resident-working-sets; "
            "tests/moe/test_s1.py; docs/results/h200x2/README.md; ai-dynamo/aiconfigurator ``docs/X.md``; "
            "NVIDIA/TensorRT-LLM:tests/unittest/a.py; an sm_120 GPU with 101,376 B (CUDA 12.8)")
    assert unfollowable(good) == []
    assert broken_method_refs(good) == []
    assert missing_paths(good) == []


def test_broken_method_references_and_paths_are_caught():
    assert broken_method_refs("(see docs/method.md, 'Cache resident sets')") == [
        "docs/method.md, 'Cache resident sets'"]
    assert broken_method_refs("docs/method.md#no-such-section") == ["docs/method.md#no-such-section"]
    # wrapped over two lines of a comment, or split over two string literals, the name is still checked
    assert broken_method_refs("# (docs/method.md, 'Peak at the\n# measured clocks')")
    assert broken_method_refs("\"see docs/method.md, \"\n            \"'Random input')\"")
    assert missing_paths("(tests/moe/test_nothing.py; docs/results/h999/README.md)") == [
        "tests/moe/test_nothing.py", "docs/results/h999/README.md"]


def test_method_document_has_the_sections_the_notes_name():
    """The stable headings printed notes point to, with the anchors GitHub gives them."""
    h = headings()
    assert h["Cache-resident working sets"] == "cache-resident-working-sets"
    assert h["Throttling, sustained and burst"] == "throttling-sustained-and-burst"
    assert h["busbw and algbw"] == "busbw-and-algbw"
    assert {"Dense and sparse peaks", "Peak at the measured clock", "GeForce accumulate rates",
            "Counting FLOP and bytes", "Impossible timings", "Random inputs", "Warm-up outliers",
            "H200 reference measurements", "Shared memory per block", "Tokens per expert", "Padding per expert",
            "Small-message latency", "Worked example: GLM-5 on RTX PRO 6000"} <= set(h)


# -- the tree ----------------------------------------------------------------------------------------------------------


def test_the_scan_covers_code_catalog_presets_and_docs():
    names = {p.relative_to(ROOT).as_posix() for p in scanned_files()}
    assert "src/truepeak/hardware/data/accelerators.toml" in names
    assert "src/truepeak/moe/presets/README.md" in names and "src/truepeak/moe/presets/glm-5.json" in names
    assert "src/truepeak/cli/moe.py" in names and "docs/method.md" in names and len(names) > 80


@pytest.mark.parametrize("path", scanned_files(), ids=lambda p: p.relative_to(ROOT).as_posix())
def test_no_file_points_outside_the_repository(path):
    text = path.read_text(encoding="utf-8")
    assert unfollowable(text) == [], f"{path.relative_to(ROOT)}: unfollowable references"


@pytest.mark.parametrize("path", scanned_files(), ids=lambda p: p.relative_to(ROOT).as_posix())
def test_every_method_reference_and_repository_path_resolves(path):
    text = path.read_text(encoding="utf-8")
    assert broken_method_refs(text) == [], f"{path.relative_to(ROOT)}: sections docs/method.md does not have"
    assert missing_paths(text) == [], f"{path.relative_to(ROOT)}: paths that do not exist"
