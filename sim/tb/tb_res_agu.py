"""cocotb: the contract 2.0 result address generator (hw/rtl/dtpu_res_agu.v) against the golden
model's scatter (dtpu.hw.executor.Executor.scatter): random RES ITEMS descriptors, random
backpressure, one request per result lane (element index or dropped, last) compared; without
backpressure one request per cycle from the cycle after start.

Expected sequence: Executor.scatter run on result words whose lanes are byte planes of
(stream lane + 1) into a zeroed destination; the planes put back together say which stream lane
landed at which element (p*DSTC + channel); lanes that landed nowhere are dropped.

Driving the unit, its stream under backpressure and the comparison: dtpu_sim.agu (shared with
tb_agu). Environment: DTPU_AGU_CASES, DTPU_AGU_SEED, DTPU_AGU_MAX_ELEMS (as tb_agu)."""
import random

import cocotb
import numpy as np

from dtpu.hw.ddr import Ddr
from dtpu.hw.executor import Executor
from dtpu.hw.listformat import Format
from dtpu_sim.agu import CASES, MAX_ELEMS, NO_ELEMENT, SEED, AguBench, ceil_div, check

FMT = Format()
MODES = FMT.res_modes
DROP = NO_ELEMENT
SETUP = 0
# the descriptor fields dtpu_res_agu takes (cfg_<field>)
FIELDS = ("MODE", "LANES", "PIX", "OUTER", "INNER", "GW", "CH0", "CH1", "DSTC")


def rand_items(rng):
    L = rng.choice([1, 2, 4, 8])
    pix = rng.randint(1, 30)
    outer, inner = rng.randint(1, 3), rng.randint(1, 4)
    gw = rng.randint(1, 12)
    ch0 = rng.choice([0, rng.randint(0, 6)])
    total = outer * inner * gw
    ch1 = ch0 + total - rng.choice([0, 0, rng.randint(0, total - 1)])
    dstc = ch1 + rng.choice([0, rng.randint(0, 4)])
    r0 = dict(MODE=MODES["ITEMS"], LANES=L, ESIZE=8 // L, SIGNED=0, DST=0)
    r1 = dict(PIX=pix, OUTER=outer, INNER=inner)
    r2 = dict(GW=gw, CH0=ch0, CH1=ch1, DSTC=dstc)
    return r0, r1, r2


def expected(r0, r1, r2):
    """Executor.scatter of byte planes of (stream lane + 1): per stream lane its element index
    or DROP."""
    L, es = r0["LANES"], r0["ESIZE"]
    nwords = r1["OUTER"] * r1["PIX"] * r1["INNER"] * ceil_div(r2["GW"], L)
    nlanes = nwords * L
    bits = 8 * es
    planes = max(1, ceil_div((nlanes + 1).bit_length(), bits))
    code = np.arange(1, nlanes + 1, dtype=np.uint64)
    nbytes = r1["PIX"] * r2["DSTC"] * es
    ex = Executor.__new__(Executor)  # scatter uses only the format
    ex.fmt = FMT
    landed = np.zeros(r1["PIX"] * r2["DSTC"], np.uint64)
    for p in range(planes):
        lanes = (code >> np.uint64(bits * p)).astype(f"<u{es}")  # the plane: the low `bits` bits
        ddr = Ddr(0, max(8, nbytes))
        ex.scatter(ddr, r0, r1, r2, lanes.view(np.uint64), False)
        landed += ddr.read(0, nbytes).view(f"<u{es}").astype(np.uint64) << np.uint64(bits * p)
    out = [DROP] * nlanes
    for elem in np.flatnonzero(landed):
        out[int(landed[elem]) - 1] = int(elem)
    return out


def gen_cases(rng, count):
    out = []
    while len(out) < count:
        case = rand_items(rng)
        exp = expected(*case)
        if len(exp) <= MAX_ELEMS:
            out.append((case, exp))
    return out


def bench(dut):
    return AguBench(dut, FIELDS, "m_drop")


@cocotb.test()
async def test_items_random(dut):
    rng = random.Random(SEED * 1000 + 4)
    b = bench(dut)
    await b.reset()
    total = await b.random_cases(rng, gen_cases(rng, CASES))
    dut._log.info(f"ITEMS: {CASES} random descriptors, {total} lane requests match the golden model")


@cocotb.test()
async def test_one_per_cycle(dut):
    rng = random.Random(SEED * 1000 + 5)
    b = bench(dut)
    await b.reset()
    for case, exp in gen_cases(rng, max(2, CASES // 4)):
        got, edges = await b.run_case(case, rng, 1.0)
        check(case, exp, got)
        assert edges == len(exp) + SETUP, f"{case}: {edges} cycles for {len(exp)} lanes"


@cocotb.test()
async def test_empty_streams(dut):
    rng = random.Random(SEED)
    b = bench(dut)
    await b.reset()
    (c, _), = gen_cases(rng, 1)
    r0, r1, r2 = c
    bad = [(dict(r0, MODE=MODES["NONE"]), r1, r2), (dict(r0, MODE=7), r1, r2),
           (r0, dict(r1, PIX=0), r2), (r0, dict(r1, INNER=0), r2), (r0, r1, dict(r2, GW=0))]
    await b.empty_streams(bad, 10, rng, gen_cases(rng, 1)[0])
