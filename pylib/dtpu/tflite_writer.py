"""Write small .tflite graphs with the flatbuffer builder of the ``tflite`` package.

Why the project writes TFLite files at all: TensorFlow's converter is not installed (and not
needed at run time), yet three things need a graph the interpreter can run. The ISRO compiler
computes an int8 element-wise function's 256 outputs by running a one-op graph
(:func:`dtpu.unary_tables.int8_table`: exact by construction, whatever arithmetic the kernel uses);
tests build small networks (a UNet, a detection head, squeeze-excite, 1-D nets) whose reference is
the interpreter itself; and the ground quantizer (:mod:`dtpu.isro.quantize`) states its result as
a standard int8 model, so the interpreter's CPU kernels are the oracle its bundle is checked
against and any TFLite tool reads the file.

A graph is a list of :class:`Tensor` (constants carry ``data``) and a list of :class:`Node`
naming them by index; :func:`write` returns the flatbuffer bytes. :class:`GraphWriter` collects
the same two lists one call at a time, for code that builds a graph layer by layer. Only one
subgraph, builtin operators, per-tensor or per-axis affine quantization and constant buffers are
written: what those users need.
"""
from __future__ import annotations

import importlib
from dataclasses import dataclass, field

import flatbuffers
import numpy as np
import tflite

_MODULES = ("Buffer", "Model", "Operator", "OperatorCode", "QuantizationParameters", "SubGraph", "Tensor",
            "AddOptions", "MulOptions", "SubOptions", "Pool2DOptions", "ReducerOptions", "Conv2DOptions",
            "DepthwiseConv2DOptions", "FullyConnectedOptions", "ConcatenationOptions",
            "ResizeBilinearOptions", "ResizeNearestNeighborOptions", "TransposeConvOptions",
            "ReshapeOptions", "SqueezeOptions", "ExpandDimsOptions", "SoftmaxOptions", "PadOptions",
            "LeakyReluOptions", "ShapeOptions", "StridedSliceOptions", "PackOptions", "SplitOptions")
# the package's __init__ rebinds each name to its class: the builder functions live in the modules
_M = {n: importlib.import_module(f"tflite.{n}") for n in _MODULES}

TYPES = {"float32": tflite.TensorType.FLOAT32, "int8": tflite.TensorType.INT8,
         "uint8": tflite.TensorType.UINT8, "int32": tflite.TensorType.INT32,
         "int64": tflite.TensorType.INT64}
ACTIVATIONS = {"none": 0, "relu": 1, "relu_n1_to_1": 2, "relu6": 3}
PADDINGS = {"SAME": 0, "VALID": 1}
# operator versions as the 2.14 converter writes them for int8 kernels (the interpreter's resolver
# accepts each at these versions, and the quantizer's files then match the converter's); 1 for the rest
VERSIONS = {"CONV_2D": 3, "DEPTHWISE_CONV_2D": 3, "FULLY_CONNECTED": 4, "MAX_POOL_2D": 2,
            "AVERAGE_POOL_2D": 2, "MEAN": 2, "ADD": 2, "PAD": 2, "RESHAPE": 1, "SOFTMAX": 2,
            "LOGISTIC": 2, "LEAKY_RELU": 2, "RELU": 2, "RELU6": 2}
# options tables with no field, and with one float field (name, field, default; None: required)
_EMPTY_OPTIONS = {"EXPAND_DIMS": "ExpandDimsOptions", "PAD": "PadOptions"}
_SCALAR_OPTIONS = {"SOFTMAX": ("SoftmaxOptions", "beta", 1.0), "LEAKY_RELU": ("LeakyReluOptions", "alpha", None)}
_OPTIONLESS = ("LOGISTIC", "TANH", "HARD_SWISH", "RELU", "RELU6", "RELU_N1_TO_1", "QUANTIZE", "DEQUANTIZE",
               "EXP", "ABS", "FLOOR", "SQUARE")


@dataclass
class Tensor:
    """A tensor: shape, dtype name, quantization (per-tensor, or per-channel lists along
    `axis`); `data` makes it a constant."""

    shape: tuple
    dtype: str = "int8"
    scale: float | list | None = None
    zero_point: int | list = 0
    data: np.ndarray | None = None
    name: str = ""
    axis: int = 0


@dataclass
class Node:
    """One operator: its opcode name, input and output tensor indices (-1: an omitted optional
    input) and its options (activation, padding, stride, ...)."""

    opcode: str
    inputs: list[int]
    outputs: list[int]
    options: dict = field(default_factory=dict)


