"""The post unit of the 1.2 core and of the 2.0 POST descriptor: accumulators (+ bias) to output
lanes, requantized by the RQ_VARIANT the job names, clamped, and packed into result words.

Its C twin is ``dtpu_post_exact`` in kernels.c (the fast path's fused post, tested equal in
tests/test_kernels.py); the RTL's is hw/rtl/dtpu_post_lane.v. :class:`dtpu.hw.core.Core` runs
it on its own parameter memory (:meth:`~dtpu.hw.core.Core.post`), the list executor on a POST's.
"""
from __future__ import annotations

import numpy as np

from dtpu.hw.config import HwConfig, ceil_div, out_lanes
from dtpu.pack import WORD_DTYPE
from dtpu.precision import Precision

INT32_MIN, INT32_MAX = -(1 << 31), (1 << 31) - 1


def wrap32(x: np.ndarray) -> np.ndarray:
    """Two's-complement wrap to int32 (values kept in int64), as a 32-bit adder drops the carry."""
    return ((x.astype(np.int64) + (1 << 31)) & 0xFFFFFFFF) - (1 << 31)


def _shift_round_half_up(x: np.ndarray, s: np.ndarray) -> np.ndarray:
    half = np.where(s > 0, np.left_shift(np.int64(1), np.maximum(s - 1, 0)), 0)
    return (x + half) >> s


def requant(cfg: HwConfig, total: np.ndarray, mult: np.ndarray, shift: np.ndarray,
            variant: int) -> np.ndarray:
    """(accumulator + bias) -> int32 by multiplier * 2^(shift-31), as the chosen variant rounds.

    FP32 (XNNPACK) instead reads the multiplier field's 32 bits as a float32 scale: the (int32)
    total is converted to fp32 and multiplied by the scale, each rounding to nearest even, and the
    product is rounded to an integer (ties to even) and saturated to +-2^24; a NaN product (a NaN
    scale, or an infinite one times 0) gives 0. Every clamp range the lowering sets lies within
    +-2^24, so clamping after the rounding gives XNNPACK's clamp-then-round result.
    """
    if variant == cfg.RQ_VARIANT_FP32:
        scale = (mult.astype(np.int64) & 0xFFFFFFFF).astype(np.uint32).view(np.float32)
        f = total.astype(np.float64).astype(np.float32)  # |total| < 2^31: one rounding (RNE)
        with np.errstate(over="ignore", invalid="ignore"):
            y = f * scale
        y = np.where(np.isnan(y), np.float32(0), y)
        lim = np.float32(1 << 24)
        return np.rint(np.clip(y, -lim, lim)).astype(np.int64)
    m = mult.astype(np.int64)
    s = shift.astype(np.int64)
    if variant == cfg.RQ_VARIANT_SINGLE:
        return wrap32(_shift_round_half_up(total * m, np.maximum(31 - s, 0)))
    if variant == cfg.RQ_VARIANT_DOUBLE_UP:
        # ruy's x86 kernels: the DOUBLE steps with both roundings half up (ties towards +inf);
        # int64 holds the one overflowing case (a = m = INT32_MIN) as ruy's SIMD code yields it.
        a = wrap32(total << np.maximum(s, 0))
        high = (a * m + (1 << 30)) >> 31
        return wrap32(_shift_round_half_up(high, np.maximum(-s, 0)))
    if variant == cfg.RQ_VARIANT_DOUBLE:
        left = np.maximum(s, 0)
        right = np.maximum(-s, 0)
        a = wrap32(total << left)
        ab = a * m
        nudge = np.where(ab >= 0, 1 << 30, 1 - (1 << 30))
        t = ab + nudge
        high = np.where(t >= 0, t >> 31, -((-t) >> 31))  # C division: truncate towards zero
        high = np.where((a == INT32_MIN) & (m == INT32_MIN), INT32_MAX, high)
        mask = (np.int64(1) << right) - 1
        threshold = (mask >> 1) + (high < 0)
        return (high >> right) + ((high & mask) > threshold)
    reduced = np.where(m < 0x7FFF0000, (m + (1 << 15)) >> 16, 0x7FFF)
    return wrap32(_shift_round_half_up(total * reduced, np.maximum(15 - s, 0)))



def signed32(v: int) -> int:
    """A 32-bit register value (ACT_MIN, ACT_MAX) as the signed number the datapath compares with."""
    return v - (1 << 32) if v >= 1 << 31 else v


def post(cfg: HwConfig, acc: np.ndarray, prec: Precision, out_mode: int, variant: int,
         params, raw_error_bits: int, act_min: int = 0, act_max: int = 0) -> tuple[np.ndarray, int]:
    """The post unit on accumulators whose last axis is the channel; returns (lanes, ERR).
    `params`: (bias, multiplier, shift, zero point) per channel (:meth:`Core.post_params`);
    `act_min` / `act_max` are the raw 32-bit ACT_MIN / ACT_MAX register values."""
    c = cfg
    lanes_n, dt = out_lanes(c, prec, out_mode)
    if out_mode == c.OUT_MODE_RAW:
        return acc.astype(dt), raw_error_bits
    bias = params[0]
    if out_mode == c.OUT_MODE_FLOAT:
        lo = np.array(act_min, np.uint32).view(np.float32)
        hi = np.array(act_max, np.uint32).view(np.float32)
        y = acc + bias
        return np.minimum(np.maximum(y, lo), hi), 0
    _, mult, shift, zp = params
    total = acc + bias
    err = 0
    if variant == c.RQ_VARIANT_INT64:
        if total.size and int(np.abs(total).max()) >= 1 << 47:
            err |= c.ERR_OVERFLOW
    else:
        w = wrap32(total)
        if total.size and not np.array_equal(w, total):
            err |= c.ERR_WARN_WRAP32
        total = w
    scaled = requant(c, total, mult, shift, variant)
    y = wrap32(scaled + zp)
    y = np.clip(y, signed32(act_min), signed32(act_max))
    info = np.iinfo(dt)
    return np.clip(y, info.min, info.max).astype(dt), err


def pack_lanes(values: np.ndarray, lanes_n: int) -> np.ndarray:
    """values (..., n) -> words, each item's n lanes padded to whole words."""
    n = values.shape[-1]
    per = ceil_div(n, lanes_n) * lanes_n
    if per != n:
        pad = np.zeros(values.shape[:-1] + (per - n,), values.dtype)
        values = np.concatenate([values, pad], axis=-1)
    return np.ascontiguousarray(values).reshape(-1).view(WORD_DTYPE)
