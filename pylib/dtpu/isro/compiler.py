"""Compile a network (Keras .h5/.keras, TFLite, or one delegate node) to an ISRO bundle for a chip.

Three stages, as in the report, for the chip a :class:`~dtpu.isro.profile.Profile` describes:

1. A front end (:mod:`dtpu.isro.keras_h5`, :mod:`dtpu.isro.tflite_model`, or
   :func:`compile_spec`) builds the IR (:mod:`dtpu.isro.ir`): hardware layers over frame tensors,
   a DAG, with batch normalization and bias folded into DSP parameters, activations into the
   activation stage and zero padding into the producer's output border. Trailing heads the chip
   cannot run (softmax) are recorded for the host.
2. Memory allocation: every frame tensor gets one border (:func:`resolve_borders` copies a
   tensor read with two); frame memory keeps every tensor, or shares memory between tensors not
   live at once when that is needed to fit (:func:`plan_frame`); filter memory holds all weights,
   then all parameter blocks, then the scratch for split partials. Anything that does not fit the
   profile is refused naming the layer, the memory and the sizes.
3. Instruction generation: one instruction per layer, or, when a layer's block (kernel height x
   width x depth) exceeds the profile's processing elements, partial instructions plus an ADD
   that carries the DSP stage.

Anything the chip cannot express is refused with :class:`CompileError`, naming the layer and
the reason, rather than approximated.
"""
from __future__ import annotations

import hashlib
import logging
from pathlib import Path

import numpy as np

from dtpu.isro import isa
from dtpu.isro.bundle import FORMAT, Bundle, pad_chw, quantize, to_chw
from dtpu.isro.ir import TFLITE_ROUNDING, Builder, CompileError, Layer
from dtpu.isro.layout import (live_ranges, param_words, borders, layer_inputs, require_format,
                              resolve_borders, resolve_pe, split_blocks)
from dtpu.isro.profile import Profile
from dtpu.isro.isa import (ACC_DTYPE, FRAME_DTYPE, WEIGHT_DTYPE, Fill, Fmt,
                           Instruction, Op, Rounding, align, param_block_bytes)

log = logging.getLogger(__name__)


def plan_frame(sizes: list[int], ranges: list[tuple[int, int]], to: int) -> tuple[list[int], int]:
    """Frame addresses sharing memory between tensors whose live ranges do not overlap.

    Three placements, the smallest footprint wins (the model input always at address 0, where
    the frame image puts it): first fit taking the largest tensors first, first fit in
    definition order (both: the lowest aligned address free of every placed tensor live at the
    same time), and slots from an interval colouring (a chain becomes ping-pong between two
    regions). A layer's inputs and output are live together, so they never overlap.
    """
    def first_fit(order):
        placed, addrs = [], [0] * len(sizes)
        for t in order:
            lo, hi = ranges[t]
            busy = sorted((a, e) for a, e, u in placed if ranges[u][0] <= hi and lo <= ranges[u][1])
            at = 0
            for a, e in busy:
                if at + sizes[t] <= a:
                    break
                at = max(at, align(e, to))
            addrs[t] = at
            placed.append((at, at + sizes[t], t))
        return addrs

    def slots():
        colour, ends = [0] * len(sizes), []            # slot -> last layer it is busy
        for t in sorted(range(len(sizes)), key=lambda t: (ranges[t][0], t)):
            free = [k for k, e in enumerate(ends) if e < ranges[t][0]]
            k = free[0] if free else len(ends)
            if k == len(ends):
                ends.append(0)
            ends[k] = ranges[t][1]
            colour[t] = k
        width = [0] * len(ends)
        for t, k in enumerate(colour):
            width[k] = max(width[k], align(sizes[t], to))
        base = [sum(width[:k]) for k in range(len(width))]
        return [base[colour[t]] for t in range(len(sizes))]

    rest = list(range(1, len(sizes)))
    plans = [first_fit([0] + sorted(rest, key=lambda t: (-sizes[t], t))), first_fit([0] + rest), slots()]

    def footprint(addrs):
        return align(max(a + s for a, s in zip(addrs, sizes)), to)
    best = min(plans, key=footprint)
    return best, footprint(best)


class DoesNotFit(CompileError):
    """Frame or filter memory is too small for the program as laid out on chip; a profile with
    external memory compiles it staged instead (:mod:`dtpu.isro.staging`)."""


