"""cocotb: compiled programs run end to end on dtpu_cl_top (fetcher, sequencer, load / store /
post units, 1.2 core, AXI4 read and write masters) against the golden model
dtpu.hw.executor.Executor.

The DDR image (weights, parameters, lists, tensor buffers) sits in one AxiRam with random
latency and backpressure on all five channels; the partition's input buffer gets random bytes.
The prologue and then the partition list run from CL_BASE + DOORBELL; afterwards every byte of
the RTL's DDR must equal the model's DDR after the same lists (outputs, intermediate tensors,
int64 partial sums, and nothing written outside them), and CL_ERR / CL_ERR_PC / CL_ERR_TAG /
DESCS equal the model's. Under the contract's memory model (fixed latency, no stalls) the
prologues' CL_CYCLES, IDLE, RD_BEATS and WR_BEATS must equal the Timeline's, and so must the
partition lists' of the exact RUN classes (word-mode 1x1 and depthwise chains); the other
partition lists are logged side by side (docs/rtl.md "RUN / POST cycles against the
Timeline"). test_probe_runs (DTPU_PROBE=1) prints per-descriptor event cycles of both."""
import os
import random

import cocotb
import numpy as np
from cocotb.triggers import ClockCycles

from dtpu.hw.chain_specs import chain_specs
from dtpu.hw.listcompiler import NodeIn, Program, compile_program
from dtpu.spec import ConvSpec, DataMode, OpKind, Padding, Quant
from dtpu_sim.axi_mem import SLVERR, Mem, Monitor, Region
from dtpu_sim.cycles import contract_lat
from tb_cl_seq import (BASE, CFG, FMT, MAX_BURST, MAX_OUT, MEM, R, SEED, TB, U64, Model, hdr,
                       parse, small_program)

N_RANDOM = int(os.environ.get("DTPU_CASES", "2"))


class RunTB(TB):
    """TB with the write channels of the memory and a write-side protocol monitor."""

    def __init__(self, dut, seed, lat=(2, 60), stall=0.3):
        super().__init__(dut, seed, lat=lat, stall=stall)
        self.wmon = Monitor(dut, "m_axi", dut.clk, MAX_BURST, MAX_OUT, write=True)

    def _memory(self, dut, lat, stall):
        return Mem(dut, "m_axi", dut.clk, dut.aresetn, MEM, self.rng, lat=lat, stall=stall,
                   writes=True, strobes=True)

    def channels(self):
        m = self.mem
        return (m.read_if.ar_channel, m.read_if.r_channel, m.write_if.aw_channel,
                m.write_if.w_channel, m.write_if.b_channel)

    def ddr(self, size):
        return np.frombuffer(self.mem.ram.read(BASE, size), np.uint8)


def _node(rng, spec, wdt=np.int8):
    w = rng.integers(-12, 12, spec.filter_shape).astype(wdt)
    bdt = np.int64 if spec.mode == DataMode.INT16X8 else np.int32
    b = rng.integers(-300, 300, spec.out_channels).astype(bdt)
    return w, b


def _q(rng, oc, zp=True):
    z = (lambda: int(rng.integers(-9, 9))) if zp else (lambda: 0)
    return dict(input_q=Quant((0.02,), (z(),)),
                filter_q=Quant(tuple(rng.uniform(0.004, 0.02, oc)), (0,) * oc),
                output_q=Quant((0.15,), (z(),)))


def ksplit_program(seed=5, hw=4, c=64, oc=16, k=3, stride=1):
    """A 3x3 convolution over 64 channels (by default): its K is split into chunks (RUNs with
    RES ACC into int64 partial sums, the first with FLAGS.FIRST) finished by a POST."""
    rng = np.random.default_rng(seed)
    s = ConvSpec(OpKind.CONV_2D, DataMode.INT8, (1, hw, hw, c), (oc, k, k, c),
                 padding=Padding.SAME, stride=(stride, stride), name="k", **_q(rng, oc))
    return compile_program([[NodeIn(s, *_node(rng, s), -1)]], CFG, base=BASE)


