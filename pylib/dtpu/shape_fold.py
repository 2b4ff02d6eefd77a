"""Shape vectors the delegate computes at Prepare: SHAPE -> STRIDED_SLICE -> PACK chains.

Keras writes ``tf.reshape(x, (tf.shape(x)[0], 1, 1, C))`` (EfficientNet's squeeze-excite blocks,
MobileNet's classifier head) as SHAPE -> STRIDED_SLICE -> PACK feeding the RESHAPE's shape
operand. On the CPU these nodes read a tensor the partition writes, so they cut the graph at
every such head (EfficientNet-B0: 16 cuts). Yet their values depend only on the *shape* of
that tensor, which the partition's kernel Prepare sets itself: the chain is evaluated there,
from the current shapes, exactly as TFLite's kernels would evaluate it at Eval, and the RESHAPE
becomes a view whose output shape is that value. Nothing runs on the device for them.

Only what this module can evaluate from shapes and model constants is claimed: SHAPE of a
tensor whose shape is known at Prepare (not a dynamic tensor), STRIDED_SLICE of a 1-D int32
vector (no ellipsis, new-axis or offset masks, every index inside the vector), PACK of int32
values; a node whose value any CPU node reads stays on the CPU with all it feeds.

:func:`view_reason` says whether a RESHAPE / SQUEEZE (its shape a constant or such a value) is
a view. The delegate's claim (dtpu.delegate.runtime) and the model-file board estimate
(dtpu.board.estimate) both call this module, so they agree on which of these nodes TFLite
still runs: it sits in the foundation layer, below both.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Callable

import numpy as np

if TYPE_CHECKING:   # duck-typed: the delegate's graph records, or a model file's (dtpu.board.estimate)
    from dtpu.delegate.graph import NodeInfo, TensorInfo

SHAPE, STRIDED_SLICE, PACK, RESHAPE = 77, 45, 83, 22
SHAPE_CODES = {SHAPE: "SHAPE", STRIDED_SLICE: "STRIDED_SLICE", PACK: "PACK"}
DYNAMIC = 4          # kTfLiteDynamic: a tensor whose shape is known only after its producer ran

#: an operand's value: model constants (read at the claim) or chain outputs (evaluated)
Values = Callable[[int], "np.ndarray | None"]
Shapes = Callable[[int], tuple]


class NotFolded(Exception):
    """Its message says why the node's value is not computed at Prepare."""


def _int32(value, what: str) -> np.ndarray:
    if value is None:
        raise NotFolded(f"its {what} is computed at run time, not a constant or a shape")
    value = np.asarray(value)
    if value.dtype != np.int32:
        raise NotFolded(f"its {what} is {value.dtype}, not int32")
    return value


