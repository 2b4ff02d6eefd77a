"""The 256 outputs of a one-input 8-bit TFLite element-wise operator, from the interpreter itself.

Why run the interpreter rather than re-derive each kernel: an int8 (or uint8) element-wise
function has only 256 possible inputs, so its table is exact by construction when TFLite's own
kernel fills it, whatever the kernel does inside (LOGISTIC's float table built with ``expf``,
TANH's and HARD_SWISH's fixed-point paths). The ISRO-ASIC's LUT instruction then reproduces the
operator bit for bit. Tables are cached per (operator, quantization).
"""
from __future__ import annotations

import functools

import numpy as np

from dtpu import tflite_writer as tw

OPCODES = ("LOGISTIC", "TANH", "HARD_SWISH")


@functools.lru_cache(maxsize=256)
def int8_table(opcode: str, dtype: str, in_scale: float, in_zp: int, out_scale: float, out_zp: int) -> np.ndarray:
    """Outputs for the inputs -128..127 (int8) or 0..255 (uint8), as the interpreter computes them."""
    from dtpu.tflite import Interpreter
    if opcode not in OPCODES:
        raise ValueError(f"no table for {opcode!r}; accepted: {', '.join(OPCODES)}")
    if dtype not in ("int8", "uint8"):
        raise ValueError(f"dtype {dtype!r}; accepted: int8, uint8")
    tensors = [tw.Tensor((1, 256), dtype, float(in_scale), int(in_zp)),
               tw.Tensor((1, 256), dtype, float(out_scale), int(out_zp))]
    model = tw.write(tensors, [tw.Node(opcode, [0], [1])], [0], [1], description="dtpu unary table")
    it = Interpreter(model_content=model)
    it.allocate_tensors()
    lo = -128 if dtype == "int8" else 0
    it.set_tensor(it.get_input_details()[0]["index"], np.arange(lo, lo + 256).astype(dtype)[None])
    it.invoke()
    return it.get_tensor(it.get_output_details()[0]["index"])[0].copy()