def ksplit_pw_program(hw=2, c=512, oc=16, seed=7):
    """A 1x1 convolution whose K (C) does not fit the weight memory: K chunks in RES ACC RUNs
    (the first per column tile with FLAGS.FIRST) and a POST per parameter page; its RUNs read
    the input in word mode (the exact class, docs/rtl.md "ACC RUNs and POST")."""
    rng = np.random.default_rng(seed)
    s = ConvSpec(OpKind.CONV_2D, DataMode.INT8, (1, hw, hw, c), (oc, 1, 1, c), name="kp",
                 **_q(rng, oc))
    return compile_program([[NodeIn(s, *_node(rng, s), -1)]], CFG, base=BASE)


def int16_program(seed=6):
    """16x8 (int16 activations): LANES 4 x ESIZE 2 streams, a 3x3 conv then a 1x1."""
    rng = np.random.default_rng(seed)
    specs = [ConvSpec(OpKind.CONV_2D, DataMode.INT16X8, (1, 6, 6, 8), (8, 3, 3, 8),
                      padding=Padding.SAME, name="c16", **_q(rng, 8, zp=False)),
             ConvSpec(OpKind.CONV_2D, DataMode.INT16X8, (1, 6, 6, 8), (12, 1, 1, 8),
                      name="p16", **_q(rng, 12, zp=False))]
    nodes = [NodeIn(s, *_node(rng, s), i - 1) for i, s in enumerate(specs)]
    return compile_program([nodes], CFG, base=BASE)


def chain_program(nodes, hw=8, c=16, seed=0):
    """One partition of chained nodes, each reading the one before (the first the partition's
    input), int8: ("pw", OC) a 1x1 convolution, ("dw", _) a 3x3 SAME depthwise convolution
    (CHANNELS); with C a multiple of LANES both are word-mode streams (the exact class)."""
    rng = np.random.default_rng(seed)
    specs, srcs = chain_specs(nodes, hw, c, lambda oc: _q(rng, oc))
    nodes = [NodeIn(s, *_node(rng, s), k) for s, k in zip(specs, srcs)]
    return compile_program([nodes], CFG, base=BASE)


def mode_program(nodes, hw, c, mode, seed=0):
    """chain_program's graph in `mode` (float32: float weights and biases; int16x8: int64
    biases, symmetric activations): docs/rtl.md "float32 and the one-cycle corners"."""
    rng = np.random.default_rng(seed)
    fp = mode == DataMode.FLOAT32
    specs, srcs = chain_specs(nodes, hw, c, lambda oc: {} if fp else
                              _q(rng, oc, zp=mode != DataMode.INT16X8), mode=mode)
    out = []
    for s, k in zip(specs, srcs):
        if fp:
            w = rng.uniform(-1, 1, s.filter_shape).astype(np.float32)
            b = rng.uniform(-1, 1, s.out_channels).astype(np.float32)
        else:
            w, b = _node(rng, s)
        out.append(NodeIn(s, w, b, k))
    return compile_program([out], CFG, base=BASE)


def random_class_program(rnd, seed):
    """A random graph of 1..4 nodes of the exact class, each reading the node before or (40 %)
    any earlier node or the input: 1x1 convolutions (OC 8..32) and depthwise 3x3
    convolutions, C a multiple of 8 (8..32), 2, 4 or 8 pixels a side, so that
    every RUN writes whole 16-word bursts or a single partial one: a partial burst right after
    full ones is exact on the contract's memory (tests/test_rtl_lists.py, the C++ memory), but
    this cocotb memory answers the second of two close write bursts a cycle early."""
    nodes = [(rnd.choice(("pw", "dw")), rnd.choice((8, 16, 24, 32)))
             + ((rnd.randint(-1, i - 1),) if rnd.random() < 0.4 else ())
             for i in range(rnd.randint(1, 4))]
    return chain_program(nodes, hw=rnd.choice((2, 4, 8)), c=rnd.choice((8, 16, 24, 32)),
                         seed=seed)


