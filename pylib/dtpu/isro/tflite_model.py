"""TFLite front end: reads the flatbuffer itself and describes the graph to the compiler's Builder.

Neither tflite-runtime nor TensorFlow exposes op options (stride, padding, fused activation) to
Python, and a flight ground station should not need TensorFlow to compile, so this carries a
~100-line flatbuffer reader for the few schema tables the compiler needs (field numbers from
tensorflow/lite/schema/schema.fbs).

int8 models compile to I8 programs whose DSP parameters are TFLite's own (multiplier, shift)
pairs, so the machine's output is bit-exact with the interpreter; float32 models compile to F32.
"""
from __future__ import annotations

import logging
import struct
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from dtpu.isro.ir import TFLITE_ROUNDING, Builder, CompileError, quantized_activation_range
from dtpu.isro.isa import Fmt

log = logging.getLogger(__name__)

# BuiltinOperator values (schema.fbs) for the ops named in messages
OP_NAMES = {
    0: "ADD", 1: "AVERAGE_POOL_2D", 2: "CONCATENATION", 3: "CONV_2D", 4: "DEPTHWISE_CONV_2D",
    6: "DEQUANTIZE", 9: "FULLY_CONNECTED", 14: "LOGISTIC", 17: "MAX_POOL_2D", 18: "MUL", 19: "RELU",
    20: "RELU_N1_TO_1", 21: "RELU6", 22: "RESHAPE", 23: "RESIZE_BILINEAR", 25: "SOFTMAX",
    28: "TANH", 32: "CUSTOM", 34: "PAD", 37: "BATCH_TO_SPACE_ND", 38: "SPACE_TO_BATCH_ND", 39: "TRANSPOSE", 40: "MEAN", 41: "SUB", 43: "SQUEEZE", 49: "SPLIT",
    53: "CAST", 60: "PADV2", 67: "TRANSPOSE_CONV", 83: "PACK", 97: "RESIZE_NEAREST_NEIGHBOR",
    98: "LEAKY_RELU", 114: "QUANTIZE", 117: "HARD_SWISH",
}
_TYPES = {0: np.float32, 1: np.float16, 2: np.int32, 3: np.uint8, 4: np.int64, 6: np.bool_,
          7: np.int16, 9: np.int8, 10: np.float64}
_ACTIVATIONS = {0: "none", 1: "relu", 2: "relu_n1_to_1", 3: "relu6", 4: "tanh", 5: "sign_bit"}
_FOLDED_ACTIVATIONS = (0, 19, 20, 21, 98)     # ops folded into the previous layer
ACCEPTED = ("CONV_2D", "DEPTHWISE_CONV_2D", "FULLY_CONNECTED", "MAX_POOL_2D", "AVERAGE_POOL_2D (VALID)",
            "MEAN over H, W", "ADD of two tensors", "SOFTMAX (last op, on the host)", "PAD", "PADV2",
            "RESHAPE", "SPACE_TO_BATCH_ND+conv+BATCH_TO_SPACE_ND (dilation)", "ADD of a constant bias (float)", "RELU", "RELU6", "RELU_N1_TO_1", "LEAKY_RELU (float)",
            "QUANTIZE (first op)", "DEQUANTIZE (last op)")


class _Flatbuffer:
    """Just enough of the flatbuffers wire format: tables, vtables, vectors, strings."""

    def __init__(self, buf: bytes) -> None:
        self.buf = buf

    def u32(self, pos):
        return struct.unpack_from("<I", self.buf, pos)[0]

    def root(self) -> int:
        return self.u32(0)

    def _field(self, table: int, idx: int) -> int | None:
        vtable = table - struct.unpack_from("<i", self.buf, table)[0]
        vsize = struct.unpack_from("<H", self.buf, vtable)[0]
        slot = 4 + 2 * idx
        if slot >= vsize:
            return None
        off = struct.unpack_from("<H", self.buf, vtable + slot)[0]
        return table + off if off else None

    def scalar(self, table: int | None, idx: int, fmt: str, default=0):
        pos = None if table is None else self._field(table, idx)
        return default if pos is None else struct.unpack_from("<" + fmt, self.buf, pos)[0]

    def table(self, table: int | None, idx: int) -> int | None:
        pos = None if table is None else self._field(table, idx)
        return None if pos is None else pos + self.u32(pos)

    def _vector(self, table: int, idx: int) -> tuple[int, int] | None:
        pos = self._field(table, idx)
        if pos is None:
            return None
        start = pos + self.u32(pos)
        return start + 4, self.u32(start)

    def tables(self, table: int, idx: int) -> list[int]:
        v = self._vector(table, idx)
        if v is None:
            return []
        start, n = v
        return [start + 4 * i + self.u32(start + 4 * i) for i in range(n)]

    def array(self, table: int, idx: int, dtype) -> np.ndarray | None:
        v = self._vector(table, idx)
        if v is None:
            return None
        start, n = v
        dt = np.dtype(dtype)
        return np.frombuffer(self.buf, dtype=dt.newbyteorder("<"), count=n, offset=start).copy()

    def string(self, table: int, idx: int) -> str:
        a = self.array(table, idx, np.uint8)
        return "" if a is None else a.tobytes().decode("utf-8", "replace")


