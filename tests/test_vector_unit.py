"""The vector unit of contract 2.1 in the golden model: VEC descriptors decoded from DDR bytes by
the executor, their results against TFLite's CPU kernels (one-op graphs, tests/vector_graphs.py),
their cycles against the documented formula, their faults, and a core without the unit."""
from __future__ import annotations

import zlib

import numpy as np
import pytest

from dtpu.hw.config import HwConfig, ceil_div, get_config
from dtpu.hw.core import Core
from dtpu.hw.ddr import Ddr
from dtpu.hw.executor import Executor
from dtpu.hw.listcompiler import ListBuilder
from dtpu.hw.listformat import Format
from dtpu.hw.units import vector as vu
from dtpu.hw.vec_lower import VecSpec, lower_vec, vec_reason
from tests.vector_graphs import T, one_op_model, run_cpu

CFG = get_config()
FMT = Format(CFG)
BASE = 0x1000_0000
AXES_HW = np.array([1, 2], np.int32)


def _rng(*key):
    return np.random.default_rng(zlib.crc32(repr(key).encode()))


def _rand(r, shape, dt):
    info = np.iinfo(dt)
    return r.integers(info.min, info.max + 1, shape).astype(dt)


def _q(r, dt):
    info = np.iinfo(dt)
    return float(np.float32(10 ** r.uniform(-3, 0))), int(r.integers(info.min, info.max + 1))


def run_vec(spec: VecSpec, a: np.ndarray, b: np.ndarray | None = None, *, ex=None,
            rq_lanes: int | None = None):
    """One VEC + END list in a fresh DDR: (output, RunResult); `rq_lanes`: a build with that
    VEC_RQ_LANES (default the contract's)."""
    fields, swap = lower_vec(spec, CFG)
    ddr = Ddr(BASE, 1 << 22)
    addr_a, addr_b, dst, lst = BASE, BASE + (1 << 20), BASE + (2 << 20), BASE + (3 << 20)
    ddr.write(addr_a, a.view(np.uint8).reshape(-1))
    if b is not None:
        ddr.write(addr_b, b.view(np.uint8).reshape(-1))
    lb = ListBuilder(FMT)
    src_a, src_b = (addr_b, addr_a) if swap else (addr_a, addr_b if b is not None else 0)
    lb.vec(fields, src_a, src_b, dst, tag=7)
    lb.end()
    ddr.write(lst, np.frombuffer(lb.data(), np.uint8))
    if ex is None:
        cfg = CFG if rq_lanes is None else HwConfig(VEC_RQ_LANES=rq_lanes)
        ex = Executor(Core(cfg), Format(cfg), vector_unit=True)
    r = ex.run(ddr, lst)
    out_shape = spec.output_shape
    n = int(np.prod(out_shape))
    out = ddr.read(dst, n).view(spec.dtype).reshape(out_shape).copy()
    return out, r


CASES = []
for _dt in ("int8", "uint8"):
    for _op in ("ADD", "SUB", "MUL"):
        for _bc in ("none", "second", "first"):
            CASES.append((_op, _dt, _bc))


@pytest.mark.parametrize("op,dtype,bcast", CASES)
def test_binary_through_the_unit_equals_tflite(op, dtype, bcast):
    r = _rng(op, dtype, bcast)
    nd = np.dtype(dtype)
    for trial in range(4):
        act = ["NONE", "RELU", "RELU6", "RELU_N1_TO_1"][trial]
        full = (1, int(r.integers(1, 7)), int(r.integers(1, 7)), int(r.integers(1, 40)))
        vec = (1, 1, 1, full[3])
        sa, sb = {"none": (full, full), "second": (full, vec), "first": (vec, full)}[bcast]
        qa, qb, qo = _q(r, nd), _q(r, nd), _q(r, nd)
        if op == "MUL":
            qo = (float(np.float32(qa[0] * qb[0] * 10 ** r.uniform(-1, 2))), qo[1])
        a, b = _rand(r, sa, nd), _rand(r, sb, nd)
        spec = VecSpec(op, nd, sa, qa, qo, b_shape=sb, b_q=qb, activation=act)
        assert vec_reason(spec, CFG) is None
        got, res = run_vec(spec, a, b)
        assert res.error == 0, res.message
        ref = run_cpu(one_op_model(op, [T(sa, dtype, *qa), T(sb, dtype, *qb)], T(full, dtype, *qo),
                                   activation=act.lower()), [a, b])
        np.testing.assert_array_equal(got, ref, err_msg=f"{op} {dtype} {bcast} {act} {full}")


