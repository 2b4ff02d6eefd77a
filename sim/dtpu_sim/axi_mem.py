"""AXI4 memory for the contract 2.0 unit regressions: cocotbext-axi's AxiRam channels with
random latency, random backpressure (pause generators), error regions (SLVERR / DECERR) and
regions that never answer (timeouts), plus a protocol monitor (4 KiB rule, burst length,
outstanding bursts) that fails the test on a violation.

The read and write processes replace cocotbext-axi's (which answer one burst at a time with
OKAY or SLVERR only): bursts are accepted into a queue, each answered no earlier than its
latency after the request, so several are really in flight.
"""
from __future__ import annotations

import logging
import random
from collections import deque

import cocotb
from cocotb.triggers import ReadWrite, RisingEdge
from cocotbext.axi import AxiReadBus, AxiWriteBus
from cocotbext.axi.axi_ram import AxiRamRead, AxiRamWrite
from cocotbext.axi.memory import Memory
from cocotbext.axi.constants import AxiResp

log = logging.getLogger(__name__)

OKAY, SLVERR, DECERR = int(AxiResp.OKAY), int(AxiResp.SLVERR), int(AxiResp.DECERR)


def random_pauses(rng: random.Random, p: float):
    """Pause generator: True (stall) with probability p each cycle."""
    while True:
        yield rng.random() < p


class Region:
    def __init__(self, lo: int, hi: int, resp: int | None):
        self.lo, self.hi, self.resp = lo, hi, resp   # resp None: never answers

    def hit(self, addr: int, n: int) -> bool:
        return self.lo < addr + n and addr < self.hi


class Clock:
    """Counts rising edges (the cycle number the memory and the checks use)."""

    def __init__(self, clk):
        self.clk = clk
        self.now = 0
        cocotb.start_soon(self._run())

    async def _run(self):
        while True:
            await RisingEdge(self.clk)
            self.now += 1


class Mem:
    """AxiRam on `prefix`_* of `dut` with latency in [lat_lo, lat_hi] cycles per burst, stall
    probability `stall` on every channel, and `regions` (error / hang injection)."""

    def __init__(self, dut, prefix: str, clk, rst, size: int, rng: random.Random,
                 lat=(1, 1), stall: float = 0.0, reads: bool = True, writes: bool = False,
                 strobes: bool = False):
        # strobes: WSTRB honoured byte by byte (the store unit); otherwise every beat must be whole
        self.strobes = strobes
        self.rng = rng
        self.lat = lat
        self.regions: list[Region] = []
        self.clock = Clock(clk)
        self.size = size
        self.ram = Memory(size)
        self.read_if = self.write_if = None
        # cocotbext-axi starts its process in the constructor: ours are put in by subclassing
        if reads:
            cls = type("MemRead", (AxiRamRead,), {"_process_read": lambda _s: self._process_read()})
            self.read_if = cls(AxiReadBus.from_prefix(dut, prefix), clk, rst, reset_active_level=False, mem=self.ram.mem)
            for ch in (self.read_if.ar_channel, self.read_if.r_channel):
                ch.set_pause_generator(random_pauses(rng, stall))
        if writes:
            cls = type("MemWrite", (AxiRamWrite,), {"_process_write": lambda _s: self._process_write()})
            self.write_if = cls(AxiWriteBus.from_prefix(dut, prefix), clk, rst, reset_active_level=False, mem=self.ram.mem)
            for ch in (self.write_if.aw_channel, self.write_if.w_channel, self.write_if.b_channel):
                ch.set_pause_generator(random_pauses(rng, stall))

    def region_of(self, addr: int, n: int) -> Region | None:
        for r in self.regions:
            if r.hit(addr, n):
                return r
        return None

    async def _wait_until(self, t: int):
        while self.clock.now < t:
            await RisingEdge(self.clock.clk)

    # -- reads
    async def _process_read(self):
        rif = self.read_if
        pending: deque = deque()
        cocotb.start_soon(self._answer_reads(pending))
        while True:
            ar = await rif.ar_channel.recv()
            pending.append((int(ar.araddr), int(ar.arlen) + 1,
                            self.clock.now + self.rng.randint(*self.lat)))

    async def _answer_reads(self, pending: deque):
        rif = self.read_if
        while True:
            while not pending:
                await RisingEdge(self.clock.clk)
            addr, n, t = pending.popleft()
            await self._wait_until(t)
            for k in range(n):
                a = addr + 8 * k
                reg = self.region_of(a, 8)
                if reg is not None and reg.resp is None:
                    log.info("read at %#x hangs", a)
                    while True:                      # never answers (nor anything after it)
                        await RisingEdge(self.clock.clk)
                r = rif.r_channel._transaction_obj()
                r.rlast = int(k == n - 1)
                if reg is not None:
                    r.rresp, r.rdata = reg.resp, 0
                else:
                    r.rresp = OKAY
                    r.rdata = int.from_bytes(self.ram.read(a % self.size, 8), "little")
                await rif.r_channel.send(r)

    # -- writes
    async def _process_write(self):
        wif = self.write_if
        pending: deque = deque()
        cocotb.start_soon(self._answer_writes(pending))
        while True:
            aw = await wif.aw_channel.recv()
            addr, n = int(aw.awaddr), int(aw.awlen) + 1
            resp, hang = OKAY, False
            for k in range(n):
                w = await wif.w_channel.recv()
                assert int(w.wlast) == int(k == n - 1), f"WLAST wrong on beat {k} of {n} at {addr:#x}"
                a = addr + 8 * k
                reg = self.region_of(a, 8)
                if reg is None:
                    strb = int(getattr(w, "wstrb", 0xFF))
                    data = int(w.wdata).to_bytes(8, "little")
                    if strb == 0xFF:
                        self.ram.write(a % self.size, data)
                    else:
                        assert self.strobes, f"WSTRB {strb:#x}"
                        for b in range(8):
                            if strb >> b & 1:
                                self.ram.write((a + b) % self.size, data[b:b + 1])
                elif reg.resp is None:
                    hang = True
                else:
                    resp = max(resp, reg.resp)
            pending.append((resp, hang, self.clock.now + self.rng.randint(*self.lat)))

    async def _answer_writes(self, pending: deque):
        wif = self.write_if
        while True:
            while not pending:
                await RisingEdge(self.clock.clk)
            resp, hang, t = pending.popleft()
            await self._wait_until(t)
            # queue the response once the B driver has handled edge t: it then drives it at the
            # next edge, as from idle. Queued before (it runs after this coroutine at an edge),
            # a response due on the edge that took the previous one was driven on that edge, a
            # cycle early: the second of two close write bursts (a partial one after a full one)
            await ReadWrite()
            if hang:
                log.info("write response hangs")
                while True:
                    await RisingEdge(self.clock.clk)
            b = wif.b_channel._transaction_obj()
            b.bresp = resp
            await wif.b_channel.send(b)


