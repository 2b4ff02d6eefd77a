"""A delegated partition at work: :class:`PartitionKernel`, one per run of consecutive claimed
nodes TFLite replaced with one kernel. Its Prepare (again only when a node's shapes changed)
evaluates shapes, folds PADs and views, lays out the partition's own tensors and hands the
nodes to the backend; its invoke runs them, as command lists (in C once the partition is
armed, :mod:`dtpu.delegate.cpath`) or node by node, and records each node into the run's
report. The claim that chose the nodes and the graph's state are :mod:`dtpu.delegate.runtime`'s.
"""
from __future__ import annotations

import dataclasses
import itertools
import logging
import operator
import time
from dataclasses import dataclass
from typing import Any

import numpy as np

from dtpu import shape_fold
from dtpu.backends.base import Backend, HwCounters, Probes
from dtpu.delegate import cpath as c_path
from dtpu.delegate import folding
from dtpu.delegate import graph as g
from dtpu.delegate import vector_claim
from dtpu.delegate.registry import LOCK, OBSERVED, DelegateError, Step, ids
from dtpu.delegate.support import TABLE_CODES, analyze
from dtpu.report import HW_FIELDS, NodeRecord, Report, empty_host, empty_hw, empty_timing
from dtpu.spec import OpKind

log = logging.getLogger("dtpu.delegate")

_invoke_seq = itertools.count(1)
_ZERO_TIMING = empty_timing()                  # a node record's timing before its probes
_hw_values = operator.attrgetter(*HW_FIELDS)  # a node record's hw fields from HwCounters


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


class PartitionKernel:
    def __init__(self, state: "DelegateState", ffi, lib, ctx, params, struct) -> None:
        self.id = next(ids)
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

    def _set_shape(self, ctx, index: int, shape: tuple[int, ...], shapes: dict,
                   infos: dict) -> None:
        """A step's output shape as later steps of this Prepare see it, and the interpreter's
        tensor resized to it when it is a partition output (TFLite allocates from that)."""
        shapes[index] = shape
        infos.pop(index, None)
        if index in self.outputs:
            dims = self.ffi.new("int[]", list(shape))
            if self.lib.dtpu_resize_tensor(ctx, index, dims, len(shape)) != 0:
                raise DelegateError(f"could not resize output tensor {index} to {shape}")

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

        def settle(step, out_shape: tuple[int, ...]) -> None:
            """What a node's output shape decides in either branch (empty input or not): its
            shape (`_set_shape`) and its input as an external input unless a step writes it."""
            self._set_shape(ctx, step.y, out_shape, shapes, infos)
            if self.root(step.x) not in real and self.root(step.x) not in external_inputs:
                external_inputs.append(self.root(step.x))
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
                settle(step, empty_shape)
                step.output_shape = empty_shape
                step.record = dict(node=step.node.index, op=step.node.op.lower(), name="",
                                   mode="empty", precision="none",
                                   input_shape=tuple(tensor(step.x).shape), output_shape=empty_shape)
                log.info("node %d (%s): its input %s has no elements: nothing to compute",
                         step.node.index, step.node.op, tuple(tensor(step.x).shape))
                continue
            decision = self.state.placed(analyze(step.node, tensor, self.state.options,
                                                 self.state.runtime, self.state.enabled_precisions,
                                                 self.state.backend.rq_variants))
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
            if spec.kind is OpKind.FULLY_CONNECTED:
                x_shape = tensor(step.x).shape
                keep = bool(step.node.params.get("keep_num_dims"))
                out_shape = (tuple(x_shape[:-1]) + (spec.out_channels,) if keep
                             else (spec.input_shape[0], spec.out_channels))
            else:
                out_shape = spec.output_shape
            settle(step, out_shape)
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
        self._set_shape(ctx, step.y, out, shapes, infos)
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
        self._set_shape(ctx, step.y, out, shapes, infos)
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
