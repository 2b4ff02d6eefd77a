"""Writes a small int8 TFLite graph with the ``tflite`` package's flatbuffer builder.

The ground quantizer (:mod:`dtpu.isro.quantize`) describes its result as a TFLite model rather
than as chip parameters of its own, for two reasons: the interpreter's CPU kernels then are the
oracle the bundle is checked against (the same front end and the same layer-by-layer
verification as any int8 model), and the operator keeps a standard file any TFLite tool reads.
Only what that quantizer emits is supported: one subgraph, builtin operators, per-tensor or
per-axis affine quantization, constant buffers.
"""
from __future__ import annotations

import importlib
from dataclasses import dataclass, field

import numpy as np

_MODULES = ("Buffer", "Model", "Operator", "OperatorCode", "QuantizationParameters", "SubGraph", "Tensor",
            "Conv2DOptions", "DepthwiseConv2DOptions", "FullyConnectedOptions", "Pool2DOptions",
            "ReducerOptions", "AddOptions", "PadOptions", "ReshapeOptions", "SoftmaxOptions",
            "LeakyReluOptions")

# operator versions as the 2.14 converter writes them for int8 kernels (the interpreter's
# resolver accepts each at these versions)
VERSIONS = {"CONV_2D": 3, "DEPTHWISE_CONV_2D": 3, "FULLY_CONNECTED": 4, "MAX_POOL_2D": 2,
            "AVERAGE_POOL_2D": 2, "MEAN": 2, "ADD": 2, "PAD": 2, "RESHAPE": 1, "SOFTMAX": 2,
            "LOGISTIC": 2, "LEAKY_RELU": 2, "RELU": 2, "RELU6": 2}
ACTIVATIONS = {"none": 0, "relu": 1, "relu_n1_to_1": 2, "relu6": 3}
_TYPES = {"int8": 9, "int32": 2, "float32": 0}      # tflite.TensorType


def _mods():
    # the package's __init__ rebinds each name to its class; the builder functions live in the modules
    return {n: importlib.import_module(f"tflite.{n}") for n in _MODULES}


@dataclass
class QTensor:
    """A tensor of the graph; `data` makes it a constant, `axis` a per-axis quantization."""

    name: str
    shape: tuple[int, ...]
    dtype: str = "int8"
    scale: tuple[float, ...] | None = None
    zero_point: tuple[int, ...] = (0,)
    axis: int = 0
    data: np.ndarray | None = None


@dataclass
class QOp:
    opcode: str
    inputs: list[int]
    outputs: list[int]
    options: dict = field(default_factory=dict)


