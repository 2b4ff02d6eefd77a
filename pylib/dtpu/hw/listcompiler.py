"""The command-list compiler (contract 2.0, host side, at prepare): a graph's partitions become
one DDR image of command lists, weight and parameter words and tensor buffers (docs/contract2.md).

The nodes are lowered with :func:`dtpu.hw.lower.lower` exactly as backend=model lowers them (same
register values, weight and parameter words), placed in on-chip memory (resident, first come, or
streamed through two alternating scratch halves) and turned into descriptors (LOAD, REGS, RUN,
POST, END). The layout work the host did between 1.2 jobs (im2col windows, depthwise channel
chunks, depth-multiplier repeats, result tiles put back in place, split-K sums and their
requantization) becomes fields of the RUN descriptors, done by the load and store units, and
POST descriptors run by the post unit.

Not in this slice (refused with :class:`~dtpu.hw.listformat.CmdlistError` naming the node):
forced precisions other than the node's natural one (bf16 lanes, the wide RAW precisions).
"""
from __future__ import annotations

import logging
from dataclasses import dataclass, field

import numpy as np

from dtpu.hw.config import HwConfig, ceil_div, get_config, out_lanes
from dtpu.hw.dw_format import dw_weight_words
from dtpu.hw.listformat import DEFAULT_DDR_BASE, CmdlistError, Format
from dtpu.hw.lower import Job, dw_geometry, footprint, lower, precision_of
from dtpu.hw.placement import SCRATCH_FRACTION, list_halves, list_scratch
from dtpu.hw.residency import first_come
from dtpu.hw.vec_lower import VecSpec, lower_copy, lower_vec, resize_copies
from dtpu.precision import Precision
from dtpu.spec import ConvSpec, OpKind

log = logging.getLogger(__name__)

_U64 = np.dtype("<u8")


_ALIGN = 64   # tensors and lists start on a cache line (and on a 16-beat burst boundary / 2)


@dataclass
class NodeIn:
    """One node of a partition: its spec, constants and where its input comes from: the index
    of an earlier node of the partition, or ``-1 - k`` for the partition's input k (-1: the
    first; a delegated partition may read several tensors from outside it).

    A vector-unit node (contract 2.1) has `vec` instead of `spec`; an ADD, SUB or MUL reads
    its second operand from `src2` (the same numbering); a table operator's table is a constant
    of its VecSpec, written into the image at compile time. A CONCATENATION reads its inputs
    from `srcs` (the same numbering, one per input)."""

    spec: ConvSpec | None
    filters: np.ndarray | None
    bias: np.ndarray | None
    src: int = -1
    vec: VecSpec | None = None
    src2: int | None = None
    srcs: tuple | None = None

    @property
    def name(self) -> str:
        return (self.vec.name if self.vec is not None else self.spec.name) or ""

    def sources(self) -> list[tuple[int, tuple, np.dtype]]:
        """(src, shape, dtype) of each tensor the node reads."""
        if self.vec is None:
            return [(self.src, tuple(self.spec.input_shape), _io_dtype(self.spec))]
        dt = np.dtype(self.vec.dtype)
        shapes = self.vec.activation_shapes()
        if self.vec.op == "CONCATENATION":
            if self.srcs is None or len(self.srcs) != len(shapes):
                raise CmdlistError(f"CONCATENATION {self.vec.name!r}: {len(shapes)} inputs, "
                                   f"srcs {self.srcs}")
            return [(src, shape, dt) for src, shape in zip(self.srcs, shapes)]
        if len(shapes) > 1 and self.src2 is None:
            raise CmdlistError(f"{self.vec.op} {self.vec.name!r}: no second operand (src2)")
        return [(src, shape, dt) for src, shape in zip((self.src, self.src2), shapes)]

    def output(self) -> tuple[tuple, np.dtype]:
        if self.vec is None:
            return tuple(self.spec.output_shape), _io_dtype(self.spec)
        return tuple(self.vec.output_shape), self.vec.output_dtype

    @property
    def macs(self) -> int:
        return self.spec.macs if self.vec is None else 0


@dataclass
class Buffer:
    """A tensor in DDR: byte address, shape, element dtype."""

    addr: int
    shape: tuple
    dtype: np.dtype
    #: a channel slice of a wider tensor at `addr` (a CONCATENATION's input written in place):
    #: (its first channel, the wider tensor's channels per pixel); None: dense at `addr`
    slice: tuple | None = None

    @property
    def nbytes(self) -> int:
        return int(np.prod(self.shape)) * self.dtype.itemsize


@dataclass
class Partition:
    """A compiled partition: its command list and its tensors."""

    list_addr: int
    list_words: int
    input: Buffer                   # inputs[0]
    output: Buffer
    outputs: list[Buffer]           # every node's output (the last is `output`)
    macs: int
    compute_cycles: int = 0         # stall-free sum of its jobs (filled by the first run)
    jobs: int = 0
    inputs: list[Buffer] = field(default_factory=list)   # by k of NodeIn.src = -1 - k
    node_macs: list[int] = field(default_factory=list)
    node_prec: list = field(default_factory=list)    # each node's lane precision (energy model)
    #: per node, the documented case in which the Timeline's cycles are not proven equal to the
    #: RTL's (:func:`timing_caveat`), "" where none applies
    node_caveats: list[str] = field(default_factory=list)


