"""cocotb: the load unit's activation stream (hw/rtl/dtpu_cl_load.v) on a dtpu_axi_rd
(sim/tb/tb_cl_load_top.v) against sim/dtpu_sim/axi_mem.py's memory (random latency and stalls,
error regions) under random m_ready backpressure.

Expected words come from the golden model itself: `Executor.gather` run on a `Ddr` over the
same memory image as the AXI RAM. Cases: random WINDOWS / CHANNELS descriptors (word and lane
mode, int8 / int16 and the narrower lane counts, pads, strides, dilations, K chunks, REP, NCHUNK,
N = 2), MODE NONE and malformed fields, a timed word-mode pointwise stream (fixed latency 85, no
stalls), timed lane-mode and short-run streams (figures logged and bounded), bus faults (SLVERR,
DECERR, a read that never answers) inside the tensor.

Environment: DTPU_SEED, DTPU_CASES (random descriptors), DTPU_LOAD_MAX_WORDS (cap of one
case's stream), DTPU_LOAD_BIG (1: larger shapes)."""
import logging
import os
import random

import cocotb
import numpy as np
from cocotb.clock import Clock
from cocotb.triggers import ClockCycles, RisingEdge

from dtpu.hw.ddr import Ddr, DdrFault
from dtpu.hw.executor import Executor
from dtpu.hw.listformat import Format
from dtpu_sim.axi_mem import DECERR, SLVERR, Mem, Monitor, Region, random_pauses

log = logging.getLogger("cocotb.tb_cl_load")

FMT = Format()
MODES = FMT.act_modes
LAT = int(FMT.mem["MEM_READ_LATENCY"])           # 85
SEED = int(os.environ.get("DTPU_SEED", "1"))
CASES = int(os.environ.get("DTPU_CASES", "24"))
MAX_WORDS = int(os.environ.get("DTPU_LOAD_MAX_WORDS", "400"))
BIG = os.environ.get("DTPU_LOAD_BIG", "0") not in ("", "0")
MAX_BURST = int(os.environ.get("PARAM_MAX_BURST", "16"))
MAX_OUT = int(os.environ.get("PARAM_MAX_OUTSTANDING", "8"))
SIZE = 1 << 16

# the activation AGU's setup (dtpu_act_agu, checked by sim/test_agu.py)
AGU_SETUP = {"WINDOWS": 22, "CHANNELS": 37}


