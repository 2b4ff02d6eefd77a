"""The simulated DTPU behind cocotbext-axi models, and transports for dtpu.driver.

* :class:`DtpuTB` starts the clock, builds an AxiLiteMaster on ``s_axil``, AxiStreamSources on
  ``s_axis_wgt`` / ``s_axis_act`` and an AxiStreamSink on ``m_axis_res``, and resets.
* :class:`AsyncTransport` offers the five transport methods as coroutines.
* :class:`BridgeTransport` offers them as blocking methods for code running in a
  ``cocotb.task.bridge`` thread, so the unchanged synchronous driver
  (:func:`dtpu.driver.run_jobs`) can drive the RTL::

      @cocotb.task.bridge
      def drive(t):
          return run_jobs(t, jobs)
      results, counters = await drive(BridgeTransport(tb))
"""
from __future__ import annotations

import random

import cocotb
import numpy as np
from cocotb.clock import Clock
from cocotb.triggers import ClockCycles, RisingEdge
from cocotbext.axi import (AxiLiteBus, AxiLiteMaster, AxiStreamBus, AxiStreamFrame,
                           AxiStreamSink, AxiStreamSource)

from dtpu.driver import Transport
from dtpu.hw.config import HwConfig

_U64 = np.dtype("<u8")


def random_pauses(rng: random.Random, prob: float):
    """A pause generator: 1 (pause) with probability prob each cycle, reproducible."""
    while True:
        yield int(rng.random() < prob)


class DtpuTB:
    """Clock, reset and the AXI models around a dtpu_axi instance."""

    def __init__(self, dut, cfg: HwConfig, period_ns: int = 10):
        self.dut = dut
        self.cfg = cfg
        self.log = dut._log
        cocotb.start_soon(Clock(dut.clk, period_ns, unit="ns").start())
        self.axil = AxiLiteMaster(AxiLiteBus.from_prefix(dut, "s_axil"), dut.clk, dut.aresetn,
                                  reset_active_level=False)
        self.src = {
            "wgt": AxiStreamSource(AxiStreamBus.from_prefix(dut, "s_axis_wgt"), dut.clk,
                                   dut.aresetn, reset_active_level=False),
            "act": AxiStreamSource(AxiStreamBus.from_prefix(dut, "s_axis_act"), dut.clk,
                                   dut.aresetn, reset_active_level=False),
        }
        self.sink = AxiStreamSink(AxiStreamBus.from_prefix(dut, "m_axis_res"), dut.clk,
                                  dut.aresetn, reset_active_level=False)
        for s in self.src.values():
            s.log.setLevel("WARNING")
        self.sink.log.setLevel("WARNING")
        self.axil.write_if.log.setLevel("WARNING")
        self.axil.read_if.log.setLevel("WARNING")

    def set_idle(self, gen_factory=None):
        """gen_factory(): a new pause generator per source (None: no gaps)."""
        for s in self.src.values():
            s.set_pause_generator(gen_factory() if gen_factory else None)
            if not gen_factory:
                s.pause = False  # removing the generator leaves its last value

    def set_backpressure(self, gen=None):
        self.sink.set_pause_generator(gen)
        if gen is None:
            self.sink.pause = False  # removing the generator leaves its last value

    async def reset(self):
        self.dut.aresetn.value = 1
        await ClockCycles(self.dut.clk, 2)
        self.dut.aresetn.value = 0
        await ClockCycles(self.dut.clk, 3)
        self.dut.aresetn.value = 1
        await ClockCycles(self.dut.clk, 2)

    def flush(self):
        """Drop whatever the models still queue (after an aborted job or a reset)."""
        for s in self.src.values():
            s.clear()
        self.sink.clear()


