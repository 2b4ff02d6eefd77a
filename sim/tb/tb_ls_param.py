"""cocotb: the parameter memory (dtpu_ls_param) against a dictionary of entries: random writes of
both words, reads of 8 lanes from random bases, the read holding while rd_en is low.

With LOG_ALIGN = A and LOG_MIN_LANES = M the module promises lane 0 entry base for any base
and lane r >= 1 entry base + r when base is a multiple of min(max(P(r), 2^M), 2^A) (P(r) the
smallest power of two above r): each read picks a word size `lanes` (1, 2, 4, 8; 2^M or more,
or 1 for a lane-0 read of any base: dtpu_cl_post's), a base that is a multiple of min(lanes,
2^A) (the post unit's reads) and checks the lanes r < lanes; with A = 0 every lane of every
base. The last test reads every base once and checks, lane by lane, exactly the lanes the
module promises, and that the lanes it does not promise (A > 0) do differ somewhere: the
narrower rotation is really built.
"""
import os
import random

import cocotb
from cocotb.clock import Clock
from cocotb.triggers import ReadOnly, RisingEdge

ADDR_W = int(os.environ.get("DTPU_PARAM_ADDR_W", "6"))
LOG_ALIGN = int(os.environ.get("DTPU_PARAM_LOG_ALIGN", "0"))
LOG_MIN_LANES = int(os.environ.get("DTPU_PARAM_LOG_MIN_LANES", "0"))
N = 1 << ADDR_W
RQ_MASK = ~(0xFF << 40) & (2**64 - 1)     # bits 47:40 of the second word read as 0


def _p(r: int) -> int:
    """Smallest power of two above r."""
    p = 1
    while p <= r:
        p <<= 1
    return p


def _promised(base: int, r: int) -> bool:
    return r == 0 or base % min(max(_p(r), 1 << LOG_MIN_LANES), 1 << LOG_ALIGN) == 0


async def _fill(dut, rng):
    entries = {}
    for e in range(N):
        for half in (0, 1):
            v = rng.getrandbits(64)
            dut.wr_en.value = 1
            dut.wr_entry.value = e
            dut.wr_half.value = half
            dut.wr_data.value = v
            await RisingEdge(dut.clk)
            entries[(e, half)] = v
    dut.wr_en.value = 0
    return entries


def _lane(dut, r):
    bias = (int(dut.rd_bias.value) >> (64 * r)) & (2**64 - 1)
    rq = (int(dut.rd_rq.value) >> (64 * r)) & (2**64 - 1)
    return bias, rq


async def _setup(dut, seed):
    cocotb.start_soon(Clock(dut.clk, 10, unit="ns").start())
    dut.wr_en.value = 0
    dut.rd_en.value = 0
    dut.rd_base.value = 0
    await RisingEdge(dut.clk)
    return await _fill(dut, random.Random(seed))


@cocotb.test()
async def test_reads(dut):
    rng = random.Random(5)
    entries = await _setup(dut, 3)
    for k in range(600):
        lanes = rng.choice([n for n in (1, 2, 4, 8) if n == 1 or n >= 1 << LOG_MIN_LANES])
        step = 1 if LOG_ALIGN == 0 else min(lanes, 1 << LOG_ALIGN)
        base = rng.randrange(0, N, step)
        dut.rd_en.value = 1
        dut.rd_base.value = base
        await RisingEdge(dut.clk)
        # a few cycles with rd_en low and another base: the read holds
        hold = rng.choice([0, 0, 1, 3])
        dut.rd_en.value = 0
        dut.rd_base.value = rng.randrange(N)
        for _ in range(hold + 1):
            await ReadOnly()
            check = range(8) if LOG_ALIGN == 0 else range(lanes)
            for r in check:
                e = (base + r) % N
                got = _lane(dut, r)
                want = (entries[(e, 0)], entries[(e, 1)] & RQ_MASK)
                assert got == want, (f"read {k}: base {base}, {lanes} lanes, LOG_ALIGN {LOG_ALIGN}, "
                                     f"LOG_MIN_LANES {LOG_MIN_LANES}: lane {r} "
                                     f"got {got[0]:#x}/{got[1]:#x}, want entry {e} {want[0]:#x}/{want[1]:#x}")
            await RisingEdge(dut.clk)


@cocotb.test()
async def test_every_base(dut):
    entries = await _setup(dut, 4)
    unpromised_differ = 0
    for base in range(N):
        dut.rd_en.value = 1
        dut.rd_base.value = base
        await RisingEdge(dut.clk)
        dut.rd_en.value = 0
        await ReadOnly()
        for r in range(8):
            e = (base + r) % N
            got = _lane(dut, r)
            want = (entries[(e, 0)], entries[(e, 1)] & RQ_MASK)
            if _promised(base, r):
                assert got == want, f"base {base}: lane {r} got {got[0]:#x}, want entry {e} {want[0]:#x}"
            else:
                unpromised_differ += got != want
        await RisingEdge(dut.clk)
    if LOG_ALIGN > 0:
        assert unpromised_differ > 0, "LOG_ALIGN > 0 but every lane still reads base + r: the rotation is not narrowed"