class GraphWriter:
    """Collects tensors and operators, then :meth:`to_bytes` writes the flatbuffer."""

    def __init__(self) -> None:
        self.tensors: list[QTensor] = []
        self.ops: list[QOp] = []

    def tensor(self, t: QTensor) -> int:
        if t.dtype not in _TYPES:
            raise ValueError(f"tensor {t.name!r}: dtype {t.dtype!r}; accepted: {', '.join(_TYPES)}")
        self.tensors.append(t)
        return len(self.tensors) - 1

    def const(self, name: str, data: np.ndarray, dtype: str = "int32", **q) -> int:
        data = np.ascontiguousarray(data, dtype={"int8": np.int8, "int32": np.int32, "float32": np.float32}[dtype])
        return self.tensor(QTensor(name, tuple(data.shape), dtype, data=data, **q))

    def op(self, opcode: str, inputs: list[int], outputs: list[int], **options) -> None:
        if opcode not in VERSIONS:
            raise ValueError(f"operator {opcode!r}; accepted: {', '.join(VERSIONS)}")
        self.ops.append(QOp(opcode, list(inputs), list(outputs), options))

    # -- serialization --------------------------------------------------------------------------

    def to_bytes(self, inputs: list[int], outputs: list[int], description: str = "dtpu isro quantizer") -> bytes:
        import flatbuffers
        import tflite
        m = _mods()
        b = flatbuffers.Builder(4096)

        def vector(start, values, kind):
            start(b, len(values))
            for v in reversed(values):
                {"i": b.PrependInt32, "f": b.PrependFloat32, "l": b.PrependInt64,
                 "o": b.PrependUOffsetTRelative}[kind](v)
            return b.EndVector()

        buffers = [None] + [t.data for t in self.tensors if t.data is not None]
        buf_offs = []
        for data in buffers:
            vec = None
            if data is not None:
                raw = data.tobytes()
                b.StartVector(1, len(raw), 16)
                b.head = b.head - len(raw)
                b.Bytes[b.head:b.head + len(raw)] = raw
                vec = b.EndVector()
            m["Buffer"].Start(b)
            if vec is not None:
                m["Buffer"].AddData(b, vec)
            buf_offs.append(m["Buffer"].End(b))
        t_offs, next_buf = [], 1
        for t in self.tensors:
            name = b.CreateString(t.name)
            shape = vector(m["Tensor"].StartShapeVector, [int(v) for v in t.shape], "i")
            q = None
            if t.scale is not None:
                qp = m["QuantizationParameters"]
                sc = vector(qp.StartScaleVector, [float(v) for v in t.scale], "f")
                zp = vector(qp.StartZeroPointVector, [int(v) for v in t.zero_point], "l")
                qp.Start(b)
                qp.AddScale(b, sc)
                qp.AddZeroPoint(b, zp)
                qp.AddQuantizedDimension(b, int(t.axis))
                q = qp.End(b)
            m["Tensor"].Start(b)
            m["Tensor"].AddShape(b, shape)
            m["Tensor"].AddType(b, _TYPES[t.dtype])
            m["Tensor"].AddName(b, name)
            m["Tensor"].AddBuffer(b, next_buf if t.data is not None else 0)
            if t.data is not None:
                next_buf += 1
            if q is not None:
                m["Tensor"].AddQuantization(b, q)
            t_offs.append(m["Tensor"].End(b))
        codes = sorted({op.opcode for op in self.ops}, key=[op.opcode for op in self.ops].index)
        op_offs = []
        for op in self.ops:
            opt_type, opt = self._options(b, m, tflite, op)
            ins = vector(m["Operator"].StartInputsVector, op.inputs, "i")
            outs = vector(m["Operator"].StartOutputsVector, op.outputs, "i")
            m["Operator"].Start(b)
            m["Operator"].AddOpcodeIndex(b, codes.index(op.opcode))
            m["Operator"].AddInputs(b, ins)
            m["Operator"].AddOutputs(b, outs)
            if opt_type:
                m["Operator"].AddBuiltinOptionsType(b, opt_type)
                m["Operator"].AddBuiltinOptions(b, opt)
            op_offs.append(m["Operator"].End(b))
        code_offs = []
        for name in codes:
            code = getattr(tflite.BuiltinOperator, name)
            m["OperatorCode"].Start(b)
            m["OperatorCode"].AddDeprecatedBuiltinCode(b, min(code, 127))
            m["OperatorCode"].AddBuiltinCode(b, code)
            m["OperatorCode"].AddVersion(b, VERSIONS[name])
            code_offs.append(m["OperatorCode"].End(b))
        sg_mod = m["SubGraph"]
        tv = vector(sg_mod.StartTensorsVector, t_offs, "o")
        gi = vector(sg_mod.StartInputsVector, list(inputs), "i")
        go = vector(sg_mod.StartOutputsVector, list(outputs), "i")
        ov = vector(sg_mod.StartOperatorsVector, op_offs, "o")
        sg_name = b.CreateString("main")
        sg_mod.Start(b)
        sg_mod.AddTensors(b, tv)
        sg_mod.AddInputs(b, gi)
        sg_mod.AddOutputs(b, go)
        sg_mod.AddOperators(b, ov)
        sg_mod.AddName(b, sg_name)
        sg = sg_mod.End(b)
        mm = m["Model"]
        cv = vector(mm.StartOperatorCodesVector, code_offs, "o")
        sv = vector(mm.StartSubgraphsVector, [sg], "o")
        bv = vector(mm.StartBuffersVector, buf_offs, "o")
        desc = b.CreateString(description)
        mm.Start(b)
        mm.AddVersion(b, 3)
        mm.AddOperatorCodes(b, cv)
        mm.AddSubgraphs(b, sv)
        mm.AddBuffers(b, bv)
        mm.AddDescription(b, desc)
        b.Finish(mm.End(b), file_identifier=b"TFL3")
        return bytes(b.Output())

    @staticmethod
    def _options(b, m, tflite, op: QOp):
        o = op.options
        act = ACTIVATIONS[o.get("activation", "none")]
        pad = {"same": 0, "valid": 1}
        BO = tflite.BuiltinOptions
        if op.opcode == "CONV_2D":
            c = m["Conv2DOptions"]
            c.Start(b)
            c.AddPadding(b, pad[o["padding"]])
            c.AddStrideH(b, o["stride"][0])
            c.AddStrideW(b, o["stride"][1])
            c.AddDilationHFactor(b, o["dilation"][0])
            c.AddDilationWFactor(b, o["dilation"][1])
            c.AddFusedActivationFunction(b, act)
            return BO.Conv2DOptions, c.End(b)
        if op.opcode == "DEPTHWISE_CONV_2D":
            c = m["DepthwiseConv2DOptions"]
            c.Start(b)
            c.AddPadding(b, pad[o["padding"]])
            c.AddStrideH(b, o["stride"][0])
            c.AddStrideW(b, o["stride"][1])
            c.AddDilationHFactor(b, o["dilation"][0])
            c.AddDilationWFactor(b, o["dilation"][1])
            c.AddDepthMultiplier(b, o["depth_multiplier"])
            c.AddFusedActivationFunction(b, act)
            return BO.DepthwiseConv2DOptions, c.End(b)
        if op.opcode == "FULLY_CONNECTED":
            c = m["FullyConnectedOptions"]
            c.Start(b)
            c.AddFusedActivationFunction(b, act)
            return BO.FullyConnectedOptions, c.End(b)
        if op.opcode in ("MAX_POOL_2D", "AVERAGE_POOL_2D"):
            c = m["Pool2DOptions"]
            c.Start(b)
            c.AddPadding(b, pad[o["padding"]])
            c.AddStrideH(b, o["stride"][0])
            c.AddStrideW(b, o["stride"][1])
            c.AddFilterHeight(b, o["filter"][0])
            c.AddFilterWidth(b, o["filter"][1])
            c.AddFusedActivationFunction(b, act)
            return BO.Pool2DOptions, c.End(b)
        if op.opcode == "MEAN":
            c = m["ReducerOptions"]
            c.Start(b)
            c.AddKeepDims(b, bool(o.get("keep_dims", False)))
            return BO.ReducerOptions, c.End(b)
        if op.opcode == "ADD":
            c = m["AddOptions"]
            c.Start(b)
            c.AddFusedActivationFunction(b, act)
            return BO.AddOptions, c.End(b)
        if op.opcode == "PAD":
            m["PadOptions"].Start(b)
            return BO.PadOptions, m["PadOptions"].End(b)
        if op.opcode == "RESHAPE":
            c = m["ReshapeOptions"]
            shape = o["new_shape"]
            c.StartNewShapeVector(b, len(shape))
            for v in reversed(shape):
                b.PrependInt32(int(v))
            vec = b.EndVector()
            c.Start(b)
            c.AddNewShape(b, vec)
            return BO.ReshapeOptions, c.End(b)
        if op.opcode == "SOFTMAX":
            c = m["SoftmaxOptions"]
            c.Start(b)
            c.AddBeta(b, float(o.get("beta", 1.0)))
            return BO.SoftmaxOptions, c.End(b)
        if op.opcode == "LEAKY_RELU":
            c = m["LeakyReluOptions"]
            c.Start(b)
            c.AddAlpha(b, float(o["alpha"]))
            return BO.LeakyReluOptions, c.End(b)
        return 0, 0             # LOGISTIC, RELU, RELU6: no options