@dataclass
class Tensor:
    index: int
    name: str
    shape: tuple[int, ...]
    dtype: np.dtype
    scale: np.ndarray | None = None
    zero_point: np.ndarray | None = None
    data: np.ndarray | None = None

    @property
    def quantized(self) -> bool:
        return self.scale is not None and self.scale.size > 0


@dataclass
class Operator:
    index: int
    code: int
    inputs: list[int]
    outputs: list[int]
    options: dict[str, Any] = field(default_factory=dict)

    @property
    def name(self) -> str:
        return OP_NAMES.get(self.code, f"builtin op {self.code}")


@dataclass
class Model:
    tensors: list[Tensor]
    ops: list[Operator]
    inputs: list[int]
    outputs: list[int]
    path: str = ""


def _options(fb: _Flatbuffer, code: int, opt: int | None) -> dict[str, Any]:
    s = fb.scalar
    if code == 3:
        return dict(padding=s(opt, 0, "b"), stride=(s(opt, 2, "i"), s(opt, 1, "i")), act=s(opt, 3, "b"),
                    dilation=(s(opt, 5, "i", 1), s(opt, 4, "i", 1)))
    if code == 4:
        return dict(padding=s(opt, 0, "b"), stride=(s(opt, 2, "i"), s(opt, 1, "i")),
                    depth_multiplier=s(opt, 3, "i"), act=s(opt, 4, "b"),
                    dilation=(s(opt, 6, "i", 1), s(opt, 5, "i", 1)))
    if code in (1, 17):
        return dict(padding=s(opt, 0, "b"), stride=(s(opt, 2, "i"), s(opt, 1, "i")),
                    filter=(s(opt, 4, "i"), s(opt, 3, "i")), act=s(opt, 5, "b"))
    if code == 9:
        return dict(act=s(opt, 0, "b"), weights_format=s(opt, 1, "b"), keep_num_dims=bool(s(opt, 2, "B")))
    if code == 98:
        return dict(alpha=s(opt, 0, "f"))
    if code == 40:
        return dict(keep_dims=bool(s(opt, 0, "B")))
    if code == 0:
        return dict(act=s(opt, 0, "b"))
    return {}


def read(path: str | Path) -> Model:
    """The graph; a file that is not a complete TFLite flatbuffer is a CompileError naming it."""
    path = Path(path)
    if not path.is_file():
        raise CompileError(f"{path}: no such model file")
    data = path.read_bytes()
    if data[4:8] != b"TFL3":
        raise CompileError(f"{path}: not a TFLite flatbuffer (identifier {data[4:8]!r}, expected b'TFL3')")
    try:
        return _read(path, data)
    except CompileError:
        raise
    except (struct.error, IndexError, ValueError, KeyError, TypeError, OverflowError, MemoryError) as exc:
        raise CompileError(f"{path}: truncated or corrupt TFLite flatbuffer ({len(data):,} bytes; "
                           f"{' '.join(str(exc).split()) or type(exc).__name__}); accepted: a complete "
                           f".tflite file as the converter writes it") from None


