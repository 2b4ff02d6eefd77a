"""What RESIZE computes: which input pixels each output pixel reads and with what weights.

TFLite's kernels are the definition the chip follows, so the arithmetic is theirs, step for step:
RESIZE_NEAREST_NEIGHBOR picks a source index with a float32 scale (``GetNearestNeighbor``:
floor, or round half away from zero with ``align_corners``); int8 RESIZE_BILINEAR works in
10-bit fixed point (``ResizeBilinearInteger``: a 10-bit scale, four products summed in 64 bits,
rounded half away from zero at 2^20), float32 RESIZE_BILINEAR in float32. A module of its own
because the machine model and the documentation both refer to it, and it needs no memory.
"""
from __future__ import annotations

import numpy as np

ONE_10 = 1 << 10


def nearest_index(out_size: int, in_size: int, align: bool, half: bool) -> np.ndarray:
    """Source index of every output index (TFLite's GetNearestNeighbor, float32 arithmetic)."""
    if align and out_size > 1:
        scale = np.float32(in_size - 1) / np.float32(out_size - 1)
    else:
        scale = np.float32(in_size) / np.float32(out_size)
    offset = np.float32(0.5 if half else 0.0)
    v = (np.arange(out_size, dtype=np.float32) + offset) * np.float32(scale)
    if align:
        idx = np.sign(v) * np.floor(np.abs(v) + np.float32(0.5))     # TfLiteRound: half away from 0
    else:
        idx = np.floor(v)
    idx = np.minimum(idx.astype(np.int64), in_size - 1)
    if half:
        idx = np.maximum(idx, 0)
    return idx


def _int_scale(in_size: int, out_size: int, align: bool) -> int:
    if align and out_size > 1:
        return (ONE_10 * (in_size - 1) + (out_size - 1) // 2) // (out_size - 1)
    return (ONE_10 * in_size + out_size // 2) // out_size


def _c_div(a: np.ndarray, b: int) -> np.ndarray:
    """C's integer division (truncation towards zero)."""
    return np.sign(a) * (np.abs(a) // b)


def bilinear_int(out_size: int, in_size: int, align: bool, half: bool):
    """(scaled position in 1/1024 units, lower index, upper index) per output index
    (ComputeInterpolationValuesInteger)."""
    s = _int_scale(in_size, out_size, align)
    v = np.arange(out_size, dtype=np.int64)
    pos = v * s + s // 2 - (1 << 9) if half else v * s
    lo = np.maximum(_c_div(pos, ONE_10), 0)
    hi = np.minimum(_c_div(pos + ONE_10 - 1, ONE_10), in_size - 1)
    return pos, lo, hi


def bilinear_float(out_size: int, in_size: int, align: bool, half: bool):
    """(scaled position, lower index, upper index) per output index, float32
    (ComputeInterpolationValues)."""
    if align and out_size > 1:
        scale = np.float32(in_size - 1) / np.float32(out_size - 1)
    else:
        scale = np.float32(in_size) / np.float32(out_size)
    v = np.arange(out_size, dtype=np.float32)
    pos = ((v + np.float32(0.5)) * scale - np.float32(0.5)) if half else v * scale
    pos = pos.astype(np.float32)
    lo = np.maximum(np.floor(pos).astype(np.int64), 0)
    hi = np.minimum(np.ceil(pos).astype(np.int64), in_size - 1)
    return pos, lo, hi


def _band(values, rows):
    """Rows [yo, yo + n) of full-size index arrays, their indices made relative to input row yi."""
    if rows is None:
        return values
    n, yo, yi = rows
    pos, *idx = values
    return (pos[yo:yo + n], *(i[yo:yo + n] - yi for i in idx))


def source_rows(full_out: int, full_in: int, yo: int, n: int, bilinear: bool, align: bool,
                half: bool) -> tuple[int, int]:
    """(first, last) input row that output rows [yo, yo + n) of a `full_in` to `full_out` resize
    read: what a row band of it must have in frame memory (the halo of bilinear's second row)."""
    if not bilinear:
        idx = nearest_index(full_out, full_in, align, half)[yo:yo + n]
        return int(idx.min()), int(idx.max())
    _, lo, hi = bilinear_int(full_out, full_in, align, half)      # float32's neighbours are the same rows
    _, flo, fhi = bilinear_float(full_out, full_in, align, half)
    return (int(min(lo[yo:yo + n].min(), flo[yo:yo + n].min())),
            int(max(hi[yo:yo + n].max(), fhi[yo:yo + n].max())))


def resize(x: np.ndarray, hout: int, wout: int, bilinear: bool, align: bool, half: bool,
           integer: bool, rows: tuple[int, int, int, int] | None = None) -> np.ndarray:
    """`x` (C, H, W) resized to (C, hout, wout): int64 values for I8 (`integer`), float32 otherwise.

    `rows` (full output height, full input height, first output row, first input row): `x` is a
    row band of a larger input and the result rows [yo, yo + hout) of the full-size resize, the
    arithmetic (scale, positions, weights) the full size's."""
    _, hin, win = x.shape
    fho, fhi, band = hout, hin, None
    if rows is not None and rows[0]:
        fho, fhi, yo, yi = rows
        band = (hout, yo, yi)
    if not bilinear:
        iy = nearest_index(fho, fhi, align, half)
        iy = iy if band is None else iy[band[1]:band[1] + hout] - band[2]
        return x[:, iy][:, :, nearest_index(wout, win, align, half)]
    if integer:
        py, y0, y1 = _band(bilinear_int(fho, fhi, align, half), band)
        px, x0, x1 = bilinear_int(wout, win, align, half)
        dy = (py - ONE_10 * (y0 + (0 if band is None else band[2])))[:, None]
        dx = (px - ONE_10 * x0)[None, :]
        v = x.astype(np.int64)
        total = (v[:, y0][:, :, x0] * (ONE_10 - dy) * (ONE_10 - dx) + v[:, y1][:, :, x0] * dy * (ONE_10 - dx)
                 + v[:, y0][:, :, x1] * (ONE_10 - dy) * dx + v[:, y1][:, :, x1] * dy * dx)
        rnd = np.where(total > 0, 1 << 19, -(1 << 19))
        return _c_div(total + rnd, 1 << 20)
    py, y0, y1 = _band(bilinear_float(fho, fhi, align, half), band)
    px, x0, x1 = bilinear_float(wout, win, align, half)
    dy = (py - (y0 + (0 if band is None else band[2])).astype(np.float32))[:, None].astype(np.float32)
    dx = (px - x0.astype(np.float32))[None, :].astype(np.float32)
    one = np.float32(1.0)
    v = x.astype(np.float32)
    return (v[:, y0][:, :, x0] * (one - dy) * (one - dx) + v[:, y1][:, :, x0] * dy * (one - dx)
            + v[:, y0][:, :, x1] * (one - dy) * dx + v[:, y1][:, :, x1] * dy * dx).astype(np.float32)


def upsample_zeros(x: np.ndarray, uh: int, uw: int, pads: tuple[int, int, int, int], fill) -> np.ndarray:
    """TCONV's input: `uh - 1` / `uw - 1` fill rows/columns between pixels, `pads` (top, bottom,
    left, right) of fill around (a transposed convolution as a convolution)."""
    c, h, w = x.shape
    t, b, l, r = pads
    out = np.full((c, (h - 1) * uh + 1 + t + b, (w - 1) * uw + 1 + l + r), fill, dtype=x.dtype)
    out[:, t:t + (h - 1) * uh + 1:uh, l:l + (w - 1) * uw + 1:uw] = x
    return out
