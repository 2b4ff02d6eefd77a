"""The load unit (dtpu_cl_load, dtpu_cl_rd_buf, the read master) of the simulated device: the
address generator's window order, its word-mode first words, and the cycle simulation of an
activation stream against the core's need times, whose C twin is kernels.c
``dtpu_stream_sim`` (:func:`stream_sim` runs it where the kernels are built).
"""
from __future__ import annotations

import numpy as np

from dtpu.hw import kernels
from dtpu.hw.listformat import Format, ListFault
from dtpu.hw.units.store import StoreWrites, store_consts

#: debugging: a list to record the simulated stream's ARs in (cycle from the simulation's
#: origin, beats, a list block); while it is set the Python statements run, not the C twin
STREAM_TRACE: list | None = None


def act_schedule(setup) -> tuple | None:
    """A GEMM job's activation schedule (KW words a pixel, NT tiles, the step period, M
    pixels): pixel p's KW words are taken in the first KW cycles of its first step, cycle
    CFG_CYCLES + p*NT*period + i stall-free. None for other jobs."""
    if setup.opcode != "GEMM":
        return None
    return setup.kw, setup.nt, max(setup.kw, setup.wpi), setup.m


def stream_sim(wa, per_word: int, need, intake: int, rd_free: int, mem: dict,
                blocks: tuple | None = None, takes: list | None = None,
                res: dict | None = None, *, in_c: bool = True) -> tuple:
    """The activation stream of one RUN cycle by cycle as the load unit (dtpu_cl_load), the
    credit buffer (dtpu_cl_rd_buf) and the read master (dtpu_axi_rd, dtpu_axi_burst) move it
    under the contract's memory model, against the core's stall-free need times (docs/rtl.md
    "Streams that do not keep up"). Times are cycles from the RUN's start.

    `wa`: per element of the stream (a word in word mode, a lane in lane mode) its DDR word
    address, -1 for PAD; `per_word`: elements per activation word (1, or LANES); `need[j]`:
    the cycle the job's stall-free schedule takes word j; `intake`: the cycle the unit's run
    builder could take the first element (one a cycle after it; SEQ_ACT_SETUP_WINDOWS - 2
    after the RUN's start: its first AR comes 2 cycles after the request); `rd_free`: the read
    channel's first free beat; `blocks`: (the AR cycle of the list's next block, blocks
    left, words a block, SEQ_FETCH_NEXT[, the next block's DDR word address]): the fetcher's
    reads, which the arbiter serves first, each next one SEQ_FETCH_NEXT after the last beat of
    the one before, its bursts split at 4 KiB as the stream's (a block across a page is one
    burst more, its ARs two cycles later: VWW's one-partition list; address 0 when unknown). Returns (the
    core's stall once it took its last word, the stream's first beat, its last beat + 1, its
    beats, the first beat and last beat + 1 of each block read meanwhile, the next block's AR
    cycle). `takes` (a list, optional) gets the cycle the core took each word.

    `res` (a DWCONV whose write runs are short, :func:`dw_timing.dw_stream`): the core's result
    words too, each at its stall-free time ("t", this function's time frame) unless the store
    unit holds more than STORE_WQ_WORDS + 1 words beside the write beats gone (:func:`store_hold`),
    when the core stalls
    (its global stall: the inputs wait as well); their DDR words ("wa") make the write runs,
    each requested SEQ_STORE_AW after the word that closes it, its AW no sooner than
    SEQ_WR_SLOT after the response of the burst MEM_READ_OUTSTANDING before nor before the
    beats of the burst before, its beats the cycles after the AW; the last one the job's end
    ("end0", the stall-free end, + the stall) + "tail" after; a run crossing 4 KiB is two
    bursts. Sets res["w_end"]: the last response + 1.

    Run builder: a non-PAD element on the word of the last beat shares that beat, one on the
    next word extends the open run (up to MEM_BURST_BEATS words), any other opens a run and
    pushes the open one into the ACT_REQ_FIFO-entry request FIFO (it waits while that is full;
    it takes an element while the element FIFO, less the slot the packer frees in that cycle,
    has room);
    a cycle in which no element is taken, with a run open and the FIFO not full, pushes it (a
    full element FIFO of ACT_ELEM_FIFO, the stream's end). The master takes a request when
    idle and the credit buffer (ACT_READ_BUFFER words) has room for it, issues its burst the
    next cycle while fewer than MEM_READ_OUTSTANDING are in flight (a slot frees the cycle after
    a burst's last beat), its AR one cycle later; the burst's first beat MEM_READ_LATENCY after
    its AR, after the beats before it, one a cycle. A beat reaches the packer SEQ_ACT_FIRST - 1
    cycles later (the master's word port, the buffer); the packer takes one element a cycle
    (one that completes a word only when the output register is free); the core takes the word
    from the cycle after, when its schedule (shifted by its stall so far) needs it.

    `in_c`: run the C twin where the kernels are built (False: these Python statements, which
    the twin is tested against)."""
    RL = int(mem["MEM_READ_LATENCY"])
    burst = int(mem["MEM_BURST_BEATS"])
    outst = int(mem["MEM_READ_OUTSTANDING"])
    ef_d = int(mem["ACT_ELEM_FIFO"])
    rq_d = int(mem["ACT_REQ_FIFO"])
    buf_d = int(mem["ACT_READ_BUFFER"])
    to_pk = int(mem["SEQ_ACT_FIRST"]) - 1       # a beat to the packer; the core a cycle later
    kern = kernels.get() if STREAM_TRACE is None and in_c else None
    if kern is not None:   # the same statements in C (kernels.c dtpu_stream_sim)
        return kern.stream_sim(wa, per_word, need, intake, rd_free,
                               (RL, burst, outst, ef_d, rq_d, buf_d, to_pk), blocks, takes,
                               store_consts(mem, res))
    n, nw = len(wa), len(need)
    wa = wa.tolist() if hasattr(wa, "tolist") else list(wa)
    need = need.tolist() if hasattr(need, "tolist") else list(need)
    newbeat = bytearray(n)
    e = p = 0
    run_open, run_wa, run_len = False, 0, 0
    prev_ok, prev_wa = False, 0
    rq: list = []
    gen_busy, gen_addr, gen_left, gen_blk = False, 0, 0, False
    arv, ar_beats, ar_blk = False, 0, False
    blk_next, blk_left, blk_words, blk_gap = blocks[:4] if blocks else (0, 0, 0, 0)
    blk_addr = blocks[4] if blocks and len(blocks) > 4 else 0
    blk_reads: list = []        # [first beat, last beat + 1] of each block read
    ends: list = []             # last-beat cycles of every burst (stream and blocks), in order
    ei = 0
    resv = 0
    beat_t: list = []           # arrival cycle of every stream beat, in order
    bi = 0                      # beats arrived before this cycle
    br = 0                      # beats at the packer
    bt = 0                      # beats taken by the packer
    last_beat = rd_free - 1
    owed = 0
    lane = 0
    out_valid = False
    j = 0
    stall = 0
    cyc = 0
    st = StoreWrites(res, mem) if res is not None else None
    nr = st.n if st is not None else 0
    big = 1 << 62
    # a block of the list the master took goes on after the core's last word: its bursts are
    # simulated to its last AR, which sets the next block's (not the stream's end: its bursts
    # would go uncounted, and the next block's AR left at the "set from its last beat" mark)
    while j < nw or (st is not None and st.k < nr) or (gen_busy and gen_blk) or (arv and ar_blk):
        acted = False
        # the core
        wait_room = None
        if st is None:
            take = j < nw and out_valid and cyc >= need[j] + stall
            if take:
                stall = cyc - need[j]
                if takes is not None:
                    takes.append(cyc)
                j += 1
                acted = True
                if j == nw and not ((gen_busy and gen_blk) or (arv and ar_blk)):
                    break
        else:   # its next step (an input word, a result word or both) is due at tau + stall
            t_in = need[j] if j < nw else big
            t_out = st.t[st.k] if st.k < nr else big
            tau = min(t_in, t_out)
            take = False
            if cyc >= tau + stall:
                in_ok = t_in != tau or out_valid
                room = st.room_at(cyc) if t_out == tau else cyc
                if in_ok and room <= cyc:
                    stall = cyc - tau
                    if t_in == tau:
                        take = True
                        if takes is not None:
                            takes.append(cyc)
                        j += 1
                    if t_out == tau:
                        st.emit(cyc)
                    acted = True
                elif in_ok:
                    wait_room = room
        out_free = not out_valid or take
        # beats arriving this cycle (a burst's last one frees its slot next cycle)
        done = 0
        while ei < len(ends) and ends[ei] <= cyc:
            done += 1
            ei += 1
            acted = True
        while bi < len(beat_t) and beat_t[bi] <= cyc:
            bi += 1
            acted = True
        while br < len(beat_t) and beat_t[br] + to_pk <= cyc:
            br += 1
        # the packer
        pop = False
        if p < e:
            nb = newbeat[p]
            h_word = per_word == 1 or lane == per_word - 1 or p == n - 1
            if (not nb or bt < br) and (not h_word or out_free):
                pop = True
        # the run builder
        s1_take = False
        push = None
        if e < n and cyc >= intake + e:
            a = wa[e]
            pad = a < 0
            same = not pad and prev_ok and a == prev_wa
            extend = not pad and not same and prev_ok and run_open and a == prev_wa + 1
            new_run = not pad and not same and not extend
            ext_full = extend and run_len == burst - 1
            need_push = run_open and (new_run or ext_full)
            if e - p - (1 if pop else 0) < ef_d and (not need_push or len(rq) < rq_d):
                s1_take = True
                if need_push:
                    push = (run_wa, run_len + 1 if extend else run_len)
                if not pad:
                    if not same:
                        prev_ok, prev_wa = True, a
                    if extend:
                        run_len += 1
                        if ext_full:
                            run_open = False
                    elif new_run:
                        run_wa, run_len, run_open = a, 1, True
                newbeat[e] = 1 if (not pad and not same) else 0
                if e == n - 1:
                    prev_ok = False
        if not s1_take and run_open and len(rq) < rq_d:
            push = (run_wa, run_len)
            run_open = False
        # the master: the request, the burst, the AR
        blk_req = blk_left > 0 and cyc >= blk_next - 2 and not gen_busy
        # the credit buffer's room: the word the packer takes this cycle counts as gone (as the
        # element FIFO's slot above: the RTL's times are a cycle later than these)
        freed = 1 if pop and newbeat[p] else 0
        accept = not blk_req and bool(rq) and not gen_busy and rq[0][1] <= buf_d - owed + freed
        issue = gen_busy and resv < outst and not arv
        if arv:                                  # AR handshake (ARREADY high)
            first = max(cyc + RL, last_beat + 1)
            if STREAM_TRACE is not None:
                STREAM_TRACE.append((cyc, ar_beats, bool(ar_blk)))
            last_beat = first + ar_beats - 1
            ends.append(last_beat)
            if ar_blk:
                if ar_blk & 2:                   # the block's first burst
                    blk_reads.append([first, first + ar_beats])
                else:
                    blk_reads[-1][1] = first + ar_beats
                if ar_blk & 4:                   # its last: the next block after its beats
                    blk_next = last_beat + blk_gap
            else:
                beat_t.extend(range(first, first + ar_beats))
            arv = False
            acted = True
        if issue:
            bnd = 512 - (gen_addr % 512)
            beats = min(gen_left, burst, bnd)
            arv, ar_beats = True, beats
            ar_blk = (1 | (2 if gen_blk == 2 else 0) | (4 if gen_left == beats else 0)) \
                if gen_blk else 0
            if gen_blk == 2:
                gen_blk = 1
            gen_addr += beats
            gen_left -= beats
            gen_busy = gen_left > 0
            resv += 1
            acted = True
        resv -= done
        if blk_req:
            gen_addr, gen_left, gen_blk = blk_addr, blk_words, 2
            blk_addr += blk_words
            gen_busy = True
            blk_left -= 1
            blk_next = 1 << 60                   # set from its last beat
            acted = True
        elif accept:
            gen_addr, gen_left, gen_blk = rq[0][0], rq[0][1], False
            gen_busy = gen_left > 0
            owed += gen_left
            del rq[0]
            acted = True
        if push is not None:
            rq.append(push)
            acted = True
        if pop:
            if newbeat[p]:
                bt += 1
                owed -= 1
            h_word = per_word == 1 or lane == per_word - 1 or p == n - 1
            lane = 0 if h_word else lane + 1
            out_valid = h_word or (out_valid and not take)
            p += 1
            acted = True
        elif take:
            out_valid = False
        if s1_take:
            e += 1
            acted = True
        # nothing moved: jump to the next cycle anything can
        if not acted and not accept and not issue:
            cand = []
            if ei < len(ends):
                cand.append(ends[ei])
            if blk_left:
                cand.append(blk_next - 2)
            if bi < len(beat_t):
                cand.append(beat_t[bi])
            if br < len(beat_t):
                cand.append(beat_t[br] + to_pk)
            if e < n:
                cand.append(intake + e)
            if st is None:
                if out_valid and j < nw:
                    cand.append(need[j] + stall)
            else:
                t_in = need[j] if j < nw else big
                t_out = st.t[st.k] if st.k < nr else big
                if (t_in <= t_out and out_valid) or t_out < t_in:
                    cand.append(min(t_in, t_out) + stall)
                if wait_room is not None:
                    cand.append(wait_room)
            nxt = min([c for c in cand if c > cyc], default=cyc + 1)
            cyc = max(cyc + 1, nxt)
            continue
        cyc += 1
    if st is not None:
        res["w_end"] = st.finish(res["end0"] + stall + res["tail"])
    first = beat_t[0] if beat_t else None
    return (stall, first, (beat_t[-1] + 1 if beat_t else None), len(beat_t), blk_reads,
            blk_next if blk_left else None)


