"""``dtpu estimate MODEL``: the whole invoke of any model on the PYNQ-Z2, on both contracts (and
the command lists both from Python and on the delegate's C invoke path), against TFLite alone on the board's Cortex-A9 (an estimate: :mod:`dtpu.board.costs`).

The counts come from running the model's partitions through the golden model:

* job by job (contract 1.2, the ``CONTRACT=1`` overlay): backend=model on its protocol path
  over a transport that counts register reads and writes, CTRL.STARTs, DMA transfers and the
  bytes they move, and the host's layout steps (im2col windows, chunk transposes, results put
  back) with the bytes they write; steady state (the second pass), stall-free job cycles.
* command lists (contract 2.0, the default overlay): the same partitions compiled once
  (:class:`dtpu.driver.lists.ListProgram` on the model's 2.0 register window), the driver's
  host record (dtpu.driver.hostops), cycles with the memory model of contract.json
  ``contract2.memory_model``, plus the copies into and out of the partitions' DDR buffers. The
  C invoke path runs the same lists with the same register accesses: only their prices differ
  (:func:`dtpu.board.costs.host_ms_c`).

Partitions are the chains of convolutions :func:`dtpu.tflite_model.partitions_of` places (split
at every other operator, as the delegate's are on a target without the vector unit, the int16
overlay; the default int8 overlay's one-kick partitions are :func:`before_after`'s); the
operators between them are priced as TFLite's kernels on the A9 (:func:`cpu_side`). benchmarks/bench_board_estimate.py prints this
module's table for three reference models; docs/board_estimate.md reads it.
"""
from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from dtpu import reference, shape_fold, tflite_model
from dtpu.backends.base import Probes
from dtpu.backends.model import ModelBackend
from dtpu.board.costs import COSTS, LABEL, costs, row
from dtpu.driver.hostops import HostOps
from dtpu.driver.lists import ListProgram
from dtpu.driver.model_transport import ModelTransport
from dtpu.driver.transport import Transport
from dtpu.hw.core import Core
from dtpu.tflite_model import partitions_of

log = logging.getLogger(__name__)


class ByteCountingTransport(Transport):
    """What the job-by-job driver asks of the device, counted with the bytes each DMA transfer
    moves (the delegate's own host record counts transfers, not bytes); `device_s` is the time
    spent inside it."""

    def __init__(self, inner: ModelTransport) -> None:
        self.inner = inner
        self.cfg = inner.cfg
        self.reset_counts()

    def reset_counts(self) -> None:
        self.reads = self.writes = self.dma = self.starts = 0
        self.dma_send_bytes = self.dma_recv_bytes = 0   # bytes the transfers move (64-bit words)
        self.device_s = 0.0

    def _timed(self, fn, *args):
        t0 = time.perf_counter()
        try:
            return fn(*args)
        finally:
            self.device_s += time.perf_counter() - t0

    def write_reg(self, offset, value):
        self.writes += 1
        if offset == self.cfg.REG_CTRL and value & self.cfg.reg("CTRL").field("START").mask:
            self.starts += 1
        return self._timed(self.inner.write_reg, offset, value)

    def read_reg(self, offset):
        self.reads += 1
        return self._timed(self.inner.read_reg, offset)

    def send(self, stream, words):
        self.dma += 1
        self.dma_send_bytes += 8 * int(np.asarray(words).size)
        return self._timed(self.inner.send, stream, words)

    def recv(self, stream, n):
        self.dma += 1
        got = self._timed(self.inner.recv, stream, n)
        self.dma_recv_bytes += 8 * int(np.asarray(got).size)
        return got

    def wait_done(self, timeout_s):
        return self._timed(self.inner.wait_done, timeout_s)

    def expect(self, stream, n):
        return self._timed(self.inner.expect, stream, n)

    def pending_input(self, timeout_s=0.0):
        return self._timed(self.inner.pending_input, timeout_s)


