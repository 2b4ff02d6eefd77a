"""Tests for dtpu.pack.

The references here are deliberately built differently from the implementation: words are
assembled from Python ints with shifts, and bf16 rounding is computed with exact rational
arithmetic (fractions.Fraction), so a shared misconception cannot make both sides agree.
"""
from __future__ import annotations

import math
import struct
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from dtpu.pack import WORD_DTYPE, from_bf16_bits, pack, to_bf16_bits, unpack
from dtpu.precision import Precision

INT_PRECISIONS = [p for p in Precision if not p.is_float]
ALL_PRECISIONS = list(Precision)
MAX_LEN = 300


# ---------------------------------------------------------------- independent references


def ref_lane_bits(value, prec: Precision) -> int:
    """Raw lane bits of one element, via Python ints / struct rather than numpy views."""
    if prec is Precision.FP32:
        return struct.unpack("<I", struct.pack("<f", value))[0]
    if prec is Precision.BF16:
        if math.isnan(value):  # documented: quiet NaN, sign and upper payload kept
            return (struct.unpack("<I", struct.pack("<f", value))[0] >> 16) | 0x0040
        return ref_bf16_bits(value)
    return int(value) % (1 << prec.bits)  # two's complement for negatives


def ref_pack(lane_bits: list[int], prec: Precision) -> list[int]:
    """Words assembled by shifting: lane i occupies bits [i*w, (i+1)*w)."""
    w, n = prec.bits, prec.lanes
    words = []
    for start in range(0, len(lane_bits), n):
        word = 0
        for i, bits in enumerate(lane_bits[start:start + n]):
            word |= bits << (i * w)
        words.append(word)
    return words


def ref_bf16_bits(x: float) -> int:
    """bf16 bits of x, rounded to nearest-even with exact rational arithmetic.

    bf16: 1 sign bit, 8 exponent bits (bias 127), 7 fraction bits; subnormal quantum 2**-133.
    NaN is not handled here (the tests check its properties separately).
    """
    assert not math.isnan(x)
    sign = 0x8000 if math.copysign(1.0, x) < 0 else 0
    if math.isinf(x):
        return sign | 0x7F80
    q = Fraction(abs(x))
    if q == 0:
        return sign
    e = floor_log2(q)
    quantum = Fraction(2) ** (max(e, -126) - 7)
    n = round(q / quantum)  # Fraction.__round__ rounds half to even
    mag = n * quantum
    if mag >= Fraction(2) ** 128:  # beyond the largest finite bf16 after rounding
        return sign | 0x7F80
    if mag == 0:
        return sign
    e = floor_log2(mag)  # rounding may have carried into the next binade
    if e < -126:
        frac = mag / Fraction(2) ** -133
        assert frac.denominator == 1 and frac < 128
        return sign | int(frac)
    frac = mag / Fraction(2) ** (e - 7) - 128
    assert frac.denominator == 1 and 0 <= frac < 128
    return sign | ((e + 127) << 7) | int(frac)


def floor_log2(q: Fraction) -> int:
    e = q.numerator.bit_length() - q.denominator.bit_length()
    while Fraction(2) ** e > q:
        e -= 1
    while Fraction(2) ** (e + 1) <= q:
        e += 1
    return e


def f32_from_bits(bits: int) -> float:
    return struct.unpack("<f", struct.pack("<I", bits))[0]


def f32_bits(x) -> int:
    return struct.unpack("<I", struct.pack("<f", x))[0]


# ---------------------------------------------------------------- strategies


def int_values(prec: Precision):
    info = np.iinfo(prec.value_dtype)
    return st.lists(st.integers(int(info.min), int(info.max)), max_size=MAX_LEN)


def values_for(prec: Precision):
    if prec is Precision.FP32:
        return st.lists(st.floats(width=32), max_size=MAX_LEN)
    if prec is Precision.BF16:
        # Only bf16-representable values (upper 16 bits of a float32) can round-trip exactly.
        return st.lists(st.integers(0, 0xFFFF).map(lambda b: f32_from_bits(b << 16)),
                        max_size=MAX_LEN)
    return int_values(prec)


