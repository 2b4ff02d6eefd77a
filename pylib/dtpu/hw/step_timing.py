"""What the memory model is told of each descriptor a list runs: derived from its decoded fields
and the job's setup, never from the data it moves. :class:`~dtpu.hw.executor.Executor` hands
these to :class:`~dtpu.hw.timeline.Timeline` (and records them, so a list run again replays
its timeline without deriving them anew); the activation stream's beats and first request
(load unit), the result words' beats, scattered writes and ACC walk (store unit), a POST's
writes.
"""
from __future__ import annotations

import numpy as np

from dtpu.hw import dw_timing
from dtpu.hw.config import HwConfig, out_lanes
from dtpu.hw.list_result import RunResult, tag_span
from dtpu.hw.listformat import Format
from dtpu.hw.timeline import Timeline
from dtpu.hw.units.acc import AccRun
from dtpu.hw.units.load import first_words, pointwise_window, window_index
from dtpu.hw.units.store import result_gaps, result_gaps_array, write_runs
from dtpu.hw.units import vector as vector_unit

#: longest whole-tensor 1x1 stream :meth:`Timeline.run` simulates when the list's blocks
#: are read during it (longer ones keep the one-read model: the simulation's cost)
PLAIN_SIM_WORDS = 1 << 14


def act_req(f: Format, d: dict) -> int:
    """Cycles from a RUN's start to its activation stream's first read request in the
    load unit (dtpu_cl_load, docs/rtl.md): its setup (SEQ_ACT_SETUP_WINDOWS /
    SEQ_ACT_SETUP_CHANNELS: the registered fields, the AGU's setup, the request path) and
    one cycle per element its first run collects (up to MEM_BURST_BEATS beats; a run closes
    when the next element does not continue it). Exact for word-mode streams (every word
    one aligned DDR word); a lane-mode stream collects lanes, not words (approximate)."""
    mode, L = d["ACT0"]["MODE"], max(1, d["ACT0"]["LANES"])
    K, burst = f.mem, int(f.mem["MEM_BURST_BEATS"])
    if mode == f.act_modes["CHANNELS"]:
        setup = int(K["SEQ_ACT_SETUP_CHANNELS"])
    else:
        setup = int(K["SEQ_ACT_SETUP_WINDOWS"])
    first = first_words(f, d, burst + 1)
    if first is None:                       # lane mode: MEM_BURST_BEATS words of lanes
        return setup + burst * L
    n = 0
    prev = None
    for a in first:
        if n and (a is None or prev is None or a != prev + 1):
            break
        n += 1
        prev = a
        if n == burst:
            return setup + n          # closed as it reaches MEM_BURST_BEATS
    return setup + n + 1              # closed by the next element or the stream's end


