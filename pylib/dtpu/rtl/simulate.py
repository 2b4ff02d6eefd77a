"""Run a Python callable inside the RTL simulation and get its result back.

cocotb runs Python *inside* the Verilator binary, so code that drives the simulated core has to
live in the simulator's process, not in the caller's. :class:`Simulation` hides that:

1. it builds dtpu_axi with Verilator (or reuses the cached build, :mod:`dtpu.rtl.build`);
2. it writes the callable's reference and arguments to a run directory and launches the
   simulator through ``cocotb_tools.runner`` with :mod:`dtpu.rtl._cocotb_entry` as the test
   module, which runs the callable in a ``cocotb.task.bridge`` thread next to a live
   :class:`~dtpu.rtl.transport.CocotbTransport` (so backend=rtl works in there);
3. while the simulator runs it draws a progress bar from the run's progress file and streams
   the callable's stdout/stderr to its own;
4. it returns the callable's return value, or re-raises its exception (with the remote
   traceback as ``__cause__``).

The callable crosses the process boundary by reference, not by value: it must be importable
(a module-level function), given as ``"module:function"``, or defined in the script being run
(``__main__``), which is then loaded from its file by path. Arguments and the return value are
pickled. It runs in the caller's working directory, so relative paths mean the same there. The simulator's own output (cocotb's log, TFLite's messages) goes to ``sim.log`` in
the run directory, which is removed after a clean run unless ``keep`` or ``waves`` is set.
"""
from __future__ import annotations

import logging
import os
import pickle
import shutil
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Callable

from dtpu.rtl import session
from dtpu.rtl.build import TOPLEVEL, TOPLEVEL_CL, BuildInfo, SimConfig, build, ensure_verilator

log = logging.getLogger(__name__)

ENTRY_MODULE = "dtpu.rtl._cocotb_entry"


class RtlSimulationError(RuntimeError):
    """The simulator did not deliver a result (it crashed, or the entry could not start)."""


class RemoteTraceback(Exception):
    """The traceback of an exception raised inside the simulator process (its ``__cause__``)."""

    def __init__(self, text: str) -> None:
        super().__init__(text)
        self.text = text

    def __str__(self) -> str:
        return "\n\nin the simulator process:\n" + self.text


@dataclass
class RunInfo:
    """What one simulation cost and where its files are."""

    run_dir: Path
    build: BuildInfo
    wall_s: float = 0.0          # the simulator process, start to exit
    call_s: float = 0.0          # the callable inside it
    cycles: int = 0              # simulated clock cycles while the callable ran
    jobs: int = 0                # DTPU jobs (START writes)
    waves: Path | None = None
    log: Path | None = None
    kept: bool = False
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def cycles_per_s(self) -> float | None:
        return self.cycles / self.call_s if self.call_s > 0 else None


def target_of(fn: Callable | str) -> tuple[str, str, str]:
    """How the simulator finds `fn`: ("module", name, qualname) or ("file", path, qualname)."""
    if isinstance(fn, str):
        where, sep, qualname = fn.rpartition(":")
        if not sep or not where or not qualname:
            raise ValueError(f"callable {fn!r}; accepted: a module-level function, "
                             f"'package.module:function' or 'path/to/script.py:function'")
        if where.endswith(".py"):
            path = Path(where).resolve()
            if not path.is_file():
                raise ValueError(f"callable {fn!r}: {path} does not exist")
            return "file", str(path), qualname
        return "module", where, qualname
    module = getattr(fn, "__module__", None)
    qualname = getattr(fn, "__qualname__", None)
    if not module or not qualname or "<locals>" in qualname or "<lambda>" in qualname:
        raise ValueError(f"callable {fn!r} cannot be found by the simulator process; accepted: a "
                         f"module-level function, 'package.module:function' or "
                         f"'path/to/script.py:function'")
    if module == "__main__":
        main_file = getattr(sys.modules["__main__"], "__file__", None)
        if not main_file:
            raise ValueError(f"callable {fn!r} lives in an interactive __main__; define it in a "
                             f"module or a script file")
        return "file", str(Path(main_file).resolve()), qualname
    return "module", module, qualname


def _bar(progress: bool | None, **kw):
    from tqdm import tqdm

    return tqdm(disable=None if progress is None else not progress, leave=False, **kw)


