"""The DTPU driver's Transport over the simulated core: cocotbext-axi bus models on dtpu_axi.

The driver (:func:`dtpu.driver.run_jobs`) is synchronous and the simulator is driven by cocotb
coroutines, so the driver runs in a ``cocotb.task.bridge`` thread and every transport method is
a coroutine wrapped with ``cocotb.task.resume``: a call blocks the driver's thread while the
scheduler runs the bus transaction and the clock advances. Simulated time only moves while the
driver waits in one of these calls, so Python work between them (packing, im2col, TFLite) costs
no cycles, exactly as the golden model assumes.

The async methods (``a_*``) are public too, for cocotb tests that drive the core directly.

:class:`CocotbListTransport` (end of the module) is the same on the contract-2.0 top
(dtpu_cl_top): its AXI4 master on :class:`dtpu.rtl.cocotb_mem.ContractMem` (the contract's
memory model, a port of the in-process harness's axi_mem.h) over a simulated DDR, for command
lists (``run_in_simulation(..., top="dtpu_cl_top")``).

Two deliberate choices:

* **START goes out after the job's streams are queued.** The driver writes CTRL.START, reads
  STATUS once (to catch configuration errors) and only then sends the input words, one stream
  after the other. Done literally, the core would stall for the few cycles of that AXI4-Lite
  read and the per-node CYCLES would not equal backend=model's stall-free schedule. By default
  (``start_with_streams=True``) the transport holds the START write until the job's streams
  are queued (it goes out at the next call that is not a :meth:`send`, normally
  :meth:`wait_done`), as DMAs armed before START would be: a job with a weight prefetch then
  finds ``s_axis_wgt`` and ``s_axis_act`` both fed from its first cycle. A STATUS read in
  between is answered "BUSY" without a bus read, which is what the core would say for any job
  that passes CONFIG. A job that fails CONFIG is still caught, by the ERR read after DONE, and
  its queued words are dropped by the driver's reset. ``start_with_streams=False`` issues every
  call as made, and the stall cycles then show in STALL.
* **DONE is awaited on the interrupt line.** START writes set CTRL.IRQ_EN, and
  :meth:`wait_done` sleeps on ``irq`` (STATUS.DONE while IRQ_EN) in chunks of simulated time,
  so a long job costs no Python per cycle; STATUS is read over the bus to confirm. Every wait is
  bounded twice: ``timeout_cycles`` of simulated time and the wall-clock timeout, whichever
  comes first, so a hung core raises instead of hanging the process.
"""
from __future__ import annotations

import logging
import time

import cocotb
import numpy as np
from cocotb.clock import Clock
from cocotb.triggers import ClockCycles, First, RisingEdge, Timer
from cocotb.utils import get_sim_time
from cocotbext.axi import (AxiLiteBus, AxiLiteMaster, AxiStreamBus, AxiStreamFrame,
                           AxiStreamSink, AxiStreamSource)

from dtpu.driver.transport import DtpuTimeout
from dtpu.hw.config import HwConfig
from dtpu.rtl import session
from dtpu.rtl.session import DEFAULT_TIMEOUT_CYCLES, DEFAULT_TIMEOUT_S, SimulatedTransport

log = logging.getLogger(__name__)

_U64 = np.dtype("<u8")

#: simulated cycles wait_done sleeps between wall-clock checks
_CHUNK_CYCLES = 20_000
#: simulated cycles between CL_STATUS reads while a list runs without its interrupt
_LIST_POLL_CYCLES = 2_000


