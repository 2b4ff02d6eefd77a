"""One-operator .tflite graphs (ADD, SUB, MUL, AVERAGE_POOL_2D, MAX_POOL_2D, MEAN) and small
chains of them, so the vector unit's reference twins can be checked against the interpreter
itself without TensorFlow: the converter is not installed here, and the zoo's models hold these
operators only at a few fixed shapes and scales. The flatbuffers are :mod:`dtpu.tflite_writer`'s;
this module only keeps the defaults these tests were written against.
"""
from __future__ import annotations

import numpy as np

from dtpu.tflite_writer import Node, write
from dtpu.tflite_writer import Tensor as T  # noqa: F401  (the tests' name for a graph tensor)

#: a node of :func:`graph_model`: opcode, input and output tensor indices, options (the vector
#: operators' as in :func:`one_op_model`; CONV_2D: padding, stride, activation; FULLY_CONNECTED:
#: activation)
Op = Node

#: options whose default here differs from dtpu.tflite_writer's: these graphs' CONV_2D pads SAME
#: and their MEAN keeps its dims (the writer follows the converter: VALID, keep_dims false)
_DEFAULTS = {"CONV_2D": {"padding": "SAME"}, "MEAN": {"keep_dims": True}}


def one_op_model(op: str, inputs: list[T], output: T, **attrs) -> bytes:
    """The flatbuffer of a graph holding one `op` node: non-constant `inputs` are the graph's
    inputs (in order), `output` its output."""
    tensors = list(inputs) + [output]
    return graph_model(tensors, [Op(op, list(range(len(inputs))), [len(inputs)], attrs)],
                       [i for i, t in enumerate(inputs) if t.data is None], [len(inputs)])


def graph_model(tensors: list[T], ops: list[Op], inputs: list[int], outputs: list[int]) -> bytes:
    """The flatbuffer of a graph of `ops` over `tensors` (a constant is a tensor with `data`),
    with graph inputs and outputs given by tensor index. A tensor's `scale` may be a sequence
    (per-channel quantization along `axis`)."""
    nodes = [Node(o.opcode, list(o.inputs), list(o.outputs), {**_DEFAULTS.get(o.opcode, {}), **o.options})
             for o in ops]
    return write(list(tensors), nodes, inputs, outputs, "dtpu vector-unit test graph")


def run_cpu(model: bytes, feeds: list[np.ndarray]) -> np.ndarray:
    """The interpreter's output of the one-op graph on `feeds` (TFLite's CPU kernels: the oracle)."""
    from dtpu.tflite import Interpreter
    it = Interpreter(model_content=model)
    it.allocate_tensors()
    for d, x in zip(it.get_input_details(), feeds):
        it.set_tensor(d["index"], x)
    it.invoke()
    return it.get_tensor(it.get_output_details()[0]["index"]).copy()
