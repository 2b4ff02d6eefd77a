"""The store unit (dtpu_cl_store_pack, dtpu_cl_store_wq, the write master) of the simulated
device: its write bursts, the result words' gaps, its write queue's holds of the core, and the
cycle simulation whose C twin is kernels.c ``dtpu_store_sim`` (:func:`store_sim` runs it where
the kernels are built).
"""
from __future__ import annotations

import bisect

import numpy as np

from dtpu.hw import dw_timing, kernels


def write_runs(items, max_run: int, max_gap: int) -> list[int]:
    """The store unit's write bursts (dtpu_cl_store_wq) for items (byte address, bytes) in
    stream order: the words they touch, consecutive ones collected into runs of up to
    `max_run` words, a gap of up to `max_gap` words inside a run filled with strobe-less
    words (beats too); the beats of each run."""
    runs: list[int] = []
    s0 = e0 = None
    for a, n in items:
        if n <= 0:
            continue
        for w in range(a // 8, (a + n - 1) // 8 + 1):
            if e0 is not None and w == e0:
                continue
            if e0 is not None and e0 < w <= e0 + max_gap + 1 and w - s0 + 1 <= max_run:
                e0 = w
                continue
            if e0 is not None:
                runs.append(e0 - s0 + 1)
            s0 = e0 = w
    if e0 is not None:
        runs.append(e0 - s0 + 1)
    return runs


def result_gaps_array(cfg, setup, n: int) -> np.ndarray | None:
    """:func:`result_gaps` as an int64 array, computed with numpy (the store plans of long
    RUNs: every result word's gap)."""
    if setup.opcode == "GEMM":
        period, wps = max(setup.kw, setup.wpi), setup.wpi
        k = np.arange(n + 1, dtype=np.int64)
        return (k // wps) * period + k % wps
    if setup.opcode == "DWCONV" and setup.geom is not None:
        t = dw_timing.result_times(cfg, setup)
        return (-t[::-1][:n + 1]).astype(np.int64)
    g = result_gaps(cfg, setup, n)
    return None if g is None else np.asarray(g, np.int64)


def result_gaps(cfg, setup, n: int) -> tuple | None:
    """For the last n + 1 result words of a job (`setup`, its JobSetup), how many cycles before
    its last one each came (k = 0: the last), from the job's closed-form schedule: a GEMM's
    steps give `words` (setup.wpi) one a cycle every max(KW, words) cycles; a DWCONV's steps give
    their items' words one a cycle, COLS items a step, each step `period` after the one before
    in its output row, the rows at their own starts (model.dw_schedule). None: other jobs."""
    if setup.opcode == "GEMM":
        period, wps = max(setup.kw, setup.wpi), setup.wpi
        return tuple((k // wps) * period + k % wps for k in range(n + 1))
    if setup.opcode == "DWCONV" and setup.geom is not None:
        from dtpu.hw.contract_schedules import dw_schedule
        g, cols = setup.geom, cfg.COLS
        tm = dw_schedule(cfg, g, setup.wpi)
        spr = g.steps_per_row(cols)
        times: list[int] = []
        for o in range(len(tm.compute_start) - 1, -1, -1):
            for s_ in range(spr - 1, -1, -1):
                items = min(cols, g.ow * g.gc - s_ * cols)
                t0 = int(tm.compute_start[o]) + s_ * tm.period
                for j in range(items * setup.wpi - 1, -1, -1):
                    times.append(t0 + j)
                    if len(times) > n:
                        return tuple(times[0] - t for t in times)
        return tuple(times[0] - t for t in times)
    return None


def stalled_gaps(gaps: tuple | None, need, stalls: list, cycles: int) -> tuple | None:
    """The result words' gaps (:func:`result_gaps`, stall-free: k = 0 the last word, 2 cycles
    before the job's end) once the core's stalls waiting for activation words are in
    (`stalls`: per word, the take cycle :func:`stream_sim` records in `takes` less its need):
    the 1.2 core's stall is global, so a result word due at stall-free cycle s comes as late as
    the stall after the last word the core took by s (need[j] < s); the last one after every
    stall. docs/rtl.md "float32 and the one-cycle
    corners"."""
    if gaps is None or not stalls or len(stalls) != len(need):
        return gaps
    nd = need.tolist() if hasattr(need, "tolist") else list(need)
    last = cycles - 2
    fin = stalls[-1]
    out = []
    for g in gaps:
        j = bisect.bisect_left(nd, last - g) - 1
        out.append(g + fin - (stalls[j] if j >= 0 else 0))
    return tuple(out)


#: debugging: a list to record the simulated store's AWs in (cycle, "AW", beats)
STORE_TRACE: list | None = None


def store_sim(chunks, offer, mem: dict, wq_words: int, prior: tuple = (), *,
              in_c: bool = True) -> tuple:
    """The store unit's ITEMS path and the write master (dtpu_cl_store, dtpu_cl_store_pack,
    dtpu_cl_store_wq, dtpu_axi_wr, dtpu_axi_burst) cycle by cycle under the contract's memory
    model, for the result words of one RUN (docs/rtl.md "float32 and the one-cycle corners").

    `chunks[r]`: (byte address, bytes kept) of result word r (0 bytes: a word the walk drops);
    `offer[r]`: the cycle the core offers it when it has not been held (the 1.2 core's stall is
    global: each cycle a word waits holds every later word too); `wq_words`: the write queue's
    words (STORE_WQ_WORDS; as many requests); `prior`: write responses still due of earlier
    RUNs' bursts (their slots). Returns (the cycles the core was held, the cycle of each
    word's handshake, the cycle of the last write response, every burst's response cycle, the
    write beats: the words with strobes and the gap words).

    Per cycle: the word stage takes a word when free (or freed this cycle); the realigner takes
    the stage's chunk when its output slot is free (or taken), not closing, and the chunk is not
    elsewhere than its open word while it would send a word itself; the queue takes the
    realigner's word when its FIFOs have room and no gap is to be filled (a gap of up to
    SEQ_STORE_GAP words past the run's end, the run staying within MEM_BURST_BEATS, is filled
    with strobe-less words first, one a cycle); a run closes at a word that does not follow it,
    at MEM_BURST_BEATS words or at the close marker; the master takes a request when it has
    split the one before, issues a burst the cycle after while fewer than MEM_READ_OUTSTANDING
    (the write master's MAX_OUTSTANDING, 8) are unanswered, its AW the cycle after, its beats
    from the cycle after the AW, one a cycle as the queue has them; a response
    MEM_WRITE_LATENCY after the burst's last beat frees its slot the cycle after.

    `in_c`: run the C twin where the kernels are built (False: these Python statements, which
    the twin is tested against)."""
    WL = int(mem["MEM_WRITE_LATENCY"])
    burst = int(mem["MEM_BURST_BEATS"])
    outst = int(mem["MEM_READ_OUTSTANDING"])
    max_gap = int(mem["SEQ_STORE_GAP"])
    n = len(chunks)
    if not n:
        return 0, [], None, [], 0
    kern = kernels.get() if STORE_TRACE is None and in_c else None
    if kern is not None:   # the same statements in C (kernels.c dtpu_store_sim)
        ch = np.asarray(chunks, np.int64).reshape(-1, 2)
        return kern.store_sim(ch[:, 0], ch[:, 1], offer, (wq_words, WL, burst, outst, max_gap),
                              tuple(prior))
    # the core and the word stage
    w_beats = 0
    held = 0
    r = 0
    hs = [0] * n
    st_v, st_a, st_n, st_last = False, 0, 0, False
    # the realigner
    b_w, b_m, fl = 0, 0, False
    o_v, o_w, o_m, o_c = False, 0, 0, False
    # the write queue
    wf = 0
    rf: list = []
    run_v, run_a, run_n = False, 0, 0
    # the write master
    gen_busy, gen_addr, gen_left = False, 0, 0
    resv = len(prior)
    awv, aw_beats = False, 0
    f_q: list = []
    wb = 0
    b_due = sorted(prior)
    bi = 0
    last_b = None
    closed = False
    cyc = min(offer[0], b_due[0] if b_due else offer[0])
    while True:
        acted = False
        # write responses this cycle
        done = 0
        while bi < len(b_due) and b_due[bi] <= cyc:
            done += 1
            last_b = b_due[bi]
            bi += 1
            acted = True
        # the queue's input (the realigner's output slot) and its ready
        wf_full = wf >= wq_words
        rf_full = len(rf) >= wq_words
        has_word = o_m != 0
        follows = run_v and o_w == run_a + run_n and run_n != burst
        gap = o_w - (run_a + run_n)
        fill_want = (o_v and has_word and run_v and not follows and 0 < gap <= max_gap
                     and run_n + gap < burst)
        fill = fill_want and not wf_full and not rf_full
        q_ready = not wf_full and not rf_full and not fill_want
        in_hs = o_v and q_ready
        # the realigner's input (the word stage)
        can = not o_v or q_ready
        pk_take = False
        if st_v:
            off, w0 = st_a & 7, st_a >> 3
            sh_m = ((1 << st_n) - 1) << off
            lo_m, hi_m = sh_m & 0xFF, sh_m >> 8
            mg_m = b_m | lo_m
            other = b_m != 0 and b_w != w0
            sends = hi_m != 0 or mg_m == 0xFF
            sends_own = hi_m != 0 or lo_m == 0xFF
            pk_take = can and not fl and not (st_n and other and sends_own)
        # the core's word into the word stage
        core_hs = r < n and cyc >= offer[r] + held and (not st_v or pk_take)
        # the master
        wvalid = bool(f_q) and wf > 0
        w_done = wvalid and wb == f_q[0] - 1
        req_hs = bool(rf) and not gen_busy
        issue = gen_busy and resv < outst and not awv
        # ---- updates
        if wvalid:
            wf -= 1
            w_beats += 1
            acted = True
            if w_done:
                del f_q[0]
                wb = 0
                b_due.append(cyc + WL)
                if STORE_TRACE is not None:
                    STORE_TRACE.append((cyc, "WLAST", cyc + WL))
            else:
                wb += 1
        if awv:
            f_q.append(aw_beats)
            awv = False
            acted = True
            if STORE_TRACE is not None:
                STORE_TRACE.append((cyc, "AW", aw_beats))
        if issue:
            bnd = 512 - (gen_addr % 512)
            beats = min(gen_left, burst, bnd)
            awv, aw_beats = True, beats
            gen_addr += beats
            gen_left -= beats
            gen_busy = gen_left > 0
            resv += 1
            acted = True
        resv -= done
        if req_hs:
            gen_addr, gen_left = rf[0]
            gen_busy = gen_left > 0
            del rf[0]
            acted = True
        # the queue
        if fill:
            wf += 1
            run_n += 1
            acted = True
        elif in_hs:
            acted = True
            n_after = run_n + 1 if follows else 1
            push_full = has_word and follows and n_after == burst
            if run_v and (o_c or (has_word and not follows)):
                rf.append((run_a, run_n))
            elif push_full:
                rf.append((run_a, n_after))
            if STORE_TRACE is not None and (run_v and (o_c or (has_word and not follows))
                                             or push_full):
                STORE_TRACE.append((cyc, "REQ", rf[-1][1]))
            if has_word:
                wf += 1
            if o_c or push_full:
                run_v = False
                if o_c:
                    closed = True
            elif has_word:
                run_v, run_n = True, n_after
                if not follows:
                    run_a = o_w
        # the realigner
        new_o = False if can else o_v
        if can and fl:
            new_o, o_w, o_m, o_c = True, b_w, b_m, b_m == 0
            if b_m == 0:
                fl = False
            b_m = 0
            acted = True
        elif can and st_v and st_n and b_m != 0 and b_w != (st_a >> 3):
            new_o, o_w, o_m, o_c = True, b_w, b_m, False
            b_m = 0
            if pk_take:
                b_w, b_m = st_a >> 3, ((1 << st_n) - 1) << (st_a & 7)
                if st_last:
                    fl = True
            acted = True
        elif pk_take:
            if st_n:
                if sends:
                    new_o, o_w, o_m, o_c = True, w0, mg_m, False
                    b_w, b_m = w0 + 1, hi_m
                else:
                    b_w, b_m = w0, mg_m
            if st_last:
                fl = True
            acted = True
        o_v = new_o
        # the word stage
        if core_hs:
            st_v, (st_a, st_n), st_last = True, chunks[r], r == n - 1
            hs[r] = cyc
            r += 1
            if STORE_TRACE is not None:
                STORE_TRACE.append((cyc, "HS", r - 1))
            acted = True
        elif pk_take:
            st_v = False
        elif st_v:
            pass
        waiting = r < n and cyc >= offer[r] + held and not core_hs
        if waiting:
            held += 1
        if closed and not rf and not gen_busy and not awv and not f_q and wf == 0 \
                and bi >= len(b_due):
            break
        if not acted:       # nothing moved: the next response or the next word's offer
            cand = [b_due[bi]] if bi < len(b_due) else []
            if r < n and not waiting:
                cand.append(offer[r] + held)
            nxt = max(cyc + 1, min([c for c in cand if c > cyc], default=cyc + 1))
            if waiting:
                held += nxt - cyc - 1
            cyc = nxt
            continue
        cyc += 1
    return held, hs, last_b, b_due, w_beats


#: result words the store unit holds outside its write queue: dtpu_cl_store's word stage and
#: dtpu_cl_store_pack's output register (modelled one by one in :func:`store_sim`)
STORE_STAGE_WORDS = 2


def store_hold(mem: dict) -> int:
    """The most words :func:`stream_sim`'s store model lets the store unit hold, beside the
    write beats gone, before it takes another result word: the write queue (STORE_WQ_WORDS,
    the same hardware :func:`store_sim` simulates) and the two stages before it, less the
    word being taken (33 on the board build; probe: the queue's wf_full, docs/rtl.md "The
    store unit's write queue in the Timeline")."""
    return int(mem["STORE_WQ_WORDS"]) + STORE_STAGE_WORDS - 1


def store_consts(mem: dict, res: dict | None) -> tuple | None:
    """The store model's inputs for the C kernel: (result times, DDR words, :func:`store_hold`,
    SEQ_STORE_AW, SEQ_WR_SLOT, bursts in flight, MEM_BURST_BEATS, MEM_WRITE_LATENCY, the
    stall-free end, the tail, the dict to put w_end in), None without `res`."""
    if res is None:
        return None
    return (res["t"], res["wa"], store_hold(mem), int(mem["SEQ_STORE_AW"]),
            int(mem["SEQ_WR_SLOT"]), int(mem["MEM_READ_OUTSTANDING"]),
            int(mem["MEM_BURST_BEATS"]), int(mem["MEM_WRITE_LATENCY"]), int(res["end0"]),
            int(res["tail"]), res)


class StoreWrites:
    """The store unit's write side for :func:`stream_sim`'s `res` (its docstring)."""

    def __init__(self, res: dict, mem: dict) -> None:
        self.t = [int(v) for v in res["t"]]
        self.wa = [int(v) for v in res["wa"]]
        self.n = len(self.t)
        self.hold = store_hold(mem)
        self.aw_d = int(mem["SEQ_STORE_AW"])
        self.slot = int(mem["SEQ_WR_SLOT"])
        self.outst = int(mem["MEM_READ_OUTSTANDING"])
        self.burst = int(mem["MEM_BURST_BEATS"])
        self.wl = int(mem["MEM_WRITE_LATENCY"])
        self.k = 0                      # result words handed
        self.b_start: list = []         # first beat of each burst
        self.b_cum: list = [0]          # beats of the bursts before it
        self.b_resp: list = []          # its response
        self.last_beat = -(1 << 40)
        self.run_s = self.run_e = None

    def issue(self, req: int, a: int, n: int) -> None:
        """The write request of the run of n words from DDR word a: its bursts (split at
        4 KiB as dtpu_axi_burst splits them), each AW after the beats of the one before."""
        while n > 0:
            m = min(n, 512 - a % 512)
            aw = max(req, self.last_beat)
            if len(self.b_resp) >= self.outst:
                aw = max(aw, self.b_resp[-self.outst] + self.slot)
            self.b_start.append(aw + 1)
            self.b_cum.append(self.b_cum[-1] + m)
            self.last_beat = aw + m
            self.b_resp.append(aw + m + self.wl)
            a += m
            n -= m

    def room_at(self, c: int) -> int:
        """The first cycle from c on the queue takes a word (its held words less the beats gone
        at most :func:`store_hold`)."""
        m = self.k - self.hold
        if m <= 0 or m > self.b_cum[-1]:
            return c
        i = bisect.bisect_left(self.b_cum, m) - 1
        return max(c, self.b_start[i] + (m - 1 - self.b_cum[i]) + 1)

    def emit(self, c: int) -> None:
        a = self.wa[self.k]
        if self.run_e is not None and (a != self.run_e + 1
                                       or self.run_e - self.run_s + 1 == self.burst):
            self.issue(c + self.aw_d, self.run_s, self.run_e - self.run_s + 1)
            self.run_s = self.run_e = None
        self.k += 1
        if self.run_e is None:
            self.run_s = self.run_e = a
        else:
            self.run_e = a
        if self.run_e - self.run_s + 1 == self.burst:
            self.issue(c + self.aw_d, self.run_s, self.burst)
            self.run_s = self.run_e = None

    def finish(self, last_req: int) -> int | None:
        if self.run_e is not None:
            self.issue(last_req, self.run_s, self.run_e - self.run_s + 1)
        return self.b_resp[-1] + 1 if self.b_resp else None