def _vector(b, start, values, kind):
    start(b, len(values))
    for v in reversed(values):
        {"i": b.PrependInt32, "f": b.PrependFloat32, "l": b.PrependInt64,
         "o": b.PrependUOffsetTRelative}[kind](v)
    return b.EndVector()


def _padding(options: dict) -> int:
    pad = str(options.get("padding", "VALID"))
    if pad.upper() not in PADDINGS:
        raise ValueError(f"padding {pad!r}; accepted: {', '.join(PADDINGS)} (either case)")
    return PADDINGS[pad.upper()]


def _options(b, node: Node):
    """(BuiltinOptions type, offset) of a node; (0, None) for options-less operators."""
    o, op = node.options, node.opcode
    act = ACTIVATIONS[o.get("activation", "none")]
    BO = tflite.BuiltinOptions
    if op in ("CONV_2D", "DEPTHWISE_CONV_2D"):
        m = _M["Conv2DOptions" if op == "CONV_2D" else "DepthwiseConv2DOptions"]
        m.Start(b)
        m.AddPadding(b, _padding(o))
        m.AddStrideH(b, o.get("stride", (1, 1))[0])
        m.AddStrideW(b, o.get("stride", (1, 1))[1])
        m.AddDilationHFactor(b, o.get("dilation", (1, 1))[0])
        m.AddDilationWFactor(b, o.get("dilation", (1, 1))[1])
        if op == "DEPTHWISE_CONV_2D":
            m.AddDepthMultiplier(b, o.get("depth_multiplier", 1))
        m.AddFusedActivationFunction(b, act)
        return (BO.Conv2DOptions if op == "CONV_2D" else BO.DepthwiseConv2DOptions), m.End(b)
    if op == "TRANSPOSE_CONV":
        m = _M["TransposeConvOptions"]
        m.Start(b)
        m.AddPadding(b, _padding(o))
        m.AddStrideH(b, o.get("stride", (1, 1))[0])
        m.AddStrideW(b, o.get("stride", (1, 1))[1])
        m.AddFusedActivationFunction(b, act)
        return BO.TransposeConvOptions, m.End(b)
    if op == "FULLY_CONNECTED":
        m = _M["FullyConnectedOptions"]
        m.Start(b)
        m.AddFusedActivationFunction(b, act)
        return BO.FullyConnectedOptions, m.End(b)
    if op in ("AVERAGE_POOL_2D", "MAX_POOL_2D"):
        m = _M["Pool2DOptions"]
        m.Start(b)
        m.AddPadding(b, _padding(o))
        m.AddStrideH(b, o["stride"][0])
        m.AddStrideW(b, o["stride"][1])
        m.AddFilterHeight(b, o["filter"][0])
        m.AddFilterWidth(b, o["filter"][1])
        m.AddFusedActivationFunction(b, act)
        return BO.Pool2DOptions, m.End(b)
    if op in ("ADD", "MUL", "SUB"):
        name = {"ADD": "AddOptions", "MUL": "MulOptions", "SUB": "SubOptions"}[op]
        m = _M[name]
        m.Start(b)
        m.AddFusedActivationFunction(b, act)
        return getattr(BO, name), m.End(b)
    if op == "CONCATENATION":
        m = _M["ConcatenationOptions"]
        m.Start(b)
        m.AddAxis(b, o["axis"])
        m.AddFusedActivationFunction(b, act)
        return BO.ConcatenationOptions, m.End(b)
    if op in ("RESIZE_BILINEAR", "RESIZE_NEAREST_NEIGHBOR"):
        m = _M["ResizeBilinearOptions" if op == "RESIZE_BILINEAR" else "ResizeNearestNeighborOptions"]
        m.Start(b)
        m.AddAlignCorners(b, bool(o.get("align_corners", False)))
        m.AddHalfPixelCenters(b, bool(o.get("half_pixel_centers", False)))
        return (BO.ResizeBilinearOptions if op == "RESIZE_BILINEAR" else BO.ResizeNearestNeighborOptions), m.End(b)
    if op == "MEAN":
        m = _M["ReducerOptions"]
        m.Start(b)
        m.AddKeepDims(b, bool(o.get("keep_dims", False)))
        return BO.ReducerOptions, m.End(b)
    if op == "RESHAPE":
        m = _M["ReshapeOptions"]
        shape = _vector(b, m.StartNewShapeVector, list(o["new_shape"]), "i")
        m.Start(b)
        m.AddNewShape(b, shape)
        return BO.ReshapeOptions, m.End(b)
    if op == "SQUEEZE":
        m = _M["SqueezeOptions"]
        dims = _vector(b, m.StartSqueezeDimsVector, list(o["squeeze_dims"]), "i")
        m.Start(b)
        m.AddSqueezeDims(b, dims)
        return BO.SqueezeOptions, m.End(b)
    if op == "SHAPE":
        m = _M["ShapeOptions"]
        m.Start(b)
        m.AddOutType(b, TYPES[o.get("out_type", "int32")])
        return BO.ShapeOptions, m.End(b)
    if op == "STRIDED_SLICE":
        m = _M["StridedSliceOptions"]
        m.Start(b)
        for key in ("begin_mask", "end_mask", "ellipsis_mask", "new_axis_mask", "shrink_axis_mask"):
            getattr(m, "Add" + "".join(w.capitalize() for w in key.split("_")))(b, int(o.get(key, 0)))
        return BO.StridedSliceOptions, m.End(b)
    if op == "PACK":
        m = _M["PackOptions"]
        m.Start(b)
        m.AddValuesCount(b, int(o["values_count"]))
        m.AddAxis(b, int(o.get("axis", 0)))
        return BO.PackOptions, m.End(b)
    if op == "SPLIT":
        m = _M["SplitOptions"]
        m.Start(b)
        m.AddNumSplits(b, int(o["num_splits"]))
        return BO.SplitOptions, m.End(b)
    if op in _EMPTY_OPTIONS:
        name = _EMPTY_OPTIONS[op]
        _M[name].Start(b)
        return getattr(BO, name), _M[name].End(b)
    if op in _SCALAR_OPTIONS:
        name, field_name, default = _SCALAR_OPTIONS[op]
        m = _M[name]
        m.Start(b)
        getattr(m, "Add" + field_name.capitalize())(b, float(o[field_name] if default is None
                                                            else o.get(field_name, default)))
        return getattr(BO, name), m.End(b)
    if op in _OPTIONLESS:
        return 0, None
    raise ValueError(f"no options writer for {op!r}; accepted: CONV_2D, DEPTHWISE_CONV_2D, TRANSPOSE_CONV, "
                     f"FULLY_CONNECTED, pools, ADD, MUL, SUB, CONCATENATION, RESIZE_*, MEAN, RESHAPE, SQUEEZE, "
                     f"SHAPE, STRIDED_SLICE, PACK, SPLIT, "
                     f"EXPAND_DIMS, SOFTMAX, PAD, LEAKY_RELU and the options-less {', '.join(_OPTIONLESS)}")


