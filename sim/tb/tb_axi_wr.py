"""cocotb: dtpu_axi_wr against an AxiRam with random latency and backpressure: memory exact
(the requested words written, nothing else touched), bursts within the 4 KiB rule and
MAX_BURST with WLAST on their last beat, at most MAX_OUTSTANDING awaiting a response (and that
many reached), `idle` only once every response is in, BRESP errors as flags, timeouts."""
import os

import cocotb
from cocotb.triggers import ClockCycles, RisingEdge

from dtpu_sim.axi_master import MAX_BURST, MAX_OUT, SIZE, MasterTB, random_request
from dtpu_sim.axi_mem import DECERR, SLVERR, Mem, Monitor, Region
from dtpu_sim.signals import drive

SEED = int(os.environ.get("DTPU_SEED", "2025"))
N_REQ = int(os.environ.get("DTPU_CASES", "30"))


class TB(MasterTB):
    """The request side (dtpu_sim.axi_master) and the word stream in, offered with s_valid
    high with probability valid_p each cycle."""

    def __init__(self, dut, seed, lat=(1, 1), stall=0.0, valid_p=1.0):
        super().__init__(dut, seed)
        self.lat = lat
        self.valid_p = valid_p
        # whole words (the store unit's partial words: test_cl_store)
        drive(dut, s_valid=0, s_data=0, s_strb=0xFF)
        self.mem = Mem(dut, "m_axi", dut.clk, dut.rst_n, SIZE, self.rng, lat=lat, stall=stall,
                       reads=False, writes=True)
        self.init = bytes(self.rng.getrandbits(8) for _ in range(SIZE))
        self.mem.ram.write(0, self.init)
        self.mon = Monitor(dut, "m_axi", dut.clk, MAX_BURST, MAX_OUT, write=True)
        self.sent = 0
        self.idle_early = []

    async def reset(self):
        await super().reset()
        cocotb.start_soon(self._watch_idle())

    async def _watch_idle(self):
        while True:
            await RisingEdge(self.dut.clk)
            if int(self.dut.idle.value) and self.mon.inflight:
                self.idle_early.append(self.mem.clock.now)

    async def produce(self, words):
        d = self.dut
        for w in words:
            while self.rng.random() >= self.valid_p:
                d.s_valid.value = 0
                await RisingEdge(d.clk)
            d.s_valid.value = 1
            d.s_data.value = w
            while True:
                await RisingEdge(d.clk)
                if int(d.s_ready.value):
                    break
            self.sent += 1
        d.s_valid.value = 0

    async def run(self, reqs, gap=3):
        """Issue the requests and their data; returns the expected memory bytes."""
        words = [self.rng.getrandbits(64) for _ in range(sum(n for _, n in reqs))]
        want = bytearray(self.init)
        k = 0
        for addr, n in reqs:
            for i in range(n):
                want[addr + 8 * i: addr + 8 * i + 8] = words[k].to_bytes(8, "little")
                k += 1
        cocotb.start_soon(self.issue(reqs, gap))
        cocotb.start_soon(self.produce(words))
        return want, len(words)

    async def wait_idle(self, n, limit=None):
        # generous for the stalls (and for small builds, one latency per MAX_OUT bursts); a
        # broken DUT fails fast
        limit = limit or 6 * n + 3000 + (n // (MAX_BURST * MAX_OUT) + 1) * 2 * self.lat[1]
        for _ in range(limit):
            await RisingEdge(self.dut.clk)
            if self.sent == n and int(self.dut.idle.value) and not int(self.dut.req_valid.value):
                return
        raise AssertionError(f"not idle after {limit} cycles ({self.sent} of {n} words taken)")

    def check_mem(self, want, skip=()):
        got = self.mem.ram.read(0, SIZE)
        for a in range(0, SIZE, 8):
            if any(r.hit(a, 8) for r in skip):
                continue
            assert got[a:a + 8] == want[a:a + 8], (
                f"{a:#x}: {got[a:a + 8].hex()} != {bytes(want[a:a + 8]).hex()}")


def disjoint_requests(rng, n, max_words=200):
    """n non-overlapping requests in random order, many starting just below a 4 KiB page."""
    reqs, used = [], []
    while len(reqs) < n:
        addr, words = random_request(rng, max_words)
        lo, hi = addr, addr + 8 * words
        if any(lo < h and l < hi for l, h in used):
            continue
        used.append((lo, hi))
        reqs.append((addr, words))
    return reqs


@cocotb.test()
async def test_random_requests(dut):
    tb = TB(dut, SEED, lat=(20, 80), stall=0.3, valid_p=0.8)
    dut.timeout.value = 400
    await tb.reset()
    reqs = disjoint_requests(tb.rng, N_REQ)
    reqs.append((SIZE - 8 * MAX_BURST * MAX_OUT * 2, MAX_BURST * MAX_OUT * 2))  # fills every slot
    want, n = await tb.run(reqs)
    await tb.wait_idle(n)
    tb.mon.check()
    tb.check_mem(want)
    got = [a for addr, k in tb.mon.bursts for a in range(addr, addr + 8 * k, 8)]
    assert got == [a for addr, k in reqs for a in range(addr, addr + 8 * k, 8)], "bursts"
    assert tb.mon.peak == MAX_OUT, f"at most {tb.mon.peak} bursts awaiting a response"
    assert tb.mon.inflight == 0, f"idle with {tb.mon.inflight} responses pending"
    assert not tb.idle_early, f"idle with responses pending at cycles {tb.idle_early[:3]}"
    assert tb.flags() == (0, 0, 0)
    dut._log.info("%d requests, %d words, %d bursts, peak %d", len(reqs), n, len(tb.mon.bursts),
                  tb.mon.peak)


@cocotb.test()
async def test_full_rate(dut):
    tb = TB(dut, SEED + 1)
    await tb.reset()
    t0 = tb.mem.clock.now
    want, n = await tb.run([(0x1000 - 64, 512)], gap=0)
    await tb.wait_idle(n)
    took = tb.mem.clock.now - t0
    tb.mon.check()
    tb.check_mem(want)
    if MAX_BURST * MAX_OUT >= 64:    # enough in flight to hide the response latency
        assert took < n + 60, f"{n} words took {took} cycles"


@cocotb.test()
async def test_error_responses(dut):
    tb = TB(dut, SEED + 2, lat=(2, 20), stall=0.2, valid_p=0.7)
    regions = [Region(0x2000, 0x2040, SLVERR), Region(0x5008, 0x5010, DECERR)]
    tb.mem.regions = regions
    await tb.reset()
    want, n = await tb.run([(0x100, 20), (0x1FC0, 40), (0x4F00, 100), (0x800, 3)])
    await tb.wait_idle(n)
    tb.mon.check()
    tb.check_mem(want, skip=regions)
    assert tb.flags() == (1, 1, 0), tb.flags()
    await tb.clear()
    await RisingEdge(dut.clk)
    assert tb.flags() == (0, 0, 0)
    tb.sent = 0
    _, n = await tb.run([(0x5000, 4)])
    await tb.wait_idle(n)
    assert tb.flags() == (0, 1, 0), tb.flags()


@cocotb.test()
async def test_timeout_fires(dut):
    """A burst whose response never comes: err_timeout TIMEOUT cycles after the last progress,
    the producer's words all taken, `idle`, and no request accepted until `clear`."""
    tb = TB(dut, SEED + 3, lat=(2, 10), stall=0.2, valid_p=0.9)
    tb.mem.regions = [Region(0x3000, 0x3008, None)]
    T = 64
    dut.timeout.value = T
    await tb.reset()
    n = 300
    _, _ = await tb.run([(0x2F00, n), (0x100, 30)], gap=0)
    await tb.expect_timeout(T, ("aw", "w", "b"), 4000)
    for _ in range(3000):
        await RisingEdge(dut.clk)
        if tb.sent >= n and int(dut.idle.value):
            break
    await ClockCycles(dut.clk, 20)
    assert tb.sent == n and int(dut.idle.value) == 1, f"{tb.sent} of {n} words taken"
    assert int(dut.req_ready.value) == 0 and tb.flags() == (0, 0, 1)
    await tb.clear_after_timeout(0x100)


@cocotb.test()
async def test_timeout_zero_never(dut):
    tb = TB(dut, SEED + 4)
    tb.mem.regions = [Region(0x3000, 0x3008, None)]
    await tb.reset()
    await tb.run([(0x3000, 4)])
    await ClockCycles(dut.clk, 500)
    assert tb.flags() == (0, 0, 0) and int(dut.idle.value) == 0 and tb.sent == 4
