"""cocotb: the error paths of dtpu_cl_top end to end, against the golden model
dtpu.hw.executor.Executor (the same lists, the same fault regions in its Ddr).

Why a bench of its own: the top-level coverage run (sim/test_coverage.py::
test_cl_top_coverage_summary, docs/rtl.md) showed that tb_cl_run and tb_cl_seq never reach
these branches of the assembled top, though the units' own benches do: a read fault on a
RUN's activation stream (the load unit's fault into the sequencer), a fault on a POST's
read, DECERR anywhere but a LOAD, a RUN whose job fails fatally in the core (CL_ERR.JOB), a
memory that stops answering during a RUN (TIMEOUT), lane-mode gathers of 2- and 4-byte
elements (int16x8 and float32 with channel counts that are not a multiple of the lanes), and
the 2.0 registers that only the host reads (CL_BASE, the high words of the 64-bit counters).

Every case compares every DDR byte (but the failing RUN / POST's destination, undefined by
the contract), CL_ERR, CL_ERR_PC, CL_ERR_TAG and DESCS with the model, and is followed by the
intact program on the same core (no reset), which must run exactly."""
import cocotb
import numpy as np

from dtpu.hw.listcompiler import NodeIn, Program, compile_program
from dtpu.spec import ConvSpec, DataMode, OpKind, Padding
from dtpu_sim.axi_mem import DECERR, SLVERR, Region
from tb_cl_run import RunTB, _node, _q, ksplit_program, run_program
from tb_cl_seq import BASE, CFG, FMT, R, SEED, U64, parse, small_program

KINDS = {"SLVERR": SLVERR, "DECERR": DECERR, "TIMEOUT": None}


def _descs(prog, addr, op):
    """(offset in the image, offset in the list: CL_ERR_PC's, words) of every `op` descriptor
    of the list at `addr`."""
    return [(addr - BASE + off, off, w) for off, w in parse(prog.image, BASE, addr)
            if FMT.opnames[w[0] & 0xFF] == op]


def _patched(prog, at, word):
    img = prog.image.copy()
    img[at:at + 8] = np.array([word], U64).view(np.uint8)
    return Program(prog.cfg, prog.base, img, prog.prologue_addr, prog.prologue_words,
                      prog.partitions)


async def _faulty(tb, prog, what, rng, lo, hi, kind):
    """The program with reads and writes of [lo, hi) answered `kind` (the model's Ddr too)."""
    tb.mem.regions.append(Region(lo, hi, KINDS[kind]))
    fault = {"SLVERR": "slverr", "DECERR": "decerr", "TIMEOUT": "hang"}[kind]
    (_, _), (r, _) = await run_program(tb, prog, what, rng,
                                       model_faults={fault: [(lo, hi)]})
    assert r.error == FMT.errors[kind], (what, r.message)
    return r


def lane_programs(seed=8):
    """Lane-mode gathers of 2- and 4-byte elements: 3x3 convolutions over 6 int16 channels
    (LANES 4) and 3 float32 channels (LANES 2), each followed by a 1x1 conv."""
    rng = np.random.default_rng(seed)
    out = []
    for mode, c in ((DataMode.INT16X8, 6), (DataMode.FLOAT32, 3)):
        q = _q(rng, 8, zp=False) if mode.is_quantized else {}
        specs = [ConvSpec(OpKind.CONV_2D, mode, (1, 5, 5, c), (8, 3, 3, c),
                          padding=Padding.SAME, name=f"l{c}", **q),
                 ConvSpec(OpKind.CONV_2D, mode, (1, 5, 5, 8), (4, 1, 1, 8), name=f"p{c}",
                          **(_q(rng, 4, zp=False) if mode.is_quantized else {}))]
        nodes = []
        for i, s in enumerate(specs):
            if mode.is_quantized:
                w, b = _node(rng, s)
            else:
                w = rng.normal(0, 0.3, s.filter_shape).astype(np.float32)
                b = rng.normal(0, 0.5, s.out_channels).astype(np.float32)
            nodes.append(NodeIn(s, w, b, i - 1))
        out.append((mode.value, compile_program([nodes], CFG, base=BASE)))
    return out


@cocotb.test()
async def test_run_input_faults(dut):
    """SLVERR and DECERR on the partition's input tensor (the first RUN's activation reads:
    the load unit's fault ends the list at that RUN), then DECERR on its output (the store
    unit's write)."""
    tb = RunTB(dut, SEED + 11)
    await tb.reset()
    rng = np.random.default_rng(SEED + 11)
    prog = small_program(seed=3)
    part = prog.partitions[0]
    inp, out = part.input, part.output
    for kind in ("SLVERR", "DECERR"):
        r = await _faulty(tb, prog, f"{kind} on the input", rng, inp.addr, inp.addr + 8, kind)
        assert r.error_pc == _descs(prog, part.list_addr, "RUN")[0][1], r.message
        await run_program(tb, prog, f"intact after {kind} on the input", rng)
    await _faulty(tb, prog, "DECERR on the output", rng, out.addr, out.addr + out.nbytes,
                  "DECERR")
    await run_program(tb, prog, "intact after DECERR on the output", rng)


