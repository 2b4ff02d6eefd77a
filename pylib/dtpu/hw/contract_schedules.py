"""The contract's schedules: how many cycles each job takes on a stall-free core, as the RTL's
FSMs count them (docs/architecture.md, "Schedules"; the constants are contract.json's).

They are the contract, not the golden model's choice: the lowering sizes depthwise jobs with
them (:class:`DwGeometry`, the CONFIG check :func:`dw_bank_conflict`), the golden model's core
and timeline run them, and the RTL is checked against them. Kept below the compiler so that
dtpu.hw.lower need not import the simulated core (tests/test_architecture.py).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from dtpu.hw.config import HwConfig, ceil_div



def load_cycles(cfg: HwConfig, words: int) -> int:
    """LOAD_WGT / LOAD_PARAM: one word per cycle into memory."""
    return cfg.CFG_CYCLES + words + cfg.LOAD_LATENCY


def prefetch_cycles(cfg: HwConfig, compute: int, pf_count: int) -> int:
    """A GEMM/DWCONV job carrying a prefetch: its words stream into weight memory at one per cycle
    from the first cycle after CONFIG while the job computes; the job ends when both are done."""
    if not pf_count:
        return compute
    return max(compute, load_cycles(cfg, pf_count))


def gemm_cycles(cfg: HwConfig, m: int, kw: int, nt: int, words_per_step: int) -> int:
    """GEMM: M*NT steps (pixel-major, tile-minor), each KW issue cycles, issued every
    max(KW, words_per_step) cycles; the last step then drains through the MXU, the column tree,
    the post unit and the result port."""
    period = max(kw, words_per_step)
    return (cfg.CFG_CYCLES + (m * nt - 1) * period + kw + cfg.LAT_MXU + cfg.LAT_REDUCE
            + cfg.LAT_POST + words_per_step)


@dataclass(frozen=True)
class DwGeometry:
    ih: int
    iw: int
    oh: int
    ow: int
    kh: int
    kw: int
    pt: int
    pl: int
    sy: int
    sx: int
    dy: int
    dx: int
    gc: int
    nchunk: int
    lb_rows: int
    tap_cycles: int

    @property
    def row_words(self) -> int:
        return self.iw * self.gc

    def row_stride(self, cols: int) -> int:
        """Words one ring slot occupies: whole bank rows, so every slot starts in bank 0."""
        return ceil_div(self.row_words, cols) * cols

    def steps_per_row(self, cols: int) -> int:
        return ceil_div(self.ow * self.gc, cols)


@dataclass
class DwTiming:
    cycles: int
    compute_start: np.ndarray  # per output row (chunk-major), first issue cycle
    load_end: np.ndarray       # per input row (chunk-major), cycle after its last word
    period: int
    step_issue: int


def dw_schedule(cfg: HwConfig, g: DwGeometry, words_per_item: int) -> DwTiming:
    """DWCONV timing: a row loader and a row computer sharing an LB_ROWS-slot ring.

    Input rows r (chunk-major) load back to back at one word per cycle, row r starting when row
    r-1 is in and its slot is free (row r-LB_ROWS released). Output row o starts when the previous
    output row has ended and its last needed input row is in; it takes steps_per_row * period
    cycles and then releases every row no later output row of its chunk needs. See
    docs/architecture.md for the RTL's view of the same rules.
    """
    cols = cfg.COLS
    step_issue = g.kh * g.kw * g.tap_cycles
    period = max(step_issue, cols * words_per_item)
    row_time = g.steps_per_row(cols) * period
    span = (g.kh - 1) * g.dy
    n_in, n_out = g.nchunk * g.ih, g.nchunk * g.oh
    oy = np.arange(g.oh)
    first = oy * g.sy - g.pt
    lo = np.clip(first, 0, g.ih - 1)
    hi = np.clip(first + span, 0, g.ih - 1)
    # last output row (within the chunk) whose window range covers each input row; -1: none
    last_user = np.full(g.ih, -1)
    for o in range(g.oh):
        last_user[lo[o]:hi[o] + 1] = o
    load_end = np.zeros(n_in, dtype=np.int64)
    released = np.zeros(n_in, dtype=np.int64)
    c_start = np.zeros(n_out, dtype=np.int64)
    c_end = np.zeros(n_out, dtype=np.int64)
    # the sequencer's setup (DW_SETUP cycles after CONFIG) before the first loaded word or issue
    loader_free = cfg.CFG_CYCLES + cfg.DW_SETUP
    prev_end = cfg.CFG_CYCLES + cfg.DW_SETUP
    nxt = 0

    def load_through(r_last: int) -> None:
        nonlocal loader_free, nxt
        while nxt <= r_last:
            r = nxt
            start = loader_free
            if r >= g.lb_rows:
                start = max(start, released[r - g.lb_rows])
            load_end[r] = start + g.row_words
            loader_free = int(load_end[r])
            c, iy = divmod(r, g.ih)
            if last_user[iy] < 0:  # never read: its slot frees as soon as it is written
                released[r] = load_end[r]
            nxt += 1

    for o in range(n_out):
        c, y = divmod(o, g.oh)
        need = c * g.ih + int(hi[y])
        load_through(need)
        start = max(prev_end, int(load_end[need]))
        c_start[o] = start
        c_end[o] = start + row_time
        prev_end = int(c_end[o])
        # rows whose last user is this output row are released at its end
        users = np.flatnonzero(last_user == y)
        if users.size:
            released[c * g.ih + users] = c_end[o]
    load_through(n_in - 1)
    items_last = g.ow * g.gc - (g.steps_per_row(cols) - 1) * cols
    last_issue = int(c_end[-1]) - period
    done = last_issue + step_issue + cfg.LAT_MXU + cfg.LAT_POST + items_last * words_per_item
    done = max(done, int(load_end[-1]))
    return DwTiming(done, c_start, load_end, period, step_issue)


def dw_pair_conflict(cols: int, ow: int, gc: int, tap_cycles: int) -> bool:
    """True if, on a PE-pair build (PE_PAIR), the two columns of a pair (j, j + COLS/2) would
    issue in one cycle: their products share one multiplier and its activation operand.

    With TAP_CYCLES >= 2 a cycle serves COLS/TAP_CYCLES <= COLS/2 consecutive columns, never
    both of a pair. With TAP_CYCLES 1 the first step of a row holds items 0 .. min(OW*GC, COLS)-1,
    the most any step holds, so a pair issues together exactly when OW*GC > COLS/2. Structural,
    like :func:`dw_bank_conflict` (padding masks ignored), and what the RTL decides in CONFIG.
    """
    return tap_cycles == 1 and ow * gc > cols // 2


def dw_bank_conflict(cols: int, ow: int, gc: int, sx: int, tap_cycles: int) -> bool:
    """True if two columns served in the same cycle of a tap read the same activation bank.

    Item q of an output row is (ox, g) = divmod(q, GC); its bank is (ox*SX*GC + g) mod COLS plus
    a tap offset common to all items. Columns are served in TAP_CYCLES groups of COLS/TAP_CYCLES
    consecutive columns. Padding masks are ignored (the check is structural, like the RTL's).
    """
    n = ow * gc
    steps = ceil_div(n, cols)
    q = np.arange(steps * cols)
    valid = (q < n).reshape(steps, tap_cycles, cols // tap_cycles)
    ox, gg = np.divmod(q, gc)
    bank = ((ox * sx * gc + gg) % cols).reshape(steps, tap_cycles, cols // tap_cycles)
    for s in range(steps):
        for t in range(tap_cycles):
            b = bank[s, t][valid[s, t]]
            if np.unique(b).size != b.size:
                return True
    return False
