"""Depthwise RUNs on the contract 2.0 memory model (docs/rtl.md "Depthwise streams").

A DWCONV RUN's activation stream is a CHANNELS stream: per channel chunk, per pixel, the
chunk's words. The load unit (dtpu_cl_load) asks for each pixel's chunk as one run when the
chunk is shorter than the tensor's channels (word mode, NCHUNK > 1: short runs, 8 bursts in
flight bound the rate), and packs one lane a cycle in lane mode (C not a multiple of LANES,
or REP > 1): 1/LANES word a cycle. Neither keeps up with the DWCONV's row loader, which takes
a word a cycle whenever a ring slot is free. The 1.2 core stalls globally (`adv`) while the
loader wants a word that is not there, so the job's stall-free schedule (model.dw_schedule)
still holds in the core's own time; the Timeline therefore feeds cmdlist._stream_sim the
loader's stall-free need time of every word (this module) and the stream's element
addresses, as it does for GEMMs over WINDOWS.
"""
from __future__ import annotations

import numpy as np

from dtpu.hw import kernels
from dtpu.hw.model import dw_schedule


def loader_need(cfg, su) -> np.ndarray | None:
    """The stall-free cycle the DWCONV job `su` (a JobSetup) takes each activation word: input
    rows (chunk-major) of IW*GC words, row r's words one a cycle from its start in
    model.dw_schedule (load_end[r] - row_words). None for other jobs."""
    if su is None or su.opcode != "DWCONV" or su.geom is None:
        return None
    g = su.geom
    tm = dw_schedule(cfg, g, su.wpi)
    rw = g.row_words
    start = np.asarray(tm.load_end, dtype=np.int64) - rw
    return (start[:, None] + np.arange(rw, dtype=np.int64)[None, :]).reshape(-1)


