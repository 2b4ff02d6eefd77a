"""The DTPU TensorFlow Lite delegate, Python side.

``dtpu.so`` (built from ``delegate/`` by cffi) is what TFLite loads; it calls into
:mod:`dtpu.delegate.glue`. This package also knows where the library is and how to (re)build it:
:func:`library_path` returns the path of an up-to-date ``dtpu.so``, building it first if it is
missing or stale (other sources, another interpreter or another cffi than the ones it was built
with).

Modules: :mod:`.options` (the option table), :mod:`.support` (which nodes are claimed: every rule
in one place), :mod:`.graph` (reading TFLite's structs), :mod:`.runtime` (delegate, graph and
kernel objects), :mod:`.glue` (the extern "Python" callbacks).
"""
from __future__ import annotations

import importlib.util
import os
import threading
from pathlib import Path

_PYLIB = Path(__file__).resolve().parents[2]
_lock = threading.Lock()
_checked: dict[str, Path] = {}


def source_dir() -> Path:
    """The checkout's delegate/ directory, else the copy an installed package carries
    (dtpu/delegate/csrc/, put there by setup.py); $DTPU_DELEGATE_SRC overrides."""
    override = os.environ.get("DTPU_DELEGATE_SRC")
    path = Path(override) if override else _PYLIB.parent / "delegate"
    if not override and not (path / "build.py").is_file():
        path = Path(__file__).resolve().parent / "csrc"
    if not (path / "build.py").is_file():
        raise RuntimeError(f"dtpu: delegate sources not found at {path} (dtpu.so is built from a "
                           "checkout's delegate/ directory; set DTPU_DELEGATE_SRC to point at it)")
    return path


def builder_module():
    """The delegate's build script (build.py of :func:`source_dir`) loaded as a module: it
    builds dtpu.so and decides whether a build is current; tests check its key and ABI."""
    path = source_dir() / "build.py"
    spec = importlib.util.spec_from_file_location("dtpu_delegate_build", path)
    module = importlib.util.module_from_spec(spec)
    assert spec.loader is not None
    spec.loader.exec_module(module)
    return module


def build_kernels() -> None:
    """Build the golden model's C kernels (dtpu.hw.kernels) now, with the delegate: built at
    their first use instead, they made the first invoke of a fresh clone take ~2 s. Without a
    compiler the model keeps its numpy paths (same words), as at first use."""
    from dtpu.hw import kernels

    kernels.get()


def build(force: bool = False, verbose: bool = False, out_dir: str | os.PathLike | None = None) -> Path:
    """Build dtpu.so with this interpreter (the one that will load it), and the C kernels of the
    golden model, and return the path of dtpu.so."""
    with _lock:
        builder = builder_module()
        path = builder.build(None if out_dir is None else Path(out_dir), force=force, verbose=verbose,
                             pylib=_PYLIB)
        if out_dir is None:
            _checked["default"] = path
    build_kernels()
    return path


def library_path(build_if_needed: bool = True) -> Path:
    """Path of an up-to-date dtpu.so ($DTPU_DELEGATE_LIB forces a prebuilt file)."""
    forced = os.environ.get("DTPU_DELEGATE_LIB")
    if forced:
        return Path(forced)
    with _lock:
        if "default" in _checked:  # checked once per process
            return _checked["default"]
        built = False
        builder = builder_module()
        out_dir = builder.default_out_dir(_PYLIB)
        path = out_dir / builder.LIBRARY_NAME
        if not builder.is_current(out_dir, _PYLIB):
            if not build_if_needed:
                raise FileNotFoundError(f"dtpu: {path} is missing or stale; run `dtpu build`")
            path = builder.build(out_dir, pylib=_PYLIB)
            built = True
        _checked["default"] = path
    if built:
        build_kernels()
    return path


def facts() -> dict[str, int] | None:
    """Facts the C glue observed about the host TFLite runtime (None before dtpu.so ran)."""
    from dtpu.delegate import glue

    return glue.facts()
