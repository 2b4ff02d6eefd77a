"""cocotb: dtpu_cl_fetch (on dtpu_axi_rd, tb_cl_fetch_top) against the golden model.

Command lists come from dtpu.hw.listcompiler.compile_program (a small partition and its prologue)
or are built word by word with dtpu.hw.listformat.Format; the DDR image sits in an AxiRam with
random latency and backpressure. Expected: the descriptors the list holds, parsed with Format,
word-exact with their first/last/offset marks; and for malformed lists and bus faults the
CL_ERR bits, CL_ERR_PC, CL_ERR_TAG and descriptor count that dtpu.hw.executor.Executor reports
running the same bytes."""
import os
import random

import cocotb
import numpy as np
from cocotb.clock import Clock
from cocotb.triggers import ClockCycles, RisingEdge

from dtpu.hw.config import get_config
from dtpu.hw.ddr import Ddr
from dtpu.hw.executor import Executor
from dtpu.hw.listcompiler import NodeIn, compile_program
from dtpu.hw.listformat import Format
from dtpu.spec import ConvSpec, DataMode, OpKind, Quant
from dtpu_sim.axi_mem import DECERR, SLVERR, Mem, Monitor, Region

SEED = int(os.environ.get("DTPU_SEED", "77"))
N_RANDOM = int(os.environ.get("DTPU_CASES", "6"))
LOG_MAX = int(os.environ.get("PARAM_LOG_MAX_DESCS", "16"))
MEM = 1 << 20
BASE = 0x10000                 # DDR base of the compiled image
TIMEOUT = 200
U64 = np.dtype("<u8")
FMT = Format(get_config())
JOB_REGS = [r.offset for r in get_config().registers if r.access == "rw" and r.name != "CTRL"]


def small_program():
    """Two 1x1 convolutions in one partition: a prologue (LOADs, END) and a list of REGS, RUN
    and END descriptors."""
    rng = np.random.default_rng(9)
    nodes = []
    for i in range(2):
        spec = ConvSpec(OpKind.CONV_2D, DataMode.INT8, (1, 5, 5, 8), (8, 1, 1, 8),
                        input_q=Quant((0.02,), (0,)), filter_q=Quant((0.01,) * 8, (0,) * 8),
                        output_q=Quant((0.1,), (1,)), name=f"pw{i}")
        w = rng.integers(-20, 20, spec.filter_shape).astype(np.int8)
        b = rng.integers(-500, 500, 8).astype(np.int32)
        nodes.append(NodeIn(spec, w, b, i - 1))
    return compile_program([nodes], base=BASE)


def parse(image: np.ndarray, base: int, addr: int, limit: int = 1 << 16):
    """The descriptors of the list at `addr` as (byte offset, words), up to END (Format only)."""
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


def model(image, base, addrs, slverr=(), hang=(), size=None, max_descs=None):
    """Executor on the same bytes: the RunResult of the last list of `addrs` (run in order)."""
    ddr = Ddr(base, size or image.size, image[:size or image.size])
    ddr.slverr += list(slverr)
    ddr.hang += list(hang)
    ex = Executor()
    if max_descs:
        ex.MAX_DESCS = max_descs
    for a in addrs:
        r = ex.run(ddr, a)
    return r


