"""Build dtpu.so: the DTPU TFLite external delegate (C glue + embedded Python) with cffi.

cffi's embedding mode compiles ``dtpu_delegate.c`` together with a small init script into one
shared library. TFLite's ``load_delegate`` dlopen()s it and calls ``tflite_plugin_create_delegate``;
the first call into Python runs the init script inside the *host process's* interpreter, which
imports :mod:`dtpu.delegate.glue` and attaches the ``extern "Python"`` callbacks.

The library links the libpython it was built with, so build it with the interpreter that will
load it (``dtpu build`` does; ``dtpu.delegate_path()`` rebuilds when the sources, the interpreter
or cffi changed). Usage::

    python delegate/build.py [--out DIR] [--force] [--verbose]
"""
from __future__ import annotations

import argparse
import contextlib
import fcntl
import hashlib
import json
import os
import re
import shutil
import sys
import sysconfig
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
DEFAULT_PYLIB = ROOT / "pylib"
MODULE_NAME = "_dtpu_delegate"
LIBRARY_NAME = "dtpu.so"
SOURCES = ("dtpu_abi.h", "dtpu_cpath.h", "dtpu_cpath.c", "dtpu_glue.h", "dtpu_delegate.c", "build.py")

# Runs once per process, in the host's interpreter, on the first call into Python.
INIT_CODE = """
import importlib.util
import sys

if importlib.util.find_spec("dtpu") is None:
    sys.path.append({pylib!r})  # fallback: the tree this library was built from

from {module} import ffi, lib
from dtpu.delegate import glue as _glue

_glue.install(ffi, lib)
"""


def _section(header: Path, begin: str, end: str) -> str:
    """The text of `header` between the /* begin */ and /* end */ markers, comments removed."""
    text = header.read_text()
    match = re.search(rf"/\* {begin} \*/(.*)/\* {end} \*/", text, re.S)
    if match is None:
        raise RuntimeError(f"{header}: {begin}/{end} markers not found")
    body = re.sub(r"/\*.*?\*/", "", match.group(1), flags=re.S)
    return re.sub(r"//[^\n]*", "", body)


def abi_cdef(header: Path = HERE / "dtpu_abi.h") -> str:
    """The cdef-able part of dtpu_abi.h (between the DTPU_CDEF markers), comments removed."""
    return _section(header, "DTPU_CDEF_BEGIN", "DTPU_CDEF_END")


def cpath_cdef(header: Path = HERE / "dtpu_cpath.h") -> str:
    """The C invoke path's declarations Python uses (records, set-up, the core lock)."""
    return _section(header, "DTPU_CDEF_BEGIN", "DTPU_CDEF_END")


def glue_cdef(header: Path = HERE / "dtpu_glue.h") -> str:
    """The declarations dtpu_delegate.c shares with Python, read from dtpu_glue.h (the C file
    includes the same header): its cdef part, then its Python callbacks as cffi's
    extern "Python" block (the C side declares them static: cffi defines them after the C file)."""
    callbacks = _section(header, "DTPU_PYTHON_BEGIN", "DTPU_PYTHON_END")
    callbacks = re.sub(r"^static\s+", "", callbacks.strip(), flags=re.M)
    return (_section(header, "DTPU_CDEF_BEGIN", "DTPU_CDEF_END")
            + '\nextern "Python" {\n' + callbacks + "\n}\n")


def libpython() -> tuple[str, str]:
    """(directory, file name) of the shared libpython this interpreter runs on."""
    libdir = sysconfig.get_config_var("LIBDIR") or ""
    ldlib = sysconfig.get_config_var("LDLIBRARY") or ""
    return libdir, ldlib


def build_key(pylib: Path = DEFAULT_PYLIB) -> dict:
    """Everything the built library depends on; a different key means a rebuild."""
    import cffi

    digest = hashlib.sha256()
    for name in SOURCES:
        digest.update(name.encode() + b"\0" + (HERE / name).read_bytes() + b"\0")
    return {
        "sources_sha256": digest.hexdigest(),
        "python": sys.version.split()[0],
        "soabi": sysconfig.get_config_var("SOABI") or "",
        "libpython": os.path.join(*libpython()),
        "cffi": cffi.__version__,
        "pylib": str(Path(pylib).resolve()),
    }


def default_out_dir(pylib: Path = DEFAULT_PYLIB) -> Path:
    """pylib/dtpu/_build/<tag>/ if writable, else ~/.cache/dtpu/<tag>/ (or $DTPU_BUILD_DIR).

    The tag names the interpreter ABI and the cffi version, so environments that differ in either
    (say .venv and .venv-litert) keep separate libraries instead of rebuilding over each other.
    """
    import cffi

    override = os.environ.get("DTPU_BUILD_DIR")
    if override:
        return Path(override)
    soabi = sysconfig.get_config_var("SOABI") or f"py{sys.version_info[0]}{sys.version_info[1]}"
    tag = f"{soabi}-cffi{cffi.__version__}"
    in_tree = Path(pylib) / "dtpu" / "_build" / tag
    probe = in_tree
    while not probe.exists():
        probe = probe.parent
    if os.access(probe, os.W_OK):
        return in_tree
    cache = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache"))
    return cache / "dtpu" / tag


