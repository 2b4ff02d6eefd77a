"""The depthwise RUN timing of the Timeline (pylib/dtpu/hw/dw_timing.py, docs/rtl.md "Depthwise
streams"): its pieces against their definitions, and the C kernel of the cycle simulation
(kernels.c dtpu_stream_sim) against the Python statements it copies, on the streams real
programs give (depthwise in lane mode and in word mode with the store unit's backpressure,
write runs across 4 KiB, 3x3 convolutions over WINDOWS, lists with blocks still to read). The RTL itself: tests/test_rtl_lists.py
(test_run_cycles_equal_the_timeline_on_the_exact_class, the zoo) and sim/tb/tb_cl_run.py."""
from __future__ import annotations

import numpy as np
import pytest

from dtpu.hw import dw_timing, kernels
from dtpu.hw.chain_specs import chain_specs
from dtpu.hw.core import Core
from dtpu.hw.ddr import Ddr
from dtpu.hw.executor import Executor, RunResult
from dtpu.hw.listcompiler import NodeIn, compile_program
from dtpu.hw.listformat import Format
from dtpu.hw.units import load as load_unit
from dtpu.hw.units import store as store_unit
from dtpu.rtl.build import SimConfig
from dtpu.spec import Quant

CFG = SimConfig.from_mxu((8, 8), memory=(10, 8, 9)).hw_config()
FMT = Format(CFG)

#: (nodes, pixels a side, C): depthwise in lane mode (C 3..13, multiplier 2, strides, dilation,
#: kernels), in word mode with short runs (two or more channel chunks: the store unit's
#: backpressure), 3x3 convolutions (WINDOWS) and 1x1s around them
PROGRAMS = [([("dw", 0)], 8, 3), ([("dw_m2_s2", 0)], 8, 13), ([("dw_k5x5", 0)], 7, 5),
            ([("dw_s3_m2", 0)], 10, 5), ([("dw_d2", 0)], 9, 7), ([("dw_k1x5_v", 0)], 9, 7),
            ([("dw", 0)], 6, 128), ([("dw", 0)], 9, 64), ([("dw_s2", 0)], 7, 128),
            ([("dw", 0)], 16, 96), ([("pw", 16), ("dw_m2", 0)], 5, 8),
            ([("c3", 8), ("c3s", 16), ("pw", 8)], 9, 3), ([("pw", 24), ("dw", 0)], 8, 8)]


def _program(nodes, hw, c, seed=0):
    rng = np.random.default_rng(seed)

    def q(oc):
        return dict(input_q=Quant((0.02,), (1,)),
                    filter_q=Quant(tuple(rng.uniform(0.004, 0.02, oc)), (0,) * oc),
                    output_q=Quant((0.15,), (-1,)))

    specs, srcs = chain_specs(nodes, hw, c, q)
    ins = [NodeIn(sp, rng.integers(-12, 12, sp.filter_shape).astype(np.int8),
                     rng.integers(-300, 300, sp.out_channels).astype(np.int32), k)
           for sp, k in zip(specs, srcs)]
    return compile_program([ins], CFG)


def _run(p, seed=1) -> RunResult:
    ddr = Ddr(p.base, p.size)
    ddr.mem[:p.size] = p.image
    b = p.partitions[0].input
    ddr.write(b.addr, np.random.default_rng(seed).integers(0, 256, b.nbytes, dtype=np.uint8))
    ex = Executor(Core(CFG), FMT)
    ex.run(ddr, p.prologue_addr)
    return ex.run(ddr, p.partitions[0].list_addr)


def _captured(monkeypatch):
    """Run every program once, recording the arguments of each stream simulation."""
    streams = []
    sim = load_unit.stream_sim

    def rec_sim(*a, **k):
        streams.append((a, k))
        return sim(*a, **k)

    monkeypatch.setattr(load_unit, "stream_sim", rec_sim)
    for nodes, hw, c in PROGRAMS:
        _run(_program(nodes, hw, c))
    monkeypatch.undo()
    return streams


def _both(a):
    """stream_sim on arguments `a` in Python and in C: (result, takes, res) each."""
    out = []
    for c in (False, True):
        takes = [] if len(a) > 7 and a[7] is not None else None
        res = dict(a[8]) if len(a) > 8 and a[8] is not None else None
        out.append((load_unit.stream_sim(*a[:7], takes, res, in_c=c), takes, res))
    return out


@pytest.mark.skipif(kernels.get() is None, reason="no C compiler: the Python simulation runs")
def test_c_stream_simulation_equals_the_python_statements(monkeypatch):
    streams = _captured(monkeypatch)
    assert len(streams) >= len(PROGRAMS) and not any(k for _, k in streams)
    # lane-mode depthwise and GEMM (8 elements a word), word mode without and with the store
    kinds = {(a[1], len(a) > 8 and a[8] is not None) for a, _ in streams}
    assert {(8, False), (1, False), (1, True)} <= kinds
    for a, _ in streams:
        (want, _, res_py), (got, _, res_c) = _both(a)
        assert got == want and res_c == res_py
        # with takes recorded, and with the list's blocks still to read on the same master
        # the blocks at an address: the first across a 4 KiB page (five bursts, not four)
        for blocks in ((a[3] + 40, 2, 64, 4), (a[3] + 40, 2, 64, 4, 512 - 24)):
            a2 = a[:6] + (blocks, []) + a[8:]
            (want, t_py, res_py), (got, t_c, res_c) = _both(a2)
            assert got == want and t_c == t_py and res_c == res_py and len(t_c) == len(a[2])


