"""Nodes the delegate claims without running them: PAD folded into the next convolution, RESHAPE
and SQUEEZE as views.

Each unclaimed node cuts the graph into one more partition (one more doorbell, one more copy of
an intermediate tensor through the host). A PAD whose fill is the input's zero point, feeding a
VALID convolution, adds exactly the taps a SAME convolution treats as absent (TFLite's quantized
kernels skip out-of-bounds taps, i.e. read ``zero point - zero point = 0`` there), so the pair is
one SAME convolution on the unpadded input. RESHAPE and SQUEEZE move no data: the command-list
path keeps every tensor dense (row-major NHWC) in DDR, and a reader of the same element count
reads it as its own shape (listcompiler checks the counts), so they cost nothing inside a
partition. The view rule itself is :func:`dtpu.shape_fold.view_reason` (the board estimate of a
model file applies it too).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np

from dtpu.delegate.graph import NodeInfo, TensorInfo
from dtpu.shape_fold import view_reason  # noqa: F401  (the delegate's claim reads it here)
from dtpu.spec import ConvSpec, fold_pads, same_equivalent

PAD_CODES = {34: "PAD", 60: "PADV2"}
VIEW_CODES = {22: "RESHAPE", 43: "SQUEEZE"}
FOLDED_CODES = frozenset(PAD_CODES) | frozenset(VIEW_CODES)
CONV_CODES = (3, 4)
_FOLDABLE_TYPES = ("int8", "uint8")


class NotFoldable(Exception):
    """Its message says why the PAD or view stays on the CPU."""


@dataclass(frozen=True)
class PadFold:
    """A PAD the delegate folds into the convolution that reads it."""

    node: int                           # the PAD's node index
    input_index: int                    # the unpadded tensor (the convolution reads it instead)
    output_index: int
    pads: tuple[tuple[int, int], ...]   # ((before, after),) per dimension, NHWC
    fill: int                           # the padded value (the zero point)


def _constant_ints(tensor: TensorInfo, read: Callable[[TensorInfo], np.ndarray], what: str):
    if not tensor.constant:
        raise NotFoldable(f"its {what} {tensor.name!r} is computed at run time, not a constant")
    return np.asarray(read(tensor))


def pad_fold(pad: NodeInfo, conv: NodeInfo, tensor: Callable[[int], TensorInfo],
             read: Callable[[TensorInfo], np.ndarray], consumers: int) -> PadFold:
    """The fold of `pad` into `conv` (its only reader), or NotFoldable saying why not.

    `read` returns a constant tensor's values; `consumers` is how many nodes read the PAD's
    output."""
    name = PAD_CODES[pad.builtin_code]
    if consumers != 1:
        raise NotFoldable(f"its output feeds {consumers} nodes; a fold needs exactly one "
                          "convolution reading it")
    if conv.builtin_code not in CONV_CODES:
        raise NotFoldable(f"it feeds {conv.op}, not a convolution it could fold into")
    if len(pad.inputs) < 2 or min(pad.inputs[:2]) < 0 or len(pad.outputs) != 1:
        raise NotFoldable(f"{name} with inputs {pad.inputs} / outputs {pad.outputs}")
    x, y = tensor(pad.inputs[0]), tensor(pad.outputs[0])
    if x.type not in _FOLDABLE_TYPES or y.type != x.type:
        raise NotFoldable(f"{x.type} data; folded only for {'/'.join(_FOLDABLE_TYPES)} "
                          "(the zero point is the padding of their convolutions)")
    if not y.quantized or len(y.zero_point) != 1:
        raise NotFoldable(f"output {y.name!r} is not quantized per tensor")
    if len(x.shape) != 4:
        raise NotFoldable(f"input rank {len(x.shape)} (a fold needs NHWC)")
    pads = _constant_ints(tensor(pad.inputs[1]), read, "paddings")
    if pads.shape != (4, 2):
        raise NotFoldable(f"paddings of shape {pads.shape}; expected (4, 2)")
    pads_t = tuple((int(a), int(b)) for a, b in pads)
    if pads_t[0] != (0, 0) or pads_t[3] != (0, 0):
        raise NotFoldable(f"pads {pads_t} touch the batch or channel dimension")
    if min(min(p) for p in pads_t) < 0:
        raise NotFoldable(f"negative pads {pads_t}")
    # PAD fills a quantized tensor with its output zero point, PADV2 with its constant_values
    fill = int(y.zero_point[0])
    if pad.builtin_code == 60 and len(pad.inputs) > 2 and pad.inputs[2] >= 0:
        values = _constant_ints(tensor(pad.inputs[2]), read, "constant_values").reshape(-1)
        if values.size != 1:
            raise NotFoldable(f"constant_values has {values.size} values; expected one")
        fill = int(values[0])
    if fill != int(y.zero_point[0]):
        raise NotFoldable(f"fill value {fill} is not the zero point {int(y.zero_point[0])}: the "
                          "padded taps would not be absent from the convolution")
    if not conv.inputs or conv.inputs[0] != pad.outputs[0]:
        raise NotFoldable("the convolution reads it as its filter or bias, not as its input")
    p = conv.params or {}
    if p.get("padding") != 2:
        raise NotFoldable("the convolution after it is SAME already (the pads add to its own)")
    if len(conv.inputs) < 2 or conv.inputs[1] < 0:
        raise NotFoldable("the convolution after it has no filter")
    w = tensor(conv.inputs[1])
    if len(w.shape) != 4:
        raise NotFoldable(f"the convolution's filter has rank {len(w.shape)}")
    same = same_equivalent(x.shape, pads_t, (w.shape[1], w.shape[2]), tuple(p["stride"]),
                           tuple(p["dilation"]))
    if same is not None:
        raise NotFoldable(same)
    return PadFold(node=pad.index, input_index=x.index, output_index=y.index, pads=pads_t,
                   fill=fill)


def folded_spec(spec: ConvSpec, fold: PadFold, input_shape: tuple[int, ...]) -> ConvSpec:
    """`spec` (the VALID convolution over the padded tensor) as the SAME convolution over the
    PAD's input of shape `input_shape`; ValueError when the pads no longer match (after
    resize_tensor_input)."""
    return fold_pads(spec, fold.pads, input_shape)
