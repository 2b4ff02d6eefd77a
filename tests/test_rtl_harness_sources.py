"""The in-process Verilator harnesses (pylib/dtpu/rtl/native.cpp, native_cl.cpp and the memory
model's C API axi_mem_capi.cpp) are cached by a hash of their sources (dtpu.rtl.build): every
header of this directory they include, directly or through another header, must be part of
that hash, or an edit to it would reuse a stale library (native_common.h is shared by both
harnesses). No build here: the #include lines are read."""
from __future__ import annotations

import re
from pathlib import Path

import pytest

from dtpu.rtl.build import (AXI_MEM_CAPI, AXI_MEM_HEADER, NATIVE_CL_HEADERS, NATIVE_CL_SOURCE,
                            NATIVE_HEADERS, NATIVE_SOURCE)

INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)


def local_includes(src: Path) -> set[str]:
    """The headers next to `src` it includes, recursively (Verilator's own are elsewhere)."""
    seen: set[str] = set()
    todo = [src]
    while todo:
        for name in INCLUDE.findall(todo.pop().read_text()):
            path = src.parent / name
            if path.is_file() and name not in seen:
                seen.add(name)
                todo.append(path)
    return seen


@pytest.mark.parametrize("source,keyed", [
    (NATIVE_SOURCE, NATIVE_HEADERS),
    (NATIVE_CL_SOURCE, NATIVE_CL_HEADERS),
    (AXI_MEM_CAPI, (AXI_MEM_HEADER,)),
], ids=["native", "native_cl", "axi_mem_capi"])
def test_included_headers_are_in_the_build_key(source, keyed):
    included = local_includes(source)
    assert included, f"{source.name} includes none of this directory's headers"
    assert included <= {p.name for p in keyed}, \
        f"{source.name} includes {sorted(included - {p.name for p in keyed})}, not in its build key"


def test_both_harnesses_share_native_common():
    assert "native_common.h" in local_includes(NATIVE_SOURCE)
    assert "native_common.h" in local_includes(NATIVE_CL_SOURCE)


def test_a_changed_shared_header_changes_both_harness_keys(monkeypatch, tmp_path):
    """An edit to the shared header makes new harness libraries for both tops (and leaves the
    Verilated model of the 2.0 top, which does not include it, cached)."""
    import importlib

    bm = importlib.import_module("dtpu.rtl.build")   # dtpu.rtl.build is also a function's name
    keys: dict[str, list[str]] = {}

    def cached(kind, config, key, product, *args, **kw):
        keys.setdefault(kind, []).append(key)
        return bm.BuildInfo(tmp_path, key, True, 0.0, product=tmp_path / product)

    monkeypatch.setattr(bm, "_cached", cached)
    header = tmp_path / "native_common.h"
    for text in ("// one version\n", "// another\n"):
        header.write_text(text)
        monkeypatch.setattr(bm, "NATIVE_HEADERS", (header,))
        monkeypatch.setattr(bm, "NATIVE_CL_HEADERS", (header, bm.AXI_MEM_HEADER))
        bm.build_native()
        bm.build_native_cl()
    assert keys["native"][0] != keys["native"][1]
    assert keys["native-cl"][0] != keys["native-cl"][1]
    assert keys["native-cl-obj"][0] == keys["native-cl-obj"][1]