def ceil_div(a, b):
    return -(-a // b)


# ------------------------------------------------------------------------------------------------
# descriptors


def rand_lanes(rng):
    return rng.choice([8, 8, 8, 4, 4, 4, 2, 1])


def rand_windows(rng, wordy):
    L = rand_lanes(rng)
    es = 8 // L
    n = rng.randint(1, 2)
    h, w = rng.randint(1, 12 if BIG else 8), rng.randint(1, 12 if BIG else 8)
    c = L * rng.randint(1, 4) if wordy else rng.randint(1, 20)
    kh, kw = rng.randint(1, 4), rng.randint(1, 4)
    sy, sx = rng.randint(1, 3), rng.randint(1, 3)
    dy, dx = rng.randint(1, 2), rng.randint(1, 2)
    if rng.random() < 0.3:          # pointwise / fully connected: long runs
        kh = kw = sy = sx = dy = dx = 1
    pt, pl = rng.randint(0, kh - 1), rng.randint(0, kw - 1)
    ey, ex = (kh - 1) * dy + 1, (kw - 1) * dx + 1
    pb = max(rng.randint(0, kh - 1), ey - h - pt)
    pr = max(rng.randint(0, kw - 1), ex - w - pl)
    oh = (h + pt + pb - ey) // sy + 1
    ow = (w + pl + pr - ex) // sx + 1
    k = kh * kw * c
    kp = ceil_div(k, L) * L + L * rng.choice([0, 0, 0, 1, 2])
    words = kp // L
    if rng.random() < 0.5:
        k0, k1 = 0, words
    else:
        k0 = rng.randrange(words)
        k1 = rng.randint(k0 + 1, words)
    nbytes = n * h * w * c * es
    src = rng.randrange(0, SIZE - nbytes - 64) // 8 * 8
    if not wordy and rng.random() < 0.5:
        src += es * rng.randrange(8 // es)
    a0 = dict(MODE=MODES["WINDOWS"], LANES=L, ESIZE=es, PAD=rng.getrandbits(16), SRC=src)
    a1 = dict(N=n, H=h, W=w, C=c)
    a2 = dict(KH=kh, KW=kw, SY=sy, SX=sx, DY=dy, DX=dx, PT=pt, PL=pl, OH=oh, OW=ow)
    a3 = dict(KP=kp, K0=k0, K1=k1, NCHUNK=0)
    a4 = dict(CV=0)
    return a0, a1, a2, a3, a4


def rand_channels(rng, wordy):
    L = rand_lanes(rng)
    es = 8 // L
    h, w = rng.randint(1, 12 if BIG else 8), rng.randint(1, 12 if BIG else 8)
    if wordy:
        c, rep = L * rng.randint(1, 4), 1
    else:
        c, rep = rng.randint(1, 20), rng.randint(1, 3)
    cv = c * rep
    nchunk = rng.randint(1, 3)
    chans = nchunk * L * rng.randint(1, max(1, min(3, ceil_div(cv, nchunk * L))))
    if wordy:
        ch0 = L * rng.randrange(ceil_div(cv, L))
    else:
        ch0 = rng.choice([0, rng.randrange(cv), L * rng.randrange(ceil_div(cv, L))])
    nbytes = h * w * c * es
    src = rng.randrange(0, SIZE - nbytes - 64) // 8 * 8
    if not wordy and rng.random() < 0.5:
        src += es * rng.randrange(8 // es)
    a0 = dict(MODE=MODES["CHANNELS"], LANES=L, ESIZE=es, PAD=rng.getrandbits(16), SRC=src)
    a1 = dict(N=1, H=h, W=w, C=c)
    a2 = dict(KH=0, KW=0, SY=0, SX=0, DY=0, DX=0, PT=0, PL=0, OH=0, OW=0)
    a3 = dict(KP=rep, K0=ch0, K1=chans, NCHUNK=nchunk)
    a4 = dict(CV=cv)
    return a0, a1, a2, a3, a4


def pointwise(L, h, w, c, src, kp=None, pad=0x5A):
    """A 1x1 window over the whole image (pointwise convolution)."""
    kp = kp or ceil_div(c, L) * L
    return (dict(MODE=MODES["WINDOWS"], LANES=L, ESIZE=8 // L, PAD=pad, SRC=src),
            dict(N=1, H=h, W=w, C=c),
            dict(KH=1, KW=1, SY=1, SX=1, DY=1, DX=1, PT=0, PL=0, OH=h, OW=w),
            dict(KP=kp, K0=0, K1=kp // L, NCHUNK=0), dict(CV=0))


def is_word_mode(case):
    a0, a1, _, a3, _ = case
    L, src, c = a0["LANES"], a0["SRC"], a1["C"]
    if src % 8 or c % L:
        return False
    if a0["MODE"] == MODES["WINDOWS"]:
        return True
    return a3["KP"] == 1 and a3["K0"] % L == 0 and a3["K1"] % L == 0


def golden(image, case, ddr_size=SIZE, slverr=(), hang=()):
    """Executor.gather on a Ddr over `image`: (words, None) or (None, fault kind)."""
    ex = Executor.__new__(Executor)    # gather uses only the format and its cache
    ex.fmt, ex.gather_cache = FMT, {}
    ddr = Ddr(0, ddr_size, image[:ddr_size])
    ddr.slverr = list(slverr)
    ddr.hang = list(hang)
    try:
        return [int(v) for v in ex.gather(ddr, *case)], None
    except DdrFault as e:
        return None, e.kind


# ------------------------------------------------------------------------------------------------
# the bench


class TB:
    def __init__(self, dut, seed, lat=(1, 1), stall=0.0):
        self.dut = dut
        self.rng = random.Random(seed)
        cocotb.start_soon(Clock(dut.clk, 10, unit="ns").start())
        dut.rst_n.value = 0
        dut.clear.value = 0
        dut.start.value = 0
        dut.m_ready.value = 0
        dut.timeout.value = 5000
        self.mem = Mem(dut, "m_axi", dut.clk, dut.rst_n, SIZE, self.rng, lat=lat, stall=stall)
        self.image = np.frombuffer(bytes(self.rng.getrandbits(8) for _ in range(SIZE)), np.uint8)
        self.mem.ram.write(0, self.image.tobytes())
        self.mon = Monitor(dut, "m_axi", dut.clk, MAX_BURST, MAX_OUT)

    async def reset(self):
        await ClockCycles(self.dut.clk, 3)
        self.dut.rst_n.value = 1
        await ClockCycles(self.dut.clk, 2)

    def set_stall(self, p):
        for ch in (self.mem.read_if.ar_channel, self.mem.read_if.r_channel):
            ch.set_pause_generator(random_pauses(self.rng, p))

    def set_fields(self, case):
        d = self.dut
        for a in case:
            for k, v in a.items():
                getattr(d, f"cfg_{k.lower()}").value = v

    expect_words = MAX_WORDS

    async def run(self, case, p_ready=1.0, limit=None):
        """Start the unit on `case`, take words with m_ready high with probability p_ready each
        cycle until `done`; returns (words, m_last positions, edge of each word's handshake
        counted from the edge that sampled start, flags)."""
        d = self.dut
        self.set_fields(case)
        while not int(d.start_ready.value):
            await RisingEdge(d.clk)
        d.start.value = 1
        await RisingEdge(d.clk)             # samples start: edge 0
        d.start.value = 0
        words, lasts, times = [], [], []
        self.t_ar = self.t_r = None          # edges of the first AR and R handshakes
        self.ars, self.rs = [], []           # edges of every AR and R handshake
        t = 0
        # a generous bound (short runs at 60 cycles latency with stalls: ~10 cycles a word;
        # lane mode LANES times that), so that a hang is seen quickly
        if limit is None:
            words_max = MAX_WORDS if case[0]["MODE"] == MODES["NONE"] else self.expect_words
            limit = 3000 + 20 * words_max * case[0]["LANES"] / max(p_ready, 0.05)
        while True:
            ready = self.rng.random() < p_ready
            d.m_ready.value = int(ready)
            await RisingEdge(d.clk)
            t += 1
            assert t < limit, f"{case}: no done after {t} cycles ({len(words)} words)"
            if int(d.m_axi_arvalid.value) and int(d.m_axi_arready.value):
                self.ars.append(t)
            if int(d.m_axi_rvalid.value) and int(d.m_axi_rready.value):
                self.rs.append(t)
            if ready and int(d.m_valid.value):
                words.append(int(d.m_data.value))
                times.append(t)
                if int(d.m_last.value):
                    lasts.append(len(words) - 1)
            if int(d.done.value):
                break
        d.m_ready.value = 0
        self.t_ar = self.ars[0] if self.ars else None
        self.t_r = self.rs[0] if self.rs else None
        flags = {k: int(getattr(d, f"err_{k}").value) for k in ("slverr", "decerr", "timeout", "field")}
        flags["word_mode"] = int(d.word_mode.value)
        await RisingEdge(d.clk)
        assert not int(d.busy.value) and not int(d.m_valid.value), f"{case}: busy after done"
        return words, lasts, times, flags


    async def run_chain(self, cases, p_ready=1.0, limit=200000):
        """Start the streams of `cases` one after the other, each as soon as `start_ready` takes
        it (look-ahead: while the stream before still runs), take words with m_ready high with
        probability p_ready until every stream has pulsed `done`; returns (words, m_last
        positions, word edges, start edges, (done edge, err_field) per stream), edges counted
        from the first start."""
        d = self.dut
        n = len(cases)
        self.set_fields(cases[0])
        d.start.value = 1
        i, t = 0, 0
        words, lasts, times, starts, dones = [], [], [], [], []
        while len(dones) < n:
            ready = self.rng.random() < p_ready
            d.m_ready.value = int(ready)
            await RisingEdge(d.clk)
            assert t < limit, f"chain: {len(dones)} of {n} streams done after {t} cycles"
            if i < n and int(d.start_ready.value):
                starts.append(t)
                i += 1
                if i < n:
                    self.set_fields(cases[i])
                else:
                    d.start.value = 0
            if ready and int(d.m_valid.value):
                words.append(int(d.m_data.value))
                times.append(t)
                if int(d.m_last.value):
                    lasts.append(len(words) - 1)
            if int(d.done.value):
                dones.append((t, int(d.err_field.value)))
                if any(int(getattr(d, f"err_{k}").value) for k in ("slverr", "decerr", "timeout")):
                    break               # a fault ends every stream in flight with one done
            t += 1
        d.m_ready.value = 0
        await RisingEdge(d.clk)
        assert not int(d.busy.value) and not int(d.m_valid.value), "busy after the last done"
        return words, lasts, times, starts, dones


def check_words(case, exp, words, lasts):
    if words != exp:
        first = next((i for i, (a, b) in enumerate(zip(words, exp)) if a != b), min(len(words), len(exp)))
        raise AssertionError(
            f"{case}: {len(words)} words, expected {len(exp)}; first difference at {first}: got "
            f"{[hex(v) for v in words[first:first + 4]]}, expected {[hex(v) for v in exp[first:first + 4]]}")
    assert lasts == ([len(exp) - 1] if exp else []), f"{case}: m_last at {lasts}"


def gen_cases(rng, count):
    out = []
    while len(out) < count:
        wordy = rng.random() < 0.5
        case = (rand_windows if rng.random() < 0.6 else rand_channels)(rng, wordy)
        a0 = case[0]
        # lane mode takes LANES cycles a word: cap its streams by elements
        cap = MAX_WORDS if is_word_mode(case) else max(16, MAX_WORDS // a0["LANES"] * 2)
        exp, fault = golden_cache(case)
        if fault is None and 0 < len(exp) <= cap:
            out.append((case, exp))
    return out


_IMAGE = None


def golden_cache(case):
    return golden(_IMAGE, case)


# ------------------------------------------------------------------------------------------------
# tests


@cocotb.test()
async def test_random(dut):
    """Random descriptors under random latency (1..60), stalls (0..30 %) and m_ready (20..100 %):
    every word and m_last equal to the golden model's gather; word mode exactly when predicted;
    the master idle after each stream (nothing owed)."""
    global _IMAGE
    tb = TB(dut, SEED * 100 + 1, lat=(1, 60), stall=0.1)
    await tb.reset()
    _IMAGE = tb.image
    rng = random.Random(SEED * 100 + 2)
    counts = {"word": 0, "lane": 0, "words": 0}
    for i, (case, exp) in enumerate(gen_cases(rng, CASES)):
        lo = rng.choice([1, 1, 20, 60])
        tb.mem.lat = (1, lo) if rng.random() < 0.5 else (lo, lo)
        tb.set_stall(rng.choice([0.0, 0.1, 0.3]))
        tb.expect_words = len(exp)
        words, lasts, _, flags = await tb.run(case, rng.choice([1.0, 0.8, 0.5, 0.2]))
        check_words(case, exp, words, lasts)
        assert flags["word_mode"] == int(is_word_mode(case)), f"{case}: word_mode {flags}"
        assert not any(flags[k] for k in ("slverr", "decerr", "timeout", "field")), f"{case}: {flags}"
        assert int(dut.rd_idle.value), f"{case}: the read master is not idle after done"
        counts["word" if flags["word_mode"] else "lane"] += 1
        counts["words"] += len(exp)
    tb.mon.check()
    log.info("random: %d descriptors (%d word mode, %d lane mode), %d words equal to the golden "
             "model; %d bursts, at most %d in flight", CASES, counts["word"], counts["lane"],
             counts["words"], len(tb.mon.bursts), tb.mon.peak)


@cocotb.test()
async def test_none_and_bad_fields(dut):
    """MODE NONE streams nothing; LANES*ESIZE != 8, SRC not a multiple of ESIZE, KP not whole
    words and an unknown MODE set err_field (the golden model: BAD_FIELD) and stream nothing; a good stream
    afterwards."""
    global _IMAGE
    tb = TB(dut, SEED * 100 + 3, lat=(1, 10))
    await tb.reset()
    _IMAGE = tb.image
    base = pointwise(8, 3, 3, 16, 0x1000)
    a0, a1, a2, a3, a4 = base
    bad = [
        (dict(a0, LANES=4),) + base[1:],
        (dict(a0, ESIZE=3, LANES=8),) + base[1:],
        (dict(a0, LANES=4, ESIZE=2, SRC=0x1001),) + base[1:],
        (a0, a1, a2, dict(a3, KP=19), a4),
        (dict(a0, MODE=15),) + base[1:],
    ]
    for i, case in enumerate(bad):
        fault = None
        try:
            golden(tb.image, case)
        except Exception as e:      # noqa: BLE001 - the model's BAD_FIELD
            fault = type(e).__name__
        # the model reads an element at any byte address; the contract calls an unaligned
        # address BAD_FIELD and the unit does (docs/rtl.md: a difference from the model)
        assert (fault is not None) == (i != 2), f"{case}: the model says {fault}"
        words, _, _, flags = await tb.run(case)
        assert not words and flags["field"], f"{case}: {words[:2]} {flags}"
    words, _, _, flags = await tb.run((dict(a0, MODE=MODES["NONE"]),) + base[1:])
    assert not words and not any(flags[k] for k in ("slverr", "decerr", "timeout", "field"))
    assert not tb.mon.bursts, "reads for an empty stream"
    exp, _ = golden(tb.image, base)
    words, lasts, _, flags = await tb.run(base, 0.7)
    check_words(base, exp, words, lasts)
    assert not flags["field"]


@cocotb.test()
async def test_stream_boundaries(dut):
    """Back-to-back streams where the second starts on the DDR word the first ended on, with
    that word rewritten in between (a RUN reading what the one before wrote): the second stream
    must read it again, not reuse the first stream's last beat. Word mode and lane mode."""
    tb = TB(dut, SEED * 100 + 6, lat=(1, 20), stall=0.1)
    await tb.reset()
    for first, second in [
        (pointwise(8, 2, 2, 16, 0x1000), pointwise(8, 1, 2, 8, 0x1038)),           # word mode
        (pointwise(8, 3, 3, 5, 0x2003), pointwise(4, 1, 3, 3, 0x202A)),    # lane mode
    ]:
        exp, _ = golden(tb.image, first)
        words, lasts, _, _ = await tb.run(first, 0.7)
        check_words(first, exp, words, lasts)
        a0, a1 = second[0], second[1]
        lo = a0["SRC"] // 8 * 8
        new = bytes(tb.rng.getrandbits(8) for _ in range(16))
        tb.mem.ram.write(lo, new)
        img = tb.image.copy()
        img[lo:lo + 16] = np.frombuffer(new, np.uint8)
        tb.image = img
        exp, _ = golden(tb.image, second)
        words, lasts, _, _ = await tb.run(second, 0.7)
        check_words(second, exp, words, lasts)


def check_chain(cases, exps, words, lasts, starts, dones, bad=()):
    """Words of the streams in order, m_last on each non-empty stream's last word, one done per
    stream in order (err_field on exactly the `bad` ones), each start after the one before."""
    flat = [w for e in exps for w in e]
    ends, k = [], 0
    for e in exps:
        k += len(e)
        if e:
            ends.append(k - 1)
    if words != flat:
        check_words("chain", flat, words, ends)
    assert words == flat, f"chain: {len(words)} words, expected {len(flat)}"
    assert lasts == ends, f"chain: m_last at {lasts}, expected {ends}"
    assert len(dones) == len(cases), f"{len(dones)} done pulses for {len(cases)} streams"
    assert [f for _, f in dones] == [int(j in bad) for j in range(len(cases))], f"err_field {dones}"


@cocotb.test()
async def test_chains(dut):
    """Look-ahead: streams started back to back, each as soon as start_ready (while the one
    before still streams): random descriptors with MODE NONE, empty streams (OH = 0) and bad
    fields mixed in, under random latency, stalls and backpressure; words, m_last and one done
    per stream in order, err_field on the bad ones."""
    global _IMAGE
    tb = TB(dut, SEED * 100 + 7, lat=(1, 60), stall=0.1)
    await tb.reset()
    _IMAGE = tb.image
    rng = random.Random(SEED * 100 + 8)
    total = ahead = special = 0
    chains = 4 if CASES <= 150 else CASES // 30
    for chain in range(chains):
        cases, exps, bad = [], [], []
        for j, (case, exp) in enumerate(gen_cases(rng, 8)):
            r = rng.random()
            if r < 0.1:
                case, exp = (dict(case[0], MODE=MODES["NONE"]),) + case[1:], []
            elif r < 0.2 and case[0]["MODE"] == MODES["WINDOWS"]:
                case = case[:2] + (dict(case[2], OH=0),) + case[3:]
                exp, _ = golden(tb.image, case)
                assert exp == [], "OH = 0 is not empty in the model"
            elif r < 0.25:
                case, exp = (dict(case[0], LANES=3),) + case[1:], []
                bad.append(j)
            cases.append(case)
            exps.append(exp)
        tb.mem.lat = rng.choice([(1, 1), (1, 60), (30, 60)])
        tb.set_stall(rng.choice([0.0, 0.2]))
        words, lasts, _, starts, dones = await tb.run_chain(cases, rng.choice([1.0, 0.7, 0.3]))
        check_chain(cases, exps, words, lasts, starts, dones, bad)
        assert int(dut.rd_idle.value), "the read master is not idle after the chain"
        total += len(words)
        # starts taken while the stream before had not ended yet
        ahead += sum(1 for j in range(1, len(cases)) if starts[j] < dones[j - 1][0])
        special += sum(1 for e in exps if not e)
    tb.mon.check()
    log.info("chains: %d x 8 streams (%d without words), %d words equal to the golden model; "
             "%d starts taken before the stream before ended", chains, special, total, ahead)
    assert ahead > 0


@cocotb.test()
async def test_chain_timed(dut):
    """Three word-mode pointwise streams back to back (latency 85, no stalls, m_ready high):
    the next stream's AGU setup and first run overlap the tail of the one before, so the gap
    between one stream's last word and the next one's first is small (logged, bounded)."""
    tb = TB(dut, SEED * 100 + 9, lat=(LAT, LAT), stall=0.0)
    await tb.reset()
    cases = [pointwise(8, 8, 8, 64, 0x2000), pointwise(8, 4, 4, 32, 0x6000),
             pointwise(4, 8, 8, 16, 0x9000)]
    exps = [golden(tb.image, c)[0] for c in cases]
    words, lasts, times, starts, dones = await tb.run_chain(cases)
    check_chain(cases, exps, words, lasts, starts, dones)
    gaps = [times[lasts[k] + 1] - times[lasts[k]] for k in range(len(lasts) - 1)]
    single = 2 + AGU_SETUP["WINDOWS"] + 1 + MAX_BURST + 3 + LAT + 2 + 1   # 132: from an idle unit
    log.info("chain timed: starts at edges %s, stream ends %s, gaps between streams %s cycles "
             "(a stream started from idle: first word %d cycles after start)",
             starts, [times[k] for k in lasts], gaps, single)
    # after a stream ending in a full run: its last index is handed at edge W, the run goes out
    # with it (AR at W + 4, last word at W + 4 + LAT + 2 + MAX_BURST); the next start is taken
    # at W + 2 and its first word comes `single` edges later
    gap0 = 2 + single - (4 + LAT + 2 + MAX_BURST)
    assert gaps[0] == gap0, f"gap after a long stream {gaps[0]}, formula {gap0}"
    # after a short stream the next one waits for the stream before it (two in flight at most)
    assert max(gaps) < single, f"gaps {gaps}: no better than a start from idle"
    assert len(words) == times[-1] - times[0] + 1 - sum(g - 1 for g in gaps), "bubbles inside a stream"


@cocotb.test()
async def test_chain_fault(dut):
    """A fault in the second of two streams in flight (word mode and lane mode): the flag, the
    words before it a prefix of the two streams' words, the unit and the master idle, a good
    stream right after."""
    tb = TB(dut, SEED * 100 + 10, lat=(20, 60), stall=0.1)
    await tb.reset()
    for first, second, at in [
        (pointwise(8, 8, 8, 32, 0x1000), pointwise(8, 6, 6, 32, 0x4000), 0x4000 + 8 * 20),
        (pointwise(8, 4, 4, 13, 0x1003), pointwise(8, 5, 5, 13, 0x4001), 0x4001 + 13 * 7),
    ]:
        exps = [golden(tb.image, c)[0] for c in (first, second)]
        lo = at // 8 * 8
        assert golden(tb.image, second, slverr=[(lo, lo + 8)])[1] == "SLVERR"
        tb.mem.regions = [Region(lo, lo + 8, SLVERR)]
        words, _, _, starts, dones = await tb.run_chain([first, second], 0.6)
        tb.mem.regions = []
        flat = exps[0] + exps[1]
        assert int(dut.err_slverr.value) and len(starts) == 2, (starts, dones)
        assert words == flat[:len(words)] and len(words) < len(flat), f"{len(words)} words"
        await ClockCycles(dut.clk, 2)
        assert not int(dut.busy.value) and int(dut.rd_idle.value), "busy or words owed"
        log.info("fault in a chain: %d of %d words, %d done pulses, starts at %s", len(words),
                 len(flat), len(dones), starts)
        good = pointwise(4, 3, 3, 8, 0x8000)
        exp, _ = golden(tb.image, good)
        words, lasts, _, flags = await tb.run(good, 0.8)
        check_words(good, exp, words, lasts)


def first_request(mode, run):
    """Edge (counted from the edge that samples start) of the first AR handshake of a word-mode
    stream whose first run is `run` words, without stalls: S_CFG (edge 1) registers the AGU's
    start (edge 2 samples it); the AGU hands over its first index AGU_SETUP + 1 edges later (its
    rule: the last of E requests E + SETUP edges after start); the address stage; the run builder
    takes `run` indexes, one an edge, and pushes the full run with the last one; the master takes
    the request (1), raises ARVALID (1), the memory takes it (1)."""
    return 2 + (AGU_SETUP[mode] + 1) + run + 3


@cocotb.test()
async def test_timed(dut):
    """Fixed latency 85, no stalls, m_ready always high. Word-mode pointwise (1x1, C = 64 int8):
    the first word at the documented edge, then one word per cycle to the end. Lane mode (C = 60:
    not whole words) one word per LANES cycles once running. Short runs (3x3 window, C = 8 int8:
    runs of 3 words) and a depthwise CHANNELS stream: figures logged, bounded below."""
    tb = TB(dut, SEED * 100 + 4, lat=(LAT, LAT), stall=0.0)
    await tb.reset()
    # word mode, pointwise
    case = pointwise(8, 8, 8, 64, 0x2000)
    exp, _ = golden(tb.image, case)
    words, lasts, times, flags = await tb.run(case)
    check_words(case, exp, words, lasts)
    assert flags["word_mode"]
    first, span = times[0], times[-1] - times[0] + 1
    log.info("timed word mode: %d words, first AR at edge %d (formula %d), first R beat at %d, "
             "first word at %d, %d cycles first to last word, peak %d bursts in flight",
             len(words), tb.t_ar, first_request("WINDOWS", MAX_BURST), tb.t_r, first, span,
             tb.mon.peak)
    assert tb.t_ar == first_request("WINDOWS", MAX_BURST), f"first AR at {tb.t_ar}"
    assert first == tb.t_r + 1, f"first word at {first}, its beat at {tb.t_r}"
    assert span == len(words), f"{len(words)} words in {span} cycles: not one per cycle"
    # lane mode: C not whole words
    case = pointwise(8, 4, 4, 60, 0x4000 + 3)
    exp, _ = golden(tb.image, case)
    words, lasts, times, flags = await tb.run(case)
    check_words(case, exp, words, lasts)
    assert not flags["word_mode"]
    gaps = [b - a for a, b in zip(times, times[1:])]
    log.info("timed lane mode (int8): %d words, first at edge %d, %d cycles first to last "
             "(%.2f words per cycle)", len(words), times[0], times[-1] - times[0] + 1,
             len(words) / (times[-1] - times[0] + 1))
    # one lane per cycle: 8 cycles per word, but for a one-time wait at the end of the first
    # run (the next run is requested only once it is collected, 8 lanes per word)
    assert sorted(gaps)[len(gaps) // 2] == 8 and sum(gaps) <= 8 * len(gaps) + 2 * MAX_BURST, \
        f"lane mode gaps {gaps}"
    # short runs: a 3x3 window with C = 8 (one word per tap): runs of 3 words
    a0, a1, a2, a3, a4 = pointwise(8, 10, 10, 8, 0x6000)
    case = (a0, a1, dict(a2, KH=3, KW=3, OH=8, OW=8), dict(a3, KP=72, K1=9), a4)
    exp, _ = golden(tb.image, case)
    words, lasts, times, flags = await tb.run(case)
    check_words(case, exp, words, lasts)
    span = times[-1] - times[0] + 1
    rate = len(words) / span
    bound = MAX_OUT * 3 / (LAT + 8)       # 8 bursts of 3 words per latency (+ the AR/R cycles)
    log.info("timed short runs (3-word runs): %d words in %d cycles after the first: %.3f words "
             "per cycle (8 x 3 / latency: %.3f)", len(words), span, rate, bound)
    assert flags["word_mode"] and rate >= 0.9 * bound, f"short runs: {rate:.3f} words/cycle"
    # depthwise part: CHANNELS, word mode (REP 1) over a 6x6x32 image
    case = (dict(MODE=MODES["CHANNELS"], LANES=8, ESIZE=1, PAD=0, SRC=0x8000), dict(N=1, H=6, W=6, C=32),
            dict(KH=0, KW=0, SY=0, SX=0, DY=0, DX=0, PT=0, PL=0, OH=0, OW=0),
            dict(KP=1, K0=0, K1=32, NCHUNK=2), dict(CV=32))
    exp, _ = golden(tb.image, case)
    words, lasts, times, flags = await tb.run(case)
    check_words(case, exp, words, lasts)
    span = times[-1] - times[0] + 1
    log.info("timed CHANNELS word mode (runs of 2 words, NCHUNK 2): %d words, first at edge %d, "
             "%d cycles first to last", len(words), times[0], span)
    assert flags["word_mode"]
    tb.mon.check()


async def fault_case(tb, case, region, kind, ddr_size=SIZE, slverr=(), hang=()):
    """The unit on `case` with `region` in the memory: the golden model reports `kind` for the
    same bytes; the unit sets that flag, streams a prefix of the fault-free words, ends with
    done and leaves the read master with nothing owed."""
    ref, _ = golden(tb.image, case)
    _, fault = golden(tb.image, case, ddr_size, slverr, hang)
    assert fault == kind, f"the model says {fault}, not {kind}"
    tb.mem.regions = [region]
    words, lasts, _, flags = await tb.run(case, 0.7, limit=20000)
    tb.mem.regions = []
    assert flags[kind.lower()], f"{case}: {kind} not flagged: {flags}"
    assert sum(flags[k] for k in ("slverr", "decerr", "timeout")) == 1, flags
    assert len(words) < len(ref) and words == ref[:len(words)] and not lasts, \
        f"{case}: {len(words)} words after a fault, not a strict prefix"
    return len(words), len(ref)


@cocotb.test()
async def test_bus_errors(dut):
    """SLVERR and DECERR inside the tensor (word mode and lane mode), then a read that never
    answers (TIMEOUT = 300): the flag as the golden model reports the fault, a strict prefix of
    the words, `done`, nothing owed (a good stream right after each fault is word-exact)."""
    tb = TB(dut, SEED * 100 + 5, lat=(1, 40), stall=0.2)
    await tb.reset()
    good = pointwise(4, 5, 5, 12, 0x3000)
    gexp, _ = golden(tb.image, good)
    tests = [
        (pointwise(8, 6, 6, 32, 0x2000), 0x2000 + 8 * 37, "SLVERR"),       # word mode
        (pointwise(8, 5, 5, 13, 0x2001), 0x2001 + 13 * 9, "SLVERR"),       # lane mode
        (pointwise(4, 6, 6, 16, 0x5000), 0x5000 + 8 * 50, "DECERR"),
        (pointwise(8, 6, 6, 32, 0x2000), 0x2000, "SLVERR"),                # the first word
    ]
    for case, at, kind in tests:
        lo = at // 8 * 8
        if kind == "SLVERR":
            got = await fault_case(tb, case, Region(lo, lo + 8, SLVERR), kind, slverr=[(lo, lo + 8)])
        else:       # the model's DDR ends where the memory answers DECERR
            got = await fault_case(tb, case, Region(lo, SIZE, DECERR), kind, ddr_size=lo)
        log.info("%s at %#x: %d of %d words before the fault", kind, lo, *got)
        assert int(dut.rd_idle.value), "words still owed after a fault"
        words, lasts, _, flags = await tb.run(good, 0.8)
        check_words(good, gexp, words, lasts)
        assert not any(flags[k] for k in ("slverr", "decerr", "timeout"))
    # a word that never comes: the master times out, the unit drains its owed words and ends
    dut.timeout.value = 300
    case = pointwise(8, 6, 6, 32, 0x7000)
    lo = 0x7000 + 8 * 60
    got = await fault_case(tb, case, Region(lo, lo + 8, None), "TIMEOUT", hang=[(lo, lo + 8)])
    log.info("TIMEOUT at %#x: %d of %d words before it", lo, *got)
    tb.mon.check()