@pytest.mark.parametrize("dtype", ["int8", "uint8"])
@pytest.mark.parametrize("op", ["AVERAGE_POOL_2D", "MAX_POOL_2D"])
@pytest.mark.parametrize("padding", ["SAME", "VALID"])
def test_pool_through_the_unit_equals_tflite(op, dtype, padding):
    r = _rng(op, dtype, padding)
    nd = np.dtype(dtype)
    done = 0
    while done < 4:
        shape = (1, int(r.integers(2, 10)), int(r.integers(2, 10)), int(r.integers(1, 20)))
        filt, stride = tuple(int(x) for x in r.integers(1, 4, 2)), tuple(int(x) for x in r.integers(1, 3, 2))
        q = _q(r, nd)
        act = ["NONE", "RELU", "RELU6", "RELU_N1_TO_1"][done]
        spec = VecSpec(op, nd, shape, q, q, activation=act, filter=filt, stride=stride,
                       padding=padding)
        if vec_reason(spec, CFG) is not None:
            continue
        a = _rand(r, shape, nd)
        got, res = run_vec(spec, a)
        assert res.error == 0, res.message
        ref = run_cpu(one_op_model(op, [T(shape, dtype, *q)], T(spec.output_shape, dtype, *q),
                                   activation=act.lower(), padding=padding, stride=stride,
                                   filter=filt), [a])
        np.testing.assert_array_equal(got, ref, err_msg=f"{op} {shape} {filt} {stride}")
        done += 1


@pytest.mark.parametrize("dtype", ["int8", "uint8"])
@pytest.mark.parametrize("scales", ["equal", "requantizing"])
def test_mean_through_the_unit_equals_tflite(dtype, scales):
    r = _rng(dtype, scales)
    nd = np.dtype(dtype)
    for _ in range(4):
        shape = (1, int(r.integers(1, 9)), int(r.integers(1, 9)), int(r.integers(1, 70)))
        q = _q(r, nd)
        qo = q if scales == "equal" else _q(r, nd)
        spec = VecSpec("MEAN", nd, shape, q, qo)
        a = _rand(r, shape, nd)
        got, res = run_vec(spec, a)
        assert res.error == 0, res.message
        ref = run_cpu(one_op_model("MEAN", [T(shape, dtype, *q), T((2,), "int32", data=AXES_HW)],
                                   T((1, shape[3]), dtype, *qo), keep_dims=False), [a])
        np.testing.assert_array_equal(got, ref)


def _formula(job: vu.VecJob, rq_lanes: int = 8) -> int:
    """docs/architecture.md "The vector unit": a list of one VEC and END, the VEC's operands
    read after its start, its writes' last response, the interrupt."""
    m, mem = FMT.mem, FMT.mem
    RL, WL = int(m["MEM_READ_LATENCY"]), int(m["MEM_WRITE_LATENCY"])
    c = vu.cost(job, int(mem["VEC_LANES"]), rq_lanes=rq_lanes)
    header = int(m["SEQ_FETCH_START"]) + RL + FMT.length("VEC") - 1 + int(m["SEQ_DECODE"])
    burst = int(m["MEM_BURST_BEATS"])
    part = c.out_words % burst
    K = int(m["SEQ_STORE_TAIL"])
    # A and B of one shape are read in alternating chunks of a burst: the last partial chunk's
    # results come 2 * part cycles after the full chunk's before it (units.vector._chunk_gaps)
    # a pool's results come at its windows' ends (units.vector.pool_schedule): the partial
    # chunk's gap and the packer's late word are those operations'
    gap = 2 * part if job.kind in ("ADD", "MUL") and job.bmode == 0 else part
    if c.gaps is not None and part < len(c.gaps):
        gap = c.gaps[part]
    tail = (K + burst) if not part else (K + 1 + part + c.late if c.out_words < burst
                                         else part + max(K + 1 + c.late, K + burst - gap))
    return (header + int(m["SEQ_VEC_START"]) + RL + max(c.read_beats, c.ops) + c.tail +
            int(m["LAT_VEC"]) - c.early + WL + tail + int(m["IRQ_LATENCY"]))


