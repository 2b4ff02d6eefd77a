"""The Python side of a live delegate: its state, the graphs it was applied to, its kernels.

Object model (nothing per delegate lives in module globals; the registries map C handles to
objects):

* :class:`DelegateState` -- one per ``tflite_plugin_create_delegate``: parsed options, the backend
  instance, the report sink, the graphs it claimed nodes in.
* :class:`GraphState` -- one per (delegate, TfLiteContext) Prepare: the rejected nodes, the
  partition kernels and the run (= interpreter invoke) being recorded.
* :class:`PartitionKernel` -- one per delegated partition (a run of consecutive claimed nodes).
  Weights are read once at init and made resident by ``backend.prepare`` at kernel Prepare (again
  only if a node's spec changed, e.g. after ``resize_tensor_input``); activations are read and
  outputs written in place in TFLite's buffers (numpy views over ``ffi.buffer``); tensors internal
  to the partition live in buffers the kernel owns.

Timing: C stamps the kernel invoke (enter, call into Python, return) with CLOCK_MONOTONIC and
leaves the stamps in the kernel's C struct after the callback returned; Python stamps its own
entry and exit with the same clock. A report is therefore finished lazily: at the next invoke of
the same graph, when reports are read (``dtpu.last_report()``), when a kernel is freed, when the
delegate is destroyed, or at exit.
"""
from __future__ import annotations

import dataclasses
import itertools
import logging
import operator
import sys
import threading
import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from dtpu import backends
from dtpu.backends.base import Backend, HwCounters, Probes
from dtpu.board.costs import cpu_side_of_graph
from dtpu.delegate import graph as g
from dtpu.delegate.model_source import ModelSource
from dtpu.delegate.options import DelegateOptions, apply_log_level, restore_log_level
from dtpu.delegate.support import (VECTOR_CODES, Decision, analyze, constants_reason,
                                   dataflow_reason, vector_reason)
from dtpu.report import (HW_FIELDS, STORE, JsonLinesSink, NodeRecord, Report, empty_host,
                         empty_hw, empty_timing, format_table)
from dtpu.spec import ConvSpec, OpKind

log = logging.getLogger("dtpu.delegate")

LOCK = threading.RLock()          # guards the registries and report bookkeeping (not compute)
_ids = itertools.count(1)
_report_seq = itertools.count(1)
_invoke_seq = itertools.count(1)
_ZERO_TIMING = empty_timing()                  # a node record's timing before its probes
_hw_values = operator.attrgetter(*HW_FIELDS)  # a node record's hw fields from HwCounters
DELEGATES: dict[int, "DelegateState"] = {}
KERNELS: dict[int, "PartitionKernel"] = {}
_runtime_name: list[str] = []

# What the glue saw of the host runtime's structs, for tests/test_delegate_abi.py: the last
# graph read at a delegate Prepare, and data-pointer observations at kernel Prepare / Invoke.
OBSERVED: dict[str, Any] = {"nodes": {}, "tensors": {}, "input_data_at_prepare": [],
                            "internal_data_at_invoke": []}


def runtime_name() -> str:
    if not _runtime_name:
        try:
            from dtpu.tflite import runtime_version
            _runtime_name.append(runtime_version())
        except Exception:  # the host may be a C++ program with no Python TFLite
            _runtime_name.append("unknown")
    return _runtime_name[0]


# Why a node of another kind stays on the CPU (report.rejected); None: any other operator.
NOT_CLAIMABLE = {51: "already delegated (a node of another delegate)",
                 None: "not an operator the DTPU runs"}


class DelegateError(Exception):
    """A failure with a message meant for TFLite's error reporter."""


_warned_files: set[tuple[str, str]] = set()


def source_check(nodes, tensor) -> tuple[ModelSource, str | None]:
    """(the model's memory, why nothing may be claimed or None).

    The file TFLite mapped is the one most constant operands of claimable nodes lie in (a
    damaged offset may point one of them anywhere, even into another file's mapping); a file
    that dtpu.model_check refuses is one whose offsets TFLite followed without checking, so the
    delegate reads none of it: every node stays on the CPU, where TFLite runs it as it would
    without us, and one warning says why. A model from memory (``model_content``) has no file:
    each constant's range is still held to readable memory when it is read."""
    import collections

    source = ModelSource.snapshot()
    files: collections.Counter = collections.Counter()
    for node in nodes:
        if node.builtin_code not in (3, 4, 9):
            continue
        for index in node.inputs[1:]:
            try:
                info = tensor(index) if index >= 0 else None
            except IndexError:
                continue
            if info is not None and info.constant:
                path = source.model_file(info.address)
                if path is not None:
                    files[path] += 1
    if not files:
        return source, None
    path = files.most_common(1)[0][0]
    problem = source.file_problem(path)
    if problem is None:
        return source, None
    if (path, problem) not in _warned_files:
        _warned_files.add((path, problem))
        log.warning("the model file fails the delegate's checks (%s): nothing is delegated, "
                    "every node runs on the CPU", problem)
    return source, f"the model file fails the delegate's checks: {problem}"