def emit(layers: list[Layer], fmt: Fmt, *, profile: Profile | None = None, pe: int | None = None,
         reuse: bool | None = None, meta: dict | None = None, x: np.ndarray | None = None,
         in_scale: float | None = None, in_zp: int = 0, input_name: str = "input",
         fewest_partials: bool = False) -> Bundle:
    """Allocate both memories and generate the program for `layers` on `profile`'s chip.

    `pe` overrides the profile's processing elements. `reuse` True shares frame memory between
    tensors that are not live at once, False gives every tensor its own region, None (default)
    shares only when separate regions would not fit the profile's frame memory. Anything that
    still does not fit raises :class:`CompileError` naming the layer, the memory and the sizes.
    `fewest_partials` splits blocks into the fewest partials rather than the fewest cycles
    (:func:`~dtpu.isro.layout.split_blocks`): less filter memory for partial sums.
    """
    from dtpu.isro.profile import unlimited
    prof = unlimited() if profile is None else profile
    pe = resolve_pe(prof, pe)
    to = prof.align
    layers = resolve_borders(layers, input_name)
    require_format(layers, fmt, prof)
    fdt = FRAME_DTYPE[fmt]
    # frame memory: tensor 0 is the model input, tensor i+1 the output of layer i, each stored
    # with the border its consumers read
    n = len(layers)
    pads, fills = borders(layers)
    shapes = [layers[0].in_shape] + [layer.out_shape for layer in layers]

    def nbytes(t):
        (c, h, w), (pt, pb, pl, pr) = shapes[t], pads[t]
        return c * (h + pt + pb) * (w + pl + pr) * fdt.itemsize

    sizes = [nbytes(t) for t in range(n + 1)]
    ranges = live_ranges(layers)
    separate, cursor = [], 0
    for s in sizes:
        separate.append(cursor)
        cursor = align(cursor + s, to)
    if reuse is True or (reuse is None and cursor > prof.frame_bytes):
        addrs, frame_bytes = plan_frame(sizes, ranges, to)
        reused = True
    else:
        addrs, frame_bytes, reused = separate, cursor, False
    if frame_bytes > prof.frame_bytes:
        # the layer whose live tensors alone need the most: the one that cannot fit
        need = []
        for i in range(n):
            live = [t for t in range(n + 1) if ranges[t][0] <= i <= ranges[t][1]]
            need.append((sum(align(sizes[t], to) for t in live), i, live))
        worst, i, live = max(need)
        what = ", ".join(f"{'input' if t == 0 else layers[t - 1].name} {sizes[t]:,} B" for t in live)
        raise DoesNotFit(
            f"{layers[i].name}: frame memory needs {frame_bytes:,} B{' with reuse' if reused else ''} "
            f"but chip profile {prof.name} has {prof.frame_bytes:,} B; at this layer {worst:,} B are "
            f"live ({what})" + ("" if reused else "; reuse was disabled"))

    # filter memory: weights of every layer, then parameter blocks, then split scratch
    wdt, adt = WEIGHT_DTYPE[fmt], ACC_DTYPE[fmt]
    w_addr, cursor, wchunks = [], 0, []
    for layer in layers:
        if layer.weights is None:
            w_addr.append(None)
            continue
        w = np.ascontiguousarray(layer.weights, dtype=wdt)
        w_addr.append(cursor)
        wchunks.append((cursor, w.tobytes()))
        cursor = align(cursor + w.nbytes, to)
        if cursor > prof.filter_bytes:
            raise DoesNotFit(f"{layer.name}: its weights ({w.nbytes:,} B) end at byte {cursor:,} of filter "
                               f"memory, past chip profile {prof.name}'s {prof.filter_bytes:,} B (the model's "
                               f"weights total {sum(np.asarray(l.weights).size * wdt.itemsize for l in layers if l.weights is not None):,} B)")
    weights_bytes = cursor
    p_addr, pchunks = [], []
    for layer in layers:
        words = param_words(layer, fmt)
        if words is None:
            p_addr.append(None)
            continue
        p_addr.append(cursor)
        pchunks.append((cursor, words.tobytes()))
        cursor = align(cursor + words.nbytes, to)
        if cursor > prof.filter_bytes:
            raise DoesNotFit(f"{layer.name}: its parameter block ends at byte {cursor:,} of filter memory, "
                               f"past chip profile {prof.name}'s {prof.filter_bytes:,} B (weights "
                               f"{weights_bytes:,} B)")
    params_bytes = cursor - weights_bytes
    scratch = cursor
    image = bytearray(cursor)
    for at, data in wchunks + pchunks:
        image[at:at + len(data)] = data

    program: list[Instruction] = []
    layer_meta = []
    scratch_bytes = 0
    for i, layer in enumerate(layers):
        if layer.kind == "input":              # a further model input: the frame image holds it
            layer_meta.append(input_layer_meta(layer, len(program), addrs[i + 1], pads[i + 1], fills[i + 1],
                                               sizes[i + 1], ranges[i + 1], FRAME_DTYPE[fmt]))
            continue
        (cin, h, w), (pt, pb, pl, pr) = layer.in_shape, layer.pad
        out_pad, out_fill = pads[i + 1], fills[i + 1]
        src_t = layer_inputs(layers, i)
        dsp_on = layer.dsp is not None or (layer.kind in ("eadd", "emul") and fmt is Fmt.I8)
        out_zp = layer.out_zp if layer.post_offset is None else layer.post_offset
        if fmt is Fmt.I8 and out_zp != layer.out_zp and any(pads[i + 1]) and fills[i + 1] is Fill.ZERO:
            raise CompileError(f"{layer.name}: its output offset {out_zp} is not its zero point "
                               f"{layer.out_zp}, so the chip cannot fill the zero border a consumer needs")
        post = dict(fmt=fmt, dsp=int(dsp_on), leaky=int(layer.leaky is not None),
                    clamp=int(layer.clamp is not None), fill=out_fill,
                    out_zp=out_zp if fmt is Fmt.I8 else 0,
                    rnd=layer.rounding if fmt is Fmt.I8 else Rounding.DOUBLE,
                    dst=addrs[i + 1], prm=p_addr[i] or 0,
                    pt=out_pad[0], pb=out_pad[1], pl=out_pad[2], pr=out_pad[3])
        geo = dict(src=addrs[src_t[0]], cin=cin, hin=h + pt + pb, win=w + pl + pr)
        cout, hout, wout = layer.out_shape
        first = len(program)
        blocks = [{}]
        try:
            store = {k: post[k] for k in ("fmt", "fill", "out_zp", "dst", "pt", "pb", "pl", "pr")}
            if layer.kind in ("maxpool", "avgpool"):
                extra = {}
                if layer.kind == "avgpool":
                    extra["in_zp"] = layer.in_zp if fmt is Fmt.I8 and layer.dsp is not None else 0
                    extra["hup"] = int(layer.half_up)
                    if layer.exclude_pad:
                        extra.update(zip(("at", "ab", "al", "ar"), layer.pad))
                program.append(Instruction(Op[layer.kind.upper()], **geo, **post, **extra, kh=layer.kernel[0],
                                           kw=layer.kernel[1], sh=layer.stride[0], sw=layer.stride[1],
                                           hout=hout, wout=wout))
            elif layer.kind == "concat":
                coff = 0
                for t in src_t:
                    a_t, a_b, a_l, a_r = pads[t]
                    program.append(Instruction(Op.CAT, **store, src=addrs[t], cin=shapes[t][0], cout=cout,
                                               hout=hout, wout=wout, at=a_t, ab=a_b, al=a_l, ar=a_r, coff=coff))
                    coff += shapes[t][0]
            elif layer.kind == "resize":
                mode, align_c, half = layer.resize
                program.append(Instruction(Op.RESIZE, **store, **geo, hout=hout, wout=wout,
                                           mode=isa.Mode[mode.upper()], align=int(align_c), half=int(half)))
            elif layer.kind == "lut":
                program.append(Instruction(Op.LUT, **store, **geo, wgt=w_addr[i] or 0,
                                           func=isa.Func[layer.func.upper()],
                                           perch=int(layer.weights is not None and np.ndim(layer.weights) == 2)))
            elif layer.kind == "emul":
                ta, tb = src_t
                (a_t, a_b, a_l, a_r), (b_t, b_b, b_l, b_r) = pads[ta], pads[tb]
                program.append(Instruction(Op.EMUL, **post, src=addrs[ta], src2=addrs[tb], cout=cout,
                                           hout=hout, wout=wout, at=a_t, ab=a_b, al=a_l, ar=a_r,
                                           bt=b_t, bb=b_b, bl=b_l, br=b_r, bcast=int(layer.bcast)))
            elif layer.kind == "eadd":
                ta, tb = src_t
                (a_t, a_b, a_l, a_r), (b_t, b_b, b_l, b_r) = pads[ta], pads[tb]
                program.append(Instruction(Op.EADD, **post, src=addrs[ta], src2=addrs[tb], cout=cout,
                                           hout=hout, wout=wout, at=a_t, ab=a_b, al=a_l, ar=a_r,
                                           bt=b_t, bb=b_b, bl=b_l, br=b_r))
            else:
                mac = dict(geo, wgt=w_addr[i], cout=cout, in_zp=layer.in_zp if fmt is Fmt.I8 else 0,
                           w_zp=layer.w_zp if fmt is Fmt.I8 else 0)
                op = {"conv": Op.CONV, "dwconv": Op.DWCONV, "dense": Op.DENSE, "tconv": Op.TCONV}[layer.kind]
                if layer.kind != "dense":
                    mac.update(kh=layer.kernel[0], kw=layer.kernel[1], sh=layer.stride[0], sw=layer.stride[1],
                               dh=layer.dilation[0], dw=layer.dilation[1], hout=hout, wout=wout)
                if layer.kind == "tconv":
                    mac.update(uh=layer.upsample[0], uw=layer.upsample[1],
                               **dict(zip(("qt", "qb", "ql", "qr"), layer.inner)))
                if layer.kind == "dwconv":
                    mac["mult"] = layer.mult
                blocks = split_blocks(layer, pe, fewest_partials=fewest_partials)
                if len(blocks) == 1:
                    program.append(Instruction(op, **mac, **post, **blocks[0]))
                else:
                    part_bytes = cout * hout * wout * adt.itemsize   # ADD reads them back to back
                    scratch_bytes = max(scratch_bytes, align(part_bytes * len(blocks), to))
                    if scratch + scratch_bytes > prof.filter_bytes:
                        raise DoesNotFit(
                            f"{layer.name}: split into {len(blocks)} parts for pe={pe}, its partial sums "
                            f"({part_bytes * len(blocks):,} B) end at byte {scratch + scratch_bytes:,} of filter "
                            f"memory, past chip profile {prof.name}'s {prof.filter_bytes:,} B")
                    for k, b in enumerate(blocks):
                        program.append(Instruction(op, **mac, **b, fmt=fmt, partial=1,
                                                   dst=scratch + k * part_bytes))
                    program.append(Instruction(Op.ADD, **post, src=scratch, cout=cout, hout=hout,
                                               wout=wout, npart=len(blocks)))
        except ValueError as exc:
            if isinstance(exc, CompileError):      # DoesNotFit included
                raise
            raise CompileError(f"{layer.name}: {exc}") from None
        if (len(program) + 1) * isa.INSTRUCTION_BYTES > prof.program_bytes:
            raise CompileError(f"{layer.name}: the program reaches {len(program) + 1} instructions "
                               f"({(len(program) + 1) * isa.INSTRUCTION_BYTES:,} B with END), past chip "
                               f"profile {prof.name}'s {prof.program_bytes:,} B of instruction memory")
        last = len(program) - 1
        c_o, h_o, w_o = layer.out_shape
        layer_meta.append({
            "name": layer.name, "sources": list(layer.sources), "kind": layer.kind,
            "instructions": [first, last],
            "inputs": src_t,
            "input": {"addr": addrs[src_t[0]], "shape": list(layer.in_shape), "pad": list(layer.pad),
                      "fill": layer.fill.name.lower()},
            "output": {"addr": addrs[i + 1], "shape": [c_o, h_o, w_o], "pad": list(out_pad),
                       "fill": out_fill.name.lower(), "flat": layer.flat_out,
                       "scale": layer.out_scale, "zero_point": layer.out_zp,
                       "bytes": sizes[i + 1], "live": list(ranges[i + 1])},
            "weights": None if w_addr[i] is None else {
                "addr": w_addr[i], "bytes": int(np.asarray(layer.weights).size * wdt.itemsize),
                "shape": list(np.asarray(layer.weights).shape)},
            "params": None if p_addr[i] is None else {
                "addr": p_addr[i], "bytes": param_block_bytes(c_o, dsp_on, Op[layer.kind.upper()]
                                                              if layer.kind in ("eadd", "emul") else None),
                "dsp": dsp_on},
            "partials": None if len(blocks) <= 1 else {
                "addr": scratch, "count": len(blocks), "bytes": c_o * h_o * w_o * adt.itemsize * len(blocks)},
            "kernel": list(layer.kernel), "stride": list(layer.stride), "dilation": list(layer.dilation),
            "macs": layer.macs, "block": layer.block, "tensor": layer.tensor,
            "rounding": layer.rounding.label if fmt is Fmt.I8 and layer.dsp is not None else None,
        })
    program.append(Instruction(Op.END))

    xs = list(x) if isinstance(x, (list, tuple)) else [x]
    if xs[0] is None:
        xs[0] = np.full(layers[0].in_shape, in_zp if fmt is Fmt.I8 else 0, dtype=FRAME_DTYPE[fmt])
    frame_image = pad_chw(xs[0], pads[0], fills[0], in_zp, fmt)
    extra = [i for i, layer in enumerate(layers) if layer.kind == "input"]
    if extra:
        frame_image = frame_with_inputs(frame_image, [
            (addrs[i + 1], pad_chw(_default(xs, k + 1, layers[i], fmt), pads[i + 1], fills[i + 1],
                                   layers[i].out_zp, fmt)) for k, i in enumerate(extra)])
    by_op: dict[str, int] = {}
    for ins in program:
        by_op[ins.op.name.lower()] = by_op.get(ins.op.name.lower(), 0) + 1
    last = layers[-1]
    m = {
        "format": FORMAT, "fmt": fmt.name.lower(), "pe": pe, "reuse": reused,
        "profile": {**prof.to_dict(), "sha256": prof.sha256},
        "frame_bytes": frame_bytes, "filter_bytes": scratch + scratch_bytes,
        "input": {"name": input_name, "addr": addrs[0], "shape": list(layers[0].in_shape),
                  "pad": list(pads[0]), "fill": fills[0].name.lower(),
                  "scale": in_scale, "zero_point": in_zp, "dtype": FRAME_DTYPE[fmt].name,
                  "bytes": sizes[0], "live": list(ranges[0])},
        "output": {"name": last.name, "addr": addrs[-1], "shape": list(last.out_shape),
                   "pad": [0, 0, 0, 0], "flat": last.flat_out, "scale": last.out_scale,
                   "zero_point": last.out_zp, "dtype": FRAME_DTYPE[fmt].name},
        "layers": layer_meta,
        "stats": {"instructions": len(program), "by_op": by_op,
                  "macs": int(sum(layer.macs for layer in layers)),
                  "frame_bytes": frame_bytes, "input_bytes": frame_image.nbytes,
                  "weights_bytes": weights_bytes, "params_bytes": params_bytes,
                  "scratch_bytes": scratch_bytes, "program_bytes": len(program) * isa.INSTRUCTION_BYTES},
    }
    if extra:
        m["inputs"] = input_metas_of(layer_meta, extra, m["input"])
    more_out = [i for i, layer in enumerate(layers[:-1]) if layer.model_output]
    if more_out:
        m["outputs"] = [m["output"]] + [{
            "name": layers[i].name, "addr": addrs[i + 1], "shape": list(layers[i].out_shape),
            "pad": list(pads[i + 1]), "flat": layers[i].flat_out, "scale": layers[i].out_scale,
            "zero_point": layers[i].out_zp, "dtype": FRAME_DTYPE[fmt].name, "layer": i} for i in more_out]
    m.update(meta or {})
    log.info("compiled %d layers into %d instructions (%s, %s, pe=%s, frame reuse %s)", len(layers),
             len(program), fmt.name.lower(), prof.name, pe, reused)
    return Bundle(program, frame_image.reshape(-1).view(np.uint8).tobytes(), bytes(image), m)


