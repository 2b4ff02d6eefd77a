"""The fast path's C kernels (dtpu.hw.kernels) against the golden model's numpy definitions:
the post unit on random and extreme accumulators and parameters (every variant the kernels
take, shifts past 63 bits, INT32_MIN multipliers, wrapping totals, empty and inverted clip
ranges), and depthwise accumulators on random geometries. The job-level comparison with the
register protocol is tests/test_model_fastpath.py."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from dtpu.hw import kernels
from dtpu.hw.config import get_config
from dtpu.hw.contract_schedules import DwGeometry
from dtpu.hw.core import Core
from dtpu.hw.units.post import signed32
from dtpu.precision import Precision

KERN = kernels.get()
pytestmark = pytest.mark.skipif(KERN is None, reason="no C compiler: the kernels are not built")

VARIANTS = {0: "RQ_VARIANT_SINGLE", 1: "RQ_VARIANT_DOUBLE", 2: "RQ_VARIANT_DOUBLE_UP"}
PRECS = (Precision.INT8, Precision.UINT8, Precision.INT16)


def _params(rng, n: int, extreme: bool):
    if extreme:
        bias = rng.choice([0, 1, -1, 2**31 - 1, -2**31, 2**40, -2**40, 2**62, -2**63], n)
        mult = rng.choice([0, 1, -1, 2**30, 2**31 - 1, -2**31, -2**30 - 7], n)
        shift = rng.choice([-128, -64, -63, -33, -32, -31, -1, 0, 1, 30, 31, 32, 63, 64, 127], n)
        zp = rng.choice([-32768, -128, 0, 127, 32767], n)
    else:
        bias = rng.integers(-2**20, 2**20, n)
        mult = rng.integers(2**30, 2**31, n)
        shift = rng.integers(-20, 3, n)
        zp = rng.integers(-128, 128, n)
    return tuple(np.asarray(p, np.int64) for p in (bias, mult, shift, zp))


@pytest.mark.parametrize("variant", sorted(VARIANTS))
@pytest.mark.parametrize("prec", PRECS, ids=lambda p: p.value)
@pytest.mark.parametrize("extreme", [False, True])
@pytest.mark.parametrize("acc_dtype", [np.float32, np.float64, np.int32])
def test_post_exact_equals_the_model(variant, prec, extreme, acc_dtype):
    cfg = get_config()
    core = Core(cfg)
    code = getattr(cfg, VARIANTS[variant])
    rng = np.random.default_rng(variant * 7 + extreme)
    for trial in range(6):
        c, rows, per = 16, 24, int(rng.choice([1, 3, 24]))
        blocks = -(-rows // per)
        params = _params(rng, blocks * c, extreme)
        lim = {np.float32: 2**24, np.float64: 2**53, np.int32: 2**31 - 1}[acc_dtype]
        span = int(rng.choice([2**8, 2**20, lim]))
        acc = rng.integers(-span, span, (rows, c)).astype(acc_dtype)
        act_min, act_max = (int(v) for v in rng.integers(-2**31, 2**31, 2))
        if trial % 2:
            act_min, act_max = -200, 200
        want = np.empty((rows, c), prec.value_dtype)
        werr = 0
        for b in range(blocks):
            sl = slice(b * per, (b + 1) * per)
            ps = tuple(p[b * c:(b + 1) * c] for p in params)
            y, e = core.post(acc[sl].astype(np.int64), prec, cfg.OUT_MODE_REQUANT, code, ps, 0,
                              act_min & 0xFFFFFFFF, act_max & 0xFFFFFFFF)
            want[sl] = y
            werr |= e
        got = np.empty_like(want)
        wrapped = KERN.post_exact(np.ascontiguousarray(acc), per, *params, variant,
                                  signed32(act_min & 0xFFFFFFFF), signed32(act_max & 0xFFFFFFFF),
                                  got)
        assert np.array_equal(got, want), (trial, np.argwhere(got != want)[:3])
        assert bool(wrapped) == bool(werr & cfg.ERR_WARN_WRAP32)


def test_post_fused_matches_numpy():
    """The fused map in C: v = acc*scale + offset, threshold, clip, floor (exact inputs)."""
    rng = np.random.default_rng(1)
    c, rows = 24, 40
    acc = rng.integers(-2**20, 2**20, (rows, c)).astype(np.float32)
    scale = rng.integers(1, 2**20, c) / 2.0**30
    offset = rng.integers(-2**40, 2**40, c) / 2.0**30
    thr = np.where(rng.random(c) < 0.5, -np.inf, rng.integers(-100, 100, c) + 0.5)
    delta = np.where(np.isinf(thr), 0.0, 2.0**-10)
    for lo, hi, dt in ((-128.0, 127.0, np.int8), (0.0, 255.0, np.uint8), (-5.0, 6.0, np.int16),
                       (10.0, -10.0, np.int8)):
        got = np.empty((rows, c), dt)
        KERN.post_fused(acc, rows, scale, offset, thr, delta, lo, hi, got)
        v = acc.astype(np.float64) * scale + offset
        v = np.where(v < thr, v - delta, v)
        want = np.floor(np.minimum(np.maximum(v, lo), hi)).astype(dt)
        assert np.array_equal(got, want)


@pytest.mark.parametrize("seed", range(16))
def test_dw_equals_the_model(seed):
    """Depthwise jobs on random geometries: with identity parameters (SINGLE, multiplier 1,
    shift 31, int16 lanes, small weights) the output is the accumulator itself; with random
    parameters it is the model's post unit on the model's accumulators."""
    rng = np.random.default_rng(seed)
    cfg = get_config()
    core = Core(cfg)
    prec = [Precision.INT8, Precision.UINT8][seed % 2]
    kh, kw = (int(v) for v in rng.integers(1, 6, 2))
    sy, sx, dy, dx = (int(v) for v in rng.integers(1, 4, 4))
    if seed % 4 < 2:
        sy = sx = 1
    ih, iw = (int(v) for v in rng.integers(1, 12, 2))
    pt, pl = int(rng.integers(0, (kh - 1) * dy + 1)), int(rng.integers(0, (kw - 1) * dx + 1))
    oh = max(1, (ih + pt - 1) // sy + 1 - int(rng.integers(0, 2)))
    ow = max(1, (iw + pl - 1) // sx + 1 - int(rng.integers(0, 2)))
    gc, nchunk = int(rng.integers(1, 4)), int(rng.integers(1, 4))
    g = DwGeometry(ih=ih, iw=iw, oh=oh, ow=ow, kh=kh, kw=kw, pt=pt, pl=pl, sy=sy, sx=sx, dy=dy,
                   dx=dx, gc=gc, nchunk=nchunk, lb_rows=0, tap_cycles=1)
    cl, n = gc * 8, nchunk * gc * 8
    info = np.iinfo(prec.value_dtype)
    x = rng.integers(info.min, int(info.max) + 1, (nchunk, ih, iw, cl)).astype(prec.value_dtype)
    in_off = int(rng.integers(-255, 256))
    # the model's definition: the padded operand plane, one strided slice per tap

    def model_acc(w):
        ph = max((oh - 1) * sy + (kh - 1) * dy + 1, pt + ih)
        pw = max((ow - 1) * sx + (kw - 1) * dx + 1, pl + iw)
        xp = np.zeros((nchunk, ph, pw, cl), np.int64)
        xp[:, pt:pt + ih, pl:pl + iw] = x.astype(np.int64) + in_off
        acc = np.zeros((nchunk, oh, ow, cl), np.int64)
        wc = w.astype(np.int64).reshape(kh * kw, nchunk, 1, 1, cl)
        for t in range(kh * kw):
            ky, kx = divmod(t, kw)
            acc += xp[:, ky * dy:ky * dy + (oh - 1) * sy + 1:sy,
                      kx * dx:kx * dx + (ow - 1) * sx + 1:sx] * wc[t]
        return acc

    small = rng.integers(-3, 4, (kh * kw, n)).astype(np.int32)
    got = np.empty((nchunk * oh * ow, cl), np.int16)
    ident = dict(bias=np.zeros(n, np.int64), mult=np.ones(n, np.int64),
                 shift=np.full(n, 31, np.int64), zp=np.zeros(n, np.int64), variant=0,
                 act_lo=-2**31, act_hi=2**31 - 1)
    assert KERN.dw(x, small, g, in_off, got, exact=ident) == 0
    assert np.array_equal(got.reshape(nchunk, oh, ow, cl), model_acc(small))

    w = rng.integers(-255, 256, (kh * kw, n)).astype(np.int32)
    params = _params(rng, n, extreme=bool(seed % 3 == 0))
    variant = seed % 3
    acc = model_acc(w)
    want, err = core.post(acc, prec, cfg.OUT_MODE_REQUANT, getattr(cfg, VARIANTS[variant]),
                           tuple(p.reshape(nchunk, 1, 1, cl) for p in params), 0,
                           (-100) & 0xFFFFFFFF, 100)
    got = np.empty((nchunk * oh * ow, cl), prec.value_dtype)
    wrapped = KERN.dw(x, w, g, in_off, got, exact=dict(
        bias=params[0], mult=params[1], shift=params[2], zp=params[3], variant=variant,
        act_lo=-100, act_hi=100))
    assert np.array_equal(got.reshape(want.shape), want)
    assert bool(wrapped) == bool(err & cfg.ERR_WARN_WRAP32)


def test_without_a_compiler_the_fast_path_stays_with_numpy(monkeypatch, tmp_path):
    """A failing build (here: a compiler that fails) leaves get() None with a warning, once;
    compiled jobs then use the numpy datapaths. The lookup is a fresh one
    (kernels.fresh_lookup): the process's own kernels are back after it."""
    monkeypatch.setenv("CC", "false")
    monkeypatch.setenv("DTPU_BUILD_DIR", str(tmp_path))
    monkeypatch.setattr(kernels, "CFLAGS", kernels.CFLAGS + ["-DDTPU_TEST_FAILING_BUILD"])
    from dtpu.hw import fast
    from dtpu.hw.lower import lower
    from dtpu.spec import ConvSpec, DataMode, OpKind, Quant
    with kernels.fresh_lookup():
        assert kernels.get() is None
        assert kernels.get() is None and list(tmp_path.iterdir()) == []
        spec = ConvSpec(OpKind.CONV_2D, DataMode.INT8, (1, 6, 6, 16), (24, 1, 1, 16),
                        input_q=Quant((0.02,), (-3,)), filter_q=Quant((0.01,), (0,)),
                        output_q=Quant((0.1,), (5,)))
        rng = np.random.default_rng(0)
        f = rng.integers(-127, 128, (24, 1, 1, 16)).astype(np.int8)
        low = lower(spec, f, rng.integers(-100, 100, 24).astype(np.int32), get_config())
        core = Core(get_config())
        from dtpu.driver import ModelTransport, run_jobs
        run_jobs(ModelTransport(core), low.load_jobs)
        x = rng.integers(-128, 128, spec.input_shape).astype(np.int8)
        job = next(j for j in low.jobs(x) if "GEMM_M" in dict(j.regs))
        assert fast.compile_job(core, job.regs).kind == "fused"
    assert kernels.get() is KERN


