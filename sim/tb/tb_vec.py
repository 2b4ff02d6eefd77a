"""cocotb: VEC descriptors (contract 2.1's vector unit) on dtpu_cl_top built with VEC_EN=1,
against the golden model (dtpu.hw.executor.Executor with vector_unit=True).

Each case is one list (VEC, optionally more VECs, END) over random operands in one AxiRam: the
RTL's DDR after the list must equal the model's byte for byte (the result, and nothing written
outside it), and CL_ERR / CL_ERR_PC / CL_ERR_TAG / DESCS the model's. test_vec_words runs with
random latency and backpressure on all five AXI channels; test_vec_cycles under the contract's
memory model (fixed latency, no stalls), where CL_CYCLES, IDLE, RD_BEATS and WR_BEATS must equal
the Timeline's (units.vector.timeline_step)."""
import os
import random
from dataclasses import dataclass

import cocotb
import numpy as np
from cocotb.triggers import RisingEdge

from dtpu.hw.core import Core
from dtpu.hw.executor import Executor
from dtpu.hw.listcompiler import ListBuilder
from dtpu.hw.units import vector as vu
from dtpu.hw.vec_lower import TABLE_OPS, VecSpec, lower_copy, lower_vec, pool_rows, vec_reason
from dtpu_sim.cycles import contract_lat
from tb_cl_run import RunTB
from tb_cl_seq import BASE, CFG, FMT, R, SEED, Model

N_CASES = int(os.environ.get("DTPU_CASES", "12"))
#: the kinds drawn: the element-wise ones, TABLE (a table operator with random bytes: the
#: unit's lookup does not depend on which operator made them), MEAN, the pools and COPY
OPS = os.environ.get("DTPU_VEC_OPS",
                     "ADD,SUB,MUL,TABLE,MEAN,AVG_POOL,MAX_POOL,COPY").split(",")


@dataclass(frozen=True)
class CopySpec:
    """A COPY: A of `a_shape` (8-bit NHWC), pixel p's C bytes to DST + `off` + p * `ow` (a
    channel slice of a wider tensor, a repeated pixel or row: dtpu.hw.vec_lower.lower_copy)."""

    a_shape: tuple
    ow: int
    off: int
    op: str = "COPY"

    @property
    def out_bytes(self) -> int:
        n, h, w, c = self.a_shape
        return self.off + (n * h * w - 1) * self.ow + c


def random_copy(rng: random.Random) -> CopySpec:
    """A random COPY: pixels of 1..300 bytes (C mod 8 any, whole words, rows of a resize) at
    any byte, packed (OW = C) or apart (a slice: up to 40 bytes between, more than the write
    queue's gap of SEQ_STORE_GAP words or less)."""
    n, h, w = rng.randint(1, 2), rng.randint(1, 6), rng.randint(1, 9)
    c = rng.choice((rng.randint(1, 40), 8 * rng.randint(1, 6), rng.randint(100, 300)))
    ow = c + rng.choice((0, rng.randint(1, 8), rng.randint(1, 40)))
    return CopySpec((n, h, w, c), ow, rng.randint(0, 7))


class VecModel(Model):
    """The Executor of a core with the vector unit."""

    def __init__(self, image, start=None):
        super().__init__(image, start=start)
        self.ex = Executor(Core(CFG), FMT, vector_unit=True)
        if start is not None:
            self.ex.core.wmem[:], self.ex.core.pmem[:] = start


def _q(rng, dt):
    info = np.iinfo(dt)
    return float(np.float32(10 ** rng.uniform(-3, 0))), rng.randint(int(info.min), int(info.max))


