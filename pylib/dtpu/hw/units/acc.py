"""The store unit's ACC path (RES ACC RUNs: split-K partial sums read, added and written back):
the timing inputs of one such RUN and its writes as the sums are added (dtpu_cl_store_wq,
dtpu_axi_wr), used by :class:`dtpu.hw.timeline.Timeline`.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from dtpu.hw.timeline import Timeline


#: debugging: a list to record each ACC RUN's rounds in (:meth:`Timeline._acc_run`: start,
#: round, requests, bursts, first beat, end, the units' take cycles)
ACC_TRACE: list | None = None


@dataclass(frozen=True)
class AccRun:
    """An ACC RUN's store-unit and stream timing inputs (:func:`~dtpu.hw.step_timing.acc_timing`)."""

    kept: tuple           # kept lanes per result word
    res_t: tuple | None   # per result word, stall-free cycles before the job's DONE
    reads: tuple          # the store unit's read requests: (walk cycle, address, beats)
    last_item: int        # beats of the last write burst (the last item or run of items)
    act: tuple | None     # (the stream's word addresses, KW, the GEMM's step period), or
    #                       ("elems", the stream, :meth:`Timeline._acc_elems`'s builder) for a
    #                       stream counted element by element (set by :meth:`Timeline._acc_run`)
    wsegs: tuple | None = None  # the write queue's bursts in words, in the order the sums are


class AccWrites:
    """The store unit's writes of an ACC RUN as its sums are added (dtpu_cl_store_wq,
    dtpu_axi_wr): a word enters the write queue as its lane is added and holds one of its
    STORE_WQ_WORDS + 1 places (the queue's FIFO and a register; a contract constant
    SEQ_ACC_WQ = 33 before the store models were merged) until its W beat, so an add waits
    for the place of the word that many before; a burst is requested SEQ_ACC_AW after the add of the word that closes it (the first
    word of the next burst, or its 16th word), its AW once the write master has fewer than
    MEM_READ_OUTSTANDING bursts unanswered (SEQ_WR_SLOT after the response of the one that many
    before), its W beats one a cycle after its AW and the beats before; its response
    MEM_WRITE_LATENCY after its last beat. The last burst, closed by the RUN's end, goes
    SEQ_ACC_TAIL - 1 after DONE (:meth:`Timeline._acc_tail`) or when a place frees."""

    def __init__(self, tl: "Timeline", segs: tuple) -> None:
        K = tl.K
        self.depth, self.aw_lat = int(tl.fmt.mem["STORE_WQ_WORDS"]) + 1, K["SEQ_ACC_AW"]
        self.slot, self.tail = K["SEQ_WR_SLOT"], K["SEQ_ACC_TAIL"]
        self.out_n, self.wl = int(tl.fmt.mem["MEM_READ_OUTSTANDING"]), tl.WL
        self.full = int(tl.fmt.mem["MEM_BURST_BEATS"])
        self.segs = list(segs)
        self.beat: list[int] = []       # W beat of each word whose burst is requested
        self.b_at: list[int] = []       # response of each burst
        self.w_free = 0                 # the W channel's next free cycle
        self.n = 0                      # words added
        self.seg, self.in_seg = 0, 0    # the open burst and its words so far

    def _issue(self, t_req: int) -> None:
        n = self.segs[self.seg]
        aw = t_req
        if len(self.b_at) >= self.out_n:
            aw = max(aw, self.b_at[-self.out_n] + self.slot)
        w0 = max(self.w_free, aw + 1)
        self.beat.extend(range(w0, w0 + n))
        self.w_free = w0 + n
        self.b_at.append(w0 + n - 1 + self.wl)
        self.seg += 1
        self.in_seg = 0

    def add(self, c: int) -> int:
        """The cycle the next word is added (no sooner than `c`)."""
        w = self.n
        if w >= self.depth:
            c = max(c, self.beat[w - self.depth] + 1)
        if self.seg < len(self.segs) and self.in_seg == self.segs[self.seg] \
                and self.in_seg < self.full:
            self._issue(c + self.aw_lat)         # closed by this word
        self.n += 1
        self.in_seg += 1
        if self.seg < len(self.segs) and self.in_seg == self.full and \
                self.seg < len(self.segs) - 1:
            self._issue(c + self.aw_lat)         # a full burst goes at once
        return c

    def finish(self, end: int) -> int | None:
        """The last W beat + 1 of the RUN's writes, the core's DONE at `end`."""
        while self.seg < len(self.segs):
            self._issue(end + self.tail - 1)
        return self.w_free if self.beat else None
