"""cocotb: dtpu_cl_top (1.2 core + fetcher + read master + list sequencer) against the golden
model dtpu.hw.executor.Executor.

The DDR image sits in an AxiRam (sim/dtpu_sim/axi_mem.py) with random latency and backpressure;
lists are started through the AXI4-Lite registers (CL_BASE, DOORBELL) and waited for through the
interrupt (IRQ.DONE_EN). Expected: the weight and parameter memories of the core word-exact
against the Executor's core model run on the same bytes (the RTL memories are read back through
the simulator, hierarchically), the 1.2 job registers after REGS lists, and CL_ERR, CL_ERR_PC,
CL_ERR_TAG, DESCS as the Executor reports them. test_prologue_cycles: under the contract's
memory model (fixed MEM_READ_LATENCY, no stalls) CL_CYCLES, IDLE and RD_BEATS of LOAD / REGS /
END lists equal the Executor's Timeline. RUN and POST run end to end in tb_cl_run.py."""
import os
import random

import cocotb
import numpy as np
from cocotb.clock import Clock
from cocotb.triggers import ClockCycles, RisingEdge
from cocotbext.axi import AxiLiteBus, AxiLiteMaster

from dtpu.hw.config import HwConfig
from dtpu.hw.core import Core
from dtpu.hw.ddr import Ddr
from dtpu.hw.executor import Executor
from dtpu.hw.listcompiler import NodeIn, compile_program
from dtpu.hw.listformat import Format
from dtpu.spec import ConvSpec, DataMode, OpKind, Padding, Quant
from dtpu_sim.axi_mem import DECERR, SLVERR, Mem, Monitor, Region
from dtpu_sim.cycles import contract_lat

SEED = int(os.environ.get("DTPU_SEED", "4711"))
N_RANDOM = int(os.environ.get("DTPU_CASES", "6"))
MEM = 1 << 20
BASE = 0x10000
U64 = np.dtype("<u8")
CFG = HwConfig(COLS=int(os.environ.get("PARAM_COLS", "8")),
               LOG_WEIGHT_WORDS=int(os.environ.get("PARAM_LOG_WEIGHT_WORDS", "15")),
               LOG_PARAM_ENTRIES=int(os.environ.get("PARAM_LOG_PARAM_ENTRIES", "12")),
               LOG_ACT_WORDS=int(os.environ.get("PARAM_LOG_ACT_WORDS", "12")),
               # the vector unit's requantizing lanes (dtpu_cl_top VEC_RQ_LANES), as built
               VEC_RQ_LANES=int(os.environ.get("PARAM_VEC_RQ_LANES", "8")))
FMT = Format(CFG)
MAX_BURST = int(os.environ.get("PARAM_MAX_BURST", "16"))
MAX_OUT = int(os.environ.get("PARAM_MAX_OUTSTANDING", "8"))
JOB_REGS = sorted(r.offset for r in CFG.registers if r.access == "rw" and r.name != "CTRL")
R = {name: FMT.reg_offset(name) for name in FMT.regs}


def reg_set_from_header():
    """The job registers the RTL accepts: JOB .. PF_COUNT of the 1.2 map, word aligned."""
    return list(range(CFG.reg("JOB").offset, CFG.reg("PF_COUNT").offset + 4, 4))


# ------------------------------------------------------------------------------ lists

def small_program(seed=9):
    """Three resident nodes (3x3 conv, depthwise, 1x1) in one partition: the prologue holds
    their weight and parameter LOADs (MEM 0 and 1) and END; the partition list REGS/RUN/END."""
    rng = np.random.default_rng(seed)
    q = lambda oc: dict(input_q=Quant((0.02,), (int(rng.integers(-9, 9)),)),  # noqa: E731
                        filter_q=Quant(tuple(rng.uniform(0.004, 0.02, oc)), (0,) * oc),
                        output_q=Quant((0.15,), (int(rng.integers(-9, 9)),)))
    specs = [
        ConvSpec(OpKind.CONV_2D, DataMode.INT8, (1, 8, 8, 3), (16, 3, 3, 3), stride=(2, 2),
                 padding=Padding.SAME, name="conv", **q(16)),
        ConvSpec(OpKind.DEPTHWISE_CONV_2D, DataMode.INT8, (1, 4, 4, 16), (1, 3, 3, 16),
                 padding=Padding.SAME, name="dw", **q(16)),
        ConvSpec(OpKind.CONV_2D, DataMode.INT8, (1, 4, 4, 16), (24, 1, 1, 16), name="pw", **q(24)),
    ]
    nodes = []
    for i, s in enumerate(specs):
        w = rng.integers(-12, 12, s.filter_shape).astype(np.int8)
        b = rng.integers(-300, 300, s.out_channels).astype(np.int32)
        nodes.append(NodeIn(s, w, b, i - 1))
    return compile_program([nodes], CFG, base=BASE)


