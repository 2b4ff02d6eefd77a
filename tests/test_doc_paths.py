"""Documents name only paths that exist in this repository.

Docs drift silently when a file moves or a sentence points at something outside the repository
(a reader of a fresh clone has no `../shared`). Every tracked Markdown file is scanned for relative
link targets (`[text](path)`) and for code spans that look like repository paths (they start with a
top-level directory of the project, or with `../`); each must resolve to a file or directory inside
the repository. Generated outputs (build directories, caches) are named with placeholders
(`<abi>`, `*`) in the docs and are skipped by that rule, and so is anything git ignores.
"""
from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
TOPS = ("pylib/", "hw/", "docs/", "tests/", "sim/", "benchmarks/", "notebooks/", "delegate/", ".ci/",
        "../")
LINK = re.compile(r"\]\(([^)\s#]+)(?:#[^)]*)?\)")
CODE = re.compile(r"`([^`\s]+)`")
PLACEHOLDER = re.compile(r"[<>*{}$\[\]|]")


def _tracked_markdown() -> list[Path]:
    try:
        out = subprocess.run(["git", "ls-files", "*.md"], cwd=ROOT, capture_output=True, text=True,
                             check=True).stdout.split()
    except (OSError, subprocess.CalledProcessError):
        return sorted(p for p in ROOT.rglob("*.md") if ".venv" not in p.parts)
    return [ROOT / p for p in out]


def _ignored(path: str) -> bool:
    r = subprocess.run(["git", "check-ignore", "-q", "--no-index", path], cwd=ROOT)
    return r.returncode == 0


def _inside(path: Path) -> bool:
    try:
        path.resolve().relative_to(ROOT)
        return True
    except ValueError:
        return False


def missing_paths(doc: Path) -> list[str]:
    """The path references of `doc` that leave the repository or do not exist in it."""
    text = doc.read_text(encoding="utf-8")
    bad = []
    for m in LINK.finditer(text):
        target = m.group(1)
        if re.match(r"[A-Za-z][A-Za-z0-9+.-]*:", target):   # http:, mailto: ...
            continue
        p = doc.parent / target
        if not _inside(p) or not p.exists():
            bad.append(f"link {target}")
    for m in CODE.finditer(text):
        target = m.group(1).rstrip(".,:;")
        if not target.startswith(TOPS) or PLACEHOLDER.search(target):
            continue
        rel = target.split(":")[0]     # `file.py:func`
        p = ROOT / rel
        if not _inside(p):
            bad.append(f"`{target}` (outside the repository)")
        elif not p.exists() and not _ignored(rel):
            bad.append(f"`{target}`")
    return bad


DOCS = _tracked_markdown()


@pytest.mark.parametrize("doc", DOCS, ids=[str(d.relative_to(ROOT)) for d in DOCS])
def test_doc_names_existing_paths(doc):
    assert missing_paths(doc) == []


def test_checker_catches_a_bad_path():
    doc = ROOT / "docs" / "_probe_doc_paths.md"
    doc.write_text("see `docs/no_such_file.md`, [x](no_such.md), `../shared/seeds/x.txt` and "
                   "[ok](architecture.md), `pylib/dtpu/_build/<abi>/`\n", encoding="utf-8")
    try:
        assert missing_paths(doc) == ["link no_such.md", "`docs/no_such_file.md`",
                                      "`../shared/seeds/x.txt` (outside the repository)"]
    finally:
        doc.unlink()
