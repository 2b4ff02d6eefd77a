"""A backend that drives a DTPU device through the driver's protocols (:class:`DeviceBackend`:
lowering, placement, residency, prefetch, command lists), and backend=model, the one whose device
is the golden model (:class:`ModelBackend`); backend=rtl and backend=pynq drive the Verilog core
and the board with the same :class:`DeviceBackend`.

backend=model: every claimed node runs on the DTPU golden model through the register protocol.

The node is lowered once at prepare (weights and parameter words packed, register values fixed)
and, when it fits, its weights are loaded into the model's weight memory right away and stay
there (the DTPU keeps weights stationary across invokes). Nodes that do not fit are *streamed*
(option ``prefetch``, the default): their parameters stay resident when the parameter memory has
room, their weights are split into pages that live in the ring of weight memory the resident
nodes leave free and are re-sent as prefetch riding on earlier compute jobs
(:mod:`dtpu.hw.prefetch` plans it in prepare order, cyclically across invokes); a host-side copy
of what the weight memory holds makes any other order correct too (missing words are loaded
with LOAD_WGT first). Which nodes stay resident is prepare's first-come choice only while all
of them fit: once one is streamed, the end of the graph's Prepare (:meth:`DeviceBackend.settle`;
without the delegate, the first invoke after a prepare/release) chooses over the
whole set (:meth:`DeviceBackend.select_residency`: the nodes with the most weight words per
compute cycle stay, the others stream behind computation) and lowers again the nodes that move.
``prefetch=off`` pages instead through a scratch region with LOAD_WGT / LOAD_PARAM before every
compute job (first-come residency). The counters include all of it: a carrier job's prefetch
words count as that node's s_axis_wgt words and its extra cycles as its cycles. An invoke is
im2col/pack -> jobs on the model -> unpack; the counters are those the RTL's registers report.
On the golden model the jobs run compiled (:func:`dtpu.driver.model_transport.run_jobs_compiled`: the
registers of each job decoded once, the datapath run directly, same words and counters as the
register/stream protocol); option ``fast=False`` drives the model through the protocol instead.
Every node's counters carry the host's work of its invoke (``HwCounters.host``,
:mod:`dtpu.driver.hostops`): the protocol path counts the driver's calls through a
:class:`~dtpu.driver.hostops.CountingTransport`, the compiled path adds what the protocol would
have done for the same jobs, the lowering counts its transforms (``Lowered.transforms``), and
``us`` is the invoke's time on the host (perf_counter, from before the residency/plan settle to
the assembled output) minus the time spent inside the target.
Power is the activity-based estimate of :mod:`dtpu.power` (``method="estimated"``), summed over
the nodes of an invoke. Each subclass names its target:
:func:`dtpu.backends.targets.open_target` opens the one the name says.
"""
from __future__ import annotations

import logging
import threading
from dataclasses import dataclass, field
from time import perf_counter

import numpy as np

from dtpu.backends.base import Backend, HwCounters, PowerReading, Probes
from dtpu.backends import list_counters
from dtpu.backends.prefetch_plan import PlanState, opcode, profile
from dtpu.backends.targets import open_target
from dtpu.driver import ModelTransport, Transport, check_identity, run_jobs
from dtpu.driver.hostops import (CountingTransport, HostOps, add_counts, counter_read_ops)
from dtpu.driver.lists import ListProgram, lists_supported
from dtpu.driver.model_transport import run_compiled, run_jobs_compiled
from dtpu.hw import fast as fastpath
from dtpu.hw import prefetch, residency
from dtpu.hw.residency import Profile, aligned, page_size
from dtpu.hw.config import HwConfig, get_config
from dtpu.hw.lower import Job, Lowered, footprint, lower
from dtpu.hw.placement import SCRATCH_FRACTION, OnChipShadow, Region, claim_error, job_scratch
from dtpu.hw.vec_lower import vec_reason
from dtpu.hw.core import Core
from dtpu.power import EnergyMeter, activity
from dtpu.spec import ConvSpec

log = logging.getLogger(__name__)


@dataclass(eq=False)   # identity: handles are looked up in the backend's node list
class _Node:
    lowered: Lowered
    wgt_base: int | None
    param_base: int | None
    compiled: dict = field(default_factory=dict)   # compiled jobs (fast path), by register list
    memo: tuple | None = None                      # counters -> report fields and energy
    direct: object = None                          # the one compiled job (Lowered.direct), False: none
    streamed: bool = False                         # weights paged by the backend's prefetch plan
    #: per job of low.jobs(x), as the prefetch plan sees it: ("skip",) a LOAD_WGT the plan
    #: replaces, ("run",) a job run as lowered, ("compute", slot, page or None)
    layout: list | None = None
    #: per job of low.jobs(x), what _planned_jobs does with it (built with the plan, see
    #: PlanState.build): None (skip), (_RUN, host copy, address, words) or (_COMPUTE, final
    #: register list, rider address, rider words or None, page address, page words or None)
    steps: list | None = None
    #: its resident parameters' LOAD_PARAM jobs with their (address, entries)
    param_loads: list | None = None
    planned: bool = False                          # in the backend's node list (prepare order)
    #: what the node was prepared from (spec, filters, bias, weight words, parameter entries):
    #: the residency selection lowers it again when it moves between resident and streamed
    src: tuple | None = None
    page: int | None = None                        # streamed: the weight words of a page
    pending: bool = False                          # resident, weights not loaded yet (next invoke)
    #: the selection's profiles of the lowerings it tried, by page size ("resident"); None:
    #: cannot be lowered so (the lowerings themselves are dropped once profiled)
    candidates: dict = field(default_factory=dict)
    #: what the node's lowerings share whatever their region (lower(share=)): one im2col plan
    #: and one copy of the packed weight words, which pages slice
    share: dict = field(default_factory=dict)


