"""What the host does per invoke on today's job-by-job path (contract 1.2): a counting layer.

The report's ``host`` record (docs/delegate.md) needs the register accesses, doorbells and
stream transfers the driver makes, counted the same way on every backend:

* :class:`CountingTransport` wraps the target's :class:`~dtpu.driver.transport.Transport` and is
  what the protocol driver (:func:`dtpu.driver.run_jobs`) is handed. It counts only the calls the
  *driver* makes: a transport's own internal accesses (the board's DMA-engine status polls, the
  native RTL transport reading STATUS inside its ``wait_done``) are not DTPU register accesses the
  protocol asks for, and would make the figures depend on how a target waits. The completion
  wait (``wait_done``) is therefore counted as no register read (an interrupt on the board).
* ``doorbells`` are CTRL writes with START set (one per job on the 1.2 path) and DOORBELL
  writes (one per command list, contract 2.0); ``dma_starts`` are stream
  transfers started: every non-empty ``send`` and every ``expect`` (the board arms its receive
  DMA there; the model and the RTL take the same packet).
* The golden model's compiled fast path skips the protocol. What the protocol *would* have done
  for a job is derived by running the same driver code (:func:`dtpu.driver.jobs.run_job`,
  :func:`~dtpu.driver.jobs.read_counters`) once per job shape against :class:`_DryTransport`, a
  target that finishes every job at once, and is cached by that shape (register count, streams
  sent, result words or not): no counts are written down by hand.
* Device time: the time spent inside the target, subtracted from the host's time of the invoke.
  For a simulated target (``Transport.simulated``: the golden model, Verilator, the emulated
  board) that is all the time inside the transport's calls, since they run the simulator; for a
  real board only ``wait_done`` (the wait for the device), since its register and DMA calls are
  the host's own cost. The compiled path adds the time inside :func:`dtpu.hw.fast.execute`.
"""
from __future__ import annotations

import functools
from dataclasses import dataclass
from time import perf_counter

import numpy as np

from dtpu.driver.transport import Transport
from dtpu.hw.config import HwConfig
from dtpu.report import HOST_FIELDS


@dataclass
class HostOps:
    """Host operations of a run of jobs; `device_s` is the time spent inside the target."""

    mmio_reads: int = 0
    mmio_writes: int = 0
    doorbells: int = 0
    dma_starts: int = 0
    device_s: float = 0.0

    def add(self, other: "HostOps") -> None:
        self.mmio_reads += other.mmio_reads
        self.mmio_writes += other.mmio_writes
        self.doorbells += other.doorbells
        self.dma_starts += other.dma_starts
        self.device_s += other.device_s

    def counts(self) -> tuple[int, int, int, int]:
        return self.mmio_reads, self.mmio_writes, self.doorbells, self.dma_starts


class CountingTransport(Transport):
    """`inner` as the driver sees it, counting the driver's calls into :attr:`ops`."""

    def __init__(self, inner: Transport, ops: HostOps | None = None) -> None:
        self.inner = inner
        self.cfg = inner.cfg
        self.ops = ops if ops is not None else HostOps()
        self._start, self._doorbell = _doorbell_regs(inner.cfg)
        self._simulated = bool(inner.simulated)

    @property
    def timeout_s(self) -> float:  # type: ignore[override]
        return float(self.inner.timeout_s)

    @property
    def simulated(self) -> bool:  # type: ignore[override]
        return self._simulated

    @property
    def streams(self) -> bool:  # type: ignore[override]
        return self.inner.streams

    @property
    def command_lists(self) -> bool:  # type: ignore[override]
        return self.inner.command_lists

    def _timed(self, fn, *args, device: bool = False):
        if not (device or self._simulated):
            return fn(*args)
        t0 = perf_counter()
        try:
            return fn(*args)
        finally:
            self.ops.device_s += perf_counter() - t0

    def write_reg(self, offset: int, value: int) -> None:
        ops = self.ops
        ops.mmio_writes += 1
        if (offset == self.cfg.REG_CTRL and value & self._start) or (offset == self._doorbell
                                                                      and value & 1):
            ops.doorbells += 1
        self._timed(self.inner.write_reg, offset, value)

    def read_reg(self, offset: int) -> int:
        self.ops.mmio_reads += 1
        return self._timed(self.inner.read_reg, offset)

    def send(self, stream: str, words: np.ndarray) -> None:
        if np.size(words):
            self.ops.dma_starts += 1
        self._timed(self.inner.send, stream, words)

    def recv(self, stream: str, n: int) -> np.ndarray:
        return self._timed(self.inner.recv, stream, n)

    def wait_done(self, timeout_s: float) -> bool:
        return self._timed(self.inner.wait_done, timeout_s, device=True)

    def expect(self, stream: str, n: int) -> None:
        self.ops.dma_starts += 1
        self._timed(self.inner.expect, stream, n)

    def pending_input(self, timeout_s: float = 0.0) -> dict[str, int]:
        return self._timed(self.inner.pending_input, timeout_s)

    def reset(self) -> None:
        self.inner.reset()

    def describe(self) -> str:
        return self.inner.describe()

    def close(self) -> None:
        self.inner.close()

    # -- contract 2.0 (command lists): not register accesses, not counted

    def alloc_buffer(self, nbytes: int):
        return self.inner.alloc_buffer(nbytes)

    def wait_list(self, timeout_s: float) -> bool:
        return self._timed(self.inner.wait_list, timeout_s, device=True)


