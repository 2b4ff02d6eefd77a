"""cocotb: the MXU built with PE pairs (PE_PAIR = 1) against exact integer arithmetic, issued
the two ways the core issues: GEMM (one activation word for every column, weights per column)
and DWCONV with TAP_CYCLES 2 (column groups in turn, each column its own activation word, some
taps zeroed by col_zero), for every integer precision of the build, both signednesses, random
offsets and words with the lane extremes (-128, 127, 0, 255)."""
import os
import random

import cocotb
from cocotb.clock import Clock
from cocotb.triggers import FallingEdge, RisingEdge

from dtpu.hw.config import HwConfig
from dtpu.precision import Precision

CFG = HwConfig()
COLS = int(os.environ.get("PARAM_COLS", "4"))
AW = int(os.environ.get("PARAM_AW", "55"))
PREC_EN = int(os.environ.get("PARAM_PREC_EN", "7"))
ROWS = 8
HALF = COLS // 2


def _signed(v, bits):
    v &= (1 << bits) - 1
    return v - (1 << bits) if v >> (bits - 1) else v


def lanes(word, prec):
    """The word's lanes as Python integers (sign- or zero-extended)."""
    bits = prec.bits
    out = []
    for i in range(64 // bits):
        v = (word >> (bits * i)) & ((1 << bits) - 1)
        out.append(v if prec is Precision.UINT8 else _signed(v, bits))
    return out


def operand(v, off, prec):
    return _signed(v + off, prec.bits + 1)


def rand_word(rng, prec):
    """A random word, or one whose lanes are the lane type's extremes."""
    if rng.random() < 0.3:
        bits = prec.bits
        ext = [0, (1 << (bits - 1)), (1 << (bits - 1)) - 1, (1 << bits) - 1, 1]
        return sum(rng.choice(ext) << (bits * i) for i in range(64 // bits))
    return rng.getrandbits(64)


async def issue(dut, cycles):
    """cycles: per cycle (act words, wgt words, valid, zero, first, last); returns the last
    accumulator vector seen with each column's acc_valid, per column."""
    got = {}
    for k in range(len(cycles) + 8):
        if k < len(cycles):
            acts, wgts, valid, zero, first, last = cycles[k]
            dut.act_words.value = sum(w << (64 * j) for j, w in enumerate(acts))
            dut.wgt_words.value = sum(w << (64 * j) for j, w in enumerate(wgts))
            dut.col_valid.value = valid
            dut.col_zero.value = zero
            dut.col_first.value = first
            dut.col_last.value = last
        else:
            dut.col_valid.value = 0
            dut.col_last.value = 0
        await RisingEdge(dut.clk)
        await FallingEdge(dut.clk)
        av = int(dut.acc_valid.value)
        if av:
            acc = int(dut.acc.value)
            for j in range(COLS):
                if av >> j & 1:
                    got[j] = [_signed(acc >> (AW * (j * ROWS + i)), AW) for i in range(ROWS)]
    return got


def want_of(prec, ioff, woff, per_col):
    """per_col[j]: list of (act word, wgt word, zero) -> per-row exact sums"""
    out = {}
    for j, items in per_col.items():
        sums = [0] * ROWS
        for a, w, z in items:
            for i, (x, y) in enumerate(zip(lanes(a, prec), lanes(w, prec))):
                sums[i] += (0 if z else operand(x, ioff, prec)) * operand(y, woff, prec)
        out[j] = sums
    return out


def precisions():
    return [p for p in (Precision.INT8, Precision.UINT8, Precision.INT16)
            if PREC_EN >> CFG.prec_code(p) & 1]


async def start(dut):
    cocotb.start_soon(Clock(dut.clk, 10, unit="ns").start())
    dut.rst_n.value = 0
    dut.ce.value = 1
    dut.col_valid.value = 0
    dut.col_zero.value = 0
    dut.col_first.value = 0
    dut.col_last.value = 0
    await RisingEdge(dut.clk)
    await RisingEdge(dut.clk)
    dut.rst_n.value = 1


def offsets(rng, prec):
    """Random offsets, and the ones that wrap a lane to -2^bits (e.g. int8 -128 + -128)."""
    half = 1 << (prec.bits - 1)
    return (rng.choice([rng.randint(-200, 200), -half, -(2 * half), 0]),
            rng.choice([rng.randint(-200, 200), -half, 0]))


def check(got, want, what):
    for j, w in want.items():
        assert j in got, f"{what}: column {j} gave no result"
        g = got[j]
        L = 64 // 8
        for i in range(L):
            assert g[i] == w[i], f"{what}: PE({i},{j}) {g[i]} != {w[i]}"


@cocotb.test()
async def test_gemm_shared_activation(dut):
    rng = random.Random(int(os.environ.get("DTPU_SEED", "7")))
    await start(dut)
    for prec in precisions():
        for trial in range(8):
            K = rng.randint(1, 12)
            ioff, woff = offsets(rng, prec)
            dut.prec.value = CFG.prec_code(prec)
            dut.in_offset.value = ioff & 0xFFFFFFFF
            dut.wgt_offset.value = woff & 0xFFFFFFFF
            cycles, per_col = [], {j: [] for j in range(COLS)}
            allc = (1 << COLS) - 1
            for k in range(K):
                a = rand_word(rng, prec)
                wgts = [rand_word(rng, prec) for _ in range(COLS)]
                cycles.append(([a] * COLS, wgts, allc, 0, allc if k == 0 else 0, allc if k == K - 1 else 0))
                for j in range(COLS):
                    per_col[j].append((a, wgts[j], False))
            got = await issue(dut, cycles)
            check(got, want_of(prec, ioff, woff, per_col), f"GEMM {prec.name} trial {trial} K={K}")


@cocotb.test()
async def test_dwconv_two_tap_cycles(dut):
    rng = random.Random(int(os.environ.get("DTPU_SEED", "8")))
    await start(dut)
    lo_mask = (1 << HALF) - 1
    hi_mask = lo_mask << HALF
    for prec in [p for p in precisions() if p is not Precision.INT16] + (
            [Precision.INT16] if PREC_EN >> CFG.prec_code(Precision.INT16) & 1 else []):
        for trial in range(6):
            taps = rng.choice([1, 4, 9])
            ioff, woff = offsets(rng, prec)
            dut.prec.value = CFG.prec_code(prec)
            dut.in_offset.value = ioff & 0xFFFFFFFF
            dut.wgt_offset.value = woff & 0xFFFFFFFF
            cycles, per_col = [], {j: [] for j in range(COLS)}
            for t in range(taps):
                for group_mask in (lo_mask, hi_mask):   # TAP_CYCLES 2: one group per cycle
                    acts = [rand_word(rng, prec) for _ in range(COLS)]
                    wgts = [rand_word(rng, prec) for _ in range(COLS)]
                    zero = rng.getrandbits(COLS)
                    first = (1 << COLS) - 1 if t == 0 else 0
                    last = (1 << COLS) - 1 if t == taps - 1 else 0
                    cycles.append((acts, wgts, group_mask, zero, first, last))
                    for j in range(COLS):
                        if group_mask >> j & 1:
                            per_col[j].append((acts[j], wgts[j], bool(zero >> j & 1)))
            got = await issue(dut, cycles)
            check(got, want_of(prec, ioff, woff, per_col), f"DWCONV {prec.name} trial {trial} taps={taps}")
