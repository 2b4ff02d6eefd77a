"""The Python side of a live delegate: its state, the graphs it was applied to, its kernels.

Object model (nothing per delegate lives in module globals; the registries map C handles to
objects):

* :class:`DelegateState` -- one per ``tflite_plugin_create_delegate``: parsed options, the backend
  instance, the report sink, the graphs it claimed nodes in.
* :class:`GraphState` -- one per (delegate, TfLiteContext) Prepare: the rejected nodes, the
  partition kernels and the run (= interpreter invoke) being recorded.
* :class:`~dtpu.delegate.partition_kernel.PartitionKernel` -- one per delegated partition (a run
  of consecutive claimed nodes), in its own module (what the claim hands it: a
  :class:`~dtpu.delegate.registry.Step` per node; the registries, their lock and the delegate's
  error are :mod:`dtpu.delegate.registry`'s, reached through this module by the glue). Weights are read once at init and made resident by ``backend.prepare`` at kernel Prepare (again
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
from typing import Any

from dtpu import backends, shape_fold
from dtpu.backends.base import Backend
from dtpu.board.costs import cpu_side_of_graph, for_report, report_lines
from dtpu.delegate import cpath as c_path
from dtpu.delegate import folding
from dtpu.delegate import graph as g
from dtpu.delegate import partitioning, vector_claim
from dtpu.delegate.partition_kernel import PartitionKernel
from dtpu.delegate.model_source import ModelSource
from dtpu.delegate.options import DelegateOptions, apply_log_level, restore_log_level
# (PartitionKernel, KERNELS and DelegateError are also the glue's and the tests' runtime.* names)
from dtpu.delegate.registry import DELEGATES, KERNELS, LOCK, OBSERVED, DelegateError, Step, ids
from dtpu.delegate.support import (VECTOR_CODES, Decision, analyze, constants_reason,
                                   dataflow_reason, vector_reason)
from dtpu.report import STORE, BoardPricing, JsonLinesSink, Report, format_table

log = logging.getLogger("dtpu.delegate")

_report_seq = itertools.count(1)
#: every report is priced on the PYNQ-Z2 by the board's cost model (Report.board_estimate)
PYNQ_PRICING = BoardPricing(for_report, report_lines)
_runtime_name: list[str] = []


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


class DelegateState:
    def __init__(self, options: DelegateOptions) -> None:
        self._log_scope = apply_log_level(options.log_level, self)
        self.id = next(ids)
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
                                       self.enabled_precisions, self.backend.rq_variants)
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
        """After a kernel's Prepare, once every kernel of the graph is prepared: the graph
        compiled (the backend runs command lists) or, job by job, the backend settled
        (:meth:`dtpu.backends.base.Backend.settle`: residency and the prefetch plan), its time
        part of the Prepare time: the first invoke is not special."""
        backend = self.delegate.backend
        if not self.kernels or not all(k.prepared for k in self.kernels):
            return
        started = time.perf_counter()
        if backend.lists and self.program is None:
            if not self.compile() or not self.program:
                if self.program is not False:
                    return
                backend.settle()   # refused as lists: job by job, settled like the others
        elif not backend.lists or self.program is False:
            backend.settle()       # job by job: residency and the prefetch plan chosen now
        else:
            return
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