def test_the_delegate_build_builds_the_kernels_so_the_first_invoke_compiles_nothing(tmp_path):
    """A fresh clone's first invoke took ~2 s compiling kernels.c: `dtpu build` (and the build
    dtpu.delegate_path() starts) builds them with dtpu.so; the first invoke then builds nothing."""
    import os
    import subprocess
    import sys

    root = Path(__file__).resolve().parents[1]
    env = dict(os.environ, DTPU_BUILD_DIR=str(tmp_path), PYTHONPATH=str(root / "pylib"))
    env.pop("DTPU_KERNELS", None)
    code = ("import logging, sys, numpy as np, dtpu\n"
            "path = dtpu.delegate_path()\n"          # a fresh build dir: builds dtpu.so
            "print('built:', sorted(p.name for p in __import__('pathlib').Path(sys.argv[1]).iterdir()))\n"
            "logging.basicConfig(level=logging.INFO, format='LOG %(name)s %(message)s')\n"
            "it = dtpu.make_interpreter(sys.argv[2], {'backend': 'model'})\n"
            "it.allocate_tensors()\n"
            "d = it.get_input_details()[0]\n"
            "it.set_tensor(d['index'], np.zeros(d['shape'], d['dtype']))\n"
            "it.invoke()\n")
    model = root / "tests/models/zoo/mobilenet_like__int8.tflite"
    proc = subprocess.run([sys.executable, "-c", code, str(tmp_path), str(model)], env=env,
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr
    built = next(line for line in proc.stdout.splitlines() if line.startswith("built:"))
    assert "'dtpu.so'" in built and "dtpu_kernels-" in built, built
    assert not [line for line in proc.stderr.splitlines()
                if line.startswith("LOG dtpu.hw.kernels built")], proc.stderr


# -- the load unit's WINDOWS gather ------------------------------------------------------------


def _rand_windows(rng):
    """Random WINDOWS fields: windows partly or wholly outside the image, strides, dilations,
    KP past K, K0..K1 slices, N > 1, every lane width."""
    from dtpu.hw.listformat import Format

    L = int(rng.choice([1, 2, 4, 8]))
    n, h, w, c = (int(v) for v in (rng.integers(1, 3), rng.integers(1, 12), rng.integers(1, 12),
                                   rng.integers(1, 40)))
    kh, kw, sy, sx, dy, dx = (int(v) for v in rng.integers(1, [8, 8, 4, 4, 3, 3]))
    pt, pl = int(rng.integers(0, min(15, (kh - 1) * dy + 3))), \
        int(rng.integers(0, min(15, (kw - 1) * dx + 3)))
    ey, ex = (kh - 1) * dy + 1, (kw - 1) * dx + 1
    oh = max(1, (h + pt + int(rng.integers(0, 4)) - ey) // sy + 1)
    ow = max(1, (w + pl + int(rng.integers(0, 4)) - ex) // sx + 1)
    kp = -(-kh * kw * c // L) * L + L * int(rng.choice([0, 0, 1, 3]))
    k0 = int(rng.integers(0, kp // L)) if rng.random() < 0.5 else 0
    k1 = int(rng.integers(k0 + 1, kp // L + 1)) if rng.random() < 0.5 else kp // L
    es = 8 // L
    a0 = dict(MODE=Format().act_modes["WINDOWS"], LANES=L, ESIZE=es, SRC=64,
              PAD=int(rng.integers(0, 1 << min(8 * es, 62))))
    return (a0, dict(N=n, H=h, W=w, C=c),
            dict(KH=kh, KW=kw, SY=sy, SX=sx, DY=dy, DX=dx, PT=pt, PL=pl, OH=oh, OW=ow),
            dict(KP=kp, K0=k0, K1=k1, NCHUNK=0), dict(CV=0))


def _executors():
    from dtpu.hw.executor import Executor

    ours, ref = Executor(), Executor()
    ref.kernels_ok = False
    return ours, ref


def test_window_gather_equals_the_numpy_index():
    """kernels.c's gather gives the words of the numpy index path (the one the AGU and load-unit
    testbenches compare with the RTL) on random fields, run twice (the bound runner reused)."""
    from dtpu.hw.ddr import Ddr

    ours, ref = _executors()
    rng = np.random.default_rng(23)
    for trial in range(300):
        a = _rand_windows(rng)
        a0, a1 = a[0], a[1]
        size = a1["N"] * a1["H"] * a1["W"] * a1["C"] * a0["ESIZE"]
        ddr = Ddr(0, 64 + size + 8, rng.integers(0, 256, 64 + size + 8, dtype=np.uint8))
        want = ref.gather(ddr, *a)
        for _ in range(2):
            got = ours.gather(ddr, *a)
            assert got.dtype == want.dtype and got.shape == want.shape, (trial, a)
            assert np.array_equal(got, want), (trial, a)
        assert ours.gather_runs and not ours.gather_cache   # it did take the C path


def test_window_gather_refuses_what_the_numpy_index_refuses():
    from dtpu.hw.ddr import Ddr
    from dtpu.hw.listformat import ListFault

    ours, ref = _executors()
    a = list(_rand_windows(np.random.default_rng(5)))
    a[1].update(C=8)
    a[2].update(KH=3, KW=3, SY=1, SX=1, PT=1, PL=1, OH=a[1]["H"], OW=a[1]["W"])
    a[3].update(KP=64, K0=0, K1=64 // a[0]["LANES"])        # K = 72 lanes
    ddr = Ddr(0, 1 << 16, np.zeros(1 << 16, np.uint8))
    msgs = []
    for ex in (ours, ref):
        with pytest.raises(ListFault) as e:
            ex.gather(ddr, *a)
        msgs.append((e.value.kind, str(e.value)))
    assert msgs[0] == msgs[1] and "KP=64" in msgs[0][1]


@pytest.mark.parametrize("signed", [True, False])
def test_int8_gemm_equals_numpy(signed):
    """kernels.c's thin int8 GEMM against int64 numpy, with and without column offsets, at the
    int16 weight and int32 sum extremes the callers allow."""
    rng = np.random.default_rng(int(signed))
    lo, hi = (-128, 128) if signed else (0, 256)
    for m, k, c in [(1, 1, 1), (7, 33, 8), (49, 2048, 8), (13, 96, 32), (5, 200, 3)]:
        a = rng.integers(lo, hi, (m, k)).astype(np.int8 if signed else np.uint8)
        w = rng.integers(-2**15, 2**15, (k, c)) if k * 2**15 * 256 < 2**31 else \
            rng.integers(-300, 300, (k, c))
        coff = rng.integers(-2**20, 2**20, c)
        for off in (None, coff):
            want = a.astype(np.int64) @ w + (0 if off is None else off)
            assert np.abs(want).max() < 2**31
            got = np.empty((m, c), np.int32)
            KERN.gemm_fn(w, signed, m, off)(a, got)
            assert np.array_equal(got, want), (m, k, c, off is None)
    with pytest.raises(ValueError, match="int16"):
        KERN.gemm_fn(np.full((2, 2), 2**15), signed, 1)
