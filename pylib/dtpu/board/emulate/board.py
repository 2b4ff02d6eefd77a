"""The emulated PYNQ-Z2: a physical address space with DDR regions, the PS's clock registers and
the overlay's devices.

Devices answer 32-bit reads and writes at their base address, exactly where the block design
puts them; pynq reaches them through :class:`dtpu.board.emulate.device.EmulatedDevice`
(``MMIO`` maps a :class:`~dtpu.board.emulate.device.RegisterWindow`). The AXI DMAs are emulated
at their register level (PG021 simple mode: DMACR, DMASR, address, LENGTH per channel), so
``pynq.lib.dma.DMA`` writes the same registers it writes on the board. A DMA moves words
between DDR (the regions ``pynq.allocate`` got, as the device side of the buffers: what the
host wrote reaches them on ``flush``) and the DTPU's streams; the DTPU device is the golden
model behind :class:`~dtpu.driver.ModelTransport` (the RTL simulation can stand behind the same
five-method interface later). The SLCR's PLL and FPGA clock registers answer pynq's ``Clocks``.
Every access and every DMA start/finish is appended to :attr:`Board.trace`.

Timing is not emulated: a DMA moves a whole transfer when its LENGTH is written, and the model
runs a job as soon as its words are there. What is emulated is the order and the handshakes: an
MM2S channel goes idle only once the core has taken its words, an S2MM channel only once a
result packet arrived, and the DTPU reports DONE only once its results left the result port.
"""
from __future__ import annotations

import bisect
import logging
import threading
from dataclasses import dataclass
from typing import Any

import numpy as np

from dtpu.board import design, xadc
from dtpu.driver.model_transport import ModelTransport
from dtpu.hw.config import HwConfig, get_config
from dtpu.hw.core import Core

log = logging.getLogger(__name__)

_U64 = np.dtype("<u8")
DDR_BASE = 0x1600_0000   # where the PYNQ-Z2 image's CMA region starts, roughly


@dataclass(frozen=True)
class Access:
    """One trace entry: a register access, or a DMA event (op 'dma')."""

    device: str
    op: str          # 'r', 'w' or 'dma'; device 'cache': 'flush' or 'invalidate' (offset: address)
    offset: int
    value: int
    note: str = ""


class StaleCacheError(RuntimeError):
    """The emulated device read bytes of a cacheable buffer that the host changed and did not
    flush: on the board it would have read what DDR held before (the host's bytes still in its
    cache). Raised so that a missing or short flush fails where it happens."""