@dataclass
class Program:
    """Everything prepare writes into DDR once: lists, weights, parameters, tensor buffers."""

    cfg: HwConfig
    base: int
    image: np.ndarray               # the DDR image (uint8), index = address - base
    prologue_addr: int              # the list that loads the resident weights (run once)
    prologue_words: int
    partitions: list[Partition]
    resident_words: int = 0
    streamed_nodes: int = 0
    #: bytes of the arena the partitions' intermediate tensors share (liveness-planned)
    arena_bytes: int = 0

    @property
    def size(self) -> int:
        return int(self.image.size)


class DdrImage:
    """The DDR image being laid out: aligned blocks appended at increasing addresses."""

    def __init__(self, base: int) -> None:
        self.base = base
        self.chunks: list[tuple[int, bytes]] = []
        self.top = base

    def alloc(self, nbytes: int, data: bytes | None = None) -> int:
        addr = self.top
        self.top = addr + ceil_div(max(nbytes, 1), _ALIGN) * _ALIGN
        if data is not None:
            self.chunks.append((addr, data))
        return addr

    def build(self) -> np.ndarray:
        img = np.zeros(self.top - self.base, np.uint8)
        for addr, data in self.chunks:
            img[addr - self.base:addr - self.base + len(data)] = np.frombuffer(data, np.uint8)
        return img


class ListBuilder:
    """One command list's descriptor words, appended descriptor by descriptor in the format of
    the build (LOAD, REGS, RUN, VEC ...): what :func:`compile_program` emits, and what tests and
    testbenches use to hand-build a list."""

    def __init__(self, fmt: Format) -> None:
        self.f = fmt
        self.words: list[int] = []
        self.runs = 0

    def load(self, src: int, count: int, mem: int, addr: int, tag: int, after: int) -> None:
        f = self.f
        self.words += [f.word("HEADER", OP=f.opcodes["LOAD"], LEN=f.length("LOAD"), TAG=tag),
                       f.word("LOAD1", SRC=src, COUNT=count),
                       f.word("LOAD2", MEM=mem, ADDR=addr, AFTER=after)]

    def regs(self, regs, tag: int) -> None:
        f, c = self.f, self.f.cfg
        if len(regs) > 255 - 1:
            raise CmdlistError(f"{len(regs)} register writes do not fit one REGS descriptor")
        self.words.append(f.word("HEADER", OP=f.opcodes["REGS"], LEN=1 + len(regs), TAG=tag))
        for name, value in regs:
            self.words.append(f.word("REG", OFFSET=c.reg(name).offset, VALUE=int(value) & 0xFFFFFFFF))

    def run(self, act: dict, res: dict, tag: int, first: bool = False) -> None:
        f = self.f
        self.runs += 1
        self.words += [f.word("HEADER", OP=f.opcodes["RUN"], LEN=f.length("RUN"),
                              FLAGS=f.flag_first if first else 0, TAG=tag),
                       f.word("ACT0", **act["ACT0"]), f.word("ACT1", **act.get("ACT1", {})),
                       f.word("ACT2", **act.get("ACT2", {})), f.word("ACT3", **act.get("ACT3", {})),
                       f.word("ACT4", **act.get("ACT4", {})), f.word("RES0", **res["RES0"]),
                       f.word("RES1", **res.get("RES1", {})), f.word("RES2", **res.get("RES2", {}))]

    def vec(self, fields: dict, src_a: int, src_b: int, dst: int, tag: int) -> None:
        """A VEC descriptor (contract 2.1) of :func:`dtpu.hw.vec_lower.lower_vec`'s fields."""
        f = self.f
        v2 = dict(fields.get("VEC2", {}), DST=dst)
        self.words += [f.word("HEADER", OP=f.opcodes["VEC"], LEN=f.length("VEC"), TAG=tag),
                       f.word("VEC0", **fields["VEC0"]),
                       f.word("VEC1", SRC_A=src_a, SRC_B=src_b),
                       f.word("VEC2", **v2)] + \
                      [f.word(k, **fields.get(k, {})) for k in ("VEC3", "VEC4", "VEC5", "VEC6", "VEC7")]

    def end(self) -> None:
        f = self.f
        self.words.append(f.word("HEADER", OP=f.opcodes["END"], LEN=1))

    def data(self) -> bytes:
        return np.array(self.words, _U64).tobytes()


def _u16(v: int) -> int:
    return int(v) & 0xFFFF


