"""CONV_2D / DEPTHWISE_CONV_2D / FULLY_CONNECTED as TFLite's CPU kernels compute them.

The work splits where the accelerator splits it: :func:`accumulate` produces the raw integer sums
(what the DTPU's MAC array computes), :func:`requantize` is the host-side output stage (bias, the
per-channel fixed-point multiplier, output zero point, activation clamp). Which rounding the output
stage uses depends on the runtime (tflite-runtime 2.14 or LiteRT, whose default interpreter runs
int8/uint8 convolutions on XNNPACK) and on the kernel it picks, see :func:`rounding_variant` and
docs/quantization.md.

Accumulation uses im2col + BLAS in floating point because it is an order of magnitude faster than
integer einsum; it is exact because every operand and every partial sum is an integer small enough
to be represented exactly (see :func:`_exact_float_dtype`). When that cannot be guaranteed it falls
back to int64 arithmetic.
"""
from __future__ import annotations

import logging

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

from dtpu.reference import quantize as q
from dtpu.spec import Activation, ConvSpec, DataMode, OpKind

log = logging.getLogger(__name__)

# "default": the interpreter as created without an op resolver argument (for ai_edge_litert that
# includes its default XNNPACK delegate); "builtin": the runtime's own optimized kernels
# (BUILTIN_WITHOUT_DEFAULT_DELEGATES; the same as "default" for tflite_runtime 2.14, whose XNNPACK
# takes no quantized op); "reference": BUILTIN_REF.
ROUNDINGS = ("default", "builtin", "reference")

_DTYPES = {
    DataMode.INT8: (np.int8, np.int8),
    DataMode.UINT8: (np.uint8, np.uint8),
    DataMode.INT16X8: (np.int16, np.int8),
    DataMode.FLOAT32: (np.float32, np.float32),
}


def io_dtypes(spec: ConvSpec) -> tuple[np.dtype, np.dtype]:
    """(activation dtype, filter dtype) TFLite uses for the spec's mode."""
    a, w = _DTYPES[spec.mode]
    return np.dtype(a), np.dtype(w)


# ---------------------------------------------------------------------------------------------
# accumulation


def _input_zero_point(spec: ConvSpec) -> int:
    # The 16x8 kernels ignore zero points altogether (TFLite's Prepare requires them to be 0).
    if spec.mode in (DataMode.FLOAT32, DataMode.INT16X8):
        return 0
    return int(spec.input_q.zero_point[0])


def _filter_zero_points(spec: ConvSpec) -> np.ndarray:
    if spec.mode in (DataMode.FLOAT32, DataMode.INT16X8):
        return np.zeros(spec.out_channels, dtype=np.int64)
    return spec.filter_q.zero_points(spec.out_channels)


def _taps(spec: ConvSpec) -> int:
    """Products summed into one output: the K of the implied matrix multiplication."""
    kh, kw = spec.kernel
    if spec.kind is OpKind.DEPTHWISE_CONV_2D:
        return kh * kw
    return kh * kw * spec.input_shape[3]


def _accumulator_bound(spec: ConvSpec) -> int:
    """K * max|x - input_zp| * max|w - filter_zp| over the dtypes' ranges: no accumulation of
    valid tensors can exceed it in magnitude (quantized modes only)."""
    a_dt, w_dt = (np.iinfo(d) for d in io_dtypes(spec))
    zp_in = _input_zero_point(spec)
    zp_w = _filter_zero_points(spec)
    a = max(a_dt.max - zp_in, zp_in - a_dt.min)
    b = int(np.max(np.maximum(w_dt.max - zp_w, zp_w - w_dt.min)))
    return _taps(spec) * a * b


def _exact_float_dtype(spec: ConvSpec) -> np.dtype | None:
    """The cheapest float dtype in which the integer accumulation is exact, or None.

    Proof of exactness: with a = max |x - input_zp| and b = max |w - filter_zp| over the value
    ranges of the dtypes, every product is an integer of magnitude <= a*b and every partial sum
    (whatever order BLAS or the tap loop adds them in, with or without FMA) is an integer of
    magnitude <= K*a*b. Every integer of magnitude <= 2^p is exactly representable in a float with
    a p-bit significand (p = 24 for float32, 53 for float64), so if K*a*b <= 2^p no operation
    ever rounds. Typical bounds: int8 a <= 255, b <= 128 (K <= 514 in float32, K <= 2^37 in
    float64); uint8 a, b <= 255; int16x8 a <= 2^15, b <= 128 gives K*2^22 (float64 for any
    K <= 2^31).
    """
    bound = _accumulator_bound(spec)
    if bound <= 1 << 24:
        return np.dtype(np.float32)
    if bound <= 1 << 53:
        return np.dtype(np.float64)
    return None


