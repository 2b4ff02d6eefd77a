"""Read a .tflite file's graph: operators with their builtin options, tensors with quantization
and constant data.

tflite-runtime's Interpreter does not expose builtin options (stride, padding, dilation, fused
activation, depth multiplier), yet tests that check a layer against :mod:`dtpu.reference`, and
tools such as the ISRO compiler, need exactly those. Rather than depend on TensorFlow or on the
``flatbuffers`` package (tflite-runtime depends on neither), this module carries a small
flatbuffer table reader and walks the TFLite schema (tensorflow/lite/schema/schema.fbs, version
3) by field index. It only reads; it never needs generated code.

Flatbuffer layout used here: a table starts with an int32 offset back to its vtable; the vtable
lists, per field index, the field's byte offset inside the table (0 = absent, take the schema
default). Reference fields (tables, vectors, strings) hold a uint32 offset relative to their own
position; vectors and strings start with a uint32 length. A union occupies two field slots: the
type (uint8) then the value (a table reference).
"""
from __future__ import annotations

import struct
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

# schema.fbs enum BuiltinOperator (value -> name), complete up to TFLite 2.14.
BUILTIN_OPERATORS = (
    "ADD", "AVERAGE_POOL_2D", "CONCATENATION", "CONV_2D", "DEPTHWISE_CONV_2D", "DEPTH_TO_SPACE",
    "DEQUANTIZE", "EMBEDDING_LOOKUP", "FLOOR", "FULLY_CONNECTED", "HASHTABLE_LOOKUP",
    "L2_NORMALIZATION", "L2_POOL_2D", "LOCAL_RESPONSE_NORMALIZATION", "LOGISTIC", "LSH_PROJECTION",
    "LSTM", "MAX_POOL_2D", "MUL", "RELU", "RELU_N1_TO_1", "RELU6", "RESHAPE", "RESIZE_BILINEAR",
    "RNN", "SOFTMAX", "SPACE_TO_DEPTH", "SVDF", "TANH", "CONCAT_EMBEDDINGS", "SKIP_GRAM", "CALL",
    "CUSTOM", "EMBEDDING_LOOKUP_SPARSE", "PAD", "UNIDIRECTIONAL_SEQUENCE_RNN", "GATHER",
    "BATCH_TO_SPACE_ND", "SPACE_TO_BATCH_ND", "TRANSPOSE", "MEAN", "SUB", "DIV", "SQUEEZE",
    "UNIDIRECTIONAL_SEQUENCE_LSTM", "STRIDED_SLICE", "BIDIRECTIONAL_SEQUENCE_RNN", "EXP", "TOPK_V2",
    "SPLIT", "LOG_SOFTMAX", "DELEGATE", "BIDIRECTIONAL_SEQUENCE_LSTM", "CAST", "PRELU", "MAXIMUM",
    "ARG_MAX", "MINIMUM", "LESS", "NEG", "PADV2", "GREATER", "GREATER_EQUAL", "LESS_EQUAL", "SELECT",
    "SLICE", "SIN", "TRANSPOSE_CONV", "SPARSE_TO_DENSE", "TILE", "EXPAND_DIMS", "EQUAL", "NOT_EQUAL",
    "LOG", "SUM", "SQRT", "RSQRT", "SHAPE", "POW", "ARG_MIN", "FAKE_QUANT", "REDUCE_PROD",
    "REDUCE_MAX", "PACK", "LOGICAL_OR", "ONE_HOT", "LOGICAL_AND", "LOGICAL_NOT", "UNPACK",
    "REDUCE_MIN", "FLOOR_DIV", "REDUCE_ANY", "SQUARE", "ZEROS_LIKE", "FILL", "FLOOR_MOD", "RANGE",
    "RESIZE_NEAREST_NEIGHBOR", "LEAKY_RELU", "SQUARED_DIFFERENCE", "MIRROR_PAD", "ABS", "SPLIT_V",
    "UNIQUE", "CEIL", "REVERSE_V2", "ADD_N", "GATHER_ND", "COS", "WHERE", "RANK", "ELU",
    "REVERSE_SEQUENCE", "MATRIX_DIAG", "QUANTIZE", "MATRIX_SET_DIAG", "ROUND", "HARD_SWISH", "IF",
    "WHILE", "NON_MAX_SUPPRESSION_V4", "NON_MAX_SUPPRESSION_V5", "SCATTER_ND", "SELECT_V2",
    "DENSIFY", "SEGMENT_SUM", "BATCH_MATMUL", "PLACEHOLDER_FOR_GREATER_OP_CODES", "CUMSUM",
    "CALL_ONCE", "BROADCAST_TO", "RFFT2D", "CONV_3D", "IMAG", "REAL", "COMPLEX_ABS", "HASHTABLE",
    "HASHTABLE_FIND", "HASHTABLE_IMPORT", "HASHTABLE_SIZE", "REDUCE_ALL", "CONV_3D_TRANSPOSE",
    "VAR_HANDLE", "READ_VARIABLE", "ASSIGN_VARIABLE", "BROADCAST_ARGS", "RANDOM_STANDARD_NORMAL",
    "BUCKETIZE", "RANDOM_UNIFORM", "MULTINOMIAL", "GELU", "DYNAMIC_UPDATE_SLICE", "RELU_0_TO_1",
    "UNSORTED_SEGMENT_PROD", "UNSORTED_SEGMENT_MAX", "UNSORTED_SEGMENT_SUM", "ATAN2",
    "UNSORTED_SEGMENT_MIN", "SIGN", "BITCAST", "BITWISE_XOR", "RIGHT_SHIFT",
)