def compile_program(partitions: list[list[NodeIn]], cfg: HwConfig | None = None, *,
                    base: int = DEFAULT_DDR_BASE, rounding: str = "default",
                    runtime: str | None = None, scratch_fraction: int = SCRATCH_FRACTION,
                    keep: list | None = None, resident: list | None = None) -> Program:
    """Compile partitions (lists of nodes in execution order) into one DDR image.

    On-chip placement (:func:`dtpu.hw.residency.first_come`): nodes are made resident first
    come (like backend=model's prepare) in the weight and parameter memories minus
    1/`scratch_fraction` kept as scratch, only those `resident` marks when it is given (per
    MXU node, in execution order over the partitions: a residency chosen elsewhere); their
    loads go into the prologue list, run once at prepare. The others are *streamed*: lowered
    for one of two halves of the scratch, their pages alternating between the halves (so that the load
    unit fills one half while the core computes from the other), their LOAD descriptors in the
    partition's list right before their jobs; a LOAD waits (field AFTER) for the last earlier
    RUN of the list that reads the memory it overwrites, and for nothing else.

    `keep` (per partition, the node indices whose outputs the host reads; None: all of them):
    the other node outputs are intermediate and share a liveness-planned arena
    (:func:`_plan_arena`).
    """
    cfg = cfg or get_config()
    fmt = Format(cfg)
    c = cfg
    img = DdrImage(base)
    # CONCATENATIONs: their buffers, and the producers that write their slices in place
    concat_bufs, slices = plan_concats(partitions, keep, img)
    arena, arena_bytes = _plan_arena(partitions, keep, img,
                                     set(concat_bufs) | set(slices))
    consts: dict[bytes, int] = {}     # constant bytes (tables) -> their address, written once
    weight_scratch, param_scratch = list_scratch(c, scratch_fraction)
    mxu_nodes = [nd.spec for nodes in partitions for nd in nodes if nd.vec is None]
    if resident is not None and len(resident) != len(mxu_nodes):
        raise CmdlistError(f"resident: {len(resident)} entries for {len(mxu_nodes)} MXU nodes; "
                           f"accepted: one per CONV_2D / DEPTHWISE / FULLY_CONNECTED node in "
                           f"execution order, or None (first come)")
    sizes = [footprint(spec, c, precision_of(spec, None)) for spec in mxu_nodes]
    room = (c.WEIGHT_WORDS - weight_scratch, c.PARAM_ENTRIES - param_scratch)
    places, resident_words = first_come(c, sizes, *room, resident)
    places.reverse()   # popped in execution order
    whalf, phalf, halves = list_halves(c, scratch_fraction)
    prologue = ListBuilder(fmt)
    lists: list[tuple[ListBuilder, Partition]] = []
    half = 0
    streamed = 0
    for p_index, nodes in enumerate(partitions):
        if not nodes:
            raise CmdlistError(f"partition {p_index} has no nodes")
        lb = ListBuilder(fmt)
        # on-chip ranges the list's RUNs read so far: [(run number from 1, kind, lo, hi)]
        reads: list[tuple[int, str, int, int]] = []
        for i, node in enumerate(nodes):
            for src, _, _ in node.sources():
                if src >= i:
                    raise CmdlistError(f"partition {p_index} node {i} ({node.name!r}): input src="
                                       f"{src}; accepted: -1 - k (the partition's input k) or "
                                       f"an earlier node 0..{i - 1}")
        # the partition's inputs, in the order of k (NodeIn.src = -1 - k), shaped by their readers
        operands = [r for nd in nodes for r in nd.sources()]
        n_in = max([-1 - src for src, _, _ in operands if src < 0], default=-1) + 1
        in_spec: list[tuple | None] = [None] * n_in
        for src, shape, dt in operands:
            if src < 0 and in_spec[-1 - src] is None:
                in_spec[-1 - src] = (shape, dt)
        if n_in == 0 or any(s is None for s in in_spec):
            raise CmdlistError(f"partition {p_index}: inputs {[k for k, s in enumerate(in_spec) if s is None] or [0]} "
                               f"are read by no node; accepted: NodeIn.src = -1 - k for k < the "
                               f"number of inputs, each read")
        inps = [Buffer(img.alloc(int(np.prod(shape)) * dt.itemsize), tuple(shape), dt)
                for shape, dt in in_spec]
        outs: list[Buffer] = []
        caveats: list[str] = []
        macs = 0
        for i, node in enumerate(nodes):
            spec = node.spec
            tag = (p_index << 16) | i
            if node.vec is not None and node.vec.op == "CONCATENATION":
                outs.append(_emit_concat(lb, node, inps, outs, concat_bufs[(p_index, i)], tag, c))
                caveats.append(VEC_CAVEAT)
                continue
            if node.vec is not None:
                outs.append(_emit_vec(lb, img, node, inps, outs, arena.get((p_index, i)), tag, c,
                                      consts))
                caveats.append(VEC_CAVEAT)
                continue
            src = inps[-1 - node.src] if node.src < 0 else outs[node.src]
            if src.dtype != _io_dtype(spec):
                raise CmdlistError(f"node {spec.name!r}: input of {_io_dtype(spec)} fed from a "
                                   f"tensor of {src.dtype}")
            if int(np.prod(src.shape)) != int(np.prod(spec.input_shape)):
                raise CmdlistError(f"node {spec.name!r}: input of shape {spec.input_shape} fed "
                                   f"from a tensor of shape {src.shape}")
            prec = precision_of(spec, None)
            words, entries = footprint(spec, c, prec)
            wb, pb = places.pop() or (None, None)
            common = dict(precision=None, rounding=rounding, runtime=runtime)
            if wb is not None and pb is not None:
                low = lower(spec, node.filters, node.bias, c, wgt_base=wb, param_base=pb,
                            wgt_capacity=max(words, c.COLS), param_capacity=max(entries, c.COLS),
                            **common)
                resident = True
                region = (pb, max(entries, c.COLS))
                pingpong = None
            else:
                wbase, pbase = halves[half]
                region = (pbase, phalf)
                pingpong = (halves[half], halves[half ^ 1], whalf, phalf)
                streamed += 1
                low = lower(spec, node.filters, node.bias, c, wgt_base=wbase, param_base=pbase,
                            wgt_capacity=whalf, param_capacity=phalf, **common)
                resident = False
                log.info("%s: streamed through the scratch half at weight word %d (%d words)",
                         spec.name or spec.kind.value, wbase, whalf)
            odt = _io_dtype(spec)
            at = arena.get((p_index, i))
            into = slices.get((p_index, i))     # (concatenation's node, its first channel)
            if into is not None and low.k_chunks > 1:
                # a split K's POST writes whole rows of its sums' channels: a COPY moves it
                into = None
                log.info("%s: a split K, its slice of the concatenation is copied",
                         spec.name or spec.kind.value)
            if into is not None:
                whole = concat_bufs[(p_index, into[0])]
                out = Buffer(whole.addr, tuple(spec.output_shape), odt,
                             slice=(into[1], whole.shape[-1]))
            else:
                out = Buffer(at if at is not None else
                             img.alloc(int(np.prod(spec.output_shape)) * odt.itemsize),
                             tuple(spec.output_shape), odt)
            outs.append(out)
            macs += spec.macs
            once = list(low.load_jobs)
            per_invoke = low.jobs(np.zeros(spec.input_shape, _io_dtype(spec)))
            if not resident and low.resident:
                # lowered as a whole into a scratch half: its "once" loads are per invoke here
                per_invoke = once + per_invoke
                once = []
            for job in once:
                _emit_load(prologue, fmt, img, job, tag, reads=None)
            caveats.append(timing_caveat(low, c))
            sums, flips = _emit_node(lb, fmt, img, low, per_invoke, src, out, tag, reads, pingpong)
            if pingpong is not None:
                half ^= 1 ^ (flips & 1)   # the next node starts in the half its last page left
            if sums is not None:
                _emit_post(lb, prologue, fmt, img, node, low, sums, out, tag, reads, region,
                           rounding, runtime)
        lb.end()
        data = lb.data()
        addr = img.alloc(len(data), data)
        part = Partition(addr, len(lb.words), inps[0], outs[-1], outs, macs, jobs=lb.runs,
                         inputs=inps, node_macs=[nd.macs for nd in nodes],
                         node_prec=[_node_prec(nd) for nd in nodes],
                         node_caveats=caveats)
        lists.append((lb, part))
    prologue.end()
    pdata = prologue.data()
    paddr = img.alloc(len(pdata), pdata)
    if img.top > 1 << 32:
        raise CmdlistError(f"the DDR image ends at {img.top:#x}: beyond the 32-bit address space")
    return Program(cfg, base, img.build(), paddr, len(prologue.words), [p for _, p in lists],
                   resident_words=resident_words, streamed_nodes=streamed, arena_bytes=arena_bytes)