def _centered_padded_input(spec: ConvSpec, x: np.ndarray, dtype) -> np.ndarray:
    """x - input_zp padded with zeros: TFLite skips taps outside the image (reference kernels) or
    fills them with the input zero point (optimized im2col); both make them contribute 0."""
    (top, extra_h), (left, extra_w) = spec.pads
    n, h, w, c = x.shape
    out = np.zeros((n, h + 2 * top + extra_h, w + 2 * left + extra_w, c), dtype=dtype)
    center = out[:, top:top + h, left:left + w, :]
    np.subtract(x, _input_zero_point(spec), out=center, dtype=out.dtype, casting="unsafe")
    return out


def _windows(spec: ConvSpec, xp: np.ndarray) -> np.ndarray:
    """View (N, OH, OW, C, KH, KW) of the padded input: the receptive field of every output."""
    _, oh, ow, _ = spec.output_shape
    (kh, kw), (sh, sw), (dh, dw) = spec.kernel, spec.stride, spec.dilation
    v = sliding_window_view(xp, ((kh - 1) * dh + 1, (kw - 1) * dw + 1), axis=(1, 2))
    return v[:, ::sh, ::sw][:, :oh, :ow, :, ::dh, ::dw]


def _centered_filters(spec: ConvSpec, filters: np.ndarray, dtype) -> np.ndarray:
    w = np.asarray(filters).reshape(spec.filter_shape if spec.kind is not OpKind.FULLY_CONNECTED
                                    else (spec.out_channels, 1, 1, spec.input_shape[3]))
    zp = _filter_zero_points(spec)
    if spec.kind is OpKind.DEPTHWISE_CONV_2D:
        return (w.astype(np.int64) - zp).astype(dtype)  # channel is the last axis
    return (w.astype(np.int64) - zp[:, None, None, None]).astype(dtype)


def _conv_acc(spec: ConvSpec, xp: np.ndarray, w: np.ndarray) -> np.ndarray:
    n, oh, ow, oc = spec.output_shape
    kh, kw = spec.kernel
    c = spec.input_shape[3]
    wm = w.reshape(oc, kh * kw * c).T  # K ordered (kh, kw, c) like OHWI
    if (kh, kw) == (1, 1) and spec.stride == (1, 1) and xp.shape[1:3] == (oh, ow):
        cols = xp.reshape(n * oh * ow, c)  # 1x1 stride 1: the input already is the im2col matrix
    else:
        win = _windows(spec, xp).transpose(0, 1, 2, 4, 5, 3)  # (N, OH, OW, KH, KW, C)
        cols = win.reshape(n * oh * ow, kh * kw * c)
    return (cols @ wm).reshape(n, oh, ow, oc)


def _depthwise_acc(spec: ConvSpec, xp: np.ndarray, w: np.ndarray) -> np.ndarray:
    # One multiply-add per tap over the whole tensor: kh*kw numpy calls, no per-pixel loop, and
    # faster than a (C, KH*KW) batched matmul whose inner dimension is only 9.
    n, oh, ow, oc = spec.output_shape
    (kh, kw), (sh, sw), (dh, dw) = spec.kernel, spec.stride, spec.dilation
    c, m = spec.input_shape[3], spec.depth_multiplier
    wt = w.reshape(kh, kw, c, m)
    acc = np.zeros((n, oh, ow, c, m), dtype=xp.dtype)
    for i in range(kh):
        for j in range(kw):
            xs = xp[:, i * dh:i * dh + (oh - 1) * sh + 1:sh, j * dw:j * dw + (ow - 1) * sw + 1:sw, :]
            acc += xs[..., None] * wt[i, j]
    return acc.reshape(n, oh, ow, oc)


