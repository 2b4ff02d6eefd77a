"""cocotb: dtpu_axi_rd against an AxiRam with random latency and backpressure: words exact and
in order, bursts within the 4 KiB rule and MAX_BURST, at most MAX_OUTSTANDING in flight (and
that many reached), SLVERR/DECERR per word and as flags, timeouts that end every request."""
import os

import cocotb
from cocotb.triggers import ClockCycles, RisingEdge

from dtpu_sim.axi_master import MAX_BURST, MAX_OUT, SIZE, MasterTB, random_request
from dtpu_sim.axi_mem import DECERR, OKAY, SLVERR, Mem, Monitor, Region

SEED = int(os.environ.get("DTPU_SEED", "2024"))
N_REQ = int(os.environ.get("DTPU_CASES", "40"))


class TB(MasterTB):
    """The request side (dtpu_sim.axi_master) and the word stream out, taken with m_ready high
    with probability ready_p each cycle."""

    def __init__(self, dut, seed, lat=(1, 1), stall=0.0, ready_p=1.0):
        super().__init__(dut, seed)
        self.ready_p = ready_p
        dut.m_ready.value = 0
        self.mem = Mem(dut, "m_axi", dut.clk, dut.rst_n, SIZE, self.rng, lat=lat, stall=stall)
        self.mem.ram.write(0, bytes(self.rng.getrandbits(8) for _ in range(SIZE)))
        self.mon = Monitor(dut, "m_axi", dut.clk, MAX_BURST, MAX_OUT)
        self.got = []          # (data, resp, timeout, last)

    async def reset(self):
        await super().reset()
        cocotb.start_soon(self._consume())

    def word(self, addr):
        return int.from_bytes(self.mem.ram.read(addr, 8), "little")

    async def _consume(self):
        d = self.dut
        while True:
            d.m_ready.value = int(self.rng.random() < self.ready_p)
            await RisingEdge(d.clk)
            if int(d.m_valid.value) and int(d.m_ready.value):
                self.got.append((int(d.m_data.value), int(d.m_resp.value),
                                 int(d.m_timeout.value), int(d.m_last.value)))

    async def wait_words(self, n, limit=None):
        limit = limit or 6 * n + 3000       # generous for the stalls; a broken DUT fails fast
        for _ in range(limit):
            if len(self.got) >= n:
                return
            await RisingEdge(self.dut.clk)
        raise AssertionError(f"{len(self.got)} of {n} words after {limit} cycles")

    async def wait_idle(self, limit=2000):
        for _ in range(limit):
            await RisingEdge(self.dut.clk)
            if int(self.dut.idle.value):
                return
        raise AssertionError("not idle")


def random_requests(rng, n, max_words=200):
    return [random_request(rng, max_words) for _ in range(n)]


def check_words(tb, reqs, resp_of=lambda a: OKAY):
    k = 0
    for addr, n in reqs:
        for i in range(n):
            a = addr + 8 * i
            data, resp, tmo, last = tb.got[k]
            want = resp_of(a)
            assert tmo == 0, f"word {k} ({a:#x}) timed out"
            assert resp == want, f"word {k} ({a:#x}): RRESP {resp}, want {want}"
            if want == OKAY:
                assert data == tb.word(a), f"word {k} ({a:#x}): {data:#x} != {tb.word(a):#x}"
            assert last == (i == n - 1), f"word {k} ({a:#x}): m_last {last}"
            k += 1
    assert k == len(tb.got), f"{len(tb.got)} words for {k} requested"


def check_bursts(tb, reqs):
    """The bursts cover the requests exactly, in order."""
    want = [a for addr, n in reqs for a in range(addr, addr + 8 * n, 8)]
    got = [a for addr, n in tb.mon.bursts for a in range(addr, addr + 8 * n, 8)]
    assert got == want, "bursts do not cover the requests in order"


@cocotb.test()
async def test_random_requests(dut):
    """Random addresses and lengths, random latency and stalls: exact words; with long requests
    and a latency of tens of cycles the master keeps MAX_OUTSTANDING bursts in flight."""
    tb = TB(dut, SEED, lat=(8, 60), stall=0.3, ready_p=0.8)
    dut.timeout.value = 400
    await tb.reset()
    reqs = random_requests(tb.rng, N_REQ)
    reqs.append((0, 8 * MAX_BURST * MAX_OUT))    # long enough to fill every slot
    cocotb.start_soon(tb.issue(reqs))
    await tb.wait_words(sum(n for _, n in reqs))
    await tb.wait_idle()
    tb.mon.check()
    check_words(tb, reqs)
    check_bursts(tb, reqs)
    assert tb.mon.peak == MAX_OUT, f"at most {tb.mon.peak} bursts in flight, want {MAX_OUT}"
    assert tb.flags() == (0, 0, 0)
    dut._log.info("%d requests, %d words, %d bursts, peak %d in flight", len(reqs), len(tb.got),
                  len(tb.mon.bursts), tb.mon.peak)


