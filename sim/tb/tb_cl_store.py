"""cocotb: the contract 2.0 store unit (hw/rtl/dtpu_cl_store.v) with dtpu_axi_wr and dtpu_axi_rd
(sim/tb/tb_cl_store_top.v) on one AxiRam (sim/dtpu_sim/axi_mem.py: random latency, stalls on
every channel, byte strobes honoured, error regions) against the golden model's scatter.

Each test runs a sequence of RUNs back to back (the next `start` as soon as the unit is not busy,
earlier writes still draining): random RES ITEMS fields (LANES 1/2/4/8, ESIZE 8/LANES, any DST
byte address) and ACC chains (LANES 2 and 1, FIRST then adding RUNs on the same sums, sometimes
on bytes an earlier ITEMS RUN wrote), random result words fed with random gaps. Expected: a
dtpu.hw.ddr.Ddr over the same initial bytes with Executor.scatter run on the same words for
each RUN in order; after `idle` the whole memory is compared byte for byte.

Environment: DTPU_SEED, DTPU_CASES (RUNs per sequence), DTPU_MAX_WORDS (result words per RUN)."""
import logging
import os
import random

import cocotb
import numpy as np
from cocotb.clock import Clock
from cocotb.triggers import ClockCycles, RisingEdge

from dtpu.hw.ddr import Ddr
from dtpu.hw.executor import Executor
from dtpu.hw.listcompiler import NodeIn, compile_program
from dtpu.hw.listformat import Format
from dtpu.tflite_model import partitions_of
from dtpu_sim.axi_mem import DECERR, SLVERR, Mem, Monitor, Region

log = logging.getLogger("tb_cl_store")

FMT = Format()
MODES = FMT.res_modes
SEED = int(os.environ.get("DTPU_SEED", "1"))
CASES = int(os.environ.get("DTPU_CASES", "40"))
MAX_WORDS = int(os.environ.get("DTPU_MAX_WORDS", "400"))
ZOO_NET = os.environ.get("DTPU_ZOO_NET", "mobilenet_like__int8")
MAX_BURST = int(os.environ.get("PARAM_MAX_BURST", "16"))
MAX_OUT = int(os.environ.get("PARAM_MAX_OUTSTANDING", "8"))
SIZE = 1 << 15


