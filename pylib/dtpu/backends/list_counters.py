"""What a command-list run of a partition reports per node: its share of CL_CYCLES and IDLE
(from the golden model's per-TAG record where the target keeps one, else split by the golden
model's per-node shares, else all on the partition's last node), its words, energy and the
host's record (on the last node). :class:`~dtpu.backends.model.DeviceBackend` hands every list
run of every target here; the figures repeat from invoke to invoke, so they are derived once
per distinct run and kept with the program.
"""
from __future__ import annotations

import numpy as np

from dtpu.backends.base import HwCounters
from dtpu.driver.hostops import HostOps
from dtpu.driver.lists import ListProgram
from dtpu.hw.config import HwConfig
from dtpu.power import EnergyMeter, activity

#: the host record of a partition's nodes but the last (the host's work is the partition's)
NO_HOST_OPS = {"mmio_reads": 0, "mmio_writes": 0, "doorbells": 0, "dma_starts": 0,
               "transforms": 0, "us": 0.0}


def node_counters(program: ListProgram, index: int, run, ops: HostOps, us: float, trace,
                  cfg: HwConfig, energy: EnergyMeter, golden_program) -> list[HwCounters]:
    """Per node: its share of CL_CYCLES and IDLE where the target keeps the golden model's
    split (``list_trace``; no register holds it), else the partition on its last node; the
    host record of the partition on its last node (the others cost the host nothing).
    The fields and energies repeat from invoke to invoke: derived once per distinct run."""
    key = (index, run.cycles, run.idle_cycles, trace is None)
    memo = program.memo.get(key)
    if memo is None:
        memo = _list_memo(program, index, run, trace, cfg, energy, golden_program)
        program.memo[key] = memo
    out = []
    n = len(memo)
    for i, (fields, words_in, words_out, dyn, busy_s, note) in enumerate(memo):
        cnt = HwCounters(*fields[:4], dict(words_in), dict(words_out), *fields[4:])
        cnt.cycle_note = note
        cnt.host = (dict(mmio_reads=ops.mmio_reads, mmio_writes=ops.mmio_writes,
                         doorbells=ops.doorbells, dma_starts=ops.dma_starts, transforms=0,
                         us=us) if i == n - 1 else dict(NO_HOST_OPS))
        if busy_s:
            energy.add_energy(dyn, busy_s)
        out.append(cnt)
    return out

def _list_memo(program: ListProgram, index: int, run, trace, cfg: HwConfig,
               energy: EnergyMeter, golden_program) -> list[tuple]:
    part = program.program.partitions[index]
    n = len(part.node_macs)
    note = None
    if trace is not None:
        spans = trace.node_cycles([(index << 16) | i for i in range(n)])
    elif n > 1 and run.cycles is not None:
        # no per-node record (the board has CL_CYCLES and IDLE only): the partition's
        # figures split in proportion to each node's stall-free cycles, said so per node
        cyc_w, idle_w = node_shares(program, index, golden_program)
        spans = list(zip(split_shares(run.cycles, cyc_w), split_shares(run.idle_cycles or 0, idle_w)))
        note = ("the partition's CL_CYCLES and IDLE split by the golden model's per-node "
                "shares (the target counts them per list only)")
    else:
        spans = [(None, None)] * (n - 1) + [(run.cycles, run.idle_cycles)]
    peak = cfg.ROWS * cfg.COLS
    memo = []
    for i, ((cyc, idle), macs, prec) in enumerate(zip(spans, part.node_macs, part.node_prec)):
        # STALL (a started job waiting for words) is 0 in the golden model's timeline: a
        # RUN starts once its first beat can arrive in time; waits are IDLE, between jobs
        words_in, words_out = ({}, {}) if trace is None else trace.node_words((index << 16) | i)
        fields = (cyc, 0 if trace is not None else None, macs,
                  macs / (cyc * peak) if cyc else None,
                  None if cyc is None else cyc / cfg.CLOCK_MHZ, idle)
        cnt = HwCounters(*fields[:4], dict(words_in), dict(words_out), *fields[4:])
        dyn = activity(cnt, prec, energy.cols, energy.coeffs).energy_j(energy.coeffs)
        busy_s = (cyc or 0) / (energy.clock_mhz * 1e6)
        memo.append((fields, words_in, words_out, dyn, busy_s, note))
    return memo


def node_shares(program: ListProgram, index: int, golden_program) -> tuple[list[int], list[int]]:
    """Per node of partition `index`, the golden model's (cycles, idle cycles): one run of
    every partition on zero inputs (cycles do not depend on the data), once per program
    (`golden_program`: the backend's :meth:`~dtpu.backends.model.DeviceBackend.golden_program`)."""
    shares = program.memo.get("shares")
    if shares is None:
        golden = golden_program(program)
        shares = []
        try:
            for i, part in enumerate(golden.program.partitions):
                zeros = [np.zeros(b.shape, b.dtype) for b in part.inputs]
                golden.invoke(i, zeros, {}, golden.t, HostOps())
                spans = golden.t.list_trace().node_cycles(
                    [(i << 16) | k for k in range(len(part.node_macs))])
                shares.append(([max(1, c) for c, _ in spans], [max(1, d) for _, d in spans]))
        finally:
            golden.free()
        program.memo["shares"] = shares
    return shares[index]


def split_shares(total: int, weights: list[int]) -> list[int]:
    """`total` in integer shares proportional to `weights` that add up to it exactly (largest
    remainder)."""
    w = sum(weights)
    exact = [total * x / w for x in weights]
    out = [int(e) for e in exact]
    for i in sorted(range(len(out)), key=lambda i: out[i] - exact[i])[:total - sum(out)]:
        out[i] += 1
    return out
