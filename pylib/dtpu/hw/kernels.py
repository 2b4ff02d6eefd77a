"""The compiled fast path's C kernels (kernels.c beside this file): build once, load with cffi.

:func:`get` returns the loaded library, or None when it cannot be had (no C compiler, a build
error, ``DTPU_KERNELS=0``); :mod:`dtpu.hw.fast` then keeps its numpy datapaths, which give the
same words. The shared library is built with the system's C compiler into the directory of the
delegate's build (``pylib/dtpu/_build/`` if writable, else ``~/.cache/dtpu/``, or
``$DTPU_BUILD_DIR``) under a name keyed by the source, the compiler flags and the machine, so a
changed source or another host never loads a stale file.
"""
from __future__ import annotations

import hashlib
import logging
import os
import platform
import shutil
import subprocess
import tempfile
import threading
from pathlib import Path

import numpy as np

log = logging.getLogger(__name__)

SOURCE = Path(__file__).with_name("kernels.c")
#: no -ffast-math: the kernels rely on IEEE float64 (round to nearest, no reassociation) and
#: integer semantics. -fno-trapping-math only lets the compiler evaluate both arms of a
#: floating-point select (so the fused post unit vectorizes); it changes no result.
CFLAGS = ["-O3", "-march=native", "-fno-trapping-math", "-fPIC", "-shared",
          "-fno-strict-aliasing", "-Wall"]

CDEF = """
int dtpu_post_exact(int akind, const void *acc, int64_t rows, int64_t c, int64_t rows_per_block,
                    const int64_t *bias, const int64_t *mult, const int64_t *shift,
                    const int64_t *zp, int variant, int64_t act_lo, int64_t act_hi,
                    int64_t type_lo, int64_t type_hi, int okind, void *out);
void dtpu_post_fused(int akind, const void *acc, int64_t rows, int64_t c, int64_t rows_per_block,
                     const double *scale, const double *offset, const double *thr,
                     const double *delta, double lo, double hi, int okind, void *out);
void dtpu_dw_acc(int xsigned, const void *x, int64_t nchunk, int64_t ih, int64_t iw, int64_t cl,
                 const int32_t *w, int64_t kh, int64_t kw, int64_t oh, int64_t ow, int64_t sy,
                 int64_t sx, int64_t dy, int64_t dx, int64_t pt, int64_t pl, int32_t off,
                 int32_t *acc);
"""

ACC_KIND = {np.dtype(np.float32): 0, np.dtype(np.float64): 1, np.dtype(np.int32): 2}
OUT_KIND = {np.dtype(np.int8): 0, np.dtype(np.uint8): 1, np.dtype(np.int16): 2}

_lock = threading.Lock()
_state: dict = {}


