"""Packing of element arrays into the DTPU's 64-bit words, and back.

The DTPU's datapath, DMA and register file all move 64-bit words, so every tensor that crosses
the host/accelerator boundary goes through :func:`pack` on the way in and :func:`unpack` on the
way out.  Keeping this in one module means the lane layout is defined exactly once.

Layout
------
A word carries ``Precision.lanes`` elements: 8 for int8/uint8, 4 for int16/uint16/bf16, 2 for
int32/uint32/fp32, 1 for int64/uint64.  Lane 0 sits in the least significant bits, lane 1 in the
next ones, and so on -- the little-endian order, which makes a word's bytes in host memory
identical to the elements' bytes, so packing is usually a reinterpretation rather than a shuffle::

    >>> hex(int(pack([1, 2, 3, 4, 5, 6, 7, 8], "int8")[0]))
    '0x807060504030201'
    >>> hex(int(pack([1, -1], "int16")[0]))   # lane 0 = bits 15:0, lane 1 = bits 31:16
    '0xffff0001'

Arrays are flattened in C (row-major) order.  When the element count is not a multiple of the
lane count, the last word is padded with zero lanes; :func:`unpack` therefore needs ``count``
to know where the data stops.

Validation
----------
Conversions are strict, because a silently wrapped or rounded value would show up much later as a
numerical mismatch between the accelerator and the reference model, far from its cause:

* Integer precisions accept integer arrays only.  Every value must lie in the precision's range,
  otherwise ``ValueError`` names the first offending value and the range.  Any float, bool,
  complex or object dtype is rejected even when its values happen to be integral -- round
  explicitly (``np.rint(x).astype(...)``) if that is what is meant.
* fp32 and bf16 accept float arrays (float16/32/64) and round them to nearest, ties to even, as
  IEEE-754 does: a finite value that rounds beyond the largest finite number becomes ±Inf, ±Inf
  stays ±Inf, NaN stays NaN (quietened, sign kept).  float64 goes to bf16 in a single rounding
  (no float32 double rounding).  Integer arrays are accepted only if every value is exactly
  representable (|v| <= 2**24 for fp32, 2**8 for bf16, or more with enough trailing zero bits),
  otherwise ``ValueError`` names the value.
* An empty array of any dtype packs to zero words.

Memory
------
When no conversion or padding is needed (e.g. a contiguous int8 array whose length is a multiple
of 8 packed as int8), :func:`pack` returns a *view* of the input, and :func:`unpack` of integer and
fp32 data returns a view of the words -- like ``np.ravel``.  Copy the result if either side is
later modified.
"""
from __future__ import annotations

import operator

import numpy as np

from .precision import Precision

__all__ = ["pack", "unpack", "to_bf16_bits", "from_bf16_bits", "WORD_DTYPE"]

#: The host representation of a DTPU word.  Explicitly little-endian so that the lane order above
#: holds even on a big-endian host.
WORD_DTYPE = np.dtype("<u8")

_F32 = np.dtype("<f4")
_U32 = np.dtype("<u4")
_U16 = np.dtype("<u2")
# Significand width (with the hidden bit) bounds which integers a float precision holds exactly.
_SIGNIFICAND_BITS = {Precision.FP32: 24, Precision.BF16: 8}


def pack(array, precision: Precision | str) -> np.ndarray:
    """Pack ``array`` into ``ceil(n / lanes)`` words of dtype ``WORD_DTYPE``.

    See the module docstring for lane order, padding, accepted dtypes and when the result is a
    view of ``array``.
    """
    prec = Precision.parse(precision)
    flat = _as_array(array).reshape(-1)  # C order; a view whenever the layout allows it
    if flat.size == 0:
        return np.zeros(0, WORD_DTYPE)
    if flat.dtype.kind == "O":
        _reject_huge_ints(flat, prec)
    if prec.is_float:
        lanes = _float_lanes(flat, prec)
    else:
        lanes = _int_lanes(flat, prec)
    return _lanes_to_words(lanes, prec)


def unpack(words, precision: Precision | str, count: int) -> np.ndarray:
    """Return the first ``count`` elements carried by ``words`` as ``precision.value_dtype``.

    ``count`` is required because the padding lanes of a partial last word are indistinguishable
    from real zeros.  ``words`` may hold more words than ``count`` needs (a device buffer is often
    larger than the tensor in it); the extra lanes are ignored.
    """
    prec = Precision.parse(precision)
    w = _as_words(words)
    count = operator.index(count)
    capacity = w.size * prec.lanes
    if not 0 <= count <= capacity:
        raise ValueError(
            f"count {count} out of range: {w.size} word(s) of {prec.value} hold 0..{capacity} "
            f"elements")
    lanes = w.view(prec.lane_dtype)[:count]
    if prec is Precision.BF16:
        return from_bf16_bits(lanes)
    return lanes.view(prec.value_dtype)


