"""Lowering of the vector unit's operators (contract 2.1, VEC descriptor): a TFLite ADD, SUB, MUL,
AVERAGE_POOL_2D, MAX_POOL_2D, MEAN or one-input 8-bit operator (:data:`TABLE_OPS`), described by
a :class:`VecSpec`, becomes the integer fields of one VEC descriptor (docs/architecture.md, "The
vector unit").

The integers are TFLite's own Prepare results (:mod:`dtpu.reference.vector`), and a table
operator's 256 bytes are its kernel's own outputs (:mod:`dtpu.unary_tables`), so the unit's
arithmetic is the CPU kernel's by construction; :func:`vec_reason` says why a node cannot run on
the unit (the shapes its buffers hold, the fields' widths), for the delegate's claim.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from dtpu.hw.config import HwConfig, ceil_div, get_config
from dtpu.hw.listformat import Format
from dtpu.reference import vector as rv

#: one-input operators of 8-bit tensors the unit runs as a 256-entry table (VEC0.KIND TABLE):
#: an element's output depends on its byte alone, so TFLite's kernel run on the 256 bytes is the
#: operator (QUANTIZE: int8/uint8 in, int8/uint8 out, a requantization)
TABLE_OPS = ("LOGISTIC", "TANH", "HARD_SWISH", "LEAKY_RELU", "RELU", "RELU6", "RELU_N1_TO_1",
             "QUANTIZE")
#: the TFLite operators the vector unit runs, by the VEC0.KIND they lower to
VEC_KINDS = {"ADD": "ADD", "SUB": "ADD", "MUL": "MUL", "AVERAGE_POOL_2D": "AVG_POOL",
             "MAX_POOL_2D": "MAX_POOL", "MEAN": "MEAN", **{op: "TABLE" for op in TABLE_OPS},
             "CONCATENATION": "COPY", "RESIZE_NEAREST_NEIGHBOR": "COPY"}


@dataclass(frozen=True)
class VecUnitBuild:
    """What a built vector unit runs where it is less than contract 2.1's whole unit (which the
    golden model is): the VEC0.KIND names it has (`kinds`); a descriptor of another kind is
    BAD_OPCODE or BAD_FIELD there, so the claim keeps such nodes on the CPU. Declared by the
    target's transport (:attr:`dtpu.driver.Transport.vector_build`)."""

    kinds: frozenset

    def reason(self, spec: "VecSpec") -> str | None:
        """Why this build cannot run `spec` although the contract's unit could (None: it can)."""
        kind = VEC_KINDS.get(spec.op)
        if kind is not None and kind not in self.kinds:
            return (f"{spec.op} is the vector unit's {kind}, which this target's unit does not "
                    f"have (it runs {', '.join(sorted(self.kinds))})")
        return None


#: what the Verilog's vector unit (hw/rtl/dtpu_vec.v: dtpu_cl_top with VEC_EN=1) runs: the kinds
#: it has (COPY: dtpu_vec_copy, so CONCATENATION slices and RESIZE_NEAREST_NEIGHBOR; the pools of
#: any window, dtpu_vec_pool). Declared by every target built from that Verilog (backend=rtl's
#: in-process top, dtpu.rtl.build.VEC_UNIT; a board overlay built with VEC_EN=1,
#: dtpu.board.transport), so the claim of each keeps the rest on the CPU
VERILOG_VEC_UNIT = VecUnitBuild(frozenset({"ADD", "MUL", "TABLE", "MEAN", "AVG_POOL", "MAX_POOL",
                                           "COPY"}))


def pool_rows(g: rv.PoolGeometry) -> int:
    """Output rows whose windows are open at once (ceil(FH / SH), at most OH): the rows of
    accumulators a pool keeps (dtpu_vec_pool's ring)."""
    return min(ceil_div(g.fh, g.sh), g.oh)