@pytest.mark.parametrize("in_c", [False, pytest.param(True, marks=pytest.mark.skipif(
    kernels.get() is None, reason="no C compiler: the Python simulation runs"))],
    ids=["python", "c"])
def test_a_list_block_taken_before_the_streams_end_is_read_whole(in_c):
    """A block of the list the read master took a few cycles before the core's last word goes
    on after it: its four bursts are all read, and the next block's AR comes SEQ_FETCH_NEXT
    after its last beat. The simulation stopped at the core's last word: the block was three
    bursts, and the next block's AR the "set from its last beat" mark, 2^60 (a streamed 1x1
    convolution right after a vector node: 2^60 cycles on backend=model)."""
    wa = np.arange(1000, 1032, dtype=np.int64)         # 32 contiguous words ...
    need = np.arange(32, dtype=np.int64) + 150         # ... the core takes from cycle 150
    gap = int(FMT.mem["SEQ_FETCH_NEXT"])
    caught = 0
    for t in range(100, 260):        # the next block's AR, before and after the stream's end
        stall, first, end, beats, blks, nxt = load_unit.stream_sim(
            wa, 1, need, 0, 0, FMT.mem, (t, 2, 64, gap), [], None, in_c=in_c)
        assert (stall, first, end, beats) == (0, 103, 135, 32), t
        if not blks:
            assert nxt == t, t       # not taken before the stream's end: the Timeline's
            continue
        caught += t > 150
        (b0, b1), = blks
        assert b1 - b0 == 64 and nxt == b1 - 1 + gap, (t, blks, nxt)
    assert caught


def test_loader_need_times_follow_dw_schedule():
    """The stream's need times are the DWCONV row loader's: row r's words one a cycle, ending
    at dw_schedule's load_end[r]; the result times end at 0, the result words of a 2-chunk
    depthwise are a pixel's 8-word chunk each (short write runs)."""
    from dtpu.hw.contract_schedules import dw_schedule

    p = _program([("dw", 0)], 6, 128)
    ex = Executor(Core(CFG), FMT)
    seen = []
    orig = dw_timing.dw_stream

    def rec(cfg, su, d, words, setup, res_words=None):
        r = orig(cfg, su, d, words, setup, res_words)
        seen.append((su, d, r))
        return r

    dw_timing.dw_stream = rec
    try:
        ddr = Ddr(p.base, p.size)
        ddr.mem[:p.size] = p.image
        ex.run(ddr, p.prologue_addr)
        ex.run(ddr, p.partitions[0].list_addr)
    finally:
        dw_timing.dw_stream = orig
    (su, d, r), = seen
    wa, per_word, need, setup, res = r
    tm = dw_schedule(CFG, su.geom, su.wpi)
    rw = su.geom.row_words
    assert per_word == 1 and setup == FMT.mem["SEQ_ACT_SETUP_CHANNELS"]
    assert list(need[rw - 1::rw] + 1) == list(tm.load_end)
    assert np.all(np.diff(need.reshape(-1, rw), axis=1) == 1)
    rt, rwa = res
    assert rt[-1] == 0 and np.all(np.diff(rt) > 0)
    runs = np.flatnonzero(np.diff(rwa) != 1)
    assert runs.size and np.all(np.diff(runs) == 8)


def test_the_timeline_of_a_lane_mode_depthwise_is_the_stream_bound():
    """A lane-mode depthwise (8x8x3: one lane a cycle in the packer, 8 cycles a word) takes
    about LANES cycles per word in the Timeline now, not the core's stall-free rate."""
    r = _run(_program([("dw", 0)], 8, 3))
    assert r.cycles > 8 * 64 + 85


#: programs whose RUNs write scattered items (OC split over RUNs: channel slices), for the
#: store simulation (units.store.store_sim, docs/rtl.md "The store unit's write queue in the
#: Timeline"), with PROGRAMS' depthwise and 1x1 ones
STORE_PROGRAMS = [([("pw", 256)], 8, 16), ([("pw", 16), ("pw", 256), ("pw", 8)], 6, 16),
                  ([("pw", 12)], 5, 16)]


@pytest.mark.skipif(kernels.get() is None, reason="no C compiler: the Python simulation runs")
def test_c_store_simulation_equals_the_python_statements(monkeypatch):
    """kernels.c dtpu_store_sim against units.store.store_sim's Python statements on the result
    words real programs give (and again with earlier bursts' responses still due, and with
    the core's offers spread out), every returned figure equal."""
    calls = []
    sim = store_unit.store_sim

    def rec(*a):
        calls.append(a)
        return sim(*a)

    monkeypatch.setattr(store_unit, "store_sim", rec)
    for nodes, hw, c in STORE_PROGRAMS + PROGRAMS:
        _run(_program(nodes, hw, c))
    monkeypatch.undo()
    assert len(calls) >= 16, len(calls)
    held = 0
    for chunks, offer, mem, wq, prior in calls:
        variants = [(offer, prior), (offer, tuple(offer[0] + 3 * k for k in range(8))),
                    ([o + 2 * i for i, o in enumerate(offer)], prior)]
        for off, pr in variants:
            out = []
            for c in (False, True):
                out.append(store_unit.store_sim(chunks, off, mem, wq, pr, in_c=c))
            assert out[1] == out[0]
            held += out[0][0]
    assert held > 0     # the queue filled somewhere: the holds were compared too
