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

from dtpu import backends, shape_fold
from dtpu.backends.base import Backend, HwCounters, Probes
from dtpu.board.costs import cpu_side_of_graph, for_report, report_lines
from dtpu.delegate import cpath as c_path
from dtpu.delegate import folding
from dtpu.delegate import graph as g
from dtpu.delegate import partitioning, vector_claim
from dtpu.delegate.model_source import ModelSource
from dtpu.delegate.options import DelegateOptions, apply_log_level, restore_log_level
from dtpu.delegate.support import (TABLE_CODES, VECTOR_CODES, Decision, analyze, constants_reason,
                                   dataflow_reason, vector_reason)
from dtpu.report import (HW_FIELDS, STORE, BoardPricing, JsonLinesSink, NodeRecord, Report,
                         empty_host, empty_hw, empty_timing, format_table)
from dtpu.spec import ConvSpec, OpKind

log = logging.getLogger("dtpu.delegate")

LOCK = threading.RLock()          # guards the registries and report bookkeeping (not compute)
_ids = itertools.count(1)
_report_seq = itertools.count(1)
_invoke_seq = itertools.count(1)
_ZERO_TIMING = empty_timing()                  # a node record's timing before its probes
_hw_values = operator.attrgetter(*HW_FIELDS)  # a node record's hw fields from HwCounters
#: every report is priced on the PYNQ-Z2 by the board's cost model (Report.board_estimate)
PYNQ_PRICING = BoardPricing(for_report, report_lines)
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
    in_shape: tuple[int, ...] = ()    # a folded PAD's / view's input shape (kernel Prepare)
    #: "node": the DTPU computes it; "pad": a PAD folded into the convolution reading it;
    #: "view": a RESHAPE / SQUEEZE (dtpu.delegate.folding); "vec": a node of the vector unit
    #: (contract 2.1), run only in command lists; "shape": a SHAPE / STRIDED_SLICE / PACK
    #: evaluated at kernel Prepare (dtpu.shape_fold)
    kind: str = "node"
    fold: Any = None     # a convolution's folding.PadFold (it reads the PAD's input)
    pad: Any = None      # a "pad" step's folding.PadFold
    #: a "vec" step (the vector unit: ADD, SUB, MUL, pools, MEAN): its claim (the spec with
    #: the current shapes after kernel Prepare, the tensors it reads, a MEAN's axes)
    vec: Any = None
    #: a "shape" step's model constants (begin, end...), read at the claim
    shape_consts: Any = None

    @property
    def x(self) -> int:
        return self.decision.input_index

    @property
    def y(self) -> int:
        return self.decision.output_index


@dataclass
class VecList:
    """A vector node's handle on the job-by-job path: its one-node program of command lists
    (released with ``release_partitions``, not ``release``)."""

    program: Any


