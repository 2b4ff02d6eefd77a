"""Compiled jobs: the golden model's datapath without the register/stream protocol.

:func:`compile_job` decodes a job's register list once with the core's own CONFIG logic
(:meth:`Core.configure`: the same checks, the same geometry, the closed-form cycle count) and
precomputes everything that depends only on the registers and on the core's memories: the
operand matrices with WGT_OFFSET applied, the decoded parameter words, and for the common
integer cases a *fused* post unit. :func:`execute` then runs the job on its input words and
updates the core's counters exactly as the register/stream protocol would, without a register
write, a stream queue or a decode per job. The protocol path (``dtpu.driver.run_job`` over a
``ModelTransport``) stays the reference: tests/test_model_fastpath.py checks that both give the
same result words and counters.

Fused post unit. For REQUANT with the SINGLE, DOUBLE or DOUBLE_UP variant, when the node's
weights prove that ``acc + bias`` never wraps (so no ERR flag can rise), every variant is one
floor of an affine function of the accumulator:

* DOUBLE_UP: ``a = total << l``, ``h = (a*m + 2^30) >> 31``, ``r = (h + 2^(rs-1)) >> rs`` equals
  ``r = floor((total*m*2^l + 2^30 + 2^(30+rs)) / 2^(31+rs))`` (``floor(floor(u) + k) / n) =
  floor((u + k) / n)`` for integers k, n > 0);
* DOUBLE: the same with ``2^31`` subtracted from the numerator where ``a*m + 2^30 < 0`` (the
  gemmlowp divide rounds half away from zero: one unit less below zero);
* SINGLE: ``r = floor((total*m + 2^(rs-1)) / 2^rs)``, ``rs = 31 - shift``.

The accumulation and this affine map run in float64 with the scale folded into the weights and
bias, the zero point and the rounding constants into one per-channel offset: every term is an
integer multiple of ``2^-(31+rs)`` and the sum of their magnitudes is proven below ``2^53``
ulps from the actual weights and the lane range, so every partial sum (any order, any BLAS, FMA
or not) is exact and ``floor`` is the hardware's result. Where that bound does not hold, or for
any other mode or variant, the compiled job runs the core's generic datapath
(``Core.gemm_words`` / ``Core.dw_words``) on the decoded setup. At compile time the fused map
is also checked against the core's post unit (:func:`dtpu.hw.units.post.requant`) on probe
accumulators around every channel's rounding boundaries; a disagreement (a variant redefined
there) falls back to the generic datapath.

C kernels (:mod:`dtpu.hw.kernels`, kernels.c). Where a C compiler is available, REQUANT jobs of
8-bit and int16 lanes with the SINGLE, DOUBLE or DOUBLE_UP variant run on them instead of the
numpy datapaths above: numpy spends one pass over the outputs per elementwise step of the post
unit (six to eight over float64 arrays) and one per tap of a depthwise job, and on MobileNet-224
those passes were most of an invoke; the kernels make each one pass. A GEMM stays on BLAS: the
lanes' products are summed in float32 while the raw sums are proven below 2^24 (else float64,
below 2^53), exact either way; IN_OFFSET * sum(W') is added in the post unit. A depthwise job
accumulates in int32 (|acc| < 2^31 proven from the weights) row by row. The post unit is the
fused map above when its bound holds (the same float64 operations, each exact, so order and FMA
do not matter), else the core's int64 post unit written again in C with numpy's semantics (every
variant's rounding, shifts of any count, the int32 wraps and WARN_WRAP32): jobs whose bound
fails no longer fall back to the generic numpy datapath. tests/test_kernels.py compares the
kernels with the model's definitions on extreme parameters; tests/test_model_fastpath.py runs
every job through the protocol, the kernels and the numpy datapaths and compares all three.
"""
from __future__ import annotations

import logging
import threading
from contextlib import contextmanager
from typing import Iterable

import numpy as np
from numpy.lib.stride_tricks import as_strided

from dtpu.hw import kernels
from dtpu.hw.core import Core, DwWeightsPerColumn, JobSetup, JobRefused, U64
from dtpu.hw.config import out_lanes
from dtpu.hw.units.post import signed32
from dtpu.precision import Precision

log = logging.getLogger(__name__)

_F64 = np.dtype(np.float64)
_F32 = np.dtype(np.float32)
# the clip ufunc itself (no argument checks of np.clip): numpy 2 names its module numpy._core
_clip = getattr(getattr(np, "_core", None), "umath", None)
_clip = _clip.clip if _clip is not None and hasattr(_clip, "clip") else np.core.umath.clip
_EXACT = 1 << 53
#: GEMMs with a longer K accumulate in float32 (exact integers below 2^24, half the bytes of
#: float64 through the matmul) and scale afterwards in two more passes over the outputs; shorter
#: ones fold the scale and offset into float64 weights (measured on the zoo's nets: float64 is
#: faster up to K = 64, float32 from K = 128 on)
F32_GEMM_K = 64


class Unsupported(Exception):
    """The job cannot be compiled (it reads a register it does not write, or writes a register
    that is not a plain one); run it through the register/stream protocol instead."""


class _TrackedRegs(dict):
    """A register file snapshot that records which offsets were read."""

    def __init__(self, *args):
        super().__init__(*args)
        self.read: set[int] = set()

    def __getitem__(self, key):
        self.read.add(key)
        return dict.__getitem__(self, key)


