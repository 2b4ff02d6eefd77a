"""The DTPU job protocol, written once for every transport.

A lowered :class:`~dtpu.hw.lower.Job` is register writes, input words per stream and a number
of result words. :func:`run_job` turns it into the register/stream sequence of
docs/architecture.md ("Interfaces and protocol") and checks everything the device reports:
configuration errors right after START, a missing DONE within the timeout, fatal ERR flags,
input words the core did not take, and result packets of the wrong length. Each failure raises
with the register state in the message and leaves the target reset, so the next job starts
clean (stale words from a failed job would otherwise be taken by the next one).
"""
from __future__ import annotations

import logging
from dataclasses import dataclass, field

import numpy as np

from dtpu.driver.transport import (DtpuHardwareError, as_transport, DtpuJobError, DtpuTimeout,
                                   Transport)
from dtpu.hw.config import HwConfig
from dtpu.hw.lower import Job

log = logging.getLogger(__name__)

#: seconds a job may take when neither the caller nor the transport says otherwise; the largest
#: job of the zoo runs in well under a millisecond of device time, so this only bounds hangs
DEFAULT_JOB_TIMEOUT_S = 10.0

_STATE_REGS = ("STATUS", "ERR", "JOB", "JOB_CYCLES", "WORDS_WGT", "WORDS_ACT", "WORDS_RES")


@dataclass
class Counters:
    """Counter deltas over a run of jobs, read from the registers."""

    cycles: int = 0
    stall_cycles: int = 0
    words_in: dict[str, int] = field(default_factory=dict)
    words_out: dict[str, int] = field(default_factory=dict)


def read_counters(t: Transport) -> tuple[int, int, int, int, int]:
    """CYCLES, STALL (64-bit: the LO read latches HI), WORDS_WGT, WORDS_ACT, WORDS_RES."""
    c = t.cfg
    lo = t.read_reg(c.REG_CYCLES_LO)
    cycles = lo | (t.read_reg(c.REG_CYCLES_HI) << 32)
    lo = t.read_reg(c.REG_STALL_LO)
    stalls = lo | (t.read_reg(c.REG_STALL_HI) << 32)
    return (cycles, stalls, t.read_reg(c.REG_WORDS_WGT), t.read_reg(c.REG_WORDS_ACT),
            t.read_reg(c.REG_WORDS_RES))


def counter_delta(before, after) -> Counters:
    """Differences modulo the counters' widths (64-bit cycles, 32-bit word counts)."""
    d = [(a - b) & ((1 << 64) - 1 if i < 2 else 0xFFFFFFFF)
         for i, (b, a) in enumerate(zip(before, after))]
    return Counters(d[0], d[1], {"wgt": d[2], "act": d[3]}, {"res": d[4]})


def check_identity(t: Transport) -> int:
    """Refuse a core whose ID, version or build differs from the contract the host lowers for;
    returns its VERSION: 1.2, or 2.0 (command lists, which keeps the 1.2 protocol too)."""
    c = t.cfg
    got = {"ID": t.read_reg(c.REG_ID), "VERSION": t.read_reg(c.REG_VERSION),
           "HWCFG0": t.read_reg(c.REG_HWCFG0), "HWCFG1": t.read_reg(c.REG_HWCFG1)}
    want = {"ID": c.ID, "VERSION": c.VERSION, "HWCFG0": c.hwcfg0, "HWCFG1": c.hwcfg1}
    if c.VERSION2 is not None and got["VERSION"] == c.VERSION2:
        want["VERSION"] = c.VERSION2
    bad = {k: (hex(got[k]), hex(want[k])) for k in want if got[k] != want[k]}
    if bad:
        decoded = ""
        if "HWCFG0" in bad or "HWCFG1" in bad:
            decoded = (f"; the device is {c.decode('HWCFG0', got['HWCFG0'])} "
                       f"{c.decode('HWCFG1', got['HWCFG1'])}")
        raise DtpuHardwareError(f"DTPU does not match contract {c.model_name}: (got, expected) "
                                f"{bad}{decoded}")
    return got["VERSION"]


def _fmt_value(cfg: HwConfig, name: str, value: int) -> str:
    reg = cfg.reg(name)
    if name == "ERR":
        names = [n for n, b in cfg.errors.items() if value >> b & 1]
        return f"{name}={value:#x}" + (f" ({'|'.join(names)})" if names else "")
    if not reg.fields:
        return f"{name}={value:#x}" if name != "JOB_CYCLES" and not name.startswith("WORDS") \
            else f"{name}={value}"
    parts = []
    for f in reg.fields:
        v = (value >> f.lsb) & ((1 << f.width) - 1)
        if f.enum:
            v = next((k for k, code in cfg.enums[f.enum].items() if code == v), v)
        parts.append(f"{f.name}={v}")
    return f"{name}={value:#x} ({' '.join(parts)})"