class CocotbTransport(SimulatedTransport):
    """dtpu.driver's Transport over cocotbext-axi models of a simulated dtpu_axi.

    Construct it in a cocotb test, ``await t.start()`` (clock and reset), then run the driver in
    a ``cocotb.task.bridge`` thread with this object as its transport.
    """

    STREAMS_IN = ("wgt", "act")
    STREAM_OUT = "res"

    def __init__(self, dut, cfg: HwConfig, *, period_ns: int = 10,
                 timeout_cycles: int = DEFAULT_TIMEOUT_CYCLES,
                 timeout_s: float = DEFAULT_TIMEOUT_S, start_with_streams: bool = True,
                 recv_cycles: int = 64) -> None:
        super().__init__(cfg, timeout_cycles, timeout_s, start_with_streams, recv_cycles)
        self.dut = dut
        self.period_ns = int(period_ns)
        self._cycle = 0
        self._has_irq = hasattr(dut, "irq")
        self.axil = AxiLiteMaster(AxiLiteBus.from_prefix(dut, "s_axil"), dut.clk, dut.aresetn,
                                  reset_active_level=False)
        self.src = {s: AxiStreamSource(AxiStreamBus.from_prefix(dut, f"s_axis_{s}"), dut.clk,
                                       dut.aresetn, reset_active_level=False)
                    for s in self.STREAMS_IN}
        self.sink = AxiStreamSink(AxiStreamBus.from_prefix(dut, f"m_axis_{self.STREAM_OUT}"),
                                  dut.clk, dut.aresetn, reset_active_level=False)
        for model in (*self.src.values(), self.sink, self.axil.write_if, self.axil.read_if):
            model.log.setLevel(logging.WARNING)
        # the blocking face the driver sees (callable only from a cocotb.task.bridge thread)
        self._write_reg = cocotb.task.resume(self.a_write_reg)
        self._read_reg = cocotb.task.resume(self.a_read_reg)
        self._send = cocotb.task.resume(self.a_send)
        self._recv = cocotb.task.resume(self.a_recv)
        self._wait_done = cocotb.task.resume(self.a_wait_done)
        self._pending_input = cocotb.task.resume(self.a_pending_input)
        self._reset = cocotb.task.resume(self.a_reset)

    # -- simulation control ---------------------------------------------------------------------

    @property
    def cycle(self) -> int:
        """Clock cycles since time 0, as of the last transport call."""
        return self._cycle

    def _now(self) -> int:
        self._cycle = int(get_sim_time("ns")) // self.period_ns
        return self._cycle

    async def start(self) -> None:
        """Start the clock and reset the core (aresetn low for a few cycles)."""
        Clock(self.dut.clk, self.period_ns, unit="ns").start()
        self.dut.aresetn.value = 1
        await ClockCycles(self.dut.clk, 2)
        self.dut.aresetn.value = 0
        await ClockCycles(self.dut.clk, 4)
        self.dut.aresetn.value = 1
        await ClockCycles(self.dut.clk, 2)
        self._now()

    # -- the transport, as coroutines ---------------------------------------------------------------

    async def _flush_start(self) -> None:
        if self._start_value is not None:
            value, self._start_value = self._start_value, None
            await self.axil.write_dword(self.cfg.REG_CTRL, value)
            self._job_cycle0 = self._now()

    async def a_write_reg(self, offset: int, value: int) -> None:
        value = int(value) & 0xFFFFFFFF
        if offset == self.cfg.REG_CTRL and value & self._start_bit:
            if self._has_irq:
                value |= self._irq_bit
            self.jobs += 1
            session.note("jobs")
            if self.start_with_streams:
                await self._flush_start()    # a START without streams in between: issue it
                self._start_value = value
                return
            await self.axil.write_dword(offset, value)
            self._job_cycle0 = self._now()
            return
        await self._flush_start()
        await self.axil.write_dword(offset, value)

    async def a_read_reg(self, offset: int) -> int:
        if self._start_value is not None:
            if offset == self.cfg.REG_STATUS:
                return self._busy_bit     # what a job that passes CONFIG reads; see the module doc
            await self._flush_start()
        return int(await self.axil.read_dword(offset))

    async def a_send(self, stream: str, words: np.ndarray) -> None:
        src = self.src.get(stream)
        if src is None:
            raise ValueError(f"unknown input stream {stream!r}; accepted: {', '.join(self.src)}")
        data = np.ascontiguousarray(np.asarray(words, dtype=_U64)).tobytes()
        if data:
            src.send_nowait(AxiStreamFrame(data))
        # a held START waits for the job's other streams (see the module doc)

    async def a_wait_done(self, timeout_s: float) -> bool:
        await self._flush_start()
        deadline = time.monotonic() + min(float(timeout_s), self.timeout_s)
        limit = self._job_cycle0 + self.timeout_cycles
        clk = self.dut.clk
        try:
            while True:
                if self._has_irq:
                    if self.dut.irq.value == 1:
                        status = await self.a_read_reg(self.cfg.REG_STATUS)
                        if status & self._done_bit:
                            return True
                        await RisingEdge(clk)
                else:
                    status = await self.a_read_reg(self.cfg.REG_STATUS)
                    if status & self._done_bit:
                        return True
                now = self._now()
                if now >= limit or time.monotonic() >= deadline:
                    return False
                chunk = min(limit - now, _CHUNK_CYCLES)
                if self._has_irq:
                    await First(RisingEdge(self.dut.irq), Timer(chunk * self.period_ns, unit="ns"))
                else:
                    await ClockCycles(clk, min(chunk, 8))
        finally:
            progress = session.progress()
            if progress is not None:
                progress.set(cycles=self._now())

    async def a_recv(self, stream: str, n: int) -> np.ndarray:
        if stream != self.STREAM_OUT:
            raise ValueError(f"unknown output stream {stream!r}; accepted: {self.STREAM_OUT}")
        waited = 0
        while self.sink.empty() and waited < self.recv_cycles:
            await RisingEdge(self.dut.clk)
            waited += 1
        if self.sink.empty():
            raise DtpuTimeout(f"m_axis_{stream}: no packet ended with tlast within {self.recv_cycles} "
                              f"cycles after DONE ({n} words expected)")
        parts = []
        while not self.sink.empty():   # everything the job put out: extra packets make it long
            frame = self.sink.recv_nowait()
            parts.append(np.frombuffer(bytes(frame.tdata), dtype=_U64))
        self._now()
        return np.concatenate(parts) if len(parts) > 1 else parts[0].copy()

    async def a_pending_input(self, timeout_s: float = 0.0) -> dict[str, int]:
        left = {}
        for name, src in self.src.items():
            if src.idle():
                continue
            queued = src.queue_occupancy_bytes // _U64.itemsize
            left[name] = -1 if src.active or not queued else queued
        return left

    async def a_reset(self) -> None:
        """SOFT_RESET the core, then drop what the bus models still hold (queued or half-sent
        input frames, received or half-received result frames), so the next job starts clean."""
        self._start_value = None
        await self.axil.write_dword(self.cfg.REG_CTRL, self.cfg.encode("CTRL", SOFT_RESET=1))
        for model in (*self.src.values(), self.sink):
            model.clear()
            # cocotbext-axi keeps a half-sent/half-received frame inside its run loop; restarting
            # the loop the way its own reset handling does is the only way to drop it
            model._handle_reset(True)
            model._handle_reset(False)
        while not self.sink.empty():
            self.sink.recv_nowait()
        await ClockCycles(self.dut.clk, 2)
        self._now()

    # -- the blocking Transport the driver calls --------------------------------------------------

    def write_reg(self, offset: int, value: int) -> None:
        self._write_reg(offset, value)

    def read_reg(self, offset: int) -> int:
        return self._read_reg(offset)

    def send(self, stream: str, words: np.ndarray) -> None:
        self._send(stream, words)

    def recv(self, stream: str, n: int) -> np.ndarray:
        return self._recv(stream, n)

    def wait_done(self, timeout_s: float) -> bool:
        return self._wait_done(timeout_s)

    def pending_input(self, timeout_s: float = 0.0) -> dict[str, int]:
        return self._pending_input(timeout_s)

    def reset(self) -> None:
        self._reset()

    def describe(self) -> str:
        """Bus-model state for error messages; reads Python state only (no simulator access)."""
        parts = [f"cycle {self._cycle} (job started at {self._job_cycle0}, bound "
                 f"{self.timeout_cycles} cycles)"]
        for name, src in self.src.items():
            queued = src.queue_occupancy_bytes // _U64.itemsize
            parts.append(f"s_axis_{name}: {'sending' if src.active else 'idle'}, {queued} words queued")
        parts.append(f"m_axis_{self.STREAM_OUT}: {self.sink.count()} packets received")
        return "cocotb transport: " + ", ".join(parts)


