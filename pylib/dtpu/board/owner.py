"""One owner per board: the process that opens the DTPU overlay holds an exclusive lock on it.

Two processes that both load the overlay would reprogram the PL under each other and interleave
their command lists on the one core, each silently corrupting the other's results. So opening
the board (:func:`dtpu.backends.targets.open_target`) first takes ``fcntl.flock`` on a lock file
named for the device (``dtpu-fpga0.lock`` on the board) and keeps it for the transport's life.
``flock`` is the kernel's: when the owner exits, is killed (``kill -9`` included) or crashes, the
lock goes with its file descriptor, so a dead owner never leaves the board locked. The owner
writes its PID and overlay into the file, which is how a refused process can name it.

Inside one process the lock is taken once per device: a second delegate with the same overlay
shares it (the PL is already programmed, nothing is downloaded again), a second delegate with
another overlay is refused like another process (it would reprogram the PL under the first).

Where the lock files live: ``$DTPU_LOCK_DIR``, else ``/run/lock`` (tmpfs, cleared at boot) when
writable, else the temporary directory. The emulated board (``DTPU_PYNQ_EMULATE``) lives inside
its process, so its lock defaults to the emulation's own design directory: concurrent test runs
on one machine do not contend, while processes given one ``$DTPU_LOCK_DIR`` contend exactly as
on a board.
"""
from __future__ import annotations

import errno
import fcntl
import logging
import os
import re
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from dtpu.driver.transport import DtpuError

log = logging.getLogger(__name__)

LOCK_DIR_ENV = "DTPU_LOCK_DIR"
#: how often a waiting opener retries the lock
POLL_S = 0.05


class BoardBusyError(DtpuError):
    """The board is owned by another process, or by another delegate of this process with
    another overlay; `owner_pid` is the owner's PID (None if it could not be read)."""

    def __init__(self, msg: str, owner_pid: int | None, path: Path) -> None:
        super().__init__(msg)
        self.owner_pid, self.path = owner_pid, path


def lock_dir() -> Path:
    """Where the lock files of this machine's boards live (see the module docstring)."""
    env = os.environ.get(LOCK_DIR_ENV, "").strip()
    if env:
        return Path(env)
    from dtpu.board import emulate

    if emulate.installed():
        return emulate.design_dir()
    run_lock = Path("/run/lock")
    if run_lock.is_dir() and os.access(run_lock, os.W_OK | os.X_OK):
        return run_lock
    return Path(tempfile.gettempdir())


def device_name(device: Any) -> str:
    """A file-name-safe name for a pynq device: the emulated board's own, the FPGA manager
    (``fpga0``) a Zynq's ``EmbeddedDevice`` programs through, else the device's name."""
    name = getattr(device, "lock_name", None)
    if not name:
        manager = getattr(device, "BS_FPGA_MAN", None)
        name = Path(manager).parent.name if manager else str(getattr(device, "name", "board"))
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", name) or "board"


def lock_path(device: str) -> Path:
    return lock_dir() / f"dtpu-{device}.lock"


@dataclass
class _Hold:
    """This process's lock on one device: the open file description that carries the flock."""

    fd: int
    bitstream: str
    users: int = 0
    pid: int = field(default_factory=os.getpid)


_held: dict[Path, _Hold] = {}
_mutex = threading.Lock()


def _forget_after_fork() -> None:
    """A forked child shares the parent's open file description, hence its flock: it must not
    unlock it (LOCK_UN would release the parent's lock) nor believe it owns the board."""
    _held.clear()


os.register_at_fork(after_in_child=_forget_after_fork)


class BoardLease:
    """One opener's share of this process's lock on a board; :meth:`release` once (later calls
    do nothing), the lock itself goes when the last lease of the process is released."""

    def __init__(self, path: Path, bitstream: str, shared: bool) -> None:
        self.path, self.bitstream = path, bitstream
        #: another opener of this process already held the board with this overlay
        self.shared = shared
        self._released = False

    @property
    def released(self) -> bool:
        return self._released

    def release(self) -> None:
        with _mutex:
            if self._released:
                return
            self._released = True
            hold = _held.get(self.path)
            if hold is None or hold.pid != os.getpid():
                return
            hold.users -= 1
            if hold.users > 0:
                return
            del _held[self.path]
            try:
                os.ftruncate(hold.fd, 0)
                fcntl.flock(hold.fd, fcntl.LOCK_UN)
            finally:
                os.close(hold.fd)
        log.info("board lock %s released", self.path)