@functools.lru_cache(maxsize=16)
def _doorbell_regs(cfg: HwConfig) -> tuple[int, int]:
    """(CTRL's START bit, the 2.0 DOORBELL register's offset or -1) of a build."""
    regs2 = {r["name"]: r["offset"] for r in cfg.contract.get("contract2", {}).get("registers", [])}
    return cfg.encode("CTRL", START=1), regs2.get("DOORBELL", -1)


class _DryTransport(Transport):
    """A target on which every job finishes at once without errors: what the protocol does for a
    job, with none of the device's work (see :func:`protocol_ops`)."""

    def __init__(self, cfg: HwConfig) -> None:
        self.cfg = cfg
        self._done = cfg.reg("STATUS").field("DONE").mask

    def write_reg(self, offset: int, value: int) -> None:
        pass

    def read_reg(self, offset: int) -> int:
        return self._done if offset == self.cfg.REG_STATUS else 0

    def send(self, stream: str, words: np.ndarray) -> None:
        pass

    def recv(self, stream: str, n: int) -> np.ndarray:
        return np.zeros(n, np.dtype("<u8"))

    def wait_done(self, timeout_s: float) -> bool:
        return True


@functools.lru_cache(maxsize=1024)
def _job_ops(cfg: HwConfig, n_regs: int, streams: tuple[tuple[str, bool], ...], recv: int
             ) -> tuple[int, int, int, int]:
    from dtpu.driver.jobs import run_job
    from dtpu.hw.lower import Job

    regs = [("JOB", 0)] * n_regs    # the dry target ignores what is written
    send = {s: np.zeros(1 if nonempty else 0, np.dtype("<u8")) for s, nonempty in streams}
    t = CountingTransport(_DryTransport(cfg))
    run_job(t, Job("dry", regs, send, recv))
    return t.ops.counts()


@functools.lru_cache(maxsize=16)
def counter_read_ops(cfg: HwConfig) -> tuple[int, int, int, int]:
    """What :func:`dtpu.driver.run_jobs` adds around a run of jobs: the counters read before and
    after (one run_jobs call per node invoke)."""
    from dtpu.driver.jobs import read_counters

    t = CountingTransport(_DryTransport(cfg))
    read_counters(t)
    read_counters(t)
    return t.ops.counts()


def protocol_ops(cfg: HwConfig, n_regs: int, streams: dict[str, int], recv: int
                 ) -> tuple[int, int, int, int]:
    """(reads, writes, doorbells, DMA starts) :func:`dtpu.driver.jobs.run_job` makes for a job of
    `n_regs` register writes, `streams` (words per input stream) and `recv` result words when it
    succeeds without warnings; derived once per shape by running it on a dry target."""
    key = tuple((s, bool(n)) for s, n in streams.items())
    return _job_ops(cfg, n_regs, key, 1 if recv else 0)


def add_counts(ops: HostOps, counts: tuple[int, int, int, int]) -> None:
    ops.mmio_reads += counts[0]
    ops.mmio_writes += counts[1]
    ops.doorbells += counts[2]
    ops.dma_starts += counts[3]


__all__ = ["CountingTransport", "HOST_FIELDS", "HostOps", "add_counts", "counter_read_ops",
           "protocol_ops"]