# -- further model inputs --------------------------------------------------------------------------

def input_layer_meta(layer: Layer, at: int, addr: int, pad, fill, size: int, live, dtype) -> dict:
    """meta.json's entry for a further model input: no instructions (an empty range at `at`)."""
    c, h, w = layer.out_shape
    return {"name": layer.name, "sources": list(layer.sources), "kind": "input", "instructions": [at, at - 1],
            "inputs": [], "input": None,
            "output": {"addr": addr, "shape": [c, h, w], "pad": list(pad), "fill": fill.name.lower(),
                       "flat": layer.flat_out, "scale": layer.out_scale, "zero_point": layer.out_zp,
                       "bytes": size, "live": list(live)},
            "weights": None, "params": None, "partials": None, "kernel": [1, 1], "stride": [1, 1],
            "dilation": [1, 1], "macs": 0, "block": 0, "tensor": layer.tensor, "rounding": None}


def input_metas_of(layer_meta: list[dict], extra: list[int], m_in0: dict) -> list[dict]:
    """meta.json ``inputs``: every model input in order, as ``input`` describes the first."""
    out = [m_in0]
    for i in extra:
        o = layer_meta[i]["output"]
        out.append({"name": layer_meta[i]["name"], "addr": o["addr"], "shape": o["shape"], "pad": o["pad"],
                    "fill": o["fill"], "scale": o["scale"], "zero_point": o["zero_point"],
                    "dtype": m_in0["dtype"], "bytes": o["bytes"], "live": o["live"], "layer": i})
    return out


