"""The package's layers, pinned: every import in ``dtpu`` (module-level or inside a function) goes
to the same layer or a lower one, and no two modules import each other, directly or around a
circle. The layers, lowest first (docs/architecture.md):

    foundation  shared leaves: op specs, precisions, packing, reports, numpy reference kernels,
                the TFLite runtime loader, the model-file verifier
    contract    hw/: contract.json and its reader (config), the descriptor format, the header
    compiler    hw/: lowering, placement, prefetch, the command-list compiler; the TFLite reader
    device      hw/: the golden model (core, DDR, timeline, executor, units, kernels, window);
                the ISRO machine's own stack (its inner layering: tests/test_isro_layering.py)
    driver      driver/: the job and list protocols over a Transport
    backends    backends/, the targets they open (board/, rtl/), the power estimate
    delegate    delegate/, the package's public API (dtpu/__init__), install
    cli         the commands: cli, run, demo, rtl.cli, isro.cli

hw/ modules are classified by name pattern, so that a new file there lands in a layer without
editing this test; a module that fits no rule fails the test with its name.
"""
from __future__ import annotations

import ast
import functools
import re
from pathlib import Path

PYLIB = Path(__file__).resolve().parents[1] / "pylib"

LAYERS = ("foundation", "contract", "compiler", "device", "driver", "backends", "delegate", "cli")

#: (pattern on the dotted module name, layer): the first match wins
RULES = (
    (r"dtpu\.(cli|run|demo|__main__)|dtpu\.rtl\.cli|dtpu\.isro\.(cli|__main__)", "cli"),
    (r"dtpu|dtpu\.delegate(\..*)?|dtpu\.install", "delegate"),
    (r"dtpu\.(backends|board|rtl)(\..*)?|dtpu\.power", "backends"),
    (r"dtpu\.driver(\..*)?", "driver"),
    (r"dtpu\.hw|dtpu\.hw\.\w*(config|contract|format|header)\w*", "contract"),
    (r"dtpu\.hw\.\w*(lower|placement|prefetch|compiler|chain_specs|residency|alloc)\w*"
     r"|dtpu\.tflite_model", "compiler"),
    (r"dtpu\.hw(\..*)?|dtpu\.isro(\..*)?", "device"),
    (r"dtpu\.(spec|precision|pack|report|tflite|model_check|tflite_writer|unary_tables|resize_maps|shape_fold)|dtpu\.reference(\..*)?",
     "foundation"),
)

#: upward imports that stay for now, each with the reason; an entry no longer needed fails the test
KNOWN_UPWARD: dict[tuple[str, str], str] = {}


def known_upward(module: str, target: str) -> bool:
    """Whether module's import of target is a KNOWN_UPWARD one (or a package it runs first)."""
    return any(m == module and (t == target or t.startswith(target + "."))
               for m, t in KNOWN_UPWARD)


def layer_of(module: str) -> str:
    for pattern, layer in RULES:
        if re.fullmatch(pattern, module):
            return layer
    raise AssertionError(f"{module}: no layer rule matches it; add it to RULES in {__file__}")


@functools.lru_cache(maxsize=None)
def modules() -> dict[str, tuple[Path, bool]]:
    """Dotted name -> (file, is a package) of every module of dtpu."""
    found = {}
    for path in sorted((PYLIB / "dtpu").rglob("*.py")):
        parts = list(path.relative_to(PYLIB).with_suffix("").parts)
        package = parts[-1] == "__init__"
        found[".".join(parts[:-1] if package else parts)] = (path, package)
    return found


def _targets(module: str, package: bool, node: ast.AST, known: dict) -> list[str]:
    """The dtpu modules an import statement loads (a ``from pkg import name`` of a submodule
    names the submodule), each resolved to the nearest module that exists."""
    if isinstance(node, ast.Import):
        names = [alias.name for alias in node.names]
    else:
        base = node.module or ""
        if node.level:
            parts = module.split(".") if package else module.split(".")[:-1]
            parts = parts[:len(parts) - (node.level - 1)]
            base = ".".join(parts + ([node.module] if node.module else []))
        names = [f"{base}.{a.name}" if f"{base}.{a.name}" in known else base for a in node.names]
    out = []
    for name in names:
        while name and name not in known:
            name = name.rpartition(".")[0]
        if name.split(".")[0] == "dtpu" and name:
            out.append(name)
    return out