class ProtocolBackend(ModelBackend):
    """backend=model on the protocol path (a non-ModelTransport turns the compiled shortcut
    off), every register access and DMA transfer counted."""

    def _open_transport(self):
        return ByteCountingTransport(ModelTransport(Core(self.cfg)))


def count_transforms(handle, counter: list) -> None:
    """Wrap a node's plan and assembly to count the host's layout steps: a compute job whose
    activation words are not the input tensor's own bytes, a node whose output is not its
    result words as they came; counter[0] counts them, counter[1] (when present) the bytes
    they write."""
    def counted_plan(plan):
        def run(x):
            jobs = plan(x)
            made = [j.send["act"] for j in jobs if "act" in j.send
                    and not np.shares_memory(j.send["act"], x)]
            counter[0] += len(made)
            if len(counter) > 1:
                counter[1] += sum(int(np.asarray(a).nbytes) for a in made)
            return jobs
        return run

    def counted_assemble(assemble):
        def run(results):
            y = assemble(results)
            if not (len(results) == 1 and np.shares_memory(y, results[0])):
                counter[0] += 1
                if len(counter) > 1:
                    counter[1] += int(np.asarray(y).nbytes)
            return y
        return run
    handle.lowered.wrap(counted_plan, counted_assemble)


def random_input(spec, seed):
    dt = reference.io_dtypes(spec)[0]
    if not np.issubdtype(dt, np.integer):
        return np.random.default_rng(seed).uniform(-1, 1, spec.input_shape).astype(dt)
    info = np.iinfo(dt)
    return np.random.default_rng(seed).integers(info.min, info.max + 1, spec.input_shape).astype(dt)


def jobs_counts(parts):
    """(host ops dict, stall-free cycles, outputs) of one steady-state invoke, job by job.
    The dict also holds `dma_send_bytes` / `dma_recv_bytes` (bytes the DMA transfers moved to
    and from the device) and `transform_bytes` (bytes the host's layout steps wrote)."""
    be = ProtocolBackend({})
    t = be.transport
    handles = [[be.prepare(n.spec, n.filters, n.bias) for n in p] for p in parts]
    transforms = [0, 0]
    for hs in handles:
        for h in hs:
            count_transforms(h, transforms)
    res = None
    for _ in range(2):
        t.reset_counts()
        transforms[0] = transforms[1] = 0
        cycles, outs = 0, []
        t0 = time.perf_counter()
        for k, (p, hs) in enumerate(zip(parts, handles)):
            z = random_input(p[0].spec, k)
            for n, h in zip(p, hs):
                z, cnt = be.invoke(h, z.reshape(n.spec.input_shape), Probes())
                cycles += cnt.cycles
            outs.append(z)
        wall = time.perf_counter() - t0
        # every job's CTRL.START is a kick of its own: "starts" stands beside 2.0's doorbells
        res = (dict(mmio_reads=t.reads, mmio_writes=t.writes, starts=t.starts, dma_starts=t.dma,
                    transforms=transforms[0], us=1e6 * (wall - t.device_s),
                    dma_send_bytes=t.dma_send_bytes, dma_recv_bytes=t.dma_recv_bytes,
                    transform_bytes=transforms[1]), cycles, outs)
    return res


def list_counts(parts):
    """The partitions on a 2.0 model core as the delegate drives them (steady state: the
    second pass): (host record as a dict, cycles, stall-free compute cycles, idle cycles, the
    outputs, the ListProgram). A list has no host layout steps: `transforms` is 0."""
    t = ModelTransport(lists=True)
    lp = ListProgram(t, parts)
    res = None
    for _ in range(2):
        tot, us = HostOps(), 0.0
        cycles = compute = idle = 0
        outs = []
        for k, p in enumerate(parts):
            part = lp.program.partitions[k]
            x = random_input(p[0].spec, k)
            y = np.empty(part.output.shape, part.output.dtype)
            ops = HostOps()
            t0 = time.perf_counter()
            run = lp.invoke(k, [x], {len(part.outputs) - 1: y}, ops=ops)
            us += 1e6 * (time.perf_counter() - t0 - ops.device_s)
            tot.add(ops)
            cycles += run.cycles
            compute += t.list_window.last.compute_cycles
            idle += run.idle_cycles
            outs.append(y)
        host = dict(mmio_reads=tot.mmio_reads, mmio_writes=tot.mmio_writes, doorbells=tot.doorbells,
                    dma_starts=tot.dma_starts, transforms=0, us=us)
        res = (host, cycles, compute, idle, outs, lp)
    return res


