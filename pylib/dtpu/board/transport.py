"""The DTPU on a PYNQ-Z2 as a driver transport: MMIO registers, AXI DMAs, bounded waits.

Registers go through the DTPU's ``DefaultIP`` (``overlay.dtpu``, MMIO on M_AXI_GP0). Streams go
through the simple-mode AXI DMAs of the block design (:data:`dtpu.board.design.STREAM_DMA`):
one transfer per job and stream, from ``pynq.allocate`` buffers, tlast at the transfer's end.

PYNQ's ``channel.wait()`` spins until the channel is idle, forever if the core never takes or
produces the words; every wait here instead polls ``idle``/``error`` against a deadline and
raises :class:`~dtpu.driver.DtpuTimeout`. The receive channel is armed before START
(:meth:`expect`), with a few spare words so that a too-long result packet is seen as such
instead of as a DMA error, and only then are the inputs sent.
"""
from __future__ import annotations

import logging
import time
import weakref
from typing import Any, Callable

import numpy as np

from dtpu.board.design import (DMA_LENGTH_WIDTH, DTPU_VLNV, STREAM_DMA, vec_rq_lanes_of,
                               vector_unit_of)
from dtpu.driver.registers import Dmasr
from dtpu.driver.transport import DtpuHardwareError, DtpuTimeout, Transport
from dtpu.hw.config import HwConfig

log = logging.getLogger(__name__)

_U64 = np.dtype("<u8")

# AXI DMA (PG021) simple-mode registers, relative to a channel's base (MM2S 0x00, S2MM 0x30)
DMACR, DMASR, ADDR, LENGTH = 0x00, 0x04, 0x18, 0x28
CHANNEL_BASE = {"sendchannel": 0x00, "recvchannel": 0x30}
DMACR_RS, DMACR_RESET = 0x1, 0x4
DMASR_FLAGS = {4: "internal error", 5: "slave error", 6: "decode error", 12: "ioc irq",
               14: "err irq"}
DMASR_ERRORS = 0x70

#: spare words armed on the receive channel beyond the expected result length
RECV_SLACK = 8


def _dmasr_text(value: int) -> str:
    status = Dmasr(value)
    state = "halted" if status.halted else ("idle" if status.idle else "busy")
    flags = [name for bit, name in DMASR_FLAGS.items() if value >> bit & 1]
    return f"DMASR={value:#x} ({', '.join([state] + flags)})"


def _poll(cond: Callable[[], bool], timeout_s: float) -> bool:
    """True once `cond()` holds, False at the deadline; sleeps only after the first spins (a
    register read costs about a microsecond on the board, a job often a few)."""
    deadline = time.monotonic() + timeout_s
    spins = 0
    while True:
        if cond():
            return True
        if time.monotonic() >= deadline:
            return bool(cond())
        spins += 1
        if spins > 200:
            time.sleep(min(1e-3, 1e-5 * (spins - 200)))


class PynqDdrBuffer:
    """A ``pynq.allocate`` buffer as :mod:`dtpu.driver.lists` uses it: the physical address for
    the descriptors, the host's uint8 view, cache maintenance of byte ranges (slices of a
    PynqBuffer flush and invalidate only their own bytes)."""

    def __init__(self, buf: Any) -> None:
        self.buf = buf
        self.addr = int(buf.physical_address)
        self.array = np.asarray(buf).view(np.uint8)

    def flush(self, offset: int = 0, nbytes: int | None = None) -> None:
        end = self.array.size if nbytes is None else offset + nbytes
        self.buf[offset:end].flush()

    def invalidate(self, offset: int = 0, nbytes: int | None = None) -> None:
        end = self.array.size if nbytes is None else offset + nbytes
        self.buf[offset:end].invalidate()

    def free(self) -> None:
        self.buf.freebuffer()