@functools.lru_cache(maxsize=None)
def import_graph() -> dict[str, dict[str, tuple[int, bool]]]:
    """module -> {imported module: (line, inside a function)}, module-level and function-local
    imports alike (a lazy import is still a dependency), without ``if TYPE_CHECKING:`` blocks.
    Importing ``a.b.c`` runs the packages ``a.b`` first, so they count as imported too; an import
    of the importer's own package is left out (importing the module ran it already)."""
    known = modules()
    graph: dict[str, dict[str, tuple[int, bool]]] = {}
    for module, (path, package) in known.items():
        edges: dict[str, tuple[int, bool]] = {}

        def visit(node: ast.AST, local: bool) -> None:
            for child in ast.iter_child_nodes(node):
                if isinstance(child, ast.If) and "TYPE_CHECKING" in ast.dump(child.test):
                    continue
                if isinstance(child, (ast.Import, ast.ImportFrom)):
                    for target in _targets(module, package, child, known):
                        while target:
                            if target != module and not module.startswith(target + "."):
                                seen = edges.get(target)
                                if seen is None or (seen[1] and not local):
                                    edges[target] = (child.lineno, local)
                            target = target.rpartition(".")[0]
                visit(child, local or isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef,
                                                         ast.Lambda)))

        visit(ast.parse(path.read_text(), str(path)), False)
        graph[module] = edges
    return graph


def cycles(graph: dict[str, dict[str, int]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found = []
    for root in graph:
        if root in index:
            continue
        work = [(root, iter(graph[root]))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(graph[child])))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def test_every_module_has_a_layer():
    for module in modules():
        assert layer_of(module) in LAYERS


def test_no_import_goes_up_a_layer():
    graph = import_graph()
    known = modules()
    bad, used = [], set()
    for module, edges in sorted(graph.items()):
        for target, (line, _) in sorted(edges.items()):
            if LAYERS.index(layer_of(target)) <= LAYERS.index(layer_of(module)):
                continue
            if known_upward(module, target):
                used.add(next(k for k in KNOWN_UPWARD if k[0] == module
                              and (k[1] == target or k[1].startswith(target + "."))))
                continue
            bad.append(f"{known[module][0].relative_to(PYLIB)}:{line}: {module} "
                       f"({layer_of(module)}) imports {target} ({layer_of(target)})")
    assert not bad, "imports from a lower layer up to a higher one:\n  " + "\n  ".join(bad)
    assert used == set(KNOWN_UPWARD), f"KNOWN_UPWARD entries no longer needed: {set(KNOWN_UPWARD) - used}"


def test_no_import_cycle():
    """No circle of imports; the only edges left out are the documented lazy upward ones of
    KNOWN_UPWARD (function-local: they run after every module involved has loaded)."""
    graph = {m: {t: e for t, e in edges.items() if not (e[1] and known_upward(m, t))}
             for m, edges in import_graph().items()}
    found = cycles(graph)
    lines = []
    for component in found:
        for module in component:
            lines += [f"{module} -> {t} (line {graph[module][t][0]})" for t in component
                      if t in graph[module]]
    assert not found, f"import cycles {found}:\n  " + "\n  ".join(lines)


def test_the_checks_catch_what_they_look_for():
    """The graph helpers find a planted cycle and an upward import (so the tests above can fail)."""
    planted = {"a": {"b": (1, False)}, "b": {"c": (2, True)}, "c": {"a": (3, False)},
               "d": {"a": (4, False)}}
    assert cycles(planted) == [["a", "b", "c"]]
    assert layer_of("dtpu.hw.some_new_compiler") == "compiler"
    assert layer_of("dtpu.hw.some_new_unit") == "device"
    assert LAYERS.index(layer_of("dtpu.driver.jobs")) > LAYERS.index(layer_of("dtpu.hw.core"))
    graph = import_graph()
    assert "dtpu.driver.transport" in graph["dtpu.driver.jobs"]   # the graph sees real imports


def test_no_private_name_crosses_a_module():
    """``from dtpu.x import _name`` outside dtpu.x: a private name is that module's business."""
    bad = []
    for module, (path, _) in modules().items():
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("dtpu"):
                for alias in node.names:
                    if alias.name.startswith("_") and not alias.name.startswith("__"):
                        bad.append(f"{path.relative_to(PYLIB)}:{node.lineno}: {alias.name} "
                                   f"from {node.module}")
    assert not bad, "private names imported across modules:\n  " + "\n  ".join(bad)