class AsyncTransport:
    """dtpu.driver' Transport, as coroutines, over the AXI models of a DtpuTB."""

    def __init__(self, tb: DtpuTB, poll_cycles: int = 4, timeout_cycles: int = 20_000):
        self.tb = tb
        self.cfg = tb.cfg
        self.poll_cycles = poll_cycles
        self.timeout_cycles = timeout_cycles

    async def write_reg(self, offset: int, value: int) -> None:
        await self.tb.axil.write_dword(offset, int(value) & 0xFFFFFFFF)

    async def read_reg(self, offset: int) -> int:
        return int(await self.tb.axil.read_dword(offset))

    async def send(self, stream: str, words) -> None:
        """Queue words on s_axis_<stream> with tlast on the last one (returns at once)."""
        data = np.ascontiguousarray(np.asarray(words, dtype=_U64)).tobytes()
        await self.tb.src[stream].send(AxiStreamFrame(data))

    async def recv(self, stream: str, n: int) -> np.ndarray:
        assert stream == "res", stream
        frame = await self.tb.sink.recv()
        words = np.frombuffer(bytes(frame.tdata), dtype=_U64).copy()
        if words.size != n:
            raise AssertionError(f"expected {n} result words in the frame (tlast), got {words.size}")
        return words

    async def wait_done(self, timeout_s: float | None = None) -> bool:
        st = self.cfg.REG_STATUS
        for _ in range(self.timeout_cycles // max(1, self.poll_cycles)):
            if (await self.read_reg(st)) & 0b10:
                return True
            await ClockCycles(self.tb.dut.clk, self.poll_cycles)
        c = self.cfg
        d = self.tb.dut
        raise TimeoutError(
            f"STATUS.DONE did not rise: STATUS {await self.read_reg(st):#x}, WORDS_WGT "
            f"{await self.read_reg(c.REG_WORDS_WGT)}, WORDS_ACT {await self.read_reg(c.REG_WORDS_ACT)}, "
            f"WORDS_RES {await self.read_reg(c.REG_WORDS_RES)}, act tvalid {d.s_axis_act_tvalid.value} "
            f"tready {d.s_axis_act_tready.value}, res tvalid {d.m_axis_res_tvalid.value} tready "
            f"{d.m_axis_res_tready.value}")


class BridgeTransport(Transport):
    """The same transport as blocking calls for a cocotb.task.bridge thread: a
    :class:`dtpu.driver.Transport` (its hooks keep their defaults)."""

    def __init__(self, tb: DtpuTB, **kw):
        self._a = AsyncTransport(tb, **kw)
        self.cfg = tb.cfg
        self._write_reg = cocotb.task.resume(self._a.write_reg)
        self._read_reg = cocotb.task.resume(self._a.read_reg)
        self._send = cocotb.task.resume(self._a.send)
        self._recv = cocotb.task.resume(self._a.recv)
        self._wait_done = cocotb.task.resume(self._a.wait_done)

    def write_reg(self, offset: int, value: int) -> None:
        return self._write_reg(offset, value)

    def read_reg(self, offset: int) -> int:
        return self._read_reg(offset)

    def send(self, stream: str, words):
        return self._send(stream, words)

    def recv(self, stream: str, n: int):
        return self._recv(stream, n)

    def wait_done(self, timeout_s: float) -> bool:
        return self._wait_done(timeout_s)


async def read_counters(t: AsyncTransport) -> tuple[int, int, int, int, int]:
    """Async twin of dtpu.driver.read_counters."""
    c = t.cfg
    lo = await t.read_reg(c.REG_CYCLES_LO)
    cycles = lo | (await t.read_reg(c.REG_CYCLES_HI) << 32)
    lo = await t.read_reg(c.REG_STALL_LO)
    stalls = lo | (await t.read_reg(c.REG_STALL_HI) << 32)
    return (cycles, stalls, await t.read_reg(c.REG_WORDS_WGT), await t.read_reg(c.REG_WORDS_ACT),
            await t.read_reg(c.REG_WORDS_RES))


async def run_job(t: AsyncTransport, job, prequeue: bool = False):
    """Async twin of dtpu.driver.run_job (same register order and checks).

    prequeue=True queues the job's stream words before the START write, so that with no idle
    cycles and no backpressure the core never waits: the run is stall-free and its CYCLES must
    equal the golden model's exactly. Returns (result words or None, ERR).
    """
    c = t.cfg
    for name, value in job.regs:
        await t.write_reg(c.reg(name).offset, value)
    if prequeue:
        for stream, words in job.send.items():
            await t.send(stream, words)
    await t.write_reg(c.REG_CTRL, c.encode("CTRL", START=1))
    if not prequeue:
        for stream, words in job.send.items():
            await t.send(stream, words)
    await t.wait_done()
    err = await t.read_reg(c.REG_ERR)
    if err:
        await t.write_reg(c.REG_ERR, err)
    if err & c.ERR_FATAL_MASK:
        return None, err
    return (await t.recv("res", job.recv) if job.recv else None), err


__all__ = ["AsyncTransport", "BridgeTransport", "DtpuTB", "random_pauses", "read_counters",
           "run_job"]

