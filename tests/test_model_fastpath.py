"""The golden model's compiled fast path (dtpu.hw.fast, dtpu.driver.run_jobs_compiled) against
the register/stream protocol path: identical result words, counters and errors, job by job, on
random nodes (every mode, precision, array width, tiny memories for paging and K splits) and on
every convolution of the model zoo."""
from __future__ import annotations

from contextlib import contextmanager

import numpy as np
import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from dtpu import tflite_model
from dtpu.backends.base import Probes
from dtpu.backends.model import ModelBackend
from dtpu.driver import DtpuJobError, ModelTransport, read_counters, run_jobs
from dtpu.driver.model_transport import run_jobs_compiled
from dtpu.hw import fast, kernels
from dtpu.hw.config import HwConfig, get_config
from dtpu.hw.core import Core
from dtpu.hw.lower import Job, LowerError, lower
from dtpu.spec import DataMode, OpKind
from tests.delegate_util import CLAIMED_MODES, zoo_entries
from tests.test_hw_model import make_data, nodes


def _pair(cfg):
    return ModelTransport(Core(cfg)), ModelTransport(Core(cfg))


@contextmanager
def _kernels(on: bool):
    """Compile jobs with (True) or without (False) the C kernels of dtpu.hw.kernels."""
    old = fast.USE_KERNELS
    fast.USE_KERNELS = on
    try:
        yield
    finally:
        fast.USE_KERNELS = old


#: the C kernels could be built here (else both compiled paths are the numpy ones)
KERNELS = kernels.get() is not None


def _same_run(spec, x, f, b, cfg, **kw):
    """Lower once, run load + compute jobs through the protocol and through the compiled path,
    with the C kernels and with the numpy datapaths, on triplet cores; compare."""
    try:
        low = lower(spec, f, b, cfg, **kw)
    except LowerError:
        return None
    proto, quick = _pair(cfg)
    plain = ModelTransport(Core(cfg))
    cache: dict = {}
    pcache: dict = {}
    r0, c0 = run_jobs(proto, low.load_jobs)
    with _kernels(True):
        r1, c1 = run_jobs_compiled(quick, low.load_jobs, cache)
    with _kernels(False):
        r2, c2 = run_jobs_compiled(plain, low.load_jobs, pcache)
    assert c0 == c1 == c2 and len(r0) == len(r1) == len(r2) == 0
    kinds = set()
    for _ in range(2):  # the second round runs the cached compiled jobs
        jobs = low.jobs(x)
        r0, c0 = run_jobs(proto, jobs)
        with _kernels(True):
            r1, c1 = run_jobs_compiled(quick, jobs, cache)
        with _kernels(False):
            r2, c2 = run_jobs_compiled(plain, jobs, pcache)
        assert c0 == c1 == c2, (c0, c1, c2)
        assert len(r0) == len(r1) == len(r2)
        for a, b_, c_ in zip(r0, r1, r2):
            assert a.dtype == b_.dtype == c_.dtype
            assert np.array_equal(a, b_) and np.array_equal(a, c_)
        assert read_counters(proto) == read_counters(quick) == read_counters(plain)
        assert proto.core.regs == quick.core.regs == plain.core.regs
        kinds |= {v.kind for v in (*cache.values(), *pcache.values())
                  if v.kind == "protocol" or v.opcode in ("GEMM", "DWCONV")}
    y = low.assemble(r1)
    try:
        for kind in sorted(kinds):
            event(f"{low.dataflow} {kind}")
    except Exception:  # not inside a hypothesis test
        pass
    return y, kinds, pcache   # the numpy datapaths: f32 or not


PROPS = settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@PROPS
@given(nodes(), st.sampled_from([8, 4, 16, 2]))
def test_compiled_jobs_equal_the_protocol(node, cols):
    spec, x, f, b = node
    cfg = get_config() if cols == 8 else HwConfig(COLS=cols)
    _same_run(spec, x, f, b, cfg)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(nodes(kinds=(OpKind.DEPTHWISE_CONV_2D,), max_c=40), st.sampled_from([8, 4, 16]))