def _read(path: Path, data: bytes) -> Model:
    fb = _Flatbuffer(data)
    model = fb.root()
    buffers = fb.tables(model, 4)
    codes = []
    for oc in fb.tables(model, 1):
        codes.append(max(fb.scalar(oc, 0, "b"), fb.scalar(oc, 3, "i")))
    subgraphs = fb.tables(model, 2)
    if not subgraphs:
        raise CompileError(f"{path}: the model has no subgraph")
    if len(subgraphs) > 1:
        log.warning("%s: %d subgraphs; compiling the first (the others are control flow bodies)",
                    path, len(subgraphs))
    sg = subgraphs[0]
    tensors = []
    for i, t in enumerate(fb.tables(sg, 0)):
        shape = fb.array(t, 0, np.int32)
        ttype = fb.scalar(t, 1, "b")
        if ttype not in _TYPES:
            dtype = np.dtype(np.uint8)
        else:
            dtype = np.dtype(_TYPES[ttype])
        q = fb.table(t, 4)
        scale = zp = None
        if q is not None:
            scale = fb.array(q, 2, np.float32)
            zp = fb.array(q, 3, np.int64)
        buf_idx = fb.scalar(t, 2, "I")
        tdata = None
        if 0 < buf_idx < len(buffers):
            raw = fb.array(buffers[buf_idx], 0, np.uint8)
            if raw is not None and raw.size:
                tdata = raw.view(dtype).reshape(tuple(shape))
        tensors.append(Tensor(i, fb.string(t, 3), tuple(int(v) for v in (shape if shape is not None else ())),
                              dtype, scale, zp, tdata))
    ops = []
    for i, o in enumerate(fb.tables(sg, 3)):
        code = codes[fb.scalar(o, 0, "I")]
        ops.append(Operator(i, code, [int(v) for v in fb.array(o, 1, np.int32)],
                            [int(v) for v in fb.array(o, 2, np.int32)], _options(fb, code, fb.table(o, 4))))
    return Model(tensors, ops, [int(v) for v in fb.array(sg, 1, np.int32)],
                 [int(v) for v in fb.array(sg, 2, np.int32)], str(path))


# -- to the builder ---------------------------------------------------------------------------------

def _quant(t: Tensor):
    from dtpu.spec import Quant
    return Quant(tuple(float(s) for s in t.scale), tuple(int(z) for z in t.zero_point))


def _same_quant(a: Tensor, b: Tensor) -> bool:
    return (a.quantized and b.quantized and np.array_equal(a.scale, b.scale)
            and np.array_equal(a.zero_point, b.zero_point))


def _float_clamp(label: str, act: int):
    kind = _ACTIVATIONS.get(act, f"activation {act}")
    ranges = {"none": None, "relu": (0.0, np.inf), "relu6": (0.0, 6.0), "relu_n1_to_1": (-1.0, 1.0)}
    if kind not in ranges:
        raise CompileError(f"{label}: fused activation {kind} is not supported; accepted: "
                           f"none, relu, relu6, relu_n1_to_1")
    return ranges[kind]


def _act_kind(label: str, act: int) -> str:
    kind = _ACTIVATIONS.get(act, f"activation {act}")
    if kind not in ("none", "relu", "relu6", "relu_n1_to_1"):
        raise CompileError(f"{label}: fused activation {kind} is not supported; accepted: "
                           f"none, relu, relu6, relu_n1_to_1")
    return kind


# ops that compute only tensor shapes (no activation values): skipped, their outputs are not data
_SHAPE_OPS = (77, 45, 83)              # SHAPE, STRIDED_SLICE, PACK
# heads the host runs after the chip, at the end of the graph (see dtpu.isro.heads)
HEAD_OPS = {25: "softmax", 14: "sigmoid"}


