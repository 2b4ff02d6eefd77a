"""Where streamed weights go and which compute job carries them (contract 1.2 prefetch).

Weights of nodes that do not stay resident are *pages* (a paged node's LOAD_WGT words: a group
of output-channel tiles, a K chunk, a depthwise node's taps). Each page has a fixed place in the
*ring*, the weight memory left over by the resident nodes: pages are laid out in the order their
first user runs, wrapping to the ring's start when the next one does not fit before its end,
and starting over at the ring's start at every invoke, so every invoke sees the same layout.

A page that shares its place with no other page is written once and stays. The others are
re-sent at every invoke, riding as prefetch (PF_ADDR / PF_COUNT) on *earlier* compute jobs: any
job after the last user of every page that used the same words before (in the previous invoke,
cyclically, too) and before the page's first user. A job carries one contiguous address range,
so consecutive riders on one job must follow each other in the ring. Jobs are visited in time
order and serve the pages waiting for them earliest deadline first, each up to its room: what
its computation hides (compute cycles - CFG_CYCLES - LOAD_LATENCY: the job does not get
longer). What is left of a page when its window closes rides on the job right before its first
user, which then waits for it; that last-chance job carries no other page's words (the plan
is periodic, so a job can fall in the windows of two invokes' pages).

This only plans: the backend checks at run time that a page's words are really there (an
invoke in another order, a failed job) and loads what is missing with LOAD_WGT.
"""
from __future__ import annotations

import bisect
from dataclasses import dataclass, field

import numpy as np

from dtpu.hw.config import HwConfig, ceil_div


@dataclass
class Page:
    """Weight words the slots first..last (indices into the invoke's compute jobs) read."""

    words: np.ndarray
    first: int
    last: int

    @property
    def size(self) -> int:
        return int(self.words.size)


@dataclass
class Rider:
    """The prefetch a compute job carries: `words` to weight memory from `addr`."""

    addr: int
    parts: list[tuple[int, int, int]] = field(default_factory=list)   # (page, offset, count)
    words: np.ndarray | None = None

    @property
    def count(self) -> int:
        return sum(n for _, _, n in self.parts)

    @property
    def end(self) -> int:
        return self.addr + self.count


@dataclass
class Plan:
    addr: list[int]               # per page: its place in the ring
    streamed: list[bool]          # per page: re-sent at every invoke (shares its place)
    riders: dict[int, Rider]      # per slot (compute job index): what it carries
    hidden: int = 0               # prefetch words hidden behind computation per invoke
    exposed: int = 0              # prefetch words that lengthen their carrier


def hidden_room(cfg: HwConfig, cycles: int) -> int:
    """Prefetch words a job of `cycles` compute cycles carries without getting longer."""
    return max(0, cycles - cfg.CFG_CYCLES - cfg.LOAD_LATENCY)


def _overlap(a: int, n: int, b: int, m: int) -> bool:
    return a < b + m and b < a + n


def plan(cfg: HwConfig, cycles: list[int], pages: list[Page], ring: tuple[int, int]) -> Plan:
    """Lay `pages` (ordered by first user) out in `ring` = [lo, hi) and pick their carriers among
    the invoke's compute jobs, whose stall-free cycles are `cycles` (in invoke order)."""
    lo, hi = ring
    n, m = len(cycles), len(pages)
    align = cfg.COLS
    addr, pos = [], lo
    for p in pages:
        size = ceil_div(p.size, align) * align
        if size > hi - lo:
            raise ValueError(f"a page of {p.size} weight words does not fit the ring [{lo}, {hi})")
        if pos + size > hi:
            pos = lo
        addr.append(pos)
        pos += size
    riders: dict[int, Rider] = {}
    used = [0] * n
    streamed = [False] * m
    window: dict[int, tuple[int, int]] = {}
    # sizes, places and last users as arrays: at ImageNet scale (hundreds of pages, a dozen
    # candidate plans in the residency selection) the pairwise overlap test dominates otherwise
    sizes = [p.size for p in pages]
    a_addr = np.asarray(addr, np.int64)
    a_size = np.asarray(sizes, np.int64)
    a_last = np.asarray([p.last for p in pages], np.int64)
    a_index = np.arange(m)
    for p, page in enumerate(pages):
        # the page's words are free to overwrite after the last user of every page that held
        # them before: this invoke's earlier pages, and the previous invoke's later ones
        # (in cyclic order from p: pages q >= p in this cycle, q < p one invoke later)
        hit = (a_addr < addr[p] + sizes[p]) & (addr[p] < a_addr + a_size)
        if not hit.any():
            continue
        free_after = int((a_last + n * (a_index < p))[hit].max())
        streamed[p] = bool(hit[a_index != p].any())
        if streamed[p] and free_after + 1 <= n + page.first - 1:
            window[p] = (free_after + 1, n + page.first - 1)   # carriers g in [start, end]
    # earliest deadline first: every job (two invokes' worth, g -> job g mod n) serves the
    # waiting pages in the order they are needed, as far as its hidden room goes; a page's
    # last chance (the job right before its user) takes all that is left
    done = [0] * m
    hidden = exposed = 0
    # a page's last chance is the job right before its first user: one per page, and in a
    # periodic plan the same job may also fall in another page's window (the previous or next
    # invoke's instance): keep it for its own page
    reserved = {window[p][1] % n: p for p in window}
    opening = sorted(window, key=lambda p: (window[p][0], p))   # windows by their first carrier
    active: list[tuple[int, int]] = []                         # open windows as (end, page)
    nxt = 0
    for g in range(min((w[0] for w in window.values()), default=0),
                   max((w[1] for w in window.values()), default=-1) + 1):
        while nxt < len(opening) and window[opening[nxt]][0] <= g:
            bisect.insort(active, (window[opening[nxt]][1], opening[nxt]))
            nxt += 1
        if active and active[0][0] < g:
            active = [(b, p) for b, p in active if b >= g]
        j = g % n
        for _, p in list(active):   # by deadline, then page: earliest deadline first
            if done[p] >= sizes[p]:
                continue
            rest = sizes[p] - done[p]
            last = window[p][1] == g
            take = rest if last else min(rest, hidden_room(cfg, cycles[j]) - used[j])
            if take <= 0 or reserved.get(j, p) != p or not _can_extend(riders.get(j), addr[p] + done[p]):
                continue
            free = max(0, min(take, hidden_room(cfg, cycles[j]) - used[j]))
            _add(riders, j, addr[p] + done[p], p, done[p], take)
            used[j] += take
            done[p] += take
            hidden += free
            exposed += take - free
    for r in riders.values():   # one part (most riders): a view of its page's words
        parts = [pages[p].words[o:o + c] for p, o, c in r.parts]
        r.words = parts[0] if len(parts) == 1 else np.concatenate(parts)
    return Plan(addr, streamed, riders, hidden, exposed)


def _can_extend(r: Rider | None, at: int) -> bool:
    return r is None or r.end == at


def _add(riders: dict[int, Rider], j: int, at: int, page: int, off: int, n: int) -> None:
    r = riders.get(j)
    if r is None:
        r = riders[j] = Rider(at)
    r.parts.append((page, off, n))


__all__ = ["Page", "Plan", "Rider", "hidden_room", "plan"]