class TB:
    def __init__(self, dut, seed):
        self.dut = dut
        self.rng = random.Random(seed)
        cocotb.start_soon(Clock(dut.clk, 10, unit="ns").start())
        dut.rst_n.value = 0
        for s in ("start", "base", "clear", "d_ready"):
            getattr(dut, s).value = 0
        dut.timeout.value = TIMEOUT
        self.mem = Mem(dut, "m_axi", dut.clk, dut.rst_n, MEM, self.rng, lat=(4, 40), stall=0.25)
        # one block in flight at a time (as the model's Timeline): 4 bursts, 5 across 4 KiB
        block = FMT.mem["DESC_FIFO_WORDS"]
        self.mon = Monitor(dut, "m_axi", dut.clk, 16, block // 16 + 1)
        self.got = []
        cocotb.start_soon(self._consume())

    async def reset(self):
        self.dut.rst_n.value = 0
        await ClockCycles(self.dut.clk, 3)
        self.dut.rst_n.value = 1
        await ClockCycles(self.dut.clk, 2)

    def load(self, image: np.ndarray, base: int):
        self.mem.ram.write(0, bytes(MEM))
        self.mem.ram.write(base, image.tobytes())

    async def _consume(self):
        d = self.dut
        while True:
            d.d_ready.value = int(self.rng.random() < 0.7)
            await RisingEdge(d.clk)
            if int(d.d_valid.value) and int(d.d_ready.value):
                self.got.append((int(d.d_data.value), int(d.d_first.value), int(d.d_last.value),
                                 int(d.d_pc.value)))

    async def run_list(self, addr, limit=20000):
        d = self.dut
        self.got = []
        d.base.value = addr
        d.start.value = 1
        await RisingEdge(d.clk)
        d.start.value = 0
        for _ in range(limit):
            await RisingEdge(d.clk)
            if not int(d.busy.value):
                return
        raise AssertionError(f"fetcher still busy after {limit} cycles")

    def status(self):
        d = self.dut
        return dict(ended=int(d.ended.value), err=int(d.err.value), pc=int(d.pc.value),
                    tag=int(d.tag.value), descs=int(d.descs.value))

    def check(self, want_descs, r, what):
        """The stream is `want_descs` (offset, words) and the status is the model's RunResult."""
        flat = [(w, int(i == 0), int(i == len(ws) - 1), off)
                for off, ws in want_descs for i, w in enumerate(ws)]
        assert len(self.got) == len(flat), f"{what}: {len(self.got)} words handed over, want {len(flat)}"
        for k, (g, w) in enumerate(zip(self.got, flat)):
            assert g == w, f"{what}: word {k}: (data, first, last, pc) {g} != {w}"
        s = self.status()
        names = [n for n, m in FMT.errors.items() if r.error & m]
        want = dict(ended=int(r.error == 0), err=r.error, pc=r.error_pc, tag=r.error_tag,
                    descs=r.descs)
        assert s == want, f"{what}: status {s} != model {want} ({names}: {r.message})"
        self.mon.check()
        self.dut._log.info("%s: %d descriptors, CL_ERR %#x %s, pc %d, tag %#x", what, s["descs"],
                           s["err"], names, s["pc"], s["tag"])


def synthetic_list(rng, n, base, tag0=0x100, big=False):
    """n descriptors (REGS of job registers, LOADs of a few words from the list itself), then
    END; `big`: one REGS of 100 pairs (more words than DESC_FIFO_WORDS)."""
    words = []
    for i in range(n):
        tag = tag0 + i
        if rng.random() < 0.3:
            words += [FMT.word("HEADER", OP=FMT.opcodes["LOAD"], LEN=FMT.length("LOAD"), TAG=tag),
                      FMT.word("LOAD1", SRC=base, COUNT=rng.randint(1, 8)),
                      FMT.word("LOAD2", MEM=0, ADDR=rng.randint(0, 64), AFTER=0)]
        else:
            pairs = 100 if big and i == n // 2 else rng.randint(1, 12)
            words.append(FMT.word("HEADER", OP=FMT.opcodes["REGS"], LEN=1 + pairs, TAG=tag))
            words += [FMT.word("REG", OFFSET=rng.choice(JOB_REGS), VALUE=rng.getrandbits(16))
                      for _ in range(pairs)]
    words.append(FMT.word("HEADER", OP=FMT.opcodes["END"], LEN=1, TAG=tag0 + n))
    return np.array(words, U64)


def corrupt(rng, words: np.ndarray, descs, kind: str):
    """Damage descriptor k (not the first) of a list in place; returns k."""
    k = rng.randrange(1, len(descs))
    off = descs[k][0] // 8
    h = int(words[off])
    if kind == "BAD_OPCODE":
        # the first code past the contract's opcodes (5 is VEC since contract 2.1), and two more
        words[off] = (h & ~0xFF) | rng.choice([len(FMT.opnames), 0x7F, 0xFF])
    else:
        op = FMT.opnames[h & 0xFF]
        n = FMT.length(op)
        bad = 1 if op == "REGS" else rng.choice([0, n - 1, n + 1, 0xFF])
        words[off] = (h & ~0xFF00) | (bad << 8)
    return k


@cocotb.test()
async def test_compiled_lists(dut):
    """The prologue and the partition list of a compiled program, one after the other:
    word-exact, END reached, CL_ERR_PC/TAG and the count as the model's."""
    if LOG_MAX != 16:
        return
    tb = TB(dut, SEED)
    prog = small_program()
    tb.load(prog.image, prog.base)
    await tb.reset()
    part = prog.partitions[0]
    for addrs, what in (([prog.prologue_addr], "prologue"),
                        ([prog.prologue_addr, part.list_addr], "partition")):
        await tb.run_list(addrs[-1])
        r = model(prog.image, prog.base, addrs)
        assert r.error == 0, r.message
        want = parse(prog.image, prog.base, addrs[-1])
        assert {FMT.opnames[w[0] & 0xFF] for _, w in want} >= ({"LOAD", "END"} if what == "prologue"
                                                               else {"REGS", "RUN", "END"})
        tb.check(want, r, what)


@cocotb.test()
async def test_malformed_compiled_list(dut):
    """The partition list with a bad opcode, a bad length, SLVERR in a body word and in a header
    word, and memory ending inside the list (DECERR): the model's bits, offset, tag and count."""
    if LOG_MAX != 16:
        return
    tb = TB(dut, SEED + 1)
    prog = small_program()
    part = prog.partitions[0]
    lo = part.list_addr - prog.base
    descs = parse(prog.image, prog.base, part.list_addr)
    rng = random.Random(SEED)
    for case in ("BAD_OPCODE", "BAD_LENGTH", "SLVERR_BODY", "SLVERR_HEADER", "DECERR"):
        image = prog.image.copy()
        words = image[lo:lo + 8 * part.list_words].view(U64)
        slverr, size = [], None
        tb.mem.regions = []
        k = rng.randrange(1, len(descs))
        at = part.list_addr + descs[k][0]
        if case in ("BAD_OPCODE", "BAD_LENGTH"):
            k = corrupt(rng, words, descs, case)
        elif case == "SLVERR_BODY":
            # the last long descriptor: read ahead while the ones before it are handed over
            k = max(i for i, (_, ws) in enumerate(descs) if len(ws) > 2)
            at = part.list_addr + descs[k][0] + 16
            slverr = [(at, at + 8)]
        elif case == "SLVERR_HEADER":
            slverr = [(at, at + 8)]
        else:
            size = at + 8 * rng.randrange(len(descs[k][1])) - prog.base
            tb.mem.regions = [Region(prog.base + size, MEM, DECERR)]
        tb.mem.regions += [Region(a, b, SLVERR) for a, b in slverr]
        tb.load(image, prog.base)
        await tb.reset()
        await tb.run_list(part.list_addr)
        r = model(image, prog.base, [part.list_addr], slverr=slverr, size=size)
        assert r.error, f"{case}: the model found no error"
        tb.check(descs[:r.descs], r, f"{case} at descriptor {k}")


@cocotb.test()
async def test_timeout(dut):
    """A body word that never comes: TIMEOUT with the descriptor's offset and tag."""
    if LOG_MAX != 16:
        return
    tb = TB(dut, SEED + 2)
    rng = random.Random(SEED + 2)
    words = synthetic_list(rng, 12, BASE)
    descs = parse(words.view(np.uint8), BASE, BASE)
    k = 7
    at = BASE + descs[k][0] + 8
    tb.mem.regions = [Region(at, at + 8, None)]
    tb.load(words.view(np.uint8), BASE)
    await tb.reset()
    await tb.run_list(BASE)
    r = model(words.view(np.uint8), BASE, [BASE], hang=[(at, at + 8)])
    assert r.error == FMT.errors["TIMEOUT"]
    tb.check(descs[:r.descs], r, "TIMEOUT")
    assert int(dut.rd_idle.value) == 1


@cocotb.test()
async def test_read_ahead_past_the_end(dut):
    """A list that ends 8 bytes before the end of memory: the fetcher reads whole blocks past
    it (DECERR) but the list is fine, as in the model."""
    if LOG_MAX != 16:
        return
    tb = TB(dut, SEED + 3)
    rng = random.Random(SEED + 3)
    words = synthetic_list(rng, 9, BASE)
    tb.mem.regions = [Region(BASE + words.nbytes, MEM, DECERR)]
    tb.load(words.view(np.uint8), BASE)
    await tb.reset()
    await tb.run_list(BASE)
    r = model(words.view(np.uint8), BASE, [BASE])
    assert r.error == 0
    tb.check(parse(words.view(np.uint8), BASE, BASE), r, "read ahead")


@cocotb.test()
async def test_random_lists(dut):
    """Random lists (REGS of up to 100 pairs, LOADs, END), intact or with a bad opcode or
    length, back to back without a reset."""
    if LOG_MAX != 16:
        return
    tb = TB(dut, SEED + 4)
    rng = random.Random(SEED + 4)
    await tb.reset()
    for case in range(N_RANDOM):
        addr = BASE + 8 * rng.randrange(0, 600)     # anywhere, across 4 KiB pages
        words = synthetic_list(rng, rng.randint(1, 30), addr, tag0=rng.getrandbits(31),
                               big=case == 0 or rng.random() < 0.5)
        descs = parse(words.view(np.uint8), addr, addr)
        kind = rng.choice(["ok", "BAD_OPCODE", "BAD_LENGTH", "SLVERR", "DECERR"]) \
            if len(descs) > 1 else "ok"
        bad = []
        if kind in ("BAD_OPCODE", "BAD_LENGTH"):
            corrupt(rng, words, descs, kind)
        elif kind != "ok":         # one faulty word in a later descriptor's body
            k = rng.choice([i for i, (_, ws) in enumerate(descs) if i and len(ws) > 1] or [1])
            a = addr + descs[k][0] + 8 * rng.randrange(1, max(2, len(descs[k][1])))
            bad = [(a, a + 8)]
        tb.mem.regions = [Region(a, b, SLVERR if kind == "SLVERR" else DECERR) for a, b in bad]
        image = np.zeros(addr - BASE + words.nbytes, np.uint8)
        image[addr - BASE:] = words.view(np.uint8)
        tb.load(image, BASE)
        await tb.run_list(addr)
        if kind == "DECERR":       # the model's DECERR is an address outside its memory: a hole
            r = model(image, BASE, [addr], size=bad[0][0] - BASE)
        else:
            r = model(image, BASE, [addr], slverr=bad)
        tb.check(descs[:r.descs], r, f"random list {case} ({kind})")


@cocotb.test()
async def test_descriptor_limit(dut):
    """A list without END stops after 2^LOG_MAX_DESCS descriptors with BAD_LENGTH and the last
    descriptor's offset and tag (the model with the same limit); run on a small build."""
    if LOG_MAX == 16:
        return
    tb = TB(dut, SEED + 5)
    rng = random.Random(SEED + 5)
    words = synthetic_list(rng, (1 << LOG_MAX) + 5, BASE)
    tb.load(words.view(np.uint8), BASE)
    await tb.reset()
    await tb.run_list(BASE)
    r = model(words.view(np.uint8), BASE, [BASE], max_descs=1 << LOG_MAX)
    assert r.error == FMT.errors["BAD_LENGTH"] and r.descs == 1 << LOG_MAX
    tb.check(parse(words.view(np.uint8), BASE, BASE, limit=1 << LOG_MAX), r, "descriptor limit")
