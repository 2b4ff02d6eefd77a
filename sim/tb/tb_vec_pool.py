"""cocotb: the vector unit's pools (dtpu_vec_pool) on their own against the golden model
(dtpu.reference.vector.average_pool / max_pool): random tiling geometries (global pools, filter
= stride, VALID and SAME), types and activations, pixel words offered with idle cycles between
and the output's room taken away at random; the result bytes equal the model's in order,
`out_end` on the last, and no pixel word is taken after it."""
import os
import random

import cocotb
import numpy as np
from cocotb.clock import Clock
from cocotb.triggers import FallingEdge, ReadOnly, RisingEdge

from dtpu.hw.vec_lower import lower_vec
from dtpu.reference import vector as rv
from tb_vec import random_pool
from tb_vec_mean import _pixel_words, _s


@cocotb.test()
async def pools_match_the_golden_model(dut):
    rnd = random.Random(int(os.environ.get("DTPU_SEED", "25")))
    cocotb.start_soon(Clock(dut.clk, 10, unit="ns").start())
    for sig in (dut.clear, dut.in_valid, dut.in_data, dut.in_last, dut.room):
        sig.value = 0
    dut.rst.value = 1
    for _ in range(2):
        await RisingEdge(dut.clk)
    await FallingEdge(dut.clk)
    dut.rst.value = 0
    done = 0
    while done < int(os.environ.get("DTPU_CASES", "30")):
        op = rnd.choice(("AVG_POOL", "MAX_POOL"))
        dt = np.dtype(rnd.choice((np.int8, np.uint8)))
        spec = random_pool(rnd, op, dt)
        if spec is None:
            continue
        done += 1
        f, _ = lower_vec(spec)
        v0, v4 = f["VEC0"], f["VEC4"]
        g = spec.geometry()
        x = np.frombuffer(rnd.randbytes(int(np.prod(spec.a_shape))), dt).reshape(spec.a_shape)
        lo, hi = _s(v0["ACT_MIN"], 16), _s(v0["ACT_MAX"], 16)
        pool = rv.average_pool if op == "AVG_POOL" else rv.max_pool
        want = pool(x, g, lo, hi).view(np.uint8).reshape(-1).tolist()
        n, h, w, c = spec.a_shape
        for name, v in dict(sgn=int(dt == np.int8), avg=int(op == "AVG_POOL"), n=n, h=h, w=w,
                            c=c, fh=v4["FH"], fw=v4["FW"], sh=v4["SH"], sw=v4["SW"],
                            pt=v4["PT"], pl=v4["PL"], act_min=v0["ACT_MIN"],
                            act_max=v0["ACT_MAX"]).items():
            getattr(dut, name).value = v
        dut.clear.value = 1
        await RisingEdge(dut.clk)
        await FallingEdge(dut.clk)
        dut.clear.value = 0
        words = list(_pixel_words(x))
        got: list[int] = []
        ended = False
        i = cycles = 0
        while i < len(words) or not ended:
            offer = i < len(words) and rnd.random() < 0.8
            dut.in_valid.value = int(offer)
            if offer:
                dut.in_data.value, dut.in_last.value = words[i]
            dut.room.value = int(rnd.random() < 0.7)
            await ReadOnly()
            took = offer and int(dut.in_ready.value)
            if int(dut.out_valid.value):
                got += int(dut.out_data.value).to_bytes(8, "little")[:int(dut.out_bytes.value)]
                ended = bool(int(dut.out_end.value))
            await FallingEdge(dut.clk)
            i += int(bool(took))
            cycles += 1
            assert cycles < 100 * len(words) + 200, f"{spec}: no end"
        dut.in_valid.value = 0
        for _ in range(3):                                  # nothing more is taken or made
            dut.in_valid.value = 1
            await ReadOnly()
            assert not int(dut.in_ready.value) and not int(dut.out_valid.value), spec
            await FallingEdge(dut.clk)
        dut.in_valid.value = 0
        assert got == want, (f"{op} {dt} {spec.a_shape} {g}: bytes differ, first at "
                             f"{next(k for k in range(len(want)) if k >= len(got) or got[k] != want[k])}")
    dut._log.info("%d pools equal to the golden model", done)