def _flock_holder(path: Path) -> int | None:
    """The PID holding a flock on `path`, from the kernel's table (/proc/locks: device as
    major:minor in hex, then the inode), None if nobody does or the table cannot be read."""
    try:
        st = path.stat()
        key = f"{os.major(st.st_dev):02x}:{os.minor(st.st_dev):02x}:{st.st_ino}"
        for line in Path("/proc/locks").read_text().splitlines():
            parts = line.split()
            if len(parts) > 5 and parts[1] == "FLOCK" and parts[5] == key:
                return int(parts[4])
    except (OSError, ValueError):
        pass
    return None


def _owner_of(path: Path) -> tuple[int | None, str]:
    """(PID, overlay) the owner wrote into the lock file; the PID from the kernel's lock table
    when the file is still empty (the owner has the lock but has not written it yet)."""
    pid, overlay = None, ""
    try:
        lines = path.read_text().splitlines()
    except OSError:
        lines = []
    if lines and lines[0].strip().isdigit():
        pid = int(lines[0])
        overlay = lines[1].strip() if len(lines) > 1 else ""
    if pid is None:
        pid = _flock_holder(path)
    return pid, overlay


def _describe(pid: int | None) -> str:
    if pid is None:
        return "an unknown process"
    try:
        cmd = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        cmd = ""
    cmd = " ".join(cmd.split())   # one line, whatever the command line held
    return f"process {pid}" + (f" ({cmd[:120]})" if cmd else "")


def _try(path: Path, bitstream: str) -> BoardLease | BoardBusyError:
    """One attempt: a lease, or the error that names why not."""
    with _mutex:
        hold = _held.get(path)
        if hold is not None:
            if hold.bitstream == bitstream:
                hold.users += 1
                return BoardLease(path, bitstream, shared=True)
            return BoardBusyError(
                f"the DTPU ({path}) is owned by this process (PID {os.getpid()}) through another "
                f"delegate with overlay {hold.bitstream}; opening {bitstream} would reprogram the "
                f"PL under it. Accepted: the same overlay, or close the other delegate first "
                f"(or wait for it: delegate option board_wait_s)", os.getpid(), path)
        path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o666)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            os.close(fd)
            if exc.errno not in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
                raise
            pid, overlay = _owner_of(path)
            return BoardBusyError(
                f"the DTPU ({path}) is owned by {_describe(pid)}"
                + (f" with overlay {overlay}" if overlay else "")
                + "; one process drives a board at a time. Accepted: wait until it exits, or let "
                  "this one wait up to N seconds with the delegate option board_wait_s=N",
                pid, path)
        try:
            os.ftruncate(fd, 0)
            os.pwrite(fd, f"{os.getpid()}\n{bitstream}\n".encode(), 0)
        except OSError as exc:   # the lock holds without the note; only the error message loses
            log.warning("board lock %s: could not record the owner (%r)", path, exc)
        _held[path] = _Hold(fd, bitstream, users=1)
        return BoardLease(path, bitstream, shared=False)


def acquire(device: str, bitstream: str, wait_s: float = 0.0) -> BoardLease:
    """The lease on `device` for `bitstream` (the overlay's resolved path), waiting up to
    `wait_s` seconds for an owner to go; :class:`BoardBusyError` naming the owner after that."""
    if not wait_s >= 0.0:
        raise ValueError(f"board lock: wait_s={wait_s!r}; accepted: seconds >= 0")
    path = lock_path(device)
    deadline = time.monotonic() + wait_s
    waited = False
    while True:
        got = _try(path, bitstream)
        if isinstance(got, BoardLease):
            log.info("board lock %s %s%s", path, "shared" if got.shared else "taken",
                     " after waiting" if waited else "")
            return got
        left = deadline - time.monotonic()
        if left <= 0:
            if waited:
                raise BoardBusyError(f"{got} (waited {wait_s:g} s)", got.owner_pid, path)
            raise got
        if not waited:
            log.info("board lock %s: owned by PID %s, waiting up to %g s", path, got.owner_pid,
                     wait_s)
            waited = True
        time.sleep(min(POLL_S, left))


def current_owner(device: str) -> tuple[int | None, str] | None:
    """(PID, overlay) of whoever owns `device` now (this process included), None if nobody does:
    a look at the kernel's lock table, not a claim (``dtpu doctor``)."""
    path = lock_path(device)
    with _mutex:
        hold = _held.get(path)
        if hold is not None and hold.pid == os.getpid():
            return os.getpid(), hold.bitstream
    pid = _flock_holder(path)
    if pid is None:
        return None
    noted, overlay = _owner_of(path)
    return pid, overlay if noted == pid else ""


def held() -> dict[str, str]:
    """This process's board locks: lock file -> overlay (for diagnostics and tests)."""
    with _mutex:
        return {str(p): h.bitstream for p, h in _held.items() if h.pid == os.getpid()}


__all__ = ["BoardBusyError", "BoardLease", "LOCK_DIR_ENV", "acquire", "current_owner", "device_name", "held",
           "lock_dir", "lock_path"]
