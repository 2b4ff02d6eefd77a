"""backend=null -- FOR BENCHMARKING THE DELEGATE ONLY: computes nothing, returns zeros.

It measures what the delegate path itself costs per invoke (C glue, crossing into Python, zero-
copy views, the in-place output write, report bookkeeping) with no kernel time on top. Its
outputs are wrong by design, so it is not in the default registry: benchmarks/bench_delegate.py
and the tests register it explicitly with :func:`register_null_backend`.
"""
from __future__ import annotations

import numpy as np

from dtpu.backends.base import Backend, HwCounters, Probes
from dtpu.spec import ConvSpec, DataMode

_OUT_DTYPE = {DataMode.INT8: np.int8, DataMode.UINT8: np.uint8, DataMode.INT16X8: np.int16,
              DataMode.FLOAT32: np.float32}


class NullBackend(Backend):
    name = "null"

    def prepare(self, spec: ConvSpec, filters: np.ndarray, bias: np.ndarray | None):
        shape = spec.output_shape
        return spec, np.zeros(shape, dtype=_OUT_DTYPE[spec.mode])

    def invoke(self, handle, x: np.ndarray, probes: Probes) -> tuple[np.ndarray, HwCounters]:
        spec, zeros = handle
        return zeros, HwCounters(macs=spec.macs)


def register_null_backend() -> None:
    """Make `backend=null` available in this process (benchmarks and tests only)."""
    from dtpu import backends

    backends.register("null", "dtpu.backends.null:NullBackend")


__all__ = ["NullBackend", "register_null_backend"]
