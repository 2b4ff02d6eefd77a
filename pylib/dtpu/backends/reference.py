"""backend=reference: the host computes everything with the TFLite-exact numpy kernels.

It is the delegate's correctness baseline and the measure of the delegate's own overhead.
"""
from __future__ import annotations

import numpy as np

from dtpu import reference
from dtpu.backends.base import Backend, HwCounters, Probes
from dtpu.spec import ConvSpec


class ReferenceBackend(Backend):
    name = "reference"

    def prepare(self, spec: ConvSpec, filters: np.ndarray, bias: np.ndarray | None):
        return (spec, np.ascontiguousarray(filters), None if bias is None else np.ascontiguousarray(bias))

    def invoke(self, handle, x: np.ndarray, probes: Probes) -> tuple[np.ndarray, HwCounters]:
        spec, filters, bias = handle
        with probes.measure("compute"):
            y = reference.run(spec, x, filters, bias, runtime=self.runtime)
        return y, HwCounters(macs=spec.macs)
