"""cocotb: the vector unit's pools (dtpu_vec_pool) on their own against the golden model
(dtpu.reference.vector.average_pool / max_pool; dtpu.hw.units.vector.pool_schedule): random
geometries (tb_vec.random_pool: global, tiling and overlapping windows, VALID and SAME) and the
corners (a 1x1 image, a SAME window larger than the image, C not a multiple of 8), types and
activations, pixel words offered with idle cycles between and the output's room taken away at
random (or neither, every other case), every third case's fields other than the window's set
after `ready` (the walk loaded again from them); the result bytes equal the model's in order, `out_end`
on the last, no pixel word is taken after it, the operations are the schedule's in number and
each result word comes from the operation the schedule says; with nothing stalling, one
operation a cycle from the first pixel word to the last operation."""
import os
import random

import cocotb
import numpy as np
from cocotb.clock import Clock
from cocotb.triggers import FallingEdge, ReadOnly, RisingEdge

from dtpu.hw.listformat import Format
from dtpu.hw.units import vector as vu
from dtpu.hw.vec_lower import VecSpec, lower_vec
from dtpu.reference import vector as rv
from tb_vec import random_pool
from tb_vec_mean import _pixel_words, _s

FMT = Format()


#: a result word leaves this many cycles after the operation that makes it (dtpu_vec_pool's
#: result pipe: OUT_X = 5 registers and out_data's; dtpu_vec's PL_X)
OUT_LAT = 6

#: the sizes are made from the window fields within this many cycles (four 9-cycle dividers,
#: a cycle to latch their fields, three registers of sizes), the walk loaded from them and
#: stepped to its first operation three cycles later (dtpu_vec_pool's `pr`)
READY_CYCLES = 1 + 9 + 3 + 3


async def _ready(dut, what) -> None:
    """Wait (at a falling edge) for `ready`: the sizes made from the fields as they are, no
    later than READY_CYCLES after they were set."""
    for _ in range(READY_CYCLES + 1):
        await ReadOnly()
        if int(dut.ready.value):
            await FallingEdge(dut.clk)
            return
        await FallingEdge(dut.clk)
    raise AssertionError(f"{what}: not ready {READY_CYCLES} cycles after its fields")


