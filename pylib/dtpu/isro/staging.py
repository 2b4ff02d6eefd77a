"""Networks larger than the chip: every tensor and weight in external memory, each layer staged
through frame and filter memory in row bands and output-channel chunks.

Used when a model does not fit frame or filter memory as :func:`dtpu.isro.compiler.emit` lays
it out and the chip profile has an ``external`` memory. Channel-major layouts make both cuts
plain address arithmetic:

- an **output-channel chunk** ``[k0, k1)`` is a contiguous run of the output tensor, of the
  weight bank (``F x C x KH x KW``, ``(C*M) x KH x KW``, ``units x N``) and of each per-channel
  DSP array (so each chunk gets its own parameter block);
- a **row band** of output rows ``[y0, y1)`` reads padded input rows ``[y0*sh, (y1-1)*sh + eh)``
  (the halo: ``eh - sh`` rows shared with the next band), which is one contiguous run per channel.

So one XFER brings a chunk's weights, one its parameters, one (two for EADD) the band's input
(one chunk of ``len`` bytes per channel, ``sstride`` apart), the layer's own instruction
computes the band into frame memory exactly as it computes a whole tensor (a VALID window over
the staged rows), and one XFER writes the band back, border included: the first band writes the
tensor's top border, the last its bottom, every band the left and right ones. I8 results are the
unstaged program's bit for bit (the same instructions over the same values, split the same way);
F32 ones differ only by float32 summation order, as splitting's do.

Staging is double-buffered where both memories hold two sets: bands alternate between two
frame-memory sets and chunks between two weight sets, so on a chip whose DMA engine runs beside
the compute unit (:mod:`dtpu.isro.timing`) the next band's input and the next chunk's weights
arrive while the current one computes. Each XFER costs ``latency + bytes / bandwidth`` cycles
(:class:`dtpu.isro.machine.Link`).
"""
from __future__ import annotations

import logging
from dataclasses import dataclass, replace

import numpy as np

from dtpu.isro import isa, resample
from dtpu.isro.bundle import FORMAT, Bundle, pad_chw
from dtpu.isro.ir import CompileError, Layer
from dtpu.isro.layout import (param_words, borders, layer_inputs, require_format, resolve_borders,
                              resolve_pe, split_blocks)
from dtpu.isro.isa import (ACC_DTYPE, FRAME_DTYPE, WEIGHT_DTYPE, Fmt, Instruction, Mem, Op, Rounding,
                           align)
from dtpu.isro.profile import Profile

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Plan:
    """How one layer is staged: output channels in chunks of `chunk`, output rows in bands of
    `band`; with `double`, two staging sets in frame memory (a band's input arrives while the
    previous band computes), two for weights and parameters in filter memory, and two for split
    partials (a band's ADD reduces its partials while the next band's blocks write theirs)."""

    chunk: int
    band: int
    frame_set: int            # one band's input(s) and output in frame memory
    weights_set: int          # one chunk's weights and parameters in filter memory
    scratch: int              # split partials after the weight sets
    double: bool

    @property
    def frame_bytes(self) -> int:
        return self.frame_set * (2 if self.double else 1)

    @property
    def filter_bytes(self) -> int:
        return (self.weights_set + self.scratch) * (2 if self.double else 1)


def _xfer(src_mem: Mem, dst_mem: Mem, src: int, dst: int, nbytes: int, count: int = 1,
          sstride: int = 0, dstride: int = 0) -> Instruction:
    return Instruction(Op.XFER, xsrc=src_mem, xdst=dst_mem, src=src, dst=dst, len=nbytes, count=count,
                       sstride=sstride if count > 1 else 0, dstride=dstride if count > 1 else 0)