@dataclass(frozen=True)
class VecSpec:
    """One vector-unit node: operator, 8-bit dtype, operand shapes (NHWC; `b_shape` for ADD, SUB
    and MUL), quantization (scale, zero point) of each operand and of the output, the fused
    activation and, for the pools, filter, strides and padding. MEAN is over H and W; with
    `keep_dims` its output is (N, 1, 1, C) and its integers are those of TFLite's other kernel
    (:func:`dtpu.reference.vector.mean_keep_dims_params`), the unit's formula the same. A table
    operator carries its 256 output bytes in `table` (entry i: the output of input byte i,
    0..255, the two's complement byte for int8) and, for QUANTIZE, its output type
    `out_dtype` (None: `dtype`); its `a_shape` is the tensor's shape with leading ones to
    rank 4. An ADD, SUB or MUL with a constant operand carries it in `const`: (which operand,
    0 or 1; its bytes in the shape `a_shape` / `b_shape` gives it, :func:`constant_operand`),
    written into DDR once at compile time. A CONCATENATION along channels has its output's
    shape (rank 4) in `a_shape` and its inputs' channels in `parts`: its producers write their
    slices of the output themselves where they can, a COPY moves the others
    (:func:`lower_copy`). A RESIZE_NEAREST_NEIGHBOR that repeats every pixel fy x fx times
    carries `resize` (fy, fx): COPY descriptors with strided destinations
    (:func:`resize_copies`)."""

    op: str
    dtype: np.dtype
    a_shape: tuple
    a_q: tuple
    out_q: tuple
    b_shape: tuple | None = None
    b_q: tuple | None = None
    activation: str = "NONE"
    filter: tuple = (1, 1)
    stride: tuple = (1, 1)
    padding: str = "VALID"
    name: str = ""
    table: bytes | None = None
    out_dtype: np.dtype | None = None
    const: tuple | None = None
    parts: tuple = ()
    keep_dims: bool = False
    resize: tuple = ()

    def activation_shapes(self) -> list[tuple]:
        """The shapes of the operands read from other nodes' tensors, in the node's order (a
        constant operand is not one)."""
        if self.op == "CONCATENATION":
            return [tuple(self.a_shape[:3]) + (int(c),) for c in self.parts]
        if not self.binary:
            return [tuple(self.a_shape)]
        shapes = [tuple(self.a_shape), tuple(self.b_shape)]
        if self.const is not None:
            del shapes[self.const[0]]
        return shapes

    @property
    def output_dtype(self) -> np.dtype:
        return np.dtype(self.out_dtype if self.out_dtype is not None else self.dtype)

    @property
    def output_shape(self) -> tuple:
        n, h, w, c = self.a_shape
        if self.op in TABLE_OPS or self.op == "CONCATENATION":
            return tuple(self.a_shape)
        if self.op == "MEAN":
            return (n, 1, 1, c) if self.keep_dims else (n, c)
        if self.op == "RESIZE_NEAREST_NEIGHBOR":
            return (n, h * self.resize[0], w * self.resize[1], c)
        if self.op in ("AVERAGE_POOL_2D", "MAX_POOL_2D"):
            g = self.geometry()
            return (n, g.oh, g.ow, c)
        return tuple(np.broadcast_shapes(tuple(self.a_shape), tuple(self.b_shape)))

    def geometry(self) -> rv.PoolGeometry:
        return rv.pool_geometry(self.a_shape[1], self.a_shape[2], self.filter, self.stride,
                                self.padding)

    @property
    def binary(self) -> bool:
        return self.op in ("ADD", "SUB", "MUL")


def _bmode(spec: VecSpec) -> tuple[int, bool]:
    """(BMODE, swap): operand B is the shape of A (0) or one 1x1xC vector (1); a broadcast first
    operand is swapped into B (the operands' parameters travel with them)."""
    a, b = tuple(spec.a_shape), tuple(spec.b_shape)
    if a == b:
        return 0, False
    c = a[-1]
    if int(np.prod(b)) == c and b[-1] == c and len(a) == 4:
        return 1, False
    if int(np.prod(a)) == b[-1] and a[-1] == b[-1] and len(b) == 4:
        return 1, True
    raise ValueError(f"{spec.op} {spec.name!r}: operands {a} and {b}; accepted: equal shapes, or "
                     f"one of them 1x1xC")


