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
SOURCES = ("dtpu_abi.h", "dtpu_delegate.c", "build.py")

# Declarations of our own glue, in addition to the TFLite ABI section of dtpu_abi.h.
GLUE_CDEF = """
typedef struct dtpu_kernel {
  int64_t handle;
  int n_io;
  int* io_tensors;
  void** io_data;
  size_t* io_bytes;
  int64_t seq;
  int64_t last_seq;
  int64_t last_enter_ns;
  int64_t last_call_ns;
  int64_t last_exit_ns;
  int last_status;
} dtpu_kernel;

typedef struct dtpu_abi_facts {
  int64_t create_calls;
  int create_gil_held;
  uint64_t create_n_raw;
  int invoke_gil_held;
  int get_tensor_is_null;
  int64_t sizeof_tensor, sizeof_registration, sizeof_delegate, sizeof_context_prefix;
} dtpu_abi_facts;

extern dtpu_abi_facts dtpu_facts;
extern int dtpu_python_alive;

int64_t dtpu_now_ns(void);
void dtpu_report_error(TfLiteContext* ctx, const char* msg);
int dtpu_kernel_set_io(dtpu_kernel* k, const int* tensors, int n);
int dtpu_read_string(const char* src, char* dst, int cap);
int dtpu_resize_tensor(TfLiteContext* ctx, int tensor_index, const int* dims, int ndims);

TfLiteDelegate* tflite_plugin_create_delegate(char** keys, char** values, size_t num_options,
                                              void (*report_error)(const char*));
void tflite_plugin_destroy_delegate(TfLiteDelegate* delegate);

extern "Python" {
  int64_t dtpu_py_create(int n, char** keys, char** values, char* err, size_t errlen);
  void dtpu_py_destroy(int64_t handle);
  int dtpu_py_select(int64_t handle, TfLiteContext* ctx, TfLiteIntArray* plan,
                     TfLiteIntArray* claimed, char* err, size_t errlen);
  void dtpu_py_select_done(int64_t handle);
  int64_t dtpu_py_kernel_init(int64_t handle, TfLiteContext* ctx,
                              const TfLiteDelegateParams* params, dtpu_kernel* kernel);
  int dtpu_py_kernel_prepare(int64_t kernel_handle, TfLiteContext* ctx, TfLiteNode* node,
                             dtpu_kernel* kernel);
  int dtpu_py_kernel_invoke(int64_t kernel_handle, TfLiteContext* ctx, dtpu_kernel* kernel);
  void dtpu_py_kernel_free(int64_t kernel_handle);
}
"""

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


def abi_cdef(header: Path = HERE / "dtpu_abi.h") -> str:
    """The cdef-able part of dtpu_abi.h (between the DTPU_CDEF markers), comments removed."""
    text = header.read_text()
    match = re.search(r"/\* DTPU_CDEF_BEGIN \*/(.*)/\* DTPU_CDEF_END \*/", text, re.S)
    if match is None:
        raise RuntimeError(f"{header}: DTPU_CDEF_BEGIN/END markers not found")
    body = re.sub(r"/\*.*?\*/", "", match.group(1), flags=re.S)
    return re.sub(r"//[^\n]*", "", body)


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


def _compile(work: Path, pylib: Path, verbose: bool) -> Path:
    import cffi

    ffibuilder = cffi.FFI()
    ffibuilder.cdef(abi_cdef() + GLUE_CDEF)
    ffibuilder.embedding_init_code(INIT_CODE.format(pylib=str(Path(pylib).resolve()), module=MODULE_NAME))
    libdir, _ = libpython()
    ffibuilder.set_source(
        MODULE_NAME,
        '#include "dtpu_delegate.c"\n',
        include_dirs=[str(HERE)],
        extra_compile_args=["-O2", "-fvisibility=hidden", "-Wall", "-Wextra", "-Wno-unused-parameter",
                            "-Wno-missing-field-initializers"],
        extra_link_args=[f"-Wl,-rpath,{libdir}"] if libdir else [],  # find the same libpython
    )
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
