"""The emulated PYNQ-Z2 as a ``pynq`` device: the real pynq package runs against it.

PYNQ reaches a board through one object, its active ``pynq.Device``: ``Overlay`` asks it for a
bitstream's metadata and to download it, ``MMIO`` asks it to map a physical address range,
``allocate`` asks its default memory for buffers, ``PynqBuffer.flush``/``invalidate`` ask it
for cache maintenance, and ``Clocks`` maps the PS's SLCR through it. On the board that device
is ``pynq.pl_server.embedded_device.EmbeddedDevice``; :class:`EmulatedDevice` is the same
abstraction over :mod:`dtpu.board.emulate.board`, so everything above it is the real package:

* ``pynq.Overlay`` (``Bitstream`` path resolution, driver registration from ``pynq.lib``, the
  ``.hwh`` parsed by ``pynqmetadata`` into ``ip_dict``/``clock_dict``, ``DefaultIP`` binding by
  VLNV: ``overlay.dtpu`` and ``overlay.xadc`` are :mod:`dtpu.board.ip`'s drivers,
  ``overlay.dma_act`` is ``pynq.lib.dma.DMA``), its download (``Clocks.set_pl_clk`` programs
  FCLK0 in the emulated SLCR, the ``.bit`` is converted by pynq's own ``bit2bin``),
  ``Device.post_download`` (timestamp, ``is_loaded``);
* ``pynq.MMIO`` on ``MEMORY_MAPPED`` devices (``write_mm``, 32-bit words), ``DefaultIP.read``
  and ``write``, ``RegisterMap``;
* ``pynq.allocate`` and ``pynq.buffer.PynqBuffer`` (``physical_address``, views, ``flush``,
  ``invalidate``, ``freebuffer``);
* ``pynq.lib.dma.DMA`` and its ``_SDMAChannel`` (``transfer``, ``wait``, ``idle``, ``error``,
  ``start``, ``stop``, ``transferred``) on the emulated PG021 registers.

What stays hand-written here, and why: the device's five primitives. On the board they are the
kernel and XRT (``/dev/mem`` mapped with root rights, the FPGA manager in sysfs, XRT buffer
objects in the CMA pool, cache flushes by ``bo.sync``); none exists off the board, so this class
provides them: :meth:`EmulatedDevice.mmap` returns a :class:`RegisterWindow` (an mmap-like
array of 32-bit words whose reads and writes are bus transactions on the emulated board),
:meth:`EmulatedDevice.download` programs the emulated PL from the overlay's metadata,
:class:`EmulatedMemory` hands out ``PynqBuffer`` objects over the emulated DDR, and
``flush``/``invalidate`` copy between a cacheable buffer's host view and the DDR the device
reads (a non-coherent cache: a missing invalidate gives wrong data here as it would on the
board, a missing flush raises where the device reads the bytes; an uncached buffer, pynq's
default, is the DDR itself). Interrupts: the block design connects none (build.tcl: the driver polls). In the
``interrupts=True`` variant of the emulated design (DTPU ``irq`` -> AXI interrupt controller ->
``IRQ_F2P``) ``pynq.Interrupt`` and pynq's ``_InterruptController`` are the real code (on the
emulated controller's registers); the PS end of the line is the Linux UIO driver on the board
(``pynq.uio.UioController`` reading ``/dev/uioN``, found through ``/proc/interrupts``), which
:class:`EmulatedUio` stands in for, registered where pynq keeps its UIO controllers by IRQ
number.

Not emulated: the metadata cache ``EmbeddedDevice.gen_cache`` writes into pynq's install
directory, partial reconfiguration, device-tree overlays, XRT kernels (``xclbin``).
"""
from __future__ import annotations

import logging
import threading
from pathlib import Path
from typing import Any

import numpy as np

import pynq
from pynq.buffer import PynqBuffer
from pynq.pl_server.device import Device
from pynq.ps import ZYNQ_ARCH

from dtpu.board.emulate.board import BOARD, Board

log = logging.getLogger(__name__)

_U32 = np.dtype("<u4")