def _undefined(image, addr, r):
    """The bytes a failing RUN / POST leaves undefined: its destination (docs/contract2.md
    "Errors": the store unit may have written part of the results before the failure, the
    model writes none). Empty unless the list failed at a RUN or POST."""
    if not r.error:
        return BASE, BASE
    descs = dict(parse(image, BASE, addr))
    words = descs.get(r.error_pc)
    if words is None:
        return BASE, BASE
    op = FMT.opnames[words[0] & 0xFF]
    if op == "RUN":
        r0, r1, r2 = (FMT.fields_of(n, w) for n, w in zip(("RES0", "RES1", "RES2"), words[6:9]))
        return r0["DST"], r0["DST"] + r1["PIX"] * r2["DSTC"] * r0["ESIZE"]
    if op == "POST":
        p1, p2, p3 = (FMT.fields_of(n, w) for n, w in zip(("POST1", "POST2", "POST3"), words[1:4]))
        return p1["DST"], p1["DST"] + p2["PIX"] * p3["DSTC"] * 2
    return BASE, BASE


def _ops(image, addr):
    return [FMT.opnames[w[0] & 0xFF] for _, w in parse(image, BASE, addr)]


def _put_program(tb, prog, rng):
    """The program's image with random bytes in its partition's inputs, in the memory and in a
    fresh model: (image, partition, model)."""
    image = prog.image.copy()
    part = prog.partitions[0]
    for buf in part.inputs or [part.input]:
        o = buf.addr - BASE
        if np.dtype(buf.dtype) == np.float32:     # finite values (no NaN bit patterns)
            image[o:o + buf.nbytes] = rng.uniform(-2, 2, buf.nbytes // 4).astype(
                "<f4").view(np.uint8)
        else:
            image[o:o + buf.nbytes] = rng.integers(0, 256, buf.nbytes, dtype=np.uint8)
    tb.put(image)
    return image, part, tb.model(image)


async def run_program(tb, prog, what, rng, faults=(), exact=(), rd_exact=(), model_faults=None):
    """Prologue, then the partition list on random input bytes; DDR and registers checked.
    `faults`: SLVERR ranges for both memories; `model_faults`: {"slverr" | "decerr" | "hang":
    ranges} for the model's Ddr, the caller having put the same regions in tb.mem.
    For the lists named in `exact` ("prologue", "partition"), CL_CYCLES, IDLE and RD_BEATS must
    equal the model's Timeline (the contract's memory model only)."""
    image, part, model = _put_program(tb, prog, rng)
    for f in faults:
        tb.mem.regions.append(Region(f[0], f[1], SLVERR))
        model.ddr.slverr.append(f)
    for kind, ranges in (model_faults or {}).items():
        getattr(model.ddr, kind).extend(ranges)
    out = []
    for addr, name in ((prog.prologue_addr, "prologue"), (part.list_addr, "partition")):
        st0, cycles = await tb.run_list(addr, limit=300_000)
        r = model.run(addr)
        s = await tb.status()
        tb.check_status(s, r, f"{what} {name}")
        tb.wmon.check()
        rtl_cycles = await tb.rd(R["CL_CYCLES_LO"])
        rtl_idle, rtl_rd = await tb.rd(R["IDLE_LO"]), await tb.rd(R["RD_BEATS"])
        got, want = tb.ddr(prog.size), model.ddr.mem[:prog.size]
        diff = got != want
        lo, hi = _undefined(image, addr, r)
        diff[lo - BASE:hi - BASE] = False
        bad = np.flatnonzero(diff)
        assert bad.size == 0, (f"{what} {name}: {bad.size} DDR bytes differ, first at "
                               f"{BASE + bad[0]:#x}: {got[bad[0]]} != model {want[bad[0]]}")
        tb.dut._log.info("%s %s: %s, CL_ERR %#x, %d descriptors; CL_CYCLES %d, model %d "
                         "(x%.2f)", what, name, "ok" if not r.error else r.message, s["err"],
                         s["descs"], rtl_cycles, r.cycles, rtl_cycles / max(r.cycles, 1))
        rtl_wr = await tb.rd(R["WR_BEATS"])
        tb.dut._log.info("%s %s: IDLE %d, model %d; RD_BEATS %d, model %d; WR_BEATS %d, model %d",
                         what, name, rtl_idle, r.idle_cycles, rtl_rd, r.rd_beats, rtl_wr,
                         r.wr_beats)
        if name in rd_exact:
            assert (rtl_rd, rtl_wr) == (r.rd_beats, r.wr_beats), \
                f"{what} {name}: RD_BEATS, WR_BEATS {rtl_rd, rtl_wr} != model's {r.rd_beats, r.wr_beats}"
        if name in exact:
            got = (rtl_cycles, rtl_idle, rtl_rd, rtl_wr)
            want = (r.cycles, r.idle_cycles, r.rd_beats, r.wr_beats)
            assert got == want, (f"{what} {name}: CL_CYCLES, IDLE, RD_BEATS, WR_BEATS {got} != "
                                 f"the model's Timeline {want}")
        out.append((r, rtl_cycles))
        await tb.ack()
    tb.mem.regions.clear()
    return out


