"""Partitions of a .tflite model with the vector unit's operators in them (contract 2.1): the
graph-aware counterpart of :func:`dtpu.tflite_model.partitions_of`, which cuts at every operator
that is not a convolution. Here an ADD, SUB, MUL, AVERAGE_POOL_2D, MAX_POOL_2D, MEAN or table
operator (LOGISTIC, TANH, HARD_SWISH, LEAKY_RELU, the RELUs, QUANTIZE) the vector unit can run (:func:`dtpu.hw.vec_lower.vec_reason`) joins the partition, and a node may
read any earlier node of it (a residual ADD reads two), so a ResNet or MobileNet v2 block stays
one list. What benchmarks and tests compile without an interpreter; the delegate's own claim of
these nodes is declared per target (:attr:`dtpu.driver.Transport.vector_unit`).
"""
from __future__ import annotations

import logging

import numpy as np

from dtpu.hw.config import HwConfig, get_config
from dtpu.hw.listcompiler import NodeIn
from dtpu.hw.placement import claim_error
from dtpu.hw.vec_lower import (TABLE_OPS, VEC_KINDS, VecSpec, concat_spec, constant_operand,
                                vec_reason)
from dtpu.tflite_model import CONV_OPCODES, Model, Operator, Subgraph, conv_spec, load

log = logging.getLogger(__name__)

_DTYPES = {"INT8": np.dtype(np.int8), "UINT8": np.dtype(np.uint8)}


def vec_spec(sg: Subgraph, op: Operator) -> VecSpec:
    """The :class:`VecSpec` of a TFLite vector-unit operator (ValueError naming what does not
    fit: types, quantization, MEAN's axes and keep_dims)."""
    if op.opcode not in VEC_KINDS:
        raise ValueError(f"operator {op.index} is {op.opcode}; expected one of {', '.join(VEC_KINDS)}")
    x = sg.tensor(op.inputs[0])
    y = sg.tensor(op.outputs[0])
    dt = _DTYPES.get(x.type_name)
    if op.opcode == "QUANTIZE" and dt is not None and y.type_name in _DTYPES:
        pass                # a requantization may change the 8-bit type
    elif dt is None or y.type_name != x.type_name:
        raise ValueError(f"{op.opcode} of {x.type_name} -> {y.type_name} (the vector unit takes "
                         f"int8 or uint8 in and out)")

    def q(t):
        if t.quantization is None or t.quantization.scale.size != 1:
            raise ValueError(f"tensor {t.name!r} is not per-tensor quantized")
        return float(t.quantization.scale[0]), int(t.quantization.zero_point[0])

    opts = op.options
    act = str(opts.get("fused_activation_function", "NONE")).upper()
    if op.opcode == "CONCATENATION":
        ins = [sg.tensor(t) for t in op.inputs]
        spec = concat_spec([(tuple(t.shape), t.type_name, q(t), t.is_constant) for t in ins],
                           (tuple(y.shape), y.type_name, q(y)), int(opts.get("axis", 0)), act)
        return VecSpec(op="CONCATENATION", dtype=dt, a_shape=spec[0], a_q=q(y), out_q=q(y),
                       name=y.name, parts=spec[1])
    if op.opcode in TABLE_OPS:
        from dtpu.unary_tables import vector_table

        if len(x.shape) > 4:
            raise ValueError(f"{op.opcode} of rank {len(x.shape)} (the vector unit takes rank <= 4)")
        odt = _DTYPES[y.type_name]
        options = {"alpha": float(opts["alpha"])} if op.opcode == "LEAKY_RELU" else None
        try:
            table = vector_table(op.opcode, dt, odt, q(x), q(y), options)
        except (RuntimeError, ValueError) as e:    # Prepare refused it, or it is no table
            raise ValueError(f"{op.opcode} {y.name!r}: no table from the runtime's kernel: {e}")
        return VecSpec(op=op.opcode, dtype=dt, a_shape=(1,) * (4 - len(x.shape)) + tuple(x.shape),
                       a_q=q(x), out_q=q(y), name=y.name, table=table,
                       out_dtype=odt if odt != dt else None)
    common = dict(op=op.opcode, dtype=dt, a_shape=tuple(x.shape), a_q=q(x), out_q=q(y),
                  activation=act, name=y.name)
    if op.opcode in ("ADD", "SUB", "MUL"):
        b = sg.tensor(op.inputs[1])
        if b.type_name != x.type_name:
            raise ValueError(f"{op.opcode} of {x.type_name} and {b.type_name}")
        shapes, const = [tuple(x.shape), tuple(b.shape)], None
        for which, t in enumerate((x, b)):
            if t.is_constant:
                if const is not None:
                    raise ValueError(f"{op.opcode} of two constants")
                other = shapes[1 - which]
                shapes[which], data = constant_operand(
                    np.asarray(t.data).reshape(t.shape).astype(dt), other)
                const = (which, data)
        common["a_shape"] = shapes[0]
        return VecSpec(b_shape=shapes[1], b_q=q(b), const=const, **common)
    if op.opcode == "MEAN":
        axes = sg.tensor(op.inputs[1])
        ax = sorted(int(a) % 4 for a in np.asarray(axes.data).reshape(-1)) \
            if axes.data is not None else None
        if ax != [1, 2] or len(x.shape) != 4:
            raise ValueError(f"MEAN over axes {ax} (the vector unit reduces H and W of NHWC)")
        if opts.get("keep_dims"):
            raise ValueError("MEAN with keep_dims true (TFLite's optimized float kernel, not the "
                             "integer formula the vector unit runs)")
        return VecSpec(**common)
    return VecSpec(filter=(opts["filter_height"], opts["filter_width"]),
                   stride=(opts["stride_h"], opts["stride_w"]), padding=opts["padding"], **common)