def _default(xs: list, k: int, layer: Layer, fmt: Fmt) -> np.ndarray:
    """Input k as given, or zeros (the real zero) of its shape."""
    if k < len(xs) and xs[k] is not None:
        return xs[k]
    return np.full(layer.out_shape, layer.out_zp if fmt is Fmt.I8 else 0, dtype=FRAME_DTYPE[fmt])


def frame_with_inputs(first: np.ndarray, more: list[tuple[int, np.ndarray]]) -> np.ndarray:
    """The frame image (bytes from address 0) holding the first input and the others at theirs."""
    parts = [(0, first.reshape(-1).view(np.uint8))] + [(a, p.reshape(-1).view(np.uint8)) for a, p in more]
    image = np.zeros(max(a + p.size for a, p in parts), np.uint8)
    for a, p in parts:
        image[a:a + p.size] = p
    return image


# -- public entry points ---------------------------------------------------------------------------

def _input_chw(x, shape_chw, fmt: Fmt, scale, zp, offset: int = 0):
    """The model input as stored (unpadded C, H, W) in the program's format (a uint8 model's
    uint8 input `offset` lower)."""
    chw = to_chw(x, shape_chw)
    if offset and chw.dtype == np.uint8:
        chw = (chw.astype(np.int16) - offset).astype(np.int8)
    if fmt is Fmt.I8 and chw.dtype.kind == "f":
        return quantize(chw, scale, zp)
    if fmt is Fmt.I8 and chw.dtype != np.int8:
        if chw.min(initial=0) < -128 or chw.max(initial=0) > 127:
            raise ValueError(f"input: integer values {chw.min()}..{chw.max()} do not fit int8; pass "
                             f"int8 (already quantized) or float (real values, quantized by the host)")
        return chw.astype(np.int8)
    return chw.astype(FRAME_DTYPE[fmt])


