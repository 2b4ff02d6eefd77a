"""One-operator .tflite graphs (ADD, SUB, MUL, AVERAGE_POOL_2D, MAX_POOL_2D, MEAN) written with the
flatbuffer builder of the ``tflite`` package, so the vector unit's reference twins can be checked
against the interpreter itself without TensorFlow: the converter is not installed here, and the
zoo's models hold these operators only at a few fixed shapes and scales.
"""
from __future__ import annotations

import importlib
from dataclasses import dataclass, field

import flatbuffers
import numpy as np
import tflite

# the package's __init__ rebinds each name to its class: the builder functions live in the modules
(AddOptions, Buffer, Conv2DOptions, FullyConnectedOptions, Model, MulOptions, Operator,
 OperatorCode, Pool2DOptions, QuantizationParameters, ReducerOptions, SubGraph, SubOptions,
 Tensor) = (
    importlib.import_module(f"tflite.{n}") for n in (
        "AddOptions", "Buffer", "Conv2DOptions", "FullyConnectedOptions", "Model", "MulOptions",
        "Operator", "OperatorCode", "Pool2DOptions", "QuantizationParameters", "ReducerOptions",
        "SubGraph", "SubOptions", "Tensor"))

_TYPES = {"int8": tflite.TensorType.INT8, "uint8": tflite.TensorType.UINT8,
          "int32": tflite.TensorType.INT32}
ACTIVATIONS = {"none": 0, "relu": 1, "relu_n1_to_1": 2, "relu6": 3}


@dataclass
class T:
    """A tensor of the graph: shape, dtype name, quantization; `data` makes it a constant."""
    shape: tuple
    dtype: str = "int8"
    scale: float | None = None
    zero_point: int = 0
    data: np.ndarray | None = None
    axis: int = 0             # the quantized dimension of per-channel scales
    name: str = ""


def _vector(b, start, values, kind):
    start(b, len(values))
    for v in reversed(values):
        {"i": b.PrependInt32, "f": b.PrependFloat32, "l": b.PrependInt64, "b": b.PrependUint8,
         "o": b.PrependUOffsetTRelative}[kind](v)
    return b.EndVector()


def _options(b, op: str, attrs: dict):
    act = ACTIVATIONS[attrs.get("activation", "none")]
    if op == "ADD":
        AddOptions.Start(b)
        AddOptions.AddFusedActivationFunction(b, act)
        return tflite.BuiltinOptions.AddOptions, AddOptions.End(b)
    if op == "SUB":
        SubOptions.Start(b)
        SubOptions.AddFusedActivationFunction(b, act)
        return tflite.BuiltinOptions.SubOptions, SubOptions.End(b)
    if op == "MUL":
        MulOptions.Start(b)
        MulOptions.AddFusedActivationFunction(b, act)
        return tflite.BuiltinOptions.MulOptions, MulOptions.End(b)
    if op in ("AVERAGE_POOL_2D", "MAX_POOL_2D"):
        Pool2DOptions.Start(b)
        Pool2DOptions.AddPadding(b, {"SAME": 0, "VALID": 1}[attrs["padding"]])
        Pool2DOptions.AddStrideH(b, attrs["stride"][0])
        Pool2DOptions.AddStrideW(b, attrs["stride"][1])
        Pool2DOptions.AddFilterHeight(b, attrs["filter"][0])
        Pool2DOptions.AddFilterWidth(b, attrs["filter"][1])
        Pool2DOptions.AddFusedActivationFunction(b, act)
        return tflite.BuiltinOptions.Pool2DOptions, Pool2DOptions.End(b)
    if op == "CONV_2D":
        Conv2DOptions.Start(b)
        Conv2DOptions.AddPadding(b, {"SAME": 0, "VALID": 1}[attrs.get("padding", "SAME")])
        Conv2DOptions.AddStrideH(b, attrs.get("stride", (1, 1))[0])
        Conv2DOptions.AddStrideW(b, attrs.get("stride", (1, 1))[1])
        Conv2DOptions.AddDilationHFactor(b, 1)
        Conv2DOptions.AddDilationWFactor(b, 1)
        Conv2DOptions.AddFusedActivationFunction(b, act)
        return tflite.BuiltinOptions.Conv2DOptions, Conv2DOptions.End(b)
    if op == "FULLY_CONNECTED":
        FullyConnectedOptions.Start(b)
        FullyConnectedOptions.AddFusedActivationFunction(b, act)
        return tflite.BuiltinOptions.FullyConnectedOptions, FullyConnectedOptions.End(b)
    if op == "MEAN":
        ReducerOptions.Start(b)
        ReducerOptions.AddKeepDims(b, bool(attrs.get("keep_dims", True)))
        return tflite.BuiltinOptions.ReducerOptions, ReducerOptions.End(b)
    raise ValueError(f"no options for {op!r}")


def one_op_model(op: str, inputs: list[T], output: T, **attrs) -> bytes:
    """The flatbuffer of a graph holding one `op` node: non-constant `inputs` are the graph's
    inputs (in order), `output` its output."""
    tensors = list(inputs) + [output]
    return graph_model(tensors, [Op(op, list(range(len(inputs))), [len(inputs)], attrs)],
                       [i for i, t in enumerate(inputs) if t.data is None], [len(inputs)])