@dataclass
class Step:
    """One claimed node inside a partition."""

    node: g.NodeInfo
    decision: Decision
    filters: np.ndarray
    bias: np.ndarray | None
    spec: ConvSpec | None = None
    handle: Any = None
    output_shape: tuple[int, ...] = ()
    record: dict | None = None    # the NodeRecord fields that do not change between invokes
    taken: bool = False           # a partition kernel owns it (and its backend handle)
    #: its tensors have no elements with the current shapes (TFLite's CPU kernels then compute
    #: nothing and nor does the kernel): it runs nowhere, its output just has its empty shape
    empty: bool = False

    @property
    def x(self) -> int:
        return self.decision.input_index

    @property
    def y(self) -> int:
        return self.decision.output_index


@dataclass
class IoSlot:
    index: int
    dtype: np.dtype
    shape: tuple[int, ...]
    nbytes: int = 0

    def __post_init__(self) -> None:
        self.nbytes = int(np.prod(self.shape, dtype=np.int64)) * self.dtype.itemsize


class DelegateState:
    def __init__(self, options: DelegateOptions) -> None:
        self._log_scope = apply_log_level(options.log_level, self)
        self.id = next(_ids)
        self.options = options
        backend_cls = backends.get(options.backend)
        try:
            self.backend: Backend = backend_cls(options.backend_options())
        except BaseException:
            restore_log_level(self._log_scope)   # no delegate: the level must not outlive it
            raise
        self.sink = JsonLinesSink(options.report_path) if options.report_path else None
        self.graphs: dict[int, GraphState] = {}
        self.preparing: GraphState | None = None
        # claimed nodes of the Prepare in progress, already prepared on the backend (see trial)
        self.pending: dict[int, tuple[g.NodeInfo, Decision, Step]] = {}
        self.logged: set[tuple] = set()
        self.history: list[Report] = []          # for report=summary, bounded below
        self.closed = False
        self.runtime: str | None = None          # the host TFLite runtime, found at first Prepare
        self.source: ModelSource | None = None   # the model's memory, snapshotted per Prepare
        # One delegate Prepare, kernel Prepare, Invoke or free at a time per delegate: kernels
        # are created inside TFLite's ReplaceNodeSubsetsWithDelegateKernels, between
        # dtpu_py_select and dtpu_py_select_done, and take their nodes from `preparing` /
        # `pending`; and the backend is one device, whose Prepare (weights, the on-chip plan)
        # must not interleave with another interpreter's invoke. Re-entrant: a thread holding it
        # through a delegate Prepare creates kernels under it.
        self.serial = threading.RLock()
        log.debug("delegate %d created: %s", self.id, options.to_dict())

    def begin_prepare(self) -> None:
        """Wait until no other thread uses this delegate, and hold it through the delegate
        Prepare (end_prepare, called by dtpu_py_select_done, which C always calls). Held across
        C code (TFLite's node replacement), so it is taken before LOCK and never while holding
        it."""
        self.serial.acquire()

    def end_prepare(self) -> None:
        try:
            self.serial.release()
        except RuntimeError:   # not held by this thread (its select never began): nothing to do
            pass

    @property
    def enabled_precisions(self):
        """The backend's lane precisions (None: any)."""
        return self.backend.enabled_precisions

    def placed(self, decision: Decision) -> Decision:
        """`decision`, unless the backend cannot place its node on the build it drives (the
        lowering's memory and geometry rules, the backend's ``placement_error``): then the node
        stays on the CPU with that reason, so that a claimed node never fails at prepare."""
        if not decision.claimed:
            return decision
        reason = self.backend.placement_error(decision.spec)
        if reason is None:
            return decision
        return Decision(spec=None, reason=f"cannot be placed on this DTPU build: {reason}")

    # -- delegate Prepare: choose the nodes --------------------------------------------------
    def detect_runtime(self, ffi, ctx) -> str | None:
        """The runtime whose interpreter calls us (see graph.host_runtime), once per delegate;
        the backend gets it so that its output stage is that interpreter's (dtpu.reference)."""
        if self.runtime is None:
            from dtpu import reference

            found, evidence = g.host_runtime(ffi, ctx)
            self.runtime = found or reference.default_runtime()
            log.debug("delegate %d: host runtime %s (%s)", self.id, self.runtime,
                      evidence if found else f"not identified: {evidence}; using the default")
            self.backend.runtime = self.runtime
        return self.runtime

    def select(self, ffi, ctx, plan_nodes: tuple[int, ...]) -> list[int]:
        started = time.perf_counter()
        runtime = self.detect_runtime(ffi, ctx)
        graph = GraphState(self, int(ffi.cast("uintptr_t", ctx)))
        old = self.graphs.get(graph.ctx)
        if old is not None:
            old.finish_run()
            old.settle()
        for key in [key for key, other in self.graphs.items() if not other.kernels]:
            del self.graphs[key]  # graphs with nothing claimed (or already freed) keep no state
        self.graphs[graph.ctx] = graph
        claimed: list[int] = []
        self.pending = {}
        cache: dict[int, g.TensorInfo] = {}

        def tensor(index: int) -> g.TensorInfo:
            if index not in cache:
                cache[index] = g.read_tensor(ffi, ctx, index)
            return cache[index]

        def output_name(node: g.NodeInfo) -> str:
            try:
                return tensor(node.outputs[0]).name if node.outputs and node.outputs[0] >= 0 else ""
            except IndexError:
                return ""

        OBSERVED["nodes"], OBSERVED["tensors"] = {}, {}
        nodes = [g.read_node(ffi, ctx, index) for index in plan_nodes]
        whole = dataflow_reason(nodes)       # a reason that keeps every node on the CPU
        self.source, damaged = source_check(nodes, tensor)
        if damaged is not None and whole is None:
            whole = damaged     # nothing of the model is read: every node stays on the CPU
        for node in nodes:
            index = node.index
            OBSERVED["nodes"][index] = (node.builtin_code, node.inputs, node.outputs)
            if node.builtin_code not in (3, 4, 9):
                # listed in the report, not logged (most graphs have many such nodes)
                reason = NOT_CLAIMABLE.get(node.builtin_code, NOT_CLAIMABLE[None])
                if node.builtin_code in VECTOR_CODES:
                    reason = vector_reason(node, self.backend.vector_unit)
                graph.rejected.append({"node": index, "op": node.op, "name": output_name(node),
                                       "reason": reason})
                continue
            if whole is not None:
                decision = Decision(spec=None, reason=whole)
            else:
                try:
                    decision = self.placed(analyze(node, tensor, self.options, runtime,
                                                   self.enabled_precisions))
                except Exception as exc:  # a bug of ours must not take the model down
                    log.warning("node %d (%s): support check failed: %r", index, node.op, exc)
                    decision = Decision(spec=None,
                                        reason=f"internal error in the support check: {exc!r}")
            step = None
            if decision.claimed:
                step, failure = self.trial(ffi, ctx, node, decision)
                if step is None:
                    decision = Decision(spec=None, reason=failure)
            if decision.claimed:
                claimed.append(index)
                self.pending[index] = (node, decision, step)
            else:
                name = output_name(node)
                graph.rejected.append({"node": index, "op": node.op, "name": name,
                                       "reason": decision.reason})
                key = (index, node.op, name, decision.reason)
                if damaged is None and key not in self.logged:   # damaged: said once above
                    self.logged.add(key)
                    log.info("node %d (%s %s) stays on the CPU: %s", index, node.op, name,
                             decision.reason)
        OBSERVED["tensors"] = {i: (t.name, t.shape, t.type) for i, t in cache.items()}
        graph.claimed = list(claimed)
        try:   # what stays on the CPU around the partitions, for the board estimate of reports
            graph.cpu_side = cpu_side_of_graph(nodes, tensor, claimed)
        except Exception as exc:  # a bug of ours must not take the model down
            log.warning("the CPU side of the graph could not be read: %r", exc)
        self.preparing = graph
        # the claimed nodes were prepared on the backend here (trial): part of the prepare time
        graph.prepare_us = (time.perf_counter() - started) * 1e6
        log.debug("delegate %d: claims %d of %d nodes", self.id, len(claimed), len(plan_nodes))
        return claimed

    def trial(self, ffi, ctx, node: g.NodeInfo, decision: Decision) -> tuple["Step | None", str]:
        """Read a claimed node's constants and prepare it on the backend now; (step, "") or
        (None, why the node stays on the CPU).

        The support rules know TFLite; only the backend knows its own limits (register field
        widths, buffer sizes of the DTPU build it drives). A node the backend would refuse at
        kernel Prepare would fail the interpreter's allocate_tensors() for a model the CPU runs
        (issue #12), so it is tried here, while it can still be left to the CPU. A backend
        that runs command lists only checks it (:meth:`Backend.check`: its graph is compiled
        at Prepare); another prepares it, and the handle is kept for the partition kernel
        (released at end_select if TFLite does not take it).
        """
        try:
            filters = g.read_constant(ffi, ctx, g.read_tensor(ffi, ctx, decision.filter_index),
                                      self.source)
            bias = None
            if decision.bias_index >= 0:
                bias = g.read_constant(ffi, ctx, g.read_tensor(ffi, ctx, decision.bias_index),
                                       self.source)
                bias = bias.reshape(-1)
        except (ValueError, IndexError) as exc:
            return None, f"constant operand unreadable: {exc}"
        why = constants_reason(decision.spec, filters, bias)
        if why is not None:
            return None, why
        step = Step(node=node, decision=decision, filters=filters, bias=bias)
        try:
            if self.backend.lists:
                # compiled with its graph at Prepare: the claim only checks, places nothing
                self.backend.check(decision.spec, filters, bias)
            else:
                step.handle = self.backend.prepare(decision.spec, filters, bias)
        except ValueError as exc:  # the backends' way of saying "not this spec" (field widths...)
            log.debug("node %d: backend %s refused it: %s", node.index, self.options.backend, exc)
            return None, f"backend {self.options.backend} cannot run it: {exc}"
        except Exception as exc:  # a broken backend: kernel Prepare retries and reports it
            log.debug("node %d: trial prepare failed: %r", node.index, exc)
            return step, ""
        step.spec = decision.spec
        return step, ""

    def end_select(self) -> None:
        self.preparing = None
        for _node, _decision, step in self.pending.values():
            if step.handle is not None and not step.taken:
                self.release(step)
        self.pending = {}

    def release(self, step: "Step") -> None:
        try:
            self.backend.release(step.handle)
        except Exception as exc:
            log.debug("release failed: %r", exc)
        step.handle = None

    # -- reports --------------------------------------------------------------------------------
    def publish(self, report: Report) -> None:
        if self.sink is not None:
            try:
                self.sink.write(report.to_dict())
            except OSError as exc:
                log.warning("could not append the report to %s: %s", self.sink.path, exc)
        if self.options.report == "summary":
            self.history.append(report)
            if len(self.history) > 10000:
                del self.history[:5000]

    def settle(self) -> None:
        for graph in list(self.graphs.values()):
            graph.settle()

    def close(self) -> None:
        if self.closed:
            return
        self.closed = True
        for graph in list(self.graphs.values()):
            graph.finish_run()
            graph.settle()
        if self.options.report == "summary" and self.history:
            sys.stderr.write(format_table(self.history))
            sys.stderr.flush()
        self.history = []
        try:
            self.backend.close()
        except Exception as exc:
            log.warning("backend %s failed to close: %r", self.options.backend, exc)
        log.debug("delegate %d destroyed", self.id)
        restore_log_level(self._log_scope)


