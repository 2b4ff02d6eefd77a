"""cocotb: one post-unit lane against the golden model's requantization (dtpu.hw.units.post)."""
import os
import random

import cocotb
import numpy as np
from cocotb.clock import Clock
from cocotb.triggers import FallingEdge, RisingEdge

from dtpu.hw.config import HwConfig
from dtpu.hw.units.post import requant, wrap32

CFG = HwConfig()
MASK64 = (1 << 64) - 1
# the lane's accumulator width (the core derives it from PREC_EN; test_units builds 84 and 55)
AW = int(os.environ.get("DTPU_LANE_AW", "84"))
# the lane's built requantization variants (RQ_EN) and precisions (PREC_EN): the test drives
# only those, as CONFIG refuses the others before they reach a lane
RQ_EN = int(os.environ.get("PARAM_RQ_EN", str(CFG.RQ_EN)), 0)
PREC_EN = int(os.environ.get("PARAM_PREC_EN", "0x7F"), 0)


def wrap_signed(v, bits):
    """v as a signed `bits`-bit value (what an AW-bit input port carries)."""
    return ((v + (1 << (bits - 1))) % (1 << bits)) - (1 << (bits - 1))


def expected(prec, mode, variant, acc, bias, m, s, zp, lo, hi):
    """(value as int, ovf, wrap) the way Core.post computes one lane."""
    is8 = prec in (CFG.enums["PREC"]["INT8"], CFG.enums["PREC"]["UINT8"])
    if mode == CFG.OUT_MODE_RAW:
        lim = 31 if is8 else 63
        ovf = not -(1 << lim) <= acc < (1 << lim)
        return (acc & 0xFFFFFFFF) if is8 else (acc & MASK64), ovf, False
    total = acc + bias
    ovf = wrap = False
    if variant == CFG.RQ_VARIANT_INT64:
        ovf = abs(total) >= 1 << 47
        if ovf:
            return None, True, False
    else:
        w = ((total + (1 << 31)) & 0xFFFFFFFF) - (1 << 31)
        wrap = w != total
        total = w
    r = int(requant(CFG, np.array([total], np.int64), np.array([m], np.int64), np.array([s], np.int64), variant)[0])
    y = int(wrap32(np.array([r + zp], np.int64))[0])
    y = min(max(y, lo), hi)
    name = {v: k for k, v in CFG.enums["PREC"].items()}[prec]
    tmin, tmax = {"INT8": (-128, 127), "UINT8": (0, 255), "INT16": (-32768, 32767)}[name]
    y = min(max(y, tmin), tmax)
    return y & MASK64, ovf, wrap


