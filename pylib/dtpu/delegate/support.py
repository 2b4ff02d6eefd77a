"""Which TFLite nodes the delegate claims: every rule in one place.

A node is claimed only when the backends can reproduce the default interpreter's output for it
exactly. :func:`analyze` either returns a :class:`ConvSpec` (the node is ours) or a reason (it
stays on the CPU). The same function runs at the delegate's Prepare (to choose nodes, with the
model's shapes) and at every kernel Prepare (to rebuild the spec with the current shapes after
``resize_tensor_input``), so the two can never disagree.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np

from dtpu.delegate.graph import OPTIONAL_TENSOR, NodeInfo, TensorInfo
from dtpu.delegate.options import DelegateOptions
from dtpu.precision import Precision
from dtpu.spec import Activation, ConvSpec, DataMode, OpKind, Padding, Quant

CODES = {3: OpKind.CONV_2D, 4: OpKind.DEPTHWISE_CONV_2D, 9: OpKind.FULLY_CONNECTED}
_PADDING = {1: Padding.SAME, 2: Padding.VALID}
_ACTIVATION = {0: Activation.NONE, 1: Activation.RELU, 2: Activation.RELU_N1_TO_1, 3: Activation.RELU6}
_ACTIVATION_NAMES = {4: "TANH", 5: "SIGN_BIT", 6: "SIGMOID"}

# The lane precision each data mode needs, and the wider ones that still hold it exactly.
NATURAL_PRECISION = {DataMode.INT8: Precision.INT8, DataMode.UINT8: Precision.UINT8,
                     DataMode.INT16X8: Precision.INT16, DataMode.FLOAT32: Precision.FP32}
_HOLDS = {
    DataMode.INT8: {Precision.INT8, Precision.INT16, Precision.INT32, Precision.INT64},
    DataMode.UINT8: {Precision.UINT8, Precision.UINT16, Precision.UINT32, Precision.UINT64,
                     Precision.INT16, Precision.INT32, Precision.INT64},
    DataMode.INT16X8: {Precision.INT16, Precision.INT32, Precision.INT64},
    DataMode.FLOAT32: {Precision.FP32},
}
# Bias type TFLite's kernels read for each mode.
_BIAS_TYPE = {DataMode.INT8: "int32", DataMode.UINT8: "int32", DataMode.INT16X8: "int64",
              DataMode.FLOAT32: "float32"}


INT16_MAX = 32767
FLT_MIN = float(np.finfo(np.float32).tiny)     # smallest normal float32
FLT_MAX = float(np.finfo(np.float32).max)
# Requantization multipliers TFLite's kernels take: below ~2^-31 QuantizeMultiplier flushes them
# to (0, 0) and the channel outputs its zero point (clamped), which dtpu.reference and the DTPU
# reproduce; real trained models have such dead channels (filter scales of 1e-11), so there is no
# lower bound. Above, the int32 path saturates shifts beyond 30, the 16x8 one shifts of 8 and more.
MULTIPLIER_MAX, MULTIPLIER_MAX_16X8 = 2.0 ** 30, 2.0 ** 7
# Largest activation (input or output) a claimed node may have, in elements: 4M, five times
# MobileNet-224's largest. The backends stage whole tensors in host memory in wider types than
# TFLite's (int64 / float64 accumulators, im2col copies; backend=model's golden model several
# hundred bytes per element): damaged shapes of 9M and 25M elements (issue #12) made them run out
# of 4 GiB where the CPU interpreter did not.
MAX_ELEMENTS = 1 << 22
# Zero points TFLite's kernels can hold for each activation / filter type.
_ZERO_POINT_RANGE = {"int8": (-128, 127), "uint8": (0, 255), "int16": (-32768, 32767)}


class Unsupported(Exception):
    """Raised by the checks below; its message is the reason shown in logs and reports."""


@dataclass(frozen=True)
class Decision:
    spec: ConvSpec | None
    reason: str | None
    precision: Precision | None = None
    input_index: int = -1
    filter_index: int = -1
    bias_index: int = -1
    output_index: int = -1

    @property
    def claimed(self) -> bool:
        return self.spec is not None


def resolve_precision(mode: DataMode, forced: Precision | None) -> Precision:
    """The lane precision for a node: its natural one, or `forced` if that holds it exactly."""
    if forced is None:
        return NATURAL_PRECISION[mode]
    if forced not in _HOLDS[mode]:
        raise Unsupported(f"forced precision {forced.value} cannot hold {mode.value} operands exactly "
                          f"(would need one of {', '.join(sorted(p.value for p in _HOLDS[mode]))})")
    return forced


def _require(condition: bool, reason: str) -> None:
    if not condition:
        raise Unsupported(reason)


def _quant(t: TensorInfo, what: str) -> Quant:
    _require(t.quantized, f"{what} tensor {t.name!r} has no quantization parameters")
    _require(len(t.zero_point) == len(t.scale), f"{what} tensor {t.name!r} has {len(t.scale)} scales "
             f"but {len(t.zero_point)} zero points")
    _require(all(s > 0 and np.isfinite(s) for s in t.scale), f"{what} tensor {t.name!r} has a "
             "non-positive or non-finite scale")
    bad = [s for s in t.scale if not FLT_MIN <= s <= FLT_MAX]
    _require(not bad, f"{what} tensor {t.name!r} has scale {bad[:1]}, not a normal float32")
    low, high = _ZERO_POINT_RANGE.get(t.type, (None, None))
    bad = [z for z in t.zero_point if low is not None and not low <= z <= high]
    _require(not bad, f"{what} tensor {t.name!r} has zero point {bad[:1]} outside {t.type}'s "
             f"range [{low}, {high}]")
    return Quant(scale=t.scale, zero_point=t.zero_point)


def _data_mode(x: TensorInfo, w: TensorInfo, y: TensorInfo) -> DataMode:
    types = (x.type, w.type, y.type)
    if x.type == "float32" and w.type in ("int8", "uint8", "int4"):
        raise Unsupported(f"hybrid (dynamic-range) quantization: float32 activations with {w.type} "
                          "weights")
    if w.type == "float16":
        raise Unsupported("float16 weights")
    modes = {("float32",) * 3: DataMode.FLOAT32, ("int8",) * 3: DataMode.INT8,
             ("uint8",) * 3: DataMode.UINT8, ("int16", "int8", "int16"): DataMode.INT16X8}
    if types not in modes:
        raise Unsupported("unsupported type combination input/filter/output = " + "/".join(types))
    return modes[types]


def _check_quantization(kind: OpKind, mode: DataMode, x: TensorInfo, w: TensorInfo, y: TensorInfo,
                        out_channels: int) -> tuple[Quant | None, Quant | None, Quant | None]:
    if mode is DataMode.FLOAT32:
        return None, None, None
    xq, wq, yq = _quant(x, "input"), _quant(w, "filter"), _quant(y, "output")
    _require(not xq.per_channel and not yq.per_channel, "per-channel activation quantization")
    channel_axis = 3 if kind is OpKind.DEPTHWISE_CONV_2D else 0
    if wq.per_channel:
        _require(mode is not DataMode.UINT8, "per-channel quantized uint8 filter")
        _require(len(wq.scale) == out_channels, f"filter has {len(wq.scale)} scales for "
                 f"{out_channels} output channels")
        _require(w.quantized_dimension == channel_axis, f"filter quantized along axis "
                 f"{w.quantized_dimension}; expected {channel_axis}")
    if mode in (DataMode.INT8, DataMode.INT16X8):
        _require(all(z == 0 for z in wq.zero_point), "asymmetric (non-zero zero point) int8 filter")
    if mode is DataMode.INT16X8:
        _require(xq.zero_point[0] == 0 and yq.zero_point[0] == 0,
                 "int16 activations with a non-zero zero point")
    # TFLite's multiplier: float32 product s_in * s_w, then divided by s_out in double
    # (GetQuantizedConvolutionMultipler); QuantizeMultiplier saturates shifts above 30, which
    # dtpu.reference does not model (issue #12: a filter scale of 3.4e38); tiny multipliers are
    # flushed to zero by TFLite and by dtpu.reference alike (dead channels, issue #25)
    product = np.float32(xq.scale[0]) * np.asarray(wq.scale, dtype=np.float32)
    with np.errstate(all="ignore"):
        multiplier = product.astype(np.float64) / float(np.float32(yq.scale[0]))
    # The 16x8 kernels' MultiplyByQuantizedMultiplier(int64_t) takes shifts below 8 only (it
    # DCHECKs -31 <= shift < 8; beyond, 15 - shift goes negative): multipliers below 2^7
    top = MULTIPLIER_MAX_16X8 if mode is DataMode.INT16X8 else MULTIPLIER_MAX
    _require(bool(np.all(np.isfinite(multiplier)) and np.all(multiplier < top)),
             f"requantization multiplier {float(np.min(multiplier)):g}..{float(np.max(multiplier)):g}"
             f" (input x filter / output scale) reaches 2^{int(np.log2(top))}; accepted: below it")
    return xq, wq, yq


def analyze(node: NodeInfo, tensor: Callable[[int], TensorInfo], options: DelegateOptions,
            runtime: str | None = None, enabled: tuple[Precision, ...] | None = None,
            variants: tuple[str, ...] | None = None) -> Decision:
    """Decide whether `node` is claimed; never raises for anything a model can contain.

    `runtime` is the TFLite runtime whose default interpreter the outputs must equal
    ("tflite_runtime" or "ai_edge_litert", None: dtpu.reference's default): a quantized node is
    claimed only where dtpu.reference reproduces that interpreter's output stage for it.
    `enabled`: the lane precisions the backend's target was built with (None: any).
    `variants`: the names of the requantization variants its post lanes have (HwConfig RQ_EN;
    None: all): a node its interpreter requantizes with another stays on the CPU.
    """
    try:
        return _analyze(node, tensor, options, runtime, enabled, variants)
    except Unsupported as exc:
        return Decision(spec=None, reason=str(exc))
    except IndexError as exc:  # graph.read_tensor: an operand index outside the context
        return Decision(spec=None, reason=f"operand {exc}")


def _check_rounding(spec: ConvSpec, bias_type: str | None, runtime: str | None,
                    variants: tuple[str, ...] | None = None) -> None:
    from dtpu import reference

    if not spec.mode.is_quantized:
        return
    bias = None if bias_type is None else np.zeros(0, NUMPY_BIAS.get(bias_type, np.int32))
    variant, why = reference.find_rounding_variant(spec, bias, "default", runtime)
    _require(variant is not None, why)
    # no other variant is exact in general (DOUBLE and DOUBLE_UP differ on negative ties of the
    # final shift), so the node needs its own; the two share the lane's logic (an int8 build has both)
    _require(variants is None or variant.name in variants,
             f"requantized with {variant.name} ({why}), which this DTPU build's post lanes do not "
             f"have (built: {', '.join(variants or ())}; HwConfig RQ_EN)")


NUMPY_BIAS = {"int32": np.int32, "int64": np.int64}


def _analyze(node: NodeInfo, tensor: Callable[[int], TensorInfo], options: DelegateOptions,
             runtime: str | None = None, enabled: tuple[Precision, ...] | None = None,
             variants: tuple[str, ...] | None = None) -> Decision:
    kind = CODES.get(node.builtin_code)
    _require(kind is not None, f"{node.op} is not an op the DTPU runs")
    _require(kind in options.ops, f"{kind.value} is not enabled (option ops="
             f"{','.join(op.value for op in options.ops)})")
    _require(node.params is not None, "node has no builtin parameters")
    _require(len(node.inputs) in (2, 3) and len(node.outputs) == 1,
             f"{len(node.inputs)} inputs / {len(node.outputs)} outputs (expected 2-3 / 1)")
    _require(node.inputs[0] >= 0 and node.inputs[1] >= 0, "missing input or filter tensor")
    x, w, y = tensor(node.inputs[0]), tensor(node.inputs[1]), tensor(node.outputs[0])
    bias_index = node.inputs[2] if len(node.inputs) == 3 else OPTIONAL_TENSOR
    b = tensor(bias_index) if bias_index != OPTIONAL_TENSOR else None

    _require(not (x.sparse or w.sparse), "sparse tensors")
    mode = _data_mode(x, w, y)
    _require(w.constant, f"filter {w.name!r} is not a constant of the model (computed at run time"
             + (", e.g. dequantized float16 weights)" if w.allocation != 1 else ")"))
    if b is not None:
        _require(b.constant, f"bias {b.name!r} is not a constant of the model")
        _require(b.type == _BIAS_TYPE[mode], f"{b.type} bias with {mode.value} data (TFLite "
                 f"reference needs {_BIAS_TYPE[mode]})")
    precision = resolve_precision(mode, options.precision)
    _require(enabled is None or precision in enabled,
             f"{mode.value} needs {precision.value} lanes, which this DTPU build does not have "
             f"(enabled: {', '.join(p.value for p in enabled or ())})")

    params = node.params or {}
    act = params.get("activation", 0)
    _require(act in _ACTIVATION, "fused activation " + _ACTIVATION_NAMES.get(act, str(act)))
    activation = _ACTIVATION[act]

    if kind is OpKind.FULLY_CONNECTED:
        spec = _fully_connected(node, x, w, y, b, mode, activation, params)
    else:
        spec = _conv(kind, node, x, w, y, b, mode, activation, params)
    for what, shape in (("input", spec.input_shape), ("output", spec.output_shape)):
        elements = int(np.prod(shape, dtype=object))
        _require(elements <= MAX_ELEMENTS, f"{what} of {elements} elements exceeds the "
                 f"{MAX_ELEMENTS} a DTPU node may have")
    if b is not None:
        _require(b.shape in ((spec.out_channels,), ()) or int(np.prod(b.shape)) == spec.out_channels,
                 f"bias shape {b.shape} for {spec.out_channels} output channels")
    _check_rounding(spec, None if b is None else b.type, runtime, variants)
    return Decision(spec=spec, reason=None, precision=precision, input_index=x.index,
                    filter_index=w.index, bias_index=bias_index, output_index=y.index)


def dataflow_reason(nodes: list[NodeInfo]) -> str | None:
    """Why no node of this graph may be claimed (None: any may).

    TFLite's execution plan is a topological order: each tensor is written by at most one node,
    before the nodes that read it. A damaged model can break that (issue #12: a QUANTIZE whose
    input index became its own output); the interpreter still runs it in plan order, but
    replacing nodes by a delegate kernel partitions that graph by its data flow, and TFLite's
    partitioner then hung or left an output unallocated. Such a graph stays on the CPU whole.
    """
    producer: dict[int, int] = {}
    for position, node in enumerate(nodes):
        for t in node.outputs:
            if t < 0:
                continue
            if t in producer:
                return (f"tensor {t} is written by nodes {nodes[producer[t]].index} and "
                        f"{node.index}: the graph's data flow is not a DAG")
            producer[t] = position
    for position, node in enumerate(nodes):
        for t in node.inputs:
            if producer.get(t, -1) >= position:
                return (f"node {node.index} reads tensor {t}, which node "
                        f"{nodes[producer[t]].index} writes at or after it: the graph's data "
                        "flow is not a DAG")
    return None


def constants_reason(spec: ConvSpec, filters: np.ndarray, bias: np.ndarray | None) -> str | None:
    """Why a claimed node's constant values keep it on the CPU after all (None: they do not).

    Checked once the filters and bias are read (the delegate's Prepare, see runtime.trial).
    16x8 nodes requantize int64 totals with TFLite's MultiplyByQuantizedMultiplier(int64_t),
    valid for |accumulator + bias| < 2^47 (TFLite DCHECKs it; release builds overflow silently,
    the DTPU flags OVERFLOW): a bias near that bound (issue #12: one flipped byte of an int64
    bias) must not reach the DTPU, so the bound is checked for any input.
    """
    if spec.mode is not DataMode.INT16X8 or bias is None or bias.size == 0:
        return None
    taps = int(np.prod(filters.shape)) // max(1, spec.out_channels)
    if spec.kind is OpKind.DEPTHWISE_CONV_2D:
        taps = spec.kernel[0] * spec.kernel[1]
    largest_w = max(abs(int(filters.max())), abs(int(filters.min()))) if filters.size else 0
    largest_b = max(abs(int(bias.max())), abs(int(bias.min())))
    bound = taps * 32768 * largest_w + largest_b
    if bound >= 1 << 47:
        return (f"int16x8 accumulator + bias can reach {bound} (bias up to {largest_b}), beyond "
                "the 2^47 that int64 requantization holds")
    return None


def _conv(kind, node, x, w, y, b, mode, activation, params) -> ConvSpec:
    _require(len(x.shape) == 4, f"input rank {len(x.shape)} (expected NHWC)")
    _require(len(w.shape) == 4, f"filter rank {len(w.shape)} (expected 4)")
    _require(min(x.shape) > 0 and min(w.shape) > 0, f"empty tensor (input {x.shape}, filter {w.shape})")
    padding = _PADDING.get(params.get("padding"))
    _require(padding is not None, f"padding code {params.get('padding')}")
    stride, dilation = tuple(params["stride"]), tuple(params["dilation"])
    _require(min(stride) >= 1 and min(dilation) >= 1, f"stride {stride} / dilation {dilation}")
    # TFLite's ConvParams / DepthwiseParams hold strides and dilations in int16 (types.h): a
    # wider one wraps there (issue #12: stride_w 65535 gave other outputs than the convolution)
    _require(max(stride + dilation) <= INT16_MAX, f"stride {stride} / dilation {dilation} "
             "exceeds TFLite's 16-bit fields")
    channels = x.shape[3]
    multiplier = 1
    if kind is OpKind.DEPTHWISE_CONV_2D:
        _require(w.shape[0] == 1, f"depthwise filter shape {w.shape} (expected 1xHxWxC)")
        _require(w.shape[3] % channels == 0, f"depthwise filter has {w.shape[3]} channels for "
                 f"{channels} input channels")
        multiplier = w.shape[3] // channels
        declared = params.get("depth_multiplier", multiplier)
        # TFLite derives the multiplier from the shapes when the option is 0 (old files), except
        # in its 16x8 kernel, which uses the option as it is (issue #12: 0 gave other outputs)
        accepted = (multiplier,) if mode is DataMode.INT16X8 else (multiplier, 0)
        _require(declared in accepted, f"depth_multiplier {declared} disagrees with the "
                 f"shapes ({w.shape[3]} / {channels})")
        out_channels = w.shape[3]
    else:
        _require(w.shape[3] == channels, f"grouped convolution (filter depth {w.shape[3]}, input "
                 f"channels {channels})")
        out_channels = w.shape[0]
    xq, wq, yq = _check_quantization(kind, mode, x, w, y, out_channels)
    try:
        spec = ConvSpec(kind=kind, mode=mode, input_shape=tuple(x.shape), filter_shape=tuple(w.shape),
                        stride=stride, dilation=dilation, padding=padding, activation=activation,
                        depth_multiplier=multiplier, has_bias=b is not None, input_q=xq, filter_q=wq,
                        output_q=yq, name=y.name)
    except ValueError as exc:
        raise Unsupported(str(exc)) from None
    _require(min(spec.output_shape) > 0, f"empty output {spec.output_shape} for input {x.shape}")
    (top, extra_h), (left, extra_w) = spec.pads
    # TFLite's kernels hold the padding in int16 fields (PaddingValues, types.h): a wider pad
    # wraps there, and the interpreter's output is no longer the convolution dtpu.reference
    # computes (issue #12: a mutated dilation of 65535 gave pad 65535, read as -1).
    _require(max(top + extra_h, left + extra_w) <= INT16_MAX, f"padding {top}+{extra_h} x "
             f"{left}+{extra_w} (dilation {dilation}) exceeds TFLite's 16-bit padding fields")
    # Only rank and channels are checked against TFLite's output tensor: after resize_tensor_input
    # its spatial dims are stale until our kernel's Prepare resizes it to spec.output_shape.
    _require(len(y.shape) == 4 and y.shape[3] == spec.out_channels, f"output shape {tuple(y.shape)} "
             f"does not match the computed {spec.output_shape}")
    return spec


def _fully_connected(node, x, w, y, b, mode, activation, params) -> ConvSpec:
    _require(params.get("weights_format", 0) == 0, "shuffled fully-connected weights")
    _require(not params.get("asymmetric_quantize_inputs", False), "hybrid fully-connected")
    _require(len(w.shape) == 2, f"weights rank {len(w.shape)} (expected 2)")
    out_channels, depth = w.shape
    total = int(np.prod(x.shape)) if x.shape else 0
    _require(depth > 0 and total > 0 and total % depth == 0, f"input {x.shape} is not a whole number "
             f"of {depth}-wide rows")
    rows = total // depth
    _require(len(y.shape) >= 1 and y.shape[-1] == out_channels, f"output shape {tuple(y.shape)} "
             f"does not end in {out_channels} channels")
    xq, wq, yq = _check_quantization(OpKind.FULLY_CONNECTED, mode, x, w, y, out_channels)
    try:
        return ConvSpec(kind=OpKind.FULLY_CONNECTED, mode=mode, input_shape=(rows, 1, 1, depth),
                        filter_shape=tuple(w.shape), activation=activation, has_bias=b is not None,
                        input_q=xq, filter_q=wq, output_q=yq, name=y.name)
    except ValueError as exc:
        raise Unsupported(str(exc)) from None



# -- the vector unit's operators (contract 2.1) ------------------------------------------------

#: TFLite builtin codes of the one-input operators the vector unit runs as a table (TABLE_OPS)
TABLE_CODES = {14: "LOGISTIC", 19: "RELU", 20: "RELU_N1_TO_1", 21: "RELU6", 28: "TANH",
               98: "LEAKY_RELU", 114: "QUANTIZE", 117: "HARD_SWISH"}
#: TFLite builtin codes of the operators contract 2.1's vector unit runs (dtpu.hw.vec_lower)
VECTOR_CODES = {0: "ADD", 1: "AVERAGE_POOL_2D", 17: "MAX_POOL_2D", 18: "MUL", 40: "MEAN", 41: "SUB",
                2: "CONCATENATION", 97: "RESIZE_NEAREST_NEIGHBOR", **TABLE_CODES}

#: the reason on a target that declares no vector unit (the 1.2 top, backend=reference, the
#: board's int16 overlay)
NO_VECTOR_UNIT = "target has no vector unit"


def vector_reason(node: NodeInfo, has_vector_unit: bool) -> str:
    """Why a vector-unit operator is not even considered: the target declares no vector unit
    (:attr:`dtpu.backends.base.Backend.vector_unit`, from the transport's declaration), or it
    does and the options keep them on the CPU: `vector=off`, or an `ops` list (it names no
    vector-unit kind; ops=auto claims them where they join convolutions:
    dtpu.delegate.vector_claim)."""
    if not has_vector_unit:
        return NO_VECTOR_UNIT
    return (f"{VECTOR_CODES[node.builtin_code]} runs on this target's vector unit, claimed with "
            f"ops=auto and vector=on only")