__all__ = ["CocotbTransport", "DEFAULT_TIMEOUT_CYCLES", "DEFAULT_TIMEOUT_S"]


# -- contract 2.0: dtpu_cl_top under cocotb, its AXI4 master on the contract's memory ------------

class CocotbListTransport(CocotbTransport):
    """The cocotb transport on the contract-2.0 top (dtpu_cl_top): the 1.2 registers and streams
    as :class:`CocotbTransport`, plus what the lists driver (:class:`dtpu.driver.lists.
    ListProgram`) needs: ``alloc_buffer`` (buffers in a simulated DDR, :class:`dtpu.rtl.native.
    SimDdr`, whose bytes the AXI4 slave :class:`dtpu.rtl.cocotb_mem.ContractMem` serves in
    place, with the contract's memory timing) and ``wait_list`` (after DOORBELL: the simulation
    runs until the interrupt or CL_STATUS.DONE, bounded in cycles and wall time).

    As the in-process :class:`dtpu.rtl.native.NativeListTransport` (same defaults, same reasons):
    only allocated buffers answer (`strict`); ``list_trace`` is the simulated RTL's per-node
    record of the last list (:class:`dtpu.rtl.nodetrace.CocotbTracer`: the same registers and
    rules as the in-process harness's), None if the build lacks its signals."""

    command_lists = True

    def __init__(self, dut, cfg: HwConfig, *, ddr_bytes: int = 64 << 20,
                 ddr_base: int | None = None, strict: bool = True, timing: dict | None = None,
                 list_timeout_cycles: int | None = None,
                 **options) -> None:
        from dtpu.hw.listformat import DEFAULT_DDR_BASE, Format
        from dtpu.rtl.native import DEFAULT_LIST_TIMEOUT_CYCLES, SimDdr

        super().__init__(dut, cfg, **options)
        self.fmt = Format(cfg)
        self.list_timeout_cycles = int(list_timeout_cycles or DEFAULT_LIST_TIMEOUT_CYCLES)
        self._reg = {n: self.fmt.reg_offset(n) for n in self.fmt.regs}
        st = self.fmt.regs["CL_STATUS"]["fields"]
        self._cl_done_bit = 1 << next(f["lsb"] for f in st if f["name"] == "DONE")
        base = DEFAULT_DDR_BASE if ddr_base is None else int(ddr_base)
        self.ddr = SimDdr(int(ddr_bytes), base, lambda: None, strict)
        m = {k: int(v) for k, v in self.fmt.mem.items()}
        m.update({k: int(v) for k, v in (timing or {}).items()})
        self.timing = m
        self.mem = None
        self.lists_run = 0
        self.list_cycles = 0
        self._wait_list = cocotb.task.resume(self.a_wait_list)

    async def start(self) -> None:
        from dtpu.rtl.cocotb_mem import ContractMem

        self.mem = ContractMem(self.dut, self.ddr.image, self.ddr.base, self.timing,
                               windows=self.ddr.windows if self.ddr.strict else None)
        await super().start()
        self.tracer = None
        try:
            from dtpu.rtl.nodetrace import CocotbTracer

            self.tracer = CocotbTracer(self.dut)
        except AttributeError as e:   # a build without the record's public signals
            log.warning("no per-node record of lists (%s); list_trace() is None", e)
        else:
            self.tracer.start()

    def alloc_buffer(self, nbytes: int):
        """A buffer in the simulated DDR (the memory serves its bytes in place)."""
        return self.ddr.alloc(nbytes)

    def mem_counts(self) -> dict[str, int]:
        return self.mem.counts()

    def violation(self) -> str:
        return self.mem.violations[0] if self.mem.violations else ""

    async def a_wait_list(self, timeout_s: float) -> bool:
        await self._flush_start()
        deadline = time.monotonic() + max(float(timeout_s), self.timeout_s)
        c0 = self._now()
        limit = c0 + self.list_timeout_cycles
        clk = self.dut.clk
        try:
            while True:
                if not self._has_irq or self.dut.irq.value == 1:
                    if await self.a_read_reg(self._reg["CL_STATUS"]) & self._cl_done_bit:
                        self.lists_run += 1
                        return True
                now = self._now()
                if now >= limit or time.monotonic() >= deadline:
                    break
                # the interrupt (IRQ.DONE_EN) ends the wait at once; without it (not enabled
                # yet) CL_STATUS is read every _LIST_POLL_CYCLES, which costs no CL_CYCLES
                chunk = min(limit - now, _LIST_POLL_CYCLES)
                if self._has_irq:
                    await First(RisingEdge(self.dut.irq), Timer(chunk * self.period_ns, unit="ns"))
                else:
                    await ClockCycles(clk, chunk)
        finally:
            self.list_cycles += self._now() - c0
            progress = session.progress()
            if progress is not None:
                progress.set(cycles=self._cycle)
        st = await self.a_read_reg(self._reg["CL_STATUS"])
        raise DtpuTimeout(f"command list: no CL_STATUS.DONE within {self._now() - c0} simulated "
                          f"cycles (bound {self.list_timeout_cycles}); CL_STATUS={st:#x}; "
                          f"{self.describe()}")

    def wait_list(self, timeout_s: float) -> bool:
        return self._wait_list(timeout_s)

    async def a_wait_done(self, timeout_s: float) -> bool:
        """A 1.2 job's DONE, STATUS polled (this top routes only the 2.0 interrupt to irq)."""
        await self._flush_start()
        deadline = time.monotonic() + min(float(timeout_s), self.timeout_s)
        limit = self._job_cycle0 + self.timeout_cycles
        while True:
            if await self.a_read_reg(self.cfg.REG_STATUS) & self._done_bit:
                return True
            if self._now() >= limit or time.monotonic() >= deadline:
                return False
            await ClockCycles(self.dut.clk, 8)

    def trace_events(self):
        """As :meth:`dtpu.rtl.native.NativeListTransport.trace_events`."""
        return self.tracer.trace_events()

    def list_trace(self):
        """The simulated RTL's per-node record of the last list (a
        :class:`dtpu.hw.list_result.RunResult`, :mod:`dtpu.rtl.nodetrace`), as in process."""
        from dtpu.rtl.nodetrace import run_result

        if getattr(self, "tracer", None) is None:
            return None
        info, events = self.tracer.trace_events()
        return run_result(info, events) if info["done"] else None

    def describe(self) -> str:
        text = super().describe()
        if self.mem is not None:
            m = self.mem.counts()
            text += (f", memory: {m['rd_beats']} read beats, {m['wr_beats']} write beats, "
                     f"{m['reads_in_flight']} reads and {m['writes_in_flight']} writes in flight, "
                     f"{m['violations']} protocol violations")
        return text


__all__ += ["CocotbListTransport"]
