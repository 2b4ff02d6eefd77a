"""Read TFLite's graph structures (declared in delegate/dtpu_abi.h) into plain Python objects.

Everything here runs inside a callback from the C glue, with a cffi ``ffi`` for the library's
declarations. Graph functions (GetExecutionPlan, GetNodeAndRegistration) are only valid during
the delegate's Prepare and a kernel's init, so what later stages need is copied out here.
"""
from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any

import numpy as np

# TfLiteType codes (dtpu_abi.h) -> names used in messages and reports.
TYPE_NAMES = {
    0: "notype", 1: "float32", 2: "int32", 3: "uint8", 4: "int64", 5: "string", 6: "bool",
    7: "int16", 8: "complex64", 9: "int8", 10: "float16", 11: "float64", 12: "complex128",
    13: "uint64", 14: "resource", 15: "variant", 16: "uint32", 17: "uint16", 18: "int4",
    19: "bfloat16",
}
NUMPY_TYPES = {
    "float32": np.float32, "int32": np.int32, "uint8": np.uint8, "int64": np.int64,
    "int16": np.int16, "int8": np.int8, "float16": np.float16, "float64": np.float64,
    "uint64": np.uint64, "uint32": np.uint32, "uint16": np.uint16, "bool": np.bool_,
}
OP_NAMES = {3: "CONV_2D", 4: "DEPTHWISE_CONV_2D", 6: "DEQUANTIZE", 9: "FULLY_CONNECTED", 51: "DELEGATE"}
MMAP_RO = 1          # kTfLiteMmapRo: a constant in the model's buffer
AFFINE = 1           # kTfLiteAffineQuantization
OPTIONAL_TENSOR = -1
NAME_LIMIT = 256     # bytes of a tensor name read (a damaged model's name may be unterminated)

# dtpu.so's dtpu_read_string (set by glue.install): names are read through it, never strlen().
_read_string = None


def install_string_reader(lib) -> None:
    global _read_string
    _read_string = lib.dtpu_read_string


def c_string(ffi, pointer, fallback: str) -> str:
    """A C string that may point anywhere (a damaged model's tensor name), or `fallback`.

    TFLite stores a tensor's name pointer into the flatbuffer without reading it, so in a model
    the CPU interpreter runs fine it can point past the file; ffi.string() would then fault.
    dtpu_read_string copies at most NAME_LIMIT bytes and reports an unreadable source instead.
    """
    if pointer == ffi.NULL or _read_string is None:
        return fallback
    buf = ffi.new("char[]", NAME_LIMIT)
    if _read_string(pointer, buf, NAME_LIMIT) < 0:
        return fallback
    return ffi.string(buf).decode("utf-8", "replace")


@dataclass(frozen=True)
class TensorInfo:
    index: int
    name: str
    type: str
    shape: tuple[int, ...]
    allocation: int
    has_data: bool
    nbytes: int
    scale: tuple[float, ...] = ()
    zero_point: tuple[int, ...] = ()
    quantized_dimension: int = 0
    sparse: bool = False
    address: int = 0     # where its data is (constants: inside the model's bytes)

    @property
    def constant(self) -> bool:
        return self.allocation == MMAP_RO and self.has_data

    @property
    def quantized(self) -> bool:
        return len(self.scale) > 0

    @property
    def dtype(self) -> np.dtype | None:
        kind = NUMPY_TYPES.get(self.type)
        return None if kind is None else np.dtype(kind)


@dataclass(frozen=True)
class NodeInfo:
    index: int
    builtin_code: int
    version: int
    inputs: tuple[int, ...]
    outputs: tuple[int, ...]
    params: dict[str, Any] | None

    @property
    def op(self) -> str:
        return op_name(self.builtin_code)


def op_name(code: int) -> str:
    """schema.fbs's name of a builtin operator code (BUILTIN_<code> for codes newer than it)."""
    if code in OP_NAMES:
        return OP_NAMES[code]
    from dtpu.tflite_model import BUILTIN_OPERATORS

    return BUILTIN_OPERATORS[code] if 0 <= code < len(BUILTIN_OPERATORS) else f"BUILTIN_{code}"


def int_array(ffi, array) -> tuple[int, ...]:
    """A TfLiteIntArray* as a tuple (NULL -> empty)."""
    if array == ffi.NULL:
        return ()
    return tuple(array.data[i] for i in range(array.size))


