"""cocotb: the MXU (Filter&Select + SMAC array) against numpy: every precision, per-PE exact
integer accumulation with offsets, fp32/bf16 products rounded to fp32 and the FP_PARTIALS
interleaved partials summed as ((p0+p1)+(p2+p3)) — the golden model's order."""
import os
import random

import cocotb
import numpy as np
from cocotb.clock import Clock
from cocotb.triggers import FallingEdge, RisingEdge

from dtpu.hw.config import HwConfig
from dtpu.pack import unpack
from dtpu.precision import Precision

CFG = HwConfig()
COLS = int(os.environ.get("PARAM_COLS", "2"))
ROWS = 8
AW = 84


def _signed(v, bits):
    v &= (1 << bits) - 1
    return v - (1 << bits) if v >> (bits - 1) else v


def expected(prec, ioff, woff, acts, wgts):
    """acts/wgts: [step word][col] words -> [(row, col) -> value]"""
    L = prec.lanes
    out = {}
    for j in range(COLS):
        a = np.stack([unpack(np.array([w[j]], np.uint64), prec, L) for w in acts])
        b = np.stack([unpack(np.array([w[j]], np.uint64), prec, L) for w in wgts])
        for i in range(L):
            if prec.is_float:
                parts = np.zeros(4, np.float32)
                for k in range(len(acts)):
                    parts[k % 4] = np.float32(parts[k % 4] + np.float32(a[k, i] * b[k, i]))
                v = np.float32(np.float32(parts[0] + parts[1]) + np.float32(parts[2] + parts[3]))
                out[(i, j)] = int(np.array([v], np.float32).view(np.uint32)[0])
            else:
                bits = prec.bits + 1
                out[(i, j)] = sum(_signed(int(a[k, i]) + ioff, bits) * _signed(int(b[k, i]) + woff, bits)
                                  for k in range(len(acts)))
    return out


@cocotb.test()
async def test_mxu_all_precisions(dut):
    rng = random.Random(int(os.environ.get("DTPU_SEED", "5")))
    nrng = np.random.default_rng(5)
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
    for prec in [Precision.INT8, Precision.UINT8, Precision.INT16, Precision.INT32,
                 Precision.INT64, Precision.FP32, Precision.BF16]:
        for trial in range(6):
            K = rng.randint(1, 9)
            ioff = 0 if prec.is_float else rng.randint(-100, 100)
            woff = 0 if prec.is_float else rng.randint(-100, 100)
            if prec.is_float:
                from dtpu.pack import pack
                mk = lambda: [int(pack((nrng.standard_normal(prec.lanes) * 10 ** rng.randint(-3, 3)).astype(np.float32), prec)[0]) for _ in range(COLS)]
            else:
                mk = lambda: [rng.getrandbits(64) if prec is not Precision.INT64 else rng.getrandbits(40) for _ in range(COLS)]
            acts = [mk() for _ in range(K)]
            wgts = [mk() for _ in range(K)]
            dut.prec.value = CFG.prec_code(prec)
            dut.in_offset.value = ioff & 0xFFFFFFFF
            dut.wgt_offset.value = woff & 0xFFFFFFFF
            got = None
            for k in range(K + 8):
                if k < K:
                    dut.act_words.value = sum(w << (64 * j) for j, w in enumerate(acts[k]))
                    dut.wgt_words.value = sum(w << (64 * j) for j, w in enumerate(wgts[k]))
                    dut.col_valid.value = (1 << COLS) - 1
                    dut.col_first.value = (1 << COLS) - 1 if k == 0 else 0
                    dut.col_last.value = (1 << COLS) - 1 if k == K - 1 else 0
                else:
                    dut.col_valid.value = 0
                    dut.col_last.value = 0
                await RisingEdge(dut.clk)
                await FallingEdge(dut.clk)
                if prec.is_float and int(dut.fp_valid.value) & 1:
                    got = int(dut.fp_sum.value)
                if not prec.is_float and int(dut.acc_valid.value) & 1:
                    got = int(dut.acc.value)
            assert got is not None, f"{prec}: no result"
            want = expected(prec, ioff, woff, acts, wgts)
            for (i, j), w in want.items():
                if prec.is_float:
                    g = (got >> (32 * (j * ROWS + i))) & 0xFFFFFFFF
                else:
                    g = _signed(got >> (AW * (j * ROWS + i)), AW)
                assert g == w, f"{prec} trial {trial} K={K} PE({i},{j}): {g:#x} != {w:#x}"
