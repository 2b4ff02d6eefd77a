"""cocotb: the contract 2.0 result address generator (hw/rtl/dtpu_res_agu.v) against the golden
model's scatter (dtpu.hw.cmdlist.Executor._scatter): random RES ITEMS descriptors, random
backpressure, one request per result lane (element index or dropped, last) compared; without
backpressure one request per cycle from the cycle after start.

Expected sequence: Executor._scatter run on result words whose lanes are byte planes of
(stream lane + 1) into a zeroed destination; the planes put back together say which stream lane
landed at which element (p*DSTC + channel); lanes that landed nowhere are dropped.

Environment: DTPU_AGU_CASES, DTPU_AGU_SEED, DTPU_AGU_MAX_ELEMS (as tb_agu)."""
import os
import random

import cocotb
import numpy as np
from cocotb.clock import Clock
from cocotb.triggers import FallingEdge

from dtpu.hw.cmdlist import Ddr, Executor, Format

FMT = Format()
MODES = FMT.res_modes
DROP = -1
SETUP = 0

CASES = int(os.environ.get("DTPU_AGU_CASES", "8"))
SEED = int(os.environ.get("DTPU_AGU_SEED", "1"))
MAX_ELEMS = int(os.environ.get("DTPU_AGU_MAX_ELEMS", "2500"))


def ceil_div(a, b):
    return -(-a // b)


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
    """Executor._scatter of byte planes of (stream lane + 1): per stream lane its element index
    or DROP."""
    L, es = r0["LANES"], r0["ESIZE"]
    nwords = r1["OUTER"] * r1["PIX"] * r1["INNER"] * ceil_div(r2["GW"], L)
    nlanes = nwords * L
    bits = 8 * es
    planes = max(1, ceil_div((nlanes + 1).bit_length(), bits))
    code = np.arange(1, nlanes + 1, dtype=np.uint64)
    nbytes = r1["PIX"] * r2["DSTC"] * es
    ex = Executor.__new__(Executor)  # _scatter uses only the format
    ex.fmt = FMT
    landed = np.zeros(r1["PIX"] * r2["DSTC"], np.uint64)
    for p in range(planes):
        lanes = (code >> np.uint64(bits * p)).astype(f"<u{es}")  # the plane: the low `bits` bits
        ddr = Ddr(0, max(8, nbytes))
        ex._scatter(ddr, r0, r1, r2, lanes.view(np.uint64), False)
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


async def reset(dut):
    cocotb.start_soon(Clock(dut.clk, 10, unit="ns").start())
    dut.rst_n.value = 0
    dut.start.value = 0
    dut.m_ready.value = 0
    for _ in range(2):
        await FallingEdge(dut.clk)
    dut.rst_n.value = 1
    await FallingEdge(dut.clk)


def set_fields(dut, case):
    r0, r1, r2 = case
    dut.cfg_mode.value = r0["MODE"]
    dut.cfg_lanes.value = r0["LANES"]
    dut.cfg_pix.value = r1["PIX"]
    dut.cfg_outer.value = r1["OUTER"]
    dut.cfg_inner.value = r1["INNER"]
    for k in ("GW", "CH0", "CH1", "DSTC"):
        getattr(dut, f"cfg_{k.lower()}").value = r2[k]


async def run_case(dut, case, rng, p_ready):
    set_fields(dut, case)
    dut.start.value = 1
    await FallingEdge(dut.clk)
    dut.start.value = 0
    got = []
    edges = 0
    limit = 200 + 50 * (MAX_ELEMS + 100) / max(p_ready, 0.02)
    while True:
        edges += 1
        assert edges < limit, f"no end of stream after {edges} cycles ({len(got)} requests)"
        ready = rng.random() < p_ready
        dut.m_ready.value = int(ready)
        valid = bool(dut.m_valid.value)
        if valid and ready:
            last = bool(dut.m_last.value)
            got.append((DROP if dut.m_drop.value else int(dut.m_index.value), last))
        await FallingEdge(dut.clk)
        if valid and ready and last:
            break
    dut.m_ready.value = 0
    assert not dut.m_valid.value and not dut.busy.value, "requests after m_last"
    return got, edges


def check(case, exp, got):
    idx = [g[0] for g in got]
    lasts = [i for i, g in enumerate(got) if g[1]]
    if idx != exp:
        first = next((i for i, (a, b) in enumerate(zip(idx, exp)) if a != b), min(len(idx), len(exp)))
        raise AssertionError(f"{case}: {len(idx)} requests, expected {len(exp)}; first difference "
                             f"at {first}: got {idx[first:first + 8]}, expected {exp[first:first + 8]}")
    assert lasts == [len(exp) - 1], f"{case}: m_last at {lasts}"


@cocotb.test()
async def test_items_random(dut):
    rng = random.Random(SEED * 1000 + 4)
    await reset(dut)
    total = 0
    for case, exp in gen_cases(rng, CASES):
        got, _ = await run_case(dut, case, rng, rng.choice([1.0, 0.8, 0.5, 0.2]))
        check(case, exp, got)
        total += len(exp)
    dut._log.info(f"ITEMS: {CASES} random descriptors, {total} lane requests match the golden model")


@cocotb.test()
async def test_one_per_cycle(dut):
    rng = random.Random(SEED * 1000 + 5)
    await reset(dut)
    for case, exp in gen_cases(rng, max(2, CASES // 4)):
        got, edges = await run_case(dut, case, rng, 1.0)
        check(case, exp, got)
        assert edges == len(exp) + SETUP, f"{case}: {edges} cycles for {len(exp)} lanes"


@cocotb.test()
async def test_empty_streams(dut):
    rng = random.Random(SEED)
    await reset(dut)
    (c, _), = gen_cases(rng, 1)
    r0, r1, r2 = c
    bad = [(dict(r0, MODE=MODES["NONE"]), r1, r2), (dict(r0, MODE=7), r1, r2),
           (r0, dict(r1, PIX=0), r2), (r0, dict(r1, INNER=0), r2), (r0, r1, dict(r2, GW=0))]
    for case in bad:
        set_fields(dut, case)
        dut.m_ready.value = 1
        dut.start.value = 1
        await FallingEdge(dut.clk)
        dut.start.value = 0
        for _ in range(10):
            assert not dut.m_valid.value, f"{case}: a request from an empty stream"
            await FallingEdge(dut.clk)
        assert dut.empty.value and not dut.busy.value, case
    (c, exp), = gen_cases(rng, 1)
    got, _ = await run_case(dut, c, rng, 0.7)
    check(c, exp, got)
    assert not dut.empty.value
