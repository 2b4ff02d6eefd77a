"""TFLite front end: describes a .tflite graph to the compiler's Builder.

The file is read by :mod:`dtpu.tflite_model`, the project's one TFLite reader (the ``tflite``
schema package), after :mod:`dtpu.model_check` has walked it for reads past the end, so a
truncated or damaged file is one :class:`CompileError` naming it rather than whatever the
generated code trips over. This module keeps only what is the ISRO compiler's own: which
operators fold into which instruction, with what DSP parameters.

int8 models compile to I8 programs whose DSP parameters are TFLite's own (multiplier, shift)
pairs, so the machine's output is bit-exact with the interpreter; float32 models compile to F32.
uint8 models (TF1 quantization-aware training: uint8 activations and asymmetric uint8 weights)
compile to I8 too, every value stored 128 lower (v - 128 is exact, and every TFLite formula
depends on values only through v - zero point, or is rewritten here where it does not): zero
points 128 lower (:func:`_zp`), weights with the instruction's weight zero point.
"""
from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from dtpu import model_check
from dtpu import tflite_model as tfl
from dtpu.isro.ir import TFLITE_ROUNDING, Builder, CompileError, quantized_activation_range
from dtpu.isro.isa import Fmt
from dtpu.tflite_model import Operator, Tensor

log = logging.getLogger(__name__)

_FOLDED_ACTIVATIONS = ("ADD", "RELU", "RELU_N1_TO_1", "RELU6", "LEAKY_RELU")  # fold into the previous layer
ACCEPTED = ("CONV_2D", "DEPTHWISE_CONV_2D", "FULLY_CONNECTED", "TRANSPOSE_CONV", "MAX_POOL_2D",
            "AVERAGE_POOL_2D", "MEAN over H, W (or L)", "ADD of two tensors", "MUL of two tensors (or by a 1x1xC one)",
            "CONCATENATION along channels", "RESIZE_NEAREST_NEIGHBOR", "RESIZE_BILINEAR",
            "int8 MUL/ADD/SUB by a scalar or per-channel constant",
            "LOGISTIC", "TANH", "HARD_SWISH", "EXPAND_DIMS/SQUEEZE/RESHAPE that keep the layout", "SOFTMAX (last op, on the host)", "PAD", "PADV2",
            "RESHAPE", "SPACE_TO_BATCH_ND+conv+BATCH_TO_SPACE_ND (dilation)", "ADD of a constant bias (float)", "RELU", "RELU6", "RELU_N1_TO_1", "LEAKY_RELU",
            "QUANTIZE (first op)", "DEQUANTIZE (last op)")


@dataclass
class Graph:
    """The main subgraph of a .tflite file, with the file's path for messages."""

    path: str
    tensors: list[Tensor]
    ops: list[Operator]
    inputs: tuple[int, ...]
    outputs: tuple[int, ...]


def read(path: str | Path) -> Graph:
    """The graph; a file that is not a complete TFLite flatbuffer is a CompileError naming it."""
    path = Path(path)
    if not path.is_file():
        raise CompileError(f"{path}: no such model file")
    data = path.read_bytes()
    if data[4:8] != b"TFL3":
        raise CompileError(f"{path}: not a TFLite flatbuffer (identifier {data[4:8]!r}, expected b'TFL3')")
    try:
        model_check.check_bytes(data, str(path))
        model = tfl.parse(data)
    except ValueError as exc:        # ModelFormatError, FlatbufferError
        msg = " ".join(str(exc).split()) or type(exc).__name__
        msg = msg[len(f"{path}: "):] if msg.startswith(f"{path}: ") else msg
        raise CompileError(f"{path}: truncated or corrupt TFLite flatbuffer ({len(data):,} bytes; {msg}); "
                           f"accepted: a complete .tflite file as the converter writes it") from None
    if len(model.subgraphs) > 1:
        log.warning("%s: %d subgraphs; compiling the first (the others are control flow bodies)",
                    path, len(model.subgraphs))
    sg = model.main
    return Graph(str(path), sg.tensors, sg.operators, sg.inputs, sg.outputs)


# -- to the builder ---------------------------------------------------------------------------------

def _scale(t: Tensor) -> np.ndarray:
    """A quantized tensor's scales; an I8 program cannot use a tensor without them."""
    if t.quantization is None:
        raise CompileError(f"tensor {t.name!r} ({t.type_name}) has no quantization; I8 programs need "
                           f"affine-quantized int8 tensors")
    return t.quantization.scale


UINT8_OFFSET = 128          # a uint8 model's values and zero points are stored this much lower, as int8


def _offset(t: Tensor) -> int:
    return UINT8_OFFSET if t.type_name == "UINT8" else 0


def _zp(t: Tensor) -> np.ndarray:
    """Zero points as the chip stores the tensor (uint8 ones 128 lower)."""
    _scale(t)
    return t.quantization.zero_point - _offset(t)


def _quant(t: Tensor):
    from dtpu.spec import Quant
    return Quant(tuple(float(s) for s in _scale(t)), tuple(int(z) for z in _zp(t)))


def _same_quant(a: Tensor, b: Tensor) -> bool:
    qa, qb = a.quantization, b.quantization
    return (qa is not None and qb is not None and np.array_equal(qa.scale, qb.scale)
            and np.array_equal(qa.zero_point, qb.zero_point))


def _dtype(t: Tensor) -> str:
    return t.dtype.name if t.dtype is not None else t.type_name.lower()


def _act(op: Operator) -> str:
    """The fused activation in lower case ("none", "relu", ...); ops without one have none."""
    return str(op.options.get("fused_activation_function", "NONE")).lower()


def _geometry(op: Operator, label: str) -> tuple[tuple[int, int], tuple[int, int], str]:
    """(stride, dilation, padding) of a convolution or pooling op, (H, W) order."""
    o = op.options
    if "padding" not in o:
        raise CompileError(f"{label}: no {op.opcode} options in the file (stride, padding); "
                           f"accepted: a .tflite file as the converter writes it")
    if o["padding"] not in ("SAME", "VALID"):
        raise CompileError(f"{label}: padding {o['padding']}; accepted: SAME, VALID")
    return ((int(o["stride_h"]), int(o["stride_w"])),
            (int(o.get("dilation_h_factor", 1)), int(o.get("dilation_w_factor", 1))), o["padding"].lower())


def _float_clamp(label: str, kind: str):
    ranges = {"none": None, "relu": (0.0, np.inf), "relu6": (0.0, 6.0), "relu_n1_to_1": (-1.0, 1.0)}
    if kind not in ranges:
        raise CompileError(f"{label}: fused activation {kind} is not supported; accepted: "
                           f"none, relu, relu6, relu_n1_to_1")
    return ranges[kind]


