"""What the code running inside the simulator shares: the live transport and the progress file.

The simulator process is not the one the user started: cocotb runs Python inside the Verilator
binary, and the cocotb entry (:mod:`dtpu.rtl._cocotb_entry`) builds the transport there. The
delegate's backend=rtl, created later by TFLite in the same process, has no way to be handed
an object, so the entry publishes the transport here and the backend looks it up. Nothing here
imports cocotb: outside the simulator :func:`current_transport` simply says there is none.

Progress goes the other way: the simulator process cannot draw on the user's terminal (its
output goes to a log), so the backend and the transport record counts here and the entry's
file (``progress.json`` in the run directory) is polled by the parent, which draws the bar.
"""
from __future__ import annotations

import json
import os
import threading
import time
from pathlib import Path
from typing import Any

from dtpu.driver.transport import Transport
from dtpu.hw.config import HwConfig

#: simulated cycles a job may run before wait_done gives up: 20 ms of device time at 100 MHz,
#: 200 times the zoo's largest job (MobileNet-v1-0.25's 9 k-cycle convolutions) and 4 times the
#: largest layer of a 224x224 MobileNet-v1; a hung core costs about a minute of simulation
DEFAULT_TIMEOUT_CYCLES = 2_000_000
#: wall-clock bound of one wait; the simulation runs 10^4..10^5 cycles/s, so this is the bound
#: that bites only when the simulator itself is stuck
DEFAULT_TIMEOUT_S = 600.0


class SimulatedTransport(Transport):
    """What both RTL transports (cocotb and in-process) share: the wait settings, checked once,
    and the job bookkeeping their register writes keep (a START held back until the streams
    begin, the cycle the job started at, the CTRL / STATUS bits they test). A base class rather
    than a helper that sets another object's attributes: each transport owns its state."""

    def __init__(self, cfg: HwConfig, timeout_cycles: int, timeout_s: float,
                 start_with_streams: bool, recv_cycles: int) -> None:
        if int(timeout_cycles) < 1:
            raise ValueError(f"timeout_cycles={timeout_cycles!r}; accepted: an integer >= 1")
        if not float(timeout_s) > 0:
            raise ValueError(f"timeout_s={timeout_s!r}; accepted: seconds > 0")
        self.timeout_cycles = int(timeout_cycles)
        self.timeout_s = float(timeout_s)
        self.start_with_streams = bool(start_with_streams)
        self.recv_cycles = int(recv_cycles)
        self.jobs = 0
        self.cfg = cfg
        self._start_value: int | None = None
        self._job_cycle0 = 0
        self._start_bit = cfg.reg("CTRL").field("START").mask
        self._irq_bit = cfg.reg("CTRL").field("IRQ_EN").mask
        self._done_bit = cfg.reg("STATUS").field("DONE").mask
        self._busy_bit = cfg.reg("STATUS").field("BUSY").mask


#: the environment variable naming the run directory; set only in the simulator process
RUN_DIR_ENV = "DTPU_RTL_RUN"

_lock = threading.Lock()
_transport: Any = None
_progress: "Progress | None" = None


class NoSimulationError(RuntimeError):
    """backend=rtl was asked for outside the simulator."""


def in_simulation() -> bool:
    """True in the simulator process while the cocotb entry's transport is live."""
    return _transport is not None


def current_transport():
    """The live cocotb transport of this simulator process; raise if there is none."""
    if _transport is None:
        raise NoSimulationError(
            "backend=rtl drives the Verilog core, which runs only inside its simulator: use "
            "`dtpu run MODEL --backend rtl`, or dtpu.rtl.run_in_simulation(fn) to run fn (which "
            "may create interpreters with backend=rtl) inside the simulation")
    return _transport


def set_transport(transport) -> None:
    global _transport
    with _lock:
        _transport = transport


def clear_transport() -> None:
    set_transport(None)


class Progress:
    """Counters the parent draws as a progress bar; written at most every `period_s`."""

    def __init__(self, path: Path, period_s: float = 0.25) -> None:
        self.path = Path(path)
        self.period_s = period_s
        self.fields: dict[str, Any] = {"jobs": 0, "cycles": 0, "nodes": 0, "node_invokes": 0,
                                       "phase": "starting"}
        self._last = 0.0
        self._lock = threading.Lock()

    def add(self, name: str, n: int = 1) -> None:
        with self._lock:
            self.fields[name] = self.fields.get(name, 0) + n
        self.flush()

    def set(self, **fields: Any) -> None:
        with self._lock:
            self.fields.update(fields)
        self.flush()

    def flush(self, force: bool = False) -> None:
        now = time.monotonic()
        if not force and now - self._last < self.period_s:
            return
        self._last = now
        with self._lock:
            text = json.dumps(self.fields)
        tmp = self.path.with_suffix(".tmp")
        try:
            tmp.write_text(text)
            os.replace(tmp, self.path)
        except OSError:  # progress is cosmetic; never fail a run over it
            pass


def set_progress(progress: Progress | None) -> None:
    global _progress
    _progress = progress


def progress() -> Progress | None:
    return _progress


def note(name: str, n: int = 1) -> None:
    """Count `n` more of `name` (jobs, cycles, nodes, node_invokes) if a parent is watching."""
    p = _progress
    if p is not None:
        p.add(name, n)


def rebuild_exception(cls: type, args: tuple, state: dict) -> BaseException:
    """Unpickle an exception without calling its __init__ (whose signature need not match its
    args, e.g. DtpuJobError(job, err, cfg, state) keeps only the message in args)."""
    exc = cls.__new__(cls)
    exc.args = args
    exc.__dict__.update(state)
    return exc


class PortableException:
    """Pickles as `exc` rebuilt by type, args and picklable attributes (see rebuild_exception)."""

    def __init__(self, exc: BaseException) -> None:
        self.exc = exc

    def __reduce__(self):
        import pickle

        state = {}
        for key, value in vars(self.exc).items():
            try:
                pickle.dumps(value)
            except Exception:  # noqa: BLE001 - e.g. an HwConfig holding locks: leave it out
                continue
            state[key] = value
        return rebuild_exception, (type(self.exc), self.exc.args, state)


def read_progress(path: Path) -> dict[str, Any] | None:
    try:
        return json.loads(Path(path).read_text())
    except (OSError, ValueError):
        return None


__all__ = ["NoSimulationError", "PortableException", "Progress", "rebuild_exception", "RUN_DIR_ENV", "clear_transport", "current_transport",
           "in_simulation", "note", "progress", "read_progress", "set_progress", "set_transport"]