# schema.fbs enum TensorType -> (name, numpy dtype or None where numpy has no equivalent)
TENSOR_TYPES = {
    0: ("FLOAT32", np.float32), 1: ("FLOAT16", np.float16), 2: ("INT32", np.int32),
    3: ("UINT8", np.uint8), 4: ("INT64", np.int64), 5: ("STRING", None), 6: ("BOOL", np.bool_),
    7: ("INT16", np.int16), 8: ("COMPLEX64", np.complex64), 9: ("INT8", np.int8),
    10: ("FLOAT64", np.float64), 11: ("COMPLEX128", np.complex128), 12: ("UINT64", np.uint64),
    13: ("RESOURCE", None), 14: ("VARIANT", None), 15: ("UINT32", np.uint32),
    16: ("UINT16", np.uint16), 17: ("INT4", None),
}
ACTIVATIONS = ("NONE", "RELU", "RELU_N1_TO_1", "RELU6", "TANH", "SIGN_BIT")
PADDINGS = ("SAME", "VALID")

# BuiltinOptions union members decoded here: type code -> (name, [(field, index, format,
# default, enum names or None)]). Formats are struct codes; the schema's defaults apply to
# absent fields (a writer omits fields equal to their default).
_OPTIONS = {
    1: ("Conv2DOptions", [("padding", 0, "b", 0, PADDINGS), ("stride_w", 1, "i", 0, None),
                          ("stride_h", 2, "i", 0, None),
                          ("fused_activation_function", 3, "b", 0, ACTIVATIONS),
                          ("dilation_w_factor", 4, "i", 1, None), ("dilation_h_factor", 5, "i", 1, None)]),
    2: ("DepthwiseConv2DOptions", [("padding", 0, "b", 0, PADDINGS), ("stride_w", 1, "i", 0, None),
                                   ("stride_h", 2, "i", 0, None), ("depth_multiplier", 3, "i", 0, None),
                                   ("fused_activation_function", 4, "b", 0, ACTIVATIONS),
                                   ("dilation_w_factor", 5, "i", 1, None),
                                   ("dilation_h_factor", 6, "i", 1, None)]),
    5: ("Pool2DOptions", [("padding", 0, "b", 0, PADDINGS), ("stride_w", 1, "i", 0, None),
                          ("stride_h", 2, "i", 0, None), ("filter_width", 3, "i", 0, None),
                          ("filter_height", 4, "i", 0, None),
                          ("fused_activation_function", 5, "b", 0, ACTIVATIONS)]),
    8: ("FullyConnectedOptions", [("fused_activation_function", 0, "b", 0, ACTIVATIONS),
                                  ("weights_format", 1, "b", 0, ("DEFAULT", "SHUFFLED4x16INT8")),
                                  ("keep_num_dims", 2, "?", False, None),
                                  ("asymmetric_quantize_inputs", 3, "?", False, None)]),
    9: ("SoftmaxOptions", [("beta", 0, "f", 0.0, None)]),
    11: ("AddOptions", [("fused_activation_function", 0, "b", 0, ACTIVATIONS),
                        ("pot_scale_int16", 1, "?", True, None)]),
    21: ("MulOptions", [("fused_activation_function", 0, "b", 0, ACTIVATIONS)]),
    27: ("ReducerOptions", [("keep_dims", 0, "?", False, None)]),
}


