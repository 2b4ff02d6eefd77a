"""cocotb: one vector-unit ADD / SUB lane against the golden model (dtpu.reference.vector.add,
proven against TFLite's kernels): random scales, zero points, activations and elements, one pair
a cycle with idle cycles between, results 12 cycles later (the pipelined
requantizers, dtpu_vec_rq)."""
import os
import random

import cocotb
import numpy as np
from cocotb.clock import Clock
from cocotb.triggers import FallingEdge, ReadOnly, RisingEdge

from dtpu.reference import vector as rv

SIGNED = int(os.environ.get("DTPU_VEC_SIGNED", "1"))
DT = np.dtype(np.int8 if SIGNED else np.uint8)


def _params(rnd: random.Random):
    info = np.iinfo(DT)

    def q():
        return float(np.float32(10 ** rnd.uniform(-3, 0))), rnd.randint(int(info.min), int(info.max))

    while True:
        (s1, z1), (s2, z2), (so, zo) = q(), q(), q()
        p = rv.add_params(s1, z1, s2, z2, so, zo, DT, rnd.choice(rv.ACTIVATIONS),
                          sub=rnd.random() < 0.5)
        if max(p.input1_shift, p.input2_shift, p.output_shift) <= 0:
            return p


def _set(dut, p):
    dut.in1_off.value = p.input1_offset & 0xFFFF
    dut.in2_off.value = p.input2_offset & 0xFFFF
    dut.m1.value = p.input1_multiplier & 0xFFFFFFFF
    dut.m2.value = p.input2_multiplier & 0xFFFFFFFF
    dut.mo.value = p.output_multiplier & 0xFFFFFFFF
    dut.sh1.value = p.input1_shift & 0xFF
    dut.sh2.value = p.input2_shift & 0xFF
    dut.sho.value = p.output_shift & 0xFF
    dut.out_off.value = p.output_offset & 0xFFFF
    dut.act_min.value = p.act_min & 0xFFFF
    dut.act_max.value = p.act_max & 0xFFFF


@cocotb.test()
async def add_lane_matches_the_golden_model(dut):
    rnd = random.Random(int(os.environ.get("DTPU_SEED", "25")))
    cocotb.start_soon(Clock(dut.clk, 10, unit="ns").start())
    dut.rst.value = 1
    dut.sgn.value = SIGNED
    dut.in_valid.value = 0
    dut.a.value = 0
    dut.b.value = 0
    for _ in range(2):
        await RisingEdge(dut.clk)
    dut.rst.value = 0
    checked = 0
    for _ in range(40):                       # parameter sets
        p = _params(rnd)
        _set(dut, p)
        n = 64
        a = np.array([rnd.randint(0, 255) for _ in range(n)], np.uint8).view(DT)
        b = np.array([rnd.randint(0, 255) for _ in range(n)], np.uint8).view(DT)
        want = rv.add(a, b, p).view(np.uint8)
        sent: list[int] = []
        got: list[int] = []
        i = 0
        while len(got) < n:
            drive = i < n and rnd.random() < 0.8
            dut.in_valid.value = int(drive)
            if drive:
                dut.a.value = int(a.view(np.uint8)[i])
                dut.b.value = int(b.view(np.uint8)[i])
                sent.append(i)
                i += 1
            await RisingEdge(dut.clk)
            await ReadOnly()
            if int(dut.out_valid.value):
                got.append(int(dut.y.value))
            await FallingEdge(dut.clk)
        assert got == want.tolist(), (p, got, want.tolist())
        checked += n
        dut.in_valid.value = 0
        for _ in range(3):                    # drain before the parameters change
            await RisingEdge(dut.clk)
    dut._log.info("%d element pairs equal to the golden model", checked)
