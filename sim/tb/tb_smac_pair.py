"""cocotb: two PEs on one multiplier (dtpu_smac_pair) against exact Python integer arithmetic.

Every 9-bit operand value occurs (-256 included: the packed operand's wrap and the 2^16 low
product), in the three ways the MXU issues to a pair: both columns with one shared activation
(GEMM), one column at a time with its own activation while the other column's inputs carry
garbage (DWCONV, TAP_CYCLES >= 2), and random mixes of both, under random global stalls."""
import os
import random

import cocotb
from cocotb.clock import Clock
from cocotb.triggers import ReadOnly, RisingEdge

ACC_W = int(os.environ.get("PARAM_ACC_W", "36"))
LO, HI = -256, 255
EDGE = [LO, LO + 1, -128, -1, 0, 1, 127, HI - 1, HI]


def wrap(v, bits):
    v &= (1 << bits) - 1
    return v - (1 << bits) if v >> (bits - 1) else v


async def reset(dut):
    dut.rst_n.value = 0
    dut.ce.value = 1
    for s in ("l", "h"):
        for p in ("in_valid_", "in_first_", "in_last_"):
            getattr(dut, p + s).value = 0
    dut.in_al.value = dut.in_bl.value = dut.in_ah.value = dut.in_bh.value = 0
    for _ in range(2):
        await RisingEdge(dut.clk)
    dut.rst_n.value = 1
    await RisingEdge(dut.clk)


class Column:
    """One column's steps: issue() gives its next (first, last, a, b) or None when done."""

    def __init__(self, steps):
        self.steps = steps
        self.s = 0
        self.k = 0

    def pending(self):
        return self.s < len(self.steps)

    def issue(self):
        step = self.steps[self.s]
        a, b = step[self.k]
        first, last = self.k == 0, self.k == len(step) - 1
        self.k += 1
        if last:
            self.s += 1
            self.k = 0
        return first, last, a, b

    def expected(self):
        return [wrap(sum(a * b for a, b in st), ACC_W) for st in self.steps]


async def run(dut, cycles, rng, stall_prob):
    """Drive (l, h) per cycle (each None or (first, last, a, b)); garbage on idle inputs."""
    got = {"l": [], "h": []}

    async def monitor():
        while True:
            await RisingEdge(dut.clk)
            await ReadOnly()
            if dut.ce.value:
                if dut.acc_valid_l.value:
                    got["l"].append(dut.acc_l.value.to_signed())
                if dut.acc_valid_h.value:
                    got["h"].append(dut.acc_h.value.to_signed())

    mon = cocotb.start_soon(monitor())
    for lh in cycles:
        for s, issue in zip(("l", "h"), lh):
            first, last, a, b = issue if issue is not None else (
                rng.random() < 0.5, rng.random() < 0.5, rng.randint(LO, HI), rng.randint(LO, HI))
            getattr(dut, "in_valid_" + s).value = int(issue is not None)
            getattr(dut, "in_first_" + s).value = int(first)
            getattr(dut, "in_last_" + s).value = int(last)
            getattr(dut, "in_a" + s).value = a & 0x1FF
            getattr(dut, "in_b" + s).value = b & 0x1FF
        while True:
            stall = rng.random() < stall_prob
            dut.ce.value = int(not stall)
            await RisingEdge(dut.clk)
            if not stall:
                break
    dut.in_valid_l.value = dut.in_valid_h.value = 0
    dut.in_last_l.value = dut.in_last_h.value = 0
    dut.ce.value = 1
    for _ in range(6):
        await RisingEdge(dut.clk)
    mon.cancel()
    return got


def check(got, cols, what):
    for s, col in zip(("l", "h"), cols):
        want = col.expected()
        assert len(got[s]) == len(want), f"{what}: column {s}: {len(got[s])} results for {len(want)} steps"
        for k, (g, w) in enumerate(zip(got[s], want)):
            assert g == w, f"{what}: column {s} step {k} {col.steps[k][:4]}...: acc {g} != {w}"