def _chunk_layer(layer: Layer, k0: int, k1: int) -> Layer:
    """The layer restricted to output channels [k0, k1): its weights and DSP arrays sliced."""
    c, h, w = layer.out_shape
    changes = dict(out_shape=(k1 - k0, h, w))
    if layer.weights is not None and (layer.kind != "lut" or np.ndim(layer.weights) == 2):
        changes["weights"] = np.asarray(layer.weights)[k0:k1]     # (a LUT's one table serves every channel)
    if layer.dsp is not None:
        changes["dsp"] = tuple(np.asarray(a)[k0:k1] for a in layer.dsp)
    if layer.kind in ("dwconv", "maxpool", "avgpool", "eadd", "emul", "lut", "resize"):
        ci, hi, wi = layer.in_shape
        m = layer.mult if layer.kind == "dwconv" else 1
        changes["in_shape"] = ((k1 - k0) // m, hi, wi)
    return replace(layer, **changes)


def band_rows(layer: Layer, y0: int, y1: int, hin: int) -> tuple[int, int, dict]:
    """(first input row, input rows, band fields) that output rows [y0, y1) read from an input of
    `hin` (padded) rows: for a window, the rows under it, halo included; for TCONV the real rows
    whose spread-out copies fall in the band's virtual input [y0, y1 - 1 + eh), with the band's own
    fill rows above and below them (`qt`, `qb`)."""
    eh = (layer.kernel[0] - 1) * layer.dilation[0] + 1
    if layer.kind == "tconv":
        uh = layer.upsample[0]
        qt = layer.inner[0]
        end = y1 - 1 + eh                                   # virtual rows [y0, end)
        j0 = max(0, -(-(y0 - qt) // uh))
        j1 = min(hin - 1, (end - 1 - qt) // uh)
        if j1 < j0:
            raise CompileError(f"{layer.name}: output rows {y0}..{y1 - 1} of this transposed convolution read "
                               f"only its fill rows; accepted when staged: bands that reach an input row "
                               f"(a kernel at least as tall as the stride)")
        top = qt + j0 * uh - y0
        bottom = end - y0 - ((j1 - j0) * uh + 1) - top
        return j0, j1 - j0 + 1, {"qt": top, "qb": bottom}
    if layer.kind == "resize":
        mode, align_c, half = layer.resize
        hout = layer.out_shape[1]
        lo, hi = resample.source_rows(hout, hin, y0, y1 - y0, mode == "bilinear", align_c, half)
        return lo, hi - lo + 1, {"fho": hout, "fhi": hin, "yo": y0, "yi": lo}
    if layer.kind in ("conv", "dwconv", "maxpool", "avgpool", "lut"):
        sh = layer.stride[0]
        return y0 * sh, (y1 - y0 - 1) * sh + eh, {}
    raise CompileError(f"{layer.name}: no row bands for {layer.kind} layers")


def _max_band_rows(layer: Layer, r: int, hin: int) -> int:
    """The most input rows a band of `r` output rows reads (the plan sizes staging buffers by it)."""
    if layer.kind == "tconv":
        return min(hin, -(-(r - 1 + (layer.kernel[0] - 1) * layer.dilation[0] + 1) // layer.upsample[0]) + 1)
    if layer.kind == "resize":
        hout = layer.out_shape[1]
        return max(band_rows(layer, y0, min(hout, y0 + r), hin)[1] for y0 in range(0, hout, r))
    return (r - 1) * layer.stride[0] + (layer.kernel[0] - 1) * layer.dilation[0] + 1


def plan_layer(layer: Layer, in_pads: list[tuple], out_pad: tuple, fmt: Fmt, prof: Profile,
               pe: int | None) -> Plan:
    """The largest chunk (fewest weight reloads), then the largest band, that fit both memories
    double-buffered; single-buffered when no double-buffered plan fits."""
    to = prof.align
    item, wit, acc = FRAME_DTYPE[fmt].itemsize, WEIGHT_DTYPE[fmt].itemsize, ACC_DTYPE[fmt].itemsize
    cout, hout, wout = layer.out_shape
    cin, hin, win = layer.in_shape
    kh, kw = layer.kernel
    sh = layer.stride[0]
    eh = (kh - 1) * layer.dilation[0] + 1
    mult = layer.mult if layer.kind == "dwconv" else 1
    pt, pb, pl, pr = out_pad

    def wp(pad):
        return win + pad[2] + pad[3]

    def need(k: int, r: int) -> Plan:
        sub = _chunk_layer(layer, 0, k)
        if layer.kind == "dense":
            inb = align(int(np.prod([cin, hin + in_pads[0][0] + in_pads[0][1], wp(in_pads[0])])) * item, to)
        elif layer.kind in ("eadd", "emul"):
            inb = sum(align(k * ((1 + p[0] + p[1]) * (1 + p[2] + p[3]) if (j and layer.bcast) else r * wp(p))
                            * item, to) for j, p in enumerate(in_pads))
        else:
            ch = cin if layer.kind in ("conv", "tconv") else k // mult
            hp = hin + in_pads[0][0] + in_pads[0][1]
            inb = align(ch * _max_band_rows(layer, r, hp) * wp(in_pads[0]) * item, to)
        outb = align(k * (r + pt + pb) * (wout + pl + pr) * item, to)
        weights = 0 if sub.weights is None else align(np.asarray(sub.weights).size * wit, to)
        words = param_words(sub, fmt)
        params = 0 if words is None else align(words.nbytes, to)
        blocks = (split_blocks(replace(sub, out_shape=(k, r, wout)), pe)
                  if layer.kind in ("conv", "tconv", "dwconv", "dense") else [{}])
        scratch = align(k * r * wout * acc * len(blocks), to) if len(blocks) > 1 else 0
        return Plan(k, r, inb + outb, weights + params, scratch, double)

    step = mult
    chunks = sorted({max(step, (cout // d) // step * step) for d in range(1, cout // step + 1)}, reverse=True)
    for double in (True, False):
        for k in chunks:
            if cout % step or k % step:
                continue
            lo, hi, best = 1, (1 if layer.kind == "dense" else hout), None
            while lo <= hi:                       # the largest band that fits, for this chunk
                mid = (lo + hi) // 2
                plan = need(k, mid)
                if plan.frame_bytes <= prof.frame_bytes and plan.filter_bytes <= prof.filter_bytes:
                    best, lo = plan, mid + 1
                else:
                    hi = mid - 1
            if best is not None:
                return best
    plan = need(step, 1)
    fr, fi = plan.frame_bytes, plan.filter_bytes
    raise CompileError(f"{layer.name}: even one output row of {step} channel(s) needs {fr:,} B of frame "
                       f"memory and {fi:,} B of filter memory; chip profile {prof.name} has "
                       f"{prof.frame_bytes:,} B and {prof.filter_bytes:,} B")


def plan_concat(layer: Layer, shapes: list[tuple], in_pads: list[tuple], out_pad: tuple, fmt: Fmt,
                prof: Profile) -> Plan:
    """A concatenation staged operand by operand in row bands: the largest band whose input and
    output for the widest operand fit frame memory (double-buffered if that fits too)."""
    to, item = prof.align, FRAME_DTYPE[fmt].itemsize
    _, hout, wout = layer.out_shape
    pt, pb, pl, pr = out_pad

    def need(r: int) -> int:
        return max(align(c * r * (w + p[2] + p[3]) * item, to) + align(c * (r + pt + pb) * (wout + pl + pr) * item, to)
                   for (c, _, w), p in zip(shapes, in_pads))
    for double in (True, False):
        lo, hi, best = 1, hout, None
        while lo <= hi:
            mid = (lo + hi) // 2
            if need(mid) * (2 if double else 1) <= prof.frame_bytes:
                best, lo = mid, mid + 1
            else:
                hi = mid - 1
        if best is not None:
            return Plan(max(c for c, _, _ in shapes), best, need(best), 0, 0, double)
    raise CompileError(f"{layer.name}: even one output row of the concatenation needs {need(1):,} B of frame "
                       f"memory; chip profile {prof.name} has {prof.frame_bytes:,} B")


# the layer kinds the staged emitter tiles (the others run on chip only, issue 28.2)
STAGED_KINDS = ("conv", "dwconv", "dense", "maxpool", "avgpool", "eadd", "emul", "lut", "concat", "tconv", "resize")


def emit_staged(layers: list[Layer], fmt: Fmt, *, profile: Profile, pe: int | None = None,
                meta: dict | None = None, x: np.ndarray | None = None, in_scale: float | None = None,
                in_zp: int = 0, input_name: str = "input") -> Bundle:
    """The program for `layers` with every tensor, weight and parameter block in external memory."""
    prof = profile
    ext = prof.external
    pe = resolve_pe(prof, pe)
    to = prof.align
    layers = resolve_borders(layers, input_name)
    require_format(layers, fmt, prof)
    unstaged = [layer for layer in layers if layer.kind not in STAGED_KINDS]
    if unstaged:
        raise CompileError(f"{unstaged[0].name}: the network does not fit on chip, and staging through "
                           f"external memory tiles {', '.join(STAGED_KINDS)} layers, not {unstaged[0].kind}")
    fdt, wdt, adt = FRAME_DTYPE[fmt], WEIGHT_DTYPE[fmt], ACC_DTYPE[fmt]
    item = fdt.itemsize
    n = len(layers)
    pads, fills = borders(layers)
    shapes = [layers[0].in_shape] + [layer.out_shape for layer in layers]

    def padded(t):
        (c, h, w), (pt, pb, pl, pr) = shapes[t], pads[t]
        return c, h + pt + pb, w + pl + pr

    sizes = [int(np.prod(padded(t))) * item for t in range(n + 1)]
    addrs, cursor = [], 0                       # external memory: every tensor its own region
    for s in sizes:
        addrs.append(cursor)
        cursor = align(cursor + s, to)
    tensors_bytes = cursor

    plans = [plan_concat(layer, [shapes[t] for t in layer_inputs(layers, i)],
                         [pads[t] for t in layer_inputs(layers, i)], pads[i + 1], fmt, prof)
             if layer.kind == "concat" else
             plan_layer(layer, [pads[t] for t in layer_inputs(layers, i)], pads[i + 1], fmt, prof, pe)
             for i, layer in enumerate(layers)]
    frame_bytes = max(p.frame_bytes for p in plans)
    filter_bytes = max(p.filter_bytes for p in plans)

    image = bytearray()                         # external image after the tensors: weights, params

    def put(data: bytes) -> int:
        nonlocal cursor
        at = cursor
        image.extend(bytes(at - tensors_bytes - len(image)))
        image.extend(data)
        cursor = align(at + len(data), to)
        return at

    program: list[Instruction] = []
    layer_meta = []
    weights_bytes = params_bytes = 0
    bands_done = chunks_done = 0          # which staging set is next (double buffering alternates)
    for i, (layer, plan) in enumerate(zip(layers, plans)):
        first = len(program)
        src_t = layer_inputs(layers, i)
        cout, hout, wout = layer.out_shape
        cin, hin, win = layer.in_shape
        opad = pads[i + 1]
        pt, pb, pl, pr = opad
        dsp_on = layer.dsp is not None or (layer.kind in ("eadd", "emul") and fmt is Fmt.I8)
        out_zp = layer.out_zp if layer.post_offset is None else layer.post_offset
        if fmt is Fmt.I8 and out_zp != layer.out_zp and any(opad) and fills[i + 1].name == "ZERO":
            raise CompileError(f"{layer.name}: its output offset {out_zp} is not its zero point "
                               f"{layer.out_zp}, so the chip cannot fill the zero border a consumer needs")
        mult = layer.mult if layer.kind == "dwconv" else 1
        kh, kw = layer.kernel
        sh, sw = layer.stride
        eh = (kh - 1) * layer.dilation[0] + 1
        _, hp_o, wp_o = padded(i + 1)
        n_chunks = n_bands = 0
        if layer.kind == "concat":                  # operand by operand, band by band: copies
            coff = 0
            for t in src_t:
                c_t, hp_t, wp_t = padded(t)
                n_chunks += 1
                for y0 in range(0, hout, plan.band):
                    y1 = min(hout, y0 + plan.band)
                    r = y1 - y0
                    n_bands += 1
                    bt, bb = (pt if y0 == 0 else 0), (pb if y1 == hout else 0)
                    base = (bands_done % 2) * plan.frame_set if plan.double else 0
                    bands_done += 1
                    rows = r * wp_t * item
                    program.append(_xfer(Mem.EXTERNAL, Mem.FRAME, addrs[t] + (y0 + pads[t][0]) * wp_t * item,
                                         base, rows, c_t, hp_t * wp_t * item, rows))
                    out_at = align(base + c_t * rows, to)
                    program.append(Instruction(Op.CAT, fmt=fmt, fill=fills[i + 1], out_zp=out_zp if fmt is Fmt.I8 else 0,
                                               dst=out_at, pt=bt, pb=bb, pl=pl, pr=pr, src=base, cin=c_t, cout=c_t,
                                               hout=r, wout=wout, at=0, ab=0, al=pads[t][2], ar=pads[t][3], coff=0))
                    n_rows = r + bt + bb
                    chunk = n_rows * wp_o * item
                    program.append(_xfer(Mem.FRAME, Mem.EXTERNAL, out_at,
                                         addrs[i + 1] + (coff * hp_o * wp_o + (y0 + pt - bt) * wp_o) * item,
                                         chunk, c_t, chunk, hp_o * wp_o * item))
                coff += c_t
        for k0 in (range(0, cout, plan.chunk) if layer.kind != "concat" else ()):
            k1 = min(cout, k0 + plan.chunk)
            sub = _chunk_layer(layer, k0, k1)
            k = k1 - k0
            n_chunks += 1
            p_stage = 0
            w_stage = (chunks_done % 2) * plan.weights_set if plan.double else 0
            chunks_done += 1
            fcur = w_stage                            # filter staging: weights, parameters, partials
            if sub.weights is not None:
                wb = np.ascontiguousarray(sub.weights, dtype=wdt).tobytes()
                at = put(wb)
                weights_bytes += len(wb)
                program.append(_xfer(Mem.EXTERNAL, Mem.FILTER, at, w_stage, len(wb)))
                fcur = align(w_stage + len(wb), to)
            words = param_words(sub, fmt)
            if words is not None:
                pbytes = words.tobytes()
                at = put(pbytes)
                params_bytes += len(pbytes)
                p_stage = fcur
                program.append(_xfer(Mem.EXTERNAL, Mem.FILTER, at, p_stage, len(pbytes)))
                fcur = align(p_stage + len(pbytes), to)
            scratch0 = plan.weights_set * (2 if plan.double else 1)
            for y0 in range(0, hout, plan.band):
                y1 = min(hout, y0 + plan.band)
                r = y1 - y0
                n_bands += 1
                bt, bb = (pt if y0 == 0 else 0), (pb if y1 == hout else 0)
                base = (bands_done % 2) * plan.frame_set if plan.double else 0
                scratch = scratch0 + ((bands_done % 2) * plan.scratch if plan.double else 0)
                bands_done += 1
                fcur_frame = base
                in_addrs = []
                # bring the band's input(s) into frame memory
                if layer.kind == "dense":
                    t = src_t[0]
                    program.append(_xfer(Mem.EXTERNAL, Mem.FRAME, addrs[t], base, sizes[t]))
                    in_addrs.append(base)
                    fcur_frame = align(base + sizes[t], to)
                elif layer.kind in ("eadd", "emul"):
                    for j, t in enumerate(src_t):
                        c_t, hp_t, wp_t = padded(t)
                        if j and layer.kind == "emul" and layer.bcast:     # the whole (C, 1, 1) gate chunk
                            program.append(_xfer(Mem.EXTERNAL, Mem.FRAME, addrs[t] + k0 * hp_t * wp_t * item,
                                                 fcur_frame, k * hp_t * wp_t * item))
                            in_addrs.append(fcur_frame)
                            fcur_frame = align(fcur_frame + k * hp_t * wp_t * item, to)
                            continue
                        rows = r * wp_t * item
                        program.append(_xfer(Mem.EXTERNAL, Mem.FRAME,
                                             addrs[t] + (k0 * hp_t * wp_t + (y0 + pads[t][0]) * wp_t) * item,
                                             fcur_frame, rows, k, hp_t * wp_t * item, rows))
                        in_addrs.append(fcur_frame)
                        fcur_frame = align(fcur_frame + k * rows, to)
                else:
                    t = src_t[0]
                    c_t, hp_t, wp_t = padded(t)
                    c0, cn = (0, c_t) if layer.kind in ("conv", "tconv") else (k0 // mult, k // mult)
                    first_row, rows_in, _ = band_rows(layer, y0, y1, hp_t)
                    rows = rows_in * wp_t * item
                    program.append(_xfer(Mem.EXTERNAL, Mem.FRAME,
                                         addrs[t] + (c0 * hp_t * wp_t + first_row * wp_t) * item,
                                         base, rows, cn, hp_t * wp_t * item, rows))
                    in_addrs.append(base)
                    fcur_frame = align(base + cn * rows, to)
                out_at = fcur_frame
                post = dict(fmt=fmt, dsp=int(dsp_on), leaky=int(layer.leaky is not None),
                            clamp=int(layer.clamp is not None), fill=fills[i + 1],
                            out_zp=out_zp if fmt is Fmt.I8 else 0,
                            rnd=layer.rounding if fmt is Fmt.I8 else Rounding.DOUBLE,
                            dst=out_at, prm=p_stage, pt=bt, pb=bb, pl=pl, pr=pr)
                try:
                    _compute(program, layer, sub, fmt, post, in_addrs, src_t, pads, padded, r, k, pe,
                             w_stage, scratch, adt, y0)
                except ValueError as exc:
                    if isinstance(exc, CompileError):
                        raise
                    raise CompileError(f"{layer.name}: {exc}") from None
                # write the band back, with the border rows it owns
                n_rows = r + bt + bb
                row0 = y0 + pt - bt
                chunk = n_rows * wp_o * item
                program.append(_xfer(Mem.FRAME, Mem.EXTERNAL, out_at,
                                     addrs[i + 1] + (k0 * hp_o * wp_o + row0 * wp_o) * item,
                                     chunk, k, chunk, hp_o * wp_o * item))
        c_o, h_o, w_o = layer.out_shape
        layer_meta.append({
            "name": layer.name, "sources": list(layer.sources), "kind": layer.kind,
            "instructions": [first, len(program) - 1], "inputs": src_t,
            "input": {"addr": addrs[src_t[0]], "shape": list(layer.in_shape), "pad": list(layer.pad),
                      "fill": layer.fill.name.lower(), "memory": "external"},
            "output": {"addr": addrs[i + 1], "shape": [c_o, h_o, w_o], "pad": list(opad),
                       "fill": fills[i + 1].name.lower(), "flat": layer.flat_out,
                       "scale": layer.out_scale, "zero_point": layer.out_zp,
                       "bytes": sizes[i + 1], "live": [i, n], "memory": "external"},
            "weights": None, "params": None, "partials": None,
            "staging": {"chunk": plan.chunk, "chunks": n_chunks, "band": plan.band, "bands": n_bands,
                        "double": plan.double, "frame_bytes": plan.frame_bytes, "filter_bytes": plan.filter_bytes},
            "kernel": list(layer.kernel), "stride": list(layer.stride), "dilation": list(layer.dilation),
            "macs": layer.macs, "block": layer.block, "tensor": layer.tensor,
            "rounding": layer.rounding.label if fmt is Fmt.I8 and layer.dsp is not None else None,
        })
    program.append(Instruction(Op.END))
    program_bytes = len(program) * isa.INSTRUCTION_BYTES
    streamed = None
    if program_bytes > prof.program_bytes:     # the program streams from external memory (docs/isro_isa.md §1a)
        streamed = {"memory": "external", "addr": cursor, "bytes": program_bytes,
                    "buffer_instructions": prof.max_instructions}
        cursor = align(cursor + program_bytes, to)
        log.info("the staged program (%d instructions) exceeds %s's %d-instruction memory: it streams from "
                 "external memory at byte %d", len(program), prof.name, prof.max_instructions, streamed["addr"])
    external_bytes = cursor
    if external_bytes > ext.bytes:
        also = "" if streamed is None else f", program {program_bytes:,} B"
        raise CompileError(f"external memory needs {external_bytes:,} B (tensors {tensors_bytes:,} B, weights "
                           f"{weights_bytes:,} B, parameters {params_bytes:,} B{also}) but chip profile {prof.name} "
                           f"has {ext.bytes:,} B")

    if x is None:
        x = np.full(layers[0].in_shape, in_zp if fmt is Fmt.I8 else 0, dtype=fdt)
    input_image = pad_chw(x, pads[0], fills[0], in_zp, fmt).reshape(-1).view(np.uint8).tobytes()
    external_image = input_image + bytes(tensors_bytes - len(input_image)) + bytes(image)
    by_op: dict[str, int] = {}
    for ins in program:
        by_op[ins.op.name.lower()] = by_op.get(ins.op.name.lower(), 0) + 1
    last = layers[-1]
    m = {
        "format": FORMAT, "fmt": fmt.name.lower(), "pe": pe, "reuse": False, "staged": True,
        "profile": {**prof.to_dict(), "sha256": prof.sha256},
        "frame_bytes": frame_bytes, "filter_bytes": filter_bytes, "external_bytes": external_bytes,
        "input": {"name": input_name, "addr": 0, "shape": list(layers[0].in_shape),
                  "pad": list(pads[0]), "fill": fills[0].name.lower(),
                  "scale": in_scale, "zero_point": in_zp, "dtype": fdt.name,
                  "bytes": sizes[0], "live": [-1, n], "memory": "external"},
        "output": {"name": last.name, "addr": addrs[-1], "shape": list(last.out_shape),
                   "pad": list(pads[-1]), "flat": last.flat_out, "scale": last.out_scale,
                   "zero_point": last.out_zp, "dtype": fdt.name, "memory": "external"},
        "layers": layer_meta,
        "stats": {"instructions": len(program), "by_op": by_op,
                  "macs": int(sum(layer.macs for layer in layers)),
                  "frame_bytes": frame_bytes, "input_bytes": len(input_image),
                  "weights_bytes": weights_bytes, "params_bytes": params_bytes,
                  "scratch_bytes": 0, "program_bytes": len(program) * isa.INSTRUCTION_BYTES,
                  "external_bytes": external_bytes, "tensors_bytes": tensors_bytes},
    }
    if streamed is not None:
        m["program"] = streamed
    m.update(meta or {})
    log.info("staged %d layers through external memory: %d instructions, frame %d B, filter %d B, "
             "external %d B", n, len(program), frame_bytes, filter_bytes, external_bytes)
    return Bundle(program, b"", b"", m, external=external_image)


def _compute(program, layer: Layer, sub: Layer, fmt: Fmt, post: dict, in_addrs: list[int], src_t,
             pads, padded, r: int, k: int, pe, wgt: int, scratch: int, adt, y0: int = 0) -> None:
    """The layer's own instruction(s) over one staged band of one chunk (split as emit splits)."""
    cout, hout, wout = layer.out_shape
    if layer.kind == "eadd":
        (a_t, a_b, a_l, a_r), (b_t, b_b, b_l, b_r) = pads[src_t[0]], pads[src_t[1]]
        program.append(Instruction(Op.EADD, **post, src=in_addrs[0], src2=in_addrs[1], cout=k, hout=r,
                                   wout=wout, at=0, ab=0, al=a_l, ar=a_r, bt=0, bb=0, bl=b_l, br=b_r))
        return
    if layer.kind == "emul":
        (a_t, a_b, a_l, a_r), (b_t, b_b, b_l, b_r) = pads[src_t[0]], pads[src_t[1]]
        if not layer.bcast:
            b_t = b_b = 0                          # a band of rows, as the first operand's
        program.append(Instruction(Op.EMUL, **post, src=in_addrs[0], src2=in_addrs[1], cout=k, hout=r,
                                   wout=wout, at=0, ab=0, al=a_l, ar=a_r, bt=b_t, bb=b_b, bl=b_l, br=b_r,
                                   bcast=int(layer.bcast)))
        return
    t = src_t[0]
    c_t, hp_t, wp_t = padded(t)
    kh, kw = layer.kernel
    sh, sw = layer.stride
    eh = (kh - 1) * layer.dilation[0] + 1
    band = {}
    if layer.kind == "dense":
        geo = dict(src=in_addrs[0], cin=c_t, hin=hp_t, win=wp_t)
    else:
        ch = c_t if layer.kind in ("conv", "tconv") else sub.in_shape[0]
        _, rows_in, band = band_rows(layer, y0, y0 + r, hp_t)
        geo = dict(src=in_addrs[0], cin=ch, hin=rows_in, win=wp_t)
    if layer.kind == "resize":
        store = {key: post[key] for key in ("fmt", "fill", "out_zp", "dst", "pt", "pb", "pl", "pr")}
        mode, align_c, half = layer.resize
        program.append(Instruction(Op.RESIZE, **store, **geo, **band, hout=r, wout=wout,
                                   mode=isa.Mode[mode.upper()], align=int(align_c), half=int(half)))
        return
    if layer.kind == "lut":
        store = {key: post[key] for key in ("fmt", "fill", "out_zp", "dst", "pt", "pb", "pl", "pr")}
        program.append(Instruction(Op.LUT, **store, **geo, wgt=wgt, func=isa.Func[layer.func.upper()],
                                   perch=int(sub.weights is not None and np.ndim(sub.weights) == 2)))
        return
    if layer.kind in ("maxpool", "avgpool"):
        extra = {}
        if layer.kind == "avgpool":
            extra["in_zp"] = layer.in_zp if fmt is Fmt.I8 and layer.dsp is not None else 0
            extra["hup"] = int(layer.half_up)
            if layer.exclude_pad:                  # the SAME border inside this band's input rows
                pt_in, pb_in, pl_in, pr_in = layer.pad
                h_in = layer.in_shape[1]
                first, rows = y0 * sh, geo["hin"]
                extra.update(at=max(0, pt_in - first), ab=max(0, first + rows - (pt_in + h_in)),
                             al=pl_in, ar=pr_in)
        program.append(Instruction(Op[layer.kind.upper()], **geo, **post, **extra, kh=kh, kw=kw, sh=sh, sw=sw,
                                   hout=r, wout=wout))
        return
    mac = dict(geo, wgt=wgt, cout=k, in_zp=layer.in_zp if fmt is Fmt.I8 else 0,
               w_zp=layer.w_zp if fmt is Fmt.I8 else 0)
    op = {"conv": Op.CONV, "dwconv": Op.DWCONV, "dense": Op.DENSE, "tconv": Op.TCONV}[layer.kind]
    if layer.kind != "dense":
        mac.update(kh=kh, kw=kw, sh=sh, sw=sw, dh=layer.dilation[0], dw=layer.dilation[1], hout=r, wout=wout)
    if layer.kind == "tconv":
        mac.update(uh=layer.upsample[0], uw=layer.upsample[1], qt=band["qt"], qb=band["qb"],
                   ql=layer.inner[2], qr=layer.inner[3])
    if layer.kind == "dwconv":
        mac["mult"] = layer.mult
    blocks = split_blocks(replace(sub, out_shape=(k, r, wout)), pe)
    if len(blocks) == 1:
        program.append(Instruction(op, **mac, **post, **blocks[0]))
        return
    part_bytes = k * r * wout * adt.itemsize
    for j, b in enumerate(blocks):
        program.append(Instruction(op, **mac, **b, fmt=fmt, partial=1, dst=scratch + j * part_bytes))
    program.append(Instruction(Op.ADD, **post, src=scratch, cout=k, hout=r, wout=wout, npart=len(blocks)))
