"""The ISRO-ASIC target: its instruction set, a compiler to it, and a model of the chip.

- :mod:`dtpu.isro.isa` -- the 512-bit instruction encoding, assembler and disassembler, number
  formats (docs/isro_isa.md is the prose specification).
- :mod:`dtpu.isro.compiler` -- Keras .h5, TFLite and single delegate nodes to a :class:`Bundle`
  (frame memory image, filter memory image, program, listing, metadata).
- :mod:`dtpu.isro.machine` -- executes a bundle with a configurable number of processing
  elements, dumps every layer's output and counts instructions, MACs and memory traffic.
- :mod:`dtpu.isro.verify` -- layer-by-layer comparison against a numpy Keras reference and the
  TFLite interpreter, as the report's verification did against hardware.
- ``python -m dtpu.isro`` -- the compile / run / disasm / asm command line.
"""
from __future__ import annotations

from dtpu.isro.bundle import Bundle
from dtpu.isro.compiler import CompileError, compile_h5, compile_model, compile_spec, compile_tflite
from dtpu.isro.isa import Fill, Fmt, Instruction, Op, Rounding, assemble, disassemble
from dtpu.isro.machine import Counters, Machine, MachineError, Result, run

__all__ = [
    "Bundle", "CompileError", "Counters", "Fill", "Fmt", "Instruction", "Machine", "MachineError",
    "Op", "Result", "Rounding", "assemble", "compile_h5", "compile_model", "compile_spec",
    "compile_tflite", "disassemble", "run",
]
