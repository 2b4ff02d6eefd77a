"""Seeded random DTPU jobs at register level, and their golden-model expectations.

A *case* is a list of :class:`dtpu.hw.lower.Job` (loads, then one compute job). The golden model
(:class:`dtpu.hw.core.Core` behind :class:`dtpu.driver.ModelTransport`) runs every job first;
its result words, ERR and cycle count are what the RTL must reproduce.
"""
from __future__ import annotations

import random
from dataclasses import dataclass
from types import SimpleNamespace

import numpy as np

from dtpu.hw import lower
from dtpu.hw.config import HwConfig, ceil_div, out_lanes
from dtpu.hw.core import Core
from dtpu.hw.dw_format import dw_weight_words
from dtpu.hw.lower import Job
from dtpu.precision import Precision

_U64 = np.dtype("<u8")
INT_PRECS = [Precision.INT8, Precision.UINT8, Precision.INT16, Precision.INT32, Precision.INT64]


@dataclass
class Expect:
    words: np.ndarray | None
    err: int
    cycles: int


def _u32(v: int) -> int:
    return int(v) & 0xFFFFFFFF


def random_lanes(rng: np.random.Generator, prec: Precision, n: int, mag_bits: int | None = None):
    """n lane values of prec (full range, or |v| < 2^mag_bits), as packed words."""
    L = prec.lanes
    count = ceil_div(n, L) * L
    if prec.is_float:
        v = (rng.standard_normal(count) * 2.0).astype(np.float32)
        from dtpu.pack import pack
        return pack(v, prec)
    info = np.iinfo(prec.value_dtype)
    lo, hi = int(info.min), int(info.max)
    if mag_bits is not None:
        lo, hi = max(lo, -(1 << mag_bits) + 1), min(hi, (1 << mag_bits) - 1)
    v = rng.integers(lo, hi, count, endpoint=True, dtype=np.int64)
    return np.ascontiguousarray(v.astype(prec.value_dtype)).view(_U64).copy()


def job_reg(cfg: HwConfig, opcode: str, prec=None, out_mode="REQUANT", variant=0) -> tuple[str, int]:
    f = {"OPCODE": cfg.enums["OPCODE"][opcode]}
    if prec is not None:
        f.update(PREC=cfg.prec_code(prec), OUT_MODE=cfg.enums["OUT_MODE"][out_mode], RQ_VARIANT=variant)
    return ("JOB", cfg.encode("JOB", **f))


def load_job(cfg, opcode, addr, words, label):
    return Job(label, [("LOAD_ADDR", addr), ("LOAD_COUNT", int(words.size)), job_reg(cfg, opcode)],
               {"wgt": np.ascontiguousarray(words, _U64)})