class _Streamer:
    """Copies what the callable prints (captured in files) to our stdout/stderr as it grows."""

    def __init__(self, run_dir: Path, bar) -> None:
        self.files = [(run_dir / "stdout.txt", sys.stdout), (run_dir / "stderr.txt", sys.stderr)]
        self.offsets = [0, 0]
        self.bar = bar

    def pump(self) -> None:
        for i, (path, stream) in enumerate(self.files):
            try:
                with open(path, "rb") as fh:
                    fh.seek(self.offsets[i])
                    data = fh.read()
            except OSError:
                continue
            if not data:
                continue
            cut = data.rfind(b"\n") + 1 if b"\n" in data else 0   # whole lines only
            if not cut:
                continue
            self.offsets[i] += cut
            text = data[:cut].decode(errors="replace")
            if self.bar is not None and not self.bar.disable:
                self.bar.clear()
            stream.write(text)
            stream.flush()
            if self.bar is not None and not self.bar.disable:
                self.bar.refresh()

    def finish(self) -> None:
        self.pump()
        for i, (path, stream) in enumerate(self.files):   # a last line without newline
            try:
                with open(path, "rb") as fh:
                    fh.seek(self.offsets[i])
                    rest = fh.read()
            except OSError:
                continue
            if rest:
                stream.write(rest.decode(errors="replace"))
                stream.flush()


def _tail(path: Path, lines: int = 30) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no log)"


