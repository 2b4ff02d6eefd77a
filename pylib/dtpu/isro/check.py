"""Static checking of an ISRO program: what the chip would reject, without running it.

An image that flies cannot be debugged, so ``dtpu isro check BUNDLE`` reads a bundle and reports
three kinds of finding, each naming the instruction:

- ``fault``: the machine would stop with an error at this instruction (operand outside its
  memory, misaligned element, geometry that does not add up, a block larger than the processing
  elements, fields the format forbids, a DSP shift out of range, no END). This is an independent
  restatement of :class:`dtpu.isro.machine.Machine`'s rules; the tests mutate programs and
  require the two to agree on whether, and at which instruction, the machine stops.
- ``hazard``: the machine would run but compute something else than the compiler meant: reading
  memory nothing wrote, overwriting a tensor a later layer still reads (the live ranges in
  meta.json), partial sums landing on weights or parameters, instructions that disagree with the
  layer table, code after END.
- ``profile``: the program needs more than the chip profile it was compiled for provides
  (memory sizes, instruction memory, number formats, processing elements, region alignment).

Data-dependent faults (the I8 DSP shift) are judged from the filter image; if an earlier
instruction may have overwritten that parameter block, the checker says so as a hazard instead.
"""
from __future__ import annotations

import logging
from dataclasses import dataclass

import numpy as np

from dtpu.isro.operands import avgpool_taps, operand_faults
from dtpu.isro.isa import (ACC_DTYPE, DSP_ARRAYS, EADD_WORDS, EMUL_WORDS, FRAME_DTYPE, LUT_ENTRIES, PARAM_DTYPE,
                           PARAM_HEADER_WORDS, WEIGHT_DTYPE, Fmt, Instruction, Mem, Op, block_size, pe_used, times_lanes,
                           param_block_bytes)

MEMORY_NAMES = {Mem.FRAME: "frame", Mem.FILTER: "filter", Mem.EXTERNAL: "external"}

log = logging.getLogger(__name__)

KINDS = ("fault", "hazard", "profile")


@dataclass(frozen=True)
class Finding:
    kind: str            # fault | hazard | profile
    index: int | None    # instruction, or None for the program as a whole
    message: str

    def __str__(self) -> str:
        where = f"instruction {self.index}" if self.index is not None else "program"
        return f"{self.kind:<7} {where}: {self.message}"


class _Fault(Exception):
    pass


class _Intervals:
    """Byte ranges [a, b) marked as written, merged; enough for 'was all of this written?'."""

    def __init__(self) -> None:
        self.spans: list[tuple[int, int]] = []

    def add(self, a: int, b: int) -> None:
        if b <= a:
            return
        out = []
        for s, e in self.spans:
            if e < a or s > b:
                out.append((s, e))
            else:
                a, b = min(a, s), max(b, e)
        out.append((a, b))
        self.spans = sorted(out)

    def remove(self, a: int, b: int) -> None:
        out = []
        for s, e in self.spans:
            if e <= a or s >= b:
                out.append((s, e))
                continue
            if s < a:
                out.append((s, a))
            if b < e:
                out.append((b, e))
        self.spans = out

    def covers(self, a: int, b: int) -> bool:
        return b <= a or any(s <= a and b <= e for s, e in self.spans)

    def overlaps(self, a: int, b: int) -> bool:
        return any(s < b and a < e for s, e in self.spans)


def _region(size: int, mem: str, addr: int, dt: np.dtype, count: int, what: str) -> tuple[int, int]:
    n = int(count) * dt.itemsize
    if addr % dt.itemsize:
        raise _Fault(f"{what} address {addr:#x} in {mem} memory is not {dt.itemsize}-byte aligned")
    if addr + n > size:
        raise _Fault(f"{what} [{addr:#x}, {addr + n:#x}) runs past the end of {mem} memory ({size:#x} bytes)")
    return addr, addr + n