def xcl_sync(buf: Any) -> dict | None:
    """XRT's ``xclSyncBO`` for PynqBuffer `buf`, as pynq up to 3.0 calls it in its device's
    ``flush`` / ``invalidate`` (``xclSyncBO(device.handle, buf.bo, direction, size, offset)``,
    through ``pynq._3rdparty.xrt``'s ctypes binding of libxrt_core.so), so that C can call the
    same function for exactly the bytes it moves: {"kind": "xcl", "fn": its address, "handle",
    "bo", "offset": the buffer's offset in its buffer object}. None where pynq has no such
    function: pynq 3.1 and later hold buffer objects as ``pyxrt.bo`` (whose ``sync`` covers the
    whole object), a build without XRT. A device may offer its own function
    (``xcl_sync_function()``: the emulated board's)."""
    import ctypes

    device = getattr(buf, "device", None)
    bo, handle = getattr(buf, "bo", None), getattr(device, "handle", None)
    if isinstance(bo, bool) or not isinstance(bo, (int, np.integer)) or handle is None:
        return None
    own = getattr(device, "xcl_sync_function", None)
    if own is not None:
        fn = own()
    else:
        try:
            from pynq._3rdparty import xrt
            fn = ctypes.cast(xrt.libc.xclSyncBO, ctypes.c_void_p).value
        except (ImportError, AttributeError) as exc:
            log.debug("no xclSyncBO in this pynq (%s): C calls back for cache maintenance", exc)
            return None
    value = handle.value if isinstance(handle, ctypes.c_void_p) else handle
    if not fn or not isinstance(value, (int, np.integer)):
        return None
    return {"kind": "xcl", "fn": int(fn), "handle": int(value), "bo": int(bo),
            "offset": int(getattr(buf, "offset", 0) or 0)}


