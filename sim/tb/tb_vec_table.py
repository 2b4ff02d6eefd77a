"""cocotb: the vector unit's TABLE lookup (dtpu_vec_table) against the golden model's
(dtpu.hw.units.vector.compute, KIND TABLE): random tables written as 32 words after `clear`,
then words of random bytes with idle cycles between, each result two cycles after its word;
a second table written over the first must replace it entirely."""
import os
import random

import cocotb
import numpy as np
from cocotb.clock import Clock
from cocotb.triggers import FallingEdge, ReadOnly, RisingEdge

from dtpu.hw.units import vector as uv


class _Job:
    """The fields compute() reads of a TABLE descriptor."""

    kind = "TABLE"


async def _load(dut, table: np.ndarray, rnd: random.Random):
    """The table's 32 words after a clear, with idle cycles between some of them."""
    dut.clear.value = 1
    await RisingEdge(dut.clk)
    await FallingEdge(dut.clk)
    dut.clear.value = 0
    words = table.view(np.uint64)
    k = 0
    while k < words.size:
        drive = rnd.random() < 0.7
        dut.w_valid.value = int(drive)
        if drive:
            dut.w_data.value = int(words[k])
            k += 1
        await RisingEdge(dut.clk)
        await FallingEdge(dut.clk)
    dut.w_valid.value = 0


@cocotb.test()
async def table_matches_the_golden_model(dut):
    rnd = random.Random(int(os.environ.get("DTPU_SEED", "25")))
    cocotb.start_soon(Clock(dut.clk, 10, unit="ns").start())
    dut.rst.value = 1
    dut.clear.value = 0
    dut.w_valid.value = 0
    dut.w_data.value = 0
    dut.in_valid.value = 0
    dut.a.value = 0
    for _ in range(2):
        await RisingEdge(dut.clk)
    await FallingEdge(dut.clk)
    dut.rst.value = 0
    checked = 0
    for _ in range(6):                              # tables
        table = np.frombuffer(rnd.randbytes(256), np.uint8)
        await _load(dut, table, rnd)
        n = 96
        a = np.frombuffer(rnd.randbytes(8 * n), np.uint8)
        want = uv.compute(_Job(), a, table).view(np.uint64).tolist()
        got: list[int] = []
        i = 0
        while len(got) < n:
            drive = i < n and rnd.random() < 0.8
            dut.in_valid.value = int(drive)
            if drive:
                dut.a.value = int(a.view(np.uint64)[i])
                i += 1
            await RisingEdge(dut.clk)
            await ReadOnly()
            if int(dut.out_valid.value):
                got.append(int(dut.y.value))
            await FallingEdge(dut.clk)
        dut.in_valid.value = 0
        assert got == want, f"table lookups differ at word {next(k for k in range(n) if got[k] != want[k])}"
        checked += n
        for _ in range(3):                          # drain before the next table
            await RisingEdge(dut.clk)
        await FallingEdge(dut.clk)
    dut._log.info("%d words (%d lookups) equal to the golden model", checked, 8 * checked)