def _window(ins, hin, win, kh, kw, sh, sw, dh, dw) -> None:
    if min(kh, kw, sh, sw, dh, dw) < 1:
        raise _Fault("kernel, stride and dilation must be >= 1")
    eh, ew = (kh - 1) * dh + 1, (kw - 1) * dw + 1
    if eh > hin or ew > win:
        raise _Fault(f"a {eh}x{ew} window does not fit the {hin}x{win} input")
    if (ins.hout, ins.wout) != ((hin - eh) // sh + 1, (win - ew) // sw + 1):
        raise _Fault(f"out={ins.hout}x{ins.wout} disagrees with the window over {hin}x{win}")


def _xfer_accesses(ins: Instruction, sizes: dict[str, int]):
    """An XFER's chunks as accesses (one span when the chunks are back to back)."""
    if ins.len < 1 or ins.count < 1:
        raise _Fault(f"len={ins.len} count={ins.count}; a transfer moves at least one byte")
    if ins.xsrc == ins.xdst:
        raise _Fault(f"source and destination are both {MEMORY_NAMES[ins.xsrc]} memory")
    out = []
    for mem, base, stride, rw, what in ((ins.xsrc, ins.src, ins.sstride, "r", "transfer source"),
                                        (ins.xdst, ins.dst, ins.dstride, "w", "transfer destination")):
        name = MEMORY_NAMES[mem]
        end = base + (ins.count - 1) * stride + ins.len
        if end > sizes[name]:
            raise _Fault(f"{name} region up to {end:#x} runs past the end of {name} memory ({sizes[name]:#x} bytes)")
        if ins.count > 1 and stride < ins.len:
            raise _Fault(f"{name} stride {stride} is shorter than a chunk ({ins.len} B)")
        if ins.count == 1 or stride == ins.len:
            out.append((name, base, end, rw, what))
        else:
            out.extend((name, base + k * stride, base + k * stride + ins.len, rw, what) for k in range(ins.count))
    return out


def accesses(ins: Instruction, frame_size: int, filter_size: int, pe: int | None, external_size: int = 0):
    """[(memory, start, end, 'r'|'w', what)] of one instruction, or raise _Fault as the machine would.

    The order of the tests follows the machine's, so the first fault found is the one it reports.
    """
    op, fmt = ins.op, getattr(ins, "fmt", None)
    if op in (Op.END, Op.NOP):
        return []
    if op.name == "XFER":
        return _xfer_accesses(ins, {"frame": frame_size, "filter": filter_size, "external": external_size})
    f = ins.fields
    if pe is not None and pe_used(ins) > pe:
        raise _Fault(f"a block of {block_size(ins)} inputs{times_lanes(ins)} exceeds the {pe} "
                     f"processing elements")
    if fmt is Fmt.F32 and (ins.out_zp or f.get("in_zp") or f.get("rnd") or f.get("w_zp")):
        raise _Fault("zero points and rounding are I8-only fields")
    for problem in operand_faults(ins):
        raise _Fault(problem)
    if fmt is Fmt.I8 and f.get("leaky") and not f.get("dsp"):
        raise _Fault("the I8 leaky stage (a second DSP multiplier) needs dsp=1")
    if f.get("partial") and (ins.dsp or ins.leaky or ins.clamp or ins.pt or ins.pb or ins.pl or ins.pr):
        raise _Fault("a partial instruction sets DSP, activation or padding")
    if op is Op.MAXPOOL and ins.dsp:
        raise _Fault("max pooling has no DSP stage")
    if op.name in ("EADD", "EMUL") and ins.dsp != (fmt is Fmt.I8):
        raise _Fault(f"{op.name}: dsp must be 1 in I8, 0 in F32")
    if op is Op.AVGPOOL and ins.in_zp and not ins.dsp:
        raise _Fault("AVGPOOL: in_zp without the DSP stage")
    empty = [n for n in ("cin", "hin", "win", "cout", "hout", "wout") if f.get(n, 1) == 0]
    if empty:
        raise _Fault(f"{', '.join(empty)} = 0")
    fdt, wdt, adt = FRAME_DTYPE[fmt], WEIGHT_DTYPE[fmt], ACC_DTYPE[fmt]
    acc: list = []
    cat = op.name == "CAT"
    if op.name in ("EADD", "EMUL"):
        bcast = op.name == "EMUL" and ins.bcast
        for k, (src, (t, b, l, r), what) in enumerate(
                ((ins.src, (ins.at, ins.ab, ins.al, ins.ar), "first operand"),
                 (ins.src2, (ins.bt, ins.bb, ins.bl, ins.br), "second operand"))):
            h, w = (1, 1) if (k and bcast) else (ins.hout, ins.wout)
            n = ins.cout * (h + t + b) * (w + l + r)
            acc.append(("frame", *_region(frame_size, "frame", src, fdt, n, what), "r", what))
        chans, out_hw = ins.cout, (ins.hout, ins.wout)
    elif cat:
        n = ins.cin * (ins.hout + ins.at + ins.ab) * (ins.wout + ins.al + ins.ar)
        acc.append(("frame", *_region(frame_size, "frame", ins.src, fdt, n, "input"), "r", "input"))
        chans, out_hw = ins.cin, (ins.hout, ins.wout)
    elif op is Op.ADD:
        if ins.npart < 1:
            raise _Fault("npart must be at least 1")
        count = ins.cout * ins.hout * ins.wout
        acc.append(("filter", *_region(filter_size, "filter", ins.src, adt, count * ins.npart, "partials"), "r", "partials"))
        chans = ins.cout
        out_hw = (ins.hout, ins.wout)
    else:
        cin, hin, win = ins.cin, ins.hin, ins.win
        acc.append(("frame", *_region(frame_size, "frame", ins.src, fdt, cin * hin * win, "input"), "r", "input"))
        if op in (Op.MAXPOOL, Op.AVGPOOL):
            _window(ins, hin, win, ins.kh, ins.kw, ins.sh, ins.sw, 1, 1)
            if op is Op.AVGPOOL and np.any(avgpool_taps(ins)[1] == 0):
                raise _Fault("a window lies wholly in the border left out of the average")
            chans, out_hw = cin, (ins.hout, ins.wout)
        elif op.name == "RESIZE":
            chans, out_hw = cin, (ins.hout, ins.wout)
        elif op.name == "LUT":
            if fmt is Fmt.I8:
                acc.append(("filter", *_region(filter_size, "filter", ins.wgt, wdt,
                                               (cin if ins.perch else 1) * LUT_ENTRIES, "table"),
                            "r", "table"))
            chans, out_hw = cin, (hin, win)
        elif op is Op.DENSE:
            n = cin * hin * win
            if ins.nn < 1 or ins.n0 + ins.nn > n:
                raise _Fault(f"elems {ins.n0}+{ins.nn} outside the input's {n} elements")
            acc.append(("filter", *_region(filter_size, "filter", ins.wgt, wdt, ins.cout * n, "weights"), "r", "weights"))
            chans, out_hw = ins.cout, (1, 1)
        elif op in (Op.CONV, Op.DWCONV) or op.name == "TCONV":
            if op.name == "TCONV":          # the convolution runs over the spread-out input
                hin = (hin - 1) * ins.uh + 1 + ins.qt + ins.qb
                win = (win - 1) * ins.uw + 1 + ins.ql + ins.qr
            _window(ins, hin, win, ins.kh, ins.kw, ins.sh, ins.sw, ins.dh, ins.dw)
            if ins.rn < 1 or ins.sn < 1 or ins.r0 + ins.rn > ins.kh or ins.s0 + ins.sn > ins.kw:
                raise _Fault("kernel rows/cols sub-block outside the kernel")
            if op is not Op.DWCONV:
                if ins.cn < 1 or ins.c0 + ins.cn > cin:
                    raise _Fault(f"channels {ins.c0}+{ins.cn} outside the input's {cin}")
                nw = ins.cout * cin * ins.kh * ins.kw
            else:
                if ins.cout != cin * ins.mult:
                    raise _Fault(f"dwconv cout {ins.cout} != cin {cin} x mult {ins.mult}")
                nw = ins.cout * ins.kh * ins.kw
            acc.append(("filter", *_region(filter_size, "filter", ins.wgt, wdt, nw, "weights"), "r", "weights"))
            chans, out_hw = ins.cout, (ins.hout, ins.wout)
        else:
            raise _Fault(f"opcode {op.name} has no semantics in this machine model")
        if getattr(ins, "partial", 0):
            count = ins.cout * out_hw[0] * out_hw[1]
            acc.append(("filter", *_region(filter_size, "filter", ins.dst, adt, count, "partial"), "w", "partial"))
            return acc
    if f.get("dsp") or f.get("leaky") or f.get("clamp"):
        nwords = param_block_bytes(chans, bool(ins.dsp), op) // 4
        acc.append(("filter", *_region(filter_size, "filter", ins.prm, PARAM_DTYPE[fmt], nwords, "parameters"),
                    "r", "parameters"))
    h, w = out_hw
    plane = (h + ins.pt + ins.pb) * (w + ins.pl + ins.pr)
    start, end = _region(frame_size, "frame", ins.dst, fdt, (ins.cout if cat else chans) * plane, "output")
    if cat:                                  # CAT writes its channels of the output only
        start += ins.coff * plane * fdt.itemsize
        end = start + chans * plane * fdt.itemsize
    acc.append(("frame", start, end, "w", "output"))
    return acc


def _shift_fault(ins: Instruction, filt: bytes, chans: int) -> str | None:
    """The machine's I8 DSP shift range, judged from the filter image."""
    if ins.op.name == "EMUL":
        start = ins.prm + 4 * PARAM_HEADER_WORDS
        w = np.frombuffer(filt[start:start + 4 * EMUL_WORDS].ljust(4 * EMUL_WORDS, b"\xff"), "<i4")
        return None if -31 <= w[3] <= 30 else f"I8 DSP shift {int(w[3])}..{int(w[3])} outside [-31, 30]"
    if ins.op is Op.EADD:
        start = ins.prm + 4 * PARAM_HEADER_WORDS
        w = np.frombuffer(filt[start:start + 4 * EADD_WORDS].ljust(4 * EADD_WORDS, b"\xff"), "<i4")
        if not 0 <= w[2] <= 30:
            return f"EADD left shift {int(w[2])} outside [0, 30]"
        bad = [int(v) for v in w[[4, 6, 8]] if not -31 <= v <= 30]
        return f"EADD shift {bad[0]} outside [-31, 30]" if bad else None
    start = ins.prm + 4 * (PARAM_HEADER_WORDS + 2 * chans)
    shifts = np.frombuffer(filt[start:start + 4 * chans].ljust(4 * chans, b"\xff"), "<i4")
    if ins.leaky:                          # I8 leaky: the header's shift for negative values too
        head = np.frombuffer(filt[ins.prm:ins.prm + 16].ljust(16, b"\xff"), "<i4")
        shifts = np.append(shifts, head[3])
    if chans and (shifts.min() < -31 or shifts.max() > 30):
        return f"I8 DSP shift {int(shifts.min())}..{int(shifts.max())} outside [-31, 30]"
    return None


def check_program(program: list[Instruction], *, frame_bytes: int, filter_bytes: int, pe: int | None,
                  filter_image: bytes = b"", frame_defined: tuple[int, int] | list = (0, 0),
                  filter_defined: int | None = None, external_bytes: int = 0,
                  external_image: bytes = b"", external_defined: tuple = ()) -> list[Finding]:
    """Faults and memory hazards of `program` alone (no layer table): see the module docstring.

    `frame_defined` is the byte range the frame image initializes (a list of them for a model
    with several inputs), `filter_defined` the filter
    image's length (default: len(filter_image)); `external_defined` the (start, end) ranges the
    external image initializes with meaning (a staged bundle's input, weights and parameters).
    Parameter blocks an XFER brings into filter memory are judged from the external image.
    """
    out: list[Finding] = []
    frame_w, filt_w, ext_w = _Intervals(), _Intervals(), _Intervals()
    for lo, hi in (frame_defined if isinstance(frame_defined, list) else [frame_defined]):
        frame_w.add(lo, hi)
    filt_w.add(0, len(filter_image) if filter_defined is None else filter_defined)
    for a, b in external_defined:
        ext_w.add(a, b)
    written = {"frame": frame_w, "filter": filt_w, "external": ext_w}
    shadow = bytearray(filter_image)           # filter memory's parameter bytes as the program leaves them
    partial_w = _Intervals()              # filter bytes the program itself wrote
    image_end = len(filter_image) if filter_defined is None else filter_defined
    ended = False
    for i, ins in enumerate(program):
        if ins.op is Op.END:
            ended = True
            if i + 1 < len(program):
                out.append(Finding("hazard", i + 1, f"{len(program) - i - 1} instruction(s) after END "
                                                    f"never run"))
            break
        try:
            acc = accesses(ins, frame_bytes, filter_bytes, pe, external_bytes)
        except _Fault as exc:
            out.append(Finding("fault", i, str(exc)))
            continue
        xfer = ins.op.name == "XFER"
        if xfer and ins.xsrc == Mem.EXTERNAL and ins.xdst == Mem.FILTER:
            data = external_image[ins.src:ins.src + ins.len]
            shadow[len(shadow):] = bytes(max(0, ins.dst + ins.len - len(shadow)))
            shadow[ins.dst:ins.dst + ins.len] = data.ljust(ins.len, b"\xff")
        for mem, a, b, rw, what in acc:
            if rw != "r":
                continue
            if not written[mem].covers(a, b):
                out.append(Finding("hazard", i, f"reads {what} {mem} [{a:#x}, {b:#x}) that neither the "
                                                f"image nor an earlier instruction wrote"))
            if mem == "filter" and what == "parameters" and ins.dsp and ins.fmt is Fmt.I8:
                if partial_w.overlaps(a, b):
                    out.append(Finding("hazard", i, f"its parameter block [{a:#x}, {b:#x}) was overwritten "
                                                    f"by partial sums; the DSP shift cannot be checked"))
                else:
                    chans = ((b - a) // 4 - PARAM_HEADER_WORDS) // DSP_ARRAYS
                    msg = _shift_fault(ins, bytes(shadow), chans)
                    if msg:
                        out.append(Finding("fault", i, msg))
        for mem, a, b, rw, what in acc:
            if rw == "w":
                written[mem].add(a, b)
                if mem == "filter" and xfer:
                    partial_w.remove(a, b)          # freshly transferred: no longer partial sums
                if mem == "filter" and not xfer:
                    partial_w.add(a, b)
                    if a < image_end:
                        out.append(Finding("hazard", i, f"partial sums [{a:#x}, {b:#x}) overwrite the filter "
                                                        f"image (weights/parameters end at {image_end:#x})"))
    if not ended:
        out.append(Finding("fault", len(program), f"no END: the machine runs off the end of the "
                                                   f"{len(program)}-instruction program"))
    return out


def check_bundle(bundle, profile=None) -> list[Finding]:
    """Everything :func:`check_program` finds, plus the layer table's live ranges and the profile
    (`profile`: another chip to hold the bundle to; default the one it was compiled for)."""
    from dtpu.isro.bundle import bundle_profile
    meta = bundle.meta
    prof = bundle_profile(meta) if profile is None else profile
    pe = meta.get("pe")
    fmt_size = FRAME_DTYPE[bundle.fmt].itemsize
    inp = meta["input"]
    c, h, w = inp["shape"]
    t, b, l, r = inp["pad"]
    in_end = inp["addr"] + c * (h + t + b) * (w + l + r) * fmt_size
    staged = bool(meta.get("staged"))
    if staged:                           # the input, weights and parameters live in external memory
        ext_defined = ((0, in_end), (meta["stats"]["tensors_bytes"], len(bundle.external)))
        out = check_program(bundle.program, frame_bytes=meta["frame_bytes"], filter_bytes=meta["filter_bytes"],
                            pe=pe, external_bytes=meta["external_bytes"], external_image=bundle.external,
                            external_defined=ext_defined)
    else:
        out = check_program(bundle.program, frame_bytes=meta["frame_bytes"], filter_bytes=meta["filter_bytes"],
                            pe=pe, filter_image=bundle.filter,
                            frame_defined=[(m["addr"], m["addr"] + m["bytes"]) for m in meta.get("inputs", [])]
                            or (inp["addr"], in_end))
    # -- profile
    n = len(bundle.program) * 64
    streamed = meta.get("program") or {}
    if streamed.get("memory") == "external" and staged:     # streamed through instruction memory (§1a)
        at = int(streamed.get("addr", -1))
        if (streamed.get("bytes") != n or streamed.get("buffer_instructions") != prof.max_instructions
                or at < len(bundle.external) or at + n > meta["external_bytes"]):
            out.append(Finding("profile", None, f"the streamed program's region in external memory "
                                                f"(addr {at:,}, {streamed.get('bytes')} B, buffer "
                                                f"{streamed.get('buffer_instructions')} instructions) does not "
                                                f"hold its {n:,} B after the images within the "
                                                f"{meta['external_bytes']:,} B, through {prof.name}'s "
                                                f"{prof.max_instructions}-instruction memory"))
    elif n > prof.program_bytes:
        out.append(Finding("profile", None, f"program is {n:,} B, instruction memory of {prof.name} is "
                                            f"{prof.program_bytes:,} B"))
    for key in ("frame_bytes", "filter_bytes"):
        if meta[key] > getattr(prof, key):
            out.append(Finding("profile", None, f"{key.split('_')[0]} memory needs {meta[key]:,} B, "
                                                f"{prof.name} has {getattr(prof, key):,} B"))
    if prof.pe is not None and (pe is None or pe > prof.pe):
        out.append(Finding("profile", None, f"compiled for pe={pe}, {prof.name} has {prof.pe}"))
    if staged and (prof.external is None or meta["external_bytes"] > prof.external.bytes):
        have = "no external memory" if prof.external is None else f"{prof.external.bytes:,} B of external memory"
        out.append(Finding("profile", None, f"external memory needs {meta['external_bytes']:,} B, {prof.name} "
                                            f"has {have}"))
    for i, ins in enumerate(bundle.program):
        if ins.op in (Op.END, Op.NOP) or ins.op.name == "XFER":     # transfers are byte-granular
            continue
        if ins.fmt.name.lower() not in prof.formats:
            out.append(Finding("profile", i, f"format {ins.fmt.name.lower()}; {prof.name} supports "
                                             f"{', '.join(prof.formats)}"))
        for f in ("src", "dst", "wgt", "prm"):
            if f == "dst" and ins.fields.get("partial"):
                continue          # a slot inside the ADD's partials region, which is aligned
            v = ins.fields.get(f)
            if v and v % prof.align:
                out.append(Finding("profile", i, f"{f}={v:#x} is not {prof.align}-byte aligned as "
                                                 f"{prof.name} requires"))
    # -- layer table: addresses as meant, no write into a tensor still live
    tensors = [("input", inp["addr"], in_end - inp["addr"], (-1, _live(inp, -1)[1]))]
    for k, layer in enumerate(meta["layers"]):
        o = layer["output"]
        c, h, w = o["shape"]
        t, b, l, r = o["pad"]
        tensors.append((layer["name"], o["addr"], c * (h + t + b) * (w + l + r) * fmt_size, _live(o, k)))
    for k, layer in enumerate(meta["layers"]):
        if layer.get("kind") == "input":       # a further model input: written with the frame image
            continue
        first, last = layer["instructions"]
        if not 0 <= first <= last < len(bundle.program):
            out.append(Finding("hazard", None, f"layer {layer['name']}: instructions {first}..{last} "
                                               f"outside the program"))
            continue
        if layer["output"].get("memory") == "external":
            out.extend(_staged_layer(bundle.program, layer, k, tensors))
            continue
        ins = bundle.program[last]
        if ins.op in (Op.END, Op.NOP) or getattr(ins, "partial", 0):
            out.append(Finding("hazard", last, f"layer {layer['name']} ends in a {ins.op.name.lower()}, "
                                               f"not an instruction that writes its output"))
            continue
        if ins.dst != layer["output"]["addr"]:
            out.append(Finding("hazard", last, f"writes {ins.dst:#x}, but layer {layer['name']}'s output "
                                               f"is at {layer['output']['addr']:#x}"))
        lo, hi = ins.dst, ins.dst + tensors[k + 1][2]
        for name, a, size, (t0, t1) in tensors:
            if name != layer["name"] and t0 <= k <= t1 and a < hi and lo < a + size:
                out.append(Finding("hazard", last, f"layer {layer['name']}'s output [{lo:#x}, {hi:#x}) "
                                                   f"overlaps {name} [{a:#x}, {a + size:#x}), still live "
                                                   f"(layers {t0}..{t1})"))
        for j in range(first, last + 1):
            p = bundle.program[j]
            if p.op is Op.ADD or p.op in (Op.END, Op.NOP):
                continue
            srcs = [tensors[t][1] for t in layer.get("inputs", [k])]
            if p.op.name in ("EADD", "EMUL") and p.src2 not in srcs:
                out.append(Finding("hazard", j, f"reads {p.src2:#x}, but layer {layer['name']}'s inputs are "
                                                f"at {', '.join(f'{s:#x}' for s in srcs)}"))
            if p.src not in srcs:
                out.append(Finding("hazard", j, f"reads {p.src:#x}, but layer {layer['name']}'s input is at "
                                                f"{', '.join(f'{s:#x}' for s in srcs)}"))
    return sorted(set(out), key=lambda f: (-1 if f.index is None else f.index, KINDS.index(f.kind), f.message))


def _staged_layer(program, layer: dict, k: int, tensors: list) -> list[Finding]:
    """A staged layer's transfers agree with the layer table: it reads external memory only
    inside its input tensors, writes it only inside its output, and ends with such a write."""
    out = []
    first, last = layer["instructions"]
    name, o_addr, o_size, _ = tensors[k + 1]
    inputs = [tensors[t] for t in layer.get("inputs", [k])]
    end = program[last]
    if end.op.name != "XFER" or end.xdst != Mem.EXTERNAL:
        out.append(Finding("hazard", last, f"layer {name} is staged but does not end by writing its output "
                                           f"to external memory"))
    for j in range(first, last + 1):
        p = program[j]
        if p.op.name != "XFER":
            continue
        lo = p.src if p.xsrc == Mem.EXTERNAL else p.dst
        hi = lo + (p.count - 1) * (p.sstride if p.xsrc == Mem.EXTERNAL else p.dstride) + p.len
        if p.xdst == Mem.EXTERNAL and not (o_addr <= lo and hi <= o_addr + o_size):
            out.append(Finding("hazard", j, f"writes external [{lo:#x}, {hi:#x}) outside layer {name}'s "
                                            f"output [{o_addr:#x}, {o_addr + o_size:#x})"))
        if p.xsrc == Mem.EXTERNAL and p.xdst == Mem.FRAME and not any(
                a <= lo and hi <= a + size for _, a, size, _ in inputs):
            out.append(Finding("hazard", j, f"reads external [{lo:#x}, {hi:#x}) outside layer {name}'s inputs"))
    return out


def _live(t: dict, producer: int) -> tuple[int, int]:
    live = t.get("live")
    return tuple(live) if live else (producer, producer + 1)


def first_fault(findings: list[Finding]) -> int | None:
    """The instruction at which the machine stops, if the findings say it does."""
    idx = [f.index for f in findings if f.kind == "fault" and f.index is not None]
    return min(idx) if idx else None
