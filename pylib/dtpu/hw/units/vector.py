"""The vector unit of contract 2.1 (VEC descriptor; docs/architecture.md, "The vector unit"):
its arithmetic on the DDR bytes and its place in the list's timeline.

The unit sits beside the post unit on the load unit's read path and the store unit's write
path. It reads operand A (and B, or a TABLE's 256 bytes) from DDR as contiguous 8-bit NHWC
tensors, combines VEC_LANES lanes a cycle and writes the contiguous 8-bit result. Its integers are TFLite's Prepare results
carried in the descriptor (:mod:`dtpu.hw.vec_lower`), and its arithmetic is
:mod:`dtpu.reference.vector`'s kernels fed with them, proven against the interpreter.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from dtpu.hw.config import ceil_div
from dtpu.hw.listformat import Format, ListFault
from dtpu.hw.units import store as store_unit
from dtpu.reference import pair_table
from dtpu.reference import vector as rv


#: a TABLE's bytes at SRC_B: one output byte per input byte (32 words, read once per VEC)
TABLE_BYTES = 256


def _signed(v: int, bits: int) -> int:
    return v - (1 << bits) if v >> (bits - 1) else v


@dataclass(frozen=True)
class VecJob:
    """A decoded VEC descriptor: what the unit reads, computes and writes."""

    kind: str
    dtype: np.dtype
    bmode: int
    src_a: int
    src_b: int
    dst: int
    shape: tuple                # A: (N, H, W, C)
    out_shape: tuple
    fields: dict

    @property
    def a_bytes(self) -> int:
        return int(np.prod(self.shape))

    @property
    def b_bytes(self) -> int:
        if self.kind == "TABLE":
            return TABLE_BYTES
        if self.kind not in ("ADD", "MUL"):
            return 0
        return self.shape[3] if self.bmode == 1 else self.a_bytes

    @property
    def out_bytes(self) -> int:
        """Bytes from DST to the last one written (a COPY's pixels OW bytes apart)."""
        if self.kind == "COPY":
            n, h, w, c = self.shape
            return (n * h * w - 1) * self.dst_stride + c
        return int(np.prod(self.out_shape))

    @property
    def dst_stride(self) -> int:
        """A COPY's bytes between two pixels at DST (VEC7.OW)."""
        return int(self.fields["VEC7"]["OW"]) if self.kind == "COPY" else self.shape[3]


def decode(fmt: Format, d: dict) -> VecJob:
    """The VEC descriptor's fields (words VEC0..VEC7 by name) checked and decoded; a field the
    unit cannot take is BAD_FIELD, naming it and what is accepted."""
    v0, v1, v2, v3, v4 = d["VEC0"], d["VEC1"], d["VEC2"], d["VEC3"], d["VEC4"]
    kinds = {code: name for name, code in fmt.c2["vec_ops"].items()}
    kind = kinds.get(v0["KIND"])
    if kind is None:
        raise ListFault("BAD_FIELD", f"VEC KIND={v0['KIND']}; accepted: {fmt.c2['vec_ops']}")
    if v0["BMODE"] > 1 or (v0["BMODE"] and kind not in ("ADD", "MUL")):
        raise ListFault("BAD_FIELD", f"VEC BMODE={v0['BMODE']} with {kind}; accepted: 0, or 1 "
                        f"for ADD and MUL")
    n, h, w, c = v2["N"], v3["H"], v3["W"], v3["C"]
    if min(n, h, w, c) == 0:
        raise ListFault("BAD_FIELD", f"VEC shape {(n, h, w, c)}: every dimension must be >= 1")
    shape = (n, h, w, c)
    if kind in ("AVG_POOL", "MAX_POOL"):
        v7 = d["VEC7"]
        if min(v4["FH"], v4["FW"], v4["SH"], v4["SW"], v7["OH"], v7["OW"]) == 0:
            raise ListFault("BAD_FIELD", f"VEC pool fields {v4}, {v7}: FH, FW, SH, SW, OH, OW "
                            f">= 1")
        # every window holds an in-image tap (what TFLite's SAME and VALID give): the first
        # one's padding inside it, the last ones starting inside the image
        if (v4["PT"] >= v4["FH"] or v4["PL"] >= v4["FW"]
                or (v7["OH"] - 1) * v4["SH"] >= h + v4["PT"]
                or (v7["OW"] - 1) * v4["SW"] >= w + v4["PL"]):
            raise ListFault("BAD_FIELD", f"VEC pool fields {v4}, {v7} over {h}x{w}: a window "
                            f"without an in-image tap; accepted PT < FH, PL < FW, "
                            f"(OH-1)*SH < H+PT, (OW-1)*SW < W+PL")
        # AVG_POOL divides by a reciprocal exact up to VEC_AVG_AREA taps (dtpu_vec_pool)
        area = int(fmt.mem["VEC_AVG_AREA"])
        if kind == "AVG_POOL" and v4["FH"] * v4["FW"] > area:
            raise ListFault("BAD_FIELD", f"VEC AVG_POOL window {v4['FH']}x{v4['FW']} of "
                            f"{v4['FH'] * v4['FW']} taps; accepted FH*FW <= VEC_AVG_AREA = "
                            f"{area}")
        out_shape = (n, v7["OH"], v7["OW"], c)
    elif kind == "MEAN":
        out_shape = (n, c)
    else:
        out_shape = shape
    if kind == "TABLE" and v1["SRC_B"] % 8:
        raise ListFault("BAD_FIELD", f"VEC TABLE at SRC_B={v1['SRC_B']:#x}: the table must be "
                        f"8-byte aligned")
    if kind == "COPY" and d["VEC7"]["OW"] < c:
        raise ListFault("BAD_FIELD", f"VEC COPY of {c} channels into pixels of OW="
                        f"{d['VEC7']['OW']}: accepted OW >= C")
    # a COPY writes a channel slice: its DST is any byte (the store unit's strobes)
    dst_aligned = v2["DST"] if kind != "COPY" else 0
    if (v1["SRC_A"] | v1["SRC_B"] | dst_aligned) % 8:
        raise ListFault("BAD_FIELD", f"VEC addresses {v1['SRC_A']:#x}, {v1['SRC_B']:#x}, "
                        f"{v2['DST']:#x}: each must be 8-byte aligned (a COPY's DST any byte)")
    dtype = np.dtype(np.int8 if v0["SIGNED"] else np.uint8)
    return VecJob(kind, dtype, v0["BMODE"], v1["SRC_A"], v1["SRC_B"], v2["DST"], shape,
                  out_shape, d)


def compute(job: VecJob, a: np.ndarray, b: np.ndarray | None) -> np.ndarray:
    """The unit's arithmetic on the operands (8-bit arrays of the job's shapes; a TABLE's B is
    its 256 bytes)."""
    if job.kind == "TABLE":
        return b.view(np.uint8).reshape(-1)[a.view(np.uint8)]
    if job.kind == "COPY":
        return a
    d = job.fields
    v0, v4, v5, v6, v7 = d["VEC0"], d["VEC4"], d["VEC5"], d["VEC6"], d["VEC7"]
    lo, hi, out_off = _signed(v0["ACT_MIN"], 16), _signed(v0["ACT_MAX"], 16), \
        _signed(v0["OUT_OFF"], 16)
    in1, in2 = _signed(v7["IN1_OFF"], 16), _signed(v7["IN2_OFF"], 16)
    mo, sho = _signed(v6["MO"], 32), _signed(v6["SHO"], 8)
    if job.kind == "ADD":
        p = rv.AddParams(in1, in2, out_off, _signed(v5["M1"], 32), _signed(v6["SH1"], 8),
                         _signed(v5["M2"], 32), _signed(v6["SH2"], 8), mo, sho, lo, hi)
        return pair_table.apply(rv.add, a, b, p)
    if job.kind == "MUL":
        return pair_table.apply(rv.mul, a, b, rv.MulParams(in1, in2, out_off, mo, sho, lo, hi))
    if job.kind == "MEAN":
        n, h, w, c = job.shape
        return rv.mean_hw(a, rv.MeanParams(h * w, in1, mo, sho, out_off, lo, hi))
    g = rv.PoolGeometry(v4["FH"], v4["FW"], v4["SH"], v4["SW"], v4["PT"], v4["PL"],
                        v7["OH"], v7["OW"])
    return (rv.average_pool if job.kind == "AVG_POOL" else rv.max_pool)(a, g, lo, hi)


def execute(ddr, job: VecJob) -> None:
    """Read the operands from DDR, compute, write the result (a failed read or write is the
    DDR's fault, raised before anything is written)."""
    a = ddr.read(job.src_a, job.a_bytes).view(job.dtype).reshape(job.shape)
    b = None
    if job.b_bytes:
        b = ddr.read(job.src_b, job.b_bytes).view(job.dtype)
        if job.kind != "TABLE":
            b = b.reshape((1, 1, 1, job.shape[3]) if job.bmode == 1 else job.shape)
    out = compute(job, a, b)
    if job.kind == "COPY":      # pixel p's C bytes at DST + p * OW; the bytes between untouched
        n, h, w, c = job.shape
        span = ddr.read(job.dst, job.out_bytes)
        at = np.arange(n * h * w)[:, None] * job.dst_stride + np.arange(c)[None, :]
        span[at] = np.ascontiguousarray(out).view(np.uint8).reshape(n * h * w, c)
        return
    ddr.write(job.dst, np.ascontiguousarray(out).view(np.uint8).reshape(-1))


# -- cycles

@dataclass(frozen=True)
class VecCost:
    """The unit's work in cycles and beats: `read_beats` on the read channel (B first when it
    is a broadcast vector or a TABLE's 32 words, else A and B interleaved), `ops` lane-word
    operations at one a cycle from the first beat on, `tail` operations after the last one
    (MEAN's requantization of its sums), `out_words` written; `gaps`: how many cycles before the last result word the k-th
    word before it is made, when they do not come one a cycle (Timeline.store_tail's `gaps`);
    `late`: 1 when the last result word comes a cycle after the last operation (Timeline.store_tail's
    `late`); `early`: operations after the one that makes the last result word (a pool's pixels
    that no window reads), which its writes do not wait for."""

    read_beats: int
    ops: int
    tail: int
    out_words: int
    gaps: tuple | None = None
    late: int = 0
    early: int = 0

    def stall_free(self, lat: int) -> int:
        """Cycles with the operands there when needed: the read channel's beats or the
        operations, whichever is more, the tail and the pipeline's latency."""
        return max(self.read_beats, self.ops) + self.tail + lat


def _chunk_gaps(words: int, burst: int, steps: int = 1) -> tuple | None:
    """Result gaps of an element-wise job whose A and B of one shape are read as alternating
    chunks of `burst` words (A's, then B's: a burst-sized read of each, the read master's
    bursts being contiguous): each chunk's results come one every `steps` cycles (8 /
    VEC_RQ_LANES) with B's words, and between chunks the next chunk's A beats, which wait for
    the lanes too (`steps` + p cycles from a chunk's last result to the next one's first, p
    the next chunk's words). Only the last burst matters to the store tail
    (:meth:`Timeline.store_tail`): with a partial last chunk of p words after a full one, the
    word p before the last came steps x p + p cycles before it."""
    p = words % burst
    if steps == 1 and (not p or words < burst):
        return None
    n = (p if p else min(words, burst)) + 1
    return tuple(steps * k + (p if p and words >= burst and k >= p else 0) for k in range(n))


def ew_beat_times(job: VecJob, burst: int, steps: int) -> np.ndarray:
    """The cycle of each operand beat of an ADD / MUL after its first, in stream order, with
    8 / VEC_RQ_LANES = `steps`: every beat waits for the lanes (dtpu_vec's ew_free), a beat
    that makes a word pair (B's in BMODE 0, A's in BMODE 1) keeps them `steps` cycles, any
    other one cycle."""
    a_words = ceil_div(job.a_bytes, 8)
    if job.bmode == 1:
        b_words = ceil_div(job.b_bytes, 8)
        cost = np.concatenate((np.ones(b_words, np.int64), np.full(a_words, steps, np.int64)))
    else:
        chunks = [min(burst, a_words - s) for s in range(0, a_words, burst)]
        cost = np.concatenate([np.concatenate((np.ones(q, np.int64), np.full(q, steps, np.int64)))
                               for q in chunks])
    return np.concatenate(([0], np.cumsum(cost)[:-1]))


def _packed(ops: np.ndarray, nbytes: np.ndarray) -> tuple[tuple, int]:
    """(gaps, late) of result words of 1..8 bytes each (`nbytes`), made by the operations
    `ops` (increasing, the last one the job's last operation) and packed by dtpu_vec_pack into
    the contiguous output: a word is made by the operation whose result completes it, and a
    last partial word that completes with a full one's operation comes a cycle after it
    (late)."""
    cum = np.cumsum(nbytes)
    total = int(cum[-1])
    last_op = int(ops[-1])
    item = np.searchsorted(cum, 8 * np.arange(1, total // 8 + 1, dtype=np.int64), side="left")
    made = ops[item]
    late = int(total % 8 != 0 and item.size > 0 and int(item[-1]) == cum.size - 1)
    if total % 8:
        made = np.append(made, last_op + late)
    # gaps[k]: cycles from the k-th word before the last to the last operation
    return tuple(int(last_op - t) for t in made[::-1]), late


def _packed_words(n: int, c: int, lanes: int, steps: int = 1) -> tuple[tuple | None, int]:
    """(gaps, late) of MEAN's results: its N x ceil(C / lanes) requantized words, one every
    `steps` operations of its tail (8 / VEC_RQ_LANES: a word's lane groups one an operation,
    the word made by its last), hold C mod lanes bytes at each batch's end (:func:`_packed`).
    One word an operation when C is a multiple of the lanes or N is 1 and `steps` is 1:
    (None, 0)."""
    if steps == 1 and (n == 1 or c % lanes == 0):
        return None, 0
    wpx = ceil_div(c, lanes)
    per_op = np.minimum(lanes, c - lanes * np.arange(wpx, dtype=np.int64))
    made = steps * np.arange(n * wpx, dtype=np.int64) + steps - 1
    return _packed(made, np.tile(per_op, n))


def _axis(size: int, f: int, s: int, pad: int, out: int):
    """One axis of a pool as dtpu_vec_pool walks it: (live, ends, first, ties) with live[y]
    the windows holding in-image row (column) y, ends[k] window k's last in-image row, first[k]
    whether window k is the first to end there, ties the windows after the first that end at
    the last row (SAME padding of at least the stride), made after it from the accumulators."""
    starts = np.arange(out, dtype=np.int64) * s - pad
    ends = np.minimum(starts + f, size) - 1
    y = np.arange(size, dtype=np.int64)
    live = ((starts[None, :] <= y[:, None]) & (y[:, None] <= starts[None, :] + f - 1)).sum(1)
    first = np.ones(out, bool)
    first[1:] = ends[1:] != ends[:-1]
    return live, ends, first, max(0, int(live[-1]) - 1)


def pool_schedule(job: VecJob, lanes: int) -> tuple[int, np.ndarray]:
    """(operations, the operation that makes each result word in output order) of a pool as
    dtpu_vec_pool runs it, input-major: pixel word by pixel word in raster order, one operation
    for each window holding the pixel (oy, then ox; one that skips it when none does), the
    accumulators of ceil(FH/SH) output rows live; a window's words are made by its last
    in-image pixel's first operations, unless an earlier window ends at that pixel too (the
    ties at the right and bottom edges, `_axis`): those are made after the row (the bottom ones
    after the image's last row) from the accumulators, one operation a word, so the results
    leave in output order."""
    n, h, w, c = job.shape
    v4, v7 = job.fields["VEC4"], job.fields["VEC7"]
    oh, ow = v7["OH"], v7["OW"]
    wpx = ceil_div(c, lanes)
    ly, ey, fy, ty = _axis(h, v4["FH"], v4["SH"], v4["PT"], oh)
    lx, ex, fx, tx = _axis(w, v4["FW"], v4["SW"], v4["PL"], ow)
    k = np.maximum(1, ly[:, None] * lx[None, :])                  # operations a pixel word
    fin = np.zeros(h, bool)
    fin[ey] = True
    drain = wpx * tx * fin                                        # a row's right-edge ties
    drain[-1] += wpx * ty * ow                                    # the bottom ones
    row_ops = wpx * k.sum(1) + drain
    row0 = np.concatenate(([0], np.cumsum(row_ops)[:-1]))
    base = row0[:, None] + wpx * np.concatenate(
        (np.zeros((h, 1), np.int64), np.cumsum(k, 1)[:, :-1]), 1)  # each pixel's first
    per_image = int(row_ops.sum())
    j = np.arange(wpx, dtype=np.int64)
    oy, ox = np.meshgrid(np.arange(oh), np.arange(ow), indexing="ij")
    py, px = ey[oy], ex[ox]
    own = base[py, px][..., None] + j * k[py, px][..., None]     # made at its last pixel
    right0 = int(np.argmax(ex == w - 1)) + 1                      # the first right-edge tie
    right = (base[py, w - 1] + wpx * k[py, w - 1])[..., None] + (ox - right0)[..., None] * wpx + j
    bottom0 = int(np.argmax(ey == h - 1)) + 1
    bottom = (row0[-1] + wpx * k[-1].sum() + drain[-1] - wpx * ty * ow
              + ((oy - bottom0) * ow + ox)[..., None] * wpx + j)
    made = np.where(~fy[oy][..., None], bottom, np.where(fx[ox][..., None], own, right))
    made = (np.arange(n, dtype=np.int64)[:, None] * per_image + made.reshape(1, -1)).reshape(-1)
    return n * per_image, made


def _pool_words(job: VecJob, lanes: int) -> tuple[int, tuple, int, int]:
    """(operations, gaps, late, early) of a pool (:func:`pool_schedule`): its result words
    packed as MEAN's, C mod lanes bytes in each output pixel's last (:func:`_packed`), `early`
    the operations after the one that makes the last result word (pixels no window reads, at a
    VALID pool's bottom or right edge)."""
    n, h, w, c = job.shape
    ops, made = pool_schedule(job, lanes)
    v7 = job.fields["VEC7"]
    wpx = ceil_div(c, lanes)
    per = np.minimum(lanes, c - lanes * np.arange(wpx, dtype=np.int64))
    gaps, late = _packed(made, np.tile(per, n * v7["OH"] * v7["OW"]))
    return ops, gaps, late, ops - 1 - int(made[-1])


def cost(job: VecJob, lanes: int, burst: int = 16, rq_lanes: int | None = None) -> VecCost:
    """The cycle formula of docs/architecture.md, "The vector unit" (`burst`: MEM_BURST_BEATS,
    the chunk of A and B reads of one shape; `rq_lanes`: VEC_RQ_LANES, the requantizing lanes
    of ADD / SUB / MUL and of MEAN's tail, default `lanes`: a word in lanes / rq_lanes cycles;
    ADD / MUL's operand beats wait for the lanes, so their `ops` are the beats plus
    lanes / rq_lanes - 1 a word; MEAN's tail is lanes / rq_lanes operations a word)."""
    n, h, w, c = job.shape
    words_px = ceil_div(c, lanes)
    a_beats = ceil_div(job.a_bytes, 8)
    out_words = ceil_div(job.out_bytes, 8)
    steps = lanes // (rq_lanes or lanes)
    if job.kind in ("ADD", "MUL"):
        beats = a_beats + ceil_div(job.b_bytes, 8)
        if job.bmode == 0:
            gaps = _chunk_gaps(out_words, burst, steps)
        else:
            gaps = None if steps == 1 else tuple(steps * k for k in range(min(out_words, burst) + 1))
        return VecCost(beats, beats + (steps - 1) * out_words, 0, out_words, gaps)
    if job.kind == "TABLE":
        return VecCost(a_beats + ceil_div(job.b_bytes, 8), out_words, 0, out_words)
    if job.kind == "COPY":
        # one operation a pixel word (the funnel's, ceil(C/8) a pixel: at least one a beat);
        # the words written are the store unit's (:func:`copy_chunks`, :func:`timeline_step`),
        # here the words the pixels' bytes touch, without the gap words joining them
        starts = job.dst + np.arange(n * h * w, dtype=np.int64) * job.dst_stride
        touched = int(((starts + c - 1) // 8 - starts // 8 + 1).sum())
        return VecCost(a_beats, n * h * w * words_px, 0, touched)
    if job.kind == "MEAN":
        gaps, late = _packed_words(n, c, lanes, steps)
        return VecCost(a_beats, n * h * w * words_px, steps * n * words_px, out_words, gaps, late)
    ops, gaps, late, early = _pool_words(job, lanes)
    return VecCost(a_beats, ops, 0, out_words, gaps, late, early)


def copy_chunks(job: VecJob) -> np.ndarray:
    """A COPY's pixel words as the store unit's chunks, (byte address, bytes) each, in stream
    order: word j of pixel p holds channels 8j .. 8j + 7 (dtpu_vec_pix) and goes to
    DST + p*OW + 8j, min(8, C - 8j) bytes of it (dtpu_vec_copy)."""
    n, h, w, c = job.shape
    wpx = ceil_div(c, 8)
    j = np.arange(wpx, dtype=np.int64)
    addr = job.dst + np.arange(n * h * w, dtype=np.int64)[:, None] * job.dst_stride + 8 * j
    kept = np.broadcast_to(np.minimum(8, c - 8 * j), addr.shape)
    return np.stack([addr.reshape(-1), kept.reshape(-1)], axis=1)


def valid_taps(h: int, w: int, fh: int, fw: int, sh: int, sw: int, pt: int, pl: int,
               oh: int, ow: int) -> int:
    """Taps inside the image over every output window (the pool's one-a-cycle operations per
    word of channels)."""
    ys = np.arange(oh)[:, None] * sh - pt + np.arange(fh)[None, :]
    xs = np.arange(ow)[:, None] * sw - pl + np.arange(fw)[None, :]
    return int(((ys >= 0) & (ys < h)).sum()) * int(((xs >= 0) & (xs < w)).sum())


def timeline_step(tl, t_fetch: int, job: VecJob) -> tuple[int, int]:
    """The VEC descriptor on the list's :class:`~dtpu.hw.timeline.Timeline` (taken at
    `t_fetch`): (its end, its stall-free cycles). It starts SEQ_VEC_START after its header, no
    sooner than SEQ_VEC_WAIT after every earlier write response, the core free and every LOAD
    done (it reads what earlier RUNs wrote; the sequencer holds no range table for it); its
    operands are one read of `read_beats` beats; its operations start with the first beat, one
    a cycle, each no sooner than its words came (read-bound or compute-bound, whichever is
    slower); the last result word LAT_VEC after the last operation and the tail; the sequencer
    takes the next header SEQ_RUN_DONE after it; its writes drain as a RUN's
    (:meth:`Timeline.store_tail`) and the next RUN waits for them."""
    K, mem = tl.K, tl.fmt.mem
    lanes, burst = int(mem["VEC_LANES"]), int(mem["MEM_BURST_BEATS"])
    rq = int(getattr(tl.fmt.cfg, "VEC_RQ_LANES", lanes))
    c = cost(job, lanes, burst, rq)
    lat = int(mem["LAT_VEC"])
    t = max(t_fetch + K["SEQ_VEC_START"], tl.core_free, tl.loads_done)
    if tl.written:
        t = max(t, tl.wr_done + K["SEQ_VEC_WAIT"])
    first, end = tl.mem_read(t, c.read_beats)
    out_words = c.out_words
    if job.kind in ("ADD", "MUL") and rq < lanes:
        # the beats wait for the lanes (:func:`ew_beat_times`): the read channel is the
        # unit's until its last beat, and this read's bursts end later than at one a cycle
        at = first + ew_beat_times(job, burst, lanes // rq)
        nb = ceil_div(c.read_beats, burst)
        tl.r_last[-nb:] = [int(at[v - first]) for v in tl.r_last[-nb:]]
        tl.rd_free = max(tl.rd_free, int(at[-1]) + 1)
    if job.kind == "COPY":
        done, w_end, out_words = _copy_step(tl, job, first, lat)
    else:
        done = max(end, first + c.ops) + c.tail + lat
        w_end = done - c.early + tl.WL + tl.store_tail(c.out_words, c.gaps, c.late)
    tl.core_free = tl.last_run_end = done
    tl.seq_free = max(tl.seq_free, done + K["SEQ_RUN_DONE"])
    free = c.stall_free(lat)
    tl.compute += free
    tl.wr_beats += out_words
    tl.wr_done = max(tl.wr_done, w_end)
    tl.written.append((job.dst, job.dst + job.out_bytes, w_end))
    # the next RUN waits for every write (as after a POST)
    tl.inflight_writes, tl.inflight_overflow = [], True
    if tl.events is not None:
        tl.events.append(("vec", t, first, done, w_end))
    return done, free


def _copy_step(tl, job: VecJob, first: int, lat: int) -> tuple[int, int, int]:
    """A COPY's (done, last write response + 1, write beats) from its first read beat: its
    pixel words (:func:`copy_chunks`) offered one a cycle from the first beat on, as MEAN's
    operations (the funnel's, which keeps up with the stream), each taken by the store unit's word stage
    as :func:`dtpu.hw.units.store.store_sim` has it (the realigner, the write queue's runs with
    their gap words, the write master's bursts in flight): a word held there holds the funnel
    and the stream behind it. `done` LAT_VEC after the last word's operation (its take, as
    MEAN's last operation: first + ops + LAT_VEC when nothing holds them), the
    writes answered as the simulation's last response; no earlier write is in flight (the VEC
    waited for them)."""
    chunks = copy_chunks(job)
    offer = first + np.arange(len(chunks), dtype=np.int64)
    held, hs, last_b, _, beats = store_unit.store_sim(
        [tuple(x) for x in chunks.tolist()], offer.tolist(), tl.fmt.mem,
        int(tl.fmt.mem["STORE_WQ_WORDS"]))
    done = int(hs[-1]) + 1 + lat
    # the stream's beats wait with the funnel: the read channel is busy until its last one
    tl.rd_free = max(tl.rd_free, int(hs[-1]))
    return done, (last_b + 1 if last_b is not None else done), beats
