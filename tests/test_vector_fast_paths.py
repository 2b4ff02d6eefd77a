"""The golden model's faster ways to the vector unit's results give the same bytes:
dtpu.reference.pair_table (ADD, SUB and MUL by lookup) equals the numpy twins it tabulates, on
every pair of input bytes and on broadcast tensors above and below the table's threshold; the
max and average pools' strided folds equal the window-by-window definition on any geometry the
unit's fields can give (the twins themselves are checked against TFLite in
tests/test_vector_reference.py)."""
from __future__ import annotations

import numpy as np
import pytest

from dtpu.reference import pair_table
from dtpu.reference import vector as v


def _params(r, op: str, dtype: str):
    info = np.iinfo(dtype)
    scale = lambda: float(np.float32(10 ** r.uniform(-3, 0)))   # noqa: E731
    zp = lambda: int(r.integers(info.min, info.max + 1))         # noqa: E731
    act = str(r.choice(["NONE", "RELU", "RELU6"]))
    if op == "MUL":
        return v.mul, v.mul_params(scale(), zp(), scale(), zp(), scale(), zp(), dtype, act)
    return v.add, v.add_params(scale(), zp(), scale(), zp(), scale(), zp(), dtype, act,
                               sub=op == "SUB")


@pytest.mark.parametrize("dtype", ["int8", "uint8"])
@pytest.mark.parametrize("op", ["ADD", "SUB", "MUL"])
def test_the_table_is_the_kernel_on_every_pair(op, dtype):
    r = np.random.default_rng(sum(map(ord, op + dtype)))
    for _ in range(3):
        kernel, p = _params(r, op, dtype)
        values = np.arange(256, dtype=np.uint8).view(dtype)
        x1, x2 = np.repeat(values, 256), np.tile(values, 256)
        got = pair_table.table(kernel, p, np.dtype(dtype).str)
        want = kernel(x1, x2, p)
        assert got.dtype == want.dtype and np.array_equal(got, want)
        assert not got.flags.writeable


@pytest.mark.parametrize("dtype", ["int8", "uint8"])
@pytest.mark.parametrize("op", ["ADD", "SUB", "MUL"])
def test_apply_equals_the_kernel_on_tensors_and_broadcasts(op, dtype):
    r = np.random.default_rng(7 + len(op) + len(dtype))
    info = np.iinfo(dtype)
    kernel, p = _params(r, op, dtype)
    for shape, other in (((1, 56, 56, 32), (1, 56, 56, 32)), ((1, 28, 28, 64), (1, 1, 1, 64)),
                         ((1, 1, 1, 64), (1, 28, 28, 64)), ((1, 4, 4, 8), (1, 4, 4, 8))):
        x1 = r.integers(info.min, info.max + 1, shape).astype(dtype)
        x2 = r.integers(info.min, info.max + 1, other).astype(dtype)
        got, want = pair_table.apply(kernel, x1, x2, p), kernel(x1, x2, p)
        assert got.dtype == want.dtype and got.shape == want.shape and np.array_equal(got, want)
    # a strided (non-contiguous) operand indexes by its own bytes too
    x1 = r.integers(info.min, info.max + 1, (1, 64, 64, 8)).astype(dtype)[:, ::2]
    x2 = r.integers(info.min, info.max + 1, (1, 32, 64, 8)).astype(dtype)
    assert np.array_equal(pair_table.apply(kernel, x1, x2, p), kernel(x1, x2, p))


def test_small_or_mixed_operands_take_the_kernel_itself():
    calls = []

    def kernel(a, b, p):
        calls.append(a.shape)
        return (a.astype(np.int16) + b).astype(a.dtype)

    small = np.zeros((1, 4, 4, 8), np.int8)
    pair_table.apply(kernel, small, small, "p")
    big = np.zeros(pair_table.MIN_ELEMENTS, np.int8)
    pair_table.apply(kernel, big, big.astype(np.uint8), "p")    # two dtypes: no common table
    assert calls == [(1, 4, 4, 8), (pair_table.MIN_ELEMENTS,)]
    pair_table.apply(kernel, big, big, "p")
    assert calls[-1] == (65536,)     # the table's construction: every pair once