class GraphState:
    _ids = itertools.count(1)

    def __init__(self, delegate: DelegateState, ctx: int) -> None:
        self.id = next(GraphState._ids)
        self.delegate = delegate
        self.ctx = ctx
        self.claimed: list[int] = []
        self.rejected: list[dict[str, Any]] = []
        self.cpu_side: dict[str, Any] | None = None   # dtpu.board.costs.cpu_side_of_graph
        self.kernels: list[PartitionKernel] = []
        self.current: Report | None = None
        self.ran: set[int] = set()
        self.stamps: list[list] = []          # [kernel, seq, py_enter_ns, py_exit_ns] of `current`
        self.unsettled: list[tuple[Report, list[list]]] = []
        # kernel Prepare time (us) since the last run: the next run is a first invoke (it compiles
        # jobs, loads weights) and carries it; reports keep it apart from steady-state means
        self.prepare_us: float | None = None
        # contract 2.0: the graph's partitions as one program of command lists on the backend
        # (None: not built for the current kernels; False: this graph runs job by job)
        self.program: Any = None
        self.program_index: dict[int, int] = {}    # kernel id -> partition of the program

    def drop_program(self) -> None:
        """The kernels changed (a Prepare, a free): the next invoke compiles again."""
        prog, self.program, self.program_index = self.program, None, {}
        if prog:
            try:
                self.delegate.backend.release_partitions(prog)
            except Exception as exc:
                log.debug("release_partitions failed: %r", exc)

    def compile(self) -> bool:
        """The graph's prepared partitions compiled into one program of command lists on the
        backend (contract 2.0). True: compiled (the program, or nothing of the graph runs); False:
        this graph runs job by job (the reason is logged once).

        Called when the graph's last kernel is prepared (TFLite's Prepare compiles; an invoke
        then only looks the program up), and at an invoke that finds no program (a kernel
        prepared during Invoke after a dynamic tensor)."""
        backend = self.delegate.backend
        self.drop_program()
        try:
            parts, kernels, nothing = [], [], []
            for k in self.kernels:
                if k.prepared:
                    nodes = k.list_nodes()
                    (kernels if nodes else nothing).append(k)
                    if nodes:
                        parts.append(nodes)
            if not parts:
                self.program_index = {k.id: None for k in nothing}
                return True
            self.program = backend.prepare_partitions(parts, [sorted(k.list_outputs)
                                                              for k in kernels])
        except Exception as exc:   # CmdlistError (a ValueError) names what it cannot express
            if not backend.job_streams:
                raise DelegateError(f"the partitions cannot run as command lists ({exc}) and "
                                    f"this target has no job-by-job path (no stream DMAs)") from exc
            log.info("graph %d runs job by job: its partitions are not expressed as command "
                     "lists: %s", self.id, exc)
            self.program = False
            for k in self.kernels:
                if k.prepared:
                    k.ensure_handles()
            return False
        self.program_index = {k.id: i for i, k in enumerate(kernels)}
        self.program_index.update({k.id: None for k in nothing})
        return True

    def compile_if_prepared(self) -> None:
        """After a kernel's Prepare: the graph compiled once every kernel of it is prepared
        (the backend runs command lists), its time part of the Prepare time."""
        if (not self.delegate.backend.lists or self.program is not None
                or not self.kernels or not all(k.prepared for k in self.kernels)):
            return
        started = time.perf_counter()
        if self.compile() and self.program:
            self.prepare_us = (self.prepare_us or 0.0) + (time.perf_counter() - started) * 1e6

    def list_program(self, kernel: "PartitionKernel") -> tuple[Any, int] | None:
        """(program, partition index) for `kernel` when the backend runs command lists and the
        graph's prepared kernels compile to them; None: job by job."""
        backend = self.delegate.backend
        if not backend.lists or self.program is False:
            return None
        if kernel.id in self.program_index and self.program_index[kernel.id] is None:
            return None   # nothing of it runs (empty tensors)
        if self.program is None or kernel.id not in self.program_index:
            started = time.perf_counter()
            if not self.compile() or not self.program:
                return None
            # compiled within this invoke: it is a first invoke, carrying the compilation
            us = (time.perf_counter() - started) * 1e6
            if self.current is not None:
                self.current.first = True
                self.current.prepare_us = (self.current.prepare_us or 0.0) + us
            else:
                self.prepare_us = (self.prepare_us or 0.0) + us
        index = self.program_index[kernel.id]
        return None if index is None else (self.program, index)

    def start_run(self) -> Report:
        self.finish_run()
        self.settle()
        self.current = Report(seq=next(_report_seq), delegate=self.delegate.id, graph=self.id,
                              backend=self.delegate.options.backend, runtime=runtime_name(),
                              started_unix=time.time(), rejected=list(self.rejected),
                              cpu_side=self.cpu_side, first=self.prepare_us is not None,
                              prepare_us=self.prepare_us, partitions=len(self.kernels))
        self.prepare_us = None
        self.stamps = []
        self.ran = set()
        return self.current

    def finish_run(self) -> None:
        """Close the run in progress (complete or not) and queue it for its C time stamps."""
        report, self.current = self.current, None
        if report is None:
            return
        report.complete = self.ran >= {k.id for k in self.kernels}
        report.kernels = len(self.ran)
        report.summarize_hw()
        try:
            reading = self.delegate.backend.power()
            for name in report.power:
                report.power[name] = getattr(reading, name, None)
        except Exception as exc:
            log.debug("backend power() failed: %r", exc)
        self.unsettled.append((report, self.stamps))
        self.stamps = []
        STORE.add(report)

    def settle(self) -> None:
        """Fold the C time stamps into finished reports and publish the reports that are whole.

        A stamp whose kernel invoke is still in flight (C has not written its exit time yet) keeps
        its report waiting; a kernel that was freed meanwhile gives up its stamp.
        """
        keep = []
        for report, stamps in self.unsettled:
            waiting = []
            for stamp in stamps:
                kernel, seq, py_enter, py_exit = stamp
                k = kernel.struct
                if k is not None and k.last_seq == seq:
                    report.timing_us["total"] += (k.last_exit_ns - k.last_enter_ns) / 1e3
                    report.timing_us["python"] += (py_exit - py_enter) / 1e3
                    report.timing_us["crossing"] += ((py_enter - k.last_call_ns)
                                                     + (k.last_exit_ns - py_exit)) / 1e3
                elif k is not None and k.seq == seq:
                    waiting.append(stamp)
            if waiting:
                keep.append((report, waiting))
            else:
                self.delegate.publish(report)
        self.unsettled = keep

    def kernel_invoked(self, kernel: "PartitionKernel") -> Report:
        if self.current is None or kernel.id in self.ran:
            self.start_run()
        self.ran.add(kernel.id)
        return self.current  # type: ignore[return-value]


