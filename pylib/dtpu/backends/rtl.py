"""backend=rtl: the claimed nodes run on the Verilog core (hw/rtl) in a Verilator simulation.

Everything above the transport is backend=model's (lowering, resident weights with paging,
counters, the activity-based power estimate); the target is the simulated dtpu_axi. The counters
are the RTL's own registers, so agreement with backend=model is a check of the RTL against the
golden model: same words out, same CYCLES.

Two transports, one Verilog:

* inside a simulation started by ``dtpu run MODEL --backend rtl`` or
  :func:`dtpu.rtl.run_in_simulation`, the one that simulation published: cocotb with
  cocotbext-axi bus models (:mod:`dtpu.rtl.transport`); ``mxu`` must match its build;
* anywhere else (a notebook, a script calling ``dtpu.make_interpreter``), a core of its own in
  this process: the RTL Verilated into a shared library with the bus loops in C++
  (:mod:`dtpu.rtl.native`), built on first use and cached like the cocotb build. By default
  (``path=auto`` or ``lists``) that core is the contract-2.0 top dtpu_cl_top with its AXI4 master
  on the harness's DDR model, and partitions run as command lists
  (:class:`dtpu.rtl.native.NativeListTransport`); ``path=jobs`` (or a forced precision) runs
  the 1.2 top dtpu_axi job by job. ``$DTPU_RTL_TOP`` forces either.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from dtpu.backends.base import HwCounters, Probes
from dtpu.backends.model import ModelBackend
from dtpu.driver import Transport
from dtpu.rtl import session
from dtpu.rtl.build import TOP_ENV  # noqa: F401  (its home is dtpu.rtl.build; re-exported for one release)
from dtpu.rtl.build import TOPLEVEL_CL, choose_top
from dtpu.spec import ConvSpec



class RtlBackend(ModelBackend):
    name = "rtl"

    def __init__(self, options: dict[str, Any] | None = None) -> None:
        self.native_build = None
        super().__init__(options)

    def _open_transport(self) -> Transport:
        t = super()._open_transport()       # dtpu.backends.targets.open_target("rtl", ...)
        self.native_build = self.target.native_build
        return t

    def _lists_top(self) -> bool:
        """Whether the in-process core is the contract-2.0 top (dtpu.rtl.build.choose_top)."""
        return choose_top(self.options.get("path", "auto"), self.precision) == TOPLEVEL_CL

    @property
    def core(self):
        raise AttributeError("backend=rtl has no golden-model core; its counters are the RTL's")

    def prepare(self, spec: ConvSpec, filters: np.ndarray, bias: np.ndarray | None):
        handle = super().prepare(spec, filters, bias)
        session.note("nodes")
        return handle

    def invoke(self, handle, x: np.ndarray, probes: Probes) -> tuple[np.ndarray, HwCounters]:
        out = super().invoke(handle, x, probes)
        session.note("node_invokes")
        return out

    def release(self, handle) -> None:
        super().release(handle)
        session.note("nodes", -1)

    def close(self) -> None:
        if self.native_build is not None:   # our own core; a simulation's transport is not ours
            self.transport.close()


__all__ = ["RtlBackend"]