@cocotb.test()
async def test_post_read_fault(dut):
    """A POST whose partial sums (POST1.SRC) lie in a faulting region: SLVERR, then DECERR,
    at the POST (the RUNs before it ran)."""
    tb = RunTB(dut, SEED + 12)
    await tb.reset()
    rng = np.random.default_rng(SEED + 12)
    prog = ksplit_program(seed=7)
    part = prog.partitions[0]
    at, pc, words = _descs(prog, part.list_addr, "POST")[0]
    p1 = FMT.fields_of("POST1", words[1])
    hole = BASE + prog.size                 # 4 KiB appended to the image, read by nothing else
    bigger = Program(prog.cfg, prog.base, np.concatenate([prog.image, np.zeros(4096, np.uint8)]),
                        prog.prologue_addr, prog.prologue_words, prog.partitions)
    bad = _patched(bigger, at + 8, FMT.word("POST1", **dict(p1, SRC=hole)))
    for kind in ("SLVERR", "DECERR"):
        r = await _faulty(tb, bad, f"{kind} on the POST's sums", rng, hole, hole + 8, kind)
        assert r.error_pc == pc, r.message
        await run_program(tb, prog, f"intact after {kind} on the POST", rng)


@cocotb.test()
async def test_run_job_error(dut):
    """A REGS that sets an unknown precision in JOB: the RUN's job fails in the core's CONFIG
    (a fatal ERR bit), CL_ERR.JOB at that RUN, as the model's core says."""
    tb = RunTB(dut, SEED + 13)
    await tb.reset()
    rng = np.random.default_rng(SEED + 13)
    prog = small_program(seed=5)
    part = prog.partitions[0]
    job = CFG.reg("JOB").offset
    at, _, words = _descs(prog, part.list_addr, "REGS")[0]
    pairs = [FMT.fields_of("REG", w) for w in words[1:]]
    k = next(i for i, p in enumerate(pairs) if p["OFFSET"] == job)
    fields = CFG.decode("JOB", pairs[k]["VALUE"])
    bad_prec = max(CFG.enums["PREC"].values()) + 1
    word = FMT.word("REG", OFFSET=job, VALUE=CFG.encode("JOB", **dict(fields, PREC=bad_prec)))
    (_, _), (r, _) = await run_program(tb, _patched(prog, at + 8 * (1 + k), word),
                                       "unknown precision", rng)
    assert r.error == FMT.errors["JOB"], r.message
    await run_program(tb, prog, "intact after the job error", rng)


@cocotb.test()
async def test_lane_mode_2_and_4_byte_elements(dut):
    """int16x8 over 6 channels and float32 over 3: the load unit's lane mode packs 2- and
    4-byte lanes and PAD words of those sizes; byte-exact with the model."""
    tb = RunTB(dut, SEED + 14)
    await tb.reset()
    rng = np.random.default_rng(SEED + 14)
    for what, prog in lane_programs():
        await run_program(tb, prog, f"lane mode {what}", rng)


@cocotb.test()
async def test_host_registers(dut):
    """CL_BASE reads back what the host wrote; the high words of CL_CYCLES and IDLE are the
    model's (zero for a list this short, the carry tested by the counters' own width)."""
    tb = RunTB(dut, SEED + 15)
    await tb.reset()
    rng = np.random.default_rng(SEED + 15)
    prog = small_program(seed=6)
    (_, _), (r, _) = await run_program(tb, prog, "registers", rng)
    assert await tb.rd(R["CL_BASE"]) == prog.partitions[0].list_addr
    assert await tb.rd(R["CL_CYCLES_HI"]) == (r.cycles >> 32)
    assert await tb.rd(R["IDLE_HI"]) == (r.idle_cycles >> 32)


@cocotb.test()
async def test_run_timeout(dut):
    """The memory stops answering the first RUN's activation reads: CL_ERR.TIMEOUT (TIMEOUT
    register: cycles without progress), no hang. Last: the memory model stays hung."""
    tb = RunTB(dut, SEED + 16)
    await tb.reset()
    await tb.wr(R["TIMEOUT"], 400)
    rng = np.random.default_rng(SEED + 16)
    prog = small_program(seed=3)
    inp = prog.partitions[0].input
    r = await _faulty(tb, prog, "TIMEOUT on the input", rng, inp.addr, inp.addr + 8, "TIMEOUT")
    assert r.error_pc == _descs(prog, prog.partitions[0].list_addr, "RUN")[0][1], r.message