class CompiledJob:
    """One job with its registers decoded; :func:`execute` runs it."""

    kind = "generic"
    #: run() writes the result lanes into a caller's `out` array (else it ignores `out`)
    writes_out = False
    #: the command-list executor's timing inputs of this job (result word gaps, activation
    #: schedule): functions of the setup alone, computed at its first RUN and kept
    list_timing: tuple | None = None

    def __init__(self, core: Core, regs, setup: JobSetup | None, error: int = 0,
                 opcode: str = "") -> None:
        self.regs = regs                  # the register list it was compiled from (identity key)
        c = core.cfg
        self.writes = {c.reg(name).offset: int(value) & 0xFFFFFFFF for name, value in regs}
        # the driver's CTRL write (START) leaves only IRQ_EN, which it does not set
        self.writes[c.REG_CTRL] = c.encode("CTRL", START=1) & c.reg("CTRL").field("IRQ_EN").mask
        self.setup = setup
        self.error = error                # CONFIG error bits (then setup is None)
        self.opcode = setup.opcode if setup is not None else opcode
        self.cycles = setup.cycles if setup is not None else core.cfg.CFG_CYCLES
        self.needs = dict(setup.needs) if setup is not None else {}
        # the stream a job computes on (LOAD_*: wgt, GEMM/DWCONV: act); a compute job's
        # prefetch words (s_axis_wgt) come separately, see execute()
        self.pf_addr = setup.pf_addr if setup is not None else 0
        self.pf_count = setup.pf_count if setup is not None else 0
        main = {s: n for s, n in self.needs.items() if not (self.pf_count and s == "wgt")}
        self.stream, self.n_in = next(iter(main.items()), (None, 0))
        self.words_out = setup.words_out if setup is not None else 0
        self.epoch = core.memory_epoch
        self.wgt_range, self.param_range = _ranges(core, setup)
        # a job that reads no memory (LOAD_WGT, LOAD_PARAM, NOP: ~450 parameter pages per
        # invoke of a streamed 224 net) stays valid whatever is written
        self.reads_memory = self.wgt_range != (0, 0) or self.param_range != (0, 0)
        # what it was compiled from: a page streamed back into the same place (the same words
        # at every invoke) keeps its compiled form
        # (a copy, one byte per 8-bit weight: streamed pages rewrite their words at every
        # invoke and comparing is ~20x faster than hashing them)
        (wl, wh), (pl, ph) = self.wgt_range, self.param_range
        self.snapshot = (core.wmem[wl:wh].copy(), core.pmem[pl:ph].copy())

    def valid(self, core: Core) -> bool:
        """False if a write since compilation changed memory this job reads."""
        if self.epoch == core.memory_epoch or not self.reads_memory:
            return True
        if core.memory_written_since(self.epoch, self.wgt_range, self.param_range):
            (wl, wh), (pl, ph) = self.wgt_range, self.param_range
            w, p = self.snapshot
            if not (_same(core.wmem[wl:wh], w) and _same(core.pmem[pl:ph], p)):
                return False
        self.epoch = core.memory_epoch
        return True

    def run(self, core: Core, words: np.ndarray | None, out=None) -> tuple[np.ndarray | None, int]:
        s = self.setup
        if s.opcode == "NOP":
            return None, 0
        if s.opcode in ("LOAD_WGT", "LOAD_PARAM"):
            core.write_memory(s.opcode, s.addr, words)
            return None, 0
        if s.opcode == "GEMM":
            return core.gemm_words(s, words)
        return core.dw_words(s, words)


def _same(a: np.ndarray, b: np.ndarray) -> bool:
    """a == b (same dtype and shape): bytes compared for small arrays (a streamed page's words:
    ~1 us where np.array_equal takes ~2.5), np.array_equal for large ones."""
    if a.shape != b.shape:
        return False
    if a.nbytes <= 1 << 16:
        return a.tobytes() == b.tobytes()
    return bool(np.array_equal(a, b))


def _ranges(core: Core, s: JobSetup | None) -> tuple[tuple[int, int], tuple[int, int]]:
    """The weight words and parameter entries a compute job reads."""
    none = (0, 0)
    if s is None or s.opcode not in ("GEMM", "DWCONV"):
        return none, none
    c = core.cfg
    raw = s.out_mode == c.OUT_MODE_RAW
    if s.opcode == "GEMM":
        return ((s.wb, s.wb + s.nt * s.kw * c.COLS),
                none if raw else (s.pb, s.pb + s.nt * c.COLS))
    g = s.geom
    return ((s.wb, s.wb + s.ww),
            none if raw else (s.pb, s.pb + g.gc * g.nchunk * s.prec.lanes))


# ------------------------------------------------------------------------------------------------
# compiling


def _register_file(core: Core, regs: Iterable[tuple[str, int]]) -> tuple[_TrackedRegs, set[int]]:
    c = core.cfg
    base = {r.offset: (r.reset or 0) for r in c.registers}
    written = set()
    for name, value in regs:
        reg = c.reg(name)
        if reg.access != "rw":
            raise Unsupported(f"register {name} ({reg.access}) is not a plain job register")
        base[reg.offset] = int(value) & 0xFFFFFFFF
        written.add(reg.offset)
    return _TrackedRegs(base), written


def job_cycles(core: Core, regs) -> int:
    """Stall-free cycles of a job from its register writes (the others at their reset values),
    CFG_CYCLES for one CONFIG refuses: what the prefetch planner weighs a lowered job by,
    without compiling it."""
    file, _ = _register_file(core, regs)
    try:
        return core.configure(file).cycles
    except JobRefused:
        return core.cfg.CFG_CYCLES


#: compile_job's default for `kernels_ok` (tests switch it off to exercise the numpy datapaths)
USE_KERNELS = True


def compile_job(core: Core, regs, fused: bool = True, kernels_ok: bool | None = None
                ) -> CompiledJob:
    """Decode `regs` (the job's register writes, JOB last) as a START would.

    `fused`: use the fused post unit / C kernels where they apply (else the core's generic
    datapath); `kernels_ok`: may use the C kernels (:mod:`dtpu.hw.kernels`; default
    :data:`USE_KERNELS`; False keeps the numpy datapaths, which give the same words).

    Raises :class:`Unsupported` if the job's behaviour would depend on registers it does not
    write (the protocol path then runs it with the register file as it is)."""
    c = core.cfg
    file, written = _register_file(core, regs)
    try:
        setup = core.configure(file)
        error = 0
    except JobRefused as e:
        setup, error = None, e.bits
    missing = file.read - written
    if missing:
        names = sorted(c.reg_at(o).name for o in missing)
        raise Unsupported(f"the job reads {', '.join(names)} without writing it")
    if setup is None:
        return CompiledJob(core, regs, None, error, core.opcode_name(file))
    raw_gemm = setup.opcode == "GEMM" and setup.out_mode == c.OUT_MODE_RAW
    if fused and (raw_gemm or (setup.opcode in ("GEMM", "DWCONV")
                               and setup.out_mode == c.OUT_MODE_REQUANT)):
        cached = set(core.decoded_weights)
        try:
            if raw_gemm:
                try:
                    use = USE_KERNELS if kernels_ok is None else kernels_ok
                    return _RawGemm(core, regs, setup, kernels.get() if use else None)
                except _NotFusable as why:
                    log.debug("RAW GEMM job on the generic path: %s", why)
                    return CompiledJob(core, regs, setup)
            return _compile_fused(core, regs, setup, kernels_ok)
        finally:
            # the float64 weights decoded for the compiled form would stay in the core's memo
            # (8 bytes per weight, the whole net's worth): the compiled job keeps what it needs
            core.drop_decoded_weights(set(core.decoded_weights) - cached)
    return CompiledJob(core, regs, setup)


