"""The golden model as a transport: the register/stream protocol executed in-process.

:class:`~dtpu.hw.core.Core` runs a job as soon as its input words are there and raises
``StreamStarved`` when asked for a register while a started job still waits for input. A real
core instead answers STATUS with BUSY and keeps waiting, and the driver relies on that (it reads
STATUS right after START, and reads the registers of a hung job to explain it). This transport
gives the model that behaviour, and exposes the stream backlog the board emulation needs to
decide when a DMA channel has finished.

:func:`run_jobs_compiled` is ``run_jobs`` without the protocol: each job's registers are decoded
once (:mod:`dtpu.hw.fast`) and the job runs directly on the core, with the same result words,
counters and errors. backend=model uses it; the protocol path stays the reference.
"""
from __future__ import annotations

import numpy as np

from time import perf_counter

from dtpu.driver.hostops import (CountingTransport, HostOps, add_counts, counter_read_ops,
                                 protocol_ops)
from dtpu.driver.jobs import Counters, read_counters, counter_delta, register_state, run_job
from dtpu.driver.transport import DtpuJobError, Transport
from dtpu.hw import fast
from dtpu.hw.config import HwConfig, get_config
from dtpu.hw.core import STREAM_OUT, STREAMS_IN, Core

_U64 = np.dtype("<u8")


class ModelTransport(Transport):
    """In-process golden model; never blocks (a starved job makes `wait_done` return False)."""

    def __init__(self, core: Core | None = None, cfg: HwConfig | None = None, *,
                 lists: bool = False, mem=None, vector_unit: bool = False) -> None:
        """`lists`: the core is a contract-2.0 one (VERSION 2.0, the command-list registers
        over `mem`, default a :class:`~dtpu.hw.ddr.DdrPool` of its own), else a 1.2 core.
        `vector_unit`: that core has contract 2.1's optional vector unit (lists only)."""
        self.core = core or Core(cfg or get_config())
        self.cfg = self.core.cfg
        #: the contract-2.0 register window (command lists over DDR) of a 2.0 core, else None
        self.list_window = None
        if lists:
            from dtpu.hw.ddr import DdrPool
            from dtpu.hw.regwindow import Device
            self.list_window = Device(core=self.core, mem=mem if mem is not None else DdrPool(),
                                      vector_unit=vector_unit)
            self.vector_unit = vector_unit

    @property
    def command_lists(self) -> bool:  # type: ignore[override]
        return self.list_window is not None

    # -- the five methods ---------------------------------------------------------------------

    def write_reg(self, offset: int, value: int) -> None:
        if self.list_window is not None and offset in self.list_window.by_offset:
            self.list_window.write(offset, value)
            return
        self.core.write(offset, value)

    def read_reg(self, offset: int) -> int:
        core = self.core
        if self.list_window is not None:
            if offset == self.cfg.REG_VERSION:
                return self.cfg.VERSION2
            if offset in self.list_window.by_offset:
                return self.list_window.read(offset)
        if core.pending:
            core.try_run()  # the words may be there by now
        # a started job that still waits for input: read as the RTL would (STATUS says BUSY,
        # counters hold the finished jobs) instead of the model's StreamStarved
        return core.peek(offset) if core.pending else core.read(offset)

    def send(self, stream: str, words: np.ndarray) -> None:
        self.core.push(stream, words, last=True)

    def recv(self, stream: str, n: int) -> np.ndarray:
        packet = self.next_packet(stream)
        return packet if packet is not None else np.zeros(0, _U64)

    def wait_done(self, timeout_s: float) -> bool:
        if self.core.pending:
            self.core.try_run()
        return not self.core.pending

    # -- hooks ----------------------------------------------------------------------------------

    def list_trace(self):
        """The golden model's record of the last command list (per-node cycle split), None on
        a 1.2 core."""
        return None if self.list_window is None else self.list_window.last

    def alloc_buffer(self, nbytes: int):
        """A DDR buffer the 2.0 core reaches (``pynq.allocate`` on the board)."""
        if self.list_window is None:
            raise RuntimeError("a 1.2 core has no memory port: no DDR buffers")
        return self.list_window.ddr.alloc(nbytes)

    def pending_input(self, timeout_s: float = 0.0) -> dict[str, int]:
        return {s: n for s in STREAMS_IN if (n := self.backlog(s))}

    def describe(self) -> str:
        waiting = {s: self.backlog(s) for s in (*STREAMS_IN, STREAM_OUT)}
        return "model streams (words queued): " + ", ".join(f"{s}={n}" for s, n in waiting.items())

    # -- what the board emulation uses ------------------------------------------------------------

    @property
    def busy(self) -> bool:
        """A started job has not run yet (it waits for input words)."""
        return self.core.pending

    def backlog(self, stream: str) -> int:
        """Words waiting on an input stream, or result words not yet taken from m_axis_res."""
        if stream == STREAM_OUT:
            return self.core.result_backlog()
        if stream not in STREAMS_IN:
            raise ValueError(f"unknown stream {stream!r}; accepted: {', '.join((*STREAMS_IN, STREAM_OUT))}")
        return self.core.available(stream)

    def next_packet(self, stream: str = STREAM_OUT) -> np.ndarray | None:
        """The next job's result words (one tlast-terminated packet), or None if there is none."""
        if stream != STREAM_OUT:
            raise ValueError(f"unknown output stream {stream!r}; accepted: {STREAM_OUT}")
        return self.core.pop_packet()


