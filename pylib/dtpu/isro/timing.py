"""When each instruction runs: transfers overlapping compute, as a decoupled chip would run them.

The machine executes a program in order and charges each instruction its own cycles (blocks for
compute, latency + bytes / bandwidth for an XFER). A chip whose transfers run beside its MAC
array has, like VTA's load / compute / store modules, three units: one loading (XFER into frame
or filter memory), one computing, one storing (XFER out to external memory), each in program
order, an instruction waiting only for the data it needs: the last write of every byte range it reads (read after
write) and, before it writes, the last reads and writes of that range (write after read, write
after write). This module replays a run's per-instruction costs on those units, which is
what makes the compiler's double-buffered staging (:mod:`dtpu.isro.staging`) pay off: a band's
input arrives while the previous band computes.

ADD (the reduction of split partials with the DSP stage and the store) runs on a fourth unit,
the adder beside the MAC array: it reads partials from filter memory and never uses the MAC
array, so on a chip whose adder tree and DSP stage are their own pipeline stage (an assumption,
docs/isro_isa.md §1a) a band's ADD overlaps the next band's blocks, which write the other of the
two partial-sum sets the staging alternates between.

A program longer than instruction memory (a staged one; docs/isro_isa.md §1a) streams from
external memory through it as through a ring buffer of `buffer` instructions: instruction
``i >= buffer`` is fetched by the load unit (`fetch_cycles`, a sequential burst whose latency the
prefetch hides) once instruction ``i - buffer`` has issued and left its slot, and cannot issue
before it arrives. The first `buffer` instructions are loaded before START, as a program that
fits is.

A program without XFER (everything on chip) has one unit busy and the result is the plain sum of
the cycles. Ranges are byte spans per operand (a weight bank, a parameter block and a partial-sum
set are three, so a band's partials do not seem to overlap the other set's); a strided XFER
counts as the span from its first chunk to its last (conservative: a false dependency can only
delay, never hide a real one).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from dtpu.isro.check import accesses
from dtpu.isro.isa import Instruction, Op


@dataclass(frozen=True)
class Schedule:
    cycles: int               # from START to the last instruction's end
    compute_cycles: int       # the MAC array / pooling / DSP unit busy
    transfer_cycles: int      # the load and store units busy
    hidden_cycles: int        # transfer cycles that ran while the compute unit was busy
    stall_cycles: int         # compute unit idle, waiting for data (cycles - compute_cycles)
    post_cycles: int = 0      # the adder unit busy (ADD), beside the compute unit
    ends: tuple[int, ...] = ()    # when each instruction finished (per-layer tables)

    def to_dict(self) -> dict:
        return dict(cycles=self.cycles, compute_cycles=self.compute_cycles, transfer_cycles=self.transfer_cycles,
                    hidden_cycles=self.hidden_cycles, stall_cycles=self.stall_cycles, post_cycles=self.post_cycles)


def schedule(program: list[Instruction], costs: list[int], *, frame_bytes: int, filter_bytes: int,
             external_bytes: int = 0, pe: int | None = None, buffer: int | None = None,
             fetch_cycles: int = 0) -> Schedule:
    """Replay `costs` (one per instruction, END last) on the load, compute and store units;
    `buffer`: the instruction memory's size in instructions when the program streams through it."""
    streams = buffer is not None and len(program) > buffer
    if not streams and not any(ins.op.name == "XFER" for ins in program):      # one unit busy: the plain sum
        ends = tuple(int(e) for e in np.cumsum([0 if ins.op in (Op.END, Op.NOP) else int(c)
                                                for ins, c in zip(program, costs)]))
        total = ends[-1] if ends else 0
        return Schedule(total, total, 0, 0, 0, 0, ends)
    free = {"compute": 0, "load": 0, "store": 0, "post": 0}
    writes: list[tuple[str, int, int, int]] = []      # (memory, start, end, cycle the data is there)
    reads: list[tuple[str, int, int, int]] = []       # (memory, start, end, cycle the read is done)
    busy = {"compute": [], "load": [], "store": [], "post": []}
    end_all = 0
    issued: list[int] = []                # when each instruction started (left its buffer slot)
    finished: list[int] = []
    for index, (ins, cost) in enumerate(zip(program, costs)):
        fetched = 0
        if streams and index >= buffer:
            at = max(free["load"], issued[index - buffer])
            free["load"] = fetched = at + int(fetch_cycles)
            busy["load"].append((at, fetched))
            end_all = max(end_all, fetched)
        if ins.op in (Op.END, Op.NOP):
            issued.append(max(fetched, issued[-1] if issued else 0))
            finished.append(end_all if ins.op is Op.END else issued[-1])     # END: when everything is done
            continue
        if ins.op.name == "XFER":
            unit = "store" if ins.xdst.name == "EXTERNAL" else "load"
        elif ins.op is Op.ADD:
            unit = "post"
        else:
            unit = "compute"
        spans = {(mem, rw, a, b) for mem, a, b, rw, _ in accesses(ins, frame_bytes, filter_bytes, pe, external_bytes)}
        start = max(free[unit], fetched)
        for mem, rw, a, b in spans:
            for m, s, e, t in writes:                 # RAW, and WAW for writes
                if m == mem and s < b and a < e:
                    start = max(start, t)
            if rw == "w":
                for m, s, e, t in reads:              # WAR
                    if m == mem and s < b and a < e:
                        start = max(start, t)
        issued.append(start)
        end = start + int(cost)
        finished.append(end)
        for mem, rw, a, b in spans:
            (writes if rw == "w" else reads).append((mem, a, b, end))
        free[unit] = end
        if index % 64 == 63:            # what ends before every unit is free again can delay nothing
            floor = min(free.values())
            writes = [w for w in writes if w[3] > floor]
            reads = [r for r in reads if r[3] > floor]
        busy[unit].append((start, end))
        end_all = max(end_all, end)
    compute = sum(e - s for s, e in busy["compute"])
    dma = busy["load"] + busy["store"]
    transfer = sum(e - s for s, e in dma)
    hidden = 0
    for s, e in dma:
        for cs, ce in busy["compute"]:
            if cs < e and s < ce:
                hidden += min(e, ce) - max(s, cs)
    post = sum(e - s for s, e in busy["post"])
    return Schedule(end_all, compute, transfer, hidden, end_all - compute, post, tuple(finished))
