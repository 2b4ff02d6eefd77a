"""backend=isro: each claimed node becomes a one-layer ISRO-ASIC program run on the machine model.

`prepare` compiles the node once (weights and DSP parameters go to the filter memory image, the
program is generated, as the master processor would do before START); `invoke` writes each
image of the batch into frame memory, executes, and reads the output back. Int8 nodes use
TFLite's own (multiplier, shift) pairs and rounding in the I8 DSP stage, so the result is
bit-exact with the interpreter; float32 nodes run in F32.

What the chip cannot express (uint8 and int16x8 nodes, asymmetric int8 weights) is computed on
the host with :mod:`dtpu.reference`, as the Backend contract asks, and logged once per node.

Options (from the delegate's backend options): ``pe`` processing elements (default: unlimited,
so no node is split; a number forces the compiler's split/ADD path), ``clock_mhz`` for the
latency estimate at one block per cycle.
"""
from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

import numpy as np

from dtpu import reference
from dtpu.backends.base import Backend, HwCounters, Probes
from dtpu.isro.bundle import Bundle, read_tensor, write_input
from dtpu.isro.compiler import compile_spec
from dtpu.isro.ir import CompileError
from dtpu.isro.machine import Counters, Machine
from dtpu.spec import ConvSpec

log = logging.getLogger(__name__)


def _parse_pe(value: Any) -> int | None:
    if value in (None, "", "none", "unlimited"):
        return None
    try:
        pe = int(value)
    except (TypeError, ValueError):
        pe = 0
    if pe < 1:
        raise ValueError(f"isro backend: pe={value!r}; expected a positive integer or 'unlimited'")
    return pe


@dataclass
class _Node:
    spec: ConvSpec
    bundle: Bundle | None
    frame: np.ndarray | None = None      # frame memory as loaded (input border pre-filled)
    filt: np.ndarray | None = None       # filter memory as loaded
    filters: np.ndarray | None = None    # host fallback only
    bias: np.ndarray | None = None


class IsroBackend(Backend):
    name = "isro"

    def __init__(self, options: dict[str, Any] | None = None) -> None:
        super().__init__(options)
        self.pe = _parse_pe(self.options.get("pe"))
        self.clock_mhz = float(self.options.get("clock_mhz", 100.0))
        self.machine = Machine(self.pe)

    def prepare(self, spec: ConvSpec, filters: np.ndarray, bias: np.ndarray | None) -> _Node:
        try:
            self._check_rounding(spec, bias)
            bundle = compile_spec(spec, filters, bias, pe=self.pe)
        except CompileError as exc:
            log.info("isro: %s stays on the host: %s", spec.name or spec.kind.value, exc)
            return _Node(spec, None, filters=np.ascontiguousarray(filters),
                         bias=None if bias is None else np.ascontiguousarray(bias))
        frame, filt = bundle.memories()
        log.debug("isro: %s compiled to %d instructions", spec.name or spec.kind.value, len(bundle.program))
        return _Node(spec, bundle, frame, filt)

    def _check_rounding(self, spec: ConvSpec, bias: np.ndarray | None) -> None:
        """The I8 DSP stage rounds as tflite-runtime 2.14's kernels (TFLITE_ROUNDING); a node whose
        target interpreter rounds otherwise (LiteRT's XNNPACK: float32 scale) stays on the host."""
        from dtpu.isro.ir import TFLITE_ROUNDING
        from dtpu.spec import DataMode

        if spec.mode is not DataMode.INT8:
            return
        variant, why = reference.find_rounding_variant(spec, bias, "default", self.runtime)
        if variant is None or variant.name != TFLITE_ROUNDING[spec.kind.name].name:
            raise CompileError(f"{spec.name or spec.kind.value}: the target interpreter's output "
                               f"stage is {variant.value if variant else 'not reproduced'} ({why}); "
                               f"the I8 DSP stage rounds {TFLITE_ROUNDING[spec.kind.name].name}")

    def invoke(self, handle: _Node, x: np.ndarray, probes: Probes) -> tuple[np.ndarray, HwCounters]:
        spec = handle.spec
        if handle.bundle is None:
            with probes.measure("compute"):
                y = reference.run(spec, x, handle.filters, handle.bias, runtime=self.runtime)
            return y, HwCounters(macs=spec.macs)
        bundle = handle.bundle
        x = np.asarray(x)
        if tuple(x.shape) != tuple(spec.input_shape):
            raise ValueError(f"isro: input shape {x.shape} does not match the node's {spec.input_shape}")
        n, oh, ow, oc = spec.output_shape
        out_dtype = reference.io_dtypes(spec)[0]
        y = np.empty((n, oh, ow, oc), dtype=out_dtype)
        total = Counters()
        filt = handle.filt
        for i in range(n):
            with probes.measure("pack"):
                frame = handle.frame.copy()
                write_input(bundle.meta["input"], frame, x[i], bundle.fmt)
            with probes.measure("compute"):
                total.add(self.machine.execute(bundle.program, frame, filt))
            with probes.measure("unpack"):
                y[i] = read_tensor(frame, bundle.meta["output"], bundle.fmt).transpose(1, 2, 0)
        util = None
        if self.pe is not None and total.cycles:
            util = total.macs / (total.cycles * self.pe)
        return y, HwCounters(
            cycles=total.cycles, macs=total.macs, utilization=util,
            words_in={"frame_bytes": total.frame_read, "filter_bytes": total.filter_read},
            words_out={"frame_bytes": total.frame_write, "filter_bytes": total.filter_write},
            latency_us=total.cycles / self.clock_mhz)
