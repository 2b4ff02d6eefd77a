"""backend=model: every claimed node runs on the DTPU golden model through the register protocol.

The node is lowered once at prepare (weights and parameter words packed, register values fixed)
and, when it fits, its weights are loaded into the model's weight memory right away and stay
there (the DTPU keeps weights stationary across invokes). Nodes that do not fit share a scratch
region and page their weights in at every invoke, which the counters then include. An invoke is
im2col/pack -> jobs on the model -> unpack; the counters are those the RTL's registers report.
On the golden model the jobs run compiled (:func:`dtpu.driver.model.run_jobs_compiled`: the
registers of each job decoded once, the datapath run directly, same words and counters as the
register/stream protocol); option ``fast=False`` drives the model through the protocol instead.
Power is the activity-based estimate of :mod:`dtpu.power` (``method="estimated"``), summed over
the nodes of an invoke. Subclasses drive other targets by overriding :meth:`_open_transport`.
"""
from __future__ import annotations

import logging
import threading
from dataclasses import dataclass, field
from time import perf_counter

import numpy as np

from dtpu.backends.base import Backend, HwCounters, PowerReading, Probes
from dtpu.driver import ModelTransport, Transport, check_identity, run_jobs
from dtpu.driver.model import run_compiled, run_jobs_compiled
from dtpu.hw import fast as fastpath
from dtpu.hw.config import HwConfig, get_config
from dtpu.hw.lower import Lowered, footprint, lower
from dtpu.hw.model import Core
from dtpu.power import EnergyMeter, activity
from dtpu.spec import ConvSpec

log = logging.getLogger(__name__)