def _nbytes(t) -> int:
    return int(np.prod(t.shape, dtype=np.int64)) * (t.dtype.itemsize if t.dtype is not None else 1)


@dataclass(frozen=True)
class FileTensor:
    """A model file's tensor as the delegate sees it at Prepare (dtpu.delegate.graph.TensorInfo's
    fields that dtpu.shape_fold reads): shapes as stored, no dynamic tensors."""

    index: int
    name: str
    type: str
    shape: tuple[int, ...]
    constant: bool
    nbytes: int
    dtype: np.dtype | None
    scale: tuple[float, ...]
    zero_point: tuple[int, ...]
    allocation: int = 0


@dataclass(frozen=True)
class FileNode:
    """A model file's operator as the delegate sees it (dtpu.delegate.graph.NodeInfo's fields)."""

    index: int
    builtin_code: int
    op: str
    inputs: tuple[int, ...]
    outputs: tuple[int, ...]
    params: dict[str, Any] | None


def _file_tensor(t) -> FileTensor:
    q = t.quantization
    return FileTensor(index=t.index, name=t.name, type=t.type_name.lower(), shape=tuple(t.shape),
                      constant=t.is_constant, nbytes=_nbytes(t), dtype=t.dtype,
                      scale=() if q is None else tuple(float(v) for v in q.scale),
                      zero_point=() if q is None else tuple(int(v) for v in q.zero_point))


def _file_node(op) -> FileNode:
    names = tflite_model.BUILTIN_OPERATORS
    code = names.index(op.opcode) if op.opcode in names else -1
    return FileNode(op.index, code, op.opcode, tuple(op.inputs), tuple(op.outputs),
                    dict(op.options))


