"""A command list run again, its data path prepared once.

Emulation speed, not semantics. Once a list's bytes have run to their END (the executor keeps
their decoding and their timeline, whose figures depend on the descriptors alone), a later run
of the same bytes only moves and computes data. Decoding each descriptor's fields again, finding
the RUN's compiled job among its register set's variants, resolving the DDR addresses into
arrays and reshaping the result words for the store unit cost about as much Python per
descriptor as the C kernels spend computing a 224x224 net; :class:`ListReplay` does that work
once per list and keeps, per descriptor, an operation that does only what depends on the data:

* LOAD: the DDR words into the core's memory (through :meth:`Core.write_memory`, so its
  bookkeeping of what is stale stays the one the compiled jobs check);
* RUN of a compiled C-kernel job: the gather (kernels.c) from a DDR view resolved once, the job
  (:func:`dtpu.hw.fast.execute`: the core's registers and counters as ever), and the result
  lanes written to DDR through views of the destination made once; when the store unit's
  writes are the result words in order (whole rows of the destination), the kernel writes its
  lanes straight into DDR;
* REGS, END: nothing (a RUN's registers are those the recorded decoding gives it);
* anything else (POST, VEC, jobs on the numpy datapath or the register protocol, a RUN whose
  compiled job a memory write made stale): the executor's own step, with the registers in force.

The views are valid while the DDR keeps its buffers (:attr:`Ddr.layout`) and no fault is
injected into it; otherwise the run takes the executor's own steps. tests/test_cmdlist.py
compares runs through a replay with fresh executors (outputs, cycles, counters, errors).
"""
from __future__ import annotations

import numpy as np

from dtpu.hw import fast, kernels
from dtpu.hw.ddr import Ddr, DdrPool
from dtpu.hw.listformat import ListFault
from dtpu.hw.units.load import pointwise_window

_U64 = np.dtype("<u8")

#: operation kinds of a replayed descriptor
_NOTHING, _LOAD, _RUN, _STEP = range(4)


def replayable(ddr) -> bool:
    """The list's data path may be replayed on `ddr`: the golden model's own DDR (its reads are
    views without side effects, :attr:`Ddr.layout` says when they go stale) with no fault
    injected (a fault must stop the list where a decoding run stops it). Other memories (the
    emulated board's HP port checks every read against the host's cache flushes) take the
    executor's steps."""
    if isinstance(ddr, Ddr):
        return not (ddr.slverr or ddr.decerr or ddr.hang)
    if isinstance(ddr, DdrPool):
        return not (ddr.slverr or ddr.hang)
    return False


class ListReplay:
    """The prepared operations of one decoded list (its steps as :class:`Executor` decoded
    them) on one DDR layout."""

    def __init__(self, ex, ddr, steps: list) -> None:
        self.ddr, self.layout = ddr, ddr.layout
        self.steps = steps
        self.ops: list[tuple] = []
        regs: dict = {}
        # the streams several RUNs gather (a streamed node's pages): they share one gather
        streams: dict = {}
        for step in steps:
            if step[2] == "RUN":
                key = _stream_key(step[4])
                streams[key] = streams.get(key, 0) + 1
        memos = {key: {} for key, count in streams.items() if count > 1}
        for step in steps:
            op = step[2]
            if op == "REGS":
                for off, val in step[4]:
                    regs[off] = val
                self.ops.append((_NOTHING,))
            elif op == "END":
                self.ops.append((_NOTHING,))
            elif op == "LOAD":
                l1, l2 = step[4]
                words = ddr.read(l1["SRC"], 8 * l1["COUNT"]).view(_U64)
                self.ops.append((_LOAD, "LOAD_WGT" if l2["MEM"] == 0 else "LOAD_PARAM",
                                 l2["ADDR"], words))
            elif op == "RUN":
                self.ops.append((_RUN, _Run(step, dict(regs), memos.get(_stream_key(step[4])))))
            else:
                self.ops.append((_STEP, step, dict(regs)))

    def usable(self, ddr) -> bool:
        return ddr is self.ddr and ddr.layout == self.layout

    def run(self, ex, ddr, list_addr: int, r, at: list) -> None:
        """The list's data path; on a fault, `at[0]` is the descriptor it stopped at (with
        r.error_pc and r.error_tag naming it, as the executor's own steps leave them)."""
        core = ex.core
        k = 0
        try:
            for k, op in enumerate(self.ops):
                kind = op[0]
                if kind == _NOTHING:
                    continue
                if kind == _LOAD:
                    core.write_memory(op[1], op[2], op[3])
                elif kind == _RUN:
                    op[1].run(ex, ddr, list_addr, r)
                else:
                    ex.step_data(ddr, list_addr, op[1], r, dict(op[2]))
        except Exception:
            at[0] = k
            step = self.steps[k]
            r.error_pc, r.error_tag = step[0], step[1]["TAG"]
            raise
        step = self.steps[-1]
        r.error_pc, r.error_tag = step[0], step[1]["TAG"]


