"""Numpy kernels that reproduce TFLite 2.14's CPU CONV_2D / DEPTHWISE_CONV_2D bit for bit.

Every backend finishes its work with these (the accelerator returns :func:`accumulate`'s sums and
the host applies :func:`requantize`), and the tests use :func:`run` as the oracle. The default
rounding matches tflite-runtime's default interpreter on x86-64; ``rounding="reference"`` matches
its BUILTIN_REF op resolver. docs/quantization.md explains where the two differ.
"""
from __future__ import annotations

from dtpu.reference.conv import (ROUNDINGS, accumulate, accumulator_kind, activation_range,
                                 io_dtypes, output_multipliers, requantize, rounding_variant, run)
from dtpu.reference.quantize import (Variant, multiply_by_quantized_multiplier, quantize_multiplier,
                                     rounding_divide_by_pot, saturating_rounding_doubling_high_mul)

__all__ = [
    "ROUNDINGS", "Variant", "accumulate", "accumulator_kind", "activation_range", "io_dtypes",
    "multiply_by_quantized_multiplier", "output_multipliers", "quantize_multiplier", "requantize",
    "rounding_divide_by_pot", "rounding_variant", "run", "saturating_rounding_doubling_high_mul",
]
