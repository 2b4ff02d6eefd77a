"""The 256 outputs of an 8-bit TFLite element-wise operator of one computed tensor, from the
interpreter itself.

Why run the interpreter rather than re-derive each kernel: an int8 (or uint8) element-wise
function of one tensor has only 256 possible inputs per channel, so its table is exact by
construction when TFLite's own kernel fills it, whatever the kernel does inside (LOGISTIC's float
table built with ``expf``, TANH's and HARD_SWISH's fixed-point paths, MUL/ADD/SUB by a constant
with their multipliers and roundings). The ISRO-ASIC's LUT instruction then reproduces the
operator bit for bit, and so does the DTPU's vector unit (its TABLE kind: :func:`vector_table`).
An operator with a per-channel constant gets one table per channel.
"""
from __future__ import annotations

import hashlib

import numpy as np

from dtpu import tflite_writer as tw

OPCODES = ("LOGISTIC", "TANH", "HARD_SWISH")
BINARY_OPCODES = ("MUL", "ADD", "SUB")
#: the one-input operators the vector unit's TABLE kind runs (dtpu.hw.vec_lower.TABLE_OPS)
VECTOR_OPCODES = ("LOGISTIC", "TANH", "HARD_SWISH", "LEAKY_RELU", "RELU", "RELU6", "RELU_N1_TO_1",
                  "QUANTIZE")
_CACHE: dict[str, np.ndarray] = {}


def channel_tables(opcode: str, dtype: str, channels: int, x_q: tuple[float, int], out_q: tuple[float, int],
                   operands: list[tw.Tensor | None], options: dict | None = None,
                   out_dtype: str | None = None) -> np.ndarray:
    """(channels, 256) outputs of `opcode` for the inputs -128..127 (int8) or 0..255 (uint8) in
    every channel; `operands` are the operator's inputs in order, None for the computed tensor
    and constants (with their data and quantization) otherwise; `out_dtype` the output's type
    (None: `dtype`; QUANTIZE may change it)."""
    from dtpu.tflite import Interpreter
    accepted = tuple(dict.fromkeys(OPCODES + BINARY_OPCODES + VECTOR_OPCODES))
    if opcode not in accepted:
        raise ValueError(f"no table for {opcode!r}; accepted: {', '.join(accepted)}")
    out_dtype = out_dtype or dtype
    for name in (dtype, out_dtype):
        if name not in ("int8", "uint8"):
            raise ValueError(f"dtype {name!r}; accepted: int8, uint8")
    key = hashlib.sha256(repr((opcode, dtype, out_dtype, channels, x_q, out_q, options,
                               [None if t is None else (t.shape, t.dtype, t.scale, t.zero_point,
                                                        np.asarray(t.data).tobytes()) for t in operands]))
                         .encode()).hexdigest()
    if key in _CACHE:
        return _CACHE[key].copy()
    shape = (1, 1, 256, channels)
    tensors = [tw.Tensor(shape, dtype, float(x_q[0]), int(x_q[1]), name="x")]
    inputs = []
    for t in operands:
        if t is None:
            inputs.append(0)
        else:
            tensors.append(t)
            inputs.append(len(tensors) - 1)
    tensors.append(tw.Tensor(shape, out_dtype, float(out_q[0]), int(out_q[1]), name="y"))
    model = tw.write(tensors, [tw.Node(opcode, inputs, [len(tensors) - 1], options or {})], [0],
                     [len(tensors) - 1], description="dtpu element-wise table")
    it = Interpreter(model_content=model)
    it.allocate_tensors()
    lo = -128 if dtype == "int8" else 0
    x = np.repeat(np.arange(lo, lo + 256)[:, None], channels, axis=1).astype(dtype)
    it.set_tensor(it.get_input_details()[0]["index"], x[None, None])
    it.invoke()
    table = it.get_tensor(it.get_output_details()[0]["index"])[0, 0].T.copy()
    _CACHE[key] = table
    return table.copy()


def int8_table(opcode: str, dtype: str, in_scale: float, in_zp: int, out_scale: float, out_zp: int) -> np.ndarray:
    """Outputs of a one-input operator (LOGISTIC, TANH, HARD_SWISH) for the 256 inputs."""
    if opcode not in OPCODES:
        raise ValueError(f"no table for {opcode!r}; accepted: {', '.join(OPCODES)}")
    return channel_tables(opcode, dtype, 1, (in_scale, in_zp), (out_scale, out_zp), [None])[0]


def vector_table(opcode: str, dtype, out_dtype, in_q: tuple[float, int], out_q: tuple[float, int],
                 options: dict | None = None) -> bytes:
    """The vector unit's TABLE for a one-input operator: 256 output bytes, entry i the output
    of the input whose byte is i (0..255; an int8 input's two's complement byte), from TFLite's
    own kernel on the 256 inputs together, checked against the 256 computed one by one (a
    kernel whose vectorized body and scalar tail differ, as XNNPACK's QUANTIZE under LiteRT
    does, is no function of the byte: ValueError). Raises what the interpreter raises when its
    Prepare refuses the operator (e.g. a LOGISTIC output scale other than 1/256)."""
    dt, odt = np.dtype(dtype), np.dtype(out_dtype)
    in_q, out_q = (float(in_q[0]), int(in_q[1])), (float(out_q[0]), int(out_q[1]))
    table = channel_tables(opcode, dt.name, 1, in_q, out_q, [None], options, odt.name)[0]
    alone = _one_by_one(opcode, dt, odt, in_q, out_q, options)
    if not np.array_equal(table, alone):
        bad = int(np.flatnonzero(table != alone)[0])
        raise ValueError(
            f"{opcode} is not a function of its input byte under this runtime: input "
            f"{bad + np.iinfo(dt).min} gives {table[bad]} among 256 elements and {alone[bad]} "
            f"alone (a vectorized body and its scalar tail round differently): no table")
    table = np.ascontiguousarray(table.astype(odt)).view(np.uint8)      # by input -128.. / 0..
    if dt == np.int8:                   # input byte i is the value i - 256 for i >= 128
        table = np.roll(table, -128)
    return table.tobytes()


def _one_by_one(opcode: str, dt: np.dtype, odt: np.dtype, in_q: tuple, out_q: tuple,
                options: dict | None) -> np.ndarray:
    """The operator's output for each of the 256 inputs computed alone (a one-element tensor:
    the kernel's scalar path), to hold against the 256 computed together: a table stands for
    the operator only when the two agree."""
    from dtpu.tflite import Interpreter

    key = repr(("one by one", opcode, dt.name, odt.name, in_q, out_q, options))
    if key not in _CACHE:
        tensors = [tw.Tensor((1, 1, 1, 1), dt.name, in_q[0], in_q[1], name="x"),
                   tw.Tensor((1, 1, 1, 1), odt.name, out_q[0], out_q[1], name="y")]
        model = tw.write(tensors, [tw.Node(opcode, [0], [1], options or {})], [0], [1],
                         description="dtpu element-wise table, one element")
        it = Interpreter(model_content=model)
        it.allocate_tensors()
        x, y = it.get_input_details()[0]["index"], it.get_output_details()[0]["index"]
        out = np.empty(256, odt)
        lo = int(np.iinfo(dt).min)
        for i in range(256):
            it.set_tensor(x, np.full((1, 1, 1, 1), lo + i, dt))
            it.invoke()
            out[i] = it.get_tensor(y).reshape(-1)[0]
        _CACHE[key] = out
    return _CACHE[key].copy()