def first_words(f: "Format", d: dict, limit: int) -> list | None:
    """The DDR word addresses (None: a PAD word) of the first `limit` words of a RUN's
    activation stream when the load unit runs it in word mode (dtpu_cl_load: WINDOWS with C a
    multiple of LANES, CHANNELS with REP 1 and C, CH0, CHANNELS multiples of LANES; SRC 8-byte
    aligned); None in lane mode or for a stream the unit would not start."""
    act_src, act_shape, act_win, act_span = (d[k] for k in ("ACT0", "ACT1", "ACT2", "ACT3"))
    mode, L = act_src["MODE"], act_src["LANES"]
    n, h, w, c = act_shape["N"], act_shape["H"], act_shape["W"], act_shape["C"]
    if L < 1 or act_src["SRC"] % 8 or c % L:
        return None
    base, cw = act_src["SRC"] // 8, c // L
    out: list = []
    if mode == f.act_modes["CHANNELS"]:
        rep, ch0, chans = act_span["KP"], act_span["K0"], act_span["K1"]
        nchunk = max(1, act_span["NCHUNK"])
        if rep != 1 or ch0 % L or chans % (nchunk * L):
            return None
        per = chans // nchunk // L
        for k in range(nchunk):
            for p in range(h * w):
                for j in range(per):
                    ch = ch0 // L + k * per + j
                    out.append(base + p * cw + ch if ch < cw else None)
                    if len(out) >= limit:
                        return out
        return out
    if mode != f.act_modes["WINDOWS"]:
        return None
    kh, kw, sy, sx = act_win["KH"], act_win["KW"], act_win["SY"], act_win["SX"]
    dy, dx = act_win["DY"], act_win["DX"]
    pt, pl, oh, ow = act_win["PT"], act_win["PL"], act_win["OH"], act_win["OW"]
    kp, k0, k1 = act_span["KP"] // L, act_span["K0"], act_span["K1"]
    for b in range(n):
        for oy in range(oh):
            for ox in range(ow):
                for j in range(k0, k1):
                    if j >= kh * kw * cw or j >= kp:
                        out.append(None)
                    else:
                        tap, cj = divmod(j, cw)
                        ky, kx = divmod(tap, kw)
                        y, x = oy * sy + ky * dy - pt, ox * sx + kx * dx - pl
                        inside = 0 <= y < h and 0 <= x < w
                        out.append(base + ((b * h + y) * w + x) * cw + cj if inside else None)
                    if len(out) >= limit:
                        return out
    return out