def plan_concats(partitions: list[list[NodeIn]], keep, img: "DdrImage") -> tuple[dict, dict]:
    """Each CONCATENATION's output buffer ({(partition, node): Buffer}, allocated here: its
    producers write it before the node's turn) and the producers that write their slice of it
    in place ({(partition, producer): (concatenation's node, first channel)}): a convolution
    or FULLY_CONNECTED of the partition whose output nothing else reads, the host included
    (`keep`, as :func:`compile_program` takes it); its store unit then writes channels
    [first, first + its channels) of each pixel of the wider tensor (RES2's CH0 / CH1 / DSTC).
    The other inputs are moved by COPY descriptors at the node's turn (:func:`_emit_concat`)."""
    bufs: dict = {}
    slices: dict = {}
    for p_index, nodes in enumerate(partitions):
        kept = (set(keep[p_index]) if keep is not None and p_index < len(keep)
                else set(range(len(nodes))))
        reads: dict[int, int] = {}
        for nd in nodes:
            for src, _, _ in nd.sources():
                reads[src] = reads.get(src, 0) + 1
        for i, nd in enumerate(nodes):
            if nd.vec is None or nd.vec.op != "CONCATENATION":
                continue
            shape, dt = nd.output()
            bufs[(p_index, i)] = Buffer(img.alloc(int(np.prod(shape)) * dt.itemsize), tuple(shape), dt)
            first = 0
            for src, part, pdt in nd.sources():
                if (0 <= src < i and nodes[src].vec is None and reads[src] == 1
                        and src not in kept and nodes[src].output()[1] == pdt
                        and int(np.prod(nodes[src].output()[0])) == int(np.prod(part))):
                    slices[(p_index, src)] = (i, first)
                first += part[-1]
    return bufs, slices


