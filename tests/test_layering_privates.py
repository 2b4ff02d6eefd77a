"""Tests and testbenches use the package's public names (issue 23, "Tests and testbenches use
public names"): a test that reaches into a private of dtpu (``obj._name``, ``from dtpu.x import
_name``, ``setattr(obj, "_name", ...)``) pins an implementation detail, so a refactoring that
keeps every behaviour breaks it, and the name it needs is an interface nobody documented.

The check is static. A private name is one that dtpu itself defines with a leading underscore
(a function, class, module-level name, or attribute); a test file's own privates (its helpers,
its testbench classes' ``self._x``) are its business. Where a test truly needs a private, it is
listed in ALLOWED with the reason; an entry no longer needed fails the test, so the list only
shrinks.
"""
from __future__ import annotations

import ast
import functools
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PYLIB = ROOT / "pylib"
CHECKED = ("tests", "sim")

#: (file relative to the repository, private name) -> why the test needs it
ALLOWED = {
    ("tests/test_rtl_harness_sources.py", "_cached"):
        "stubs the build step to record the cache keys it is asked for without running Verilator",
}

#: calls whose second argument names an attribute (monkeypatch.setattr included)
ATTR_CALLS = {"setattr", "getattr", "hasattr", "delattr"}


def _private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


def _scan(tree: ast.AST) -> tuple[set[str], set[str], list[ast.AST]]:
    """One walk over a file: the private names it defines (functions, classes, arguments,
    assigned names, attributes assigned on ``self`` or ``cls``), the private attributes it
    assigns on any object, and the nodes that may use a private (imports from dtpu, private
    attributes, setattr-like calls)."""
    defined, assigned, uses = set(), set(), []
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            defined.add(node.name)
        elif isinstance(node, ast.arg):
            defined.add(node.arg)
        elif isinstance(node, ast.Name):
            if isinstance(node.ctx, ast.Store):
                defined.add(node.id)
        elif isinstance(node, ast.Attribute):
            if _private(node.attr):
                uses.append(node)
                if isinstance(node.ctx, ast.Store):
                    assigned.add(node.attr)
                    if isinstance(node.value, ast.Name) and node.value.id in ("self", "cls"):
                        defined.add(node.attr)
        elif isinstance(node, ast.ImportFrom) or (isinstance(node, ast.Call) and len(node.args) >= 2):
            uses.append(node)
    return {n for n in defined if _private(n)}, assigned, uses


@functools.lru_cache(maxsize=None)
def package_privates() -> frozenset[str]:
    """Every private name dtpu defines, anywhere in the package (module and attribute alike)."""
    names: set[str] = set()
    for path in (PYLIB / "dtpu").rglob("*.py"):
        defined, assigned, _ = _scan(ast.parse(path.read_text(), str(path)))
        names |= defined | assigned
    return frozenset(names)


def reaches(source: str, privates: frozenset[str]) -> list[tuple[int, str, str]]:
    """(line, private name, how) for every use of one of `privates` that `source` does not define."""
    own, _, uses = _scan(ast.parse(source))
    found = []
    for node in uses:
        if isinstance(node, ast.ImportFrom):
            if (node.module or "").split(".")[0] == "dtpu":
                found += [(node.lineno, a.name, f"from {node.module} import {a.name}")
                          for a in node.names if _private(a.name)]
        elif isinstance(node, ast.Attribute):
            if node.attr in privates and node.attr not in own:
                found.append((node.lineno, node.attr, ast.unparse(node)))
        else:
            func = node.func
            called = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
            name = node.args[1]
            if (called in ATTR_CALLS and isinstance(name, ast.Constant)
                    and isinstance(name.value, str) and name.value in privates
                    and name.value not in own):
                found.append((node.lineno, name.value, f"{called}(..., {name.value!r})"))
    return sorted(found)


def _files():
    for top in CHECKED:
        yield from sorted((ROOT / top).rglob("*.py"))


def test_tests_reach_no_private_of_the_package():
    privates = package_privates()
    bad, used = [], set()
    for path in _files():
        rel = path.relative_to(ROOT).as_posix()
        for line, name, how in reaches(path.read_text(), privates):
            if (rel, name) in ALLOWED:
                used.add((rel, name))
            else:
                bad.append(f"{rel}:{line}: {how}")
    assert not bad, ("tests reach privates of dtpu (give what they need a public, documented "
                     "name, or go through the public API; ALLOWED lists the exceptions):\n  "
                     + "\n  ".join(bad))
    assert used == set(ALLOWED), f"ALLOWED entries no longer needed: {set(ALLOWED) - used}"


def test_the_check_finds_each_way_in():
    """Planted uses of a package private are found; a file's own privates and public names are not."""
    privates = frozenset({"_walloc", "_select", "_REGISTRY", "_helper"})
    planted = (
        "from dtpu.backends.model import _helper\n"
        "assert not backend._walloc.used\n"
        "monkeypatch.setattr(ModelBackend, '_select', counting)\n"
        "backends._REGISTRY['x'] = 'y'\n"
        "class Tb:\n"
        "    def __init__(self):\n"
        "        self._mine = 1\n"
        "def _ours():\n"
        "    return Tb()._mine, backend.nodes\n"
    )
    assert [(line, name) for line, name, _ in reaches(planted, privates | {"_mine", "_ours"})] == [
        (1, "_helper"), (2, "_walloc"), (3, "_select"), (4, "_REGISTRY")]
    assert {"_walloc", "_select", "_REGISTRY"} <= package_privates()