def folded_views(model, parts) -> set[int]:
    """The operators the delegate claims beside the partitions' convolutions without running
    them (fold=on): RESHAPE / SQUEEZE views joining a partition, and the SHAPE ->
    STRIDED_SLICE -> PACK chains computing their shapes, which it evaluates at Prepare. The
    same rules as the delegate's claim (dtpu.shape_fold's fold_chains and view_reason, its
    join over data flow and its settling of the chains): TFLite on the board runs none of them.
    `parts`: the partitions of :func:`dtpu.tflite_model.partitions_of`."""
    sg = model.main
    cache: dict[int, FileTensor] = {}

    def tensor(i: int) -> FileTensor:
        if i not in cache:
            cache[i] = _file_tensor(sg.tensors[i])
        return cache[i]

    nodes = [_file_node(op) for op in sg.operators]
    producer, readers = {}, {}
    for n in nodes:
        for t in n.outputs:
            producer[t] = n
        for t in set(n.inputs):
            readers.setdefault(t, []).append(n)
    values, _why, chains = shape_fold.fold_chains(
        nodes, tensor, lambda info: np.asarray(sg.tensors[info.index].data), readers)
    names = {n.spec.name for p in parts for n in p if n.spec is not None}
    folds = tflite_model.folded_pads(model)
    placed = {op.index for op in sg.operators if op.opcode in tflite_model.CONV_OPCODES
              and sg.tensor(op.outputs[0]).name in names}
    views = {n.index for n in nodes if n.op in ("RESHAPE", "SQUEEZE")
             and shape_fold.view_reason(n, tensor, values) is None}
    # a view joins a partition through data flow over claimed nodes and views (the delegate's
    # _join): one connected with no convolution would be a partition of its own
    members = placed | views
    parent = {i: i for i in members}

    def find(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    for i in members:
        x = folds[i].inputs[0] if i in folds else nodes[i].inputs[0]
        src = producer.get(x)
        if src is not None and src.index in members:
            parent[find(i)] = find(src.index)
    live = {find(i) for i in placed}
    views = {i for i in views if find(i) in live}
    chains = set(chains)
    while True:   # the delegate's _settle_shapes: a chain and its RESHAPE are claimed together
        drop = {i for i in chains if any(u.index not in chains | views
                                         for u in readers.get(nodes[i].outputs[0], []))}
        drop |= {i for i in views if len(nodes[i].inputs) > 1
                 and (src := producer.get(nodes[i].inputs[1])) is not None
                 and src.builtin_code in shape_fold.SHAPE_CODES and src.index not in chains}
        if not drop:
            return views | chains
        chains -= drop
        views -= drop


def cpu_side(path: Path, parts) -> dict:
    """What TFLite runs on the CPU around the partitions: the non-convolution operators (count and
    bytes of their activation inputs and outputs) and the convolutions no partition holds. The
    PADs folded into convolutions, the views and the shape chains the delegate claims
    (:func:`folded_views`) are counted apart, under `folded`, as the delegate's report counts
    them (dtpu.board.costs.cpu_side_of_graph)."""
    model = tflite_model.load(path)
    sg = model.main
    folded = {pad.index for pad in tflite_model.folded_pads(model).values()}
    folded |= folded_views(model, parts)
    placed = sum(n.spec.macs for p in parts for n in p)
    conv_macs, ops, nbytes, names = 0, 0, 0, {}
    folded_side = dict(ops=0, bytes=0)
    for op in sg.operators:
        if op.index in folded:   # claimed, not run: docs/partitions.md
            folded_side["ops"] += 1
            folded_side["bytes"] += sum(_nbytes(t) for t in map(sg.tensor, op.inputs + op.outputs)
                                        if t is not None and not t.is_constant)
            continue
        if op.opcode in tflite_model.CONV_OPCODES:
            try:
                conv_macs += tflite_model.conv_spec(sg, op)[0].macs
            except ValueError as e:
                log.warning("operator %d (%s): MACs unknown (%s)", op.index, op.opcode, e)
            continue
        ops += 1
        names[op.opcode] = names.get(op.opcode, 0) + 1
        for i in list(op.inputs) + list(op.outputs):
            t = sg.tensor(i)
            if t is not None and not t.is_constant:
                nbytes += _nbytes(t)
    return dict(ops=ops, bytes=nbytes, opcodes=names, model_macs=max(conv_macs, placed),
                placed_macs=placed, cpu_conv_macs=max(conv_macs - placed, 0), folded=folded_side)


def counts(parts, jobs: bool = True) -> tuple[dict | None, int, dict, int, bool]:
    """(1.2 ops, 1.2 stall-free cycles, 2.0 ops, 2.0 cycles with the memory model, outputs
    equal); without `jobs` the 1.2 side is not counted (None, 0) and nothing is compared."""
    new, cycles, _compute, _idle, new_outs, lp = list_counts(parts)
    parts20 = lp.program.partitions
    ops20 = dict(new, copy_in_bytes=sum(p.input.nbytes for p in parts20),
                 copy_out_bytes=sum(p.output.nbytes for p in parts20), partitions=len(parts20),
                 nodes=sum(len(p) for p in parts))
    if not jobs:
        return None, 0, ops20, cycles, True
    old, old_cycles, old_outs = jobs_counts(parts)
    exact = all(np.array_equal(a.reshape(-1), b.reshape(-1)) for a, b in zip(old_outs, new_outs))
    return dict(old, partitions=len(parts)), old_cycles, ops20, cycles, exact


#: the delegate's option `ops` (its default: auto) -> TFLite opcodes
OPCODES = {"conv2d": "CONV_2D", "depthwise_conv2d": "DEPTHWISE_CONV_2D",
           "fully_connected": "FULLY_CONNECTED"}


#: the rows an estimate can hold: job by job (Python), command lists from Python, and command
#: lists on the C invoke path (the delegate's default, invoke=c)
PATHS = ("1.2", "2.0", "c")


def estimate(name: str, path: Path, c: dict | None = None, ops: str = "auto",
             paths: tuple[str, ...] = PATHS) -> dict:
    """The estimate of one model file: its partitions (of the op kinds `ops` may claim, the
    delegate's option, default as the delegate's: `auto` places a FULLY_CONNECTED only in a
    partition with other nodes), the CPU side, one row per path of `paths` (the 1.2 counts,
    the slow part, only when "1.2" is asked for)."""
    c = costs() if c is None else c
    t0 = time.perf_counter()
    path = Path(path)
    auto = ops.strip().lower() == "auto"
    kinds = list(OPCODES) if auto else [k.strip() for k in ops.split(",") if k.strip()]
    bad = [k for k in kinds if k not in OPCODES]
    if bad:
        raise ValueError(f"ops {ops!r}: {', '.join(bad)} unknown; expected auto or a comma list "
                         f"of {', '.join(OPCODES)}")
    parts = partitions_of(path, opcodes=tuple(OPCODES[k] for k in kinds))
    if auto:   # a FULLY_CONNECTED alone would be a partition of its own: the CPU keeps it
        parts = [p for p in parts
                 if not (len(p) == 1 and p[0].spec.kind.value == "fully_connected")]
    side = cpu_side(path, parts)
    bad = [p for p in paths if p not in PATHS]
    if bad:
        raise ValueError(f"paths {', '.join(bad)} unknown; expected some of {', '.join(PATHS)}")
    rows = []
    if parts:
        old, old_cycles, new, cycles, exact = counts(parts, jobs="1.2" in paths)
        for p in paths:
            rows.append(row(p, old_cycles, old, side, len(parts), c) if p == "1.2"
                        else row(p, cycles, new, side, len(parts), c))
    else:
        exact = True
    return dict(model=name, file=str(path), partitions=len(parts),
                nodes=sum(len(p) for p in parts), cpu_side=side, bit_exact=exact,
                seconds=time.perf_counter() - t0, rows=rows)


#: how the tables name each path
LABELS = {"1.2": "1.2 job by job", "2.0": "2.0 command list (Python)",
          "c": "2.0 command list (C path)"}


#: the board builds :func:`before_after` compares (dtpu.board.design.BOARD_BUILDS), each with the
#: delegate options that make backend=model's partitions and cycles that build's (run under the
#: build's own HwConfig, :func:`dtpu.board.design.board_config`: its lanes, requantization
#: variants and the vector unit's requantizing lanes): the int16 overlay has no vector unit (its
#: operators on the CPU, `vector=off`), the int8 overlay, the default, has it
ONE_KICK_BUILDS = (("int16", {"vector": "off"}), ("int8", {}))


def _steady_report(path: Path, build: str, options: dict, invokes: int = 2):
    """The delegate's steady-state report of `path` on backend=model as board build `build`
    runs it (its HwConfig, :func:`dtpu.board.design.board_config`, and `options`)."""
    import dtpu
    from dtpu.board.design import board_config

    with board_config(build):
        interp = dtpu.make_interpreter(path, {"backend": "model", **options})
        interp.allocate_tensors()
        for seed in range(invokes):
            rng = np.random.default_rng(seed)
            for d in interp.get_input_details():
                info = np.iinfo(d["dtype"])
                interp.set_tensor(d["index"], rng.integers(info.min, info.max + 1, d["shape"])
                                  .astype(d["dtype"]))
            interp.invoke()
        report = dtpu.last_report()
        del interp
    return report


def before_after(name: str, path: Path, c: dict | None = None, invokes: int = 2) -> dict:
    """The whole invoke on the PYNQ-Z2 of `path` as the delegate runs it on each board build of
    :data:`ONE_KICK_BUILDS`, before (the int16 overlay's cut partitions) and after (the default
    int8 overlay's one kick), priced from the delegate's own steady-state report
    (:func:`dtpu.board.costs.for_report`, the C invoke path, default options).

    Why the delegate and not :func:`estimate`'s chains of convolutions: the one-kick partition
    holds the vector unit's operators, which only the delegate places. backend=model with the
    build's options under the build's HwConfig gives the emulated board's partitions, host
    counts and cycles for that bitstream (`bitstream=int16` / `int8`, the default: equal,
    tests/test_doc_claims.py)."""
    from dtpu.board.costs import for_report
    from dtpu.board.design import BOARD_BUILDS

    c = costs() if c is None else c
    rows = []
    for build, options in ONE_KICK_BUILDS:
        report = _steady_report(path, build, options, invokes)
        est = for_report(report, c)
        if est is None:
            raise RuntimeError(f"{name}: the report of build {build} cannot be priced "
                               f"(path {report.path!r})")
        rows.append(dict(build=build, summary=BOARD_BUILDS[build].summary,
                         partitions=report.kernels,
                         cpu_ops=dict(est["cpu_side"]["opcodes"]), **{k: est[k] for k in (
                             "path", "cycles", "device_ms", "host_ms", "cpu_ms", "whole_ms",
                             "tflite_ms", "speedup")},
                         ops={k: report.host[k] for k in ("mmio_reads", "mmio_writes",
                                                          "doorbells")}))
    return dict(model=name, file=str(path), rows=rows)


def on_default_build(name: str, path: Path, c: dict | None = None, invokes: int = 2) -> dict:
    """:func:`estimate`'s result for the C path, but as the delegate runs `path` on the
    overlay's default board build (dtpu.board.design.DEFAULT_BOARD_BUILD, its options in
    :data:`ONE_KICK_BUILDS`): the partitions it places (one kick on the int8 build), priced
    from its steady-state report. Why: the table a board user reads first
    (dtpu.board.compare) must be the bitstream they load, not chains of convolutions."""
    from dtpu.board.costs import for_report
    from dtpu.board.design import DEFAULT_BOARD_BUILD

    c = costs() if c is None else c
    options = dict(ONE_KICK_BUILDS)[DEFAULT_BOARD_BUILD]
    report = _steady_report(path, DEFAULT_BOARD_BUILD, options, invokes)
    est = for_report(report, c)
    if est is None or est["path"] != "c":
        raise RuntimeError(f"{name}: the default build's report cannot be priced on the C path "
                           f"(path {report.path!r})")
    return dict(model=name, file=str(path), partitions=report.kernels, nodes=len(report.nodes),
                cpu_side=est["cpu_side"], bit_exact=None, build=DEFAULT_BOARD_BUILD, rows=[est])


def format_before_after(results: list[dict]) -> str:
    """docs/board_estimate.md's table "Before and after: one kick" (one line per model and
    build)."""
    out = ["| model | overlay | partitions | reads / writes / doorbells | CPU operators "
           "| device ms | host ms | CPU-side ms | whole invoke ms | TFLite A9 ms | speedup |",
           "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for r in results:
        for w in r["rows"]:
            o = w["ops"]
            ops = ", ".join(f"{k} x{v}" for k, v in sorted(w["cpu_ops"].items())) or "none"
            out.append(f"| {r['model']} | {w['build']}: {w['summary']} | {w['partitions']} "
                       f"| {o['mmio_reads']} / {o['mmio_writes']} / {o['doorbells']} | {ops} "
                       f"| {w['device_ms']:.2f} | {w['host_ms']:.2f} | {w['cpu_ms']:.2f} "
                       f"| {w['whole_ms']:.2f} | {w['tflite_ms']:.1f} | {w['speedup']:.2f}x |")
    return "\n".join(out) + "\n"


def format_results(results: list[dict], c: dict, sources: bool = True) -> str:
    """The markdown table of docs/board_estimate.md, the host split, the CPU side, the costs."""
    out = [f"## Whole invoke on the PYNQ-Z2 (estimate): device at {c['fabric_mhz']:.0f} MHz + "
           "host on the 650 MHz Cortex-A9", "", f"[{LABEL}]", "",
           "| model | path | device ms | reads | writes | STARTs / doorbells | DMA (MB) "
           "| transforms (MB) | host ms | CPU-side ms | whole invoke ms | TFLite A9 ms | speedup |",
           "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for r in results:
        if not r["rows"]:
            out.append(f"| {r['model']} | no convolution the DTPU takes: all on the CPU | - | - | "
                       f"- | - | - | - | - | - | - | - | - |")
        for w in r["rows"]:
            o = w["ops"]
            kicks = o.get("starts", o.get("doorbells"))
            dma = (f"{o['dma_starts']} ({(o['dma_send_bytes'] + o['dma_recv_bytes']) / 1e6:.2f})"
                   if w["path"] == "1.2" else
                   f"0 (copies {(o['copy_in_bytes'] + o['copy_out_bytes']) / 1e6:.2f})")
            tr = (f"{o['transforms']} ({o['transform_bytes'] / 1e6:.2f})" if w["path"] == "1.2"
                  else "0")
            label = LABELS[w["path"]]
            out.append(
                f"| {r['model']} | {label} | {w['device_ms']:.2f} | {o['mmio_reads']:,} "
                f"| {o['mmio_writes']:,} | {kicks:,} | {dma} | {tr} | {w['host_ms']:.1f} "
                f"| {w['cpu_ms']:.1f} | {w['whole_ms']:.1f} | {w['tflite_ms']:.1f} "
                f"({w['tflite_slow_ms']:.0f}) | {w['speedup']:.2f}x ({w['speedup_slow']:.1f}x) |")
    out += ["", "TFLite A9 ms: the model's MACs at tflite_a9_gmacs (scaled from a published A7 "
            "figure), in parentheses at a9_measured_gmacs (TinyMaix measured on a Zynq A9: the slow "
            "end); speedup = TFLite / whole invoke, likewise. 2.0 is the default overlay's "
            "contract; 1.2 the CONTRACT=1 fallback.", "",
            "host ms split (registers / DMA / transforms / copies / completion; the C path also "
            "code / Python folding its runs into reports):"]
    for r in results:
        for w in r["rows"]:
            h = w["host"]
            extra = (f" / {h['code']:.3f} / {h['python']:.2f}" if w["path"] == "c" else "")
            out.append(f"  {r['model']}, {w['path']}: {h['registers']:.1f} / {h['dma']:.1f} / "
                       f"{h['transforms']:.1f} / {h['copies']:.2f} / {h['completion']:.2f}{extra}")
    out += ["", "CPU side (both paths and the TFLite baseline): operators outside the partitions"]
    for r in results:
        s = r["cpu_side"]
        ops = ", ".join(f"{k} x{v}" for k, v in sorted(s["opcodes"].items()))
        out.append(f"  {r['model']}: {r['nodes']} nodes in {r['partitions']} partitions, "
                   f"{s['model_macs'] / 1e6:.1f} M MACs ({s['cpu_conv_macs'] / 1e6:.1f} M on the "
                   f"CPU); {s['ops']} CPU operators ({ops}), {s['bytes'] / 1e6:.2f} MB touched; "
                   f"outputs 1.2 = 2.0: {r['bit_exact']}; counted in {r['seconds']:.1f} s")
    if sources:
        out += ["", "costs (kind: source):"]
        for k, v in COSTS.items():
            note = "" if c[k] == float(v["value"]) else f" (overridden: {c[k]:g})"
            out.append(f"  {k} = {v['value']:g} {v['unit']}{note} [{v['kind']}]: {v['source']}")
    return "\n".join(out) + "\n"


__all__ = ["estimate", "format_results", "before_after", "format_before_after", "ONE_KICK_BUILDS",
           "on_default_build",
           "jobs_counts", "list_counts", "cpu_side", "counts", "ByteCountingTransport", "ProtocolBackend", "count_transforms", "folded_views"]
