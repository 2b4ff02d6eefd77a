"""Activity-based power and energy *estimates* for the DTPU on an xc7z020 (PYNQ-Z2) at 100 MHz.

Nothing here is measured. The PYNQ-Z2 has no current sensing, and a simulation has no power at
all, so every backend that reports power without an external meter reports this model, labelled
``method="estimated"``. Energy of a run is

    E = static_w * t  +  sum over activity of (count * coefficient)

with t the device's busy time (CYCLES / clock) on every backend: an emulated board's or a
simulator's wall time says nothing about the device, and on the board static power burning
between jobs is the host's cost, not an inference's. MACs counted as useful lane MACs scaled by the precision's multiplier cost, 64-bit
words counted per stream from the WORDS_* registers, BRAM word accesses derived from the counters
(every input word is written once; each MXU issue cycle reads COLS weight words and one
activation word), and busy cycles from CYCLES. docs/power.md gives the basis of each
coefficient; they are order-of-magnitude figures (a factor of 2-3 either way), good for
comparing schedules and precisions, not for a datasheet.
"""
from __future__ import annotations

import threading
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Mapping

from dtpu.backends.base import HwCounters, PowerReading
from dtpu.precision import Precision

#: multiplier energy relative to an int8 MAC, from the relative costs of 8/16/32-bit integer and
#: fp32 multiply-adds in Horowitz, ISSCC 2014 (8b mult 0.2 pJ, 32b mult 3.1 pJ, fp32 mult 3.7 pJ +
#: add 0.9 pJ, 45 nm); bf16 multiplies 8-bit significands and adds in fp32
_PRECISION_SCALE = MappingProxyType({
    "int8": 1.0, "uint8": 1.0, "int16": 4.0, "uint16": 4.0, "bf16": 4.0,
    "int32": 15.0, "uint32": 15.0, "fp32": 15.0, "int64": 60.0, "uint64": 60.0,
})


@dataclass(frozen=True)
class Coefficients:
    """Per-operation energies of the DTPU build on an xc7z020-1 (see docs/power.md)."""

    #: device static power (PL + PS leakage) of an xc7z020-1, typical process, ~40 C junction
    static_w: float = 0.14
    #: one useful int8 lane MAC: 9x9 multiply, 32-bit accumulate, PE pipeline registers
    mac_pj: float = 3.0
    #: one 64-bit word moved on a stream: DDR3 access, PS HP port, AXI DMA, AXI4-Stream
    word_pj: Mapping[str, float] = field(default_factory=lambda: MappingProxyType(
        {"wgt": 1600.0, "act": 1600.0, "res": 1600.0}))
    #: one 64-bit word read or written in a BRAM bank (RAMB36E1 in 72-bit SDP mode)
    bram_pj: float = 30.0
    #: one busy cycle of clock tree, control FSM and idle PE registers of an 8x8 array
    busy_cycle_pj: float = 100.0
    #: multiplier cost of a lane MAC relative to int8
    precision_scale: Mapping[str, float] = field(default_factory=lambda: _PRECISION_SCALE)


DEFAULT = Coefficients()


@dataclass
class Activity:
    """What one run did, in the units the coefficients price."""

    macs: float = 0.0            # useful lane MACs, weighted by precision_scale
    words: dict[str, int] = field(default_factory=dict)
    bram_accesses: float = 0.0
    busy_cycles: int = 0

    def energy_j(self, coeffs: Coefficients = DEFAULT) -> float:
        """Dynamic energy only (static power needs a duration)."""
        pj = (self.macs * coeffs.mac_pj + self.bram_accesses * coeffs.bram_pj
              + self.busy_cycles * coeffs.busy_cycle_pj
              + sum(n * coeffs.word_pj.get(s, max(coeffs.word_pj.values())) for s, n in self.words.items()))
        return pj * 1e-12


