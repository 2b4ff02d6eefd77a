"""cocotb: the contract 2.0 activation address generator (hw/rtl/dtpu_act_agu.v) against the
golden model's gather (dtpu.hw.executor): random ACT descriptors, random backpressure, the whole
request sequence (element index or PAD, last) compared; without backpressure one request per
cycle and the documented setup constant.

Expected sequences come from the golden model itself:
  WINDOWS:  dtpu.hw.units.load.window_index(a1, a2, KP) sliced to lanes [K0*L, K1*L) per pixel
            (index N*H*W*C stands for PAD);
  CHANNELS: Executor.gather run on tensors whose elements are byte planes of (index + 1), PAD 0:
            the lanes of the real gather, put back together, give index + 1, or 0 for PAD.

Driving the unit, its stream under backpressure and the comparison: dtpu_sim.agu (shared with
tb_res_agu). Environment: DTPU_AGU_CASES (random cases per mode), DTPU_AGU_SEED,
DTPU_AGU_MAX_ELEMS (cap of one case's stream), DTPU_AGU_BIG (1: larger shapes)."""
import os
import random

import cocotb
import numpy as np
from cocotb.triggers import FallingEdge

from dtpu.hw.ddr import Ddr
from dtpu.hw.executor import Executor
from dtpu.hw.listformat import Format
from dtpu.hw.units.load import window_index
from dtpu_sim.agu import CASES, MAX_ELEMS, NO_ELEMENT, SEED, AguBench, ceil_div, check

FMT = Format()
MODES = FMT.act_modes
# cycles from the edge that samples `start` to the first request's handshake minus one (the RTL's
# documented setup: the last of E requests is taken E + SETUP edges after start without stalls)
SETUP = {"WINDOWS": 22, "CHANNELS": 37}
PAD = NO_ELEMENT
BIG = os.environ.get("DTPU_AGU_BIG", "0") not in ("", "0")
# the descriptor fields dtpu_act_agu takes (cfg_<field>)
FIELDS = ("MODE", "LANES", "N", "H", "W", "C", "KH", "KW", "SY", "SX", "DY", "DX", "PT", "PL",
          "OH", "OW", "KP", "K0", "K1", "NCHUNK", "CV")


# ------------------------------------------------------------------------------------------------
# random descriptors


