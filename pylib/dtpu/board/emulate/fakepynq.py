"""A stand-in for the part of the pynq API the DTPU board code uses, over the emulated board.

``Overlay`` (reads the .hwh beside the .bit into ``ip_dict``, binds drivers by VLNV, "downloads"
by programming :data:`~dtpu.board.emulate.board.BOARD`), ``allocate`` (numpy arrays with a
``physical_address`` in the emulated DDR), ``MMIO``, ``DefaultIP`` (drivers register through
``bindto``) and ``pynq.lib.dma.DMA`` (the simple-mode channel API: ``transfer``, ``wait``,
``idle``, ``running``, ``error``, ``start``, ``stop``, ``transferred``) behave as PYNQ 3.0's do
for this use; everything else is absent. Written from PYNQ's documented behaviour, not copied.
"""
from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import numpy as np

from dtpu.board.emulate.board import BOARD
from dtpu.board.emulate.hwh import parse_hwh

log = logging.getLogger(__name__)

__version__ = "3.0.1+dtpu.emulated"
EMULATED = True

_ip_drivers: dict[str, type] = {}


class MMIO:
    """32-bit register access to [base_addr, base_addr + length)."""

    def __init__(self, base_addr: int, length: int = 4, device: Any = None, **kwargs: Any) -> None:
        self.base_addr = int(base_addr)
        self.length = int(length)

    def _check(self, offset: int) -> None:
        if offset < 0 or offset + 4 > self.length or offset % 4:
            raise ValueError(f"MMIO offset {offset:#x} outside [0, {self.length:#x}) or unaligned")

    def read(self, offset: int = 0, length: int = 4, word_order: str = "little") -> int:
        if length != 4:
            raise ValueError(f"emulated MMIO reads 4 bytes at a time, not {length}")
        self._check(offset)
        return BOARD.read(self.base_addr + offset)

    def write(self, offset: int, data: Any) -> None:
        self._check(offset)
        if isinstance(data, (bytes, bytearray)):
            data = int.from_bytes(bytes(data[:4]), "little")
        BOARD.write(self.base_addr + offset, int(data))


class DefaultIP:
    """Base of IP drivers; a subclass with ``bindto = [VLNV, ...]`` is used for those IPs."""

    bindto: list[str] = []

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        for vlnv in cls.__dict__.get("bindto", []) or []:
            _ip_drivers[vlnv] = cls

    def __init__(self, description: dict[str, Any]) -> None:
        self.description = description
        self.mmio = MMIO(description["phys_addr"], description["addr_range"])

    def read(self, offset: int = 0) -> int:
        return self.mmio.read(offset)

    def write(self, offset: int, value: int) -> None:
        self.mmio.write(offset, value)


class PynqBuffer(np.ndarray):
    """A numpy array in the emulated DDR; cache maintenance is a no-op (no caches here)."""

    physical_address: int | None = None
    _base_address: int | None = None

    def __array_finalize__(self, obj: Any) -> None:
        base = getattr(obj, "physical_address", None)
        if base is not None and isinstance(obj, np.ndarray):
            offset = self.__array_interface__["data"][0] - obj.__array_interface__["data"][0]
            self.physical_address = base + offset
            self._base_address = getattr(obj, "_base_address", None)

    def flush(self) -> None:
        pass

    def invalidate(self) -> None:
        pass

    def freebuffer(self) -> None:
        if self._base_address is not None and self.physical_address == self._base_address:
            BOARD.ddr.remove(self._base_address)
            self._base_address = None

    close = freebuffer

    def __enter__(self) -> "PynqBuffer":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.freebuffer()


def allocate(shape: Any, dtype: Any = "u4", target: Any = None, **kwargs: Any) -> PynqBuffer:
    """Zeroed, physically contiguous (in the emulation's address space) buffer."""
    raw = np.zeros(shape, dtype=dtype)
    addr = BOARD.ddr.add(raw)
    buf = raw.view(PynqBuffer)
    buf.physical_address = addr
    buf._base_address = addr
    return buf


class Overlay:
    """A bitstream and its .hwh; attribute access gives the IPs' drivers."""

    def __init__(self, bitfile_name: str, dtbo: Any = None, download: bool = True,
                 ignore_version: bool = False, device: Any = None, **kwargs: Any) -> None:
        path = Path(bitfile_name)
        if not path.is_file():
            raise IOError(f"Bitstream file {bitfile_name} does not exist")
        hwh = path.with_suffix(".hwh")
        if not hwh.is_file():
            raise ValueError(f"Cannot find metadata file {hwh} for bitstream {bitfile_name}")
        self.bitfile_name = str(path)
        self.ip_dict = parse_hwh(hwh)
        for desc in self.ip_dict.values():
            desc["driver"] = _ip_drivers.get(desc["type"], DefaultIP)
        self._instances: dict[str, Any] = {}
        if download:
            self.download()

    def download(self) -> None:
        BOARD.program(self.ip_dict, self.bitfile_name)
        self._instances = {}
        log.info("pynq emulation: programmed %s", self.bitfile_name)

    def is_loaded(self) -> bool:
        return BOARD.bitstream == self.bitfile_name

    def __getattr__(self, name: str) -> Any:
        ip_dict = self.__dict__.get("ip_dict", {})
        if name not in ip_dict:
            raise AttributeError(f"Overlay has no attribute {name!r}; IPs: {', '.join(ip_dict)}")
        if name not in self._instances:
            desc = ip_dict[name]
            self._instances[name] = desc["driver"](description=desc)
        return self._instances[name]

    def __dir__(self) -> list[str]:
        return sorted(set(super().__dir__()) | set(self.ip_dict))