def fp32_tie_vector(rng):
    """(t, scale bits) whose exact product t*scale is n + 1/2 - ulp/2 (n odd, |n| < 128): the
    fp32 product is a tie that rounds to even (n + 1/2), which then rounds to the even integer
    n + 1; rounding the tie the other way would give n. The lane output shows the difference."""
    while True:
        n = rng.randrange(1, 127, 2)
        e = n.bit_length() - 1                   # n in [2^e, 2^(e+1)): fp32 ulp 2^(e-23)
        k = (n << (24 - e)) + (1 << (23 - e)) - 1  # (n + 1/2 - ulp/2) * 2^(24-e), odd
        for t in (3, 5, 7, 9, 11, 13):
            if k % t == 0 and k // t < (1 << 24):
                scale = (k // t) * 2.0 ** -(24 - e)
                sign = rng.choice([-1, 1])
                return sign * t, int(np.array(scale, np.float32).view(np.uint32))


@cocotb.test()
async def test_requant_and_raw(dut):
    seed = int(os.environ.get("DTPU_SEED", "3"))
    rng = random.Random(seed)
    cocotb.start_soon(Clock(dut.clk, 10, unit="ns").start())
    dut.rst_n.value = 0
    dut.ce.value = 1
    dut.in_valid.value = 0
    for _ in range(2):
        await RisingEdge(dut.clk)
    dut.rst_n.value = 1
    P = CFG.enums["PREC"]
    combos = [(P[p], CFG.OUT_MODE_REQUANT, v) for p in ("INT8", "UINT8", "INT16")
              for v in CFG.enums["RQ_VARIANT"].values() if RQ_EN >> v & 1]
    combos += [(P[p], CFG.OUT_MODE_RAW, 0) for p in ("INT8", "INT16", "INT32", "INT64")]
    combos = [cb for cb in combos if PREC_EN >> cb[0] & 1]
    assert any(cb[1] == CFG.OUT_MODE_REQUANT for cb in combos), (RQ_EN, PREC_EN)
    n = int(os.environ.get("DTPU_LANE_N", "400"))
    bad = []
    for prec, mode, variant in combos:
        dut.prec.value = prec
        dut.out_mode.value = mode
        dut.variant.value = variant
        lo, hi = sorted(rng.randint(-40000, 40000) for _ in range(2))
        if rng.random() < 0.5:
            lo, hi = -(1 << 31), (1 << 31) - 1
        # dtpu_post hands REQUANT lanes the bounds saturated to the lane type
        name = {v: k for k, v in P.items()}[prec]
        tmin, tmax = {"INT8": (-128, 127), "UINT8": (0, 255)}.get(name, (-32768, 32767))
        sat = (lambda v: min(max(v, tmin), tmax)) if mode == CFG.OUT_MODE_REQUANT else (lambda v: v)
        dut.act_min.value = sat(lo) & 0xFFFFFFFF
        dut.act_max.value = sat(hi) & 0xFFFFFFFF
        vecs = []
        for _ in range(n):
            k = rng.random()
            tie = False
            acc = rng.randint(-(1 << 33), 1 << 33) if k < 0.5 else rng.choice(
                [0, 1, -1, (1 << 31) - 1, -(1 << 31), 1 << 31, (1 << 46), -(1 << 46) - 5,
                 (1 << 63) - 1, -(1 << 63), 1 << 63, rng.randint(-(1 << 70), 1 << 70)])
            if variant == CFG.RQ_VARIANT_INT64:
                bias = rng.randint(-(1 << 45), 1 << 45)
                s = rng.randint(-15, 14)
            else:
                bias = rng.randint(-(1 << 31), (1 << 31) - 1)
                s = rng.randint(-31, 31) if rng.random() < 0.3 else rng.randint(-12, 2)
            m = rng.choice([rng.randint(1 << 30, (1 << 31) - 1), rng.randint(-(1 << 31), (1 << 31) - 1),
                            -(1 << 31), 0x7FFF0000, 0x7FFEFFFF, 0])
            if variant == CFG.RQ_VARIANT_FP32 and rng.random() < 0.7:
                # a float32 scale as the lowering writes it: ties (dyadic), real-valued, tiny
                scale = rng.choice([rng.choice([1.0, 3.0, 5.0]) * 2.0 ** -rng.randint(1, 12),
                                    rng.uniform(1e-6, 2.0), rng.uniform(2.0, 255.0)])
                m = int(np.array(scale, np.float32).view(np.uint32))
            elif variant == CFG.RQ_VARIANT_FP32 and rng.random() < 0.3:
                acc, m = fp32_tie_vector(rng)
                bias = 0
                tie = True
            elif variant == CFG.RQ_VARIANT_FP32 and rng.random() < 0.4:
                # |t| of 24-25 bits times a short odd mantissa: the fp32 product drops one or
                # two bits, often exactly half an ulp (ties to even), before the integer rounding
                acc = rng.choice([-1, 1]) * rng.randint(1 << 23, 1 << 25)
                bias = 0
                c = rng.choice([3, 5, 7, 0x800001, 0xFFFFFF])
                # |p| in [2^21, 2^24): ulps of 1/4 .. 1, where the product's tie decides the integer
                scale = c * 2.0 ** -((c * abs(acc)).bit_length() - rng.randint(22, 24))
                m = int(np.array(scale, np.float32).view(np.uint32))
            elif variant == CFG.RQ_VARIANT_FP32 and rng.random() < 0.5:
                # scales that make the fp32 product special: zero, subnormal, infinite, NaN,
                # huge (overflow to inf), tiny normal (subnormal products), negative
                m = rng.choice([0x00000000, 0x80000000, 0x00000001, 0x007FFFFF, 0x80400000,
                                0x7F800000, 0xFF800000, 0x7FC00000, 0x7F800001, 0xFFFFFFFF,
                                0x7F7FFFFF, 0x5F000000, 0x00800000, 0x0C000000, 0x33000000,
                                0x33000001, 0xBF000000, 0x3F000000, 0x4B000000, 0xCB7FFFFF])
                acc = rng.randint(-(1 << 20), 1 << 20) if rng.random() < 0.5 else acc
                bias = rng.randint(-(1 << 12), 1 << 12) if rng.random() < 0.5 else bias
            zp = 0 if tie else rng.randint(-32768, 32767)
            acc = wrap_signed(acc, AW)
            vecs.append((acc, bias, m, s, zp))
        # eight lane registers (dtpu_post_lane's pipeline, part of LAT_POST): the first value
        # must appear exactly then
        lat = 8
        got = []
        first = None
        for i in range(n + lat):
            if i < n:
                acc, bias, m, s, zp = vecs[i]
                dut.in_valid.value = 1
                dut.in_acc.value = acc & ((1 << AW) - 1)
                dut.in_bias.value = bias & MASK64
                dut.in_rq.value = (m & 0xFFFFFFFF) | ((s & 0xFF) << 32) | ((zp & 0xFFFF) << 48)
            else:
                dut.in_valid.value = 0
            await RisingEdge(dut.clk)
            await FallingEdge(dut.clk)
            if dut.out_valid.value:
                first = i if first is None else first
                got.append((int(dut.out_value.value), int(dut.out_ovf.value), int(dut.out_wrap.value)))
        assert len(got) == n, (len(got), n)
        assert first == lat - 1, (mode, first, lat)
        for v, (val, ovf, wrap) in zip(vecs, got):
            want_v, want_o, want_w = expected(prec, mode, variant, *v, lo, hi)
            if bool(ovf) != want_o or bool(wrap) != want_w or (want_v is not None and not want_o and val != want_v):
                bad.append((prec, mode, variant, v, (hex(val), ovf, wrap), (want_v, want_o, want_w)))
    assert not bad, f"seed {seed}: {len(bad)} lanes differ, e.g. {bad[:3]}"