@pytest.mark.parametrize("spec", [
    VecSpec("ADD", np.dtype(np.int8), (1, 7, 7, 24), (0.05, 3), (0.1, -2), b_shape=(1, 7, 7, 24),
            b_q=(0.07, 1)),
    VecSpec("MUL", np.dtype(np.int8), (1, 5, 5, 40), (0.05, 3), (0.004, -2), b_shape=(1, 1, 1, 40),
            b_q=(0.07, 1)),
    VecSpec("MAX_POOL_2D", np.dtype(np.int8), (1, 12, 12, 16), (0.05, 3), (0.05, 3),
            filter=(3, 3), stride=(2, 2), padding="SAME"),
    VecSpec("AVERAGE_POOL_2D", np.dtype(np.uint8), (1, 25, 5, 32), (0.05, 3), (0.05, 3),
            filter=(25, 5), stride=(25, 5)),
    VecSpec("MEAN", np.dtype(np.int8), (1, 7, 7, 64), (0.05, 3), (0.02, -1)),
], ids=lambda s: s.op)
@pytest.mark.parametrize("rq", [8, 2])
def test_cycles_follow_the_formula(spec, rq):
    """Every kind at the contract's VEC_RQ_LANES and at 2 (ADD / MUL a word in 4 cycles, the
    other kinds unchanged)."""
    r = _rng(spec.op)
    a = _rand(r, spec.a_shape, spec.dtype)
    b = _rand(r, spec.b_shape, spec.dtype) if spec.b_shape else None
    _, res = run_vec(spec, a, b, rq_lanes=rq)
    fields, _ = lower_vec(spec, CFG)
    d = {k: FMT.fields_of(k, FMT.word(k, **v)) for k, v in fields.items()}
    d["VEC1"] = {"SRC_A": 0, "SRC_B": 0}
    d["VEC2"]["DST"] = 0
    d.setdefault("VEC1", {})
    job = vu.decode(FMT, d)
    assert res.cycles == _formula(job, rq)
    c = vu.cost(job, 8, rq_lanes=rq)
    assert res.compute_cycles == c.stall_free(int(FMT.mem["LAT_VEC"]))
    assert res.wr_beats == c.out_words
    assert res.tags[7][1] == c.stall_free(int(FMT.mem["LAT_VEC"]))


def test_fewer_requantizing_lanes_cost_their_cycles():
    """VEC_RQ_LANES < 8: an ADD / MUL word pair keeps the lanes 8 / VEC_RQ_LANES cycles and
    every operand beat waits for them (dtpu_vec's ew_free), so the beats and the lanes' extra
    cycles add up; the results come that many cycles apart, and between BMODE 0's chunks the
    next chunk's A beats too (the sums by hand)."""
    def job(words, bmode):
        shape = (1, 1, words, 8)
        return vu.VecJob("ADD", np.dtype(np.int8), bmode, 0, 0, 0, shape, shape, {})
    # BMODE 0, 20 words: A16 B16 A4 B4 = 40 beats, 20 x 3 more cycles at 2 lanes (4 a word)
    c = vu.cost(job(20, 0), 8, 16, rq_lanes=2)
    assert (c.read_beats, c.ops) == (40, 100)
    # the last chunk's 4 results 4 apart; the full chunk's last 4 + 4 (its A beats) before
    assert c.gaps == (0, 4, 8, 12, 4 * 4 + 4)
    assert vu.cost(job(20, 0), 8, 16, rq_lanes=8).gaps == (0, 1, 2, 3, 8)     # as before
    assert vu.cost(job(20, 0), 8, 16).ops == 40
    # the beat times: A's chunk a cycle a beat, B's 4 cycles a beat
    t = vu.ew_beat_times(job(20, 0), 16, 4)
    assert t[:17].tolist() == list(range(17)) and t[17] - t[16] == 4 and t[32] == 16 + 64
    assert t[-1] == 40 + 60 - 4
    # 1 lane: 8 cycles a word
    assert vu.cost(job(20, 0), 8, 16, rq_lanes=1).ops == 40 + 7 * 20
    # MEAN's tail: a word in 4 operations, made by its last; 2 x 3 x 3 x 20 (3 words a batch,
    # the last 4 bytes): the words at operations 3, 7, 11, 15, 19, 23 of the tail
    mean = vu.VecJob("MEAN", np.dtype(np.int8), 0, 0, 0, 0, (2, 3, 3, 20), (2, 20), {})
    c8, c2 = vu.cost(mean, 8, 16), vu.cost(mean, 8, 16, rq_lanes=2)
    assert (c8.ops, c8.tail, c2.ops, c2.tail) == (54, 6, 54, 24)
    # 40 bytes: words of bytes 0-7 (op 3), 8-15 (7), 16-23 (15: op 11's 4 bytes and op 15's
    # first 4), 24-31 (19), 32-39 (23)
    assert c2.gaps == (0, 4, 8, 16, 20) and c2.late == 0