def random_params(rng: np.random.Generator, prec: Precision, n: int, variant: int, cfg: HwConfig):
    """n parameter entries (2 words each) for REQUANT/FLOAT: bias, multiplier, shift, zp."""
    words = np.zeros((n, 2), _U64)
    if prec.is_float:
        b = (rng.standard_normal(n) * 4).astype(np.float32)
        words[:, 0] = b.view(np.uint32).astype(_U64)
        return words
    if variant == cfg.RQ_VARIANT_INT64:
        bias = rng.integers(-(1 << 40), 1 << 40, n)
        shift = rng.integers(-15, 3, n)
    else:
        bias = rng.integers(-(1 << 20), 1 << 20, n)
        shift = rng.integers(-31, 4, n)
    mult = rng.integers(1 << 30, (1 << 31) - 1, n)
    neg = rng.random(n) < 0.1
    mult = np.where(neg, -mult, mult)
    mult[rng.random(n) < 0.05] = -(1 << 31)
    mult[rng.random(n) < 0.05] = 0x7FFF8000
    info = np.iinfo(prec.value_dtype)
    zp = rng.integers(int(info.min) // 2, int(info.max) // 2 + 1, n)
    words[:, 0] = bias.astype(np.int64).view(_U64)
    words[:, 1] = ((mult.astype(np.int64) & 0xFFFFFFFF).astype(_U64)
                   | ((shift.astype(np.int64) & 0xFF).astype(_U64) << np.uint64(32))
                   | ((zp.astype(np.int64) & 0xFFFF).astype(_U64) << np.uint64(48)))
    return words


def random_offset(rng: random.Random, prec: Precision) -> int:
    if prec is Precision.INT8:
        return rng.randint(-128, 127)
    if prec is Precision.UINT8:
        return rng.randint(-255, 0)
    if prec is Precision.INT16:
        return rng.choice([0, rng.randint(-(1 << 15), (1 << 15) - 1)])
    if prec.is_float:
        return 0
    return rng.choice([0, rng.randint(-(1 << 31), (1 << 31) - 1)])


def gemm_case(cfg: HwConfig, seed: int, prec: Precision | None = None, out_mode: str | None = None,
              max_m: int = 6, max_kw: int = 6, max_nt: int = 3, wgt_base: int | None = None,
              min_m: int = 1) -> list[Job]:
    """LOAD_WGT, LOAD_PARAM (unless RAW) and one GEMM with random shapes, operands, parameters."""
    rng = random.Random(seed)
    nrng = np.random.default_rng(seed)
    enabled = [p for p in cfg.ENABLED if p is not Precision.UINT16]
    if prec is None:
        prec = rng.choice([p for p in enabled if not p.is_float] or enabled)
    modes = ["FLOAT"] if prec.is_float else (["REQUANT", "RAW"] if prec.bits <= 16 else ["RAW"])
    out_mode = out_mode or rng.choice(modes)
    # the variants the build has (RQ_EN; all by default, in the same order as ever)
    built = [v for v in cfg.enums["RQ_VARIANT"].values() if cfg.rq_built(v)]
    variant = rng.choice(built) if out_mode == "REQUANT" else 0
    m, kw, nt = rng.randint(min_m, max_m), rng.randint(1, max_kw), rng.randint(1, max_nt)
    cols = cfg.COLS
    wgt_base = cols * rng.randint(0, 2) if wgt_base is None else wgt_base
    param_base = cols * rng.randint(0, 2)
    mag = None
    if prec is Precision.INT32:
        mag = rng.choice([None, 20, 28])
    elif prec is Precision.INT64:
        mag = rng.choice([20, 30])
    wwords = random_lanes(nrng, prec, nt * kw * cols * prec.lanes, mag)
    jobs = [load_job(cfg, "LOAD_WGT", wgt_base, wwords, "wgt")]
    if out_mode != "RAW":
        params = random_params(nrng, prec, nt * cols, variant, cfg)
        jobs.append(load_job(cfg, "LOAD_PARAM", param_base, params.reshape(-1), "param"))
    act = random_lanes(nrng, prec, m * kw * prec.lanes, mag)
    if prec.is_float:
        lo, hi = np.float32(-rng.uniform(1, 50)), np.float32(rng.uniform(1, 50))
        clamp = [("ACT_MIN", int(np.array(lo).view(np.uint32))), ("ACT_MAX", int(np.array(hi).view(np.uint32)))]
    else:
        lanes_n, dt = out_lanes(cfg, prec, cfg.enums["OUT_MODE"][out_mode])
        info = np.iinfo(dt)
        a, b = sorted(rng.randint(int(info.min), int(info.max)) for _ in range(2))
        if rng.random() < 0.5:
            a, b = int(info.min), int(info.max)
        clamp = [("ACT_MIN", _u32(a)), ("ACT_MAX", _u32(b))]
    ioff = 0 if mag is not None and prec is Precision.INT64 and rng.random() < 0.5 else random_offset(rng, prec)
    woff = random_offset(rng, prec)
    if prec is Precision.INT64:
        ioff, woff = rng.randint(-1000, 1000), rng.randint(-1000, 1000)
    lanes_n, _ = out_lanes(cfg, prec, cfg.enums["OUT_MODE"][out_mode])
    wps = ceil_div(cols, lanes_n)
    regs = [("GEMM_M", m), ("GEMM_KW", kw), ("GEMM_NT", nt), ("WGT_BASE", wgt_base),
            ("PARAM_BASE", param_base), ("IN_OFFSET", _u32(ioff)), ("WGT_OFFSET", _u32(woff)),
            *clamp, job_reg(cfg, "GEMM", prec, out_mode, variant)]
    jobs.append(Job(f"gemm {prec.value} {out_mode} v{variant} m{m} kw{kw} nt{nt}", regs,
                    {"act": act}, m * nt * wps))
    return jobs


def expect(core: Core, job: Job) -> Expect:
    """Run one job on the golden model through its register/stream API (the protocol of
    dtpu.driver.run_job); return its words (None if it failed), ERR and cycle count."""
    c = core.cfg
    n_jobs = len(core.jobs)
    for name, value in job.regs:
        core.write(c.reg(name).offset, value)
    core.write(c.REG_CTRL, c.encode("CTRL", START=1))
    for stream, words in job.send.items():
        core.push(stream, words, last=True)
    core.run()
    err = core.read(c.REG_ERR)
    core.write(c.REG_ERR, err)
    assert len(core.jobs) == n_jobs + 1
    cycles = core.jobs[-1].cycles
    if err & c.ERR_FATAL_MASK:
        return Expect(None, err, cycles)
    words = core.pop("res", job.recv) if job.recv else None
    return Expect(words, err, cycles)


# ------------------------------------------------------------------------------------------------
# lowered TFLite-like nodes (the delegate's own job sequences)


def random_node(seed: int, kinds=None, modes=None, max_hw: int = 7, max_c: int = 20):
    """A seeded random ConvSpec with data (like tests/test_hw_model.py's strategy)."""
    from dtpu import reference
    from dtpu.spec import Activation, ConvSpec, DataMode, OpKind, Padding, Quant

    r = random.Random(seed)
    rng = np.random.default_rng(seed)
    kind = r.choice(kinds or list(OpKind))
    mode = r.choice(modes or list(DataMode))
    n = r.randint(1, 2)
    h, w, c = r.randint(1, max_hw), r.randint(1, max_hw), r.randint(1, max_c)
    if kind is OpKind.FULLY_CONNECTED:
        h = w = 1
        kh = kw = sh = sw = dh = dw = 1
        padding = Padding.VALID
    else:
        kh, kw = r.randint(1, 3), r.randint(1, 3)
        sh, sw = r.randint(1, 2), r.randint(1, 2)
        dh, dw = r.choice([1, 1, 2]), r.choice([1, 1, 2])
        padding = r.choice(list(Padding))
        if padding is Padding.VALID and ((kh - 1) * dh + 1 > h or (kw - 1) * dw + 1 > w):
            padding = Padding.SAME
    mult = r.randint(1, 2) if kind is OpKind.DEPTHWISE_CONV_2D else 1
    oc = c * mult if kind is OpKind.DEPTHWISE_CONV_2D else r.randint(1, max_c)
    fshape = ((1, kh, kw, oc) if kind is OpKind.DEPTHWISE_CONV_2D else
              (oc, c) if kind is OpKind.FULLY_CONNECTED else (oc, kh, kw, c))
    act = r.choice(list(Activation))
    has_bias = r.random() < 0.8
    q = {}
    if mode.is_quantized:
        zx = 0 if mode is DataMode.INT16X8 else r.randint(-30, 30) + (128 if mode is DataMode.UINT8 else 0)
        zo = 0 if mode is DataMode.INT16X8 else r.randint(-30, 30) + (128 if mode is DataMode.UINT8 else 0)
        per_channel = mode is not DataMode.UINT8 and r.random() < 0.5
        fs = tuple(rng.uniform(0.002, 0.03, oc)) if per_channel else (float(rng.uniform(0.002, 0.03)),)
        zw = r.randint(90, 160) if mode is DataMode.UINT8 else 0
        q = dict(input_q=Quant((float(rng.uniform(0.005, 0.05)),), (zx,)),
                 filter_q=Quant(fs, (zw,) * len(fs)),
                 output_q=Quant((float(rng.uniform(0.02, 0.3)),), (zo,)))
    spec = ConvSpec(kind, mode, (n, h, w, c), fshape, stride=(sh, sw), dilation=(dh, dw),
                    padding=padding, activation=act, depth_multiplier=mult, has_bias=has_bias, **q)
    adt, wdt = reference.io_dtypes(spec)
    if adt.kind == "f":
        x = rng.standard_normal(spec.input_shape).astype(np.float32)
        f = (rng.standard_normal(spec.filter_shape) * 0.5).astype(np.float32)
        b = rng.standard_normal(oc).astype(np.float32)
    else:
        ai, wi = np.iinfo(adt), np.iinfo(wdt)
        x = rng.integers(ai.min, int(ai.max) + 1, spec.input_shape).astype(adt)
        f = rng.integers(max(int(wi.min), -127), int(wi.max) + 1, spec.filter_shape).astype(wdt)
        bdt = np.int64 if spec.mode is DataMode.INT16X8 and r.random() < 0.5 else np.int32
        b = rng.integers(-20000, 20000, oc).astype(bdt)
    return spec, x, f, (b if has_bias else None)


def lowered_jobs(cfg: HwConfig, seed: int, precision=None, **kw) -> tuple[list[Job], str]:
    """All jobs (loads, then compute) of one random lowered node; a label for messages."""
    from dtpu.hw.lower import LowerError, lower

    for attempt in range(50):
        spec, x, f, b = random_node(seed * 101 + attempt, **kw)
        try:
            low = lower(spec, f, b, cfg, precision=precision)
        except LowerError:
            continue
        label = (f"{spec.kind.value} {spec.mode.value} in{spec.input_shape} f{spec.filter_shape} "
                 f"s{spec.stride} d{spec.dilation} {spec.padding.value} -> {low.dataflow} "
                 f"{low.precision.value}")
        return list(low.load_jobs) + list(low.jobs(x)), label
    raise RuntimeError(f"seed {seed}: no lowerable node in 50 attempts")


# ------------------------------------------------------------------------------------------------
# prefetch (contract 1.2: PF_ADDR / PF_COUNT on GEMM and DWCONV jobs)


def with_prefetch(job: Job, addr: int, words: np.ndarray) -> Job:
    """A copy of compute job `job` that also prefetches `words` into weight memory at `addr`
    (PF_ADDR / PF_COUNT written just before JOB, the words sent on s_axis_wgt)."""
    words = np.ascontiguousarray(words, _U64).reshape(-1)
    regs = list(lower.with_prefetch(job.regs, None, addr, words.size))
    return Job(f"{job.label} +pf {words.size}@{addr}", regs, {**job.send, "wgt": words}, job.recv,
               job.macs)


def without_prefetch(job: Job) -> Job:
    """A copy of `job` that clears PF_COUNT first (the register keeps its last value)."""
    regs = list(lower.with_prefetch(job.regs, None, 0, 0)) if any(n == "JOB" for n, _ in job.regs) \
        else [lower.NO_PREFETCH, *job.regs]
    return Job(job.label, regs, dict(job.send), job.recv, job.macs)


def job_reg_value(job: Job, name: str, default: int = 0) -> int:
    """The value `job` writes to register `name` (its last write), or `default`."""
    value = default
    for n, v in job.regs:
        if n == name:
            value = v
    return value


def own_weight_range(cfg: HwConfig, job: Job) -> tuple[int, int]:
    """[WGT_BASE, end) of a GEMM or DWCONV job's own weight words (what a prefetch must avoid)."""
    op = cfg.decode("JOB", job_reg_value(job, "JOB"))["OPCODE"]
    wb = job_reg_value(job, "WGT_BASE")
    if op == cfg.OPCODE_GEMM:
        return wb, wb + job_reg_value(job, "GEMM_NT") * job_reg_value(job, "GEMM_KW") * cfg.COLS
    # the build's depthwise layout decides: the rotated one takes a word per column and step
    # phase (up to COLS/GC times the banked layout's words), so its weights reach further
    k = cfg.decode("DW_KERNEL", job_reg_value(job, "DW_KERNEL"))
    g = cfg.decode("DW_GROUPS", job_reg_value(job, "DW_GROUPS"))
    geometry = SimpleNamespace(kh=k["KH"], kw=k["KW"], gc=g["GC"], nchunk=g["NCHUNK"])
    return wb, wb + dw_weight_words(cfg, geometry)


@dataclass
class PrefetchCase:
    """A compute job that prefetches the weights of a later GEMM, and that GEMM.

    `setup`: the carrier's loads; `job`: the carrier with PF_ADDR/PF_COUNT (its prefetch words:
    `pad` random words, then the reader's weight words at the reader's WGT_BASE); `after`: the
    carrier node's remaining compute jobs, then the reader's LOAD_PARAM and GEMM without its
    LOAD_WGT, so the reader's results depend on the prefetched words having landed.
    """
    setup: list[Job]
    job: Job
    after: list[Job]
    label: str


def prefetch_case(cfg: HwConfig, seed: int, kind: str, bound: str) -> PrefetchCase:
    """kind: "gemm" (a random register-level GEMM) or "dw" (a lowered depthwise node) carries
    the prefetch; bound: "prefetch" (few compute cycles, many words: padded) or "compute"."""
    r = random.Random(seed)
    half = cfg.WEIGHT_WORDS // 2
    big = bound == "prefetch"
    reader = gemm_case(cfg, seed + 1, max_m=3, max_kw=6 if big else 2, max_nt=3 if big else 1,
                       wgt_base=half)
    rwords = reader[0].send["wgt"]
    if kind == "gemm":
        jobs = gemm_case(cfg, seed, max_m=2 if big else 12, min_m=1 if big else 8,
                         max_kw=2 if big else 6, max_nt=1 if big else 3, wgt_base=0)
        label = jobs[-1].label
    elif kind == "dw":
        from dtpu.spec import DataMode, OpKind
        jobs, label = lowered_jobs(cfg, seed, kinds=[OpKind.DEPTHWISE_CONV_2D],
                                   modes=[DataMode.INT8, DataMode.UINT8, DataMode.INT16X8],
                                   max_hw=4 if big else 7)
    else:
        raise ValueError(f"kind={kind!r}; accepted: gemm, dw")
    k = next(i for i, j in enumerate(jobs)
             if cfg.decode("JOB", job_reg_value(j, "JOB"))["OPCODE"] in (cfg.OPCODE_GEMM, cfg.OPCODE_DWCONV))
    lo, hi = own_weight_range(cfg, jobs[k])
    pad = r.randint(cfg.WEIGHT_WORDS // 8, cfg.WEIGHT_WORDS // 4) if big else r.randint(0, 3)
    # a carrier whose own weights reach into the padding (a rotated-layout depthwise job at 8x8)
    # keeps the pad that fits: the prefetch must not overwrite them (CONFIG refuses it,
    # ERR.WGT_RANGE, and the case would test nothing)
    pad = max(0, min(pad, half - hi))
    addr = half - pad
    if hi > addr:
        raise AssertionError(f"seed {seed}: carrier weights [{lo}, {hi}) reach the prefetch at {addr}")
    nrng = np.random.default_rng(seed + 2)
    words = np.concatenate([nrng.integers(0, 1 << 63, pad, dtype=np.uint64).astype(_U64), rwords])
    job = with_prefetch(jobs[k], addr, words)
    after = [without_prefetch(j) for j in jobs[k + 1:]] + [without_prefetch(j) for j in reader[1:]]
    return PrefetchCase(jobs[:k], job, after, f"{kind}/{bound}: {label} -> {job.label}")
