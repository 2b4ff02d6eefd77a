"""cocotb: the vector unit's MEAN datapath (dtpu_vec_mean) on its own against the golden model
(dtpu.reference.vector.mean_hw with the descriptor's integers, lower_vec): random shapes, types
and scales, pixel words offered with idle cycles between and the output's room taken away at
random; each result word's bytes equal the model's N x C bytes in order, `out_end` on the
last, and no pixel word is taken after it."""
import os
import random

import cocotb
import numpy as np
from cocotb.clock import Clock
from cocotb.triggers import FallingEdge, ReadOnly, RisingEdge

from dtpu.hw.vec_lower import VecSpec, lower_vec
from dtpu.reference import vector as rv

LOG_ROW = int(os.environ.get("PARAM_LOG_ROW", "4"))


def _q(rnd, dt):
    info = np.iinfo(dt)
    return float(np.float32(10 ** rnd.uniform(-3, 0))), rnd.randint(int(info.min), int(info.max))


def _s(v, bits):
    return v - (1 << bits) if v >> (bits - 1) else v


def _pixel_words(x: np.ndarray):
    """(word, last) of each pixel's channels in 8-byte words, the last word's bytes past C 0xA5
    (don't-care lanes the datapath must not use)."""
    n, h, w, c = x.shape
    wpx = -(-c // 8)
    pad = np.full((n, h, w, wpx * 8), 0xA5, np.uint8)
    pad[..., :c] = x.view(np.uint8)
    words = pad.reshape(-1, wpx, 8).view(np.uint64).reshape(-1, wpx)
    for px in words:
        for j, wd in enumerate(px):
            yield int(wd), j == wpx - 1


@cocotb.test()
async def mean_matches_the_golden_model(dut):
    rnd = random.Random(int(os.environ.get("DTPU_SEED", "25")))
    cocotb.start_soon(Clock(dut.clk, 10, unit="ns").start())
    for sig in (dut.clear, dut.in_valid, dut.in_data, dut.in_last, dut.room):
        sig.value = 0
    dut.rst.value = 1
    for _ in range(2):
        await RisingEdge(dut.clk)
    await FallingEdge(dut.clk)
    dut.rst.value = 0
    for case in range(int(os.environ.get("DTPU_CASES", "24"))):
        dt = np.dtype(rnd.choice((np.int8, np.uint8)))
        shape = (rnd.randint(1, 3), rnd.randint(1, 5), rnd.randint(1, 5),
                 rnd.randint(1, 8 << LOG_ROW))
        spec = VecSpec("MEAN", dt, shape, _q(rnd, dt), _q(rnd, dt))
        f, _ = lower_vec(spec)
        v0, v6, v7 = f["VEC0"], f["VEC6"], f["VEC7"]
        x = np.frombuffer(rnd.randbytes(int(np.prod(shape))), dt).reshape(shape)
        p = rv.MeanParams(shape[1] * shape[2], _s(v7["IN1_OFF"], 16), _s(v6["MO"], 32),
                          _s(v6["SHO"], 8), _s(v0["OUT_OFF"], 16), _s(v0["ACT_MIN"], 16),
                          _s(v0["ACT_MAX"], 16))
        want = rv.mean_hw(x, p).view(np.uint8).reshape(-1).tolist()
        dut.sgn.value = int(dt == np.int8)
        dut.c.value = shape[3]
        dut.hw.value = shape[1] * shape[2]
        dut.n.value = shape[0]
        dut.in_off.value = v7["IN1_OFF"]
        dut.mo.value = v6["MO"]
        dut.sho.value = v6["SHO"]
        dut.out_off.value = v0["OUT_OFF"]
        dut.act_min.value = v0["ACT_MIN"]
        dut.act_max.value = v0["ACT_MAX"]
        dut.clear.value = 1
        await RisingEdge(dut.clk)
        await FallingEdge(dut.clk)
        dut.clear.value = 0
        words = list(_pixel_words(x))
        got: list[int] = []
        ended = False
        i = 0
        cycles = 0
        while not ended or i < len(words) + 4:
            offer = i < len(words) and rnd.random() < 0.8
            dut.in_valid.value = int(offer)
            if offer:
                dut.in_data.value, dut.in_last.value = words[i]
            dut.room.value = int(rnd.random() < 0.7)
            await ReadOnly()
            took = offer and int(dut.in_ready.value)
            if ended:
                assert not took, f"case {case}: a word taken after the last result"
            if int(dut.out_valid.value):
                nb = int(dut.out_bytes.value)
                got += int(dut.out_data.value).to_bytes(8, "little")[:nb]
                ended = bool(int(dut.out_end.value))
            await FallingEdge(dut.clk)
            if took:
                i += 1
            if ended and i >= len(words):
                i += 1                      # a few more offers of nothing, then stop
            cycles += 1
            assert cycles < 100 * len(words) + 200, f"case {case}: no end"
        dut.in_valid.value = 0
        assert got == want, (f"case {case} {dt} {shape}: bytes differ from the model, first at "
                             f"{next(k for k in range(len(want)) if k >= len(got) or got[k] != want[k])}")
    dut._log.info("MEAN datapath equal to the golden model")
