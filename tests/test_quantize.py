"""Property tests of the requantization primitives against exact rational arithmetic.

The reference kernels are only as exact as these primitives, and ties are rare in real data, so
the properties here aim hypothesis at the boundaries (ties, powers of two, saturation) rather
than trusting end-to-end model comparisons to hit them.
"""
from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import assume, example, given, settings
from hypothesis import strategies as st

from dtpu.reference import quantize as q

INT32_MIN, INT32_MAX = q.INT32_MIN, q.INT32_MAX
int32s = st.integers(INT32_MIN, INT32_MAX)
multipliers = st.integers(1 << 30, INT32_MAX)  # what quantize_multiplier produces for reals > 0
shifts = st.integers(-31, 7)


def floor_half_up(r: Fraction) -> int:
    """round(r) with ties towards +infinity."""
    return math.floor(r + Fraction(1, 2))


def round_half_away(r: Fraction) -> int:
    n = math.floor(abs(r) + Fraction(1, 2))
    return n if r >= 0 else -n


# --- quantize_multiplier ----------------------------------------------------------------------


def exact_quantize_multiplier(real: float) -> tuple[int, int]:
    """QuantizeMultiplier written with Python's frexp and exact rational rounding."""
    if real == 0:
        return 0, 0
    frac, exp = math.frexp(real)
    fixed = round_half_away(Fraction(frac) * (1 << 31))
    if fixed == 1 << 31:
        fixed //= 2
        exp += 1
    if exp < -31:
        return 0, 0
    return fixed, exp


@given(st.floats(min_value=2.0 ** -45, max_value=2.0 ** 20, allow_nan=False, allow_infinity=False))
@example(1.0)
@example(0.5)
@example(2.0 ** -31)
@example(2.0 ** -32)
@example(2.0 ** -33)
@example(float(np.nextafter(1.0, 0.0)))   # rounds up to 2^31: halved, shift bumped
@example(float(np.nextafter(0.25, 1.0)))
@example(3.0)
@example(1234.5678)
def test_quantize_multiplier_reconstructs(real):
    m, shift = q.quantize_multiplier(real)
    assert (int(m), int(shift)) == exact_quantize_multiplier(real)
    if m == 0:
        assert real < 2.0 ** -32 + 2.0 ** -63  # flushed only below TFLite's shift limit
        return
    assert (1 << 30) <= m <= INT32_MAX
    assert -31 <= shift
    back = Fraction(int(m)) * Fraction(2) ** (int(shift) - 31)
    assert abs(back - Fraction(real)) <= Fraction(real) * Fraction(1, 1 << 31)


def test_quantize_multiplier_edges():
    assert q.quantize_multiplier(0.0) == (0, 0)
    for k in range(-31, 10):  # exact powers of two: multiplier exactly 2^30
        m, shift = q.quantize_multiplier(2.0 ** k)
        assert (int(m), int(shift)) == (1 << 30, k + 1)
    m, shift = q.quantize_multiplier(float(np.nextafter(1.0, 0.0)))
    assert (int(m), int(shift)) == (1 << 30, 1)
    assert q.quantize_multiplier(2.0 ** -33) == (0, 0)
    m, shift = q.quantize_multiplier(5.0)
    assert int(shift) == 3 and int(m) == 5 << 28  # 5 = 0.625 * 2^3


def test_quantize_multiplier_vectorized():
    reals = np.array([0.0, 2.0 ** -40, 0.3, 1.0, 7.25])
    m, shift = q.quantize_multiplier(reals)
    assert m.dtype == np.int32 and m.shape == (5,)
    assert [(int(a), int(b)) for a, b in zip(m, shift)] == [exact_quantize_multiplier(r) for r in reals]


# --- SaturatingRoundingDoublingHighMul --------------------------------------------------------


def exact_srdhm(a: int, b: int) -> int:
    if a == b == INT32_MIN:
        return INT32_MAX
    return floor_half_up(Fraction(a * b, 1 << 31))


