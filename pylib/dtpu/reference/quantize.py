"""TFLite's fixed-point requantization primitives, vectorized over numpy integer arrays.

TFLite turns an int32/int64 accumulator into an output integer by multiplying with a real scale
that it has encoded as a Q0.31 multiplier and a power-of-two shift. The encoding is fixed, but
the *application* of the multiplier differs between kernels (where ties go, one or two roundings,
32 or 64 bit accumulators), and those differences show up as ±1 on ties. Every variant TFLite 2.14 uses
on x86-64 is reproduced here so that :mod:`dtpu.reference.conv` can pick the one each kernel
really runs (see docs/quantization.md for which is which). LiteRT's default interpreter hands its
int8/uint8 convolutions to XNNPACK, which does not use (multiplier, shift) at all but a float32
scale (:data:`Variant.FP32`, :func:`requantize_fp32`).

All functions accept scalars or arrays and compute in int64; the comments bound every
intermediate below 2^63 so no Python-int fallback is needed.
"""
from __future__ import annotations

import enum
import math

import numpy as np

INT32_MIN = -(1 << 31)
INT32_MAX = (1 << 31) - 1


class Variant(str, enum.Enum):
    """How a kernel applies a (multiplier, shift) pair to an accumulator."""

    # gemmlowp/TFLite reference: optional exact left shift, SaturatingRoundingDoublingHighMul
    # (round(x*m / 2^31), ties towards +infinity), then RoundingDivideByPOT (ties away from
    # zero). Two roundings, so a value can be pushed onto a tie by the first one.
    DOUBLE = "double"
    # ruy's x86 SIMD kernels (AVX2, AVX-512), which TFLite's optimized CONV_2D / FULLY_CONNECTED
    # reach through cpu_backend_gemm: the same two steps as DOUBLE, but the final shift also rounds
    # ties towards +infinity, so the two differ exactly on negative ties of that shift.
    DOUBLE_UP = "double_up"
    # ruy's portable MultiplyByQuantizedMultiplier (its C++ fallback on CPUs without AVX, and
    # TFLITE_SINGLE_ROUNDING builds): one rounding of x*m / 2^(31-shift), ties towards +infinity.
    # No kernel of tflite-runtime 2.14 on an AVX2/AVX-512 x86-64 machine uses it.
    SINGLE = "single"
    # TFLite's MultiplyByQuantizedMultiplier(int64_t x, ...) used by the 16x8 kernels with int64
    # bias: the multiplier is first reduced to 16 bits (rounded), then one rounding of
    # x*m16 / 2^(15-shift), ties towards +infinity.
    INT64 = "int64"
    # XNNPACK's "fp32" requantization (LiteRT's default delegate for int8/uint8 CONV_2D,
    # DEPTHWISE_CONV_2D and FULLY_CONNECTED on x86-64): the int32 accumulator is converted to
    # float32, multiplied by the float32 scale (s_in * s_w[c]) / s_out, clamped in float and
    # rounded to nearest, ties to even. See requantize_fp32.
    FP32 = "fp32"


def _as_i64(x) -> np.ndarray:
    return np.asarray(x, dtype=np.int64)


def wrap_int32(x) -> np.ndarray:
    """Two's-complement wrap to int32, as the C++ kernels' int32 arithmetic does on x86."""
    x = _as_i64(x)
    return ((x - INT32_MIN) & 0xFFFFFFFF) + INT32_MIN


def _round_half_away(x: np.ndarray) -> np.ndarray:
    """std::round (TfLiteRound): ties away from zero, unlike np.round's ties to even.

    Written without adding 0.5 (which is inexact for floats just below a half) so it is exact
    for every float32/float64 input.
    """
    x = np.asarray(x)
    t = np.trunc(x)
    return np.where(np.abs(x - t) >= 0.5, t + np.sign(x), t)