class Monitor:
    """Checks every AR/AW the DUT issues (8-byte beats, INCR, no 4 KiB crossing, at most
    `max_burst` beats) and the bursts in flight (at most `max_out`); records the largest number
    in flight and every burst."""

    def __init__(self, dut, prefix: str, clk, max_burst: int, max_out: int, write: bool = False):
        self.dut, self.p, self.clk = dut, prefix, clk
        self.max_burst, self.max_out, self.write = max_burst, max_out, write
        self.inflight = 0
        self.peak = 0
        self.bursts: list[tuple[int, int]] = []
        self.errors: list[str] = []
        cocotb.start_soon(self._run())

    def _sig(self, name):
        return int(getattr(self.dut, f"{self.p}_{name}").value)

    async def _run(self):
        a, d = ("aw", "b") if self.write else ("ar", "r")
        while True:
            await RisingEdge(self.clk)
            if self._sig(f"{a}valid") and self._sig(f"{a}ready"):
                addr, n = self._sig(f"{a}addr"), self._sig(f"{a}len") + 1
                self.bursts.append((addr, n))
                if addr % 8 or self._sig(f"{a}size") != 3 or self._sig(f"{a}burst") != 1:
                    self.errors.append(f"burst {addr:#x}: unaligned, size or type")
                if (addr & 0xFFF) + 8 * n > 0x1000:
                    self.errors.append(f"burst {addr:#x}+{n} beats crosses 4 KiB")
                if n > self.max_burst:
                    self.errors.append(f"burst {addr:#x} of {n} beats > {self.max_burst}")
                self.inflight += 1
            done = (self._sig("bvalid") and self._sig("bready")) if self.write else \
                (self._sig("rvalid") and self._sig("rready") and self._sig("rlast"))
            if done:
                self.inflight -= 1
            self.peak = max(self.peak, self.inflight)
            if self.inflight > self.max_out:
                self.errors.append(f"{self.inflight} bursts in flight > {self.max_out}")

    def check(self):
        assert not self.errors, "; ".join(self.errors[:5])