class FlatbufferError(ValueError):
    """The bytes are not a well-formed TFLite flatbuffer (truncated, wrong offsets, ...)."""


class _Reader:
    """Bounds-checked access to flatbuffer tables in one byte buffer."""

    def __init__(self, buf: bytes) -> None:
        self.buf = buf

    def _unpack(self, fmt: str, pos: int):
        size = struct.calcsize("<" + fmt)
        if pos < 0 or pos + size > len(self.buf):
            raise FlatbufferError(f"read of {size} bytes at {pos} outside a {len(self.buf)}-byte file")
        return struct.unpack_from("<" + fmt, self.buf, pos)[0]

    def root(self) -> int:
        return self._unpack("I", 0)

    def field_pos(self, table: int, index: int) -> int | None:
        vtable = table - self._unpack("i", table)
        vt_size = self._unpack("H", vtable)
        slot = 4 + 2 * index
        if slot + 2 > vt_size:
            return None  # written by an older schema: field absent
        off = self._unpack("H", vtable + slot)
        return table + off if off else None

    def scalar(self, table: int, index: int, fmt: str, default):
        pos = self.field_pos(table, index)
        return default if pos is None else self._unpack(fmt, pos)

    def _deref(self, pos: int) -> int:
        return pos + self._unpack("I", pos)

    def table(self, table: int, index: int) -> int | None:
        pos = self.field_pos(table, index)
        return None if pos is None else self._deref(pos)

    def _vector(self, table: int, index: int) -> tuple[int, int] | None:
        pos = self.field_pos(table, index)
        if pos is None:
            return None
        start = self._deref(pos)
        return start + 4, self._unpack("I", start)

    def tables(self, table: int, index: int) -> list[int]:
        vec = self._vector(table, index)
        if vec is None:
            return []
        start, n = vec
        if start + 4 * n > len(self.buf):
            raise FlatbufferError(f"vector of {n} tables at {start} runs past the end of the file")
        return [self._deref(start + 4 * i) for i in range(n)]

    def array(self, table: int, index: int, dtype) -> np.ndarray | None:
        vec = self._vector(table, index)
        if vec is None:
            return None
        start, n = vec
        dtype = np.dtype(dtype).newbyteorder("<")
        end = start + n * dtype.itemsize
        if end > len(self.buf):
            raise FlatbufferError(f"vector of {n} x {dtype} at {start} runs past the end of the file")
        return np.frombuffer(self.buf, dtype=dtype, count=n, offset=start)

    def string(self, table: int, index: int) -> str | None:
        raw = self.array(table, index, np.uint8)
        return None if raw is None else raw.tobytes().decode("utf-8", errors="replace")


@dataclass(frozen=True)
class Quantization:
    """A tensor's affine quantization; per channel along `quantized_dimension` when len(scale) > 1."""

    scale: np.ndarray            # float32, as stored (TFLite computes multipliers from these)
    zero_point: np.ndarray       # int64
    quantized_dimension: int = 0
    min: np.ndarray | None = None
    max: np.ndarray | None = None

    @property
    def per_channel(self) -> bool:
        return self.scale.size > 1