def read_tensor(ffi, ctx, index: int) -> TensorInfo:
    if index < 0 or index >= ctx.tensors_size:
        raise IndexError(f"tensor index {index} out of range (context has {ctx.tensors_size})")
    t = ctx.tensors[index]
    scale: tuple[float, ...] = ()
    zero_point: tuple[int, ...] = ()
    qdim = 0
    if t.quantization.type == AFFINE and t.quantization.params != ffi.NULL:
        affine = ffi.cast("TfLiteAffineQuantization*", t.quantization.params)
        if affine.scale != ffi.NULL:
            scale = tuple(float(affine.scale.data[i]) for i in range(affine.scale.size))
        if affine.zero_point != ffi.NULL:
            zero_point = tuple(int(affine.zero_point.data[i]) for i in range(affine.zero_point.size))
        qdim = int(affine.quantized_dimension)
    elif t.params.scale != 0.0:
        scale, zero_point = (float(t.params.scale),), (int(t.params.zero_point),)
    name = c_string(ffi, t.name, f"tensor{index}")
    return TensorInfo(
        index=index, name=name, type=TYPE_NAMES.get(int(t.type), f"type{int(t.type)}"),
        shape=int_array(ffi, t.dims), allocation=int(t.allocation_type), has_data=t.data.raw != ffi.NULL,
        nbytes=int(t.bytes), scale=scale, zero_point=zero_point, quantized_dimension=qdim,
        sparse=t.sparsity != ffi.NULL, address=int(ffi.cast("uintptr_t", t.data.raw)))


def read_constant(ffi, ctx, info: TensorInfo, source=None) -> np.ndarray:
    """A copy of a constant tensor's values (the model buffer must not be referenced later).

    `source` (a :class:`dtpu.delegate.model_source.ModelSource`) holds the bytes read to the
    model's mapping: a damaged file's constant may point past its end, where a read faults."""
    if not info.constant or info.dtype is None:
        raise ValueError(f"tensor {info.index} ({info.name}) is not a readable constant")
    t = ctx.tensors[info.index]
    if any(d < 0 for d in info.shape):
        raise ValueError(f"tensor {info.index} ({info.name}) has shape {info.shape}")
    count = int(np.prod(info.shape, dtype=np.int64)) if info.shape else 1
    if count * info.dtype.itemsize > info.nbytes:
        raise ValueError(f"tensor {info.index} ({info.name}) holds {info.nbytes} bytes; its shape "
                         f"{info.shape} needs {count * info.dtype.itemsize}")
    why = None if source is None else source.unreadable(info.address, count * info.dtype.itemsize)
    if why is not None:
        raise ValueError(f"tensor {info.index} ({info.name}): {why}")
    raw = ffi.buffer(t.data.raw, count * info.dtype.itemsize)
    return np.frombuffer(raw, dtype=info.dtype).reshape(info.shape).copy()


def _params(ffi, code: int, data) -> dict[str, Any] | None:
    if data == ffi.NULL:
        return None
    if code == 3:
        p = ffi.cast("TfLiteConvParams*", data)
        return {"padding": int(p.padding), "stride": (int(p.stride_height), int(p.stride_width)),
                "dilation": (int(p.dilation_height_factor), int(p.dilation_width_factor)),
                "activation": int(p.activation)}
    if code == 4:
        p = ffi.cast("TfLiteDepthwiseConvParams*", data)
        return {"padding": int(p.padding), "stride": (int(p.stride_height), int(p.stride_width)),
                "dilation": (int(p.dilation_height_factor), int(p.dilation_width_factor)),
                "activation": int(p.activation), "depth_multiplier": int(p.depth_multiplier)}
    if code == 9:
        p = ffi.cast("TfLiteFullyConnectedParams*", data)
        return {"activation": int(p.activation), "weights_format": int(p.weights_format),
                "keep_num_dims": bool(p.keep_num_dims),
                "asymmetric_quantize_inputs": bool(p.asymmetric_quantize_inputs)}
    if code in _ACTIVATION_ONLY:      # ADD, MUL, SUB
        p = ffi.cast(_ACTIVATION_ONLY[code], data)
        return {"activation": int(p.activation)}
    if code in (1, 17):               # AVERAGE_POOL_2D, MAX_POOL_2D
        p = ffi.cast("TfLitePoolParams*", data)
        return {"padding": int(p.padding), "stride": (int(p.stride_height), int(p.stride_width)),
                "filter": (int(p.filter_height), int(p.filter_width)),
                "activation": int(p.activation)}
    if code == 40:                    # MEAN
        p = ffi.cast("TfLiteReducerParams*", data)
        return {"keep_dims": bool(p.keep_dims)}
    if code == 2:                     # CONCATENATION
        p = ffi.cast("TfLiteConcatenationParams*", data)
        return {"axis": int(p.axis), "activation": int(p.activation)}
    if code == 45:                    # STRIDED_SLICE
        p = ffi.cast("TfLiteStridedSliceParams*", data)
        return {"begin_mask": int(p.begin_mask), "end_mask": int(p.end_mask),
                "ellipsis_mask": int(p.ellipsis_mask), "new_axis_mask": int(p.new_axis_mask),
                "shrink_axis_mask": int(p.shrink_axis_mask), "offset": bool(p.offset)}
    if code == 97:                    # RESIZE_NEAREST_NEIGHBOR
        p = ffi.cast("TfLiteResizeNearestNeighborParams*", data)
        return {"align_corners": bool(p.align_corners),
                "half_pixel_centers": bool(p.half_pixel_centers)}
    if code == 83:                    # PACK
        p = ffi.cast("TfLitePackParams*", data)
        return {"values_count": int(p.values_count), "axis": int(p.axis)}
    if code == 98:                    # LEAKY_RELU
        p = ffi.cast("TfLiteLeakyReluParams*", data)
        return {"alpha": float(p.alpha)}
    return None


