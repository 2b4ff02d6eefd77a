"""Power on the PYNQ-Z2: XADC sampling per invoke, and an external meter's reading.

The board measures temperature and supply voltages (XADC), not current, so it cannot measure
power. Per invoke the backend therefore reports:

* temperature and the six supply voltages, min/avg/max over samples taken by a thread while the
  invoke runs (measured);
* power and energy from an external meter when one is given, either process-wide with
  :func:`set_external_power` or per delegate with the ``power_meter`` option
  (``method="external"``: energy = mean reading x the DTPU's busy time, CYCLES / clock);
* otherwise the activity-based estimate of :mod:`dtpu.power` from the DTPU's counters
  (``method="estimated"``).

docs/power.md states what each field is and how far to trust it.
"""
from __future__ import annotations

import logging
import math
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from dtpu.board.xadc import Sample

log = logging.getLogger(__name__)

PowerSource = Callable[[], float]

_external: list[PowerSource | None] = [None]
_lock = threading.Lock()

#: sampling period of the XADC thread (the thesis sampled every 0.8 ms)
DEFAULT_PERIOD_S = 0.001


def power_source(value: float | PowerSource | str | None) -> PowerSource | None:
    """A reading source from watts, a callable, or ``file:PATH`` (latest watts in a text file)."""
    if value is None:
        return None
    if callable(value):
        return value
    if isinstance(value, str):
        text = value.strip()
        if text.lower() in ("", "none"):
            return None
        if text.lower().startswith("file:"):
            path = Path(text[5:])

            def read_file() -> float:
                return float(path.read_text().split()[0])
            read_file.__doc__ = f"latest reading in {path}"
            return read_file
        value = float(text)
    watts = float(value)
    if not math.isfinite(watts) or watts <= 0:
        raise ValueError(f"external power {value!r} W is invalid; expected a positive number of "
                         f"watts, a callable returning watts, 'file:PATH' or None")
    return lambda: watts


def parse_power_meter(text: str) -> float | str | None:
    """Validate the ``power_meter`` option: ``none``, watts > 0, or ``file:PATH`` (readable)."""
    t = text.strip()
    if t.lower() in ("", "none"):
        return None
    if t.lower().startswith("file:"):
        path = Path(t[5:])
        if not path.is_file():
            raise ValueError(f"power meter file {str(path)!r} does not exist")
        return t
    watts = float(t)
    if not math.isfinite(watts) or watts <= 0:
        raise ValueError(f"{t} is not a positive number of watts")
    return watts


def set_external_power(value: float | PowerSource | str | None) -> None:
    """Feed an external meter's reading to every pynq backend of this process.

    `value` is the board's power in watts (a constant reading), a callable returning the current
    reading (e.g. polling a USB meter), ``"file:PATH"`` (the first number in that file, re-read
    at every sample), or None to go back to estimates. A delegate's ``power_meter`` option wins.
    """
    src = power_source(value)
    with _lock:
        _external[0] = src


def external_power() -> PowerSource | None:
    with _lock:
        return _external[0]


@dataclass
class Window:
    """What the sampler saw over one invoke."""

    started: float
    ended: float = 0.0
    samples: list[Sample] = field(default_factory=list)

    @property
    def duration_s(self) -> float:
        return max(0.0, self.ended - self.started)

    def temperature(self) -> dict[str, float] | None:
        values = [s.temperature_c for s in self.samples if s.temperature_c is not None]
        return _stats(values)

    def voltages(self) -> dict[str, float] | None:
        names = sorted({n for s in self.samples for n in s.voltages_v})
        if not names:
            return None
        out: dict[str, float] = {}
        for n in names:
            st = _stats([s.voltages_v[n] for s in self.samples if n in s.voltages_v])
            out[n] = st["avg"]
            out[f"{n}_min"] = st["min"]
            out[f"{n}_max"] = st["max"]
        return out

    def power(self) -> dict[str, float] | None:
        return _stats([s.power_w for s in self.samples if s.power_w is not None])


def _stats(values: list[float]) -> dict[str, float] | None:
    if not values:
        return None
    return {"min": min(values), "avg": sum(values) / len(values), "max": max(values)}


class PowerMonitor:
    """A thread sampling the sensors and the external meter while a window is open.

    `sensors` returns (temperature C, {supply: volts}) (an ``XadcIP.sample``), or None when the
    overlay has no XADC. A window always holds a sample from its start and one from its end,
    so even an invoke shorter than the period is covered.
    """

    def __init__(self, sensors: Callable[[], tuple[float, dict[str, float]]] | None,
                 external: PowerSource | None = None, period_s: float = DEFAULT_PERIOD_S) -> None:
        if not period_s > 0:
            raise ValueError(f"sampling period {period_s!r} s is invalid; expected > 0")
        self.sensors = sensors
        self.external = external
        self.period_s = float(period_s)
        self._cond = threading.Condition()
        self._window: Window | None = None
        self._stop = False
        self._thread: threading.Thread | None = None
        self._errors = 0

    def _meter(self) -> PowerSource | None:
        return self.external if self.external is not None else external_power()

    @property
    def has_meter(self) -> bool:
        return self._meter() is not None

    def sample(self) -> Sample:
        temp, volts = None, {}
        if self.sensors is not None:
            try:
                temp, volts = self.sensors()
            except Exception as exc:  # a flaky sensor read must not fail the invoke
                self._errors += 1
                if self._errors <= 3:
                    log.warning("XADC read failed: %r", exc)
        watts = None
        meter = self._meter()
        if meter is not None:
            try:
                watts = float(meter())
            except Exception as exc:
                self._errors += 1
                if self._errors <= 3:
                    log.warning("external power meter read failed: %r", exc)
        return Sample(time.monotonic(), temp, dict(volts), watts)

    def _run(self) -> None:
        while True:
            with self._cond:
                while not self._stop and self._window is None:
                    self._cond.wait()
                if self._stop:
                    return
                window = self._window
            s = self.sample()
            with self._cond:
                if self._window is window:
                    window.samples.append(s)
                if self._stop:
                    return
                self._cond.wait(self.period_s)

    @property
    def open(self) -> bool:
        return self._window is not None

    @property
    def sampling(self) -> bool:
        """Whether the sampling thread runs (the first :meth:`begin` starts it, :meth:`close`
        stops it): a closed monitor leaves no thread behind."""
        return self._thread is not None and self._thread.is_alive()

    def begin(self) -> None:
        """Open a window (no-op if one is open); start the thread on first use."""
        if self._window is not None:
            return
        first = self.sample()
        with self._cond:
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="dtpu-xadc", daemon=True)
                self._thread.start()
            self._window = Window(started=first.t, samples=[first])
            self._cond.notify_all()

    def end(self) -> Window | None:
        """Close the window; None if none was open."""
        if self._window is None:
            return None
        last = self.sample()
        with self._cond:
            window, self._window = self._window, None
        if window is None:
            return None
        window.samples.append(last)
        window.ended = last.t
        return window

    def close(self, timeout_s: float = 1.0) -> None:
        with self._cond:
            self._stop = True
            self._window = None
            self._cond.notify_all()
        if self._thread is not None:
            self._thread.join(timeout_s)
            self._thread = None


__all__ = ["DEFAULT_PERIOD_S", "PowerMonitor", "Window", "external_power", "parse_power_meter",
           "power_source",
           "set_external_power"]