@dataclass
class Tensor:
    index: int
    name: str
    shape: tuple[int, ...]
    type_name: str               # TensorType name, e.g. "INT8"
    dtype: np.dtype | None       # None for types numpy cannot hold (STRING, INT4, ...)
    buffer: int
    quantization: Quantization | None
    data: np.ndarray | None      # constant contents (read-only view), None for activations
    is_variable: bool = False
    shape_signature: tuple[int, ...] | None = None

    @property
    def is_constant(self) -> bool:
        return self.data is not None


@dataclass
class Operator:
    index: int
    opcode: str                  # builtin name, or "CUSTOM"
    version: int
    inputs: tuple[int, ...]      # tensor indices; -1 marks an omitted optional input
    outputs: tuple[int, ...]
    options_type: str            # BuiltinOptions member name, "NONE" if absent
    options: dict[str, Any]      # decoded fields (empty for option types not decoded here)
    custom_code: str | None = None


@dataclass
class Subgraph:
    name: str
    tensors: list[Tensor]
    operators: list[Operator]
    inputs: tuple[int, ...]
    outputs: tuple[int, ...]

    def tensor(self, index: int) -> Tensor | None:
        """The tensor at `index`, None for an omitted optional input (-1)."""
        return None if index < 0 else self.tensors[index]


@dataclass
class Model:
    version: int
    description: str | None
    subgraphs: list[Subgraph]
    operator_codes: list[tuple[str, int]] = field(default_factory=list)  # (name, version)

    @property
    def main(self) -> Subgraph:
        return self.subgraphs[0]

    def operators(self, *opcodes: str) -> list[Operator]:
        """Operators of the main subgraph, in execution order, optionally only these opcodes."""
        return [op for op in self.main.operators if not opcodes or op.opcode in opcodes]


def _opcode_name(code: int) -> str:
    return BUILTIN_OPERATORS[code] if 0 <= code < len(BUILTIN_OPERATORS) else f"BUILTIN_{code}"


def _read_options(r: _Reader, op_table: int) -> tuple[str, dict[str, Any]]:
    type_code = r.scalar(op_table, 3, "B", 0)
    if type_code == 0:
        return "NONE", {}
    if type_code not in _OPTIONS:
        return f"BuiltinOptions_{type_code}", {}
    name, fields = _OPTIONS[type_code]
    table = r.table(op_table, 4)
    out: dict[str, Any] = {}
    for key, index, fmt, default, names in fields:
        value = default if table is None else r.scalar(table, index, fmt, default)
        if names is not None:
            value = names[value] if 0 <= value < len(names) else f"UNKNOWN_{value}"
        out[key] = value
    return name, out


def _read_quantization(r: _Reader, table: int | None) -> Quantization | None:
    if table is None:
        return None
    scale = r.array(table, 2, np.float32)
    zero_point = r.array(table, 3, np.int64)
    if scale is None or scale.size == 0:
        return None  # min/max only (or empty): the tensor is not affine-quantized
    if zero_point is None or zero_point.size == 0:
        zero_point = np.zeros(scale.size, np.int64)
    return Quantization(scale=scale.copy(), zero_point=zero_point.astype(np.int64),
                        quantized_dimension=r.scalar(table, 6, "i", 0),
                        min=r.array(table, 0, np.float32), max=r.array(table, 1, np.float32))


def _buffer_bytes(r: _Reader, buf_table: int) -> memoryview | None:
    data = r._vector(buf_table, 0)
    if data is not None and data[1] > 0:
        start, n = data
        if start + n > len(r.buf):
            raise FlatbufferError("buffer data runs past the end of the file")
        return memoryview(r.buf)[start:start + n]
    # Models over 2 GiB keep buffers after the flatbuffer: offset/size from the file start.
    offset, size = r.scalar(buf_table, 1, "Q", 0), r.scalar(buf_table, 2, "Q", 0)
    if offset > 1 and size > 0:
        if offset + size > len(r.buf):
            raise FlatbufferError("external buffer runs past the end of the file")
        return memoryview(r.buf)[offset:offset + size]
    return None


