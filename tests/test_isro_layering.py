"""The compiler is untied from its front ends: front ends build the IR and import nothing above
it (no compiler, machine, bundle), and the IR imports no front end."""
from __future__ import annotations

import ast
from pathlib import Path

PKG = Path(__file__).resolve().parents[1] / "pylib" / "dtpu" / "isro"


def _imports(name: str) -> set[str]:
    tree = ast.parse((PKG / f"{name}.py").read_text())
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("dtpu.isro"):
            if node.module == "dtpu.isro":
                found |= {f"dtpu.isro.{a.name}" for a in node.names}
            else:
                found.add(node.module)
        elif isinstance(node, ast.Import):
            found |= {a.name for a in node.names if a.name.startswith("dtpu.isro")}
    return found


def test_front_ends_depend_only_on_the_ir_and_the_isa():
    for front in ("keras_h5", "tflite_model"):
        assert _imports(front) <= {"dtpu.isro.ir", "dtpu.isro.isa"}, (front, _imports(front))


def test_ir_imports_no_front_end_and_no_compiler():
    assert _imports("ir") <= {"dtpu.isro.isa"}


def test_isa_and_profile_stand_alone():
    assert _imports("isa") == set()
    assert _imports("profile") <= {"dtpu.isro.isa"}
