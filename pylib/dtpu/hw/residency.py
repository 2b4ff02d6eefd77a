"""Which nodes keep their weights on chip (resident) and which stream theirs, and in pages of
what size: the residency policy, as a pure function of the nodes' weight words, the memory
sizes and what each candidate costs.

Residency used to be chosen inside the job path (``DeviceBackend.select_residency``), next to
the code that lowers and loads; here it depends on nothing above the compiler layer. The caller
describes each node (:class:`Candidate`: its spec and weight words, whether its parameters let
it be resident) and hands in the cost of each candidate lowering as a :class:`Profile` (the
compute cycles of its jobs, its pages, the cycles of its other jobs), through `profile_of(i,
page)`: how a profile is measured (the golden model's stall-free job cycles) is the device's
business, which this layer may not import. :func:`select` returns per node None (resident) or
its page size, and the estimate of one steady-state invoke under it.

The command-list compiler (:func:`dtpu.hw.listcompiler.compile_program`) places with
:func:`first_come` unless its caller passes a choice (resident in execution order while the
memories minus their scratch hold the node); docs/architecture.md, "Memories, residency and
streamed weights", says how the two choices differ and on which nets.
"""
from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Callable, Sequence

import numpy as np

from dtpu.hw import prefetch
from dtpu.hw.config import HwConfig, ceil_div
from dtpu.hw.placement import Region
from dtpu.spec import ConvSpec, OpKind

log = logging.getLogger(__name__)

#: ring sizes the selection tries, as fractions of the weight memory (the ring must hold a
#: few pages; a smaller ring leaves room for more resident weights)
RING_FRACTIONS = (1 / 8, 1 / 16, 3 / 64, 1 / 32, 3 / 128, 1 / 64, 1 / 128)
#: a streamed GEMM node's pages are about 1/RING_PAGES of the ring (or one tile): smaller
#: pages leave more of them in flight, larger ones take fewer jobs
RING_PAGES = (4, 3)


def aligned(cfg: HwConfig, words: int) -> int:
    """`words` rounded up to whole COLS-word rows: what a resident node takes of the memory."""
    return ceil_div(words, cfg.COLS) * cfg.COLS