def _compile_fused(core: Core, regs, setup: JobSetup, kernels_ok: bool | None) -> CompiledJob:
    """A REQUANT compute job: C kernels, else the numpy fused datapaths, else generic."""
    try:
        plan = _FusedPost.build(core, setup)
    except _NotFusable as why:
        log.debug("%s job not fused: %s", setup.opcode, why)
        plan = None
    use = USE_KERNELS if kernels_ok is None else kernels_ok
    kern = kernels.get() if use else None
    if kern is not None:
        cls = _KernelGemm if setup.opcode == "GEMM" else _KernelDw
        try:
            return cls(core, regs, setup, plan, kern)
        except _NotFusable as why:
            log.debug("%s job not on the C kernels: %s", setup.opcode, why)
    if plan is not None:
        cls = _FusedGemm if setup.opcode == "GEMM" else _FusedDw
        return cls(core, regs, setup, plan)
    return CompiledJob(core, regs, setup)


# ------------------------------------------------------------------------------------------------
# the fused post unit


def _dw_weights(core: Core, s: JobSetup, dtype) -> np.ndarray:
    """The job's per-group tap weights (taps, C); rotated weights whose column copies differ
    have none, and such a job runs on the generic path."""
    try:
        return core.dw_weights(s.prec, s.geom, s.wb, dtype, s.w_off)
    except DwWeightsPerColumn as why:
        raise _NotFusable(str(why)) from None


class _NotFusable(Exception):
    pass


class _FusedPost:
    """Per channel: v = acc*scale + offset (float64, exact), v -= delta where v < threshold
    (DOUBLE only), y = floor(clip(v, lo, hi)). `acc` is the PE sum of (x + IN_OFFSET)*w';
    the datapaths accumulate the raw lanes x instead and use `offset_raw`, which adds
    IN_OFFSET * sum(w') (so no pass adds the offset to the activations)."""

    def __init__(self, scale, offset, offset_raw, threshold, delta, lo, hi, out_dtype) -> None:
        self.scale, self.offset, self.offset_raw = scale, offset, offset_raw
        self.threshold, self.delta = threshold, delta
        self.lo, self.hi = lo, hi
        self.out_dtype = out_dtype

    @classmethod
    def build(cls, core: Core, s: JobSetup) -> "_FusedPost":
        """The fused map for the job's channels, or _NotFusable with the reason."""
        c = core.cfg
        prec = s.prec
        if prec not in (Precision.INT8, Precision.UINT8, Precision.INT16):
            raise _NotFusable(f"precision {prec.value}")
        if s.variant not in (c.RQ_VARIANT_SINGLE, c.RQ_VARIANT_DOUBLE, c.RQ_VARIANT_DOUBLE_UP):
            raise _NotFusable(f"variant {s.variant}")
        if s.opcode == "GEMM":
            channels = s.nt * c.COLS
            w = core.gemm_weights(prec, s.wb, s.kw, s.nt, _int_weights(s), s.w_off)  # (K, C)
        else:
            g = s.geom
            channels = g.gc * g.nchunk * prec.lanes
            w = _dw_weights(core, s, _int_weights(s))                                 # (taps, C)
        wabs = np.abs(w).sum(axis=0, dtype=np.int64)
        wsum = w.sum(axis=0, dtype=np.int64)
        bias, mult, shift, zp = core.post_params(s.pb, channels, prec, s.out_mode)
        amax = core.operand_bound(prec, s.in_off)       # max |x + IN_OFFSET|
        xmax = core.operand_bound(prec, 0)              # max |x|
        info = np.iinfo(prec.value_dtype)
        lo = max(int(info.min), min(int(info.max), signed32(s.act_min)))
        hi = max(int(info.min), min(int(info.max), signed32(s.act_max)))
        double = s.variant == c.RQ_VARIANT_DOUBLE
        scale = np.empty(channels)
        offset = np.empty(channels)
        offset_raw = np.empty(channels)
        threshold = np.full(channels, -np.inf)
        delta = np.zeros(channels)
        for ch in range(channels):
            m, sh, z, b = int(mult[ch]), int(shift[ch]), int(zp[ch]), int(bias[ch])
            acc_bound = amax * int(wabs[ch])
            total_bound = acc_bound + abs(b)
            if s.variant == c.RQ_VARIANT_SINGLE:
                left, rs = 0, max(31 - sh, 0)          # r = (t*m + 2^(rs-1)) >> rs
                n0 = 1 << (rs - 1) if rs else 0
                corr = 0
            else:
                left, right = max(sh, 0), max(-sh, 0)  # r = (a*m + 2^30 + 2^(30+right)) >> rs
                rs = 31 + right
                n0 = (1 << 30) + ((1 << (30 + right)) if right else 0)
                corr = 1 << 31 if double and right else 0
            if total_bound << left >= 1 << 31:
                raise _NotFusable(f"channel {ch}: acc + bias may wrap")
            mm = m << left
            d = 1 << rs
            r_bound = (total_bound * abs(mm) + n0 + corr) // d + 1
            if r_bound + abs(z) >= 1 << 31:
                raise _NotFusable(f"channel {ch}: the result may wrap")
            b_raw = b + s.in_off * int(wsum[ch])
            num_bound = max(acc_bound * abs(mm) + abs(b * mm + n0),
                            xmax * int(wabs[ch]) * abs(mm) + abs(b_raw * mm + n0)) + corr + abs(z) * d
            if num_bound >= _EXACT:
                raise _NotFusable(f"channel {ch}: {num_bound.bit_length()} bits exceed float64")
            scale[ch] = mm / d                          # exact: a 62-bit integer over 2^rs
            offset[ch] = (b * mm + n0 + z * d) / d      # exact: |numerator| < 2^53
            offset_raw[ch] = (b_raw * mm + n0 + z * d) / d
            if corr:
                threshold[ch] = z + 0.5                 # v < z + 1/2  <=>  a*m + 2^30 < 0
                delta[ch] = corr / d
        plan = cls(scale, offset, offset_raw, threshold if double else None, delta, float(lo),
                   float(hi), prec.value_dtype)
        plan._check(core, s, bias, mult, shift, zp, channels, amax, wabs)
        return plan

    def finish(self, v: np.ndarray, out: np.ndarray, threshold=None, delta=None) -> None:
        """v (..., C) holds acc*scale + offset; write the post unit's lanes into `out`.
        `threshold` / `delta` default to the per-channel vectors (pass them reshaped when the
        channel axis of `v` is split)."""
        if self.threshold is not None:
            below = np.less(v, self.threshold if threshold is None else threshold)
            np.subtract(v, np.multiply(below, self.delta if delta is None else delta), out=v)
        _clip(v, self.lo, self.hi, out=v)
        np.floor(v, out=out, casting="unsafe")

    def _check(self, core: Core, s: JobSetup, bias, mult, shift, zp, channels: int, amax: int,
               wabs) -> None:
        """Compare with the core's post unit on accumulators around every channel's rounding
        boundaries and at the ends of the proven range."""
        rng = np.random.default_rng(channels)
        bound = np.maximum(amax * wabs.astype(np.int64), 1)
        probes = [np.zeros(channels, np.int64), bound, -bound]
        probes += [rng.integers(-bound, bound + 1) for _ in range(8)]
        # accumulators next to r = k + 1/2 for a few k: rounding boundaries of every variant
        v = bound[None, :] * np.array([[-1.0], [-0.5], [-0.01], [0.0], [0.01], [0.5], [1.0]])
        for row in v:
            exact = (np.floor(row * self.scale + self.offset) + 0.5 - self.offset) / np.where(
                self.scale == 0, 1, self.scale)
            for d in (-1, 0, 1):
                probes.append(np.clip(np.round(exact).astype(np.int64) + d, -bound, bound))
        acc = np.stack(probes)
        want, err = core.post(acc, s.prec, s.out_mode, s.variant, (bias, mult, shift, zp), 0,
                               s.act_min, s.act_max)
        got = np.empty(acc.shape, self.out_dtype)
        self.finish(acc * self.scale + self.offset, got)
        if err or not np.array_equal(got, want):
            bad = np.argwhere(got != want)
            raise _NotFusable(f"fused post unit disagrees with the core's (err {err:#x}, "
                              f"{bad.shape[0]} probes, first at channel "
                              f"{bad[0][1] if bad.size else '-'})")