class Ddr:
    """The PS DDR the DMAs see: physically contiguous regions by address (what
    ``pynq.allocate`` hands out), each its own bytes.

    A cacheable buffer (``allocate(cacheable=True)``) also has the host's view, its cache: the
    device copies between the two on ``flush``/``invalidate`` only, and keeps `synced`, the
    host's bytes as of their last flush or invalidate. A device read of bytes whose host copy
    differs from `synced` (the host wrote them and did not flush) raises
    :class:`StaleCacheError`; a host read of bytes the device wrote and the host did not
    invalidate gets what the host's copy held before (the previous invoke's outputs, say):
    wrong data, as on the board. An uncached buffer (pynq's default) has no host copy: its host
    view is the region itself."""

    def __init__(self) -> None:
        self._starts: list[int] = []
        self._bufs: dict[int, np.ndarray] = {}
        self._next = DDR_BASE
        #: cacheable regions: start -> (host view, its bytes at the last flush/invalidate)
        self._cached: dict[int, tuple[np.ndarray, np.ndarray]] = {}

    def alloc(self, nbytes: int) -> int:
        """A zeroed region of `nbytes` (page-aligned, as CMA allocations are); its address:
        the first gap that fits, so that freed buffers' addresses come back (CMA's allocator
        does the same; a bump pointer would run out in a process that re-prepares often)."""
        size = -(-max(int(nbytes), 1) // 4096) * 4096
        addr = DDR_BASE
        for start in self._starts:
            if start - addr >= size:
                break
            addr = max(addr, start + self._bufs[start].size)
        self._next = max(self._next, addr + size)
        bisect.insort(self._starts, addr)
        self._bufs[addr] = np.zeros(size, dtype=np.uint8)
        return addr

    def remove(self, addr: int) -> None:
        if addr in self._bufs:
            del self._bufs[addr]
            self._starts.remove(addr)
            self._cached.pop(addr, None)

    def region(self, addr: int) -> np.ndarray | None:
        """The whole region starting at `addr` (an uncached buffer's host view), None if none."""
        return self._bufs.get(addr)

    # -- the cache of cacheable buffers ----------------------------------------------------------

    def attach_cache(self, addr: int, host: np.ndarray) -> None:
        """Make `host` (uint8, as long as the buffer) the host's cached view of region `addr`."""
        if addr not in self._bufs:
            raise RuntimeError(f"no region at {addr:#x} to attach a cache to")
        self._cached[addr] = (host, host.copy())

    def flush(self, addr: int, nbytes: int) -> None:
        """Host -> DDR for [addr, addr+nbytes) of a cacheable region (its bytes now synced)."""
        host, synced, off = self._cache_of(addr, nbytes, "flush")
        self._checked(addr, nbytes)[:] = host[off:off + nbytes]
        synced[off:off + nbytes] = host[off:off + nbytes]

    def invalidate(self, addr: int, nbytes: int) -> None:
        """DDR -> host for [addr, addr+nbytes) of a cacheable region (its bytes now synced)."""
        host, synced, off = self._cache_of(addr, nbytes, "invalidate")
        host[off:off + nbytes] = self._checked(addr, nbytes)
        synced[off:off + nbytes] = host[off:off + nbytes]

    def mirror(self, addr: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(host view, DDR region, synced record) of the cacheable buffer starting at `addr`:
        what C code needs to flush and invalidate its bytes as :meth:`flush` and
        :meth:`invalidate` do (the delegate's C invoke path on the emulated board)."""
        hit = self._cached.get(addr)
        if hit is None:
            raise RuntimeError(f"no cacheable buffer starts at {addr:#x}")
        return hit[0], self._bufs[addr], hit[1]

    def _cache_of(self, addr: int, nbytes: int, what: str) -> tuple[np.ndarray, np.ndarray, int]:
        i = bisect.bisect_right(self._starts, addr) - 1
        start = self._starts[i] if i >= 0 else None
        hit = self._cached.get(start) if start is not None else None
        if hit is None or addr - start + nbytes > hit[0].size:
            raise RuntimeError(f"{what} of {nbytes} bytes at {addr:#x}: not inside one cacheable "
                               f"buffer")
        return hit[0], hit[1], addr - start

    def check_flushed(self, addr: int, nbytes: int, reader: str) -> None:
        """Raise :class:`StaleCacheError` if the device is about to read bytes of a cacheable
        buffer the host changed since their last flush (or invalidate)."""
        if not self._cached:
            return
        i = bisect.bisect_right(self._starts, addr) - 1
        if i < 0:
            return
        start = self._starts[i]
        hit = self._cached.get(start)
        if hit is None:
            return
        host, synced = hit
        off = addr - start
        end = min(off + nbytes, host.size)
        if end <= off:
            return
        dirty = np.flatnonzero(host[off:end] != synced[off:end])
        if dirty.size:
            first = addr + int(dirty[0])
            raise StaleCacheError(
                f"{reader} read {nbytes} bytes at {addr:#x}, {dirty.size} of which the host wrote "
                f"and did not flush (the first at {first:#x}, offset {first - start} of the "
                f"buffer at {start:#x}): the device sees DDR's older bytes there; flush the range "
                f"before the device reads it")

    def __contains__(self, addr: int) -> bool:
        return addr in self._bufs

    def view(self, addr: int, nbytes: int) -> np.ndarray | None:
        """Bytes [addr, addr+nbytes) as a writable uint8 view, None if not inside one region."""
        i = bisect.bisect_right(self._starts, addr) - 1
        if i < 0:
            return None
        start = self._starts[i]
        raw = self._bufs[start]
        off = addr - start
        if off + nbytes > raw.size:
            return None
        return raw[off:off + nbytes]

    def _checked(self, addr: int, nbytes: int) -> np.ndarray:
        view = self.view(addr, nbytes)
        if view is None:
            raise RuntimeError(f"{nbytes} bytes at {addr:#x} are not inside one allocated region")
        return view

    def read(self, addr: int, nbytes: int) -> np.ndarray:
        return self._checked(addr, nbytes).copy()

    def write(self, addr: int, data: np.ndarray) -> None:
        data = np.asarray(data).reshape(-1).view(np.uint8)
        self._checked(addr, data.size)[:] = data


class Device:
    name = ""

    def __init__(self, board: "Board", name: str, params: dict[str, str]) -> None:
        self.board, self.name, self.params = board, name, params

    def read(self, offset: int) -> int:
        return 0

    def write(self, offset: int, value: int) -> None:
        pass

    def tick(self) -> None:
        pass


class HpPort:
    """The DTPU's AXI4 master on S_AXI_HP0 as the command-list units see DDR: the device side of
    the ``pynq.allocate`` regions (what the host flushed), DECERR outside them."""

    def __init__(self, ddr: "Ddr") -> None:
        self.ddr = ddr

    def read(self, addr: int, n: int) -> np.ndarray:
        """Bytes as the device reads them (a view: the executor also writes results through
        it); a cacheable buffer's unflushed host writes there are an error (:meth:`Ddr.check_flushed`)."""
        from dtpu.hw.ddr import DdrFault
        view = self.ddr.view(addr, n)
        if view is None:
            raise DdrFault("DECERR", addr, n)
        self.ddr.check_flushed(addr, n, "the DTPU's memory port")
        return view

    def write(self, addr: int, data: np.ndarray) -> None:
        from dtpu.hw.ddr import DdrFault
        b = np.ascontiguousarray(data).view(np.uint8).reshape(-1)
        view = self.ddr.view(addr, b.size)
        if view is None:
            raise DdrFault("DECERR", addr, b.size)
        view[:] = b


class DtpuDevice(Device):
    """The DTPU's register file and streams, backed by the golden model. ``CONTRACT`` (set by
    :meth:`Board.program` from the design: "2.0" when no DMA feeds the streams, i.e. the
    ``make CONTRACT=2`` block design, whose DTPU masters HP0) makes it a 2.0 core that also runs
    command lists from DDR through :class:`HpPort`; "1.2" is the ``make CONTRACT=1`` fallback."""

    def __init__(self, board: "Board", name: str, params: dict[str, str]) -> None:
        super().__init__(board, name, params)
        self.cfg = config_from_params(params)
        self.contract = str(params.get("CONTRACT", "1.2"))
        if self.contract not in ("1.2", "2.0"):
            raise ValueError(f"emulated DTPU: CONTRACT={self.contract!r}; accepted: 1.2, 2.0")
        # the vector unit as the bitstream declares it (its VEC_EN): a VEC descriptor on a
        # build without one is BAD_OPCODE there, as on the board
        self.vector_unit = self.contract == "2.0" and design.vector_unit_of(params)
        self.core = ModelTransport(Core(self.cfg), lists=self.contract == "2.0",
                                   mem=HpPort(board.ddr), vector_unit=self.vector_unit)
        c = self.cfg
        self._status = c.REG_STATUS
        self._done = c.reg("STATUS").field("DONE").mask
        self._busy = c.reg("STATUS").field("BUSY").mask

    def read(self, offset: int) -> int:
        value = self.core.read_reg(offset)
        if offset == self._status and self.core.backlog("res"):
            value = (value & ~self._done) | self._busy  # DRAIN: results still in the port
        return value

    def write(self, offset: int, value: int) -> None:
        self.core.write_reg(offset, value)

    @property
    def irq(self) -> bool:
        """The ``irq`` output: CTRL.IRQ_EN and STATUS.DONE (contract 1.2: level while DONE), or
        IRQ.PENDING of a command list (contract 2.0)."""
        c = self.cfg
        core = self.core.core
        lists = self.core.list_window
        if lists is not None and lists.regs["IRQ"] & lists.irq_bit("PENDING"):
            return True
        return bool(core.regs[c.REG_CTRL] & c.reg("CTRL").field("IRQ_EN").mask
                    and self.read(self._status) & self._done)

    # stream side, for the DMAs
    def accept(self, stream: str, words: np.ndarray) -> None:
        self.core.send(stream, words)

    def backlog(self, stream: str) -> int:
        return self.core.backlog(stream)

    def packet(self) -> np.ndarray | None:
        return self.core.next_packet("res")


def config_from_params(params: dict[str, str]) -> HwConfig:
    """The DTPU build from the IP's parameters in the .hwh (defaults: the contract): geometry,
    memories, PREC_EN, RQ_EN and the 2.0 top's VEC_RQ_LANES."""
    base = get_config()
    over: dict[str, Any] = {}
    for key in ("COLS", "LOG_WEIGHT_WORDS", "LOG_PARAM_ENTRIES", "LOG_ACT_WORDS", "RQ_EN"):
        if key in params and int(params[key], 0) != getattr(base, key):
            over[key] = int(params[key], 0)
    # the vector unit's requantizing lanes (the 2.0 top's; the model's cycles of a requantized
    # element-wise word and of MEAN follow them, as the RTL's do)
    if "VEC_RQ_LANES" in params and design.vec_rq_lanes_of(params) != base.VEC_RQ_LANES:
        over["VEC_RQ_LANES"] = design.vec_rq_lanes_of(params)
    if "PREC_EN" in params:
        mask = int(params["PREC_EN"], 0)
        enabled = [p.value for code in range(16) if mask >> code & 1
                   if (p := base.prec_of_code(code)) is not None]
        if mask != base.prec_enable_mask:
            over["ENABLED"] = enabled
    return HwConfig(**over) if over else base


# AXI DMA channel registers and bits, as PG021 names them (the device side of what
# dtpu.board.transport reads through pynq)
_DMACR, _DMASR, _SA, _SA_MSB, _LENGTH = 0x00, 0x04, 0x18, 0x1C, 0x28
_CR_RS, _CR_RESET, _CR_WRITABLE = 0x1, 0x4, 0x7FFF
_SR_HALTED, _SR_IDLE, _SR_IOC_IRQ, _SR_ERR_IRQ, _SR_IRQS = 0x1, 0x2, 0x1000, 0x4000, 0x7000
#: DMASR error bits (DMAIntErr, DMASlvErr, DMADecErr) a failed transfer sets
_SR_INT_ERR, _SR_SLV_ERR, _SR_DEC_ERR = 4, 5, 6


class _Channel:
    """One direction of an AXI DMA in simple mode."""

    def __init__(self, dma: "AxiDmaDevice", kind: str, stream: str | None) -> None:
        self.dma, self.kind, self.stream = dma, kind, stream
        self.cr = 0
        self.sr = _SR_HALTED
        self.addr = 0
        self.addr_hi = 0
        self.length = 0
        self.active = False
        self.capacity = 0

    def reset(self) -> None:
        self.cr, self.sr, self.addr, self.addr_hi, self.length = 0, _SR_HALTED, 0, 0, 0
        self.active = False

    def read(self, reg: int) -> int:
        return {_DMACR: self.cr, _DMASR: self.sr, _SA: self.addr, _SA_MSB: self.addr_hi,
                _LENGTH: self.length}.get(reg, 0)

    def write(self, reg: int, value: int) -> None:
        if reg == _DMACR:
            if value & _CR_RESET:
                self.dma.reset()
                return
            self.cr = value & _CR_WRITABLE
            if value & _CR_RS:
                self.sr &= ~_SR_HALTED
            else:
                self.sr |= _SR_HALTED
                self.sr &= ~_SR_IDLE
                self.active = False
        elif reg == _DMASR:
            self.sr &= ~(value & _SR_IRQS)  # IRQ bits are write-1-to-clear
        elif reg == _SA:
            self.addr = value
        elif reg == _SA_MSB:
            self.addr_hi = value
        elif reg == _LENGTH:
            self.length = value
            self._start(value)

    def _error(self, bit: int, why: str) -> None:
        self.sr |= (1 << bit) | _SR_HALTED | _SR_ERR_IRQ
        self.sr &= ~_SR_IDLE
        self.cr &= ~_CR_RS
        self.active = False
        self.dma.board.note(self.dma.name, f"{self.kind} error: {why}")
        log.warning("emulated %s.%s: %s", self.dma.name, self.kind, why)

    def _start(self, nbytes: int) -> None:
        board = self.dma.board
        if not self.cr & _CR_RS or self.sr & _SR_HALTED:
            return  # not running: the write is ignored, as on the board
        self.sr &= ~_SR_IDLE
        if nbytes == 0:
            return self._error(_SR_INT_ERR, "zero-length transfer")
        if self.stream is None:
            return self._error(_SR_DEC_ERR, "channel not connected in this design")
        view = board.ddr.view(self.addr, nbytes)
        if view is None:
            return self._error(_SR_SLV_ERR, f"{nbytes} bytes at {self.addr:#x} are not in an allocated buffer")
        board.note(self.dma.name, f"{self.kind} start {nbytes} bytes at {self.addr:#x}", nbytes)
        if self.kind == "mm2s":
            board.ddr.check_flushed(self.addr, nbytes, f"{self.dma.name}.mm2s")
            words = view[:nbytes // 8 * 8].view(_U64).copy()
            board.dtpu.accept(self.stream, words)  # tlast on the last word of the transfer
            self.active = True
        else:
            self.capacity = nbytes
            self.active = True

    def tick(self) -> None:
        if not self.active:
            return
        board = self.dma.board
        if self.kind == "mm2s":
            if board.dtpu.backlog(self.stream) == 0:
                self._complete(self.length)
            return
        packet = board.dtpu.packet()
        if packet is None:
            return
        nbytes = packet.size * 8
        view = board.ddr.view(self.addr, min(nbytes, self.capacity))
        if nbytes > self.capacity:
            view[:] = packet.view(np.uint8)[:self.capacity]
            return self._error(_SR_INT_ERR, f"packet of {nbytes} bytes overflows the {self.capacity}-byte "
                                  f"transfer (no tlast within LENGTH)")
        view[:] = packet.view(np.uint8)
        self.length = nbytes
        self._complete(nbytes)

    def _complete(self, nbytes: int) -> None:
        self.active = False
        self.sr |= _SR_IDLE | _SR_IOC_IRQ
        self.dma.board.note(self.dma.name, f"{self.kind} done {nbytes} bytes", nbytes)


class AxiDmaDevice(Device):
    """AXI DMA 7.1 in simple (direct register) mode; channels wired per design.STREAM_DMA."""

    def __init__(self, board: "Board", name: str, params: dict[str, str]) -> None:
        super().__init__(board, name, params)
        wired = {attr: s for s, (dma, attr) in design.STREAM_DMA.items() if dma == name}
        self.mm2s = _Channel(self, "mm2s", wired.get("sendchannel")
                             if params.get("c_include_mm2s", "1") == "1" else None)
        self.s2mm = _Channel(self, "s2mm", wired.get("recvchannel")
                             if params.get("c_include_s2mm", "1") == "1" else None)

    def reset(self) -> None:
        self.mm2s.reset()
        self.s2mm.reset()
        self.board.note(self.name, "reset")

    def read(self, offset: int) -> int:
        ch = self.mm2s if offset < 0x30 else self.s2mm
        return ch.read(offset if offset < 0x30 else offset - 0x30)

    def write(self, offset: int, value: int) -> None:
        ch = self.mm2s if offset < 0x30 else self.s2mm
        ch.write(offset if offset < 0x30 else offset - 0x30, value)

    def tick(self) -> None:
        self.mm2s.tick()
        self.s2mm.tick()


class XadcDevice(Device):
    """Synthetic XADC readings: plausible PYNQ-Z2 values, NOT measurements.

    Die temperature drifts between 44 and 47 C with the DTPU's busy cycles, the supplies sit at
    their nominal voltages with a least significant bit of noise.
    """

    def __init__(self, board: "Board", name: str, params: dict[str, str]) -> None:
        super().__init__(board, name, params)
        self._rng = np.random.default_rng(20)
        log.warning("pynq emulation: the XADC at %s returns synthetic temperature and voltage "
                    "codes, not measurements", name)

    def read(self, offset: int) -> int:
        noise = int(self._rng.integers(-1, 2))
        if offset == xadc.TEMPERATURE:
            cycles = self.board.dtpu.core.core.cycles if self.board.dtpu is not None else 0
            celsius = 44.0 + 3.0 * (1.0 - 1.0 / (1.0 + cycles / 5e6))
            return xadc.register_for_temperature(celsius) + (noise << 4)
        for reg, nominal in xadc.SUPPLIES.values():
            if offset == reg:
                return xadc.register_for_supply(nominal) + (noise << 4)
        return 0


class AxiIntcDevice(Device):
    """AXI Interrupt Controller 4.1 (PG099) with its inputs level-sensitive: input 0 is the
    DTPU's ``irq`` (the only interrupt of the ``interrupts=True`` design). Registers: ISR,
    IPR, IER, IAR (write 1 to acknowledge), SIE, CIE, MER; ``irq`` out = MER.ME and MER.HIE and
    any enabled pending input."""

    ISR, IPR, IER, IAR, SIE, CIE, IVR, MER = 0x00, 0x04, 0x08, 0x0C, 0x10, 0x14, 0x18, 0x1C

    def __init__(self, board: "Board", name: str, params: dict[str, str]) -> None:
        super().__init__(board, name, params)
        self.isr = self.ier = self.mer = 0

    def _inputs(self) -> int:
        dtpu = self.board.dtpu
        return int(dtpu is not None and dtpu.irq)

    def tick(self) -> None:
        self.isr |= self._inputs()   # level inputs latch while high

    def read(self, offset: int) -> int:
        self.tick()
        if offset == self.ISR:
            return self.isr
        if offset == self.IPR:
            return self.isr & self.ier
        if offset == self.IER:
            return self.ier
        if offset == self.MER:
            return self.mer
        if offset == self.IVR:
            pending = self.isr & self.ier
            return (pending & -pending).bit_length() - 1 if pending else 0xFFFFFFFF
        return 0

    def write(self, offset: int, value: int) -> None:
        if offset == self.IAR:
            self.isr &= ~value
        elif offset == self.IER:
            self.ier = value & 1
        elif offset == self.SIE:
            self.ier |= value & 1
        elif offset == self.CIE:
            self.ier &= ~value
        elif offset == self.MER:
            self.mer = value & 3
        self.tick()

    @property
    def irq(self) -> bool:
        return self.mer == 3 and bool(self.isr & self.ier)


class Slcr(Device):
    """The PS's System Level Control Registers that pynq's ``Clocks`` uses (UG585 ch. 25):
    the PLL and clock controls, at the PYNQ-Z2 image's boot values (PS_CLK 50 MHz; ARM PLL
    1300 MHz, CPU 650 MHz; DDR PLL 1050 MHz; IO PLL 1000 MHz; FCLK0 = IO PLL / 5 / 2 = 100 MHz).
    Other SLCR registers read as 0 and ignore writes."""

    BASE, RANGE = 0xF800_0000, 0x1000
    PS_CLK_MHZ = 50.0
    RESET = {0x100: 26 << 12,                   # ARM_PLL_CTRL: PLL_FDIV
             0x104: 21 << 12,                   # DDR_PLL_CTRL
             0x108: 20 << 12,                   # IO_PLL_CTRL
             0x120: 2 << 8 | 0 << 4,            # ARM_CLK_CTRL: DIVISOR 2, SRCSEL ARM PLL
             0x170: 2 << 20 | 5 << 8 | 0 << 4,  # FPGA0_CLK_CTRL: DIVISOR1 2, DIVISOR0 5, IO PLL
             0x180: 1 << 20 | 20 << 8,          # FPGA1..3: 50 MHz, not used by the design
             0x190: 1 << 20 | 20 << 8,
             0x1A0: 1 << 20 | 20 << 8}
    _PLLS = (0x108, 0x108, 0x100, 0x104)        # FPGAn_CLK_CTRL.SRCSEL -> PLL register

    def __init__(self, board: "Board") -> None:
        super().__init__(board, "ps7_slcr", {})
        self.regs = dict(self.RESET)

    def read(self, offset: int) -> int:
        return self.regs.get(offset, 0)

    def write(self, offset: int, value: int) -> None:
        if offset in self.regs:
            self.regs[offset] = value

    def fclk_mhz(self, index: int) -> float:
        """FCLKn as the registers set it."""
        ctrl = self.regs[0x170 + 0x10 * index]
        pll = self.PS_CLK_MHZ * (self.regs[self._PLLS[ctrl >> 4 & 3]] >> 12 & 0x7F)
        return pll / max(1, ctrl >> 8 & 0x3F) / max(1, ctrl >> 20 & 0x3F)


DEVICES = {design.DTPU_VLNV: DtpuDevice, design.VLNV["dma"]: AxiDmaDevice,
           design.VLNV["xadc"]: XadcDevice, "xilinx.com:ip:axi_intc:4.1": AxiIntcDevice}


class Board:
    """The PL as programmed by one overlay download, plus the DDR buffers."""

    def __init__(self) -> None:
        self.ddr = Ddr()
        self.lock = threading.RLock()
        self.trace: list[Access] = []
        self.record = True
        self._map: list[tuple[int, int, Device]] = []
        self.devices: dict[str, Device] = {}
        self.dtpu: DtpuDevice | None = None
        self.bitstream: str | None = None
        self.bitstream_bytes = 0
        self.slcr = Slcr(self)
        #: called after every bus transaction while the PS's fabric interrupt line is high
        self.irq_listeners: list[Any] = []

    def program(self, ips: dict[str, dict[str, Any]], bitstream: str, data: bytes = b"") -> None:
        """Instantiate the devices of an overlay (a fresh PL: memories and registers reset);
        `data` is the configuration data the FPGA manager would get (only its size is kept)."""
        with self.lock:
            self._map, self.devices, self.dtpu = [], {}, None
            # a design without DMAs is the 2.0 one: the DTPU moves its own data (hw/overlays)
            contract = ("1.2" if any(d.get("type") == design.VLNV["dma"] for d in ips.values())
                        else "2.0")
            for name, desc in ips.items():
                cls = DEVICES.get(desc.get("type"))
                if cls is None or desc.get("phys_addr") is None:
                    continue
                params = dict(desc.get("parameters", {}))
                if cls is DtpuDevice:
                    params.setdefault("CONTRACT", contract)
                dev = cls(self, name, params)
                self.devices[name] = dev
                self._map.append((desc["phys_addr"], desc["addr_range"], dev))
                if isinstance(dev, DtpuDevice):
                    self.dtpu = dev
            self._map.sort(key=lambda e: e[0])
            self.trace.clear()
            self.bitstream = bitstream
            self.bitstream_bytes = len(data)

    def _find(self, addr: int) -> tuple[Device, int]:
        if Slcr.BASE <= addr < Slcr.BASE + Slcr.RANGE:
            return self.slcr, addr - Slcr.BASE
        for base, size, dev in self._map:
            if base <= addr < base + size:
                return dev, addr - base
        raise RuntimeError(f"bus error: no device at {addr:#x} in the emulated overlay "
                           f"({self.bitstream})")

    def note(self, device: str, note: str, value: int = 0) -> None:
        if self.record:
            self.trace.append(Access(device, "dma", 0, value, note))

    def cache_op(self, op: str, addr: int, nbytes: int) -> None:
        """Record a cache maintenance operation of the host ('flush' or 'invalidate', on the
        physical range [addr, addr+nbytes)): device 'cache' in :attr:`trace`."""
        if self.record:
            self.trace.append(Access("cache", op, addr, nbytes))

    def read(self, addr: int) -> int:
        with self.lock:
            dev, off = self._find(addr)
            self._tick()
            value = int(dev.read(off)) & 0xFFFFFFFF
            if self.record and not isinstance(dev, XadcDevice):
                self.trace.append(Access(dev.name, "r", off, value))
            return value

    def write(self, addr: int, value: int) -> None:
        with self.lock:
            dev, off = self._find(addr)
            if self.record and not isinstance(dev, XadcDevice):
                self.trace.append(Access(dev.name, "w", off, int(value) & 0xFFFFFFFF))
            dev.write(off, int(value) & 0xFFFFFFFF)
            self._tick()

    def _tick(self) -> None:
        for dev in self.devices.values():
            dev.tick()
        if self.irq_listeners and self.irq_f2p():
            for listener in list(self.irq_listeners):
                listener()

    def irq_f2p(self) -> bool:
        """The PS's fabric interrupt line (IRQ_F2P[0]): an interrupt controller's output."""
        with self.lock:
            for dev in self.devices.values():
                if isinstance(dev, AxiIntcDevice):
                    dev.tick()
                    if dev.irq:
                        return True
            return False


BOARD = Board()

__all__ = ["Access", "AxiDmaDevice", "AxiIntcDevice", "BOARD", "Board", "Ddr", "DtpuDevice", "Slcr",
           "StaleCacheError", "XadcDevice", "config_from_params"]