# builtin codes whose parameters are a fused activation only, and their structs
_ACTIVATION_ONLY = {0: "TfLiteAddParams*", 18: "TfLiteMulParams*", 41: "TfLiteSubParams*"}


def read_node(ffi, ctx, index: int) -> NodeInfo:
    node_p = ffi.new("TfLiteNode**")
    reg_p = ffi.new("TfLiteRegistration**")
    status = ctx.GetNodeAndRegistration(ctx, index, node_p, reg_p)
    if status != 0 or node_p[0] == ffi.NULL or reg_p[0] == ffi.NULL:
        raise RuntimeError(f"GetNodeAndRegistration({index}) failed (status {status})")
    node, reg = node_p[0], reg_p[0]
    code = int(reg.builtin_code)
    return NodeInfo(index=index, builtin_code=code, version=int(reg.version),
                    inputs=int_array(ffi, node.inputs), outputs=int_array(ffi, node.outputs),
                    params=_params(ffi, code, node.builtin_data))


def execution_plan(ffi, ctx) -> tuple[int, ...]:
    plan_p = ffi.new("TfLiteIntArray**")
    if ctx.GetExecutionPlan(ctx, plan_p) != 0:
        raise RuntimeError("GetExecutionPlan failed")
    return int_array(ffi, plan_p[0])


# Shared-library path fragments of each runtime's interpreter (the library that implements the
# TfLiteContext callbacks): tflite_runtime/_pywrap_tensorflow_interpreter_wrapper.so, and
# ai_edge_litert/{_pywrap_litert_interpreter_wrapper,libpywrap_litert_common,libLiteRt}.so.
_RUNTIME_PATHS = (("/tflite_runtime/", "tflite_runtime"), ("/ai_edge_litert/", "ai_edge_litert"),
                  ("libLiteRt", "ai_edge_litert"), ("_pywrap_litert", "ai_edge_litert"),
                  ("_pywrap_tensorflow_interpreter_wrapper", "tflite_runtime"))


@functools.lru_cache(maxsize=1)
def _dladdr():
    """libc's dladdr with its Dl_info struct, set up once: ctypes caches every POINTER(type) it
    makes for good, so a struct class defined per call leaked ~5 KiB per delegate created."""
    import ctypes

    class _DlInfo(ctypes.Structure):
        _fields_ = [("dli_fname", ctypes.c_char_p), ("dli_fbase", ctypes.c_void_p),
                    ("dli_sname", ctypes.c_char_p), ("dli_saddr", ctypes.c_void_p)]

    for name in (None, "libdl.so.2"):
        try:
            fn = getattr(ctypes.CDLL(name), "dladdr")
        except (OSError, AttributeError):
            continue
        fn.argtypes = [ctypes.c_void_p, ctypes.POINTER(_DlInfo)]
        fn.restype = ctypes.c_int
        return fn, _DlInfo
    return None


def library_of(address: int) -> str | None:
    """Path of the shared object containing `address` (dladdr), None if unknown."""
    import ctypes

    found = _dladdr()
    if found is None or not address:
        return None
    dladdr, info_type = found
    info = info_type()
    if not dladdr(ctypes.c_void_p(address), ctypes.byref(info)) or not info.dli_fname:
        return None
    return info.dli_fname.decode("utf-8", "replace")


def host_runtime(ffi, ctx) -> tuple[str | None, str]:
    """(runtime, evidence): which TFLite runtime's interpreter is calling the delegate.

    Read from the library that implements the context's GetExecutionPlan callback (dladdr), so it
    names the interpreter that really runs the graph, whatever Python modules are imported (or
    none, in a C++ host). Falls back to the Python modules imported in this process when the
    library cannot be named. runtime is "tflite_runtime", "ai_edge_litert" or None.
    """
    import sys

    path = library_of(int(ffi.cast("uintptr_t", ctx.GetExecutionPlan)))
    if path:
        for fragment, runtime in _RUNTIME_PATHS:
            if fragment in path:
                return runtime, path
    loaded = [name for name in ("tflite_runtime", "ai_edge_litert")
              if f"{name}.interpreter" in sys.modules]
    if len(loaded) == 1:
        return loaded[0], f"{path or 'unknown library'}; only {loaded[0]}.interpreter is imported"
    return None, f"{path or 'unknown library'}; imported runtimes: {loaded or 'none'}"