def _source_meta(path: Path, kind: str) -> dict:
    data = path.read_bytes()
    return {"source": {"path": str(path), "kind": kind, "sha256": hashlib.sha256(data).hexdigest()}}


def _front_end(path: Path, build):
    """Run a front end; a malformed model (weights missing or of the wrong shape, options of the
    wrong type) is the model's fault, so it becomes a CompileError naming the file."""
    try:
        return build()
    except CompileError:
        raise
    except (KeyError, IndexError, ValueError, TypeError, AttributeError) as exc:
        raise CompileError(f"{path}: malformed model ({type(exc).__name__}: "
                           f"{' '.join(str(exc).split())}); it does not describe a network this "
                           f"compiler can read") from None


def compile_layers(builder: Builder, x=None, *, chip=None, pe=None, reuse=None, meta=None) -> Bundle:
    """Finish `builder` and emit it for `chip` (a Profile, a profile file, or None: the default).

    A uint8 model (meta ``tflite.input_offset``) stores its values 128 lower; the bundle's input
    and output record that ``offset`` so the host converts on the way in and out."""
    from dtpu.isro import profile
    prof = profile.resolve(chip)
    layers = builder.finish()
    meta = {**(meta or {}), "heads": list(builder.heads)}
    offsets = meta.get("tflite", {})
    more = builder.extra_inputs
    given = None if x is None else (len(x) if isinstance(x, (list, tuple)) else 1)
    if given is not None and given != 1 + len(more):
        raise ValueError(f"input: the model has {1 + len(more)} inputs "
                         f"({', '.join([builder.input_name] + [m.name for m in more])}); got {given} arrays")
    xs = list(x) if isinstance(x, (list, tuple)) else [x]
    xin = None if xs[0] is None else _input_chw(xs[0], builder.in_shape, builder.fmt, builder.in_scale,
                                                builder.in_zp, offsets.get("input_offset", 0))
    if more and len(xs) > 1:
        xin = [xin] + [_input_chw(xi, m.out_shape, builder.fmt, m.out_scale, m.out_zp)
                       for xi, m in zip(xs[1:], more)]
    kw = dict(meta=meta, x=xin, in_scale=builder.in_scale, in_zp=builder.in_zp, input_name=builder.input_name)
    try:
        try:
            bundle = emit(layers, builder.fmt, profile=prof, pe=pe, reuse=reuse, **kw)
        except DoesNotFit as exc:
            # the fewest-cycles split can need more partial sums than filter memory holds; the
            # fewest-partials split (the channel ranges this chip always had, lanes on the last
            # one) keeps a network on chip that fitted before, with no transfers at all
            log.info("%s; splitting into the fewest partials instead", exc)
            bundle = emit(layers, builder.fmt, profile=prof, pe=pe, reuse=reuse, fewest_partials=True, **kw)
    except DoesNotFit as exc:
        if prof.external is None or reuse is False:     # --no-reuse: every output in frame memory, or fail
            raise
        if more or any(layer.model_output for layer in layers[:-1]):
            raise DoesNotFit(f"{exc}; a model with several inputs or outputs compiles on chip only (staging "
                             f"through external memory takes one of each)") from None
        from dtpu.isro.staging import emit_staged
        log.info("%s; staging through external memory", exc)
        bundle = emit_staged(layers, builder.fmt, profile=prof, pe=pe, **kw)
    if offsets.get("input_offset") or offsets.get("output_offset"):
        bundle.meta["input"]["offset"] = offsets.get("input_offset", 0)
        bundle.meta["output"]["offset"] = offsets.get("output_offset", 0)
    return bundle