def evaluate(node: NodeInfo, value: Values, shape: Shapes, out_type: str) -> np.ndarray:
    """The int32 value of chain node `node` (SHAPE, STRIDED_SLICE or PACK) as TFLite 2.14's
    kernel computes it; NotFolded when it is not one this module evaluates. `value(t)`: an
    operand's value (None: not known at Prepare); `shape(t)`: a tensor's current shape;
    `out_type`: the output tensor's type name."""
    if node.builtin_code not in SHAPE_CODES:
        raise NotFolded(f"{node.op} is not a shape operator")
    if len(node.outputs) != 1 or not node.inputs or min(node.inputs) < 0:
        raise NotFolded(f"inputs {node.inputs} / outputs {node.outputs}")
    if out_type != "int32":
        raise NotFolded(f"its output is {out_type}, not int32")
    p = node.params or {}
    if node.builtin_code == SHAPE:
        if len(node.inputs) != 1:
            raise NotFolded(f"{len(node.inputs)} inputs (expected 1)")
        return np.asarray(shape(node.inputs[0]), dtype=np.int32)
    if node.builtin_code == PACK:
        values = [_int32(value(t), f"input {k}") for k, t in enumerate(node.inputs)]
        if p.get("values_count") != len(values):
            raise NotFolded(f"values_count {p.get('values_count')} for {len(values)} inputs")
        if len({v.shape for v in values}) != 1:
            raise NotFolded(f"inputs of shapes {[v.shape for v in values]} (PACK needs one)")
        rank = values[0].ndim + 1
        axis = int(p.get("axis", 0))
        if not -rank <= axis < rank:
            raise NotFolded(f"axis {axis} of a rank-{rank} output")
        return np.stack(values, axis=axis % rank).astype(np.int32)
    # STRIDED_SLICE (strided_slice.cc's Prepare with strided_slice_logic.h's Start/StopForAxis)
    if len(node.inputs) != 4:
        raise NotFolded(f"{len(node.inputs)} inputs (expected input, begin, end, strides)")
    for mask in ("ellipsis_mask", "new_axis_mask"):
        if p.get(mask):
            raise NotFolded(f"{mask} {p.get(mask)} (folded: 0)")
    if p.get("offset"):
        raise NotFolded("offset=true (folded: false)")
    x = _int32(value(node.inputs[0]), "input")
    begin, end, strides = (_int32(value(t), what).reshape(-1) for t, what in
                           zip(node.inputs[1:], ("begin", "end", "strides")))
    if x.ndim != 1 or begin.size != 1 or end.size != 1 or strides.size != 1:
        raise NotFolded(f"a slice of a rank-{x.ndim} tensor with {begin.size} begin values "
                        "(folded: a 1-D vector, one axis)")
    size, stride = int(x.shape[0]), int(strides[0])
    if stride == 0:
        raise NotFolded("stride 0")
    shrink = bool(p.get("shrink_axis_mask", 0) & 1)
    start = _bound(int(begin[0]), bool(p.get("begin_mask", 0) & 1), stride, size, True)
    if shrink:
        stop = start + 1
    else:
        stop = _bound(int(end[0]), bool(p.get("end_mask", 0) & 1), stride, size, False)
    picked = list(range(start, stop, stride if not shrink else 1))
    if size == 0 or any(not 0 <= i < size for i in picked):
        raise NotFolded(f"indices {picked} outside the vector of {size} values")
    out = x[picked].astype(np.int32)
    return out.reshape(()) if shrink else out


def _bound(index: int, masked: bool, stride: int, size: int, begin: bool) -> int:
    """StartForAxis / StopForAxis of one axis: a masked bound is the far end on its side, a
    negative one counts from the end, then clamped as TFLite clamps it."""
    if masked:
        index = -(2 ** 31) if (stride > 0) == begin else 2 ** 31 - 1
    if index < 0:
        index += size
    return min(max(index, 0), size) if stride > 0 else min(max(index, -1), size - 1)


def reshaped(shape_value: np.ndarray, count: int) -> tuple[int, ...]:
    """The RESHAPE output of `count` elements for shape vector `shape_value` (one -1 stretches,
    reshape.cc's ResizeOutput); NotFolded when no such shape exists."""
    dims = [int(v) for v in np.asarray(shape_value).reshape(-1)]
    if np.asarray(shape_value).ndim != 1:
        raise NotFolded(f"shape value {dims} is not a vector")
    if dims.count(-1) > 1 or any(d < -1 for d in dims):
        raise NotFolded(f"shape {dims}: at most one -1 and no other negative size")
    known = int(np.prod([d for d in dims if d != -1], dtype=np.int64))
    if -1 in dims:
        if known == 0 or count % known:
            raise NotFolded(f"shape {dims} does not divide {count} elements")
        dims[dims.index(-1)] = count // known
    elif known != count:
        raise NotFolded(f"shape {dims} holds {known} elements, the input {count}")
    return tuple(dims)