def _quantization(b, t: Tensor):
    M = _M["QuantizationParameters"]
    scales = list(np.atleast_1d(np.asarray(t.scale, dtype=np.float64)))
    zps = list(np.atleast_1d(np.asarray(t.zero_point, dtype=np.int64)))
    if len(zps) == 1 and len(scales) > 1:
        zps = zps * len(scales)
    sc = _vector(b, M.StartScaleVector, [float(v) for v in scales], "f")
    zp = _vector(b, M.StartZeroPointVector, [int(v) for v in zps], "l")
    M.Start(b)
    M.AddScale(b, sc)
    M.AddZeroPoint(b, zp)
    M.AddQuantizedDimension(b, t.axis)
    return M.End(b)


def write(tensors: list[Tensor], nodes: list[Node], inputs: list[int], outputs: list[int],
          description: str = "dtpu test graph") -> bytes:
    """The flatbuffer of one subgraph holding `nodes` over `tensors`."""
    b = flatbuffers.Builder(4096)
    B, T, Op, OC, SG, Mo = (_M[n] for n in ("Buffer", "Tensor", "Operator", "OperatorCode", "SubGraph", "Model"))
    buf_offs, buffer_of = [], {}
    B.Start(b)
    buf_offs.append(B.End(b))                       # buffer 0: the empty sentinel
    for i, t in enumerate(tensors):
        if t.data is None:
            continue
        raw = np.ascontiguousarray(t.data).tobytes()
        b.StartVector(1, len(raw), 16)
        b.head = b.head - len(raw)                  # one copy: a byte-by-byte prepend is slow on weights
        b.Bytes[b.head:b.head + len(raw)] = raw
        vec = b.EndVector()
        B.Start(b)
        B.AddData(b, vec)
        buffer_of[i] = len(buf_offs)
        buf_offs.append(B.End(b))
    t_offs = []
    for i, t in enumerate(tensors):
        name = b.CreateString(t.name or f"t{i}")
        shape = _vector(b, T.StartShapeVector, [int(v) for v in t.shape], "i")
        q = _quantization(b, t) if t.scale is not None else None
        T.Start(b)
        T.AddShape(b, shape)
        T.AddType(b, TYPES[t.dtype])
        T.AddName(b, name)
        T.AddBuffer(b, buffer_of.get(i, 0))
        if q is not None:
            T.AddQuantization(b, q)
        t_offs.append(T.End(b))
    codes: list[str] = []
    op_offs = []
    for node in nodes:
        if node.opcode not in codes:
            codes.append(node.opcode)
        opt_type, opt = _options(b, node)
        ins = _vector(b, Op.StartInputsVector, list(node.inputs), "i")
        outs = _vector(b, Op.StartOutputsVector, list(node.outputs), "i")
        Op.Start(b)
        Op.AddOpcodeIndex(b, codes.index(node.opcode))
        Op.AddInputs(b, ins)
        Op.AddOutputs(b, outs)
        if opt is not None:
            Op.AddBuiltinOptionsType(b, opt_type)
            Op.AddBuiltinOptions(b, opt)
        op_offs.append(Op.End(b))
    code_offs = []
    for name in codes:
        code = getattr(tflite.BuiltinOperator, name)
        OC.Start(b)
        OC.AddDeprecatedBuiltinCode(b, min(code, 127))
        OC.AddBuiltinCode(b, code)
        OC.AddVersion(b, VERSIONS.get(name, 1))
        code_offs.append(OC.End(b))
    tv = _vector(b, SG.StartTensorsVector, t_offs, "o")
    gi = _vector(b, SG.StartInputsVector, list(inputs), "i")
    go = _vector(b, SG.StartOutputsVector, list(outputs), "i")
    ov = _vector(b, SG.StartOperatorsVector, op_offs, "o")
    sg_name = b.CreateString("main")
    SG.Start(b)
    SG.AddTensors(b, tv)
    SG.AddInputs(b, gi)
    SG.AddOutputs(b, go)
    SG.AddOperators(b, ov)
    SG.AddName(b, sg_name)
    sg = SG.End(b)
    cv = _vector(b, Mo.StartOperatorCodesVector, code_offs, "o")
    sv = _vector(b, Mo.StartSubgraphsVector, [sg], "o")
    bv = _vector(b, Mo.StartBuffersVector, buf_offs, "o")
    desc = b.CreateString(description)
    Mo.Start(b)
    Mo.AddVersion(b, 3)
    Mo.AddOperatorCodes(b, cv)
    Mo.AddSubgraphs(b, sv)
    Mo.AddBuffers(b, bv)
    Mo.AddDescription(b, desc)
    b.Finish(Mo.End(b), file_identifier=b"TFL3")
    return bytes(b.Output())