class RegisterWindow:
    """32-bit words of the physical address space from `base`, as ``mmap`` gives them to PYNQ.

    ``pynq.MMIO`` indexes it (``array[offset >> 2]``), ``RegisterMap`` slices it and views it
    as ``u4``; every element read or write is one bus transaction on the emulated board (a
    register access, traced). Only 32-bit views exist: the AXI4-Lite slaves here are 32 bits.
    """

    dtype = _U32

    def __init__(self, board: Board, base: int, words: int) -> None:
        self.board, self.base, self.words = board, int(base), int(words)

    @property
    def shape(self) -> tuple[int]:
        return (self.words,)

    def __len__(self) -> int:
        return self.words

    def _addr(self, index: int) -> int:
        i = int(index)
        if i < 0:
            i += self.words
        if not 0 <= i < self.words:
            raise IndexError(f"word {index} outside the {self.words}-word window at {self.base:#x}")
        return self.base + 4 * i

    def __getitem__(self, index: Any) -> Any:
        if isinstance(index, slice):
            start, stop, step = index.indices(self.words)
            if step != 1:
                raise IndexError("register windows are sliced contiguously")
            return RegisterWindow(self.board, self.base + 4 * start, max(0, stop - start))
        return np.uint32(self.board.read(self._addr(index)))

    def __setitem__(self, index: Any, value: Any) -> None:
        if isinstance(index, slice):
            start, stop, step = index.indices(self.words)
            values = np.broadcast_to(np.asarray(value, dtype=np.uint64), (len(range(start, stop, step)),))
            for i, v in zip(range(start, stop, step), values):
                self.board.write(self._addr(i), int(v) & 0xFFFFFFFF)
            return
        self.board.write(self._addr(index), int(value) & 0xFFFFFFFF)

    def view(self, dtype: Any = None) -> "RegisterWindow":
        if dtype is not None and np.dtype(dtype) != _U32:
            raise TypeError(f"the emulated AXI4-Lite slaves are 32 bits wide: no {np.dtype(dtype)} "
                            f"view of the registers at {self.base:#x}")
        return self


class EmulatedMemory:
    """The PS DDR as ``pynq.allocate`` sees it: physically contiguous buffers.

    ``cacheable=False``, pynq's default (XRT's ``cacheable=0`` on the board: the CPU maps the
    buffer uncached, every access goes to DDR): the host's view is the emulated DDR region
    itself, coherent with the device, and pynq skips flush and invalidate. ``cacheable=True``:
    the host's view is its own array, the CPU's cache: ``flush`` copies host to DDR,
    ``invalidate`` DDR to host, and the emulated DDR checks that the device reads no byte the
    host changed and did not flush (:class:`dtpu.board.emulate.board.Ddr`).
    """

    def __init__(self, device: "EmulatedDevice") -> None:
        self.device = device

    def allocate(self, shape: Any, dtype: Any, cacheable: bool = False, **kwargs: Any) -> PynqBuffer:
        """A zeroed buffer, cached or not as asked (module docstring of this class)."""
        dtype = np.dtype(dtype)
        nbytes = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
        board = self.device.board
        addr = board.ddr.alloc(nbytes)
        if cacheable:
            host = np.zeros(max(nbytes, 1), dtype=np.uint8)
            board.ddr.attach_cache(addr, host)
        else:
            host = board.ddr.region(addr)[:max(nbytes, 1)]
        buf = PynqBuffer(shape, dtype, buffer=host.data, device=self.device, device_address=addr,
                         bo=addr, coherent=not cacheable)
        # PynqBuffer.freebuffer gives a buffer with a `pointer` back to `return_to` (the path of
        # XRT's buffer cache); `freed` keeps it from munmap-ing memory it did not map
        buf.memory = self
        buf.pointer = addr
        buf.return_to = self
        buf.freed = True
        self.device._host[addr] = host
        return buf

    def return_pointer(self, pointer: int) -> None:
        """``PynqBuffer.freebuffer`` (or its ``__del__``) gives the buffer back."""
        self.device._host.pop(pointer, None)
        self.device.board.ddr.remove(pointer)


