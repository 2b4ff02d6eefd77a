"""The .tflite file behind a graph the delegate is asked to prepare, checked by dtpu.model_check.

TFLite's Python ``Interpreter(model_path=...)`` memory-maps the file and builds the graph without
the flatbuffer verifier; a damaged file it happens to load (its stray reads landed on readable
memory) hands the delegate tensors built from bytes outside the file. ``dtpu run`` and
``dtpu.make_interpreter`` refuse such files before TFLite sees them; a delegate applied through
the plain TFLite API only sees the TfLiteContext. It finds the file there: a constant tensor's data
(kTfLiteMmapRo) lies in the file's mapping, which /proc/self/maps names. When that file fails
dtpu.model_check the delegate claims nothing and the whole graph runs on the CPU.

What this cannot cover: a model given as bytes (``model_content``) lives in anonymous memory with
no bounds to check against (dtpu.make_interpreter checks those bytes itself), and a damaged file
whose stray reads fault inside TFLite's own InterpreterBuilder, which runs before any delegate is
called (issue 24.9: there the process dies with or without the delegate applied).
"""
from __future__ import annotations

import logging
import os
import threading

log = logging.getLogger("dtpu.delegate")

MMAP_RO = 1                      # kTfLiteMmapRo
_MAPS = "/proc/self/maps"
_verdicts: dict[tuple, str | None] = {}    # (path, inode, size, mtime_ns) -> refusal or None
_lock = threading.Lock()


def mapped_file(address: int, maps: str = _MAPS) -> str | None:
    """Path of the regular file mapped from its first byte at `address`'s mapping, or None
    (anonymous memory, a special mapping, a file mapped from an offset, no /proc)."""
    try:
        with open(maps, encoding="utf-8", errors="replace") as f:
            lines = f.readlines()
    except OSError:
        return None
    for line in lines:
        parts = line.split(maxsplit=5)
        if len(parts) < 6:
            continue
        lo, hi = (int(v, 16) for v in parts[0].split("-"))
        if lo <= address < hi:
            path = parts[5].rstrip("\n")
            if int(parts[2], 16) != 0 or not path.startswith("/") or path.endswith(" (deleted)"):
                return None
            return path
    return None


def model_address(ffi, ctx) -> int | None:
    """The address of the first constant tensor's data (in the model's buffer), None if none."""
    for i in range(ctx.tensors_size):
        t = ctx.tensors[i]
        if int(t.allocation_type) == MMAP_RO and t.data.raw != ffi.NULL:
            return int(ffi.cast("uintptr_t", t.data.raw))
    return None


def refusal(ffi, ctx) -> str | None:
    """Why the graph's model file must not be read by the delegate (dtpu.model_check's message),
    or None: the file passes, or there is no file to check (see the module docstring)."""
    address = model_address(ffi, ctx)
    path = None if address is None else mapped_file(address)
    if path is None:
        return None
    try:
        st = os.stat(path)
    except OSError:
        return None
    key = (path, st.st_ino, st.st_size, st.st_mtime_ns)
    with _lock:
        if key in _verdicts:
            return _verdicts[key]
    from dtpu import model_check

    try:
        model_check.check_file(path)
        verdict = None
    except model_check.ModelFormatError as exc:
        verdict = str(exc)
    except OSError as exc:
        log.debug("model file %s could not be read for its check: %s", path, exc)
        return None
    with _lock:
        _verdicts[key] = verdict
    return verdict