@given(int32s, int32s)
@example(INT32_MIN, INT32_MIN)
@example(INT32_MIN, INT32_MAX)
@example(INT32_MAX, INT32_MAX)
@example(-1, 1 << 30)        # -0.5: tie, goes up to 0
@example(-3, 1 << 30)        # -1.5 -> -1
@example(1, 1 << 30)         # 0.5 -> 1
@example(0, INT32_MIN)
def test_srdhm_matches_exact(a, b):
    assert int(q.saturating_rounding_doubling_high_mul(a, b)) == exact_srdhm(a, b)


def test_srdhm_vectorized():
    rng = np.random.default_rng(1)
    a = rng.integers(INT32_MIN, INT32_MAX, 1000, endpoint=True)
    b = rng.integers(INT32_MIN, INT32_MAX, 1000, endpoint=True)
    a[:2] = INT32_MIN
    b[:2] = [INT32_MIN, INT32_MAX]
    got = q.saturating_rounding_doubling_high_mul(a, b)
    assert got.tolist() == [exact_srdhm(int(x), int(y)) for x, y in zip(a, b)]


# --- RoundingDivideByPOT ----------------------------------------------------------------------


@given(int32s, st.integers(0, 31))
@example(-4, 3)   # -0.5 -> -1 (away from zero)
@example(4, 3)    # 0.5 -> 1
@example(-12, 3)  # -1.5 -> -2
@example(INT32_MIN, 31)
@example(INT32_MAX, 31)
@example(INT32_MAX, 0)
def test_rounding_divide_by_pot_matches_fraction(x, exponent):
    assert int(q.rounding_divide_by_pot(x, exponent)) == round_half_away(Fraction(x, 1 << exponent))


@given(st.integers(-(1 << 62), (1 << 62) - 1), st.integers(0, 62))
def test_rounding_divide_by_pot_int64(x, exponent):
    assert int(q.rounding_divide_by_pot(x, exponent)) == round_half_away(Fraction(x, 1 << exponent))


def test_rounding_divide_by_pot_rejects_bad_exponent():
    with pytest.raises(ValueError):
        q.rounding_divide_by_pot(5, -1)


# --- multiply_by_quantized_multiplier ---------------------------------------------------------


@given(int32s, multipliers, st.integers(-31, 30))
@example(-1, 1 << 30, -1)
@example(1, 1 << 30, -1)
def test_single_rounding_matches_rational(x, m, shift):
    got = int(q.multiply_by_quantized_multiplier(x, m, shift, variant="single"))
    expect = floor_half_up(Fraction(x * m) * Fraction(2) ** (shift - 31))
    assume(INT32_MIN <= expect <= INT32_MAX)
    assert got == expect


@given(int32s, multipliers, shifts)
def test_double_rounding_composition(x, m, shift):
    """Both double variants are an exact left shift, a half-up high multiply, then a shift that
    rounds ties away from zero (reference) or up (ruy x86)."""
    left, right = max(shift, 0), max(-shift, 0)
    xs = ((x << left) - INT32_MIN) % (1 << 32) + INT32_MIN  # the kernels' int32 shift wraps
    high = exact_srdhm(xs, m)
    ref = int(q.multiply_by_quantized_multiplier(x, m, shift, variant="double"))
    ruy = int(q.multiply_by_quantized_multiplier(x, m, shift, variant="double_up"))
    assert ref == round_half_away(Fraction(high, 1 << right))
    assert ruy == floor_half_up(Fraction(high, 1 << right))
    if ref != ruy:  # they only ever disagree on a negative tie of the final shift
        assert Fraction(high, 1 << right) == ruy - Fraction(1, 2) and ruy == ref + 1 and high < 0


@given(st.integers(-(1 << 47), (1 << 47) - 1), multipliers, st.integers(-31, 7))
def test_int64_variant_matches_rational(x, m, shift):
    reduced = 0x7FFF if m >= 0x7FFF0000 else (m + (1 << 15)) >> 16
    expect = floor_half_up(Fraction(x * reduced) * Fraction(2) ** (shift - 15))
    assume(INT32_MIN <= expect <= INT32_MAX)
    assert int(q.multiply_by_quantized_multiplier(x, m, shift, variant="int64")) == expect