def register_state(t: Transport) -> str:
    """The registers that explain a failure, decoded; never raises (the device may be gone)."""
    c = t.cfg
    parts = []
    for name in _STATE_REGS:
        try:
            parts.append(_fmt_value(c, name, t.read_reg(c.reg(name).offset)))
        except Exception as exc:  # a dead transport must not hide the original failure
            parts.append(f"{name}=<unreadable: {exc!r}>")
    try:
        extra = t.describe()
    except Exception as exc:
        extra = f"<transport state unreadable: {exc!r}>"
    return "registers: " + ", ".join(parts) + (f"; {extra}" if extra else "")


def _rewrap(t: Transport, job: Job, exc: Exception) -> Exception:
    """A transport's own error (a DMA timeout or fault), with the job and the register state."""
    cls = DtpuTimeout if isinstance(exc, TimeoutError) else DtpuHardwareError
    return _fail(t, cls(f"DTPU job {job.label!r}: {exc}; {register_state(t)}"))


def _fail(t: Transport, exc: Exception) -> Exception:
    """Reset the target after a failure; a failing reset is logged, the first error wins."""
    try:
        t.reset()
    except Exception as reset_exc:
        log.warning("DTPU reset after a failed job failed too: %r", reset_exc)
    return exc


def run_job(t: Transport, job: Job, timeout_s: float | None = None) -> np.ndarray | None:
    """Run one job; return its result words (None for a job without results).

    Raises DtpuJobError (fatal ERR flags), DtpuTimeout (no DONE within `timeout_s`, default the
    larger of the transport's and DEFAULT_JOB_TIMEOUT_S) or DtpuHardwareError (input words left
    over, a result packet of the wrong length).
    """
    t = as_transport(t)
    c = t.cfg
    timeout = float(timeout_s) if timeout_s is not None else max(DEFAULT_JOB_TIMEOUT_S, float(t.timeout_s))
    for name, value in job.regs:
        t.write_reg(c.reg(name).offset, value)
    if job.recv:
        t.expect("res", job.recv)
    t.write_reg(c.REG_CTRL, c.encode("CTRL", START=1))
    status = t.read_reg(c.REG_STATUS)
    done_bit = c.reg("STATUS").field("DONE").mask
    if not (status & done_bit and status & c.reg("STATUS").field("ERROR").mask):
        # not failed in CONFIG: feed the streams (a job that failed there takes nothing)
        try:
            for stream, words in job.send.items():
                t.send(stream, words)
            finished = t.wait_done(timeout)
        except (DtpuHardwareError, TimeoutError) as exc:
            raise _rewrap(t, job, exc) from exc
        if not finished:
            state = register_state(t)
            raise _fail(t, DtpuTimeout(f"DTPU job {job.label!r} did not finish within {timeout:g} s "
                                       f"(no STATUS.DONE); {state}"))
    err = t.read_reg(c.REG_ERR)
    if err & c.ERR_FATAL_MASK:
        state = register_state(t)
        raise _fail(t, DtpuJobError(job.label, err, c, state))
    if err:
        log.debug("job %s: warning flags %#x", job.label, err)
        t.write_reg(c.REG_ERR, err)
    left = {s: n for s, n in t.pending_input(min(timeout, 0.05)).items() if n}
    if left:
        state = register_state(t)
        what = ", ".join(f"{s}: {'some' if n < 0 else n} of {job.send[s].size if s in job.send else '?'}"
                         for s, n in left.items())
        raise _fail(t, DtpuHardwareError(
            f"DTPU job {job.label!r} finished without taking all its input words ({what} left); "
            f"the job's registers and its streams disagree; {state}"))
    if not job.recv:
        return None
    try:
        res = t.recv("res", job.recv)
    except (DtpuHardwareError, TimeoutError) as exc:
        raise _rewrap(t, job, exc) from exc
    if res.size != job.recv:
        kind = "short" if res.size < job.recv else "long"
        state = register_state(t)
        raise _fail(t, DtpuHardwareError(
            f"DTPU job {job.label!r}: {kind} result stream: {res.size} words on m_axis_res, "
            f"expected {job.recv}; {state}"))
    return res


def run_jobs(t: Transport, jobs: list[Job], timeout_s: float | None = None
             ) -> tuple[list[np.ndarray], Counters]:
    """Run jobs in order; return the result words of those that produce any, and the counters."""
    t = as_transport(t)
    before = read_counters(t)
    results = []
    for job in jobs:
        res = run_job(t, job, timeout_s)
        if res is not None:
            results.append(res)
    return results, counter_delta(before, read_counters(t))


__all__ = ["Counters", "DEFAULT_JOB_TIMEOUT_S", "check_identity", "counter_delta", "read_counters",
           "register_state", "run_job", "run_jobs"]