@cocotb.test()
async def test_full_rate(dut):
    """No stalls, latency 1: one word per cycle once the stream runs (bursts back to back)."""
    tb = TB(dut, SEED + 1, lat=(1, 1), stall=0.0, ready_p=1.0)
    await tb.reset()
    n = 512
    reqs = [(0x1000 - 64, n)]
    t0 = tb.mem.clock.now
    cocotb.start_soon(tb.issue(reqs, gap=0))
    await tb.wait_words(n)
    took = tb.mem.clock.now - t0
    tb.mon.check()
    check_words(tb, reqs)
    assert took < n + 40, f"{n} words took {took} cycles"


@cocotb.test()
async def test_error_responses(dut):
    """SLVERR and DECERR regions: those words carry the response, the flags are set, every
    request still completes; `clear` clears the flags."""
    tb = TB(dut, SEED + 2, lat=(2, 20), stall=0.2, ready_p=0.7)
    tb.mem.regions = [Region(0x2000, 0x2040, SLVERR), Region(0x5008, 0x5010, DECERR)]

    def resp_of(a):
        r = tb.mem.region_of(a, 8)
        return OKAY if r is None else r.resp

    await tb.reset()
    reqs = [(0x100, 20), (0x1FC0, 40), (0x4F00, 100), (0x800, 3)]
    cocotb.start_soon(tb.issue(reqs))
    await tb.wait_words(sum(n for _, n in reqs))
    await tb.wait_idle()
    tb.mon.check()
    check_words(tb, reqs, resp_of)
    assert tb.flags() == (1, 1, 0), tb.flags()
    await tb.clear()
    await RisingEdge(dut.clk)
    assert tb.flags() == (0, 0, 0), tb.flags()
    # a SLVERR-only request sets only SLVERR
    tb.got.clear()
    cocotb.start_soon(tb.issue([(0x2010, 2)]))
    await tb.wait_words(2)
    await tb.wait_idle()
    assert tb.flags() == (1, 0, 0), tb.flags()


@cocotb.test()
async def test_timeout_fires(dut):
    """A region that never answers: err_timeout TIMEOUT cycles after the last progress, every
    word of the accepted requests delivered (the missing ones with m_timeout), no new request
    accepted until `clear` on an idle master."""
    tb = TB(dut, SEED + 3, lat=(2, 10), stall=0.2, ready_p=0.9)
    tb.mem.regions = [Region(0x3000, 0x3008, None)]
    T = 64
    dut.timeout.value = T
    await tb.reset()
    n = 300                         # more bursts than MAX_OUTSTANDING: still splitting at the hang
    cocotb.start_soon(tb.issue([(0x2F00, n), (0x100, 30)], gap=0))
    await tb.expect_timeout(T, ("r", "ar"), 3000)
    await tb.wait_words(n)
    await ClockCycles(dut.clk, 50)
    assert len(tb.got) == n, f"{len(tb.got)} words (the second request must not be accepted)"
    real = [g for g in tb.got if not g[2]]
    assert 0 < len(real) < n
    assert all(g[2] for g in tb.got[len(real):]), "timed-out words are the tail"
    for i, (data, resp, _, _) in enumerate(real):
        assert resp == OKAY and data == tb.word(0x2F00 + 8 * i)
    assert [g[3] for g in tb.got] == [0] * (n - 1) + [1]
    assert int(dut.idle.value) == 1 and int(dut.req_ready.value) == 0
    assert tb.flags() == (0, 0, 1)
    await tb.clear_after_timeout(0x100)


@cocotb.test()
async def test_timeout_zero_never(dut):
    """TIMEOUT 0: a hung read waits forever (no flag), as the register's reset value says."""
    tb = TB(dut, SEED + 4)
    tb.mem.regions = [Region(0x3000, 0x3008, None)]
    dut.timeout.value = 0
    await tb.reset()
    await tb.issue([(0x3000, 4)])
    await ClockCycles(dut.clk, 500)
    assert tb.flags() == (0, 0, 0) and len(tb.got) == 0 and int(dut.idle.value) == 0