def _int_weights(s: JobSetup) -> np.dtype:
    """The dtype to decode a job's weights (lanes + WGT_OFFSET) in: int32 where that holds them
    (8- and 16-bit lanes, a small offset: half the bytes of float64 while compiling), else
    float64 (exact: |w| < 2^53)."""
    return np.dtype(np.int32) if s.prec.bits <= 16 and abs(s.w_off) < 1 << 30 else _F64


# ------------------------------------------------------------------------------------------------
# fused datapaths


class _FusedGemm(CompiledJob):
    """GEMM + fused post: X = lanes + IN_OFFSET; v = X @ (W' * scale) + offset in float64 (the
    offset as an extra column of ones), or for large GEMMs (X @ W') in float32 then scaled."""

    kind = "fused"

    def __init__(self, core: Core, regs, setup: JobSetup, plan: _FusedPost) -> None:
        super().__init__(core, regs, setup)
        c = core.cfg
        s = setup
        L = s.prec.lanes
        self.k = s.kw * L
        self.m, self.C, self.cols = s.m, s.nt * c.COLS, c.COLS
        self.in_off = s.in_off
        self.plan = plan
        self.lane_dtype = s.prec.value_dtype
        w = core.gemm_weights(s.prec, s.wb, s.kw, s.nt, _F64, s.w_off)    # (K, C), exact
        xmax = core.operand_bound(s.prec, 0)
        self.f32 = (self.k > F32_GEMM_K
                    and xmax * float(np.abs(w).sum(axis=0).max(initial=0)) < 1 << 24)
        if self.f32:
            self.w = w.astype(_F32)
        else:
            self.w = np.vstack([w * plan.scale, plan.offset_raw[None, :]])  # (K+1, C)
            self.x = np.ones((self.m, self.k + 1))                         # last column: 1
            self.xk = self.x[:, :self.k]
        per = s.wpi * s.lanes_n
        self.padded = per != c.COLS
        self.writes_out = not self.padded
        self.out_shape = (self.m * s.nt, per)
        if self.padded and plan.threshold is not None:   # channel axis split into (NT, COLS)
            self.split_thr = (np.tile(plan.threshold.reshape(s.nt, c.COLS), (self.m, 1)),
                              np.tile(plan.delta.reshape(s.nt, c.COLS), (self.m, 1)))
        else:
            self.split_thr = (None, None)

    def run(self, core: Core, words: np.ndarray, out=None) -> tuple[np.ndarray, int]:
        a = words.view(self.lane_dtype).reshape(self.m, self.k)
        plan = self.plan
        if self.f32:
            v = np.multiply(np.matmul(a.astype(_F32), self.w), plan.scale, dtype=_F64)
            v += plan.offset_raw
        else:
            np.copyto(self.xk, a)
            v = np.matmul(self.x, self.w)
        if self.padded:  # COLS < lanes per word: each step's word(s) end in zero lanes
            out = np.zeros(self.out_shape, self.lane_dtype)
            plan.finish(v.reshape(-1, self.cols), out[:, :self.cols], *self.split_thr)
        else:
            out = (np.empty((self.m, self.C), self.lane_dtype) if out is None
                   else out.reshape(self.m, self.C))
            plan.finish(v, out)
        return out.reshape(-1).view(U64), 0