def build(model: Model) -> tuple[Builder, dict]:
    """Walk the graph in execution order (a DAG: branches and residual ADDs), folding each op
    into the Builder; trailing heads the chip cannot run (SOFTMAX) go to the host."""
    T = model.tensors
    if len(model.inputs) != 1 or len(model.outputs) != 1:
        raise CompileError(f"{model.path}: {len(model.inputs)} inputs / {len(model.outputs)} outputs; "
                           f"only single-input, single-output models compile")
    ops = list(model.ops)
    cur = model.inputs[0]
    host_quantize = host_dequantize = False
    if ops and ops[0].code == 114 and T[cur].dtype == np.float32:
        host_quantize = True
        cur = ops[0].outputs[0]
        ops = ops[1:]
    end = model.outputs[0]
    heads = []
    while ops:
        last = next((o for o in reversed(ops) if end in o.outputs), None)
        if last is None:
            break
        if last.code == 6 and not heads and not host_dequantize:
            host_dequantize = True
        elif last.code in HEAD_OPS:
            heads.insert(0, _head(last, T))
        else:
            break
        end = last.inputs[0]
        ops.remove(last)
    x = T[cur]
    if x.dtype == np.float32:
        fmt = Fmt.F32
    elif x.dtype == np.int8:
        fmt = Fmt.I8
    else:
        raise CompileError(f"input tensor {x.name!r}: dtype {x.dtype}; accepted: float32, int8")
    if len(x.shape) == 4:
        if x.shape[0] != 1:
            raise CompileError(f"input tensor {x.name!r}: batch {x.shape[0]}; the chip runs one image")
        _, h, w, c = x.shape
        b = Builder(fmt, (c, h, w), input_name=x.name, in_scale=float(x.scale[0]) if fmt is Fmt.I8 else None,
                    in_zp=int(x.zero_point[0]) if fmt is Fmt.I8 else 0)
    elif len(x.shape) == 2 and x.shape[0] == 1:
        b = Builder(fmt, (x.shape[1], 1, 1), flat_input=True, input_name=x.name,
                    in_scale=float(x.scale[0]) if fmt is Fmt.I8 else None,
                    in_zp=int(x.zero_point[0]) if fmt is Fmt.I8 else 0)
    else:
        raise CompileError(f"input tensor {x.name!r}: shape {x.shape}; accepted: (1, H, W, C) or (1, N)")

    values = {cur: b.value}                      # TFLite tensor -> the builder's value for it
    i = 0
    while i < len(ops):
        op = ops[i]
        label = f"op {op.index} ({op.name})"
        data_in = [t for t in op.inputs if t in values]
        if not data_in or op.code in _SHAPE_OPS:
            i += 1                                # constants or shape arithmetic: no data
            continue
        if len(op.outputs) != 1:
            raise CompileError(f"{label}: {len(op.outputs)} outputs; only single-output ops compile")
        before, folded = len(b.layers), b.producer()
        if op.code == 0 and len(data_in) == 2:
            out = T[op.outputs[0]]
            _eadd(b, fmt, op, T, label, out, values)
            i += 1
        else:
            if op.inputs[0] not in values or len(data_in) != 1:
                raise CompileError(f"{label}: reads {len(data_in)} computed tensors "
                                   f"({', '.join(T[t].name for t in data_in)}); accepted: one, as its "
                                   f"first input (two for ADD)")
            b.value = values[op.inputs[0]]
            folded = b.producer()
            if op.code == 38:
                # TF lowers a dilated Keras convolution to SPACE_TO_BATCH_ND -> conv -> BATCH_TO_SPACE_ND
                conv, b2s, dilation, pads = _dilated(ops, i, T, label)
                out = T[b2s.outputs[0]]
                _mac(b, fmt, conv, T, f"op {conv.index} ({conv.name})", out, x=T[op.inputs[0]],
                     dilation=dilation, padding=pads)
                i += 3
            else:
                out = T[op.outputs[0]]
                _op(b, fmt, op, T, label, out)
                i += 1
        if len(b.layers) > before or (op.code in _FOLDED_ACTIVATIONS and b.producer() is folded):
            if b.producer() is not None:
                b.producer().tensor = out.index  # this tensor now holds that layer's values
        values[out.index] = b.value
    if end not in values:
        raise CompileError(f"{model.path}: the model output (tensor {end}) is not computed from the input")
    b.value = values[end]
    b.heads = heads
    extra = {"tflite": {"input_tensor": model.inputs[0], "output_tensor": model.outputs[0],
                        "machine_output_tensor": end, "host_quantize": host_quantize,
                        "host_dequantize": host_dequantize},
             "heads": heads}
    return b, extra


def _head(op: Operator, T: list[Tensor]) -> dict:
    """A head op as the host will run it (dtpu.isro.heads), with TFLite's own parameters."""
    x, y = T[op.inputs[0]], T[op.outputs[0]]
    head = {"kind": HEAD_OPS[op.code], "name": f"op{op.index}_{op.name.lower()}", "tensor": y.index,
            "beta": float(op.options.get("beta", 1.0))}
    if x.dtype == np.int8:
        head.update(input_scale=float(x.scale[0]), input_zero_point=int(x.zero_point[0]),
                    output_scale=float(y.scale[0]), output_zero_point=int(y.zero_point[0]),
                    dtype="int8")
    else:
        head["dtype"] = "float32"
    return head