def _max_pool_by_windows(x, g, lo, hi):
    """MaxPool output by output: the largest tap inside the image (the type's minimum if none)."""
    n, h, w, c = x.shape
    out = np.full((n, g.oh, g.ow, c), np.iinfo(x.dtype).min, np.int64)
    for oy in range(g.oh):
        for ox in range(g.ow):
            y0, x0 = oy * g.sh - g.pad_top, ox * g.sw - g.pad_left
            win = x[:, max(y0, 0):max(y0 + g.fh, 0), max(x0, 0):max(x0 + g.fw, 0)]
            if win.size:
                out[:, oy, ox] = win.max(axis=(1, 2))
    return np.clip(out, lo, hi).astype(x.dtype)


@pytest.mark.parametrize("dtype", ["int8", "uint8"])
def test_max_pool_equals_the_window_by_window_definition(dtype):
    r = np.random.default_rng(3 if dtype == "int8" else 4)
    info = np.iinfo(dtype)
    for trial in range(60):
        h, w, c = (int(v) for v in r.integers(1, 12, 3))
        fh, fw, sh, sw = (int(v) for v in r.integers(1, 5, 4))
        pt, pl = (int(v) for v in r.integers(0, 6, 2))      # a field may pad past a filter
        oh, ow = (int(v) for v in r.integers(1, 8, 2))
        g = v.PoolGeometry(fh, fw, sh, sw, pt, pl, oh, ow)
        x = r.integers(info.min, info.max + 1, (1, h, w, c)).astype(dtype)
        lo, hi = sorted(int(t) for t in r.integers(info.min, info.max + 1, 2))
        got, want = v.max_pool(x, g, lo, hi), _max_pool_by_windows(x, g, lo, hi)
        assert got.dtype == want.dtype and np.array_equal(got, want), (trial, g)


def _average_pool_by_windows(x, g, lo, hi):
    """AveragePool output by output: the taps inside the image summed, divided by their count
    rounded half away from zero (TFLite's integer average pool), clamped."""
    n, h, w, c = x.shape
    out = np.zeros((n, g.oh, g.ow, c), np.int64)
    for oy in range(g.oh):
        for ox in range(g.ow):
            y0, x0 = oy * g.sh - g.pad_top, ox * g.sw - g.pad_left
            win = x[:, max(y0, 0):max(y0 + g.fh, 0), max(x0, 0):max(x0 + g.fw, 0)].astype(np.int64)
            count = win.shape[1] * win.shape[2]
            total = win.sum(axis=(1, 2))
            rounded = np.where(total > 0, total + count // 2, total - count // 2)
            out[:, oy, ox] = np.sign(rounded) * (np.abs(rounded) // count)  # C++ truncation
    return np.clip(out, lo, hi).astype(x.dtype)


@pytest.mark.parametrize("dtype", ["int8", "uint8"])
def test_average_pool_equals_the_window_by_window_definition(dtype):
    """The strided fold over the zero-padded image (one sum for a single window), counts from
    rows x columns inside, on random geometries whose every window holds a tap (SAME and VALID
    always do), batch 2 too."""
    r = np.random.default_rng(5 if dtype == "int8" else 6)
    info = np.iinfo(dtype)
    checked = 0
    while checked < 60:
        h, w, c = (int(v) for v in r.integers(1, 12, 3))
        fh, fw, sh, sw = (int(v) for v in r.integers(1, 5, 4))
        pt, pl = (int(v) for v in r.integers(0, 4, 2))
        oh, ow = (int(v) for v in r.integers(1, 8, 2)) if checked % 4 else (1, 1)  # global too
        if (oh - 1) * sh - pt >= h or (ow - 1) * sw - pl >= w or pt >= fh or pl >= fw:
            continue   # a window with no tap inside: TFLite would divide by zero
        g = v.PoolGeometry(fh, fw, sh, sw, pt, pl, oh, ow)
        x = r.integers(info.min, info.max + 1, (int(r.integers(1, 3)), h, w, c)).astype(dtype)
        lo, hi = sorted(int(t) for t in r.integers(info.min, info.max + 1, 2))
        got, want = v.average_pool(x, g, lo, hi), _average_pool_by_windows(x, g, lo, hi)
        assert got.dtype == want.dtype and np.array_equal(got, want), (checked, g)
        checked += 1
