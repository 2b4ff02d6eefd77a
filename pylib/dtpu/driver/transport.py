"""What a DTPU target must offer the job driver, and the errors the driver raises.

The register/stream protocol is written once (:mod:`dtpu.driver.jobs`); a target is a small
:class:`Transport`: the golden model in-process, the RTL under cocotb, the PYNQ-Z2 board over
its AXI DMAs. Five methods are required; the hooks below them have defaults that are right for a
target without DMA engines, and a DMA target overrides them.

Every wait a transport does is bounded: `wait_done` takes a timeout, and a transport that blocks
anywhere else (a DMA channel) bounds that wait with :attr:`Transport.timeout_s` and raises
:class:`DtpuTimeout`. The driver never loops on a register without a deadline, so a hung core
or a stuck DMA surfaces as an exception naming the job and the register state, not as a hang.
"""
from __future__ import annotations

import abc

import numpy as np

from dtpu.hw.config import HwConfig


class DtpuError(RuntimeError):
    """Base of everything the driver raises about the device (not about its arguments)."""


class DtpuHardwareError(DtpuError):
    """The device misbehaved: error flags, wrong stream lengths, a DMA fault, a wrong build."""


class DtpuTimeout(DtpuHardwareError, TimeoutError):
    """A bounded wait expired (STATUS.DONE, a DMA channel); the device may be hung."""


class DtpuJobError(DtpuHardwareError):
    """A job ended with fatal ERR flags; the message names them and `err` holds the bits."""

    def __init__(self, job: str, err: int, cfg: HwConfig, state: str = ""):
        self.err = err
        self.job = job
        names = [n for n, b in cfg.errors.items() if err >> b & 1]
        docs = "; ".join(f"{n}: {cfg.contract['errors'][n]['doc']}" for n in names)
        tail = f"; {state}" if state else ""
        super().__init__(f"DTPU job {job!r} failed with ERR={err:#x} ({docs}){tail}")


class Transport(abc.ABC):
    """A DTPU target as the driver sees it.

    The driver's sequence per job is: job registers (JOB last), :meth:`expect` for the result
    words, ``CTRL.START``, one STATUS read (configuration errors end the job at once), :meth:`send`
    per input stream, :meth:`wait_done`, ERR, :meth:`pending_input`, :meth:`recv`. After any
    failure it calls :meth:`reset`. Subclasses set :attr:`cfg` to the build they drive.
    """

    cfg: HwConfig
    #: bound for the waits a transport does on its own (DMA channels); the driver's job timeout
    #: is passed to :meth:`wait_done` explicitly
    timeout_s: float = 5.0
    #: the target is a simulation run by the host (golden model, Verilator, emulated board):
    #: the time inside its calls is the device's, not the host's (dtpu.driver.hostops)
    simulated: bool = True

    @abc.abstractmethod
    def write_reg(self, offset: int, value: int) -> None:
        """One 32-bit AXI4-Lite write."""

    @abc.abstractmethod
    def read_reg(self, offset: int) -> int:
        """One 32-bit AXI4-Lite read. Must not block on a busy core: STATUS then reads BUSY."""

    @abc.abstractmethod
    def send(self, stream: str, words: np.ndarray) -> None:
        """Start moving uint64 `words` into s_axis_<stream>, tlast on the last one.

        May return before the core has taken them (a DMA transfer runs on); the driver learns
        whether they were all taken from :meth:`pending_input` after DONE.
        """

    @abc.abstractmethod
    def recv(self, stream: str, n: int) -> np.ndarray:
        """The packet that came out of m_axis_<stream> for this job (up to its tlast).

        `n` is the length the driver expects; return what actually arrived, shorter or longer,
        and let the driver report the difference. Raise :class:`DtpuTimeout` if nothing
        completes within :attr:`timeout_s`.
        """

    @abc.abstractmethod
    def wait_done(self, timeout_s: float) -> bool:
        """Wait at most `timeout_s` for STATUS.DONE; False if it did not come."""

    # -- hooks with defaults ------------------------------------------------------------------

    def expect(self, stream: str, n: int) -> None:
        """Called before START with the words the job will put on m_axis_<stream>.

        A DMA transport arms its receive channel here, before any input moves, so the core's
        result port never backs up into a stall the driver would wait on.
        """

    def pending_input(self, timeout_s: float = 0.0) -> dict[str, int]:
        """After DONE: input words sent but not taken, per stream (-1: some, count unknown).

        A correct job takes exactly what was sent (tlast on its last word), so anything left
        means the job and its streams disagree.
        """
        return {}

    def reset(self) -> None:
        """Bring target and transport back to idle after a failure: CTRL.SOFT_RESET (abort,
        flush streams, clear STATUS and ERR). DMA transports also reset their channels."""
        self.write_reg(self.cfg.REG_CTRL, self.cfg.encode("CTRL", SOFT_RESET=1))

    def describe(self) -> str:
        """Transport-side state for error messages (DMA channel status); empty by default."""
        return ""

    def close(self) -> None:
        """Release what the transport holds (buffers, simulator)."""


__all__ = ["DtpuError", "DtpuHardwareError", "DtpuJobError", "DtpuTimeout", "Transport"]