def constant_operand(data: np.ndarray, other: tuple) -> tuple[tuple, bytes]:
    """A constant operand of ADD / SUB / MUL (`data`, its tensor's values and shape) as the unit
    reads it beside an operand of shape `other` (NHWC): that shape itself when the constant has
    it (BMODE 0), else one 1x1xC vector, its values broadcast over C (a scalar, a per-channel
    vector: BMODE 1). ValueError for a constant that varies over N, H or W without being the
    whole tensor, or that would enlarge the output."""
    other = tuple(int(d) for d in other)
    data = np.asarray(data)
    if len(other) != 4 or data.ndim > 4:
        raise ValueError(f"a constant operand {data.shape} beside {other} (the vector unit takes "
                         "NHWC operands)")
    try:
        if tuple(np.broadcast_shapes(data.shape, other)) != other:
            raise ValueError
        if int(np.prod(data.shape)) == int(np.prod(other)):
            return other, np.ascontiguousarray(data.reshape(other)).tobytes()
        vec = np.broadcast_to(data, (1, 1, 1, other[-1]))
    except ValueError:
        raise ValueError(f"a constant operand of shape {data.shape} beside {other}; accepted: "
                         f"that shape, or one broadcast over N, H and W (a scalar, a 1x1xC "
                         f"vector)") from None
    return (1, 1, 1, other[-1]), np.ascontiguousarray(vec).tobytes()


def concat_spec(inputs: list[tuple], output: tuple, axis: int, activation: str) -> tuple:
    """(output shape at rank 4, channels of each input) of a CONCATENATION the vector unit
    runs: along the last axis of 8-bit tensors of rank <= 4 that share the output's type and
    quantization (a pure copy; TFLite requantizes otherwise), no fused activation, no constant
    input. `inputs`: (shape, type name, (scale, zero point), constant) each; `output`: (shape,
    type name, (scale, zero point)). ValueError naming what does not fit."""
    shape, type_name, q_out = output
    rank = len(shape)
    if rank < 1 or rank > 4 or axis % rank != rank - 1:
        raise ValueError(f"CONCATENATION along axis {axis} of rank-{rank} tensors (the vector "
                         f"unit concatenates channels, the last axis, of rank <= 4)")
    if activation not in ("NONE", "0"):
        raise ValueError(f"CONCATENATION with fused activation {activation}")
    for i, (s, t, q, const) in enumerate(inputs):
        if const:
            raise ValueError(f"CONCATENATION input {i} is a constant of the model")
        if t != type_name or tuple(s[:-1]) != tuple(shape[:-1]) or len(s) != rank:
            raise ValueError(f"CONCATENATION input {i}: {t} {tuple(s)} beside the output's "
                             f"{type_name} {tuple(shape)}")
        if tuple(q) != tuple(q_out):
            raise ValueError(f"CONCATENATION input {i} quantized {q}, the output {q_out} (TFLite "
                             f"requantizes it: not a copy)")
    parts = tuple(int(s[-1]) for s, _, _, _ in inputs)
    if sum(parts) != shape[-1]:
        raise ValueError(f"CONCATENATION of {parts} channels into {shape[-1]}")
    return (1,) * (4 - rank) + tuple(int(d) for d in shape), parts


