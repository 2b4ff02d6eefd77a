"""The simulated core in this process: dtpu_axi built as a shared library, driven via ctypes.

The cocotb transport needs the simulator to host Python, so it only exists inside a simulation
started by `dtpu run --backend rtl` or :func:`dtpu.rtl.run_in_simulation`. Code that creates
backend=rtl in its own process (a notebook, ``dtpu.make_interpreter(..., {"backend": "rtl"})``
in a script) gets this transport instead: the same Verilog, Verilated into a library
(:func:`dtpu.rtl.build.build_native`) whose clock loop, AXI4-Lite master and stream queues are
C++ (native.cpp), so Python runs once per register access or stream, not once per cycle.

It follows the cocotb transport's protocol choices (:mod:`dtpu.rtl.transport`): START goes out
after the job's streams are queued (so a prefetching job has both input streams from its first
cycle), DONE is awaited on the interrupt line, every wait is bounded in
simulated cycles and in wall time, `recv` returns every complete packet, `reset` drops what the
queues hold. The two transports are independent implementations of the same bus behaviour, and
the tests hold both to backend=model's words and cycles.
"""
from __future__ import annotations

import ctypes
import logging
import time
from pathlib import Path

import numpy as np

from dtpu.driver.transport import DtpuTimeout, Transport
from dtpu.hw.config import HwConfig
from dtpu.rtl.build import BuildInfo, SimConfig, build_native
from dtpu.rtl.session import DEFAULT_TIMEOUT_CYCLES, DEFAULT_TIMEOUT_S, configure_waits

log = logging.getLogger(__name__)

_U64 = np.dtype("<u8")
_STREAMS = {"wgt": 0, "act": 1}
#: simulated cycles run per call between wall-clock checks
_CHUNK_CYCLES = 50_000
#: an AXI4-Lite access that takes longer than this means the register file is hung
_BUS_CYCLES = 1_000

_libs: dict[str, ctypes.CDLL] = {}


def _load(path: Path) -> ctypes.CDLL:
    key = str(path)
    if key not in _libs:
        lib = ctypes.CDLL(key)
        vp, u32, u64, i32 = ctypes.c_void_p, ctypes.c_uint32, ctypes.c_uint64, ctypes.c_int
        sigs = {
            "dtpu_new": ([ctypes.c_char_p], vp), "dtpu_delete": ([vp], None),
            "dtpu_traced": ([vp], i32), "dtpu_reset": ([vp, i32], None),
            "dtpu_write": ([vp, u32, u32, u64], i32),
            "dtpu_read": ([vp, u32, ctypes.POINTER(u32), u64], i32),
            "dtpu_push": ([vp, i32, ctypes.POINTER(u64), u64], None),
            "dtpu_run": ([vp, u64, i32], u64), "dtpu_irq": ([vp], i32),
            "dtpu_cycle": ([vp], u64), "dtpu_pending": ([vp, i32], u64),
            "dtpu_result_words": ([vp], u64), "dtpu_partial_words": ([vp], u64),
            "dtpu_take_results": ([vp, ctypes.POINTER(u64), u64], u64),
            "dtpu_flush": ([vp], None), "dtpu_trace_flush": ([vp], None),
        }
        for name, (args, res) in sigs.items():
            fn = getattr(lib, name)
            fn.argtypes, fn.restype = args, res
        _libs[key] = lib
    return _libs[key]