def parse(image, base, addr, limit=1 << 16):
    """(byte offset, words) of the descriptors of the list at `addr`, up to END."""
    out, pc = [], addr
    while len(out) < limit:
        o = pc - base
        if o < 0 or o + 8 > image.size:
            break
        h = FMT.fields_of("HEADER", int(image[o:o + 8].view(U64)[0]))
        n = h["LEN"]
        if FMT.opnames.get(h["OP"]) is None or n == 0 or o + 8 * n > image.size:
            break
        out.append((pc - addr, [int(w) for w in image[o:o + 8 * n].view(U64)]))
        if h["OP"] == FMT.opcodes["END"]:
            break
        pc += 8 * n
    return out


def hdr(op, n=None, tag=0):
    return FMT.word("HEADER", OP=FMT.opcodes[op], LEN=n or FMT.length(op), TAG=tag)


def load_desc(src, count, mem, addr, tag, after=0):
    return [hdr("LOAD", tag=tag), FMT.word("LOAD1", SRC=src, COUNT=count),
            FMT.word("LOAD2", MEM=mem, ADDR=addr, AFTER=after)]


def regs_desc(pairs, tag):
    return [hdr("REGS", 1 + len(pairs), tag)] + [FMT.word("REG", OFFSET=o, VALUE=v)
                                                 for o, v in pairs]


class Model:
    """The Executor with its DDR. `start`: the RTL's memories before the list (they persist
    from list to list and from test to test in one simulation; each list's effect is compared
    from the same state)."""

    def __init__(self, image, size=None, slverr=(), hang=(), start=None):
        size = size or image.size
        self.ddr = Ddr(BASE, size, image[:size])
        self.ddr.slverr += list(slverr)
        self.ddr.hang += list(hang)
        self.ex = Executor(Core(CFG), FMT)
        if start is not None:
            self.ex.core.wmem[:], self.ex.core.pmem[:] = start

    def run(self, addr):
        return self.ex.run(self.ddr, addr)


# ------------------------------------------------------------------------------ bench

