"""The rotated depthwise layout (HwConfig DW_ROTATE=1, docs/architecture.md "Depthwise
crossbars linear in COLS"): its claims re-derived word by word, and the golden model with it
against the TFLite-exact reference, the schedule and the banked layout's cycles."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dtpu.hw.config import HwConfig, ceil_div
from dtpu.hw.core import Core, DwGeometry, dw_schedule
from dtpu.hw.dw_format import dw_slot_words, dw_weight_layout, dw_weight_phases, dw_weight_words
from dtpu.driver import ModelTransport, run_jobs
from dtpu.hw.core import out_lanes
from dtpu.hw.lower import Job, LowerError, result_precision, dw_geometry, footprint, lower
from dtpu.pack import pack, unpack
from dtpu.precision import Precision
from dtpu.spec import ConvSpec, DataMode, OpKind, Padding, Quant
from tests.test_hw_model import _dw_cycle_sim, assert_matches_reference, make_data, nodes, run_model


def _rot(cols=8, **kw):
    return HwConfig(COLS=cols, DW_ROTATE=1, **kw)


def _slot_offset(x, g, iw, sx, gc):
    """The phase-major slot offset of pixel x, group g (the layout's definition, restated)."""
    w1 = ceil_div(iw, sx)
    return ((x % sx) * w1 + x // sx) * gc + g


@settings(max_examples=300, deadline=None)
@given(cols=st.sampled_from([2, 4, 8, 16, 32]), iw=st.integers(1, 40), sx=st.integers(1, 5),
       dx=st.integers(1, 3), kw=st.integers(1, 5), pl=st.integers(0, 6), gc=st.integers(1, 32),
       steps=st.integers(1, 6))
def test_every_tap_reads_one_rotation_of_the_banks(cols, iw, sx, dx, kw, pl, gc, steps):
    """Per step and tap, bank b at slot row s + Q + (b < R) handed to column (b - R) mod COLS
    gives every column whose pixel is in the image exactly the word of its item: the RTL's whole
    activation read network is one row choice per bank and one rotation."""
    gc = min(gc, cols)
    ow = max(1, (iw - 1) // sx + 1)
    slot = {}   # (bank row, bank) -> (x, g), rows relative to the slot
    for x in range(iw):
        for g in range(gc):
            a = _slot_offset(x, g, iw, sx, gc)
            assert (a // cols, a % cols) not in slot
            slot[(a // cols, a % cols)] = (x, g)
    g_ = DwGeometry(1, iw, 1, ow, 1, kw, 0, pl, 1, sx, 1, dx, gc, 1, 1, 1)
    words = dw_slot_words(_rot(cols), g_)
    assert all(r * cols + b < words for r, b in slot)
    assert words - iw * gc < (sx - 1) * gc + cols
    w1 = ceil_div(iw, sx)
    for s in range(min(steps, ceil_div(ow * gc, cols))):
        for kx in range(kw):
            e = kx * dx - pl
            eq, ep = divmod(e, sx)
            d = (ep * w1 + eq) * gc
            q_, r_ = divmod(d, cols)
            for b in range(cols):
                j = (b - r_) % cols
                q = s * cols + j
                if q >= ow * gc:
                    continue
                ox, g = divmod(q, gc)
                x = ox * sx + e
                if 0 <= x < iw:
                    assert slot[(s + q_ + (b < r_), b)] == (x, g), (s, kx, b)


@settings(max_examples=200, deadline=None)
@given(cols=st.sampled_from([2, 4, 8, 16]), gc=st.integers(1, 16), nchunk=st.integers(1, 4),
       taps=st.integers(1, 9), steps=st.integers(1, 40))
def test_column_j_reads_weight_bank_j(cols, gc, nchunk, taps, steps):
    """Weight row (tap*NCHUNK + c)*P + (s mod P), bank j holds the group item s*COLS + j needs."""
    gc = min(gc, cols)
    cfg = _rot(cols)
    g = DwGeometry(1, 1, 1, 1, 1, taps, 0, 0, 1, 1, 1, 1, gc, nchunk, 1, 1)
    lay = dw_weight_layout(cfg, g)
    p = dw_weight_phases(cols, gc)
    assert p % 2 == 1 and (p * cols) % gc == 0
    assert lay.shape == (taps, nchunk * p * cols) and dw_weight_words(cfg, g) == lay.size
    for t in range(taps):
        for c in range(nchunk):
            for s in range(steps):
                row = lay[t].reshape(nchunk * p, cols)[c * p + s % p]
                for j in range(cols):
                    assert row[j] == c * gc + (s * cols + j) % gc


def test_weight_words_equal_the_banked_layout_when_gc_divides_cols():
    banked, rot = HwConfig(DW_ROTATE=0), _rot()
    for gc, nchunk, same in ((8, 5, True), (4, 1, True), (1, 1, True), (2, 1, True),
                             (6, 2, False), (4, 3, False), (3, 1, False)):
        g = DwGeometry(9, 9, 9, 9, 3, 3, 1, 1, 1, 1, 1, 1, gc, nchunk, 3, 1)
        assert (dw_weight_words(rot, g) == dw_weight_words(banked, g)) is same, (gc, nchunk)
    # GC 6 (96 or 144 int8 channels): 3 phases a chunk
    g = DwGeometry(9, 9, 9, 9, 3, 3, 1, 1, 1, 1, 1, 1, 6, 2, 3, 1)
    assert dw_weight_words(rot, g) == 9 * 2 * 3 * 8 and dw_weight_words(banked, g) == 9 * 2 * 8


def _dw_spec(h, w, c, k=3, s=1, mode=DataMode.INT8, padding=Padding.SAME, mult=1):
    return ConvSpec(OpKind.DEPTHWISE_CONV_2D, mode, (1, h, w, c), (1, k, k, c * mult), stride=(s, s),
                    padding=padding, depth_multiplier=mult, input_q=Quant((0.02,), (3,)),
                    filter_q=Quant((0.01,), (0,)), output_q=Quant((0.1,), (-2,)))


PROPS = settings(max_examples=50, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@PROPS
@given(nodes(kinds=(OpKind.DEPTHWISE_CONV_2D,), max_c=40), st.sampled_from([8, 4, 16]))
def test_rotated_layout_equals_reference(node, cols):
    spec, x, f, b = node
    cfg = _rot(cols)
    y, counters, low = run_model(spec, x, f, b, cfg)
    assert_matches_reference(spec, x, f, b, y)
    assert all(dict(j.regs)["DW_RING"] >> 16 == 1 for j in low.jobs(x) if j.label.startswith("dw"))


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(nodes(modes=(DataMode.INT8, DataMode.UINT8, DataMode.INT16X8), kinds=(OpKind.DEPTHWISE_CONV_2D,),
             max_c=40))
def test_rotated_layout_paged_through_tiny_memories(node):
    """Parts whose weight words depend on their chunking (dw_parts' rotated search): exact."""
    spec, x, f, b = node
    cfg = _rot(LOG_WEIGHT_WORDS=8, LOG_PARAM_ENTRIES=4, LOG_ACT_WORDS=8)
    try:
        y, _, low = run_model(spec, x, f, b, cfg)
    except LowerError:
        return
    assert_matches_reference(spec, x, f, b, y)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(nodes(kinds=(OpKind.DEPTHWISE_CONV_2D,), max_c=40))
def test_rotated_cycles_follow_the_documented_schedule(node):
    spec, x, f, b = node
    cfg = _rot()
    y, counters, low = run_model(spec, x, f, b, cfg)
    g = dw_geometry(spec, cfg, low.precision)
    assert g.tap_cycles == 1
    assert g.lb_rows * dw_slot_words(cfg, g) <= cfg.ACT_WORDS
    lanes_out = {"int8": 8, "uint8": 8, "int16": 4, "fp32": 2, "int32": 2, "int64": 1}[low.precision.value]
    wpi = ceil_div(low.precision.lanes, lanes_out)
    if not low.resident or len(low.jobs(x)) != spec.input_shape[0]:
        return
    per_image = _dw_cycle_sim(cfg, g, wpi)
    assert per_image == dw_schedule(cfg, g, wpi).cycles
    assert counters.cycles == spec.input_shape[0] * per_image


def test_stride_two_runs_one_cycle_per_tap():
    """The banked layout needs TAP_CYCLES 2 for this row (GC 4 at stride 2 puts two columns on
    one bank); the rotated one issues a tap per cycle, so each step takes half the cycles."""
    spec = _dw_spec(16, 32, 32, s=2)
    banked, rot = HwConfig(DW_ROTATE=0), _rot()
    gb, gr = dw_geometry(spec, banked, Precision.INT8), dw_geometry(spec, rot, Precision.INT8)
    assert gb.gc == gr.gc == 4 and gb.tap_cycles == 2 and gr.tap_cycles == 1
    assert dw_schedule(rot, gr, 1).step_issue * 2 == dw_schedule(banked, gb, 1).step_issue
    x, f, b = make_data(spec, np.random.default_rng(3))
    y, counters, _ = run_model(spec, x, f, b, rot)
    assert_matches_reference(spec, x, f, b, y)
    assert counters.cycles == dw_schedule(rot, gr, 1).cycles < dw_schedule(banked, gb, 1).cycles


def test_footprint_and_lowered_words_follow_the_chunking():
    rot = _rot()
    # 12 int8 groups on 8x8: GC 6 (2 chunks, P 3) and GC 4 (3 chunks, P 1) take 12 steps a row
    # each; the rotated lowering takes the one with fewer weight words
    spec = _dw_spec(8, 8, 96)
    g = dw_geometry(spec, rot, Precision.INT8)
    assert (g.gc, g.nchunk) == (4, 3) and dw_geometry(spec, HwConfig(DW_ROTATE=0), Precision.INT8).gc == 6
    g6 = DwGeometry(*[getattr(g, k) for k in ("ih", "iw", "oh", "ow", "kh", "kw", "pt", "pl", "sy",
                                                "sx", "dy", "dx")], 6, 2, g.lb_rows, 1)
    assert g6.nchunk * g6.steps_per_row(8) == g.nchunk * g.steps_per_row(8) == 12
    assert dw_weight_words(rot, g) == 9 * 3 * 8 < dw_weight_words(rot, g6) == 9 * 2 * 3 * 8
    # 3 groups: one chunk of GC 3 (fewer steps than 3 chunks of 1), P 3: 3 rows a tap
    spec = _dw_spec(8, 8, 24)
    g = dw_geometry(spec, rot, Precision.INT8)
    assert (g.gc, g.nchunk) == (3, 1)
    for sp, words in ((spec, 9 * 3 * 8), (_dw_spec(8, 8, 96), 9 * 3 * 8)):
        assert footprint(sp, rot)[0] == words
        low = lower(sp, np.ones(sp.filter_shape, np.int8), None, rot)
        (load,) = [j for j in low.load_jobs if j.label.startswith("dw weights")]
        assert load.send["wgt"].size == low.weight_words == words


@pytest.mark.parametrize("gc,ow,sx,prec", [(3, 7, 1, Precision.INT8), (6, 5, 2, Precision.INT16),
                                           (8, 3, 3, Precision.INT32), (5, 4, 1, Precision.FP32)])
def test_differing_column_copies_are_read_per_item(gc, ow, sx, prec):
    """Random weight memory (copies of one group that differ): each item multiplies by the copy
    in its column and step phase, as the RTL reads it; the compiled job (fast path) agrees."""
    cfg = _rot()
    rng = np.random.default_rng(gc * 31 + ow)
    kw_, iw = 3, (ow - 1) * sx + 3
    g = DwGeometry(2, iw, 2, ow, 1, kw_, 0, 0, 1, sx, 1, 1, gc, 1, 2, 1)
    L = prec.lanes
    ww = dw_weight_words(cfg, g)
    if prec is Precision.FP32:
        wvals = rng.standard_normal(ww * L).astype(np.float32)
        xvals = rng.standard_normal((2, iw, gc * L)).astype(np.float32)
    else:
        hi = 100 if prec.bits <= 16 else 1000
        wvals = rng.integers(-hi, hi, ww * L).astype(prec.value_dtype)
        xvals = rng.integers(-hi, hi, (2, iw, gc * L)).astype(prec.value_dtype)
    wwords = pack(wvals, prec)
    out_mode = "FLOAT" if prec.is_float else "RAW"
    regs = [("DW_IN", cfg.encode("DW_IN", H=2, W=iw)), ("DW_OUT", cfg.encode("DW_OUT", H=2, W=ow)),
            ("DW_KERNEL", cfg.encode("DW_KERNEL", KH=1, KW=kw_, PT=0, PL=0)),
            ("DW_STRIDE", cfg.encode("DW_STRIDE", SY=1, SX=sx, DY=1, DX=1)),
            ("DW_GROUPS", cfg.encode("DW_GROUPS", GC=gc, NCHUNK=1)),
            ("DW_RING", cfg.encode("DW_RING", LB_ROWS=2, TAP_CYCLES=1)),
            ("WGT_BASE", 0), ("PARAM_BASE", 0), ("IN_OFFSET", 0), ("WGT_OFFSET", 0),
            ("ACT_MIN", 0x80000000), ("ACT_MAX", 0x7FFFFFFF), ("PF_COUNT", 0),
            ("JOB", cfg.encode("JOB", OPCODE=cfg.OPCODE_DWCONV, PREC=cfg.prec_code(prec),
                               OUT_MODE=cfg.enums["OUT_MODE"][out_mode]))]
    if prec is Precision.FP32:  # the clamp as fp32 bit patterns: -inf, +inf
        regs = [("ACT_MIN", 0xFF800000) if n == "ACT_MIN" else ("ACT_MAX", 0x7F800000)
                if n == "ACT_MAX" else (n, v) for n, v in regs]
    load = Job("w", [("LOAD_ADDR", 0), ("LOAD_COUNT", ww),
                     ("JOB", cfg.encode("JOB", OPCODE=cfg.OPCODE_LOAD_WGT))], {"wgt": wwords}, 0)
    if prec is Precision.FP32:  # FLOAT mode reads bias entries: zero them
        pz = Job("p", [("LOAD_ADDR", 0), ("LOAD_COUNT", 2 * gc * L),
                       ("JOB", cfg.encode("JOB", OPCODE=cfg.OPCODE_LOAD_PARAM))],
                 {"wgt": np.zeros(2 * gc * L, np.uint64)}, 0)
    core = Core(cfg)
    t = ModelTransport(core)
    run_jobs(t, [load] + ([pz] if prec is Precision.FP32 else []))
    lanes_n, res_dt = out_lanes(cfg, prec, cfg.enums["OUT_MODE"][out_mode])
    job = Job("dw", regs, {"act": pack(xvals.reshape(-1), prec)}, 2 * ow * gc * ceil_div(L, lanes_n))
    (res,), _ = run_jobs(t, [job])
    got = unpack(res, result_precision(res_dt), res.size * lanes_n)
    # the expectation, item by item: column q mod COLS, phase (q // COLS) mod P
    p = dw_weight_phases(cfg.COLS, gc)
    wl = wvals.reshape(kw_, p * cfg.COLS, L)
    want = np.zeros((2, ow, gc, L), np.float64 if prec.is_float else np.int64)
    for oy in range(2):
        for ox in range(ow):
            for gg in range(gc):
                q = ox * gc + gg
                for kx in range(kw_):
                    xv = xvals[oy, ox * sx + kx, gg * L:(gg + 1) * L]
                    want[oy, ox, gg] += xv.astype(want.dtype) * wl[kx, q % (p * cfg.COLS)].astype(want.dtype)
    if prec.is_float:
        np.testing.assert_allclose(got.reshape(want.shape), want, rtol=1e-5, atol=1e-4)
    else:
        assert (got.reshape(want.shape).astype(np.int64) == want).all()


@pytest.mark.parametrize("shape,s,mode", [((12, 12, 24), 1, DataMode.INT8), ((10, 17, 96), 2, DataMode.UINT8),
                                          ((9, 9, 40), 2, DataMode.INT16X8)])
def test_compiled_jobs_equal_the_protocol_path(shape, s, mode):
    """backend=model's compiled forms (C kernels, numpy fused, generic) read the rotated weights
    as the protocol path does; with a group's column copies made to differ they fall back to the
    generic path, which still equals the protocol path."""
    from dtpu.hw import fast
    spec = _dw_spec(*shape, s=s, mode=mode)
    x, f, b = make_data(spec, np.random.default_rng(sum(shape)))
    cfg = _rot()
    low = lower(spec, f, b, cfg)
    (job,) = low.jobs(x)
    for differ in (False, True):
        core = Core(cfg)
        t = ModelTransport(core)
        run_jobs(t, low.load_jobs)
        if differ:   # the copy of group 1 in column 1 + GC of phase 0 (a word only GC < COLS has)
            g = dw_geometry(spec, cfg, low.precision)
            assert g.gc < cfg.COLS
            core.wmem[g.gc + 1] ^= np.uint64(0x0101)
        (want,), _ = run_jobs(t, [job])
        for kernels_ok in (True, False):
            cj = fast.compile_job(core, job.regs, kernels_ok=kernels_ok)
            if differ or mode is not DataMode.INT16X8:   # 8-bit: fused or C kernel when equal
                assert (cj.kind == "generic") is differ, (cj.kind, kernels_ok)
            got, err = fast.execute(core, cj, job.send["act"])
            assert err == 0 and np.array_equal(got, want), (differ, kernels_ok)
        if not differ:
            assert_matches_reference(spec, x, f, b, low.assemble([want]))


@pytest.mark.parametrize("shape,s", [((10, 17, 96), 2), ((12, 12, 24), 1)])
def test_backend_model_lists_and_jobs_paths(shape, s):
    """backend=model on a rotated build: the command-list path (list compiler, DDR descriptors,
    memory-model Timeline) and the job-by-job path give the reference's output."""
    from dtpu.backends.base import Probes
    from dtpu.backends.model import ModelBackend
    from dtpu.backends.reference import ReferenceBackend
    from dtpu.hw.listcompiler import NodeIn

    spec = _dw_spec(*shape, s=s)
    x, f, b = make_data(spec, np.random.default_rng(7))
    ref = ReferenceBackend({})
    want, _ = ref.invoke(ref.prepare(spec, f, b), x, Probes())
    with _rot():
        be = ModelBackend({})
        assert be.cfg.DW_ROTATE == 1
        y, _ = be.invoke(be.prepare(spec, f, b), x, Probes())
        np.testing.assert_array_equal(y, want)
        prog = be.prepare_partitions([[NodeIn(spec, f, b)]])
        out = np.zeros(spec.output_shape, np.int8)
        be.invoke_partition(prog, 0, [x], {0: out}, Probes())
        np.testing.assert_array_equal(out, want)
        be.release_partitions(prog)
        be.close()


# -- the RTL with DW_ROTATE = 1, in process (its own Verilator build, cached; slow) ---------------

RTL_NODES = [((9, 16, 32), 3, 2, 1, DataMode.INT8),      # stride 2, GC 4: banked needs TAP_CYCLES 2
             ((7, 13, 96), 3, 2, 1, DataMode.UINT8),     # GC 6 (P 3) in 2 chunks, IW odd at stride 2
             ((8, 9, 24), 5, 1, 1, DataMode.INT16X8),    # 5x5, GC 6 of int16 groups
             ((10, 11, 40), 3, 3, 1, DataMode.INT8),     # stride 3, GC 5
             ((12, 12, 16), 3, 1, 2, DataMode.INT8)]     # dilation 2


def _rtl_node(shape, k, s, d, mode):
    h, w, c = shape
    return ConvSpec(OpKind.DEPTHWISE_CONV_2D, mode, (1, h, w, c), (1, k, k, c), stride=(s, s),
                    dilation=(d, d), padding=Padding.SAME,
                    input_q=Quant((0.02,), (0 if mode is DataMode.INT16X8 else 3,)),
                    filter_q=Quant((0.01,), (0 if mode is not DataMode.UINT8 else 120,)),
                    output_q=Quant((0.1,), (0 if mode is DataMode.INT16X8 else -2,)))


@pytest.mark.slow
@pytest.mark.parametrize("cols", [8])
def test_rtl_equals_the_golden_model(cols):
    """dtpu_axi built with DW_ROTATE = 1 (the rotated read network: per-bank rows, one rotator,
    column j on weight bank j) gives the golden model's words and cycles, and the reference."""
    from dtpu.rtl.build import SimConfig, build_native
    from dtpu.rtl.native import NativeTransport

    config = SimConfig(cols=cols, dw_rotate=1)
    cfg = config.hw_config()
    assert cfg.DW_ROTATE == 1
    info = build_native(config, progress=False)
    t = NativeTransport(cfg, info.product)
    try:
        for i, node in enumerate(RTL_NODES):
            spec = _rtl_node(*node)
            x, f, b = make_data(spec, np.random.default_rng(40 + i))
            low = lower(spec, f, b, cfg)
            jobs = low.jobs(x)
            model = ModelTransport(Core(cfg))
            run_jobs(model, low.load_jobs)
            want, want_c = run_jobs(model, jobs)
            run_jobs(t, low.load_jobs)
            got, got_c = run_jobs(t, jobs)
            assert all(np.array_equal(g, w) for g, w in zip(got, want)), node
            assert got_c.cycles == want_c.cycles, (node, got_c.cycles, want_c.cycles)
            assert_matches_reference(spec, x, f, b, low.assemble(got))
    finally:
        t.close()


@pytest.mark.slow
def test_rtl_command_lists_equal_the_golden_model():
    """backend=rtl on a rotated build (HwConfig DW_ROTATE=1 in force: the in-process dtpu_cl_top
    is built with DW_ROTATE=1): a partition of depthwise nodes as one command list gives the
    reference's output and, node by node, the golden model's cycles."""
    from dtpu.backends.base import Probes
    from dtpu.backends.reference import ReferenceBackend
    from dtpu.backends.rtl import RtlBackend
    from dtpu.hw.listcompiler import NodeIn

    nodes = []
    for i, node in enumerate(RTL_NODES):
        if node[-1] is DataMode.INT8:
            spec = _rtl_node(*node)
            nodes.append((spec, *make_data(spec, np.random.default_rng(60 + i))))
    ref = ReferenceBackend({})
    with _rot():
        be = RtlBackend({})
        try:
            assert be.target.native_build is not None and be.cfg.DW_ROTATE == 1
            prog = be.prepare_partitions([[NodeIn(s, f, b)] for s, _, f, b in nodes])
            for k, (spec, x, f, b) in enumerate(nodes):
                want, _ = ref.invoke(ref.prepare(spec, f, b), x, Probes())
                out = np.zeros(spec.output_shape, np.int8)
                counters = be.invoke_partition(prog, k, [x], {0: out}, Probes())
                np.testing.assert_array_equal(out, want)
                assert all(c.cycles == c.model_cycles for c in counters), \
                    [(c.cycles, c.model_cycles, c.cycle_note) for c in counters]
            be.release_partitions(prog)
        finally:
            be.close()