class _Allocator:
    """First-fit allocation of [0, size) in units aligned to `align`."""

    def __init__(self, size: int, align: int) -> None:
        self.size, self.align = size, align
        self.used: dict[int, int] = {}

    def alloc(self, n: int) -> int | None:
        n = -(-n // self.align) * self.align
        base = 0
        for start, length in sorted(self.used.items()):
            if start - base >= n:
                break
            base = max(base, start + length)
        if base + n > self.size:
            return None
        self.used[base] = n
        return base

    def free(self, base: int | None) -> None:
        if base is not None:
            self.used.pop(base, None)


@dataclass
class _Node:
    lowered: Lowered
    wgt_base: int | None
    param_base: int | None
    compiled: dict = field(default_factory=dict)   # compiled jobs (fast path), by register list
    memo: tuple | None = None                      # counters -> report fields and energy
    direct: object = None                          # the one compiled job (Lowered.direct), False: none


class ModelBackend(Backend):
    name = "model"

    #: share of each memory kept as the scratch region for nodes that do not stay resident
    SCRATCH_FRACTION = 8

    def __init__(self, options=None) -> None:
        super().__init__(options)
        rows, cols = self.options.get("mxu", (8, 8))
        overrides = {}
        if int(rows) != 8:
            raise ValueError(f"backend=model: mxu={rows}x{cols}; the DTPU has ROWS=8 (the int8 lanes "
                             f"of a 64-bit word), accepted: 8xC with C a power of two >= 2")
        if int(cols) != get_config().COLS:
            overrides["COLS"] = int(cols)
        clock = self.options.get("clock_mhz")
        if clock and float(clock) != get_config().CLOCK_MHZ:
            overrides["CLOCK_MHZ"] = float(clock)
        self.cfg = HwConfig(**overrides) if overrides else get_config()
        self.precision = str(self.options.get("precision", "auto") or "auto").lower()
        self.rounding = self.options.get("rounding", "default")
        self.transport = self._open_transport()
        check_identity(self.transport)
        # the compiled fast path is the golden model's own; other targets speak the protocol
        fast = str(self.options.get("fast", True)).lower() not in ("0", "false", "no", "off")
        self.fast = fast and type(self.transport) is ModelTransport
        # one core: invokes are serialized (compiled jobs also reuse their scratch buffers)
        self._serial = threading.RLock()
        self.energy = EnergyMeter(self.cfg.CLOCK_MHZ, self.cfg.COLS)
        c = self.cfg
        self._wscratch = max(c.COLS, c.WEIGHT_WORDS // self.SCRATCH_FRACTION)
        self._pscratch = max(c.COLS, c.PARAM_ENTRIES // self.SCRATCH_FRACTION)
        self._walloc = _Allocator(c.WEIGHT_WORDS - self._wscratch, c.COLS)
        self._palloc = _Allocator(c.PARAM_ENTRIES - self._pscratch, c.COLS)

    def _open_transport(self) -> Transport:
        return ModelTransport(Core(self.cfg))

    @property
    def core(self) -> Core:
        return self.transport.core

    def prepare(self, spec: ConvSpec, filters: np.ndarray, bias: np.ndarray | None) -> _Node:
        c = self.cfg
        words, entries = footprint(spec, c, self.precision)
        wb = self._walloc.alloc(words)
        pb = self._palloc.alloc(entries) if wb is not None else None
        if wb is not None and pb is not None:
            low = lower(spec, filters, bias, c, wgt_base=wb, param_base=pb, wgt_capacity=words,
                        param_capacity=max(entries, c.COLS), precision=self.precision,
                        rounding=self.rounding, runtime=self.runtime)
            run_jobs(self.transport, low.load_jobs)
            return _Node(low, wb, pb)
        self._walloc.free(wb)
        log.info("%s: %d weight words do not fit the free weight memory; paging through the "
                 "%d-word scratch region at every invoke", spec.name or spec.kind.value, words,
                 self._wscratch)
        low = lower(spec, filters, bias, c, wgt_base=c.WEIGHT_WORDS - self._wscratch,
                    param_base=c.PARAM_ENTRIES - self._pscratch, wgt_capacity=self._wscratch,
                    param_capacity=self._pscratch, precision=self.precision,
                    rounding=self.rounding, resident=False, runtime=self.runtime)
        return _Node(low, None, None)

    def invoke(self, handle: _Node, x: np.ndarray, probes: Probes) -> tuple[np.ndarray, HwCounters]:
        with self._serial:
            return self._invoke(handle, x, probes)

    def _invoke(self, handle: _Node, x: np.ndarray, probes: Probes) -> tuple[np.ndarray, HwCounters]:
        if self.fast and handle.direct is not False and handle.lowered.direct is not None:
            return self._invoke_direct(handle, x, probes)
        low = handle.lowered
        t0 = perf_counter()
        jobs = low.jobs(x)
        t1 = perf_counter()
        if self.fast:
            results, cnt = run_jobs_compiled(self.transport, jobs, handle.compiled)
        else:
            results, cnt = run_jobs(self.transport, jobs)
        t2 = perf_counter()
        y = low.assemble(results)
        t3 = perf_counter()
        probes.add("pack", t1 - t0)
        probes.add("compute", t2 - t1)
        probes.add("unpack", t3 - t2)
        # a node's counters repeat from invoke to invoke: derive the report's fields and the
        # energy estimate once per distinct set
        key = (cnt.cycles, cnt.stall_cycles, tuple(cnt.words_in.items()),
               tuple(cnt.words_out.items()))
        memo = handle.memo
        if memo is None or memo[0] != key:
            memo = handle.memo = self._memo(key, low)
        _, fields, latency, dyn, busy_s = memo[:5]
        self.energy.add_energy(dyn, busy_s)
        return y, HwCounters(*fields, dict(cnt.words_in), dict(cnt.words_out), latency)

    def invoke_into(self, handle: _Node, x: np.ndarray, probes: Probes, out: np.ndarray):
        """:meth:`invoke`, writing the output into `out` (the delegate's output buffer) when the
        node's result words are that tensor's bytes; returns (`out` or another array, counters).
        Targets other than the golden model (subclasses) run their own :meth:`invoke`."""
        if (self.fast and handle.direct is not False and handle.lowered.direct is not None
                and handle.lowered.direct[3]):
            with self._serial:
                return self._invoke_direct(handle, x, probes, out)
        return self.invoke(handle, x, probes)

    def _invoke_direct(self, handle: _Node, x: np.ndarray, probes: Probes, out=None):
        """A node whose invoke is one compiled job: no Job objects, no job loop (same words,
        counters and errors as run_jobs_compiled on low.jobs(x))."""
        low = handle.lowered
        regs, act_of, label, into = low.direct
        cj = handle.direct
        if cj is None or not cj.valid(self.core):
            try:
                cj = handle.direct = fastpath.compile_job(self.core, regs)
            except fastpath.Unsupported:
                handle.direct = False
                return self._invoke(handle, x, probes)
        t0 = perf_counter()
        x = np.asarray(x)
        if x.shape != low.spec.input_shape:
            raise ValueError(f"input shape {x.shape} does not match the node's {low.spec.input_shape}")
        words = act_of(x)
        if out is not None and not (cj.writes_out and out.flags.c_contiguous
                                    and out.dtype == cj.lane_dtype and out.size == cj.words_out
                                    * 8 // out.itemsize):
            out = None
        t1 = perf_counter()
        res = run_compiled(self.transport, cj, words, label, out)
        t2 = perf_counter()
        y = low.assemble([res]) if out is None else out
        t3 = perf_counter()
        probes.add("pack", t1 - t0)
        probes.add("compute", t2 - t1)
        probes.add("unpack", t3 - t2)
        memo = handle.memo
        if memo is None or memo[5] is not cj or memo[6] != res.size:
            key = (cj.cycles, 0, (("wgt", 0), ("act", cj.n_in)), (("res", res.size),))
            memo = handle.memo = self._memo(key, low) + (cj, res.size)
        key, fields, latency, dyn, busy_s = memo[:5]
        self.energy.add_energy(dyn, busy_s)
        return y, HwCounters(*fields, dict(key[2]), dict(key[3]), latency)

    def _memo(self, key, low: Lowered) -> tuple:
        """Report fields and energy of a node's counters (cycles, stalls, words in, words out)."""
        cycles, stalls, words_in, words_out = key
        macs = low.spec.macs
        peak = self.cfg.ROWS * self.cfg.COLS
        fields = (cycles, stalls, macs, macs / (cycles * peak) if cycles else None)
        counters = HwCounters(*fields, words_in=dict(words_in), words_out=dict(words_out),
                              latency_us=cycles / self.cfg.CLOCK_MHZ)
        dyn = activity(counters, low.precision, self.energy.cols,
                       self.energy.coeffs).energy_j(self.energy.coeffs)
        return key, fields, counters.latency_us, dyn, (cycles or 0) / (self.energy.clock_mhz * 1e6)

    def power(self) -> PowerReading:
        """The estimate over the nodes run since the last call (one interpreter invoke)."""
        return self.energy.reading()

    def release(self, handle: _Node) -> None:
        self._walloc.free(handle.wgt_base)
        self._palloc.free(handle.param_base)