class _Run:
    """One RUN descriptor: its first replay takes the executor's step, which picks the compiled
    job (kept here); later ones run that job directly while it stays valid."""

    __slots__ = ("step", "d", "regs", "cj", "gather", "out", "scatter", "fatal", "c_run", "warn",
                 "shared")

    def __init__(self, step: tuple, regs: dict, shared: dict | None = None) -> None:
        """`shared`: the gather this RUN's stream shares with other RUNs of the list (filled
        by the first one bound), None if no other RUN gathers it."""
        self.step, self.d, self.regs, self.shared = step, step[4], regs, shared
        self.cj = None
        self.gather = self.out = self.scatter = self.c_run = None

    def run(self, ex, ddr, list_addr: int, r) -> None:
        cj = self.cj
        if cj is None or not cj.valid(ex.core):
            ex.step_data(ddr, list_addr, self.step, r, dict(self.regs))
            self._bind(ex, ddr)
            return
        if self.c_run is not None:
            flag = self.c_run()
            if flag < 0:
                raise MemoryError(f"{cj.opcode}: the C kernels found no scratch")
            fast.account(ex.core, cj, self.warn if flag else 0)
            return
        words = self.gather()
        res, err = fast.execute(ex.core, cj, words, self.out)
        if err & self.fatal:        # (the kernels' jobs are proven not to: see fast.py)
            r.job_err = err
            c = ex.core.cfg
            bits = [n for n, b in c.errors.items() if err & (1 << b)]
            raise ListFault("JOB", f"RUN: the job set ERR={err:#x} ({', '.join(bits)})")
        if self.scatter is not None and res is not None:
            self.scatter(res)

    def _bind(self, ex, ddr) -> None:
        """Prepare the direct run when the executor ran a compiled job (else this RUN keeps
        taking the executor's step)."""
        self.cj = None
        cj = ex.last_form(self.d)
        if not ex.fast_path or not isinstance(cj, fast.CompiledJob) or cj.error or \
                cj.pf_count or cj.setup is None:
            return
        gather = _gather_of(ex, ddr, self.d, cj.n_in)
        plan = ex.scatter_plan(self.d["RES0"], self.d["RES1"], self.d["RES2"])
        if gather is None or plan is None:
            return
        acc, edt, es, outer, pix, inner, wpi, lanes, gw, ch0, hi, dstc = plan
        if outer * pix * inner * wpi != cj.words_out or hi > dstc or ch0 >= hi:
            return
        dst = ddr.read(self.d["RES0"]["DST"], pix * dstc * es).view("<i8" if acc else edt)
        dst = dst.reshape(pix, dstc)
        target = dst[:, ch0:hi]
        self.out = self.scatter = None
        if cj.writes_out and not acc and outer == 1 and wpi * lanes == gw and ch0 == 0 and \
                hi == dstc == inner * gw and edt.itemsize == cj.lane_dtype.itemsize:
            # the result words in order are the destination's bytes: the kernel writes there
            self.out = dst.reshape(-1).view(cj.lane_dtype)
        else:
            shape, cols = (outer, pix, inner, wpi * lanes), hi - ch0
            add = acc and not self.d.get("FIRST", False)

            def scatter(res, copyto=np.copyto, add_to=np.add):
                v = res.view(edt).reshape(shape)[..., :gw].transpose(1, 0, 2, 3)
                v = v.reshape(pix, -1)[:, :cols]
                if add:
                    add_to(target, v, out=target)
                else:
                    copyto(target, v, casting="unsafe")

            self.scatter = scatter
        self.fatal = ex.core.cfg.ERR_FATAL_MASK
        self.gather = gather
        self.cj = cj
        self.c_run = _c_run(ex, ddr, self.d, cj, plan, self.out, dst, self.shared)
        self.warn = ex.core.cfg.ERR_WARN_WRAP32