# -- pynq.lib.dma --------------------------------------------------------------------------------

class _SDMAChannel:
    """A simple-mode AXI DMA channel through its registers (PG021)."""

    def __init__(self, mmio: MMIO, max_size: int, width: int, tx: bool, dre: bool = False) -> None:
        self._mmio = mmio
        self._max_size = max_size
        self._align = width
        self._dre = dre
        self._offset = 0x00 if tx else 0x30
        self._flush_before = tx
        self._active_buffer: Any = None
        self._first_transfer = True
        self.transferred = 0
        self.start()

    @property
    def running(self) -> bool:
        return self._mmio.read(self._offset + 4) & 0x1 == 0

    @property
    def idle(self) -> bool:
        return self._mmio.read(self._offset + 4) & 0x2 == 0x2

    @property
    def error(self) -> bool:
        return self._mmio.read(self._offset + 4) & 0x70 != 0

    def start(self) -> None:
        self._mmio.write(self._offset, 0x0001)
        while not self.running:
            pass
        self._first_transfer = True

    def stop(self) -> None:
        self._mmio.write(self._offset, 0x0000)
        while self.running:
            pass

    def transfer(self, array: PynqBuffer, start: int = 0, nbytes: int = 0) -> None:
        if not self.running:
            raise RuntimeError("DMA channel not started")
        if not self.idle and not self._first_transfer:
            raise RuntimeError("DMA channel not idle")
        if nbytes == 0:
            nbytes = array.nbytes - start
        if nbytes > self._max_size:
            raise ValueError(f"Transfer size is {nbytes} bytes, which exceeds the maximum DMA "
                             f"buffer size {self._max_size}.")
        addr = array.physical_address + start
        if not self._dre and addr % self._align:
            raise RuntimeError(f"DMA does not support unaligned transfers; Starting address must "
                               f"be aligned to {self._align} bytes.")
        if self._flush_before:
            array.flush()
        self.transferred = 0
        self._mmio.write(self._offset + 0x18, addr & 0xFFFFFFFF)
        self._mmio.write(self._offset + 0x1C, (addr >> 32) & 0xFFFFFFFF)
        self._mmio.write(self._offset + 0x28, nbytes)
        self._active_buffer = array
        self._first_transfer = False

    def wait(self) -> None:
        """Spins until idle, like PYNQ's: without a timeout (the DTPU transport never calls it
        before the channel is idle)."""
        if not self.running:
            raise RuntimeError("DMA channel not started")
        while True:
            status = self._mmio.read(self._offset + 4)
            if status & 0x10:
                raise RuntimeError("DMA Internal Error (transfer length 0?)")
            if status & 0x20:
                raise RuntimeError("DMA Slave Error (cannot access memory map interface)")
            if status & 0x40:
                raise RuntimeError("DMA Decode Error (invalid address)")
            if status & 0x2:
                break
        if not self._flush_before and self._active_buffer is not None:
            self._active_buffer.invalidate()
        self.transferred = self._mmio.read(self._offset + 0x28)


class DMA(DefaultIP):
    """AXI DMA 7.1, simple mode: ``sendchannel`` (MM2S) and ``recvchannel`` (S2MM)."""

    bindto = ["xilinx.com:ip:axi_dma:7.1"]

    def __init__(self, description: dict[str, Any], *args: Any, **kwargs: Any) -> None:
        super().__init__(description=description)
        params = description.get("parameters", {})
        if params.get("c_include_sg", "0") == "1":
            raise RuntimeError("emulated DMA: scatter-gather mode is not emulated")
        max_size = (1 << int(params.get("c_sg_length_width", 14))) - 1
        if params.get("c_include_mm2s", "1") == "1":
            width = int(params.get("c_m_axi_mm2s_data_width", 32)) // 8
            self.sendchannel = _SDMAChannel(self.mmio, max_size, width, tx=True)
        if params.get("c_include_s2mm", "1") == "1":
            width = int(params.get("c_m_axi_s2mm_data_width", 32)) // 8
            self.recvchannel = _SDMAChannel(self.mmio, max_size, width, tx=False)


__all__ = ["DMA", "DefaultIP", "MMIO", "Overlay", "PynqBuffer", "allocate"]
