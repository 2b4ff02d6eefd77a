"""A fault-injecting transport: the failures a board or a simulator can show, on demand.

The golden model never hangs, never loses a word and never raises a flag the lowering did not
provoke, so the driver's error paths would go untested against it. :class:`FaultyTransport`
wraps any transport and, for chosen jobs (counted by their START writes), makes the device look
hung, raise ERR flags at configuration or at the end, drop or add result words, leave input
words untaken, or time out a DMA channel. The driver must turn each into its exception, with
the register state, and leave the target reset so that the next job succeeds.
"""
from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np

from dtpu.driver.transport import DtpuTimeout, Transport

KINDS = {
    "hang": "STATUS never shows DONE (the wait for DONE runs into its timeout)",
    "config_error": "STATUS shows DONE|ERROR right after START, ERR holds `err`",
    "error": "the job ends with `err` added to ERR",
    "short": "the result packet loses its last `words` words",
    "long": "the result packet gains `words` extra words",
    "stuck_input": "an input stream still holds words after DONE",
    "recv_timeout": "the result channel never completes (a DMA transport's DtpuTimeout)",
}


@dataclass(frozen=True)
class Fault:
    """One injected failure; `job` is the 0-based START count it applies to (None: every job)."""

    kind: str
    job: int | None = None
    err: int = 0
    words: int = 1

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"unknown fault kind {self.kind!r}; accepted: {', '.join(KINDS)}")


class FaultyTransport(Transport):
    """Wraps `inner`; the faults apply to the jobs they name, everything else passes through."""

    def __init__(self, inner: Transport, *faults: Fault) -> None:
        self.inner = inner
        self.cfg = inner.cfg
        self.timeout_s = inner.timeout_s
        self.faults = list(faults)
        self.job = -1            # index of the job started last
        self.injected: list[tuple[int, str]] = []
        self.resets = 0
        c = self.cfg
        self._start = c.reg("CTRL").field("START").mask
        self._done = c.reg("STATUS").field("DONE").mask
        self._busy = c.reg("STATUS").field("BUSY").mask
        self._error = c.reg("STATUS").field("ERROR").mask

    def _active(self, kind: str) -> Fault | None:
        for f in self.faults:
            if f.kind == kind and (f.job is None or f.job == self.job):
                return f
        return None

    def _note(self, kind: str) -> None:
        if (self.job, kind) not in self.injected:
            self.injected.append((self.job, kind))

    def write_reg(self, offset: int, value: int) -> None:
        if offset == self.cfg.REG_CTRL and value & self._start:
            self.job += 1
        self.inner.write_reg(offset, value)

    def read_reg(self, offset: int) -> int:
        c = self.cfg
        value = self.inner.read_reg(offset)
        if offset == c.REG_STATUS:
            if self._active("hang"):
                self._note("hang")
                value = (value & ~self._done) | self._busy
            elif self._active("config_error"):
                value = (value & ~self._busy) | self._done | self._error
        elif offset == c.REG_ERR:
            for kind in ("config_error", "error"):
                f = self._active(kind)
                if f:
                    self._note(kind)
                    value |= f.err
        return value

    def send(self, stream: str, words: np.ndarray) -> None:
        self.inner.send(stream, words)

    def recv(self, stream: str, n: int) -> np.ndarray:
        if self._active("recv_timeout"):
            self._note("recv_timeout")
            raise DtpuTimeout(f"{stream} channel did not complete within {self.timeout_s:g} s "
                              f"(injected)")
        words = self.inner.recv(stream, n)
        f = self._active("short")
        if f:
            self._note("short")
            words = words[:max(0, words.size - f.words)]
        f = self._active("long")
        if f:
            self._note("long")
            words = np.concatenate([words, np.zeros(f.words, words.dtype)])
        return words

    def wait_done(self, timeout_s: float) -> bool:
        done = self.inner.wait_done(timeout_s)
        if self._active("hang"):
            self._note("hang")
            time.sleep(timeout_s)  # a hung device costs the caller its whole timeout
            return False
        return done

    def expect(self, stream: str, n: int) -> None:
        self.inner.expect(stream, n)

    def pending_input(self, timeout_s: float = 0.0) -> dict[str, int]:
        left = dict(self.inner.pending_input(timeout_s))
        if self._active("stuck_input"):
            self._note("stuck_input")
            left.setdefault("act", -1)
        return left

    def reset(self) -> None:
        self.resets += 1
        self.inner.reset()

    def describe(self) -> str:
        return self.inner.describe()

    def close(self) -> None:
        self.inner.close()


__all__ = ["Fault", "FaultyTransport", "KINDS"]