def page_size(cfg: HwConfig, spec: ConvSpec, words: int, ring: int, parts: int = 4) -> int:
    """Weight words per page of a streamed node, for a ring of `ring` words: 1/`parts` of it (so
    that several pages are in flight), at least one tile of COLS filters; a depthwise node's
    taps are one page when they fit the ring (every channel-group part repeats the ring's
    start-up), else parts of 1/`parts` of it, at least COLS groups' taps."""
    if spec.kind is OpKind.DEPTHWISE_CONV_2D:
        if words <= ring:
            return ring
        kh, kw = spec.kernel
        return min(ring, max(ring // parts // cfg.COLS * cfg.COLS, kh * kw * cfg.COLS))
    tile = words // ceil_div(spec.out_channels, cfg.COLS)
    return min(ring, max(ring // parts // cfg.COLS * cfg.COLS, tile))


@dataclass
class Profile:
    """A lowering as the plan sees it: compute cycles per compute job, its pages (words, first
    and last compute job, relative), and the cycles of the other jobs run at every invoke."""

    cycles: list[int]
    pages: list[tuple[np.ndarray, int, int]]
    run_cycles: int


@dataclass(frozen=True)
class Candidate:
    """A node as the policy sees it: its spec (page sizes depend on its kind and filters), its
    weight words, and whether it may be resident at all (its parameters are)."""

    spec: ConvSpec
    words: int
    residable: bool


#: profile_of(node index, page words or None for resident) -> its Profile, None: it cannot be
#: lowered so (e.g. a depthwise node's taps exceed the page)
ProfileOf = Callable[[int, "int | None"], "Profile | None"]


def greedy(cfg: HwConfig, nodes: Sequence[Candidate], profile_of: ProfileOf, ring: int,
           parts: int = 4) -> list | None:
    """Per node: None (resident) or its page size, for a ring of `ring` words and pages of
    about 1/`parts` of it: resident in decreasing order of weight words per compute cycle while
    they fit next to the ring (nodes that cannot be streamed so come first); None when such a
    node does not fit."""
    c = cfg
    choice: list = [page_size(c, n.spec, n.words, ring, parts) for n in nodes]
    cap, used = c.WEIGHT_WORDS - ring, 0
    forced = [i for i in range(len(nodes)) if profile_of(i, choice[i]) is None]
    density = {}
    for i, n in enumerate(nodes):
        if i in forced or (aligned(c, n.words) <= cap and n.residable):
            prof = profile_of(i, None) if n.residable else None
            if prof is not None:
                density[i] = n.words / max(1, sum(prof.cycles))
    order = forced + sorted((i for i in density if i not in forced),
                            key=lambda i: (-density[i], i))
    for i in order:
        size = aligned(c, nodes[i].words)
        if i in density and used + size <= cap:
            choice[i] = None
            used += size
        elif i in forced:
            return None
    return choice


def cost(cfg: HwConfig, choice: list, profile_of: ProfileOf, ring: tuple[int, int]) -> float:
    """Cycles of one steady-state invoke of every node under `choice` with streamed pages in
    the weight memory's `ring` (start, end): the stall-free cycles of its compute jobs, the
    other jobs' cycles, prefetch words beyond what their carriers hide and the words no carrier
    takes (loaded with LOAD_WGT), as :func:`dtpu.hw.prefetch.plan` plans them."""
    c = cfg
    cycles: list[int] = []
    pages: list[prefetch.Page] = []
    extra = 0
    for i, page in enumerate(choice):
        prof = profile_of(i, page)
        extra += prof.run_cycles
        base = len(cycles)
        cycles += prof.cycles
        if page is not None:
            pages += [prefetch.Page(w, base + a, base + b) for w, a, b in prof.pages]
    if not pages:
        return float(sum(cycles) + extra)
    if max(p.size for p in pages) > ring[1] - ring[0]:
        return float("inf")
    plan = prefetch.plan(c, cycles, pages, ring)
    carried = [0] * len(pages)
    for r in plan.riders.values():
        for p, _, k in r.parts:
            carried[p] += k
    for p, (pg, st) in enumerate(zip(pages, plan.streamed)):
        if st and carried[p] < pg.size:   # loaded with LOAD_WGT before its first user
            extra += c.CFG_CYCLES + c.LOAD_LATENCY + pg.size - carried[p]
    return float(sum(cycles) + extra + plan.exposed)


def select(cfg: HwConfig, nodes: Sequence[Candidate], current: list, ring: tuple[int, int],
           profile_of: ProfileOf, fractions: Sequence[float] = RING_FRACTIONS,
           page_parts: Sequence[int] = RING_PAGES) -> tuple[list, float]:
    """(choice, its estimated cycles per steady-state invoke): per node None (resident) or its
    page size, the cheapest of `current` (with its `ring`) and, for each ring size of
    `fractions` of the weight memory and pages of 1/`page_parts` of it, the :func:`greedy`
    assignment with resident nodes packed from address 0 and the rest of the memory as the
    ring. `current` wins a tie (and is returned as the same object), so a net is never moved
    for nothing."""
    c = cfg
    best, best_cost = current, cost(c, current, profile_of, ring)
    log.debug("residency: current %.0f cycles", best_cost)
    for frac, parts in ((f, p) for f in fractions for p in page_parts):
        size = max(c.COLS, int(c.WEIGHT_WORDS * frac) // c.COLS * c.COLS)
        choice = greedy(c, nodes, profile_of, size, parts)
        if choice is None or choice == best:
            continue
        used = sum(aligned(c, n.words) for n, p in zip(nodes, choice) if p is None)
        estimate = cost(c, choice, profile_of, (used, c.WEIGHT_WORDS))
        log.debug("residency: ring %d, pages of 1/%d -> %.0f cycles (%d resident)", size,
                  parts, estimate, sum(p is None for p in choice))
        if estimate < best_cost:
            best, best_cost = choice, estimate
    return best, best_cost


def first_come(cfg: HwConfig, footprints: Sequence[tuple[int, int]], weight_words: int,
               param_entries: int, resident: Sequence[bool] | None = None) -> tuple[list, int]:
    """(per node, the weight words below which resident weights lie): per node (in execution
    order, (weight words, parameter entries) each) its (weight base, parameter base) in the
    `weight_words` x `param_entries` the scratch leaves, None when it streams. Nodes are placed
    first fit in order; with `resident` only those it marks are tried (a choice made
    elsewhere), the others stream. A node whose
    weights find room but whose parameters do not streams, and keeps the weight words it was
    given out of later nodes' reach (the compiler's placement before this module: kept so that
    the command lists it builds do not change)."""
    walloc = Region(weight_words, cfg.COLS)
    palloc = Region(param_entries, cfg.COLS)
    places: list = []
    for i, (words, entries) in enumerate(footprints):
        if resident is not None and not resident[i]:
            places.append(None)
            continue
        wb, pb = walloc.alloc(words), None
        if wb is not None:
            pb = palloc.alloc(entries)
        places.append((wb, pb) if wb is not None and pb is not None else None)
    return places, walloc.top


__all__ = ["RING_FRACTIONS", "RING_PAGES", "Candidate", "Profile", "ProfileOf", "aligned", "cost",
           "first_come", "greedy", "page_size", "select"]