@cocotb.test()
async def test_small_program(dut):
    """3x3 conv (C=3: lane-mode gather) -> depthwise -> 1x1, one partition, int8: the output and
    intermediate tensors byte-exact, twice (other latencies)."""
    tb = RunTB(dut, SEED)
    await tb.reset()
    rng = np.random.default_rng(SEED)
    prog = small_program()
    assert {"RUN", "REGS", "END"} <= set(_ops(prog.image, prog.partitions[0].list_addr))
    await run_program(tb, prog, "small", rng)
    tb.mem.lat = (1, 4)
    await run_program(tb, prog, "small, short latency", rng)


@cocotb.test()
async def test_ksplit_acc_post(dut):
    """K split: RUNs accumulating int64 partial sums (RES ACC, FIRST) and a POST finishing them."""
    tb = RunTB(dut, SEED + 1)
    await tb.reset()
    rng = np.random.default_rng(SEED + 1)
    prog = ksplit_program()
    ops = _ops(prog.image, prog.partitions[0].list_addr)
    assert "POST" in ops and ops.count("RUN") > 1, ops
    await run_program(tb, prog, "ksplit", rng)


@cocotb.test()
async def test_int16(dut):
    """16x8: 4 lanes of 2 bytes in the activation and result words."""
    tb = RunTB(dut, SEED + 2)
    await tb.reset()
    await run_program(tb, int16_program(), "int16", np.random.default_rng(SEED + 2))


@cocotb.test()
async def test_run_errors(dut):
    """A RUN whose ACT fields give another word count than the job's registers (BAD_FIELD), an
    unknown ACT mode (BAD_FIELD), a store write into an SLVERR region (SLVERR); each followed
    by the intact program, which runs exactly."""
    tb = RunTB(dut, SEED + 3)
    await tb.reset()
    rng = np.random.default_rng(SEED + 3)
    prog = small_program(seed=4)
    part = prog.partitions[0]
    descs = parse(prog.image, BASE, part.list_addr)
    k = next(i for i, (_, w) in enumerate(descs) if FMT.opnames[w[0] & 0xFF] == "RUN")
    off, run = descs[k]
    o = part.list_addr - BASE + off
    names = ["HEADER", "ACT0", "ACT1", "ACT2", "ACT3", "ACT4", "RES0", "RES1", "RES2"]
    f = {n: FMT.fields_of(n, w) for n, w in zip(names, run)}
    variants = []
    a3 = dict(f["ACT3"], K1=f["ACT3"]["K1"] - 1) if f["ACT3"]["K1"] > 1 + f["ACT3"]["K0"] else None
    if a3:
        variants.append(("ACT K1 - 1", 4, FMT.word("ACT3", **a3)))
    variants.append(("ACT MODE 7", 1, FMT.word("ACT0", **dict(f["ACT0"], MODE=7))))
    for what, i, word in variants:
        bad = prog.image.copy()
        bad[o + 8 * i:o + 8 * i + 8] = np.array([word], U64).view(np.uint8)
        p2 = Program(prog.cfg, prog.base, bad, prog.prologue_addr, prog.prologue_words,
                        prog.partitions)
        (_, _), (r, _) = await run_program(tb, p2, what, rng)
        assert r.error == FMT.errors["BAD_FIELD"], (what, r.message)
        await run_program(tb, prog, f"intact after {what}", rng)
    out = part.output
    (_, _), (r, _) = await run_program(tb, prog, "SLVERR on the output", rng,
                                       faults=[(out.addr, out.addr + out.nbytes)])
    assert r.error == FMT.errors["SLVERR"], r.message
    await run_program(tb, prog, "intact after SLVERR", rng)


