"""Which vector-unit nodes (ADD, SUB, MUL, AVERAGE_POOL_2D, MAX_POOL_2D, MEAN and the table
operators LOGISTIC, TANH, HARD_SWISH, LEAKY_RELU, RELU, RELU6, RELU_N1_TO_1, QUANTIZE: contract
2.1) the delegate claims, read from TFLite's own structs.

A node is claimed only when its :class:`~dtpu.hw.vec_lower.VecSpec` is one the unit computes as
TFLite's int8 / uint8 kernel does (:mod:`dtpu.reference.vector`, the integers of TFLite's own
Prepare; a table operator's 256 outputs computed by the runtime's own kernel,
:func:`dtpu.unary_tables.vector_table`) and the target's unit can hold it (:meth:`dtpu.backends.base.Backend.vector_error`).
The same function runs at the delegate's Prepare and at every kernel Prepare (current shapes),
like :func:`dtpu.delegate.support.analyze` for the convolutions.

Whether a claimed node is worth it (it joins convolutions' partition) is decided over the
whole graph afterwards (:mod:`dtpu.delegate.partitioning`).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np

from dtpu.delegate.graph import NodeInfo, TensorInfo
from dtpu.delegate.support import FLT_MAX, FLT_MIN, TABLE_CODES, VECTOR_CODES, Unsupported
from dtpu.hw.vec_lower import VecSpec, concat_spec, constant_operand

#: TfLiteFusedActivation codes -> the names dtpu.reference.vector takes
_ACTIVATIONS = {0: "NONE", 1: "RELU", 2: "RELU_N1_TO_1", 3: "RELU6"}
_OTHER_ACTIVATIONS = {4: "TANH", 5: "SIGN_BIT", 6: "SIGMOID"}
_PADDING = {1: "SAME", 2: "VALID"}
_DTYPES = {"int8": np.dtype(np.int8), "uint8": np.dtype(np.uint8)}
BINARY = (0, 18, 41)          # ADD, MUL, SUB: two activation operands
POOLS = (1, 17)               # AVERAGE_POOL_2D, MAX_POOL_2D
MEAN = 40
CONCATENATION = 2
RESIZE_NEAREST = 97


def _require(condition: bool, reason: str) -> None:
    if not condition:
        raise Unsupported(reason)


@dataclass(frozen=True)
class VecDecision:
    """A vector node's claim: its spec (None: stays on the CPU, `reason` says why), the tensors
    it reads (operand A, and B for ADD / SUB / MUL; a constant operand is not one) and writes,
    and the constants it read (a MEAN's axes, an ADD / SUB / MUL's constant operand), kept for
    the kernel Prepare, when the model's buffers are not read again."""

    spec: VecSpec | None
    reason: str | None
    inputs: tuple[int, ...] = ()
    output_index: int = -1
    axes: np.ndarray | None = None
    const: np.ndarray | None = None

    def kept_constant(self, info: TensorInfo) -> np.ndarray:
        """The constant read at the claim for tensor `info` (the kernel Prepare's reader)."""
        return self.axes if info.type in ("int32", "int64") else self.const

    @property
    def claimed(self) -> bool:
        return self.spec is not None


#: the host runtimes whose default interpreter computes these operators with the builtin
#: kernels dtpu.reference.vector reproduces (TFLite 2.14's, proven against tflite-runtime by
#: tests/test_vector_reference.py). LiteRT's default interpreter hands quantized ADD, MUL, the
#: pools and MEAN to XNNPACK, whose rounding is not established here (a uint8 MUL differs by
#: one on some elements): there they stay on the CPU.
PROVEN_RUNTIMES = ("tflite_runtime",)