def to_array(values, prec: Precision) -> np.ndarray:
    return np.array(values, dtype=prec.value_dtype)


# ---------------------------------------------------------------- round trip and layout


@pytest.mark.parametrize("prec", ALL_PRECISIONS, ids=lambda p: p.value)
@settings(max_examples=60, deadline=None)
@given(data=st.data())
def test_round_trip(prec, data):
    values = data.draw(values_for(prec))
    arr = to_array(values, prec)
    words = pack(arr, prec)
    assert words.dtype == WORD_DTYPE
    assert words.shape == (-(-len(values) // prec.lanes),)
    back = unpack(words, prec, len(values))
    assert back.dtype == prec.value_dtype
    assert back.shape == (len(values),)
    if prec.is_float:
        got = back.view(np.uint32)
        want = arr.view(np.uint32)
        nan = np.isnan(arr)
        assert np.array_equal(got[~nan], want[~nan])
        # NaN comes back as NaN with its sign (bf16 may quieten a signalling NaN).
        assert np.isnan(back[nan]).all()
        assert np.array_equal(got[nan] >> 31, want[nan] >> 31)
    else:
        assert np.array_equal(back, arr)


@pytest.mark.parametrize("prec", ALL_PRECISIONS, ids=lambda p: p.value)
@settings(max_examples=60, deadline=None)
@given(data=st.data())
def test_pack_matches_shift_reference(prec, data):
    """Every word equals the lanes OR-ed in by shifting, with zero padding in the last word."""
    values = data.draw(values_for(prec))
    words = pack(to_array(values, prec), prec)
    want = ref_pack([ref_lane_bits(v, prec) for v in values], prec)
    assert [int(w) for w in words] == want


@pytest.mark.parametrize("prec", ALL_PRECISIONS, ids=lambda p: p.value)
@settings(max_examples=30, deadline=None)
@given(data=st.data())
def test_unpack_of_reference_words(prec, data):
    """unpack reads words built without dtype.pack, and ignores surplus words and lanes."""
    values = data.draw(values_for(prec).filter(lambda v: not any(
        isinstance(x, float) and math.isnan(x) for x in v)))
    extra = data.draw(st.integers(0, 3))
    words = ref_pack([ref_lane_bits(v, prec) for v in values], prec) + [0xFFFFFFFFFFFFFFFF] * extra
    got = unpack(np.array(words, dtype=np.uint64), prec, len(values))
    assert got.tolist() == to_array(values, prec).tolist()


@pytest.mark.parametrize("prec", INT_PRECISIONS, ids=lambda p: p.value)
@settings(max_examples=30, deadline=None)
@given(data=st.data())
def test_wider_input_dtype_in_range(prec, data):
    """In-range values arriving in a wider dtype (e.g. a Python list -> int64) pack the same."""
    values = data.draw(int_values(prec))
    src = np.uint64 if prec is Precision.UINT64 else np.int64
    want = pack(to_array(values, prec), prec)
    assert np.array_equal(pack(np.array(values, dtype=src), prec), want)


@pytest.mark.parametrize(
    ("prec", "values", "word"),
    [
        ("int8", [1, 2, 3, 4, 5, 6, 7, 8], 0x0807060504030201),
        ("uint8", [0xF1, 0xF2, 0xF3, 0xF4, 0xF5, 0xF6, 0xF7, 0xF8], 0xF8F7F6F5F4F3F2F1),
        ("int8", [-1], 0x00000000000000FF),
        ("int8", [-128, 127, 0], 0x00000000007F80),
        ("int16", [1, 2, 3, 4], 0x0004000300020001),
        ("uint16", [0xAAAA, 0xBBBB, 0xCCCC], 0x0000CCCCBBBBAAAA),
        ("int16", [-2], 0x000000000000FFFE),
        ("int32", [1, 2], 0x0000000200000001),
        ("uint32", [0xDEADBEEF], 0x00000000DEADBEEF),
        ("int32", [-1, 0], 0x00000000FFFFFFFF),
        ("int64", [-1], 0xFFFFFFFFFFFFFFFF),
        ("uint64", [0x0102030405060708], 0x0102030405060708),
        ("fp32", [1.0, -2.0], 0xC00000003F800000),
        ("bf16", [1.0, -2.0, 0.5], 0x00003F00C0003F80),
    ],
)
def test_lane_order_by_hand(prec, values, word):
    p = Precision.parse(prec)
    arr = np.array(values, dtype=p.value_dtype)
    words = pack(arr, prec)
    assert words.tolist() == [word]
    assert unpack(words, prec, len(values)).tolist() == arr.tolist()


def test_multi_word_order():
    words = pack(np.arange(1, 11, dtype=np.int8), "int8")
    assert words.tolist() == [0x0807060504030201, 0x0A09]


def test_c_order_and_non_contiguous_input():
    a = np.arange(24, dtype=np.int16).reshape(4, 6)
    assert pack(a, "int16").tolist() == pack(np.arange(24, dtype=np.int16), "int16").tolist()
    t = a.T  # Fortran-ordered view: C-order flattening means t's logical order
    assert unpack(pack(t, "int16"), "int16", 24).tolist() == t.reshape(-1).tolist()
    strided = np.arange(32, dtype=np.int8)[::2]
    assert unpack(pack(strided, "int8"), "int8", 16).tolist() == list(range(0, 32, 2))


def test_big_endian_input_keeps_values():
    a = np.array([1, -2, 300, 4], dtype=">i2")
    assert pack(a, "int16").tolist() == pack(a.astype("<i2"), "int16").tolist()
    f = np.array([1.5, -3.25], dtype=">f4")
    assert unpack(pack(f, "fp32"), "fp32", 2).tolist() == [1.5, -3.25]


def test_empty():
    for p in ALL_PRECISIONS:
        assert pack([], p).shape == (0,)
        assert unpack(np.zeros(0, np.uint64), p, 0).shape == (0,)


def test_range_edges_accepted():
    for p in INT_PRECISIONS:
        info = np.iinfo(p.value_dtype)
        src = np.uint64 if p is Precision.UINT64 else np.int64
        arr = np.array([int(info.min), int(info.max)], dtype=src)
        assert unpack(pack(arr, p), p, 2).tolist() == [int(info.min), int(info.max)]


def test_int8_fast_path_is_a_view():
    a = np.arange(64, dtype=np.int8)
    assert np.shares_memory(pack(a, "int8"), a)


def test_unpack_accepts_python_int_words():
    assert unpack([0x0807060504030201], "uint8", 8).tolist() == [1, 2, 3, 4, 5, 6, 7, 8]
    assert unpack([0xFFFFFFFFFFFFFFFF], "int32", 2).tolist() == [-1, -1]


# ---------------------------------------------------------------- bf16 rounding


BF16_CASES = [
    # (float32 bit pattern, expected bf16 bits, why)
    (0x3F800000, 0x3F80, "1.0 exact"),
    (0x3F808000, 0x3F80, "tie, kept part even -> down"),
    (0x3F818000, 0x3F82, "tie, kept part odd -> up"),
    (0x3F808001, 0x3F81, "just above tie -> up"),
    (0x3F807FFF, 0x3F80, "just below tie -> down"),
    (0xBF818000, 0xBF82, "negative tie, odd -> away from zero"),
    (0x3FFF8000, 0x4000, "tie carries into the exponent"),
    (0x7F7F7FFF, 0x7F7F, "largest bf16, below its tie"),
    (0x7F7F8000, 0x7F80, "tie above largest bf16 rounds to even = Inf"),
    (0x7F7FFFFF, 0x7F80, "FLT_MAX overflows to Inf"),
    (0xFF7FFFFF, 0xFF80, "-FLT_MAX overflows to -Inf"),
    (0x7F800000, 0x7F80, "+Inf"),
    (0xFF800000, 0xFF80, "-Inf"),
    (0x00000000, 0x0000, "+0"),
    (0x80000000, 0x8000, "-0"),
    (0x00000001, 0x0000, "smallest float32 subnormal -> 0"),
    (0x80000001, 0x8000, "tiny negative -> -0"),
    (0x00010000, 0x0001, "smallest bf16 subnormal exact"),
    (0x00008000, 0x0000, "half the smallest bf16 subnormal: tie -> even 0"),
    (0x00008001, 0x0001, "just above that tie"),
    (0x00018000, 0x0002, "subnormal tie, odd -> up"),
    (0x007F8000, 0x0080, "largest subnormal tie carries into the smallest normal"),
]


@pytest.mark.parametrize(("f32", "want", "why"), BF16_CASES, ids=[c[2] for c in BF16_CASES])
def test_bf16_cases(f32, want, why):
    x = np.array([f32], dtype=np.uint32).view(np.float32)
    assert ref_bf16_bits(float(x[0])) == want, "reference disagrees with the table"
    assert to_bf16_bits(x).tolist() == [want]
    assert pack(x, "bf16").tolist() == [want]


@pytest.mark.parametrize("f32", [0x7FC00000, 0xFFC00000, 0x7F800001, 0xFF800001, 0x7FFFFFFF,
                                 0x7F80FFFF, 0x7FA00000])
def test_bf16_nan_stays_quiet_nan_with_sign(f32):
    """Truncating 0x7F800001 would give Inf; the result must be a quiet NaN of the same sign."""
    x = np.array([f32], dtype=np.uint32).view(np.float32)
    (b,) = to_bf16_bits(x).tolist()
    assert b & 0x7F80 == 0x7F80 and b & 0x007F != 0, hex(b)  # NaN
    assert b & 0x0040, hex(b)  # quiet
    assert b >> 15 == f32 >> 31  # sign
    assert np.isnan(from_bf16_bits(np.array([b], np.uint16))).all()


def test_bf16_float64_single_rounding():
    """1 + 2**-8 + 2**-30 lies above the tie; float32 first would lose 2**-30 and round down."""
    x = np.array([1 + 2**-8 + 2**-30, -(1 + 2**-8 + 2**-30), 1 + 2**-8, 2.0**-134 + 2.0**-160,
                  1e300, -1e300, 2.0**-1000, float(np.finfo(np.float32).max) * 1.0000001],
                 dtype=np.float64)
    want = [ref_bf16_bits(float(v)) for v in x]
    assert want[:4] == [0x3F81, 0xBF81, 0x3F80, 0x0001]
    assert want[4:6] == [0x7F80, 0xFF80]
    assert to_bf16_bits(x).tolist() == want
    assert pack(x, "bf16").tolist() == ref_pack(want, Precision.BF16)


def _tie_heavy_f32_bits():
    """float32 patterns whose dropped half is at or next to a tie, where rounding bugs live."""
    low = st.sampled_from([0x0000, 0x0001, 0x7FFF, 0x8000, 0x8001, 0xFFFF])
    return st.one_of(
        st.integers(0, 0xFFFFFFFF),
        st.builds(lambda hi, lo: (hi << 16) | lo, st.integers(0, 0xFFFF), low),
    )


@settings(max_examples=400, deadline=None)
@given(bits=st.lists(_tie_heavy_f32_bits(), min_size=1, max_size=40))
@example(bits=[0x7F7F8000, 0x00008000, 0x3F808000])
def test_bf16_matches_rational_reference_f32(bits):
    x = np.array(bits, dtype=np.uint32).view(np.float32)
    got = to_bf16_bits(x).tolist()
    for b, g in zip(bits, got):
        f = f32_from_bits(b)
        if math.isnan(f):
            assert g & 0x7FC0 == 0x7FC0 and g >> 15 == b >> 31
        else:
            assert g == ref_bf16_bits(f), (hex(b), hex(g))


@settings(max_examples=300, deadline=None)
@given(values=st.lists(st.floats(allow_nan=False), min_size=1, max_size=40))
@example(values=[1 + 2**-8 + 2**-40, 2.0**128 - 2.0**119, 2.0**128 - 2.0**119 - 2.0**80,
                 2.0**-134 * (1 + 2**-40), -(2.0**-134)])
def test_bf16_matches_rational_reference_f64(values):
    got = to_bf16_bits(np.array(values, dtype=np.float64)).tolist()
    assert got == [ref_bf16_bits(v) for v in values]


@settings(max_examples=200, deadline=None)
@given(bits=st.lists(st.integers(0, 0xFFFF), max_size=50))
@example(bits=[0x7F81, 0xFF81, 0x7FC0])   # signaling NaNs keep their bits
def test_bf16_bits_round_trip(bits):
    b = np.array(bits, dtype=np.uint16)
    f = from_bf16_bits(b)
    assert f.dtype == np.float32
    # the float32 bits themselves: f.tolist() would widen to Python floats, which quiets a
    # signaling NaN on x86 (0x7F81 -> 0x7FC1) although the array holds it exactly
    assert f.view(np.uint32).tolist() == [x << 16 for x in bits]
    is_nan = ((b & 0x7F80) == 0x7F80) & ((b & 0x7F) != 0)
    want = np.where(is_nan, b | 0x40, b)
    assert to_bf16_bits(f).tolist() == want.tolist()


def test_bf16_shape_preserved():
    x = np.ones((2, 3), np.float32)
    assert to_bf16_bits(x).shape == (2, 3)
    assert from_bf16_bits(np.zeros((3, 1), np.uint16)).shape == (3, 1)
    assert to_bf16_bits(np.float32(1.0)).shape == ()


# ---------------------------------------------------------------- float precisions, other inputs


def test_fp32_from_float64_rounds_like_ieee():
    x = np.array([0.1, 1e300, -1e300, 1e-300, np.inf, -np.inf, np.nan])
    got = unpack(pack(x, "fp32"), "fp32", len(x))
    assert [f32_bits(v) for v in got[:1].tolist()] == [f32_bits(0.1)]
    assert got[1] == np.inf and got[2] == -np.inf and got[3] == 0
    assert got[4] == np.inf and got[5] == -np.inf and np.isnan(got[6])


def test_integers_into_float_precisions_when_exact():
    assert unpack(pack([1, -2, 2**24, -(2**24)], "fp32"), "fp32", 4).tolist() == \
        [1.0, -2.0, 2.0**24, -(2.0**24)]
    big = np.array([2**63, 2**64 - 2**40], dtype=np.uint64)
    assert unpack(pack(big, "fp32"), "fp32", 2).tolist() == [2.0**63, float(2**64 - 2**40)]
    assert unpack(pack(np.array([-(2**63)], np.int64), "fp32"), "fp32", 1).tolist() == [-(2.0**63)]
    assert unpack(pack([256, -258, 2**40], "bf16"), "bf16", 3).tolist() == [256.0, -258.0, 2.0**40]
    assert unpack(pack(np.array([-128, 127], np.int8), "bf16"), "bf16", 2).tolist() == [-128, 127]


@pytest.mark.parametrize(("prec", "value"), [("fp32", 2**24 + 1), ("fp32", -(2**24 + 1)),
                                             ("fp32", 2**62 + 1), ("bf16", 257), ("bf16", -257),
                                             ("bf16", 2**30 + 2**20)])
def test_inexact_integers_rejected(prec, value):
    with pytest.raises(ValueError, match=str(value)):
        pack([0, value, 1], prec)


# ---------------------------------------------------------------- errors


@pytest.mark.parametrize("name", ["int9", "float32", "", "INT 8"])
def test_bad_precision_name(name):
    with pytest.raises(ValueError, match=f"'{name}'") as exc:
        pack([1], name)
    assert "int8" in str(exc.value) and "bf16" in str(exc.value)
    with pytest.raises(ValueError, match=f"'{name}'"):
        unpack(np.zeros(1, np.uint64), name, 1)


def test_precision_name_case_insensitive():
    assert pack([1], "INT8").tolist() == [1]


@pytest.mark.parametrize(("prec", "value", "range_text"), [
    ("int8", 300, "-128..127"),
    ("int8", -129, "-128..127"),
    ("uint8", -1, "0..255"),
    ("uint8", 256, "0..255"),
    ("int16", 40000, "-32768..32767"),
    ("uint16", -5, "0..65535"),
    ("int32", 2**31, "-2147483648..2147483647"),
    ("uint32", 2**32, "0..4294967295"),
    ("uint64", -1, "0..18446744073709551615"),
    ("int64", 2**63, "-9223372036854775808..9223372036854775807"),
])
def test_out_of_range(prec, value, range_text):
    src = np.uint64 if value >= 2**63 else np.int64
    arr = np.array([0, 1, value, 2], dtype=src)
    with pytest.raises(ValueError) as exc:
        pack(arr, prec)
    msg = str(exc.value)
    assert str(value) in msg and range_text in msg, msg


def test_out_of_range_names_first_offender():
    with pytest.raises(ValueError, match="value 300 ") as exc:
        pack([5, 300, -500, 1000], "int8")
    assert "-500" not in str(exc.value)


@pytest.mark.parametrize("prec", [p.value for p in INT_PRECISIONS])
def test_float_data_for_int_precision(prec):
    with pytest.raises(ValueError) as exc:
        pack(np.array([1.0, 2.5, 3.0]), prec)
    assert "float64" in str(exc.value) and "2.5" in str(exc.value)
    # Integral floats are refused too: the caller must choose a rounding.
    with pytest.raises(ValueError, match="float32"):
        pack(np.array([1.0, 2.0], np.float32), prec)


@pytest.mark.parametrize("data", [np.array([True, False]), np.array([1 + 2j]),
                                  np.array(["7"]), np.array(["7", 1], dtype=object)])
def test_non_numeric_dtypes_rejected(data):
    for prec in ["int8", "fp32", "bf16"]:
        with pytest.raises(ValueError, match=str(data.dtype)):
            pack(data, prec)


@pytest.mark.parametrize("count", [-1, 9])
def test_unpack_count_out_of_range(count):
    with pytest.raises(ValueError, match=f"count {count}"):
        unpack(np.zeros(1, np.uint64), "int8", count)


def test_unpack_rejects_bad_words():
    with pytest.raises(ValueError, match="-7"):
        unpack(np.array([1, -7], np.int64), "int8", 8)
    with pytest.raises(ValueError, match="float64"):
        unpack(np.array([1.0]), "int8", 8)


def test_python_int_lists_beyond_int64():
    """numpy reads [1, 2**64 - 1] as float64; pack must still see the exact integers."""
    assert pack([1, 2**64 - 1], "uint64").tolist() == [1, 2**64 - 1]
    assert unpack([1, 2**64 - 1], "uint32", 4).tolist() == [1, 0, 2**32 - 1, 2**32 - 1]
    assert pack([[2**63], [0]], "fp32").tolist() == [0x5F000000]
    with pytest.raises(ValueError, match="value 18446744073709551615 out of range for int64"):
        pack([-1, 2**64 - 1], "int64")
    with pytest.raises(ValueError, match="value 1180591620717411303424 out of range for int8"):
        pack([3, 2**70], "int8")
    with pytest.raises(ValueError, match="1180591620717411303424"):
        pack(np.array([2**70], dtype=object), "uint64")
    with pytest.raises(ValueError, match="-1180591620717411303424"):
        pack([-(2**70)], "fp32")
    with pytest.raises(ValueError, match="word 18446744073709551616"):
        unpack([0, 2**64], "int8", 8)
    with pytest.raises(ValueError, match="word -1 "):
        unpack([-1, 2**64 - 1], "int8", 8)
