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
from typing import Protocol, runtime_checkable

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


@runtime_checkable
class DeviceBuffer(Protocol):
    """A buffer in the memory a contract-2.0 core reaches over its AXI4 master port, as
    :meth:`Transport.alloc_buffer` returns it: ``pynq.allocate`` on the board, a
    :class:`dtpu.hw.ddr.DdrPool` buffer on the golden model, the harness's memory in Verilator."""

    #: the bus address the core's descriptors use
    addr: int
    #: the host's uint8 view of the buffer
    array: np.ndarray

    def flush(self, offset: int = 0, nbytes: int | None = None) -> None:
        """Make the host's writes visible to the device (cache clean)."""

    def invalidate(self, offset: int = 0, nbytes: int | None = None) -> None:
        """Make the device's writes visible to the host (cache invalidate)."""

    def free(self) -> None:
        """Give the buffer back."""


class Transport(abc.ABC):
    """A DTPU target as the driver sees it.

    The driver's sequence per job is: job registers (JOB last), :meth:`expect` for the result
    words, ``CTRL.START``, one STATUS read (configuration errors end the job at once), :meth:`send`
    per input stream, :meth:`wait_done`, ERR, :meth:`pending_input`, :meth:`recv`. After any
    failure it calls :meth:`reset`. Subclasses set :attr:`cfg` to the build they drive.

    What a target may or may not offer is declared here with its default, never probed for:
    :attr:`streams` (the 1.2 AXI-stream job path), :attr:`command_lists` with
    :meth:`alloc_buffer`, :meth:`wait_list` and :meth:`list_trace` (contract 2.0),
    :attr:`simulated` and :attr:`timeout_s`, the C invoke path's hooks (:meth:`c_register_io`,
    :meth:`c_buffer_sync`, :meth:`add_c_runs`).
    """

    cfg: HwConfig
    #: bound for the waits a transport does on its own (DMA channels); the driver's job timeout
    #: is passed to :meth:`wait_done` explicitly
    timeout_s: float = 5.0
    #: the target is a simulation run by the host (golden model, Verilator, emulated board):
    #: the time inside its calls is the device's, not the host's (dtpu.driver.hostops)
    simulated: bool = True
    #: the core has the 1.2 AXI-stream ports (s_axis_wgt/act, m_axis_res), so jobs can be run one
    #: by one (dtpu.driver.jobs); a 2.0-only design reaches memory through command lists alone
    streams: bool = True
    #: the transport offers the contract-2.0 side (dtpu.driver.lists): :meth:`alloc_buffer`,
    #: and its own :meth:`wait_list` / :meth:`list_trace` where it has them. Whether the core it
    #: reaches runs command lists is the VERSION register's answer
    #: (:func:`dtpu.driver.lists.lists_supported`)
    command_lists: bool = False
    #: the core has contract 2.1's optional vector unit (VEC descriptors: ADD/SUB/MUL, pooling,
    #: MEAN; docs/architecture.md "The vector unit"): declared by the target, since VERSION 2.1
    #: names the list format, not the units built. The delegate claims those operators only
    #: where this is True (the golden model; backend=rtl's in-process dtpu_cl_top built with
    #: VEC_EN=1)
    vector_unit: bool = False
    #: what that unit runs where it is less than the contract's
    #: (:class:`dtpu.hw.vec_lower.VecUnitBuild`: the Verilog's kinds); None:
    #: all of it (the golden model)
    vector_build = None

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

    # -- contract 2.0 (command lists) ---------------------------------------------------------

    def alloc_buffer(self, nbytes: int) -> DeviceBuffer:
        """A buffer of `nbytes` in the memory the core's AXI4 master reaches."""
        raise DtpuHardwareError(f"{type(self).__name__}: this target has no memory port (a 1.2 "
                                f"core): no DDR buffers; command lists need a contract-2.0 core")

    def wait_list(self, timeout_s: float) -> bool:
        """Wait at most `timeout_s` for the running list's completion (the board's interrupt);
        False if it did not come. The default returns True at once: the driver then polls
        CL_STATUS.DONE with its own deadline."""
        return True

    def c_register_io(self) -> dict | None:
        """How C code reaches this target's registers without Python (the delegate's C invoke
        path, delegate/dtpu_cpath.c): ``{"kind": "mmio", "base": address, "size": bytes}`` for a
        register window mapped into this process (the board), ``{"kind": "verilator", ...}``
        for the in-process Verilated core; None (the default): through this object's own
        :meth:`read_reg` / :meth:`write_reg` / :meth:`wait_list`, called back from C."""
        return None

    def c_buffer_sync(self, buf: "DeviceBuffer") -> dict | None:
        """How C code keeps `buf` (a non-coherent DDR image) coherent with the device without
        Python (delegate/dtpu_cpath.c): ``{"kind": "mirror", "host": address, "device": address,
        "synced": address or 0, "size": bytes}`` where the device reads a memory of its own that
        C can reach (the emulated board); None (the default): the buffer's own :meth:`flush` /
        :meth:`invalidate`, called back from C."""
        return None

    def add_c_runs(self, lists: int, cycles: int) -> None:
        """Told, as the delegate collects them, how many command lists the C invoke path ran on
        this target without Python and their cycles, for a target that counts its own lists
        (the in-process Verilated core); the default keeps no count."""

    def list_trace(self):
        """The target's record of the last command list (per-node cycles, a
        :class:`dtpu.hw.list_result.RunResult` or the RTL's node trace), or None if it keeps none."""
        return None


class _Adapted(Transport):
    """A duck-typed transport (``cfg`` and the five methods, written before this ABC) as a
    :class:`Transport`: the five methods are its own, every other member the ABC's default."""

    def __init__(self, inner) -> None:
        self.inner = inner
        self.cfg = inner.cfg

    def write_reg(self, offset: int, value: int) -> None:
        self.inner.write_reg(offset, value)

    def read_reg(self, offset: int) -> int:
        return self.inner.read_reg(offset)

    def send(self, stream: str, words: np.ndarray) -> None:
        self.inner.send(stream, words)

    def recv(self, stream: str, n: int) -> np.ndarray:
        return self.inner.recv(stream, n)

    def wait_done(self, timeout_s: float) -> bool:
        return self.inner.wait_done(timeout_s)


def as_transport(t) -> Transport:
    """`t` itself if it is a :class:`Transport`; else `t` adapted (the driver's entry points
    accept transports written before this ABC: the five methods and ``cfg``, no hooks)."""
    if isinstance(t, Transport):
        return t
    missing = [m for m in ("cfg", "write_reg", "read_reg", "send", "recv", "wait_done")
               if not hasattr(t, m)]
    if missing:
        raise TypeError(f"{type(t).__name__} is not a DTPU transport: it lacks {', '.join(missing)}; "
                        f"expected a dtpu.driver.Transport")
    return _Adapted(t)


__all__ = ["as_transport", "DeviceBuffer", "DtpuError", "DtpuHardwareError", "DtpuJobError", "DtpuTimeout", "Transport"]