def release_handle(backend: Backend, handle: Any) -> None:
    if isinstance(handle, VecList):
        backend.release_partitions(handle.program)
    else:
        backend.release(handle)


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
            old.drain_c()
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
        producer = {t: node for node in nodes for t in node.outputs if t >= 0}
        readers: dict[int, list[g.NodeInfo]] = {}
        for node in nodes:
            for t in node.inputs:
                if t >= 0:
                    readers.setdefault(t, []).append(node)
        # PADs / views decided after the convolutions (index -> why not, or the fold)
        deferred: dict[int, g.NodeInfo] = {}
        pad_why: dict[int, str] = {}
        folds: dict[int, folding.PadFold] = {}     # PAD node -> its fold (conv claimed)
        for node in nodes:
            index = node.index
            OBSERVED["nodes"][index] = (node.builtin_code, node.inputs, node.outputs)
            if (whole is None and self.options.fold
                    and (node.builtin_code in folding.FOLDED_CODES
                         or node.builtin_code in shape_fold.SHAPE_CODES)):
                deferred[index] = node
                continue
            if (node.builtin_code in VECTOR_CODES and whole is None and self.backend.vector_unit
                    and self.options.ops_auto and self.options.vector):
                why = self._claim_vector(ffi, ctx, node, tensor)
                if why is None:
                    claimed.append(index)
                else:
                    graph.rejected.append({"node": index, "op": node.op,
                                           "name": output_name(node), "reason": why})
                continue
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
                    decision = analyze(node, tensor, self.options, runtime,
                                       self.enabled_precisions)
                    fold = None
                    if decision.claimed:
                        decision, fold = self._fold_pad(ffi, ctx, node, decision, producer,
                                                        readers, tensor, pad_why)
                    decision = self.placed(decision)
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
                step.fold = fold
                self.pending[index] = (node, decision, step)
                if fold is not None:
                    folds[fold.node] = fold
            else:
                name = output_name(node)
                graph.rejected.append({"node": index, "op": node.op, "name": name,
                                       "reason": decision.reason})
                key = (index, node.op, name, decision.reason)
                if damaged is None and key not in self.logged:   # damaged: said once above
                    self.logged.add(key)
                    log.info("node %d (%s %s) stays on the CPU: %s", index, node.op, name,
                             decision.reason)
        if deferred or self.options.ops_auto:
            claimed = self._join(nodes, claimed, deferred, folds, pad_why, producer, readers,
                                 tensor, graph, output_name,
                                 lambda info: g.read_constant(ffi, ctx, info, self.source))
        while True:     # giving back a vector node, a view or a shape node can strand another
            before = len(claimed)
            if self._vec_claimed(claimed):
                claimed = self._settle_vectors(nodes, claimed, graph, output_name)
            claimed = self._settle_shapes(nodes, claimed, producer, readers, graph, output_name)
            if len(claimed) == before:
                break
        graph.rejected.sort(key=lambda r: r["node"])
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

    def _fold_pad(self, ffi, ctx, node, decision, producer, readers, tensor, pad_why):
        """(decision, fold): a claimed convolution fed by a PAD it can absorb becomes the SAME
        convolution over the PAD's input (folding.pad_fold); otherwise (decision, None), the
        reason kept in `pad_why` for the PAD's report line."""
        pad = producer.get(decision.input_index)
        if (pad is None or pad.builtin_code not in folding.PAD_CODES or not self.options.fold
                or node.builtin_code not in folding.CONV_CODES):
            return decision, None
        try:
            fold = folding.pad_fold(pad, node, tensor,
                                    lambda info: g.read_constant(ffi, ctx, info, self.source),
                                    len(readers.get(pad.outputs[0], ())))
            spec = folding.folded_spec(decision.spec, fold, tensor(fold.input_index).shape)
        except (folding.NotFoldable, ValueError, IndexError) as exc:
            pad_why[pad.index] = str(exc)
            return decision, None
        return dataclasses.replace(decision, spec=spec, input_index=fold.input_index), fold

    def _join(self, nodes, claimed, deferred, folds, pad_why, producer, readers, tensor, graph,
              output_name, read_constant) -> list[int]:
        """The claimed nodes once PADs, views and FULLY_CONNECTED are settled: a folded PAD is
        claimed with its convolution; a RESHAPE / SQUEEZE, and with ops=auto a FULLY_CONNECTED,
        only when it joins other claimed nodes (on its own it would be a partition of its own:
        one more doorbell and copy, no CPU work saved). Connected through data flow over the
        claimed nodes and the views that can be claimed."""
        kept = set(claimed)
        viewable = {}
        shape_values, shape_why, shape_consts = {}, {}, {}
        if any(n.builtin_code in shape_fold.SHAPE_CODES for n in deferred.values()):
            try:
                shape_values, shape_why, shape_consts = shape_fold.fold_chains(
                    nodes, tensor, read_constant, readers)
            except Exception as exc:  # a bug of ours must not take the model down
                log.warning("shape chains: the check failed: %r", exc)
                shape_why = {i: f"internal error in the shape check: {exc!r}" for i in deferred}
        for index, node in deferred.items():
            if node.builtin_code in folding.VIEW_CODES:
                try:
                    why = folding.view_reason(node, tensor, shape_values)
                except IndexError as exc:
                    why = f"operand {exc}"
                viewable[index] = why
        by_index = {n.index: n for n in nodes}
        members = kept | {i for i, why in viewable.items() if why is None}
        parent = {i: i for i in members}

        def find(i):
            while parent[i] != i:
                parent[i] = parent[parent[i]]
                i = parent[i]
            return i

        for i in members:
            node = by_index[i]
            step = self.pending[i][2] if i in self.pending else None
            if step is not None and step.kind == "vec":
                xs = step.vec.inputs
            else:
                xs = (self.pending[i][1].input_index if i in self.pending else node.inputs[0],)
            for x in xs:
                src = producer.get(x)
                if src is not None and src.index in members:
                    parent[find(i)] = find(src.index)
        real = {}
        for i in members:
            if i in kept:
                real.setdefault(find(i), []).append(i)
        for i in sorted(kept):
            node = by_index[i]
            if (node.builtin_code == 9 and self.options.ops_auto
                    and len(real.get(find(i), ())) == 1):
                _n, _d, step = self.pending.pop(i)
                if step.handle is not None:
                    self.release(step)
                kept.discard(i)
                graph.rejected.append({"node": i, "op": node.op, "name": output_name(node),
                                       "reason": "FULLY_CONNECTED joins no other claimed node: "
                                       "alone it would be a partition of its own (ops=auto; "
                                       "ops=fully_connected claims it anyway)"})
        live = {find(i) for i in kept}
        for index, node in sorted(deferred.items()):
            reason = None
            if node.builtin_code in shape_fold.SHAPE_CODES:
                if index not in shape_consts:
                    graph.rejected.append({"node": index, "op": node.op,
                                           "name": output_name(node),
                                           "reason": "not evaluated at Prepare: "
                                           + shape_why.get(index, "not a shape chain")})
                    continue
                decision = Decision(spec=None, reason=None, input_index=node.inputs[0],
                                    output_index=node.outputs[0])
                self.pending[index] = (node, decision, Step(
                    node=node, decision=decision, filters=None, bias=None, kind="shape",
                    shape_consts=shape_consts[index]))
                kept.add(index)     # kept only while every reader is (_settle_shapes)
                continue
            if node.builtin_code in folding.PAD_CODES:
                fold = folds.get(index)
                if fold is not None:
                    kind = "pad"
                else:
                    reason = pad_why.get(index)
                    if reason is None:
                        reader = readers.get(node.outputs[0], []) if node.outputs else []
                        reason = ("the node it feeds stays on the CPU" if reader
                                  else "it feeds no node")
                    reason = f"PAD not folded: {reason}"
            else:
                why = viewable.get(index)
                kind = "view"
                if why is not None:
                    reason = f"not a view: {why}"
                elif find(index) not in live:
                    reason = "a view joining no claimed node (a partition of its own)"
            if reason is not None:
                graph.rejected.append({"node": index, "op": node.op, "name": output_name(node),
                                       "reason": reason})
                continue
            fold = folds.get(index)
            decision = Decision(spec=None, reason=None, input_index=node.inputs[0],
                                output_index=node.outputs[0])
            step = Step(node=node, decision=decision, filters=None, bias=None, kind=kind,
                        pad=fold)
            self.pending[index] = (node, decision, step)
            kept.add(index)
        return sorted(kept)

    # -- the vector unit's nodes ------------------------------------------------------------
    def _claim_vector(self, ffi, ctx, node: g.NodeInfo, tensor) -> str | None:
        """Claim vector node `node` when the target's unit computes it exactly (its step goes to
        `pending`: None), else why not. Whether it stays claimed depends on the partition it
        ends up in (:meth:`_settle_vectors`)."""
        try:
            decision = vector_claim.analyze(
                node, tensor, lambda info: g.read_constant(ffi, ctx, info, self.source),
                self.backend.vector_error, self.runtime)
        except Exception as exc:  # a bug of ours must not take the model down
            log.warning("node %d (%s): support check failed: %r", node.index, node.op, exc)
            return f"internal error in the support check: {exc!r}"
        if not decision.claimed:
            return decision.reason
        step = Step(node=node, decision=Decision(spec=None, reason=None,
                                                 input_index=decision.inputs[0],
                                                 output_index=decision.output_index),
                    filters=None, bias=None, kind="vec", vec=decision)
        self.pending[node.index] = (node, step.decision, step)
        return None

    def _vec_claimed(self, claimed) -> bool:
        return any(self.pending[i][2].kind == "vec" for i in claimed if i in self.pending)

    def _settle_vectors(self, nodes, claimed, graph, output_name) -> list[int]:
        """Keep a vector node only in a partition with a convolution: TFLite's partitions of
        the claimed nodes (:func:`partitioning.partitions`) are computed, and the vector
        nodes of any without a CONV_2D or DEPTHWISE_CONV_2D go back to the CPU, with the
        FULLY_CONNECTEDs (ops=auto) and views they alone joined; again until none is left
        (giving a node back can cut another partition). A vector node alone between CPU
        operators (EfficientNet's swish MUL before its squeeze-excite MEAN) would cost a
        delegate call, a doorbell and copies of its tensors for an element-wise pass."""
        kept = set(claimed)
        by_index = {n.index: n for n in nodes}
        while True:
            dropped = False
            for part in partitioning.partitions(nodes, kept):
                kinds = {self.pending[i][2].kind for i in part}
                codes = {by_index[i].builtin_code for i in part}
                if "vec" not in kinds or codes & {3, 4}:
                    continue
                for i in part:
                    step = self.pending[i][2]
                    code = by_index[i].builtin_code
                    if step.kind == "vec":
                        why = (f"{by_index[i].op} would join no convolution: between CPU "
                               "operators its partition would be one of its own, a delegate "
                               "call, a doorbell and copies for an element-wise pass")
                    elif step.kind == "view" or (code == 9 and self.options.ops_auto):
                        why = ("joins only vector-unit nodes that stay on the CPU: alone it "
                               "would be a partition of its own")
                    else:
                        continue
                    self.pending.pop(i)
                    if step.handle is not None:
                        self.release(step)
                    kept.discard(i)
                    graph.rejected.append({"node": i, "op": by_index[i].op,
                                           "name": output_name(by_index[i]), "reason": why})
                    dropped = True
            if not dropped:
                return sorted(kept)

    def _settle_shapes(self, nodes, claimed, producer, readers, graph, output_name) -> list[int]:
        """Keep a shape node (SHAPE, STRIDED_SLICE, PACK evaluated at Prepare) only while every
        node reading its value is claimed, and a RESHAPE whose shape such a node computes only
        while that node is: either alone would leave the CPU a node that reads what the
        partition writes and writes what it reads, cutting it in two."""
        kept = set(claimed)
        by_index = {n.index: n for n in nodes}
        while True:
            dropped = []
            for i in sorted(kept):
                step = self.pending[i][2] if i in self.pending else None
                node = by_index[i]
                if step is None:
                    continue
                if step.kind == "shape":
                    bad = [u for u in readers.get(node.outputs[0], []) if u.index not in kept]
                    if bad:
                        dropped.append((i, f"not evaluated at Prepare: its value is read by "
                                           f"{bad[0].op} node {bad[0].index}, which stays on "
                                           "the CPU"))
                elif step.kind == "view" and len(node.inputs) > 1:
                    src = producer.get(node.inputs[1])
                    if (src is not None and src.builtin_code in shape_fold.SHAPE_CODES
                            and src.index not in kept):
                        dropped.append((i, f"not a view: its shape is computed by {src.op} "
                                           f"node {src.index}, which stays on the CPU"))
            for i, why in dropped:
                step = self.pending.pop(i)[2]
                if step.handle is not None:
                    self.release(step)
                kept.discard(i)
                graph.rejected.append({"node": i, "op": by_index[i].op,
                                       "name": output_name(by_index[i]), "reason": why})
            if not dropped:
                return sorted(kept)

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

    def close(self, at_exit: bool = False) -> None:
        """`at_exit`: the process is ending; with report=none nobody can read the reports of
        runs C still keeps, so they are dropped rather than folded (up to the store's size per
        partition: seconds of Python on the board)."""
        if self.closed:
            return
        self.closed = True
        for graph in list(self.graphs.values()):
            if at_exit and self.options.report == "none":
                for k in graph.kernels:
                    if k.cpath is not None and k.cpath.lazy:
                        k.cpath.take()
            graph.drain_c()          # C runs may belong to the run in progress
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
        self._draining = False

    def drop_program(self) -> None:
        """The kernels changed (a Prepare, a free): the next invoke compiles again."""
        self.drain_c()
        for k in self.kernels:
            k.close_c()
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
                              prepare_us=self.prepare_us, partitions=len(self.kernels),
                              pricing=PYNQ_PRICING)
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

    def drain_c(self, kernel: "PartitionKernel | None" = None, views: dict | None = None) -> None:
        """Fold the runs the C invoke path recorded for this graph's kernels into reports, in
        the order they ran (before anything else is recorded: a Python-path invoke, a report
        read, a Prepare). `views`: `kernel`'s tensors, for its latest run (an eager drain from
        inside that invoke)."""
        if self._draining:
            return
        with LOCK:
            self._draining = True
            try:
                self._drain_c(kernel, views)
            finally:
                self._draining = False

    def _drain_c(self, kernel: "PartitionKernel | None", views: dict | None) -> None:
        runs = []
        dropped = 0
        for k in self.kernels:
            if k.cpath is not None and k.cpath.pending():
                records, gone = k.cpath.take()
                runs += [(rec.seq, k, rec) for rec in records]
                dropped = max(dropped, gone)
        if dropped:
            # runs a lazy C path dropped unread: their reports would have left the report
            # store already; the reports that are built keep the numbers they would have had
            # (one report per dropped run of the graph's busiest partition)
            self.finish_run()
            skip_reports(dropped)
        if not runs:
            return
        runs.sort(key=operator.itemgetter(0))
        last = runs[-1][2] if kernel is not None else None
        failures = []
        for _seq, k, rec in runs:
            try:
                k.fold_c(rec, views if k is kernel and rec is last else None)
            except DelegateError as exc:     # every run is folded; the first failure is raised
                failures.append(exc)
        if failures:
            raise failures[0]

    def settle(self) -> None:
        """Fold the C time stamps into finished reports and publish the reports that are whole.

        A stamp whose kernel invoke is still in flight (C has not written its exit time yet) keeps
        its report waiting; a kernel that was freed meanwhile gives up its stamp.
        """
        self.drain_c()
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
        # a view's output is its input read as another shape: readers read the root tensor
        self.view_of = {s.y: s.x for s in self.steps if s.kind == "view"}
        for s in self.steps:
            if s.fold is not None and s.fold.node not in node_ids:
                raise DelegateError(f"node {s.node.index} folds PAD node {s.fold.node}, which "
                                    "TFLite put in another partition")
        # folded PADs, views and shape values that are outputs of the partition: written by
        # the host from their source after the DTPU ran (a tensor the graph reads outside it)
        self.materialize = [s for s in self.steps if s.kind in ("pad", "view", "shape")
                            and s.y in self.outputs]
        self.shape_values: dict[int, np.ndarray] = {}   # "shape" steps' values (Prepare)
        #: a real node's output -> the view leaving the partition that the command list
        #: writes instead of it (the same bytes: tensors are dense), so that no host copy
        #: stands between the run and the C invoke path (Prepare)
        self.redirect: dict[int, int] = {}
        self.zero_fill: list[int] = []
        self.io: list[IoSlot] = []
        self.internal: dict[int, np.ndarray] = {}
        self.prepared = False
        self.cpath: c_path.PartitionCPath | None = None   # its C invoke path, once armed
        self._c_refused: Any = None                    # the program the C path refused
        graph.kernels.append(self)

    def root(self, t: int) -> int:
        """The tensor whose memory holds `t` (`t` itself unless it is a view's output)."""
        while t in self.view_of:
            t = self.view_of[t]
        return t

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
        real = {s.y for s in self.steps if s.kind in ("node", "vec")}
        self.shape_values = {}
        self.zero_fill: list[int] = []    # outputs of empty-input MEANs, zeros (_prepare_empty_vec)
        for step in self.steps:
            if step.kind == "vec":
                self._prepare_vec(ctx, step, tensor, shapes, infos, real, external_inputs)
                continue
            if step.kind != "node":
                self._prepare_fold(ctx, step, tensor, shapes, infos)
                continue
            empty_shape = _empty_output_shape(step, tensor(step.x).shape)
            step.empty = empty_shape is not None
            if step.empty:
                if step.handle is not None:
                    self.state.backend.release(step.handle)
                    step.handle, step.spec = None, None
                shapes[step.y] = empty_shape
                infos.pop(step.y, None)
                if self.root(step.x) not in real and self.root(step.x) not in external_inputs:
                    external_inputs.append(self.root(step.x))
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
            if step.fold is not None:
                try:
                    spec = folding.folded_spec(spec, step.fold, tensor(step.fold.input_index).shape)
                except ValueError as exc:
                    raise DelegateError(f"node {step.node.index} ({step.node.op}) cannot take PAD "
                                        f"node {step.fold.node} with the current shapes: "
                                        f"{exc}") from None
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
            if self.root(step.x) not in real and self.root(step.x) not in external_inputs:
                external_inputs.append(self.root(step.x))
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
        self.redirect = {}
        for step in self.materialize:
            source = self.root(step.x)
            if (step.kind == "view" and source in real and source not in self.outputs
                    and source not in self.redirect):
                self.redirect[source] = step.y   # VWW's head: conv -> view -> SOFTMAX
        self.needed = set()     # real outputs the host needs to write materialized tensors
        for step in self.materialize:
            if step.kind == "shape" or step.y in self.redirect.values():
                continue         # written from its value / by the list itself
            source = self.root(step.x)
            (self.needed if source in real else set()).add(source)
            if source not in real and source not in external_inputs:
                external_inputs.append(source)
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
            if step.y in self.internal_ids and step.kind in ("node", "vec"):
                self.internal[step.y] = np.empty(step.output_shape, dtype=tensor(step.y).dtype)
        self.views: list = [None] * len(self.io)    # (data pointer, numpy view) per io slot
        # what each invoke looks up per node, resolved once
        self.plan = [(step, self.root(step.x), self.root(step.x) in self.internal,
                      step.spec.input_shape if step.kind == "node" else None, step.y,
                      step.y in self.internal, tuple(step.record.values()))
                     for step in self.steps if not step.empty and step.kind in ("node", "vec")]
        self.prepared = True
        self.observed_internal = False

    def _prepare_vec(self, ctx, step: Step, tensor, shapes: dict, infos: dict, real: set,
                     external_inputs: list) -> None:
        """A vector-unit node's spec with the current shapes (the claim's rules again, as
        :func:`analyze` for a convolution), its output shape set on TFLite's tensor."""
        claim = step.vec
        if self._prepare_empty_vec(ctx, step, tensor, shapes, infos):
            return
        decision = vector_claim.analyze(step.node, tensor, claim.kept_constant,
                                        self.state.backend.vector_error, self.state.runtime,
                                        check_output=False)
        if not decision.claimed:
            raise DelegateError(f"node {step.node.index} ({step.node.op}) cannot run on the DTPU "
                                f"with the current shapes: {decision.reason}")
        spec = decision.spec
        out = tuple(spec.output_shape)
        if spec.table is not None or spec.op == "CONCATENATION":
            # the tensor's own rank (the spec's shapes are padded to rank 4)
            out = out[4 - len(tensor(decision.inputs[0]).shape):]
        shapes[step.y] = out
        infos.pop(step.y, None)
        for x in decision.inputs:
            root = self.root(x)
            if root not in real and root not in external_inputs:
                external_inputs.append(root)
        if step.y in self.outputs:
            dims = self.ffi.new("int[]", list(out))
            if self.lib.dtpu_resize_tensor(ctx, step.y, dims, len(out)) != 0:
                raise DelegateError(f"could not resize output tensor {step.y} ({spec.name}) to "
                                    f"{out}")
        if step.handle is not None and decision.spec != claim.spec:   # its job-path list
            release_handle(self.state.backend, step.handle)
            step.handle = None
        step.vec = decision
        step.output_shape = out
        dtype = np.dtype(spec.dtype).name
        step.record = dict(node=step.node.index, op=spec.op.lower(), name=spec.name, mode=dtype,
                           precision=dtype, input_shape=tuple(spec.a_shape), output_shape=out)

    def _prepare_empty_vec(self, ctx, step: Step, tensor, shapes: dict, infos: dict) -> bool:
        """A vector node whose input has no elements (a shape the CPU computed at run time, as in
        damaged files): nothing runs, its output gets the shape TFLite's kernel gives it, and a
        MEAN over empty H and W, whose output has elements, is written as zeros by the host, as
        TFLite 2.14's integer MEAN leaves it (tests/test_model_fuzz.py's found crashes).
        Returns whether the node is such a node."""
        ins = [tuple(tensor(t).shape) for t in step.node.inputs
               if t >= 0 and not tensor(t).constant]
        step.empty = False
        if not ins or all(min(shape, default=1) > 0 for shape in ins):
            return False
        code, p = step.node.builtin_code, step.node.params or {}
        if code == 2 and any(min(shape, default=1) > 0 for shape in ins):
            return False    # a CONCATENATION with elements to copy: the claim's rules decide
        x = ins[0]
        if code in (0, 18, 41):                     # ADD, MUL, SUB: the broadcast shape
            out = tuple(np.broadcast_shapes(*ins))
        elif code in TABLE_CODES:                   # element-wise: the input's shape
            out = tuple(x)
        elif code == vector_claim.RESIZE_NEAREST:   # N x size x C
            out = (x[0], *(int(v) for v in np.asarray(step.vec.axes).reshape(-1)), x[-1])
        elif code == 2:                             # CONCATENATION along the last axis
            out = tuple(x[:-1]) + (sum(shape[-1] for shape in ins),)
        elif code in (1, 17):                       # pools: ComputeOutSize over the extents
            from dtpu.spec import Padding, output_size
            padding = Padding.SAME if int(p.get("padding", 1)) == 1 else Padding.VALID
            (fh, fw), (sh, sw) = tuple(p["filter"]), tuple(p["stride"])
            oh, ow = output_size(x[1], fh, sh, 1, padding), output_size(x[2], fw, sw, 1, padding)
            if oh < 0 or ow < 0:
                raise DelegateError(f"node {step.node.index} ({step.node.op}): empty input {x} "
                                    f"gives output {oh}x{ow} (VALID padding over nothing)")
            out = (x[0], oh, ow, x[3])
        else:                                       # MEAN over H and W
            out = (x[0], 1, 1, x[-1]) if p.get("keep_dims") else (x[0], x[-1])
        step.empty = True
        if step.handle is not None:
            release_handle(self.state.backend, step.handle)
            step.handle = None
        shapes[step.y] = out
        infos.pop(step.y, None)
        if step.y in self.outputs:
            dims = self.ffi.new("int[]", list(out))
            if self.lib.dtpu_resize_tensor(ctx, step.y, dims, len(out)) != 0:
                raise DelegateError(f"could not resize output tensor {step.y} to {out}")
        if min(out, default=1) > 0:
            self.zero_fill.append(step.y)
        step.output_shape = out
        step.record = dict(node=step.node.index, op=step.node.op.lower(), name="", mode="empty",
                           precision="none", input_shape=x, output_shape=out)
        log.info("node %d (%s): its input %s has no elements: nothing to compute",
                 step.node.index, step.node.op, x)
        return True

    def _prepare_fold(self, ctx, step: Step, tensor, shapes: dict, infos: dict) -> None:
        """A folded PAD's or a view's output shape (nothing runs for it; the convolution
        reading a PAD reads its input, a view's readers its root); a shape node's value, from
        the current shapes (a view whose shape it computes takes it)."""
        x_shape = tuple(tensor(step.x).shape)
        node = step.node
        if step.kind == "pad":
            out = tuple(d + a + b for d, (a, b) in zip(x_shape, step.pad.pads))
        elif step.kind == "shape":
            consts = step.shape_consts
            try:
                value = shape_fold.evaluate(
                    node, lambda t: self.shape_values.get(t, consts.get(t)),
                    lambda t: tuple(tensor(t).shape), tensor(step.y).type)
            except shape_fold.NotFolded as exc:
                raise DelegateError(f"node {node.index} ({node.op}) cannot be evaluated with "
                                    f"the current shapes: {exc}") from None
            self.shape_values[step.y] = value
            out = tuple(value.shape)
        elif len(node.inputs) > 1 and node.inputs[1] in self.shape_values:
            try:
                out = shape_fold.reshaped(self.shape_values[node.inputs[1]],
                                          int(np.prod(x_shape, dtype=np.int64)))
            except shape_fold.NotFolded as exc:
                raise DelegateError(f"node {node.index} ({node.op}): {x_shape} cannot take "
                                    f"the shape computed with the current shapes: {exc}") from None
        else:
            out = tuple(tensor(step.y).shape)
            if int(np.prod(out, dtype=np.int64)) != int(np.prod(x_shape, dtype=np.int64)):
                raise DelegateError(f"node {step.node.index} ({step.node.op}): {x_shape} -> "
                                    f"{out} changes the element count with the current shapes")
        shapes[step.y] = out
        infos.pop(step.y, None)
        if step.y in self.outputs:
            dims = self.ffi.new("int[]", list(out))
            if self.lib.dtpu_resize_tensor(ctx, step.y, dims, len(out)) != 0:
                raise DelegateError(f"could not resize output tensor {step.y} to {out}")
        step.in_shape = x_shape
        step.output_shape = out

    def _write_materialized(self, views: dict, listed: bool = False) -> None:
        """Folded PADs and views that leave the partition, written from their sources;
        `listed`: the run was the command list, which wrote the redirected views itself."""
        redirected = set(self.redirect.values()) if listed else set()
        for step in self.materialize:
            if step.y in redirected:
                continue
            if step.kind == "shape":
                np.copyto(views[step.y], self.shape_values[step.y].reshape(views[step.y].shape))
                continue
            source = self.root(step.x)
            src = self.internal[source] if source in self.internal else views[source]
            src = src.reshape(step.in_shape)
            out = views[step.y]
            if step.kind == "pad":
                np.copyto(out, np.pad(src, step.pad.pads, constant_values=step.pad.fill))
            else:
                np.copyto(out, src.reshape(out.shape))

    def ensure_handles(self) -> None:
        """The backend handles the job-by-job path runs: a backend that runs command lists
        prepares none at the claim or at Prepare (its graph is compiled whole), so a graph the
        compiler refuses gets them here, once. A vector node, which only command lists drive,
        becomes a list of its own (one VEC descriptor: a doorbell per node, as every node costs
        on this path)."""
        from dtpu.hw.listcompiler import NodeIn

        backend = self.state.backend
        for step in self.steps:
            if step.handle is not None or step.empty:
                continue
            if step.kind == "vec":
                spec = step.vec.spec
                node = NodeIn(None, None, None, src=-1, vec=spec,
                              src2=-2 if len(step.vec.inputs) > 1 else None)
                if spec.op == "CONCATENATION":
                    node.src2, node.srcs = None, tuple(-1 - k for k in range(len(step.vec.inputs)))
                step.handle = VecList(backend.prepare_partitions([[node]], [[0]]))
            elif step.spec is not None:
                step.handle = backend.prepare(step.spec, step.filters, step.bias)

    def _invoke_vec(self, step: Step, views: dict, probes: Probes, out: np.ndarray):
        """A vector node on the job-by-job path: its own one-node command list."""
        spec = step.vec.spec
        shapes = spec.activation_shapes()
        inputs = []
        for t, shape in zip(step.vec.inputs, shapes):
            root = self.root(t)
            x = self.internal[root] if root in self.internal else views[root]
            inputs.append(x.reshape(shape))
        [counters] = self.state.backend.invoke_partition(step.handle.program, 0, inputs,
                                                         {0: out}, probes)
        return out, counters

    def list_nodes(self) -> list:
        """The partition as the command-list compiler takes it: nodes in order, each fed by an
        earlier node or by external input k (NodeIn.src = -1 - k, k in :attr:`list_inputs`)."""
        from dtpu.hw.listcompiler import NodeIn

        steps = [s for s in self.steps if not s.empty and s.kind in ("node", "vec")]
        self.list_steps = steps
        made = {s.y: i for i, s in enumerate(steps)}
        self.list_inputs: list[int] = []
        nodes = []

        def source(t: int, i: int) -> int:
            x = self.root(t)
            if x in made and made[x] < i:
                return made[x]
            if x not in self.list_inputs:
                self.list_inputs.append(x)
            return -1 - self.list_inputs.index(x)

        for i, step in enumerate(steps):
            if step.kind == "vec" and step.vec.spec.op == "CONCATENATION":
                xs = step.vec.inputs
                nodes.append(NodeIn(None, None, None, src=source(xs[0], i), vec=step.vec.spec,
                                    srcs=tuple(source(x, i) for x in xs)))
            elif step.kind == "vec":
                xs = step.vec.inputs
                nodes.append(NodeIn(None, None, None, src=source(xs[0], i), vec=step.vec.spec,
                                    src2=source(xs[1], i) if len(xs) > 1 else None))
            else:
                nodes.append(NodeIn(step.spec, step.filters, step.bias, src=source(step.x, i)))
        self.list_outputs = {i: self.redirect.get(s.y, s.y) for i, s in enumerate(steps)
                             if s.y in self.outputs or s.y in self.needed
                             or s.y in self.redirect}
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
        views = self._views()
        for t in self.zero_fill:       # before the run: nodes of the partition may read them
            (self.internal[t] if t in self.internal else views[t]).fill(0)
        with LOCK:
            self.graph.drain_c()     # the C path's runs come first in the reports
            report = self.graph.kernel_invoked(self)
            program = self.graph.list_program(self)
        if program is not None:
            self._invoke_list(program, views, report)
            path = "lists"
            self._arm_c(program)
        else:
            self._invoke_nodes(views, report)
            path = "jobs" if hasattr(self.state.backend, "transport") else None
        if self.materialize:
            self._write_materialized(views, listed=program is not None)
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

    def _views(self) -> dict[int, np.ndarray]:
        """numpy views of the kernel's tensors at the pointers C gathered for this invoke."""
        ffi, k = self.ffi, self.struct
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
        return views

    # -- the C invoke path (delegate/dtpu_cpath.c, dtpu/delegate/cpath.py) -------------------
    def _arm_c(self, program: tuple) -> None:
        """After a list invoke on the Python path: let the next ones run in C (the
        `invoke` option, a backend that offers it), expecting this run's counters."""
        prog, index = program
        backend = self.state.backend
        if self.state.options.invoke != "c" or not backend.c_invoke or prog.last_run is None:
            return
        redirected = set(self.redirect.values())
        if self.zero_fill or any(s.y not in redirected for s in self.materialize):
            return              # tensors written by the host after the run
        if self.cpath is not None and self.cpath.program is not prog:
            self.close_c()
        if self.cpath is None:
            if self._c_refused is prog:
                return
            eager = backend.c_invoke_eager or self.state.sink is not None
            # report=none: runs stay in C until a report is read (dtpu.last_report / reports)
            lazy = self.state.options.report == "none"
            self.cpath = c_path.build(self.ffi, self.lib, self, prog, index, backend, eager,
                                      lazy, self.state.options.clock_mhz)
            if self.cpath is None:
                self._c_refused = prog
                return
        self.cpath.arm(prog.last_run)

    def close_c(self) -> None:
        """Back to the Python path (a new program, a Prepare, a free): runs C recorded must
        have been folded already (GraphState.drain_c)."""
        if self.cpath is not None:
            self.cpath.close()
            self.cpath = None

    def drain_c(self) -> None:
        """From C, inside this kernel's invoke: fold the recorded runs (this one with its
        tensors, for a backend that checks each run); a run that failed in C raises its
        error."""
        views = self._views() if self.state.backend.c_invoke_eager else None
        self.graph.drain_c(self, views)

    def fold_c(self, rec: c_path.Record, views: dict | None) -> None:
        """One C run into the graph's reports, as :meth:`invoke` would have recorded it: the
        same counters and host record (counted in C), the C path's own times."""
        from dtpu.driver.hostops import HostOps
        from dtpu.driver.lists import ListRun

        cp = self.cpath
        graph = self.graph
        report = graph.kernel_invoked(self)
        report.timing_us["total"] += (rec.exit_ns - rec.enter_ns) / 1e3
        failed = None
        if rec.status:
            failed = cp.error()
        else:
            ops = HostOps(rec.reads, rec.writes, rec.doorbells, 0, rec.device_ns / 1e9)
            probes = Probes()
            inputs = outputs = None
            if views is not None:
                inputs = [views[i] for i in self.list_inputs]
                outputs = {n: views[y] for n, y in self.list_outputs.items()}
            report.io_bytes[0] += cp.io_bytes[0]
            report.io_bytes[1] += cp.io_bytes[1]
            try:
                counters = self.state.backend.finish_partition(
                    cp.program, cp.index, ListRun(rec.cycles, rec.idle), ops,
                    (rec.end_ns - rec.start_ns) / 1e9, probes, inputs, outputs)
            except Exception as exc:
                failed = str(exc)
            else:
                self._record_list(report, probes, counters)
                if report.path != "lists":
                    report.path = "lists" if report.path is None else "lists+jobs"
                if (rec.cycles, rec.idle) != cp.expected:
                    cp.arm(ListRun(rec.cycles, rec.idle))
        if graph.ran >= {kk.id for kk in graph.kernels}:
            graph.finish_run()
        if failed is not None:
            raise DelegateError(failed)

    def _invoke_list(self, program: tuple, views: dict, report: Report) -> None:
        """The whole partition as one command list (contract 2.0)."""
        prog, index = program
        probes = Probes()
        ins = [views[i] if i in views else self.internal[i] for i in self.list_inputs]
        report.io_bytes[0] += sum(x.nbytes for x in ins)
        outs = {n: views[y] if y in views else self.internal[y]
                for n, y in self.list_outputs.items()}
        report.io_bytes[1] += sum(a.nbytes for a in outs.values())
        counters = self.state.backend.invoke_partition(
            prog, index, ins, outs, probes)
        self._record_list(report, probes, counters)

    def _record_list(self, report: Report, probes: Probes, counters: list) -> None:
        """A partition's run in the report: its node records, its phases."""
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
            out = internal[yi] if y_internal else views[yi]
            probes = Probes()
            if step.handle is None:   # a command-list backend's graph run job by job
                self.ensure_handles()
            if step.kind == "vec":
                y, counters = self._invoke_vec(step, views, probes, out)
            else:
                x = internal[xi] if x_internal else views[xi]
                if x.shape != shape:
                    x = x.reshape(shape)
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
            self.graph.drain_c()
            self.close_c()
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
                    release_handle(self.state.backend, step.handle)
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


def skip_reports(n: int) -> None:
    """Number `n` reports that were never built (runs a lazy C path dropped unread)."""
    global _report_seq
    with LOCK:
        _report_seq = itertools.count(next(_report_seq) + n)


def settle_all() -> None:
    """Finish every report still waiting for C time stamps or C runs (before reports are
    read). Runs of the C invoke path are folded under the library's core lock (taken before
    LOCK, as C takes it before entering Python), so none is being recorded meanwhile."""
    lib = c_path.LIB
    locked = c_path.waiting(lib)
    if locked:
        lib.dtpu_core_lock()
    try:
        with LOCK:
            for state in list(DELEGATES.values()):
                state.settle()
    finally:
        if locked:
            lib.dtpu_core_unlock()