def _emit_concat(lb: "ListBuilder", node: NodeIn, inps: list, outs: list, whole: Buffer,
                 tag: int, cfg: HwConfig) -> Buffer:
    """A CONCATENATION along channels: nothing for the inputs whose producers wrote their slice
    of `whole` (:func:`plan_concats`), a COPY descriptor into its slice for each other one."""
    first = 0
    for src, shape, dt in node.sources():
        b = inps[-1 - src] if src < 0 else outs[src]
        if b.dtype != dt or int(np.prod(b.shape)) != int(np.prod(shape)):
            raise CmdlistError(f"CONCATENATION {node.name!r}: input {shape} {dt} fed from a "
                               f"tensor {b.shape} {b.dtype}")
        if not (b.slice is not None and b.addr == whole.addr and b.slice[0] == first):
            try:
                fields = lower_copy(shape, whole.shape[-1], dt, cfg)
            except ValueError as e:
                raise CmdlistError(f"CONCATENATION {node.name!r}: {e}") from e
            lb.vec(fields, b.addr, 0, whole.addr + first * dt.itemsize, tag)
        first += shape[-1]
    return whole


def _plan_arena(partitions: list[list[NodeIn]], keep, img: "DdrImage",
                skip: set = frozenset()) -> tuple[dict, int]:
    """Addresses of the intermediate tensors: node outputs the host does not read (`keep[p]`:
    the node indices of partition p whose outputs it reads; None keeps every output) live from
    their node to their last reader in the partition and share one arena, first fit by
    lifetime; partitions run one after the other, so they share it too. The store unit writes
    a tensor only after every RUN that read the one it overwrites has ended (the core runs in
    order), so reuse adds no hazard. `skip`: the (partition, node) outputs that have buffers
    of their own (CONCATENATIONs and the slices written into them)."""
    if keep is None:
        return {}, 0
    placed: dict = {}
    top = 0
    for p_index, nodes in enumerate(partitions):
        kept = set(keep[p_index]) if p_index < len(keep) else set(range(len(nodes)))
        last = {i: i for i in range(len(nodes))}
        for j, nd in enumerate(nodes):
            for src, _, _ in nd.sources():
                if src >= 0:
                    last[src] = max(last[src], j)
        live: list[tuple[int, int, int]] = []   # (offset, size, last reader)
        for i, nd in enumerate(nodes):
            live = [b for b in live if b[2] >= i]
            if i in kept or (p_index, i) in skip:
                continue
            shape, dt = nd.output()
            size = ceil_div(max(int(np.prod(shape)) * dt.itemsize, 1), _ALIGN) * _ALIGN
            off = 0
            for o, sz, _ in sorted(live):
                if off + size <= o:
                    break
                off = max(off, o + sz)
            live.append((off, size, last[i]))
            placed[(p_index, i)] = off
            top = max(top, off + size)
    if not placed:
        return {}, 0
    base = img.alloc(top)
    return {k: base + off for k, off in placed.items()}, top


#: the per-node timing caveat of a VEC node (:func:`timing_caveat`'s role for RUNs)
VEC_CAVEAT = ("vector unit (contract 2.1): its cycles are the golden model's formula; no RTL "
              "to compare with yet")


def _node_prec(nd: NodeIn):
    if nd.vec is not None:
        return Precision.INT8 if np.dtype(nd.vec.dtype) == np.int8 else Precision.UINT8
    return precision_of(nd.spec, None)


def _emit_vec(lb: "ListBuilder", img: "DdrImage", node: NodeIn, inps: list, outs: list,
              at: int | None, tag: int, cfg: HwConfig, consts: dict) -> Buffer:
    """A vector-unit node: its VEC descriptor over the buffers of its operands; its output
    buffer (in the arena when the host does not read it). A table operator's 256 bytes (its
    SRC_B) and a constant operand are written into the image once per distinct content
    (`consts`)."""
    bufs = []
    for src, shape, dt in node.sources():
        b = inps[-1 - src] if src < 0 else outs[src]
        if b.dtype != dt or int(np.prod(b.shape)) != int(np.prod(shape)):
            raise CmdlistError(f"{node.vec.op} {node.name!r}: operand {shape} {dt} fed from a "
                               f"tensor {b.shape} {b.dtype}")
        bufs.append(b)
    if node.vec.op == "RESIZE_NEAREST_NEIGHBOR":
        return _emit_resize(lb, img, node, bufs[0], at, tag, cfg)
    try:
        fields, swap = lower_vec(node.vec, cfg)
    except ValueError as e:
        raise CmdlistError(f"{node.vec.op} {node.name!r}: {e}") from e
    shape, dt = node.output()
    out = Buffer(at if at is not None else img.alloc(int(np.prod(shape)) * dt.itemsize), shape, dt)
    if node.vec.const is not None:      # a constant operand: its bytes in the image
        which, data = node.vec.const
        shape = (node.vec.a_shape, node.vec.b_shape)[which]
        bufs.insert(which, Buffer(_constant(img, consts, data), tuple(shape),
                                  np.dtype(node.vec.dtype)))
    a, b = (bufs[1], bufs[0]) if swap else (bufs[0], bufs[1] if len(bufs) > 1 else None)
    if node.vec.table is not None:
        b = Buffer(_constant(img, consts, node.vec.table), (256,), np.dtype(np.uint8))
    lb.vec(fields, a.addr, b.addr if b is not None else 0, out.addr, tag)
    return out


