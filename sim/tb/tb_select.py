"""cocotb: Filter&Select (word -> row operands) and Compact&Select (lanes -> word) against
dtpu.pack, every precision."""
import os
import random

import cocotb
import numpy as np
from cocotb.triggers import Timer

from dtpu.hw.config import HwConfig
from dtpu.pack import pack, unpack
from dtpu.precision import Precision

CFG = HwConfig()
PRECS = [Precision.INT8, Precision.UINT8, Precision.INT16, Precision.INT32, Precision.INT64,
         Precision.FP32, Precision.BF16]


def _signed(v, bits):
    v &= (1 << bits) - 1
    return v - (1 << bits) if v >> (bits - 1) else v


@cocotb.test()
async def test_filter_select(dut):
    if os.environ.get("DTPU_TOP") != "dtpu_filter_select":
        return
    rng = random.Random(11)
    # a build with fewer precisions (PREC_EN) is checked on the ones it has
    prec_en = int(os.environ.get("DTPU_PREC_EN", "127"))
    for prec in [p for p in PRECS if prec_en >> CFG.prec_code(p) & 1]:
        L = prec.lanes
        for _ in range(200):
            word = rng.getrandbits(64)
            off = 0 if prec.is_float else rng.choice([0, rng.randint(-300, 300), rng.getrandbits(32) - (1 << 31)])
            dut.word.value = word
            dut.prec.value = CFG.prec_code(prec)
            dut.offset.value = off & 0xFFFFFFFF
            await Timer(1, unit="ns")
            ops = int(dut.operands.value)
            lanes = unpack(np.array([word], np.uint64), prec, L)
            for i in range(8):
                got = _signed(ops >> (65 * i), 65)
                if i >= L:
                    want = 0
                elif prec.is_float:
                    want = int(np.array([lanes[i]], np.float32).view(np.uint32)[0])
                else:
                    # x + offset kept in lane_bits + 1 bits
                    want = _signed(int(lanes[i]) + off, prec.bits + 1)
                assert got == want, (prec, hex(word), off, i, got, want)


@cocotb.test()
async def test_compact_select(dut):
    if os.environ.get("DTPU_TOP") != "dtpu_compact_select":
        return
    rng = random.Random(12)
    for log_l, prec in ((3, Precision.INT8), (2, Precision.INT16), (1, Precision.INT32), (0, Precision.INT64)):
        L = 1 << log_l
        for _ in range(100):
            info = np.iinfo(prec.value_dtype)
            vals = [rng.randint(int(info.min), int(info.max)) for _ in range(L)]
            ext = sum((v & ((1 << 64) - 1)) << (64 * r) for r, v in enumerate(vals))
            ext |= rng.getrandbits(64) << (64 * 7) if L < 8 else 0  # garbage in unused lanes
            dut.values.value = ext
            dut.log_lanes.value = log_l
            await Timer(1, unit="ns")
            want = int(pack(np.array(vals, prec.value_dtype), prec)[0])
            assert int(dut.word.value) == want, (prec, vals)
