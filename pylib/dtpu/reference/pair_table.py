"""Two-operand 8-bit kernels (ADD, SUB, MUL) by lookup: the kernel's own output for every pair
of input bytes, computed once per parameter set, then one gather per tensor.

An 8-bit binary operator with fixed parameters has only 256 x 256 possible inputs, so its
output on a tensor is a table lookup of (x1 byte, x2 byte). The table *is* the kernel (the
numpy twin of :mod:`dtpu.reference.vector`, evaluated on all 65,536 pairs), so the result is
the kernel's bit for bit by construction; what changes is the cost: three multiply-by-quantized-
multiplier passes in int64 per element (ADD) become one index and one gather. The golden
model's vector unit uses it on the tensors where a table pays off (ResNet's residual ADDs were
about an eighth of its invoke time); small tensors keep the direct formula, whose cost is below
a table's construction.
"""
from __future__ import annotations

import functools
from typing import Callable

import numpy as np

#: elements from which a table is used. The direct formula costs ~0.2 ms a call whatever the
#: size (a dozen int64 numpy passes: 0.20 ms on 1,024 elements, 0.33 on 4,096), the lookup 6-12
#: us; the table's construction (one formula call on 65,536 pairs, ~5 ms, once per parameter set
#: and process) is repaid within ~25 invokes. 8,192 left ResNet-8's last residual ADD (4,096
#: elements) a third of that model's invoke time; below 1,024, tensors rare in these nets
#: keep the formula
MIN_ELEMENTS = 1024


@functools.lru_cache(maxsize=128)
def table(kernel: Callable, params, dtype: str) -> np.ndarray:
    """kernel(x1, x2, params) for every pair of `dtype` (int8 or uint8) values, indexed by
    ``x1 byte << 8 | x2 byte`` (read-only: shared by every caller with these parameters)."""
    values = np.arange(256, dtype=np.uint8).view(np.dtype(dtype))
    out = np.ascontiguousarray(kernel(np.repeat(values, 256), np.tile(values, 256), params))
    out.flags.writeable = False
    return out


def apply(kernel: Callable, x1: np.ndarray, x2: np.ndarray, params) -> np.ndarray:
    """kernel(x1, x2, params), the same array (values, dtype, broadcast shape), by a table when
    the operands are 8-bit tensors of one dtype and large enough to repay it."""
    if (x1.dtype != x2.dtype or x1.dtype.itemsize != 1 or x1.dtype.kind not in "iu"
            or max(x1.size, x2.size) < MIN_ELEMENTS):
        return kernel(x1, x2, params)
    index = (x1.view(np.uint8).astype(np.intp) << 8) | x2.view(np.uint8)
    return table(kernel, params, x1.dtype.str)[index]