def _eadd(b: Builder, fmt: Fmt, op: Operator, T: list[Tensor], label: str, out: Tensor, values: dict) -> None:
    """ADD of two computed tensors: the EADD instruction, with TFLite's int8 ADD parameters."""
    from dtpu.reference.quantize import quantize_multiplier
    ta, tb = op.inputs[:2]
    xa, xb = T[ta], T[tb]
    if tuple(xa.shape) != tuple(xb.shape):
        raise CompileError(f"{label}: adds {xa.shape} and {xb.shape}; the chip adds equal shapes "
                           f"(no broadcasting)")
    name = f"op{op.index}_{op.name.lower()}"
    kind = _act_kind(label, op.options.get("act", 0))
    post: dict[str, Any] = {"tensor": out.index}
    if fmt is Fmt.I8:
        sa, sb, so = (float(np.float32(t.scale[0])) for t in (xa, xb, out))
        ls = 20
        twice = 2 * max(sa, sb)
        q = {"zp_a": int(xa.zero_point[0]), "zp_b": int(xb.zero_point[0]), "left_shift": ls}
        for key, real in (("a", sa / twice), ("b", sb / twice), ("out", twice / ((1 << ls) * so))):
            m, s = quantize_multiplier(real)
            q[f"m_{key}"], q[f"s_{key}"] = int(m), int(s)
        post.update(eadd_q=q, out_zp=int(out.zero_point[0]), out_scale=float(out.scale[0]),
                    rounding=TFLITE_ROUNDING["ADD"],
                    clamp=quantized_activation_range(kind, float(out.scale[0]), int(out.zero_point[0])))
    else:
        clamp = _float_clamp(label, op.options.get("act", 0))
        if clamp is not None:
            post["clamp"] = clamp
    b.eadd(name, values[ta], values[tb], **post)


def _dilated(ops: list[Operator], i: int, T: list[Tensor], label: str):
    """SPACE_TO_BATCH_ND, conv, BATCH_TO_SPACE_ND as (conv, b2s, dilation, explicit padding).

    With stride 1, the inner VALID convolution over the space-to-batch tensor is the dilated
    convolution over the input padded by the space-to-batch paddings; the batch-to-space crops
    then remove outputs at the borders, which is the same as padding that much less.
    """
    s2b = ops[i]
    if i + 2 >= len(ops) or ops[i + 1].code not in (3, 4) or ops[i + 2].code != 37:
        raise CompileError(f"{label}: only the SPACE_TO_BATCH_ND -> CONV_2D/DEPTHWISE_CONV_2D -> "
                           f"BATCH_TO_SPACE_ND pattern of a dilated convolution is supported")
    conv, b2s = ops[i + 1], ops[i + 2]
    if conv.inputs[0] != s2b.outputs[0] or b2s.inputs[0] != conv.outputs[0]:
        raise CompileError(f"{label}: the dilated-convolution ops do not form a chain")
    consts = [T[s2b.inputs[1]].data, T[s2b.inputs[2]].data, T[b2s.inputs[1]].data, T[b2s.inputs[2]].data]
    if any(c is None for c in consts):
        raise CompileError(f"{label}: block shape, paddings and crops must be constant tensors")
    block, paddings, block2, crops = (np.asarray(c).astype(int) for c in consts)
    o = conv.options
    if (not np.array_equal(block, block2) or tuple(o["stride"]) != (1, 1) or tuple(o["dilation"]) != (1, 1)
            or o["padding"] != 1):
        raise CompileError(f"op {conv.index} ({conv.name}): between SPACE_TO_BATCH_ND and BATCH_TO_SPACE_ND "
                           f"only a stride-1, undilated VALID convolution can be folded into a dilation")
    pads = paddings.reshape(2, 2) - crops.reshape(2, 2)
    if np.any(pads < 0):
        raise CompileError(f"{label}: crops {crops.tolist()} exceed paddings {paddings.tolist()}")
    return conv, b2s, (int(block[0]), int(block[1])), tuple(int(v) for v in pads.reshape(-1))