def accumulate(spec: ConvSpec, x: np.ndarray, filters: np.ndarray) -> np.ndarray:
    """Raw accumulations sum((x - input_zp) * (w - filter_zp)) per output, without bias.

    This is the part the accelerator computes; int64 NHWC for quantized modes, float64 for
    float32 (more precise than TFLite's float32 sums, which the tolerance absorbs).
    """
    x = np.asarray(x)
    if tuple(x.shape) != tuple(spec.input_shape):
        raise ValueError(f"input shape {x.shape} does not match the spec's {spec.input_shape}")
    if spec.mode is DataMode.FLOAT32:
        dtype = np.dtype(np.float64)
    else:
        dtype = _exact_float_dtype(spec) or np.dtype(np.int64)
    xp = _centered_padded_input(spec, x, dtype)
    if spec.mode is not DataMode.FLOAT32:
        w = _centered_filters(spec, filters, dtype)
    else:
        w = np.asarray(filters, dtype=dtype).reshape(-1)
    if spec.kind is OpKind.DEPTHWISE_CONV_2D:
        acc = _depthwise_acc(spec, xp, w)
    elif dtype.kind == "f":
        acc = _conv_acc(spec, xp, w)
    else:
        log.debug("%s: accumulation bound exceeds 2^53, using int64 einsum", spec.name or spec.kind)
        acc = _conv_acc_int64(spec, xp, w)
    if spec.mode is DataMode.FLOAT32:
        return acc
    return acc.astype(np.int64)


def _conv_acc_int64(spec: ConvSpec, xp: np.ndarray, w: np.ndarray) -> np.ndarray:
    kh, kw = spec.kernel
    oc = spec.out_channels
    wt = w.reshape(oc, kh, kw, spec.input_shape[3])
    return np.einsum("nhwcij,oijc->nhwo", _windows(spec, xp), wt, optimize=True)


# ---------------------------------------------------------------------------------------------
# output stage


def output_multipliers(spec: ConvSpec) -> tuple[np.ndarray, np.ndarray]:
    """Per-output-channel (int32 multiplier, shift) from TFLite's QuantizeMultiplier.

    Per-tensor filters are broadcast, as PopulateConvolutionQuantizationParams does. The uint8
    kernels and per-tensor FULLY_CONNECTED use the scalar multiplier of
    GetQuantizedConvolutionMultipler instead, whose effective scale is rounded differently (see
    :func:`dtpu.reference.quantize.effective_scales`); both are reproduced.
    """
    if not spec.mode.is_quantized:
        raise ValueError("float32 specs have no output multipliers")
    oc = spec.out_channels
    scalar_path = spec.mode is DataMode.UINT8 or (
        spec.kind is OpKind.FULLY_CONNECTED and not spec.filter_q.per_channel)
    scales = q.effective_scales(spec.input_q.scale[0], spec.filter_q.scales(oc).astype(np.float32),
                                spec.output_q.scale[0], float32_product=scalar_path)
    mult, shift = q.quantize_multiplier(scales)
    return np.atleast_1d(mult).astype(np.int32), np.atleast_1d(shift).astype(np.int64)


def activation_range(spec: ConvSpec, variant: q.Variant | str | None = None) -> tuple:
    """The fused activation's clamp bounds in the output's domain.

    Quantized: TFLite's CalculateActivationRangeQuantized: the real bounds 0, 6, -1, 1 quantized
    with the output scale (float32 division, round half away from zero), intersected with the
    output type's range. With ``variant=Variant.FP32`` the bounds are XNNPACK's instead
    (:func:`dtpu.reference.quantize.xnnpack_quantize`: zero point added in float32, ties to even),
    which differ when a bound divided by the scale ends in exactly .5. Float: plain bounds.
    """
    act = spec.activation
    if spec.mode is DataMode.FLOAT32:
        return {Activation.NONE: (-np.inf, np.inf), Activation.RELU: (0.0, np.inf),
                Activation.RELU6: (0.0, 6.0), Activation.RELU_N1_TO_1: (-1.0, 1.0)}[act]
    info = np.iinfo(io_dtypes(spec)[0])
    lo, hi = int(info.min), int(info.max)
    scale, zp = spec.output_q.scale[0], spec.output_q.zero_point[0]
    if spec.mode is DataMode.INT16X8:
        zp = 0
    if variant is not None and q.Variant(variant) is q.Variant.FP32:
        bounds = {Activation.NONE: (-np.inf, np.inf), Activation.RELU: (0.0, np.inf),
                  Activation.RELU6: (0.0, 6.0), Activation.RELU_N1_TO_1: (-1.0, 1.0)}[act]
        return tuple(q.xnnpack_quantize(b, scale, zp, lo, hi) for b in bounds)
    if act is Activation.NONE:
        return lo, hi
    bounds = {Activation.RELU: (0.0, None), Activation.RELU6: (0.0, 6.0),
              Activation.RELU_N1_TO_1: (-1.0, 1.0)}[act]
    lo = max(lo, q.quantize_value(bounds[0], scale, zp))
    if bounds[1] is not None:
        hi = min(hi, q.quantize_value(bounds[1], scale, zp))
    return lo, hi