def _stream_key(d: dict) -> tuple:
    """A RUN's activation stream: its ACT fields."""
    return tuple(tuple(d[k].items()) for k in ("ACT0", "ACT1", "ACT2", "ACT3", "ACT4"))


def _c_run(ex, ddr, d: dict, cj, plan: tuple, out, dst, shared: dict | None = None):
    """The RUN as one call of kernels.c's dtpu_run (its gather, its GEMM and post unit, the
    store unit's writes), or None where it takes the Python calls (a depthwise job, a GEMM on
    BLAS, a stream or a store the call does not describe)."""
    kern = kernels.get() if ex.kernels_ok else None
    igemm = getattr(cj, "igemm", None)
    if kern is None or igemm is None or cj.kind not in ("kernel", "raw"):
        return None
    m, k, cols = cj.m, cj.k, cj.C
    lane = np.dtype(cj.lane_dtype)
    if lane.itemsize != 1 or cj.n_in * 8 != m * k:
        return None
    f = ex.fmt
    act_src, act_shape, act_win, act_span = d["ACT0"], d["ACT1"], d["ACT2"], d["ACT3"]
    L, es = act_src["LANES"], act_src["ESIZE"]
    if act_src["MODE"] != f.act_modes["WINDOWS"] or L * es != 8:
        return None
    n, h, w, ch = act_shape["N"], act_shape["H"], act_shape["W"], act_shape["C"]
    x = ddr.read(act_src["SRC"], n * h * w * ch * es)
    memo = None
    if shared is not None and shared.get("words") is not None:
        words, memo = shared["words"], shared["memo"]       # bound by another RUN
        if words.size != cj.n_in:
            return None
    else:
        words = np.empty(cj.n_in, _U64)
    kp, k0, k1 = act_span["KP"], act_span["K0"], act_span["K1"]
    fields: dict = {"gather": 0, "G": kern.ffi.NULL, "P": kern.ffi.NULL}
    if pointwise_window(act_win, h, w) and kp >= ch:
        if k0 != 0 or k1 * L != kp or n * h * w * kp * es != words.nbytes:
            return None
        lanes = words.view(np.dtype(f"<u{es}") if es > 1 else np.uint8).reshape(n * h * w, kp)
        lanes[:, ch:] = act_src["PAD"] & ((1 << (8 * es)) - 1)
        fields.update(gather=2, rows=n * h * w, row_in=ch * es, row_out=kp * es)
    else:
        if kp < act_win["KH"] * act_win["KW"] * ch:
            return None
        g = kern.gather_fn(es, act_shape, act_win, k0 * L, k1 * L, act_src["PAD"])
        if n * act_win["OH"] * act_win["OW"] * (k1 - k0) * L * es != words.nbytes:
            return None
        fields.update(gather=1, G=g.struct)
    if shared is not None and memo is None:
        xcopy = np.empty(x.nbytes, np.uint8)
        memo = kern.ffi.new("dtpu_memo_t *")
        memo.xbytes, memo.valid = x.nbytes, 0
        memo.xcopy = kern.ffi.cast("uint8_t *", kern.ffi.from_buffer(xcopy))
        shared.update(words=words, memo=memo, xcopy=xcopy)
    fields["memo"] = memo if memo is not None else kern.ffi.NULL
    acc_buf = None
    if cj.kind == "kernel":
        if out is None:
            out = np.empty(m * cols, lane)
        if out.nbytes != cj.words_out * 8 or out.nbytes != m * cols:
            return None
        acc_buf = np.empty(m * cols, np.int32)
        fields.update(job=1, M=igemm.struct, P=cj.post.struct, post_rows=cj.post.rows)
    else:
        out = np.empty(m * cols, np.int32)
        if out.nbytes != cj.words_out * 8:
            return None
        fields.update(job=2, M=igemm.struct)
    acc, edt, es_r, outer, pix, inner, wpi, lanes_r, gw, ch0, hi, dstc = plan
    if out is not None and np.shares_memory(out, dst):
        fields["store"] = 0                 # the kernel writes the destination itself
    else:
        store = 1 if not acc else (3 if d.get("FIRST", False) else 2)
        fields.update(store=store, pix=pix, outer=outer, inner=inner, gw=gw, ch0=ch0, hi=hi,
                      dstc=dstc, wstride=wpi * 8, ses=edt.itemsize, des=8 if acc else es_r)
    run = kern.run_fn(fields, {"x": x, "words": words, "acc": acc_buf, "out": out,
                               "dst": dst})
    return run