@cocotb.test()
async def test_contract_memory_model(dut):
    """The memory as contract.json's memory model describes it (every burst's first beat
    MEM_READ_LATENCY cycles after its request, one beat per cycle, no stalls): the programs
    byte-exact; CL_CYCLES, IDLE, RD_BEATS and WR_BEATS equal the model's Timeline on every
    prologue and on the partition lists of the exact RUN classes (1x1 convolutions and
    depthwise convolutions in word mode, chained: docs/rtl.md "RUN / POST cycles against the
    Timeline"), fixed ones and N_RANDOM random ones, 3x3 WINDOWS streams (word and lane
    mode), K-split 1x1 and 3x3 convolutions (ACC RUNs and POSTs)."""
    tb = RunTB(dut, SEED + 5, lat=contract_lat(FMT), stall=0.0)
    await tb.reset()
    rng = np.random.default_rng(SEED + 5)
    # the constants are the contract masters' (16-beat bursts, 8 in flight); the slow sweep's
    # small masters (4-beat bursts, 2 in flight) assert the beat counts only
    contract = (MAX_BURST, MAX_OUT) == (int(FMT.mem["MEM_BURST_BEATS"]),
                                        int(FMT.mem["MEM_READ_OUTSTANDING"]))
    pro = ("prologue",) if contract else ()
    for what, prog in (("small", small_program()), ("ksplit", ksplit_program()),
                       ("int16", int16_program())):
        # RD_BEATS / WR_BEATS as the model counts them (PAD words and lanes sharing a word
        # take no beat; ACC sums a beat each, read back and written); "small" (a lane-mode 3x3
        # stride 2, depthwise, 1x1) and "int16" (3x3 + 1x1) are exact (streams that do not keep
        # up), the K-split 3x3 (ACC RUNs over WINDOWS streams with PAD, a POST) too
        # (docs/rtl.md "K-split 3x3")
        part = ("partition",) if contract else ()
        await run_program(tb, prog, f"memory model, {what}", rng, exact=pro + part,
                          rd_exact=() if part else ("partition",))
    progs = [("pw chain", chain_program([("pw", 16), ("pw", 32), ("pw", 8)], hw=6, c=16)),
             ("dw pw dw", chain_program([("dw", 0), ("pw", 24), ("dw", 0)], hw=4, c=16)),
             ("dw chain", chain_program([("dw", 0), ("dw", 0), ("dw", 0)], hw=8, c=16)),
             ("short", chain_program([("pw", 8)], hw=2, c=8)),
             # independent RUNs: node 1 reads the input, not node 0's output (it starts while
             # node 0's results drain), node 2 reads node 0's, node 3 node 1's
             ("branches", chain_program([("pw", 16), ("pw", 24, -1), ("dw", 0, 0), ("pw", 8, 1)],
                                        hw=4, c=16)),
             ("branches 8x8", chain_program([("pw", 32), ("dw", 0, -1), ("pw", 16, 0),
                                             ("dw", 0, 1)], hw=8, c=16)),
             # K split: 16 ACC RUNs (two column tiles) and a POST; 16 RUNs (one tile, items
             # merged into 16-word bursts) and a POST; two POSTs of channel slices (a POST
             # whose last burst closely follows another, e.g. 2x2x512 -> 48, meets this
             # memory's early B above: tests/test_rtl_lists.py has it)
             ("ksplit 1x1 2x2x512 -> 16", ksplit_pw_program(2, 512, 16)),
             ("ksplit 1x1 3x3x1024 -> 8", ksplit_pw_program(3, 1024, 8)),
             ("ksplit 1x1 2x2x512 -> 32", ksplit_pw_program(2, 512, 32)),
             # K-split 3x3: chunks across taps with PAD, a stride-2 one with all-PAD RUNs
             ("ksplit 3x3 2x2x40 -> 40", ksplit_program(hw=2, c=40, oc=40)),
             ("ksplit 3x3 2x2x128 -> 40 stride 2", ksplit_program(hw=2, c=128, oc=40,
                                                                 stride=2))]
    rnd = random.Random(SEED + 5)
    for i in range(N_RANDOM):
        progs.append((f"random class {i}", random_class_program(rnd, seed=30 + i)))
    # streams that do not keep up (docs/rtl.md "Streams that do not keep up"): 3x3 WINDOWS in
    # word mode (SAME, VALID, stride 2) and lane mode (C = 3), chained with 1x1 and depthwise;
    # sizes whose RUNs write whole 16-word bursts or a single partial one (the B artifact)
    progs += [("c3 4x4x8", chain_program([("c3", 8)], hw=4, c=8)),
              ("c3 8x8x16", chain_program([("c3", 16)], hw=8, c=16)),
              ("c3 valid, stride 2", chain_program([("c3v", 8), ("c3s", 16)], hw=10, c=8)),
              ("c3 lane mode", chain_program([("c3", 8), ("dw", 0), ("pw", 8)], hw=4, c=3)),
              ("c3 lane mode stride 2", chain_program([("c3s", 16)], hw=8, c=3)),
              # depthwise RUNs (docs/rtl.md "Depthwise streams"): lane mode (one lane a
              # cycle: C = 5 stride 2, C = 3 multiplier 2), word mode with short runs (two
              # channel chunks: 8-word runs, the store unit's backpressure)
              ("dw lane mode stride 2", chain_program([("dw_s2", 0)], hw=8, c=5)),
              ("dw lane mode multiplier 2", chain_program([("dw_m2", 0)], hw=4, c=3)),
              ("dw short runs", chain_program([("dw", 0)], hw=4, c=128)),
              # docs/rtl.md "float32 and the one-cycle corners": float32 GEMMs (1x1 word mode,
              # 3x3 lane mode with 5-channel items straddling words), a lane-mode 1x1 whose
              # runs the full element FIFO closes, then a 3x3
              ("f32 pw 8x8x16", mode_program([("pw", 16)], 8, 16, DataMode.FLOAT32)),
              ("f32 c3 lane 8x8x3 -> 5", mode_program([("c3", 5)], 8, 3, DataMode.FLOAT32)),
              ("pw lane 8x8x3, c3", chain_program([("pw", 8), ("c3", 8)], hw=8, c=3))]
    for i in range(N_RANDOM):
        # random 3x3 chains: SAME, stride 1 or 2, C 3..16 (lane or word mode), OC 8 or 16
        # (3x3x24 would split K), 4 or 8 pixels a side (whole bursts, see above); 1x1s in
        # lane mode too (docs/rtl.md "float32 and the one-cycle corners")
        c = rnd.choice((3, 5, 8, 16))
        nodes = [(rnd.choice(("c3", "c3", "c3s", "pw")), rnd.choice((8, 16)))
                 for k in range(rnd.randint(1, 2))]
        progs.append((f"random c3 {i}", chain_program(nodes, hw=rnd.choice((4, 8)), c=c,
                                                      seed=50 + i)))
    for what, prog in progs:
        await run_program(tb, prog, f"memory model, {what}", rng,
                          exact=("prologue", "partition") if contract else (),
                          rd_exact=() if contract else ("prologue", "partition"))


