"""backend=rtl: the claimed nodes run on the Verilog core (hw/rtl) in a Verilator simulation.

Everything above the transport is backend=model's (lowering, resident weights with paging,
counters, the activity-based power estimate); the target is the simulated dtpu_axi behind
cocotbext-axi bus models (:class:`dtpu.rtl.transport.CocotbTransport`). The counters are the
RTL's own registers, so agreement with backend=model is a check of the RTL against the golden
model: same words out, same CYCLES.

The simulator hosts the Python process (cocotb runs Python inside the Verilator binary), so this
backend exists only inside a simulation started by ``dtpu run MODEL --backend rtl`` or
:func:`dtpu.rtl.run_in_simulation`; it takes the transport that simulation published
(:mod:`dtpu.rtl.session`), and the build's memory sizes with it. Elsewhere it raises with
those two ways in. ``mxu`` must match the simulated build's COLS (chosen when the simulation is
started).
"""
from __future__ import annotations

from typing import Any

import numpy as np

from dtpu.backends.base import HwCounters, Probes
from dtpu.backends.model import ModelBackend
from dtpu.driver import Transport
from dtpu.hw.config import HwConfig
from dtpu.rtl import session
from dtpu.spec import ConvSpec


class RtlBackend(ModelBackend):
    name = "rtl"

    def __init__(self, options: dict[str, Any] | None = None) -> None:
        session.current_transport()  # fail before anything else when there is no simulation
        super().__init__(options)

    def _open_transport(self) -> Transport:
        t = session.current_transport()
        built = t.cfg
        if self.cfg.COLS != built.COLS:
            raise ValueError(f"backend=rtl: mxu=8x{self.cfg.COLS}, but the simulated core was built "
                             f"with COLS={built.COLS}; accepted: mxu=8x{built.COLS} (start the "
                             f"simulation with the geometry you want: --mxu / run_in_simulation(mxu=...))")
        if self.cfg.CLOCK_MHZ != built.CLOCK_MHZ:
            keep = ("COLS", "LOG_WEIGHT_WORDS", "LOG_PARAM_ENTRIES", "LOG_ACT_WORDS")
            self.cfg = HwConfig(**{k: getattr(built, k) for k in keep}, CLOCK_MHZ=self.cfg.CLOCK_MHZ)
        else:
            self.cfg = built
        return t

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


__all__ = ["RtlBackend"]
