"""cocotb: dtpu_axi through its AXI ports against the golden model (words, ERR, cycles)."""
import os
import random

import cocotb
import numpy as np
from cocotb.triggers import ClockCycles, RisingEdge

from dtpu.hw.config import HwConfig
from dtpu.hw.core import Core
from dtpu.driver import check_identity, run_jobs
from dtpu.precision import Precision
from dtpu_sim.axi import AsyncTransport, BridgeTransport, DtpuTB, random_pauses, run_job
from dtpu_sim.jobgen import (expect, gemm_case, lowered_jobs, prefetch_case, with_prefetch,
                             without_prefetch)

SEED = int(os.environ.get("DTPU_SEED", "12345"))
N_CASES = int(os.environ.get("DTPU_CASES", "12"))


def hw_config() -> HwConfig:
    extra = {}
    if "PARAM_PREC_EN" in os.environ:  # a build with fewer precisions
        mask = int(os.environ["PARAM_PREC_EN"], 0)
        names = {v: k.lower() for k, v in HwConfig().enums["PREC"].items()}
        extra["ENABLED"] = [names[b] for b in sorted(names) if mask >> b & 1]
    return HwConfig(**extra, COLS=int(os.environ.get("PARAM_COLS", "8")),
                    LOG_WEIGHT_WORDS=int(os.environ.get("PARAM_LOG_WEIGHT_WORDS", "15")),
                    LOG_PARAM_ENTRIES=int(os.environ.get("PARAM_LOG_PARAM_ENTRIES", "12")),
                    LOG_ACT_WORDS=int(os.environ.get("PARAM_LOG_ACT_WORDS", "12")),
                    DW_ROTATE=int(os.environ.get("PARAM_DW_ROTATE", HwConfig().DW_ROTATE)),
                    PE_PAIR=int(os.environ.get("PARAM_PE_PAIR", HwConfig().PE_PAIR)),
                    RQ_EN=int(os.environ.get("PARAM_RQ_EN", HwConfig().RQ_EN)))


async def setup(dut):
    cfg = hw_config()
    tb = DtpuTB(dut, cfg)
    await tb.reset()
    return tb, AsyncTransport(tb), Core(cfg)


async def run_and_compare(t, core, job, prequeue, exact, where):
    c = t.cfg
    want = expect(core, job)
    stall0 = (await t.read_reg(c.REG_STALL_LO))
    got, err = await run_job(t, job, prequeue=prequeue)
    stall = ((await t.read_reg(c.REG_STALL_LO)) - stall0) & 0xFFFFFFFF
    cycles = await t.read_reg(c.REG_JOB_CYCLES)
    tag = f"{where} job {job.label!r}"
    assert err == want.err, f"{tag}: ERR {err:#x}, model {want.err:#x}"
    if want.words is not None:
        assert got is not None and got.size == want.words.size, f"{tag}: word count"
        bad = np.flatnonzero(got != want.words)
        assert bad.size == 0, (f"{tag}: {bad.size} words differ, first at {bad[0]}: "
                               f"{int(got[bad[0]]):#018x} != model {int(want.words[bad[0]]):#018x}")
    t.tb.log.info("%s: %d words, ERR %#x, %d cycles (%d stalls), model %d", tag,
                  0 if got is None else got.size, err, cycles, stall, want.cycles)
    if want.err & c.ERR_FATAL_MASK:
        t.tb.flush()
        return
    if exact:
        assert stall == 0, f"{tag}: {stall} stall cycles in a stall-free run"
        assert cycles == want.cycles, f"{tag}: {cycles} cycles, model {want.cycles}"
    else:
        assert cycles - stall == want.cycles, (f"{tag}: {cycles} cycles - {stall} stalls != "
                                               f"model {want.cycles}")


@cocotb.test()
async def test_identity(dut):
    tb, t, core = await setup(dut)
    c = t.cfg
    assert await t.read_reg(c.REG_ID) == c.ID
    assert await t.read_reg(c.REG_VERSION) == c.VERSION
    assert await t.read_reg(c.REG_HWCFG0) == c.hwcfg0, hex(await t.read_reg(c.REG_HWCFG0))
    assert await t.read_reg(c.REG_HWCFG1) == c.hwcfg1, hex(await t.read_reg(c.REG_HWCFG1))
    await t.write_reg(c.REG_GEMM_M, 77)
    assert await t.read_reg(c.REG_GEMM_M) == 77
    assert await t.read_reg(c.REG_STATUS) == 0


def _precs(cfg):
    return [p for p in cfg.ENABLED if not p.is_float or os.environ.get("DTPU_FLOAT", "1") == "1"]


@cocotb.test()
async def test_gemm_stall_free(dut):
    """Random GEMM jobs, words queued before START, no gaps: exact cycles, STALL = 0."""
    tb, t, core = await setup(dut)
    precs = _precs(t.cfg)
    for k in range(N_CASES):
        seed = SEED + k
        prec = precs[k % len(precs)]
        for job in gemm_case(t.cfg, seed, prec):
            await run_and_compare(t, core, job, prequeue=True, exact=True, where=f"seed {seed}")


@cocotb.test()
async def test_gemm_gaps_and_backpressure(dut):
    """Random valid gaps and backpressure: words equal, CYCLES - STALL = model cycles."""
    tb, t, core = await setup(dut)
    rng = random.Random(SEED)
    tb.set_idle(lambda: random_pauses(rng, 0.3))
    tb.set_backpressure(random_pauses(rng, 0.4))
    precs = _precs(t.cfg)
    for k in range(N_CASES):
        seed = SEED + 1000 + k
        for job in gemm_case(t.cfg, seed, precs[k % len(precs)]):
            await run_and_compare(t, core, job, prequeue=False, exact=False, where=f"seed {seed}")