def _pool_job(shape, filt, stride, out_hw):
    g = {"FH": filt[0], "FW": filt[1], "SH": stride[0], "SW": stride[1], "PT": 0, "PL": 0}
    return vu.VecJob("AVG_POOL", np.dtype(np.int8), 0, 0, 0, 0, shape,
                     (shape[0], *out_hw, shape[3]),
                     {"VEC4": g, "VEC7": {"OH": out_hw[0], "OW": out_hw[1]}})


def test_a_pools_result_words_come_at_its_window_ends():
    """dtpu_vec_pool makes a window's words at its last pixel's operations (one a pixel word,
    raster order), packed as MEAN's: the store tail's gaps and late are those operations'
    (found by the Verilog's list test: an N=2, C=6 pool ended a cycle later)."""
    # 2x2 stride 2 over 4x4x8: windows end at pixels 5, 7, 13, 15, one full word each
    c = vu.cost(_pool_job((1, 4, 4, 8), (2, 2), (2, 2), (2, 2)), 8)
    assert (c.ops, c.out_words, c.gaps, c.late) == (16, 4, (0, 2, 8, 10), 0)
    # global pools of 2x2x6, two batches: 6 bytes at operations 3 and 7; the last 4 bytes come
    # with the first full word, a cycle after the last operation
    c = vu.cost(_pool_job((2, 2, 2, 6), (2, 2), (1, 1), (1, 1)), 8)
    assert (c.ops, c.out_words, c.gaps, c.late) == (8, 2, (-1, 0), 1)


def test_a_list_run_again_replays_its_timeline():
    spec = VecSpec("ADD", np.dtype(np.int8), (1, 4, 4, 8), (0.05, 3), (0.1, -2),
                   b_shape=(1, 4, 4, 8), b_q=(0.07, 1))
    r = _rng("replay")
    a, b = _rand(r, spec.a_shape, np.int8), _rand(r, spec.b_shape, np.int8)
    ex = Executor(Core(CFG), FMT, vector_unit=True)
    out1, r1 = run_vec(spec, a, b, ex=ex)
    out2, r2 = run_vec(spec, a, b, ex=ex)
    np.testing.assert_array_equal(out1, out2)
    assert (r1.cycles, r1.compute_cycles, r1.tags) == (r2.cycles, r2.compute_cycles, r2.tags)


def test_a_core_without_the_unit_answers_bad_opcode():
    spec = VecSpec("MEAN", np.dtype(np.int8), (1, 3, 3, 8), (0.05, 3), (0.05, 3))
    a = np.zeros(spec.a_shape, np.int8)
    _, res = run_vec(spec, a, ex=Executor(Core(CFG), FMT))
    assert res.error == FMT.errors["BAD_OPCODE"] and "no vector unit" in res.message


def test_bad_fields_are_named():
    spec = VecSpec("MEAN", np.dtype(np.int8), (1, 3, 3, 8), (0.05, 3), (0.05, 3))
    fields, _ = lower_vec(spec, CFG)
    fields["VEC0"]["KIND"] = 9
    d = {k: FMT.fields_of(k, FMT.word(k, **v)) for k, v in fields.items()}
    d["VEC1"] = {"SRC_A": 0, "SRC_B": 0}
    from dtpu.hw.listformat import ListFault
    with pytest.raises(ListFault, match="KIND=9; accepted"):
        vu.decode(FMT, d)


def test_reasons_name_what_the_unit_cannot_take():
    i8 = np.dtype(np.int8)
    assert "int16" in vec_reason(VecSpec("ADD", np.dtype(np.int16), (1, 2, 2, 2), (1, 0), (1, 0),
                                         b_shape=(1, 2, 2, 2), b_q=(1, 0)), CFG)
    assert "accepted: equal shapes" in vec_reason(
        VecSpec("ADD", i8, (1, 4, 4, 8), (0.1, 0), (0.1, 0), b_shape=(1, 4, 1, 8), b_q=(0.1, 0)), CFG)
    big = ceil_div(8 * int(FMT.mem["VEC_BCAST_WORDS"]) + 8, 1)
    assert "operand-B buffer" in vec_reason(
        VecSpec("MUL", i8, (1, 2, 2, big), (0.1, 0), (0.1, 0), b_shape=(1, 1, 1, big), b_q=(0.1, 0)),
        CFG)
    assert "differs from the output" in vec_reason(
        VecSpec("MAX_POOL_2D", i8, (1, 4, 4, 8), (0.1, 0), (0.2, 0), filter=(2, 2), stride=(2, 2)), CFG)