def quantize_multiplier(real) -> tuple[np.ndarray, np.ndarray]:
    """TFLite's QuantizeMultiplier: real = multiplier * 2^(shift - 31), multiplier in [2^30, 2^31).

    The significand comes from frexp and is rounded half away from zero (std::round), so it can
    reach 2^31 exactly; TFLite then halves it and bumps the exponent. Multipliers below ~2^-31
    would need a right shift beyond 31 bits; TFLite flushes them to (0, 0) instead. Scalars give
    numpy scalars, arrays give arrays (int32 multiplier, int64 shift).
    """
    r = np.asarray(real, dtype=np.float64)
    q, shift = np.frexp(r)
    # q * 2^31 is exact (power-of-two scaling of a double): this is std::round(q * (1LL << 31)).
    q_fixed = _round_half_away(q * float(1 << 31)).astype(np.int64)
    shift = shift.astype(np.int64)
    edge = q_fixed == (1 << 31)
    q_fixed = np.where(edge, q_fixed // 2, q_fixed)
    shift = np.where(edge, shift + 1, shift)
    tiny = shift < -31
    q_fixed = np.where(tiny, 0, q_fixed)
    shift = np.where(tiny | (r == 0), 0, shift)
    q_fixed = np.where(r == 0, 0, q_fixed)
    if np.any(np.abs(q_fixed) > INT32_MAX):  # unreachable for finite input; TFLite CHECKs it
        raise ValueError("multiplier does not fit int32")
    return q_fixed.astype(np.int32)[()], shift[()]


def saturating_rounding_doubling_high_mul(a, b) -> np.ndarray:
    """gemmlowp's SaturatingRoundingDoublingHighMul on int32 values: round(a*b / 2^31).

    The nudge (2^30, or 1-2^30 for negative products) combined with C++'s truncating division
    makes ties go towards +infinity on both signs (like ARM's SQRDMULH). The single overflowing
    case INT32_MIN * INT32_MIN saturates to INT32_MAX.
    |a*b| <= 2^62, so the int64 product cannot overflow. Returns int64 holding int32 values.
    """
    a, b = _as_i64(a), _as_i64(b)
    # gemmlowp adds 2^30 (or 1 - 2^30 if ab < 0) and divides by 2^31 truncating towards zero.
    # For ab < 0 that is -floor((-ab + 2^30 - 1) / 2^31) = floor((ab + 2^30) / 2^31) (since
    # ceil(n/d) = floor((n+d-1)/d)), the same expression as for ab >= 0: one add and one
    # arithmetic shift. |a*b| <= 2^62, so nothing overflows int64.
    high = (a * b + (1 << 30)) >> 31
    overflow = (a == INT32_MIN) & (b == INT32_MIN)
    if np.any(overflow):
        high = np.where(overflow, INT32_MAX, high)
    return high[()]


def _split_exponent(exponent) -> tuple[np.ndarray, np.ndarray]:
    """(exponent, 2^(exponent-1) or 0) on the exponent's own (usually per-channel) shape."""
    e = _as_i64(exponent)
    if np.any((e < 0) | (e > 62)):
        raise ValueError("exponent must be within [0, 62]")
    return e, np.where(e > 0, np.int64(1) << np.maximum(e - 1, 0), 0)


def rounding_divide_by_pot(x, exponent) -> np.ndarray:
    """gemmlowp's RoundingDivideByPOT: x / 2^exponent rounded half away from zero.

    gemmlowp compares the remainder with a threshold raised by one for negative x; equivalently
    floor((x + half - [x < 0]) / 2^e) with half = 2^(e-1), because for x < 0 rounding half away is
    -floor((-x + half) / 2^e) = floor((x + half - 1) / 2^e). Works on any int64 x with
    0 <= exponent <= 62 (TFLite only uses int32 x and exponents <= 31); per-channel exponents
    broadcast against x.
    """
    x = _as_i64(x)
    e, half = _split_exponent(exponent)
    return ((x + (half - ((x < 0) & (e > 0)))) >> e)[()]


def rounding_shift_right_half_up(x, exponent) -> np.ndarray:
    """floor((x + 2^(exponent-1)) / 2^exponent): the "add half then arithmetic shift" rounding.

    Ties go towards +infinity. exponent 0 returns x unchanged. The caller guarantees that
    x + 2^(exponent-1) fits in int64.
    """
    x = _as_i64(x)
    e, half = _split_exponent(exponent)
    return ((x + half) >> e)[()]


def multiply_by_quantized_multiplier(x, multiplier, shift, *, variant: Variant | str = Variant.DOUBLE):
    """Scale accumulators `x` by multiplier * 2^(shift-31) the way one TFLite kernel family does.

    - ``double``: TFLite's reference MultiplyByQuantizedMultiplier(int32_t, ...) (and gemmlowp's
      output stage). A positive shift is applied first as an int32 left shift (wrapping like the
      C++ code would), then SRDHM (ties up) and RoundingDivideByPOT (ties away from zero).
    - ``double_up``: ruy's x86 kernels: the same exact left shift, then
      floor((x*m + 2^30) / 2^31) and floor((r + 2^(right-1)) / 2^right).
    - ``single``: ruy's MultiplyByQuantizedMultiplier (and TFLITE_SINGLE_ROUNDING): one
      rounding, half up. |x*m| < 2^62 so int64 suffices.
    - ``int64``: TFLite's MultiplyByQuantizedMultiplier(int64_t, ...) for 16x8 kernels, valid for
      |x| < 2^47 (TFLite asserts the same): the multiplier is reduced to 16 bits, so
      |x * m16| < 2^62.

    Returns int64 holding the int32 result (the kernels cast it to int32 before adding the
    output zero point; a caller that needs the wrap applies :func:`wrap_int32`).
    """
    variant = Variant(variant)
    x = _as_i64(x)
    m = _as_i64(multiplier)
    s = _as_i64(shift)
    if variant in (Variant.DOUBLE, Variant.DOUBLE_UP):
        left = np.maximum(s, 0)
        right = np.maximum(-s, 0)
        if np.any(left > 0):  # left shifts are rare (scale >= 1); skip the pass when absent
            x = wrap_int32(x << left)
        if variant is Variant.DOUBLE:
            return rounding_divide_by_pot(saturating_rounding_doubling_high_mul(x, m), right)
        # The SIMD code flags "high + nudge > INT32_MAX" and substitutes 1 << (31 - right), which
        # is exactly what the unbounded int64 arithmetic below yields, so no special case.
        high = (x * m + (1 << 30)) >> 31
        return wrap_int32(rounding_shift_right_half_up(high, right))
    if variant is Variant.SINGLE:
        return wrap_int32(rounding_shift_right_half_up(x * m, 31 - s))
    # INT64
    if variant is Variant.FP32:
        raise ValueError("Variant.FP32 scales by a float32 factor, not (multiplier, shift): use "
                         "requantize_fp32")
    reduced = np.where(m < 0x7FFF0000, (m + (1 << 15)) >> 16, 0x7FFF)
    return wrap_int32(rounding_shift_right_half_up(x * reduced, 15 - s))


def effective_scales(input_scale, filter_scales, output_scale, *,
                     float32_product: bool = False) -> np.ndarray:
    """input_scale * filter_scale[c] / output_scale, rounded exactly as TFLite 2.14 rounds it.

    TFLite stores scales as float32 and evaluates this in double, but in two different ways:
    PopulateConvolutionQuantizationParams' per-channel loop computes
    ``double(input_scale) * double(filter_scale) / double(output_scale)``, while
    GetQuantizedConvolutionMultipler (the scalar multiplier used by the uint8 kernels and by
    per-tensor FULLY_CONNECTED) multiplies the two float32 scales in float32 first:
    ``double(input_scale * filter_scale) / double(output_scale)``. The two can differ in the last
    bits of the multiplier, which moves an output by one when an accumulator sits on the edge.
    """
    i = np.float32(input_scale)
    f = np.asarray(filter_scales, dtype=np.float32)
    o = np.float64(np.float32(output_scale))
    if float32_product:
        return (i * f).astype(np.float64) / o
    return (np.float64(i) * f.astype(np.float64)) / o


def quantize_value(real: float, scale: float, zero_point: int) -> int:
    """TFLite's kernel_util Quantize(): zero_point + round(f / scale) with the division in float32.

    Used for activation bounds; std::round on a float rounds half away from zero.
    """
    tmp = np.float32(real) / np.float32(scale)
    tmp = float(_round_half_away(tmp))
    if not (INT32_MIN <= tmp <= INT32_MAX) or math.isnan(tmp):
        raise ValueError(f"activation bound {real} / scale {scale} overflows int32")
    return int(zero_point) + int(tmp)


# ---------------------------------------------------------------------------------------------
# XNNPACK's fp32 requantization (Variant.FP32)

_F32 = np.float32


def fp32_scales(input_scale, filter_scales, output_scale) -> np.ndarray:
    """XNNPACK's requantization scale per output channel, in float32 arithmetic.

    XNNPACK's operators (convolution-nhwc.c, fully-connected-nc.c) compute
    ``input_scale * kernel_scale[c] / output_scale`` on floats: the product is rounded to float32,
    then the quotient (both round to nearest even). Per-tensor filters give one scale repeated.
    Returns a float32 array (one entry per filter scale given).
    """
    i = _F32(input_scale)
    f = np.atleast_1d(np.asarray(filter_scales, dtype=_F32))
    o = _F32(output_scale)
    return (i * f) / o


def to_float32(x) -> np.ndarray:
    """Integers -> float32 rounded to nearest even, exactly as a C ``(float) int32`` cast.

    Through float64, which holds every |x| < 2^53 exactly, so only the final narrowing rounds.
    """
    x = _as_i64(x)
    if x.size and int(np.max(np.abs(x))) >= 1 << 53:
        raise ValueError("to_float32 expects |x| < 2^53")
    return x.astype(np.float64).astype(_F32)


def xnnpack_quantize(value: float, scale: float, zero_point: int, qmin: int, qmax: int) -> int:
    """xnn_qs8_quantize / xnn_qu8_quantize: how XNNPACK turns an activation bound (0, 6, -1, 1,
    +-inf) into an integer: ``lrintf(fminf(fmaxf(value / scale + (float) zero_point, qmin), qmax))``,
    all in float32, rounding to nearest even (TFLite's builtin kernels round half away from zero
    and add the zero point afterwards, see :func:`quantize_value`)."""
    with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
        v = _F32(value) / _F32(scale) + _F32(zero_point)
    v = min(max(v, _F32(qmin)), _F32(qmax))
    return int(np.rint(v))


def requantize_fp32(total, scale, zero_point: int, lo: int, hi: int) -> np.ndarray:
    """XNNPACK's fp32 output stage on int32 totals (accumulator + bias, already wrapped to int32).

    ``y = float(total) * scale`` in float32 (each step rounds to nearest even), clamped in float to
    ``[lo - zero_point, hi - zero_point]``, converted with round-to-nearest-even (lrintf / cvtps2dq
    / the magic-number add of XNNPACK's microkernels, which agree on every clamped value) and
    offset by the zero point. `scale` broadcasts against the last axis (per channel). Returns int64
    values in [lo, hi]. Clamping before or after the rounding is the same for integer bounds (the
    rounding is monotone and keeps integers), so hardware may saturate after rounding instead.
    """
    y = to_float32(total) * np.asarray(scale, dtype=_F32)
    zp = int(zero_point)
    y = np.clip(y, _F32(lo - zp), _F32(hi - zp))
    return np.rint(y).astype(np.int64) + zp