def analyze(node: NodeInfo, tensor: Callable[[int], TensorInfo],
            constant: Callable[[TensorInfo], np.ndarray],
            unit_error: Callable[[VecSpec], str | None], runtime: str | None = None, *,
            check_output: bool = True) -> VecDecision:
    """Decide whether vector node `node` is claimed; never raises for anything a model holds.
    `constant(info)` reads a constant tensor (a MEAN's axes); `unit_error(spec)` is the target's
    reason its unit cannot run `spec` (None: it can); `runtime`: the host runtime whose output
    must be equalled (None: dtpu.reference's default). `check_output`: the output tensor's
    shape must be the operator's (at the delegate's Prepare; a kernel Prepare sets it itself)."""
    if runtime is None:
        from dtpu import reference

        runtime = reference.default_runtime()
    if runtime not in PROVEN_RUNTIMES:
        return VecDecision(spec=None, reason=(
            f"{node.op} under {runtime}: its default interpreter runs it with XNNPACK, whose "
            f"rounding the vector unit's formulas (TFLite 2.14's builtin kernels) are not proven "
            f"to match"))
    try:
        return _analyze(node, tensor, constant, unit_error, check_output)
    except Unsupported as exc:
        return VecDecision(spec=None, reason=str(exc))
    except (IndexError, ValueError) as exc:   # an operand index outside the context, unreadable
        return VecDecision(spec=None, reason=f"operand {exc}")


def _analyze(node, tensor, constant, unit_error, check_output) -> VecDecision:
    op = VECTOR_CODES.get(node.builtin_code)
    _require(op is not None, f"{node.op} is not an operator of the vector unit")
    table_op = node.builtin_code in TABLE_CODES
    # a table operator has no builtin parameters but LEAKY_RELU's slope
    _require(node.params is not None or (table_op and op != "LEAKY_RELU"),
             "node has no builtin parameters")
    n_in = 2 if node.builtin_code in BINARY or node.builtin_code in (MEAN, RESIZE_NEAREST) else 1
    if node.builtin_code == CONCATENATION:
        n_in = max(1, len(node.inputs))
    _require(len(node.inputs) == n_in and len(node.outputs) == 1 and min(node.inputs) >= 0,
             f"{len(node.inputs)} inputs / {len(node.outputs)} outputs (expected {n_in} / 1)")
    x, y = tensor(node.inputs[0]), tensor(node.outputs[0])
    _require(not (x.sparse or y.sparse), "sparse tensors")
    dt = _DTYPES.get(x.type)
    _require(dt is not None and (y.type == x.type or (op == "QUANTIZE" and y.type in _DTYPES)),
             f"{x.type} -> {y.type} tensors (the vector unit takes int8 or uint8 in and out)")
    _require(not x.constant or node.builtin_code in BINARY,
             f"input {x.name!r} is a constant of the model")

    def q(t: TensorInfo, what: str) -> tuple[float, int]:
        """(scale, zero point) of a per-tensor quantized 8-bit tensor, the scale a normal
        float32 (what TFLite's Prepare turns into multipliers) and the zero point in range."""
        _require(len(t.scale) == 1 and len(t.zero_point) == 1,
                 f"{what} tensor {t.name!r} has {len(t.scale)} scales and {len(t.zero_point)} "
                 "zero points (accepted: one of each, per-tensor quantization)")
        scale, zp = float(t.scale[0]), int(t.zero_point[0])
        _require(FLT_MIN <= scale <= FLT_MAX, f"{what} tensor {t.name!r} has scale {scale}, not "
                 "a positive normal float32")
        tdt = _DTYPES.get(t.type, dt)      # QUANTIZE's output may be the other 8-bit type
        info = np.iinfo(tdt)
        _require(info.min <= zp <= info.max, f"{what} tensor {t.name!r} has zero point {zp} "
                 f"outside {tdt.name}'s range [{info.min}, {info.max}]")
        return scale, zp

    if table_op:
        return _table(node, op, dt, x, y, q, unit_error, check_output)
    if node.builtin_code == CONCATENATION:
        return _concatenation(node, dt, tensor, y, q, unit_error, check_output)
    if node.builtin_code == RESIZE_NEAREST:
        return _resize(node, dt, x, y, tensor, constant, q, unit_error, check_output)
    params = node.params
    act = params.get("activation", 0)
    _require(act in _ACTIVATIONS, "fused activation " + _OTHER_ACTIVATIONS.get(act, str(act)))
    common = dict(op=op, dtype=dt, a_shape=tuple(x.shape), a_q=q(x, "input"),
                  out_q=q(y, "output"), activation=_ACTIVATIONS[act], name=y.name)
    axes = data = None
    inputs = (node.inputs[0],)
    if node.builtin_code in BINARY:
        b = tensor(node.inputs[1])
        _require(b.type == x.type, f"{op} of {x.type} and {b.type}")
        _require(not (x.constant and b.constant), f"{op} of two constants")
        shapes, const = [tuple(x.shape), tuple(b.shape)], None
        for which, t in enumerate((x, b)):
            if t.constant:      # written into DDR at Prepare, read by the unit as operand B
                data = np.asarray(constant(t)).reshape(t.shape).astype(dt)
                try:
                    shapes[which], raw = constant_operand(data, shapes[1 - which])
                except ValueError as exc:
                    raise Unsupported(f"{op} {y.name!r}: {exc}") from None
                const = (which, raw)
        inputs = tuple(t for t, info in zip(node.inputs[:2], (x, b)) if not info.constant)
        common["a_shape"] = shapes[0]
        spec = VecSpec(b_shape=shapes[1], b_q=q(b, "second input"), const=const, **common)
    elif node.builtin_code == MEAN:
        info = tensor(node.inputs[1])
        _require(info.constant and info.type in ("int32", "int64"),
                 f"MEAN axes {info.name!r} are not constant integers of the model")
        axes = constant(info)
        rank = len(x.shape)
        got = sorted({int(a) % rank for a in np.asarray(axes).reshape(-1)}) if rank else []
        _require(rank == 4 and got == [1, 2],
                 f"MEAN over axes {got} of a rank-{rank} tensor (the vector unit reduces H and W "
                 "of NHWC)")
        # keep_dims true: TFLite's other kernel (optimized_ops::Mean), other integers, the
        # unit's formula (dtpu.reference.vector.mean_keep_dims_params)
        spec = VecSpec(keep_dims=bool(params.get("keep_dims")), **common)
    else:
        _require(params.get("padding") in _PADDING, f"padding {params.get('padding')}")
        spec = VecSpec(filter=tuple(params["filter"]), stride=tuple(params["stride"]),
                       padding=_PADDING[params["padding"]], **common)
    _require(min(spec.a_shape, default=0) > 0, f"input shape {spec.a_shape} has no elements")
    why = unit_error(spec)
    _require(why is None, str(why))
    _require(not check_output or tuple(y.shape) == tuple(spec.output_shape),
             f"output shape {tuple(y.shape)}; the operator gives {tuple(spec.output_shape)}")
    return VecDecision(spec=spec, reason=None, inputs=inputs, output_index=y.index, axes=axes,
                       const=data)


