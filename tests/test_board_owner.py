"""Issue 27.3, one owner per board: opening the DTPU overlay takes an exclusive lock named for the
device (dtpu.board.owner), held while the delegate lives, released by the kernel when the owner
dies. Two processes on the emulated board share one $DTPU_LOCK_DIR, so they contend as two
processes on one PYNQ-Z2 do."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from tests.delegate_util import dtpu_so, emulated_board, run, tfl  # noqa: F401

ROOT = Path(__file__).resolve().parents[1]
MODEL = ROOT / "tests" / "models" / "zoo" / "mobilenet_like__int8.tflite"

# a process that opens the board, says so with its PID, and holds it until its stdin closes
OWNER = """
import os, sys, time
from dtpu.backends import get
t0 = time.monotonic()
try:
    backend = get("pynq")({"board_wait_s": float(sys.argv[1])})
except Exception as exc:
    print("REFUSED", type(exc).__name__, exc, flush=True)
    sys.exit(3)
print("OWNER", os.getpid(), round(time.monotonic() - t0, 3), flush=True)
sys.stdin.read()
backend.close()
print("CLOSED", flush=True)
"""


@pytest.fixture(scope="module")
def emu(tmp_path_factory):
    yield from emulated_board(tmp_path_factory.mktemp("overlay"))


@pytest.fixture
def shared(tmp_path, emu):
    """Environment of processes that share one emulated board: its lock directory and design."""
    env = {k: v for k, v in os.environ.items() if k != "DTPU_LOCK_DIR"}
    env.update(PYTHONPATH=str(ROOT / "pylib"), DTPU_PYNQ_EMULATE="1", DTPU_BITSTREAM=str(emu),
               DTPU_LOCK_DIR=str(tmp_path), HOME=str(tmp_path))
    return env


def _start(env, wait_s=0.0):
    return subprocess.Popen([sys.executable, "-c", OWNER, str(wait_s)], env=env, cwd=ROOT,
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)


def _first_line(proc, timeout=120.0) -> str:
    """The first line the child prints (OWNER/REFUSED), its stderr on failure."""
    deadline = time.monotonic() + timeout
    line = proc.stdout.readline()
    assert line, f"child printed nothing (rc {proc.wait(max(1, deadline - time.monotonic()))}): " \
                 f"{proc.stderr.read()[-2000:]}"
    return line.strip()


def _reap(*procs):
    for p in procs:
        if p.poll() is None:
            p.kill()
        p.wait(30)
        for f in (p.stdin, p.stdout, p.stderr):
            f.close()


def test_a_second_process_is_refused_naming_the_owner_and_kill_9_releases(shared, tmp_path,
                                                                          monkeypatch):
    from dtpu.board.owner import current_owner

    monkeypatch.setenv("DTPU_LOCK_DIR", str(tmp_path))     # this process looks at the same board
    assert current_owner("pynqz2-emulated") is None
    owner = _start(shared)
    second = third = None
    try:
        line = _first_line(owner)
        assert line.startswith("OWNER"), line
        pid = int(line.split()[1])
        assert pid == owner.pid
        lock = tmp_path / "dtpu-pynqz2-emulated.lock"
        assert lock.read_text().splitlines()[0] == str(pid)   # the owner wrote its PID
        # what dtpu doctor shows on a board: the kernel's lock table agrees with the note
        assert current_owner("pynqz2-emulated") == (pid, shared["DTPU_BITSTREAM"])

        second = _start(shared)
        refused = _first_line(second)
        assert second.wait(60) == 3
        assert refused.startswith("REFUSED BoardBusyError"), refused
        assert f"owned by process {pid}" in refused and str(lock) in refused
        assert "board_wait_s" in refused      # what would be accepted

        owner.send_signal(signal.SIGKILL)     # no close, no atexit: only the kernel can unlock
        assert owner.wait(30) == -signal.SIGKILL
        assert current_owner("pynqz2-emulated") is None        # its PID is still in the file
        assert lock.read_text().splitlines()[0] == str(pid)
        third = _start(shared)
        line = _first_line(third)
        assert line.startswith("OWNER") and int(line.split()[1]) == third.pid, line
        third.stdin.close()
        assert third.wait(60) == 0
        assert "CLOSED" in third.stdout.read()
        assert lock.read_text() == ""          # a closed owner leaves no PID behind
    finally:
        _reap(*[p for p in (owner, second, third) if p is not None])


def test_a_waiting_process_gets_the_board_when_the_owner_closes(shared):
    owner = _start(shared)
    waiter = None
    try:
        assert _first_line(owner).startswith("OWNER")
        waiter = _start(shared, wait_s=120)
        time.sleep(3.0)   # the waiter is blocked on the lock, not refused
        assert waiter.poll() is None
        owner.stdin.close()
        assert owner.wait(60) == 0
        line = _first_line(waiter)
        assert line.startswith("OWNER"), line
        assert float(line.split()[2]) >= 1.0   # it waited for the owner, then took the board
        waiter.stdin.close()
        assert waiter.wait(60) == 0
    finally:
        _reap(*[p for p in (owner, waiter) if p is not None])


def test_a_wait_that_runs_out_names_the_owner(shared):
    owner = _start(shared)
    waiter = None
    try:
        pid = int(_first_line(owner).split()[1])
        t0 = time.monotonic()
        waiter = _start(shared, wait_s=1.5)
        line = _first_line(waiter)
        assert waiter.wait(60) == 3
        assert time.monotonic() - t0 >= 1.5
        assert f"owned by process {pid}" in line and "waited 1.5 s" in line, line
    finally:
        _reap(*[p for p in (owner, waiter) if p is not None])


def test_in_one_process_the_same_overlay_is_shared_another_is_refused(emu, tmp_path, dtpu_so, tfl):
    """A second delegate with the same overlay shares the board (the PL is not downloaded again);
    one with another overlay is refused naming this process, without touching the PL, so the
    first delegate's results stay right; once the first is gone the other overlay opens."""
    import dtpu
    from dtpu.backends import get
    from dtpu.board import owner
    from dtpu.board.emulate import current_board, write_design
    from dtpu.board.owner import BoardBusyError
    from tests.models import zoo

    first = dtpu.make_interpreter(MODEL, {"backend": "pynq", "bitstream": str(emu)})
    first.allocate_tensors()
    cpu = tfl.Interpreter(model_path=str(MODEL))
    cpu.allocate_tensors()
    inputs = zoo.make_inputs(zoo.get_entry("mobilenet_like__int8"), seed=5)
    want = run(cpu, inputs)
    assert all(np.array_equal(g, w) for g, w in zip(run(first, inputs), want))
    assert list(owner.held().values()) == [str(Path(emu).resolve())]
    programmed = current_board().bitstream
    downloads = [a for a in current_board().trace]

    same = get("pynq")({"bitstream": str(emu)})
    assert same.transport.lease.shared
    assert current_board().bitstream == programmed
    assert current_board().trace[:len(downloads)] == downloads   # no download: the trace goes on

    other = write_design(tmp_path / "other")
    with pytest.raises(BoardBusyError, match=rf"owned by this process \(PID {os.getpid()}\) through "
                                             rf"another delegate with overlay .*{emu.name}"):
        get("pynq")({"bitstream": str(other)})
    with pytest.raises(ValueError, match="board_wait_s"):
        dtpu.make_interpreter(MODEL, {"backend": "pynq", "bitstream": str(other)})
    assert current_board().bitstream == programmed
    assert all(np.array_equal(g, w) for g, w in zip(run(first, inputs), want))

    same.close()
    assert owner.held()                  # the first delegate still holds it
    del first
    import gc
    gc.collect()
    assert owner.held() == {}
    backend = get("pynq")({"bitstream": str(other), "board_wait_s": 0})
    assert not backend.transport.lease.shared and current_board().bitstream.endswith(
        str(Path("other") / other.name))
    backend.close()
    assert owner.held() == {}


