"""The golden model as a transport: the register/stream protocol executed in-process.

:class:`~dtpu.hw.model.Core` runs a job as soon as its input words are there and raises
``StreamStarved`` when asked for a register while a started job still waits for input. A real
core instead answers STATUS with BUSY and keeps waiting, and the driver relies on that (it reads
STATUS right after START, and reads the registers of a hung job to explain it). This transport
gives the model that behaviour, and exposes the stream backlog the board emulation needs to
decide when a DMA channel has finished.
"""
from __future__ import annotations

import numpy as np

from dtpu.driver.transport import Transport
from dtpu.hw.config import HwConfig, get_config
from dtpu.hw.model import STREAM_OUT, STREAMS_IN, Core

_U64 = np.dtype("<u8")


class ModelTransport(Transport):
    """In-process golden model; never blocks (a starved job makes `wait_done` return False)."""

    def __init__(self, core: Core | None = None, cfg: HwConfig | None = None) -> None:
        self.core = core or Core(cfg or get_config())
        self.cfg = self.core.cfg

    # -- the five methods ---------------------------------------------------------------------

    def write_reg(self, offset: int, value: int) -> None:
        self.core.write(offset, value)

    def read_reg(self, offset: int) -> int:
        core = self.core
        if not core._pending:
            return core.read(offset)
        core._try_run()  # the words may be there by now
        if not core._pending:
            return core.read(offset)
        # a started job waits for input: read as the RTL would (STATUS says BUSY, counters hold
        # the finished jobs) instead of the model's StreamStarved
        core._pending = False
        try:
            return core.read(offset)
        finally:
            core._pending = True

    def send(self, stream: str, words: np.ndarray) -> None:
        self.core.push(stream, words, last=True)

    def recv(self, stream: str, n: int) -> np.ndarray:
        packet = self.next_packet(stream)
        return packet if packet is not None else np.zeros(0, _U64)

    def wait_done(self, timeout_s: float) -> bool:
        if self.core._pending:
            self.core._try_run()
        return not self.core._pending

    # -- hooks ----------------------------------------------------------------------------------

    def pending_input(self, timeout_s: float = 0.0) -> dict[str, int]:
        return {s: n for s in STREAMS_IN if (n := self.backlog(s))}

    def describe(self) -> str:
        waiting = {s: self.backlog(s) for s in (*STREAMS_IN, STREAM_OUT)}
        return "model streams (words queued): " + ", ".join(f"{s}={n}" for s, n in waiting.items())

    # -- what the board emulation uses ------------------------------------------------------------

    @property
    def busy(self) -> bool:
        """A started job has not run yet (it waits for input words)."""
        return self.core._pending

    def backlog(self, stream: str) -> int:
        """Words waiting on an input stream, or result words not yet taken from m_axis_res."""
        if stream == STREAM_OUT:
            return sum(w.size for w in self.core._out)
        if stream not in STREAMS_IN:
            raise ValueError(f"unknown stream {stream!r}; accepted: {', '.join((*STREAMS_IN, STREAM_OUT))}")
        return self.core._available(stream)

    def next_packet(self, stream: str = STREAM_OUT) -> np.ndarray | None:
        """The next job's result words (one tlast-terminated packet), or None if there is none."""
        if stream != STREAM_OUT:
            raise ValueError(f"unknown output stream {stream!r}; accepted: {STREAM_OUT}")
        if self.core._pending or not self.core._out:
            return None
        # one packet per job: Core.pop would merge the packets queued behind this one
        return self.core._out.pop(0)


__all__ = ["ModelTransport"]