def compiled(t: ModelTransport, job, cache: dict) -> fast.CompiledJob | None:
    """The compiled form of `job`, cached in `cache` by the identity of its register list (a
    lowering reuses its register tuples across invokes); None if it cannot be compiled."""
    regs = job.regs
    hit = cache.get(id(regs))
    if hit is not None and hit.regs is regs and (hit.kind == "protocol" or hit.valid(t.core)):
        return None if hit.kind == "protocol" else hit
    try:
        cj = fast.compile_job(t.core, regs)
    except fast.Unsupported:
        cj = _Protocol(regs)
    if len(cache) > 4096:
        cache.clear()
    cache[id(regs)] = cj
    return None if cj.kind == "protocol" else cj


class _Protocol:
    """Cache entry of a job that must run through the register/stream protocol."""

    kind = "protocol"

    def __init__(self, regs) -> None:
        self.regs = regs


def run_compiled(t: ModelTransport, cj: fast.CompiledJob, words: np.ndarray | None,
                 label: str, out: np.ndarray | None = None, pf: np.ndarray | None = None,
                 ops: HostOps | None = None) -> np.ndarray | None:
    """One compiled job with run_job's error handling: fatal ERR bits raise DtpuJobError with the
    register state (the core is reset afterwards), warnings are cleared. `out`, `pf` (a compute
    job's prefetch words): see :func:`dtpu.hw.fast.execute`. `ops` receives the register
    accesses, doorbell and transfers the protocol would have made for this job
    (:func:`dtpu.driver.hostops.protocol_ops`) and the time inside the model."""
    t0 = perf_counter()
    res, err = fast.execute(t.core, cj, words, out, pf)
    if ops is not None:
        ops.device_s += perf_counter() - t0
        streams = {cj.stream: 0 if words is None else np.size(words)} if cj.stream else {}
        if pf is not None and cj.pf_count:
            streams["wgt"] = cj.pf_count
        add_counts(ops, protocol_ops(t.cfg, len(cj.regs), streams, 0 if res is None else res.size))
        if err and not err & t.cfg.ERR_FATAL_MASK:
            ops.mmio_writes += 1      # the warning flags cleared below, as run_job does
    if err:
        c = t.cfg
        if err & c.ERR_FATAL_MASK:
            exc = DtpuJobError(label, t.core.regs[c.REG_ERR], c, register_state(t))
            t.reset()
            raise exc
        t.write_reg(c.REG_ERR, err)
    return res


def run_jobs_compiled(t: ModelTransport, jobs, cache: dict | None = None,
                      ops: HostOps | None = None) -> tuple[list[np.ndarray], Counters]:
    """:func:`dtpu.driver.run_jobs` for the golden model, without the register protocol.

    Same results, same counters (CYCLES, STALL, WORDS_*), same exceptions (DtpuJobError with the
    register state, the core reset afterwards) as the protocol path; jobs that cannot be compiled
    run through it. `ops` receives the host operations run_jobs would have made (the counter
    reads around the run included), see :mod:`dtpu.driver.hostops`."""
    cache = {} if cache is None else cache
    if ops is not None:
        add_counts(ops, counter_read_ops(t.cfg))
    with fast.batch():    # one node's GEMM pages share the float form of their activations
        return _run_jobs_compiled(t, jobs, cache, ops)


def _run_jobs_compiled(t: ModelTransport, jobs, cache: dict, ops: HostOps | None
                       ) -> tuple[list[np.ndarray], Counters]:
    counted = t if ops is None else CountingTransport(t, ops)
    results: list[np.ndarray] = []
    cycles = 0
    words = {"wgt": 0, "act": 0, "res": 0}
    for job in jobs:
        cj = compiled(t, job, cache)
        if cj is None:
            before = read_counters(t)   # not counted: run_jobs reads them once around the run
            res = run_job(counted, job)
            d = counter_delta(before, read_counters(t))
            cycles += d.cycles
            for k, v in (*d.words_in.items(), *d.words_out.items()):
                words[k] += v
            if res is not None:
                results.append(res)
            continue
        stream = cj.stream
        res = run_compiled(t, cj, job.send.get(stream) if stream else None, job.label,
                           pf=job.send.get("wgt") if cj.pf_count else None, ops=ops)
        cycles += cj.cycles
        if stream:
            words[stream] += cj.n_in
        words["wgt"] += cj.pf_count
        if res is not None:
            words["res"] += res.size
            results.append(res)
    return results, Counters(cycles, 0, {"wgt": words["wgt"], "act": words["act"]},
                             {"res": words["res"]})


__all__ = ["ModelTransport", "compiled", "run_compiled", "run_jobs_compiled"]