def test_compiled_depthwise_jobs_equal_the_protocol(node, cols):
    spec, x, f, b = node
    _same_run(spec, x, f, b, get_config() if cols == 8 else HwConfig(COLS=cols))


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(nodes(modes=(DataMode.INT8, DataMode.UINT8, DataMode.INT16X8), max_c=24))
def test_compiled_jobs_with_paging_and_k_split(node):
    spec, x, f, b = node
    _same_run(spec, x, f, b, HwConfig(LOG_WEIGHT_WORDS=5, LOG_PARAM_ENTRIES=3, LOG_ACT_WORDS=7))


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(nodes(modes=(DataMode.INT8, DataMode.UINT8, DataMode.INT16X8), max_c=12),
       st.sampled_from(["int16", "int32", "int64"]))
def test_compiled_jobs_with_wider_precisions(node, precision):
    spec, x, f, b = node
    if spec.mode is DataMode.INT16X8 and precision == "int16":
        precision = "int64"
    _same_run(spec, x, f, b, get_config(), precision=precision)


def _with_riders(jobs, cfg, rng):
    """Every compute job also carries a prefetch of random words to a random place that avoids
    its own weights (registers as a planner builds them; the same list objects every round)."""
    from dtpu.hw.lower import with_prefetch
    out = []
    for job in jobs:
        r = dict(job.regs)
        if "GEMM_M" not in r and "DW_IN" not in r:
            out.append(job)
            continue
        n = int(rng.integers(1, 200))
        lo = r["WGT_BASE"]
        hi = lo + (r["GEMM_NT"] * r["GEMM_KW"] * cfg.COLS if "GEMM_M" in r else 0)
        if "DW_IN" in r:
            k = cfg.decode("DW_KERNEL", r["DW_KERNEL"])
            g = cfg.decode("DW_GROUPS", r["DW_GROUPS"])
            # the build's layout decides the job's weight words (the rotated one: per column)
            from types import SimpleNamespace

            from dtpu.hw.dw_format import dw_weight_words
            hi = lo + dw_weight_words(cfg, SimpleNamespace(kh=k["KH"], kw=k["KW"], gc=g["GC"],
                                                           nchunk=g["NCHUNK"]))
        addr = hi if hi + n <= cfg.WEIGHT_WORDS else max(0, lo - n)
        if addr + n > lo and addr < hi:
            out.append(job)
            continue
        words = rng.integers(0, 1 << 63, n, dtype=np.uint64)
        out.append(Job(job.label, with_prefetch(job.regs, None, addr, n),
                       {**job.send, "wgt": words}, job.recv, job.macs))
    return out


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(nodes(modes=(DataMode.INT8, DataMode.UINT8, DataMode.INT16X8, DataMode.FLOAT32), max_c=24),
       st.integers(0, 2**32 - 1))
def test_compiled_prefetch_jobs_equal_the_protocol(node, seed):
    """Compute jobs carrying prefetch words (contract 1.2): same result words, counters,
    registers and weight memory through both paths; the prefetches do not change the results."""
    spec, x, f, b = node
    cfg = get_config()
    try:
        low = lower(spec, f, b, cfg)
    except LowerError:
        return
    proto, quick = _pair(cfg)
    cache: dict = {}
    run_jobs(proto, low.load_jobs), run_jobs_compiled(quick, low.load_jobs, cache)
    plain = low.jobs(x)
    ref = run_jobs(ModelTransport(Core(cfg)), low.load_jobs + plain)[0]
    jobs = _with_riders(plain, cfg, np.random.default_rng(seed))
    for _ in range(2):
        r0, c0 = run_jobs(proto, jobs)
        r1, c1 = run_jobs_compiled(quick, jobs, cache)
        assert c0 == c1
        assert all(a.dtype == b_.dtype and np.array_equal(a, b_) for a, b_ in zip(r0, r1))
        assert all(np.array_equal(a, b_) for a, b_ in zip(r0, ref))
        assert read_counters(proto) == read_counters(quick)
        assert proto.core.regs == quick.core.regs
        assert np.array_equal(proto.core.wmem, quick.core.wmem)
    carried = sum(j.send["wgt"].size for j in jobs if "act" in j.send and "wgt" in j.send)
    assert c1.words_in["wgt"] == carried + sum(j.send["wgt"].size for j in jobs if "act" not in j.send)


