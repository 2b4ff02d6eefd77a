"""What the AXI4 master benches share: sim/tb/tb_axi_rd.py (hw/rtl/dtpu_axi_rd.v) and
sim/tb/tb_axi_wr.py (hw/rtl/dtpu_axi_wr.v).

Both masters have the same request side: ``req_valid`` / ``req_ready`` with ``req_addr`` and
``req_words``, a ``timeout`` bound, ``clear`` and the sticky ``err_slverr`` / ``err_decerr`` /
``err_timeout`` flags, all in front of an AXI4 memory (dtpu_sim.axi_mem) of SIZE bytes. The
benches differ in their data side (the read master's word stream out, the write master's
word stream in); the clock, the reset, issuing requests, the flags and the random request
shapes are the same, and are here (:class:`MasterTB`, :func:`random_request`).

Environment: PARAM_MAX_BURST, PARAM_MAX_OUTSTANDING (the build's parameters, as the benches
check them).
"""
from __future__ import annotations

import os
import random

from cocotb.triggers import ClockCycles, RisingEdge

from dtpu_sim.signals import drive, start_clock

MAX_BURST = int(os.environ.get("PARAM_MAX_BURST", "16"))
MAX_OUT = int(os.environ.get("PARAM_MAX_OUTSTANDING", "8"))
#: the memory behind the master, in bytes
SIZE = 1 << 16


class MasterTB:
    """The clock and the request side of one master, its inputs idle and in reset; the
    subclass adds its data side and the memory (drawing from ``self.rng`` after this)."""

    def __init__(self, dut, seed):
        self.dut = dut
        self.rng = random.Random(seed)
        start_clock(dut)
        drive(dut, rst_n=0, clear=0, req_valid=0, req_addr=0, req_words=0, timeout=0)

    async def reset(self):
        await ClockCycles(self.dut.clk, 3)
        self.dut.rst_n.value = 1
        await ClockCycles(self.dut.clk, 2)

    async def issue(self, reqs, gap=3):
        """Request each (addr, words) of `reqs` in turn, a random 0..gap cycles apart."""
        d = self.dut
        for addr, n in reqs:
            for _ in range(self.rng.randint(0, gap)):
                await RisingEdge(d.clk)
            d.req_valid.value = 1
            d.req_addr.value = addr
            d.req_words.value = n
            while True:
                await RisingEdge(d.clk)
                if int(d.req_ready.value):
                    break
            d.req_valid.value = 0

    def flags(self):
        d = self.dut
        return int(d.err_slverr.value), int(d.err_decerr.value), int(d.err_timeout.value)

    async def clear(self):
        """`clear` high for one cycle (low again right after the edge that takes it)."""
        self.dut.clear.value = 1
        await RisingEdge(self.dut.clk)
        self.dut.clear.value = 0

    async def expect_timeout(self, timeout, channels, limit):
        """Run until err_timeout (at most `limit` cycles): it must fire `timeout` to `timeout` + 2
        cycles after the last handshake on the AXI `channels` ("ar", "r" / "aw", "w", "b"), the
        memory's cycle count (``self.mem``, which the subclass builds) as the clock."""
        d = self.dut
        last_progress, fired = 0, None
        for _ in range(limit):
            await RisingEdge(d.clk)
            if any(int(getattr(d, f"m_axi_{c}valid").value) and int(getattr(d, f"m_axi_{c}ready").value)
                   for c in channels):
                last_progress = self.mem.clock.now
            if int(d.err_timeout.value):
                fired = self.mem.clock.now
                break
        assert fired is not None, "no timeout"
        assert timeout <= fired - last_progress <= timeout + 2, \
            f"fired {fired - last_progress} cycles after progress"

    async def clear_after_timeout(self, waiting):
        """After err_timeout (the master idle, refusing requests): the bus was clean so far,
        `clear` drops the flags and the request that waited at `waiting` is accepted (its first
        burst seen by the monitor, ``self.mon``, which the subclass builds)."""
        self.mon.check()
        await self.clear()
        await ClockCycles(self.dut.clk, 20)
        assert self.flags() == (0, 0, 0)
        assert (waiting, MAX_BURST) in self.mon.bursts, "the waiting request is accepted after clear"


def random_request(rng, max_words=200):
    """One (addr, words) inside SIZE: short, burst-sized or long, many starting just below a
    4 KiB boundary (the bursts must split there)."""
    words = rng.choice([1, 2, rng.randint(1, 17), rng.randint(1, max_words)])
    if rng.random() < 0.4:   # start just below a 4 KiB boundary
        page = rng.randrange(1, SIZE // 4096) * 4096
        addr = page - 8 * rng.randint(1, 20)
    else:
        addr = rng.randrange(0, SIZE // 8) * 8
    return min(addr, SIZE - 8 * words), words
