"""cocotb: the fp32 adder and multiplier against numpy float32 (IEEE RNE, gradual underflow).

NaN results must be the canonical quiet NaN 0x7FC00000 (numpy's NaN bits are the x86 FPU's)."""
import os
import random

import cocotb
import numpy as np
from cocotb.triggers import Timer

OP = os.environ.get("DTPU_FP_OP", "add")
SPECIAL = [0x00000000, 0x80000000, 0x00000001, 0x80000001, 0x007FFFFF, 0x00800000, 0x00400000,
           0x7F7FFFFF, 0xFF7FFFFF, 0x7F800000, 0xFF800000, 0x7FC00000, 0x7F800001, 0x3F800000,
           0xBF800000, 0x3F800001, 0x33800000, 0x34000000, 0x0C000000, 0x1F800000, 0x5F800000,
           0x3FFFFFFF, 0x00000003]


def ref(a: int, b: int) -> int:
    x = np.array([a], np.uint32).view(np.float32)
    y = np.array([b], np.uint32).view(np.float32)
    with np.errstate(all="ignore"):
        r = (x + y) if OP == "add" else (x * y)
    if np.isnan(r[0]):
        return 0x7FC00000
    return int(r.view(np.uint32)[0])


def rand_bits(rng: random.Random) -> int:
    k = rng.random()
    if k < 0.15:
        return rng.choice(SPECIAL)
    if k < 0.3:  # subnormal
        return (rng.getrandbits(1) << 31) | rng.getrandbits(23)
    if k < 0.5:  # small exponents (products underflow)
        return (rng.getrandbits(1) << 31) | (rng.randint(1, 60) << 23) | rng.getrandbits(23)
    return rng.getrandbits(32)


@cocotb.test()
async def test_against_numpy(dut):
    seed = int(os.environ.get("DTPU_SEED", "7"))
    rng = random.Random(seed)
    n = int(os.environ.get("DTPU_FP_N", "20000"))
    bad = []
    pairs = [(a, b) for a in SPECIAL for b in SPECIAL]
    for _ in range(n):
        a = rand_bits(rng)
        if OP == "add" and rng.random() < 0.3:  # near cancellation and close exponents
            b = (a ^ 0x80000000) + rng.randint(-3, 3)
            b &= 0xFFFFFFFF
        elif rng.random() < 0.2:
            b = (a & 0xFF800000) | rng.getrandbits(23)
        else:
            b = rand_bits(rng)
        pairs.append((a, b))
    for a, b in pairs:
        dut.a.value = a
        dut.b.value = b
        await Timer(1, unit="ns")
        got = int(dut.y.value)
        want = ref(a, b)
        if got != want:
            bad.append((hex(a), hex(b), hex(got), hex(want)))
    assert not bad, f"seed {seed}: {len(bad)} of {len(pairs)} differ, e.g. {bad[:5]}"