def test_add_scales_tflite_refuses_are_refused():
    """TFLite's Prepare aborts (QuantizeMultiplierSmallerThanOneExp) when the output scale is
    below 2 * max(input scales) / 2^20: such a node is never claimed."""
    i8 = np.dtype(np.int8)
    spec = VecSpec("ADD", i8, (1, 2, 2, 4), (0.5, 0), (1e-9, 0), b_shape=(1, 2, 2, 4), b_q=(0.5, 0))
    assert "TFLite refuses it" in vec_reason(spec, CFG)


def _reciprocal_quotients(n: np.ndarray, d: int, bits: int) -> np.ndarray:
    """dtpu_vec_pool's AVG_POOL division floor(N / d) as it makes it: N x ceil(2^bits / d)
    shifted right by `bits` (d = 1: N itself)."""
    if d == 1:
        return n
    return (n * ((1 << bits) + d - 1) // d) >> bits


def test_avg_pool_reciprocals_are_exact_for_every_count_and_sum():
    """dtpu_vec_pool divides an AVG_POOL window's rounded sum N = |sum| + floor(d/2) by its
    count d as N x ceil(2^24 / d) >> 24: for every d up to VEC_AVG_AREA and every N the sums of
    d 8-bit taps can give (|sum| <= 255 d, so N < 256 d; the bound proven in the module's
    header), the quotient is floor(N / d). 23 bits would not do: the bound is the one used."""
    area = int(FMT.mem["VEC_AVG_AREA"])
    assert area == 256          # the reciprocals' width (dtpu_vec_pool's RECIP_W) is for 256
    for d in range(1, area + 1):
        n = np.arange(0, 255 * d + d // 2 + 1, dtype=np.int64)
        np.testing.assert_array_equal(_reciprocal_quotients(n, d, 24), n // d, err_msg=f"d={d}")
    short = [d for d in range(2, area + 1)
             if not np.array_equal(_reciprocal_quotients(np.arange(256 * d, dtype=np.int64), d,
                                                         23), np.arange(256 * d) // d)]
    assert short, "23-bit reciprocals are exact too: the test could not tell 24 from fewer"


def test_avg_pools_beyond_the_units_window_limit_are_refused():
    """An AVERAGE_POOL_2D whose window has more than VEC_AVG_AREA taps stays on the CPU (the
    reason names the limit) and its descriptor is BAD_FIELD in the golden model, as dtpu_vec_pool
    raises geom_bad; MAX_POOL_2D has no such limit; a 16 x 16 average still runs, exactly."""
    i8 = np.dtype(np.int8)
    q = (0.05, 3)
    big = VecSpec("AVERAGE_POOL_2D", i8, (1, 17, 16, 8), q, q, filter=(17, 16), stride=(1, 1))
    assert "VEC_AVG_AREA = 256" in vec_reason(big, CFG)
    assert vec_reason(VecSpec("MAX_POOL_2D", i8, (1, 17, 16, 8), q, q, filter=(17, 16),
                              stride=(1, 1)), CFG) is None
    a = np.full(big.a_shape, -128, i8)
    _, res = run_vec(big, a)
    assert res.error == FMT.errors["BAD_FIELD"] and "FH*FW <= VEC_AVG_AREA" in res.message
    ok = VecSpec("AVERAGE_POOL_2D", i8, (1, 16, 16, 8), q, q, filter=(16, 16), stride=(1, 1))
    assert vec_reason(ok, CFG) is None
    for fill in (-128, 127):
        a = np.full(ok.a_shape, fill, i8)
        got, res = run_vec(ok, a)
        assert res.error == 0, res.message
        ref = run_cpu(one_op_model("AVERAGE_POOL_2D", [T(ok.a_shape, "int8", *q)],
                                   T(ok.output_shape, "int8", *q), padding="VALID",
                                   stride=(1, 1), filter=(16, 16)), [a])
        np.testing.assert_array_equal(got, ref)