def _table(node, op: str, dt: np.dtype, x: TensorInfo, y: TensorInfo, q, unit_error,
           check_output: bool) -> VecDecision:
    """A one-input operator as the unit's TABLE: its 256 outputs from the runtime's own kernel
    on a one-op graph of the node's quantization (exact by construction: an element's output
    depends on its byte alone); a kernel that refuses the quantization refuses the claim."""
    from dtpu.unary_tables import vector_table

    _require(len(x.shape) <= 4, f"{op} of a rank-{len(x.shape)} tensor (the vector unit takes "
             "rank <= 4)")
    qx, qy = q(x, "input"), q(y, "output")
    odt = _DTYPES[y.type]
    options = {"alpha": float(node.params["alpha"])} if op == "LEAKY_RELU" else None
    try:
        table = vector_table(op, dt, odt, qx, qy, options)
    except (RuntimeError, ValueError) as exc:
        raise Unsupported(f"{op}: no table from the runtime's kernel for input {qx}, output "
                          f"{qy}: {exc}") from None
    shape = (1,) * (4 - len(x.shape)) + tuple(x.shape)
    spec = VecSpec(op=op, dtype=dt, a_shape=shape, a_q=qx, out_q=qy, name=y.name, table=table,
                   out_dtype=odt if odt != dt else None)
    _require(min(shape, default=0) > 0, f"input shape {tuple(x.shape)} has no elements")
    why = unit_error(spec)
    _require(why is None, str(why))
    _require(not check_output or tuple(y.shape) == tuple(x.shape),
             f"output shape {tuple(y.shape)}; the operator gives {tuple(x.shape)}")
    return VecDecision(spec=spec, reason=None, inputs=(node.inputs[0],), output_index=y.index)


