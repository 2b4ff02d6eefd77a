"""The golden model's modules are named after what they model (issue 23): the former names
``dtpu.hw.cmdlist`` and ``dtpu.hw.model`` stay importable for one release, as re-exports, but
nothing in the repository uses them any more, and no module grows back into a catch-all."""
from __future__ import annotations

import importlib
import re
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
#: the former names, as an import or a module reference in code
OLD = re.compile(r"\bdtpu\.hw\.(cmdlist|model)\b|from dtpu\.hw import [^\n]*\b(cmdlist|model)\b")
SHIMS = {ROOT / "pylib/dtpu/hw/cmdlist.py", ROOT / "pylib/dtpu/hw/model.py", Path(__file__).resolve()}
#: the largest a module of these packages may grow before it is split by responsibility
MAX_LINES = 1000
#: the packages held to it: the golden model and the compiler (hw/), the backends, the
#: delegate's Python side
SMALL = ("pylib/dtpu/hw", "pylib/dtpu/backends", "pylib/dtpu/delegate")


def _python_files():
    for top in ("pylib", "tests", "sim", "benchmarks", "tools", "examples"):
        d = ROOT / top
        if d.is_dir():
            yield from (p for p in d.rglob("*.py") if ".venv" not in p.parts and p.resolve() not in SHIMS)


def test_nothing_imports_the_former_module_names():
    used = [f"{p.relative_to(ROOT)}:{i}: {line.strip()}"
            for p in _python_files()
            for i, line in enumerate(p.read_text(errors="replace").splitlines(), 1)
            if OLD.search(line)]
    assert not used, "use dtpu.hw.core / listformat / listcompiler / ddr / timeline / executor / " \
                     "units / regwindow instead:\n" + "\n".join(used)


def test_the_former_names_still_import_and_warn():
    from dtpu.hw import core
    from dtpu.hw.executor import Executor
    from dtpu.hw.listcompiler import compile_program

    for name in ("dtpu.hw.model", "dtpu.hw.cmdlist"):   # imported afresh: the warning is on import
        sys.modules.pop(name, None)
    with pytest.deprecated_call(match="dtpu.hw.core"):
        model = importlib.import_module("dtpu.hw.model")
    with pytest.deprecated_call(match="dtpu.hw.listformat"):
        cmdlist = importlib.import_module("dtpu.hw.cmdlist")
    assert model is core
    assert cmdlist.Executor is Executor and cmdlist.compile_program is compile_program


def test_golden_model_backend_and_delegate_modules_stay_small():
    big = {str(p.relative_to(ROOT)): n for top in SMALL for p in (ROOT / top).rglob("*.py")
           if (n := len(p.read_text().splitlines())) > MAX_LINES}
    assert not big, f"split these by responsibility (at most {MAX_LINES} lines): {big}"