def to_bf16_bits(values) -> np.ndarray:
    """Round floats to bf16 and return the raw 16-bit patterns (same shape, dtype ``<u2``).

    Round to nearest, ties to even -- what the DTPU's bf16 datapath and TFLite's reference kernels
    do -- rather than truncation, whose bias accumulates over long dot products.  NaN maps to a
    quiet NaN with the same sign (plain truncation could turn a NaN whose payload lies only in the
    low bits into Inf).  float64 input is rounded once, directly to bf16.
    """
    x = np.asarray(values)
    if x.dtype.kind != "f" or x.dtype.itemsize > 8:
        raise ValueError(f"bf16 conversion needs float16/32/64 data; got {x.dtype} array")
    flat = x.reshape(-1)  # 1-D so that the in-place steps below never meet a 0-d scalar
    if x.dtype.itemsize == 8:
        bits = _f64_to_f32_bits_round_to_odd(flat)
    else:
        bits = flat.astype(_F32, copy=False).view(_U32)
    # Adding 0x7FFF plus the kept part's lsb rounds the dropped 16 bits to nearest, ties to even;
    # a carry out of the mantissa bumps the exponent, which is exactly IEEE's overflow to Inf.
    # NaN patterns may wrap here; they are overwritten below.
    # In-place steps: each fresh 4 MiB temporary costs page faults comparable to the arithmetic.
    rounded = np.right_shift(bits, 16)
    np.bitwise_and(rounded, 1, out=rounded)
    rounded += bits
    rounded += 0x7FFF
    rounded >>= 16
    out = rounded.astype(_U16)
    nan = np.isnan(bits.view(_F32))
    if nan.any():
        out[nan] = ((bits[nan] >> 16) | 0x0040).astype(_U16)
    return out.reshape(x.shape)


def from_bf16_bits(bits) -> np.ndarray:
    """Widen raw bf16 patterns to float32 (exact: bf16 is float32's upper half)."""
    b = np.asarray(bits)
    if b.dtype.kind not in "ui" or b.dtype.itemsize > 2:
        raise ValueError(f"bf16 bits must be a uint16 array; got {b.dtype} array")
    if b.dtype.kind == "i" and b.size and b.min() < 0:
        raise ValueError(f"bf16 bit pattern {int(b.min())} is negative; expected 0..65535")
    wide = b.astype(_U32)
    wide <<= 16
    return wide.view(_F32)


# --------------------------------------------------------------------------------------------