class Kernels:
    """The loaded library with numpy-facing wrappers (arguments checked for type and layout)."""

    def __init__(self, ffi, lib) -> None:
        self.ffi, self.lib = ffi, lib

    def _p(self, a: np.ndarray, ctype: str = "void *"):
        if not a.flags.c_contiguous:
            raise ValueError("kernels take C-contiguous arrays")
        return self.ffi.cast(ctype, a.ctypes.data)

    def post_exact(self, acc: np.ndarray, rows_per_block: int, bias, mult, shift, zp,
                   variant: int, act_lo: int, act_hi: int, out: np.ndarray) -> int:
        """acc (rows, c) -> out (rows, c); params int64 (blocks * c). Returns 1 if a total
        wrapped (ERR_WARN_WRAP32)."""
        rows, c = acc.shape
        info = np.iinfo(out.dtype)
        for p in (bias, mult, shift, zp):
            assert p.dtype == np.int64 and p.size == -(-rows // rows_per_block) * c
        return self.lib.dtpu_post_exact(
            ACC_KIND[acc.dtype], self._p(acc), rows, c, rows_per_block,
            self._p(bias, "int64_t *"), self._p(mult, "int64_t *"), self._p(shift, "int64_t *"),
            self._p(zp, "int64_t *"), variant, act_lo, act_hi, int(info.min), int(info.max),
            OUT_KIND[out.dtype], self._p(out))

    def post_fused(self, acc: np.ndarray, rows_per_block: int, scale, offset, thr, delta,
                   lo: float, hi: float, out: np.ndarray) -> None:
        rows, c = acc.shape
        for p in (scale, offset, thr, delta):
            assert p.dtype == np.float64 and p.size == -(-rows // rows_per_block) * c
        self.lib.dtpu_post_fused(
            ACC_KIND[acc.dtype], self._p(acc), rows, c, rows_per_block,
            self._p(scale, "double *"), self._p(offset, "double *"), self._p(thr, "double *"),
            self._p(delta, "double *"), lo, hi, OUT_KIND[out.dtype], self._p(out))

    def dw_acc(self, x: np.ndarray, w: np.ndarray, g, in_off: int, acc: np.ndarray) -> None:
        """x (nchunk, ih, iw, cl) int8/uint8, w (taps, nchunk*cl) int32 -> acc (nchunk, oh, ow,
        cl) int32."""
        assert x.dtype in (np.int8, np.uint8) and w.dtype == np.int32 and acc.dtype == np.int32
        nchunk, ih, iw, cl = x.shape
        assert acc.shape == (nchunk, g.oh, g.ow, cl) and w.shape == (g.kh * g.kw, nchunk * cl)
        self.lib.dtpu_dw_acc(
            int(x.dtype == np.int8), self._p(x), nchunk, ih, iw, cl, self._p(w, "int32_t *"),
            g.kh, g.kw, g.oh, g.ow, g.sy, g.sx, g.dy, g.dx, g.pt, g.pl, in_off,
            self._p(acc, "int32_t *"))


def _build_dir() -> Path:
    override = os.environ.get("DTPU_BUILD_DIR")
    if override:
        return Path(override)
    local = Path(__file__).resolve().parents[1] / "_build"
    try:
        local.mkdir(exist_ok=True)
        if os.access(local, os.W_OK):
            return local
    except OSError:
        pass
    return Path.home() / ".cache" / "dtpu"


def _machine_tag() -> str:
    flags = ""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("flags"):
                flags = line
                break
    except OSError:
        pass
    return f"{platform.machine()}|{platform.processor()}|{flags}"


def _build(cc: str) -> Path:
    key = hashlib.sha256(SOURCE.read_bytes() + " ".join([cc, *CFLAGS]).encode()
                         + _machine_tag().encode()).hexdigest()[:16]
    out_dir = _build_dir()
    out_dir.mkdir(parents=True, exist_ok=True)
    target = out_dir / f"dtpu_kernels-{key}.so"
    if target.exists():
        return target
    with tempfile.TemporaryDirectory(prefix="dtpu-kernels-") as work:
        tmp = Path(work) / target.name
        subprocess.run([cc, *CFLAGS, "-o", str(tmp), str(SOURCE), "-lm"], check=True,
                       capture_output=True, text=True)
        staged = out_dir / (target.name + f".{os.getpid()}.tmp")
        shutil.copyfile(tmp, staged)
        os.replace(staged, target)   # atomic: a concurrent build writes the same bytes
    log.info("built %s", target)
    return target


def get() -> Kernels | None:
    """The kernels, built on first use; None if unavailable (the numpy paths are used)."""
    if "lib" in _state:
        return _state["lib"]
    with _lock:
        if "lib" in _state:
            return _state["lib"]
        lib = None
        if os.environ.get("DTPU_KERNELS", "1").lower() not in ("0", "false", "no", "off"):
            cc = os.environ.get("CC") or shutil.which("cc") or shutil.which("gcc")
            try:
                import cffi

                if cc is None:
                    raise FileNotFoundError("no C compiler (cc) on PATH")
                path = _build(cc)
                ffi = cffi.FFI()
                ffi.cdef(CDEF)
                lib = Kernels(ffi, ffi.dlopen(str(path)))
            except (OSError, ImportError, subprocess.CalledProcessError) as e:
                detail = getattr(e, "stderr", "") or e
                log.warning("dtpu: C kernels unavailable (%s); the fast path stays with numpy",
                            str(detail).strip()[:500])
                lib = None
        _state["lib"] = lib
        return lib


__all__ = ["Kernels", "get"]