def fp32_scales(spec: ConvSpec) -> np.ndarray:
    """Per-output-channel float32 scales of :data:`Variant.FP32` (XNNPACK), per-tensor broadcast."""
    if not spec.mode.is_quantized:
        raise ValueError("float32 specs have no requantization scales")
    oc = spec.out_channels
    return np.broadcast_to(q.fp32_scales(spec.input_q.scale[0], spec.filter_q.scales(oc),
                                         spec.output_q.scale[0]), (oc,)).copy()


# ---------------------------------------------------------------------------------------------
# which output stage each runtime's default interpreter runs

# The TFLite runtimes whose kernels dtpu.reference reproduces: tflite-runtime 2.14 and its
# successor ai-edge-litert (LiteRT 2.3), named by their Python modules (dtpu.tflite.RUNTIME).
RUNTIMES = ("tflite_runtime", "ai_edge_litert")
TFLITE_RUNTIME, LITERT = RUNTIMES


def default_runtime() -> str:
    """The runtime to reproduce when none is named: the one :mod:`dtpu.tflite` selects
    (DTPU_TFLITE_RUNTIME, else tflite_runtime if it imports, else ai_edge_litert); tflite_runtime
    when neither is installed."""
    try:
        from dtpu import tflite
    except ImportError:
        return TFLITE_RUNTIME
    return tflite.RUNTIME


def _check_runtime(runtime: str | None) -> str:
    runtime = default_runtime() if runtime is None else runtime
    if runtime not in RUNTIMES:
        raise ValueError(f"unknown runtime {runtime!r}; accepted: {', '.join(RUNTIMES)}")
    return runtime


_FLT_MIN = float(np.finfo(np.float32).tiny)  # smallest normal float32


def xnnpack_decline_reason(spec: ConvSpec) -> str | None:
    """Why LiteRT's default XNNPACK delegate would leave this node to the builtin kernels, or None
    when it takes it (and then requantizes with :data:`Variant.FP32`).

    The rule, from the TFLite XNNPACK delegate's checks (VisitConv2DNode,
    VisitDepthwiseConv2DNode, VisitFullyConnectedNode and the tensor type checks) and XNNPACK's
    operator creation, restricted to what the DTPU delegate can claim at all (constant filters and
    bias, the four fused activations, symmetric int8 / per-tensor uint8 filters along the
    expected axis, per-tensor activations):

    * int8 and uint8 activations only (int16x8 and float32 are not XNNPACK *quantized* nodes);
    * CONV_2D and DEPTHWISE_CONV_2D need a bias tensor (FULLY_CONNECTED does not);
    * every scale (input, output, each filter channel) is a normal float32 (std::isnormal);
    * every requantization scale (s_in * s_w[c]) / s_out, in float32, is below 256; above, XNNPACK
      refuses to create the operator and the default interpreter cannot allocate the model at all.
    """
    if spec.mode not in (DataMode.INT8, DataMode.UINT8):
        return f"{spec.mode.value} is not an XNNPACK quantized type"
    if spec.kind is not OpKind.FULLY_CONNECTED and not spec.has_bias:
        return f"XNNPACK needs a bias tensor for {spec.kind.name}"
    scales = [*spec.input_q.scale, *spec.filter_q.scale, *spec.output_q.scale]
    if not all(np.isfinite(s) and abs(np.float32(s)) >= _FLT_MIN for s in scales):
        return "a scale is not a normal float32"
    if np.any(fp32_scales(spec) >= np.float32(256.0)):
        return ("a requantization scale is >= 256: XNNPACK fails to create the operator, and "
                "LiteRT's default interpreter cannot allocate the model")
    return None