def _large_accumulators(rng):
    """int8 3x3x128 convolutions with full-range weights: too wide for the fused float path."""
    from dtpu.spec import ConvSpec, Padding, Quant
    spec = ConvSpec(OpKind.CONV_2D, DataMode.INT8, (1, 5, 5, 128), (16, 3, 3, 128),
                    padding=Padding.SAME, input_q=Quant((0.02,), (3,)),
                    filter_q=Quant(tuple(rng.uniform(0.002, 0.01, 16)), (0,) * 16),
                    output_q=Quant((0.5,), (-4,)))
    x, f, b = make_data(spec, rng)
    f[...] = np.where(rng.random(f.shape) < 0.5, -127, 127).astype(np.int8)
    return spec, x, f, b


def test_fused_and_generic_paths_are_both_taken():
    rng = np.random.default_rng(3)
    spec, x, f, b = _large_accumulators(rng)
    _, kinds, _ = _same_run(spec, x, f, b, get_config())
    # numpy: the generic datapath; C kernels: the exact int64 post unit
    assert kinds == {"generic"} | ({"kernel"} if KERNELS else set())
    from dtpu.spec import ConvSpec, Quant
    small = ConvSpec(OpKind.CONV_2D, DataMode.INT8, (1, 6, 6, 16), (24, 1, 1, 16),
                     input_q=Quant((0.02,), (-3,)), filter_q=Quant((0.01,), (0,)),
                     output_q=Quant((0.1,), (5,)))
    x, f, b = make_data(small, rng)
    _, kinds, cache = _same_run(small, x, f, b, get_config())
    assert kinds == {"fused"} | ({"kernel"} if KERNELS else set()) and not any(getattr(v, "f32", False) for v in cache.values())
    # K = 128 > F32_GEMM_K: accumulated in float32, scaled afterwards
    wide = ConvSpec(OpKind.CONV_2D, DataMode.INT8, (1, 5, 5, 128), (16, 1, 1, 128),
                    input_q=Quant((0.02,), (-3,)), filter_q=Quant((0.01,), (0,)),
                    output_q=Quant((0.1,), (5,)))
    x, f, b = make_data(wide, rng)
    f //= 4
    _, kinds, cache = _same_run(wide, x, f, b, get_config())
    assert kinds == {"fused"} | ({"kernel"} if KERNELS else set()) and any(getattr(v, "f32", False) for v in cache.values())


def test_config_errors_raise_like_the_protocol():
    cfg = get_config()
    bad = Job("bad dims", [("GEMM_M", 0), ("GEMM_KW", 1), ("GEMM_NT", 1), ("WGT_BASE", 0),
                           ("PARAM_BASE", 0), ("IN_OFFSET", 0), ("WGT_OFFSET", 0),
                           ("ACT_MIN", 0), ("ACT_MAX", 0),
                           ("JOB", cfg.encode("JOB", OPCODE=cfg.enums["OPCODE"]["GEMM"],
                                              PREC=cfg.prec_code("int8"), OUT_MODE=0))],
              {"act": np.zeros(1, np.uint64)}, 1)
    proto, quick = _pair(cfg)
    errors = []
    for t, runner in ((proto, run_jobs), (quick, run_jobs_compiled)):
        with pytest.raises(DtpuJobError) as info:
            runner(t, [bad])
        errors.append(info.value.err)
        assert not t.core.pending and t.core.cycles == 0  # reset afterwards, like the driver
    assert errors[0] == errors[1] == cfg.ERR_BAD_DIMS


def test_jobs_reading_unwritten_registers_use_the_protocol():
    cfg = get_config()
    partial = [("LOAD_COUNT", 2), ("JOB", cfg.encode("JOB", OPCODE=cfg.enums["OPCODE"]["LOAD_WGT"]))]
    core = Core(cfg)
    with pytest.raises(fast.Unsupported, match="LOAD_ADDR"):
        fast.compile_job(core, partial)
    t = ModelTransport(core)
    _, counters = run_jobs_compiled(t, [Job("load", partial, {"wgt": np.arange(2, dtype=np.uint64)})])
    assert counters.words_in["wgt"] == 2 and core.wmem[1] == 1