class GraphWriter:
    """Collects tensors and operators one call at a time (the quantizer walks a model layer by
    layer and needs each tensor's index as it goes); :meth:`to_bytes` hands both lists to
    :func:`write`."""

    def __init__(self) -> None:
        self.tensors: list[Tensor] = []
        self.nodes: list[Node] = []

    def tensor(self, t: Tensor) -> int:
        """Adds `t`; its index names it in :meth:`op`."""
        if t.dtype not in TYPES:
            raise ValueError(f"tensor {t.name!r}: dtype {t.dtype!r}; accepted: {', '.join(TYPES)}")
        self.tensors.append(t)
        return len(self.tensors) - 1

    def const(self, name: str, data: np.ndarray, dtype: str = "int32", **quantization) -> int:
        """A constant tensor holding `data` cast to `dtype` (`quantization`: scale, zero_point, axis)."""
        if dtype not in TYPES:
            raise ValueError(f"constant {name!r}: dtype {dtype!r}; accepted: {', '.join(TYPES)}")
        data = np.ascontiguousarray(data, dtype=np.dtype(dtype))
        return self.tensor(Tensor(tuple(data.shape), dtype, data=data, name=name, **quantization))

    def op(self, opcode: str, inputs: list[int], outputs: list[int], **options) -> None:
        """Appends an operator now, so an unknown opcode is named where it was asked for."""
        node = Node(opcode, list(inputs), list(outputs), options)
        _options(flatbuffers.Builder(64), node)
        self.nodes.append(node)

    def to_bytes(self, inputs: list[int], outputs: list[int], description: str = "dtpu isro quantizer") -> bytes:
        return write(self.tensors, self.nodes, inputs, outputs, description)
