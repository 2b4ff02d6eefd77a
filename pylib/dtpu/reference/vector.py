"""Numpy twins of TFLite 2.14's int8/uint8 kernels for the vector unit's operators: ADD, SUB, MUL,
AVERAGE_POOL_2D, MAX_POOL_2D and MEAN over H and W.

The vector unit (docs/architecture.md, "The vector unit") computes exactly these integer
formulas, so each operator is split in two: ``*_params`` turns the tensors' float32 scales into the
integers the hardware is given (multipliers, shifts, offsets, clamp bounds: TFLite's Prepare), and
the kernel function applies them (TFLite's Eval). The golden model and the tests use the same
pair, and tests/test_vector_reference.py proves each against the interpreter on one-op graphs.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from dtpu.reference import quantize as q

#: TFLite's ADD / SUB left shift of the offset inputs for 8-bit types (add.cc, sub.cc)
ADD_LEFT_SHIFT = 20
ACTIVATIONS = ("NONE", "RELU", "RELU6", "RELU_N1_TO_1")


def dtype_range(dtype) -> tuple[int, int]:
    info = np.iinfo(np.dtype(dtype))
    if info.bits != 8:
        raise ValueError(f"vector-unit operators take int8 or uint8 tensors, not {np.dtype(dtype)}")
    return int(info.min), int(info.max)


def activation_bounds(activation: str, scale: float, zero_point: int, dtype) -> tuple[int, int]:
    """CalculateActivationRangeQuantized: the fused activation's real bounds quantized with the
    output's scale (float32 division, ties away from zero), within the output type's range."""
    lo, hi = dtype_range(dtype)
    act = activation.upper()
    if act not in ACTIVATIONS:
        raise ValueError(f"fused activation {activation!r}; accepted: {', '.join(ACTIVATIONS)}")
    if act == "NONE":
        return lo, hi
    real_lo, real_hi = {"RELU": (0.0, None), "RELU6": (0.0, 6.0), "RELU_N1_TO_1": (-1.0, 1.0)}[act]
    lo = max(lo, q.quantize_value(real_lo, scale, zero_point))
    if real_hi is not None:
        hi = min(hi, q.quantize_value(real_hi, scale, zero_point))
    return lo, hi


def _multiplier(real: float) -> tuple[int, int]:
    m, s = q.quantize_multiplier(real)
    return int(m), int(s)


# ---------------------------------------------------------------------------------------------
# ADD / SUB

@dataclass(frozen=True)
class AddParams:
    """The integers of one quantized ADD or SUB (TFLite's ArithmeticParams for 8-bit types)."""
    input1_offset: int
    input2_offset: int
    output_offset: int
    input1_multiplier: int
    input1_shift: int
    input2_multiplier: int
    input2_shift: int
    output_multiplier: int
    output_shift: int
    act_min: int
    act_max: int
    left_shift: int = ADD_LEFT_SHIFT


def add_params(scale1: float, zp1: int, scale2: float, zp2: int, out_scale: float, out_zp: int,
               dtype, activation: str = "NONE", *, sub: bool = False) -> AddParams:
    """Prepare of ADD (add.cc) and SUB (sub.cc, PrepareGeneralSubOp) for int8/uint8: the inputs
    are brought to a common scale 2 * max(s1, s2) after a left shift of 20 bits, the sum scaled
    to the output. SUB negates input 2's multiplier (the same kernel then adds)."""
    s1, s2, so = (float(np.float32(s)) for s in (scale1, scale2, out_scale))
    twice_max = 2.0 * max(s1, s2)
    m1, sh1 = _multiplier(s1 / twice_max)
    m2, sh2 = _multiplier(s2 / twice_max)
    mo, sho = _multiplier(twice_max / ((1 << ADD_LEFT_SHIFT) * so))
    lo, hi = activation_bounds(activation, out_scale, out_zp, dtype)
    return AddParams(-int(zp1), -int(zp2), int(out_zp), m1, sh1, -m2 if sub else m2, sh2, mo, sho,
                     lo, hi)


def add(x1: np.ndarray, x2: np.ndarray, p: AddParams) -> np.ndarray:
    """AddElementwise / BroadcastAdd4DSlow of 8-bit tensors (numpy broadcasting covers TFLite's
    broadcast of either operand): each offset input shifted left 20 bits and scaled to the common
    scale, the sum scaled to the output (two roundings each: MultiplyByQuantizedMultiplier-
    SmallerThanOneExp), plus the output offset, clamped."""
    dtype = np.result_type(x1.dtype, x2.dtype)
    a = (x1.astype(np.int64) + p.input1_offset) << p.left_shift
    b = (x2.astype(np.int64) + p.input2_offset) << p.left_shift
    a = q.multiply_by_quantized_multiplier(a, p.input1_multiplier, p.input1_shift)
    b = q.multiply_by_quantized_multiplier(b, p.input2_multiplier, p.input2_shift)
    raw = q.multiply_by_quantized_multiplier(q.wrap_int32(a + b), p.output_multiplier,
                                             p.output_shift) + p.output_offset
    return np.clip(raw, p.act_min, p.act_max).astype(dtype)


# ---------------------------------------------------------------------------------------------
# MUL

@dataclass(frozen=True)
class MulParams:
    input1_offset: int
    input2_offset: int
    output_offset: int
    output_multiplier: int
    output_shift: int
    act_min: int
    act_max: int


def mul_params(scale1: float, zp1: int, scale2: float, zp2: int, out_scale: float, out_zp: int,
               dtype, activation: str = "NONE") -> MulParams:
    """Prepare of MUL (mul.cc): one multiplier s1 * s2 / s_out, evaluated in double from the
    float32 scales."""
    s1, s2, so = (float(np.float32(s)) for s in (scale1, scale2, out_scale))
    m, s = _multiplier(s1 * s2 / so)
    lo, hi = activation_bounds(activation, out_scale, out_zp, dtype)
    return MulParams(-int(zp1), -int(zp2), int(out_zp), m, s, lo, hi)


def mul(x1: np.ndarray, x2: np.ndarray, p: MulParams) -> np.ndarray:
    """MulElementwise / BroadcastMul4DSlow of 8-bit tensors: the product of the offset inputs
    (|product| <= 2^16) scaled by MultiplyByQuantizedMultiplier, plus the output offset, clamped."""
    dtype = np.result_type(x1.dtype, x2.dtype)
    prod = (x1.astype(np.int64) + p.input1_offset) * (x2.astype(np.int64) + p.input2_offset)
    raw = q.multiply_by_quantized_multiplier(prod, p.output_multiplier, p.output_shift)
    return np.clip(raw + p.output_offset, p.act_min, p.act_max).astype(dtype)


# ---------------------------------------------------------------------------------------------
# AVERAGE_POOL_2D / MAX_POOL_2D

@dataclass(frozen=True)
class PoolGeometry:
    """A pooling window walk: filter, strides and the top/left padding TFLite derives (the
    padded taps are not counted: an average divides by the taps inside the image)."""
    fh: int
    fw: int
    sh: int
    sw: int
    pad_top: int
    pad_left: int
    oh: int
    ow: int


def pool_geometry(h: int, w: int, filter_hw: tuple[int, int], stride_hw: tuple[int, int],
                  padding: str) -> PoolGeometry:
    """ComputePaddingHeightWidth with dilation 1: SAME gives ceil(in / stride) outputs and
    pads max(0, ((out - 1) * stride + filter - in)) // 2 before; VALID none."""
    (fh, fw), (sh, sw) = filter_hw, stride_hw
    if min(fh, fw, sh, sw) < 1:
        raise ValueError(f"pool filter {filter_hw} and strides {stride_hw} must be >= 1")
    pad = padding.upper()
    if pad == "SAME":
        oh, ow = -(-h // sh), -(-w // sw)
        pt = max(0, ((oh - 1) * sh + fh - h) // 2)
        pl = max(0, ((ow - 1) * sw + fw - w) // 2)
    elif pad == "VALID":
        oh, ow = (h - fh) // sh + 1, (w - fw) // sw + 1
        pt = pl = 0
    else:
        raise ValueError(f"pool padding {padding!r}; accepted: SAME, VALID")
    if oh < 1 or ow < 1:
        raise ValueError(f"pool of {fh}x{fw} over {h}x{w} ({padding}) has no output")
    return PoolGeometry(fh, fw, sh, sw, pt, pl, oh, ow)


def _pool_taps(x: np.ndarray, g: PoolGeometry):
    """Each output's window as (N, OH, OW, FH*FW, C) values and a mask of the taps inside."""
    n, h, w, c = x.shape
    ys = np.arange(g.oh)[:, None] * g.sh - g.pad_top + np.arange(g.fh)[None, :]   # (OH, FH)
    xs = np.arange(g.ow)[:, None] * g.sw - g.pad_left + np.arange(g.fw)[None, :]  # (OW, FW)
    yin = (ys >= 0) & (ys < h)
    xin = (xs >= 0) & (xs < w)
    yi, xi = np.clip(ys, 0, h - 1), np.clip(xs, 0, w - 1)
    taps = x[:, yi[:, None, :, None], xi[None, :, None, :], :]          # N, OH, OW, FH, FW, C
    mask = yin[:, None, :, None] & xin[None, :, None, :]                 # OH, OW, FH, FW
    return (taps.reshape(n, g.oh, g.ow, g.fh * g.fw, c),
            mask.reshape(g.oh, g.ow, g.fh * g.fw))


def average_pool(x: np.ndarray, g: PoolGeometry, act_min: int, act_max: int) -> np.ndarray:
    """AveragePool of 8-bit NHWC: the sum of the taps inside the image divided by their count,
    rounded half away from zero ((sum +- count / 2) / count, C++ truncating division), clamped.
    Input and output share scale and zero point (TFLite requires it), so no requantization.
    The sum folds the FH*FW strided views of the zero-padded image (as :func:`max_pool`): a
    (taps x channels) array per output took most of an Inception pool's time; a single
    window (a global pool) is one sum over its slice; a window's count is its rows inside
    times its columns inside."""
    n, h, w, c = x.shape
    # 8-bit taps: int32 holds the sum of up to 2^23 of them
    acc_dt = np.int32 if g.fh * g.fw <= 1 << 23 else np.int64
    if g.oh == g.ow == 1:
        # one window (a global pool: DS-CNN's 25x5, ResNet-8's 8x8): one sum over its slice
        y0, x0 = max(-g.pad_top, 0), max(-g.pad_left, 0)
        y1, x1 = max(min(g.fh - g.pad_top, h), 0), max(min(g.fw - g.pad_left, w), 0)
        s = x[:, y0:y1, x0:x1].sum(axis=(1, 2), dtype=acc_dt, keepdims=True)
    else:
        hp = max(g.pad_top + h, (g.oh - 1) * g.sh + g.fh)
        wp = max(g.pad_left + w, (g.ow - 1) * g.sw + g.fw)
        padded = np.zeros((n, hp, wp, c), acc_dt)
        padded[:, g.pad_top:g.pad_top + h, g.pad_left:g.pad_left + w] = x
        s = None
        for dy in range(g.fh):
            for dx in range(g.fw):
                tap = padded[:, dy:dy + (g.oh - 1) * g.sh + 1:g.sh,
                             dx:dx + (g.ow - 1) * g.sw + 1:g.sw]
                s = tap.copy() if s is None else np.add(s, tap, out=s)
    ys = np.arange(g.oh)[:, None] * g.sh - g.pad_top + np.arange(g.fh)[None, :]   # (OH, FH)
    xs = np.arange(g.ow)[:, None] * g.sw - g.pad_left + np.arange(g.fw)[None, :]  # (OW, FW)
    rows = ((ys >= 0) & (ys < h)).sum(axis=1)
    cols = ((xs >= 0) & (xs < w)).sum(axis=1)
    count = (rows[:, None] * cols[None, :]).astype(acc_dt)[None, :, :, None]
    half = count // 2
    num = np.where(s > 0, s + half, s - half)
    avg = np.sign(num) * (np.abs(num) // count)
    return np.clip(avg, act_min, act_max).astype(x.dtype)


def max_pool(x: np.ndarray, g: PoolGeometry, act_min: int, act_max: int) -> np.ndarray:
    """MaxPool of 8-bit NHWC: the largest tap inside the image, clamped. The image is padded
    with the type's minimum (a tap outside never wins, and a window with none inside gives the
    minimum, as TFLite's running max starts there), then the FH*FW strided views are folded
    with np.maximum: no (taps x channels) array per output (ResNet's 3x3 pool took ~8 % of an
    invoke of the golden model that way)."""
    n, h, w, c = x.shape
    lo = np.iinfo(x.dtype).min
    hp = max(g.pad_top + h, (g.oh - 1) * g.sh + g.fh)
    wp = max(g.pad_left + w, (g.ow - 1) * g.sw + g.fw)
    padded = np.full((n, hp, wp, c), lo, x.dtype)
    padded[:, g.pad_top:g.pad_top + h, g.pad_left:g.pad_left + w] = x
    m = None
    for dy in range(g.fh):
        for dx in range(g.fw):
            tap = padded[:, dy:dy + (g.oh - 1) * g.sh + 1:g.sh, dx:dx + (g.ow - 1) * g.sw + 1:g.sw]
            m = tap.copy() if m is None else np.maximum(m, tap, out=m)
    return np.clip(m, act_min, act_max).astype(x.dtype)


# ---------------------------------------------------------------------------------------------
# MEAN over H and W

@dataclass(frozen=True)
class MeanParams:
    """The integers of one MEAN over H and W: the input's zero point times the count is taken
    off the sum, which is scaled by (s_in / s_out) / count folded into one multiplier and shift."""
    count: int
    input_offset: int
    multiplier: int
    shift: int
    out_zp: int
    lo: int
    hi: int


def mean_params(in_scale: float, in_zp: int, out_scale: float, out_zp: int, count: int,
                dtype) -> MeanParams:
    """Prepare of MEAN (reduce.cc PrepareMeanOrSum: QuantizeMultiplier(s_in / s_out) in double)
    and QuantizedMeanOrSum's readaptation to a mean: the multiplier shifted left by
    min(floor(log2(count)), 32, 31 + shift) bits and divided by count (int64, truncating), the
    shift lowered by as much. TFLite 2.14 takes this integer path for keep_dims false whether or
    not the scales are equal."""
    if count < 1:
        raise ValueError(f"MEAN over {count} elements; accepted: at least 1")
    lo, hi = dtype_range(dtype)
    m, s = _multiplier(float(np.float32(in_scale)) / float(np.float32(out_scale)))
    k = min(count.bit_length() - 1, 32, 31 + s)
    m = int((m << k) // count)  # k >= 0: count >= 1 and QuantizeMultiplier keeps shift >= -31
    return MeanParams(int(count), -int(in_zp), m, s - k, int(out_zp), lo, hi)


def mean_keep_dims_params(in_scale: float, in_zp: int, out_scale: float, out_zp: int,
                          count: int, dtype) -> MeanParams:
    """The integers of MEAN over H and W with keep_dims true: TFLite 2.14 runs it through
    optimized_ops::Mean / optimized_integer_ops::Mean, which compute them in float32 at each
    Eval: the raw sum (no input offset) is scaled by QuantizeMultiplier(s_in / (count * s_out))
    and a bias ``out_zp - (int)round_half_away(in_zp * s_in / s_out)`` is added. The same
    sum -> scale -> offset -> clamp as :func:`mean_hw`, other integers (checked against the
    interpreter: tests/test_mean_keep_dims.py)."""
    if count < 1:
        raise ValueError(f"MEAN over {count} elements; accepted: at least 1")
    lo, hi = dtype_range(dtype)
    f32 = np.float32
    temp = f32(in_zp) * f32(in_scale) / f32(out_scale)
    temp = temp + f32(0.5) if temp > 0 else temp - f32(0.5)
    if not abs(float(temp)) < 2.0 ** 31:
        raise ValueError(f"MEAN: zero-point term {float(temp)} outside int32")
    bias = int(out_zp) - int(np.trunc(temp))          # static_cast<int32_t> truncates
    m, s = _multiplier(float(f32(in_scale) / (f32(count) * f32(out_scale))))
    return MeanParams(int(count), 0, m, s, bias, lo, hi)


def mean_hw(x: np.ndarray, p: MeanParams) -> np.ndarray:
    """MEAN of 8-bit NHWC over H and W, keep_dims false: (N, C)."""
    s = x.astype(np.int64).sum(axis=(1, 2)) + p.input_offset * p.count
    out = q.multiply_by_quantized_multiplier(q.wrap_int32(s), p.multiplier, p.shift) + p.out_zp
    return np.clip(out, p.lo, p.hi).astype(x.dtype)
