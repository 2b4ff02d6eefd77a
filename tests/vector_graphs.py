"""One-operator .tflite graphs (ADD, SUB, MUL, AVERAGE_POOL_2D, MAX_POOL_2D, MEAN) written with the
flatbuffer builder of the ``tflite`` package, so the vector unit's reference twins can be checked
against the interpreter itself without TensorFlow: the converter is not installed here, and the
zoo's models hold these operators only at a few fixed shapes and scales.
"""
from __future__ import annotations

import importlib
from dataclasses import dataclass

import flatbuffers
import numpy as np
import tflite

# the package's __init__ rebinds each name to its class: the builder functions live in the modules
(AddOptions, Buffer, Model, MulOptions, Operator, OperatorCode, Pool2DOptions, QuantizationParameters,
 ReducerOptions, SubGraph, SubOptions, Tensor) = (
    importlib.import_module(f"tflite.{n}") for n in (
        "AddOptions", "Buffer", "Model", "MulOptions", "Operator", "OperatorCode", "Pool2DOptions",
        "QuantizationParameters", "ReducerOptions", "SubGraph", "SubOptions", "Tensor"))

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
    if op == "MEAN":
        ReducerOptions.Start(b)
        ReducerOptions.AddKeepDims(b, bool(attrs.get("keep_dims", True)))
        return tflite.BuiltinOptions.ReducerOptions, ReducerOptions.End(b)
    raise ValueError(f"no options for {op!r}")


def one_op_model(op: str, inputs: list[T], output: T, **attrs) -> bytes:
    """The flatbuffer of a graph holding one `op` node: non-constant `inputs` are the graph's
    inputs (in order), `output` its output."""
    b = flatbuffers.Builder(1024)
    tensors = list(inputs) + [output]
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
        name = b.CreateString(f"t{i}")
        shape = _vector(b, Tensor.StartShapeVector, list(t.shape), "i")
        q = None
        if t.scale is not None:
            sc = _vector(b, QuantizationParameters.StartScaleVector, [t.scale], "f")
            zp = _vector(b, QuantizationParameters.StartZeroPointVector, [t.zero_point], "l")
            QuantizationParameters.Start(b)
            QuantizationParameters.AddScale(b, sc)
            QuantizationParameters.AddZeroPoint(b, zp)
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
    opt_type, opt = _options(b, op, attrs)
    ins = _vector(b, Operator.StartInputsVector, list(range(len(inputs))), "i")
    outs = _vector(b, Operator.StartOutputsVector, [len(inputs)], "i")
    Operator.Start(b)
    Operator.AddOpcodeIndex(b, 0)
    Operator.AddInputs(b, ins)
    Operator.AddOutputs(b, outs)
    Operator.AddBuiltinOptionsType(b, opt_type)
    Operator.AddBuiltinOptions(b, opt)
    op_off = Operator.End(b)
    code = getattr(tflite.BuiltinOperator, op)
    OperatorCode.Start(b)
    OperatorCode.AddDeprecatedBuiltinCode(b, min(code, 127))
    OperatorCode.AddBuiltinCode(b, code)
    OperatorCode.AddVersion(b, 2)
    code_off = OperatorCode.End(b)
    graph_ins = [i for i, t in enumerate(inputs) if t.data is None]
    tv = _vector(b, SubGraph.StartTensorsVector, t_offs, "o")
    gi = _vector(b, SubGraph.StartInputsVector, graph_ins, "i")
    go = _vector(b, SubGraph.StartOutputsVector, [len(inputs)], "i")
    ov = _vector(b, SubGraph.StartOperatorsVector, [op_off], "o")
    SubGraph.Start(b)
    SubGraph.AddTensors(b, tv)
    SubGraph.AddInputs(b, gi)
    SubGraph.AddOutputs(b, go)
    SubGraph.AddOperators(b, ov)
    sg = SubGraph.End(b)
    cv = _vector(b, Model.StartOperatorCodesVector, [code_off], "o")
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