# Which multiplier application each x86-64 kernel uses, established empirically (tests/
# test_reference.py keeps checking it). Keys: (runtime, rounding, op kind, mode, accumulator)
# where the accumulator is "int32" or "int64" (16x8 with int64 bias). None: the kernel does
# something dtpu.reference does not reproduce (docs/quantization.md says what).
_VARIANTS: dict[tuple[str, str, OpKind, DataMode, str], q.Variant | None] = {}


def _fill_variants() -> None:
    d, up, i64 = q.Variant.DOUBLE, q.Variant.DOUBLE_UP, q.Variant.INT64
    for runtime in RUNTIMES:
        for kind in OpKind:
            for mode in (DataMode.INT8, DataMode.UINT8, DataMode.INT16X8):
                for rounding in ("builtin", "reference"):
                    _VARIANTS[(runtime, rounding, kind, mode, "int32")] = d
                    _VARIANTS[(runtime, rounding, kind, mode, "int64")] = i64
    # tflite-runtime 2.14: the optimized CONV_2D and FULLY_CONNECTED kernels run their int8 and
    # int16 (int32-bias) GEMMs through ruy, whose x86 kernels round differently; uint8 and
    # depthwise do not.
    for kind in (OpKind.CONV_2D, OpKind.FULLY_CONNECTED):
        for mode in (DataMode.INT8, DataMode.INT16X8):
            _VARIANTS[(TFLITE_RUNTIME, "builtin", kind, mode, "int32")] = up
    # LiteRT 2.3's builtin kernels (what runs where XNNPACK declines, and BUILTIN_REF): uint8
    # CONV_2D and FULLY_CONNECTED also go through ruy; the optimized int8 DEPTHWISE_CONV_2D mixes
    # two roundings within one node (its vectorized and leftover channels differ) and its 16x8
    # FULLY_CONNECTED and the reference FULLY_CONNECTED round in ways not reproduced here.
    for kind in (OpKind.CONV_2D, OpKind.FULLY_CONNECTED):
        for mode in (DataMode.INT8, DataMode.UINT8):
            _VARIANTS[(LITERT, "builtin", kind, mode, "int32")] = up
    _VARIANTS[(LITERT, "builtin", OpKind.CONV_2D, DataMode.INT16X8, "int32")] = None  # not measured
    _VARIANTS[(LITERT, "builtin", OpKind.DEPTHWISE_CONV_2D, DataMode.INT8, "int32")] = None
    for rounding in ("builtin", "reference"):
        for mode in (DataMode.INT8, DataMode.UINT8, DataMode.INT16X8):
            for acc in ("int32", "int64"):
                _VARIANTS[(LITERT, rounding, OpKind.FULLY_CONNECTED, mode, acc)] = None
    _VARIANTS[(LITERT, "reference", OpKind.CONV_2D, DataMode.INT16X8, "int32")] = None  # not measured


_fill_variants()


def variant_table():
    """The measured requantization variant of each (runtime, rounding table, op kind, data mode,
    accumulator kind), None where not measured, read-only: what a build's RQ_EN must cover for
    the interpreters it equals (tests/test_rq_en.py checks the int8 board's mask against it)."""
    from types import MappingProxyType

    return MappingProxyType(_VARIANTS)


def accumulator_kind(spec: ConvSpec, bias: np.ndarray | None) -> str:
    """"int64" for 16x8 nodes with int64 bias (TFLite's int64-accumulator kernels), else "int32".

    TFLite picks the 16x8 kernel by the bias tensor's type: int64 bias selects the reference
    int64 kernel, int32 or no bias the int32 one.
    """
    if spec.mode is DataMode.INT16X8 and bias is not None and np.asarray(bias).dtype == np.int64:
        return "int64"
    return "int32"