def test_double_rounding_differs_from_single_on_known_cases():
    # x*m/2^31 = 0.5 exactly, then /2: double gives round(0.5)=1 -> 1/2 -> 1; single gives 0.
    assert int(q.multiply_by_quantized_multiplier(1, 1 << 30, -1, variant="double")) == 1
    assert int(q.multiply_by_quantized_multiplier(1, 1 << 30, -1, variant="single")) == 0
    # -8 * 2^-4 = -0.5: reference rounds away (-1), ruy's x86 kernels round up (0).
    assert int(q.multiply_by_quantized_multiplier(-8, 1 << 30, -3, variant="double")) == -1
    assert int(q.multiply_by_quantized_multiplier(-8, 1 << 30, -3, variant="double_up")) == 0


def test_vectorized_over_channels():
    x = np.arange(-50, 50).reshape(10, 10)
    m = np.full(10, 1 << 30)
    shift = np.arange(-9, 1)
    for variant in (v for v in q.Variant if v is not q.Variant.FP32):  # FP32 has no (m, shift)
        got = q.multiply_by_quantized_multiplier(x, m, shift, variant=variant)
        assert got.shape == (10, 10)
        for i in range(10):
            for j in range(10):
                assert got[i, j] == q.multiply_by_quantized_multiplier(int(x[i, j]), int(m[j]), int(shift[j]),
                                                                       variant=variant)


# --- helpers used by the kernels --------------------------------------------------------------


@settings(max_examples=300)
@given(st.floats(-1e3, 1e3, allow_nan=False), st.floats(1e-5, 10.0), st.integers(-128, 127))
def test_quantize_value_float32_division(real, scale, zp):
    expect = zp + round_half_away(Fraction(float(np.float32(real) / np.float32(scale))))
    assert q.quantize_value(real, scale, zp) == expect


def test_quantize_value_rejects_int32_overflow():
    with pytest.raises(ValueError):
        q.quantize_value(6.0, 1e-9, 0)


def test_quantize_value_ties_away_from_zero():
    assert q.quantize_value(-1.0, 2.0, 0) == -1   # -0.5
    assert q.quantize_value(1.0, 2.0, 0) == 1
    assert q.quantize_value(6.0, 4.0, 3) == 5     # 1.5 -> 2


def test_effective_scales_uses_float32_inputs_in_double():
    i, f, o = 0.1, [0.3, 0.7], 0.9
    expect = [float(np.float32(i)) * float(np.float32(x)) / float(np.float32(o)) for x in f]
    assert q.effective_scales(i, f, o).tolist() == expect


def test_effective_scales_float32_product_path():
    """The scalar path multiplies the float32 scales in float32; it does change multipliers."""
    i, o = np.float32(0.0078428099), np.float32(0.0124284411)
    f = np.float32(0.0042768368)
    scalar = q.effective_scales(i, [f], o, float32_product=True)[0]
    assert scalar == float(np.float32(i * f)) / float(o)
    differs = 0
    rng = np.random.default_rng(0)
    for a, b in rng.uniform(1e-3, 1e-1, (200, 2)):
        m1, _ = q.quantize_multiplier(q.effective_scales(a, [b], 0.3))
        m2, _ = q.quantize_multiplier(q.effective_scales(a, [b], 0.3, float32_product=True))
        differs += int(m1[0] != m2[0])
    assert differs > 100


# --- XNNPACK's fp32 requantization (Variant.FP32) ---------------------------------------------