def compile_h5(path: str | Path, x: np.ndarray | None = None, *, chip=None, pe: int | None = None,
               reuse: bool | None = None, output: str | None = None) -> Bundle:
    """A Keras .h5 (read with h5py, no TensorFlow) plus optional input data -> Bundle (F32).

    `chip`: a :class:`~dtpu.isro.profile.Profile`, a profile file, or None for the default
    profile; `pe` overrides its processing elements; `reuse` see :func:`emit`; `output` names
    the model's output layer (Keras models compile with their one output: a check, not a choice).
    """
    from dtpu.isro import keras_h5
    path = Path(path)
    model = _front_end(path, lambda: keras_h5.read(path))
    last = model.layers[-1].name if model.layers else None
    outs = [last] + model.extra_outputs
    wanted = None if output is None else ([output] if isinstance(output, str) else list(output))
    for w in wanted or []:
        if w not in outs and not (w.isdigit() and int(w) < len(outs)):
            accepted = (f"the model's one output, layer {last!r} (or 0)" if len(outs) == 1 else
                        "its outputs " + ", ".join(f"{i}: {n!r}" for i, n in enumerate(outs)))
            raise CompileError(f"{path}: no model output {w!r}; accepted: {accepted}")
    if wanted is not None:
        names = [outs[int(w)] if w not in outs else w for w in wanted]
        if last not in names:
            raise CompileError(f"{path}: the outputs chosen ({', '.join(names)}) leave out {last!r}, the last "
                               f"layer; the layers after an output would compute nothing used")
        model.extra_outputs = [n for n in model.extra_outputs if n in names]
    builder = _front_end(path, lambda: keras_h5.build(model))
    return compile_layers(builder, x, chip=chip, pe=pe, reuse=reuse, meta=_source_meta(path, "keras-h5"))