def res_beats(f: Format, d: dict, words: int) -> tuple[int, int, int, list | None]:
    """(beats the store unit reads back, beats it writes, 1 if its last word is a partial
    one the packer closes a cycle later, for the last write beats (k = 0: the last) how many
    result words before the last one completes each, None when beats are words) for a
    RUN's `words` result words:
    RES ACC takes one int64 sum a beat, each kept (pixel, channel) read (unless FIRST) and
    written; ITEMS over whole rows (CH0 0 to DSTC) the words of the destination's bytes;
    otherwise (channel slices, whose gaps the store unit may fill) the result words."""
    r0, r1, r2 = d["RES0"], d["RES1"], d["RES2"]
    if r0["MODE"] == f.res_modes["NONE"]:
        return 0, 0, 0, None
    pix, ch0, dstc = r1["PIX"], r2["CH0"], r2["DSTC"]
    hi = min(r2["CH1"], ch0 + r1["OUTER"] * r1["INNER"] * r2["GW"])
    if r0["MODE"] == f.res_modes["ACC"]:
        sums = pix * max(0, hi - ch0)
        return (0 if d.get("FIRST") else sums), sums, 0, None
    if r0["MODE"] == f.res_modes["ITEMS"] and ch0 == 0 and hi == dstc:
        es, lanes = r0["ESIZE"], max(1, r0["LANES"])
        nbytes = pix * dstc * es
        end = r0["DST"] % 8 + nbytes
        beats = (end + 7) // 8 if nbytes else 0
        beat_word = None
        if beats and words and words % pix == 0:
            # result words per pixel (items of `lanes` channels); the word holding a byte
            wpp = words // pix
            row = dstc * es

            def word_of(b: int) -> int:
                p_, o = divmod(b, row)
                return p_ * wpp + (o // es) // lanes

            off = r0["DST"] % 8
            beat_word = [words - 1 - word_of(min(8 * (beats - 1 - k) + 7 - off, nbytes - 1))
                         for k in range(min(beats, 4 * int(f.mem["MEM_BURST_BEATS"])))]
        return 0, beats, int(end % 8 != 0), beat_word
    return 0, words, 0, None


def store_plan(f: Format, cfg: HwConfig, d: dict, words: int, setup) -> tuple | None:
    """For a RUN whose ITEMS the store unit writes as scattered bursts (items of a pixel not
    followed by the next pixel's: channel slices, OUTER > 1, e.g. a depthwise job's
    channel chunks), whose writes may not keep up with the core (the write master keeps
    MAX_OUTSTANDING bursts a write latency): arrays of each result word's byte address and
    kept bytes, and of how many cycles before the last word each word comes stall-free (k = 0
    the last), for :func:`store_sim`; None otherwise (whole rows: 16-word bursts that keep
    up, the write tail formula :meth:`Timeline.store_tail`). docs/rtl.md "float32 and
    the one-cycle corners"."""
    r0, r1, r2 = d["RES0"], d["RES1"], d["RES2"]
    if r0["MODE"] != f.res_modes["ITEMS"] or not words or setup is None:
        return None
    L, es = max(1, r0["LANES"]), r0["ESIZE"]
    pix, outer, inner = r1["PIX"], r1["OUTER"], r1["INNER"]
    gw, ch0, ch1, dstc = r2["GW"], r2["CH0"], r2["CH1"], r2["DSTC"]
    wpi = -(-gw // L)
    if words != outer * pix * inner * wpi:
        return None
    if outer == 1 and ch0 == 0 and min(ch1, inner * gw) >= dstc:
        return None                 # whole rows: consecutive words, 16-word bursts
    o, p_, i, w = np.meshgrid(np.arange(outer), np.arange(pix), np.arange(inner),
                              np.arange(wpi), indexing="ij")
    c0 = ch0 + (o * inner + i) * gw + w * L
    kept = np.clip(np.minimum(np.minimum(L, gw - w * L), ch1 - c0), 0, None)
    addr = r0["DST"] + (p_ * dstc + c0) * es
    kept, addr = kept.reshape(-1), addr.reshape(-1)
    gaps = result_gaps_array(cfg, setup, words - 1)
    if gaps is None or len(gaps) != words:
        return None
    # arrays, not tuples: the plan is kept with the list's recorded timing
    return (addr.astype(np.int64), (kept * es).astype(np.int16), gaps)


def post_timing(f: Format, cfg: HwConfig, regs: dict, d: dict) -> tuple:
    """What :meth:`Timeline._post_run` needs of a POST: (SRC, PIX, CH0, CH, DSTC, result
    lanes a word, 1 if the store unit's last write word is a partial one, the write beats,
    the beats of the last write burst)."""
    p1, p2, p3 = d["POST1"], d["POST2"], d["POST3"]
    job = cfg.decode("JOB", regs.get(cfg.REG_JOB, 0))
    prec = next((p for p in cfg.ENABLED if cfg.prec_code(p) == job["PREC"]), None)
    lanes, dt = out_lanes(cfg, prec, cfg.OUT_MODE_REQUANT)
    es = np.dtype(dt).itemsize
    items = [(p1["DST"] + (p * p3["DSTC"] + p2["CH0"]) * es, p2["CH"] * es)
             for p in range(p2["PIX"])]
    runs = write_runs(items, int(f.mem["MEM_BURST_BEATS"]),
                       int(f.mem["SEQ_STORE_GAP"]))
    last = items[-1] if items else (0, 0)
    part = int((last[0] + last[1]) % 8 != 0) if runs else 0
    return (p1["SRC"], p2["PIX"], p2["CH0"], p2["CH"], p3["DSTC"], max(1, lanes), part,
            sum(runs), runs[-1] if runs else 0, p1["DST"], es)


def acc_timing(f: Format, cfg: HwConfig, d: dict, words: int, setup) -> tuple | None:
    """For a RES ACC RUN of `words` result words, what :meth:`Timeline._acc_run` needs (a
    one-element tuple holding an :class:`AccRun`); None for other RUNs.

    dtpu_cl_store adds one kept lane a cycle (one R and one W beat per int64 sum), so a
    result word of `kept` lanes occupies it `kept` cycles (at least one) and a word the core
    offers while the unit is busy stalls the whole core (the 1.2 core's global stall); its
    read-ahead walk (ACC without FIRST) requests the items' sums one walk step (a result
    word) at a time, consecutive items merged; the load unit requests each run of the
    activation stream when the run is collected (one element a cycle)."""
    r0, r1, r2 = d["RES0"], d["RES1"], d["RES2"]
    if r0["MODE"] != f.res_modes["ACC"] or not words:
        return None
    L, gw = max(1, r0["LANES"]), max(1, r2["GW"])
    ch0, ch1, dstc = r2["CH0"], r2["CH1"], r2["DSTC"]
    wpi = -(-gw // L)
    kept: list[int] = []
    items: list[tuple[int, int, int]] = []     # (walk step, sum address, sums)
    step = 0
    for p in range(r1["PIX"]):
        for it in range(r1["OUTER"] * r1["INNER"]):
            c0 = ch0 + it * gw
            n_item = max(0, min(gw, ch1 - c0))
            if n_item:
                items.append((step, r0["DST"] + (p * dstc + c0) * 8, n_item))
            for w in range(wpi):
                kept.append(max(0, min(L, n_item - w * L)))
            step += wpi
    kept = kept[:words]
    gaps = result_gaps(cfg, setup, words - 1) if setup is not None else None
    if gaps is None or len(gaps) < len(kept):
        res_t = None
    else:       # cycles before DONE (the last word 2 before it), per word in order
        res_t = [2 + gaps[len(kept) - 1 - k] for k in range(len(kept))]
    # the read requests (walk step it leaves at, address, sums): an item at the address
    # where the pending request ends joins it unless that is full (MEM_BURST_BEATS words:
    # it leaves the step after it filled); a pending request leaves when an item that does
    # not continue it comes, or when the walk ends
    reads: list[tuple[int, int, int]] = []
    if not d.get("FIRST"):
        merge = int(f.mem["MEM_BURST_BEATS"])
        pend = None
        for st, a, n in items:
            if pend is not None and pend[0] + 8 * pend[1] == a:
                pend[1] += n
                if pend[1] >= merge:
                    reads.append((st + 1, pend[0], pend[1]))
                    pend = None
                continue
            if pend is not None:
                reads.append((st, pend[0], pend[1]))
            pend = [a, n]
        if pend is not None:
            reads.append((step, pend[0], pend[1]))
    act = None
    if setup is not None and setup.opcode == "GEMM":
        # NT column tiles: a pixel's KW words are taken in its first step, pixels NT steps
        # apart (:func:`act_schedule`); the stream is read once
        total = setup.m * setup.kw
        wa = first_words(f, d, total)
        if wa is not None and len(wa) == total and None not in wa:
            act = (wa, setup.kw, setup.nt * max(setup.kw, setup.wpi))
    # the write queue's runs: consecutive items merged up to MEM_BURST_BEATS words; the
    # last run is the RUN's last burst
    burst = int(f.mem["MEM_BURST_BEATS"])
    runs: list[list[int]] = []
    for _, a, n in items:
        if runs and runs[-1][0] + 8 * runs[-1][1] == a:
            runs[-1][1] += n
        else:
            runs.append([a, n])
    last_burst = 0
    if runs:
        last_burst = runs[-1][1] % burst or burst
    # the write queue's bursts (dtpu_cl_store_wq): consecutive words up to MAX_RUN; a gap the
    # queue would fill with strobe-less words is not modelled (wsegs None)
    wsegs: list[int] | None = []
    gap = int(f.mem["SEQ_STORE_GAP"])
    for k_, (run_addr, n0) in enumerate(runs):
        if k_ and 0 < (run_addr - (runs[k_ - 1][0] + 8 * runs[k_ - 1][1])) // 8 <= gap:
            wsegs = None
            break
        wsegs += [burst] * (n0 // burst) + ([n0 % burst] if n0 % burst else [])
    return (AccRun(tuple(kept), None if res_t is None else tuple(res_t), tuple(reads),
                    last_burst, act, None if wsegs is None else tuple(wsegs)),)


def act_read_beats(f: Format, d: dict, words: int, gather_cache: dict) -> int:
    """The beats the load unit reads for a RUN's activation stream of `words` words: one
    per element that is not PAD and not on the word of the beat before it (word mode: an
    element is a word; lane mode: a lane, so the lanes of one DDR word share its beat).
    The stream's words when every word is one distinct DDR word (1x1 over the whole
    tensor, depthwise CHANNELS in word mode)."""
    act_src, act_shape, act_win, act_span = (d[k] for k in ("ACT0", "ACT1", "ACT2", "ACT3"))
    mode, L, es = act_src["MODE"], act_src["LANES"], act_src["ESIZE"]
    n, h, w, c = act_shape["N"], act_shape["H"], act_shape["W"], act_shape["C"]
    if not words or L < 1 or es < 1:
        return words
    size = n * h * w * c
    word_mode = c % L == 0 and act_src["SRC"] % 8 == 0
    if mode == f.act_modes["WINDOWS"]:
        kp, k0, k1 = act_span["KP"], act_span["K0"], act_span["K1"]
        if word_mode and pointwise_window(act_win, h, w) and kp == c:
            return words                              # the tensor's words, each once
        key = ("w", tuple(sorted(act_shape.items())), tuple(sorted(act_win.items())), kp)
        index = gather_cache.get(key)
        if index is None:
            index = window_index(act_shape, act_win, kp)
        e = index[:, k0 * L:k1 * L].reshape(-1)
    elif mode == f.act_modes["CHANNELS"]:
        rep, ch0, chans = act_span["KP"], act_span["K0"], act_span["K1"]
        nchunk = max(1, act_span["NCHUNK"])
        if word_mode and rep == 1 and ch0 % L == 0 and chans % (nchunk * L) == 0 \
                and ch0 + chans <= c:
            return words
        cv = c * rep
        ch = np.arange(ch0, ch0 + chans)              # channels after REP, per pixel
        src = np.where(ch < cv, ch // max(rep, 1), -1)
        per = chans // nchunk
        src = src.reshape(nchunk, 1, per)
        pix = np.arange(h * w).reshape(1, -1, 1)
        e = np.where(src >= 0, pix * c + src, size).reshape(-1)
        word_mode = word_mode and rep == 1 and ch0 % L == 0
    else:
        return words
    if word_mode:
        e = e[::L]
    e = e.astype(np.int64)
    wa = (act_src["SRC"] + e * es) // 8
    wa = wa[e != size]
    return int(1 + np.count_nonzero(wa[1:] != wa[:-1])) if wa.size else 0


def act_stream(f: Format, cfg: HwConfig, d: dict, words: int, sched, setup, gather_cache: dict,
               res_words: int | None = None):
    """(element word addresses, elements per word, the core's need times) of a RUN's
    activation stream for :func:`stream_sim`, or None when the stream keeps up with the
    core (the Timeline's first-word shift is exact: 1x1 over the whole tensor) or the job
    is neither a GEMM over WINDOWS nor a DWCONV. A DWCONV's CHANNELS stream:
    :func:`dw_timing.dw_stream` (also the intake constant and, when its `res_words` result
    words are written in short runs, their times and DDR words for the store model)."""
    act_src, act_shape, act_win, act_span = d["ACT0"], d["ACT1"], d["ACT2"], d["ACT3"]
    if words and act_src["MODE"] == f.act_modes["CHANNELS"]:    # a DWCONV's (dw_timing)
        return dw_timing.dw_stream(cfg, setup, d, words,
                                   int(f.mem["SEQ_ACT_SETUP_CHANNELS"]), res_words)
    if not words or sched is None or act_src["MODE"] != f.act_modes["WINDOWS"]:
        return None
    L, es = act_src["LANES"], act_src["ESIZE"]
    n, h, w, c = act_shape["N"], act_shape["H"], act_shape["W"], act_shape["C"]
    kp, k0, k1 = act_span["KP"], act_span["K0"], act_span["K1"]
    word_mode = c % L == 0 and act_src["SRC"] % 8 == 0
    kw_, nt, period, m = sched
    if word_mode and pointwise_window(act_win, h, w) and kp == c:
        # the tensor's words in order: the stream keeps up (one read, the first-word
        # shift) unless the list's blocks take the read master between its runs
        # (:meth:`Timeline.run` then simulates it); streams of up to PLAIN_SIM_WORDS
        if kw_ != k1 - k0 or m * kw_ != words or words > PLAIN_SIM_WORDS:
            return None
        cfg_cycles = cfg.CFG_CYCLES
        need = (cfg_cycles + (np.arange(m, dtype=np.int64) * nt * period)[:, None]
                + np.arange(kw_, dtype=np.int64)[None, :]).reshape(-1)
        return (act_src["SRC"] // 8 + k0 + np.arange(m, dtype=np.int64)[:, None] * (c // L)
                + np.arange(kw_, dtype=np.int64)[None, :]).reshape(-1), 1, need, \
            int(f.mem["SEQ_ACT_SETUP_WINDOWS"]), None, True
    if kw_ != k1 - k0 or m * kw_ != words:
        return None
    key = ("w", tuple(sorted(act_shape.items())), tuple(sorted(act_win.items())), kp)
    index = gather_cache.get(key)
    if index is None:
        index = window_index(act_shape, act_win, kp)
    size = n * h * w * c
    e = index[:, k0 * L:k1 * L:(L if word_mode else 1)].reshape(-1).astype(np.int64)
    wa = np.where(e == size, -1, (act_src["SRC"] + e * es) // 8)
    cfg_cycles = cfg.CFG_CYCLES
    need = (cfg_cycles + (np.arange(m, dtype=np.int64) * nt * period)[:, None]
            + np.arange(kw_, dtype=np.int64)[None, :]).reshape(-1)
    return wa, 1 if word_mode else L, need



def timing_of(r: RunResult, tl: Timeline) -> tuple:
    """What a successful run's memory model gave: reused by runs of the same list bytes."""
    end = tl.end()
    return (end, tl.compute, tl.rd_beats, tl.wr_beats, r.descs, r.runs, r.tags)


def replay_call(tl: Timeline, r: RunResult, call: tuple) -> None:
    """One recorded memory-model step of :meth:`Executor._step`."""
    t_fetch = tl.fetch(call[1])
    r.descs += 1
    if call[0] == "G":
        tl.regs(t_fetch, call[2])
    elif call[0] == "V":
        end, free = vector_unit.timeline_step(tl, t_fetch, call[2])
        tag_span(r, call[3], end, free)
    elif call[0] == "L":
        _, _, count, after, tag = call
        tl.load(t_fetch, count, after)
        tag_span(r, tag, None, wgt=count)
    elif call[0] == "R":
        _, _, src, dst, act, res, cycles, store_reads, tag, stream, req, step = call[:12]
        tl.run(t_fetch, src, dst, act, res, cycles, store_reads=store_reads, act_req=req,
               res_gaps=step, post=call[12] if len(call) > 12 else None,
               store=call[13] if len(call) > 13 else None)
        r.runs += 1
        if stream:
            tag_span(r, tag, tl.core_free, cycles, act, res)
        else:
            tag_span(r, tag, tl.core_free, cycles)