@cocotb.test()
async def test_random_latencies(dut):
    """The small and the K-split programs under other latency / stall mixes."""
    rnd = random.Random(SEED + 4)
    tb = RunTB(dut, SEED + 4)
    await tb.reset()
    rng = np.random.default_rng(SEED + 4)
    for i in range(N_RANDOM):
        tb.mem.lat = sorted((rnd.randint(1, 90), rnd.randint(1, 90)))
        for ch in tb.channels():
            ch.set_pause_generator(_pauses(rnd, rnd.choice((0.0, 0.2, 0.6))))
        prog = small_program(seed=20 + i) if i % 2 == 0 else ksplit_program(seed=20 + i)
        await run_program(tb, prog, f"random {i} lat {tb.mem.lat}", rng)
    await ClockCycles(dut.clk, 2)


def _pauses(rnd, p):
    while True:
        yield rnd.random() < p


# ------------------------------------------------------------------------------ RUN timing classes

@cocotb.test(skip=not os.environ.get("DTPU_PROBE"))
async def test_probe_runs(dut):
    """Not a check: per-descriptor event cycles of the RTL next to the Timeline's on programs
    of each RUN timing class under the contract's memory model (DTPU_PROBE=1; DTPU_PROBE_CLASSES
    = comma-separated kind:n:hw:c:oc)."""
    from dtpu_sim.cycles import Probe, table
    tb = RunTB(dut, SEED + 7, lat=contract_lat(FMT), stall=0.0)
    await tb.reset()
    rng = np.random.default_rng(SEED + 7)
    spec = os.environ.get("DTPU_PROBE_CLASSES",
                          "pw:1:8:16:16,pw:3:8:16:16,c3:1:8:16:16,dw:1:8:16:16")
    for item in spec.split(","):
        kind, n, hw, c, oc = item.split(":")
        if "-" in kind or "/" in kind:
            # a graph: "dw0-pw24-dw0", or "pw16/pw24@-1/dw0@0" where "@k" reads node k (-1:
            # the input); n and oc are ignored
            nodes = []
            for k in kind.split("/" if "/" in kind else "-"):
                name, _, src = k.partition("@")
                nodes.append((name[:2], int(name[2:])) + ((int(src),) if src else ()))
        elif kind in ("k3", "k3s", "k5"):
            # a K-split KxK convolution (ACC RUNs and POSTs; n is ignored): "k3s" stride 2
            nodes = None
        else:
            nodes = [(kind, int(oc))] * int(n)
        if nodes is None:
            prog = ksplit_program(hw=int(hw), c=int(c), oc=int(oc), k=5 if kind == "k5" else 3,
                                  stride=2 if kind == "k3s" else 1)
        else:
            prog = chain_program(nodes, hw=int(hw), c=int(c))
        image, part, model = _put_program(tb, prog, rng)
        model.ex.events = []
        for addr, name in ((prog.prologue_addr, "prologue"), (part.list_addr, "partition")):
            model.ex.events.clear()
            pr = Probe(dut, bus=bool(os.environ.get("DTPU_PROBE_BUS")))
            pr.start()
            await tb.run_list(addr, limit=300_000)
            pr.stop()
            r = model.run(addr)
            cyc, idle = await tb.rd(R["CL_CYCLES_LO"]), await tb.rd(R["IDLE_LO"])
            rd, wr = await tb.rd(R["RD_BEATS"]), await tb.rd(R["WR_BEATS"])
            dut._log.info("PROBE %s %s: CL_CYCLES %d model %d, IDLE %d model %d, RD %d model %d, "
                          "WR %d model %d", item, name, cyc, r.cycles, idle, r.idle_cycles, rd,
                          r.rd_beats, wr, r.wr_beats)
            for line in table(pr, model.ex.events):
                dut._log.info("PROBE %s", line)
            dut._log.info("PROBE model blocks' first beats %s",
                          [e[1] for e in model.ex.events if e[0] == "blocks"])
            if name == "partition" and os.environ.get("DTPU_PROBE_ACT"):
                for x in pr.descs:
                    if x.get("act_t"):
                        dut._log.info("PROBE act words (start %s): %s", x.get("start"), x["act_t"])
                for e in model.ex.events:
                    if e[0] == "act":
                        dut._log.info("PROBE model act words: %s", list(e[1]))
            if name == "partition":
                dut._log.info("PROBE last result words: %s",
                              [x.get("res_t", [])[-20:] for x in pr.descs if x.get("res_t")])
            if pr.bus is not None and name == "partition":
                dut._log.info("PROBE bus %s", pr.bus)
            dump = os.environ.get("DTPU_PROBE_DUMP")
            if dump and name == "partition":
                import json
                with open(f"{dump}.{item.replace(':', '_')}.json", "w") as fh:
                    json.dump({"descs": pr.descs, "bus": pr.bus,
                               "events": [list(e) if isinstance(e, tuple) else e
                                          for e in model.ex.events]}, fh, default=str)
            await tb.ack()