def _node_modes():
    from dtpu.spec import DataMode
    modes = [DataMode.INT8, DataMode.UINT8, DataMode.INT16X8]
    if os.environ.get("DTPU_FLOAT", "1") == "1":
        modes.append(DataMode.FLOAT32)
    return modes


async def _nodes(dut, kinds, prequeue, gaps, base):
    tb, t, core = await setup(dut)
    rng = random.Random(SEED + base)
    if gaps:
        tb.set_idle(lambda: random_pauses(rng, 0.25))
        tb.set_backpressure(random_pauses(rng, 0.35))
    for k in range(N_CASES):
        seed = SEED + base + k
        jobs, label = lowered_jobs(t.cfg, seed, kinds=kinds, modes=_node_modes())
        for job in jobs:
            await run_and_compare(t, core, job, prequeue=prequeue, exact=not gaps,
                                  where=f"seed {seed} ({label})")


@cocotb.test()
async def test_depthwise_nodes_stall_free(dut):
    """Lowered DEPTHWISE_CONV_2D nodes: line buffer, taps, padding masks, chunks; exact cycles."""
    from dtpu.spec import OpKind
    await _nodes(dut, [OpKind.DEPTHWISE_CONV_2D], prequeue=True, gaps=False, base=5000)


@cocotb.test()
async def test_depthwise_nodes_gaps(dut):
    from dtpu.spec import OpKind
    await _nodes(dut, [OpKind.DEPTHWISE_CONV_2D], prequeue=False, gaps=True, base=6000)


def _one_word_dw_jobs(cfg, mode):
    """A depthwise node whose image is one activation word (1x1 pixel, 2 channels), two
    batches: seed 18352's shape (1x2 kernel, stride (2, 1), dilation (2, 2), SAME)."""
    from dtpu.hw.lower import lower
    from dtpu.spec import ConvSpec, OpKind, Padding, Quant
    rng = np.random.default_rng(18352)
    zp = 0 if mode.value == "int16x8" else 5
    spec = ConvSpec(OpKind.DEPTHWISE_CONV_2D, mode, (2, 1, 1, 2), (1, 1, 2, 4), stride=(2, 1),
                    dilation=(2, 2), padding=Padding.SAME, depth_multiplier=2,
                    input_q=Quant((0.02,), (zp,)), filter_q=Quant((0.01,), (0,)),
                    output_q=Quant((0.05,), (-zp,)))
    dt = np.int16 if mode.value == "int16x8" else np.int8
    x = rng.integers(np.iinfo(dt).min, np.iinfo(dt).max, spec.input_shape).astype(dt)
    f = rng.integers(-127, 128, spec.filter_shape).astype(np.int8)
    b = rng.integers(-2000, 2000, 4).astype(np.int64 if dt is np.int16 else np.int32)
    low = lower(spec, f, b, cfg)
    return [*low.load_jobs, *low.jobs(x)]


@cocotb.test()
async def test_dw_one_word(dut):
    """A depthwise job whose whole input is one word, queued before START: the loader takes it
    (tlast) in its first cycle, which must not be TLAST_EARLY (the control unit's count
    compared against the sequencer's totals one cycle late: seed 18352 of the gaps sweep).
    Exact words and cycles, int8 and int16x8."""
    from dtpu.spec import DataMode
    tb, t, core = await setup(dut)
    for mode in (DataMode.INT8, DataMode.INT16X8):
        jobs = _one_word_dw_jobs(t.cfg, mode)
        assert any(j.send.get("act") is not None and j.send["act"].size == 1 for j in jobs), mode
        for job in jobs:
            await run_and_compare(t, core, job, prequeue=True, exact=True, where=f"one word {mode.value}")


@cocotb.test()
async def test_gemm_nodes_stall_free(dut):
    """Lowered CONV_2D / FULLY_CONNECTED nodes (im2col, paging) as the delegate runs them."""
    from dtpu.spec import OpKind
    await _nodes(dut, [OpKind.CONV_2D, OpKind.FULLY_CONNECTED], prequeue=True, gaps=False, base=7000)


def _regs_job(cfg, opcode, prec=None, mode="RAW", variant=0, **regs):
    from dtpu.hw.lower import Job
    from dtpu_sim.jobgen import job_reg
    return Job(f"{opcode} {regs}", [*regs.items(), job_reg(cfg, opcode, prec, mode, variant)])