def vec_reason(spec: VecSpec, cfg: HwConfig | None = None,
               build: VecUnitBuild | None = None) -> str | None:
    """Why the vector unit cannot run `spec` (None: it can); `build`: the target's unit where it
    is less than the contract's (None: all of it)."""
    cfg = cfg or get_config()
    mem = Format(cfg).mem
    if spec.op not in VEC_KINDS:
        return f"operator {spec.op} is not a vector-unit operator ({', '.join(VEC_KINDS)})"
    eight = (np.dtype(np.int8), np.dtype(np.uint8))
    if np.dtype(spec.dtype) not in eight or spec.output_dtype not in eight:
        return (f"{np.dtype(spec.dtype)} -> {spec.output_dtype} tensors (the vector unit takes "
                f"int8 and uint8)")
    if spec.output_dtype != np.dtype(spec.dtype) and spec.op != "QUANTIZE":
        return f"{spec.op} of {np.dtype(spec.dtype)} -> {spec.output_dtype} (one type in and out)"
    if spec.const is not None:
        which, data = spec.const
        shape = (spec.a_shape, spec.b_shape)[which] if which in (0, 1) else None
        if not spec.binary or shape is None or len(data) != int(np.prod(shape)):
            return (f"{spec.op} constant operand {which} of {len(data)} bytes (accepted: operand "
                    f"0 or 1 of ADD, SUB, MUL, its bytes in its shape)")
    if spec.op == "CONCATENATION" and (not spec.parts or min(spec.parts) < 1
                                       or sum(spec.parts) != spec.a_shape[3]):
        return (f"CONCATENATION of {spec.parts} channels into {spec.a_shape[3]} (accepted: "
                f"inputs of >= 1 channel adding up to the output's)")
    if spec.op in TABLE_OPS and (spec.table is None or len(spec.table) != 256):
        return (f"{spec.op} without its 256-entry table "
                f"({'none' if spec.table is None else len(spec.table)} bytes)")
    if len(spec.a_shape) != 4:
        return f"input of rank {len(spec.a_shape)} (the vector unit takes NHWC tensors)"
    n, h, w, c = spec.a_shape
    if max(n, h, w, c) >= 1 << 16:
        return f"shape {spec.a_shape} beyond the VEC fields' 16 bits"
    lanes = int(mem["VEC_LANES"])
    if spec.binary:
        try:
            bmode, swap = _bmode(spec)
        except ValueError as e:
            return str(e)
        if bmode == 1 and c > lanes * int(mem["VEC_BCAST_WORDS"]):
            return (f"a broadcast vector of {c} channels (the operand-B buffer holds "
                    f"{lanes * int(mem['VEC_BCAST_WORDS'])})")
    if spec.op in ("AVERAGE_POOL_2D", "MAX_POOL_2D"):
        try:
            g = spec.geometry()
        except ValueError as e:
            return str(e)
        if max(g.fh, g.fw, g.pad_top, g.pad_left, g.sh, g.sw) > 255:
            return f"pool geometry {g} beyond the VEC4 fields"
        if spec.op == "AVERAGE_POOL_2D" and g.fh * g.fw > int(mem["VEC_AVG_AREA"]):
            return (f"AVERAGE_POOL_2D window {g.fh}x{g.fw} of {g.fh * g.fw} taps (the unit "
                    f"divides by a reciprocal exact up to VEC_AVG_AREA = {mem['VEC_AVG_AREA']})")
        rows = pool_rows(g)
        if rows * g.ow * ceil_div(c, lanes) > int(mem["VEC_POOL_WORDS"]):
            return (f"{rows} output row(s) of {g.ow} x {c} open at once (the pools' accumulator "
                    f"buffer holds {mem['VEC_POOL_WORDS']} words of {lanes} lanes)")
    if spec.op == "MEAN" and ceil_div(c, lanes) > int(mem["VEC_ROW_WORDS"]):
        return f"MEAN over {c} channels (the accumulator buffer holds {mem['VEC_ROW_WORDS']} words)"
    if build is not None and (why := build.reason(spec)) is not None:
        return why
    try:
        if spec.op == "CONCATENATION":
            for shape in spec.activation_shapes():
                lower_copy(shape, spec.a_shape[3], spec.dtype, cfg)
        elif spec.op == "RESIZE_NEAREST_NEIGHBOR":
            resize_copies(spec, cfg)
        else:
            lower_vec(spec, cfg)
    except ValueError as e:
        return str(e)
    return None


