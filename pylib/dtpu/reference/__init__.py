"""Numpy kernels that reproduce TFLite 2.14's CPU CONV_2D / DEPTHWISE_CONV_2D bit for bit.

Every backend finishes its work with these (the accelerator returns :func:`accumulate`'s sums and
the host applies :func:`requantize`), and the tests use :func:`run` as the oracle. The default
rounding matches the default interpreter on x86-64 of the runtime named by ``runtime=``
(``"tflite_runtime"`` 2.14 or ``"ai_edge_litert"``, LiteRT 2.3, whose default interpreter runs
int8/uint8 convolutions on XNNPACK: :data:`Variant.FP32`; default: the runtime :mod:`dtpu.tflite`
selects); ``rounding="reference"`` matches its BUILTIN_REF op resolver. docs/quantization.md
explains where they differ.
"""
from __future__ import annotations

from dtpu.reference.conv import (LITERT, ROUNDINGS, RUNTIMES, TFLITE_RUNTIME, accumulate,
                                 accumulator_kind, activation_range, default_runtime,
                                 find_rounding_variant, fp32_scales, io_dtypes, output_multipliers,
                                 requantize, rounding_variant, run, xnnpack_decline_reason)
from dtpu.reference.quantize import (Variant, multiply_by_quantized_multiplier, quantize_multiplier,
                                     requantize_fp32, rounding_divide_by_pot,
                                     saturating_rounding_doubling_high_mul)

__all__ = [
    "LITERT", "ROUNDINGS", "RUNTIMES", "TFLITE_RUNTIME", "Variant", "accumulate",
    "accumulator_kind", "activation_range", "default_runtime", "find_rounding_variant",
    "fp32_scales", "io_dtypes", "multiply_by_quantized_multiplier", "output_multipliers",
    "quantize_multiplier", "requantize", "requantize_fp32", "rounding_divide_by_pot",
    "rounding_variant", "run", "saturating_rounding_doubling_high_mul", "xnnpack_decline_reason",
]
