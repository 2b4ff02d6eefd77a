"""cocotb: one SMAC PE against exact Python integer arithmetic, every integer precision."""
import os
import random

import cocotb
from cocotb.clock import Clock
from cocotb.triggers import RisingEdge, ReadOnly

OPW = int(os.environ.get("PARAM_OPW", "9"))
ACC_W = int(os.environ.get("PARAM_ACC_W", "36"))
INT64_MAX = (1 << 63) - 1


def wrap(v, bits):
    v &= (1 << bits) - 1
    return v - (1 << bits) if v >> (bits - 1) else v


async def reset(dut):
    dut.rst_n.value = 0
    dut.ce.value = 1
    dut.in_valid.value = 0
    dut.in_first.value = 0
    dut.in_last.value = 0
    dut.in_int64.value = 0
    dut.in_a.value = 0
    dut.in_b.value = 0
    for _ in range(2):
        await RisingEdge(dut.clk)
    dut.rst_n.value = 1
    await RisingEdge(dut.clk)


def lane_bits():
    """Lane widths this PE width serves (OPW = lane bits + 1)."""
    return [b for b in (8, 16, 32, 64) if b + 1 <= OPW]


async def run_steps(dut, steps, stall_prob=0.0, rng=None):
    """Feed steps (lists of (a, b, int64)) back to back; collect (acc, ovf) per step."""
    results = []
    ovf_seen = []

    async def monitor():
        ovf = False
        while True:
            await RisingEdge(dut.clk)
            await ReadOnly()
            if dut.ce.value and dut.prod_ovf.value:
                ovf = True
            if dut.ce.value and dut.acc_valid.value:
                results.append(dut.acc.value.to_signed())
                ovf_seen.append(ovf)
                ovf = False

    mon = cocotb.start_soon(monitor())
    for step in steps:
        for i, (a, b, i64) in enumerate(step):
            dut.in_valid.value = 1
            dut.in_first.value = int(i == 0)
            dut.in_last.value = int(i == len(step) - 1)
            dut.in_int64.value = int(i64)
            dut.in_a.value = a & ((1 << OPW) - 1)
            dut.in_b.value = b & ((1 << OPW) - 1)
            while True:  # random global stalls: the PE must freeze
                stall = rng is not None and rng.random() < stall_prob
                dut.ce.value = int(not stall)
                await RisingEdge(dut.clk)
                if not stall:
                    break
    dut.in_valid.value = 0
    dut.in_last.value = 0
    dut.ce.value = 1
    for _ in range(6):
        await RisingEdge(dut.clk)
    mon.cancel()
    return results, ovf_seen


def expected(step):
    acc = sum(a * b for a, b, _ in step)
    ovf = any(i64 and abs(a * b) > INT64_MAX for a, b, i64 in step)
    return wrap(acc, ACC_W), ovf


def edges(bits):
    lo, hi = -(1 << bits), (1 << bits) - 1
    return [lo, hi, 0, 1, -1, lo + 1, hi - 1]


@cocotb.test()
async def test_int_precisions_random(dut):
    """Random dot products per lane width, with random global stalls."""
    seed = int(os.environ.get("DTPU_SEED", "1"))
    rng = random.Random(seed)
    cocotb.start_soon(Clock(dut.clk, 10, unit="ns").start())
    await reset(dut)
    for bits in lane_bits():
        lo, hi = -(1 << bits), (1 << bits) - 1
        steps = []
        for _ in range(20):
            n = rng.choice([1, 2, 3, 5, 17])
            steps.append([(rng.randint(lo, hi), rng.randint(lo, hi), bits == 64) for _ in range(n)])
        got, ovf = await run_steps(dut, steps, stall_prob=0.3, rng=rng)
        want = [expected(s) for s in steps]
        assert len(got) == len(steps), f"seed {seed}: {len(got)} results for {len(steps)} steps"
        for k, (g, o, (w, wo)) in enumerate(zip(got, ovf, want)):
            if wo:
                assert o, f"seed {seed} bits {bits} step {k}: product overflow not flagged"
                continue
            assert g == w, f"seed {seed} bits {bits} step {k}: acc {g} != {w}"
            assert o == wo, f"seed {seed} bits {bits} step {k}: ovf {o} != {wo}"


@cocotb.test()
async def test_int_edges(dut):
    """Extreme operands: largest products, sign edges, int64 product overflow boundary."""
    cocotb.start_soon(Clock(dut.clk, 10, unit="ns").start())
    await reset(dut)
    steps = []
    for bits in lane_bits():
        e = edges(bits)
        for a in e:
            for b in e:
                steps.append([(a, b, bits == 64)])
        # long accumulation of the largest product (exact, no wrap in ACC_W)
        steps.append([(e[0], e[0], False)] * 64)
        steps.append([(e[0], e[1], False)] * 64)
    if OPW >= 65:
        # int64 products around INT64_MAX: 2^62 * 2 = 2^63 overflows, -2^63 flagged too
        steps.append([((1 << 62), 2, True)])
        steps.append([((1 << 62), -2, True)])
        steps.append([((1 << 62) - 1, 2, True)])
        steps.append([(3037000499, 3037000499, True)])   # < 2^63
        steps.append([(3037000500, 3037000500, True)])   # > 2^63
    got, ovf = await run_steps(dut, steps)
    want = [expected(s) for s in steps]
    assert len(got) == len(steps)
    for k, (g, o, (w, wo)) in enumerate(zip(got, ovf, want)):
        assert o == wo, f"step {k} {steps[k][:1]}: ovf {o} != {wo}"
        if not wo:
            assert g == w, f"step {k} {steps[k][:1]}: acc {g} != {w}"