def test_a_backend_refused_after_opening_the_board_gives_it_back(emu, tmp_path):
    """path=lists on a 1.2 bitstream is refused once the core's VERSION has been read: the
    backend closes the transport, so the board's lock is free at once (no collection needed)."""
    import gc

    from dtpu.backends import get
    from dtpu.board import owner
    from dtpu.board.emulate import write_design

    bit12 = write_design(tmp_path, contract=1)
    gc.disable()
    try:
        with pytest.raises(ValueError, match=r"path=lists.*contract 1.2") as refused:
            get("pynq")({"bitstream": str(bit12), "path": "lists"})
        # the traceback (kept alive here, as a caller handling the error does) holds the
        # half-built backend: only an explicit close gives the board back
        assert refused.tb is not None and owner.held() == {}
    finally:
        gc.enable()


def test_board_wait_s_is_checked():
    from dtpu.delegate.options import parse

    assert parse({"board_wait_s": "2.5"}).board_wait_s == 2.5
    assert parse({"board_wait_s": "2.5"}).backend_options()["board_wait_s"] == 2.5
    assert "board_wait_s" not in parse({}).backend_options()
    for bad in ("-1", "soon", "1e9", "nan"):
        with pytest.raises(ValueError, match=rf"'board_wait_s'='{bad}' is invalid; expected a "
                                             rf"number of seconds in \[0, 86400\]"):
            parse({"board_wait_s": bad})
