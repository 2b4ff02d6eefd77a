"""Which input row and column each output pixel of an 8-bit RESIZE_NEAREST_NEIGHBOR copies,
from the interpreter itself.

TFLite computes the source index three ways (the reference kernel's float formula with
align_corners / half_pixel_centers, the optimized 8-bit kernel's 16.16 fixed point when both
are false, and whatever a newer runtime does): rather than re-derive them, the runtime's own
kernel resizes a tensor whose pixels carry their own coordinates (two base-256 digits each for
row and column), and the output says where every pixel came from. Exact by construction: the
operator copies whole pixels, so its output is a function of the two index maps alone.
"""
from __future__ import annotations

import numpy as np

from dtpu import tflite_writer as tw

_CACHE: dict[tuple, tuple[tuple[int, ...], tuple[int, ...]]] = {}


def nearest_maps(dtype: str, in_hw: tuple[int, int], out_hw: tuple[int, int],
                 align_corners: bool, half_pixel_centers: bool) -> tuple[tuple[int, ...],
                                                                          tuple[int, ...]]:
    """(source row of each output row, source column of each output column) of TFLite's
    RESIZE_NEAREST_NEIGHBOR on a `dtype` tensor of H x W `in_hw` resized to `out_hw`;
    ValueError when the runtime's map is not separable (a row's columns depending on the row)
    or the sizes are outside 1..65535."""
    from dtpu.tflite import Interpreter

    if dtype not in ("int8", "uint8"):
        raise ValueError(f"dtype {dtype!r}; accepted: int8, uint8")
    (ih, iw), (oh, ow) = (int(d) for d in in_hw), (int(d) for d in out_hw)
    if not all(1 <= d < 1 << 16 for d in (ih, iw, oh, ow)):
        raise ValueError(f"sizes {in_hw} -> {out_hw}; accepted: 1..65535")
    key = (dtype, ih, iw, oh, ow, bool(align_corners), bool(half_pixel_centers))
    if key in _CACHE:
        return _CACHE[key]
    tensors = [tw.Tensor((1, ih, iw, 4), dtype, 1.0, 0, name="x"),
               tw.Tensor((2,), "int32", data=np.array([oh, ow], np.int32), name="size"),
               tw.Tensor((1, oh, ow, 4), dtype, 1.0, 0, name="y")]
    node = tw.Node("RESIZE_NEAREST_NEIGHBOR", [0, 1], [2],
                   {"align_corners": bool(align_corners),
                    "half_pixel_centers": bool(half_pixel_centers)})
    it = Interpreter(model_content=tw.write(tensors, [node], [0], [2],
                                            description="dtpu resize index maps"))
    it.allocate_tensors()
    rows, cols = np.meshgrid(np.arange(ih), np.arange(iw), indexing="ij")
    digits = np.stack([rows >> 8, rows & 255, cols >> 8, cols & 255], axis=-1)
    it.set_tensor(it.get_input_details()[0]["index"],
                  digits.astype(np.uint8).view(np.dtype(dtype))[None])
    it.invoke()
    out = it.get_tensor(it.get_output_details()[0]["index"])[0].view(np.uint8).astype(np.int64)
    src_rows = out[..., 0] * 256 + out[..., 1]
    src_cols = out[..., 2] * 256 + out[..., 3]
    if not ((src_rows == src_rows[:, :1]).all() and (src_cols == src_cols[:1, :]).all()):
        raise ValueError(f"the runtime's RESIZE_NEAREST_NEIGHBOR {in_hw} -> {out_hw} is not one "
                         "row map and one column map")
    maps = (tuple(int(v) for v in src_rows[:, 0]), tuple(int(v) for v in src_cols[0]))
    _CACHE[key] = maps
    return maps


def integer_factors(maps: tuple[tuple[int, ...], tuple[int, ...]],
                    in_hw: tuple[int, int]) -> tuple[int, int]:
    """(fy, fx) when output row r copies input row r // fy and column c column c // fx (an
    integer upscale, every pixel repeated fy x fx times: the vector unit's COPYs); ValueError
    naming the first index that breaks the pattern otherwise."""
    factors = []
    for axis, (m, n) in enumerate(zip(maps, in_hw)):
        what = ("row", "column")[axis]
        if len(m) % n:
            raise ValueError(f"{len(m)} output {what}s from {n}: not an integer upscale")
        f = len(m) // n
        bad = [i for i, src in enumerate(m) if src != i // f]
        if bad:
            raise ValueError(f"output {what} {bad[0]} copies input {what} {m[bad[0]]}, not "
                             f"{bad[0] // f}: not a {f}x nearest upscale (the COPY pattern)")
        factors.append(f)
    return factors[0], factors[1]