class EmulatedUio:
    """Stand-in for ``pynq.uio.UioController`` on one PS interrupt line (a kernel driver on the
    board): ``add_event(event, number)`` as pynq's, the events set (on their asyncio loop) once
    the emulated board's IRQ_F2P line is high; one firing per arming, as UIO re-enables the
    line only when the next waiter writes to the device."""

    def __init__(self, board: Board, raw_irq: int) -> None:
        self.board, self.raw_irq = board, raw_irq
        self.wait_events: list[tuple[Any, Any]] = []
        self._armed = False

    def add_event(self, event: Any, number: int) -> None:
        import asyncio

        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            loop = asyncio.get_event_loop()
        self.wait_events.append((event, loop))
        if not self._armed:
            self._armed = True
            self.board.irq_listeners.append(self._line_high)
        if self.board.irq_f2p():
            self._line_high()

    def _line_high(self) -> None:
        if not self._armed:
            return
        self._armed = False
        if self._line_high in self.board.irq_listeners:
            self.board.irq_listeners.remove(self._line_high)
        events, self.wait_events = self.wait_events, []
        for event, loop in events:
            if loop.is_closed():   # its waiter is gone with its loop
                event.set()
            else:
                loop.call_soon_threadsafe(event.set)


class EmulatedDevice(Device):
    """The emulated PYNQ-Z2 (Zynq-7000, ``armv7l``), made the active pynq device by
    :func:`activate`."""

    _probe_priority_ = 900   # a number no pynq device class uses

    @classmethod
    def _probe_(cls) -> list["EmulatedDevice"]:
        return [device()]

    def __init__(self, board: Board = BOARD) -> None:
        super().__init__("dtpu_emulated_pynqz2")
        self.name = "PYNQ-Z2 (emulated by dtpu.board.emulate)"
        #: the name its owner lock carries (dtpu.board.owner; the board's is its FPGA manager's)
        self.lock_name = "pynqz2-emulated"
        self.arch = ZYNQ_ARCH
        self.board = board
        self.capabilities = {"MEMORY_MAPPED": True, "REGISTER_RW": False, "CALLABLE": False}
        self.bitfile_name: str | None = None
        self.timestamp = ""
        self.ip_dict: dict[str, Any] = {}
        self.mem_dict: dict[str, Any] = {}
        self.gpio_dict: dict[str, Any] = {}
        self.interrupt_controllers: dict[str, Any] = {}
        self.interrupt_pins: dict[str, Any] = {}
        self.hierarchy_dict: dict[str, Any] = {}
        self.default_memory = EmulatedMemory(self)
        self._host: dict[int, np.ndarray] = {}
        #: how the delegate's C invoke path keeps cacheable buffers coherent here: "mirror" (C
        #: copies between the host view and the DDR itself) or "xcl" (C calls xclSyncBO on
        #: (handle, bo), as under the PYNQ v3.0 image's pynq: here :meth:`xcl_sync_function`)
        self.sync_abi = "mirror"
        self.handle = 0x5D7D          # XRT's device handle stands here (any non-null value)
        self._xcl_sync = None

    # -- the primitives the kernel and XRT provide on the board ----------------------------

    def mmap(self, base_addr: int, length: int) -> RegisterWindow:
        return RegisterWindow(self.board, base_addr, int(length) >> 2)

    def flush(self, bo: int, offset: int, ptr: int, size: int) -> None:
        if bo not in self._host:
            raise RuntimeError(f"flush of a freed buffer (physical address {bo:#x})")
        self.board.ddr.flush(bo + offset, size)
        self.board.cache_op("flush", bo + offset, size)

    def invalidate(self, bo: int, offset: int, ptr: int, size: int) -> None:
        if bo not in self._host:
            raise RuntimeError(f"invalidate of a freed buffer (physical address {bo:#x})")
        self.board.ddr.invalidate(bo + offset, size)
        self.board.cache_op("invalidate", bo + offset, size)

    def xcl_sync_function(self) -> int:
        """The address of a C function with xclSyncBO's signature (handle, bo, direction, size,
        offset) -> 0, or 0xFFFFFFEA (-EINVAL) on failure, that runs :meth:`flush` (direction 0)
        or :meth:`invalidate` (1): the emulated board's XRT for C code that calls XRT as pynq
        3.0 does. Made once and kept alive by the device."""
        import ctypes

        if self._xcl_sync is None:
            kind = ctypes.CFUNCTYPE(ctypes.c_uint, ctypes.c_void_p, ctypes.c_uint, ctypes.c_int,
                                    ctypes.c_size_t, ctypes.c_size_t)

            def sync(handle, bo, direction, size, offset):
                try:
                    if (handle or 0) != self.handle or direction not in (0, 1):
                        raise ValueError(f"xclSyncBO(handle {handle}, direction {direction}): "
                                         f"accepted: handle {self.handle}, direction 0 or 1")
                    (self.invalidate if direction else self.flush)(bo, offset, 0, size)
                    return 0
                except Exception:
                    log.exception("emulated xclSyncBO(bo %#x, direction %d, %d bytes at %d)",
                                  bo, direction, size, offset)
                    return 0xFFFFFFEA

            self._xcl_sync = kind(sync)
        return ctypes.cast(self._xcl_sync, ctypes.c_void_p).value

    def get_bitfile_metadata(self, bitfile_name: str, partial: bool = False):
        """The overlay's metadata as pynq's embedded device reads it: the .hwh beside the
        bitstream through ``pynqmetadata`` (without the cache and the synthetic xclbin XRT needs)."""
        if partial:
            raise RuntimeError("the emulated board has no partial reconfiguration")
        from pynqmetadata.frontends import Metadata
        from pynqmetadata.views.runtime import RuntimeMetadataParser

        hwh = Path(bitfile_name).with_suffix(".hwh")
        if not hwh.is_file():
            raise RuntimeError(f"Unable to find metadata for bitstream {bitfile_name} "
                               f"(no {hwh.name} beside it)")
        parser = RuntimeMetadataParser(Metadata(input=hwh))
        parser.bin_data = None
        parser.xclbin_data = None
        parser.dtbo_data = None
        return parser

    def download(self, bitstream: Any, parser: Any = None) -> None:
        """Program the emulated PL: the .bit through pynq's own ``bit2bin`` (as the FPGA
        manager gets it), the devices from the overlay's ``ip_dict``."""
        from pynq.pl_server.embedded_device import bit2bin

        if bitstream.partial:
            raise RuntimeError("the emulated board has no partial reconfiguration")
        if parser is None:
            raise RuntimeError("the emulated board is programmed from an overlay's .hwh: "
                               "download through pynq.Overlay")
        data = bit2bin(Path(bitstream.bitfile_name).read_bytes())
        self.board.program(parser.ip_dict, bitstream.bitfile_name, data)
        self.board.irq_listeners.clear()
        for ctrl in parser.interrupt_controllers.values():
            if ctrl.get("parent") == "":
                from pynq.interrupt import _InterruptController

                _InterruptController._uio_devices[ctrl["raw_irq"]] = EmulatedUio(self.board,
                                                                                ctrl["raw_irq"])
        self.post_download(bitstream, parser, self.name)
        log.info("emulated PYNQ-Z2: programmed %s", bitstream.bitfile_name)

    def gen_cache(self, bitstream: Any, parser: Any = None) -> None:
        """Nothing to cache: EmbeddedDevice writes pynq's metadata cache for other processes
        on the board; the emulated board lives in this process."""


