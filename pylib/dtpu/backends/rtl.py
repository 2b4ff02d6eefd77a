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
from dtpu.backends.model import DeviceBackend
from dtpu.driver import DtpuHardwareError, Transport
from dtpu.driver.hostops import HostOps
from dtpu.driver.lists import ListProgram
from dtpu.rtl import session
from dtpu.spec import ConvSpec



class DtpuCheckError(DtpuHardwareError):
    """The Verilog and its golden model computed different words from one command list."""


class RtlBackend(DeviceBackend):
    name = "rtl"

    def __init__(self, options: dict[str, Any] | None = None) -> None:
        self.native_build = None
        super().__init__(options)

    def _open_transport(self) -> Transport:
        t = super()._open_transport()       # dtpu.backends.targets.open_target("rtl", ...)
        self.native_build = self.target.native_build
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

    # -- the golden model beside the RTL: one cycle truth, or the difference with its cause ----

    def prepare_partitions(self, partitions: list, keep: list | None = None) -> ListProgram:
        """The program on the Verilated core, and the same partitions compiled for the golden
        model at the same DDR base: every invoke also runs there (a fraction of the RTL's
        simulation time), so each node's report carries the model's cycles beside the RTL's
        and, where they differ, the documented modelling limit that applies (or none: a bug)."""
        prog = super().prepare_partitions(partitions, keep)
        prog.golden = self.golden_program(prog)
        return prog

    def release_partitions(self, program: ListProgram) -> None:
        if program.golden is not None:
            program.golden.free()
            program.golden = None
        super().release_partitions(program)

    #: every run is checked against the golden model with its own inputs and outputs
    c_invoke_eager = True

    def finish_partition(self, program: ListProgram, index: int, run, ops, seconds: float,
                         probes: Probes, inputs=None, outputs=None) -> list[HwCounters]:
        out = super().finish_partition(program, index, run, ops, seconds, probes)
        shadow = program.golden
        if shadow is None:
            return out
        if inputs is None or outputs is None:
            raise DtpuCheckError(f"partition {index}: a run reached its report without its "
                                 f"inputs and outputs; the golden model cannot check it")
        mine = {k: np.empty_like(v) for k, v in outputs.items()}
        shadow.invoke(index, inputs, mine, shadow.t, HostOps())
        n = len(out)
        spans = shadow.t.list_trace().node_cycles([(index << 16) | i for i in range(n)])
        part = shadow.program.partitions[index]
        words_differ = [k for k, v in outputs.items() if not np.array_equal(v, mine[k])]
        for i, (cnt, (cycles, _)) in enumerate(zip(out, spans)):
            cnt.model_cycles = cycles
            if cnt.cycles != cycles:
                cause = part.node_caveats[i] if i < len(part.node_caveats) else ""
                cnt.cycle_note = cause or ("no documented modelling limit applies: a difference "
                                           "between the RTL and its golden model to report")
        if words_differ:
            raise DtpuCheckError(f"partition {index}: the RTL's output words differ from the golden "
                                 f"model's for node(s) {words_differ} (same list, same inputs): "
                                 f"an RTL or model bug")
        return out

    def close(self) -> None:
        if self.native_build is not None:   # our own core; a simulation's transport is not ours
            self.transport.close()


__all__ = ["DtpuCheckError", "RtlBackend"]
