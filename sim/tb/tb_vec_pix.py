"""cocotb: the vector unit's pixel-word funnel (dtpu_vec_pix) on its own: random C (1 .. 40, any
C mod 8), a contiguous tensor's words offered with idle cycles and the pixel words taken with
backpressure; each pixel's words must hold its channels in order (lanes past C not compared),
`out_last` on its last word; and with the stream one word a cycle and no backpressure, pixel
word k leaves in cycle k + 1 after the first word is taken (the MEAN cost's one operation a
cycle from the first beat)."""
import os
import random

import cocotb
import numpy as np
from cocotb.clock import Clock
from cocotb.triggers import FallingEdge, ReadOnly, RisingEdge


async def _case(dut, rnd, c, pixels, p_in, p_out):
    """One tensor through the funnel; returns the cycles (from the first word taken) at which
    each pixel word left."""
    data = rnd.randbytes(c * pixels)
    words = np.frombuffer(data + bytes(-len(data) % 8), np.uint64).tolist()
    dut.c.value = c
    dut.clear.value = 1
    await RisingEdge(dut.clk)
    await FallingEdge(dut.clk)
    dut.clear.value = 0
    wpx = -(-c // 8)
    want = []
    for p in range(pixels):
        px = data[p * c:(p + 1) * c]
        want += [(px[8 * j:8 * j + 8], j == wpx - 1) for j in range(wpx)]
    got, when = [], []
    i, t, t0 = 0, 0, None
    while len(got) < len(want):
        offer = i < len(words) and rnd.random() < p_in
        dut.in_valid.value = int(offer)
        if offer:
            dut.in_data.value = words[i]
        ready = rnd.random() < p_out
        dut.out_ready.value = int(ready)
        await ReadOnly()
        if offer and int(dut.in_ready.value):
            i += 1
            if t0 is None:
                t0 = t
        if ready and int(dut.out_valid.value):
            k = len(got)
            n = len(want[k][0])
            got.append((int(dut.out_data.value).to_bytes(8, "little")[:n],
                        bool(int(dut.out_last.value))))
            when.append(t - t0)
            assert got[k] == want[k], f"C={c}: pixel word {k} {got[k]} != {want[k]}"
        await FallingEdge(dut.clk)
        t += 1
        assert t < 50 * len(want) + 100, f"C={c}: stuck at pixel word {len(got)}"
    dut.in_valid.value = 0
    dut.out_ready.value = 0
    return when


@cocotb.test()
async def pixel_words_in_order(dut):
    rnd = random.Random(int(os.environ.get("DTPU_SEED", "25")))
    cocotb.start_soon(Clock(dut.clk, 10, unit="ns").start())
    for sig in (dut.clear, dut.in_valid, dut.in_data, dut.out_ready, dut.c):
        sig.value = 0
    dut.rst.value = 1
    for _ in range(2):
        await RisingEdge(dut.clk)
    await FallingEdge(dut.clk)
    dut.rst.value = 0
    for c in list(range(1, 18)) + [24, 29, 33, 40]:
        await _case(dut, rnd, c, rnd.randint(1, 12), 0.7, 0.7)
        when = await _case(dut, rnd, c, rnd.randint(1, 12), 1.0, 1.0)
        assert when == list(range(1, len(when) + 1)), f"C={c}: pixel words left at {when}"
    dut._log.info("pixel words in order; one a cycle from the cycle after the first word")
