"""Verilator's run-time library compiled once for all the harness's builds, not once per build.

Every build under sim_build/ compiles the same four files of Verilator's include directory
(verilated.cpp, verilated_vpi.cpp, verilated_threads.cpp, verilated_dpi.cpp) with the same flags:
about 18 of the 22-25 CPU-s a small unit's build costs, a dozen times in `make test`. verilated.mk
runs every compile as ``$(OBJCACHE) $(CXX) ... -c -o X.o X.cpp``; :func:`make_flags` points
OBJCACHE at this module, which serves a compile of a file of Verilator's include directory from
``<sim_build>/_runtime/<key>/`` when that exact command (the output name aside), the same source
and Verilator's headers were compiled before, and runs every other compile unchanged (the design's
own files, cocotb's main, which includes the design's header).
"""
from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

CACHE_DIR = "_runtime"


def _include_dir(argv: list[str]) -> Path | None:
    for a in argv:
        if a.startswith("-I") and a.endswith("/include") and (Path(a[2:]) / "verilated.h").is_file():
            return Path(a[2:]).resolve()
    return None


def _runtime_source(argv: list[str]) -> Path | None:
    """The compiled file when it is one of Verilator's own (``-c ... <include>/X.cpp``)."""
    include = _include_dir(argv)
    if include is None or "-c" not in argv or not argv[-1].endswith(".cpp"):
        return None
    src = Path(argv[-1])
    if not src.is_absolute():       # make found it through VPATH: the name as written
        src = include / src
    src = src.resolve()
    return src if src.parent == include and src.is_file() else None


def _key(argv: list[str], src: Path) -> str:
    """The command without its output name, the source and every header of its directory."""
    h = hashlib.sha256()
    out = argv.index("-o") + 1 if "-o" in argv else -1
    h.update("\0".join(a for i, a in enumerate(argv) if i != out).encode())
    cxx = shutil.which(argv[0])
    if cxx:                             # the compiler itself: another install, another key
        st = Path(cxx).resolve().stat()
        h.update(f"{Path(cxx).resolve()}:{st.st_size}:{st.st_mtime_ns}".encode())
    for p in sorted(src.parent.glob("*.h")) + [src]:
        h.update(p.name.encode() + b"\0" + p.read_bytes())
    return h.hexdigest()[:20]


def compile_cached(cache_root: Path, argv: list[str]) -> int:
    """Run the compile `argv` (from make, in the build directory), or copy its output (the .o
    and the -MMD .d) from the cache; store what a real compile of a run-time file produced."""
    src = _runtime_source(argv)
    if src is None or "-o" not in argv:
        return subprocess.call(argv)
    obj = Path(argv[argv.index("-o") + 1])
    dep = obj.with_suffix(".d")
    entry = cache_root / CACHE_DIR / _key(argv, src)
    if (entry / "done").is_file():
        shutil.copyfile(entry / obj.name, obj)
        if (entry / dep.name).is_file():
            shutil.copyfile(entry / dep.name, dep)
        return 0
    code = subprocess.call(argv)
    if code == 0 and obj.is_file():
        entry.parent.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=".tmp-", dir=entry.parent))
        shutil.copyfile(obj, tmp / obj.name)
        if dep.is_file():
            shutil.copyfile(dep, tmp / dep.name)
        (tmp / "done").write_text(" ".join(argv) + "\n")
        try:
            os.rename(tmp, entry)         # another build may have stored it first: keep that
        except OSError:
            shutil.rmtree(tmp, ignore_errors=True)
    return code


def make_flags(cache_root: Path) -> str:
    """``OBJCACHE=<this module as a command>`` for make (through MAKEFLAGS); "" where the path
    has a space, which make's variable would split."""
    if " " in str(cache_root) or " " in sys.executable:
        return ""
    script = cache_root / CACHE_DIR / "objcache"
    if not script.is_file():
        script.parent.mkdir(parents=True, exist_ok=True)
        tmp = script.with_name(f".objcache-{os.getpid()}")
        tmp.write_text(f"#!{sys.executable}\nimport sys\nsys.path.insert(0, {str(Path(__file__).parents[1])!r})\n"
                       f"from dtpu_sim.runtime_objs import compile_cached\n"
                       f"sys.exit(compile_cached(__import__('pathlib').Path({str(cache_root)!r}), sys.argv[1:]))\n")
        tmp.chmod(0o755)
        os.replace(tmp, script)
    return f"OBJCACHE={script}"