def _read_tensor(r: _Reader, index: int, table: int, buffers: list[int]) -> Tensor:
    shape = r.array(table, 0, np.int32)
    type_code = r.scalar(table, 1, "b", 0)
    type_name, dtype = TENSOR_TYPES.get(type_code, (f"TYPE_{type_code}", None))
    buffer = r.scalar(table, 2, "I", 0)
    shape_t = tuple(int(d) for d in shape) if shape is not None else ()
    data = None
    if 0 < buffer < len(buffers) and dtype is not None:
        raw = _buffer_bytes(r, buffers[buffer])
        if raw is not None:
            count = int(np.prod(shape_t)) if shape_t else 1
            arr = np.frombuffer(raw, dtype=np.dtype(dtype).newbyteorder("<"))
            if arr.size != count:
                raise FlatbufferError(f"tensor {index}: buffer holds {arr.size} elements, shape "
                                      f"{shape_t} needs {count}")
            data = arr.reshape(shape_t)
    sig = r.array(table, 7, np.int32)
    return Tensor(index=index, name=r.string(table, 3) or "", shape=shape_t, type_name=type_name,
                  dtype=None if dtype is None else np.dtype(dtype), buffer=buffer,
                  quantization=_read_quantization(r, r.table(table, 4)), data=data,
                  is_variable=bool(r.scalar(table, 5, "?", False)),
                  shape_signature=None if sig is None else tuple(int(d) for d in sig))


def parse(buf: bytes) -> Model:
    """Parse the bytes of a .tflite file."""
    buf = bytes(buf)
    if len(buf) < 8:
        raise FlatbufferError("file too short to be a TFLite model")
    if buf[4:8] != b"TFL3":
        raise FlatbufferError(f"file identifier is {buf[4:8]!r}, not b'TFL3': not a TFLite model")
    r = _Reader(buf)
    try:
        root = r.root()
        codes = []
        for t in r.tables(root, 1):
            deprecated = r.scalar(t, 0, "b", 0)
            extended = r.scalar(t, 3, "i", 0)
            # Codes above 127 live only in builtin_code; older files only fill the deprecated one.
            codes.append((_opcode_name(max(deprecated, extended)), r.scalar(t, 2, "i", 1),
                          r.string(t, 1)))
        buffers = r.tables(root, 4)
        subgraphs = []
        for sg in r.tables(root, 2):
            tensors = [_read_tensor(r, i, t, buffers) for i, t in enumerate(r.tables(sg, 0))]
            ops = []
            for i, t in enumerate(r.tables(sg, 3)):
                code_index = r.scalar(t, 0, "I", 0)
                if code_index >= len(codes):
                    raise FlatbufferError(f"operator {i} uses opcode index {code_index} of {len(codes)}")
                name, version, custom = codes[code_index]
                options_type, options = _read_options(r, t)
                ins = r.array(t, 1, np.int32)
                outs = r.array(t, 2, np.int32)
                ops.append(Operator(index=i, opcode=name, version=version,
                                    inputs=tuple(int(v) for v in (ins if ins is not None else ())),
                                    outputs=tuple(int(v) for v in (outs if outs is not None else ())),
                                    options_type=options_type, options=options, custom_code=custom))
            sg_in, sg_out = r.array(sg, 1, np.int32), r.array(sg, 2, np.int32)
            subgraphs.append(Subgraph(name=r.string(sg, 4) or "", tensors=tensors, operators=ops,
                                      inputs=tuple(int(v) for v in (sg_in if sg_in is not None else ())),
                                      outputs=tuple(int(v) for v in (sg_out if sg_out is not None else ()))))
        if not subgraphs:
            raise FlatbufferError("model has no subgraph")
        return Model(version=r.scalar(root, 0, "I", 0), description=r.string(root, 3),
                     subgraphs=subgraphs, operator_codes=[(n, v) for n, v, _ in codes])
    except struct.error as exc:  # pragma: no cover - _unpack checks bounds first
        raise FlatbufferError(str(exc)) from None


def load(path: str | Path) -> Model:
    """Read and parse a .tflite file."""
    return parse(Path(path).read_bytes())


# ---------------------------------------------------------------------------------------------
# From an operator to the shared node description


