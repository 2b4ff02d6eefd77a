"""The compiled fast path's C kernels (kernels.c beside this file): build once, load with cffi.

:func:`get` returns the loaded library, or None when it cannot be had (no C compiler, a build
error, ``DTPU_KERNELS=0``); :mod:`dtpu.hw.fast` then keeps its numpy datapaths, which give the
same words. The shared library is built with the system's C compiler into the directory of the
delegate's build (``pylib/dtpu/_build/`` if writable, else ``~/.cache/dtpu/``, or
``$DTPU_BUILD_DIR``) under a name keyed by the source, the compiler flags and the machine, so a
changed source or another host never loads a stale file.
"""
from __future__ import annotations

import contextlib
import hashlib
import logging
import os
import platform
import shutil
import subprocess
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path

import numpy as np

log = logging.getLogger(__name__)

SOURCE = Path(__file__).with_name("kernels.c")
#: no -ffast-math: the kernels rely on IEEE float64 (round to nearest, no reassociation) and
#: integer semantics. -fno-trapping-math only lets the compiler evaluate both arms of a
#: floating-point select (so the fused post unit vectorizes); it changes no result.
CFLAGS = ["-O3", "-march=native", "-fno-trapping-math", "-fPIC", "-shared",
          "-fno-strict-aliasing", "-Wall"]

#: the structs and entry points, written once in kernels.h (kernels.c includes it)
HEADER = SOURCE.with_name("kernels.h")
CDEF = HEADER.read_text()

ACC_KIND = {np.dtype(np.float32): 0, np.dtype(np.float64): 1, np.dtype(np.int32): 2}
OUT_KIND = {np.dtype(np.int8): 0, np.dtype(np.uint8): 1, np.dtype(np.int16): 2}
#: rows shorter than this many channels are processed several rows at a time (parameters
#: tiled), so that the inner loop is long enough to vectorize
MIN_ROW = 64

_lock = threading.Lock()
_state: dict = {}