def test_loads_invalidate_compiled_jobs_of_the_region():
    rng = np.random.default_rng(5)
    from dtpu.spec import ConvSpec, Quant
    spec = ConvSpec(OpKind.CONV_2D, DataMode.INT8, (1, 4, 4, 8), (8, 1, 1, 8),
                    input_q=Quant((0.02,), (0,)), filter_q=Quant((0.01,), (0,)),
                    output_q=Quant((0.1,), (0,)))
    x, f1, b = make_data(spec, rng)
    _, f2, _ = make_data(spec, rng)
    cfg = get_config()
    t = ModelTransport(Core(cfg))
    cache: dict = {}
    low1, low2 = lower(spec, f1, b, cfg), lower(spec, f2, b, cfg)   # same region
    run_jobs_compiled(t, low1.load_jobs, cache)
    y1 = low1.assemble(run_jobs_compiled(t, low1.jobs(x), cache)[0])
    run_jobs_compiled(t, low2.load_jobs, cache)
    job = low1.jobs(x)[0]
    job2 = Job(job.label, job.regs, job.send, job.recv)
    y2 = low1.assemble(run_jobs_compiled(t, [job2], cache)[0])   # same registers, new weights
    ref = ModelTransport(Core(cfg))
    run_jobs(ref, low2.load_jobs)
    assert np.array_equal(y2, low1.assemble(run_jobs(ref, [job2])[0]))
    assert not np.array_equal(y1, y2)


# ------------------------------------------------------------------------------------------ zoo

ZOO = [e for e in zoo_entries() if e["mode"] in CLAIMED_MODES]


def _zoo_nodes(entry):
    from tests.models import zoo
    model = tflite_model.load(zoo.model_path(entry))
    for op in model.operators(*tflite_model.CONV_OPCODES):
        yield tflite_model.conv_spec(model.main, op)


def _counted(c):
    """A node's counters without the host's measured time (`host.us` is a timing, not a count:
    every counted field must still be equal)."""
    import dataclasses

    host = None if c.host is None else {k: v for k, v in c.host.items() if k != "us"}
    return dataclasses.replace(c, host=host)


@pytest.mark.skipif(not ZOO, reason="model zoo (tests/models/zoo) not present")
@pytest.mark.parametrize("entry", ZOO, ids=[e["name"] for e in ZOO])
def test_zoo_compiled_equals_protocol(entry):
    """Every zoo convolution: the job level (words, counters) and the backend level (tensor and
    the report's counters) agree between the fast path and the protocol path."""
    rng = np.random.default_rng(0)
    quick, slow = ModelBackend({}), ModelBackend({"fast": False})
    in_place = 0
    for spec, w, b in _zoo_nodes(entry):
        x = make_data(spec, rng)[0]
        _same_run(spec, x, w, b, get_config())
        try:
            h1, h2 = quick.prepare(spec, w, b), slow.prepare(spec, w, b)
        except LowerError:
            continue
        for _ in range(2):
            y1, c1 = quick.invoke(h1, x, Probes())
            y2, c2 = slow.invoke(h2, x, Probes())
            assert y1.dtype == y2.dtype and np.array_equal(y1, y2)
            assert _counted(c1) == _counted(c2)
            # written in place into the delegate's output buffer when the node allows it
            out = np.full(y2.shape, 7, y2.dtype)
            y3, c3 = quick.invoke_into(h1, x, Probes(), out)
            # against the protocol path's invoke in the same state: a node the residency
            # selection made resident late loads its weights in its first invoke only (the
            # autoencoder's last layer), so c2 may be that first invoke and c3 the steady state
            _y4, c4 = slow.invoke(h2, x, Probes())
            assert np.array_equal(np.asarray(y3).reshape(y2.shape), y2) and _counted(c3) == _counted(c4)
            in_place += y3 is out
            # the core behind each: same register file, same counters
            assert quick.core.regs == slow.core.regs
            assert read_counters(quick.transport) == read_counters(slow.transport)
    assert quick.power() == slow.power()
    if entry["name"] == "mobilenet_like__int8":
        assert in_place


def test_one_backend_from_several_threads():
    """Compiled jobs reuse scratch buffers: invokes of one backend are serialized."""
    import threading
    from dtpu.spec import ConvSpec, Padding, Quant
    rng = np.random.default_rng(7)
    spec = ConvSpec(OpKind.DEPTHWISE_CONV_2D, DataMode.INT8, (1, 12, 12, 16), (1, 3, 3, 16),
                    padding=Padding.SAME, input_q=Quant((0.02,), (-3,)),
                    filter_q=Quant(tuple(rng.uniform(0.005, 0.02, 16)), (0,) * 16),
                    output_q=Quant((0.1,), (5,)))
    _, f, b = make_data(spec, rng)
    xs = [make_data(spec, rng)[0] for _ in range(4)]
    ref = ModelBackend({"fast": False})
    h_ref = ref.prepare(spec, f, b)
    want = [ref.invoke(h_ref, x, Probes())[0].copy() for x in xs]
    quick = ModelBackend({})
    h = quick.prepare(spec, f, b)
    bad = []

    def work(i):
        for _ in range(60):
            y, _ = quick.invoke(h, xs[i], Probes())
            if not np.array_equal(y, want[i]):
                bad.append(i)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not bad


