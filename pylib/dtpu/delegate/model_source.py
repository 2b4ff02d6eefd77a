"""Which bytes the interpreter built its graph from, and whether the delegate may read them.

TFLite's FlatBufferModel maps a model file and builds the graph without verifying it, and its
constant tensors point straight into that mapping. A byte-damaged file that the CPU interpreter
still runs can make a constant or a name point past the end of the file: inside the mapping's
last page the read returns zeros, beyond it the process dies of SIGBUS (issue #24). `dtpu run`
and `dtpu.make_interpreter` check a file with :mod:`dtpu.model_check` before TFLite sees it; a
program that calls ``Interpreter(model_path=..., experimental_delegates=[load_delegate(...)])``
goes straight to the delegate, which only gets the graph, not the file's name.

The file is found from a constant tensor's address in ``/proc/self/maps`` (the kernel's own record
of which file backs which address range, so no guess), checked once per file version, and every
constant the delegate copies is held to the mapping and the file's size. Where ``/proc`` does not
exist (not Linux) or the model came from memory (``model_content``), only the address range is
held to a readable mapping.

Hand-written because no library reads ``/proc/self/maps`` for one address (psutil's
``memory_maps`` aggregates by path and drops the addresses).
"""
from __future__ import annotations

import logging
import os
from dataclasses import dataclass

log = logging.getLogger(__name__)

MAPS = "/proc/self/maps"


@dataclass(frozen=True)
class Mapping:
    start: int
    end: int
    readable: bool
    offset: int          # file offset of `start`
    path: str | None     # a regular file, or None (anonymous, heap, [stack] ...)

    def file_size(self) -> int | None:
        if self.path is None:
            return None
        try:
            return os.stat(self.path).st_size
        except OSError:
            return None


def read_maps(text: str | None = None) -> list[Mapping] | None:
    """The process's mappings, sorted by address; None where /proc/self/maps cannot be read."""
    if text is None:
        try:
            with open(MAPS, encoding="utf-8", errors="replace") as f:
                text = f.read()
        except OSError:
            return None
    out = []
    for line in text.splitlines():
        parts = line.split(maxsplit=5)
        if len(parts) < 5:
            continue
        span, perms, offset = parts[0], parts[1], parts[2]
        start, _, end = span.partition("-")
        path = parts[5].strip() if len(parts) == 6 else ""
        if not path.startswith("/") or path.endswith(" (deleted)"):
            path = None
        out.append(Mapping(int(start, 16), int(end, 16), perms[:1] == "r", int(offset, 16), path))
    out.sort(key=lambda m: m.start)
    return out


class ModelSource:
    """The memory a graph's constants live in, snapshotted once per delegate Prepare."""

    _checked: dict[tuple, str | None] = {}    # (path, size, mtime) -> model_check's verdict

    def __init__(self, maps: list[Mapping] | None) -> None:
        self.maps = maps

    @classmethod
    def snapshot(cls) -> "ModelSource":
        return cls(read_maps())

    def mapping_of(self, address: int) -> Mapping | None:
        for m in self.maps or ():
            if m.start <= address < m.end:
                return m
        return None

    def unreadable(self, address: int, nbytes: int) -> str | None:
        """Why [address, address + nbytes) must not be read, or None."""
        if self.maps is None or nbytes <= 0:
            return None
        end = address + nbytes
        m = self.mapping_of(address)
        if m is None or not m.readable:
            return f"its data at {address:#x} is not in readable memory"
        # a range may run on into the next mapping of the same file (TFLite maps the whole file
        # at once, so in practice it does not): follow contiguous readable mappings
        last = m
        while last.end < end:
            nxt = self.mapping_of(last.end)
            if nxt is None or not nxt.readable:
                return f"its {nbytes} bytes at {address:#x} run past readable memory"
            last = nxt
        size = m.file_size()
        if size is not None and m.offset + (end - m.start) > size:
            return (f"its {nbytes} bytes end at byte {m.offset + end - m.start} of {m.path}, "
                    f"a {size}-byte file")
        return None

    def model_file(self, address: int) -> str | None:
        """The regular file mapped at `address` (the model TFLite built the graph from)."""
        m = self.mapping_of(address)
        return None if m is None else m.path

    def file_problem(self, path: str) -> str | None:
        """dtpu.model_check's verdict on the model file, once per file version; None: well formed."""
        from dtpu import model_check

        try:
            st = os.stat(path)
        except OSError as exc:
            return f"cannot stat the model file {path}: {exc}"
        key = (path, st.st_size, st.st_mtime_ns)
        if key not in self._checked:
            try:
                model_check.check_file(path)
                self._checked[key] = None
            except ValueError as exc:
                self._checked[key] = str(exc)
            except OSError as exc:
                self._checked[key] = f"cannot read the model file {path}: {exc}"
        return self._checked[key]