def _gather_of(ex, ddr, d: dict, n_in: int):
    """A function returning the RUN's activation words (the executor's gather, on a view of the
    DDR resolved once), or None where the executor's own gather should run."""
    f = ex.fmt
    act_src, act_shape, act_win, act_span = d["ACT0"], d["ACT1"], d["ACT2"], d["ACT3"]
    mode, L, es = act_src["MODE"], act_src["LANES"], act_src["ESIZE"]
    if mode != f.act_modes["WINDOWS"] or L * es != 8 or es not in (1, 2, 4, 8):
        # (CHANNELS: a depthwise job's stream) the executor's gather
        def gather(g=ex.gather, fields=tuple(d[k] for k in ("ACT0", "ACT1", "ACT2", "ACT3",
                                                              "ACT4"))):
            return g(ddr, *fields)
        return gather
    edt = np.dtype(f"u{es}") if es == 1 else np.dtype(f"<u{es}")
    n, h, w, ch = act_shape["N"], act_shape["H"], act_shape["W"], act_shape["C"]
    x = ddr.read(act_src["SRC"], n * h * w * ch * es).view(edt).reshape(n, h, w, ch)
    k0, k1, kp = act_span["K0"], act_span["K1"], act_span["KP"]
    if pointwise_window(act_win, h, w) and kp >= ch:
        if not 0 <= k0 < k1 <= kp // L or kp % L or (k1 - k0) * (n * h * w) != n_in:
            return None
        pad = edt.type(act_src["PAD"] & ((1 << (8 * es)) - 1))
        lanes = np.empty((n * h * w, kp), edt)
        lanes[:, ch:] = pad
        src = x.reshape(-1, ch)
        body = lanes[:, :ch]
        if k0 == 0 and k1 * L == kp:
            words = lanes.view(_U64).reshape(-1)

            def gather(copyto=np.copyto):
                copyto(body, src)
                return words
        else:
            def gather(copyto=np.copyto, cut=slice(k0 * L, k1 * L)):
                copyto(body, src)
                return np.ascontiguousarray(lanes[:, cut]).view(_U64).reshape(-1)
        return gather
    kern = kernels.get() if ex.kernels_ok else None
    if kern is None:
        return None

    def gather(gc=ex.gather_c):
        return gc(kern, x, act_src, act_shape, act_win, act_span, L, es)
    return gather
