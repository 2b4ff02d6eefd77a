"""Contract 2.0 golden model: a delegated partition compiled once into a command list in DDR,
executed by the DTPU on its own (docs/contract2.md).

Three parts, each the reference for the hardware that follows it:

* :func:`compile_program` (prepare, host): the partitions' nodes are lowered with
  :func:`dtpu.hw.lower.lower` exactly as backend=model lowers them (same register values,
  weight and parameter words), placed in on-chip memory (resident, first come, or streamed
  through two alternating scratch halves), and turned into descriptors (LOAD, REGS, RUN, END)
  plus a DDR image: command lists, weight and parameter words, the partition's input,
  intermediate and output tensors. The layout work the host does between jobs today (im2col
  windows, depthwise channel chunks, depth-multiplier repeats, putting result tiles and parts
  back in place, split-K sums and their requantization) becomes fields of the RUN descriptors,
  done by the load and store units, and POST descriptors run by the post unit.
* :class:`Executor` (the device): decodes the descriptors *from the DDR bytes* (so the binary
  format is what is tested), moves the data as the load/store units would, runs every job's
  arithmetic on the 1.2 core model (:mod:`dtpu.hw.fast`'s compiled jobs, the same datapath
  backend=model uses, so outputs are bit-identical), and times the list with the memory model
  of contract.json ``contract2.memory_model`` (:class:`Timeline`).
* :class:`Device` (the 2.0 registers over a memory: a program's own DDR image, a
  :class:`DdrPool` of the model's buffers, the emulated board's DDR) and :class:`Driver` (the
  O(1) invoke protocol over one program, for tests and benchmarks; the delegate's driver is
  :class:`dtpu.driver.lists.ListProgram`, the same protocol over any 2.0 transport).

Not in this slice (the compiler refuses them with :class:`CmdlistError` naming the node): forced
precisions other than the node's natural one (bf16 lanes, the wide RAW precisions).
"""
from __future__ import annotations

import bisect
import logging
import time
from dataclasses import dataclass, field

import numpy as np

from dtpu.hw import dw_timing, fast, kernels
from dtpu.hw.config import HwConfig, ceil_div, get_config
from dtpu.hw.lower import Job, footprint, lower, precision_of
from dtpu.hw.model import Core, out_lanes
from dtpu.spec import ConvSpec, OpKind

log = logging.getLogger(__name__)

_U64 = np.dtype("<u8")
#: element dtype of a lane by its byte size (the units move bytes; signedness is the core's)
_EDT = {1: np.dtype("u1"), 2: np.dtype("<u2"), 4: np.dtype("<u4"), 8: np.dtype("<u8")}
#: where pynq.allocate's CMA buffers typically live on a PYNQ-Z2; any 8-byte aligned base works
DEFAULT_DDR_BASE = 0x1800_0000
_ALIGN = 64   # tensors and lists start on a cache line (and on a 16-beat burst boundary / 2)


class CmdlistError(ValueError):
    """A partition (or a node of it) that this command-list compiler cannot express."""


# ------------------------------------------------------------------------------------------------
# the descriptor format (contract.json "contract2")


class Format:
    """Descriptor field layouts, opcodes, modes, registers and memory-model constants of
    contract 2.0, read from the contract (the one source; docs/contract2_tables.md is generated
    from the same section)."""

    def __init__(self, cfg: HwConfig | None = None) -> None:
        self.cfg = cfg or get_config()
        c2 = self.cfg.contract.get("contract2")
        if c2 is None:
            raise RuntimeError("contract.json has no 'contract2' section: the command-list "
                               "format is not defined for this build")
        self.c2 = c2
        self.version = (c2["version"]["major"], c2["version"]["minor"])
        self.opcodes = dict(c2["desc_opcodes"])
        self.opnames = {v: k for k, v in self.opcodes.items()}
        self.act_modes = dict(c2["act_modes"])
        self.res_modes = dict(c2["res_modes"])
        self.fields = {w: {f["name"]: (f["lsb"], f["width"]) for f in fs}
                       for w, fs in c2["desc_fields"].items()}
        self.layout = {op: list(ws) for op, ws in c2["desc_layout"].items()}
        self.mem = dict(c2["memory_model"])
        self.regs = {r["name"]: r for r in c2["registers"]}
        self.errors = {name: 1 << e["bit"] for name, e in c2["errors"].items()}
        self.flag_first = 2

    def word(self, kind: str, **values: int) -> int:
        """One 64-bit descriptor word of layout `kind` with the given fields (others 0)."""
        layout = self.fields[kind]
        w = 0
        for name, v in values.items():
            if name not in layout:
                raise KeyError(f"{kind} has no field {name!r}; fields: {', '.join(layout)}")
            lsb, width = layout[name]
            v = int(v)
            if not 0 <= v < 1 << width:
                raise CmdlistError(f"{kind}.{name} = {v} does not fit its {width}-bit field "
                                   f"(0..{(1 << width) - 1})")
            w |= v << lsb
        return w

    def field(self, kind: str, word: int, name: str) -> int:
        lsb, width = self.fields[kind][name]
        return (int(word) >> lsb) & ((1 << width) - 1)

    def fields_of(self, kind: str, word: int) -> dict[str, int]:
        return {n: self.field(kind, word, n) for n in self.fields[kind]}

    def length(self, op: str, pairs: int = 0) -> int:
        lay = self.layout[op]
        return len(lay) + (pairs - 1 if lay[-1].endswith("*") else 0)

    def reg_offset(self, name: str) -> int:
        return int(self.regs[name]["offset"])


# ------------------------------------------------------------------------------------------------
# compilation


@dataclass
class NodeIn:
    """One node of a partition: its spec, constants and where its input comes from: the index
    of an earlier node of the partition, or ``-1 - k`` for the partition's input k (-1: the
    first; a delegated partition may read several tensors from outside it)."""

    spec: ConvSpec
    filters: np.ndarray
    bias: np.ndarray | None
    src: int = -1


@dataclass
class Buffer:
    """A tensor in DDR: byte address, shape, element dtype."""

    addr: int
    shape: tuple
    dtype: np.dtype

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


class _Image:
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


class _ListBuilder:
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

    def end(self) -> None:
        f = self.f
        self.words.append(f.word("HEADER", OP=f.opcodes["END"], LEN=1))

    def data(self) -> bytes:
        return np.array(self.words, _U64).tobytes()


class _Alloc:
    """First-come allocator of on-chip words (multiples of COLS)."""

    def __init__(self, size: int, align: int) -> None:
        self.top, self.size, self.align = 0, size, align

    def alloc(self, n: int) -> int | None:
        n = ceil_div(n, self.align) * self.align
        if self.top + n > self.size:
            return None
        base, self.top = self.top, self.top + n
        return base


def _u16(v: int) -> int:
    return int(v) & 0xFFFF