def _act_kind(label: str, kind: str) -> str:
    if kind not in ("none", "relu", "relu6", "relu_n1_to_1"):
        raise CompileError(f"{label}: fused activation {kind} is not supported; accepted: "
                           f"none, relu, relu6, relu_n1_to_1")
    return kind


# ops that compute only tensor shapes (no activation values): skipped, their outputs are not data
_SHAPE_OPS = ("SHAPE", "STRIDED_SLICE", "PACK")
# heads the host runs after the chip, at the end of the graph (see dtpu.isro.heads)
HEAD_OPS = {"SOFTMAX": "softmax", "LOGISTIC": "sigmoid"}


def choose_output(model: Graph, wanted: str | None = None) -> tuple[int, list[str]]:
    """(the output tensor the chip computes, the names of the outputs left out).

    `wanted` is an output's tensor name or its index among the model's outputs. Without it a
    model with several outputs compiles the one output no operator reads: converters that keep
    an intermediate feature map as a second (debug) output leave the network's real result as
    the only output nothing consumes. Several such outputs are ambiguous and must be chosen.
    """
    outs = list(model.outputs)
    names = [model.tensors[t].name for t in outs]

    def listing() -> str:
        return ", ".join(f"{i}: {n!r} {model.tensors[t].shape}" for i, (t, n) in enumerate(zip(outs, names)))

    if wanted is not None:
        if wanted in names:
            chosen = outs[names.index(wanted)]
        elif wanted.isdigit() and int(wanted) < len(outs):
            chosen = outs[int(wanted)]
        else:
            raise CompileError(f"{model.path}: no model output {wanted!r}; accepted: a name or index of "
                               f"{listing()}")
    elif len(outs) == 1:
        chosen = outs[0]
    else:
        read = {t for op in model.ops for t in op.inputs}
        final = [t for t in outs if t not in read]
        if len(final) != 1:
            raise CompileError(f"{model.path}: {len(outs)} outputs ({listing()}) and {len(final)} of them "
                               f"read by no operator; choose the one to compile with --model-output NAME "
                               f"or INDEX")
        chosen = final[0]
    return chosen, [n for t, n in zip(outs, names) if t != chosen]


def _needed(ops: list[Operator], end: int) -> list[Operator]:
    """The ops `end` depends on, in execution order: a branch that only feeds another output
    (or nothing) is not compiled."""
    want, keep = {end}, []
    for op in reversed(ops):
        if want.intersection(op.outputs):
            keep.append(op)
            want.update(t for t in op.inputs if t >= 0)
    return keep[::-1]


def _uint8_requantize(op, T, where: str) -> bool:
    """Whether `op` is a QUANTIZE between uint8 and int8 that only moves the zero point by 128
    (TF2's int8 models with uint8 input/output: the converter's QUANTIZE at each end). Its int8
    side then holds exactly the uint8 values stored 128 lower, which is how the chip stores a
    uint8 tensor anyway: the host converts, as for a TF1 uint8 model. A QUANTIZE that also
    rescales would round, and is refused naming the scales."""
    if op.opcode != "QUANTIZE":
        return False
    a, b = T[op.inputs[0]], T[op.outputs[0]]
    if {a.type_name, b.type_name} != {"UINT8", "INT8"}:
        return False
    u, i = (a, b) if a.type_name == "UINT8" else (b, a)
    su, si = _scale(u), _scale(i)
    if len(su) != 1 or len(si) != 1 or np.float32(su[0]) != np.float32(si[0]) \
            or int(u.quantization.zero_point[0]) - UINT8_OFFSET != int(i.quantization.zero_point[0]):
        raise CompileError(f"{where} QUANTIZE {a.name!r} -> {b.name!r}: uint8 scale {str(np.float32(su[0]))} zero point "
                           f"{int(u.quantization.zero_point[0])}, int8 scale {str(np.float32(si[0]))} zero point "
                           f"{int(i.quantization.zero_point[0])}; accepted: the same scale and zero points 128 "
                           f"apart (a uint8 view of the int8 tensor)")
    return True