def _op(b: Builder, fmt: Fmt, op: Operator, T: list[Tensor], label: str, out: Tensor) -> None:
    x = T[op.inputs[0]]
    name = f"op{op.index}_{op.name.lower()}"
    o = op.options
    if op.code in (3, 4, 9):
        _mac(b, fmt, op, T, label, out)
        return
    if op.code == 17:
        post: dict[str, Any] = {"tensor": out.index}
        kind = _act_kind(label, o["act"])
        if fmt is Fmt.I8:
            if not _same_quant(x, out):
                raise CompileError(f"{label}: int8 max pooling with different input/output quantization")
            post.update(out_zp=int(out.zero_point[0]), out_scale=float(out.scale[0]))
            if kind != "none":
                post["clamp"] = quantized_activation_range(kind, float(out.scale[0]), int(out.zero_point[0]))
        else:
            post["clamp"] = _float_clamp(label, o["act"])
        b.maxpool(name, o["filter"], o["stride"], "same" if o["padding"] == 0 else "valid", **post)
        return
    if op.code == 1:
        post = {"tensor": out.index}
        kind = _act_kind(label, o["act"])
        if fmt is Fmt.I8:
            if not _same_quant(x, out):
                raise CompileError(f"{label}: int8 average pooling with different input/output quantization")
            post.update(out_zp=int(out.zero_point[0]), out_scale=float(out.scale[0]),
                        clamp=quantized_activation_range(kind, float(out.scale[0]), int(out.zero_point[0])))
        else:
            clamp = _float_clamp(label, o["act"])
            if clamp is not None:
                post["clamp"] = clamp
        b.avgpool(name, o["filter"], o["stride"], "same" if o["padding"] == 0 else "valid", **post)
        return
    if op.code == 40:
        axes = T[op.inputs[1]].data
        if axes is None or len(x.shape) != 4 or sorted(int(a) % 4 for a in np.asarray(axes).reshape(-1)) != [1, 2]:
            raise CompileError(f"{label}: MEAN over axes {None if axes is None else np.asarray(axes).tolist()}; "
                               f"accepted: the spatial axes [1, 2] of an NHWC tensor (global average pooling)")
        _, h, w, c = x.shape
        post = {"tensor": out.index, "flat": len(out.shape) == 2}
        if fmt is Fmt.I8:
            post.update(_mean_i8(x, out, h * w, c, keep_dims=bool(o.get("keep_dims"))))
        b.avgpool(name, (h, w), (1, 1), "valid", **post)
        return
    if op.code in (34, 60):
        pads = T[op.inputs[1]].data
        if pads is None:
            raise CompileError(f"{label}: paddings are not a constant tensor")
        pads = np.asarray(pads).reshape(-1, 2)
        if pads.shape[0] != 4 or np.any(pads[0]) or np.any(pads[3]):
            raise CompileError(f"{label}: paddings {pads.tolist()}; only height/width padding of an "
                               f"NHWC tensor is supported")
        if op.code == 60 and len(op.inputs) > 2:
            v = T[op.inputs[2]].data
            zero = int(x.zero_point[0]) if fmt is Fmt.I8 else 0.0
            if v is None or np.any(np.asarray(v) != zero):
                raise CompileError(f"{label}: constant value {v} is not the real zero; the chip pads "
                                   f"with zeros (or -inf before max pooling)")
        if fmt is Fmt.I8 and not _same_quant(x, out):
            raise CompileError(f"{label}: int8 padding with different input/output quantization")
        b.pad(name, int(pads[1, 0]), int(pads[1, 1]), int(pads[2, 0]), int(pads[2, 1]))
        return
    if op.code == 22:
        if len(out.shape) == 2 and out.shape[0] == 1 and out.shape[1] == int(np.prod(x.shape)):
            if len(x.shape) == 4:
                b.flatten(name)
            return
        raise CompileError(f"{label}: reshape {x.shape} -> {out.shape}; only flattening to (1, N) is supported")
    if op.code in (19, 20, 21):
        kind = {19: "relu", 20: "relu_n1_to_1", 21: "relu6"}[op.code]
        if fmt is Fmt.I8:
            if not _same_quant(x, out):
                raise CompileError(f"{label}: int8 {op.name} that requantizes (input and output "
                                   f"quantization differ) needs a second DSP stage")
            b.activation(name, clamp=quantized_activation_range(kind, float(out.scale[0]), int(out.zero_point[0])))
        else:
            b.activation(name, clamp={"relu": (0.0, np.inf), "relu6": (0.0, 6.0), "relu_n1_to_1": (-1.0, 1.0)}[kind])
        return
    if op.code == 0:
        const = T[op.inputs[1]].data if len(op.inputs) == 2 else None
        if const is None or const.size != max(const.shape[-1:] or (1,)):
            raise CompileError(f"{label}: only adding a constant per-channel vector (a bias) is "
                               f"supported; the chip has no elementwise tensor addition")
        b.bias(name, const)
        clamp = _float_clamp(label, o["act"]) if fmt is Fmt.F32 else None
        b.activation(name, clamp=clamp)
        return
    if op.code == 98:
        if fmt is Fmt.I8:
            raise CompileError(f"{label}: int8 LEAKY_RELU requantizes its two branches with two "
                               f"multipliers; the I8 DSP stage has one (compile the float model)")
        b.activation(name, leaky=(0.0, float(o["alpha"])))
        return
    raise CompileError(f"{label} -> tensor {out.name!r}: not supported by the ISRO-ASIC; accepted: "
                       f"{', '.join(ACCEPTED)}")