@cocotb.test()
async def test_config_errors(dut):
    """Every CONFIG check the golden model makes: same ERR bit, 2 cycles, nothing consumed."""
    tb, t, core = await setup(dut)
    c = t.cfg
    P = Precision
    cases = [
        _regs_job(c, "NOP"),
        _regs_job(c, "LOAD_WGT", LOAD_ADDR=0, LOAD_COUNT=0),
        _regs_job(c, "LOAD_WGT", LOAD_ADDR=c.WEIGHT_WORDS - 2, LOAD_COUNT=3),
        _regs_job(c, "LOAD_PARAM", LOAD_ADDR=0, LOAD_COUNT=3),
        _regs_job(c, "LOAD_PARAM", LOAD_ADDR=c.PARAM_ENTRIES - 1, LOAD_COUNT=4),
        _regs_job(c, "GEMM", P.INT8, GEMM_M=0, GEMM_KW=1, GEMM_NT=1),
        _regs_job(c, "GEMM", P.INT8, GEMM_M=1, GEMM_KW=c.ACT_WORDS + 1, GEMM_NT=1),
        _regs_job(c, "GEMM", P.INT8, GEMM_M=1, GEMM_KW=1, GEMM_NT=1, WGT_BASE=1),
        _regs_job(c, "GEMM", P.INT8, GEMM_M=1, GEMM_KW=4, GEMM_NT=c.WEIGHT_WORDS // (4 * c.COLS) + 1),
        _regs_job(c, "GEMM", P.INT8, "REQUANT", GEMM_M=1, GEMM_KW=1, GEMM_NT=1, PARAM_BASE=1),
        _regs_job(c, "GEMM", P.INT8, "REQUANT", GEMM_M=1, GEMM_KW=1, GEMM_NT=c.PARAM_ENTRIES // c.COLS + 1),
        _regs_job(c, "GEMM", P.INT8, "FLOAT", GEMM_M=1, GEMM_KW=1, GEMM_NT=1),
        _regs_job(c, "GEMM", P.FP32, "RAW", GEMM_M=1, GEMM_KW=1, GEMM_NT=1),
        _regs_job(c, "GEMM", P.INT32, "REQUANT", GEMM_M=1, GEMM_KW=1, GEMM_NT=1),
    ]
    vmax = max(c.enums["RQ_VARIANT"].values())
    if vmax + 1 < 1 << c.reg("JOB").field("RQ_VARIANT").width:  # an unused variant code
        cases.append(_regs_job(c, "GEMM", P.INT8, "REQUANT", vmax + 1, GEMM_M=1, GEMM_KW=1, GEMM_NT=1))
    from dtpu.hw.lower import Job
    cases.append(Job("bad opcode", [("JOB", 9)]))
    cases.append(Job("bad precision", [("JOB", c.encode("JOB", OPCODE=3, PREC=7))]))
    dwbase = dict(DW_IN=c.encode("DW_IN", H=4, W=4), DW_OUT=c.encode("DW_OUT", H=4, W=4),
                  DW_KERNEL=c.encode("DW_KERNEL", KH=3, KW=3, PT=1, PL=1),
                  DW_STRIDE=c.encode("DW_STRIDE", SY=1, SX=1, DY=1, DX=1),
                  DW_GROUPS=c.encode("DW_GROUPS", GC=1, NCHUNK=1),
                  DW_RING=c.encode("DW_RING", LB_ROWS=3, TAP_CYCLES=1))
    bad = [dict(DW_IN=0), dict(DW_KERNEL=c.encode("DW_KERNEL", KH=3, KW=3, PT=3, PL=1)),
           dict(DW_OUT=c.encode("DW_OUT", H=9, W=4)), dict(DW_RING=c.encode("DW_RING", LB_ROWS=2, TAP_CYCLES=1)),
           dict(DW_RING=c.encode("DW_RING", LB_ROWS=3, TAP_CYCLES=3)),
           dict(DW_RING=c.encode("DW_RING", LB_ROWS=c.ACT_WORDS, TAP_CYCLES=1)),
           dict(WGT_BASE=c.COLS // 2), dict(WGT_BASE=c.WEIGHT_WORDS - c.COLS),
           dict(PARAM_BASE=c.PARAM_ENTRIES)]
    for b in bad:
        cases.append(_regs_job(c, "DWCONV", P.INT8, "REQUANT", **{**dwbase, "WGT_BASE": 0, "PARAM_BASE": 0, **b}))
    names = [r.name for r in c.registers if c.REG_JOB <= r.offset <= c.REG_PF_COUNT]
    for job in cases:
        # every job register written (0 unless the case sets it): no state from earlier cases
        given = dict(job.regs)
        job.regs = [(n, given.get(n, 0)) for n in names if n != "JOB"] + [("JOB", given["JOB"])]
        want = expect(core, job)
        for name, value in job.regs:
            await t.write_reg(c.reg(name).offset, value)
        for name, value in job.regs:
            assert await t.read_reg(c.reg(name).offset) == value & 0xFFFFFFFF, (job.label, name)
        got, err = await run_job(t, job)
        cyc = await t.read_reg(c.REG_JOB_CYCLES)
        assert err == want.err, f"{job.label} {job.regs[-1]}: ERR {err:#x}, model {want.err:#x}"
        assert cyc == want.cycles == c.CFG_CYCLES, f"{job.label}: {cyc} cycles, model {want.cycles}"
        assert await t.read_reg(c.REG_WORDS_ACT) == 0


@cocotb.test()
async def test_busy_write_soft_reset_and_counters(dut):
    """A job waiting for input: register writes and START set BUSY_WRITE and are ignored;
    SOFT_RESET aborts it and clears STATUS, ERR, job registers and counters; IRQ follows DONE."""
    tb, t, core = await setup(dut)
    c = t.cfg
    jobs = gemm_case(c, SEED, Precision.INT8, "RAW")
    for job in jobs[:-1]:
        await run_and_compare(t, core, job, True, True, "load")
    gemm = jobs[-1]
    for name, value in gemm.regs:
        await t.write_reg(c.reg(name).offset, value)
    await t.write_reg(c.REG_CTRL, c.encode("CTRL", START=1, IRQ_EN=1))
    st = await t.read_reg(c.REG_STATUS)
    assert st & 1 and not st & 2, hex(st)
    await t.write_reg(c.REG_GEMM_M, 1234)
    await t.write_reg(c.REG_CTRL, c.encode("CTRL", START=1, IRQ_EN=1))
    assert await t.read_reg(c.REG_GEMM_M) != 1234
    assert await t.read_reg(c.REG_ERR) == c.ERR_BUSY_WRITE
    assert (await t.read_reg(c.REG_STATUS)) & 0b101 == 0b101  # BUSY, ERROR
    await ClockCycles(dut.clk, 20)
    assert (await t.read_reg(c.REG_STALL_LO)) > 0  # waiting for s_axis_act counts as stalls
    await t.write_reg(c.REG_CTRL, c.encode("CTRL", SOFT_RESET=1, IRQ_EN=1))
    assert await t.read_reg(c.REG_STATUS) == 0
    assert await t.read_reg(c.REG_ERR) == 0
    assert await t.read_reg(c.REG_GEMM_M) == 0
    assert await t.read_reg(c.REG_CYCLES_LO) == 0
    assert (await t.read_reg(c.REG_CTRL)) == c.encode("CTRL", IRQ_EN=1)
    assert int(dut.irq.value) == 0
    # the memories survive a soft reset: the same GEMM now runs clean and exactly
    core.write(c.REG_CTRL, c.encode("CTRL", SOFT_RESET=1))
    await run_and_compare(t, core, gemm, True, True, "after soft reset")
    assert int(dut.irq.value) == 0  # the driver's START write leaves IRQ_EN clear
    await t.write_reg(c.REG_CTRL, c.encode("CTRL", IRQ_EN=1))
    await RisingEdge(dut.clk)
    assert int(dut.irq.value) == 1  # DONE is still set
    before = await t.read_reg(c.REG_CYCLES_LO)
    assert before == core.cycles, (before, core.cycles)
    assert await t.read_reg(c.REG_WORDS_ACT) == core.read(c.REG_WORDS_ACT)
    assert await t.read_reg(c.REG_WORDS_RES) == core.read(c.REG_WORDS_RES)
    await t.write_reg(c.REG_CTRL, c.encode("CTRL", CLEAR_COUNTERS=1))
    assert await t.read_reg(c.REG_CYCLES_LO) == 0 and await t.read_reg(c.REG_WORDS_RES) == 0


@cocotb.test()
async def test_tlast_checks(dut):
    """tlast one word late (TLAST_MISSING, as the model) and early (TLAST_EARLY, job aborted)."""
    tb, t, core = await setup(dut)
    c = t.cfg
    from dtpu.hw.lower import Job
    from dtpu_sim.jobgen import load_job
    words = np.arange(1, 6, dtype=np.uint64)
    late = load_job(c, "LOAD_WGT", 0, words, "late tlast")
    late.regs[1] = ("LOAD_COUNT", 4)
    want = expect(core, late)
    got, err = await run_job(t, late)
    assert err == want.err == c.ERR_TLAST_MISSING, (hex(err), hex(want.err))
    await tb.reset()  # drops the word the source still presents
    tb.flush()
    early = load_job(c, "LOAD_WGT", 0, words, "early tlast")
    early.regs[1] = ("LOAD_COUNT", 8)
    got, err = await run_job(t, early)
    assert err == c.ERR_TLAST_EARLY, hex(err)
    assert (await t.read_reg(c.REG_STATUS)) & 0b11 == 0b10  # DONE (ERR already cleared)
    assert await t.read_reg(c.REG_WORDS_WGT) == 5
    # a clean job afterwards
    core = Core(c)
    await t.write_reg(c.REG_CTRL, c.encode("CTRL", SOFT_RESET=1))
    for job in gemm_case(c, SEED + 7, Precision.INT16):
        await run_and_compare(t, core, job, True, True, "after tlast errors")


@cocotb.test()
async def test_reset_mid_job(dut):
    """aresetn in the middle of a GEMM (inputs half sent, results pending) and of a depthwise
    job, then clean jobs: same words and cycles as a fresh golden model."""
    tb, t, core = await setup(dut)
    c = t.cfg
    from dtpu.spec import OpKind
    for k, kinds in enumerate(([OpKind.CONV_2D], [OpKind.DEPTHWISE_CONV_2D])):
        jobs, label = lowered_jobs(c, SEED + 300 + k, kinds=kinds, modes=_node_modes()[:2])
        for job in jobs[:-1]:
            await run_and_compare(t, core, job, True, True, label)
        last = jobs[-1]
        for name, value in last.regs:
            await t.write_reg(c.reg(name).offset, value)
        await t.write_reg(c.REG_CTRL, c.encode("CTRL", START=1))
        half = last.send["act"][: max(1, last.send["act"].size // 2)]
        tb.set_backpressure(random_pauses(random.Random(1), 0.9))
        await t.send("act", half)
        await ClockCycles(dut.clk, 40 + 7 * k)
        await tb.reset()
        tb.flush()
        tb.set_backpressure(None)
        for reg in (c.REG_STATUS, c.REG_ERR, c.REG_CYCLES_LO, c.REG_WORDS_ACT):
            assert await t.read_reg(reg) == 0, hex(reg)
        core = Core(c)  # the reset forgets everything the host knows about the core
        for job in jobs:
            await run_and_compare(t, core, job, True, True, f"after reset: {label}")


@cocotb.test()
async def test_variant_not_built(dut):
    """Every requantization variant the build leaves out (RQ_EN) is refused in CONFIG like the
    golden model refuses it (ERR.BAD_MODE, CFG_CYCLES, no word taken), for each integer lane
    precision built (tests/test_rq_en.py: RAW jobs ignore the field)."""
    tb, t, core = await setup(dut)
    c = t.cfg
    names = [r.name for r in c.registers if c.REG_JOB <= r.offset <= c.REG_PF_COUNT]
    precs = [p for p in (Precision.INT8, Precision.UINT8, Precision.INT16) if p in c.ENABLED]
    refused = 0
    for prec in precs:
        for vname, code in c.enums["RQ_VARIANT"].items():
            if c.rq_built(code):
                continue
            job = _regs_job(c, "GEMM", prec, "REQUANT", code, GEMM_M=1, GEMM_KW=1, GEMM_NT=1)
            given = dict(job.regs)
            job.regs = [(n, given.get(n, 0)) for n in names if n != "JOB"] + [("JOB", given["JOB"])]
            want = expect(core, job)
            got, err = await run_job(t, job)
            cyc = await t.read_reg(c.REG_JOB_CYCLES)
            assert err == want.err == c.ERR_BAD_MODE, (prec, vname, hex(err), hex(want.err))
            assert cyc == want.cycles == c.CFG_CYCLES, (prec, vname, cyc, want.cycles)
            assert await t.read_reg(c.REG_WORDS_ACT) == 0
            refused += 1
    tb.log.info("RQ_EN=%d: %d REQUANT jobs naming a variant not built refused", c.RQ_EN, refused)


@cocotb.test()
async def test_precision_not_built(dut):
    """Every precision the build leaves out is refused in CONFIG (ERR.BAD_PRECISION, 2 cycles)."""
    tb, t, core = await setup(dut)
    c = t.cfg
    for name, code in c.enums["PREC"].items():
        prec = c.prec_of_code(code)
        if prec in c.ENABLED:
            continue
        mode = "FLOAT" if prec.is_float else "RAW"
        job = _regs_job(c, "GEMM", prec, mode, GEMM_M=1, GEMM_KW=1, GEMM_NT=1)
        want = expect(core, job)
        got, err = await run_job(t, job)
        assert err == want.err == c.ERR_BAD_PRECISION, (name, hex(err), hex(want.err))


# ------------------------------------------------------------------------------------------------
# prefetch (PF_ADDR / PF_COUNT): a GEMM or DWCONV job also loads weight words for a later job


def _pf_kinds(k: int) -> tuple[str, str]:
    return ("gemm", "dw")[k % 2], ("prefetch", "compute")[(k // 2) % 2]


async def _compute_only_cycles(core, job) -> int:
    """The model's cycles for `job` without its prefetch (on a copy of the model)."""
    import copy
    bare = without_prefetch(job)
    bare.send = {s: w for s, w in bare.send.items() if s != "wgt"}
    return expect(copy.deepcopy(core), bare).cycles


async def _prefetch_cases(dut, gaps: bool, base: int):
    tb, t, core = await setup(dut)
    c = t.cfg
    rng = random.Random(SEED + base)
    if gaps:
        tb.set_idle(lambda: random_pauses(rng, 0.3))
        tb.set_backpressure(random_pauses(rng, 0.35))
    seen = set()
    for k in range(max(N_CASES, 4)):
        seed = SEED + base + k
        kind, bound = _pf_kinds(k)
        case = prefetch_case(c, seed, kind, bound)
        where = f"seed {seed} ({case.label})"
        for job in case.setup:
            await run_and_compare(t, core, job, prequeue=not gaps, exact=not gaps, where=where)
        compute = await _compute_only_cycles(core, case.job)
        n = case.job.send["wgt"].size
        pf_cycles = c.CFG_CYCLES + n + c.LOAD_LATENCY
        seen.add("prefetch" if pf_cycles > compute else "compute")
        if gaps:
            want = expect(core, case.job)
            stall0 = await t.read_reg(c.REG_STALL_LO)
            got, err = await run_job(t, case.job, prequeue=False)
            stall = ((await t.read_reg(c.REG_STALL_LO)) - stall0) & 0xFFFFFFFF
            cycles = await t.read_reg(c.REG_JOB_CYCLES)
            assert err == want.err, f"{where}: ERR {err:#x}, model {want.err:#x}"
            if want.err & c.ERR_FATAL_MASK:
                tb.flush()
            else:
                assert got is not None and np.array_equal(got, want.words), f"{where}: words differ"
            # a late weight word delays only the prefetch, a late activation only the compute
            # path: CYCLES covers both schedules, CYCLES - STALL at least the compute path's
            assert cycles >= want.cycles, f"{where}: {cycles} cycles < stall-free {want.cycles}"
            assert cycles - stall >= compute, f"{where}: {cycles} - {stall} stalls < compute {compute}"
        else:
            await run_and_compare(t, core, case.job, prequeue=True, exact=True, where=where)
            if not core.jobs[-1].error & c.ERR_FATAL_MASK:  # OVERFLOW: the RTL runs to its end
                assert await t.read_reg(c.REG_JOB_CYCLES) == max(compute, pf_cycles), where
        for job in case.after:
            await run_and_compare(t, core, job, prequeue=not gaps, exact=not gaps, where=where)
        assert await t.read_reg(c.REG_WORDS_WGT) == core.read(c.REG_WORDS_WGT), where
    assert seen == {"prefetch", "compute"}, f"the cases were all {seen}-bound"


@cocotb.test()
async def test_prefetch_stall_free(dut):
    """GEMM and DWCONV jobs prefetching the weights of a later GEMM, prefetch- and
    compute-bound: exact words and cycles max(compute, CFG + PF_COUNT + LOAD_LATENCY), STALL 0;
    the later GEMM reads the prefetched words (its LOAD_WGT is skipped)."""
    await _prefetch_cases(dut, gaps=False, base=8000)


@cocotb.test()
async def test_prefetch_gaps(dut):
    """The same with random valid gaps on both input streams and backpressure: words exact."""
    await _prefetch_cases(dut, gaps=True, base=9000)


def _gemm_regs(c, wb=64, m=1, kw=2, nt=2, mode="RAW", **extra):
    return _regs_job(c, "GEMM", Precision.INT8, mode, GEMM_M=m, GEMM_KW=kw, GEMM_NT=nt,
                     WGT_BASE=wb, **extra)


def _dw_regs(c, mode="RAW", **extra):
    regs = dict(DW_IN=c.encode("DW_IN", H=4, W=4), DW_OUT=c.encode("DW_OUT", H=4, W=4),
                DW_KERNEL=c.encode("DW_KERNEL", KH=3, KW=3, PT=1, PL=1),
                DW_STRIDE=c.encode("DW_STRIDE", SY=1, SX=1, DY=1, DX=1),
                DW_GROUPS=c.encode("DW_GROUPS", GC=1, NCHUNK=1),
                DW_RING=c.encode("DW_RING", LB_ROWS=3, TAP_CYCLES=1), WGT_BASE=64)
    regs.update(extra)
    return _regs_job(c, "DWCONV", Precision.INT8, mode, **regs)


@cocotb.test()
async def test_prefetch_range_errors(dut):
    """CONFIG refuses a prefetch range that leaves the weight memory or overlaps the job's own
    weight words (ERR.WGT_RANGE, CFG_CYCLES, not one word taken from either input stream, even
    with both streams' words waiting); ranges that touch without overlapping run."""
    tb, t, core = await setup(dut)
    c = t.cfg
    W, C = c.WEIGHT_WORDS, c.COLS
    gemm_end = 64 + 2 * 2 * C                     # own weights [64, gemm_end)
    dw_end = 64 + 9 * C                           # taps * GP, GP = COLS
    bad = [
        (_gemm_regs(c, PF_ADDR=gemm_end - 1, PF_COUNT=4), c.ERR_WGT_RANGE),
        (_gemm_regs(c, PF_ADDR=60, PF_COUNT=5), c.ERR_WGT_RANGE),
        (_gemm_regs(c, PF_ADDR=0, PF_COUNT=W), c.ERR_WGT_RANGE),           # covers them
        (_gemm_regs(c, PF_ADDR=W - 3, PF_COUNT=4), c.ERR_WGT_RANGE),
        (_gemm_regs(c, PF_ADDR=0xFFFFFFFF, PF_COUNT=2), c.ERR_WGT_RANGE),  # 32-bit wrap
        (_gemm_regs(c, PF_ADDR=W, PF_COUNT=0xFFFFFFFF), c.ERR_WGT_RANGE),
        # the prefetch check sits with WGT_BASE's: before PARAM_RANGE, after ACT_CAPACITY
        (_gemm_regs(c, mode="REQUANT", PARAM_BASE=1, PF_ADDR=64, PF_COUNT=1), c.ERR_WGT_RANGE),
        (_gemm_regs(c, kw=c.ACT_WORDS + 1, PF_ADDR=64, PF_COUNT=1), c.ERR_ACT_CAPACITY),
        (_dw_regs(c, PF_ADDR=dw_end - 1, PF_COUNT=1), c.ERR_WGT_RANGE),
        (_dw_regs(c, PF_ADDR=0, PF_COUNT=65), c.ERR_WGT_RANGE),
        (_dw_regs(c, PF_ADDR=W - 1, PF_COUNT=2), c.ERR_WGT_RANGE),
        (_dw_regs(c, mode="REQUANT", PARAM_BASE=c.PARAM_ENTRIES, PF_ADDR=64, PF_COUNT=1),
         c.ERR_WGT_RANGE),
        (_dw_regs(c, PF_ADDR=64, PF_COUNT=1, DW_IN=0), c.ERR_BAD_DIMS),
        (_dw_regs(c, PF_ADDR=64, PF_COUNT=1, DW_RING=c.encode("DW_RING", LB_ROWS=2, TAP_CYCLES=1)),
         c.ERR_ACT_CAPACITY),
    ]
    names = [r.name for r in c.registers if c.REG_JOB <= r.offset <= c.REG_PF_COUNT]
    nrng = np.random.default_rng(SEED)
    for job, bit in bad:
        given = dict(job.regs)
        job.regs = [(n, given.get(n, 0)) for n in names if n != "JOB"] + [("JOB", given["JOB"])]
        job.send = {"act": nrng.integers(0, 1 << 63, 16, dtype=np.uint64),
                    "wgt": nrng.integers(0, 1 << 63, 8, dtype=np.uint64)}
        want = expect(Core(c), job)   # a fresh model: the words it was offered stay queued
        await t.write_reg(c.REG_CTRL, c.encode("CTRL", CLEAR_COUNTERS=1))
        got, err = await run_job(t, job, prequeue=True)
        where = f"{job.label}"
        assert err == bit, f"{where}: ERR {err:#x}, expected {bit:#x}"
        assert want.err == bit, f"{where}: model ERR {want.err:#x}, expected {bit:#x}"
        assert await t.read_reg(c.REG_JOB_CYCLES) == c.CFG_CYCLES == want.cycles, where
        await ClockCycles(dut.clk, 10)
        assert await t.read_reg(c.REG_WORDS_WGT) == 0, where
        assert await t.read_reg(c.REG_WORDS_ACT) == 0, where
        await tb.reset()   # drop the words the sources still present
        tb.flush()
    # touching ranges are fine: GEMM and DW prefetches right before / after their weights and
    # at the very end of the memory; LOAD_* and NOP ignore PF_*
    core = Core(c)
    from dtpu_sim.jobgen import load_job
    own = nrng.integers(0, 1 << 63, 9 * C, dtype=np.uint64)
    await run_and_compare(t, core, load_job(c, "LOAD_WGT", 64, own, "own weights"), True, True, "load")
    ok = [
        _gemm_regs(c, PF_ADDR=64 - 4, PF_COUNT=4), _gemm_regs(c, PF_ADDR=gemm_end, PF_COUNT=4),
        _gemm_regs(c, PF_ADDR=W - 4, PF_COUNT=4), _dw_regs(c, PF_ADDR=dw_end, PF_COUNT=3),
        _dw_regs(c, PF_ADDR=0, PF_COUNT=64), _gemm_regs(c, PF_ADDR=0xFFFFFFF0, PF_COUNT=0),
    ]
    for job in ok:
        given = dict(job.regs)
        job.regs = [(n, given.get(n, 0)) for n in names if n != "JOB"] + [("JOB", given["JOB"])]
        op = c.decode("JOB", given["JOB"])["OPCODE"]
        n_act = 2 if op == c.OPCODE_GEMM else 16
        job.send = {"act": nrng.integers(0, 1 << 63, n_act, dtype=np.uint64)}
        if given["PF_COUNT"]:
            job.send["wgt"] = nrng.integers(0, 1 << 63, given["PF_COUNT"], dtype=np.uint64)
        job.recv = C if op == c.OPCODE_GEMM else 16 * 4   # RAW int8: 2 lanes per word
        await run_and_compare(t, core, job, prequeue=True, exact=True, where="touching range")
    for job in (load_job(c, "LOAD_WGT", 8, np.arange(1, 9, dtype=np.uint64), "load"),
                _regs_job(c, "NOP")):
        job.regs[:0] = [("PF_ADDR", 0xFFFFFFFF), ("PF_COUNT", 0xFFFFFFFF)]
        await run_and_compare(t, core, job, prequeue=True, exact=True, where="PF_* ignored")


async def _start_prefetch_job(t, job, send_wgt=None):
    c = t.cfg
    for name, value in job.regs:
        await t.write_reg(c.reg(name).offset, value)
    await t.send("act", job.send["act"])
    await t.send("wgt", job.send["wgt"] if send_wgt is None else send_wgt)
    await t.write_reg(c.REG_CTRL, c.encode("CTRL", START=1))


@cocotb.test()
async def test_prefetch_tlast_and_late_words(dut):
    """s_axis_wgt's tlast during a prefetch as during a LOAD: one word early aborts the job
    (TLAST_EARLY), none on the last word is TLAST_MISSING (the job still takes exactly PF_COUNT
    words and runs to its end). Weight words that arrive only after the compute path has
    finished count as stalls from the cycle it finishes in; a clean job follows."""
    tb, t, core = await setup(dut)
    c = t.cfg
    case = prefetch_case(c, SEED + 11, "gemm", "compute")
    for job in case.setup:
        await run_and_compare(t, core, job, True, True, "setup")
    words = case.job.send["wgt"]
    n = words.size
    # early: tlast on word n-2
    await _start_prefetch_job(t, case.job, words[: n - 2])
    await t.wait_done()
    assert await t.read_reg(c.REG_ERR) == c.ERR_TLAST_EARLY
    st = await t.read_reg(c.REG_STATUS)
    assert st & 0b11 == 0b10 and (st >> 4) & 0xF == c.STATE_IDLE, hex(st)
    await tb.reset()
    tb.flush()
    # missing: n + 1 words, tlast on the extra one; exactly n taken
    await _start_prefetch_job(t, case.job, np.concatenate([words, words[:1]]))
    await t.wait_done()
    assert await t.read_reg(c.REG_ERR) == c.ERR_TLAST_MISSING
    await ClockCycles(dut.clk, 10)
    assert await t.read_reg(c.REG_WORDS_WGT) == n
    await tb.reset()
    tb.flush()
    # late weight words: the compute path finishes first, then waits for all n words
    core = Core(c)
    for job in case.setup:
        await run_and_compare(t, core, job, True, True, "setup after reset")
    compute = await _compute_only_cycles(core, case.job)
    want = expect(core, case.job)
    assert want.cycles == compute, "the case is meant to be compute-bound"
    for name, value in case.job.regs:
        await t.write_reg(c.reg(name).offset, value)
    await t.send("act", case.job.send["act"])
    await t.write_reg(c.REG_CTRL, c.encode("CTRL", CLEAR_COUNTERS=1, START=1))
    await ClockCycles(dut.clk, compute + 25)
    st = await t.read_reg(c.REG_STATUS)
    assert st & 1 and (st >> 4) & 0xF == c.STATE_GEMM, hex(st)
    await t.send("wgt", words)
    await t.wait_done()
    assert await t.read_reg(c.REG_ERR) == 0
    got = await t.recv("res", case.job.recv)
    assert np.array_equal(got, want.words)
    cycles = await t.read_reg(c.REG_JOB_CYCLES)
    stall = await t.read_reg(c.REG_STALL_LO)
    assert stall > 25, stall
    assert cycles - stall == compute - 1 + n + c.LOAD_LATENCY, (cycles, stall, compute, n)
    for job in case.after:
        await run_and_compare(t, core, job, True, True, "after late words")


@cocotb.test()
async def test_prefetch_reset_mid_job(dut):
    """aresetn while a GEMM's and a depthwise job's prefetch is running (weight words trickling
    in, results held back), then the same cases clean on a fresh model: exact."""
    tb, t, core = await setup(dut)
    c = t.cfg
    for k, kind in enumerate(("gemm", "dw")):
        case = prefetch_case(c, SEED + 400 + k, kind, "prefetch")
        for job in case.setup:
            await run_and_compare(t, core, job, True, True, case.label)
        for name, value in case.job.regs:
            await t.write_reg(c.reg(name).offset, value)
        await t.write_reg(c.REG_CTRL, c.encode("CTRL", CLEAR_COUNTERS=1, START=1))
        tb.set_idle(lambda: random_pauses(random.Random(3), 0.8))
        tb.set_backpressure(random_pauses(random.Random(1), 0.9))
        for stream in ("act", "wgt"):
            await t.send(stream, case.job.send[stream])
        await ClockCycles(dut.clk, 60 + 9 * k)
        assert 0 < await t.read_reg(c.REG_WORDS_WGT) < case.job.send["wgt"].size
        await tb.reset()
        tb.flush()
        tb.set_idle(None)
        tb.set_backpressure(None)
        for reg in (c.REG_STATUS, c.REG_ERR, c.REG_CYCLES_LO, c.REG_WORDS_WGT, c.REG_PF_COUNT):
            assert await t.read_reg(reg) == 0, hex(reg)
        core = Core(c)
        for job in [*case.setup, case.job, *case.after]:
            await run_and_compare(t, core, job, True, True, f"after reset: {case.label}")


@cocotb.test()
async def test_dw_bank_conflict_in_config(dut):
    """Random depthwise rows (OW, GC, SX, TAP_CYCLES): ERR.BANK_CONFLICT exactly when the golden
    model's dw_conflict says so, from CONFIG (CFG_CYCLES, not one activation word taken); the
    others run exactly. A DW_ROTATE build has no bank conflicts; a PE_PAIR build refuses a pair
    issuing together (TAP_CYCLES 1, OW*GC > COLS/2) in either layout."""
    tb, t, core = await setup(dut)
    c = t.cfg
    C = c.COLS
    from dtpu_sim.jobgen import load_job
    rng = random.Random(SEED + 77)
    nrng = np.random.default_rng(SEED + 77)
    from dtpu.hw.dw_format import dw_rotated
    # every weight word a row below reads (KW <= 3 taps; rotated layout: up to COLS step phases
    # of COLS words a tap), so that no word left by an earlier test is read
    wgt = nrng.integers(0, 1 << 63, 3 * C * (C if dw_rotated(c) else 1), dtype=np.uint64)
    await run_and_compare(t, core, load_job(c, "LOAD_WGT", 0, wgt, "dw weights"), True, True, "load")
    tcs = [v for v in (1, 2, 4, 8, 16) if v <= C]
    names = [r.name for r in c.registers if c.REG_JOB <= r.offset <= c.REG_PF_COUNT]
    seen = {0: 0, 1: 0}
    for k in range(4 * N_CASES):
        gc, kw, tc = rng.randint(1, C), rng.randint(1, 3), rng.choice(tcs)
        sx = rng.choice([1, 2, 3, 4, C])
        ow = rng.randint(1, C + 1 if sx <= 4 else 3)
        iw = (ow - 1) * sx + kw
        regs = dict(DW_IN=c.encode("DW_IN", H=1, W=iw), DW_OUT=c.encode("DW_OUT", H=1, W=ow),
                    DW_KERNEL=c.encode("DW_KERNEL", KH=1, KW=kw, PT=0, PL=0),
                    DW_STRIDE=c.encode("DW_STRIDE", SY=1, SX=sx, DY=1, DX=1),
                    DW_GROUPS=c.encode("DW_GROUPS", GC=gc, NCHUNK=1),
                    DW_RING=c.encode("DW_RING", LB_ROWS=1, TAP_CYCLES=tc))
        job = _regs_job(c, "DWCONV", Precision.INT8, "RAW", **regs)
        given = dict(job.regs)
        job.regs = [(n, given.get(n, 0)) for n in names if n != "JOB"] + [("JOB", given["JOB"])]
        job.send = {"act": nrng.integers(0, 1 << 63, iw * gc, dtype=np.uint64)}
        job.recv = ow * gc * 4
        job.label = f"dw ow{ow} gc{gc} sx{sx} kw{kw} tc{tc}"
        from dtpu.hw.contract_schedules import dw_bank_conflict, dw_pair_conflict
        from dtpu.hw.dw_format import dw_conflict
        # the rotated layout reads one rotation of the banks: it runs every row the banked one
        # refuses; a build without pairs runs every row the pair rule refuses
        conflict = dw_conflict(c, ow, gc, sx, tc)
        seen[int(dw_bank_conflict(C, ow, gc, sx, tc) or dw_pair_conflict(C, ow, gc, tc))] += 1
        if not conflict:
            await run_and_compare(t, core, job, True, True, "no conflict")
            continue
        want = expect(core, job)
        assert want.err == c.ERR_BANK_CONFLICT and want.cycles == c.CFG_CYCLES, job.label
        act0 = await t.read_reg(c.REG_WORDS_ACT)
        got, err = await run_job(t, job, prequeue=True)
        assert err == c.ERR_BANK_CONFLICT, f"{job.label}: ERR {err:#x}"
        assert await t.read_reg(c.REG_JOB_CYCLES) == c.CFG_CYCLES, job.label
        await ClockCycles(dut.clk, 8)
        assert await t.read_reg(c.REG_WORDS_ACT) == act0, job.label
        await tb.reset()   # drop the activation words still presented; the model likewise
        tb.flush()
        core.write(c.REG_CTRL, c.encode("CTRL", SOFT_RESET=1))
    assert seen[0] and seen[1], seen
