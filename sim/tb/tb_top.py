"""cocotb: dtpu_axi through its AXI ports against the golden model (words, ERR, cycles)."""
import os
import random

import cocotb
import numpy as np
from cocotb.triggers import ClockCycles, RisingEdge

from dtpu.hw.config import HwConfig
from dtpu.hw.jobs import check_identity, run_jobs
from dtpu.hw.model import Core
from dtpu.precision import Precision
from dtpu_sim.axi import AsyncTransport, BridgeTransport, DtpuTB, random_pauses, run_job
from dtpu_sim.jobgen import expect, gemm_case, lowered_jobs

SEED = int(os.environ.get("DTPU_SEED", "12345"))
N_CASES = int(os.environ.get("DTPU_CASES", "12"))


def hw_config() -> HwConfig:
    return HwConfig(COLS=int(os.environ.get("PARAM_COLS", "8")),
                    LOG_WEIGHT_WORDS=int(os.environ.get("PARAM_LOG_WEIGHT_WORDS", "15")),
                    LOG_PARAM_ENTRIES=int(os.environ.get("PARAM_LOG_PARAM_ENTRIES", "12")),
                    LOG_ACT_WORDS=int(os.environ.get("PARAM_LOG_ACT_WORDS", "12")))


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


@cocotb.test()
async def test_gemm_nodes_stall_free(dut):
    """Lowered CONV_2D / FULLY_CONNECTED nodes (im2col, paging) as the delegate runs them."""
    from dtpu.spec import OpKind
    await _nodes(dut, [OpKind.CONV_2D, OpKind.FULLY_CONNECTED], prequeue=True, gaps=False, base=7000)