def build(model: Graph, output: str | None = None) -> tuple[Builder, dict]:
    """Walk the graph in execution order (a DAG: branches and residual ADDs), folding each op
    into the Builder; trailing heads the chip cannot run (SOFTMAX) go to the host. `output`:
    which model output to compile (:func:`choose_output`)."""
    T = model.tensors
    if not model.inputs:
        raise CompileError(f"{model.path}: no inputs; a model compiles from its inputs")
    wanted = output if isinstance(output, (list, tuple)) and len(output) > 1 else None
    if wanted is None:
        end, left_out = choose_output(model, output[0] if isinstance(output, (list, tuple)) else output)
        ops = _needed(list(model.ops), end)
        more_ends = []
    else:
        # several outputs: the one computed last is the program's final layer, the others are
        # kept in frame memory until END
        ends = list(dict.fromkeys(choose_output(model, w)[0] for w in wanted))
        made = {t: i for i, op in enumerate(model.ops) for t in op.outputs}
        end = max(ends, key=lambda t: made.get(t, -1))
        more_ends = [t for t in ends if t != end]
        left_out = [T[t].name for t in model.outputs if t not in ends]
        keep = {id(op) for t in ends for op in _needed(list(model.ops), t)}
        ops = [op for op in model.ops if id(op) in keep]
    if left_out:
        log.info("%s: compiling output %r; left out: %s", model.path, T[end].name, ", ".join(left_out))
    cur = model.inputs[0]
    host_quantize = host_dequantize = False
    io_offset = {"input": 0, "output": 0}        # uint8 input/output of an int8 model (TF2)
    if ops and ops[0].opcode == "QUANTIZE" and T[cur].dtype == np.float32:
        host_quantize = True
        cur = ops[0].outputs[0]
        ops = ops[1:]
    elif ops and cur in ops[0].inputs and _uint8_requantize(ops[0], T, "input"):
        io_offset["input"] = UINT8_OFFSET
        cur = ops[0].outputs[0]
        ops = ops[1:]
    output_tensor = end
    heads = []
    while ops:
        last = next((o for o in reversed(ops) if end in o.outputs), None)
        if last is None:
            break
        if last.opcode == "DEQUANTIZE" and not heads and not host_dequantize:
            host_dequantize = True
        elif not heads and not io_offset["output"] and not host_dequantize and not more_ends \
                and _uint8_requantize(last, T, "output"):
            io_offset["output"] = UINT8_OFFSET
        elif last.opcode in HEAD_OPS:
            heads.insert(0, _head(last, T))
        else:
            break
        end = last.inputs[0]
        ops.remove(last)
    x = T[cur]
    if x.dtype == np.float32:
        fmt = Fmt.F32
    elif x.dtype in (np.int8, np.uint8):
        fmt = Fmt.I8
    else:
        raise CompileError(f"input tensor {x.name!r}: dtype {_dtype(x)}; accepted: float32, int8, uint8")
    if len(x.shape) == 4:
        if x.shape[0] != 1:
            raise CompileError(f"input tensor {x.name!r}: batch {x.shape[0]}; the chip runs one image")
        _, h, w, c = x.shape
        b = Builder(fmt, (c, h, w), input_name=x.name, in_scale=float(_scale(x)[0]) if fmt is Fmt.I8 else None,
                    in_zp=int(_zp(x)[0]) if fmt is Fmt.I8 else 0)
    elif len(x.shape) == 3 and x.shape[0] == 1:
        # a sequence (1, L, C): stored as C x 1 x L, the layout of TFLite's 1-D ops, which run as
        # 2-D ones over (1, 1, L, C) after an EXPAND_DIMS
        _, n, c = x.shape
        b = Builder(fmt, (c, 1, n), input_name=x.name, in_scale=float(_scale(x)[0]) if fmt is Fmt.I8 else None,
                    in_zp=int(_zp(x)[0]) if fmt is Fmt.I8 else 0)
    elif len(x.shape) == 2 and x.shape[0] == 1:
        b = Builder(fmt, (x.shape[1], 1, 1), flat_input=True, input_name=x.name,
                    in_scale=float(_scale(x)[0]) if fmt is Fmt.I8 else None,
                    in_zp=int(_zp(x)[0]) if fmt is Fmt.I8 else 0)
    else:
        raise CompileError(f"input tensor {x.name!r}: shape {x.shape}; accepted: (1, H, W, C), (1, L, C) or (1, N)")

    values = {cur: b.value}                      # TFLite tensor -> the builder's value for it
    for t in model.inputs[1:]:                   # further inputs: frame tensors the host writes too
        values[t] = _extra_input(b, fmt, T[t], model.path)
    i = 0
    while i < len(ops):
        op = ops[i]
        label = f"op {op.index} ({op.opcode})"
        data_in = [t for t in op.inputs if t in values]
        if not data_in or op.opcode in _SHAPE_OPS:
            i += 1                                # constants or shape arithmetic: no data
            continue
        if len(op.outputs) != 1:
            raise CompileError(f"{label}: {len(op.outputs)} outputs; only single-output ops compile")
        before, folded = len(b.layers), b.producer()
        if op.opcode == "ADD" and len(data_in) == 2:
            out = T[op.outputs[0]]
            _eadd(b, fmt, op, T, label, out, values)
            i += 1
        elif op.opcode == "CONCATENATION":
            out = T[op.outputs[0]]
            _concat(b, fmt, op, T, label, out, values)
            i += 1
        elif op.opcode == "MUL" and len(data_in) == 2:
            out = T[op.outputs[0]]
            _emul(b, fmt, op, T, label, out, values)
            i += 1
        elif op.opcode in TABLE_BINARY and fmt is Fmt.I8 and len(data_in) == 1:
            out = T[op.outputs[0]]
            b.value = values[data_in[0]]
            folded = b.producer()
            _const_lut(b, op, T, label, out, data_in[0])
            i += 1
        elif op.opcode == "TRANSPOSE_CONV":
            if len(op.inputs) < 3 or op.inputs[2] not in values or len(data_in) != 1:
                raise CompileError(f"{label}: reads {len(data_in)} computed tensors; accepted: the input "
                                   f"(third operand) computed, output shape and weights constant")
            b.value = values[op.inputs[2]]
            folded = b.producer()
            out = T[op.outputs[0]]
            _tconv(b, fmt, op, T, label, out)
            i += 1
        else:
            if op.inputs[0] not in values or len(data_in) != 1:
                raise CompileError(f"{label}: reads {len(data_in)} computed tensors "
                                   f"({', '.join(T[t].name for t in data_in)}); accepted: one, as its "
                                   f"first input (two for ADD)")
            b.value = values[op.inputs[0]]
            folded = b.producer()
            if op.opcode == "SPACE_TO_BATCH_ND":
                # TF lowers a dilated Keras convolution to SPACE_TO_BATCH_ND -> conv -> BATCH_TO_SPACE_ND
                conv, b2s, dilation, pads = _dilated(ops, i, T, label)
                out = T[b2s.outputs[0]]
                _mac(b, fmt, conv, T, f"op {conv.index} ({conv.opcode})", out, x=T[op.inputs[0]],
                     dilation=dilation, padding=pads)
                i += 3
            else:
                out = T[op.outputs[0]]
                _op(b, fmt, op, T, label, out)
                i += 1
        if len(b.layers) > before or (op.opcode in _FOLDED_ACTIVATIONS and b.producer() is folded):
            if b.producer() is not None:
                b.producer().tensor = out.index  # this tensor now holds that layer's values
        values[out.index] = b.value
    if end not in values:
        raise CompileError(f"{model.path}: the model output (tensor {end}) is not computed from the input")
    for t in more_ends:
        if t not in values:
            raise CompileError(f"{model.path}: model output {T[t].name!r} is not computed on the chip")
        b.mark_output(values[t], T[t].name)
    b.value = values[end]
    b.heads = heads
    extra = {"tflite": {"input_tensor": model.inputs[0], "input_tensors": list(model.inputs),
                        "output_tensor": output_tensor,
                        "machine_output_tensor": end, "host_quantize": host_quantize,
                        "host_dequantize": host_dequantize},
             "heads": heads}
    if len(model.outputs) > 1:
        extra["tflite"].update(output_name=T[output_tensor].name, outputs_left_out=left_out)
    if more_ends:
        extra["tflite"].update(more_outputs=[T[t].name for t in more_ends])
    if io_offset["input"] or io_offset["output"]:
        if _offset(x) or _offset(T[end]):
            raise CompileError(f"{model.path}: a QUANTIZE between uint8 and int8 in a uint8 model; accepted: "
                               f"uint8 throughout (TF1) or int8 inside with uint8 at the ends (TF2)")
        extra["tflite"].update(input_offset=io_offset["input"], output_offset=io_offset["output"])
    elif _offset(x) or _offset(T[end]):
        extra["tflite"].update(input_offset=_offset(x), output_offset=_offset(T[end]))
    return b, extra