@pytest.mark.skipif(not KERNELS, reason="no C compiler: the kernels are not built")
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(nodes(kinds=(OpKind.CONV_2D,), modes=(DataMode.INT8, DataMode.UINT8, DataMode.INT16X8)))
def test_kernel_gemm_with_converted_weights_equals_the_protocol(node):
    """GEMM weights beyond KEEP_FLOAT_BYTES are kept as small integers and converted into the
    per-thread scratch at every run (forced here for every size)."""
    spec, x, f, b = node
    old = fast.KEEP_FLOAT_BYTES
    fast.KEEP_FLOAT_BYTES = 0
    try:
        _same_run(spec, x, f, b, get_config())
    finally:
        fast.KEEP_FLOAT_BYTES = old


@pytest.mark.parametrize("int_gemm_max_c", [fast.INT_GEMM_MAX_C, 64], ids=["int", "blas"])
def test_large_gemm_weights_are_converted_per_run(monkeypatch, int_gemm_max_c):
    """A 1x1 convolution 256 -> 384 (98 k weights, 384 KiB as float32) gives the protocol's
    words on the C integer GEMM (all 384 columns) and, were that limited to 64 columns, on
    BLAS: its kernel job then keeps int8 weights and converts them at every run."""
    from dtpu.spec import ConvSpec, Quant
    monkeypatch.setattr(fast, "INT_GEMM_MAX_C", int_gemm_max_c)
    rng = np.random.default_rng(5)
    spec = ConvSpec(OpKind.CONV_2D, DataMode.INT8, (1, 4, 4, 256), (384, 1, 1, 256),
                    input_q=Quant((0.02,), (-3,)), filter_q=Quant((0.002,), (0,)),
                    output_q=Quant((0.1,), (5,)))
    x, f, b = make_data(spec, rng)
    cfg = HwConfig(LOG_WEIGHT_WORDS=17)
    _same_run(spec, x, f, b, cfg)
    if KERNELS:
        low = lower(spec, f, b, cfg)
        t = ModelTransport(Core(cfg))
        cache: dict = {}
        run_jobs_compiled(t, low.load_jobs + low.jobs(x), cache)
        gemms = [v for v in cache.values() if getattr(v, "opcode", "") == "GEMM"]
        assert gemms and all(v.kind == "kernel" for v in gemms)
        if int_gemm_max_c >= 384:
            assert all(v.igemm is not None and v.C == 384 for v in gemms)
        else:
            assert all(v.igemm is None and v.convert and v.w.dtype == np.int8 for v in gemms)


@pytest.mark.parametrize("mode", [DataMode.INT8, DataMode.UINT8, DataMode.INT16X8])
def test_k_split_partial_sums_run_compiled_raw(mode):
    """A node whose K does not fit the activation memory is split into RAW GEMMs (partial sums
    that RES ACC adds up): they run as _RawGemm (weights decoded once, BLAS, the offset folded
    in) and give the protocol's words, counters and registers."""
    from dtpu.spec import ConvSpec, Quant
    rng = np.random.default_rng(int(mode is DataMode.UINT8) + 2 * int(mode is DataMode.INT16X8))
    zp = 0 if mode is DataMode.INT16X8 else (-3 if mode is DataMode.INT8 else 131)
    spec = ConvSpec(OpKind.CONV_2D, mode, (1, 7, 6, 40), (24, 3, 3, 40),
                    input_q=Quant((0.02,), (zp,)), filter_q=Quant((0.01,), (0,)),
                    output_q=Quant((0.1,), (0 if mode is DataMode.INT16X8 else 5,)),
                    padding="SAME")
    x, f, b = make_data(spec, rng)
    got = _same_run(spec, x, f, b, HwConfig(LOG_ACT_WORDS=4))
    assert got is not None, "the node did not lower"
    assert "raw" in got[1], got[1]