def _lanes_to_words(lanes: np.ndarray, prec: Precision) -> np.ndarray:
    """Reinterpret contiguous lane bits as words, copying only to add zero padding."""
    rem = lanes.size % prec.lanes
    if rem == 0:
        return np.ascontiguousarray(lanes).view(WORD_DTYPE)
    words = np.zeros(-(-lanes.size // prec.lanes), WORD_DTYPE)
    words.view(prec.lane_dtype)[: lanes.size] = lanes
    return words


def _int_lanes(flat: np.ndarray, prec: Precision) -> np.ndarray:
    target = prec.value_dtype
    if flat.dtype.kind not in "iu":
        raise ValueError(
            f"{prec.value} needs integer data; got {flat.dtype} array "
            f"(e.g. {_sample(flat)!r}); convert explicitly if rounding or casting is intended")
    if flat.dtype != target:
        if not np.can_cast(flat.dtype, target, "safe"):
            _check_int_range(flat, prec)
        flat = flat.astype(target)
    return flat.view(prec.lane_dtype)


def _check_int_range(flat: np.ndarray, prec: Precision) -> None:
    """Reject values outside ``prec``'s range; min/max are two SIMD passes, no temporaries."""
    info = np.iinfo(prec.value_dtype)
    lo, hi = int(flat.min()), int(flat.max())
    if lo >= info.min and hi <= info.max:
        return
    # Failure path only: find the first offender.  Bounds that cut into the source range are
    # representable in the source dtype, so the comparisons stay exact.
    src = np.iinfo(flat.dtype)
    bad = np.zeros(flat.shape, bool)
    if info.min > src.min:
        bad |= flat < flat.dtype.type(info.min)
    if info.max < src.max:
        bad |= flat > flat.dtype.type(info.max)
    value = int(flat[np.flatnonzero(bad)[0]])
    raise ValueError(
        f"value {value} out of range for {prec.value}: accepted {info.min}..{info.max}")


def _float_lanes(flat: np.ndarray, prec: Precision) -> np.ndarray:
    kind = flat.dtype.kind
    if kind in "iu":
        _check_int_exact(flat, prec)
        flat = flat.astype(_F32)  # exact after the check, whatever rounding the cast uses
    elif kind != "f" or flat.dtype.itemsize > 8:
        raise ValueError(
            f"{prec.value} needs float16/32/64 data or exactly representable integers; got "
            f"{flat.dtype} array (e.g. {_sample(flat)!r})")
    if prec is Precision.BF16:
        return to_bf16_bits(flat)
    with np.errstate(over="ignore"):  # float64 beyond float32's range becomes ±Inf, as IEEE says
        return flat.astype(_F32, copy=False).view(_U32)


def _check_int_exact(flat: np.ndarray, prec: Precision) -> None:
    """Reject integers a float precision would round: too many significant bits."""
    p = _SIGNIFICAND_BITS[prec]
    if flat.dtype.itemsize * 8 <= p:  # int8/uint8 always fit; so do 16-bit ints in fp32
        return
    if flat.dtype.kind == "i":
        # abs(INT64_MIN) stays INT64_MIN, whose uint64 view is the correct 2**63.
        mag = np.abs(flat.astype(np.int64)).view(np.uint64)
    else:
        mag = flat.astype(np.uint64)
    lowest_set = mag & (~mag + np.uint64(1))
    significand = mag // np.maximum(lowest_set, np.uint64(1))
    bad = significand >= np.uint64(1 << p)
    if bad.any():
        value = int(flat[np.flatnonzero(bad)[0]])
        raise ValueError(
            f"value {value} is not exactly representable in {prec.value} ({p}-bit significand); "
            f"pass float data if rounding is intended")


def _f64_to_f32_bits_round_to_odd(x: np.ndarray) -> np.ndarray:
    """float64 -> float32 bits rounded to odd, so a later float32 -> bf16 rounding is exact.

    Rounding twice to nearest can go wrong when the first rounding lands exactly on the second's
    tie.  Round-to-odd keeps "was inexact" in the lsb, which is correct for any second rounding
    to at least two bits fewer (float32 has 16 more than bf16, also in the subnormal range).
    """
    with np.errstate(over="ignore", invalid="ignore"):
        f = x.astype(_F32)
        back = f.astype(np.float64)
        inexact = (back != x) & ~np.isnan(x)
        too_far = inexact & (np.abs(back) > np.abs(x))
    bits = f.view(_U32)
    # One step toward zero turns round-to-nearest into truncation (Inf steps to ±FLT_MAX), then
    # the lsb records the inexactness.
    bits -= too_far.astype(_U32)
    bits |= inexact.astype(_U32)
    return bits


def _as_array(obj) -> np.ndarray:
    """``np.asarray``, except that Python ints stay integers.

    numpy turns ``[1, 2**64 - 1]`` into float64 (no common integer type) and ``[2**70]`` into an
    object array; either would then be refused as "not integer data", or worse, quote a value
    that is not the one the caller passed.  Such input is re-read as int64 or uint64 when it fits,
    else left as an object array of ints for :func:`_reject_huge_ints` to name the culprit.
    """
    a = obj if isinstance(obj, np.ndarray) else np.asarray(obj)
    reread = a.dtype.kind == "O" or (a.dtype.kind == "f" and a is not obj)
    if a.size == 0 or not reread:
        return a
    items = (a if a.dtype.kind == "O" else np.asarray(obj, dtype=object)).reshape(-1).tolist()
    if not all(type(v) is int or isinstance(v, np.integer) for v in items):
        return a
    lo, hi = min(items), max(items)
    for dtype in (np.int64, np.uint64):
        info = np.iinfo(dtype)
        if lo >= info.min and hi <= info.max:
            return np.array(items, dtype).reshape(a.shape)
    return np.array(items, dtype=object).reshape(a.shape)


def _reject_huge_ints(flat: np.ndarray, prec: Precision) -> None:
    """Name the first integer beyond 64 bits (other object arrays are refused later by dtype)."""
    items = flat.tolist()
    if not all(type(v) is int for v in items):
        return
    if prec.is_float:
        value = next(v for v in items if not -(2**63) <= v < 2**64)
        raise ValueError(f"value {value} does not fit a 64-bit integer; pass float data for "
                         f"{prec.value}")
    info = np.iinfo(prec.value_dtype)
    value = next(v for v in items if not info.min <= v <= info.max)
    raise ValueError(
        f"value {value} out of range for {prec.value}: accepted {info.min}..{info.max}")


def _as_words(words) -> np.ndarray:
    w = _as_array(words).reshape(-1)
    if w.dtype == WORD_DTYPE:
        return np.ascontiguousarray(w)
    if w.size == 0:
        return np.zeros(0, WORD_DTYPE)
    if w.dtype.kind == "O" and all(type(v) is int for v in w.tolist()):
        value = next(v for v in w.tolist() if not 0 <= v < 2**64)
        raise ValueError(f"word {value} out of range; words are 0..{2**64 - 1}")
    if w.dtype.kind not in "iu":
        raise ValueError(f"words must be uint64; got {w.dtype} array (e.g. {_sample(w)!r})")
    if w.dtype.kind == "i" and w.min() < 0:
        value = int(w[np.flatnonzero(w < 0)[0]])
        raise ValueError(f"word {value} is negative; words are 0..{2**64 - 1}")
    return w.astype(WORD_DTYPE)


def _sample(flat: np.ndarray):
    """A value to quote in an error: the first non-integral one if any, else the first."""
    if flat.dtype.kind == "f":
        with np.errstate(invalid="ignore"):
            frac = np.flatnonzero(flat != np.floor(flat))
        if frac.size:
            return flat[frac[0]:frac[0] + 1].tolist()[0]
    return flat[:1].tolist()[0]  # tolist() also copes with object arrays