def compile_tflite(path: str | Path, x: np.ndarray | None = None, *, chip=None, pe: int | None = None,
                   reuse: bool | None = None, output: str | None = None) -> Bundle:
    """A TFLite flatbuffer (float32 or int8) plus optional input -> Bundle (F32 or I8).

    `output`: the model output to compile, by tensor name or index, or a list of them for several
    (:func:`dtpu.isro.tflite_model.choose_output`; default: the one no operator reads)."""
    from dtpu.isro import tflite_model
    path = Path(path)
    builder, extra = _front_end(path, lambda: tflite_model.build(tflite_model.read(path), output))
    meta = _source_meta(path, "tflite")
    meta.update(extra)
    return compile_layers(builder, x, chip=chip, pe=pe, reuse=reuse, meta=meta)


def compile_model(path: str | Path, x: np.ndarray | None = None, **kw) -> Bundle:
    if not Path(path).is_file():
        raise FileNotFoundError(f"model {path} does not exist")
    suffix = Path(path).suffix.lower()
    if suffix in (".h5", ".hdf5", ".keras"):
        return compile_h5(path, x, **kw)
    if suffix == ".tflite":
        return compile_tflite(path, x, **kw)
    raise CompileError(f"{path}: unknown model format {suffix!r}; accepted: .h5, .hdf5, .keras, .tflite")