class _FusedDw(CompiledJob):
    """DWCONV + fused post, a handful of numpy calls whatever the kernel size.

    The padded operand plane (lanes + IN_OFFSET, zeros outside the image) is stored as SY*SX
    phase planes ``P[a,b][i,j] = xp[SY*i+a, SX*j+b]``, so that every tap reads one plane at unit
    stride. Rows of all chunks are laid end to end (full plane width), which makes each tap a
    contiguous run of the flat buffer and the taps of one plane a strided grid over it: one
    multiply per plane fills a (taps + 1, L) product table (its last row holds the fused
    post unit's offset), one reduction over the taps gives ``acc*scale + offset`` for every
    output (plus a few discarded columns past OW and rows past OH), exactly (see the module
    doc for the bound)."""

    kind = "fused"

    def __init__(self, core: Core, regs, setup: JobSetup, plan: _FusedPost) -> None:
        super().__init__(core, regs, setup)
        s = setup
        g = s.geom
        L = s.prec.lanes
        cl = g.gc * L
        nchunk = g.nchunk
        self.g, self.cl = g, cl
        self.in_off = s.in_off
        self.plan = plan
        self.lane_dtype = s.prec.value_dtype
        w = _dw_weights(core, s, _F64)                                        # (taps, C), exact
        w = (w * plan.scale).reshape(g.kh * g.kw, nchunk, cl)
        taps = [(ky, kx) for ky in range(g.kh) for kx in range(g.kw)]
        place = {t: (((t[0] * g.dy) % g.sy, (t[1] * g.dx) % g.sx),
                     ((t[0] * g.dy) // g.sy, (t[1] * g.dx) // g.sx)) for t in taps}
        planes = sorted({p for p, _ in place.values()})
        max_r = max(o[0] for _, o in place.values())
        max_c = max(o[1] for _, o in place.values())
        hq = max(g.oh + max_r, -(-(g.pt + g.ih) // g.sy))
        wq = max(g.ow + max_c, -(-(g.pl + g.iw) // g.sx))
        ps = nchunk * hq * wq * cl                                # one phase plane
        n = ((nchunk - 1) * hq + g.oh) * wq * cl                  # outputs computed per tap
        self.n, self.full = n, nchunk * hq * wq * cl
        # image positions are rewritten at every run; the others hold -IN_OFFSET, whose
        # products cancel the IN_OFFSET * sum(w') folded into the offset
        self.buf = np.full(len(planes) * ps + (max_r * wq + max_c) * cl + n, float(-s.in_off))
        it = self.buf.itemsize
        # fills: the image rows/columns that land in each plane
        self.fills = []
        for p, (a, b) in enumerate(planes):
            r0, c0 = (a - g.pt) % g.sy, (b - g.pl) % g.sx
            nr, nc = len(range(r0, g.ih, g.sy)), len(range(c0, g.iw, g.sx))
            if not nr or not nc:
                continue
            i0, j0 = (r0 + g.pt) // g.sy, (c0 + g.pl) // g.sx
            plane = self.buf[p * ps:(p + 1) * ps].reshape(nchunk, hq, wq, cl)
            self.fills.append((plane[:, i0:i0 + nr, j0:j0 + nc, :],
                               (slice(None), slice(r0, None, g.sy), slice(c0, None, g.sx))))
        # products: per plane, its taps as a (rows, cols, n) strided view of the buffer
        self.prod = np.empty((len(taps) + 1, n))
        self.products = []
        row = 0

        def tiled(v):  # (nchunk, cl) per channel -> the flat (rows of all chunks, wq, cl) layout
            return np.repeat(v.reshape(nchunk, 1, cl), hq * wq, axis=1).reshape(-1)[:n]

        for p, ab in enumerate(planes):
            mine = [t for t in taps if place[t][0] == ab]
            rows = sorted({place[t][1][0] for t in mine})
            cols = sorted({place[t][1][1] for t in mine})
            sr = rows[1] - rows[0] if len(rows) > 1 else 0
            sc = cols[1] - cols[0] if len(cols) > 1 else 0
            grid = [[None] * len(cols) for _ in rows]
            for t in mine:
                grid[rows.index(place[t][1][0])][cols.index(place[t][1][1])] = t
            if any(v is None for r in grid for v in r) or \
                    rows != [rows[0] + i * sr for i in range(len(rows))] or \
                    cols != [cols[0] + i * sc for i in range(len(cols))]:
                raise AssertionError("taps of a phase plane always form a grid")
            base = p * ps + (rows[0] * wq + cols[0]) * cl
            view = as_strided(self.buf[base:], (len(rows), len(cols), n),
                              (sr * wq * cl * it, sc * cl * it, it), writeable=False)
            k = len(rows) * len(cols)
            wgrid = np.stack([tiled(w[taps.index(t)]) for r in grid for t in r])
            self.products.append((view, wgrid.reshape(len(rows), len(cols), n),
                                  self.prod[row:row + k].reshape(len(rows), len(cols), n)))
            row += k
        self.prod[row] = tiled(plan.offset_raw.reshape(nchunk, cl))
        # one plane (stride 1): a single einsum over its tap grid, then the offset row
        self.single = len(self.products) == 1
        if self.single:
            self.offset_row = self.prod[row]
        if plan.threshold is not None:
            self.thr = (tiled(plan.threshold.reshape(nchunk, cl)), tiled(plan.delta.reshape(nchunk, cl)))
        else:
            self.thr = (None, None)
        self.grid_shape = (nchunk, hq, wq, cl)
        self.out_shape = (nchunk, g.oh, g.ow, cl)

    writes_out = True

    def run(self, core: Core, words: np.ndarray, out=None) -> tuple[np.ndarray, int]:
        g = self.g
        x = words.view(self.lane_dtype).reshape(g.nchunk, g.ih, g.iw, self.cl)
        for dst, src in self.fills:
            np.copyto(dst, x[src])
        acc = np.empty(self.full)
        v = acc[:self.n]
        if self.single:
            view, wgrid, _ = self.products[0]
            np.einsum("abj,abj->j", view, wgrid, out=v)
            v += self.offset_row
        else:
            for view, wgrid, prod in self.products:
                np.multiply(view, wgrid, out=prod)
            np.add.reduce(self.prod, axis=0, out=v)
        plan = self.plan
        if plan.threshold is not None:
            np.subtract(v, np.multiply(np.less(v, self.thr[0]), self.thr[1]), out=v)
        _clip(v, plan.lo, plan.hi, out=v)
        out = (np.empty(self.out_shape, self.lane_dtype) if out is None
               else out.reshape(self.out_shape))
        np.floor(acc.reshape(self.grid_shape)[:, :g.oh, :g.ow, :], out=out, casting="unsafe")
        return out.reshape(-1).view(U64), 0   # REQUANT: L lanes fill whole words


# ------------------------------------------------------------------------------------------------
# C kernels (dtpu.hw.kernels): one pass for the post unit, one for a depthwise job

_KERNEL_VARIANTS = ("RQ_VARIANT_SINGLE", "RQ_VARIANT_DOUBLE", "RQ_VARIANT_DOUBLE_UP")


def _kernel_variant(core: Core, s: JobSetup) -> int:
    """The kernels' code of the job's requant variant (0 SINGLE, 1 DOUBLE, 2 DOUBLE_UP)."""
    c = core.cfg
    for code, name in enumerate(_KERNEL_VARIANTS):
        if s.variant == getattr(c, name):
            return code
    raise _NotFusable(f"variant {s.variant}")


def _kernel_post(core: Core, s: JobSetup, plan: "_FusedPost | None", channels: int,
                 offset=None, bias_extra=None) -> dict:
    """The post unit's constants for the C kernels: the fused map when `plan` proved it exact
    (the module doc), else the exact int64 post unit (every variant's rounding, WARN_WRAP32).
    `offset`: the fused map's offset as the datapath needs it (plan.offset when the lanes carry
    IN_OFFSET, plan.offset_raw when it is folded in); `bias_extra`: the same for the exact post
    unit's bias."""
    if plan is not None:
        thr = plan.threshold if plan.threshold is not None else np.full(channels, -np.inf)
        return dict(fused=dict(scale=plan.scale, offset=offset, thr=thr, delta=plan.delta,
                               lo=plan.lo, hi=plan.hi))
    bias, mult, shift, zp = core.post_params(s.pb, channels, s.prec, s.out_mode)
    bias = bias.astype(np.int64)
    if bias_extra is not None:
        bias = bias + bias_extra
    return dict(exact=dict(bias=bias, mult=mult, shift=shift, zp=zp,
                           variant=_kernel_variant(core, s), act_lo=signed32(s.act_min),
                           act_hi=signed32(s.act_max)))


#: a GEMM job keeps its weights as floats up to this size, as small integers beyond (a streamed
#: net's pages are small jobs: the limit is per job, so that the net's float weights do not add
#: up; ~1 us per run of conversion overhead above it)
KEEP_FLOAT_BYTES = 16 << 10
_scratch_local = threading.local()


def _stored_weights(w: np.ndarray, wdt: np.dtype) -> tuple[np.ndarray, bool]:
    """(the weights as a compiled job keeps them, whether to convert them at each run). The
    float weights of the whole net would cost 4-8 bytes per weight for the life of the
    interpreter: large ones are kept as the smallest integer type holding them and converted
    into a per-thread scratch at every run (an int8 -> float32 pass over the weights, a small
    fraction of the matmul's time)."""
    small = next((dt for dt in (np.int8, np.int16, np.int32)
                  if w.size == 0 or (w.min() >= np.iinfo(dt).min and w.max() <= np.iinfo(dt).max)),
                 None)
    if small is not None and w.size * wdt.itemsize > KEEP_FLOAT_BYTES:
        return np.ascontiguousarray(w.astype(small)), True
    return np.ascontiguousarray(w.astype(wdt)), False


_batch_local = threading.local()


@contextmanager
def batch():
    """Jobs run inside share the float form of identical input words: the GEMM pages of a
    streamed node all stream the same activations (one array of the invoke's job list, not
    written while the jobs run), which would otherwise be converted again for every page."""
    prev = getattr(_batch_local, "conv", None)
    _batch_local.conv = {}
    try:
        yield
    finally:
        _batch_local.conv = prev


def _scratch(dtype: np.dtype, n: int) -> np.ndarray:
    """A per-thread scratch of at least `n` items of `dtype` (its first n returned). A
    backend's compiled jobs run one at a time (its lock); other backends run in other threads."""
    bufs = _scratch_local.__dict__.setdefault("bufs", {})
    buf = bufs.get(dtype)
    if buf is None or buf.size < n:
        buf = bufs[dtype] = np.empty(n, dtype)
    return buf[:n]


#: GEMMs of 8-bit lanes with at most this many columns run on kernels.c's integer dot
#: products instead of BLAS (a streamed node's pages: COLS columns, long K). Measured with one
#: thread against OpenBLAS's sgemm plus the float conversion of the activations: faster at every
#: width tried, 1.0-1.8x from 64 to 512 columns (2704x720 @ 720x192, an Inception_like job:
#: 7.2 against 11.3 ms; 49x4608 @ 4608x512: 2.9 against 4.8 ms)
INT_GEMM_MAX_C = 1024


def _int_gemm_fits(s: JobSetup, columns: int, raw: float, w: np.ndarray) -> bool:
    """The job can run on kernels.c's int8 GEMM: 8-bit lanes, few columns, weights (with
    WGT_OFFSET) within int16, every raw sum (|lanes| @ |W'| <= `raw`) within int32."""
    return (s.prec.bits == 8 and columns <= INT_GEMM_MAX_C and raw < 1 << 31
            and (w.size == 0 or (w.min() >= -2**15 and w.max() < 2**15)))


class _KernelGemm(CompiledJob):
    """GEMM on BLAS (exact: float32 while the lanes' raw sums stay below 2^24, else float64)
    and the post unit in one C pass. IN_OFFSET is folded into the post unit's offset (fused) or
    bias (exact): acc = lanes @ W' + IN_OFFSET * sum(W')."""

    kind = "kernel"
    writes_out = True

    def __init__(self, core: Core, regs, setup: JobSetup, plan, kern) -> None:
        s = setup
        c = core.cfg
        if s.prec not in (Precision.INT8, Precision.UINT8, Precision.INT16):
            raise _NotFusable(f"precision {s.prec.value}")
        if s.wpi * s.lanes_n != c.COLS:
            raise _NotFusable("result words padded")
        _kernel_variant(core, s)
        super().__init__(core, regs, setup)
        L = s.prec.lanes
        self.k, self.m, self.C = s.kw * L, s.m, s.nt * c.COLS
        self.lane_dtype = s.prec.value_dtype
        w = core.gemm_weights(s.prec, s.wb, s.kw, s.nt, _int_weights(s), s.w_off)  # (K, C)
        wabs = np.abs(w).sum(axis=0, dtype=np.int64)
        raw = core.operand_bound(s.prec, 0) * float(wabs.max(initial=0))
        full = core.operand_bound(s.prec, s.in_off) * float(wabs.max(initial=0))
        if s.prec.bits == 8 and self.k * core.operand_bound(s.prec, s.in_off) * \
                core.operand_bound(s.prec, s.w_off) >= 1 << 31:
            raise _NotFusable("the accumulator may leave int32 (OVERFLOW)")
        if max(raw, full) >= _EXACT:
            raise _NotFusable("accumulator beyond float64")
        self.wdt = _F32 if raw < 1 << 24 else _F64
        self.wshape = w.shape
        self.w, self.convert = _stored_weights(w, self.wdt)
        wsum = w.sum(axis=0, dtype=np.int64)
        post = _kernel_post(core, s, plan, self.C,
                            offset=None if plan is None else plan.offset_raw,
                            bias_extra=s.in_off * wsum)
        self.igemm = None
        if _int_gemm_fits(s, self.C, raw, w):
            self.igemm = kern.gemm_fn(w, s.prec is Precision.INT8, self.m)
            self.w = None
            self.post = kern.post_fn(np.int32, self.lane_dtype, self.C, self.m, self.m, **post)
        else:
            self.post = kern.post_fn(self.wdt, self.lane_dtype, self.C, self.m, self.m, **post)
        self.warn = core.cfg.ERR_WARN_WRAP32

    def run(self, core: Core, words: np.ndarray, out=None) -> tuple[np.ndarray, int]:
        out = (np.empty((self.m, self.C), self.lane_dtype) if out is None
               else out.reshape(self.m, self.C))
        if self.igemm is not None:
            acc = _scratch(np.dtype(np.int32), self.m * self.C).reshape(self.m, self.C)
            self.igemm(words.view(self.lane_dtype).reshape(self.m, self.k), acc)
            err = self.warn if self.post(acc, out) else 0
            return out.reshape(-1).view(U64), err
        conv = getattr(_batch_local, "conv", None)
        key = (id(words), self.m, self.k, self.lane_dtype, self.wdt)
        hit = conv.get(key) if conv is not None else None
        if hit is not None and hit[0] is words:
            a = hit[1]
        else:
            a = words.view(self.lane_dtype).reshape(self.m, self.k).astype(self.wdt)
            if conv is not None:
                conv[key] = (words, a)     # the words held: their id stays theirs
        w = self.w
        if self.convert:
            w = _scratch(self.wdt, w.size).reshape(self.wshape)
            np.copyto(w, self.w)
        acc = np.matmul(a, w)
        err = self.warn if self.post(acc, out) else 0
        return out.reshape(-1).view(U64), err


class _RawGemm(CompiledJob):
    """A RAW GEMM (the partial sums of a K-split node, accumulated by RES ACC) on BLAS with its
    weights decoded once: float32 while every sum, IN_OFFSET folded in as a per-column term
    (IN_OFFSET * sum(W')), stays below 2^24, else float64 below 2^53; the exact integers then
    cast to the RAW lanes (int32 for 8-bit lanes: proven inside int32, so no OVERFLOW to
    raise; int64 otherwise). The generic path decodes the weights at every run of a streamed
    page and goes through int64 accumulators; the words are the same."""

    kind = "raw"

    def __init__(self, core: Core, regs, setup: JobSetup, kern=None) -> None:
        s = setup
        c = core.cfg
        if s.prec not in (Precision.INT8, Precision.UINT8, Precision.INT16):
            raise _NotFusable(f"precision {s.prec.value}")
        lanes_n, out_dt = out_lanes(c, s.prec, s.out_mode)
        if c.COLS % lanes_n:
            raise _NotFusable("result words padded")
        w = core.gemm_weights(s.prec, s.wb, s.kw, s.nt, _int_weights(s), s.w_off)  # (K, C)
        wabs = float(np.abs(w).sum(axis=0, dtype=np.int64).max(initial=0))
        raw = core.operand_bound(s.prec, 0) * wabs
        full = core.operand_bound(s.prec, s.in_off) * wabs
        if s.prec.bits == 8 and full >= 1 << 31:
            raise _NotFusable("the accumulator may leave int32 (OVERFLOW)")
        top = max(raw, full)
        if top >= _EXACT:
            raise _NotFusable("accumulator beyond float64")
        super().__init__(core, regs, setup)
        L = s.prec.lanes
        self.k, self.m, self.C = s.kw * L, s.m, s.nt * c.COLS
        self.lane_dtype, self.out_dtype = s.prec.value_dtype, np.dtype(out_dt)
        self.wdt = _F32 if top < 1 << 24 else _F64
        self.wshape = w.shape
        self.w, self.convert = _stored_weights(w, self.wdt)
        wsum = w.sum(axis=0, dtype=np.int64) * s.in_off
        self.offset = wsum.astype(self.wdt) if s.in_off else None   # exact: |.| <= full
        self.igemm = None
        if kern is not None and _int_gemm_fits(s, self.C, raw, w):
            # 8-bit lanes: full < 2^31 (above), so the sums with the offset are the RAW lanes
            self.igemm = kern.gemm_fn(w, s.prec is Precision.INT8, self.m,
                                      wsum if s.in_off else None)
            self.w = None

    def run(self, core: Core, words: np.ndarray, out=None) -> tuple[np.ndarray, int]:
        if self.igemm is not None:
            y = np.empty((self.m, self.C), np.int32)
            self.igemm(words.view(self.lane_dtype).reshape(self.m, self.k), y)
            return y.reshape(-1).view(U64), 0
        a = words.view(self.lane_dtype).reshape(self.m, self.k).astype(self.wdt)
        w = self.w
        if self.convert:
            w = _scratch(self.wdt, w.size).reshape(self.wshape)
            np.copyto(w, self.w)
        acc = np.matmul(a, w)
        if self.offset is not None:
            acc += self.offset
        y = np.empty((self.m, self.C), self.out_dtype)
        np.copyto(y, acc, casting="unsafe")     # integers, exact in both types
        return y.reshape(-1).view(U64), 0


class _KernelDw(CompiledJob):
    """DWCONV in one C call: per output row, int32 accumulators (8-bit lanes; |acc| < 2^31
    proven from the weights), then the post unit on them."""

    kind = "kernel"
    writes_out = True

    def __init__(self, core: Core, regs, setup: JobSetup, plan, kern) -> None:
        s = setup
        if s.prec not in (Precision.INT8, Precision.UINT8):
            raise _NotFusable(f"precision {s.prec.value}")
        _kernel_variant(core, s)
        g = s.geom
        w = _dw_weights(core, s, np.int64)                                    # (taps, C)
        amax = core.operand_bound(s.prec, s.in_off)
        if amax * int(np.abs(w).sum(axis=0).max(initial=0)) >= 1 << 31 or \
                abs(s.in_off) >= 1 << 30:
            raise _NotFusable("depthwise accumulator beyond int32")
        super().__init__(core, regs, setup)
        self.g = g
        self.cl = g.gc * s.prec.lanes
        self.channels = g.nchunk * self.cl
        self.lane_dtype = s.prec.value_dtype
        post = _kernel_post(core, s, plan, self.channels,
                            offset=None if plan is None else plan.offset)
        self.dw = kern.dw_fn(w.astype(np.int32), g, g.nchunk, self.cl, s.in_off,
                             s.prec is Precision.INT8, self.lane_dtype, **post)
        self.warn = core.cfg.ERR_WARN_WRAP32
        self.acc = np.empty((g.ow, self.cl), np.int32)    # one output row
        self.shape = (g.nchunk * g.oh * g.ow, self.cl)

    def run(self, core: Core, words: np.ndarray, out=None) -> tuple[np.ndarray, int]:
        g = self.g
        x = np.ascontiguousarray(words).view(self.lane_dtype).reshape(g.nchunk, g.ih, g.iw, self.cl)
        shape = self.shape
        out = (np.empty(shape, self.lane_dtype) if out is None else out.reshape(shape))
        err = self.warn if self.dw(x, self.acc, out) else 0
        return out.reshape(-1).view(U64), err


# ------------------------------------------------------------------------------------------------
# executing


def execute(core: Core, job: CompiledJob, words: np.ndarray | None,
            out: np.ndarray | None = None, pf: np.ndarray | None = None
            ) -> tuple[np.ndarray | None, int]:
    """Run a compiled job on an idle core: its input words in, its result words out.

    The counters (CYCLES, JOB_CYCLES, WORDS_*), STATUS and ERR change exactly as after the
    protocol's START, stream and DONE; ``core.jobs`` is not appended to. Returns (result words
    or None, ERR bits raised by the job). A job with ``writes_out`` puts its result lanes into
    `out` (a contiguous array of the result lane type and size) and returns words viewing it.
    `pf`: a GEMM/DWCONV job's PF_COUNT prefetch words (s_axis_wgt), written to weight memory
    at PF_ADDR before the datapath runs (they never overlap the job's own weights), also when
    the job then fails at run time."""
    c = core.cfg
    if not core.idle:
        raise RuntimeError("compiled jobs run on an idle core with empty input streams")
    core.regs.update(job.writes)     # the job's register writes and START, as the driver does them
    if job.error:  # failed in CONFIG: takes nothing, ends after CFG_CYCLES
        core.finish_direct(job.cycles, job.error)
        return None, job.error
    n = job.n_in
    if n:
        if words is None or words.size != n:
            got = 0 if words is None else words.size
            raise ValueError(f"{job.opcode}: {got} words for s_axis_{job.stream}, the job takes {n}")
        if words.dtype != U64:
            words = words.astype(U64)
        core.count_words(job.stream, n)
    if job.pf_count:
        if pf is None or pf.size != job.pf_count:
            got = 0 if pf is None else pf.size
            raise ValueError(f"{job.opcode}: {got} prefetch words for s_axis_wgt, PF_COUNT is "
                             f"{job.pf_count}")
        core.count_words("wgt", job.pf_count)
        core.write_weights(job.pf_addr, pf if pf.dtype == U64 else pf.astype(U64))
    res, err = job.run(core, words, out)
    if err & c.ERR_FATAL_MASK:
        cycles = c.CFG_CYCLES
        res = None
    else:
        cycles = job.cycles
        if res is not None:
            core.count_words("res", res.size)
    core.finish_direct(cycles, err)
    return res, err


def account(core: Core, job: CompiledJob, err: int) -> None:
    """What :func:`execute` changes besides the result words (the registers, WORDS_*, CYCLES,
    JOB_CYCLES, STATUS, ERR) for `job`, whose datapath ran elsewhere without a fatal error
    (:mod:`dtpu.hw.replay`'s C runs) with result words of ``job.words_out``."""
    if not core.idle:
        raise RuntimeError("compiled jobs run on an idle core with empty input streams")
    core.regs.update(job.writes)
    if job.n_in:
        core.count_words(job.stream, job.n_in)
    core.count_words("res", job.words_out)
    core.finish_direct(job.cycles, err)


__all__ = ["CompiledJob", "account", "F32_GEMM_K", "Unsupported", "batch", "compile_job", "execute",
           "job_cycles"]