class PartitionKernel:
    def __init__(self, state: DelegateState, ffi, lib, ctx, params, struct) -> None:
        self.id = next(_ids)
        self.state = state
        self.ffi, self.lib = ffi, lib
        self.struct = struct
        graph = state.preparing
        if graph is None or graph.ctx != int(ffi.cast("uintptr_t", ctx)):
            raise DelegateError("kernel created outside the delegate's Prepare")
        self.graph = graph
        node_ids = g.int_array(ffi, params.nodes_to_replace)
        self.outputs = set(g.int_array(ffi, params.output_tensors))
        self.steps: list[Step] = []
        for index in node_ids:
            _node, _decision, step = state.pending.get(index, (None, None, None))
            if step is None or step.taken:
                raise DelegateError(f"node {index} was not chosen by this delegate")
            step.taken = True
            self.steps.append(step)
        produced = {s.y for s in self.steps}
        self.internal_ids = produced - self.outputs
        self.io: list[IoSlot] = []
        self.internal: dict[int, np.ndarray] = {}
        self.prepared = False
        graph.kernels.append(self)

    @property
    def label(self) -> str:
        return ",".join(str(s.node.index) for s in self.steps)

    # -- kernel Prepare (may run many times; graph functions are not available) ----------------
    def prepare(self, ctx) -> None:
        started = time.perf_counter()
        self.graph.drop_program()
        self._prepare(ctx)
        graph = self.graph
        graph.prepare_us = (graph.prepare_us or 0.0) + (time.perf_counter() - started) * 1e6
        graph.compile_if_prepared()

    def _prepare(self, ctx) -> None:
        ffi = self.ffi
        shapes: dict[int, tuple[int, ...]] = {}
        infos: dict[int, g.TensorInfo] = {}

        def tensor(index: int) -> g.TensorInfo:
            if index not in infos:
                info = g.read_tensor(ffi, ctx, index)
                if index in shapes:
                    info = dataclasses.replace(info, shape=shapes[index])
                infos[index] = info
            return infos[index]

        external_inputs: list[int] = []
        for step in self.steps:
            empty_shape = _empty_output_shape(step, tensor(step.x).shape)
            step.empty = empty_shape is not None
            if step.empty:
                if step.handle is not None:
                    self.state.backend.release(step.handle)
                    step.handle, step.spec = None, None
                shapes[step.y] = empty_shape
                infos.pop(step.y, None)
                if step.x not in {s.y for s in self.steps} and step.x not in external_inputs:
                    external_inputs.append(step.x)
                if step.y in self.outputs:
                    dims = ffi.new("int[]", list(empty_shape))
                    if self.lib.dtpu_resize_tensor(ctx, step.y, dims, len(empty_shape)) != 0:
                        raise DelegateError(f"could not resize output tensor {step.y} to {empty_shape}")
                step.output_shape = empty_shape
                step.record = dict(node=step.node.index, op=step.node.op.lower(), name="",
                                   mode="empty", precision="none",
                                   input_shape=tuple(tensor(step.x).shape), output_shape=empty_shape)
                log.info("node %d (%s): its input %s has no elements: nothing to compute",
                         step.node.index, step.node.op, tuple(tensor(step.x).shape))
                continue
            decision = self.state.placed(analyze(step.node, tensor, self.state.options,
                                                 self.state.runtime, self.state.enabled_precisions))
            if not decision.claimed:
                raise DelegateError(f"node {step.node.index} ({step.node.op}) cannot run on the DTPU "
                                    f"with the current shapes: {decision.reason}")
            spec = decision.spec
            y = tensor(step.y)
            if spec.kind is OpKind.FULLY_CONNECTED:
                x_shape = tensor(step.x).shape
                keep = bool(step.node.params.get("keep_num_dims"))
                out_shape = (tuple(x_shape[:-1]) + (spec.out_channels,) if keep
                             else (spec.input_shape[0], spec.out_channels))
            else:
                out_shape = spec.output_shape
            shapes[step.y] = out_shape
            infos.pop(step.y, None)
            if step.x not in {s.y for s in self.steps} and step.x not in external_inputs:
                external_inputs.append(step.x)
            if step.y in self.outputs:
                dims = ffi.new("int[]", list(out_shape))
                if self.lib.dtpu_resize_tensor(ctx, step.y, dims, len(out_shape)) != 0:
                    raise DelegateError(f"could not resize output tensor {step.y} ({y.name}) to "
                                        f"{out_shape}")
            if spec != step.spec:
                if step.handle is not None:
                    self.state.backend.release(step.handle)
                    step.handle = None
                started = time.perf_counter()
                if self.state.backend.lists:
                    self.state.backend.check(spec, step.filters, step.bias)   # see ensure_handles
                else:
                    step.handle = self.state.backend.prepare(spec, step.filters, step.bias)
                step.spec = spec
                log.debug("node %d prepared on %s in %.1f ms: %s", step.node.index,
                          self.state.options.backend, (time.perf_counter() - started) * 1e3, spec)
            step.output_shape = out_shape
            step.record = dict(node=step.node.index, op=spec.kind.value, name=spec.name,
                               mode=spec.mode.value, precision=step.decision.precision.value,
                               input_shape=tuple(spec.input_shape), output_shape=tuple(out_shape))
        OBSERVED["input_data_at_prepare"] = [(i, tensor(i).allocation, tensor(i).has_data)
                                             for i in external_inputs]
        io_ids = external_inputs + [s.y for s in self.steps if s.y in self.outputs]
        self.io = []
        for index in io_ids:
            info = tensor(index)
            if info.dtype is None:
                raise DelegateError(f"tensor {index} ({info.name}) has unsupported type {info.type}")
            self.io.append(IoSlot(index, info.dtype, shapes.get(index, info.shape)))
        indices = ffi.new("int[]", [slot.index for slot in self.io])
        if self.lib.dtpu_kernel_set_io(self.struct, indices, len(self.io)) != 0:
            raise DelegateError("out of memory")
        self.internal = {}
        for step in self.steps:
            if step.y in self.internal_ids:
                self.internal[step.y] = np.empty(step.output_shape, dtype=tensor(step.y).dtype)
        self.views: list = [None] * len(self.io)    # (data pointer, numpy view) per io slot
        # what each invoke looks up per node, resolved once
        self.plan = [(step, step.x, step.x in self.internal, step.spec.input_shape, step.y,
                      step.y in self.internal, tuple(step.record.values()))
                     for step in self.steps if not step.empty]
        self.prepared = True
        self.observed_internal = False

    def ensure_handles(self) -> None:
        """The backend handles the job-by-job path runs: a backend that runs command lists
        prepares none at the claim or at Prepare (its graph is compiled whole), so a graph the
        compiler refuses gets them here, once."""
        for step in self.steps:
            if step.handle is None and not step.empty and step.spec is not None:
                step.handle = self.state.backend.prepare(step.spec, step.filters, step.bias)

    def list_nodes(self) -> list:
        """The partition as the command-list compiler takes it: nodes in order, each fed by an
        earlier node or by external input k (NodeIn.src = -1 - k, k in :attr:`list_inputs`)."""
        from dtpu.hw.listcompiler import NodeIn

        steps = [s for s in self.steps if not s.empty]
        self.list_steps = steps
        made = {s.y: i for i, s in enumerate(steps)}
        self.list_inputs: list[int] = []
        nodes = []
        for i, step in enumerate(steps):
            if step.x in made and made[step.x] < i:
                src = made[step.x]
            else:
                if step.x not in self.list_inputs:
                    self.list_inputs.append(step.x)
                src = -1 - self.list_inputs.index(step.x)
            nodes.append(NodeIn(step.spec, step.filters, step.bias, src=src))
        self.list_outputs = {i: s.y for i, s in enumerate(steps) if s.y in self.outputs}
        return nodes

    # -- kernel Invoke ---------------------------------------------------------------------------
    def invoke(self, ctx, py_enter: int) -> None:
        if not self.prepared:
            raise DelegateError("invoked before Prepare")
        ffi, k = self.ffi, self.struct
        if not self.observed_internal:
            self.observed_internal = True
            OBSERVED["internal_data_at_invoke"] = [
                (i, ctx.tensors[i].data.raw != ffi.NULL) for i in sorted(self.internal_ids)]
        views: dict[int, np.ndarray] = {}
        cached = self.views
        for i, slot in enumerate(self.io):
            ptr, nbytes = k.io_data[i], k.io_bytes[i]
            if slot.nbytes == 0:   # an empty tensor (TFLite may give it no buffer at all)
                views[slot.index] = np.empty(slot.shape, dtype=slot.dtype)
                continue
            if ptr == ffi.NULL or nbytes < slot.nbytes:
                raise DelegateError(f"tensor {slot.index} has no buffer of {slot.nbytes} bytes "
                                    f"(data={'NULL' if ptr == ffi.NULL else 'set'}, bytes={nbytes})")
            hit = cached[i]
            if hit is None or hit[0] != ptr:  # arena tensors may move: a view per address
                hit = cached[i] = (ptr, np.frombuffer(ffi.buffer(ptr, slot.nbytes),
                                                      dtype=slot.dtype).reshape(slot.shape))
            views[slot.index] = hit[1]
        with LOCK:
            report = self.graph.kernel_invoked(self)
            program = self.graph.list_program(self)
        if program is not None:
            self._invoke_list(program, views, report)
            path = "lists"
        else:
            self._invoke_nodes(views, report)
            path = "jobs" if hasattr(self.state.backend, "transport") else None
        if path is not None and report.path != path:
            report.path = path if report.path is None else "lists+jobs"
        seq = next(_invoke_seq)
        k.seq = seq
        stamp = [self, seq, py_enter, 0]
        with LOCK:
            self.graph.stamps.append(stamp)
            if self.graph.ran >= {kk.id for kk in self.graph.kernels}:
                self.graph.finish_run()
        stamp[3] = time.monotonic_ns()  # Python's share ends here; the rest is the way back to C

    def _invoke_list(self, program: tuple, views: dict, report: Report) -> None:
        """The whole partition as one command list (contract 2.0)."""
        prog, index = program
        probes = Probes()
        report.io_bytes[0] += sum(views[i].nbytes for i in self.list_inputs)
        report.io_bytes[1] += sum(views[y].nbytes for y in self.list_outputs.values())
        counters = self.state.backend.invoke_partition(
            prog, index, [views[i] for i in self.list_inputs],
            {n: views[y] for n, y in self.list_outputs.items()}, probes)
        # The host's phases (and a simulator's wall time) are the partition's: one doorbell runs
        # all of its nodes, so they go on the partition's record; each node keeps its own
        # device time (hw.latency_us, from its cycles), none of the host's.
        timing_total = {name: sec * 1e6 for name, sec in probes.seconds.items()}
        steps = self.list_steps
        for step, cnt in zip(steps, counters):
            host = getattr(cnt, "host", None)
            report.nodes.append(NodeRecord(*step.record.values(), dict(_ZERO_TIMING),
                                           dict(zip(HW_FIELDS, _hw_values(cnt))),
                                           empty_host() if host is None else dict(host)))
        with LOCK:
            report.partition_us.append({"nodes": [s.node.index for s in steps],
                                        "timing_us": dict(timing_total)})
            for name, us in timing_total.items():
                if name not in ("total", "crossing", "python"):
                    report.timing_us[name] = report.timing_us.get(name, 0.0) + us

    def _invoke_nodes(self, views: dict, report: Report) -> None:
        """Node by node (contract 1.2, or a backend without command lists)."""
        backend = self.state.backend
        invoke = backend.invoke
        into = backend.invoke_into   # backends that can write in place (None: the others)
        internal = self.internal
        nodes = report.nodes
        clock = time.perf_counter
        phases: dict[str, float] = {}
        for step, xi, x_internal, shape, yi, y_internal, fields in self.plan:
            x = internal[xi] if x_internal else views[xi]
            out = internal[yi] if y_internal else views[yi]
            probes = Probes()
            if x.shape != shape:
                x = x.reshape(shape)
            if step.handle is None:   # a command-list backend's graph run job by job
                self.ensure_handles()
            if into is not None:
                y, counters = into(step.handle, x, probes, out)
            else:
                y, counters = invoke(step.handle, x, probes)
            start = clock()
            if y is not out:
                y = np.asarray(y)
                if y.dtype != out.dtype or y.size != out.size:
                    raise DelegateError(f"backend {self.state.options.backend} returned {y.dtype}"
                                        f"{list(y.shape)} for output {out.dtype}{list(out.shape)}")
                np.copyto(out, y if y.shape == out.shape else y.reshape(out.shape))
            seconds = probes.seconds
            seconds["post"] = seconds.get("post", 0.0) + clock() - start
            timing = dict(_ZERO_TIMING)
            for name, s in seconds.items():
                timing[name] = timing.get(name, 0.0) + s * 1e6
                phases[name] = phases.get(name, 0.0) + s
            host = None if counters is None else getattr(counters, "host", None)
            nodes.append(NodeRecord(*fields, timing, empty_hw() if counters is None
                                    else dict(zip(HW_FIELDS, _hw_values(counters))),
                                    empty_host() if host is None else dict(host)))
        with LOCK:
            timing = report.timing_us
            for name, seconds in phases.items():
                if name not in ("total", "crossing", "python"):
                    timing[name] = timing.get(name, 0.0) + seconds * 1e6

    def _node_record(self, step: Step, probes: Probes, counters: HwCounters | None) -> NodeRecord:
        timing = empty_timing()
        for name, seconds in probes.seconds.items():
            timing[name] = timing.get(name, 0.0) + seconds * 1e6
        hw = (empty_hw() if counters is None
              else {name: getattr(counters, name, None) for name in HW_FIELDS})
        host = None if counters is None else getattr(counters, "host", None)
        return NodeRecord(**step.record, timing_us=timing, hw=hw,
                          host=empty_host() if host is None else dict(host))

    def free(self) -> None:
        with LOCK:
            if self.graph.program is not None:
                self.graph.drop_program()
            if self in self.graph.kernels:
                if self.graph.current is not None:
                    self.graph.finish_run()
                self.graph.settle()
                self.graph.kernels.remove(self)
            if not self.graph.kernels and self.state.graphs.get(self.graph.ctx) is self.graph:
                del self.state.graphs[self.graph.ctx]
            self.struct = None
        for step in self.steps:
            if step.handle is not None:
                try:
                    self.state.backend.release(step.handle)
                except Exception as exc:
                    log.debug("release failed: %r", exc)
                step.handle = None
        self.steps = []
        self.internal = {}