def find_rounding_variant(spec: ConvSpec, bias: np.ndarray | None, rounding: str = "default",
                          runtime: str | None = None) -> tuple[q.Variant | None, str]:
    """(variant, why): the output stage of `runtime`'s interpreter for this node, and how it was
    chosen. The variant is None where dtpu.reference does not reproduce that kernel (a caller
    that must be exact leaves such a node to the CPU, with `why` as the reason).

    `rounding` is one of :data:`ROUNDINGS`: "default" (the interpreter as created without an op
    resolver argument: for ai_edge_litert that includes the XNNPACK delegate, see
    :func:`xnnpack_decline_reason`), "builtin" (BUILTIN_WITHOUT_DEFAULT_DELEGATES) or "reference"
    (BUILTIN_REF). `runtime` is one of :data:`RUNTIMES`; None means :func:`default_runtime`.
    """
    if rounding not in ROUNDINGS:
        raise ValueError(f"unknown rounding {rounding!r}; accepted: {', '.join(ROUNDINGS)}")
    runtime = _check_runtime(runtime)
    if not spec.mode.is_quantized:
        raise ValueError("float32 specs have no rounding variant")
    if runtime == LITERT and rounding == "default":
        declined = xnnpack_decline_reason(spec)
        if declined is None:
            return q.Variant.FP32, "LiteRT's default XNNPACK delegate takes the node"
        if "cannot allocate" in declined:
            return None, declined
        why = f"XNNPACK declines ({declined}): LiteRT builtin kernel"
    else:
        why = f"{runtime} {rounding} kernel"
    table = "builtin" if rounding == "default" else rounding
    variant = _VARIANTS[(runtime, table, spec.kind, spec.mode, accumulator_kind(spec, bias))]
    if variant is None:
        return None, f"{why} ({spec.kind.name} {spec.mode.value}) is not reproduced by dtpu.reference"
    return variant, why


def rounding_variant(spec: ConvSpec, bias: np.ndarray | None, rounding: str = "default",
                     runtime: str | None = None) -> q.Variant:
    """The output stage `runtime`'s interpreter applies to this node (see find_rounding_variant);
    raises ValueError where dtpu.reference does not reproduce it."""
    variant, why = find_rounding_variant(spec, bias, rounding, runtime)
    if variant is None:
        raise ValueError(why)
    return variant


def requantize(spec: ConvSpec, acc: np.ndarray, bias: np.ndarray | None, *,
               rounding: str = "default", variant: q.Variant | str | None = None,
               runtime: str | None = None) -> np.ndarray:
    """Finish an accumulation as TFLite's output stage does: bias, rescale, zero point, clamp.

    `variant` overrides the rounding table (for experiments and for hardware that implements a
    fixed variant); by default the variant is the one `runtime`'s kernel for this node uses.
    """
    if spec.mode is DataMode.FLOAT32:
        lo, hi = activation_range(spec)
        y = np.asarray(acc, dtype=np.float64)
        if bias is not None:
            y = y + np.asarray(bias, dtype=np.float64)
        return np.clip(y, lo, hi).astype(np.float32)
    variant = (rounding_variant(spec, bias, rounding, runtime) if variant is None
               else q.Variant(variant))
    lo, hi = activation_range(spec, variant)
    total = np.asarray(acc, dtype=np.int64)
    if bias is not None:
        total = total + np.asarray(bias, dtype=np.int64)
    if variant is not q.Variant.INT64:
        # The kernels accumulate in int32; wrap like them unless no valid input can overflow.
        b_max = 0 if bias is None else int(np.max(np.abs(np.asarray(bias, dtype=np.int64)), initial=0))
        if _accumulator_bound(spec) + b_max >= 1 << 31:
            total = q.wrap_int32(total)
    if variant is q.Variant.FP32:
        y = q.requantize_fp32(total, fp32_scales(spec), int(spec.output_q.zero_point[0]), lo, hi)
        return y.astype(io_dtypes(spec)[0])
    mult, shift = output_multipliers(spec)
    scaled = q.multiply_by_quantized_multiplier(total, mult, shift, variant=variant)
    if spec.mode is not DataMode.INT16X8:  # the 16x8 kernels have no output offset
        scaled = scaled + int(spec.output_q.zero_point[0])
    return np.clip(scaled, lo, hi).astype(io_dtypes(spec)[0])


def run(spec: ConvSpec, x: np.ndarray, filters: np.ndarray, bias: np.ndarray | None, *,
        rounding: str = "default", runtime: str | None = None,
        variant: q.Variant | str | None = None) -> np.ndarray:
    """The whole node, bit-exact with `runtime`'s default (or, with rounding="reference",
    BUILTIN_REF) CPU interpreter; float32 within float32 summation-order differences."""
    if not spec.has_bias:
        bias = None
    return requantize(spec, accumulate(spec, x, filters), bias, rounding=rounding,
                      runtime=runtime, variant=variant)