class Simulation:
    """One simulated DTPU build and the settings of the runs on it.

    Args:
      mxu: array geometry (ROWS, COLS) or "8x8"; ROWS must be 8, COLS a power of two.
      waves: record a VCD (``dump.vcd`` in the run directory, which is then kept).
      memory: (LOG_WEIGHT_WORDS, LOG_PARAM_ENTRIES, LOG_ACT_WORDS) for a smaller build; the
        contract's sizes by default, which backend=model uses too (so cycles compare).
      timeout_cycles, timeout_s: bounds of every wait for DONE (simulated cycles, wall seconds).
      start_with_streams: see :mod:`dtpu.rtl.transport` (False: the driver's order literally,
        stalls included).
      progress: tqdm bars on stderr for the build and the run (None: when stderr is a terminal).
      workdir: where run directories go (default: the system's temp directory).
      keep: keep run directories after clean runs.
      top: TOPLEVEL (dtpu_axi, contract 1.2, job by job) or TOPLEVEL_CL (dtpu_cl_top: the
        contract-2.0 top with its vector unit (VEC_EN=1, declared by the transport), its AXI4
        master on the contract's memory model, :class:`~dtpu.rtl.transport.CocotbListTransport`;
        backend=rtl then runs command lists).
      transport: more keyword arguments of the transport (e.g. ``timing`` for the lists one).
    """

    def __init__(self, mxu: tuple[int, int] | str = (8, 8), *, waves: bool = False,
                 memory: tuple[int, int, int] | None = None, timeout_cycles: int | None = None,
                 timeout_s: float | None = None, start_with_streams: bool = True,
                 progress: bool | None = None, workdir: str | os.PathLike | None = None,
                 keep: bool = False, top: str = TOPLEVEL, transport: dict | None = None) -> None:
        if top not in (TOPLEVEL, TOPLEVEL_CL):
            raise ValueError(f"top={top!r}; accepted: {TOPLEVEL}, {TOPLEVEL_CL}")
        self.top = top
        self.config = SimConfig.from_mxu(mxu, waves=waves, memory=memory)
        if top == TOPLEVEL_CL:
            # the vector unit, as the in-process lists top (dtpu.backends.targets): one Verilated
            # dtpu_cl_top serves both transports (build_cl_objects), where two differing only in
            # VEC_EN cost two C++ builds of a minute or two each
            self.config = replace(self.config, vec_en=1)
        self.transport_options: dict[str, Any] = {"start_with_streams": bool(start_with_streams),
                                                  **dict(transport or {})}
        if timeout_cycles is not None:
            if int(timeout_cycles) < 1:
                raise ValueError(f"timeout_cycles={timeout_cycles!r}; accepted: an integer >= 1")
            self.transport_options["timeout_cycles"] = int(timeout_cycles)
        if timeout_s is not None:
            if not float(timeout_s) > 0:
                raise ValueError(f"timeout_s={timeout_s!r}; accepted: seconds > 0")
            self.transport_options["timeout_s"] = float(timeout_s)
        self.progress = progress
        self.workdir = Path(workdir) if workdir is not None else None
        self.keep = keep
        self.build_info: BuildInfo | None = None
        self.last: RunInfo | None = None

    def build(self, force: bool = False) -> BuildInfo:
        """Build (or find in the cache) the Verilated model; later runs reuse it."""
        if self.build_info is None or force:
            self.build_info = build(self.config, force=force, progress=self.progress, top=self.top)
        return self.build_info

    def hw_config(self):
        return self.config.hw_config()

    def run(self, fn: Callable | str, args: tuple = (), kwargs: dict | None = None, *,
            capture: bool = True, invokes: int | None = None) -> Any:
        """Run ``fn(*args, **kwargs)`` inside the simulation and return its result.

        `capture`: stream the callable's stdout/stderr to ours (else they go to sim.log).
        `invokes`: the interpreter invokes the callable will make, for the progress bar's total.
        """
        if session.in_simulation() or os.environ.get(session.RUN_DIR_ENV):
            raise RtlSimulationError("run_in_simulation was called inside a simulation; call the "
                                     "function directly there")
        target = target_of(fn)
        spec = {"target": target, "args": tuple(args), "kwargs": dict(kwargs or {}),
                "hw": self.config.parameters(), "transport": dict(self.transport_options),
                "capture": capture, "cwd": os.getcwd(), "top": self.top}
        try:
            blob = pickle.dumps(spec)
        except Exception as exc:
            raise ValueError(f"the arguments of {target[2]} cannot be pickled for the simulator "
                             f"process: {exc}") from None
        info = self.build()
        ensure_verilator()
        if self.workdir is not None:
            self.workdir.mkdir(parents=True, exist_ok=True)
        run_dir = Path(tempfile.mkdtemp(prefix="dtpu-rtl-run-", dir=self.workdir))
        (run_dir / "spec.pkl").write_bytes(blob)
        run = RunInfo(run_dir, info, log=run_dir / "sim.log")
        self.last = run
        start = time.monotonic()
        failure: list[BaseException] = []

        def simulate() -> None:
            from cocotb_tools.runner import get_runner
            try:
                runner = get_runner("verilator")
                runner.log.setLevel(logging.INFO if log.isEnabledFor(logging.DEBUG) else logging.WARNING)
                runner.test(
                    test_module=ENTRY_MODULE, hdl_toplevel=self.top, hdl_toplevel_lang="verilog",
                    build_dir=info.path, test_dir=run_dir, waves=self.config.waves,
                    extra_env={session.RUN_DIR_ENV: str(run_dir)},
                    results_xml=str(run_dir / "results.xml"), log_file=run_dir / "sim.log")
            except BaseException as exc:  # noqa: BLE001 - the runner sys.exit()s on failures
                failure.append(exc)

        thread = threading.Thread(target=simulate, name="dtpu-rtl-simulator", daemon=True)
        bar = _bar(self.progress, desc=f"simulating {self.top}", unit="job", total=None)
        streamer = _Streamer(run_dir, bar) if capture else None
        try:
            thread.start()
            while thread.is_alive():
                thread.join(0.2)
                self._show(bar, run_dir, invokes, start)
                if streamer is not None:
                    streamer.pump()
        finally:
            if streamer is not None:
                streamer.finish()
            bar.close()
        run.wall_s = time.monotonic() - start
        return self._outcome(run, failure)

    @staticmethod
    def _show(bar, run_dir: Path, invokes: int | None, start: float) -> None:
        state = session.read_progress(run_dir / "progress.json")
        if not state or bar.disable:
            return
        nodes, done = state.get("nodes", 0), state.get("node_invokes", 0)
        if invokes and nodes > 0:
            if bar.total != nodes * invokes:
                bar.reset(total=nodes * invokes)
                bar.unit = "node"
            bar.n = min(done, bar.total)
        else:
            bar.n = state.get("jobs", 0)
        cycles = state.get("cycles", 0)
        elapsed = max(time.monotonic() - start, 1e-9)
        bar.set_postfix_str(f"{state.get('phase', '')}, {state.get('jobs', 0)} jobs, "
                            f"{cycles} cycles ({cycles / elapsed:,.0f}/s)", refresh=False)
        bar.refresh()

    def _outcome(self, run: RunInfo, failure: list[BaseException]) -> Any:
        result_path = run.run_dir / "result.pkl"
        if self.config.waves:
            vcd = run.run_dir / "dump.vcd"
            run.waves = vcd if vcd.exists() else None
        if not result_path.is_file():
            run.kept = True
            why = f" ({failure[0]!r})" if failure else ""
            raise RtlSimulationError(
                f"the simulator ended without a result{why}; run directory {run.run_dir}, end of "
                f"sim.log:\n{_tail(run.run_dir / 'sim.log')}")
        outcome = pickle.loads(result_path.read_bytes())
        meta = outcome[-1]
        run.cycles, run.jobs = meta.get("cycles", 0), meta.get("jobs", 0)
        run.call_s = meta.get("call_s", meta.get("wall_s", 0.0))
        run.kept = self.keep or self.config.waves or outcome[0] != "ok"
        if not run.kept:
            shutil.rmtree(run.run_dir, ignore_errors=True)
        if outcome[0] == "ok":
            return outcome[1]
        exc, text = outcome[1], outcome[2]
        if text:
            exc.__cause__ = RemoteTraceback(text)
        raise exc


def run_in_simulation(fn: Callable | str, args: tuple = (), kwargs: dict | None = None, *,
                      mxu: tuple[int, int] | str = (8, 8), waves: bool = False,
                      **options: Any) -> Any:
    """Run ``fn(*args, **kwargs)`` inside the RTL simulation (backend=rtl available) and return
    its result; `options` are :class:`Simulation`'s (memory, timeout_cycles, progress, ...)."""
    return Simulation(mxu, waves=waves, **options).run(fn, args, kwargs)


__all__ = ["RemoteTraceback", "RtlSimulationError", "RunInfo", "Simulation", "run_in_simulation",
           "target_of"]