def compile_spec(spec, filters: np.ndarray, bias: np.ndarray | None, *, pe: int | None = None) -> Bundle:
    """One delegate node (a :class:`dtpu.spec.ConvSpec`) as a one-layer program for one image.

    The DSP parameters are TFLite's own: the (multiplier, shift) pairs of
    :func:`dtpu.reference.output_multipliers`, the clamp of :func:`dtpu.reference.activation_range`
    and the rounding of :data:`TFLITE_ROUNDING`, so the machine reproduces the interpreter bit for
    bit. FULLY_CONNECTED nodes become 1x1 convolutions over the (H, W) positions.
    """
    from dtpu import reference
    from dtpu.spec import DataMode, OpKind
    if spec.mode is DataMode.INT8:
        fmt = Fmt.I8
    elif spec.mode is DataMode.FLOAT32:
        fmt = Fmt.F32
    else:
        raise CompileError(f"{spec.name or spec.kind.value}: mode {spec.mode.value} has no ISRO number "
                           f"format; accepted: int8, float32")
    label = spec.name or spec.kind.value
    n, h, w, c = spec.input_shape
    f = np.asarray(filters)
    if spec.kind is OpKind.CONV_2D:
        weights, mult = f.reshape(spec.filter_shape).transpose(0, 3, 1, 2), None
    elif spec.kind is OpKind.DEPTHWISE_CONV_2D:
        weights, mult = f.reshape(spec.filter_shape)[0].transpose(2, 0, 1), spec.depth_multiplier
    else:
        weights, mult = f.reshape(spec.out_channels, c)[:, :, None, None], None
    cout = spec.out_channels
    if fmt is Fmt.I8:
        if np.any(spec.filter_q.zero_points(cout) != 0):
            raise CompileError(f"{label}: int8 weights with a nonzero zero point; the chip's weights are symmetric")
        m, s = reference.output_multipliers(spec)
        lo, hi = reference.activation_range(spec)
        bv = np.zeros(cout, np.int32) if (bias is None or not spec.has_bias) else np.asarray(bias).astype(np.int32)
        post = dict(dsp=(bv, m.astype(np.int32), s.astype(np.int32)), clamp=(int(lo), int(hi)),
                    rounding=TFLITE_ROUNDING[spec.kind.name], in_zp=int(spec.input_q.zero_point[0]),
                    out_zp=int(spec.output_q.zero_point[0]), out_scale=float(spec.output_q.scale[0]))
        in_scale, in_zp = float(spec.input_q.scale[0]), int(spec.input_q.zero_point[0])
    else:
        lo, hi = reference.activation_range(spec)
        bv = np.zeros(cout, np.float32) if (bias is None or not spec.has_bias) else np.asarray(bias, np.float32)
        post = dict(dsp=(np.ones(cout, np.float32), np.zeros(cout, np.float32), bv),
                    clamp=None if (lo, hi) == (-np.inf, np.inf) else (float(lo), float(hi)))
        in_scale, in_zp = None, 0
    b = Builder(fmt, (c, h, w), in_scale=in_scale, in_zp=in_zp, input_name=label)
    if spec.kind is OpKind.FULLY_CONNECTED:
        b.conv(label, weights, **post)
    else:
        (top, eh), (left, ew) = spec.pads
        b.conv(label, weights, stride=spec.stride, dilation=spec.dilation,
               padding=(top, top + eh, left, left + ew), depthwise_mult=mult, **post)
    from dtpu.isro.profile import unlimited
    return compile_layers(b, chip=unlimited(), pe=pe, meta={"source": {"kind": "conv-spec", "name": label}})