class NativeTransport(Transport):
    """dtpu.driver's Transport over an in-process Verilated dtpu_axi (see the module doc)."""

    def __init__(self, cfg: HwConfig, library: str | Path, *, vcd: str | Path | None = None,
                 timeout_cycles: int = DEFAULT_TIMEOUT_CYCLES,
                 timeout_s: float = DEFAULT_TIMEOUT_S, start_with_streams: bool = True,
                 recv_cycles: int = 64) -> None:
        configure_waits(self, cfg, timeout_cycles, timeout_s, start_with_streams, recv_cycles)
        self._lib = _load(Path(library))
        self._h = self._lib.dtpu_new(str(vcd).encode() if vcd else None)
        if vcd and not self._lib.dtpu_traced(self._h):
            log.warning("%s was built without tracing: no waveform in %s", library, vcd)
        self._lib.dtpu_reset(self._h, 4)

    @property
    def cycle(self) -> int:
        """Clock cycles since the core was created."""
        return int(self._lib.dtpu_cycle(self._h))

    # -- the bus ----------------------------------------------------------------------------

    def _write(self, offset: int, value: int) -> None:
        if self._lib.dtpu_write(self._h, offset, value & 0xFFFFFFFF, _BUS_CYCLES):
            raise DtpuTimeout(f"AXI4-Lite write of {value:#x} to {offset:#x} not answered within "
                              f"{_BUS_CYCLES} cycles")

    def _flush_start(self) -> None:
        if self._start_value is not None:
            value, self._start_value = self._start_value, None
            self._write(self.cfg.REG_CTRL, value)
            self._job_cycle0 = self.cycle

    # -- the five methods ---------------------------------------------------------------------

    def write_reg(self, offset: int, value: int) -> None:
        value = int(value) & 0xFFFFFFFF
        if offset == self.cfg.REG_CTRL and value & self._start_bit:
            value |= self._irq_bit
            self.jobs += 1
            self._flush_start()
            if self.start_with_streams:
                self._start_value = value
                return
            self._write(offset, value)
            self._job_cycle0 = self.cycle
            return
        self._flush_start()
        self._write(offset, value)

    def read_reg(self, offset: int) -> int:
        if self._start_value is not None:
            if offset == self.cfg.REG_STATUS:
                return self._busy_bit    # as the cocotb transport: what a job past CONFIG reads
            self._flush_start()
        out = ctypes.c_uint32()
        if self._lib.dtpu_read(self._h, offset, ctypes.byref(out), _BUS_CYCLES):
            raise DtpuTimeout(f"AXI4-Lite read of {offset:#x} not answered within {_BUS_CYCLES} cycles")
        return int(out.value)

    def send(self, stream: str, words: np.ndarray) -> None:
        index = _STREAMS.get(stream)
        if index is None:
            raise ValueError(f"unknown input stream {stream!r}; accepted: {', '.join(_STREAMS)}")
        data = np.ascontiguousarray(np.asarray(words, dtype=_U64))
        if data.size:
            self._lib.dtpu_push(self._h, index, data.ctypes.data_as(ctypes.POINTER(ctypes.c_uint64)),
                                data.size)
        # a held START waits for the job's other streams (flushed by the next non-send call)

    def wait_done(self, timeout_s: float) -> bool:
        self._flush_start()
        deadline = time.monotonic() + min(float(timeout_s), self.timeout_s)
        limit = self._job_cycle0 + self.timeout_cycles
        while True:
            if self._lib.dtpu_irq(self._h) and self.read_reg(self.cfg.REG_STATUS) & self._done_bit:
                return True
            now = self.cycle
            if now >= limit or time.monotonic() >= deadline:
                return False
            if not self._lib.dtpu_run(self._h, min(limit - now, _CHUNK_CYCLES), 1):
                self._lib.dtpu_run(self._h, 1, 0)   # irq high but not DONE yet: move on

    def recv(self, stream: str, n: int) -> np.ndarray:
        if stream != "res":
            raise ValueError(f"unknown output stream {stream!r}; accepted: res")
        waited = 0
        while not self._lib.dtpu_result_words(self._h) and waited < self.recv_cycles:
            self._lib.dtpu_run(self._h, 1, 0)
            waited += 1
        count = int(self._lib.dtpu_result_words(self._h))
        if not count:
            partial = int(self._lib.dtpu_partial_words(self._h))
            raise DtpuTimeout(f"m_axis_{stream}: no packet ended with tlast within {self.recv_cycles} "
                              f"cycles after DONE ({n} words expected, {partial} without tlast)")
        out = np.empty(count, _U64)
        self._lib.dtpu_take_results(self._h, out.ctypes.data_as(ctypes.POINTER(ctypes.c_uint64)), count)
        return out

    # -- hooks ----------------------------------------------------------------------------------

    def pending_input(self, timeout_s: float = 0.0) -> dict[str, int]:
        return {s: n for s, i in _STREAMS.items() if (n := int(self._lib.dtpu_pending(self._h, i)))}

    def reset(self) -> None:
        self._start_value = None
        self._write(self.cfg.REG_CTRL, self.cfg.encode("CTRL", SOFT_RESET=1))
        self._lib.dtpu_flush(self._h)
        self._lib.dtpu_run(self._h, 2, 0)

    def describe(self) -> str:
        h, lib = self._h, self._lib
        queued = ", ".join(f"s_axis_{s}: {lib.dtpu_pending(h, i)} words queued" for s, i in _STREAMS.items())
        return (f"native transport: cycle {self.cycle} (job started at {self._job_cycle0}, bound "
                f"{self.timeout_cycles} cycles), {queued}, m_axis_res: "
                f"{lib.dtpu_result_words(h)} words received, {lib.dtpu_partial_words(h)} without tlast")

    def close(self) -> None:
        if self._h:
            self._lib.dtpu_delete(self._h)
            self._h = None

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:  # noqa: BLE001 - interpreter shutdown
            pass


def open_native(config: SimConfig | None = None, *, progress: bool | None = None,
                vcd: str | Path | None = None, **options) -> tuple[NativeTransport, BuildInfo]:
    """Build (or find) the library for `config` and open a fresh simulated core on it."""
    config = config or SimConfig()
    info = build_native(config, progress=progress)
    return NativeTransport(config.hw_config(), info.product, vcd=vcd, **options), info


__all__ = ["NativeTransport", "open_native"]