def channels_elements(d: dict) -> tuple[np.ndarray, int] | None:
    """(DDR word address of every element, -1 for PAD; elements per stream word) of a CHANNELS
    stream as dtpu_cl_load's AGU walks it: chunk-major, pixel, the chunk's channels (after REP);
    one element a word in word mode (REP 1, C, CH0 and the chunk multiples of LANES, SRC
    aligned), one a lane otherwise."""
    a0, a1, a3 = d["ACT0"], d["ACT1"], d["ACT3"]
    L, es = max(1, a0["LANES"]), max(1, a0["ESIZE"])
    n, h, w, c = a1["N"], a1["H"], a1["W"], a1["C"]
    rep, ch0, chans, nchunk = max(1, a3["KP"]), a3["K0"], a3["K1"], max(1, a3["NCHUNK"])
    per = chans // nchunk
    cv = c * rep
    ch = np.arange(ch0, ch0 + chans, dtype=np.int64).reshape(nchunk, 1, per)
    src = np.where(ch < cv, ch // rep, -1)
    pix = np.arange(n * h * w, dtype=np.int64).reshape(1, -1, 1)
    word_mode = c % L == 0 and a0["SRC"] % 8 == 0 and rep == 1 and ch0 % L == 0 \
        and per % L == 0
    e = np.where(src >= 0, pix * c + src, -1)
    if word_mode:
        e = e[:, :, ::L]
    e = e.reshape(-1)
    wa = np.where(e < 0, -1, (a0["SRC"] + e * es) // 8)
    return wa, 1 if word_mode else L


def dw_stream(cfg, su, d: dict, words: int, cfg_setup: int, res_words: int | None = None):
    """(element word addresses, elements a word, need times) of a DWCONV RUN's CHANNELS stream
    for cmdlist._stream_sim; None when the stream is not one (the first-word shift applies)."""
    need = loader_need(cfg, su)
    if need is None or need.size != words:
        return None
    el = channels_elements(d)
    if el is None:
        return None
    wa, per_word = el
    if wa.size != words * per_word:
        return None
    res = None
    if res_words is not None:
        rwa = result_words(d, res_words)
        if rwa is not None and short_runs(rwa, 16):
            rt = result_times(cfg, su)
            if rt.size == rwa.size:
                res = (rt, rwa)
    return wa, per_word, need, int(cfg_setup), res


def result_times(cfg, su) -> np.ndarray:
    """Stall-free cycle of every result word of the DWCONV job `su`, in stream order, on the
    scale where the last one is 0 (cmdlist._result_gaps' schedule: per output row, its steps
    `period` apart, a step's items' words one a cycle)."""
    g = su.geom
    tm = dw_schedule(cfg, g, su.wpi)
    cols = cfg.COLS
    spr = g.steps_per_row(cols)
    n_items = g.ow * g.gc
    out = []
    for o in range(len(tm.compute_start)):
        for s_ in range(spr):
            items = min(cols, n_items - s_ * cols)
            t0 = int(tm.compute_start[o]) + s_ * tm.period
            out.append(t0 + np.arange(items * su.wpi, dtype=np.int64))
    t = np.concatenate(out) if out else np.zeros(0, np.int64)
    return t - t[-1] if t.size else t


def result_words(d: dict, n: int) -> np.ndarray | None:
    """The DDR word each of a RUN's `n` result words fills, when every result word is one
    whole aligned DDR word (ITEMS, LANES*ESIZE = 8, GW a multiple of LANES, DST, CH0 and DSTC
    whole words, every channel kept); None otherwise."""
    r0, r1, r2 = d["RES0"], d["RES1"], d["RES2"]
    lanes, es = max(1, r0["LANES"]), r0["ESIZE"]
    pix, outer, inner = r1["PIX"], r1["OUTER"], r1["INNER"]
    gw, ch0, ch1, dstc = r2["GW"], r2["CH0"], r2["CH1"], r2["DSTC"]
    if lanes * es != 8 or r0["DST"] % 8 or gw % lanes or ch0 % lanes or dstc % lanes:
        return None
    wpi = gw // lanes
    if outer * pix * inner * wpi != n or ch0 + outer * inner * gw > min(ch1, dstc):
        return None
    o, p, i, w = np.meshgrid(np.arange(outer), np.arange(pix), np.arange(inner),
                             np.arange(wpi), indexing="ij")
    ch = ch0 + (o * inner + i) * gw + w * lanes
    return (r0["DST"] // 8 + (p * dstc + ch) // lanes).reshape(-1).astype(np.int64)


def short_runs(wa: np.ndarray, max_run: int) -> bool:
    """True when the store unit's write runs can be shorter than MEM_BURST_BEATS words (a
    result word not following the one before), i.e. when its bursts in flight may bind."""
    if wa.size < 2:
        return False
    return bool(np.any(np.diff(wa) != 1))


def core_store(need, avail, res_t, res_wa, cycles: int, mem: dict, late: int,
               use_c: bool = True) -> tuple:
    """The DWCONV job's global stall with the store unit's backpressure (dtpu_cl_store: its
    write queue holds SEQ_STORE_HOLD words beside the write beats not yet gone; a result word
    the core offers while it is full stalls the core) on top of the activation stream's.

    Times are cycles from the job's start. `need` / `avail`: each activation word's stall-free
    need time and the cycle cmdlist._stream_sim's core took it (no sooner now); `res_t`: the
    result words' stall-free times; `res_wa`: their DDR words; `cycles`: the job's stall-free
    cycles. The write runs are the
    consecutive words (up to MEM_BURST_BEATS); a run is requested SEQ_STORE_AW after the
    word that closes it came (the first word of the next run, or its own last word when it
    is full), the last one at the job's end + SEQ_STORE_TAIL (+ `late`); its AW no sooner than
    SEQ_WR_SLOT after the response of the burst MEM_READ_OUTSTANDING before, nor before the
    beats of the burst before are out; its beats the cycles after its AW, its response
    MEM_WRITE_LATENCY after its last beat. Returns (the final stall, the last response + 1:
    the RUN's w_end). The C kernel (kernels.c dtpu_core_store, the same statements) runs it
    when there is one (`use_c`)."""
    import bisect
    hold = int(mem["SEQ_STORE_HOLD"])
    consts = (hold, int(mem["SEQ_STORE_AW"]), int(mem["SEQ_WR_SLOT"]),
              int(mem["MEM_READ_OUTSTANDING"]), int(mem["MEM_BURST_BEATS"]),
              int(mem["MEM_WRITE_LATENCY"]), int(mem["SEQ_STORE_TAIL"]))
    k = kernels.get() if use_c else None
    if k is not None:
        return k.core_store(need, avail, res_t, res_wa, cycles, late, consts)
    aw_d = int(mem["SEQ_STORE_AW"])
    slot = int(mem["SEQ_WR_SLOT"])
    outst = int(mem["MEM_READ_OUTSTANDING"])
    burst = int(mem["MEM_BURST_BEATS"])
    wl = int(mem["MEM_WRITE_LATENCY"])
    tail = int(mem["SEQ_STORE_TAIL"])
    need = [int(v) for v in need]
    avail = [int(v) for v in avail]
    res_t = [int(v) for v in res_t]
    res_wa = [int(v) for v in res_wa]
    b_start: list = []      # first beat of each issued burst
    b_cum: list = [0]       # beats of the bursts before it
    b_resp: list = []       # its response
    last_beat = -1 << 40

    def issue(req: int, n: int) -> None:
        nonlocal last_beat
        aw = max(req, last_beat)
        if len(b_resp) >= outst:
            aw = max(aw, b_resp[-outst] + slot)
        b_start.append(aw + 1)
        b_cum.append(b_cum[-1] + n)
        last_beat = aw + n
        b_resp.append(aw + n + wl)

    def room_at(c: int, m: int) -> int:
        """The first cycle from c on with at least m beats before it (c if never)."""
        if m <= 0 or m > b_cum[-1]:
            return c
        i = bisect.bisect_left(b_cum, m) - 1        # the burst holding beat m
        return max(c, b_start[i] + (m - 1 - b_cum[i]) + 1)

    s = 0
    j = 0
    handed = 0
    run_s = run_e = None
    n_in = len(need)
    for k, tk in enumerate(res_t):
        # the inputs due no later than this result
        while j < n_in and need[j] <= tk:
            s = max(s, avail[j] - need[j])
            j += 1
        c = tk + s
        a = res_wa[k]
        closes = run_e is not None and (a != run_e + 1 or run_e - run_s + 1 == burst)
        # the queue: room for the word (the closing word's run is requested after it)
        c = room_at(c, handed - hold)
        s = c - tk
        if closes:
            issue(c + aw_d, run_e - run_s + 1)
            run_s = run_e = None
        handed += 1
        if run_e is None:
            run_s = run_e = a
        else:
            run_e = a
        if run_e - run_s + 1 == burst:      # full: requested at once
            issue(c + aw_d, burst)
            run_s = run_e = None
    while j < n_in:
        s = max(s, avail[j] - need[j])
        j += 1
    if run_e is not None:       # the RUN's end closes the last run
        issue(cycles + s + tail + late, run_e - run_s + 1)
    return s, (b_resp[-1] + 1 if b_resp else None)
