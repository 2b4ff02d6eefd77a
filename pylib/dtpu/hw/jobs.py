"""The driver side of the DTPU: running lowered jobs through any register/stream transport.

The same job sequence drives the golden model (:class:`ModelTransport`), the RTL under cocotb and
the board over PYNQ's AXI DMAs; each is a small object with the five methods of
:class:`Transport`. Keeping the protocol here (register order, START, streams, DONE, ERR) means the
three targets cannot disagree on it.
"""
from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Protocol

import numpy as np

from dtpu.hw.config import HwConfig, get_config
from dtpu.hw.lower import Job
from dtpu.hw.model import Core

log = logging.getLogger(__name__)


class Transport(Protocol):
    """What a DTPU target offers. The driver calls send, wait_done, then recv; a DMA transport
    therefore arms its receive channel when the job's first send happens (the core only reaches
    DONE once its results have been taken) and `recv` just waits for and returns that buffer.
    A failed job produces no result words: `recv` is not called then."""

    cfg: HwConfig

    def write_reg(self, offset: int, value: int) -> None: ...

    def read_reg(self, offset: int) -> int: ...

    def send(self, stream: str, words: np.ndarray) -> None:
        """Queue words on s_axis_<stream> with tlast on the last one."""

    def recv(self, stream: str, n: int) -> np.ndarray:
        """Block until n words came out of m_axis_<stream>."""

    def wait_done(self) -> None:
        """Block until STATUS.DONE."""


class DtpuJobError(RuntimeError):
    """A job ended with ERR flags set; the message names them."""

    def __init__(self, job: str, err: int, cfg: HwConfig):
        self.err = err
        names = [n for n, b in cfg.errors.items() if err >> b & 1]
        docs = "; ".join(f"{n}: {cfg.contract['errors'][n]['doc']}" for n in names)
        super().__init__(f"DTPU job {job!r} failed with ERR={err:#x} ({docs})")


class ModelTransport:
    """The golden model as a transport: the register protocol, executed in-process."""

    def __init__(self, core: Core | None = None, cfg: HwConfig | None = None) -> None:
        self.core = core or Core(cfg or get_config())
        self.cfg = self.core.cfg

    def write_reg(self, offset: int, value: int) -> None:
        self.core.write(offset, value)

    def read_reg(self, offset: int) -> int:
        return self.core.read(offset)

    def send(self, stream: str, words: np.ndarray) -> None:
        self.core.push(stream, words, last=True)

    def recv(self, stream: str, n: int) -> np.ndarray:
        return self.core.pop(stream, n)

    def wait_done(self) -> None:
        self.core.run()


@dataclass
class Counters:
    """Counter deltas over a run of jobs, read from the registers."""

    cycles: int = 0
    stall_cycles: int = 0
    words_in: dict[str, int] = field(default_factory=dict)
    words_out: dict[str, int] = field(default_factory=dict)


def read_counters(t: Transport) -> tuple[int, int, int, int, int]:
    c = t.cfg
    lo = t.read_reg(c.REG_CYCLES_LO)
    cycles = lo | (t.read_reg(c.REG_CYCLES_HI) << 32)
    lo = t.read_reg(c.REG_STALL_LO)
    stalls = lo | (t.read_reg(c.REG_STALL_HI) << 32)
    return (cycles, stalls, t.read_reg(c.REG_WORDS_WGT), t.read_reg(c.REG_WORDS_ACT),
            t.read_reg(c.REG_WORDS_RES))


def counter_delta(before, after) -> Counters:
    d = [(a - b) & ((1 << 64) - 1 if i < 2 else 0xFFFFFFFF) for i, (b, a) in enumerate(zip(before, after))]
    return Counters(d[0], d[1], {"wgt": d[2], "act": d[3]}, {"res": d[4]})


def check_identity(t: Transport) -> None:
    """Refuse a core whose ID, version or build differs from the contract the host lowers for."""
    c = t.cfg
    got = {"ID": t.read_reg(c.REG_ID), "VERSION": t.read_reg(c.REG_VERSION),
           "HWCFG0": t.read_reg(c.REG_HWCFG0), "HWCFG1": t.read_reg(c.REG_HWCFG1)}
    want = {"ID": c.ID, "VERSION": c.VERSION, "HWCFG0": c.hwcfg0, "HWCFG1": c.hwcfg1}
    bad = {k: (hex(got[k]), hex(want[k])) for k in want if got[k] != want[k]}
    if bad:
        raise RuntimeError(f"DTPU does not match contract {c.model_name}: (got, expected) {bad}")


def run_job(t: Transport, job: Job) -> np.ndarray | None:
    """Write the registers, START, stream, collect results, wait for DONE, check ERR."""
    c = t.cfg
    for name, value in job.regs:
        t.write_reg(c.reg(name).offset, value)
    t.write_reg(c.REG_CTRL, c.encode("CTRL", START=1))
    for stream, words in job.send.items():
        t.send(stream, words)
    t.wait_done()
    err = t.read_reg(c.REG_ERR)
    if err & c.ERR_FATAL_MASK:
        t.write_reg(c.REG_ERR, err)
        raise DtpuJobError(job.label, err, c)
    if err:
        log.debug("job %s: warning flags %#x", job.label, err)
        t.write_reg(c.REG_ERR, err)
    return t.recv("res", job.recv) if job.recv else None


def run_jobs(t: Transport, jobs: list[Job]) -> tuple[list[np.ndarray], Counters]:
    """Run jobs in order; return the result words of those that produce any, and the counters."""
    before = read_counters(t)
    results = []
    for job in jobs:
        res = run_job(t, job)
        if res is not None:
            results.append(res)
    return results, counter_delta(before, read_counters(t))
