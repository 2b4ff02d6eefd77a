"""The ISRO-ASIC target: its instruction set, a compiler to it, a model of the chip, and the tools
that check what would be uplinked.

- :mod:`dtpu.isro.isa` -- the 512-bit instruction encoding (read from ``encoding.json``),
  assembler and disassembler, number formats (docs/isro_isa.md is the prose specification).
- :mod:`dtpu.isro.profile` -- chip profiles (``profiles/default.json`` and ``--chip``).
- :mod:`dtpu.isro.ir`, :mod:`dtpu.isro.keras_h5`, :mod:`dtpu.isro.tflite_model` -- the IR and the
  front ends that build it from Keras (.h5, .keras) and TFLite models.
- :mod:`dtpu.isro.compiler` -- the IR to a :class:`Bundle` (frame memory image, filter memory
  image, program, listing, metadata with image digests and the profile).
- :mod:`dtpu.isro.machine` -- executes a bundle, dumps every layer's output and counts
  instructions, MACs and memory traffic; :mod:`dtpu.isro.heads` runs softmax heads on the host.
- :mod:`dtpu.isro.check`, :mod:`dtpu.isro.verify`, :mod:`dtpu.isro.compare`,
  :mod:`dtpu.isro.inject` -- static checking, layer-by-layer verification against Keras and
  TFLite, comparison with memory read back from hardware, bit-flip injection.
- ``python -m dtpu.isro`` / ``dtpu isro`` -- compile / run / check / compare / inject / disasm / asm.
"""
from __future__ import annotations

from dtpu.isro.bundle import Bundle
from dtpu.isro.compiler import compile_h5, compile_model, compile_spec, compile_tflite
from dtpu.isro.ir import CompileError
from dtpu.isro.isa import Fill, Fmt, Instruction, Op, Rounding, assemble, disassemble
from dtpu.isro.machine import Counters, Machine, MachineError, Result, run

__all__ = [
    "Bundle", "CompileError", "Counters", "Fill", "Fmt", "Instruction", "Machine", "MachineError",
    "Op", "Result", "Rounding", "assemble", "compile_h5", "compile_model", "compile_spec",
    "compile_tflite", "disassemble", "run",
]