def lower_copy(shape: tuple, dst_channels: int, dtype, cfg: HwConfig | None = None) -> dict:
    """The fields of a COPY (words VEC0, VEC2.N, VEC3, VEC7.OW) moving a contiguous 8-bit
    tensor of `shape` (NHWC) into a channel slice of a tensor of `dst_channels` channels per
    pixel (the addresses are the compiler's: DST is the slice's first byte)."""
    f = Format(cfg or get_config())
    n, h, w, c = (int(d) for d in shape)
    fields = {"VEC0": dict(KIND=f.c2["vec_ops"]["COPY"],
                           SIGNED=int(np.dtype(dtype) == np.dtype(np.int8))),
              "VEC2": dict(N=n), "VEC3": dict(H=h, W=w, C=c), "VEC7": dict(OW=int(dst_channels))}
    for kind_, vals in fields.items():   # every value fits its field (CmdlistError otherwise)
        f.word(kind_, **vals)
    return fields


def resize_copies(spec: VecSpec, cfg: HwConfig | None = None) -> list[tuple[str, dict, int]]:
    """The COPY descriptors of a nearest-neighbour upscale by integer factors (fy, fx): each
    a (source, fields, destination byte offset) with source "input" or "rows" (the
    horizontally repeated tensor, N*H rows of W*fx pixels, a scratch buffer when fy > 1).

    A COPY reads a dense tensor from an 8-byte aligned SRC and writes its pixels OW bytes apart
    from any DST byte. Repeating columns: the whole input, pixel p to pixel fx*p + dx of rows
    W*fx wide, for dx < fx (fx COPYs, OW = fx*C). Repeating rows: the rows tensor read as N*H
    "pixels" of W*fx*C bytes each, row r to rows fy*r + dy, for dy < fy (fy COPYs, OW =
    fy*W*fx*C). Both sources start at a buffer's first byte (aligned), whatever W*C is.
    ValueError when a field does not fit."""
    if spec.op != "RESIZE_NEAREST_NEIGHBOR" or len(spec.resize) != 2 or min(spec.resize) < 1:
        raise ValueError(f"{spec.op} {spec.name!r} with resize {spec.resize}: not an integer "
                         f"nearest upscale")
    n, h, w, c = (int(d) for d in spec.a_shape)
    fy, fx = (int(f) for f in spec.resize)
    row = w * fx * c
    out: list[tuple[str, dict, int]] = []
    if fx > 1 or fy == 1:
        for dx in range(fx):
            out.append(("input", lower_copy((n, h, w, c), fx * c, spec.dtype, cfg), dx * c))
    if fy > 1:
        src = "rows" if fx > 1 else "input"
        for dy in range(fy):
            out.append((src, lower_copy((1, 1, n * h, row), fy * row, spec.dtype, cfg), dy * row))
    return out


def _s(v: int, bits: int) -> int:
    """Two's complement of `v` in a `bits`-bit field (ValueError naming it when it does not fit)."""
    v = int(v)
    if not -(1 << (bits - 1)) <= v < 1 << (bits - 1):
        raise ValueError(f"{v} does not fit a signed {bits}-bit VEC field")
    return v & ((1 << bits) - 1)


