"""backend=pynq: the claimed nodes run on the DTPU in the PYNQ-Z2's programmable logic.

Everything above the transport is backend=model's (lowering, resident weights with paging, the
counters); only the target differs: the overlay's DTPU over MMIO and AXI DMA
(:class:`dtpu.board.transport.PynqTransport`). The counters are the core's own registers, so
CYCLES and STALL are what the hardware counted, stalls included.

Options (from the delegate): ``bitstream`` (the overlay's .bit with its .hwh beside it; default
$DTPU_BITSTREAM, else the install location on the board), ``power_meter`` (an external meter's
reading, see :mod:`dtpu.board.power`), plus ``mxu``/``clock_mhz``/``precision`` as for
backend=model (the build must match the bitstream: checked against ID/VERSION/HWCFG).
Power per invoke: XADC temperature and voltages (measured), power and energy from the meter or
else estimated from the counters (docs/power.md).

One backend drives the one DTPU of the board: calls are serialized. Opening the board takes its
owner lock (:mod:`dtpu.board.owner`): another process, or a delegate of this process with
another overlay, is refused naming the owner (or waits up to the ``board_wait_s`` option).
"""
from __future__ import annotations

import logging
import threading
from typing import Any

import numpy as np

from dtpu.backends.base import HwCounters, PowerReading, Probes
from dtpu.backends.model import DeviceBackend
from dtpu.board import check_bitstream, import_pynq, resolve_bitstream
from dtpu.board.design import VLNV
from dtpu.board.power import DEFAULT_PERIOD_S, PowerMonitor, power_source
from dtpu.driver import Transport
from dtpu.spec import ConvSpec

log = logging.getLogger(__name__)


class PynqBackend(DeviceBackend):
    name = "pynq"

    def __init__(self, options: dict[str, Any] | None = None) -> None:
        opts = dict(options or {})
        self._lock = threading.RLock()
        import_pynq()  # first: a missing pynq is the clearer error than a missing bitstream
        # after import_pynq: the emulation, when asked for, has written its overlays by now
        self.bitstream = check_bitstream(resolve_bitstream(opts.get("bitstream")))
        self.overlay: Any = None
        self.monitor: PowerMonitor | None = None
        try:
            super().__init__(opts)
        except BaseException:
            # refused after the board was opened (identity, path, precision): give the board
            # and its owner lock back now, not whenever the transport is collected
            t = getattr(self, "transport", None)
            if t is not None:
                t.close()
            raise
        meter = opts.get("power_meter")
        self.monitor = PowerMonitor(self._xadc_sampler(), external=power_source(meter),
                                    period_s=float(opts.get("xadc_period_s", DEFAULT_PERIOD_S)))

    def _open_transport(self) -> Transport:
        t = super()._open_transport()       # dtpu.backends.targets.open_target("pynq", ...)
        self.overlay = self.target.overlay
        return t

    def _xadc_sampler(self):
        names = [n for n, d in self.overlay.ip_dict.items() if d.get("type") == VLNV["xadc"]]
        if not names:
            log.info("overlay %s has no XADC: no temperature or voltages", self.bitstream)
            return None
        xadc = getattr(self.overlay, names[0])
        return xadc.sample

    @property
    def core(self):
        raise AttributeError("backend=pynq has no golden-model core; its counters are the board's")

    def prepare(self, spec: ConvSpec, filters: np.ndarray, bias: np.ndarray | None):
        with self._lock:
            return super().prepare(spec, filters, bias)

    def invoke(self, handle, x: np.ndarray, probes: Probes) -> tuple[np.ndarray, HwCounters]:
        with self._lock:
            self.monitor.begin()
            return super().invoke(handle, x, probes)

    def prepare_partitions(self, partitions: list, keep: list | None = None):
        with self._lock:
            return super().prepare_partitions(partitions, keep)

    def invoke_partition(self, program, index: int, inputs, outputs, probes: Probes):
        with self._lock:
            self.monitor.begin()
            return super().invoke_partition(program, index, inputs, outputs, probes)

    def finish_partition(self, program, index: int, run, ops, seconds: float, probes: Probes,
                         inputs=None, outputs=None):
        """As the model's; a run of the C invoke path, folded into its report later, opens
        the power window then (its XADC samples are taken when the report is built, not
        during the run: docs/delegate.md, "The C invoke path")."""
        with self._lock:
            self.monitor.begin()     # a no-op for a run of invoke_partition (window open)
            return super().finish_partition(program, index, run, ops, seconds, probes, inputs,
                                            outputs)

    def release_partitions(self, program) -> None:
        with self._lock:
            super().release_partitions(program)

    def power(self) -> PowerReading:
        """Over the invoke that just ended: XADC statistics, and the meter's power or the
        counters' estimate."""
        with self._lock:
            window = self.monitor.end() if self.monitor is not None else None
            # device time on every backend (CYCLES / clock), not the invoke's wall time: on the
            # emulated board that is the emulator's speed, on the board the host's share
            estimate = self.energy.reading()
            device_s = self.energy.last_busy_s
        if window is None:
            return PowerReading()
        temperature, voltages, meter = window.temperature(), window.voltages(), window.power()
        if meter is not None:
            return PowerReading(method="external", avg_w=meter["avg"], max_w=meter["max"],
                                energy_j=meter["avg"] * device_s,
                                temperature_c=temperature, voltages_v=voltages)
        estimate.temperature_c, estimate.voltages_v = temperature, voltages
        return estimate

    def release(self, handle) -> None:
        with self._lock:
            super().release(handle)

    def close(self) -> None:
        if self.monitor is not None:
            self.monitor.close()
        with self._lock:
            self.transport.close()


__all__ = ["PynqBackend"]