@cocotb.test()
async def test_shared_activation(dut):
    """GEMM: both columns valid with one activation; every activation value against the edge
    weights and random ones, in one-product steps (each result is one product)."""
    rng = random.Random(int(os.environ.get("DTPU_SEED", "1")))
    cocotb.start_soon(Clock(dut.clk, 10, unit="ns").start())
    await reset(dut)
    vals = list(range(LO, HI + 1))
    for chunk in range(0, len(vals), 64):
        cycles, sl, sh = [], [], []
        for s in vals[chunk:chunk + 64]:
            wls = EDGE + [rng.randint(LO, HI) for _ in range(8)]
            whs = EDGE[::-1] + [rng.randint(LO, HI) for _ in range(8)]
            for wl, wh in zip(wls, whs):
                sl.append([(s, wl)])
                sh.append([(s, wh)])
        cl, ch = Column(sl), Column(sh)
        while cl.pending():
            il, ih = cl.issue(), ch.issue()
            ih = (ih[0], ih[1], il[2], ih[3])
            cycles.append((il, ih))
        got = await run(dut, cycles, rng, 0.0)
        check(got, (cl, ch), f"shared s chunk {chunk}")


@cocotb.test()
async def test_alternating_columns(dut):
    """DWCONV with TAP_CYCLES 2: the columns issue in turn, each with its own activation."""
    rng = random.Random(int(os.environ.get("DTPU_SEED", "2")))
    cocotb.start_soon(Clock(dut.clk, 10, unit="ns").start())
    await reset(dut)
    pick = lambda: rng.choice(EDGE) if rng.random() < 0.4 else rng.randint(LO, HI)
    steps_l, steps_h = [], []
    for _ in range(40):
        n = rng.choice([1, 4, 9, 25])
        steps_l.append([(pick(), pick()) for _ in range(n)])
        steps_h.append([(pick(), pick()) for _ in range(n)])
    cl, ch = Column(steps_l), Column(steps_h)
    cycles = []
    while cl.pending():
        cycles.append((cl.issue(), None))
        cycles.append((None, ch.issue()))
    got = await run(dut, cycles, rng, 0.3)
    check(got, (cl, ch), "alternating")


@cocotb.test()
async def test_random_mix(dut):
    """Both / one / no column per cycle at random, long steps at the extremes, with stalls."""
    rng = random.Random(int(os.environ.get("DTPU_SEED", "3")))
    cocotb.start_soon(Clock(dut.clk, 10, unit="ns").start())
    await reset(dut)
    steps_l = [[(rng.randint(LO, HI), rng.randint(LO, HI)) for _ in range(rng.choice([1, 2, 3, 7, 30]))]
               for _ in range(60)]
    steps_h = [[(rng.randint(LO, HI), rng.randint(LO, HI)) for _ in range(rng.choice([1, 2, 3, 7, 30]))]
               for _ in range(60)]
    # the largest sums: 2^16 * 600 and -65280 * 600 stay exact in ACC_W
    steps_l += [[(LO, LO)] * 600, [(LO, HI)] * 600]
    steps_h += [[(HI, LO)] * 600, [(LO, LO)] * 600]
    cl, ch = Column(steps_l), Column(steps_h)
    cycles = []
    while cl.pending() or ch.pending():
        mode = rng.random()
        if mode < 0.4 and cl.pending() and ch.pending():
            il, ih = cl.issue(), ch.issue()
            cycles.append((il, ih))
        elif mode < 0.65 and cl.pending():
            cycles.append((cl.issue(), None))
        elif mode < 0.9 and ch.pending():
            cycles.append((None, ch.issue()))
        else:
            cycles.append((None, None))
    # shared cycles: H's product must use L's activation; rewrite H's step element to match
    cl2, ch2 = Column([list(s) for s in steps_l]), Column([list(s) for s in steps_h])
    fixed = []
    for il, ih in cycles:
        if il is not None and ih is not None:
            sidx, kidx = ch2.s, ch2.k
            ch2.issue()
            cl2.issue()
            a_l = il[2]
            ch2.steps[sidx][kidx] = (a_l, ih[3])
            ih = (ih[0], ih[1], a_l, ih[3])
        elif il is not None:
            cl2.issue()
        elif ih is not None:
            ch2.issue()
        fixed.append((il, ih))
    got = await run(dut, fixed, rng, 0.3)
    check(got, (cl2, ch2), "random mix")