def _concatenation(node, dt: np.dtype, tensor, y: TensorInfo, q, unit_error,
                   check_output: bool) -> VecDecision:
    """A CONCATENATION along channels whose inputs share the output's quantization: a copy, its
    producers writing their slices in place where they can (dtpu.hw.listcompiler)."""
    ins = [tensor(t) for t in node.inputs]
    _require(not any(t.sparse for t in ins), "sparse tensors")
    act = node.params.get("activation", 0)
    try:
        shape, parts = concat_spec(
            [(tuple(t.shape), t.type, q(t, f"input {k}"), t.constant) for k, t in enumerate(ins)],
            (tuple(y.shape), y.type, q(y, "output")), int(node.params.get("axis", 0)),
            _ACTIVATIONS.get(act, _OTHER_ACTIVATIONS.get(act, str(act))))
    except ValueError as exc:
        raise Unsupported(str(exc)) from None
    spec = VecSpec(op="CONCATENATION", dtype=dt, a_shape=shape, a_q=q(y, "output"),
                   out_q=q(y, "output"), name=y.name, parts=parts)
    _require(min(shape, default=0) > 0, f"output shape {tuple(y.shape)} has no elements")
    why = unit_error(spec)
    _require(why is None, str(why))
    want = tuple(ins[0].shape[:-1]) + (sum(parts),)
    _require(not check_output or tuple(y.shape) == want,
             f"output shape {tuple(y.shape)}; the operator gives {want}")
    return VecDecision(spec=spec, reason=None, inputs=tuple(node.inputs), output_index=y.index)


def _resize(node, dt: np.dtype, x: TensorInfo, y: TensorInfo, tensor, constant, q, unit_error,
            check_output: bool) -> VecDecision:
    """A RESIZE_NEAREST_NEIGHBOR that repeats every pixel fy x fx times: COPY descriptors
    (dtpu.hw.vec_lower.resize_copies). Which input pixel each output pixel copies is the
    runtime's own kernel's answer (dtpu.resize_maps), so align_corners / half_pixel_centers
    and the kernel's fixed point are TFLite's by construction; any other map stays on the
    CPU."""
    from dtpu.resize_maps import integer_factors, nearest_maps

    size = tensor(node.inputs[1])
    _require(size.constant and size.type == "int32" and tuple(size.shape) == (2,),
             f"RESIZE_NEAREST_NEIGHBOR size {size.name!r} is not a constant int32 pair")
    _require(len(x.shape) == 4, f"input of rank {len(x.shape)} (accepted: NHWC)")
    _require(q(x, "input") == q(y, "output"), "input and output quantization differ (TFLite "
             "copies bytes: the converter writes them equal)")
    out_hw = tuple(int(v) for v in np.asarray(constant(size)).reshape(-1))
    _require(min(x.shape) > 0 and min(out_hw) > 0, f"input {tuple(x.shape)} -> {out_hw}: empty")
    p = node.params or {}
    try:
        maps = nearest_maps(dt.name, tuple(x.shape[1:3]), out_hw, bool(p.get("align_corners")),
                            bool(p.get("half_pixel_centers")))
        factors = integer_factors(maps, tuple(x.shape[1:3]))
    except (RuntimeError, ValueError) as exc:
        raise Unsupported(f"RESIZE_NEAREST_NEIGHBOR {tuple(x.shape[1:3])} -> {out_hw}: {exc}") from None
    spec = VecSpec(op="RESIZE_NEAREST_NEIGHBOR", dtype=dt, a_shape=tuple(x.shape),
                   a_q=q(x, "input"), out_q=q(y, "output"), name=y.name, resize=factors)
    why = unit_error(spec)
    _require(why is None, str(why))
    _require(not check_output or tuple(y.shape) == tuple(spec.output_shape),
             f"output shape {tuple(y.shape)}; the operator gives {tuple(spec.output_shape)}")
    return VecDecision(spec=spec, reason=None, inputs=(node.inputs[0],), output_index=y.index,
                       axes=np.asarray(constant(size)))
