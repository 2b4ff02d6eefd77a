"""Depthwise RUNs on the contract 2.0 memory model (docs/rtl.md "Depthwise streams").

A DWCONV RUN's activation stream is a CHANNELS stream: per channel chunk, per pixel, the
chunk's words. The load unit (dtpu_cl_load) asks for each pixel's chunk as one run when the
chunk is shorter than the tensor's channels (word mode, NCHUNK > 1: short runs, 8 bursts in
flight bound the rate), and packs one lane a cycle in lane mode (C not a multiple of LANES,
or REP > 1): 1/LANES word a cycle. Neither keeps up with the DWCONV's row loader, which takes
a word a cycle whenever a ring slot is free. The 1.2 core stalls globally (`adv`) while the
loader wants a word that is not there, so the job's stall-free schedule (model.dw_schedule)
still holds in the core's own time; the Timeline therefore feeds units.load.stream_sim the
loader's stall-free need time of every word (this module) and the stream's element
addresses, as it does for GEMMs over WINDOWS.
"""
from __future__ import annotations

import numpy as np

from dtpu.hw.contract_schedules import dw_schedule


def loader_need(cfg, setup) -> np.ndarray | None:
    """The stall-free cycle the DWCONV job `setup` (a JobSetup) takes each activation word: input
    rows (chunk-major) of IW*GC words, row r's words one a cycle from its start in
    model.dw_schedule (load_end[r] - row_words). None for other jobs."""
    if setup is None or setup.opcode != "DWCONV" or setup.geom is None:
        return None
    g = setup.geom
    tm = dw_schedule(cfg, g, setup.wpi)
    rw = g.row_words
    start = np.asarray(tm.load_end, dtype=np.int64) - rw
    return (start[:, None] + np.arange(rw, dtype=np.int64)[None, :]).reshape(-1)


def channels_elements(d: dict) -> tuple[np.ndarray, int] | None:
    """(DDR word address of every element, -1 for PAD; elements per stream word) of a CHANNELS
    stream as dtpu_cl_load's AGU walks it: chunk-major, pixel, the chunk's channels (after REP);
    one element a word in word mode (REP 1, C, CH0 and the chunk multiples of LANES, SRC
    aligned), one a lane otherwise."""
    act_src, act_shape, act_span = d["ACT0"], d["ACT1"], d["ACT3"]
    L, es = max(1, act_src["LANES"]), max(1, act_src["ESIZE"])
    n, h, w, c = act_shape["N"], act_shape["H"], act_shape["W"], act_shape["C"]
    rep, ch0, chans = max(1, act_span["KP"]), act_span["K0"], act_span["K1"]
    nchunk = max(1, act_span["NCHUNK"])
    per = chans // nchunk
    cv = c * rep
    ch = np.arange(ch0, ch0 + chans, dtype=np.int64).reshape(nchunk, 1, per)
    src = np.where(ch < cv, ch // rep, -1)
    pix = np.arange(n * h * w, dtype=np.int64).reshape(1, -1, 1)
    word_mode = c % L == 0 and act_src["SRC"] % 8 == 0 and rep == 1 and ch0 % L == 0 \
        and per % L == 0
    e = np.where(src >= 0, pix * c + src, -1)
    if word_mode:
        e = e[:, :, ::L]
    e = e.reshape(-1)
    wa = np.where(e < 0, -1, (act_src["SRC"] + e * es) // 8)
    return wa, 1 if word_mode else L


def dw_stream(cfg, setup, d: dict, words: int, cfg_setup: int, res_words: int | None = None):
    """(element word addresses, elements a word, need times) of a DWCONV RUN's CHANNELS stream
    for units.load.stream_sim; None when the stream is not one (the first-word shift applies)."""
    need = loader_need(cfg, setup)
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
            rt = result_times(cfg, setup)
            if rt.size == rwa.size:
                res = (rt, rwa)
    return wa, per_word, need, int(cfg_setup), res


def result_times(cfg, setup) -> np.ndarray:
    """Stall-free cycle of every result word of the DWCONV job `setup`, in stream order, on the
    scale where the last one is 0 (units.store.result_gaps' schedule: per output row, its steps
    `period` apart, a step's items' words one a cycle)."""
    g = setup.geom
    tm = dw_schedule(cfg, g, setup.wpi)
    cols = cfg.COLS
    spr = g.steps_per_row(cols)
    n_items = g.ow * g.gc
    out = []
    for o in range(len(tm.compute_start)):
        for s_ in range(spr):
            items = min(cols, n_items - s_ * cols)
            t0 = int(tm.compute_start[o]) + s_ * tm.period
            out.append(t0 + np.arange(items * setup.wpi, dtype=np.int64))
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