def _empty_output_shape(step: Step, x_shape: tuple) -> tuple | None:
    """The output shape TFLite's CPU kernel gives a node whose input has no elements (None: the
    input has elements). Convolutions: the spatial sizes of ComputeOutSize over the empty
    extents (SAME: 0; VALID over 0 is negative, which the CPU refuses too); FULLY_CONNECTED: no
    rows."""
    if not x_shape or min(x_shape) > 0:
        return None
    from dtpu.spec import output_size

    p, w = step.node.params, np.asarray(step.filters)
    if step.node.builtin_code in (3, 4):   # CONV_2D, DEPTHWISE_CONV_2D
        if len(x_shape) != 4 or w.ndim != 4:
            raise DelegateError(f"node {step.node.index}: empty input {x_shape} of rank "
                                f"{len(x_shape)}; expected NHWC")
        from dtpu.spec import Padding

        padding = Padding.SAME if int(p.get("padding", 1)) == 1 else Padding.VALID
        (sh, sw), (dh, dw) = tuple(p["stride"]), tuple(p["dilation"])
        oh = output_size(x_shape[1], w.shape[1], sh, dh, padding)
        ow = output_size(x_shape[2], w.shape[2], sw, dw, padding)
        oc = w.shape[0] if step.node.builtin_code == 3 else w.shape[3]
        if oh < 0 or ow < 0:
            raise DelegateError(f"node {step.node.index}: empty input {x_shape} gives output "
                                f"{oh}x{ow} (VALID padding over nothing)")
        return (x_shape[0], oh, ow, oc)
    units = w.shape[0]
    if p.get("keep_num_dims"):
        return tuple(x_shape[:-1]) + (units,)
    return (0, units)


def settle_all() -> None:
    """Finish every report still waiting for C time stamps (before reports are read)."""
    with LOCK:
        for state in list(DELEGATES.values()):
            state.settle()