@dataclass
class Op:
    """A node of :func:`graph_model`: operator name, input and output tensor indices, options
    (the vector operators' as in :func:`one_op_model`; CONV_2D: padding, stride, activation;
    FULLY_CONNECTED: activation)."""
    op: str
    inputs: list
    outputs: list
    attrs: dict = field(default_factory=dict)


def graph_model(tensors: list[T], ops: list[Op], inputs: list[int], outputs: list[int]) -> bytes:
    """The flatbuffer of a graph of `ops` over `tensors` (a constant is a tensor with `data`),
    with graph inputs and outputs given by tensor index. A tensor's `scale` may be a sequence
    (per-channel quantization along `axis`)."""
    b = flatbuffers.Builder(1024)
    # buffer 0 is the empty sentinel; each constant gets its own
    buffers = [None] + [t.data for t in tensors if t.data is not None]
    buf_offs = []
    for data in buffers:
        if data is not None:
            raw = np.ascontiguousarray(data).tobytes()
            b.StartVector(1, len(raw), 16)
            for byte in reversed(raw):
                b.PrependUint8(byte)
            vec = b.EndVector()
        Buffer.Start(b)
        if data is not None:
            Buffer.AddData(b, vec)
        buf_offs.append(Buffer.End(b))
    t_offs, next_buf = [], 1
    for i, t in enumerate(tensors):
        name = b.CreateString(t.name or f"t{i}")
        shape = _vector(b, Tensor.StartShapeVector, list(t.shape), "i")
        q = None
        if t.scale is not None:
            scales = list(np.atleast_1d(np.asarray(t.scale, np.float64)))
            zps = list(np.atleast_1d(np.asarray(t.zero_point, np.int64)))
            if len(zps) == 1 and len(scales) > 1:
                zps = zps * len(scales)
            sc = _vector(b, QuantizationParameters.StartScaleVector, [float(v) for v in scales],
                         "f")
            zp = _vector(b, QuantizationParameters.StartZeroPointVector, [int(v) for v in zps],
                         "l")
            QuantizationParameters.Start(b)
            QuantizationParameters.AddScale(b, sc)
            QuantizationParameters.AddZeroPoint(b, zp)
            QuantizationParameters.AddQuantizedDimension(b, t.axis)
            q = QuantizationParameters.End(b)
        Tensor.Start(b)
        Tensor.AddShape(b, shape)
        Tensor.AddType(b, _TYPES[t.dtype])
        Tensor.AddName(b, name)
        if t.data is not None:
            Tensor.AddBuffer(b, next_buf)
            next_buf += 1
        if q is not None:
            Tensor.AddQuantization(b, q)
        t_offs.append(Tensor.End(b))
    names = list(dict.fromkeys(o.op for o in ops))
    op_offs = []
    for o in ops:
        opt_type, opt = _options(b, o.op, o.attrs)
        ins = _vector(b, Operator.StartInputsVector, list(o.inputs), "i")
        outs = _vector(b, Operator.StartOutputsVector, list(o.outputs), "i")
        Operator.Start(b)
        Operator.AddOpcodeIndex(b, names.index(o.op))
        Operator.AddInputs(b, ins)
        Operator.AddOutputs(b, outs)
        Operator.AddBuiltinOptionsType(b, opt_type)
        Operator.AddBuiltinOptions(b, opt)
        op_offs.append(Operator.End(b))
    code_offs = []
    for name in names:
        code = getattr(tflite.BuiltinOperator, name)
        OperatorCode.Start(b)
        OperatorCode.AddDeprecatedBuiltinCode(b, min(code, 127))
        OperatorCode.AddBuiltinCode(b, code)
        OperatorCode.AddVersion(b, 2 if name not in ("CONV_2D", "FULLY_CONNECTED") else 3)
        code_offs.append(OperatorCode.End(b))
    tv = _vector(b, SubGraph.StartTensorsVector, t_offs, "o")
    gi = _vector(b, SubGraph.StartInputsVector, list(inputs), "i")
    go = _vector(b, SubGraph.StartOutputsVector, list(outputs), "i")
    ov = _vector(b, SubGraph.StartOperatorsVector, op_offs, "o")
    SubGraph.Start(b)
    SubGraph.AddTensors(b, tv)
    SubGraph.AddInputs(b, gi)
    SubGraph.AddOutputs(b, go)
    SubGraph.AddOperators(b, ov)
    sg = SubGraph.End(b)
    cv = _vector(b, Model.StartOperatorCodesVector, code_offs, "o")
    sv = _vector(b, Model.StartSubgraphsVector, [sg], "o")
    bv = _vector(b, Model.StartBuffersVector, buf_offs, "o")
    desc = b.CreateString("dtpu vector-unit test graph")
    Model.Start(b)
    Model.AddVersion(b, 3)
    Model.AddOperatorCodes(b, cv)
    Model.AddSubgraphs(b, sv)
    Model.AddBuffers(b, bv)
    Model.AddDescription(b, desc)
    b.Finish(Model.End(b), file_identifier=b"TFL3")
    return bytes(b.Output())


def run_cpu(model: bytes, feeds: list[np.ndarray]) -> np.ndarray:
    """The interpreter's output of the one-op graph on `feeds` (TFLite's CPU kernels: the oracle)."""
    from dtpu.tflite import Interpreter
    it = Interpreter(model_content=model)
    it.allocate_tensors()
    for d, x in zip(it.get_input_details(), feeds):
        it.set_tensor(d["index"], x)
    it.invoke()
    return it.get_tensor(it.get_output_details()[0]["index"]).copy()