def _emit_resize(lb: "ListBuilder", img: "DdrImage", node: NodeIn, src: Buffer, at: int | None,
                 tag: int, cfg: HwConfig) -> Buffer:
    """A nearest-neighbour upscale: its COPY descriptors (:func:`resize_copies`), columns
    repeated into a scratch buffer of whole rows first when rows repeat too."""
    try:
        copies = resize_copies(node.vec, cfg)
    except ValueError as e:
        raise CmdlistError(f"RESIZE_NEAREST_NEIGHBOR {node.name!r}: {e}") from e
    if src.slice is not None:
        raise CmdlistError(f"RESIZE_NEAREST_NEIGHBOR {node.name!r}: its input is a channel "
                           f"slice of a wider tensor, not dense")
    shape, dt = node.output()
    out = Buffer(at if at is not None else img.alloc(int(np.prod(shape)) * dt.itemsize), shape, dt)
    n, h, w, c = node.vec.a_shape
    fy, fx = node.vec.resize
    rows = out.addr
    if fy > 1 and fx > 1:
        rows = img.alloc(n * h * w * fx * c * dt.itemsize)
    for source, fields, offset in copies:
        first = src.addr if source == "input" else rows
        dst = (rows if source == "input" and fy > 1 else out.addr) + offset
        lb.vec(fields, first, 0, dst, tag)
    return out


def _constant(img: "DdrImage", consts: dict, data: bytes) -> int:
    """The address of constant bytes in the image, allocated the first time they are seen."""
    if data not in consts:
        consts[data] = img.alloc(len(data), bytes(data))
    return consts[data]


def _io_dtype(spec: ConvSpec) -> np.dtype:
    from dtpu import reference
    return np.dtype(reference.io_dtypes(spec)[0])


def _regs_of(job: Job) -> dict[str, int]:
    return {name: int(v) for name, v in job.regs}


