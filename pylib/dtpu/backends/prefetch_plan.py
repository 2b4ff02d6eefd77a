"""The plan of weight memory over a backend's prepared nodes: :class:`PlanState` (the prefetch
plan in prepare order and every compute job's final registers), and what the residency
selection (:mod:`dtpu.hw.residency`) costs :class:`~dtpu.backends.model.DeviceBackend`'s
candidate lowerings with: :func:`profile`, a lowering's stall-free job cycles on the golden
model's core (a device-layer measure the compiler-layer policy takes as data).
"""
from __future__ import annotations

import logging
from dataclasses import dataclass

from dtpu.hw import fast as fastpath
from dtpu.hw import prefetch
from dtpu.hw.config import HwConfig
from dtpu.hw.core import Core
from dtpu.hw.lower import Lowered, with_prefetch
from dtpu.hw.residency import Profile

#: the plan is logged as the backend that builds it logged it (its records keep their name)
log = logging.getLogger("dtpu.backends.model")


def opcode(cfg: HwConfig, regs: dict) -> str:
    code = cfg.decode("JOB", regs["JOB"])["OPCODE"]
    return next(k for k, v in cfg.enums["OPCODE"].items() if v == code)


@dataclass
class PlanState:
    """The prefetch plan over the backend's nodes in prepare order, and every compute job's
    final register list (built once: the compiled fast path keys its jobs by identity)."""

    plan: prefetch.Plan
    pages: list[prefetch.Page]
    regs: list[tuple]

    @classmethod
    def build(cls, cfg: HwConfig, nodes: list, ring: tuple[int, int], steps) -> "PlanState":
        """The plan over `nodes` (a backend's, in prepare order; each node's `layout` is set
        here) in the weight memory's `ring`; `steps(state, node)` then fills in each node's
        per-job steps."""
        c = cfg
        decoder = Core(c)
        cycles: list[int] = []
        pages: list[prefetch.Page] = []
        regs0: list[tuple] = []
        rel: list[tuple[int | None, int]] = []   # per slot: (page, WGT_BASE - its LOAD_ADDR)
        for node in nodes:
            low = node.lowered
            layout, page, load_addr = [], None, 0
            for job in low.skeleton():   # per job of low.jobs(x): the same list, no activations
                r = dict(job.regs)
                op = opcode(c, r)
                if op == "LOAD_WGT" and node.streamed:
                    pages.append(prefetch.Page(job.send["wgt"], len(cycles), len(cycles)))
                    page, load_addr = len(pages) - 1, r["LOAD_ADDR"]
                    layout.append(("skip",))
                elif op in ("GEMM", "DWCONV"):
                    if node.streamed:
                        pages[page].last = len(cycles)
                    layout.append(("compute", len(cycles), page if node.streamed else None))
                    rel.append((page if node.streamed else None, r["WGT_BASE"] - load_addr))
                    regs0.append(job.regs)
                    cycles.append(fastpath.job_cycles(decoder, job.regs))
                else:
                    layout.append(("run",))
            node.layout = layout
        plan = prefetch.plan(c, cycles, pages, ring)
        regs = []
        for s, (r0, (page, off)) in enumerate(zip(regs0, rel)):
            rider = plan.riders.get(s)
            if rider is None and page is None:
                regs.append(r0)   # a resident node's own register list (its direct path)
                continue
            base = None if page is None else plan.addr[page] + off
            regs.append(with_prefetch(r0, base, rider.addr if rider else 0,
                                      rider.count if rider else 0))
        log.info("prefetch plan: %d compute jobs, %d pages (%d streamed, %d words), ring %s, "
                 "%d words hidden behind computation, %d exposed", len(cycles), len(pages),
                 sum(plan.streamed), sum(p.size for p, st in zip(pages, plan.streamed) if st),
                 ring, plan.hidden, plan.exposed)
        state = cls(plan, pages, regs)
        for node in nodes:
            steps(state, node)
        return state


def profile(decoder: Core, low: Lowered) -> Profile:
    c = decoder.cfg
    cycles, pages, run = [], [], 0
    for job in low.skeleton():
        r = dict(job.regs)
        op = opcode(c, r)
        if op == "LOAD_WGT" and not low.resident:
            pages.append([job.send["wgt"], len(cycles), len(cycles)])
        elif op in ("GEMM", "DWCONV"):
            if pages and not low.resident:
                pages[-1][2] = len(cycles)
            cycles.append(fastpath.job_cycles(decoder, job.regs))
        else:
            run += c.CFG_CYCLES + c.LOAD_LATENCY + int(job.send["wgt"].size)
    return Profile(cycles, [tuple(p) for p in pages], run)