def compile_program(partitions: list[list[NodeIn]], cfg: HwConfig | None = None, *,
                    base: int = DEFAULT_DDR_BASE, rounding: str = "default",
                    runtime: str | None = None, scratch_fraction: int = 8,
                    keep: list | None = None) -> Program:
    """Compile partitions (lists of nodes in execution order) into one DDR image.

    On-chip placement: nodes are made resident first come (like backend=model's prepare) in
    the weight and parameter memories minus 1/`scratch_fraction` kept as scratch; their loads
    go into the prologue list, run once at prepare. The others are *streamed*: lowered for one
    of two halves of the scratch, their pages alternating between the halves (so that the load
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
    img = _Image(base)
    arena, arena_bytes = _plan_arena(partitions, keep, img)
    wscr = max(c.COLS * 2, c.WEIGHT_WORDS // scratch_fraction)
    pscr = max(c.COLS * 2, c.PARAM_ENTRIES // scratch_fraction)
    walloc, palloc = _Alloc(c.WEIGHT_WORDS - wscr, c.COLS), _Alloc(c.PARAM_ENTRIES - pscr, c.COLS)
    whalf, phalf = (wscr // 2) // c.COLS * c.COLS, (pscr // 2) // c.COLS * c.COLS
    halves = [(c.WEIGHT_WORDS - wscr, c.PARAM_ENTRIES - pscr),
              (c.WEIGHT_WORDS - wscr + whalf, c.PARAM_ENTRIES - pscr + phalf)]
    prologue = _ListBuilder(fmt)
    lists: list[tuple[_ListBuilder, Partition]] = []
    half = 0
    streamed = 0
    for p_index, nodes in enumerate(partitions):
        if not nodes:
            raise CmdlistError(f"partition {p_index} has no nodes")
        lb = _ListBuilder(fmt)
        # on-chip ranges the list's RUNs read so far: [(run number from 1, kind, lo, hi)]
        reads: list[tuple[int, str, int, int]] = []
        for i, node in enumerate(nodes):
            if node.src >= i:
                raise CmdlistError(f"partition {p_index} node {i} ({node.spec.name!r}): input src="
                                   f"{node.src}; accepted: -1 - k (the partition's input k) or "
                                   f"an earlier node 0..{i - 1}")
        # the partition's inputs, in the order of k (NodeIn.src = -1 - k), shaped by their readers
        n_in = max([-1 - nd.src for nd in nodes if nd.src < 0], default=-1) + 1
        in_spec: list[ConvSpec | None] = [None] * n_in
        for nd in nodes:
            if nd.src < 0 and in_spec[-1 - nd.src] is None:
                in_spec[-1 - nd.src] = nd.spec
        if n_in == 0 or any(s is None for s in in_spec):
            raise CmdlistError(f"partition {p_index}: inputs {[k for k, s in enumerate(in_spec) if s is None] or [0]} "
                               f"are read by no node; accepted: NodeIn.src = -1 - k for k < the "
                               f"number of inputs, each read")
        inps = [Buffer(img.alloc(int(np.prod(s.input_shape)) * _io_dtype(s).itemsize),
                       tuple(s.input_shape), _io_dtype(s)) for s in in_spec]
        outs: list[Buffer] = []
        macs = 0
        for i, node in enumerate(nodes):
            spec = node.spec
            tag = (p_index << 16) | i
            src = inps[-1 - node.src] if node.src < 0 else outs[node.src]
            if src.dtype != _io_dtype(spec):
                raise CmdlistError(f"node {spec.name!r}: input of {_io_dtype(spec)} fed from a "
                                   f"tensor of {src.dtype}")
            if int(np.prod(src.shape)) != int(np.prod(spec.input_shape)):
                raise CmdlistError(f"node {spec.name!r}: input of shape {spec.input_shape} fed "
                                   f"from a tensor of shape {src.shape}")
            prec = precision_of(spec, None)
            words, entries = footprint(spec, c, prec)
            wb, pb = walloc.alloc(words), None
            if wb is not None:
                pb = palloc.alloc(entries)
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
            out = Buffer(at if at is not None else img.alloc(int(np.prod(spec.output_shape)) * odt.itemsize),
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
                         inputs=inps, node_macs=[nd.spec.macs for nd in nodes],
                         node_prec=[precision_of(nd.spec, None) for nd in nodes])
        lists.append((lb, part))
    prologue.end()
    pdata = prologue.data()
    paddr = img.alloc(len(pdata), pdata)
    if img.top > 1 << 32:
        raise CmdlistError(f"the DDR image ends at {img.top:#x}: beyond the 32-bit address space")
    return Program(cfg, base, img.build(), paddr, len(prologue.words), [p for _, p in lists],
                   resident_words=walloc.top, streamed_nodes=streamed, arena_bytes=arena_bytes)


def _plan_arena(partitions: list[list[NodeIn]], keep, img: "_Image") -> tuple[dict, int]:
    """Addresses of the intermediate tensors: node outputs the host does not read (`keep[p]`:
    the node indices of partition p whose outputs it reads; None keeps every output) live from
    their node to their last reader in the partition and share one arena, first fit by
    lifetime; partitions run one after the other, so they share it too. The store unit writes
    a tensor only after every RUN that read the one it overwrites has ended (the core runs in
    order), so reuse adds no hazard."""
    if keep is None:
        return {}, 0
    placed: dict = {}
    top = 0
    for p_index, nodes in enumerate(partitions):
        kept = set(keep[p_index]) if p_index < len(keep) else set(range(len(nodes)))
        last = {i: i for i in range(len(nodes))}
        for j, nd in enumerate(nodes):
            if nd.src >= 0:
                last[nd.src] = max(last[nd.src], j)
        live: list[tuple[int, int, int]] = []   # (offset, size, last reader)
        for i, nd in enumerate(nodes):
            live = [b for b in live if b[2] >= i]
            if i in kept:
                continue
            size = ceil_div(max(int(np.prod(nd.spec.output_shape)) * _io_dtype(nd.spec).itemsize, 1),
                            _ALIGN) * _ALIGN
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


def _io_dtype(spec: ConvSpec) -> np.dtype:
    from dtpu import reference
    return np.dtype(reference.io_dtypes(spec)[0])


def _regs_of(job: Job) -> dict[str, int]:
    return {name: int(v) for name, v in job.regs}


def _emit_load(lb: _ListBuilder, fmt: Format, img: _Image, job: Job, tag: int, reads) -> None:
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


def _emit_node(lb, fmt: Format, img: _Image, low, jobs: list[Job], src: Buffer, out: Buffer,
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
                       RES2=dict(GW=c.COLS, CH0=t_next * c.COLS, CH1=oc, DSTC=oc))
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
            img_out = oh * ow * oc * out.dtype.itemsize
            act = dict(ACT0=dict(MODE=fmt.act_modes["CHANNELS"], LANES=L, ESIZE=_esize(prec),
                                 PAD=pad, SRC=src.addr + b * img_in),
                       ACT1=dict(N=1, H=ih, W=iw, C=ic),
                       ACT3=dict(KP=spec.depth_multiplier, K0=g0 * L, K1=groups * L, NCHUNK=nchunk),
                       ACT4=dict(CV=oc))
            res = dict(RES0=dict(MODE=fmt.res_modes["ITEMS"], LANES=lanes_res, ESIZE=res_es,
                                 SIGNED=int(np.dtype(res_dt).kind == "i"), DST=out.addr + b * img_out),
                       RES1=dict(PIX=oh * ow, OUTER=nchunk, INNER=gc),
                       RES2=dict(GW=L, CH0=g0 * L, CH1=oc, DSTC=oc))
            images_done += 1
            if images_done == n:
                images_done = 0
                g_next += groups
                if g_next * L >= oc:
                    g_next = 0
            gp = ceil_div(groups, c.COLS) * c.COLS
            kh, kwd = spec.kernel
            wl, wh = regs["WGT_BASE"], regs["WGT_BASE"] + kh * kwd * gp
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


def _emit_post(lb, prologue, fmt: Format, img: _Image, node: NodeIn, low, sums: Buffer,
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
    params = lw._param_words(spec, bias, oc, rq)
    variant = lw._variant_code(c, spec, bias, rq)
    base, cap = region
    page = max(c.COLS, cap // c.COLS * c.COLS)
    m = sums.shape[0]
    for c0 in range(0, oc, page):
        c1 = min(oc, c0 + page)
        words = np.ascontiguousarray(params[c0:c1].reshape(-1))
        job = lw._load_job(c, "LOAD_PARAM", base, words, f"post params[{c0}:{c1}]")
        _emit_load(lb, fmt, img, job, tag, reads)
        regs = [("PARAM_BASE", base), *lw._clamp_regs(spec, rq),
                lw._job_reg(c, "NOP", prec, "REQUANT", variant)]
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


# ------------------------------------------------------------------------------------------------
# execution


class DdrFault(Exception):
    """An AXI error response (`kind` "DECERR" or "SLVERR") or no response ("TIMEOUT")."""

    def __init__(self, kind: str, addr: int, n: int) -> None:
        super().__init__(f"{kind} at {addr:#x} (+{n} bytes)")
        self.kind = kind


class Ddr:
    """DDR as the HP port sees it: a byte array at `base`; an access outside it is DECERR, an
    access to an address in `slverr` ranges is SLVERR, in `decerr` ranges DECERR (fault
    injection: an interconnect that decodes no slave there, as the RTL regressions' memory can)."""

    def __init__(self, base: int, size: int, image: np.ndarray | None = None) -> None:
        self.base = base
        self.mem = np.zeros(size, np.uint8)
        if image is not None:
            self.mem[:image.size] = image
        self.slverr: list[tuple[int, int]] = []
        self.decerr: list[tuple[int, int]] = []
        self.hang: list[tuple[int, int]] = []      # ranges that never respond (TIMEOUT)

    def _off(self, addr: int, n: int) -> int:
        o = addr - self.base
        if o < 0 or o + n > self.mem.size \
                or any(lo < addr + n and addr < hi for lo, hi in self.decerr):
            raise DdrFault("DECERR", addr, n)
        if any(lo < addr + n and addr < hi for lo, hi in self.slverr):
            raise DdrFault("SLVERR", addr, n)
        if any(lo < addr + n and addr < hi for lo, hi in self.hang):
            raise DdrFault("TIMEOUT", addr, n)
        return o

    def host_view(self, addr: int, n: int) -> np.ndarray:
        """The bytes as the CPU sees them (through the PS, not the HP port: no injected faults)."""
        o = addr - self.base
        if o < 0 or o + n > self.mem.size:
            raise ValueError(f"host access {addr:#x}+{n} outside the DDR buffer "
                             f"{self.base:#x}+{self.mem.size}")
        return self.mem[o:o + n]

    def read(self, addr: int, n: int) -> np.ndarray:
        o = self._off(addr, n)
        return self.mem[o:o + n]

    def write(self, addr: int, data: np.ndarray) -> None:
        b = np.ascontiguousarray(data).view(np.uint8).reshape(-1)
        o = self._off(addr, b.size)
        self.mem[o:o + b.size] = b


class DeviceBuffer:
    """A buffer the DTPU reaches through its memory port and the host through its own view:
    what ``pynq.allocate`` returns on the board (there, ``flush``/``invalidate`` keep the
    CPU's caches coherent with the PL's accesses; here they are no-ops)."""

    def __init__(self, pool: "DdrPool", addr: int, array: np.ndarray) -> None:
        self.pool, self.addr, self.array = pool, addr, array

    def flush(self, offset: int = 0, nbytes: int | None = None) -> None:
        pass

    def invalidate(self, offset: int = 0, nbytes: int | None = None) -> None:
        pass

    def free(self) -> None:
        self.pool.free(self.addr)


class DdrPool:
    """The golden model's DDR: buffers allocated at increasing addresses (from
    DEFAULT_DDR_BASE, 4 KiB aligned like CMA buffers), read and written by the HP port by
    address; anything outside a buffer is DECERR."""

    def __init__(self, base: int = DEFAULT_DDR_BASE) -> None:
        self.base = self.next = base
        self.bufs: dict[int, np.ndarray] = {}
        self._starts: list[int] = []                # sorted buffer addresses (bisect)
        self.slverr: list[tuple[int, int]] = []    # fault injection, as Ddr's

    def alloc(self, nbytes: int) -> DeviceBuffer:
        """First fit from the base: freed ranges are reused (a process that prepares again and
        again must not run out of the 32-bit address space)."""
        size = ceil_div(max(int(nbytes), 1), 4096) * 4096
        addr = self.base
        for start in self._starts:
            if start - addr >= size:
                break
            addr = max(addr, start + self.bufs[start].size)
        if addr + size > 1 << 32:
            raise MemoryError(f"{nbytes} bytes of DDR beyond the 32-bit address space")
        self.next = max(self.next, addr + size)
        arr = self.bufs[addr] = np.zeros(size, np.uint8)
        bisect.insort(self._starts, addr)
        return DeviceBuffer(self, addr, arr)

    def free(self, addr: int) -> None:
        if self.bufs.pop(addr, None) is not None:
            self._starts.remove(addr)

    def _find(self, addr: int, n: int) -> np.ndarray:
        if self.slverr and any(lo < addr + n and addr < hi for lo, hi in self.slverr):
            raise DdrFault("SLVERR", addr, n)
        i = bisect.bisect_right(self._starts, addr) - 1
        if i >= 0:
            start = self._starts[i]
            arr = self.bufs[start]
            if addr + n <= start + arr.size:
                return arr[addr - start:addr - start + n]
        raise DdrFault("DECERR", addr, n)

    def read(self, addr: int, n: int) -> np.ndarray:
        return self._find(addr, n)

    def write(self, addr: int, data: np.ndarray) -> None:
        b = np.ascontiguousarray(data).view(np.uint8).reshape(-1)
        self._find(addr, b.size)[:] = b


@dataclass
class Timeline:
    """The memory model of contract 2.0 (contract.json ``contract2.memory_model``) and the
    sequencer's own timing, as the RTL (``dtpu_cl_fetch`` / ``dtpu_cl_seq``) has it.

    One read channel and one write channel, each one beat (8 bytes) per cycle after a
    request's latency; with MEM_READ_OUTSTANDING bursts of MEM_BURST_BEATS in flight (128 beats
    >= the latency) a read of N beats occupies its channel N cycles and its first beat comes
    MEM_READ_LATENCY after the request. Reads are served in request order (``_read``: the
    calls are made in request-time order; a block of the list due earlier than a LOAD's
    request is put on the channel first).

    * the fetcher reads the list in blocks of DESC_FIFO_WORDS: the first SEQ_FETCH_START after
      DOORBELL, each next one SEQ_FETCH_NEXT after the last beat of the one before, none past
      the block holding END (``list_words``: the hardware follows the headers' LEN as the words
      arrive). A descriptor is handed to the sequencer SEQ_DECODE after its last word arrived
      (one more for a one-word descriptor), SEQ_DESC_GAP after the last word of the one before
      was taken, one word per cycle;
    * the sequencer runs one descriptor at a time, in list order (``seq_free``: when it takes
      the next header). REGS: one pair every SEQ_REG_CYCLES. LOAD: its read is requested SEQ_LOAD_REQ
      after its header was taken (the 1.2 LOAD job's registers are written meanwhile), the
      words stream into the core one per cycle and the sequencer takes the next header
      SEQ_LOAD_DONE after the last beat (the job's DONE, the registers written back); a LOAD of
      no words takes SEQ_LOAD_EMPTY. A LOAD therefore never overlaps another LOAD's or a RUN's
      latency (the RTL's LOAD is a 1.2 job on the core);
    * RUN (:meth:`run`): starts SEQ_RUN_START after it was taken, once the core is free,
      every earlier LOAD is done and its input is in DDR (the sequencer's range table,
      SEQ_RUN_RANGES); its activation stream is requested after the load unit's setup and
      first run; the job's stall-free schedule (the 1.2 formulas) shifts by however late the
      core's first word is beyond CFG_CYCLES; after that the channel's one beat per cycle
      keeps up with the core's at most one (exact for word-mode streams of long runs: the
      RTL's figures equal these on 1x1 and depthwise convolutions, docs/rtl.md). The next
      header SEQ_RUN_DONE after the job's end; its last write response after the store
      unit's last burst (:meth:`_store_tail`);
    * END: taken, then the last RUN's results written (+ MEM_WRITE_LATENCY) and every load
      done; CL_CYCLES ends SEQ_END after END was taken (the units idle), + IRQ_LATENCY.

    ``idle`` = list cycles - the RUN / POST jobs' stall-free cycles: cycles the core waited on
    memory, loads or the fetcher (hw.idle_cycles; a LOAD's 1.2 job counts as idle)."""

    fmt: Format
    start: int = 0
    #: words of the list up to and including END (None: not known, blocks read as needed)
    list_words: int | None = None
    rd_free: int = 0
    wr_done: int = 0
    core_free: int = 0
    loads_done: int = 0
    last_run_end: int = 0
    fetched_words: int = 0
    compute: int = 0
    rd_beats: int = 0
    wr_beats: int = 0
    written: list = field(default_factory=list)  # (lo, hi, cycle of the write response) per RUN
    #: the sequencer's in-flight result ranges (lo, hi) and its overflow flag (SEQ_RUN_RANGES)
    rg: list = field(default_factory=list)
    rg_ovf: bool = False
    run_ends: list = field(default_factory=list)
    #: write responses still due of the last simulated store (:meth:`_run_store_sim`)
    wr_bursts: list = field(default_factory=list)
    #: optional per-descriptor event record (None: off): (kind, cycles...) tuples, for
    #: comparing the model's times with the RTL's (sim/dtpu_sim/cycles.py)
    events: list | None = None
    #: the list's address (None: not known): its blocks' bursts split at 4 KiB as the read
    #: master splits them (:meth:`_bursts` counts bursts in flight)
    list_addr: int | None = None

    def __post_init__(self) -> None:
        m = self.fmt.mem
        self.RL, self.WL = int(m["MEM_READ_LATENCY"]), int(m["MEM_WRITE_LATENCY"])
        self.rd_free = self.start
        self.fifo = int(m["DESC_FIFO_WORDS"])
        self.K = {k: int(v) for k, v in m.items() if k.startswith("SEQ_")}
        self.block_first: list[int] = []       # first beat of each block of the list
        self.next_block = self.start + self.K["SEQ_FETCH_START"]   # its request
        self.hand_free = self.start            # the fetcher can hand the next header
        self.seq_free = self.start             # the sequencer takes the next header
        self.taken = self.start                # the last header taken
        self.block_end = self.start            # the last block's last beat + 1
        self.popped: list[int] = []            # the cycle the sequencer took each list word
        self.fifo_depth = 1 << self.fmt.fields["HEADER"]["LEN"][1]
        self.r_last: list[int] = []            # every read burst's last beat, in order
        self.ar_free = self.start              # the read master's next AR
        self.latch_free = self.start           # it takes the next request (:meth:`_bursts`)

    def _blocks(self) -> int:
        """Blocks the fetcher reads (all up to the one holding END, when known)."""
        if self.list_words is None:
            return 1 << 30
        return -(-self.list_words // self.fifo)

    def _block_req(self) -> int | None:
        """When the fetcher requests its next block: SEQ_FETCH_NEXT after the last beat of the
        one before and once its FIFO (2^LEN words, any descriptor fits) has room for it, i.e.
        the sequencer has taken all but that many words of the blocks before (SEQ_FETCH_ROOM
        after it took the last one needed); None while that word is not taken yet."""
        need = (len(self.block_first) + 1) * self.fifo - self.fifo_depth
        if need <= 0:
            return self.next_block
        if need > len(self.popped):
            return None
        return max(self.next_block, self.popped[need - 1] + self.K["SEQ_FETCH_ROOM"])

    def _issue_block(self, t_dec: int | None = None) -> None:
        """The fetcher's next block; at t_dec (:meth:`_read_sched`) counted burst by burst."""
        t_req = self._block_req()
        if t_req is None:       # not reached by a list the sequencer takes in order
            t_req = max(self.next_block, self.popped[-1] if self.popped else 0)
        addr = None if self.list_addr is None else \
            self.list_addr + 8 * self.fifo * len(self.block_first)
        if t_dec is not None and addr is not None:
            bl = self._bursts(t_dec, addr, self.fifo)
            first, end = bl[0][0], bl[-1][0] + bl[-1][1]
        else:
            first, end = self._read_raw(t_req, self.fifo, addr)
        self.block_first.append(first)
        self.block_end = end
        self.next_block = end - 1 + self.K["SEQ_FETCH_NEXT"]

    def _read_raw(self, t_req: int, beats: int, addr: int | None = None) -> tuple[int, int]:
        first = max(t_req + self.RL, self.rd_free)
        self.rd_free = first + beats
        self.rd_beats += beats
        # the bursts it occupies (for the reads that count them, :meth:`_bursts`): of
        # MEM_BURST_BEATS, split at 4 KiB when the address is known
        burst = int(self.fmt.mem["MEM_BURST_BEATS"])
        b0, n_b = 0, 0
        while b0 < beats:
            n = min(beats - b0, burst)
            if addr is not None:
                n = min(n, (4096 - (addr + 8 * b0) % 4096) // 8)
            b0 += n
            n_b += 1
            self.r_last.append(first + b0 - 1)
        self.ar_free = max(self.ar_free, t_req + 2 * n_b)
        self.latch_free = max(self.latch_free, t_req + 2 * (n_b - 1))
        return first, first + beats

    def _read(self, t_req: int, beats: int) -> tuple[int, int]:
        """(first beat, last beat + 1) of a read of `beats` requested at t_req; the list's
        blocks requested before it go first."""
        while len(self.block_first) < self._blocks() and self.block_first:
            nb = self._block_req()
            if nb is None or nb > t_req:
                break
            self._issue_block()
        return self._read_raw(t_req, beats)

    def _arrival(self, i: int) -> int:
        """The cycle word i of the list arrives."""
        while len(self.block_first) <= i // self.fifo:
            self._issue_block()
        return self.block_first[i // self.fifo] + i % self.fifo

    def fetch(self, words: int) -> int:
        """The cycle the sequencer takes the header of the next descriptor (`words` words);
        by default it takes its words one per cycle and is free after the last."""
        last = self.fetched_words + words - 1
        self.fetched_words += words
        ready = self._arrival(last) + self.K["SEQ_DECODE"] + (1 if words == 1 else 0)
        h = max(ready, self.hand_free, self.seq_free)
        self.taken = h
        self.popped.extend(range(h, h + words))
        self.hand_free = h + words - 1 + self.K["SEQ_DESC_GAP"]
        self.seq_free = h + words
        if self.events is not None:
            self.events.append(("head", h))
        return h

    def regs(self, t_fetch: int, pairs: int) -> None:
        """REGS: the first pair written in the cycle the header is taken, then one every
        SEQ_REG_CYCLES (dtpu_regfile takes a write every other cycle: its write response)."""
        last = t_fetch + self.K["SEQ_REG_CYCLES"] * (pairs - 1)   # the last pair taken
        if pairs:   # the pairs leave the fetcher's FIFO at that rate (:meth:`_block_req`)
            self.popped[-pairs:] = [t_fetch + 1 + self.K["SEQ_REG_CYCLES"] * i
                                    for i in range(pairs)]
        self.seq_free = last + 1
        self.hand_free = last + self.K["SEQ_DESC_GAP"]

    def load(self, t_fetch: int, beats: int, after: int) -> None:
        if after > len(self.run_ends):
            raise _ClError("BAD_FIELD", f"LOAD AFTER={after}: only {len(self.run_ends)} RUNs "
                           f"before it in the list")
        t = max(t_fetch, self.run_ends[after - 1] if after else 0)
        if not beats:
            self.seq_free = max(self.seq_free, t + self.K["SEQ_LOAD_EMPTY"])
            return
        first, end = self._read(t + self.K["SEQ_LOAD_REQ"], beats)
        done = end - 1 + self.K["SEQ_LOAD_DONE"]
        self.seq_free = max(self.seq_free, done)
        self.loads_done = max(self.loads_done, done)
        if self.events is not None:
            self.events.append(("load", first, end - 1, done))

    def run(self, t_fetch: int, src: tuple, dst: tuple, act_beats: int, res_beats: int,
            cycles: int, store_reads: int = 0, act_req: tuple | None = None,
            res_gaps: tuple | None = None, post: tuple | None = None,
            store: tuple | None = None) -> None:
        """A RUN (or POST): `store_reads` are the ACC partial sums the store unit reads back,
        requested on the read channel behind the activation stream.

        `act_req` (a RUN; None for a POST): (cycles from the job's start to its activation
        stream's request as the load unit makes it, :meth:`Executor._act_req`: the unit's setup
        and the first run's collection; the beats the stream reads, which PAD words and
        elements sharing a word do not take, :meth:`Executor._act_read_beats`; the beats the
        store unit writes, :meth:`Executor._res_beats`). A RUN then starts SEQ_RUN_START after its header was
        taken (its eight words, the wait, CTRL.START); if it depends on a write still in
        flight, SEQ_RUN_WAIT after every earlier write response (`wr_done`). It depends when its
        input bytes overlap the result range of a RUN since the writes were last seen all
        answered at a RUN's start (the sequencer's table of SEQ_RUN_RANGES ranges), when it
        reads partial sums back (ACC without FIRST: `store_reads`), when more RUNs than the
        table holds or a POST came since. The core's first word comes
        SEQ_ACT_FIRST after the stream's first beat, and the job's stall-free schedule shifts
        by however much later that is than CFG_CYCLES (the channel's beat a cycle keeps up
        with the core afterwards when the stream's runs are long: word mode, contiguous); the
        next header SEQ_RUN_DONE after the core's DONE; its last write response
        MEM_WRITE_LATENCY after the store unit's last beat (:meth:`_store_tail`)."""
        lo, hi = src
        K = self.K
        run = act_req is not None
        if run:
            t = max(t_fetch + K["SEQ_RUN_START"], self.core_free, self.loads_done)
            idle = self.wr_done + K["SEQ_RUN_WAIT"]       # every write answered
            if store_reads or self.rg_ovf or any(lo < w1 and w0 < hi for w0, w1 in self.rg):
                t = max(t, idle)
            if idle <= t:
                self.rg, self.rg_ovf = [], False
        else:   # a POST: the sequencer waits for every write, the POST's are not tracked
            w = [t for w0, w1, t in self.written if lo < w1 and w0 < hi]
            if post is not None:    # dtpu_cl_seq's S_PWAIT: every write answered; the POST's
                # times count from its header, SEQ_POST_GO before the cycle it can go then
                w = [x - K["SEQ_POST_GO"] for x in w + [self.wr_done]]
            t = max([t_fetch, self.core_free, self.loads_done] + w)
            self.rg, self.rg_ovf = [], True
        shift = 0
        first = None
        dw_w_end = None
        sched = None
        req, rd, wr, part = act_req[:4] if run else (0, act_beats, res_beats, 0)
        stream = act_req[4] if run and len(act_req) > 4 else None
        acc = act_req[5] if run and len(act_req) > 5 else None
        if acc is not None and stream is not None and len(stream) > 5 and stream[5]:
            stream = None       # a whole-tensor 1x1 stream (cause 5): an ACC RUN's is one read
        if acc is not None:     # RES ACC: the store unit's rate and reads (:meth:`_acc_run`)
            first, end = self._acc_run(t, acc, req, rd, store_reads, cycles, stream)
        elif post is not None:  # the post unit (:meth:`_post_run`)
            first, end, res_gaps = self._post_run(t, post)
        else:
            if stream is not None and len(stream) > 5 and stream[5] and \
                    not self._block_due(t + req + rd):
                stream = None       # a whole-tensor 1x1 stream with the master to itself
            if act_beats and stream is not None:
                # a stream that may not keep up (3x3 WINDOWS, lane mode, depthwise CHANNELS:
                # docs/rtl.md "Depthwise streams"): the load unit's runs,
                # bursts and packer against the core's need times, cycle by cycle
                # the list's blocks still to read go through the same master (the arbiter serves
                # the fetcher first, its 64-word reads take MEM_BURST_BEATS bursts): the simulation
                # starts at the next one's request when that comes before the RUN's start (every
                # earlier read is done by then: the RUN before took its words)
                left = self._blocks() - len(self.block_first) if self.block_first else 0
                # the fetcher's FIFO (2^LEN words, dtpu_cl_fetch) holds the words the sequencer has
                # not taken: a block is requested only while it has room for one
                depth = 1 << self.fmt.fields["HEADER"]["LEN"][1]
                held = len(self.block_first) * self.fifo - self.fetched_words
                left = max(0, min(left, (depth - held) // self.fifo))
                # the next block's AR: SEQ_FETCH_NEXT after the one before, and once the FIFO
                # had room for it (SEQ_FETCH_ROOM after the sequencer took the word that made it)
                nb = self._block_req() if left else None
                if nb is None:
                    left, nb = 0, self.next_block
                o = min(t, nb - 2) if left else t
                wa, per_word, need = stream[:3]
                setup = stream[3] if len(stream) > 3 else K["SEQ_ACT_SETUP_WINDOWS"]
                dw_res = stream[4] if len(stream) > 4 else None
                res = None
                if dw_res is not None:      # a DWCONV whose writes may hold the core back
                    # (its result words' stall-free times: the last one 3 before its end); the
                    # write queue is then modelled inside the stream simulation (the Executor
                    # gives no `store` plan: one model of it a RUN, docs/rtl.md "The store
                    # unit's write queue in the Timeline")
                    res = dict(t=dw_res[0] + cycles - 3 + t - o, wa=dw_res[1],
                               end0=cycles + t - o, tail=K["SEQ_STORE_TAIL"] + act_req[3])
                # with scattered writes (`store`), the store unit's holds (the core's global
                # stall) delay the core's need for words too: iterate, the holds before each
                # word added to its need, until they repeat (STORE_ITERATIONS rounds at most)
                held_at = None
                for _ in range(self.STORE_ITERATIONS if store is not None else 1):
                    takes: list = []
                    need_h = (need if held_at is None else need + held_at) - (o - t)
                    shift, f0, f1, _, blks, nxt = _stream_sim(
                        wa, per_word, need_h, setup - 2 + t - o,
                        self.rd_free - o, self.fmt.mem,
                        (nb - o, left, self.fifo, K["SEQ_FETCH_NEXT"]), takes, res)
                    # the core's stall after each word it took (the schedule's)
                    stalls = (np.asarray(takes, np.int64) - np.asarray(need_h, np.int64)
                              [:len(takes)]).tolist()
                    if store is None:
                        break
                    holds = self._store_holds(t, cycles, store, (need, stalls), need)
                    if (held_at is None and not holds.any()) or \
                            (held_at is not None and np.array_equal(holds, held_at)):
                        break
                    held_at = holds
                if res is not None and res.get("w_end") is not None:
                    dw_w_end = res["w_end"] + o
                res_gaps = _stalled_gaps(res_gaps, need, stalls, cycles)
                sched = (need, stalls)
                for b0, b1 in blks:
                    self.block_first.append(o + b0)
                    self.block_end = o + b1
                    self.rd_beats += self.fifo
                    self.rd_free = max(self.rd_free, o + b1)
                if blks:
                    self.next_block = o + nxt if nxt is not None else self.next_block
                first = o + f0 if f0 is not None else None
                if f1 is not None:
                    self.rd_free = max(self.rd_free, o + f1)
                self.rd_beats += rd
            elif act_beats:
                first, _ = self._read(t + req, rd)
                core_first = first + (K["SEQ_ACT_FIRST"] if run else 0)
                shift = max(0, core_first - (t + self.fmt.cfg.CFG_CYCLES))
            if store_reads:
                self._read(t, store_reads)
            end = t + shift + cycles
            if store is not None and run:
                # scattered writes that may not keep up: the store unit and the write master
                # cycle by cycle, holding the core when its queue is full
                end, w_sim = self._run_store_sim(t, shift, cycles, store, sched)
                wr = self._store_beats
        self.core_free = self.last_run_end = end
        self.seq_free = max(self.seq_free, end + (K["SEQ_RUN_DONE"] if run or post else 0))
        self.run_ends.append(end)
        self.compute += cycles
        self.wr_beats += wr
        if acc is not None:
            aw = self._acc_w
            w_end = (aw if aw is not None else end + self._acc_tail(acc.last_item)) + self.WL
        elif post is not None:
            pw = getattr(self, "_post_w", None)
            if pw is not None and wr:
                w_end = max(end, pw) + self.WL
            else:
                w_end = end + self.WL + (self._store_tail(post[8], res_gaps) + post[6] if wr else 0)
        elif store is not None and run and wr:
            w_end = w_sim
        elif wr:
            self.wr_bursts = []     # not simulated: the slots of its bursts are not counted
            w_end = end + self.WL + (self._store_tail(wr, res_gaps, part) if run else 0)
            if dw_w_end is not None:    # the write runs as _stream_sim's store model has them
                w_end = dw_w_end
        else:
            w_end = end + self.WL + (self._store_tail(wr, res_gaps, part) if run and wr else 0)
        self.wr_done = max(self.wr_done, w_end)
        if res_beats:
            self.written.append((*dst, w_end))
        if run:
            if len(self.rg) < self.K["SEQ_RUN_RANGES"]:
                self.rg.append(dst)
            else:
                self.rg_ovf = True
        if self.events is not None:
            self.events.append(("run", t, first, end, w_end))

    def _block_due(self, t_end: int) -> bool:
        """A block of the list is still to be read and the fetcher requests it before t_end
        (it then goes on the read master between an activation stream's runs)."""
        if not self.block_first or len(self.block_first) >= self._blocks():
            return False
        nb = self._block_req()
        return nb is not None and nb < t_end

    def _bursts(self, t_dec: int, addr: int, beats: int) -> list[tuple[int, int]]:
        """One read request taken by the read master at t_dec, counted burst by burst as
        dtpu_axi_rd issues it (MEM_BURST_BEATS beats, none across 4 KiB, an AR every other
        cycle, at most MEM_READ_OUTSTANDING bursts in flight: a burst's AR 2 cycles after the
        last beat of the one that many before); [(first beat, beats)] per burst. The master
        takes the next request when this one's last AR has gone (`latch_free`)."""
        m = self.fmt.mem
        burst, out_n = int(m["MEM_BURST_BEATS"]), int(m["MEM_READ_OUTSTANDING"])
        out = []
        a, left, ar = addr, beats, t_dec
        while left:
            n = min(left, burst, (4096 - a % 4096) // 8)
            ar = max(t_dec, self.ar_free)
            if len(self.r_last) >= out_n:
                ar = max(ar, self.r_last[-out_n] + 2)
            first = max(ar + self.RL, self.rd_free)
            self.rd_free = first + n
            self.r_last.append(first + n - 1)
            self.ar_free = ar + 2
            self.rd_beats += n
            out.append((first, n))
            a += 8 * n
            left -= n
        self.latch_free = ar
        return out

    def _read_sched(self, reqs: list, credit: dict | None = None,
                    hold1: bool = False) -> list[list[tuple[int, int]]]:
        """The read requests of a RUN's units, `reqs` = [(priority, request cycle, address,
        beats)] (priority 1: the load / post unit, 2: the store unit's read-back; each unit's
        in its order), as the read path serves them: the read master holds one request at a
        time (:meth:`_bursts`); when it is free the next one is chosen among those made by
        then, the fetcher's block first (dtpu_cl_rd_arb port A), then the load / post unit,
        then the store unit (the second arbiter). `credit` {priority: the cycles the unit took
        its words from its credit buffer (dtpu_cl_rd_buf, SEQ_RD_CREDIT words)}: a request is
        made only once its words fit the buffer, and that unit's later ones move with it.
        `hold1`: a load unit request's wait for its credit buffer does not move the unit's
        later requests (its run builder goes on while its request FIFO has room,
        :meth:`_acc_elems`); its wait for the request FIFO does. Returns the bursts of each
        request."""
        out: list = [None] * len(reqs)
        reqs = [list(r) for r in reqs]
        queues = {1: [k for k, r in enumerate(reqs) if r[0] == 1],
                  2: [k for k, r in enumerate(reqs) if r[0] == 2]}
        # the load unit's runs wait in its request FIFO (SEQ_ACT_RQ deep, dtpu_cl_load
        # RQ_LOG2 and the credit buffer's register): a full one stops its walk, so a run is
        # made no earlier than the master took the one that many before, and the later runs
        # move with it
        rq = self.K["SEQ_ACT_RQ"]
        cap = self.K["SEQ_RD_CREDIT"]
        taken1: list[int] = []
        shift = {1: 0, 2: 0}
        words = {1: 0, 2: 0}            # words requested so far per unit
        credit = credit or {}
        for p_ in (1, 2):
            for k in queues[p_]:
                reqs[k].append(0)       # this request's shift, added once
        while queues[1] or queues[2]:
            for p_ in (1, 2):
                if not queues[p_]:
                    continue
                k1 = queues[p_][0]
                base = reqs[k1][1] - reqs[k1][4]
                # a wait moves the unit's later requests with it (its walk stopped); with
                # `hold1` only the request FIFO's (the run builder stops while it is full), not
                # the credit buffer's (the FIFO's head waits, the builder goes on)
                want = base + shift[p_]
                if p_ == 1 and len(taken1) >= rq:
                    want = max(want, taken1[-rq] + 1)
                if hold1 and p_ == 1:
                    shift[p_] = want - base
                cons = credit.get(p_)
                need = words[p_] + reqs[k1][3] - cap
                if cons and need > 0:
                    want = max(want, cons[min(need, len(cons)) - 1] + 1)
                if not (hold1 and p_ == 1):
                    shift[p_] = want - base
                reqs[k1][1], reqs[k1][4] = want, want - base
            # request times are AR times when nothing waits; the master takes a request
            # SEQ_RD_ISSUE before its AR can go (dtpu_axi_burst, the AR register): `d` is when
            # it takes the next one, among the requests made by then
            iss = self.K["SEQ_RD_ISSUE"]
            heads = [q[0] for q in queues.values() if q]
            d = max(self.latch_free, min(reqs[k][1] for k in heads) - iss)
            nb = self._block_req() if self.block_first and \
                len(self.block_first) < self._blocks() else None
            if nb is not None and nb - iss <= d:
                self._issue_block(nb)
                continue
            k = next((q[0] for p_ in (1, 2) for q in (queues[p_],)
                      if q and reqs[q[0]][1] - iss <= d), None)
            if k is None:
                k = min(heads, key=lambda k_: (reqs[k_][1], reqs[k_][0]))
            queues[reqs[k][0]].remove(k)
            if reqs[k][0] == 1:
                taken1.append(d)
            words[reqs[k][0]] += reqs[k][3]
            out[k] = self._bursts(max(d, reqs[k][1]), reqs[k][2], reqs[k][3])
        return out

    def _post_run(self, t: int, post: tuple) -> tuple[int | None, int, tuple | None]:
        """A POST from its start `t` (dtpu_cl_post): (the first sum's beat, the end, the result
        words' gaps for :meth:`_store_tail`). `post` = (SRC, PIX, CH0, CH, DSTC, result lanes
        a word, 1 if the last result word is a partial one the packer closes later). The unit
        requests each pixel's CH sums SEQ_POST_READ after the start (one request a pixel, the
        read master's AR every other cycle, :meth:`_read_sched`), takes a sum a cycle as they
        come, and the sequencer takes the next header SEQ_POST_DONE after the last one; the
        requantized lanes leave as result words of `lanes` lanes (a pixel's last word partial),
        which the store unit writes as a RUN's."""
        src, pix, ch0, ch, dstc, lanes = post[:6]
        arrive: list[int] = []
        reqs = [(1, t + self.K["SEQ_POST_READ"], src + (p * dstc + ch0) * 8, ch)
                for p in range(pix)]
        for bl in self._read_sched(reqs):
            for f0, b in bl:
                arrive.extend(range(f0, f0 + b))
        if not arrive:
            return None, t + self.K["SEQ_POST_DONE"], None
        c = arrive[0]
        done_at = []            # the cycle each result word is complete (its last sum taken)
        for i, a in enumerate(arrive):
            c = max(c + 1, a) if i else a
            j = i % ch
            if j % lanes == lanes - 1 or j == ch - 1:
                done_at.append(c)
        gaps = tuple(done_at[-1] - x for x in reversed(done_at))
        self._post_w = self._post_writes(post, done_at)
        return arrive[0], c + self.K["SEQ_POST_DONE"], gaps

    def _post_writes(self, post: tuple, done_at: list[int]) -> int | None:
        """The cycle after a POST's last write beat: its result words (the k-th complete at
        done_at[k]) go to DDR through the store unit's write queue (:func:`_write_runs`'s
        runs); a run is requested SEQ_POST_AW after the word that closes it (the first word
        of the next run) came, the last one a cycle later than its own last word would; the
        bursts' beats follow each other on the write channel, each after its request."""
        if len(post) < 11:
            return None
        _, pix, _, ch, dstc, lanes = post[:6]
        dst, es, ch0 = post[9], post[10], post[2]
        words = []                      # (DDR word, cycle) per DDR word a result word touches
        k = 0
        wpp = -(-ch // lanes)
        for p in range(pix):
            a0 = dst + (p * dstc + ch0) * es
            for j in range(wpp):
                if k >= len(done_at):
                    break
                n = min(lanes, ch - j * lanes) * es
                a = a0 + j * lanes * es
                for w in range(a // 8, (a + n - 1) // 8 + 1):
                    words.append((w, done_at[k]))
                k += 1
        if not words:
            return None
        max_run, max_gap = int(self.fmt.mem["MEM_BURST_BEATS"]), self.K["SEQ_STORE_GAP"]
        aw = self.K["SEQ_POST_AW"]
        reqs = []                       # (request cycle, beats)
        s0 = e0 = None
        last_w = None
        q = None                        # the queue's cycle for the last word (fill words too)
        for w, t_w in words:
            if w == last_w:
                continue
            last_w = w
            if e0 is not None and e0 < w <= e0 + max_gap + 1 and w - s0 + 1 <= max_run:
                # the fill words go in one a cycle when the word after them came
                q = max(q + 1, t_w) + (w - e0 - 1)
                e0 = w
            else:
                q = t_w
                if e0 is not None:
                    reqs.append((t_w + aw, e0 - s0 + 1))
                s0 = e0 = w
            if e0 - s0 + 1 == max_run:      # a full run is requested at once
                reqs.append((q + aw, max_run))
                s0 = e0 = None
        if e0 is not None:
            reqs.append((q + aw + 1, e0 - s0 + 1))
        # at most MEM_READ_OUTSTANDING (the write master's too) bursts unanswered: a burst's
        # request waits for the response of the one that many before (SEQ_WR_SLOT after it)
        out_n = int(self.fmt.mem["MEM_READ_OUTSTANDING"])
        w_free = 0
        b_at: list[int] = []
        for t_r, n in reqs:
            if len(b_at) >= out_n:
                t_r = max(t_r, b_at[-out_n] + self.K["SEQ_WR_SLOT"])
            w_free = max(w_free, t_r + 1) + n
            b_at.append(w_free - 1 + self.WL)
        return w_free

    def _acc_run(self, t: int, acc: "_AccRun", req: int, rd: int, store_reads: int,
                 cycles: int, stream: tuple | None = None) -> tuple[int | None, int]:
        """An ACC RUN from its start `t`: (the stream's first beat, the core's DONE).

        The store unit's read-back requests (one per item or run of consecutive items) leave
        SEQ_ACC_READ after the start, one walk step a result word, before the load unit's
        (whose runs are requested as collected, :meth:`Executor._act_req` for the first, each
        next one its elements later); both are counted burst by burst (:meth:`_read_sched`).
        The job's stall-free schedule then moves by the global stall: the core takes its k-th
        activation word SEQ_ACT_FIRST after its beat at the earliest (GEMM steps of KW words
        every period), and a result word waits for the store unit to be free, which adds its
        kept lanes one a cycle, each once its sum (read back) is in."""
        K = self.K
        self._acc_w = None      # the last W beat + 1 when the write queue is modelled
        reqs = [(2, t + K["SEQ_ACC_READ"] + off, a, n) for off, a, n in acc.reads]
        n_st = len(reqs)
        elems = None
        if stream is not None:
            # a WINDOWS stream with PAD words, windows read again or lanes (a K split of a 3x3;
            # all PAD too: its words still come from the run builder): its runs as the load
            # unit's run builder makes them, element by element, on the master with the sums'
            # reads (docs/rtl.md "K-split 3x3")
            elems = self._acc_elems(t, stream)
            if elems[2] != rd:              # not the unit's beats: the stream as one request
                elems = None
            else:
                reqs += elems[1]
                acc = _AccRun(acc.kept, acc.res_t, acc.reads, acc.last_item,
                              ("elems", stream, elems), acc.wsegs)
        if elems is None and acc.act is not None and acc.act[0] == "elems":
            acc = _AccRun(acc.kept, acc.res_t, acc.reads, acc.last_item, None, acc.wsegs)
        if elems is None and acc.act is not None and rd:
            wa, kw, period = acc.act
            burst = int(self.fmt.mem["MEM_BURST_BEATS"])
            runs: list[list[int]] = []
            for x in wa:
                if runs and x == runs[-1][-1]:
                    continue    # on the word of the beat before: shares its beat
                if runs and x == runs[-1][-1] + 1 and len(runs[-1]) < burst:
                    runs[-1].append(x)
                else:
                    runs.append([x])
            if sum(len(r_) for r_ in runs) != rd:   # not the unit's beats: the stream as one
                acc = _AccRun(acc.kept, acc.res_t, acc.reads, acc.last_item, None)
            else:
                e = 0
                for r_ in runs:     # each run requested once collected, one element a cycle
                    e += len(r_)
                    reqs.append((1, t + req + e - len(runs[0]), 8 * r_[0], len(r_)))
        # the units' credit buffers: the requests depend on when the units take their words,
        # which depends on the requests; iterate from none taken to a fixed point
        saved = self._rd_state()
        credit: dict = {}
        prev = None
        for i in range(self.ACC_ITERATIONS):
            bursts = self._read_sched(reqs, credit, hold1=elems is not None)
            first, end, cons = self._acc_core(t, acc, bursts, n_st, req, rd, store_reads, cycles)
            if _ACC_TRACE is not None:
                _ACC_TRACE.append((t, i, reqs, bursts, first, end, cons))
            if bursts == prev or i == self.ACC_ITERATIONS - 1:   # settled (or given up)
                break
            prev, credit = bursts, cons
            self._rd_state(saved)
        return first, end

    #: rounds of :meth:`_acc_run`'s fixed point (the lists tested settle in 2..5)
    ACC_ITERATIONS = 12

    def _acc_elems(self, t: int, stream: tuple) -> tuple:
        """The load unit's run builder (dtpu_cl_load, as :func:`_stream_sim` has it) over an
        ACC RUN's stream (`stream` = :meth:`Executor._act_stream`'s (element word addresses, -1
        for PAD; elements a word; the core's need times)) from a RUN started at `t`: element e
        taken at SEQ_ACT_SETUP_WINDOWS - 2 + e after the start (one a cycle); a non-PAD element
        on the word of the last beat shares that beat, one on the next word extends the open
        run (up to MEM_BURST_BEATS words), any other opens a run and pushes the open one; PAD
        takes its cycle and closes nothing; the last run is pushed the cycle after the last
        element (the element FIFO is not modelled: ACT_ELEM_FIFO elements ahead of the packer
        were not reached where this is exact; the request FIFO's waits are
        :meth:`_read_sched`'s). A run's request is its
        AR time when nothing waits: 3 cycles after its push (the master takes it, its burst, its
        AR). Returns (the cycle each element is taken, the requests (1, cycle, byte address,
        beats) for :meth:`_read_sched`, the beats, per element the index of its beat (-1: PAD),
        per element 1 if it takes a new beat)."""
        wa, per_word, need = stream
        wa = wa.tolist() if hasattr(wa, "tolist") else list(wa)
        burst = int(self.fmt.mem["MEM_BURST_BEATS"])
        x = t + self.K["SEQ_ACT_SETUP_WINDOWS"] - 3
        xs: list[int] = []
        reqs: list = []
        beat_of: list[int] = []
        newb = bytearray(len(wa))
        nb = 0
        prev_ok, prev_wa, run_open, run_wa, run_len = False, 0, False, 0, 0
        for e, a in enumerate(wa):
            x += 1
            xs.append(x)
            if a < 0:
                beat_of.append(-1)
                continue
            if prev_ok and a == prev_wa:
                beat_of.append(nb - 1)
                continue
            newb[e] = 1
            beat_of.append(nb)
            nb += 1
            if prev_ok and run_open and a == prev_wa + 1:
                run_len += 1
                if run_len == burst:
                    reqs.append((1, x + 3, 8 * run_wa, run_len))
                    run_open = False
            else:
                if run_open:
                    reqs.append((1, x + 3, 8 * run_wa, run_len))
                run_wa, run_len, run_open = a, 1, True
            prev_ok, prev_wa = True, a
        if run_open:
            reqs.append((1, x + 1 + 3, 8 * run_wa, run_len))
        return xs, reqs, nb, beat_of, newb

    def _rd_state(self, st: dict | None = None) -> dict:
        """The read channel's state (saved, or restored from `st`)."""
        names = ("rd_free", "ar_free", "latch_free", "rd_beats", "block_end", "next_block")
        if st is None:
            return {**{n: getattr(self, n) for n in names}, "r_last": list(self.r_last),
                    "block_first": list(self.block_first)}
        for n in names:
            setattr(self, n, st[n])
        self.r_last, self.block_first = list(st["r_last"]), list(st["block_first"])
        return st

    def _acc_core(self, t: int, acc: "_AccRun", bursts: list, n_st: int, req: int, rd: int,
                  store_reads: int, cycles: int) -> tuple:
        """:meth:`_acc_run`'s job once its reads are scheduled: (first beat, DONE, {unit: the
        cycles it took each word from its credit buffer})."""
        K = self.K
        cfg = self.fmt.cfg
        first = None
        act_t: list[int] = []
        kw = period = 1
        arrive: list[int] = []           # the read-back sums' beats, in order
        for bl in bursts[:n_st]:
            for f0, b in bl:
                arrive.extend(range(f0, f0 + b))
        if store_reads and not acc.reads:
            f0, e0 = self._read(t + K["SEQ_ACC_READ"], store_reads)
            arrive.extend(range(f0, e0))
        if acc.act is not None and acc.act[0] == "elems":
            return self._acc_core_elems(t, acc, bursts, n_st, arrive, cycles)
        if acc.act is not None and rd:
            _, kw, period = acc.act
            for bl in bursts[n_st:]:
                for f0, b in bl:
                    act_t.extend(range(f0, f0 + b))
            first = act_t[0] if act_t else None
        elif rd:
            first, _ = self._read(t + req, rd)
            act_t = [first]
        # the global stall over the stall-free schedule: inputs and results in time order, a
        # result word due in the same cycle as an input word first (as in _acc_core_elems: the
        # result register the store unit has not emptied holds the whole core; with NT > 1 a
        # pixel's results meet the next pixel's words, docs/rtl.md "MobileNet v2 224")
        ev = []
        for k, b in enumerate(act_t):
            ev.append((cfg.CFG_CYCLES + (k // kw) * period + k % kw, 1, k, b))
        n_res = len(acc.kept)
        res_t = acc.res_t if acc.res_t is not None else tuple(range(n_res + 1, 1, -1))
        for k in range(n_res):
            ev.append((cycles - res_t[k], 0, k, 0))
        ev.sort()
        stall, free, lane = 0, t, 0
        took: dict = {1: [], 2: []}
        # the store unit's rate holds the core only where the stream is counted word by word:
        # a stream the model takes as one request (PAD words, windows read again) starves the
        # core in ways it does not count, which spreads the results (the RTL then hides most of
        # the store's rate: a 3x3 K split, docs/rtl.md "ACC RUNs and POST")
        per_word = acc.act is not None
        for s_, kind, k, b in ev:
            at = t + s_ + stall
            if kind == 1:
                need = b + K["SEQ_ACT_FIRST"]
                if need > at:
                    stall += need - at
                    at = need
                took[1].append(at - K["SEQ_ACT_TAKE"])
            else:
                if free > at and per_word:
                    stall += free - at
                    at = free
                c = at
                for _ in range(max(1, acc.kept[k])):
                    if arrive and acc.kept[k]:
                        c = max(c, arrive[min(lane, len(arrive) - 1)] + K["SEQ_ACC_SUM"])
                        took[2].append(c)
                        lane += 1
                    c += 1
                free = c
        if acc.act is None:
            took[1] = []
        return first, t + cycles + stall, took

    def _acc_core_elems(self, t: int, acc: "_AccRun", bursts: list, n_st: int, arrive: list,
                        cycles: int) -> tuple:
        """:meth:`_acc_core` for a stream counted element by element (:meth:`_acc_elems`): the
        packer (dtpu_cl_load) takes one element a cycle once the run builder took it, a new
        beat's SEQ_ACT_FIRST - 1 after it came, a word-completing one only when the output
        register is free (the core took the word before); the core takes a word the cycle
        after it was completed, at its stall-free need time shifted by the stall so far; the
        result words and the store unit's rate as :meth:`_acc_core`, the store unit's writes as
        :class:`_AccWrites`; a result word due in the same stall-free cycle as an input word
        goes first. The credit buffer has a beat's word back the cycle after the packer took
        it; a PAD element reaches the packer 2 cycles after the run builder took it."""
        K = self.K
        _, stream, (xs, _, _, beat_of, newb) = acc.act
        _, per_word, need = stream
        beat_t: list[int] = []
        for bl in bursts[n_st:]:
            for f0, b in bl:
                beat_t.extend(range(f0, f0 + b))
        first = beat_t[0] if beat_t else None
        to_pk = K["SEQ_ACT_FIRST"] - 1
        n_el = len(beat_of)
        # a result word due in the same stall-free cycle as an input word goes first: the result
        # register the store unit has not emptied holds the whole core (dtpu_control's `adv`)
        ev = [(int(s_), 1, k) for k, s_ in enumerate(need)]
        n_res = len(acc.kept)
        res_t = acc.res_t if acc.res_t is not None else tuple(range(n_res + 1, 1, -1))
        for k in range(n_res):
            ev.append((cycles - res_t[k], 0, k))
        ev.sort()
        stall, free, lane = 0, t, 0
        took: dict = {1: [], 2: []}
        pop, take, e = -(1 << 60), -(1 << 60), 0
        wq = _AccWrites(self, acc.wsegs) if acc.wsegs is not None else None
        for s_, kind, k in ev:
            at = t + s_ + stall
            if kind == 1:
                last = min(n_el, e + per_word) - 1
                while e <= last:
                    c = max(pop + 1, xs[e] + 2)
                    if newb[e]:
                        c = max(c, beat_t[beat_of[e]] + to_pk)
                    if e == last:
                        c = max(c, take)
                    if newb[e]:
                        took[1].append(c + 1)
                    pop = c
                    e += 1
                if pop + 1 > at:
                    stall += pop + 1 - at
                    at = pop + 1
                take = at
            else:
                if free > at:
                    stall += free - at
                    at = free
                c = at
                for _ in range(max(1, acc.kept[k])):
                    if arrive and acc.kept[k]:
                        c = max(c, arrive[min(lane, len(arrive) - 1)] + K["SEQ_ACC_SUM"])
                        took[2].append(c)
                        lane += 1
                    if wq is not None and acc.kept[k]:
                        c = wq.add(c)
                    c += 1
                free = c
        end = t + cycles + stall
        self._acc_w = wq.finish(end) if wq is not None else None
        return first, end, took

    def _acc_tail(self, last_item: int) -> int:
        """Cycles from an ACC RUN's end (the core's DONE, the store unit has taken the last
        result word) to its last write beat + 1: the last item's lanes added one a cycle and
        written as one burst of its sums (SEQ_ACC_TAIL + its beats)."""
        return self.K["SEQ_ACC_TAIL"] + last_item

    def _store_tail(self, words: int, gaps: tuple | None = None, late: int = 0) -> int:
        """Cycles from a RUN's end (the core's DONE) to its last write beat + 1, for `words`
        result words to consecutive addresses (dtpu_cl_store_wq: runs of up to
        MEM_BURST_BEATS words, each requested once its last word is queued, the last partial
        one once the RUN's end closes it; the burst's beats follow its request): SEQ_STORE_TAIL
        + the last burst's beats (+1 when the RUN's end closes it). When a full burst comes
        before a partial last one of `part` words, the partial one's beats follow the full
        one's, which was requested SEQ_STORE_TAIL + 2 cycles after its last word came from the
        core; `gaps[k]`: how many cycles before the job's last result word (2 before DONE)
        the k-th word before it came (:func:`_result_gaps`; None: one word a cycle; for a
        RUN's packed items, the word completing the k-th beat from the end,
        :meth:`Executor._res_beats`). `late`: 1 when the last word is a partial one the packer
        closes a cycle later (a cycle more, unless the last burst waits for the full one's
        beats anyway: dtpu_cl_store_pack's flush). A last full burst is requested as its last
        beat's word is queued: when result words with no kept lane end the stream (a column
        tile's words past CH1, dropped by the store unit's walk), gaps[0] cycles before the
        last result word (docs/rtl.md "float32 and the one-cycle corners")."""
        if not words:
            return 0
        K = self.K["SEQ_STORE_TAIL"]
        burst = int(self.fmt.mem["MEM_BURST_BEATS"])
        part = words % burst
        if not part:
            g0 = gaps[0] if gaps is not None and len(gaps) and not late else 0
            return K + burst + late - g0
        if words < burst:
            return K + 1 + part + late
        gap = gaps[part] if gaps is not None and part < len(gaps) else part
        return part + max(K + 1 + late, K + burst - gap)

    #: rounds of the stream / store iteration of a RUN that has both simulations
    STORE_ITERATIONS = 8

    def _store_holds(self, t: int, cycles: int, store: tuple, sched: tuple, need) -> np.ndarray:
        """The store unit's holds of the core (:func:`_store_sim`, no state changed) before
        each of `need`'s stall-free cycles: the cumulative hold of the last result word due
        before it."""
        s_r, offer = self._store_offers(t, 0, cycles, store, sched)
        chunks = list(zip(store[0].tolist(), store[1].tolist()))
        prior = tuple(b for b in self.wr_bursts if b > offer[0])
        _, hs, _, _, _ = _store_sim(chunks, offer, self.fmt.mem,
                                 int(self.fmt.mem["STORE_WQ_WORDS"]), prior)
        cum = np.asarray(hs, np.int64) - np.asarray(offer, np.int64)
        j = np.searchsorted(np.asarray(s_r, np.int64), np.asarray(need, np.int64),
                            side="left") - 1
        return np.where(j >= 0, cum[np.maximum(j, 0)], 0)

    def _store_offers(self, t: int, shift: int, cycles: int, store: tuple,
                      sched: tuple | None) -> tuple[list, list]:
        """(stall-free cycle, offer cycle) of each result word: see :meth:`_run_store_sim`."""
        s_r = cycles - 3 - np.asarray(store[2], np.int64)[::-1]
        if sched is None or not len(sched[1]) or len(sched[1]) != len(sched[0]):
            return s_r.tolist(), (t + shift + s_r).tolist()
        st = np.asarray(sched[1], np.int64)
        j = np.searchsorted(np.asarray(sched[0], np.int64), s_r + 1, side="left") - 1
        offer = t + s_r + np.where(j >= 0, st[np.maximum(j, 0)], 0)
        return s_r.tolist(), offer.tolist()

    def _run_store_sim(self, t: int, shift: int, cycles: int, store: tuple,
                       sched: tuple | None = None) -> tuple[int, int]:
        """A RUN's end and its last write response + 1 (its write beats in `_store_beats`:
        WR_BEATS counts gap words, not dropped words) from :func:`_store_sim`: the job's
        stall-free schedule from t (its result word r offered a cycle before its schedule's
        cycle, as the activation side counts), shifted by the stall waiting for activation
        words (`shift`; with `sched`, (need times, stall after each word) of a simulated
        stream: a word due at stall-free cycle s by the stall after the last activation word
        needed before s), held while the store unit's queue is full."""
        chunks = list(zip(store[0].tolist(), store[1].tolist()))
        _, offer = self._store_offers(t, shift, cycles, store, sched)
        prior = tuple(b for b in self.wr_bursts if b > offer[0])
        held, _, last_b, bs, beats = _store_sim(chunks, offer, self.fmt.mem,
                                                int(self.fmt.mem["STORE_WQ_WORDS"]), prior)
        self.wr_bursts = bs
        self._store_beats = beats
        end = t + shift + cycles + held
        return end, (last_b + 1 if last_b is not None else end)

    def end(self) -> int:
        fin = max(self.taken, self.block_end) + self.K["SEQ_END"]
        out = max(fin, self.wr_done, self.loads_done, self.core_free) + \
            int(self.fmt.mem["IRQ_LATENCY"])
        if self.events is not None and (not self.events or self.events[-1][0] != "end"):
            self.events.append(("blocks", list(self.block_first)))
            self.events.append(("end", out))
        return out


def list_words_of(ddr: "Ddr", list_addr: int, fmt: Format, limit: int = 1 << 16) -> int | None:
    """Words of the list at `list_addr` up to and including END, following the headers' LEN as
    the fetcher's END scan does; None when the chain hits an unknown opcode, LEN 0 or a fault
    first (the list fails; its blocks are then read as needed)."""
    pc, n = list_addr, 0
    try:
        for _ in range(limit):
            h = fmt.fields_of("HEADER", int(ddr.read(pc, 8).view(_U64)[0]))
            op = fmt.opnames.get(h["OP"])
            if op is None or h["LEN"] == 0:
                return None
            n += h["LEN"]
            if op == "END":
                return n
            pc += 8 * h["LEN"]
    except DdrFault:
        return None
    return None


@dataclass
class RunResult:
    """What one command list did: CL_* register values, as the core would report them."""

    cycles: int = 0
    idle_cycles: int = 0
    compute_cycles: int = 0
    rd_beats: int = 0
    wr_beats: int = 0
    descs: int = 0
    runs: int = 0
    error: int = 0                  # CL_ERR bits
    error_pc: int = 0
    error_tag: int = 0
    job_err: int = 0                # the 1.2 ERR bits of a failed RUN
    message: str = ""
    #: per descriptor TAG (see :func:`_tag_span`): the golden model's split of CL_CYCLES and of
    #: the stream words by node (no register holds it)
    tags: dict = field(default_factory=dict)

    def node_words(self, tag: int) -> tuple[dict, dict]:
        """(words in by stream, words out by stream) of one node, as the 1.2 counters name them."""
        span = self.tags.get(tag, [0, 0, 0, 0, 0])
        return {"wgt": span[4], "act": span[2]}, {"res": span[3]}

    def node_cycles(self, tags) -> list[tuple[int, int]]:
        """(cycles, idle cycles) per tag of `tags` (a partition's nodes in list order): each
        node from the end of the one before to the end of its last job, the last to the end of
        the list, so they add up to CL_CYCLES and IDLE."""
        out, prev = [], 0
        for i, t in enumerate(tags):
            end, comp = self.tags.get(t, (prev, 0))[:2]
            if i == len(tags) - 1:
                end = self.cycles
            out.append((end - prev, end - prev - comp))
            prev = end
        return out


class Executor:
    """Runs command lists from DDR on a 1.2 core model (the datapath) plus the 2.0 units."""

    MAX_DESCS = 1 << 16
    #: compiled forms kept per register set (a streamed node's pages sharing a scratch half)
    MAX_VARIANTS = 32

    def __init__(self, core: Core | None = None, fmt: Format | None = None,
                 fast_path: bool = True) -> None:
        """`fast_path` False runs every job through the core's register/stream protocol (START,
        push, pop) instead of :mod:`dtpu.hw.fast`'s compiled jobs: the reference the fast path
        is proven equal to (tests/test_cmdlist.py); jobs the fast path does not compile run
        that way anyway."""
        self.core = core or Core()
        self.fmt = fmt or Format(self.core.cfg)
        self.fast_path = fast_path
        self._compiled: dict = {}
        self._gather_cache: dict = {}
        self._decoded: dict = {}     # list address -> (its bytes, decoded steps)
        #: a list to collect the Timeline's per-descriptor events into (None: off; a list's
        #: events are recorded only when its timeline is computed, not when reused)
        self.events: list | None = None
        self._res_gaps: tuple | None = None
        c = self.core.cfg
        self._job_regs = {reg.offset: reg.name for reg in c.registers if reg.access == "rw"
                          and reg.name not in ("CTRL",)}

    def run(self, ddr: Ddr, list_addr: int) -> RunResult:
        """Fetch, decode and execute the list at `list_addr`.

        Emulation speed, not semantics: the decoding of a list that reached its END is kept
        with the list's bytes and reused while they are unchanged (compared on every run), and
        so is its timeline once a run of it succeeded: the memory model's figures are a function
        of the descriptors alone, so a later run of the same bytes moves the data and computes
        without redoing them. Should that run fail at descriptor k, the timeline up to k is
        rebuilt from the recorded memory-model steps, as a run that decoded it would have it."""
        f = self.fmt
        r = RunResult()
        regs: dict[int, int] = {}
        cached = self._decoded.get(list_addr)
        entry = None
        if cached is not None:
            try:
                if ddr.read(list_addr, len(cached[0])).tobytes() == cached[0]:
                    entry = cached
            except DdrFault:
                entry = None
        if entry is not None and entry[1] and entry[1][-1][2] == "END":
            words = sum(st[3] for st in entry[1])
        else:
            words = list_words_of(ddr, list_addr, f)
        tl: Timeline | None = Timeline(f, list_words=words, events=self.events,
                                       list_addr=list_addr)
        k = 0
        try:
            if entry is None:
                self._decode_list(ddr, list_addr, r, tl, regs)
            elif entry[3] is None:   # decoded, never ran to the end: record its timeline
                calls: list = []
                for step in entry[1]:
                    self._step(ddr, list_addr, step, r, tl, regs, calls)
                entry[2][:] = calls
                entry[3] = _timing_of(r, tl)
            else:
                tl = None
                for k, step in enumerate(entry[1]):
                    self._step(ddr, list_addr, step, r, None, regs)
        except (_ClError, DdrFault) as e:
            r.error |= f.errors[e.kind]
            r.message = str(e)
            if tl is None:
                tl = self._timeline_upto(entry, k, r, list_addr)
        if tl is None:
            cycles, compute, rd, wr, descs, runs, tags = entry[3]
            r.cycles, r.compute_cycles, r.idle_cycles = cycles, compute, cycles - compute
            r.rd_beats, r.wr_beats, r.descs, r.runs, r.tags = rd, wr, descs, runs, tags
        else:
            end = tl.end()
            r.cycles = end
            r.compute_cycles = tl.compute
            r.idle_cycles = end - tl.compute
            r.rd_beats = tl.rd_beats
            r.wr_beats = tl.wr_beats
        if r.error:
            log.warning("command list at %#x failed at offset %d (tag %#x): %s", list_addr,
                        r.error_pc, r.error_tag, r.message)
        return r

    def _timeline_upto(self, entry, k: int, r: RunResult,
                       list_addr: int | None = None) -> "Timeline":
        """The timeline of a run that failed at step k: the recorded memory-model steps before
        it, then k's fetch (what :meth:`_step` had done when k's data movement failed)."""
        words = sum(st[3] for st in entry[1]) if entry[1][-1][2] == "END" else None
        tl = Timeline(self.fmt, list_words=words, list_addr=list_addr)
        r.descs, r.runs, r.tags = 0, 0, {}
        for call in entry[2][:k]:
            _replay_call(tl, r, call)
        tl.fetch(entry[1][k][3])
        r.descs += 1
        return tl

    def _decode_list(self, ddr: Ddr, list_addr: int, r: RunResult, tl: "Timeline",
                     regs: dict) -> list:
        """Decode descriptor by descriptor from DDR, executing each as it comes (an error stops
        the list where it is); returns the steps once END is reached, and caches them."""
        f = self.fmt
        pc = list_addr
        steps = []
        calls: list = []
        while True:
            if len(steps) >= self.MAX_DESCS:
                raise _ClError("BAD_LENGTH", f"no END within {self.MAX_DESCS} descriptors")
            head = int(ddr.read(pc, 8).view(_U64)[0])
            h = f.fields_of("HEADER", head)
            r.error_pc, r.error_tag = pc - list_addr, h["TAG"]
            op = f.opnames.get(h["OP"])
            if op is None:
                raise _ClError("BAD_OPCODE", f"opcode {h['OP']} at list offset {pc - list_addr}; "
                               f"accepted: {f.opcodes}")
            n = h["LEN"]
            ok = (n == f.length(op)) if op != "REGS" else n >= 2
            if not ok:
                raise _ClError("BAD_LENGTH", f"{op} with LEN={n}; its layout has "
                               f"{f.length(op) if op != 'REGS' else '>= 2'} words")
            body = ddr.read(pc, 8 * n).view(_U64)[1:]
            if op == "LOAD":
                payload = (f.fields_of("LOAD1", body[0]), f.fields_of("LOAD2", body[1]))
            elif op == "REGS":
                payload = [(f.field("REG", w, "OFFSET"), f.field("REG", w, "VALUE")) for w in body]
            elif op == "POST":
                payload = {k: f.fields_of(k, w) for k, w in zip(f.layout["POST"][1:], body)}
            elif op == "RUN":
                payload = {k: f.fields_of(k, w) for k, w in zip(f.layout["RUN"][1:], body)}
                payload["FIRST"] = bool(h["FLAGS"] & f.flag_first)
            else:
                payload = None
            step = (pc - list_addr, h, op, n, payload)
            steps.append(step)
            pc += 8 * n
            if op == "END":
                # cached before END runs: a list that decodes whole keeps its decoding even
                # if a step failed (its timeline is recorded by a run that succeeds)
                if len(self._decoded) > 256:
                    self._decoded.clear()
                self._decoded[list_addr] = [ddr.read(list_addr, pc - list_addr).tobytes(), steps,
                                            [], None]
            self._step(ddr, list_addr, step, r, tl, regs, calls)
            if op == "END":
                break
        entry = self._decoded[list_addr]
        entry[2][:] = calls
        entry[3] = _timing_of(r, tl)
        return steps

    def _step(self, ddr: Ddr, list_addr: int, step: tuple, r: RunResult, tl: "Timeline | None",
              regs: dict, calls: list | None = None) -> None:
        """One descriptor: its data movement and computation, and (with `tl`) its memory-model
        step, recorded into `calls` for :func:`_replay_call`; without `tl`, the data only."""
        f = self.fmt
        off, h, op, n, payload = step
        r.error_pc, r.error_tag = off, h["TAG"]
        if tl is not None:
            t_fetch = tl.fetch(n)
            r.descs += 1
        call = None
        if op == "END":
            call = ("F", n)
        elif op == "LOAD":
            l1, l2 = payload
            self._load(ddr, l1, l2)
            if tl is not None:
                tl.load(t_fetch, l1["COUNT"], l2["AFTER"])
                _tag_span(r, h["TAG"], None, wgt=l1["COUNT"])
                call = ("L", n, l1["COUNT"], l2["AFTER"], h["TAG"])
        elif op == "REGS":
            job_names = self._job_regs
            for reg_off, val in payload:
                if reg_off not in job_names:
                    raise _ClError("BAD_FIELD", f"REGS offset {reg_off:#x} is not a job register; "
                                   f"accepted: {sorted(hex(o) for o in job_names)}")
                regs[reg_off] = val
            if tl is not None:
                tl.regs(t_fetch, len(payload))
            call = ("G", n, len(payload))
        elif op == "POST":
            cycles, beats, src, dst = self._post(ddr, regs, payload, r)
            if tl is not None:
                # the store unit writes the packed results as its write queue does: the
                # words of the items' bytes, gaps of up to SEQ_STORE_GAP words filled
                post = self._post_timing(regs, payload)
                wbeats = post[7]
                tl.run(t_fetch, src, dst, beats, wbeats, cycles, post=post)
                r.runs += 1
                _tag_span(r, h["TAG"], tl.core_free, cycles)   # the post unit: no stream
                call = ("R", n, src, dst, beats, wbeats, cycles, 0, h["TAG"], False, None, None,
                        post)
        else:
            d = payload
            cycles, act_beats, res_beats, src, dst = self._run(ddr, regs, d, h, r)
            if tl is not None:
                store_reads, wr, part, beat_word = self._res_beats(d, res_beats)
                act_req = (self._act_req(d), self._act_read_beats(d, act_beats), wr, part,
                           self._act_stream(d, act_beats, res_beats))
                gaps = self._res_gaps
                if gaps is not None and beat_word is not None:   # beats from the end -> words
                    gaps = tuple(gaps[min(k, len(gaps) - 1)] for k in beat_word)
                self._res_gaps = gaps
                acc = self._acc_timing(d, res_beats)
                if acc is not None:
                    act_req = act_req + acc
                # the store unit's write queue, one model a RUN (docs/rtl.md "The store unit's
                # write queue in the Timeline"): a depthwise stream with short write runs has it
                # inside _stream_sim (dw_timing's result words), other scattered writes _store_sim
                stream = act_req[4]
                dw_res = stream is not None and len(stream) > 4 and stream[4] is not None
                store = self._store_plan(d, res_beats) if acc is None and not dw_res else None
                tl.run(t_fetch, src, dst, act_beats, res_beats, cycles, store_reads=store_reads,
                       act_req=act_req, res_gaps=gaps, store=store)
                r.runs += 1
                _tag_span(r, h["TAG"], tl.core_free, cycles, act_beats, res_beats)
                call = ("R", n, src, dst, act_beats, res_beats, cycles, store_reads, h["TAG"], True,
                        act_req, self._res_gaps, None, store)
        if calls is not None:
            calls.append(call)

    # -- load unit

    def _load(self, ddr: Ddr, l1: dict, l2: dict) -> None:
        c = self.core.cfg
        count, addr, mem = l1["COUNT"], l2["ADDR"], l2["MEM"]
        if l1["SRC"] % 8:
            raise _ClError("BAD_FIELD", f"LOAD SRC {l1['SRC']:#x} is not 8-byte aligned")
        limit = c.WEIGHT_WORDS if mem == 0 else 2 * c.PARAM_ENTRIES if mem == 1 else -1
        if limit < 0:
            raise _ClError("BAD_FIELD", f"LOAD MEM={mem}; accepted: 0 (weights), 1 (parameters)")
        if mem == 1 and (addr * 2 + count > limit or count % 2):
            raise _ClError("BAD_FIELD", f"LOAD of {count} parameter words at entry {addr}: past "
                           f"{c.PARAM_ENTRIES} entries or not whole entries")
        if mem == 0 and addr + count > limit:
            raise _ClError("BAD_FIELD", f"LOAD of {count} weight words at {addr}: past {limit}")
        words = ddr.read(l1["SRC"], 8 * count).view(_U64)
        self.core._write_memory("LOAD_WGT" if mem == 0 else "LOAD_PARAM", addr, words.copy())

    def _gather(self, ddr: Ddr, a0: dict, a1: dict, a2: dict, a3: dict, a4: dict) -> np.ndarray:
        """The activation words the load unit streams to the core for one RUN."""
        f = self.fmt
        mode, L, es = a0["MODE"], a0["LANES"], a0["ESIZE"]
        if mode == f.act_modes["NONE"]:
            return np.zeros(0, _U64)
        if es not in _EDT or L * es != 8:
            raise _ClError("BAD_FIELD", f"ACT LANES={L} x ESIZE={es} is not one 64-bit word")
        edt = _EDT[es]
        pad = edt.type(a0["PAD"] & ((1 << (8 * es)) - 1))
        n, h, w, ch = a1["N"], a1["H"], a1["W"], a1["C"]
        x = ddr.read(a0["SRC"], n * h * w * ch * es).view(edt).reshape(n, h, w, ch)
        if mode == f.act_modes["WINDOWS"]:
            k0, k1 = a3["K0"], a3["K1"]
            if not 0 <= k0 < k1 <= a3["KP"] // L or a3["KP"] % L:
                raise _ClError("BAD_FIELD", f"ACT words K0={k0}..K1={k1} outside KP={a3['KP']} lanes")
            if (a2["KH"], a2["KW"], a2["SY"], a2["SX"], a2["PT"], a2["PL"], a2["OH"], a2["OW"]) \
                    == (1, 1, 1, 1, 0, 0, h, w) and a3["KP"] >= ch:
                # a 1x1 window over the whole image (pointwise convolutions, FULLY_CONNECTED):
                # each pixel's K-vector is its channels, the rest PAD; no index to gather by
                lanes = np.empty((n * h * w, a3["KP"]), edt)
                lanes[:, :ch] = x.reshape(-1, ch)
                lanes[:, ch:] = pad
                return np.ascontiguousarray(lanes[:, k0 * L:k1 * L]).view(_U64).reshape(-1)
            key = ("w", tuple(sorted(a1.items())), tuple(sorted(a2.items())), a3["KP"])
            index = self._gather_cache.get(key)
            if index is None:
                if len(self._gather_cache) > 64:
                    self._gather_cache.clear()
                index = self._gather_cache[key] = _window_index(a1, a2, a3["KP"])
            flat = np.empty(n * h * w * ch + 1, edt)
            flat[:-1] = x.reshape(-1)
            flat[-1] = pad
            lanes = flat.take(index)                    # (pixels, KP)
            lanes = np.ascontiguousarray(lanes[:, k0 * L:k1 * L])
            return lanes.view(_U64).reshape(-1)
        if mode == f.act_modes["CHANNELS"]:
            rep, ch0, chans, nchunk, cv = a3["KP"], a3["K0"], a3["K1"], a3["NCHUNK"], a4["CV"]
            if rep < 1 or nchunk < 1 or chans % (nchunk * L) or cv != ch * rep:
                raise _ClError("BAD_FIELD", f"ACT CHANNELS: REP={rep}, CHANNELS={chans}, "
                               f"NCHUNK={nchunk}, CV={cv} for C={ch}, {L} lanes")
            if n != 1:
                raise _ClError("BAD_FIELD", f"ACT CHANNELS takes one image (N=1), got N={n}")
            img = x[0]
            if rep > 1:
                img = np.repeat(img, rep, axis=2)
            cp = ceil_div(ch0 + chans, L) * L
            if cp > cv:
                img = np.concatenate([img, np.full((h, w, cp - cv), pad, edt)], axis=2)
            img = img[:, :, ch0:ch0 + chans]
            if nchunk > 1:
                img = img.reshape(h, w, nchunk, chans // nchunk).transpose(2, 0, 1, 3)
            return np.ascontiguousarray(img).view(_U64).reshape(-1)
        raise _ClError("BAD_FIELD", f"ACT MODE={mode}; accepted: {f.act_modes}")

    def _act_req(self, d: dict) -> int:
        """Cycles from a RUN's start to its activation stream's first read request in the
        load unit (dtpu_cl_load, docs/rtl.md): its setup (SEQ_ACT_SETUP_WINDOWS /
        SEQ_ACT_SETUP_CHANNELS: the registered fields, the AGU's setup, the request path) and
        one cycle per element its first run collects (up to MEM_BURST_BEATS beats; a run closes
        when the next element does not continue it). Exact for word-mode streams (every word
        one aligned DDR word); a lane-mode stream collects lanes, not words (approximate)."""
        f = self.fmt
        mode, L = d["ACT0"]["MODE"], max(1, d["ACT0"]["LANES"])
        K, burst = f.mem, int(f.mem["MEM_BURST_BEATS"])
        if mode == f.act_modes["CHANNELS"]:
            setup = int(K["SEQ_ACT_SETUP_CHANNELS"])
        else:
            setup = int(K["SEQ_ACT_SETUP_WINDOWS"])
        first = _first_words(f, d, burst + 1)
        if first is None:                       # lane mode: MEM_BURST_BEATS words of lanes
            return setup + burst * L
        n = 0
        prev = None
        for a in first:
            if n and (a is None or prev is None or a != prev + 1):
                break
            n += 1
            prev = a
            if n == burst:
                return setup + n          # closed as it reaches MEM_BURST_BEATS
        return setup + n + 1              # closed by the next element or the stream's end

    def _res_beats(self, d: dict, words: int) -> tuple[int, int, int, list | None]:
        """(beats the store unit reads back, beats it writes, 1 if its last word is a partial
        one the packer closes a cycle later, for the last write beats (k = 0: the last) how many
        result words before the last one completes each, None when beats are words) for a
        RUN's `words` result words:
        RES ACC takes one int64 sum a beat, each kept (pixel, channel) read (unless FIRST) and
        written; ITEMS over whole rows (CH0 0 to DSTC) the words of the destination's bytes;
        otherwise (channel slices, whose gaps the store unit may fill) the result words."""
        f = self.fmt
        r0, r1, r2 = d["RES0"], d["RES1"], d["RES2"]
        if r0["MODE"] == f.res_modes["NONE"]:
            return 0, 0, 0, None
        pix, ch0, dstc = r1["PIX"], r2["CH0"], r2["DSTC"]
        hi = min(r2["CH1"], ch0 + r1["OUTER"] * r1["INNER"] * r2["GW"])
        if r0["MODE"] == f.res_modes["ACC"]:
            sums = pix * max(0, hi - ch0)
            return (0 if d.get("FIRST") else sums), sums, 0, None
        if r0["MODE"] == f.res_modes["ITEMS"] and ch0 == 0 and hi == dstc:
            es, lanes = r0["ESIZE"], max(1, r0["LANES"])
            nbytes = pix * dstc * es
            end = r0["DST"] % 8 + nbytes
            beats = (end + 7) // 8 if nbytes else 0
            beat_word = None
            if beats and words and words % pix == 0:
                # result words per pixel (items of `lanes` channels); the word holding a byte
                wpp = words // pix
                row = dstc * es

                def word_of(b: int) -> int:
                    p_, o = divmod(b, row)
                    return p_ * wpp + (o // es) // lanes

                off = r0["DST"] % 8
                beat_word = [words - 1 - word_of(min(8 * (beats - 1 - k) + 7 - off, nbytes - 1))
                             for k in range(min(beats, 4 * int(f.mem["MEM_BURST_BEATS"])))]
            return 0, beats, int(end % 8 != 0), beat_word
        return 0, words, 0, None

    def _store_plan(self, d: dict, words: int) -> tuple | None:
        """For a RUN whose ITEMS the store unit writes as scattered bursts (items of a pixel not
        followed by the next pixel's: channel slices, OUTER > 1, e.g. a depthwise job's
        channel chunks), whose writes may not keep up with the core (the write master keeps
        MAX_OUTSTANDING bursts a write latency): arrays of each result word's byte address and
        kept bytes, and of how many cycles before the last word each word comes stall-free (k = 0
        the last), for :func:`_store_sim`; None otherwise (whole rows: 16-word bursts that keep
        up, the write tail formula :meth:`Timeline._store_tail`). docs/rtl.md "float32 and
        the one-cycle corners"."""
        f = self.fmt
        r0, r1, r2 = d["RES0"], d["RES1"], d["RES2"]
        su = self._res_setup
        if r0["MODE"] != f.res_modes["ITEMS"] or not words or su is None:
            return None
        L, es = max(1, r0["LANES"]), r0["ESIZE"]
        pix, outer, inner = r1["PIX"], r1["OUTER"], r1["INNER"]
        gw, ch0, ch1, dstc = r2["GW"], r2["CH0"], r2["CH1"], r2["DSTC"]
        wpi = -(-gw // L)
        if words != outer * pix * inner * wpi:
            return None
        if outer == 1 and ch0 == 0 and min(ch1, inner * gw) >= dstc:
            return None                 # whole rows: consecutive words, 16-word bursts
        o, p_, i, w = np.meshgrid(np.arange(outer), np.arange(pix), np.arange(inner),
                                  np.arange(wpi), indexing="ij")
        c0 = ch0 + (o * inner + i) * gw + w * L
        kept = np.clip(np.minimum(np.minimum(L, gw - w * L), ch1 - c0), 0, None)
        addr = r0["DST"] + (p_ * dstc + c0) * es
        kept, addr = kept.reshape(-1), addr.reshape(-1)
        gaps = _result_gaps_array(self.core.cfg, su, words - 1)
        if gaps is None or len(gaps) != words:
            return None
        # arrays, not tuples: the plan is kept with the list's recorded timing
        return (addr.astype(np.int64), (kept * es).astype(np.int16), gaps)

    def _post_timing(self, regs: dict, d: dict) -> tuple:
        """What :meth:`Timeline._post_run` needs of a POST: (SRC, PIX, CH0, CH, DSTC, result
        lanes a word, 1 if the store unit's last write word is a partial one, the write beats,
        the beats of the last write burst)."""
        c = self.core.cfg
        p1, p2, p3 = d["POST1"], d["POST2"], d["POST3"]
        job = c.decode("JOB", regs.get(c.REG_JOB, 0))
        prec = next((p for p in c.ENABLED if c.prec_code(p) == job["PREC"]), None)
        lanes, dt = out_lanes(c, prec, c.OUT_MODE_REQUANT)
        es = np.dtype(dt).itemsize
        items = [(p1["DST"] + (p * p3["DSTC"] + p2["CH0"]) * es, p2["CH"] * es)
                 for p in range(p2["PIX"])]
        runs = _write_runs(items, int(self.fmt.mem["MEM_BURST_BEATS"]),
                           int(self.fmt.mem["SEQ_STORE_GAP"]))
        last = items[-1] if items else (0, 0)
        part = int((last[0] + last[1]) % 8 != 0) if runs else 0
        return (p1["SRC"], p2["PIX"], p2["CH0"], p2["CH"], p3["DSTC"], max(1, lanes), part,
                sum(runs), runs[-1] if runs else 0, p1["DST"], es)

    def _acc_timing(self, d: dict, words: int) -> tuple | None:
        """For a RES ACC RUN of `words` result words, what :meth:`Timeline._acc_run` needs (a
        one-element tuple holding an :class:`_AccRun`); None for other RUNs.

        dtpu_cl_store adds one kept lane a cycle (one R and one W beat per int64 sum), so a
        result word of `kept` lanes occupies it `kept` cycles (at least one) and a word the core
        offers while the unit is busy stalls the whole core (the 1.2 core's global stall); its
        read-ahead walk (ACC without FIRST) requests the items' sums one walk step (a result
        word) at a time, consecutive items merged; the load unit requests each run of the
        activation stream when the run is collected (one element a cycle)."""
        f = self.fmt
        r0, r1, r2 = d["RES0"], d["RES1"], d["RES2"]
        if r0["MODE"] != f.res_modes["ACC"] or not words:
            return None
        L, gw = max(1, r0["LANES"]), max(1, r2["GW"])
        ch0, ch1, dstc = r2["CH0"], r2["CH1"], r2["DSTC"]
        wpi = -(-gw // L)
        kept: list[int] = []
        items: list[tuple[int, int, int]] = []     # (walk step, sum address, sums)
        step = 0
        for p in range(r1["PIX"]):
            for it in range(r1["OUTER"] * r1["INNER"]):
                c0 = ch0 + it * gw
                n_item = max(0, min(gw, ch1 - c0))
                if n_item:
                    items.append((step, r0["DST"] + (p * dstc + c0) * 8, n_item))
                for w in range(wpi):
                    kept.append(max(0, min(L, n_item - w * L)))
                step += wpi
        kept = kept[:words]
        su = self._res_setup
        gaps = _result_gaps(self.core.cfg, su, words - 1) if su is not None else None
        if gaps is None or len(gaps) < len(kept):
            res_t = None
        else:       # cycles before DONE (the last word 2 before it), per word in order
            res_t = [2 + gaps[len(kept) - 1 - k] for k in range(len(kept))]
        # the read requests (walk step it leaves at, address, sums): an item at the address
        # where the pending request ends joins it unless that is full (MEM_BURST_BEATS words:
        # it leaves the step after it filled); a pending request leaves when an item that does
        # not continue it comes, or when the walk ends
        reads: list[tuple[int, int, int]] = []
        if not d.get("FIRST"):
            merge = int(f.mem["MEM_BURST_BEATS"])
            pend = None
            for st, a, n in items:
                if pend is not None and pend[0] + 8 * pend[1] == a:
                    pend[1] += n
                    if pend[1] >= merge:
                        reads.append((st + 1, pend[0], pend[1]))
                        pend = None
                    continue
                if pend is not None:
                    reads.append((st, pend[0], pend[1]))
                pend = [a, n]
            if pend is not None:
                reads.append((step, pend[0], pend[1]))
        act = None
        if su is not None and su.opcode == "GEMM":
            # NT column tiles: a pixel's KW words are taken in its first step, pixels NT steps
            # apart (:func:`_act_schedule`); the stream is read once
            total = su.m * su.kw
            wa = _first_words(f, d, total)
            if wa is not None and len(wa) == total and None not in wa:
                act = (wa, su.kw, su.nt * max(su.kw, su.wpi))
        # the write queue's runs: consecutive items merged up to MEM_BURST_BEATS words; the
        # last run is the RUN's last burst
        burst = int(f.mem["MEM_BURST_BEATS"])
        runs: list[list[int]] = []
        for _, a, n in items:
            if runs and runs[-1][0] + 8 * runs[-1][1] == a:
                runs[-1][1] += n
            else:
                runs.append([a, n])
        last_burst = 0
        if runs:
            last_burst = runs[-1][1] % burst or burst
        # the write queue's bursts (dtpu_cl_store_wq): consecutive words up to MAX_RUN; a gap the
        # queue would fill with strobe-less words is not modelled (wsegs None)
        wsegs: list[int] | None = []
        gap = int(f.mem["SEQ_STORE_GAP"])
        for k_, (a0, n0) in enumerate(runs):
            if k_ and 0 < (a0 - (runs[k_ - 1][0] + 8 * runs[k_ - 1][1])) // 8 <= gap:
                wsegs = None
                break
            wsegs += [burst] * (n0 // burst) + ([n0 % burst] if n0 % burst else [])
        return (_AccRun(tuple(kept), None if res_t is None else tuple(res_t), tuple(reads),
                        last_burst, act, None if wsegs is None else tuple(wsegs)),)

    def _act_read_beats(self, d: dict, words: int) -> int:
        """The beats the load unit reads for a RUN's activation stream of `words` words: one
        per element that is not PAD and not on the word of the beat before it (word mode: an
        element is a word; lane mode: a lane, so the lanes of one DDR word share its beat).
        The stream's words when every word is one distinct DDR word (1x1 over the whole
        tensor, depthwise CHANNELS in word mode)."""
        f = self.fmt
        a0, a1, a2, a3, a4 = (d[k] for k in ("ACT0", "ACT1", "ACT2", "ACT3", "ACT4"))
        mode, L, es = a0["MODE"], a0["LANES"], a0["ESIZE"]
        n, h, w, c = a1["N"], a1["H"], a1["W"], a1["C"]
        if not words or L < 1 or es < 1:
            return words
        size = n * h * w * c
        word_mode = c % L == 0 and a0["SRC"] % 8 == 0
        if mode == f.act_modes["WINDOWS"]:
            kp, k0, k1 = a3["KP"], a3["K0"], a3["K1"]
            if word_mode and (a2["KH"], a2["KW"], a2["SY"], a2["SX"], a2["PT"], a2["PL"],
                              a2["OH"], a2["OW"]) == (1, 1, 1, 1, 0, 0, h, w) and kp == c:
                return words                              # the tensor's words, each once
            key = ("w", tuple(sorted(a1.items())), tuple(sorted(a2.items())), kp)
            index = self._gather_cache.get(key)
            if index is None:
                index = _window_index(a1, a2, kp)
            e = index[:, k0 * L:k1 * L].reshape(-1)
        elif mode == f.act_modes["CHANNELS"]:
            rep, ch0, chans, nchunk = a3["KP"], a3["K0"], a3["K1"], max(1, a3["NCHUNK"])
            if word_mode and rep == 1 and ch0 % L == 0 and chans % (nchunk * L) == 0 \
                    and ch0 + chans <= c:
                return words
            cv = c * rep
            ch = np.arange(ch0, ch0 + chans)              # channels after REP, per pixel
            src = np.where(ch < cv, ch // max(rep, 1), -1)
            per = chans // nchunk
            src = src.reshape(nchunk, 1, per)
            pix = np.arange(h * w).reshape(1, -1, 1)
            e = np.where(src >= 0, pix * c + src, size).reshape(-1)
            word_mode = word_mode and rep == 1 and ch0 % L == 0
        else:
            return words
        if word_mode:
            e = e[::L]
        e = e.astype(np.int64)
        wa = (a0["SRC"] + e * es) // 8
        wa = wa[e != size]
        return int(1 + np.count_nonzero(wa[1:] != wa[:-1])) if wa.size else 0

    #: longest whole-tensor 1x1 stream :meth:`Timeline.run` simulates when the list's blocks
    #: are read during it (longer ones keep the one-read model: the simulation's cost)
    PLAIN_SIM_WORDS = 1 << 14

    def _act_stream(self, d: dict, words: int, res_words: int | None = None):
        """(element word addresses, elements per word, the core's need times) of a RUN's
        activation stream for :func:`_stream_sim`, or None when the stream keeps up with the
        core (the Timeline's first-word shift is exact: 1x1 over the whole tensor) or the job
        is neither a GEMM over WINDOWS nor a DWCONV. A DWCONV's CHANNELS stream:
        :func:`dw_timing.dw_stream` (also the intake constant and, when its `res_words` result
        words are written in short runs, their times and DDR words for the store model)."""
        f = self.fmt
        sched = self._act_sched
        a0, a1, a2, a3 = d["ACT0"], d["ACT1"], d["ACT2"], d["ACT3"]
        if words and a0["MODE"] == f.act_modes["CHANNELS"]:    # a DWCONV's (dw_timing)
            return dw_timing.dw_stream(self.core.cfg, self._res_setup, d, words,
                                       int(f.mem["SEQ_ACT_SETUP_CHANNELS"]), res_words)
        if not words or sched is None or a0["MODE"] != f.act_modes["WINDOWS"]:
            return None
        L, es = a0["LANES"], a0["ESIZE"]
        n, h, w, c = a1["N"], a1["H"], a1["W"], a1["C"]
        kp, k0, k1 = a3["KP"], a3["K0"], a3["K1"]
        word_mode = c % L == 0 and a0["SRC"] % 8 == 0
        kw_, nt, period, m = sched
        if word_mode and (a2["KH"], a2["KW"], a2["SY"], a2["SX"], a2["PT"], a2["PL"], a2["OH"],
                          a2["OW"]) == (1, 1, 1, 1, 0, 0, h, w) and kp == c:
            # the tensor's words in order: the stream keeps up (one read, the first-word
            # shift) unless the list's blocks take the read master between its runs
            # (:meth:`Timeline.run` then simulates it); streams of up to PLAIN_SIM_WORDS
            if kw_ != k1 - k0 or m * kw_ != words or words > self.PLAIN_SIM_WORDS:
                return None
            cfg = self.core.cfg.CFG_CYCLES
            need = (cfg + (np.arange(m, dtype=np.int64) * nt * period)[:, None]
                    + np.arange(kw_, dtype=np.int64)[None, :]).reshape(-1)
            return (a0["SRC"] // 8 + k0 + np.arange(m, dtype=np.int64)[:, None] * (c // L)
                    + np.arange(kw_, dtype=np.int64)[None, :]).reshape(-1), 1, need, \
                int(f.mem["SEQ_ACT_SETUP_WINDOWS"]), None, True
        if kw_ != k1 - k0 or m * kw_ != words:
            return None
        key = ("w", tuple(sorted(a1.items())), tuple(sorted(a2.items())), kp)
        index = self._gather_cache.get(key)
        if index is None:
            index = _window_index(a1, a2, kp)
        size = n * h * w * c
        e = index[:, k0 * L:k1 * L:(L if word_mode else 1)].reshape(-1).astype(np.int64)
        wa = np.where(e == size, -1, (a0["SRC"] + e * es) // 8)
        cfg = self.core.cfg.CFG_CYCLES
        need = (cfg + (np.arange(m, dtype=np.int64) * nt * period)[:, None]
                + np.arange(kw_, dtype=np.int64)[None, :]).reshape(-1)
        return wa, 1 if word_mode else L, need

    # -- store unit

    def _scatter(self, ddr: Ddr, r0: dict, r1: dict, r2: dict, words: np.ndarray,
                 first: bool = False) -> None:
        f = self.fmt
        mode, lanes, es = r0["MODE"], r0["LANES"], r0["ESIZE"]
        if mode == f.res_modes["NONE"]:
            return
        acc = mode == f.res_modes["ACC"]
        if mode not in (f.res_modes["ITEMS"], f.res_modes["ACC"]):
            raise _ClError("BAD_FIELD", f"RES MODE={mode}; accepted: {f.res_modes}")
        if lanes not in (1, 2, 4, 8) or (es != 8 if acc else (es not in _EDT or lanes * es != 8)):
            raise _ClError("BAD_FIELD", f"RES LANES={lanes} x ESIZE={es}: "
                           f"{'ACC sums are 8-byte' if acc else 'not one 64-bit word'}")
        edt = np.dtype(f"<i{8 // lanes}") if acc else _EDT[es]
        pix, outer, inner = r1["PIX"], r1["OUTER"], r1["INNER"]
        gw, ch0, ch1, dstc = r2["GW"], r2["CH0"], r2["CH1"], r2["DSTC"]
        wpi = ceil_div(gw, lanes)
        if words.size != outer * pix * inner * wpi:
            raise _ClError("BAD_FIELD", f"RES {outer}x{pix}x{inner} items of {wpi} words = "
                           f"{outer * pix * inner * wpi}, the job produced {words.size}")
        vals = words.view(edt).reshape(outer, pix, inner, wpi * lanes)[..., :gw]
        vals = vals.transpose(1, 0, 2, 3).reshape(pix, outer * inner * gw)
        hi = min(ch1, ch0 + vals.shape[1])
        if hi > dstc or ch0 >= hi:
            raise _ClError("BAD_FIELD", f"RES channels {ch0}..{hi} outside DSTC={dstc}")
        if acc:
            dst = ddr.read(r0["DST"], pix * dstc * 8).view("<i8").reshape(pix, dstc)
            if first:
                dst[:, ch0:hi] = vals[:, :hi - ch0]
            else:
                dst[:, ch0:hi] += vals[:, :hi - ch0]
            return
        dst = ddr.read(r0["DST"], pix * dstc * es).view(edt).reshape(pix, dstc)
        dst[:, ch0:hi] = vals[:, :hi - ch0]

    # -- the post unit on partial sums

    def _post(self, ddr: Ddr, regs: dict, d: dict, r: RunResult) -> tuple:
        core, c = self.core, self.core.cfg
        p1, p2, p3 = d["POST1"], d["POST2"], d["POST3"]
        pix, ch0, ch, dstc = p2["PIX"], p2["CH0"], p2["CH"], p3["DSTC"]
        job = c.decode("JOB", regs.get(c.REG_JOB, 0))
        prec = next((p for p in c.ENABLED if c.prec_code(p) == job["PREC"]), None)
        if prec is None or job["OUT_MODE"] != c.OUT_MODE_REQUANT or prec.is_float:
            raise _ClError("BAD_FIELD", f"POST with JOB.PREC={job['PREC']}, OUT_MODE="
                           f"{job['OUT_MODE']}; accepted: an enabled integer precision, REQUANT")
        pb = regs.get(c.REG_PARAM_BASE, 0)
        if ch < 1 or ch0 + ch > dstc or pb + ch > c.PARAM_ENTRIES:
            raise _ClError("BAD_FIELD", f"POST channels {ch0}+{ch} of {dstc}, parameter entries "
                           f"{pb}+{ch} of {c.PARAM_ENTRIES}")
        sums = ddr.read(p1["SRC"], pix * dstc * 8).view("<i8").reshape(pix, dstc)[:, ch0:ch0 + ch]
        params = core._params(pb, ch, prec, c.OUT_MODE_REQUANT)
        y, err = core._post(sums, prec, c.OUT_MODE_REQUANT, job["RQ_VARIANT"], params, 0,
                            regs.get(c.REG_ACT_MIN, 0), regs.get(c.REG_ACT_MAX, 0))
        if err & c.ERR_FATAL_MASK:
            r.job_err = err
            bits = [n for n, b in c.errors.items() if err & (1 << b)]
            raise _ClError("JOB", f"POST: ERR={err:#x} ({', '.join(bits)})")
        _, dt = out_lanes(c, prec, c.OUT_MODE_REQUANT)
        dt = np.dtype(dt)
        dst = ddr.read(p1["DST"], pix * dstc * dt.itemsize).view(dt).reshape(pix, dstc)
        dst[:, ch0:ch0 + ch] = y
        beats = pix * ch
        cycles = c.CFG_CYCLES + beats + c.LAT_POST
        return (cycles, beats, (p1["SRC"], p1["SRC"] + pix * dstc * 8),
                (p1["DST"], p1["DST"] + pix * dstc * dt.itemsize))

    # -- the core

    def _run_protocol(self, regs: dict, ddr: Ddr, d: dict, r: RunResult):
        """One RUN through the 1.2 protocol: job registers (JOB last), START, the gathered words
        on s_axis_act, DONE, ERR, the result words from m_axis_res."""
        core, c = self.core, self.core.cfg
        for off, v in sorted(regs.items(), key=lambda kv: kv[0] == c.REG_JOB):
            core.write(off, v)
        core.write(c.REG_CTRL, c.encode("CTRL", START=1))
        st = c.reg("STATUS")
        failed_config = not core._pending and core.regs[c.REG_STATUS] & st.field("ERROR").mask
        words = np.zeros(0, _U64)
        if not failed_config:
            try:   # the result words' timing for the Timeline (as the fast path's setup has it)
                su = core._setup(core.regs)
                self._res_setup = su
                self._res_gaps = _result_gaps(c, su, 4 * int(self.fmt.mem["MEM_BURST_BEATS"]))
                self._act_sched = _act_schedule(su)
            except Exception:   # noqa: BLE001  (CONFIG failed: no results)
                pass
            try:
                words = self._gather(ddr, d["ACT0"], d["ACT1"], d["ACT2"], d["ACT3"], d["ACT4"])
            except (_ClError, DdrFault):
                # the stream feeding a started job failed: the unit aborts the core (1.2 SOFT_RESET)
                core.write(c.REG_CTRL, c.encode("CTRL", SOFT_RESET=1))
                raise
            if words.size:
                core.push("act", words)
            left = sum(w.size for w, _ in core._in["act"])
            if core._pending or left:
                core.write(c.REG_CTRL, c.encode("CTRL", SOFT_RESET=1))
                what = f"{left} left over" if left else "the job still waits for more"
                raise _ClError("BAD_FIELD", f"RUN: the ACT fields give {words.size} words, the "
                               f"job's registers take another count ({what})")
        err = core.read(c.REG_ERR)
        cycles = core.read(c.REG_JOB_CYCLES)
        if err & c.ERR_FATAL_MASK:
            r.job_err = err
            core.write(c.REG_ERR, err)
            bits = [n for n, b in c.errors.items() if err & (1 << b)]
            raise _ClError("JOB", f"RUN: the job set ERR={err:#x} ({', '.join(bits)})")
        if err:
            core.write(c.REG_ERR, err)
        res = core.pop()
        return res if res.size else None, words, cycles

    def _run(self, ddr: Ddr, regs: dict, d: dict, head: dict, r: RunResult):
        c = self.core.cfg
        key = tuple(sorted(regs.items()))
        cj = None
        self._res_gaps = None       # the result words' timing for the Timeline
        self._act_sched = None      # the job's activation need schedule (GEMM)
        self._res_setup = None      # the job's setup (the ACC store's rate, :meth:`_acc_timing`)
        if self.fast_path:
            # the same registers run over different memory contents: the pages of a streamed
            # node that land in the same scratch half; one compiled form per content seen
            # (each keeps a snapshot of what it read, :meth:`fast.CompiledJob.valid`)
            variants = self._compiled.setdefault(key, [])
            cj = next((v for v in variants if v == "protocol" or v.valid(self.core)), None)
            if cj is None:
                names = {reg.offset: reg.name for reg in c.registers}
                try:
                    cj = fast.compile_job(self.core, tuple((names[o], v) for o, v in sorted(regs.items())
                                                           if names[o] != "JOB")
                                          + (("JOB", regs.get(c.REG_JOB, 0)),))
                except fast.Unsupported:
                    cj = "protocol"
                if len(variants) >= self.MAX_VARIANTS:
                    variants.pop(0)
                variants.append(cj)
        if not self.fast_path or cj == "protocol":
            res, words, cycles = self._run_protocol(regs, ddr, d, r)
            if res is not None:
                self._scatter(ddr, d["RES0"], d["RES1"], d["RES2"], res, d.get("FIRST", False))
            return self._run_result(d, cycles, words, res)
        if cj.error:   # failed in CONFIG: the core takes nothing, the units move nothing
            _, err = fast.execute(self.core, cj, None)
            r.job_err = err
            bits = [n for n, b in c.errors.items() if err & (1 << b)]
            raise _ClError("JOB", f"RUN: the job failed in CONFIG, ERR={err:#x} ({', '.join(bits)})")
        words = self._gather(ddr, d["ACT0"], d["ACT1"], d["ACT2"], d["ACT3"], d["ACT4"])
        if cj.setup is not None:
            self._res_setup = cj.setup
            self._res_gaps = _result_gaps(c, cj.setup, 4 * int(self.fmt.mem["MEM_BURST_BEATS"]))
            self._act_sched = _act_schedule(cj.setup)
        if cj.pf_count:
            raise _ClError("BAD_FIELD", f"RUN with PF_COUNT={cj.pf_count}: prefetch rides on LOAD "
                           f"descriptors in contract 2.0; accepted: 0")
        if cj.n_in != words.size:
            raise _ClError("BAD_FIELD", f"RUN: the ACT fields give {words.size} words, the job's "
                           f"registers take {cj.n_in}")
        res, err = fast.execute(self.core, cj, words if cj.n_in else None)
        if err & c.ERR_FATAL_MASK:
            r.job_err = err
            bits = [n for n, b in c.errors.items() if err & (1 << b)]
            raise _ClError("JOB", f"RUN: the job set ERR={err:#x} ({', '.join(bits)})")
        if res is not None:
            self._scatter(ddr, d["RES0"], d["RES1"], d["RES2"], res, d.get("FIRST", False))
        return self._run_result(d, cj.cycles, words, res)

    @staticmethod
    def _run_result(d: dict, cycles: int, words: np.ndarray, res) -> tuple:
        n_res = 0 if res is None else int(res.size)
        a0, a1, r0 = d["ACT0"], d["ACT1"], d["RES0"]
        src = (a0["SRC"], a0["SRC"] + a1["N"] * a1["H"] * a1["W"] * a1["C"] * a0["ESIZE"])
        dst = (r0["DST"], r0["DST"] + d["RES1"]["PIX"] * d["RES2"]["DSTC"] * r0["ESIZE"])
        return cycles, int(words.size), n_res, src, dst


def _timing_of(r: RunResult, tl: "Timeline") -> tuple:
    """What a successful run's memory model gave: reused by runs of the same list bytes."""
    end = tl.end()
    return (end, tl.compute, tl.rd_beats, tl.wr_beats, r.descs, r.runs, r.tags)


def _replay_call(tl: "Timeline", r: RunResult, call: tuple) -> None:
    """One recorded memory-model step of :meth:`Executor._step`."""
    t_fetch = tl.fetch(call[1])
    r.descs += 1
    if call[0] == "G":
        tl.regs(t_fetch, call[2])
    elif call[0] == "L":
        _, _, count, after, tag = call
        tl.load(t_fetch, count, after)
        _tag_span(r, tag, None, wgt=count)
    elif call[0] == "R":
        _, _, src, dst, act, res, cycles, store_reads, tag, stream, act_req, step = call[:12]
        tl.run(t_fetch, src, dst, act, res, cycles, store_reads=store_reads, act_req=act_req,
               res_gaps=step, post=call[12] if len(call) > 12 else None,
               store=call[13] if len(call) > 13 else None)
        r.runs += 1
        if stream:
            _tag_span(r, tag, tl.core_free, cycles, act, res)
        else:
            _tag_span(r, tag, tl.core_free, cycles)


def _tag_span(r: RunResult, tag: int, end: int | None, cycles: int = 0, act: int = 0,
              res: int = 0, wgt: int = 0) -> None:
    """Per TAG: [end of its last job, stall-free cycles, words on the core's act / res / wgt
    streams] (the 1.2 core's WORDS_* counters, split by node)."""
    span = r.tags.get(tag)
    if span is None:
        span = r.tags[tag] = [0, 0, 0, 0, 0]
    if end is not None:
        span[0] = end
    span[1] += cycles
    span[2] += act
    span[3] += res
    span[4] += wgt


class _ClError(Exception):
    def __init__(self, kind: str, msg: str) -> None:
        super().__init__(msg)
        self.kind = kind


def _act_schedule(su) -> tuple | None:
    """A GEMM job's activation schedule (KW words a pixel, NT tiles, the step period, M
    pixels): pixel p's KW words are taken in the first KW cycles of its first step, cycle
    CFG_CYCLES + p*NT*period + i stall-free. None for other jobs."""
    if su.opcode != "GEMM":
        return None
    return su.kw, su.nt, max(su.kw, su.wpi), su.m


def _write_runs(items, max_run: int, max_gap: int) -> list[int]:
    """The store unit's write bursts (dtpu_cl_store_wq) for items (byte address, bytes) in
    stream order: the words they touch, consecutive ones collected into runs of up to
    `max_run` words, a gap of up to `max_gap` words inside a run filled with strobe-less
    words (beats too); the beats of each run."""
    runs: list[int] = []
    s0 = e0 = None
    for a, n in items:
        if n <= 0:
            continue
        for w in range(a // 8, (a + n - 1) // 8 + 1):
            if e0 is not None and w == e0:
                continue
            if e0 is not None and e0 < w <= e0 + max_gap + 1 and w - s0 + 1 <= max_run:
                e0 = w
                continue
            if e0 is not None:
                runs.append(e0 - s0 + 1)
            s0 = e0 = w
    if e0 is not None:
        runs.append(e0 - s0 + 1)
    return runs


@dataclass(frozen=True)
class _AccRun:
    """An ACC RUN's store-unit and stream timing inputs (:meth:`Executor._acc_timing`)."""

    kept: tuple           # kept lanes per result word
    res_t: tuple | None   # per result word, stall-free cycles before the job's DONE
    reads: tuple          # the store unit's read requests: (walk cycle, address, beats)
    last_item: int        # beats of the last write burst (the last item or run of items)
    act: tuple | None     # (the stream's word addresses, KW, the GEMM's step period), or
    #                       ("elems", the stream, :meth:`Timeline._acc_elems`'s builder) for a
    #                       stream counted element by element (set by :meth:`Timeline._acc_run`)
    wsegs: tuple | None = None  # the write queue's bursts in words, in the order the sums are
    #                             added (None: gaps the queue fills; its rate not modelled)


class _AccWrites:
    """The store unit's writes of an ACC RUN as its sums are added (dtpu_cl_store_wq,
    dtpu_axi_wr): a word enters the write queue as its lane is added and holds one of its
    STORE_WQ_WORDS + 1 places (the queue's FIFO and a register; a contract constant
    SEQ_ACC_WQ = 33 before the store models were merged) until its W beat, so an add waits
    for the place of the word that many before; a burst is requested SEQ_ACC_AW after the add of the word that closes it (the first
    word of the next burst, or its 16th word), its AW once the write master has fewer than
    MEM_READ_OUTSTANDING bursts unanswered (SEQ_WR_SLOT after the response of the one that many
    before), its W beats one a cycle after its AW and the beats before; its response
    MEM_WRITE_LATENCY after its last beat. The last burst, closed by the RUN's end, goes
    SEQ_ACC_TAIL - 1 after DONE (:meth:`Timeline._acc_tail`) or when a place frees."""

    def __init__(self, tl: "Timeline", segs: tuple) -> None:
        K = tl.K
        self.depth, self.aw_lat = int(tl.fmt.mem["STORE_WQ_WORDS"]) + 1, K["SEQ_ACC_AW"]
        self.slot, self.tail = K["SEQ_WR_SLOT"], K["SEQ_ACC_TAIL"]
        self.out_n, self.wl = int(tl.fmt.mem["MEM_READ_OUTSTANDING"]), tl.WL
        self.full = int(tl.fmt.mem["MEM_BURST_BEATS"])
        self.segs = list(segs)
        self.beat: list[int] = []       # W beat of each word whose burst is requested
        self.b_at: list[int] = []       # response of each burst
        self.w_free = 0                 # the W channel's next free cycle
        self.n = 0                      # words added
        self.seg, self.in_seg = 0, 0    # the open burst and its words so far

    def _issue(self, t_req: int) -> None:
        n = self.segs[self.seg]
        aw = t_req
        if len(self.b_at) >= self.out_n:
            aw = max(aw, self.b_at[-self.out_n] + self.slot)
        w0 = max(self.w_free, aw + 1)
        self.beat.extend(range(w0, w0 + n))
        self.w_free = w0 + n
        self.b_at.append(w0 + n - 1 + self.wl)
        self.seg += 1
        self.in_seg = 0

    def add(self, c: int) -> int:
        """The cycle the next word is added (no sooner than `c`)."""
        w = self.n
        if w >= self.depth:
            c = max(c, self.beat[w - self.depth] + 1)
        if self.seg < len(self.segs) and self.in_seg == self.segs[self.seg] \
                and self.in_seg < self.full:
            self._issue(c + self.aw_lat)         # closed by this word
        self.n += 1
        self.in_seg += 1
        if self.seg < len(self.segs) and self.in_seg == self.full and \
                self.seg < len(self.segs) - 1:
            self._issue(c + self.aw_lat)         # a full burst goes at once
        return c

    def finish(self, end: int) -> int | None:
        """The last W beat + 1 of the RUN's writes, the core's DONE at `end`."""
        while self.seg < len(self.segs):
            self._issue(end + self.tail - 1)
        return self.w_free if self.beat else None


def _result_gaps_array(cfg, su, n: int) -> np.ndarray | None:
    """:func:`_result_gaps` as an int64 array, computed with numpy (the store plans of long
    RUNs: every result word's gap)."""
    if su.opcode == "GEMM":
        period, wps = max(su.kw, su.wpi), su.wpi
        k = np.arange(n + 1, dtype=np.int64)
        return (k // wps) * period + k % wps
    if su.opcode == "DWCONV" and su.geom is not None:
        t = dw_timing.result_times(cfg, su)
        return (-t[::-1][:n + 1]).astype(np.int64)
    g = _result_gaps(cfg, su, n)
    return None if g is None else np.asarray(g, np.int64)


def _result_gaps(cfg, su, n: int) -> tuple | None:
    """For the last n + 1 result words of a job (`su`, its JobSetup), how many cycles before
    its last one each came (k = 0: the last), from the job's closed-form schedule: a GEMM's
    steps give `words` (su.wpi) one a cycle every max(KW, words) cycles; a DWCONV's steps give
    their items' words one a cycle, COLS items a step, each step `period` after the one before
    in its output row, the rows at their own starts (model.dw_schedule). None: other jobs."""
    if su.opcode == "GEMM":
        period, wps = max(su.kw, su.wpi), su.wpi
        return tuple((k // wps) * period + k % wps for k in range(n + 1))
    if su.opcode == "DWCONV" and su.geom is not None:
        from dtpu.hw.model import dw_schedule
        g, cols = su.geom, cfg.COLS
        tm = dw_schedule(cfg, g, su.wpi)
        spr = g.steps_per_row(cols)
        times: list[int] = []
        for o in range(len(tm.compute_start) - 1, -1, -1):
            for s_ in range(spr - 1, -1, -1):
                items = min(cols, g.ow * g.gc - s_ * cols)
                t0 = int(tm.compute_start[o]) + s_ * tm.period
                for j in range(items * su.wpi - 1, -1, -1):
                    times.append(t0 + j)
                    if len(times) > n:
                        return tuple(times[0] - t for t in times)
        return tuple(times[0] - t for t in times)
    return None



#: run _stream_sim and _store_sim in C where the kernels are built (tests switch it off to
#: compare)
STREAM_SIM_C = True


def _stalled_gaps(gaps: tuple | None, need, stalls: list, cycles: int) -> tuple | None:
    """The result words' gaps (:func:`_result_gaps`, stall-free: k = 0 the last word, 2 cycles
    before the job's end) once the core's stalls waiting for activation words are in
    (`stalls`: per word, the take cycle :func:`_stream_sim` records in `takes` less its need):
    the 1.2 core's stall is global, so a result word due at stall-free cycle s comes as late as
    the stall after the last word the core took by s (need[j] < s); the last one after every
    stall. docs/rtl.md "float32 and the one-cycle
    corners"."""
    if gaps is None or not stalls or len(stalls) != len(need):
        return gaps
    nd = need.tolist() if hasattr(need, "tolist") else list(need)
    last = cycles - 2
    fin = stalls[-1]
    out = []
    for g in gaps:
        j = bisect.bisect_left(nd, last - g) - 1
        out.append(g + fin - (stalls[j] if j >= 0 else 0))
    return tuple(out)


#: debugging: a list to record the simulated store's AWs in (cycle, "AW", beats)
_STORE_TRACE: list | None = None


def _store_sim(chunks, offer, mem: dict, wq_words: int, prior: tuple = ()) -> tuple:
    """The store unit's ITEMS path and the write master (dtpu_cl_store, dtpu_cl_store_pack,
    dtpu_cl_store_wq, dtpu_axi_wr, dtpu_axi_burst) cycle by cycle under the contract's memory
    model, for the result words of one RUN (docs/rtl.md "float32 and the one-cycle corners").

    `chunks[r]`: (byte address, bytes kept) of result word r (0 bytes: a word the walk drops);
    `offer[r]`: the cycle the core offers it when it has not been held (the 1.2 core's stall is
    global: each cycle a word waits holds every later word too); `wq_words`: the write queue's
    words (STORE_WQ_WORDS; as many requests); `prior`: write responses still due of earlier
    RUNs' bursts (their slots). Returns (the cycles the core was held, the cycle of each
    word's handshake, the cycle of the last write response, every burst's response cycle, the
    write beats: the words with strobes and the gap words).

    Per cycle: the word stage takes a word when free (or freed this cycle); the realigner takes
    the stage's chunk when its output slot is free (or taken), not closing, and the chunk is not
    elsewhere than its open word while it would send a word itself; the queue takes the
    realigner's word when its FIFOs have room and no gap is to be filled (a gap of up to
    SEQ_STORE_GAP words past the run's end, the run staying within MEM_BURST_BEATS, is filled
    with strobe-less words first, one a cycle); a run closes at a word that does not follow it,
    at MEM_BURST_BEATS words or at the close marker; the master takes a request when it has
    split the one before, issues a burst the cycle after while fewer than MEM_READ_OUTSTANDING
    (the write master's MAX_OUTSTANDING, 8) are unanswered, its AW the cycle after, its beats
    from the cycle after the AW, one a cycle as the queue has them; a response
    MEM_WRITE_LATENCY after the burst's last beat frees its slot the cycle after."""
    WL = int(mem["MEM_WRITE_LATENCY"])
    burst = int(mem["MEM_BURST_BEATS"])
    outst = int(mem["MEM_READ_OUTSTANDING"])
    max_gap = int(mem["SEQ_STORE_GAP"])
    n = len(chunks)
    if not n:
        return 0, [], None, [], 0
    kern = kernels.get() if _STORE_TRACE is None and STREAM_SIM_C else None
    if kern is not None:   # the same statements in C (kernels.c dtpu_store_sim)
        ch = np.asarray(chunks, np.int64).reshape(-1, 2)
        return kern.store_sim(ch[:, 0], ch[:, 1], offer, (wq_words, WL, burst, outst, max_gap),
                              tuple(prior))
    # the core and the word stage
    w_beats = 0
    held = 0
    r = 0
    hs = [0] * n
    st_v, st_a, st_n, st_last = False, 0, 0, False
    # the realigner
    b_w, b_m, fl = 0, 0, False
    o_v, o_w, o_m, o_c = False, 0, 0, False
    # the write queue
    wf = 0
    rf: list = []
    run_v, run_a, run_n = False, 0, 0
    # the write master
    gen_busy, gen_addr, gen_left = False, 0, 0
    resv = len(prior)
    awv, aw_beats = False, 0
    f_q: list = []
    wb = 0
    b_due = sorted(prior)
    bi = 0
    last_b = None
    closed = False
    cyc = min(offer[0], b_due[0] if b_due else offer[0])
    while True:
        acted = False
        # write responses this cycle
        done = 0
        while bi < len(b_due) and b_due[bi] <= cyc:
            done += 1
            last_b = b_due[bi]
            bi += 1
            acted = True
        # the queue's input (the realigner's output slot) and its ready
        wf_full = wf >= wq_words
        rf_full = len(rf) >= wq_words
        has_word = o_m != 0
        follows = run_v and o_w == run_a + run_n and run_n != burst
        gap = o_w - (run_a + run_n)
        fill_want = (o_v and has_word and run_v and not follows and 0 < gap <= max_gap
                     and run_n + gap < burst)
        fill = fill_want and not wf_full and not rf_full
        q_ready = not wf_full and not rf_full and not fill_want
        in_hs = o_v and q_ready
        # the realigner's input (the word stage)
        can = not o_v or q_ready
        pk_take = False
        if st_v:
            off, w0 = st_a & 7, st_a >> 3
            sh_m = ((1 << st_n) - 1) << off
            lo_m, hi_m = sh_m & 0xFF, sh_m >> 8
            mg_m = b_m | lo_m
            other = b_m != 0 and b_w != w0
            sends = hi_m != 0 or mg_m == 0xFF
            sends_own = hi_m != 0 or lo_m == 0xFF
            pk_take = can and not fl and not (st_n and other and sends_own)
        # the core's word into the word stage
        core_hs = r < n and cyc >= offer[r] + held and (not st_v or pk_take)
        # the master
        wvalid = bool(f_q) and wf > 0
        w_done = wvalid and wb == f_q[0] - 1
        req_hs = bool(rf) and not gen_busy
        issue = gen_busy and resv < outst and not awv
        # ---- updates
        if wvalid:
            wf -= 1
            w_beats += 1
            acted = True
            if w_done:
                del f_q[0]
                wb = 0
                b_due.append(cyc + WL)
                if _STORE_TRACE is not None:
                    _STORE_TRACE.append((cyc, "WLAST", cyc + WL))
            else:
                wb += 1
        if awv:
            f_q.append(aw_beats)
            awv = False
            acted = True
            if _STORE_TRACE is not None:
                _STORE_TRACE.append((cyc, "AW", aw_beats))
        if issue:
            bnd = 512 - (gen_addr % 512)
            beats = min(gen_left, burst, bnd)
            awv, aw_beats = True, beats
            gen_addr += beats
            gen_left -= beats
            gen_busy = gen_left > 0
            resv += 1
            acted = True
        resv -= done
        if req_hs:
            gen_addr, gen_left = rf[0]
            gen_busy = gen_left > 0
            del rf[0]
            acted = True
        # the queue
        if fill:
            wf += 1
            run_n += 1
            acted = True
        elif in_hs:
            acted = True
            n_after = run_n + 1 if follows else 1
            push_full = has_word and follows and n_after == burst
            if run_v and (o_c or (has_word and not follows)):
                rf.append((run_a, run_n))
            elif push_full:
                rf.append((run_a, n_after))
            if _STORE_TRACE is not None and (run_v and (o_c or (has_word and not follows))
                                             or push_full):
                _STORE_TRACE.append((cyc, "REQ", rf[-1][1]))
            if has_word:
                wf += 1
            if o_c or push_full:
                run_v = False
                if o_c:
                    closed = True
            elif has_word:
                run_v, run_n = True, n_after
                if not follows:
                    run_a = o_w
        # the realigner
        new_o = False if can else o_v
        if can and fl:
            new_o, o_w, o_m, o_c = True, b_w, b_m, b_m == 0
            if b_m == 0:
                fl = False
            b_m = 0
            acted = True
        elif can and st_v and st_n and b_m != 0 and b_w != (st_a >> 3):
            new_o, o_w, o_m, o_c = True, b_w, b_m, False
            b_m = 0
            if pk_take:
                b_w, b_m = st_a >> 3, ((1 << st_n) - 1) << (st_a & 7)
                if st_last:
                    fl = True
            acted = True
        elif pk_take:
            if st_n:
                if sends:
                    new_o, o_w, o_m, o_c = True, w0, mg_m, False
                    b_w, b_m = w0 + 1, hi_m
                else:
                    b_w, b_m = w0, mg_m
            if st_last:
                fl = True
            acted = True
        o_v = new_o
        # the word stage
        if core_hs:
            st_v, (st_a, st_n), st_last = True, chunks[r], r == n - 1
            hs[r] = cyc
            r += 1
            if _STORE_TRACE is not None:
                _STORE_TRACE.append((cyc, "HS", r - 1))
            acted = True
        elif pk_take:
            st_v = False
        elif st_v:
            pass
        waiting = r < n and cyc >= offer[r] + held and not core_hs
        if waiting:
            held += 1
        if closed and not rf and not gen_busy and not awv and not f_q and wf == 0 \
                and bi >= len(b_due):
            break
        if not acted:       # nothing moved: the next response or the next word's offer
            cand = [b_due[bi]] if bi < len(b_due) else []
            if r < n and not waiting:
                cand.append(offer[r] + held)
            nxt = max(cyc + 1, min([c for c in cand if c > cyc], default=cyc + 1))
            if waiting:
                held += nxt - cyc - 1
            cyc = nxt
            continue
        cyc += 1
    return held, hs, last_b, b_due, w_beats


#: debugging: a list to record each ACC RUN's rounds in (:meth:`Timeline._acc_run`: start,
#: round, requests, bursts, first beat, end, the units' take cycles)
_ACC_TRACE: list | None = None

#: debugging: a list to record the simulated stream's ARs in (cycle from the simulation's
#: origin, beats, a list block)
_SIM_TRACE: list | None = None


def _stream_sim(wa, per_word: int, need, intake: int, rd_free: int, mem: dict,
                blocks: tuple | None = None, takes: list | None = None,
                res: dict | None = None) -> tuple:
    """The activation stream of one RUN cycle by cycle as the load unit (dtpu_cl_load), the
    credit buffer (dtpu_cl_rd_buf) and the read master (dtpu_axi_rd, dtpu_axi_burst) move it
    under the contract's memory model, against the core's stall-free need times (docs/rtl.md
    "Streams that do not keep up"). Times are cycles from the RUN's start.

    `wa`: per element of the stream (a word in word mode, a lane in lane mode) its DDR word
    address, -1 for PAD; `per_word`: elements per activation word (1, or LANES); `need[j]`:
    the cycle the job's stall-free schedule takes word j; `intake`: the cycle the unit's run
    builder could take the first element (one a cycle after it; SEQ_ACT_SETUP_WINDOWS - 2
    after the RUN's start: its first AR comes 2 cycles after the request); `rd_free`: the read
    channel's first free beat; `blocks`: (the AR cycle of the list's next block, blocks
    left, words a block, SEQ_FETCH_NEXT): the fetcher's reads, which the arbiter serves
    first, each next one SEQ_FETCH_NEXT after the last beat of the one before. Returns (the
    core's stall once it took its last word, the stream's first beat, its last beat + 1, its
    beats, the first beat and last beat + 1 of each block read meanwhile, the next block's AR
    cycle). `takes` (a list, optional) gets the cycle the core took each word.

    `res` (a DWCONV whose write runs are short, :func:`dw_timing.dw_stream`): the core's result
    words too, each at its stall-free time ("t", this function's time frame) unless the store
    unit holds more than STORE_WQ_WORDS + 1 words beside the write beats gone (:func:`_store_hold`),
    when the core stalls
    (its global stall: the inputs wait as well); their DDR words ("wa") make the write runs,
    each requested SEQ_STORE_AW after the word that closes it, its AW no sooner than
    SEQ_WR_SLOT after the response of the burst MEM_READ_OUTSTANDING before nor before the
    beats of the burst before, its beats the cycles after the AW; the last one the job's end
    ("end0", the stall-free end, + the stall) + "tail" after; a run crossing 4 KiB is two
    bursts. Sets res["w_end"]: the last response + 1.

    Run builder: a non-PAD element on the word of the last beat shares that beat, one on the
    next word extends the open run (up to MEM_BURST_BEATS words), any other opens a run and
    pushes the open one into the ACT_REQ_FIFO-entry request FIFO (it waits while that is full;
    it takes an element while the element FIFO, less the slot the packer frees in that cycle,
    has room);
    a cycle in which no element is taken, with a run open and the FIFO not full, pushes it (a
    full element FIFO of ACT_ELEM_FIFO, the stream's end). The master takes a request when
    idle and the credit buffer (ACT_READ_BUFFER words) has room for it, issues its burst the
    next cycle while fewer than MEM_READ_OUTSTANDING are in flight (a slot frees the cycle after
    a burst's last beat), its AR one cycle later; the burst's first beat MEM_READ_LATENCY after
    its AR, after the beats before it, one a cycle. A beat reaches the packer SEQ_ACT_FIRST - 1
    cycles later (the master's word port, the buffer); the packer takes one element a cycle
    (one that completes a word only when the output register is free); the core takes the word
    from the cycle after, when its schedule (shifted by its stall so far) needs it."""
    RL = int(mem["MEM_READ_LATENCY"])
    burst = int(mem["MEM_BURST_BEATS"])
    outst = int(mem["MEM_READ_OUTSTANDING"])
    ef_d = int(mem["ACT_ELEM_FIFO"])
    rq_d = int(mem["ACT_REQ_FIFO"])
    buf_d = int(mem["ACT_READ_BUFFER"])
    to_pk = int(mem["SEQ_ACT_FIRST"]) - 1       # a beat to the packer; the core a cycle later
    kern = kernels.get() if _SIM_TRACE is None and STREAM_SIM_C else None
    if kern is not None:   # the same statements in C (kernels.c dtpu_stream_sim)
        return kern.stream_sim(wa, per_word, need, intake, rd_free,
                               (RL, burst, outst, ef_d, rq_d, buf_d, to_pk), blocks, takes,
                               _store_consts(mem, res))
    n, nw = len(wa), len(need)
    wa = wa.tolist() if hasattr(wa, "tolist") else list(wa)
    need = need.tolist() if hasattr(need, "tolist") else list(need)
    newbeat = bytearray(n)
    e = p = 0
    run_open, run_wa, run_len = False, 0, 0
    prev_ok, prev_wa = False, 0
    rq: list = []
    gen_busy, gen_addr, gen_left, gen_blk = False, 0, 0, False
    arv, ar_beats, ar_blk = False, 0, False
    blk_next, blk_left, blk_words, blk_gap = blocks if blocks else (0, 0, 0, 0)
    blk_reads: list = []        # [first beat, last beat + 1] of each block read
    ends: list = []             # last-beat cycles of every burst (stream and blocks), in order
    ei = 0
    resv = 0
    beat_t: list = []           # arrival cycle of every stream beat, in order
    bi = 0                      # beats arrived before this cycle
    br = 0                      # beats at the packer
    bt = 0                      # beats taken by the packer
    last_beat = rd_free - 1
    owed = 0
    lane = 0
    out_valid = False
    j = 0
    stall = 0
    cyc = 0
    st = _Store(res, mem) if res is not None else None
    nr = st.n if st is not None else 0
    big = 1 << 62
    while j < nw or (st is not None and st.k < nr):
        acted = False
        # the core
        wait_room = None
        if st is None:
            take = out_valid and cyc >= need[j] + stall
            if take:
                stall = cyc - need[j]
                if takes is not None:
                    takes.append(cyc)
                j += 1
                acted = True
                if j == nw:
                    break
        else:   # its next step (an input word, a result word or both) is due at tau + stall
            t_in = need[j] if j < nw else big
            t_out = st.t[st.k] if st.k < nr else big
            tau = min(t_in, t_out)
            take = False
            if cyc >= tau + stall:
                in_ok = t_in != tau or out_valid
                room = st.room_at(cyc) if t_out == tau else cyc
                if in_ok and room <= cyc:
                    stall = cyc - tau
                    if t_in == tau:
                        take = True
                        if takes is not None:
                            takes.append(cyc)
                        j += 1
                    if t_out == tau:
                        st.emit(cyc)
                    acted = True
                elif in_ok:
                    wait_room = room
        out_free = not out_valid or take
        # beats arriving this cycle (a burst's last one frees its slot next cycle)
        done = 0
        while ei < len(ends) and ends[ei] <= cyc:
            done += 1
            ei += 1
            acted = True
        while bi < len(beat_t) and beat_t[bi] <= cyc:
            bi += 1
            acted = True
        while br < len(beat_t) and beat_t[br] + to_pk <= cyc:
            br += 1
        # the packer
        pop = False
        if p < e:
            nb = newbeat[p]
            h_word = per_word == 1 or lane == per_word - 1 or p == n - 1
            if (not nb or bt < br) and (not h_word or out_free):
                pop = True
        # the run builder
        s1_take = False
        push = None
        if e < n and cyc >= intake + e:
            a = wa[e]
            pad = a < 0
            same = not pad and prev_ok and a == prev_wa
            extend = not pad and not same and prev_ok and run_open and a == prev_wa + 1
            new_run = not pad and not same and not extend
            ext_full = extend and run_len == burst - 1
            need_push = run_open and (new_run or ext_full)
            if e - p - (1 if pop else 0) < ef_d and (not need_push or len(rq) < rq_d):
                s1_take = True
                if need_push:
                    push = (run_wa, run_len + 1 if extend else run_len)
                if not pad:
                    if not same:
                        prev_ok, prev_wa = True, a
                    if extend:
                        run_len += 1
                        if ext_full:
                            run_open = False
                    elif new_run:
                        run_wa, run_len, run_open = a, 1, True
                newbeat[e] = 1 if (not pad and not same) else 0
                if e == n - 1:
                    prev_ok = False
        if not s1_take and run_open and len(rq) < rq_d:
            push = (run_wa, run_len)
            run_open = False
        # the master: the request, the burst, the AR
        blk_req = blk_left > 0 and cyc >= blk_next - 2 and not gen_busy
        # the credit buffer's room: the word the packer takes this cycle counts as gone (as the
        # element FIFO's slot above: the RTL's times are a cycle later than these)
        freed = 1 if pop and newbeat[p] else 0
        accept = not blk_req and bool(rq) and not gen_busy and rq[0][1] <= buf_d - owed + freed
        issue = gen_busy and resv < outst and not arv
        if arv:                                  # AR handshake (ARREADY high)
            first = max(cyc + RL, last_beat + 1)
            if _SIM_TRACE is not None:
                _SIM_TRACE.append((cyc, ar_beats, bool(ar_blk)))
            last_beat = first + ar_beats - 1
            ends.append(last_beat)
            if ar_blk:
                if ar_blk & 2:                   # the block's first burst
                    blk_reads.append([first, first + ar_beats])
                else:
                    blk_reads[-1][1] = first + ar_beats
                if ar_blk & 4:                   # its last: the next block after its beats
                    blk_next = last_beat + blk_gap
            else:
                beat_t.extend(range(first, first + ar_beats))
            arv = False
            acted = True
        if issue:
            bnd = 512 - (gen_addr % 512)
            beats = min(gen_left, burst, bnd)
            arv, ar_beats = True, beats
            ar_blk = (1 | (2 if gen_blk == 2 else 0) | (4 if gen_left == beats else 0)) \
                if gen_blk else 0
            if gen_blk == 2:
                gen_blk = 1
            gen_addr += beats
            gen_left -= beats
            gen_busy = gen_left > 0
            resv += 1
            acted = True
        resv -= done
        if blk_req:
            gen_addr, gen_left, gen_blk = 0, blk_words, 2
            gen_busy = True
            blk_left -= 1
            blk_next = 1 << 60                   # set from its last beat
            acted = True
        elif accept:
            gen_addr, gen_left, gen_blk = rq[0][0], rq[0][1], False
            gen_busy = gen_left > 0
            owed += gen_left
            del rq[0]
            acted = True
        if push is not None:
            rq.append(push)
            acted = True
        if pop:
            if newbeat[p]:
                bt += 1
                owed -= 1
            h_word = per_word == 1 or lane == per_word - 1 or p == n - 1
            lane = 0 if h_word else lane + 1
            out_valid = h_word or (out_valid and not take)
            p += 1
            acted = True
        elif take:
            out_valid = False
        if s1_take:
            e += 1
            acted = True
        # nothing moved: jump to the next cycle anything can
        if not acted and not accept and not issue:
            cand = []
            if ei < len(ends):
                cand.append(ends[ei])
            if blk_left:
                cand.append(blk_next - 2)
            if bi < len(beat_t):
                cand.append(beat_t[bi])
            if br < len(beat_t):
                cand.append(beat_t[br] + to_pk)
            if e < n:
                cand.append(intake + e)
            if st is None:
                if out_valid:
                    cand.append(need[j] + stall)
            else:
                t_in = need[j] if j < nw else big
                t_out = st.t[st.k] if st.k < nr else big
                if (t_in <= t_out and out_valid) or t_out < t_in:
                    cand.append(min(t_in, t_out) + stall)
                if wait_room is not None:
                    cand.append(wait_room)
            nxt = min([c for c in cand if c > cyc], default=cyc + 1)
            cyc = max(cyc + 1, nxt)
            continue
        cyc += 1
    if st is not None:
        res["w_end"] = st.finish(res["end0"] + stall + res["tail"])
    first = beat_t[0] if beat_t else None
    return (stall, first, (beat_t[-1] + 1 if beat_t else None), len(beat_t), blk_reads,
            blk_next if blk_left else None)


#: result words the store unit holds outside its write queue: dtpu_cl_store's word stage and
#: dtpu_cl_store_pack's output register (modelled one by one in :func:`_store_sim`)
STORE_STAGE_WORDS = 2


def _store_hold(mem: dict) -> int:
    """The most words :func:`_stream_sim`'s store model lets the store unit hold, beside the
    write beats gone, before it takes another result word: the write queue (STORE_WQ_WORDS,
    the same hardware :func:`_store_sim` simulates) and the two stages before it, less the
    word being taken (33 on the board build; probe: the queue's wf_full, docs/rtl.md "The
    store unit's write queue in the Timeline")."""
    return int(mem["STORE_WQ_WORDS"]) + STORE_STAGE_WORDS - 1


def _store_consts(mem: dict, res: dict | None) -> tuple | None:
    """The store model's inputs for the C kernel: (result times, DDR words, :func:`_store_hold`,
    SEQ_STORE_AW, SEQ_WR_SLOT, bursts in flight, MEM_BURST_BEATS, MEM_WRITE_LATENCY, the
    stall-free end, the tail, the dict to put w_end in), None without `res`."""
    if res is None:
        return None
    return (res["t"], res["wa"], _store_hold(mem), int(mem["SEQ_STORE_AW"]),
            int(mem["SEQ_WR_SLOT"]), int(mem["MEM_READ_OUTSTANDING"]),
            int(mem["MEM_BURST_BEATS"]), int(mem["MEM_WRITE_LATENCY"]), int(res["end0"]),
            int(res["tail"]), res)


class _Store:
    """The store unit's write side for :func:`_stream_sim`'s `res` (its docstring)."""

    def __init__(self, res: dict, mem: dict) -> None:
        self.t = [int(v) for v in res["t"]]
        self.wa = [int(v) for v in res["wa"]]
        self.n = len(self.t)
        self.hold = _store_hold(mem)
        self.aw_d = int(mem["SEQ_STORE_AW"])
        self.slot = int(mem["SEQ_WR_SLOT"])
        self.outst = int(mem["MEM_READ_OUTSTANDING"])
        self.burst = int(mem["MEM_BURST_BEATS"])
        self.wl = int(mem["MEM_WRITE_LATENCY"])
        self.k = 0                      # result words handed
        self.b_start: list = []         # first beat of each burst
        self.b_cum: list = [0]          # beats of the bursts before it
        self.b_resp: list = []          # its response
        self.last_beat = -(1 << 40)
        self.run_s = self.run_e = None

    def issue(self, req: int, a: int, n: int) -> None:
        """The write request of the run of n words from DDR word a: its bursts (split at
        4 KiB as dtpu_axi_burst splits them), each AW after the beats of the one before."""
        while n > 0:
            m = min(n, 512 - a % 512)
            aw = max(req, self.last_beat)
            if len(self.b_resp) >= self.outst:
                aw = max(aw, self.b_resp[-self.outst] + self.slot)
            self.b_start.append(aw + 1)
            self.b_cum.append(self.b_cum[-1] + m)
            self.last_beat = aw + m
            self.b_resp.append(aw + m + self.wl)
            a += m
            n -= m

    def room_at(self, c: int) -> int:
        """The first cycle from c on the queue takes a word (its held words less the beats gone
        at most :func:`_store_hold`)."""
        m = self.k - self.hold
        if m <= 0 or m > self.b_cum[-1]:
            return c
        i = bisect.bisect_left(self.b_cum, m) - 1
        return max(c, self.b_start[i] + (m - 1 - self.b_cum[i]) + 1)

    def emit(self, c: int) -> None:
        a = self.wa[self.k]
        if self.run_e is not None and (a != self.run_e + 1
                                       or self.run_e - self.run_s + 1 == self.burst):
            self.issue(c + self.aw_d, self.run_s, self.run_e - self.run_s + 1)
            self.run_s = self.run_e = None
        self.k += 1
        if self.run_e is None:
            self.run_s = self.run_e = a
        else:
            self.run_e = a
        if self.run_e - self.run_s + 1 == self.burst:
            self.issue(c + self.aw_d, self.run_s, self.burst)
            self.run_s = self.run_e = None

    def finish(self, last_req: int) -> int | None:
        if self.run_e is not None:
            self.issue(last_req, self.run_s, self.run_e - self.run_s + 1)
        return self.b_resp[-1] + 1 if self.b_resp else None


def _first_words(f: "Format", d: dict, limit: int) -> list | None:
    """The DDR word addresses (None: a PAD word) of the first `limit` words of a RUN's
    activation stream when the load unit runs it in word mode (dtpu_cl_load: WINDOWS with C a
    multiple of LANES, CHANNELS with REP 1 and C, CH0, CHANNELS multiples of LANES; SRC 8-byte
    aligned); None in lane mode or for a stream the unit would not start."""
    a0, a1, a2, a3, a4 = (d[k] for k in ("ACT0", "ACT1", "ACT2", "ACT3", "ACT4"))
    mode, L = a0["MODE"], a0["LANES"]
    n, h, w, c = a1["N"], a1["H"], a1["W"], a1["C"]
    if L < 1 or a0["SRC"] % 8 or c % L:
        return None
    base, cw = a0["SRC"] // 8, c // L
    out: list = []
    if mode == f.act_modes["CHANNELS"]:
        rep, ch0, chans, nchunk = a3["KP"], a3["K0"], a3["K1"], max(1, a3["NCHUNK"])
        if rep != 1 or ch0 % L or chans % (nchunk * L):
            return None
        per = chans // nchunk // L
        for k in range(nchunk):
            for p in range(h * w):
                for j in range(per):
                    ch = ch0 // L + k * per + j
                    out.append(base + p * cw + ch if ch < cw else None)
                    if len(out) >= limit:
                        return out
        return out
    if mode != f.act_modes["WINDOWS"]:
        return None
    kh, kw, sy, sx, dy, dx = a2["KH"], a2["KW"], a2["SY"], a2["SX"], a2["DY"], a2["DX"]
    pt, pl, oh, ow = a2["PT"], a2["PL"], a2["OH"], a2["OW"]
    kp, k0, k1 = a3["KP"] // L, a3["K0"], a3["K1"]
    for b in range(n):
        for oy in range(oh):
            for ox in range(ow):
                for j in range(k0, k1):
                    if j >= kh * kw * cw or j >= kp:
                        out.append(None)
                    else:
                        tap, cj = divmod(j, cw)
                        ky, kx = divmod(tap, kw)
                        y, x = oy * sy + ky * dy - pt, ox * sx + kx * dx - pl
                        inside = 0 <= y < h and 0 <= x < w
                        out.append(base + ((b * h + y) * w + x) * cw + cj if inside else None)
                    if len(out) >= limit:
                        return out
    return out


def _window_index(a1: dict, a2: dict, kp: int) -> np.ndarray:
    """Flat element index of every (pixel, K lane) of a WINDOWS stream; index n*h*w*c (one past
    the tensor) stands for PAD: taps outside the image and lanes K..KP-1."""
    n, h, w, c = a1["N"], a1["H"], a1["W"], a1["C"]
    kh, kw, sy, sx, dy, dx = a2["KH"], a2["KW"], a2["SY"], a2["SX"], a2["DY"], a2["DX"]
    pt, pl, oh, ow = a2["PT"], a2["PL"], a2["OH"], a2["OW"]
    b_, oy, ox, ky, kx, ci = np.meshgrid(np.arange(n), np.arange(oh), np.arange(ow), np.arange(kh),
                                         np.arange(kw), np.arange(c), indexing="ij", sparse=True)
    y = oy * sy + ky * dy - pt
    xx = ox * sx + kx * dx - pl
    inside = (y >= 0) & (y < h) & (xx >= 0) & (xx < w)
    idx = ((b_ * h + y) * w + xx) * c + ci
    size = n * h * w * c
    k = kh * kw * c
    idx = np.where(inside, idx, size).reshape(n * oh * ow, k)
    if kp < k:
        raise _ClError("BAD_FIELD", f"ACT KP={kp} lanes < K={k}")
    if kp > k:
        idx = np.concatenate([idx, np.full((idx.shape[0], kp - k), size)], axis=1)
    # int32 halves the cached indexes (a 3x3 window over 112x112x32 is 29 M lanes otherwise
    # 230 MB); np.take accepts them
    return np.ascontiguousarray(idx, dtype=np.int32 if size < 2**31 else np.intp)


# ------------------------------------------------------------------------------------------------
# the emulated 2.0 device and its driver


class Device:
    """A 2.0 core as the host sees it: the 2.0 registers (contract2.registers) over AXI4-Lite,
    DDR, and the executor behind the doorbell (synchronous: DONE is set when the write returns;
    `device_s` accumulates the emulation's own time so the host's can be told apart)."""

    def __init__(self, program: Program | None = None, core: Core | None = None,
                 fast_path: bool = True, *, mem=None) -> None:
        """Over `program`'s own DDR image (tests, benchmarks), or over `mem` (anything with the
        HP port's ``read(addr, n)`` / ``write(addr, data)`` raising :class:`DdrFault`: a
        :class:`DdrPool` of the model's buffers, the emulated board's DDR) with `core`'s
        memories: a 2.0 core keeps the 1.2 core inside, so lists and 1.2 jobs share them."""
        if program is None and (mem is None or core is None):
            raise ValueError("cmdlist.Device needs a program, or a memory and a core")
        cfg = program.cfg if program is not None else core.cfg
        self.fmt = Format(cfg)
        self.ddr = mem if mem is not None else Ddr(program.base, program.size, program.image)
        self.ex = Executor(core or Core(cfg), self.fmt, fast_path)
        self.regs = {name: int(r["reset"]) for name, r in self.fmt.regs.items()}
        self.by_offset = {int(r["offset"]): name for name, r in self.fmt.regs.items()}
        self.last: RunResult | None = None
        self.device_s = 0.0

    def write(self, offset: int, value: int) -> None:
        name = self.by_offset.get(offset)
        if name is None:
            raise KeyError(f"no 2.0 register at offset {offset:#x}")
        f = self.fmt
        if name == "DOORBELL":
            if value & 1:
                t0 = time.perf_counter()
                self._ring()
                self.device_s += time.perf_counter() - t0
            return
        if name == "CL_ERR":
            self.regs[name] &= ~value
            self._status()
            return
        if name == "IRQ":   # DONE_EN read/write, PENDING write-1-to-clear
            en, pend = self._irq_bit("DONE_EN"), self._irq_bit("PENDING")
            self.regs[name] = (self.regs[name] & ~(value & pend) & ~en) | (value & en)
            return
        if f.regs[name]["access"] != "rw":
            raise PermissionError(f"{name} is {f.regs[name]['access']}")
        self.regs[name] = value & 0xFFFFFFFF

    def read(self, offset: int) -> int:
        return self.regs[self.by_offset[offset]]

    def _irq_bit(self, field_name: str) -> int:
        return 1 << next(fl["lsb"] for fl in self.fmt.regs["IRQ"]["fields"] if fl["name"] == field_name)

    def _status(self) -> None:
        st = self.regs["CL_STATUS"] & 0b10
        self.regs["CL_STATUS"] = st | (0b100 if self.regs["CL_ERR"] else 0)

    def _ring(self) -> None:
        r = self.last = self.ex.run(self.ddr, self.regs["CL_BASE"])
        self.regs["CL_ERR"] |= r.error
        self.regs["CL_ERR_PC"], self.regs["CL_ERR_TAG"] = r.error_pc, r.error_tag
        self.regs["CL_CYCLES_LO"], self.regs["CL_CYCLES_HI"] = r.cycles & 0xFFFFFFFF, r.cycles >> 32
        self.regs["IDLE_LO"], self.regs["IDLE_HI"] = r.idle_cycles & 0xFFFFFFFF, r.idle_cycles >> 32
        self.regs["RD_BEATS"], self.regs["WR_BEATS"] = r.rd_beats & 0xFFFFFFFF, r.wr_beats & 0xFFFFFFFF
        self.regs["DESCS"] = r.descs
        self.regs["CL_STATUS"] = 0b10
        self._status()
        if self.regs["IRQ"] & self._irq_bit("DONE_EN"):
            self.regs["IRQ"] |= self._irq_bit("PENDING")


@dataclass
class HostOps:
    """Host operations of one invoke (the per-invoke report's `host` record)."""

    mmio_reads: int = 0
    mmio_writes: int = 0
    doorbells: int = 0
    dma_starts: int = 0
    transforms: int = 0
    us: float = 0.0

    def as_dict(self) -> dict:
        return dict(mmio_reads=self.mmio_reads, mmio_writes=self.mmio_writes,
                    doorbells=self.doorbells, dma_starts=self.dma_starts,
                    transforms=self.transforms, us=round(self.us, 1))


class DtpuListError(RuntimeError):
    """A command list ended with CL_ERR set."""


class Driver:
    """The 2.0 invoke protocol (what the board driver will do over pynq's MMIO and buffers):

    prepare: the DDR image is written once (pynq.allocate + memcpy), IRQ.DONE_EN set, the
    prologue list run (resident weights). invoke(partition, x): copy x into its DDR buffer,
    write CL_BASE and DOORBELL, wait for the interrupt (emulated: DONE is already set), read
    CL_STATUS, the four counter words, acknowledge IRQ, read the output buffer. Every register
    access goes through :meth:`_rd` / :meth:`_wr`, which count."""

    def __init__(self, program: Program, device: Device | None = None) -> None:
        self.program = program
        self.dev = device or Device(program)
        self.fmt = self.dev.fmt
        self.ops = HostOps()
        self._wr("IRQ", self.dev._irq_bit("DONE_EN"))
        self._kick(program.prologue_addr)

    def _rd(self, name: str) -> int:
        self.ops.mmio_reads += 1
        return self.dev.read(self.fmt.reg_offset(name))

    def _wr(self, name_or_offset, value: int) -> None:
        self.ops.mmio_writes += 1
        off = name_or_offset if isinstance(name_or_offset, int) else self.fmt.reg_offset(name_or_offset)
        self.dev.write(off, value)

    def _kick(self, addr: int) -> RunResult:
        self._wr("CL_BASE", addr)
        self._wr("DOORBELL", 1)
        self.ops.doorbells += 1
        st = self._rd("CL_STATUS")
        if not st & 0b10:
            raise DtpuListError(f"CL_STATUS={st:#x}: the list did not complete")
        if st & 0b100:
            err = self._rd("CL_ERR")
            pc, tag = self._rd("CL_ERR_PC"), self._rd("CL_ERR_TAG")
            names = [n for n, b in self.fmt.errors.items() if err & b]
            self._wr("CL_ERR", err)
            raise DtpuListError(f"command list at {addr:#x} failed: CL_ERR={err:#x} "
                                f"({', '.join(names)}) at list offset {pc}, tag {tag:#x}: "
                                f"{self.dev.last.message if self.dev.last else ''}")
        # acknowledge, keep enabled
        self._wr("IRQ", self.dev._irq_bit("DONE_EN") | self.dev._irq_bit("PENDING"))
        return self.dev.last

    def invoke(self, index: int, x: np.ndarray) -> tuple[np.ndarray, HostOps, dict]:
        """Run partition `index` on input `x`; returns (output, host record, hw counters)."""
        part = self.program.partitions[index]
        t0 = time.perf_counter()
        dev0 = self.dev.device_s
        self.ops = HostOps()
        x = np.asarray(x)
        if x.dtype != part.input.dtype or x.size * x.itemsize != part.input.nbytes:
            raise ValueError(f"input {x.dtype}{x.shape} does not match the partition's "
                             f"{part.input.dtype}{part.input.shape}")
        self.dev.ddr.host_view(part.input.addr, part.input.nbytes)[:] = \
            np.ascontiguousarray(x).reshape(-1).view(np.uint8)
        self._kick(part.list_addr)
        cycles = self._rd("CL_CYCLES_LO") | self._rd("CL_CYCLES_HI") << 32
        idle = self._rd("IDLE_LO") | self._rd("IDLE_HI") << 32
        out = part.output
        y = self.dev.ddr.host_view(out.addr, out.nbytes).view(out.dtype).reshape(out.shape).copy()
        self.ops.us = 1e6 * ((time.perf_counter() - t0) - (self.dev.device_s - dev0))
        last = self.dev.last
        hw = dict(cycles=cycles, idle_cycles=idle, compute_cycles=last.compute_cycles,
                  rd_beats=last.rd_beats, wr_beats=last.wr_beats, descs=last.descs,
                  runs=last.runs, macs=part.macs)
        return y, self.ops, hw


def partitions_of(path_or_model, cfg: HwConfig | None = None) -> list[list[NodeIn]]:
    """The partitions of a .tflite model as chains of the nodes this DTPU places: consecutive
    CONV_2D / DEPTHWISE_CONV_2D / FULLY_CONNECTED operators of the natural precisions, each fed
    by the one before, split at every other operator: what benchmarks and tests compile without
    a TFLite interpreter (the delegate builds its partitions from TFLite's own, with its support
    checks: :meth:`dtpu.delegate.runtime.PartitionKernel.list_nodes`)."""
    from dtpu import tflite_model
    from dtpu.hw.lower import placement_error
    cfg = cfg or get_config()
    model = path_or_model if isinstance(path_or_model, tflite_model.Model) else tflite_model.load(path_or_model)
    sg = model.main
    parts: list[list[NodeIn]] = []
    cur: list[NodeIn] = []
    prev = None
    for op in sg.operators:
        node = None
        if op.opcode in tflite_model.CONV_OPCODES:
            try:
                spec, w, b = tflite_model.conv_spec(sg, op)
            except ValueError as e:
                log.info("operator %d stays on the CPU: %s", op.index, e)
            else:
                if placement_error(spec, cfg, None, wgt_capacity=cfg.WEIGHT_WORDS // 16,
                                   param_capacity=cfg.PARAM_ENTRIES // 16) is None:
                    node = (spec, w, b)
        if node is None or (cur and op.inputs[0] != prev):
            if cur:
                parts.append(cur)
            cur = []
        if node is not None:
            cur.append(NodeIn(*node, src=len(cur) - 1))
            prev = op.outputs[0]
    if cur:
        parts.append(cur)
    return parts


__all__ = ["partitions_of", "CmdlistError", "Ddr", "Device", "Driver", "DtpuListError", "Executor", "Format",
           "HostOps", "NodeIn", "Partition", "Program", "RunResult", "Timeline", "compile_program"]
