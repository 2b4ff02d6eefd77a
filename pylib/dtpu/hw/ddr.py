"""The simulated device's DDR: what the core's HP memory port reads and writes, with the AXI
faults the contract names (DECERR, SLVERR, a hung response) so error paths can be exercised, and a
pool of buffers standing in for ``pynq.allocate`` on the model transport.
"""
from __future__ import annotations

import bisect

import numpy as np

from dtpu.hw.config import ceil_div
from dtpu.hw.listformat import DEFAULT_DDR_BASE
from dtpu.hw.placement import Region


class DdrFault(Exception):
    """An AXI error response (`kind` "DECERR" or "SLVERR") or no response ("TIMEOUT")."""

    def __init__(self, kind: str, addr: int, n: int) -> None:
        super().__init__(f"{kind} at {addr:#x} (+{n} bytes)")
        self.kind = kind


class Ddr:
    """DDR as the HP port sees it: a byte array at `base`; an access outside it is DECERR, an
    access to an address in `slverr` ranges is SLVERR, in `decerr` ranges DECERR (fault
    injection: an interconnect that decodes no slave there, as the RTL regressions' memory can)."""

    def __init__(self, base: int, size: int, image: np.ndarray | None = None) -> None:
        self.base = base
        self.mem = np.zeros(size, np.uint8)
        if image is not None:
            self.mem[:image.size] = image
        self.slverr: list[tuple[int, int]] = []
        self.decerr: list[tuple[int, int]] = []
        self.hang: list[tuple[int, int]] = []      # ranges that never respond (TIMEOUT)

    @property
    def layout(self) -> int:
        """Changes when the bytes move (views of them taken before then are stale)."""
        return id(self.mem)

    def _off(self, addr: int, n: int) -> int:
        o = addr - self.base
        if o < 0 or o + n > self.mem.size \
                or any(lo < addr + n and addr < hi for lo, hi in self.decerr):
            raise DdrFault("DECERR", addr, n)
        if any(lo < addr + n and addr < hi for lo, hi in self.slverr):
            raise DdrFault("SLVERR", addr, n)
        if any(lo < addr + n and addr < hi for lo, hi in self.hang):
            raise DdrFault("TIMEOUT", addr, n)
        return o

    def host_view(self, addr: int, n: int) -> np.ndarray:
        """The bytes as the CPU sees them (through the PS, not the HP port: no injected faults)."""
        o = addr - self.base
        if o < 0 or o + n > self.mem.size:
            raise ValueError(f"host access {addr:#x}+{n} outside the DDR buffer "
                             f"{self.base:#x}+{self.mem.size}")
        return self.mem[o:o + n]

    def read(self, addr: int, n: int) -> np.ndarray:
        o = self._off(addr, n)
        return self.mem[o:o + n]

    def write(self, addr: int, data: np.ndarray) -> None:
        b = np.ascontiguousarray(data).view(np.uint8).reshape(-1)
        o = self._off(addr, b.size)
        self.mem[o:o + b.size] = b


class DeviceBuffer:
    """A buffer the DTPU reaches through its memory port and the host through its own view:
    what ``pynq.allocate`` returns on the board (there, ``flush``/``invalidate`` keep the
    CPU's caches coherent with the PL's accesses; here they are no-ops)."""

    #: no cache between the host's view and the device's: flush/invalidate have nothing to do
    #: (the C invoke path skips them)
    coherent = True

    def __init__(self, pool: "DdrPool", addr: int, array: np.ndarray) -> None:
        self.pool, self.addr, self.array = pool, addr, array

    def flush(self, offset: int = 0, nbytes: int | None = None) -> None:
        pass

    def invalidate(self, offset: int = 0, nbytes: int | None = None) -> None:
        pass

    def free(self) -> None:
        self.pool.free(self.addr)


class DdrPool:
    """The golden model's DDR: buffers allocated at increasing addresses (from
    DEFAULT_DDR_BASE, 4 KiB aligned like CMA buffers), read and written by the HP port by
    address; anything outside a buffer is DECERR."""

    def __init__(self, base: int = DEFAULT_DDR_BASE) -> None:
        self.base = self.next = base
        #: the address space from `base` to 4 GiB, in 4 KiB units
        self.space = Region((1 << 32) - base, 4096)
        self.bufs: dict[int, np.ndarray] = {}
        self._starts: list[int] = []                # sorted buffer addresses (bisect)
        self.slverr: list[tuple[int, int]] = []    # fault injection, as Ddr's
        self.hang: list[tuple[int, int]] = []      # ranges that never respond (TIMEOUT)
        #: bumped by every alloc and free: views of the buffers taken before are then stale
        self.layout = 0

    def alloc(self, nbytes: int) -> DeviceBuffer:
        """First fit from the base: freed ranges are reused (a process that prepares again and
        again must not run out of the 32-bit address space)."""
        size = ceil_div(max(int(nbytes), 1), 4096) * 4096
        off = self.space.alloc(size)
        if off is None:
            raise MemoryError(f"{nbytes} bytes of DDR beyond the 32-bit address space")
        addr = self.base + off
        self.next = max(self.next, addr + size)
        arr = self.bufs[addr] = np.zeros(size, np.uint8)
        bisect.insort(self._starts, addr)
        self.layout += 1
        return DeviceBuffer(self, addr, arr)

    def free(self, addr: int) -> None:
        if self.bufs.pop(addr, None) is not None:
            self._starts.remove(addr)
            self.space.free(addr - self.base)
            self.layout += 1

    def _find(self, addr: int, n: int) -> np.ndarray:
        if self.slverr and any(lo < addr + n and addr < hi for lo, hi in self.slverr):
            raise DdrFault("SLVERR", addr, n)
        if self.hang and any(lo < addr + n and addr < hi for lo, hi in self.hang):
            raise DdrFault("TIMEOUT", addr, n)
        i = bisect.bisect_right(self._starts, addr) - 1
        if i >= 0:
            start = self._starts[i]
            arr = self.bufs[start]
            if addr + n <= start + arr.size:
                return arr[addr - start:addr - start + n]
        raise DdrFault("DECERR", addr, n)

    def read(self, addr: int, n: int) -> np.ndarray:
        return self._find(addr, n)

    def write(self, addr: int, data: np.ndarray) -> None:
        b = np.ascontiguousarray(data).view(np.uint8).reshape(-1)
        self._find(addr, b.size)[:] = b