def pointwise_window(act_win: dict, h: int, w: int) -> bool:
    """ACT2 is a 1x1 window at stride 1 over the whole h x w image (pointwise convolutions,
    FULLY_CONNECTED): each pixel's K-vector is its own channels, no index to gather by."""
    return (act_win["KH"], act_win["KW"], act_win["SY"], act_win["SX"], act_win["PT"], act_win["PL"],
            act_win["OH"], act_win["OW"]) == (1, 1, 1, 1, 0, 0, h, w)


def window_index(act_shape: dict, act_win: dict, kp: int) -> np.ndarray:
    """Flat element index of every (pixel, K lane) of a WINDOWS stream; index n*h*w*c (one past
    the tensor) stands for PAD: taps outside the image and lanes K..KP-1."""
    n, h, w, c = act_shape["N"], act_shape["H"], act_shape["W"], act_shape["C"]
    kh, kw, sy, sx = act_win["KH"], act_win["KW"], act_win["SY"], act_win["SX"]
    dy, dx = act_win["DY"], act_win["DX"]
    pt, pl, oh, ow = act_win["PT"], act_win["PL"], act_win["OH"], act_win["OW"]
    b_, oy, ox, ky, kx, ci = np.meshgrid(np.arange(n), np.arange(oh), np.arange(ow), np.arange(kh),
                                         np.arange(kw), np.arange(c), indexing="ij", sparse=True)
    y = oy * sy + ky * dy - pt
    xx = ox * sx + kx * dx - pl
    inside = (y >= 0) & (y < h) & (xx >= 0) & (xx < w)
    idx = ((b_ * h + y) * w + xx) * c + ci
    size = n * h * w * c
    k = kh * kw * c
    idx = np.where(inside, idx, size).reshape(n * oh * ow, k)
    if kp < k:
        raise ListFault("BAD_FIELD", f"ACT KP={kp} lanes < K={k}")
    if kp > k:
        idx = np.concatenate([idx, np.full((idx.shape[0], kp - k), size)], axis=1)
    # int32 halves the cached indexes (a 3x3 window over 112x112x32 is 29 M lanes otherwise
    # 230 MB); np.take accepts them
    return np.ascontiguousarray(idx, dtype=np.int32 if size < 2**31 else np.intp)