def random_spec(rng: random.Random) -> VecSpec:
    """A random node the unit runs: ADD, SUB or MUL, int8 or uint8, operands of one shape or a
    1x1xC second (or first) operand, any fused activation; a table operator of random bytes;
    a MEAN over H and W; a pool (:func:`random_pool`)."""
    while True:
        op = rng.choice(OPS)
        if op == "COPY":
            return random_copy(rng)
        dt = np.dtype(rng.choice((np.int8, np.uint8)))
        full = (rng.randint(1, 2), rng.randint(1, 7), rng.randint(1, 9), rng.randint(1, 48))
        if op == "TABLE":
            return VecSpec(rng.choice(TABLE_OPS), dt, full, _q(rng, dt), _q(rng, dt),
                           table=rng.randbytes(256))
        if op in ("AVG_POOL", "MAX_POOL"):
            spec = random_pool(rng, op, dt)
            if spec is not None:
                return spec
            continue
        if op == "MEAN":
            # up to 300 channels (C mod 8 any), the windows of real models' global pools
            mean = (full[0], rng.randint(1, 9), rng.randint(1, 9), rng.choice((full[3], 300)))
            spec = VecSpec("MEAN", dt, mean, _q(rng, dt), _q(rng, dt))
            if vec_reason(spec, CFG) is None:
                return spec
            continue
        bc = rng.choice(("none", "none", "second", "first"))
        vec = (1, 1, 1, full[3])
        sa, sb = {"none": (full, full), "second": (full, vec), "first": (vec, full)}[bc]
        qa, qb, qo = _q(rng, dt), _q(rng, dt), _q(rng, dt)
        if op == "MUL":
            qo = (float(np.float32(qa[0] * qb[0] * 10 ** rng.uniform(-1, 2))), qo[1])
        act = rng.choice(("NONE", "RELU", "RELU6", "RELU_N1_TO_1"))
        spec = VecSpec(op, dt, sa, qa, qo, b_shape=sb, b_q=qb, activation=act)
        if vec_reason(spec, CFG) is None:
            return spec