@cocotb.test()
async def avg_pool_window_limit(dut):
    """AVG_POOL takes windows of up to VEC_AVG_AREA taps (FH x FW <= 256: its reciprocals'
    exact range) and raises geom_bad beyond; MAX_POOL takes any; `ready` falls when a window
    field changes and rises again once the sizes are made from the new ones."""
    cocotb.start_soon(Clock(dut.clk, 10, unit="ns").start())
    for sig in (dut.clear, dut.in_valid, dut.in_data, dut.in_last, dut.room):
        sig.value = 0
    dut.rst.value = 1
    for _ in range(2):
        await RisingEdge(dut.clk)
    await FallingEdge(dut.clk)
    dut.rst.value = 0
    area = 256
    assert area == int(FMT.mem["VEC_AVG_AREA"])
    cases = [(16, 16), (17, 15), (1, 255), (2, 128), (2, 129), (255, 1), (255, 2), (128, 3),
             (15, 17), (16, 17), (255, 255), (19, 13)]
    for fh, fw in cases:
        for avg in (1, 0):
            # a global pool of an fh x fw image: one window, one accumulator word
            for name, v in dict(sgn=1, avg=avg, n=1, h=fh, w=fw, c=8, fh=fh, fw=fw, sh=1, sw=1,
                                pt=0, pl=0, oh=1, ow=1, act_min=0xFF80, act_max=0x7F).items():
                getattr(dut, name).value = v
            await FallingEdge(dut.clk)
            await ReadOnly()
            # (AVG after MAX changes no window field: `ready` holds, geom_bad follows a cycle
            # later, as the other fields' sizes)
            assert not (avg and int(dut.ready.value)), \
                f"{fh}x{fw}: ready with its window fields just changed"
            await FallingEdge(dut.clk)
            await _ready(dut, f"{fh}x{fw}")
            bad = bool(avg and fh * fw > area)
            assert bool(int(dut.geom_bad.value)) == bad, \
                f"{'AVG' if avg else 'MAX'}_POOL {fh}x{fw}: geom_bad {int(dut.geom_bad.value)}"
    dut._log.info("%d windows against the AVG_POOL limit", len(cases))


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
    row_words = 1 << int(os.environ.get("PARAM_LOG_ROW", "8"))
    q = (0.05, 3)
    corners = [VecSpec("AVERAGE_POOL_2D", np.dtype(np.int8), (1, 1, 1, 5), q, q, filter=(3, 3),
                       stride=(2, 2), padding="SAME"),
               VecSpec("MAX_POOL_2D", np.dtype(np.uint8), (2, 2, 3, 13), q, q, filter=(4, 4),
                       stride=(1, 1), padding="SAME"),
               VecSpec("AVERAGE_POOL_2D", np.dtype(np.uint8), (1, 3, 2, 17), q, q, filter=(4, 3),
                       stride=(3, 1), padding="SAME"),
               VecSpec("MAX_POOL_2D", np.dtype(np.int8), (1, 7, 6, 3), q, q, filter=(1, 2),
                       stride=(3, 3), padding="VALID"),
               # Inception's pool branch and its average pool (tests/test_rtl_vector.py)
               VecSpec("MAX_POOL_2D", np.dtype(np.int8), (1, 16, 16, 12), q, q, filter=(3, 3),
                       stride=(1, 1), padding="SAME"),
               VecSpec("AVERAGE_POOL_2D", np.dtype(np.int8), (1, 16, 16, 8), q, q,
                       filter=(3, 3), stride=(1, 1), padding="SAME"),
               # the reciprocals' bounds (VEC_AVG_AREA = 256 taps): the largest sums of the
               # largest window, either sign, and the counts of windows clipped by SAME
               # padding (15 x 15 over 9 x 9: 64 .. 81 taps; 16 x 16 at strides 3 and 5)
               VecSpec("AVERAGE_POOL_2D", np.dtype(np.int8), (1, 16, 16, 9), q, q,
                       filter=(16, 16), stride=(1, 1), padding="VALID"),
               VecSpec("AVERAGE_POOL_2D", np.dtype(np.uint8), (2, 16, 16, 8), q, q,
                       filter=(16, 16), stride=(1, 1), padding="VALID"),
               VecSpec("AVERAGE_POOL_2D", np.dtype(np.uint8), (1, 9, 9, 3), q, q,
                       filter=(15, 15), stride=(1, 1), padding="SAME"),
               VecSpec("AVERAGE_POOL_2D", np.dtype(np.int8), (1, 16, 16, 2), q, q,
                       filter=(16, 16), stride=(3, 5), padding="SAME")]
    # the corners' bytes: random, or each the type's minimum or maximum at random (the sums'
    # extremes), or all one of them
    fills = {6: "min", 7: "max", 8: "extreme", 9: "extreme"}
    done = lates = 0
    prev_others = None
    while done < int(os.environ.get("DTPU_CASES", "30")) + len(corners):
        if done < len(corners):
            spec = corners[done]
            op = {"AVERAGE_POOL_2D": "AVG_POOL", "MAX_POOL_2D": "MAX_POOL"}[spec.op]
            dt = spec.dtype
        else:
            op = rnd.choice(("AVG_POOL", "MAX_POOL"))
            dt = np.dtype(rnd.choice((np.int8, np.uint8)))
            spec = random_pool(rnd, op, dt, row_words)
            if spec is None:
                continue
        steady = done % 2 == 1
        done += 1
        f, _ = lower_vec(spec)
        v0, v4 = f["VEC0"], f["VEC4"]
        g = spec.geometry()
        x = np.frombuffer(rnd.randbytes(int(np.prod(spec.a_shape))), dt).reshape(spec.a_shape)
        fill = fills.get(done - 1)
        if fill is not None:
            ext = np.iinfo(dt)
            x = {"min": np.full(spec.a_shape, ext.min, dt), "max": np.full(spec.a_shape, ext.max, dt),
                 "extreme": np.where(x.view(np.uint8) & 1, ext.max, ext.min).astype(dt)}[fill]
        lo, hi = _s(v0["ACT_MIN"], 16), _s(v0["ACT_MAX"], 16)
        pool = rv.average_pool if op == "AVG_POOL" else rv.max_pool
        want = pool(x, g, lo, hi).view(np.uint8).reshape(-1).tolist()
        n, h, w, c = spec.a_shape
        job = vu.VecJob(op, dt, 0, 0, 0, 0, spec.a_shape, (n, g.oh, g.ow, c),
                        {"VEC4": v4, "VEC7": f["VEC7"]})
        n_ops, made = vu.pool_schedule(job, 8)
        others = dict(n=n, h=h, w=w, c=c, oh=g.oh, ow=g.ow)
        # every third case: the fields other than the window's change after `ready` (the
        # previous case's first, as dtpu_vec's VEC7 after its `clear`, the window fields
        # unchanged): `ready` falls and the walk is loaded again from the new ones
        late = (done - 1) % 3 == 2 and prev_others is not None and prev_others != others
        for name, v in dict(sgn=int(dt == np.int8), avg=int(op == "AVG_POOL"),
                            **(prev_others if late else others),
                            fh=v4["FH"], fw=v4["FW"], sh=v4["SH"], sw=v4["SW"],
                            pt=v4["PT"], pl=v4["PL"], act_min=v0["ACT_MIN"],
                            act_max=v0["ACT_MAX"]).items():
            getattr(dut, name).value = v
        prev_others = others
        dut.clear.value = 1
        await RisingEdge(dut.clk)
        await FallingEdge(dut.clk)
        dut.clear.value = 0
        await _ready(dut, spec)
        if late:
            for name, v in others.items():
                getattr(dut, name).value = v
            await ReadOnly()
            assert not int(dut.ready.value), f"{spec}: ready with its fields just changed"
            await FallingEdge(dut.clk)
            await _ready(dut, spec)
            lates += 1
        assert not int(dut.geom_bad.value), f"{spec}: geom_bad"
        words = list(_pixel_words(x))
        got: list[int] = []
        emitted: list[int] = []             # the operation each result word came from
        ended = False
        i = cycles = ops = 0
        op_cycles: list[int] = []
        ops_at: list[int] = []              # the operations before each cycle
        last_op_seen = False
        while i < len(words) or not ended or not last_op_seen:
            offer = i < len(words) and (steady or rnd.random() < 0.8)
            dut.in_valid.value = int(offer)
            if offer:
                dut.in_data.value, dut.in_last.value = words[i]
            dut.room.value = int(steady or rnd.random() < 0.7)
            await ReadOnly()
            took = offer and int(dut.in_ready.value)
            ops_at.append(ops)
            if int(dut.out_valid.value):
                nb = int(dut.out_bytes.value)
                got += int(dut.out_data.value).to_bytes(8, "little")[:nb]
                # the operation OUT_LAT cycles ago (it was one: it made this word)
                assert cycles >= OUT_LAT and ops_at[cycles - OUT_LAT + 1] \
                    == ops_at[cycles - OUT_LAT] + 1, f"{spec}: a result with no operation " \
                    f"{OUT_LAT} cycles before"
                emitted.append(ops_at[cycles - OUT_LAT])
                ended = bool(int(dut.out_end.value))
            if int(dut.op.value):
                ops += 1
                op_cycles.append(cycles)
            if int(dut.last_op.value):
                assert not last_op_seen, f"{spec}: two last operations"
                last_op_seen = True
            await FallingEdge(dut.clk)
            i += int(bool(took))
            cycles += 1
            assert cycles < 100 * len(words) + 20 * n_ops + 200, f"{spec}: no end"
        desc = f"{op} {dt} {spec.a_shape} {g}"
        assert ops == n_ops, f"{desc}: {ops} operations, the schedule {n_ops}"
        assert emitted == made.tolist(), f"{desc}: result words at operations {emitted}, " \
                                         f"the schedule {made.tolist()}"
        if steady:
            assert op_cycles == list(range(op_cycles[0], op_cycles[0] + n_ops)), \
                f"{desc}: the operations stalled"
        dut.in_valid.value = 0
        for _ in range(3):                                  # nothing more is taken or made
            dut.in_valid.value = 1
            await ReadOnly()
            assert not int(dut.in_ready.value) and not int(dut.out_valid.value), spec
            await FallingEdge(dut.clk)
        dut.in_valid.value = 0
        assert got == want, (f"{op} {dt} {spec.a_shape} {g}: bytes differ, first at "
                             f"{next(k for k in range(len(want)) if k >= len(got) or got[k] != want[k])}")
    dut._log.info("%d pools equal to the golden model (%d with their fields after ready)",
                  done, lates)
    assert lates, "no case changed its fields after ready"