def _mean_i8(x: Tensor, out: Tensor, n: int, c: int, *, keep_dims: bool) -> dict[str, Any]:
    """TFLite 2.14's int8 MEAN over H, W as DSP parameters of an AVGPOOL (1/n in the multiplier).

    keep_dims (4-D output): optimized_integer_ops::Mean, MBQM(sum of stored values,
    s_in / (n s_out)) + (zp_out - round(zp_in s_in / s_out)), the latter in float32.
    Otherwise reference_ops::QuantizedMeanOrSum: MBQM(sum of (x - zp_in), m') + zp_out with
    QuantizeMultiplier(s_in / s_out) divided by n in fixed point (m' = (m << k) / n, shift - k).
    """
    from dtpu.reference.quantize import quantize_multiplier
    si, so = np.float32(x.scale[0]), np.float32(out.scale[0])
    zi, zo = int(x.zero_point[0]), int(out.zero_point[0])
    if keep_dims:
        real = np.float32(si / np.float32(np.float32(n) * so))
        m, s = (int(v) for v in quantize_multiplier(float(real)))
        temp = np.float32(np.float32(zi) * si / so)
        temp = temp + np.float32(0.5) if temp > 0 else temp - np.float32(0.5)
        q = dict(in_zp=0, post_offset=zo - int(np.float32(temp)))
    else:
        m0, s0 = (int(v) for v in quantize_multiplier(float(si) / float(so)))
        k = min(n.bit_length() - 1, 32, 31 + s0)
        m, s = (m0 << k) // n, s0 - k
        q = dict(in_zp=zi)
    return dict(dsp=(np.zeros(c, np.int32), np.full(c, m, np.int32), np.full(c, s, np.int32)), out_zp=zo,
                out_scale=float(so), rounding=TFLITE_ROUNDING["MEAN"], clamp=(-128, 127), **q)