def _extra_input(b: Builder, fmt: Fmt, x: Tensor, path: str):
    """A model input after the first, in the program's number format."""
    want = (np.float32,) if fmt is Fmt.F32 else (np.int8,)
    if x.dtype not in want:
        raise CompileError(f"input tensor {x.name!r}: dtype {_dtype(x)}, the first input's program is "
                           f"{fmt.name.lower()}; accepted: all inputs {'float32' if fmt is Fmt.F32 else 'int8'}")
    q = dict(scale=float(_scale(x)[0]), zp=int(_zp(x)[0])) if fmt is Fmt.I8 else {}
    if len(x.shape) == 4 and x.shape[0] == 1:
        _, h, w, c = x.shape
        return b.add_input(x.name, (c, h, w), **q)
    if len(x.shape) == 2 and x.shape[0] == 1:
        return b.add_input(x.name, (x.shape[1], 1, 1), flat=True, **q)
    raise CompileError(f"input tensor {x.name!r}: shape {x.shape}; accepted: (1, H, W, C) or (1, N)")


def _head(op: Operator, T: list[Tensor]) -> dict:
    """A head op as the host will run it (dtpu.isro.heads), with TFLite's own parameters."""
    x, y = T[op.inputs[0]], T[op.outputs[0]]
    head = {"kind": HEAD_OPS[op.opcode], "name": f"op{op.index}_{op.opcode.lower()}", "tensor": y.index,
            "beta": float(op.options.get("beta", 1.0))}
    if x.dtype in (np.int8, np.uint8):         # uint8: zero points as stored, 128 lower (_zp)
        head.update(input_scale=float(_scale(x)[0]), input_zero_point=int(_zp(x)[0]),
                    output_scale=float(_scale(y)[0]), output_zero_point=int(_zp(y)[0]),
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
    name = f"op{op.index}_{op.opcode.lower()}"
    kind = _act_kind(label, _act(op))
    post: dict[str, Any] = {"tensor": out.index}
    if fmt is Fmt.I8:
        sa, sb, so = (float(np.float32(_scale(t)[0])) for t in (xa, xb, out))
        ls = 20
        twice = 2 * max(sa, sb)
        q = {"zp_a": int(_zp(xa)[0]), "zp_b": int(_zp(xb)[0]), "left_shift": ls}
        for key, real in (("a", sa / twice), ("b", sb / twice), ("out", twice / ((1 << ls) * so))):
            m, s = quantize_multiplier(real)
            q[f"m_{key}"], q[f"s_{key}"] = int(m), int(s)
        post.update(eadd_q=q, out_zp=int(_zp(out)[0]), out_scale=float(_scale(out)[0]),
                    rounding=TFLITE_ROUNDING["ADD"],
                    clamp=quantized_activation_range(kind, float(_scale(out)[0]), int(_zp(out)[0])))
    else:
        clamp = _float_clamp(label, _act(op))
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
    if i + 2 >= len(ops) or ops[i + 1].opcode not in ("CONV_2D", "DEPTHWISE_CONV_2D") or ops[i + 2].opcode != "BATCH_TO_SPACE_ND":
        raise CompileError(f"{label}: only the SPACE_TO_BATCH_ND -> CONV_2D/DEPTHWISE_CONV_2D -> "
                           f"BATCH_TO_SPACE_ND pattern of a dilated convolution is supported")
    conv, b2s = ops[i + 1], ops[i + 2]
    if conv.inputs[0] != s2b.outputs[0] or b2s.inputs[0] != conv.outputs[0]:
        raise CompileError(f"{label}: the dilated-convolution ops do not form a chain")
    consts = [T[s2b.inputs[1]].data, T[s2b.inputs[2]].data, T[b2s.inputs[1]].data, T[b2s.inputs[2]].data]
    if any(c is None for c in consts):
        raise CompileError(f"{label}: block shape, paddings and crops must be constant tensors")
    block, paddings, block2, crops = (np.asarray(c).astype(int) for c in consts)
    stride, dil, padding = _geometry(conv, f"op {conv.index} ({conv.opcode})")
    if not np.array_equal(block, block2) or stride != (1, 1) or dil != (1, 1) or padding != "valid":
        raise CompileError(f"op {conv.index} ({conv.opcode}): between SPACE_TO_BATCH_ND and BATCH_TO_SPACE_ND "
                           f"only a stride-1, undilated VALID convolution can be folded into a dilation")
    pads = paddings.reshape(2, 2) - crops.reshape(2, 2)
    if np.any(pads < 0):
        raise CompileError(f"{label}: crops {crops.tolist()} exceed paddings {paddings.tolist()}")
    return conv, b2s, (int(block[0]), int(block[1])), tuple(int(v) for v in pads.reshape(-1))


def _op(b: Builder, fmt: Fmt, op: Operator, T: list[Tensor], label: str, out: Tensor) -> None:
    x = T[op.inputs[0]]
    name = f"op{op.index}_{op.opcode.lower()}"
    o = op.options
    if op.opcode in ("CONV_2D", "DEPTHWISE_CONV_2D", "FULLY_CONNECTED"):
        _mac(b, fmt, op, T, label, out)
        return
    if op.opcode == "MAX_POOL_2D":
        stride, _, padding = _geometry(op, label)
        post: dict[str, Any] = {"tensor": out.index}
        kind = _act_kind(label, _act(op))
        if fmt is Fmt.I8:
            if not _same_quant(x, out):
                raise CompileError(f"{label}: int8 max pooling with different input/output quantization")
            post.update(out_zp=int(_zp(out)[0]), out_scale=float(_scale(out)[0]))
            if kind != "none":
                post["clamp"] = quantized_activation_range(kind, float(_scale(out)[0]), int(_zp(out)[0]))
        else:
            post["clamp"] = _float_clamp(label, kind)
        pool = (o["filter_height"], o["filter_width"])
        if _swapped(b, x):
            pool, stride = pool[::-1], stride[::-1]
        b.maxpool(name, pool, stride, padding, **post)
        return
    if op.opcode == "AVERAGE_POOL_2D":
        stride, _, padding = _geometry(op, label)
        # uint8: TFLite rounds (sum + n/2) / n on the uint8 values, which is half up on the stored
        # ones too (they are 128 lower, and 128 n / n is exact): the AVGPOOL's hup flag
        post = {"tensor": out.index, "half_up": bool(_offset(x))}
        kind = _act_kind(label, _act(op))
        if fmt is Fmt.I8:
            if not _same_quant(x, out):
                raise CompileError(f"{label}: int8 average pooling with different input/output quantization")
            post.update(out_zp=int(_zp(out)[0]), out_scale=float(_scale(out)[0]),
                        clamp=quantized_activation_range(kind, float(_scale(out)[0]), int(_zp(out)[0])))
        else:
            clamp = _float_clamp(label, kind)
            if clamp is not None:
                post["clamp"] = clamp
        pool = (o["filter_height"], o["filter_width"])
        if _swapped(b, x):
            pool, stride = pool[::-1], stride[::-1]
        b.avgpool(name, pool, stride, padding, **post)
        return
    if op.opcode == "MEAN":
        axes = T[op.inputs[1]].data
        rank = len(x.shape)
        spatial = sorted(int(a) % rank for a in np.asarray(axes).reshape(-1)) if axes is not None else None
        if spatial != list(range(1, rank - 1)) or rank not in (3, 4):
            raise CompileError(f"{label}: MEAN over axes {None if axes is None else np.asarray(axes).tolist()}; "
                               f"accepted: the spatial axes [1, 2] of an NHWC tensor, or [1] of an NLC one "
                               f"(global average pooling)")
        c, h, w = b.shape
        post = {"tensor": out.index, "flat": len(out.shape) == 2}
        if fmt is Fmt.I8:
            post.update(_mean_i8(x, out, h * w, c, keep_dims=bool(o.get("keep_dims"))))
        b.avgpool(name, (h, w), (1, 1), "valid", **post)
        return
    if op.opcode in ("PAD", "PADV2"):
        pads = T[op.inputs[1]].data
        if pads is None:
            raise CompileError(f"{label}: paddings are not a constant tensor")
        pads = np.asarray(pads).reshape(-1, 2)
        if pads.shape[0] != 4 or np.any(pads[0]) or np.any(pads[3]):
            raise CompileError(f"{label}: paddings {pads.tolist()}; only height/width padding of an "
                               f"NHWC tensor is supported")
        if op.opcode == "PADV2" and len(op.inputs) > 2:
            v = T[op.inputs[2]].data
            zero = int(x.quantization.zero_point[0]) if fmt is Fmt.I8 else 0.0
            if v is None or np.any(np.asarray(v) != zero):
                raise CompileError(f"{label}: constant value {v} is not the real zero; the chip pads "
                                   f"with zeros (or -inf before max pooling)")
        if fmt is Fmt.I8 and not _same_quant(x, out):
            raise CompileError(f"{label}: int8 padding with different input/output quantization")
        b.pad(name, int(pads[1, 0]), int(pads[1, 1]), int(pads[2, 0]), int(pads[2, 1]))
        return
    if op.opcode in ("RESHAPE", "EXPAND_DIMS", "SQUEEZE"):
        if (op.opcode == "RESHAPE" and len(out.shape) == 2 and out.shape[0] == 1
                and out.shape[1] == int(np.prod(x.shape))):
            if len(x.shape) == 4:
                b.flatten(name)
            return
        if _same_layout(x.shape, out.shape) and not b.flattened:
            return                                # a view: the stored C x H x W is unchanged
        raise CompileError(f"{label}: {op.opcode.lower()} {x.shape} -> {out.shape}; accepted: flattening to "
                           f"(1, N), or adding/removing axes of size 1 that keep the channels last")
    if op.opcode in UNARY_OPS:
        post = {"tensor": out.index}
        if fmt is Fmt.I8:
            from dtpu.unary_tables import int8_table
            dtype = "uint8" if x.dtype == np.uint8 else "int8"
            if out.dtype != x.dtype:
                raise CompileError(f"{label}: input {_dtype(x)}, output {_dtype(out)}; accepted: one dtype")
            table = int8_table(op.opcode, dtype, float(_scale(x)[0]), int(x.quantization.zero_point[0]),
                               float(_scale(out)[0]), int(out.quantization.zero_point[0]))
            # indexed by the stored value + 128 (a uint8 model's own value), stored 128 lower if uint8
            table = (table.astype(np.int16) - _offset(out)).astype(np.int8)
            b.lut(name, table=table, out_zp=int(_zp(out)[0]), out_scale=float(_scale(out)[0]), **post)
        else:
            b.lut(name, func=UNARY_OPS[op.opcode], **post)
        return
    if op.opcode in ("RESIZE_BILINEAR", "RESIZE_NEAREST_NEIGHBOR"):
        size = T[op.inputs[1]].data if len(op.inputs) > 1 else None
        if size is None or np.asarray(size).size != 2:
            raise CompileError(f"{label}: the output size is not a constant (H, W) tensor")
        bilinear = op.opcode == "RESIZE_BILINEAR"
        post = {"tensor": out.index}
        if fmt is Fmt.I8:
            if not _same_quant(x, out):
                raise CompileError(f"{label}: int8 resize with different input/output quantization")
            if bilinear and _offset(x):
                raise CompileError(f"{label}: uint8 RESIZE_BILINEAR rounds on uint8 values; the chip's I8 "
                                   f"interpolation rounds the stored (128 lower) ones. Accepted: int8 models")
            post.update(out_zp=int(_zp(out)[0]), out_scale=float(_scale(out)[0]))
        if len(x.shape) != 4 or (b.shape[1], b.shape[2]) != (x.shape[1], x.shape[2]):
            raise CompileError(f"{label}: resize of a {x.shape} tensor; accepted: (1, H, W, C)")
        b.resize(name, tuple(int(v) for v in np.asarray(size).reshape(-1)), bilinear=bilinear,
                 align=bool(o.get("align_corners")), half=bool(o.get("half_pixel_centers")), **post)
        return
    if op.opcode in ("RELU", "RELU_N1_TO_1", "RELU6"):
        kind = op.opcode.lower()
        if fmt is Fmt.I8:
            if not _same_quant(x, out):
                raise CompileError(f"{label}: int8 {op.opcode} that requantizes (input and output "
                                   f"quantization differ) needs a second DSP stage")
            b.activation(name, clamp=quantized_activation_range(kind, float(_scale(out)[0]), int(_zp(out)[0])))
        else:
            b.activation(name, clamp={"relu": (0.0, np.inf), "relu6": (0.0, 6.0), "relu_n1_to_1": (-1.0, 1.0)}[kind])
        return
    if op.opcode == "ADD":
        const = T[op.inputs[1]].data if len(op.inputs) == 2 else None
        if const is None or const.size != max(const.shape[-1:] or (1,)):
            raise CompileError(f"{label}: only adding a constant per-channel vector (a bias) is "
                               f"supported; the chip has no elementwise tensor addition")
        b.bias(name, const)
        clamp = _float_clamp(label, _act(op)) if fmt is Fmt.F32 else None
        b.activation(name, clamp=clamp)
        return
    if op.opcode == "LEAKY_RELU":
        if fmt is Fmt.I8:
            _leaky_i8(b, x, out, float(o["alpha"]), name)
        else:
            b.activation(name, leaky=(0.0, float(o["alpha"])))
        return
    raise CompileError(f"{label} -> tensor {out.name!r}: not supported by the ISRO-ASIC; accepted: "
                       f"{', '.join(ACCEPTED)}")


UNARY_OPS = {"LOGISTIC": "sigmoid", "TANH": "tanh", "HARD_SWISH": "hswish"}


# int8 operators of one computed tensor and constants that run as LUT tables (the interpreter fills
# them: dtpu.unary_tables)
TABLE_BINARY = ("MUL", "ADD", "SUB")


def _const_lut(b: Builder, op: Operator, T: list[Tensor], label: str, out: Tensor, t_in: int) -> None:
    """An int8 MUL/ADD/SUB of the computed tensor by a scalar or per-channel constant: element by
    element a function of one int8 value per channel, so a table per channel from TFLite's own
    kernel is exact (EfficientNet's input rescaling and normalization)."""
    from dtpu import tflite_writer as tw
    from dtpu.unary_tables import channel_tables
    x = T[t_in]
    c = int(x.shape[-1])
    if out.dtype != x.dtype or tuple(out.shape) != tuple(x.shape):
        raise CompileError(f"{label}: output {out.shape} {_dtype(out)} from input {x.shape} {_dtype(x)}; "
                           f"accepted: the input's shape and dtype (an element-wise constant)")
    operands = []
    for t in op.inputs:
        if t == t_in:
            operands.append(None)
            continue
        k = T[t]
        if k.data is None or k.quantization is None or k.dtype != x.dtype:
            raise CompileError(f"{label}: operand {k.name!r} is neither computed nor a quantized "
                               f"{_dtype(x)} constant")
        shape = tuple(int(v) for v in k.shape)
        if int(np.prod(shape)) not in (1, c) or any(v != 1 for v in shape[:-1]):
            raise CompileError(f"{label}: constant {k.name!r} of shape {shape}; accepted: a scalar or one "
                               f"value per channel ({c})")
        operands.append(tw.Tensor(shape, _dtype(k), [float(v) for v in _scale(k)],
                                  [int(v) for v in k.quantization.zero_point], data=k.data, name=k.name))
    dtype = _dtype(x)
    table = channel_tables(op.opcode, dtype, c, (float(_scale(x)[0]), int(x.quantization.zero_point[0])),
                           (float(_scale(out)[0]), int(out.quantization.zero_point[0])), operands,
                           {"activation": _act_kind(label, _act(op))})
    table = (table.astype(np.int16) - _offset(out)).astype(np.int8)
    if np.all(table == table[:1]):
        table = table[0]
    b.lut(f"op{op.index}_{op.opcode.lower()}", table=table, out_zp=int(_zp(out)[0]),
          out_scale=float(_scale(out)[0]), tensor=out.index)


def _same_layout(a, b) -> bool:
    """Two shapes of one batch-1 tensor whose channel-last memory order is the same: only axes of
    size 1 added or removed, channels last in both (EXPAND_DIMS/SQUEEZE of a 1-D net)."""
    a, b = tuple(int(v) for v in a), tuple(int(v) for v in b)
    if len(a) < 2 or len(b) < 2 or a[0] != 1 or b[0] != 1 or a[-1] != b[-1]:
        return False
    return [v for v in a[1:-1] if v != 1] == [v for v in b[1:-1] if v != 1]


def _swapped(b: Builder, x: Tensor) -> bool:
    """`x` is (1, L, 1, C) while the chip stores it as C x 1 x L (TFLite's 1-D pooling expands
    the other axis than its 1-D convolution): the op's H and W parameters trade places."""
    if len(x.shape) != 4 or b.flattened:
        return False
    h, w = int(x.shape[1]), int(x.shape[2])
    return (b.shape[1], b.shape[2]) == (w, h) != (h, w)


def _concat(b: Builder, fmt: Fmt, op: Operator, T: list[Tensor], label: str, out: Tensor, values: dict) -> None:
    """CONCATENATION along channels: a copy (TFLite's int8 kernel requires equal quantization)."""
    rank = len(out.shape)
    axis = int(op.options.get("axis", -1))
    if rank < 2 or axis % rank != rank - 1:
        raise CompileError(f"{label}: concatenation along axis {axis} of rank-{rank} tensors; accepted: the "
                           f"channel (last) axis")
    missing = [T[t].name for t in op.inputs if t not in values]
    if missing:
        raise CompileError(f"{label}: concatenates constant tensor(s) {', '.join(missing)}; accepted: computed ones")
    if _act(op) != "none":
        raise CompileError(f"{label}: fused activation {_act(op)} on a concatenation; accepted: none")
    post: dict[str, Any] = {"tensor": out.index, "flat_out": rank == 2}
    if fmt is Fmt.I8:
        odd = [T[t].name for t in op.inputs if not _same_quant(T[t], out)]
        if odd:
            raise CompileError(f"{label}: input(s) {', '.join(odd)} quantized unlike the output; accepted: equal "
                               f"scales and zero points (TFLite's int8 concatenation copies)")
        post.update(out_zp=int(_zp(out)[0]), out_scale=float(_scale(out)[0]))
    b.concat(f"op{op.index}_{op.opcode.lower()}", [values[t] for t in op.inputs], **post)


def _emul(b: Builder, fmt: Fmt, op: Operator, T: list[Tensor], label: str, out: Tensor, values: dict) -> None:
    """MUL of two computed tensors (one may be 1x1xC): EMUL, with TFLite's int8 MUL multiplier
    s_a s_b / s_out computed in float32 as its Prepare does."""
    from dtpu.reference.quantize import quantize_multiplier
    ta, tb = op.inputs[:2]
    if int(np.prod(T[ta].shape)) < int(np.prod(T[tb].shape)):
        ta, tb = tb, ta                           # the broadcast operand second (the product commutes)
    xa, xb = T[ta], T[tb]
    kind = _act_kind(label, _act(op))
    post: dict[str, Any] = {"tensor": out.index}
    if fmt is Fmt.I8:
        sa, sb, so = (np.float32(_scale(t)[0]) for t in (xa, xb, out))
        m, s = quantize_multiplier(float(np.float32(np.float32(sa * sb) / so)))
        post.update(emul_q={"zp_a": int(_zp(xa)[0]), "zp_b": int(_zp(xb)[0]), "m_out": int(m), "s_out": int(s)},
                    out_zp=int(_zp(out)[0]), out_scale=float(so), rounding=TFLITE_ROUNDING["MUL"],
                    clamp=quantized_activation_range(kind, float(so), int(_zp(out)[0])))
    else:
        clamp = _float_clamp(label, _act(op))
        if clamp is not None:
            post["clamp"] = clamp
    b.emul(f"op{op.index}_{op.opcode.lower()}", values[ta], values[tb], **post)


def _tconv_pad(out: int, k: int, s: int, same: bool) -> int:
    """TFLite's TRANSPOSE_CONV padding: ComputePaddingHeightWidth with the output as the input
    of the forward convolution; the kernel crops this many outputs before the first."""
    fwd = (out + s - 1) // s if same else (out + s - k) // s
    return max((fwd - 1) * s + k - out, 0) // 2


def _tconv(b: Builder, fmt: Fmt, op: Operator, T: list[Tensor], label: str, out: Tensor) -> None:
    """TRANSPOSE_CONV (inputs: output shape, weights O x KH x KW x I, input, optional bias)."""
    from dtpu.reference.quantize import quantize_multiplier
    x, w = T[op.inputs[2]], T[op.inputs[1]]
    bias = T[op.inputs[3]] if len(op.inputs) > 3 and op.inputs[3] >= 0 else None
    if w.data is None:
        raise CompileError(f"{label}: weights tensor {w.name!r} is not a constant")
    o = op.options
    if "padding" not in o:
        raise CompileError(f"{label}: no TRANSPOSE_CONV options in the file (stride, padding)")
    if len(out.shape) != 4 or len(w.shape) != 4:
        raise CompileError(f"{label}: output {out.shape}, weights {w.shape}; accepted: NHWC and OHWI")
    sh, sw = int(o["stride_h"]), int(o["stride_w"])
    _, oh, ow, oc = (int(v) for v in out.shape)
    _, kh, kw, _ = (int(v) for v in w.shape)
    same = o["padding"] == "SAME"
    pads = (_tconv_pad(oh, kh, sh, same), _tconv_pad(ow, kw, sw, same))
    kind = _act_kind(label, _act(op))
    name = f"op{op.index}_{op.opcode.lower()}"
    weights = w.data.transpose(0, 3, 1, 2)
    if fmt is Fmt.I8:
        zps = None if w.quantization is None else w.quantization.zero_point
        if w.dtype != np.int8 or zps is None or np.any(zps != 0):
            raise CompileError(f"{label}: I8 needs symmetric int8 weights (zero point 0); {w.name!r} is "
                               f"{_dtype(w)} with zero points {zps}")
        if bias is not None and bias.dtype != np.int32:
            raise CompileError(f"{label}: bias dtype {bias.dtype}; I8 needs int32 bias")
        si, so = float(_scale(x)[0]), float(_scale(out)[0])
        ws = np.broadcast_to(np.asarray(_scale(w), np.float64), (oc,))
        m, s = quantize_multiplier(si * ws / so)
        bv = np.zeros(oc, np.int32) if bias is None else bias.data.astype(np.int32)
        post = dict(dsp=(bv, np.asarray(m, np.int32), np.asarray(s, np.int32)),
                    clamp=quantized_activation_range(kind, so, int(_zp(out)[0])),
                    rounding=TFLITE_ROUNDING["TRANSPOSE_CONV"], in_zp=int(_zp(x)[0]), out_zp=int(_zp(out)[0]),
                    out_scale=so, tensor=out.index)
    else:
        bv = np.zeros(oc, np.float32) if bias is None else bias.data.astype(np.float32)
        post = dict(dsp=(np.ones(oc, np.float32), np.zeros(oc, np.float32), bv),
                    clamp=_float_clamp(label, _act(op)), tensor=out.index)
    b.tconv(name, weights, (oh, ow), stride=(sh, sw), pad_before=pads, **post)


def _leaky_i8(b: Builder, x: Tensor, out: Tensor, alpha: float, name: str) -> None:
    """TFLite 2.14's int8 LEAKY_RELU as a 1x1 AVGPOOL whose DSP stage requantizes (x - zp_in) with
    the identity multiplier s_in / s_out, and negative values with alpha s_in / s_out (the I8
    leaky stage: the second pair in the parameter header). Both multipliers are computed as the
    kernel's Prepare does, in float32, and applied with MultiplyByQuantizedMultiplier (double
    rounding)."""
    from dtpu.reference.quantize import quantize_multiplier
    from dtpu.isro.isa import Rounding
    si, so = np.float32(_scale(x)[0]), np.float32(_scale(out)[0])
    m_id, s_id = (int(v) for v in quantize_multiplier(float(np.float32(si / so))))
    m_a, s_a = (int(v) for v in quantize_multiplier(float(np.float32(np.float32(si * np.float32(alpha)) / so))))
    c = b.shape[0]
    b.avgpool(name, (1, 1), (1, 1), "valid", tensor=out.index, in_zp=int(_zp(x)[0]), out_zp=int(_zp(out)[0]),
              out_scale=float(so), rounding=Rounding.DOUBLE, clamp=(-128, 127), leaky=(m_a, s_a),
              dsp=(np.zeros(c, np.int32), np.full(c, m_id, np.int32), np.full(c, s_id, np.int32)))


def _mean_i8(x: Tensor, out: Tensor, n: int, c: int, *, keep_dims: bool) -> dict[str, Any]:
    """TFLite 2.14's int8 MEAN over H, W as DSP parameters of an AVGPOOL (1/n in the multiplier).

    keep_dims (4-D output): optimized_integer_ops::Mean, MBQM(sum of stored values,
    s_in / (n s_out)) + (zp_out - round(zp_in s_in / s_out)), the latter in float32.
    Otherwise reference_ops::QuantizedMeanOrSum: MBQM(sum of (x - zp_in), m') + zp_out with
    QuantizeMultiplier(s_in / s_out) divided by n in fixed point (m' = (m << k) / n, shift - k).
    """
    from dtpu.reference.quantize import quantize_multiplier
    si, so = np.float32(_scale(x)[0]), np.float32(_scale(out)[0])
    zi, zo = int(_zp(x)[0]), int(_zp(out)[0])
    if keep_dims:
        # sums of the values as TFLite stores them (uint8: 128 higher than the chip's) and the bias
        # from the raw zero points, then the output 128 lower again
        real = np.float32(si / np.float32(np.float32(n) * so))
        m, s = (int(v) for v in quantize_multiplier(float(real)))
        temp = np.float32(np.float32(zi + _offset(x)) * si / so)
        temp = temp + np.float32(0.5) if temp > 0 else temp - np.float32(0.5)
        q = dict(in_zp=-_offset(x), post_offset=zo + _offset(out) - int(np.float32(temp)) - _offset(out))
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
    name = f"op{op.index}_{op.opcode.lower()}"
    o = op.options
    w = T[op.inputs[1]]
    bias = T[op.inputs[2]] if len(op.inputs) > 2 and op.inputs[2] >= 0 else None
    if w.data is None:
        raise CompileError(f"{label}: weights tensor {w.name!r} is not a constant")
    weights = w.data
    if fmt is Fmt.I8:
        zps = None if w.quantization is None else w.quantization.zero_point
        uint8 = w.dtype == np.uint8 and zps is not None and np.all(zps == zps.reshape(-1)[0])
        if not uint8 and (w.dtype != np.int8 or zps is None or np.any(zps != 0)):
            raise CompileError(f"{label}: I8 needs symmetric int8 weights (zero point 0) or uint8 weights "
                               f"with one zero point; {w.name!r} is {_dtype(w)} with zero points {zps}")
        if out.dtype != x.dtype:
            raise CompileError(f"{label}: output dtype {out.dtype}, input {x.dtype}; I8 programs keep one")
        if uint8:
            weights = (w.data.astype(np.int16) - UINT8_OFFSET).astype(np.int8)
    post = _post(b, fmt, op, x, w, bias, out, label, dilation)
    if fmt is Fmt.I8 and w.dtype == np.uint8:
        post["w_zp"] = int(_zp(w).reshape(-1)[0])
    if op.opcode == "FULLY_CONNECTED":
        if o.get("weights_format", "DEFAULT") != "DEFAULT":
            raise CompileError(f"{label}: shuffled FC weights format {o['weights_format']} is not supported")
        if int(np.prod(x.shape)) != w.shape[1]:
            raise CompileError(f"{label}: input {x.shape} is not one vector of {w.shape[1]} "
                               f"(batch > 1 is not supported)")
        b.dense(name, weights, **post)
        return
    stride, own_dilation, own_padding = _geometry(op, label)
    dilation = dilation or own_dilation
    padding = padding or own_padding
    if _swapped(b, x):                            # a 1-D layer over (1, L, 1, C): stored C x 1 x L
        if isinstance(padding, tuple):
            raise CompileError(f"{label}: explicit padding of a (1, L, 1, C) tensor is not supported")
        weights, stride, dilation = weights.transpose(0, 2, 1, 3), stride[::-1], tuple(dilation)[::-1]
    if op.opcode == "CONV_2D":
        b.conv(name, weights.transpose(0, 3, 1, 2), stride=stride, dilation=dilation,
               padding=padding, **post)
    else:
        b.conv(name, weights[0].transpose(2, 0, 1), stride=stride, dilation=dilation,
               padding=padding, depthwise_mult=w.shape[3] // x.shape[3], **post)


def _post(b: Builder, fmt: Fmt, op: Operator, x: Tensor, w: Tensor, bias: Tensor | None, out: Tensor,
          label: str, dilation=None) -> dict[str, Any]:
    """The DSP stage of a MAC op: F32 (1, 0, bias) plus the fused clamp; I8 TFLite's own pairs."""
    from dtpu import reference
    from dtpu.spec import Activation, ConvSpec, DataMode, OpKind, Padding
    cout = w.shape[3] if op.opcode == "DEPTHWISE_CONV_2D" else w.shape[0]
    if fmt is Fmt.F32:
        bv = np.zeros(cout, np.float32) if bias is None else bias.data.astype(np.float32)
        return dict(dsp=(np.ones(cout, np.float32), np.zeros(cout, np.float32), bv),
                    clamp=_float_clamp(label, _act(op)), tensor=out.index)
    kind = OpKind[op.opcode]
    act = Activation(_act_kind(label, _act(op)))
    if kind is OpKind.FULLY_CONNECTED:
        in_shape, f_shape, extra = (1, 1, 1, w.shape[1]), w.shape, {}
    else:
        in_shape, f_shape = x.shape, w.shape
        stride, own_dilation, padding = _geometry(op, label)
        extra = dict(stride=stride, dilation=tuple(dilation or own_dilation), padding=Padding(padding))
        if kind is OpKind.DEPTHWISE_CONV_2D:
            extra["depth_multiplier"] = w.shape[3] // x.shape[3]
    spec = ConvSpec(kind, DataMode.INT8, tuple(in_shape), tuple(f_shape), activation=act,
                    has_bias=bias is not None, input_q=_quant(x), filter_q=_quant(w), output_q=_quant(out),
                    **extra)
    rounding = TFLITE_ROUNDING[kind.name]
    lo, hi = reference.activation_range(spec)          # in the stored domain (uint8: 128 lower)
    if x.dtype == np.uint8:
        from dtpu.isro.isa import Rounding
        from dtpu.spec import Quant
        u8 = ConvSpec(kind, DataMode.UINT8, tuple(in_shape), tuple(f_shape), activation=act,
                      has_bias=bias is not None, input_q=Quant(tuple(float(v) for v in _scale(x)), tuple(int(z) for z in x.quantization.zero_point)),
                      filter_q=Quant(tuple(float(v) for v in _scale(w)), tuple(int(z) for z in w.quantization.zero_point)),
                      output_q=Quant(tuple(float(v) for v in _scale(out)), tuple(int(z) for z in out.quantization.zero_point)),
                      **extra)
        mult, shift = reference.output_multipliers(u8)
        rounding = Rounding.DOUBLE                     # tflite-runtime 2.14's uint8 kernels (dtpu.reference)
    else:
        mult, shift = reference.output_multipliers(spec)
    if bias is not None and bias.dtype != np.int32:
        raise CompileError(f"{label}: bias dtype {bias.dtype}; I8 needs int32 bias")
    bv = np.zeros(cout, np.int32) if bias is None else bias.data.astype(np.int32)
    return dict(dsp=(bv, np.asarray(mult, np.int32), np.asarray(shift, np.int32)), clamp=(int(lo), int(hi)),
                rounding=rounding, in_zp=int(_zp(x)[0]), out_zp=int(_zp(out)[0]),
                out_scale=float(_scale(out)[0]), tensor=out.index)


def node_specs(model: Graph):
    """(op, ConvSpec, filters, bias) for every CONV_2D / DEPTHWISE_CONV_2D / FULLY_CONNECTED with
    constant weights and a kernel the delegate knows (what it would hand a backend per node)."""
    sg = tfl.Subgraph("", model.tensors, model.ops, model.inputs, model.outputs)
    for op in model.ops:
        if op.opcode not in tfl.CONV_OPCODES:
            continue
        try:
            spec, w, b = tfl.conv_spec(sg, op)
        except ValueError as exc:     # hybrid kernels, computed weights
            log.info("op %d (%s): no node spec (%s)", op.index, op.opcode, exc)
            continue
        yield op, spec, w, b