class DeviceBackend(Backend):
    """The host side of a DTPU device, whichever implements it: a subclass sets `name` to the
    target :func:`dtpu.backends.targets.open_target` opens (the golden model, the Verilog core,
    the board)."""

    #: the overlay a board target loads (backend=pynq sets it from its options)
    bitstream: str | None = None

    #: share of each memory kept free of resident nodes: the scratch region of paged nodes
    #: (prefetch off), the least the ring of streamed pages gets (prefetch on; pages are a
    #: quarter of it); :mod:`dtpu.hw.placement`'s
    SCRATCH_FRACTION = SCRATCH_FRACTION

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
        self.lists = self._choose_path(str(self.options.get("path", "auto")).lower())
        #: which program's prologue the on-chip memories hold, as a word C code can read: the
        #: program's cid while it is loaded and nothing else ran since, else 0; -1 written by the
        #: delegate's C invoke path after a failed list (the program must load again)
        self.owner_cell = np.zeros(1, np.int64)
        self._owner = None      # the ListProgram whose prologue the on-chip memories hold
        # the compiled fast path is the golden model's own; other targets speak the protocol
        fast = str(self.options.get("fast", True)).lower() not in ("0", "false", "no", "off")
        self.fast = fast and type(self.transport) is ModelTransport
        # one core: invokes are serialized (compiled jobs also reuse their scratch buffers)
        self._serial = threading.RLock()
        self.energy = EnergyMeter(self.cfg.CLOCK_MHZ, self.cfg.COLS)
        c = self.cfg
        self._wscratch, self._pscratch = job_scratch(c, self.SCRATCH_FRACTION)
        self._walloc = Region(c.WEIGHT_WORDS - self._wscratch, c.COLS)
        self._palloc = Region(c.PARAM_ENTRIES - self._pscratch, c.COLS)
        self.prefetch = str(self.options.get("prefetch", True)).lower() not in ("0", "false", "no", "off")
        self._nodes: list[_Node] = []          # prepare order: the order the plan assumes
        # the prefetch plan and residency, built by settle() at the end of a graph's Prepare,
        # else at the first invoke after a prepare/release
        self._prefetch_state: PlanState | None = None
        # nodes prepared since the last plan was built (TFLite prepares the nodes after a
        # dynamic tensor during Invoke, a partition at a time): those plans skip the residency
        # selection, which then runs once at the next invoke of the first node (a whole round
        # with no prepare in between), not once per partition (O(nodes^2))
        self._added_since_plan = 0
        self._planned_once = False
        self._select_pending = False
        # what the on-chip memories hold, as far as this backend wrote them: checked before
        # every streamed page or paged parameter is used
        self.onchip = OnChipShadow(c)
        self._load_regs: dict = {}
        self._last_estimate: float | None = None   # its estimate of an invoke's cycles
        self._ops: HostOps | None = None   # the host operations of the invoke under way

    def _open_transport(self) -> Transport:
        """This backend's target (:func:`dtpu.backends.targets.open_target`, by backend name:
        the golden model of a contract-2.0 core, the Verilog core, the board); the host then
        lowers for the build the target reports."""
        self.target = open_target(self.name, self.cfg, path=str(self.options.get("path", "auto")),
                                  precision=self.precision,
                                  bitstream=self.bitstream,
                                  board_wait_s=float(self.options.get("board_wait_s", 0.0)))
        self.cfg = self.target.cfg
        return self.target.transport

    def _choose_path(self, path: str) -> bool:
        """Command lists (True) or job by job: from the core's VERSION and the `path` option
        (and whether the target can move job streams at all: the 2.0 overlay has no DMAs)."""
        name = self.name or type(self).__name__
        if not self.transport.streams:
            if path == "jobs" or not lists_supported(self.transport):
                raise ValueError(f"backend={name}: path={path}, but the overlay has no stream DMAs "
                                 f"(the contract-2.0 design) and runs command lists only; "
                                 f"accepted: path=auto or path=lists with a 2.0 core")
            if self.precision != "auto":
                raise ValueError(f"backend={name}: precision={self.precision} needs the job-by-job "
                                 f"path, which this overlay (contract 2.0, no DMAs) cannot run; "
                                 f"accepted: precision=auto")
            return True
        if path == "jobs":
            return False
        if not lists_supported(self.transport):
            if path == "lists":
                raise ValueError(f"backend={name}: path=lists, but the core reports VERSION "
                                 f"{self.transport.read_reg(self.cfg.REG_VERSION):#x} (contract "
                                 f"1.2, no command lists); accepted: path=auto or path=jobs")
            log.info("backend=%s: the core is contract 1.2: job by job", name)
            return False
        if self.precision != "auto":
            if path == "lists":
                raise ValueError(f"backend={name}: path=lists with precision={self.precision}; "
                                 f"command lists run the natural precisions only; accepted: "
                                 f"precision=auto, or path=auto/jobs")
            log.info("backend=%s: precision=%s forced: job by job", name, self.precision)
            return False
        return True

    #: partitions compiled as command lists may run on the delegate's C invoke path
    #: (delegate/dtpu_cpath.c) once their first invoke ran here; see :meth:`finish_partition`
    c_invoke = True
    #: the C path hands every run to Python at once (a backend that checks each run itself)
    c_invoke_eager = False

    @property
    def _owner(self):
        owner = self.__dict__.get("_owner_obj")
        if self.owner_cell[0] < 0:      # a C-path list failed: what it loaded is not known
            if isinstance(owner, ListProgram):
                owner.loaded = False
            self._sync_owner(owner)
        return owner

    @_owner.setter
    def _owner(self, owner) -> None:
        self.__dict__["_owner_obj"] = owner
        self._sync_owner(owner)

    def _sync_owner(self, owner) -> None:
        self.owner_cell[0] = owner.cid if isinstance(owner, ListProgram) and owner.loaded else 0

    @property
    def enabled_precisions(self):
        return self.cfg.ENABLED

    @property
    def rq_variants(self):
        return self.cfg.rq_variants

    @property
    def job_streams(self) -> bool:
        return self.transport.streams

    @property
    def vector_unit(self) -> bool:
        return bool(self.lists and self.transport.vector_unit)

    def vector_error(self, spec) -> str | None:
        if not self.vector_unit:
            return super().vector_error(spec)
        return vec_reason(spec, self.cfg, self.transport.vector_build)

    @property
    def core(self) -> Core:
        return self.transport.core

    def placement_error(self, spec: ConvSpec) -> str | None:
        """Why `spec` cannot be placed on this backend's build (None: it can), checked before
        the delegate claims the node: the lowering's own rules (:func:`dtpu.hw.lower.
        check_placement`) for the smallest region a node that does not fit gets, the scratch
        region (weights and parameters paged through it), so prepare never fails for lack of
        memory. A target without job streams (the 2.0 overlay) has no job path to fall back to
        when a node does not fit a command list's scratch half (W/16 words against the job
        path's W/8): such a node is checked against the half."""
        return claim_error(spec, self.cfg, self.precision, lists=not self.transport.streams)

    def prepare(self, spec: ConvSpec, filters: np.ndarray, bias: np.ndarray | None) -> _Node:
        c = self.cfg
        words, entries = footprint(spec, c, self.precision)
        wb = self._walloc.alloc(words)
        pb = self._palloc.alloc(entries) if wb is not None else None
        share: dict = {}
        if wb is not None and pb is not None:
            low = lower(spec, filters, bias, c, wgt_base=wb, param_base=pb, wgt_capacity=words,
                        param_capacity=max(entries, c.COLS), precision=self.precision,
                        rounding=self.rounding, runtime=self.runtime, share=share)
            self._run_loads(low.load_jobs)
            return self._add(_Node(low, wb, pb, src=(spec, filters, bias, words, entries),
                                   share=share))
        self._walloc.free(wb)
        if self.prefetch:
            self._palloc.free(pb)
            node = self._prepare_streamed(spec, filters, bias, words, entries, share)
            node.src = (spec, filters, bias, words, entries)
            return self._add(node)
        log.info("%s: %d weight words do not fit the free weight memory; paging through the "
                 "%d-word scratch region at every invoke", spec.name or spec.kind.value, words,
                 self._wscratch)
        low = lower(spec, filters, bias, c, wgt_base=c.WEIGHT_WORDS - self._wscratch,
                    param_base=c.PARAM_ENTRIES - self._pscratch, wgt_capacity=self._wscratch,
                    param_capacity=self._pscratch, precision=self.precision,
                    rounding=self.rounding, resident=False, runtime=self.runtime)
        _log_split(low)
        return self._add(_Node(low, None, None))

    def check(self, spec: ConvSpec, filters: np.ndarray, bias: np.ndarray | None) -> None:
        """:meth:`prepare`'s lowering (resident where the memories have room now, else
        streamed or paged), raising what it raises, with nothing allocated, loaded or kept."""
        with self._serial:   # the allocators are borrowed for the lowering's addresses
            self._check(spec, filters, bias)

    def _check(self, spec: ConvSpec, filters: np.ndarray, bias: np.ndarray | None) -> None:
        c = self.cfg
        words, entries = footprint(spec, c, self.precision)
        wb = self._walloc.alloc(words)
        pb = self._palloc.alloc(entries) if wb is not None else None
        try:
            if wb is not None and pb is not None:
                lower(spec, filters, bias, c, wgt_base=wb, param_base=pb, wgt_capacity=words,
                      param_capacity=max(entries, c.COLS), precision=self.precision,
                      rounding=self.rounding, runtime=self.runtime)
                return
            self._walloc.free(wb)
            self._palloc.free(pb)
            wb = None
            if self.prefetch:
                pb = self._palloc.alloc(entries, limit=c.PARAM_ENTRIES)
                self._lower_streamed(spec, filters, bias, entries, pb,
                                     page_size(c, spec, words, self._wscratch), {})
                return
            pb = None
            lower(spec, filters, bias, c, wgt_base=c.WEIGHT_WORDS - self._wscratch,
                  param_base=c.PARAM_ENTRIES - self._pscratch, wgt_capacity=self._wscratch,
                  param_capacity=self._pscratch, precision=self.precision,
                  rounding=self.rounding, resident=False, runtime=self.runtime)
        finally:
            self._walloc.free(wb)
            self._palloc.free(pb)

    def _prepare_streamed(self, spec, filters, bias, words: int, entries: int,
                          share: dict) -> _Node:
        """A node whose weights do not fit: pages of about a quarter of the scratch region (so
        that several are in flight in the ring), parameters resident if they fit."""
        c = self.cfg
        # the parameters may reach into the parameter scratch region: a node paging its
        # parameters there is checked against them (see _planned_jobs)
        pb = self._palloc.alloc(entries, limit=c.PARAM_ENTRIES)
        page = page_size(c, spec, words, self._wscratch)
        log.info("%s: %d weight words do not fit the free weight memory; streamed in pages of "
                 "<= %d words (parameters %s)", spec.name or spec.kind.value, words, page,
                 "resident" if pb is not None else "paged")
        low = self._lower_streamed(spec, filters, bias, entries, pb, page, share)
        self._run_loads(low.load_jobs)
        return _Node(low, None, pb, streamed=True, page=page, share=share)

    def _lower_streamed(self, spec, filters, bias, entries: int, pb: int | None, page: int,
                        share: dict) -> Lowered:
        """The streamed lowering: pages of <= `page` words at address 0 (the plan moves them),
        parameters resident at `pb` (or paged through the parameter scratch region: None)."""
        c = self.cfg
        if pb is not None:
            params = dict(param_base=pb, param_capacity=max(entries, c.COLS), param_pages=False)
        else:
            params = dict(param_base=c.PARAM_ENTRIES - self._pscratch,
                          param_capacity=self._pscratch)
        return lower(spec, filters, bias, c, wgt_base=0, wgt_capacity=page,
                     precision=self.precision, rounding=self.rounding, resident=False,
                     runtime=self.runtime, share=share, **params)

    def _lower_resident(self, node: _Node, base: int) -> Lowered:
        spec, filters, bias, words, entries = node.src
        return lower(spec, filters, bias, self.cfg, wgt_base=base, param_base=node.param_base,
                     wgt_capacity=words, param_capacity=max(entries, self.cfg.COLS),
                     precision=self.precision, rounding=self.rounding, runtime=self.runtime,
                     share=node.share)

    def _add(self, node: _Node) -> _Node:
        self._nodes.append(node)
        node.planned = True
        self._prefetch_state = None
        self._added_since_plan += 1
        return node

    def _run_loads(self, jobs, force: bool = False) -> None:
        """Jobs run once (prepare): the LOAD_WGT words also go into the host's copy. A target
        that cannot move job streams (the 2.0 overlay: no DMAs) runs command lists only, and
        nothing is loaded for the 1.2 path there; elsewhere the loads run, and a command list
        that overwrites them makes the next job-by-job invoke reload them (:meth:`_reclaim`)."""
        if not force and not self.transport.streams:
            if self._owner is None:
                self._owner = _LISTS
            return
        for job in jobs:
            self.onchip.remember_load(job)
        try:
            run_jobs(self._counted(), jobs)
        except Exception:
            self.onchip.forget()
            raise

    def _counted(self) -> Transport:
        """The transport the protocol driver is handed: counting during an invoke."""
        ops = self._ops
        return self.transport if ops is None else CountingTransport(self.transport, ops)

    def _hosted(self, handle: _Node, ops: HostOps, start: float, run) -> tuple[np.ndarray, HwCounters]:
        """`run()` (an invoke of `handle`) with the host record of its counters filled in;
        `start` (perf_counter) was taken before the residency/plan settle that precedes it."""
        low = handle.lowered
        before = low.transforms[0]
        self._ops = ops
        try:
            y, cnt = run()
        finally:
            self._ops = None
        # a settle or a fallback may have lowered the node again: count on the lowering that ran
        after = handle.lowered
        transforms = after.transforms[0] - (before if after is low else 0)
        cnt.host = {"mmio_reads": ops.mmio_reads, "mmio_writes": ops.mmio_writes,
                    "doorbells": ops.doorbells, "dma_starts": ops.dma_starts,
                    "transforms": transforms,
                    "us": max(0.0, (perf_counter() - start - ops.device_s) * 1e6)}
        return y, cnt

    # -- the prefetch plan ---------------------------------------------------------------------

    def ring(self) -> tuple[int, int]:
        """The largest stretch of weight memory no resident node holds, as (start, end): where
        the streamed nodes' pages live (tests check resident weights stay out of it)."""
        return self._walloc.largest_gap(self.cfg.WEIGHT_WORDS)

    def prefetch_plan(self, handle: "_Node | None" = None) -> prefetch.Plan:
        """The prefetch plan over the prepared nodes (built here if a prepare or release dropped
        it, choosing residency first as an invoke of `handle` would): which pages stream, which
        compute jobs carry them. Public so that tests and tools can read the plan an invoke
        runs without invoking."""
        return self._plan_state(handle).plan

    @property
    def has_plan(self) -> bool:
        """Whether a prefetch plan is built (a prepare or release drops it; the next invoke
        plans again)."""
        return self._prefetch_state is not None

    def drop_plan(self) -> None:
        """Forget the prefetch plan: the next invoke (or :meth:`prefetch_plan`) plans again over
        the same nodes, running the residency selection, which keeps the current assignment
        unless another one is cheaper."""
        self._prefetch_state = None

    @property
    def last_estimate(self) -> float | None:
        """The residency selection's estimate of one steady-state invoke's cycles (None before
        it ran, or while every node is resident)."""
        return self._last_estimate

    @property
    def nodes(self) -> tuple[_Node, ...]:
        """The prepared node handles in prepare order (the order the prefetch plan assumes)."""
        return tuple(self._nodes)

    @property
    def resident_weight_words(self) -> int:
        """Weight words held by resident nodes (0 once every node is released)."""
        return sum(self._walloc.used.values())

    @property
    def loaded_program(self) -> ListProgram | None:
        """The command-list program whose prologue the on-chip memories hold (None: none, or
        the job path's loads); what the delegate's C invoke path checks before a run."""
        owner = self._owner
        return owner if isinstance(owner, ListProgram) else None

    def settle(self) -> None:
        """Residency (:meth:`select_residency`) and the prefetch plan, chosen now over every
        prepared node (the delegate calls it at the end of a graph's Prepare when the graph runs
        job by job), and the weights of the nodes the selection made resident loaded now: the
        first invoke then runs as later ones do (its pages still go in as the plan's first
        round). An invoke without it still settles first (:meth:`_plan_state`)."""
        with self._serial:
            if not self.prefetch or not self._nodes:
                return
            self._prefetch_state = None
            self._planned_once = False    # a complete node set: choose now, not later
            self._plan_state()
            pending = [n for n in self._nodes if n.pending]
            if pending and self.transport.streams:
                self._reclaim()   # a command list's prologue is what the memories hold
                for n in pending:
                    self._run_loads(n.lowered.load_jobs)
                    n.pending = False

    def _plan_state(self, handle: "_Node | None" = None) -> "PlanState":
        if (self._prefetch_state is not None and self._select_pending and handle is not None
                and self._nodes and handle is self._nodes[0]):
            # a new round of invokes with no node prepared since the last plan: the node set
            # is complete, choose residency over all of it now
            self._prefetch_state = None
        if self._prefetch_state is None:
            if self._planned_once and self._added_since_plan:
                # nodes prepared mid-invoke: plan them as prepare placed them, choose later
                self._select_pending = True
            else:
                self.select_residency()
                self._select_pending = False
            self._prefetch_state = PlanState.build(self.cfg, self._nodes, self.ring(), self._steps)
            self._planned_once = True
            self._added_since_plan = 0
        return self._prefetch_state

    # -- which nodes stay resident ---------------------------------------------------------------

    #: ring sizes the selection tries, as fractions of the weight memory, and page sizes as
    #: fractions of the ring (:mod:`dtpu.hw.residency`'s; a subclass may narrow them)
    RING_FRACTIONS = residency.RING_FRACTIONS
    RING_PAGES = residency.RING_PAGES

    def select_residency(self) -> None:
        """Which nodes stay resident, chosen over the whole set of prepared nodes by
        :func:`dtpu.hw.residency.select` (nodes resident greedily in decreasing order of
        weight words per compute cycle next to rings of RING_FRACTIONS of the weight memory,
        each assignment costed as one steady-state invoke with the prefetch plan; the cheapest
        wins, the current one on a tie), with profiles of this backend's candidate lowerings.

        Nothing changes while every node is resident (a net that fits stays as prepare put
        it). Nodes that change are lowered again (the lowering is exact whatever its region:
        outputs do not change), resident ones laid out from address 0 in prepare order; a node
        that becomes resident loads its weights in :meth:`settle`, or else at its next invoke
        (and counts them there, as a streamed node's first invoke does)."""
        nodes = self._nodes
        if not self.prefetch or not any(n.streamed for n in nodes):
            return
        decoder = Core(self.cfg)
        candidates = [residency.Candidate(n.src[0], n.src[3], self._residable(n)) for n in nodes]
        current = [None if not n.streamed else n.page for n in nodes]
        best, best_cost = residency.select(
            self.cfg, candidates, current, self.ring(),
            lambda i, page: self._candidate_profile(decoder, nodes[i], page),
            self.RING_FRACTIONS, self.RING_PAGES)
        self._last_estimate = best_cost
        if best is not current:
            self._apply(best)
        for n in nodes:
            n.candidates.clear()
            _log_split(n.lowered)
        log.info("residency: %d of %d nodes resident, %d streamed (estimated %.0f cycles per "
                 "invoke)", sum(not n.streamed for n in nodes), len(nodes),
                 sum(n.streamed for n in nodes), best_cost)

    def _residable(self, node: _Node) -> bool:
        """Its parameters are resident and no paged parameters go over them."""
        c = self.cfg
        if node.param_base is None:
            return False
        end = node.param_base + max(node.src[4], c.COLS)
        return end <= c.PARAM_ENTRIES - self._pscratch or all(n.param_base is not None
                                                                for n in self._nodes)

    def _candidate_lowering(self, node: _Node, page: int | None) -> Lowered | None:
        """The node lowered resident (page None; at address 0: cycles do not depend on it) or
        streamed in pages of `page` words; None when it cannot be."""
        if page is None and not node.streamed:
            return node.lowered
        if page is not None and node.streamed and node.page == page:
            return node.lowered
        spec, filters, bias, words, entries = node.src
        try:
            if page is None:
                return self._lower_resident(node, 0)
            return self._lower_streamed(spec, filters, bias, entries, node.param_base, page,
                                        node.share)
        except ValueError:   # LowerError included: e.g. a depthwise node's taps > the page
            return None

    def _candidate_profile(self, decoder: Core, node: _Node, page: int | None) -> "Profile | None":
        """The profile of :meth:`_candidate_lowering` (None: there is none), kept for the rest of
        the selection; the lowering is not: a dozen candidate lowerings per node, each with its
        own Job objects and register tuples, were most of the selection's memory. The chosen
        ones are lowered again in :meth:`_apply` (the lowering is deterministic)."""
        key = "resident" if page is None else page
        if key not in node.candidates:
            low = self._candidate_lowering(node, page)
            node.candidates[key] = None if low is None else profile(decoder, low)
        return node.candidates[key]

    def _apply(self, choice: list) -> None:
        """Lower again the nodes whose residency or page size changes; resident ones laid out
        from address 0 in prepare order, the ring is the rest."""
        c = self.cfg
        base, used = 0, {}
        for n, page in zip(self._nodes, choice):
            if page is None:
                if n.streamed or n.wgt_base != base:
                    low = self._candidate_lowering(n, None) if base == 0 and n.streamed else None
                    n.lowered = low if low is not None else self._lower_resident(n, base)
                    n.wgt_base, n.streamed, n.page, n.pending = base, False, None, True
                    n.compiled, n.direct, n.memo = {}, None, None
                used[base] = aligned(c, n.src[3])
                base += used[base]
            elif not n.streamed or n.page != page:
                n.lowered = self._candidate_lowering(n, page)
                n.wgt_base, n.streamed, n.page, n.pending = None, True, page, False
                n.compiled, n.direct, n.memo = {}, None, None
        self._walloc.used = used

    def _planned_jobs(self, handle: _Node, jobs: list[Job]) -> list[Job]:
        """The node's jobs as the plan runs them: WGT_BASE of streamed pages moved to their ring
        place, prefetch riders attached, and LOAD_WGT for whatever a page misses (first invoke,
        another order)."""
        self._plan_state()
        out = []
        if handle.pending:    # made resident by the selection: its weights go in first
            for job in handle.lowered.load_jobs:
                self.onchip.remember_load(job)
                out.append(job)
        if handle.streamed:   # resident parameters of a streamed node: still there?
            for job, a, e in handle.param_loads:
                if not self.onchip.entries_there(a, e):
                    self.onchip.remember_load(job)
                    out.append(job)
        # the per-job decisions were taken with the plan (handle.steps): what is left per
        # invoke is the host copy of what the riders write and the check of the pages
        for job, step in zip(jobs, handle.steps):
            if step is None:
                continue
            if step[0] is _RUN:
                _, shadow, known, a, w = step
                if shadow is not None:
                    shadow[a:a + len(w)] = w
                    known[a:a + len(w)] = True
                out.append(job)
                continue
            _, regs, raddr, rwords, paddr, pwords = step
            if pwords is not None:
                out += self._ensure_page(paddr, pwords)
            send = job.send
            if rwords is not None:
                send = {**send, "wgt": rwords}
                self.onchip.remember(raddr, rwords)
            out.append(Job(job.label, regs, send, job.recv, job.macs))
        return out

    def _steps(self, st: "PlanState", node: _Node) -> None:
        """node.steps and node.param_loads for the plan `st` (see _Node)."""
        steps = []
        for job, entry in zip(node.lowered.skeleton(), node.layout):
            if entry[0] == "skip":
                steps.append(None)
            elif entry[0] == "run":
                r = dict(job.regs)
                op = opcode(self.cfg, r)
                if op == "LOAD_WGT":
                    steps.append((_RUN, self.onchip.wgt, self.onchip.wgt_known, r["LOAD_ADDR"],
                                  job.send["wgt"]))
                elif op == "LOAD_PARAM":
                    steps.append((_RUN, self.onchip.param, self.onchip.param_known, r["LOAD_ADDR"],
                                  job.send["wgt"].reshape(-1, 2)))
                else:
                    steps.append((_RUN, None, None, 0, None))
            else:
                _, slot, page = entry
                rider = st.plan.riders.get(slot)
                steps.append((_COMPUTE, st.regs[slot],
                              rider.addr if rider is not None else 0,
                              rider.words if rider is not None else None,
                              st.plan.addr[page] if page is not None else 0,
                              st.pages[page].words if page is not None else None))
        node.steps = steps
        node.param_loads = [(job, dict(job.regs)["LOAD_ADDR"], job.send["wgt"].reshape(-1, 2))
                            for job in node.lowered.load_jobs] if node.streamed else []

    def _ensure_page(self, addr: int, words: np.ndarray) -> list[Job]:
        n = words.size
        # the usual case first (the page is there): bytes compared, no temporaries
        sh = self.onchip
        if sh.words_there(addr, words):
            return []
        bad = ~sh.wgt_known[addr:addr + n] | (sh.wgt[addr:addr + n] != words)
        if not bad.any():
            return []
        idx = np.flatnonzero(bad)
        lo, hi = int(idx[0]), int(idx[-1]) + 1
        key = (addr + lo, hi - lo)
        regs = self._load_regs.get(key)
        if regs is None:
            if len(self._load_regs) > 1024:
                self._load_regs.clear()
            regs = self._load_regs[key] = (("LOAD_ADDR", addr + lo), ("LOAD_COUNT", hi - lo),
                                           ("JOB", self.cfg.encode("JOB", OPCODE=self.cfg.OPCODE_LOAD_WGT)))
        self.onchip.remember(addr + lo, words[lo:hi])
        return [Job(f"wgt page [{addr + lo}:{addr + hi})", regs, {"wgt": words[lo:hi]})]

    def _settle_counted(self, handle: _Node) -> tuple[float, HostOps]:
        """:meth:`_settle` with its host operations (weight loads of a new plan) counted into a
        fresh HostOps for this invoke; returns (start time, that record)."""
        start, ops = perf_counter(), HostOps()
        self._ops = ops
        try:
            self._settle(handle)
        finally:
            self._ops = None
        return start, ops

    # -- contract 2.0: whole partitions as command lists ----------------------------------------

    def prepare_partitions(self, partitions: list, keep: list | None = None) -> ListProgram:
        with self._serial:
            prog = ListProgram(self.transport, partitions, rounding=self.rounding,
                               runtime=self.runtime, keep=keep)
            self._owner = prog
            log.info("backend=%s: %d partition(s) as command lists, %d bytes of DDR image, %d "
                     "node(s) streamed", self.name, len(partitions), prog.size,
                     prog.program.streamed_nodes)
            return prog

    def release_partitions(self, program: ListProgram) -> None:
        with self._serial:
            if self._owner is program:
                self._owner = _LISTS
            program.free()

    def invoke_partition(self, program: ListProgram, index: int, inputs: list[np.ndarray],
                         outputs: dict[int, np.ndarray], probes: Probes) -> list[HwCounters]:
        with self._serial:
            start, ops = perf_counter(), HostOps()
            if self._owner is not program:   # another program or 1.2 jobs wrote the memories
                program.loaded = False
            self._owner = program
            try:
                run = program.invoke(index, inputs, outputs, self.transport, ops)
            finally:
                self._sync_owner(program)
            return self.finish_partition(program, index, run, ops, perf_counter() - start,
                                         probes, inputs, outputs)

    def finish_partition(self, program: ListProgram, index: int, run, ops: HostOps,
                         seconds: float, probes: Probes, inputs=None, outputs=None
                         ) -> list[HwCounters]:
        """The report's side of a list run of partition `index` that took `seconds` of the
        host's wall time, `ops.device_s` of it inside the target: probes, per-node counters,
        energy. The Python path calls it after the run; the C invoke path when its record is
        folded into a report (with the run's `inputs` and `outputs` only where the backend
        asks for every run at once, :attr:`c_invoke_eager`)."""
        us = max(0.0, (seconds - ops.device_s) * 1e6)
        probes.add("compute", ops.device_s)
        probes.add("pack", seconds - ops.device_s)
        return self._list_counters(program, index, run, ops, us)

    def _list_counters(self, program: ListProgram, index: int, run, ops: HostOps,
                       us: float) -> list[HwCounters]:
        """Per node of partition `index`: :func:`dtpu.backends.list_counters.node_counters`."""
        return list_counters.node_counters(program, index, run, ops, us,
                                           self.transport.list_trace(), self.cfg, self.energy,
                                           self.golden_program)

    def golden_program(self, program: ListProgram) -> ListProgram:
        """The same partitions compiled for the golden model at the same DDR base (so bursts
        split where the target's do): what backend=rtl runs beside the RTL, and what splits a
        board's per-list counters by node."""
        from dtpu.hw.ddr import DdrPool

        # the same core: with the vector unit where the target has it (its lists hold VECs)
        t = ModelTransport(Core(self.transport.cfg), lists=True,
                           mem=DdrPool(base=program.program.base),
                           vector_unit=self.transport.vector_unit)
        return ListProgram(t, program.partitions_in, rounding=self.rounding,
                           runtime=self.runtime, keep=program.keep, resident=program.resident)

    def _reclaim(self) -> None:
        """Before 1.2 jobs run after a command list: the list's LOADs overwrote the on-chip
        memories, so resident nodes load again and streamed pages are checked again."""
        if self._owner is None:
            return
        if self._owner is not _LISTS:
            self._owner.loaded = False
        self._owner = None
        self.onchip.forget()
        for node in self._nodes:   # streamed pages and their parameters are checked per use
            if not node.streamed and not node.pending and node.lowered.resident:
                self._run_loads(node.lowered.load_jobs, force=True)

    def invoke(self, handle: _Node, x: np.ndarray, probes: Probes) -> tuple[np.ndarray, HwCounters]:
        with self._serial:
            self._reclaim()
            start, ops = self._settle_counted(handle)
            return self._hosted(handle, ops, start, lambda: self._invoke(handle, x, probes))

    def _settle(self, handle: _Node) -> None:
        """Residency and the plan first: they may lower the node again."""
        if self.prefetch and handle.planned:
            self._plan_state(handle)

    def _invoke(self, handle: _Node, x: np.ndarray, probes: Probes) -> tuple[np.ndarray, HwCounters]:
        if (self.fast and handle.direct is not False and handle.lowered.direct is not None
                and not handle.pending):
            return self._invoke_direct(handle, x, probes)
        low = handle.lowered
        t0 = perf_counter()
        jobs = low.jobs(x)
        if self.prefetch and handle.planned:
            jobs = self._planned_jobs(handle, jobs)
        t1 = perf_counter()
        try:
            if self.fast:
                results, cnt = run_jobs_compiled(self.transport, jobs, handle.compiled, self._ops)
            else:
                results, cnt = run_jobs(self._counted(), jobs)
        except Exception:
            self.onchip.forget()   # whatever the failed job left in memory: check it again
            raise
        handle.pending = False
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
        with self._serial:
            self._reclaim()
            start, ops = self._settle_counted(handle)
            if (self.fast and handle.direct is not False and handle.lowered.direct is not None
                    and handle.lowered.direct[3] and not handle.pending):
                return self._hosted(handle, ops, start,
                                    lambda: self._invoke_direct(handle, x, probes, out))
        return self.invoke(handle, x, probes)

    def _invoke_direct(self, handle: _Node, x: np.ndarray, probes: Probes, out=None):
        """A node whose invoke is one compiled job: no Job objects, no job loop (same words,
        counters and errors as run_jobs_compiled on low.jobs(x))."""
        low = handle.lowered
        regs, act_of, label, into = low.direct
        pf = None
        if self.prefetch and handle.planned:
            st = self._plan_state()
            slot = handle.layout[0][1]
            rider = st.plan.riders.get(slot)
            regs = st.regs[slot]
            if rider is not None:
                pf = rider.words
                self.onchip.remember(rider.addr, pf)
        cj = handle.direct
        if cj is None or cj.regs is not regs or not cj.valid(self.core):
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
        try:
            res = run_compiled(self.transport, cj, words, label, out, pf, self._ops)
        except Exception:
            self.onchip.forget()
            raise
        t2 = perf_counter()
        if self._ops is not None:   # run_jobs reads the counters around the run
            add_counts(self._ops, counter_read_ops(self.cfg))
        y = low.assemble([res]) if out is None else out
        t3 = perf_counter()
        probes.add("pack", t1 - t0)
        probes.add("compute", t2 - t1)
        probes.add("unpack", t3 - t2)
        memo = handle.memo
        if memo is None or len(memo) < 7 or memo[5] is not cj or memo[6] != res.size:
            key = (cj.cycles, 0, (("wgt", cj.pf_count), ("act", cj.n_in)), (("res", res.size),))
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
        if handle.planned:
            self._nodes = [n for n in self._nodes if n is not handle]
            handle.planned = False
            self._prefetch_state = None


class ModelBackend(DeviceBackend):
    """backend=model: the device is the golden model of a contract-2.0 core (on it the jobs run
    compiled unless ``fast=False``)."""
    name = "model"


_RUN, _COMPUTE = "run", "compute"   # kinds of _Node.steps (compared by identity)
#: DeviceBackend._owner when no program ran yet but the 1.2 path's loads were skipped
_LISTS = "lists"


def _log_split(low: Lowered) -> None:
    """The K split of a node's final lowering, once (lower() logs every candidate at DEBUG)."""
    if low.k_chunks > 1:
        log.info("%s: K=%d split into %d raw chunks", low.spec.name or "node",
                 low.spec.kernel[0] * low.spec.kernel[1] * low.spec.input_shape[3], low.k_chunks)