def f32_nearest(r: Fraction) -> Fraction:
    """The float32 nearest to r, ties to even (normal range; what every float32 op returns)."""
    if r == 0:
        return Fraction(0)
    sign = -1 if r < 0 else 1
    a = abs(r)
    e = math.floor(math.log2(a))
    while Fraction(2) ** e > a:
        e -= 1
    while Fraction(2) ** (e + 1) <= a:
        e += 1
    ulp = Fraction(2) ** (e - 23)
    n = a / ulp
    lo = math.floor(n)
    rem = n - lo
    k = lo + (1 if rem > Fraction(1, 2) or (rem == Fraction(1, 2) and lo % 2) else 0)
    return sign * k * ulp


def round_half_even(r: Fraction) -> int:
    lo = math.floor(r)
    rem = r - lo
    return lo + (1 if rem > Fraction(1, 2) or (rem == Fraction(1, 2) and lo % 2) else 0)


def exact_fp32_requant(total: int, i: float, w: float, o: float, zp: int, lo: int, hi: int) -> int:
    s = f32_nearest(f32_nearest(Fraction(i) * Fraction(w)) / Fraction(o))
    y = f32_nearest(f32_nearest(Fraction(total)) * s)
    y = min(max(y, Fraction(lo - zp)), Fraction(hi - zp))
    return round_half_even(y) + zp


f32_scales = st.floats(min_value=2.0 ** -20, max_value=1.0, allow_nan=False, width=32)


@given(int32s, f32_scales, f32_scales, f32_scales, st.integers(-128, 127))
@example(5, 0.5, 1.0, 2.0, 0)              # 5 * 0.25 = 1.25 -> 1
@example(6, 0.5, 1.0, 2.0, 0)              # 1.5 -> 2 (tie to even)
@example(10, 0.5, 1.0, 2.0, 0)             # 2.5 -> 2 (tie to even)
@example(-10, 0.5, 1.0, 2.0, 3)            # -2.5 -> -2
@example((1 << 24) + 1, 1.0, 2.0 ** -20, 1.0, 0)  # the int32 -> float32 conversion rounds
def test_requantize_fp32_matches_exact(total, i, w, o, zp):
    scale = q.fp32_scales(i, [w], o)
    assert scale.dtype == np.float32
    assume(float(scale[0]) < 256.0 and float(scale[0]) > 2.0 ** -100)
    lo, hi = -128, 127
    got = int(q.requantize_fp32(np.array([total]), scale, zp, lo, hi)[0])
    assert got == exact_fp32_requant(total, i, w, o, zp, lo, hi)


@given(st.integers(-(1 << 31), (1 << 31) - 1))
@example((1 << 24) + 1)
@example((1 << 24) + 3)
@example(-(1 << 31))
def test_to_float32_rounds_to_nearest_even(x):
    assert Fraction(float(q.to_float32(np.array([x]))[0])) == f32_nearest(Fraction(x))


@given(st.sampled_from([0.0, 6.0, -1.0, 1.0, math.inf, -math.inf]),
       st.floats(min_value=2.0 ** -10, max_value=10.0, allow_nan=False, width=32), st.integers(-128, 127))
def test_xnnpack_quantize_matches_exact(value, scale, zp):
    got = q.xnnpack_quantize(value, scale, zp, -128, 127)
    if math.isinf(value):
        assert got == (127 if value > 0 else -128)
        return
    v = f32_nearest(f32_nearest(Fraction(value) / Fraction(scale)) + zp) if value else Fraction(zp)
    assert got == round_half_even(min(max(v, Fraction(-128)), Fraction(127)))


def test_xnnpack_bounds_differ_from_tflite_on_ties():
    """6 / scale == 40.5 exactly: TFLite rounds half away (41), XNNPACK to even after adding the
    zero point in float (zp 0: 40)."""
    scale = float(np.float32(6.0) / np.float32(40.5))
    assert np.float32(6.0) / np.float32(scale) == np.float32(40.5)
    assert q.quantize_value(6.0, scale, 0) == 41
    assert q.xnnpack_quantize(6.0, scale, 0, -128, 127) == 40
    assert q.xnnpack_quantize(6.0, scale, 1, -128, 127) == 42  # 41.5 -> 42