def random_pool(rng: random.Random, op: str, dt, row_words: int | None = None) -> VecSpec | None:
    """A random pool, or None: a global one, one whose windows tile the image (filter =
    stride), or any window of 1..4 with strides 1..3, VALID or SAME (overlapping windows, ties
    at the right and bottom edges, rows and columns no window reads); C up to 70 (C mod 8 any);
    its open rows of accumulators within `row_words` (default: the contract's)."""
    n, h, w = rng.randint(1, 2), rng.randint(1, 9), rng.randint(1, 9)
    c = rng.choice((rng.randint(1, 40), 8 * rng.randint(1, 6), rng.randint(41, 70)))
    r = rng.random()
    if r < 0.2:
        filt, stride, padding = (h, w), rng.choice(((1, 1), (h, w), (2, 2))), "VALID"
    elif r < 0.4:
        f = (rng.randint(1, 3), rng.randint(1, 3))
        filt, stride, padding = f, f, rng.choice(("SAME", "VALID"))
    else:
        filt = (rng.randint(1, 4), rng.randint(1, 4))
        stride = (rng.randint(1, 3), rng.randint(1, 3))
        padding = rng.choice(("SAME", "VALID"))
    q = _q(rng, dt)
    name = {"AVG_POOL": "AVERAGE_POOL_2D", "MAX_POOL": "MAX_POOL_2D"}[op]
    try:
        spec = VecSpec(name, dt, (n, h, w, c), q, q, filter=filt, stride=stride,
                       padding=padding, activation=rng.choice(("NONE", "RELU", "RELU6")))
        g = spec.geometry()
    except ValueError:
        return None
    if row_words is not None and pool_rows(g) * g.ow * -(-c // 8) > row_words:
        return None
    return spec if vec_reason(spec, CFG) is None else None


def vec_image(rng: random.Random, specs, list_at=0x40000, at4k=False):
    """(image, list address, [(spec, dst, bytes)]): the operands of each spec at 128-byte
    aligned places (`at4k`: A 8 bytes before a 4 KiB boundary), its result after them, the
    list at `list_at`."""
    img = np.zeros(list_at + 4096, np.uint8)
    lb = ListBuilder(FMT)
    at = 0x100
    outs = []
    for k, spec in enumerate(specs):
        nbytes = lambda s: int(np.prod(s))  # noqa: E731
        a = np.frombuffer(rng.randbytes(nbytes(spec.a_shape)), np.uint8)
        if spec.op == "COPY":
            fields, swap = lower_copy(spec.a_shape, spec.ow, np.int8, CFG), False
            addr_a = at
            if at4k:
                addr_a = (BASE + at + 4095) // 4096 * 4096 - 8 - BASE
            dst = (addr_a + a.size + 127) // 128 * 128
            out = spec.out_bytes
            at = (dst + out + 8 + 127) // 128 * 128
            assert at < list_at, "operands overlap the list"
            img[addr_a:addr_a + a.size] = a
            img[dst:dst + out + 8] = np.frombuffer(rng.randbytes(out + 8), np.uint8)
            lb.vec(fields, BASE + addr_a, BASE + addr_a, BASE + dst + spec.off, tag=0x100 + k)
            outs.append((spec, dst, out))
            continue
        fields, swap = lower_vec(spec, CFG)
        if spec.op in TABLE_OPS:
            b = np.frombuffer(spec.table, np.uint8)
        elif not spec.binary:
            b = np.zeros(0, np.uint8)
        else:
            b = np.frombuffer(rng.randbytes(nbytes(spec.b_shape)), np.uint8)
        addr_a = at
        if at4k:
            addr_a = (BASE + at + 4095) // 4096 * 4096 - 8 - BASE
        addr_b = (addr_a + a.size + 127) // 128 * 128
        dst = (addr_b + b.size + 127) // 128 * 128
        out = nbytes(spec.output_shape)
        at = (dst + out + 8 + 127) // 128 * 128
        assert at < list_at, "operands overlap the list"
        img[addr_a:addr_a + a.size] = a
        img[addr_b:addr_b + b.size] = b
        img[dst:dst + out + 8] = np.frombuffer(rng.randbytes(out + 8), np.uint8)  # untouched
        src_a, src_b = (addr_b, addr_a) if swap else (addr_a, addr_b)
        lb.vec(fields, BASE + src_a, BASE + src_b, BASE + dst, tag=0x100 + k)
        outs.append((spec, dst, out))
    lb.end()
    data = np.frombuffer(lb.data(), np.uint8)
    img[list_at:list_at + data.size] = data
    return img, BASE + list_at, outs


async def _probe(dut, out):
    """Event cycles from the list's first busy cycle (DTPU_PROBE=1: calibration only)."""
    n = -1
    seq = dut.seq_inst
    while True:
        await RisingEdge(dut.clk)
        if int(seq.busy.value):
            n += 1
        elif n < 0:
            continue
        ev = []
        if int(seq.state.value) == 2 and int(seq.d_valid.value):
            ev.append("head")
        if int(seq.vec_start.value):
            ev.append("vec_start")
        if int(dut.v_req_valid.value) and int(dut.v_req_ready.value):
            ev.append(f"req {int(dut.v_req_words.value)}")
        if int(dut.v_rd_valid.value) and int(dut.v_rd_ready.value):
            ev.append("beat")
        if int(seq.vec_done.value):
            ev.append("done")
        if int(dut.m_axi_arvalid.value) and int(dut.m_axi_arready.value):
            ev.append(f"AR {int(dut.m_axi_arlen.value) + 1}")
        if int(dut.m_axi_awvalid.value) and int(dut.m_axi_awready.value):
            ev.append(f"AW {int(dut.m_axi_awlen.value) + 1}")
        if int(dut.m_axi_wvalid.value) and int(dut.m_axi_wready.value) and int(dut.m_axi_wlast.value):
            ev.append("WLAST")
        if int(dut.m_axi_bvalid.value) and int(dut.m_axi_bready.value):
            ev.append("B")
        if ev:
            out.append((n, ev))


async def run_case(tb, img, addr, what):
    """One list on the RTL and on the model: DDR and registers equal; (RTL CL_CYCLES, IDLE,
    RD_BEATS, WR_BEATS), the model's."""
    tb.put(img)
    model = VecModel(img, start=(tb.weights(), tb.params()))
    probe = os.environ.get("DTPU_PROBE") == "1"
    if probe:
        evs = []
        task = cocotb.start_soon(_probe(tb.dut, evs))
        model.ex.events = []
    try:
        await tb.run_list(addr)
    except AssertionError as e:     # a hang: say which list
        raise AssertionError(f"{what}: {e}") from None
    r = model.run(addr)
    if probe:
        task.cancel()
        keep = [e for e in evs if any(not x.startswith("beat") for x in e[1])]
        beats = [e[0] for e in evs if "beat" in e[1]]
        tb.dut._log.info("%s\nRTL: %s\nRTL vec beats %s..%s (%d)\nmodel: %s", what, keep,
                         beats[:1], beats[-1:], len(beats), model.ex.events)
    s = await tb.status()
    tb.check_status(s, r, what)
    got_ddr = tb.ddr(img.size)
    want = model.ddr.read(BASE, img.size)
    bad = np.flatnonzero(got_ddr != want)
    assert bad.size == 0, (f"{what}: {bad.size} DDR bytes differ, first at {BASE + bad[0]:#x}: "
                           f"{got_ddr[bad[0]]} != model {want[bad[0]]}")
    got = tuple([await tb.rd(R[n]) for n in ("CL_CYCLES_LO", "IDLE_LO", "RD_BEATS", "WR_BEATS")])
    await tb.ack()
    return got, (r.cycles, r.idle_cycles, r.rd_beats, r.wr_beats)


def _describe(spec):
    if spec.op == "COPY":
        return f"COPY {spec.a_shape} OW {spec.ow} at +{spec.off}"
    if spec.op in TABLE_OPS:
        return f"TABLE ({spec.op}) {spec.dtype} {spec.a_shape}"
    if not spec.binary:
        return f"{spec.op} {spec.dtype} {spec.a_shape}"
    return (f"{spec.op} {spec.dtype} {spec.a_shape} x {spec.b_shape} {spec.activation}")


@cocotb.test()
async def test_vec_words(dut):
    """Random element-wise VECs (one to three a list) with random latency and backpressure."""
    tb = RunTB(dut, SEED + 25)
    await tb.reset()
    rng = random.Random(SEED + 25)
    for case in range(N_CASES):
        specs = [random_spec(rng) for _ in range(rng.choice((1, 1, 2, 3)))]
        img, addr, _ = vec_image(rng, specs)
        what = f"case {case}: " + "; ".join(_describe(s) for s in specs)
        await run_case(tb, img, addr, what)


@cocotb.test()
async def test_vec_cycles(dut):
    """The contract's memory model: CL_CYCLES, IDLE, RD_BEATS, WR_BEATS equal the Timeline's,
    every random spec (a last partial write burst right after a full one included: the cocotb
    memory answered it a cycle early until its B channel was made to drive each response the
    edge after its time, dtpu_sim.axi_mem)."""
    tb = RunTB(dut, SEED + 26, lat=contract_lat(FMT), stall=0.0)
    await tb.reset()
    rng = random.Random(SEED + 26)
    res = []
    for case in range(N_CASES):
        specs, n = [], rng.choice((1, 1, 2))
        while len(specs) < n:
            specs.append(random_spec(rng))
        img, addr, _ = vec_image(rng, specs)
        what = f"case {case}: " + "; ".join(_describe(s) for s in specs)
        got, want = await run_case(tb, img, addr, what)
        dut._log.info("%s: CL_CYCLES, IDLE, RD_BEATS, WR_BEATS %s, model %s", what, got, want)
        res.append((what, got, want))
    # one-beat first bursts (a one-word A, a B vector of C <= 8, A 8 bytes before 4 KiB): the
    # stream still runs a beat a cycle
    dt = np.dtype(np.int8)
    q = (0.05, 3)
    corners = [(VecSpec("ADD", dt, (1, 1, 1, 5), q, (0.1, -2), b_shape=(1, 1, 1, 5), b_q=q), False),
               (VecSpec("MUL", dt, (1, 3, 3, 8), q, (0.004, 1), b_shape=(1, 1, 1, 8), b_q=q), False),
               (VecSpec("SUB", dt, (1, 2, 3, 6), q, (0.1, 0), b_shape=(1, 1, 1, 6), b_q=q), False),
               (VecSpec("ADD", dt, (1, 4, 4, 16), q, (0.1, -2), b_shape=(1, 4, 4, 16), b_q=q), True),
               (VecSpec("TANH", dt, (1, 1, 1, 5), q, q, table=bytes(range(255, -1, -1))), False),
               (VecSpec("LOGISTIC", dt, (1, 3, 5, 7), q, q, table=rng.randbytes(256)), True)]
    if set(OPS) <= {"AVG_POOL", "MAX_POOL"}:
        # the pools' corners: a 1x1 image, SAME windows larger than the image, C mod 8 != 0,
        # rows and columns no window reads, ties at the right and bottom edges
        u8 = np.dtype(np.uint8)
        corners = [(VecSpec(*k, q, q, filter=f, stride=s, padding=p), False) for k, f, s, p in (
            (("AVERAGE_POOL_2D", dt, (1, 1, 1, 5)), (3, 3), (2, 2), "SAME"),
            (("MAX_POOL_2D", u8, (1, 2, 3, 13)), (4, 4), (1, 1), "SAME"),
            (("AVERAGE_POOL_2D", u8, (1, 3, 2, 17)), (4, 3), (3, 1), "SAME"),
            (("MAX_POOL_2D", dt, (1, 7, 6, 3)), (1, 2), (3, 3), "VALID"),
            (("MAX_POOL_2D", dt, (1, 9, 9, 24)), (3, 3), (2, 2), "SAME"),
            (("AVERAGE_POOL_2D", dt, (1, 8, 8, 24)), (3, 3), (1, 1), "SAME"))]
    for spec, at4k in corners:
        img, addr, _ = vec_image(rng, [spec], at4k=at4k)
        what = f"corner {_describe(spec)}{' at 4 KiB - 8' if at4k else ''}"
        got, want = await run_case(tb, img, addr, what)
        dut._log.info("%s: CL_CYCLES, IDLE, RD_BEATS, WR_BEATS %s, model %s", what, got, want)
        res.append((what, got, want))
    if {"MUL", "COPY"} <= set(OPS):
        # the list the cocotb memory answered a cycle early (1362 cycles against the Timeline's
        # 1363): the COPY's last partial write burst right after its full ones
        u8 = np.dtype(np.uint8)
        pair = [VecSpec("MUL", u8, (2, 6, 8, 24), q, (0.004, 1), b_shape=(2, 6, 8, 24),
                        b_q=(0.07, -3)), CopySpec((2, 6, 8, 15), 23, 0)]
        img, addr, _ = vec_image(rng, pair)
        what = "corner " + "; ".join(_describe(s) for s in pair)
        got, want = await run_case(tb, img, addr, what)
        dut._log.info("%s: CL_CYCLES, IDLE, RD_BEATS, WR_BEATS %s, model %s", what, got, want)
        res.append((what, got, want))
    bad = [r for r in res if r[1] != r[2]]
    assert not bad, f"{len(bad)} of {len(res)} lists differ from the Timeline: {bad}"


# ------------------------------------------------------------------------------ VEC among RUNs

class VecRunTB(RunTB):
    """RunTB whose model core has the vector unit."""

    def model(self, image, **kw):
        return VecModel(image, start=(self.weights(), self.params()))


def mixed_program(rng: np.random.Generator, hw=4, c=16, oc2=24):
    """One partition where VECs read RUNs' results and RUNs read VECs': a 1x1 convolution, the
    residual ADD of its output and the partition's input, a 1x1 convolution of that to `oc2`
    channels, and the MUL of its output by a 1x1xC vector (the squeeze-excite broadcast: the
    partition's second input). `oc2` 256: more parameters than the resident part of the test
    build's memory, so the second convolution is streamed and its first LOAD comes right after
    the ADD (it reads while the ADD's results drain: dtpu_vec rd_owns)."""
    from dtpu.hw.listcompiler import NodeIn, compile_program
    from dtpu.spec import ConvSpec, DataMode, OpKind, Quant

    def zp():
        return int(rng.integers(-9, 9))

    q_in, q0, q1, q2, q3, q_se = ((float(s), zp()) for s in (0.02, 0.15, 0.1, 0.12, 0.2, 0.05))

    def conv(name, qi, qo, oc, cin):
        s = ConvSpec(OpKind.CONV_2D, DataMode.INT8, (1, hw, hw, cin), (oc, 1, 1, cin), name=name,
                     input_q=Quant((qi[0],), (qi[1],)),
                     filter_q=Quant(tuple(rng.uniform(0.004, 0.02, oc)), (0,) * oc),
                     output_q=Quant((qo[0],), (qo[1],)))
        w = rng.integers(-12, 12, s.filter_shape).astype(np.int8)
        b = rng.integers(-300, 300, oc).astype(np.int32)
        return s, w, b

    dt = np.dtype(np.int8)
    s0 = conv("c0", q_in, q0, c, c)
    add = VecSpec("ADD", dt, (1, hw, hw, c), q0, q1, b_shape=(1, hw, hw, c), b_q=q_in,
                  activation="RELU", name="add")
    s2 = conv("c2", q1, q2, oc2, c)
    mul = VecSpec("MUL", dt, (1, hw, hw, oc2), q2, q3, b_shape=(1, 1, 1, oc2), b_q=q_se,
                  name="mul")
    nodes = [NodeIn(*s0, -1), NodeIn(None, None, None, 0, vec=add, src2=-1),
             NodeIn(*s2, 1), NodeIn(None, None, None, 2, vec=mul, src2=-2)]
    return compile_program([nodes], CFG, base=BASE)


@cocotb.test()
async def test_vec_among_runs(dut):
    """RUN -> VEC -> RUN -> VEC in one list: DDR, CL_* equal; on the contract's memory model
    (DTPU_EXACT=1) CL_CYCLES, IDLE, RD_BEATS and WR_BEATS too."""
    from tb_cl_run import run_program
    exact = os.environ.get("DTPU_EXACT") == "1"
    tb = VecRunTB(dut, SEED + 27, **(dict(lat=contract_lat(FMT), stall=0.0) if exact else {}))
    await tb.reset()
    rng = np.random.default_rng(SEED + 27)
    for case in range(max(1, N_CASES // 4)):
        # every other case streams its second convolution (its LOADs right after the ADD):
        # the MUL's 256-channel result then crosses a 4 KiB page, a partial write burst right
        # after a full one (which the cocotb memory answered a cycle early until
        # dtpu_sim.axi_mem queued each response after the B driver's edge; the C++ memory,
        # tests/test_rtl_vector.py, has the LOAD after a VEC on it too)
        oc2 = 256 if case % 2 else 24
        prog = mixed_program(rng, hw=int(rng.choice((2, 4, 6))), c=int(rng.choice((8, 16, 24))),
                             oc2=oc2)
        await run_program(tb, prog, f"mixed {case}", rng,
                          exact=("prologue", "partition") if exact else ())