class PynqTransport(Transport):
    """The board's DTPU behind its overlay (a ``pynq.Overlay`` of the hw/overlays design)."""

    command_lists = True

    def __init__(self, overlay: Any, cfg: HwConfig | None = None, *, allocate: Callable | None = None,
                 timeout_s: float = 5.0, lease: Any = None) -> None:
        self.overlay = overlay
        #: the board's owner lock (dtpu.board.owner.BoardLease) this transport holds while open:
        #: released by close, or when the transport is collected unclosed
        self.lease = lease
        if lease is not None:
            weakref.finalize(self, lease.release)
        self.timeout_s = float(timeout_s)
        # on the emulated board the register and DMA calls run the emulation (device time); on
        # the board they are the host's own cost (dtpu.driver.hostops)
        from dtpu.board import emulate
        self.simulated = emulate.installed()
        ip_dict = overlay.ip_dict
        names = [n for n, d in ip_dict.items() if d.get("type") == DTPU_VLNV]
        if len(names) != 1:
            listing = ", ".join(f"{n} ({d.get('type')})" for n, d in ip_dict.items())
            raise DtpuHardwareError(f"overlay has {len(names)} IPs with VLNV {DTPU_VLNV}, expected "
                                    f"one; its IPs: {listing}")
        self.ip = getattr(overlay, names[0])
        self.cfg = cfg if cfg is not None else self.ip.config()
        if allocate is None:
            from dtpu.board import import_pynq

            allocate = import_pynq().allocate
        self._allocate = allocate
        self._dma: dict[str, Any] = {}
        self._channel: dict[str, Any] = {}
        self._max_bytes: dict[str, int] = {}
        #: the 1.2 design's stream DMAs are there (the 2.0 design has none: the DTPU masters
        #: HP0 itself and runs command lists only, hw/overlays/README.md)
        self.streams = any(dma_name in ip_dict for dma_name, _ in STREAM_DMA.values())
        for stream, (dma_name, attr) in STREAM_DMA.items():
            if not self.streams:
                break
            if dma_name not in ip_dict:
                raise DtpuHardwareError(f"overlay has no DMA {dma_name!r} for stream {stream!r}; "
                                        f"its IPs: {', '.join(ip_dict)}")
            dma = getattr(overlay, dma_name)
            self._dma[stream] = dma
            self._channel[stream] = getattr(dma, attr)
            params = ip_dict[dma_name].get("parameters", {})
            width = int(params.get("c_sg_length_width", DMA_LENGTH_WIDTH))
            self._max_bytes[stream] = (1 << width) - 1
        self._buf: dict[str, Any] = {}
        self._busy: dict[str, bool] = {s: False for s in STREAM_DMA}
        if not self.streams:
            # the 2.0 design has no DMAs: only a core that runs command lists can work in it, and
            # the driver picks its path from VERSION; a 1.2 answer means a bitstream from before
            # the 2.0 top set VERSION (hw/rtl/dtpu_regfile.v CONTRACT2)
            version = int(self.ip.read(self.cfg.REG_VERSION))
            if version != self.cfg.VERSION2:
                raise DtpuHardwareError(
                    f"the overlay has no stream DMAs (the contract-2.0 design) but its DTPU reports "
                    f"VERSION 0x{version:08x}; accepted there: 0x{self.cfg.VERSION2:08x} (contract "
                    f"2.0); rebuild the bitstream with `make -C hw/overlays`")
            # contract 2.1's vector unit, as the bitstream's .hwh declares it (the IP's VEC_EN,
            # hw/overlays OVERLAY=int8, the default): the same declaration, and the same Verilog unit, as
            # backend=rtl's in-process top (dtpu.rtl.native.open_native_lists)
            params = ip_dict[names[0]].get("parameters", {})
            if vector_unit_of(params):
                from dtpu.hw.vec_lower import VERILOG_VEC_UNIT

                self.vector_unit, self.vector_build = True, VERILOG_VEC_UNIT
                # its requantizing lanes (VEC_RQ_LANES, .hwh only: no register holds them),
                # so this build's golden model (estimates, the emulation) runs its cycles
                lanes = vec_rq_lanes_of(params)
                if cfg is None and lanes != self.cfg.VEC_RQ_LANES:
                    self.cfg = HwConfig(self.cfg.contract, VEC_RQ_LANES=lanes)

    # -- registers ------------------------------------------------------------------------------

    def write_reg(self, offset: int, value: int) -> None:
        self.ip.write(offset, int(value) & 0xFFFFFFFF)

    def read_reg(self, offset: int) -> int:
        return int(self.ip.read(offset))

    # -- contract 2.0: DDR buffers the core's memory port reaches ---------------------------------

    def alloc_buffer(self, nbytes: int) -> "PynqDdrBuffer":
        """A cacheable buffer: the host's copies in and out run at memcpy rate, where pynq's
        default (uncached) buffer would be read at ~70 MB/s on the Zynq; the driver flushes
        and invalidates exactly the bytes it moves (dtpu.driver.lists)."""
        shape = (max(int(nbytes), 1),)
        try:
            buf = self._allocate(shape=shape, dtype=np.uint8, cacheable=True)
        except TypeError as exc:      # a pynq whose allocate takes no cacheable: its default
            log.warning("pynq.allocate does not take cacheable=True (%s): the command-list "
                        "buffer is uncached, its copies in and out run at uncached speed", exc)
            buf = self._allocate(shape=shape, dtype=np.uint8)
        return PynqDdrBuffer(buf)

    def c_register_io(self) -> dict | None:
        """For the delegate's C invoke path: on the board, the DTPU's register window as pynq
        mapped it (``MMIO.array``, the /dev/mem mapping of M_AXI_GP0); on the emulated board
        None (its registers run the emulation: C calls :meth:`read_reg` / :meth:`write_reg`)."""
        from dtpu.board import emulate
        if emulate.installed():
            return None
        array = getattr(getattr(self.ip, "mmio", None), "array", None)
        if array is None or array.dtype.itemsize != 4 or not array.flags.c_contiguous:
            return None
        return {"kind": "mmio", "base": int(array.ctypes.data), "size": int(array.nbytes)}

    def c_buffer_sync(self, buf) -> dict | None:
        """For the delegate's C invoke path, how C keeps a cacheable buffer coherent: XRT's
        xclSyncBO called from C where pynq itself calls it (:func:`xcl_sync`: the PYNQ v3.0
        image; on the emulated board when its device is set to that ABI, ``sync_abi="xcl"``);
        on the emulated board otherwise its DDR's mirror of the buffer (host view, DDR region,
        synced record: C flushes and invalidates as the emulated pynq does, and the stale-cache
        model checks what it did); else None (C calls back into the buffer's pynq flush /
        invalidate: pynq 3.1 and later keep XRT's buffer objects inside pyxrt)."""
        from dtpu.board import emulate
        if not isinstance(buf, PynqDdrBuffer) or buf.buf.coherent:
            return None
        if not emulate.installed() or getattr(buf.buf.device, "sync_abi", None) == "xcl":
            return xcl_sync(buf.buf)
        host, device, synced = emulate.current_board().ddr.mirror(buf.addr)
        if host.ctypes.data != buf.array.ctypes.data:
            return None     # not the view C copies into: keep pynq's own maintenance
        size = min(host.size, device.size, synced.size)
        return {"kind": "mirror", "host": int(host.ctypes.data), "device": int(device.ctypes.data),
                "synced": int(synced.ctypes.data), "size": int(size)}

    def list_trace(self):
        """The emulated core's record of its last list (the golden model's per-node split of
        CL_CYCLES); None on a board, whose registers hold only the totals."""
        from dtpu.board import emulate
        if not emulate.installed():
            return None
        dev = emulate.current_board().dtpu
        return dev.core.list_trace()

    # -- buffers and channels ---------------------------------------------------------------------

    @property
    def dma_channels(self) -> dict[str, Any]:
        """Each stream's pynq DMA channel (wgt and act send, res receives): pynq's own objects,
        so a caller can see which class moves the data and how much it moved ({} without
        stream DMAs)."""
        return dict(self._channel)

    @property
    def stream_buffers(self) -> dict[str, Any]:
        """Each stream's pynq buffer, from its first transfer on (allocated by pynq's
        ``allocate``, regrown when a transfer needs more)."""
        return dict(self._buf)

    def _no_streams(self) -> None:
        raise DtpuHardwareError("this overlay has no stream DMAs (the contract-2.0 design: the DTPU "
                                "moves its own data); job-by-job transfers are not possible, "
                                "run command lists (path=auto or path=lists)")

    def _buffer(self, stream: str, words: int):
        buf = self._buf.get(stream)
        if buf is None or buf.shape[0] < words:
            if buf is not None:
                buf.freebuffer()
            cap = 1 << max(10, (words - 1).bit_length())
            buf = self._allocate(shape=(cap,), dtype=np.uint64)
            self._buf[stream] = buf
        return buf

    def _dmasr(self, stream: str) -> int:
        _, attr = STREAM_DMA[stream]
        return int(self._dma[stream].read(CHANNEL_BASE[attr] + DMASR))

    def _settle(self, stream: str, timeout_s: float) -> bool:
        """Wait for the stream's outstanding transfer; raise on a DMA error."""
        if not self._busy[stream]:
            return True
        ch = self._channel[stream]
        if not _poll(lambda: ch.idle or ch.error, timeout_s):
            return False
        if ch.error:
            raise DtpuHardwareError(f"{stream} DMA channel error: {_dmasr_text(self._dmasr(stream))}")
        self._busy[stream] = False
        return True

    def _check_size(self, stream: str, nbytes: int) -> None:
        if nbytes > self._max_bytes[stream]:
            raise DtpuHardwareError(
                f"{stream}: a transfer of {nbytes} bytes exceeds the DMA's buffer length register "
                f"({self._max_bytes[stream]} bytes); rebuild the overlay with c_sg_length_width="
                f"{DMA_LENGTH_WIDTH} (hw/overlays) or lower the node in smaller jobs")

    # -- streams --------------------------------------------------------------------------------

    def expect(self, stream: str, n: int) -> None:
        if not self.streams:
            self._no_streams()
        if not self._settle(stream, self.timeout_s):
            raise DtpuTimeout(f"{stream} channel still busy with an earlier transfer after "
                              f"{self.timeout_s:g} s")
        cap = n + RECV_SLACK
        self._check_size(stream, cap * 8)
        buf = self._buffer(stream, cap)
        self._channel[stream].transfer(buf, nbytes=cap * 8)
        self._busy[stream] = True

    def send(self, stream: str, words: np.ndarray) -> None:
        words = np.asarray(words)
        if not self.streams:
            self._no_streams()
        if words.dtype != _U64:
            words = words.astype(_U64)
        n = int(words.size)
        if not n:
            return
        if not self._settle(stream, self.timeout_s):
            raise DtpuTimeout(f"{stream} channel still busy with an earlier transfer after "
                              f"{self.timeout_s:g} s")
        self._check_size(stream, n * 8)
        buf = self._buffer(stream, n)
        buf[:n] = words.reshape(-1)
        self._channel[stream].transfer(buf, nbytes=n * 8)
        self._busy[stream] = True

    def recv(self, stream: str, n: int) -> np.ndarray:
        if not self.streams:
            self._no_streams()
        if not self._busy[stream]:
            self.expect(stream, n)
        ch = self._channel[stream]
        if not _poll(lambda: ch.idle or ch.error, self.timeout_s):
            raise DtpuTimeout(f"{stream} channel did not complete within {self.timeout_s:g} s "
                              f"({_dmasr_text(self._dmasr(stream))})")
        if ch.error:
            self._busy[stream] = False
            raise DtpuHardwareError(f"{stream} DMA channel error ({_dmasr_text(self._dmasr(stream))}); "
                                    f"a result packet longer than {n + RECV_SLACK} words ends so")
        ch.wait()  # idle already: returns at once, invalidates the cache, sets `transferred`
        self._busy[stream] = False
        nbytes = getattr(ch, "transferred", None)
        if nbytes is None:
            nbytes = int(self._dma[stream].read(CHANNEL_BASE[STREAM_DMA[stream][1]] + LENGTH))
        return np.array(self._buf[stream][:int(nbytes) // 8], dtype=_U64)

    def wait_done(self, timeout_s: float) -> bool:
        status, done = self.cfg.REG_STATUS, self.cfg.reg("STATUS").field("DONE").mask
        return _poll(lambda: self.ip.read(status) & done, timeout_s)

    def pending_input(self, timeout_s: float = 0.0) -> dict[str, int]:
        left = {}
        for stream, (_, attr) in STREAM_DMA.items():
            if attr == "sendchannel" and self._busy[stream] and not self._settle(stream, timeout_s):
                left[stream] = -1
        return left

    # -- recovery and diagnostics ---------------------------------------------------------------

    def reset(self) -> None:
        """Reset every DMA (stops transfers, drops their state), then CTRL.SOFT_RESET the core."""
        seen = []
        for stream, dma in self._dma.items():
            if any(dma is d for d in seen):
                continue
            seen.append(dma)
            dma.write(DMACR, DMACR_RESET)  # either channel's reset bit resets the whole engine
            if not _poll(lambda: not dma.read(DMACR) & DMACR_RESET, self.timeout_s):
                raise DtpuTimeout(f"DMA of stream {stream} did not come out of reset within "
                                  f"{self.timeout_s:g} s")
        for stream, ch in self._channel.items():
            _, attr = STREAM_DMA[stream]
            base = CHANNEL_BASE[attr]
            dma = self._dma[stream]
            dma.write(base + DMACR, DMACR_RS)
            if not _poll(lambda: not Dmasr(dma.read(base + DMASR)).halted, self.timeout_s):
                raise DtpuTimeout(f"{stream} DMA channel did not restart within {self.timeout_s:g} s")
            ch.start()  # running already: only resets pynq's view of the channel
            self._busy[stream] = False
        super().reset()

    def describe(self) -> str:
        parts = []
        for stream, (dma_name, attr) in STREAM_DMA.items():
            try:
                parts.append(f"{stream} ({dma_name}.{attr}): {_dmasr_text(self._dmasr(stream))}"
                             f"{' transfer outstanding' if self._busy[stream] else ''}")
            except Exception as exc:
                parts.append(f"{stream}: <unreadable: {exc!r}>")
        return "DMA " + "; ".join(parts)

    def close(self) -> None:
        try:
            for buf in self._buf.values():
                try:
                    buf.freebuffer()
                except Exception as exc:  # freeing must not mask the close of the rest
                    log.debug("freebuffer failed: %r", exc)
            self._buf = {}
        finally:
            if self.lease is not None:
                self.lease.release()


__all__ = ["PynqTransport", "RECV_SLACK"]