def _emit_load(lb: ListBuilder, fmt: Format, img: DdrImage, job: Job, tag: int, reads) -> None:
    c = fmt.cfg
    regs = _regs_of(job)
    op = _opname(c, regs)
    words = np.ascontiguousarray(job.send["wgt"], _U64)
    addr = regs["LOAD_ADDR"]
    mem = 0 if op == "LOAD_WGT" else 1
    src = img.alloc(words.nbytes, words.tobytes())
    kind = "w" if mem == 0 else "p"
    lo, hi = (addr, addr + words.size) if mem == 0 else (addr, addr + words.size // 2)
    after = max((n for n, k, l, h in reads or () if k == kind and lo < h and l < hi), default=0)
    lb.load(src, int(words.size), mem, addr, tag, after)


def _opname(c: HwConfig, regs: dict) -> str:
    code = c.decode("JOB", regs["JOB"])["OPCODE"]
    return next(n for n, v in c.enums["OPCODE"].items() if v == code)


def _emit_node(lb, fmt: Format, img: DdrImage, low, jobs: list[Job], src: Buffer, out: Buffer,
               tag: int, reads: list, pingpong=None) -> tuple[Buffer | None, int]:
    """A node's per-invoke jobs as LOAD / REGS+RUN descriptors; the RUN fields are derived from
    the node's shapes and each job's registers (tiles of a page, channel groups of a part, K
    chunks of a split K). Returns the int64 partial-sum buffer of a split K (None otherwise),
    which :func:`_emit_post` finishes, and how many times the pages changed half.

    `pingpong` ((wbase, pbase) the node was lowered at, the other half's, half sizes) for a
    streamed node: its pages alternate between the two halves (a lowering's words do not
    depend on its region), so that the next page loads while the core computes the last."""
    c = fmt.cfg
    spec, prec = low.spec, low.precision
    if prec.lanes * _esize(prec) != 8:
        raise CmdlistError(f"{spec.name!r}: precision {prec.value} ({prec.lanes} lanes of "
                           f"{_esize(prec)} bytes) is not its TFLite tensor layout; command lists "
                           f"take the natural precisions (int8, uint8, int16 16x8, fp32)")
    n, ih, iw, ic = spec.input_shape
    _, oh, ow, oc = spec.output_shape
    # a CONCATENATION's slice: channels [ch_off, ch_off + oc) of pixels of `dstc` channels
    ch_off, dstc = out.slice if out.slice is not None else (0, oc)
    L = prec.lanes
    t_next = k_next = 0
    g_next, images_done = 0, 0
    sums: Buffer | None = None
    flips, odd, computed = 0, False, False
    for job in jobs:
        regs = _regs_of(job)
        op = _opname(c, regs)
        first = False
        if pingpong is not None:
            if op in ("LOAD_WGT", "LOAD_PARAM") and computed:   # a new page
                odd, computed, flips = not odd, False, flips + 1
            if odd:
                job = _moved(c, job, pingpong)
                regs = _regs_of(job)
        if op in ("LOAD_WGT", "LOAD_PARAM"):
            _emit_load(lb, fmt, img, job, tag, reads)
            continue
        computed = True
        jf = c.decode("JOB", regs["JOB"])
        out_mode = jf["OUT_MODE"]
        raw = out_mode == c.OUT_MODE_RAW
        if raw and op != "GEMM":
            raise CmdlistError(f"{spec.name!r}: raw {op} jobs (wide precision {prec.value}) are "
                               f"not expressed by command lists; accepted: the natural precision")
        lanes_res, res_dt = out_lanes(c, prec, out_mode)
        res_es = np.dtype(res_dt).itemsize
        pad = _pad_bits(spec, prec)
        if op == "GEMM":
            m, kw, nt = regs["GEMM_M"], regs["GEMM_KW"], regs["GEMM_NT"]
            k = spec.kernel[0] * spec.kernel[1] * ic
            kwords = ceil_div(k, L)
            if m != n * oh * ow or (kw != kwords and not raw) or k_next + kw > kwords:
                raise CmdlistError(f"{spec.name!r}: GEMM job with M={m}, KW={kw} (K from word "
                                   f"{k_next}) is not the node's K ({kwords} words) over "
                                   f"{n * oh * ow} pixels")
            if spec.kind is OpKind.FULLY_CONNECTED:
                geo = dict(KH=1, KW=1, SY=1, SX=1, DY=1, DX=1, PT=0, PL=0, OH=1, OW=1)
            else:
                (kh, kwd), (sy, sx), (dy, dx) = spec.kernel, spec.stride, spec.dilation
                (pt, _), (pl, _) = spec.pads
                geo = dict(KH=kh, KW=kwd, SY=sy, SX=sx, DY=dy, DX=dx, PT=pt, PL=pl, OH=oh, OW=ow)
            act = dict(ACT0=dict(MODE=fmt.act_modes["WINDOWS"], LANES=L, ESIZE=_esize(prec),
                                 PAD=pad, SRC=src.addr),
                       ACT1=dict(N=n, H=ih, W=iw, C=ic), ACT2=geo,
                       ACT3=dict(KP=kwords * L, K0=k_next, K1=k_next + kw))
            first = raw and k_next == 0
            if raw and sums is None:
                sums = Buffer(img.alloc(m * oc * 8), (m, oc), np.dtype("<i8"))
            res = dict(RES0=dict(MODE=fmt.res_modes["ACC" if raw else "ITEMS"], LANES=lanes_res,
                                 ESIZE=8 if raw else res_es, SIGNED=int(np.dtype(res_dt).kind == "i"),
                                 DST=sums.addr if raw else out.addr),
                       RES1=dict(PIX=m, OUTER=1, INNER=nt),
                       RES2=dict(GW=c.COLS, CH0=t_next * c.COLS, CH1=oc, DSTC=oc) if raw else
                       dict(GW=c.COLS, CH0=ch_off + t_next * c.COLS, CH1=ch_off + oc, DSTC=dstc))
            t_next += nt
            if t_next * c.COLS >= oc:
                t_next = 0
                if raw:
                    k_next += kw
            wl, wh = regs["WGT_BASE"], regs["WGT_BASE"] + nt * kw * c.COLS
            pl_, ph = regs["PARAM_BASE"], regs["PARAM_BASE"] + nt * c.COLS
        elif op == "DWCONV":
            d = c.decode("DW_GROUPS", regs["DW_GROUPS"])
            gc, nchunk = d["GC"], d["NCHUNK"]
            groups = gc * nchunk
            g0 = g_next
            b = images_done
            img_in = ih * iw * ic * src.dtype.itemsize
            img_out = oh * ow * dstc * out.dtype.itemsize
            act = dict(ACT0=dict(MODE=fmt.act_modes["CHANNELS"], LANES=L, ESIZE=_esize(prec),
                                 PAD=pad, SRC=src.addr + b * img_in),
                       ACT1=dict(N=1, H=ih, W=iw, C=ic),
                       ACT3=dict(KP=spec.depth_multiplier, K0=g0 * L, K1=groups * L, NCHUNK=nchunk),
                       ACT4=dict(CV=oc))
            res = dict(RES0=dict(MODE=fmt.res_modes["ITEMS"], LANES=lanes_res, ESIZE=res_es,
                                 SIGNED=int(np.dtype(res_dt).kind == "i"), DST=out.addr + b * img_out),
                       RES1=dict(PIX=oh * ow, OUTER=nchunk, INNER=gc),
                       RES2=dict(GW=L, CH0=ch_off + g0 * L, CH1=ch_off + oc, DSTC=dstc))
            images_done += 1
            if images_done == n:
                images_done = 0
                g_next += groups
                if g_next * L >= oc:
                    g_next = 0
            wl = regs["WGT_BASE"]
            wh = wl + dw_weight_words(c, dw_geometry(spec, c, prec, groups))
            pl_, ph = regs["PARAM_BASE"], regs["PARAM_BASE"] + groups * L
        else:
            raise CmdlistError(f"{spec.name!r}: unexpected {op} job in an invoke")
        lb.regs(job.regs, tag)
        lb.run(act, res, tag, first=first)
        reads += [(lb.runs, "w", wl, wh)] + ([] if raw else [(lb.runs, "p", pl_, ph)])
    if sums is not None and k_next != ceil_div(spec.kernel[0] * spec.kernel[1] * ic, L):
        raise CmdlistError(f"{spec.name!r}: the split K's chunks end at word {k_next}, not at the "
                           f"node's K")
    return sums, flips


def timing_caveat(low, cfg: HwConfig) -> str:
    """The documented case (docs/rtl.md) in which this node's Timeline cycles are not proven
    equal to dtpu_cl_top's, or "". The RTL backend names it when the two differ, so a user with
    a model the zoo does not have learns whether a difference is a known modelling limit or a
    bug to report, without reading the simulator's event logs."""
    spec, prec = low.spec, low.precision
    c = spec.input_shape[3]
    lane_mode = c % prec.lanes != 0
    if low.dataflow == "dwconv" and lane_mode:
        return (f"depthwise CHANNELS stream in lane mode (C={c} not a multiple of {prec.lanes} "
                f"lanes): the Timeline shifts it by its first word's lateness only "
                f"(docs/rtl.md, 'Streams that do not keep up')")
    if low.k_chunks > 1 and lane_mode:
        return (f"K split in lane mode ({low.k_chunks} chunks, C={c} not a multiple of "
                f"{prec.lanes} lanes): not modelled beyond word mode (docs/rtl.md, 'Not exact yet')")
    if low.k_chunks > 1 and tuple(spec.kernel) != (1, 1):
        kh, kw = spec.kernel
        return (f"K split of a {kh}x{kw} convolution ({low.k_chunks} chunks): on long streams the "
                f"load and store units' requests can reach the read master in another order than "
                f"the Timeline's (docs/rtl.md, 'K-split 3x3')")
    return ""


def _moved(c: HwConfig, job: Job, pingpong) -> Job:
    """`job` with its weight and parameter addresses moved from one scratch half to the other."""
    (wa, pa), (wb, pb), wn, pn = pingpong
    op = _opname(c, _regs_of(job))

    def move(v, lo, n, to):
        return v - lo + to if lo <= v < lo + n else v
    regs = []
    for name, v in job.regs:
        if name == "LOAD_ADDR":
            v = move(v, wa, wn, wb) if op == "LOAD_WGT" else move(v, pa, pn, pb)
        elif name == "WGT_BASE":
            v = move(v, wa, wn, wb)
        elif name == "PARAM_BASE":
            v = move(v, pa, pn, pb)
        regs.append((name, v))
    return Job(job.label, regs, job.send, job.recv, job.macs)


def _emit_post(lb, prologue, fmt: Format, img: DdrImage, node: NodeIn, low, sums: Buffer,
               out: Buffer, tag: int, reads: list, region: tuple, rounding, runtime) -> None:
    """The POST descriptors finishing a split K: the node's parameter entries loaded into its
    parameter region (in pages when it is smaller than the node's channels), then one POST per
    page. The parameter words and the output stage are the lowering's own (the same
    dtpu.hw.lower helpers, the same dtpu.reference rounding variant), so the post unit computes
    what dtpu.reference.requantize computes on the host today."""
    from dtpu import reference
    from dtpu.hw import lower as lw
    c, spec, prec = fmt.cfg, low.spec, low.precision
    bias = node.bias if spec.has_bias else None
    rq = reference.rounding_variant(spec, bias, rounding, runtime) if spec.mode.is_quantized else None
    oc = spec.out_channels
    params = lw.param_words(spec, bias, oc, rq)
    variant = lw.variant_code(c, spec, bias, rq)
    base, cap = region
    page = max(c.COLS, cap // c.COLS * c.COLS)
    m = sums.shape[0]
    for c0 in range(0, oc, page):
        c1 = min(oc, c0 + page)
        words = np.ascontiguousarray(params[c0:c1].reshape(-1))
        job = lw.load_job(c, "LOAD_PARAM", base, words, f"post params[{c0}:{c1}]")
        _emit_load(lb, fmt, img, job, tag, reads)
        regs = [("PARAM_BASE", base), *lw.clamp_regs(spec, rq),
                lw.job_reg(c, "NOP", prec, "REQUANT", variant)]
        lb.regs(regs, tag)
        lb.words += [fmt.word("HEADER", OP=fmt.opcodes["POST"], LEN=fmt.length("POST"), TAG=tag),
                     fmt.word("POST1", SRC=sums.addr, DST=out.addr),
                     fmt.word("POST2", PIX=m, CH0=c0, CH=c1 - c0), fmt.word("POST3", DSTC=oc)]
        lb.runs += 1
        reads.append((lb.runs, "p", base, base + (c1 - c0)))


def _esize(prec) -> int:
    return int(np.dtype(prec.value_dtype).itemsize)


def _pad_bits(spec: ConvSpec, prec) -> int:
    if prec.is_float:
        return 0
    zx = int(spec.input_q.zero_point[0]) if spec.input_q is not None else 0
    return zx & 0xFFFF