def lower_vec(spec: VecSpec, cfg: HwConfig | None = None) -> tuple[dict, bool]:
    """The VEC descriptor's fields (words VEC0, VEC3..VEC7 and VEC2.N; the addresses are the
    compiler's) and whether the operands are swapped (SRC_A is the node's second input)."""
    f = Format(cfg or get_config())
    if spec.op == "CONCATENATION":
        raise ValueError(f"CONCATENATION {spec.name!r} is no one descriptor: its producers write "
                         f"their slices, COPY descriptors the rest (lower_copy)")
    kind = f.c2["vec_ops"][VEC_KINDS[spec.op]]
    dt = np.dtype(spec.dtype)
    n, h, w, c = spec.a_shape
    act = spec.activation
    v0 = dict(KIND=kind, SIGNED=int(dt == np.int8))
    v4, v5, v6, v7 = {}, {}, {}, {}
    swap = False
    if spec.binary:
        bmode, swap = _bmode(spec)
        (s1, z1), (s2, z2) = (spec.b_q, spec.a_q) if swap else (spec.a_q, spec.b_q)
        if spec.op == "MUL":
            p = rv.mul_params(s1, z1, s2, z2, *spec.out_q, dt, act)
            v6 = dict(MO=_s(p.output_multiplier, 32), SHO=_s(p.output_shift, 8))
            v7 = dict(IN1_OFF=_s(p.input1_offset, 16), IN2_OFF=_s(p.input2_offset, 16))
        else:
            if swap and spec.op == "SUB":
                # a - b with a the broadcast one: B (= a) keeps the positive multiplier
                p = rv.add_params(s1, z1, s2, z2, *spec.out_q, dt, act)
                p1m = -p.input1_multiplier
                p2m = p.input2_multiplier
            else:
                p = rv.add_params(s1, z1, s2, z2, *spec.out_q, dt, act, sub=spec.op == "SUB")
                p1m, p2m = p.input1_multiplier, p.input2_multiplier
            if max(p.input1_shift, p.input2_shift, p.output_shift) > 0:
                # QuantizeMultiplierSmallerThanOneExp: TFLite's Prepare aborts on these scales
                raise ValueError(f"{spec.op} {spec.name!r}: output scale {spec.out_q[0]} below "
                                 f"2 * max(input scales) / 2^20 (TFLite refuses it)")
            v5 = dict(M1=_s(p1m, 32), M2=_s(p2m, 32))
            v6 = dict(MO=_s(p.output_multiplier, 32), SH1=_s(p.input1_shift, 8),
                      SH2=_s(p.input2_shift, 8), SHO=_s(p.output_shift, 8))
            v7 = dict(IN1_OFF=_s(p.input1_offset, 16), IN2_OFF=_s(p.input2_offset, 16))
        v0.update(BMODE=bmode, ACT_MIN=_s(p.act_min, 16), ACT_MAX=_s(p.act_max, 16),
                  OUT_OFF=_s(p.output_offset, 16))
        if swap:
            n, h, w, c = spec.b_shape
    elif spec.op in TABLE_OPS:
        pass          # the table is the operator: no integer of TFLite's Prepare is needed
    elif spec.op == "MEAN":
        p = (rv.mean_keep_dims_params if spec.keep_dims else rv.mean_params)(
            *spec.a_q, *spec.out_q, h * w, dt)
        v0.update(ACT_MIN=_s(p.lo, 16), ACT_MAX=_s(p.hi, 16), OUT_OFF=_s(p.out_zp, 16))
        v6 = dict(MO=_s(p.multiplier, 32), SHO=_s(p.shift, 8))
        v7 = dict(IN1_OFF=_s(p.input_offset, 16))
    else:
        if tuple(spec.a_q) != tuple(spec.out_q):
            raise ValueError(f"{spec.op} {spec.name!r}: input quantization {spec.a_q} differs from "
                             f"the output's {spec.out_q} (TFLite requires them equal)")
        g = spec.geometry()
        lo, hi = rv.activation_bounds(act, *spec.out_q, dt)
        v0.update(ACT_MIN=_s(lo, 16), ACT_MAX=_s(hi, 16), OUT_OFF=_s(spec.out_q[1], 16))
        v4 = dict(FH=g.fh, FW=g.fw, PT=g.pad_top, PL=g.pad_left, SH=g.sh, SW=g.sw)
        v7 = dict(OH=g.oh, OW=g.ow)
    fields = {"VEC0": v0, "VEC2": dict(N=n), "VEC3": dict(H=h, W=w, C=c), "VEC4": v4,
              "VEC5": v5, "VEC6": v6, "VEC7": v7}
    for kind_, vals in fields.items():   # every value fits its field (CmdlistError otherwise)
        f.word(kind_, **vals)
    return fields, swap