def activity(counters: HwCounters, precision: Precision | str, cols: int,
             coeffs: Coefficients = DEFAULT) -> Activity:
    """The activity of one node's run from its counters."""
    prec = Precision.parse(precision)
    macs = counters.macs or 0
    words = {**(counters.words_in or {}), **(counters.words_out or {})}
    issue_cycles = macs / (prec.lanes * cols) if macs else 0.0
    written = sum((counters.words_in or {}).values())
    return Activity(macs=macs * coeffs.precision_scale.get(prec.value, 1.0), words=dict(words),
                    bram_accesses=written + issue_cycles * (cols + 1),
                    busy_cycles=counters.cycles or 0)


class EnergyMeter:
    """Accumulates the estimate over one invoke; :meth:`reading` closes the invoke.

    The delegate asks a backend for ``power()`` once per interpreter invoke, after all of the
    invoke's nodes ran, so the nodes' activities are summed here until then.
    """

    def __init__(self, clock_mhz: float, cols: int, coeffs: Coefficients = DEFAULT) -> None:
        self.clock_mhz = float(clock_mhz)
        self.cols = int(cols)
        self.coeffs = coeffs
        self._lock = threading.Lock()
        self._clear()

    def _clear(self) -> None:
        self._energy = 0.0
        self._busy_s = 0.0
        self._max_w = 0.0
        self._nodes = 0

    #: device busy time (seconds) of the last :meth:`reading`: what an external meter's mean
    #: power is multiplied by for an invoke's energy
    last_busy_s: float = 0.0

    def add(self, counters: HwCounters, precision: Precision | str) -> float:
        """Add one node's run; return its dynamic energy in joules."""
        act = activity(counters, precision, self.cols, self.coeffs)
        dyn = act.energy_j(self.coeffs)
        self.add_energy(dyn, (counters.cycles or 0) / (self.clock_mhz * 1e6))
        return dyn

    def add_energy(self, dyn_j: float, busy_s: float) -> None:
        """Add one node's run whose dynamic energy (joules) and busy time are already known: a
        backend running the same node with the same counters again computes them once."""
        with self._lock:
            self._energy += dyn_j
            self._busy_s += busy_s
            self._nodes += 1
            if busy_s > 0:
                self._max_w = max(self._max_w, self.coeffs.static_w + dyn_j / busy_s)

    @property
    def empty(self) -> bool:
        return self._nodes == 0

    def reading(self, window_s: float | None = None) -> PowerReading:
        """The estimate since the last reading. `window_s` is the time static power burns for;
        omitted (what every backend does), the device's busy time."""
        with self._lock:
            energy, busy_s, max_w, nodes = self._energy, self._busy_s, self._max_w, self._nodes
            self._clear()
            self.last_busy_s = busy_s
        if not nodes:
            return PowerReading(method="estimated")
        t = busy_s if window_s is None else max(float(window_s), busy_s)
        total = energy + self.coeffs.static_w * t
        avg = total / t if t > 0 else None
        return PowerReading(method="estimated", avg_w=avg, max_w=max(max_w, avg or 0.0) or None,
                            energy_j=total)


def coefficient_table(coeffs: Coefficients = DEFAULT) -> list[tuple[str, float, str]]:
    """(name, value, unit) rows, as docs/power.md lists them (a test keeps the two equal)."""
    rows = [("static_w", coeffs.static_w, "W"), ("mac_pj", coeffs.mac_pj, "pJ / int8 MAC")]
    rows += [(f"word_pj[{s}]", v, "pJ / 64-bit word") for s, v in coeffs.word_pj.items()]
    rows += [("bram_pj", coeffs.bram_pj, "pJ / 64-bit access"),
             ("busy_cycle_pj", coeffs.busy_cycle_pj, "pJ / busy cycle")]
    rows += [(f"precision_scale[{p}]", v, "x int8 MAC") for p, v in coeffs.precision_scale.items()]
    return rows


__all__ = ["Activity", "Coefficients", "DEFAULT", "EnergyMeter", "activity", "coefficient_table"]
