"""Golden model + lowering against the TFLite-exact reference, and the model's cycle counts
against the schedules of docs/architecture.md (re-derived here independently)."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dtpu import reference
from dtpu.hw.config import HwConfig, ceil_div, get_config
from dtpu.hw.contract_schedules import dw_schedule
from dtpu.hw.core import Core, StreamStarved
from dtpu.driver import DtpuJobError, ModelTransport, run_job, run_jobs
from dtpu.hw.lower import Job, LowerError, dw_geometry, lower
from dtpu.pack import pack, unpack
from dtpu.precision import Precision
from dtpu.spec import Activation, ConvSpec, DataMode, OpKind, Padding, Quant

# ------------------------------------------------------------------------------- node generation


@st.composite
def nodes(draw, modes=tuple(DataMode), kinds=tuple(OpKind), max_hw=9, max_c=20):
    kind = draw(st.sampled_from(kinds))
    mode = draw(st.sampled_from(modes))
    n = draw(st.integers(1, 2))
    h, w = draw(st.integers(1, max_hw)), draw(st.integers(1, max_hw))
    c = draw(st.integers(1, max_c))
    if kind is OpKind.FULLY_CONNECTED:
        h = w = 1
        kh = kw = sh = sw = dh = dw = 1
        padding = Padding.VALID
    else:
        kh, kw = draw(st.integers(1, 4)), draw(st.integers(1, 4))
        sh, sw = draw(st.integers(1, 3)), draw(st.integers(1, 3))
        dh, dw = draw(st.integers(1, 2)), draw(st.integers(1, 2))
        padding = draw(st.sampled_from(list(Padding)))
        if padding is Padding.VALID and ((kh - 1) * dh + 1 > h or (kw - 1) * dw + 1 > w):
            padding = Padding.SAME
    mult = draw(st.integers(1, 3)) if kind is OpKind.DEPTHWISE_CONV_2D else 1
    oc = c * mult if kind is OpKind.DEPTHWISE_CONV_2D else draw(st.integers(1, max_c))
    fshape = ((1, kh, kw, oc) if kind is OpKind.DEPTHWISE_CONV_2D else
              (oc, c) if kind is OpKind.FULLY_CONNECTED else (oc, kh, kw, c))
    act = draw(st.sampled_from(list(Activation)))
    has_bias = draw(st.booleans())
    seed = draw(st.integers(0, 2**32 - 1))
    rng = np.random.default_rng(seed)
    q = {}
    if mode.is_quantized:
        zx = 0 if mode is DataMode.INT16X8 else int(rng.integers(-30, 30)) + (128 if mode is DataMode.UINT8 else 0)
        zo = 0 if mode is DataMode.INT16X8 else int(rng.integers(-30, 30)) + (128 if mode is DataMode.UINT8 else 0)
        per_channel = mode is not DataMode.UINT8 and draw(st.booleans())
        fs = tuple(rng.uniform(0.002, 0.03, oc)) if per_channel else (float(rng.uniform(0.002, 0.03)),)
        zw = int(rng.integers(90, 160)) if mode is DataMode.UINT8 else 0
        q = dict(input_q=Quant((float(rng.uniform(0.005, 0.05)),), (zx,)),
                 filter_q=Quant(fs, (zw,) * len(fs)),
                 output_q=Quant((float(rng.uniform(0.02, 0.3)),), (zo,)))
    spec = ConvSpec(kind, mode, (n, h, w, c), fshape, stride=(sh, sw), dilation=(dh, dw),
                    padding=padding, activation=act, depth_multiplier=mult, has_bias=has_bias, **q)
    x, f, b = make_data(spec, rng, int64_bias=draw(st.booleans()))
    return spec, x, f, b


def make_data(spec: ConvSpec, rng, int64_bias=True):
    adt, wdt = reference.io_dtypes(spec)
    oc = spec.out_channels
    if adt.kind == "f":
        x = rng.standard_normal(spec.input_shape).astype(np.float32)
        f = (rng.standard_normal(spec.filter_shape) * 0.5).astype(np.float32)
        b = rng.standard_normal(oc).astype(np.float32)
    else:
        ai, wi = np.iinfo(adt), np.iinfo(wdt)
        x = rng.integers(ai.min, int(ai.max) + 1, spec.input_shape).astype(adt)
        f = rng.integers(max(int(wi.min), -127), int(wi.max) + 1, spec.filter_shape).astype(wdt)
        bdt = np.int64 if spec.mode is DataMode.INT16X8 and int64_bias else np.int32
        b = rng.integers(-20000, 20000, oc).astype(bdt)
    return x, f, (b if spec.has_bias else None)


def run_model(spec, x, f, b, cfg=None, transport=None, **kw):
    cfg = cfg or get_config()
    t = transport or ModelTransport(Core(cfg))
    low = lower(spec, f, b, cfg, **kw)
    run_jobs(t, low.load_jobs)
    res, counters = run_jobs(t, low.jobs(x))
    return low.assemble(res), counters, low


def assert_matches_reference(spec, x, f, b, y):
    ref = reference.run(spec, x, f, b)
    assert y.dtype == ref.dtype and y.shape == ref.shape
    if spec.mode is DataMode.FLOAT32:
        np.testing.assert_allclose(y, ref, rtol=2e-5, atol=2e-5 * float(np.abs(ref).max(initial=1)))
    else:
        mism = np.flatnonzero(y.reshape(-1) != ref.reshape(-1))
        assert mism.size == 0, (f"{mism.size} mismatches, first at {mism[0]}: model "
                                f"{y.reshape(-1)[mism[0]]} vs reference {ref.reshape(-1)[mism[0]]}")


# ------------------------------------------------------------------------------- bit exactness

PROPS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@PROPS
@given(nodes(), st.sampled_from([8, 4, 16]))
def test_lower_and_model_equal_reference(node, cols):
    spec, x, f, b = node
    cfg = get_config() if cols == 8 else HwConfig(COLS=cols)
    y, counters, low = run_model(spec, x, f, b, cfg)
    assert_matches_reference(spec, x, f, b, y)
    assert counters.stall_cycles == 0
    assert counters.cycles > 0


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(nodes(modes=(DataMode.INT8, DataMode.UINT8, DataMode.INT16X8), max_c=24))
def test_paging_and_k_split_with_tiny_memories(node):
    """Weights that do not fit are paged (or split along K into raw accumulators): same result."""
    spec, x, f, b = node
    cfg = HwConfig(LOG_WEIGHT_WORDS=5, LOG_PARAM_ENTRIES=3, LOG_ACT_WORDS=7)
    try:
        y, _, low = run_model(spec, x, f, b, cfg)
    except LowerError as e:  # a depthwise row that cannot fit 128 words is refused, not miscomputed
        assert spec.kind is OpKind.DEPTHWISE_CONV_2D, e
        return
    assert_matches_reference(spec, x, f, b, y)


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(nodes(modes=(DataMode.INT8, DataMode.UINT8, DataMode.INT16X8), max_c=12),
       st.sampled_from(["int16", "int32", "int64", "uint32"]))
def test_forced_wider_precisions(node, precision):
    spec, x, f, b = node
    if spec.mode is DataMode.INT16X8 and precision in ("int16", "uint32"):
        precision = "int64"
    if spec.mode is DataMode.INT8 and precision == "uint32":  # unsigned lanes cannot hold int8
        precision = "int32"
    y, _, low = run_model(spec, x, f, b, precision=precision)
    assert low.precision.bits > 8 or spec.mode is DataMode.INT16X8
    assert_matches_reference(spec, x, f, b, y)


def test_k_split_path_is_taken_and_exact():
    rng = np.random.default_rng(1)
    spec = ConvSpec(OpKind.CONV_2D, DataMode.INT8, (1, 5, 5, 40), (12, 3, 3, 40), padding=Padding.SAME,
                    input_q=Quant((0.02,), (3,)), filter_q=Quant((0.01,), (0,)), output_q=Quant((0.2,), (-4,)))
    x, f, b = make_data(spec, rng)
    cfg = HwConfig(LOG_WEIGHT_WORDS=6, LOG_ACT_WORDS=5)  # K=360 -> 45 words > 32-word buffer
    y, _, low = run_model(spec, x, f, b, cfg)
    assert not low.resident and any("raw" in j.label for j in low.jobs(x))
    assert_matches_reference(spec, x, f, b, y)


# ------------------------------------------------------------------------------- cycles


def _gemm_formula(cfg, m, kw, nt, wps):
    # docs/architecture.md: T = CFG + (M*NT - 1)*max(KW, W) + KW + LAT_MXU + LAT_REDUCE + LAT_POST + W
    return (cfg.CFG_CYCLES + (m * nt - 1) * max(kw, wps) + kw + cfg.LAT_MXU + cfg.LAT_REDUCE
            + cfg.LAT_POST + wps)


def _dw_cycle_sim(cfg, g, wpi):
    """Cycle-by-cycle loader/computer simulation of the DWCONV row schedule (test-only)."""
    cols = cfg.COLS
    step_issue = g.kh * g.kw * g.tap_cycles
    period = max(step_issue, cols * wpi)
    spr = ceil_div(g.ow * g.gc, cols)
    row_time = spr * period
    span = (g.kh - 1) * g.dy
    n_in, n_out = g.nchunk * g.ih, g.nchunk * g.oh

    def rows_of(o):
        c, y = divmod(o, g.oh)
        first = y * g.sy - g.pt
        lo, hi = min(max(first, 0), g.ih - 1), min(max(first + span, 0), g.ih - 1)
        return c * g.ih + lo, c * g.ih + hi

    users = {r: [o for o in range(n_out) if rows_of(o)[0] <= r <= rows_of(o)[1]] for r in range(n_in)}
    load_end, released = {}, {}
    r, written = 0, 0
    o, busy_until, started = 0, cfg.CFG_CYCLES + cfg.DW_SETUP, False
    t = cfg.CFG_CYCLES + cfg.DW_SETUP
    end_of = {}
    while o < n_out or r < n_in:
        # compute engine: row end releases, then maybe start the next row at cycle t
        if started and t == busy_until:
            for rr, us in users.items():
                if us and max(us) == o - 1:
                    released[rr] = t
            started = False
        if not started and o < n_out and t >= busy_until and load_end.get(rows_of(o)[1], 1 << 60) <= t:
            busy_until = t + row_time
            end_of[o] = busy_until
            started, o = True, o + 1
        # loader: one word per cycle into a free slot
        if r < n_in and (r < g.lb_rows or released.get(r - g.lb_rows, 1 << 60) <= t):
            written += 1
            if written == g.row_words:
                load_end[r] = t + 1
                if not users[r]:
                    released[r] = t + 1
                r, written = r + 1, 0
        t += 1
        assert t < 10**7
    last_issue = end_of[n_out - 1] - period
    items_last = g.ow * g.gc - (spr - 1) * cols
    done = last_issue + step_issue + cfg.LAT_MXU + cfg.LAT_POST + items_last * wpi
    return max(done, load_end[n_in - 1])


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(nodes(kinds=(OpKind.CONV_2D, OpKind.FULLY_CONNECTED, OpKind.DEPTHWISE_CONV_2D)))
def test_cycles_follow_the_documented_schedule(node):
    spec, x, f, b = node
    cfg = get_config()
    core = Core(cfg)
    t = ModelTransport(core)
    low = lower(spec, f, b, cfg)
    run_jobs(t, low.load_jobs)
    for rec in core.jobs:
        assert rec.cycles == cfg.CFG_CYCLES + rec.words_in["wgt"] + cfg.LOAD_LATENCY
    core.jobs.clear()
    jobs = low.jobs(x)
    _, counters = run_jobs(t, jobs)
    lanes_out = {"int8": 8, "uint8": 8, "int16": 4, "fp32": 2}[low.precision.value]
    if low.dataflow == "gemm":
        (job,) = jobs
        regs = dict(job.regs)
        expected = _gemm_formula(cfg, regs["GEMM_M"], regs["GEMM_KW"], regs["GEMM_NT"],
                                 ceil_div(cfg.COLS, lanes_out))
        assert counters.cycles == expected
    else:
        g = dw_geometry(spec, cfg, low.precision)
        wpi = ceil_div(low.precision.lanes, lanes_out)
        per_image = _dw_cycle_sim(cfg, g, wpi)
        assert per_image == dw_schedule(cfg, g, wpi).cycles
        assert counters.cycles == spec.input_shape[0] * per_image
    assert counters.words_in["act"] == sum(j.send["act"].size for j in jobs)
    assert counters.words_out["res"] == sum(j.recv for j in jobs)


def test_depthwise_overlap_reaches_the_compute_bound():
    """Stride-1 3x3 on a wide plane: loading row i+1 hides under computing row i (the
    sequencer's fixed setup, DW_SETUP cycles before the first word, is no part of the overlap)."""
    spec = ConvSpec(OpKind.DEPTHWISE_CONV_2D, DataMode.INT8, (1, 48, 48, 8), (1, 3, 3, 8),
                    padding=Padding.SAME, input_q=Quant((0.02,), (0,)), filter_q=Quant((0.01,), (0,)),
                    output_q=Quant((0.1,), (0,)))
    cfg = get_config()
    g = dw_geometry(spec, cfg, Precision.INT8)
    cycles = dw_schedule(cfg, g, 1).cycles - cfg.DW_SETUP
    compute_bound = 48 * 48 * 9 * 8 // (cfg.ROWS * cfg.COLS)
    assert compute_bound <= cycles < compute_bound * 1.06


# ------------------------------------------------------------------------------- float modes


def _float_node(kind, rng):
    if kind is OpKind.DEPTHWISE_CONV_2D:
        spec = ConvSpec(kind, DataMode.FLOAT32, (1, 9, 9, 24), (1, 3, 3, 24), padding=Padding.SAME)
    else:
        spec = ConvSpec(kind, DataMode.FLOAT32, (1, 9, 9, 24), (16, 3, 3, 24), padding=Padding.SAME)
    return (spec, *make_data(spec, rng))


@pytest.mark.parametrize("kind", [OpKind.CONV_2D, OpKind.DEPTHWISE_CONV_2D])
def test_fp32_error_is_summation_order_only(kind):
    rng = np.random.default_rng(7)
    spec, x, f, b = _float_node(kind, rng)
    y, _, _ = run_model(spec, x, f, b)
    exact = reference.run(spec, x, f, b).astype(np.float64)
    # |fp32 sum - exact| <= K * 2^-24 * sum|x*w| (+ bias rounding): recompute sum|x*w| in float64
    mag = reference.accumulate(spec.__class__(**{**spec.__dict__}), np.abs(x), np.abs(f))
    k = 9 * (24 if kind is OpKind.CONV_2D else 1)
    assert np.all(np.abs(y - exact) <= (k + 2) * 2.0**-24 * (mag + np.abs(b)) + 1e-30)


@pytest.mark.parametrize("kind", [OpKind.CONV_2D, OpKind.DEPTHWISE_CONV_2D])
def test_bf16_error_bound(kind):
    """bf16 rounds x and w to 8 significant bits (relative error <= 2^-8 each), multiplies exactly
    and accumulates in fp32: |y_bf16 - y| <= (2^-7 + 2^-16 + (K+2)*2^-24) * sum|x*w| + 2^-24 |b|."""
    rng = np.random.default_rng(11)
    spec, x, f, b = _float_node(kind, rng)
    y, _, low = run_model(spec, x, f, b, precision="bf16")
    assert low.precision is Precision.BF16
    exact = reference.run(spec, x, f, b).astype(np.float64)
    mag = reference.accumulate(spec, np.abs(x), np.abs(f))
    k = 9 * (24 if kind is OpKind.CONV_2D else 1)
    bound = (2.0**-7 + 2.0**-16 + (k + 2) * 2.0**-24) * mag + 2.0**-24 * np.abs(b)
    err = np.abs(y - exact)
    assert np.all(err <= bound + 1e-30)
    assert err.max() > 0  # bf16 really is coarser than fp32 here
    rel = float(np.median(err / np.maximum(mag, 1e-30)))
    assert rel < 2.0**-7


# ------------------------------------------------------------------------------- register protocol


def _gemm_raw(prec: Precision, a: np.ndarray, w: np.ndarray, cfg=None):
    """Drive a RAW GEMM by hand: a (M, K), w (N, K) as `prec` values."""
    cfg = cfg or get_config()
    t = ModelTransport(Core(cfg))
    L = prec.lanes
    m, k = a.shape
    n = w.shape[0]
    kw, nt = ceil_div(k, L), ceil_div(n, cfg.COLS)
    ap = np.zeros((m, kw * L), a.dtype)
    ap[:, :k] = a
    wp = np.zeros((nt * cfg.COLS, kw * L), w.dtype)
    wp[:n, :k] = w
    wwords = pack(wp.reshape(nt, cfg.COLS, kw, L).transpose(0, 2, 1, 3).copy(), prec)
    run_job(t, Job("load", [("LOAD_ADDR", 0), ("LOAD_COUNT", wwords.size),
                            ("JOB", cfg.encode("JOB", OPCODE=cfg.OPCODE_LOAD_WGT))], {"wgt": wwords}))
    job = Job("raw", [("GEMM_M", m), ("GEMM_KW", kw), ("GEMM_NT", nt), ("WGT_BASE", 0),
                      ("JOB", cfg.encode("JOB", OPCODE=cfg.OPCODE_GEMM, PREC=cfg.prec_code(prec),
                                         OUT_MODE=cfg.OUT_MODE_RAW))],
              {"act": pack(ap, prec)}, m * nt * cfg.COLS)
    res = run_job(t, job)
    return unpack(res, Precision.INT64, res.size).reshape(m, nt * cfg.COLS)[:, :n]


@pytest.mark.parametrize("prec", [Precision.INT32, Precision.INT64])
def test_wide_integer_precisions_raw(prec):
    rng = np.random.default_rng(3)
    lim = 2**30 if prec is Precision.INT32 else 2**28  # sums reach 2^62: exact path
    a = rng.integers(-lim, lim, (5, 7)).astype(prec.value_dtype)
    w = rng.integers(-lim, lim, (10, 7)).astype(prec.value_dtype)
    got = _gemm_raw(prec, a, w)
    exact = a.astype(object) @ w.astype(object).T
    assert np.array_equal(got.astype(object), exact)


def test_int64_overflow_sets_the_flag():
    a = np.full((1, 2), 2**40, np.int64)
    with pytest.raises(DtpuJobError, match="OVERFLOW"):
        _gemm_raw(Precision.INT64, a, a.copy())


def test_int64_depthwise_overflow_is_per_product():
    """A product that stays inside int64 is no error even when the job's largest activation
    times its largest weight would not be (the RTL flags per product, prod_ovf in dtpu_smac)."""
    cfg = get_config()
    q = Quant((0.05,), (0,))
    spec = ConvSpec(OpKind.DEPTHWISE_CONV_2D, DataMode.INT8, (1, 1, 1, 2), (1, 1, 1, 2), input_q=q,
                    filter_q=Quant((0.01, 0.01), (0, 0)), output_q=q)
    low = lower(spec, np.ones((1, 1, 1, 2), np.int8), None, cfg, wgt_base=0, param_base=0,
                precision="int64")
    (job,) = [j for j in low.jobs(np.zeros((1, 1, 1, 2), np.int8)) if j.recv]

    def run(x, w):
        t = ModelTransport(Core(cfg))
        t.core.wmem[:2] = np.array(w, np.int64).view(np.uint64)
        act = np.array(x, np.int64).view(np.uint64)
        return unpack(run_job(t, Job("dw", job.regs, {"act": act}, job.recv)), Precision.INT64, 2)

    assert list(run([2**40, 1], [1, 2**40])) == [2**40, 2**40]
    assert list(run([-2**62, 3], [-1, 2**61])) == [2**62, 3 * 2**61]
    with pytest.raises(DtpuJobError, match="OVERFLOW"):
        run([2**40, 1], [2**40, 1])
    with pytest.raises(DtpuJobError, match="OVERFLOW"):
        run([-2**62, 1], [2, 1])  # -2^63: |product| > INT64_MAX, as the RTL's prod_big


def _core_with(**regs):
    cfg = get_config()
    core = Core(cfg)
    for name, value in regs.items():
        core.write_reg(name, value)
    return cfg, core


@pytest.mark.parametrize("regs,flag", [
    (dict(JOB=9), "BAD_OPCODE"),
    (dict(JOB=3 | (15 << 4)), "BAD_PRECISION"),
    (dict(JOB=3 | (5 << 4) | (0 << 8), GEMM_M=1, GEMM_KW=1, GEMM_NT=1), "BAD_MODE"),  # fp32 REQUANT
    (dict(JOB=3, GEMM_M=0, GEMM_KW=1, GEMM_NT=1), "BAD_DIMS"),
    (dict(JOB=3 | (1 << 8), GEMM_M=1, GEMM_KW=1 << 13, GEMM_NT=1), "ACT_CAPACITY"),
    (dict(JOB=3 | (1 << 8), GEMM_M=1, GEMM_KW=8, GEMM_NT=1, WGT_BASE=3), "WGT_RANGE"),
    (dict(JOB=1, LOAD_ADDR=(1 << 15) - 1, LOAD_COUNT=2), "WGT_RANGE"),
    (dict(JOB=2, LOAD_ADDR=0, LOAD_COUNT=3), "PARAM_RANGE"),
])
def test_bad_configurations_set_error_flags(regs, flag):
    cfg, core = _core_with(**regs)
    core.write_reg("CTRL", cfg.encode("CTRL", START=1))
    status = cfg.decode("STATUS", core.read_reg("STATUS"))
    assert status["DONE"] == 1 and status["ERROR"] == 1 and status["BUSY"] == 0
    assert core.read_reg("ERR") & getattr(cfg, f"ERR_{flag}")
    assert core.pop().size == 0
    core.write_reg("ERR", 0xFFFFFFFF)
    assert core.read_reg("ERR") == 0 and cfg.decode("STATUS", core.read_reg("STATUS"))["ERROR"] == 0


def test_disabled_precision_is_refused():
    with HwConfig(ENABLED=["int8", "uint8"]) as cfg:
        core = Core(cfg)
        core.write_reg("GEMM_M", 1), core.write_reg("GEMM_KW", 1), core.write_reg("GEMM_NT", 1)
        core.write_reg("JOB", cfg.encode("JOB", OPCODE=cfg.OPCODE_GEMM, PREC=cfg.PREC_FP32,
                                         OUT_MODE=cfg.OUT_MODE_FLOAT))
        core.write_reg("CTRL", 1)
        assert core.read_reg("ERR") == cfg.ERR_BAD_PRECISION
        spec = ConvSpec(OpKind.CONV_2D, DataMode.FLOAT32, (1, 2, 2, 3), (4, 1, 1, 3))
        with pytest.raises(LowerError, match="fp32 is not enabled"):
            lower(spec, np.zeros((4, 1, 1, 3), np.float32), None, cfg)


def test_bank_conflict_flag_at_stride_two():
    """The banked layout (DW_ROTATE = 0; the default rotated one has no bank conflicts)."""
    spec = ConvSpec(OpKind.DEPTHWISE_CONV_2D, DataMode.INT8, (1, 9, 16, 8), (1, 3, 3, 8), stride=(2, 2),
                    padding=Padding.SAME, input_q=Quant((0.02,), (0,)), filter_q=Quant((0.01,), (0,)),
                    output_q=Quant((0.1,), (0,)))
    cfg = HwConfig(DW_ROTATE=0)
    f = np.ones((1, 3, 3, 8), np.int8)
    low = lower(spec, f, None, cfg)
    job = low.jobs(np.zeros(spec.input_shape, np.int8))[0]
    ring = dict(job.regs)["DW_RING"]
    assert cfg.decode("DW_RING", ring)["TAP_CYCLES"] == 2  # the lowering avoids the conflict
    job.regs = [(n, v if n != "DW_RING" else cfg.encode("DW_RING", LB_ROWS=cfg.decode("DW_RING", v)["LB_ROWS"],
                                                          TAP_CYCLES=1)) for n, v in job.regs]
    t = ModelTransport(Core(cfg))
    run_jobs(t, low.load_jobs)
    with pytest.raises(DtpuJobError, match="BANK_CONFLICT"):
        run_job(t, job)


def test_tlast_checks_and_starvation():
    cfg, core = _core_with(LOAD_ADDR=0, LOAD_COUNT=4, JOB=1)
    core.write_reg("CTRL", 1)
    core.push("wgt", np.arange(2, dtype=np.uint64), last=False)
    with pytest.raises(StreamStarved, match="needs"):
        core.read_reg("STATUS")
    core.push("wgt", np.arange(2, dtype=np.uint64), last=False)  # 4 words, no tlast
    assert core.read_reg("ERR") & cfg.ERR_TLAST_MISSING
    cfg, core = _core_with(LOAD_ADDR=0, LOAD_COUNT=4, JOB=1)
    core.write_reg("CTRL", 1)
    core.push("wgt", np.arange(2, dtype=np.uint64), last=True)
    core.push("wgt", np.arange(2, dtype=np.uint64), last=True)
    assert core.read_reg("ERR") & cfg.ERR_TLAST_EARLY


def test_counters_and_soft_reset():
    rng = np.random.default_rng(5)
    spec = ConvSpec(OpKind.CONV_2D, DataMode.INT8, (1, 4, 4, 8), (8, 1, 1, 8),
                    input_q=Quant((0.02,), (1,)), filter_q=Quant((0.01,), (0,)), output_q=Quant((0.1,), (2,)))
    x, f, b = make_data(spec, rng)
    cfg = get_config()
    core = Core(cfg)
    y, counters, low = run_model(spec, x, f, b, cfg, transport=ModelTransport(core))
    assert core.read_reg("WORDS_ACT") == 16 and core.read_reg("WORDS_RES") == 16
    assert core.read_reg("WORDS_WGT") == 8 + 16
    lo = core.read_reg("CYCLES_LO")
    assert lo == core.cycles and core.read_reg("CYCLES_HI") == 0
    assert core.read_reg("JOB_CYCLES") == counters.cycles
    core.write_reg("CTRL", cfg.encode("CTRL", CLEAR_COUNTERS=1))
    assert core.read_reg("CYCLES_LO") == 0 and core.read_reg("WORDS_ACT") == 0
    core.write_reg("CTRL", cfg.encode("CTRL", SOFT_RESET=1))
    assert core.read_reg("STATUS") == 0 and core.read_reg("ID") == cfg.ID


def test_stride_two_depthwise_at_cols_16_picks_a_chunking_without_tap_cycles_16():
    """COLS=16: 15 groups per chunk at stride 2 would need TAP_CYCLES=16, which the 4-bit
    DW_RING field cannot hold; the lowering takes 5 groups per chunk instead (found by the
    property test above). The banked layout (DW_ROTATE = 0): the rotated one needs no
    TAP_CYCLES > 1."""
    spec = ConvSpec(OpKind.DEPTHWISE_CONV_2D, DataMode.INT16X8, (1, 1, 3, 19), (1, 1, 1, 57),
                    stride=(1, 2), padding=Padding.SAME, depth_multiplier=3,
                    input_q=Quant((0.017,), (0,)), filter_q=Quant((0.0198,), (0,)),
                    output_q=Quant((0.031,), (0,)))
    x, f, b = make_data(spec, np.random.default_rng(4))
    cfg = HwConfig(COLS=16, DW_ROTATE=0)
    y, counters, low = run_model(spec, x, f, b, cfg)
    assert_matches_reference(spec, x, f, b, y)
    g = dw_geometry(spec, cfg, Precision.INT16)
    assert g.tap_cycles <= 15 and g.gc < 15