def rand_windows(rng):
    L = rng.choice([1, 2, 4, 8])
    n = rng.randint(1, 3 if BIG else 2)
    h, w = rng.randint(1, 16 if BIG else 9), rng.randint(1, 16 if BIG else 9)
    c = rng.randint(1, 40 if BIG else 20)
    kh, kw = rng.randint(1, 7 if BIG else 5), rng.randint(1, 7 if BIG else 5)
    sy, sx = rng.randint(1, 4 if BIG else 3), rng.randint(1, 4 if BIG else 3)
    dy, dx = rng.randint(1, 3 if BIG else 2), rng.randint(1, 3 if BIG else 2)
    if rng.random() < 0.2:  # the 1x1 / fully-connected case
        kh = kw = sy = sx = dy = dx = 1
    if BIG:  # paddings up to the field's 15, windows partly or wholly outside the image
        pt, pl = rng.randint(0, min(15, (kh - 1) * dy + 2)), rng.randint(0, min(15, (kw - 1) * dx + 2))
    else:
        pt, pl = rng.randint(0, kh - 1), rng.randint(0, kw - 1)
    ey, ex = (kh - 1) * dy + 1, (kw - 1) * dx + 1
    pb = max(rng.randint(0, kh - 1), ey - h - pt)
    pr = max(rng.randint(0, kw - 1), ex - w - pl)
    oh = (h + pt + pb - ey) // sy + 1
    ow = (w + pl + pr - ex) // sx + 1
    k = kh * kw * c
    kp = ceil_div(k, L) * L + L * rng.choice([0, 0, 0, 1, 3])
    words = kp // L
    if rng.random() < 0.4:
        k0, k1 = 0, words
    else:
        k0 = rng.randrange(words)
        k1 = rng.randint(k0 + 1, words)
    a0 = dict(MODE=MODES["WINDOWS"], LANES=L, ESIZE=8 // L, PAD=0, SRC=0)
    a1 = dict(N=n, H=h, W=w, C=c)
    a2 = dict(KH=kh, KW=kw, SY=sy, SX=sx, DY=dy, DX=dx, PT=pt, PL=pl, OH=oh, OW=ow)
    a3 = dict(KP=kp, K0=k0, K1=k1, NCHUNK=0)
    a4 = dict(CV=0)
    return a0, a1, a2, a3, a4


def rand_channels(rng):
    L = rng.choice([1, 2, 4, 8])
    h, w = rng.randint(1, 16 if BIG else 9), rng.randint(1, 16 if BIG else 9)
    c = rng.randint(1, 40 if BIG else 20)
    rep = rng.randint(1, 5 if BIG else 3)
    cv = c * rep
    nchunk = rng.randint(1, 4 if BIG else 3)
    chans = nchunk * L * rng.randint(1, max(1, min(3, ceil_div(cv, nchunk * L))))
    ch0 = rng.choice([0, rng.randrange(cv), L * rng.randrange(ceil_div(cv, L))])
    a0 = dict(MODE=MODES["CHANNELS"], LANES=L, ESIZE=8 // L, PAD=0, SRC=0)
    a1 = dict(N=1, H=h, W=w, C=c)
    a2 = dict(KH=0, KW=0, SY=0, SX=0, DY=0, DX=0, PT=0, PL=0, OH=0, OW=0)
    a3 = dict(KP=rep, K0=ch0, K1=chans, NCHUNK=nchunk)
    a4 = dict(CV=cv)
    return a0, a1, a2, a3, a4


# ------------------------------------------------------------------------------------------------
# the golden model's sequences


def expected_windows(a0, a1, a2, a3, a4):
    L = a0["LANES"]
    idx = window_index(a1, a2, a3["KP"])[:, a3["K0"] * L:a3["K1"] * L].reshape(-1)
    size = a1["N"] * a1["H"] * a1["W"] * a1["C"]
    return [PAD if v == size else int(v) for v in idx]


def expected_gather(a0, a1, a2, a3, a4):
    """Executor.gather on byte planes of (index + 1), PAD lanes 0."""
    es = a0["ESIZE"]
    size = a1["N"] * a1["H"] * a1["W"] * a1["C"]
    bits = 8 * es
    planes = max(1, ceil_div((size + 1).bit_length(), bits))
    code = np.arange(1, size + 1, dtype=np.uint64)
    ex = Executor.__new__(Executor)  # gather uses only the format and its cache
    ex.fmt, ex.gather_cache = FMT, {}
    total = None
    for p in range(planes):
        data = (code >> np.uint64(bits * p)).astype(f"<u{es}")   # the plane: the low `bits` bits
        ddr = Ddr(0, max(8, data.nbytes), data.view(np.uint8))
        lanes = ex.gather(ddr, dict(a0, SRC=0, PAD=0), a1, a2, a3, a4).view(f"<u{es}")
        part = lanes.astype(np.uint64) << np.uint64(bits * p)
        total = part if total is None else total + part
    return [PAD if v == 0 else int(v) - 1 for v in total]


def expected(case):
    a0 = case[0]
    return expected_windows(*case) if a0["MODE"] == MODES["WINDOWS"] else expected_gather(*case)


def gen_cases(rng, kind, count):
    make = rand_windows if kind == "WINDOWS" else rand_channels
    out = []
    while len(out) < count:
        case = make(rng)
        exp = expected(case)
        if 0 < len(exp) <= MAX_ELEMS:
            out.append((case, exp))
    return out


# ------------------------------------------------------------------------------------------------
# driving the RTL


def bench(dut):
    return AguBench(dut, FIELDS, "m_pad")


async def random_cases(dut, kind, seed_off):
    rng = random.Random(SEED * 1000 + seed_off)
    b = bench(dut)
    await b.reset()
    total = await b.random_cases(rng, gen_cases(rng, kind, CASES))
    dut._log.info(f"{kind}: {CASES} random descriptors, {total} requests match the golden model")


@cocotb.test()
async def test_windows_random(dut):
    await random_cases(dut, "WINDOWS", 1)


@cocotb.test()
async def test_channels_random(dut):
    await random_cases(dut, "CHANNELS", 2)


@cocotb.test()
async def test_one_per_cycle(dut):
    """No backpressure: m_valid never drops and the stream takes E + SETUP[mode] edges."""
    rng = random.Random(SEED * 1000 + 3)
    b = bench(dut)
    await b.reset()
    for kind in ("WINDOWS", "CHANNELS"):
        for case, exp in gen_cases(rng, kind, max(2, CASES // 4)):
            got, edges = await b.run_case(case, rng, 1.0)
            check(case, exp, got)
            assert edges == len(exp) + SETUP[kind], \
                f"{kind} {case}: {edges} cycles for {len(exp)} requests, expected {len(exp)} + {SETUP[kind]}"
    dut._log.info(f"one request per cycle; setup {SETUP}")


async def run_chain(b, cases, rng, p_ready):
    """Start the streams of `cases` one after the other, each as soon as `start_ready` says the
    setup is free (while the stream before still runs); returns per stream its requests, the
    edge that sampled its start and the edge of its last handshake."""
    dut = b.dut
    t = 0
    b.set_fields(cases[0][0])
    dut.start.value = 1
    await FallingEdge(dut.clk)
    t += 1
    dut.start.value = 0
    starts, lasts, streams = [t], [], [[]]
    limit = 200 + 50 * sum(len(e) + 100 for _, e in cases) / max(p_ready, 0.02)
    while len(lasts) < len(cases):
        assert t < limit, f"no end of stream {len(lasts)} after {t} cycles"
        ready = rng.random() < p_ready
        dut.m_ready.value = int(ready)
        valid = bool(dut.m_valid.value)
        do_start = len(starts) < len(cases) and bool(dut.start_ready.value)
        if do_start:
            b.set_fields(cases[len(starts)][0])
            dut.start.value = 1
        last = False
        if valid and ready:
            streams[-1].append(b.take())
            last = streams[-1][-1][1]
        await FallingEdge(dut.clk)
        t += 1
        if do_start:
            dut.start.value = 0
            starts.append(t)
        if last:
            lasts.append(t)
            streams.append([])
    dut.m_ready.value = 0
    assert not dut.m_valid.value and not dut.busy.value, "requests after the last stream"
    return streams[:-1], starts, lasts


async def chains(dut, seed_off, p_choices, timed):
    rng = random.Random(SEED * 1000 + seed_off)
    b = bench(dut)
    await b.reset()
    total = bubbles = 0
    for _ in range(2):
        cases = []
        for _ in range(max(3, CASES // 2)):
            kind = rng.choice(["WINDOWS", "CHANNELS"])
            cases += [(c, e, kind) for c, e in gen_cases(rng, kind, 1)]
        got, starts, lasts = await run_chain(b, [(c, e) for c, e, _ in cases], rng,
                                             rng.choice(p_choices))
        prev = None
        for i, ((case, exp, kind), g) in enumerate(zip(cases, got)):
            check(case, exp, g)
            total += len(exp)
            if timed:
                # the stream's walk starts when its setup is done and the one before has ended
                load = starts[i] + SETUP[kind] if prev is None else max(starts[i] + SETUP[kind], prev)
                assert lasts[i] == load + len(exp), \
                    f"stream {i} ({kind}, {len(exp)} requests) ended at {lasts[i]}, expected {load + len(exp)}"
                bubbles += load - prev if prev is not None else 0
            prev = lasts[i]
    dut._log.info(f"chains: {total} requests" + (f", {bubbles} bubble cycles between streams" if timed else ""))
    return bubbles


@cocotb.test()
async def test_back_to_back(dut):
    """Streams started while the one before runs: no backpressure, the next walk follows the last
    request of the one before without a bubble once its setup is done (exact edges)."""
    await chains(dut, 6, [1.0], True)


@cocotb.test()
async def test_back_to_back_backpressure(dut):
    await chains(dut, 7, [0.8, 0.5, 0.2], False)


@cocotb.test()
async def test_empty_streams(dut):
    """MODE NONE or a stream without elements: nothing streamed, `empty` set, the unit idle."""
    rng = random.Random(SEED)
    b = bench(dut)
    await b.reset()
    (w, _), = gen_cases(rng, "WINDOWS", 1)
    (c, _), = gen_cases(rng, "CHANNELS", 1)
    bad = [
        (dict(w[0], MODE=MODES["NONE"]),) + w[1:],
        (dict(w[0], MODE=15),) + w[1:],
        (w[0], dict(w[1], N=0)) + w[2:],
        (w[0], w[1], dict(w[2], OW=0)) + w[3:],
        w[:3] + (dict(w[3], K1=w[3]["K0"]),) + w[4:],
        c[:3] + (dict(c[3], NCHUNK=0),) + c[4:],
        c[:3] + (dict(c[3], KP=0),) + c[4:],
    ]
    # and a good stream afterwards clears `empty`
    await b.empty_streams(bad, 60, rng, gen_cases(rng, "WINDOWS", 1)[0])
