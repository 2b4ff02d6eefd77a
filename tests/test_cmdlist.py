"""Contract 2.0's golden model (dtpu.hw.listcompiler, dtpu.hw.executor, dtpu.hw.regwindow): a
partition compiled into one command list runs from DDR bit-identically to today's job-by-job
backend=model, with the cycles of the documented memory model, the errors of the contract, and
O(1) host operations per invoke. Lists are driven as the delegate drives them:
:class:`dtpu.driver.lists.ListProgram` over the model transport's 2.0 register window."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from dtpu import reference
from dtpu.backends.base import Probes
from dtpu.backends.model import ModelBackend
from dtpu.driver.hostops import HostOps
from dtpu.driver.lists import DtpuListError, ListProgram
from dtpu.driver.model_transport import ModelTransport
from dtpu.hw import gen_header, step_timing
from dtpu.hw.config import HwConfig, get_config
from dtpu.hw.core import Core
from dtpu.hw.ddr import Ddr
from dtpu.hw.executor import Executor
from dtpu.hw.listcompiler import NodeIn, compile_program
from dtpu.hw.listformat import CmdlistError, Format
from dtpu.hw.timeline import Timeline
from dtpu.hw.units import load as load_unit
from dtpu.spec import ConvSpec, DataMode, OpKind, Padding, Quant
from dtpu.tflite_model import partitions_of

ROOT = Path(__file__).resolve().parents[1]
ZOO = ROOT / "tests" / "models" / "zoo"
NETS = ["mobilenet_like__int8", "dscnn_like__int8", "mobilenet_v1_025_96__int8"]


def _input(spec: ConvSpec, seed: int) -> np.ndarray:
    dt = reference.io_dtypes(spec)[0]
    info = np.iinfo(dt)
    return np.random.default_rng(seed).integers(info.min, info.max + 1, spec.input_shape).astype(dt)


def _driver(parts, cfg: HwConfig | None = None, fast_path: bool = True) -> ListProgram:
    """`parts` compiled and loaded by the delegate's driver on a fresh 2.0 model core;
    `fast_path` False runs every job through the 1.2 register protocol (the reference)."""
    t = ModelTransport(cfg=cfg or get_config(), lists=True)
    t.list_window.ex.fast_path = fast_path
    return ListProgram(t, parts)


def _invoke(drv: ListProgram, k: int, x: np.ndarray) -> tuple[np.ndarray, HostOps, dict]:
    """Partition `k` on input `x`: its output, the invoke's host record, and the core's
    counters (CL_CYCLES and IDLE from the registers, the rest from the model's run record)."""
    part = drv.program.partitions[k]
    y = np.empty(part.output.shape, part.output.dtype)
    ops = HostOps()
    run = drv.invoke(k, [x], {len(part.outputs) - 1: y}, ops=ops)
    last = drv.t.list_window.last
    hw = dict(cycles=run.cycles, idle_cycles=run.idle_cycles, compute_cycles=last.compute_cycles,
              rd_beats=last.rd_beats, wr_beats=last.wr_beats, descs=last.descs, runs=last.runs,
              macs=part.macs)
    return y, ops, hw


def test_generated_contract2_tables_match_contract():
    path = gen_header.CONTRACT2_DOC_PATH
    assert path.exists(), "run `python -m dtpu.hw.gen_header`"
    assert path.read_text() == gen_header.outputs()[path], \
        f"{path} drifted from contract.json: run `python -m dtpu.hw.gen_header`"


def test_contract2_format_is_well_formed():
    cfg = get_config()
    f = Format(cfg)
    assert f.version == (2, 1)   # 2.1: the VEC descriptor of the optional vector unit
    for kind, fields in f.fields.items():
        used = 0
        for name, (lsb, width) in fields.items():
            mask = ((1 << width) - 1) << lsb
            assert lsb + width <= 64 and not used & mask, (kind, name)
            used |= mask
    for op, kinds in f.layout.items():
        assert op in f.opcodes and all(k.rstrip("*") in f.fields for k in kinds)
    old = {r.offset for r in cfg.registers}
    new = [int(r["offset"]) for r in f.regs.values()]
    assert len(set(new)) == len(new) and not old & set(new)
    assert all(o % 4 == 0 and o < 1 << cfg.AXIL_ADDR_WIDTH for o in new)
    bits = [b.bit_length() - 1 for b in f.errors.values()]
    assert len(set(bits)) == len(bits) and max(bits) < 32
    # a value that does not fit its field is refused, naming it
    with pytest.raises(CmdlistError, match=r"ACT2.KH = 16 does not fit its 4-bit field"):
        f.word("ACT2", KH=16)
    w = f.word("ACT2", KH=3, KW=5, SY=2, OH=300, OW=7)
    assert f.fields_of("ACT2", w) == dict(KH=3, KW=5, SY=2, SX=0, DY=0, DX=0, PT=0, PL=0, OH=300, OW=7)


@pytest.mark.parametrize("net", NETS)
def test_zoo_partitions_bit_identical_to_backend_model(net):
    """Every partition of the net, compiled once and run by one doorbell, gives the bytes that
    backend=model gives node by node; its stall-free compute cycles are the same jobs' cycles,
    the memory model adds idle cycles on top, and the host does the same few operations
    whatever the partition's size."""
    path = ZOO / f"{net}.tflite"
    assert path.exists(), f"{path} missing: the zoo is committed (tests/models/zoo)"
    parts = partitions_of(path)
    assert parts and sum(len(p) for p in parts) >= 3
    drv = _driver(parts)
    backend = ModelBackend({})
    handles = [[backend.prepare(n.spec, n.filters, n.bias) for n in p] for p in parts]
    hosts = []
    for k, (part, hs) in enumerate(zip(parts, handles)):
        for seed in (k, k + 100):
            x = _input(part[0].spec, seed)
            y, host, hw = _invoke(drv, k, x)
            z, cycles = x, 0
            for node, h in zip(part, hs):
                z, cnt = backend.invoke(h, z.reshape(node.spec.input_shape), Probes())
                cycles += cnt.cycles
            assert y.dtype == z.dtype and np.array_equal(y, z.reshape(y.shape)), (net, k, seed)
            assert hw["compute_cycles"] == cycles, (net, k)
            assert hw["cycles"] == hw["compute_cycles"] + hw["idle_cycles"]
            assert hw["idle_cycles"] > 0 and hw["runs"] >= len(part)
            hosts.append(host)
    for h in hosts:
        assert h.counts() == (5, 3, 1, 0)   # reads, writes, doorbells, DMA starts
    irq = drv.fmt.regs["IRQ"]
    pending = 1 << next(fl["lsb"] for fl in irq["fields"] if fl["name"] == "PENDING")
    assert drv.t.read_reg(int(irq["offset"])) & pending == 0, "the driver acknowledged the interrupt"
    assert drv.t.read_reg(int(irq["offset"])) != 0, "and left it enabled"


def test_single_job_cycles_follow_the_memory_model():
    """One GEMM in a list: the fetcher's first words (SEQ_FETCH_START + RL, then the sequencer's
    decode of REGS and RUN, contract.json memory_model SEQ_*), the activation
    stream's first beat (RL, of which CFG_CYCLES overlap the job's CONFIG), the job's
    stall-free cycles, the result's write response (WL) and the interrupt."""
    cfg = get_config()
    rng = np.random.default_rng(3)
    spec = ConvSpec(OpKind.CONV_2D, DataMode.INT8, (1, 6, 6, 16), (24, 3, 3, 16), padding=Padding.SAME,
                    input_q=Quant((0.02,), (3,)), filter_q=Quant((0.01,) * 24, (0,) * 24),
                    output_q=Quant((0.1,), (-4,)), name="c")
    w = rng.integers(-20, 20, spec.filter_shape).astype(np.int8)
    b = rng.integers(-500, 500, 24).astype(np.int32)
    drv = _driver([[NodeIn(spec, w, b)]])
    prog, image = drv.program, drv.buf.array
    x = _input(spec, 0)
    y, _, hw = _invoke(drv, 0, x)
    assert np.array_equal(y, reference.run(spec, x, w, b))
    m = Format(cfg).mem
    rl, wl = m["MEM_READ_LATENCY"], m["MEM_WRITE_LATENCY"]
    # the partition list: REGS (n words), RUN, END in its first block; the RUN's header is
    # taken once its last word is in and the fetcher has handed the REGS over
    f = Format(cfg)
    o = prog.partitions[0].list_addr - prog.base
    head = int(image[o:o + 8].view(np.uint64)[0])
    assert f.opnames[f.field("HEADER", head, "OP")] == "REGS"
    n = f.field("HEADER", head, "LEN")
    first = m["SEQ_FETCH_START"] + rl                   # the list's first word
    regs = first + n - 1 + m["SEQ_DECODE"]              # REGS header taken
    run = max(first + n + 8 + m["SEQ_DECODE"],
              regs + m["SEQ_REG_CYCLES"] * (n - 2) + m["SEQ_DESC_GAP"])
    # the RUN: CTRL.START SEQ_RUN_START after its header, its activation stream requested
    # after the load unit's setup and first run (step_timing.act_req), the core's first word
    # SEQ_ACT_FIRST after the first beat, the job's stall-free cycles from there (less the
    # CFG_CYCLES they overlap), the store unit's last burst after DONE, then WL
    words = image[o + 8 * n:o + 8 * (n + 9)].view(np.uint64)
    d = {k: f.fields_of(k, int(v)) for k, v in zip(f.layout["RUN"][1:], words[1:])}
    assert f.opnames[f.field("HEADER", int(words[0]), "OP")] == "RUN"
    act_req = step_timing.act_req(f, d)
    assert act_req == m["SEQ_ACT_SETUP_WINDOWS"] + 2   # the first word is PAD (SAME): a run of 1
    tl = Timeline(f)
    gaps = tuple(18 * k for k in range(17))     # one result word every KW = 18 cycles
    start = run + m["SEQ_RUN_START"]
    # a 3x3 WINDOWS stream (runs of KW*C/LANES = 6 words) does not keep up with the core: its
    # stall is the load unit's stream against the GEMM's need times (step_timing.act_stream,
    # _stream_sim), at least the first word's lateness
    sched = (18, 3, 18, 36)                     # KW, NT, period, M of this GEMM
    wa, per_word, need = step_timing.act_stream(f, cfg, d, 36 * 18, sched, None, {})
    assert per_word == 1 and need[18] == cfg.CFG_CYCLES + 3 * 18
    stall = load_unit.stream_sim(wa, per_word, need, m["SEQ_ACT_SETUP_WINDOWS"] - 2, 0, m)[0]
    assert stall > act_req + rl + m["SEQ_ACT_FIRST"] - cfg.CFG_CYCLES
    expect = start + stall + hw["compute_cycles"] \
        + tl.store_tail(hw["wr_beats"], gaps) + wl + m["IRQ_LATENCY"]
    # 108 result words: 6 full bursts and 12 words, one word every KW = 18 cycles: the last
    # full burst's beats are long done, the partial one (closed by the RUN's end) follows
    assert hw["wr_beats"] == 108 and tl.store_tail(108, gaps) == m["SEQ_STORE_TAIL"] + 1 + 12
    assert tl.store_tail(108) == m["SEQ_STORE_TAIL"] + 16     # results back to back
    assert hw["cycles"] == expect
    assert hw["compute_cycles"] == cfg.CFG_CYCLES + (36 * 3 - 1) * 18 + 18 + cfg.LAT_MXU + \
        cfg.LAT_REDUCE + cfg.LAT_POST + 1   # T_gemm: M=36, KW=18, NT=3, W=1


def _small_net(rng):
    """conv -> depthwise (multiplier 2) -> 1x1: on a build of 128 parameter entries (16 of
    scratch: halves of 8) the depthwise and the 1x1 do not fit next to the conv and stream,
    the depthwise as one DWCONV job per channel group, the 1x1 as one page per tile."""
    q = lambda oc: dict(input_q=Quant((0.02,), (int(rng.integers(-9, 9)),)),  # noqa: E731
                        filter_q=Quant(tuple(rng.uniform(0.004, 0.02, oc)), (0,) * oc),
                        output_q=Quant((0.15,), (int(rng.integers(-9, 9)),)))
    specs = [
        ConvSpec(OpKind.CONV_2D, DataMode.INT8, (1, 12, 12, 3), (40, 3, 3, 3), stride=(2, 2),
                 padding=Padding.SAME, name="conv", **q(40)),
        ConvSpec(OpKind.DEPTHWISE_CONV_2D, DataMode.INT8, (1, 6, 6, 40), (1, 3, 3, 80),
                 padding=Padding.SAME, depth_multiplier=2, name="dw", **q(80)),
        ConvSpec(OpKind.CONV_2D, DataMode.INT8, (1, 6, 6, 80), (96, 1, 1, 80), name="pw", **q(96)),
    ]
    net = []
    for s in specs:
        w = rng.integers(-12, 12, s.filter_shape).astype(np.int8)
        b = rng.integers(-300, 300, s.out_channels).astype(np.int32)
        net.append((s, w, b))
    return net


def test_streamed_nodes_on_a_small_build_are_bit_exact_and_overlap():
    with HwConfig(LOG_WEIGHT_WORDS=13, LOG_PARAM_ENTRIES=7, LOG_ACT_WORDS=10) as cfg:
        net = _small_net(np.random.default_rng(5))
        drv = _driver([[NodeIn(s, w, b, i - 1) for i, (s, w, b) in enumerate(net)]], cfg)
        prog = drv.program
        assert prog.streamed_nodes >= 2
        f = Format(cfg)
        words = drv.buf.array[prog.partitions[0].list_addr - prog.base:][:8 * prog.partitions[0].list_words]
        words = words.view(np.dtype("<u8"))
        loads, i = [], 0
        while i < words.size:
            h = f.fields_of("HEADER", words[i])
            if h["OP"] == f.opcodes["LOAD"]:
                loads.append(f.fields_of("LOAD2", words[i + 2]))
            i += h["LEN"]
        assert loads, "streamed nodes load their weights from the list"
        # some load waits for an earlier RUN (it overwrites what that RUN read), and some load
        # for the next node waits for nothing: it runs while the core computes
        assert any(ld["AFTER"] > 0 for ld in loads) and any(ld["AFTER"] == 0 for ld in loads)
        for seed in range(2):
            x = _input(net[0][0], seed)
            y, host, hw = _invoke(drv, 0, x)
            z = x
            for s, w, b in net:
                z = reference.run(s, z.reshape(s.input_shape), w, b)
            assert np.array_equal(y, z.reshape(y.shape)), seed
            assert hw["cycles"] == hw["compute_cycles"] + hw["idle_cycles"]
            assert host.counts() == (5, 3, 1, 0)


@pytest.mark.parametrize("net", ["mobilenet_like__int8", "small"])
def test_fast_path_equals_the_register_protocol(net):
    """The executor's compiled jobs (dtpu.hw.fast) against the 1.2 protocol (registers, START,
    streams) on the same lists: the same bytes, the same cycles, the same counters, when a list
    is decoded and when it is run again (its data path replayed from prepared operations)."""
    build = dict(LOG_WEIGHT_WORDS=13, LOG_PARAM_ENTRIES=7, LOG_ACT_WORDS=10) if net == "small" else {}
    path = ZOO / f"{net}.tflite"
    assert net == "small" or path.exists(), f"{path} missing: the zoo is committed"
    with HwConfig(**build) as cfg:
        if net == "small":
            parts = [[NodeIn(s, w, b, i - 1)
                      for i, (s, w, b) in enumerate(_small_net(np.random.default_rng(5)))]]
        else:
            parts = partitions_of(path, cfg)
        fast_drv = _driver(parts, cfg, fast_path=True)
        slow_drv = _driver(parts, cfg, fast_path=False)
        for again in range(2):      # the second invoke replays its lists (dtpu.hw.replay)
            for k, part in enumerate(parts):
                x = _input(part[0].spec, k + 10 * again)
                y1, _, hw1 = _invoke(fast_drv, k, x)
                y2, _, hw2 = _invoke(slow_drv, k, x)
                assert np.array_equal(y1, y2) and hw1 == hw2, (net, k, again)
            assert fast_drv.t.core.cycles == slow_drv.t.core.cycles > 0


def test_split_k_sums_and_post_on_chip_are_bit_exact():
    """K split (one tile of K is larger than a scratch half): RAW jobs per K chunk add into int64
    partial sums in DDR (RES ACC, the first chunk writes), POST finishes them with the post unit
    (parameters paged through the half); the host's dtpu.reference.requantize is no longer
    needed and the bytes equal it."""
    rng = np.random.default_rng(11)
    q = lambda oc: dict(input_q=Quant((0.02,), (int(rng.integers(-9, 9)),)),  # noqa: E731
                        filter_q=Quant(tuple(rng.uniform(0.004, 0.02, oc)), (0,) * oc),
                        output_q=Quant((0.3,), (int(rng.integers(-9, 9)),)))
    specs = [ConvSpec(OpKind.CONV_2D, DataMode.INT8, (1, 6, 6, 40), (48, 3, 3, 40),
                      padding=Padding.SAME, name="conv k-split", **q(48)),
             ConvSpec(OpKind.FULLY_CONNECTED, DataMode.INT8, (1, 1, 1, 1728), (10, 1, 1, 1728),
                      name="fc k-split", **q(10))]
    net = [(s, rng.integers(-12, 12, s.filter_shape).astype(np.int8),
            rng.integers(-300, 300, s.out_channels).astype(np.int32)) for s in specs]
    with HwConfig(LOG_WEIGHT_WORDS=11, LOG_PARAM_ENTRIES=7, LOG_ACT_WORDS=10) as cfg:
        parts = [[NodeIn(s, w, b, i - 1) for i, (s, w, b) in enumerate(net)]]
        prog = compile_program(parts, cfg)
        f = Format(cfg)
        part = prog.partitions[0]
        words = prog.image[part.list_addr - prog.base:][:8 * part.list_words].view(np.dtype("<u8"))
        ops, i = [], 0
        while i < words.size:
            h = f.fields_of("HEADER", words[i])
            ops.append((f.opnames[h["OP"]], h["FLAGS"],
                        f.fields_of("RES0", words[i + 6]) if h["OP"] == f.opcodes["RUN"] else None))
            i += h["LEN"]
        acc = [o for o in ops if o[0] == "RUN" and o[2]["MODE"] == f.res_modes["ACC"]]
        assert len(acc) > 4 and sum(1 for o in acc if o[1] & f.flag_first) >= 2
        assert sum(1 for o in ops if o[0] == "POST") >= 2 + 1   # conv params in pages, fc
        for fast_path in (True, False):
            drv = _driver(parts, cfg, fast_path)
            for seed in range(2):
                x = _input(specs[0], seed)
                y, host, hw = _invoke(drv, 0, x)
                z = x
                for s, w, b in net:
                    z = reference.run(s, z.reshape(s.input_shape), w, b)
                assert np.array_equal(y, z.reshape(y.shape)), (fast_path, seed)
                assert host.counts() == (5, 3, 1, 0)
                assert hw["cycles"] == hw["compute_cycles"] + hw["idle_cycles"]


def _one_node_driver(fast_path: bool = True):
    rng = np.random.default_rng(9)
    spec = ConvSpec(OpKind.CONV_2D, DataMode.INT8, (1, 5, 5, 8), (8, 1, 1, 8),
                    input_q=Quant((0.02,), (0,)), filter_q=Quant((0.01,) * 8, (0,) * 8),
                    output_q=Quant((0.1,), (1,)), name="pw")
    w = rng.integers(-20, 20, spec.filter_shape).astype(np.int8)
    b = rng.integers(-500, 500, 8).astype(np.int32)
    drv = _driver([[NodeIn(spec, w, b)]], fast_path=fast_path)
    return drv.program, drv, spec, w, b


def _list_words(drv, prog):
    """The partition's list words in the DDR buffer the device reads (writable)."""
    part = prog.partitions[0]
    off = part.list_addr - prog.base
    return drv.buf.array[off:off + 8 * part.list_words].view(np.dtype("<u8"))


@pytest.mark.parametrize("fault", ["BAD_OPCODE", "BAD_LENGTH", "BAD_FIELD", "DECERR", "SLVERR",
                                   "TIMEOUT", "JOB"])
@pytest.mark.parametrize("fast_path", [True, False], ids=["fast", "protocol"])
def test_errors_stop_the_list_name_the_descriptor_and_clear(fault, fast_path):
    prog, drv, spec, w, b = _one_node_driver(fast_path)
    f = drv.fmt
    words = _list_words(drv, prog)
    saved = words.copy()
    # list: REGS (header + pairs), RUN (9 words), END
    run_at = int(f.fields_of("HEADER", words[0])["LEN"])
    if fault == "BAD_OPCODE":
        words[run_at] = (int(words[run_at]) & ~0xFF) | 0x7F
    elif fault == "BAD_LENGTH":
        words[run_at] = (int(words[run_at]) & ~0xFF00) | (5 << 8)
    elif fault == "BAD_FIELD":
        words[run_at + 1] = (int(words[run_at + 1]) & ~0xF) | 9      # ACT0.MODE 9
    elif fault == "DECERR":
        words[run_at + 1] = (int(words[run_at + 1]) & 0xFFFFFFFF) | (0x100 << 32)   # SRC far below DDR
    elif fault in ("SLVERR", "TIMEOUT"):
        inp = prog.partitions[0].input
        getattr(drv.t.list_window.ddr, fault.lower() if fault == "SLVERR" else "hang").append(
            (inp.addr, inp.addr + inp.nbytes))
    elif fault == "JOB":
        job = get_config().reg("JOB").offset
        for i in range(1, run_at):
            if f.field("REG", words[i], "OFFSET") == job:   # precision code 15: BAD_PRECISION
                v = f.field("REG", words[i], "VALUE") | (0xF << get_config().reg("JOB").field("PREC").lsb)
                words[i] = f.word("REG", OFFSET=job, VALUE=v)
    x = _input(spec, 1)
    with pytest.raises(DtpuListError, match=fault) as info:
        _invoke(drv, 0, x)
    assert f"at list offset {8 * run_at}," in str(info.value)   # the RUN, in every case
    assert drv.t.read_reg(f.reg_offset("CL_ERR")) == 0, "the driver clears CL_ERR after reporting"
    # the list repaired, the next invoke is exact again
    words[:] = saved
    drv.t.list_window.ddr.slverr.clear()
    drv.t.list_window.ddr.hang.clear()
    y, _, _ = _invoke(drv, 0, x)
    assert np.array_equal(y, reference.run(spec, x, w, b))


def test_compiler_refuses_what_it_cannot_express():
    rng = np.random.default_rng(1)
    spec = ConvSpec(OpKind.CONV_2D, DataMode.INT8, (1, 4, 4, 8), (8, 1, 1, 8),
                    input_q=Quant((0.02,), (0,)), filter_q=Quant((0.01,) * 8, (0,) * 8),
                    output_q=Quant((0.1,), (0,)), name="pw")
    w = rng.integers(-9, 9, spec.filter_shape).astype(np.int8)
    with pytest.raises(CmdlistError, match=r"input src=3; accepted: -1 - k"):
        compile_program([[NodeIn(spec, w, None, src=3)]])
    with pytest.raises(CmdlistError, match="partition 0 has no nodes"):
        compile_program([[]])


def test_interrupt_is_pending_after_a_list_until_acknowledged():
    prog, drv, _, _, _ = _one_node_driver()
    dev, f = drv.t.list_window, drv.fmt
    irq = f.reg_offset("IRQ")
    en, pending = dev.irq_bit("DONE_EN"), dev.irq_bit("PENDING")
    dev.write(f.reg_offset("CL_BASE"), prog.partitions[0].list_addr)
    dev.write(f.reg_offset("DOORBELL"), 1)
    assert dev.read(f.reg_offset("CL_STATUS")) == 0b10          # DONE, no error
    assert dev.read(irq) == en | pending
    dev.write(irq, en | pending)                                  # acknowledge
    assert dev.read(irq) == en
    dev.write(irq, 0)                                             # disabled: never pending
    dev.write(f.reg_offset("DOORBELL"), 1)
    assert dev.read(irq) == 0 and dev.read(f.reg_offset("DESCS")) == 3   # REGS, RUN, END


def _run_fields(r):
    return (r.cycles, r.idle_cycles, r.compute_cycles, r.rd_beats, r.wr_beats, r.descs, r.runs,
            r.error, r.error_pc, r.error_tag, {t: list(v) for t, v in r.tags.items()})


@pytest.mark.parametrize("fault_run", [False, True], ids=["same", "fault_in_replay"])
def test_a_list_run_again_reuses_its_decoding_and_timeline_exactly(fault_run):
    """Emulation speed only: the second run of unchanged list bytes replays the recorded decoding
    and memory model. Its outputs, cycles, beats, per-node split and (with a bus error injected
    into a tensor the list reads) its error, PC, TAG and partial timeline are those of a fresh
    executor that decodes the same bytes from scratch."""
    parts = partitions_of(ZOO / "mobilenet_like__int8.tflite")
    prog = compile_program(parts)
    part = prog.partitions[0]
    x = _input(parts[0][0].spec, 3)

    def fresh_ddr():
        ddr = Ddr(prog.base, prog.size, prog.image)
        ddr.host_view(part.input.addr, part.input.nbytes)[:] = x.reshape(-1).view(np.uint8)
        return ddr

    from dtpu.hw.core import Core

    warm = Executor(Core(prog.cfg))
    ddr = fresh_ddr()
    first = warm.run(ddr, prog.prologue_addr), warm.run(ddr, part.list_addr)
    assert warm.decoded[part.list_addr][3] is not None, "the first run recorded the timeline"
    if fault_run:   # the third node's output: RUNs before it succeed, its store fails
        out = part.outputs[2]
        ddr.slverr.append((out.addr, out.addr + 8))
    again = warm.run(ddr, part.list_addr)
    cold = Executor(Core(prog.cfg))
    ddr2 = fresh_ddr()
    cold.run(ddr2, prog.prologue_addr)
    if fault_run:
        ddr2.slverr.append((out.addr, out.addr + 8))
    ref = cold.run(ddr2, part.list_addr)
    assert _run_fields(again) == _run_fields(ref)
    if fault_run:
        assert again.error and again.error_tag == 2
    else:
        assert _run_fields(again) == _run_fields(first[1]) and not again.error
        y, z = (d.host_view(part.output.addr, part.output.nbytes) for d in (ddr, ddr2))
        assert np.array_equal(y, z)


def test_ksplit3_request_fifo_cycles_as_measured_on_the_rtl():
    """The K-split 3x3 8x8x64 -> 24 stride 2 on the small build (tests/test_rtl_lists.py
    KSPLIT3's sixth program): CL_CYCLES and IDLE as `dtpu_cl_top` counts them (18 164, 13 650,
    measured in process). Its last three K chunks' streams end while the load unit's request
    FIFO holds the run builder, and the RTL serves a read-back sum before the stream's last
    run: the Timeline had the run 11 cycles early (18 161, 13 647) until it counted the FIFO as
    dtpu_cl_load has it (docs/rtl.md "K-split 3x3", "The load unit's request FIFO"). Model
    only, so the default run keeps what the slow RTL sweep asserts."""
    from dtpu.rtl.build import SimConfig

    cfg = SimConfig.from_mxu((8, 8), memory=(10, 8, 9)).hw_config()
    rng = np.random.default_rng(0)
    spec = ConvSpec(OpKind.CONV_2D, DataMode.INT8, (1, 8, 8, 64), (24, 3, 3, 64),
                    padding=Padding.SAME, stride=(2, 2), name="k3",
                    input_q=Quant((0.05,), (int(rng.integers(-9, 9)),)),
                    filter_q=Quant(tuple(rng.uniform(0.004, 0.02, 24)), (0,) * 24),
                    output_q=Quant((0.1,), (int(rng.integers(-9, 9)),)))
    w = rng.integers(-12, 12, spec.filter_shape).astype(np.int8)
    b = rng.integers(-300, 300, 24).astype(np.int32)
    base = 0x18000000
    p = compile_program([[NodeIn(spec, w, b, -1)]], cfg, base=base)
    mem = np.zeros(1 << 18, np.uint8)
    mem[:p.size] = p.image
    ex = Executor(Core(cfg), Format(cfg))
    ddr = Ddr(base, mem.size, mem)
    r = ex.run(ddr, p.prologue_addr)
    assert r.error == 0, r.message
    r = ex.run(ddr, p.partitions[0].list_addr)
    assert r.error == 0, r.message
    assert (r.cycles, r.idle_cycles) == (18164, 13650)