class TB:
    def __init__(self, dut, seed, lat=(2, 60), stall=0.3):
        self.dut = dut
        self.rng = random.Random(seed)
        cocotb.start_soon(Clock(dut.clk, 10, unit="ns").start())
        dut.aresetn.value = 0
        dut.s_axis_wgt_tvalid.value = 0
        dut.s_axis_wgt_tdata.value = 0
        dut.s_axis_wgt_tlast.value = 0
        dut.s_axis_act_tvalid.value = 0
        dut.s_axis_act_tdata.value = 0
        dut.s_axis_act_tlast.value = 0
        dut.m_axis_res_tready.value = 1
        self.axil = AxiLiteMaster(AxiLiteBus.from_prefix(dut, "s_axil"), dut.clk, dut.aresetn,
                                  reset_active_level=False)
        self.axil.write_if.log.setLevel("WARNING")
        self.axil.read_if.log.setLevel("WARNING")
        self.mem = self._memory(dut, lat, stall)
        self.mon = Monitor(dut, "m_axi", dut.clk, MAX_BURST, MAX_OUT)

    def _memory(self, dut, lat, stall):
        return Mem(dut, "m_axi", dut.clk, dut.aresetn, MEM, self.rng, lat=lat, stall=stall)

    async def reset(self):
        self.dut.aresetn.value = 0
        await ClockCycles(self.dut.clk, 3)
        self.dut.aresetn.value = 1
        await ClockCycles(self.dut.clk, 2)

    def put(self, image, base=BASE):
        self.mem.ram.write(0, bytes(MEM))
        self.mem.ram.write(base, np.ascontiguousarray(image).tobytes())

    async def wr(self, off, v):
        await self.axil.write_dword(off, int(v) & 0xFFFFFFFF)

    async def rd(self, off):
        return int(await self.axil.read_dword(off))

    async def run_list(self, addr, limit=200_000):
        """CL_BASE, DOORBELL, wait for the interrupt; returns the cycles it took."""
        d = self.dut
        await self.wr(R["IRQ"], 1)                       # DONE_EN
        await self.wr(R["CL_BASE"], addr)
        await self.wr(R["DOORBELL"], 1)
        st = await self.rd(R["CL_STATUS"])
        for n in range(limit):
            await RisingEdge(d.clk)
            if int(d.irq.value):
                break
        else:
            dbg = {}
            for inst, names in (("seq_inst", ("state", "f_busy", "rd_idle", "core_busy",
                                              "ld_req_valid", "f_abort", "err", "la_busy",
                                              "st_idle", "po_busy")),
                                ("fetch_inst", ("state", "inflight", "count", "clean",
                                                "rd_req_valid", "fetch_off")),
                                ("store_inst", ("busy", "idle", "flushed", "st_v", "drain")),
                                ("load_inst", ("busy", "state")),
                                # VEC_EN builds: the vector unit's state, its read and write
                                # counters (where a VEC hangs: words owed on either side)
                                ("vec.vec_inst", ("state", "busy", "pend", "rx_left",
                                                  "rq_left", "req_valid", "wq_total", "wq_in",
                                                  "wq_req", "of_rd_cnt", "wr_req_valid",
                                                  "room_used", "age", "pdrain", "pchk"))):
                for n in names:
                    try:
                        h = d
                        for part in (*inst.split("."), n):
                            h = getattr(h, part)
                        dbg[f"{inst.split('.')[-1][:-5]}.{n}"] = int(h.value)
                    except (AttributeError, ValueError):
                        pass
            raise AssertionError(f"no interrupt {limit} cycles after DOORBELL ({dbg}) "
                                 f"(CL_STATUS {await self.rd(R['CL_STATUS']):#x})")
        return st, n

    async def status(self):
        return dict(err=await self.rd(R["CL_ERR"]), pc=await self.rd(R["CL_ERR_PC"]),
                    tag=await self.rd(R["CL_ERR_TAG"]), descs=await self.rd(R["DESCS"]),
                    status=await self.rd(R["CL_STATUS"]))

    async def ack(self):
        """Acknowledge the interrupt and clear CL_ERR (as the driver does)."""
        await self.wr(R["IRQ"], (1 << 8) | 1)
        assert int(self.dut.irq.value) == 0, "irq still high after IRQ.PENDING was written"
        err = await self.rd(R["CL_ERR"])
        if err:
            await self.wr(R["CL_ERR"], err)
            assert await self.rd(R["CL_ERR"]) == 0

    def check_status(self, s, r, what):
        names = [n for n, m in FMT.errors.items() if r.error & m]
        want = dict(err=r.error, pc=r.error_pc, tag=r.error_tag, descs=r.descs,
                    status=0b010 | (0b100 if r.error else 0))
        assert s == want, f"{what}: registers {s} != model {want} ({names}: {r.message})"
        self.mon.check()
        self.dut._log.info("%s: %d descriptors, CL_ERR %#x %s, pc %d, tag %#x", what, s["descs"],
                           s["err"], names, s["pc"], s["tag"])

    def model(self, image, **kw):
        return Model(image, start=(self.weights(), self.params()), **kw)

    # -- the RTL memories, read through the simulator
    def weights(self):
        cols = CFG.COLS
        banks = [self.dut.core_inst.wmem_inst.bank[b].ram_inst.mem for b in range(cols)]
        out = np.zeros(CFG.WEIGHT_WORDS, U64)
        for a in range(CFG.WEIGHT_WORDS):
            out[a] = int(banks[a % cols][a // cols].value)
        return out

    def params(self):
        pm = self.dut.core_inst.pmem_inst
        out = np.zeros((CFG.PARAM_ENTRIES, 2), U64)
        for e in range(CFG.PARAM_ENTRIES):
            bk = pm.bank[e % 8]
            out[e, 0] = int(bk.bias_inst.mem[e // 8].value)
            out[e, 1] = int(bk.rq_inst.mem[e // 8].value)
        return out

    def check_memories(self, model, what, skip_w=None, skip_p=None):
        """Weights and parameters equal the model's, except the ranges of a failed LOAD (the
        RTL writes the words before the faulty one, the model none)."""
        for name, got, want, skip in (("weight", self.weights(), model.ex.core.wmem, skip_w),
                                      ("parameter", self.params(), model.ex.core.pmem, skip_p)):
            mask = np.ones(want.shape[0], bool)
            if skip:
                mask[skip[0]:skip[1]] = False
            bad = np.flatnonzero(np.any((got != want).reshape(want.shape[0], -1), axis=1) & mask)
            assert bad.size == 0, (f"{what}: {bad.size} {name} words differ, first at {bad[0]}: "
                                   f"{got[bad[0]]} != model {want[bad[0]]}")


async def run_and_check(tb, model, addr, what, skip_w=None, skip_p=None):
    st0, cycles = await tb.run_list(addr)
    assert st0 & 1 or cycles < 3, f"{what}: CL_STATUS {st0:#x} after DOORBELL (RUNNING expected)"
    r = model.run(addr)
    s = await tb.status()
    tb.check_status(s, r, what)
    tb.check_memories(model, what, skip_w, skip_p)
    await tb.ack()
    return r, cycles


def _image_with(words, at=0x2000, data=None):
    """An image: optional data words at BASE, the list at BASE + at."""
    img = np.zeros(at + 8 * len(words), np.uint8)
    if data is not None:
        img[:data.nbytes] = data.view(np.uint8)
    img[at:] = np.array(words, U64).view(np.uint8)
    return img, BASE + at


# ------------------------------------------------------------------------------ tests

@cocotb.test()
async def test_prologue_loads_memories(dut):
    """The prologue of a compiled program (LOADs of weights and parameters, END) loads the
    memories word-exact with the model; the 1.2 job registers are as before; twice in a row."""
    tb = TB(dut, SEED)
    prog = small_program()
    tb.put(prog.image)
    await tb.reset()
    descs = parse(prog.image, BASE, prog.prologue_addr)
    ops = [FMT.opnames[w[0] & 0xFF] for _, w in descs]
    mems = {FMT.field("LOAD2", w[2], "MEM") for _, w in descs if len(w) == 3}
    assert ops[-1] == "END" and set(ops) == {"LOAD", "END"} and mems == {0, 1}, ops
    # host values in the 1.2 job registers (a LOAD must leave them as they are)
    before = {o: tb.rng.getrandbits(16) for o in (R_JOB, R_LADDR, R_LCNT)}
    for o, v in before.items():
        await tb.wr(o, v)
    model = tb.model(prog.image)
    words0 = await tb.rd(CFG.reg("WORDS_WGT").offset)
    r, cycles = await run_and_check(tb, model, prog.prologue_addr, "prologue")
    assert r.error == 0
    nwords = sum(FMT.field("LOAD1", w[1], "COUNT") for _, w in descs if len(w) == 3)
    assert (await tb.rd(CFG.reg("WORDS_WGT").offset)) - words0 == nwords
    for o, v in before.items():
        assert await tb.rd(o) == v, f"job register {o:#x} changed by the LOADs"
    assert await tb.rd(R["CL_CYCLES_LO"]) >= nwords
    tb.dut._log.info("prologue: %d LOADs, %d words, %d cycles to the interrupt (model %d)",
                     len(descs) - 1, nwords, cycles, r.cycles)
    # again, other latencies, the memories zeroed in the model's view first
    tb.mem.lat = (1, 8)
    await run_and_check(tb, model, prog.prologue_addr, "prologue again")


R_JOB, R_LADDR, R_LCNT = (CFG.reg(n).offset for n in ("JOB", "LOAD_ADDR", "LOAD_COUNT"))


@cocotb.test()
async def test_regs_list(dut):
    """REGS lists (every job register, random values, LOADs in between) set the 1.2 job
    registers to the last value each offset got; the LOADs leave them alone."""
    tb = TB(dut, SEED + 1)
    await tb.reset()
    assert JOB_REGS == reg_set_from_header(), "the model's job registers are not JOB..PF_COUNT"
    rng = tb.rng
    data = np.array([rng.getrandbits(64) for _ in range(64)], U64)
    for case in range(3):
        words, last = [], {}
        for i in range(rng.randint(2, 6)):
            if rng.random() < 0.3:
                words += load_desc(BASE + 8 * rng.randrange(0, 32), rng.randint(1, 32), 0,
                                   rng.randrange(0, 256), tag=0x500 + i)
            else:
                pairs = [(rng.choice(JOB_REGS), rng.getrandbits(32)) for _ in range(rng.randint(1, 40))]
                if i == 0:
                    pairs = [(o, rng.getrandbits(32)) for o in JOB_REGS] + pairs
                last.update(pairs)
                words += regs_desc(pairs, tag=0x400 + i)
        words.append(hdr("END", tag=0x4FF))
        img, addr = _image_with(words, data=data)
        tb.put(img)
        model = tb.model(img)
        await run_and_check(tb, model, addr, f"REGS list {case}")
        for o in JOB_REGS:
            if o in last:
                got = await tb.rd(o)
                assert got == last[o], f"case {case}: register {o:#x} = {got:#x}, REGS wrote {last[o]:#x}"


@cocotb.test()
async def test_regs_offsets_outside_the_job_registers(dut):
    """Offsets next to and outside JOB..PF_COUNT (unaligned, other registers, high bits set):
    BAD_FIELD at that REGS with its tag, the pairs before it written, as in the model."""
    tb = TB(dut, SEED + 2, lat=(1, 10), stall=0.1)
    await tb.reset()
    lo, hi = JOB_REGS[0], JOB_REGS[-1]
    for off in [0x00, 0x10, 0x18, lo - 2, lo, lo + 1, lo + 2, hi, hi + 1, hi + 4, 0x70, 0x80,
                0x100 + lo, 0xFF00 | lo, 0xFFFF]:
        v = tb.rng.getrandbits(32)
        words = regs_desc([(JOB_REGS[3], 0x1234)], 0x11) + regs_desc(
            [(JOB_REGS[5], v), (off, 0x55), (JOB_REGS[6], 0x77)], 0x22) + [hdr("END", tag=0x33)]
        img, addr = _image_with(words)
        tb.put(img)
        model = tb.model(img)
        r, _ = await run_and_check(tb, model, addr, f"REGS offset {off:#x}")
        assert bool(r.error) == (off not in JOB_REGS)
        assert await tb.rd(JOB_REGS[5]) == v


@cocotb.test()
async def test_malformed_lists(dut):
    """A bad opcode and a bad length after LOADs: the LOADs before it done, CL_ERR, PC, TAG and
    DESCS as the model's; then a good list runs."""
    tb = TB(dut, SEED + 3)
    await tb.reset()
    rng = tb.rng
    data = np.array([rng.getrandbits(64) for _ in range(200)], U64)
    for case in ("BAD_OPCODE", "BAD_LENGTH", "BAD_LENGTH_REGS", "ok"):
        words = load_desc(BASE, 100, 0, 8, tag=1) + regs_desc([(JOB_REGS[2], 9)], 2) + \
            load_desc(BASE + 800, 40, 1, 4, tag=3)
        if case == "BAD_OPCODE":
            words.append(hdr("END", tag=4) | rng.choice([5, 0x7F, 0xFF]))
        elif case == "BAD_LENGTH":
            words += [FMT.word("HEADER", OP=FMT.opcodes["LOAD"], LEN=4, TAG=4)] + [0] * 3
        elif case == "BAD_LENGTH_REGS":
            words += [FMT.word("HEADER", OP=FMT.opcodes["REGS"], LEN=1, TAG=4)]
        words += load_desc(BASE + 8, 10, 0, 500, tag=5) + [hdr("END", tag=6)]
        img, addr = _image_with(words, data=data)
        tb.put(img)
        model = tb.model(img)
        r, _ = await run_and_check(tb, model, addr, case)
        assert (r.error != 0) == (case != "ok")


@cocotb.test()
async def test_load_faults_and_fields(dut):
    """LOADs that fail: SLVERR and DECERR in the words, a region that never answers (TIMEOUT),
    an unaligned SRC, MEM 2, past the weight / parameter memory, an odd parameter count, AFTER
    beyond the RUNs so far; each after a good LOAD, each (but the timeout: the memory model
    stays hung) followed by a good list on the same core (no reset)."""
    tb = TB(dut, SEED + 4, lat=(2, 40), stall=0.25)
    await tb.reset()
    await tb.wr(R["TIMEOUT"], 300)
    rng = tb.rng
    n_data = 512
    data = np.array([rng.getrandbits(64) for _ in range(n_data)], U64)
    size = 0x3000                                    # the model's DDR ends here (DECERR after)
    W, P = CFG.WEIGHT_WORDS, CFG.PARAM_ENTRIES
    cases = [
        ("SLVERR", dict(src=BASE + 0x100, count=60, mem=0, addr=64), "slverr"),
        ("SLVERR param", dict(src=BASE + 0x100, count=40, mem=1, addr=20), "slverr"),
        ("DECERR", dict(src=BASE + size - 8 * 20, count=50, mem=0, addr=200), None),
        ("unaligned", dict(src=BASE + 4, count=3, mem=0, addr=0), None),
        ("MEM 2", dict(src=BASE, count=3, mem=2, addr=0), None),
        ("MEM 3", dict(src=BASE, count=3, mem=3, addr=0), None),
        ("past weights", dict(src=BASE, count=9, mem=0, addr=W - 8), None),
        ("past params", dict(src=BASE, count=4, mem=1, addr=P - 1), None),
        ("odd params", dict(src=BASE, count=5, mem=1, addr=0), None),
        ("AFTER 1", dict(src=BASE + 64, count=7, mem=0, addr=40, after=1), None),
        ("count 0", dict(src=BASE + 64, count=0, mem=0, addr=W), None),
        ("last weight", dict(src=BASE + 64, count=8, mem=0, addr=W - 8), None),
        ("last params", dict(src=BASE + 64, count=4, mem=1, addr=P - 2), None),
        # last: the memory model never answers again after a hang
        ("TIMEOUT", dict(src=BASE + 0x400, count=30, mem=0, addr=300), "hang"),
    ]
    for what, ld, fault in cases:
        at = 0x2000
        # the good LOADs read words 256.. and 2..17 of the data, the faulty ones elsewhere
        words = load_desc(BASE + 0x800 + 8 * rng.randrange(0, 64), 32, 0, rng.randrange(0, W - 32), 0x71) + \
            load_desc(ld["src"], ld["count"], ld["mem"], ld["addr"], 0x72, ld.get("after", 0)) + \
            load_desc(BASE + 16, 16, 1, 0, 0x73) + [hdr("END", tag=0x74)]
        img, addr = _image_with(words, at=at, data=data)
        img = np.concatenate([img, np.zeros(size - img.size, np.uint8)])
        slverr, hang = [], []
        tb.mem.regions = [Region(BASE + size, MEM, DECERR)]
        if fault == "slverr":
            a = ld["src"] + 8 * rng.randrange(1, ld["count"] - 1)
            slverr = [(a, a + 8)]
            tb.mem.regions.append(Region(a, a + 8, SLVERR))
        elif fault == "hang":
            a = ld["src"] + 8 * rng.randrange(0, ld["count"])
            hang = [(a, a + 8)]
            tb.mem.regions.append(Region(a, a + 8, None))
        tb.put(img)
        model = tb.model(img, slverr=slverr, hang=hang)
        if ld["mem"] == 0:
            skip_w, skip_p = (ld["addr"], ld["addr"] + ld["count"]), None
        else:
            skip_w, skip_p = None, (ld["addr"], ld["addr"] + ld["count"] // 2)
        failed_words = fault is not None or what == "DECERR"
        r, _ = await run_and_check(tb, model, addr, what, *(
            (skip_w, skip_p) if failed_words else (None, None)))
        want_ok = what.startswith(("count", "last"))
        assert (r.error == 0) == want_ok, f"{what}: model says {r.message!r}"
        if failed_words and not want_ok:
            assert r.error_pc == 24, f"{what}: the model failed elsewhere ({r.message})"
        if fault == "hang":
            break
        # a good list afterwards, on the same core
        tb.mem.regions = []
        good = load_desc(BASE + 0x800 + 8 * rng.randrange(0, 64), 24, 0, rng.randrange(0, W - 24), 0x81) + \
            [hdr("END", tag=0x82)]
        img2, addr2 = _image_with(good, at=0x2800, data=data)
        tb.put(img2)
        await run_and_check(tb, tb.model(img2), addr2, f"after {what}")


@cocotb.test()
async def test_doorbell_busy_irq_and_status(dut):
    """DOORBELL while RUNNING: CL_ERR.BUSY, the list runs on; CL_STATUS RUNNING while it runs;
    no interrupt without DONE_EN; PENDING until acknowledged; TIMEOUT's reset value."""
    tb = TB(dut, SEED + 6, lat=(30, 60), stall=0.2)
    await tb.reset()
    assert await tb.rd(R["TIMEOUT"]) == int(FMT.regs["TIMEOUT"]["reset"])
    assert await tb.rd(R["CL_STATUS"]) == 0
    data = np.arange(300, dtype=U64)
    words = load_desc(BASE, 300, 0, 0, 1) + [hdr("END", tag=2)]
    img, addr = _image_with(words, data=data)
    tb.put(img)
    await tb.wr(R["CL_BASE"], addr)
    await tb.wr(R["DOORBELL"], 1)
    assert await tb.rd(R["CL_STATUS"]) == 0b001
    await tb.wr(R["DOORBELL"], 1)
    assert await tb.rd(R["CL_ERR"]) == FMT.errors["BUSY"]
    for _ in range(5000):
        await RisingEdge(dut.clk)
        assert not int(dut.irq.value), "interrupt without IRQ.DONE_EN"
        if not (await tb.rd(R["CL_STATUS"])) & 1:
            break
    assert await tb.rd(R["CL_STATUS"]) == 0b110
    assert await tb.rd(R["IRQ"]) == 0
    w = tb.weights()
    assert np.array_equal(w[:300], data), "the list ran on after the second DOORBELL"
    await tb.wr(R["CL_ERR"], FMT.errors["BUSY"])
    assert await tb.rd(R["CL_STATUS"]) == 0b010
    _, _ = await tb.run_list(addr)
    assert await tb.rd(R["IRQ"]) == 0x101
    for _ in range(3):
        await RisingEdge(dut.clk)
        assert int(dut.irq.value)
    await tb.ack()


@cocotb.test()
async def test_random_lists(dut):
    """Random lists of LOADs (both memories) and REGS, intact or with one fault (bad opcode or
    length, SLVERR / DECERR in a LOAD's words or in the list, BAD_FIELD offsets), back to back."""
    tb = TB(dut, SEED + 7)
    await tb.reset()
    rng = tb.rng
    W, P = CFG.WEIGHT_WORDS, CFG.PARAM_ENTRIES
    data = np.array([rng.getrandbits(64) for _ in range(1024)], U64)
    for case in range(N_RANDOM):
        words, descs_at, loads = [], [], []
        at = 0x2000 + 8 * rng.randrange(0, 512)
        for i in range(rng.randint(1, 12)):
            descs_at.append(len(words))
            tag = rng.getrandbits(32)
            if rng.random() < 0.5:
                mem = rng.randrange(2)
                cnt = rng.randint(1, 200) if mem == 0 else 2 * rng.randint(1, 60)
                addr = rng.randrange(0, W - cnt) if mem == 0 else rng.randrange(0, P - cnt // 2)
                src = BASE + 8 * rng.randrange(0, 1024 - cnt)
                loads.append((len(words), src, cnt, mem, addr))
                words += load_desc(src, cnt, mem, addr, tag)
            else:
                words += regs_desc([(rng.choice(JOB_REGS), rng.getrandbits(32))
                                    for _ in range(rng.randint(1, 30))], tag)
        words.append(hdr("END", tag=rng.getrandbits(32)))
        kind = rng.choice(["ok", "ok", "BAD_OPCODE", "BAD_LENGTH", "SLVERR", "DECERR_LIST",
                           "BAD_OFFSET"])
        slverr, size, skip = [], None, (None, None)
        if kind == "BAD_OPCODE":
            k = rng.choice(descs_at)
            words[k] = (words[k] & ~0xFF) | 0x77
        elif kind == "BAD_LENGTH":
            k = rng.choice(descs_at)
            if words[k] & 0xFF == FMT.opcodes["LOAD"]:
                words[k] = (words[k] & ~0xFF00) | (2 << 8)
            else:
                words[k] = (words[k] & ~0xFF00) | (1 << 8)
        elif kind == "BAD_OFFSET":
            k = rng.choice(descs_at)
            if words[k] & 0xFF == FMT.opcodes["REGS"]:
                words[k + 1] = FMT.word("REG", OFFSET=rng.choice([0x14, 0x6C, 0x1E]), VALUE=1)
        img = np.zeros(at + 8 * len(words), np.uint8)
        img[:data.nbytes] = data.view(np.uint8)
        img[at:] = np.array(words, U64).view(np.uint8)
        tb.mem.regions = []
        if kind == "SLVERR" and loads:
            _, src, cnt, mem, addr = rng.choice(loads)
            a = src + 8 * rng.randrange(cnt)
            slverr = [(a, a + 8)]
            tb.mem.regions = [Region(a, a + 8, SLVERR)]
            # the first LOAD reading that word is the one that fails (its words are not compared)
            _, src, cnt, mem, addr = next(ld for ld in loads if ld[1] <= a < ld[1] + 8 * ld[2])
            skip = ((addr, addr + cnt), None) if mem == 0 else (None, (addr, addr + cnt // 2))
        elif kind == "DECERR_LIST":
            size = at + 8 * rng.randrange(1, len(words))
            tb.mem.regions = [Region(BASE + size, MEM, DECERR)]
        tb.put(img)
        model = tb.model(img, size=size, slverr=slverr)
        r, _ = await run_and_check(tb, model, BASE + at, f"random list {case} ({kind})", *skip)


@cocotb.test()
async def test_protocol_12_around_a_list(dut):
    """The 1.2 protocol on the same top: a host write to a 1.2 register during a list completes
    only after the list (the sequencer owns the register file meanwhile) and lands; a 1.2
    LOAD_WGT job through the registers and s_axis_wgt afterwards writes the weight memory."""
    from cocotbext.axi import AxiStreamBus, AxiStreamFrame, AxiStreamSource
    tb = TB(dut, SEED + 8, lat=(40, 60), stall=0.2)
    src = AxiStreamSource(AxiStreamBus.from_prefix(dut, "s_axis_wgt"), dut.clk, dut.aresetn,
                          reset_active_level=False)
    src.log.setLevel("WARNING")
    await tb.reset()
    data = np.array([tb.rng.getrandbits(64) for _ in range(200)], U64)
    words = load_desc(BASE, 200, 0, 100, 1) + [hdr("END", tag=2)]
    img, addr = _image_with(words, data=data)
    tb.put(img)
    await tb.wr(R["CL_BASE"], addr)
    await tb.wr(R["DOORBELL"], 1)
    assert await tb.rd(R["CL_STATUS"]) & 1
    await tb.wr(CFG.reg("GEMM_M").offset, 4321)     # held until the list is done
    assert await tb.rd(R["CL_STATUS"]) == 0b010, "a 1.2 register write returned while RUNNING"
    assert await tb.rd(CFG.reg("GEMM_M").offset) == 4321
    assert np.array_equal(tb.weights()[100:300], data)
    # a 1.2 LOAD_WGT job from the host
    more = np.array([tb.rng.getrandbits(64) for _ in range(16)], U64)
    await tb.wr(CFG.reg("LOAD_ADDR").offset, 500)
    await tb.wr(CFG.reg("LOAD_COUNT").offset, 16)
    await tb.wr(CFG.reg("JOB").offset, CFG.encode("JOB", OPCODE=CFG.enums["OPCODE"]["LOAD_WGT"]))
    await tb.wr(CFG.reg("CTRL").offset, CFG.encode("CTRL", START=1))
    await src.send(AxiStreamFrame(more.tobytes()))
    for _ in range(200):
        await RisingEdge(dut.clk)
        if (await tb.rd(CFG.reg("STATUS").offset)) & 2:
            break
    assert await tb.rd(CFG.reg("ERR").offset) == 0
    assert np.array_equal(tb.weights()[500:516], more)


async def cycles_of(tb, model, addr, what):
    """Run a list; (RTL CL_CYCLES, IDLE, RD_BEATS), the model's RunResult."""
    r, _ = await run_and_check(tb, model, addr, what)
    got = (await tb.rd(R["CL_CYCLES_LO"]), await tb.rd(R["IDLE_LO"]), await tb.rd(R["RD_BEATS"]))
    want = (r.cycles, r.idle_cycles, r.rd_beats)
    tb.dut._log.info("%s: CL_CYCLES, IDLE, RD_BEATS %s, model %s", what, got, want)
    return got, want


def _load_regs_list(rng, n_data, at_words):
    """A random LOAD / REGS list (good) ending in END; (words, loads)."""
    words = []
    for k in range(rng.randint(1, 7)):
        if rng.random() < 0.6:
            cnt = rng.choice([1, 2, 7, 16, 17, 40, 130])
            mem = rng.randrange(2)
            if mem == 1:
                cnt += cnt % 2
            src = BASE + 8 * rng.randrange(n_data - cnt)
            words += load_desc(src, cnt, mem, rng.randrange(200), k + 1)
        else:
            pairs = [(rng.choice(JOB_REGS), rng.getrandbits(16)) for _ in range(rng.randint(1, 5))]
            words += regs_desc(pairs, k + 1)
    if rng.random() < 0.3:   # a list longer than one fetch block
        pairs = [(JOB_REGS[0], 0)] * 70
        words += regs_desc(pairs, 99)
    return words + [hdr("END", tag=0x77)]


@cocotb.test()
async def test_prologue_cycles(dut):
    """The contract's memory model (every burst's first beat MEM_READ_LATENCY after its
    request, one beat per cycle, no stalls): CL_CYCLES, IDLE and RD_BEATS of prologues and of
    LOAD / REGS lists equal the golden model's Timeline."""
    tb = TB(dut, SEED + 11, lat=contract_lat(FMT), stall=0.0)
    await tb.reset()
    res = []
    prog = small_program()
    tb.put(prog.image)
    res.append(await cycles_of(tb, tb.model(prog.image), prog.prologue_addr, "prologue"))
    data = np.array([tb.rng.getrandbits(64) for _ in range(600)], U64)
    for case in range(N_RANDOM + 2):
        words = _load_regs_list(tb.rng, 600, 0x2000 // 8)
        img, addr = _image_with(words, data=data)
        tb.put(img)
        shape = [(FMT.opnames[w[0] & 0xFF], len(w)) for _, w in parse(img, BASE, addr)]
        res.append(await cycles_of(tb, tb.model(img), addr, f"LOAD/REGS list {case} {shape}"))
    if os.environ.get("DTPU_CYCLES_LOG_ONLY"):
        return
    bad = [(g, w) for g, w in res if g != w]
    assert not bad, f"{len(bad)} of {len(res)} lists differ from the Timeline: {bad}"


async def _probe(dut, ev):
    """Event cycles for calibrating the Timeline (DTPU_PROBE=1 only)."""
    n, st, first = 0, None, True
    while True:
        await RisingEdge(dut.clk)
        n += 1
        if int(dut.m_axi_arvalid.value) and int(dut.m_axi_arready.value):
            ev.append((n, "AR", hex(int(dut.m_axi_araddr.value)), int(dut.m_axi_arlen.value) + 1))
        if int(dut.m_axi_rvalid.value) and int(dut.m_axi_rready.value):
            if first:
                ev.append((n, "R0"))
            first = bool(int(dut.m_axi_rlast.value))
            if first:
                ev.append((n, "RL"))
        s = int(dut.seq_inst.state.value)
        if s != st:
            ev.append((n, "S", s))
            st = s
        if int(dut.irq.value):
            ev.append((n, "IRQ"))


@cocotb.test(skip=not os.environ.get("DTPU_PROBE"))
async def test_probe(dut):
    """Not a check: a calibration log (DTPU_PROBE=1) of the cycles of AR handshakes, bursts'
    first and last beats and the sequencer's states on small lists, next to the model's
    CL_CYCLES; how the SEQ_* constants of contract.json were measured."""
    tb = TB(dut, SEED, lat=contract_lat(FMT), stall=0.0)
    await tb.reset()
    data = np.array([tb.rng.getrandbits(64) for _ in range(600)], U64)
    lists = {"x1": load_desc(BASE, 16, 0, 0, 1) + regs_desc([(JOB_REGS[0], 0)], 9)
             + load_desc(BASE, 16, 0, 0, 1) + regs_desc([(JOB_REGS[0], 0)] * 70, 9)
             + [hdr("END", tag=1)],
             "x0": load_desc(BASE, 16, 0, 0, 1) + regs_desc([(JOB_REGS[0], 0)], 9)
             + load_desc(BASE, 16, 0, 0, 1) + [hdr("END", tag=1)],
             "lr": load_desc(BASE, 130, 0, 0, 1) + regs_desc([(JOB_REGS[0], 0)] * 70, 9)
             + [hdr("END", tag=1)],
             "llr": load_desc(BASE, 16, 0, 0, 1) + load_desc(BASE, 16, 0, 0, 1)
             + regs_desc([(JOB_REGS[0], 0)] * 70, 9) + [hdr("END", tag=1)],
             "r3": regs_desc([(JOB_REGS[0], 0)] * 3, 9) + [hdr("END", tag=1)],
             "r4": regs_desc([(JOB_REGS[0], 0)] * 4, 9) + regs_desc([(JOB_REGS[0], 0)] * 5, 9)
             + [hdr("END", tag=1)],
             "long": regs_desc([(JOB_REGS[0], 0)] * 70, 9) + [hdr("END", tag=1)],
             "l130": load_desc(BASE, 130, 0, 0, 1) + [hdr("END", tag=1)],
             "l7x": load_desc(BASE + 8 * 509, 7, 0, 0, 1) + [hdr("END", tag=1)],
             "l1": load_desc(BASE + 8, 1, 0, 0, 1) + load_desc(BASE + 16, 2, 1, 0, 1)
             + [hdr("END", tag=1)],
             "end": [hdr("END", tag=1)],
             "regs": regs_desc([(JOB_REGS[0], 1), (JOB_REGS[1], 2)], 1) + [hdr("END", tag=1)],
             "load": load_desc(BASE, 16, 0, 0, 1) + [hdr("END", tag=1)],
             "load2": load_desc(BASE, 16, 0, 0, 1) + load_desc(BASE, 40, 1, 0, 2)
             + [hdr("END", tag=1)]}
    for name, words in lists.items():
        img, addr = _image_with(words, data=data)
        tb.put(img)
        await tb.wr(R["IRQ"], 1)
        await tb.wr(R["CL_BASE"], addr)
        ev = []
        t = cocotb.start_soon(_probe(dut, ev))
        await tb.wr(R["DOORBELL"], 1)
        for _ in range(5000):
            await RisingEdge(dut.clk)
            if int(dut.irq.value):
                break
        t.cancel()
        r = tb.model(img).run(addr)
        dut._log.info("PROBE %s: CL_CYCLES %d model %d RD %d: %s", name, await tb.rd(R["CL_CYCLES_LO"]),
                      r.cycles, await tb.rd(R["RD_BEATS"]), ev)
        await tb.ack()
