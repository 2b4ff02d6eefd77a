"""The cycle model of one command list (contract.json ``contract2.memory_model``): the fetcher,
the sequencer, the load and store units and the memory channels they share, in the order the
hardware does them, so the golden model's CL_CYCLES, IDLE, RD_BEATS and WR_BEATS equal the RTL's.
The per-unit cycle simulations it calls live in :mod:`dtpu.hw.units` beside their C twins.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from dtpu.hw.listformat import Format, ListFault
from dtpu.hw.units import acc as acc_unit
from dtpu.hw.units import load as load_unit
from dtpu.hw.units import store as store_unit
from dtpu.hw.units.acc import AccRun, AccWrites
from dtpu.hw.units.store import stalled_gaps


@dataclass
class Timeline:
    """The memory model of contract 2.0 (contract.json ``contract2.memory_model``) and the
    sequencer's own timing, as the RTL (``dtpu_cl_fetch`` / ``dtpu_cl_seq``) has it.

    One read channel and one write channel, each one beat (8 bytes) per cycle after a
    request's latency; with MEM_READ_OUTSTANDING bursts of MEM_BURST_BEATS in flight (128 beats
    >= the latency) a read of N beats occupies its channel N cycles and its first beat comes
    MEM_READ_LATENCY after the request. Reads are served in request order (``mem_read``: the
    calls are made in request-time order; a block of the list due earlier than a LOAD's
    request is put on the channel first).

    * the fetcher reads the list in blocks of DESC_FIFO_WORDS: the first SEQ_FETCH_START after
      DOORBELL, each next one SEQ_FETCH_NEXT after the last beat of the one before, none past
      the block holding END (``list_words``: the hardware follows the headers' LEN as the words
      arrive). A descriptor is handed to the sequencer SEQ_DECODE after its last word arrived
      (one more for a one-word descriptor), SEQ_DESC_GAP after the last word of the one before
      was taken, one word per cycle;
    * the sequencer runs one descriptor at a time, in list order (``seq_free``: when it takes
      the next header). REGS: one pair every SEQ_REG_CYCLES. LOAD: its read is requested SEQ_LOAD_REQ
      after its header was taken (the 1.2 LOAD job's registers are written meanwhile), the
      words stream into the core one per cycle and the sequencer takes the next header
      SEQ_LOAD_DONE after the last beat (the job's DONE, the registers written back); a LOAD of
      no words takes SEQ_LOAD_EMPTY. A LOAD therefore never overlaps another LOAD's or a RUN's
      latency (the RTL's LOAD is a 1.2 job on the core);
    * RUN (:meth:`run`): starts SEQ_RUN_START after it was taken, once the core is free,
      every earlier LOAD is done and its input is in DDR (the sequencer's range table,
      SEQ_RUN_RANGES); its activation stream is requested after the load unit's setup and
      first run; the job's stall-free schedule (the 1.2 formulas) shifts by however late the
      core's first word is beyond CFG_CYCLES; after that the channel's one beat per cycle
      keeps up with the core's at most one (exact for word-mode streams of long runs: the
      RTL's figures equal these on 1x1 and depthwise convolutions, docs/rtl.md). The next
      header SEQ_RUN_DONE after the job's end; its last write response after the store
      unit's last burst (:meth:`store_tail`);
    * END: taken, then the last RUN's results written (+ MEM_WRITE_LATENCY) and every load
      done; CL_CYCLES ends SEQ_END after END was taken (the units idle), + IRQ_LATENCY.

    ``idle`` = list cycles - the RUN / POST jobs' stall-free cycles: cycles the core waited on
    memory, loads or the fetcher (hw.idle_cycles; a LOAD's 1.2 job counts as idle)."""

    fmt: Format
    start: int = 0
    #: words of the list up to and including END (None: not known, blocks read as needed)
    list_words: int | None = None
    rd_free: int = 0
    wr_done: int = 0
    core_free: int = 0
    loads_done: int = 0
    last_run_end: int = 0
    fetched_words: int = 0
    compute: int = 0
    rd_beats: int = 0
    wr_beats: int = 0
    written: list = field(default_factory=list)  # (lo, hi, cycle of the write response) per RUN
    #: the sequencer's in-flight result ranges (lo, hi) and its overflow flag (SEQ_RUN_RANGES)
    inflight_writes: list = field(default_factory=list)
    inflight_overflow: bool = False
    run_ends: list = field(default_factory=list)
    #: write responses still due of the last simulated store (:meth:`_run_store_sim`)
    wr_bursts: list = field(default_factory=list)
    #: optional per-descriptor event record (None: off): (kind, cycles...) tuples, for
    #: comparing the model's times with the RTL's (sim/dtpu_sim/cycles.py)
    events: list | None = None
    #: the list's address (None: not known): its blocks' bursts split at 4 KiB as the read
    #: master splits them (:meth:`_bursts` counts bursts in flight)
    list_addr: int | None = None

    def __post_init__(self) -> None:
        m = self.fmt.mem
        self.RL, self.WL = int(m["MEM_READ_LATENCY"]), int(m["MEM_WRITE_LATENCY"])
        self.rd_free = self.start
        self.fifo = int(m["DESC_FIFO_WORDS"])
        self.K = {k: int(v) for k, v in m.items() if k.startswith("SEQ_")}
        self.block_first: list[int] = []       # first beat of each block of the list
        self.next_block = self.start + self.K["SEQ_FETCH_START"]   # its request
        self.hand_free = self.start            # the fetcher can hand the next header
        self.seq_free = self.start             # the sequencer takes the next header
        self.taken = self.start                # the last header taken
        self.block_end = self.start            # the last block's last beat + 1
        self.popped: list[int] = []            # the cycle the sequencer took each list word
        self.fifo_depth = 1 << self.fmt.fields["HEADER"]["LEN"][1]
        self.r_last: list[int] = []            # every read burst's last beat, in order
        self.ar_free = self.start              # the read master's next AR
        self.latch_free = self.start           # it takes the next request (:meth:`_bursts`)

    def _blocks(self) -> int:
        """Blocks the fetcher reads (all up to the one holding END, when known)."""
        if self.list_words is None:
            return 1 << 30
        return -(-self.list_words // self.fifo)

    def _block_req(self) -> int | None:
        """When the fetcher requests its next block: SEQ_FETCH_NEXT after the last beat of the
        one before and once its FIFO (2^LEN words, any descriptor fits) has room for it, i.e.
        the sequencer has taken all but that many words of the blocks before (SEQ_FETCH_ROOM
        after it took the last one needed); None while that word is not taken yet."""
        need = (len(self.block_first) + 1) * self.fifo - self.fifo_depth
        if need <= 0:
            return self.next_block
        if need > len(self.popped):
            return None
        return max(self.next_block, self.popped[need - 1] + self.K["SEQ_FETCH_ROOM"])

    def _block_addr(self) -> int:
        """The DDR word address of the fetcher's next block (0 when the list's is not known:
        its bursts then split as a page-aligned list's)."""
        if self.list_addr is None:
            return 0
        return self.list_addr // 8 + self.fifo * len(self.block_first)

    def _issue_block(self, t_dec: int | None = None) -> None:
        """The fetcher's next block; at t_dec (:meth:`_read_sched`) counted burst by burst."""
        t_req = self._block_req()
        if t_req is None:       # not reached by a list the sequencer takes in order
            t_req = max(self.next_block, self.popped[-1] if self.popped else 0)
        addr = None if self.list_addr is None else 8 * self._block_addr()
        if t_dec is not None and addr is not None:
            bl = self._bursts(t_dec, addr, self.fifo)
            first, end = bl[0][0], bl[-1][0] + bl[-1][1]
        else:
            first, end = self._read_raw(t_req, self.fifo, addr)
        self.block_first.append(first)
        self.block_end = end
        self.next_block = end - 1 + self.K["SEQ_FETCH_NEXT"]

    def _read_raw(self, t_req: int, beats: int, addr: int | None = None) -> tuple[int, int]:
        first = max(t_req + self.RL, self.rd_free)
        self.rd_free = first + beats
        self.rd_beats += beats
        # the bursts it occupies (for the reads that count them, :meth:`_bursts`): of
        # MEM_BURST_BEATS, split at 4 KiB when the address is known
        burst = int(self.fmt.mem["MEM_BURST_BEATS"])
        b0, n_b = 0, 0
        while b0 < beats:
            n = min(beats - b0, burst)
            if addr is not None:
                n = min(n, (4096 - (addr + 8 * b0) % 4096) // 8)
            b0 += n
            n_b += 1
            self.r_last.append(first + b0 - 1)
        self.ar_free = max(self.ar_free, t_req + 2 * n_b)
        self.latch_free = max(self.latch_free, t_req + 2 * (n_b - 1))
        return first, first + beats

    def mem_read(self, t_req: int, beats: int) -> tuple[int, int]:
        """(first beat, last beat + 1) of a unit's read of `beats` on the memory port, requested at
        t_req; the list's blocks requested before it go first."""
        while len(self.block_first) < self._blocks() and self.block_first:
            nb = self._block_req()
            if nb is None or nb > t_req:
                break
            self._issue_block()
        return self._read_raw(t_req, beats)

    def _arrival(self, i: int) -> int:
        """The cycle word i of the list arrives."""
        while len(self.block_first) <= i // self.fifo:
            self._issue_block()
        return self.block_first[i // self.fifo] + i % self.fifo

    def fetch(self, words: int) -> int:
        """The cycle the sequencer takes the header of the next descriptor (`words` words);
        by default it takes its words one per cycle and is free after the last."""
        last = self.fetched_words + words - 1
        self.fetched_words += words
        ready = self._arrival(last) + self.K["SEQ_DECODE"] + (1 if words == 1 else 0)
        h = max(ready, self.hand_free, self.seq_free)
        self.taken = h
        self.popped.extend(range(h, h + words))
        self.hand_free = h + words - 1 + self.K["SEQ_DESC_GAP"]
        self.seq_free = h + words
        if self.events is not None:
            self.events.append(("head", h))
        return h

    def regs(self, t_fetch: int, pairs: int) -> None:
        """REGS: the first pair written in the cycle the header is taken, then one every
        SEQ_REG_CYCLES (dtpu_regfile takes a write every other cycle: its write response)."""
        last = t_fetch + self.K["SEQ_REG_CYCLES"] * (pairs - 1)   # the last pair taken
        if pairs:   # the pairs leave the fetcher's FIFO at that rate (:meth:`_block_req`)
            self.popped[-pairs:] = [t_fetch + 1 + self.K["SEQ_REG_CYCLES"] * i
                                    for i in range(pairs)]
        self.seq_free = last + 1
        self.hand_free = last + self.K["SEQ_DESC_GAP"]

    def load(self, t_fetch: int, beats: int, after: int) -> None:
        if after > len(self.run_ends):
            raise ListFault("BAD_FIELD", f"LOAD AFTER={after}: only {len(self.run_ends)} RUNs "
                           f"before it in the list")
        t = max(t_fetch, self.run_ends[after - 1] if after else 0)
        if not beats:
            self.seq_free = max(self.seq_free, t + self.K["SEQ_LOAD_EMPTY"])
            return
        first, end = self.mem_read(t + self.K["SEQ_LOAD_REQ"], beats)
        done = end - 1 + self.K["SEQ_LOAD_DONE"]
        self.seq_free = max(self.seq_free, done)
        self.loads_done = max(self.loads_done, done)
        if self.events is not None:
            self.events.append(("load", first, end - 1, done))

    def run(self, t_fetch: int, src: tuple, dst: tuple, act_beats: int, res_beats: int,
            cycles: int, store_reads: int = 0, act_req: tuple | None = None,
            res_gaps: tuple | None = None, post: tuple | None = None,
            store: tuple | None = None) -> None:
        """A RUN (or POST): `store_reads` are the ACC partial sums the store unit reads back,
        requested on the read channel behind the activation stream.

        `act_req` (a RUN; None for a POST): (cycles from the job's start to its activation
        stream's request as the load unit makes it, :func:`~dtpu.hw.step_timing.act_req`: the
        unit's setup and the first run's collection; the beats the stream reads, which PAD
        words and elements sharing a word do not take, :func:`~dtpu.hw.step_timing.act_read_beats`;
        the beats the store unit writes, :func:`~dtpu.hw.step_timing.res_beats`). A RUN then
        starts SEQ_RUN_START after its header was
        taken (its eight words, the wait, CTRL.START); if it depends on a write still in
        flight, SEQ_RUN_WAIT after every earlier write response (`wr_done`). It depends when its
        input bytes overlap the result range of a RUN since the writes were last seen all
        answered at a RUN's start (the sequencer's table of SEQ_RUN_RANGES ranges), when it
        reads partial sums back (ACC without FIRST: `store_reads`), when more RUNs than the
        table holds or a POST came since. The core's first word comes
        SEQ_ACT_FIRST after the stream's first beat, and the job's stall-free schedule shifts
        by however much later that is than CFG_CYCLES (the channel's beat a cycle keeps up
        with the core afterwards when the stream's runs are long: word mode, contiguous); the
        next header SEQ_RUN_DONE after the core's DONE; its last write response
        MEM_WRITE_LATENCY after the store unit's last beat (:meth:`store_tail`)."""
        lo, hi = src
        K = self.K
        run = act_req is not None
        if run:
            t = max(t_fetch + K["SEQ_RUN_START"], self.core_free, self.loads_done)
            idle = self.wr_done + K["SEQ_RUN_WAIT"]       # every write answered
            if store_reads or self.inflight_overflow or any(lo < w1 and w0 < hi
                                                            for w0, w1 in self.inflight_writes):
                t = max(t, idle)
            if idle <= t:
                self.inflight_writes, self.inflight_overflow = [], False
        else:   # a POST: the sequencer waits for every write, the POST's are not tracked
            w = [t for w0, w1, t in self.written if lo < w1 and w0 < hi]
            if post is not None:    # dtpu_cl_seq's S_PWAIT: every write answered; the POST's
                # times count from its header, SEQ_POST_GO before the cycle it can go then
                w = [x - K["SEQ_POST_GO"] for x in w + [self.wr_done]]
            t = max([t_fetch, self.core_free, self.loads_done] + w)
            self.inflight_writes, self.inflight_overflow = [], True
        shift = 0
        first = None
        dw_w_end = None
        sched = None
        req, rd, wr, part = act_req[:4] if run else (0, act_beats, res_beats, 0)
        stream = act_req[4] if run and len(act_req) > 4 else None
        acc = act_req[5] if run and len(act_req) > 5 else None
        if acc is not None and stream is not None and len(stream) > 5 and stream[5]:
            stream = None       # a whole-tensor 1x1 stream (cause 5): an ACC RUN's is one read
        if acc is not None:     # RES ACC: the store unit's rate and reads (:meth:`_acc_run`)
            first, end = self._acc_run(t, acc, req, rd, store_reads, cycles, stream)
        elif post is not None:  # the post unit (:meth:`_post_run`)
            first, end, res_gaps = self._post_run(t, post)
        else:
            if stream is not None and len(stream) > 5 and stream[5] and \
                    not self._block_due(t + req + rd):
                stream = None       # a whole-tensor 1x1 stream with the master to itself
            if act_beats and stream is not None:
                # a stream that may not keep up (3x3 WINDOWS, lane mode, depthwise CHANNELS:
                # docs/rtl.md "Depthwise streams"): the load unit's runs,
                # bursts and packer against the core's need times, cycle by cycle
                # the list's blocks still to read go through the same master (the arbiter serves
                # the fetcher first, its 64-word reads take MEM_BURST_BEATS bursts): the simulation
                # starts at the next one's request when that comes before the RUN's start (every
                # earlier read is done by then: the RUN before took its words)
                left = self._blocks() - len(self.block_first) if self.block_first else 0
                # the fetcher's FIFO (2^LEN words, dtpu_cl_fetch) holds the words the sequencer has
                # not taken: a block is requested only while it has room for one
                depth = 1 << self.fmt.fields["HEADER"]["LEN"][1]
                held = len(self.block_first) * self.fifo - self.fetched_words
                left = max(0, min(left, (depth - held) // self.fifo))
                # the next block's AR: SEQ_FETCH_NEXT after the one before, and once the FIFO
                # had room for it (SEQ_FETCH_ROOM after the sequencer took the word that made it)
                nb = self._block_req() if left else None
                if nb is None:
                    left, nb = 0, self.next_block
                o = min(t, nb - 2) if left else t
                wa, per_word, need = stream[:3]
                setup = stream[3] if len(stream) > 3 else K["SEQ_ACT_SETUP_WINDOWS"]
                dw_res = stream[4] if len(stream) > 4 else None
                res = None
                if dw_res is not None:      # a DWCONV whose writes may hold the core back
                    # (its result words' stall-free times: the last one 3 before its end); the
                    # write queue is then modelled inside the stream simulation (the Executor
                    # gives no `store` plan: one model of it a RUN, docs/rtl.md "The store
                    # unit's write queue in the Timeline")
                    res = dict(t=dw_res[0] + cycles - 3 + t - o, wa=dw_res[1],
                               end0=cycles + t - o, tail=K["SEQ_STORE_TAIL"] + act_req[3])
                # with scattered writes (`store`), the store unit's holds (the core's global
                # stall) delay the core's need for words too: iterate, the holds before each
                # word added to its need, until they repeat (STORE_ITERATIONS rounds at most)
                held_at = None
                for _ in range(self.STORE_ITERATIONS if store is not None else 1):
                    takes: list = []
                    need_h = (need if held_at is None else need + held_at) - (o - t)
                    shift, f0, f1, _, blks, nxt = load_unit.stream_sim(
                        wa, per_word, need_h, setup - 2 + t - o,
                        self.rd_free - o, self.fmt.mem,
                        (nb - o, left, self.fifo, K["SEQ_FETCH_NEXT"], self._block_addr()),
                        takes, res)
                    # the core's stall after each word it took (the schedule's)
                    stalls = (np.asarray(takes, np.int64) - np.asarray(need_h, np.int64)
                              [:len(takes)]).tolist()
                    if store is None:
                        break
                    holds = self._store_holds(t, cycles, store, (need, stalls), need)
                    if (held_at is None and not holds.any()) or \
                            (held_at is not None and np.array_equal(holds, held_at)):
                        break
                    held_at = holds
                if res is not None and res.get("w_end") is not None:
                    dw_w_end = res["w_end"] + o
                res_gaps = stalled_gaps(res_gaps, need, stalls, cycles)
                sched = (need, stalls)
                for b0, b1 in blks:
                    self.block_first.append(o + b0)
                    self.block_end = o + b1
                    self.rd_beats += self.fifo
                    self.rd_free = max(self.rd_free, o + b1)
                if blks:
                    self.next_block = o + nxt if nxt is not None else self.next_block
                first = o + f0 if f0 is not None else None
                if f1 is not None:
                    self.rd_free = max(self.rd_free, o + f1)
                self.rd_beats += rd
            elif act_beats:
                first, _ = self.mem_read(t + req, rd)
                core_first = first + (K["SEQ_ACT_FIRST"] if run else 0)
                shift = max(0, core_first - (t + self.fmt.cfg.CFG_CYCLES))
            if store_reads:
                self.mem_read(t, store_reads)
            end = t + shift + cycles
            if store is not None and run:
                # scattered writes that may not keep up: the store unit and the write master
                # cycle by cycle, holding the core when its queue is full
                end, w_sim = self._run_store_sim(t, shift, cycles, store, sched)
                wr = self._store_beats
        self.core_free = self.last_run_end = end
        self.seq_free = max(self.seq_free, end + (K["SEQ_RUN_DONE"] if run or post else 0))
        self.run_ends.append(end)
        self.compute += cycles
        self.wr_beats += wr
        if acc is not None:
            aw = self._acc_w
            w_end = (aw if aw is not None else end + self._acc_tail(acc.last_item)) + self.WL
        elif post is not None:
            pw = getattr(self, "_post_w", None)
            if pw is not None and wr:
                w_end = max(end, pw) + self.WL
            else:
                w_end = end + self.WL + (self.store_tail(post[8], res_gaps) + post[6] if wr else 0)
        elif store is not None and run and wr:
            w_end = w_sim
        elif wr:
            self.wr_bursts = []     # not simulated: the slots of its bursts are not counted
            w_end = end + self.WL + (self.store_tail(wr, res_gaps, part) if run else 0)
            if dw_w_end is not None:    # the write runs as stream_sim's store model has them
                w_end = dw_w_end
        else:
            w_end = end + self.WL + (self.store_tail(wr, res_gaps, part) if run and wr else 0)
        self.wr_done = max(self.wr_done, w_end)
        if res_beats:
            self.written.append((*dst, w_end))
        if run:
            if len(self.inflight_writes) < self.K["SEQ_RUN_RANGES"]:
                self.inflight_writes.append(dst)
            else:
                self.inflight_overflow = True
        if self.events is not None:
            self.events.append(("run", t, first, end, w_end))

    def _block_due(self, t_end: int) -> bool:
        """A block of the list is still to be read and the fetcher requests it before t_end
        (it then goes on the read master between an activation stream's runs)."""
        if not self.block_first or len(self.block_first) >= self._blocks():
            return False
        nb = self._block_req()
        return nb is not None and nb < t_end

    def _bursts(self, t_dec: int, addr: int, beats: int) -> list[tuple[int, int]]:
        """One read request taken by the read master at t_dec, counted burst by burst as
        dtpu_axi_rd issues it (MEM_BURST_BEATS beats, none across 4 KiB, an AR every other
        cycle, at most MEM_READ_OUTSTANDING bursts in flight: a burst's AR 2 cycles after the
        last beat of the one that many before); [(first beat, beats)] per burst. The master
        takes the next request when this one's last AR has gone (`latch_free`)."""
        m = self.fmt.mem
        burst, out_n = int(m["MEM_BURST_BEATS"]), int(m["MEM_READ_OUTSTANDING"])
        out = []
        a, left, ar = addr, beats, t_dec
        while left:
            n = min(left, burst, (4096 - a % 4096) // 8)
            ar = max(t_dec, self.ar_free)
            if len(self.r_last) >= out_n:
                ar = max(ar, self.r_last[-out_n] + 2)
            first = max(ar + self.RL, self.rd_free)
            self.rd_free = first + n
            self.r_last.append(first + n - 1)
            self.ar_free = ar + 2
            self.rd_beats += n
            out.append((first, n))
            a += 8 * n
            left -= n
        self.latch_free = ar
        return out

    def _read_sched(self, reqs: list, credit: dict | None = None,
                    hold1: bool = False) -> list[list[tuple[int, int]]]:
        """The read requests of a RUN's units, `reqs` = [(priority, request cycle, address,
        beats)] (priority 1: the load / post unit, 2: the store unit's read-back; each unit's
        in its order), as the read path serves them: the read master holds one request at a
        time (:meth:`_bursts`); when it is free the next one is chosen among those made by
        then, the fetcher's block first (dtpu_cl_rd_arb port A), then the load / post unit,
        then the store unit (the second arbiter). `credit` {priority: the cycles the unit took
        its words from its credit buffer (dtpu_cl_rd_buf, SEQ_RD_CREDIT words)}: a request is
        made only once its words fit the buffer, and that unit's later ones move with it.
        `hold1`: a load unit request's wait for its credit buffer does not move the unit's
        later requests (its run builder goes on while its request FIFO has room,
        :meth:`_acc_elems`); its wait for the request FIFO does. Returns the bursts of each
        request."""
        out: list = [None] * len(reqs)
        reqs = [list(r) for r in reqs]
        queues = {1: [k for k, r in enumerate(reqs) if r[0] == 1],
                  2: [k for k, r in enumerate(reqs) if r[0] == 2]}
        # the load unit's runs wait in its request FIFO (dtpu_cl_load RQ_LOG2: SEQ_ACT_RQ - 1
        # entries; SEQ_ACT_RQ counts the open run too): while it is full, the element that
        # closes the open run waits, which stops the walk. The FIFO has room the cycle after
        # the master took the run SEQ_ACT_RQ - 1 before (its full flag is registered), the
        # run is pushed then and its request counts RUN_PUSH_REQ after its push (as in
        # :meth:`_acc_elems`); the later runs move with it. (Before branch ksplit3 this was
        # "the master took the one SEQ_ACT_RQ before, + 1": a run and 3 cycles early, hidden
        # while the master's outstanding bursts held the requests anyway; a stream's last
        # run then went before a read-back request the RTL serves first, docs/rtl.md
        # "K-split 3x3".)
        rq = self.K["SEQ_ACT_RQ"] - 1
        cap = self.K["SEQ_RD_CREDIT"]
        taken1: list[int] = []
        shift = {1: 0, 2: 0}
        words = {1: 0, 2: 0}            # words requested so far per unit
        credit = credit or {}
        for p_ in (1, 2):
            for k in queues[p_]:
                reqs[k].append(0)       # this request's shift, added once
        while queues[1] or queues[2]:
            for p_ in (1, 2):
                if not queues[p_]:
                    continue
                k1 = queues[p_][0]
                base = reqs[k1][1] - reqs[k1][4]
                # a wait moves the unit's later requests with it (its walk stopped); with
                # `hold1` only the request FIFO's (the run builder stops while it is full), not
                # the credit buffer's (the FIFO's head waits, the builder goes on)
                want = base + shift[p_]
                if p_ == 1 and len(taken1) >= rq:
                    want = max(want, taken1[-rq] + 1 + self.RUN_PUSH_REQ)
                if hold1 and p_ == 1:
                    shift[p_] = want - base
                cons = credit.get(p_)
                need = words[p_] + reqs[k1][3] - cap
                if cons and need > 0:
                    want = max(want, cons[min(need, len(cons)) - 1] + 1)
                if not (hold1 and p_ == 1):
                    shift[p_] = want - base
                reqs[k1][1], reqs[k1][4] = want, want - base
            # request times are AR times when nothing waits; the master takes a request
            # SEQ_RD_ISSUE before its AR can go (dtpu_axi_burst, the AR register): `d` is when
            # it takes the next one, among the requests made by then
            iss = self.K["SEQ_RD_ISSUE"]
            heads = [q[0] for q in queues.values() if q]
            d = max(self.latch_free, min(reqs[k][1] for k in heads) - iss)
            nb = self._block_req() if self.block_first and \
                len(self.block_first) < self._blocks() else None
            if nb is not None and nb - iss <= d:
                self._issue_block(nb)
                continue
            k = next((q[0] for p_ in (1, 2) for q in (queues[p_],)
                      if q and reqs[q[0]][1] - iss <= d), None)
            if k is None:
                k = min(heads, key=lambda k_: (reqs[k_][1], reqs[k_][0]))
            queues[reqs[k][0]].remove(k)
            if reqs[k][0] == 1:
                taken1.append(d)
            words[reqs[k][0]] += reqs[k][3]
            out[k] = self._bursts(max(d, reqs[k][1]), reqs[k][2], reqs[k][3])
        return out

    def _post_run(self, t: int, post: tuple) -> tuple[int | None, int, tuple | None]:
        """A POST from its start `t` (dtpu_cl_post): (the first sum's beat, the end, the result
        words' gaps for :meth:`store_tail`). `post` = (SRC, PIX, CH0, CH, DSTC, result lanes
        a word, 1 if the last result word is a partial one the packer closes later). The unit
        requests each pixel's CH sums SEQ_POST_READ after the start (one request a pixel, the
        read master's AR every other cycle, :meth:`_read_sched`), takes a sum a cycle as they
        come, and the sequencer takes the next header SEQ_POST_DONE after the last one; the
        requantized lanes leave as result words of `lanes` lanes (a pixel's last word partial),
        which the store unit writes as a RUN's."""
        src, pix, ch0, ch, dstc, lanes = post[:6]
        arrive: list[int] = []
        reqs = [(1, t + self.K["SEQ_POST_READ"], src + (p * dstc + ch0) * 8, ch)
                for p in range(pix)]
        for bl in self._read_sched(reqs):
            for f0, b in bl:
                arrive.extend(range(f0, f0 + b))
        if not arrive:
            return None, t + self.K["SEQ_POST_DONE"], None
        c = arrive[0]
        done_at = []            # the cycle each result word is complete (its last sum taken)
        for i, a in enumerate(arrive):
            c = max(c + 1, a) if i else a
            j = i % ch
            if j % lanes == lanes - 1 or j == ch - 1:
                done_at.append(c)
        gaps = tuple(done_at[-1] - x for x in reversed(done_at))
        self._post_w = self._post_writes(post, done_at)
        return arrive[0], c + self.K["SEQ_POST_DONE"], gaps

    def _post_writes(self, post: tuple, done_at: list[int]) -> int | None:
        """The cycle after a POST's last write beat: its result words (the k-th complete at
        done_at[k]) go to DDR through the store unit's write queue (:func:`write_runs`'s
        runs); a run is requested SEQ_POST_AW after the word that closes it (the first word
        of the next run) came, the last one a cycle later than its own last word would; the
        bursts' beats follow each other on the write channel, each after its request."""
        if len(post) < 11:
            return None
        _, pix, _, ch, dstc, lanes = post[:6]
        dst, es, ch0 = post[9], post[10], post[2]
        words = []                      # (DDR word, cycle) per DDR word a result word touches
        k = 0
        wpp = -(-ch // lanes)
        for p in range(pix):
            a0 = dst + (p * dstc + ch0) * es
            for j in range(wpp):
                if k >= len(done_at):
                    break
                n = min(lanes, ch - j * lanes) * es
                a = a0 + j * lanes * es
                for w in range(a // 8, (a + n - 1) // 8 + 1):
                    words.append((w, done_at[k]))
                k += 1
        if not words:
            return None
        max_run, max_gap = int(self.fmt.mem["MEM_BURST_BEATS"]), self.K["SEQ_STORE_GAP"]
        aw = self.K["SEQ_POST_AW"]
        reqs = []                       # (request cycle, beats)
        s0 = e0 = None
        last_w = None
        q = None                        # the queue's cycle for the last word (fill words too)
        for w, t_w in words:
            if w == last_w:
                continue
            last_w = w
            if e0 is not None and e0 < w <= e0 + max_gap + 1 and w - s0 + 1 <= max_run:
                # the fill words go in one a cycle when the word after them came
                q = max(q + 1, t_w) + (w - e0 - 1)
                e0 = w
            else:
                q = t_w
                if e0 is not None:
                    reqs.append((t_w + aw, e0 - s0 + 1))
                s0 = e0 = w
            if e0 - s0 + 1 == max_run:      # a full run is requested at once
                reqs.append((q + aw, max_run))
                s0 = e0 = None
        if e0 is not None:
            reqs.append((q + aw + 1, e0 - s0 + 1))
        # at most MEM_READ_OUTSTANDING (the write master's too) bursts unanswered: a burst's
        # request waits for the response of the one that many before (SEQ_WR_SLOT after it)
        out_n = int(self.fmt.mem["MEM_READ_OUTSTANDING"])
        w_free = 0
        b_at: list[int] = []
        for t_r, n in reqs:
            if len(b_at) >= out_n:
                t_r = max(t_r, b_at[-out_n] + self.K["SEQ_WR_SLOT"])
            w_free = max(w_free, t_r + 1) + n
            b_at.append(w_free - 1 + self.WL)
        return w_free

    def _acc_run(self, t: int, acc: "AccRun", req: int, rd: int, store_reads: int,
                 cycles: int, stream: tuple | None = None) -> tuple[int | None, int]:
        """An ACC RUN from its start `t`: (the stream's first beat, the core's DONE).

        The store unit's read-back requests (one per item or run of consecutive items) leave
        SEQ_ACC_READ after the start, one walk step a result word, before the load unit's
        (whose runs are requested as collected, :func:`~dtpu.hw.step_timing.act_req` for the first, each
        next one its elements later); both are counted burst by burst (:meth:`_read_sched`).
        The job's stall-free schedule then moves by the global stall: the core takes its k-th
        activation word SEQ_ACT_FIRST after its beat at the earliest (GEMM steps of KW words
        every period), and a result word waits for the store unit to be free, which adds its
        kept lanes one a cycle, each once its sum (read back) is in."""
        K = self.K
        self._acc_w = None      # the last W beat + 1 when the write queue is modelled
        reqs = [(2, t + K["SEQ_ACC_READ"] + off, a, n) for off, a, n in acc.reads]
        n_st = len(reqs)
        elems = None
        if stream is not None:
            # a WINDOWS stream with PAD words, windows read again or lanes (a K split of a 3x3;
            # all PAD too: its words still come from the run builder): its runs as the load
            # unit's run builder makes them, element by element, on the master with the sums'
            # reads (docs/rtl.md "K-split 3x3")
            elems = self._acc_elems(t, stream)
            if elems[2] != rd:              # not the unit's beats: the stream as one request
                elems = None
            else:
                reqs += elems[1]
                acc = AccRun(acc.kept, acc.res_t, acc.reads, acc.last_item,
                              ("elems", stream, elems), acc.wsegs)
        if elems is None and acc.act is not None and acc.act[0] == "elems":
            acc = AccRun(acc.kept, acc.res_t, acc.reads, acc.last_item, None, acc.wsegs)
        if elems is None and acc.act is not None and rd:
            wa, kw, period = acc.act
            burst = int(self.fmt.mem["MEM_BURST_BEATS"])
            runs: list[list[int]] = []
            for x in wa:
                if runs and x == runs[-1][-1]:
                    continue    # on the word of the beat before: shares its beat
                if runs and x == runs[-1][-1] + 1 and len(runs[-1]) < burst:
                    runs[-1].append(x)
                else:
                    runs.append([x])
            if sum(len(r_) for r_ in runs) != rd:   # not the unit's beats: the stream as one
                acc = AccRun(acc.kept, acc.res_t, acc.reads, acc.last_item, None)
            else:
                e = 0
                for r_ in runs:     # each run requested once collected, one element a cycle
                    e += len(r_)
                    reqs.append((1, t + req + e - len(runs[0]), 8 * r_[0], len(r_)))
        # the units' credit buffers: the requests depend on when the units take their words,
        # which depends on the requests; iterate from none taken to a fixed point
        saved = self._rd_state()
        credit: dict = {}
        prev = None
        for i in range(self.ACC_ITERATIONS):
            bursts = self._read_sched(reqs, credit, hold1=elems is not None)
            first, end, cons = self._acc_core(t, acc, bursts, n_st, req, rd, store_reads, cycles)
            if acc_unit.ACC_TRACE is not None:
                acc_unit.ACC_TRACE.append((t, i, reqs, bursts, first, end, cons))
            if bursts == prev or i == self.ACC_ITERATIONS - 1:   # settled (or given up)
                break
            prev, credit = bursts, cons
            self._rd_state(saved)
        return first, end

    #: cycles from the load unit's push of a run into its request FIFO to the run's request
    #: as :meth:`_read_sched` counts it (its AR when nothing waits: the master takes it, its
    #: burst, its AR; :meth:`_acc_elems`)
    RUN_PUSH_REQ = 3

    #: rounds of :meth:`_acc_run`'s fixed point (the lists tested settle in 2..5)
    ACC_ITERATIONS = 12

    def _acc_elems(self, t: int, stream: tuple) -> tuple:
        """The load unit's run builder (dtpu_cl_load, as :func:`stream_sim` has it) over an
        ACC RUN's stream (`stream` = :func:`~dtpu.hw.step_timing.act_stream`'s (element word addresses, -1
        for PAD; elements a word; the core's need times)) from a RUN started at `t`: element e
        taken at SEQ_ACT_SETUP_WINDOWS - 2 + e after the start (one a cycle); a non-PAD element
        on the word of the last beat shares that beat, one on the next word extends the open
        run (up to MEM_BURST_BEATS words), any other opens a run and pushes the open one; PAD
        takes its cycle and closes nothing; the last run is pushed the cycle after the last
        element (the element FIFO is not modelled: ACT_ELEM_FIFO elements ahead of the packer
        were not reached where this is exact; the request FIFO's waits are
        :meth:`_read_sched`'s). A run's request is its
        AR time when nothing waits: 3 cycles after its push (the master takes it, its burst, its
        AR). Returns (the cycle each element is taken, the requests (1, cycle, byte address,
        beats) for :meth:`_read_sched`, the beats, per element the index of its beat (-1: PAD),
        per element 1 if it takes a new beat)."""
        wa, per_word, need = stream
        wa = wa.tolist() if hasattr(wa, "tolist") else list(wa)
        burst = int(self.fmt.mem["MEM_BURST_BEATS"])
        x = t + self.K["SEQ_ACT_SETUP_WINDOWS"] - 3
        xs: list[int] = []
        reqs: list = []
        beat_of: list[int] = []
        newb = bytearray(len(wa))
        nb = 0
        prev_ok, prev_wa, run_open, run_wa, run_len = False, 0, False, 0, 0
        for e, a in enumerate(wa):
            x += 1
            xs.append(x)
            if a < 0:
                beat_of.append(-1)
                continue
            if prev_ok and a == prev_wa:
                beat_of.append(nb - 1)
                continue
            newb[e] = 1
            beat_of.append(nb)
            nb += 1
            if prev_ok and run_open and a == prev_wa + 1:
                run_len += 1
                if run_len == burst:
                    reqs.append((1, x + self.RUN_PUSH_REQ, 8 * run_wa, run_len))
                    run_open = False
            else:
                if run_open:
                    reqs.append((1, x + self.RUN_PUSH_REQ, 8 * run_wa, run_len))
                run_wa, run_len, run_open = a, 1, True
            prev_ok, prev_wa = True, a
        if run_open:
            reqs.append((1, x + 1 + self.RUN_PUSH_REQ, 8 * run_wa, run_len))
        return xs, reqs, nb, beat_of, newb

    def _rd_state(self, st: dict | None = None) -> dict:
        """The read channel's state (saved, or restored from `st`)."""
        names = ("rd_free", "ar_free", "latch_free", "rd_beats", "block_end", "next_block")
        if st is None:
            return {**{n: getattr(self, n) for n in names}, "r_last": list(self.r_last),
                    "block_first": list(self.block_first)}
        for n in names:
            setattr(self, n, st[n])
        self.r_last, self.block_first = list(st["r_last"]), list(st["block_first"])
        return st

    def _acc_core(self, t: int, acc: "AccRun", bursts: list, n_st: int, req: int, rd: int,
                  store_reads: int, cycles: int) -> tuple:
        """:meth:`_acc_run`'s job once its reads are scheduled: (first beat, DONE, {unit: the
        cycles it took each word from its credit buffer})."""
        K = self.K
        cfg = self.fmt.cfg
        first = None
        act_t: list[int] = []
        kw = period = 1
        arrive: list[int] = []           # the read-back sums' beats, in order
        for bl in bursts[:n_st]:
            for f0, b in bl:
                arrive.extend(range(f0, f0 + b))
        if store_reads and not acc.reads:
            f0, e0 = self.mem_read(t + K["SEQ_ACC_READ"], store_reads)
            arrive.extend(range(f0, e0))
        if acc.act is not None and acc.act[0] == "elems":
            return self._acc_core_elems(t, acc, bursts, n_st, arrive, cycles)
        if acc.act is not None and rd:
            _, kw, period = acc.act
            for bl in bursts[n_st:]:
                for f0, b in bl:
                    act_t.extend(range(f0, f0 + b))
            first = act_t[0] if act_t else None
        elif rd:
            first, _ = self.mem_read(t + req, rd)
            act_t = [first]
        # the global stall over the stall-free schedule: inputs and results in time order, a
        # result word due in the same cycle as an input word first (as in _acc_core_elems: the
        # result register the store unit has not emptied holds the whole core; with NT > 1 a
        # pixel's results meet the next pixel's words, docs/rtl.md "MobileNet v2 224")
        ev = []
        for k, b in enumerate(act_t):
            ev.append((cfg.CFG_CYCLES + (k // kw) * period + k % kw, 1, k, b))
        n_res = len(acc.kept)
        res_t = acc.res_t if acc.res_t is not None else tuple(range(n_res + 1, 1, -1))
        for k in range(n_res):
            ev.append((cycles - res_t[k], 0, k, 0))
        ev.sort()
        stall, free, lane = 0, t, 0
        took: dict = {1: [], 2: []}
        # the store unit's rate holds the core only where the stream is counted word by word:
        # a stream the model takes as one request (PAD words, windows read again) starves the
        # core in ways it does not count, which spreads the results (the RTL then hides most of
        # the store's rate: a 3x3 K split, docs/rtl.md "ACC RUNs and POST")
        per_word = acc.act is not None
        for s_, kind, k, b in ev:
            at = t + s_ + stall
            if kind == 1:
                need = b + K["SEQ_ACT_FIRST"]
                if need > at:
                    stall += need - at
                    at = need
                took[1].append(at - K["SEQ_ACT_TAKE"])
            else:
                if free > at and per_word:
                    stall += free - at
                    at = free
                c = at
                for _ in range(max(1, acc.kept[k])):
                    if arrive and acc.kept[k]:
                        c = max(c, arrive[min(lane, len(arrive) - 1)] + K["SEQ_ACC_SUM"])
                        took[2].append(c)
                        lane += 1
                    c += 1
                free = c
        if acc.act is None:
            took[1] = []
        return first, t + cycles + stall, took

    def _acc_core_elems(self, t: int, acc: "AccRun", bursts: list, n_st: int, arrive: list,
                        cycles: int) -> tuple:
        """:meth:`_acc_core` for a stream counted element by element (:meth:`_acc_elems`): the
        packer (dtpu_cl_load) takes one element a cycle once the run builder took it, a new
        beat's SEQ_ACT_FIRST - 1 after it came, a word-completing one only when the output
        register is free (the core took the word before); the core takes a word the cycle
        after it was completed, at its stall-free need time shifted by the stall so far; the
        result words and the store unit's rate as :meth:`_acc_core`, the store unit's writes as
        :class:`AccWrites`; a result word due in the same stall-free cycle as an input word
        goes first. The credit buffer has a beat's word back the cycle after the packer took
        it; a PAD element reaches the packer 2 cycles after the run builder took it."""
        K = self.K
        _, stream, (xs, _, _, beat_of, newb) = acc.act
        _, per_word, need = stream
        beat_t: list[int] = []
        for bl in bursts[n_st:]:
            for f0, b in bl:
                beat_t.extend(range(f0, f0 + b))
        first = beat_t[0] if beat_t else None
        to_pk = K["SEQ_ACT_FIRST"] - 1
        n_el = len(beat_of)
        # a result word due in the same stall-free cycle as an input word goes first: the result
        # register the store unit has not emptied holds the whole core (dtpu_control's `adv`)
        ev = [(int(s_), 1, k) for k, s_ in enumerate(need)]
        n_res = len(acc.kept)
        res_t = acc.res_t if acc.res_t is not None else tuple(range(n_res + 1, 1, -1))
        for k in range(n_res):
            ev.append((cycles - res_t[k], 0, k))
        ev.sort()
        stall, free, lane = 0, t, 0
        took: dict = {1: [], 2: []}
        pop, take, e = -(1 << 60), -(1 << 60), 0
        wq = AccWrites(self, acc.wsegs) if acc.wsegs is not None else None
        for s_, kind, k in ev:
            at = t + s_ + stall
            if kind == 1:
                last = min(n_el, e + per_word) - 1
                while e <= last:
                    c = max(pop + 1, xs[e] + 2)
                    if newb[e]:
                        c = max(c, beat_t[beat_of[e]] + to_pk)
                    if e == last:
                        c = max(c, take)
                    if newb[e]:
                        took[1].append(c + 1)
                    pop = c
                    e += 1
                if pop + 1 > at:
                    stall += pop + 1 - at
                    at = pop + 1
                take = at
            else:
                if free > at:
                    stall += free - at
                    at = free
                c = at
                for _ in range(max(1, acc.kept[k])):
                    if arrive and acc.kept[k]:
                        c = max(c, arrive[min(lane, len(arrive) - 1)] + K["SEQ_ACC_SUM"])
                        took[2].append(c)
                        lane += 1
                    if wq is not None and acc.kept[k]:
                        c = wq.add(c)
                    c += 1
                free = c
        end = t + cycles + stall
        self._acc_w = wq.finish(end) if wq is not None else None
        return first, end, took

    def _acc_tail(self, last_item: int) -> int:
        """Cycles from an ACC RUN's end (the core's DONE, the store unit has taken the last
        result word) to its last write beat + 1: the last item's lanes added one a cycle and
        written as one burst of its sums (SEQ_ACC_TAIL + its beats)."""
        return self.K["SEQ_ACC_TAIL"] + last_item

    def store_tail(self, words: int, gaps: tuple | None = None, late: int = 0) -> int:
        """Cycles from a RUN's end (the core's DONE) to its last write beat + 1, for `words`
        result words to consecutive addresses (dtpu_cl_store_wq: runs of up to
        MEM_BURST_BEATS words, each requested once its last word is queued, the last partial
        one once the RUN's end closes it; the burst's beats follow its request): SEQ_STORE_TAIL
        + the last burst's beats (+1 when the RUN's end closes it). When a full burst comes
        before a partial last one of `part` words, the partial one's beats follow the full
        one's, which was requested SEQ_STORE_TAIL + 2 cycles after its last word came from the
        core; `gaps[k]`: how many cycles before the job's last result word (2 before DONE)
        the k-th word before it came (:func:`result_gaps`; None: one word a cycle; for a
        RUN's packed items, the word completing the k-th beat from the end,
        :func:`~dtpu.hw.step_timing.res_beats`). `late`: 1 when the last word is a partial one the packer
        closes a cycle later (a cycle more, unless the last burst waits for the full one's
        beats anyway: dtpu_cl_store_pack's flush). A last full burst is requested as its last
        beat's word is queued: when result words with no kept lane end the stream (a column
        tile's words past CH1, dropped by the store unit's walk), gaps[0] cycles before the
        last result word (docs/rtl.md "float32 and the one-cycle corners")."""
        if not words:
            return 0
        K = self.K["SEQ_STORE_TAIL"]
        burst = int(self.fmt.mem["MEM_BURST_BEATS"])
        part = words % burst
        if not part:
            g0 = gaps[0] if gaps is not None and len(gaps) and not late else 0
            return K + burst + late - g0
        if words < burst:
            return K + 1 + part + late
        gap = gaps[part] if gaps is not None and part < len(gaps) else part
        return part + max(K + 1 + late, K + burst - gap)

    #: rounds of the stream / store iteration of a RUN that has both simulations
    STORE_ITERATIONS = 8

    def _store_holds(self, t: int, cycles: int, store: tuple, sched: tuple, need) -> np.ndarray:
        """The store unit's holds of the core (:func:`store_sim`, no state changed) before
        each of `need`'s stall-free cycles: the cumulative hold of the last result word due
        before it."""
        s_r, offer = self._store_offers(t, 0, cycles, store, sched)
        chunks = list(zip(store[0].tolist(), store[1].tolist()))
        prior = tuple(b for b in self.wr_bursts if b > offer[0])
        _, hs, _, _, _ = store_unit.store_sim(chunks, offer, self.fmt.mem,
                                 int(self.fmt.mem["STORE_WQ_WORDS"]), prior)
        cum = np.asarray(hs, np.int64) - np.asarray(offer, np.int64)
        j = np.searchsorted(np.asarray(s_r, np.int64), np.asarray(need, np.int64),
                            side="left") - 1
        return np.where(j >= 0, cum[np.maximum(j, 0)], 0)

    def _store_offers(self, t: int, shift: int, cycles: int, store: tuple,
                      sched: tuple | None) -> tuple[list, list]:
        """(stall-free cycle, offer cycle) of each result word: see :meth:`_run_store_sim`."""
        s_r = cycles - 3 - np.asarray(store[2], np.int64)[::-1]
        if sched is None or not len(sched[1]) or len(sched[1]) != len(sched[0]):
            return s_r.tolist(), (t + shift + s_r).tolist()
        st = np.asarray(sched[1], np.int64)
        j = np.searchsorted(np.asarray(sched[0], np.int64), s_r + 1, side="left") - 1
        offer = t + s_r + np.where(j >= 0, st[np.maximum(j, 0)], 0)
        return s_r.tolist(), offer.tolist()

    def _run_store_sim(self, t: int, shift: int, cycles: int, store: tuple,
                       sched: tuple | None = None) -> tuple[int, int]:
        """A RUN's end and its last write response + 1 (its write beats in `_store_beats`:
        WR_BEATS counts gap words, not dropped words) from :func:`store_sim`: the job's
        stall-free schedule from t (its result word r offered a cycle before its schedule's
        cycle, as the activation side counts), shifted by the stall waiting for activation
        words (`shift`; with `sched`, (need times, stall after each word) of a simulated
        stream: a word due at stall-free cycle s by the stall after the last activation word
        needed before s), held while the store unit's queue is full."""
        chunks = list(zip(store[0].tolist(), store[1].tolist()))
        _, offer = self._store_offers(t, shift, cycles, store, sched)
        prior = tuple(b for b in self.wr_bursts if b > offer[0])
        held, _, last_b, bs, beats = store_unit.store_sim(chunks, offer, self.fmt.mem,
                                                int(self.fmt.mem["STORE_WQ_WORDS"]), prior)
        self.wr_bursts = bs
        self._store_beats = beats
        end = t + shift + cycles + held
        return end, (last_b + 1 if last_b is not None else end)

    def end(self) -> int:
        fin = max(self.taken, self.block_end) + self.K["SEQ_END"]
        out = max(fin, self.wr_done, self.loads_done, self.core_free) + \
            int(self.fmt.mem["IRQ_LATENCY"])
        if self.events is not None and (not self.events or self.events[-1][0] != "end"):
            self.events.append(("blocks", list(self.block_first)))
            self.events.append(("end", out))
        return out