def graph_partitions_of(path_or_model, cfg: HwConfig | None = None, opcodes=CONV_OPCODES, *,
                        vector_unit: bool = True) -> list[list[NodeIn]]:
    """The partitions of a model: maximal runs of consecutive operators the DTPU places
    (convolutions of `opcodes` with their claim rules, and with `vector_unit` the vector
    unit's operators), cut at every other operator. Each node reads earlier nodes of its
    partition or the partition's inputs (NodeIn.src = -1 - k, k in order of first use)."""
    return [nodes for nodes, _, _ in _partitions(path_or_model, cfg, opcodes, vector_unit)]


def partition_tensors(path_or_model, cfg: HwConfig | None = None, opcodes=CONV_OPCODES, *,
                      vector_unit: bool = True) -> list[tuple[list[int], list[int]]]:
    """Per partition of :func:`graph_partitions_of`: (its input tensors by k, each node's output
    tensor), for tests that feed a partition from the interpreter's own tensors."""
    return [(ext, outs) for _, ext, outs in _partitions(path_or_model, cfg, opcodes, vector_unit)]


def _partitions(path_or_model, cfg, opcodes, vector_unit) -> list[tuple[list, list, list]]:
    cfg = cfg or get_config()
    model = path_or_model if isinstance(path_or_model, Model) else load(path_or_model)
    sg = model.main
    parts: list[tuple[list, list, list]] = []
    cur: list[NodeIn] = []
    outs: list[int] = []
    made: dict[int, int] = {}        # tensor -> index of the node of `cur` that writes it
    ext: list[int] = []              # the partition's input tensors, by k

    def source(t: int) -> int:
        if t in made:
            return made[t]
        if t not in ext:
            ext.append(t)
        return -1 - ext.index(t)

    for op in sg.operators:
        node = None
        if op.opcode in CONV_OPCODES and op.opcode in opcodes:
            try:
                spec, w, b = conv_spec(sg, op)
            except ValueError as e:
                log.info("operator %d stays on the CPU: %s", op.index, e)
            else:
                if claim_error(spec, cfg, None, lists=True) is None:
                    node = ("conv", spec, w, b)
        elif vector_unit and op.opcode in VEC_KINDS:
            try:
                vs = vec_spec(sg, op)
                why = vec_reason(vs, cfg)
            except ValueError as e:
                why = str(e)
            if why is None:
                node = ("vec", vs)
            else:
                log.info("operator %d (%s) stays on the CPU: %s", op.index, op.opcode, why)
        if node is None:
            if cur:
                parts.append((cur, ext, outs))
            cur, made, ext, outs = [], {}, [], []
            continue
        if node[0] == "conv":
            cur.append(NodeIn(node[1], node[2], node[3], src=source(op.inputs[0])))
        else:
            vs = node[1]
            if vs.op == "CONCATENATION":
                cur.append(NodeIn(None, None, None, src=source(op.inputs[0]), vec=vs,
                                  srcs=tuple(source(t) for t in op.inputs)))
                made[op.outputs[0]] = len(cur) - 1
                outs.append(op.outputs[0])
                continue
            reads = [t for k, t in enumerate(op.inputs[:2 if vs.binary else 1])
                     if vs.const is None or k != vs.const[0]]       # a constant is no source
            cur.append(NodeIn(None, None, None, src=source(reads[0]), vec=vs,
                              src2=source(reads[1]) if len(reads) > 1 else None))
        made[op.outputs[0]] = len(cur) - 1
        outs.append(op.outputs[0])
    if cur:
        parts.append((cur, ext, outs))
    return parts