def _mac(b: Builder, fmt: Fmt, op: Operator, T: list[Tensor], label: str, out: Tensor,
         x: Tensor | None = None, dilation=None, padding=None) -> None:
    """CONV_2D / DEPTHWISE_CONV_2D / FULLY_CONNECTED; `x`, `dilation` and `padding` override the
    op's own when a dilated convolution was reassembled from its space-to-batch form."""
    x = T[op.inputs[0]] if x is None else x
    name = f"op{op.index}_{op.name.lower()}"
    o = op.options
    w = T[op.inputs[1]]
    bias = T[op.inputs[2]] if len(op.inputs) > 2 and op.inputs[2] >= 0 else None
    if w.data is None:
        raise CompileError(f"{label}: weights tensor {w.name!r} is not a constant")
    if fmt is Fmt.I8:
        if w.dtype != np.int8 or not w.quantized or np.any(w.zero_point != 0):
            raise CompileError(f"{label}: I8 needs symmetric int8 weights (zero point 0); "
                               f"{w.name!r} is {w.dtype} with zero points {w.zero_point}")
        if out.dtype != np.int8:
            raise CompileError(f"{label}: output dtype {out.dtype}; I8 programs need int8 outputs")
    post = _post(b, fmt, op, x, w, bias, out, label, dilation)
    if op.code == 9:
        if o.get("weights_format", 0) != 0:
            raise CompileError(f"{label}: shuffled FC weights format {o['weights_format']} is not supported")
        if int(np.prod(x.shape)) != w.shape[1]:
            raise CompileError(f"{label}: input {x.shape} is not one vector of {w.shape[1]} "
                               f"(batch > 1 is not supported)")
        b.dense(name, w.data, **post)
        return
    dilation = dilation or o["dilation"]
    padding = padding or ("same" if o["padding"] == 0 else "valid")
    if op.code == 3:
        b.conv(name, w.data.transpose(0, 3, 1, 2), stride=o["stride"], dilation=dilation,
               padding=padding, **post)
    else:
        b.conv(name, w.data[0].transpose(2, 0, 1), stride=o["stride"], dilation=dilation,
               padding=padding, depthwise_mult=w.shape[3] // x.shape[3], **post)


def _post(b: Builder, fmt: Fmt, op: Operator, x: Tensor, w: Tensor, bias: Tensor | None, out: Tensor,
          label: str, dilation=None) -> dict[str, Any]:
    """The DSP stage of a MAC op: F32 (1, 0, bias) plus the fused clamp; I8 TFLite's own pairs."""
    from dtpu import reference
    from dtpu.spec import Activation, ConvSpec, DataMode, OpKind, Padding
    cout = w.shape[0] if op.code in (3, 9) else w.shape[3]
    if fmt is Fmt.F32:
        bv = np.zeros(cout, np.float32) if bias is None else bias.data.astype(np.float32)
        return dict(dsp=(np.ones(cout, np.float32), np.zeros(cout, np.float32), bv),
                    clamp=_float_clamp(label, op.options["act"]), tensor=out.index)
    kind = {3: OpKind.CONV_2D, 4: OpKind.DEPTHWISE_CONV_2D, 9: OpKind.FULLY_CONNECTED}[op.code]
    act = Activation(_act_kind(label, op.options["act"]))
    if kind is OpKind.FULLY_CONNECTED:
        in_shape, f_shape, extra = (1, 1, 1, w.shape[1]), w.shape, {}
    else:
        in_shape, f_shape = x.shape, w.shape
        extra = dict(stride=tuple(op.options["stride"]), dilation=tuple(dilation or op.options["dilation"]),
                     padding=Padding.SAME if op.options["padding"] == 0 else Padding.VALID)
        if kind is OpKind.DEPTHWISE_CONV_2D:
            extra["depth_multiplier"] = w.shape[3] // x.shape[3]
    spec = ConvSpec(kind, DataMode.INT8, tuple(in_shape), tuple(f_shape), activation=act,
                    has_bias=bias is not None, input_q=_quant(x), filter_q=_quant(w), output_q=_quant(out),
                    **extra)
    mult, shift = reference.output_multipliers(spec)
    lo, hi = reference.activation_range(spec)
    if bias is not None and bias.dtype != np.int32:
        raise CompileError(f"{label}: bias dtype {bias.dtype}; I8 needs int32 bias")
    bv = np.zeros(cout, np.int32) if bias is None else bias.data.astype(np.int32)
    return dict(dsp=(bv, np.asarray(mult, np.int32), np.asarray(shift, np.int32)), clamp=(int(lo), int(hi)),
                rounding=TFLITE_ROUNDING[kind.name], in_zp=int(x.zero_point[0]), out_zp=int(out.zero_point[0]),
                out_scale=float(out.scale[0]), tensor=out.index)


def node_specs(model: Model):
    """(op, ConvSpec, filters, bias) for every CONV_2D / DEPTHWISE_CONV_2D / FULLY_CONNECTED with
    constant weights: what the delegate would hand a backend for each node it claims."""
    from dtpu.spec import Activation, ConvSpec, DataMode, OpKind, Padding
    T = model.tensors
    kinds = {3: OpKind.CONV_2D, 4: OpKind.DEPTHWISE_CONV_2D, 9: OpKind.FULLY_CONNECTED}
    modes = {("int8", "int8"): DataMode.INT8, ("uint8", "uint8"): DataMode.UINT8,
             ("int16", "int8"): DataMode.INT16X8, ("float32", "float32"): DataMode.FLOAT32}
    for op in model.ops:
        if op.code not in kinds:
            continue
        x, w, y = T[op.inputs[0]], T[op.inputs[1]], T[op.outputs[0]]
        b = T[op.inputs[2]] if len(op.inputs) > 2 and op.inputs[2] >= 0 else None
        mode = modes.get((x.dtype.name, w.dtype.name))
        if w.data is None or mode is None:
            continue
        kind = kinds[op.code]
        o = op.options
        act = Activation(_ACTIVATIONS.get(o.get("act", 0), "none"))
        q = {}
        if mode.is_quantized:
            q = dict(input_q=_quant(x), filter_q=_quant(w), output_q=_quant(y))
        if kind is OpKind.FULLY_CONNECTED:
            spec = ConvSpec(kind, mode, (1, 1, 1, w.shape[1]), w.shape, activation=act,
                            has_bias=b is not None, name=f"op{op.index}", **q)
        else:
            extra = {"depth_multiplier": w.shape[3] // x.shape[3]} if kind is OpKind.DEPTHWISE_CONV_2D else {}
            spec = ConvSpec(kind, mode, x.shape, w.shape, stride=o["stride"], dilation=o["dilation"],
                            padding=Padding.SAME if o["padding"] == 0 else Padding.VALID, activation=act,
                            has_bias=b is not None, name=f"op{op.index}", **q, **extra)
        yield op, spec, w.data, None if b is None else b.data