def _tiling(c: int, rows_per_block: int) -> int:
    """Rows per kernel row: the largest divisor of rows_per_block up to ceil(MIN_ROW / c)."""
    want = max(1, -(-MIN_ROW // c))
    return max(r for r in range(1, min(want, rows_per_block) + 1) if rows_per_block % r == 0)


class Kernels:
    """The loaded library. Each ``*_fn`` binds a job's constants once (a C struct, its arrays
    kept alive here) and returns a runner that checks only what changes per call (dtype and
    shape of the arrays it is given: the C side trusts them), so a call costs one foreign
    call. Arrays go to C through cffi's from_buffer, which refuses non-contiguous ones."""

    def __init__(self, ffi, lib) -> None:
        self.ffi, self.lib = ffi, lib

    def _bind_post(self, acc_dtype, out_dtype, c: int, rows: int, rows_per_block: int,
                   exact: dict | None, fused: dict | None, unit: int | None = None):
        """`unit`: the rows a call takes at a time (default rows_per_block): the tiling
        divides it."""
        ffi = self.ffi
        blocks = -(-rows // rows_per_block)
        unit = rows_per_block if unit is None else unit
        rep = _tiling(c, unit) if rows % rows_per_block == 0 and rows_per_block % unit == 0 else 1
        P = ffi.new("dtpu_post_t *")
        keep = []

        def const(a, dtype, ctype):
            a = np.ascontiguousarray(a, dtype)
            if a.size != blocks * c:
                raise ValueError(f"post unit parameters: {a.size} values, expected {blocks} x {c}")
            a = np.ascontiguousarray(np.tile(a.reshape(blocks, 1, c), (1, rep, 1)).reshape(-1))
            keep.append(a)
            return ffi.cast(ctype, ffi.from_buffer(a))

        P.akind, P.okind = ACC_KIND[np.dtype(acc_dtype)], OUT_KIND[np.dtype(out_dtype)]
        P.c, P.rows_per_block = c * rep, rows_per_block // rep
        if exact is not None:
            P.exact, P.variant = 1, int(exact["variant"])
            P.bias, P.mult, P.shift, P.zp = (const(exact[k], np.int64, "int64_t *")
                                             for k in ("bias", "mult", "shift", "zp"))
            info = np.iinfo(out_dtype)
            P.act_lo, P.act_hi = int(exact["act_lo"]), int(exact["act_hi"])
            P.type_lo, P.type_hi = int(info.min), int(info.max)
        else:
            P.exact = 0
            P.scale, P.offset, P.thr, P.delta = (const(fused[k], np.float64, "double *")
                                                 for k in ("scale", "offset", "thr", "delta"))
            P.lo, P.hi = float(fused["lo"]), float(fused["hi"])
        return P, keep, rows // rep

    def post_fn(self, acc_dtype, out_dtype, c: int, rows: int, rows_per_block: int, *,
                exact: dict | None = None, fused: dict | None = None):
        """runner(acc (rows, c), out (rows, c)) -> 1 if a total wrapped (ERR_WARN_WRAP32, exact
        only) else 0. Row r takes the parameters of block r // rows_per_block (arrays of
        blocks * c). `exact`: bias, mult, shift, zp, variant (0 SINGLE, 1 DOUBLE, 2 DOUBLE_UP),
        act_lo, act_hi; `fused`: scale, offset, thr, delta, lo, hi (dtpu.hw.fast._FusedPost)."""
        P, keep, krows = self._bind_post(acc_dtype, out_dtype, c, rows, rows_per_block, exact,
                                         fused)
        fn, buf = self.lib.dtpu_post, self.ffi.from_buffer
        shape, acc_dtype, out_dtype = (rows, c), np.dtype(acc_dtype), np.dtype(out_dtype)

        def run(acc: np.ndarray, out: np.ndarray) -> int:
            if acc.shape != shape or out.shape != shape or acc.dtype != acc_dtype or \
                    out.dtype != out_dtype:
                raise ValueError(f"post unit kernel: acc {acc.dtype}{acc.shape}, out "
                                 f"{out.dtype}{out.shape}; bound for {acc_dtype}{shape} -> "
                                 f"{out_dtype}")
            return fn(P, buf(acc), krows, buf(out, require_writable=True))

        run.keep = (P, keep)
        run.struct, run.rows = P, krows      # (dtpu_run binds them: :meth:`run_fn`)
        return run

    def dw_fn(self, w: np.ndarray, g, nchunk: int, cl: int, in_off: int, signed: bool,
              out_dtype, *, exact: dict | None = None, fused: dict | None = None):
        """runner(x (nchunk, ih, iw, cl) int8/uint8, acc (ow, cl) int32 scratch (one output
        row), out (nchunk*oh*ow, cl)) -> the post unit's flag; w (taps, nchunk*cl) int32 tap
        weights with WGT_OFFSET applied; the post unit's parameters per chunk (nchunk * cl)."""
        ffi = self.ffi
        w = np.ascontiguousarray(w, np.int32)
        if w.shape != (g.kh * g.kw, nchunk * cl):
            raise ValueError(f"depthwise weights {w.shape}, expected {(g.kh * g.kw, nchunk * cl)}")
        D = ffi.new("dtpu_dw_t *")
        D.xsigned = int(signed)
        (D.nchunk, D.ih, D.iw, D.cl, D.kh, D.kw, D.oh, D.ow, D.sy, D.sx, D.dy, D.dx, D.pt,
         D.pl) = (nchunk, g.ih, g.iw, cl, g.kh, g.kw, g.oh, g.ow, g.sy, g.sx, g.dy, g.dx, g.pt,
                  g.pl)
        D.off = int(in_off)
        D.w = ffi.cast("int32_t *", ffi.from_buffer(w))
        rep = max(1, -(-MIN_ROW // cl))     # unit stride: runs of rep*cl lanes, see kernels.c
        wt = np.ascontiguousarray(np.tile(w.reshape(g.kh * g.kw, nchunk, 1, cl), (1, 1, rep, 1)))
        D.rcl, D.wt = rep * cl, ffi.cast("int32_t *", ffi.from_buffer(wt))
        rows = nchunk * g.oh * g.ow
        P, keep, _ = self._bind_post(np.int32, out_dtype, cl, rows, g.oh * g.ow, exact, fused,
                                     unit=g.ow)
        fn, buf = self.lib.dtpu_dw, ffi.from_buffer
        x_dtype = np.dtype(np.int8 if signed else np.uint8)
        x_shape, acc_shape, out_shape = (nchunk, g.ih, g.iw, cl), (g.ow, cl), (rows, cl)
        out_dtype = np.dtype(out_dtype)

        def run(x: np.ndarray, acc: np.ndarray, out: np.ndarray) -> int:
            if x.dtype != x_dtype or x.shape != x_shape or acc.dtype != np.int32 or \
                    acc.shape != acc_shape or out.dtype != out_dtype or out.shape != out_shape:
                raise ValueError(f"depthwise kernel: x {x.dtype}{x.shape}, acc {acc.dtype}"
                                 f"{acc.shape}, out {out.dtype}{out.shape}; bound for "
                                 f"{x_dtype}{x_shape} -> int32{acc_shape} -> {out_dtype}{out_shape}")
            return fn(D, P, buf(x), buf(acc, require_writable=True),
                      buf(out, require_writable=True))

        run.keep = (D, P, w, wt, keep)
        return run

    def gather_fn(self, es: int, act_shape: dict, act_win: dict, j0: int, j1: int, pad: int):
        """runner(x, out) for a WINDOWS stream: x the (n, h, w, c) tensor's bytes (any
        contiguous array of n*h*w*c `es`-byte elements), out (n*oh*ow, j1-j0) elements of `es`
        bytes: lanes j0..j1-1 of each pixel's K-vector, PAD (`pad`, its low es bytes) outside
        the image and past K. The caller checks the fields (KP >= K); bound once per RUN."""
        G = self.ffi.new("dtpu_gather_t *")
        n, h, w, c = act_shape["N"], act_shape["H"], act_shape["W"], act_shape["C"]
        (G.es, G.n, G.h, G.w, G.c, G.kh, G.kw, G.sy, G.sx, G.dy, G.dx, G.pt, G.pl, G.oh, G.ow,
         G.j0, G.j1) = (es, n, h, w, c, act_win["KH"], act_win["KW"], act_win["SY"], act_win["SX"],
                        act_win["DY"], act_win["DX"], act_win["PT"], act_win["PL"], act_win["OH"],
                        act_win["OW"], j0, j1)
        G.pad = pad & ((1 << (8 * es)) - 1)
        fn, buf = self.lib.dtpu_gather_windows, self.ffi.from_buffer
        x_bytes = n * h * w * c * es
        out_bytes = n * act_win["OH"] * act_win["OW"] * (j1 - j0) * es

        def run(x: np.ndarray, out: np.ndarray) -> None:
            if x.nbytes != x_bytes or out.nbytes != out_bytes or not x.flags.c_contiguous:
                raise ValueError(f"window gather: x {x.nbytes} bytes, out {out.nbytes} bytes; "
                                 f"bound for {x_bytes} (contiguous) -> {out_bytes}")
            fn(G, buf(x), buf(out, require_writable=True))

        run.keep = run.struct = G
        return run

    def gemm_fn(self, w: np.ndarray, signed: bool, m: int, coff: np.ndarray | None = None):
        """runner(a (m, k) int8/uint8, acc (m, c) int32): acc = a @ w (+ coff per column); w
        (k, c) integers within int16, coff int32 or None. The caller proves |acc| < 2^31."""
        ffi = self.ffi
        k, c = w.shape
        if w.size and (w.min() < -2**15 or w.max() >= 2**15):
            raise ValueError(f"GEMM kernel: weights in [{w.min()}, {w.max()}], accepted: int16")
        kp = -(-k // 16) * 16               # whole vectors: rows zero past k
        wt = np.zeros((c, kp), np.int16)
        wt[:, :k] = w.T
        G = ffi.new("dtpu_gemm_t *")
        G.asigned, G.m, G.k, G.c, G.kp = int(signed), m, k, c, kp
        G.wt = ffi.cast("int16_t *", ffi.from_buffer(wt))
        keep = [G, wt]
        if coff is not None:
            coff = np.ascontiguousarray(coff, np.int32)
            if coff.shape != (c,):
                raise ValueError(f"GEMM kernel: column offsets {coff.shape}, expected {(c,)}")
            G.coff = ffi.cast("int32_t *", ffi.from_buffer(coff))
            keep.append(coff)
        fn, buf = self.lib.dtpu_gemm_i8, ffi.from_buffer
        a_dtype = np.dtype(np.int8 if signed else np.uint8)
        a_shape, acc_shape = (m, k), (m, c)

        def run(a: np.ndarray, acc: np.ndarray) -> None:
            if a.dtype != a_dtype or a.shape != a_shape or not a.flags.c_contiguous or \
                    acc.dtype != np.int32 or acc.shape != acc_shape:
                raise ValueError(f"GEMM kernel: a {a.dtype}{a.shape}, acc {acc.dtype}{acc.shape}; "
                                 f"bound for {a_dtype}{a_shape} (contiguous) -> int32{acc_shape}")
            if fn(G, buf(a), ffi.cast("int32_t *", buf(acc, require_writable=True))):
                raise MemoryError(f"GEMM kernel: no scratch for a row of {kp} lanes")

        run.keep = keep
        run.struct = G
        return run

    def run_fn(self, fields: dict, arrays: dict):
        """runner() -> dtpu_run's answer for one RUN bound once (kernels.h, dtpu_run_t):
        `fields` its integers and the structs of the runners it chains (gather_fn's, gemm_fn's,
        post_fn's ``struct``), `arrays` its buffers (x, words, acc, out, dst; contiguous, kept
        alive here, so the caller must not resize them)."""
        ffi = self.ffi
        R = ffi.new("dtpu_run_t *")
        for name, value in fields.items():
            setattr(R, name, value)
        for name, a in arrays.items():
            if a is None:
                continue
            if not a.flags.c_contiguous:
                raise ValueError(f"dtpu_run: {name} is not contiguous")
            setattr(R, name, ffi.cast("int32_t *" if name == "acc" else "void *",
                                      ffi.from_buffer(a, require_writable=name != "x")))
        fn = self.lib.dtpu_run

        def run() -> int:
            return fn(R)

        run.keep = (R, fields, arrays)
        return run

    # -- one-off calls (tests) -------------------------------------------------------------------

    def post_exact(self, acc: np.ndarray, rows_per_block: int, bias, mult, shift, zp,
                   variant: int, act_lo: int, act_hi: int, out: np.ndarray) -> int:
        """The exact post unit once: acc (rows, c) -> out (rows, c); 1 if a total wrapped."""
        rows, c = acc.shape
        return self.post_fn(acc.dtype, out.dtype, c, rows, rows_per_block, exact=dict(
            bias=bias, mult=mult, shift=shift, zp=zp, variant=variant, act_lo=act_lo,
            act_hi=act_hi))(acc, out)

    def post_fused(self, acc: np.ndarray, rows_per_block: int, scale, offset, thr, delta,
                   lo: float, hi: float, out: np.ndarray) -> None:
        rows, c = acc.shape
        self.post_fn(acc.dtype, out.dtype, c, rows, rows_per_block, fused=dict(
            scale=scale, offset=offset, thr=thr, delta=delta, lo=lo, hi=hi))(acc, out)

    def dw(self, x: np.ndarray, w: np.ndarray, g, in_off: int, out: np.ndarray, *,
           exact: dict | None = None, fused: dict | None = None) -> int:
        """A depthwise job once: x (nchunk, ih, iw, cl) int8/uint8, w (taps, nchunk*cl) int32
        -> out (nchunk*oh*ow, cl); the post unit's flag."""
        nchunk, _, _, cl = x.shape
        run = self.dw_fn(w, g, nchunk, cl, in_off, x.dtype == np.int8, out.dtype, exact=exact,
                         fused=fused)
        return run(x, np.empty((g.ow, cl), np.int32), out)


def _i64(a) -> np.ndarray:
    return np.ascontiguousarray(np.asarray(a, dtype=np.int64).reshape(-1))


def _stream_sim(self, wa, per_word: int, need, intake: int, rd_free: int, consts: tuple,
                blocks: tuple | None, takes: list | None, store: tuple | None = None) -> tuple:
    """dtpu.hw.units.load.stream_sim in C (kernels.c dtpu_stream_sim): the same arguments
    (`consts`: RL, burst, outstanding, ACT_ELEM_FIFO, ACT_REQ_FIFO, ACT_READ_BUFFER, the beat's
    cycles to the packer; `store`: units.store.store_consts of its `res`, whose "w_end" it sets)
    and the same result."""
    ffi = self.ffi
    wa, need = _i64(wa), _i64(need)
    S = ffi.new("dtpu_stream_t *")
    S.n, S.nw, S.per_word, S.intake, S.rd_free = wa.size, need.size, per_word, intake, rd_free
    S.rl, S.burst, S.outst, S.ef_d, S.rq_d, S.buf_d, S.to_pk = consts
    S.blk_next, S.blk_left, S.blk_words, S.blk_gap = blocks[:4] if blocks else (0, 0, 0, 0)
    S.blk_addr = blocks[4] if blocks and len(blocks) > 4 else 0
    S.wa = ffi.cast("int64_t *", ffi.from_buffer(wa))
    S.need = ffi.cast("int64_t *", ffi.from_buffer(need))
    blk = np.zeros(2 * max(1, S.blk_left), np.int64)
    S.blk_reads = ffi.cast("int64_t *", ffi.from_buffer(blk))
    tk = np.zeros(max(1, need.size), np.int64) if takes is not None else None
    S.takes = ffi.cast("int64_t *", ffi.from_buffer(tk)) if tk is not None else ffi.NULL
    keep = []
    if store is not None:
        rt, rwa = _i64(store[0]), _i64(store[1])
        keep += [rt, rwa]
        S.n_res = rt.size
        S.res_t = ffi.cast("int64_t *", ffi.from_buffer(rt))
        S.res_wa = ffi.cast("int64_t *", ffi.from_buffer(rwa))
        S.hold, S.aw_d, S.slot, _outst, _burst, S.wl, S.end0, S.tail = store[2:10]
    else:
        S.n_res = 0
    if self.lib.dtpu_stream_sim(S) != 0:
        raise MemoryError("dtpu_stream_sim")
    none = np.iinfo(np.int64).min
    if store is not None:
        store[10]["w_end"] = None if S.w_end == none else int(S.w_end)
    if takes is not None:
        takes.extend(tk[:need.size].tolist())
    blks = [[int(blk[2 * i]), int(blk[2 * i + 1])] for i in range(S.n_blk)]
    return (int(S.stall), None if S.first == none else int(S.first),
            None if S.end == none else int(S.end), int(S.beats), blks,
            None if S.blk_next_out == none else int(S.blk_next_out))


Kernels.stream_sim = _stream_sim


def _store_sim(self, addr, kept, offer, consts: tuple, prior: tuple) -> tuple:
    """dtpu.hw.units.store.store_sim in C (kernels.c dtpu_store_sim): `addr`, `kept` its chunks'
    byte addresses and kept bytes, `offer`, `consts` (write queue words, MEM_WRITE_LATENCY,
    MEM_BURST_BEATS, bursts in flight, SEQ_STORE_GAP), `prior`; the same result."""
    ffi = self.ffi
    addr, kept, offer = _i64(addr), _i64(kept), _i64(offer)
    pr = _i64(prior) if len(prior) else np.zeros(1, np.int64)
    n = addr.size
    hs = np.zeros(max(1, n), np.int64)
    b_due = np.zeros(len(prior) + 4 * n + 16, np.int64)
    S = ffi.new("dtpu_store_t *")
    S.n, S.n_prior = n, len(prior)
    S.wq, S.wl, S.burst, S.outst, S.max_gap = consts
    S.addr = ffi.cast("int64_t *", ffi.from_buffer(addr))
    S.kept = ffi.cast("int64_t *", ffi.from_buffer(kept))
    S.offer = ffi.cast("int64_t *", ffi.from_buffer(offer))
    S.prior = ffi.cast("int64_t *", ffi.from_buffer(pr))
    S.hs = ffi.cast("int64_t *", ffi.from_buffer(hs))
    S.b_due = ffi.cast("int64_t *", ffi.from_buffer(b_due))
    if self.lib.dtpu_store_sim(S) != 0:
        raise MemoryError("dtpu_store_sim")
    none = np.iinfo(np.int64).min
    return (int(S.held), hs[:n].tolist(), None if S.last_b == none else int(S.last_b),
            b_due[:S.n_b].tolist(), int(S.w_beats))


Kernels.store_sim = _store_sim


def _build_dir() -> Path:
    override = os.environ.get("DTPU_BUILD_DIR")
    if override:
        return Path(override)
    local = Path(__file__).resolve().parents[1] / "_build"
    try:
        local.mkdir(exist_ok=True)
        if os.access(local, os.W_OK):
            return local
    except OSError:
        pass
    return Path.home() / ".cache" / "dtpu"


def _machine_tag() -> str:
    flags = ""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("flags"):
                flags = line
                break
    except OSError:
        pass
    return f"{platform.machine()}|{platform.processor()}|{flags}"


def _build(cc: str) -> Path:
    key = hashlib.sha256(SOURCE.read_bytes() + HEADER.read_bytes()
                         + " ".join([cc, *CFLAGS]).encode()
                         + _machine_tag().encode()).hexdigest()[:16]
    out_dir = _build_dir()
    out_dir.mkdir(parents=True, exist_ok=True)
    target = out_dir / f"dtpu_kernels-{key}.so"
    if target.exists():
        return target
    with tempfile.TemporaryDirectory(prefix="dtpu-kernels-") as work:
        tmp = Path(work) / target.name
        subprocess.run([cc, *CFLAGS, "-o", str(tmp), str(SOURCE), "-lm"], check=True,
                       capture_output=True, text=True)
        staged = out_dir / (target.name + f".{os.getpid()}.tmp")
        shutil.copyfile(tmp, staged)
        os.replace(staged, target)   # atomic: a concurrent build writes the same bytes
    log.info("built %s", target)
    return target


def get() -> Kernels | None:
    """The kernels, built on first use; None if unavailable (the numpy paths are used)."""
    if "lib" in _state:
        return _state["lib"]
    with _lock:
        if "lib" in _state:
            return _state["lib"]
        lib = None
        if os.environ.get("DTPU_KERNELS", "1").lower() not in ("0", "false", "no", "off"):
            cc = os.environ.get("CC") or shutil.which("cc") or shutil.which("gcc")
            try:
                import cffi

                if cc is None:
                    raise FileNotFoundError("no C compiler (cc) on PATH")
                path = _build(cc)
                ffi = cffi.FFI()
                ffi.cdef(CDEF)
                lib = Kernels(ffi, ffi.dlopen(str(path)))
            except (OSError, ImportError, subprocess.CalledProcessError) as e:
                detail = getattr(e, "stderr", "") or e
                log.warning("dtpu: C kernels unavailable (%s); the fast path stays with numpy",
                            str(detail).strip()[:500])
                lib = None
        _state["lib"] = lib
        return lib


@contextlib.contextmanager
def fresh_lookup() -> Iterator[None]:
    """:func:`get` answers afresh inside the block: a build under another ``CC``, ``CFLAGS``
    or ``DTPU_BUILD_DIR`` (a failing compiler's fallback to numpy included) is tried there and
    stays there; the process's own kernels (or their absence) come back after it."""
    global _state
    with _lock:
        saved, _state = _state, {}
    try:
        yield
    finally:
        with _lock:
            _state = saved


__all__ = ["Kernels", "fresh_lookup", "get"]