CONV_OPCODES = ("CONV_2D", "DEPTHWISE_CONV_2D", "FULLY_CONNECTED")


def _data_mode(x: Tensor, w: Tensor, bias: Tensor | None):
    from dtpu.spec import DataMode

    types = (x.type_name, w.type_name)
    if types == ("FLOAT32", "FLOAT32"):
        return DataMode.FLOAT32
    if types == ("INT8", "INT8"):
        return DataMode.INT8
    if types == ("UINT8", "UINT8"):
        return DataMode.UINT8
    if types == ("INT16", "INT8"):
        return DataMode.INT16X8
    raise ValueError(f"no DataMode for activations {x.type_name} with weights {w.type_name}"
                     + (" (hybrid kernel)" if x.type_name == "FLOAT32" else ""))


def _quant(t: Tensor):
    from dtpu.spec import Quant

    q = t.quantization
    if q is None:
        raise ValueError(f"tensor {t.name!r} is not quantized")
    return Quant(tuple(float(s) for s in q.scale), tuple(int(z) for z in q.zero_point))


def conv_spec(subgraph: Subgraph, op: Operator, *, filters: np.ndarray | None = None,
              bias: np.ndarray | None = None):
    """(ConvSpec, filters, bias) of a CONV_2D / DEPTHWISE_CONV_2D / FULLY_CONNECTED operator.

    Filters and bias come from the constant buffers; pass `filters` / `bias` when they are
    computed at run time (e.g. float16 weights and bias behind DEQUANTIZE ops). FULLY_CONNECTED inputs are flattened
    to (N, 1, 1, K) with filters (O, 1, 1, K), the shape :mod:`dtpu.reference` expects.
    """
    from dtpu.spec import Activation, ConvSpec, DataMode, OpKind, Padding

    if op.opcode not in CONV_OPCODES:
        raise ValueError(f"operator {op.index} is {op.opcode}; expected one of {', '.join(CONV_OPCODES)}")
    x = subgraph.tensor(op.inputs[0])
    w = subgraph.tensor(op.inputs[1])
    b = subgraph.tensor(op.inputs[2]) if len(op.inputs) > 2 else None
    w_data = filters if filters is not None else w.data
    if w_data is None:
        raise ValueError(f"operator {op.index}: filter tensor {w.name!r} is not constant; pass filters=")
    mode = _data_mode(x, w, b)
    opts = op.options
    kind = OpKind(op.opcode.lower().replace("conv_2d", "conv2d"))
    if kind is OpKind.FULLY_CONNECTED:
        k = w.shape[-1]
        n = int(np.prod(x.shape)) // k
        input_shape, filter_shape = (n, 1, 1, k), (w.shape[0], 1, 1, k)
        w_data = np.asarray(w_data).reshape(filter_shape)
        geometry: dict[str, Any] = {}
    else:
        input_shape, filter_shape = tuple(x.shape), tuple(w.shape)
        geometry = dict(stride=(opts["stride_h"], opts["stride_w"]),
                        dilation=(opts["dilation_h_factor"], opts["dilation_w_factor"]),
                        padding=Padding(opts["padding"].lower()))
        if kind is OpKind.DEPTHWISE_CONV_2D:
            # TFLite derives the multiplier from the shapes (the option may be 0 in old files).
            geometry["depth_multiplier"] = filter_shape[3] // input_shape[3]
    quant = {}
    if mode is not DataMode.FLOAT32:
        quant = dict(input_q=_quant(x), filter_q=_quant(w),
                     output_q=_quant(subgraph.tensor(op.outputs[0])))
    spec = ConvSpec(kind=kind, mode=mode, input_shape=input_shape, filter_shape=filter_shape,
                    activation=Activation(opts["fused_activation_function"].lower()),
                    has_bias=b is not None, name=subgraph.tensor(op.outputs[0]).name,
                    **geometry, **quant)
    if b is not None and bias is None:
        bias = b.data
    if b is not None and bias is None:
        raise ValueError(f"operator {op.index}: bias tensor {b.name!r} is not constant")
    return spec, np.asarray(w_data), bias