def ceil_div(a, b):
    return -(-a // b)


def nwords(r0, r1, r2):
    return r1["OUTER"] * r1["PIX"] * r1["INNER"] * ceil_div(r2["GW"], r0["LANES"])


def rand_fields(rng, acc=False, lanes=None):
    """Random RES0..RES2 (as tb_res_agu) whose destination fits the memory."""
    while True:
        L = lanes or (rng.choice([1, 2]) if acc else rng.choice([1, 2, 4, 8]))
        es = 8 if acc else 8 // L
        pix = rng.choice([1, rng.randint(1, 8), rng.randint(1, 40)])
        outer, inner = rng.randint(1, 3), rng.randint(1, 4)
        gw = rng.choice([rng.randint(1, 12), rng.randint(1, 3), L, 2 * L])
        ch0 = rng.choice([0, rng.randint(0, 6)])
        total = outer * inner * gw
        ch1 = ch0 + total - rng.choice([0, 0, rng.randint(0, total - 1)])
        dstc = ch1 + rng.choice([0, 0, rng.randint(0, 5)])
        span = pix * dstc * es
        if span + 16 > SIZE:
            continue
        dst = rng.randrange(0, SIZE - span)
        if acc:
            dst &= ~7
        elif rng.random() < 0.3:
            dst -= dst % es
        r0 = dict(MODE=MODES["ACC" if acc else "ITEMS"], LANES=L, ESIZE=es, SIGNED=0, DST=dst)
        r1 = dict(PIX=pix, OUTER=outer, INNER=inner)
        r2 = dict(GW=gw, CH0=ch0, CH1=ch1, DSTC=dstc)
        if nwords(r0, r1, r2) <= MAX_WORDS:
            return r0, r1, r2


def rand_words(rng, n, r0):
    if r0["MODE"] == MODES["ACC"]:
        # RAW sums: mostly small, some extreme (the sign extension and the int64 wrap)
        bits = 64 // r0["LANES"]
        lanes = []
        for _ in range(n * r0["LANES"]):
            v = rng.choice([rng.randint(-1000, 1000), rng.randint(-(1 << (bits - 1)), (1 << (bits - 1)) - 1),
                            -(1 << (bits - 1)), (1 << (bits - 1)) - 1])
            lanes.append(v & ((1 << bits) - 1))
        return [sum(lanes[k * r0["LANES"] + j] << (bits * j) for j in range(r0["LANES"]))
                for k in range(n)]
    return [rng.getrandbits(64) for _ in range(n)]


def rand_runs(rng, count, lanes=None):
    """A sequence of RUNs: (fields, first, words); ACC chains on one destination."""
    runs = []
    while len(runs) < count:
        if rng.random() < 0.45:
            f = rand_fields(rng, acc=True, lanes=lanes if lanes in (1, 2) else None)
            for k in range(rng.randint(1, 3)):
                first = k == 0 and rng.random() < 0.7
                runs.append((f, first, rand_words(rng, nwords(*f), f[0])))
        else:
            f = rand_fields(rng, lanes=lanes)
            runs.append((f, False, rand_words(rng, nwords(*f), f[0])))
    return runs[:count]


class TB:
    def __init__(self, dut, seed, lat=(5, 60), stall=0.25, valid_p=0.8, size=SIZE, image=None):
        self.dut = dut
        self.size = size
        self.rng = random.Random(seed)
        self.lat = lat
        self.valid_p = valid_p
        cocotb.start_soon(Clock(dut.clk, 10, unit="ns").start())
        dut.rst_n.value = 0
        dut.clear.value = 0
        dut.timeout.value = 0
        dut.start.value = 0
        dut.s_valid.value = 0
        dut.s_data.value = 0
        dut.s_last.value = 0
        dut.cfg_first.value = 0
        self.mem = Mem(dut, "m_axi", dut.clk, dut.rst_n, size, self.rng, lat=lat, stall=stall,
                       reads=True, writes=True, strobes=True)
        if image is None:
            image = bytes(self.rng.getrandbits(8) for _ in range(size))
        self.init = bytes(image) + bytes(size - len(image))
        self.mem.ram.write(0, self.init)
        self.model = Ddr(0, size, np.frombuffer(self.init, np.uint8))
        self.ex = Executor.__new__(Executor)    # scatter uses only the format
        self.ex.fmt = FMT
        self.wmon = Monitor(dut, "m_axi", dut.clk, MAX_BURST, MAX_OUT, write=True)
        self.rmon = Monitor(dut, "m_axi", dut.clk, MAX_BURST, MAX_OUT, write=False)
        self.idle_early = []

    async def reset(self):
        await ClockCycles(self.dut.clk, 3)
        self.dut.rst_n.value = 1
        await ClockCycles(self.dut.clk, 2)
        cocotb.start_soon(self._watch_idle())

    async def _watch_idle(self):
        while True:
            await RisingEdge(self.dut.clk)
            if int(self.dut.idle.value) and (self.wmon.inflight or self.rmon.inflight):
                self.idle_early.append(self.mem.clock.now)

    def set_fields(self, f, first):
        r0, r1, r2 = f
        d = self.dut
        d.cfg_mode.value = r0["MODE"]
        d.cfg_lanes.value = r0["LANES"]
        d.cfg_esize.value = r0["ESIZE"]
        d.cfg_dst.value = r0["DST"]
        d.cfg_pix.value = r1["PIX"]
        d.cfg_outer.value = r1["OUTER"]
        d.cfg_inner.value = r1["INNER"]
        for k in ("GW", "CH0", "CH1", "DSTC"):
            getattr(d, f"cfg_{k.lower()}").value = r2[k]
        d.cfg_first.value = int(first)

    async def wait_not_busy(self, limit=20000):
        for _ in range(limit):
            if not int(self.dut.busy.value):
                return
            await RisingEdge(self.dut.clk)
        raise AssertionError(f"busy after {limit} cycles")

    async def run(self, f, first, words, valid_p=None):
        """One RUN: start, then its words with random gaps; returns the cycles from start to the
        last word taken."""
        d = self.dut
        valid_p = self.valid_p if valid_p is None else valid_p
        await self.wait_not_busy()
        self.set_fields(f, first)
        d.start.value = 1
        await RisingEdge(d.clk)
        d.start.value = 0
        t0 = self.mem.clock.now
        limit = 2000 + 40 * len(words) + 4 * self.lat[1] * (len(words) // 8 + 2)
        for k, w in enumerate(words):
            while self.rng.random() >= valid_p:
                d.s_valid.value = 0
                await RisingEdge(d.clk)
            d.s_valid.value = 1
            d.s_data.value = w
            d.s_last.value = int(k == len(words) - 1)
            while True:
                await RisingEdge(d.clk)
                if int(d.s_ready.value):
                    break
                assert self.mem.clock.now - t0 < limit, f"word {k} of {len(words)} not taken"
        d.s_valid.value = 0
        d.s_last.value = 0
        return self.mem.clock.now - t0

    def scatter(self, f, first, words):
        r0, r1, r2 = f
        self.ex.scatter(self.model, r0, r1, r2, np.array(words, dtype=np.uint64), first)

    async def wait_idle(self, limit=30000):
        for _ in range(limit):
            await RisingEdge(self.dut.clk)
            if int(self.dut.idle.value) and not int(self.dut.busy.value):
                return
        raise AssertionError(f"not idle after {limit} cycles")

    def flags(self):
        d = self.dut
        return tuple(int(getattr(d, f"err_{k}").value)
                     for k in ("slverr", "decerr", "timeout", "field", "len"))

    def check_mem(self, skip=()):
        got = np.frombuffer(self.mem.ram.read(0, self.size), np.uint8)
        want = self.model.mem
        diff = np.flatnonzero(got != want)
        diff = [a for a in diff if not any(lo <= a < hi for lo, hi in skip)]
        if diff:
            a = int(diff[0])
            raise AssertionError(f"{len(diff)} bytes differ, first at {a:#x}: got "
                                 f"{bytes(got[a:a + 16]).hex()} expected {bytes(want[a:a + 16]).hex()}")


def describe(f, first):
    r0, r1, r2 = f
    mode = "ACC" if r0["MODE"] == MODES["ACC"] else "ITEMS"
    return (f"{mode}{'(FIRST)' if first else ''} L{r0['LANES']} DST={r0['DST']:#x} PIX={r1['PIX']} "
            f"OUTER={r1['OUTER']} INNER={r1['INNER']} GW={r2['GW']} CH0={r2['CH0']} CH1={r2['CH1']} "
            f"DSTC={r2['DSTC']}")


async def sequence(dut, seed, runs, **kw):
    tb = TB(dut, seed, **kw)
    await tb.reset()
    for f, first, words in runs:
        log.debug("%s", describe(f, first))
        await tb.run(f, first, words)
        tb.scatter(f, first, words)
    await tb.wait_idle()
    tb.wmon.check()
    tb.rmon.check()
    try:
        tb.check_mem()
    except AssertionError:
        for f, first, _ in runs:
            log.error("RUN %s", describe(f, first))
        raise
    assert tb.flags() == (0, 0, 0, 0, 0), tb.flags()
    assert not tb.idle_early, f"idle with bursts in flight at {tb.idle_early[:3]}"
    return tb


@cocotb.test()
async def test_items_acc_random(dut):
    """Random ITEMS and ACC RUNs back to back, memory byte-exact against the golden model."""
    rng = random.Random(SEED * 7919 + 1)
    runs = rand_runs(rng, CASES)
    tb = await sequence(dut, SEED, runs)
    dut._log.info("%d RUNs, %d result words, %d write bursts, %d read bursts: memory exact",
                  len(runs), sum(len(w) for _, _, w in runs), len(tb.wmon.bursts),
                  len(tb.rmon.bursts))


@cocotb.test()
async def test_each_lanes(dut):
    """Every LANES of ITEMS (ESIZE 8/4/2/1) and of ACC (LANES 2 and 1; 4 and 8), FIRST and
    adding."""
    rng = random.Random(SEED * 7919 + 2)
    runs = []
    for L in (1, 2, 4, 8):
        f = rand_fields(rng, lanes=L)
        runs.append((f, False, rand_words(rng, nwords(*f), f[0])))
    for L in (2, 1, 4, 8):        # ACC of int16 / int8 RAW lanes: the model takes them too
        f = rand_fields(rng, acc=True, lanes=L)
        for first in (True, False, False):
            runs.append((f, first, rand_words(rng, nwords(*f), f[0])))
    await sequence(dut, SEED + 1, runs, lat=(1, 30), stall=0.4, valid_p=0.5)


@cocotb.test()
async def test_rate(dut):
    """Without memory stalls: ITEMS takes a result word per cycle (int8 items of 8 channels at an
    odd byte address, 16 per pixel); ACC LANES 2 one lane per cycle (a word every 2 cycles)."""
    tb = TB(dut, SEED + 2, lat=(2, 2), stall=0.0, valid_p=1.0)
    await tb.reset()
    r0 = dict(MODE=MODES["ITEMS"], LANES=8, ESIZE=1, SIGNED=0, DST=0x103)
    f = (r0, dict(PIX=8, OUTER=1, INNER=16), dict(GW=8, CH0=0, CH1=128, DSTC=128))
    words = rand_words(tb.rng, nwords(*f), r0)
    took = await tb.run(f, False, words)
    tb.scatter(f, False, words)
    dut._log.info("ITEMS: %d words in %d cycles", len(words), took)
    assert took <= len(words) + 8, f"ITEMS: {len(words)} words took {took} cycles"
    # scattered small items (3 bytes of 16 per pixel): the queue joins them into one burst with
    # a strobe-less word between each two (MAX_GAP), two W beats an item; 8 unaligned bytes of
    # 20: two partial words an item plus a gap word every other item
    for gw, dstc, bound in ((3, 16, 2.0), (8, 20, 2.5)):
        await tb.wait_idle()
        r0 = dict(MODE=MODES["ITEMS"], LANES=8, ESIZE=1, SIGNED=0, DST=0x1805)
        f = (r0, dict(PIX=60, OUTER=1, INNER=1), dict(GW=gw, CH0=0, CH1=gw, DSTC=dstc))
        words = rand_words(tb.rng, nwords(*f), r0)
        took = await tb.run(f, False, words)
        tb.scatter(f, False, words)
        dut._log.info("ITEMS of %d bytes every %d: %d words in %d cycles", gw, dstc, len(words), took)
        assert took <= bound * len(words) + 8, f"{len(words)} words took {took} cycles"
    r0 = dict(MODE=MODES["ACC"], LANES=2, ESIZE=8, SIGNED=1, DST=0x2000)
    f = (r0, dict(PIX=4, OUTER=1, INNER=4), dict(GW=16, CH0=0, CH1=64, DSTC=64))
    for first in (True, False):
        words = rand_words(tb.rng, nwords(*f), r0)
        await tb.wait_idle()
        took = await tb.run(f, first, words)
        tb.scatter(f, first, words)
        lanes = len(words) * 2
        dut._log.info("ACC%s: %d lanes in %d cycles", " FIRST" if first else "", lanes, took)
        assert took <= lanes + 40, f"ACC: {lanes} lanes took {took} cycles"
    await tb.wait_idle()
    tb.check_mem()


@cocotb.test()
async def test_rate_latency(dut):
    """At the memory model's latency (85 cycles a burst, no stalls): ACC small items (4 sums) of
    a pixel merged into 16-word reads keep about one lane per cycle after the first read; ITEMS
    runs of words one word per cycle."""
    tb = TB(dut, SEED + 6, lat=(85, 85), stall=0.0, valid_p=1.0)
    await tb.reset()
    r0 = dict(MODE=MODES["ACC"], LANES=2, ESIZE=8, SIGNED=1, DST=0x2000)
    f = (r0, dict(PIX=16, OUTER=1, INNER=8), dict(GW=4, CH0=0, CH1=32, DSTC=32))
    for first in (True, False):
        words = rand_words(tb.rng, nwords(*f), r0)
        took = await tb.run(f, first, words)
        tb.scatter(f, first, words)
        lanes = len(words) * 2
        dut._log.info("ACC%s at latency 85: %d lanes in %d cycles, %d read bursts so far",
                      " FIRST" if first else "", lanes, took, len(tb.rmon.bursts))
        # the reads wait for the FIRST RUN's last write response, then one read latency
        assert took <= lanes + (0 if first else 4 * 85) + 20, f"{lanes} lanes took {took} cycles"
    # ITEMS at that latency: a pixel's items in one run of words keep the rate (16-word bursts,
    # 8 in flight); one short item per pixel is one burst each, 8 per write latency (logged)
    for gw, dstc, bound in ((128, 128, 1.0), (3, 16, None)):
        await tb.wait_idle()
        r0 = dict(MODE=MODES["ITEMS"], LANES=8, ESIZE=1, SIGNED=0, DST=0x5003)
        f = (r0, dict(PIX=300 // ceil_div(gw, 8), OUTER=1, INNER=1),
             dict(GW=gw, CH0=0, CH1=gw, DSTC=dstc))
        words = rand_words(tb.rng, nwords(*f), r0)
        t0 = tb.mem.clock.now
        took = await tb.run(f, False, words)
        tb.scatter(f, False, words)
        await tb.wait_idle()
        dut._log.info("ITEMS of %d bytes every %d at latency 85: %d words in %d cycles, "
                      "idle after %d, %d write bursts so far", gw, dstc, len(words), took,
                      tb.mem.clock.now - t0, len(tb.wmon.bursts))
        if bound:
            assert took <= bound * len(words) + 10, f"{len(words)} words took {took} cycles"
    await tb.wait_idle()
    tb.check_mem()


@cocotb.test()
async def test_bresp_error(dut):
    """A RUN whose destination has a SLVERR region: err_slverr, every word taken, `idle`, nothing
    outside the RUN's destination touched; after `clear` the next RUN is exact."""
    tb = TB(dut, SEED + 3, lat=(2, 40), stall=0.2)
    r0 = dict(MODE=MODES["ITEMS"], LANES=4, ESIZE=2, SIGNED=0, DST=0x1000)
    f = (r0, dict(PIX=16, OUTER=1, INNER=3), dict(GW=8, CH0=0, CH1=24, DSTC=24))
    tb.mem.regions = [Region(0x1200, 0x1240, SLVERR)]
    await tb.reset()
    words = rand_words(tb.rng, nwords(*f), r0)
    await tb.run(f, False, words)
    await tb.wait_idle()
    assert tb.flags()[:3] == (1, 0, 0), tb.flags()
    tb.check_mem(skip=[(0x1000, 0x1000 + 16 * 24 * 2)])
    # an ACC RUN reading sums in the error region: a read error, no hang
    ra = dict(MODE=MODES["ACC"], LANES=2, ESIZE=8, SIGNED=1, DST=0x1200)
    fa = (ra, dict(PIX=2, OUTER=1, INNER=2), dict(GW=4, CH0=0, CH1=8, DSTC=8))
    await tb.run(fa, False, rand_words(tb.rng, nwords(*fa), ra))
    await tb.wait_idle()
    tb.mem.regions = []
    tb.model.mem[:] = np.frombuffer(tb.mem.ram.read(0, tb.size), np.uint8)
    dut.clear.value = 1
    await RisingEdge(dut.clk)
    dut.clear.value = 0
    await ClockCycles(dut.clk, 2)
    assert tb.flags() == (0, 0, 0, 0, 0), tb.flags()
    words = rand_words(tb.rng, nwords(*f), r0)
    await tb.run(f, False, words)
    tb.scatter(f, False, words)
    await tb.wait_idle()
    tb.check_mem()
    assert tb.flags() == (0, 0, 0, 0, 0), tb.flags()


@cocotb.test()
async def test_bad_fields_and_length(dut):
    """err_field on fields the unit refuses (nothing written); err_len when the stream ends before
    the walk, and when it runs on (drained to s_last); no hang, `clear` recovers."""
    tb = TB(dut, SEED + 4, lat=(2, 20), stall=0.2)
    await tb.reset()
    rng = tb.rng
    f = rand_fields(rng, lanes=4)
    r0, r1, r2 = f
    for bad in ((dict(r0, MODE=MODES["NONE"]), r1, r2), (dict(r0, LANES=3), r1, r2),
                (dict(r0, ESIZE=4), r1, r2), (r0, dict(r1, PIX=0), r2),
                (dict(r0, MODE=MODES["ACC"], ESIZE=8, DST=r0["DST"] | 4), r1, r2)):
        tb.set_fields(bad, False)
        dut.start.value = 1
        await RisingEdge(dut.clk)
        dut.start.value = 0
        await ClockCycles(dut.clk, 3)
        assert tb.flags()[3] == 1 and not int(dut.busy.value), (bad, tb.flags())
        dut.clear.value = 1
        await RisingEdge(dut.clk)
        dut.clear.value = 0
    n = nwords(*f)
    if n > 1:
        await tb.run(f, False, rand_words(rng, n - 1, r0))      # ends early
        await tb.wait_idle()
        assert tb.flags()[4] == 1, tb.flags()
    await tb.run(f, False, rand_words(rng, n + 3, r0))          # runs on
    await tb.wait_idle()
    assert tb.flags()[4] == 1, tb.flags()
    dut.clear.value = 1
    await RisingEdge(dut.clk)
    dut.clear.value = 0
    await ClockCycles(dut.clk, 2)
    tb.model.mem[:] = np.frombuffer(tb.mem.ram.read(0, tb.size), np.uint8)
    words = rand_words(rng, n, r0)
    await tb.run(f, False, words)
    tb.scatter(f, False, words)
    await tb.wait_idle()
    tb.check_mem()
    assert tb.flags() == (0, 0, 0, 0, 0), tb.flags()


async def timeout_case(dut, case):
    tb = TB(dut, SEED + 5, lat=(2, 20), stall=0.2)
    dut.timeout.value = 200
    if case == "write":
        r0 = dict(MODE=MODES["ITEMS"], LANES=2, ESIZE=4, SIGNED=0, DST=0x3000)
        f = (r0, dict(PIX=20, OUTER=1, INNER=2), dict(GW=6, CH0=0, CH1=12, DSTC=12))
        tb.mem.regions = [Region(0x3100, 0x3108, None)]
    else:
        r0 = dict(MODE=MODES["ACC"], LANES=2, ESIZE=8, SIGNED=1, DST=0x4000)
        f = (r0, dict(PIX=6, OUTER=1, INNER=2), dict(GW=6, CH0=0, CH1=12, DSTC=12))
        tb.mem.regions = [Region(0x4100, 0x4108, None), Region(0x4200, 0x4208, DECERR)]
    await tb.reset()
    await tb.run(f, False, rand_words(tb.rng, nwords(*f), r0))
    await tb.wait_idle()
    assert tb.flags()[2] == 1, (case, tb.flags())
    # the next RUN is taken and drained (the list has failed: the unit stays stopped until clear)
    await tb.run(f, False, rand_words(tb.rng, nwords(*f), r0))
    await tb.wait_idle()


@cocotb.test()
async def test_write_timeout(dut):
    """A write whose response never comes: err_timeout from the write master, every result
    word taken, `idle`."""
    await timeout_case(dut, "write")


@cocotb.test()
async def test_read_timeout(dut):
    """An ACC read that never returns (and one DECERR): err_timeout from the read master, every
    result word taken, `idle`."""
    await timeout_case(dut, "read")


# -- RUNs of compiled command lists: the golden model's own scatters, recorded


def recorded_scatters(prog, cfg, x):
    """Run `prog`'s first partition on input `x` through Executor (register protocol) and return
    the DDR image it started from and every scatter call (fields with DST made relative to the
    image, FIRST, the core's result words), in order."""
    from dtpu.hw.core import Core

    rec = []
    orig = Executor.scatter

    def hook(self, ddr, r0, r1, r2, words, first=False):
        rec.append(((dict(r0, DST=r0["DST"] - prog.base), dict(r1), dict(r2)), bool(first),
                    [int(w) for w in np.asarray(words, np.uint64)]))
        return orig(self, ddr, r0, r1, r2, words, first)

    part = prog.partitions[0]
    ddr = Ddr(prog.base, prog.size, prog.image)
    ddr.host_view(part.input.addr, part.input.nbytes)[:] = x.reshape(-1).view(np.uint8)
    image = bytes(ddr.mem)
    Executor.scatter = hook
    try:
        ex = Executor(Core(cfg), fast_path=False)
        ex.run(ddr, prog.prologue_addr)
        ex.run(ddr, part.list_addr)
    finally:
        Executor.scatter = orig
    return image, rec


async def compiled_case(dut, image, runs, seed):
    size = -(-len(image) // 4096) * 4096
    tb = await sequence(dut, seed, runs, size=size, image=image, lat=(20, 90), stall=0.2)
    modes = sorted({describe(f, first).split()[0] for f, first, _ in runs})
    dut._log.info("%d RUNs (%s), %d result words, %d write / %d read bursts: memory exact",
                  len(runs), ", ".join(modes), sum(len(w) for _, _, w in runs),
                  len(tb.wmon.bursts), len(tb.rmon.bursts))


@cocotb.test()
async def test_compiled_zoo(dut):
    """The RUNs of a zoo network's command list (DTPU_ZOO_NET, default mobilenet_like__int8)
    as compile_program emits them, with the words the core model produced."""
    from pathlib import Path

    from dtpu import reference
    from dtpu.hw.config import get_config

    zoo = Path(__file__).resolve().parents[2] / "tests" / "models" / "zoo"
    parts = partitions_of(zoo / f"{ZOO_NET}.tflite")
    prog = compile_program(parts)
    spec = parts[0][0].spec
    dt = reference.io_dtypes(spec)[0]
    info = np.iinfo(dt)
    x = np.random.default_rng(SEED).integers(info.min, info.max + 1, spec.input_shape).astype(dt)
    image, runs = recorded_scatters(prog, get_config(), x)
    await compiled_case(dut, image, runs, SEED + 7)


@cocotb.test()
async def test_compiled_split_k(dut):
    """A K-split convolution and classifier (tests/test_cmdlist.py's case): RES ACC RUNs, FIRST
    and adding, on 8-sum items of 48- and 10-channel sums, as compile_program emits them."""
    from dtpu.hw.config import HwConfig
    from dtpu.spec import ConvSpec, DataMode, OpKind, Padding, Quant

    rng = np.random.default_rng(11)

    def q(oc):
        return dict(input_q=Quant((0.02,), (int(rng.integers(-9, 9)),)),
                    filter_q=Quant(tuple(rng.uniform(0.004, 0.02, oc)), (0,) * oc),
                    output_q=Quant((0.3,), (int(rng.integers(-9, 9)),)))

    specs = [ConvSpec(OpKind.CONV_2D, DataMode.INT8, (1, 6, 6, 40), (48, 3, 3, 40),
                      padding=Padding.SAME, name="conv k-split", **q(48)),
             ConvSpec(OpKind.FULLY_CONNECTED, DataMode.INT8, (1, 1, 1, 1728), (10, 1, 1, 1728),
                      name="fc k-split", **q(10))]
    net = [(sp, rng.integers(-12, 12, sp.filter_shape).astype(np.int8),
            rng.integers(-300, 300, sp.out_channels).astype(np.int32)) for sp in specs]
    with HwConfig(LOG_WEIGHT_WORDS=11, LOG_PARAM_ENTRIES=7, LOG_ACT_WORDS=10) as cfg:
        prog = compile_program([[NodeIn(sp, w, b, i - 1) for i, (sp, w, b) in enumerate(net)]],
                                  cfg)
        x = rng.integers(-128, 128, specs[0].input_shape).astype(np.int8)
        image, runs = recorded_scatters(prog, cfg, x)
    assert sum(1 for f, _, _ in runs if f[0]["MODE"] == MODES["ACC"]) > 4
    await compiled_case(dut, image, runs, SEED + 8)