_device: list[EmulatedDevice] = []
_lock = threading.Lock()


def device() -> EmulatedDevice:
    """The one emulated device (over :data:`~dtpu.board.emulate.board.BOARD`)."""
    with _lock:
        if not _device:
            _device.append(EmulatedDevice())
        return _device[0]


def activate() -> EmulatedDevice:
    """Make the emulated board pynq's active device (``Overlay``, ``MMIO``, ``allocate`` use it
    when given no device)."""
    dev = device()
    if not active():
        Device.active_device = dev
        log.info("pynq %s: the active device is the emulated PYNQ-Z2", pynq.__version__)
    if pynq.Clocks.device is not dev:
        pynq.Clocks.set_device(dev)
        if "_real_instance" in pynq.Clocks.__dict__:  # built for another device's SLCR
            del pynq.Clocks._real_instance
    return dev


def _has_active() -> bool:
    return "_active_device" in Device.__dict__


def active() -> bool:
    return _has_active() and bool(_device) and Device.__dict__["_active_device"] is _device[0]


def deactivate() -> None:
    """Forget the emulated device as pynq's active device (the board keeps its state)."""
    if active():
        del Device._active_device
    if getattr(pynq.Clocks, "device", None) is (_device[0] if _device else None):
        pynq.Clocks.device = None
        if "_real_instance" in pynq.Clocks.__dict__:
            del pynq.Clocks._real_instance


__all__ = ["EmulatedDevice", "EmulatedMemory", "EmulatedUio", "RegisterWindow", "activate", "active",
           "deactivate", "device"]
