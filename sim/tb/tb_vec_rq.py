"""cocotb: the vector unit's requantizer dtpu_vec_rq on its own against the golden model's
TFLite arithmetic (dtpu.reference.quantize: SRDHM, then RoundingDivideByPOT by -SH; with FINAL
the output offset and the clamp), over the whole int32 range of x and M.

The lanes only feed it (a + off) << 20 (ADD), 17-bit products (MUL) and MEAN's sums, and TFLite
only makes M in [2^30, 2^31): that leaves most of the multiplier's partial products (x and M
split at bit 16, dtpu_vec_rq stage 1) with zero or one-signed halves. Here x and M are any int32,
negative M included, with the corners that carry through every half: 0, +-1, INT32_MIN /
INT32_MAX, 0xFFFF / 0x10000 / 0x8000 around the split, INT32_MIN * INT32_MIN (the saturating
one). One value a cycle with idle cycles between, results LAT cycles later."""
import os
import random

import cocotb
import numpy as np
from cocotb.clock import Clock
from cocotb.triggers import FallingEdge, ReadOnly, RisingEdge

from dtpu.reference import quantize as q

FINAL = int(os.environ.get("PARAM_FINAL", "0"))
LAT = 6 if FINAL else 4

#: x and M values whose 16-bit halves are each at an edge (all ones, all zeros, the sign bit)
CORNERS = [0, 1, -1, 2, -2, 0x7FFFFFFF, -0x80000000, -0x7FFFFFFF, 0xFFFF, 0x10000, -0x10000,
           0x8000, -0x8000, 0x7FFF, 0x7FFF8000, 0x7FFFFFFF - 0xFFFF, -0x10001, 0x40000000,
           -0x40000000, 0x12345678, -0x12345678]


def _s32(v: int) -> int:
    return ((v + (1 << 31)) & 0xFFFFFFFF) - (1 << 31)


def _want_y(x: int, m: int, sh: int) -> int:
    """TFLite's MultiplyByQuantizedMultiplier for SH <= 0; SH > 0 taken as 0, SH < -31 as -31
    (the RTL's documented range)."""
    e = min(max(-sh, 0), 31)
    return int(q.rounding_divide_by_pot(q.saturating_rounding_doubling_high_mul(x, m), e))


def _want(x: int, m: int, sh: int, off: int, lo: int, hi: int) -> int:
    """The requantized int32 (FINAL = 0) or the clamped byte (FINAL = 1)."""
    y = _want_y(x, m, sh)
    if not FINAL:
        return y & 0xFFFFFFFF
    return min(max(_s32(y + off), lo), hi) & 0xFF


def _value(rnd: random.Random) -> int:
    r = rnd.random()
    if r < 0.25:
        return rnd.choice(CORNERS)
    if r < 0.35:                              # a corner nudged by a little
        return _s32(rnd.choice(CORNERS) + rnd.randint(-3, 3))
    if r < 0.5:                               # small magnitudes: the high halves all sign
        return rnd.randint(-(1 << 17), 1 << 17)
    return rnd.randint(-(1 << 31), (1 << 31) - 1)


@cocotb.test()
async def rq_matches_tflite_arithmetic(dut):
    rnd = random.Random(int(os.environ.get("DTPU_SEED", "31")))
    cocotb.start_soon(Clock(dut.clk, 10, unit="ns").start())
    dut.rst.value = 1
    dut.in_valid.value = 0
    dut.x.value = 0
    for _ in range(2):
        await RisingEdge(dut.clk)
    dut.rst.value = 0
    checked = saturated = unclamped = 0
    for k in range(120):                      # parameter sets (constant while values pass)
        m = _value(rnd) if k % 4 else rnd.randint(1 << 30, (1 << 31) - 1)    # TFLite's range
        if k % 8 == 4:                        # SRDHM(x, 2^30) = floor((x + 1) / 2): RDBPOT's ties
            m = 1 << 30
        sh = rnd.choice([0, 0, 1, 5, -1, -31, -32, -40]) if rnd.random() < 0.3 \
            else rnd.randint(-31, 0)
        off = rnd.randint(-(1 << 15), (1 << 15) - 1)
        lo, hi = sorted(rnd.randint(-300, 300) for _ in range(2))
        dut.m.value = m & 0xFFFFFFFF
        dut.sh.value = sh & 0xFF
        dut.out_off.value = off & 0xFFFF
        dut.act_min.value = lo & 0xFFFF
        dut.act_max.value = hi & 0xFFFF
        n = 48
        # half the values aimed near the clamp's window (else FINAL = 1 would check mostly the
        # clamp): x ~ (target - OUT_OFF) * 2^(31+e) / M, a few apart
        e = min(max(-sh, 0), 31)
        xs = [_value(rnd) if rnd.random() < 0.5 or m == 0 else
              max(-(1 << 31), min((1 << 31) - 1, round((rnd.randint(lo - 2, hi + 2) - off)
                                                       * 2.0 ** (31 + e) / m) + rnd.randint(-3, 3)))
              for _ in range(n)]
        if k % 10 == 0:                       # the one saturating product
            m = -0x80000000
            dut.m.value = m & 0xFFFFFFFF
            xs[rnd.randrange(n)] = -0x80000000
        want = [_want(x, m, sh, off, lo, hi) for x in xs]
        saturated += sum(x == m == -0x80000000 for x in xs)
        unclamped += sum(lo < _s32(_want_y(x, m, sh) + off) < hi for x in xs)
        got: list[int] = []
        sent_at: list[int] = []
        late: list[int] = []               # cycles from a value in to its result out
        i = cyc = 0
        while len(got) < n:
            drive = i < n and rnd.random() < 0.8
            dut.in_valid.value = int(drive)
            if drive:
                dut.x.value = xs[i] & 0xFFFFFFFF
                sent_at.append(cyc)
                i += 1
            await RisingEdge(dut.clk)
            await ReadOnly()
            cyc += 1
            if int(dut.out_valid.value):
                late.append(cyc - sent_at[len(got)])
                got.append(int((dut.y8 if FINAL else dut.y).value))
            await FallingEdge(dut.clk)
        bad = [(x, w, g) for x, w, g in zip(xs, want, got) if w != g]
        assert not bad, f"M={m} SH={sh} OUT_OFF={off} ACT={lo}..{hi}: (x, want, got) {bad[:5]}"
        assert set(late) == {LAT}, f"results {sorted(set(late))} cycles after their values, not {LAT}"
        checked += n
        dut.in_valid.value = 0
        for _ in range(LAT):                  # drain before the parameters change
            await RisingEdge(dut.clk)
    assert saturated > 0 and (not FINAL or unclamped > checked // 8), (saturated, unclamped)
    dut._log.info("%d values equal to TFLite's arithmetic (FINAL=%d, %d saturating, %d inside "
                  "the clamp)", checked, FINAL, saturated, unclamped)
