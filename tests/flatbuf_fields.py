"""Byte positions of flatbuffer fields in a .tflite file, for tests that rewrite a field in place
(a scale, a zero point, an option) to build edge cases the converter never writes.

dtpu.tflite_model parses with the ``tflite`` package, whose generated classes give values, not
the byte offset of a field in the file; rewriting needs the offset, so these tests keep this small
reader of the flatbuffer layout (a table starts with an int32 offset back to its vtable; the
vtable lists each field's byte offset inside the table, 0 = absent; references are uint32
offsets relative to their own position; vectors and strings start with a uint32 length).
"""
from __future__ import annotations

import struct

import numpy as np

from dtpu.tflite_model import FlatbufferError


class FieldReader:
    """Bounds-checked access to flatbuffer tables in one byte buffer."""

    def __init__(self, buf: bytes) -> None:
        self.buf = buf

    def unpack(self, fmt: str, pos: int):
        """The little-endian `fmt` value at byte `pos` (FlatbufferError outside the buffer)."""
        size = struct.calcsize("<" + fmt)
        if pos < 0 or pos + size > len(self.buf):
            raise FlatbufferError(f"read of {size} bytes at {pos} outside a {len(self.buf)}-byte file")
        return struct.unpack_from("<" + fmt, self.buf, pos)[0]

    def root(self) -> int:
        return self.unpack("I", 0)

    def field_pos(self, table: int, index: int) -> int | None:
        vtable = table - self.unpack("i", table)
        vt_size = self.unpack("H", vtable)
        slot = 4 + 2 * index
        if slot + 2 > vt_size:
            return None  # written by an older schema: field absent
        off = self.unpack("H", vtable + slot)
        return table + off if off else None

    def scalar(self, table: int, index: int, fmt: str, default):
        pos = self.field_pos(table, index)
        return default if pos is None else self.unpack(fmt, pos)

    def deref(self, pos: int) -> int:
        """Where the uint32 reference at `pos` points (references are relative to themselves)."""
        return pos + self.unpack("I", pos)

    def table(self, table: int, index: int) -> int | None:
        pos = self.field_pos(table, index)
        return None if pos is None else self.deref(pos)

    def vector(self, table: int, index: int) -> tuple[int, int] | None:
        """(byte position of the first element, length) of a vector field, None when absent."""
        pos = self.field_pos(table, index)
        if pos is None:
            return None
        start = self.deref(pos)
        return start + 4, self.unpack("I", start)

    def tables(self, table: int, index: int) -> list[int]:
        vec = self.vector(table, index)
        if vec is None:
            return []
        start, n = vec
        if start + 4 * n > len(self.buf):
            raise FlatbufferError(f"vector of {n} tables at {start} runs past the end of the file")
        return [self.deref(start + 4 * i) for i in range(n)]

    def array(self, table: int, index: int, dtype) -> np.ndarray | None:
        vec = self.vector(table, index)
        if vec is None:
            return None
        start, n = vec
        dtype = np.dtype(dtype).newbyteorder("<")
        end = start + n * dtype.itemsize
        if end > len(self.buf):
            raise FlatbufferError(f"vector of {n} x {dtype} at {start} runs past the end of the file")
        return np.frombuffer(self.buf, dtype=dtype, count=n, offset=start)

    def string(self, table: int, index: int) -> str | None:
        raw = self.array(table, index, np.uint8)
        return None if raw is None else raw.tobytes().decode("utf-8", errors="replace")