def is_current(out_dir: Path, pylib: Path = DEFAULT_PYLIB) -> bool:
    lib, stamp = Path(out_dir) / LIBRARY_NAME, Path(out_dir) / (LIBRARY_NAME + ".json")
    if not (lib.exists() and stamp.exists()):
        return False
    try:
        return json.loads(stamp.read_text()) == build_key(pylib)
    except (OSError, ValueError):
        return False


@contextlib.contextmanager
def _locked(out_dir: Path):
    out_dir.mkdir(parents=True, exist_ok=True)
    ignore = out_dir / ".gitignore"
    if not ignore.exists():  # build products (library, stamp, lock) never go into git
        ignore.write_text("*\n")
    with open(out_dir / ".lock", "w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


#: the compiler flags of dtpu.so (delegate/cross.py compiles the same source with the same
#: flags, plus -Werror, for the board's armv7l)
CFLAGS = ["-O2", "-fvisibility=hidden", "-Wall", "-Wextra", "-Wno-unused-parameter",
          "-Wno-missing-field-initializers"]


def ffi_builder(pylib: Path = DEFAULT_PYLIB, link_args: list[str] | None = None):
    """The cffi builder of dtpu.so: declarations, embedding init code, the C glue as source."""
    import cffi

    ffibuilder = cffi.FFI()
    ffibuilder.cdef(abi_cdef() + cpath_cdef() + glue_cdef())
    ffibuilder.embedding_init_code(INIT_CODE.format(pylib=str(Path(pylib).resolve()), module=MODULE_NAME))
    ffibuilder.set_source(
        MODULE_NAME,
        '#include "dtpu_delegate.c"\n#include "dtpu_cpath.c"\n',
        include_dirs=[str(HERE)],
        extra_compile_args=list(CFLAGS),
        extra_link_args=list(link_args or []),
    )
    return ffibuilder


def _compile(work: Path, pylib: Path, verbose: bool) -> Path:
    libdir, _ = libpython()
    # find the same libpython
    ffibuilder = ffi_builder(pylib, [f"-Wl,-rpath,{libdir}"] if libdir else [])
    quiet = contextlib.nullcontext() if verbose else _silenced()
    with quiet:
        produced = ffibuilder.compile(tmpdir=str(work), target=LIBRARY_NAME, verbose=verbose)
    return Path(produced)


@contextlib.contextmanager
def _silenced():
    """Keep distutils' compiler chatter off stdout/stderr unless the build fails."""
    saved = os.dup(1), os.dup(2)
    with tempfile.TemporaryFile("w+") as log:
        os.dup2(log.fileno(), 1)
        os.dup2(log.fileno(), 2)
        try:
            yield
        except BaseException:
            os.dup2(saved[0], 1)
            os.dup2(saved[1], 2)
            log.seek(0)
            sys.stderr.write(log.read())
            raise
        finally:
            os.dup2(saved[0], 1)
            os.dup2(saved[1], 2)
            os.close(saved[0])
            os.close(saved[1])


def build(out_dir: Path | None = None, *, force: bool = False, verbose: bool = False,
          pylib: Path = DEFAULT_PYLIB) -> Path:
    """Build (if missing, stale or forced) and return the path of dtpu.so. Safe to run concurrently."""
    out_dir = Path(out_dir) if out_dir is not None else default_out_dir(pylib)
    target = out_dir / LIBRARY_NAME
    with _locked(out_dir):
        if not force and is_current(out_dir, pylib):
            return target
        key = build_key(pylib)
        with tempfile.TemporaryDirectory(prefix="dtpu-build-") as work:
            produced = _compile(Path(work), pylib, verbose)
            staged = out_dir / (LIBRARY_NAME + ".tmp")
            shutil.copyfile(produced, staged)
            os.chmod(staged, 0o755)
            os.replace(staged, target)  # atomic: processes that loaded the old file keep it
        (out_dir / (LIBRARY_NAME + ".json")).write_text(json.dumps(key, indent=1) + "\n")
    return target


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=None, help="output directory (default: "
                        "pylib/dtpu/_build/<soabi>-cffi<version>/ or ~/.cache/dtpu/<same>/)")
    parser.add_argument("--force", action="store_true", help="rebuild even if up to date")
    parser.add_argument("--verbose", action="store_true", help="show the compiler's output")
    args = parser.parse_args(argv)
    print(build(args.out, force=args.force, verbose=args.verbose))
    return 0


if __name__ == "__main__":
    sys.exit(main())