def fold_chains(nodes: list[NodeInfo], tensor: Callable[[int], TensorInfo],
                constant: Callable[[TensorInfo], np.ndarray], readers: dict[int, list[NodeInfo]]
                ) -> tuple[dict[int, np.ndarray], dict[int, str], dict[int, dict[int, np.ndarray]]]:
    """The chain nodes of `nodes` (plan order) whose values are known at Prepare and read only
    by other such nodes or as a RESHAPE's shape: (output tensor -> value, node index -> why
    not for the others, node index -> the model constants it read, kept for kernel Prepare)."""
    values: dict[int, np.ndarray] = {}
    why: dict[int, str] = {}
    kept: dict[int, dict[int, np.ndarray]] = {}
    chain = [n for n in nodes if n.builtin_code in SHAPE_CODES]
    for node in chain:
        consts: dict[int, np.ndarray] = {}

        def value(t: int):
            if t in values:
                return values[t]
            info = tensor(t)
            if not info.constant:
                return None
            consts[t] = np.asarray(constant(info)).reshape(info.shape)
            return consts[t]

        try:
            if node.builtin_code == SHAPE and node.inputs and node.inputs[0] >= 0:
                if tensor(node.inputs[0]).allocation == DYNAMIC:
                    raise NotFolded(f"the shape of {tensor(node.inputs[0]).name!r} is known "
                                    "only at run time (a dynamic tensor)")
            out = tensor(node.outputs[0]) if len(node.outputs) == 1 else None
            result = evaluate(node, value, lambda t: tuple(tensor(t).shape),
                              out.type if out is not None else "none")
            if tuple(result.shape) != tuple(out.shape):
                raise NotFolded(f"value of shape {result.shape}, tensor {tuple(out.shape)}")
        except (NotFolded, IndexError, ValueError) as exc:
            why[node.index] = str(exc)
            continue
        values[node.outputs[0]] = result
        kept[node.index] = consts
    # a value some other node reads (or none: a graph output) is the CPU's to compute
    changed = True
    while changed:
        changed = False
        for node in chain:
            if node.index not in kept:
                continue
            t = node.outputs[0]
            users = readers.get(t, [])
            bad = [u for u in users if not (
                (u.builtin_code in SHAPE_CODES and u.index in kept)
                or (u.builtin_code == RESHAPE and len(u.inputs) > 1 and u.inputs[1] == t
                    and u.inputs[0] != t))]
            if not users or bad:
                why[node.index] = (f"its value is read by {bad[0].op} node {bad[0].index}, "
                                   "which stays on the CPU" if bad else
                                   "its value is read by no node (a graph output)")
                del kept[node.index]
                del values[t]
                changed = True
    return values, why, kept


def view_reason(node: NodeInfo, tensor: Callable[[int], TensorInfo],
                shape_values: dict[int, np.ndarray] | None = None) -> str | None:
    """Why a RESHAPE / SQUEEZE cannot be a view (None: it can). `shape_values`: the shape
    vectors the partition evaluates at Prepare (:func:`fold_chains`), by tensor."""
    if not node.inputs or node.inputs[0] < 0 or len(node.outputs) != 1:
        return f"inputs {node.inputs} / outputs {node.outputs}"
    x, y = tensor(node.inputs[0]), tensor(node.outputs[0])
    shape_values = shape_values or {}
    for index in node.inputs[1:]:
        if index >= 0 and index in shape_values:
            if tensor(index).type != "int32" or len(tensor(index).shape) != 1:
                return (f"its shape {tensor(index).name!r} is a {tensor(index).type} tensor of "
                        f"shape {tuple(tensor(index).shape)} (a view takes a 1-D int32 vector)")
            count = int(np.prod(x.shape, dtype=np.int64)) if x.shape else 1
            try:
                out = reshaped(shape_values[index], count)
            except NotFolded as exc:
                return f"its shape evaluated at Prepare: {exc}"
            if out != tuple(y.shape):
                return f"its shape evaluates to {out}, the output tensor has {tuple(y.shape)}"
        elif index >= 0 and not tensor(index).constant:
            # claimed, it would sit in a partition waiting for CPU nodes that read the
            # partition's own output
            return (f"its shape {tensor(index).name!r} is computed at run time by the CPU, "
                    "not a constant of the model")
    if x.type != y.type or x.dtype is None:
        return f"{x.type} input, {y.type} output"
    if x.scale != y.scale or x.zero_point != y.zero_point:
        return "input and output quantization differ (a requantization, not a view)"
    count = int(np.prod(x.shape, dtype=np.int64)) if x.shape else 1
    out = int(np.prod(y.shape, dtype=np.int64)) if y.shape else 1
    if count != out or min(tuple(x.shape) + tuple(y.shape) + (1,)) < 0:
        return f"shape {tuple(x.shape)} -> {tuple(y.shape)} changes the element count"
    return None
